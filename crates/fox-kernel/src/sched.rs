//! Clean-up and list scheduling of the lowered blocks.
//!
//! * Copy propagation: a `Move` into a buffer that is defined once and read only later in
//!   the same block is removed, and its readers read the source instead, when the source
//!   keeps its value until the last of them.
//! * Common launches: a launch repeating an earlier one of the same block (same kernel,
//!   same arguments, none redefined since) is dropped and its readers read the earlier
//!   outputs, when all those outputs are defined once and read only in that block.
//! * Dead code: a launch or move whose outputs are all dead is removed (repeated until
//!   nothing changes). Loading an input is kept, so that every declared input is read and
//!   checked.
//! * List scheduling: each block is reordered so that values are computed right before
//!   their first use. The order is a depth-first post-order of the dependence graph
//!   (read after write, write after read, write after write, and the order of the
//!   instructions with effects: outputs, input loads, dictionary tables and
//!   string-producing kernels), started from the instructions nothing depends on, in
//!   their original order. Observations (`Observe`) keep nothing alive and take no part
//!   in the order: each follows the definitions of the columns it counts.

use crate::bitset::SparseSet;
use crate::ir::*;
use crate::live::{defs, liveness, term_uses, uses};

pub(crate) fn optimize(plan: &mut KernelPlan) {
    copy_propagate(plan);
    common_launches(plan);
    dead_code(plan);
    for b in &mut plan.blocks {
        schedule(b);
    }
}

fn copy_propagate(plan: &mut KernelPlan) {
    use std::collections::HashMap;
    let (mut ndefs, reader) = def_counts(plan);
    for (bi, b) in plan.blocks.iter_mut().enumerate() {
        // Per buffer: the instructions of the block that read it and that define it, kept
        // as moves are removed (a removed move is marked, not taken out, until the end).
        let mut readers: HashMap<BufId, Vec<usize>> = HashMap::new();
        let mut definers: HashMap<BufId, Vec<usize>> = HashMap::new();
        for (j, ins) in b.instrs.iter().enumerate() {
            let mut us = uses(ins);
            us.sort_unstable();
            us.dedup();
            for u in us {
                readers.entry(u).or_default().push(j);
            }
            for d in defs(ins) {
                definers.entry(d).or_default().push(j);
            }
        }
        let mut removed = vec![false; b.instrs.len()];
        for i in 0..b.instrs.len() {
            let Instr::Move { dst, src } = b.instrs[i] else {
                continue;
            };
            let eligible = ndefs[dst.0 as usize] == 1 && reader[dst.0 as usize].is_none_or(|r| r == bi) && dst != src;
            if !eligible {
                continue;
            }
            let rs: Vec<usize> = readers
                .get(&dst)
                .map(|v| v.iter().copied().filter(|&j| !removed[j]).collect())
                .unwrap_or_default();
            if rs.iter().any(|&j| j < i) {
                continue;
            }
            let last = rs.iter().copied().max().unwrap_or(i);
            let src_kept = definers
                .get(&src)
                .is_none_or(|ds| ds.iter().all(|&j| removed[j] || j <= i || j > last));
            if !src_kept {
                continue;
            }
            for &j in &rs {
                replace_use(&mut b.instrs[j], dst, src);
            }
            readers.remove(&dst);
            readers.entry(src).or_default().extend(rs);
            removed[i] = true;
            ndefs[dst.0 as usize] = 0;
        }
        let mut k = 0;
        b.instrs.retain(|_| {
            k += 1;
            !removed[k - 1]
        });
    }
}

/// For each buffer: how many instructions define it, and whether it is read outside one
/// block (or by a terminator).
fn def_counts(plan: &KernelPlan) -> (Vec<usize>, Vec<Option<usize>>) {
    let n = plan.buffers.len();
    let mut ndefs = vec![0usize; n];
    let mut reader: Vec<Option<usize>> = vec![None; n];
    for (bi, b) in plan.blocks.iter().enumerate() {
        for i in &b.instrs {
            for d in defs(i) {
                ndefs[d.0 as usize] += 1;
            }
            for u in uses(i) {
                let r = &mut reader[u.0 as usize];
                *r = match *r {
                    None => Some(bi),
                    Some(x) if x == bi => Some(bi),
                    Some(_) => Some(usize::MAX),
                };
            }
        }
        for u in term_uses(&b.term) {
            reader[u.0 as usize] = Some(usize::MAX);
        }
    }
    (ndefs, reader)
}

