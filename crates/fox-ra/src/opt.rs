//! Rewrites of a planned [`RaPlan`] that a rule-at-a-time planner does not see:
//!
//! * **inlining**: a derived relation that is stored once and scanned once, in the same
//!   block after the store, and is neither output nor read by a loop, is the temp stored
//!   into it: the scan reads that temp and the store goes away;
//! * **common subexpressions**: within a block, a `Let` whose operator (over the same
//!   temps) was already computed since the last write of the relations it scans reuses
//!   that temp (the atoms `edge(x, y), edge(y, z), edge(x, z)` of a triangle scan and
//!   filter `edge` once, so the multi-way join builds one trie);
//! * **counting joins**: `count()` of the bindings of a multi-way join, with nothing
//!   grouped, becomes a counting [`Op::MultiJoin`] that never materialises the last
//!   variable;
//! * **dead temps**: `Let`s whose temp nobody reads are dropped.
//!
//! Every rewrite keeps each temp's schema valid: a temp that replaces another has the
//! same column types and at least its order and uniqueness.

use crate::ir::*;
use fox_sema::core::AggFunc;
use std::collections::HashMap;

/// Applies the rewrites above, in that order.
pub fn optimize(plan: &mut RaPlan) {
    inline_relations(plan);
    for b in 0..plan.blocks.len() {
        common_subexpressions(plan, b);
    }
    for b in 0..plan.blocks.len() {
        count_joins(plan, b);
    }
    for b in 0..plan.blocks.len() {
        drop_dead(plan, b);
    }
    renumber(plan);
}

/// Numbers the temps that are still defined `t0, t1, …` in the order of their
/// definitions, and drops the schemas of the others.
fn renumber(plan: &mut RaPlan) {
    let mut map = HashMap::new();
    let mut temps = Vec::new();
    for b in &plan.blocks {
        for s in &b.stmts {
            if let Stmt::Let { dst, .. } = s {
                map.insert(*dst, TempId(temps.len() as u32));
                temps.push(plan.temps[dst.0 as usize].clone());
            }
        }
    }
    for b in &mut plan.blocks {
        for s in &mut b.stmts {
            rename(s, &map);
            if let Stmt::Let { dst, .. } = s {
                *dst = map[dst];
            }
        }
    }
    plan.temps = temps;
}

/// Replaces reads of temps by `map` in a statement.
fn rename(stmt: &mut Stmt, map: &HashMap<TempId, TempId>) {
    let fix = |t: &mut TempId| {
        if let Some(&n) = map.get(t) {
            *t = n;
        }
    };
    match stmt {
        Stmt::Let { op, .. } => op.inputs_mut().into_iter().for_each(fix),
        Stmt::Store { src, .. } | Stmt::Output { src, .. } | Stmt::CheckFunctional { src, .. } => fix(src),
        Stmt::Merge { .. } | Stmt::Assign { .. } | Stmt::Clear { .. } => {}
    }
}

/// How often each temp of a block is read.
fn reads(block: &Block) -> HashMap<TempId, usize> {
    let mut n = HashMap::new();
    for s in &block.stmts {
        match s {
            Stmt::Let { op, .. } => {
                for t in op.inputs() {
                    *n.entry(t).or_insert(0) += 1;
                }
            }
            Stmt::Store { src, .. } | Stmt::Output { src, .. } | Stmt::CheckFunctional { src, .. } => {
                *n.entry(*src).or_insert(0) += 1
            }
            Stmt::Merge { .. } | Stmt::Assign { .. } | Stmt::Clear { .. } => {}
        }
    }
    n
}

