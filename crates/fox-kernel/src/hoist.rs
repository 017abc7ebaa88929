//! Loop-invariant code motion over the kernel CFG.
//!
//! A launch inside a loop whose arguments are all defined outside the loop computes the
//! same value on every iteration: the sort of a join side scanned from a relation the
//! loop never writes, its gathered columns, a hash table or a trie over it, a selection or
//! projection of it. Such a launch moves to the loop's preheader (the block the loop is
//! entered from), so it runs once per entry of the loop instead of once per iteration;
//! the value then stays live through the loop, and liveness frees it where the loop exits.
//!
//! An instruction moves when
//! * it is a `Move` or a launch of a kernel that is pure and raises no error of the
//!   program's own ([`hoistable`]): no host-side kernel (input loads, constants that are
//!   the runs of tiered relations, dictionary tables, string functions, the memory-sized
//!   `Window` of a round, `Outgrows`), no exchange between devices, no kernel that checks
//!   values (an `Eval` that can raise an error, aggregations with their overflow checks,
//!   expansions with their index limit); only running out of memory may then stop it,
//!   and such an error names the same rule wherever it comes;
//! * none of its arguments is defined by an instruction of the loop (counting the ones
//!   already moved out as defined outside), so nothing that depends on an iteration or on
//!   a round of a nested loop moves;
//! * each of its outputs is defined by this instruction alone in the whole plan (it is not
//!   a relation's buffer, an accumulator or a loop-carried value), and no test of the
//!   loop reads it;
//! * its block runs on every iteration that reaches a test of the loop: the block
//!   dominates every block of the loop that leaves it or goes back to the header. The
//!   loops are entered at their header and run their body at least once (the test comes
//!   at the end), so a moved launch runs exactly when one of the loop's iterations would
//!   have run it first, never speculatively.
//!
//! Loops are taken innermost first, so what leaves a nested loop (a round's loop inside
//! a fixpoint's) may leave the enclosing loop too. A loop whose header has one way in from
//! outside, a block ending in a jump to it, gets its launches at the end of that block;
//! otherwise a preheader block is made on the ways in. An observation of a value whose
//! readers all left the loop goes with them (it counts the value once per entry of the
//! loop instead of once per iteration); the clean-up and scheduling that run again after
//! this pass put it after the definition of its columns, so it is never a last reader.

use std::collections::HashSet;

use crate::ir::*;
use crate::live::{defs, uses};

/// Moves the loop-invariant instructions of every loop to its preheader. Returns whether
/// it moved any.
pub(crate) fn hoist_invariants(plan: &mut KernelPlan) -> bool {
    let mut done: HashSet<BlockId> = HashSet::new();
    let mut moved = false;
    loop {
        let cfg = Cfg::new(plan);
        let mut loops = cfg.loops();
        loops.retain(|l| !done.contains(&l.header));
        // Innermost first: a loop nested in another has fewer blocks.
        let Some(l) = loops.into_iter().min_by_key(|l| (l.blocks.len(), l.header.0)) else {
            return moved;
        };
        done.insert(l.header);
        moved |= hoist_loop(plan, &cfg, &l);
    }
}

/// The kernels a launch of which may leave a loop: pure, on the device, and failing only
/// for want of memory.
fn hoistable(plan: &KernelPlan, kernel: &Kernel, args: &[BufId]) -> bool {
    match kernel {
        Kernel::Compact
        | Kernel::Gather { .. }
        | Kernel::Concat { .. }
        | Kernel::Slice { .. }
        | Kernel::SortPerm { .. }
        | Kernel::AdjacentDistinct
        | Kernel::RepeatedKey { .. }
        | Kernel::JoinCount { .. }
        | Kernel::ExclusiveScan
        | Kernel::JoinWrite { .. }
        | Kernel::MatchFlags { .. }
        | Kernel::MergeUnion { .. }
        | Kernel::TrieBuild { .. }
        | Kernel::RootRange
        | Kernel::RangeCount
        | Kernel::SortedSearch
        | Kernel::MinRange { .. }
        | Kernel::BoundRange { .. }
        | Kernel::HashBuild { .. }
        | Kernel::HashProbe { .. }
        | Kernel::HashMatch { .. }
        | Kernel::NestedLoopCount { .. }
        | Kernel::NestedLoopWrite { .. }
        | Kernel::NestedLoopMatch { .. }
        | Kernel::IneqTree
        | Kernel::IneqRanges { .. } => true,
        // An expression moves when no row can make it fail (no division, no arithmetic
        // that can overflow, no cast that can fail): its checked form numbers no error.
        Kernel::Eval { expr, n_cols } => {
            let Some(elems) = args
                .iter()
                .map(|a| plan.buffers.get(a.0 as usize).map(|b| b.elem))
                .collect::<Option<Vec<Elem>>>()
            else {
                return false;
            };
            crate::checked::check_expr(expr, *n_cols, &elems, &|_| Some(0)).is_ok_and(|c| c.msgs.is_empty())
        }
        Kernel::LoadInput { .. }
        | Kernel::Const { .. }
        | Kernel::DictTable { .. }
        | Kernel::StrFn { .. }
        | Kernel::Window { .. }
        | Kernel::Claim { .. }
        | Kernel::Outgrows { .. }
        | Kernel::Exchange { .. }
        | Kernel::ReduceByKey { .. }
        | Kernel::FusedReduce { .. }
        | Kernel::Expand
        | Kernel::IntersectCount { .. } => false,
    }
}

