//! `FusedReduce` on the GPU: a filter and an aggregation in one pass when the groups are
//! few; otherwise the backend declines the launch and the runtime runs the kernels the
//! fusion stands for (`fox_kernel::expand`).
//!
//! The one-pass kernel (see [`codegen::generate_fused`]) is generated per reduction and
//! used when every aggregate is exact and order-free (counts, and sums, averages, minima
//! and maxima of integers, decimals and dates), the keys pack into 64 bits (up to two
//! keys of at most 4 bytes, or one of 8) and the groups fit its tables: at most `cap`
//! distinct keys per block (in shared memory) and `GCAP` in all. The host reads the
//! table back, orders the groups by key and computes the results with the contract's
//! formulas (`fox_kernel::arith`; a sum of decimals is a 38-digit decimal, stored as
//! i128). As in fox-cpu, a key or a value that is a 38-digit decimal, or a filter or
//! value whose tree holds one, is not reduced in one pass. When the kernel cannot settle something exactly (a row
//! whose value fails or does not fit, too many groups, a result out of its type's range),
//! or for float sums (which must add in row order) and string minima and maxima, the
//! reduction runs as its expansion: `Eval` of the filter, `Compact`, `Eval` of each
//! value, `SortPerm`, `Gather` and `ReduceByKey`, so results and errors are those of the
//! CPU word for word.

use crate::codegen::{self, AccKind, FusedLayout, FusedShape, FUSED_BLOCK, MAX_ROWS};
use crate::device::{Gpu, KArg};
use crate::k_scan;
use fox_kernel::{AggSpec, Elem, KExpr};
use fox_runtime::{BackendError, DevBuf, HostCol, LaunchCtx};
use fox_sema::core::{AggFunc, Type, MAX_DECIMAL, MAX_WIDE_DECIMAL};

/// Slots of the global table.
const GCAP: u32 = 1024;
/// The most shared memory the block's table may take.
const SHARED_BYTES: usize = 16 * 1024;

fn err(msg: impl Into<String>) -> BackendError {
    BackendError(msg.into())
}

/// `FusedReduce { filter, nkeys, aggs, exprs, n_cols }` on `args` in one pass, or
/// `None` when one pass cannot settle it (the runtime then runs the composition).
#[allow(clippy::too_many_arguments)]
pub(crate) fn fused_reduce(
    gpu: &mut Gpu,
    filter: Option<&KExpr>,
    nkeys: usize,
    aggs: &[AggSpec],
    exprs: &[Option<KExpr>],
    n_cols: usize,
    args: &[&DevBuf],
    ctx: &dyn LaunchCtx,
) -> Result<Option<Vec<DevBuf>>, BackendError> {
    let f = Fused {
        filter,
        nkeys,
        aggs,
        exprs,
        n_cols,
        args,
        ctx,
    };
    match one_pass_plan(&f) {
        Some(plan) => one_pass(gpu, &f, &plan),
        None => Ok(None),
    }
}

/// One `FusedReduce`: the kernel's fields and its arguments.
#[derive(Clone, Copy)]
struct Fused<'a> {
    filter: Option<&'a KExpr>,
    nkeys: usize,
    aggs: &'a [AggSpec],
    exprs: &'a [Option<KExpr>],
    n_cols: usize,
    args: &'a [&'a DevBuf],
    ctx: &'a dyn LaunchCtx,
}

/// The accumulators of the one-pass kernel: distinct (kind, expression) pairs, and for
/// each aggregate the accumulator it reads (none for `count`).
struct OnePass<'a> {
    accs: Vec<(AccKind, &'a KExpr)>,
    of_agg: Vec<Option<usize>>,
    shape: FusedShape,
}

