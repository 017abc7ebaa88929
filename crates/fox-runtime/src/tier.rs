//! The choice of the buffers that leave the device for the host tier when a launch or an
//! upload needs room within the run's device budget (see the interpreter).
//!
//! A buffer's next use is the distance, in instructions, from the instruction running now
//! to the next instruction that reads its data (a launch's argument, an output, an
//! assertion); `Move` passes the value on to another name, a redefinition or `Free` of a
//! name ends it there, and `Observe` and the terminators' tests read only lengths, which
//! the interpreter keeps for an evicted buffer. Across blocks the distance is that of the
//! shortest path through the control-flow graph, each block counted at its length plus
//! one for its terminator and entered at most once: a buffer first read again in a loop's
//! next iteration is as far as the rest of the body and the way back to the read, whatever
//! the number of iterations left. Victims are taken furthest first (Belady's rule), a
//! buffer that no path reads again first of all, larger buffers first among equals.

use fox_kernel::{Block, Instr, Terminator};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A path of the search: its distance, the block and the instruction it enters at, and
/// the names holding the value there.
type Step = Reverse<(u64, usize, usize, Vec<u32>)>;

/// The distance from the instruction after `(block, i)` to the next read of the value
/// `var` holds there (see the module docs), or `None` when no path reads it again.
pub(crate) fn next_use(blocks: &[Block], block: usize, i: usize, var: u32) -> Option<u64> {
    let mut heap: BinaryHeap<Step> = BinaryHeap::new();
    heap.push(Reverse((0, block, i + 1, vec![var])));
    let mut seen = vec![false; blocks.len()];
    while let Some(Reverse((dist, b, start, mut names))) = heap.pop() {
        let Some(blk) = blocks.get(b) else {
            continue;
        };
        if start == 0 {
            if seen[b] {
                continue;
            }
            seen[b] = true;
        }
        let reads = |bufs: &[fox_kernel::BufId], names: &[u32]| bufs.iter().any(|x| names.contains(&x.0));
        let mut ended = false;
        for (k, ins) in blk.instrs.iter().enumerate().skip(start) {
            let d = dist + (k - start) as u64;
            match ins {
                Instr::Launch { args, outs, .. } => {
                    if reads(args, &names) {
                        return Some(d);
                    }
                    names.retain(|n| !outs.iter().any(|o| o.0 == *n));
                }
                Instr::Output { cols, .. } => {
                    if reads(cols, &names) {
                        return Some(d);
                    }
                }
                Instr::Assert { args, .. } => {
                    if reads(args, &names) {
                        return Some(d);
                    }
                }
                Instr::Move { dst, src } => {
                    if names.contains(&src.0) {
                        if !names.contains(&dst.0) {
                            names.push(dst.0);
                        }
                    } else {
                        names.retain(|n| *n != dst.0);
                    }
                }
                Instr::Free { buf } => names.retain(|n| *n != buf.0),
                Instr::Observe { .. } => {}
            }
            if names.is_empty() {
                ended = true;
                break;
            }
        }
        if ended {
            continue;
        }
        let next = dist + (blk.instrs.len().saturating_sub(start)) as u64 + 1;
        let succ: Vec<usize> = match &blk.term {
            Terminator::Halt => Vec::new(),
            Terminator::Jump(t) => vec![t.0 as usize],
            Terminator::LoopIf { body, exit, .. } => vec![body.0 as usize, exit.0 as usize],
            Terminator::If { then, otherwise, .. } => vec![then.0 as usize, otherwise.0 as usize],
        };
        for s in succ {
            if s < seen.len() && !seen[s] {
                heap.push(Reverse((next, s, 0, names.clone())));
            }
        }
    }
    None
}

/// A buffer that may leave the device: its slot, its next use (`None`: never) and size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub slot: usize,
    pub next_use: Option<u64>,
    pub bytes: usize,
}

/// The candidates in the order they leave the device: furthest next use first (never
/// used again before all), then the larger first, then by slot (so the order is
/// deterministic).
pub(crate) fn victim_order(mut cands: Vec<Candidate>) -> Vec<Candidate> {
    cands.sort_by_key(|c| (Reverse(c.next_use.unwrap_or(u64::MAX)), Reverse(c.bytes), c.slot));
    cands
}

/// The names a rounds loop reads ([`loop_reads`]): all of them, and those it reads
/// without writing them (what every round reads as it was before the loop: the tries'
/// levels, the rows of the levels before), both sorted.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct LoopReads {
    pub all: Vec<u32>,
    pub invariant: Vec<u32>,
}

