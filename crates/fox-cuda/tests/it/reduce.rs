//! GPU vs CPU: ReduceByKey with every aggregate (count, exact integer and decimal sum and
//! average with rescaling, float sum and average, min and max of numbers, floats, bools
//! and strings by rank), 0 to 3 keys, sizes around block sizes, all-equal and skewed keys,
//! overflow and bad string codes, and one group of 10^7 rows; sums, averages, minima and
//! maxima of 38-digit decimals (i128) with fox-cpu's overflow rule (a running sum that
//! leaves i128, or a result beyond 38 digits), and i128 keys.

use crate::compare;
use fox_cpu::CpuBackend;
use fox_cuda::testing::{gpu, random_col, run_on, sort_rows, Dist, Rng, Strings, LARGE, MAX_WIDE, SIZES};
use fox_cuda::CudaBackend;
use fox_kernel::{AggSpec, Elem, Kernel};
use fox_runtime::HostCol;
use fox_sema::core::{AggFunc, Type};

fn spec(func: AggFunc, input: Option<Type>, output: Type) -> AggSpec {
    AggSpec { func, input, output }
}

/// Aggregates over value types the CPU accepts, with small values so sums fit.
fn agg_specs() -> Vec<AggSpec> {
    use AggFunc::*;
    vec![
        spec(Count, None, Type::Int64),
        spec(Sum, Some(Type::Int32), Type::Int64),
        spec(Sum, Some(Type::Int64), Type::Int64),
        spec(Sum, Some(Type::Decimal(2)), Type::Decimal(2)),
        spec(Sum, Some(Type::Decimal(4)), Type::Decimal(2)),
        spec(Avg, Some(Type::Int64), Type::Decimal(2)),
        spec(Avg, Some(Type::Decimal(2)), Type::Decimal(4)),
        spec(Avg, Some(Type::Decimal(3)), Type::Decimal(1)),
        spec(Sum, Some(Type::Float64), Type::Float64),
        spec(Avg, Some(Type::Float64), Type::Float64),
        spec(Min, Some(Type::Int32), Type::Int32),
        spec(Max, Some(Type::Int64), Type::Int64),
        spec(Min, Some(Type::Float64), Type::Float64),
        spec(Max, Some(Type::Float64), Type::Float64),
        spec(Min, Some(Type::Bool), Type::Bool),
        spec(Max, Some(Type::Date), Type::Date),
        spec(Min, Some(Type::String), Type::String),
        spec(Max, Some(Type::String), Type::String),
        spec(Count, None, Type::Int32),
        // Sums of decimals are 38-digit decimals (i128), from 64-bit or 128-bit values.
        spec(Sum, Some(Type::Decimal(2)), Type::WideDecimal(2)),
        spec(Sum, Some(Type::Decimal(4)), Type::WideDecimal(2)),
        spec(Sum, Some(Type::WideDecimal(2)), Type::WideDecimal(2)),
        spec(Sum, Some(Type::WideDecimal(4)), Type::WideDecimal(3)),
        spec(Avg, Some(Type::WideDecimal(2)), Type::WideDecimal(6)),
        spec(Min, Some(Type::WideDecimal(2)), Type::WideDecimal(2)),
        spec(Max, Some(Type::WideDecimal(4)), Type::WideDecimal(4)),
    ]
}

const RANK_LEN: usize = 500;

/// A random permutation of `0..n` as a rank table.
fn rank_table(rng: &mut Rng, n: usize) -> HostCol {
    let mut v: Vec<u32> = (0..n as u32).collect();
    for i in (1..n).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
    HostCol::U32(v)
}

/// A value column for an aggregate's input type.
fn value_col(rng: &mut Rng, ty: Type, n: usize, dist: Dist) -> HostCol {
    match ty {
        Type::String => HostCol::U32((0..n).map(|_| rng.below(RANK_LEN as u64) as u32).collect()),
        Type::Bool => HostCol::U8((0..n).map(|_| rng.below(2) as u8).collect()),
        Type::Float64 => random_col(rng, Elem::F64, n, dist),
        Type::Int32 | Type::Date => random_col(rng, Elem::I32, n, Dist::Range(2_000_001)),
        Type::WideDecimal(_) => wide_values(rng, n, dist),
        _ => random_col(rng, Elem::I64, n, Dist::Range(2_000_000_001)),
    }
}

