//! Loads kernel plans and interprets their CFG on a [`Backend`], owns the string
//! dictionary, loads input data (CSV/TBL), writes results, and measures time and memory.
//!
//! This crate never contains a kernel algorithm: kernels run on a backend. The host-side
//! instructions (`LoadInput`, `Const`, `DictTable`, `StrFn`) are data preparation and
//! dictionary work, which the runtime does itself and uploads. The runtime checks every
//! launch's arguments against the kernel's contract ([`check_launch`]) and runs the
//! expansion of a composite kernel a backend declines ([`launch_kernel`]).

pub mod alloc;
pub use alloc::meminfo;
pub mod backend;
pub mod cancel;
pub mod columnar_output;
mod composite;
pub mod database;
pub mod dict;
pub mod graph;
pub mod inputs;
mod interp;
pub mod load;
pub mod outfile;
pub mod output;
pub mod parquet_input;
mod routing;
mod spmd;
pub mod stats;
pub mod stored;
pub mod strings;
pub mod tempfiles;
mod tier;
pub mod tpch;

pub use backend::{Backend, BackendError, DevBuf, HostCol, LaunchCtx, Meet, MemStats};
pub use cancel::CancelToken;
pub use composite::launch_kernel;
pub use database::{CancellableProgress, DataSource, Database, LoadProgress, NoProgress, Resident};
pub use dict::Dictionary;
pub use inputs::{GivenTable, LoadedInputs};
pub use interp::{check_launch, run, run_loaded, run_resident};
pub use outfile::{write_bytes, write_file, OutputFiles, WriteError};
pub use output::{
    format_table, format_table_max, format_value, write_all, write_csv, write_csv_all, write_csv_to, Format,
    OutputTable,
};
pub use spmd::{
    box_count, name_devices, route_host, run_devices, run_devices_resident, seconds, stall_limit, DEFAULT_STALL_LIMIT,
    STALL_LIMIT_VAR,
};

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// The most outputs a window of an expansion holds (`RunOptions::window_rows`): a
/// round's rows are addressed by u32 row indices (its expansion's `parent` and `pos`, the
/// permutation that sorts them).
pub const MAX_WINDOW_ROWS: u64 = u32::MAX as u64;

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
    /// The most outputs a window of an expansion run in rounds may hold (`Kernel::Window`,
    /// and `Kernel::Claim` sized by memory), besides what fits the memory: read as at least
    /// 1 and at most, and by default, [`MAX_WINDOW_ROWS`], where a round's rows stay
    /// addressed by u32 row indices. A smaller cap makes more rounds of the same outputs:
    /// the results are those of the default.
    pub window_rows: Option<u64>,
    /// Told how the run goes (inputs read, loop iterations, outputs), for progress
    /// displays; nothing is told when `None`.
    pub observer: Option<std::sync::Arc<dyn RunObserver>>,
    /// Stops the run when set (see [`cancel`]): it then returns [`RuntimeError::Cancelled`].
    pub cancel: Option<CancelToken>,
    /// The most iterations a semi-naive loop may run: one that would start another after
    /// this many stops the run with a [`RuntimeError::Program`] naming the loop (a
    /// recursion through arithmetic can derive new values forever). No limit when `None`.
    pub max_iterations: Option<u64>,
    /// In a run over several devices, how long every device may go without progress (an
    /// instruction finished, a collective reached) while one waits for the others at a
    /// collective before the run fails naming the devices that did not come (see
    /// [`spmd`]); when `None`, `FOX_STALL_TIMEOUT_S` (seconds) or else
    /// [`DEFAULT_STALL_LIMIT`]. A run on one device waits for nothing and ignores it.
    pub stall_timeout: Option<Duration>,
}

