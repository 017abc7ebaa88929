//! Every kernel of the kernel IR, in Rust with rayon, with the same contracts as the
//! GPU kernels (see `fox_kernel::Kernel`).
//!
//! [`CpuBackend`] keeps its buffers in host memory and accounts for them like a device
//! would (bytes in use, high-water mark, total allocated). [`run_kernel`] is the kernel
//! dispatcher on plain host columns; the backend calls it for every launch.

mod date;
mod expr;
mod fused;
mod hash;
mod ineq;
mod join;
mod keys;
pub mod lftj;
mod movement;
mod nested;
mod reduce;
mod sort;
mod trie;
mod util;

pub use date::{civil_from_days, days_from_civil};

use fox_kernel::Kernel;
use fox_runtime::{Backend, BackendError, DevBuf, HostCol, LaunchCtx, MemStats};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// The CPU backend: buffers in host memory, kernels run with rayon.
#[derive(Debug, Default)]
pub struct CpuBackend {
    bufs: HashMap<u64, HostCol>,
    next_id: u64,
    mem: MemStats,
    /// The run's memory limit ([`Backend::set_memory_limit`]).
    limit: Option<u64>,
    /// The link to the other simulated devices of a run, and this device's rank in it.
    link: Option<(Arc<CpuLink>, usize)>,
}

/// The mailboxes of CPU backends linked as the simulated devices of one run:
/// `boxes[from][to]` holds the parts `from` sent `to` and `to` has not taken yet, oldest
/// first.
#[derive(Debug)]
pub struct CpuLink {
    boxes: Vec<Vec<Mutex<VecDeque<Vec<HostCol>>>>>,
}

impl CpuBackend {
    pub fn new() -> CpuBackend {
        CpuBackend::default()
    }

    /// `devices` CPU backends linked as the simulated devices of one run: an exchange
    /// routes rows on each backend ([`Backend::route_rows`]) and moves them from backend
    /// to backend ([`Backend::peer_exchange`]), the path GPUs take with their own link,
    /// instead of staging them through the runtime.
    pub fn linked(devices: usize) -> Vec<CpuBackend> {
        let link = Arc::new(CpuLink {
            boxes: (0..devices)
                .map(|_| (0..devices).map(|_| Mutex::new(VecDeque::new())).collect())
                .collect(),
        });
        (0..devices)
            .map(|rank| CpuBackend {
                link: Some((link.clone(), rank)),
                ..CpuBackend::default()
            })
            .collect()
    }

    /// `bytes` more within the memory limit, or the out-of-memory error naming `what`.
    fn admit(&self, bytes: u128, what: &str) -> Result<(), BackendError> {
        match self.launch_budget() {
            Some(left) if bytes > u128::from(left) => Err(BackendError(fox_runtime::alloc::rows_out_of_memory(
                bytes,
                1,
                what,
                Some(&fox_runtime::alloc::limit_refusal(u128::from(left))),
            ))),
            _ => Ok(()),
        }
    }

    fn register(&mut self, col: HostCol) -> DevBuf {
        let id = self.next_id;
        self.next_id += 1;
        let buf = DevBuf {
            id,
            elem: col.elem(),
            len: col.len(),
        };
        let bytes = buf.bytes();
        self.mem.in_use += bytes;
        self.mem.total_allocated += bytes;
        self.mem.peak = self.mem.peak.max(self.mem.in_use);
        self.bufs.insert(id, col);
        buf
    }

    /// What a launch may allocate: what the memory limit leaves beside the buffers in
    /// use; no bound without a limit. The buffers in use never exceed the limit (the
    /// outputs of a launch are within what it was admitted, and uploads are refused
    /// beyond it), so neither does the high-water mark.
    fn launch_budget(&self) -> Option<u64> {
        self.limit.map(|l| l.saturating_sub(self.mem.in_use as u64))
    }

    /// The outputs of a launch of `kernel`, refused (dropped, with the out-of-memory
    /// error) when together they would take the buffers in use beyond the memory limit:
    /// kernels admit their large allocations as they make them, and this bounds the small
    /// ones made without admission too.
    fn admit_outputs(&self, kernel: &Kernel, outs: Vec<HostCol>) -> Result<Vec<HostCol>, BackendError> {
        let Some(left) = self.launch_budget() else {
            return Ok(outs);
        };
        let bytes: u128 = outs.iter().map(|c| (c.len() * c.elem().size()) as u128).sum();
        if bytes <= u128::from(left) {
            return Ok(outs);
        }
        Err(BackendError(format!(
            "kernel {}: {}",
            kernel.name(),
            fox_runtime::alloc::rows_out_of_memory(
                bytes,
                1,
                "its outputs",
                Some(&fox_runtime::alloc::limit_refusal(u128::from(left)))
            )
        )))
    }