/// 38-digit values whose sums over 10^7 rows stay within 38 digits: small ones, ones of
/// up to 30 digits and ones near the bounds of i64 (all equal under `AllEqual`).
fn wide_values(rng: &mut Rng, n: usize, dist: Dist) -> HostCol {
    let big = 10u128.pow(30);
    HostCol::I128(
        (0..n)
            .map(|_| {
                let x = match (dist, rng.below(4)) {
                    (Dist::AllEqual, _) => 12_345_678_901_234_567_890_123,
                    (_, 0) => i128::from(i64::MAX) + rng.below(5) as i128 - 2,
                    (_, 1) => ((u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64())) % big) as i128,
                    _ => rng.below(2_000_001) as i128 - 1_000_000,
                };
                if rng.chance(50) && dist != Dist::AllEqual {
                    -x
                } else {
                    x
                }
            })
            .collect(),
    )
}

/// The arguments of a ReduceByKey over `keys` and `aggs`.
fn reduce_args(rng: &mut Rng, keys: &[HostCol], aggs: &[AggSpec], n: usize, dist: Dist) -> Vec<HostCol> {
    let mut args = keys.to_vec();
    for a in aggs {
        if let (f, Some(ty)) = (a.func, a.input) {
            if f != AggFunc::Count {
                args.push(value_col(rng, ty, n, dist));
            }
        }
    }
    if keys.is_empty() && args.is_empty() {
        args.push(random_col(rng, Elem::U8, n, Dist::Uniform));
    }
    if aggs
        .iter()
        .any(|a| matches!(a.func, AggFunc::Min | AggFunc::Max) && a.input == Some(Type::String))
    {
        args.push(rank_table(rng, RANK_LEN));
    }
    args
}

fn check(gpu: &mut CudaBackend, nkeys: usize, aggs: &[AggSpec], args: &[HostCol], case: &str) -> Result<(), String> {
    compare(
        gpu,
        &Kernel::ReduceByKey {
            nkeys,
            aggs: aggs.to_vec(),
        },
        args,
        &Strings::default(),
        case,
    )
    .map(|_| ())
}

fn reduce_every_aggregate_keys_sizes_and_distributions() {
    let mut gpu = gpu("reduce_every_aggregate_keys_sizes_and_distributions");
    let mut rng = Rng::new(21);
    let key_sets: [&[Elem]; 7] = [
        &[],
        &[Elem::U32],
        &[Elem::F64],
        &[Elem::I128],
        &[Elem::I32, Elem::U8],
        &[Elem::I128, Elem::U32],
        &[Elem::I64, Elem::U32, Elem::F64],
    ];
    let aggs = agg_specs();
    for keys_elems in key_sets {
        for &dist in &Dist::ALL {
            for &n in SIZES.iter().chain(&[100_003]) {
                let key_cols: Vec<HostCol> = keys_elems.iter().map(|&e| random_col(&mut rng, e, n, dist)).collect();
                let keys = sort_rows(&key_cols, false);
                let args = reduce_args(&mut rng, &keys, &aggs, n, dist);
                let case = format!("keys {keys_elems:?}, dist {dist:?}, n {n}");
                check(&mut gpu, keys.len(), &aggs, &args, &case).expect("ReduceByKey succeeds");
            }
        }
    }
}

fn reduce_counts_only_without_keys() {
    let mut gpu = gpu("reduce_counts_only_without_keys");
    let mut rng = Rng::new(22);
    let aggs = vec![
        spec(AggFunc::Count, None, Type::Int64),
        spec(AggFunc::Count, None, Type::Int32),
    ];
    for &n in SIZES {
        let args = vec![random_col(&mut rng, Elem::F64, n, Dist::Uniform)];
        check(&mut gpu, 0, &aggs, &args, &format!("counts only, n {n}")).expect("succeeds");
    }
}

