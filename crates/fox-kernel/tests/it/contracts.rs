//! The contracts of kernels as `fox_kernel` states them once for the runtime and every
//! backend: the arguments of a launch (`check_args`), the checked form of expressions
//! (`check_expr`) and the expansion of composite kernels (`expand`).

use fox_kernel::checked::{INode, Root};
use fox_kernel::{check_args, check_expr, check_shape, expand, AggSpec, Elem, KExpr, KExprKind, Kernel, Operand};
use fox_sema::core::{AggFunc, ArithOp, CmpOp, Type, Value};

fn col(i: usize, ty: Type) -> KExpr {
    KExpr {
        kind: KExprKind::Col(i),
        ty,
    }
}

fn konst(v: Value, ty: Type) -> KExpr {
    KExpr {
        kind: KExprKind::Const(v),
        ty,
    }
}

#[test]
fn arguments_of_a_launch_are_checked_for_count_types_and_lengths() {
    let write = Kernel::JoinWrite { nkeys: 1 };
    let ok = [(Elem::I32, 3), (Elem::I32, 5), (Elem::U64, 3), (Elem::U64, 1)];
    assert_eq!(check_args(&write, &ok, &[]), Ok(vec![Elem::U32, Elem::U32]));
    let short_offsets = [(Elem::I32, 3), (Elem::I32, 5), (Elem::U64, 2), (Elem::U64, 1)];
    let e = check_args(&write, &short_offsets, &[]).unwrap_err();
    assert!(
        e.contains("offsets (argument 2) have 2 rows, but the left side has 3"),
        "{e}"
    );
    let long_total = [(Elem::I32, 3), (Elem::I32, 5), (Elem::U64, 3), (Elem::U64, 2)];
    let e = check_args(&write, &long_total, &[]).unwrap_err();
    assert!(e.contains("argument 3 (total) has 2 rows, but must have 1"), "{e}");
    let wrong_type = [(Elem::I32, 3), (Elem::I64, 5), (Elem::U64, 3), (Elem::U64, 1)];
    assert!(check_args(&write, &wrong_type, &[]).is_err());
    // Keys of one side have one length.
    let count = Kernel::JoinCount { nkeys: 2 };
    let uneven = [(Elem::I32, 3), (Elem::I32, 4), (Elem::I32, 5), (Elem::I32, 5)];
    let e = check_args(&count, &uneven, &[]).unwrap_err();
    assert!(
        e.contains("the left keys: argument 1 has 4 rows, but argument 0 has 3"),
        "{e}"
    );
    // Gathered columns may differ in length; an expansion's window has two rows.
    let gather = Kernel::Gather { shift: 0 };
    assert!(check_args(&gather, &[(Elem::U32, 2), (Elem::I64, 9), (Elem::U8, 4)], &[]).is_ok());
    let window = [(Elem::U32, 3), (Elem::U64, 3), (Elem::U64, 1), (Elem::U64, 3)];
    let e = check_args(&Kernel::Expand, &window, &[]).unwrap_err();
    assert!(e.contains("argument 3 (window) has 3 rows, but must have 2"), "{e}");
    // The shape alone leaves the types of aggregates to the backends.
    let count32 = Kernel::ReduceByKey {
        nkeys: 1,
        aggs: vec![AggSpec {
            func: AggFunc::Count,
            input: None,
            output: Type::Int32,
        }],
    };
    let keys = [(Elem::I64, 4)];
    assert!(check_args(&count32, &keys, &[])
        .unwrap_err()
        .contains("count yields int64"));
    assert_eq!(check_shape(&count32, &keys), Ok(vec![Elem::I64, Elem::I32]));
    assert!(check_shape(&count32, &[(Elem::I64, 4), (Elem::I64, 4)]).is_err());
}

#[test]
fn the_checked_form_resolves_strings_and_numbers_error_sites() {
    // (c0 + 1) > 2: the sum may overflow (and its division-by-zero site is numbered too);
    // the comparison cannot fail.
    let sum = KExpr {
        kind: KExprKind::Arith(
            ArithOp::Add,
            Box::new(col(0, Type::Int32)),
            Box::new(konst(Value::Int32(1), Type::Int32)),
        ),
        ty: Type::Int32,
    };
    let gt = KExpr {
        kind: KExprKind::Cmp(CmpOp::Gt, Box::new(sum), Box::new(konst(Value::Int32(2), Type::Int32))),
        ty: Type::Bool,
    };
    let none = |_: &str| None;
    let c = check_expr(&gt, 1, &[Elem::I32], &none).unwrap();
    assert_eq!(c.what, "((c0 + 1) > 2)");
    assert_eq!(
        c.msgs,
        [
            "overflow: `(c0 + 1)` does not fit int32",
            "division by zero in `(c0 + 1)`"
        ]
    );
    assert!(!c.wide);
    let Root::Int(INode::CmpI(CmpOp::Gt, a, b)) = &c.root else {
        panic!("{:?}", c.root)
    };
    assert!(matches!(**a, INode::Arith { err: 1, err_div: 2, .. }));
    assert_eq!(**b, INode::Const(2));
    // A string constant is its dictionary code; one without a code is a plan error.
    let eq = KExpr {
        kind: KExprKind::Cmp(
            CmpOp::Eq,
            Box::new(col(0, Type::String)),
            Box::new(konst(Value::String("fox".into()), Type::String)),
        ),
        ty: Type::Bool,
    };
    let codes = |s: &str| (s == "fox").then_some(7);
    let c = check_expr(&eq, 1, &[Elem::U32], &codes).unwrap();
    assert!(matches!(&c.root, Root::Int(INode::CmpI(CmpOp::Eq, _, b)) if **b == INode::Const(7)));
    let e = check_expr(&eq, 1, &[Elem::U32], &none).unwrap_err();
    assert_eq!(e, "string constant \"fox\" has no dictionary code");
    // A column read as another type than it holds.
    let e = check_expr(&eq, 1, &[Elem::I64], &codes).unwrap_err();
    assert!(e.contains("column 0 is i64"), "{e}");
}

