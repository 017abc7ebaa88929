//! Every kernel against a plain sequential reference written here, on seeded random
//! inputs: empty, one row, all-equal keys, skewed keys, sizes that are not multiples of
//! the GPU tile widths, and large inputs that take the parallel paths.

use crate::common;

use common::*;
use fox_kernel::{AggSpec, Elem, Kernel, RangeBound};
use fox_runtime::HostCol;
use fox_sema::core::{AggFunc, Type};
use std::collections::{BTreeMap, BTreeSet};

/// Every (size, distribution) pair, plus a few large inputs.
fn cases(large: bool) -> Vec<(usize, Dist)> {
    let mut v = Vec::new();
    for n in SIZES {
        for d in DISTS {
            v.push((n, d));
        }
    }
    if large {
        v.push((100_000, Dist::Uniform(50_000)));
        v.push((100_003, Dist::Skewed(1000)));
        v.push((100_000, Dist::AllEqual));
    }
    v
}

fn sorted_dedup(mut rs: Vec<Vec<Cell>>) -> Vec<Vec<Cell>> {
    rs.sort();
    rs.dedup();
    rs
}

fn refs(cols: &[HostCol]) -> Vec<&HostCol> {
    cols.iter().collect()
}

// ---- movement ---------------------------------------------------------------------------

#[test]
fn compact_matches_reference() {
    let mut rng = Rng(1);
    for (n, dist) in cases(true) {
        let flags: Vec<u8> = (0..n)
            .map(|_| match draw(&mut rng, dist) % 3 {
                0 => 0,
                1 => 1,
                _ => 7,
            })
            .collect();
        let elems = elems_pick(&mut rng, 2);
        let cols: Vec<HostCol> = elems.iter().map(|e| gen_col(&mut rng, *e, n, dist)).collect();
        let flag_col = HostCol::U8(flags.clone());
        let mut args = vec![&flag_col];
        args.extend(cols.iter());
        let got = run_ok(&Kernel::Compact, &args);
        let keep: Vec<Vec<Cell>> = (0..n)
            .filter(|&i| flags[i] != 0)
            .map(|i| row(&refs(&cols), i))
            .collect();
        assert_cols(&got, &cols_of(&elems, &keep), &format!("compact n={n} {dist:?}"));
    }
}

#[test]
fn gather_matches_reference_and_checks_range() {
    let mut rng = Rng(2);
    for (n, dist) in cases(true) {
        let elems = elems_pick(&mut rng, 2);
        let cols: Vec<HostCol> = elems.iter().map(|e| gen_col(&mut rng, *e, n, dist)).collect();
        let shift = if n > 3 { rng.below(3) as u32 } else { 0 };
        let m = rng.below(2 * n as u64 + 1) as usize;
        let idx: Vec<u32> = (0..m)
            .filter(|_| n > shift as usize)
            .map(|_| rng.below((n - shift as usize) as u64) as u32)
            .collect();
        let idx_col = HostCol::U32(idx.clone());
        let mut args = vec![&idx_col];
        args.extend(cols.iter());
        let got = run_ok(&Kernel::Gather { shift }, &args);
        let want: Vec<Vec<Cell>> = idx.iter().map(|&i| row(&refs(&cols), (i + shift) as usize)).collect();
        assert_cols(&got, &cols_of(&elems, &want), &format!("gather n={n}"));
        // One index past the end is an error naming the kernel.
        let bad = HostCol::U32(vec![(n as u32).saturating_sub(shift)]);
        let mut args = vec![&bad];
        args.extend(cols.iter());
        let err = run(&Kernel::Gather { shift }, &args).unwrap_err();
        assert!(err.0.contains("Gather") && err.0.contains("out of range"), "{err}");
    }
}

#[test]
fn concat_matches_reference() {
    let mut rng = Rng(3);
    for (n, dist) in cases(false) {
        let parts = 1 + rng.below(4) as usize;
        let elems = elems_pick(&mut rng, 2);
        let mut groups = Vec::new();
        let mut want_rows = Vec::new();
        for _ in 0..parts {
            let len = rng.below(n as u64 + 1) as usize;
            let rs = gen_rows(&mut rng, &elems, len, dist);
            want_rows.extend(rs.iter().cloned());
            groups.push(cols_of(&elems, &rs));
        }
        let args: Vec<&HostCol> = groups.iter().flatten().collect();
        let got = run_ok(&Kernel::Concat { parts, width: 2 }, &args);
        assert_cols(&got, &cols_of(&elems, &want_rows), &format!("concat n={n}"));
    }
}

#[test]
fn slice_matches_reference() {
    let mut rng = Rng(4);
    for (n, dist) in cases(true) {
        let elems = elems_pick(&mut rng, 3);
        let rs = gen_rows(&mut rng, &elems, n, dist);
        let cols = cols_of(&elems, &rs);
        for _ in 0..3 {
            let start = rng.below(n as u64 + 3);
            let len = if rng.coin() { u64::MAX } else { rng.below(n as u64 + 3) };
            let got = run_ok(&Kernel::Slice { start, len }, &refs(&cols));
            let want: Vec<Vec<Cell>> = rs
                .iter()
                .skip(start as usize)
                .take(len.min(n as u64) as usize)
                .cloned()
                .collect();
            assert_cols(&got, &cols_of(&elems, &want), &format!("slice n={n} {start}+{len}"));
        }
    }
}

// ---- sorting ------------------------------------------------------------------------------

/// Stable sort of row indices with the standard library's stable sort.
fn sort_perm_ref(keys: &[&HostCol], desc: &[bool], rank: Option<&[u32]>, by_rank: &[bool]) -> Vec<u32> {
    let n = keys.first().map_or(0, |c| c.len());
    let key = |k: usize, i: usize| {
        let c = cell(keys[k], i);
        match (by_rank[k], c) {
            (true, Cell::I(code)) => Cell::I(rank.unwrap()[code as usize].into()),
            _ => c,
        }
    };
    let mut idx: Vec<u32> = (0..n as u32).collect();
    idx.sort_by(|&a, &b| {
        for (k, &d) in desc.iter().enumerate() {
            let o = key(k, a as usize).cmp(&key(k, b as usize));
            let o = if d { o.reverse() } else { o };
            if o.is_ne() {
                return o;
            }
        }
        std::cmp::Ordering::Equal
    });
    idx
}