fn reduce_errors_match_the_cpu() {
    let mut gpu = gpu("reduce_errors_match_the_cpu");
    let mut rng = Rng::new(23);
    // Sums of large i64 values overflow int64.
    let keys = sort_rows(&[random_col(&mut rng, Elem::U32, 4097, Dist::Range(3))], false);
    let big = HostCol::I64((0..4097).map(|i| i64::MAX - i).collect());
    let aggs = vec![spec(AggFunc::Sum, Some(Type::Int64), Type::Int64)];
    let res = check(&mut gpu, 1, &aggs, &[keys[0].clone(), big.clone()], "i64 sum overflow");
    assert!(res.is_err(), "the overflowing sum must fail on both");
    // Int32 results that do not fit.
    let aggs = vec![spec(AggFunc::Sum, Some(Type::Int64), Type::Int32)];
    let small = HostCol::I64((0..4097).map(|_| 3_000_000).collect());
    let res = check(
        &mut gpu,
        1,
        &aggs,
        &[keys[0].clone(), small.clone()],
        "int32 result overflow",
    );
    assert!(res.is_err(), "an int32 sum above 2^31 must fail on both");
    // Both name the first group that does not fit, in the same words.
    let args = [keys[0].clone(), small];
    let want = same_outcome(&mut gpu, 1, &aggs, &args, "int32 result overflow").unwrap_err();
    assert!(
        want.contains("the sum of the group at row 0 does not fit int32"),
        "{want}"
    );
    // The same with many groups of two rows (segments summed one thread each): the first
    // failing group is named, at row 2000 here.
    let pairs = HostCol::U32((0..4097u32).map(|i| i / 2).collect());
    let halves = HostCol::I64((0..4097).map(|i| if i >= 2000 { 1_500_000_000 } else { 7 }).collect());
    let args = [pairs.clone(), halves];
    let want = same_outcome(&mut gpu, 1, &aggs, &args, "int32 result overflow, pairs").unwrap_err();
    assert!(
        want.contains("the sum of the group at row 2000 does not fit int32"),
        "{want}"
    );
    let aggs64 = vec![spec(AggFunc::Sum, Some(Type::Int64), Type::Int64)];
    let res = check(&mut gpu, 1, &aggs64, &[pairs, big.clone()], "i64 sum overflow, pairs");
    assert!(res.is_err(), "the overflowing sums of pairs must fail on both");
    // Rescaling overflows.
    let aggs = vec![spec(AggFunc::Avg, Some(Type::Decimal(0)), Type::Decimal(18))];
    let res = check(&mut gpu, 1, &aggs, &[keys[0].clone(), big], "decimal rescale overflow");
    assert!(res.is_err(), "a rescale overflow must fail on both");
    // A string code outside the rank table.
    let aggs = vec![spec(AggFunc::Max, Some(Type::String), Type::String)];
    let codes = HostCol::U32((0..4097).map(|i| if i == 2000 { 999 } else { 1 }).collect());
    let res = check(
        &mut gpu,
        1,
        &aggs,
        &[keys[0].clone(), codes, rank_table(&mut rng, 10)],
        "code outside the rank table",
    );
    assert!(res.is_err(), "a bad string code must fail on both");
    let codes = HostCol::U32((0..4097).map(|i| if i == 3001 { 999 } else { 1 }).collect());
    let res = check(
        &mut gpu,
        1,
        &aggs,
        &[
            HostCol::U32((0..4097u32).map(|i| i / 2).collect()),
            codes,
            rank_table(&mut rng, 10),
        ],
        "code outside the rank table, pairs",
    );
    assert!(res.is_err(), "a bad string code in a group of two must fail on both");
    // Float sum into a non-float type, count into float64: rejected, even when empty.
    for (a, n) in [
        (spec(AggFunc::Sum, Some(Type::Float64), Type::Int64), 0),
        (spec(AggFunc::Sum, Some(Type::Float64), Type::Int64), 10),
        (spec(AggFunc::Count, None, Type::Float64), 0),
    ] {
        let mut args = vec![random_col(&mut rng, Elem::U32, n, Dist::AllEqual)];
        if a.func != AggFunc::Count {
            args.push(random_col(&mut rng, Elem::F64, n, Dist::Uniform));
        }
        let res = check(&mut gpu, 1, std::slice::from_ref(&a), &args, &format!("{a:?}, n {n}"));
        assert!(res.is_err(), "{a:?} must be rejected on both");
    }
}

/// Runs a ReduceByKey on both backends: the same columns, or the same error message.
fn same_outcome(
    gpu: &mut CudaBackend,
    nkeys: usize,
    aggs: &[AggSpec],
    args: &[HostCol],
    case: &str,
) -> Result<(), String> {
    let res = check(gpu, nkeys, aggs, args, case);
    if let Err(want) = &res {
        let k = Kernel::ReduceByKey {
            nkeys,
            aggs: aggs.to_vec(),
        };
        let got = run_on(gpu, &k, args, &Strings::default()).unwrap_err();
        assert_eq!(&got, want, "{case}: the gpu's error differs");
    }
    res
}

