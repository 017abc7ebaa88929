//! The interpreter of the kernel CFG.
//!
//! Before the first instruction runs, every input the plan loads is read and every string
//! constant of the plan is collected, so the dictionary can be built in sorted order. Then
//! blocks run from `entry`: launches go to the backend (host-side kernels are run here and
//! uploaded), `Move` shares a device buffer between two variables (a reference count per
//! device buffer frees it when its last variable is freed or redefined), and `Output`
//! downloads and orders a result. Whatever happens, every device buffer is freed before
//! `run` returns.
//!
//! The host tier: when a launch fails for want of memory (or an upload would take the
//! device beyond the run's budget: the memory limit, else the backend's capacity), buffers
//! that are live but not read by the instruction move to host memory (downloaded, their
//! device buffer freed; the variables keep their length and type) in the order of
//! [`crate::tier`], and the launch is tried again; an instruction that reads a buffer in
//! the host tier uploads it first, making room the same way. A launch is tried again only
//! when its failure left the backend's memory as it was before it.

use crate::database::{to_host, used_input_columns, Database, Resident};
use crate::dict::Dictionary;
use crate::inputs::LoadedInputs;
use crate::load::{load_input_cols, Interner};
use crate::output::{build_table_parts, OutputTable};
use crate::stored::ColRef;
use crate::tier::{self, Candidate};
use crate::{
    Backend, DevBuf, HostCol, InstrStat, LaunchCtx, RunEvent, RunObserver, RunOptions, RunResult, RunStats,
    RuntimeError, MAX_WINDOW_ROWS,
};
use fox_kernel::{Elem, Instr, KExpr, KExprKind, Kernel, KernelPlan, StrFunc, Terminator};
use fox_sema::core::{Type, Value, MAX_DATE, MAX_DECIMAL, MAX_WIDE_DECIMAL, MIN_DATE};
use std::path::Path;
use std::time::{Duration, Instant};

mod joins;
mod merge;
mod reduce;
mod rows;
mod sort;
mod trie;

/// Runs `plan` on `backend` and returns its outputs.
pub fn run(plan: &KernelPlan, backend: &mut dyn Backend, opts: &RunOptions) -> Result<RunResult, RuntimeError> {
    run_resident(plan, backend, opts, None)
}

/// [`run`] with the inputs of `opts.database`, taking the device copies of its columns
/// from `resident` (and leaving there the ones this run uploads), so later runs on the
/// same backend upload nothing. The buffers in `resident` are never freed by a run.
pub fn run_resident(
    plan: &KernelPlan,
    backend: &mut dyn Backend,
    opts: &RunOptions,
    resident: Option<&mut Resident>,
) -> Result<RunResult, RuntimeError> {
    run_with(plan, backend, opts, resident, None)
}

/// [`run`] with its inputs read already, by [`LoadedInputs::load`] (every input the plan
/// loads, with every column it reads: an error otherwise); `opts.data_dir` and
/// `opts.database` are not read. The time the inputs took to read counts in the run's
/// `load` and `total`.
pub fn run_loaded(
    plan: &KernelPlan,
    backend: &mut dyn Backend,
    opts: &RunOptions,
    inputs: LoadedInputs,
) -> Result<RunResult, RuntimeError> {
    run_with(plan, backend, opts, None, Some(inputs))
}

fn run_with(
    plan: &KernelPlan,
    backend: &mut dyn Backend,
    opts: &RunOptions,
    resident: Option<&mut Resident>,
    preloaded: Option<LoadedInputs>,
) -> Result<RunResult, RuntimeError> {
    let started = Instant::now();
    let before = preloaded.as_ref().map_or(Duration::ZERO, |p| p.load_time);
    let database = if preloaded.is_some() {
        None
    } else {
        opts.database.clone()
    };
    let mut it = Interp::new(plan, backend, opts, resident, database);
    it.start(opts);
    let res = it.prepare(opts, preloaded).and_then(|_| it.execute());
    it.finish(started, before);
    res?;
    Ok(RunResult {
        outputs: it.outputs,
        stats: it.stats,
    })
}

/// What every device of a run over several shares, read once before they start: the
/// dictionary, the codes the run's strings can have, the inputs' columns (each device
/// takes its slice), and the time reading them took.
pub(crate) struct Shared {
    pub(crate) dict: Dictionary,
    reachable: Reachable,
    pub(crate) inputs: std::sync::Arc<Vec<Option<Vec<HostCol>>>>,
    pub(crate) load: Duration,
}

/// Reads what the devices of a run share (see [`Shared`]), as a one-device run prepares,
/// on no backend's memory: `backend` is only borrowed for the interpreter's shape.
pub(crate) fn prepare_shared(
    plan: &KernelPlan,
    backend: &mut dyn Backend,
    opts: &RunOptions,
    preloaded: Option<LoadedInputs>,
) -> Result<Shared, RuntimeError> {
    let database = if preloaded.is_some() {
        None
    } else {
        opts.database.clone()
    };
    let mut it = Interp::new(plan, backend, opts, None, database);
    it.prepare(opts, preloaded)?;
    let inputs = std::mem::take(&mut it.inputs)
        .into_iter()
        .map(|i| i.map(|i| i.cols))
        .collect();
    Ok(Shared {
        dict: std::mem::take(&mut it.dict),
        reachable: std::mem::replace(&mut it.reachable, Reachable::All),
        inputs: std::sync::Arc::new(inputs),
        load: it.stats.load,
    })
}

/// Runs `plan` as device `rank` of a run over `comm.size()` devices, on `backend`, from
/// `shared`, taking the device's parts of the database's columns from `resident` (and
/// leaving there the ones it uploads, as [`crate::run_resident`] does on one device); the
/// device's outputs (device 0 holds them all), its statistics, and whether it stopped
/// because another device failed. Every buffer not in `resident` is freed before it
/// returns.
pub(crate) fn run_device(
    plan: &KernelPlan,
    backend: &mut dyn Backend,
    opts: &RunOptions,
    shared: &Shared,
    comm: &crate::spmd::Comm,
    rank: usize,
    resident: Option<&mut Resident>,
) -> (Result<Vec<OutputTable>, RuntimeError>, RunStats, bool) {
    let started = Instant::now();
    let database = opts.database.clone();
    let mut it = Interp::new(plan, backend, opts, resident, database);
    it.spmd = Some(Device {
        comm,
        rank,
        inputs: shared.inputs.clone(),
    });
    it.dict = shared.dict.clone();
    it.reachable = shared.reachable.clone();
    it.inputs = plan.inputs.iter().map(|_| None).collect();
    it.start(opts);
    it.backend.set_stall_limit(comm.stall_limit());
    let res = it.execute();
    if res.is_err() {
        comm.abort();
    }
    it.finish(started, Duration::ZERO);
    let peer = it.peer_stop.get();
    (
        res.map(|_| std::mem::take(&mut it.outputs)),
        std::mem::take(&mut it.stats),
        peer,
    )
}

/// The device an interpreter runs on, in a run over several.
struct Device<'a> {
    comm: &'a crate::spmd::Comm,
    rank: usize,
    /// Every input's columns (whole): the device takes its slice at `LoadInput`.
    inputs: std::sync::Arc<Vec<Option<Vec<HostCol>>>>,
}

/// A pattern's table is built on the device from the codes that match when the run reads
/// at most one string of this many of the dictionary's (see [`Dictionary::flags_at`]).
const SPARSE_TABLE: usize = 8;

/// The string codes a run can meet, worked out at the first dictionary table that needs
/// them.
#[derive(Clone)]
enum Reachable {
    /// Every code (the dictionary was built for this run).
    All,
    /// The database's codes of the plan's string columns, and the constants' codes.
    Pending(std::sync::Arc<Database>, Vec<u32>),
    /// Those, merged and sorted.
    Known(std::sync::Arc<Vec<u32>>),
}

/// Whether a dictionary table depends on the dictionary alone (an index of its strings,
/// kept with a resident database), not on a query's pattern.
fn dict_index(op: &fox_kernel::DictOp) -> bool {
    matches!(op, fox_kernel::DictOp::Rank | fox_kernel::DictOp::Strlen)
}

/// The rows of an input a device loads: a range (every row when `None`), or those that
/// hashing on the key columns `keys` gives device `rank` of `devices`.
enum LoadRows {
    Range(Option<std::ops::Range<usize>>),
    Hashed {
        keys: Vec<usize>,
        rank: usize,
        devices: usize,
    },
}

/// What the next window of a rounds loop is sized by ([`Interp::round_room`]): the memory
/// limit, the bytes of the buffers the rounds read (on the device or waiting in the host
/// tier) and the bytes of the other buffers on the device.
struct RoundRoom {
    limit: u64,
    reads: u64,
    others: u64,
}

/// What a round of an expansion costs besides its rows (its launches, its window, its
/// host synchronisation), in ms, against [`HOST_TIER_BYTES_PER_MS`]: the buffers every
/// round reads move to the host tier for larger windows only where the rounds they save
/// cost more than bringing them back every round.
const ROUND_MS: f64 = 1.0;

/// Bytes the host tier brings back to the device per ms (PCIe of the lent machines, about
/// 20 GB/s, rounded down).
const HOST_TIER_BYTES_PER_MS: f64 = 16e6;

/// An input's columns, encoded, waiting for its `LoadInput`.
struct LoadedInput {
    cols: Vec<HostCol>,
    /// The number of `LoadInput` instructions of this input (the last one may take the
    /// columns instead of copying them, unless a loop can run it again).
    reusable: bool,
}

struct Interp<'a> {
    plan: &'a KernelPlan,
    backend: &'a mut dyn Backend,
    database: Option<std::sync::Arc<Database>>,
    resident: Option<&'a mut Resident>,
    /// The resident buffers this run reads (see [`Resident`]) and the bytes of each,
    /// worked out before its first instruction.
    wanted: std::collections::HashMap<crate::database::ResidentKey, u64>,
    /// The run was counted on `resident` ([`Interp::begin_resident`]).
    resident_begun: bool,
    dict: Dictionary,
    inputs: Vec<Option<LoadedInput>>,
    /// Device buffers with the number of variables holding each.
    slots: Vec<Option<(DevBuf, usize)>>,
    /// `pinned[slot]`: the slot's buffer belongs to `resident` and is never freed here
    /// (nor moved to the host tier).
    pinned: Vec<bool>,
    /// `tiers[slot]`: where the slot's value is.
    tiers: Vec<Tier>,
    /// `in_db[slot]`: under a memory limit, the database rows the slot's device buffer
    /// holds exactly (a column `LoadInput` uploaded whole or sliced, never hashed). No
    /// instruction writes a buffer it reads (launches define new buffers), so the rows
    /// stay equal to the database's while the slot lives: the buffer leaves the device
    /// by being freed, its slot reading the database's rows ([`Tier::Db`]).
    in_db: Vec<Option<DbRows>>,
    /// Bytes in the host tier now.
    host_in_use: u64,
    /// The instruction running: (block, index).
    pos: (usize, usize),
    /// The bytes the run's buffers may take on the device: the memory limit, else the
    /// backend's capacity (when it knows it).
    device_cap: Option<u64>,
    /// With a database: the codes this run's strings can have (those of the string columns
    /// it reads and of its constants); strings appended during the run come on top.
    /// Dictionary tables are computed only there.
    reachable: Reachable,
    free_slots: Vec<usize>,
    /// The slot each buffer variable holds, if defined.
    vars: Vec<Option<usize>>,
    live_vars: usize,
    stats: RunStats,
    instr_stats: Vec<Vec<Option<InstrStat>>>,
    /// Per instruction (block, index) that ran in pieces: its launches in pieces and
    /// their pieces.
    pieces: std::collections::BTreeMap<(usize, usize), (u64, u64)>,
    outputs: Vec<OutputTable>,
    timing: bool,
    memory_limit: Option<u64>,
    /// [`RunOptions::window_rows`], read as at least 1 and at most [`MAX_WINDOW_ROWS`].
    window_rows: u64,
    /// The device time of the last launch, when the backend measured it.
    device_time: Option<Duration>,
    observer: Option<std::sync::Arc<dyn RunObserver>>,
    /// [`RunOptions::max_iterations`].
    max_iterations: Option<u64>,
    /// Read before every instruction and after every launch (see [`crate::cancel`]).
    cancel: Option<crate::CancelToken>,
    /// The device, in a run over several ([`crate::spmd`]); `None` on one device, where no
    /// collective runs.
    spmd: Option<Device<'a>>,
    /// `spent[slot]`: the slot holds the window of no rows a device with no rows left
    /// takes while other devices go on (it counts as empty in loop tests). Only set in a
    /// run over several devices.
    spent: Vec<bool>,
    /// The device stopped because another failed (its own error is not the run's).
    peer_stop: std::cell::Cell<bool>,
    /// The `Window` just run took a window of no rows on a device with none left.
    window_spent: bool,
    /// Whether the last launch [`Interp::launch_evicting`] gave up on ran out of memory
    /// and left memory behind: such a launch is not tried again, nor done on the host.
    failure_leaked: bool,
    /// The expansions cut into boxes this device has started (`Claim` without a previous
    /// window); the last is the one its claims take boxes of.
    claims_started: usize,
    /// On one device, the next box of the expansion under way.
    local_next: u32,
    /// The instruction the last one ran with it, to be skipped (block, index).
    fused: Option<(usize, usize)>,
    /// The host bytes of database columns offered to be page-locked this run (by address).
    pin_offered: std::collections::HashSet<usize>,
    /// The backend's `MemStats::bytes_in` when the run started.
    bytes_in_at_start: u64,
    /// The kept packed rows being widened now ([`Interp::upload_db_rows`]): never freed
    /// to make room meanwhile.
    packed_busy: Option<u64>,
    /// Whether [`Interp::make_room`] may give back the packed rows the run reads (not
    /// while it makes room to keep more of them).
    packed_last_resort: bool,
    /// The run gave back packed rows it reads to make room: it keeps no more.
    packed_closed: bool,
    /// The plan keeps no packed rows (see [`Interp::packed_share`]), and reads none it
    /// finds kept.
    packed_off: bool,
    /// The plan's signature ([`Interp::plan_signature`]), worked out with its resident
    /// buffers.
    signature: u64,
}

impl<'a> Interp<'a> {
    fn new(
        plan: &'a KernelPlan,
        backend: &'a mut dyn Backend,
        opts: &RunOptions,
        resident: Option<&'a mut Resident>,
        database: Option<std::sync::Arc<Database>>,
    ) -> Interp<'a> {
        Interp {
            plan,
            backend,
            database,
            resident,
            wanted: Default::default(),
            resident_begun: false,
            pinned: Vec::new(),
            tiers: Vec::new(),
            in_db: Vec::new(),
            host_in_use: 0,
            pos: (0, 0),
            device_cap: None,
            reachable: Reachable::All,
            dict: Dictionary::default(),
            inputs: Vec::new(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            vars: vec![None; plan.buffers.len()],
            live_vars: 0,
            stats: RunStats {
                planned_peak_buffers: plan.planned_peak_buffers,
                rows: plan
                    .observed
                    .iter()
                    .map(|o| crate::RowsStat {
                        label: o.label.clone(),
                        op: o.op.clone(),
                        est: o.est,
                        ..crate::RowsStat::default()
                    })
                    .collect(),
                ..RunStats::default()
            },
            instr_stats: plan.blocks.iter().map(|b| vec![None; b.instrs.len()]).collect(),
            pieces: Default::default(),
            outputs: Vec::new(),
            timing: opts.timing,
            memory_limit: opts.memory_limit,
            packed_busy: None,
            packed_last_resort: true,
            packed_closed: false,
            packed_off: false,
            signature: 0,
            window_rows: opts
                .window_rows
                .map_or(MAX_WINDOW_ROWS, |r| r.clamp(1, MAX_WINDOW_ROWS)),
            device_time: None,
            observer: opts.observer.clone(),
            max_iterations: opts.max_iterations,
            cancel: opts.cancel.clone(),
            spmd: None,
            spent: Vec::new(),
            peer_stop: std::cell::Cell::new(false),
            window_spent: false,
            failure_leaked: false,
            claims_started: 0,
            local_next: 0,
            fused: None,
            pin_offered: std::collections::HashSet::new(),
            bytes_in_at_start: 0,
        }
    }

    /// Gives the backend the run's memory limit and works out the device budget.
    fn start(&mut self, opts: &RunOptions) {
        self.stats.backend = self.backend.name();
        self.bytes_in_at_start = self.backend.mem().bytes_in;
        self.backend.set_memory_limit(opts.memory_limit);
        let separate = self.backend.memory_is_separate();
        self.device_cap = match (opts.memory_limit, self.backend.memory_capacity()) {
            (Some(l), Some(c)) if separate => Some(l.min(c as u64)),
            (Some(l), _) => Some(l),
            (None, c) if separate => c.map(|c| c as u64),
            (None, _) => None,
        };
    }

    /// Frees every buffer and completes the statistics.
    fn finish(&mut self, started: Instant, before: Duration) {
        self.release_all();
        let mem = self.backend.mem();
        self.stats.peak_bytes = mem.peak;
        self.end_resident(mem.peak);
        self.stats.compile = self.backend.compile_time();
        self.stats.total_allocated_bytes = mem.total_allocated;
        self.stats.bytes_in = mem.bytes_in.saturating_sub(self.bytes_in_at_start);
        self.stats.instrs = self.instr_stats.iter().flatten().flatten().cloned().collect();
        let plan = self.plan;
        self.stats.pieces = std::mem::take(&mut self.pieces)
            .into_iter()
            .map(|((block, i), (launches, pieces))| {
                let kernel = match plan.blocks.get(block).and_then(|b| b.instrs.get(i)) {
                    Some(Instr::Launch { kernel, .. }) => kernel_name(kernel, plan),
                    _ => String::new(),
                };
                crate::PiecesStat {
                    label: format!("{}.{i}", plan.blocks[block].label),
                    kernel,
                    launches,
                    pieces,
                }
            })
            .collect();
        self.stats.total = started.elapsed() + before;
    }
}

/// One thing that may leave the device to make room ([`Interp::leaving`]).
enum Leaving {
    /// A buffer of the run.
    Slot(Candidate),
    /// Packed rows the run reads, kept in the resident.
    Packed(crate::database::ResidentKey),
}

/// Where a slot's value is.
enum Tier {
    /// On the device, in the slot's buffer.
    Device,
    /// In the host tier: the device buffer was freed, and the slot's `DevBuf` keeps only
    /// the element type and length.
    Host(HostCol),
    /// In the host tier as the database's own rows, read in place: no copy, and not
    /// counted in the host tier's bytes. The slot's `DevBuf` keeps only the element type
    /// and length.
    Db(DbRows),
    /// Nowhere: bringing it back failed, and the run ends with that error.
    Gone,
}

/// The rows `rows` of column `col` of a database table, exactly as the database holds
/// them. The table is shared with the database, which never changes a loaded column, so
/// the rows stay valid for the whole run.
#[derive(Clone)]
struct DbRows {
    table: std::sync::Arc<crate::database::Table>,
    col: usize,
    rows: std::ops::Range<usize>,
}

impl DbRows {
    /// The whole column the rows belong to (its rows `self.rows` are this value's).
    fn column(&self) -> &crate::stored::StoredCol {
        Database::column(&self.table, self.col).expect("a referenced column is loaded")
    }

    /// The rows `a..b` of this value, copied (widened when the column is packed).
    fn slice(&self, a: usize, b: usize) -> Result<HostCol, String> {
        let at = self.rows.start;
        self.column().slice(at + a, at + b, "a chunk of rows for the device")
    }

    /// The whole value, copied.
    fn copy(&self) -> Result<HostCol, String> {
        self.slice(0, self.rows.len())
    }

    /// The key of these rows' packed rows kept on the device.
    fn packed_key(&self) -> crate::database::ResidentKey {
        (
            self.table.input.name.clone(),
            self.col,
            crate::database::Rows::Packed(self.rows.clone()),
        )
    }
}

/// A kernel whose output columns are independent, as one kernel per output column and
/// the argument slots of each: `Gather` and `Compact` (the first argument and the
/// column), `Concat` (the column of every part); `None` for any other kernel, or with
/// fewer than two columns.
fn column_split(kernel: &Kernel, args: &[usize], n_outs: usize) -> Option<(Kernel, Vec<Vec<usize>>)> {
    match *kernel {
        Kernel::Gather { .. } | Kernel::Compact if n_outs >= 2 && args.len() == n_outs + 1 => Some((
            kernel.clone(),
            (0..n_outs).map(|j| vec![args[0], args[j + 1]]).collect(),
        )),
        Kernel::Concat { parts, width } if width >= 2 && n_outs == width && args.len() == parts * width => Some((
            Kernel::Concat { parts, width: 1 },
            (0..width)
                .map(|j| (0..parts).map(|g| args[g * width + j]).collect())
                .collect(),
        )),
        _ => None,
    }
}

/// Whether a launch of `kernel` on `args` with `n_outs` outputs that does not fit the
/// device budget runs in pieces, or on the host, instead (the fallbacks of
/// [`Interp::instr`]'s launches).
fn in_pieces(kernel: &Kernel, args: &[usize], n_outs: usize) -> bool {
    rows::row_aligned(kernel, args.len()).is_some()
        || column_split(kernel, args, n_outs).is_some()
        || joins::runs_in_pieces(kernel, args.len())
        || reduce::keyed(kernel, args.len()).is_some()
        || matches!(
            kernel,
            Kernel::Slice { .. }
                | Kernel::ExclusiveScan
                | Kernel::MergeUnion { .. }
                | Kernel::SortPerm { .. }
                | Kernel::HashBuild { .. }
                | Kernel::Concat { .. }
                | Kernel::TrieBuild { .. }
        )
}

/// A host kernel's error as the run's: a plan error or a kernel error of the
/// instruction `what` names, or the run's own error.
fn host_error(e: HostError, what: &dyn Fn() -> String) -> RuntimeError {
    match e {
        HostError::Plan(m) => RuntimeError::Plan(format!("{}: {m}", what())),
        HostError::Kernel(m) => RuntimeError::Kernel { at: what(), msg: m },
        HostError::Run(e) => e,
    }
}

/// Whether a backend's error is an allocation refused or failed (see
/// [`crate::alloc::rows_out_of_memory`]).
fn is_out_of_memory(msg: &str) -> bool {
    msg.contains("out of memory")
}

struct DictCtx<'a>(&'a Dictionary, &'a std::sync::atomic::AtomicBool);

impl LaunchCtx for DictCtx<'_> {
    fn string_code(&self, s: &str) -> Option<u32> {
        self.0.code(s)
    }

    fn cancel_flag(&self) -> &std::sync::atomic::AtomicBool {
        self.1
    }
}

/// Where an instruction is, for messages.
/// Checks the arguments of a launch against `kernel`'s contract (their number, element
/// types and lengths: `fox_kernel::check_args`) and the element types of the outputs
/// the plan declares: what every backend may assume of a launch.
pub fn check_launch(
    kernel: &Kernel,
    args: &[&DevBuf],
    out_elems: &[Elem],
    inputs: &[fox_kernel::InputRel],
) -> Result<(), String> {
    let shapes: Vec<(Elem, usize)> = args.iter().map(|a| (a.elem, a.len)).collect();
    let want = fox_kernel::check_args(kernel, &shapes, inputs)?;
    if want.len() != out_elems.len() {
        return Err(format!(
            "the kernel has {} outputs, the plan names {}",
            want.len(),
            out_elems.len()
        ));
    }
    if let Some(k) = (0..want.len()).find(|&k| want[k] != out_elems[k]) {
        return Err(format!(
            "output {k} is declared {}, but the kernel produces {}",
            out_elems[k].name(),
            want[k].name()
        ));
    }
    Ok(())
}

fn at(plan: &KernelPlan, block: usize, i: usize) -> String {
    format!("block `{}` ({}), instruction {}", plan.blocks[block].label, block, i)
}

/// The kernel's name in timing tables and messages: as `foxc compile --emit kernels`
/// prints it (`sort_perm`, `load_input[edge]`).
pub(crate) fn kernel_name(k: &Kernel, plan: &KernelPlan) -> String {
    fox_kernel::kernel_label(plan, k)
}

fn collect_expr_strings(e: &KExpr, out: &mut Vec<String>) {
    match &e.kind {
        KExprKind::Col(_) => {}
        KExprKind::Const(v) => collect_value_string(v, out),
        KExprKind::Table(_, x) | KExprKind::Cast(x) | KExprKind::Neg(x) | KExprKind::Not(x) => {
            collect_expr_strings(x, out)
        }
        KExprKind::Arith(_, a, b) | KExprKind::Cmp(_, a, b) => {
            collect_expr_strings(a, out);
            collect_expr_strings(b, out);
        }
        KExprKind::And(xs) | KExprKind::Or(xs) | KExprKind::Call(_, xs) => {
            xs.iter().for_each(|x| collect_expr_strings(x, out))
        }
        KExprKind::In(x, vs) => {
            collect_expr_strings(x, out);
            vs.iter().for_each(|v| collect_value_string(v, out));
        }
    }
}

