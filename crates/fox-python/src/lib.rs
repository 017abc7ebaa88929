//! The extension module `fox._fox` of the Python package `fox` (python/fox/__init__.py
//! wraps it): compiles programs with the drivers' front end (`fox_cli::check_as`,
//! `Checked::plan`), reads input tables given as Arrow streams into the loader of Parquet
//! input (`LoadedInputs::load_given`), plans with their statistics, runs on a backend
//! (`fox_cli::open_backend`) and hands each output back as an Arrow stream
//! (`columnar_output::record_batches`).
//!
//! Contract:
//! - Arrow data crosses the boundary through the Arrow C stream interface (the PyCapsule
//!   protocol, `__arrow_c_stream__`): input tables are read in place, each value converted
//!   once into Fox's columns; output batches are built once from the results and moved to
//!   pyarrow without copies.
//! - The GIL is released while a program is checked, planned, loaded and run, and while
//!   its results are converted; it is held only to read the input streams and to build
//!   the output capsules.
//! - Errors in the program raise `CompileError` (the diagnostics rendered as `foxc`
//!   renders them: `file:line:col`, the source line and a caret); errors in the data or
//!   the run raise `RunError`; bad arguments raise `ValueError`. Nothing panics on user
//!   input.

use arrow_array::ffi_stream::{ArrowArrayStreamReader, FFI_ArrowArrayStream};
use arrow_array::{RecordBatch, RecordBatchIterator, RecordBatchReader};
use arrow_schema::SchemaRef;
use fox_runtime::{GivenTable, LoadedInputs, RunOptions, RuntimeError};
use fox_syntax::sources::Dialect;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError, PyUserWarning, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyInt, PyString};
use std::ffi::CStr;
use std::path::PathBuf;
use std::sync::Arc;

create_exception!(
    fox,
    CompileError,
    PyException,
    "A program that does not compile: the message holds its diagnostics (file:line:col, the source line and a caret)."
);
create_exception!(
    fox,
    RunError,
    PyException,
    "An error in a program's data or its run: an input table that does not fit its declaration, a value out of range, no usable GPU, a failed run."
);

/// The name of a capsule holding an `ArrowArrayStream` (the PyCapsule protocol).
const STREAM: &CStr = c"arrow_array_stream";

/// A compiled program: its relational plan, planned into kernels for each run with the
/// statistics of that run's inputs.
#[pyclass(module = "fox._fox", name = "Program", frozen)]
struct Program {
    compiled: Arc<fox_cli::Compiled>,
}

fn dialect_of(dialect: Option<&str>) -> PyResult<Dialect> {
    match dialect {
        None => Ok(Dialect::ByName),
        Some("logiql") => Ok(Dialect::LogiQL),
        Some("souffle") => Ok(Dialect::Souffle),
        Some(other) => Err(PyValueError::new_err(format!(
            "dialect={other:?} is not a dialect: use \"logiql\" or \"souffle\" (or None: Soufflé for a .dl file, LogiQL otherwise)"
        ))),
    }
}

/// Compiles the program of `text` (named `name` in diagnostics) or of the file `path`.
/// Warnings become Python warnings.
#[pyfunction]
#[pyo3(signature = (text=None, path=None, name="<string>", dialect=None))]
fn compile(
    py: Python<'_>,
    text: Option<String>,
    path: Option<PathBuf>,
    name: &str,
    dialect: Option<&str>,
) -> PyResult<Program> {
    let dialect = dialect_of(dialect)?;
    let name = name.to_string();
    let outcome = py.detach(move || -> Result<(fox_cli::Compiled, String), String> {
        let checked = match (text, path) {
            (Some(text), _) => fox_cli::check_as(&fox_cli::Source { name, text }, dialect),
            (None, Some(path)) => fox_cli::check_files_as(&[path], dialect).map_err(|e| format!("{e:#}"))?,
            (None, None) => return Err("give the program's text or its path".into()),
        };
        let rendered = checked.render(false);
        let name = checked.name();
        match checked
            .plan(&fox_ra::PlanOptions::default(), false)
            .map_err(|e| format!("{e:#}"))?
        {
            Ok(compiled) => Ok((compiled, rendered)),
            Err(n) => Err(format!(
                "{}\n{name}: {n} error{}",
                rendered.trim_end(),
                if n == 1 { "" } else { "s" }
            )),
        }
    });
    match outcome {
        Ok((compiled, warnings)) => {
            if !warnings.trim().is_empty() {
                let category = py.get_type::<PyUserWarning>();
                let message = std::ffi::CString::new(warnings.trim_end().replace('\0', " "))
                    .map_err(|e| PyValueError::new_err(e.to_string()))?;
                // Level 2: the line that called `fox.compile` (level 1 is the package's wrapper).
                PyErr::warn(py, &category, &message, 2)?;
            }
            Ok(Program {
                compiled: Arc::new(compiled),
            })
        }
        Err(message) => Err(CompileError::new_err(message)),
    }
}

