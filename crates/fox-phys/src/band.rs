//! Band joins: a join without equal keys whose only reader is a select that bounds one
//! column of one side by a column of the other side plus a constant (`t2 >= t1`,
//! `t2 <= t1 + 50`, `d2 < d1 - 7`, `x = y` across types the keys could not take). Such a
//! join is planned as a search of each probing row's bounds in the other side sorted on
//! the bounded column; the select still applies its whole predicate to the pairs found.

use fox_ra::{Expr, ExprKind, JoinCol, Side};
use fox_sema::core::{ArithOp, CmpOp, Type, Value};

use crate::ann::{Band, BandBound, BandInner};

/// The band plan of a join with the output columns `output` read only by a select with
/// predicate `pred` (over the join's output columns), or `None` when no conjunct of the
/// predicate bounds a column of one side by the other. Among the bounded columns, one
/// bounded on both sides is preferred, then one of the right side (the join then keeps
/// the left side's order).
pub fn plan_band(output: &[JoinCol], pred: &Expr) -> Option<Band> {
    let mut conjuncts = Vec::new();
    flatten(pred, &mut conjuncts);
    // (side, col) of the bounded column → its first lower and upper bound.
    let mut found: Vec<Cand> = Vec::new();
    for c in conjuncts {
        let ExprKind::Cmp(op, a, b) = &c.kind else {
            continue;
        };
        // `t1 < t2` bounds both columns: each reading is a candidate.
        for (target, bound, op) in [(a, b, *op), (b, a, op.flipped())] {
            // `col + k OP bound` is `col OP bound - k`.
            let Some((side, col, shift)) = bounded_column(output, target) else {
                continue;
            };
            let Some((bcol, offset)) = bound_of(output, bound, target.ty, side) else {
                continue;
            };
            let Some(offset) = offset.checked_sub(shift) else {
                continue;
            };
            let (lower, upper) = match op {
                CmpOp::Ge => (Some(false), None),
                CmpOp::Gt => (Some(true), None),
                CmpOp::Le => (None, Some(false)),
                CmpOp::Lt => (None, Some(true)),
                CmpOp::Eq => (Some(false), Some(false)),
                CmpOp::Ne => (None, None),
            };
            let i = match found.iter().position(|f| f.0 == side && f.1 == col) {
                Some(i) => i,
                None => {
                    found.push((side, col, None, None));
                    found.len() - 1
                }
            };
            let f = &mut found[i];
            let mk = |open| BandBound {
                col: bcol,
                offset,
                open,
            };
            if f.2.is_none() {
                f.2 = lower.map(mk);
            }
            if f.3.is_none() {
                f.3 = upper.map(mk);
            }
        }
    }
    let score = |f: &Cand| {
        (
            usize::from(f.2.is_some()) + usize::from(f.3.is_some()),
            f.0 == Side::Right,
        )
    };
    let best = found
        .iter()
        .filter(|f| f.2.is_some() || f.3.is_some())
        .max_by_key(|f| score(f))?;
    let band = |f: &Cand, inner: Option<BandInner>| Band {
        sorted: f.0,
        col: f.1,
        lower: f.2,
        upper: f.3,
        inner,
    };
    // A window (a column bounded on both sides) is the band. Otherwise the best pair of
    // columns of one side bounded once each, for an inequality join: bounds in opposite
    // directions first (each removes the pairs the other keeps), then crossed ones (the
    // interval-overlap shape `e2 > s1, s2 < e1`: each searched column is the other's
    // bounding column's counterpart), then of the right side.
    if score(best).0 == 2 {
        return Some(band(best, None));
    }
    let half: Vec<&Cand> = found.iter().filter(|f| f.2.is_some() != f.3.is_some()).collect();
    let mut pairs = Vec::new();
    for (i, a) in half.iter().enumerate() {
        for b in &half[i + 1..] {
            if a.0 == b.0 {
                pairs.push((*a, *b));
            }
        }
    }
    let pair_score = |(a, b): &(&Cand, &Cand)| {
        let opposite = a.2.is_some() != b.2.is_some();
        let bound_col = |f: &Cand| f.2.or(f.3).map_or(usize::MAX, |x| x.col);
        let crossed = opposite && bound_col(a) == b.1 && bound_col(b) == a.1;
        (opposite, crossed, a.0 == Side::Right)
    };
    // The first pair of the best score.
    let Some(&(a, b)) = pairs.iter().rev().max_by_key(|p| pair_score(p)) else {
        return Some(band(best, None));
    };
    Some(band(
        a,
        Some(BandInner {
            col: b.1,
            lower: b.2,
            upper: b.3,
        }),
    ))
}