fn collect_value_string(v: &Value, out: &mut Vec<String>) {
    if let Value::String(s) = v {
        out.push(s.clone());
    }
}

impl Interp<'_> {
    /// Reads every input the plan loads and builds the dictionary from their strings and
    /// the plan's string constants.
    fn prepare(&mut self, opts: &RunOptions, preloaded: Option<LoadedInputs>) -> Result<(), RuntimeError> {
        let start = Instant::now();
        let plan = self.plan;
        let mut uses = vec![0usize; plan.inputs.len()];
        let mut in_loop_target = vec![false; plan.inputs.len()];
        let mut constants = Vec::new();
        let targets: Vec<BlockIdx> = plan
            .blocks
            .iter()
            .flat_map(|b| b.term.successors())
            .map(|b| b.0 as usize)
            .collect();
        for (b, block) in plan.blocks.iter().enumerate() {
            for (i, ins) in block.instrs.iter().enumerate() {
                let Instr::Launch { kernel, .. } = ins else { continue };
                match kernel {
                    Kernel::LoadInput { input, .. } => {
                        let Some(u) = uses.get_mut(*input) else {
                            return Err(RuntimeError::Plan(format!(
                                "{}: LoadInput of input {input}, but the plan has {} inputs",
                                at(plan, b, i),
                                plan.inputs.len()
                            )));
                        };
                        *u += 1;
                        // A block that is some block's successor may run more than once.
                        if targets.contains(&b) {
                            in_loop_target[*input] = true;
                        }
                    }
                    Kernel::Const { rows, .. } => rows
                        .iter()
                        .flatten()
                        .for_each(|v| collect_value_string(v, &mut constants)),
                    Kernel::Eval { expr, .. } => collect_expr_strings(expr, &mut constants),
                    Kernel::FusedReduce { filter, exprs, .. } => {
                        filter
                            .iter()
                            .chain(exprs.iter().flatten())
                            .for_each(|e| collect_expr_strings(e, &mut constants));
                    }
                    _ => {}
                }
            }
        }
        let used = used_input_columns(plan);
        if let Some(db) = self.database.clone() {
            // The data is loaded: check the declarations, and give the plan's new string
            // constants codes after the data's.
            for (k, input) in plan.inputs.iter().enumerate() {
                if uses[k] > 0 {
                    let t = db.table_for(input).map_err(|msg| RuntimeError::Data { msg })?;
                    if let Some(c) = (0..input.columns.len()).find(|&c| used[k][c] && Database::column(t, c).is_none())
                    {
                        return Err(RuntimeError::Data {
                            msg: format!(
                                "column `{}` of `{}` was not loaded (the data was loaded for other programs)",
                                input.columns[c].name, input.name
                            ),
                        });
                    }
                }
            }
            self.dict = db.dictionary().clone();
            constants.sort_unstable();
            constants.dedup();
            let mut const_codes = Vec::with_capacity(constants.len());
            for s in &constants {
                const_codes.push(self.dict.intern(s).map_err(|msg| RuntimeError::Data { msg })?);
            }
            self.reachable = Reachable::Pending(db, const_codes);
            self.inputs = plan.inputs.iter().map(|_| None).collect();
            self.stats.load += start.elapsed();
            return Ok(());
        }
        if let Some(pre) = preloaded {
            return self.take_loaded(pre, &uses, &in_loop_target, &used, constants, start);
        }
        let data_dir = opts.data_dir.clone().unwrap_or_default();
        let _phase = crate::alloc::LoadPhase::enter();
        let mut strings = Interner::default();
        let mut loaded = Vec::with_capacity(plan.inputs.len());
        for (k, input) in plan.inputs.iter().enumerate() {
            self.check_cancel()?;
            loaded.push(if uses[k] > 0 {
                self.notify(&RunEvent::Loading { input: &input.name });
                let stop = self.cancel.as_ref().map_or(crate::cancel::never(), |t| t.flag());
                Some(load_input_cols(
                    Path::new(&data_dir),
                    input,
                    &used[k],
                    &mut strings,
                    stop,
                )?)
            } else {
                None
            });
        }
        let strings = strings.into_strings();
        self.dict = Dictionary::try_from_strs(strings.iter().chain(constants.iter().map(String::as_str)))
            .map_err(|msg| RuntimeError::Data { msg })?;
        let remap: Vec<u32> = crate::alloc::try_collect(
            strings
                .iter()
                .map(|s| self.dict.code(s).expect("every collected string is in the dictionary")),
            "the string dictionary",
        )
        .map_err(|msg| RuntimeError::Data { msg })?;
        self.inputs = loaded
            .into_iter()
            .enumerate()
            .map(|(k, cols)| {
                cols.map(|cols| LoadedInput {
                    cols: cols
                        .into_iter()
                        .zip(&plan.inputs[k].columns)
                        .zip(&used[k])
                        .map(|((c, col), &u)| {
                            if u {
                                to_host(c, &remap)
                            } else {
                                HostCol::empty(Elem::of(col.ty))
                            }
                        })
                        .collect(),
                    reusable: uses[k] > 1 || in_loop_target[k],
                })
            })
            .collect();
        self.stats.load += start.elapsed();
        Ok(())
    }

    /// Takes the inputs of the plan from `pre`, read before the run, after checking that
    /// they are the plan's, and adds the plan's string constants to their dictionary.
    fn take_loaded(
        &mut self,
        pre: LoadedInputs,
        uses: &[usize],
        in_loop_target: &[bool],
        used: &[Vec<bool>],
        constants: Vec<String>,
        start: Instant,
    ) -> Result<(), RuntimeError> {
        let plan = self.plan;
        let LoadedInputs {
            mut rels,
            dict,
            load_time,
        } = pre;
        let (dict, remap) =
            crate::inputs::merge_constants(dict, &constants).map_err(|msg| RuntimeError::Data { msg })?;
        self.dict = dict;
        let mut inputs = Vec::with_capacity(plan.inputs.len());
        for (k, input) in plan.inputs.iter().enumerate() {
            if uses[k] == 0 {
                inputs.push(None);
                continue;
            }
            let missing = |what: String| RuntimeError::Plan(format!("input `{}`: {what}", input.name));
            let rel = rels
                .iter_mut()
                .find(|r| r.input.name == input.name)
                .ok_or_else(|| missing("it was not read before the run".into()))?;
            if rel.input != *input {
                return Err(missing("it was read with another declaration".into()));
            }
            let mut cols = Vec::with_capacity(input.columns.len());
            for (c, col) in input.columns.iter().enumerate() {
                let kept = if used[k][c] { rel.cols[c].take() } else { None };
                cols.push(match kept {
                    Some(mut h) => {
                        if let (Some(remap), HostCol::U32(v), Type::String) = (&remap, &mut h, col.ty) {
                            use rayon::prelude::*;
                            v.par_iter_mut().for_each(|x| *x = remap[*x as usize]);
                        }
                        h
                    }
                    None if used[k][c] => {
                        return Err(missing(format!(
                            "its column `{}` was not read before the run",
                            col.name
                        )))
                    }
                    None => HostCol::empty(Elem::of(col.ty)),
                });
            }
            inputs.push(Some(LoadedInput {
                cols,
                reusable: uses[k] > 1 || in_loop_target[k],
            }));
        }
        self.inputs = inputs;
        self.stats.load += load_time + start.elapsed();
        Ok(())
    }

    /// `LoadInput` from the loaded database into `outs` on one device: every row of each
    /// column (see [`Interp::load_rows`]).
    fn load_resident(&mut self, db: &Database, input: usize, outs: &[fox_kernel::BufId]) -> Result<(), RuntimeError> {
        let rel = &self.plan.inputs[input];
        let t = db.table_for(rel).map_err(|msg| RuntimeError::Data { msg })?;
        let source: Vec<Option<ColRef>> = (0..rel.columns.len())
            .map(|c| Database::column(t, c).map(ColRef::Stored))
            .collect();
        self.load_rows(input, &source, LoadRows::Range(None), Some(t), outs, None)
    }

    /// `LoadInput` of the rows `rows` (every row when `None`) of `source`, the columns of
    /// input `input` (`None` for a column not read, which loads empty), into `outs`. When
    /// the columns are the database's (`table`, the table they are columns of), each comes
    /// from `resident` when it holds those rows of that column, otherwise it is uploaded
    /// and left in `resident` when there is one. Under a memory limit, a database column
    /// whose rows are a range of the table's (not hashed) that does not fit beside the
    /// run's buffers (idle resident columns given back first, nothing moved to the host),
    /// or whose input is first read by a filter whose columns of it (those not resident)
    /// do not fit there beside the rows it writes ([`Interp::first_filter_reads`]), is
    /// not uploaded: its slot reads the database's rows in place ([`Tier::Db`]), and
    /// an uploaded one may leave the device the same way ([`Interp::in_db`]). Any other
    /// column that does not fit the device with every other buffer moved stays in the
    /// host tier for this run (its readers take it in chunks) and is not kept. Each output
    /// is defined as soon as it is on the device, so that it may leave it to make room
    /// for the next. Errors are placed at `what`, else at the input's load.
    fn load_rows(
        &mut self,
        input: usize,
        source: &[Option<ColRef>],
        rows: LoadRows,
        table: Option<&std::sync::Arc<crate::database::Table>>,
        outs: &[fox_kernel::BufId],
        what: Option<&dyn Fn() -> String>,
    ) -> Result<(), RuntimeError> {
        let from_database = table.is_some();
        let rel = &self.plan.inputs[input];
        let len = source.iter().flatten().map(|c| c.len()).max().unwrap_or(0);
        let (rows, part) = match rows {
            LoadRows::Range(rows) => {
                let rows = rows.unwrap_or(0..len);
                let part = crate::database::Rows::of(rows.clone(), len);
                (rows, part)
            }
            LoadRows::Hashed { keys, rank, devices } => (0..len, crate::database::Rows::Hashed { keys, rank, devices }),
        };
        let at_copy = || what.map_or_else(|| format!("LoadInput({})", rel.name), |w| w());
        let at_upload = || what.map_or_else(|| format!("load_input[{}]", rel.name), |w| w());
        // The rows of every device of a hashed input, found when a column is first copied.
        let mut routing: Option<std::sync::Arc<crate::routing::Routing>> = None;
        // An input whose first reader is a filter that will run in chunks (the columns it
        // reads that could be read in place, those not resident, and the rows it writes
        // do not fit together) is read in place whole: that filter would drop columns
        // uploaded now to make room and read them again from the database.
        let mut together = 0usize;
        let read = self.first_filter_reads(outs);
        for (c, column) in source.iter().enumerate().take(rel.columns.len()) {
            let key = (rel.name.clone(), c, part.clone());
            let resident = from_database && self.resident.as_ref().is_some_and(|r| r.holds(&key));
            if resident || !read.as_ref().is_some_and(|(cols, _)| cols.contains(&outs[c])) {
                continue;
            }
            let column = column.filter(|h| h.len() == len);
            if let Some(d) = self.database_rows(table, c, column, &part, &rows) {
                together = together.saturating_add(d.rows.len() * d.column().elem().size());
            }
        }
        let all_in_place = match &read {
            Some((_, out_sizes)) if together > 0 => {
                !self.fits_without_moving(together.saturating_add(rows.len().saturating_mul(*out_sizes)))
            }
            _ => false,
        };
        for (c, col) in rel.columns.iter().enumerate() {
            let var = outs[c].0 as usize;
            let key = (rel.name.clone(), c, part.clone());
            if let Some(b) = self
                .resident
                .as_mut()
                .filter(|_| from_database)
                .and_then(|r| r.touch(&key))
            {
                self.define_pinned(var, b, true);
                continue;
            }
            let column = source[c].filter(|h| h.len() == len);
            let in_db = self.database_rows(table, c, column, &part, &rows);
            if let Some(d) = &in_db {
                let bytes = d.rows.len() * d.column().elem().size();
                if all_in_place || !self.fits_without_moving(bytes) {
                    // Its packed rows stay on the device where they fit the share kept
                    // for them; its readers widen their rows from there.
                    self.packed_on_device(d, &[])
                        .map_err(|msg| RuntimeError::Kernel { at: at_upload(), msg })?;
                    self.define_in_database(var, d.clone());
                    continue;
                }
            }
            if let (Some(_), crate::database::Rows::Hashed { keys, devices, .. }, None) = (column, &part, &routing) {
                let found = self
                    .routing(input, source, keys, *devices, from_database)
                    .map_err(|msg| RuntimeError::Kernel { at: at_copy(), msg })?;
                routing = Some(found);
            }
            // A hashed part is gathered on the host (widened as it is gathered); a whole
            // column or a run of its rows is uploaded from the column itself (the rows of
            // a packed one widened first).
            let picked = match (column, &part, &routing) {
                (Some(h), crate::database::Rows::Hashed { rank, .. }, Some(r)) => {
                    let what = format!("a part of `{}`", rel.name);
                    Some(
                        match h {
                            ColRef::Host(h) => r.pick(h, *rank, &what),
                            ColRef::Stored(s) => r.pick_stored(s, *rank, &what),
                        }
                        .map_err(|msg| RuntimeError::Kernel { at: at_copy(), msg })?,
                    )
                }
                (Some(_), _, _) => None,
                (None, _, _) => Some(HostCol::empty(Elem::of(col.ty))),
            };
            let bytes = match (&picked, column) {
                (Some(p), _) => p.len() * p.elem().size(),
                (None, Some(h)) => rows.len() * h.elem().size(),
                (None, None) => 0,
            };
            let stays = self.stays_on_host(bytes);
            if stays.map_err(|msg| RuntimeError::Kernel { at: at_upload(), msg })? {
                let host = match (picked, column) {
                    (Some(p), _) => p,
                    (None, Some(h)) => h
                        .slice(rows.start, rows.end, &format!("a part of `{}`", rel.name))
                        .map_err(|msg| RuntimeError::Kernel { at: at_copy(), msg })?,
                    (None, None) => HostCol::empty(Elem::of(col.ty)),
                };
                self.define_in_host_tier(var, host);
                continue;
            }
            let keep = from_database && self.resident.is_some() && column.is_some() && self.admit_resident(bytes);
            // Rows whose packed rows an earlier run kept on the device are widened there.
            let kept = in_db.as_ref().filter(|d| self.packed_kept(d)).cloned();
            let up = match (picked, column) {
                _ if kept.is_some() => {
                    let d = kept.expect("checked");
                    self.upload_db_rows(&d, 0..d.rows.len(), &[])
                        .map_err(crate::BackendError)
                }
                (Some(p), _) => self.upload_room(p),
                (None, Some(ColRef::Host(h))) => self.upload_room_rows(h, rows.clone()),
                (None, Some(ColRef::Stored(s))) => self.upload_room_stored(s, rows.clone()),
                (None, None) => self.upload_room(HostCol::empty(Elem::of(col.ty))),
            };
            let b = up.map_err(|e| RuntimeError::Kernel {
                at: at_upload(),
                msg: e.0,
            })?;
            if keep {
                let copy = DevBuf {
                    id: b.id,
                    elem: b.elem,
                    len: b.len,
                };
                if let Some(r) = self.resident.as_mut() {
                    r.keep(key, b);
                }
                self.define_pinned(var, copy, true);
            } else {
                self.define(var, b);
            }
            if let (Some(d), Some(slot)) = (in_db, self.vars[var]) {
                self.in_db[slot] = Some(d);
            }
        }
        Ok(())
    }

    /// The routing of input `input` (columns `source`, the database's when
    /// `from_database`) hashed on the columns `keys` over the run's `devices` devices:
    /// made once per run by the first device of several that needs it, the others waiting
    /// for it ([`crate::spmd::Comm::routing`]), and taken from the database when an earlier run
    /// left it there ([`Database::routing`]). A routing this device made counts in
    /// `RunStats::exchange.routings`.
    fn routing(
        &mut self,
        input: usize,
        source: &[Option<ColRef>],
        keys: &[usize],
        devices: usize,
        from_database: bool,
    ) -> Result<std::sync::Arc<crate::routing::Routing>, String> {
        use crate::routing::Routing;
        let name = &self.plan.inputs[input].name;
        // Routed on the key columns as plans read them (packed ones widened meanwhile).
        let of_source = || -> Result<Routing, String> {
            let wide: Vec<Option<std::borrow::Cow<HostCol>>> = source
                .iter()
                .enumerate()
                .map(|(c, s)| match s {
                    Some(s) if keys.contains(&c) => s.widen(&format!("a key of `{name}`, widened")).map(Some),
                    _ => Ok(None),
                })
                .collect::<Result<_, String>>()?;
            let len = source.iter().flatten().map(|c| c.len()).max().unwrap_or(0);
            if wide.iter().flatten().any(|k| k.len() != len) {
                return Err(format!(
                    "the key columns of `{name}`, hashed over the devices, are not all loaded"
                ));
            }
            let cols: Vec<Option<&HostCol>> = wide.iter().map(|c| c.as_deref()).collect();
            Routing::of(&cols, keys, devices)
        };
        let db = self.database.clone().filter(|_| from_database);
        let mut made = false;
        let mut make = || match &db {
            Some(db) => db.routing(name, keys, devices, of_source).map(|(r, new)| {
                made = new;
                r
            }),
            None => {
                made = true;
                of_source().map(std::sync::Arc::new)
            }
        };
        let routing = match self.spmd.as_ref().map(|d| d.comm) {
            Some(comm) => comm.routing(&(name.clone(), keys.to_vec()), make)?,
            None => make()?,
        };
        if made {
            self.stats.exchange.routings += 1;
        }
        Ok(routing)
    }

    /// Under a memory limit, the rows `rows` of column `c` of the database's `table` when
    /// `column` is that column and `part` a range of its rows: what a slot loaded from
    /// them may read in place instead of on the device. `None` without a limit, for a
    /// column not from the database and for a device's hashed rows (a copy of its own).
    fn database_rows(
        &self,
        table: Option<&std::sync::Arc<crate::database::Table>>,
        c: usize,
        column: Option<ColRef>,
        part: &crate::database::Rows,
        rows: &std::ops::Range<usize>,
    ) -> Option<DbRows> {
        self.memory_limit?;
        let (table, column) = (table?, column?);
        let same = match column {
            ColRef::Stored(s) => Database::column(table, c).is_some_and(|h| std::ptr::eq(h, s)),
            ColRef::Host(_) => false,
        };
        let ranged = matches!(part, crate::database::Rows::All | crate::database::Rows::Part(_));
        (same && ranged && rows.end <= column.len()).then(|| DbRows {
            table: table.clone(),
            col: c,
            rows: rows.clone(),
        })
    }

    /// When the first instruction after the current one (in its block) that reads one of
    /// `vars` is a filter's `Eval` or `Compact`: the variables of `vars` it reads, and the
    /// bytes per row of its outputs (at most one row per row it reads); `None` for
    /// another reader or none.
    fn first_filter_reads(&self, vars: &[fox_kernel::BufId]) -> Option<(Vec<fox_kernel::BufId>, usize)> {
        let (block, i) = self.pos;
        let b = self.plan.blocks.get(block)?;
        for ins in b.instrs.iter().skip(i + 1) {
            let Instr::Launch { kernel, args, outs, .. } = ins else {
                continue;
            };
            if !args.iter().any(|a| vars.contains(a)) {
                continue;
            }
            if !matches!(kernel, Kernel::Eval { .. } | Kernel::Compact) {
                return None;
            }
            let read = args.iter().filter(|a| vars.contains(a)).copied().collect();
            let sizes = outs
                .iter()
                .filter_map(|o| self.plan.buffers.get(o.0 as usize))
                .map(|b| b.elem.size())
                .sum();
            return Some((read, sizes));
        }
        None
    }

    /// Whether `bytes` more fit the run's device budget beside the buffers in use, once
    /// the resident columns the run does not hold are given back (their rows stay in the
    /// database); no buffer of the run moves.
    fn fits_without_moving(&mut self, bytes: usize) -> bool {
        let Some(cap) = self.device_cap else {
            return true;
        };
        let need = |s: &Self| (s.backend.mem().in_use as u64).saturating_add(bytes as u64);
        if need(self) > cap {
            let short = need(self) - cap;
            self.release_resident(short.min(usize::MAX as u64) as usize);
        }
        need(self) <= cap
    }

    /// Defines `var` as the database's rows `rows`, read where the database holds them
    /// until an instruction reads them on the device.
    fn define_in_database(&mut self, var: usize, rows: DbRows) {
        let stale = DevBuf {
            id: u64::MAX,
            elem: rows.column().elem(),
            len: rows.rows.len(),
        };
        self.stats.tier.in_database += 1;
        self.stats.tier.in_database_bytes += stale.bytes() as u64;
        self.define(var, stale);
        let slot = self.vars[var].expect("just defined");
        self.tiers[slot] = Tier::Db(rows.clone());
        self.in_db[slot] = Some(rows);
    }

    /// Defines `out` as the resident buffer `key`, uploading the column `make` gives (and
    /// keeping it in the resident) when the resident does not hold it yet. Errors are
    /// placed at `what`.
    fn keep_resident(
        &mut self,
        key: crate::database::ResidentKey,
        out: fox_kernel::BufId,
        what: &dyn Fn() -> String,
        make: impl FnOnce() -> Result<HostCol, String>,
    ) -> Result<(), RuntimeError> {
        if let Some(b) = self.resident.as_mut().and_then(|r| r.touch(&key)) {
            self.define_pinned(out.0 as usize, b, true);
            return Ok(());
        }
        let col = make().map_err(|msg| RuntimeError::Kernel { at: what(), msg })?;
        let keep = self.admit_resident(col.len() * col.elem().size());
        let b = self
            .upload_room(col)
            .map_err(|e| RuntimeError::Kernel { at: what(), msg: e.0 })?;
        match self.resident.as_mut().filter(|_| keep) {
            Some(r) => {
                let copy = DevBuf {
                    id: b.id,
                    elem: b.elem,
                    len: b.len,
                };
                r.keep(key, b);
                self.define_pinned(out.0 as usize, copy, true);
            }
            None => self.define(out.0 as usize, b),
        }
        Ok(())
    }

    /// Runs the plan's blocks from the entry, with the backend's checks deferred within the
    /// run ([`Backend::set_check_site`]) and all of them read before it ends.
    fn execute(&mut self) -> Result<(), RuntimeError> {
        self.begin_resident();
        let res = self.execute_blocks();
        let dropped = self.backend.set_check_site(None);
        res?;
        dropped.map_err(|e| RuntimeError::Kernel {
            at: "the end of the run".to_string(),
            msg: e.0,
        })
    }

    fn execute_blocks(&mut self) -> Result<(), RuntimeError> {
        let plan = self.plan;
        let mut block = plan.entry.0 as usize;
        if block >= plan.blocks.len() {
            return Err(RuntimeError::Plan(format!(
                "the entry block {block} does not exist (the plan has {} blocks)",
                plan.blocks.len()
            )));
        }
        // Per loop body: the times it ran since its loop was entered (for the observer).
        let mut entered = vec![0u64; plan.blocks.len()];
        let bodies: Vec<usize> = plan
            .blocks
            .iter()
            .filter_map(|b| match &b.term {
                Terminator::LoopIf { body, .. } => Some(body.0 as usize),
                _ => None,
            })
            .collect();
        loop {
            let b = &plan.blocks[block];
            if bodies.contains(&block) {
                entered[block] += 1;
            }
            for (i, ins) in b.instrs.iter().enumerate() {
                self.check_cancel()?;
                // An instruction run with the one before it (`Interp::filter_in_rows`).
                if self.fused.take_if(|&mut at| at == (block, i)).is_some() {
                    continue;
                }
                self.pos = (block, i);
                let set = self.backend.set_check_site(Some((block, i)));
                if let Err(e) = set.map_err(|e| RuntimeError::Kernel {
                    at: at(plan, block, i),
                    msg: e.0,
                }) {
                    return Err(self.relocate(block, i, e));
                }
                if let Err(e) = self.instr(block, i, ins) {
                    return Err(self.relocate(block, i, e));
                }
                if let Some(d) = &self.spmd {
                    d.comm.progress();
                }
            }
            let next = match &b.term {
                Terminator::Halt => {
                    // Every deferred check is read before the run's results stand.
                    let last = b.instrs.len().saturating_sub(1);
                    return self.backend.sync().map_err(|e| {
                        let e = RuntimeError::Kernel {
                            at: format!("block `{}` ({block}), its end", b.label),
                            msg: e.0,
                        };
                        self.relocate(block, last, e)
                    });
                }
                Terminator::Jump(t) => *t,
                Terminator::LoopIf { nonempty, body, exit } => {
                    let mut any = false;
                    for buf in nonempty {
                        let slot = self.var_slot(buf.0 as usize).map_err(|what| {
                            RuntimeError::Plan(format!("block `{}`: the loop test reads {what}", b.label))
                        })?;
                        if self.test_rows(slot) > 0 {
                            any = true;
                            break;
                        }
                    }
                    let rows: u64 = nonempty
                        .iter()
                        .filter_map(|buf| self.var_slot(buf.0 as usize).ok())
                        .map(|slot| self.test_rows(slot))
                        .sum();
                    let (any, rows) = self.decide(block, any, rows)?;
                    if let (Some(o), Some(body_block), true) =
                        (&self.observer, plan.blocks.get(body.0 as usize), self.leads())
                    {
                        o.event(&RunEvent::Iteration {
                            block: &body_block.label,
                            iterations: entered[body.0 as usize],
                            rows,
                        });
                    }
                    if let (true, Some(max), Some(body_block)) =
                        (any, self.max_iterations, plan.blocks.get(body.0 as usize))
                    {
                        let done = entered[body.0 as usize];
                        if done >= max && body_block.label.starts_with("stratum ") {
                            return Err(RuntimeError::Program {
                                msg: format!(
                                    "the recursion of `{}` reached no fixpoint within {max} iteration{} (the limit of --max-iterations): the last derived {rows} new row{}",
                                    body_block.label,
                                    if max == 1 { "" } else { "s" },
                                    if rows == 1 { "" } else { "s" }
                                ),
                                origin: None,
                                notes: Vec::new(),
                            });
                        }
                    }
                    if let (false, Some(e)) = (any, entered.get_mut(body.0 as usize)) {
                        *e = 0;
                    }
                    if any {
                        *body
                    } else {
                        *exit
                    }
                }
                Terminator::If {
                    nonempty,
                    then,
                    otherwise,
                } => {
                    let mut any = false;
                    for buf in nonempty {
                        let slot = self.var_slot(buf.0 as usize).map_err(|what| {
                            RuntimeError::Plan(format!("block `{}`: the branch test reads {what}", b.label))
                        })?;
                        any |= self.test_rows(slot) > 0;
                    }
                    let (any, _) = self.decide(block, any, 0)?;
                    if any {
                        *then
                    } else {
                        *otherwise
                    }
                }
            };
            if next.0 as usize >= plan.blocks.len() {
                return Err(RuntimeError::Plan(format!(
                    "block `{}` jumps to block {}, which does not exist (the plan has {} blocks)",
                    b.label,
                    next.0,
                    plan.blocks.len()
                )));
            }
            block = next.0 as usize;
        }
    }

    fn notify(&self, event: &RunEvent<'_>) {
        if let Some(o) = &self.observer {
            o.event(event);
        }
    }

    /// `Err(Cancelled)` once the run's token is set. (A device of several goes on when
    /// another fails, up to its next collective, so that which devices fail, and so the
    /// run's error, does not depend on timing.)
    /// On several devices, a run halted because it stalled (see [`crate::spmd`]) stops
    /// every device the same way, as a peer of the device that saw the stall.
    fn check_cancel(&self) -> Result<(), RuntimeError> {
        match &self.cancel {
            Some(t) if t.is_cancelled() => Err(RuntimeError::Cancelled),
            _ => match &self.spmd {
                Some(d) if d.comm.is_halted_for(d.rank) => {
                    self.peer_stop.set(true);
                    Err(RuntimeError::Cancelled)
                }
                _ => Ok(()),
            },
        }
    }
}

