//! GPU vs CPU: TrieBuild on random sorted unique relations of arity 1 to 3 (and on sorted
//! rows with repeats), Expand with
//! zero-length and long ranges (and windows of its outputs), SortedSearch hits and misses,
//! IntersectCount over 1 to 4 ways with skewed range sizes and with one way shared by runs
//! of rows (the shared-memory tables), BoundRange with every kind of bound, their
//! argument errors, IneqTree and IneqRanges (the inequality join's tree and ranges), and
//! 10^7-row cases.

use crate::compare;
use fox_cuda::testing::{gpu, random_col, sort_rows, Dist, Rng, Strings, ELEMS, LARGE, SIZES};
use fox_kernel::{Elem, Kernel};
use fox_runtime::HostCol;

fn trie_build_arity_one_to_three() {
    let mut gpu = gpu("trie_build_arity_one_to_three");
    let mut rng = Rng::new(31);
    let ctx = Strings::default();
    let shapes: [&[Elem]; 8] = [
        &[Elem::U32],
        &[Elem::F64],
        &[Elem::I128],
        &[Elem::U32, Elem::U32],
        &[Elem::I32, Elem::F64],
        &[Elem::I128, Elem::U32],
        &[Elem::U32, Elem::U32, Elem::U32],
        &[Elem::U8, Elem::I64, Elem::U64],
    ];
    for elems in shapes {
        for &dist in &Dist::ALL {
            for &n in SIZES.iter().chain(&[100_003]) {
                let cols: Vec<HostCol> = elems.iter().map(|&e| random_col(&mut rng, e, n, dist)).collect();
                let rel = sort_rows(&cols, true);
                let case = format!("columns {elems:?}, dist {dist:?}, n {n} ({} unique)", rel[0].len());
                compare(&mut gpu, &Kernel::TrieBuild { arity: elems.len() }, &rel, &ctx, &case)
                    .expect("TrieBuild succeeds");
            }
        }
    }
    let cols: Vec<HostCol> = (0..2)
        .map(|_| random_col(&mut rng, Elem::U32, LARGE, Dist::Range(1 << 13)))
        .collect();
    let rel = sort_rows(&cols, true);
    compare(&mut gpu, &Kernel::TrieBuild { arity: 2 }, &rel, &ctx, "large arity 2").expect("succeeds");
    // Sorted rows with repeats (outside the contract): a repeated row is one node, as on
    // the CPU, where the last level is not the last column.
    for elems in [
        &[Elem::U32][..],
        &[Elem::I32, Elem::U32],
        &[Elem::U8, Elem::I64, Elem::U64],
    ] {
        for n in [1, 2, 5_000, 100_003] {
            let cols: Vec<HostCol> = elems
                .iter()
                .map(|&e| random_col(&mut rng, e, n, Dist::Range(4)))
                .collect();
            let rel = sort_rows(&cols, false);
            let case = format!("repeated rows, columns {elems:?}, n {n}");
            compare(&mut gpu, &Kernel::TrieBuild { arity: elems.len() }, &rel, &ctx, &case).expect("succeeds");
        }
    }
}

/// `lo`, `offsets`, `total` of random ranges with lengths below `max_len` (many zero).
fn expand_args(rng: &mut Rng, n: usize, max_len: u64, zero_percent: u64) -> Vec<HostCol> {
    let mut lo = Vec::with_capacity(n);
    let mut offsets = Vec::with_capacity(n);
    let mut total = 0u64;
    for _ in 0..n {
        let len = if rng.chance(zero_percent) {
            0
        } else {
            rng.below(max_len)
        };
        lo.push(rng.below(1 << 30) as u32);
        offsets.push(total);
        total += len;
    }
    vec![HostCol::U32(lo), HostCol::U64(offsets), HostCol::U64(vec![total])]
}

