//! Runs over several devices (SPMD): one interpreter per device, each on its own backend
//! with its own memory accounting and limit, all running the same kernel plan and meeting
//! at its collectives through one [`Comm`].
//!
//! The contract (see `docs/architecture.md`, fox-runtime):
//! - `LoadInput` gives device `d` of `n` the rows `d·len/n .. (d+1)·len/n` of each input
//!   (one host copy of the inputs is shared; with [`run_devices_resident`] each device
//!   keeps its part of a database column for later runs); with `whole`, every row; with
//!   `hash`, the rows whose keys [`Exchange::Hash`]'s rule sends to `d`, in their order,
//!   by the input's routing, made once per run for all devices ([`Comm::routing`]).
//!   `Const` and `DictTable` are replicated (every device holds every row).
//! - `Exchange` moves rows between devices (host-staged here): each device routes its rows,
//!   deposits a part per destination, and takes its parts in sender order.
//! - Every terminator (`LoopIf`, `If`) is decided collectively: the branch is taken when
//!   its test holds on any device, so all devices run the same blocks; a device whose own
//!   test failed runs the body on the (empty) rows it has. A `Window` whose device has no
//!   rows left is a window of no rows (`total .. total`) that counts as empty in the test.
//! - `StrFn` interns the strings every device made in device order, so dictionaries (and
//!   rank tables) stay identical; `Output` gathers every device's rows on device 0, which
//!   orders them as one device would (merging the parts when each is in order already).
//! - A device that fails wakes the others; each stops at its next collective (a device
//!   runs on up to it, so which devices fail does not depend on timing), and the first
//!   device to fail in device order gives the run's error. Every device frees its
//!   buffers. Cancellation stops every device at its next instruction.
//! - No wait at a collective is endless: every device reports progress (each instruction
//!   it finishes, each collective it reaches) to the [`Comm`]; a device waiting at a
//!   collective while no device of the run made progress for the stall limit
//!   ([`stall_limit`]: `RunOptions::stall_timeout`, else `FOX_STALL_TIMEOUT_S`, else
//!   [`DEFAULT_STALL_LIMIT`]) fails the run with an error naming the devices that did
//!   not arrive and the collective the others wait at. The run is then halted: the
//!   kernels' stop flag ([`Comm::halt_flag`]) is set, so a device inside a long kernel
//!   stops at its next chunk of rows, and every device stops at its next instruction.

use crate::backend::HostCol;
use crate::routing::Routing;
use crate::{Resident, RuntimeError};
use fox_kernel::{device_of, row_hash, value_bits_f64, value_bits_i128, value_bits_i32, Exchange};
use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The stall limit of a run whose options and environment set none: how long the
/// devices of a run may all go without progress while one waits at a collective.
pub const DEFAULT_STALL_LIMIT: Duration = Duration::from_secs(120);

/// The environment variable that sets the stall limit, in seconds (a number above 0).
pub const STALL_LIMIT_VAR: &str = "FOX_STALL_TIMEOUT_S";

/// The stall limit of runs over several devices: `FOX_STALL_TIMEOUT_S` (seconds, a
/// number above 0; fractions allowed) when set, else [`DEFAULT_STALL_LIMIT`]; a value
/// that is not such a number is an error naming the variable.
pub fn stall_limit() -> Result<Duration, String> {
    parse_stall_limit(
        std::env::var_os(STALL_LIMIT_VAR)
            .as_deref()
            .map(|v| v.to_string_lossy())
            .as_deref(),
    )
}

/// [`stall_limit`] of the variable's value (`None`: not set).
fn parse_stall_limit(value: Option<&str>) -> Result<Duration, String> {
    let Some(text) = value else {
        return Ok(DEFAULT_STALL_LIMIT);
    };
    match text.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s.is_finite() && s <= 1e9 => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!(
            "{STALL_LIMIT_VAR} must be a number of seconds above 0 (how long the devices of a run may all \
             go without progress while one waits for the others), not `{text}`"
        )),
    }
}

/// How often a waiting device looks at the abort flag and the run's cancellation.
const POLL: Duration = Duration::from_millis(20);

/// Where a collective is in the plan: (block, instruction); the terminator of a block is
/// its instruction `instrs.len()`.
pub(crate) type Tag = (usize, usize);

/// The communicator of a run over several devices: its size, a mailbox per device for the
/// collective under way, an abort flag that wakes every waiting device, the run's
/// progress, against which a waiting device measures the stall limit, and the boxes the
/// devices claim.
pub(crate) struct Comm {
    size: usize,
    /// The dictionary tables of the run, made by the first device that needs each.
    tables: Mutex<std::collections::HashMap<fox_kernel::DictOp, Arc<HostCol>>>,
    /// The routings of the inputs the run loads hashed, by the input's name and key
    /// columns: each cell filled by the first device that needs it ([`Comm::routing`]).
    routings: Mutex<std::collections::HashMap<RouteKey, RoutingCell>>,
    state: Mutex<Round>,
    /// The boxes of each expansion cut into boxes (`Kernel::Claim`), in the order the
    /// devices start them: the `k`-th expansion a device starts is entry `k`. Made by the
    /// first device to start it; a new run has a new communicator, so a run's boxes are
    /// never those of another.
    claims: Mutex<Vec<Boxes>>,
    /// The last `substr` table of the run, by its codes, start and length
    /// ([`Comm::substr_table`]).
    substr: Mutex<Option<(SubstrKey, Arc<Option<crate::interp::SubstrTable>>)>>,
    cv: Condvar,
    aborted: AtomicBool,
    cancel: Option<crate::CancelToken>,
    /// How long every device may go without progress while one waits at a collective.
    stall_limit: Duration,
    /// Steps of progress of all devices so far (see [`Comm::progress`]).
    progress: AtomicU64,
    /// The kernels' stop flag: set once the run stalled or was cancelled.
    halt: AtomicBool,
    /// The device that saw the run stall (`usize::MAX`: none did).
    stalled_by: AtomicUsize,
}

/// An input loaded hashed over the devices: its name and its key columns.
pub(crate) type RouteKey = (String, Vec<usize>);

/// The routing of one input of a run, once a device made it.
type RoutingCell = Arc<Mutex<Option<Arc<Routing>>>>;

/// The collective under way: what each device deposited, and the result of the last one.
struct Round {
    /// Collectives completed so far.
    done: u64,
    deposits: Vec<Option<(Tag, Box<dyn Any + Send + Sync>)>>,
    arrived: usize,
    last: Option<Arc<Gathered>>,
}

/// The boxes of one expansion the devices share: how they cut it, and the next box no
/// device has taken.
struct Boxes {
    total: u64,
    finest: u32,
    /// The boxes of the cut ([`BoxCut::len`]).
    boxes: u32,
    /// The next box of the shared counter: boxes below the number of devices are each
    /// reserved for the device of that rank's first claim.
    next: u32,
    /// Whether each device made its first claim (and took its reserved box, if any).
    started: Vec<bool>,
}

