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
    /// The most rows a window may hold (`Kernel::Window`), besides what fits in memory.
    pub(super) max_rows: Option<u64>,
    /// The loop over the boxes the devices claim (`Kernel::Claim { boxes, row_bytes }`),
    /// rather than over windows that fit in memory: the number of boxes, and whether its
    /// windows are also sized by memory (`row_bytes` then holds the row's bytes).
    pub(super) claim: Option<(u32, bool)>,
}

/// How the expansion of a multi-way join's level is cut (`Lower::expand_ranges`).
#[derive(Clone, Copy, Default)]
pub(super) struct Cut {
    /// Windows that fit in memory, a row taking this many bytes (the `rounds` pass).
    pub(super) window: Option<u64>,
    /// Boxes the devices of a run claim (work stealing over devices): this many.
    pub(super) boxes: Option<u32>,
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
    /// `Expand`; returns `parent` and `pos`. With `cut.window` (the bytes an expanded row
    /// costs), the expansion runs in rounds: a `Window` of its outputs that fits in memory
    /// at a time, the rest of the block (up to `close_rounds`) once per window. With
    /// `cut.boxes`, its outputs are cut into that many boxes (contiguous runs of the
    /// outputs, so each row of the state weighs what it expands to) and each device runs
    /// the rest of the block once per box it claims (`Claim`, windows within a box also
    /// sized by memory with `cut.window`), in blocks it runs by itself
    /// ([`Block::local`]); the loop's test is its own, so a device with cheap boxes takes
    /// more of them.
    pub(super) fn expand_ranges(
        &mut self,
        lo: BufId,
        hi: BufId,
        lvl: &str,
        rounds: &mut Vec<OpenRound>,
        cut: Cut,
    ) -> R<(BufId, BufId)> {
        let counts = self.launch1(Kernel::RangeCount, vec![lo, hi], &format!("{lvl}.counts"), None)?;
        let scan = self.launch(
            Kernel::ExclusiveScan,
            vec![counts],
            &[(&format!("{lvl}.offsets"), None), (&format!("{lvl}.total"), None)],
        )?;
        let mut args = vec![lo, scan[0], scan[1]];
        if let Some(boxes) = cut.boxes {
            if self.local {
                return Err(LowerError::Invalid(
                    "an expansion cut into boxes lies within another's boxes".into(),
                ));
            }
            let n = self.blocks.len();
            self.local = true;
            let head = self.new_block(format!("{lvl}.boxes{n}"));
            let body = self.new_block(format!("{lvl}.box{n}"));
            self.local = false;
            let exit = self.new_block(format!("{lvl}.boxes done{n}"));
            self.local = true;
            self.end_block(Terminator::Jump(head));
            self.start_block(head);
            let w = self.launch1(
                Kernel::Claim {
                    boxes,
                    row_bytes: cut.window,
                },
                vec![scan[1]],
                &format!("{lvl}.box"),
                None,
            )?;
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
                row_bytes: cut.window.unwrap_or(0),
                max_rows: None,
                claim: Some((boxes, cut.window.is_some())),
            });
            args.push(w);
        } else if let Some(row_bytes) = cut.window {
            let w = self.launch1(
                Kernel::Window {
                    row_bytes,
                    max_rows: None,
                },
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
                max_rows: None,
                claim: None,
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
            self.end_round(&r)?;
        }
        Ok(Closed::Accumulated(acc))
    }

    /// Ends the loop of round `r`: the next window taken (for a loop over boxes, the
    /// device's next claim), the body repeated while one is left, lowering continuing in
    /// the loop's exit block. A dictionary table computed in the loop is not defined
    /// where no round ran, so none is reused after it.
    pub(super) fn end_round(&mut self, r: &OpenRound) -> R<()> {
        let name = self.base_name(r.window);
        let kernel = match r.claim {
            Some((boxes, sized)) => Kernel::Claim {
                boxes,
                row_bytes: sized.then_some(r.row_bytes),
            },
            None => Kernel::Window {
                row_bytes: r.row_bytes,
                max_rows: r.max_rows,
            },
        };
        let next = self.launch1(kernel, vec![r.total, r.window], &name, None)?;
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
        if r.claim.is_some() {
            // Past the boxes the devices meet again.
            self.local = false;
        }
        self.tables.clear();
        Ok(())
    }
}

