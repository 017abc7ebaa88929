//! `join-selection`: the algorithm of every join. A join whose only reader is a select
//! bounding a column of one side by a column of the other (plus a constant) is a band
//! join ([`crate::band`]) unless it has no keys and the estimated sizes make the cross
//! product cheaper (a side of a row or two); other binary joins, semi-joins, anti-joins and
//! differences with keys take the cheapest of sort-merge, hash, index nested-loop and
//! nested-loop joins by the cost of [`equi_join`], or the algorithm `--join` forces
//! (without keys, a cross product, they merge); multi-way joins (the cyclic bodies
//! the planner routes to one operator) run as a leapfrog triejoin with its two level
//! refinements: expansion from the smallest range where a level's members index one trie
//! level with different ranges, and members holding the lead's range following it
//! without a search; and for each multi-way join the plan of its levels
//! ([`crate::levels`]): where each level expands from, which members are twins, which
//! search and which share a search. Disabled, multi-way joins use neither refinement.

use std::collections::HashMap;

use fox_ra::{Block, Expr, Op, Side, TempId};

use super::order::{provisional, sorted_on};
use super::{lets, readers, Pass, PhysError};
use crate::ann::{Algorithm, JoinChoice};
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
        "the algorithm of each join: band joins where a select bounds a column by the other side's, sort-merge, hash, index nested-loop or nested-loop for other binary joins by cost (or --join), leapfrog triejoin for multi-way joins with the plan of its levels (smallest-range expansion, twin members, shared searches)"
    }

    fn run(&self, plan: &mut PhysPlan, stats: &Statistics) -> Result<(), PhysError> {
        let mut set = Vec::new();
        // The order of every side with every join a merge (this pass decides before
        // `order` runs): a side an earlier join of the block probes by hash may be less
        // sorted than judged, which costs a sort, never an answer.
        let orders = provisional(plan, stats);
        let types = |x: &TempId| plan.ra.temps[x.0 as usize].types();
        let sorted = |x: &TempId, keys: &[usize]| {
            orders[x.0 as usize]
                .as_ref()
                .is_some_and(|o| sorted_on(o, &types(x), keys))
        };
        let rows = |x: &TempId| plan.node(*x).est.as_ref().map_or(1e6, |e| e.rows.max(1.0));
        let side = |x: &TempId, keys: &[usize]| SideInfo {
            rows: rows(x),
            sorted: sorted(x, keys),
        };
        let looping = on_cycles(&plan.ra);
        let constant = constant_rows(&plan.ra);
        for (bi, b) in plan.ra.blocks.iter().enumerate() {
            let selects = sole_select_readers(b);
            for (t, op) in lets(b) {
                let choice = Choice {
                    forced: plan.join,
                    known_small: !looping[bi]
                        && op
                            .inputs()
                            .iter()
                            .all(|x| constant.get(x.0 as usize).copied().unwrap_or(false)),
                };
                let alg = match op {
                    Op::Join {
                        left,
                        right,
                        left_keys,
                        right_keys,
                        output,
                    } if selects.contains_key(&t) => {
                        // With keys, a band join sorts one side where a merge sorts both,
                        // searches as the merge does, and writes only the pairs in the band.
                        let pays =
                            |band: &crate::Band| !left_keys.is_empty() || band_pays(band, rows(left), rows(right));
                        match plan_band(output, selects[&t]) {
                            // Forced to a merge or a nested loop, a band join is not one.
                            Some(band)
                                if pays(&band)
                                    && !matches!(choice.forced, JoinChoice::Merge | JoinChoice::NestedLoop) =>
                            {
                                Algorithm::Band(keep_inner(band, !left_keys.is_empty(), rows(left), rows(right)))
                            }
                            _ => equi_join(
                                choice,
                                Kind::Join,
                                left_keys.len(),
                                side(left, left_keys),
                                side(right, right_keys),
                            ),
                        }
                    }
                    Op::Join {
                        left,
                        right,
                        left_keys,
                        right_keys,
                        ..
                    } => equi_join(
                        choice,
                        Kind::Join,
                        left_keys.len(),
                        side(left, left_keys),
                        side(right, right_keys),
                    ),
                    Op::SemiJoin {
                        left,
                        right,
                        left_keys,
                        right_keys,
                    }
                    | Op::AntiJoin {
                        left,
                        right,
                        left_keys,
                        right_keys,
                    } => equi_join(
                        choice,
                        Kind::Match,
                        left_keys.len(),
                        side(left, left_keys),
                        side(right, right_keys),
                    ),
                    Op::Difference { left, right } => {
                        let all: Vec<usize> = (0..plan.ra.temps[left.0 as usize].columns.len()).collect();
                        equi_join(choice, Kind::Match, all.len(), side(left, &all), side(right, &all))
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

/// Per block, whether it lies on a cycle of the CFG (a loop's body).
fn on_cycles(ra: &fox_ra::RaPlan) -> Vec<bool> {
    let succ: Vec<Vec<usize>> = ra
        .blocks
        .iter()
        .map(|b| b.term.successors().iter().map(|s| s.0 as usize).collect())
        .collect();
    (0..succ.len())
        .map(|start| {
            let mut seen = vec![false; succ.len()];
            let mut stack: Vec<usize> = succ[start].clone();
            while let Some(b) = stack.pop() {
                if b == start {
                    return true;
                }
                if b < seen.len() && !seen[b] {
                    seen[b] = true;
                    stack.extend(&succ[b]);
                }
            }
            false
        })
        .collect()
}

/// Per temp, whether its rows come from constants only: facts, what selections,
/// projections, maps, unions, duplicate removals, sorts and limits make of them, and
/// scans of relations stored only from such rows (never merged into or assigned).
fn constant_rows(ra: &fox_ra::RaPlan) -> Vec<bool> {
    use fox_ra::Stmt;
    let mut temps = vec![false; ra.temps.len()];
    let mut rels = vec![false; ra.relations.len()];
    let mut tainted = vec![false; ra.relations.len()];
    for s in ra.blocks.iter().flat_map(|b| &b.stmts) {
        match s {
            Stmt::Merge { into: r, .. } | Stmt::Assign { dst: r, .. } => tainted[r.0 as usize] = true,
            _ => {}
        }
    }
    // Each sweep can only turn more temps and relations constant; a chain of relations
    // settles within as many sweeps as it has links.
    for _ in 0..=ra.relations.len().min(8) {
        let mut stored: Vec<Option<bool>> = vec![None; ra.relations.len()];
        for s in ra.blocks.iter().flat_map(|b| &b.stmts) {
            match s {
                Stmt::Let { dst, op, .. } => {
                    let get = |t: &TempId| temps.get(t.0 as usize).copied().unwrap_or(false);
                    temps[dst.0 as usize] = match op {
                        Op::Const(_) => true,
                        Op::Scan(r) => rels.get(r.0 as usize).copied().unwrap_or(false),
                        Op::Select { input, .. }
                        | Op::Project { input, .. }
                        | Op::Map { input, .. }
                        | Op::Sort { input, .. }
                        | Op::Limit { input, .. }
                        | Op::Unique(input) => get(input),
                        Op::Union(inputs) => inputs.iter().all(get),
                        _ => false,
                    };
                }
                Stmt::Store { rel, src } => {
                    let r = rel.0 as usize;
                    let c = temps.get(src.0 as usize).copied().unwrap_or(false);
                    stored[r] = Some(stored[r].unwrap_or(true) && c);
                }
                _ => {}
            }
        }
        let next: Vec<bool> = (0..rels.len())
            .map(|r| {
                !tainted[r] && !matches!(ra.relations[r].kind, fox_ra::RelKind::Input { .. }) && stored[r] == Some(true)
            })
            .collect();
        if next == rels {
            break;
        }
        rels = next;
    }
    temps
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

/// What decides an equi-join's algorithm besides its sides: the algorithm `--join`
/// forces, and whether the sizes of both sides are known rather than guessed (rows made
/// from constants only, outside loops, whose relations grow beyond their estimates):
/// only then may the model pick a nested loop, whose cost grows with the product.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Choice {
    pub forced: JoinChoice,
    pub known_small: bool,
}

/// What the cost model knows of one side of an equi-join: its estimated rows, and whether
/// it is sorted on its keys already.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SideInfo {
    pub rows: f64,
    pub sorted: bool,
}

/// A join (pairs of rows) or a match (semi-join, anti-join, difference: the left's rows
/// with or without a match; a match builds or indexes its right side).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Join,
    Match,
}

/// The cost of one hash probe in row steps: a hash, a read of the table and one of the
/// build side's keys. A table of at most [`SHARED_TABLE_ROWS`] build rows is probed from
/// the GPU's shared memory (4 steps); a larger one from global memory with random reads:
/// measured on an H200 (`foxbench joins`, 2^20 to 2^26 probing rows against 1/16 as many
/// distinct build keys), such a probe costs about what a binary search over 2^22 keys
/// does, more than the share of a sort that a merge join pays per row (32 steps). Beyond
/// [`PARTITIONED_TABLE_ROWS`] the GPU partitions the table by the keys' hash and the
/// probing rows alike (a histogram, a scatter into partition order, a probe of each
/// partition's sub-table from shared memory, a scattered write of the result): measured
/// on an H200 (`foxbench joins --join hash`, 2^26 probing rows against 2^24 and 2^26
/// build rows), 33 steps a probing row and [`hash_build`]'s 118 a build row.
pub(crate) fn hash_probe(build_rows: f64) -> f64 {
    if build_rows <= SHARED_TABLE_ROWS {
        4.0
    } else if build_rows <= PARTITIONED_TABLE_ROWS {
        32.0
    } else {
        33.0
    }
}

/// The cost of building the hash table, per build row, after the sort: a placement with
/// one atomic compare-and-swap (2 steps), or for the partitioned table (beyond
/// [`PARTITIONED_TABLE_ROWS`]) its count of runs per partition, scan and placement of
/// each run with its key words, measured at 118 steps (see [`hash_probe`]).
pub(crate) fn hash_build(build_rows: f64) -> f64 {
    if build_rows <= PARTITIONED_TABLE_ROWS {
        2.0
    } else {
        118.0
    }
}

/// The most build rows whose table (two 4-byte slots per row at most) fits the 32 KiB the
/// GPU's probe keeps in shared memory.
pub(crate) const SHARED_TABLE_ROWS: f64 = 4096.0;

/// The most build rows whose GPU table is not partitioned: a table of 2^23 slots (the
/// power of two at least twice the rows) of 4 bytes is fox-cuda's `HASH_PARTITION_BYTES`
/// (32 MiB, a share of the 50 MB L2 of an H100); a larger one is radix-partitioned.
pub(crate) const PARTITIONED_TABLE_ROWS: f64 = 4_194_304.0;

/// A side that drives a hash join must be at least this many times the other.
pub(crate) const HASH_RATIO: f64 = 8.0;
/// Sides whose product is at most this are joined by a nested loop.
pub(crate) const NESTED_LOOP_PAIRS: f64 = 4096.0;

/// The fixed cost of one kernel launch, in row steps: what decides between algorithms on
/// sides of a few rows.
pub(crate) const LAUNCH: f64 = 1000.0;

/// The cost of sorting `s` on its keys, in row steps: `n log2 n`, none when sorted.
fn sort_cost(s: SideInfo) -> f64 {
    if s.sorted {
        0.0
    } else {
        s.rows * (s.rows + 2.0).log2()
    }
}

/// The algorithm of an equi-join of `nkeys` keys (without keys, a cross product: the
/// merge join's counting writes it) with sides `l` and `r`, forced by
/// `choice` or chosen by cost, in row steps:
/// - merge: `sort(L) + sort(R) + L + R + 3k`;
/// - hash, building `B` and probing `P`: `sort(B) + b·B + h·P + 5k` (a probe is a hash and
///   a read: `h` is 4 for a table in shared memory, 32 beyond, 33 for the partitioned
///   table of more than 2^22 build rows, [`hash_probe`]; `b` is 2, or 118 for the
///   partitioned table, [`hash_build`]), only where `P` is unsorted and
///   `B · 8 ≤ P`: a result sorted on the keys, which a merge leaves, often saves a later
///   sort, so hashing must clearly pay;
/// - index nested loop, indexing `I` and probing `P`: `sort(I) + P · log2(I + 2) + 4k` (a
///   binary search per probing row), only where `P` is unsorted and `I` is sorted or
///   `I · 8 ≤ P` (sorting the small side and searching it beats sorting both: measured
///   on an H100 with `foxbench joins`, 2^20 to 2^26 probing rows against 1/2 to 1/16 as
///   many, every match rate, Zipf keys and two keys; the same guard as hashing's keeps the
///   merge's sorted result where the sides are alike);
/// - nested loop: `L · R + 3k`, only where `L · R ≤ 4096` and both sides' rows come from
///   constants outside loops (elsewhere an estimate of a few rows is a guess, and a
///   wrong one costs the product);
///
/// where `sort(n) = n · log2(n + 2) + 2k` for an unsorted side (none for a sorted one)
/// and `k` is the fixed cost of a kernel launch ([`LAUNCH`] row steps).
///
/// The cheapest wins, a merge on ties (then index nested loop, hash, nested loop). A
/// match builds, indexes or scans its right side.
pub(crate) fn equi_join(choice: Choice, kind: Kind, nkeys: usize, l: SideInfo, r: SideInfo) -> Algorithm {
    if nkeys == 0 {
        return Algorithm::SortMerge;
    }
    let smaller = if kind == Kind::Match || r.rows <= l.rows {
        Side::Right
    } else {
        Side::Left
    };
    // A sorted side is indexed (the right one where both are); of two unsorted sides, the
    // smaller.
    let indexed = if kind == Kind::Match || r.sorted {
        Side::Right
    } else if l.sorted {
        Side::Left
    } else {
        smaller
    };
    match choice.forced {
        JoinChoice::Merge => return Algorithm::SortMerge,
        JoinChoice::Hash => return Algorithm::Hash { build: smaller },
        JoinChoice::IndexNestedLoop => return Algorithm::IndexNestedLoop { indexed },
        JoinChoice::NestedLoop => return Algorithm::NestedLoop,
        JoinChoice::Auto => {}
    }
    let pick = |s: Side| match s {
        Side::Left => (l, r),
        Side::Right => (r, l),
    };
    let sort = |s: SideInfo| sort_cost(s) + if s.sorted { 0.0 } else { 2.0 * LAUNCH };
    let mut best = (sort(l) + sort(r) + l.rows + r.rows + 3.0 * LAUNCH, Algorithm::SortMerge);
    let mut consider = |cost: f64, alg: Algorithm| {
        if cost < best.0 {
            best = (cost, alg);
        }
    };
    let (i, p) = pick(indexed);
    if !p.sorted && (i.sorted || i.rows * HASH_RATIO <= p.rows) {
        consider(
            sort(i) + p.rows * (i.rows + 2.0).log2() + 4.0 * LAUNCH,
            Algorithm::IndexNestedLoop { indexed },
        );
    }
    let (b, p) = pick(smaller);
    if !p.sorted && b.rows * HASH_RATIO <= p.rows {
        consider(
            sort(b) + hash_build(b.rows) * b.rows + hash_probe(b.rows) * p.rows + 5.0 * LAUNCH,
            Algorithm::Hash { build: smaller },
        );
    }
    if choice.known_small && l.rows * r.rows <= NESTED_LOOP_PAIRS {
        consider(l.rows * r.rows + 3.0 * LAUNCH, Algorithm::NestedLoop);
    }
    best.1
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