/// The number of boxes an expansion of `total` outputs is cut into for `devices` devices
/// with the finest cut `1/finest` ([`BoxCut::new`]): what a run's `RunStats::boxes`
/// counts for each loop over claimed boxes.
pub fn box_count(total: u64, finest: u32, devices: usize) -> u32 {
    BoxCut::new(total, finest, devices).len()
}

/// How an expansion's `total` outputs are cut into the boxes `devices` devices take in
/// turn (contiguous runs of the outputs, in order), by factoring: the boxes come in
/// batches of `devices`, each box of a batch holding the outputs left at the batch's start
/// over `2 · devices` (rounded up), and none fewer than `total / finest` (rounded up;
/// only the last box may hold fewer). So half of what is left goes out in each batch:
/// the first boxes are large (few launches, few host synchronisations, few launches'
/// tails), and the last ones small, so that a device whose boxes were heavy is waited
/// for little. `devices · (log2(finest / (2 · devices)) + 3)` boxes or fewer; none when
/// `total` is 0. Depends on nothing but its arguments, so every device cuts alike.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BoxCut {
    /// The first output of each box, increasing; the end of the last box is `total`.
    starts: Vec<u64>,
    total: u64,
}

impl BoxCut {
    pub(crate) fn new(total: u64, finest: u32, devices: usize) -> BoxCut {
        let devices = devices.max(1) as u64;
        let least = total.div_ceil(u64::from(finest.max(1))).max(1);
        let mut starts = Vec::new();
        let mut at = 0u64;
        while at < total {
            let size = (total - at).div_ceil(2 * devices).max(least);
            for _ in 0..devices {
                if at >= total {
                    break;
                }
                starts.push(at);
                at = at.saturating_add(size).min(total);
            }
        }
        BoxCut { starts, total }
    }

    /// The number of boxes.
    pub(crate) fn len(&self) -> u32 {
        self.starts.len() as u32
    }

    /// The outputs `start .. end` of box `k` (below [`BoxCut::len`]); never empty.
    pub(crate) fn bounds(&self, k: u32) -> (u64, u64) {
        let k = k as usize;
        (self.starts[k], self.starts.get(k + 1).copied().unwrap_or(self.total))
    }

    /// The box holding output `at` (below `total`).
    pub(crate) fn of(&self, at: u64) -> u32 {
        (self.starts.partition_point(|&s| s <= at) - 1) as u32
    }
}

/// The codes (from, to), start and length of a shared `substr` table.
pub(crate) type SubstrKey = (u32, u32, i64, i64);

/// What every device deposited at one collective, in device order.
pub(crate) struct Gathered {
    tags: Vec<Tag>,
    values: Vec<Box<dyn Any + Send + Sync>>,
}

impl Gathered {
    /// The deposit of device `rank`. Every device deposits the same type at one
    /// collective (they run the same instruction: [`Comm::all_gather`] checks the tags).
    pub(crate) fn get<T: 'static>(&self, rank: usize) -> &T {
        self.values[rank]
            .downcast_ref()
            .expect("every device deposits the same type at one collective")
    }
}

/// Why a device left a collective without its result.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum CommError {
    /// Another device failed (or the run was aborted).
    Aborted,
    /// The run's cancellation token was set.
    Cancelled,
    /// No device made progress for `limit` while this one waited: `missing` are the
    /// devices that had not reached the collective, `waiting` those that had.
    Stalled {
        missing: Vec<usize>,
        waiting: Vec<usize>,
        limit: Duration,
    },
}

impl Comm {
    pub(crate) fn new(size: usize, cancel: Option<crate::CancelToken>, stall_limit: Duration) -> Comm {
        Comm {
            size,
            tables: Mutex::new(std::collections::HashMap::new()),
            routings: Mutex::new(std::collections::HashMap::new()),
            state: Mutex::new(Round {
                done: 0,
                deposits: (0..size).map(|_| None).collect(),
                arrived: 0,
                last: None,
            }),
            claims: Mutex::new(Vec::new()),
            substr: Mutex::new(None),
            cv: Condvar::new(),
            aborted: AtomicBool::new(false),
            cancel,
            stall_limit,
            progress: AtomicU64::new(0),
            halt: AtomicBool::new(false),
            stalled_by: AtomicUsize::new(usize::MAX),
        }
    }

    /// A step of progress of some device (an instruction finished, a collective
    /// reached): it restarts the stall limit of every waiting device. One relaxed atomic
    /// add.
    pub(crate) fn progress(&self) {
        self.progress.fetch_add(1, Ordering::Relaxed);
    }

    /// The flag the run's kernels read as their stop flag (see [`crate::cancel`]): set
    /// when the run stalled ([`CommError::Stalled`]) or its cancellation token was seen
    /// set ([`Comm::halt`]).
    pub(crate) fn halt_flag(&self) -> &AtomicBool {
        &self.halt
    }

    /// Sets the kernels' stop flag.
    pub(crate) fn halt(&self) {
        self.halt.store(true, Ordering::SeqCst);
    }

    /// Whether the run was halted by another device than `rank` (which saw it stall) or
    /// by the cancellation: `rank` stops at its next instruction, as a peer. The device
    /// that saw the stall is not halted: its own error is the stall's.
    pub(crate) fn is_halted_for(&self, rank: usize) -> bool {
        self.halt.load(Ordering::Relaxed) && self.stalled_by.load(Ordering::SeqCst) != rank
    }

    /// How long every device may go without progress while one waits.
    pub(crate) fn stall_limit(&self) -> Duration {
        self.stall_limit
    }

    /// The run's cancellation token, if any.
    pub(crate) fn cancel_token(&self) -> Option<&crate::CancelToken> {
        self.cancel.as_ref()
    }

    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// The run's table of `op`: made by `make` on the first device that asks (the others
    /// asking meanwhile wait for it), then shared. A failure is the asking device's; the
    /// next device to ask makes it again.
    pub(crate) fn shared_table<E>(
        &self,
        op: &fox_kernel::DictOp,
        make: impl FnOnce() -> Result<Arc<HostCol>, E>,
    ) -> Result<Arc<HostCol>, E> {
        let mut tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = tables.get(op) {
            return Ok(t.clone());
        }
        let t = make()?;
        tables.insert(op.clone(), t.clone());
        Ok(t)
    }

