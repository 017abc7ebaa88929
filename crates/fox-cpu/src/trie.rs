//! Leapfrog-triejoin level operators: trie construction, root ranges, range counts,
//! load-balanced expansion, search in sorted trie levels, and the bounded ranges of band
//! joins.

use crate::movement::selected;
use crate::util::{alloc, as_u32, as_u64, check_stop, cmp_at, gather_col, par_map, with_capacity, KResult, Stop};
use fox_kernel::RangeBound;
use fox_runtime::cancel::is_set;
use fox_runtime::HostCol;
use rayon::prelude::*;
use std::cmp::Ordering;

/// `TrieBuild { arity }`: the levels of the trie of a sorted, duplicate-free relation.
pub(crate) fn trie_build(args: &[&HostCol], arity: usize) -> KResult<Vec<HostCol>> {
    let n = args[0].len();
    crate::util::check_u32_rows(n, "the relation")?;
    let mut out = Vec::with_capacity(2 * arity - 1);
    // new[i]: row i starts a new prefix of length d+1.
    const WHAT: &str = "the trie";
    let mut new = alloc::<u8>(n, WHAT)?;
    let mut prev_nodes: Vec<usize> = Vec::new();
    for (d, col) in args.iter().enumerate() {
        new = par_map(n, WHAT, |i| {
            u8::from(new[i] != 0 || i == 0 || cmp_at(col, i, col, i - 1) != Ordering::Equal)
        })?;
        let nodes = selected(&new, WHAT)?;
        if d > 0 {
            // start_{d-1}[j]: the number of level-d nodes before parent j's first row.
            let mut start = with_capacity(prev_nodes.len() + 1, WHAT)?;
            let mut k = 0;
            for &p in &prev_nodes {
                while k < nodes.len() && nodes[k] < p {
                    k += 1;
                }
                start.push(k as u32);
            }
            start.push(nodes.len() as u32);
            out.push(HostCol::U32(start));
        }
        out.push(gather_col(col, &nodes, WHAT)?);
        prev_nodes = nodes;
    }
    Ok(out)
}

/// `RootRange`: `lo = [0]`, `hi = [len(values_0)]`.
pub(crate) fn root_range(args: &[&HostCol]) -> KResult<Vec<HostCol>> {
    let len = u32::try_from(args[0].len()).map_err(|_| "the root level has more than u32 rows".to_string())?;
    Ok(vec![HostCol::U32(vec![0]), HostCol::U32(vec![len])])
}

/// `RangeCount`: `hi - lo` per row.
pub(crate) fn range_count(args: &[&HostCol]) -> KResult<HostCol> {
    let lo = as_u32(args[0], "lo")?;
    let hi = as_u32(args[1], "hi")?;
    if let Some(i) = (0..lo.len()).find(|&i| hi[i] < lo[i]) {
        return Err(format!("row {i} has hi {} below lo {}", hi[i], lo[i]));
    }
    Ok(HostCol::U64(par_map(lo.len(), "the range counts", |i| {
        u64::from(hi[i] - lo[i])
    })?))
}