/// Inlines every derived relation stored once and scanned once after the store in the
/// same block (not output, cleared, merged, assigned or read by a loop): one pass over
/// the plan finds them all, one renames the scans' readers, one drops the pairs.
fn inline_relations(plan: &mut RaPlan) {
    let n = plan.relations.len();
    let mut excluded = vec![false; n];
    for x in &plan.relations {
        if let RelKind::Delta { of } | RelKind::New { of } = x.kind {
            if let Some(e) = excluded.get_mut(of.0 as usize) {
                *e = true;
            }
        }
    }
    for b in &plan.blocks {
        if let Terminator::LoopIf { nonempty, .. } = &b.term {
            for r in nonempty {
                if let Some(e) = excluded.get_mut(r.0 as usize) {
                    *e = true;
                }
            }
        }
    }
    // Per relation: its stores and scans as (block, statement, temp).
    let mut stores: Vec<Vec<(usize, usize, TempId)>> = vec![Vec::new(); n];
    let mut scans: Vec<Vec<(usize, usize, TempId)>> = vec![Vec::new(); n];
    for (bi, b) in plan.blocks.iter().enumerate() {
        for (si, s) in b.stmts.iter().enumerate() {
            let mut exclude = |r: &RelId| {
                if let Some(e) = excluded.get_mut(r.0 as usize) {
                    *e = true;
                }
            };
            match s {
                Stmt::Store { rel, src } => {
                    if let Some(v) = stores.get_mut(rel.0 as usize) {
                        v.push((bi, si, *src));
                    }
                }
                Stmt::Let {
                    dst, op: Op::Scan(rel), ..
                } => {
                    if let Some(v) = scans.get_mut(rel.0 as usize) {
                        v.push((bi, si, *dst));
                    }
                }
                Stmt::Merge { into: a, from: b } | Stmt::Assign { dst: a, src: b } => {
                    exclude(a);
                    exclude(b);
                }
                Stmt::Clear { rel } | Stmt::Output { rel, .. } => exclude(rel),
                Stmt::Let { .. } | Stmt::CheckFunctional { .. } => {}
            }
        }
    }
    let mut map: HashMap<TempId, TempId> = HashMap::new();
    let mut drop: Vec<Vec<usize>> = vec![Vec::new(); plan.blocks.len()];
    for r in 0..n {
        if plan.relations[r].kind != RelKind::Derived || excluded[r] {
            continue;
        }
        let ([(sb, ss, src)], [(cb, cs, dst)]) = (stores[r].as_slice(), scans[r].as_slice()) else {
            continue;
        };
        if sb != cb || cs < ss {
            continue;
        }
        map.insert(*dst, *src);
        drop[*sb].push(*ss);
        drop[*sb].push(*cs);
    }
    if map.is_empty() {
        return;
    }
    // A stored temp may itself be the scan of an inlined relation: follow the chain.
    let keys: Vec<TempId> = map.keys().copied().collect();
    for k in keys {
        let mut t = map[&k];
        let mut steps = 0;
        while let Some(&next) = map.get(&t) {
            t = next;
            steps += 1;
            if steps > map.len() {
                break;
            }
        }
        map.insert(k, t);
    }
    for (b, block) in plan.blocks.iter_mut().enumerate() {
        for s in &mut block.stmts {
            rename(s, &map);
        }
        let mut gone = std::mem::take(&mut drop[b]);
        if gone.is_empty() {
            continue;
        }
        gone.sort_unstable();
        let mut k = 0;
        let mut i = 0;
        block.stmts.retain(|_| {
            let keep = gone.get(k) != Some(&i);
            if !keep {
                k += 1;
            }
            i += 1;
            keep
        });
    }
}

/// A hash of an operator, for finding an equal one among those computed (`Op` has no
/// `Hash`: it holds floats). Equal operators print alike, so they hash alike.
fn op_key(op: &Op) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    format!("{op:?}").hash(&mut h);
    h.finish()
}

fn common_subexpressions(plan: &mut RaPlan, b: usize) {
    let mut map: HashMap<TempId, TempId> = HashMap::new();
    // The operators computed so far, by key, with their temps; a scan holds while its
    // relation's write count is the one it was computed at.
    let mut seen: HashMap<u64, Vec<(Op, TempId, u64)>> = HashMap::new();
    let mut writes: HashMap<RelId, u64> = HashMap::new();
    let stmts = std::mem::take(&mut plan.blocks[b].stmts);
    let mut out = Vec::with_capacity(stmts.len());
    for mut s in stmts {
        rename(&mut s, &map);
        match &s {
            Stmt::Let { dst, op, .. } => {
                let key = op_key(op);
                let now = match op {
                    Op::Scan(r) => writes.get(r).copied().unwrap_or(0),
                    _ => 0,
                };
                let same = seen.get(&key).and_then(|v| {
                    v.iter().find(|(o, t, at)| {
                        *at == now
                            && o == op
                            && plan.temps[t.0 as usize]
                                .props
                                .implies(&plan.temps[dst.0 as usize].props)
                    })
                });
                if let Some(&(_, t, _)) = same {
                    map.insert(*dst, t);
                    continue;
                }
                seen.entry(key).or_default().push((op.clone(), *dst, now));
            }
            Stmt::Store { rel, .. }
            | Stmt::Merge { into: rel, .. }
            | Stmt::Assign { dst: rel, .. }
            | Stmt::Clear { rel } => {
                *writes.entry(*rel).or_insert(0) += 1;
            }
            Stmt::Output { .. } | Stmt::CheckFunctional { .. } => {}
        }
        out.push(s);
    }
    plan.blocks[b].stmts = out;
}

