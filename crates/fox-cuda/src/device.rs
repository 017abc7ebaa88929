//! The device: one CUDA context and stream, device buffers, module loading and kernel
//! launches, the error word kernels report data errors through.
//!
//! Buffers are byte allocations from the device's default memory pool (its release
//! threshold raised so that freed memory stays in the pool), rounded up to 16 bytes so
//! that kernels may read a buffer's last elements with 16-byte vector loads. A buffer of
//! length 0 has no allocation and the pointer 0. Event tracking is disabled before the
//! first allocation: everything runs on one stream, in order.
//!
//! Transfers of at least [`STAGING_MIN`] bytes go through one reusable page-locked staging
//! buffer (grown on demand up to [`STAGING_MAX`]) in two halves: the host copies one
//! chunk into a half while the DMA engine moves the other, and an event per half says
//! when it may be reused. When the staging buffer cannot be allocated, or
//! `FOX_PINNED_STAGING=0`, transfers are plain (pageable) copies. Host ranges page-locked
//! in place (`Gpu::pin_host`: database columns read in place again and again) are copied
//! from directly, without staging.

use crate::compile::{module_source, CompileStats, Compiler, NVRTC_MISSING};
use cudarc::driver::{
    result, sys, CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DriverError,
    LaunchConfig, PinnedHostSlice, PushKernelArg,
};
use fox_kernel::Elem;
use fox_runtime::{BackendError, DevBuf, HostCol, MemStats};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// A kernel argument. Pointers are passed as 64-bit values (kernels take `T*`). Every
/// scalar type a kernel parameter may have is here, used or not.
#[allow(dead_code)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum KArg {
    Ptr(u64),
    U32(u32),
    U64(u64),
    I32(i32),
    I64(i64),
    F64(f64),
}

/// Error codes of the error word (`err[0]`). `err[1]` is the row (the smallest failing
/// one: kernels use `atomicMin`, and `reset_err` sets it to `u64::MAX`), `err[2]` and
/// `err[3]` are details whose meaning the launcher knows.
pub(crate) const ERR_INDEX: u64 = 1;

/// An error word as [`Gpu::check_err`] reports it: none for code 0, else the kernel, the
/// code, the row and the details.
fn word_error(kernel: &str, [code, row, d1, d2]: [u64; 4]) -> Result<(), BackendError> {
    if code == 0 {
        return Ok(());
    }
    let what = match code {
        ERR_INDEX => "index out of range".to_string(),
        c => format!("data error {c}"),
    };
    Err(BackendError(format!(
        "kernel {kernel}: {what} at row {row} (details {d1}, {d2})"
    )))
}

/// The error words of deferred checks: at most this many launches' checks wait for the
/// next wait on the device (one more waits for the device first).
const CHECK_SLOTS: usize = 256;

/// How a launcher turns its error word into an error (`Ok` when the word says none). It
/// may read buffers through the [`Gpu`], which it must expect to be freed by then when the
/// check was deferred.
pub(crate) type Decode = Box<dyn FnOnce(&mut Gpu, [u64; 4]) -> Result<(), BackendError> + Send>;

/// Deferred checks: the checks of what a kernel's contract says of its arguments' values
/// (indices in range, ordered ranges, offsets that are an exclusive scan), which only a
/// plan edited by hand can break, are read where the host waits for the device anyway
/// (a count read back, a download, [`Gpu::sync`]) instead of by a wait after every launch.
/// Invariants: `slots` holds `4 * CHECK_SLOTS` words; slot `k` belongs to `pending[k]`,
/// and every slot at or past `pending.len()` holds `[0, u64::MAX, 0, 0]` for its next
/// launch; checks are read in launch order, so the first failing one is reported, with
/// its instruction (`failed`) for the runtime.
struct Checks {
    slots: CudaSlice<u64>,
    /// `[0, u64::MAX, 0, 0]` for every slot, copied over the slots read.
    fresh: Vec<u64>,
    pending: Vec<Pending>,
    /// The instruction launches belong to; `None` reads every check at once.
    site: Option<(usize, usize)>,
    /// The kernel being launched, for messages.
    kernel: &'static str,
    /// The instruction and message of the deferred check that failed.
    failed: Option<((usize, usize), String)>,
}

/// A launch whose error word waits in its slot; `decode` is `None` until the launcher has
/// launched (a launcher that stops before has its slot cleared unread).
struct Pending {
    site: (usize, usize),
    kernel: &'static str,
    decode: Option<Decode>,
}

/// A device buffer: `len` elements of `elem` in `mem` (none when `len` is 0).
struct Slot {
    mem: Option<CudaSlice<u8>>,
    elem: Elem,
    len: usize,
}

/// Transfers smaller than this are plain copies (the driver stages them itself).
const STAGING_MIN: usize = 1 << 20;
/// Downloads of at least this many elements fault their host memory in from all cores.
const PARALLEL_FILL_MIN: usize = 1 << 20;
/// The largest staging buffer (both halves together).
const STAGING_MAX: usize = 128 << 20;
/// Host copies of at least this many bytes are split over several threads.
const PAR_COPY_MIN: usize = 4 << 20;

/// The page-locked staging buffer: two halves of `half` bytes, and for each an event
/// recorded after the last transfer that used it.
struct Staging {
    mem: PinnedHostSlice<u8>,
    half: usize,
    done: [CudaEvent; 2],
}

impl Staging {
    /// The start of half `h` (`h` is 0 or 1).
    fn half_ptr(&mut self, h: usize) -> Result<*mut u8, DriverError> {
        // The slice's own event is never recorded (transfers use `done`), so this does not wait.
        let base = self.mem.as_mut_ptr()?;
        // SAFETY: the allocation holds `2 * half` bytes.
        Ok(unsafe { base.add(h * self.half) })
    }
}

/// A module still compiling in the background holds the driver and NVRTC: the backend
/// waits for it before its context goes, so that no compile is left running into the
/// process's exit (NVRTC's state torn down under a compiling thread crashes it).
impl Drop for Gpu {
    fn drop(&mut self) {
        for (_, handle) in self.pending.drain() {
            let _ = handle.join();
        }
        // Copies from locked host memory may still run: wait for them, then unlock it
        // before its owners may free it.
        let _ = self.stream.synchronize();
        for p in self.pinned.drain(..) {
            // SAFETY: the range was locked by `cuMemHostRegister` and no copy uses it now.
            let _ = unsafe { sys::cuMemHostUnregister(p.start as *mut std::ffi::c_void) };
        }
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // The host memory is freed after this: wait for transfers that still use it.
        for e in &self.done {
            let _ = e.synchronize();
        }
    }
}

/// Copies `src` to `dst` (equal lengths), over several threads when it is large.
fn host_copy(dst: &mut [u8], src: &[u8]) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    if src.len() < PAR_COPY_MIN || threads < 2 {
        dst.copy_from_slice(src);
        return;
    }
    let part = src.len().div_ceil(threads);
    std::thread::scope(|s| {
        for (d, c) in dst.chunks_mut(part).zip(src.chunks(part)) {
            s.spawn(move || d.copy_from_slice(c));
        }
    });
}

