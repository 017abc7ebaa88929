//! The interface between the plan interpreter and a device: buffers, transfers, launches.

use fox_kernel::{Elem, Kernel};
use std::fmt;

/// A buffer on the backend's device. The runtime owns each `DevBuf` and gives it back
/// with [`Backend::free`]; a backend never frees a buffer on its own.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct DevBuf {
    /// The backend's handle.
    pub id: u64,
    pub elem: Elem,
    /// Number of elements.
    pub len: usize,
}

impl DevBuf {
    pub fn bytes(&self) -> usize {
        self.len * self.elem.size()
    }
}

/// A column in host memory.
#[derive(Clone, Debug, PartialEq)]
pub enum HostCol {
    U8(Vec<u8>),
    I32(Vec<i32>),
    U32(Vec<u32>),
    I64(Vec<i64>),
    U64(Vec<u64>),
    F64(Vec<f64>),
    I128(Vec<i128>),
}

impl HostCol {
    /// An empty column of element type `elem`.
    pub fn empty(elem: Elem) -> HostCol {
        match elem {
            Elem::U8 => HostCol::U8(Vec::new()),
            Elem::I32 => HostCol::I32(Vec::new()),
            Elem::U32 => HostCol::U32(Vec::new()),
            Elem::I64 => HostCol::I64(Vec::new()),
            Elem::U64 => HostCol::U64(Vec::new()),
            Elem::F64 => HostCol::F64(Vec::new()),
            Elem::I128 => HostCol::I128(Vec::new()),
        }
    }

