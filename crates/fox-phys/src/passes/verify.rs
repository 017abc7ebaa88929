//! `verify`: checks the invariants every pass must leave, so that a pass that breaks one
//! is caught at compile time rather than by a wrong kernel plan. It decides nothing.
//!
//! - every temp has one node (the annotations are indexed by temp);
//! - an algorithm is one its operator has: sort-merge on joins, semi-joins, anti-joins
//!   and differences; leapfrog triejoin on multi-way joins; an aggregation algorithm on
//!   aggregations;
//! - a deferred select is read, in its block, through projections only, by an
//!   aggregation that runs fused;
//! - a multi-way join's rounds name each of its variables (or none), never window a
//!   counted last level and give each window a positive row cost; a binary join's rounds
//!   are one positive window, on a join whose pairs come from an expansion and whose rows
//!   only an aggregation reads (`join_aggregated_by`; a join without keys too) or only a
//!   duplicate removal reads (`join_deduplicated_by`, with no rows moving between devices
//!   on the way), or on a
//!   join without keys that is not a band join whose only reader is the select right
//!   after it and that no aggregation alone reads (`join_filtered_by`: filtered per
//!   round), which is then not deferred (`join_rounds_end` chooses); no other
//!   operator has rounds;
//! - a leapfrog triejoin's level plan has one level per variable (or none); a level's
//!   members are the atoms binding its variable and its lead is one of them; only the
//!   last level of a counting join counts, with no twins or searches; a level expanded
//!   from the lead has twins among the other members (only where twins are allowed) and
//!   search groups that split the members left; a level expanded from the smallest range
//!   (only where allowed) has no twins, at least two sources, the lead first, each the
//!   first of a search group, and search groups that split all the members; search
//!   groups are ascending, non-empty and in the order of their first member; the state
//!   columns carried into a level are one per variable before it and two per atom with a
//!   variable at or after it;
//! - placement over devices (`placement`): nothing moves and every result is whole on
//!   one device; moves name inputs and columns the operator has; only multi-way joins
//!   of two or more variables split their work;
//! - an order names columns of the result; a key order is a permutation of the
//!   operator's key pairs (group columns), and empty for other operators;
//! - estimates are finite and non-negative, one distinct count per column, none above
//!   the rows.

use fox_ra::{MultiJoinInput, Op, TempId};
use fox_sema::core::Column;

use super::{join_rounds_end, lets, readers, JoinRoundsEnd, Pass, PhysError};
use crate::ann::{AggAlgorithm, Algorithm, Expand, Level, Partitioning, Redistribute};
use crate::levels::{carried_columns, Refinements};
use crate::stats::Statistics;
use crate::PhysPlan;

pub struct Verify;

impl Pass for Verify {
    fn name(&self) -> &'static str {
        "verify"
    }

    fn decides(&self) -> &'static str {
        "nothing: checks the invariants of the annotated plan"
    }

    fn run(&self, plan: &mut PhysPlan, _stats: &Statistics) -> Result<(), PhysError> {
        check(plan).map_err(|msg| PhysError::Invalid {
            pass: plan.ran.last().copied().unwrap_or("(none)"),
            msg,
        })
    }
}

/// The placement over devices: one device places every result whole and moves nothing;
/// a move names an input the operator has (each input at most once) and columns it has;
/// only a multi-way join over several devices splits its work, and hashed results name
/// their columns.
fn placement(plan: &PhysPlan, t: TempId, op: &Op) -> Option<String> {
    let n = plan.node(t);
    let inputs = op.inputs();
    let arity = |t: TempId| plan.ra.temps[t.0 as usize].columns.len().max(1);
    if plan.devices <= 1
        && (!n.moves.is_empty() || n.boxes > 0 || n.partial.is_some() || n.partitioning != Partitioning::Single)
    {
        return Some(format!("t{} is distributed over devices in a plan for one", t.0));
    }
    for (k, (i, m)) in n.moves.iter().enumerate() {
        let Some(&src) = inputs.get(*i) else {
            return Some(format!("t{} moves input {i}, which it does not have", t.0));
        };
        if n.moves[..k].iter().any(|(j, _)| j == i) {
            return Some(format!("t{} moves input {i} twice", t.0));
        }
        if let Redistribute::Hash { cols } | Redistribute::Keep { cols } = m {
            if cols.iter().any(|&c| c >= arity(src)) {
                return Some(format!("t{} hashes input {i} on a column it does not have", t.0));
            }
        }
    }
    if n.partial.is_some() && (!matches!(op, Op::Aggregate { .. }) || !n.moves.is_empty()) {
        return Some(format!(
            "t{} aggregates partially but is not an aggregation reading its input in place",
            t.0
        ));
    }
    if n.boxes > 0 && !matches!(op, Op::MultiJoin { vars, .. } if vars.len() >= 2) {
        return Some(format!(
            "t{} cuts its work into boxes of a first variable's bindings it does not have",
            t.0
        ));
    }
    if let (true, Op::MultiJoin { output, count, .. }) = (n.boxes > 0, op) {
        let placed = if *count {
            Partitioning::Single
        } else {
            super::boxed_listing_placement(output, plan.devices)
        };
        if n.partitioning != placed {
            return Some(format!(
                "t{} cuts its work into boxes the devices take by timing, but is placed as {:?}, not as its rows are moved after the boxes ({placed:?})",
                t.0, n.partitioning
            ));
        }
    }
    if n.boxes > 0 {
        // Every device joins its boxes against the whole of every input.
        for (i, &src) in inputs.iter().enumerate() {
            let broadcast = n.moves.iter().any(|(j, m)| *j == i && *m == Redistribute::Broadcast);
            let replicated = matches!(plan.node(src).partitioning, Partitioning::Replicated { .. });
            if !broadcast && !replicated {
                return Some(format!(
                    "t{} cuts its work into boxes but input {i} (t{}) is not whole on every device",
                    t.0, src.0
                ));
            }
        }
    }
    if let Partitioning::Hash { cols, .. } = &n.partitioning {
        if cols.is_empty() || cols.iter().any(|&c| c >= arity(t)) {
            return Some(format!("t{} is hashed on columns it does not have", t.0));
        }
    }
    None
}

