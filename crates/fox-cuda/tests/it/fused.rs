//! GPU vs CPU: FusedReduce (a filter and an aggregation in one kernel) over 0 to 2 keys
//! of every packable element type, with and without a filter, every exact aggregate
//! (counts, sums and averages of integers and decimals, of expressions too, minima and
//! maxima of integers, decimals and dates), sizes around block sizes and 10^7 rows;
//! and the cases the one-pass kernel leaves to the unfused kernels: many groups, float
//! keys, float sums, values that fail (division by zero after the filter) and sums that
//! overflow their type. Sums of decimals into 38-digit decimals (i128) are settled in one
//! pass; keys, values and filters with 38-digit decimals run unfused, as on the CPU.

use fox_cuda::testing::{compare, gpu, random_col, Dist, Rng, Strings, LARGE, SIZES};
use fox_cuda::CudaBackend;
use fox_kernel::{AggSpec, Elem, KExpr, KExprKind, Kernel};
use fox_runtime::HostCol;
use fox_sema::core::{AggFunc, ArithOp, CmpOp, Type, Value};

fn col(i: usize, ty: Type) -> KExpr {
    KExpr {
        kind: KExprKind::Col(i),
        ty,
    }
}

fn int(v: i64) -> KExpr {
    KExpr {
        kind: KExprKind::Const(Value::Int64(v)),
        ty: Type::Int64,
    }
}

fn arith(op: ArithOp, a: KExpr, b: KExpr, ty: Type) -> KExpr {
    KExpr {
        kind: KExprKind::Arith(op, Box::new(a), Box::new(b)),
        ty,
    }
}

fn agg(func: AggFunc, e: Option<KExpr>, output: Type) -> (AggSpec, Option<KExpr>) {
    (
        AggSpec {
            func,
            input: e.as_ref().map(|e| e.ty),
            output,
        },
        e,
    )
}

/// The value columns after the keys: int64, decimal(2), int32, date, float64, and the
/// int64 column the filter reads.
const VALUES: usize = 6;

/// Aggregates over the value columns, which start at column `v`.
fn exact_aggs(v: usize) -> Vec<(AggSpec, Option<KExpr>)> {
    use AggFunc::*;
    let dec = Type::Decimal(2);
    let prod = || arith(ArithOp::Mul, col(v + 1, dec), col(v + 1, dec), Type::Decimal(4));
    vec![
        agg(Count, None, Type::Int64),
        agg(Sum, Some(col(v, Type::Int64)), Type::Int64),
        agg(Sum, Some(col(v + 1, dec)), dec),
        agg(Avg, Some(col(v + 1, dec)), Type::Decimal(6)),
        agg(Avg, Some(col(v + 2, Type::Int32)), Type::Decimal(6)),
        agg(Min, Some(col(v + 2, Type::Int32)), Type::Int32),
        agg(Max, Some(col(v + 3, Type::Date)), Type::Date),
        agg(Min, Some(col(v + 1, dec)), dec),
        agg(Max, Some(col(v, Type::Int64)), Type::Int64),
        agg(Sum, Some(prod()), Type::Decimal(4)),
        agg(Avg, Some(prod()), Type::Decimal(6)),
        agg(
            Sum,
            Some(arith(ArithOp::Add, col(v, Type::Int64), int(1), Type::Int64)),
            Type::Int64,
        ),
        // Sums of decimals are 38-digit decimals.
        agg(Sum, Some(col(v + 1, dec)), Type::WideDecimal(2)),
        agg(Sum, Some(prod()), Type::WideDecimal(4)),
        agg(Avg, Some(prod()), Type::Decimal(6)),
    ]
}

fn filter(v: usize) -> KExpr {
    KExpr {
        kind: KExprKind::Cmp(CmpOp::Ge, Box::new(col(v + 5, Type::Int64)), Box::new(int(0))),
        ty: Type::Bool,
    }
}

fn columns(rng: &mut Rng, keys: &[(Elem, Dist)], n: usize, big: bool) -> Vec<HostCol> {
    let mut args: Vec<HostCol> = keys.iter().map(|&(e, d)| random_col(rng, e, n, d)).collect();
    let wide = if big { Dist::Uniform } else { Dist::Range(2_000_000_001) };
    args.push(random_col(rng, Elem::I64, n, wide));
    args.push(random_col(rng, Elem::I64, n, Dist::Range(2_000_001)));
    args.push(random_col(rng, Elem::I32, n, Dist::Range(2_000_001)));
    args.push(random_col(rng, Elem::I32, n, Dist::Range(40_001)));
    args.push(random_col(rng, Elem::F64, n, Dist::Range(1000)));
    args.push(random_col(rng, Elem::I64, n, Dist::Range(16)));
    args
}

