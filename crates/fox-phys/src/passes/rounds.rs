//! `rounds`: which levels of a multi-way join run in windowed rounds. From the third
//! variable on, a level may expand to more rows than any input holds, so it expands a
//! window of its bindings at a time (sized by the memory budget at run time) and the
//! results accumulate; a counting join's last level is only counted and never expanded.
//! The second variable's level holds at most as many rows as an input, but everything
//! after it works per row of it (a counted last level's intersections, the next
//! level's searches), so it is windowed too where a level follows it: the boxes of the
//! first two variables' space, processed in turn, bound the whole join's working set.
//! Each windowed level records the bytes one of its expanded rows costs
//! ([`window_row_bytes`]), from the state columns the level plan says it carries.
//! Disabled, every level runs in one round.
//!
//! A binary join whose rows only an aggregation reads ([`join_aggregated_by`]) and whose
//! pairs come from an expansion ([`join_expands`]) may be written in rounds too: one
//! window of its pairs at a time (sized at run time), each aggregated through the chain
//! after it, the rounds' aggregates combined. Whether it takes more than one round is
//! decided at run time by the memory the run may still use (and a window holds at most
//! the pairs u32 row indices address).
//!
//! Such a join whose rows only a duplicate removal reads ([`join_deduplicated_by`]) is
//! written in rounds the same way: each round's rows go through the chain and are sorted
//! with their repeats dropped, and the rounds' sorted runs are merged with repeats
//! dropped, giving the rows of the `unique` of the whole in its order (same generation's
//! iteration, whose raw pairs outnumber its distinct ones many times over).
//!
//! A join without keys (a cross product) whose only reader is the select right after it
//! ([`join_filtered_by`]) and that is not a band join ([`join_filters`]) is written in
//! rounds the same way, filtered per round: each window of its pairs (a run of left rows
//! by the whole right side) goes through the select, and only the survivors of each round
//! are kept, appended in round order, so the product is never held. Such a select is
//! applied in its rounds, never deferred into a fused aggregation.

use fox_ra::{AggCall, Op, Stmt, TempId};
use fox_sema::core::{AggFunc, Type};

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
        "which levels of each multi-way join, and which binary joins read only by an aggregation, a duplicate removal or (a cross product) a select, expand in windowed rounds bounded by the memory budget, and what an expanded row of each costs"
    }

    fn run(&self, plan: &mut PhysPlan, _stats: &Statistics) -> Result<(), PhysError> {
        let mut set = Vec::new();
        let mut undeferred = Vec::new();
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
                        .map(|(v, l)| {
                            let windowed = (v == 1 && n >= 3) || (v >= 2 && !(*count && v + 1 == n));
                            windowed.then(|| window_row_bytes(l.carried, atoms))
                        })
                        .collect();
                    set.push((t, Rounds { windows }));
                }
                if let Op::Join { left_keys, .. } = op {
                    let end = join_rounds_end(&b.stmts, t, &plan.node(t).algorithm, left_keys.len())
                        .filter(|e| !matches!(e, JoinRoundsEnd::Unique(u) if chain_moves(plan, &b.stmts, t, *u)));
                    if let Some(end) = end {
                        let columns = plan.ra.temps[t.0 as usize].columns.len();
                        let bytes = match end {
                            JoinRoundsEnd::Unique(_) => join_unique_row_bytes(columns),
                            _ => join_window_row_bytes(columns),
                        };
                        let windows = vec![Some(bytes)];
                        set.push((t, Rounds { windows }));
                    }
                    if let Some(JoinRoundsEnd::Select(select)) = end {
                        undeferred.push(select);
                    }
                }
            }
        }
        for (t, r) in set {
            plan.node_mut(t).rounds = r;
        }
        // A select filtering a join's rounds is applied in them.
        for t in undeferred {
            plan.node_mut(t).deferred_into = None;
        }
        Ok(())
    }
}