    /// The run's `substr` table of `key` (codes from, codes to, start, length): made by
    /// `make` on the first device that asks (the others asking meanwhile wait for it),
    /// then shared. One table is kept, the last one asked for: every device asks for a
    /// table between two collectives that all of them reach, so when one asks for
    /// another key, none still reads the previous table. A failure is the asking
    /// device's; the next device to ask makes it again.
    pub(crate) fn substr_table<E>(
        &self,
        key: SubstrKey,
        make: impl FnOnce() -> Result<Arc<Option<crate::interp::SubstrTable>>, E>,
    ) -> Result<Arc<Option<crate::interp::SubstrTable>>, E> {
        let mut last = self.substr.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((k, t)) = &*last {
            if *k == key {
                return Ok(t.clone());
            }
        }
        // The previous table is freed before the next is made.
        *last = None;
        let t = make()?;
        *last = Some((key, t.clone()));
        Ok(t)
    }

    /// The run's routing of the input `key` (loaded hashed over its devices): made by
    /// `make` on the first device that asks (the others asking for the same input
    /// meanwhile wait for it; those asking for another input do not), then shared until
    /// the run ends. A failure is the asking device's; the next device to ask makes it
    /// again.
    pub(crate) fn routing<E>(
        &self,
        key: &RouteKey,
        make: impl FnOnce() -> Result<Arc<Routing>, E>,
    ) -> Result<Arc<Routing>, E> {
        let cell = {
            let mut cells = self.routings.lock().unwrap_or_else(|e| e.into_inner());
            match cells.get(key) {
                Some(c) => c.clone(),
                None => cells.entry(key.clone()).or_default().clone(),
            }
        };
        let mut routing = cell.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = &*routing {
            return Ok(r.clone());
        }
        let r = make()?;
        *routing = Some(r.clone());
        Ok(r)
    }

    /// Stops the run: every device waiting at a collective, or reaching its next one,
    /// stops.
    pub(crate) fn abort(&self) {
        self.aborted.store(true, Ordering::SeqCst);
        // Taking the lock orders the flag before any waiter's next look at it.
        drop(self.state.lock().unwrap_or_else(|e| e.into_inner()));
        self.cv.notify_all();
    }

    pub(crate) fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
    }

    /// Takes the next box of expansion `k` (the `k`-th one a device starts), whose `total`
    /// outputs are cut as [`BoxCut::new`]`(total, finest, devices)` cuts them, for device
    /// `rank`: the box's number, or `None` once every box is taken. A device's first
    /// claim takes the box of its own rank (where there is one), so every device takes a
    /// box however late it starts; later claims take the lowest box no device took (work
    /// stealing). Each box is taken by one device, and each device's boxes in increasing
    /// order. Not a collective: no device waits for another. Devices that cut expansion
    /// `k` differently fail with a plan error (they would not share its boxes).
    pub(crate) fn claim(&self, k: usize, rank: usize, total: u64, finest: u32) -> Result<Option<u32>, String> {
        let mut claims = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        if claims.len() == k {
            let boxes = BoxCut::new(total, finest, self.size).len();
            let reserved = u32::try_from(self.size).unwrap_or(u32::MAX).min(boxes);
            claims.push(Boxes {
                total,
                finest,
                boxes,
                next: reserved,
                started: vec![false; self.size],
            });
        }
        let Some(c) = claims.get_mut(k) else {
            return Err(format!(
                "a device started expansion {k} of those cut into boxes while {} were started",
                claims.len()
            ));
        };
        if (c.total, c.finest) != (total, finest) {
            return Err(format!(
                "the devices cut an expansion differently: {} outputs in boxes of at least 1/{} of them, and {total} in 1/{finest}",
                c.total, c.finest
            ));
        }
        if let Some(started) = c.started.get_mut(rank).filter(|s| !**s) {
            *started = true;
            if (rank as u64) < u64::from(c.boxes) {
                return Ok(Some(rank as u32));
            }
        }
        if c.next >= c.boxes {
            return Ok(None);
        }
        c.next += 1;
        Ok(Some(c.next - 1))
    }

    /// Deposits `value` for the collective at `tag` and waits until every device has
    /// deposited its own; then every device reads all deposits, in device order. Devices
    /// that reached different collectives fail with a plan error.
    pub(crate) fn all_gather<T: Any + Send + Sync>(
        &self,
        rank: usize,
        tag: Tag,
        value: T,
    ) -> Result<Arc<Gathered>, CommError> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if self.is_aborted() {
            return Err(CommError::Aborted);
        }
        self.progress();
        // The stall limit runs from the last progress this device saw.
        let mut seen = self.progress.load(Ordering::Relaxed);
        let mut since = Instant::now();
        let round = st.done;
        st.deposits[rank] = Some((tag, Box::new(value)));
        st.arrived += 1;
        if st.arrived == self.size {
            let (tags, values) = st
                .deposits
                .iter_mut()
                .map(|d| d.take().expect("every device deposited"))
                .unzip();
            st.last = Some(Arc::new(Gathered { tags, values }));
            st.arrived = 0;
            st.done += 1;
            self.cv.notify_all();
        }
        loop {
            if st.done > round {
                // The next collective cannot complete before this device deposits for it.
                return Ok(st.last.clone().expect("set when the round completed"));
            }
            if self.is_aborted() {
                return Err(CommError::Aborted);
            }
            if self.cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
                return Err(CommError::Cancelled);
            }
            let now = self.progress.load(Ordering::Relaxed);
            if now != seen {
                (seen, since) = (now, Instant::now());
            } else if since.elapsed() >= self.stall_limit {
                // The first device to see the stall fails the run; the abort (under the
                // lock) makes every other waiting device stop as a peer of it.
                let (missing, waiting) = (0..self.size).partition(|&d| st.deposits[d].is_none());
                self.stalled_by.store(rank, Ordering::SeqCst);
                self.halt();
                self.aborted.store(true, Ordering::SeqCst);
                self.cv.notify_all();
                return Err(CommError::Stalled {
                    missing,
                    waiting,
                    limit: self.stall_limit,
                });
            }
            let wait = POLL.min(
                self.stall_limit
                    .saturating_sub(since.elapsed())
                    .max(Duration::from_millis(1)),
            );
            st = self.cv.wait_timeout(st, wait).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

impl Gathered {
    /// The tags differ: the devices reached different collectives (a plan that branches
    /// on something other than its terminators' tests).
    pub(crate) fn mismatch(&self) -> Option<String> {
        let first = self.tags[0];
        self.tags.iter().any(|t| *t != first).then(|| {
            let at: Vec<String> = self
                .tags
                .iter()
                .enumerate()
                .map(|(d, (b, i))| format!("device {d} at block {b}, instruction {i}"))
                .collect();
            format!("the devices reached different collectives: {}", at.join("; "))
        })
    }
}

/// Sets the abort flag when the device's thread panics, so the others never wait for it.
pub(crate) struct AbortOnPanic<'c>(pub(crate) &'c Comm);

impl Drop for AbortOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.abort();
        }
    }
}