/// A natural loop: its header and every block on a path from the header back to it.
struct Loop {
    header: BlockId,
    /// Sorted.
    blocks: Vec<BlockId>,
}

/// The predecessors, a reverse post-order and the immediate dominators of a plan's CFG.
struct Cfg {
    preds: Vec<Vec<usize>>,
    /// The place of each reachable block in reverse post-order; `usize::MAX` for a block
    /// the entry does not reach.
    rpo: Vec<usize>,
    /// The immediate dominator of each reachable block (the entry's is itself).
    idom: Vec<Option<usize>>,
}

impl Cfg {
    fn new(plan: &KernelPlan) -> Cfg {
        let nb = plan.blocks.len();
        let mut preds: Vec<Vec<usize>> = vec![Vec::new(); nb];
        for (b, block) in plan.blocks.iter().enumerate() {
            for s in block.term.successors() {
                if let Some(p) = preds.get_mut(s.0 as usize) {
                    p.push(b);
                }
            }
        }
        // Depth-first post-order from the entry.
        let entry = plan.entry.0 as usize;
        let mut order: Vec<usize> = Vec::with_capacity(nb);
        let mut visited = vec![false; nb];
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
                    order.push(b);
                }
            }
        }
        order.reverse();
        let mut rpo = vec![usize::MAX; nb];
        for (i, &b) in order.iter().enumerate() {
            rpo[b] = i;
        }
        // Cooper, Harvey and Kennedy's iteration over the reverse post-order.
        let mut idom: Vec<Option<usize>> = vec![None; nb];
        if let Some(&e) = order.first() {
            idom[e] = Some(e);
        }
        let intersect = |idom: &[Option<usize>], mut a: usize, mut b: usize| -> usize {
            while a != b {
                while rpo[a] > rpo[b] {
                    a = idom[a].unwrap_or(a);
                }
                while rpo[b] > rpo[a] {
                    b = idom[b].unwrap_or(b);
                }
            }
            a
        };
        let mut changed = true;
        while changed {
            changed = false;
            for &b in order.iter().skip(1) {
                let mut new: Option<usize> = None;
                for &p in &preds[b] {
                    if idom[p].is_none() {
                        continue;
                    }
                    new = Some(match new {
                        None => p,
                        Some(n) => intersect(&idom, p, n),
                    });
                }
                if new.is_some() && new != idom[b] {
                    idom[b] = new;
                    changed = true;
                }
            }
        }
        Cfg { preds, rpo, idom }
    }

    /// Whether `a` dominates `b` (both reachable).
    fn dominates(&self, a: usize, mut b: usize) -> bool {
        loop {
            if a == b {
                return true;
            }
            match self.idom[b] {
                Some(d) if d != b => b = d,
                _ => return false,
            }
        }
    }

    /// The natural loops, one per header (the loops of its back edges together).
    fn loops(&self) -> Vec<Loop> {
        let nb = self.preds.len();
        let mut loops = Vec::new();
        for h in 0..nb {
            if self.rpo[h] == usize::MAX {
                continue;
            }
            let latches: Vec<usize> = self.preds[h]
                .iter()
                .copied()
                .filter(|&p| self.rpo[p] != usize::MAX && self.dominates(h, p))
                .collect();
            if latches.is_empty() {
                continue;
            }
            let mut inside = vec![false; nb];
            inside[h] = true;
            let mut stack = latches;
            while let Some(b) = stack.pop() {
                if inside[b] {
                    continue;
                }
                inside[b] = true;
                stack.extend(self.preds[b].iter().copied().filter(|&p| !inside[p]));
            }
            loops.push(Loop {
                header: BlockId(h as u32),
                blocks: (0..nb).filter(|&b| inside[b]).map(|b| BlockId(b as u32)).collect(),
            });
        }
        loops
    }
}