/// A hash of a launch's kernel and arguments, for finding an equal earlier launch
/// (kernels hold floats, so they have no `Hash`; equal launches print alike).
fn launch_key(kernel: &Kernel, args: &[BufId]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    format!("{kernel:?}").hash(&mut h);
    args.hash(&mut h);
    h.finish()
}

fn common_launches(plan: &mut KernelPlan) {
    use std::collections::{HashMap, HashSet};
    let (ndefs, reader) = def_counts(plan);
    let local = |b: BufId, bi: usize| ndefs[b.0 as usize] == 1 && reader[b.0 as usize].is_none_or(|r| r == bi);
    for (bi, block) in plan.blocks.iter_mut().enumerate() {
        // Earlier pure launches whose arguments still hold the same values: by key, and
        // by each buffer they read or write (a new definition of one retires them).
        let mut avail: HashMap<u64, Vec<usize>> = HashMap::new();
        let mut valid: Vec<bool> = vec![false; block.instrs.len()];
        let mut by_buf: HashMap<BufId, Vec<usize>> = HashMap::new();
        let mut subst: HashMap<BufId, BufId> = HashMap::new();
        let mut dropped = HashSet::new();
        for j in 0..block.instrs.len() {
            if !subst.is_empty() {
                for u in uses(&block.instrs[j]) {
                    if let Some(&to) = subst.get(&u) {
                        replace_use(&mut block.instrs[j], u, to);
                    }
                }
            }
            let i = &block.instrs[j];
            let pure = matches!(i, Instr::Launch { outs, .. } if removable(i) && !has_effect(i) && outs.iter().all(|&o| local(o, bi)));
            let key = match i {
                Instr::Launch { kernel, args, .. } if pure => Some(launch_key(kernel, args)),
                _ => None,
            };
            if let (Some(key), Instr::Launch { kernel, args, outs, .. }) = (key, i) {
                let same = avail.get(&key).and_then(|ks| {
                    ks.iter().copied().find(|&k| {
                        valid[k]
                            && matches!(&block.instrs[k], Instr::Launch { kernel: k2, args: a2, .. } if k2 == kernel && a2 == args)
                    })
                });
                if let Some(k) = same {
                    if let Instr::Launch { outs: earlier, .. } = &block.instrs[k] {
                        for (&o, &e) in outs.iter().zip(earlier) {
                            subst.insert(o, e);
                        }
                    }
                    dropped.insert(j);
                    continue;
                }
            }
            for d in defs(i) {
                for k in by_buf.remove(&d).unwrap_or_default() {
                    valid[k] = false;
                }
            }
            if let (Some(key), Instr::Launch { args, outs, .. }) = (key, i) {
                avail.entry(key).or_default().push(j);
                valid[j] = true;
                for &b in args.iter().chain(outs) {
                    by_buf.entry(b).or_default().push(j);
                }
            }
        }
        let mut k = 0;
        block.instrs.retain(|_| {
            k += 1;
            !dropped.contains(&(k - 1))
        });
    }
}

fn replace_use(i: &mut Instr, from: BufId, to: BufId) {
    let sub = |b: &mut BufId| {
        if *b == from {
            *b = to;
        }
    };
    match i {
        Instr::Launch { args, .. } => args.iter_mut().for_each(sub),
        Instr::Move { src, .. } => sub(src),
        Instr::Output { cols, .. } => cols.iter_mut().for_each(sub),
        Instr::Assert { args, .. } => args.iter_mut().for_each(sub),
        Instr::Observe { bufs, .. } => bufs.iter_mut().for_each(sub),
        Instr::Free { .. } => {}
    }
}

fn removable(i: &Instr) -> bool {
    match i {
        Instr::Launch { kernel, .. } => !matches!(kernel, Kernel::LoadInput { .. }),
        Instr::Move { .. } => true,
        Instr::Free { .. } | Instr::Output { .. } | Instr::Assert { .. } | Instr::Observe { .. } => false,
    }
}