fn expand_zero_and_long_ranges() {
    let mut gpu = gpu("expand_zero_and_long_ranges");
    let mut rng = Rng::new(32);
    let ctx = Strings::default();
    for &n in SIZES {
        for (max_len, zeros) in [(1, 0), (2, 50), (8, 30), (3000, 90), (1, 100)] {
            let args = expand_args(&mut rng, n, max_len, zeros);
            let case = format!("n {n}, lengths < {max_len}, {zeros}% zero");
            compare(&mut gpu, &Kernel::Expand, &args, &ctx, &case).expect("Expand succeeds");
            // Windows of the outputs (multi-round expansion): the empty one, the whole
            // sequence and random cuts.
            let HostCol::U64(t) = &args[2] else { unreachable!() };
            let total = t[0];
            for k in 0..4 {
                let (a, b) = match k {
                    0 => (total / 2, total / 2),
                    1 => (0, total),
                    _ => {
                        let a = rng.below(total + 1);
                        (a, a + rng.below(total - a + 1))
                    }
                };
                let mut wargs = args.clone();
                wargs.push(HostCol::U64(vec![a, b]));
                compare(
                    &mut gpu,
                    &Kernel::Expand,
                    &wargs,
                    &ctx,
                    &format!("{case}, window {a}..{b}"),
                )
                .expect("Expand of a window succeeds");
            }
        }
    }
    // One row with a very long range, surrounded by empty ones.
    let mut args = expand_args(&mut rng, 1025, 1, 100);
    if let HostCol::U64(off) = &mut args[1] {
        for o in off.iter_mut().skip(513) {
            *o = 3_000_000;
        }
    }
    args[2] = HostCol::U64(vec![3_000_000]);
    compare(&mut gpu, &Kernel::Expand, &args, &ctx, "one range of 3e6").expect("succeeds");
    let args = expand_args(&mut rng, LARGE, 3, 20);
    compare(&mut gpu, &Kernel::Expand, &args, &ctx, "large").expect("succeeds");
}

/// Launches `bad` with its checks deferred (site (7, 3)), then `kernel` on `good` (site
/// (7, 4)), then waits: the first wait (the good launch's own, or the sync after it) fails
/// with the message `bad` gives when checked at once, naming site (7, 3); then the backend
/// checks at once again.
pub fn deferred_fails_like_immediate(
    gpu: &mut fox_cuda::CudaBackend,
    kernel: &Kernel,
    bad: &[HostCol],
    good: &[HostCol],
    what: &str,
) {
    use fox_runtime::Backend;
    let ctx = Strings::default();
    let up = |gpu: &mut fox_cuda::CudaBackend, cols: &[HostCol]| -> Vec<fox_runtime::DevBuf> {
        cols.iter().map(|c| gpu.upload(c.clone()).expect("upload")).collect()
    };
    let bad_bufs = up(gpu, bad);
    let refs: Vec<_> = bad_bufs.iter().collect();
    let immediate = match gpu.launch(kernel, &refs, &ctx) {
        Ok(_) => panic!("{what}: the immediate check passes"),
        Err(e) => e.0,
    };
    let good_bufs = up(gpu, good);
    gpu.set_check_site(Some((7, 3))).expect("site");
    let outs = gpu
        .launch(kernel, &refs, &ctx)
        .unwrap_or_else(|e| panic!("{what}: a deferred launch fails: {e}"));
    gpu.set_check_site(Some((7, 4))).expect("site");
    let good_refs: Vec<_> = good_bufs.iter().collect();
    // A launcher that reads a count back waits there, and reports the failure then.
    let (good_outs, waited) = match gpu.launch(kernel, &good_refs, &ctx) {
        Ok(outs) => (outs, gpu.sync().expect_err("the wait reports the failed check")),
        Err(e) => (Vec::new(), e),
    };
    // With many failing rows an error word's detail is the first writer's, not the
    // failing row's: the messages are compared up to it.
    let undetailed = |m: &str| m.split(" (details").next().unwrap_or_default().to_string();
    assert_eq!(undetailed(&waited.0), undetailed(&immediate), "{what}");
    assert_eq!(gpu.take_failed_check(), Some(((7, 3), waited.0)), "{what}");
    gpu.set_check_site(None).expect("no site");
    for b in outs.into_iter().chain(good_outs).chain(bad_bufs).chain(good_bufs) {
        gpu.free(b);
    }
    gpu.sync().expect("the device is well after a deferred failure");
}