    fn get(&self, buf: &DevBuf) -> Result<&HostCol, BackendError> {
        let col = self
            .bufs
            .get(&buf.id)
            .ok_or_else(|| BackendError(format!("cpu backend: buffer {} is not allocated", buf.id)))?;
        if col.elem() != buf.elem || col.len() != buf.len {
            return Err(BackendError(format!(
                "cpu backend: buffer {} is {} x {}, but the handle says {} x {}",
                buf.id,
                col.len(),
                col.elem().name(),
                buf.len,
                buf.elem.name()
            )));
        }
        Ok(col)
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> String {
        "cpu".to_string()
    }

    /// Refused, with the out-of-memory error, when the column would take the buffers in
    /// use beyond the memory limit.
    fn upload(&mut self, col: HostCol) -> Result<DevBuf, BackendError> {
        let bytes = col.len() * col.elem().size();
        if let Some(left) = self.launch_budget() {
            if bytes as u64 > left {
                return Err(BackendError(fox_runtime::alloc::rows_out_of_memory(
                    col.len() as u128,
                    col.elem().size(),
                    "an uploaded column",
                    Some(&fox_runtime::alloc::limit_refusal(u128::from(left))),
                )));
            }
        }
        self.mem.bytes_in += bytes as u64;
        Ok(self.register(col))
    }

    fn download(&mut self, buf: &DevBuf) -> Result<HostCol, BackendError> {
        self.get(buf)?
            .try_clone("the downloaded buffer")
            .map_err(|e| BackendError(format!("cpu backend: {e}")))
    }

    fn launch(&mut self, kernel: &Kernel, args: &[&DevBuf], ctx: &dyn LaunchCtx) -> Result<Vec<DevBuf>, BackendError> {
        if fox_kernel::expand(kernel, args.len()).is_some() {
            return fox_runtime::launch_kernel(self, kernel, args, ctx);
        }
        let cols = args.iter().map(|b| self.get(b)).collect::<Result<Vec<_>, _>>()?;
        let outs = fox_runtime::alloc::with_budget(self.launch_budget(), || run_kernel(kernel, &cols, ctx))?;
        let outs = self.admit_outputs(kernel, outs)?;
        Ok(outs.into_iter().map(|c| self.register(c)).collect())
    }

    /// `FusedReduce` in one pass where it can (see `fused`); declined otherwise.
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
        let cols = args.iter().map(|b| self.get(b)).collect::<Result<Vec<_>, _>>()?;
        let outs = fox_runtime::alloc::with_budget(self.launch_budget(), || {
            fused::fused_reduce(&cols, filter.as_ref(), *nkeys, aggs, exprs, *n_cols, ctx)
        });
        let Some(outs) = outs else {
            return Ok(None);
        };
        let outs = self.admit_outputs(kernel, outs)?;
        Ok(Some(outs.into_iter().map(|c| self.register(c)).collect()))
    }

    fn free(&mut self, buf: DevBuf) {
        if let Some(col) = self.bufs.remove(&buf.id) {
            self.mem.in_use -= col.len() * col.elem().size();
        }
    }

    fn take(&mut self, buf: DevBuf) -> Result<HostCol, BackendError> {
        self.get(&buf)?;
        let col = self.bufs.remove(&buf.id).expect("checked by get");
        self.mem.in_use -= col.len() * col.elem().size();
        Ok(col)
    }

    fn sync(&mut self) -> Result<(), BackendError> {
        Ok(())
    }

    fn mem(&self) -> MemStats {
        self.mem
    }

    /// What the buffers may hold now: those in use and what the machine has available
    /// less the reserve kept free (`fox_runtime::alloc::machine_available`, beyond which
    /// a large allocation is refused), where the system says.
    fn memory_capacity(&self) -> Option<usize> {
        let available = usize::try_from(fox_runtime::alloc::machine_available()?).ok()?;
        Some(available.saturating_add(self.mem.in_use))
    }

