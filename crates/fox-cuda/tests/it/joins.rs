//! GPU vs CPU: JoinCount → (host scan) → JoinWrite, MatchFlags, MergeUnion (deduplicating
//! and disjoint) on random sorted inputs: duplicates, all-equal and skewed keys, empty
//! sides, one row, sizes around block and merge-tile sizes, interleaved and
//! non-overlapping disjoint sides, multi-column keys of mixed element types, cross
//! products (no keys), i128 keys (compared as two 64-bit words), and 10^7-row cases.

use crate::compare;
use fox_cuda::testing::{first_mismatch, gpu, random_col, sort_rows, take, Dist, Rng, Strings, ELEMS, LARGE, SIZES};
use fox_cuda::CudaBackend;
use fox_kernel::{Elem, Kernel};
use fox_runtime::HostCol;

/// A sorted relation of `n` rows with columns of `elems`, spread as `dist`.
fn sorted_rel(rng: &mut Rng, elems: &[Elem], n: usize, dist: Dist, dedup: bool) -> Vec<HostCol> {
    let cols: Vec<HostCol> = elems.iter().map(|&e| random_col(rng, e, n, dist)).collect();
    sort_rows(&cols, dedup)
}

/// Exclusive scan of the counts on the host.
fn scan(counts: &HostCol) -> (HostCol, HostCol) {
    let HostCol::U64(c) = counts else {
        panic!("counts are {:?}", counts.elem())
    };
    let mut offsets = Vec::with_capacity(c.len());
    let mut sum = 0u64;
    for &x in c {
        offsets.push(sum);
        sum += x;
    }
    (HostCol::U64(offsets), HostCol::U64(vec![sum]))
}

/// Runs the whole join pipeline and the match flags on one pair of sides.
fn check_join(gpu: &mut CudaBackend, left: &[HostCol], right: &[HostCol], case: &str) {
    let ctx = Strings::default();
    let nkeys = left.len();
    let mut keys: Vec<HostCol> = left.to_vec();
    keys.extend(right.iter().cloned());
    let counts = compare(gpu, &Kernel::JoinCount { nkeys }, &keys, &ctx, case).expect("JoinCount succeeds");
    let (offsets, total) = scan(&counts[0]);
    let mut wargs = keys.clone();
    wargs.push(offsets);
    wargs.push(total);
    compare(gpu, &Kernel::JoinWrite { nkeys }, &wargs, &ctx, case).expect("JoinWrite succeeds");
    for anti in [false, true] {
        compare(gpu, &Kernel::MatchFlags { nkeys, anti }, &keys, &ctx, case).expect("MatchFlags succeeds");
    }
    // The right rows dealt to three sides in order (each stays sorted; the second is
    // empty): a match in any side, the later sides searched only for rows not yet found.
    if nkeys > 0 {
        let nr = right[0].len();
        let mut margs: Vec<HostCol> = left.to_vec();
        for side in [0, 1, 2] {
            let rows: Vec<usize> = (0..nr).filter(|j| [0, 2, 2, 2][j % 4] == side).collect();
            margs.extend(right.iter().map(|c| take(c, &rows)));
        }
        for anti in [false, true] {
            let case = format!("{case}, three right sides");
            compare(gpu, &Kernel::MatchFlags { nkeys, anti }, &margs, &ctx, &case).expect("MatchFlags succeeds");
        }
    }
}

fn join_single_key_every_type() {
    let mut gpu = gpu("join_single_key_every_type");
    let mut rng = Rng::new(11);
    for &e in &ELEMS {
        for &dist in &Dist::ALL {
            for &nl in SIZES {
                let nr = SIZES[rng.below(SIZES.len() as u64) as usize];
                let left = sorted_rel(&mut rng, &[e], nl, dist, false);
                let right = sorted_rel(&mut rng, &[e], nr, dist, false);
                let case = format!("key {e:?}, dist {dist:?}, left {nl}, right {nr}");
                check_join(&mut gpu, &left, &right, &case);
            }
        }
    }
}

