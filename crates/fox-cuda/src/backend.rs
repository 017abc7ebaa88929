//! [`CudaBackend`]: the `Backend` of the runtime on an NVIDIA GPU. Each kernel of the IR
//! goes to its launcher (`k_*.rs`), which checks its arguments as the CPU backend does,
//! allocates its outputs and launches the kernels of `kernels/*.cu`.

use crate::compile::CompileStats;
use crate::device::Gpu;
use crate::{k_eval, k_fused, k_ineq, k_join, k_move, k_reduce, k_scan, k_sort, k_trie};
use fox_kernel::Kernel;
use fox_runtime::{Backend, BackendError, DevBuf, HostCol, LaunchCtx, MemStats};
use std::time::Duration;

/// The number of CUDA devices the process sees (`CUDA_VISIBLE_DEVICES` applies); an error
/// saying what is missing when there is no driver or no NVRTC.
pub fn device_count() -> Result<usize, BackendError> {
    Gpu::count()
}

/// Links the GPUs of `backends` (in rank order; each on a different device) as the
/// devices of one run: exchanges then move rows device to device through NCCL. A
/// machine without NCCL gets [`crate::nccl::NCCL_MISSING`]. Nothing here waits without
/// end: the set-up and the first transfers are under the stall limit
/// ([`fox_runtime::stall_limit`], `FOX_STALL_TIMEOUT_S`), and a device that fails or
/// stalls is an error naming it.
pub fn link_devices(backends: &mut [CudaBackend]) -> Result<(), BackendError> {
    let limit = fox_runtime::stall_limit().map_err(BackendError)?;
    let ordinals: Vec<usize> = backends.iter().map(|b| b.gpu.ordinal()).collect();
    let ranks = crate::nccl::link(&ordinals, limit).map_err(BackendError)?;
    for (b, r) in backends.iter_mut().zip(ranks) {
        b.peer = Some(r);
        b.stall = limit;
    }
    // NCCL connects two devices at their first transfer (buffers, proxy threads): one
    // byte each way between every pair here makes that part of opening the devices
    // rather than of a run's first exchanges.
    let n = backends.len();
    let mut bufs = Vec::with_capacity(n);
    let mut plans = Vec::with_capacity(n);
    let mut reached = Vec::with_capacity(n);
    let mut res = Ok(());
    for (d, b) in backends.iter_mut().enumerate() {
        match b
            .gpu
            .pairwise_plan(d, n)
            .and_then(|(buf, plan)| Ok((buf, plan, b.gpu.mark()?)))
        {
            Ok((buf, plan, mark)) => {
                bufs.push(buf);
                plans.push(plan);
                reached.push(mark);
            }
            Err(e) => {
                res = Err(e);
                break;
            }
        }
    }
    if res.is_ok() {
        let connect = |e: String| BackendError(format!("cannot connect the devices through NCCL: {e}"));
        if let Some(first) = backends.first().and_then(|b| b.peer.as_ref()) {
            res = first.launch_all(&plans).map_err(connect);
        }
        if res.is_ok() {
            let passed = backends.iter().map(|b| b.gpu.mark()).collect::<Result<Vec<_>, _>>();
            res = passed.and_then(|passed| {
                let mut parts: Vec<crate::nccl::Part<'_>> = reached
                    .iter()
                    .zip(&passed)
                    .enumerate()
                    .map(|(rank, (r, p))| crate::nccl::Part {
                        rank,
                        reached: Box::new(move || crate::device::is_complete(r)),
                        passed: Box::new(move || crate::device::is_complete(p)),
                    })
                    .collect();
                let first = backends[0].peer.as_ref().expect("linked above");
                first.wait_group(&mut parts, limit).map_err(|e| match e {
                    crate::nccl::GroupError::Found(m) | crate::nccl::GroupError::Shut(m) => connect(m),
                })
            });
        }
    }
    for (b, buf) in backends.iter_mut().zip(bufs) {
        // After a failure the link is shut: its kernels have returned.
        let synced = if res.is_ok() { b.gpu.sync() } else { Ok(()) };
        b.gpu.free(buf);
        res = res.and(synced);
    }
    res
}

