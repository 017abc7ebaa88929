//! `partitioning`: how each result and each relation variable is distributed over the
//! devices of a run over several (`Options::devices`), and the rows that move between
//! devices (exchanges) so that every operator sees what it needs on one device.
//!
//! With one device every result is `Single` and nothing moves. With `n` devices:
//! - Relation variables (`PhysPlan::rel_partitioning`): the relations one loop merges
//!   or assigns into each other (a predicate with its `delta` and `new`) share one
//!   partitioning. Each class is hashed on the key columns that weigh most among the
//!   joins and matches reading it (through selects, projections and maps that keep the
//!   columns), a read inside a loop weighing 1000 times one outside, a functional
//!   check on its key columns most; without such a read a derived relation is hashed on
//!   all its columns, an input is split as loaded (slices of its rows; hashed when a
//!   read asks for it: the exchange then runs once, after loading), facts are
//!   replicated, and a relation without columns is on device 0. A derived or temporary
//!   relation without such a read that one statement outside loops stores, and no loop
//!   merges or assigns, is then placed as its producer leaves the stored rows
//!   (`follow_producers`): hashed on the columns they are hashed on (a subset of its
//!   columns places equal rows together, as its duplicate removal needs), split, or on
//!   device 0, so the store moves nothing (an output gathers every device's part
//!   anyway). Where its producer moves the rows to hash them on all columns (a duplicate
//!   removal of rows placed by no key) or leaves them replicated, it is hashed instead on
//!   the columns every duplicate removal and grouped aggregation reading it keeps
//!   (`kept_columns`; all columns when none), so those find its rows placed. Then each input that only its load writes is placed by the rows the whole
//!   plan moves (`place_inputs`), trying it split, hashed on each key its readers meet on
//!   (`hash_candidates`: the keys of its joins' sides and its aggregations' groups, traced
//!   back through the columns selects, projections, maps, joins, matches and
//!   aggregations carry, so that a join of an intermediate result on its key counts;
//!   each single column of a multi-column key; the columns a later store, check or match
//!   wants of its rows) and, when only multi-way joins read it (which would broadcast it
//!   to every device, then sort the received rows again), replicated, and keeping the
//!   first placement that moves the fewest rows (the relations placed by their producer
//!   placed again for each). A hash or a gather moves the `(n - 1) / n` of its rows that
//!   leave their device, a broadcast its rows once per other device.
//!   Hashed and replicated inputs move no row between devices: each device loads from
//!   the host the rows whose key hashes to it, or every row.
//! - Per operator (the rules): a scan has its relation's partitioning, constants are
//!   replicated; selects, maps and projections keep their input's (a hash on columns
//!   they drop becomes a split). A join, semi-join, anti-join or difference needs both
//!   sides hashed on corresponding keys, or one side replicated (its result is then
//!   distributed as the other side): of moving the left side, the right, both, or
//!   broadcasting the right (or for a join the smaller) side, the cheapest in rows moved
//!   is taken (a hash costs the rows that leave their device, a broadcast its rows once
//!   per other device); joins without keys
//!   broadcast their smaller side. A union of inputs distributed alike is distributed
//!   so; otherwise each row stays where it is (replicated inputs keep their share).
//!   Duplicate removal and aggregation need rows equal on their keys on one device:
//!   hashed on the columns a later store, check or match wants (`desired`), else kept
//!   where they are when hashed on a subset of the columns (group columns) or on one
//!   device, else hashed on all columns (group columns); an aggregation without groups,
//!   a sort and a limit gather
//!   to device 0. An aggregation whose aggregates combine exactly aggregates on each
//!   device first and moves only its partial rows (`Node::partial`). A multi-way join replicates its inputs and cuts its
//!   work into boxes of the first variable's bindings that the devices take in turn
//!   (`Node::boxes`); a listing's rows then move by the first variable
//!   (`boxed_listing_placement`). A store into a relation distributed
//!   otherwise moves its rows (`PhysPlan::stmt_moves`), and so does a functional check
//!   whose rows are not placed by their key.
//! - Invariant: each operator's result, as the rules say, is what the translation's
//!   exchanges produce; every result that is not `Replicated` has each of its rows on
//!   exactly one device, so the devices' outputs together are the result.

use std::collections::HashMap;

use fox_ra::{Block, BlockId, Expr, ExprKind, JoinCol, Op, RaPlan, RelId, RelKind, Side, Stmt, TempId};
use fox_sema::core::{AggFunc, Type};

use super::{Pass, PhysError};
use crate::ann::{Partitioning, Redistribute};
use crate::stats::Statistics;
use crate::PhysPlan;

pub struct PartitioningPass;

impl Pass for PartitioningPass {
    fn name(&self) -> &'static str {
        "partitioning"
    }

    fn decides(&self) -> &'static str {
        "how each result and relation is distributed over devices (one device: single), and the exchanges between them"
    }

    fn run(&self, plan: &mut PhysPlan, stats: &Statistics) -> Result<(), PhysError> {
        let n = plan.devices.max(1);
        if n == 1 {
            for node in &mut plan.nodes {
                node.partitioning = Partitioning::Single;
                node.moves.clear();
                node.boxes = 0;
                node.partial = None;
            }
            plan.rel_partitioning = vec![Partitioning::Single; plan.ra.relations.len()];
            plan.stmt_moves.clear();
            return Ok(());
        }
        let (parts, unvoted) = relation_partitionings(plan, n);
        plan.rel_partitioning = parts;
        let followers = producer_placed(plan, &unvoted);
        follow_producers(plan, n, &followers);
        place_inputs(plan, n, &followers, stats);
        let decided: Vec<Decided> = plan.ra.blocks.iter().map(|b| block(plan, b, n)).collect();
        plan.stmt_moves.clear();
        for (bi, d) in decided.into_iter().enumerate() {
            for (t, part, moves, boxes, partial) in d.nodes {
                let node = plan.node_mut(t);
                node.partitioning = part;
                node.moves = moves;
                node.boxes = boxes;
                node.partial = partial;
            }
            for (si, mv) in d.stmt_moves {
                plan.stmt_moves.insert((bi as u32, si), mv);
            }
        }
        Ok(())
    }
}

/// One operator's decisions: its result's partitioning, its inputs' moves, the boxes
/// its work is cut into (`Node::boxes`), its partial aggregation.
type NodeDecision = (
    TempId,
    Partitioning,
    Vec<(usize, Redistribute)>,
    u32,
    Option<Redistribute>,
);

