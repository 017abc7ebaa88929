//! `fusion`: which aggregations run as one fused kernel over their unsorted input, and
//! which selects leave their compaction to such an aggregation.
//!
//! An aggregation is fusable when no expression it evaluates makes strings (those run on
//! the host) and no aggregate is a `min`/`max` of strings (ordered by string value); it
//! then runs as one `FusedReduce` unless its input is already sorted on the group keys. A
//! select is deferred when its result is read once, through a chain of projections each
//! read once, by a fusable aggregation and its predicate is fusable too: its rows are
//! never compacted, the aggregation applies the predicate. Disabled, every aggregation
//! sorts and reduces, every select compacts.

use fox_ra::{Block, Expr, ExprKind, Op, TempId};
use fox_sema::core::{AggFunc, Type};

use super::{lets, readers, Pass, PhysError};
use crate::ann::{AggAlgorithm, Algorithm};
use crate::stats::Statistics;
use crate::PhysPlan;

pub struct Fusion;

impl Pass for Fusion {
    fn name(&self) -> &'static str {
        "fusion"
    }

    fn decides(&self) -> &'static str {
        "which aggregations run as one fused kernel, and which selects leave their compaction to them"
    }

    fn run(&self, plan: &mut PhysPlan, _stats: &Statistics) -> Result<(), PhysError> {
        let mut fused = Vec::new();
        let mut deferred = Vec::new();
        for b in &plan.ra.blocks {
            for (t, op) in lets(b) {
                if let Op::Aggregate { aggs, .. } = op {
                    if fusable(None, aggs) {
                        fused.push(t);
                    }
                }
            }
            deferred.extend(deferred_selects(b));
        }
        for t in fused {
            plan.node_mut(t).algorithm = Algorithm::Aggregate(AggAlgorithm::Fused);
        }
        for (select, agg) in deferred {
            plan.node_mut(select).deferred_into = Some(agg);
        }
        Ok(())
    }
}

/// Whether an aggregation (and the filter before it) can run as one `FusedReduce`.
pub(crate) fn fusable(pred: Option<&Expr>, aggs: &[fox_ra::AggCall]) -> bool {
    fn pure(e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Col(_) | ExprKind::Const(_) => true,
            ExprKind::Cast(a) | ExprKind::Neg(a) | ExprKind::Not(a) | ExprKind::In(a, _) => pure(a),
            ExprKind::Arith(_, a, b) | ExprKind::Cmp(_, a, b) => pure(a) && pure(b),
            ExprKind::And(es) | ExprKind::Or(es) => es.iter().all(pure),
            ExprKind::Call(b, es) => !b.is_host() && es.iter().all(pure),
        }
    }
    pred.is_none_or(pure)
        && aggs.iter().all(|a| match &a.arg {
            None => true,
            Some(e) => pure(e) && !(e.ty == Type::String && matches!(a.func, AggFunc::Min | AggFunc::Max)),
        })
}

/// The selects of a block whose result is read once, by a chain of projections (each
/// read once) ending in a fusable aggregation, with that aggregation's temp.
fn deferred_selects(b: &Block) -> Vec<(TempId, TempId)> {
    let readers = readers(b);
    let mut out = Vec::new();
    for (dst, op) in lets(b) {
        let Op::Select { pred, .. } = op else {
            continue;
        };
        let mut t = dst;
        while let Some([Some((d, op))]) = readers.get(&t).map(Vec::as_slice) {
            match op {
                Op::Project { .. } => t = *d,
                Op::Aggregate { aggs, .. } => {
                    if fusable(Some(pred), aggs) {
                        out.push((dst, *d));
                    }
                    break;
                }
                _ => break,
            }
        }
    }
    out
}