/// The bytes of a slice of plain numbers.
pub(crate) fn bytes_of<T: cudarc::driver::DeviceRepr>(v: &[T]) -> &[u8] {
    // SAFETY: the element types of host columns (u8, i32, u32, i64, u64, f64, i128) have
    // no padding and every byte is initialised.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

pub(crate) struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    bufs: HashMap<u64, Slot>,
    next_id: u64,
    mem: MemStats,
    /// Loaded modules, by module name or `gen:<hash>` for generated sources.
    modules: HashMap<String, Arc<CudaModule>>,
    functions: HashMap<(String, String), CudaFunction>,
    /// Kernel modules being compiled and loaded in the background
    /// ([`Gpu::prefetch_modules`]), by module name.
    pending: HashMap<&'static str, std::thread::JoinHandle<Prefetched>>,
    /// The kernels given the largest shared-memory carveout (`prefer_shared`).
    carveout_set: HashSet<(String, String)>,
    compiler: Compiler,
    err: CudaSlice<u64>,
    /// The checks whose reading waits for the next wait on the device ([`Gpu::check_word`]).
    checks: Checks,
    name: String,
    cc: (i32, i32),
    sm_count: u32,
    max_smem_optin: u32,
    /// The device memory free when the backend opened, less a reserve for kernels'
    /// scratch space and the driver.
    capacity: usize,
    /// The run's memory limit (`Backend::set_memory_limit`): no allocation takes the
    /// bytes in use beyond it.
    limit: Option<u64>,
    /// Whether large transfers go through `staging`.
    use_staging: bool,
    staging: Option<Staging>,
    /// Fused reductions settled by the one-pass kernel (the others ran unfused).
    pub(crate) fused_one_pass: u64,
    /// Evictions a cuckoo insertion of `IntersectCount` makes before its block searches
    /// instead (k_trie.rs).
    pub(crate) table_kicks: u32,
    /// The packed bytes an upload of a packed column moves at a time
    /// ([`crate::k_move::upload_stored`]).
    pub(crate) widen_piece_bytes: usize,
    /// When `HashBuild` partitions its table, and the shared memory of a sub-table
    /// (k_join.rs [`crate::k_join::HashPartitioning`]).
    pub(crate) hash_partitioning: crate::k_join::HashPartitioning,
    /// Host ranges page-locked for copies to the device ([`Gpu::pin_host`]).
    pinned: Vec<PinnedRange>,
    /// Host ranges offered once and not locked (address, bytes): locked when offered again.
    pin_seen: HashSet<(usize, usize)>,
    /// Host ranges the driver would not lock: not tried again.
    pin_refused: HashSet<(usize, usize)>,
    /// The most host bytes locked at once: half of the machine's memory.
    pin_cap: usize,
}

/// A host range page-locked with `cuMemHostRegister`, and the owner that keeps its memory
/// valid and unchanged while it is locked.
struct PinnedRange {
    start: usize,
    len: usize,
    owner: Arc<dyn std::any::Any + Send + Sync>,
}

/// Host ranges smaller than this are not page-locked (staged copies move them about as
/// fast, and locking costs about as much as a copy).
const PIN_MIN: usize = 64 << 20;

/// Half of the machine's memory (`MemTotal` of /proc/meminfo), 0 where unknown: the most
/// host memory the backend page-locks, so that the host keeps memory to run in.
fn pin_cap() -> usize {
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
    });
    total.map_or(0, |kb| kb.saturating_mul(1024) / 2)
}

/// A kernel module compiled and loaded in the background, with what its compiler counted.
type Prefetched = Result<(Arc<CudaModule>, CompileStats), BackendError>;

/// Whether `FOX_COMPILE_LOG` asks for a line on standard error per module compiled or
/// loaded (its time), for diagnosing start-up.
fn compile_log() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("FOX_COMPILE_LOG").is_some_and(|v| !v.is_empty() && v != "0"))
}

/// Compiles (or reads from the caches) and loads `what`, logging the times when asked.
fn compile_and_load(
    ctx: &Arc<CudaContext>,
    compiler: &mut Compiler,
    what: &str,
    source: &str,
) -> Result<Arc<CudaModule>, BackendError> {
    let t0 = std::time::Instant::now();
    let image = compiler.image(what, source)?;
    let t1 = std::time::Instant::now();
    let m = {
        let _lock = crate::nccl::driver_lock();
        ctx.load_module(image.to_loadable())
    }
    .map_err(|e| drv(&format!("cannot load the module of {what}"), e))?;
    if compile_log() {
        let kind = match image {
            crate::compile::Image::Cubin(_) => "cubin",
            crate::compile::Image::Ptx(_) => "ptx",
        };
        eprintln!(
            "fox: {what}: image ({kind}) {:.1} ms, load {:.1} ms",
            (t1 - t0).as_secs_f64() * 1e3,
            t1.elapsed().as_secs_f64() * 1e3
        );
    }
    Ok(m)
}

/// A driver error as text.
fn drv(what: &str, e: DriverError) -> BackendError {
    BackendError(format!("{what}: {e:?}"))
}

fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

impl Gpu {
    /// The number of CUDA devices visible to the process (`CUDA_VISIBLE_DEVICES` applies),
    /// after the checks of [`Gpu::on`]: a missing driver or NVRTC, or a driver older than
    /// CUDA 13.0, is an error.
    pub fn count() -> Result<usize, BackendError> {
        // SAFETY: only tries to open the libraries by their candidate names.
        if !unsafe { sys::is_culib_present() } {
            return Err(BackendError("libcuda.so.1 not found: no NVIDIA driver".to_string()));
        }
        if !crate::compile::nvrtc_available() {
            return Err(BackendError(NVRTC_MISSING.to_string()));
        }
        result::init().map_err(|e| drv("cannot initialise the CUDA driver", e))?;
        let mut version = 0;
        // SAFETY: the driver is loaded and initialised; the pointer is valid.
        unsafe { sys::cuDriverGetVersion(&mut version) }
            .result()
            .map_err(|e| drv("cannot read the driver version", e))?;
        if version < 13000 {
            return Err(BackendError(format!(
                "the NVIDIA driver supports CUDA {}.{}; fox needs CUDA 13.0 or newer",
                version / 1000,
                (version % 1000) / 10
            )));
        }
        let count = CudaContext::device_count().map_err(|e| drv("cannot count CUDA devices", e))?;
        Ok(count.max(0) as usize)
    }