fn kernel(nkeys: usize, with_filter: bool, aggs: Vec<(AggSpec, Option<KExpr>)>) -> Kernel {
    let (aggs, exprs) = aggs.into_iter().unzip();
    Kernel::FusedReduce {
        filter: with_filter.then(|| filter(nkeys)),
        nkeys,
        aggs,
        exprs,
        n_cols: nkeys + VALUES,
    }
}

const KEY_SETS: [&[(Elem, Dist)]; 6] = [
    &[],
    &[(Elem::U32, Dist::Range(16))],
    &[(Elem::I32, Dist::Range(16))],
    &[(Elem::U32, Dist::Range(16)), (Elem::U8, Dist::Range(4))],
    &[(Elem::I64, Dist::Range(40))],
    &[(Elem::U8, Dist::Range(40))],
];

fn run(gpu: &mut CudaBackend, k: &Kernel, args: &[HostCol], case: &str) -> bool {
    compare(gpu, k, args, &Strings::default(), case).is_ok()
}

fn fused_reduce_matches_cpu_on_few_groups() {
    let mut gpu = gpu("fused_reduce_matches_cpu_on_few_groups");
    let mut rng = Rng::new(77);
    for keys in KEY_SETS {
        for &n in SIZES.iter().chain(&[100_003]) {
            for with_filter in [false, true] {
                let args = columns(&mut rng, keys, n, false);
                let k = kernel(keys.len(), with_filter, exact_aggs(keys.len()));
                let before = gpu.fused_one_pass_runs();
                let case = format!("keys {keys:?}, n {n}, filter {with_filter}");
                assert!(run(&mut gpu, &k, &args, &case), "{case}: fails on the CPU");
                // Every row is settled in one pass (no row fails, few groups).
                if n > 0 {
                    assert_eq!(gpu.fused_one_pass_runs(), before + 1, "{case}: not in one pass");
                }
            }
        }
    }
    // 10^7 rows, two keys.
    let keys = KEY_SETS[3];
    let args = columns(&mut rng, keys, LARGE, false);
    let k = kernel(keys.len(), true, exact_aggs(keys.len()));
    let before = gpu.fused_one_pass_runs();
    assert!(run(&mut gpu, &k, &args, "large"));
    assert_eq!(gpu.fused_one_pass_runs(), before + 1);
}

fn fused_reduce_falls_back_where_one_pass_cannot_settle() {
    let mut gpu = gpu("fused_reduce_falls_back_where_one_pass_cannot_settle");
    let mut rng = Rng::new(78);
    for &n in &[1000usize, 100_003] {
        // Many groups: the tables overflow.
        let keys: &[(Elem, Dist)] = &[(Elem::U32, Dist::Uniform)];
        let args = columns(&mut rng, keys, n, false);
        let k = kernel(1, true, exact_aggs(1));
        assert!(run(&mut gpu, &k, &args, &format!("many groups, n {n}")));
        // Float keys and float sums.
        let keys: &[(Elem, Dist)] = &[(Elem::F64, Dist::Range(8))];
        let args = columns(&mut rng, keys, n, false);
        let mut aggs = exact_aggs(1);
        aggs.push(agg(AggFunc::Sum, Some(col(1 + 4, Type::Float64)), Type::Float64));
        assert!(run(
            &mut gpu,
            &kernel(1, true, aggs),
            &args,
            &format!("float key, n {n}")
        ));
        let keys: &[(Elem, Dist)] = &[(Elem::U32, Dist::Range(8))];
        let args = columns(&mut rng, keys, n, false);
        let mut aggs = exact_aggs(1);
        aggs.push(agg(AggFunc::Avg, Some(col(1 + 4, Type::Float64)), Type::Float64));
        assert!(run(
            &mut gpu,
            &kernel(1, false, aggs),
            &args,
            &format!("float avg, n {n}")
        ));
        // Sums that overflow int64: an error on both.
        let args = columns(&mut rng, keys, n, true);
        assert!(!run(
            &mut gpu,
            &kernel(1, false, exact_aggs(1)),
            &args,
            &format!("overflow, n {n}")
        ));
        // Division by zero in a value: an error only when a row that passes the filter
        // divides by zero (the value column is zero exactly where the filter fails).
        let mut args = columns(&mut rng, keys, n, false);
        let (HostCol::I64(vals), HostCol::I64(f)) = (&args[1], &args[6]) else {
            unreachable!()
        };
        let vals: Vec<i64> = vals
            .iter()
            .zip(f)
            .map(|(&v, &f)| if f >= 0 { v | 1 } else { 0 })
            .collect();
        args[1] = HostCol::I64(vals);
        let div = || {
            let e = arith(ArithOp::Div, int(1_000_000), col(1, Type::Int64), Type::Int64);
            vec![agg(AggFunc::Sum, Some(e), Type::Int64)]
        };
        let before = gpu.fused_one_pass_runs();
        assert!(run(
            &mut gpu,
            &kernel(1, true, div()),
            &args,
            &format!("guarded division, n {n}")
        ));
        assert_eq!(
            gpu.fused_one_pass_runs(),
            before + 1,
            "guarded division, n {n}: not in one pass"
        );
        assert!(!run(
            &mut gpu,
            &kernel(1, false, div()),
            &args,
            &format!("division by zero, n {n}")
        ));
    }
}