/// A bounded column (side, column of that side's input) and its first lower and upper
/// bound.
type Cand = (Side, usize, Option<BandBound>, Option<BandBound>);

fn flatten<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match &e.kind {
        ExprKind::And(es) => es.iter().for_each(|x| flatten(x, out)),
        _ => out.push(e),
    }
}

/// Whether a type's storage order is its value order and its storage an `i32` or `i64`
/// (what the bounded search compares).
fn searchable(t: Type) -> bool {
    matches!(t, Type::Int32 | Type::Int64 | Type::Date | Type::Decimal(_))
}

/// A column of the join's output plus or minus a constant, as (side, column of that
/// side's input, the constant), when its type can be searched.
fn bounded_column(output: &[JoinCol], e: &Expr) -> Option<(Side, usize, i64)> {
    let column = |x: &Expr| match x.kind {
        ExprKind::Col(c) if searchable(x.ty) && x.ty == e.ty => output.get(c).map(|jc| (jc.side, jc.col)),
        _ => None,
    };
    match &e.kind {
        ExprKind::Col(_) => column(e).map(|(s, c)| (s, c, 0)),
        ExprKind::Arith(ArithOp::Add, x, y) => match (column(x), column(y)) {
            (Some((s, c)), None) => constant(y, e.ty).map(|k| (s, c, k)),
            (None, Some((s, c))) => constant(x, e.ty).map(|k| (s, c, k)),
            _ => None,
        },
        ExprKind::Arith(ArithOp::Sub, x, y) => {
            let (s, c) = column(x)?;
            constant(y, e.ty).and_then(i64::checked_neg).map(|k| (s, c, k))
        }
        _ => None,
    }
}

/// A constant of type `ty` in its storage unit.
fn constant(x: &Expr, ty: Type) -> Option<i64> {
    match (&x.kind, ty) {
        (ExprKind::Const(Value::Int32(v)), Type::Int32 | Type::Int64 | Type::Date) => Some(i64::from(*v)),
        (ExprKind::Const(Value::Int64(v)), Type::Int32 | Type::Int64 | Type::Date) => Some(*v),
        (ExprKind::Const(Value::Decimal { unscaled, scale }), Type::Decimal(s)) if *scale == s => {
            i64::try_from(*unscaled).ok()
        }
        _ => None,
    }
}

/// A bound of a column of type `ty` on side `bounded`: a column of the other side (of
/// type `ty`) plus or minus a constant, as (that column of its input, the constant in
/// `ty`'s storage unit).
fn bound_of(output: &[JoinCol], e: &Expr, ty: Type, bounded: Side) -> Option<(usize, i64)> {
    if e.ty != ty {
        return None;
    }
    let column = |x: &Expr| match x.kind {
        ExprKind::Col(c) if x.ty == ty => output.get(c).filter(|jc| jc.side != bounded).map(|jc| jc.col),
        _ => None,
    };
    let constant = |x: &Expr| constant(x, ty);
    match &e.kind {
        ExprKind::Col(_) => column(e).map(|c| (c, 0)),
        ExprKind::Arith(ArithOp::Add, x, y) => match (column(x), column(y)) {
            (Some(c), None) => constant(y).map(|k| (c, k)),
            (None, Some(c)) => constant(x).map(|k| (c, k)),
            _ => None,
        },
        ExprKind::Arith(ArithOp::Sub, x, y) => {
            let c = column(x)?;
            constant(y).and_then(i64::checked_neg).map(|k| (c, k))
        }
        _ => None,
    }
}