    pub fn elem(&self) -> Elem {
        match self {
            HostCol::U8(_) => Elem::U8,
            HostCol::I32(_) => Elem::I32,
            HostCol::U32(_) => Elem::U32,
            HostCol::I64(_) => Elem::I64,
            HostCol::U64(_) => Elem::U64,
            HostCol::F64(_) => Elem::F64,
            HostCol::I128(_) => Elem::I128,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            HostCol::U8(v) => v.len(),
            HostCol::I32(v) => v.len(),
            HostCol::U32(v) => v.len(),
            HostCol::I64(v) => v.len(),
            HostCol::U64(v) => v.len(),
            HostCol::F64(v) => v.len(),
            HostCol::I128(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy, or the out-of-memory message naming `what`.
    pub fn try_clone(&self, what: &str) -> Result<HostCol, String> {
        use crate::alloc::try_to_vec;
        Ok(match self {
            HostCol::U8(v) => HostCol::U8(try_to_vec(v, what)?),
            HostCol::I32(v) => HostCol::I32(try_to_vec(v, what)?),
            HostCol::U32(v) => HostCol::U32(try_to_vec(v, what)?),
            HostCol::I64(v) => HostCol::I64(try_to_vec(v, what)?),
            HostCol::U64(v) => HostCol::U64(try_to_vec(v, what)?),
            HostCol::F64(v) => HostCol::F64(try_to_vec(v, what)?),
            HostCol::I128(v) => HostCol::I128(try_to_vec(v, what)?),
        })
    }
}

/// Applies `$body` to the vector inside a [`HostCol`], binding it as `$v`, and wraps a
/// vector result back in the same variant.
macro_rules! same_variant {
    ($col:expr, $v:ident => $body:expr) => {
        match $col {
            HostCol::U8($v) => HostCol::U8($body),
            HostCol::I32($v) => HostCol::I32($body),
            HostCol::U32($v) => HostCol::U32($body),
            HostCol::I64($v) => HostCol::I64($body),
            HostCol::U64($v) => HostCol::U64($body),
            HostCol::F64($v) => HostCol::F64($body),
            HostCol::I128($v) => HostCol::I128($body),
        }
    };
}

impl HostCol {
    /// A copy of rows `rows`, or the out-of-memory message naming `what`.
    pub fn try_slice(&self, rows: std::ops::Range<usize>, what: &str) -> Result<HostCol, String> {
        use crate::alloc::try_to_vec;
        Ok(same_variant!(self, v => try_to_vec(&v[rows], what)?))
    }

    /// The rows `rows` (indices into the column, each in range), in their order.
    pub fn try_pick(&self, rows: &[u32], what: &str) -> Result<HostCol, String> {
        Ok(same_variant!(self, v => {
            let mut out = crate::alloc::try_with_capacity(rows.len(), what)?;
            out.extend(rows.iter().map(|&r| v[r as usize]));
            out
        }))
    }

    /// [`HostCol::try_pick`] in parallel.
    pub fn try_par_pick(&self, rows: &[u32], what: &str) -> Result<HostCol, String> {
        self.try_par_pick_by(rows, |r| r as usize, what)
    }

    /// The rows `index(rows[i])` (each in range), in the order of `rows`, gathered in
    /// parallel, or the out-of-memory message naming `what`.
    pub(crate) fn try_par_pick_by<I: Copy + Send + Sync>(
        &self,
        rows: &[I],
        index: impl Fn(I) -> usize + Send + Sync,
        what: &str,
    ) -> Result<HostCol, String> {
        use rayon::prelude::*;
        Ok(same_variant!(self, v => crate::alloc::try_par_collect(
            rows.par_iter().with_min_len(1 << 14).map(|&r| v[index(r)]),
            what,
        )?))
    }

    /// The rows of `parts` one part after the other, each of element type `elem` (an
    /// error otherwise), or the out-of-memory message naming `what`.
    pub fn try_concat(elem: Elem, parts: Vec<HostCol>, what: &str) -> Result<HostCol, String> {
        if let Some(p) = parts.iter().find(|p| p.elem() != elem) {
            return Err(format!("a part is {:?}, not {elem:?}", p.elem()));
        }
        let len = parts.iter().map(HostCol::len).sum();
        macro_rules! concat_as {
            ($variant:ident) => {{
                let mut out = crate::alloc::try_with_capacity(len, what)?;
                let srcs: Vec<_> = parts
                    .iter()
                    .filter_map(|p| match p {
                        HostCol::$variant(w) => Some(w.as_slice()),
                        _ => None,
                    })
                    .collect();
                copy_parts(&srcs, &mut out.spare_capacity_mut()[..len]);
                // SAFETY: `copy_parts` wrote every one of the `len` slots (the parts'
                // lengths sum to `len`).
                unsafe { out.set_len(len) };
                HostCol::$variant(out)
            }};
        }
        Ok(match elem {
            Elem::U8 => concat_as!(U8),
            Elem::I32 => concat_as!(I32),
            Elem::U32 => concat_as!(U32),
            Elem::I64 => concat_as!(I64),
            Elem::U64 => concat_as!(U64),
            Elem::F64 => concat_as!(F64),
            Elem::I128 => concat_as!(I128),
        })
    }
}

/// Copies `srcs` one after the other into `dst` (exactly as long as all of them), in
/// parallel pieces of at most 1 Mi elements.
fn copy_parts<T: Copy + Send + Sync>(srcs: &[&[T]], dst: &mut [std::mem::MaybeUninit<T>]) {
    use rayon::prelude::*;
    const PIECE: usize = 1 << 20;
    let mut pieces = Vec::new();
    let mut rest = dst;
    for src in srcs {
        let (mine, tail) = rest.split_at_mut(src.len());
        rest = tail;
        pieces.extend(mine.chunks_mut(PIECE).zip(src.chunks(PIECE)));
    }
    pieces.into_par_iter().for_each(|(d, s)| {
        for (d, &x) in d.iter_mut().zip(s) {
            d.write(x);
        }
    });
}

/// What a launch may need from the runtime besides its buffers.
pub trait LaunchCtx {
    /// The dictionary code of a string constant of the plan (every one has a code).
    fn string_code(&self, s: &str) -> Option<u32>;
    /// The run's cancellation flag (see [`crate::cancel`]). A kernel whose work can run
    /// long reads it once per chunk of rows and, once it is set, may stop and return an
    /// error: the interpreter discards what a launch returns after the flag is set.
    fn cancel_flag(&self) -> &std::sync::atomic::AtomicBool {
        crate::cancel::never()
    }
}

/// Memory accounting of a backend, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemStats {
    /// Bytes of live buffers now.
    pub in_use: usize,
    /// The largest `in_use` seen (the high-water mark).
    pub peak: usize,
    /// The sum of the sizes of every buffer ever allocated.
    pub total_allocated: usize,
    /// The bytes copied from the host into the device's buffers by uploads, over the
    /// backend's life (a packed column's packed rows where the device widens them).
    pub bytes_in: u64,
}

/// An error a backend reports: a kernel's data error (division by zero, overflow, an
/// index out of range in a plan that was edited by hand), an allocation failure, or a
/// device failure. Never a panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendError(pub String);

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BackendError {}

/// The row an expression kernel (`Eval`, `FusedReduce`) failed on: both backends end the
/// message of an error of one row with ` (row N)`, N counting the kernel's input rows.
pub fn failing_row(msg: &str) -> Option<usize> {
    let inner = msg.strip_suffix(')')?;
    let at = inner.rfind(" (row ")?;
    inner[at + " (row ".len()..].parse().ok()
}

/// A meeting of the devices of a run at an exchange ([`Backend::peer_exchange`]): this
/// device's message or failure in, every device's message out (in device order), or the
/// first failure.
pub type Meet<'a> = dyn FnMut(Result<Vec<u64>, String>) -> Result<Vec<Vec<u64>>, String> + 'a;

/// A device that runs the kernels of the kernel IR. `LoadInput`, `Const`, `DictTable` and
/// `StrFn` are run by the runtime on the host (it owns data files and the dictionary) and
/// never reach a backend; every other kernel does, with the contract documented on
/// [`Kernel`].
pub trait Backend {
    /// A short name for messages and timing tables: `cpu`, `gpu (NVIDIA H100 …)`.
    fn name(&self) -> String;
    fn upload(&mut self, col: HostCol) -> Result<DevBuf, BackendError>;
    /// Uploads the rows `rows` (in range) of `col`, which stays the caller's: a backend
    /// with memory of its own copies them straight from `col`, without the host copy that
    /// [`Backend::upload`] of an owned part would need first (a resident column's part,
    /// a table shared by the devices of a run). The default copies them and uploads
    /// the copy, as a backend whose buffers own host memory must.
    fn upload_rows(&mut self, col: &HostCol, rows: std::ops::Range<usize>) -> Result<DevBuf, BackendError> {
        let part = col.try_slice(rows, "an uploaded column").map_err(BackendError)?;
        self.upload(part)
    }
    /// Uploads the rows `rows` (in range) of a database's stored column as the column a
    /// plan reads: widened when it is packed ([`crate::stored::StoredCol`]). A backend
    /// with memory of its own may move the packed rows and widen them on the device (its
    /// buffers then need [`Backend::stored_upload_room`] bytes besides the column's while
    /// it runs). The default widens them on the host and uploads that.
    fn upload_stored(
        &mut self,
        col: &crate::stored::StoredCol,
        rows: std::ops::Range<usize>,
    ) -> Result<DevBuf, BackendError> {
        match col.plain() {
            Some(h) => self.upload_rows(h, rows),
            None => {
                let wide = col
                    .slice(rows.start, rows.end, "an uploaded column, widened")
                    .map_err(BackendError)?;
                self.upload(wide)
            }
        }
    }
    /// The device bytes [`Backend::upload_stored`] of `n` rows of `col` takes besides
    /// the widened column while it runs: 0 where the backend's buffers are host memory
    /// (it widens them in place), else all of their packed rows
    /// ([`crate::stored::StoredCol::packed_bytes`]) unless the backend says it moves them
    /// in smaller pieces.
    fn stored_upload_room(&self, col: &crate::stored::StoredCol, n: usize) -> usize {
        if self.memory_is_separate() {
            col.packed_bytes(n)
        } else {
            0
        }
    }

    /// Uploads the packed rows `rows` (in range) of a database's stored column into one
    /// `U8` buffer laid out as [`crate::stored::StoredCol::packed_bytes`] says (the rows,
    /// then a string column's distinct codes at
    /// [`crate::stored::StoredCol::codes_at`]), kept on the device so that
    /// [`Backend::widen_packed`] makes any run of those rows from it without moving them
    /// again. `Ok(None)` where the backend keeps no packed rows (the default: a backend
    /// whose buffers are host memory reads the database in place) or the column is held
    /// as it is read.
    fn upload_packed(
        &mut self,
        col: &crate::stored::StoredCol,
        rows: std::ops::Range<usize>,
    ) -> Result<Option<DevBuf>, BackendError> {
        let _ = (col, rows);
        Ok(None)
    }
    /// The rows `rows` of the stored column `col`, as the column a plan reads, made on
    /// the device from `packed`: the buffer [`Backend::upload_packed`] made of the rows
    /// `kept` of `col`. `packed` stays as it is; rows outside `kept` are an error. The
    /// default (a backend that keeps no packed rows) is an error.
    fn widen_packed(
        &mut self,
        packed: &DevBuf,
        col: &crate::stored::StoredCol,
        kept: std::ops::Range<usize>,
        rows: std::ops::Range<usize>,
    ) -> Result<DevBuf, BackendError> {
        let _ = (packed, col, kept, rows);
        Err(BackendError(format!("{} keeps no packed rows to widen", self.name())))
    }
    /// Offers the host bytes `bytes` of a database column read in place (owned by
    /// `owner`) to be page-locked, so that the copies of its rows to the device run at the
    /// bus's full speed; a backend may lock them when they are offered again (by a later
    /// run, which reads them again), keeping a reference to `owner` for as long as they
    /// stay locked. Returns whether they are locked now. The default (a backend whose
    /// buffers are host memory) never locks.
    ///
    /// # Safety
    /// `bytes` lies in memory that `owner` owns and that stays valid and unchanged for as
    /// long as `owner` lives.
    unsafe fn pin_host(&mut self, owner: &std::sync::Arc<dyn std::any::Any + Send + Sync>, bytes: &[u8]) -> bool {
        let _ = (owner, bytes);
        false
    }
    /// A new `U8` buffer of `len` rows, 1 at the rows `ones` (each below `len`) and 0
    /// elsewhere: a table of flags most of whose rows are 0 (a pattern's table over a
    /// large dictionary of which a run reads few strings), which a backend with memory
    /// of its own builds on the device from the positions instead of receiving `len`
    /// bytes. A position past `len` is an error. The default builds the table on the host
    /// and uploads it.
    fn upload_flags(&mut self, len: usize, ones: &[u32]) -> Result<DevBuf, BackendError> {
        if let Some(&bad) = ones.iter().find(|&&r| r as usize >= len) {
            return Err(BackendError(format!("flag at row {bad} of a table of {len} rows")));
        }
        let mut table = crate::alloc::try_filled(len, 0u8, "a table of flags").map_err(BackendError)?;
        for &r in ones {
            table[r as usize] = 1;
        }
        self.upload(HostCol::U8(table))
    }
    fn download(&mut self, buf: &DevBuf) -> Result<HostCol, BackendError>;
    /// Runs `kernel` on `args` and returns its outputs, allocated by the backend with the
    /// lengths the kernel's contract gives. The runtime has checked the arguments' number,
    /// element types and lengths against the contract ([`crate::check_launch`]) and a
    /// backend relies on that; what the contract says of their values (sorted keys, an
    /// exclusive scan, indices in range) a backend checks where a plan edited by hand could
    /// break it, and a violation is an error, not a panic.
    /// A composite kernel (`FusedReduce`: one `fox_kernel::expand` expands) a backend
    /// launches through [`crate::launch_kernel`], which offers it to
    /// [`Backend::launch_composite`] and runs its expansion when the backend declines.
    fn launch(&mut self, kernel: &Kernel, args: &[&DevBuf], ctx: &dyn LaunchCtx) -> Result<Vec<DevBuf>, BackendError>;
    /// Runs a composite kernel in one piece and returns its outputs, or `Ok(None)` when
    /// the backend declines it (it has no such kernel, or cannot settle this launch
    /// exactly: a row that fails, too many groups, a result out of range): then the
    /// runtime runs the kernel's expansion, whose results and errors are the contract's.
    /// A backend that declines leaves nothing allocated. The default declines.
    fn launch_composite(
        &mut self,
        _kernel: &Kernel,
        _args: &[&DevBuf],
        _ctx: &dyn LaunchCtx,
    ) -> Result<Option<Vec<DevBuf>>, BackendError> {
        Ok(None)
    }
    fn free(&mut self, buf: DevBuf);
    /// The buffer's data on the host, the buffer freed: a download then a free, which a
    /// backend whose buffers live in host memory does without a copy (the host tier's
    /// eviction, which must not need the buffer's bytes twice).
    fn take(&mut self, buf: DevBuf) -> Result<HostCol, BackendError> {
        let col = self.download(&buf)?;
        self.free(buf);
        Ok(col)
    }
    /// Waits until all launched work is done (for timing), and reads the checks deferred
    /// until then ([`Backend::set_check_site`]).
    fn sync(&mut self) -> Result<(), BackendError>;
    /// The instruction (block, index) the next launches belong to, or `None`. While one is
    /// set, a backend may read the checks of what a kernel's contract says of its
    /// arguments' values (indices in range, ordered ranges, counts whose sum fits) only at
    /// the next point where it waits for the device (a count read back, a download,
    /// [`Backend::sync`]), provided the launches in between stay within their buffers on
    /// any values. A violation then fails that later call, and
    /// [`Backend::take_failed_check`] names the instruction whose check failed. Setting
    /// `None` drops the checks not read yet. The default checks every launch at once.
    fn set_check_site(&mut self, _site: Option<(usize, usize)>) -> Result<(), BackendError> {
        Ok(())
    }
    /// The instruction and message of the deferred check whose failure the last error
    /// reported, once ([`Backend::set_check_site`]).
    fn take_failed_check(&mut self) -> Option<((usize, usize), String)> {
        None
    }
    fn mem(&self) -> MemStats;
    /// The memory the backend's buffers can use in all, in bytes, when it knows it (the
    /// device's memory; for the CPU, what its buffers hold and what the machine has
    /// available now).
    fn memory_capacity(&self) -> Option<usize> {
        None
    }
    /// Whether the backend's buffers live in memory of their own (a device's), so that
    /// moving one to host memory (the runtime's host tier) makes room for others even
    /// without a memory limit. The CPU backend's buffers are host memory: it says no, and
    /// its buffers leave it only to keep a memory limit.
    fn memory_is_separate(&self) -> bool {
        true
    }
    /// The memory limit of the run about to start (`RunOptions::memory_limit`), set by
    /// the interpreter before its first instruction: a backend that enforces it refuses
    /// an allocation that would take its buffers beyond it with an out-of-memory error
    /// ([`crate::alloc::rows_out_of_memory`]). The default ignores it.
    fn set_memory_limit(&mut self, _limit: Option<u64>) {}
    /// The stall limit of the run over several devices about to start (see
    /// [`crate::spmd`]), set by the interpreter before its first instruction: a backend
    /// whose [`Backend::peer_exchange`] waits for the other devices' transfers fails
    /// that wait, naming the devices, once no device made progress for this long. The
    /// default ignores it.
    fn set_stall_limit(&mut self, _limit: std::time::Duration) {}
    /// Restarts the high-water mark at the bytes in use now (to measure one run of many).
    fn reset_peak(&mut self);
    /// Runs `kernel` as [`Backend::launch`] does and also returns the time the device
    /// spent on it when the backend can measure that apart from the host (CUDA events);
    /// `None` means the caller should time the launch with a host clock.
    fn launch_timed(
        &mut self,
        kernel: &Kernel,
        args: &[&DevBuf],
        ctx: &dyn LaunchCtx,
    ) -> Result<(Vec<DevBuf>, Option<std::time::Duration>), BackendError> {
        self.launch(kernel, args, ctx).map(|outs| (outs, None))
    }

    /// Time spent compiling kernels so far (included in the launches' times); zero for a
    /// backend that compiles nothing at run time.
    fn compile_time(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }

    /// The rows of `cols` (equal lengths) split by the device each goes to under
    /// `Exchange::Hash` on the columns `keys` among `devices` (`fox_kernel::row_hash` of
    /// the keys' `value_bits_*`, then `device_of`; no keys: every row to the device of
    /// the empty row's hash): one part per device, each with the rows in their order.
    /// `Ok(None)`: the backend does not route on its device, and the runtime routes the
    /// downloaded rows on the host. The default declines.
    fn route_rows(
        &mut self,
        _cols: &[&DevBuf],
        _keys: &[usize],
        _devices: usize,
    ) -> Result<Option<Vec<Vec<DevBuf>>>, BackendError> {
        Ok(None)
    }

    /// Whether [`Backend::peer_exchange`] moves buffers between this device and the
    /// other devices of its run (a link set up before the run). Without one, the runtime
    /// stages exchanges through host memory.
    fn has_peer_link(&self) -> bool {
        false
    }

    /// One all-to-all step of an exchange, which every device of the run takes at the
    /// same instruction: `send[p]` are the columns (element types `elems`, equal lengths;
    /// an empty list for no rows) this device sends to device `p` (its own part
    /// included), `recv_rows[q]` the rows device `q` sends it. Returns the received
    /// columns, each the parts of devices `0, 1, …` concatenated. `meet` gathers one
    /// message from every device of the run (its failure included) and returns all of
    /// them in device order, or `Err` when any device failed; every device's backend
    /// calls it the same number of times, the first once its outputs are allocated (or
    /// could not be), so that no device moves a row when any allocation failed (a
    /// device never waits in a transfer for a peer that will not come). Only a backend
    /// whose [`Backend::has_peer_link`] holds implements it.
    fn peer_exchange(
        &mut self,
        _send: &[Vec<&DevBuf>],
        _recv_rows: &[usize],
        _elems: &[Elem],
        _meet: &mut Meet<'_>,
    ) -> Result<Vec<DevBuf>, BackendError> {
        Err(BackendError(format!("{} has no link to other devices", self.name())))
    }
}
