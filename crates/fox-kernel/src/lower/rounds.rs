//! Rounds: a multi-way join level the rounds pass marks expands one window of its
//! outputs at a time inside a loop of blocks, and the rounds' results accumulate.

use super::*;

/// A level of a multi-way join running in rounds: the loop's blocks, the expansion's
/// total and the variable holding the current window.
pub(super) struct OpenRound {
    pub(super) body: BlockId,
    pub(super) exit: BlockId,
    pub(super) total: BufId,
    pub(super) window: BufId,
    pub(super) row_bytes: u64,
}

/// The result of a multi-way join after its rounds.
pub(super) enum Closed {
    /// No level ran in rounds: the columns as computed.
    Same(Vec<BufId>),
    /// The columns accumulated over the rounds.
    Accumulated(Vec<BufId>),
}

impl Lower<'_> {
    /// One row per value of each row's range `lo .. hi`: `RangeCount`, `ExclusiveScan`,
    /// `Expand`; returns `parent` and `pos`. With `window` (the bytes an expanded row
    /// costs), the expansion runs in rounds: a `Window` of its outputs that fits in memory
    /// at a time, the rest of the block (up to `close_rounds`) once per window.
    pub(super) fn expand_ranges(
        &mut self,
        lo: BufId,
        hi: BufId,
        lvl: &str,
        rounds: &mut Vec<OpenRound>,
        window: Option<u64>,
    ) -> R<(BufId, BufId)> {
        let counts = self.launch1(Kernel::RangeCount, vec![lo, hi], &format!("{lvl}.counts"), None)?;
        let scan = self.launch(
            Kernel::ExclusiveScan,
            vec![counts],
            &[(&format!("{lvl}.offsets"), None), (&format!("{lvl}.total"), None)],
        )?;
        let mut args = vec![lo, scan[0], scan[1]];
        if let Some(row_bytes) = window {
            let w = self.launch1(
                Kernel::Window { row_bytes },
                vec![scan[1]],
                &format!("{lvl}.window"),
                None,
            )?;
            let n = self.blocks.len();
            let body = self.new_block(format!("{lvl}.round{n}"));
            let exit = self.new_block(format!("{lvl}.done{n}"));
            self.end_block(Terminator::LoopIf {
                nonempty: vec![w],
                body,
                exit,
            });
            self.start_block(body);
            rounds.push(OpenRound {
                body,
                exit,
                total: scan[1],
                window: w,
                row_bytes,
            });
            args.push(w);
        }
        let ex = self.launch(
            Kernel::Expand,
            args,
            &[(&format!("{lvl}.parent"), None), (&format!("{lvl}.pos"), None)],
        )?;
        Ok((ex[0], ex[1]))
    }

    /// Ends the rounds `expand_ranges` began, innermost first: the result `cols` of a round
    /// is appended to `acc`, the next window taken, and the loop repeated while one is
    /// left. Returns `cols` itself when no level ran in rounds, otherwise the accumulated
    /// columns (valid after the loops).
    pub(super) fn close_rounds(
        &mut self,
        rounds: Vec<OpenRound>,
        acc: Option<Vec<BufId>>,
        cols: Vec<BufId>,
    ) -> R<Closed> {
        let Some(acc) = acc.filter(|_| !rounds.is_empty()) else {
            return Ok(Closed::Same(cols));
        };
        if acc.len() != cols.len() {
            return Err(LowerError::Invalid("a multi-way join's rounds lost a column".into()));
        }
        let width = cols.len();
        let mut args = acc.clone();
        args.extend(cols);
        let names: Vec<(String, Option<Type>)> = acc
            .iter()
            .map(|&b| (self.base_name(b), self.buffers[b.0 as usize].ty))
            .collect();
        let refs: Vec<(&str, Option<Type>)> = names.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        let grown = self.launch(Kernel::Concat { parts: 2, width }, args, &refs)?;
        for (&a, g) in acc.iter().zip(grown) {
            self.instrs.push(Instr::Move { dst: a, src: g });
        }
        for r in rounds.into_iter().rev() {
            let name = self.base_name(r.window);
            let next = self.launch1(
                Kernel::Window { row_bytes: r.row_bytes },
                vec![r.total, r.window],
                &name,
                None,
            )?;
            self.instrs.push(Instr::Move {
                dst: r.window,
                src: next,
            });
            self.end_block(Terminator::LoopIf {
                nonempty: vec![r.window],
                body: r.body,
                exit: r.exit,
            });
            self.start_block(r.exit);
        }
        Ok(Closed::Accumulated(acc))
    }
}