/// What a run reports to its [`RunObserver`] as it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunEvent<'a> {
    /// The input `input` is about to be read from its file (runs without a database).
    Loading { input: &'a str },
    /// The test of the loop that ends block `block` (its label) was evaluated:
    /// `iterations` times of the loop's body have run since the loop was entered, and
    /// `rows` is the total length of the buffers the test reads: for a semi-naive loop,
    /// the rows of the delta the next iteration starts from (0 when the loop ends).
    Iteration { block: &'a str, iterations: u64, rows: u64 },
    /// The output `name` is being downloaded, ordered and converted.
    Output { name: &'a str },
}

/// Receives a run's [`RunEvent`]s, on the thread that runs the plan. It must be cheap: it
/// is called between instructions.
pub trait RunObserver: Send + Sync + fmt::Debug {
    fn event(&self, event: &RunEvent<'_>);
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
    /// The whole run, from its start until every buffer was released: `load`, `upload`,
    /// `compute`, `download` and `output`, plus what lies between them (moves, frees,
    /// loop tests, the final release), which `--timing` prints as `other`.
    pub total: Duration,
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
    /// The bytes the run copied from the host to the device ([`MemStats::bytes_in`]: what
    /// crossed the bus on a GPU; a packed column counts its packed rows where the device
    /// widens them). Summed over the devices of a run over several.
    pub bytes_in: u64,
    /// The plan's largest live set, in buffers, from liveness analysis.
    pub planned_peak_buffers: usize,
    /// The largest number of buffer variables that held a value at once during the run.
    pub actual_peak_buffers: usize,
    /// The rounds of multi-round expansions (non-empty windows) the run took.
    pub rounds: u64,
    /// The boxes of multi-way joins the run's devices claimed (`Kernel::Claim`), each
    /// taken by one device.
    pub boxes: u64,
    /// In a run over several devices that claimed boxes, the boxes each device took (in
    /// device order; they add up to `boxes`); empty otherwise. Which device takes which
    /// box depends on timing.
    pub device_boxes: Vec<u64>,
    /// The host tier: buffers moved off the device to make room within the run's budget.
    pub tier: TierStats,
    /// Collecting the statistics of the inputs before the plan was made, when its driver
    /// did (not part of `total`).
    pub statistics: Option<Duration>,
    /// The rows of each operator the plan observes ([`fox_kernel::KernelPlan::observed`],
    /// in its order), against the planner's estimate.
    pub rows: Vec<RowsStat>,
    /// The rows moved between the devices of a run over several ([`run_devices`]).
    pub exchange: ExchangeStats,
    /// In a run over several devices, each device's memory high-water mark in bytes (in
    /// device order; `peak_bytes` is the largest); empty on one device.
    pub device_peaks: Vec<usize>,
    /// The instructions that ran in pieces at least once, in plan order (the totals are
    /// in `tier`).
    pub pieces: Vec<PiecesStat>,
    /// In a run over several devices, each device's own `instrs` (in device order;
    /// `instrs` holds the slowest device's time of each instruction); empty on one
    /// device. [`format_device_kernels`] compares them by kernel.
    pub device_instrs: Vec<Vec<InstrStat>>,
}

/// An instruction whose operator did not fit the device budget whole and ran in pieces.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PiecesStat {
    /// Where it is (`block.index`) and its kernel, as in [`InstrStat`].
    pub label: String,
    pub kernel: String,
    /// Its launches that ran in pieces, and their pieces.
    pub launches: u64,
    pub pieces: u64,
}

/// The exchanges of a run over several devices (`Kernel::Exchange`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExchangeStats {
    /// Exchanges run (each counts once, however many devices took part).
    pub exchanges: u64,
    /// Rows that left their device, over all devices (a row a broadcast sends to `k`
    /// other devices counts `k` times).
    pub rows: u64,
    /// The bytes of those rows.
    pub bytes: u64,
    /// Outputs: device 0's wait for every device's downloaded part (the slowest device's
    /// download, beyond device 0's own, which is in `download`).
    pub output_wait: Duration,
    /// Outputs: joining the devices' parts into one table's columns in the output's
    /// order (merged where each part is in order, else put one after the other and
    /// sorted); part of `output`.
    pub output_join: Duration,
    /// The routings (every row's device) of inputs loaded hashed over the devices that
    /// the run computed: one per input and key columns however many devices load it, none
    /// for one a resident database kept from an earlier run.
    pub routings: u64,
}

/// The host tier of a run: what left the device for host memory to make room within the
/// run's device budget, and what came back before an instruction read it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TierStats {
    /// Buffers moved to the host tier.
    pub evictions: u64,
    /// Bytes moved to the host tier.
    pub bytes_to_host: u64,
    /// Buffers brought back to the device.
    pub restores: u64,
    /// Bytes brought back to the device.
    pub bytes_to_device: u64,
    /// The most bytes the host tier held at once.
    pub host_peak_bytes: u64,
    /// Launches that did not fit the device budget whole and ran in pieces (chunks of
    /// rows, runs of a sort, pieces of a join, search or aggregation), and their pieces.
    pub operators_in_pieces: u64,
    pub pieces: u64,
    /// A database's resident columns given back to make room (to keep the resident
    /// bound, or when the device ran short; no buffer of the run held them; the next run
    /// that reads them uploads them again), and their bytes.
    pub resident_released: u64,
    pub resident_released_bytes: u64,
    /// Database columns (all their rows, or a device's slice) read where the database
    /// holds them instead of on the device, under a memory limit: left there at
    /// `LoadInput` when they did not fit beside the run's buffers, or their device copies
    /// dropped to make room (unchanged since they were loaded, they need no download).
    /// No byte of them is copied to the host tier (nor counted in `bytes_to_host`);
    /// bringing them to the device counts in `bytes_to_device`.
    pub in_database: u64,
    pub in_database_bytes: u64,
    /// Packed rows of database columns read in place uploaded to stay on the device for
    /// this run and later ones ([`crate::Backend::upload_packed`]), and their bytes.
    pub packed_kept: u64,
    pub packed_kept_bytes: u64,
    /// Runs of those columns' rows widened on the device from their kept packed rows
    /// instead of uploaded, and the bytes made.
    pub widened_on_device: u64,
    pub widened_on_device_bytes: u64,
    /// Database columns read in place whose host bytes are page-locked for the device's
    /// copies ([`Backend::pin_host`]), and their bytes.
    pub pinned: u64,
    pub pinned_bytes: u64,
}