fn join_multi_key_mixed_types() {
    let mut gpu = gpu("join_multi_key_mixed_types");
    let mut rng = Rng::new(12);
    let key_sets: [&[Elem]; 6] = [
        &[Elem::U32, Elem::U32],
        &[Elem::I32, Elem::F64],
        &[Elem::U8, Elem::I64, Elem::U32],
        &[Elem::U64, Elem::I32, Elem::F64],
        &[Elem::I128, Elem::U32],
        &[Elem::U8, Elem::I128, Elem::I128],
    ];
    for keys in key_sets {
        for dist in [Dist::Range(4), Dist::Range(16), Dist::Skewed, Dist::AllEqual] {
            for (nl, nr) in [(0, 5), (5, 0), (1, 1), (1000, 1023), (1025, 4097), (4097, 1000)] {
                let left = sorted_rel(&mut rng, keys, nl, dist, false);
                let right = sorted_rel(&mut rng, keys, nr, dist, false);
                let case = format!("keys {keys:?}, dist {dist:?}, left {nl}, right {nr}");
                check_join(&mut gpu, &left, &right, &case);
            }
        }
    }
}

fn join_all_equal_keys_is_a_full_product() {
    let mut gpu = gpu("join_all_equal_keys_is_a_full_product");
    let mut rng = Rng::new(13);
    for (nl, nr) in [(1, 100_000), (100_000, 1), (1000, 3001), (3, 1_000_003)] {
        let left = sorted_rel(&mut rng, &[Elem::U32], nl, Dist::AllEqual, false);
        let right = sorted_rel(&mut rng, &[Elem::U32], nr, Dist::AllEqual, false);
        check_join(&mut gpu, &left, &right, &format!("all equal, left {nl}, right {nr}"));
    }
}

fn join_without_keys_is_a_cross_product() {
    let mut gpu = gpu("join_without_keys_is_a_cross_product");
    let mut rng = Rng::new(14);
    for (nl, nr) in [(0, 0), (0, 3), (3, 0), (1, 1), (1025, 3), (7, 1000)] {
        let ctx = Strings::default();
        let keys = vec![
            random_col(&mut rng, Elem::F64, nl, Dist::Uniform),
            random_col(&mut rng, Elem::U8, nr, Dist::Uniform),
        ];
        let case = format!("cross product, left {nl}, right {nr}");
        let counts = compare(&mut gpu, &Kernel::JoinCount { nkeys: 0 }, &keys, &ctx, &case).expect("count");
        let (offsets, total) = scan(&counts[0]);
        let mut wargs = keys.clone();
        wargs.push(offsets);
        wargs.push(total);
        compare(&mut gpu, &Kernel::JoinWrite { nkeys: 0 }, &wargs, &ctx, &case).expect("write");
        for anti in [false, true] {
            compare(&mut gpu, &Kernel::MatchFlags { nkeys: 0, anti }, &keys, &ctx, &case).expect("flags");
        }
    }
}

