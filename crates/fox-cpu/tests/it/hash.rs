//! Hash, index nested-loop and nested-loop joins on the CPU: `HashBuild` then
//! `HashProbe` and `HashMatch`, and `BoundRange` without bounds, against a map of the
//! build side's rows; `NestedLoopCount`, `NestedLoopWrite` and `NestedLoopMatch` against
//! every pair of rows compared; over 1 to 3 keys of every element type (floats
//! with NaN, -0.0 and 0.0), duplicates, all-equal and skewed keys, empty sides and sizes
//! around block widths; the table's shape; a malformed table.

use crate::common::*;
use fox_kernel::{Elem, Kernel};
use fox_runtime::HostCol;
use std::collections::BTreeMap;

/// The sorted build keys, the table made from them, and probing keys of the same domain
/// (some absent from the build side).
fn sides(rng: &mut Rng, elems: &[Elem], nb: usize, np: usize, dist: Dist) -> (Vec<HostCol>, Vec<HostCol>) {
    let mut build = gen_rows(rng, elems, nb, dist);
    build.sort();
    let probe = gen_rows(rng, elems, np, dist);
    (cols_of(elems, &build), cols_of(elems, &probe))
}

/// Per probing row, the first build row with its keys and the row after the last (0, 0
/// when none), from a map of every build row's keys to the rows holding them.
fn reference(build: &[HostCol], probe: &[HostCol]) -> Vec<(u32, u32)> {
    let b = rows(&build.iter().collect::<Vec<_>>());
    let p = rows(&probe.iter().collect::<Vec<_>>());
    let mut at: BTreeMap<&Vec<Cell>, (u32, u32)> = BTreeMap::new();
    for (j, r) in b.iter().enumerate() {
        let e = at.entry(r).or_insert((j as u32, j as u32));
        e.1 = j as u32 + 1;
    }
    p.iter().map(|r| at.get(r).copied().unwrap_or((0, 0))).collect()
}

fn check(build: &[HostCol], probe: &[HostCol], what: &str) {
    let nkeys = build.len();
    let table = run_ok(&Kernel::HashBuild { nkeys }, &build.iter().collect::<Vec<_>>()).remove(0);
    let HostCol::U32(slots) = &table else {
        panic!("{what}: the table is {:?}", table.elem())
    };
    // A power of two, at least twice the runs, each run's first row in one slot.
    let brows = rows(&build.iter().collect::<Vec<_>>());
    let starts: Vec<u32> = (0..brows.len())
        .filter(|&i| i == 0 || brows[i] != brows[i - 1])
        .map(|i| i as u32 + 1)
        .collect();
    assert!(
        slots.len().is_power_of_two() && slots.len() >= (2 * starts.len()).max(2),
        "{what}: {} slots",
        slots.len()
    );
    let mut held: Vec<u32> = slots.iter().copied().filter(|&s| s != 0).collect();
    held.sort_unstable();
    assert_eq!(held, starts, "{what}: the slots hold the first row of every run");
    let mut args: Vec<HostCol> = build.to_vec();
    args.push(table);
    args.extend(probe.iter().cloned());
    let args: Vec<&HostCol> = args.iter().collect();
    let want = reference(build, probe);
    let got = run_ok(&Kernel::HashProbe { nkeys }, &args);
    let lo: Vec<u32> = want.iter().map(|r| r.0).collect();
    let hi: Vec<u32> = want.iter().map(|r| r.1).collect();
    assert_cols(&got, &[HostCol::U32(lo), HostCol::U32(hi)], what);
    // The index nested loop's search finds the same runs; an absent key's empty range
    // sits where the key would be.
    let mut bargs: Vec<HostCol> = build.to_vec();
    bargs.extend(probe.iter().cloned());
    let kernel = Kernel::BoundRange {
        nkeys,
        lower: None,
        upper: None,
    };
    let got = run_ok(&kernel, &bargs.iter().collect::<Vec<_>>());
    let prows = rows(&probe.iter().collect::<Vec<_>>());
    let (lo, hi): (Vec<u32>, Vec<u32>) = want
        .iter()
        .zip(&prows)
        .map(|(w, r)| match w.1 > w.0 {
            true => *w,
            false => {
                let at = brows.partition_point(|b| b < r) as u32;
                (at, at)
            }
        })
        .unzip();
    assert_cols(
        &got,
        &[HostCol::U32(lo), HostCol::U32(hi)],
        &format!("{what}, bound_range"),
    );
    for anti in [false, true] {
        let got = run_ok(&Kernel::HashMatch { nkeys, anti }, &args);
        let flags: Vec<u8> = want.iter().map(|r| u8::from((r.1 > r.0) != anti)).collect();
        assert_cols(&got, &[HostCol::U8(flags)], &format!("{what}, anti {anti}"));
    }
}

#[test]
fn hash_probe_matches_brute_force() {
    let mut rng = Rng(41);
    for nkeys in 1..=3 {
        for elem in ELEMS {
            for n in SIZES.into_iter().filter(|&n| n <= 257 || (nkeys == 1 && n <= 3001)) {
                for dist in DISTS {
                    // Every key of one type, or a mix of types.
                    let elems: Vec<Elem> = if rng.coin() {
                        vec![elem; nkeys]
                    } else {
                        let mut e = elems_pick(&mut rng, nkeys);
                        e[0] = elem;
                        e
                    };
                    let np = [0, 1, n, 2 * n + 3][rng.below(4) as usize];
                    let (build, probe) = sides(&mut rng, &elems, n, np, dist);
                    check(
                        &build,
                        &probe,
                        &format!("keys {elems:?}, {n} build rows, {np} probing, {dist:?}"),
                    );
                }
            }
        }
    }
}

