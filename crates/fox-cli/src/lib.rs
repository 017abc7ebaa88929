//! The front-end driver shared by the `foxc` binary and the tests: read a source file,
//! parse, check, plan, and render diagnostics. Logic lives in the library crates; this
//! module only sequences them.

pub mod datalog_gen;
pub mod interrupt;
pub mod oom;
pub mod progress;
pub mod repl;
pub mod souffle;
pub mod souffle_input;
pub mod stdout;
pub mod tpch;

use fox_sema::core::CoreProgram;
use fox_syntax::ast::Program;
use fox_syntax::diag::{render, Diagnostic, SourceMap};
use fox_syntax::sources::{load_files_as, load_text_as, Dialect, Loaded};
use std::path::{Path, PathBuf};

/// The `--dialect` of the drivers: the language of a program's files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DialectChoice {
    /// Fox's LogiQL.
    Logiql,
    /// Soufflé's language, with Soufflé's I/O conventions.
    Souffle,
}

impl DialectChoice {
    /// The dialect files are read as: `choice`, or by their names when not given.
    pub fn dialect(choice: Option<DialectChoice>) -> Dialect {
        match choice {
            None => Dialect::ByName,
            Some(DialectChoice::Logiql) => Dialect::LogiQL,
            Some(DialectChoice::Souffle) => Dialect::Souffle,
        }
    }
}

/// The `--join` of the drivers: the algorithm of every equi-join, or `auto` for the cost
/// model's choice (see [`fox_phys::JoinChoice`]). (The variants carry no doc comments,
/// which clap would show as help.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum JoinArg {
    #[default]
    Auto,
    Merge,
    Hash,
    Inl,
    Nl,
}

impl JoinArg {
    /// The `--help` text of `--join`, the same in every driver.
    pub const HELP: &'static str = concat!(
        "Force the algorithm of every equi-join, semi-join and anti-join, for experiments: ",
        "merge (sort-merge), hash (hash table over the smaller side), inl (index nested loop: ",
        "binary search in the sorted side), nl (nested loop: every pair compared); auto lets the ",
        "cost model choose. A band join stays one unless forced to merge or nl, which join on the ",
        "keys (or pair every row) and filter"
    );

    pub fn choice(self) -> fox_phys::JoinChoice {
        match self {
            JoinArg::Auto => fox_phys::JoinChoice::Auto,
            JoinArg::Merge => fox_phys::JoinChoice::Merge,
            JoinArg::Hash => fox_phys::JoinChoice::Hash,
            JoinArg::Inl => fox_phys::JoinChoice::IndexNestedLoop,
            JoinArg::Nl => fox_phys::JoinChoice::NestedLoop,
        }
    }
}

/// Where kernels run (`--backend`): `Auto` is the GPU when one is usable, otherwise the
/// CPU. (The variants carry no doc comments, which clap would show as help.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    Auto,
    Gpu,
    Cpu,
}

/// The backend `choice` names, and for `Auto` a line that tells which one it is and
/// why: `running on the GPU NAME`, or `no usable GPU (REASON); running on the CPU`. For
/// `Gpu` when no GPU is usable, `Err` holds the reason.
pub fn open_backend(choice: BackendChoice) -> Result<(Box<dyn fox_runtime::Backend>, Option<String>), String> {
    Ok(match choice {
        BackendChoice::Cpu => (Box::new(fox_cpu::CpuBackend::new()), None),
        BackendChoice::Gpu => match fox_cuda::CudaBackend::new() {
            Ok(gpu) => (Box::new(gpu), None),
            Err(e) => return Err(e.to_string()),
        },
        BackendChoice::Auto => match fox_cuda::CudaBackend::new() {
            Ok(gpu) => {
                let line = format!("running on the {}", fox_runtime::Backend::name(&gpu));
                (Box::new(gpu), Some(line))
            }
            Err(e) => (
                Box::new(fox_cpu::CpuBackend::new()),
                Some(format!("no usable GPU ({e}); running on the CPU")),
            ),
        },
    })
}

/// `--devices`: how many devices a run spreads over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Devices {
    /// This many (at least 1).
    Count(usize),
    /// Every visible GPU on the GPU backend; one device on the CPU backend.
    All,
}

/// Reads `--devices`: a number of at least 1, or `all`.
pub fn parse_devices(s: &str) -> Result<Devices, String> {
    match s {
        "all" => Ok(Devices::All),
        _ => match s.parse::<usize>() {
            Ok(0) => Err("a run needs at least 1 device".to_string()),
            Ok(n) => Ok(Devices::Count(n)),
            Err(_) => Err(format!("`{s}` is not a number of devices or `all`")),
        },
    }
}