/// Where the rows of a multi-way join listed over several devices in boxes end up: they
/// are found on whichever device took their box, which depends on timing, so the join
/// then moves them by the first variable (by every column where it is not output; to
/// device 0 without columns) and sorts them in the order of its variables, so that
/// each device holds what the same rule would place there by a key, in one order, and
/// nothing after the join depends on timing.
pub fn boxed_listing_placement(output: &[usize], n: usize) -> Partitioning {
    match pos(output, 0) {
        Some(c) => Partitioning::Hash {
            cols: vec![c],
            parts: n,
        },
        None if output.is_empty() => Partitioning::Single,
        None => Partitioning::Hash {
            cols: (0..output.len()).collect(),
            parts: n,
        },
    }
}

/// The finest cut of a multi-way join's work over several devices, per device: its
/// smallest boxes hold `1 / (BOXES_PER_DEVICE · devices)` of the work, so that a device
/// whose boxes are heavy (a hub's bindings) takes fewer and the others take the rest,
/// and the last boxes taken leave the others idle for little time (a box weighs its
/// first variable's bindings by the rows they expand to, while their work grows faster
/// than that with a hub's degree). The boxes taken first are much larger (the runtime
/// halves what is left in each batch of one box per device), since every box costs
/// its launches' fixed costs and tails (tens of launches, a host synchronisation or
/// two).
pub const BOXES_PER_DEVICE: u32 = 64;

/// The decisions for one block.
struct Decided {
    nodes: Vec<NodeDecision>,
    stmt_moves: Vec<(usize, Redistribute)>,
}

/// Union-find over relation ids.
fn find(parent: &mut [usize], mut x: usize) -> usize {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

/// Blocks on a cycle of the control flow (loop bodies and tests).
fn looping_blocks(ra: &RaPlan) -> Vec<bool> {
    let nb = ra.blocks.len();
    let succ: Vec<Vec<usize>> = ra
        .blocks
        .iter()
        .map(|b| b.term.successors().iter().map(|s: &BlockId| s.0 as usize).collect())
        .collect();
    (0..nb)
        .map(|start| {
            let mut seen = vec![false; nb];
            let mut stack: Vec<usize> = succ[start].clone();
            while let Some(x) = stack.pop() {
                if x == start {
                    return true;
                }
                if x < nb && !seen[x] {
                    seen[x] = true;
                    stack.extend(succ[x].iter().copied());
                }
            }
            false
        })
        .collect()
}

/// The columns of `rel` that column `c` of temp `t` holds, following selects, duplicate
/// removals, projections and maps that copy a column back to a scan of `rel`.
fn trace_col(defs: &HashMap<TempId, &Op>, t: TempId, c: usize) -> Option<(RelId, usize)> {
    trace(defs, t, c, false)
}

/// The column of `rel` that column `c` of temp `t` holds, as `trace_col` finds it, and
/// also through the operators whose result carries an input's column unchanged: a join's
/// output column back to its side, a semi-join's, anti-join's or difference's to its
/// left, an aggregation's group column to its input, a sort's or limit's to its input.
fn trace_col_through(defs: &HashMap<TempId, &Op>, t: TempId, c: usize) -> Option<(RelId, usize)> {
    trace(defs, t, c, true)
}

/// `trace_col` (`through` false) and `trace_col_through` (`through` true).
fn trace(defs: &HashMap<TempId, &Op>, mut t: TempId, mut c: usize, through: bool) -> Option<(RelId, usize)> {
    loop {
        match defs.get(&t)? {
            Op::Scan(r) => return Some((*r, c)),
            Op::Select { input, .. } | Op::Unique(input) => t = *input,
            Op::Project { input, cols } => {
                c = *cols.get(c)?;
                t = *input;
            }
            Op::Map { input, exprs } => match exprs.get(c)?.kind {
                ExprKind::Col(i) => {
                    c = i;
                    t = *input;
                }
                _ => return None,
            },
            _ if !through => return None,
            Op::Sort { input, .. } | Op::Limit { input, .. } => t = *input,
            Op::SemiJoin { left, .. } | Op::AntiJoin { left, .. } | Op::Difference { left, .. } => t = *left,
            Op::Join {
                left, right, output, ..
            } => {
                let o = output.get(c)?;
                c = o.col;
                t = match o.side {
                    Side::Left => *left,
                    Side::Right => *right,
                };
            }
            Op::Aggregate { input, group, .. } => {
                c = *group.get(c)?;
                t = *input;
            }
            _ => return None,
        }
    }
}

/// Votes `weight` for hashing the relation that the columns `keys` of temp `t` come from
/// (through `trace_col`) on those columns, when they all come from one relation.
fn vote(
    votes: &mut HashMap<usize, Vec<(Vec<usize>, f64)>>,
    parent: &mut [usize],
    defs: &HashMap<TempId, &Op>,
    t: TempId,
    keys: &[usize],
    weight: f64,
) {
    let Some(traced) = keys.iter().map(|&k| trace_col(defs, t, k)).collect::<Option<Vec<_>>>() else {
        return;
    };
    let r = traced[0].0;
    if traced.iter().all(|(x, _)| *x == r) {
        let cols: Vec<usize> = traced.iter().map(|(_, c)| *c).collect();
        votes
            .entry(find(parent, r.0 as usize))
            .or_default()
            .push((cols, weight));
    }
}

/// Each relation's partitioning by the votes, and whether it is a derived relation that
/// no read voted for (hashed on all its columns by default).
fn relation_partitionings(plan: &PhysPlan, n: usize) -> (Vec<Partitioning>, Vec<bool>) {
    let ra = &plan.ra;
    let nr = ra.relations.len();
    let mut parent: Vec<usize> = (0..nr).collect();
    let union = |parent: &mut Vec<usize>, a: usize, b: usize| {
        let (ra_, rb) = (find(parent, a), find(parent, b));
        if ra_ != rb {
            parent[ra_.max(rb)] = ra_.min(rb);
        }
    };
    for (i, r) in ra.relations.iter().enumerate() {
        if let RelKind::Delta { of } | RelKind::New { of } = r.kind {
            union(&mut parent, i, of.0 as usize);
        }
    }
    for b in &ra.blocks {
        for s in &b.stmts {
            match s {
                Stmt::Merge { into, from } => union(&mut parent, into.0 as usize, from.0 as usize),
                Stmt::Assign { dst, src } => union(&mut parent, dst.0 as usize, src.0 as usize),
                _ => {}
            }
        }
    }
    let looping = looping_blocks(ra);
    // Votes per class root: hashed columns (in the relation's numbering) and weight.
    let mut votes: HashMap<usize, Vec<(Vec<usize>, f64)>> = HashMap::new();
    let est = |t: TempId| plan.node(t).est.as_ref().map_or(1.0, |e| e.rows.max(1.0));
    for (bi, b) in ra.blocks.iter().enumerate() {
        let weight = if looping[bi] { 1000.0 } else { 1.0 };
        let mut defs: HashMap<TempId, &Op> = HashMap::new();
        for s in &b.stmts {
            match s {
                Stmt::Let { dst, op, .. } => {
                    defs.insert(*dst, op);
                    let sides: Vec<(TempId, &[usize])> = match op {
                        Op::Join {
                            left,
                            right,
                            left_keys,
                            right_keys,
                            ..
                        }
                        | Op::SemiJoin {
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
                        } => vec![(*left, left_keys), (*right, right_keys)],
                        _ => Vec::new(),
                    };
                    for (t, keys) in sides {
                        if !keys.is_empty() {
                            vote(&mut votes, &mut parent, &defs, t, keys, weight * est(t));
                        }
                    }
                }
                Stmt::CheckFunctional { src, keys, .. } if *keys > 0 => {
                    let cols: Vec<usize> = (0..*keys).collect();
                    vote(&mut votes, &mut parent, &defs, *src, &cols, f64::INFINITY);
                }
                _ => {}
            }
        }
    }
    let roots: Vec<usize> = (0..nr).map(|j| find(&mut parent, j)).collect();
    let mut out = Vec::with_capacity(nr);
    let mut unvoted = vec![false; nr];
    for i in 0..nr {
        let r = &ra.relations[i];
        let root = roots[i];
        let class_has =
            |pred: &dyn Fn(&RelKind) -> bool| (0..nr).any(|j| roots[j] == root && pred(&ra.relations[j].kind));
        let arity = r.columns.len();
        let p = if arity == 0 {
            Partitioning::Single
        } else if matches!(r.kind, RelKind::Facts) && !class_has(&|k| !matches!(k, RelKind::Facts)) {
            Partitioning::Replicated { parts: n }
        } else {
            let best = votes.get(&root).and_then(|v| {
                let mut sums: Vec<(Vec<usize>, f64)> = Vec::new();
                for (cols, w) in v {
                    match sums.iter_mut().find(|(c, _)| c == cols) {
                        Some(e) => e.1 += w,
                        None => sums.push((cols.clone(), *w)),
                    }
                }
                // The heaviest; ties to the first voted (the plan's order).
                sums.into_iter()
                    .fold(None::<(Vec<usize>, f64)>, |acc, x| match acc {
                        Some(a) if a.1 >= x.1 => Some(a),
                        _ => Some(x),
                    })
                    .map(|(c, _)| c)
            });
            match best {
                Some(cols) if cols.iter().all(|&c| c < arity) => Partitioning::Hash { cols, parts: n },
                _ if class_has(&|k| matches!(k, RelKind::Input { .. })) => Partitioning::Split { parts: n },
                _ => {
                    unvoted[i] = votes.get(&root).is_none_or(|v| v.is_empty());
                    Partitioning::Hash {
                        cols: (0..arity).collect(),
                        parts: n,
                    }
                }
            }
        };
        out.push(p);
    }
    (out, unvoted)
}

/// The relations placed as their producer leaves its rows (`follow_producers`): derived
/// and temporary relations with columns that no join, match or functional check votes
/// for, that no loop merges or assigns (alone in their class: no `delta` or `new`), and
/// that one statement stores, outside any loop. Their readers do not read them on keys
/// (only scans feeding selects, projections, maps, duplicate removals, aggregations,
/// sorts, limits and outputs, which bring rows together themselves where they must), so
/// hashing them on all their columns would move rows for no reader.
fn producer_placed(plan: &PhysPlan, unvoted: &[bool]) -> Vec<(RelId, usize, usize)> {
    let ra = &plan.ra;
    let looping = looping_blocks(ra);
    let mut out = Vec::new();
    for (r, rel) in ra.relations.iter().enumerate() {
        if !unvoted[r] || rel.columns.is_empty() || !matches!(rel.kind, RelKind::Derived | RelKind::Temp) {
            continue;
        }
        let is = |x: &RelId| x.0 as usize == r;
        let alone = !ra
            .relations
            .iter()
            .any(|o| matches!(&o.kind, RelKind::Delta { of } | RelKind::New { of } if is(of)))
            && !ra.blocks.iter().flat_map(|b| &b.stmts).any(|s| match s {
                Stmt::Merge { into, from } => is(into) || is(from),
                Stmt::Assign { dst, src } => is(dst) || is(src),
                _ => false,
            });
        let stores: Vec<(usize, usize)> = ra
            .blocks
            .iter()
            .enumerate()
            .flat_map(|(bi, b)| {
                b.stmts
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| matches!(s, Stmt::Store { rel, .. } if is(rel)))
                    .map(move |(si, _)| (bi, si))
            })
            .collect();
        if alone && stores.len() == 1 && !looping[stores[0].0] {
            out.push((RelId(r as u32), stores[0].0, stores[0].1));
        }
    }
    // In the plan's order, so that a relation read by a later one's producer is placed first.
    out.sort_by_key(|&(_, b, s)| (b, s));
    out
}

