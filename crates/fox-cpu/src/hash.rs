//! Hash joins: the table over the runs of equal keys of a sorted build side
//! (`HashBuild`), and per probing row its run (`HashProbe`) or whether it has one
//! (`HashMatch`).
//!
//! A slot holds the first row of a run; a probe hashes its row's keys, walks the slots
//! from there (linear probing) to the run with equal keys or an empty slot, and finds the
//! run's end by galloping search in the sorted build keys. Keys hash and compare through
//! their order-preserving images (floats by total order: every NaN is one key, -0.0 and
//! 0.0 are two), exactly the equality of the merge join.

use crate::util::{alloc, as_u32, check_u32_rows, f64_key, par_map, KResult};
use fox_runtime::HostCol;
use std::cmp::Ordering;

/// An empty slot; any other slot holds 1 + the first row of a run.
const EMPTY: u32 = 0;

/// Mixes one key word into a hash (the same steps as kernels/join.cu `hash_word`).
#[inline(always)]
fn mix(h: u64, w: u64) -> u64 {
    let mut x = (h ^ w).wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 32;
    x
}

/// The hash of row `i` of the key columns `cols`: every column's image words mixed in
/// order.
#[inline]
fn row_hash(cols: &[&HostCol], i: usize) -> u64 {
    let mut h = 0x9e37_79b9_7f4a_7c15;
    for c in cols {
        h = match c {
            HostCol::U8(x) => mix(h, u64::from(x[i])),
            HostCol::I32(x) => mix(h, u64::from(x[i] as u32 ^ 0x8000_0000)),
            HostCol::U32(x) => mix(h, u64::from(x[i])),
            HostCol::I64(x) => mix(h, x[i] as u64 ^ (1 << 63)),
            HostCol::U64(x) => mix(h, x[i]),
            HostCol::F64(x) => mix(h, f64_key(x[i])),
            HostCol::I128(x) => {
                let v = x[i] as u128;
                mix(mix(h, ((v >> 64) as u64) ^ (1 << 63)), v as u64)
            }
        };
    }
    h ^ (h >> 29)
}

/// The table length for `runs` runs: a power of two, at least twice the runs and 2.
fn capacity(runs: usize) -> KResult<usize> {
    runs.checked_mul(2)
        .and_then(|n| n.max(2).checked_next_power_of_two())
        .filter(|&n| n <= 1 << 32)
        .ok_or_else(|| format!("a hash table of {runs} runs is larger than u32 slots address"))
}

/// `HashBuild { nkeys }`: the slots of the runs of equal keys of the sorted `args`.
pub(crate) fn hash_build(args: &[&HostCol]) -> KResult<HostCol> {
    let n = args[0].len();
    check_u32_rows(n, "the build keys")?;
    let starts: Vec<usize> = (0..n)
        .filter(|&i| i == 0 || crate::util::cmp_rows(args, i, args, i - 1) != Ordering::Equal)
        .collect();
    let cap = capacity(starts.len())?;
    let mask = cap - 1;
    let mut table = alloc::<u32>(cap, "the hash table")?;
    for &r in &starts {
        let mut s = row_hash(args, r) as usize & mask;
        while table[s] != EMPTY {
            s = (s + 1) & mask;
        }
        table[s] = r as u32 + 1;
    }
    Ok(HostCol::U32(table))
}

/// The first row after `lo` (a row of `build` equal to itself) whose keys differ from
/// `lo`'s: the end of the run starting at `lo`, by galloping then binary search.
fn run_end(build: &[&HostCol], lo: usize, n: usize) -> usize {
    let same = |p: usize| crate::util::cmp_rows(build, p, build, lo) == Ordering::Equal;
    // Invariant: rows lo..=a are in the run; b is past it (or n).
    let (mut a, mut step) = (lo, 1usize);
    let mut b = n;
    while a + step < n {
        if same(a + step) {
            a += step;
            step *= 2;
        } else {
            b = a + step;
            break;
        }
    }
    let (mut x, mut y) = (a + 1, b);
    while x < y {
        let mid = x + (y - x) / 2;
        if same(mid) {
            x = mid + 1;
        } else {
            y = mid;
        }
    }
    x
}

/// The run of build rows equal to probing row `i`: `(lo, hi)`, `(0, 0)` when none.
#[inline]
fn probe_row(build: &[&HostCol], table: &[u32], probe: &[&HostCol], i: usize) -> (u32, u32) {
    let mask = table.len() - 1;
    let n = build[0].len();
    let mut s = row_hash(probe, i) as usize & mask;
    // Every slot at most once: a table without an empty slot still ends.
    for _ in 0..table.len() {
        let r = table[s];
        if r == EMPTY {
            break;
        }
        let r = r as usize - 1;
        if r < n && crate::util::cmp_rows(build, r, probe, i) == Ordering::Equal {
            return (r as u32, run_end(build, r, n) as u32);
        }
        s = (s + 1) & mask;
    }
    (0, 0)
}

/// Splits `HashProbe`/`HashMatch` args into build keys, table and probing keys, checking
/// the table's shape (a plan may hand any U32 column as the table).
fn probe_args<'a>(args: &'a [&'a HostCol], nkeys: usize) -> KResult<(&'a [&'a HostCol], &'a [u32], &'a [&'a HostCol])> {
    let (build, rest) = args.split_at(nkeys);
    let table = as_u32(rest[0], "the table")?;
    let probe = &rest[1..];
    if table.len() < 2 || !table.len().is_power_of_two() {
        return Err(format!(
            "the table has {} slots, not a power of two of at least 2",
            table.len()
        ));
    }
    Ok((build, table, probe))
}

/// `HashProbe { nkeys }`: per probing row, its run of equal build keys.
pub(crate) fn hash_probe(args: &[&HostCol], nkeys: usize) -> KResult<Vec<HostCol>> {
    let (build, table, probe) = probe_args(args, nkeys)?;
    let n = probe[0].len();
    let ranges = par_map(n, "the ranges", |i| probe_row(build, table, probe, i))?;
    let lo = ranges.iter().map(|r| r.0).collect();
    let hi = ranges.iter().map(|r| r.1).collect();
    Ok(vec![HostCol::U32(lo), HostCol::U32(hi)])
}

/// `HashMatch { nkeys, anti }`: per probing row, whether it has a run (`anti`: none).
pub(crate) fn hash_match(args: &[&HostCol], nkeys: usize, anti: bool) -> KResult<HostCol> {
    let (build, table, probe) = probe_args(args, nkeys)?;
    let n = probe[0].len();
    let flags = par_map(n, "the match flags", |i| {
        let (lo, hi) = probe_row(build, table, probe, i);
        u8::from((hi > lo) != anti)
    })?;
    Ok(HostCol::U8(flags))
}