/// A block of left rows searches the right rows between its first and last rows' bounds:
/// through shared memory, tile by tile, when that range is short and the key has at most
/// two words, in global memory otherwise (a long range, or wider keys), and through the
/// descriptor for keys of more than four words. Sparse left sides over dense right sides
/// give long ranges, dense ones short ranges, and a few values over thousands of rows
/// runs of equal keys across tiles; grids of one wave search their blocks' ranges in the
/// kernel, larger ones take them from a launch before. Half the left rows are right
/// rows, the others drawn from a wider domain.
fn join_ranges_short_and_long_every_key_width() {
    let mut gpu = gpu("join_ranges_short_and_long_every_key_width");
    let mut rng = Rng::new(18);
    let key_sets: [&[Elem]; 5] = [
        &[Elem::U32],
        &[Elem::I32, Elem::I32],
        &[Elem::I128],
        &[Elem::U32, Elem::I64, Elem::U8],
        &[Elem::I32, Elem::I32, Elem::I64, Elem::U32, Elem::U8],
    ];
    for keys in key_sets {
        for (nl, nr, dom) in [
            (300, 200_003, 1 << 12),
            (2_000, 300_001, 1 << 14),
            (100_003, 1_000, 1 << 10),
            (257, 1_025, 1 << 6),
            (70_000, 70_001, 1 << 16),
            (3_000, 60_001, 1 << 14),
            (500, 6_000, 1 << 2),
            // More blocks than one wave: the ranges from the launch before.
            (400_000, 600_001, 1 << 20),
            (150_000, 5_000_000, 1 << 24),
        ] {
            if nl > 100_003 && keys.len() > 2 {
                continue;
            }
            for dedup in [false, true] {
                let right = sorted_rel(&mut rng, keys, nr, Dist::Range(dom), dedup);
                // Half the left rows are right rows (when the right side has any).
                let drawn = sorted_rel(&mut rng, keys, nl, Dist::Range(dom * 2), false);
                let held = right[0].len() as u64;
                let picks: Vec<usize> = (0..nl / 2).map(|_| rng.below(held) as usize).collect();
                let keep: Vec<usize> = (nl / 2..nl).collect();
                let cols: Vec<HostCol> = (0..keys.len())
                    .map(|c| {
                        let parts = vec![take(&right[c], &picks), take(&drawn[c], &keep)];
                        HostCol::try_concat(keys[c], parts, "left").expect("concatenates")
                    })
                    .collect();
                let left = sort_rows(&cols, false);
                let case = format!("keys {keys:?}, left {nl}, right {nr} over {dom}, right distinct {dedup}");
                check_join(&mut gpu, &left, &right, &case);
            }
        }
    }
}

fn join_write_rejects_offsets_that_are_not_the_scan() {
    let mut gpu = gpu("join_write_rejects_offsets_that_are_not_the_scan");
    let mut rng = Rng::new(15);
    let ctx = Strings::default();
    let left = sorted_rel(&mut rng, &[Elem::I64], 1000, Dist::Range(16), false);
    let right = sorted_rel(&mut rng, &[Elem::I64], 1000, Dist::Range(16), false);
    let keys = vec![left[0].clone(), right[0].clone()];
    let counts = compare(&mut gpu, &Kernel::JoinCount { nkeys: 1 }, &keys, &ctx, "setup").expect("count");
    let (offsets, total) = scan(&counts[0]);
    let HostCol::U64(mut off) = offsets.clone() else {
        unreachable!()
    };
    off[500] += 1;
    let HostCol::U64(tot) = total.clone() else {
        unreachable!()
    };
    for (what, o, t) in [
        ("offset 500 off by one", HostCol::U64(off), total.clone()),
        ("total too large", offsets.clone(), HostCol::U64(vec![tot[0] + 1])),
        ("total too small", offsets, HostCol::U64(vec![tot[0].saturating_sub(1)])),
    ] {
        let mut wargs = keys.clone();
        wargs.push(o);
        wargs.push(t);
        let res = compare(&mut gpu, &Kernel::JoinWrite { nkeys: 1 }, &wargs, &ctx, what);
        assert!(res.is_err(), "{what}: both backends must reject the offsets");
    }
}

fn merge_union_every_width() {
    let mut gpu = gpu("merge_union_every_width");
    let mut rng = Rng::new(16);
    let ctx = Strings::default();
    let shapes: [&[Elem]; 7] = [
        &[Elem::U32],
        &[Elem::F64],
        &[Elem::I128],
        &[Elem::I32, Elem::U32],
        &[Elem::I128, Elem::U8],
        &[Elem::U8, Elem::I64, Elem::F64],
        &[Elem::U32, Elem::U32, Elem::U32],
    ];
    for elems in shapes {
        for dist in [
            Dist::Uniform,
            Dist::Range(4),
            Dist::Range(64),
            Dist::AllEqual,
            Dist::Skewed,
        ] {
            for (na, nb) in [(0, 0), (0, 7), (7, 0), (1, 1), (1000, 1023), (1025, 4097), (4097, 1)] {
                let a = sorted_rel(&mut rng, elems, na, dist, true);
                let b = sorted_rel(&mut rng, elems, nb, dist, true);
                let mut args = a;
                args.extend(b);
                let case = format!("columns {elems:?}, dist {dist:?}, a {na}, b {nb}");
                compare(
                    &mut gpu,
                    &Kernel::MergeUnion {
                        width: elems.len(),
                        disjoint: false,
                    },
                    &args,
                    &ctx,
                    &case,
                )
                .expect("MergeUnion succeeds");
            }
        }
    }
}