/// The columns of relation `r` that every duplicate removal and grouped aggregation
/// reading it still has (as columns, or group columns), following each scan of `r` through
/// selects, sorts, limits, duplicate removals, projections, maps and unions of rows of `r`
/// alike, in `r`'s numbering; `None` when some such reader has none of them or none reads
/// `r` so. Hashed on these, `r`'s rows reach those readers placed by a subset of their
/// columns, and none moves to meet its duplicates or its group.
fn kept_columns(plan: &PhysPlan, r: RelId) -> Option<Vec<usize>> {
    let arity = plan.ra.relations[r.0 as usize].columns.len();
    let mut kept: Option<Vec<bool>> = None;
    let mut meet = |cols: &[Option<usize>]| {
        let here: Vec<bool> = (0..arity).map(|c| cols.contains(&Some(c))).collect();
        kept = Some(match kept.take() {
            None => here,
            Some(k) => k.iter().zip(&here).map(|(a, b)| *a && *b).collect(),
        });
    };
    for b in &plan.ra.blocks {
        // Per temp holding rows of `r`: the column of `r` each of its columns holds.
        let mut of: HashMap<TempId, Vec<Option<usize>>> = HashMap::new();
        for s in &b.stmts {
            let Stmt::Let { dst, op, .. } = s else {
                continue;
            };
            let cols: Option<Vec<Option<usize>>> = match op {
                Op::Scan(x) if *x == r => Some((0..arity).map(Some).collect()),
                Op::Select { input, .. } | Op::Sort { input, .. } | Op::Limit { input, .. } => of.get(input).cloned(),
                Op::Unique(input) => of.get(input).cloned().inspect(|m| meet(m)),
                Op::Project { input, cols } => of
                    .get(input)
                    .map(|m| cols.iter().map(|&c| m.get(c).copied().flatten()).collect()),
                Op::Map { input, exprs } => of.get(input).map(|m| {
                    exprs
                        .iter()
                        .map(|e| col_ref(e).and_then(|c| m.get(c).copied().flatten()))
                        .collect()
                }),
                Op::Union(inputs) => {
                    let ms: Vec<Option<&Vec<Option<usize>>>> = inputs.iter().map(|t| of.get(t)).collect();
                    match ms.first() {
                        Some(Some(m)) if ms.iter().all(|x| *x == Some(*m)) => Some((*m).clone()),
                        _ => {
                            // Rows of `r` meet rows placed otherwise: moved there anyway.
                            for m in ms.into_iter().flatten() {
                                meet(m);
                            }
                            None
                        }
                    }
                }
                Op::Aggregate { input, group, .. } => {
                    // Without groups, every row meets on device 0 whatever its placement.
                    if let (Some(m), false) = (of.get(input), group.is_empty()) {
                        let g: Vec<Option<usize>> = group.iter().map(|&c| m.get(c).copied().flatten()).collect();
                        meet(&g);
                    }
                    None
                }
                _ => None,
            };
            if let Some(c) = cols {
                of.insert(*dst, c);
            }
        }
    }
    let cols: Vec<usize> = kept?.iter().enumerate().filter(|(_, k)| **k).map(|(c, _)| c).collect();
    (!cols.is_empty()).then_some(cols)
}

