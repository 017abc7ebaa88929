//! The run's memory limit on the CPU backend: each launch may allocate what the limit
//! leaves beside the buffers in use, and a kernel that needs more stops with the
//! out-of-memory error naming what it was building, not an abort.

use crate::common::Ctx;
use fox_kernel::Kernel;
use fox_runtime::{Backend, BackendError, DevBuf, HostCol};

/// Launches `k` on `args` on a CPU backend whose run may use `limit` bytes beyond the
/// arguments; the outputs' lengths, or the error.
fn launch_limited(k: &Kernel, args: &[HostCol], limit: Option<u64>) -> Result<Vec<usize>, BackendError> {
    let mut cpu = fox_cpu::CpuBackend::new();
    let bufs: Vec<DevBuf> = args.iter().map(|a| cpu.upload(a.clone())).collect::<Result<_, _>>()?;
    cpu.set_memory_limit(limit.map(|l| l + cpu.mem().in_use as u64));
    let refs: Vec<&DevBuf> = bufs.iter().collect();
    let res = cpu.launch(k, &refs, &Ctx::default()).map(|outs| {
        let lens = outs.iter().map(|o| o.len).collect();
        outs.into_iter().for_each(|o| cpu.free(o));
        lens
    });
    bufs.into_iter().for_each(|b| cpu.free(b));
    res
}

#[test]
fn a_cross_product_beyond_the_limit_is_an_error_naming_its_rows() {
    // 2,000 × 2,000 pairs: 16 MB of row indices a side.
    let side = HostCol::I32((0..2000).collect());
    let offsets = HostCol::U64((0..2000).map(|i| i * 2000).collect());
    let total = HostCol::U64(vec![4_000_000]);
    let args = [side.clone(), side, offsets, total];
    let join = Kernel::JoinWrite { nkeys: 0 };
    assert_eq!(launch_limited(&join, &args, None).unwrap(), vec![4_000_000; 2]);
    assert_eq!(
        launch_limited(&join, &args, Some(40 << 20)).unwrap(),
        vec![4_000_000; 2]
    );
    let e = launch_limited(&join, &args, Some(20 << 20)).unwrap_err().0;
    assert_eq!(
        e,
        "kernel JoinWrite: out of memory: cannot allocate 15.3 MiB (4000000 rows of 4 bytes) for the \
         joined rows (right indices): the memory limit (--memory-limit) leaves 4.7 MiB to this operation"
    );
}

#[test]
fn the_buffers_in_use_never_exceed_the_limit() {
    // 80 KB of outputs: within a limit that leaves that much beside the arguments, and
    // refused when it leaves a byte less (a launch may take nothing beyond the limit).
    let side = HostCol::I32((0..100).collect());
    let offsets = HostCol::U64((0..100).map(|i| i * 100).collect());
    let args = [side.clone(), side, offsets, HostCol::U64(vec![10_000])];
    let join = Kernel::JoinWrite { nkeys: 0 };
    assert_eq!(launch_limited(&join, &args, Some(80_000)).unwrap(), vec![10_000; 2]);
    let e = launch_limited(&join, &args, Some(79_999)).unwrap_err().0;
    assert!(e.contains("the memory limit (--memory-limit) leaves "), "{e}");
    let e = launch_limited(&join, &args, Some(0)).unwrap_err().0;
    assert!(e.ends_with("leaves 0 bytes to this operation"), "{e}");
    // An upload beyond the limit is refused too.
    let mut cpu = fox_cpu::CpuBackend::new();
    cpu.set_memory_limit(Some(1000));
    let kept = cpu.upload(HostCol::U64(vec![0; 125])).unwrap();
    let e = cpu.upload(HostCol::U8(vec![0; 2])).unwrap_err().0;
    assert_eq!(
        e,
        "out of memory: cannot allocate 2 bytes for an uploaded column: \
         the memory limit (--memory-limit) leaves 0 bytes to this operation"
    );
    assert_eq!(cpu.mem().peak, 1000);
    cpu.free(kept);
}

#[test]
fn the_work_list_of_an_expansion_counts_against_the_limit() {
    // 100,000 rows expanding to one output each: 800 KB of outputs, and a work list of
    // one item per row, several times larger.
    let n = 100_000u64;
    let lo = HostCol::U32(vec![0; n as usize]);
    let offsets = HostCol::U64((0..n).collect());
    let args = [lo, offsets, HostCol::U64(vec![n])];
    assert_eq!(
        launch_limited(&Kernel::Expand, &args, None).unwrap(),
        vec![n as usize; 2]
    );
    let e = launch_limited(&Kernel::Expand, &args, Some(2 << 20)).unwrap_err().0;
    assert!(
        e.starts_with("kernel Expand: out of memory: cannot allocate ")
            && e.contains("for the expanded rows' work list"),
        "{e}"
    );
}
