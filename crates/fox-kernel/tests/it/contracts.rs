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