/// The aggregation that alone consumes the rows of the binary join `join` of `stmts` (a
/// block's statements), if any: the statements right after the join's are a chain of
/// selects, maps and projections, each reading the one before and read by nothing else,
/// ending in an aggregation whose every aggregate combines exactly across parts of its
/// input (`count`, `sum` of integers or decimals, `min` and `max` of other than strings).
/// Such a join may be written in rounds: each round's rows go through the chain and are
/// aggregated, and the rounds' aggregates are combined, so its whole output is never held.
pub fn join_aggregated_by(stmts: &[Stmt], join: TempId) -> Option<TempId> {
    match chain_end(stmts, join)? {
        (dst, Op::Aggregate { aggs, .. }) => aggs.iter().all(combines).then_some(dst),
        _ => None,
    }
}

/// The duplicate removal that alone consumes the rows of the binary join `join` of
/// `stmts` (a block's statements), if any: the statements right after the join's are a
/// chain of selects, maps and projections, each reading the one before and read by
/// nothing else, ending in a `unique`. Such a join may be written
/// in rounds: each round's rows go through the chain and are sorted with their repeats
/// dropped, and the rounds' sorted runs are merged, repeats dropped, into what the
/// `unique` of the whole gives (the same rows in the same order), so its whole output is
/// never held.
pub fn join_deduplicated_by(stmts: &[Stmt], join: TempId) -> Option<TempId> {
    match chain_end(stmts, join)? {
        (dst, Op::Unique(_)) => Some(dst),
        _ => None,
    }
}

/// Whether rows move between devices (`moves`) before a statement after the join `join`
/// of `stmts`, up to and including `until`, reads them: such a chain exchanges rows, which
/// the devices must do together, so it is not run once per round of each device.
pub fn chain_moves(plan: &PhysPlan, stmts: &[Stmt], join: TempId, until: TempId) -> bool {
    let mut after = false;
    for s in stmts {
        let Stmt::Let { dst, .. } = s else { continue };
        if after && !plan.node(*dst).moves.is_empty() {
            return true;
        }
        if *dst == until {
            return false;
        }
        after |= *dst == join;
    }
    false
}

/// The statement ending the chain that alone reads the binary join `join` of `stmts`:
/// the statements right after the join's are selects, maps and projections, each reading
/// the one before and read by nothing else, up to the first other statement, which must
/// read the last of them (and nothing else) and be its only reader.
fn chain_end(stmts: &[Stmt], join: TempId) -> Option<(TempId, &Op)> {
    let reads = |t: TempId| reads(stmts, t);
    let at = stmts
        .iter()
        .position(|s| matches!(s, Stmt::Let { dst, op: Op::Join { .. }, .. } if *dst == join))?;
    let mut cur = join;
    for s in &stmts[at + 1..] {
        let Stmt::Let { dst, op, .. } = s else {
            return None;
        };
        if op.inputs() != [cur] || reads(cur) != 1 {
            return None;
        }
        match op {
            Op::Select { .. } | Op::Map { .. } | Op::Project { .. } => cur = *dst,
            _ => return Some((*dst, op)),
        }
    }
    None
}

/// The select that alone reads the binary join `join` of `stmts` (a block's statements),
/// if it is the statement right after the join's: a join without keys so read may be
/// written in rounds filtered by it ([`join_filters`]), each round's pairs through the
/// select and the survivors of the rounds concatenated, in the order of the whole.
pub fn join_filtered_by(stmts: &[Stmt], join: TempId) -> Option<TempId> {
    let at = stmts
        .iter()
        .position(|s| matches!(s, Stmt::Let { dst, op: Op::Join { .. }, .. } if *dst == join))?;
    match stmts.get(at + 1)? {
        Stmt::Let {
            dst,
            op: Op::Select { input, .. },
            ..
        } if *input == join && reads(stmts, join) == 1 => Some(*dst),
        _ => None,
    }
}

/// How often the statements `stmts` read temp `t`.
fn reads(stmts: &[Stmt], t: TempId) -> usize {
    stmts
        .iter()
        .map(|s| match s {
            Stmt::Let { op, .. } => op.inputs().iter().filter(|&&i| i == t).count(),
            Stmt::Store { src, .. } | Stmt::Output { src, .. } | Stmt::CheckFunctional { src, .. } => {
                usize::from(*src == t)
            }
            Stmt::Merge { .. } | Stmt::Assign { .. } | Stmt::Clear { .. } => 0,
        })
        .sum()
}

