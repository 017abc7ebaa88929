//! GPU vs CPU: `ExclusiveScan`, `Compact`, `SortPerm`, `AdjacentDistinct` and `RepeatedKey` on random
//! inputs (empty, one row, sizes around the tile sizes, 2^20 + 3 and 10^7 + 19 rows; all
//! equal, skewed and full-range values; negative numbers, NaN, ±0.0 and infinities).
//! Each case names the kernel, the size, the element types and the distribution, and a
//! mismatch reports the first differing output index.

use crate::compare;
use fox_cuda::testing::{gpu, random_col, random_index, sort_rows, Dist, Rng, Strings, ELEMS, LARGE};
use fox_cuda::CudaBackend;
use fox_kernel::{Elem, Kernel};
use fox_runtime::HostCol;

/// Sizes around the tiles of the scan (2048), compaction (4096) and sort (4096, 3072).
const SIZES: &[usize] = &[
    0,
    1,
    2,
    1000,
    1023,
    1025,
    2047,
    2049,
    3073,
    4095,
    4097,
    10_000,
    (1 << 20) + 3,
];

fn ctx() -> Strings {
    Strings::default()
}

/// Runs a case that both backends must accept.
fn check(gpu: &mut CudaBackend, kernel: &Kernel, args: &[HostCol], case: &str) -> Vec<HostCol> {
    match compare(gpu, kernel, args, &ctx(), case) {
        Ok(outs) => outs,
        Err(e) => panic!("{kernel:?} case {case}: both backends fail: {e}"),
    }
}

/// Runs a case that both backends must reject.
fn check_fails(gpu: &mut CudaBackend, kernel: &Kernel, args: &[HostCol], case: &str) {
    if let Ok(outs) = compare(gpu, kernel, args, &ctx(), case) {
        panic!(
            "{kernel:?} case {case}: both backends accept it ({} outputs)",
            outs.len()
        );
    }
}

fn counts(rng: &mut Rng, n: usize, max: u64) -> HostCol {
    HostCol::U64((0..n).map(|_| rng.below(max + 1)).collect())
}

fn exclusive_scan_matches_cpu() {
    let mut gpu = gpu("exclusive_scan_matches_cpu");
    let k = Kernel::ExclusiveScan;
    let mut rng = Rng::new(1);
    for &n in SIZES {
        for (name, max) in [("0..=3", 3u64), ("0..=1000", 1000), ("zeros", 0), ("0..=2^40", 1 << 40)] {
            let c = counts(&mut rng, n, max);
            check(&mut gpu, &k, &[c], &format!("n={n} counts {name}"));
        }
        // Sparse: mostly zeros, a few large counts.
        let c = HostCol::U64(
            (0..n)
                .map(|_| if rng.chance(2) { rng.below(1 << 30) } else { 0 })
                .collect(),
        );
        check(&mut gpu, &k, &[c], &format!("n={n} counts sparse"));
    }
    let c = counts(&mut rng, LARGE, 100);
    check(&mut gpu, &k, &[c], &format!("n={LARGE} counts 0..=100"));
}

fn exclusive_scan_overflow_is_an_error() {
    let mut gpu = gpu("exclusive_scan_overflow_is_an_error");
    let k = Kernel::ExclusiveScan;
    let mut rng = Rng::new(2);
    // A total of exactly u64::MAX is fine; one more overflows, in the first tile, across
    // tiles, and in the last row.
    for n in [2usize, 5000, 100_000] {
        let mut v = vec![0u64; n];
        v[0] = u64::MAX - 1;
        v[n - 1] = 1;
        check(
            &mut gpu,
            &k,
            &[HostCol::U64(v.clone())],
            &format!("n={n} total u64::MAX"),
        );
        v[n - 1] = 2;
        check_fails(
            &mut gpu,
            &k,
            &[HostCol::U64(v.clone())],
            &format!("n={n} overflow in the last row"),
        );
        crate::trie::deferred_fails_like_immediate(
            &mut gpu,
            &k,
            &[HostCol::U64(v)],
            &[HostCol::U64(vec![1; n])],
            &format!("n={n} overflow in the last row"),
        );
        let big: Vec<u64> = (0..n).map(|_| (1 << 63) + rng.below(1000)).collect();
        check_fails(&mut gpu, &k, &[HostCol::U64(big)], &format!("n={n} every count 2^63"));
    }
    // Overflowing partial sums inside one tile and across many tiles.
    let v: Vec<u64> = (0..LARGE as u64)
        .map(|i| if i % 4099 == 0 { u64::MAX / 1000 } else { i })
        .collect();
    check_fails(&mut gpu, &k, &[HostCol::U64(v)], &format!("n={LARGE} large counts"));
    // Wrong element type and argument count.
    check_fails(&mut gpu, &k, &[HostCol::U32(vec![1, 2])], "u32 counts");
    check_fails(&mut gpu, &k, &[], "no argument");
}

