use crate::common;

use common::*;
use fox_ra::*;
use fox_sema::core::{CmpOp, Type, Value};

const I: Type = Type::Int32;

/// `tri(x, y, z) <- edge(x, y), edge(y, z), edge(x, z), x < y.` plus facts of every type.
fn sample() -> RaPlan {
    let mut p = Prog::new();
    let edge = p.input("edge", &[("a", I), ("b", I)]);
    let tri = p.pred("tri", &[("x", I), ("y", I), ("z", I)]);
    let mut r = Rule::new();
    let (x, y, z) = (r.var("x", I), r.var("y", I), r.var("z", I));
    let xy = cmp(CmpOp::Lt, r.e(x), r.e(y));
    r.atom(edge, vec![v(x), v(y)])
        .atom(edge, vec![v(y), v(z)])
        .atom(edge, vec![v(x), v(z)])
        .filter(xy);
    p.stratum(&[tri], false, vec![r.head(tri, vec![v(x), v(y), v(z)])], vec![]);
    let misc = p.pred(
        "misc",
        &[
            ("d", Type::WideDecimal(2)),
            ("f", Type::Float64),
            ("s", Type::String),
            ("t", Type::Date),
            ("b", Type::Bool),
            ("l", Type::Int64),
        ],
    );
    let row = vec![
        Value::Decimal {
            // The largest magnitude of 38 digits: beyond 64 bits in the RON text.
            unscaled: -99_999_999_999_999_999_999_999_999_999_999_999_999,
            scale: 2,
        },
        Value::Float64(1.5e300),
        Value::String("quote \" and \\ and\nnewline".into()),
        Value::Date(10_471),
        Value::Bool(true),
        Value::Int64(i64::MIN),
    ];
    p.stratum(&[misc], false, vec![], vec![fact(misc, row)]);
    p.output(tri, &[(2, true)], Some(5));
    p.output(misc, &[], None);
    plan(&p.core).expect("plans")
}

#[test]
fn round_trip_is_identity() {
    let plan = sample();
    let text = to_ron(&plan);
    assert!(text.starts_with("RaPlan("), "{text}");
    assert_eq!(from_ron(&text), Ok(plan));
}

#[test]
fn another_version_is_refused_with_both_versions_named() {
    let text = to_ron(&sample()).replacen("version: 1,", "version: 7,", 1);
    let err = from_ron(&text).unwrap_err();
    assert_eq!(
        err,
        PlanError::Version {
            found: 7,
            expected: PLAN_VERSION
        }
    );
    assert_eq!(
        err.to_string(),
        "this plan has format version 7, but this build of Fox reads version 1; compile the query again with this `foxc`"
    );
}

#[test]
fn text_that_is_not_a_plan_is_a_syntax_error() {
    for text in ["", "RaPlan(", "Kernels(version: 1)", "RaPlan(version: 1)", "[1, 2, 3]"] {
        match from_ron(text) {
            Err(PlanError::Syntax(msg)) => assert!(!msg.is_empty()),
            other => panic!("{text:?} gave {other:?}"),
        }
    }
}

/// Applies `f` to a valid plan and returns the error reading it back gives.
fn broken(f: impl FnOnce(&mut RaPlan)) -> String {
    let mut plan = sample();
    f(&mut plan);
    match from_ron(&to_ron(&plan)) {
        Err(PlanError::Invalid(msg)) => msg,
        other => panic!("expected an inconsistency, got {other:?}"),
    }
}

fn lets(plan: &mut RaPlan) -> impl Iterator<Item = (&mut TempId, &mut Op)> {
    plan.blocks
        .iter_mut()
        .flat_map(|b| &mut b.stmts)
        .filter_map(|s| match s {
            Stmt::Let { dst, op, .. } => Some((dst, op)),
            _ => None,
        })
}

#[test]
fn a_dangling_relation_is_reported() {
    let msg = broken(|p| {
        if let Some((_, op)) = lets(p).find(|(_, op)| matches!(op, Op::Scan(_))) {
            *op = Op::Scan(RelId(99));
        }
    });
    assert_eq!(msg, "block b0: t0: relation r99 does not exist");
}

#[test]
fn a_temp_read_before_its_definition_is_reported() {
    let msg = broken(|p| {
        if let Some((_, Op::MultiJoin { inputs, .. })) = lets(p).find(|(_, op)| matches!(op, Op::MultiJoin { .. })) {
            inputs[0].src = TempId(40);
        }
    });
    assert_eq!(msg, "block b0: t2: t40 is read but not defined before");
}

#[test]
fn an_arity_mismatch_is_reported() {
    let msg = broken(|p| {
        p.temps[0].columns.pop();
    });
    assert_eq!(
        msg,
        "block b0: t0 is declared with columns (int32) but its operator produces (int32, int32)"
    );
    let msg = broken(|p| {
        if let Some((_, Op::MultiJoin { inputs, .. })) = lets(p).find(|(_, op)| matches!(op, Op::MultiJoin { .. })) {
            inputs[1].vars.push(0);
        }
    });
    assert_eq!(
        msg,
        "block b0: t2: a multi-way join input t0 has 2 columns but binds 3 variables"
    );
}

#[test]
fn a_store_of_the_wrong_shape_is_reported() {
    let msg = broken(|p| {
        for s in p.blocks.iter_mut().flat_map(|b| &mut b.stmts) {
            if let Stmt::Store { src, .. } = s {
                *src = TempId(0);
                break;
            }
        }
    });
    assert_eq!(
        msg,
        "block b0: t0 with columns (int32, int32) is stored into `tri` with columns (int32, int32, int32)"
    );
}

#[test]
fn a_missing_block_is_reported() {
    let msg = broken(|p| p.blocks[0].term = Terminator::Jump(BlockId(3)));
    assert_eq!(msg, "block b0: block b3 does not exist (1 blocks)");
}

#[test]
fn a_false_property_claim_is_reported() {
    let msg = broken(|p| p.temps[0].props.unique = true);
    assert_eq!(
        msg,
        "block b0: t0 claims an order or uniqueness its operator does not give"
    );
}

#[test]
fn a_temp_without_a_definition_is_reported() {
    let msg = broken(|p| {
        let s = p.temps[0].clone();
        p.temps.push(s);
    });
    assert!(msg.ends_with("has a schema but no definition"), "{msg}");
}