#[test]
fn sort_perm_matches_reference() {
    let mut rng = Rng(5);
    for (n, dist) in cases(true) {
        // 1 to 4 keys: packed in 64 bits, in 128 bits, or compared column by column.
        let k = 1 + rng.below(4) as usize;
        let elems = elems_pick(&mut rng, k);
        let cols: Vec<HostCol> = elems.iter().map(|e| gen_col(&mut rng, *e, n, dist)).collect();
        let desc: Vec<bool> = (0..k).map(|_| rng.coin()).collect();
        let by_rank: Vec<bool> = elems.iter().map(|e| *e == Elem::U32 && rng.coin()).collect();
        // A rank table over every code present: a random permutation.
        let max_code = cols
            .iter()
            .zip(&by_rank)
            .filter(|(_, r)| **r)
            .filter_map(|(c, _)| match c {
                HostCol::U32(v) => v.iter().max().copied(),
                _ => None,
            })
            .max()
            .unwrap_or(0) as usize;
        let rank_len = if by_rank.iter().any(|r| *r) {
            (max_code + 1).min(1 << 22)
        } else {
            0
        };
        let uses_rank = by_rank.iter().any(|r| *r) && max_code < (1 << 22);
        let by_rank: Vec<bool> = by_rank.iter().map(|r| *r && uses_rank).collect();
        let mut rank: Vec<u32> = (0..rank_len as u32).collect();
        for i in (1..rank.len()).rev() {
            rank.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let rank_col = HostCol::U32(rank.clone());
        let mut args: Vec<&HostCol> = cols.iter().collect();
        if uses_rank {
            args.push(&rank_col);
        }
        let got = run_ok(
            &Kernel::SortPerm {
                desc: desc.clone(),
                by_rank: by_rank.clone(),
            },
            &args,
        );
        let want = sort_perm_ref(&refs(&cols), &desc, Some(&rank), &by_rank);
        assert_eq!(
            got,
            vec![HostCol::U32(want)],
            "sort n={n} {dist:?} {elems:?} desc={desc:?}"
        );
    }
}

#[test]
fn sort_perm_orders_floats_totally_and_checks_rank_codes() {
    let col = HostCol::F64(vec![
        f64::NAN,
        0.0,
        -0.0,
        f64::NEG_INFINITY,
        1.0,
        f64::INFINITY,
        -f64::NAN,
    ]);
    let got = run_ok(
        &Kernel::SortPerm {
            desc: vec![false],
            by_rank: vec![false],
        },
        &[&col],
    );
    assert_eq!(got, vec![HostCol::U32(vec![3, 2, 1, 4, 5, 0, 6])]);
    let codes = HostCol::U32(vec![0, 5]);
    let rank = HostCol::U32(vec![0, 1]);
    let err = run(
        &Kernel::SortPerm {
            desc: vec![false],
            by_rank: vec![true],
        },
        &[&codes, &rank],
    )
    .unwrap_err();
    assert!(err.0.contains("SortPerm") && err.0.contains("rank table"), "{err}");
}

#[test]
fn adjacent_distinct_matches_reference() {
    let mut rng = Rng(6);
    for (n, dist) in cases(true) {
        let k = 1 + rng.below(3) as usize;
        let elems = elems_pick(&mut rng, k);
        let mut rs = gen_rows(&mut rng, &elems, n, dist);
        if rng.coin() {
            rs.sort();
        }
        let cols = cols_of(&elems, &rs);
        let got = run_ok(&Kernel::AdjacentDistinct, &refs(&cols));
        let want: Vec<u8> = (0..n).map(|i| u8::from(i == 0 || rs[i] != rs[i - 1])).collect();
        assert_eq!(got, vec![HostCol::U8(want)], "distinct n={n} {dist:?}");
    }
}

#[test]
fn repeated_key_matches_reference() {
    let mut rng = Rng(16);
    for (n, dist) in cases(true) {
        let k = 1 + rng.below(3) as usize;
        let elems = elems_pick(&mut rng, k);
        let mut rs = gen_rows(&mut rng, &elems, n, dist);
        rs.sort();
        if rng.coin() {
            // Distinct keys, with at most one repeat placed at a random row.
            rs.dedup();
            if rs.len() >= 2 && rng.coin() {
                let at = rng.below(rs.len() as u64 - 1) as usize;
                rs[at + 1] = rs[at].clone();
            }
        }
        let cols = cols_of(&elems, &rs);
        let got = run_ok(&Kernel::RepeatedKey { nkeys: k }, &refs(&cols));
        let want: Vec<u32> = (1..rs.len())
            .find(|&i| rs[i] == rs[i - 1])
            .map(|i| i as u32 - 1)
            .into_iter()
            .collect();
        assert_eq!(got, vec![HostCol::U32(want)], "repeated key n={} {dist:?}", rs.len());
    }
    // No key columns: every row has the same key, so two rows repeat it.
    for n in [0usize, 1, 2, 5] {
        let got = run_ok(&Kernel::RepeatedKey { nkeys: 0 }, &[&HostCol::U8(vec![1; n])]);
        let want: Vec<u32> = if n >= 2 { vec![0] } else { Vec::new() };
        assert_eq!(got, vec![HostCol::U32(want)], "no keys, n={n}");
    }
}

// ---- joins ---------------------------------------------------------------------------------

/// Sorted left and right sides with `nkeys` shared key columns (plus a payload column
/// that is ignored by the join).
fn join_sides(rng: &mut Rng, n: usize, dist: Dist, nkeys: usize) -> (Vec<Elem>, Vec<Vec<Cell>>, Vec<Vec<Cell>>) {
    let elems = elems_pick(rng, nkeys);
    let nr = rng.below(n as u64 + 2) as usize;
    let mut l = gen_rows(rng, &elems, n, dist);
    let mut r = gen_rows(rng, &elems, nr, dist);
    l.sort();
    r.sort();
    (elems, l, r)
}

/// The right rows of each key, in order.
fn right_index(r: &[Vec<Cell>]) -> BTreeMap<Vec<Cell>, Vec<usize>> {
    let mut m: BTreeMap<Vec<Cell>, Vec<usize>> = BTreeMap::new();
    for (j, k) in r.iter().enumerate() {
        m.entry(k.clone()).or_default().push(j);
    }
    m
}

#[test]
fn join_count_scan_write_match_reference() {
    let mut rng = Rng(7);
    for (n, dist) in cases(true) {
        let nkeys = 1 + rng.below(2) as usize;
        let (elems, l, r) = join_sides(&mut rng, n, dist, nkeys);
        if n >= 100_000 && matches!(dist, Dist::AllEqual | Dist::Skewed(_)) {
            // The output is quadratic in the skew; count only.
            let (lc, rc) = (cols_of(&elems, &l), cols_of(&elems, &r));
            let args: Vec<&HostCol> = lc.iter().chain(rc.iter()).collect();
            let counts = run_ok(&Kernel::JoinCount { nkeys }, &args);
            let idx = right_index(&r);
            let want: Vec<u64> = l.iter().map(|k| idx.get(k).map_or(0, |v| v.len() as u64)).collect();
            assert_eq!(counts, vec![HostCol::U64(want)]);
            continue;
        }
        check_join(&elems, &l, &r, nkeys, &format!("join n={n} {dist:?}"));
    }
}

fn check_join(elems: &[Elem], l: &[Vec<Cell>], r: &[Vec<Cell>], nkeys: usize, what: &str) {
    let (lc, rc) = (cols_of(elems, l), cols_of(elems, r));
    let args: Vec<&HostCol> = lc.iter().chain(rc.iter()).collect();
    let idx = right_index(r);
    // Reference: every pair by left row, then right row.
    let mut pairs = Vec::new();
    for (i, k) in l.iter().enumerate() {
        for &j in idx.get(k).map(|v| v.as_slice()).unwrap_or(&[]) {
            pairs.push((i as u32, j as u32));
        }
    }
    let counts_want: Vec<u64> = l.iter().map(|k| idx.get(k).map_or(0, |v| v.len() as u64)).collect();
    let counts = run_ok(&Kernel::JoinCount { nkeys }, &args);
    assert_eq!(counts, vec![HostCol::U64(counts_want.clone())], "{what}: counts");
    let scan = run_ok(&Kernel::ExclusiveScan, &[&counts[0]]);
    let mut off = Vec::new();
    let mut s = 0;
    for c in &counts_want {
        off.push(s);
        s += c;
    }
    assert_eq!(scan, vec![HostCol::U64(off), HostCol::U64(vec![s])], "{what}: scan");
    let mut wargs = args.clone();
    wargs.push(&scan[0]);
    wargs.push(&scan[1]);
    let got = run_ok(&Kernel::JoinWrite { nkeys }, &wargs);
    let want = vec![
        HostCol::U32(pairs.iter().map(|p| p.0).collect()),
        HostCol::U32(pairs.iter().map(|p| p.1).collect()),
    ];
    assert_eq!(got, want, "{what}: pairs");
    for anti in [false, true] {
        let got = run_ok(&Kernel::MatchFlags { nkeys, anti }, &args);
        let want: Vec<u8> = l.iter().map(|k| u8::from(idx.contains_key(k) != anti)).collect();
        assert_eq!(got, vec![HostCol::U8(want)], "{what}: match flags anti={anti}");
    }
    // The right rows dealt to three sides (one of them empty): a match in any side.
    let mut dealt: Vec<Vec<Vec<Cell>>> = vec![Vec::new(); 3];
    for (j, row) in r.iter().enumerate() {
        dealt[[0, 2, 2][j % 3]].push(row.clone());
    }
    let side_cols: Vec<Vec<HostCol>> = dealt.iter().map(|rows| cols_of(elems, rows)).collect();
    let mut margs: Vec<&HostCol> = lc.iter().collect();
    for c in &side_cols {
        margs.extend(c.iter());
    }
    for anti in [false, true] {
        let got = run_ok(&Kernel::MatchFlags { nkeys, anti }, &margs);
        let want: Vec<u8> = l.iter().map(|k| u8::from(idx.contains_key(k) != anti)).collect();
        assert_eq!(
            got,
            vec![HostCol::U8(want)],
            "{what}: match flags over three sides anti={anti}"
        );
    }
}

#[test]
fn join_without_keys_is_a_cross_product() {
    let mut rng = Rng(8);
    for (nl, nr) in [(0, 0), (0, 3), (3, 0), (1, 1), (5, 7), (300, 41)] {
        let l = gen_col(&mut rng, Elem::I32, nl, Dist::Uniform(10));
        let r = gen_col(&mut rng, Elem::F64, nr, Dist::Uniform(10));
        let counts = run_ok(&Kernel::JoinCount { nkeys: 0 }, &[&l, &r]);
        assert_eq!(counts, vec![HostCol::U64(vec![nr as u64; nl])]);
        let scan = run_ok(&Kernel::ExclusiveScan, &[&counts[0]]);
        let got = run_ok(&Kernel::JoinWrite { nkeys: 0 }, &[&l, &r, &scan[0], &scan[1]]);
        let mut li = Vec::new();
        let mut ri = Vec::new();
        for i in 0..nl as u32 {
            for j in 0..nr as u32 {
                li.push(i);
                ri.push(j);
            }
        }
        assert_eq!(got, vec![HostCol::U32(li), HostCol::U32(ri)]);
        for anti in [false, true] {
            let got = run_ok(&Kernel::MatchFlags { nkeys: 0, anti }, &[&l, &r]);
            assert_eq!(got, vec![HostCol::U8(vec![u8::from((nr > 0) != anti); nl])]);
        }
    }
}

#[test]
fn join_write_rejects_inconsistent_offsets() {
    let l = HostCol::I32(vec![1, 2, 2]);
    let r = HostCol::I32(vec![2, 2, 3]);
    let bad_offsets = HostCol::U64(vec![0, 1, 2]);
    let total = HostCol::U64(vec![4]);
    let err = run(&Kernel::JoinWrite { nkeys: 1 }, &[&l, &r, &bad_offsets, &total]).unwrap_err();
    assert!(err.0.contains("JoinWrite") && err.0.contains("offsets"), "{err}");
    let offsets = HostCol::U64(vec![0, 0, 2]);
    let bad_total = HostCol::U64(vec![9]);
    let err = run(&Kernel::JoinWrite { nkeys: 1 }, &[&l, &r, &offsets, &bad_total]).unwrap_err();
    assert!(err.0.contains("total"), "{err}");
    let wrong_type = HostCol::I64(vec![2]);
    let err = run(&Kernel::JoinCount { nkeys: 1 }, &[&l, &wrong_type]).unwrap_err();
    assert!(
        err.0.contains("JoinCount") && err.0.contains("column 0 of group 1 is I64"),
        "{err}"
    );
}

#[test]
fn exclusive_scan_matches_reference_and_detects_overflow() {
    let mut rng = Rng(9);
    for n in [0, 1, 2, 1000, 16_385, 100_001] {
        let counts: Vec<u64> = (0..n).map(|_| rng.below(1000)).collect();
        let got = run_ok(&Kernel::ExclusiveScan, &[&HostCol::U64(counts.clone())]);
        let mut off = Vec::new();
        let mut s = 0;
        for c in &counts {
            off.push(s);
            s += c;
        }
        assert_eq!(got, vec![HostCol::U64(off), HostCol::U64(vec![s])]);
    }
    for n in [3, 50_000] {
        let mut counts = vec![1u64; n];
        counts[n / 2] = u64::MAX;
        let err = run(&Kernel::ExclusiveScan, &[&HostCol::U64(counts)]).unwrap_err();
        assert!(err.0.contains("ExclusiveScan") && err.0.contains("overflow"), "{err}");
    }
}

#[test]
fn merge_union_matches_reference() {
    let mut rng = Rng(10);
    for (n, dist) in cases(true) {
        let width = 1 + rng.below(3) as usize;
        let elems = elems_pick(&mut rng, width);
        let a = sorted_dedup(gen_rows(&mut rng, &elems, n, dist));
        let nb = rng.below(n as u64 + 2) as usize;
        let b = sorted_dedup(gen_rows(&mut rng, &elems, nb, dist));
        let (ac, bc) = (cols_of(&elems, &a), cols_of(&elems, &b));
        let args: Vec<&HostCol> = ac.iter().chain(bc.iter()).collect();
        let got = run_ok(&Kernel::MergeUnion { width, disjoint: false }, &args);
        let want: Vec<Vec<Cell>> = a
            .iter()
            .chain(b.iter())
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        assert_cols(&got, &cols_of(&elems, &want), &format!("union n={n} {dist:?}"));
    }
}

#[test]
fn disjoint_merge_union_merges_and_rejects_a_shared_row() {
    let mut rng = Rng(11);
    for (n, dist) in cases(true) {
        let width = 1 + rng.below(3) as usize;
        let elems = elems_pick(&mut rng, width);
        // Disjoint sides: the distinct rows dealt at random to a and b.
        let rows = sorted_dedup(gen_rows(&mut rng, &elems, n, dist));
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for r in &rows {
            if rng.below(3) == 0 {
                b.push(r.clone());
            } else {
                a.push(r.clone());
            }
        }
        let (ac, bc) = (cols_of(&elems, &a), cols_of(&elems, &b));
        let args: Vec<&HostCol> = ac.iter().chain(bc.iter()).collect();
        let got = run_ok(&Kernel::MergeUnion { width, disjoint: true }, &args);
        assert_cols(&got, &cols_of(&elems, &rows), &format!("disjoint union n={n} {dist:?}"));
        // One row of b put in a as well: the promise is broken, and the kernel says so.
        if let Some(shared) = b.get(b.len() / 2).cloned() {
            let mut a2 = a.clone();
            a2.push(shared);
            let a2 = sorted_dedup(a2);
            let ac2 = cols_of(&elems, &a2);
            let args: Vec<&HostCol> = ac2.iter().chain(bc.iter()).collect();
            let err = run(&Kernel::MergeUnion { width, disjoint: true }, &args).unwrap_err();
            assert!(err.0.contains("share a row"), "{err}");
        }
    }
}

// ---- reduce by key -------------------------------------------------------------------------

/// `n / d` rounded half away from zero, on magnitudes.
fn round_div(n: i128, d: i128) -> i128 {
    let neg = (n < 0) != (d < 0);
    let (a, b) = (n.abs(), d.abs());
    let q = (2 * a + b) / (2 * b);
    if neg {
        -q
    } else {
        q
    }
}

/// One aggregate over the rows of a group (reference).
fn agg_ref(spec: &AggSpec, vals: &[Cell], rank: &[u32]) -> Result<Cell, ()> {
    let ints = || {
        vals.iter()
            .map(|c| if let Cell::I(x) = c { *x } else { 0 })
            .collect::<Vec<i128>>()
    };
    let scale = |t: Type| match t {
        Type::Decimal(s) => s as u32,
        _ => 0,
    };
    let fits = |x: i128, t: Type| {
        let ok = match t {
            Type::Int32 => i32::try_from(x).is_ok(),
            Type::WideDecimal(_) => x.unsigned_abs() <= fox_sema::core::MAX_WIDE_DECIMAL.unsigned_abs(),
            _ => i64::try_from(x).is_ok(),
        };
        if ok {
            Ok(Cell::I(x))
        } else {
            Err(())
        }
    };
    match spec.func {
        AggFunc::Count => Ok(Cell::I(vals.len() as i128)),
        AggFunc::Sum | AggFunc::Avg if spec.input == Some(Type::Float64) => {
            let mut s = 0.0;
            for c in vals {
                if let Cell::F(x) = c {
                    s += x;
                }
            }
            Ok(Cell::F(if spec.func == AggFunc::Avg {
                s / vals.len() as f64
            } else {
                s
            }))
        }
        AggFunc::Sum => {
            let s: i128 = ints().iter().sum();
            fits(s, spec.output)
        }
        AggFunc::Avg => {
            let s: i128 = ints().iter().sum();
            let (si, so) = (scale(spec.input.unwrap()), scale(spec.output));
            fits(round_div(s * 10i128.pow(so - si), vals.len() as i128), spec.output)
        }
        AggFunc::Min | AggFunc::Max => {
            let key = |c: &Cell| match (spec.input, c) {
                (Some(Type::String), Cell::I(code)) => Cell::I(rank[*code as usize].into()),
                _ => *c,
            };
            let mut best = vals[0];
            for c in &vals[1..] {
                let better = if spec.func == AggFunc::Min {
                    key(c) < key(&best)
                } else {
                    key(c) > key(&best)
                };
                if better {
                    best = *c;
                }
            }
            Ok(best)
        }
    }
}

fn spec(func: AggFunc, input: Option<Type>, output: Type) -> AggSpec {
    AggSpec { func, input, output }
}

#[test]
fn reduce_by_key_matches_reference() {
    let mut rng = Rng(11);
    let all_aggs = [
        spec(AggFunc::Count, None, Type::Int64),
        spec(AggFunc::Sum, Some(Type::Int32), Type::Int64),
        spec(AggFunc::Sum, Some(Type::Int64), Type::Int64),
        spec(AggFunc::Sum, Some(Type::Decimal(2)), Type::WideDecimal(2)),
        spec(AggFunc::Sum, Some(Type::Float64), Type::Float64),
        spec(AggFunc::Avg, Some(Type::Decimal(2)), Type::Decimal(6)),
        spec(AggFunc::Avg, Some(Type::Int32), Type::Decimal(6)),
        spec(AggFunc::Avg, Some(Type::Float64), Type::Float64),
        spec(AggFunc::Min, Some(Type::Int32), Type::Int32),
        spec(AggFunc::Max, Some(Type::Date), Type::Date),
        spec(AggFunc::Min, Some(Type::Float64), Type::Float64),
        spec(AggFunc::Max, Some(Type::Float64), Type::Float64),
        spec(AggFunc::Min, Some(Type::String), Type::String),
        spec(AggFunc::Max, Some(Type::String), Type::String),
        spec(AggFunc::Max, Some(Type::Decimal(4)), Type::Decimal(4)),
    ];
    let rank: Vec<u32> = (0..64u32).map(|c| (c * 37) % 64).collect();
    for (n, dist) in cases(true) {
        let nkeys = rng.below(3) as usize;
        let key_elems = elems_pick(&mut rng, nkeys);
        let aggs: Vec<AggSpec> = (0..1 + rng.below(4))
            .map(|_| all_aggs[rng.below(all_aggs.len() as u64) as usize].clone())
            .collect();
        let mut keys = gen_rows(&mut rng, &key_elems, n, dist);
        keys.sort();
        let key_cols = cols_of(&key_elems, &keys);
        let value_aggs: Vec<&AggSpec> = aggs.iter().filter(|a| a.func != AggFunc::Count).collect();
        let vals: Vec<Vec<Cell>> = value_aggs
            .iter()
            .map(|a| {
                (0..n)
                    .map(|_| match a.input.unwrap() {
                        Type::Float64 => value(Elem::F64, 10 + rng.below(100)),
                        Type::String => Cell::I(rng.below(64) as i128),
                        Type::Int32 | Type::Date => Cell::I(rng.below(2_000_001) as i128 - 1_000_000),
                        _ => Cell::I((rng.next() >> 20) as i128 - (1 << 43)),
                    })
                    .collect()
            })
            .collect();
        let val_cols: Vec<HostCol> = value_aggs
            .iter()
            .zip(&vals)
            .map(|(a, v)| col_of(Elem::of(a.input.unwrap()), v))
            .collect();
        let len_col = HostCol::U8(vec![1; n]);
        let rank_col = HostCol::U32(rank.clone());
        let mut args: Vec<&HostCol> = key_cols.iter().chain(val_cols.iter()).collect();
        if nkeys == 0 && value_aggs.is_empty() {
            args.push(&len_col);
        }
        if aggs.iter().any(|a| a.input == Some(Type::String)) {
            args.push(&rank_col);
        }
        let got = run(
            &Kernel::ReduceByKey {
                nkeys,
                aggs: aggs.clone(),
            },
            &args,
        );
        // Reference: runs of equal keys.
        let mut groups: Vec<(usize, usize)> = Vec::new();
        for i in 0..n {
            if nkeys > 0 && i > 0 && keys[i] == keys[i - 1] || nkeys == 0 && i > 0 {
                groups.last_mut().unwrap().1 = i + 1;
            } else {
                groups.push((i, i + 1));
            }
        }
        let mut want: Vec<Vec<Cell>> = Vec::new();
        let mut failed = false;
        for &(s, e) in &groups {
            let mut out = keys[s].clone();
            let mut v = 0;
            for a in &aggs {
                let cells: Vec<Cell> = if a.func == AggFunc::Count {
                    vec![Cell::I(0); e - s]
                } else {
                    v += 1;
                    vals[v - 1][s..e].to_vec()
                };
                match agg_ref(a, &cells, &rank) {
                    Ok(c) => out.push(c),
                    Err(()) => failed = true,
                }
            }
            want.push(out);
        }
        let what = format!("reduce n={n} {dist:?} nkeys={nkeys} {aggs:?}");
        if failed {
            let err = got.unwrap_err();
            assert!(err.0.contains("does not fit"), "{what}: {err}");
            continue;
        }
        let out_elems: Vec<Elem> = key_elems
            .iter()
            .copied()
            .chain(aggs.iter().map(|a| Elem::of(a.output)))
            .collect();
        assert_cols(&got.unwrap(), &cols_of(&out_elems, &want), &what);
    }
}

#[test]
fn reduce_sum_overflow_and_rounding() {
    let key = HostCol::I32(vec![1, 1, 2]);
    let v = HostCol::I64(vec![i64::MAX, 1, 5]);
    let err = run(
        &Kernel::ReduceByKey {
            nkeys: 1,
            aggs: vec![spec(AggFunc::Sum, Some(Type::Int64), Type::Int64)],
        },
        &[&key, &v],
    )
    .unwrap_err();
    assert!(
        err.0.contains("ReduceByKey") && err.0.contains("does not fit int64"),
        "{err}"
    );
    // 128-bit accumulation: the partial sum passes i64::MAX, the result fits.
    let v = HostCol::I64(vec![i64::MAX, -10, 5]);
    let got = run_ok(
        &Kernel::ReduceByKey {
            nkeys: 1,
            aggs: vec![spec(AggFunc::Sum, Some(Type::Int64), Type::Int64)],
        },
        &[&key, &v],
    );
    assert_eq!(got[1], HostCol::I64(vec![i64::MAX - 10, 5]));
    // avg of 0.01, 0.02 (decimal(2)) = 0.015000; avg of 1, 2, 2 (int) = 1.666667; avg of
    // -1, -2 = -1.500000; 2/3 rounds half away from zero at the 6th digit.
    let key = HostCol::I32(vec![1, 1, 2, 2, 2, 3, 3]);
    let d = HostCol::I64(vec![1, 2, 1, 2, 2, -1, -2]);
    let got = run_ok(
        &Kernel::ReduceByKey {
            nkeys: 1,
            aggs: vec![
                spec(AggFunc::Avg, Some(Type::Decimal(2)), Type::Decimal(6)),
                spec(AggFunc::Avg, Some(Type::Int64), Type::Decimal(6)),
            ],
        },
        &[&key, &d, &d],
    );
    assert_eq!(got[1], HostCol::I64(vec![15_000, 16_667, -15_000]));
    assert_eq!(got[2], HostCol::I64(vec![1_500_000, 1_666_667, -1_500_000]));
    // No keys: one group, or no row when empty.
    let empty = HostCol::I64(vec![]);
    let got = run_ok(
        &Kernel::ReduceByKey {
            nkeys: 0,
            aggs: vec![spec(AggFunc::Sum, Some(Type::Int64), Type::Int64)],
        },
        &[&empty],
    );
    assert_eq!(got, vec![HostCol::I64(vec![])]);
}

// ---- tries ---------------------------------------------------------------------------------

#[test]
fn trie_build_matches_reference() {
    let mut rng = Rng(12);
    for (n, dist) in cases(true) {
        let arity = 1 + rng.below(3) as usize;
        let elems = elems_pick(&mut rng, arity);
        let rs = sorted_dedup(gen_rows(&mut rng, &elems, n, dist));
        let cols = cols_of(&elems, &rs);
        let got = run_ok(&Kernel::TrieBuild { arity }, &refs(&cols));
        // Reference: the distinct prefixes of each length, and for each prefix the range
        // of its extensions one level down.
        let prefixes: Vec<Vec<Vec<Cell>>> = (1..=arity)
            .map(|d| sorted_dedup(rs.iter().map(|r| r[..d].to_vec()).collect()))
            .collect();
        let mut want = Vec::new();
        for d in 0..arity {
            want.push(col_of(elems[d], &prefixes[d].iter().map(|p| p[d]).collect::<Vec<_>>()));
            if d + 1 < arity {
                let mut start = Vec::new();
                for p in &prefixes[d] {
                    start.push(prefixes[d + 1].iter().position(|q| q[..=d] == p[..]).unwrap() as u32);
                }
                start.push(prefixes[d + 1].len() as u32);
                want.push(HostCol::U32(start));
            }
        }
        if n > 5000 {
            // The position search above is quadratic; check large cases by level sizes and
            // by the child counts summing to the next level.
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(&want).step_by(2) {
                assert!(same(g, w), "trie n={n} levels");
            }
            continue;
        }
        assert_cols(&got, &want, &format!("trie n={n} {dist:?}"));
    }
}

#[test]
fn root_range_range_count_and_expand_match_reference() {
    let mut rng = Rng(13);
    for (n, dist) in cases(true) {
        let values = gen_col(&mut rng, Elem::I32, n, dist);
        let got = run_ok(&Kernel::RootRange, &[&values]);
        assert_eq!(got, vec![HostCol::U32(vec![0]), HostCol::U32(vec![n as u32])]);
        let m = n.min(5000);
        let lo: Vec<u32> = (0..m).map(|_| rng.below(1000) as u32).collect();
        let hi: Vec<u32> = lo.iter().map(|l| l + draw(&mut rng, dist) as u32 % 20).collect();
        let (loc, hic) = (HostCol::U32(lo.clone()), HostCol::U32(hi.clone()));
        let counts = run_ok(&Kernel::RangeCount, &[&loc, &hic]);
        assert_eq!(
            counts,
            vec![HostCol::U64(
                lo.iter().zip(&hi).map(|(l, h)| u64::from(h - l)).collect()
            )]
        );
        let scan = run_ok(&Kernel::ExclusiveScan, &[&counts[0]]);
        let got = run_ok(&Kernel::Expand, &[&loc, &scan[0], &scan[1]]);
        let (mut parent, mut pos) = (Vec::new(), Vec::new());
        for i in 0..m {
            for p in lo[i]..hi[i] {
                parent.push(i as u32);
                pos.push(p);
            }
        }
        // Windows of the outputs: every cut of the sequence gives its slice.
        let total = parent.len() as u64;
        for _ in 0..4 {
            let a = rng.below(total + 1);
            let b = a + rng.below(total - a + 1);
            let w = HostCol::U64(vec![a, b]);
            let got = run_ok(&Kernel::Expand, &[&loc, &scan[0], &scan[1], &w]);
            let (a, b) = (a as usize, b as usize);
            assert_eq!(
                got,
                vec![HostCol::U32(parent[a..b].to_vec()), HostCol::U32(pos[a..b].to_vec())],
                "expand n={m} window {a}..{b}"
            );
        }
        assert_eq!(got, vec![HostCol::U32(parent), HostCol::U32(pos)], "expand n={m}");
    }
    for w in [vec![2u64, 1], vec![0, 4], vec![0]] {
        let err = run(
            &Kernel::Expand,
            &[
                &HostCol::U32(vec![0, 0]),
                &HostCol::U64(vec![0, 1]),
                &HostCol::U64(vec![3]),
                &HostCol::U64(w.clone()),
            ],
        )
        .unwrap_err();
        assert!(err.0.contains("window"), "{w:?}: {err}");
    }
    let err = run(&Kernel::RangeCount, &[&HostCol::U32(vec![5]), &HostCol::U32(vec![4])]).unwrap_err();
    assert!(err.0.contains("RangeCount"), "{err}");
    let err = run(
        &Kernel::Expand,
        &[
            &HostCol::U32(vec![0, 0]),
            &HostCol::U64(vec![0, 5]),
            &HostCol::U64(vec![3]),
        ],
    )
    .unwrap_err();
    assert!(err.0.contains("Expand") && err.0.contains("exclusive scan"), "{err}");
}

#[test]
fn sorted_search_matches_reference() {
    let mut rng = Rng(14);
    for (n, dist) in cases(true) {
        let elem = ELEMS[rng.below(6) as usize];
        let vals: Vec<Cell> = sorted_dedup(gen_rows(&mut rng, &[elem], n, dist))
            .into_iter()
            .map(|r| r[0])
            .collect();
        let values = col_of(elem, &vals);
        let m = n.min(20_000);
        let mut lo = Vec::new();
        let mut hi = Vec::new();
        for _ in 0..m {
            let a = rng.below(vals.len() as u64 + 1) as u32;
            let b = a + rng.below(vals.len() as u64 - a as u64 + 1) as u32;
            lo.push(a);
            hi.push(b);
        }
        let needles: Vec<Cell> = (0..m).map(|_| value(elem, draw(&mut rng, dist))).collect();
        let got = run_ok(
            &Kernel::SortedSearch,
            &[
                &values,
                &HostCol::U32(lo.clone()),
                &HostCol::U32(hi.clone()),
                &col_of(elem, &needles),
            ],
        );
        let mut found = Vec::new();
        let mut pos = Vec::new();
        for i in 0..m {
            let (a, b) = (lo[i] as usize, hi[i] as usize);
            let p = (a..b).find(|&j| vals[j] >= needles[i]).unwrap_or(b);
            found.push(u8::from(p < b && vals[p] == needles[i]));
            pos.push(p as u32);
        }
        assert_eq!(
            got,
            vec![HostCol::U8(found), HostCol::U32(pos)],
            "search n={n} {dist:?} {elem:?}"
        );
    }
    let err = run(
        &Kernel::SortedSearch,
        &[
            &HostCol::I32(vec![1, 2]),
            &HostCol::U32(vec![0]),
            &HostCol::U32(vec![3]),
            &HostCol::I32(vec![1]),
        ],
    )
    .unwrap_err();
    assert!(err.0.contains("SortedSearch") && err.0.contains("not within"), "{err}");
}

#[test]
fn bound_range_matches_reference() {
    let mut rng = Rng(16);
    let kinds = [None, Some(false), Some(true)];
    let offsets = [0i64, 1, -3, 1 << 33, i64::MAX, i64::MIN];
    for (n, dist) in cases(false) {
        let elem = [Elem::I32, Elem::I64][rng.below(2) as usize];
        let nkeys = rng.below(3) as usize;
        let key_elems: Vec<Elem> = (0..nkeys).map(|_| ELEMS[rng.below(6) as usize]).collect();
        // Searched rows: keys from a small domain (many rows per key), sorted on (keys, value).
        let mut types = key_elems.clone();
        types.push(elem);
        // A large case searches few rows from many probing rows (the parallel path).
        let large = n > 3001;
        let mut rows = gen_rows(&mut rng, &types, if large { 100 } else { n }, dist);
        for r in rows.iter_mut() {
            for (k, &e) in key_elems.iter().enumerate() {
                r[k] = value(e, rng.below(3));
            }
        }
        rows.sort();
        let searched: Vec<HostCol> = (0..=nkeys)
            .map(|c| col_of(types[c], &rows.iter().map(|r| r[c]).collect::<Vec<_>>()))
            .collect();
        let m = if large { 17_000 } else { (n / 3).clamp(1, 64) };
        let probe_keys: Vec<Vec<Cell>> = (0..m)
            .map(|_| key_elems.iter().map(|&e| value(e, rng.below(4))).collect())
            .collect();
        for lower in kinds {
            for upper in kinds {
                if (lower.is_none() && upper.is_none()) || (large && (lower, upper) != (Some(false), Some(true))) {
                    continue;
                }
                let mut bound = |open: Option<bool>| {
                    open.map(|open| {
                        let b = RangeBound {
                            offset: offsets[rng.below(offsets.len() as u64) as usize],
                            open,
                        };
                        let col: Vec<Cell> = (0..m).map(|_| value(elem, draw(&mut rng, dist))).collect();
                        (b, col)
                    })
                };
                let (lo_b, hi_b) = (bound(lower), bound(upper));
                let mut args = searched.clone();
                for (k, &e) in key_elems.iter().enumerate() {
                    args.push(col_of(e, &probe_keys.iter().map(|r| r[k]).collect::<Vec<_>>()));
                }
                for (_, c) in lo_b.iter().chain(&hi_b) {
                    args.push(col_of(elem, c));
                }
                let kernel = Kernel::BoundRange {
                    nkeys,
                    lower: lo_b.as_ref().map(|b| b.0),
                    upper: hi_b.as_ref().map(|b| b.0),
                };
                let got = run_ok(&kernel, &refs(&args));
                let int = |c: &Cell| match c {
                    Cell::I(x) => *x,
                    Cell::F(_) => unreachable!("integer values"),
                };
                let bound_at = |b: &Option<(RangeBound, Vec<Cell>)>, i: usize| {
                    b.as_ref().map(|(b, c)| (int(&c[i]) + i128::from(b.offset), b.open))
                };
                let mut lo = Vec::new();
                let mut hi = Vec::new();
                for (i, pk) in probe_keys.iter().enumerate() {
                    let (l, h) = (bound_at(&lo_b, i), bound_at(&hi_b, i));
                    // Rows before the probing row: smaller keys, or equal keys and a value
                    // below the bound (`with_equal`: or equal to it).
                    let count = |x: Option<(i128, bool)>, keys_equal_before: bool| {
                        rows.iter()
                            .filter(|r| match r[..nkeys].cmp(&pk[..]) {
                                std::cmp::Ordering::Less => true,
                                std::cmp::Ordering::Greater => false,
                                std::cmp::Ordering::Equal => match x {
                                    Some((x, with_equal)) => int(&r[nkeys]) < x || (with_equal && int(&r[nkeys]) == x),
                                    None => keys_equal_before,
                                },
                            })
                            .count()
                    };
                    let a = count(l, false);
                    let b = count(h.map(|(x, open)| (x, !open)), true).max(a);
                    // The range holds exactly the rows of equal keys within both bounds.
                    let inside = rows
                        .iter()
                        .filter(|r| {
                            r[..nkeys] == pk[..]
                                && l.is_none_or(|(x, open)| if open { int(&r[nkeys]) > x } else { int(&r[nkeys]) >= x })
                                && h.is_none_or(|(x, open)| if open { int(&r[nkeys]) < x } else { int(&r[nkeys]) <= x })
                        })
                        .count();
                    assert_eq!(inside, b - a, "the range holds the rows inside");
                    lo.push(a as u32);
                    hi.push(b as u32);
                }
                assert_eq!(
                    got,
                    vec![HostCol::U32(lo), HostCol::U32(hi)],
                    "n={n} {dist:?} {elem:?} keys {key_elems:?} {kernel:?}"
                );
            }
        }
    }
    let err = run(
        &Kernel::BoundRange {
            nkeys: 0,
            lower: None,
            upper: Some(RangeBound { offset: 0, open: false }),
        },
        &[&HostCol::I32(vec![1, 2]), &HostCol::I64(vec![1])],
    )
    .unwrap_err();
    assert!(err.0.contains("BoundRange"), "{err}");
}

/// The integer value of a cell.
fn int_of(c: &Cell) -> i128 {
    match c {
        Cell::I(x) => *x,
        Cell::F(_) => unreachable!("integer values"),
    }
}

/// The merge-sort tree of `d` as its contract defines it: per level, each aligned block's
/// positions ordered by (value, position).
fn ineq_tree_ref(d: &[i128]) -> Vec<u32> {
    let n = d.len();
    let mut out = Vec::new();
    for l in 0..fox_kernel::ineq_levels(n) {
        let width = 1usize << l;
        for start in (0..n).step_by(width) {
            let mut block: Vec<u32> = (start..(start + width).min(n)).map(|p| p as u32).collect();
            block.sort_by_key(|&p| (d[p as usize], p));
            out.extend(block);
        }
    }
    out
}

#[test]
fn ineq_tree_matches_reference() {
    let mut rng = Rng(41);
    for (n, dist) in cases(true) {
        let elem = [Elem::I32, Elem::I64][rng.below(2) as usize];
        let cells: Vec<Cell> = (0..n).map(|_| value(elem, draw(&mut rng, dist))).collect();
        let got = run_ok(&Kernel::IneqTree, &[&col_of(elem, &cells)]);
        let d: Vec<i128> = cells.iter().map(int_of).collect();
        assert_eq!(got, vec![HostCol::U32(ineq_tree_ref(&d))], "n={n} {dist:?} {elem:?}");
    }
    let err = run(&Kernel::IneqTree, &[&HostCol::F64(vec![1.0])]).unwrap_err();
    assert!(err.0.contains("IneqTree"), "{err}");
}

#[test]
fn ineq_ranges_hold_exactly_the_positions_within_both_bounds() {
    let mut rng = Rng(43);
    let kinds = [None, Some(false), Some(true)];
    let offsets = [0i64, 1, -3, 1 << 33, i64::MAX, i64::MIN];
    for (n, dist) in cases(true) {
        let elem = [Elem::I32, Elem::I64][rng.below(2) as usize];
        let cells: Vec<Cell> = (0..n).map(|_| value(elem, draw(&mut rng, dist))).collect();
        let dcol = col_of(elem, &cells);
        let d: Vec<i128> = cells.iter().map(int_of).collect();
        let tree = ineq_tree_ref(&d);
        let large = n > 3001;
        let m = if large { 20_000 } else { (n / 2).clamp(1, 64) };
        // Ranges of positions: whole, empty, prefixes, suffixes and arbitrary ones (in a
        // large case, which takes the parallel path, mostly short ones).
        let ranges: Vec<(u32, u32)> = (0..m)
            .map(|i| {
                let a = rng.below(n as u64 + 1) as u32;
                let b = rng.below(n as u64 + 1) as u32;
                match i % 4 {
                    _ if large && i % 1000 != 0 => (a, (a + rng.below(300) as u32).min(n as u32)),
                    0 => (0, n as u32),
                    1 => (0, a),
                    2 => (a, n as u32),
                    _ => (a.min(b), a.max(b)),
                }
            })
            .collect();
        for lower in kinds {
            for upper in kinds {
                if (lower.is_none() && upper.is_none()) || (large && (lower, upper) != (Some(true), Some(false))) {
                    continue;
                }
                let mut bound = |open: Option<bool>| {
                    open.map(|open| {
                        let b = RangeBound {
                            offset: if rng.below(2) == 0 {
                                0
                            } else {
                                offsets[rng.below(offsets.len() as u64) as usize]
                            },
                            open,
                        };
                        let col: Vec<Cell> = (0..m).map(|_| value(elem, draw(&mut rng, dist))).collect();
                        (b, col)
                    })
                };
                let (lo_b, hi_b) = (bound(lower), bound(upper));
                let mut args = vec![
                    dcol.clone(),
                    HostCol::U32(tree.clone()),
                    HostCol::U32(ranges.iter().map(|r| r.0).collect()),
                    HostCol::U32(ranges.iter().map(|r| r.1).collect()),
                ];
                for (_, c) in lo_b.iter().chain(&hi_b) {
                    args.push(col_of(elem, c));
                }
                let kernel = Kernel::IneqRanges {
                    lower: lo_b.as_ref().map(|b| b.0),
                    upper: hi_b.as_ref().map(|b| b.0),
                };
                let got = run_ok(&kernel, &refs(&args));
                let [HostCol::U32(lo), HostCol::U32(hi), HostCol::U32(row)] = &got[..] else {
                    panic!("three u32 columns: {got:?}");
                };
                let slots = 2 * fox_kernel::ineq_levels(n);
                assert_eq!((lo.len(), hi.len(), row.len()), (m * slots, m * slots, m * slots));
                let bound_at = |b: &Option<(RangeBound, Vec<Cell>)>, i: usize| {
                    b.as_ref().map(|(b, c)| (int_of(&c[i]) + i128::from(b.offset), b.open))
                };
                for (i, &(a, b)) in ranges.iter().enumerate() {
                    let (l, h) = (bound_at(&lo_b, i), bound_at(&hi_b, i));
                    let inside = |v: i128| {
                        l.is_none_or(|(x, open)| if open { v > x } else { v >= x })
                            && h.is_none_or(|(x, open)| if open { v < x } else { v <= x })
                    };
                    let want: Vec<u32> = (a..b).filter(|&p| inside(d[p as usize])).collect();
                    let mut entries = Vec::new();
                    let mut last_block_end = 0u32;
                    for s in i * slots..(i + 1) * slots {
                        assert_eq!(row[s], i as u32);
                        assert!(
                            lo[s] <= hi[s] && hi[s] as usize <= tree.len(),
                            "slot {s}: {} .. {}",
                            lo[s],
                            hi[s]
                        );
                        let part = &tree[lo[s] as usize..hi[s] as usize];
                        // Each slot is ordered by the values, the slots by position.
                        assert!(part
                            .windows(2)
                            .all(|w| (d[w[0] as usize], w[0]) < (d[w[1] as usize], w[1])));
                        if let Some(&first) = part.iter().min() {
                            assert!(first >= last_block_end, "slot {s} before an earlier slot's positions");
                            last_block_end = *part.iter().max().unwrap_or(&first);
                        }
                        entries.extend_from_slice(part);
                    }
                    entries.sort_unstable();
                    assert_eq!(
                        entries, want,
                        "n={n} {dist:?} {elem:?} {kernel:?} row {i} range {a}..{b}"
                    );
                }
            }
        }
    }
    // A range beyond the values, and a tree of the wrong size, are errors.
    let bound = Some(RangeBound { offset: 0, open: false });
    let kernel = Kernel::IneqRanges {
        lower: bound,
        upper: None,
    };
    let d = HostCol::I32(vec![3, 1]);
    let tree = HostCol::U32(vec![0, 1, 1, 0]);
    let beyond = run(
        &kernel,
        &[
            &d,
            &tree,
            &HostCol::U32(vec![0]),
            &HostCol::U32(vec![3]),
            &HostCol::I32(vec![0]),
        ],
    )
    .unwrap_err();
    assert!(
        beyond.0.contains("IneqRanges") && beyond.0.contains("not within"),
        "{beyond}"
    );
    let short = run(
        &kernel,
        &[
            &d,
            &HostCol::U32(vec![0, 1]),
            &HostCol::U32(vec![0]),
            &HostCol::U32(vec![2]),
            &HostCol::I32(vec![0]),
        ],
    )
    .unwrap_err();
    assert!(short.0.contains("IneqRanges"), "{short}");
}

#[test]
fn intersect_count_matches_reference() {
    let mut rng = Rng(15);
    for (n, dist) in cases(true) {
        let elem = ELEMS[rng.below(6) as usize];
        let ways = 1 + rng.below(4) as usize;
        let m = n.min(300);
        let mut args: Vec<HostCol> = Vec::new();
        let mut levels: Vec<(Vec<Cell>, Vec<u32>, Vec<u32>)> = Vec::new();
        for _ in 0..ways {
            let vals: Vec<Cell> = sorted_dedup(gen_rows(&mut rng, &[elem], n.max(1), dist))
                .into_iter()
                .map(|r| r[0])
                .collect();
            let mut lo = Vec::new();
            let mut hi = Vec::new();
            for _ in 0..m {
                let a = rng.below(vals.len() as u64 + 1) as u32;
                let b = a + rng.below(vals.len() as u64 - a as u64 + 1) as u32;
                lo.push(a);
                hi.push(b);
            }
            args.push(col_of(elem, &vals));
            args.push(HostCol::U32(lo.clone()));
            args.push(HostCol::U32(hi.clone()));
            levels.push((vals, lo, hi));
        }
        let refs: Vec<&HostCol> = args.iter().collect();
        let got = run_ok(&Kernel::IntersectCount { ways }, &refs);
        let mut want = 0i64;
        for i in 0..m {
            let (v0, lo0, hi0) = &levels[0];
            for x in &v0[lo0[i] as usize..hi0[i] as usize] {
                if levels[1..]
                    .iter()
                    .all(|(v, lo, hi)| v[lo[i] as usize..hi[i] as usize].binary_search(x).is_ok())
                {
                    want += 1;
                }
            }
        }
        let want = if want == 0 { vec![] } else { vec![want] };
        assert_eq!(
            got,
            vec![HostCol::I64(want)],
            "intersect n={n} {dist:?} {elem:?} ways={ways}"
        );
    }
    let err = run(
        &Kernel::IntersectCount { ways: 2 },
        &[
            &HostCol::I32(vec![1, 2]),
            &HostCol::U32(vec![0]),
            &HostCol::U32(vec![2]),
            &HostCol::I32(vec![1, 2]),
            &HostCol::U32(vec![0]),
            &HostCol::U32(vec![3]),
        ],
    )
    .unwrap_err();
    assert!(
        err.0.contains("IntersectCount") && err.0.contains("not within"),
        "{err}"
    );
}

#[test]
fn min_range_matches_reference() {
    let lo0 = HostCol::U32(vec![0, 10, 4, 7]);
    let hi0 = HostCol::U32(vec![5, 12, 4, 9]);
    let lo1 = HostCol::U32(vec![1, 0, 0, 3]);
    let hi1 = HostCol::U32(vec![3, 9, 9, 5]);
    let got = run_ok(&Kernel::MinRange { ways: 2 }, &[&lo0, &hi0, &lo1, &hi1]);
    assert_eq!(
        got,
        vec![HostCol::U32(vec![1, 10, 4, 7]), HostCol::U32(vec![3, 12, 4, 9])]
    );
    let err = run(&Kernel::MinRange { ways: 1 }, &[&hi1, &lo1]).unwrap_err();
    assert!(err.0.contains("MinRange") && err.0.contains("below"), "{err}");
}

// ---- argument checks and the backend ---------------------------------------------------------

/// Launches whose arguments break the kernel's contract are errors naming the kernel: the
/// runtime's check (`fox_kernel::check_args`, which `run` makes as the runtime does).
#[test]
fn wrong_arguments_are_errors_naming_the_kernel() {
    let a = HostCol::I32(vec![1, 2]);
    let b = HostCol::I32(vec![1]);
    let f = HostCol::F64(vec![1.0, 2.0]);
    let one_flag = HostCol::U8(vec![1]);
    let cases: Vec<(Kernel, Vec<&HostCol>, &str)> = vec![
        (Kernel::Compact, vec![&a, &a], "(flags) must be U8"),
        (Kernel::Compact, vec![&one_flag, &a], "rows"),
        (Kernel::Concat { parts: 2, width: 1 }, vec![&a, &f], "group 0"),
        (Kernel::AdjacentDistinct, vec![&a, &b], "rows"),
        (
            Kernel::MergeUnion {
                width: 1,
                disjoint: false,
            },
            vec![&a],
            "takes 2 arguments",
        ),
        (
            Kernel::SortPerm {
                desc: vec![false],
                by_rank: vec![],
            },
            vec![&a],
            "by_rank",
        ),
        (Kernel::TrieBuild { arity: 2 }, vec![&a], "takes 2 arguments"),
        (
            Kernel::LoadInput {
                input: 0,
                whole: false,
                hash: Vec::new(),
            },
            vec![],
            "loads input 0",
        ),
        (
            Kernel::ReduceByKey {
                nkeys: 1,
                aggs: vec![spec(AggFunc::Sum, Some(Type::Int64), Type::Int64)],
            },
            vec![&a, &a],
            "the value of aggregate 0",
        ),
    ];
    for (k, args, want) in cases {
        let err = run(&k, &args).unwrap_err();
        assert!(err.0.contains(k.name()) && err.0.contains(want), "{k:?}: {err}");
    }
    // Host-side kernels never run on a backend.
    let err = fox_cpu::run_kernel(
        &Kernel::LoadInput {
            input: 0,
            whole: false,
            hash: Vec::new(),
        },
        &[],
        &Ctx::default(),
    )
    .unwrap_err();
    assert!(err.0.contains("LoadInput") && err.0.contains("host"), "{err}");
}

#[test]
fn backend_accounts_memory_and_checks_handles() {
    use fox_runtime::Backend;
    let mut be = fox_cpu::CpuBackend::new();
    let a = be.upload(HostCol::I64(vec![3, 1, 2])).unwrap();
    let b = be.upload(HostCol::U8(vec![1, 0, 1])).unwrap();
    assert_eq!(be.mem().in_use, 27);
    let outs = be.launch(&Kernel::Compact, &[&b, &a], &Ctx::default()).unwrap();
    assert_eq!(outs[0].len, 2);
    assert_eq!(be.download(&outs[0]).unwrap(), HostCol::I64(vec![3, 2]));
    assert_eq!(be.mem().in_use, 43);
    be.free(a);
    be.free(b);
    let m = be.mem();
    assert_eq!((m.in_use, m.peak, m.total_allocated), (16, 43, 43));
    let stale = fox_runtime::DevBuf {
        id: 0,
        elem: Elem::I64,
        len: 3,
    };
    assert!(be.download(&stale).unwrap_err().0.contains("not allocated"));
    let lie = fox_runtime::DevBuf {
        id: outs[0].id,
        elem: Elem::I64,
        len: 5,
    };
    assert!(be.download(&lie).is_err());
    assert_eq!(be.name(), "cpu");
    be.sync().unwrap();
}

// ---- cancellation ----------------------------------------------------------------------

/// A launch context whose cancellation flag is set.
struct Cancelled(std::sync::atomic::AtomicBool);

impl fox_runtime::LaunchCtx for Cancelled {
    fn string_code(&self, _: &str) -> Option<u32> {
        None
    }
    fn cancel_flag(&self) -> &std::sync::atomic::AtomicBool {
        &self.0
    }
}

#[test]
fn kernels_that_can_run_long_stop_once_the_run_is_cancelled() {
    // A self-join of a sorted column with runs of 4 equal keys, large enough for the
    // parallel paths.
    let n = 100_000usize;
    let a = HostCol::U32((0..n as u32).map(|i| i / 4).collect());
    let counts = run_ok(&Kernel::JoinCount { nkeys: 1 }, &[&a, &a]).remove(0);
    let scan = run_ok(&Kernel::ExclusiveScan, &[&counts]);
    let (offsets, total) = (&scan[0], &scan[1]);
    let zeros = HostCol::U32(vec![0; n]);
    let lo = HostCol::U32((0..n as u32).collect());
    let hi = HostCol::U32((0..n as u32).map(|i| (i + 4).min(n as u32)).collect());
    let flags = HostCol::U8((0..n).map(|i| (i % 3 == 0) as u8).collect());
    let perm = HostCol::U32((0..n as u32).rev().collect());
    let launches: Vec<(Kernel, Vec<&HostCol>)> = vec![
        (Kernel::JoinCount { nkeys: 1 }, vec![&a, &a]),
        (Kernel::JoinWrite { nkeys: 1 }, vec![&a, &a, offsets, total]),
        (Kernel::MatchFlags { nkeys: 1, anti: false }, vec![&a, &a]),
        (Kernel::Expand, vec![&zeros, offsets, total]),
        (Kernel::IntersectCount { ways: 2 }, vec![&a, &lo, &hi, &a, &lo, &hi]),
        (
            Kernel::SortPerm {
                desc: vec![true],
                by_rank: vec![false],
            },
            vec![&a],
        ),
        (Kernel::Gather { shift: 0 }, vec![&perm, &a]),
        (Kernel::Compact, vec![&flags, &a]),
    ];
    let cancelled = Cancelled(std::sync::atomic::AtomicBool::new(true));
    for (k, args) in launches {
        // Without a request to stop the kernel runs; with one it stops with an error.
        run_ok(&k, &args);
        match fox_cpu::run_kernel(&k, &args, &cancelled) {
            Err(e) => assert!(e.0.contains("interrupted"), "{k:?}: {e}"),
            Ok(_) => panic!("{k:?} ran to the end although the run was cancelled"),
        }
    }
}

#[test]
fn counts_too_large_for_any_argument_list_are_errors() {
    let col = HostCol::U32(vec![0, 1, 2]);
    let args = [&col, &col, &col, &col];
    let huge = [usize::MAX, usize::MAX / 2, usize::MAX / 2 + 1, usize::MAX / 3 + 1];
    for n in huge {
        for k in [
            Kernel::JoinCount { nkeys: n },
            Kernel::JoinWrite { nkeys: n },
            Kernel::MatchFlags { nkeys: n, anti: false },
            Kernel::MergeUnion {
                width: n,
                disjoint: false,
            },
            Kernel::MergeUnion {
                width: n,
                disjoint: true,
            },
            Kernel::IntersectCount { ways: n },
            Kernel::MinRange { ways: n },
            Kernel::TrieBuild { arity: n },
            Kernel::Concat { parts: n, width: 3 },
            Kernel::ReduceByKey {
                nkeys: n,
                aggs: vec![AggSpec {
                    func: AggFunc::Count,
                    input: None,
                    output: Type::Int64,
                }],
            },
        ] {
            let e = run(&k, &args).expect_err("a count beyond the arguments");
            assert!(e.0.contains(k.name()), "{k:?}: {e}");
        }
    }
}

#[test]
fn an_average_beyond_18_digits_is_an_error() {
    // The mean of decimal(2) values is of scale 6 and at most 18 digits:
    // 999999999999.99 gives 999999999999.990000, 1000000000000.00 one digit too many.
    let avg = |v: Vec<i64>| {
        let vals = HostCol::I64(v);
        let k = Kernel::ReduceByKey {
            nkeys: 0,
            aggs: vec![AggSpec {
                func: AggFunc::Avg,
                input: Some(Type::Decimal(2)),
                output: Type::Decimal(6),
            }],
        };
        let fused = Kernel::FusedReduce {
            filter: None,
            nkeys: 0,
            aggs: vec![AggSpec {
                func: AggFunc::Avg,
                input: Some(Type::Decimal(2)),
                output: Type::Decimal(6),
            }],
            exprs: vec![Some(fox_kernel::KExpr {
                kind: fox_kernel::KExprKind::Col(0),
                ty: Type::Decimal(2),
            })],
            n_cols: 1,
        };
        let a = run(&k, &[&vals]).map_err(|e| e.0.replace("kernel ReduceByKey: ", ""));
        let b = run(&fused, &[&vals]).map_err(|e| e.0.replace("kernel FusedReduce: ", ""));
        assert_eq!(a, b, "ReduceByKey and FusedReduce differ");
        a
    };
    let max_mean = 10i64.pow(14) - 1;
    assert_eq!(
        avg(vec![max_mean, max_mean]).unwrap(),
        vec![HostCol::I64(vec![max_mean * 10_000])]
    );
    let e = avg(vec![max_mean + 1, max_mean + 1]).unwrap_err();
    assert!(
        e.contains("the average of the group at row 0 does not fit decimal(6)"),
        "{e}"
    );
}