/// Random flags with `percent` non-zero, using values other than 1 too.
fn flags(rng: &mut Rng, n: usize, percent: u64) -> HostCol {
    HostCol::U8(
        (0..n)
            .map(|_| {
                if rng.chance(percent) {
                    [1u8, 1, 1, 2, 255][rng.below(5) as usize]
                } else {
                    0
                }
            })
            .collect(),
    )
}

fn compact_matches_cpu() {
    let mut gpu = gpu("compact_matches_cpu");
    let k = Kernel::Compact;
    let mut rng = Rng::new(3);
    for &n in SIZES {
        for percent in [0u64, 1, 50, 99, 100] {
            let f = flags(&mut rng, n, percent);
            // Every element type alone, then three columns of mixed types.
            for &e in &ELEMS {
                let c = random_col(&mut rng, e, n, Dist::Uniform);
                check(
                    &mut gpu,
                    &k,
                    &[f.clone(), c],
                    &format!("n={n} {percent}% flagged, one {e:?} column"),
                );
            }
            let cols = [
                random_col(&mut rng, Elem::I64, n, Dist::Range(1000)),
                random_col(&mut rng, Elem::U8, n, Dist::Uniform),
                random_col(&mut rng, Elem::F64, n, Dist::Uniform),
            ];
            let mut args = vec![f.clone()];
            args.extend(cols);
            check(
                &mut gpu,
                &k,
                &args,
                &format!("n={n} {percent}% flagged, I64+U8+F64 columns"),
            );
            // Compacting no column breaks the kernel's contract: the launch is refused.
            check_fails(&mut gpu, &k, &[f], &format!("n={n} {percent}% flagged, no column"));
        }
        // Runs of flags: long selected and unselected stretches crossing tiles.
        let f = HostCol::U8((0..n).map(|i| u8::from((i / 3000) % 2 == 0)).collect());
        let c = random_col(&mut rng, Elem::U32, n, Dist::Uniform);
        check(&mut gpu, &k, &[f, c], &format!("n={n} runs of 3000 flags, U32 column"));
    }
    for percent in [3u64, 60] {
        let f = flags(&mut rng, LARGE, percent);
        let a = random_col(&mut rng, Elem::I32, LARGE, Dist::Uniform);
        let b = random_col(&mut rng, Elem::U64, LARGE, Dist::Uniform);
        let c = random_col(&mut rng, Elem::I128, LARGE, Dist::Uniform);
        check(
            &mut gpu,
            &k,
            &[f, a, b, c],
            &format!("n={LARGE} {percent}% flagged, I32+U64+I128 columns"),
        );
    }
    check_fails(&mut gpu, &k, &[], "no argument");
    check_fails(
        &mut gpu,
        &k,
        &[HostCol::U32(vec![1, 0]), HostCol::U32(vec![5, 6])],
        "u32 flags",
    );
    check_fails(
        &mut gpu,
        &k,
        &[HostCol::U8(vec![1, 0]), HostCol::U32(vec![5, 6, 7])],
        "length mismatch",
    );
}

fn sort_kernel(desc: &[bool], by_rank: &[bool]) -> Kernel {
    Kernel::SortPerm {
        desc: desc.to_vec(),
        by_rank: by_rank.to_vec(),
    }
}

