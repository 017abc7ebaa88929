//! Sort-merge joins (count → scan → write), semi/anti-join flags, merge union.
//!
//! Both sides are sorted on their keys. The left side is cut into chunks that run in
//! parallel; each chunk finds its starting point on the right by binary search (the
//! merge-path split) and then walks its runs of equal keys, locating each run's matching
//! right range by binary search from the previous one.

use crate::util::{
    alloc, as_u64, chunks, cmp_rows, common_len, expect_args, first_err, map_ranges, par_map, same_elems, KResult,
    PAR_MIN,
};
use fox_runtime::HostCol;
use rayon::prelude::*;
use std::cmp::Ordering;

/// The first right row in `lo..hi` whose keys are not less than (`upper`: greater than)
/// left row `i`.
fn search(left: &[&HostCol], i: usize, right: &[&HostCol], mut lo: usize, mut hi: usize, upper: bool) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let o = cmp_rows(right, mid, left, i);
        if o == Ordering::Less || (upper && o == Ordering::Equal) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The number of key arguments of a join: `nkeys` per side, or with no keys one column
/// per side that only gives its row count.
fn key_args(nkeys: usize) -> usize {
    if nkeys == 0 {
        2
    } else {
        2 * nkeys
    }
}

/// Splits join key arguments into left and right keys and checks them. With no keys, both
/// key lists are empty and the two columns give the row counts.
fn sides<'a>(args: &'a [&'a HostCol], nkeys: usize) -> KResult<(&'a [&'a HostCol], &'a [&'a HostCol], usize, usize)> {
    if nkeys == 0 {
        return Ok((&[], &[], args[0].len(), args[1].len()));
    }
    let (left, right) = args.split_at(nkeys);
    let nl = common_len(left, "left keys")?;
    let nr = common_len(right, "right keys")?;
    same_elems(left, right, "keys")?;
    Ok((left, right, nl, nr))
}

/// The matching right range `[lo, hi)` of every left row in `a..b`.
fn ranges_of(left: &[&HostCol], right: &[&HostCol], nr: usize, a: usize, b: usize) -> Vec<(usize, usize)> {
    if left.is_empty() {
        return vec![(0, nr); b - a];
    }
    let mut out = Vec::with_capacity(b - a);
    let mut r = 0;
    for i in a..b {
        if i > a && cmp_rows(left, i, left, i - 1) == Ordering::Equal {
            let prev = out[i - a - 1];
            out.push(prev);
            continue;
        }
        let lo = search(left, i, right, r, nr, false);
        let hi = search(left, i, right, lo, nr, true);
        out.push((lo, hi));
        r = lo;
    }
    out
}

/// Matching right ranges of every left row, computed per chunk in parallel.
fn all_ranges(left: &[&HostCol], right: &[&HostCol], nl: usize, nr: usize) -> Vec<Vec<(usize, usize)>> {
    map_ranges(&chunks(nl), |a, b| ranges_of(left, right, nr, a, b))
}

/// `JoinCount { nkeys }`: per left row, the number of right rows with equal keys.
pub(crate) fn join_count(args: &[&HostCol], nkeys: usize) -> KResult<HostCol> {
    expect_args(args, key_args(nkeys), "left keys, right keys")?;
    let (left, right, nl, nr) = sides(args, nkeys)?;
    let parts = all_ranges(left, right, nl, nr);
    Ok(HostCol::U64(
        parts.into_iter().flatten().map(|(lo, hi)| (hi - lo) as u64).collect(),
    ))
}

/// `ExclusiveScan`: `offsets` (exclusive prefix sum of `counts`) and `total`.
pub(crate) fn exclusive_scan(args: &[&HostCol]) -> KResult<Vec<HostCol>> {
    expect_args(args, 1, "counts")?;
    let counts = as_u64(args[0], "counts")?;
    let overflow = || "the sum of the counts overflows u64".to_string();
    if counts.len() < PAR_MIN {
        let mut offsets = Vec::with_capacity(counts.len());
        let mut sum = 0u64;
        for &c in counts {
            offsets.push(sum);
            sum = sum.checked_add(c).ok_or_else(overflow)?;
        }
        return Ok(vec![HostCol::U64(offsets), HostCol::U64(vec![sum])]);
    }
    // Chunk sums, a scan of the sums, then each chunk's scan from its base.
    let ranges = chunks(counts.len());
    let sums = first_err(map_ranges(&ranges, |a, b| {
        counts[a..b]
            .iter()
            .try_fold(0u64, |s, &c| s.checked_add(c))
            .ok_or_else(overflow)
    }))?;
    let mut bases = Vec::with_capacity(sums.len());
    let mut total = 0u64;
    for s in sums {
        bases.push(total);
        total = total.checked_add(s).ok_or_else(overflow)?;
    }
    let mut offsets = alloc::<u64>(counts.len(), "offsets")?;
    offsets
        .par_chunks_mut(crate::util::CHUNK)
        .zip(counts.par_chunks(crate::util::CHUNK))
        .zip(bases.par_iter())
        .for_each(|((out, cnt), &base)| {
            let mut s = base;
            for (o, &c) in out.iter_mut().zip(cnt) {
                *o = s;
                s += c;
            }
        });
    Ok(vec![HostCol::U64(offsets), HostCol::U64(vec![total])])
}

/// `JoinWrite { nkeys }`: every matching pair `(left_idx, right_idx)`, by left then right.
pub(crate) fn join_write(args: &[&HostCol], nkeys: usize) -> KResult<Vec<HostCol>> {
    let k = key_args(nkeys);
    expect_args(args, k + 2, "left keys, right keys, offsets, total")?;
    let (left, right, nl, nr) = sides(&args[..k], nkeys)?;
    let offsets = as_u64(args[k], "offsets")?;
    let total = as_u64(args[k + 1], "total")?;
    if offsets.len() != nl {
        return Err(format!("offsets has {} rows, the left side {nl}", offsets.len()));
    }
    let [total] = total else {
        return Err(format!("total must have one row, has {}", total.len()));
    };
    crate::util::check_u32_rows(nl.max(nr), "a join side")?;
    let ranges = chunks(nl);
    let parts = map_ranges(&ranges, |a, b| ranges_of(left, right, nr, a, b));
    // The offsets must be the scan of these counts, or the writes would overlap.
    let mut sum = 0u64;
    for (i, &(lo, hi)) in parts.iter().flatten().enumerate() {
        if offsets[i] != sum {
            return Err(format!(
                "offsets[{i}] is {}, but the counts before it sum to {sum}",
                offsets[i]
            ));
        }
        sum += (hi - lo) as u64;
    }
    if *total != sum {
        return Err(format!("total is {total}, but the join has {sum} pairs"));
    }
    let total = usize::try_from(sum).map_err(|_| format!("{sum} join pairs do not fit in memory"))?;
    let mut li = alloc::<u32>(total, "left_idx")?;
    let mut ri = alloc::<u32>(total, "right_idx")?;
    // Disjoint output slices, one per chunk.
    let mut work = Vec::with_capacity(parts.len());
    let (mut lrest, mut rrest) = (&mut li[..], &mut ri[..]);
    for (&(a, _), part) in ranges.iter().zip(&parts) {
        let len: usize = part.iter().map(|(lo, hi)| hi - lo).sum();
        let (l, lr) = lrest.split_at_mut(len);
        let (r, rr) = rrest.split_at_mut(len);
        lrest = lr;
        rrest = rr;
        work.push((a, part, l, r));
    }
    let write = |(a, part, l, r): ChunkOut| {
        let mut o = 0;
        for (k, &(lo, hi)) in part.iter().enumerate() {
            for j in lo..hi {
                l[o] = (a + k) as u32;
                r[o] = j as u32;
                o += 1;
            }
        }
    };
    if work.len() <= 1 {
        work.into_iter().for_each(write);
    } else {
        work.into_par_iter().for_each(write);
    }
    Ok(vec![HostCol::U32(li), HostCol::U32(ri)])
}

/// One chunk of a join's output: its first left row, its ranges, and its output slices.
type ChunkOut<'a> = (usize, &'a Vec<(usize, usize)>, &'a mut [u32], &'a mut [u32]);

/// `MatchFlags { nkeys, anti }`: 1 per left row that has (`anti`: has no) right match.
pub(crate) fn match_flags(args: &[&HostCol], nkeys: usize, anti: bool) -> KResult<HostCol> {
    expect_args(args, key_args(nkeys), "left keys, right keys")?;
    let (left, right, nl, nr) = sides(args, nkeys)?;
    let parts = all_ranges(left, right, nl, nr);
    Ok(HostCol::U8(
        parts
            .into_iter()
            .flatten()
            .map(|(lo, hi)| u8::from((hi > lo) != anti))
            .collect(),
    ))
}

/// Where each output row of a union comes from.
#[derive(Clone, Copy)]
enum Src {
    A(usize),
    B(usize),
}

/// Merges `a[a0..a1]` with `b[b0..b1]`, keeping one row of each equal pair (from `a`).
fn merge(a: &[&HostCol], b: &[&HostCol], (a0, a1): (usize, usize), (b0, b1): (usize, usize)) -> Vec<Src> {
    let mut out = Vec::with_capacity(a1 - a0 + b1 - b0);
    let (mut i, mut j) = (a0, b0);
    while i < a1 && j < b1 {
        match cmp_rows(a, i, b, j) {
            Ordering::Less => {
                out.push(Src::A(i));
                i += 1;
            }
            Ordering::Greater => {
                out.push(Src::B(j));
                j += 1;
            }
            Ordering::Equal => {
                out.push(Src::A(i));
                i += 1;
                j += 1;
            }
        }
    }
    out.extend((i..a1).map(Src::A));
    out.extend((j..b1).map(Src::B));
    out
}

/// `MergeUnion { width }`: the sorted, duplicate-free union of two sorted, duplicate-free
/// relations.
pub(crate) fn merge_union(args: &[&HostCol], width: usize) -> KResult<Vec<HostCol>> {
    expect_args(args, 2 * width, "the columns of a, the columns of b")?;
    if width == 0 {
        return Err("needs at least one column".to_string());
    }
    let (a, b, na, nb) = sides(args, width)?;
    // Split a into chunks; each chunk starts in b at the first row not below its first row.
    let ranges = chunks(na);
    let starts: Vec<usize> = ranges
        .iter()
        .enumerate()
        .map(|(c, &(a0, _))| if c == 0 { 0 } else { search(a, a0, b, 0, nb, false) })
        .collect();
    let mut work = Vec::with_capacity(ranges.len().max(1));
    if ranges.is_empty() {
        work.push(((0, 0), (0, nb)));
    }
    for (c, &r) in ranges.iter().enumerate() {
        let b1 = starts.get(c + 1).copied().unwrap_or(nb);
        work.push((r, (starts[c], b1.max(starts[c]))));
    }
    let parts = map_ranges(&(0..work.len()).map(|w| (w, w + 1)).collect::<Vec<_>>(), |w, _| {
        merge(a, b, work[w].0, work[w].1)
    });
    let src: Vec<Src> = parts.concat();
    let mut out = Vec::with_capacity(width);
    for c in 0..width {
        macro_rules! sel {
            ($var:ident, $x:expr, $y:expr) => {
                HostCol::$var(par_map(src.len(), |i| match src[i] {
                    Src::A(k) => $x[k],
                    Src::B(k) => $y[k],
                }))
            };
        }
        out.push(match (a[c], b[c]) {
            (HostCol::U8(x), HostCol::U8(y)) => sel!(U8, x, y),
            (HostCol::I32(x), HostCol::I32(y)) => sel!(I32, x, y),
            (HostCol::U32(x), HostCol::U32(y)) => sel!(U32, x, y),
            (HostCol::I64(x), HostCol::I64(y)) => sel!(I64, x, y),
            (HostCol::U64(x), HostCol::U64(y)) => sel!(U64, x, y),
            (HostCol::F64(x), HostCol::F64(y)) => sel!(F64, x, y),
            (x, _) => {
                return Err(format!(
                    "column {c} differs in element type between a and b: {:?}",
                    x.elem()
                ))
            }
        });
    }
    Ok(out)
}
