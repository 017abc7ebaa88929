//! Liveness analysis over the kernel CFG and the placement of `Free` instructions.
//!
//! A buffer is live at a point when some path from there reads it before redefining it.
//! Liveness is a backward dataflow problem over the blocks, solved to a fixpoint (loops
//! included). Frees are then placed
//! * right after the instruction that last reads a value (or after its definition when
//!   nothing reads it), within each block;
//! * on CFG edges for values that are live at the end of a block but dead at the start of
//!   one of its successors (the value is needed along the other edge): at the start of the
//!   successor when the edge is its only way in, else in a block of its own on that edge.
//!
//! The planned peak is the largest number of buffers held at once, counting a launch's
//! outputs together with its arguments.

use crate::bitset::{union_sorted, SparseSet};
use crate::ir::*;

/// The buffers an instruction reads.
pub(crate) fn uses(i: &Instr) -> Vec<BufId> {
    match i {
        Instr::Launch { args, .. } => args.clone(),
        Instr::Move { src, .. } => vec![*src],
        Instr::Free { .. } => Vec::new(),
        Instr::Output { cols, .. } => cols.clone(),
        Instr::Assert { args, .. } => args.clone(),
        Instr::Observe { bufs, .. } => bufs.clone(),
    }
}

/// The buffers an instruction defines.
pub(crate) fn defs(i: &Instr) -> Vec<BufId> {
    match i {
        Instr::Launch { outs, .. } => outs.clone(),
        Instr::Move { dst, .. } => vec![*dst],
        Instr::Free { .. } | Instr::Output { .. } | Instr::Assert { .. } | Instr::Observe { .. } => Vec::new(),
    }
}

pub(crate) fn term_uses(t: &Terminator) -> Vec<BufId> {
    match t {
        Terminator::LoopIf { nonempty, .. } | Terminator::If { nonempty, .. } => nonempty.clone(),
        _ => Vec::new(),
    }
}

/// Live-in and live-out sets of every block, ascending. A `Free` ends a value like a
/// definition.
///
/// Each block is summarised once by the buffers it reads before defining them (`gen`,
/// its terminator's included) and those it defines or frees (`kill`): its live-in set is
/// `gen ∪ (live-out − kill)`. The sets are kept sparse, and a block is evaluated again only
/// when the live-in set of one of its successors changed, so the work follows the sizes of
/// the live sets rather than the number of blocks times the number of buffers.
pub(crate) fn liveness(plan: &KernelPlan) -> (Vec<Vec<BufId>>, Vec<Vec<BufId>>) {
    let n = plan.buffers.len();
    let nb = plan.blocks.len();
    let mut scratch = SparseSet::new(n);
    let mut gen: Vec<Vec<BufId>> = Vec::with_capacity(nb);
    let mut kill: Vec<Vec<BufId>> = Vec::with_capacity(nb);
    for block in &plan.blocks {
        scratch.clear();
        let mut k = Vec::new();
        for u in term_uses(&block.term) {
            scratch.insert(u);
        }
        for i in block.instrs.iter().rev() {
            for d in defs(i) {
                scratch.remove(d);
                k.push(d);
            }
            if let Instr::Free { buf } = i {
                scratch.remove(*buf);
                k.push(*buf);
            }
            for u in uses(i) {
                scratch.insert(u);
            }
        }
        k.sort_unstable();
        k.dedup();
        gen.push(scratch.sorted());
        kill.push(k);
    }
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); nb];
    for (b, block) in plan.blocks.iter().enumerate() {
        for s in block.term.successors() {
            if let Some(p) = preds.get_mut(s.0 as usize) {
                p.push(b);
            }
        }
    }
    // Blocks are evaluated in post-order (successors first, as a backward problem wants),
    // each when it is the earliest queued one: every block once, then the predecessors of
    // the blocks whose live-in set changed.
    let rank = post_order_rank(plan);
    let mut live_in: Vec<Vec<BufId>> = vec![Vec::new(); nb];
    let mut live_out: Vec<Vec<BufId>> = vec![Vec::new(); nb];
    let mut work: std::collections::BTreeSet<(usize, usize)> = (0..nb).map(|b| (rank[b], b)).collect();
    while let Some((_, b)) = work.pop_first() {
        let mut out: Vec<BufId> = Vec::new();
        for s in plan.blocks[b].term.successors() {
            if let Some(l) = live_in.get(s.0 as usize) {
                out = union_sorted(&out, l);
            }
        }
        let through: Vec<BufId> = out
            .iter()
            .copied()
            .filter(|x| kill[b].binary_search(x).is_err())
            .collect();
        let live = union_sorted(&gen[b], &through);
        if live != live_in[b] {
            live_in[b] = live;
            for &p in &preds[b] {
                work.insert((rank[p], p));
            }
        }
        live_out[b] = out;
    }
    (live_in, live_out)
}

/// Each block's place in a depth-first post-order of the CFG from the entry (blocks the
/// entry does not reach come after, in index order).
fn post_order_rank(plan: &KernelPlan) -> Vec<usize> {
    let nb = plan.blocks.len();
    let mut rank = vec![usize::MAX; nb];
    let mut visited = vec![false; nb];
    let mut next = 0;
    let entry = plan.entry.0 as usize;
    if entry < nb {
        let mut stack: Vec<(usize, usize)> = vec![(entry, 0)];
        visited[entry] = true;
        while let Some(&mut (b, ref mut k)) = stack.last_mut() {
            let succs = plan.blocks[b].term.successors();
            if let Some(s) = succs.get(*k) {
                *k += 1;
                let s = s.0 as usize;
                if s < nb && !visited[s] {
                    visited[s] = true;
                    stack.push((s, 0));
                }
            } else {
                stack.pop();
                rank[b] = next;
                next += 1;
            }
        }
    }
    for r in rank.iter_mut().filter(|r| **r == usize::MAX) {
        *r = next;
        next += 1;
    }
    rank
}