/// The backends of a run over `devices` on the backend `choice`, with the line
/// [`open_backend`] tells for `Auto`. On the GPU, one backend per GPU from ordinal 0 (`All`:
/// every visible GPU; more than there are is an error naming how many there are); on the
/// CPU, that many simulated devices, each a CPU backend of its own (`All`: one). `Auto`
/// runs on the CPU only when no GPU is usable. `Err` holds the whole message.
#[allow(clippy::type_complexity)]
pub fn open_backends(
    choice: BackendChoice,
    devices: Devices,
) -> Result<(Vec<Box<dyn fox_runtime::Backend + Send>>, Option<String>), String> {
    // Simulated devices are linked, so exchanges take the path of linked GPUs.
    let cpus = |n: usize| -> Vec<Box<dyn fox_runtime::Backend + Send>> {
        let backends = if n == 1 {
            vec![fox_cpu::CpuBackend::new()]
        } else {
            fox_cpu::CpuBackend::linked(n)
        };
        backends
            .into_iter()
            .map(|b| Box::new(b) as Box<dyn fox_runtime::Backend + Send>)
            .collect()
    };
    let on_cpu = match devices {
        Devices::Count(n) => n,
        Devices::All => 1,
    };
    if choice == BackendChoice::Cpu {
        return Ok((cpus(on_cpu), None));
    }
    let count = match fox_cuda::device_count() {
        Ok(0) => Err("no CUDA device".to_string()),
        Ok(c) => Ok(c),
        Err(e) => Err(e.to_string()),
    };
    let count = match (count, choice) {
        (Ok(c), _) => c,
        (Err(e), BackendChoice::Gpu) => return Err(format!("no usable GPU for --backend gpu: {e}")),
        (Err(e), _) => return Ok((cpus(on_cpu), Some(format!("no usable GPU ({e}); running on the CPU")))),
    };
    let n = match devices {
        Devices::Count(n) if n > count => {
            return Err(format!(
                "--devices {n}: this machine has {}",
                if count == 1 {
                    "1 GPU".to_string()
                } else {
                    format!("{count} GPUs")
                }
            ))
        }
        Devices::Count(n) => n,
        Devices::All => count,
    };
    let mut gpus: Vec<fox_cuda::CudaBackend> = Vec::with_capacity(n);
    for d in 0..n {
        match fox_cuda::CudaBackend::on(d) {
            Ok(g) => gpus.push(g),
            Err(e) if d == 0 && choice == BackendChoice::Auto => {
                return Ok((cpus(on_cpu), Some(format!("no usable GPU ({e}); running on the CPU"))));
            }
            Err(e) if d == 0 => return Err(format!("no usable GPU for --backend gpu: {e}")),
            Err(e) => return Err(format!("cannot open GPU {d}: {e}")),
        }
    }
    if n > 1 {
        fox_cuda::link_devices(&mut gpus).map_err(|e| format!("--devices {n}: {e}"))?;
    }
    let line = (choice == BackendChoice::Auto).then(|| match n {
        1 => format!("running on the {}", fox_runtime::Backend::name(&gpus[0])),
        _ => format!(
            "running on {n} GPUs, the first the {}",
            fox_runtime::Backend::name(&gpus[0])
        ),
    });
    let gpus = gpus
        .into_iter()
        .map(|g| Box::new(g) as Box<dyn fox_runtime::Backend + Send>)
        .collect();
    Ok((gpus, line))
}

/// A source file read from disk.
pub struct Source {
    /// The name diagnostics show: the path as the user gave it.
    pub name: String,
    pub text: String,
}

impl Source {
    pub fn read(path: &Path) -> anyhow::Result<Source> {
        let bytes = std::fs::read(path).map_err(|e| anyhow::anyhow!("cannot read `{}`: {e}", path.display()))?;
        let text = String::from_utf8(bytes)
            .map_err(|e| anyhow::anyhow!("{}", fox_syntax::sources::not_utf8(&path.display().to_string(), &e)))?;
        Ok(Source {
            name: path.display().to_string(),
            text,
        })
    }

    pub fn render(&self, diags: &[Diagnostic], color: bool) -> String {
        render(&self.name, &self.text, diags, color)
    }
}

