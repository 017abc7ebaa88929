//! `Eval`: targeted cases (decimal rounding, overflow, division by zero, dates, strings)
//! and random expressions against a row-at-a-time reference evaluator written here.

use crate::common;

use common::*;
use fox_kernel::{KExpr, KExprKind, Kernel, ScalarFn};
use fox_runtime::{BackendError, HostCol};
use fox_sema::core::{ArithOp, CmpOp, Type, Value};

fn col(i: usize, ty: Type) -> KExpr {
    KExpr {
        kind: KExprKind::Col(i),
        ty,
    }
}

fn lit(v: Value, ty: Type) -> KExpr {
    KExpr {
        kind: KExprKind::Const(v),
        ty,
    }
}

fn dec(unscaled: i128, scale: u8) -> Value {
    Value::Decimal { unscaled, scale }
}

fn arith(op: ArithOp, a: KExpr, b: KExpr, ty: Type) -> KExpr {
    KExpr {
        kind: KExprKind::Arith(op, Box::new(a), Box::new(b)),
        ty,
    }
}

fn cmp(op: CmpOp, a: KExpr, b: KExpr) -> KExpr {
    KExpr {
        kind: KExprKind::Cmp(op, Box::new(a), Box::new(b)),
        ty: Type::Bool,
    }
}

fn cast(x: KExpr, ty: Type) -> KExpr {
    KExpr {
        kind: KExprKind::Cast(Box::new(x)),
        ty,
    }
}

fn call(f: ScalarFn, xs: Vec<KExpr>, ty: Type) -> KExpr {
    KExpr {
        kind: KExprKind::Call(f, xs),
        ty,
    }
}

fn round(x: KExpr, digits: i32, ty: Type) -> KExpr {
    call(ScalarFn::Round, vec![x, lit(Value::Int32(digits), Type::Int32)], ty)
}

fn eval_with(e: &KExpr, cols: &[HostCol], tables: &[HostCol], ctx: &Ctx) -> Result<HostCol, BackendError> {
    let args: Vec<&HostCol> = cols.iter().chain(tables.iter()).collect();
    let k = Kernel::Eval {
        expr: e.clone(),
        n_cols: cols.len(),
    };
    common::run_with(&k, &args, ctx).map(|mut v| v.remove(0))
}

fn eval(e: &KExpr, cols: &[HostCol]) -> Result<HostCol, BackendError> {
    eval_with(e, cols, &[], &Ctx::default())
}

fn ok(e: &KExpr, cols: &[HostCol]) -> HostCol {
    eval(e, cols).unwrap_or_else(|err| panic!("{e:?}: {err}"))
}

fn d2(v: Vec<i64>) -> HostCol {
    HostCol::I64(v)
}

// ---- decimals -------------------------------------------------------------------------------

#[test]
fn decimal_product_and_quotient_scales() {
    // 19.99 * 0.90 = 17.9910 (scale 2 + 2).
    let e = arith(
        ArithOp::Mul,
        col(0, Type::Decimal(2)),
        col(1, Type::Decimal(2)),
        Type::Decimal(4),
    );
    assert_eq!(
        ok(&e, &[d2(vec![1999, -1999]), d2(vec![90, 90])]),
        d2(vec![179_910, -179_910])
    );
    // 10.00 / 3 = 3.333333; -10.00 / 3 = -3.333333; 2 / 3 = 0.666667; 1 / -8 = -0.125000.
    let e = arith(
        ArithOp::Div,
        col(0, Type::Decimal(2)),
        cast(col(1, Type::Int64), Type::Decimal(0)),
        Type::Decimal(6),
    );
    assert_eq!(
        ok(&e, &[d2(vec![1000, -1000, 200, 100]), d2(vec![3, 3, 3, -8])]),
        d2(vec![3_333_333, -3_333_333, 666_667, -125_000])
    );
    // Half away from zero at the last digit: 0.000001 / 2 = 0.0000005 → 0.000001.
    let e = arith(
        ArithOp::Div,
        col(0, Type::Decimal(6)),
        col(1, Type::Decimal(0)),
        Type::Decimal(6),
    );
    assert_eq!(ok(&e, &[d2(vec![1, -1, 3]), d2(vec![2, 2, 2])]), d2(vec![1, -1, 2]));
    // Decimal + integer: sema casts the integer to the result scale.
    let e = arith(
        ArithOp::Add,
        col(0, Type::Decimal(2)),
        cast(lit(Value::Int64(3), Type::Int64), Type::Decimal(2)),
        Type::Decimal(2),
    );
    assert_eq!(ok(&e, &[d2(vec![150])]), d2(vec![450]));
    // Operands of + must already have the result scale.
    let e = arith(
        ArithOp::Add,
        col(0, Type::Decimal(2)),
        col(1, Type::Decimal(1)),
        Type::Decimal(2),
    );
    let err = eval(&e, &[d2(vec![1]), d2(vec![1])]).unwrap_err();
    assert!(err.0.contains("result's scale"), "{err}");
}

#[test]
fn decimal_rescale_and_round_half_away_from_zero() {
    let x = HostCol::I64(vec![25, -25, 24, -24, 226, -226, 0]);
    // decimal(2) → decimal(1).
    let e = cast(col(0, Type::Decimal(2)), Type::Decimal(1));
    assert_eq!(ok(&e, std::slice::from_ref(&x)), d2(vec![3, -3, 2, -2, 23, -23, 0]));
    // round(x, 1) of decimal(2) has scale 1; round(x, 5) keeps scale 2.
    let e = round(col(0, Type::Decimal(2)), 1, Type::Decimal(1));
    assert_eq!(ok(&e, std::slice::from_ref(&x)), d2(vec![3, -3, 2, -2, 23, -23, 0]));
    let e = round(col(0, Type::Decimal(2)), 5, Type::Decimal(2));
    assert_eq!(ok(&e, std::slice::from_ref(&x)), x);
    // round(x, 0) → scale 0.
    let e = round(col(0, Type::Decimal(2)), 0, Type::Decimal(0));
    assert_eq!(ok(&e, &[d2(vec![150, -150, 149, -250])]), d2(vec![2, -2, 1, -3]));
    // Upscale is exact; to_int truncates toward zero; to_float divides.
    let e = cast(col(0, Type::Decimal(2)), Type::Decimal(4));
    assert_eq!(ok(&e, &[d2(vec![-199])]), d2(vec![-19_900]));
    let e = cast(col(0, Type::Decimal(2)), Type::Int64);
    assert_eq!(ok(&e, &[d2(vec![-299, 299, 5])]), d2(vec![-2, 2, 0]));
    let e = cast(col(0, Type::Decimal(2)), Type::Float64);
    assert_eq!(ok(&e, &[d2(vec![125, -5])]), HostCol::F64(vec![1.25, -0.05]));
    // Floats: round like f64::round at the digits; to_int truncates.
    let e = round(col(0, Type::Float64), 1, Type::Float64);
    assert_eq!(
        ok(&e, &[HostCol::F64(vec![2.26, -2.25, 1e300])]),
        HostCol::F64(vec![2.3, -2.3, 1e300])
    );
    let e = cast(col(0, Type::Float64), Type::Int64);
    assert_eq!(ok(&e, &[HostCol::F64(vec![-2.4, 2.9, -0.0])]), d2(vec![-2, 2, 0]));
}

