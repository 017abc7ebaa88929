//! `rounds`: which levels of a multi-way join run in windowed rounds. From the third
//! variable on, a level may expand to more rows than any input holds, so it expands a
//! window of its bindings at a time (sized by the memory budget at run time) and the
//! results accumulate; a counting join's last level is only counted and never expanded.
//! Disabled, every level runs in one round.

use fox_ra::Op;

use super::{lets, Pass, PhysError};
use crate::ann::Rounds;
use crate::stats::Statistics;
use crate::PhysPlan;

pub struct RoundsPass;

impl Pass for RoundsPass {
    fn name(&self) -> &'static str {
        "rounds"
    }

    fn decides(&self) -> &'static str {
        "which levels of each multi-way join expand in windowed rounds bounded by the memory budget"
    }

    fn run(&self, plan: &mut PhysPlan, _stats: &Statistics) -> Result<(), PhysError> {
        let mut set = Vec::new();
        for b in &plan.ra.blocks {
            for (t, op) in lets(b) {
                if let Op::MultiJoin { vars, count, .. } = op {
                    let n = vars.len();
                    let windowed = (0..n).map(|v| v >= 2 && !(*count && v + 1 == n)).collect();
                    set.push((t, Rounds { windowed }));
                }
            }
        }
        for (t, r) in set {
            plan.node_mut(t).rounds = r;
        }
        Ok(())
    }
}