fn joins_and_union_over_ten_million_rows() {
    let mut gpu = gpu("joins_and_union_over_ten_million_rows");
    let mut rng = Rng::new(17);
    let left = sorted_rel(&mut rng, &[Elem::U32], LARGE, Dist::Range(LARGE as u64), false);
    let right = sorted_rel(&mut rng, &[Elem::U32], LARGE / 3, Dist::Range(LARGE as u64), false);
    check_join(
        &mut gpu,
        &left,
        &right,
        &format!("large, left {LARGE}, right {}", LARGE / 3),
    );
    let skew_l = sorted_rel(&mut rng, &[Elem::I64, Elem::U32], LARGE, Dist::Range(1 << 20), false);
    let skew_r = sorted_rel(&mut rng, &[Elem::I64, Elem::U32], 1000, Dist::Range(1 << 20), false);
    check_join(&mut gpu, &skew_l, &skew_r, "large two-key left, small right");
    let wide_l = sorted_rel(&mut rng, &[Elem::I128], LARGE, Dist::Range(1 << 22), false);
    let wide_r = sorted_rel(&mut rng, &[Elem::I128], LARGE / 5, Dist::Range(1 << 22), false);
    check_join(&mut gpu, &wide_l, &wide_r, "large i128 keys");
    let a = sorted_rel(&mut rng, &[Elem::U32, Elem::I32], LARGE, Dist::Range(1 << 12), true);
    let b = sorted_rel(&mut rng, &[Elem::U32, Elem::I32], LARGE, Dist::Range(1 << 12), true);
    let mut args = a;
    args.extend(b);
    compare(
        &mut gpu,
        &Kernel::MergeUnion {
            width: 2,
            disjoint: false,
        },
        &args,
        &Strings::default(),
        "large union",
    )
    .expect("MergeUnion succeeds");
}

/// How the distinct rows of a disjoint union are dealt to its sides.
#[derive(Clone, Copy, Debug)]
enum Deal {
    /// Each row to `a` or `b` at random (one in `b` of every `1 + k`).
    Random(u64),
    /// The first rows to `a`, the rest to `b` (every row of `a` below every row of `b`).
    Below,
    /// The first rows to `b`, the rest to `a`.
    Above,
    /// Alternately.
    Alternate,
    /// Every row to `a`.
    AllA,
    /// Every row to `b`.
    AllB,
}

const DEALS: [Deal; 7] = [
    Deal::Random(1),
    Deal::Random(7),
    Deal::Below,
    Deal::Above,
    Deal::Alternate,
    Deal::AllA,
    Deal::AllB,
];

/// `rows` (sorted, distinct) dealt to two disjoint sorted sides, as `a`'s columns then
/// `b`'s.
fn deal(rng: &mut Rng, rows: &[HostCol], how: Deal) -> Vec<HostCol> {
    let n = rows.first().map_or(0, |c| c.len());
    let split = n / 3;
    let to_b: Vec<bool> = (0..n)
        .map(|i| match how {
            Deal::Random(k) => rng.below(1 + k) == 0,
            Deal::Below => i >= split,
            Deal::Above => i < split,
            Deal::Alternate => i % 2 == 1,
            Deal::AllA => false,
            Deal::AllB => true,
        })
        .collect();
    let ia: Vec<usize> = (0..n).filter(|&i| !to_b[i]).collect();
    let ib: Vec<usize> = (0..n).filter(|&i| to_b[i]).collect();
    let mut args: Vec<HostCol> = rows.iter().map(|c| take(c, &ia)).collect();
    args.extend(rows.iter().map(|c| take(c, &ib)));
    args
}