fn cast(x: KExpr, ty: Type) -> KExpr {
    KExpr {
        kind: KExprKind::Cast(Box::new(x)),
        ty,
    }
}

fn fused_reduce_with_wide_decimals_runs_unfused() {
    let mut gpu = gpu("fused_reduce_with_wide_decimals_runs_unfused");
    let mut rng = Rng::new(79);
    let w2 = Type::WideDecimal(2);
    for &n in &[1usize, 1000, 100_003] {
        // An i128 key.
        let keys: &[(Elem, Dist)] = &[(Elem::I128, Dist::Range(16))];
        let args = columns(&mut rng, keys, n, false);
        let before = gpu.fused_one_pass_runs();
        assert!(run(
            &mut gpu,
            &kernel(1, true, exact_aggs(1)),
            &args,
            &format!("i128 key, n {n}")
        ));
        assert_eq!(gpu.fused_one_pass_runs(), before, "i128 key, n {n}: in one pass");
        // A value whose tree holds a 38-digit decimal: the decimal(2) column widened.
        let keys: &[(Elem, Dist)] = &[(Elem::U32, Dist::Range(8))];
        let args = columns(&mut rng, keys, n, false);
        let wide = cast(col(2, Type::Decimal(2)), w2);
        let aggs = vec![
            agg(AggFunc::Sum, Some(wide.clone()), w2),
            agg(AggFunc::Min, Some(wide.clone()), w2),
            agg(AggFunc::Avg, Some(wide), Type::WideDecimal(6)),
        ];
        let before = gpu.fused_one_pass_runs();
        assert!(run(
            &mut gpu,
            &kernel(1, true, aggs),
            &args,
            &format!("wide value, n {n}")
        ));
        assert_eq!(gpu.fused_one_pass_runs(), before, "wide value, n {n}: in one pass");
        // A filter comparing in 38 digits, over exact aggregates.
        let narrow = cast(col(1, Type::Int64), w2);
        let f = KExpr {
            kind: KExprKind::Cmp(
                CmpOp::Gt,
                Box::new(narrow),
                Box::new(KExpr {
                    kind: KExprKind::Const(Value::Decimal { unscaled: 0, scale: 2 }),
                    ty: w2,
                }),
            ),
            ty: Type::Bool,
        };
        let (aggs, exprs) = exact_aggs(1).into_iter().unzip();
        let k = Kernel::FusedReduce {
            filter: Some(f),
            nkeys: 1,
            aggs,
            exprs,
            n_cols: 1 + VALUES,
        };
        let before = gpu.fused_one_pass_runs();
        assert!(run(&mut gpu, &k, &args, &format!("wide filter, n {n}")));
        assert_eq!(gpu.fused_one_pass_runs(), before, "wide filter, n {n}: in one pass");
    }
}

fn fused_averages_keep_to_18_digits_as_on_the_cpu() {
    let mut gpu = gpu("fused_averages_keep_to_18_digits_as_on_the_cpu");
    // One key, one decimal(2) value: the mean, a decimal(6), has at most 18 digits.
    let dec = Type::Decimal(2);
    let k = Kernel::FusedReduce {
        filter: None,
        nkeys: 1,
        aggs: vec![AggSpec {
            func: AggFunc::Avg,
            input: Some(dec),
            output: Type::Decimal(6),
        }],
        exprs: vec![Some(col(1, dec))],
        n_cols: 2,
    };
    let max = 10i64.pow(14) - 1;
    let keys = HostCol::U32(vec![0, 0, 1, 1, 2]);
    let ok = compare(
        &mut gpu,
        &k,
        &[keys.clone(), HostCol::I64(vec![max, max, -max, -max, 7])],
        &Strings::default(),
        "18 digits",
    );
    assert!(ok.is_ok());
    let err = compare(
        &mut gpu,
        &k,
        &[keys, HostCol::I64(vec![max, max, -max - 1, -max - 1, 7])],
        &Strings::default(),
        "19 digits",
    )
    .unwrap_err();
    assert!(err.contains("does not fit decimal(6)"), "{err}");
}

tests![
    Gpu fused_reduce_matches_cpu_on_few_groups,
    Gpu fused_reduce_falls_back_where_one_pass_cannot_settle,
    Gpu fused_reduce_with_wide_decimals_runs_unfused,
    Gpu fused_averages_keep_to_18_digits_as_on_the_cpu,
];