/// The GPU backend: buffers in device memory, kernels compiled with NVRTC.
pub struct CudaBackend {
    gpu: Gpu,
    /// The NCCL link to the other devices of a run over several.
    peer: Option<crate::nccl::Rank>,
    /// How long an exchange waits for the devices' transfers while none makes progress
    /// (the run's stall limit, `Backend::set_stall_limit`).
    stall: Duration,
}

impl CudaBackend {
    /// Opens GPU 0. Fails, with a message saying what is missing, when there is no driver,
    /// no NVRTC or no device.
    pub fn new() -> Result<CudaBackend, BackendError> {
        CudaBackend::on(0)
    }

    /// Opens the GPU of ordinal `ordinal` among the visible devices (see [`device_count`]),
    /// for one device of a run over several.
    pub fn on(ordinal: usize) -> Result<CudaBackend, BackendError> {
        let mut gpu = Gpu::on(ordinal)?;
        // The kernel modules compile while the caller reads its inputs and plans.
        gpu.prefetch_modules();
        Ok(CudaBackend {
            gpu,
            peer: None,
            stall: fox_runtime::DEFAULT_STALL_LIMIT,
        })
    }

    /// See `Gpu::hold_stream` (for [`crate::testing::hold_stream`]).
    pub(crate) fn hold_stream(&self) -> Result<std::sync::mpsc::Sender<()>, BackendError> {
        self.gpu.hold_stream()
    }

    /// Time spent compiling kernels (or reading their PTX from the disk cache), and how
    /// many came from where.
    pub fn compile_stats(&self) -> CompileStats {
        self.gpu.compile_stats()
    }

    /// The device's name (`NVIDIA H100 80GB HBM3`).
    pub fn device_name(&self) -> &str {
        self.gpu.device_name()
    }

    /// Runs `f` between two CUDA events (`CU_EVENT_DEFAULT`) recorded on the backend's
    /// stream and returns its result with the device time between them in milliseconds
    /// (waits for the second event). Work `f` enqueues before it returns is timed; a
    /// launcher that synchronises inside (to read a count) is timed with that gap.
    pub fn timed<R>(
        &mut self,
        f: impl FnOnce(&mut CudaBackend) -> Result<R, BackendError>,
    ) -> Result<(R, f64), BackendError> {
        let start = self.gpu.record_event()?;
        let r = f(self)?;
        let end = self.gpu.record_event()?;
        let ms = start
            .elapsed_ms(&end)
            .map_err(|e| BackendError(format!("cannot read the time between two events: {e:?}")))?;
        self.gpu.sync()?;
        Ok((r, f64::from(ms)))
    }

    /// Launches `kernel` as [`Backend::launch`] does, timed with CUDA events: its outputs
    /// and the device time in milliseconds.
    pub fn time_launch(
        &mut self,
        kernel: &Kernel,
        args: &[&DevBuf],
        ctx: &dyn LaunchCtx,
    ) -> Result<(Vec<DevBuf>, f64), BackendError> {
        self.timed(|b| b.launch(kernel, args, ctx))
    }

    /// Copies all of `src` to `dst` on the device (same element type and length), as
    /// one `cuMemcpyDtoDAsync`: the copy-bandwidth ceiling of the benchmarks.
    pub fn copy_buffer(&mut self, dst: &DevBuf, src: &DevBuf) -> Result<(), BackendError> {
        if dst.len != src.len {
            return Err(BackendError(format!(
                "copy of {} elements into a buffer of {}",
                src.len, dst.len
            )));
        }
        self.gpu.copy(dst, 0, src, 0, src.len)
    }

    /// Turns the page-locked staging of large uploads and downloads on or off (on by
    /// default unless `FOX_PINNED_STAGING=0`; off for good once it cannot be allocated).
    pub fn set_pinned_staging(&mut self, on: bool) {
        self.gpu.set_staging(on);
    }

    /// Whether large transfers go through the page-locked staging buffer.
    pub fn pinned_staging(&self) -> bool {
        self.gpu.staging()
    }

    /// How many `FusedReduce` launches the one-pass kernel settled (the others ran as
    /// the kernels the fusion stands for).
    pub fn fused_one_pass_runs(&self) -> u64 {
        self.gpu.fused_one_pass
    }