/// `e` as the expression of an `Eval` over arguments of the element types `elems` (the
/// first `n_cols` columns): the checked form's error, which the contract's check of the
/// launch (`check_args`) gives too, without resolving strings.
fn refused(e: &KExpr, n_cols: usize, elems: &[Elem]) -> String {
    let codes = |_: &str| Some(1);
    let m = check_expr(e, n_cols, elems, &codes).unwrap_err();
    let eval = Kernel::Eval {
        expr: e.clone(),
        n_cols,
    };
    let args: Vec<(Elem, usize)> = elems.iter().map(|&el| (el, 3)).collect();
    assert_eq!(check_args(&eval, &args, &[]), Err(m.clone()));
    m
}

#[test]
fn the_checked_form_is_the_one_type_check_of_expressions() {
    let lookup = |t: usize, x: KExpr, ty: Type| KExpr {
        kind: KExprKind::Table(t, Box::new(x)),
        ty,
    };
    let s = || col(0, Type::String);
    // A dictionary table reads as the type of its entries: ranks as int64, flags as bool,
    // lengths as int32.
    for (table, ty) in [
        (Elem::U32, Type::Int64),
        (Elem::U8, Type::Bool),
        (Elem::I32, Type::Int32),
    ] {
        let ok = check_expr(&lookup(0, s(), ty), 1, &[Elem::U32, table], &|_| None);
        assert!(ok.is_ok(), "{table:?} as {ty}: {ok:?}");
    }
    assert_eq!(
        refused(&lookup(0, s(), Type::Bool), 1, &[Elem::U32, Elem::U32]),
        "table 0 is u32, whose entries read as int64, but `t0[c0]` has type bool"
    );
    assert_eq!(
        refused(&lookup(0, s(), Type::Int64), 1, &[Elem::U32, Elem::I64]),
        "table 0 is i64, not a dictionary table"
    );
    // Looked up by a string code.
    assert_eq!(
        refused(&lookup(0, col(0, Type::Int64), Type::Int64), 1, &[Elem::I64, Elem::U32]),
        "`t0[c0]` looks up table 0 by int64, not by a string code"
    );
    // A constant is labelled with its own type: no integer as a decimal, no decimal of
    // another scale, no integer as a float, no date beyond 9999-12-31.
    let sum = |c: KExpr| KExpr {
        kind: KExprKind::Arith(ArithOp::Add, Box::new(col(0, c.ty)), Box::new(c.clone())),
        ty: c.ty,
    };
    let dec = |unscaled: i128, scale: u8| Value::Decimal { unscaled, scale };
    assert_eq!(
        refused(&sum(konst(Value::Int32(5), Type::Decimal(2))), 1, &[Elem::I64]),
        "constant 5 is int32, not decimal(2)"
    );
    assert_eq!(
        refused(&sum(konst(dec(5, 1), Type::Decimal(2))), 1, &[Elem::I64]),
        "constant 0.5 is decimal(1), not decimal(2)"
    );
    assert_eq!(
        refused(&sum(konst(Value::Int64(1), Type::Float64)), 1, &[Elem::F64]),
        "constant 1 is int64, not float64"
    );
    let late = konst(Value::Date(fox_sema::core::MAX_DATE + 1), Type::Date);
    let m = refused(&late, 1, &[Elem::U8]);
    assert!(m.ends_with("is outside the range of date"), "{m}");
    // The values of an in-list have the operand's type.
    let listed = |x: KExpr, vs: Vec<Value>| KExpr {
        kind: KExprKind::In(Box::new(x), vs),
        ty: Type::Bool,
    };
    assert_eq!(
        refused(
            &listed(col(0, Type::Float64), vec![Value::Float64(0.5), Value::Int64(7)]),
            1,
            &[Elem::F64]
        ),
        "in `c0 in (0.5, 7)`: constant 7 is int64, not float64"
    );
    assert_eq!(
        refused(&listed(col(0, Type::Decimal(2)), vec![dec(15, 1)]), 1, &[Elem::I64]),
        "in `c0 in (1.5)`: constant 1.5 is decimal(1), not decimal(2)"
    );
    // The digits of `round` are an integer constant labelled with its type.
    let round = KExpr {
        kind: KExprKind::Call(
            fox_kernel::ScalarFn::Round,
            vec![col(0, Type::Decimal(2)), konst(Value::Int32(1), Type::Int64)],
        ),
        ty: Type::Decimal(1),
    };
    assert_eq!(refused(&round, 1, &[Elem::I64]), "constant 1 is int32, not int64");
    // Boolean operators take booleans.
    let not = KExpr {
        kind: KExprKind::Not(Box::new(col(0, Type::Int64))),
        ty: Type::Bool,
    };
    assert_eq!(refused(&not, 1, &[Elem::I64]), "`c0` is int64, not bool");
    // A string constant needs a code only where it is evaluated.
    let eq = KExpr {
        kind: KExprKind::Cmp(
            CmpOp::Eq,
            Box::new(s()),
            Box::new(konst(Value::String("absent".into()), Type::String)),
        ),
        ty: Type::Bool,
    };
    let eval = Kernel::Eval { expr: eq, n_cols: 1 };
    assert_eq!(check_args(&eval, &[(Elem::U32, 3)], &[]), Ok(vec![Elem::U8]));
}