fn dead_code(plan: &mut KernelPlan) {
    loop {
        let (_, live_out) = liveness(plan);
        let mut removed = false;
        let mut live = SparseSet::new(plan.buffers.len());
        for (b, block) in plan.blocks.iter_mut().enumerate() {
            live.reset_to(&live_out[b]);
            for u in term_uses(&block.term) {
                live.insert(u);
            }
            let mut keep = vec![true; block.instrs.len()];
            for (k, i) in block.instrs.iter_mut().enumerate().rev() {
                // An observation keeps no value alive: it counts the columns that
                // something else reads after it, and goes when there are none.
                if let Instr::Observe { bufs, .. } = i {
                    let before = bufs.len();
                    bufs.retain(|b| live.contains(*b));
                    if bufs.is_empty() {
                        keep[k] = false;
                    }
                    removed |= bufs.len() != before;
                    continue;
                }
                let ds = defs(i);
                if removable(i) && ds.iter().all(|d| !live.contains(*d)) {
                    keep[k] = false;
                    removed = true;
                    continue;
                }
                if drop_dead_columns(i, &live) {
                    removed = true;
                }
                let ds = defs(i);
                for d in ds {
                    live.remove(d);
                }
                for u in uses(i) {
                    live.insert(u);
                }
            }
            let mut k = 0;
            block.instrs.retain(|_| {
                k += 1;
                keep[k - 1]
            });
        }
        if !removed {
            return;
        }
    }
}

/// Removes from a column-wise kernel (compaction, gather, slice, concatenation, an
/// exchange but for the columns it hashes: output column `c` is computed from input
/// column `c` alone) the output columns that are not
/// `live` afterwards, with their input columns, so that no kernel moves a column nothing
/// reads (and an input column only such kernels read is never loaded). Keeps at least one
/// column. Returns whether it removed any.
fn drop_dead_columns(i: &mut Instr, live: &SparseSet) -> bool {
    let Instr::Launch { kernel, args, outs, .. } = i else {
        return false;
    };
    if let Kernel::Exchange { width, to } = kernel {
        // Output c is input c moved; the hashed columns route every row, so they stay.
        let hashed: Vec<usize> = match to {
            Exchange::Hash { cols } | Exchange::Keep { cols } => cols.clone(),
            Exchange::Gather | Exchange::Broadcast => Vec::new(),
        };
        if args.len() != *width || outs.len() != *width {
            return false;
        }
        let keep: Vec<usize> = (0..*width)
            .filter(|&c| live.contains(outs[c]) || hashed.contains(&c))
            .collect();
        if keep.len() == *width || keep.is_empty() {
            return false;
        }
        let at = |c: usize| keep.iter().position(|&k| k == c).expect("hashed columns are kept");
        let narrowed = match &*to {
            Exchange::Hash { cols } => Exchange::Hash {
                cols: cols.iter().map(|&c| at(c)).collect(),
            },
            Exchange::Keep { cols } => Exchange::Keep {
                cols: cols.iter().map(|&c| at(c)).collect(),
            },
            other => other.clone(),
        };
        *to = narrowed;
        *width = keep.len();
        *args = keep.iter().map(|&c| args[c]).collect();
        *outs = keep.iter().map(|&c| outs[c]).collect();
        return true;
    }
    // Output c reads args[first + c + g * stride] for g in 0..groups.
    let (first, stride, groups) = match kernel {
        Kernel::Compact | Kernel::Gather { .. } => (1, 0, 1),
        Kernel::Slice { .. } => (0, 0, 1),
        Kernel::Concat { parts, width } => (0, *width, *parts),
        _ => return false,
    };
    let dead: Vec<usize> = (0..outs.len()).filter(|&c| !live.contains(outs[c])).collect();
    if dead.is_empty() || dead.len() == outs.len() {
        return false;
    }
    let width = outs.len();
    if args.len() != first + width * groups.max(1) || (groups > 1 && stride != width) {
        return false;
    }
    let mut new_args: Vec<BufId> = args[..first].to_vec();
    for g in 0..groups {
        for c in 0..width {
            if !dead.contains(&c) {
                new_args.push(args[first + g * width + c]);
            }
        }
    }
    let new_outs: Vec<BufId> = (0..width).filter(|c| !dead.contains(c)).map(|c| outs[c]).collect();
    if let Kernel::Concat { width: w, .. } = kernel {
        *w = new_outs.len();
    }
    *args = new_args;
    *outs = new_outs;
    true
}

fn has_effect(i: &Instr) -> bool {
    match i {
        Instr::Output { .. } | Instr::Assert { .. } => true,
        Instr::Launch { kernel, .. } => matches!(
            kernel,
            Kernel::LoadInput { .. } | Kernel::DictTable { .. } | Kernel::StrFn { .. }
        ),
        _ => false,
    }
}