/// `Expand`: for each row i, `offsets[i+1] - offsets[i]` outputs with `parent = i` and
/// `pos = lo[i] + k`.
pub(crate) fn expand(args: &[&HostCol], stop: &Stop) -> KResult<Vec<HostCol>> {
    let lo = as_u32(args[0], "lo")?;
    let offsets = as_u64(args[1], "offsets")?;
    let total = &as_u64(args[2], "total")?[0];
    let n = lo.len();
    crate::util::check_u32_rows(n, "the input")?;
    let end = |i: usize| if i + 1 < n { offsets[i + 1] } else { *total };
    if n == 0 && *total != 0 {
        return Err(format!("total is {total} for no rows"));
    }
    for (i, &s) in offsets.iter().enumerate() {
        let e = end(i);
        if (i == 0 && s != 0) || e < s {
            return Err(format!("offsets are not an exclusive scan at row {i} ({s} .. {e})"));
        }
        if u64::from(lo[i]).saturating_add(e - s) > u64::from(u32::MAX) + 1 {
            return Err(format!(
                "row {i}: positions from {} for {} rows exceed u32",
                lo[i],
                e - s
            ));
        }
    }
    // The outputs written: all of them, or those of the window.
    let (w0, w1) = match args.get(3) {
        None => (0, *total),
        Some(w) => match as_u64(w, "window")? {
            [a, b] if a <= b && b <= total => (*a, *b),
            w => return Err(format!("window {} .. {} is not within the {total} outputs", w[0], w[1])),
        },
    };
    let len = usize::try_from(w1 - w0).map_err(|_| format!("{} outputs do not fit in memory", w1 - w0))?;
    let mut parent: Vec<u32> = with_capacity(len, "the expanded rows' parents")?;
    let mut pos: Vec<u32> = with_capacity(len, "the expanded rows' positions")?;
    // Pieces of the window's outputs, in parallel: each finds the row of its first
    // output, then writes each row's run of outputs in turn.
    const PIECE: usize = 1 << 14;
    type Out<'a> = &'a mut [std::mem::MaybeUninit<u32>];
    let piece = |(k, (p, q)): (usize, (Out, Out))| {
        if is_set(stop) {
            return;
        }
        let mut at = w0 + (k * PIECE) as u64;
        // The last row whose outputs start at or before `at` holds it (rows before it
        // with the same start have none).
        let mut i = offsets.partition_point(|&o| o <= at) - 1;
        let mut o = 0;
        while o < p.len() {
            while end(i) <= at {
                i += 1;
            }
            let run = ((end(i) - at) as usize).min(p.len() - o);
            let base = lo[i] + (at - offsets[i]) as u32;
            for k in 0..run {
                p[o + k].write(i as u32);
                q[o + k].write(base + k as u32);
            }
            o += run;
            at += run as u64;
        }
    };
    {
        let (p, q) = (
            &mut parent.spare_capacity_mut()[..len],
            &mut pos.spare_capacity_mut()[..len],
        );
        if len < crate::util::PAR_MIN {
            p.chunks_mut(PIECE).zip(q.chunks_mut(PIECE)).enumerate().for_each(piece);
        } else {
            p.par_chunks_mut(PIECE)
                .zip(q.par_chunks_mut(PIECE))
                .enumerate()
                .for_each(piece);
        }
    }
    check_stop(stop)?;
    // SAFETY: every piece wrote each of its slots (the rows' runs from its first output
    // cover it), and no piece was skipped, or `check_stop` returned above.
    unsafe {
        parent.set_len(len);
        pos.set_len(len);
    }
    Ok(vec![HostCol::U32(parent), HostCol::U32(pos)])
}

/// `SortedSearch`: whether `needle[i]` occurs in `values[lo[i]..hi[i]]`, and where.
/// `pos` is the first index of the slice whose value is not below the needle (the
/// match when found).
pub(crate) fn sorted_search(args: &[&HostCol]) -> KResult<Vec<HostCol>> {
    let (values, needle) = (args[0], args[3]);
    let lo = as_u32(args[1], "lo")?;
    let hi = as_u32(args[2], "hi")?;
    let n = lo.len();
    if let Some(i) = (0..n).find(|&i| lo[i] > hi[i] || hi[i] as usize > values.len()) {
        return Err(format!(
            "row {i}: range {} .. {} is not within the {} values",
            lo[i],
            hi[i],
            values.len()
        ));
    }
    let mut found = alloc::<u8>(n, "the search results")?;
    let mut pos = alloc::<u32>(n, "the search results")?;
    let search = |(i, (f, p)): (usize, (&mut u8, &mut u32))| {
        let (mut a, mut b) = (lo[i] as usize, hi[i] as usize);
        while a < b {
            let mid = a + (b - a) / 2;
            if cmp_at(values, mid, needle, i) == Ordering::Less {
                a = mid + 1;
            } else {
                b = mid;
            }
        }
        *f = u8::from(a < hi[i] as usize && cmp_at(values, a, needle, i) == Ordering::Equal);
        *p = a as u32;
    };
    if n < crate::util::PAR_MIN {
        found.iter_mut().zip(pos.iter_mut()).enumerate().for_each(search);
    } else {
        found
            .par_iter_mut()
            .zip(pos.par_iter_mut())
            .enumerate()
            .for_each(search);
    }
    Ok(vec![HostCol::U8(found), HostCol::U32(pos)])
}