    /// Sets how many keys an insertion into a cuckoo table of `IntersectCount` may evict
    /// before the block gives up its table and searches the range instead (default 64).
    /// With 0 every collision does so: the tests use it to reach that path.
    pub fn set_table_kicks(&mut self, kicks: u32) {
        self.gpu.table_kicks = kicks;
    }

    /// Sets the packed bytes an upload of a packed database column moves and widens at a
    /// time (default [`WIDEN_PIECE_BYTES`](crate::WIDEN_PIECE_BYTES), at least
    /// 4). The columns never depend on it: the tests use a few bytes to reach the
    /// uploads in pieces on small columns.
    pub fn set_widen_piece_bytes(&mut self, bytes: usize) {
        self.gpu.widen_piece_bytes = bytes.max(4);
    }

    /// The host bytes page-locked now for copies to the device ([`Backend::pin_host`]).
    pub fn pinned_host_bytes(&self) -> usize {
        self.gpu.pinned_bytes()
    }

    /// Sets the table size in bytes beyond which `HashBuild` builds the radix-partitioned
    /// table (default [`HASH_PARTITION_BYTES`](crate::HASH_PARTITION_BYTES)) and the
    /// shared memory in bytes a probe gives one partition's sub-table (default
    /// [`HASH_SUB_TABLE_BYTES`](crate::HASH_SUB_TABLE_BYTES), at most 48 KiB). The
    /// results never depend on them: the tests use a threshold of 0 and small sub-tables
    /// to reach the partitioned build and probe, with many partitions, on small inputs.
    pub fn set_hash_partitioning(&mut self, threshold_bytes: usize, sub_table_bytes: u32) {
        self.gpu.hash_partitioning = crate::k_join::HashPartitioning {
            threshold_bytes,
            sub_table_bytes: sub_table_bytes.min(crate::k_join::HASH_SUB_TABLE_MAX),
        };
    }

    /// The number of streaming multiprocessors.
    pub fn sm_count(&self) -> u32 {
        self.gpu.sm_count()
    }
}

impl Backend for CudaBackend {
    fn route_rows(
        &mut self,
        cols: &[&DevBuf],
        keys: &[usize],
        devices: usize,
    ) -> Result<Option<Vec<Vec<DevBuf>>>, BackendError> {
        k_move::route_rows(&mut self.gpu, cols, keys, devices).map(Some)
    }

    fn has_peer_link(&self) -> bool {
        self.peer.is_some()
    }

    fn peer_exchange(
        &mut self,
        send: &[Vec<&DevBuf>],
        recv_rows: &[usize],
        elems: &[fox_kernel::Elem],
        meet: &mut fox_runtime::Meet<'_>,
    ) -> Result<Vec<DevBuf>, BackendError> {
        let Some(peer) = &self.peer else {
            return Err(BackendError(format!("{} has no link to other devices", self.name())));
        };
        self.gpu.peer_exchange(peer, send, recv_rows, elems, meet, self.stall)
    }

    fn name(&self) -> String {
        let (major, minor) = self.gpu.compute_capability();
        format!("gpu ({}, sm_{major}{minor})", self.gpu.device_name())
    }

    fn upload(&mut self, col: HostCol) -> Result<DevBuf, BackendError> {
        self.gpu.upload(&col)
    }

    fn upload_rows(&mut self, col: &HostCol, rows: std::ops::Range<usize>) -> Result<DevBuf, BackendError> {
        self.gpu.upload_rows(col, rows)
    }

    fn upload_flags(&mut self, len: usize, ones: &[u32]) -> Result<DevBuf, BackendError> {
        crate::k_move::upload_flags(&mut self.gpu, len, ones)
    }

    fn upload_stored(
        &mut self,
        col: &fox_runtime::stored::StoredCol,
        rows: std::ops::Range<usize>,
    ) -> Result<DevBuf, BackendError> {
        crate::k_move::upload_stored(&mut self.gpu, col, rows)
    }

    fn stored_upload_room(&self, col: &fox_runtime::stored::StoredCol, n: usize) -> usize {
        crate::k_move::stored_upload_room(col, n, self.gpu.widen_piece_bytes)
    }