/// Checks that `perm` orders `keys` (a stable permutation, compared with the CPU already
/// by `check`): a guard against a CPU twin and GPU agreeing on a wrong answer.
fn assert_sorted(perm: &HostCol, keys: &[HostCol], desc: &[bool], case: &str) {
    let HostCol::U32(p) = perm else {
        panic!("{case}: the permutation is not u32");
    };
    let mut seen = vec![false; p.len()];
    for &i in p {
        assert!(!std::mem::replace(&mut seen[i as usize], true), "{case}: row {i} twice");
    }
    for w in 1..p.len() {
        let (a, b) = (p[w - 1] as usize, p[w] as usize);
        let mut ord = std::cmp::Ordering::Equal;
        for (c, d) in keys.iter().zip(desc) {
            let o = fox_cuda::testing::cmp_at(c, a, c, b);
            let o = if *d { o.reverse() } else { o };
            if o != std::cmp::Ordering::Equal {
                ord = o;
                break;
            }
        }
        assert!(
            ord == std::cmp::Ordering::Less || (ord == std::cmp::Ordering::Equal && a < b),
            "{case}: rows {a} and {b} at positions {} and {w} are out of order",
            w - 1
        );
    }
}

fn sort_perm_one_key_matches_cpu() {
    let mut gpu = gpu("sort_perm_one_key_matches_cpu");
    let mut rng = Rng::new(4);
    for &n in SIZES {
        for &e in &ELEMS {
            for dist in Dist::ALL {
                for desc in [false, true] {
                    let c = random_col(&mut rng, e, n, dist);
                    let case = format!("n={n} key {e:?} {dist:?} desc={desc}");
                    let outs = check(
                        &mut gpu,
                        &sort_kernel(&[desc], &[false]),
                        std::slice::from_ref(&c),
                        &case,
                    );
                    if n <= 10_000 {
                        assert_sorted(&outs[0], &[c], &[desc], &case);
                    }
                }
            }
        }
    }
    // Values that differ only in one byte (the other digit places are skipped), in the
    // highest byte, and in sign.
    for &n in &[4097usize, 100_000] {
        let lo = HostCol::U64((0..n).map(|_| 0x1234_5678_9abc_de00 | rng.below(256)).collect());
        let hi = HostCol::U64((0..n).map(|_| (rng.below(256) << 56) | 0x77).collect());
        let sign = HostCol::I64((0..n).map(|i| if i % 2 == 0 { -1 } else { 1 }).collect());
        let zeros = HostCol::F64((0..n).map(|i| if i % 3 == 0 { -0.0 } else { 0.0 }).collect());
        // i128: the sign, only the high word, only the low word.
        let sign128 = HostCol::I128((0..n).map(|i| if i % 2 == 0 { -1 } else { 1 }).collect());
        let high128 = HostCol::I128((0..n).map(|_| (rng.below(512) as i128 - 256) << 64).collect());
        let low128 = HostCol::I128((0..n).map(|_| (7i128 << 64) | i128::from(rng.next_u64())).collect());
        for (name, c) in [
            ("low byte", lo),
            ("high byte", hi),
            ("sign", sign),
            ("±0.0", zeros),
            ("i128 sign", sign128),
            ("i128 high word", high128),
            ("i128 low word", low128),
        ] {
            for desc in [false, true] {
                let case = format!("n={n} {name} desc={desc}");
                let outs = check(
                    &mut gpu,
                    &sort_kernel(&[desc], &[false]),
                    std::slice::from_ref(&c),
                    &case,
                );
                assert_sorted(&outs[0], std::slice::from_ref(&c), &[desc], &case);
            }
        }
    }
}

fn sort_perm_several_keys_matches_cpu() {
    let mut gpu = gpu("sort_perm_several_keys_matches_cpu");
    let mut rng = Rng::new(5);
    for &n in SIZES {
        for round in 0..6 {
            let nkeys = 1 + round % 3;
            let elems: Vec<Elem> = (0..nkeys)
                .map(|_| ELEMS[rng.below(ELEMS.len() as u64) as usize])
                .collect();
            let dists: Vec<Dist> = (0..nkeys).map(|_| Dist::ALL[rng.below(5) as usize]).collect();
            let desc: Vec<bool> = (0..nkeys).map(|_| rng.chance(50)).collect();
            let keys: Vec<HostCol> = elems
                .iter()
                .zip(&dists)
                .map(|(&e, &d)| random_col(&mut rng, e, n, d))
                .collect();
            let case = format!("n={n} keys {elems:?} {dists:?} desc {desc:?}");
            let outs = check(&mut gpu, &sort_kernel(&desc, &vec![false; nkeys]), &keys, &case);
            if n <= 10_000 {
                assert_sorted(&outs[0], &keys, &desc, &case);
            }
        }
    }
}