/// The live set before `i`, given the live set after it.
fn step_back(live: &mut SparseSet, i: &Instr) {
    for d in defs(i) {
        live.remove(d);
    }
    if let Instr::Free { buf } = i {
        live.remove(*buf);
    }
    for u in uses(i) {
        live.insert(u);
    }
}

/// Inserts the frees, splitting edges where needed, and records the planned peak.
pub(crate) fn place_frees(plan: &mut KernelPlan) {
    let (live_in, live_out) = liveness(plan);
    let n = plan.buffers.len();
    let mut live = SparseSet::new(n);
    // Within blocks.
    for (b, block) in plan.blocks.iter_mut().enumerate() {
        live.reset_to(&live_out[b]);
        for u in term_uses(&block.term) {
            live.insert(u);
        }
        let mut rev: Vec<Instr> = Vec::with_capacity(block.instrs.len() * 2);
        for i in std::mem::take(&mut block.instrs).into_iter().rev() {
            let ds = defs(&i);
            let mut dead: Vec<BufId> = ds.iter().copied().filter(|d| !live.contains(*d)).collect();
            dead.extend(uses(&i).into_iter().filter(|u| !live.contains(*u) && !ds.contains(u)));
            dead.sort();
            dead.dedup();
            step_back(&mut live, &i);
            for d in dead.into_iter().rev() {
                rev.push(Instr::Free { buf: d });
            }
            rev.push(i);
        }
        rev.reverse();
        block.instrs = rev;
    }
    // On edges.
    let nb = plan.blocks.len();
    let mut preds = vec![0usize; nb];
    preds[plan.entry.0 as usize] += 1;
    for block in &plan.blocks {
        for s in block.term.successors() {
            preds[s.0 as usize] += 1;
        }
    }
    let mut new_blocks = Vec::new();
    for (b, out) in live_out.iter().enumerate() {
        let mut uses = term_uses(&plan.blocks[b].term);
        uses.sort_unstable();
        uses.dedup();
        let held = union_sorted(out, &uses);
        let succs = plan.blocks[b].term.successors();
        for (k, s) in succs.iter().enumerate() {
            let next = &live_in[s.0 as usize];
            let dead: Vec<BufId> = held
                .iter()
                .copied()
                .filter(|x| next.binary_search(x).is_err())
                .collect();
            if dead.is_empty() {
                continue;
            }
            let frees: Vec<Instr> = dead.into_iter().map(|buf| Instr::Free { buf }).collect();
            if preds[s.0 as usize] == 1 {
                let target = &mut plan.blocks[s.0 as usize].instrs;
                let rest = std::mem::take(target);
                *target = frees;
                target.extend(rest);
            } else {
                let id = BlockId((nb + new_blocks.len()) as u32);
                new_blocks.push(Block {
                    label: format!("edge b{b} -> b{}", s.0),
                    instrs: frees,
                    term: Terminator::Jump(*s),
                    local: plan.blocks[b].local,
                });
                retarget(&mut plan.blocks[b].term, k, id);
            }
        }
    }
    plan.blocks.extend(new_blocks);
    plan.planned_peak_buffers = planned_peak(plan, n);
}

/// Points successor edge `k` of a terminator at `to`.
pub(crate) fn retarget(t: &mut Terminator, k: usize, to: BlockId) {
    match t {
        Terminator::Jump(b) => *b = to,
        Terminator::Halt => {}
        Terminator::LoopIf { body, exit, .. } => {
            if k == 0 {
                *body = to;
            } else {
                *exit = to;
            }
        }
        Terminator::If { then, otherwise, .. } => {
            if k == 0 {
                *then = to;
            } else {
                *otherwise = to;
            }
        }
    }
}

/// The largest number of buffers held at once on any path, by a forward walk from the
/// entry (the held set on entry to a block is the same along every edge once frees are
/// placed, so one visit per block suffices).
fn planned_peak(plan: &KernelPlan, n: usize) -> usize {
    let nb = plan.blocks.len();
    let mut held_in: Vec<Option<Vec<BufId>>> = vec![None; nb];
    let mut work = vec![plan.entry.0 as usize];
    held_in[plan.entry.0 as usize] = Some(Vec::new());
    let mut held = SparseSet::new(n);
    let mut peak = 0;
    while let Some(b) = work.pop() {
        let Some(start) = &held_in[b] else {
            continue;
        };
        held.reset_to(start);
        peak = peak.max(held.len());
        for i in &plan.blocks[b].instrs {
            match i {
                Instr::Free { buf } => {
                    held.remove(*buf);
                }
                _ => {
                    for d in defs(i) {
                        held.insert(d);
                    }
                    peak = peak.max(held.len());
                }
            }
        }
        for s in plan.blocks[b].term.successors() {
            let s = s.0 as usize;
            if s < nb && held_in[s].is_none() {
                held_in[s] = Some(held.sorted());
                work.push(s);
            }
        }
    }
    peak
}