#[test]
fn overflow_is_an_error_naming_the_expression() {
    let big = HostCol::I64(vec![1, i64::MAX]);
    let e = arith(
        ArithOp::Add,
        col(0, Type::Int64),
        lit(Value::Int64(1), Type::Int64),
        Type::Int64,
    );
    let err = eval(&e, std::slice::from_ref(&big)).unwrap_err();
    assert!(
        err.0.contains("Eval") && err.0.contains("overflow") && err.0.contains("(c0 + 1)") && err.0.contains("row 1"),
        "{err}"
    );
    let e = arith(ArithOp::Mul, col(0, Type::Int32), col(0, Type::Int32), Type::Int32);
    assert!(eval(&e, &[HostCol::I32(vec![46_341])])
        .unwrap_err()
        .0
        .contains("does not fit int32"));
    let e = arith(
        ArithOp::Mul,
        col(0, Type::Decimal(2)),
        col(0, Type::Decimal(2)),
        Type::Decimal(4),
    );
    assert!(eval(&e, &[d2(vec![4_000_000_000])]).unwrap_err().0.contains("overflow"));
    let e = cast(col(0, Type::Int64), Type::Decimal(2));
    assert!(eval(&e, std::slice::from_ref(&big)).unwrap_err().0.contains("overflow"));
    let e = call(ScalarFn::Abs, vec![col(0, Type::Int32)], Type::Int32);
    assert!(eval(&e, &[HostCol::I32(vec![i32::MIN])]).is_err());
    let e = KExpr {
        kind: KExprKind::Neg(Box::new(col(0, Type::Int64))),
        ty: Type::Int64,
    };
    assert!(eval(&e, &[HostCol::I64(vec![i64::MIN])]).is_err());
    let e = arith(ArithOp::Div, col(0, Type::Int64), col(1, Type::Int64), Type::Int64);
    assert!(eval(&e, &[HostCol::I64(vec![i64::MIN]), HostCol::I64(vec![-1])]).is_err());
    let e = cast(col(0, Type::Float64), Type::Int64);
    for x in [1e19, f64::NAN, f64::INFINITY] {
        assert!(eval(&e, &[HostCol::F64(vec![x])]).unwrap_err().0.contains("overflow"));
    }
}

#[test]
fn decimals_have_at_most_18_digits() {
    let max = 10i64.pow(18) - 1;
    // 9999999999999999.99 * 9 has 19 digits.
    let e = arith(
        ArithOp::Mul,
        col(0, Type::Decimal(2)),
        lit(Value::Int64(9), Type::Int64),
        Type::Decimal(2),
    );
    let err = eval(&e, &[d2(vec![11, max])]).unwrap_err();
    assert!(
        err.0.contains("overflow: `(c0 * 9)` does not fit decimal(2) (row 1)"),
        "{err}"
    );
    // The largest of 18 digits is a value; one more is not.
    let e = arith(
        ArithOp::Add,
        col(0, Type::Decimal(2)),
        lit(dec(1, 2), Type::Decimal(2)),
        Type::Decimal(2),
    );
    assert_eq!(ok(&e, &[d2(vec![max - 1])]), d2(vec![max]));
    assert!(eval(&e, &[d2(vec![max])]).unwrap_err().0.contains("overflow"));
    let e = arith(
        ArithOp::Sub,
        col(0, Type::Decimal(2)),
        lit(dec(1, 2), Type::Decimal(2)),
        Type::Decimal(2),
    );
    assert!(eval(&e, &[d2(vec![-max])]).unwrap_err().0.contains("overflow"));
    // Rescales and casts from integers too.
    let e = cast(col(0, Type::Decimal(2)), Type::Decimal(4));
    assert!(eval(&e, &[d2(vec![10i64.pow(16)])]).unwrap_err().0.contains("overflow"));
    let e = cast(col(0, Type::Int64), Type::Decimal(0));
    assert!(eval(&e, &[HostCol::I64(vec![10i64.pow(18)])])
        .unwrap_err()
        .0
        .contains("overflow"));
    assert_eq!(ok(&e, &[HostCol::I64(vec![max])]), HostCol::I64(vec![max]));
    // A constant beyond 18 digits is not a decimal.
    let e = lit(dec(i128::from(max) + 1, 2), Type::Decimal(2));
    assert!(eval(&e, &[d2(vec![0])]).is_err());
}

#[test]
fn dates_stay_within_years_0000_to_9999() {
    let last = days_naive(9999, 12, 31) as i32;
    let first = days_naive(0, 1, 1) as i32;
    assert_eq!((first, last), (-719_528, 2_932_896));
    let plus = |n: i64| {
        arith(
            ArithOp::Add,
            col(0, Type::Date),
            lit(Value::Int64(n), Type::Int64),
            Type::Date,
        )
    };
    assert_eq!(ok(&plus(1), &[HostCol::I32(vec![last - 1])]), HostCol::I32(vec![last]));
    let err = eval(&plus(100_000_000), &[HostCol::I32(vec![0, last])]).unwrap_err();
    assert!(
        err.0.contains("overflow: `(c0 + 100000000)` does not fit date (row 0)"),
        "{err}"
    );
    assert!(eval(&plus(1), &[HostCol::I32(vec![last])])
        .unwrap_err()
        .0
        .contains("overflow"));
    assert!(eval(&plus(-1), &[HostCol::I32(vec![first])])
        .unwrap_err()
        .0
        .contains("overflow"));
    assert_eq!(
        ok(&plus(-1), &[HostCol::I32(vec![first + 1])]),
        HostCol::I32(vec![first])
    );
}

