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

use crate::bitset::BufSet;
use crate::ir::*;

/// The buffers an instruction reads.
pub(crate) fn uses(i: &Instr) -> Vec<BufId> {
    match i {
        Instr::Launch { args, .. } => args.clone(),
        Instr::Move { src, .. } => vec![*src],
        Instr::Free { .. } => Vec::new(),
        Instr::Output { cols, .. } => cols.clone(),
        Instr::Assert { args, .. } => args.clone(),
    }
}

/// The buffers an instruction defines.
pub(crate) fn defs(i: &Instr) -> Vec<BufId> {
    match i {
        Instr::Launch { outs, .. } => outs.clone(),
        Instr::Move { dst, .. } => vec![*dst],
        Instr::Free { .. } | Instr::Output { .. } | Instr::Assert { .. } => Vec::new(),
    }
}

pub(crate) fn term_uses(t: &Terminator) -> Vec<BufId> {
    match t {
        Terminator::LoopIf { nonempty, .. } => nonempty.clone(),
        _ => Vec::new(),
    }
}

/// Live-in and live-out sets of every block. A `Free` ends a value like a definition.
pub(crate) fn liveness(plan: &KernelPlan) -> (Vec<BufSet>, Vec<BufSet>) {
    let n = plan.buffers.len();
    let nb = plan.blocks.len();
    let mut live_in = vec![BufSet::new(n); nb];
    let mut live_out = vec![BufSet::new(n); nb];
    let mut changed = true;
    while changed {
        changed = false;
        for b in (0..nb).rev() {
            let block = &plan.blocks[b];
            let mut out = BufSet::new(n);
            for s in block.term.successors() {
                if let Some(l) = live_in.get(s.0 as usize) {
                    out.union_with(l);
                }
            }
            let mut live = out.clone();
            for u in term_uses(&block.term) {
                live.insert(u);
            }
            for i in block.instrs.iter().rev() {
                step_back(&mut live, i);
            }
            if live != live_in[b] {
                live_in[b] = live;
                changed = true;
            }
            live_out[b] = out;
        }
    }
    (live_in, live_out)
}

/// The live set before `i`, given the live set after it.
fn step_back(live: &mut BufSet, i: &Instr) {
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
    // Within blocks.
    for (b, block) in plan.blocks.iter_mut().enumerate() {
        let mut live = live_out[b].clone();
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
        let mut held = out.clone();
        for u in term_uses(&plan.blocks[b].term) {
            held.insert(u);
        }
        let succs = plan.blocks[b].term.successors();
        for (k, s) in succs.iter().enumerate() {
            let dead = held.difference(&live_in[s.0 as usize]);
            if dead.len() == 0 {
                continue;
            }
            let frees: Vec<Instr> = dead.iter().map(|buf| Instr::Free { buf }).collect();
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
                });
                retarget(&mut plan.blocks[b].term, k, id);
            }
        }
    }
    plan.blocks.extend(new_blocks);
    plan.planned_peak_buffers = planned_peak(plan, n);
}

/// Points successor edge `k` of a terminator at `to`.
fn retarget(t: &mut Terminator, k: usize, to: BlockId) {
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
    }
}

/// The largest number of buffers held at once on any path, by a forward walk from the
/// entry (the held set on entry to a block is the same along every edge once frees are
/// placed, so one visit per block suffices).
fn planned_peak(plan: &KernelPlan, n: usize) -> usize {
    let nb = plan.blocks.len();
    let mut held_in: Vec<Option<BufSet>> = vec![None; nb];
    let mut work = vec![plan.entry.0 as usize];
    held_in[plan.entry.0 as usize] = Some(BufSet::new(n));
    let mut peak = 0;
    while let Some(b) = work.pop() {
        let Some(mut held) = held_in[b].clone() else {
            continue;
        };
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
                held_in[s] = Some(held.clone());
                work.push(s);
            }
        }
    }
    peak
}
