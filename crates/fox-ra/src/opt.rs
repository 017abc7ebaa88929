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

fn inline_relations(plan: &mut RaPlan) {
    for r in 0..plan.relations.len() {
        let rel = RelId(r as u32);
        if plan.relations[r].kind != RelKind::Derived {
            continue;
        }
        let dependent = plan
            .relations
            .iter()
            .any(|x| matches!(x.kind, RelKind::Delta { of } | RelKind::New { of } if of == rel));
        let in_loop = plan
            .blocks
            .iter()
            .any(|b| matches!(&b.term, Terminator::LoopIf { nonempty, .. } if nonempty.contains(&rel)));
        if dependent || in_loop {
            continue;
        }
        let mut stores = Vec::new();
        let mut scans = Vec::new();
        let mut other = false;
        for (bi, b) in plan.blocks.iter().enumerate() {
            for (si, s) in b.stmts.iter().enumerate() {
                match s {
                    Stmt::Store { rel: x, src } if *x == rel => stores.push((bi, si, *src)),
                    Stmt::Let {
                        dst, op: Op::Scan(x), ..
                    } if *x == rel => scans.push((bi, si, *dst)),
                    Stmt::Merge { into: a, from: b } | Stmt::Assign { dst: a, src: b } if *a == rel || *b == rel => {
                        other = true
                    }
                    Stmt::Clear { rel: x } | Stmt::Output { rel: x, .. } if *x == rel => other = true,
                    _ => {}
                }
            }
        }
        let ([(sb, ss, src)], [(cb, cs, dst)]) = (stores.as_slice(), scans.as_slice()) else {
            continue;
        };
        if other || sb != cb || cs < ss {
            continue;
        }
        let (b, ss, cs, src, dst) = (*sb, *ss, *cs, *src, *dst);
        let map = HashMap::from([(dst, src)]);
        let block = &mut plan.blocks[b];
        for s in &mut block.stmts[cs + 1..] {
            rename(s, &map);
        }
        block.stmts.remove(cs);
        block.stmts.remove(ss);
    }
}

fn common_subexpressions(plan: &mut RaPlan, b: usize) {
    let mut map: HashMap<TempId, TempId> = HashMap::new();
    // The operators computed so far, with their temps.
    let mut seen: Vec<(Op, TempId)> = Vec::new();
    let stmts = std::mem::take(&mut plan.blocks[b].stmts);
    let mut out = Vec::with_capacity(stmts.len());
    for mut s in stmts {
        rename(&mut s, &map);
        match &s {
            Stmt::Let { dst, op, .. } => {
                let same = seen.iter().find(|(o, t)| {
                    o == op
                        && plan.temps[t.0 as usize]
                            .props
                            .implies(&plan.temps[dst.0 as usize].props)
                });
                if let Some(&(_, t)) = same {
                    map.insert(*dst, t);
                    continue;
                }
                seen.push((op.clone(), *dst));
            }
            Stmt::Store { rel, .. }
            | Stmt::Merge { into: rel, .. }
            | Stmt::Assign { dst: rel, .. }
            | Stmt::Clear { rel } => {
                let rel = *rel;
                seen.retain(|(o, _)| !matches!(o, Op::Scan(r) if *r == rel));
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

fn drop_dead(plan: &mut RaPlan, b: usize) {
    loop {
        let n = reads(&plan.blocks[b]);
        let before = plan.blocks[b].stmts.len();
        plan.blocks[b]
            .stmts
            .retain(|s| !matches!(s, Stmt::Let { dst, .. } if !n.contains_key(dst)));
        if plan.blocks[b].stmts.len() == before {
            return;
        }
    }
}