#[test]
fn decimals_of_38_digits() {
    let w = |s: u8| Type::WideDecimal(s);
    let big = 10i128.pow(37);
    let wide = HostCol::I128(vec![big, -big, 12_345, 0]);
    let narrow = d2(vec![1, 2, 3, i64::MAX]);
    // A 64-bit decimal widened and added to a wide one; the sum leaves 64 bits.
    let e = arith(ArithOp::Add, col(0, w(2)), cast(col(1, Type::Decimal(2)), w(2)), w(2));
    assert_eq!(
        ok(&e, &[wide.clone(), narrow.clone()]),
        HostCol::I128(vec![big + 1, -big + 2, 12_348, i128::from(i64::MAX)])
    );
    // Products rescale like 64-bit ones (scale 2 + 2 = 4, then round to 2 half away).
    let e = arith(ArithOp::Mul, col(0, w(2)), lit(dec(5, 1), Type::Decimal(1)), w(3));
    assert_eq!(
        ok(&e, &[HostCol::I128(vec![big / 10, -12_345])]),
        HostCol::I128(vec![big / 2, -61_725])
    );
    let e = arith(ArithOp::Div, col(0, w(2)), lit(Value::Int64(3), Type::Int64), w(6));
    assert_eq!(
        ok(&e, &[HostCol::I128(vec![100, -200, 3 * 10i128.pow(30)])]),
        HostCol::I128(vec![333_333, -666_667, 10i128.pow(34)])
    );
    // Comparisons, also against 64-bit constants.
    let e = cmp(CmpOp::Gt, col(0, w(2)), lit(dec(12300, 2), w(2)));
    assert_eq!(ok(&e, std::slice::from_ref(&wide)), HostCol::U8(vec![1, 0, 1, 0]));
    // Beyond 38 digits is an overflow, as are products whose intermediate exceeds 128 bits.
    let e = arith(ArithOp::Mul, col(0, w(0)), lit(Value::Int64(100), Type::Int64), w(0));
    assert!(eval(&e, std::slice::from_ref(&wide))
        .unwrap_err()
        .0
        .contains("overflow"));
    let e = arith(ArithOp::Mul, col(0, w(0)), col(0, w(0)), w(0));
    assert!(eval(&e, std::slice::from_ref(&wide))
        .unwrap_err()
        .0
        .contains("overflow"));
    // A wide value cast to float, and to a 64-bit integer when it fits.
    let e = cast(col(0, w(2)), Type::Float64);
    assert_eq!(
        ok(&e, &[HostCol::I128(vec![150, -big])]),
        HostCol::F64(vec![1.5, -1e35])
    );
}

#[test]
fn division_by_zero_is_an_error_unless_short_circuited() {
    for (ty, a, b) in [
        (Type::Int64, HostCol::I64(vec![1, 1]), HostCol::I64(vec![1, 0])),
        (Type::Decimal(6), HostCol::I64(vec![1, 1]), HostCol::I64(vec![1, 0])),
        (
            Type::Float64,
            HostCol::F64(vec![1.0, 1.0]),
            HostCol::F64(vec![1.0, 0.0]),
        ),
    ] {
        let (ta, tb) = match ty {
            Type::Decimal(_) => (Type::Decimal(2), Type::Decimal(2)),
            t => (t, t),
        };
        let e = arith(ArithOp::Div, col(0, ta), col(1, tb), ty);
        let err = eval(&e, &[a, b]).unwrap_err();
        assert!(
            err.0.contains("division by zero in `(c0 / c1)`") && err.0.contains("row 1"),
            "{err}"
        );
    }
    // c0 != 0 and 10 / c0 > 1: the division is not evaluated where c0 is 0.
    let guard = cmp(CmpOp::Ne, col(0, Type::Int64), lit(Value::Int64(0), Type::Int64));
    let div = arith(
        ArithOp::Div,
        lit(Value::Int64(10), Type::Int64),
        col(0, Type::Int64),
        Type::Int64,
    );
    let test = cmp(CmpOp::Gt, div, lit(Value::Int64(1), Type::Int64));
    let and = KExpr {
        kind: KExprKind::And(vec![guard.clone(), test.clone()]),
        ty: Type::Bool,
    };
    assert_eq!(ok(&and, &[HostCol::I64(vec![0, 5, 20])]), HostCol::U8(vec![0, 1, 0]));
    let not_guard = KExpr {
        kind: KExprKind::Not(Box::new(guard)),
        ty: Type::Bool,
    };
    let or = KExpr {
        kind: KExprKind::Or(vec![not_guard, test.clone()]),
        ty: Type::Bool,
    };
    assert_eq!(ok(&or, &[HostCol::I64(vec![0, 5, 20])]), HostCol::U8(vec![1, 1, 0]));
    // The other order fails on row 0.
    let bad = KExpr {
        kind: KExprKind::And(vec![test, cmp(CmpOp::Eq, col(0, Type::Int64), col(0, Type::Int64))]),
        ty: Type::Bool,
    };
    assert!(eval(&bad, &[HostCol::I64(vec![0])])
        .unwrap_err()
        .0
        .contains("division by zero"));
}

// ---- dates -------------------------------------------------------------------------------

