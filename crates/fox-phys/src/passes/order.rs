//! `order`: what order and uniqueness each result has, in which order a join's or an
//! aggregation's keys are compared (so that an existing sort of a side serves), and
//! whether an aggregation `fusion` fused still needs to be (it does not when its input is
//! already sorted on its keys and carries no deferred filter: a reduce by key over the
//! sorted rows is cheaper).
//!
//! The translation sorts a value only where an algorithm needs an order this pass does
//! not record for it, so every sort it elides is one this pass proved unnecessary.
//! Disabled, nothing is known about any result's order (relation variables keep the
//! order the RA plan promises for them, which every store establishes), every merge
//! sorts its sides, every fused aggregation runs fused, and join keys are compared in
//! the order the RA plan lists them.
//!
//! The rules, per operator (`code order` orders strings by their dictionary code, which is
//! what merge-based kernels need; `value order` by the strings, what `order by` means; a
//! result sorted by value on a string key is `ranked`):
//! - scans have the order of their relation variable; a select, a slice and a deferred
//!   select keep their input's; maps and projections keep the prefix of the input's
//!   sort keys they keep, and uniqueness when they keep every column;
//! - a union of several inputs has no known order;
//! - `unique` is sorted on all columns (keeping an existing full sort's key order);
//!   `sort` and `limit` are sorted by value on their keys unless the input already is;
//! - a join is sorted on the left's keys (as the merge left them: the left's existing
//!   order when it already began with the keys), restricted to the columns it outputs, and
//!   unique when both sides are and it outputs every column of both; semi-joins,
//!   anti-joins and differences have the left's order after its sort;
//! - a band, hash or index nested-loop join has its probing side's order as it is (only
//!   the searched side is sorted, on its keys, reusing its own sort first), a nested loop
//!   its left side's; their matches keep the left's order unsorted;
//! - an aggregation is sorted on its group keys (in the compared order), then every
//!   other column, and unique; fused, on all its columns in order;
//! - a multi-way join is sorted on the prefix of its variable order it outputs.

use fox_ra::{Block, JoinCol, Op, Props, RaPlan, Side, SortKey, Stmt, TempId};
use fox_sema::core::Type;

use super::{Pass, PhysError};
use crate::ann::{AggAlgorithm, Algorithm, Order, OrderAnn};
use crate::stats::Statistics;
use crate::PhysPlan;

pub struct OrderPass;

impl Pass for OrderPass {
    fn name(&self) -> &'static str {
        "order"
    }

    fn decides(&self) -> &'static str {
        "the order and uniqueness of every result, so sorts are elided where an order is known; the order of join and group keys; which fused aggregations are already sorted"
    }

    fn run(&self, plan: &mut PhysPlan, stats: &Statistics) -> Result<(), PhysError> {
        let mut out: Vec<(TempId, OrderAnn, bool)> = Vec::new();
        for b in &plan.ra.blocks {
            block(plan, stats, b, &mut out);
        }
        for (t, ann, unfuse) in out {
            let n = plan.node_mut(t);
            n.order = Some(ann);
            if unfuse {
                n.algorithm = Algorithm::Aggregate(AggAlgorithm::SortReduce);
            }
        }
        Ok(())
    }
}

/// What is known of a value while the pass walks a block: its order, and whether it is
/// a deferred select (or a projection of one) whose rows are not compacted yet.
#[derive(Clone)]
struct Val {
    o: Order,
    types: Vec<Type>,
    pending: bool,
}

impl Val {
    fn arity(&self) -> usize {
        self.types.len()
    }

    fn code_sorted(&self) -> &[SortKey] {
        self.o.code_sorted(&self.types)
    }

    fn fully_sorted(&self) -> bool {
        self.o.fully_sorted(&self.types)
    }

    /// Sorted in code order on `keys` (no change when it already is).
    fn sort_code(mut self, keys: &[SortKey]) -> Val {
        self.o = self.o.sort_code(keys, &self.types);
        self
    }

    /// Sorted in value order on `keys` (no change when it already is).
    fn sort_value(mut self, keys: &[SortKey]) -> Val {
        self.o = self.o.sort_value(keys, &self.types);
        self
    }