fn expand_rejects_bad_offsets() {
    let mut gpu = gpu("expand_rejects_bad_offsets");
    let ctx = Strings::default();
    let cases = [
        ("first offset not 0", vec![1u32, 2], vec![1u64, 2], 3u64),
        ("decreasing", vec![1, 2], vec![0, 5], 3),
        ("positions past u32", vec![u32::MAX, 0], vec![0, 2], 2),
        ("no rows, total 1", vec![], vec![], 1),
    ];
    for (what, lo, off, total) in cases.clone() {
        let args = vec![HostCol::U32(lo), HostCol::U64(off), HostCol::U64(vec![total])];
        assert!(
            compare(&mut gpu, &Kernel::Expand, &args, &ctx, what).is_err(),
            "{what}: both must fail"
        );
    }
    // Offsets that go up and down over many rows, and a total beyond their last.
    let mut rng = Rng::new(31);
    let n = 10_000;
    let lo: Vec<u32> = (0..n).map(|_| rng.below(1000) as u32).collect();
    let off: Vec<u64> = (0..n as u64)
        .map(|i| if i == 0 { 0 } else { rng.below(60_000) })
        .collect();
    let many = vec![HostCol::U32(lo), HostCol::U64(off), HostCol::U64(vec![50_000])];
    assert!(
        compare(&mut gpu, &Kernel::Expand, &many, &ctx, "offsets up and down").is_err(),
        "offsets up and down: both must fail"
    );
    // As a run launches them, with checks read at the next wait: the launch returns its
    // outputs, the launches after it stay within their buffers, and the wait reports the
    // same error as an immediate check, with the launch's site.
    let good = vec![
        HostCol::U32(vec![4, 0, 9]),
        HostCol::U64(vec![0, 2, 2]),
        HostCol::U64(vec![5]),
    ];
    for (what, lo, off, total) in cases.iter().take(3) {
        let args = vec![
            HostCol::U32(lo.clone()),
            HostCol::U64(off.clone()),
            HostCol::U64(vec![*total]),
        ];
        deferred_fails_like_immediate(&mut gpu, &Kernel::Expand, &args, &good, what);
    }
    deferred_fails_like_immediate(&mut gpu, &Kernel::Expand, &many, &good, "offsets up and down");
    for w in [vec![2u64, 1], vec![0, 4], vec![0]] {
        let args = vec![
            HostCol::U32(vec![0, 0]),
            HostCol::U64(vec![0, 1]),
            HostCol::U64(vec![3]),
            HostCol::U64(w.clone()),
        ];
        assert!(
            compare(&mut gpu, &Kernel::Expand, &args, &ctx, "bad window").is_err(),
            "window {w:?}: both must fail"
        );
    }
}

fn sorted_search_hits_and_misses() {
    let mut gpu = gpu("sorted_search_hits_and_misses");
    let mut rng = Rng::new(33);
    let ctx = Strings::default();
    for &e in &ELEMS {
        for &dist in &Dist::ALL {
            for &n in SIZES.iter().chain(&[LARGE]) {
                if n == LARGE && e != Elem::U32 && e != Elem::F64 {
                    continue;
                }
                let nv = 1 + rng.below(5000) as usize;
                let values = sort_rows(&[random_col(&mut rng, e, nv, dist)], false).remove(0);
                let mut lo = Vec::with_capacity(n);
                let mut hi = Vec::with_capacity(n);
                for _ in 0..n {
                    let a = rng.below(nv as u64 + 1) as u32;
                    let b = a + rng.below(nv as u64 + 1 - u64::from(a)) as u32;
                    lo.push(a);
                    hi.push(b);
                }
                // Needles: half drawn from the values (hits when inside the range), half random.
                let random = random_col(&mut rng, e, n, dist);
                let pick: Vec<usize> = (0..n).map(|_| rng.below(nv as u64) as usize).collect();
                let needle = match (&values, random) {
                    (HostCol::U8(v), HostCol::U8(r)) => {
                        HostCol::U8((0..n).map(|i| if i % 2 == 0 { v[pick[i]] } else { r[i] }).collect())
                    }
                    (HostCol::I32(v), HostCol::I32(r)) => {
                        HostCol::I32((0..n).map(|i| if i % 2 == 0 { v[pick[i]] } else { r[i] }).collect())
                    }
                    (HostCol::U32(v), HostCol::U32(r)) => {
                        HostCol::U32((0..n).map(|i| if i % 2 == 0 { v[pick[i]] } else { r[i] }).collect())
                    }
                    (HostCol::I64(v), HostCol::I64(r)) => {
                        HostCol::I64((0..n).map(|i| if i % 2 == 0 { v[pick[i]] } else { r[i] }).collect())
                    }
                    (HostCol::U64(v), HostCol::U64(r)) => {
                        HostCol::U64((0..n).map(|i| if i % 2 == 0 { v[pick[i]] } else { r[i] }).collect())
                    }
                    (HostCol::F64(v), HostCol::F64(r)) => {
                        HostCol::F64((0..n).map(|i| if i % 2 == 0 { v[pick[i]] } else { r[i] }).collect())
                    }
                    (HostCol::I128(v), HostCol::I128(r)) => {
                        HostCol::I128((0..n).map(|i| if i % 2 == 0 { v[pick[i]] } else { r[i] }).collect())
                    }
                    _ => unreachable!("same element type"),
                };
                let args = vec![values, HostCol::U32(lo), HostCol::U32(hi), needle];
                let case = format!("values {nv} x {e:?}, dist {dist:?}, {n} searches");
                compare(&mut gpu, &Kernel::SortedSearch, &args, &ctx, &case).expect("SortedSearch succeeds");
            }
        }
    }
}