    /// The buffers are host memory: the runtime's host tier holds the same memory.
    fn memory_is_separate(&self) -> bool {
        false
    }

    /// Enforced on every launch: the allocations a kernel makes on the launching thread
    /// (its outputs and the temporaries as large) are admitted against what the limit
    /// leaves ([`fox_runtime::alloc::with_budget`]).
    fn set_memory_limit(&mut self, limit: Option<u64>) {
        self.limit = limit;
    }

    fn route_rows(
        &mut self,
        cols: &[&DevBuf],
        keys: &[usize],
        devices: usize,
    ) -> Result<Option<Vec<Vec<DevBuf>>>, BackendError> {
        let bytes: u128 = cols.iter().map(|b| b.bytes() as u128).sum();
        self.admit(bytes, "the rows an exchange sends")?;
        let host = cols.iter().map(|b| self.get(b)).collect::<Result<Vec<_>, _>>()?;
        let parts =
            fox_runtime::route_host(&host, keys, devices).map_err(|e| BackendError(format!("cpu backend: {e}")))?;
        Ok(Some(
            parts
                .into_iter()
                .map(|part| part.into_iter().map(|c| self.register(c)).collect())
                .collect(),
        ))
    }

    fn has_peer_link(&self) -> bool {
        self.link.is_some()
    }