/// What ends the rounds of a binary join (`fox_phys::JoinRoundsEnd`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RoundsEnd {
    /// An aggregation: each round aggregated, the aggregates combined.
    Aggregation,
    /// A select filtering a join without keys: each round's survivors kept.
    Select,
    /// A duplicate removal: each round's rows sorted with repeats dropped, the rounds'
    /// runs merged with repeats dropped.
    Unique,
}

/// A binary join written in rounds (`fox_phys::join_aggregated_by`), open from the
/// expansion of its pairs to the aggregation that reads them (or, for a join without keys
/// filtered per round, `fox_phys::join_filtered_by`, to the select that reads it; for a
/// join only a duplicate removal reads, `fox_phys::join_deduplicated_by`, to that
/// `unique`): the loop's blocks and window, and the aggregation's running result, or the
/// survivors (the distinct rows) so far held in runs ([`SURVIVOR_RUNS`]).
pub(super) struct JoinRound {
    round: OpenRound,
    /// The loop the rounds of the pairs run within (an inequality join's rounds of
    /// probing rows), ended right after them; the running result is made before it.
    outer: Option<OpenRound>,
    until: fox_ra::TempId,
    /// The aggregation's running result; for a select, the oldest survivors; for a
    /// duplicate removal, the oldest distinct rows (sorted, duplicate-free).
    acc: Vec<BufId>,
    /// For a select, the newer survivors: run 0 the newest, each run's rows after those of
    /// the next (`acc` last), so that `acc`, then the runs from the last to run 0, are the
    /// survivors in the order of the rounds. For a duplicate removal, the newer distinct
    /// rows, each run sorted and duplicate-free (runs may share rows), run 0 the newest.
    runs: Vec<Vec<BufId>>,
}

/// The running result of a join written in rounds ([`Lower::join_result`]).
pub(super) struct JoinResult {
    acc: Vec<BufId>,
    runs: Vec<Vec<BufId>>,
}

/// The survivors of a join filtered per round are kept as the oldest ones plus this many
/// runs: each round's survivors are appended to run 0, and run `k` is appended to the
/// next (the last to the oldest) while it holds more than `1 / SURVIVOR_FACTOR` of the
/// next's rows (`Outgrows`), so that a round copies about as many rows as it adds, times
/// the logarithm of the rounds, instead of all the survivors so far; they are
/// concatenated once after the loop.
const SURVIVOR_RUNS: usize = 4;
const SURVIVOR_FACTOR: u32 = 2;