/// Where the rounds of binary join `t` (of block statements `stmts`) end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JoinRoundsEnd {
    /// At the aggregation that alone reads the join's rows ([`join_aggregated_by`]): each
    /// round aggregated, nothing of the pairs kept.
    Aggregation(TempId),
    /// At the select that alone reads a join without keys ([`join_filtered_by`]): each
    /// round's survivors kept.
    Select(TempId),
    /// At the duplicate removal that alone reads the join's rows
    /// ([`join_deduplicated_by`]): each round's rows sorted with their repeats dropped,
    /// the rounds' runs merged with repeats dropped.
    Unique(TempId),
}

/// Where the rounds of binary join `t`, lowered by `algorithm` with `keys` keys, would
/// end, if it may be written in rounds: aggregated per round where only an aggregation
/// reads its rows (a cross product too, its pairs expanded from one range per left row);
/// for a join whose pairs come from an expansion, deduplicated per round where only a
/// duplicate removal reads its rows; else, for a join without keys, filtered per round by
/// the select reading it.
pub fn join_rounds_end(stmts: &[Stmt], t: TempId, algorithm: &Algorithm, keys: usize) -> Option<JoinRoundsEnd> {
    let cross = join_filters(algorithm, keys);
    if join_expands(algorithm, keys) || cross {
        if let Some(a) = join_aggregated_by(stmts, t) {
            return Some(JoinRoundsEnd::Aggregation(a));
        }
    }
    if join_expands(algorithm, keys) {
        if let Some(u) = join_deduplicated_by(stmts, t) {
            return Some(JoinRoundsEnd::Unique(u));
        }
    }
    if cross {
        return join_filtered_by(stmts, t).map(JoinRoundsEnd::Select);
    }
    None
}

/// Whether a binary join lowered by `algorithm` with `keys` keys is a cross product that
/// may be written in rounds filtered by the select reading it ([`join_filtered_by`]): a
/// join without keys that is not a band join (whose pairs already come from an expansion).
pub fn join_filters(algorithm: &Algorithm, keys: usize) -> bool {
    keys == 0 && matches!(algorithm, Algorithm::SortMerge | Algorithm::Direct)
}

/// Whether an aggregate of the parts of its input, aggregated again, is the aggregate of
/// the whole, exactly.
fn combines(a: &AggCall) -> bool {
    match a.func {
        AggFunc::Count => true,
        AggFunc::Sum => !matches!(a.ty, Type::Float64),
        AggFunc::Min | AggFunc::Max => !matches!(a.arg.as_ref().map(|e| e.ty), Some(Type::String)),
        AggFunc::Avg => false,
    }
}

/// What one output row of a binary join written in rounds costs while its round runs:
/// the expansion's two row indices and the gathered columns (at most 8 bytes each), twice
/// for what the chain to the aggregation copies, and a filter flag.
pub fn join_window_row_bytes(columns: usize) -> u64 {
    2 * (8 + 8 * columns as u64 + 1)
}

/// What one output row of a binary join written in rounds up to a duplicate removal
/// costs while its round runs: what [`join_window_row_bytes`] counts, and the sort of the
/// round's rows (a permutation and a sorted copy of the columns, at most 8 bytes each,
/// twice for the sort's scratch).
pub fn join_unique_row_bytes(columns: usize) -> u64 {
    join_window_row_bytes(columns) + 2 * (8 + 8 * columns as u64)
}

/// Whether a binary join lowered by `algorithm` can be written in rounds: its pairs come
/// from an expansion of per-row ranges (every algorithm but the nested loop and a merge
/// without keys).
pub fn join_expands(algorithm: &Algorithm, keys: usize) -> bool {
    match algorithm {
        Algorithm::Band(_) | Algorithm::Hash { .. } | Algorithm::IndexNestedLoop { .. } => true,
        Algorithm::SortMerge | Algorithm::Direct => keys > 0,
        _ => false,
    }
}
