//! Inequality joins: the merge-sort tree of the searched side's second bounded column
//! (`IneqTree`) and, per probing row, the ranges of the tree within both bounds
//! (`IneqRanges`).

use crate::util::{alloc, as_u32, KResult};
use fox_kernel::{ineq_levels, RangeBound};
use fox_runtime::HostCol;
use rayon::prelude::*;

/// The values of an `I32` or `I64` column, widened.
fn wide(c: &HostCol, i: usize) -> i128 {
    match c {
        HostCol::I32(x) => i128::from(x[i]),
        HostCol::I64(x) => i128::from(x[i]),
        _ => 0,
    }
}

fn check_values(c: &HostCol) -> KResult<()> {
    match c {
        HostCol::I32(_) | HostCol::I64(_) => Ok(()),
        other => Err(format!("the values are {}, not i32 or i64", other.elem().name())),
    }
}

/// `n · L` entries of a tree over `n` rows, or an error naming the sizes when they exceed
/// the u32 indices the expansion addresses them by.
fn tree_len(n: usize) -> KResult<usize> {
    let levels = ineq_levels(n);
    match n.checked_mul(levels) {
        Some(t) if t <= u32::MAX as usize => Ok(t),
        _ => Err(format!(
            "the inequality join's tree over {n} rows needs {n} × {levels} entries, more than the {} u32 indices address",
            u32::MAX
        )),
    }
}

/// `IneqTree`: level 0 the identity; each block of level `l` the merge of its two halves
/// of level `l - 1` by `(d, position)` (the left half's positions come first, so taking
/// the left on equal values keeps the order total).
pub(crate) fn ineq_tree(args: &[&HostCol]) -> KResult<Vec<HostCol>> {
    let d = args[0];
    check_values(d)?;
    let n = d.len();
    let total = tree_len(n)?;
    let mut tree = alloc::<u32>(total, "the inequality join's tree")?;
    if n == 0 {
        return Ok(vec![HostCol::U32(tree)]);
    }
    let levels = total / n;
    for (p, t) in tree[..n].iter_mut().enumerate() {
        *t = p as u32;
    }
    for l in 1..levels {
        let (done, rest) = tree.split_at_mut(l * n);
        let prev = &done[(l - 1) * n..];
        let cur = &mut rest[..n];
        let width = 1usize << l;
        let half = width / 2;
        let merge = |(j, out): (usize, &mut [u32])| {
            let start = j * width;
            let mid = (start + half).min(n);
            let end = start + out.len();
            let (a, b) = (&prev[start..mid], &prev[mid..end]);
            let (mut i, mut k) = (0, 0);
            for o in out.iter_mut() {
                let take_a = k == b.len() || (i < a.len() && wide(d, a[i] as usize) <= wide(d, b[k] as usize));
                if take_a {
                    *o = a[i];
                    i += 1;
                } else {
                    *o = b[k];
                    k += 1;
                }
            }
        };
        if n < crate::util::PAR_MIN {
            cur.chunks_mut(width).enumerate().for_each(merge);
        } else {
            cur.par_chunks_mut(width).enumerate().for_each(merge);
        }
    }
    Ok(vec![HostCol::U32(tree)])
}

/// One probing row's slots of `lo`, `hi` and `row`.
type RowSlots<'a> = ((&'a mut [u32], &'a mut [u32]), &'a mut [u32]);