    unsafe fn pin_host(&mut self, owner: &std::sync::Arc<dyn std::any::Any + Send + Sync>, bytes: &[u8]) -> bool {
        // SAFETY: the caller's contract is the device's.
        unsafe { self.gpu.pin_host(owner, bytes) }
    }

    fn upload_packed(
        &mut self,
        col: &fox_runtime::stored::StoredCol,
        rows: std::ops::Range<usize>,
    ) -> Result<Option<DevBuf>, BackendError> {
        crate::k_move::upload_packed(&mut self.gpu, col, rows)
    }

    fn widen_packed(
        &mut self,
        packed: &DevBuf,
        col: &fox_runtime::stored::StoredCol,
        kept: std::ops::Range<usize>,
        rows: std::ops::Range<usize>,
    ) -> Result<DevBuf, BackendError> {
        crate::k_move::widen_packed(&mut self.gpu, packed, col, kept, rows)
    }

    fn download(&mut self, buf: &DevBuf) -> Result<HostCol, BackendError> {
        self.gpu.download(buf)
    }

    fn launch(&mut self, kernel: &Kernel, args: &[&DevBuf], ctx: &dyn LaunchCtx) -> Result<Vec<DevBuf>, BackendError> {
        if fox_kernel::expand(kernel, args.len()).is_some() {
            return fox_runtime::launch_kernel(self, kernel, args, ctx);
        }
        let name = kernel.name();
        for a in args {
            self.gpu
                .ptr(a)
                .map_err(|e| BackendError(format!("kernel {name}: {e}")))?;
        }
        let gpu = &mut self.gpu;
        gpu.set_check_kernel(name);
        let res = dispatch(gpu, kernel, args, ctx);
        res.map_err(|e| {
            if e.0.starts_with("kernel ") {
                e
            } else {
                BackendError(format!("kernel {name}: {e}"))
            }
        })
    }

    /// `FusedReduce` in one pass where it can (see `k_fused`); declined otherwise.
    fn launch_composite(
        &mut self,
        kernel: &Kernel,
        args: &[&DevBuf],
        ctx: &dyn LaunchCtx,
    ) -> Result<Option<Vec<DevBuf>>, BackendError> {
        let Kernel::FusedReduce {
            filter,
            nkeys,
            aggs,
            exprs,
            n_cols,
        } = kernel
        else {
            return Ok(None);
        };
        let name = kernel.name();
        for a in args {
            self.gpu
                .ptr(a)
                .map_err(|e| BackendError(format!("kernel {name}: {e}")))?;
        }
        self.gpu.set_check_kernel(name);
        k_fused::fused_reduce(&mut self.gpu, filter.as_ref(), *nkeys, aggs, exprs, *n_cols, args, ctx).map_err(|e| {
            if e.0.starts_with("kernel ") {
                e
            } else {
                BackendError(format!("kernel {name}: {e}"))
            }
        })
    }

    fn free(&mut self, buf: DevBuf) {
        self.gpu.free(buf);
    }

    fn sync(&mut self) -> Result<(), BackendError> {
        self.gpu.sync()
    }

    fn set_check_site(&mut self, site: Option<(usize, usize)>) -> Result<(), BackendError> {
        self.gpu.set_check_site(site)
    }

    fn take_failed_check(&mut self) -> Option<((usize, usize), String)> {
        self.gpu.take_failed_check()
    }

    fn mem(&self) -> MemStats {
        self.gpu.mem()
    }

    fn memory_capacity(&self) -> Option<usize> {
        Some(self.gpu.capacity())
    }

    /// Kept by every device allocation (`Gpu::alloc`): one that would take the buffers in
    /// use beyond the limit is refused with the out-of-memory error, and the runtime moves
    /// buffers to its host tier to make room.
    fn set_stall_limit(&mut self, limit: Duration) {
        self.stall = limit;
    }

    fn set_memory_limit(&mut self, limit: Option<u64>) {
        self.gpu.set_limit(limit);
    }

    fn reset_peak(&mut self) {
        self.gpu.reset_peak();
    }

    fn launch_timed(
        &mut self,
        kernel: &Kernel,
        args: &[&DevBuf],
        ctx: &dyn LaunchCtx,
    ) -> Result<(Vec<DevBuf>, Option<Duration>), BackendError> {
        let (outs, ms) = self.time_launch(kernel, args, ctx)?;
        Ok((outs, Some(Duration::from_secs_f64(ms.max(0.0) / 1000.0))))
    }