/// The rows of one observed operator over a run, against the planner's estimate.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RowsStat {
    /// The temp (`t9`) and the operator, as `foxc compile --emit physical` prints them.
    pub label: String,
    pub op: String,
    /// The estimated rows of one execution.
    pub est: Option<f64>,
    /// How many times the operator ran, the rows of all its runs, and the most of one.
    pub calls: u64,
    pub total: u64,
    pub max: u64,
}

impl RowsStat {
    /// The actual rows of one execution: the mean over the calls.
    pub fn per_call(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.total as f64 / self.calls as f64
        }
    }
}

/// Time spent in one instruction of the plan over the whole run.
#[derive(Clone, Debug, PartialEq)]
pub struct InstrStat {
    /// Where it is: `block.index`, e.g. `loop_path.3`.
    pub label: String,
    /// The kernel (`SortPerm`, `LoadInput(edge)`) or `Output(path)`.
    pub kernel: String,
    pub calls: u64,
    /// The device's own time where the backend measures it (CUDA events), the host
    /// clock otherwise.
    pub total: Duration,
    /// The host clock over the whole instruction: `total` and what the runtime did around
    /// it (moves between the device and the host tier, pieces and their host work,
    /// uploads and downloads).
    pub wall: Duration,
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
    /// An error of the program found while it runs (division by zero, overflow, a bad
    /// cast, a functional predicate given two values for a key), at `origin`: a span of the
    /// plan's [`fox_kernel::KernelPlan::sources`], when the plan knows it. `notes` give the
    /// offending values and the instruction.
    Program {
        msg: String,
        origin: Option<fox_kernel::Span>,
        notes: Vec<String>,
    },
    /// The run's [`CancelToken`] was set: it stopped, freed its buffers and returned no
    /// output.
    Cancelled,
}