/// Counts a device's thread as finished and wakes the thread that watches the devices,
/// when the device's thread ends (returning or panicking).
struct Finished<'a>(&'a AtomicUsize, std::thread::Thread);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        self.1.unpark();
    }
}

/// The rows of `len` that device `rank` of `n` takes of an input: a contiguous slice.
pub(crate) fn input_rows(len: usize, rank: usize, n: usize) -> std::ops::Range<usize> {
    let at = |d: usize| ((len as u128 * d as u128) / n as u128) as usize;
    at(rank)..at(rank + 1)
}

/// The bits [`row_hash`] reads of row `r` of `col`.
fn value_bits(col: &HostCol, r: usize) -> u64 {
    match col {
        HostCol::U8(v) => u64::from(v[r]),
        HostCol::I32(v) => value_bits_i32(v[r]),
        HostCol::U32(v) => u64::from(v[r]),
        HostCol::I64(v) => v[r] as u64,
        HostCol::U64(v) => v[r],
        HostCol::F64(v) => value_bits_f64(v[r]),
        HostCol::I128(v) => value_bits_i128(v[r]),
    }
}

/// The device of each row of `cols` by the rule of [`Exchange::Hash`] on `keys`.
pub(crate) fn destinations<C: std::borrow::Borrow<HostCol> + Sync>(cols: &[C], keys: &[usize], n: usize) -> Vec<u32> {
    use rayon::prelude::*;
    let len = cols.first().map_or(0, |c| c.borrow().len());
    (0..len)
        .into_par_iter()
        .map(|r| device_of(row_hash(keys.iter().map(|&c| value_bits(cols[c].borrow(), r))), n) as u32)
        .collect()
}

/// The rows of `cols` split by the device each goes to under [`Exchange::Hash`] on
/// `keys` among `devices`: one part per device, each with its rows in their order (the
/// contract of [`crate::Backend::route_rows`], on the host), or the out-of-memory
/// message.
pub fn route_host(cols: &[&HostCol], keys: &[usize], devices: usize) -> Result<Vec<Vec<HostCol>>, String> {
    const WHAT: &str = "the rows an exchange sends";
    let dest = destinations(cols, keys, devices);
    let mut rows: Vec<Vec<u32>> = vec![Vec::new(); devices];
    for (r, &d) in dest.iter().enumerate() {
        rows[d as usize].push(r as u32);
    }
    rows.iter()
        .map(|idx| cols.iter().map(|c| c.try_pick(idx, WHAT)).collect())
        .collect()
}

/// What one device deposits at an exchange.
pub(crate) enum Parts {
    /// A part per destination device, taken by it.
    PerDevice(Vec<Mutex<Option<Vec<HostCol>>>>),
    /// The same rows for every device (a broadcast) and how many devices have yet to read
    /// them: each copies them but the last, which takes them.
    All(Mutex<(Option<Vec<HostCol>>, usize)>),
}

/// The parts device `rank` of `n` sends of its rows `cols` by `to` (never `Keep`, which
/// moves nothing), and how many of its rows leave it (a row sent to several devices
/// counts once per other device).
pub(crate) fn route(cols: Vec<HostCol>, to: &Exchange, rank: usize, n: usize) -> Result<(Parts, u64), String> {
    let len = cols.first().map_or(0, HostCol::len) as u64;
    Ok(match to {
        Exchange::Broadcast => (Parts::All(Mutex::new((Some(cols), n))), len * (n as u64 - 1)),
        Exchange::Gather => {
            let empty: Vec<HostCol> = cols.iter().map(|c| HostCol::empty(c.elem())).collect();
            let mut parts = vec![Mutex::new(Some(cols))];
            parts.extend((1..n).map(|_| Mutex::new(Some(empty.clone()))));
            (Parts::PerDevice(parts), if rank == 0 { 0 } else { len })
        }
        Exchange::Hash { cols: keys } | Exchange::Keep { cols: keys } => {
            let refs: Vec<&HostCol> = cols.iter().collect();
            let parts = route_host(&refs, keys, n)?;
            let moved = len - parts[rank].first().map_or(0, HostCol::len) as u64;
            (
                Parts::PerDevice(parts.into_iter().map(|p| Mutex::new(Some(p))).collect()),
                moved,
            )
        }
    })
}

/// The rows device `rank` receives at an exchange: every sender's part for it, in sender
/// order, concatenated per column (element types `elems`).
pub(crate) fn receive(gathered: &Gathered, rank: usize, elems: &[fox_kernel::Elem]) -> Result<Vec<HostCol>, String> {
    const WHAT: &str = "the rows an exchange receives";
    let mut by_col: Vec<Vec<HostCol>> = elems.iter().map(|_| Vec::new()).collect();
    for sender in 0..gathered.values.len() {
        let part = match gathered.get::<Parts>(sender) {
            Parts::PerDevice(parts) => parts[rank]
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
                .ok_or_else(|| "a part of an exchange was taken twice".to_string())?,
            Parts::All(shared) => {
                let mut shared = shared.lock().unwrap_or_else(|e| e.into_inner());
                shared.1 -= 1;
                if shared.1 == 0 {
                    shared.0.take()
                } else {
                    match &shared.0 {
                        Some(cols) => Some(cols.iter().map(|c| c.try_clone(WHAT)).collect::<Result<Vec<_>, _>>()?),
                        None => None,
                    }
                }
                .ok_or_else(|| "a broadcast was taken before every device read it".to_string())?
            }
        };
        if part.len() != elems.len() {
            return Err(format!(
                "device {sender} sent {} columns for {}",
                part.len(),
                elems.len()
            ));
        }
        for (c, col) in part.into_iter().enumerate() {
            by_col[c].push(col);
        }
    }
    by_col
        .into_iter()
        .zip(elems)
        .map(|(parts, &e)| HostCol::try_concat(e, parts, WHAT))
        .collect()
}

/// `device 1`, `devices 0 and 2`, `devices 0, 1 and 3`.
pub fn name_devices(devices: &[usize]) -> String {
    match devices {
        [] => "no device".to_string(),
        [d] => format!("device {d}"),
        [rest @ .., last] => {
            let rest: Vec<String> = rest.iter().map(usize::to_string).collect();
            format!("devices {} and {last}", rest.join(", "))
        }
    }
}

/// A duration in seconds as messages give it: `120 s`, `0.25 s`.
pub fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{} s", (s * 1000.0).round() / 1000.0)
    }
}

/// A device's error, or `None` when it stopped because another failed. `what` names the
/// collective (the instruction or terminator).
pub(crate) fn comm_error(e: CommError, what: &str) -> Option<RuntimeError> {
    match e {
        CommError::Aborted => None,
        CommError::Cancelled => Some(RuntimeError::Cancelled),
        CommError::Stalled {
            missing,
            waiting,
            limit,
        } => Some(RuntimeError::Kernel {
            at: what.to_string(),
            msg: format!(
                "{} did not reach this collective, where {} {} waiting: no device made progress for {} \
                 (the stall limit; {STALL_LIMIT_VAR} sets it)",
                name_devices(&missing),
                name_devices(&waiting),
                if waiting.len() == 1 { "was" } else { "were" },
                seconds(limit)
            ),
        }),
    }
}

