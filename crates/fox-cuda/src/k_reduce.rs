//! `ReduceByKey` on kernels/reduce.cu: sum, count, min, max, avg per run of equal keys.
//!
//! Segment starts are the compacted row numbers of the adjacent-distinct flags of the
//! keys. Integer and decimal sums and averages, and min/max, cut each segment into pieces
//! of `PIECE` rows (pieces numbered by an exclusive scan of the per-segment piece counts);
//! one warp reduces a piece to an exact 128-bit partial sum or to its best key and first
//! row, and one warp per segment combines its pieces, so one huge group is spread over
//! the whole device. Many short segments (every one a single piece, a few rows on average)
//! are reduced one thread per segment straight from their rows (sums of i32/i64 values,
//! min/max of one-word keys). Float sums add each segment's values one after the other in row
//! order, one thread per segment: that is the order fox-cpu adds in, and it makes the
//! results bit-identical (a huge float group is therefore summed by a single thread).
//!
//! Sums of 38-digit decimals (i128 values) fail where fox-cpu's checked running sum
//! fails: pieces also sum the magnitudes, and a segment whose magnitudes exceed i128 is
//! summed again in row order with checked additions (see kernels/reduce.cu). Minima and
//! maxima of i128 values compare 128-bit keys.

use crate::device::{Gpu, KArg};
use crate::k_join::{blocks, err, key_desc, stride_grid, Scratch, BLOCK};
use crate::prelude::type_code;
use crate::{k_move, k_scan, k_trie};
use fox_kernel::{scale_of, AggSpec, Elem};
use fox_runtime::{BackendError, DevBuf};
use fox_sema::core::{AggFunc, Type};

/// Pieces per block of `piece_sum`/`piece_minmax` (one warp each).
const PIECE_WARPS_PER_BLOCK: u64 = (BLOCK / 32) as u64;

/// The output kind of an integer-stored result in kernels/reduce.cu `store_int`.
fn int_kind(e: Elem) -> Option<i32> {
    match e {
        Elem::U8 => Some(0),
        Elem::I32 => Some(1),
        Elem::U32 => Some(2),
        Elem::I64 => Some(3),
        Elem::U64 => Some(4),
        Elem::I128 => Some(5),
        Elem::F64 => None,
    }
}

/// The segments of the input: their first rows (U32) and their number.
struct Segments {
    starts: Option<DevBuf>,
    ng: usize,
    n: usize,
}

/// Piece offsets of the segments (`poff`, per segment) and the number of pieces.
struct Pieces {
    poff: DevBuf,
    np: u64,
}

fn segments(gpu: &mut Gpu, s: &mut Scratch, keys: &[&DevBuf], n: usize) -> Result<Segments, BackendError> {
    if n == 0 {
        return Ok(Segments { starts: None, ng: 0, n });
    }
    if keys.is_empty() {
        let starts = s.alloc_zeroed(gpu, Elem::U32, 1)?;
        return Ok(Segments {
            starts: Some(starts),
            ng: 1,
            n,
        });
    }
    let desc = key_desc(gpu, s, "reduce", &[keys])?;
    let flags = s.alloc(gpu, Elem::U8, n)?;
    let args = [
        KArg::Ptr(gpu.ptr(&desc.buf)?),
        KArg::I32(desc.k),
        KArg::U64(n as u64),
        KArg::Ptr(gpu.ptr(&flags)?),
    ];
    let grid = stride_grid(gpu, n);
    gpu.launch("reduce", "seg_flags", grid, BLOCK, desc.smem, &args)?;
    let rows = k_trie::iota(gpu, s, n)?;
    let mut starts = s.adopt_all(k_scan::compact(gpu, &flags, &[&rows])?);
    if starts.len() != 1 {
        return Err(err(format!("compaction gave {} columns for one", starts.len())));
    }
    let starts = starts.remove(0);
    let ng = starts.len;
    Ok(Segments {
        starts: Some(starts),
        ng,
        n,
    })
}

