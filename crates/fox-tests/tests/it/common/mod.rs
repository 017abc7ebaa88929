//! The engine side of the differential tests: plan, lower, run on the CPU backend, and
//! compare with the reference evaluator.

#![allow(dead_code)]

use fox_sema::core::{CoreProgram, Value};
use fox_tests::{data, EvalError, Inputs, RefTable};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A directory under the system temp dir, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("fox-tests-{}-{n}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("cannot create a temporary directory");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes every `.input` relation of `prog` as the file the program reads.
pub fn write_inputs(dir: &Path, prog: &CoreProgram, inputs: &Inputs) -> Result<(), String> {
    for spec in &prog.inputs {
        let name = &prog.preds[spec.pred.0 as usize].name;
        let rows = inputs.get(name).ok_or(format!("no rows for `{name}`"))?;
        let path = dir.join(&spec.file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        std::fs::write(&path, data::file_text(rows, &spec.sep)).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// Reads every `.input` relation of `prog` from `dir` for the reference.
pub fn read_inputs(dir: &Path, prog: &CoreProgram) -> Result<Inputs, String> {
    let mut inputs = Inputs::new();
    for spec in &prog.inputs {
        let info = &prog.preds[spec.pred.0 as usize];
        let path = dir.join(&spec.file);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let rows = data::parse_file(&text, &spec.sep, &info.columns).map_err(|e| format!("{}: {e}", path.display()))?;
        inputs.insert(info.name.clone(), rows);
    }
    Ok(inputs)
}

/// A relation as an output table of the engine.
pub struct Table {
    pub name: String,
    pub columns: Vec<fox_sema::core::Column>,
    pub rows: Vec<Vec<Value>>,
}

/// Plans, lowers and runs `prog` on the CPU backend with the inputs in `data_dir`. The
/// kernel plan goes through its RON form first, as `foxrun plan.ron` would read it.
pub fn run_engine(prog: &CoreProgram, data_dir: &Path) -> Result<Vec<Table>, String> {
    run_engine_with(prog, data_dir, fox_phys::JoinChoice::Auto)
}

/// [`run_engine`] with every equi-join's algorithm forced by `join`.
pub fn run_engine_with(prog: &CoreProgram, data_dir: &Path, join: fox_phys::JoinChoice) -> Result<Vec<Table>, String> {
    let opts = EngineOptions {
        join,
        ..Default::default()
    };
    run_engine_opts(prog, data_dir, &opts).map(|(tables, _)| tables)
}

/// How the engine plans, lowers and runs a program.
#[derive(Clone, Debug, Default)]
pub struct EngineOptions {
    /// The algorithm of every equi-join (`--join`).
    pub join: fox_phys::JoinChoice,
    /// The lowering's options.
    pub lower: fox_kernel::LowerOptions,
    /// The run's memory limit (`--memory-limit`).
    pub memory_limit: Option<u64>,
    /// The most outputs a window of an expansion holds (`RunOptions::window_rows`).
    pub window_rows: Option<u64>,
}

/// The kernel plan of `prog` as the engine runs it under `opts`, reloaded from its RON
/// form as `foxrun plan.ron` would read it.
pub fn engine_plan(prog: &CoreProgram, opts: &EngineOptions) -> Result<fox_kernel::KernelPlan, String> {
    let ra = fox_ra::plan(prog).map_err(|e| format!("planning failed: {e}"))?;
    let popts = fox_phys::Options {
        join: opts.join,
        ..Default::default()
    };
    let phys = fox_phys::run(ra, &fox_phys::Statistics::none(), &popts)
        .map_err(|e| format!("physical planning failed: {e}"))?;
    let kp = fox_kernel::lower_physical_with(&phys, &opts.lower).map_err(|e| format!("lowering failed: {e}"))?;
    fox_kernel::validate(&kp).map_err(|e| format!("the lowered plan is invalid: {e}"))?;
    fox_kernel::from_ron(&fox_kernel::to_ron(&kp)).map_err(|e| format!("the plan does not reload: {e}"))
}

/// [`run_engine`] under `opts`; also returns the windows the run took (`RunStats::rounds`).
pub fn run_engine_opts(prog: &CoreProgram, data_dir: &Path, opts: &EngineOptions) -> Result<(Vec<Table>, u64), String> {
    let kp = engine_plan(prog, opts)?;
    let mut backend = fox_cpu::CpuBackend::new();
    let ropts = fox_runtime::RunOptions {
        data_dir: Some(data_dir.to_path_buf()),
        timing: false,
        memory_limit: opts.memory_limit,
        window_rows: opts.window_rows,
        ..Default::default()
    };
    let result = fox_runtime::run(&kp, &mut backend, &ropts).map_err(|e| format!("run failed: {e}"))?;
    let rounds = result.stats.rounds;
    let tables = result
        .outputs
        .into_iter()
        .map(|t| Table {
            rows: t.rows(),
            name: t.name,
            columns: t.columns,
        })
        .collect();
    Ok((tables, rounds))
}

fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        // Float sums may be accumulated in another order.
        (Value::Float64(x), Value::Float64(y)) => {
            x.to_bits() == y.to_bits() || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0)
        }
        _ => a == b,
    }
}

fn show_rows(rows: &[Vec<Value>]) -> String {
    let mut s = String::new();
    for r in rows {
        let fields: Vec<String> = r.iter().map(data::field).collect();
        s.push_str(&format!("  ({})\n", fields.join(", ")));
    }
    s
}

/// Compares the engine's outputs with the reference's, table by table and row by row.
pub fn compare(reference: &[RefTable], engine: &[Table]) -> Result<(), String> {
    let names = |ts: Vec<&String>| ts.into_iter().cloned().collect::<Vec<_>>();
    let (rn, en) = (
        names(reference.iter().map(|t| &t.name).collect()),
        names(engine.iter().map(|t| &t.name).collect()),
    );
    if rn != en {
        return Err(format!("output relations differ: reference {rn:?}, engine {en:?}"));
    }
    for (r, e) in reference.iter().zip(engine) {
        if r.columns != e.columns {
            return Err(format!(
                "`{}`: columns differ: reference {:?}, engine {:?}",
                r.name, r.columns, e.columns
            ));
        }
        let same = r.rows.len() == e.rows.len()
            && r.rows
                .iter()
                .zip(&e.rows)
                .all(|(a, b)| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_value(x, y)));
        if !same {
            return Err(format!(
                "`{}` differs:\nreference ({} rows):\n{}engine ({} rows):\n{}",
                r.name,
                r.rows.len(),
                show_rows(&r.rows),
                e.rows.len(),
                show_rows(&e.rows)
            ));
        }
    }
    Ok(())
}