/// An input table handed over by Python: the relation, how messages name it, and its
/// data read from its Arrow stream.
struct Given {
    relation: String,
    shown: String,
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
}

/// Reads the Arrow stream of `obj` (any object with `__arrow_c_stream__`, such as a
/// `pyarrow.Table`) without copying its buffers.
fn read_stream(obj: &Bound<'_, PyAny>, shown: &str) -> PyResult<(SchemaRef, Vec<RecordBatch>)> {
    let capsule = obj.call_method0("__arrow_c_stream__")?;
    let capsule = capsule
        .cast::<PyCapsule>()
        .map_err(|_| PyTypeError::new_err(format!("{shown}: __arrow_c_stream__ did not return a PyCapsule")))?;
    let ptr = capsule.pointer_checked(Some(STREAM))?;
    // SAFETY: the capsule named `arrow_array_stream` holds an `ArrowArrayStream` (the
    // PyCapsule protocol); `from_raw` moves it out, leaving a released stream behind that
    // the capsule's destructor leaves alone.
    let reader = unsafe { ArrowArrayStreamReader::from_raw(ptr.as_ptr().cast::<FFI_ArrowArrayStream>()) }
        .map_err(|e| RunError::new_err(format!("{shown}: cannot read its Arrow stream: {e}")))?;
    let schema = reader.schema();
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| RunError::new_err(format!("{shown}: cannot read its Arrow stream: {e}")))?;
    Ok((schema, batches))
}

/// An output handed to Python: its Arrow stream, exported once through
/// `__arrow_c_stream__` (so that `pyarrow.table(obj)` takes its batches without copies).
#[pyclass(module = "fox._fox", name = "ArrowStream")]
struct ArrowStream {
    data: Option<(SchemaRef, Vec<RecordBatch>)>,
}

#[pymethods]
impl ArrowStream {
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &mut self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        // The schema is the results' own; a requested one is a hint the protocol lets a
        // producer ignore.
        let _ = requested_schema;
        let (schema, batches) = self
            .data
            .take()
            .ok_or_else(|| PyValueError::new_err("this result's Arrow stream was exported already"))?;
        let reader = RecordBatchIterator::new(batches.into_iter().map(Ok), schema);
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        // The consumer moves the stream out (leaving it released); dropping what is left
        // releases a stream never consumed.
        PyCapsule::new_with_value(py, stream, STREAM)
    }
}

/// What a run needs besides the program: parsed from `run`'s arguments.
struct RunArgs {
    backend: fox_cli::BackendChoice,
    memory_limit: Option<u64>,
    data_dir: Option<PathBuf>,
}

fn backend_of(backend: &str) -> PyResult<fox_cli::BackendChoice> {
    match backend {
        "auto" => Ok(fox_cli::BackendChoice::Auto),
        "gpu" => Ok(fox_cli::BackendChoice::Gpu),
        "cpu" => Ok(fox_cli::BackendChoice::Cpu),
        other => Err(PyValueError::new_err(format!(
            "backend={other:?} is not a backend: use \"auto\" (the GPU when one is usable, otherwise the CPU), \"gpu\" or \"cpu\""
        ))),
    }
}