/// Places each relation of `followers` (`producer_placed`: relation, block and statement
/// of its one store) as the rows its store writes are distributed, so that the store
/// moves none: hashed on the columns its producer hashed them on (each row, and so each
/// distinct row, on one device), split where they are, or on device 0. Where the producer
/// moves the rows to hash them on all columns (a duplicate removal of rows placed by no
/// key) or leaves them replicated (each device then keeps its share), the relation is
/// hashed on the columns its readers keep (`kept_columns`), else on all its columns: the
/// rows move as often, and its readers find them placed.
fn follow_producers(plan: &mut PhysPlan, n: usize, followers: &[(RelId, usize, usize)]) {
    for &(r, bi, si) in followers {
        let ri = r.0 as usize;
        let arity = plan.ra.relations[ri].columns.len();
        // Split takes whatever the producer leaves: no move, and nothing wanted of it.
        plan.rel_partitioning[ri] = Partitioning::Split { parts: n };
        let d = block(plan, &plan.ra.blocks[bi], n);
        let Some(Stmt::Store { src, .. }) = plan.ra.blocks[bi].stmts.get(si) else {
            unreachable!("producer_placed names a store");
        };
        let node = d.nodes.iter().find(|x| x.0 == *src);
        let left = node.map(|x| x.1.clone());
        // The producer moved the rows itself to place them (a duplicate removal of rows
        // placed by no key): it may as well move them by the columns the readers keep.
        let moved = node.is_some_and(|x| !x.2.is_empty());
        let all: Vec<usize> = (0..arity).collect();
        let kept = || Partitioning::Hash {
            cols: kept_columns(plan, r).unwrap_or_else(|| all.clone()),
            parts: n,
        };
        plan.rel_partitioning[ri] = match left {
            Some(Partitioning::Hash { cols, .. }) if moved && cols == all => kept(),
            Some(Partitioning::Hash { cols, .. }) if !cols.is_empty() && cols.iter().all(|&c| c < arity) => {
                Partitioning::Hash { cols, parts: n }
            }
            Some(p @ (Partitioning::Split { .. } | Partitioning::Single)) => p,
            _ => kept(),
        };
    }
}

/// The rows the plan moves between devices with its relations placed as
/// `plan.rel_partitioning` (the operators' moves as `block` decides them): an input hashed
/// at load none (each device loads the rows of its keys); a move of an operator's input
/// or a statement's temp the `(n - 1) / n` of its rows that leave their device for a hash
/// or a gather, its rows once per other device for a broadcast, none for a kept share; a
/// partial aggregation its result's rows as a hash. A move in a loop weighs 1000 times
/// one outside, as in the votes.
fn rows_moved(plan: &PhysPlan, n: usize, looping: &[bool]) -> f64 {
    let ra = &plan.ra;
    let est = |t: TempId| plan.node(t).est.as_ref().map_or(1.0, |e| e.rows.max(1.0));
    // A hash or a gather leaves on each device the rows already placed there: one in `n`.
    let cost = |m: &Redistribute, rows: f64| match m {
        Redistribute::Hash { .. } | Redistribute::Gather => rows * (n - 1) as f64 / n as f64,
        Redistribute::Broadcast => rows * (n - 1) as f64,
        Redistribute::Keep { .. } => 0.0,
    };
    let mut total = 0.0;
    for (bi, b) in ra.blocks.iter().enumerate() {
        let weight = if looping[bi] { 1000.0 } else { 1.0 };
        let ops: HashMap<TempId, &Op> = b
            .stmts
            .iter()
            .filter_map(|s| match s {
                Stmt::Let { dst, op, .. } => Some((*dst, op)),
                _ => None,
            })
            .collect();
        let d = block(plan, b, n);
        for (t, _, moves, _, partial) in &d.nodes {
            let read = ops.get(t).map(|op| op.inputs()).unwrap_or_default();
            for (i, m) in moves {
                total += weight * cost(m, read.get(*i).map_or(1.0, |&x| est(x)));
            }
            if let Some(m) = partial {
                total += weight * cost(m, est(*t));
            }
        }
        for (si, m) in &d.stmt_moves {
            if let Some(Stmt::Store { src, .. } | Stmt::Output { src, .. } | Stmt::CheckFunctional { src, .. }) =
                b.stmts.get(*si)
            {
                total += weight * cost(m, est(*src));
            }
        }
    }
    total
}

/// Relation `r` is an input that only its load writes: no statement stores, merges,
/// assigns or clears it, and no relation is its `delta` or `new`.
fn load_only_input(plan: &PhysPlan, r: usize) -> bool {
    let ra = &plan.ra;
    let rel = &ra.relations[r];
    let is = |x: &RelId| x.0 as usize == r;
    matches!(rel.kind, RelKind::Input { .. })
        && !rel.columns.is_empty()
        && !ra
            .relations
            .iter()
            .any(|o| matches!(&o.kind, RelKind::Delta { of } | RelKind::New { of } if is(of)))
        && !ra.blocks.iter().flat_map(|b| &b.stmts).any(|s| match s {
            Stmt::Store { rel, .. } | Stmt::Clear { rel } => is(rel),
            Stmt::Merge { into, from } => is(into) || is(from),
            Stmt::Assign { dst, src } => is(dst) || is(src),
            _ => false,
        })
}