/// Runs `plan` over the devices of `backends`, one interpreter per device, each on its own backend
/// with its own memory accounting and `opts.memory_limit` (the limit is per
/// device), meeting at the plan's collectives (see the module's contract). The inputs are
/// `preloaded` (read once, each device taking its slice), else read by the run itself,
/// or `opts.database`'s (sliced the same way; its columns are not kept on any device:
/// [`run_devices_resident`] keeps them).
/// The outputs hold every device's rows, ordered as one device orders them. With one
/// backend this is [`crate::run_loaded`] or [`crate::run`], with no thread and no
/// collective.
pub fn run_devices<'b>(
    plan: &fox_kernel::KernelPlan,
    backends: Vec<&mut (dyn crate::Backend + Send + 'b)>,
    opts: &crate::RunOptions,
    preloaded: Option<crate::LoadedInputs>,
) -> Result<crate::RunResult, RuntimeError> {
    run_devices_with(plan, backends, opts, preloaded, None)
}

/// [`run_devices`] with the inputs of `opts.database`, each device taking its part of
/// each column it loads from its own [`Resident`] (`residents[d]` for device `d` of
/// `backends`) and leaving there the parts it uploads, so that later runs on the same
/// backends upload nothing: the multi-device form of [`crate::run_resident`]. A part is
/// reused only for the same rows of the same column (see [`Resident`]). The buffers in
/// `residents` are never freed by a run; give each back on its backend with
/// [`Resident::release`] (or [`Resident::release_tables`] when a table changes). With
/// one backend this is [`crate::run_resident`].
pub fn run_devices_resident<'b>(
    plan: &fox_kernel::KernelPlan,
    mut backends: Vec<&mut (dyn crate::Backend + Send + 'b)>,
    opts: &crate::RunOptions,
    residents: &mut [Resident],
) -> Result<crate::RunResult, RuntimeError> {
    if residents.len() != backends.len() {
        return Err(RuntimeError::Plan(format!(
            "a run over {} devices was given the resident columns of {}",
            backends.len(),
            residents.len()
        )));
    }
    if let ([backend], [resident]) = (&mut backends[..], &mut *residents) {
        return crate::run_resident(plan, &mut **backend, opts, Some(resident));
    }
    run_devices_with(plan, backends, opts, None, Some(residents))
}