fn sorted_search_rejects_ranges_outside_the_values() {
    let mut gpu = gpu("sorted_search_rejects_ranges_outside_the_values");
    let ctx = Strings::default();
    let values = HostCol::U32(vec![1, 3, 5]);
    for (what, lo, hi) in [("hi past the end", 0u32, 4u32), ("lo above hi", 2, 1)] {
        let args = vec![
            values.clone(),
            HostCol::U32(vec![0, lo]),
            HostCol::U32(vec![3, hi]),
            HostCol::U32(vec![3, 3]),
        ];
        assert!(
            compare(&mut gpu, &Kernel::SortedSearch, &args, &ctx, what).is_err(),
            "{what}: both must fail"
        );
    }
}

/// `ways` triples (values, lo, hi) over `n` rows: sorted unique values drawn from `dist`,
/// and ranges whose lengths are mostly short, with `hubs` percent of them as long as they
/// can be.
fn intersect_args(rng: &mut Rng, e: Elem, dist: Dist, ways: usize, n: usize, hubs: u64) -> Vec<HostCol> {
    let mut args = Vec::new();
    for _ in 0..ways {
        let nv = 1 + rng.below(20_000) as usize;
        let values = sort_rows(&[random_col(rng, e, nv, dist)], true).remove(0);
        let nv = values.len() as u64;
        let mut lo = Vec::with_capacity(n);
        let mut hi = Vec::with_capacity(n);
        for _ in 0..n {
            let a = rng.below(nv + 1);
            let room = nv - a;
            let len = if rng.chance(hubs) {
                room
            } else {
                rng.below(room.min(40) + 1)
            };
            lo.push(a as u32);
            hi.push((a + len) as u32);
        }
        args.extend([values, HostCol::U32(lo), HostCol::U32(hi)]);
    }
    args
}

fn intersect_count_ways_and_skew() {
    let mut gpu = gpu("intersect_count_ways_and_skew");
    let mut rng = Rng::new(34);
    let ctx = Strings::default();
    for &e in &ELEMS {
        for &dist in &Dist::ALL {
            for &n in SIZES.iter().chain(&[100_003]) {
                for ways in 1..=4 {
                    let args = intersect_args(&mut rng, e, dist, ways, n, 2);
                    let case = format!("{ways} ways of {e:?}, dist {dist:?}, {n} rows");
                    compare(&mut gpu, &Kernel::IntersectCount { ways }, &args, &ctx, &case)
                        .expect("IntersectCount succeeds");
                }
            }
        }
    }
    // Every row intersects a level with itself: the count is the sum of the range lengths.
    let mut args = intersect_args(&mut rng, Elem::I32, Dist::Range(1 << 20), 1, LARGE, 0);
    let same = args.clone();
    args.extend(same);
    compare(
        &mut gpu,
        &Kernel::IntersectCount { ways: 2 },
        &args,
        &ctx,
        "large, a level with itself",
    )
    .expect("succeeds");
}

fn intersect_count_rejects_ranges_outside_the_values() {
    let mut gpu = gpu("intersect_count_rejects_ranges_outside_the_values");
    let ctx = Strings::default();
    let values = HostCol::I32(vec![1, 3, 5]);
    for (what, lo, hi) in [("hi past the end", 0u32, 4u32), ("lo above hi", 2, 1)] {
        let args = vec![
            values.clone(),
            HostCol::U32(vec![0, 0]),
            HostCol::U32(vec![3, 3]),
            values.clone(),
            HostCol::U32(vec![0, lo]),
            HostCol::U32(vec![3, hi]),
        ];
        assert!(
            compare(&mut gpu, &Kernel::IntersectCount { ways: 2 }, &args, &ctx, what).is_err(),
            "{what}: both must fail"
        );
    }
}