impl Lower<'_> {
    /// The running result of the join being lowered, when it is written in rounds (its
    /// node has one window): the aggregation's result so far (no rows), or for a select
    /// the oldest survivors and the runs of newer ones ([`SURVIVOR_RUNS`]). Made by
    /// [`Self::expand_pairs`] itself, or first by a join whose pairs' rounds run within
    /// a loop of its own ([`Self::expand_pairs_within`]), before that loop.
    pub(super) fn join_result(&mut self) -> R<Option<JoinResult>> {
        let Some((_, until, end)) = self.join_window else {
            return Ok(None);
        };
        let columns = self
            .ra
            .temps
            .get(until.0 as usize)
            .ok_or_else(|| LowerError::Invalid(format!("t{} has no schema", until.0)))?
            .columns
            .clone();
        let names: Vec<(String, Option<Type>)> = Self::col_names(&columns)
            .into_iter()
            .map(|(n, t)| (format!("{n}.acc"), t))
            .collect();
        let refs: Vec<(&str, Option<Type>)> = names.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        let kernel = Kernel::Const {
            types: phys_types(&columns),
            rows: Vec::new(),
        };
        let acc = self.launch(kernel.clone(), Vec::new(), &refs)?;
        // The runs of a select or a duplicate removal (an output without columns has no
        // length to compare and is appended to `acc` alone).
        let mut runs = Vec::new();
        if end != RoundsEnd::Aggregation && !columns.is_empty() {
            for k in 0..SURVIVOR_RUNS {
                let names: Vec<(String, Option<Type>)> = Self::col_names(&columns)
                    .into_iter()
                    .map(|(n, t)| (format!("{n}.run{k}"), t))
                    .collect();
                let refs: Vec<(&str, Option<Type>)> = names.iter().map(|(n, t)| (n.as_str(), *t)).collect();
                runs.push(self.launch(kernel.clone(), Vec::new(), &refs)?);
            }
        }
        Ok(Some(JoinResult { acc, runs }))
    }

    /// The pairs of a binary join from its probing rows' ranges `lo .. hi` of the searched
    /// side: `RangeCount`, `ExclusiveScan`, `Expand`, whose outputs are named `names` (the
    /// probing row, the position). When the join is written in rounds (its node has one
    /// window), a loop begins before the expansion: each round expands one `Window` of the
    /// pairs (a contiguous run of probing rows, the first and last perhaps in part), and
    /// the statements up to the aggregation that reads the join run once per round
    /// ([`Self::close_join_round`] ends the loop).
    pub(super) fn expand_pairs(&mut self, lo: BufId, hi: BufId, names: [&str; 2]) -> R<Vec<BufId>> {
        self.expand_pairs_within(lo, hi, names, None)
    }

    /// [`Self::expand_pairs`] inside the loop `outer` of a join written in rounds, whose
    /// running result ([`Self::join_result`]) was made before that loop: the rounds of
    /// each iteration's pairs add to it, and the statement that ends them ends `outer`
    /// too, right after (the loop's next iteration runs their rounds again).
    pub(super) fn expand_pairs_within(
        &mut self,
        lo: BufId,
        hi: BufId,
        names: [&str; 2],
        outer: Option<(OpenRound, JoinResult)>,
    ) -> R<Vec<BufId>> {
        let counts = self.launch1(Kernel::RangeCount, vec![lo, hi], "counts", None)?;
        let scan = self.launch(
            Kernel::ExclusiveScan,
            vec![counts],
            &[("offsets", None), ("total", None)],
        )?;
        let mut args = vec![lo, scan[0], scan[1]];
        let (outer, result) = match outer {
            Some((o, r)) => (Some(o), Some(r)),
            None => (None, self.join_result()?),
        };
        if let Some((row_bytes, until, _)) = self.join_window.take() {
            if self.join_round.is_some() {
                return Err(LowerError::Invalid("a join's rounds begin inside another's".into()));
            }
            let JoinResult { acc, runs } =
                result.ok_or_else(|| LowerError::Invalid("a join's rounds have no running result".into()))?;
            let kernel = Kernel::Window {
                row_bytes,
                max_rows: None,
            };
            let w = self.launch1(kernel, vec![scan[1]], "window", None)?;
            let n = self.blocks.len();
            let body = self.new_block(format!("{}.round{n}", self.prefix));
            let exit = self.new_block(format!("{}.done{n}", self.prefix));
            self.end_block(Terminator::LoopIf {
                nonempty: vec![w],
                body,
                exit,
            });
            self.start_block(body);
            args.push(w);
            self.join_round = Some(JoinRound {
                round: OpenRound {
                    body,
                    exit,
                    total: scan[1],
                    window: w,
                    row_bytes,
                    max_rows: None,
                    claim: None,
                },
                outer,
                until,
                acc,
                runs,
            });
        } else if outer.is_some() {
            return Err(LowerError::Invalid(
                "a join's rounds run within a loop but the join has no window".into(),
            ));
        }
        self.launch(Kernel::Expand, args, &[(names[0], None), (names[1], None)])
    }

    /// Ends the rounds of a join without keys at the select that filters it: `cols`, the
    /// survivors of one round's pairs, are appended to run 0 and the runs that outgrow
    /// the next appended to it ([`SURVIVOR_RUNS`]), each fold in a block of its own; the
    /// next window taken and the loop repeated while one is left. Returns the survivors
    /// of all rounds, concatenated once after the loop, in the order of the whole product
    /// filtered at once.
    pub(super) fn close_filter_round(&mut self, cols: Vec<BufId>, columns: Vec<Column>) -> R<Val> {
        let JoinRound {
            round,
            outer,
            acc,
            runs,
            ..
        } = self
            .join_round
            .take()
            .ok_or_else(|| LowerError::Invalid("a select ends rounds that never began".into()))?;
        let width = acc.len();
        if cols.len() != width || runs.iter().any(|r| r.len() != width) {
            return Err(LowerError::Invalid("a join's rounds lost a column".into()));
        }
        let append = |l: &mut Self, into: &[BufId], rows: &[BufId]| -> R<()> {
            let mut args = into.to_vec();
            args.extend(rows);
            let grown = l.launch_cols(Kernel::Concat { parts: 2, width }, args, &columns)?;
            for (&a, g) in into.iter().zip(grown) {
                l.instrs.push(Instr::Move { dst: a, src: g });
            }
            Ok(())
        };
        let Some(run0) = runs.first() else {
            append(self, &acc, &cols)?;
            self.end_rounds(&round, outer.as_ref())?;
            return Ok(Val::unordered(acc, columns));
        };
        append(self, run0, &cols)?;
        self.fold_round_runs(
            &runs,
            &acc,
            "survivors",
            "after appending the survivors",
            |l, run, next| {
                append(l, next, run)?;
                let kernel = Kernel::Const {
                    types: phys_types(&columns),
                    rows: Vec::new(),
                };
                l.launch_into(kernel, Vec::new(), run.to_vec())
            },
        )?;
        self.end_rounds(&round, outer.as_ref())?;
        let mut args = acc;
        for run in runs.iter().rev() {
            args.extend(run);
        }
        let all = self.launch_cols(
            Kernel::Concat {
                parts: runs.len() + 1,
                width,
            },
            args,
            &columns,
        )?;
        Ok(Val::unordered(all, columns))
    }

    /// The cascade of a join's rounds' runs ([`SURVIVOR_RUNS`]): for each run `k` in turn,
    /// when it holds more than `1 / SURVIVOR_FACTOR` of the next's rows (`acc` after the
    /// last), `fold(run k, next)` in a block of its own (labelled `fold {what} run k`);
    /// the blocks then join in one labelled `{after}`, where lowering goes on.
    fn fold_round_runs(
        &mut self,
        runs: &[Vec<BufId>],
        acc: &[BufId],
        what: &str,
        after: &str,
        mut fold: impl FnMut(&mut Self, &[BufId], &[BufId]) -> R<()>,
    ) -> R<()> {
        let label = self.cur_label.clone();
        let cont = self.new_block(format!("{label} {after}"));
        for k in 0..runs.len() {
            let next = runs.get(k + 1).map_or(acc, Vec::as_slice);
            let flag = self.launch1(
                Kernel::Outgrows {
                    factor: SURVIVOR_FACTOR,
                },
                vec![runs[k][0], next[0]],
                &format!("{what}.run{k}.full"),
                None,
            )?;
            let fold_block = self.new_block(format!("{label} fold {what} run {k}"));
            self.end_block(Terminator::If {
                nonempty: vec![flag],
                then: fold_block,
                otherwise: cont,
            });
            self.start_block(fold_block);
            fold(self, &runs[k], next)?;
        }
        self.end_block(Terminator::Jump(cont));
        self.start_block(cont);
        Ok(())
    }

    /// Ends the loop of a join's rounds `round` and then the loop `outer` they run within.
    fn end_rounds(&mut self, round: &OpenRound, outer: Option<&OpenRound>) -> R<()> {
        self.end_round(round)?;
        match outer {
            Some(o) => self.end_round(o),
            None => Ok(()),
        }
    }

    /// Whether the aggregation (or select) being lowered ends a join's rounds.
    pub(super) fn ends_join_round(&self) -> bool {
        matches!((&self.join_round, self.dst), (Some(r), Some(d)) if r.until == d)
    }

    /// Ends the rounds of a join at the aggregation that reads it: `partial`, the
    /// aggregation of one round's rows (the group columns, then one per aggregate), is
    /// combined with the rounds before (their concatenation aggregated again by the
    /// groups: counts and sums summed, minima and maxima taken), the next window taken and
    /// the loop repeated while one is left. Returns the combined aggregation (valid after
    /// the loop), sorted as the aggregation sorts its groups.
    pub(super) fn close_join_round(
        &mut self,
        partial: Val,
        group: &[usize],
        aggs: &[fox_ra::AggCall],
        columns: Vec<Column>,
    ) -> R<Val> {
        let JoinRound { round, outer, acc, .. } = self
            .join_round
            .take()
            .ok_or_else(|| LowerError::Invalid("an aggregation ends rounds that never began".into()))?;
        let width = acc.len();
        if partial.cols.len() != width || columns.len() != width {
            return Err(LowerError::Invalid("a join's rounds lost a column".into()));
        }
        let mut args = acc.clone();
        args.extend(&partial.cols);
        let grown = self.launch_cols(Kernel::Concat { parts: 2, width }, args, &columns)?;
        let g = group.len();
        let perm = self.key_perm(g);
        let v = Val::unordered(grown, columns.clone());
        let v = self.sort_code(v, &asc(perm.iter().copied()))?;
        let mut args: Vec<BufId> = perm.iter().map(|&i| v.cols[i]).collect();
        args.extend(&v.cols[g..]);
        let specs: Vec<AggSpec> = aggs
            .iter()
            .map(|a| AggSpec {
                func: match a.func {
                    AggFunc::Count | AggFunc::Sum => AggFunc::Sum,
                    f => f,
                },
                input: Some(a.ty),
                output: a.ty,
            })
            .collect();
        if let Some(a) = aggs.iter().find(|a| matches!(a.func, AggFunc::Avg)) {
            return Err(LowerError::Invalid(format!(
                "a join written in rounds is aggregated by {:?}, which does not combine",
                a.func
            )));
        }
        let mut out_cols: Vec<Column> = perm.iter().map(|&i| columns[i].clone()).collect();
        out_cols.extend(columns[g..].iter().cloned());
        let outs = self.launch_cols(Kernel::ReduceByKey { nkeys: g, aggs: specs }, args, &out_cols)?;
        let mut combined = vec![BufId(0); width];
        for (j, &i) in perm.iter().enumerate() {
            combined[i] = outs[j];
        }
        combined[g..].copy_from_slice(&outs[g..]);
        for (&a, c) in acc.iter().zip(combined) {
            self.instrs.push(Instr::Move { dst: a, src: c });
        }
        self.end_rounds(&round, outer.as_ref())?;
        Ok(Val::unordered(acc, columns))
    }
}