fn one_pass_plan<'a>(f: &Fused<'a>) -> Option<OnePass<'a>> {
    let Fused {
        filter,
        nkeys,
        aggs,
        exprs,
        args,
        ..
    } = *f;
    let n = args[0].len;
    if n == 0 || n as u64 >= MAX_ROWS {
        return None;
    }
    let key_bytes: Vec<usize> = args[..nkeys]
        .iter()
        .map(|k| match k.elem {
            Elem::U8 | Elem::I32 | Elem::U32 => Some(4),
            Elem::I64 | Elem::U64 => Some(8),
            Elem::F64 | Elem::I128 => None,
        })
        .collect::<Option<_>>()?;
    // The kernel computes in 64 bits (fox-cpu's one-pass reduction too).
    if filter.is_some_and(KExpr::has_wide) {
        return None;
    }
    if !(key_bytes.len() <= 1 || key_bytes.iter().all(|&b| b == 4) && key_bytes.len() == 2) {
        return None;
    }
    let mut accs: Vec<(AccKind, &KExpr)> = Vec::new();
    let mut of_agg = Vec::with_capacity(aggs.len());
    for (a, e) in aggs.iter().zip(exprs) {
        let kind = match (a.func, a.input) {
            (AggFunc::Count, _) => {
                of_agg.push(None);
                continue;
            }
            (AggFunc::Sum | AggFunc::Avg, Some(Type::Int32 | Type::Int64 | Type::Decimal(_))) => AccKind::Sum,
            (AggFunc::Min, Some(Type::Int32 | Type::Int64 | Type::Decimal(_) | Type::Date)) => AccKind::Min,
            (AggFunc::Max, Some(Type::Int32 | Type::Int64 | Type::Decimal(_) | Type::Date)) => AccKind::Max,
            _ => return None,
        };
        let e = e.as_ref()?;
        if e.has_wide() {
            return None;
        }
        let i = match accs.iter().position(|(k, x)| *k == kind && *x == e) {
            Some(i) => i,
            None => {
                accs.push((kind, e));
                accs.len() - 1
            }
        };
        of_agg.push(Some(i));
    }
    // Shared bytes per slot: key, dense number, count, then the accumulators.
    let slot_bytes: usize = 20
        + accs
            .iter()
            .map(|(k, _)| if *k == AccKind::Sum { 16 } else { 8 })
            .sum::<usize>();
    let mut cap = 256usize;
    while cap * slot_bytes > SHARED_BYTES {
        cap /= 2;
    }
    if cap < 32 {
        return None;
    }
    // Each thread keeps its own accumulators of the block's first `greg` groups in shared
    // memory (24 KiB a block; one group without keys).
    let per_group = FUSED_BLOCK as usize * (8 * accs.len() + 4);
    let greg = if nkeys == 0 {
        1
    } else {
        (24 * 1024 / per_group).clamp(1, 8) as u32
    };
    let shared = cap * slot_bytes + greg as usize * per_group + 64;
    // Rows per lane loaded together, and the blocks an SM holds (228 KiB of shared memory).
    let unroll: u32 = if accs.len() <= 2 { 4 } else { 2 };
    let min_blocks = (200 * 1024 / shared).clamp(1, 8) as u32;
    Some(OnePass {
        accs,
        of_agg,
        shape: FusedShape {
            cap: cap as u32,
            gcap: GCAP,
            greg,
            unroll,
            min_blocks,
        },
    })
}