/// The names read by the rounds loop whose test at the end of `block` enters `body` (the
/// plan entered at `entry`). The loop is `body` and every block that reaches a jump back
/// to `body` without passing through it, where a jump back comes from a block that every
/// path from `entry` reaches through `body` (its natural loop, nested loops included). A
/// name is read there when an instruction (a launch's argument, an output, an assertion,
/// a `Move`'s source) or a test reads it, and written when a launch or a `Move` defines
/// it (a round's accumulators, the windows). `None` when the test of `block` enters no
/// loop.
pub(crate) fn loop_reads(blocks: &[Block], entry: usize, block: usize) -> Option<LoopReads> {
    let body = match &blocks.get(block)?.term {
        Terminator::LoopIf { body, .. } => body.0 as usize,
        Terminator::If { then, .. } => then.0 as usize,
        Terminator::Jump(_) | Terminator::Halt => return None,
    };
    if body >= blocks.len() || entry >= blocks.len() {
        return None;
    }
    let succs = |b: usize| -> Vec<usize> {
        blocks[b]
            .term
            .successors()
            .iter()
            .map(|s| s.0 as usize)
            .filter(|&s| s < blocks.len())
            .collect()
    };
    // The blocks reachable from the entry without entering `body`: `body` dominates the
    // others.
    let mut outside = vec![false; blocks.len()];
    let mut stack = vec![entry];
    while let Some(b) = stack.pop() {
        if b == body || std::mem::replace(&mut outside[b], true) {
            continue;
        }
        stack.extend(succs(b));
    }
    let mut inside = vec![false; blocks.len()];
    inside[body] = true;
    let mut stack: Vec<usize> = (0..blocks.len())
        .filter(|&p| !outside[p] && succs(p).contains(&body))
        .collect();
    if stack.is_empty() {
        return None;
    }
    while let Some(b) = stack.pop() {
        if std::mem::replace(&mut inside[b], true) {
            continue;
        }
        stack.extend((0..blocks.len()).filter(|&p| !outside[p] && succs(p).contains(&b)));
    }
    let (mut names, mut written) = (Vec::new(), Vec::new());
    for (_, blk) in blocks.iter().enumerate().filter(|(b, _)| inside[*b]) {
        for ins in &blk.instrs {
            match ins {
                Instr::Launch { args, outs, .. } => {
                    names.extend(args.iter().map(|a| a.0));
                    written.extend(outs.iter().map(|a| a.0));
                }
                Instr::Output { cols, .. } => names.extend(cols.iter().map(|a| a.0)),
                Instr::Assert { args, .. } => names.extend(args.iter().map(|a| a.0)),
                Instr::Move { src, dst } => {
                    names.push(src.0);
                    written.push(dst.0);
                }
                Instr::Free { .. } | Instr::Observe { .. } => {}
            }
        }
        match &blk.term {
            Terminator::LoopIf { nonempty, .. } | Terminator::If { nonempty, .. } => {
                names.extend(nonempty.iter().map(|a| a.0))
            }
            Terminator::Jump(_) | Terminator::Halt => {}
        }
    }
    names.sort_unstable();
    names.dedup();
    let invariant = names.iter().copied().filter(|n| !written.contains(n)).collect();
    Some(LoopReads { all: names, invariant })
}

#[cfg(test)]
mod tests {
    use super::*;
    use fox_kernel::{BlockId, BufId, Kernel};

    fn launch(args: &[u32], outs: &[u32]) -> Instr {
        Instr::Launch {
            kernel: Kernel::Compact,
            args: args.iter().map(|&a| BufId(a)).collect(),
            outs: outs.iter().map(|&a| BufId(a)).collect(),
            origin: None,
        }
    }

    fn block(instrs: Vec<Instr>, term: Terminator) -> Block {
        Block {
            label: "b".into(),
            local: false,
            instrs,
            term,
        }
    }

    #[test]
    fn the_next_use_in_the_same_block_counts_instructions() {
        let b = vec![block(
            vec![
                launch(&[], &[0, 1, 2]),
                launch(&[0], &[3]),
                launch(&[1], &[4]),
                Instr::Observe {
                    id: 0,
                    bufs: vec![BufId(2)],
                },
                launch(&[2, 3], &[5]),
            ],
            Terminator::Halt,
        )];
        // From instruction 0: b0 is read next (distance 0), b1 one later, b2 (only
        // observed before) at 3.
        assert_eq!(next_use(&b, 0, 0, 0), Some(0));
        assert_eq!(next_use(&b, 0, 0, 1), Some(1));
        assert_eq!(next_use(&b, 0, 0, 2), Some(3));
        // After its last read nothing uses b1.
        assert_eq!(next_use(&b, 0, 2, 1), None);
    }

    #[test]
    fn a_move_carries_the_value_and_a_free_or_redefinition_ends_it() {
        let b = vec![block(
            vec![
                launch(&[], &[0, 1]),
                Instr::Move {
                    dst: BufId(7),
                    src: BufId(0),
                },
                Instr::Free { buf: BufId(0) },
                launch(&[], &[1]),
                launch(&[1], &[2]),
                launch(&[7], &[3]),
            ],
            Terminator::Halt,
        )];
        // b0 lives on as b7, read at instruction 5.
        assert_eq!(next_use(&b, 0, 0, 0), Some(4));
        // b1 is redefined at 3 before anything reads it: its value is not used again.
        assert_eq!(next_use(&b, 0, 0, 1), None);
    }