#[test]
fn hash_probe_floats_and_large_sides() {
    // -0.0 and 0.0 are two keys, every NaN one, as in the merge join.
    let build = vec![HostCol::F64(vec![-0.0, 0.0, 0.0, 1.0, f64::NAN, f64::NAN])];
    let probe = vec![HostCol::F64(vec![0.0, -0.0, f64::NAN, -f64::NAN, 2.0])];
    check(&build, &probe, "floats");
    // The parallel probe: a small build side, many probing rows.
    let mut rng = Rng(43);
    let (build, probe) = sides(&mut rng, &[Elem::I64, Elem::U32], 500, 100_003, Dist::Uniform(700));
    check(&build, &probe, "many probing rows");
}

#[test]
fn hash_probe_rejects_a_malformed_table() {
    let keys = HostCol::I32(vec![1, 2, 3]);
    for table in [HostCol::U32(vec![0, 0, 0]), HostCol::U32(vec![0])] {
        let err = run(&Kernel::HashProbe { nkeys: 1 }, &[&keys, &table, &keys]).unwrap_err();
        assert!(err.to_string().contains("power of two"), "{err}");
    }
    // A full table (no empty slot) ends every probe.
    let full = HostCol::U32(vec![1, 2]);
    let got = run_ok(
        &Kernel::HashMatch { nkeys: 1, anti: false },
        &[&keys, &full, &HostCol::I32(vec![9])],
    );
    assert_cols(&got, &[HostCol::U8(vec![0])], "full table");
}

#[test]
fn bound_range_without_bounds_needs_a_key() {
    let keys = HostCol::I32(vec![1, 2, 3]);
    let kernel = Kernel::BoundRange {
        nkeys: 0,
        lower: None,
        upper: None,
    };
    let err = run(&kernel, &[&keys, &keys]).unwrap_err();
    assert!(err.to_string().contains("at least one key"), "{err}");
}

/// The pairs of equal keys of two unsorted sides, by left row then right row, compared
/// with the nested-loop kernels' counts, pairs and flags.
fn check_nested(left: &[HostCol], right: &[HostCol], what: &str) {
    let nkeys = left.len();
    let l = rows(&left.iter().collect::<Vec<_>>());
    let r = rows(&right.iter().collect::<Vec<_>>());
    let mut pairs = (Vec::new(), Vec::new());
    let mut counts = Vec::new();
    for (i, x) in l.iter().enumerate() {
        let before = pairs.0.len();
        for (j, y) in r.iter().enumerate() {
            if x == y {
                pairs.0.push(i as u32);
                pairs.1.push(j as u32);
            }
        }
        counts.push((pairs.0.len() - before) as u64);
    }
    let mut args: Vec<HostCol> = left.to_vec();
    args.extend(right.iter().cloned());
    let refs: Vec<&HostCol> = args.iter().collect();
    let got = run_ok(&Kernel::NestedLoopCount { nkeys }, &refs);
    assert_cols(&got, &[HostCol::U64(counts.clone())], &format!("{what}: counts"));
    let offsets: Vec<u64> = counts
        .iter()
        .scan(0u64, |s, &c| {
            let o = *s;
            *s += c;
            Some(o)
        })
        .collect();
    let total = HostCol::U64(vec![counts.iter().sum()]);
    let offsets = HostCol::U64(offsets);
    let mut wargs = refs.clone();
    wargs.push(&offsets);
    wargs.push(&total);
    let got = run_ok(&Kernel::NestedLoopWrite { nkeys }, &wargs);
    assert_cols(
        &got,
        &[HostCol::U32(pairs.0), HostCol::U32(pairs.1)],
        &format!("{what}: pairs"),
    );
    for anti in [false, true] {
        let got = run_ok(&Kernel::NestedLoopMatch { nkeys, anti }, &refs);
        let flags: Vec<u8> = counts.iter().map(|&c| u8::from((c > 0) != anti)).collect();
        assert_cols(&got, &[HostCol::U8(flags)], &format!("{what}: anti {anti}"));
    }
}

#[test]
fn nested_loop_matches_brute_force() {
    let mut rng = Rng(47);
    for nkeys in 1..=3 {
        for elem in ELEMS {
            for n in [0usize, 1, 2, 7, 33, 257] {
                for dist in DISTS {
                    let mut elems = elems_pick(&mut rng, nkeys);
                    elems[0] = elem;
                    let m = [0, 1, n, 2 * n + 3][rng.below(4) as usize];
                    let left = cols_of(&elems, &gen_rows(&mut rng, &elems, n, dist));
                    let right = cols_of(&elems, &gen_rows(&mut rng, &elems, m, dist));
                    check_nested(&left, &right, &format!("keys {elems:?}, {n} × {m}, {dist:?}"));
                }
            }
        }
    }
    let left = vec![HostCol::F64(vec![0.0, -0.0, f64::NAN, 1.0])];
    let right = vec![HostCol::F64(vec![-f64::NAN, 0.0, 0.0, -0.0])];
    check_nested(&left, &right, "floats");
}

#[test]
fn nested_loop_write_rejects_offsets_that_are_not_the_scan() {
    let keys = HostCol::I32(vec![1, 1, 2]);
    let right = HostCol::I32(vec![1, 2]);
    for (offsets, total) in [(vec![0, 0, 1], 2), (vec![0, 1, 2], 2), (vec![1, 2, 3], 4)] {
        let (o, t) = (HostCol::U64(offsets), HostCol::U64(vec![total]));
        let err = run(&Kernel::NestedLoopWrite { nkeys: 1 }, &[&keys, &right, &o, &t]).unwrap_err();
        assert!(err.to_string().contains("NestedLoopWrite"), "{err}");
    }
}