/// Every reader of relation `r` needs all its rows on every device, wherever they are
/// loaded: each scan of it is read, through selects, projections, maps and duplicate
/// removals, only by multi-way joins (which replicate their inputs), and at least one is.
fn read_whole(plan: &PhysPlan, r: usize) -> bool {
    let mut any = false;
    for b in &plan.ra.blocks {
        // The temps holding the relation's rows (a scan, and what keeps its rows or fewer).
        let mut rows_of: Vec<TempId> = Vec::new();
        for s in &b.stmts {
            let reads: Vec<TempId> = match s {
                Stmt::Let { op, .. } => op.inputs(),
                Stmt::Store { src, .. } | Stmt::Output { src, .. } | Stmt::CheckFunctional { src, .. } => vec![*src],
                _ => Vec::new(),
            };
            if !reads.iter().any(|t| rows_of.contains(t)) {
                if let Stmt::Let {
                    dst, op: Op::Scan(x), ..
                } = s
                {
                    if x.0 as usize == r {
                        rows_of.push(*dst);
                    }
                }
                continue;
            }
            match s {
                Stmt::Let {
                    dst,
                    op: Op::Select { .. } | Op::Project { .. } | Op::Map { .. } | Op::Unique(_),
                    ..
                } => rows_of.push(*dst),
                Stmt::Let {
                    op: Op::MultiJoin { vars, .. },
                    ..
                } if !vars.is_empty() => any = true,
                _ => return false,
            }
        }
    }
    any
}

/// Places each input that only its load writes by the rows moved (`rows_moved`), one
/// input at a time, keeping a change only when it moves fewer rows:
/// - hashed at load (by the votes) or split as loaded: the hashing costs its rows once,
///   and is worth it only where a reader then keeps the rows where they are (an input
///   whose every reader broadcasts or hashes it again is loaded split instead: one move,
///   not two);
/// - replicated at load, when every reader needs the whole input on every device
///   (`read_whole`: multi-way joins): each device loads every row from the host over its
///   own link and moves none, where a split input is broadcast (its rows once per other
///   device) and, being received, has no known order, so each device sorts it again.
///   Loaded whole, each device holds the input as one device does, and does exactly one
///   device's work up to the join (the selects, projections and maps before it, the
///   duplicate removal and sort of the join's inputs, with the fast paths of an input
///   loaded sorted or unique).
fn place_inputs(plan: &mut PhysPlan, n: usize, followers: &[(RelId, usize, usize)], stats: &Statistics) {
    let looping = looping_blocks(&plan.ra);
    let mut best = rows_moved(plan, n, &looping);
    for r in 0..plan.ra.relations.len() {
        if !load_only_input(plan, r) {
            continue;
        }
        let current = plan.rel_partitioning[r].clone();
        let mut options = Vec::new();
        if matches!(current, Partitioning::Hash { .. }) {
            options.push(Partitioning::Split { parts: n });
        }
        for cols in hash_candidates(plan, r) {
            if !spreads(plan, r, &cols, n, stats) {
                continue;
            }
            let p = Partitioning::Hash { cols, parts: n };
            if p != current {
                options.push(p);
            }
        }
        if read_whole(plan, r) {
            options.push(Partitioning::Replicated { parts: n });
        }
        let mut chosen = current;
        for p in options {
            plan.rel_partitioning[r] = p.clone();
            follow_producers(plan, n, followers);
            let moved = rows_moved(plan, n, &looping);
            if moved < best {
                best = moved;
                chosen = p;
            }
        }
        plan.rel_partitioning[r] = chosen;
        follow_producers(plan, n, followers);
    }
}

/// The distinct keys an input hashed at load must have per device: with fewer (TPC-H Q1's
/// `lineitem` on its 4 groups of `l_returnflag` and `l_linestatus`), some devices get
/// most of the rows or none, and a split load aggregated in part on each device is
/// faster, though it moves a few partial rows.
pub const MIN_KEYS_PER_DEVICE: u64 = 32;

/// Whether input `r` hashed on `cols` spreads its rows over `n` devices: its loaded data
/// has at least [`MIN_KEYS_PER_DEVICE`] times `n` distinct keys on them, estimated as the
/// product of the columns' distinct counts (capped at its rows). Without statistics of
/// the input or of one of the columns, it is assumed to.
fn spreads(plan: &PhysPlan, r: usize, cols: &[usize], n: usize, stats: &Statistics) -> bool {
    let Some(rs) = stats.get(&plan.ra.relations[r].name) else {
        return true;
    };
    let mut keys: u64 = 1;
    for &c in cols {
        let Some(cs) = rs.column(c) else {
            return true;
        };
        keys = keys.saturating_mul(cs.distinct.max(1));
    }
    keys.min(rs.rows.max(1)) >= MIN_KEYS_PER_DEVICE.saturating_mul(n as u64)
}

/// The key columns of relation `r` that its readers meet on, in the plan's order: the
/// keys of each join, semi-join and anti-join side and the group columns of each
/// aggregation whose columns come from a scan of `r` (through selects, projections,
/// maps, and the columns joins, matches and aggregations carry: `trace_col_through`, so
/// that a join of an intermediate result on `r`'s key counts), each single column of a
/// multi-column key, and the columns a later store, check or match wants of a scan of `r`
/// (`desired`). Loaded hashed on such columns, those rows need not move to meet.
fn hash_candidates(plan: &PhysPlan, r: usize) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    for b in &plan.ra.blocks {
        let mut defs: HashMap<TempId, &Op> = HashMap::new();
        let want = desired(plan, b);
        for s in &b.stmts {
            let Stmt::Let { dst, op, .. } = s else {
                continue;
            };
            defs.insert(*dst, op);
            // The columns a store, check or match wants of the scan's rows.
            if let (Op::Scan(x), Some(cols)) = (op, want.get(dst)) {
                if x.0 as usize == r && !cols.is_empty() && !out.contains(cols) {
                    out.push(cols.clone());
                }
            }
            let sides: Vec<(TempId, &[usize])> = match op {
                Op::Join {
                    left,
                    right,
                    left_keys,
                    right_keys,
                    ..
                }
                | Op::SemiJoin {
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
                } => vec![(*left, left_keys), (*right, right_keys)],
                Op::Aggregate { input, group, .. } => vec![(*input, group)],
                _ => Vec::new(),
            };
            for (t, keys) in sides {
                if keys.is_empty() {
                    continue;
                }
                let Some(traced) = keys
                    .iter()
                    .map(|&k| trace_col_through(&defs, t, k))
                    .collect::<Option<Vec<_>>>()
                else {
                    continue;
                };
                if traced.iter().all(|(x, _)| x.0 as usize == r) {
                    let cols: Vec<usize> = traced.iter().map(|(_, c)| *c).collect();
                    // Hashed on one of several keys, the rows meet a side hashed on the
                    // corresponding key of the other side (`key_subset`).
                    let singles = if cols.len() > 1 {
                        cols.iter().map(|&c| vec![c]).collect()
                    } else {
                        Vec::new()
                    };
                    for c in std::iter::once(cols).chain(singles) {
                        if !out.contains(&c) {
                            out.push(c);
                        }
                    }
                }
            }
        }
    }
    out
}