    /// Opens the GPU of ordinal `ordinal` (0 for the first visible device). A missing
    /// driver or NVRTC, no device, a driver older than CUDA 13.0, or no device of that
    /// ordinal (the error names how many there are) is an error, never a panic.
    pub fn on(ordinal: usize) -> Result<Gpu, BackendError> {
        let count = Gpu::count()?;
        if count < 1 {
            return Err(BackendError("no CUDA device".to_string()));
        }
        if ordinal >= count {
            return Err(BackendError(format!(
                "there is no CUDA device {ordinal}: {count} {} visible",
                if count == 1 { "device is" } else { "devices are" }
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| drv(&format!("cannot open CUDA device {ordinal}"), e))?;
        // SAFETY: called before any allocation in this context object; one stream in order.
        unsafe { ctx.disable_event_tracking() };
        if ctx.has_async_alloc() {
            // SAFETY: the default pool of this context's device; the value outlives the call.
            unsafe {
                let pool = result::device::get_default_mem_pool(ctx.cu_device())
                    .map_err(|e| drv("cannot get the memory pool", e))?;
                let mut threshold: u64 = u64::MAX;
                sys::cuMemPoolSetAttribute(
                    pool,
                    sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                    &mut threshold as *mut u64 as *mut std::ffi::c_void,
                )
                .result()
                .map_err(|e| drv("cannot set the memory pool's release threshold", e))?;
            }
        }
        let stream = ctx.new_stream().map_err(|e| drv("cannot create a stream", e))?;
        let name = ctx.name().map_err(|e| drv("cannot read the device name", e))?;
        let cc = ctx
            .compute_capability()
            .map_err(|e| drv("cannot read the compute capability", e))?;
        let attr = |a| ctx.attribute(a).map_err(|e| drv("cannot read a device attribute", e));
        let sm_count = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?.max(1) as u32;
        let max_smem_optin =
            attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?.max(0) as u32;
        let compiler = Compiler::new(&format!("compute_{}{}", cc.0, cc.1))?;
        let err = stream
            .alloc_zeros::<u64>(4)
            .map_err(|e| drv("cannot allocate the error word", e))?;
        let mut slots = stream
            .alloc_zeros::<u64>(4 * CHECK_SLOTS)
            .map_err(|e| drv("cannot allocate the error words of deferred checks", e))?;
        let fresh: Vec<u64> = (0..CHECK_SLOTS).flat_map(|_| [0, u64::MAX, 0, 0]).collect();
        stream
            .memcpy_htod(&fresh[..], &mut slots)
            .map_err(|e| drv("cannot clear the error words of deferred checks", e))?;
        let checks = Checks {
            slots,
            fresh,
            pending: Vec::new(),
            site: None,
            kernel: "",
            failed: None,
        };
        let (free, _) = ctx
            .mem_get_info()
            .map_err(|e| drv("cannot read the free device memory", e))?;
        let capacity = free.saturating_sub((free / 32).max(256 << 20));
        Ok(Gpu {
            ctx,
            stream,
            bufs: HashMap::new(),
            next_id: 1,
            mem: MemStats::default(),
            modules: HashMap::new(),
            functions: HashMap::new(),
            pending: HashMap::new(),
            carveout_set: HashSet::new(),
            compiler,
            err,
            checks,
            name,
            cc,
            sm_count,
            max_smem_optin,
            capacity,
            limit: None,
            use_staging: std::env::var("FOX_PINNED_STAGING").map_or(true, |v| v != "0"),
            staging: None,
            fused_one_pass: 0,
            table_kicks: crate::k_trie::DEFAULT_TABLE_KICKS,
            widen_piece_bytes: crate::k_move::WIDEN_PIECE_BYTES,
            hash_partitioning: crate::k_join::HashPartitioning::default(),
            pinned: Vec::new(),
            pin_seen: HashSet::new(),
            pin_refused: HashSet::new(),
            pin_cap: pin_cap(),
        })
    }

    /// The device's ordinal among the visible devices.
    pub fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }

    /// A buffer of `2 n` bytes and the transfers of device `rank` of `n` in an exchange
    /// of one byte with every other device (sent from the first `n` bytes, received into
    /// the last `n`), on this device's stream.
    pub(crate) fn pairwise_plan(&mut self, rank: usize, n: usize) -> Result<(DevBuf, crate::nccl::Plan), BackendError> {
        let buf = self.alloc_zeroed(Elem::U8, 2 * n)?;
        let base = self.ptr(&buf)?;
        let others = || (0..n).filter(move |&q| q != rank);
        let at = |q: usize, off: usize| crate::nccl::Move {
            peer: q,
            ptr: base + (off + q) as u64,
            bytes: 1,
        };
        let plan = crate::nccl::Plan {
            stream: self.stream.cu_stream() as u64,
            sends: others().map(|q| at(q, 0)).collect(),
            recvs: others().map(|q| at(q, n)).collect(),
        };
        Ok((buf, plan))
    }

    /// One exchange over the NCCL link `peer` (the contract of
    /// `Backend::peer_exchange`): the outputs allocated and this device's own part copied
    /// on the device; each device waits (polling, under the stall limit `stall`) until its
    /// stream has done everything before the exchange, so that NCCL's work is only ever
    /// queued behind work that is done: a device whose stream does not come refuses the
    /// link (no communicator is aborted while NCCL work waits on a stream, since an
    /// aborted communicator's queued work would run on freed state) and the meeting tells
    /// the others. At the first meeting every device brings its stream and transfers;
    /// device 0 launches all of them as one NCCL group ([`crate::nccl::Rank::launch_all`])
    /// and tells the outcome at the second meeting; then each device polls its stream
    /// until it passed the group ([`crate::nccl::Rank::wait_group`], under the stall
    /// limit), and the third meeting tells whether every device's did. A device
    /// that failed or stalled shuts the link and gives the run's error; the others stop
    /// as its peers. Once this returns, no NCCL kernel of the exchange is running, so no
    /// later wait of the device depends on another device.
    pub fn peer_exchange(
        &mut self,
        peer: &crate::nccl::Rank,
        send: &[Vec<&DevBuf>],
        recv_rows: &[usize],
        elems: &[Elem],
        meet: &mut fox_runtime::Meet<'_>,
        stall: std::time::Duration,
    ) -> Result<Vec<DevBuf>, BackendError> {
        let (rank, n) = (peer.rank(), peer.size());
        let mut outs: Vec<DevBuf> = Vec::with_capacity(elems.len());
        // Recorded once this device's work before the group is on its stream.
        let mut reached: Option<CudaEvent> = None;
        let prepared = (|| {
            peer.check_open().map_err(BackendError)?;
            if send.len() != n || recv_rows.len() != n {
                return Err(BackendError(format!(
                    "an exchange over {} devices on a link of {n}",
                    send.len()
                )));
            }
            let total: usize = recv_rows.iter().sum();
            for &e in elems {
                outs.push(self.alloc(e, total)?);
            }
            self.ctx
                .bind_to_thread()
                .map_err(|e| drv("cannot bind the CUDA context", e))?;
            let mut plan = crate::nccl::Plan {
                stream: self.stream.cu_stream() as u64,
                sends: Vec::new(),
                recvs: Vec::new(),
            };
            let mut at = 0usize;
            for (q, &rows) in recv_rows.iter().enumerate() {
                if q == rank && rows > 0 {
                    for (c, out) in outs.iter().enumerate() {
                        let src = send[q].get(c).filter(|s| s.len == rows).ok_or_else(|| {
                            BackendError(format!("this device's own part does not have the {rows} rows counted"))
                        })?;
                        self.copy(out, at, src, 0, rows)?;
                    }
                } else if q != rank && rows > 0 {
                    for out in &outs {
                        let size = out.elem.size();
                        plan.recvs.push(crate::nccl::Move {
                            peer: q,
                            ptr: self.ptr(out)? + (at * size) as u64,
                            bytes: rows * size,
                        });
                    }
                }
                at += rows;
            }
            for (p, cols) in send.iter().enumerate() {
                if p == rank {
                    continue;
                }
                for c in cols {
                    if c.len > 0 {
                        plan.sends.push(crate::nccl::Move {
                            peer: p,
                            ptr: self.ptr(c)?,
                            bytes: c.bytes(),
                        });
                    }
                }
            }
            let mark = self.mark()?;
            wait_for_stream(&mark, rank, stall).inspect_err(|e| peer.refuse(e.0.clone()))?;
            reached = Some(mark);
            Ok(plan)
        })();
        let res = (|| {
            let plans = meet(prepared.map(|p| p.encode()).map_err(|e| e.0)).map_err(BackendError)?;
            let launched = if rank == 0 {
                plans
                    .iter()
                    .map(|w| crate::nccl::Plan::decode(w))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| "a device's transfers could not be read".to_string())
                    .and_then(|plans| peer.launch_all(&plans))
            } else {
                Ok(())
            };
            meet(launched.map(|()| Vec::new())).map_err(BackendError)?;
            let reached = reached.as_ref().expect("recorded before the first meeting");
            let waited = self
                .mark()
                .map_err(|e| crate::nccl::GroupError::Found(e.0))
                .and_then(|passed| {
                    let mut part = [crate::nccl::Part {
                        rank,
                        reached: Box::new(|| is_complete(reached)),
                        passed: Box::new(|| is_complete(&passed)),
                    }];
                    peer.wait_group(&mut part, stall)
                });
            // The device that found the failure brings it to the meeting and gives it as
            // its own error; the others, stopped by it, come with nothing to tell and
            // learn there that the failure is another device's.
            let mine = match &waited {
                Err(crate::nccl::GroupError::Found(e)) => Err(e.clone()),
                Ok(()) | Err(crate::nccl::GroupError::Shut(_)) => Ok(Vec::new()),
            };
            let met = meet(mine);
            match waited {
                Err(crate::nccl::GroupError::Found(e)) => Err(BackendError(e)),
                Err(crate::nccl::GroupError::Shut(e)) => Err(BackendError(met.err().unwrap_or(e))),
                Ok(()) => met.map(|_| ()).map_err(BackendError),
            }
        })();
        match res {
            Ok(()) => Ok(outs),
            Err(e) => {
                for b in outs {
                    self.free(b);
                }
                Err(e)
            }
        }
    }

    pub fn device_name(&self) -> &str {
        &self.name
    }

    pub fn compute_capability(&self) -> (i32, i32) {
        self.cc
    }

    pub fn sm_count(&self) -> u32 {
        self.sm_count
    }

    pub fn reset_peak(&mut self) {
        self.mem.peak = self.mem.in_use;
    }

    pub fn mem(&self) -> MemStats {
        self.mem
    }

    /// Sets the memory limit of the runs that follow ([`Gpu::alloc`] keeps it).
    pub fn set_limit(&mut self, limit: Option<u64>) {
        self.limit = limit;
    }

    /// The device memory this backend may fill (see `Gpu::capacity`).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn compile_stats(&self) -> CompileStats {
        self.compiler.stats()
    }