#[test]
fn a_fused_reduction_expands_into_the_kernels_it_stands_for() {
    let filter = KExpr {
        kind: KExprKind::Cmp(
            CmpOp::Gt,
            Box::new(col(1, Type::Int64)),
            Box::new(konst(Value::Int64(0), Type::Int64)),
        ),
        ty: Type::Bool,
    };
    let fused = Kernel::FusedReduce {
        filter: Some(filter.clone()),
        nkeys: 1,
        aggs: vec![
            AggSpec {
                func: AggFunc::Count,
                input: None,
                output: Type::Int64,
            },
            AggSpec {
                func: AggFunc::Sum,
                input: Some(Type::Int64),
                output: Type::Int64,
            },
        ],
        exprs: vec![None, Some(col(1, Type::Int64))],
        n_cols: 2,
    };
    // Two columns and one dictionary table.
    let x = expand(&fused, 3).expect("a composite kernel");
    let kernels: Vec<&str> = x.steps.iter().map(|s| s.kernel.name()).collect();
    assert_eq!(
        kernels,
        ["Eval", "Compact", "Eval", "SortPerm", "Gather", "ReduceByKey"]
    );
    let out = |step, out| Operand::Out { step, out };
    // The filter reads the columns and the table; the compaction keeps both columns.
    assert_eq!(x.steps[0].args, [Operand::Arg(0), Operand::Arg(1), Operand::Arg(2)]);
    assert_eq!(x.steps[0].context, "the filter: ");
    assert_eq!(x.steps[1].args, [out(0, 0), Operand::Arg(0), Operand::Arg(1)]);
    // The value of aggregate 1 over the kept rows, then the keys and values in key order.
    assert_eq!(x.steps[2].args, [out(1, 0), out(1, 1), Operand::Arg(2)]);
    assert_eq!(x.steps[2].context, "aggregate 1: ");
    assert_eq!(x.steps[3].args, [out(1, 0)]);
    assert_eq!(x.steps[4].args, [out(3, 0), out(1, 0), out(2, 0)]);
    assert_eq!(x.steps[5].args, [out(4, 0), out(4, 1)]);
    assert_eq!(x.outs, [out(5, 0), out(5, 1), out(5, 2)]);
    // Every step's arguments fit its contract.
    for s in &x.steps {
        let elems: Vec<(Elem, usize)> = s
            .args
            .iter()
            .map(|a| match a {
                Operand::Arg(2) => (Elem::I32, 10),
                Operand::Arg(_) => (Elem::I64, 4),
                // The filter's flags and the permutation; every other value is an i64
                // column of the 4 rows.
                Operand::Out { step: 0, .. } => (Elem::U8, 4),
                Operand::Out { step: 3, .. } => (Elem::U32, 4),
                Operand::Out { .. } => (Elem::I64, 4),
            })
            .collect();
        assert!(
            check_args(&s.kernel, &elems, &[]).is_ok(),
            "{}: {elems:?}",
            s.kernel.name()
        );
    }
    // Without keys and values, the reduction counts the rows of one column.
    let count = Kernel::FusedReduce {
        filter: None,
        nkeys: 0,
        aggs: vec![AggSpec {
            func: AggFunc::Count,
            input: None,
            output: Type::Int64,
        }],
        exprs: vec![None],
        n_cols: 1,
    };
    let x = expand(&count, 1).unwrap();
    assert_eq!(x.steps.len(), 1);
    assert_eq!(x.steps[0].args, [Operand::Arg(0)]);
    // Other kernels are not composite.
    assert!(expand(
        &Kernel::Eval {
            expr: filter,
            n_cols: 2
        },
        2
    )
    .is_none());
}