/// The result of running the front end on a program.
pub struct Checked {
    /// The program's items, from all its files (`.include`s resolved).
    pub ast: Program,
    /// `Some` when there were no errors.
    pub core: Option<CoreProgram>,
    /// Syntax and `.include` errors, or (when there are none) semantic errors and
    /// warnings; spans in `map`.
    pub diagnostics: Vec<Diagnostic>,
    /// The files the program was read from.
    pub map: SourceMap,
    /// The names of the files given (not the included ones).
    roots: Vec<String>,
    /// `Some` for a Soufflé program: how its results are written.
    pub souffle: Option<fox_syntax::souffle::SouffleIo>,
}

impl Checked {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    pub fn error_count(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.is_error()).count()
    }

    /// The diagnostics, each against the file its spans lie in.
    pub fn render(&self, color: bool) -> String {
        self.map.render(&self.diagnostics, color)
    }

    /// The names of the files given (not the included ones), for summary lines.
    pub fn name(&self) -> String {
        self.roots.join(", ")
    }
}

/// Parses and checks a source (its `.include`s read relative to the folder of its name).
/// Semantic checks run only when the syntax is clean, so a clause that failed to parse
/// does not cause follow-on errors about what it declared.
pub fn check(source: &Source) -> Checked {
    check_as(source, Dialect::ByName)
}

/// [`check`] reading the source as `dialect`.
pub fn check_as(source: &Source, dialect: Dialect) -> Checked {
    match load_text_as(&source.name, &source.text, dialect) {
        Ok(loaded) => check_loaded(loaded),
        Err(e) => {
            let mut map = SourceMap::new();
            map.add(source.name.clone(), String::new());
            Checked {
                ast: Program { items: Vec::new() },
                core: None,
                diagnostics: vec![Diagnostic::error(e.to_string(), Default::default())],
                map,
                roots: vec![source.name.clone()],
                souffle: None,
            }
        }
    }
}

/// Reads the files of one program (in order, with the files they `.include`), parses and
/// checks it. A file that cannot be read is an error; errors in the program are
/// diagnostics.
pub fn check_files(paths: &[PathBuf]) -> anyhow::Result<Checked> {
    check_files_as(paths, Dialect::ByName)
}

/// [`check_files`] reading the files as `dialect`.
pub fn check_files_as(paths: &[PathBuf], dialect: Dialect) -> anyhow::Result<Checked> {
    let loaded = load_files_as(paths, dialect)?;
    Ok(check_loaded(loaded))
}

fn check_loaded(loaded: Loaded) -> Checked {
    let roots = loaded
        .map
        .files()
        .iter()
        .zip(&loaded.included)
        .filter(|(_, inc)| !**inc)
        .map(|(f, _)| f.name.clone())
        .collect();
    let library = loaded.included_spans();
    let Loaded {
        map,
        program,
        mut diagnostics,
        souffle,
        ..
    } = loaded;
    if diagnostics.iter().any(Diagnostic::is_error) {
        return Checked {
            ast: program,
            core: None,
            diagnostics,
            map,
            roots,
            souffle,
        };
    }
    let options = fox_sema::Options { library };
    let (core, sema_diags) = fox_sema::check_with(&program, &options);
    diagnostics.extend(sema_diags);
    Checked {
        ast: program,
        core,
        diagnostics,
        map,
        roots,
        souffle,
    }
}

/// The kernel plan of `path`: loaded from RON (`.ron`), or compiled from a program. `None`
/// when the program has errors (its diagnostics are printed to standard error, prefixed
/// with `tool`).
pub fn load_plan(path: &Path, color: bool, tool: &str) -> anyhow::Result<Option<fox_kernel::KernelPlan>> {
    load_plan_with(path, color, tool, &fox_ra::PlanOptions::default())
}

/// [`load_plan`] planning a program with `options`.
pub fn load_plan_with(
    path: &Path,
    color: bool,
    tool: &str,
    options: &fox_ra::PlanOptions,
) -> anyhow::Result<Option<fox_kernel::KernelPlan>> {
    load_plan_files(&[path.to_path_buf()], color, tool, options)
}

