//! `partitioning`: how each operator's result is distributed over devices. With one
//! device every result is whole on it (`single`); the pass is where hash partitioning
//! and the exchanges between devices will be placed.

use super::{lets, Pass, PhysError};
use crate::ann::Partitioning;
use crate::stats::Statistics;
use crate::PhysPlan;

pub struct PartitioningPass;

impl Pass for PartitioningPass {
    fn name(&self) -> &'static str {
        "partitioning"
    }

    fn decides(&self) -> &'static str {
        "how each result is distributed over devices (one device: single)"
    }

    fn run(&self, plan: &mut PhysPlan, _stats: &Statistics) -> Result<(), PhysError> {
        let temps: Vec<_> = plan.ra.blocks.iter().flat_map(|b| lets(b).map(|(t, _)| t)).collect();
        for t in temps {
            plan.node_mut(t).partitioning = Partitioning::Single;
        }
        Ok(())
    }
}