fn memory_limit_of(limit: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u64>> {
    let Some(limit) = limit else { return Ok(None) };
    if let Ok(s) = limit.cast::<PyString>() {
        let s = s.to_str()?;
        return fox_cli::parse_memory_size(s)
            .map(Some)
            .map_err(|e| PyValueError::new_err(format!("memory_limit: {e}")));
    }
    if limit.cast::<PyInt>().is_ok() && !limit.is_instance_of::<pyo3::types::PyBool>() {
        return match limit.extract::<u64>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(PyValueError::new_err(format!(
                "memory_limit={limit} is not a memory size: give a positive number of bytes or a string such as \"512M\""
            ))),
        };
    }
    Err(PyTypeError::new_err(
        "memory_limit must be None, a number of bytes or a string such as \"512M\" or \"4G\"",
    ))
}

/// The tables given, read from their streams (with the GIL held).
fn given_of(tables: Vec<(String, String, Bound<'_, PyAny>)>) -> PyResult<Vec<Given>> {
    tables
        .into_iter()
        .map(|(relation, shown, obj)| {
            let (schema, batches) = read_stream(&obj, &shown)?;
            Ok(Given {
                relation,
                shown,
                schema,
                batches,
            })
        })
        .collect()
}

/// Loads the inputs of `program` (the tables given, the other relations from their
/// files under the data directory) and plans the program with their statistics.
fn load_and_plan(
    program: &fox_cli::Compiled,
    given: Vec<Given>,
    data_dir: Option<PathBuf>,
    lower: &fox_kernel::LowerOptions,
) -> Result<(LoadedInputs, fox_phys::PhysPlan, fox_kernel::KernelPlan), String> {
    let wanted = program.inputs().map_err(|e| format!("{e:#}"))?;
    let given: Vec<GivenTable> = given
        .into_iter()
        .map(|g| GivenTable {
            relation: g.relation,
            shown: g.shown,
            schema: g.schema,
            batches: g.batches,
        })
        .collect();
    let dir = data_dir.unwrap_or_default();
    let inputs = program
        .load_inputs(&dir, &wanted, given, None, None)
        .map_err(|e| e.to_string())?;
    let stats = inputs.statistics();
    let (phys, mut plan) = fox_cli::plan_physical(&program.ra, &stats, lower)
        .map_err(|e| format!("{}: cannot lower the plan to kernels: {e}", program.name))?;
    plan.sources = fox_cli::plan_sources(&program.map);
    Ok((inputs, phys, plan))
}

/// The outcome of a run, before the GIL is taken back.
enum Ran {
    Done(Vec<(String, SchemaRef, Vec<RecordBatch>)>),
    NoGpu(String),
    Failed(String),
}

#[pymethods]
impl Program {
    /// The declared input relations: `[(name, [(column, type), …]), …]` in declaration
    /// order, types as the language writes them (`int32`, `decimal(2)`, `date`, …).
    fn _inputs(&self) -> Vec<(String, Vec<(String, String)>)> {
        self.compiled
            .ra
            .relations
            .iter()
            .filter(|r| matches!(r.kind, fox_ra::RelKind::Input { .. }))
            .map(|r| {
                (
                    r.name.clone(),
                    r.columns.iter().map(|c| (c.name.clone(), c.ty.to_string())).collect(),
                )
            })
            .collect()
    }

    /// Runs the program on `tables` (`[(relation, shown, obj)]`, each `obj` an Arrow
    /// stream) and the files of the other inputs: `[(output, stream)]` in output order.
    #[pyo3(signature = (tables, backend="auto", memory_limit=None, data_dir=None))]
    fn _run(
        &self,
        py: Python<'_>,
        tables: Vec<(String, String, Bound<'_, PyAny>)>,
        backend: &str,
        memory_limit: Option<Bound<'_, PyAny>>,
        data_dir: Option<PathBuf>,
    ) -> PyResult<Vec<(String, ArrowStream)>> {
        let args = RunArgs {
            backend: backend_of(backend)?,
            memory_limit: memory_limit_of(memory_limit.as_ref())?,
            data_dir,
        };
        let given = given_of(tables)?;
        let program = self.compiled.clone();
        let ran = py.detach(move || run_detached(&program, given, args));
        match ran {
            Ran::Done(outputs) => Ok(outputs
                .into_iter()
                .map(|(name, schema, batches)| {
                    (
                        name,
                        ArrowStream {
                            data: Some((schema, batches)),
                        },
                    )
                })
                .collect()),
            Ran::NoGpu(e) => Err(RunError::new_err(format!("no usable GPU for backend=\"gpu\": {e}"))),
            Ran::Failed(e) => Err(RunError::new_err(e)),
        }
    }

    /// The plan of the program: its physical plan (each operator with its algorithm and
    /// estimates) and its kernels, planned with the statistics of `tables` and of the
    /// other inputs' files when `tables` or `data_dir` is given, without statistics
    /// otherwise.
    #[pyo3(signature = (tables, data_dir=None))]
    fn _explain(
        &self,
        py: Python<'_>,
        tables: Vec<(String, String, Bound<'_, PyAny>)>,
        data_dir: Option<PathBuf>,
    ) -> PyResult<String> {
        let given = given_of(tables)?;
        let program = self.compiled.clone();
        let text = py.detach(move || -> Result<String, String> {
            let lower = fox_kernel::LowerOptions::default();
            let (phys, plan) = if given.is_empty() && data_dir.is_none() {
                fox_cli::plan_physical(&program.ra, &fox_phys::Statistics::none(), &lower)
                    .map_err(|e| format!("{}: cannot lower the plan to kernels: {e}", program.name))?
            } else {
                let (_, phys, plan) = load_and_plan(&program, given, data_dir, &lower)?;
                (phys, plan)
            };
            Ok(format!(
                "{}\n{}",
                fox_phys::print_physical(&phys),
                fox_kernel::print_kernels(&plan)
            ))
        });
        text.map_err(RunError::new_err)
    }
}

/// Loads, plans and runs (without the GIL).
fn run_detached(program: &fox_cli::Compiled, given: Vec<Given>, args: RunArgs) -> Ran {
    let (mut backend, _) = match fox_cli::open_backend(args.backend) {
        Ok(b) => b,
        Err(e) => return Ran::NoGpu(e),
    };
    let lower = fox_kernel::LowerOptions::default();
    let (inputs, _, plan) = match load_and_plan(program, given, args.data_dir.clone(), &lower) {
        Ok(x) => x,
        Err(e) => return Ran::Failed(e),
    };
    let opts = RunOptions {
        data_dir: args.data_dir,
        timing: false,
        database: None,
        memory_limit: args.memory_limit,
        window_rows: None,
        observer: None,
        cancel: None,
        max_iterations: None,

        stall_timeout: None,
    };
    let result = match fox_runtime::run_loaded(&plan, backend.as_mut(), &opts, inputs) {
        Ok(r) => r,
        Err(e @ RuntimeError::Cancelled) => return Ran::Failed(e.to_string()),
        Err(e) => {
            return Ran::Failed(match e.located(&plan, false) {
                Some(text) => text.trim_end().to_string(),
                None => e.to_string(),
            })
        }
    };
    let mut outputs = Vec::with_capacity(result.outputs.len());
    for t in &result.outputs {
        match fox_runtime::columnar_output::record_batches(t) {
            Ok((schema, batches)) => outputs.push((t.name.clone(), schema, batches)),
            Err(e) => return Ran::Failed(e.to_string()),
        }
    }
    Ran::Done(outputs)
}

#[pymodule]
fn _fox(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    m.add_class::<Program>()?;
    m.add_class::<ArrowStream>()?;
    m.add("CompileError", m.py().get_type::<CompileError>())?;
    m.add("RunError", m.py().get_type::<RunError>())?;
    Ok(())
}