    fn compile_time(&self) -> Duration {
        self.gpu.compile_stats().total
    }
}

fn dispatch(
    gpu: &mut Gpu,
    kernel: &Kernel,
    args: &[&DevBuf],
    ctx: &dyn LaunchCtx,
) -> Result<Vec<DevBuf>, BackendError> {
    match kernel {
        Kernel::LoadInput { .. }
        | Kernel::Const { .. }
        | Kernel::DictTable { .. }
        | Kernel::StrFn { .. }
        | Kernel::Window { .. }
        | Kernel::Claim { .. }
        | Kernel::Outgrows { .. }
        | Kernel::Exchange { .. } => Err(BackendError(
            "runs on the host in the runtime and cannot be launched on a backend".to_string(),
        )),
        Kernel::Gather { shift } => k_move::gather_kernel(gpu, *shift, args),
        Kernel::Concat { parts, width } => k_move::concat(gpu, *parts, *width, args),
        Kernel::Slice { start, len } => k_move::slice(gpu, *start, *len, args),
        Kernel::RootRange => k_move::root_range(gpu, args),
        Kernel::RangeCount => k_move::range_count(gpu, args),
        Kernel::Eval { expr, n_cols } => k_eval::eval(gpu, expr, *n_cols, args, ctx),
        Kernel::Compact => k_scan::compact_kernel(gpu, args),
        Kernel::ExclusiveScan => k_scan::exclusive_scan(gpu, args),
        Kernel::SortPerm { desc, by_rank } => k_sort::sort_perm_kernel(gpu, desc, by_rank, args),
        Kernel::AdjacentDistinct => k_sort::adjacent_distinct(gpu, args),
        Kernel::RepeatedKey { nkeys } => k_sort::repeated_key(gpu, *nkeys, args),
        Kernel::JoinCount { nkeys } => k_join::join_count(gpu, *nkeys, args),
        Kernel::JoinWrite { nkeys } => k_join::join_write(gpu, *nkeys, args),
        Kernel::MatchFlags { nkeys, anti } => k_join::match_flags(gpu, *nkeys, *anti, args),
        Kernel::MergeUnion { width, disjoint } => k_join::merge_union(gpu, *width, *disjoint, args),
        Kernel::ReduceByKey { nkeys, aggs } => k_reduce::reduce_by_key(gpu, *nkeys, aggs, args),
        // A composite kernel: `launch` runs it through `fox_runtime::launch_kernel`.
        Kernel::FusedReduce { .. } => Err(BackendError("is a composite kernel".to_string())),
        Kernel::TrieBuild { arity } => k_trie::trie_build(gpu, *arity, args),
        Kernel::Expand => k_trie::expand(gpu, args),
        Kernel::SortedSearch => k_trie::sorted_search(gpu, args),
        Kernel::IntersectCount { ways } => k_trie::intersect_count(gpu, *ways, args),
        Kernel::MinRange { ways } => k_trie::min_range(gpu, *ways, args),
        Kernel::BoundRange { nkeys, lower, upper } => k_join::bound_range(gpu, *nkeys, *lower, *upper, args),
        Kernel::HashBuild { .. } => k_join::hash_build(gpu, args),
        Kernel::HashProbe { nkeys } => k_join::hash_probe(gpu, *nkeys, None, args),
        Kernel::HashMatch { nkeys, anti } => k_join::hash_probe(gpu, *nkeys, Some(*anti), args),
        Kernel::NestedLoopCount { nkeys } => k_join::nested_loop_count(gpu, *nkeys, None, args),
        Kernel::NestedLoopWrite { nkeys } => k_join::nested_loop_write(gpu, *nkeys, args),
        Kernel::NestedLoopMatch { nkeys, anti } => k_join::nested_loop_count(gpu, *nkeys, Some(*anti), args),
        Kernel::IneqTree => k_ineq::ineq_tree(gpu, args),
        Kernel::IneqRanges { lower, upper } => k_ineq::ineq_ranges(gpu, *lower, *upper, args),
    }
}
