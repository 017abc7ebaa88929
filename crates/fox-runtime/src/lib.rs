//! Loads kernel plans and interprets their CFG on a [`Backend`], owns the string
//! dictionary, loads input data (CSV/TBL), writes results, and measures time and memory.
//!
//! This crate never contains a kernel algorithm: kernels run on a backend. The host-side
//! instructions (`LoadInput`, `Const`, `DictTable`, `StrFn`) are data preparation and
//! dictionary work, which the runtime does itself and uploads.

pub mod alloc;
pub use alloc::meminfo;
pub mod backend;
pub mod database;
pub mod dict;
pub mod graph;
mod interp;
pub mod load;
pub mod outfile;
pub mod output;
pub mod strings;
pub mod tempfiles;
pub mod tpch;

pub use backend::{Backend, BackendError, DevBuf, HostCol, LaunchCtx, MemStats};
pub use database::{DataSource, Database, LoadProgress, NoProgress, Resident};
pub use dict::Dictionary;
pub use interp::{run, run_resident};
pub use outfile::{write_bytes, write_file, OutputFiles, WriteError};
pub use output::{
    format_table, format_table_max, format_value, write_all, write_csv, write_csv_all, write_csv_to, Format,
    OutputTable,
};

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// How to run a plan.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// The directory input files are read from (`.input … from "f"` is relative to it);
    /// the current directory when `None`.
    pub data_dir: Option<PathBuf>,
    /// Wait for each launch to finish before timing it (`Backend::sync`), so per-kernel
    /// times are exact; without it, times of an asynchronous backend only cover launches.
    pub timing: bool,
    /// Loaded data to read the inputs from instead of `data_dir` (see [`Database`]).
    pub database: Option<std::sync::Arc<Database>>,
    /// The memory, in bytes, the run may hold on the backend (its buffers and the
    /// database's resident columns); the backend's own capacity when `None`. Levels of
    /// multi-way joins that would expand beyond it run in rounds (`Kernel::Window`).
    pub memory_limit: Option<u64>,
}

/// The results of a run, in the order the plan emitted them, and its statistics.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub outputs: Vec<OutputTable>,
    pub stats: RunStats,
}

/// Time and memory of a run.
#[derive(Clone, Debug, Default)]
pub struct RunStats {
    /// The backend's name.
    pub backend: String,
    /// One entry per instruction that ran (launches and outputs), in plan order.
    pub instrs: Vec<InstrStat>,
    /// Reading and parsing input files, building the dictionary, and the host-side
    /// preparation of `LoadInput` (its upload is in `upload`).
    pub load: Duration,
    /// Time spent in [`Backend::upload`] (with a [`Backend::sync`] after each when
    /// `RunOptions::timing` is set): input columns and host-side kernels' results.
    pub upload: Duration,
    /// Every other instruction but outputs, less its uploads and downloads.
    pub compute: Duration,
    /// Time spent in [`Backend::download`]: results, and the arguments of host-side
    /// kernels (`StrFn`).
    pub download: Duration,
    /// Ordering and converting results (their download is in `download`).
    pub output: Duration,
    /// Kernel compilation by the backend (part of `compute`).
    pub compile: Duration,
    /// The backend's memory high-water mark, in bytes.
    pub peak_bytes: usize,
    /// The sum of the sizes of every buffer allocated during the run, in bytes.
    pub total_allocated_bytes: usize,
    /// The plan's largest live set, in buffers, from liveness analysis.
    pub planned_peak_buffers: usize,
    /// The largest number of buffer variables that held a value at once during the run.
    pub actual_peak_buffers: usize,
    /// The rounds of multi-round expansions (non-empty windows) the run took.
    pub rounds: u64,
}

/// Time spent in one instruction of the plan over the whole run.
#[derive(Clone, Debug, PartialEq)]
pub struct InstrStat {
    /// Where it is: `block.index`, e.g. `loop_path.3`.
    pub label: String,
    /// The kernel (`SortPerm`, `LoadInput(edge)`) or `Output(path)`.
    pub kernel: String,
    pub calls: u64,
    pub total: Duration,
}

/// Why a run failed. Every message is complete on its own (it names the file and line of
/// bad data, or the plan element of a bad plan).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuntimeError {
    /// Input data that cannot be read or parsed.
    Data { msg: String },
    /// A plan that is inconsistent (a buffer used before it is defined, an index out of
    /// range, an output whose types do not match its buffers).
    Plan(String),
    /// A kernel failed on the backend (division by zero, overflow, out of memory).
    Kernel { at: String, msg: String },
    /// A result file that cannot be written.
    Io { msg: String },
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::Data { msg } | RuntimeError::Io { msg } => f.write_str(msg),
            RuntimeError::Plan(msg) => write!(f, "inconsistent plan: {msg}"),
            RuntimeError::Kernel { at, msg } => write!(f, "{at}: {msg}"),
        }
    }
}

impl std::error::Error for RuntimeError {}

/// The `--timing` report: time per kernel (all its instructions together), the slowest
/// instructions, the load/upload/compute/download/output split, and memory.
pub fn format_stats(stats: &RunStats) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut by_kernel: Vec<(String, u64, Duration)> = Vec::new();
    for s in &stats.instrs {
        match by_kernel.iter_mut().find(|(k, _, _)| *k == s.kernel) {
            Some(e) => {
                e.1 += s.calls;
                e.2 += s.total;
            }
            None => by_kernel.push((s.kernel.clone(), s.calls, s.total)),
        }
    }
    by_kernel.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    let kw = by_kernel.iter().map(|k| k.0.chars().count()).max().unwrap_or(0).max(6);
    let mut out = format!("timing on {}\n", stats.backend);
    out.push_str(&format!("{:<kw$}  {:>7}  {:>12}\n", "kernel", "calls", "total ms"));
    for (k, calls, total) in &by_kernel {
        out.push_str(&format!("{k:<kw$}  {calls:>7}  {:>12.3}\n", ms(*total)));
    }
    let mut rows: Vec<&InstrStat> = stats.instrs.iter().collect();
    rows.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.label.cmp(&b.label)));
    rows.truncate(SLOWEST_SHOWN);
    let lw = rows.iter().map(|r| r.label.chars().count()).max().unwrap_or(0).max(5);
    let kw = rows.iter().map(|r| r.kernel.chars().count()).max().unwrap_or(0).max(6);
    out.push_str(&format!(
        "slowest instructions\n{:<lw$}  {:<kw$}  {:>7}  {:>12}\n",
        "instr", "kernel", "calls", "total ms"
    ));
    for r in rows {
        out.push_str(&format!(
            "{:<lw$}  {:<kw$}  {:>7}  {:>12.3}\n",
            r.label,
            r.kernel,
            r.calls,
            ms(r.total)
        ));
    }
    out.push_str(&format!(
        "load (parse) {:.3} ms, upload {:.3} ms, compute {:.3} ms (of which kernel compilation {:.3} ms), \
         download {:.3} ms, output {:.3} ms\n",
        ms(stats.load),
        ms(stats.upload),
        ms(stats.compute),
        ms(stats.compile),
        ms(stats.download),
        ms(stats.output)
    ));
    out.push_str(&format!(
        "memory: planned peak {} buffers (actual {}), actual peak {} bytes, total allocated {} bytes\n",
        stats.planned_peak_buffers, stats.actual_peak_buffers, stats.peak_bytes, stats.total_allocated_bytes
    ));
    out
}

/// How many instructions the `--timing` report lists.
const SLOWEST_SHOWN: usize = 20;