/// The one-pass reduction, or `None` when it could not settle the result (the caller
/// then runs the composition).
fn one_pass(gpu: &mut Gpu, f: &Fused, plan: &OnePass) -> Result<Option<Vec<DevBuf>>, BackendError> {
    let Fused {
        filter,
        nkeys,
        aggs,
        n_cols,
        args,
        ctx,
        ..
    } = *f;
    let elems: Vec<Elem> = args.iter().map(|a| a.elem).collect();
    let g = codegen::generate_fused(filter, &plan.accs, nkeys, n_cols, &elems, &plan.shape, ctx).map_err(err)?;
    let layout = FusedLayout::new(&plan.accs, GCAP as usize);
    let gcap = layout.gcap;
    // The table (keys empty, counts and sums zero, minima and maxima at their
    // identities), then the fail word.
    let words = layout.words + 1;
    let mut init = vec![0u64; words];
    init[..gcap].fill(u64::MAX);
    init[layout.min_at..layout.max_at].fill(i64::MAX as u64);
    init[layout.max_at..layout.words].fill(i64::MIN as u64);
    let table = gpu.upload(&HostCol::U64(init))?;
    let res = (|| {
        let gp = gpu.ptr(&table)?;
        let mut ka = Vec::with_capacity(args.len() + 3);
        for a in args {
            ka.push(KArg::Ptr(gpu.ptr(a)?));
        }
        for a in &args[n_cols..] {
            ka.push(KArg::U64(a.len as u64));
        }
        ka.extend([
            KArg::U64(args[0].len as u64),
            KArg::Ptr(gp),
            KArg::Ptr(gp + 8 * (words as u64 - 1)),
        ]);
        let n = args[0].len;
        let grid = (gpu.sm_count() * plan.shape.min_blocks)
            .min(n.div_ceil(FUSED_BLOCK as usize) as u32)
            .max(1);
        gpu.launch_generated(&g.source, &g.kernel, grid, FUSED_BLOCK, 0, &ka)?;
        gpu.download(&table)
    })();
    gpu.free(table);
    let HostCol::U64(t) = res? else {
        return Err(err("the fused reduction's table came back with the wrong element type"));
    };
    if t[words - 1] != 0 {
        return Ok(None);
    }
    // The groups, ordered by key.
    let decode = |k: u64, j: usize| -> i128 {
        let k = k ^ if nkeys == 2 {
            codegen::FUSED_KEY_FLIP_2
        } else {
            codegen::FUSED_KEY_FLIP_1
        };
        let w = if nkeys == 2 {
            if j == 0 {
                k >> 32
            } else {
                k & 0xffff_ffff
            }
        } else {
            k
        };
        match args[j].elem {
            Elem::I32 => i128::from(w as u32 as i32),
            Elem::I64 => i128::from(w as i64),
            _ => i128::from(w),
        }
    };
    let mut slots: Vec<usize> = (0..gcap).filter(|&s| t[s] != u64::MAX).collect();
    slots.sort_by_key(|&s| (0..nkeys).map(|j| decode(t[s], j)).collect::<Vec<_>>());
    let cnt = |s: usize| t[gcap + s];
    let sum_of = |acc: usize, s: usize| -> i128 {
        let at = layout.acc_at[acc] + 2 * s;
        ((u128::from(t[at + 1]) << 64) | u128::from(t[at])) as i128
    };
    let ext_of = |acc: usize, s: usize| -> i64 { t[layout.acc_at[acc] + s] as i64 };
    let mut outs: Vec<HostCol> = Vec::with_capacity(nkeys + aggs.len());
    for (j, key) in args[..nkeys].iter().enumerate() {
        let v: Vec<i128> = slots.iter().map(|&s| decode(t[s], j)).collect();
        outs.push(match key.elem {
            Elem::U8 => HostCol::U8(v.iter().map(|&x| x as u8).collect()),
            Elem::I32 => HostCol::I32(v.iter().map(|&x| x as i32).collect()),
            Elem::U32 => HostCol::U32(v.iter().map(|&x| x as u32).collect()),
            Elem::I64 => HostCol::I64(v.iter().map(|&x| x as i64).collect()),
            // One-pass keys are never floats or i128 (see `one_pass_plan`).
            Elem::U64 | Elem::F64 | Elem::I128 => HostCol::U64(v.iter().map(|&x| x as u64).collect()),
        });
    }
    for (a, acc) in aggs.iter().zip(&plan.of_agg) {
        let col = match (a.func, acc) {
            (AggFunc::Count, _) => HostCol::I64(slots.iter().map(|&s| cnt(s) as i64).collect()),
            (AggFunc::Sum | AggFunc::Avg, Some(acc)) => {
                let (Some(si), Some(so)) = (a.input.and_then(fox_kernel::scale_of), fox_kernel::scale_of(a.output))
                else {
                    return Ok(None);
                };
                let mut v = Vec::with_capacity(slots.len());
                for &s in &slots {
                    let r =
                        fox_kernel::finish_int_sum(a.func == AggFunc::Avg, si, so, sum_of(*acc, s), i128::from(cnt(s)));
                    match r {
                        Some(x) => v.push(x),
                        // Out of range: the composition names the group.
                        None => return Ok(None),
                    }
                }
                match Elem::of(a.output) {
                    // A decimal: at most 18 digits.
                    Elem::I64
                        if a.output.is_decimal() && v.iter().any(|x| x.unsigned_abs() > MAX_DECIMAL.unsigned_abs()) =>
                    {
                        return Ok(None)
                    }
                    Elem::I64 => match v.iter().map(|&x| i64::try_from(x).ok()).collect() {
                        Some(v) => HostCol::I64(v),
                        None => return Ok(None),
                    },
                    // A sum of decimals: at most 38 digits.
                    Elem::I128 if v.iter().all(|x| x.unsigned_abs() <= MAX_WIDE_DECIMAL.unsigned_abs()) => {
                        HostCol::I128(v)
                    }
                    _ => return Ok(None),
                }
            }
            (AggFunc::Min | AggFunc::Max, Some(acc)) => {
                let v: Vec<i64> = slots.iter().map(|&s| ext_of(*acc, s)).collect();
                match Elem::of(a.output) {
                    Elem::I64 => HostCol::I64(v),
                    Elem::I32 => HostCol::I32(v.iter().map(|&x| x as i32).collect()),
                    _ => return Ok(None),
                }
            }
            _ => return Ok(None),
        };
        outs.push(col);
    }
    let mut bufs = Vec::with_capacity(outs.len());
    for c in &outs {
        match gpu.upload(c) {
            Ok(b) => bufs.push(b),
            Err(e) => {
                k_scan::free_all(gpu, bufs);
                return Err(e);
            }
        }
    }
    gpu.fused_one_pass += 1;
    Ok(Some(bufs))
}