/// Runs a program on the reference and on the engine and compares the results. When the
/// reference reports an evaluation error (an overflow, a functional conflict), the
/// engine must fail as well.
pub fn differential(source: &str, inputs: &Inputs) -> Result<(), String> {
    differential_with(source, inputs, fox_phys::JoinChoice::Auto)
}

/// [`differential`] with every equi-join's algorithm forced by `join`.
pub fn differential_with(source: &str, inputs: &Inputs, join: fox_phys::JoinChoice) -> Result<(), String> {
    let opts = EngineOptions {
        join,
        ..Default::default()
    };
    differential_opts(source, inputs, &opts).map(|_| ())
}

/// [`differential`] with the engine run under `opts`; returns the windows the engine's
/// run took (0 where the reference fails and the engine with it).
pub fn differential_opts(source: &str, inputs: &Inputs, opts: &EngineOptions) -> Result<u64, String> {
    let prog = fox_tests::compile(source).map_err(|e| e.to_string())?;
    let reference = fox_tests::evaluate(&prog, inputs);
    let dir = TempDir::new("data");
    write_inputs(&dir.0, &prog, inputs)?;
    let engine = run_engine_opts(&prog, &dir.0, opts);
    match (reference, engine) {
        (Ok(r), Ok((e, rounds))) => compare(&r, &e).map(|()| rounds),
        (Err(EvalError::Compile(d)), _) => Err(d),
        (Err(_), Err(_)) => Ok(0),
        (Err(r), Ok(_)) => Err(format!("the reference fails ({r}) but the engine succeeds")),
        (Ok(_), Err(e)) => Err(format!("the engine fails: {e}")),
    }
}
