//! `rounds`: which levels of a multi-way join run in windowed rounds. From the third
//! variable on, a level may expand to more rows than any input holds, so it expands a
//! window of its bindings at a time (sized by the memory budget at run time) and the
//! results accumulate; a counting join's last level is only counted and never expanded.
//! Each windowed level records the bytes one of its expanded rows costs
//! ([`window_row_bytes`]), from the state columns the level plan says it carries.
//! Disabled, every level runs in one round.

use fox_ra::Op;

use super::{lets, Pass, PhysError};
use crate::ann::{Algorithm, Rounds};
use crate::levels::{plan_levels, window_row_bytes, Refinements};
use crate::stats::Statistics;
use crate::PhysPlan;

pub struct RoundsPass;

impl Pass for RoundsPass {
    fn name(&self) -> &'static str {
        "rounds"
    }

    fn decides(&self) -> &'static str {
        "which levels of each multi-way join expand in windowed rounds bounded by the memory budget, and what an expanded row of each costs"
    }

    fn run(&self, plan: &mut PhysPlan, _stats: &Statistics) -> Result<(), PhysError> {
        let mut set = Vec::new();
        for b in &plan.ra.blocks {
            for (t, op) in lets(b) {
                if let Op::MultiJoin {
                    vars, inputs, count, ..
                } = op
                {
                    let n = vars.len();
                    let atoms = inputs.iter().filter(|i| !i.vars.is_empty()).count();
                    // The state columns each level carries, from the level plan of
                    // `join-selection`, or without one the plan with no refinement (the
                    // state does not depend on the refinements).
                    let levels = match &plan.node(t).algorithm {
                        Algorithm::Lftj { levels, .. } if !levels.is_empty() => levels.clone(),
                        _ => match plan_levels(vars, inputs, *count, Refinements::default()) {
                            Ok(levels) => levels,
                            // A malformed join: the translation reports it.
                            Err(_) => continue,
                        },
                    };
                    let windows = levels
                        .iter()
                        .enumerate()
                        .map(|(v, l)| (v >= 2 && !(*count && v + 1 == n)).then(|| window_row_bytes(l.carried, atoms)))
                        .collect();
                    set.push((t, Rounds { windows }));
                }
            }
        }
        for (t, r) in set {
            plan.node_mut(t).rounds = r;
        }
        Ok(())
    }
}