fn reduce_wide_sums_overflow_as_on_the_cpu() {
    let mut gpu = gpu("reduce_wide_sums_overflow_as_on_the_cpu");
    let mut rng = Rng::new(26);
    let m = MAX_WIDE;
    let w2 = Type::WideDecimal(2);
    let sum = vec![spec(AggFunc::Sum, Some(w2), w2)];
    let avg = vec![spec(AggFunc::Avg, Some(w2), Type::WideDecimal(6))];
    let minmax = vec![spec(AggFunc::Min, Some(w2), w2), spec(AggFunc::Max, Some(w2), w2)];
    // Groups of one key each (key = group number), in order.
    let keyed = |groups: &[Vec<i128>]| -> Vec<HostCol> {
        let keys = groups
            .iter()
            .enumerate()
            .flat_map(|(g, v)| std::iter::repeat_n(g as u32, v.len()))
            .collect();
        vec![HostCol::U32(keys), HostCol::I128(groups.concat())]
    };
    // A running sum beyond i128 fails even when the total fits; the same values in another
    // order do not; a total beyond 38 digits fails; long groups of extremes cross pieces.
    let alternating: Vec<i128> = (0..5000).map(|i| if i % 2 == 0 { m } else { -m }).collect();
    let cases: Vec<(&str, Vec<Vec<i128>>, bool)> = vec![
        ("a running sum beyond i128", vec![vec![1, 2], vec![m, m, -m]], false),
        (
            "the same values, fitting running sums",
            vec![vec![1, 2], vec![m, -m, m]],
            true,
        ),
        (
            "a total beyond 38 digits",
            vec![vec![3], vec![m, 5], vec![-m, -5]],
            false,
        ),
        (
            "alternating extremes",
            vec![vec![7], alternating.clone(), alternating[1..].to_vec()],
            true,
        ),
        (
            "alternating extremes, one too many",
            vec![alternating.clone(), [alternating.clone(), vec![m, m]].concat()],
            false,
        ),
        (
            "near i64",
            vec![vec![i128::from(i64::MAX); 3000], vec![i128::from(i64::MIN); 3]],
            true,
        ),
        (
            "beyond 38 digits in the input",
            vec![vec![i128::MAX, i128::MIN, 1], vec![i128::MIN]],
            false,
        ),
    ];
    for (what, groups, ok) in cases {
        let args = keyed(&groups);
        let res = same_outcome(&mut gpu, 1, &sum, &args, what);
        assert_eq!(res.is_ok(), ok, "{what}: {res:?}");
        let _ = same_outcome(&mut gpu, 1, &avg, &args, &format!("{what}, average"));
        let two = [args[0].clone(), args[1].clone(), args[1].clone()];
        same_outcome(&mut gpu, 1, &minmax, &two, &format!("{what}, min and max")).expect("min and max succeed");
        // Without keys: one group of every row.
        let _ = same_outcome(&mut gpu, 0, &sum, &args[1..], &format!("{what}, one group"));
    }
    // Sums of decimal(2) (64-bit values) into 38 digits, and of 38-digit values with
    // rescales, over many groups.
    for &n in &[1000usize, 100_003] {
        let keys = sort_rows(&[random_col(&mut rng, Elem::U32, n, Dist::Range(50))], false);
        // Full-range 64-bit values: their sums need more than 64 bits.
        let vals = random_col(&mut rng, Elem::I64, n, Dist::Uniform);
        let small = random_col(&mut rng, Elem::I64, n, Dist::Range(2_000_000_001));
        let aggs = vec![
            spec(AggFunc::Sum, Some(Type::Decimal(2)), w2),
            spec(AggFunc::Sum, Some(Type::Decimal(4)), Type::WideDecimal(6)),
            spec(AggFunc::Avg, Some(Type::Decimal(2)), Type::Decimal(6)),
        ];
        let args = [keys[0].clone(), vals.clone(), vals, small];
        same_outcome(&mut gpu, 1, &aggs, &args, "i64 sums into i128").expect("succeeds");
        let vals = wide_values(&mut rng, n, Dist::Uniform);
        let aggs = vec![
            spec(AggFunc::Sum, Some(Type::WideDecimal(4)), Type::WideDecimal(0)),
            spec(AggFunc::Sum, Some(w2), Type::WideDecimal(5)),
            spec(AggFunc::Avg, Some(w2), Type::WideDecimal(6)),
        ];
        let args = [keys[0].clone(), vals.clone(), vals.clone(), vals.clone()];
        same_outcome(&mut gpu, 1, &aggs, &args, "i128 sums with rescales").expect("succeeds");
        // Scaled up beyond 38 digits: the first group that does not fit, on both.
        let aggs = vec![spec(AggFunc::Sum, Some(w2), Type::WideDecimal(12))];
        let args = [keys[0].clone(), vals];
        assert!(same_outcome(&mut gpu, 1, &aggs, &args, "i128 sums scaled beyond 38 digits").is_err());
    }
}