impl RuntimeError {
    /// The error located in the program's source with the line and a caret, as compile
    /// errors are shown, when it is an error of the program and `plan` holds the source of
    /// its origin; `None` otherwise (the error's one-line text is all there is to show).
    pub fn located(&self, plan: &fox_kernel::KernelPlan, color: bool) -> Option<String> {
        let RuntimeError::Program {
            msg,
            origin: Some(span),
            notes,
        } = self
        else {
            return None;
        };
        let (file, local) = plan.locate(*span)?;
        let d = notes
            .iter()
            .fold(fox_syntax::diag::Diagnostic::error(msg.clone(), local), |d, n| {
                d.with_note(n.clone())
            });
        Some(fox_syntax::diag::render(&file.name, &file.text, &[d], color))
    }
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::Data { msg } | RuntimeError::Io { msg } => f.write_str(msg),
            RuntimeError::Plan(msg) => write!(f, "inconsistent plan: {msg}"),
            RuntimeError::Kernel { at, msg } => write!(f, "{at}: {msg}"),
            RuntimeError::Program { msg, notes, .. } => {
                f.write_str(msg)?;
                notes.iter().try_for_each(|n| write!(f, "; {n}"))
            }
            RuntimeError::Cancelled => f.write_str("interrupted"),
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
    // The slowest by the larger of the two clocks: an instruction whose moves between
    // tiers or pieces cost more than its kernels is among them.
    let mut rows: Vec<&InstrStat> = stats.instrs.iter().collect();
    rows.sort_by(|a, b| {
        b.total
            .max(b.wall)
            .cmp(&a.total.max(a.wall))
            .then_with(|| a.label.cmp(&b.label))
    });
    rows.truncate(SLOWEST_SHOWN);
    let lw = rows.iter().map(|r| r.label.chars().count()).max().unwrap_or(0).max(5);
    let kw = rows.iter().map(|r| r.kernel.chars().count()).max().unwrap_or(0).max(6);
    out.push_str(&format!(
        "slowest instructions (wall: with moves between tiers, pieces, uploads and downloads)\n\
         {:<lw$}  {:<kw$}  {:>7}  {:>12}  {:>12}\n",
        "instr", "kernel", "calls", "total ms", "wall ms"
    ));
    for r in rows {
        out.push_str(&format!(
            "{:<lw$}  {:<kw$}  {:>7}  {:>12.3}  {:>12.3}\n",
            r.label,
            r.kernel,
            r.calls,
            ms(r.total),
            ms(r.wall)
        ));
    }
    let parts = stats.load + stats.upload + stats.compute + stats.download + stats.output;
    out.push_str(&format!("total {:.3} ms\n", ms(stats.total)));
    out.push_str(&format!(
        "load (parse) {:.3} ms, upload {:.3} ms, compute {:.3} ms (of which kernel compilation {:.3} ms), \
         download {:.3} ms, output {:.3} ms, other {:.3} ms\n",
        ms(stats.load),
        ms(stats.upload),
        ms(stats.compute),
        ms(stats.compile),
        ms(stats.download),
        ms(stats.output),
        ms(stats.total.saturating_sub(parts))
    ));
    if let Some(t) = stats.statistics {
        out.push_str(&format!(
            "statistics of the inputs {:.3} ms (before planning, not in the total)\n",
            ms(t)
        ));
    }
    if stats.rounds > 0 {
        // Every window taken, the only one of an expansion that fit at once included.
        out.push_str(&format!(
            "rounds: {} windows of expansions and joins written in rounds\n",
            stats.rounds
        ));
    }
    out.push_str(&format_rows(&stats.rows));
    // `device peak N bytes` is the form the command-line contract names; the size in
    // units follows for reading.
    out.push_str(&format!(
        "memory: planned peak {} (actual {}), device peak {} bytes ({}), total allocated {} bytes ({})\n",
        plural(stats.planned_peak_buffers as u64, "buffer"),
        stats.actual_peak_buffers,
        stats.peak_bytes,
        human_bytes(stats.peak_bytes as u64),
        stats.total_allocated_bytes,
        human_bytes(stats.total_allocated_bytes as u64)
    ));
    if stats.device_peaks.len() > 1 {
        let e = &stats.exchange;
        out.push_str(&format!(
            "exchanges: {} ({}, {} bytes moved between devices)\n",
            e.exchanges,
            plural(e.rows, "row"),
            e.bytes
        ));
        if e.output_wait + e.output_join > Duration::ZERO {
            out.push_str(&format!(
                "outputs of several devices: {:.3} ms waiting for the devices' parts, {:.3} ms joining them in order (in `output`)\n",
                ms(e.output_wait),
                ms(e.output_join)
            ));
        }
        if stats.device_boxes.iter().any(|&b| b > 0) {
            let each: Vec<String> = stats.device_boxes.iter().map(u64::to_string).collect();
            out.push_str(&format!(
                "boxes of multi-way joins taken per device: {} ({} in all)\n",
                each.join(", "),
                stats.boxes
            ));
        }
        for (d, peak) in stats.device_peaks.iter().enumerate() {
            out.push_str(&format!(
                "device {d}: device peak {peak} bytes ({})\n",
                human_bytes(*peak as u64)
            ));
        }
    }
    let t = &stats.tier;
    out.push_str(&format!(
        "host tier: peak {} bytes ({}), {} ({} bytes) to the host, {} ({} bytes) back to the device\n",
        t.host_peak_bytes,
        human_bytes(t.host_peak_bytes),
        plural(t.evictions, "eviction"),
        t.bytes_to_host,
        plural(t.restores, "restore"),
        t.bytes_to_device
    ));
    if t.resident_released > 0 {
        out.push_str(&format!(
            "resident columns: {} ({} bytes) given back to make room\n",
            plural(t.resident_released, "column"),
            t.resident_released_bytes
        ));
    }
    if t.in_database > 0 {
        out.push_str(&format!(
            "read from the database in place: {} ({} bytes), not copied to the host tier\n",
            plural(t.in_database, "column"),
            t.in_database_bytes
        ));
    }
    if t.packed_kept > 0 || t.widened_on_device > 0 {
        out.push_str(&format!(
            "packed rows kept on the device: {} ({} bytes) uploaded, {} ({} bytes) widened from them\n",
            plural(t.packed_kept, "column"),
            t.packed_kept_bytes,
            plural(t.widened_on_device, "piece"),
            t.widened_on_device_bytes
        ));
    }
    if t.pinned > 0 {
        out.push_str(&format!(
            "page-locked for the device's copies: {} ({} bytes) read in place\n",
            plural(t.pinned, "column"),
            t.pinned_bytes
        ));
    }
    if t.operators_in_pieces > 0 {
        out.push_str(&format!(
            "in pieces: {} larger than the device budget ran in {}\n",
            launches(t.operators_in_pieces),
            plural(t.pieces, "piece")
        ));
        for p in &stats.pieces {
            out.push_str(&format!(
                "  {:<13} {:<28} {}, {}\n",
                p.label,
                p.kernel,
                launches(p.launches),
                plural(p.pieces, "piece")
            ));
        }
    }
    out
}

