//! `verify`: checks the invariants every pass must leave, so that a pass that breaks one
//! is caught at compile time rather than by a wrong kernel plan. It decides nothing.
//!
//! - every temp has one node (the annotations are indexed by temp);
//! - an algorithm is one its operator has: sort-merge on joins, semi-joins, anti-joins
//!   and differences; leapfrog triejoin on multi-way joins; an aggregation algorithm on
//!   aggregations;
//! - a deferred select is read, in its block, through projections only, by an
//!   aggregation that runs fused;
//! - a multi-way join's rounds name each of its variables (or none); no other operator
//!   has rounds;
//! - an order names columns of the result; a key order is a permutation of the
//!   operator's key pairs (group columns), and empty for other operators;
//! - estimates are finite and non-negative, one distinct count per column, none above
//!   the rows.

use std::collections::HashMap;

use fox_ra::{Op, Stmt, TempId};

use super::{lets, Pass, PhysError};
use crate::ann::{AggAlgorithm, Algorithm};
use crate::stats::Statistics;
use crate::PhysPlan;

pub struct Verify;

impl Pass for Verify {
    fn name(&self) -> &'static str {
        "verify"
    }

    fn decides(&self) -> &'static str {
        "nothing: checks the invariants of the annotated plan"
    }

    fn run(&self, plan: &mut PhysPlan, _stats: &Statistics) -> Result<(), PhysError> {
        check(plan).map_err(|msg| PhysError::Invalid {
            pass: plan.ran.last().copied().unwrap_or("(none)"),
            msg,
        })
    }
}

fn check(plan: &PhysPlan) -> Result<(), String> {
    let ra = &plan.ra;
    if plan.nodes.len() != ra.temps.len() {
        return Err(format!("{} annotations for {} temps", plan.nodes.len(), ra.temps.len()));
    }
    for b in &ra.blocks {
        let ops: HashMap<TempId, &Op> = lets(b).collect();
        let mut readers: HashMap<TempId, Vec<TempId>> = HashMap::new();
        for s in &b.stmts {
            match s {
                Stmt::Let { dst, op, .. } => {
                    for i in op.inputs() {
                        readers.entry(i).or_default().push(*dst);
                    }
                }
                // A reader that is no operator.
                Stmt::Store { src, .. } | Stmt::Output { src, .. } | Stmt::CheckFunctional { src, .. } => {
                    readers.entry(*src).or_default().push(TempId(u32::MAX));
                }
                _ => {}
            }
        }
        for (t, op) in lets(b) {
            let n = plan.node(t);
            let ok = matches!(
                (&n.algorithm, op),
                (Algorithm::Direct, _)
                    | (
                        Algorithm::SortMerge,
                        Op::Join { .. } | Op::SemiJoin { .. } | Op::AntiJoin { .. } | Op::Difference { .. },
                    )
                    | (Algorithm::Lftj { .. }, Op::MultiJoin { .. })
                    | (Algorithm::Aggregate(_), Op::Aggregate { .. })
            );
            if !ok {
                return Err(format!(
                    "t{} has the algorithm {:?}, which its operator does not have",
                    t.0, n.algorithm
                ));
            }
            if let Some(agg) = n.deferred_into {
                if !matches!(op, Op::Select { .. }) {
                    return Err(format!("t{} is deferred but is not a select", t.0));
                }
                let mut cur = t;
                loop {
                    let next = match readers.get(&cur).map(Vec::as_slice) {
                        Some([r]) => *r,
                        _ => {
                            return Err(format!(
                                "select t{} is deferred into t{}, which does not read it",
                                t.0, agg.0
                            ))
                        }
                    };
                    match ops.get(&next) {
                        Some(Op::Project { .. }) if next != agg => cur = next,
                        Some(Op::Aggregate { .. }) if next == agg => break,
                        _ => {
                            return Err(format!(
                                "select t{} is deferred into t{}, which does not read it",
                                t.0, agg.0
                            ))
                        }
                    }
                }
                if plan.node(agg).algorithm != Algorithm::Aggregate(AggAlgorithm::Fused) {
                    return Err(format!(
                        "select t{} is deferred into t{}, which does not run fused",
                        t.0, agg.0
                    ));
                }
            }
            match op {
                Op::MultiJoin { vars, .. } => {
                    let w = n.rounds.windowed.len();
                    if w != 0 && w != vars.len() {
                        return Err(format!("t{} has rounds for {w} of its {} variables", t.0, vars.len()));
                    }
                }
                _ if !n.rounds.windowed.is_empty() => {
                    return Err(format!("t{} has rounds but is not a multi-way join", t.0));
                }
                _ => {}
            }
            if let Some(o) = &n.order {
                let arity = ra.temps[t.0 as usize].columns.len();
                if o.provides.sorted.iter().any(|k| k.col >= arity) {
                    return Err(format!("t{} is sorted on a column it does not have", t.0));
                }
                let nkeys = match op {
                    Op::Join { left_keys, .. } | Op::SemiJoin { left_keys, .. } | Op::AntiJoin { left_keys, .. } => {
                        Some(left_keys.len())
                    }
                    Op::Aggregate { group, .. } => Some(group.len()),
                    Op::Difference { left, .. } => Some(ra.temps[left.0 as usize].columns.len()),
                    _ => None,
                };
                let mut perm = o.key_order.clone();
                perm.sort_unstable();
                let is_perm = perm.iter().copied().eq(0..nkeys.unwrap_or(0));
                if !is_perm {
                    return Err(format!("t{} compares its keys in the order {:?}", t.0, o.key_order));
                }
            }
            if let Some(e) = &n.est {
                let arity = ra.temps[t.0 as usize].columns.len();
                if !(e.rows.is_finite() && e.rows >= 0.0)
                    || e.distinct.len() != arity
                    || e.distinct.iter().any(|d| !(d.is_finite() && *d >= 0.0 && *d <= e.rows))
                {
                    return Err(format!("t{} has an inconsistent estimate {e:?}", t.0));
                }
            }
        }
    }
    Ok(())
}