fn min_range_picks_the_smallest() {
    let mut gpu = gpu("min_range_picks_the_smallest");
    let mut rng = Rng::new(35);
    let ctx = Strings::default();
    for &n in SIZES.iter().chain(&[LARGE]) {
        for ways in 1..=4 {
            let mut args = Vec::new();
            for _ in 0..ways {
                let lo: Vec<u32> = (0..n).map(|_| rng.below(1 << 20) as u32).collect();
                let hi: Vec<u32> = lo
                    .iter()
                    .map(|&l| {
                        let long = rng.chance(10);
                        l + rng.below(if long { 1 << 16 } else { 8 }) as u32
                    })
                    .collect();
                args.extend([HostCol::U32(lo), HostCol::U32(hi)]);
            }
            let case = format!("{ways} ways, {n} rows");
            compare(&mut gpu, &Kernel::MinRange { ways }, &args, &ctx, &case).expect("MinRange succeeds");
        }
    }
    let args = vec![
        HostCol::U32(vec![0, 5]),
        HostCol::U32(vec![3, 4]),
        HostCol::U32(vec![0, 0]),
        HostCol::U32(vec![9, 9]),
    ];
    assert!(
        compare(&mut gpu, &Kernel::MinRange { ways: 2 }, &args, &ctx, "hi below lo").is_err(),
        "hi below lo: both must fail"
    );
}

/// `col` with the largest value of its type added (for floats, NaN): the key that the
/// shared-memory tables of IntersectCount use as their empty marker.
fn with_max(col: HostCol) -> HostCol {
    match col {
        HostCol::U8(mut v) => {
            v.push(u8::MAX);
            HostCol::U8(v)
        }
        HostCol::I32(mut v) => {
            v.push(i32::MAX);
            HostCol::I32(v)
        }
        HostCol::U32(mut v) => {
            v.push(u32::MAX);
            HostCol::U32(v)
        }
        HostCol::I64(mut v) => {
            v.push(i64::MAX);
            HostCol::I64(v)
        }
        HostCol::U64(mut v) => {
            v.push(u64::MAX);
            HostCol::U64(v)
        }
        HostCol::F64(mut v) => {
            v.push(f64::NAN);
            HostCol::F64(v)
        }
        HostCol::I128(mut v) => {
            v.push(i128::MAX);
            HostCol::I128(v)
        }
    }
}

/// `ways` triples (values, lo, hi) over `n` rows in which way `shared` has one range per
/// run of consecutive rows (runs of 1 to `max_run` rows, ranges of up to `max_shared`
/// values, some of exactly `cap` - 1, `cap` and `cap` + 1), as the rows of a multi-way
/// join's level have; the other ways' ranges are per row, empty to many times longer.
/// Every way indexes the same level, so that intersections are not empty.
fn shared_args(rng: &mut Rng, e: Elem, ways: usize, shared: usize, n: usize, max_run: u64, cap: u64) -> Vec<HostCol> {
    let nv = 2 * cap as usize + rng.below(6000) as usize;
    let values = sort_rows(&[with_max(random_col(rng, e, nv, Dist::Range(3 * nv as u64)))], true).remove(0);
    let nv = values.len() as u64;
    let mut cols: Vec<(Vec<u32>, Vec<u32>)> = vec![(Vec::with_capacity(n), Vec::with_capacity(n)); ways];
    let mut row = 0;
    while row < n {
        let run = (1 + rng.below(max_run) as usize).min(n - row);
        let len = match rng.below(10) {
            0 => cap - 1 + rng.below(3),
            1 => 0,
            2 => nv,
            _ => rng.below(cap.min(300)),
        }
        .min(nv);
        // The values up to the end, so that the largest value is often in the range.
        let a = if rng.chance(30) {
            nv - len
        } else {
            rng.below(nv - len + 1)
        };
        for _ in 0..run {
            for (w, (lo, hi)) in cols.iter_mut().enumerate() {
                let (x, y) = if w == shared {
                    (a, a + len)
                } else {
                    let l = match rng.below(10) {
                        0 => 0,
                        1 => nv,
                        2 | 3 => rng.below(9 * len + 2),
                        _ => rng.below(len / 2 + 3),
                    }
                    .min(nv);
                    let x = if rng.chance(30) { nv - l } else { rng.below(nv - l + 1) };
                    (x, x + l)
                };
                lo.push(x as u32);
                hi.push(y as u32);
            }
        }
        row += run;
    }
    let mut args = Vec::new();
    for (lo, hi) in cols {
        args.extend([values.clone(), HostCol::U32(lo), HostCol::U32(hi)]);
    }
    args
}