    /// Starts compiling (or reading from the caches) and loading every kernel module not
    /// loaded yet, each on a thread of its own, so that a run waits at the first launch of
    /// a module for what is left of its compilation instead of compiling the modules one
    /// after the other as it meets them. A module that fails is compiled again at its
    /// first use, where its error is reported.
    pub fn prefetch_modules(&mut self) {
        for (name, _) in crate::compile::MODULES {
            if self.modules.contains_key(*name) || self.pending.contains_key(name) {
                continue;
            }
            let Some(source) = module_source(name) else { continue };
            let ctx = self.ctx.clone();
            let mut compiler = self.compiler.clone_fresh();
            let spawned = std::thread::Builder::new()
                .name(format!("fox-compile-{name}"))
                .spawn(move || {
                    let m = compile_and_load(&ctx, &mut compiler, &format!("kernels/{name}.cu"), source)?;
                    Ok((m, compiler.stats()))
                });
            // Without a thread, the module is compiled at its first use.
            if let Ok(handle) = spawned {
                self.pending.insert(name, handle);
            }
        }
    }

    /// A grid for a grid-stride loop over `n` items with `block` threads: enough blocks
    /// to cover `n` with `per_thread` items each, at most `waves` blocks per SM.
    pub fn grid_for(&self, n: usize, block: u32, per_thread: u32, waves: u32) -> u32 {
        let per_block = u64::from(block) * u64::from(per_thread.max(1));
        let need = (n as u64).div_ceil(per_block.max(1));
        need.min(u64::from(self.sm_count) * u64::from(waves.max(1))) as u32
    }