/// `IntersectCount { ways }`: the number of (row, value) pairs whose value lies in the
/// range of every way of that row; one I64 row, or none when the count is 0.
pub(crate) fn intersect_count(args: &[&HostCol], ways: usize, stop: &Stop) -> KResult<HostCol> {
    let n = args[1].len();
    let mut los = Vec::with_capacity(ways);
    let mut his = Vec::with_capacity(ways);
    for w in 0..ways {
        let (values, lo, hi) = (args[3 * w], args[3 * w + 1], args[3 * w + 2]);
        let lo = as_u32(lo, "lo")?;
        let hi = as_u32(hi, "hi")?;
        if let Some(i) = (0..n).find(|&i| lo[i] > hi[i] || hi[i] as usize > values.len()) {
            return Err(format!(
                "way {w}, row {i}: range {} .. {} is not within the {} values",
                lo[i],
                hi[i],
                values.len()
            ));
        }
        los.push(lo);
        his.push(hi);
    }
    let values: Vec<&HostCol> = (0..ways).map(|w| args[3 * w]).collect();
    let total: u64 = match values[0] {
        HostCol::I32(_) => count_typed(&slices(&values, |c| matches_i32(c)), &los, &his, n, stop),
        HostCol::I64(_) => count_typed(&slices(&values, |c| matches_i64(c)), &los, &his, n, stop),
        HostCol::U32(_) => count_typed(&slices(&values, |c| matches_u32(c)), &los, &his, n, stop),
        HostCol::U64(_) => count_typed(&slices(&values, |c| matches_u64(c)), &los, &his, n, stop),
        HostCol::U8(_) => count_typed(&slices(&values, |c| matches_u8(c)), &los, &his, n, stop),
        HostCol::I128(_) => count_typed(
            &slices(&values, |c| match c {
                HostCol::I128(x) => Some(&x[..]),
                _ => None,
            }),
            &los,
            &his,
            n,
            stop,
        ),
        HostCol::F64(_) => {
            let keys: Vec<Vec<u64>> = values
                .iter()
                .map(|c| match c {
                    HostCol::F64(x) => {
                        let mut k = with_capacity(x.len(), "the values' sort keys")?;
                        k.extend(x.iter().map(|&v| crate::util::f64_key(v)));
                        Ok(k)
                    }
                    _ => Ok(Vec::new()),
                })
                .collect::<KResult<_>>()?;
            let refs: Vec<&[u64]> = keys.iter().map(Vec::as_slice).collect();
            count_typed(&refs, &los, &his, n, stop)
        }
    };
    check_stop(stop)?;
    let total = i64::try_from(total).map_err(|_| format!("the count {total} exceeds int64"))?;
    Ok(HostCol::I64(if total == 0 { Vec::new() } else { vec![total] }))
}

fn slices<'a, T>(cols: &[&'a HostCol], f: impl Fn(&'a HostCol) -> Option<&'a [T]>) -> Vec<&'a [T]> {
    cols.iter().map(|c| f(c).unwrap_or(&[])).collect()
}

fn matches_i32(c: &HostCol) -> Option<&[i32]> {
    match c {
        HostCol::I32(x) => Some(x),
        _ => None,
    }
}

fn matches_i64(c: &HostCol) -> Option<&[i64]> {
    match c {
        HostCol::I64(x) => Some(x),
        _ => None,
    }
}

fn matches_u32(c: &HostCol) -> Option<&[u32]> {
    match c {
        HostCol::U32(x) => Some(x),
        _ => None,
    }
}

fn matches_u64(c: &HostCol) -> Option<&[u64]> {
    match c {
        HostCol::U64(x) => Some(x),
        _ => None,
    }
}

fn matches_u8(c: &HostCol) -> Option<&[u8]> {
    match c {
        HostCol::U8(x) => Some(x),
        _ => None,
    }
}