impl Lower<'_> {
    /// `a ∪ b` for two sets of `width` columns, each sorted ascending on the columns in
    /// the order `perm` and duplicate-free: their rows merged in that order, repeats
    /// dropped (`MergeUnion` over the columns permuted by `perm`, its outputs put back).
    fn merge_distinct(&mut self, a: &[BufId], b: &[BufId], perm: &[usize], columns: &[Column]) -> R<Vec<BufId>> {
        let width = perm.len();
        let mut args: Vec<BufId> = perm.iter().map(|&c| a[c]).collect();
        args.extend(perm.iter().map(|&c| b[c]));
        let names: Vec<Column> = perm.iter().map(|&c| columns[c].clone()).collect();
        let outs = self.launch_cols(Kernel::MergeUnion { width, disjoint: false }, args, &names)?;
        let mut merged = vec![BufId(0); width];
        for (j, &c) in perm.iter().enumerate() {
            merged[c] = outs[j];
        }
        Ok(merged)
    }

    /// Folds the distinct rows `from` into the distinct rows `into` (both sorted ascending
    /// on the columns in the order `perm`): merged with repeats dropped; then `from` is
    /// emptied when `clear`.
    fn fold_distinct(
        &mut self,
        from: &[BufId],
        into: &[BufId],
        perm: &[usize],
        columns: &[Column],
        clear: bool,
    ) -> R<()> {
        let merged = self.merge_distinct(into, from, perm, columns)?;
        for (&n, m) in into.iter().zip(merged) {
            self.instrs.push(Instr::Move { dst: n, src: m });
        }
        if clear {
            let kernel = Kernel::Const {
                types: phys_types(columns),
                rows: Vec::new(),
            };
            self.launch_into(kernel, Vec::new(), from.to_vec())?;
        }
        Ok(())
    }

    /// Ends the rounds of a join at the duplicate removal that reads it: `v`, one round's
    /// rows through the chain after the join, is sorted on `keys` (then every other
    /// column) made ascending, its repeats dropped, and merged into run 0 with repeats
    /// dropped ([`Self::fold_distinct`]); a run that outgrows the next is merged into it
    /// ([`SURVIVOR_RUNS`]), each fold in a block of its own; the next window taken and the
    /// loop repeated while one is left. After the loop the runs are merged, smallest
    /// first, into the oldest rows. Returns
    /// the distinct rows of all rounds, sorted on `keys` then every other column, as the
    /// duplicate removal of the whole join's rows sorts them. Without columns every row is
    /// equal: each round's row (if any) is appended and the repeats dropped once after
    /// the loop.
    pub(super) fn close_unique_round(&mut self, v: Val, keys: &[SortKey], columns: Vec<Column>) -> R<Val> {
        let JoinRound {
            round,
            outer,
            acc,
            runs,
            ..
        } = self
            .join_round
            .take()
            .ok_or_else(|| LowerError::Invalid("a duplicate removal ends rounds that never began".into()))?;
        let width = acc.len();
        if v.cols.len() != width || runs.iter().any(|r| r.len() != width) {
            return Err(LowerError::Invalid("a join's rounds lost a column".into()));
        }
        let full = Order::unique_keys(keys, v.arity());
        if columns.is_empty() || runs.is_empty() {
            let u = self.unique_on(v, &full)?;
            let mut args = acc.clone();
            args.extend(&u.cols);
            let grown = self.launch_cols(Kernel::Concat { parts: 2, width }, args, &columns)?;
            for (&a, g) in acc.iter().zip(grown) {
                self.instrs.push(Instr::Move { dst: a, src: g });
            }
            self.end_rounds(&round, outer.as_ref())?;
            let all = Val::unordered(acc, columns.clone());
            let u = self.unique_on(all, &full)?;
            return Ok(Val { columns, ..u });
        }
        // The runs are sorted ascending on the columns in the order of `full`.
        let perm: Vec<usize> = full.iter().map(|k| k.col).collect();
        let ascending = asc(perm.iter().copied());
        let u = self.unique_on(v, &ascending)?;
        self.fold_distinct(&u.cols, &runs[0], &perm, &columns, false)?;
        self.fold_round_runs(
            &runs,
            &acc,
            "distinct",
            "after merging the round's rows",
            |l, run, next| l.fold_distinct(run, next, &perm, &columns, true),
        )?;
        self.end_rounds(&round, outer.as_ref())?;
        for k in 0..runs.len() {
            let next = runs.get(k + 1).unwrap_or(&acc).clone();
            self.fold_distinct(&runs[k], &next, &perm, &columns, false)?;
        }
        let mut v = Val::unordered(acc, columns.clone());
        v.order = Order::unordered().sort_code(&ascending, &v.types());
        v.order.unique = true;
        let v = self.sort_code(v, &full)?;
        Ok(Val { columns, ..v })
    }
}