fn sort_perm_by_rank_matches_cpu() {
    let mut gpu = gpu("sort_perm_by_rank_matches_cpu");
    let mut rng = Rng::new(6);
    for &n in SIZES {
        for dict in [1usize, 50, 5000] {
            // A shuffled rank table: code c is the rank[c]-th string in sorted order.
            let mut rank: Vec<u32> = (0..dict as u32).collect();
            for i in (1..dict).rev() {
                rank.swap(i, rng.below(i as u64 + 1) as usize);
            }
            let codes = random_index(&mut rng, n, dict as u64);
            let other = random_col(&mut rng, Elem::I32, n, Dist::Range(4));
            for (desc, by_rank) in [
                (vec![false], vec![true]),
                (vec![true], vec![true]),
                (vec![false, true], vec![true, false]),
                (vec![true, false], vec![false, true]),
            ] {
                let mut args = if desc.len() == 1 {
                    vec![codes.clone()]
                } else if by_rank[0] {
                    vec![codes.clone(), other.clone()]
                } else {
                    vec![other.clone(), codes.clone()]
                };
                args.push(HostCol::U32(rank.clone()));
                let case = format!("n={n} dictionary {dict} desc {desc:?} by_rank {by_rank:?}");
                check(&mut gpu, &sort_kernel(&desc, &by_rank), &args, &case);
            }
        }
    }
    // A code outside the rank table is an error on both backends.
    let codes = HostCol::U32(vec![0, 1, 7, 2]);
    check_fails(
        &mut gpu,
        &sort_kernel(&[false], &[true]),
        &[codes, HostCol::U32(vec![2, 0, 1])],
        "code 7 outside a rank table of 3",
    );
    check_fails(
        &mut gpu,
        &sort_kernel(&[false], &[true]),
        &[HostCol::I32(vec![0, 1]), HostCol::U32(vec![1, 0])],
        "rank key of i32",
    );
    check_fails(
        &mut gpu,
        &sort_kernel(&[false], &[true]),
        &[HostCol::U32(vec![0])],
        "no rank table",
    );
    check_fails(
        &mut gpu,
        &sort_kernel(&[false, false], &[false, false]),
        &[HostCol::U32(vec![0]), HostCol::U32(vec![0, 1])],
        "keys of different lengths",
    );
}

fn sort_perm_large_matches_cpu() {
    let mut gpu = gpu("sort_perm_large_matches_cpu");
    let mut rng = Rng::new(7);
    for (elem, dist) in [
        (Elem::U32, Dist::Uniform),
        (Elem::I64, Dist::Uniform),
        (Elem::F64, Dist::Uniform),
        (Elem::I32, Dist::Skewed),
        (Elem::U64, Dist::AllEqual),
        (Elem::I128, Dist::Uniform),
    ] {
        let c = random_col(&mut rng, elem, LARGE, dist);
        check(
            &mut gpu,
            &sort_kernel(&[false], &[false]),
            &[c],
            &format!("n={LARGE} key {elem:?} {dist:?}"),
        );
    }
    let a = random_col(&mut rng, Elem::I32, LARGE, Dist::Range(1000));
    let b = random_col(&mut rng, Elem::F64, LARGE, Dist::Uniform);
    check(
        &mut gpu,
        &sort_kernel(&[true, false], &[false, false]),
        &[a, b],
        &format!("n={LARGE} keys I32 Range(1000) desc, F64 Uniform"),
    );
    let a = random_col(&mut rng, Elem::I128, LARGE, Dist::Range(1000));
    let b = random_col(&mut rng, Elem::I128, LARGE, Dist::Uniform);
    check(
        &mut gpu,
        &sort_kernel(&[false, true], &[false, false]),
        &[a, b],
        &format!("n={LARGE} keys I128 Range(1000), I128 Uniform desc"),
    );
}