/// The kernel plan of one `.ron` file, or of the program made of the `.logic` files
/// `paths` (with the files they include), planned with `options`. `None` when the program
/// has errors (its diagnostics are printed to standard error, prefixed with `tool`).
pub fn load_plan_files(
    paths: &[PathBuf],
    color: bool,
    tool: &str,
    options: &fox_ra::PlanOptions,
) -> anyhow::Result<Option<fox_kernel::KernelPlan>> {
    let plans = paths
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "ron"))
        .count();
    if plans > 0 {
        let [path] = paths else {
            anyhow::bail!("a compiled plan (.ron) is run on its own, not with other files");
        };
        let source = Source::read(path)?;
        let plan = fox_kernel::from_ron(&source.text).map_err(|e| match e {
            // `plan.ron:LINE:COL: …`, as compile errors are located.
            fox_kernel::LoadError::Syntax { .. } => anyhow::anyhow!("{}:{e}", source.name),
            _ => anyhow::anyhow!("{}: {e}", source.name),
        })?;
        return Ok(Some(plan));
    }
    let Some(program) = compile_program(paths, color, tool, options)? else {
        return Ok(None);
    };
    program
        .kernel_plan(&fox_phys::Statistics::none(), &fox_kernel::LowerOptions::default())
        .map(Some)
}

/// A program planned to its relational plan, with the files it was read from.
pub struct Compiled {
    pub ra: fox_ra::RaPlan,
    /// The program's files: the sources of its kernel plan.
    pub map: SourceMap,
    /// The names of the files given, for messages.
    pub name: String,
    /// `Some` for a Soufflé program: how its results are written.
    pub souffle: Option<fox_syntax::souffle::SouffleIo>,
    /// The join algorithm forced on the physical plan (`--join`).
    pub join: fox_phys::JoinChoice,
    /// Physical passes left out (`--disable-pass`).
    pub disabled_passes: Vec<String>,
    /// The devices the plan runs over (`--devices`; 1 or more).
    pub devices: usize,
}

impl Compiled {
    /// The kernel plan, planned with the statistics of the data (`Statistics::none()`
    /// without data) and lowered with `options`, holding the program's files as its
    /// sources.
    pub fn kernel_plan(
        &self,
        stats: &fox_phys::Statistics,
        options: &fox_kernel::LowerOptions,
    ) -> anyhow::Result<fox_kernel::KernelPlan> {
        let mut plan = plan_physical_opts(&self.ra, stats, options, &self.phys_options())
            .map(|(_, kernels)| kernels)
            .map_err(|e| anyhow::anyhow!("{}: cannot lower the plan to kernels: {e}", self.name))?;
        plan.sources = plan_sources(&self.map);
        Ok(plan)
    }

    /// The input relations the plan reads, each with the columns it reads, in the order
    /// of the kernel plan's inputs: those its kernel plan reads (the key columns
    /// included), made without statistics. Statistics change no column a plan reads (the
    /// physical passes choose algorithms, not columns; tested on every program), so a
    /// program planned with the statistics of what this loads reads nothing else.
    pub fn inputs(&self) -> anyhow::Result<Vec<(fox_kernel::InputRel, Vec<bool>)>> {
        let plan = plan_physical_opts(
            &self.ra,
            &fox_phys::Statistics::none(),
            &fox_kernel::LowerOptions::default(),
            &self.phys_options(),
        )
        .map(|(_, kernels)| kernels)
        .map_err(|e| anyhow::anyhow!("{}: cannot lower the plan to kernels: {e}", self.name))?;
        let used = fox_runtime::database::used_input_columns(&plan);
        Ok(plan.inputs.into_iter().zip(used).collect())
    }

    /// The options of the physical passes: the forced join algorithm and the passes left
    /// out.
    pub fn phys_options(&self) -> fox_phys::Options {
        fox_phys::Options {
            join: self.join,
            disabled: self.disabled_passes.clone(),
            devices: self.devices,
            ..fox_phys::Options::default()
        }
    }

    /// Reads the relations of `wanted` (from [`Compiled::inputs`]): those `given` holds a
    /// table for from it, the inputs of a Soufflé program's relations with record or ADT
    /// attributes by their shape ([`souffle_input`]), the others from their files under
    /// `data_dir`.
    pub fn load_inputs(
        &self,
        data_dir: &std::path::Path,
        wanted: &[(fox_kernel::InputRel, Vec<bool>)],
        mut given: Vec<fox_runtime::GivenTable>,
        observer: Option<&dyn fox_runtime::RunObserver>,
        cancel: Option<&fox_runtime::CancelToken>,
    ) -> Result<fox_runtime::LoadedInputs, fox_runtime::RuntimeError> {
        if let Some(io) = &self.souffle {
            for t in souffle_input::shaped_inputs(io, wanted, data_dir)? {
                if !given.iter().any(|g| g.relation == t.relation) {
                    given.push(t);
                }
            }
        }
        fox_runtime::LoadedInputs::load_given(data_dir, wanted, &given, observer, cancel)
    }
}