    /// Sorted on `keys` and then the remaining columns, duplicate-free.
    fn unique_on(mut self, keys: &[SortKey]) -> Val {
        if self.o.needs_sort_for_unique(keys, &self.types) {
            let full = Order::unique_keys(keys, self.arity());
            self = self.sort_code(&full);
        }
        self.o.unique = true;
        self
    }

    /// The columns `cols`, in this order (a deferred select stays deferred).
    fn project(&self, cols: &[usize]) -> Val {
        Val {
            o: self.o.project(cols, self.arity()),
            types: cols.iter().map(|&c| self.types[c]).collect(),
            pending: self.pending,
        }
    }

    fn with_types(mut self, types: Vec<Type>) -> Val {
        self.types = types;
        self
    }
}

fn asc(cols: impl IntoIterator<Item = usize>) -> Vec<SortKey> {
    cols.into_iter().map(SortKey::asc).collect()
}

/// The order in which to compare the key pairs of a join so that an existing sort of one
/// side can be used: a permutation of `0..lk.len()`.
fn key_order(l: &Val, lk: &[usize], r: &Val, rk: &[usize]) -> Vec<usize> {
    let n = lk.len();
    for (v, keys) in [(l, lk), (r, rk)] {
        let s = v.code_sorted();
        if s.len() < n || s[..n].iter().any(|k| k.desc) {
            continue;
        }
        let perm: Option<Vec<usize>> = s[..n].iter().map(|k| keys.iter().position(|&c| c == k.col)).collect();
        if let Some(perm) = perm {
            let mut seen = perm.clone();
            seen.sort_unstable();
            seen.dedup();
            if seen.len() == n {
                return perm;
            }
        }
    }
    (0..n).collect()
}

/// Both sides sorted on their keys compared in the order `key_order` picks.
fn sort_sides(l: Val, lk: &[usize], r: Val, rk: &[usize]) -> (Val, Val, Vec<usize>) {
    if lk.is_empty() {
        return (l, r, Vec::new());
    }
    let perm = key_order(&l, lk, &r, rk);
    let l = l.sort_code(&asc(perm.iter().map(|&i| lk[i])));
    let r = r.sort_code(&asc(perm.iter().map(|&i| rk[i])));
    (l, r, perm)
}

fn props_val(p: &Props, types: Vec<Type>) -> Val {
    Val {
        o: Order {
            sorted: p.sorted.clone(),
            ranked: false,
            unique: p.unique,
        },
        types,
        pending: false,
    }
}

/// The order a scan of input relation `rel` has as loaded, from the statistics of the data
/// the plan runs on: ascending on every column whose values the statistics saw in
/// ascending order (rows ascending on each of several columns are ascending on all of
/// them together, in any order of the columns). Only columns whose code order is their
/// value order count (not strings, whose codes follow their text only until strings are
/// appended, nor floats); rows the statistics saw ascending on all their columns together
/// (`RelationStats::rows_sorted`) are sorted on all of them in their order. Over several
/// devices each device's part of an input keeps the rows' order (a slice, the rows of its
/// hashed keys in their order, or every row), and rows of a sorted table taken in their
/// order are sorted.
fn loaded_order(_plan: &PhysPlan, stats: &Statistics, rel: &fox_ra::RelVar) -> Vec<SortKey> {
    if !matches!(rel.kind, fox_ra::RelKind::Input { .. }) {
        return Vec::new();
    }
    let Some(s) = stats.get(&rel.name) else {
        return Vec::new();
    };
    // Rows ascending on all their columns together are sorted on every prefix of them.
    if s.rows_sorted && s.columns.len() == rel.columns.len() {
        return asc(0..rel.columns.len());
    }
    let cols =
        rel.columns.iter().enumerate().filter(|(c, col)| {
            !matches!(col.ty, Type::String | Type::Float64) && s.column(*c).is_some_and(|cs| cs.sorted)
        });
    asc(cols.map(|(c, _)| c))
}

