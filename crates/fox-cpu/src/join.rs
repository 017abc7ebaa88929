//! Sort-merge joins (count → scan → write), semi/anti-join flags, merge union.
//!
//! Both sides are sorted on their keys. The left side is cut into chunks that run in
//! parallel; each chunk finds its starting point on the right by binary search (the
//! merge-path split) and then walks its runs of equal keys, locating each run's matching
//! right range by galloping search from the previous one. Key comparisons go through
//! [`Rows`] views, monomorphised for the common key shapes.

use crate::keys::{gallop, search, with_rows, Rows};
use crate::util::{alloc, as_u64, check_stop, chunks, first_err, map_ranges, with_capacity, KResult, Stop, PAR_MIN};
use fox_runtime::cancel::is_set;
use fox_runtime::HostCol;
use rayon::prelude::*;
use std::cmp::Ordering;

/// The number of key arguments of a join: `nkeys` per side, or with no keys one column
/// per side that only gives its row count.
fn key_args(nkeys: usize) -> usize {
    if nkeys == 0 {
        2
    } else {
        2 * nkeys
    }
}

/// Splits join key arguments (checked by the runtime: one length per side, the same
/// element types) into left and right keys and their row counts. With no keys, both key
/// lists are empty and the two columns give the row counts.
fn sides<'a>(args: &'a [&'a HostCol], nkeys: usize) -> (&'a [&'a HostCol], &'a [&'a HostCol], usize, usize) {
    if nkeys == 0 {
        return (&[], &[], args[0].len(), args[1].len());
    }
    let (left, right) = args.split_at(nkeys);
    (left, right, left[0].len(), right[0].len())
}

/// Calls `f(i, lo, hi)` with the matching right range `[lo, hi)` of every left row `i` in
/// `a..b`, in order.
#[inline]
fn walk_ranges<R: Rows>(left: &R, right: &R, nr: usize, a: usize, b: usize, mut f: impl FnMut(usize, usize, usize)) {
    if a >= b {
        return;
    }
    let mut r = search(left, a, right, 0, nr, false);
    let (mut lo, mut hi) = (r, r);
    for i in a..b {
        if i == a || left.cmp_with(i, left, i - 1) != Ordering::Equal {
            lo = gallop(left, i, right, r, nr, false);
            hi = gallop(left, i, right, lo, nr, true);
            r = hi;
        }
        f(i, lo, hi);
    }
}

/// Runs `f(a, out_chunk)` over the chunks of a fresh output of `n` elements, in parallel
/// for large `n`; the chunks left when `stop` is set are skipped and it fails.
fn fill_chunks<T: Default + Clone + Send>(
    n: usize,
    what: &str,
    stop: &Stop,
    f: impl Fn(usize, &mut [T]) + Sync + Send,
) -> KResult<Vec<T>> {
    let mut out = alloc::<T>(n, what)?;
    let chunk = crate::util::CHUNK;
    let run = |(c, o): (usize, &mut [T])| {
        if !is_set(stop) {
            f(c * chunk, o)
        }
    };
    if n < PAR_MIN {
        out.chunks_mut(chunk).enumerate().for_each(run);
    } else {
        out.par_chunks_mut(chunk).enumerate().for_each(run);
    }
    check_stop(stop)?;
    Ok(out)
}

fn counts_k<R: Rows>(left: &R, right: &R, nl: usize, nr: usize, stop: &Stop) -> KResult<Vec<u64>> {
    fill_chunks(nl, "the join counts", stop, |a, out| {
        walk_ranges(left, right, nr, a, a + out.len(), |i, lo, hi| {
            out[i - a] = (hi - lo) as u64
        })
    })
}

/// `JoinCount { nkeys }`: per left row, the number of right rows with equal keys.
pub(crate) fn join_count(args: &[&HostCol], nkeys: usize, stop: &Stop) -> KResult<HostCol> {
    let (left, right, nl, nr) = sides(args, nkeys);
    let counts = with_rows!(left, right, |l, r| counts_k(&l, &r, nl, nr, stop))?;
    Ok(HostCol::U64(counts))
}

/// `ExclusiveScan`: `offsets` (exclusive prefix sum of `counts`) and `total`.
pub(crate) fn exclusive_scan(args: &[&HostCol]) -> KResult<Vec<HostCol>> {
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
    let n = counts.len();
    let mut offsets: Vec<u64> = with_capacity(n, "the join offsets")?;
    offsets.spare_capacity_mut()[..n]
        .par_chunks_mut(crate::util::CHUNK)
        .zip(counts.par_chunks(crate::util::CHUNK))
        .zip(bases.par_iter())
        .for_each(|((out, cnt), &base)| {
            let mut s = base;
            for (o, &c) in out.iter_mut().zip(cnt) {
                o.write(s);
                s += c;
            }
        });
    // SAFETY: the chunks of `counts` and of the first `n` slots pair up, and each chunk
    // wrote every slot of its own.
    unsafe { offsets.set_len(n) };
    Ok(vec![HostCol::U64(offsets), HostCol::U64(vec![total])])
}

/// `JoinWrite { nkeys }`: every matching pair `(left_idx, right_idx)`, by left then right.
pub(crate) fn join_write(args: &[&HostCol], nkeys: usize, stop: &Stop) -> KResult<Vec<HostCol>> {
    let k = key_args(nkeys);
    let (left, right, nl, nr) = sides(&args[..k], nkeys);
    let offsets = as_u64(args[k], "offsets")?;
    let total = as_u64(args[k + 1], "total")?[0];
    crate::util::check_u32_rows(nl.max(nr), "a join side")?;
    with_rows!(left, right, |l, r| write_k(&l, &r, nl, nr, offsets, total, stop))
}

fn write_k<R: Rows>(
    left: &R,
    right: &R,
    nl: usize,
    nr: usize,
    offsets: &[u64],
    total: u64,
    stop: &Stop,
) -> KResult<Vec<HostCol>> {
    let ranges = chunks(nl);
    // The offsets must be the scan of the counts, or the writes would overlap: each chunk
    // checks its own rows against its first offset, then the chunk totals are chained.
    let sums = first_err(
        map_ranges(&ranges, |a, b| {
            let mut sum = 0u64;
            let mut bad = None;
            walk_ranges(left, right, nr, a, b, |i, lo, hi| {
                if bad.is_none() && offsets[i].wrapping_sub(offsets[a]) != sum {
                    bad = Some(i);
                }
                sum += (hi - lo) as u64;
            });
            match bad {
                None => Ok(sum),
                Some(i) => Err(i),
            }
        })
        .into_iter()
        .map(|r| r.map_err(|i| i.to_string()))
        .collect(),
    );
    let sums = match sums {
        Ok(s) => s,
        Err(_) => {
            // Report the first wrong offset exactly.
            let mut sum = 0u64;
            let mut msg = String::new();
            for (i, &off) in offsets.iter().enumerate() {
                if off != sum {
                    msg = format!("offsets[{i}] is {off}, but the counts before it sum to {sum}");
                    break;
                }
                walk_ranges(left, right, nr, i, i + 1, |_, lo, hi| sum += (hi - lo) as u64);
            }
            return Err(msg);
        }
    };
    let mut sum = 0u64;
    for (&(a, _), s) in ranges.iter().zip(&sums) {
        if offsets[a] != sum {
            return Err(format!(
                "offsets[{a}] is {}, but the counts before it sum to {sum}",
                offsets[a]
            ));
        }
        sum += s;
    }
    if total != sum {
        return Err(format!("total is {total}, but the join has {sum} pairs"));
    }
    let total = usize::try_from(sum).map_err(|_| format!("{sum} join pairs do not fit in memory"))?;
    let mut li = alloc::<u32>(total, "the joined rows (left indices)")?;
    let mut ri = alloc::<u32>(total, "the joined rows (right indices)")?;
    // Disjoint output slices, one per chunk.
    let mut work = Vec::with_capacity(ranges.len());
    let (mut lrest, mut rrest) = (&mut li[..], &mut ri[..]);
    for (&(a, b), &len) in ranges.iter().zip(&sums) {
        let (l, lr) = lrest.split_at_mut(len as usize);
        let (r, rr) = rrest.split_at_mut(len as usize);
        lrest = lr;
        rrest = rr;
        work.push((a, b, l, r));
    }
    let write = |(a, b, l, r): (usize, usize, &mut [u32], &mut [u32])| {
        if is_set(stop) {
            return;
        }
        let mut o = 0;
        walk_ranges(left, right, nr, a, b, |i, lo, hi| {
            let n = hi - lo;
            l[o..o + n].fill(i as u32);
            for (k, x) in r[o..o + n].iter_mut().enumerate() {
                *x = (lo + k) as u32;
            }
            o += n;
        });
    };
    if work.len() <= 1 {
        work.into_iter().for_each(write);
    } else {
        work.into_par_iter().for_each(write);
    }
    check_stop(stop)?;
    Ok(vec![HostCol::U32(li), HostCol::U32(ri)])
}

fn flags_k<R: Rows>(left: &R, right: &R, nl: usize, nr: usize, anti: bool, stop: &Stop) -> KResult<Vec<u8>> {
    fill_chunks(nl, "the match flags", stop, |a, out| {
        let b = a + out.len();
        let mut r = search(left, a, right, 0, nr, false);
        let mut flag = 0u8;
        for i in a..b {
            if i == a || left.cmp_with(i, left, i - 1) != Ordering::Equal {
                r = gallop(left, i, right, r, nr, false);
                let found = r < nr && right.cmp_with(r, left, i) == Ordering::Equal;
                flag = u8::from(found != anti);
            }
            out[i - a] = flag;
        }
    })
}

/// `MatchFlags { nkeys, anti }`: 1 per left row that has (`anti`: has no) match in some
/// right side (the args after the left keys are one or more right sides' keys).
pub(crate) fn match_flags(args: &[&HostCol], nkeys: usize, anti: bool, stop: &Stop) -> KResult<HostCol> {
    let width = nkeys.max(1);
    let nsides = (args.len() / width).saturating_sub(1);
    if nsides <= 1 {
        let (left, right, nl, nr) = sides(args, nkeys);
        let flags = with_rows!(left, right, |l, r| flags_k(&l, &r, nl, nr, anti, stop))?;
        return Ok(HostCol::U8(flags));
    }
    // Found in any side: the sides' flags or-ed, then `anti` applied.
    let mut found: Option<Vec<u8>> = None;
    for g in 1..=nsides {
        let mut one: Vec<&HostCol> = args[..width].to_vec();
        one.extend_from_slice(&args[g * width..(g + 1) * width]);
        let (left, right, nl, nr) = sides(&one, nkeys);
        let f = with_rows!(left, right, |l, r| flags_k(&l, &r, nl, nr, false, stop))?;
        found = Some(match found {
            None => f,
            Some(mut acc) => {
                acc.iter_mut().zip(&f).for_each(|(a, &b)| *a |= b);
                acc
            }
        });
    }
    let flags = found
        .unwrap_or_default()
        .into_iter()
        .map(|f| u8::from((f != 0) != anti))
        .collect();
    Ok(HostCol::U8(flags))
}

/// How each output row of a union is made: from `a`, from `b`, or from `a` with an equal
/// row of `b` skipped.
const FROM_A: u8 = 0;
const FROM_B: u8 = 1;
const FROM_BOTH: u8 = 2;

/// Merges `a[a0..a1]` with `b[b0..b1]` into a plan of [`FROM_A`], [`FROM_B`], [`FROM_BOTH`].
/// `disjoint`: a row of `a` equal to one of `b` is an error (the plan promised none).
fn merge_plan<R: Rows>(
    a: &R,
    b: &R,
    (a0, a1): (usize, usize),
    (b0, b1): (usize, usize),
    disjoint: bool,
) -> KResult<Vec<u8>> {
    let mut out = crate::util::with_capacity(a1 - a0 + b1 - b0, "the union")?;
    let (mut i, mut j) = (a0, b0);
    while i < a1 && j < b1 {
        match a.cmp_with(i, b, j) {
            Ordering::Less => {
                out.push(FROM_A);
                i += 1;
            }
            Ordering::Greater => {
                out.push(FROM_B);
                j += 1;
            }
            Ordering::Equal if disjoint => {
                return Err(format!(
                    "the sides of a disjoint union share a row (row {i} of a, row {j} of b)"
                ));
            }
            Ordering::Equal => {
                out.push(FROM_BOTH);
                i += 1;
                j += 1;
            }
        }
    }
    out.resize(out.len() + (a1 - i), FROM_A);
    out.resize(out.len() + (b1 - j), FROM_B);
    Ok(out)
}

/// Writes one column of a union from its plan, starting at rows `a0` of `x`, `b0` of `y`.
fn replay<T: Copy>(plan: &[u8], x: &[T], y: &[T], (mut i, mut j): (usize, usize), out: &mut [T]) {
    for (o, &p) in out.iter_mut().zip(plan) {
        if p == FROM_B {
            *o = y[j];
            j += 1;
        } else {
            *o = x[i];
            i += 1;
            j += usize::from(p == FROM_BOTH);
        }
    }
}

fn union_col<T: Copy + Default + Send + Sync>(x: &[T], y: &[T], plans: &[PiecePlan], total: usize) -> KResult<Vec<T>> {
    let mut out = alloc::<T>(total, "the union")?;
    let mut parts = Vec::with_capacity(plans.len());
    let mut rest = &mut out[..];
    for (plan, start) in plans {
        let (o, r) = rest.split_at_mut(plan.len());
        rest = r;
        parts.push((plan, *start, o));
    }
    let go = |(plan, start, o): (&Vec<u8>, (usize, usize), &mut [T])| replay(plan, x, y, start, o);
    if parts.len() <= 1 {
        parts.into_iter().for_each(go);
    } else {
        parts.into_par_iter().for_each(go);
    }
    Ok(out)
}

/// The merge plan of one piece of a union and where it starts in `a` and `b`.
type PiecePlan = (Vec<u8>, (usize, usize));

fn union_plans<R: Rows>(a: &R, b: &R, na: usize, nb: usize, disjoint: bool) -> KResult<Vec<PiecePlan>> {
    // Split a into pieces; each starts in b at the first row not below its first row.
    let piece = (na / (4 * rayon::current_num_threads().max(1))).max(4 * crate::util::CHUNK);
    let ranges: Vec<(usize, usize)> = (0..na.div_ceil(piece))
        .map(|c| (c * piece, ((c + 1) * piece).min(na)))
        .collect();
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
    first_err(map_ranges(
        &(0..work.len()).map(|w| (w, w + 1)).collect::<Vec<_>>(),
        |w, _| {
            let (ra, rb) = work[w];
            Ok((merge_plan(a, b, ra, rb, disjoint)?, (ra.0, rb.0)))
        },
    ))
}

/// `MergeUnion { width, disjoint }`: the sorted, duplicate-free union of two sorted,
/// duplicate-free relations. With `disjoint` the sides must share no row: they merge
/// without skipping equal rows, and a shared row is an error.
pub(crate) fn merge_union(args: &[&HostCol], width: usize, disjoint: bool) -> KResult<Vec<HostCol>> {
    let (a, b, na, nb) = sides(args, width);
    let plans = with_rows!(a, b, |x, y| union_plans(&x, &y, na, nb, disjoint))?;
    let total: usize = plans.iter().map(|(p, _)| p.len()).sum();
    let mut out = Vec::with_capacity(width);
    for c in 0..width {
        out.push(match (a[c], b[c]) {
            (HostCol::U8(x), HostCol::U8(y)) => HostCol::U8(union_col(x, y, &plans, total)?),
            (HostCol::I32(x), HostCol::I32(y)) => HostCol::I32(union_col(x, y, &plans, total)?),
            (HostCol::U32(x), HostCol::U32(y)) => HostCol::U32(union_col(x, y, &plans, total)?),
            (HostCol::I64(x), HostCol::I64(y)) => HostCol::I64(union_col(x, y, &plans, total)?),
            (HostCol::U64(x), HostCol::U64(y)) => HostCol::U64(union_col(x, y, &plans, total)?),
            (HostCol::F64(x), HostCol::F64(y)) => HostCol::F64(union_col(x, y, &plans, total)?),
            (HostCol::I128(x), HostCol::I128(y)) => HostCol::I128(union_col(x, y, &plans, total)?),
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