/// The relational plan of the program made of the `.logic` files `paths` (with the files
/// they include), planned with `options`. `None` when the program has errors (its
/// diagnostics are printed to standard error, prefixed with `tool`).
pub fn compile_program(
    paths: &[PathBuf],
    color: bool,
    tool: &str,
    options: &fox_ra::PlanOptions,
) -> anyhow::Result<Option<Compiled>> {
    compile_program_as(paths, Dialect::ByName, color, tool, options)
}

/// [`compile_program`] reading the files as `dialect`.
pub fn compile_program_as(
    paths: &[PathBuf],
    dialect: Dialect,
    color: bool,
    tool: &str,
    options: &fox_ra::PlanOptions,
) -> anyhow::Result<Option<Compiled>> {
    let checked = check_files_as(paths, dialect)?;
    if !checked.diagnostics.is_empty() {
        eprint!("{}", checked.render(color));
    }
    let name = checked.name();
    match checked.plan(options, color)? {
        Ok(compiled) => Ok(Some(compiled)),
        Err(n) => {
            eprintln!("{tool}: {name}: {} error{}", n, if n == 1 { "" } else { "s" });
            Ok(None)
        }
    }
}

impl Checked {
    /// The relational plan of the checked program, planned with `options`: `Ok(Err(n))`
    /// when the program has `n` errors (its diagnostics, left to the caller to show), an
    /// error when the planner refuses it (rendered at its place in the program, in colour
    /// with `color`).
    pub fn plan(self, options: &fox_ra::PlanOptions, color: bool) -> anyhow::Result<Result<Compiled, usize>> {
        let errors = self.error_count();
        let name = self.name();
        let Some(core) = self.core.filter(|_| errors == 0) else {
            return Ok(Err(errors.max(1)));
        };
        let ra = fox_ra::plan_with(&core, options).map_err(|e| plan_error(&self.map, &name, &e, color))?;
        Ok(Ok(Compiled {
            ra,
            map: self.map,
            name,
            souffle: self.souffle,
            join: fox_phys::JoinChoice::Auto,
            disabled_passes: Vec::new(),
            devices: 1,
        }))
    }
}

/// The kernel plan of a relational plan, its physical choices made by every physical pass
/// with `stats`, the statistics of the data (`Statistics::none()` when there is none),
/// lowered with `options`: the drivers make their kernel plans here (`foxc compile` and
/// the REPL, which show the physical plan, run the passes themselves).
pub fn plan_kernels(
    ra: &fox_ra::RaPlan,
    stats: &fox_phys::Statistics,
    options: &fox_kernel::LowerOptions,
) -> Result<fox_kernel::KernelPlan, fox_kernel::LowerError> {
    plan_physical(ra, stats, options).map(|(_, kernels)| kernels)
}

/// [`plan_kernels`] with every equi-join's algorithm forced by `join` (`--join`).
pub fn plan_kernels_with(
    ra: &fox_ra::RaPlan,
    stats: &fox_phys::Statistics,
    options: &fox_kernel::LowerOptions,
    join: fox_phys::JoinChoice,
) -> Result<fox_kernel::KernelPlan, fox_kernel::LowerError> {
    plan_physical_with(ra, stats, options, join).map(|(_, kernels)| kernels)
}

/// [`plan_kernels`], returning the physical plan too (for showing it).
pub fn plan_physical(
    ra: &fox_ra::RaPlan,
    stats: &fox_phys::Statistics,
    options: &fox_kernel::LowerOptions,
) -> Result<(fox_phys::PhysPlan, fox_kernel::KernelPlan), fox_kernel::LowerError> {
    plan_physical_with(ra, stats, options, fox_phys::JoinChoice::Auto)
}

/// [`plan_physical`] with every equi-join's algorithm forced by `join` (`--join`).
pub fn plan_physical_with(
    ra: &fox_ra::RaPlan,
    stats: &fox_phys::Statistics,
    options: &fox_kernel::LowerOptions,
    join: fox_phys::JoinChoice,
) -> Result<(fox_phys::PhysPlan, fox_kernel::KernelPlan), fox_kernel::LowerError> {
    let opts = fox_phys::Options {
        join,
        ..fox_phys::Options::default()
    };
    plan_physical_opts(ra, stats, options, &opts)
}