fn reduce_ten_million_rows() {
    let mut gpu = gpu("reduce_ten_million_rows");
    let mut rng = Rng::new(24);
    let aggs = agg_specs();
    // One group of every row.
    let args = reduce_args(&mut rng, &[], &aggs, LARGE, Dist::Uniform);
    check(&mut gpu, 0, &aggs, &args, "one group of 10^7 rows").expect("succeeds");
    // Skewed keys: one huge group and many small ones.
    let keys = sort_rows(&[random_col(&mut rng, Elem::U32, LARGE, Dist::Skewed)], false);
    let args = reduce_args(&mut rng, &keys, &aggs, LARGE, Dist::Skewed);
    check(&mut gpu, 1, &aggs, &args, "skewed keys, 10^7 rows").expect("succeeds");
    // Many groups.
    let keys = sort_rows(&[random_col(&mut rng, Elem::I64, LARGE, Dist::Range(1 << 22))], false);
    let args = reduce_args(&mut rng, &keys, &aggs, LARGE, Dist::Range(1000));
    check(&mut gpu, 1, &aggs, &args, "4M groups, 10^7 rows").expect("succeeds");
}

/// Finite floats of many magnitudes: sums depend on the order of the additions.
fn finite_floats(rng: &mut Rng, n: usize) -> HostCol {
    HostCol::F64(
        (0..n)
            .map(|_| {
                let mant = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                let sign = if rng.chance(50) { -1.0 } else { 1.0 };
                sign * mant * 2f64.powi(rng.below(40) as i32 - 20)
            })
            .collect(),
    )
}

fn reduce_float_sums_are_bit_identical() {
    let mut gpu = gpu("reduce_float_sums_are_bit_identical");
    let mut rng = Rng::new(25);
    let aggs = vec![
        spec(AggFunc::Sum, Some(Type::Float64), Type::Float64),
        spec(AggFunc::Avg, Some(Type::Float64), Type::Float64),
    ];
    for (n, groups) in [(1000, 1), (4097, 3), (100_003, 17), (1_000_003, 1000), (LARGE, 1)] {
        let keys = sort_rows(&[random_col(&mut rng, Elem::U32, n, Dist::Range(groups))], false);
        let vals = finite_floats(&mut rng, n);
        let case = format!("finite floats, n {n}, about {groups} groups");
        check(&mut gpu, 1, &aggs, &[keys[0].clone(), vals.clone(), vals], &case).expect("succeeds");
    }
}

fn reduce_averages_keep_to_18_digits_as_on_the_cpu() {
    let mut gpu = gpu("reduce_averages_keep_to_18_digits_as_on_the_cpu");
    // The mean of decimal(2) values is a decimal(6) of at most 18 digits: 999999999999.99
    // fits, 1000000000000.00 does not (it would fit 64 bits).
    let keys = HostCol::U32(vec![0, 0, 1, 1, 2]);
    let aggs = vec![spec(AggFunc::Avg, Some(Type::Decimal(2)), Type::Decimal(6))];
    let max = 10i64.pow(14) - 1;
    let ok = HostCol::I64(vec![max, max, -max, -max, 7]);
    assert!(same_outcome(&mut gpu, 1, &aggs, &[keys.clone(), ok], "18 digits").is_ok());
    let over = HostCol::I64(vec![max, max, -max - 1, -max - 1, 7]);
    let k = Kernel::ReduceByKey {
        nkeys: 1,
        aggs: aggs.clone(),
    };
    let args = [keys.clone(), over.clone()];
    let want = run_on(&mut CpuBackend::new(), &k, &args, &Strings::default()).unwrap_err();
    assert!(
        want.contains("the average of the group at row 2 does not fit decimal(6)"),
        "{want}"
    );
    assert!(same_outcome(&mut gpu, 1, &aggs, &args, "19 digits").is_err());
}

tests![
    Gpu reduce_every_aggregate_keys_sizes_and_distributions,
    Gpu reduce_counts_only_without_keys,
    Gpu reduce_errors_match_the_cpu,
    Gpu reduce_wide_sums_overflow_as_on_the_cpu,
    Gpu reduce_ten_million_rows,
    Gpu reduce_float_sums_are_bit_identical,
    Gpu reduce_averages_keep_to_18_digits_as_on_the_cpu,
];