fn intersect_count_shared_ranges() {
    let mut gpu = gpu("intersect_count_shared_ranges");
    let mut rng = Rng::new(36);
    let ctx = Strings::default();
    for &e in &ELEMS {
        for ways in 2..=4 {
            // The largest range a table holds: cuckoo tables for two ways (ic_hash2_*),
            // linear probing for more (ic_hash_*).
            let cap = match (ways, e.size() <= 4) {
                (2, true) => 2048,
                (2, false) => 1024,
                (_, true) => 4096,
                (_, false) => 2048,
            };
            for &n in &[2047usize, 2048, 4097, 100_003] {
                for max_run in [2, 40, 3000] {
                    let shared = rng.below(ways as u64) as usize;
                    let args = shared_args(&mut rng, e, ways, shared, n, max_run, cap);
                    let case =
                        format!("{ways} ways of {e:?}, way {shared} shared by runs of up to {max_run}, {n} rows");
                    compare(&mut gpu, &Kernel::IntersectCount { ways }, &args, &ctx, &case)
                        .expect("IntersectCount succeeds");
                }
            }
        }
    }
    let args = shared_args(&mut rng, Elem::I32, 2, 1, LARGE, 200, 4096);
    compare(
        &mut gpu,
        &Kernel::IntersectCount { ways: 2 },
        &args,
        &ctx,
        "large, shared runs",
    )
    .expect("succeeds");
}

fn intersect_count_pairs_without_tables() {
    let mut gpu = gpu("intersect_count_pairs_without_tables");
    // No evictions allowed: every segment whose table has a collision searches instead.
    gpu.set_table_kicks(0);
    let mut rng = Rng::new(37);
    let ctx = Strings::default();
    for &e in &ELEMS {
        let cap = if e.size() <= 4 { 2048 } else { 1024 };
        for &n in &[2048usize, 100_003] {
            for max_run in [3, 300] {
                let shared = rng.below(2) as usize;
                let args = shared_args(&mut rng, e, 2, shared, n, max_run, cap);
                let case =
                    format!("2 ways of {e:?}, no evictions, way {shared} shared by runs of up to {max_run}, {n} rows");
                compare(&mut gpu, &Kernel::IntersectCount { ways: 2 }, &args, &ctx, &case)
                    .expect("IntersectCount succeeds");
            }
        }
    }
    gpu.set_table_kicks(1);
    let args = shared_args(&mut rng, Elem::I32, 2, 0, LARGE, 200, 2048);
    compare(
        &mut gpu,
        &Kernel::IntersectCount { ways: 2 },
        &args,
        &ctx,
        "large, one eviction",
    )
    .expect("succeeds");
}

