//! `tiering`: how the full relation of each recursive predicate is kept while its loop
//! runs ([`Tiering`]). A semi-naive loop merges each iteration's new rows into the full
//! relation; merged in place, every iteration copies the whole relation, which is
//! quadratic in the number of iterations (hundreds on road networks). Kept as the
//! relation plus a few runs of geometric sizes, a row is copied a logarithmic number of
//! times. Disabled, each merge rewrites the relation.

use super::{Pass, PhysError};
use crate::ann::Tiering;
use crate::stats::Statistics;
use crate::PhysPlan;

/// Runs below the relation, and how much smaller than the next a run stays before it
/// folds into it. Three runs folding at half the next copy a row about ten times over a
/// loop of a few hundred iterations of equal deltas (against one copy per iteration
/// when merged in place), and no more than in place when each delta outgrows the
/// relation (each fold of an empty run shares buffers rather than copying).
pub const LEVELS: usize = 3;
pub const FACTOR: u32 = 2;

pub struct TieringPass;

impl Pass for TieringPass {
    fn name(&self) -> &'static str {
        "tiering"
    }

    fn decides(&self) -> &'static str {
        "how the full relation of each recursive predicate is kept in its loop: the relation plus sorted runs of geometric sizes, folded lazily, so that an iteration does not copy the whole relation"
    }

    fn run(&self, plan: &mut PhysPlan, _stats: &Statistics) -> Result<(), PhysError> {
        for b in &plan.ra.blocks {
            for s in &b.stmts {
                if let fox_ra::Stmt::Merge { into, .. } = s {
                    let r = &plan.ra.relations[into.0 as usize];
                    if !r.columns.is_empty() {
                        plan.tiers[into.0 as usize] = Some(Tiering {
                            levels: LEVELS,
                            factor: FACTOR,
                        });
                    }
                }
            }
        }
        Ok(())
    }
}