fn adjacent_distinct_matches_cpu() {
    let mut gpu = gpu("adjacent_distinct_matches_cpu");
    let k = Kernel::AdjacentDistinct;
    let mut rng = Rng::new(8);
    for &n in SIZES {
        for &e in &ELEMS {
            for dist in Dist::ALL {
                let c = random_col(&mut rng, e, n, dist);
                let sorted = sort_rows(std::slice::from_ref(&c), false);
                check(&mut gpu, &k, &sorted, &format!("n={n} sorted {e:?} {dist:?}"));
                check(&mut gpu, &k, &[c], &format!("n={n} unsorted {e:?} {dist:?}"));
            }
        }
        let cols = vec![
            random_col(&mut rng, Elem::U8, n, Dist::Range(3)),
            random_col(&mut rng, Elem::F64, n, Dist::Range(4)),
            random_col(&mut rng, Elem::I64, n, Dist::Range(5)),
        ];
        let sorted = sort_rows(&cols, false);
        check(&mut gpu, &k, &sorted, &format!("n={n} sorted U8+F64+I64 small ranges"));
    }
    // Floats: every NaN equal to every NaN, -0.0 distinct from 0.0.
    let f = HostCol::F64(vec![-0.0, 0.0, 0.0, f64::NAN, -f64::NAN, f64::NAN, 1.0, 1.0]);
    check(&mut gpu, &k, &[f], "NaN and ±0.0");
    // i128 values that differ in one word only.
    let w = HostCol::I128(vec![
        1,
        1,
        (1 << 64) | 1,
        (1 << 64) | 1,
        (1 << 64) | 2,
        -1,
        -1,
        i128::MIN,
        i128::MAX,
    ]);
    check(&mut gpu, &k, &[w], "i128 words");
    let c = random_col(&mut rng, Elem::I32, LARGE, Dist::Range(1_000_000));
    let sorted = sort_rows(&[c], false);
    check(&mut gpu, &k, &sorted, &format!("n={LARGE} sorted I32 Range(10^6)"));
    // No column breaks the kernel's contract: the launch is refused.
    check_fails(&mut gpu, &k, &[], "no column");
    check_fails(
        &mut gpu,
        &k,
        &[HostCol::U8(vec![1]), HostCol::U8(vec![1, 2])],
        "length mismatch",
    );
}

fn repeated_key_matches_cpu() {
    let mut gpu = gpu("repeated_key_matches_cpu");
    let mut rng = Rng::new(9);
    for &n in SIZES {
        for &e in &ELEMS {
            for dist in Dist::ALL {
                let c = random_col(&mut rng, e, n, dist);
                let sorted = sort_rows(std::slice::from_ref(&c), false);
                check(
                    &mut gpu,
                    &Kernel::RepeatedKey { nkeys: 1 },
                    &sorted,
                    &format!("n={n} {e:?} {dist:?}"),
                );
                // Distinct keys, then the same with one repeat at the end and at the middle.
                let distinct = sort_rows(&[c], true);
                let m = distinct[0].len();
                let k = Kernel::RepeatedKey { nkeys: 1 };
                check(&mut gpu, &k, &distinct, &format!("n={m} distinct {e:?} {dist:?}"));
                for at in [m.saturating_sub(2), m / 2] {
                    if at + 1 < m {
                        let mut idx: Vec<usize> = (0..m).collect();
                        idx[at + 1] = at;
                        let one = fox_cuda::testing::take(&distinct[0], &idx);
                        check(
                            &mut gpu,
                            &k,
                            &[one],
                            &format!("n={m} {e:?} {dist:?}, one repeat at {at}"),
                        );
                    }
                }
            }
        }
        let cols = vec![
            random_col(&mut rng, Elem::U8, n, Dist::Range(3)),
            random_col(&mut rng, Elem::F64, n, Dist::Range(4)),
            random_col(&mut rng, Elem::I64, n, Dist::Range(5)),
        ];
        let k = Kernel::RepeatedKey { nkeys: 3 };
        check(
            &mut gpu,
            &k,
            &sort_rows(&cols, false),
            &format!("n={n} U8+F64+I64 small ranges"),
        );
        check(
            &mut gpu,
            &k,
            &sort_rows(&cols, true),
            &format!("n={n} U8+F64+I64 distinct"),
        );
        let ones = HostCol::U8(vec![1; n]);
        check(
            &mut gpu,
            &Kernel::RepeatedKey { nkeys: 0 },
            &[ones],
            &format!("n={n} no keys"),
        );
    }
    let c = random_col(&mut rng, Elem::I64, LARGE, Dist::Uniform);
    let distinct = sort_rows(&[c], true);
    check(
        &mut gpu,
        &Kernel::RepeatedKey { nkeys: 1 },
        &distinct,
        &format!("n={LARGE} distinct I64"),
    );
    check_fails(
        &mut gpu,
        &Kernel::RepeatedKey { nkeys: 2 },
        &[HostCol::U8(vec![1, 1]), HostCol::U8(vec![1, 2, 3])],
        "length mismatch",
    );
}

