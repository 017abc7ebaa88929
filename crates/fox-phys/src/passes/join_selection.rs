//! `join-selection`: the algorithm of every join. A join whose only reader is a select
//! bounding a column of one side by a column of the other (plus a constant) is a band
//! join ([`crate::band`]) unless it has no keys and the estimated sizes make the cross
//! product cheaper (a side of a row or two); other binary joins, semi-joins, anti-joins and differences
//! merge their sides sorted on the keys; multi-way joins (the cyclic bodies
//! the planner routes to one operator) run as a leapfrog triejoin with its two level
//! refinements: expansion from the smallest range where a level's members index one trie
//! level with different ranges, and members holding the lead's range following it
//! without a search; and for each multi-way join the plan of its levels
//! ([`crate::levels`]): where each level expands from, which members are twins, which
//! search and which share a search. Disabled, multi-way joins use neither refinement.

use std::collections::HashMap;

use fox_ra::{Block, Expr, Op, TempId};

use super::{lets, readers, Pass, PhysError};
use crate::ann::Algorithm;
use crate::band::plan_band;
use crate::levels::{plan_levels, Refinements};
use crate::stats::Statistics;
use crate::PhysPlan;

pub struct JoinSelection;

impl Pass for JoinSelection {
    fn name(&self) -> &'static str {
        "join-selection"
    }

    fn decides(&self) -> &'static str {
        "the algorithm of each join: band joins where a select bounds a column by the other side's, sort-merge for other binary joins, leapfrog triejoin for multi-way joins with the plan of its levels (smallest-range expansion, twin members, shared searches)"
    }

    fn run(&self, plan: &mut PhysPlan, _stats: &Statistics) -> Result<(), PhysError> {
        let mut set = Vec::new();
        for b in &plan.ra.blocks {
            let selects = sole_select_readers(b);
            for (t, op) in lets(b) {
                let alg = match op {
                    Op::Join {
                        left,
                        right,
                        left_keys,
                        output,
                        ..
                    } if selects.contains_key(&t) => {
                        let rows = |x: &TempId| plan.node(*x).est.as_ref().map_or(1e6, |e| e.rows.max(1.0));
                        // With keys, a band join sorts one side where a merge sorts both,
                        // searches as the merge does, and writes only the pairs in the band.
                        let pays =
                            |band: &crate::Band| !left_keys.is_empty() || band_pays(band, rows(left), rows(right));
                        match plan_band(output, selects[&t]) {
                            Some(band) if pays(&band) => {
                                Algorithm::Band(keep_inner(band, !left_keys.is_empty(), rows(left), rows(right)))
                            }
                            _ => Algorithm::SortMerge,
                        }
                    }
                    Op::Join { .. } | Op::SemiJoin { .. } | Op::AntiJoin { .. } | Op::Difference { .. } => {
                        Algorithm::SortMerge
                    }
                    Op::MultiJoin {
                        vars, inputs, count, ..
                    } => {
                        let allowed = Refinements {
                            min_range: true,
                            twins: true,
                        };
                        Algorithm::Lftj {
                            min_range: allowed.min_range,
                            twins: allowed.twins,
                            // A malformed join has no level plan; the translation reports it.
                            levels: plan_levels(vars, inputs, *count, allowed).unwrap_or_default(),
                        }
                    }
                    _ => continue,
                };
                set.push((t, alg));
            }
        }
        for (t, alg) in set {
            plan.node_mut(t).algorithm = alg;
        }
        Ok(())
    }
}

/// The temps of a block read exactly once, by a select, with that select's predicate.
fn sole_select_readers(b: &Block) -> HashMap<TempId, &Expr> {
    readers(b)
        .into_iter()
        .filter_map(|(t, rs)| match rs.as_slice() {
            [Some((_, Op::Select { pred, .. }))] => Some((t, pred)),
            _ => None,
        })
        .collect()
}

/// Whether a band join costs less than the cross product and filter: sorting the
/// searched side and one search per probing row, against writing every pair (a side of a
/// row or two, such as a total to compare with, is cheaper to pair with everything).
fn band_pays(band: &crate::Band, left: f64, right: f64) -> bool {
    let (sorted, probe) = match band.sorted {
        fox_ra::Side::Left => (left, right),
        fox_ra::Side::Right => (right, left),
    };
    let log = (sorted + 2.0).log2();
    sorted * probe > 2.0 * (sorted + probe) * log
}

/// An inequality join (a band join with a second bounded column) where it pays over the
/// band join on the first column alone, else that band join. A column bounded on one side
/// only is a half-open band, whose pairs are estimated at half the pairs of equal keys:
/// the tree (n log n entries, log² n work per probing row) pays against it, with keys, or
/// without keys wherever the band pays against the cross product with the tree's extra
/// log factor. A column bounded on both sides is a window, assumed narrow: the band join
/// on it stays.
fn keep_inner(mut band: crate::Band, keyed: bool, left: f64, right: f64) -> crate::Band {
    let half_open = band.lower.is_none() || band.upper.is_none();
    let (sorted, probe) = match band.sorted {
        fox_ra::Side::Left => (left, right),
        fox_ra::Side::Right => (right, left),
    };
    let log = (sorted + 2.0).log2();
    let pays = half_open && (keyed || sorted * probe > 2.0 * (sorted + probe) * log * log);
    if !pays {
        band.inner = None;
    }
    band
}