/// `p` seen through a map from input columns to output columns (`None`: dropped).
fn map_part(p: &Partitioning, to: impl Fn(usize) -> Option<usize>, n: usize) -> Partitioning {
    match p {
        Partitioning::Hash { cols, parts } => match cols.iter().map(|&c| to(c)).collect::<Option<Vec<_>>>() {
            Some(cols) => Partitioning::Hash { cols, parts: *parts },
            None => Partitioning::Split { parts: n },
        },
        other => other.clone(),
    }
}

/// The first position of `c` in `cols`.
fn pos(cols: &[usize], c: usize) -> Option<usize> {
    cols.iter().position(|&x| x == c)
}

/// Where hashing a side on its keys meets a side already hashed: the indices `I` into
/// the keys with `hashed == [keys[i] for i in I]`.
fn key_subset(hashed: &[usize], keys: &[usize]) -> Option<Vec<usize>> {
    if hashed.is_empty() {
        return None;
    }
    hashed.iter().map(|&c| pos(keys, c)).collect()
}

/// The partitioning of a side moved by `mv`, from `p`.
fn after(p: &Partitioning, mv: Option<&Redistribute>, n: usize) -> Partitioning {
    match mv {
        None => p.clone(),
        Some(Redistribute::Hash { cols }) | Some(Redistribute::Keep { cols }) => Partitioning::Hash {
            cols: cols.clone(),
            parts: n,
        },
        Some(Redistribute::Gather) => Partitioning::Single,
        Some(Redistribute::Broadcast) => Partitioning::Replicated { parts: n },
    }
}

/// How to bring `p` to `target` (a hash, a split, single or replicated), if it is not.
fn move_to(p: &Partitioning, target: &Partitioning, arity: usize) -> Option<Redistribute> {
    match (target, p) {
        (t, p) if t == p => None,
        (Partitioning::Hash { cols, .. }, Partitioning::Replicated { .. }) => {
            Some(Redistribute::Keep { cols: cols.clone() })
        }
        (Partitioning::Hash { cols, .. }, _) => Some(Redistribute::Hash { cols: cols.clone() }),
        (Partitioning::Split { .. }, Partitioning::Replicated { .. }) => Some(Redistribute::Keep {
            cols: (0..arity.max(1)).collect(),
        }),
        (Partitioning::Split { .. }, _) => None,
        (Partitioning::Replicated { .. }, _) => Some(Redistribute::Broadcast),
        // With no columns, `Keep` keeps every row on device 0.
        (Partitioning::Single, Partitioning::Replicated { .. }) => Some(Redistribute::Keep { cols: Vec::new() }),
        (Partitioning::Single, _) => Some(Redistribute::Gather),
    }
}

/// The columns of `d` (desired, in a result's numbering) seen in an input's numbering.
fn desired_back(d: &[usize], back: impl Fn(usize) -> Option<usize>) -> Option<Vec<usize>> {
    d.iter().map(|&c| back(c)).collect()
}

fn col_ref(e: &Expr) -> Option<usize> {
    match e.kind {
        ExprKind::Col(i) => Some(i),
        _ => None,
    }
}