fn count_joins(plan: &mut RaPlan, b: usize) {
    loop {
        let n = reads(&plan.blocks[b]);
        let once = |t: &TempId| n.get(t) == Some(&1);
        let def: HashMap<TempId, (usize, &Op)> = plan.blocks[b]
            .stmts
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Stmt::Let { dst, op, .. } => Some((*dst, (i, op))),
                _ => None,
            })
            .collect();
        let mut rewrite = None;
        for (i, s) in plan.blocks[b].stmts.iter().enumerate() {
            let Stmt::Let {
                op: Op::Aggregate { input, group, aggs },
                ..
            } = s
            else {
                continue;
            };
            let counts = aggs.len() == 1 && aggs[0].func == AggFunc::Count && aggs[0].arg.is_none();
            if !group.is_empty() || !counts || !once(input) {
                continue;
            }
            // The counted rows: one per binding of a multi-way join, either directly or as
            // the empty projection of its distinct bindings.
            let join = match def.get(input) {
                Some((
                    _,
                    Op::MultiJoin {
                        output, count: false, ..
                    },
                )) if output.is_empty() => *input,
                Some((_, Op::Project { input: m, cols })) if cols.is_empty() && once(m) => match def.get(m) {
                    Some((
                        _,
                        Op::MultiJoin {
                            vars,
                            output,
                            count: false,
                            ..
                        },
                    )) if output.iter().copied().eq(0..vars.len()) => *m,
                    _ => continue,
                },
                _ => continue,
            };
            let Some((_, Op::MultiJoin { vars, inputs, .. })) = def.get(&join) else {
                continue;
            };
            if inputs.iter().any(|i| i.vars.is_empty()) {
                continue;
            }
            let op = Op::MultiJoin {
                vars: vars.clone(),
                inputs: inputs.clone(),
                output: Vec::new(),
                count: true,
            };
            rewrite = Some((i, op));
            break;
        }
        let Some((i, op)) = rewrite else {
            return;
        };
        if let Stmt::Let { op: o, .. } = &mut plan.blocks[b].stmts[i] {
            *o = op;
        }
        drop_dead(plan, b);
    }
}

/// Drops the `Let`s whose temps nobody reads, and then those only they read, and so on.
fn drop_dead(plan: &mut RaPlan, b: usize) {
    let block = &mut plan.blocks[b];
    let mut n = reads(block);
    let mut def: HashMap<TempId, usize> = HashMap::new();
    for (i, s) in block.stmts.iter().enumerate() {
        if let Stmt::Let { dst, .. } = s {
            def.insert(*dst, i);
        }
    }
    let mut dead = vec![false; block.stmts.len()];
    let mut work: Vec<usize> = block
        .stmts
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s, Stmt::Let { dst, .. } if !n.contains_key(dst)))
        .map(|(i, _)| i)
        .collect();
    while let Some(i) = work.pop() {
        if dead[i] {
            continue;
        }
        dead[i] = true;
        let Stmt::Let { op, .. } = &block.stmts[i] else {
            continue;
        };
        for t in op.inputs() {
            if let Some(c) = n.get_mut(&t) {
                *c -= 1;
                if *c == 0 {
                    n.remove(&t);
                    if let Some(&j) = def.get(&t) {
                        work.push(j);
                    }
                }
            }
        }
    }
    let mut i = 0;
    block.stmts.retain(|_| {
        i += 1;
        !dead[i - 1]
    });
}
