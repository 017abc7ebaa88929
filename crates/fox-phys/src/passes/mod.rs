//! The physical passes, in the order they run. Each is one file, named by what it
//! decides, with its own tests (`tests/it/<pass>.rs`).
//!
//! Order: `estimate` first, since later passes may read estimates; `join-selection`
//! before `fusion` and `rounds`, which refine the algorithms it chose; `order` after
//! `fusion`, since a deferred select and a fused aggregation change what order a result
//! has (and `order` keeps a fused aggregation only where its input is not sorted on its
//! keys already); `partitioning` after every algorithm is known; `tiering` (relations,
//! not operators) anywhere before `verify`; `verify` last, to check
//! the invariants every pass must leave.

mod estimate;
mod fusion;
pub(crate) mod join_selection;
pub(crate) mod order;
mod partitioning;
mod rounds;
pub use partitioning::{boxed_listing_placement, BOXES_PER_DEVICE};
pub use rounds::{join_rounds_end, join_unique_row_bytes, join_window_row_bytes, JoinRoundsEnd};
mod tiering;
mod verify;

use std::collections::HashMap;

use fox_ra::RaPlan;

use crate::stats::Statistics;
use crate::PhysPlan;

/// One physical pass: it reads the plan and the annotations of the passes before it and
/// sets its own annotations; it never changes the RA plan.
pub trait Pass: Sync {
    /// The name `--disable-pass` and `--after-pass` take.
    fn name(&self) -> &'static str;
    /// One line on what the pass decides, for `foxc compile --list-passes`.
    fn decides(&self) -> &'static str;
    fn run(&self, plan: &mut PhysPlan, stats: &Statistics) -> Result<(), PhysError>;
}

/// The passes, in the order they run.
pub static PASSES: &[&dyn Pass] = &[
    &estimate::Estimate,
    &join_selection::JoinSelection,
    &fusion::Fusion,
    &partitioning::PartitioningPass,
    &order::OrderPass,
    &rounds::RoundsPass,
    &tiering::TieringPass,
    &verify::Verify,
];

/// The names of the passes, in order.
pub fn pass_names() -> Vec<&'static str> {
    PASSES.iter().map(|p| p.name()).collect()
}

/// Which passes run.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Passes left out, by name.
    pub disabled: Vec<String>,
    /// Stop after this pass (the passes after it do not run).
    pub stop_after: Option<String>,
    /// The algorithm of every equi-join (`--join`): `Auto` lets `join-selection` choose.
    pub join: crate::ann::JoinChoice,
    /// The devices the plan runs over (`--devices`); 0 is read as 1. With more than one,
    /// `partitioning` places each result's rows over them and the exchanges between.
    pub devices: usize,
}

impl Options {
    /// An error for every name that is not a pass.
    pub fn check(&self) -> Result<(), PhysError> {
        for name in self.disabled.iter().chain(&self.stop_after) {
            if !PASSES.iter().any(|p| p.name() == name) {
                return Err(PhysError::UnknownPass {
                    name: name.clone(),
                    known: pass_names().join(", "),
                });
            }
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PhysError {
    #[error("there is no physical pass `{name}` (the passes: {known})")]
    UnknownPass { name: String, known: String },
    /// An annotation breaks an invariant of the physical plan.
    #[error("the physical plan is inconsistent after pass `{pass}`: {msg}")]
    Invalid { pass: &'static str, msg: String },
}

/// Runs the passes over `ra` with the statistics `stats`, as `opts` says.
pub fn run(ra: RaPlan, stats: &Statistics, opts: &Options) -> Result<PhysPlan, PhysError> {
    opts.check()?;
    let mut plan = PhysPlan::unannotated(ra);
    plan.join = opts.join;
    plan.devices = opts.devices.max(1);
    for pass in PASSES {
        if !opts.disabled.iter().any(|d| d == pass.name()) {
            pass.run(&mut plan, stats)?;
            plan.ran.push(pass.name());
        }
        if opts.stop_after.as_deref() == Some(pass.name()) {
            break;
        }
    }
    Ok(plan)
}

/// Who reads each temp of a block: one entry per read (an operator reading a temp twice
/// counts twice), `Some((dst, op))` for an operator, `None` for a statement that is no
/// operator (a store, an output, a functional check).
pub(crate) type Readers<'a> = HashMap<fox_ra::TempId, Vec<Option<(fox_ra::TempId, &'a fox_ra::Op)>>>;

pub(crate) fn readers(b: &fox_ra::Block) -> Readers<'_> {
    let mut readers: Readers = HashMap::new();
    for s in &b.stmts {
        match s {
            fox_ra::Stmt::Let { dst, op, .. } => {
                for t in op.inputs() {
                    readers.entry(t).or_default().push(Some((*dst, op)));
                }
            }
            fox_ra::Stmt::Store { src, .. }
            | fox_ra::Stmt::Output { src, .. }
            | fox_ra::Stmt::CheckFunctional { src, .. } => {
                readers.entry(*src).or_default().push(None);
            }
            _ => {}
        }
    }
    readers
}

/// The `Let` statements of a block with the temps they define, in order.
pub(crate) fn lets(b: &fox_ra::Block) -> impl Iterator<Item = (fox_ra::TempId, &fox_ra::Op)> {
    b.stmts.iter().filter_map(|s| match s {
        fox_ra::Stmt::Let { dst, op, .. } => Some((*dst, op)),
        _ => None,
    })
}