    /// Allocates `len` elements of `elem`, uninitialised. Running out of device memory is
    /// an error built as every backend builds it (`fox_runtime::alloc::rows_out_of_memory`:
    /// `out of memory: cannot allocate 1.5 GiB (400000000 rows of 4 bytes) for …`), with
    /// the device's free and total memory. Under a memory limit ([`Gpu::set_limit`]) an
    /// allocation that would take the bytes in use beyond it is refused with that error
    /// before the device is asked, so the high-water mark never exceeds the limit.
    pub fn alloc(&mut self, elem: Elem, len: usize) -> Result<DevBuf, BackendError> {
        let what = || format!("a buffer of {} on {}", elem.name(), self.name);
        let bytes = len
            .checked_mul(elem.size())
            .filter(|b| *b <= isize::MAX as usize - 16)
            .ok_or_else(|| {
                BackendError(fox_runtime::alloc::rows_out_of_memory(
                    len as u128,
                    elem.size(),
                    &what(),
                    Some("more bytes than an address can reach"),
                ))
            })?;
        if let Some(limit) = self.limit {
            let left = limit.saturating_sub(self.mem.in_use as u64);
            if bytes as u64 > left {
                return Err(BackendError(fox_runtime::alloc::rows_out_of_memory(
                    len as u128,
                    elem.size(),
                    &what(),
                    Some(&fox_runtime::alloc::limit_refusal(u128::from(left))),
                )));
            }
        }
        let mem = if bytes == 0 {
            None
        } else {
            let padded = bytes.div_ceil(16) * 16;
            // SAFETY: the memory is uninitialised; kernels write it before anything reads it.
            match unsafe { self.stream.alloc::<u8>(padded) } {
                Ok(m) => Some(m),
                Err(e) => {
                    let (free, total) = self.ctx.mem_get_info().unwrap_or((0, 0));
                    let state = format!(
                        "{} free of {}, {} in use by this run",
                        mib(free),
                        mib(total),
                        mib(self.mem.in_use)
                    );
                    if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                        return Err(BackendError(fox_runtime::alloc::rows_out_of_memory(
                            len as u128,
                            elem.size(),
                            &what(),
                            Some(&format!("the device is out of memory ({state})")),
                        )));
                    }
                    return Err(BackendError(format!(
                        "cannot allocate {} ({len} x {}) on {}: {e:?} ({state})",
                        mib(bytes),
                        elem.name(),
                        self.name,
                    )));
                }
            }
        };
        let id = self.next_id;
        self.next_id += 1;
        self.bufs.insert(id, Slot { mem, elem, len });
        self.mem.in_use += bytes;
        self.mem.total_allocated += bytes;
        self.mem.peak = self.mem.peak.max(self.mem.in_use);
        Ok(DevBuf { id, elem, len })
    }

    pub fn alloc_zeroed(&mut self, elem: Elem, len: usize) -> Result<DevBuf, BackendError> {
        let buf = self.alloc(elem, len)?;
        if let Err(e) = self.memset_zero(&buf) {
            self.free(buf);
            return Err(e);
        }
        Ok(buf)
    }

    fn slot(&self, buf: &DevBuf) -> Result<&Slot, BackendError> {
        let slot = self
            .bufs
            .get(&buf.id)
            .ok_or_else(|| BackendError(format!("gpu backend: buffer {} is not allocated", buf.id)))?;
        if slot.elem != buf.elem || slot.len != buf.len {
            return Err(BackendError(format!(
                "gpu backend: buffer {} is {} x {:?}, but the handle says {} x {:?}",
                buf.id, slot.len, slot.elem, buf.len, buf.elem
            )));
        }
        Ok(slot)
    }

    /// The raw device pointer of `buf` (0 for an empty buffer).
    pub fn ptr(&self, buf: &DevBuf) -> Result<u64, BackendError> {
        let slot = self.slot(buf)?;
        Ok(match &slot.mem {
            Some(m) => {
                let (p, _sync) = m.device_ptr(&self.stream);
                p
            }
            None => 0,
        })
    }

    pub fn free(&mut self, buf: DevBuf) {
        if let Some(slot) = self.bufs.remove(&buf.id) {
            self.mem.in_use -= slot.len * slot.elem.size();
        }
    }

    /// Copies a host column to a new device buffer.
    pub fn upload(&mut self, col: &HostCol) -> Result<DevBuf, BackendError> {
        self.upload_rows(col, 0..col.len())
    }

    /// Copies `bytes` into the `U8` buffer `buf` from its byte `at` on (the range must lie
    /// in the buffer): large copies through the staging buffer, as every upload.
    pub(crate) fn htod_at(&mut self, buf: &DevBuf, at: usize, bytes: &[u8]) -> Result<(), BackendError> {
        if buf.elem != Elem::U8 || at.checked_add(bytes.len()).is_none_or(|e| e > buf.len) {
            return Err(BackendError(format!(
                "gpu backend: {} bytes copied to byte {at} of a {} buffer of {} rows",
                bytes.len(),
                buf.elem.name(),
                buf.len
            )));
        }
        if bytes.is_empty() {
            return Ok(());
        }
        self.mem.bytes_in += bytes.len() as u64;
        let dst = self.ptr(buf)? + at as u64;
        if bytes.len() >= STAGING_MIN && !self.is_pinned(bytes) && self.staging_ready(bytes.len()) {
            return self.htod_staged(dst, bytes);
        }
        self.ctx
            .bind_to_thread()
            .map_err(|e| drv("cannot bind the CUDA context", e))?;
        // SAFETY: the destination range lies in the buffer (checked above); a copy from
        // pageable memory has read its source when the call returns, and locked memory
        // stays valid and unchanged while it is locked (`Gpu::pin_host`).
        unsafe { result::memcpy_htod_async(dst, bytes, self.stream.cu_stream()) }
            .map_err(|e| drv("cannot copy to the device", e))
    }

    /// Offers `bytes`, owned by `owner`, to be page-locked (`cuMemHostRegister`) so that
    /// copies from them go straight to the device at the bus's speed instead of through
    /// the staging buffer: locked when offered the second time (a range read once is
    /// cheaper to stage than to lock), when at least [`PIN_MIN`] bytes and within
    /// `pin_cap` with what is locked already; a range the driver refuses (locked by
    /// another context, too little lockable memory) is not tried again. The backend
    /// keeps `owner` while the range is locked, and unlocks ranges whose owner only it
    /// still holds (at the next offer, or when it drops). Returns whether `bytes` are
    /// locked now.
    ///
    /// # Safety
    /// `bytes` lies in memory that `owner` owns and that stays valid and unchanged for as
    /// long as `owner` lives.
    pub(crate) unsafe fn pin_host(&mut self, owner: &Arc<dyn std::any::Any + Send + Sync>, bytes: &[u8]) -> bool {
        self.unpin_unowned();
        let key = (bytes.as_ptr() as usize, bytes.len());
        if self.pinned.iter().any(|p| (p.start, p.len) == key) {
            return true;
        }
        if bytes.len() < PIN_MIN || self.pin_refused.contains(&key) || self.pin_seen.insert(key) {
            return false;
        }
        let held: usize = self.pinned.iter().map(|p| p.len).sum();
        if held.saturating_add(bytes.len()) > self.pin_cap || self.ctx.bind_to_thread().is_err() {
            return false;
        }
        // SAFETY: the range is valid host memory (the caller's contract); it stays
        // registered only while `owner`, which keeps it valid, is held below.
        let r = unsafe { sys::cuMemHostRegister_v2(bytes.as_ptr() as *mut std::ffi::c_void, bytes.len(), 0) };
        if r != sys::CUresult::CUDA_SUCCESS {
            self.pin_refused.insert(key);
            return false;
        }
        self.pin_seen.remove(&key);
        self.pinned.push(PinnedRange {
            start: key.0,
            len: key.1,
            owner: owner.clone(),
        });
        true
    }

    /// Unlocks the locked ranges whose owner only the backend still holds (their memory
    /// is freed once the backend lets go), after the copies under way.
    fn unpin_unowned(&mut self) {
        if !self.pinned.iter().any(|p| Arc::strong_count(&p.owner) == 1) {
            return;
        }
        if self.stream.synchronize().is_err() {
            return;
        }
        self.pinned.retain(|p| {
            if Arc::strong_count(&p.owner) > 1 {
                return true;
            }
            // SAFETY: the range was locked by `cuMemHostRegister`; no copy uses it now.
            let _ = unsafe { sys::cuMemHostUnregister(p.start as *mut std::ffi::c_void) };
            false
        });
    }

    /// Whether `bytes` lie within a locked range.
    fn is_pinned(&self, bytes: &[u8]) -> bool {
        let (a, b) = (bytes.as_ptr() as usize, bytes.as_ptr() as usize + bytes.len());
        self.pinned.iter().any(|p| p.start <= a && b <= p.start + p.len)
    }

    /// The host bytes locked now.
    pub(crate) fn pinned_bytes(&self) -> usize {
        self.pinned.iter().map(|p| p.len).sum()
    }

    /// A new buffer holding the rows `rows` of `col`, copied from `col` itself.
    pub fn upload_rows(&mut self, col: &HostCol, rows: std::ops::Range<usize>) -> Result<DevBuf, BackendError> {
        if rows.start > rows.end || rows.end > col.len() {
            return Err(BackendError(format!(
                "gpu backend: rows {}..{} of a column of {} rows uploaded",
                rows.start,
                rows.end,
                col.len()
            )));
        }
        let buf = self.alloc(col.elem(), rows.len())?;
        let res = match col {
            HostCol::U8(v) => self.htod(&buf, &v[rows]),
            HostCol::I32(v) => self.htod(&buf, &v[rows]),
            HostCol::U32(v) => self.htod(&buf, &v[rows]),
            HostCol::I64(v) => self.htod(&buf, &v[rows]),
            HostCol::U64(v) => self.htod(&buf, &v[rows]),
            HostCol::F64(v) => self.htod(&buf, &v[rows]),
            HostCol::I128(v) => self.htod(&buf, &v[rows]),
        };
        match res {
            Ok(()) => Ok(buf),
            Err(e) => {
                self.free(buf);
                Err(e)
            }
        }
    }

    fn htod<T: cudarc::driver::DeviceRepr>(&mut self, buf: &DevBuf, v: &[T]) -> Result<(), BackendError> {
        self.mem.bytes_in += std::mem::size_of_val(v) as u64;
        if std::mem::size_of_val(v) >= STAGING_MIN
            && !self.is_pinned(bytes_of(v))
            && self.staging_ready(std::mem::size_of_val(v))
        {
            let dst = self.ptr(buf)?;
            if buf.len < v.len() {
                return Err(BackendError("gpu backend: upload larger than its buffer".to_string()));
            }
            return self.htod_staged(dst, bytes_of(v));
        }
        let Some(slot) = self.bufs.get_mut(&buf.id) else {
            return Err(BackendError(format!("gpu backend: buffer {} is not allocated", buf.id)));
        };
        let Some(mem) = slot.mem.as_mut() else {
            return Ok(());
        };
        // SAFETY: the allocation holds at least `v.len()` elements of `T` (same element size).
        let mut view = unsafe { mem.transmute_mut::<T>(v.len()) }
            .ok_or_else(|| BackendError("gpu backend: upload larger than its buffer".to_string()))?;
        self.stream
            .memcpy_htod(v, &mut view)
            .map_err(|e| drv("cannot copy to the device", e))
    }

    /// Copies a device buffer to the host (waits for the stream).
    pub fn download(&mut self, buf: &DevBuf) -> Result<HostCol, BackendError> {
        self.slot(buf)?;
        Ok(match buf.elem {
            Elem::U8 => HostCol::U8(self.dtoh(buf)?),
            Elem::I32 => HostCol::I32(self.dtoh(buf)?),
            Elem::U32 => HostCol::U32(self.dtoh(buf)?),
            Elem::I64 => HostCol::I64(self.dtoh(buf)?),
            Elem::U64 => HostCol::U64(self.dtoh(buf)?),
            Elem::F64 => HostCol::F64(self.dtoh(buf)?),
            Elem::I128 => HostCol::I128(self.dtoh(buf)?),
        })
    }

    fn dtoh<T: cudarc::driver::DeviceRepr + Default + Clone + Send + Sync>(
        &mut self,
        buf: &DevBuf,
    ) -> Result<Vec<T>, BackendError> {
        let mut out: Vec<T> = fox_runtime::alloc::try_with_capacity(
            buf.len,
            &format!("a {} buffer downloaded from {}", buf.elem.name(), self.name),
        )
        .map_err(BackendError)?;
        // Fresh host memory is faulted in page by page on first touch: filling it from
        // many threads spreads the faults over the cores (one thread manages ~2 GB/s).
        if buf.len >= PARALLEL_FILL_MIN {
            use rayon::iter::ParallelExtend;
            out.par_extend(rayon::iter::repeat_n(T::default(), buf.len));
        } else {
            out.resize(buf.len, T::default());
        }
        let bytes = std::mem::size_of_val(&out[..]);
        if bytes >= STAGING_MIN && self.staging_ready(bytes) {
            let src = self.ptr(buf)?;
            // SAFETY: `out` holds `buf.len` initialised plain numbers; any bytes are valid.
            let dst = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut u8, bytes) };
            self.dtoh_staged(dst, src)?;
            return Ok(out);
        }
        let slot = self.slot(buf)?;
        if let Some(mem) = &slot.mem {
            // SAFETY: the allocation holds `buf.len` elements of `T`.
            let view = unsafe { mem.transmute::<T>(buf.len) }
                .ok_or_else(|| BackendError("gpu backend: download larger than its buffer".to_string()))?;
            self.stream
                .memcpy_dtoh(&view, &mut out)
                .map_err(|e| drv("cannot copy from the device", e))?;
            self.sync()?;
        }
        Ok(out)
    }

    /// Turns the pinned staging of large transfers on or off (on by default unless
    /// `FOX_PINNED_STAGING=0`). Turning it off frees the staging buffer.
    pub fn set_staging(&mut self, on: bool) {
        self.use_staging = on;
        if !on {
            self.staging = None;
        }
    }

    pub fn staging(&self) -> bool {
        self.use_staging
    }

    /// Makes sure the staging buffer is there for a transfer of `bytes` (growing it up to
    /// [`STAGING_MAX`]); false when staging is off or the buffer cannot be allocated,
    /// and then the transfer is a plain copy.
    fn staging_ready(&mut self, bytes: usize) -> bool {
        if !self.use_staging {
            return false;
        }
        let want = bytes.next_power_of_two().clamp(2 * STAGING_MIN, STAGING_MAX);
        if self.staging.as_ref().is_some_and(|s| 2 * s.half >= want) {
            return true;
        }
        // Drop the old buffer first (it waits for its transfers).
        self.staging = None;
        let new = || -> Result<Staging, DriverError> {
            let ev = || self.ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING));
            let done = [ev()?, ev()?];
            // SAFETY: the memory is uninitialised; it is only read after being written.
            // Flags 0 (not write-combined): the host reads it back after downloads.
            let mem = {
                let _lock = crate::nccl::driver_lock();
                unsafe { self.ctx.alloc_pinned_with_flags::<u8>(want, 0) }?
            };
            Ok(Staging {
                mem,
                half: want / 2,
                done,
            })
        };
        match new() {
            Ok(st) => {
                self.staging = Some(st);
                true
            }
            Err(_) => {
                // Page-locked memory is scarce: stay with plain copies from now on.
                self.use_staging = false;
                false
            }
        }
    }

    /// Copies `src` to device address `dst` through the staging buffer, chunk by chunk.
    fn htod_staged(&mut self, dst: u64, src: &[u8]) -> Result<(), BackendError> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| drv("cannot bind the CUDA context", e))?;
        let stream = self.stream.cu_stream();
        let st = self.staging.as_mut().expect("staging_ready made it");
        let half = st.half;
        for (k, chunk) in src.chunks(half).enumerate() {
            let h = k % 2;
            st.done[h]
                .synchronize()
                .map_err(|e| drv("cannot copy to the device", e))?;
            let p = st.half_ptr(h).map_err(|e| drv("cannot copy to the device", e))?;
            // SAFETY: half `h` holds `half >= chunk.len()` bytes, and no transfer uses it
            // now (its last one is done).
            let stage = unsafe { std::slice::from_raw_parts_mut(p, chunk.len()) };
            host_copy(stage, chunk);
            // SAFETY: the destination range lies in the buffer (checked by the caller);
            // the source stays valid and unchanged until `done[h]` completes.
            unsafe { result::memcpy_htod_async(dst + (k * half) as u64, &stage[..], stream) }
                .map_err(|e| drv("cannot copy to the device", e))?;
            st.done[h]
                .record(&self.stream)
                .map_err(|e| drv("cannot copy to the device", e))?;
        }
        Ok(())
    }

    /// Copies device address `src` to `dst` through the staging buffer, chunk by chunk
    /// (waits for the stream).
    fn dtoh_staged(&mut self, dst: &mut [u8], src: u64) -> Result<(), BackendError> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| drv("cannot bind the CUDA context", e))?;
        let stream = self.stream.cu_stream();
        let st = self.staging.as_mut().expect("staging_ready made it");
        let half = st.half;
        let n = dst.len();
        let chunks = n.div_ceil(half);
        let issue = |st: &mut Staging, k: usize| -> Result<(), DriverError> {
            let h = k % 2;
            let len = half.min(n - k * half);
            st.done[h].synchronize()?;
            let p = st.half_ptr(h)?;
            // SAFETY: half `h` holds `len` bytes and no transfer uses it now; the source
            // range lies in the buffer (`n` bytes from `src`).
            let stage = unsafe { std::slice::from_raw_parts_mut(p, len) };
            unsafe { result::memcpy_dtoh_async(stage, src + (k * half) as u64, stream) }?;
            st.done[h].record(&self.stream)
        };
        let fail = |e| drv("cannot copy from the device", e);
        for k in 0..chunks.min(2) {
            issue(st, k).map_err(fail)?;
        }
        for k in 0..chunks {
            let h = k % 2;
            let len = half.min(n - k * half);
            st.done[h].synchronize().map_err(fail)?;
            let p = st.half_ptr(h).map_err(fail)?;
            // SAFETY: the transfer into half `h` is complete.
            let stage = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
            host_copy(&mut dst[k * half..k * half + len], stage);
            if k + 2 < chunks {
                issue(st, k + 2).map_err(fail)?;
            }
        }
        self.sync()
    }

    /// Records a timing event (`CU_EVENT_DEFAULT`) on the stream.
    pub fn record_event(&self) -> Result<CudaEvent, BackendError> {
        self.stream
            .record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| drv("cannot record an event", e))
    }

    /// Holds the stream: work enqueued after this call waits until the returned sender
    /// sends or is dropped (a host function on the stream, which makes no CUDA call;
    /// it lets go by itself after ten minutes). For tests of waits on a device that does
    /// not come.
    pub(crate) fn hold_stream(&self) -> Result<std::sync::mpsc::Sender<()>, BackendError> {
        unsafe extern "C" fn wait_for_release(data: *mut std::ffi::c_void) {
            // SAFETY: `data` is the receiver boxed below, handed to this function alone.
            let rx = unsafe { Box::from_raw(data.cast::<std::sync::mpsc::Receiver<()>>()) };
            let _ = rx.recv_timeout(std::time::Duration::from_secs(600));
        }
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let data = Box::into_raw(Box::new(rx));
        self.ctx
            .bind_to_thread()
            .map_err(|e| drv("cannot bind the CUDA context", e))?;
        // SAFETY: the stream is this device's; the function owns `data` once launched.
        let launched =
            unsafe { sys::cuLaunchHostFunc(self.stream.cu_stream(), Some(wait_for_release), data.cast()).result() };
        if let Err(e) = launched {
            // SAFETY: a failed launch did not hand `data` over.
            drop(unsafe { Box::from_raw(data) });
            return Err(drv("cannot hold the stream (cuLaunchHostFunc)", e));
        }
        Ok(tx)
    }

    /// An event recorded on the stream now, for [`is_complete`] (no timing).
    pub(crate) fn mark(&self) -> Result<CudaEvent, BackendError> {
        self.stream
            .record_event(None)
            .map_err(|e| drv("cannot record an event", e))
    }

    /// Reads element `index` of a U64 buffer (synchronous: waits for the stream).
    pub fn read_u64(&mut self, buf: &DevBuf, index: usize) -> Result<u64, BackendError> {
        let b = self.read_bytes::<8>(buf, Elem::U64, index)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Reads element `index` of a U32 buffer (synchronous: waits for the stream).
    pub fn read_u32(&mut self, buf: &DevBuf, index: usize) -> Result<u32, BackendError> {
        let b = self.read_bytes::<4>(buf, Elem::U32, index)?;
        Ok(u32::from_le_bytes(b))
    }

    fn read_bytes<const N: usize>(&mut self, buf: &DevBuf, elem: Elem, index: usize) -> Result<[u8; N], BackendError> {
        let slot = self.slot(buf)?;
        if buf.elem != elem || index >= buf.len {
            return Err(BackendError(format!(
                "gpu backend: cannot read element {index} of {elem:?} from a buffer of {} x {:?}",
                buf.len, buf.elem
            )));
        }
        let mut host = [0u8; N];
        if let Some(mem) = &slot.mem {
            let view = mem.slice(index * N..(index + 1) * N);
            self.stream
                .memcpy_dtoh(&view, &mut host[..])
                .map_err(|e| drv("cannot read from the device", e))?;
        }
        self.sync()?;
        Ok(host)
    }

    /// Writes element `index` of a U64 buffer.
    pub fn write_u64(&mut self, buf: &DevBuf, index: usize, v: u64) -> Result<(), BackendError> {
        self.slot(buf)?;
        if buf.elem != Elem::U64 || index >= buf.len {
            return Err(BackendError(format!(
                "gpu backend: cannot write element {index} of a buffer of {} x {:?} as u64",
                buf.len, buf.elem
            )));
        }
        let Some(mem) = self.bufs.get_mut(&buf.id).and_then(|s| s.mem.as_mut()) else {
            return Ok(());
        };
        let mut view = mem.slice_mut(index * 8..(index + 1) * 8);
        self.stream
            .memcpy_htod(&v.to_le_bytes()[..], &mut view)
            .map_err(|e| drv("cannot write to the device", e))
    }

    pub fn memset_zero(&mut self, buf: &DevBuf) -> Result<(), BackendError> {
        self.slot(buf)?;
        let Some(mem) = self.bufs.get_mut(&buf.id).and_then(|s| s.mem.as_mut()) else {
            return Ok(());
        };
        self.stream
            .memset_zeros(mem)
            .map_err(|e| drv("cannot clear device memory", e))
    }

    /// Copies `n` elements from `src[src_off..]` to `dst[dst_off..]` (same element type).
    pub fn copy(
        &mut self,
        dst: &DevBuf,
        dst_off: usize,
        src: &DevBuf,
        src_off: usize,
        n: usize,
    ) -> Result<(), BackendError> {
        if dst.elem != src.elem
            || dst_off.checked_add(n).is_none_or(|e| e > dst.len)
            || src_off.checked_add(n).is_none_or(|e| e > src.len)
        {
            return Err(BackendError(format!(
                "gpu backend: bad copy of {n} elements from {}[{src_off}..] ({:?}) to {}[{dst_off}..] ({:?})",
                src.len, src.elem, dst.len, dst.elem
            )));
        }
        if n == 0 {
            return Ok(());
        }
        let size = dst.elem.size() as u64;
        let d = self.ptr(dst)? + dst_off as u64 * size;
        let s = self.ptr(src)? + src_off as u64 * size;
        self.ctx
            .bind_to_thread()
            .map_err(|e| drv("cannot bind the CUDA context", e))?;
        // SAFETY: both ranges were checked against their buffers' lengths.
        unsafe { result::memcpy_dtod_async(d, s, n * dst.elem.size(), self.stream.cu_stream()) }
            .map_err(|e| drv("cannot copy on the device", e))
    }

    /// Waits for all launched work and reports an asynchronous device fault.
    pub fn sync(&mut self) -> Result<(), BackendError> {
        self.stream.synchronize().map_err(|e| drv("device failure", e))?;
        self.ctx.check_err().map_err(|e| drv("device failure", e))?;
        self.read_checks()
    }

    /// Sets the instruction later launches belong to, for their deferred checks; `None`
    /// reads every later check at once and drops the unread ones (the run that launched
    /// them has ended: read by its last wait, or failed).
    pub fn set_check_site(&mut self, site: Option<(usize, usize)>) -> Result<(), BackendError> {
        self.checks.site = site;
        if site.is_none() {
            let n = self.checks.pending.len();
            self.checks.pending.clear();
            self.clear_slots(n)?;
        }
        Ok(())
    }

    /// The kernel launched next (its name, for the messages of its deferred checks).
    pub fn set_check_kernel(&mut self, kernel: &'static str) {
        self.checks.kernel = kernel;
    }

    /// The instruction and message of the deferred check that failed, once.
    pub fn take_failed_check(&mut self) -> Option<((usize, usize), String)> {
        self.checks.failed.take()
    }

    /// The device address of the error word the next checking launch writes, reset: a
    /// slot of its own when checks are deferred, otherwise the error word. Each call is
    /// followed by that launch and one [`Gpu::finish_check`].
    pub fn check_word(&mut self) -> Result<u64, BackendError> {
        let Some(site) = self.checks.site else {
            self.reset_err()?;
            return Ok(self.err_ptr());
        };
        if self.checks.pending.len() == CHECK_SLOTS {
            self.sync()?;
        }
        let k = self.checks.pending.len();
        self.checks.pending.push(Pending {
            site,
            kernel: self.checks.kernel,
            decode: None,
        });
        let (p, _sync) = self.checks.slots.device_ptr(&self.stream);
        Ok(p + (k * 32) as u64)
    }

    /// Reads the error word of the launch after [`Gpu::check_word`] through `decode`: now,
    /// or with checks deferred at the next wait.
    pub fn finish_check(
        &mut self,
        decode: impl FnOnce(&mut Gpu, [u64; 4]) -> Result<(), BackendError> + Send + 'static,
    ) -> Result<(), BackendError> {
        match (self.checks.site, self.checks.pending.last_mut()) {
            (Some(_), Some(p)) if p.decode.is_none() => {
                p.decode = Some(Box::new(decode));
                Ok(())
            }
            _ => {
                let words = self.read_err()?;
                decode(self, words)
            }
        }
    }

    /// [`Gpu::check_err`] of the word [`Gpu::check_word`] gave the launch just made: now,
    /// or with checks deferred at the next wait.
    pub fn finish_check_err(&mut self, kernel: &'static str) -> Result<(), BackendError> {
        self.finish_check(move |_, words| word_error(kernel, words))
    }

    /// Reads the pending checks' words (the stream is idle) and decodes them in launch
    /// order: the first failure is the error, its instruction kept for the runtime.
    fn read_checks(&mut self) -> Result<(), BackendError> {
        if self.checks.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.checks.pending);
        let n = pending.len();
        let mut words = vec![0u64; 4 * n];
        let view = self.checks.slots.slice(0..4 * n);
        self.stream
            .memcpy_dtoh(&view, &mut words[..])
            .map_err(|e| drv("cannot read the error words of deferred checks", e))?;
        self.stream.synchronize().map_err(|e| drv("device failure", e))?;
        self.clear_slots(n)?;
        for (k, p) in pending.into_iter().enumerate() {
            let Some(decode) = p.decode else { continue };
            let w = [words[4 * k], words[4 * k + 1], words[4 * k + 2], words[4 * k + 3]];
            if let Err(e) = decode(self, w) {
                let msg = if e.0.starts_with("kernel ") {
                    e.0
                } else {
                    format!("kernel {}: {}", p.kernel, e.0)
                };
                self.checks.failed = Some((p.site, msg.clone()));
                return Err(BackendError(msg));
            }
        }
        Ok(())
    }

    /// Resets the first `n` slots for their next launches (ordered before them on the
    /// stream).
    fn clear_slots(&mut self, n: usize) -> Result<(), BackendError> {
        if n == 0 {
            return Ok(());
        }
        let mut view = self.checks.slots.slice_mut(0..4 * n);
        self.stream
            .memcpy_htod(&self.checks.fresh[..4 * n], &mut view)
            .map_err(|e| drv("cannot clear the error words of deferred checks", e))
    }

    /// The device pointer of the error word (`u64 x 4`).
    pub fn err_ptr(&self) -> u64 {
        let (p, _sync) = self.err.device_ptr(&self.stream);
        p
    }

    /// Sets the error word to "no error": code 0, row `u64::MAX`, details 0.
    pub fn reset_err(&mut self) -> Result<(), BackendError> {
        let words = [0u64, u64::MAX, 0, 0];
        self.stream
            .memcpy_htod(&words[..], &mut self.err)
            .map_err(|e| drv("cannot reset the error word", e))
    }

    /// Reads the error word (synchronous): code, row, detail, detail.
    pub fn read_err(&mut self) -> Result<[u64; 4], BackendError> {
        let mut words = [0u64; 4];
        self.stream
            .memcpy_dtoh(&self.err, &mut words[..])
            .map_err(|e| drv("cannot read the error word", e))?;
        self.sync()?;
        Ok(words)
    }

    /// Reads the error word and turns a set code into an error naming `kernel`.
    pub fn check_err(&mut self, kernel: &str) -> Result<(), BackendError> {
        let words = self.read_err()?;
        word_error(kernel, words)
    }

    fn function(&mut self, key: &str, what: &str, source: &str, kernel: &str) -> Result<CudaFunction, BackendError> {
        if let Some(f) = self.functions.get(&(key.to_string(), kernel.to_string())) {
            return Ok(f.clone());
        }
        let module = match self.modules.get(key) {
            Some(m) => m.clone(),
            None => {
                let m = match self.pending.remove(key) {
                    Some(handle) => {
                        let t0 = std::time::Instant::now();
                        let done = handle
                            .join()
                            .unwrap_or_else(|_| Err(BackendError(format!("compiling {what} failed"))));
                        let waited = t0.elapsed();
                        match done {
                            Ok((m, stats)) => {
                                self.compiler.absorb(stats, waited);
                                m
                            }
                            // Compiled again here, so that the error is this run's own.
                            Err(_) => compile_and_load(&self.ctx, &mut self.compiler, what, source)?,
                        }
                    }
                    None => compile_and_load(&self.ctx, &mut self.compiler, what, source)?,
                };
                self.modules.insert(key.to_string(), m.clone());
                m
            }
        };
        if kernel.contains('\0') {
            return Err(BackendError(format!("bad kernel name {kernel:?}")));
        }
        let f = module
            .load_function(kernel)
            .map_err(|e| drv(&format!("no kernel {kernel} in {what}"), e))?;
        self.functions.insert((key.to_string(), kernel.to_string()), f.clone());
        Ok(f)
    }

    /// Launches `kernel` of `kernels/<module>.cu` (compiled once per process). A grid of
    /// 0 launches nothing.
    pub fn launch(
        &mut self,
        module: &'static str,
        kernel: &str,
        grid: u32,
        block: u32,
        smem: u32,
        args: &[KArg],
    ) -> Result<(), BackendError> {
        if grid == 0 {
            return Ok(());
        }
        let f = self.module_function(module, kernel)?;
        self.launch_function(&f, kernel, grid, block, smem, args)
    }

    /// `kernel` of `kernels/<module>.cu`, compiled and loaded on first use.
    fn module_function(&mut self, module: &'static str, kernel: &str) -> Result<CudaFunction, BackendError> {
        let source = module_source(module).ok_or_else(|| BackendError(format!("no kernel module {module}")))?;
        self.function(module, &format!("kernels/{module}.cu"), source, kernel)
    }

    /// Asks that `kernel` of `kernels/<module>.cu` run with the largest shared-memory
    /// carveout of each SM (the rest is L1 cache): for kernels whose blocks hold large
    /// static tables, so that more of them fit an SM. The attribute is set once per
    /// kernel and process.
    pub fn prefer_shared(&mut self, module: &'static str, kernel: &str) -> Result<(), BackendError> {
        let key = (module.to_string(), kernel.to_string());
        if self.carveout_set.contains(&key) {
            return Ok(());
        }
        let f = self.module_function(module, kernel)?;
        f.set_attribute(
            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
            100,
        )
        .map_err(|e| drv(&format!("kernel {kernel}: cannot set the shared memory carveout"), e))?;
        self.carveout_set.insert(key);
        Ok(())
    }

    /// Launches `kernel` of a generated source (compiled once per process per source).
    pub fn launch_generated(
        &mut self,
        source: &str,
        kernel: &str,
        grid: u32,
        block: u32,
        smem: u32,
        args: &[KArg],
    ) -> Result<(), BackendError> {
        if grid == 0 {
            return Ok(());
        }
        let key = format!("gen:{:032x}", crate::compile::fnv1a128(&[source.as_bytes()]));
        let f = self.function(&key, &format!("generated kernel {kernel}"), source, kernel)?;
        self.launch_function(&f, kernel, grid, block, smem, args)
    }

    fn launch_function(
        &mut self,
        f: &CudaFunction,
        kernel: &str,
        grid: u32,
        block: u32,
        smem: u32,
        args: &[KArg],
    ) -> Result<(), BackendError> {
        if smem > 48 * 1024 {
            if smem > self.max_smem_optin {
                return Err(BackendError(format!(
                    "kernel {kernel}: {smem} bytes of shared memory requested, the device allows {}",
                    self.max_smem_optin
                )));
            }
            f.set_attribute(
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                smem as i32,
            )
            .map_err(|e| drv(&format!("kernel {kernel}: cannot raise the shared memory limit"), e))?;
        }
        let mut b = self.stream.launch_builder(f);
        for a in args {
            match a {
                KArg::Ptr(v) | KArg::U64(v) => b.arg(v),
                KArg::U32(v) => b.arg(v),
                KArg::I32(v) => b.arg(v),
                KArg::I64(v) => b.arg(v),
                KArg::F64(v) => b.arg(v),
            };
        }
        let cfg = LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (block, 1, 1),
            shared_mem_bytes: smem,
        };
        // SAFETY: the launchers pass the arguments the kernel declares, with pointers to
        // live buffers whose lengths they checked.
        unsafe { b.launch(cfg) }.map(|_| ()).map_err(|e| {
            drv(
                &format!("cannot launch kernel {kernel} ({grid} x {block}, {smem} B shared)"),
                e,
            )
        })
    }
}

/// Whether the work recorded in `event` is done, without waiting; `Err` when the device
/// failed (an error of its context, such as an illegal address in an earlier kernel).
/// Polls `event`, recorded on device `rank`'s stream, until its work is done, without
/// blocking in the driver: an error when the device failed, or when the work is not done
/// within `stall` (the stall limit).
fn wait_for_stream(event: &CudaEvent, rank: usize, stall: std::time::Duration) -> Result<(), BackendError> {
    let started = std::time::Instant::now();
    let mut polls = 0u32;
    loop {
        if is_complete(event).map_err(|e| BackendError(format!("device {rank} failed before the exchange: {e}")))? {
            return Ok(());
        }
        if started.elapsed() >= stall {
            return Err(BackendError(format!(
                "the exchange between the devices did not start: device {rank} had not finished its work before \
                 it; its stream made no progress for {} (the stall limit; {} sets it)",
                fox_runtime::seconds(stall),
                fox_runtime::STALL_LIMIT_VAR
            )));
        }
        crate::nccl::back_off(&mut polls);
    }
}

pub(crate) fn is_complete(event: &CudaEvent) -> Result<bool, String> {
    event.try_is_complete().map_err(|e| format!("device failure: {e:?}"))
}
