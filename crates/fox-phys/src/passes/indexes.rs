//! `indexes`: secondary orders ("indexes") of the relations loops merge into. A relation
//! is sorted on its columns in order, so a join that meets its full relation on a column
//! set that is not a prefix of that order (CSPA's `valueFlow(z, x), memoryAlias(z, w),
//! Δ valueFlow(w, y)`, which meets `memoryAlias` on its second column) must either sort
//! the whole relation or search every one of its rows in the other side, in every
//! iteration. Such a join in the block that merges into the relation, whose other side
//! comes from a delta (a scan of a `delta` relation, through selects, projections, maps,
//! joins, …), reads the relation through an index sorted on the join's keys first: the
//! relation's rows sorted so, kept beside it in runs of the relation's tiering (each
//! merge's new rows sorted on the index's order and merged into the first run, runs
//! folding geometrically), and the join searches each run and the rest for the other
//! side's rows (`IndexRead`).
//!
//! The cost per iteration: the index is a sort of the merged rows and, amortised, a
//! logarithmic number of copies of each row; the join searches the other side's rows in
//! each part instead of touching all of the relation's. Summed over a semi-naive loop
//! the deltas hold each row of the final relations once, while the relation is read once
//! per iteration, so the index wins by about the number of iterations. The choice is
//! structural: the estimates cannot make it, since `estimate` gives a delta the rows of
//! its relation (the largest stored into it). The memory cost is a second copy of the
//! relation while its loop runs.
//!
//! The join's algorithm becomes a merge where the other side is sorted on its keys
//! (the index's key order then follows that sort, so nothing is sorted but what the
//! merge needs), else an index nested-loop join indexing the relation's side; with
//! `--join merge` or `--join inl`, the one forced. Joins forced to hash or nested loop
//! (`--join hash`, `--join nl`), band joins, joins without keys, joins whose relation
//! side moves between devices, and keys that repeat a column of the relation keep their
//! sides. Disabled, no relation has an index.

use std::collections::HashSet;

use fox_ra::{Block, Op, RelId, RelKind, Side, Stmt, TempId};

use super::order::{provisional, sorted_on};
use super::{Pass, PhysError};
use crate::ann::{Algorithm, IndexRead, JoinChoice};
use crate::stats::Statistics;
use crate::PhysPlan;

pub struct IndexesPass;