/// [`plan_physical`] with the physical passes run with `passes` (a forced join
/// algorithm, passes left out).
pub fn plan_physical_opts(
    ra: &fox_ra::RaPlan,
    stats: &fox_phys::Statistics,
    options: &fox_kernel::LowerOptions,
    passes: &fox_phys::Options,
) -> Result<(fox_phys::PhysPlan, fox_kernel::KernelPlan), fox_kernel::LowerError> {
    fox_ra::validate(ra).map_err(|e| fox_kernel::LowerError::Invalid(e.to_string()))?;
    let phys = fox_phys::run(ra.clone(), stats, passes).map_err(|e| fox_kernel::LowerError::Invalid(e.to_string()))?;
    let kernels = fox_kernel::lower_physical_with(&phys, options)?;
    Ok((phys, kernels))
}

/// The error of a program the planner refuses: a program error is rendered at its place
/// in the program's files (as `check`'s diagnostics are), anything else is named after
/// the program (`name`).
pub fn plan_error(map: &SourceMap, name: &str, e: &fox_ra::PlanError, color: bool) -> anyhow::Error {
    match e.diagnostic() {
        Some(d) => anyhow::anyhow!(
            "cannot plan the program:\n{}",
            map.render(std::slice::from_ref(d), color).trim_end()
        ),
        None => anyhow::anyhow!("{name}: cannot plan the program: {e}"),
    }
}

/// The files of a program as the sources of its kernel plan (kept in the plan so that
/// run-time errors can show the rule they come from): the same space of offsets as the
/// spans of the plan.
pub fn plan_sources(map: &SourceMap) -> Vec<fox_kernel::SourceFile> {
    map.files()
        .iter()
        .map(|f| fox_kernel::SourceFile {
            name: f.name.clone(),
            start: f.base,
            text: f.text.clone(),
        })
        .collect()
}

/// A TPC-H scale factor from the command line (`1`, `0.01`, `10`).
pub fn parse_scale_factor(s: &str) -> Result<f64, String> {
    let sf: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a scale factor (a number such as 1, 0.1 or 10)"))?;
    fox_runtime::tpch::check_scale(sf)?;
    Ok(sf)
}

/// A memory size for the command line: bytes, or a number with a binary suffix K, M, G or
/// T (`512M`, `1.5G`; `KiB`, `MiB`, … and `KB`, `MB`, … mean the same).
pub fn parse_memory_size(s: &str) -> Result<u64, String> {
    let bad = || format!("`{s}` is not a memory size (bytes, or a number with K, M, G or T, such as 512M or 4G)");
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim().to_ascii_uppercase();
    let unit = unit.trim_end_matches("IB").trim_end_matches('B');
    let mult: u64 = match unit {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return Err(bad()),
    };
    let x: f64 = num.parse().map_err(|_| bad())?;
    let bytes = x * mult as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes as u64)
}

/// Progress bars on standard error for loading and generating data (drawn only when
/// standard error is a terminal).
pub struct Bars {
    bar: std::sync::Mutex<Option<indicatif::ProgressBar>>,
    enabled: bool,
}

impl Bars {
    pub fn new() -> Bars {
        Bars::enabled(true)
    }

    /// Bars that draw nothing unless `enabled` (see [`progress::wanted`]).
    pub fn enabled(enabled: bool) -> Bars {
        Bars {
            bar: std::sync::Mutex::new(None),
            enabled,
        }
    }
}

impl Default for Bars {
    fn default() -> Self {
        Bars::new()
    }
}

impl fox_runtime::LoadProgress for Bars {
    fn start(&self, table: &str, rows: u64) {
        if !self.enabled {
            return;
        }
        let bar = if rows > 0 {
            indicatif::ProgressBar::new(rows).with_style(
                indicatif::ProgressStyle::with_template(
                    "{prefix:>10} [{bar:30}] {human_pos}/{human_len} rows {per_sec} {eta}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
            )
        } else {
            indicatif::ProgressBar::new_spinner()
        };
        bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        bar.set_prefix(table.to_string());
        if let Ok(mut b) = self.bar.lock() {
            *b = Some(bar);
        }
    }

    fn advance(&self, rows: u64) {
        if let Ok(b) = self.bar.lock() {
            if let Some(b) = b.as_ref() {
                b.inc(rows);
            }
        }
    }

    fn finish(&self) {
        if let Ok(mut b) = self.bar.lock() {
            if let Some(b) = b.take() {
                b.finish_and_clear();
            }
        }
    }
}