/// The kernels of a run over several devices by device: per kernel, the milliseconds of
/// its launches on each device (`stats.device_instrs`) and, given `one` (the same query's
/// run on one device), on that one device, slowest first by the largest of those; then
/// the calls on each. Kernels only one of the runs has show `-` for the other.
pub fn format_device_kernels(stats: &RunStats, one: Option<&RunStats>) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let runs: Vec<(String, &[InstrStat])> = one
        .map(|o| ("1 device".to_string(), &o.instrs[..]))
        .into_iter()
        .chain(
            stats
                .device_instrs
                .iter()
                .enumerate()
                .map(|(d, i)| (format!("device {d}"), &i[..])),
        )
        .collect();
    // Per kernel: (calls, time) in each run.
    type PerRun = Vec<Option<(u64, Duration)>>;
    let mut kernels: Vec<(String, PerRun)> = Vec::new();
    for (r, (_, instrs)) in runs.iter().enumerate() {
        for s in *instrs {
            let k = match kernels.iter().position(|(k, _)| *k == s.kernel) {
                Some(k) => k,
                None => {
                    kernels.push((s.kernel.clone(), vec![None; runs.len()]));
                    kernels.len() - 1
                }
            };
            let e = kernels[k].1[r].get_or_insert((0, Duration::ZERO));
            e.0 += s.calls;
            e.1 += s.total;
        }
    }
    let most = |v: &[Option<(u64, Duration)>]| v.iter().flatten().map(|e| e.1).max().unwrap_or_default();
    kernels.sort_by(|a, b| most(&b.1).cmp(&most(&a.1)).then_with(|| a.0.cmp(&b.0)));
    let kw = kernels.iter().map(|k| k.0.chars().count()).max().unwrap_or(0).max(6);
    let cw = runs.iter().map(|(n, _)| n.len() + 3).max().unwrap_or(0).max(10);
    let mut out = format!(
        "kernels by device ({} devices)\n{:<kw$}",
        stats.device_instrs.len(),
        "kernel"
    );
    for (n, _) in &runs {
        out.push_str(&format!("  {:>cw$}", format!("{n} ms")));
    }
    out.push_str("  calls");
    out.push('\n');
    let mut sums = vec![Duration::ZERO; runs.len()];
    for (k, per) in &kernels {
        out.push_str(&format!("{k:<kw$}"));
        for (r, e) in per.iter().enumerate() {
            match e {
                Some((_, t)) => {
                    sums[r] += *t;
                    out.push_str(&format!("  {:>cw$.3}", ms(*t)));
                }
                None => out.push_str(&format!("  {:>cw$}", "-")),
            }
        }
        let calls: Vec<String> = per
            .iter()
            .map(|e| e.map_or_else(|| "-".to_string(), |(c, _)| c.to_string()))
            .collect();
        out.push_str(&format!("  {}\n", calls.join(" / ")));
    }
    out.push_str(&format!("{:<kw$}", "total"));
    for t in sums {
        out.push_str(&format!("  {:>cw$.3}", ms(t)));
    }
    out.push('\n');
    out
}

