//! Inequality joins on kernels/ineq.cu: the merge-sort tree of the searched side's second
//! column (`IneqTree`: the identity, then one launch per level placing every entry at its
//! merged rank, found by binary search in the other half of its block) and each probing
//! row's ranges of it (`IneqRanges`: one thread per probing row).

use crate::device::{Gpu, KArg};
use crate::k_join::{err, stride_grid, Scratch, BLOCK};
use fox_kernel::{ineq_levels, Elem, RangeBound};
use fox_runtime::{BackendError, DevBuf};

/// The entries of a tree over `n` rows, within the u32 indices that address them.
fn tree_len(n: usize) -> Result<usize, BackendError> {
    let levels = ineq_levels(n);
    n.checked_mul(levels)
        .filter(|&t| t <= u32::MAX as usize)
        .ok_or_else(|| {
            err(format!(
                "the inequality join's tree over {n} rows needs {n} × {levels} entries, more than the {} u32 indices address",
                u32::MAX
            ))
        })
}

fn wide(d: &DevBuf) -> Result<i32, BackendError> {
    match d.elem {
        Elem::I32 => Ok(0),
        Elem::I64 => Ok(1),
        e => Err(err(format!("the values are {}, not i32 or i64", e.name()))),
    }
}

/// `IneqTree`: args `d`; outs `tree`.
pub(crate) fn ineq_tree(gpu: &mut Gpu, args: &[&DevBuf]) -> Result<Vec<DevBuf>, BackendError> {
    let d = args[0];
    let w = wide(d)?;
    let n = d.len;
    let total = tree_len(n)?;
    let mut s = Scratch::new();
    let res = (|| {
        let tree = s.alloc(gpu, Elem::U32, total)?;
        if n == 0 {
            return Ok(vec![tree]);
        }
        let base = gpu.ptr(&tree)?;
        let grid = stride_grid(gpu, n);
        gpu.launch(
            "ineq",
            "ineq_identity",
            grid,
            BLOCK,
            0,
            &[KArg::U64(n as u64), KArg::Ptr(base)],
        )?;
        let at = |l: usize| base + (l * n * 4) as u64;
        for l in 1..total / n {
            let args = [
                KArg::Ptr(gpu.ptr(d)?),
                KArg::I32(w),
                KArg::U64(n as u64),
                KArg::I32(l as i32),
                KArg::Ptr(at(l - 1)),
                KArg::Ptr(at(l)),
            ];
            gpu.launch("ineq", "ineq_merge_level", grid, BLOCK, 0, &args)?;
        }
        Ok(vec![tree])
    })();
    s.finish(gpu, res)
}

/// `IneqRanges { lower, upper }`: args `d`, `tree`, `lo`, `hi`, then the bound columns;
/// outs `lo`, `hi`, `row`.
pub(crate) fn ineq_ranges(
    gpu: &mut Gpu,
    lower: Option<RangeBound>,
    upper: Option<RangeBound>,
    args: &[&DevBuf],
) -> Result<Vec<DevBuf>, BackendError> {
    let (d, tree, plo, phi) = (args[0], args[1], args[2], args[3]);
    let w = wide(d)?;
    let n = d.len;
    let total = tree_len(n)?;
    if tree.len != total {
        return Err(err(format!("the tree has {} entries, not {total}", tree.len)));
    }
    let levels = ineq_levels(n);
    let slots = 2 * levels;
    let rows = plo.len;
    let nranges = rows
        .checked_mul(slots)
        .filter(|&r| r <= u32::MAX as usize)
        .ok_or_else(|| {
            err(format!(
                "the inequality join of {rows} probing rows against {n} rows needs {rows} × {slots} ranges, more than the {} u32 indices address",
                u32::MAX
            ))
        })?;
    // Per bound: 0 none, 1 closed, 2 open.
    let code = |b: Option<RangeBound>| b.map_or(0, |b| if b.open { 2 } else { 1 });
    let offset = |b: Option<RangeBound>| b.map_or(0, |b| b.offset);
    let lo_b = lower.map(|_| args[4]);
    let hi_b = upper.map(|_| args[4 + usize::from(lower.is_some())]);
    let mut s = Scratch::new();
    let res = (|| {
        let lo = s.alloc(gpu, Elem::U32, nranges)?;
        let hi = s.alloc(gpu, Elem::U32, nranges)?;
        let row = s.alloc(gpu, Elem::U32, nranges)?;
        if rows > 0 {
            let ptr = |gpu: &Gpu, b: Option<&DevBuf>| b.map_or(Ok(0), |b| gpu.ptr(b));
            let args = [
                KArg::Ptr(gpu.ptr(d)?),
                KArg::I32(w),
                KArg::U64(n as u64),
                KArg::I32(levels as i32),
                KArg::Ptr(gpu.ptr(tree)?),
                KArg::Ptr(gpu.ptr(plo)?),
                KArg::Ptr(gpu.ptr(phi)?),
                KArg::Ptr(ptr(gpu, lo_b)?),
                KArg::I32(code(lower)),
                KArg::I64(offset(lower)),
                KArg::Ptr(ptr(gpu, hi_b)?),
                KArg::I32(code(upper)),
                KArg::I64(offset(upper)),
                KArg::U64(rows as u64),
                KArg::Ptr(gpu.ptr(&lo)?),
                KArg::Ptr(gpu.ptr(&hi)?),
                KArg::Ptr(gpu.ptr(&row)?),
            ];
            let grid = stride_grid(gpu, rows);
            gpu.launch("ineq", "ineq_ranges", grid, BLOCK, 0, &args)?;
        }
        Ok(vec![lo, hi, row])
    })();
    s.finish(gpu, res)
}