/// Every bound combination (none, closed, open on each side; offsets 0, small, and the
/// extremes that would overflow without wide arithmetic) over random sorted i32 and i64
/// values with duplicates, with 0, 1 and 2 key columns of several element types (few
/// distinct keys, so many rows share one), all-equal values, and empty and one-row sides.
fn bound_range_bounds_and_offsets() {
    let mut gpu = gpu("bound_range_bounds_and_offsets");
    let mut rng = Rng::new(37);
    let ctx = Strings::default();
    let kinds = [None, Some(false), Some(true)];
    let offsets = [0i64, 50, -7, i64::MAX, i64::MIN];
    let key_sets: [&[Elem]; 4] = [&[], &[Elem::U32], &[Elem::I128], &[Elem::F64, Elem::I32]];
    for e in [Elem::I32, Elem::I64] {
        for keys in key_sets {
            for &dist in &Dist::ALL {
                let big: &[usize] = if keys.len() == 1 { &[100_003] } else { &[] };
                for &n in SIZES.iter().chain(big) {
                    let nv = [0, 1, 1 + rng.below(5000) as usize][rng.below(3) as usize];
                    let mut cols: Vec<HostCol> = keys
                        .iter()
                        .map(|&k| random_col(&mut rng, k, nv, Dist::Range(3)))
                        .collect();
                    cols.push(random_col(&mut rng, e, nv, dist));
                    let searched = sort_rows(&cols, false);
                    for lower in kinds {
                        for upper in kinds {
                            if lower.is_none() && upper.is_none() {
                                continue;
                            }
                            let mut bound = |open: Option<bool>| {
                                open.map(|open| fox_kernel::RangeBound {
                                    offset: offsets[rng.below(offsets.len() as u64) as usize],
                                    open,
                                })
                            };
                            let (lo, hi) = (bound(lower), bound(upper));
                            let mut args = searched.clone();
                            for &k in keys {
                                args.push(random_col(&mut rng, k, n, Dist::Range(4)));
                            }
                            for _ in [lo, hi].iter().flatten() {
                                args.push(random_col(&mut rng, e, n, dist));
                            }
                            let kernel = Kernel::BoundRange {
                                nkeys: keys.len(),
                                lower: lo,
                                upper: hi,
                            };
                            let case =
                                format!("values {nv} x {e:?}, keys {keys:?}, dist {dist:?}, {n} rows, {kernel:?}");
                            compare(&mut gpu, &kernel, &args, &ctx, &case).expect("BoundRange succeeds");
                        }
                    }
                }
            }
        }
    }
    let values = sort_rows(&[random_col(&mut rng, Elem::I64, LARGE, Dist::Range(1 << 20))], false).remove(0);
    let bounds = random_col(&mut rng, Elem::I64, LARGE, Dist::Range(1 << 20));
    let kernel = Kernel::BoundRange {
        nkeys: 0,
        lower: Some(fox_kernel::RangeBound { offset: 0, open: false }),
        upper: Some(fox_kernel::RangeBound { offset: 3, open: true }),
    };
    compare(&mut gpu, &kernel, &[values, bounds.clone(), bounds], &ctx, "large").expect("succeeds");
}

/// The merge-sort tree of `d` as `IneqTree`'s contract defines it, by bottom-up merges.
fn ineq_tree_of(d: &HostCol) -> HostCol {
    let v: Vec<i64> = match d {
        HostCol::I32(x) => x.iter().map(|&a| i64::from(a)).collect(),
        HostCol::I64(x) => x.clone(),
        other => panic!("values of {:?}", other.elem()),
    };
    let n = v.len();
    let mut tree: Vec<u32> = (0..n as u32).collect();
    for l in 1..fox_kernel::ineq_levels(n) {
        let prev = tree[(l - 1) * n..l * n].to_vec();
        let width = 1usize << l;
        for start in (0..n).step_by(width) {
            let (mid, end) = ((start + width / 2).min(n), (start + width).min(n));
            let (mut i, mut k) = (start, mid);
            while i < mid || k < end {
                if k == end || (i < mid && v[prev[i] as usize] <= v[prev[k] as usize]) {
                    tree.push(prev[i]);
                    i += 1;
                } else {
                    tree.push(prev[k]);
                    k += 1;
                }
            }
        }
    }
    HostCol::U32(tree)
}

/// The tree over i32 and i64 values of every distribution (all equal among them), empty,
/// one row, sizes around the block widths and not powers of two, and 10^7 rows.
fn ineq_tree_levels() {
    let mut gpu = gpu("ineq_tree_levels");
    let mut rng = Rng::new(41);
    let ctx = Strings::default();
    for e in [Elem::I32, Elem::I64] {
        for dist in Dist::ALL.iter().copied().chain([Dist::Range(1)]) {
            for &n in SIZES.iter().chain(&[3, 100_003]) {
                let d = random_col(&mut rng, e, n, dist);
                let case = format!("{n} values of {e:?}, dist {dist:?}");
                compare(&mut gpu, &Kernel::IneqTree, &[d], &ctx, &case).expect("IneqTree succeeds");
            }
        }
        let d = random_col(&mut rng, e, LARGE, Dist::Range(1 << 20));
        compare(&mut gpu, &Kernel::IneqTree, &[d], &ctx, &format!("large {e:?}")).expect("succeeds");
    }
}