fn block(plan: &PhysPlan, stats: &Statistics, b: &Block, out: &mut Vec<(TempId, OrderAnn, bool)>) {
    let ra: &RaPlan = &plan.ra;
    let mut vals: Vec<Option<Val>> = vec![None; ra.temps.len()];
    for s in &b.stmts {
        let Stmt::Let { dst, op, .. } = s else {
            continue;
        };
        let types = ra.temps[dst.0 as usize].types();
        // Rows received from other devices come in no known order (a set stays a set).
        let inputs = op.inputs();
        let moved: Vec<TempId> = plan
            .node(*dst)
            .moves
            .iter()
            .filter(|(_, m)| m.reorders())
            .filter_map(|(i, _)| inputs.get(*i).copied())
            .collect();
        let get = |t: &TempId| {
            vals[t.0 as usize].clone().map(|mut v| {
                if moved.contains(t) {
                    v.o = Order {
                        unique: v.o.unique,
                        ..Order::unordered()
                    };
                }
                v
            })
        };
        // A reader other than a projection or an aggregation compacts a deferred select.
        let settled = |t: &TempId| {
            get(t).map(|mut v| {
                v.pending = false;
                v
            })
        };
        let mut key_perm = Vec::new();
        let mut unfuse = false;
        let v: Option<Val> = match op {
            Op::Scan(r) => {
                let rel = &ra.relations[r.0 as usize];
                let mut v = props_val(&rel.props, types.clone());
                if v.o.sorted.is_empty() {
                    v.o.sorted = loaded_order(plan, stats, rel);
                }
                // Rows the statistics saw strictly ascending are distinct (an input's
                // rows as loaded, whatever part of them a device reads).
                if matches!(rel.kind, fox_ra::RelKind::Input { .. })
                    && stats.get(&rel.name).is_some_and(|s| s.rows_distinct)
                {
                    v.o.unique = true;
                }
                Some(v)
            }
            Op::Const(rows) => {
                let n = rows.len();
                let o = if n <= 1 {
                    Order {
                        sorted: asc(0..types.len()),
                        ranked: false,
                        unique: true,
                    }
                } else {
                    Order::default()
                };
                Some(Val {
                    o,
                    types: types.clone(),
                    pending: false,
                })
            }
            Op::Select { input, .. } => settled(input).map(|v| {
                let pending = plan.node(*dst).deferred_into.is_some();
                Val {
                    pending,
                    ..v.with_types(types.clone())
                }
            }),
            Op::Map { input, exprs } => settled(input).map(|v| {
                let refs: Vec<Option<usize>> = exprs
                    .iter()
                    .map(|e| match e.kind {
                        fox_ra::ExprKind::Col(i) => Some(i),
                        _ => None,
                    })
                    .collect();
                let sorted = v.o.kept_prefix(|c| refs.iter().position(|&r| r == Some(c)));
                let unique = v.o.unique && (0..v.arity()).all(|c| refs.contains(&Some(c)));
                Val {
                    o: Order {
                        sorted,
                        ranked: v.o.ranked,
                        unique,
                    },
                    types: types.clone(),
                    pending: false,
                }
            }),
            Op::Project { input, cols } => get(input).map(|v| v.project(cols).with_types(types.clone())),
            Op::Union(inputs) => {
                if inputs.len() == 1 {
                    settled(&inputs[0]).map(|v| v.with_types(types.clone()))
                } else {
                    Some(Val {
                        o: Order::default(),
                        types: types.clone(),
                        pending: false,
                    })
                }
            }
            Op::Unique(input) => settled(input).map(|v| {
                let keys = if v.fully_sorted() {
                    v.code_sorted().to_vec()
                } else {
                    asc(0..v.arity())
                };
                v.unique_on(&keys).with_types(types.clone())
            }),
            Op::Sort { input, keys } => settled(input).map(|v| v.sort_value(keys).with_types(types.clone())),
            Op::Limit { input, .. } => {
                let claim = &ra.temps[input.0 as usize].props.sorted;
                settled(input).map(|v| v.sort_value(claim).with_types(types.clone()))
            }
            Op::Join {
                left,
                right,
                left_keys,
                right_keys,
                output,
            } => match (settled(left), settled(right)) {
                (Some(l), Some(r)) => {
                    // The rows come in the order of the side whose rows drive the join: the
                    // left, sorted on the keys, or the probing side as it is (a band, hash
                    // or index nested-loop join), or the left as it is (a nested loop).
                    let algorithm = &plan.node(*dst).algorithm;
                    let probing = match algorithm {
                        Algorithm::Band(b) if b.sorted == Side::Left => Some((r.clone(), Side::Right)),
                        Algorithm::Band(_) => Some((l.clone(), Side::Left)),
                        _ => probing_side(algorithm).map(|side| match side {
                            Side::Left => (l.clone(), Side::Left),
                            Side::Right => (r.clone(), Side::Right),
                        }),
                    };
                    let (l, r, perm) = match algorithm {
                        Algorithm::Hash { .. } | Algorithm::IndexNestedLoop { .. } | Algorithm::NestedLoop => {
                            searched_sides(algorithm, l, left_keys, r, right_keys)
                        }
                        _ => sort_sides(l, left_keys, r, right_keys),
                    };
                    key_perm = perm;
                    let (lead, lead_side) = match &probing {
                        Some((v, side)) => (v, *side),
                        None => (&l, Side::Left),
                    };
                    let mut sorted = Vec::new();
                    for k in lead.code_sorted() {
                        match output.iter().position(|o| o.side == lead_side && o.col == k.col) {
                            Some(p) => sorted.push(SortKey { col: p, desc: k.desc }),
                            None => break,
                        }
                    }
                    let covers =
                        |side: Side, v: &Val| (0..v.arity()).all(|c| output.contains(&JoinCol { side, col: c }));
                    let unique = l.o.unique && r.o.unique && covers(Side::Left, &l) && covers(Side::Right, &r);
                    Some(Val {
                        o: Order {
                            sorted,
                            ranked: false,
                            unique,
                        },
                        types: types.clone(),
                        pending: false,
                    })
                }
                _ => None,
            },
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
            } => match (settled(left), settled(right)) {
                (Some(l), Some(r)) => {
                    let (l, perm) = match_sides(&plan.node(*dst).algorithm, l, left_keys, r, right_keys);
                    key_perm = perm;
                    Some(l.with_types(types.clone()))
                }
                _ => None,
            },
            Op::Difference { left, right } => match (settled(left), settled(right)) {
                (Some(l), Some(r)) => {
                    let all: Vec<usize> = (0..l.arity()).collect();
                    let (l, perm) = match_sides(&plan.node(*dst).algorithm, l, &all, r, &all);
                    key_perm = perm;
                    Some(l.with_types(types.clone()))
                }
                _ => None,
            },
            Op::Aggregate { input, group, .. } => get(input).map(|v| {
                let perm = key_order(&v, group, &v, group);
                let order = asc(perm.iter().map(|&i| group[i]));
                let fused = plan.node(*dst).algorithm == Algorithm::Aggregate(AggAlgorithm::Fused);
                let ncols = types.len();
                key_perm = perm.clone();
                if fused && (v.pending || !v.code_sorted().starts_with(&order)) {
                    Val {
                        o: Order {
                            sorted: asc(0..ncols),
                            ranked: false,
                            unique: true,
                        },
                        types: types.clone(),
                        pending: false,
                    }
                } else {
                    unfuse = fused;
                    let mut sorted: Vec<SortKey> = perm.iter().map(|&i| SortKey::asc(i)).collect();
                    sorted.extend((group.len()..ncols).map(SortKey::asc));
                    Val {
                        o: Order {
                            sorted,
                            ranked: false,
                            unique: true,
                        },
                        types: types.clone(),
                        pending: false,
                    }
                }
            }),
            Op::MultiJoin {
                vars, output, count, ..
            } => {
                let o = if *count {
                    Order {
                        sorted: vec![SortKey::asc(0)],
                        ranked: false,
                        unique: true,
                    }
                } else {
                    let mut sorted = Vec::new();
                    for v in 0..vars.len() {
                        match output.iter().position(|&o| o == v) {
                            Some(p) => sorted.push(SortKey::asc(p)),
                            None => break,
                        }
                    }
                    Order {
                        sorted,
                        ranked: false,
                        unique: (0..vars.len()).all(|v| output.contains(&v)),
                    }
                };
                Some(Val {
                    o,
                    types: types.clone(),
                    pending: false,
                })
            }
        };
        if let Some(v) = v {
            out.push((
                *dst,
                OrderAnn {
                    provides: v.o.clone(),
                    key_order: key_perm,
                },
                unfuse,
            ));
            vals[dst.0 as usize] = Some(v);
        }
    }
}