    #[test]
    fn across_blocks_the_shortest_path_counts_and_a_loop_comes_back_once() {
        // 0: defines b0, b1 → loop test in 1 → body 2 reads b0 at its end, exit 3 reads b1.
        let b = vec![
            block(vec![launch(&[], &[0, 1, 9])], Terminator::Jump(BlockId(1))),
            block(
                vec![],
                Terminator::LoopIf {
                    nonempty: vec![BufId(9)],
                    body: BlockId(2),
                    exit: BlockId(3),
                },
            ),
            block(
                vec![launch(&[9], &[8]), launch(&[8], &[9]), launch(&[0], &[5])],
                Terminator::Jump(BlockId(1)),
            ),
            block(vec![launch(&[1], &[6])], Terminator::Halt),
        ];
        // From the end of block 0: the terminator (1), block 1's test (1), then b0 at
        // index 2 of the body, b1 at the start of the exit.
        assert_eq!(next_use(&b, 0, 0, 0), Some(4));
        assert_eq!(next_use(&b, 0, 0, 1), Some(2));
        // Inside the body after reading b0: next time round the body, 1 + 1 + 2 later.
        assert_eq!(next_use(&b, 2, 2, 0), Some(4));
        // b1 from the middle of the body: the rest (1), the back edge, the test, exit.
        assert_eq!(next_use(&b, 2, 1, 1), Some(3));
    }

    #[test]
    fn a_rounds_loop_reads_what_it_does_not_write_in_its_blocks_and_nested_loops() {
        let test = |nonempty: u32, body: u32, exit: u32| Terminator::LoopIf {
            nonempty: vec![BufId(nonempty)],
            body: BlockId(body),
            exit: BlockId(exit),
        };
        // 0: the trie (b0, b1) and the first window (b2), entering the outer loop at 1.
        // 1: the outer round reads b0 and b2 and enters the inner loop at 2 (window b3).
        // 2: the inner round reads b1 and b3, and loops on itself.
        // 3: after the inner loop the outer round reads b4 and loops back to 1.
        // 4: after the outer loop, b5 is read.
        let b = vec![
            block(vec![launch(&[], &[0, 1, 2, 5])], test(2, 1, 4)),
            block(vec![launch(&[0, 2], &[3, 4])], test(3, 2, 3)),
            block(
                vec![
                    launch(&[1, 3], &[6]),
                    Instr::Move {
                        dst: BufId(3),
                        src: BufId(6),
                    },
                ],
                test(3, 2, 3),
            ),
            block(vec![launch(&[4], &[2])], test(2, 1, 4)),
            block(vec![launch(&[5], &[7])], Terminator::Halt),
        ];
        // The outer loop, entered from 0 or looping at 3: blocks 1, 2 and 3, which read
        // b0 to b4 and b6 but write b2, b3, b4 and b6.
        let outer = Some(LoopReads {
            all: vec![0, 1, 2, 3, 4, 6],
            invariant: vec![0, 1],
        });
        assert_eq!(loop_reads(&b, 0, 0), outer);
        assert_eq!(loop_reads(&b, 0, 3), outer);
        // The inner loop, entered from 1 or looping at 2: block 2 alone, though block 1
        // is reachable from it through the outer loop; it writes b3 (its window) and b6.
        let inner = Some(LoopReads {
            all: vec![1, 3, 6],
            invariant: vec![1],
        });
        assert_eq!(loop_reads(&b, 0, 1), inner);
        assert_eq!(loop_reads(&b, 0, 2), inner);
        // A test that enters no loop, and a block without a test.
        let straight = vec![
            block(
                vec![],
                Terminator::If {
                    nonempty: vec![BufId(0)],
                    then: BlockId(1),
                    otherwise: BlockId(1),
                },
            ),
            block(vec![], Terminator::Halt),
        ];
        assert_eq!(loop_reads(&straight, 0, 0), None);
        assert_eq!(loop_reads(&straight, 0, 1), None);
    }

    #[test]
    fn victims_go_furthest_first_then_largest() {
        let c = |slot, next_use, bytes| Candidate { slot, next_use, bytes };
        let order = victim_order(vec![
            c(0, Some(3), 100),
            c(1, None, 10),
            c(2, Some(9), 10),
            c(3, Some(9), 50),
            c(4, Some(1), 1000),
        ]);
        let slots: Vec<usize> = order.iter().map(|c| c.slot).collect();
        assert_eq!(slots, vec![1, 3, 2, 0, 4]);
    }
}