    fn peer_exchange(
        &mut self,
        send: &[Vec<&DevBuf>],
        recv_rows: &[usize],
        elems: &[fox_kernel::Elem],
        meet: &mut fox_runtime::Meet<'_>,
    ) -> Result<Vec<DevBuf>, BackendError> {
        let Some((link, rank)) = self.link.clone() else {
            return Err(BackendError("cpu backend: no link to other devices".to_string()));
        };
        let n = link.boxes.len();
        if send.len() != n || recv_rows.len() != n {
            return Err(BackendError(format!(
                "cpu backend: an exchange over {} devices on a link of {n}",
                send.len()
            )));
        }
        let row_bytes: u128 = elems.iter().map(|e| e.size() as u128).sum();
        let total: usize = recv_rows.iter().sum();
        let room = self.admit(row_bytes * total as u128, "the rows an exchange receives");
        // Each part is deposited before the devices meet, so after the meeting every part this
        // device takes is in its box.
        let mut deposited = Vec::new();
        if room.is_ok() {
            for (p, cols) in send.iter().enumerate() {
                let part = cols
                    .iter()
                    .map(|b| {
                        self.get(b)
                            .and_then(|c| c.try_clone("a part an exchange sends").map_err(BackendError))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                link.boxes[rank][p]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push_back(part);
                deposited.push(p);
            }
        }
        let met = meet(room.clone().map(|()| Vec::new()).map_err(|e| e.0));
        if let Err(e) = room.and(met.map(|_| ()).map_err(BackendError)) {
            for p in deposited {
                link.boxes[rank][p].lock().unwrap_or_else(|e| e.into_inner()).pop_back();
            }
            return Err(e);
        }
        let mut by_col: Vec<Vec<HostCol>> = elems.iter().map(|_| Vec::new()).collect();
        for (q, &rows) in recv_rows.iter().enumerate() {
            let part = link.boxes[q][rank]
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front()
                .ok_or_else(|| BackendError(format!("cpu backend: device {q} sent nothing to device {rank}")))?;
            if part.is_empty() {
                if rows != 0 {
                    return Err(BackendError(format!(
                        "cpu backend: device {q} sent no columns but {rows} rows"
                    )));
                }
                continue;
            }
            if part.len() != elems.len() || part[0].len() != rows {
                return Err(BackendError(format!(
                    "cpu backend: device {q} sent {} columns of {} rows, {} of {rows} expected",
                    part.len(),
                    part[0].len(),
                    elems.len()
                )));
            }
            for (c, col) in part.into_iter().enumerate() {
                by_col[c].push(col);
            }
        }
        let cols = by_col
            .into_iter()
            .zip(elems)
            .map(|(parts, &e)| HostCol::try_concat(e, parts, "the rows an exchange receives"))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| BackendError(format!("cpu backend: {e}")))?;
        Ok(cols.into_iter().map(|c| self.register(c)).collect())
    }

    fn reset_peak(&mut self) {
        self.mem.peak = self.mem.in_use;
    }
}

/// Runs one kernel on host columns and returns its outputs, per the contract on
/// [`Kernel`]. The arguments fit the kernel's contract (`fox_kernel::check_args`: the
/// runtime checks every launch); a data error is an error naming the kernel. A composite
/// kernel (`FusedReduce`) runs only through a backend ([`CpuBackend`]).
pub fn run_kernel(kernel: &Kernel, args: &[&HostCol], ctx: &dyn LaunchCtx) -> Result<Vec<HostCol>, BackendError> {
    // Read once per chunk of rows, column or pass by the kernels that can run long: the
    // joins, `Expand` and `IntersectCount` (whose work is not bounded by their inputs'
    // size), `SortPerm`, `Gather` and `Compact` (see `fox_runtime::cancel`).
    let stop = ctx.cancel_flag();
    let res = match kernel {
        Kernel::LoadInput { .. }
        | Kernel::Const { .. }
        | Kernel::DictTable { .. }
        | Kernel::StrFn { .. }
        | Kernel::Window { .. }
        | Kernel::Claim { .. }
        | Kernel::Outgrows { .. }
        | Kernel::Exchange { .. } => {
            Err("runs on the host in the runtime and cannot be launched on a backend".to_string())
        }
        Kernel::Eval { expr, n_cols } => expr::eval(expr, *n_cols, args, ctx).map(|c| vec![c]),
        Kernel::Compact => movement::compact_until(args, stop),
        Kernel::Gather { shift } => movement::gather_until(args, *shift, stop),
        Kernel::Concat { parts, width } => movement::concat(args, *parts, *width),
        Kernel::Slice { start, len } => movement::slice(args, *start, *len),
        Kernel::SortPerm { desc, by_rank } => sort::sort_perm_until(args, desc, by_rank, stop).map(|c| vec![c]),
        Kernel::AdjacentDistinct => sort::adjacent_distinct(args).map(|c| vec![c]),
        Kernel::RepeatedKey { nkeys } => sort::repeated_key(args, *nkeys).map(|c| vec![c]),
        Kernel::JoinCount { nkeys } => join::join_count(args, *nkeys, stop).map(|c| vec![c]),
        Kernel::ExclusiveScan => join::exclusive_scan(args),
        Kernel::JoinWrite { nkeys } => join::join_write(args, *nkeys, stop),
        Kernel::MatchFlags { nkeys, anti } => join::match_flags(args, *nkeys, *anti, stop).map(|c| vec![c]),
        Kernel::MergeUnion { width, disjoint } => join::merge_union(args, *width, *disjoint),
        Kernel::ReduceByKey { nkeys, aggs } => reduce::reduce_by_key(args, *nkeys, aggs),
        // A composite kernel: backends run it through `fox_runtime::launch_kernel`.
        Kernel::FusedReduce { .. } => {
            Err("is a composite kernel: launch it on a backend, which runs it whole or as its expansion".to_string())
        }
        Kernel::TrieBuild { arity } => trie::trie_build(args, *arity),
        Kernel::RootRange => trie::root_range(args),
        Kernel::RangeCount => trie::range_count(args).map(|c| vec![c]),
        Kernel::Expand => trie::expand(args, stop),
        Kernel::SortedSearch => trie::sorted_search(args),
        Kernel::IntersectCount { ways } => trie::intersect_count(args, *ways, stop).map(|c| vec![c]),
        Kernel::MinRange { ways } => trie::min_range(args, *ways),
        Kernel::BoundRange { nkeys, lower, upper } => trie::bound_range(args, *nkeys, *lower, *upper),
        Kernel::HashBuild { .. } => hash::hash_build(args).map(|c| vec![c]),
        Kernel::HashProbe { nkeys } => hash::hash_probe(args, *nkeys),
        Kernel::HashMatch { nkeys, anti } => hash::hash_match(args, *nkeys, *anti).map(|c| vec![c]),
        Kernel::NestedLoopCount { nkeys } => nested::count(args, *nkeys).map(|c| vec![c]),
        Kernel::NestedLoopWrite { nkeys } => nested::write(args, *nkeys),
        Kernel::NestedLoopMatch { nkeys, anti } => nested::flags(args, *nkeys, *anti).map(|c| vec![c]),
        Kernel::IneqTree => ineq::ineq_tree(args),
        Kernel::IneqRanges { lower, upper } => ineq::ineq_ranges(args, *lower, *upper),
    };
    res.map_err(|msg| BackendError(format!("kernel {}: {msg}", kernel.name())))
}