/// A semi-join's sides: the right reduced to its key columns, both sorted on the keys
/// (a merge), or only the right (a hash or index nested-loop match), or neither (a nested
/// loop); the left as the match leaves it, and the key order.
fn match_sides(alg: &Algorithm, l: Val, lk: &[usize], r: Val, rk: &[usize]) -> (Val, Vec<usize>) {
    let r = if rk.is_empty() { r } else { r.project(rk) };
    let rk: Vec<usize> = (0..rk.len()).collect();
    let (l, _, perm) = match alg {
        Algorithm::Hash { .. } | Algorithm::IndexNestedLoop { .. } | Algorithm::NestedLoop => {
            searched_sides(alg, l, lk, r, &rk)
        }
        _ => sort_sides(l, lk, r, &rk),
    };
    (l, perm)
}

/// The side whose rows drive a hash, index nested-loop or nested-loop join, kept in its
/// order: the probing side, or the left of a nested loop. `None` for other algorithms.
pub(crate) fn probing_side(alg: &Algorithm) -> Option<Side> {
    match alg {
        Algorithm::Hash { build: s } | Algorithm::IndexNestedLoop { indexed: s } => Some(match s {
            Side::Left => Side::Right,
            Side::Right => Side::Left,
        }),
        Algorithm::NestedLoop => Some(Side::Left),
        _ => None,
    }
}