/// The table of estimated against actual rows per observed operator, in plan order; empty
/// when the plan observed none. `actual` is per execution (the mean in loops); `ratio` is
/// actual over estimated.
pub fn format_rows(rows: &[RowsStat]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let count = |x: f64| {
        let x = x.round();
        if x < 1e15 {
            format!("{x:.0}")
        } else {
            format!("{x:.2e}")
        }
    };
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            let actual = r.per_call();
            let (est, ratio) = match r.est {
                _ if r.calls == 0 => (r.est.map_or_else(|| "?".into(), count), "-".to_string()),
                Some(e) => (count(e), ratio(actual, e)),
                None => ("?".into(), "-".into()),
            };
            let actual = if r.calls == 0 {
                "-".to_string()
            } else if actual.fract() != 0.0 && actual < 100.0 {
                format!("{actual:.1}")
            } else {
                count(actual)
            };
            [r.label.clone(), r.op.clone(), r.calls.to_string(), est, actual, ratio]
        })
        .collect();
    let heads = ["temp", "operator", "calls", "estimated", "actual", "ratio"];
    let width = |c: usize| {
        cells
            .iter()
            .map(|r| r[c].chars().count())
            .chain([heads[c].len()])
            .max()
            .unwrap_or(0)
    };
    let w: Vec<usize> = (0..6).map(width).collect();
    // The temp and the operator to the left, the numbers to the right.
    let line = |r: &[String]| {
        let cells: Vec<String> = r
            .iter()
            .zip(&w)
            .enumerate()
            .map(|(c, (x, &w))| if c < 2 { format!("{x:<w$}") } else { format!("{x:>w$}") })
            .collect();
        format!("{}\n", cells.join("  "))
    };
    let mut out = String::from("rows per operator (estimated against actual, per execution)\n");
    out.push_str(&line(&heads.map(String::from)));
    for c in &cells {
        out.push_str(&line(c));
    }
    out
}

/// Actual over estimated rows, to two significant digits (`0.50`, `1.0`, `12`), with one
/// row added to each side so that empty results compare.
fn ratio(actual: f64, est: f64) -> String {
    let r = (actual + 1.0) / (est.max(0.0) + 1.0);
    if r >= 9.95 {
        format!("{r:.0}")
    } else if r >= 0.995 {
        format!("{r:.1}")
    } else if r >= 1e-6 {
        // Two significant digits: 0.50, 0.060, 0.0012.
        let digits = (-r.log10()).ceil() as usize + 1;
        format!("{r:.digits$}")
    } else {
        format!("{r:.1e}")
    }
}

/// How many instructions the `--timing` report lists.
const SLOWEST_SHOWN: usize = 20;

/// A size in bytes for people: `512 B`, `1.50 KB`, `12.3 MB`, `123 GB`, with three
/// significant digits and decimal units (1 KB = 1000 bytes, as GB/s rates count). The
/// tables of `foxbench` and the `--timing` report all write sizes with it.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KB", "MB", "GB", "TB", "PB", "EB"];
    if bytes < 1000 {
        return format!("{bytes} B");
    }
    let mut x = bytes as f64;
    let mut unit = 0;
    // Move up a unit while the value would print as 1000 or more.
    while unit + 1 < UNITS.len() && x >= 999.5 {
        x /= 1000.0;
        unit += 1;
    }
    let digits = if x < 9.995 {
        2
    } else if x < 99.95 {
        1
    } else {
        0
    };
    format!("{x:.digits$} {}", UNITS[unit])
}

/// `n` and the noun, plural unless `n` is 1: `1 row`, `0 rows`, `3 buffers`.
/// `n launch` or `n launches`.
fn launches(n: u64) -> String {
    if n == 1 {
        "1 launch".to_string()
    } else {
        format!("{n} launches")
    }
}

