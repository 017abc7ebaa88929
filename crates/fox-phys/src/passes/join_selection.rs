//! `join-selection`: the algorithm of every join. Binary joins, semi-joins, anti-joins and
//! differences merge their sides sorted on the keys; multi-way joins (the cyclic bodies
//! the planner routes to one operator) run as a leapfrog triejoin with its two level
//! refinements: expansion from the smallest range where a level's members index one trie
//! level with different ranges, and members holding the lead's range following it
//! without a search; and for each multi-way join the plan of its levels
//! ([`crate::levels`]): where each level expands from, which members are twins, which
//! search and which share a search. Disabled, multi-way joins use neither refinement.

use fox_ra::Op;

use super::{lets, Pass, PhysError};
use crate::ann::Algorithm;
use crate::levels::{plan_levels, Refinements};
use crate::stats::Statistics;
use crate::PhysPlan;

pub struct JoinSelection;

impl Pass for JoinSelection {
    fn name(&self) -> &'static str {
        "join-selection"
    }

    fn decides(&self) -> &'static str {
        "the algorithm of each join: sort-merge for binary joins, leapfrog triejoin for multi-way joins with the plan of its levels (smallest-range expansion, twin members, shared searches)"
    }

    fn run(&self, plan: &mut PhysPlan, _stats: &Statistics) -> Result<(), PhysError> {
        let mut set = Vec::new();
        for b in &plan.ra.blocks {
            for (t, op) in lets(b) {
                let alg = match op {
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