fn leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// Days since 1970-01-01, by counting whole years and months.
fn days_naive(y: i64, m: u32, d: u32) -> i64 {
    let ylen = |y: i64| if leap(y) { 366 } else { 365 };
    let mut days = 0i64;
    if y >= 1970 {
        for yy in 1970..y {
            days += ylen(yy);
        }
    } else {
        for yy in y..1970 {
            days -= ylen(yy);
        }
    }
    let mlen = [
        31,
        if leap(y) { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    for len in &mlen[..(m - 1) as usize] {
        days += len;
    }
    days + i64::from(d) - 1
}

#[test]
fn date_parts_of_known_dates() {
    let known = [
        (1970, 1, 1),
        (1998, 9, 2),
        (2000, 2, 29),
        (1900, 3, 1),
        (1969, 12, 31),
        (1600, 2, 29),
        (2100, 12, 31),
    ];
    let days: Vec<i32> = known.iter().map(|&(y, m, d)| days_naive(y, m, d) as i32).collect();
    assert_eq!(days[..5], [0, 10_471, 11_016, -25_508, -1]);
    let c = HostCol::I32(days.clone());
    for (f, pick) in [(ScalarFn::Year, 0), (ScalarFn::Month, 1), (ScalarFn::Day, 2)] {
        let e = call(f, vec![col(0, Type::Date)], Type::Int32);
        let want: Vec<i32> = known
            .iter()
            .map(|k| [k.0 as i32, k.1 as i32, k.2 as i32][pick])
            .collect();
        assert_eq!(ok(&e, std::slice::from_ref(&c)), HostCol::I32(want), "{f:?}");
    }
    // Every day from 1890 to 2110 against the naive count.
    let mut y = 1890;
    let mut m = 1;
    let mut d = 1;
    let first = days_naive(1890, 1, 1);
    for day in first..days_naive(2110, 1, 1) {
        assert_eq!(fox_cpu::civil_from_days(day), (y, m, d), "day {day}");
        assert_eq!(fox_cpu::days_from_civil(y, m, d), day);
        let mlen = [
            31,
            if leap(y) { 29 } else { 28 },
            31,
            30,
            31,
            30,
            31,
            31,
            30,
            31,
            30,
            31,
        ][(m - 1) as usize];
        d += 1;
        if d > mlen {
            d = 1;
            m += 1;
            if m > 12 {
                m = 1;
                y += 1;
            }
        }
    }
}

#[test]
fn date_arithmetic() {
    let base = days_naive(1998, 12, 1) as i32;
    let c = HostCol::I32(vec![base]);
    let e = arith(
        ArithOp::Sub,
        col(0, Type::Date),
        lit(Value::Int64(90), Type::Int64),
        Type::Date,
    );
    assert_eq!(
        ok(&e, std::slice::from_ref(&c)),
        HostCol::I32(vec![days_naive(1998, 9, 2) as i32])
    );
    let e = arith(
        ArithOp::Add,
        lit(Value::Int32(1), Type::Int32),
        col(0, Type::Date),
        Type::Date,
    );
    assert_eq!(ok(&e, std::slice::from_ref(&c)), HostCol::I32(vec![base + 1]));
    let e = arith(
        ArithOp::Sub,
        col(0, Type::Date),
        lit(Value::Date(0), Type::Date),
        Type::Int64,
    );
    assert_eq!(ok(&e, std::slice::from_ref(&c)), HostCol::I64(vec![i64::from(base)]));
    let e = arith(
        ArithOp::Add,
        col(0, Type::Date),
        lit(Value::Int64(i64::from(i32::MAX)), Type::Int64),
        Type::Date,
    );
    assert!(eval(&e, &[c]).unwrap_err().0.contains("overflow"));
}

// ---- strings, in-lists, tables ---------------------------------------------------------------

// ---- Soufflé's operators ------------------------------------------------------------------

/// `op` over every pair of `xs` (column 0) and `ys` (column 1), in int64.
fn pairs(op: ArithOp, xs: &[i64], ys: &[i64]) -> (KExpr, Vec<HostCol>) {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for &x in xs {
        for &y in ys {
            a.push(x);
            b.push(y);
        }
    }
    (
        arith(op, col(0, Type::Int64), col(1, Type::Int64), Type::Int64),
        vec![HostCol::I64(a), HostCol::I64(b)],
    )
}

const EDGES: [i64; 12] = [0, 1, -1, 2, -2, 7, -7, 63, 64, -64, i64::MAX, i64::MIN];

#[test]
fn souffle_remainder_is_c_remainder() {
    let (e, cols) = pairs(ArithOp::Rem, &[7, -7, 0, i64::MAX, i64::MIN], &[3, -3, 1, 2, i64::MIN]);
    assert_eq!(
        ok(&e, &cols),
        HostCol::I64(vec![
            1,
            1,
            0,
            1,
            7,
            -1,
            -1,
            0,
            -1,
            -7,
            0,
            0,
            0,
            0,
            0,
            1,
            1,
            0,
            1,
            i64::MAX,
            -2,
            -2,
            0,
            0,
            0
        ])
    );
    let (e, cols) = pairs(ArithOp::Rem, &[5], &[0]);
    let err = eval(&e, &cols).unwrap_err();
    assert!(err.0.contains("division by zero in `(c0 % c1)`"), "{err}");
    // The smallest int64 by -1 traps in C: an error, not 0.
    let (e, cols) = pairs(ArithOp::Rem, &[1, i64::MIN], &[-1]);
    let err = eval(&e, &cols).unwrap_err();
    assert!(err.0.contains("overflow") && err.0.contains("row 1"), "{err}");
}

#[test]
fn souffle_power_is_exact_or_an_error() {
    let cases: [(i64, i64, i64); 14] = [
        (2, 10, 1024),
        (-2, 3, -8),
        (2, 62, 1 << 62),
        (-2, 63, i64::MIN),
        (10, 18, 1_000_000_000_000_000_000),
        (3, 33, 5_559_060_566_555_523),
        (0, 0, 1),
        (0, 5, 0),
        (2, -1, 0),
        (-2, -1, 0),
        (1, -5, 1),
        (-1, -3, -1),
        (-1, 4, 1),
        (-1, (1 << 53) + 1, 1),
    ];
    let a: Vec<i64> = cases.iter().map(|c| c.0).collect();
    let b: Vec<i64> = cases.iter().map(|c| c.1).collect();
    let want: Vec<i64> = cases.iter().map(|c| c.2).collect();
    let e = arith(ArithOp::Pow, col(0, Type::Int64), col(1, Type::Int64), Type::Int64);
    assert_eq!(ok(&e, &[HostCol::I64(a), HostCol::I64(b)]), HostCol::I64(want));
    for (x, y, msg) in [
        (2, 63, "has no exact value"),
        (3, 39, "has no exact value"),
        (2, 64, "has no exact value"),
        (i64::MAX, 1, "has no exact value"),
        (0, -1, "division by zero"),
    ] {
        let err = eval(&e, &[HostCol::I64(vec![x]), HostCol::I64(vec![y])]).unwrap_err();
        assert!(err.0.contains(msg), "{x} ^ {y}: {err}");
    }
}

#[test]
fn souffle_bitwise_and_logical_operators() {
    let e = |op| arith(op, col(0, Type::Int64), col(1, Type::Int64), Type::Int64);
    let run = |op, x: i64, y: i64| match ok(&e(op), &[HostCol::I64(vec![x]), HostCol::I64(vec![y])]) {
        HostCol::I64(v) => v[0],
        other => panic!("{other:?}"),
    };
    assert_eq!(run(ArithOp::BitAnd, 12, 10), 8);
    assert_eq!(run(ArithOp::BitOr, 12, 10), 14);
    assert_eq!(run(ArithOp::BitXor, 12, 10), 6);
    assert_eq!(run(ArithOp::BitAnd, -1, i64::MIN), i64::MIN);
    // Shift counts are taken modulo 64; bshl keeps the low 64 bits.
    assert_eq!(run(ArithOp::Shl, 1, 63), i64::MIN);
    assert_eq!(run(ArithOp::Shl, 3, 63), i64::MIN);
    assert_eq!(run(ArithOp::Shl, 1, 64), 1);
    assert_eq!(run(ArithOp::Shl, 1, 65), 2);
    assert_eq!(run(ArithOp::Shl, 1, -1), i64::MIN);
    assert_eq!(run(ArithOp::Shr, -16, 2), -4);
    assert_eq!(run(ArithOp::Shr, -16, 64), -16);
    assert_eq!(run(ArithOp::Shr, 16, -1), 0);
    assert_eq!(run(ArithOp::ShrU, -16, 2), 4_611_686_018_427_387_900);
    assert_eq!(run(ArithOp::ShrU, -1, 63), 1);
    assert_eq!(run(ArithOp::LogAnd, 2, 3), 1);
    assert_eq!(run(ArithOp::LogAnd, 2, 0), 0);
    assert_eq!(run(ArithOp::LogOr, 0, 0), 0);
    assert_eq!(run(ArithOp::LogOr, 0, -3), 1);
    assert_eq!(run(ArithOp::LogXor, 2, 3), 0);
    assert_eq!(run(ArithOp::LogXor, 2, 0), 1);
    // `land` and `lor` do not evaluate (nor fail on) the second operand when the first
    // decides.
    let i = Type::Int64;
    let seven_by = |x: KExpr| arith(ArithOp::Div, lit(Value::Int64(7), i), x, i);
    let land = arith(ArithOp::LogAnd, col(0, i), seven_by(col(0, i)), i);
    assert_eq!(ok(&land, &[HostCol::I64(vec![0, 7])]), HostCol::I64(vec![0, 1]));
    let zero = arith(ArithOp::Sub, col(0, i), col(0, i), i);
    let lor = arith(ArithOp::LogOr, col(0, i), seven_by(zero), i);
    assert_eq!(ok(&lor, &[HostCol::I64(vec![3, -1])]), HostCol::I64(vec![1, 1]));
    let err = eval(&lor, &[HostCol::I64(vec![3, 0])]).unwrap_err();
    assert!(err.0.contains("division by zero") && err.0.contains("row 1"), "{err}");
    // None of them fails, whatever the operands.
    for op in [
        ArithOp::BitAnd,
        ArithOp::BitOr,
        ArithOp::BitXor,
        ArithOp::Shl,
        ArithOp::Shr,
        ArithOp::ShrU,
        ArithOp::LogAnd,
        ArithOp::LogOr,
        ArithOp::LogXor,
    ] {
        let (e, cols) = pairs(op, &EDGES, &EDGES);
        ok(&e, &cols);
    }
    let not = |f, x: i64| match ok(
        &call(f, vec![col(0, Type::Int64)], Type::Int64),
        &[HostCol::I64(vec![x])],
    ) {
        HostCol::I64(v) => v[0],
        other => panic!("{other:?}"),
    };
    assert_eq!(not(ScalarFn::BitNot, 0), -1);
    assert_eq!(not(ScalarFn::BitNot, i64::MIN), i64::MAX);
    assert_eq!(not(ScalarFn::LogNot, 5), 0);
    assert_eq!(not(ScalarFn::LogNot, 0), 1);
    assert_eq!(not(ScalarFn::Unsigned, i64::MAX), i64::MAX);
    let e = call(ScalarFn::Unsigned, vec![col(0, Type::Int64)], Type::Int64);
    let err = eval(&e, &[HostCol::I64(vec![0, 5, -1])]).unwrap_err();
    assert!(err.0.contains("`c0` is below 0") && err.0.contains("row 2"), "{err}");
    // They take int64 only: a plan error otherwise.
    let e = arith(ArithOp::BitAnd, col(0, Type::Int32), col(0, Type::Int32), Type::Int32);
    assert!(eval(&e, &[HostCol::I32(vec![1])]).is_err());
    let e = arith(
        ArithOp::Rem,
        col(0, Type::Float64),
        col(0, Type::Float64),
        Type::Float64,
    );
    assert!(eval(&e, &[HostCol::F64(vec![1.0])]).is_err());
}

#[test]
fn souffle_min_and_max() {
    let mm = |f, ty| call(f, vec![col(0, ty), col(1, ty)], ty);
    let (a, b) = (
        HostCol::I64(vec![3, -1, i64::MIN, 5]),
        HostCol::I64(vec![1, -1, 0, i64::MAX]),
    );
    assert_eq!(
        ok(&mm(ScalarFn::Min, Type::Int64), &[a.clone(), b.clone()]),
        HostCol::I64(vec![1, -1, i64::MIN, 5])
    );
    assert_eq!(
        ok(&mm(ScalarFn::Max, Type::Int64), &[a, b]),
        HostCol::I64(vec![3, -1, 0, i64::MAX])
    );
    // As std::min / std::max: -0.0 against 0.0 keeps the first, a NaN first stays.
    let (a, b) = (
        HostCol::F64(vec![-0.0, 0.0, f64::NAN, 1.0, 1.5]),
        HostCol::F64(vec![0.0, -0.0, 1.0, f64::NAN, -2.25]),
    );
    let bits = |c: HostCol| match c {
        HostCol::F64(v) => v.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    let want = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(
        bits(ok(&mm(ScalarFn::Min, Type::Float64), &[a.clone(), b.clone()])),
        want(&[-0.0, 0.0, f64::NAN, 1.0, -2.25])
    );
    assert_eq!(
        bits(ok(&mm(ScalarFn::Max, Type::Float64), &[a, b])),
        want(&[-0.0, 0.0, f64::NAN, 1.0, 1.5])
    );
    // Strings by their ranks: codes 0, 1, 2 hold "b", "d", "a" (rank [1, 2, 0]).
    let ctx = Ctx([("b", 0), ("d", 1), ("a", 2)]
        .iter()
        .map(|(s, c)| (s.to_string(), *c))
        .collect());
    let rank = HostCol::U32(vec![1, 2, 0]);
    let key = |i| KExpr {
        kind: KExprKind::Table(0, Box::new(col(i, Type::String))),
        ty: Type::Int64,
    };
    let smm = |f| {
        call(
            f,
            vec![col(0, Type::String), col(1, Type::String), key(0), key(1)],
            Type::String,
        )
    };
    let (x, y) = (HostCol::U32(vec![0, 1, 2, 1]), HostCol::U32(vec![1, 2, 0, 1]));
    assert_eq!(
        eval_with(
            &smm(ScalarFn::Min),
            &[x.clone(), y.clone()],
            std::slice::from_ref(&rank),
            &ctx
        )
        .unwrap(),
        HostCol::U32(vec![0, 2, 2, 1])
    );
    assert_eq!(
        eval_with(&smm(ScalarFn::Max), &[x, y], &[rank], &ctx).unwrap(),
        HostCol::U32(vec![1, 1, 0, 1])
    );
}

#[test]
fn string_equality_by_code_and_order_by_rank() {
    // Codes 0..3 hold "b", "d", "f"; "a" and "e" were appended later (codes 3, 4), so
    // string order is a(3) b(0) d(1) e(4) f(2) and the rank table is [1, 2, 4, 0, 3].
    let ctx = Ctx([("b", 0), ("d", 1), ("f", 2), ("a", 3), ("e", 4)]
        .iter()
        .map(|(s, c)| (s.to_string(), *c))
        .collect());
    let codes = HostCol::U32(vec![0, 1, 2, 3, 4]);
    let rank = HostCol::U32(vec![1, 2, 4, 0, 3]);
    let rank_of = |x: KExpr| KExpr {
        kind: KExprKind::Table(0, Box::new(x)),
        ty: Type::Int64,
    };
    let s = |v: &str| lit(Value::String(v.into()), Type::String);
    let lt = cmp(CmpOp::Lt, rank_of(col(0, Type::String)), rank_of(s("e")));
    let got = eval_with(&lt, std::slice::from_ref(&codes), std::slice::from_ref(&rank), &ctx).unwrap();
    assert_eq!(got, HostCol::U8(vec![1, 1, 0, 1, 0]));
    let eq = cmp(CmpOp::Eq, col(0, Type::String), s("d"));
    assert_eq!(
        eval_with(&eq, std::slice::from_ref(&codes), &[], &ctx).unwrap(),
        HostCol::U8(vec![0, 1, 0, 0, 0])
    );
    let inl = KExpr {
        kind: KExprKind::In(
            Box::new(col(0, Type::String)),
            vec![Value::String("a".into()), Value::String("f".into())],
        ),
        ty: Type::Bool,
    };
    assert_eq!(
        eval_with(&inl, std::slice::from_ref(&codes), &[], &ctx).unwrap(),
        HostCol::U8(vec![0, 0, 1, 1, 0])
    );
    // A string result column keeps codes.
    assert_eq!(
        eval_with(&s("e"), std::slice::from_ref(&codes), &[], &ctx).unwrap(),
        HostCol::U32(vec![4; 5])
    );
    // A constant missing from the dictionary, and a code outside the table, are errors.
    assert!(eval_with(&s("zz"), std::slice::from_ref(&codes), &[], &ctx)
        .unwrap_err()
        .0
        .contains("no dictionary code"));
    let short = HostCol::U32(vec![1, 2]);
    let lt_d = cmp(CmpOp::Lt, rank_of(col(0, Type::String)), rank_of(s("d")));
    let err = eval_with(&lt_d, &[codes], &[short], &ctx).unwrap_err();
    assert!(
        err.0.contains("outside dictionary table 0") && err.0.contains("row 2"),
        "{err}"
    );
}

#[test]
fn in_lists_and_bool_tables() {
    let e = KExpr {
        kind: KExprKind::In(Box::new(col(0, Type::Int32)), vec![Value::Int32(3), Value::Int32(-1)]),
        ty: Type::Bool,
    };
    assert_eq!(ok(&e, &[HostCol::I32(vec![3, 4, -1])]), HostCol::U8(vec![1, 0, 1]));
    let e = KExpr {
        kind: KExprKind::In(Box::new(col(0, Type::Decimal(2))), vec![dec(150, 2), dec(2, 2)]),
        ty: Type::Bool,
    };
    assert_eq!(ok(&e, &[d2(vec![150, 2, 15])]), HostCol::U8(vec![1, 1, 0]));
    let e = KExpr {
        kind: KExprKind::In(Box::new(col(0, Type::Float64)), vec![Value::Float64(0.5)]),
        ty: Type::Bool,
    };
    assert_eq!(ok(&e, &[HostCol::F64(vec![0.5, 1.0])]), HostCol::U8(vec![1, 0]));
    // like(...) arrives as a U8 table lookup read as bool.
    let like = KExpr {
        kind: KExprKind::Table(0, Box::new(col(0, Type::String))),
        ty: Type::Bool,
    };
    let got = eval_with(
        &like,
        &[HostCol::U32(vec![2, 0, 1])],
        &[HostCol::U8(vec![1, 0, 1])],
        &Ctx::default(),
    );
    assert_eq!(got.unwrap(), HostCol::U8(vec![1, 1, 0]));
}

#[test]
fn type_mismatches_are_plan_errors() {
    let e = col(0, Type::Int64);
    assert!(eval(&e, &[HostCol::I32(vec![1])])
        .unwrap_err()
        .0
        .contains("column 0 is i32, but `c0` has type int64 (stored as i64)"));
    let e = col(3, Type::Int64);
    assert!(eval(&e, &[HostCol::I64(vec![1])]).unwrap_err().0.contains("column 3"));
    let e = lit(Value::Int64(1), Type::Int64);
    assert!(eval(&e, &[]).unwrap_err().0.contains("at least one column"));
    let e = arith(ArithOp::Add, col(0, Type::Int64), col(1, Type::Int64), Type::Int64);
    assert!(eval(&e, &[HostCol::I64(vec![1]), HostCol::I64(vec![1, 2])])
        .unwrap_err()
        .0
        .contains("rows"));
    // Structural errors are found even with no rows.
    let e = arith(ArithOp::Add, col(0, Type::Date), col(0, Type::Date), Type::Date);
    assert!(eval(&e, &[HostCol::I32(vec![])]).is_err());
}

// ---- random expressions against a reference ----------------------------------------------

/// A reference value: an integer-stored value (ints, scaled decimals, bools) or a float.
#[derive(Clone, Copy, Debug, PartialEq)]
enum R {
    I(i128),
    F(f64),
}

fn scale(t: Type) -> u32 {
    match t {
        Type::Decimal(s) => s as u32,
        _ => 0,
    }
}

fn fit(x: i128, t: Type) -> Result<R, ()> {
    let ok = match t {
        Type::Int32 => i32::try_from(x).is_ok(),
        // 0000-01-01 ..= 9999-12-31.
        Type::Date => (-719_528..=2_932_896).contains(&x),
        // 18 digits.
        Type::Decimal(_) => x.abs() < 10i128.pow(18),
        _ => i64::try_from(x).is_ok(),
    };
    if ok {
        Ok(R::I(x))
    } else {
        Err(())
    }
}

/// Half away from zero, on magnitudes.
fn round_div(n: i128, d: i128) -> i128 {
    let neg = (n < 0) != (d < 0);
    let q = (2 * n.abs() + d.abs()) / (2 * d.abs());
    if neg {
        -q
    } else {
        q
    }
}

/// Row-at-a-time evaluation, with `and`/`or` short-circuiting left to right.
fn reval(e: &KExpr, row: &[R]) -> Result<R, ()> {
    let int = |x: &KExpr| match reval(x, row)? {
        R::I(v) => Ok(v),
        R::F(_) => Err(()),
    };
    let flt = |x: &KExpr| match reval(x, row)? {
        R::F(v) => Ok(v),
        R::I(v) => Ok(v as f64 / 10f64.powi(scale(x.ty) as i32)),
    };
    match &e.kind {
        KExprKind::Col(i) => Ok(row[*i]),
        KExprKind::Const(Value::Int64(v)) => fit(*v as i128 * 10i128.pow(scale(e.ty)), e.ty),
        KExprKind::Const(Value::Decimal { unscaled, scale: s }) => {
            Ok(R::I(unscaled * 10i128.pow(scale(e.ty) - *s as u32)))
        }
        KExprKind::Const(Value::Float64(x)) => Ok(R::F(*x)),
        KExprKind::Cast(x) => {
            if e.ty == Type::Float64 {
                return Ok(R::F(flt(x)?));
            }
            let v = int(x)?;
            let (from, to) = (scale(x.ty), scale(e.ty));
            if e.ty == Type::Int64 && from > 0 {
                return fit(v / 10i128.pow(from), e.ty);
            }
            if to >= from {
                fit(v * 10i128.pow(to - from), e.ty)
            } else {
                fit(round_div(v, 10i128.pow(from - to)), e.ty)
            }
        }
        KExprKind::Neg(x) => {
            if e.ty == Type::Float64 {
                Ok(R::F(-flt(x)?))
            } else {
                fit(-int(x)?, e.ty)
            }
        }
        KExprKind::Arith(op, a, b) => {
            if e.ty == Type::Float64 {
                let (x, y) = (flt(a)?, flt(b)?);
                return Ok(R::F(match op {
                    ArithOp::Add => x + y,
                    ArithOp::Sub => x - y,
                    ArithOp::Mul => x * y,
                    ArithOp::Div => {
                        if y == 0.0 {
                            return Err(());
                        }
                        x / y
                    }
                    // Soufflé's operators take int64 only.
                    _ => return Err(()),
                }));
            }
            let (x, y) = (int(a)?, int(b)?);
            let (sa, sb, r) = (scale(a.ty), scale(b.ty), scale(e.ty));
            match op {
                ArithOp::Add => fit(x + y, e.ty),
                ArithOp::Sub => fit(x - y, e.ty),
                ArithOp::Mul => {
                    let p = x * y;
                    if r >= sa + sb {
                        fit(p * 10i128.pow(r - sa - sb), e.ty)
                    } else {
                        fit(round_div(p, 10i128.pow(sa + sb - r)), e.ty)
                    }
                }
                ArithOp::Div => {
                    if y == 0 {
                        return Err(());
                    }
                    if matches!(e.ty, Type::Decimal(_)) {
                        // x/10^sa ÷ y/10^sb, times 10^r.
                        fit(round_div(x * 10i128.pow(sb + r), y * 10i128.pow(sa)), e.ty)
                    } else {
                        fit(x / y, e.ty)
                    }
                }
                // Not generated here: `souffle_*` tests check them against known values.
                _ => Err(()),
            }
        }
        KExprKind::Cmp(op, a, b) => {
            let o = if a.ty == Type::Float64 {
                flt(a)?.partial_cmp(&flt(b)?)
            } else {
                Some(int(a)?.cmp(&int(b)?))
            };
            use std::cmp::Ordering::*;
            let t = match (op, o) {
                (CmpOp::Ne, None) => true,
                (_, None) => false,
                (CmpOp::Eq, Some(o)) => o == Equal,
                (CmpOp::Ne, Some(o)) => o != Equal,
                (CmpOp::Lt, Some(o)) => o == Less,
                (CmpOp::Le, Some(o)) => o != Greater,
                (CmpOp::Gt, Some(o)) => o == Greater,
                (CmpOp::Ge, Some(o)) => o != Less,
            };
            Ok(R::I(t as i128))
        }
        KExprKind::And(xs) => {
            for x in xs {
                if int(x)? == 0 {
                    return Ok(R::I(0));
                }
            }
            Ok(R::I(1))
        }
        KExprKind::Or(xs) => {
            for x in xs {
                if int(x)? != 0 {
                    return Ok(R::I(1));
                }
            }
            Ok(R::I(0))
        }
        KExprKind::Not(x) => Ok(R::I((int(x)? == 0) as i128)),
        KExprKind::Call(ScalarFn::Abs, xs) => {
            if e.ty == Type::Float64 {
                Ok(R::F(flt(&xs[0])?.abs()))
            } else {
                fit(int(&xs[0])?.abs(), e.ty)
            }
        }
        KExprKind::Call(ScalarFn::Round, xs) => {
            let KExprKind::Const(Value::Int32(d)) = xs[1].kind else {
                unreachable!()
            };
            if e.ty == Type::Float64 {
                let m = 10f64.powi(d);
                return Ok(R::F((flt(&xs[0])? * m).round() / m));
            }
            let s = scale(xs[0].ty);
            let v = int(&xs[0])?;
            if (d as u32) >= s {
                Ok(R::I(v))
            } else {
                fit(round_div(v, 10i128.pow(s - d as u32)), e.ty)
            }
        }
        other => panic!("the generator does not produce {other:?}"),
    }
}

struct Gen {
    rng: Rng,
}

/// Column types of the random rows: int64, int64, decimal(2), decimal(4), float64.
const COLS: [Type; 5] = [
    Type::Int64,
    Type::Int64,
    Type::Decimal(2),
    Type::Decimal(4),
    Type::Float64,
];

impl Gen {
    fn pick(&mut self, n: usize) -> usize {
        self.rng.below(n as u64) as usize
    }

    /// A number-typed expression (int64, a decimal, or float64).
    fn num(&mut self, depth: u32) -> KExpr {
        if depth == 0 || self.pick(4) == 0 {
            return match self.pick(6) {
                0 => lit(Value::Int64(self.rng.below(7) as i64 - 3), Type::Int64),
                1 => {
                    let s = 1 + self.pick(3) as u8;
                    lit(dec(self.rng.below(2001) as i128 - 1000, s), Type::Decimal(s))
                }
                _ => {
                    let i = self.pick(COLS.len());
                    col(i, COLS[i])
                }
            };
        }
        let a = self.num(depth - 1);
        let b = self.num(depth - 1);
        match self.pick(8) {
            0 => KExpr {
                ty: a.ty,
                kind: KExprKind::Neg(Box::new(a)),
            },
            1 => {
                let ty = a.ty;
                call(ScalarFn::Abs, vec![a], ty)
            }
            2 => {
                let d = self.pick(4) as i32;
                let ty = match a.ty {
                    Type::Decimal(s) => Type::Decimal(s.min(d as u8)),
                    t => t,
                };
                round(a, d, ty)
            }
            _ => {
                let op = [ArithOp::Add, ArithOp::Sub, ArithOp::Mul, ArithOp::Div][self.pick(4)];
                self.arith(op, a, b)
            }
        }
    }

    /// Typed like sema types arithmetic: floats win, integers stay integers, decimals
    /// align scales for + and -, add them for *, and give scale 6 for /.
    fn arith(&mut self, op: ArithOp, a: KExpr, b: KExpr) -> KExpr {
        let (ta, tb) = (a.ty, b.ty);
        if ta == Type::Float64 || tb == Type::Float64 {
            let up = |x: KExpr| {
                if x.ty == Type::Float64 {
                    x
                } else {
                    cast(x, Type::Float64)
                }
            };
            return arith(op, up(a), up(b), Type::Float64);
        }
        if ta == Type::Int64 && tb == Type::Int64 {
            return arith(op, a, b, Type::Int64);
        }
        let (sa, sb) = (scale(ta) as u8, scale(tb) as u8);
        let to = |x: KExpr, s: u8| {
            if x.ty == Type::Decimal(s) {
                x
            } else {
                cast(x, Type::Decimal(s))
            }
        };
        match op {
            ArithOp::Add | ArithOp::Sub => {
                let s = sa.max(sb);
                arith(op, to(a, s), to(b, s), Type::Decimal(s))
            }
            ArithOp::Mul if sa + sb <= 12 => arith(op, to(a, sa), to(b, sb), Type::Decimal(sa + sb)),
            ArithOp::Mul => arith(
                ArithOp::Add,
                to(a, sa.max(sb)),
                to(b, sa.max(sb)),
                Type::Decimal(sa.max(sb)),
            ),
            ArithOp::Div => arith(op, to(a, sa), to(b, sb), Type::Decimal(6)),
            // Soufflé's operators take int64 only: the generator never picks them here.
            _ => arith(
                ArithOp::Add,
                to(a, sa.max(sb)),
                to(b, sa.max(sb)),
                Type::Decimal(sa.max(sb)),
            ),
        }
    }

    fn boolean(&mut self, depth: u32) -> KExpr {
        if depth == 0 || self.pick(3) == 0 {
            let a = self.num(2);
            let b = self.num(2);
            let op = [CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge][self.pick(6)];
            let common = if a.ty == Type::Float64 || b.ty == Type::Float64 {
                Type::Float64
            } else if a.ty == Type::Int64 && b.ty == Type::Int64 {
                Type::Int64
            } else {
                Type::Decimal(scale(a.ty).max(scale(b.ty)) as u8)
            };
            let up = |x: KExpr| if x.ty == common { x } else { cast(x, common) };
            return cmp(op, up(a), up(b));
        }
        let n = 1 + self.pick(3);
        let xs: Vec<KExpr> = (0..n).map(|_| self.boolean(depth - 1)).collect();
        match self.pick(3) {
            0 => KExpr {
                kind: KExprKind::And(xs),
                ty: Type::Bool,
            },
            1 => KExpr {
                kind: KExprKind::Or(xs),
                ty: Type::Bool,
            },
            _ => KExpr {
                kind: KExprKind::Not(Box::new(xs.into_iter().next().unwrap())),
                ty: Type::Bool,
            },
        }
    }

    fn rows(&mut self, n: usize) -> Vec<Vec<R>> {
        (0..n)
            .map(|_| {
                let big = self.pick(50) == 0;
                let int = |g: &mut Gen| {
                    if big {
                        g.rng.next() as i64 as i128 >> g.pick(3)
                    } else {
                        g.rng.below(41) as i128 - 20
                    }
                };
                vec![
                    R::I(int(self)),
                    R::I(int(self)),
                    R::I(self.rng.below(200_001) as i128 - 100_000),
                    R::I(if big {
                        self.rng.next() as i64 as i128
                    } else {
                        self.rng.below(2_000_001) as i128 - 1_000_000
                    }),
                    R::F([0.0, -1.5, 2.25, 1e-3, 7.0, -0.0][self.pick(6)]),
                ]
            })
            .collect()
    }
}

fn to_cols(rows: &[Vec<R>]) -> Vec<HostCol> {
    (0..COLS.len())
        .map(|c| {
            if COLS[c] == Type::Float64 {
                HostCol::F64(rows.iter().map(|r| if let R::F(x) = r[c] { x } else { 0.0 }).collect())
            } else {
                HostCol::I64(
                    rows.iter()
                        .map(|r| if let R::I(x) = r[c] { x as i64 } else { 0 })
                        .collect(),
                )
            }
        })
        .collect()
}

fn check_random(g: &mut Gen, e: &KExpr, n: usize) {
    let rows = g.rows(n);
    let cols = to_cols(&rows);
    let got = eval(e, &cols);
    let want: Vec<Result<R, ()>> = rows.iter().map(|r| reval(e, r)).collect();
    match want.iter().position(|r| r.is_err()) {
        Some(row) => {
            let err = got.expect_err(&format!("{e:?} should fail at row {row}"));
            assert!(
                err.0.contains(&format!("(row {row})")),
                "{e:?}: {err}, expected row {row}"
            );
        }
        None => {
            let got = got.unwrap_or_else(|err| panic!("{e:?}: {err}"));
            let want_col = match e.ty {
                Type::Float64 => HostCol::F64(
                    want.iter()
                        .map(|r| if let Ok(R::F(x)) = r { *x } else { 0.0 })
                        .collect(),
                ),
                Type::Bool => HostCol::U8(
                    want.iter()
                        .map(|r| if let Ok(R::I(x)) = r { *x as u8 } else { 9 })
                        .collect(),
                ),
                _ => HostCol::I64(
                    want.iter()
                        .map(|r| if let Ok(R::I(x)) = r { *x as i64 } else { 0 })
                        .collect(),
                ),
            };
            assert!(same(&got, &want_col), "{e:?}\n got {got:?}\nwant {want_col:?}");
        }
    }
}

#[test]
fn random_numeric_expressions_match_reference() {
    let mut g = Gen { rng: Rng(21) };
    for case in 0..600 {
        let e = g.num(3);
        let n = [0, 1, 5, 33, 300, 9000][case % 6];
        check_random(&mut g, &e, n);
    }
}

#[test]
fn random_boolean_expressions_match_reference() {
    let mut g = Gen { rng: Rng(22) };
    for case in 0..400 {
        let e = g.boolean(3);
        let n = [1, 7, 100, 20_000][case % 4];
        check_random(&mut g, &e, n);
    }
}