fn pieces(gpu: &mut Gpu, s: &mut Scratch, seg: &Segments) -> Result<Pieces, BackendError> {
    let starts = seg.starts.as_ref().ok_or_else(|| err("no segments"))?;
    let counts = s.alloc(gpu, Elem::U64, seg.ng)?;
    let args = [
        KArg::Ptr(gpu.ptr(starts)?),
        KArg::U64(seg.ng as u64),
        KArg::U64(seg.n as u64),
        KArg::Ptr(gpu.ptr(&counts)?),
    ];
    let grid = stride_grid(gpu, seg.ng);
    gpu.launch("reduce", "seg_pieces", grid, BLOCK, 0, &args)?;
    let (poff, total) = k_scan::exclusive_scan_u64(gpu, &counts)?;
    let poff = s.adopt(poff);
    let total = s.adopt(total);
    let np = gpu.read_u64(&total, 0)?;
    Ok(Pieces { poff, np })
}

/// The error of a group result that does not fit its type (error code 1 of `seg_count`
/// and `seg_sum`, with the smallest failing group's first row), worded as fox-cpu words it.
fn check_fit(gpu: &mut Gpu, what: &str, out_ty: Type) -> Result<(), BackendError> {
    let [code, row, _, _] = gpu.read_err()?;
    match code {
        0 => Ok(()),
        1 => Err(err(format!(
            "the {what} of the group at row {row} does not fit {out_ty}"
        ))),
        c => Err(err(format!("unexpected error code {c} from the reduction"))),
    }
}

/// `ReduceByKey { nkeys, aggs }`: args `nkeys` sorted key columns, one value column per
/// aggregate other than `count` (with no keys and only counts, one column giving the row
/// count), then the `Rank` table if a `min`/`max` is over strings.
pub(crate) fn reduce_by_key(
    gpu: &mut Gpu,
    nkeys: usize,
    aggs: &[AggSpec],
    args: &[&DevBuf],
) -> Result<Vec<DevBuf>, BackendError> {
    let nvals = aggs.iter().filter(|a| a.func != AggFunc::Count).count();
    let len_col = usize::from(nkeys == 0 && nvals == 0);
    let need_rank = aggs
        .iter()
        .any(|a| matches!(a.func, AggFunc::Min | AggFunc::Max) && a.input == Some(Type::String));
    let ncols = nkeys + nvals + len_col;
    let n = args[0].len;
    let rank = need_rank.then(|| args[ncols]);
    if n > u32::MAX as usize {
        return Err(err(format!(
            "the input has {n} rows, more than u32 row indices can address"
        )));
    }
    let keys = &args[..nkeys];
    // The value column of each aggregate.
    let mut vals: Vec<Option<(&DevBuf, Type)>> = Vec::with_capacity(aggs.len());
    let mut next_val = nkeys;
    for spec in aggs {
        vals.push(match (spec.func, spec.input) {
            (AggFunc::Count, _) | (_, None) => None,
            (_, Some(ty)) => {
                let col = args[next_val];
                next_val += 1;
                Some((col, ty))
            }
        });
    }
    let mut s = Scratch::new();
    let res = (|| {
        let seg = segments(gpu, &mut s, keys, n)?;
        let mut outs = Vec::with_capacity(nkeys + aggs.len());
        match &seg.starts {
            Some(starts) if nkeys > 0 => outs.extend(s.adopt_all(k_move::gather(gpu, starts, 0, keys)?)),
            _ => {
                for k in keys {
                    outs.push(s.alloc(gpu, k.elem, 0)?);
                }
            }
        }
        let mut pcs: Option<Pieces> = None;
        for (a, (spec, val)) in aggs.iter().zip(&vals).enumerate() {
            let out = aggregate(gpu, &mut s, a, spec, *val, rank, &seg, &mut pcs)?;
            outs.push(out);
        }
        Ok(outs)
    })();
    s.finish(gpu, res)
}