fn sort_perm_of_sorted_rows_matches_cpu() {
    let mut gpu = gpu("sort_perm_of_sorted_rows_matches_cpu");
    // Inputs already in order are recognised and not sorted again: rows sorted by one to
    // four keys (ascending or descending, with ties), and the same rows with one pair
    // swapped (in the middle, at the end, at the start), which must be sorted.
    let mut rng = Rng::new(8);
    for &n in &[65_535usize, 65_536, 300_007] {
        for nkeys in 1..=5 {
            let elems: Vec<Elem> = (0..nkeys)
                .map(|_| [Elem::I32, Elem::U32, Elem::I64, Elem::U64][rng.below(4) as usize])
                .collect();
            let desc: Vec<bool> = (0..nkeys).map(|_| rng.chance(50)).collect();
            let keys: Vec<HostCol> = elems
                .iter()
                .map(|&e| {
                    let range = 1 + rng.below(50);
                    random_col(&mut rng, e, n, Dist::Range(range))
                })
                .collect();
            // Sort the rows on the host (the CPU backend's permutation).
            let perm = match fox_cuda::testing::run_on(
                &mut fox_cpu::CpuBackend::new(),
                &sort_kernel(&desc, &vec![false; nkeys]),
                &keys,
                &Strings::default(),
            ) {
                Ok(mut outs) => outs.remove(0),
                Err(e) => panic!("the CPU sort fails: {e}"),
            };
            let HostCol::U32(p) = perm else {
                panic!("the permutation is not u32");
            };
            let idx: Vec<usize> = p.iter().map(|&i| i as usize).collect();
            let sorted: Vec<HostCol> = keys.iter().map(|c| fox_cuda::testing::take(c, &idx)).collect();
            let case = format!("n={n} sorted keys {elems:?} desc {desc:?}");
            let outs = check(&mut gpu, &sort_kernel(&desc, &vec![false; nkeys]), &sorted, &case);
            assert_sorted(&outs[0], &sorted, &desc, &case);
            for (what, a, b) in [("middle", n / 2, n / 2 + 1), ("end", n - 2, n - 1), ("start", 0, 1)] {
                let mut order: Vec<usize> = (0..n).collect();
                order.swap(a, b);
                let swapped: Vec<HostCol> = sorted.iter().map(|c| fox_cuda::testing::take(c, &order)).collect();
                let case = format!("{case}, rows {a} and {b} swapped ({what})");
                let outs = check(&mut gpu, &sort_kernel(&desc, &vec![false; nkeys]), &swapped, &case);
                assert_sorted(&outs[0], &swapped, &desc, &case);
            }
        }
    }
}

tests![
    Gpu exclusive_scan_matches_cpu,
    Gpu exclusive_scan_overflow_is_an_error,
    Gpu compact_matches_cpu,
    Gpu sort_perm_one_key_matches_cpu,
    Gpu sort_perm_several_keys_matches_cpu,
    Gpu sort_perm_by_rank_matches_cpu,
    Gpu sort_perm_large_matches_cpu,
    Gpu adjacent_distinct_matches_cpu,
    Gpu repeated_key_matches_cpu,
    Gpu sort_perm_of_sorted_rows_matches_cpu,
];