/// The flag kernels read to stop early: on several devices the run's
/// ([`crate::spmd::Comm::halt_flag`], which a cancellation sets too), else the
/// cancellation token's.
fn stop_flag<'f>(
    spmd: &'f Option<Device<'_>>,
    cancel: &'f Option<crate::CancelToken>,
) -> &'f std::sync::atomic::AtomicBool {
    match (spmd, cancel) {
        (Some(d), _) => d.comm.halt_flag(),
        (None, Some(t)) => t.flag(),
        (None, None) => crate::cancel::never(),
    }
}

impl Interp<'_> {
    /// Whether this interpreter tells the observer and makes the outputs: the only one,
    /// or device 0 of several.
    fn leads(&self) -> bool {
        self.spmd.as_ref().is_none_or(|d| d.rank == 0)
    }

    /// Deposits `value` at the collective at `tag` (block, instruction; a terminator is
    /// its block's instruction `instrs.len()`) and returns every device's deposit, once
    /// all came. Only in a run over several devices.
    fn collective<T: std::any::Any + Send + Sync>(
        &self,
        tag: crate::spmd::Tag,
        value: T,
        what: &dyn Fn() -> String,
    ) -> Result<std::sync::Arc<crate::spmd::Gathered>, RuntimeError> {
        let d = self.spmd.as_ref().expect("collectives run on several devices");
        if self.plan.blocks.get(tag.0).is_some_and(|b| b.local) {
            return Err(RuntimeError::Plan(format!(
                "{}: a collective in a block each device runs by itself (the devices would not all reach it)",
                what()
            )));
        }
        match d.comm.all_gather(d.rank, tag, value) {
            Ok(g) => match g.mismatch() {
                Some(m) => Err(RuntimeError::Plan(format!("{}: {m}", what()))),
                None => Ok(g),
            },
            Err(e) => Err(crate::spmd::comm_error(e, &what()).unwrap_or_else(|| {
                self.peer_stop.set(true);
                RuntimeError::Cancelled
            })),
        }
    }

    /// The test of a terminator over every device: whether it holds on any, and the rows
    /// of its buffers on all of them together. On one device, `(any, rows)` as they are.
    /// A block each device runs by itself ([`fox_kernel::Block::local`]) decides alone.
    fn decide(&self, block: usize, any: bool, rows: u64) -> Result<(bool, u64), RuntimeError> {
        let b = &self.plan.blocks[block];
        if self.spmd.is_none() || b.local {
            return Ok((any, rows));
        }
        let what = || format!("block `{}`: the test that ends it", b.label);
        let g = self.collective((block, b.instrs.len()), (any, rows), &what)?;
        let n = self.spmd.as_ref().map_or(1, |d| d.comm.size());
        Ok((0..n).fold((false, 0), |(a, r), d| {
            let (x, y) = *g.get::<(bool, u64)>(d);
            (a || x, r + y)
        }))
    }

    /// The rows of a buffer a terminator tests: none for a spent window.
    fn test_rows(&self, slot: usize) -> u64 {
        if self.spent.get(slot).copied().unwrap_or(false) {
            0
        } else {
            self.slot_buf(slot).len as u64
        }
    }

    fn buf_name(&self, var: usize) -> String {
        match self.plan.buffers.get(var) {
            Some(b) => format!("buffer `{}` (b{var})", b.name),
            None => format!("buffer b{var}"),
        }
    }

    /// The slot a variable holds, or a description of what is wrong with it.
    fn var_slot(&self, var: usize) -> Result<usize, String> {
        match self.vars.get(var) {
            None => Err(format!(
                "buffer b{var}, which does not exist (the plan has {} buffers)",
                self.plan.buffers.len()
            )),
            Some(None) => Err(format!("{}, which is not defined here", self.buf_name(var))),
            Some(Some(s)) => Ok(*s),
        }
    }

    fn slot_buf(&self, slot: usize) -> &DevBuf {
        &self.slots[slot].as_ref().expect("a variable's slot is occupied").0
    }

    fn check_out(&self, var: usize) -> Result<Elem, String> {
        self.plan.buffers.get(var).map(|b| b.elem).ok_or_else(|| {
            format!(
                "buffer b{var}, which does not exist (the plan has {} buffers)",
                self.plan.buffers.len()
            )
        })
    }

    /// Drops a variable's value, freeing its device buffer when no other variable holds it.
    fn release(&mut self, var: usize) {
        let Some(slot) = self.vars.get_mut(var).and_then(Option::take) else {
            return;
        };
        self.live_vars -= 1;
        let entry = self.slots[slot].as_mut().expect("a variable's slot is occupied");
        entry.1 -= 1;
        if entry.1 == 0 {
            let (buf, _) = self.slots[slot].take().expect("checked above");
            self.free_slots.push(slot);
            let pinned = std::mem::take(&mut self.pinned[slot]);
            match std::mem::replace(&mut self.tiers[slot], Tier::Device) {
                Tier::Device if !pinned => self.backend.free(buf),
                Tier::Host(_) => self.host_in_use -= buf.bytes() as u64,
                Tier::Device | Tier::Db(_) | Tier::Gone => {}
            }
        }
    }

    fn assign(&mut self, var: usize, slot: usize) {
        self.release(var);
        self.vars[var] = Some(slot);
        self.live_vars += 1;
        self.stats.actual_peak_buffers = self.stats.actual_peak_buffers.max(self.live_vars);
    }

    fn define(&mut self, var: usize, buf: DevBuf) {
        self.define_pinned(var, buf, false);
    }

    fn define_pinned(&mut self, var: usize, buf: DevBuf, pinned: bool) {
        let slot = self.new_slot(buf, pinned);
        self.assign(var, slot);
    }

    /// A slot holding `buf` once, on the device, not yet named by any variable.
    fn new_slot(&mut self, buf: DevBuf, pinned: bool) -> usize {
        match self.free_slots.pop() {
            Some(s) => {
                self.slots[s] = Some((buf, 1));
                self.pinned[s] = pinned;
                self.tiers[s] = Tier::Device;
                self.in_db[s] = None;
                if let Some(x) = self.spent.get_mut(s) {
                    *x = false;
                }
                s
            }
            None => {
                self.slots.push(Some((buf, 1)));
                self.pinned.push(pinned);
                self.tiers.push(Tier::Device);
                self.in_db.push(None);
                self.slots.len() - 1
            }
        }
    }

    fn release_all(&mut self) {
        for var in 0..self.vars.len() {
            self.release(var);
        }
    }

    /// The buffers that may leave the device now, in the order they should ([`tier`]):
    /// on the device, not resident, not empty, and none of the slots of `keep`. (A
    /// resident column the run holds stays: its readers run in pieces beside it, sliced
    /// on the device, which moves fewer bytes than taking it to the host; one the run no
    /// longer holds is given back instead, [`Interp::release_resident`].)
    fn victims(&self, keep: &[usize]) -> Vec<Candidate> {
        let (block, i) = self.pos;
        let mut holders: Vec<Vec<u32>> = vec![Vec::new(); self.slots.len()];
        for (v, s) in self.vars.iter().enumerate() {
            if let Some(s) = s {
                holders[*s].push(v as u32);
            }
        }
        let cands = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(s, entry)| {
                let (buf, _) = entry.as_ref()?;
                if !matches!(self.tiers[s], Tier::Device) || self.pinned[s] || buf.bytes() == 0 || keep.contains(&s) {
                    return None;
                }
                let next_use = holders[s]
                    .iter()
                    .filter_map(|&v| tier::next_use(&self.plan.blocks, block, i, v))
                    .min();
                Some(Candidate {
                    slot: s,
                    next_use,
                    bytes: buf.bytes(),
                })
            })
            .collect();
        tier::victim_order(cands)
    }

    /// Gives back resident columns ([`Resident`]) that no buffer of this run holds, in
    /// the order [`Interp::resident_victims`] gives (those the run reads last), until at
    /// least `target` bytes have left the device (all of them when `target` is
    /// `usize::MAX`); the bytes freed. Such a column takes the device budget without
    /// serving the run now, and the database keeps its rows: the next run that reads it
    /// uploads it again. Columns the run holds stay.
    fn release_resident(&mut self, target: usize) -> usize {
        let mut freed = 0;
        for key in self.resident_victims(true) {
            if freed >= target {
                break;
            }
            freed += self.free_resident(&key);
        }
        freed
    }

    /// The resident buffers no buffer of this run holds, in the order they are freed
    /// (see [`Resident`]): those of a column the run reads with other rows, then those of
    /// columns it does not read, then (with `wanted`) those it reads; each group least
    /// recently used first, then by table, column and rows.
    fn resident_victims(&self, wanted: bool) -> Vec<crate::database::ResidentKey> {
        let Some(r) = self.resident.as_ref() else {
            return Vec::new();
        };
        let held: std::collections::HashSet<u64> = self
            .slots
            .iter()
            .zip(&self.pinned)
            .filter_map(|(e, &p)| e.as_ref().filter(|_| p).map(|(b, _)| b.id))
            .collect();
        let columns: std::collections::HashSet<(&str, usize)> =
            self.wanted.keys().map(|(t, c, _)| (t.as_str(), *c)).collect();
        let mut keys: Vec<(u8, u64, &crate::database::ResidentKey)> = r
            .bufs
            .iter()
            .filter(|(_, b)| !held.contains(&b.id))
            .filter_map(|(k, _)| {
                // Packed rows the run reads are given back last ([`Interp::make_room`]).
                let group = if matches!(k.2, crate::database::Rows::Packed(_)) {
                    if self.reads_packed(k) {
                        return None;
                    }
                    1
                } else if self.wanted.contains_key(k) {
                    2
                } else if columns.contains(&(k.0.as_str(), k.1)) {
                    0
                } else {
                    1
                };
                (group < 2 || wanted).then(|| (group, r.used.get(k).copied().unwrap_or(0), k))
            })
            .collect();
        keys.sort_by(|(g, u, x), (h, v, y)| (g, u, &x.0, x.1, x.2.order()).cmp(&(h, v, &y.0, y.1, y.2.order())));
        keys.into_iter().map(|(_, _, k)| k.clone()).collect()
    }

    /// Frees the resident buffer `key`; its bytes (0 when there is none).
    fn free_resident(&mut self, key: &crate::database::ResidentKey) -> usize {
        let Some(r) = self.resident.as_mut() else {
            return 0;
        };
        r.used.remove(key);
        let Some(b) = r.bufs.remove(key) else {
            return 0;
        };
        let bytes = b.bytes();
        self.backend.free(b);
        self.stats.tier.resident_released += 1;
        self.stats.tier.resident_released_bytes += bytes as u64;
        bytes
    }

    /// Frees resident buffers in the order of [`Interp::resident_victims`] (`wanted`: also
    /// those the run reads) until at most `bound` bytes are resident, or none is left to
    /// free.
    fn trim_resident(&mut self, bound: u64, wanted: bool) {
        let over = |s: &Self| s.resident.as_ref().is_some_and(|r| r.bytes() as u64 > bound);
        if !over(self) {
            return;
        }
        for key in self.resident_victims(wanted) {
            self.free_resident(&key);
            if !over(self) {
                break;
            }
        }
    }

    /// Before the first instruction: counts the run on the resident and works out the
    /// buffers it reads and its bound. When the buffers it reads would not all fit under
    /// the bound beside those kept, the other placements of the columns it reads are
    /// freed whole; then resident buffers are freed down to the bound (see [`Resident`]).
    fn begin_resident(&mut self) {
        if self.resident.is_none() {
            return;
        }
        self.wanted = self.wanted_keys();
        if self.memory_limit.is_some() && self.backend.memory_is_separate() {
            self.signature = self.plan_signature();
        }
        let cap = self.device_cap;
        let r = self.resident.as_mut().expect("checked above");
        self.packed_off = r.without_packed.contains(&self.signature);
        r.runs += 1;
        r.bound = r.bound_under(cap);
        self.resident_begun = true;
        let Some(bound) = r.bound else {
            return;
        };
        let missing: u64 = self
            .wanted
            .iter()
            .filter(|(k, _)| !r.bufs.contains_key(*k))
            .map(|(_, b)| b)
            .sum();
        if (r.bytes() as u64).saturating_add(missing) > bound {
            let columns: std::collections::HashSet<(&str, usize)> =
                self.wanted.keys().map(|(t, c, _)| (t.as_str(), *c)).collect();
            let others: Vec<crate::database::ResidentKey> = r
                .bufs
                .keys()
                .filter(|k| {
                    !self.wanted.contains_key(*k)
                        && columns.contains(&(k.0.as_str(), k.1))
                        && !matches!(k.2, crate::database::Rows::Packed(_))
                })
                .cloned()
                .collect();
            for k in others {
                self.free_resident(&k);
            }
        }
        self.trim_resident(bound, true);
    }

    /// After the run (its own buffers freed, the device's peak `peak`): records its
    /// working set, and frees resident buffers down to the bound that gives (see
    /// [`Resident`]).
    fn end_resident(&mut self, peak: usize) {
        let cap = self.device_cap;
        if !self.resident_begun {
            return;
        }
        let Some(r) = self.resident.as_mut() else {
            return;
        };
        let working = (peak as u64).saturating_sub(r.bytes() as u64);
        r.room = r.room.max(working);
        r.bound = r.bound_under(cap);
        // Packed rows kept at the price of room the run's own buffers needed (it gave
        // them back, or moved more than a 64th of the bytes widened from them to the
        // host): the plan keeps none from its next run on.
        let t = &self.stats.tier;
        if !self.packed_off
            && t.widened_on_device + t.packed_kept > 0
            && (self.packed_closed || t.bytes_to_host.saturating_mul(64) > t.widened_on_device_bytes)
        {
            r.without_packed.insert(self.signature);
        }
        if let Some(bound) = r.bound {
            self.trim_resident(bound, true);
        }
    }

    /// A signature of the plan, for what [`Resident`] learns of its runs: the resident
    /// buffers it reads ([`Interp::wanted_keys`], in order), its buffers' count and each
    /// block's label and number of instructions (cheap next to a run; two plans that
    /// share them share what is learnt).
    fn plan_signature(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        let mut keys: Vec<&crate::database::ResidentKey> = self.wanted.keys().collect();
        keys.sort_by(|x, y| (&x.0, x.1, x.2.order()).cmp(&(&y.0, y.1, y.2.order())));
        for k in keys {
            (&k.0, k.1, k.2.order()).hash(&mut h);
        }
        self.plan.buffers.len().hash(&mut h);
        for b in &self.plan.blocks {
            (&b.label, b.instrs.len()).hash(&mut h);
        }
        h.finish()
    }

    /// Whether a column of `bytes` uploaded now may be kept resident: it fits under the
    /// run's bound once the resident buffers the run neither holds nor reads are freed
    /// (which they are, as far as needed). Always true without a bound.
    fn admit_resident(&mut self, bytes: usize) -> bool {
        let Some(bound) = self.resident.as_ref().and_then(|r| r.bound) else {
            return true;
        };
        let Some(room) = bound.checked_sub(bytes as u64) else {
            return false;
        };
        self.trim_resident(room, false);
        self.resident.as_ref().is_some_and(|r| r.bytes() as u64 <= room)
    }

    /// The resident buffers the plan's instructions read on this device: the rows of each
    /// loaded column of each database input it loads (as [`Interp::load_rows`] keys
    /// them), and the dictionary's tables it keeps; with the bytes of each (of a device's
    /// hashed rows, its share of the column's).
    fn wanted_keys(&self) -> std::collections::HashMap<crate::database::ResidentKey, u64> {
        use crate::database::Rows;
        let mut keys = std::collections::HashMap::new();
        let device = self.spmd.as_ref().map(|d| (d.rank, d.comm.size()));
        for ins in self.plan.blocks.iter().flat_map(|b| &b.instrs) {
            let Instr::Launch { kernel, .. } = ins else { continue };
            match kernel {
                Kernel::LoadInput { input, whole, hash } => {
                    let (Some(db), Some(rel)) = (&self.database, self.plan.inputs.get(*input)) else {
                        continue;
                    };
                    let Ok(t) = db.table_for(rel) else { continue };
                    let cols: Vec<(usize, usize, usize)> = (0..rel.columns.len())
                        .filter_map(|c| Database::column(t, c).map(|h| (c, h.len(), h.elem().size())))
                        .collect();
                    let len = cols.iter().map(|&(_, l, _)| l).max().unwrap_or(0);
                    let rows = match device {
                        None => Rows::All,
                        Some(_) if *whole => Rows::All,
                        Some((rank, devices)) if !hash.is_empty() => Rows::Hashed {
                            keys: hash.clone(),
                            rank,
                            devices,
                        },
                        Some((rank, n)) => Rows::of(crate::spmd::input_rows(len, rank, n), len),
                    };
                    let share = match (&rows, device) {
                        (Rows::All, _) | (_, None) => len,
                        (Rows::Part(r) | Rows::Packed(r), _) => r.len(),
                        (Rows::Hashed { .. }, Some((_, n))) => len.div_ceil(n),
                    };
                    for (c, l, size) in cols {
                        if l == len {
                            keys.insert((rel.name.clone(), c, rows.clone()), (share * size) as u64);
                        }
                    }
                }
                Kernel::DictTable { op } if self.resident.is_some() => {
                    let n = self.dict.len();
                    let bytes = 4 * n as u64;
                    if *op == fox_kernel::DictOp::Rank {
                        keys.insert(("$rank".to_string(), n, Rows::All), bytes);
                    }
                    if dict_index(op) {
                        keys.insert((format!("$dict {op:?}"), n, Rows::All), bytes);
                    }
                }
                _ => {}
            }
        }
        keys
    }

    /// Moves a slot's buffer to the host tier: downloaded, its device buffer freed; one
    /// holding a database's rows ([`Interp::in_db`]) is only freed, its slot reading them
    /// from the database.
    fn evict(&mut self, slot: usize) -> Result<(), String> {
        let buf = &self.slots[slot].as_ref().expect("occupied").0;
        let stale = DevBuf {
            id: buf.id,
            elem: buf.elem,
            len: buf.len,
        };
        if let Some(rows) = self.in_db[slot].clone() {
            let bytes = stale.bytes() as u64;
            self.backend.free(stale);
            self.tiers[slot] = Tier::Db(rows);
            self.stats.tier.in_database += 1;
            self.stats.tier.in_database_bytes += bytes;
            return Ok(());
        }
        let t = Instant::now();
        let bytes = stale.bytes() as u64;
        let col = self.backend.take(stale);
        self.stats.download += t.elapsed();
        let col = col.map_err(|e| format!("cannot move a buffer to the host tier: {}", e.0))?;
        self.tiers[slot] = Tier::Host(col);
        self.count_to_host(bytes);
        Ok(())
    }

    /// Counts a launch of the instruction running now that ran in `pieces` pieces.
    fn note_pieces(&mut self, pieces: u64) {
        self.stats.tier.operators_in_pieces += 1;
        self.stats.tier.pieces += pieces;
        let e = self.pieces.entry(self.pos).or_default();
        e.0 += 1;
        e.1 += pieces;
    }

    /// Counts `bytes` more held in the host tier (an eviction, or an output made there).
    fn count_to_host(&mut self, bytes: u64) {
        self.host_in_use += bytes;
        let t = &mut self.stats.tier;
        t.evictions += 1;
        t.bytes_to_host += bytes;
        t.host_peak_bytes = t.host_peak_bytes.max(self.host_in_use);
    }

    /// Whether a column of `bytes` must stay in the host tier: it does not fit the device
    /// budget beside the buffers in use once every other buffer has moved (room is made
    /// first). Always false without a budget.
    fn stays_on_host(&mut self, bytes: usize) -> Result<bool, String> {
        let Some(cap) = self.device_cap else {
            return Ok(false);
        };
        self.make_room(bytes, &[])?;
        Ok((self.backend.mem().in_use as u64).saturating_add(bytes as u64) > cap)
    }

    /// Takes what may leave the device off it, in [`Interp::leaving`]'s order (keeping
    /// the slots of `keep`), until at least `target` bytes have left; the bytes moved
    /// (fewer when nothing is left to move).
    fn evict_some(&mut self, target: usize, keep: &[usize]) -> Result<usize, String> {
        let mut freed = self.release_resident(target);
        for l in self.leaving(keep) {
            if freed >= target {
                break;
            }
            freed += self.leave(l)?;
        }
        Ok(freed)
    }

    /// What may leave the device for a launch or an allocation that keeps the slots of
    /// `keep` (besides the resident columns no buffer of the run holds), in the order it
    /// leaves: the run's buffers in [`Interp::victims`]' order; with packed rows kept,
    /// the device copies of the database's rows first (they are only freed), then the
    /// packed rows the run reads (where `packed_last_resort` allows), and only
    /// then the run's other buffers, which go to the host.
    fn leaving(&self, keep: &[usize]) -> Vec<Leaving> {
        let victims = self.victims(keep);
        if self.packed_share().is_none() {
            return victims.into_iter().map(Leaving::Slot).collect();
        }
        let (copies, others): (Vec<Candidate>, Vec<Candidate>) =
            victims.into_iter().partition(|c| self.in_db[c.slot].is_some());
        let packed = if self.packed_last_resort {
            self.packed_read()
        } else {
            Vec::new()
        };
        copies
            .into_iter()
            .map(Leaving::Slot)
            .chain(packed.into_iter().map(Leaving::Packed))
            .chain(others.into_iter().map(Leaving::Slot))
            .collect()
    }

    /// Takes `l` off the device: a slot to the host tier (or freed, when it copies the
    /// database's rows), packed rows given back (the run keeps no more of them); its bytes.
    fn leave(&mut self, l: Leaving) -> Result<usize, String> {
        match l {
            Leaving::Slot(c) => {
                self.evict(c.slot)?;
                Ok(c.bytes)
            }
            Leaving::Packed(key) => {
                self.packed_closed = true;
                Ok(self.free_resident(&key))
            }
        }
    }

    /// The bytes the outputs `out_elems` of a launch of `kernel` over `args` take whatever
    /// its arguments hold: one row per row of its first argument for `Eval` (over its
    /// columns), `AdjacentDistinct` and `RangeCount`, per position for `Gather`; 0 where
    /// that is not known before the launch.
    fn known_out_bytes(&self, kernel: &Kernel, args: &[usize], out_elems: &[Elem]) -> u64 {
        let rowed = matches!(
            kernel,
            Kernel::Eval { n_cols: 1.., .. } | Kernel::AdjacentDistinct | Kernel::RangeCount | Kernel::Gather { .. }
        );
        match args.first() {
            Some(&s) if rowed => {
                let n = self.slot_buf(s).len as u64;
                out_elems.iter().map(|e| n.saturating_mul(e.size() as u64)).sum()
            }
            _ => 0,
        }
    }

    /// When the arguments `args` that are off the device, with `outs` bytes of outputs
    /// beside them, cannot fit the run's device budget even once every buffer that may
    /// leave it has left (every other buffer of the run, and every resident one it does
    /// not hold): the bytes they need and the bytes the budget could leave them.
    fn never_fits(&self, args: &[usize], outs: u64) -> Option<(u64, u64)> {
        let cap = self.device_cap?;
        let mut seen = std::collections::HashSet::new();
        let need: u64 = args
            .iter()
            .filter(|&&s| seen.insert(s) && !matches!(self.tiers[s], Tier::Device))
            .map(|&s| self.slot_buf(s).bytes() as u64)
            .sum::<u64>()
            .saturating_add(outs);
        let in_use = self.backend.mem().in_use as u64;
        if in_use.saturating_add(need) <= cap {
            return None;
        }
        let movable: u64 = self.victims(args).iter().map(|c| c.bytes as u64).sum::<u64>()
            + self.resident_bytes_of(&self.resident_victims(true))
            + self.resident_bytes_of(&self.packed_read());
        let fixed = in_use.saturating_sub(movable);
        (fixed.saturating_add(need) > cap).then(|| (need, cap.saturating_sub(fixed)))
    }

    /// Moves buffers to the host tier until `bytes` more fit the run's device budget
    /// beside the buffers in use, keeping the slots of `keep` (idle resident columns
    /// first, then in [`Interp::leaving`]'s order); stops when none is left to move (the
    /// allocation that follows may then fail, with its own error).
    fn make_room(&mut self, bytes: usize, keep: &[usize]) -> Result<(), String> {
        let Some(cap) = self.device_cap else {
            return Ok(());
        };
        let over = |s: &Self| (s.backend.mem().in_use as u64).saturating_add(bytes as u64) > cap;
        if !over(self) {
            return Ok(());
        }
        let short = (self.backend.mem().in_use as u64).saturating_add(bytes as u64) - cap;
        self.release_resident(short.min(usize::MAX as u64) as usize);
        if !over(self) {
            return Ok(());
        }
        for l in self.leaving(keep) {
            self.leave(l)?;
            if !over(self) {
                return Ok(());
            }
        }
        Ok(())
    }

    /// The device bytes of the resident buffers `keys`.
    fn resident_bytes_of(&self, keys: &[crate::database::ResidentKey]) -> u64 {
        self.resident.as_ref().map_or(0, |r| {
            keys.iter()
                .filter_map(|k| r.bufs.get(k))
                .map(|b| b.bytes() as u64)
                .sum()
        })
    }

    /// Uploads a column for an instruction's output (or an input), making room first.
    fn upload_room(&mut self, col: HostCol) -> Result<DevBuf, crate::BackendError> {
        let bytes = col.len() * col.elem().size();
        self.make_room(bytes, &[]).map_err(crate::BackendError)?;
        let t = Instant::now();
        let up = self.backend.upload(col);
        self.stats.upload += t.elapsed();
        up
    }

    /// [`Self::upload_room`] of the rows `rows` of a column that stays the caller's
    /// ([`Backend::upload_rows`]: no host copy first where the device has memory of its
    /// own).
    fn upload_room_rows(&mut self, col: &HostCol, rows: std::ops::Range<usize>) -> Result<DevBuf, crate::BackendError> {
        let bytes = rows.len() * col.elem().size();
        self.make_room(bytes, &[]).map_err(crate::BackendError)?;
        let t = Instant::now();
        let up = self.backend.upload_rows(col, rows);
        self.stats.upload += t.elapsed();
        up
    }

    /// [`Self::upload_room`] of the rows `rows` of a database's stored column
    /// ([`Backend::upload_stored`]: a packed column widened where the backend chooses),
    /// with room for its packed rows too.
    fn upload_room_stored(
        &mut self,
        col: &crate::stored::StoredCol,
        rows: std::ops::Range<usize>,
    ) -> Result<DevBuf, crate::BackendError> {
        let bytes = rows.len() * col.elem().size();
        let on_device = self.room_to_widen(col, rows.len(), bytes, &[]);
        if !on_device {
            self.make_room(bytes, &[]).map_err(crate::BackendError)?;
        }
        let t = Instant::now();
        let up = self.upload_widened(col, rows, on_device);
        self.stats.upload += t.elapsed();
        up
    }

    /// Whether `n` rows of a stored column (`bytes` once widened) may be widened on the
    /// device: the backend would (they are packed and its memory is its own) and room
    /// for their packed rows beside them was made within the budget (keeping `keep`).
    fn room_to_widen(&mut self, col: &crate::stored::StoredCol, n: usize, bytes: usize, keep: &[usize]) -> bool {
        let packed = self.packed_room(col, n);
        packed > 0 && self.make_room(bytes + packed, keep).is_ok() && self.room_left() >= bytes + packed
    }

    /// Uploads the rows `rows` of a stored column as the plan reads them: through
    /// [`Backend::upload_stored`] where the backend widens them itself without more
    /// room (host memory, a column held as it is) or `on_device` made that room
    /// ([`Self::room_to_widen`]), else widened on the host first.
    fn upload_widened(
        &mut self,
        col: &crate::stored::StoredCol,
        rows: std::ops::Range<usize>,
        on_device: bool,
    ) -> Result<DevBuf, crate::BackendError> {
        if on_device || self.packed_room(col, rows.len()) == 0 {
            self.backend.upload_stored(col, rows)
        } else {
            col.slice(rows.start, rows.end, "an uploaded column, widened")
                .map_err(crate::BackendError)
                .and_then(|wide| self.backend.upload(wide))
        }
    }

    /// The device bytes the run's budget has left beside the buffers in use (all of them
    /// without a budget).
    fn room_left(&self) -> usize {
        match self.device_cap {
            Some(cap) => cap
                .saturating_sub(self.backend.mem().in_use as u64)
                .min(usize::MAX as u64) as usize,
            None => usize::MAX,
        }
    }

    /// An out-of-memory error when `len` rows of `size` bytes do not fit the run's device
    /// budget beside the buffers in use (`what` names them).
    fn check_room(&self, len: usize, size: usize, what: &str) -> Result<(), String> {
        let Some(cap) = self.device_cap else {
            return Ok(());
        };
        let left = cap.saturating_sub(self.backend.mem().in_use as u64);
        if (len as u64).saturating_mul(size as u64) <= left {
            return Ok(());
        }
        let why = if self.memory_limit.is_some() {
            crate::alloc::limit_refusal(u128::from(left))
        } else {
            format!(
                "the device's memory leaves {} to this operation",
                crate::alloc::bytes_text(u128::from(left))
            )
        };
        Err(crate::alloc::rows_out_of_memory(len as u128, size, what, Some(&why)))
    }

    /// Under a memory limit, on a backend with memory of its own that keeps a database's
    /// resident columns: the device bytes the packed rows kept there
    /// ([`Interp::packed_on_device`]) may take, half of the budget. The other half is
    /// left to the run's own buffers, so that operators in pieces keep pieces of a size
    /// worth a launch. `None` otherwise (no packed rows are kept).
    fn packed_share(&self) -> Option<u64> {
        if self.packed_off
            || self.memory_limit.is_none()
            || self.resident.is_none()
            || !self.backend.memory_is_separate()
        {
            return None;
        }
        self.device_cap.map(|c| c / 2)
    }

    /// The device bytes of the packed rows kept now.
    fn packed_held(&self) -> u64 {
        self.resident.as_ref().map_or(0, |r| r.packed_bytes() as u64)
    }

    /// Whether the kept packed rows `key` are rows of a column this run loads, as it
    /// loads them: the whole column, or the same part of it.
    fn reads_packed(&self, key: &crate::database::ResidentKey) -> bool {
        use crate::database::Rows;
        let Rows::Packed(range) = &key.2 else {
            return false;
        };
        if self.packed_off {
            return false;
        }
        let (t, c) = (key.0.clone(), key.1);
        self.wanted.contains_key(&(t.clone(), c, Rows::Part(range.clone())))
            || (range.start == 0 && self.wanted.contains_key(&(t, c, Rows::All)))
    }

    /// Kept packed rows, least recently used first (then by table, column and rows):
    /// those of columns the run reads (`read`, never the ones being widened now) or those
    /// of the others.
    fn kept_packed(&self, read: bool) -> Vec<crate::database::ResidentKey> {
        let Some(r) = self.resident.as_ref() else {
            return Vec::new();
        };
        let mut keys: Vec<(u64, &crate::database::ResidentKey)> = r
            .bufs
            .iter()
            .filter(|(k, b)| {
                matches!(k.2, crate::database::Rows::Packed(_))
                    && self.reads_packed(k) == read
                    && Some(b.id) != self.packed_busy
            })
            .map(|(k, _)| (r.used.get(k).copied().unwrap_or(0), k))
            .collect();
        keys.sort_by(|(u, x), (v, y)| (u, &x.0, x.1, x.2.order()).cmp(&(v, &y.0, y.1, y.2.order())));
        keys.into_iter().map(|(_, k)| k.clone()).collect()
    }

    /// The kept packed rows of the columns this run reads, in the order they are given
    /// back when nothing else is left to move ([`Interp::make_room`]).
    fn packed_read(&self) -> Vec<crate::database::ResidentKey> {
        self.kept_packed(true)
    }

    /// Under a packed share ([`Interp::packed_share`]): the device copy of the packed
    /// rows of `d` (database rows read in place), kept for this run and later ones
    /// ([`crate::database::Rows::Packed`]). Touched when held; else uploaded and kept
    /// when the column is packed and its packed rows fit the share (once the packed rows
    /// of columns the run does not read are given back, least recently used first) and
    /// the budget beside the run's buffers (room made keeping `keep`). `None` otherwise:
    /// the rows are uploaded from the host each time they are read.
    fn packed_on_device(&mut self, d: &DbRows, keep: &[usize]) -> Result<Option<DevBuf>, String> {
        let key = d.packed_key();
        if self.packed_off {
            return Ok(None);
        }
        if let Some(b) = self.resident.as_mut().and_then(|r| r.touch(&key)) {
            return Ok(Some(b));
        }
        let Some(share) = self.packed_share().filter(|_| !self.packed_closed) else {
            return Ok(None);
        };
        let col = d.column();
        let bytes = col.packed_bytes(d.rows.len()) as u64;
        if bytes == 0 {
            return Ok(None);
        }
        if self.packed_held() + bytes > share {
            for k in self.kept_packed(false) {
                self.free_resident(&k);
                if self.packed_held() + bytes <= share {
                    break;
                }
            }
            if self.packed_held() + bytes > share {
                return Ok(None);
            }
        }
        let last_resort = std::mem::replace(&mut self.packed_last_resort, false);
        let made = self.make_room(bytes as usize, keep);
        self.packed_last_resort = last_resort;
        made?;
        if (self.room_left() as u64) < bytes {
            return Ok(None);
        }
        let t = Instant::now();
        let up = self.backend.upload_packed(col, d.rows.clone());
        self.stats.upload += t.elapsed();
        match up {
            Ok(Some(b)) => {
                let copy = DevBuf {
                    id: b.id,
                    elem: b.elem,
                    len: b.len,
                };
                self.stats.tier.packed_kept += 1;
                self.stats.tier.packed_kept_bytes += bytes;
                if let Some(r) = self.resident.as_mut() {
                    r.keep(key, b);
                }
                Ok(Some(copy))
            }
            Ok(None) => Ok(None),
            Err(e) if is_out_of_memory(&e.0) => Ok(None),
            Err(e) => Err(e.0),
        }
    }

    /// Whether the packed rows of `d` are kept on the device.
    fn packed_kept(&self, d: &DbRows) -> bool {
        let key = d.packed_key();
        !self.packed_off && self.resident.as_ref().is_some_and(|r| r.bufs.contains_key(&key))
    }

    /// The rows `part` of database rows `d` read in place, on the device as the plan
    /// reads them, room made keeping `keep`: widened from their packed rows kept on the
    /// device where those are or can be ([`Interp::packed_on_device`]), else uploaded
    /// ([`Interp::upload_room_stored`]).
    fn upload_db_rows(&mut self, d: &DbRows, part: std::ops::Range<usize>, keep: &[usize]) -> Result<DevBuf, String> {
        match self.packed_on_device(d, keep)? {
            Some(packed) => self.widen_kept(d, &packed, part, keep),
            None => {
                self.offer_pinned(d);
                let rows = d.rows.start + part.start..d.rows.start + part.end;
                self.upload_room_stored(d.column(), rows).map_err(|e| e.0)
            }
        }
    }

    /// Offers the host bytes of the column of `d` to be page-locked
    /// ([`Backend::pin_host`]), once per run; counts the columns locked.
    fn offer_pinned(&mut self, d: &DbRows) {
        let bytes = d.column().storage();
        if bytes.is_empty() || !self.pin_offered.insert(bytes.as_ptr() as usize) {
            return;
        }
        let owner: std::sync::Arc<dyn std::any::Any + Send + Sync> = d.table.clone();
        // SAFETY: a table's columns are never changed once loaded and live as long as
        // the table, which `owner` holds.
        if unsafe { self.backend.pin_host(&owner, bytes) } {
            self.stats.tier.pinned += 1;
            self.stats.tier.pinned_bytes += bytes.len() as u64;
        }
    }

    /// The rows `part` of database rows `d`, widened on the device from `packed`, their
    /// packed rows kept there ([`Interp::packed_on_device`]), room made keeping `keep`
    /// (and `packed`).
    fn widen_kept(
        &mut self,
        d: &DbRows,
        packed: &DevBuf,
        part: std::ops::Range<usize>,
        keep: &[usize],
    ) -> Result<DevBuf, String> {
        let col = d.column();
        let rows = d.rows.start + part.start..d.rows.start + part.end;
        let size = col.elem().size();
        self.packed_busy = Some(packed.id);
        let made = self.make_room(rows.len() * size, keep);
        self.packed_busy = None;
        made?;
        self.check_room(rows.len(), size, "database rows widened on the device")?;
        let t = Instant::now();
        let up = self.backend.widen_packed(packed, col, d.rows.clone(), rows.clone());
        self.stats.upload += t.elapsed();
        let b = up.map_err(|e| e.0)?;
        self.stats.tier.widened_on_device += 1;
        self.stats.tier.widened_on_device_bytes += (rows.len() * size) as u64;
        Ok(b)
    }

    /// The device bytes `n` rows of a stored column take while they are widened there,
    /// besides the column's own ([`Backend::stored_upload_room`]): their packed rows, or
    /// a piece of them, on a backend with memory of its own (which widens them on the
    /// device), none where the device is host memory.
    fn packed_room(&self, col: &crate::stored::StoredCol, n: usize) -> usize {
        self.backend.stored_upload_room(col, n)
    }

    /// Brings the slots of `slots` that are in the host tier back to the device, making
    /// room for each (keeping all of `slots`). One that does not fit beside the others
    /// within the run's device budget stays in the host tier, and the error says so.
    fn restore(&mut self, slots: &[usize]) -> Result<(), String> {
        for &s in slots {
            match self.tiers[s] {
                Tier::Device => continue,
                Tier::Host(_) | Tier::Db(_) => {}
                Tier::Gone => return Err("a buffer was lost bringing it back to the device".to_string()),
            }
            let (bytes, len, size) = {
                let b = self.slot_buf(s);
                (b.bytes(), b.len, b.elem.size())
            };
            // Database rows whose packed rows are kept on the device are widened there.
            if let Tier::Db(rows) = &self.tiers[s] {
                let d = rows.clone();
                if let Some(packed) = self.packed_on_device(&d, slots)? {
                    let b = self.widen_kept(&d, &packed, 0..d.rows.len(), slots)?;
                    self.slots[s].as_mut().expect("occupied").0 = b;
                    self.tiers[s] = Tier::Device;
                    self.stats.tier.restores += 1;
                    continue;
                }
                self.offer_pinned(&d);
            }
            // The database's rows come with their packed rows while they are widened on
            // the device, where those fit beside them; else they are widened on the host.
            let on_device = match &self.tiers[s] {
                Tier::Db(rows) => {
                    let (table, c, n) = (rows.table.clone(), rows.col, rows.rows.len());
                    let col = Database::column(&table, c).expect("a referenced column is loaded");
                    self.room_to_widen(col, n, bytes, slots)
                }
                _ => false,
            };
            self.make_room(bytes, slots)?;
            self.check_room(len, size, "a buffer brought back from the host tier")?;
            let t = Instant::now();
            let up = match std::mem::replace(&mut self.tiers[s], Tier::Gone) {
                Tier::Host(col) => {
                    self.host_in_use -= bytes as u64;
                    self.backend.upload(col)
                }
                Tier::Db(rows) => {
                    let up = self.upload_widened(rows.column(), rows.rows.clone(), on_device);
                    // The slot reads the database until its rows are on the device.
                    self.tiers[s] = Tier::Db(rows);
                    up
                }
                Tier::Device | Tier::Gone => unreachable!("checked above"),
            };
            self.stats.upload += t.elapsed();
            let b = up.map_err(|e| e.0)?;
            self.slots[s].as_mut().expect("occupied").0 = b;
            self.tiers[s] = Tier::Device;
            self.stats.tier.restores += 1;
            self.stats.tier.bytes_to_device += bytes as u64;
        }
        Ok(())
    }

    fn instr(&mut self, block: usize, i: usize, ins: &Instr) -> Result<(), RuntimeError> {
        let plan = self.plan;
        match ins {
            Instr::Move { dst, src } => {
                let (dst, src) = (dst.0 as usize, src.0 as usize);
                let slot = self
                    .var_slot(src)
                    .map_err(|w| RuntimeError::Plan(format!("{}: Move reads {w}", at(plan, block, i))))?;
                let dst_elem = self
                    .check_out(dst)
                    .map_err(|w| RuntimeError::Plan(format!("{}: Move writes {w}", at(plan, block, i))))?;
                if dst_elem != self.slot_buf(slot).elem {
                    return Err(RuntimeError::Plan(format!(
                        "{}: Move of {} ({:?}) into {} ({dst_elem:?})",
                        at(plan, block, i),
                        self.buf_name(src),
                        self.slot_buf(slot).elem,
                        self.buf_name(dst)
                    )));
                }
                if dst != src {
                    self.slots[slot].as_mut().expect("occupied").1 += 1;
                    self.assign(dst, slot);
                }
                Ok(())
            }
            Instr::Free { buf } => {
                let var = buf.0 as usize;
                if var >= self.vars.len() {
                    return Err(RuntimeError::Plan(format!(
                        "{}: Free of buffer b{var}, which does not exist (the plan has {} buffers)",
                        at(plan, block, i),
                        self.plan.buffers.len()
                    )));
                }
                self.release(var);
                Ok(())
            }
            Instr::Output {
                name,
                columns,
                cols,
                order,
                limit,
            } => {
                let start = Instant::now();
                let download_before = self.stats.download;
                let what = format!("{} (output `{name}`)", at(plan, block, i));
                // A relation with no columns is one hidden column giving its row count.
                let hidden = usize::from(columns.is_empty());
                if cols.len() != columns.len() + hidden {
                    return Err(RuntimeError::Plan(format!(
                        "{what}: {} columns but {} buffers",
                        columns.len(),
                        cols.len()
                    )));
                }
                if let Some((c, _)) = order.iter().find(|(c, _)| *c >= columns.len()) {
                    return Err(RuntimeError::Plan(format!(
                        "{what}: ordered by column {c}, but it has {} columns",
                        columns.len()
                    )));
                }
                if self.leads() {
                    self.notify(&RunEvent::Output { name });
                }
                let mut host = Vec::with_capacity(cols.len());
                for c in cols {
                    let slot = self
                        .var_slot(c.0 as usize)
                        .map_err(|w| RuntimeError::Plan(format!("{what}: reads {w}")))?;
                    let col = self.download_arg(slot).map_err(|e| RuntimeError::Kernel {
                        at: what.clone(),
                        msg: match e {
                            HostError::Plan(m) | HostError::Kernel(m) => m,
                            HostError::Run(e) => e.to_string(),
                        },
                    })?;
                    host.push(col);
                }
                let mut parts = vec![host];
                if self.spmd.is_some() {
                    // Device 0 makes the table of every device's rows, in device order.
                    let waited = Instant::now();
                    let mine = std::sync::Mutex::new(parts.pop());
                    let g = self.collective((block, i), mine, &|| what.clone())?;
                    self.stats.exchange.output_wait += waited.elapsed();
                    if !self.leads() {
                        self.record(block, i, || fox_kernel::output_label(name), start.elapsed());
                        return Ok(());
                    }
                    for d in 0..self.spmd.as_ref().map_or(1, |d| d.comm.size()) {
                        let part = g
                            .get::<std::sync::Mutex<Option<Vec<HostCol>>>>(d)
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .take()
                            .unwrap_or_default();
                        parts.push(part);
                    }
                }
                let joined = Instant::now();
                let several = parts.len() > 1;
                let hidden_rows = (hidden == 1).then(|| parts.iter().map(|p| p.first().map_or(0, HostCol::len)).sum());
                if hidden == 1 {
                    parts = vec![Vec::new()];
                }
                let table = build_table_parts(&what, name, columns, parts, hidden_rows, &self.dict, order, *limit)?;
                if several {
                    self.stats.exchange.output_join += joined.elapsed();
                }
                self.outputs.push(table);
                let d = start.elapsed();
                self.stats.output += d.saturating_sub(self.stats.download - download_before);
                self.record(block, i, || fox_kernel::output_label(name), d);
                Ok(())
            }
            Instr::Observe { id, bufs } => {
                let what = at(plan, block, i);
                let b = bufs
                    .first()
                    .ok_or_else(|| RuntimeError::Plan(format!("{what}: Observe reads no buffer")))?;
                let slot = self
                    .var_slot(b.0 as usize)
                    .map_err(|w| RuntimeError::Plan(format!("{what}: Observe reads {w}")))?;
                let rows = self.slot_buf(slot).len as u64;
                let stat = self.stats.rows.get_mut(*id as usize).ok_or_else(|| {
                    RuntimeError::Plan(format!(
                        "{what}: Observe of operator #{id}, which the plan does not list"
                    ))
                })?;
                stat.calls += 1;
                stat.total += rows;
                stat.max = stat.max.max(rows);
                Ok(())
            }
            Instr::Assert { check, args, origin } => {
                let start = Instant::now();
                let what = at(plan, block, i);
                let mut slots = Vec::with_capacity(args.len());
                for a in args {
                    slots.push(
                        self.var_slot(a.0 as usize)
                            .map_err(|w| RuntimeError::Plan(format!("{what}: Assert reads {w}")))?,
                    );
                }
                let held = slots.first().map_or(0, |&s| self.slot_buf(s).len);
                if held > 0 {
                    let mut rows = Vec::with_capacity(args.len());
                    for (a, &s) in args.iter().zip(&slots) {
                        let col = self.download_arg(s).map_err(|e| RuntimeError::Kernel {
                            at: what.clone(),
                            msg: match e {
                                HostError::Plan(m) | HostError::Kernel(m) => m,
                                HostError::Run(e) => e.to_string(),
                            },
                        })?;
                        rows.push(cell_text(&col, 0, self.plan.buffers[a.0 as usize].ty, &self.dict));
                    }
                    return Err(check_error(check, &rows, *origin, &what));
                }
                self.record(block, i, || "assert".to_string(), start.elapsed());
                Ok(())
            }
            Instr::Launch {
                kernel,
                args,
                outs,
                origin,
            } => {
                let start = Instant::now();
                let transfers_before = self.stats.upload + self.stats.download;
                let loading = matches!(kernel, Kernel::LoadInput { .. });
                self.device_time = None;
                let launched = self.launch(block, i, kernel, args, outs);
                // What a launch returns once the flag is set is discarded (its outputs
                // are freed with every other buffer when the run ends).
                self.check_cancel()?;
                if let Err(e) = launched {
                    return Err(match (e, origin) {
                        (RuntimeError::Kernel { at, msg }, Some(origin)) => {
                            let mut notes = self.row_values(kernel, args, &msg);
                            notes.extend(self.memory_notes(kernel, args, &msg));
                            notes.push(format!("in {at}"));
                            RuntimeError::Program {
                                msg: self.kernel_message(kernel, args, &msg),
                                origin: Some(*origin),
                                notes,
                            }
                        }
                        (RuntimeError::Kernel { at, msg }, None) => {
                            let notes = self.memory_notes(kernel, args, &msg);
                            let msg = notes.iter().fold(msg, |m, n| format!("{m}; {n}"));
                            RuntimeError::Kernel { at, msg }
                        }
                        (e, _) => e,
                    });
                }
                if self.timing && !loading {
                    self.backend.sync().map_err(|e| RuntimeError::Kernel {
                        at: format!("{} ({})", at(plan, block, i), kernel_name(kernel, plan)),
                        msg: e.0,
                    })?;
                }
                let d = start.elapsed();
                // Uploads and downloads inside the instruction are counted on their own.
                let own = d.saturating_sub(self.stats.upload + self.stats.download - transfers_before);
                if loading {
                    self.stats.load += own;
                } else {
                    self.stats.compute += own;
                }
                // The per-kernel table shows the device's own time where the backend
                // measures it (CUDA events), the host clock otherwise.
                let shown = self.device_time.take().unwrap_or(d);
                self.record_timed(block, i, || kernel_name(kernel, plan), shown, d);
                Ok(())
            }
        }
    }

    /// Counts a call of instruction `i` of `block` that took `d` on the host clock.
    fn record(&mut self, block: usize, i: usize, kernel: impl FnOnce() -> String, d: Duration) {
        self.record_timed(block, i, kernel, d, d)
    }

    /// Counts a call of instruction `i` of `block`: `shown` its kernels' time, `wall` the
    /// whole instruction's on the host clock.
    fn record_timed(
        &mut self,
        block: usize,
        i: usize,
        kernel: impl FnOnce() -> String,
        shown: Duration,
        wall: Duration,
    ) {
        let label = &self.plan.blocks[block].label;
        let s = self.instr_stats[block][i].get_or_insert_with(|| InstrStat {
            label: format!("{label}.{i}"),
            kernel: kernel(),
            calls: 0,
            total: Duration::ZERO,
            wall: Duration::ZERO,
        });
        s.calls += 1;
        s.total += shown;
        s.wall += wall;
    }

    /// A kernel's error message as a program's error shows it: the location and the notes
    /// say which kernel and row, and columns are named by the program's variables.
    fn kernel_message(&self, kernel: &Kernel, args: &[fox_kernel::BufId], msg: &str) -> String {
        let mut msg = msg;
        msg = msg.strip_prefix("kernel ").map_or(msg, |m| {
            m.strip_prefix(kernel.name())
                .and_then(|m| m.strip_prefix(": "))
                .unwrap_or(msg)
        });
        if let Some(row) = crate::backend::failing_row(msg) {
            msg = msg.strip_suffix(&format!(" (row {row})")).unwrap_or(msg);
        }
        match self.column_labels(kernel, args) {
            Some(labels) => name_columns(msg, &labels),
            None => msg.to_string(),
        }
    }

    /// `e`, the error of instruction `i` of `block`, or where the backend says it is the
    /// failure of a check it deferred from an earlier launch
    /// ([`Backend::take_failed_check`]), that launch's error: located at its instruction,
    /// without the row values its arguments held (they may be gone).
    fn relocate(&mut self, block: usize, i: usize, e: RuntimeError) -> RuntimeError {
        let Some(((b, j), msg)) = self.backend.take_failed_check() else {
            return e;
        };
        if (b, j) == (block, i) {
            return e;
        }
        let plan = self.plan;
        match plan.blocks.get(b).and_then(|bl| bl.instrs.get(j)) {
            Some(Instr::Launch {
                kernel, args, origin, ..
            }) => {
                let at = format!("{} ({})", at(plan, b, j), kernel_name(kernel, plan));
                match origin {
                    Some(origin) => RuntimeError::Program {
                        msg: self.kernel_message(kernel, args, &msg),
                        origin: Some(*origin),
                        notes: vec![format!("in {at}")],
                    },
                    None => RuntimeError::Kernel { at, msg },
                }
            }
            _ => RuntimeError::Kernel {
                at: at(plan, b, j),
                msg,
            },
        }
    }

    fn launch(
        &mut self,
        block: usize,
        i: usize,
        kernel: &Kernel,
        args: &[fox_kernel::BufId],
        outs: &[fox_kernel::BufId],
    ) -> Result<(), RuntimeError> {
        let plan = self.plan;
        let what = || format!("{} ({})", at(plan, block, i), kernel_name(kernel, plan));
        let mut arg_slots = Vec::with_capacity(args.len());
        for a in args {
            let slot = self
                .var_slot(a.0 as usize)
                .map_err(|w| RuntimeError::Plan(format!("{}: reads {w}", what())))?;
            arg_slots.push(slot);
        }
        let mut out_elems = Vec::with_capacity(outs.len());
        for o in outs {
            out_elems.push(
                self.check_out(o.0 as usize)
                    .map_err(|w| RuntimeError::Plan(format!("{}: writes {w}", what())))?,
            );
        }
        if let Kernel::MergeUnion { width, .. } = kernel {
            // The union of a sorted set with an empty one is that set: its buffers are
            // shared (as a `Move` shares them), not copied.
            let w = *width;
            if w > 0 && args.len() == 2 * w && outs.len() == w {
                let empty = |side: &[usize]| side.first().is_some_and(|&s| self.slot_buf(s).len == 0);
                let keep = if empty(&arg_slots[..w]) {
                    Some(&arg_slots[w..])
                } else if empty(&arg_slots[w..]) {
                    Some(&arg_slots[..w])
                } else {
                    None
                };
                if let Some(keep) = keep {
                    let keep = keep.to_vec();
                    if keep.iter().zip(&out_elems).all(|(&s, e)| self.slot_buf(s).elem == *e) {
                        for (o, s) in outs.iter().zip(keep) {
                            self.slots[s].as_mut().expect("occupied").1 += 1;
                            self.assign(o.0 as usize, s);
                        }
                        return Ok(());
                    }
                }
            }
        }
        if let Kernel::Exchange { width, to } = kernel {
            if args.len() != *width
                || outs.len() != *width
                || arg_slots
                    .iter()
                    .zip(&out_elems)
                    .any(|(&s, e)| self.slot_buf(s).elem != *e)
            {
                return Err(RuntimeError::Plan(format!(
                    "{}: the outputs do not match the {width} columns it exchanges",
                    what()
                )));
            }
            if self.spmd.is_some() {
                return self.exchange((block, i), kernel, to, &arg_slots, outs, &out_elems, &what);
            }
            // One device holds every row: an exchange shares its arguments' buffers.
            for (o, s) in outs.iter().zip(arg_slots) {
                self.slots[s].as_mut().expect("occupied").1 += 1;
                self.assign(o.0 as usize, s);
            }
            return Ok(());
        }
        if let (Kernel::LoadInput { input, whole, hash }, Some(_)) = (kernel, &self.spmd) {
            let n = self.plan.inputs.get(*input).map_or(0, |i| i.columns.len());
            if !args.is_empty()
                || outs.len() != n
                || out_elems
                    .iter()
                    .zip(&self.plan.inputs[*input].columns)
                    .any(|(e, c)| *e != Elem::of(c.ty))
            {
                return Err(RuntimeError::Plan(format!(
                    "{}: the outputs do not match the columns of the input",
                    what()
                )));
            }
            return self.load_part(*input, *whole, hash, outs, &what);
        }
        if let (Kernel::LoadInput { input, .. }, Some(db)) = (kernel, self.database.clone()) {
            let n = self.plan.inputs.get(*input).map_or(0, |i| i.columns.len());
            if !args.is_empty()
                || outs.len() != n
                || out_elems
                    .iter()
                    .zip(&self.plan.inputs[*input].columns)
                    .any(|(e, c)| *e != Elem::of(c.ty))
            {
                return Err(RuntimeError::Plan(format!(
                    "{}: the outputs do not match the columns of the input",
                    what()
                )));
            }
            return self.load_resident(&db, *input, outs);
        }
        if let (
            Kernel::DictTable {
                op: fox_kernel::DictOp::Rank,
            },
            true,
            [o],
        ) = (kernel, self.dict.is_ordered() && self.resident.is_some(), outs)
        {
            // While no string is appended the rank table is the identity over the loaded
            // dictionary: it is made once and stays on the device with the data.
            let key = ("$rank".to_string(), self.dict.len(), crate::database::Rows::All);
            let n = self.dict.len() as u32;
            return self.keep_resident(key, *o, &what, || {
                crate::alloc::try_collect(0..n, "the rank table of the string dictionary").map(HostCol::U32)
            });
        }
        // A pattern's table (`like`, `prefix`, `match`) over a dictionary of which the run
        // reads few strings (at most 1 in [`SPARSE_TABLE`]) is built on the device from
        // the codes that match ([`Backend::upload_flags`]), not sent as a byte per
        // string; over several devices the first to ask finds the codes, the others
        // build from the same list.
        if let (Kernel::DictTable { op }, [o]) = (kernel, outs) {
            if !dict_index(op) {
                let codes = self
                    .reachable_codes()
                    .map_err(|msg| RuntimeError::Kernel { at: what(), msg })?;
                let len = self.dict.len();
                if let Some(codes) = codes.filter(|c| c.len().saturating_mul(SPARSE_TABLE) <= len) {
                    let dict = &self.dict;
                    let find = || -> Result<std::sync::Arc<HostCol>, String> {
                        let ones = dict
                            .flags_at(op, &codes)?
                            .ok_or_else(|| "the table is not one of flags".to_string())?;
                        Ok(std::sync::Arc::new(HostCol::U32(ones)))
                    };
                    let ones = match self.spmd.as_ref().map(|d| d.comm) {
                        Some(comm) => comm.shared_table(op, find),
                        None => find(),
                    }
                    .map_err(|msg| RuntimeError::Kernel { at: what(), msg })?;
                    let HostCol::U32(ones) = ones.as_ref() else {
                        return Err(RuntimeError::Plan(format!(
                            "{}: the devices made this table in different ways",
                            what()
                        )));
                    };
                    self.make_room(len, &[])
                        .map_err(|msg| RuntimeError::Kernel { at: what(), msg })?;
                    let t = Instant::now();
                    let b = self.backend.upload_flags(len, ones);
                    self.stats.upload += t.elapsed();
                    let b = b.map_err(|e| RuntimeError::Kernel { at: what(), msg: e.0 })?;
                    self.define(o.0 as usize, b);
                    return Ok(());
                }
            }
        }
        // The tables of a query's patterns (`like`, `prefix`, `match`) over the loaded
        // dictionary are made once per run: the first device of several makes the table,
        // the others upload the same one.
        if let (Kernel::DictTable { op }, Some(comm), [o]) = (kernel, self.spmd.as_ref().map(|d| d.comm), outs) {
            if self.dict.len() == self.dict.sorted_len() && !dict_index(op) {
                let arg_slots = arg_slots.clone();
                let table = comm.shared_table(op, || {
                    let mut cols = self.host_kernel(kernel, &arg_slots, 1)?;
                    Ok(std::sync::Arc::new(cols.pop().expect("one table")))
                });
                let table = table.map_err(|e| host_error(e, &what))?;
                let b = self
                    .upload_room_rows(&table, 0..table.len())
                    .map_err(|e| RuntimeError::Kernel { at: what(), msg: e.0 })?;
                self.define(o.0 as usize, b);
                return Ok(());
            }
        }
        if let (Kernel::DictTable { op }, Some(db), true, [o]) =
            (kernel, self.database.clone(), self.resident.is_some(), outs)
        {
            // Over the loaded dictionary (no string appended) a table that depends on the
            // dictionary alone (ranks, lengths) is the same for every run: made once at
            // every code on the host, uploaded once, kept with the data.
            if dict_index(op) && self.dict.len() == self.dict.sorted_len() && self.dict.len() == db.dictionary().len() {
                let key = (format!("$dict {op:?}"), self.dict.len(), crate::database::Rows::All);
                return self.keep_resident(key, *o, &what, || db.dict_table(op).map(|t| t.as_ref().clone()));
            }
        }
        // The probes of a hash table that did not fit search its sorted keys instead.
        if let Kernel::HashProbe { nkeys } | Kernel::HashMatch { nkeys, .. } = kernel {
            if arg_slots.len() == 2 * nkeys + 1 && self.slot_buf(arg_slots[*nkeys]).len == joins::UNBUILT_TABLE {
                return self.probe_by_search(kernel, &arg_slots, outs, &what);
            }
        }
        let host_kernel = kernel.runs_in_runtime();
        let results: Vec<DevBuf> = if host_kernel {
            let cols = self
                .host_kernel(kernel, &arg_slots, outs.len())
                .map_err(|e| host_error(e, &what))?;
            if cols.len() != outs.len() {
                return Err(RuntimeError::Plan(format!(
                    "{}: the kernel returned {} buffers but the plan names {} outputs",
                    what(),
                    cols.len(),
                    outs.len()
                )));
            }
            // Each output is defined as soon as it is uploaded, so that it may leave the
            // device to make room for the next; one that does not fit the device with
            // every other buffer moved stays in the host tier, for its readers to take
            // in chunks.
            for (k, col) in cols.into_iter().enumerate() {
                if col.elem() != out_elems[k] {
                    return Err(RuntimeError::Plan(format!(
                        "{}: output {} is {:?} but {} is declared {:?}",
                        what(),
                        k + 1,
                        col.elem(),
                        self.buf_name(outs[k].0 as usize),
                        out_elems[k]
                    )));
                }
                let stays = self.stays_on_host(col.len() * col.elem().size());
                if stays.map_err(|msg| RuntimeError::Kernel { at: what(), msg })? {
                    self.define_in_host_tier(outs[k].0 as usize, col);
                    continue;
                }
                let up = self.upload_room(col);
                let t = Instant::now();
                let up = up.and_then(|b| {
                    if self.timing {
                        if let Err(e) = self.backend.sync() {
                            self.backend.free(b);
                            return Err(e);
                        }
                    }
                    Ok(b)
                });
                self.stats.upload += t.elapsed();
                match up {
                    Ok(b) => self.define(outs[k].0 as usize, b),
                    Err(e) => return Err(RuntimeError::Kernel { at: what(), msg: e.0 }),
                }
            }
            if std::mem::take(&mut self.window_spent) {
                if let Some(&Some(s)) = self.vars.get(outs[0].0 as usize) {
                    if self.spent.len() <= s {
                        self.spent.resize(s + 1, false);
                    }
                    self.spent[s] = true;
                }
            }
            return Ok(());
        } else {
            match self.launch_evicting(kernel, &arg_slots, &out_elems, &what) {
                Ok(r) => r,
                // A kernel whose output columns are independent (`Gather`, `Compact`,
                // `Concat`) runs a column at a time when all of them do not fit at once;
                // each output is defined as it is made, and may leave the device for the
                // next.
                //
                // A row-local kernel (`Eval`, `Compact`, `Gather`) whose arguments do not
                // fit then runs over chunks of its rows (`rows.rs`).
                Err(RuntimeError::Kernel { msg, at })
                    if is_out_of_memory(&msg) && !outs.iter().any(|o| args.contains(o)) =>
                {
                    let by_rows = rows::row_aligned(kernel, arg_slots.len()).is_some();
                    let Some((one_kernel, parts)) = column_split(kernel, &arg_slots, outs.len()) else {
                        // A slice whose columns do not fit is taken on the host.
                        if matches!(kernel, Kernel::Slice { .. }) && !self.failure_leaked {
                            return self.slice_on_host(kernel, &arg_slots, outs, &what);
                        }
                        // A filter's marks and the compaction of the rows they keep run
                        // chunk by chunk together, each chunk's rows read once.
                        if let (Kernel::Eval { n_cols: 1.., .. }, [marks], true) =
                            (kernel, outs, self.backend.memory_is_separate())
                        {
                            let n = arg_slots.first().map_or(0, |&s| self.slot_buf(s).len);
                            if let Some((cols, c_outs)) = self.compact_after(block, i, *marks, n) {
                                let mut c_elems = Vec::with_capacity(c_outs.len());
                                for o in &c_outs {
                                    c_elems.push(self.check_out(o.0 as usize).map_err(|w| {
                                        RuntimeError::Plan(format!("{}: its compaction writes {w}", what()))
                                    })?);
                                }
                                self.filter_in_rows(kernel, &arg_slots, *marks, &cols, &c_outs, &c_elems, &what)?;
                                self.fused = Some((block, i + 1));
                                return Ok(());
                            }
                        }
                        if by_rows {
                            let r = self.launch_in_rows(kernel, &arg_slots, &out_elems, outs, &what);
                            return match (r, kernel, outs) {
                                // One gathered column larger than the device, on the host.
                                (Err(RuntimeError::Kernel { msg, .. }), Kernel::Gather { .. }, [out])
                                    if is_out_of_memory(&msg) =>
                                {
                                    self.gather_on_host(kernel, &arg_slots, *out, &what)
                                }
                                // A searched side larger than the device, in pieces.
                                (Err(RuntimeError::Kernel { msg, .. }), Kernel::BoundRange { .. }, _)
                                    if is_out_of_memory(&msg) =>
                                {
                                    self.search_in_pieces(kernel, &arg_slots, &out_elems, outs, &what)
                                }
                                // A hash table with no room for a probe beside it: the
                                // sorted build keys searched in pieces instead.
                                (
                                    Err(RuntimeError::Kernel { msg, .. }),
                                    Kernel::HashProbe { .. } | Kernel::HashMatch { .. },
                                    _,
                                ) if is_out_of_memory(&msg) => self.probe_by_search(kernel, &arg_slots, outs, &what),
                                (r, _, _) => r,
                            };
                        }
                        // Joins and expansions in pieces of rows (`joins.rs`).
                        if joins::runs_in_pieces(kernel, arg_slots.len()) {
                            return self.join_in_pieces(kernel, &arg_slots, &out_elems, outs, &what);
                        }
                        if matches!(kernel, Kernel::ExclusiveScan) {
                            return self.scan_on_host(&arg_slots, outs, &what);
                        }
                        // Aggregations by key in pieces (`reduce.rs`).
                        if reduce::keyed(kernel, arg_slots.len()).is_some() {
                            return self.reduce_in_pieces(kernel, &arg_slots, &out_elems, outs, &what);
                        }
                        // A union in pieces cut along its merge path (`merge.rs`).
                        if matches!(kernel, Kernel::MergeUnion { .. }) {
                            return self.merge_in_pieces(kernel, &arg_slots, &out_elems, outs, &what);
                        }
                        // A sort that does not fit sorts runs and merges them (`sort.rs`).
                        if let (Kernel::SortPerm { .. }, [out]) = (kernel, outs) {
                            return self.sort_in_runs(kernel, &arg_slots, *out, &what);
                        }
                        // A hash table that does not fit is not built: its probes search
                        // the sorted build keys in pieces (`joins.rs`).
                        if let (Kernel::HashBuild { .. }, [out]) = (kernel, outs) {
                            let unbuilt = HostCol::U32(Vec::with_capacity(joins::UNBUILT_TABLE));
                            self.define_in_host_tier(out.0 as usize, unbuilt);
                            // Counted as an operator in pieces of which none ran.
                            self.note_pieces(0);
                            return Ok(());
                        }
                        // A concatenation that does not fit is made on the host.
                        if matches!(kernel, Kernel::Concat { .. }) && !self.failure_leaked {
                            return self.concat_on_host(kernel, &arg_slots, outs, &what);
                        }
                        // A trie's levels in pieces of its rows (`trie.rs`).
                        if let Kernel::TrieBuild { arity } = kernel {
                            return self.trie_in_pieces(*arity, &arg_slots, &out_elems, outs, &what);
                        }
                        // An inequality join's tree is searched whole by every probing
                        // row: its values and tree must fit at once.
                        if let (Kernel::IneqTree | Kernel::IneqRanges { .. }, Some(&d)) = (kernel, arg_slots.first()) {
                            let d = self.slot_buf(d);
                            let tree = 4 * d.len as u128 * fox_kernel::ineq_levels(d.len) as u128;
                            let need = d.bytes() as u128 + tree;
                            return Err(RuntimeError::Kernel {
                                at,
                                msg: format!(
                                    "{msg}; the merge-sort tree of this inequality join is searched whole: its \
                                     values and tree over {} rows need {} on the device",
                                    d.len,
                                    crate::alloc::bytes_text(need)
                                ),
                            });
                        }
                        return Err(RuntimeError::Kernel { msg, at });
                    };
                    for (j, (o, part)) in outs.iter().zip(parts).enumerate() {
                        let one = self.launch_evicting(&one_kernel, &part, &out_elems[j..=j], &what);
                        let mut one = match one {
                            // A concatenated column that does not fit is made on the host.
                            Err(RuntimeError::Kernel { msg, .. })
                                if is_out_of_memory(&msg)
                                    && matches!(one_kernel, Kernel::Concat { .. })
                                    && !self.failure_leaked =>
                            {
                                self.concat_on_host(&one_kernel, &part, &outs[j..=j], &what)?;
                                continue;
                            }
                            // A column that does not fit runs over chunks of its rows.
                            Err(RuntimeError::Kernel { msg, .. }) if is_out_of_memory(&msg) && by_rows => {
                                match self.launch_in_rows(&one_kernel, &part, &out_elems[j..=j], &outs[j..=j], &what) {
                                    // A gathered column larger than the device is gathered
                                    // on the host.
                                    Err(RuntimeError::Kernel { msg, .. })
                                        if is_out_of_memory(&msg) && matches!(one_kernel, Kernel::Gather { .. }) =>
                                    {
                                        self.gather_on_host(&one_kernel, &part, outs[j], &what)?
                                    }
                                    r => r?,
                                }
                                continue;
                            }
                            r => r?,
                        };
                        match (one.pop(), one.is_empty()) {
                            (Some(b), true) if b.elem == out_elems[j] => self.define(o.0 as usize, b),
                            (b, _) => {
                                b.into_iter().chain(one).for_each(|b| self.backend.free(b));
                                return Err(RuntimeError::Plan(format!(
                                    "{}: the kernel did not return one {:?} column for one column",
                                    what(),
                                    out_elems[j]
                                )));
                            }
                        }
                    }
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        };
        let mismatch = if results.len() != outs.len() {
            Some(format!(
                "{}: the kernel returned {} buffers but the plan names {} outputs",
                what(),
                results.len(),
                outs.len()
            ))
        } else {
            results.iter().zip(&out_elems).enumerate().find_map(|(k, (r, e))| {
                (r.elem != *e).then(|| {
                    format!(
                        "{}: output {} is {:?} but {} is declared {:?}",
                        what(),
                        k + 1,
                        r.elem,
                        self.buf_name(outs[k].0 as usize),
                        e
                    )
                })
            })
        };
        if let Some(m) = mismatch {
            results.into_iter().for_each(|b| self.backend.free(b));
            return Err(RuntimeError::Plan(m));
        }
        for (o, buf) in outs.iter().zip(results) {
            self.define(o.0 as usize, buf);
        }
        Ok(())
    }

    /// Launches `kernel` on the buffers of `arg_slots` (brought to the device first), and
    /// when it fails for want of memory, leaving the backend as it was, moves buffers it
    /// does not read to the host tier and tries again: each time at least as many bytes as
    /// moved so far for it, so it is tried a logarithmic number of times. The outputs, or
    /// the last error once nothing is left to move.
    fn launch_evicting(
        &mut self,
        kernel: &Kernel,
        arg_slots: &[usize],
        out_elems: &[Elem],
        what: &dyn Fn() -> String,
    ) -> Result<Vec<DevBuf>, RuntimeError> {
        let plan = self.plan;
        let mut moved = 0;
        self.failure_leaked = false;
        // The packed rows the run reads are given back only for a kernel that cannot run
        // in pieces, which would widen from them.
        // A launch that runs in pieces when it does not fit goes to its pieces at once
        // when its arguments could never be on the device together: nothing is moved for
        // it (the pieces widen from the packed rows kept, which stay).
        if let Some((need, left)) = in_pieces(kernel, arg_slots, out_elems.len())
            .then(|| self.never_fits(arg_slots, self.known_out_bytes(kernel, arg_slots, out_elems)))
            .flatten()
        {
            return Err(RuntimeError::Kernel {
                at: what(),
                msg: format!(
                    "out of memory: its arguments and the outputs it writes need {} on the device at once, and \
                     the device budget leaves them at most {}",
                    crate::alloc::bytes_text(u128::from(need)),
                    crate::alloc::bytes_text(u128::from(left))
                ),
            });
        }
        loop {
            self.restore(arg_slots)
                .map_err(|msg| RuntimeError::Kernel { at: what(), msg })?;
            let before = self.backend.mem().in_use;
            let refs: Vec<&DevBuf> = arg_slots
                .iter()
                .map(|&s| &self.slots[s].as_ref().expect("occupied").0)
                .collect();
            // The one check of a launch's arguments: backends rely on it.
            check_launch(kernel, &refs, out_elems, &plan.inputs)
                .map_err(|m| RuntimeError::Plan(format!("{}: {m}", what())))?;
            let ctx = DictCtx(&self.dict, stop_flag(&self.spmd, &self.cancel));
            let res = if self.timing {
                self.backend.launch_timed(kernel, &refs, &ctx).map(|(outs, device)| {
                    // An instruction's launches (its pieces, its slices) add up.
                    if let Some(d) = device {
                        self.device_time = Some(self.device_time.unwrap_or_default() + d);
                    }
                    outs
                })
            } else {
                crate::launch_kernel(&mut *self.backend, kernel, &refs, &ctx)
            };
            match res {
                Ok(outs) => return Ok(outs),
                // Tried again only when the failure left nothing behind.
                Err(e)
                    if is_out_of_memory(&e.0)
                        && self.backend.mem().in_use == before
                        && (self.memory_limit.is_some() || self.backend.memory_is_separate()) =>
                {
                    let freed = self
                        .evict_some(moved.max(1), arg_slots)
                        .map_err(|msg| RuntimeError::Kernel { at: what(), msg })?;
                    if freed == 0 {
                        return Err(RuntimeError::Kernel { at: what(), msg: e.0 });
                    }
                    moved += freed;
                }
                Err(e) => {
                    self.failure_leaked = is_out_of_memory(&e.0) && self.backend.mem().in_use != before;
                    return Err(RuntimeError::Kernel { at: what(), msg: e.0 });
                }
            }
        }
    }

    /// For a launch that ran out of memory (its message says `out of memory`), notes with
    /// the sizes and what may help: for a join, the rows of each side and the rows and
    /// bytes of its output, and whether it is a cross product; for another kernel, the
    /// rows it reads. Nothing for another error.
    fn memory_notes(&mut self, kernel: &Kernel, args: &[fox_kernel::BufId], msg: &str) -> Vec<String> {
        if !msg.contains("out of memory") {
            return Vec::new();
        }
        if matches!(kernel, Kernel::Window { .. }) {
            // The window's own message gives the sizes of its rounds.
            return vec![if self.memory_limit.is_some() {
                "help: raise --memory-limit".to_string()
            } else {
                "help: this needs more memory than the machine has available".to_string()
            }];
        }
        let lens: Vec<Option<usize>> = args
            .iter()
            .map(|a| self.var_slot(a.0 as usize).ok().map(|s| self.slot_buf(s).len))
            .collect();
        let mut notes = Vec::new();
        let cross = match *kernel {
            Kernel::JoinCount { nkeys } | Kernel::JoinWrite { nkeys } => {
                let k = if nkeys == 0 { 2 } else { 2 * nkeys };
                let total = match kernel {
                    Kernel::JoinWrite { .. } => args
                        .get(k + 1)
                        .and_then(|a| self.var_slot(a.0 as usize).ok())
                        .and_then(|s| match self.download_arg(s) {
                            Ok(HostCol::U64(v)) if v.len() == 1 => Some(v[0]),
                            _ => None,
                        }),
                    _ => None,
                };
                if let (Some(Some(l)), Some(Some(r))) = (lens.first(), lens.get(k / 2)) {
                    let mut n = format!("the join has {l} rows on its left side and {r} on its right");
                    if let Some(t) = total {
                        n.push_str(&format!(
                            " and makes {t} rows ({} of row indices, before its columns are gathered)",
                            crate::alloc::bytes_text(u128::from(t) * 8)
                        ));
                    }
                    notes.push(n);
                }
                nkeys == 0
            }
            _ => {
                if let Some(rows) = lens.iter().flatten().max() {
                    notes.push(format!("the operation reads columns of up to {rows} rows"));
                }
                false
            }
        };
        if cross {
            notes.push(
                "help: the join shares no variable between its two sides, so it is a cross product \
                 (every row of one side with every row of the other), and a condition that is not \
                 an equality is applied only after it: equate a variable of both sides, or filter \
                 each side first"
                    .to_string(),
            );
        }
        if msg.contains("--memory-limit") {
            // A buffer read twice (an intersection of a level with itself) counts once.
            let mut slots: Vec<usize> = args.iter().filter_map(|a| self.var_slot(a.0 as usize).ok()).collect();
            slots.sort_unstable();
            slots.dedup();
            let held: usize = slots.iter().map(|&s| self.slot_buf(s).bytes()).sum();
            notes.push(format!(
                "the operation's arguments take {} on the device; the buffers it does not read move \
                 to the host tier to make room, but its arguments, outputs and temporaries must fit \
                 the limit together",
                crate::alloc::bytes_text(held as u128)
            ));
        }
        notes.push(if msg.contains("--memory-limit") {
            "help: raise --memory-limit, or make the rule produce fewer rows (filter its inputs)".to_string()
        } else {
            "help: this needs more memory than the machine has available: make the rule produce \
             fewer rows (filter its inputs)"
                .to_string()
        });
        notes
    }

    /// For an expression kernel that failed on one row (see [`crate::backend::failing_row`]),
    /// a note with the values of its argument columns in that row; nothing for another
    /// error, or when the values cannot be read.
    fn row_values(&mut self, kernel: &Kernel, args: &[fox_kernel::BufId], msg: &str) -> Vec<String> {
        let n_cols = match kernel {
            Kernel::Eval { n_cols, .. } | Kernel::FusedReduce { n_cols, .. } => *n_cols,
            _ => return Vec::new(),
        };
        let Some(row) = crate::backend::failing_row(msg) else {
            return Vec::new();
        };
        let mut used = vec![false; n_cols];
        match kernel {
            Kernel::Eval { expr, .. } => mark_cols(expr, &mut used),
            Kernel::FusedReduce { filter, exprs, .. } => {
                for e in filter.iter().chain(exprs.iter().flatten()) {
                    mark_cols(e, &mut used);
                }
            }
            _ => {}
        }
        let mut parts = Vec::new();
        for (c, a) in args.iter().take(n_cols).enumerate() {
            if !used[c] {
                continue;
            }
            let Ok(slot) = self.var_slot(a.0 as usize) else {
                return Vec::new();
            };
            let col = match &self.tiers[slot] {
                // A column in the host tier (an operator run in chunks of rows) is read there.
                Tier::Host(h) if row < h.len() => rows::host_row(h, row),
                Tier::Db(d) if row < d.rows.len() => d.column().row(d.rows.start + row),
                Tier::Device => {
                    let buf = &self.slots[slot].as_ref().expect("occupied").0;
                    if row >= buf.len {
                        return Vec::new();
                    }
                    let slice = Kernel::Slice {
                        start: row as u64,
                        len: 1,
                    };
                    let Ok(mut one) = self
                        .backend
                        .launch(&slice, &[buf], &DictCtx(&self.dict, crate::cancel::never()))
                    else {
                        return Vec::new();
                    };
                    let col = one.pop().map(|b| {
                        let col = self.backend.download(&b);
                        self.backend.free(b);
                        col
                    });
                    match col {
                        Some(Ok(col)) => col,
                        _ => return Vec::new(),
                    }
                }
                _ => return Vec::new(),
            };
            let var = &self.plan.buffers[a.0 as usize];
            let label = match self.column_labels(kernel, args) {
                Some(labels) => labels[c].to_string(),
                None => format!("c{c}"),
            };
            parts.push(format!("{label} = {}", cell_text(&col, 0, var.ty, &self.dict)));
        }
        if parts.is_empty() {
            return Vec::new();
        }
        vec![format!("the values of row {row}: {}", parts.join(", "))]
    }

    /// The variables an expression kernel's columns `c0, c1, …` hold, when each has a
    /// distinct name (see [`var_label`]).
    fn column_labels(&self, kernel: &Kernel, args: &[fox_kernel::BufId]) -> Option<Vec<&str>> {
        let n_cols = match kernel {
            Kernel::Eval { n_cols, .. } | Kernel::FusedReduce { n_cols, .. } => *n_cols,
            _ => return None,
        };
        let labels: Vec<&str> = args
            .iter()
            .take(n_cols)
            .map(|a| var_label(&self.plan.buffers[a.0 as usize].name))
            .collect();
        let distinct: std::collections::HashSet<&str> = labels.iter().copied().collect();
        let plain = labels.iter().all(|l| {
            let mut c = l.chars();
            c.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        (plain && distinct.len() == labels.len()).then_some(labels)
    }

    /// The data of a slot on the host: downloaded, or a copy of the host tier's.
    fn download_arg(&mut self, slot: usize) -> Result<HostCol, HostError> {
        match &self.tiers[slot] {
            Tier::Device => {}
            Tier::Host(col) => return col.try_clone("a copy from the host tier").map_err(HostError::Kernel),
            Tier::Db(rows) => return rows.copy().map_err(HostError::Kernel),
            Tier::Gone => return Err(HostError::Kernel("the buffer was lost".to_string())),
        }
        let buf = &self.slots[slot].as_ref().expect("occupied").0;
        let t = Instant::now();
        let col = self.backend.download(buf).map_err(|e| HostError::Kernel(e.0));
        self.stats.download += t.elapsed();
        col
    }

    /// `Slice { start, len }` on the host, for columns that do not fit the device budget
    /// (a limit's first rows of an output's sorted columns): each output column is its
    /// column's rows, read from wherever it is, defined in the host tier.
    fn slice_on_host(
        &mut self,
        kernel: &Kernel,
        arg_slots: &[usize],
        outs: &[fox_kernel::BufId],
        what: &dyn Fn() -> String,
    ) -> Result<(), RuntimeError> {
        let Kernel::Slice { start, len } = *kernel else {
            return Err(RuntimeError::Plan(format!("{}: not a slice", what())));
        };
        if arg_slots.len() != outs.len() {
            return Err(RuntimeError::Plan(format!(
                "{}: {} columns sliced into {} outputs",
                what(),
                arg_slots.len(),
                outs.len()
            )));
        }
        let kerr = |msg: String| RuntimeError::Kernel { at: what(), msg };
        for (&s, o) in arg_slots.iter().zip(outs) {
            let n = self.slot_buf(s).len;
            let a = usize::try_from(start).unwrap_or(usize::MAX).min(n);
            let b = usize::try_from(start.saturating_add(len)).unwrap_or(usize::MAX).min(n);
            let part = match self.rows_off_device(s, a, b) {
                Some(part) => part.map_err(kerr)?,
                None => {
                    let col = self.download_arg(s).map_err(|e| host_error(e, what))?;
                    rows::host_slice(&col, a, b).map_err(kerr)?
                }
            };
            self.define_in_host_tier(o.0 as usize, part);
        }
        Ok(())
    }

    /// `Concat { parts, width }` on the host, for columns that do not fit the device
    /// budget: each output column is its parts one after the other, read from wherever
    /// they are, and defined in the host tier.
    fn concat_on_host(
        &mut self,
        kernel: &Kernel,
        arg_slots: &[usize],
        outs: &[fox_kernel::BufId],
        what: &dyn Fn() -> String,
    ) -> Result<(), RuntimeError> {
        let Kernel::Concat { parts, width } = *kernel else {
            return Err(RuntimeError::Plan(format!("{}: not a concatenation", what())));
        };
        if arg_slots.len() != parts * width || outs.len() != width {
            return Err(RuntimeError::Plan(format!(
                "{}: {} arguments and {} outputs for {parts} parts of {width} columns",
                what(),
                arg_slots.len(),
                outs.len()
            )));
        }
        for (j, o) in outs.iter().enumerate() {
            let mut cols = Vec::with_capacity(parts);
            for g in 0..parts {
                cols.push(
                    self.download_arg(arg_slots[g * width + j])
                        .map_err(|e| host_error(e, what))?,
                );
            }
            let elem = self.plan.buffers[o.0 as usize].elem;
            let col = HostCol::try_concat(elem, cols, "the concatenated column")
                .map_err(|msg| RuntimeError::Kernel { at: what(), msg })?;
            self.define_in_host_tier(o.0 as usize, col);
        }
        Ok(())
    }

    /// The codes the run's strings can have (the database's codes of the plan's string
    /// columns and the constants', sorted and distinct), worked out on first use; `None`
    /// when the dictionary was built for this run (every code is).
    fn reachable_codes(&mut self) -> Result<Option<std::sync::Arc<Vec<u32>>>, String> {
        if let Reachable::Pending(db, consts) = &self.reachable {
            let base = db.codes_read_by(self.plan)?;
            // Constants of the loaded dictionary that no column read holds join
            // the codes (appended ones are covered by the table anyway).
            let n = self.dict.sorted_len() as u32;
            let mut missing: Vec<u32> = consts
                .iter()
                .copied()
                .filter(|&c| c < n && base.binary_search(&c).is_err())
                .collect();
            let codes = if missing.is_empty() {
                base
            } else {
                missing.sort_unstable();
                missing.dedup();
                let mut merged =
                    crate::alloc::try_with_capacity(base.len() + missing.len(), "the strings a plan reads")?;
                let (mut i, mut j) = (0, 0);
                while i < base.len() || j < missing.len() {
                    if j == missing.len() || (i < base.len() && base[i] < missing[j]) {
                        merged.push(base[i]);
                        i += 1;
                    } else {
                        merged.push(missing[j]);
                        j += 1;
                    }
                }
                std::sync::Arc::new(merged)
            };
            self.reachable = Reachable::Known(codes);
        }
        Ok(match &self.reachable {
            Reachable::Known(r) => Some(r.clone()),
            _ => None,
        })
    }

    /// Runs a host-side kernel and returns its output columns.
    fn host_kernel(&mut self, kernel: &Kernel, args: &[usize], n_outs: usize) -> Result<Vec<HostCol>, HostError> {
        let expect_outs = |n: usize| {
            if n_outs == n {
                Ok(())
            } else {
                Err(HostError::Plan(format!(
                    "it has {n} outputs but the plan names {n_outs}"
                )))
            }
        };
        let expect_args = |n: usize| {
            if args.len() == n {
                Ok(())
            } else {
                Err(HostError::Plan(format!(
                    "it takes {n} arguments but the plan gives {}",
                    args.len()
                )))
            }
        };
        match kernel {
            Kernel::LoadInput { input, .. } => {
                expect_args(0)?;
                let rel = &self.plan.inputs[*input];
                expect_outs(rel.columns.len())?;
                let entry = self.inputs[*input].as_mut().expect("loaded in prepare");
                let name = &rel.name;
                if entry.reusable {
                    entry
                        .cols
                        .iter()
                        .map(|c| c.try_clone(&format!("a copy of `{name}`")))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(HostError::Kernel)
                } else {
                    entry.reusable = true;
                    Ok(std::mem::take(&mut entry.cols))
                }
                .and_then(|cols: Vec<HostCol>| {
                    if cols.is_empty() && !rel.columns.is_empty() {
                        Err(HostError::Plan("the input was already loaded".into()))
                    } else {
                        Ok(cols)
                    }
                })
            }
            Kernel::Const { types, rows } if types.is_empty() => {
                // A relation with no columns: its hidden row-count column of ones.
                expect_args(0)?;
                expect_outs(1)?;
                if let Some(r) = rows.iter().position(|r| !r.is_empty()) {
                    return Err(HostError::Plan(format!("row {r} has values but there are no columns")));
                }
                Ok(vec![HostCol::U8(vec![1; rows.len()])])
            }
            Kernel::Const { types, rows } => {
                expect_args(0)?;
                expect_outs(types.len())?;
                const_columns(types, rows, &self.dict).map_err(HostError::Plan)
            }
            Kernel::DictTable { op } => {
                expect_args(0)?;
                expect_outs(1)?;
                let codes = self.reachable_codes().map_err(HostError::Kernel)?;
                let codes = codes.as_ref().map(|c| c.as_slice());
                Ok(vec![self.dict.table_for(op, codes).map_err(HostError::Kernel)?])
            }
            Kernel::StrFn { func } => {
                expect_outs(1)?;
                let n = func.params().len();
                expect_args(n)?;
                let mut cols = Vec::with_capacity(n);
                for &s in args {
                    cols.push(self.download_arg(s)?);
                }
                // An argument after the first of one row holds the value of every row.
                let len = cols[0].len();
                if cols[1..].iter().any(|c| c.len() != len && c.len() != 1) {
                    return Err(HostError::Plan("its arguments have different lengths".into()));
                }
                use rayon::prelude::*;
                for c in &cols {
                    if let HostCol::U32(v) = c {
                        if let Some(&bad) = v.par_iter().find_any(|&&x| x as usize >= self.dict.len()) {
                            dict_text(&self.dict, bad)?;
                        }
                    }
                }
                let text = |code: u32| self.dict.get(code).unwrap_or_default();
                let ops = match (func, cols.as_slice()) {
                    (StrFunc::Substr, [HostCol::U32(s), HostCol::I64(st), HostCol::I64(ln)]) => {
                        Operands::Substr(s, st, ln)
                    }
                    (StrFunc::Concat, [HostCol::U32(a), HostCol::U32(b)]) => Operands::Concat(a, b),
                    (StrFunc::ToString, [HostCol::I64(x)]) => Operands::ToString(x),
                    (StrFunc::ToNumber | StrFunc::ToUnsigned, [HostCol::U32(s)]) => {
                        // Integers read from the strings' text: no string is made.
                        let unsigned = *func == StrFunc::ToUnsigned;
                        let read = |c: u32| fox_kernel::parse_souffle_int(text(c), unsigned);
                        if let Some(row) = s.par_iter().position_first(|&c| read(c).is_none()) {
                            return Err(HostError::Kernel(format!(
                                "`{}` of {:?} has no value: {} (row {row})",
                                func.name(),
                                text(s[row]),
                                if unsigned {
                                    "the string does not start with an unsigned integer from 0 to 9223372036854775807"
                                } else {
                                    "the string does not start with an integer from -9223372036854775808 to 9223372036854775807"
                                }
                            )));
                        }
                        let mut out: Vec<i64> =
                            crate::alloc::try_with_capacity(s.len(), "the integers read by to_number")
                                .map_err(HostError::Kernel)?;
                        out.par_extend(s.par_iter().map(|&c| read(c).unwrap_or(0)));
                        return Ok(vec![HostCol::I64(out)]);
                    }
                    _ => {
                        let got: Vec<String> = cols.iter().map(|c| format!("{:?}", c.elem())).collect();
                        let want: Vec<String> = func.params().iter().map(|e| format!("{e:?}")).collect();
                        return Err(HostError::Plan(format!(
                            "its arguments are [{}]; {func:?} takes [{}]",
                            got.join(", "),
                            want.join(", ")
                        )));
                    }
                };
                // Every row's result as a code of the dictionary, or as `u32::MAX - k` for
                // `new_strings[k]`, the strings not in the dictionary in the order first met.
                let (mut out, new_strings) = {
                    let by_code = match ops {
                        Operands::Substr(s, st, ln) if self.spmd.is_some() => self.substr_over_devices(s, st, ln)?,
                        Operands::Substr(s, st, ln)
                            if !s.is_empty()
                                && st.par_iter().all(|&x| x == st[0])
                                && ln.par_iter().all(|&x| x == ln[0]) =>
                        {
                            substr_by_code(&self.dict, s, st[0], ln[0]).map_err(HostError::Kernel)?
                        }
                        _ => None,
                    };
                    match by_code {
                        Some(done) => done,
                        None => str_fn_by_row(&self.dict, ops, len)?,
                    }
                };
                // New strings get codes after the dictionary's, in the order first met (on
                // several devices, in device order).
                if !new_strings.is_empty() || self.spmd.is_some() {
                    let codes = self.intern_all(new_strings)?;
                    if !codes.is_empty() {
                        let first_marker = u32::MAX - (codes.len() as u32 - 1);
                        out.par_iter_mut().for_each(|c| {
                            if *c >= first_marker {
                                *c = codes[(u32::MAX - *c) as usize];
                            }
                        });
                    }
                }
                Ok(vec![HostCol::U32(out)])
            }
            Kernel::Outgrows { factor } => {
                expect_outs(1)?;
                expect_args(2)?;
                let len = |s: usize| self.slot_buf(s).len as u128;
                let grown = len(args[0]) * u128::from(*factor) > len(args[1]);
                Ok(vec![HostCol::U8(if grown { vec![1] } else { Vec::new() })])
            }
            Kernel::Window { row_bytes, max_rows } => {
                expect_outs(1)?;
                if args.is_empty() || args.len() > 2 {
                    return Err(HostError::Plan(format!(
                        "it takes 1 or 2 arguments but the plan gives {}",
                        args.len()
                    )));
                }
                let total = match self.download_arg(args[0])? {
                    HostCol::U64(v) if v.len() == 1 => v[0],
                    c => {
                        return Err(HostError::Plan(format!(
                            "total must be one U64 row, is {} rows",
                            c.len()
                        )))
                    }
                };
                let start = match args.get(1) {
                    None => 0,
                    Some(&a) => match self.download_arg(a)? {
                        HostCol::U64(v) if v.len() == 2 => v[1],
                        HostCol::U64(v) if v.is_empty() => total,
                        c => {
                            return Err(HostError::Plan(format!(
                                "the previous window must be 0 or 2 U64 rows, is {} rows",
                                c.len()
                            )))
                        }
                    },
                };
                if start >= total {
                    if self.spmd.is_some() {
                        // Other devices may go on: this one takes windows of no rows,
                        // which its loop test counts as empty.
                        self.window_spent = true;
                        return Ok(vec![HostCol::U64(vec![total, total])]);
                    }
                    return Ok(vec![HostCol::U64(Vec::new())]);
                }
                let rows = self.round_rows(total - start, *row_bytes, max_rows.unwrap_or(u64::MAX))?;
                self.stats.rounds += 1;
                Ok(vec![HostCol::U64(vec![start, total.min(start.saturating_add(rows))])])
            }
            Kernel::Claim { boxes, row_bytes } => {
                expect_outs(1)?;
                if args.is_empty() || args.len() > 2 {
                    return Err(HostError::Plan(format!(
                        "it takes 1 or 2 arguments but the plan gives {}",
                        args.len()
                    )));
                }
                self.claim(args, *boxes, *row_bytes)
            }
            _ => unreachable!("only host kernels reach host_kernel"),
        }
    }

    /// The most outputs of `row_bytes` bytes each (of `left` still to expand) that the
    /// next round of an expansion may take: what fits half the memory the run may still
    /// use ([`Interp::round_room`], asked for room for no more rows than the window may
    /// take), at least one, and at most `cap` and the run's window cap ([`MAX_WINDOW_ROWS`],
    /// so that a round's rows stay u32-addressed); an error when not even one fits.
    fn round_rows(&mut self, left: u64, row_bytes: u64, cap: u64) -> Result<u64, HostError> {
        let row_bytes = row_bytes.max(1);
        let cap = cap.min(self.window_rows).max(1);
        let room = self.round_room(left.min(cap), row_bytes).map_err(HostError::Kernel)?;
        let (limit, in_use) = (room.limit, room.reads + room.others);
        let budget = limit.saturating_sub(in_use) / 2;
        if budget < row_bytes {
            // Windows of one row would make as many rounds as rows: a run that
            // cannot keep its limit says so instead.
            let limit_text = match self.memory_limit {
                Some(_) => format!(
                    "the memory limit (--memory-limit) of {}",
                    crate::alloc::bytes_text(limit.into())
                ),
                None => format!("the {} the backend has", crate::alloc::bytes_text(limit.into())),
            };
            let b = |n: u64| crate::alloc::bytes_text(n.into());
            return Err(HostError::Kernel(format!(
                "out of memory: {limit_text} leaves no room for a round of this expansion: the \
                 buffers every round reads (of a multi-way join: its tries and the rows of the levels \
                 before) take {}, {} more are in use, and a row of a round takes {row_bytes} bytes, twice \
                 over ({} rows are left), so a round needs more than {}",
                b(room.reads),
                b(room.others),
                left,
                b(in_use.saturating_add(row_bytes.saturating_mul(2)))
            )));
        }
        Ok((budget / row_bytes).clamp(1, cap))
    }

    /// `Claim`: the next window of an expansion cut into boxes of at least `1/boxes` of its
    /// outputs ([`crate::spmd::BoxCut`] over the run's devices) that this device works on
    /// (see [`Kernel::Claim`]): the rest of its current box, else the next box no device
    /// has taken (from the run's shared counter; on one device, every box in turn), at
    /// most what fits with `row_bytes`; no rows when every box is taken.
    fn claim(&mut self, args: &[usize], boxes: u32, row_bytes: Option<u64>) -> Result<Vec<HostCol>, HostError> {
        let total = match self.download_arg(args[0])? {
            HostCol::U64(v) if v.len() == 1 => v[0],
            c => {
                return Err(HostError::Plan(format!(
                    "total must be one U64 row, is {} rows",
                    c.len()
                )))
            }
        };
        let prev = match args.get(1) {
            None => None,
            Some(&a) => match self.download_arg(a)? {
                HostCol::U64(v) if v.len() == 2 && v[0] < v[1] && v[1] <= total => Some((v[0], v[1])),
                c => {
                    return Err(HostError::Plan(format!(
                        "the previous window must be 2 increasing U64 rows within the total, is {} rows",
                        c.len()
                    )))
                }
            },
        };
        if prev.is_none() {
            self.claims_started += 1;
            self.local_next = 0;
        }
        let expansion = self
            .claims_started
            .checked_sub(1)
            .ok_or_else(|| HostError::Plan("a claim goes on from a window before any expansion started".into()))?;
        let devices = self.spmd.as_ref().map_or(1, |d| d.comm.size());
        let cut = crate::spmd::BoxCut::new(total, boxes, devices);
        // The rest of the current box, else the next box not taken.
        let (start, end) = match prev.map(|(s, e)| (e, cut.bounds(cut.of(s)).1)) {
            Some((e, box_end)) if e < box_end => (e, box_end),
            _ => {
                let k = match &self.spmd {
                    Some(d) => {
                        if d.comm.is_aborted() {
                            self.peer_stop.set(true);
                            return Err(HostError::Run(RuntimeError::Cancelled));
                        }
                        d.comm.claim(expansion, d.rank, total, boxes).map_err(HostError::Plan)?
                    }
                    None => {
                        let k = (self.local_next < cut.len()).then_some(self.local_next);
                        self.local_next = self.local_next.saturating_add(1);
                        k
                    }
                };
                let Some(k) = k else {
                    return Ok(vec![HostCol::U64(Vec::new())]);
                };
                self.stats.boxes += 1;
                cut.bounds(k)
            }
        };
        let end = match row_bytes {
            Some(b) => {
                let rows = self.round_rows(end - start, b, u64::MAX)?;
                self.stats.rounds += 1;
                end.min(start.saturating_add(rows))
            }
            None => end,
        };
        Ok(vec![HostCol::U64(vec![start, end])])
    }

    /// The memory the next window of an expansion that would take `rows` rows (those left,
    /// at most its cap), `row_bytes` each, is sized by: the limit of
    /// [`Interp::round_memory`] and the bytes the rounds hold besides the window, those on
    /// the device and those of the buffers every round reads as they were before the loop
    /// ([`tier::loop_reads`]) that wait in the host tier (they come back during the round;
    /// counted only where they all fit beside a round of one row, since otherwise their
    /// readers run in pieces). When the window would take less than a quarter of `rows`
    /// (it may take half of what is left), the buffers the loop does not read make room:
    /// resident columns this run no longer holds are given back, then the others move to
    /// the host tier (furthest next use first) until `rows` fit or none is left to move.
    /// So the rounds keep what every round reads (the tries' levels) on the device from
    /// round to round, and a plan that fits, or whose windows take their cap, is sized as
    /// before. Where that still leaves no room for one row, or where the windows it would
    /// make larger save more rounds than bringing them back every round costs
    /// ([`ROUND_MS`], [`HOST_TIER_BYTES_PER_MS`]), the buffers every round reads move to
    /// the host tier as well, and the rounds' kernels take them in pieces.
    fn round_room(&mut self, rows: u64, row_bytes: u64) -> Result<RoundRoom, String> {
        let (limit, in_use) = self.round_memory();
        let plan = self.plan;
        let Some(names) = tier::loop_reads(&plan.blocks, plan.entry.0 as usize, self.pos.0) else {
            return Ok(RoundRoom {
                limit,
                reads: 0,
                others: in_use,
            });
        };
        let slots = |me: &Self, names: &[u32]| {
            let mut s: Vec<usize> = names.iter().filter_map(|&v| me.var_slot(v as usize).ok()).collect();
            s.sort_unstable();
            s.dedup();
            s
        };
        // Every buffer the loop reads stays; those every round reads as they were before
        // the loop are counted wherever they are.
        let keep = slots(self, &names.all);
        let invariant = slots(self, &names.invariant);
        let room = |me: &Self| {
            let (mut reads, mut on_device) = (0, 0);
            for &s in &invariant {
                let bytes = me.slot_buf(s).bytes() as u64;
                reads += bytes;
                if matches!(me.tiers[s], Tier::Device) {
                    on_device += bytes;
                }
            }
            let in_use = me.backend.mem().in_use as u64;
            // Those waiting in the host tier count only when they could all come back
            // beside a round of one row; otherwise their readers take them in pieces.
            let reads = if in_use
                .saturating_add(reads - on_device)
                .saturating_add(row_bytes.saturating_mul(2))
                > limit
            {
                on_device
            } else {
                reads
            };
            RoundRoom {
                limit,
                reads,
                others: in_use.saturating_sub(on_device),
            }
        };
        // How far the memory is from a window of `rows` rows (taking half of what is left).
        let short_of = |me: &Self, rows: u64| {
            let r = room(me);
            (r.reads + r.others)
                .saturating_add(rows.saturating_mul(row_bytes).saturating_mul(2))
                .saturating_sub(limit)
        };
        let short = |me: &Self| short_of(me, rows);
        // Making room costs transfers (and resident columns a later run uploads again):
        // only for a window at least four times what fits as things are.
        if self.device_cap.is_none() || short_of(self, rows.div_ceil(4)) == 0 {
            return Ok(room(self));
        }
        self.release_resident(short(self).min(usize::MAX as u64) as usize);
        for c in self.victims(&keep) {
            if short(self) == 0 {
                break;
            }
            // One that would not make room for a row of the window stays (a round's
            // running count, a window).
            if (c.bytes as u64) < row_bytes.saturating_mul(2) {
                continue;
            }
            self.evict(c.slot)?;
        }
        // What every round reads may go to the host tier too, where it no longer counts
        // once it could not all come back beside a round of one row, and the rounds'
        // kernels take it in pieces: then every round brings it back. Only where no row
        // of a window fits beside it, or where the larger windows save more rounds than
        // bringing it back costs (a round's fixed cost against the bytes at the host
        // tier's speed).
        let fits = |me: &Self, on_device: u64| {
            let r = room(me);
            let left = limit.saturating_sub(r.others.saturating_add(on_device)) / 2;
            (left / row_bytes).min(rows)
        };
        let invariant_on_device: u64 = invariant
            .iter()
            .filter(|&&s| matches!(self.tiers[s], Tier::Device))
            .map(|&s| self.slot_buf(s).bytes() as u64)
            .sum();
        let (now, without) = (fits(self, room(self).reads), fits(self, 0));
        let back_ms = invariant_on_device as f64 / HOST_TIER_BYTES_PER_MS;
        if short(self) > 0 && (now == 0 || without as f64 > now as f64 * (1.0 + back_ms / ROUND_MS)) {
            let others: Vec<usize> = keep.iter().copied().filter(|s| !invariant.contains(s)).collect();
            for c in self.victims(&others) {
                if short(self) == 0 {
                    break;
                }
                self.evict(c.slot)?;
            }
        }
        Ok(room(self))
    }

    /// The memory a multi-round expansion sizes its rounds by: the limit of the run (else
    /// the backend's capacity, else 8 GiB) and the bytes in use; a round may take half of
    /// what is left.
    fn round_memory(&self) -> (u64, u64) {
        let cap = self.backend.memory_capacity().map(|c| c as u64);
        let limit = match (self.memory_limit, cap) {
            (Some(l), Some(c)) => l.min(c),
            (Some(l), None) => l,
            (None, Some(c)) => c,
            (None, None) => 8 << 30,
        };
        (limit, self.backend.mem().in_use as u64)
    }

    fn intern(&mut self, s: &str) -> Result<u32, HostError> {
        self.dict.intern(s).map_err(HostError::Kernel)
    }

    /// The codes of `strings`, interned in their order. On several devices a collective:
    /// every device interns the strings of all, in device order, so that the dictionaries
    /// stay identical.
    fn intern_all(&mut self, strings: Vec<String>) -> Result<Vec<u32>, HostError> {
        let Some(d) = &self.spmd else {
            return strings.iter().map(|s| self.intern(s)).collect();
        };
        let (rank, n) = (d.rank, d.comm.size());
        let (block, i) = self.pos;
        let plan = self.plan;
        let what = || at(plan, block, i);
        let g = self.collective((block, i), strings, &what).map_err(HostError::Run)?;
        let mut mine = Vec::new();
        for r in 0..n {
            for s in g.get::<Vec<String>>(r) {
                let c = self.intern(s)?;
                if r == rank {
                    mine.push(c);
                }
            }
        }
        Ok(mine)
    }

    /// `substr(s, st, ln)` on one device of several, by a table of the codes of every
    /// device's rows made once for the run (a collective: every device decides alike).
    /// Where start and length are the same on every row of every device, and the codes
    /// from the smallest of all devices' rows to the largest number at most 4 per row of
    /// all devices, the first device to ask makes the table and the others read it, so
    /// that N devices whose parts span the same codes do not each compute them all.
    /// `None` (each device goes by row) otherwise.
    fn substr_over_devices(&self, s: &[u32], st: &[i64], ln: &[i64]) -> Result<Option<StrFnCodes>, HostError> {
        use rayon::prelude::*;
        #[derive(Clone, Copy, PartialEq)]
        struct Ask {
            constant: bool,
            args: Option<(i64, i64)>,
            range: Option<(u32, u32)>,
            rows: usize,
        }
        let d = self.spmd.as_ref().expect("a run over several devices");
        let constant = s.is_empty() || (st.par_iter().all(|&x| x == st[0]) && ln.par_iter().all(|&x| x == ln[0]));
        let ask = Ask {
            constant,
            args: (!s.is_empty()).then(|| (st[0], ln[0])),
            range: code_range(s),
            rows: s.len(),
        };
        let (block, i) = self.pos;
        let plan = self.plan;
        let what = || at(plan, block, i);
        let g = self.collective((block, i), ask, &what).map_err(HostError::Run)?;
        let asks: Vec<Ask> = (0..d.comm.size()).map(|r| *g.get::<Ask>(r)).collect();
        if asks.iter().any(|a| !a.constant) {
            return Ok(None);
        }
        let mut args = asks.iter().filter_map(|a| a.args);
        let Some((start, length)) = args.next() else {
            return Ok(None);
        };
        if args.any(|a| a != (start, length)) {
            return Ok(None);
        }
        let (lo, hi) = asks
            .iter()
            .filter_map(|a| a.range)
            .fold((u32::MAX, 0), |(lo, hi), (a, b)| (lo.min(a), hi.max(b)));
        if !substr_by_code_pays(lo, hi, asks.iter().map(|a| a.rows).sum()) {
            return Ok(None);
        }
        let table = d
            .comm
            .substr_table((lo, hi, start, length), || {
                substr_table(&self.dict, lo, hi, start, length).map(std::sync::Arc::new)
            })
            .map_err(HostError::Kernel)?;
        match table.as_ref() {
            Some(t) => Ok(Some(
                substr_by_shared_table(&self.dict, s, t).map_err(HostError::Kernel)?,
            )),
            None => Ok(None),
        }
    }

    /// `LoadInput` of device `rank` of several: its slice of each column of the input, or
    /// with `whole` every row (a replicated input: each device loads what one device
    /// loads, over its own link), from the database or the inputs read for the run,
    /// uploaded into `outs`.
    fn load_part(
        &mut self,
        input: usize,
        whole: bool,
        hash: &[usize],
        outs: &[fox_kernel::BufId],
        what: &dyn Fn() -> String,
    ) -> Result<(), RuntimeError> {
        let plan = self.plan;
        let rel = &plan.inputs[input];
        let d = self.spmd.as_ref().expect("a run over several devices");
        let (rank, n, shared) = (d.rank, d.comm.size(), d.inputs.clone());
        let db = self.database.clone();
        let source: Vec<Option<ColRef>> = match &db {
            Some(db) => {
                let t = db.table_for(rel).map_err(|msg| RuntimeError::Data { msg })?;
                (0..rel.columns.len())
                    .map(|c| Database::column(t, c).map(ColRef::Stored))
                    .collect()
            }
            None => match shared.get(input) {
                Some(Some(cols)) if cols.len() == rel.columns.len() => {
                    cols.iter().map(|c| Some(ColRef::Host(c))).collect()
                }
                _ => {
                    return Err(RuntimeError::Plan(format!(
                        "{}: the input `{}` was not read before the run",
                        what(),
                        rel.name
                    )))
                }
            },
        };
        let len = source.iter().flatten().map(|c| c.len()).max().unwrap_or(0);
        let rows = if whole {
            LoadRows::Range(Some(0..len))
        } else if !hash.is_empty() {
            LoadRows::Hashed {
                keys: hash.to_vec(),
                rank,
                devices: n,
            }
        } else {
            LoadRows::Range(Some(crate::spmd::input_rows(len, rank, n)))
        };
        let table = match &db {
            Some(db) => Some(db.table_for(rel).map_err(|msg| RuntimeError::Data { msg })?),
            None => None,
        };
        self.load_rows(input, &source, rows, table, outs, Some(what))
    }

    /// `Exchange` on device `rank` of several (see [`crate::spmd`]): the device's rows
    /// downloaded, routed, deposited and its parts taken in sender order, uploaded into
    /// `outs`. `Keep` moves nothing: each device keeps its own rows of the relation.
    #[allow(clippy::too_many_arguments)]
    fn exchange(
        &mut self,
        tag: crate::spmd::Tag,
        kernel: &Kernel,
        to: &fox_kernel::Exchange,
        arg_slots: &[usize],
        outs: &[fox_kernel::BufId],
        out_elems: &[Elem],
        what: &dyn Fn() -> String,
    ) -> Result<(), RuntimeError> {
        const WHAT: &str = "the rows an exchange keeps";
        let d = self.spmd.as_ref().expect("a run over several devices");
        let (rank, n) = (d.rank, d.comm.size());
        let kerr = |msg: String| RuntimeError::Kernel { at: what(), msg };
        {
            let refs: Vec<&DevBuf> = arg_slots.iter().map(|&s| self.slot_buf(s)).collect();
            check_launch(kernel, &refs, out_elems, &self.plan.inputs)
                .map_err(|m| RuntimeError::Plan(format!("{}: {m}", what())))?;
        }
        if self.backend.has_peer_link() {
            return self.exchange_on_devices(tag, to, arg_slots, outs, out_elems, what);
        }
        let mut cols = Vec::with_capacity(arg_slots.len());
        for &s in arg_slots {
            cols.push(self.download_arg(s).map_err(|e| match e {
                HostError::Plan(m) | HostError::Kernel(m) => kerr(m),
                HostError::Run(e) => e,
            })?);
        }
        let row_bytes: u64 = out_elems.iter().map(|e| e.size() as u64).sum();
        let received = if let fox_kernel::Exchange::Keep { cols: keys } = to {
            let dest = crate::spmd::destinations(&cols, keys, n);
            let mine: Vec<u32> = (0..dest.len() as u32)
                .filter(|&r| dest[r as usize] as usize == rank)
                .collect();
            cols.iter()
                .map(|c| c.try_pick(&mine, WHAT))
                .collect::<Result<Vec<_>, _>>()
                .map_err(kerr)?
        } else {
            let (parts, moved) = crate::spmd::route(cols, to, rank, n).map_err(kerr)?;
            self.stats.exchange.rows += moved;
            self.stats.exchange.bytes += moved * row_bytes;
            let g = self.collective(tag, parts, what)?;
            crate::spmd::receive(&g, rank, out_elems).map_err(kerr)?
        };
        self.stats.exchange.exchanges += 1;
        for (o, col) in outs.iter().zip(received) {
            let b = self.upload_room(col).map_err(|e| kerr(e.0))?;
            self.define(o.0 as usize, b);
        }
        Ok(())
    }

    /// `Exchange` where the backend links the devices ([`Backend::has_peer_link`]): the
    /// rows are routed on the device ([`Backend::route_rows`]), every device learns the
    /// rows each sends it (a host collective of the counts), and the backend moves the
    /// rows device to device ([`Backend::peer_exchange`]), received in sender order as
    /// on the host path.
    fn exchange_on_devices(
        &mut self,
        tag: crate::spmd::Tag,
        to: &fox_kernel::Exchange,
        arg_slots: &[usize],
        outs: &[fox_kernel::BufId],
        out_elems: &[Elem],
        what: &dyn Fn() -> String,
    ) -> Result<(), RuntimeError> {
        use fox_kernel::Exchange as X;
        let d = self.spmd.as_ref().expect("a run over several devices");
        let (comm, rank) = (d.comm, d.rank);
        let n = comm.size();
        let kerr = |msg: String| RuntimeError::Kernel { at: what(), msg };
        self.restore(arg_slots).map_err(kerr)?;
        let slots = &self.slots;
        let args: Vec<&DevBuf> = arg_slots
            .iter()
            .map(|&s| &slots[s].as_ref().expect("an argument's slot is occupied").0)
            .collect();
        let routed: Option<Vec<Vec<DevBuf>>> = match to {
            X::Hash { cols: keys } | X::Keep { cols: keys } => {
                let parts = self
                    .backend
                    .route_rows(&args, keys, n)
                    .map_err(|e| kerr(e.0))?
                    .ok_or_else(|| kerr(format!("{} links devices but does not route rows", self.backend.name())))?;
                Some(parts)
            }
            X::Gather | X::Broadcast => None,
        };
        if matches!(to, X::Keep { .. }) {
            let mut parts = routed.expect("a kept exchange is routed");
            let mine = std::mem::take(&mut parts[rank]);
            for b in parts.into_iter().flatten() {
                self.backend.free(b);
            }
            self.stats.exchange.exchanges += 1;
            for (o, b) in outs.iter().zip(mine) {
                self.define(o.0 as usize, b);
            }
            return Ok(());
        }
        let send: Vec<Vec<&DevBuf>> = match (to, &routed) {
            (_, Some(parts)) => parts.iter().map(|p| p.iter().collect()).collect(),
            (X::Broadcast, None) => (0..n).map(|_| args.clone()).collect(),
            _ => (0..n).map(|p| if p == 0 { args.clone() } else { Vec::new() }).collect(),
        };
        let lens: Vec<usize> = send.iter().map(|p| p.first().map_or(0, |b| b.len)).collect();
        let counted = self.collective(tag, lens.clone(), what);
        let result = (|| {
            let g = counted?;
            let recv_rows: Vec<usize> = (0..n).map(|q| g.get::<Vec<usize>>(q)[rank]).collect();
            let mut peer_failed = false;
            // This device's own error at a meeting (the run stalled while it waited, or
            // was cancelled).
            let mut own: Option<RuntimeError> = None;
            let mut meet = |msg: Result<Vec<u64>, String>| -> Result<Vec<Vec<u64>>, String> {
                match comm.all_gather(rank, tag, msg) {
                    Ok(g) => {
                        let all: Vec<&Result<Vec<u64>, String>> =
                            (0..n).map(|q| g.get::<Result<Vec<u64>, String>>(q)).collect();
                        match all
                            .iter()
                            .enumerate()
                            .find_map(|(q, m)| m.as_ref().err().map(|e| (q, e)))
                        {
                            None => Ok(all.into_iter().map(|m| m.clone().unwrap_or_default()).collect()),
                            Some((q, e)) => {
                                peer_failed = q != rank;
                                Err(format!("device {q}: {e}"))
                            }
                        }
                    }
                    Err(e) => match crate::spmd::comm_error(e, &what()) {
                        None => {
                            peer_failed = true;
                            Err("another device stopped".to_string())
                        }
                        Some(e) => {
                            let text = e.to_string();
                            own = Some(e);
                            Err(text)
                        }
                    },
                }
            };
            let got = self.backend.peer_exchange(&send, &recv_rows, out_elems, &mut meet);
            match got {
                Ok(bufs) => Ok(bufs),
                Err(_) if own.is_some() => Err(own.take().expect("checked")),
                Err(_) if peer_failed => {
                    self.peer_stop.set(true);
                    Err(RuntimeError::Cancelled)
                }
                Err(e) => Err(kerr(e.0)),
            }
        })();
        let moved: u64 = lens
            .iter()
            .enumerate()
            .filter(|&(p, _)| p != rank)
            .map(|(_, &l)| l as u64)
            .sum();
        for b in routed.into_iter().flatten().flatten() {
            self.backend.free(b);
        }
        let received = result?;
        let row_bytes: u64 = out_elems.iter().map(|e| e.size() as u64).sum();
        self.stats.exchange.rows += moved;
        self.stats.exchange.bytes += moved * row_bytes;
        self.stats.exchange.exchanges += 1;
        for (o, b) in outs.iter().zip(received) {
            self.define(o.0 as usize, b);
        }
        Ok(())
    }
}

type BlockIdx = usize;

/// Sets `used[i]` for each argument column `i` that `e` reads.
fn mark_cols(e: &fox_kernel::KExpr, used: &mut [bool]) {
    use fox_kernel::KExprKind as K;
    match &e.kind {
        K::Col(i) => {
            if let Some(u) = used.get_mut(*i) {
                *u = true;
            }
        }
        K::Const(_) => {}
        K::Table(_, x) | K::Cast(x) | K::Neg(x) | K::Not(x) | K::In(x, _) => mark_cols(x, used),
        K::Arith(_, a, b) | K::Cmp(_, a, b) => {
            mark_cols(a, used);
            mark_cols(b, used);
        }
        K::And(xs) | K::Or(xs) | K::Call(_, xs) => {
            for x in xs {
                mark_cols(x, used);
            }
        }
    }
}

/// The variable a buffer holds, from its name: `t12.price~2` and `sale.price` are `price`.
fn var_label(name: &str) -> &str {
    let name = name.split('~').next().unwrap_or(name);
    name.rsplit('.').next().unwrap_or(name)
}

/// `msg` with each column reference `c<i>` of an expression replaced by `labels[i]`
/// (outside string literals).
fn name_columns(msg: &str, labels: &[&str]) -> String {
    let b = msg.as_bytes();
    let mut out = String::with_capacity(msg.len());
    let mut i = 0;
    let mut quoted = false;
    while i < b.len() {
        if b[i] == b'"' && (i == 0 || b[i - 1] != b'\\') {
            quoted = !quoted;
        }
        let word_start = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        if b[i] == b'c' && word_start && !quoted {
            let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            let end = i + 1 + digits;
            let word_end = end == b.len() || !(b[end].is_ascii_alphanumeric() || b[end] == b'_');
            if digits > 0 && word_end {
                if let Some(l) = msg[i + 1..end].parse::<usize>().ok().and_then(|k| labels.get(k)) {
                    out.push_str(l);
                    i = end;
                    continue;
                }
            }
        }
        let ch = msg[i..].chars().next().unwrap_or(' ');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// Row `i` of a column as text (strings from the dictionary, by the column type `ty`).
fn cell_text(col: &HostCol, i: usize, ty: Option<Type>, dict: &Dictionary) -> String {
    use crate::output::{format_date, format_decimal};
    match (col, ty) {
        (HostCol::U32(v), Some(Type::String)) => match v.get(i).and_then(|&c| dict.get(c)) {
            Some(s) => s.to_string(),
            None => format!("<string #{}>", v.get(i).copied().unwrap_or(0)),
        },
        (HostCol::I32(v), Some(Type::Date)) => v.get(i).map_or_else(String::new, |&d| format_date(d)),
        (HostCol::I64(v), Some(Type::Decimal(s))) => {
            v.get(i).map_or_else(String::new, |&x| format_decimal(x.into(), s))
        }
        (HostCol::I128(v), Some(Type::WideDecimal(s))) => v.get(i).map_or_else(String::new, |&x| format_decimal(x, s)),
        (HostCol::U8(v), Some(Type::Bool)) => v.get(i).map_or_else(String::new, |&b| (b != 0).to_string()),
        (HostCol::F64(v), _) => v.get(i).map_or_else(String::new, |x| format!("{x:?}")),
        (HostCol::U8(v), _) => v.get(i).map_or_else(String::new, u8::to_string),
        (HostCol::I32(v), _) => v.get(i).map_or_else(String::new, i32::to_string),
        (HostCol::U32(v), _) => v.get(i).map_or_else(String::new, u32::to_string),
        (HostCol::I64(v), _) => v.get(i).map_or_else(String::new, i64::to_string),
        (HostCol::U64(v), _) => v.get(i).map_or_else(String::new, u64::to_string),
        (HostCol::I128(v), _) => v.get(i).map_or_else(String::new, i128::to_string),
    }
}

/// The error of a failed [`Instr::Assert`], from the texts of the row its args hold.
fn check_error(check: &fox_kernel::Check, row: &[String], origin: Option<fox_kernel::Span>, at: &str) -> RuntimeError {
    match check {
        fox_kernel::Check::Functional { pred, columns, keys } => {
            let n = columns.len();
            let (a, b) = (&row[..n.min(row.len())], &row[n.min(row.len())..]);
            let key: Vec<String> = a
                .iter()
                .zip(columns)
                .take(*keys)
                .map(|(v, c)| {
                    if c.ty == Type::String {
                        format!("{v:?}")
                    } else {
                        v.clone()
                    }
                })
                .collect();
            let value = |r: &[String]| r.last().cloned().unwrap_or_default();
            RuntimeError::Program {
                msg: format!(
                    "`{pred}[{}]` has two values, {} and {}",
                    key.join(", "),
                    value(a),
                    value(b)
                ),
                origin,
                notes: vec![
                    format!("`{pred}` is a functional predicate: its rules may give each key at most one value"),
                    format!("in {at}"),
                ],
            }
        }
    }
}

/// Row `r` of an argument of a string function: an argument after the first may hold
/// one row, the value of every row ([`fox_kernel::Kernel::StrFn`]).
fn row<T: Copy>(col: &[T], r: usize) -> T {
    if col.len() == 1 {
        col[0]
    } else {
        col[r]
    }
}

/// The operands of a string function that makes strings (`StrFn`), one value per row
/// (an argument after the first may hold one, the value of every row).
#[derive(Clone, Copy)]
enum Operands<'c> {
    Substr(&'c [u32], &'c [i64], &'c [i64]),
    Concat(&'c [u32], &'c [u32]),
    ToString(&'c [i64]),
}

const STR_FN_WHAT: &str = "the strings made by substr, concat or to_string";

/// A string function's results: each row's as a code of the dictionary, or as
/// `u32::MAX - k` for the `k`-th of the new strings, the results not in the dictionary in
/// the order first met by row.
type StrFnCodes = (Vec<u32>, Vec<String>);

/// The results of a string function over its `len` rows: each row's result as a code of
/// `dict`, or as `u32::MAX - k` for `new_strings[k]`, the results not in `dict` in the
/// order first met (by row). Each chunk of rows computes its results and numbers the
/// distinct ones (on all cores, with no list of every row's result); then each distinct
/// result gets its code once.
fn str_fn_by_row(dict: &Dictionary, ops: Operands, len: usize) -> Result<StrFnCodes, HostError> {
    use rayon::prelude::*;
    type Cow<'s> = std::borrow::Cow<'s, str>;
    let text = |code: u32| dict.get(code).unwrap_or_default();
    let result = |r: usize| -> Result<Cow, String> {
        Ok(match ops {
            Operands::Substr(s, st, ln) => Cow::Borrowed(crate::dict::substr_of(text(s[r]), row(st, r), row(ln, r))),
            Operands::Concat(a, b) => {
                let (a, b) = (text(a[r]), text(row(b, r)));
                let mut v = String::new();
                crate::alloc::fallible(|| v.try_reserve_exact(a.len() + b.len())).map_err(|_| {
                    crate::alloc::out_of_memory(a.len() as u128 + b.len() as u128, "a string made by concat")
                })?;
                v.push_str(a);
                v.push_str(b);
                Cow::Owned(v)
            }
            Operands::ToString(x) => Cow::Owned(x[r].to_string()),
        })
    };
    const CHUNK: usize = 1 << 16;
    let chunks: Vec<(Vec<u32>, Vec<Cow>)> = (0..len.div_ceil(CHUNK))
        .into_par_iter()
        .map(|k| -> Result<_, String> {
            let mut m: crate::load::FxHashMap<Cow, u32> = Default::default();
            let rows = k * CHUNK..((k + 1) * CHUNK).min(len);
            let mut ids = crate::alloc::try_with_capacity(rows.len(), STR_FN_WHAT)?;
            for r in rows {
                let v = result(r)?;
                let i = match m.get(v.as_ref()) {
                    Some(&i) => i,
                    None => {
                        let i = m.len() as u32;
                        m.insert(v, i);
                        i
                    }
                };
                ids.push(i);
            }
            // The distinct results in the order of their numbers.
            let mut distinct: Vec<(u32, Cow)> = m.into_iter().map(|(v, i)| (i, v)).collect();
            distinct.sort_unstable_by_key(|d| d.0);
            Ok((ids, distinct.into_iter().map(|(_, v)| v).collect()))
        })
        .collect::<Result<_, String>>()
        .map_err(HostError::Kernel)?;
    let mut seen: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    let mut new_strings: Vec<String> = Vec::new();
    let mut maps: Vec<Vec<u32>> = Vec::with_capacity(chunks.len());
    for (_, distinct) in &chunks {
        let mut map = Vec::with_capacity(distinct.len());
        for v in distinct {
            let v = v.as_ref();
            let c = match seen.get(v) {
                Some(&c) => c,
                None => {
                    let c = code_or_new(dict, v, &mut new_strings).map_err(HostError::Kernel)?;
                    seen.insert(v, c);
                    c
                }
            };
            map.push(c);
        }
        maps.push(map);
    }
    let mut out: Vec<u32> = crate::alloc::try_with_capacity(len, STR_FN_WHAT).map_err(HostError::Kernel)?;
    out.par_extend(
        chunks
            .par_iter()
            .zip(&maps)
            .flat_map_iter(|((ids, _), map)| ids.iter().map(move |&i| map[i as usize])),
    );
    Ok((out, new_strings))
}

/// The code of `v` in `dict`, or else the marker `u32::MAX - k` of `v` appended to
/// `new_strings` as its `k`-th string.
fn code_or_new(dict: &Dictionary, v: &str, new_strings: &mut Vec<String>) -> Result<u32, String> {
    Ok(match dict.code(v) {
        Some(c) => c,
        None => {
            new_strings.push(crate::alloc::try_string(v, STR_FN_WHAT)?);
            u32::MAX - (new_strings.len() as u32 - 1)
        }
    })
}

/// The smallest and the largest code of `s`; `None` when `s` is empty.
fn code_range(s: &[u32]) -> Option<(u32, u32)> {
    use rayon::prelude::*;
    s.par_iter()
        .fold(
            || None,
            |m: Option<(u32, u32)>, &c| Some(m.map_or((c, c), |(a, b)| (a.min(c), b.max(c)))),
        )
        .reduce(
            || None,
            |x, y| match (x, y) {
                (Some(x), Some(y)) => Some((x.0.min(y.0), x.1.max(y.1))),
                (x, None) => x,
                (None, y) => y,
            },
        )
}

/// Whether `substr` over the codes `lo..=hi` is worth doing by code for `rows` rows: the
/// range holds at most 4 codes per row.
fn substr_by_code_pays(lo: u32, hi: u32, rows: usize) -> bool {
    ((hi - lo) as usize + 1) / 4 <= rows
}

/// `substr(_, start, length)` of every dictionary code from `lo` to `hi`: the index in
/// `distinct` of each code's result ([`SubstrTable::number`]); `distinct` holds the
/// results in the order first met over the codes. Owned, so that the devices of a run
/// share one.
pub(crate) struct SubstrTable {
    lo: u32,
    numbers: SubstrNumbers,
    distinct: Vec<String>,
}

enum SubstrNumbers {
    /// `numbers[c - lo]` is code `c`'s number.
    Dense(Vec<u32>),
    /// The first code of each run of codes with the same result, ascending from `lo`;
    /// run `k`'s result is number `k` (each result is one run).
    Runs(Vec<u32>),
}

impl SubstrTable {
    /// The number of code `c`'s result; `c` from `lo` to the table's last code.
    fn number(&self, c: u32) -> u32 {
        match &self.numbers {
            SubstrNumbers::Dense(n) => n[(c - self.lo) as usize],
            SubstrNumbers::Runs(firsts) => (firsts.partition_point(|&f| f <= c) - 1) as u32,
        }
    }
}

/// At most this many distinct results of a `substr` are numbered by code.
const SUBSTR_MAX_DISTINCT: usize = 1 << 16;

/// [`SubstrTable`] of the codes `lo..=hi`; `None` where they give more than 2^16 distinct
/// results (rows are better done one by one).
///
/// A prefix (`start` at most 1) of codes of the dictionary's sorted part is monotone in
/// the code (byte order is code point order, and cutting two strings to their first `k`
/// characters keeps their order), so each result is one run of codes: the runs' ends are
/// found by galloping and bisection, reading a few strings per distinct result. Other
/// ranges are read in order, so the dictionary's strings are read end to end (a row at
/// a time they are read at random, a cache and TLB miss or two each), and a result the
/// same for neighbouring codes is numbered without hashing.
fn substr_table(dict: &Dictionary, lo: u32, hi: u32, start: i64, length: i64) -> Result<Option<SubstrTable>, String> {
    use rayon::prelude::*;
    const CHUNK: usize = 1 << 16;
    const MAX_DISTINCT: usize = SUBSTR_MAX_DISTINCT;
    let range = (hi - lo) as usize + 1;
    let text = |code: u32| dict.get(code).unwrap_or_default();
    if start <= 1 && (hi as usize) < dict.sorted_len() {
        let result = |c: u32| crate::dict::substr_of(text(c), start, length);
        let mut firsts: Vec<u32> = Vec::new();
        let mut distinct: Vec<String> = Vec::new();
        let mut c = u64::from(lo);
        let end = u64::from(hi) + 1;
        while c < end {
            let v = result(c as u32);
            firsts.push(c as u32);
            distinct.push(crate::alloc::try_string(v, STR_FN_WHAT)?);
            if distinct.len() > MAX_DISTINCT {
                return Ok(None);
            }
            // `same` has v, `other` is the first code found without it (or `end`).
            let (mut same, mut step) = (c, 1u64);
            let mut other = loop {
                let probe = same + step;
                if probe >= end {
                    break end;
                }
                if result(probe as u32) != v {
                    break probe;
                }
                same = probe;
                step *= 2;
            };
            while other - same > 1 {
                let mid = same + (other - same) / 2;
                if result(mid as u32) == v {
                    same = mid;
                } else {
                    other = mid;
                }
            }
            c = other;
        }
        return Ok(Some(SubstrTable {
            lo,
            numbers: SubstrNumbers::Runs(firsts),
            distinct,
        }));
    }
    // Each chunk of the range numbers the distinct results of its codes in the order met.
    let parts: Vec<Option<(Vec<u32>, Vec<&str>)>> = (0..range.div_ceil(CHUNK))
        .into_par_iter()
        .map(|k| -> Result<_, String> {
            let codes = k * CHUNK..((k + 1) * CHUNK).min(range);
            let mut m: crate::load::FxHashMap<&str, u32> = Default::default();
            let mut distinct: Vec<&str> = Vec::new();
            let mut ids: Vec<u32> = crate::alloc::try_with_capacity(codes.len(), STR_FN_WHAT)?;
            let mut last: Option<(&str, u32)> = None;
            for i in codes {
                let v = crate::dict::substr_of(text(lo + i as u32), start, length);
                let id = match last {
                    Some((w, id)) if w == v => id,
                    _ => {
                        let id = *m.entry(v).or_insert_with(|| {
                            distinct.push(v);
                            distinct.len() as u32 - 1
                        });
                        if distinct.len() > MAX_DISTINCT {
                            return Ok(None);
                        }
                        last = Some((v, id));
                        id
                    }
                };
                ids.push(id);
            }
            Ok(Some((ids, distinct)))
        })
        .collect::<Result<_, String>>()?;
    let Some(parts) = parts.into_iter().collect::<Option<Vec<_>>>() else {
        return Ok(None);
    };
    // Number the results of the whole range; `numbers[c - lo]` is the number of code c's.
    let mut index: crate::load::FxHashMap<&str, u32> = Default::default();
    let mut distinct: Vec<&str> = Vec::new();
    let mut maps: Vec<Vec<u32>> = Vec::with_capacity(parts.len());
    for (_, part) in &parts {
        let mut map = Vec::with_capacity(part.len());
        for &v in part {
            map.push(*index.entry(v).or_insert_with(|| {
                distinct.push(v);
                distinct.len() as u32 - 1
            }));
        }
        if distinct.len() > MAX_DISTINCT {
            return Ok(None);
        }
        maps.push(map);
    }
    drop(index);
    let mut numbers: Vec<u32> = crate::alloc::try_with_capacity(range, STR_FN_WHAT)?;
    numbers.par_extend(
        parts
            .par_iter()
            .zip(&maps)
            .flat_map_iter(|((ids, _), map)| ids.iter().map(move |&i| map[i as usize])),
    );
    let distinct = distinct
        .into_iter()
        .map(|v| crate::alloc::try_string(v, STR_FN_WHAT))
        .collect::<Result<_, _>>()?;
    Ok(Some(SubstrTable {
        lo,
        numbers: SubstrNumbers::Dense(numbers),
        distinct,
    }))
}

/// `substr(s, start, length)` with the same start and length on every row, computed once
/// per dictionary code from the smallest code of `s` to the largest ([`substr_table`]) and
/// then looked up by each row: the same results, in the same form, as [`str_fn_by_row`].
/// `None` (nothing done) where the range holds more than 4 codes per row of `s`, or the
/// range's strings give more than 2^16 distinct results.
fn substr_by_code(dict: &Dictionary, s: &[u32], start: i64, length: i64) -> Result<Option<StrFnCodes>, String> {
    use rayon::prelude::*;
    const CHUNK: usize = 1 << 16;
    let Some((lo, hi)) = code_range(s) else {
        return Ok(None);
    };
    if !substr_by_code_pays(lo, hi, s.len()) {
        return Ok(None);
    }
    let Some(table) = substr_table(dict, lo, hi, start, length)? else {
        return Ok(None);
    };
    // Each row's number, and each chunk of rows' numbers in the order first met there.
    let d = table.distinct.len();
    let mut out: Vec<u32> = crate::alloc::try_with_capacity(s.len(), STR_FN_WHAT)?;
    out.par_extend(s.par_iter().map(|&c| table.number(c)));
    let firsts: Vec<Vec<u32>> = out
        .par_chunks(CHUNK)
        .map(|rows| {
            let mut seen = vec![false; d];
            let mut order = Vec::new();
            for &i in rows {
                if !seen[i as usize] {
                    seen[i as usize] = true;
                    order.push(i);
                    if order.len() == d {
                        break;
                    }
                }
            }
            order
        })
        .collect();
    // The results rows have, in the order first met over all rows, get their codes.
    let mut code: Vec<Option<u32>> = vec![None; d];
    let mut new_strings: Vec<String> = Vec::new();
    for &i in firsts.iter().flatten() {
        if code[i as usize].is_none() {
            code[i as usize] = Some(code_or_new(dict, &table.distinct[i as usize], &mut new_strings)?);
        }
    }
    // Every row's number was met above, so each has its code.
    out.par_iter_mut()
        .for_each(|i| *i = code[*i as usize].unwrap_or(u32::MAX));
    Ok(Some((out, new_strings)))
}

/// `substr(s, start, length)` of the rows `s` of one device by a [`SubstrTable`] that
/// every device of the run shares: the rows' results in the form of [`str_fn_by_row`],
/// where the new strings are every new result of the table in the table's order (the
/// same list on every device, so their codes are the same everywhere).
fn substr_by_shared_table(dict: &Dictionary, s: &[u32], table: &SubstrTable) -> Result<StrFnCodes, String> {
    use rayon::prelude::*;
    let mut new_strings: Vec<String> = Vec::new();
    let code: Vec<u32> = table
        .distinct
        .iter()
        .map(|v| code_or_new(dict, v, &mut new_strings))
        .collect::<Result<_, _>>()?;
    let mut out: Vec<u32> = crate::alloc::try_with_capacity(s.len(), STR_FN_WHAT)?;
    out.par_extend(s.par_iter().map(|&c| code[table.number(c) as usize]));
    Ok((out, new_strings))
}

fn dict_text(dict: &Dictionary, code: u32) -> Result<&str, HostError> {
    dict.get(code)
        .ok_or_else(|| HostError::Kernel(format!("string code {code} is not in the dictionary")))
}

enum HostError {
    Plan(String),
    Kernel(String),
    /// A collective's error (another device failed, the run was cancelled).
    Run(RuntimeError),
}

/// The columns of a `Const` instruction.
fn const_columns(types: &[Type], rows: &[Vec<Value>], dict: &Dictionary) -> Result<Vec<HostCol>, String> {
    let mut cols: Vec<HostCol> = types.iter().map(|t| HostCol::empty(Elem::of(*t))).collect();
    for (r, row) in rows.iter().enumerate() {
        if row.len() != types.len() {
            return Err(format!("row {r} has {} values for {} columns", row.len(), types.len()));
        }
        for (c, v) in row.iter().enumerate() {
            let bad = || format!("row {r}, column {c}: {v:?} is not a value of type {}", types[c]);
            // A number as a decimal of scale `ts`, unscaled (`None` when it has more digits).
            let rescaled = |ts: u8| -> Option<i128> {
                let (unscaled, scale) = match v {
                    Value::Decimal { unscaled, scale } => (*unscaled, *scale),
                    Value::Int32(x) => (*x as i128, 0),
                    Value::Int64(x) => (*x as i128, 0),
                    _ => return None,
                };
                (scale <= ts)
                    .then(|| 10i128.checked_pow((ts - scale) as u32))
                    .flatten()
                    .and_then(|p| unscaled.checked_mul(p))
            };
            match (&mut cols[c], types[c], v) {
                (HostCol::I32(col), Type::Int32, Value::Int32(x)) => col.push(*x),
                (HostCol::I32(col), Type::Date, Value::Date(x)) if (MIN_DATE..=MAX_DATE).contains(x) => col.push(*x),
                (HostCol::I64(col), Type::Int64, Value::Int64(x)) => col.push(*x),
                (HostCol::I64(col), Type::Int64, Value::Int32(x)) => col.push(*x as i64),
                (HostCol::I64(col), Type::Decimal(ts), _) => col.push(
                    rescaled(ts)
                        .filter(|x| x.unsigned_abs() <= MAX_DECIMAL.unsigned_abs())
                        .and_then(|x| i64::try_from(x).ok())
                        .ok_or_else(bad)?,
                ),
                (HostCol::I128(col), Type::WideDecimal(ts), _) => col.push(
                    rescaled(ts)
                        .filter(|x| x.unsigned_abs() <= MAX_WIDE_DECIMAL.unsigned_abs())
                        .ok_or_else(bad)?,
                ),
                (HostCol::F64(col), Type::Float64, Value::Float64(x)) => col.push(*x),
                (HostCol::U8(col), Type::Bool, Value::Bool(x)) => col.push(*x as u8),
                (HostCol::U32(col), Type::String, Value::String(s)) => col.push(
                    dict.code(s)
                        .ok_or_else(|| format!("string {s:?} has no dictionary code"))?,
                ),
                _ => return Err(bad()),
            }
        }
    }
    Ok(cols)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `substr` by code and by row over `s`, with the same start and length on each row:
    /// by code must give the very codes and new strings (in the same order) by row gives,
    /// or decline.
    fn both(dict: &Dictionary, s: &[u32], start: i64, length: i64) -> Option<StrFnCodes> {
        let (st, ln) = (vec![start; s.len()], vec![length; s.len()]);
        let by_row = match str_fn_by_row(dict, Operands::Substr(s, &st, &ln), s.len()) {
            Ok(r) => r,
            Err(_) => panic!("substr by row failed"),
        };
        let by_code = substr_by_code(dict, s, start, length).expect("substr by code");
        if let Some(by_code) = &by_code {
            assert_eq!(by_code.1, by_row.1, "new strings of substr(_, {start}, {length})");
            assert_eq!(by_code.0, by_row.0, "codes of substr(_, {start}, {length})");
        }
        by_code
    }

    #[test]
    fn substr_by_code_gives_the_codes_and_new_strings_of_substr_by_row() {
        let mut next = crate::test_xorshift(0x9e37_79b9_7f4a_7c15);
        // Phone-like strings with prefixes from 10 to 34, some non-ASCII ones, the empty
        // string, and strings that are results of prefixes ("12", "3").
        let mut strings: Vec<String> = (0..120_000)
            .map(|i| {
                let r = next();
                match i % 50 {
                    0 => format!("{}é{}", 10 + r % 25, r % 1000),
                    _ => format!("{}-{:03}-{:04}", 10 + r % 25, (r >> 10) % 1000, (r >> 20) % 10_000),
                }
            })
            .collect();
        strings.extend(["".to_string(), "12".to_string(), "3".to_string(), "2é".to_string()]);
        let accented = strings[0].clone();
        let dict = Dictionary::from_strings(strings);
        let n = dict.len() as u32;
        // Rows at random codes over the whole dictionary (several chunks of rows and of
        // codes), so that results first appear in different chunks.
        let rows: Vec<u32> = (0..200_000).map(|_| (next() % u64::from(n)) as u32).collect();
        for (start, length) in [(1, 2), (1, 1), (2, 3), (0, 2), (-3, 5), (3, 0), (4, 1), (20, 3)] {
            let done = both(&dict, &rows, start, length);
            assert!(done.is_some(), "substr(_, {start}, {length}) by code");
        }
        // A result first met in the last row only: its new string comes last.
        let twelve = dict.code("12").expect("in the dictionary");
        let mut rare: Vec<u32> = (0..70_000).map(|i| twelve + (i % 7)).collect();
        rare.push(dict.code(&accented).expect("in the dictionary"));
        let (_, new) = both(&dict, &rare, 1, 3).expect("substr by code");
        assert_eq!(new.last().map(String::as_str), accented.get(..4), "{new:?}");
        // More distinct results than by code numbers: declined.
        assert!(both(&dict, &rows, 1, 100).is_none(), "more than 2^16 distinct results");
        assert!(both(&dict, &rows, 4, 100).is_none(), "more than 2^16 distinct results");
        // Codes spread over a range of more than 4 codes a row: declined.
        let sparse = [0, n - 1];
        assert!(both(&dict, &sparse, 1, 2).is_none());
        // One row.
        assert!(both(&dict, &[n / 2], 1, 2).is_some());
        // Prefixes of the sorted part are found by their runs of codes: every result one
        // run, however the results interleave with other strings' (the accented ones).
        for (start, length) in [(1, 2), (1, 3), (0, 3), (-1, 2), (1, 0), (-5, 3)] {
            let t = substr_table(&dict, 0, n - 1, start, length)
                .expect("the table")
                .expect("few distinct prefixes");
            assert!(
                matches!(t.numbers, SubstrNumbers::Runs(_)),
                "substr(_, {start}, {length})"
            );
            for c in (0..n).step_by(7) {
                let v = crate::dict::substr_of(dict.get(c).expect("a code"), start, length);
                assert_eq!(
                    t.distinct[t.number(c) as usize],
                    v,
                    "code {c}, substr(_, {start}, {length})"
                );
            }
        }
        // Strings appended after the sorted part (not in code order) are read one by one.
        let mut grown = dict.clone();
        let late: Vec<u32> = ["99-late", "00-early", "13-new", "é"]
            .iter()
            .map(|s| grown.intern(s).expect("room"))
            .collect();
        let mut mixed: Vec<u32> = (0..50_000).map(|i| n - 1 - i % 40_000).collect();
        mixed.extend(&late);
        let t = substr_table(&grown, n - 40_000, late[3], 1, 2)
            .expect("the table")
            .expect("few");
        assert!(matches!(t.numbers, SubstrNumbers::Dense(_)));
        assert!(both(&grown, &mixed, 1, 2).is_some());
    }
}