/// Both forms of `MergeUnion` on disjoint sides against the CPU, and the CPU's union
/// against the rows dealt.
fn check_disjoint_union(gpu: &mut CudaBackend, rows: &[HostCol], args: &[HostCol], case: &str) {
    let width = rows.len();
    for disjoint in [true, false] {
        let got = compare(
            gpu,
            &Kernel::MergeUnion { width, disjoint },
            args,
            &Strings::default(),
            &format!("{case}, disjoint {disjoint}"),
        )
        .expect("MergeUnion succeeds");
        for (c, (g, r)) in got.iter().zip(rows).enumerate() {
            assert!(
                g.len() == r.len() && first_mismatch(g, r).is_none(),
                "{case}: column {c} of the union is not that of the rows dealt"
            );
        }
    }
}

fn merge_union_of_disjoint_sides() {
    let mut gpu = gpu("merge_union_of_disjoint_sides");
    let mut rng = Rng::new(18);
    // One, two and three columns; i32, i64 and i128 keys; the tiles hold 2048 outputs for
    // up to two key words, fewer for more (an i128 is two words).
    let shapes: [&[Elem]; 9] = [
        &[Elem::I32],
        &[Elem::I64],
        &[Elem::I128],
        &[Elem::I32, Elem::I32],
        &[Elem::I64, Elem::I32],
        &[Elem::I128, Elem::I64],
        &[Elem::I32, Elem::I32, Elem::I32],
        &[Elem::I64, Elem::U8, Elem::F64],
        &[Elem::I128, Elem::I128, Elem::I128],
    ];
    let sizes = [
        0, 1, 2, 255, 256, 767, 768, 1791, 1792, 2047, 2048, 2049, 4097, 6145, 100_003,
    ];
    for elems in shapes {
        for dist in [Dist::Uniform, Dist::Range(1000), Dist::Skewed] {
            for n in sizes {
                let rows = sorted_rel(&mut rng, elems, n, dist, true);
                for how in DEALS {
                    let args = deal(&mut rng, &rows, how);
                    let case = format!("columns {elems:?}, dist {dist:?}, {} rows dealt {how:?}", rows[0].len());
                    check_disjoint_union(&mut gpu, &rows, &args, &case);
                }
            }
        }
    }
}

fn merge_union_of_disjoint_sides_over_ten_million_rows() {
    let mut gpu = gpu("merge_union_of_disjoint_sides_over_ten_million_rows");
    let mut rng = Rng::new(19);
    for elems in [
        &[Elem::I32][..],
        &[Elem::I64, Elem::I32],
        &[Elem::I128, Elem::I32, Elem::I64],
    ] {
        let rows = sorted_rel(&mut rng, elems, LARGE, Dist::Uniform, true);
        for how in [Deal::Random(1), Deal::Random(20), Deal::Below] {
            let args = deal(&mut rng, &rows, how);
            let case = format!("large, columns {elems:?}, {} rows dealt {how:?}", rows[0].len());
            check_disjoint_union(&mut gpu, &rows, &args, &case);
        }
    }
}

tests![
    Gpu join_single_key_every_type,
    Gpu join_multi_key_mixed_types,
    Gpu join_all_equal_keys_is_a_full_product,
    Gpu join_ranges_short_and_long_every_key_width,
    Gpu join_without_keys_is_a_cross_product,
    Gpu join_write_rejects_offsets_that_are_not_the_scan,
    Gpu merge_union_every_width,
    Gpu joins_and_union_over_ten_million_rows,
    Gpu merge_union_of_disjoint_sides,
    Gpu merge_union_of_disjoint_sides_over_ten_million_rows,
];