pub fn plural(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// A seeded xorshift generator for the crate's tests (no dependency): each call gives
/// the next state.
#[cfg(test)]
pub(crate) fn test_xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows_stat(label: &str, est: Option<f64>, calls: u64, total: u64) -> RowsStat {
        RowsStat {
            label: label.into(),
            op: format!("scan {label}"),
            est,
            calls,
            total,
            max: total,
        }
    }

    #[test]
    fn rows_table_compares_estimates_with_rows_per_execution() {
        assert_eq!(format_rows(&[]), "");
        let text = format_rows(&[
            rows_stat("t0", Some(6.0), 1, 6),
            rows_stat("t1", Some(20_210.0), 1, 1216),
            rows_stat("t2", Some(1.0), 6, 2),
            rows_stat("t3", None, 2, 10),
            rows_stat("t4", Some(4.0), 0, 0),
            rows_stat("t5", Some(0.0), 1, 0),
            rows_stat("t6", Some(1.0), 1, 999),
        ]);
        let lines: Vec<Vec<&str>> = text.lines().skip(2).map(|l| l.split_whitespace().collect()).collect();
        let row = |t: &str| lines.iter().find(|l| l[0] == t).unwrap().clone();
        // temp, "scan", name, calls, estimated, actual, ratio
        assert_eq!(row("t0")[3..], ["1", "6", "6", "1.0"]);
        assert_eq!(row("t1")[3..], ["1", "20210", "1216", "0.060"]);
        // In a loop the actual rows are the mean of the executions.
        assert_eq!(row("t2")[3..], ["6", "1", "0.3", "0.67"]);
        assert_eq!(row("t3")[3..], ["2", "?", "5", "-"]);
        // An operator that never ran has no actual rows.
        assert_eq!(row("t4")[3..], ["0", "4", "-", "-"]);
        assert_eq!(row("t5")[3..], ["1", "0", "0", "1.0"]);
        assert_eq!(row("t6")[3..], ["1", "1", "999", "500"]);
        assert!(text.starts_with("rows per operator"), "{text}");
    }

    #[test]
    fn sizes_in_units() {
        let cases = [
            (0, "0 B"),
            (999, "999 B"),
            (1000, "1.00 KB"),
            (1536, "1.54 KB"),
            (9_994, "9.99 KB"),
            (9_995, "10.0 KB"),
            (99_949, "99.9 KB"),
            (99_950, "100 KB"),
            (999_499, "999 KB"),
            (999_500, "1.00 MB"),
            (134_122_320, "134 MB"),
            (1_073_741_824, "1.07 GB"),
            (80_000_000_000, "80.0 GB"),
            (u64::MAX, "18.4 EB"),
        ];
        for (bytes, want) in cases {
            assert_eq!(human_bytes(bytes), want, "{bytes}");
        }
    }

    #[test]
    fn plurals() {
        assert_eq!(plural(0, "row"), "0 rows");
        assert_eq!(plural(1, "row"), "1 row");
        assert_eq!(plural(2, "hot run"), "2 hot runs");
    }

    #[test]
    fn the_timing_report_has_a_total_and_other() {
        let ms = Duration::from_millis;
        let stats = RunStats {
            backend: "cpu".into(),
            total: ms(100),
            load: ms(10),
            upload: ms(5),
            compute: ms(60),
            download: ms(4),
            output: ms(20),
            peak_bytes: 2_500_000,
            total_allocated_bytes: 999,
            planned_peak_buffers: 1,
            actual_peak_buffers: 1,
            ..RunStats::default()
        };
        let r = format_stats(&stats);
        assert!(r.contains("\ntotal 100.000 ms\n"), "{r}");
        assert!(r.contains(", output 20.000 ms, other 1.000 ms\n"), "{r}");
        assert!(
            r.contains("memory: planned peak 1 buffer (actual 1), device peak 2500000 bytes (2.50 MB), total allocated 999 bytes (999 B)"),
            "{r}"
        );
        assert!(
            r.contains("host tier: peak 0 bytes (0 B), 0 evictions (0 bytes) to the host, 0 restores (0 bytes) back to the device\n"),
            "{r}"
        );
        let stats = RunStats {
            tier: TierStats {
                evictions: 1,
                bytes_to_host: 4000,
                restores: 2,
                bytes_to_device: 8000,
                host_peak_bytes: 4000,
                in_database: 3,
                in_database_bytes: 1200,
                ..TierStats::default()
            },
            ..RunStats::default()
        };
        let r = format_stats(&stats);
        assert!(
            r.contains("host tier: peak 4000 bytes (4.00 KB), 1 eviction (4000 bytes) to the host, 2 restores (8000 bytes) back to the device\n"),
            "{r}"
        );
        assert!(
            r.contains("read from the database in place: 3 columns (1200 bytes), not copied to the host tier\n"),
            "{r}"
        );
        assert!(!r.contains("exchanges"), "{r}");
        let stats = RunStats {
            peak_bytes: 3000,
            device_peaks: vec![1000, 3000],
            exchange: ExchangeStats {
                exchanges: 2,
                rows: 1,
                bytes: 16,
                ..ExchangeStats::default()
            },
            ..RunStats::default()
        };
        let r = format_stats(&stats);
        assert!(
            r.contains("exchanges: 2 (1 row, 16 bytes moved between devices)\ndevice 0: device peak 1000 bytes (1.00 KB)\ndevice 1: device peak 3000 bytes (3.00 KB)\n"),
            "{r}"
        );
    }

    /// The slowest instructions are ordered by the larger of their kernels' time and
    /// their wall time, and show both: an instruction whose moves between tiers cost more
    /// than its kernel comes first.
    #[test]
    fn slowest_instructions_show_the_wall_beside_the_kernels() {
        let ms = Duration::from_millis;
        let instr = |label: &str, kernel: &str, total: u64, wall: u64| InstrStat {
            label: label.into(),
            kernel: kernel.into(),
            calls: 1,
            total: ms(total),
            wall: ms(wall),
        };
        let stats = RunStats {
            instrs: vec![
                instr("main.0", "sort_perm", 5, 6),
                instr("main.1", "trie_build", 1, 9),
                instr("main.2", "gather", 2, 2),
            ],
            ..RunStats::default()
        };
        let t = format_stats(&stats);
        let lines: Vec<Vec<&str>> = t
            .lines()
            .skip_while(|l| !l.starts_with("slowest instructions"))
            .skip(2)
            .take(3)
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            lines,
            [
                ["main.1", "trie_build", "1", "1.000", "9.000"],
                ["main.0", "sort_perm", "1", "5.000", "6.000"],
                ["main.2", "gather", "1", "2.000", "2.000"],
            ],
            "{t}"
        );
    }

    /// The kernels by device: one column per device and one for the 1-device run, the
    /// kernels slowest first by their largest time, `-` where a run has no such kernel,
    /// the calls of each run, and the totals.
    #[test]
    fn kernels_by_device_put_each_device_beside_the_one_device_run() {
        let ms = Duration::from_millis;
        let instr = |label: &str, kernel: &str, calls: u64, t: u64| InstrStat {
            label: label.into(),
            kernel: kernel.into(),
            calls,
            total: ms(t),
            wall: ms(t),
        };
        let one = RunStats {
            instrs: vec![instr("main.0", "sort_perm", 2, 5), instr("main.1", "sort_perm", 1, 1)],
            ..RunStats::default()
        };
        let two = RunStats {
            device_instrs: vec![
                vec![instr("main.0", "sort_perm", 1, 2), instr("main.1", "exchange", 3, 7)],
                vec![instr("main.0", "sort_perm", 1, 4), instr("main.1", "exchange", 3, 1)],
            ],
            ..RunStats::default()
        };
        let t = format_device_kernels(&two, Some(&one));
        let lines: Vec<Vec<&str>> = t.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(lines[0], ["kernels", "by", "device", "(2", "devices)"], "{t}");
        assert_eq!(
            lines[1],
            ["kernel", "1", "device", "ms", "device", "0", "ms", "device", "1", "ms", "calls"],
            "{t}"
        );
        assert_eq!(
            lines[2],
            ["exchange", "-", "7.000", "1.000", "-", "/", "3", "/", "3"],
            "{t}"
        );
        assert_eq!(
            lines[3],
            ["sort_perm", "6.000", "2.000", "4.000", "3", "/", "1", "/", "1"],
            "{t}"
        );
        assert_eq!(lines[4], ["total", "6.000", "9.000", "5.000"], "{t}");
        // Without the 1-device run, only the devices.
        let t = format_device_kernels(&two, None);
        assert!(
            t.lines()
                .nth(1)
                .unwrap()
                .split_whitespace()
                .eq(["kernel", "device", "0", "ms", "device", "1", "ms", "calls"]),
            "{t}"
        );
    }
}