/// Reorders a block so that definitions come right before their first use. Observations
/// take no part in the order: each comes back right after the first definition (in the
/// new order) of one of its columns, counting only the columns it defines (all columns
/// of a result have its length), or first in the block, counting the columns defined
/// before the block, when there are such. So an observation is never the last reader of
/// a value: something after it reads every column it counts.
fn schedule(block: &mut Block) {
    // Each observation with, per column, the instruction (an index into the block
    // without the observations) that last defined it before the observation.
    let mut observes: Vec<(Vec<Option<usize>>, Instr)> = Vec::new();
    let mut last_def: std::collections::HashMap<BufId, usize> = std::collections::HashMap::new();
    let mut rest = Vec::with_capacity(block.instrs.len());
    for i in std::mem::take(&mut block.instrs) {
        if let Instr::Observe { bufs, .. } = &i {
            let defs = bufs.iter().map(|b| last_def.get(b).copied()).collect();
            observes.push((defs, i));
            continue;
        }
        for d in defs(&i) {
            last_def.insert(d, rest.len());
        }
        rest.push(i);
    }
    block.instrs = rest;
    let order = schedule_order(block);
    let mut pos = vec![0; order.len()];
    for (p, &j) in order.iter().enumerate() {
        pos[j] = p;
    }
    let mut first = Vec::new();
    let mut after: Vec<Vec<Instr>> = vec![Vec::new(); order.len()];
    for (defs, mut i) in observes {
        let at = if defs.contains(&None) {
            None
        } else {
            defs.iter().flatten().copied().min_by_key(|&j| pos[j])
        };
        if let Instr::Observe { bufs, .. } = &mut i {
            let mut d = defs.iter();
            bufs.retain(|_| d.next() == Some(&at));
        }
        match at {
            Some(j) => after[j].push(i),
            None => first.push(i),
        }
    }
    let mut old: Vec<Option<Instr>> = std::mem::take(&mut block.instrs).into_iter().map(Some).collect();
    block.instrs = first;
    for j in order {
        if let Some(i) = old[j].take() {
            block.instrs.push(i);
            block.instrs.append(&mut after[j]);
        }
    }
}

/// The list-scheduled order of a block's instructions (indices into `block.instrs`).
fn schedule_order(block: &Block) -> Vec<usize> {
    let n = block.instrs.len();
    if n < 2 {
        return (0..n).collect();
    }
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut has_succ = vec![false; n];
    let mut last_def: std::collections::HashMap<BufId, usize> = std::collections::HashMap::new();
    let mut readers: std::collections::HashMap<BufId, Vec<usize>> = std::collections::HashMap::new();
    let mut last_effect: Option<usize> = None;
    for (j, i) in block.instrs.iter().enumerate() {
        let mut p = Vec::new();
        for u in uses(i) {
            if let Some(&d) = last_def.get(&u) {
                p.push(d);
            }
            readers.entry(u).or_default().push(j);
        }
        for d in defs(i) {
            if let Some(&w) = last_def.get(&d) {
                p.push(w);
            }
            if let Some(rs) = readers.remove(&d) {
                p.extend(rs.into_iter().filter(|&r| r != j));
            }
            last_def.insert(d, j);
        }
        if let Instr::Free { buf } = i {
            // A free comes after every reader of the value.
            if let Some(rs) = readers.get(buf) {
                p.extend(rs.iter().copied());
            }
            if let Some(&d) = last_def.get(buf) {
                p.push(d);
            }
        }
        if has_effect(i) {
            if let Some(e) = last_effect {
                p.push(e);
            }
            last_effect = Some(j);
        }
        p.sort_unstable();
        p.dedup();
        for &x in &p {
            has_succ[x] = true;
        }
        preds[j] = p;
    }
    let mut done = vec![false; n];
    let mut order = Vec::with_capacity(n);
    for root in 0..n {
        if has_succ[root] || done[root] {
            continue;
        }
        // Iterative depth-first post-order over the predecessors.
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        while let Some(&mut (j, ref mut next)) = stack.last_mut() {
            if let Some(&p) = preds[j].get(*next) {
                *next += 1;
                if !done[p] {
                    stack.push((p, 0));
                }
            } else {
                stack.pop();
                if !done[j] {
                    done[j] = true;
                    order.push(j);
                }
            }
        }
    }
    order
}