impl Pass for IndexesPass {
    fn name(&self) -> &'static str {
        "indexes"
    }

    fn decides(&self) -> &'static str {
        "secondary indexes of recursive relations: a join in a loop that meets the relation the loop merges into on columns that are no prefix of its order, with a delta on the other side, reads it through an index sorted on the keys and kept in runs, searched per row of the delta's side instead of touching every row of the relation"
    }

    fn run(&self, plan: &mut PhysPlan, stats: &Statistics) -> Result<(), PhysError> {
        if matches!(plan.join, JoinChoice::Hash | JoinChoice::NestedLoop) {
            return Ok(());
        }
        let orders = provisional(plan, stats);
        let mut reads: Vec<(TempId, IndexRead, Algorithm)> = Vec::new();
        let mut indexes = plan.indexes.clone();
        for b in &plan.ra.blocks {
            let merged: HashSet<RelId> = b
                .stmts
                .iter()
                .filter_map(|s| match s {
                    Stmt::Merge { into, .. } => Some(*into),
                    _ => None,
                })
                .collect();
            if merged.is_empty() {
                continue;
            }
            let delta = from_delta(plan, b);
            for (at, s) in b.stmts.iter().enumerate() {
                let Stmt::Let {
                    dst,
                    op:
                        Op::Join {
                            left,
                            right,
                            left_keys,
                            right_keys,
                            ..
                        },
                    ..
                } = s
                else {
                    continue;
                };
                let n = plan.node(*dst);
                if left_keys.is_empty() || matches!(n.algorithm, Algorithm::Band(_)) || left == right {
                    continue;
                }
                for (side, (t, keys), (other, other_keys), input) in [
                    (Side::Right, (*right, right_keys), (*left, left_keys), 1),
                    (Side::Left, (*left, left_keys), (*right, right_keys), 0),
                ] {
                    let Some((scanned_at, rel)) = scan_of(&b.stmts[..at], t) else {
                        continue;
                    };
                    let types = plan.ra.temps[t.0 as usize].types();
                    let sorted = |x: TempId, k: &[usize], types: &[fox_sema::core::Type]| {
                        orders[x.0 as usize].as_ref().is_some_and(|o| sorted_on(o, types, k))
                    };
                    let distinct: HashSet<usize> = keys.iter().copied().collect();
                    let usable = merged.contains(&rel)
                        && !types.is_empty()
                        && distinct.len() == keys.len()
                        && !sorted(t, keys, &types)
                        && delta.contains(&other)
                        && !n.moves.iter().any(|(i, _)| *i == input)
                        && !b.stmts[scanned_at + 1..at].iter().any(|s| writes(s, rel));
                    if !usable {
                        continue;
                    }
                    // The keys in the order the other side is sorted on them, where it
                    // is (a merge then sorts nothing), else as the join lists them.
                    let other_types = plan.ra.temps[other.0 as usize].types();
                    let other_sorted = sorted(other, other_keys, &other_types);
                    let mut cols: Vec<usize> = Vec::with_capacity(types.len());
                    if other_sorted {
                        let o = orders[other.0 as usize]
                            .as_ref()
                            .map(|o| o.code_sorted(&other_types).to_vec());
                        for k in o.unwrap_or_default().iter().take(other_keys.len()) {
                            if let Some(p) = other_keys.iter().position(|&c| c == k.col) {
                                cols.push(keys[p]);
                            }
                        }
                    }
                    if cols.len() != keys.len() {
                        cols = keys.clone();
                    }
                    cols.extend((0..types.len()).filter(|c| !distinct.contains(c)));
                    let list = &mut indexes[rel.0 as usize];
                    let index = match list.iter().position(|c| *c == cols) {
                        Some(i) => i,
                        None => {
                            list.push(cols);
                            list.len() - 1
                        }
                    };
                    let algorithm = match plan.join {
                        JoinChoice::Merge => Algorithm::SortMerge,
                        JoinChoice::IndexNestedLoop => Algorithm::IndexNestedLoop { indexed: side },
                        _ if other_sorted => Algorithm::SortMerge,
                        _ => Algorithm::IndexNestedLoop { indexed: side },
                    };
                    reads.push((*dst, IndexRead { side, rel, index }, algorithm));
                    break;
                }
            }
        }
        plan.indexes = indexes;
        for (t, read, algorithm) in reads {
            let n = plan.node_mut(t);
            n.index = Some(read);
            n.algorithm = algorithm;
        }
        Ok(())
    }
}

/// The relation `t` scans and the position of the scan, if a statement of `stmts`
/// defines `t` as a scan.
pub(crate) fn scan_of(stmts: &[Stmt], t: TempId) -> Option<(usize, RelId)> {
    stmts.iter().enumerate().rev().find_map(|(i, s)| match s {
        Stmt::Let {
            dst, op: Op::Scan(r), ..
        } if *dst == t => Some((i, *r)),
        _ => None,
    })
}

/// Whether statement `s` writes relation `r`.
pub(crate) fn writes(s: &Stmt, r: RelId) -> bool {
    match s {
        Stmt::Store { rel, .. } | Stmt::Clear { rel } => *rel == r,
        Stmt::Merge { into, .. } => *into == r,
        Stmt::Assign { dst, .. } => *dst == r,
        _ => false,
    }
}

/// The temps of block `b` whose rows come from a delta: a scan of a `delta` relation,
/// and what selects, projections, maps, sorts, limits, duplicate removals, unions of
/// such rows only, joins with such a side and matches of such a left side make of them.
fn from_delta(plan: &PhysPlan, b: &Block) -> HashSet<TempId> {
    let mut out = HashSet::new();
    for s in &b.stmts {
        let Stmt::Let { dst, op, .. } = s else {
            continue;
        };
        let has = |t: &TempId| out.contains(t);
        let d = match op {
            Op::Scan(r) => matches!(plan.ra.relations[r.0 as usize].kind, RelKind::Delta { .. }),
            Op::Select { input, .. }
            | Op::Project { input, .. }
            | Op::Map { input, .. }
            | Op::Sort { input, .. }
            | Op::Limit { input, .. }
            | Op::Unique(input) => has(input),
            Op::Union(inputs) => !inputs.is_empty() && inputs.iter().all(has),
            Op::Join { left, right, .. } => has(left) || has(right),
            Op::SemiJoin { left, .. } | Op::AntiJoin { left, .. } | Op::Difference { left, .. } => has(left),
            Op::MultiJoin { inputs, .. } => inputs.iter().any(|i| has(&i.src)),
            Op::Const(_) | Op::Aggregate { .. } => false,
        };
        if d {
            out.insert(*dst);
        }
    }
    out
}
