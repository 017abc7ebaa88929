//! Nested-loop joins over unsorted sides: per left row, every right row compared
//! (`NestedLoopCount`, `NestedLoopWrite`, `NestedLoopMatch`). Keys are equal as the merge
//! join compares them (floats by their total-order image).

use crate::util::{as_u64, check_u32_rows, cmp_rows, par_map, KResult};
use fox_runtime::HostCol;
use std::cmp::Ordering;

/// The right rows whose keys equal left row `i`'s, ascending.
fn matches<'a>(left: &'a [&'a HostCol], right: &'a [&'a HostCol], i: usize) -> impl Iterator<Item = usize> + 'a {
    (0..right[0].len()).filter(move |&j| cmp_rows(left, i, right, j) == Ordering::Equal)
}

/// `NestedLoopCount { nkeys }`.
pub(crate) fn count(args: &[&HostCol], nkeys: usize) -> KResult<HostCol> {
    let (left, right) = args.split_at(nkeys);
    let counts = par_map(left[0].len(), "the join counts", |i| {
        matches(left, right, i).count() as u64
    })?;
    Ok(HostCol::U64(counts))
}

/// `NestedLoopMatch { nkeys, anti }`.
pub(crate) fn flags(args: &[&HostCol], nkeys: usize, anti: bool) -> KResult<HostCol> {
    let (left, right) = args.split_at(nkeys);
    let flags = par_map(left[0].len(), "the match flags", |i| {
        u8::from(matches(left, right, i).next().is_some() != anti)
    })?;
    Ok(HostCol::U8(flags))
}

/// `NestedLoopWrite { nkeys }`: the pairs, after checking that the offsets are the scan
/// of the counts (so that no two rows' pairs overlap).
pub(crate) fn write(args: &[&HostCol], nkeys: usize) -> KResult<Vec<HostCol>> {
    let (left, rest) = args.split_at(nkeys);
    let (right, rest) = rest.split_at(nkeys);
    let offsets = as_u64(rest[0], "offsets")?;
    let total = as_u64(rest[1], "total")?[0];
    let (nl, nr) = (left[0].len(), right[0].len());
    check_u32_rows(nl.max(nr), "a join side")?;
    let per_row: Vec<Vec<u32>> = par_map(nl, "the join pairs", |i| {
        matches(left, right, i).map(|j| j as u32).collect()
    })?;
    let mut sum = 0u64;
    for (i, m) in per_row.iter().enumerate() {
        if offsets[i] != sum {
            return Err(format!(
                "the offsets are not the exclusive scan of the join counts (row {i} has offset {}, not {sum})",
                offsets[i]
            ));
        }
        sum += m.len() as u64;
    }
    if sum != total {
        return Err(format!("the total is {total}, but the pairs are {sum}"));
    }
    let n = usize::try_from(total).map_err(|_| format!("{total} pairs do not fit in memory"))?;
    let mut lidx = crate::util::with_capacity::<u32>(n, "the join pairs")?;
    let mut ridx = crate::util::with_capacity::<u32>(n, "the join pairs")?;
    for (i, m) in per_row.into_iter().enumerate() {
        lidx.extend(std::iter::repeat_n(i as u32, m.len()));
        ridx.extend(m);
    }
    Ok(vec![HostCol::U32(lidx), HostCol::U32(ridx)])
}