fn run_devices_with<'b>(
    plan: &fox_kernel::KernelPlan,
    mut backends: Vec<&mut (dyn crate::Backend + Send + 'b)>,
    opts: &crate::RunOptions,
    preloaded: Option<crate::LoadedInputs>,
    residents: Option<&mut [Resident]>,
) -> Result<crate::RunResult, RuntimeError> {
    let n = backends.len();
    if n <= 1 {
        let Some(backend) = backends.pop() else {
            return Err(RuntimeError::Plan("a run needs at least one device".into()));
        };
        return match preloaded {
            Some(inputs) => crate::run_loaded(plan, backend, opts, inputs),
            None => crate::run(plan, backend, opts),
        };
    }
    let started = Instant::now();
    let before = preloaded.as_ref().map_or(Duration::ZERO, |p| p.load_time);
    let limit = match opts.stall_timeout {
        Some(l) => l,
        None => stall_limit().map_err(|msg| RuntimeError::Data { msg })?,
    };
    let shared = crate::interp::prepare_shared(plan, &mut *backends[0], opts, preloaded)?;
    let comm = Comm::new(n, opts.cancel.clone(), limit);
    let finished = AtomicUsize::new(0);
    let results: Vec<_> = std::thread::scope(|s| {
        let watcher = std::thread::current();
        let residents: Vec<Option<&mut Resident>> = match residents {
            Some(r) => r.iter_mut().map(Some).collect(),
            None => (0..n).map(|_| None).collect(),
        };
        let handles: Vec<_> = backends
            .into_iter()
            .zip(residents)
            .enumerate()
            .map(|(rank, (backend, resident))| {
                let (comm, shared, finished, watcher) = (&comm, &shared, &finished, watcher.clone());
                s.spawn(move || {
                    // Dropped in reverse order: a panic aborts the run before the
                    // thread counts as finished.
                    let _wake = Finished(finished, watcher);
                    let _guard = AbortOnPanic(comm);
                    crate::interp::run_device(plan, backend, opts, shared, comm, rank, resident)
                })
            })
            .collect();
        // While the devices run, this thread carries the cancellation token's flag over to
        // the kernels' stop flag (a device's kernels read the run's `Comm::halt_flag`).
        while finished.load(Ordering::SeqCst) < n {
            if comm.cancel_token().is_some_and(|c| c.is_cancelled()) {
                comm.halt();
            }
            std::thread::park_timeout(POLL);
        }
        handles.into_iter().map(|h| h.join()).collect()
    });
    let mut error = None;
    let mut stopped = None;
    let mut outputs = Vec::new();
    let mut stats = Vec::with_capacity(n);
    for (rank, joined) in results.into_iter().enumerate() {
        let (res, st, peer) = match joined {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        stats.push(st);
        match res {
            Ok(o) if rank == 0 => outputs = o,
            Ok(_) => {}
            Err(e) if !peer => {
                error.get_or_insert(e);
            }
            Err(e) => {
                stopped.get_or_insert(e);
            }
        }
    }
    let mut stats = combine(stats);
    // Reading the inputs before the run (`before`) is part of the shared preparation's.
    stats.load += shared.load;
    stats.total = started.elapsed() + before;
    match error.or(stopped) {
        Some(e) => Err(e),
        None => Ok(crate::RunResult { outputs, stats }),
    }
}

/// The statistics of a run over several devices from each device's: times are the
/// slowest device's (they ran side by side), counts and bytes allocated are summed,
/// peaks are the largest (each device's memory peak is kept in `device_peaks`); an
/// operator's rows are summed over the devices, its calls and its largest execution are
/// one device's.
fn combine(devices: Vec<crate::RunStats>) -> crate::RunStats {
    let mut it = devices.into_iter();
    let mut all = it.next().unwrap_or_default();
    let n = 1 + it.len();
    all.backend = format!("{} × {n} devices", all.backend);
    all.device_peaks = vec![all.peak_bytes];
    all.device_boxes = vec![all.boxes];
    all.device_instrs = vec![all.instrs.clone()];
    let mut at: std::collections::HashMap<String, usize> = all
        .instrs
        .iter()
        .enumerate()
        .map(|(k, s)| (s.label.clone(), k))
        .collect();
    for d in it {
        all.load = all.load.max(d.load);
        all.upload = all.upload.max(d.upload);
        all.compute = all.compute.max(d.compute);
        all.download = all.download.max(d.download);
        all.output = all.output.max(d.output);
        all.compile = all.compile.max(d.compile);
        all.peak_bytes = all.peak_bytes.max(d.peak_bytes);
        all.device_peaks.push(d.peak_bytes);
        all.total_allocated_bytes += d.total_allocated_bytes;
        all.bytes_in += d.bytes_in;
        all.actual_peak_buffers = all.actual_peak_buffers.max(d.actual_peak_buffers);
        all.rounds += d.rounds;
        all.boxes += d.boxes;
        all.device_boxes.push(d.boxes);
        all.tier.evictions += d.tier.evictions;
        all.tier.bytes_to_host += d.tier.bytes_to_host;
        all.tier.restores += d.tier.restores;
        all.tier.bytes_to_device += d.tier.bytes_to_device;
        all.tier.in_database += d.tier.in_database;
        all.tier.in_database_bytes += d.tier.in_database_bytes;
        all.tier.packed_kept += d.tier.packed_kept;
        all.tier.packed_kept_bytes += d.tier.packed_kept_bytes;
        all.tier.widened_on_device += d.tier.widened_on_device;
        all.tier.widened_on_device_bytes += d.tier.widened_on_device_bytes;
        all.tier.pinned += d.tier.pinned;
        all.tier.pinned_bytes += d.tier.pinned_bytes;
        all.tier.host_peak_bytes = all.tier.host_peak_bytes.max(d.tier.host_peak_bytes);
        all.exchange.rows += d.exchange.rows;
        all.exchange.bytes += d.exchange.bytes;
        all.exchange.output_wait = all.exchange.output_wait.max(d.exchange.output_wait);
        all.exchange.output_join = all.exchange.output_join.max(d.exchange.output_join);
        all.exchange.exchanges = all.exchange.exchanges.max(d.exchange.exchanges);
        all.exchange.routings += d.exchange.routings;
        for (a, b) in all.rows.iter_mut().zip(&d.rows) {
            a.total += b.total;
            a.calls = a.calls.max(b.calls);
            a.max = a.max.max(b.max);
        }
        all.device_instrs.push(d.instrs.clone());
        for s in d.instrs {
            match at.get(&s.label) {
                Some(&k) => {
                    let a = &mut all.instrs[k];
                    a.total = a.total.max(s.total);
                    a.wall = a.wall.max(s.wall);
                    a.calls = a.calls.max(s.calls);
                }
                None => {
                    at.insert(s.label.clone(), all.instrs.len());
                    all.instrs.push(s);
                }
            }
        }
    }
    if all.boxes == 0 {
        all.device_boxes.clear();
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_slices_cover_every_row_once() {
        for len in [0usize, 1, 2, 5, 7, 100] {
            for n in 1..=4 {
                let mut next = 0;
                for d in 0..n {
                    let r = input_rows(len, d, n);
                    assert_eq!(r.start, next);
                    next = r.end;
                }
                assert_eq!(next, len);
            }
        }
    }

    #[test]
    fn statistics_of_devices_combine_times_by_the_slowest_and_counts_by_the_sum() {
        use crate::{InstrStat, RowsStat, RunStats};
        let ms = Duration::from_millis;
        let device = |compute: u64, peak: usize, rows: u64| RunStats {
            backend: "cpu".into(),
            compute: ms(compute),
            boxes: rows,
            peak_bytes: peak,
            total_allocated_bytes: peak,
            rounds: 1,
            exchange: crate::ExchangeStats {
                exchanges: 2,
                rows,
                bytes: 8 * rows,
                ..crate::ExchangeStats::default()
            },
            rows: vec![RowsStat {
                calls: 3,
                total: rows,
                max: rows,
                ..RowsStat::default()
            }],
            instrs: vec![InstrStat {
                label: "main.0".into(),
                kernel: "exchange".into(),
                calls: 1,
                total: ms(compute),
                wall: ms(compute),
            }],
            ..RunStats::default()
        };
        let all = combine(vec![device(5, 100, 1), device(9, 70, 4), device(2, 300, 0)]);
        assert_eq!(all.backend, "cpu × 3 devices");
        assert_eq!(all.compute, ms(9));
        assert_eq!((all.peak_bytes, all.device_peaks.clone()), (300, vec![100, 70, 300]));
        assert_eq!((all.total_allocated_bytes, all.rounds), (470, 3));
        assert_eq!((all.boxes, all.device_boxes.clone()), (5, vec![1, 4, 0]));
        assert_eq!(
            all.exchange,
            crate::ExchangeStats {
                exchanges: 2,
                rows: 5,
                bytes: 40,
                ..crate::ExchangeStats::default()
            }
        );
        assert_eq!((all.rows[0].calls, all.rows[0].total, all.rows[0].max), (3, 5, 4));
        assert_eq!(
            (all.instrs.len(), all.instrs[0].calls, all.instrs[0].total),
            (1, 1, ms(9))
        );
        let each: Vec<Duration> = all.device_instrs.iter().map(|i| i[0].total).collect();
        assert_eq!(each, [ms(5), ms(9), ms(2)]);
    }

    /// The boxes cover every output once, in order, none empty; each output knows its
    /// box; batches of one box per device halve what is left, none smaller than the
    /// finest cut but the last; and there are few of them.
    #[test]
    fn boxes_cover_every_output_once_large_ones_first() {
        for total in [0u64, 1, 2, 3, 7, 10, 31, 1000, 12_345_678, u64::MAX / 3] {
            for finest in [1u32, 2, 3, 4, 16, 64, 128, 256, 512] {
                for devices in [1usize, 2, 3, 4, 8] {
                    let cut = BoxCut::new(total, finest, devices);
                    let least = total.div_ceil(u64::from(finest)).max(1);
                    let mut at = 0;
                    for k in 0..cut.len() {
                        let (s, e) = cut.bounds(k);
                        assert_eq!(s, at, "{total} {finest} {devices} {k}");
                        assert!(s < e, "{total} {finest} {devices} {k}");
                        assert!(e - s >= least || e == total, "{total} {finest} {devices} {k}");
                        // A batch's boxes hold half of what is left at its start over the
                        // devices, the same each (the last box of all may hold less).
                        let first = k - k % devices as u32;
                        let (bs, be) = cut.bounds(first);
                        assert!(be - bs <= (total - bs).div_ceil(2 * devices as u64).max(least));
                        assert!(e - s == be - bs || e == total, "{total} {finest} {devices} {k}");
                        for a in [s, (s + e) / 2, e - 1] {
                            assert_eq!(cut.of(a), k, "output {a} of {total}");
                        }
                        at = e;
                    }
                    assert_eq!(at, total, "{total} {finest} {devices}");
                    let per = finest as f64 / (2 * devices) as f64;
                    let most = devices as f64 * (per.max(1.0).log2().ceil() + 3.0);
                    assert!(
                        f64::from(cut.len()) <= most,
                        "{total} {finest} {devices}: {}",
                        cut.len()
                    );
                }
            }
        }
        // Two devices, the finest cut 1/128: a quarter each first, then an eighth, ...
        let cut = BoxCut::new(1024, 128, 2);
        let sizes: Vec<u64> = (0..cut.len()).map(|k| cut.bounds(k).1 - cut.bounds(k).0).collect();
        assert_eq!(sizes, [256, 256, 128, 128, 64, 64, 32, 32, 16, 16, 8, 8, 8, 8]);
    }

    /// Devices claiming the boxes of two expansions: each box of each is taken by exactly
    /// one device, in increasing order on each; a device busy with a slow box takes
    /// fewer, the others the rest (work stealing); devices that cut an expansion
    /// differently are told so.
    #[test]
    fn every_box_is_taken_once_and_a_slow_device_takes_fewer() {
        let comm = Comm::new(3, None, DEFAULT_STALL_LIMIT);
        let boxes = 48u32;
        let taken: Vec<Vec<Vec<u32>>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..3)
                .map(|r| {
                    let comm = &comm;
                    s.spawn(move || {
                        let mut per = Vec::new();
                        for k in 0..2 {
                            let mut mine = Vec::new();
                            while let Some(b) = comm.claim(k, r, 1000, boxes).unwrap() {
                                // Device 0's first box of the first expansion is slow.
                                if r == 0 && k == 0 && mine.is_empty() {
                                    std::thread::sleep(Duration::from_millis(300));
                                } else {
                                    std::thread::sleep(Duration::from_millis(1));
                                }
                                mine.push(b);
                            }
                            per.push(mine);
                        }
                        per
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for k in 0..2 {
            let mut all: Vec<u32> = taken.iter().flat_map(|d| d[k].iter().copied()).collect();
            for d in &taken {
                assert!(d[k].windows(2).all(|w| w[0] < w[1]), "{:?}", d[k]);
            }
            all.sort_unstable();
            assert_eq!(
                all,
                (0..BoxCut::new(1000, boxes, 3).len()).collect::<Vec<_>>(),
                "expansion {k}"
            );
        }
        // Device 0 slept through most boxes of the first expansion: the others took them.
        assert!(taken[0][0].len() < taken[1][0].len() + taken[2][0].len(), "{taken:?}");
        assert!(taken[0][0].len() <= 2, "{:?}", taken[0][0]);
        let err = comm.claim(0, 1, 999, boxes).unwrap_err();
        assert!(err.contains("cut an expansion differently"), "{err}");
    }

    /// A device that starts an expansion after the others took every box it could
    /// still takes the box of its rank; with fewer boxes than devices, the devices past
    /// the last box take none.
    #[test]
    fn a_device_starting_late_still_takes_its_box() {
        let comm = Comm::new(3, None, DEFAULT_STALL_LIMIT);
        let mut first = Vec::new();
        while let Some(b) = comm.claim(0, 0, 100, 10).unwrap() {
            first.push(b);
        }
        // 100 outputs in boxes of at least 10 over three devices: 17, 17, 17, 10, 10, 10,
        // 10, 9.
        assert_eq!(first, [0, 3, 4, 5, 6, 7]);
        assert_eq!(comm.claim(0, 2, 100, 10).unwrap(), Some(2));
        assert_eq!(comm.claim(0, 2, 100, 10).unwrap(), None);
        assert_eq!(comm.claim(0, 1, 100, 10).unwrap(), Some(1));
        assert_eq!(comm.claim(0, 1, 100, 10).unwrap(), None);
        // Two boxes over three devices.
        assert_eq!(comm.claim(1, 2, 100, 2).unwrap(), None);
        assert_eq!(comm.claim(1, 1, 100, 2).unwrap(), Some(1));
        assert_eq!(comm.claim(1, 0, 100, 2).unwrap(), Some(0));
        assert_eq!(comm.claim(1, 0, 100, 2).unwrap(), None);
    }

    #[test]
    fn a_gather_waits_for_every_device_and_an_abort_wakes_it() {
        let comm = Comm::new(3, None, DEFAULT_STALL_LIMIT);
        let got: Vec<Vec<u32>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..3)
                .map(|r| {
                    let comm = &comm;
                    s.spawn(move || {
                        let mut seen = Vec::new();
                        for round in 0..50u32 {
                            let g = comm.all_gather(r, (0, round as usize), r as u32 + round).unwrap();
                            assert!(g.mismatch().is_none());
                            seen.push((0..3).map(|d| *g.get::<u32>(d)).sum::<u32>());
                        }
                        seen
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for g in &got {
            assert_eq!(g, &(0..50).map(|r| 3 + 3 * r).collect::<Vec<u32>>());
        }
        let comm = Comm::new(2, None, DEFAULT_STALL_LIMIT);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| comm.all_gather(0, (0, 0), 1u8).err());
            std::thread::sleep(Duration::from_millis(30));
            comm.abort();
            assert_eq!(waiter.join().unwrap(), Some(CommError::Aborted));
        });
    }

    /// Of devices asking for a run's table at once, one makes it and all get it; a
    /// failure is the asker's, and the next asker makes it again.
    #[test]
    fn a_run_s_table_is_made_once_for_every_device() {
        use std::sync::atomic::AtomicUsize;
        let comm = Comm::new(4, None, Duration::from_secs(60));
        let made = AtomicUsize::new(0);
        let op = fox_kernel::DictOp::Like("a%".into());
        let failed: Result<Arc<HostCol>, String> = comm.shared_table(&op, || Err("no room".into()));
        assert_eq!(failed.unwrap_err(), "no room");
        let tables: Vec<Arc<HostCol>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        comm.shared_table(&op, || {
                            made.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(20));
                            Ok::<_, String>(Arc::new(HostCol::U8(vec![1, 0, 1])))
                        })
                        .unwrap()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(made.load(Ordering::SeqCst), 1);
        assert!(tables.iter().all(|t| Arc::ptr_eq(t, &tables[0])));
        // Another pattern is another table.
        let other = comm
            .shared_table(&fox_kernel::DictOp::Prefix("a".into()), || {
                Ok::<_, String>(Arc::new(HostCol::U8(vec![0])))
            })
            .unwrap();
        assert_eq!(other.len(), 1);
    }

    /// Of devices loading the same input hashed at once, one routes it and all get that
    /// routing; a failure is the asker's and the next asker routes it; another input or
    /// other keys are another routing, made while the first is being made.
    #[test]
    fn a_run_routes_an_input_hashed_over_its_devices_once() {
        use std::sync::atomic::AtomicUsize;
        let n = 4;
        let comm = Comm::new(n, None, Duration::from_secs(60));
        let made = AtomicUsize::new(0);
        let col = HostCol::I64((0..1000).map(|k| k % 37).collect());
        let key: RouteKey = ("t".into(), vec![0]);
        let failed = comm.routing(&key, || Err("no room".to_string()));
        assert_eq!(failed.unwrap_err(), "no room");
        let routings: Vec<Arc<Routing>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..n)
                .map(|_| {
                    s.spawn(|| {
                        comm.routing(&key, || {
                            made.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(20));
                            Routing::of(&[Some(&col)], &[0], n).map(Arc::new)
                        })
                        .unwrap()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(made.load(Ordering::SeqCst), 1);
        assert!(routings.iter().all(|r| Arc::ptr_eq(r, &routings[0])));
        let parts: usize = (0..n).map(|d| routings[0].pick(&col, d, "test").unwrap().len()).sum();
        assert_eq!(parts, 1000);
        // Another input is routed while the first one's cell is held.
        let other: RouteKey = ("u".into(), vec![0]);
        let (done, wait) = std::sync::mpsc::channel();
        let (making, started) = std::sync::mpsc::channel();
        let (comm, col) = (&comm, &col);
        std::thread::scope(|s| {
            // Makes its routing only once the other input's is made (or gives up).
            let slow = s.spawn(move || {
                comm.routing(&("v".into(), vec![0]), || {
                    making.send(()).unwrap();
                    wait.recv_timeout(Duration::from_secs(20))
                        .map_err(|_| "the other routing was not made meanwhile".to_string())?;
                    Routing::of(&[Some(col)], &[0], n).map(Arc::new)
                })
            });
            started.recv().unwrap();
            let r = comm
                .routing(&other, || Routing::of(&[Some(col)], &[0], n).map(Arc::new))
                .unwrap();
            done.send(()).unwrap();
            assert!(!Arc::ptr_eq(&r, &routings[0]));
            slow.join().unwrap().unwrap();
        });
    }

    #[test]
    fn a_wait_ends_at_the_stall_limit_or_the_cancellation_and_different_collectives_are_told() {
        let limit = Duration::from_millis(50);
        let comm = Comm::new(3, None, limit);
        let started = Instant::now();
        let got: Vec<Option<CommError>> = std::thread::scope(|s| {
            let a = s.spawn(|| comm.all_gather(0, (0, 0), 1u8).err());
            let c = s.spawn(|| comm.all_gather(2, (0, 0), 1u8).err());
            vec![a.join().unwrap(), c.join().unwrap()]
        });
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        // One waiting device sees the stall and fails; the other stops as its peer.
        let stalled_again = || CommError::Stalled {
            missing: vec![1],
            waiting: vec![0, 2],
            limit,
        };
        let stalled = stalled_again();
        assert_eq!(
            got.iter().filter(|e| **e == Some(CommError::Aborted)).count(),
            1,
            "{got:?}"
        );
        assert_eq!(
            got.iter().filter(|e| **e == Some(stalled_again())).count(),
            1,
            "{got:?}"
        );
        assert!(comm.halt_flag().load(Ordering::SeqCst) && comm.is_halted_for(1));
        let e = comm_error(stalled, "block `main` (0), instruction 3 (exchange)").unwrap();
        assert_eq!(
            e.to_string(),
            "block `main` (0), instruction 3 (exchange): device 1 did not reach this collective, where \
             devices 0 and 2 were waiting: no device made progress for 0.05 s (the stall limit; \
             FOX_STALL_TIMEOUT_S sets it)"
        );
        let cancel = crate::CancelToken::new();
        let comm = Comm::new(2, Some(cancel.clone()), DEFAULT_STALL_LIMIT);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| comm.all_gather(1, (0, 0), 1u8).err());
            std::thread::sleep(Duration::from_millis(30));
            cancel.cancel();
            assert_eq!(waiter.join().unwrap(), Some(CommError::Cancelled));
        });
        let comm = Comm::new(2, None, DEFAULT_STALL_LIMIT);
        let tags: Vec<Option<String>> = std::thread::scope(|s| {
            let a = s.spawn(|| comm.all_gather(0, (1, 2), 0u8).unwrap().mismatch());
            let b = s.spawn(|| comm.all_gather(1, (3, 0), 0u8).unwrap().mismatch());
            vec![a.join().unwrap(), b.join().unwrap()]
        });
        let want = "the devices reached different collectives: device 0 at block 1, instruction 2; \
                    device 1 at block 3, instruction 0";
        assert_eq!(tags, vec![Some(want.to_string()), Some(want.to_string())]);
    }

    #[test]
    fn progress_of_any_device_restarts_the_stall_limit() {
        // Device 1 works for ten times the limit, in steps shorter than it, before it
        // reaches the collective: device 0 waits for it.
        let limit = Duration::from_millis(100);
        let comm = Comm::new(2, None, limit);
        let started = Instant::now();
        let got: Vec<bool> = std::thread::scope(|s| {
            let a = s.spawn(|| comm.all_gather(0, (0, 0), 1u8).is_ok());
            let b = s.spawn(|| {
                for _ in 0..50 {
                    std::thread::sleep(Duration::from_millis(20));
                    comm.progress();
                }
                comm.all_gather(1, (0, 0), 2u8).is_ok()
            });
            vec![a.join().unwrap(), b.join().unwrap()]
        });
        assert_eq!(got, vec![true, true]);
        assert!(started.elapsed() >= Duration::from_millis(1000));
        assert!(!comm.is_halted_for(0) && !comm.halt_flag().load(Ordering::SeqCst));
    }

    #[test]
    fn the_stall_limit_is_read_as_seconds_and_devices_are_named_in_order() {
        assert_eq!(parse_stall_limit(None), Ok(DEFAULT_STALL_LIMIT));
        assert_eq!(parse_stall_limit(Some(" 2.5")), Ok(Duration::from_millis(2500)));
        for bad in ["0", "-3", "soon", "", "inf"] {
            let e = parse_stall_limit(Some(bad)).unwrap_err();
            assert!(
                e.starts_with("FOX_STALL_TIMEOUT_S must be a number of seconds above 0"),
                "{e}"
            );
            assert!(e.ends_with(&format!("not `{bad}`")), "{e}");
        }
        assert_eq!(
            (name_devices(&[3]), name_devices(&[0, 2]), name_devices(&[0, 1, 3])),
            (
                "device 3".to_string(),
                "devices 0 and 2".to_string(),
                "devices 0, 1 and 3".to_string()
            )
        );
        assert_eq!(
            (seconds(Duration::from_secs(120)), seconds(Duration::from_millis(250))),
            ("120 s".to_string(), "0.25 s".to_string())
        );
    }
}