/// The hash columns each temp of `b` is wanted on by its readers (a store, a functional
/// check, a match), followed back through selects, projections, maps, unions and
/// duplicate removals.
fn desired(plan: &PhysPlan, b: &Block) -> HashMap<TempId, Vec<usize>> {
    let mut want: HashMap<TempId, Vec<usize>> = HashMap::new();
    for s in b.stmts.iter().rev() {
        match s {
            Stmt::Store { rel, src } => {
                if let Partitioning::Hash { cols, .. } = &plan.rel_partitioning[rel.0 as usize] {
                    want.entry(*src).or_insert_with(|| cols.clone());
                }
            }
            Stmt::CheckFunctional { src, keys, .. } if *keys > 0 => {
                want.entry(*src).or_insert_with(|| (0..*keys).collect());
            }
            Stmt::Let { dst, op, .. } => {
                let Some(d) = want.get(dst).cloned() else {
                    continue;
                };
                match op {
                    Op::Select { input, .. } | Op::Unique(input) => {
                        want.entry(*input).or_insert(d);
                    }
                    Op::SemiJoin { left, .. } | Op::AntiJoin { left, .. } | Op::Difference { left, .. } => {
                        want.entry(*left).or_insert(d);
                    }
                    Op::Project { input, cols } => {
                        if let Some(back) = desired_back(&d, |c| cols.get(c).copied()) {
                            want.entry(*input).or_insert(back);
                        }
                    }
                    Op::Map { input, exprs } => {
                        if let Some(back) = desired_back(&d, |c| exprs.get(c).and_then(col_ref)) {
                            want.entry(*input).or_insert(back);
                        }
                    }
                    Op::Union(inputs) => {
                        for t in inputs {
                            want.entry(*t).or_insert_with(|| d.clone());
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    want
}

fn block(plan: &PhysPlan, b: &Block, n: usize) -> Decided {
    let ra = &plan.ra;
    let want = desired(plan, b);
    let mut part: HashMap<TempId, Partitioning> = HashMap::new();
    let mut nodes = Vec::new();
    let mut stmt_moves = Vec::new();
    let est = |t: TempId| plan.node(t).est.as_ref().map_or(1.0, |e| e.rows.max(1.0));
    let arity = |t: TempId| ra.temps[t.0 as usize].columns.len();
    let single = Partitioning::Single;
    let replicated = Partitioning::Replicated { parts: n };
    for (si, s) in b.stmts.iter().enumerate() {
        let get = |part: &HashMap<TempId, Partitioning>, t: &TempId| {
            part.get(t).cloned().unwrap_or(Partitioning::Split { parts: n })
        };
        match s {
            Stmt::Let { dst, op, .. } => {
                let mut moves: Vec<(usize, Redistribute)> = Vec::new();
                let mut boxes = 0;
                let mut partial: Option<Redistribute> = None;
                let p = match op {
                    Op::Scan(r) => plan.rel_partitioning[r.0 as usize].clone(),
                    Op::Const(_) => replicated.clone(),
                    Op::Select { input, .. } => get(&part, input),
                    Op::Project { input, cols } => map_part(&get(&part, input), |c| pos(cols, c), n),
                    Op::Map { input, exprs } => map_part(
                        &get(&part, input),
                        |c| exprs.iter().position(|e| col_ref(e) == Some(c)),
                        n,
                    ),
                    Op::Join {
                        left,
                        right,
                        left_keys,
                        right_keys,
                        output,
                    } => {
                        let (pl, pr) = (get(&part, left), get(&part, right));
                        let (ml, mr) =
                            place_pair(&pl, &pr, left_keys, right_keys, est(*left), est(*right), true, None, n);
                        if let Some(m) = ml.clone() {
                            moves.push((0, m));
                        }
                        if let Some(m) = mr.clone() {
                            moves.push((1, m));
                        }
                        let (al, ar) = (after(&pl, ml.as_ref(), n), after(&pr, mr.as_ref(), n));
                        let through = |side: Side| {
                            move |c: usize| output.iter().position(|o: &JoinCol| o.side == side && o.col == c)
                        };
                        match (&al, &ar) {
                            (Partitioning::Replicated { .. }, Partitioning::Replicated { .. }) => replicated.clone(),
                            (Partitioning::Replicated { .. }, r) => map_part(r, through(Side::Right), n),
                            (l, Partitioning::Replicated { .. }) => map_part(l, through(Side::Left), n),
                            (Partitioning::Single, Partitioning::Single) => single.clone(),
                            (l, r) => match map_part(l, through(Side::Left), n) {
                                h @ Partitioning::Hash { .. } => h,
                                _ => map_part(r, through(Side::Right), n),
                            },
                        }
                    }
                    Op::SemiJoin { left, right, .. }
                    | Op::AntiJoin { left, right, .. }
                    | Op::Difference { left, right } => {
                        // A difference matches on every column.
                        let all: Vec<usize>;
                        let (lk, rk): (&[usize], &[usize]) = match op {
                            Op::SemiJoin {
                                left_keys, right_keys, ..
                            }
                            | Op::AntiJoin {
                                left_keys, right_keys, ..
                            } => (left_keys, right_keys),
                            _ => {
                                all = (0..arity(*left)).collect();
                                (&all, &all)
                            }
                        };
                        let (pl, pr) = (get(&part, left), get(&part, right));
                        let (ml, mr) = place_pair(&pl, &pr, lk, rk, est(*left), est(*right), false, want.get(dst), n);
                        if let Some(m) = ml.clone() {
                            moves.push((0, m));
                        }
                        if let Some(m) = mr {
                            moves.push((1, m));
                        }
                        after(&pl, ml.as_ref(), n)
                    }
                    Op::Union(inputs) => {
                        let ps: Vec<Partitioning> = inputs.iter().map(|t| get(&part, t)).collect();
                        if ps.iter().all(|p| *p == ps[0]) {
                            ps[0].clone()
                        } else {
                            let hashes: Vec<&Partitioning> = ps
                                .iter()
                                .filter(|p| !matches!(p, Partitioning::Replicated { .. }))
                                .collect();
                            let target = if hashes.iter().all(|p| *p == hashes[0]) {
                                hashes[0].clone()
                            } else {
                                Partitioning::Split { parts: n }
                            };
                            for (i, p) in ps.iter().enumerate() {
                                if matches!(p, Partitioning::Replicated { .. }) {
                                    if let Some(m) = move_to(p, &target, arity(*dst)) {
                                        moves.push((i, m));
                                    }
                                }
                            }
                            match target {
                                Partitioning::Single => Partitioning::Split { parts: n },
                                t => t,
                            }
                        }
                    }
                    Op::Unique(input) => {
                        let p = get(&part, input);
                        // Duplicates meet on one device when the rows are placed by a
                        // subset of their columns, or all on one; a later reader may
                        // want them hashed on particular columns.
                        let target = match (want.get(dst), &p) {
                            (Some(d), _) if !d.is_empty() => Some(Partitioning::Hash {
                                cols: d.clone(),
                                parts: n,
                            }),
                            (_, Partitioning::Split { .. }) => Some(Partitioning::Hash {
                                cols: (0..arity(*input).max(1)).collect(),
                                parts: n,
                            }),
                            _ => None,
                        };
                        match target.and_then(|t| move_to(&p, &t, arity(*input))) {
                            Some(m) => {
                                let out = after(&p, Some(&m), n);
                                moves.push((0, m));
                                out
                            }
                            None => p,
                        }
                    }
                    Op::Aggregate { input, group, aggs } => {
                        let p = get(&part, input);
                        // Aggregated on each device first when the aggregates combine
                        // exactly: an average of int32, int64 or decimal values as an
                        // exact sum and a count (divided after they are combined, as one
                        // device divides); float sums and averages depend on the order
                        // of the additions, so they are not split.
                        let combines = aggs.iter().all(|a| match a.func {
                            AggFunc::Count => true,
                            AggFunc::Sum => a.ty != Type::Float64,
                            AggFunc::Min | AggFunc::Max => a.ty != Type::String,
                            AggFunc::Avg => matches!(
                                a.arg.as_ref().map(|e| e.ty),
                                Some(Type::Int32 | Type::Int64 | Type::Decimal(_))
                            ),
                        });
                        let mut redistribute = |m: Redistribute| {
                            if combines {
                                partial = Some(m);
                            } else {
                                moves.push((0, m));
                            }
                        };
                        match &p {
                            Partitioning::Replicated { .. } | Partitioning::Single => p.clone(),
                            _ if group.is_empty() => {
                                redistribute(Redistribute::Gather);
                                single.clone()
                            }
                            Partitioning::Hash { cols, .. } if cols.iter().all(|c| group.contains(c)) => {
                                map_part(&p, |c| pos(group, c), n)
                            }
                            _ => {
                                redistribute(Redistribute::Hash {
                                    cols: if combines {
                                        (0..group.len()).collect()
                                    } else {
                                        group.clone()
                                    },
                                });
                                Partitioning::Hash {
                                    cols: (0..group.len()).collect(),
                                    parts: n,
                                }
                            }
                        }
                    }
                    Op::Sort { input, .. } | Op::Limit { input, .. } => {
                        let p = get(&part, input);
                        match p {
                            Partitioning::Replicated { .. } | Partitioning::Single => p,
                            _ => {
                                moves.push((0, Redistribute::Gather));
                                single.clone()
                            }
                        }
                    }
                    Op::MultiJoin {
                        vars,
                        inputs,
                        output,
                        count,
                    } => {
                        let ps: Vec<Partitioning> = inputs.iter().map(|i| get(&part, &i.src)).collect();
                        if ps.iter().all(|p| *p == Partitioning::Single) {
                            single.clone()
                        } else if vars.len() < 2 {
                            // Nothing to split by: every device joins everything.
                            for (i, p) in ps.iter().enumerate() {
                                if !matches!(p, Partitioning::Replicated { .. }) {
                                    moves.push((i, Redistribute::Broadcast));
                                }
                            }
                            replicated.clone()
                        } else {
                            for (i, p) in ps.iter().enumerate() {
                                if !matches!(p, Partitioning::Replicated { .. }) {
                                    moves.push((i, Redistribute::Broadcast));
                                }
                            }
                            boxes = BOXES_PER_DEVICE * n as u32;
                            if *count {
                                single.clone()
                            } else {
                                boxed_listing_placement(output, n)
                            }
                        }
                    }
                };
                part.insert(*dst, p.clone());
                nodes.push((*dst, p, moves, boxes, partial));
            }
            Stmt::Store { rel, src } => {
                let target = &plan.rel_partitioning[rel.0 as usize];
                let p = get(&part, src);
                if let Some(m) = move_to(&p, target, arity(*src)) {
                    let fits = matches!(target, Partitioning::Split { .. }) && p.is_partitioned();
                    if !fits {
                        stmt_moves.push((si, m));
                    }
                }
            }
            Stmt::CheckFunctional { src, keys, .. } => {
                let p = get(&part, src);
                let placed = match &p {
                    Partitioning::Single | Partitioning::Replicated { .. } => true,
                    Partitioning::Hash { cols, .. } => *keys > 0 && cols.iter().all(|&c| c < *keys),
                    Partitioning::Split { .. } => false,
                };
                if !placed {
                    stmt_moves.push((
                        si,
                        if *keys == 0 {
                            Redistribute::Gather
                        } else {
                            Redistribute::Hash {
                                cols: (0..*keys).collect(),
                            }
                        },
                    ));
                }
            }
            Stmt::Output { src, .. } => {
                // The devices' outputs are concatenated: a replicated result is output
                // by device 0 alone.
                if let Partitioning::Replicated { .. } = get(&part, src) {
                    stmt_moves.push((si, Redistribute::Keep { cols: Vec::new() }));
                }
            }
            _ => {}
        }
    }
    Decided { nodes, stmt_moves }
}

/// The moves of the two sides of a join (`join`: the result takes both sides' columns,
/// so either side may be broadcast) or a match (only the right side may be broadcast: a
/// replicated left would give each match once per device), keyed on `lk`/`rk`; `want`,
/// a match's desired hashing of its left side.
#[allow(clippy::too_many_arguments)]
fn place_pair(
    pl: &Partitioning,
    pr: &Partitioning,
    lk: &[usize],
    rk: &[usize],
    rows_l: f64,
    rows_r: f64,
    join: bool,
    want: Option<&Vec<usize>>,
    n: usize,
) -> (Option<Redistribute>, Option<Redistribute>) {
    use Partitioning::*;
    let other = (n - 1) as f64;
    // A hash leaves on their device the rows whose key hashes to it: one in `n`.
    let leave = other / n as f64;
    match (pl, pr) {
        (_, Replicated { .. }) => return (None, None),
        (Replicated { .. }, _) if join => return (None, None),
        (Single, Single) => return (None, None),
        _ => {}
    }
    if lk.is_empty() {
        // No keys: one side must be everywhere.
        if join && rows_l < rows_r && !matches!(pl, Replicated { .. }) {
            return (Some(Redistribute::Broadcast), None);
        }
        return (None, Some(Redistribute::Broadcast));
    }
    if let Replicated { .. } = pl {
        // A match over a replicated left: each device keeps its share of the left, and
        // the right is hashed alike.
        if let Hash { cols, .. } = pr {
            if let Some(ix) = key_subset(cols, rk) {
                return (
                    Some(Redistribute::Keep {
                        cols: ix.iter().map(|&i| lk[i]).collect(),
                    }),
                    None,
                );
            }
        }
        return (
            Some(Redistribute::Keep { cols: lk.to_vec() }),
            Some(Redistribute::Hash { cols: rk.to_vec() }),
        );
    }
    // Co-partitioned already?
    if let (Hash { cols: cl, .. }, Hash { cols: cr, .. }) = (pl, pr) {
        if let (Some(il), Some(ir)) = (key_subset(cl, lk), key_subset(cr, rk)) {
            if il == ir {
                return (None, None);
            }
        }
    }
    let mut options: Vec<(f64, Option<Redistribute>, Option<Redistribute>)> = Vec::new();
    if let Hash { cols, .. } = pl {
        if let Some(ix) = key_subset(cols, lk) {
            options.push((
                rows_r * leave,
                None,
                Some(Redistribute::Hash {
                    cols: ix.iter().map(|&i| rk[i]).collect(),
                }),
            ));
        }
    }
    if let Hash { cols, .. } = pr {
        if let Some(ix) = key_subset(cols, rk) {
            options.push((
                rows_l * leave,
                Some(Redistribute::Hash {
                    cols: ix.iter().map(|&i| lk[i]).collect(),
                }),
                None,
            ));
        }
    }
    // Both hashed: on the keys the match's reader wants of its left, if they are keys.
    let both_l: Vec<usize> = want
        .and_then(|w| {
            let ix: Option<Vec<usize>> = w.iter().map(|&c| pos(lk, c)).collect();
            ix.filter(|ix| !ix.is_empty())
        })
        .unwrap_or_else(|| (0..lk.len()).collect());
    options.push((
        (rows_l + rows_r) * leave,
        Some(Redistribute::Hash {
            cols: both_l.iter().map(|&i| lk[i]).collect(),
        }),
        Some(Redistribute::Hash {
            cols: both_l.iter().map(|&i| rk[i]).collect(),
        }),
    ));
    options.push((rows_r * other, None, Some(Redistribute::Broadcast)));
    if join {
        options.push((rows_l * other, Some(Redistribute::Broadcast), None));
    }
    let best = options
        .into_iter()
        .fold(
            None::<(f64, Option<Redistribute>, Option<Redistribute>)>,
            |acc, o| match acc {
                Some(a) if a.0 <= o.0 => Some(a),
                _ => Some(o),
            },
        )
        .expect("at least one option");
    (best.1, best.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_costs_the_rows_that_leave_their_device() {
        // The left side, hashed on no key, meets a right side hashed on its key: hashing
        // the left moves the rows that leave their device (half of them over two
        // devices), broadcasting the right all its rows once. The right at 60% of the
        // left: the hash is cheaper; at 40%: the broadcast.
        let pl = Partitioning::Hash {
            cols: vec![1],
            parts: 2,
        };
        let pr = Partitioning::Hash {
            cols: vec![0],
            parts: 2,
        };
        let hash_left = (Some(Redistribute::Hash { cols: vec![0] }), None);
        assert_eq!(
            place_pair(&pl, &pr, &[0], &[0], 1000.0, 600.0, true, None, 2),
            hash_left
        );
        assert_eq!(
            place_pair(&pl, &pr, &[0], &[0], 1000.0, 400.0, true, None, 2),
            (None, Some(Redistribute::Broadcast))
        );
        // Over four devices three in four rows leave: the broadcast costs the right's rows
        // three times, the hash 3/4 of the left's.
        let (pl, pr) = (
            Partitioning::Hash {
                cols: vec![1],
                parts: 4,
            },
            Partitioning::Hash {
                cols: vec![0],
                parts: 4,
            },
        );
        assert_eq!(
            place_pair(&pl, &pr, &[0], &[0], 1000.0, 300.0, true, None, 4),
            hash_left
        );
        assert_eq!(
            place_pair(&pl, &pr, &[0], &[0], 1000.0, 200.0, true, None, 4),
            (None, Some(Redistribute::Broadcast))
        );
    }
}