/// The first index in `v[from..to]` whose value is not below `key` (`to` if none), by
/// galloping from `from`: cheap when the answer is near, logarithmic when it is far.
#[inline]
fn gallop<T: Ord>(v: &[T], from: usize, to: usize, key: &T) -> usize {
    let mut lo = from;
    let mut step = 1;
    let mut hi = from;
    while hi < to && v[hi] < *key {
        lo = hi + 1;
        hi += step;
        step *= 2;
    }
    let mut hi = hi.min(to);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if v[mid] < *key {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The count of `IntersectCount`, by chunks of rows; the chunks left when `stop` is set
/// count nothing (the caller checks it).
fn count_typed<T: Ord + Sync>(values: &[&[T]], los: &[&[u32]], his: &[&[u32]], n: usize, stop: &Stop) -> u64 {
    let ways = values.len();
    let row = |i: usize| -> u64 {
        let size = |w: usize| his[w][i] - los[w][i];
        let lead = (0..ways).min_by_key(|&w| size(w)).unwrap_or(0);
        if ways == 1 {
            return u64::from(size(0));
        }
        let mut cur: Vec<usize> = (0..ways).map(|w| los[w][i] as usize).collect();
        let mut count = 0;
        'values: for k in los[lead][i] as usize..his[lead][i] as usize {
            let v = &values[lead][k];
            for w in 0..ways {
                if w == lead {
                    continue;
                }
                let end = his[w][i] as usize;
                let p = gallop(values[w], cur[w], end, v);
                cur[w] = p;
                if p == end {
                    break 'values;
                }
                if values[w][p] != *v {
                    continue 'values;
                }
            }
            count += 1;
        }
        count
    };
    // Rows are skewed (a row's work is its shortest list), so chunks are small.
    const ROWS: usize = 256;
    let chunk = |c: usize| -> u64 {
        if is_set(stop) {
            return 0;
        }
        (c * ROWS..((c + 1) * ROWS).min(n)).map(row).sum()
    };
    if n < crate::util::PAR_MIN {
        (0..n.div_ceil(ROWS)).map(chunk).sum()
    } else {
        (0..n.div_ceil(ROWS)).into_par_iter().map(chunk).sum()
    }
}

/// `MinRange { ways }`: per row, the `(lo, hi)` pair with the fewest values (the first of
/// equals).
pub(crate) fn min_range(args: &[&HostCol], ways: usize) -> KResult<Vec<HostCol>> {
    let n = args[0].len();
    let mut los = Vec::with_capacity(ways);
    let mut his = Vec::with_capacity(ways);
    for w in 0..ways {
        let lo = as_u32(args[2 * w], "lo")?;
        let hi = as_u32(args[2 * w + 1], "hi")?;
        if let Some(i) = (0..n).find(|&i| hi[i] < lo[i]) {
            return Err(format!("way {w}, row {i} has hi {} below lo {}", hi[i], lo[i]));
        }
        los.push(lo);
        his.push(hi);
    }
    let mut lo = alloc::<u32>(n, "the smallest ranges")?;
    let mut hi = alloc::<u32>(n, "the smallest ranges")?;
    let pick = |(i, (l, h)): (usize, (&mut u32, &mut u32))| {
        let w = (0..ways).min_by_key(|&w| his[w][i] - los[w][i]).unwrap_or(0);
        (*l, *h) = (los[w][i], his[w][i]);
    };
    if n < crate::util::PAR_MIN {
        lo.iter_mut().zip(hi.iter_mut()).enumerate().for_each(pick);
    } else {
        lo.par_iter_mut().zip(hi.par_iter_mut()).enumerate().for_each(pick);
    }
    Ok(vec![HostCol::U32(lo), HostCol::U32(hi)])
}

/// `BoundRange`: per probing row, the range of the searched rows (sorted on keys, then
/// values) with the row's keys and within its bounds (`hi` raised to `lo` where the
/// bounds cross); values and bounds compared in i128, so a bound's offset never
/// overflows.
pub(crate) fn bound_range(
    args: &[&HostCol],
    nkeys: usize,
    lower: Option<RangeBound>,
    upper: Option<RangeBound>,
) -> KResult<Vec<HostCol>> {
    if lower.is_none() && upper.is_none() {
        return equal_range(args, nkeys);
    }
    let (skeys, rest) = args.split_at(nkeys);
    let values = rest[0];
    let (pkeys, bounds) = rest[1..].split_at(nkeys);
    let len = values.len();
    crate::util::check_u32_rows(len, "the values")?;
    let mut next = bounds.iter();
    let mut bound = |b: Option<RangeBound>| -> KResult<Option<(RangeBound, &HostCol)>> {
        b.map(|b| {
            next.next()
                .map(|c| (b, *c))
                .ok_or_else(|| "a bound column is missing".to_string())
        })
        .transpose()
    };
    let (lo_b, hi_b) = (bound(lower)?, bound(upper)?);
    let n = lo_b.or(hi_b).map_or(0, |(_, c)| c.len());
    let wide = |c: &HostCol, i: usize| match c {
        HostCol::I32(x) => i128::from(x[i]),
        HostCol::I64(x) => i128::from(x[i]),
        _ => 0,
    };
    for (_, c) in lo_b.iter().chain(&hi_b) {
        if c.elem() != values.elem() {
            return Err(format!(
                "a bound is {}, the values {}",
                c.elem().name(),
                values.elem().name()
            ));
        }
    }
    if !matches!(values, HostCol::I32(_) | HostCol::I64(_)) {
        return Err(format!("the values are {}, not i32 or i64", values.elem().name()));
    }
    // The number of searched rows before probing row `i`'s keys and, with a bound `x`,
    // before the value `x` (`with_equal`: also the rows equal to it); without a bound,
    // the rows of equal keys count as before when `keys_equal_before`.
    let before = |i: usize, x: Option<(i128, bool)>, keys_equal_before: bool| {
        let (mut a, mut b) = (0, len);
        while a < b {
            let mid = a + (b - a) / 2;
            let is_before = match crate::util::cmp_rows(skeys, mid, pkeys, i) {
                Ordering::Less => true,
                Ordering::Greater => false,
                Ordering::Equal => match x {
                    Some((x, with_equal)) => {
                        let v = wide(values, mid);
                        v < x || (with_equal && v == x)
                    }
                    None => keys_equal_before,
                },
            };
            if is_before {
                a = mid + 1;
            } else {
                b = mid;
            }
        }
        a
    };
    let at = |(b, c): (RangeBound, &HostCol), i: usize| wide(c, i) + i128::from(b.offset);
    let lo = par_map(n, "the ranges", |i| {
        before(i, lo_b.map(|lb| (at(lb, i), lb.0.open)), false) as u32
    })?;
    let hi = par_map(n, "the ranges", |i| {
        (before(i, hi_b.map(|hb| (at(hb, i), !hb.0.open)), true) as u32).max(lo[i])
    })?;
    Ok(vec![HostCol::U32(lo), HostCol::U32(hi)])
}

/// The first row at or after `from` of `s` (in which the rows `before` holds for come
/// first) for which `before` does not hold: by doubling steps from `from`, then a binary
/// search within the last step, so a row `k` rows on costs about `2 log k` comparisons.
fn gallop_while<T>(s: &[T], from: usize, before: impl Fn(&T) -> bool) -> usize {
    if from >= s.len() || !before(&s[from]) {
        return from;
    }
    // `s[at]` is before; the answer is beyond it.
    let (mut at, mut step) = (from, 1);
    loop {
        let probe = at + step;
        if probe >= s.len() || !before(&s[probe]) {
            let end = probe.min(s.len());
            return at + 1 + s[at + 1..end].partition_point(&before);
        }
        at = probe;
        step *= 2;
    }
}

/// [`equal_range`] of one key column of integers (`s` sorted): per probe, the first row
/// not less than it, then the end of its run of equal rows galloping from there. Probes
/// are taken in pieces in parallel; within a piece, a probe not less than the one before
/// gallops from that one's row instead of searching all of `s`, so ascending probes
/// (a sorted relation's column) cost about the log of the distance between their rows.
fn equal_range_of<T: Ord + Copy + Send + Sync>(s: &[T], p: &[T]) -> KResult<(Vec<u32>, Vec<u32>)> {
    const PIECE: usize = 1 << 12;
    type Out<'a> = &'a mut [std::mem::MaybeUninit<u32>];
    let n = p.len();
    let mut lo: Vec<u32> = with_capacity(n, "the ranges")?;
    let mut hi: Vec<u32> = with_capacity(n, "the ranges")?;
    let piece = |((probes, lo), hi): ((&[T], Out), Out)| {
        let mut prev: Option<(T, usize)> = None;
        for ((&x, l), h) in probes.iter().zip(lo.iter_mut()).zip(hi.iter_mut()) {
            let first = match prev {
                Some((y, at)) if y <= x => gallop_while(s, at, |v: &T| *v < x),
                _ => s.partition_point(|v| *v < x),
            };
            let end = gallop_while(s, first, |v: &T| *v <= x);
            l.write(first as u32);
            h.write(end as u32);
            prev = Some((x, first));
        }
    };
    {
        let (l, h) = (&mut lo.spare_capacity_mut()[..n], &mut hi.spare_capacity_mut()[..n]);
        if n < crate::util::PAR_MIN {
            piece(((p, l), h));
        } else {
            p.par_chunks(PIECE)
                .zip(l.par_chunks_mut(PIECE))
                .zip(h.par_chunks_mut(PIECE))
                .for_each(piece);
        }
    }
    // SAFETY: each probe's piece wrote its two slots.
    unsafe {
        lo.set_len(n);
        hi.set_len(n);
    }
    Ok((lo, hi))
}

/// `BoundRange` without bounds: per probing row, the run of searched rows (sorted on the
/// keys) with its keys, by two binary searches (one key column of integers:
/// [`equal_range_of`]).
fn equal_range(args: &[&HostCol], nkeys: usize) -> KResult<Vec<HostCol>> {
    if nkeys == 0 {
        return Err("a range without bounds needs at least one key".into());
    }
    let (skeys, pkeys) = args.split_at(nkeys);
    let len = skeys[0].len();
    crate::util::check_u32_rows(len, "the searched keys")?;
    if nkeys == 1 {
        let typed = match (skeys[0], pkeys[0]) {
            (HostCol::I32(s), HostCol::I32(p)) => Some(equal_range_of(s, p)),
            (HostCol::U32(s), HostCol::U32(p)) => Some(equal_range_of(s, p)),
            (HostCol::I64(s), HostCol::I64(p)) => Some(equal_range_of(s, p)),
            (HostCol::U64(s), HostCol::U64(p)) => Some(equal_range_of(s, p)),
            _ => None,
        };
        if let Some(r) = typed {
            let (lo, hi) = r?;
            return Ok(vec![HostCol::U32(lo), HostCol::U32(hi)]);
        }
    }
    let n = pkeys[0].len();
    let before = |i: usize, with_equal: bool| {
        let (mut a, mut b) = (0, len);
        while a < b {
            let mid = a + (b - a) / 2;
            let o = crate::util::cmp_rows(skeys, mid, pkeys, i);
            if o == Ordering::Less || (with_equal && o == Ordering::Equal) {
                a = mid + 1;
            } else {
                b = mid;
            }
        }
        a as u32
    };
    let ranges = par_map(n, "the ranges", |i| {
        let lo = before(i, false);
        (lo, before(i, true).max(lo))
    })?;
    Ok(vec![
        HostCol::U32(ranges.iter().map(|r| r.0).collect()),
        HostCol::U32(ranges.iter().map(|r| r.1).collect()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each probe's run in `s` by two searches of all of `s`.
    fn reference(s: &[i32], p: &[i32]) -> (Vec<u32>, Vec<u32>) {
        p.iter()
            .map(|&x| {
                (
                    s.partition_point(|&v| v < x) as u32,
                    s.partition_point(|&v| v <= x) as u32,
                )
            })
            .unzip()
    }

    #[test]
    fn equal_ranges_of_integer_keys_are_those_of_two_searches() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let sizes = [0usize, 1, 2, 4095, 4097, 70_001];
        for &len in &sizes {
            for distinct in [1u64, 3, 1000, 1 << 30] {
                let mut s: Vec<i32> = (0..len).map(|_| (next() % distinct) as i32 - 1).collect();
                s.sort_unstable();
                for &n in &sizes {
                    let random: Vec<i32> = (0..n).map(|_| (next() % (distinct + 2)) as i32 - 2).collect();
                    let mut ascending = random.clone();
                    ascending.sort_unstable();
                    let descending: Vec<i32> = ascending.iter().rev().copied().collect();
                    // Ascending runs broken every few rows (a gallop from a larger probe).
                    let sawtooth: Vec<i32> = ascending.chunks(5).flat_map(|c| c.iter().rev().copied()).collect();
                    for (what, p) in [
                        ("random", &random),
                        ("ascending", &ascending),
                        ("descending", &descending),
                        ("sawtooth", &sawtooth),
                    ] {
                        let got = equal_range_of(&s, p).unwrap();
                        assert_eq!(
                            got,
                            reference(&s, p),
                            "{len} rows, {distinct} values, {n} {what} probes"
                        );
                        // The kernel's result, through the typed path, is the same.
                        let out = equal_range(&[&HostCol::I32(s.clone()), &HostCol::I32(p.clone())], 1).unwrap();
                        assert_eq!(out[0], HostCol::U32(got.0.clone()));
                        assert_eq!(out[1], HostCol::U32(got.1.clone()));
                    }
                }
            }
        }
        // Extreme values next to each other.
        let s = vec![i64::MIN, i64::MIN, 0, i64::MAX, i64::MAX];
        let p = vec![i64::MIN, i64::MAX, -1, i64::MAX, i64::MIN];
        let (lo, hi) = equal_range_of(&s, &p).unwrap();
        assert_eq!((lo, hi), (vec![0, 3, 2, 3, 0], vec![2, 5, 2, 5, 2]));
    }
}