/// Random ranges of positions of `nv` values for `rows` probing rows: whole, empty,
/// prefixes, suffixes and arbitrary ones (at most `max_len` long when set).
fn ineq_position_ranges(rng: &mut Rng, nv: usize, rows: usize, max_len: Option<u64>) -> (HostCol, HostCol) {
    let (mut lo, mut hi) = (Vec::with_capacity(rows), Vec::with_capacity(rows));
    for i in 0..rows {
        let a = rng.below(nv as u64 + 1) as u32;
        let b = rng.below(nv as u64 + 1) as u32;
        let (l, h) = match (max_len, i % 5) {
            (Some(m), _) => (a, (a + rng.below(m) as u32).min(nv as u32)),
            (None, 0) => (0, nv as u32),
            (None, 1) => (0, a),
            (None, 2) => (a, nv as u32),
            (None, 3) => (a, a),
            _ => (a.min(b), a.max(b)),
        };
        lo.push(l);
        hi.push(h);
    }
    (HostCol::U32(lo), HostCol::U32(hi))
}

/// Every bound combination on the second column (none, closed, open on each side;
/// offsets 0, small and the extremes that would overflow without wide arithmetic) over
/// random i32 and i64 values with duplicates, all-equal values, empty and one-row sides,
/// sizes that are not powers of two, and 10^7 values probed by 10^6 rows. (Keys and the
/// first column reach these kernels as the ranges `BoundRange` found, tested above.)
fn ineq_ranges_bounds_and_offsets() {
    let mut gpu = gpu("ineq_ranges_bounds_and_offsets");
    let mut rng = Rng::new(43);
    let ctx = Strings::default();
    let kinds = [None, Some(false), Some(true)];
    let offsets = [0i64, 50, -7, i64::MAX, i64::MIN];
    for e in [Elem::I32, Elem::I64] {
        for dist in Dist::ALL.iter().copied().chain([Dist::Range(1)]) {
            for &nv in SIZES.iter().chain(&[3, 100_003]) {
                let d = random_col(&mut rng, e, nv, dist);
                let tree = ineq_tree_of(&d);
                let rows = [0, 1, 1 + rng.below(3000) as usize][rng.below(3) as usize];
                for lower in kinds {
                    for upper in kinds {
                        if lower.is_none() && upper.is_none() {
                            continue;
                        }
                        let mut bound = |open: Option<bool>| {
                            open.map(|open| fox_kernel::RangeBound {
                                offset: offsets[rng.below(offsets.len() as u64) as usize],
                                open,
                            })
                        };
                        let (lo_b, hi_b) = (bound(lower), bound(upper));
                        let (lo, hi) = ineq_position_ranges(&mut rng, nv, rows, None);
                        let mut args = vec![d.clone(), tree.clone(), lo, hi];
                        for _ in [lo_b, hi_b].iter().flatten() {
                            args.push(random_col(&mut rng, e, rows, dist));
                        }
                        let kernel = Kernel::IneqRanges {
                            lower: lo_b,
                            upper: hi_b,
                        };
                        let case = format!("{nv} values of {e:?}, dist {dist:?}, {rows} rows, {kernel:?}");
                        compare(&mut gpu, &kernel, &args, &ctx, &case).expect("IneqRanges succeeds");
                    }
                }
            }
        }
    }
    let d = random_col(&mut rng, Elem::I64, LARGE, Dist::Range(1 << 20));
    let tree = ineq_tree_of(&d);
    let rows = 1_000_003;
    let (lo, hi) = ineq_position_ranges(&mut rng, LARGE, rows, Some(1 << 16));
    let bounds = random_col(&mut rng, Elem::I64, rows, Dist::Range(1 << 20));
    let kernel = Kernel::IneqRanges {
        lower: Some(fox_kernel::RangeBound { offset: -3, open: true }),
        upper: Some(fox_kernel::RangeBound {
            offset: 100,
            open: false,
        }),
    };
    compare(
        &mut gpu,
        &kernel,
        &[d, tree, lo, hi, bounds.clone(), bounds],
        &ctx,
        "large",
    )
    .expect("succeeds");
}

tests![
    Gpu trie_build_arity_one_to_three,
    Gpu expand_zero_and_long_ranges,
    Gpu expand_rejects_bad_offsets,
    Gpu sorted_search_hits_and_misses,
    Gpu sorted_search_rejects_ranges_outside_the_values,
    Gpu intersect_count_ways_and_skew,
    Gpu intersect_count_rejects_ranges_outside_the_values,
    Gpu min_range_picks_the_smallest,
    Gpu intersect_count_shared_ranges,
    Gpu intersect_count_pairs_without_tables,
    Gpu bound_range_bounds_and_offsets,
    Gpu ineq_tree_levels,
    Gpu ineq_ranges_bounds_and_offsets,
];