/// `IneqRanges`: per probing row, its range `lo .. hi` of positions split into aligned
/// blocks (the bottom-up decomposition of a segment tree), and in each block the part
/// within the bounds on `d`, found by binary search in the block's order.
pub(crate) fn ineq_ranges(
    args: &[&HostCol],
    lower: Option<RangeBound>,
    upper: Option<RangeBound>,
) -> KResult<Vec<HostCol>> {
    let d = args[0];
    check_values(d)?;
    let n = d.len();
    let tree = as_u32(args[1], "the tree")?;
    let (plo, phi) = (as_u32(args[2], "lo")?, as_u32(args[3], "hi")?);
    let total = tree_len(n)?;
    if tree.len() != total {
        return Err(format!("the tree has {} entries, not {total}", tree.len()));
    }
    if tree.iter().any(|&t| t as usize >= n) {
        return Err(format!("the tree holds a position beyond its {n} rows"));
    }
    let mut next = args[4..].iter();
    let mut bound = |b: Option<RangeBound>| -> KResult<Option<(RangeBound, &HostCol)>> {
        b.map(|b| match next.next() {
            Some(c) if c.elem() == d.elem() => Ok((b, *c)),
            Some(c) => Err(format!(
                "a bound is {}, the values {}",
                c.elem().name(),
                d.elem().name()
            )),
            None => Err("a bound column is missing".to_string()),
        })
        .transpose()
    };
    let (lo_b, hi_b) = (bound(lower)?, bound(upper)?);
    let rows = plo.len();
    if let Some(i) = (0..rows).find(|&i| plo[i] > phi[i] || phi[i] as usize > n) {
        return Err(format!(
            "row {i}'s range {} .. {} is not within the {n} values",
            plo[i], phi[i]
        ));
    }
    let levels = ineq_levels(n);
    let slots = 2 * levels;
    let nranges = rows
        .checked_mul(slots)
        .filter(|&r| r <= u32::MAX as usize)
        .ok_or_else(|| {
            format!(
                "the inequality join of {rows} probing rows against {n} rows needs {rows} × {slots} ranges, more than the {} u32 indices address",
                u32::MAX
            )
        })?;
    let mut lo = alloc::<u32>(nranges, "the inequality join's ranges")?;
    let mut hi = alloc::<u32>(nranges, "the inequality join's ranges")?;
    let mut row = alloc::<u32>(nranges, "the inequality join's ranges")?;
    let at = |(b, c): (RangeBound, &HostCol), i: usize| wide(c, i) + i128::from(b.offset);
    let fill = |(i, ((lo, hi), row)): (usize, RowSlots)| {
        row.fill(i as u32);
        let xl = lo_b.map(|b| (at(b, i), b.0.open));
        let xh = hi_b.map(|b| (at(b, i), b.0.open));
        // The entries of tree[start .. start + len] (ordered by d) before x, or not after x
        // when `with_equal`.
        let before = |start: usize, len: usize, x: i128, with_equal: bool| {
            let (mut a, mut b) = (0, len);
            while a < b {
                let mid = a + (b - a) / 2;
                let v = wide(d, tree[start + mid] as usize);
                if v < x || (with_equal && v == x) {
                    a = mid + 1;
                } else {
                    b = mid;
                }
            }
            a
        };
        let mut block = |slot: usize, l: usize, j: usize| {
            let start = l * n + (j << l);
            let len = 1usize << l;
            let a = xl.map_or(0, |(x, open)| before(start, len, x, open));
            let b = xh.map_or(len, |(x, open)| before(start, len, x, !open)).max(a);
            lo[slot] = (start + a) as u32;
            hi[slot] = (start + b) as u32;
        };
        let (mut l_idx, mut r_idx) = (plo[i] as usize, phi[i] as usize);
        let mut l = 0;
        while l_idx < r_idx {
            if l_idx & 1 == 1 {
                block(l, l, l_idx);
                l_idx += 1;
            }
            if r_idx & 1 == 1 {
                r_idx -= 1;
                block(slots - 1 - l, l, r_idx);
            }
            l_idx >>= 1;
            r_idx >>= 1;
            l += 1;
        }
    };
    if rows < crate::util::PAR_MIN {
        lo.chunks_mut(slots)
            .zip(hi.chunks_mut(slots))
            .zip(row.chunks_mut(slots))
            .enumerate()
            .for_each(fill);
    } else {
        lo.par_chunks_mut(slots)
            .zip(hi.par_chunks_mut(slots))
            .zip(row.par_chunks_mut(slots))
            .enumerate()
            .for_each(fill);
    }
    Ok(vec![HostCol::U32(lo), HostCol::U32(hi), HostCol::U32(row)])
}