fn check(plan: &PhysPlan) -> Result<(), String> {
    let ra = &plan.ra;
    if plan.nodes.len() != ra.temps.len() {
        return Err(format!("{} annotations for {} temps", plan.nodes.len(), ra.temps.len()));
    }
    for b in &ra.blocks {
        let readers = readers(b);
        for (t, op) in lets(b) {
            let n = plan.node(t);
            let ok = matches!(
                (&n.algorithm, op),
                (Algorithm::Direct, _)
                    | (
                        Algorithm::SortMerge,
                        Op::Join { .. } | Op::SemiJoin { .. } | Op::AntiJoin { .. } | Op::Difference { .. },
                    )
                    | (Algorithm::Lftj { .. }, Op::MultiJoin { .. })
                    | (Algorithm::Band(_), Op::Join { .. })
                    | (Algorithm::Aggregate(_), Op::Aggregate { .. })
                    | (
                        Algorithm::Hash { .. } | Algorithm::IndexNestedLoop { .. } | Algorithm::NestedLoop,
                        Op::Join { .. } | Op::SemiJoin { .. } | Op::AntiJoin { .. } | Op::Difference { .. },
                    )
            );
            if !ok {
                return Err(format!(
                    "t{} has the algorithm {:?}, which its operator does not have",
                    t.0, n.algorithm
                ));
            }
            if let Some(msg) = searched_join(ra, t, &n.algorithm, op) {
                return Err(msg);
            }
            if let Some(msg) = placement(plan, t, op) {
                return Err(msg);
            }
            if let (Algorithm::Band(band), Op::Join { left, right, .. }) = (&n.algorithm, op) {
                let sole_select = matches!(readers.get(&t).map(Vec::as_slice), Some([Some((_, Op::Select { .. }))]));
                if !sole_select {
                    return Err(format!("t{} is a band join but is not read by one select only", t.0));
                }
                let arity = |x: &TempId| ra.temps.get(x.0 as usize).map_or(0, |s| s.columns.len());
                let (sorted, probe) = match band.sorted {
                    fox_ra::Side::Left => (arity(left), arity(right)),
                    fox_ra::Side::Right => (arity(right), arity(left)),
                };
                let bounds = [band.lower, band.upper];
                if band.col >= sorted
                    || bounds.iter().all(Option::is_none)
                    || bounds.iter().flatten().any(|b| b.col >= probe)
                {
                    return Err(format!("t{} has a band plan its inputs contradict", t.0));
                }
                if let Some(inner) = &band.inner {
                    let bounds = [inner.lower, inner.upper];
                    if inner.col >= sorted
                        || inner.col == band.col
                        || bounds.iter().all(Option::is_none)
                        || bounds.iter().flatten().any(|b| b.col >= probe)
                    {
                        return Err(format!("t{} has an inequality join plan its inputs contradict", t.0));
                    }
                }
            }
            if let Some(agg) = n.deferred_into {
                if !matches!(op, Op::Select { .. }) {
                    return Err(format!("t{} is deferred but is not a select", t.0));
                }
                let mut cur = t;
                loop {
                    let (next, reader) = match readers.get(&cur).map(Vec::as_slice) {
                        Some([Some((r, op))]) => (*r, *op),
                        _ => {
                            return Err(format!(
                                "select t{} is deferred into t{}, which does not read it",
                                t.0, agg.0
                            ))
                        }
                    };
                    match reader {
                        Op::Project { .. } if next != agg => cur = next,
                        Op::Aggregate { .. } if next == agg => break,
                        _ => {
                            return Err(format!(
                                "select t{} is deferred into t{}, which does not read it",
                                t.0, agg.0
                            ))
                        }
                    }
                }
                if plan.node(agg).algorithm != Algorithm::Aggregate(AggAlgorithm::Fused) {
                    return Err(format!(
                        "select t{} is deferred into t{}, which does not run fused",
                        t.0, agg.0
                    ));
                }
            }
            match op {
                Op::MultiJoin {
                    vars, inputs, count, ..
                } => {
                    let w = n.rounds.windows.len();
                    if w != 0 && w != vars.len() {
                        return Err(format!("t{} has rounds for {w} of its {} variables", t.0, vars.len()));
                    }
                    if *count && n.rounds.windows.last().is_some_and(Option::is_some) {
                        return Err(format!("t{} expands its counted last level in rounds", t.0));
                    }
                    if n.rounds.windows.contains(&Some(0)) {
                        return Err(format!("t{} has a windowed level whose rows cost nothing", t.0));
                    }
                    if let Algorithm::Lftj {
                        min_range,
                        twins,
                        levels,
                    } = &n.algorithm
                    {
                        let allowed = Refinements {
                            min_range: *min_range,
                            twins: *twins,
                        };
                        check_levels(levels, vars, inputs, *count, allowed)
                            .map_err(|m| format!("the level plan of t{}: {m}", t.0))?;
                    }
                }
                Op::Join { left_keys, .. } if !n.rounds.windows.is_empty() => {
                    if !matches!(n.rounds.windows.as_slice(), [Some(b)] if *b > 0) {
                        return Err(format!("t{} is a join with rounds other than one positive window", t.0));
                    }
                    let keys = left_keys.len();
                    let end = join_rounds_end(&b.stmts, t, &n.algorithm, keys);
                    let filtered = match end {
                        Some(JoinRoundsEnd::Select(s)) => Some(s),
                        _ => None,
                    };
                    if end.is_none() {
                        return Err(format!(
                            "t{} is written in rounds but is neither an expanding join read only by an aggregation or a duplicate removal nor a join without keys read only by a select",
                            t.0
                        ));
                    }
                    if let Some(JoinRoundsEnd::Unique(u)) = end {
                        if super::rounds::chain_moves(plan, &b.stmts, t, u) {
                            return Err(format!(
                                "t{} is deduplicated per round by t{}, but rows move between devices on the way",
                                t.0, u.0
                            ));
                        }
                    }
                    if let Some(s) = filtered.filter(|s| plan.node(*s).deferred_into.is_some()) {
                        return Err(format!(
                            "t{} is filtered per round by t{}, which is deferred into an aggregation",
                            t.0, s.0
                        ));
                    }
                }
                _ if !n.rounds.windows.is_empty() => {
                    return Err(format!(
                        "t{} has rounds but is neither a multi-way join nor a join",
                        t.0
                    ));
                }
                _ => {}
            }
            if let Some(o) = &n.order {
                let arity = ra.temps[t.0 as usize].columns.len();
                if o.provides.sorted.iter().any(|k| k.col >= arity) {
                    return Err(format!("t{} is sorted on a column it does not have", t.0));
                }
                let nkeys = match op {
                    Op::Join { left_keys, .. } | Op::SemiJoin { left_keys, .. } | Op::AntiJoin { left_keys, .. } => {
                        Some(left_keys.len())
                    }
                    Op::Aggregate { group, .. } => Some(group.len()),
                    Op::Difference { left, .. } => Some(ra.temps[left.0 as usize].columns.len()),
                    _ => None,
                };
                let mut perm = o.key_order.clone();
                perm.sort_unstable();
                let is_perm = perm.iter().copied().eq(0..nkeys.unwrap_or(0));
                if !is_perm {
                    return Err(format!("t{} compares its keys in the order {:?}", t.0, o.key_order));
                }
            }
            if let Some(e) = &n.est {
                let arity = ra.temps[t.0 as usize].columns.len();
                if !(e.rows.is_finite() && e.rows >= 0.0)
                    || e.distinct.len() != arity
                    || e.distinct.iter().any(|d| !(d.is_finite() && *d >= 0.0 && *d <= e.rows))
                {
                    return Err(format!("t{} has an inconsistent estimate {e:?}", t.0));
                }
            }
        }
    }
    Ok(())
}