/// The sides of a hash or index nested-loop join: the built (indexed) side sorted on its
/// keys in an order that reuses its own existing sort first, the probing side as it is;
/// a nested loop sorts neither. Returns the sides and the key order.
fn searched_sides(alg: &Algorithm, l: Val, lk: &[usize], r: Val, rk: &[usize]) -> (Val, Val, Vec<usize>) {
    let searched = match alg {
        Algorithm::Hash { build: s } | Algorithm::IndexNestedLoop { indexed: s } => *s,
        _ => return (l, r, (0..lk.len()).collect()),
    };
    if lk.is_empty() {
        return (l, r, Vec::new());
    }
    match searched {
        Side::Left => {
            let perm = key_order(&l, lk, &l, lk);
            let l = l.sort_code(&asc(perm.iter().map(|&i| lk[i])));
            (l, r, perm)
        }
        Side::Right => {
            let perm = key_order(&r, rk, &r, rk);
            let r = r.sort_code(&asc(perm.iter().map(|&i| rk[i])));
            (l, r, perm)
        }
    }
}

/// Whether a value of order `o` (columns of `types`) is sorted in code order on the
/// columns `keys`, in some order of them, ascending.
pub(crate) fn sorted_on(o: &Order, types: &[Type], keys: &[usize]) -> bool {
    let s = o.code_sorted(types);
    let n = keys.len();
    n > 0
        && s.len() >= n
        && s[..n].iter().all(|k| !k.desc && keys.contains(&k.col))
        && (0..n).all(|i| !s[..i].iter().any(|k| k.col == s[i].col))
}

/// The order every result of `plan` has with the algorithms chosen so far (what
/// `join-selection` judges sides by before this pass runs), indexed by temp.
pub(crate) fn provisional(plan: &PhysPlan, stats: &Statistics) -> Vec<Option<Order>> {
    let mut out = Vec::new();
    for b in &plan.ra.blocks {
        block(plan, stats, b, &mut out);
    }
    let mut orders = vec![None; plan.ra.temps.len()];
    for (t, ann, _) in out {
        orders[t.0 as usize] = Some(ann.provides);
    }
    orders
}