#[allow(clippy::too_many_arguments)]
fn aggregate(
    gpu: &mut Gpu,
    s: &mut Scratch,
    a: usize,
    spec: &AggSpec,
    val: Option<(&DevBuf, Type)>,
    rank: Option<&DevBuf>,
    seg: &Segments,
    pcs: &mut Option<Pieces>,
) -> Result<DevBuf, BackendError> {
    let out_ty = spec.output;
    let ng = seg.ng;
    let needs_input = || {
        err(format!(
            "aggregate {a} ({:?}) needs an input type and value column",
            spec.func
        ))
    };
    match spec.func {
        AggFunc::Count => {
            let elem = Elem::of(out_ty);
            let kind = int_kind(elem).ok_or_else(|| err(format!("the count cannot be stored as {out_ty}")))?;
            let out = s.alloc(gpu, elem, ng)?;
            if let Some(starts) = &seg.starts {
                gpu.reset_err()?;
                let args = [
                    KArg::Ptr(gpu.ptr(starts)?),
                    KArg::U64(ng as u64),
                    KArg::U64(seg.n as u64),
                    KArg::I32(kind),
                    KArg::Ptr(gpu.ptr(&out)?),
                    KArg::Ptr(gpu.err_ptr()),
                ];
                let grid = stride_grid(gpu, ng);
                gpu.launch("reduce", "seg_count", grid, BLOCK, 0, &args)?;
                check_fit(gpu, "count", out_ty)?;
            }
            Ok(out)
        }
        AggFunc::Sum | AggFunc::Avg => {
            let (col, in_ty) = val.ok_or_else(needs_input)?;
            let avg = spec.func == AggFunc::Avg;
            if col.elem == Elem::F64 {
                if out_ty != Type::Float64 {
                    return Err(err(format!(
                        "aggregate {a}: a float {:?} must give float64, not {out_ty}",
                        spec.func
                    )));
                }
                let out = s.alloc(gpu, Elem::F64, ng)?;
                if let Some(starts) = &seg.starts {
                    let args = [
                        KArg::Ptr(gpu.ptr(col)?),
                        KArg::Ptr(gpu.ptr(starts)?),
                        KArg::U64(ng as u64),
                        KArg::U64(seg.n as u64),
                        KArg::I32(i32::from(avg)),
                        KArg::Ptr(gpu.ptr(&out)?),
                    ];
                    let grid = stride_grid(gpu, ng);
                    gpu.launch("reduce", "seg_fsum", grid, BLOCK, 0, &args)?;
                }
                return Ok(out);
            }
            let (Some(si), Some(so)) = (scale_of(in_ty), scale_of(out_ty)) else {
                return Err(err(format!(
                    "aggregate {a}: cannot {:?} {in_ty} into {out_ty}",
                    spec.func
                )));
            };
            let what = if avg { "average" } else { "sum" };
            let out_elem = Elem::of(out_ty);
            let kind = match out_ty {
                // An i64 of at most 18 digits.
                Type::Decimal(_) => Some(6),
                _ => int_kind(out_elem),
            }
            .ok_or_else(|| err(format!("the {what} cannot be stored as {out_ty}")))?;
            let out = s.alloc(gpu, out_elem, ng)?;
            let Some(starts) = &seg.starts else {
                return Ok(out);
            };
            let (mul, div) = if so >= si {
                (10i128.checked_pow(so - si), Some(1i128))
            } else {
                (Some(1i128), 10i128.checked_pow(si - so))
            };
            let (Some(mul), Some(div)) = (mul, div) else {
                return Err(err(format!("the {what} of the group at row 0 does not fit {out_ty}")));
            };
            let wide = col.elem == Elem::I128;
            let t = match col.elem {
                Elem::I32 => 1,
                Elem::I64 => 3,
                Elem::I128 => 6,
                e => return Err(err(format!("aggregate {a}: cannot sum a {e:?} column"))),
            };
            let p = piece_partials(gpu, s, seg, pcs)?;
            gpu.reset_err()?;
            // The last arguments of seg_sum_rows, seg_sum and seg_sum_wide (see finish_sum
            // in kernels/reduce.cu).
            let finish = [
                KArg::I32(i32::from(avg)),
                KArg::U64(mul as u64),
                KArg::U64((mul >> 64) as u64),
                KArg::U64(div as u64),
                KArg::U64((div >> 64) as u64),
                KArg::I32(kind),
                KArg::Ptr(gpu.ptr(&out)?),
                KArg::Ptr(gpu.err_ptr()),
            ];
            if !wide && rows_per_thread(seg, p) {
                let mut args = vec![
                    KArg::Ptr(gpu.ptr(col)?),
                    KArg::I32(t),
                    KArg::Ptr(gpu.ptr(starts)?),
                    KArg::U64(ng as u64),
                    KArg::U64(seg.n as u64),
                ];
                args.extend(finish);
                let grid = stride_grid(gpu, ng);
                gpu.launch("reduce", "seg_sum_rows", grid, BLOCK, 0, &args)?;
                check_fit(gpu, what, out_ty)?;
                return Ok(out);
            }
            // Per piece: the sum (two words), and for i128 values their magnitudes' sum.
            let words = if wide { 4 } else { 2 };
            let partial = s.alloc(gpu, Elem::U64, words * p.np as usize)?;
            let mut args = vec![KArg::Ptr(gpu.ptr(col)?)];
            if !wide {
                args.push(KArg::I32(t));
            }
            args.extend([
                KArg::Ptr(gpu.ptr(starts)?),
                KArg::Ptr(gpu.ptr(&p.poff)?),
                KArg::U64(ng as u64),
                KArg::U64(seg.n as u64),
                KArg::U64(p.np),
                KArg::Ptr(gpu.ptr(&partial)?),
            ]);
            gpu.launch(
                "reduce",
                if wide { "piece_sum_wide" } else { "piece_sum" },
                blocks(p.np, PIECE_WARPS_PER_BLOCK)?,
                BLOCK,
                0,
                &args,
            )?;
            // seg_sum_wide also reads the values (to sum a segment again in row order).
            let mut args = if wide {
                vec![KArg::Ptr(gpu.ptr(col)?)]
            } else {
                Vec::new()
            };
            args.extend([
                KArg::Ptr(gpu.ptr(&partial)?),
                KArg::Ptr(gpu.ptr(&p.poff)?),
                KArg::Ptr(gpu.ptr(starts)?),
                KArg::U64(ng as u64),
                KArg::U64(seg.n as u64),
                KArg::U64(p.np),
            ]);
            args.extend(finish);
            // One warp per segment.
            let grid = stride_grid(gpu, ng.saturating_mul(32));
            let kernel = if wide { "seg_sum_wide" } else { "seg_sum" };
            gpu.launch("reduce", kernel, grid, BLOCK, 0, &args)?;
            check_fit(gpu, what, out_ty)?;
            Ok(out)
        }
        AggFunc::Min | AggFunc::Max => {
            let (col, in_ty) = val.ok_or_else(needs_input)?;
            if Elem::of(out_ty) != col.elem {
                return Err(err(format!(
                    "aggregate {a}: {:?} of {in_ty} cannot give {out_ty}",
                    spec.func
                )));
            }
            let rank = if in_ty == Type::String {
                match rank {
                    Some(r) if col.elem == Elem::U32 => Some(r),
                    _ => {
                        return Err(err(format!(
                            "aggregate {a}: {:?} of strings needs codes and the rank table",
                            spec.func
                        )))
                    }
                }
            } else {
                None
            };
            let Some(starts) = &seg.starts else {
                return s.alloc(gpu, col.elem, 0);
            };
            let is_max = i32::from(spec.func == AggFunc::Max);
            let p = piece_partials(gpu, s, seg, pcs)?;
            let wide = col.elem == Elem::I128;
            let (rank_ptr, nrank) = match rank {
                Some(r) => (gpu.ptr(r)?, r.len as u64),
                None => (0, 0),
            };
            gpu.reset_err()?;
            if !wide && rows_per_thread(seg, p) {
                let best = s.alloc(gpu, Elem::U32, ng)?;
                let args = [
                    KArg::Ptr(gpu.ptr(col)?),
                    KArg::I32(type_code(col.elem) as i32),
                    KArg::Ptr(rank_ptr),
                    KArg::U64(nrank),
                    KArg::I32(is_max),
                    KArg::Ptr(gpu.ptr(starts)?),
                    KArg::U64(ng as u64),
                    KArg::U64(seg.n as u64),
                    KArg::Ptr(gpu.ptr(&best)?),
                    KArg::Ptr(gpu.err_ptr()),
                ];
                gpu.launch("reduce", "seg_minmax_rows", stride_grid(gpu, ng), BLOCK, 0, &args)?;
                gpu.check_err("ReduceByKey (a string code is outside the rank table)")?;
                let mut picked = s.adopt_all(k_move::gather(gpu, &best, 0, &[col])?);
                return Ok(picked.remove(0));
            }
            // Per piece: the best key (one word, two for i128 values) and its row.
            let words = if wide { 3 } else { 2 };
            let partial = s.alloc(gpu, Elem::U64, words * p.np as usize)?;
            let grid = blocks(p.np, PIECE_WARPS_PER_BLOCK)?;
            if wide {
                let args = [
                    KArg::Ptr(gpu.ptr(col)?),
                    KArg::I32(is_max),
                    KArg::Ptr(gpu.ptr(starts)?),
                    KArg::Ptr(gpu.ptr(&p.poff)?),
                    KArg::U64(ng as u64),
                    KArg::U64(seg.n as u64),
                    KArg::U64(p.np),
                    KArg::Ptr(gpu.ptr(&partial)?),
                ];
                gpu.launch("reduce", "piece_minmax_wide", grid, BLOCK, 0, &args)?;
            } else {
                let args = [
                    KArg::Ptr(gpu.ptr(col)?),
                    KArg::I32(type_code(col.elem) as i32),
                    KArg::Ptr(rank_ptr),
                    KArg::U64(nrank),
                    KArg::I32(is_max),
                    KArg::Ptr(gpu.ptr(starts)?),
                    KArg::Ptr(gpu.ptr(&p.poff)?),
                    KArg::U64(ng as u64),
                    KArg::U64(seg.n as u64),
                    KArg::U64(p.np),
                    KArg::Ptr(gpu.ptr(&partial)?),
                    KArg::Ptr(gpu.err_ptr()),
                ];
                gpu.launch("reduce", "piece_minmax", grid, BLOCK, 0, &args)?;
                gpu.check_err("ReduceByKey (a string code is outside the rank table)")?;
            }
            let best = s.alloc(gpu, Elem::U32, ng)?;
            let args = [
                KArg::Ptr(gpu.ptr(&partial)?),
                KArg::Ptr(gpu.ptr(&p.poff)?),
                KArg::U64(ng as u64),
                KArg::U64(p.np),
                KArg::I32(is_max),
                KArg::Ptr(gpu.ptr(&best)?),
            ];
            // One warp per segment.
            let grid = stride_grid(gpu, ng.saturating_mul(32));
            let kernel = if wide { "seg_minmax_wide" } else { "seg_minmax" };
            gpu.launch("reduce", kernel, grid, BLOCK, 0, &args)?;
            let mut picked = s.adopt_all(k_move::gather(gpu, &best, 0, &[col])?);
            Ok(picked.remove(0))
        }
    }
}

/// Segments are summed one thread each, straight from their rows, when every segment is
/// one piece and they average at most `ROWS_PER_THREAD` rows: then no thread reads more
/// than a piece and the many groups keep the device busy without a warp per piece.
const ROWS_PER_THREAD: usize = 32;

fn rows_per_thread(seg: &Segments, p: &Pieces) -> bool {
    p.np == seg.ng as u64 && seg.n <= seg.ng.saturating_mul(ROWS_PER_THREAD)
}

/// The pieces of the segments, computed once per launch.
fn piece_partials<'a>(
    gpu: &mut Gpu,
    s: &mut Scratch,
    seg: &Segments,
    pcs: &'a mut Option<Pieces>,
) -> Result<&'a Pieces, BackendError> {
    if pcs.is_none() {
        *pcs = Some(pieces(gpu, s, seg)?);
    }
    pcs.as_ref().ok_or_else(|| err("no pieces"))
}