/// The invariants of a leapfrog triejoin's level plan (see the module's list).
fn check_levels(
    levels: &[Level],
    vars: &[Column],
    inputs: &[MultiJoinInput],
    count: bool,
    allowed: Refinements,
) -> Result<(), String> {
    if levels.is_empty() {
        return Ok(());
    }
    if levels.len() != vars.len() {
        return Err(format!("{} levels for {} variables", levels.len(), vars.len()));
    }
    let atoms: Vec<&MultiJoinInput> = inputs.iter().filter(|i| !i.vars.is_empty()).collect();
    for (v, (l, var)) in levels.iter().zip(vars).enumerate() {
        let at = |m: String| format!("level `{}`: {m}", var.name);
        let binding: Vec<usize> = (0..atoms.len()).filter(|&a| atoms[a].vars.contains(&v)).collect();
        if l.members != binding {
            return Err(at(format!(
                "the members {:?} are not the atoms binding the variable {binding:?}",
                l.members
            )));
        }
        if !l.members.contains(&l.lead) {
            return Err(at(format!("the lead a{} is not a member", l.lead)));
        }
        let counted = count && v + 1 == vars.len();
        if counted != (l.expand == Expand::Count) {
            return Err(at("only the last level of a counting join is counted".into()));
        }
        for g in &l.searches {
            if g.is_empty() || !g.windows(2).all(|w| w[0] < w[1]) {
                return Err(at(format!("the search group {g:?} is not ascending")));
            }
        }
        if !l.searches.windows(2).all(|w| w[0][0] < w[1][0]) {
            return Err(at("the search groups are not in the order of their first member".into()));
        }
        let mut searching: Vec<usize> = l.searches.iter().flatten().copied().collect();
        searching.sort_unstable();
        let others =
            |skip: &[usize]| -> Vec<usize> { l.members.iter().copied().filter(|a| !skip.contains(a)).collect() };
        match &l.expand {
            Expand::Count => {
                if !l.twins.is_empty() || !l.searches.is_empty() {
                    return Err(at("a counted level has twins or searches".into()));
                }
            }
            Expand::Lead => {
                if !l.twins.is_empty() && !allowed.twins {
                    return Err(at("it has twins, which its algorithm does not allow".into()));
                }
                let mut followers = vec![l.lead];
                for &a in &l.twins {
                    if !l.members.contains(&a) || followers.contains(&a) {
                        return Err(at(format!("the twin a{a} is not another member")));
                    }
                    followers.push(a);
                }
                if searching != others(&followers) {
                    return Err(at(format!(
                        "the searches {:?} are not the members other than the lead and its twins",
                        l.searches
                    )));
                }
            }
            Expand::Smallest(sources) => {
                if !allowed.min_range {
                    return Err(at(
                        "it expands from the smallest range, which its algorithm does not allow".into(),
                    ));
                }
                if !l.twins.is_empty() {
                    return Err(at("it expands from the smallest range and has twins".into()));
                }
                if sources.len() < 2 || sources[0] != l.lead {
                    return Err(at(format!(
                        "it expands from the smallest of {sources:?}, not two ranges or more, the lead first"
                    )));
                }
                if let Some(a) = sources.iter().find(|&&a| !l.searches.iter().any(|g| g[0] == a)) {
                    return Err(at(format!("the source a{a} is not the first of a search group")));
                }
                if searching != l.members {
                    return Err(at(format!("the searches {:?} are not the members", l.searches)));
                }
            }
        }
        let carried = carried_columns(inputs, v);
        if l.carried != carried {
            return Err(at(format!(
                "it carries {} state columns, where the join has {carried}",
                l.carried
            )));
        }
    }
    Ok(())
}

/// Why a hash, index nested-loop or nested-loop operator contradicts its inputs: it needs
/// keys (a difference: columns), and a semi-join, anti-join or difference builds or
/// indexes its right side.
fn searched_join(ra: &fox_ra::RaPlan, t: TempId, alg: &Algorithm, op: &Op) -> Option<String> {
    let side = match alg {
        Algorithm::Hash { build: s } | Algorithm::IndexNestedLoop { indexed: s } => Some(*s),
        Algorithm::NestedLoop => None,
        _ => return None,
    };
    let nkeys = match op {
        Op::Join { left_keys, .. } | Op::SemiJoin { left_keys, .. } | Op::AntiJoin { left_keys, .. } => left_keys.len(),
        Op::Difference { left, .. } => ra.temps.get(left.0 as usize).map_or(0, |s| s.columns.len()),
        _ => return None,
    };
    if nkeys == 0 {
        return Some(format!("t{} is an equi-join by {alg:?} without keys", t.0));
    }
    if !matches!(op, Op::Join { .. }) && side == Some(fox_ra::Side::Left) {
        return Some(format!(
            "t{} matches by {alg:?}, but a match searches its right side",
            t.0
        ));
    }
    None
}