fn hoist_loop(plan: &mut KernelPlan, cfg: &Cfg, l: &Loop) -> bool {
    let h = l.header.0 as usize;
    let inside = |b: usize| l.blocks.binary_search(&BlockId(b as u32)).is_ok();
    // The blocks that leave the loop or go back to its header: every iteration that
    // reaches the loop's test passes one of them.
    let tests: Vec<usize> = l
        .blocks
        .iter()
        .map(|b| b.0 as usize)
        .filter(|&b| {
            plan.blocks[b]
                .term
                .successors()
                .iter()
                .any(|s| !inside(s.0 as usize) || s.0 as usize == h)
        })
        .collect();
    let mut every: Vec<usize> = l
        .blocks
        .iter()
        .map(|b| b.0 as usize)
        .filter(|&b| tests.iter().all(|&t| cfg.dominates(b, t)))
        .collect();
    every.sort_by_key(|&b| cfg.rpo[b]);
    // What the loop defines, and how often the whole plan defines each buffer.
    let mut ndefs = vec![0usize; plan.buffers.len()];
    for block in &plan.blocks {
        for i in &block.instrs {
            for d in defs(i) {
                ndefs[d.0 as usize] += 1;
            }
        }
    }
    let mut defined: HashSet<BufId> = HashSet::new();
    for b in &l.blocks {
        for i in &plan.blocks[b.0 as usize].instrs {
            defined.extend(defs(i));
        }
    }
    // A buffer a test of the loop reads stays defined in the loop, so that the loop can
    // end (`validate` asks it), even where its value could not change.
    let tested: HashSet<BufId> = l
        .blocks
        .iter()
        .flat_map(|b| crate::live::term_uses(&plan.blocks[b.0 as usize].term))
        .collect();
    let mut hoisted: Vec<Instr> = Vec::new();
    for &b in &every {
        let instrs = std::mem::take(&mut plan.blocks[b].instrs);
        let mut kept = Vec::with_capacity(instrs.len());
        for i in instrs {
            let pure = match &i {
                Instr::Launch { kernel, args, .. } => hoistable(plan, kernel, args),
                Instr::Move { .. } => true,
                _ => false,
            };
            let ds = defs(&i);
            let invariant = pure
                && !ds.is_empty()
                && uses(&i).iter().all(|u| !defined.contains(u) && !ds.contains(u))
                && ds.iter().all(|d| ndefs[d.0 as usize] == 1 && !tested.contains(d));
            if invariant {
                for d in &ds {
                    defined.remove(d);
                }
                hoisted.push(i);
            } else {
                kept.push(i);
            }
        }
        plan.blocks[b].instrs = kept;
    }
    if hoisted.is_empty() {
        return false;
    }
    // Observations of values no instruction of the loop reads any more leave with their
    // readers (scheduling puts them in place).
    let mut read: HashSet<BufId> = HashSet::new();
    for b in &l.blocks {
        for i in &plan.blocks[b.0 as usize].instrs {
            if !matches!(i, Instr::Observe { .. }) {
                read.extend(uses(i));
            }
        }
        read.extend(crate::live::term_uses(&plan.blocks[b.0 as usize].term));
    }
    let mut observes: Vec<Instr> = Vec::new();
    for b in &l.blocks {
        let block = &mut plan.blocks[b.0 as usize];
        let mut k = 0;
        while k < block.instrs.len() {
            let leaves = match &mut block.instrs[k] {
                Instr::Observe { bufs, .. } if bufs.iter().all(|x| !defined.contains(x)) => {
                    bufs.iter().any(|x| !read.contains(x))
                }
                // Columns of one result share its length: one the loop still computes
                // counts it, without keeping the others alive through the loop.
                Instr::Observe { bufs, .. } => {
                    bufs.retain(|x| defined.contains(x) || read.contains(x));
                    false
                }
                _ => false,
            };
            if leaves {
                observes.push(block.instrs.remove(k));
            } else {
                k += 1;
            }
        }
    }
    observes.extend(hoisted);
    let outside: Vec<usize> = cfg.preds[h].iter().copied().filter(|&p| !inside(p)).collect();
    match outside.as_slice() {
        [p] if plan.blocks[*p].term == Terminator::Jump(l.header) => plan.blocks[*p].instrs.extend(observes),
        _ => {
            let id = BlockId(plan.blocks.len() as u32);
            let local = plan.blocks[h].local;
            plan.blocks.push(Block {
                label: format!("before {}", plan.blocks[h].label),
                instrs: observes,
                term: Terminator::Jump(l.header),
                local,
            });
            for &p in &outside {
                let succs = plan.blocks[p].term.successors();
                for (k, s) in succs.iter().enumerate() {
                    if *s == l.header {
                        crate::live::retarget(&mut plan.blocks[p].term, k, id);
                    }
                }
            }
            if plan.entry == l.header {
                plan.entry = id;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use fox_sema::core::{Type, Value};

    fn buf(name: &str, elem: Elem) -> BufVar {
        BufVar {
            name: name.into(),
            elem,
            ty: None,
        }
    }

    fn launch(kernel: Kernel, args: &[u32], outs: &[u32]) -> Instr {
        Instr::Launch {
            kernel,
            args: args.iter().map(|&a| BufId(a)).collect(),
            outs: outs.iter().map(|&o| BufId(o)).collect(),
            origin: None,
        }
    }

    /// A loop entered from two blocks: b0 branches to b1 or b2, both jump to the header b3,
    /// whose body sorts `a` (defined before the loop) and shortens `x` (the loop's test)
    /// until it is empty.
    fn two_ways_in() -> KernelPlan {
        let ints = |v: &[i32]| Kernel::Const {
            types: vec![Type::Int32],
            rows: v.iter().map(|&x| vec![Value::Int32(x)]).collect(),
        };
        let jump = |b: u32| Terminator::Jump(BlockId(b));
        let block = |label: &str, instrs: Vec<Instr>, term: Terminator| Block {
            label: label.into(),
            instrs,
            term,
            local: false,
        };
        KernelPlan {
            version: KERNEL_PLAN_VERSION,
            buffers: vec![
                buf("a", Elem::I32),
                buf("x", Elem::I32),
                buf("p", Elem::U32),
                buf("s", Elem::I32),
                buf("x2", Elem::I32),
            ],
            inputs: Vec::new(),
            blocks: vec![
                block(
                    "start",
                    vec![launch(ints(&[3, 1, 2]), &[], &[0]), launch(ints(&[7, 8]), &[], &[1])],
                    Terminator::If {
                        nonempty: vec![BufId(0)],
                        then: BlockId(1),
                        otherwise: BlockId(2),
                    },
                ),
                block("one way", Vec::new(), jump(3)),
                block("another way", Vec::new(), jump(3)),
                block(
                    "loop",
                    vec![
                        launch(
                            Kernel::SortPerm {
                                desc: vec![false],
                                by_rank: vec![false],
                            },
                            &[0],
                            &[2],
                        ),
                        launch(Kernel::Gather { shift: 0 }, &[2, 0], &[3]),
                        launch(Kernel::Slice { start: 1, len: 10 }, &[1], &[4]),
                        Instr::Move {
                            dst: BufId(1),
                            src: BufId(4),
                        },
                    ],
                    Terminator::LoopIf {
                        nonempty: vec![BufId(1)],
                        body: BlockId(3),
                        exit: BlockId(4),
                    },
                ),
                block("after", Vec::new(), Terminator::Halt),
            ],
            entry: BlockId(0),
            planned_peak_buffers: 0,
            sources: Vec::new(),
            observed: Vec::new(),
        }
    }

    #[test]
    fn a_loop_with_two_ways_in_gets_a_preheader() {
        let mut plan = two_ways_in();
        crate::validate(&plan).unwrap();
        assert!(hoist_invariants(&mut plan));
        crate::validate(&plan).unwrap();
        // The sort and its gather run in a new block that both ways in now reach; the
        // shortening of `x`, which the loop redefines, stays.
        assert_eq!(plan.blocks.len(), 6);
        let pre = &plan.blocks[5];
        assert_eq!(pre.label, "before loop");
        assert_eq!(pre.term, Terminator::Jump(BlockId(3)));
        let outs = |b: &Block| b.instrs.iter().flat_map(defs).map(|d| d.0).collect::<Vec<_>>();
        assert_eq!(outs(pre), vec![2, 3]);
        assert_eq!(outs(&plan.blocks[3]), vec![4, 1]);
        for way in [1, 2] {
            assert_eq!(plan.blocks[way].term, Terminator::Jump(BlockId(5)));
        }
        // A second run finds nothing more to move.
        assert!(!hoist_invariants(&mut plan));
    }

    #[test]
    fn nothing_the_loop_defines_leaves_it() {
        let mut plan = two_ways_in();
        // The sort now reads `x`, which the loop shortens.
        if let Instr::Launch { args, .. } = &mut plan.blocks[3].instrs[0] {
            args[0] = BufId(1);
        }
        if let Instr::Launch { args, .. } = &mut plan.blocks[3].instrs[1] {
            args[1] = BufId(1);
        }
        crate::validate(&plan).unwrap();
        let before = plan.clone();
        assert!(!hoist_invariants(&mut plan));
        assert_eq!(plan, before);
    }
}
