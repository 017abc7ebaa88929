//! Tiered full relations (`fox_phys::Tiering`): a relation that loops merge into is held
//! as its own buffers plus `levels` runs, each a sorted, duplicate-free relation of the
//! same columns, run 0 the newest and smallest. Invariants:
//!
//! - the relation's rows are the union of its buffers and its runs;
//! - every run is empty at the start of the program, after the relation is stored,
//!   assigned or cleared, and after [`Lower::fold_runs`]; the lowering knows so
//!   (`empty_runs`) from there to the next merge in the same block;
//! - a merge goes into run 0, and run `i` folds into run `i + 1` (the last into the
//!   relation) while it holds more than `1 / factor` of the next's rows (`Outgrows`,
//!   branched on with `Terminator::If`);
//! - a difference whose right side is a scan of the relation subtracts the relation
//!   and then each run; every other scan folds the runs first; the runs fold when the
//!   loop that merges into the relation exits;
//! - the relation's buffers and its runs are pairwise disjoint: the rows a merge puts
//!   into run 0 are none of the relation's, either by construction ([`fresh_rows`]: the
//!   stored result of a difference against a scan of the relation, as every semi-naive
//!   loop merges) or because the merge subtracts the relation and its runs from them
//!   first. Every union of runs and relation is therefore a disjoint
//!   `MergeUnion { disjoint: true }`, which merges without looking for equal rows.

use super::*;

impl Lower<'_> {
    /// The tiering of relation `r`, if the physical plan gives it one.
    pub(super) fn tiering(&self, r: RelId) -> Option<fox_phys::Tiering> {
        self.phys
            .tiers
            .get(r.0 as usize)
            .copied()
            .flatten()
            .filter(|t| t.levels > 0)
    }

    /// Creates the run buffers of every tiered relation; returns the instructions that
    /// make them empty at the start.
    pub(super) fn declare_runs(&mut self) -> R<Vec<Instr>> {
        let mut init = Vec::new();
        for (i, r) in self.ra.relations.iter().enumerate() {
            let Some(t) = self.tiering(RelId(i as u32)) else {
                continue;
            };
            if r.columns.is_empty() {
                return Err(LowerError::Invalid(format!(
                    "`{}` has no columns to keep in runs",
                    r.name
                )));
            }
            let mut runs = Vec::with_capacity(t.levels);
            for k in 0..t.levels {
                let bufs: Vec<BufId> = r
                    .columns
                    .iter()
                    .map(|c| self.new_buf(&format!("{}.run{k}.{}", r.name, c.name), Elem::of(c.ty), Some(c.ty)))
                    .collect();
                init.push(Instr::Launch {
                    kernel: Kernel::Const {
                        types: phys_types(&r.columns),
                        rows: Vec::new(),
                    },
                    args: Vec::new(),
                    outs: bufs.clone(),
                    origin: None,
                });
                runs.push(bufs);
            }
            self.runs.insert(i as u32, runs);
        }
        Ok(init)
    }

    /// Run `k` of relation `r` (`k == levels`: the relation's own buffers).
    fn run_val(&self, r: RelId, k: usize) -> Val {
        let mut v = self.rel_val(r);
        if let Some(bufs) = self.runs.get(&r.0).and_then(|runs| runs.get(k)) {
            v.cols = bufs.clone();
        }
        v
    }

    fn set_run(&mut self, r: RelId, k: usize, v: &Val) {
        let dsts = self.run_val(r, k).cols;
        for (d, s) in dsts.into_iter().zip(v.cols.clone()) {
            self.instrs.push(Instr::Move { dst: d, src: s });
        }
    }

    fn clear_run(&mut self, r: RelId, k: usize) -> R<()> {
        let rel = &self.ra.relations[r.0 as usize];
        let kernel = Kernel::Const {
            types: phys_types(&rel.columns),
            rows: Vec::new(),
        };
        let outs = self.run_val(r, k).cols;
        self.launch_into(kernel, Vec::new(), outs)
    }

    /// Empties the runs of `r` (after its buffers were given all of its rows).
    pub(super) fn clear_runs(&mut self, r: RelId) -> R<()> {
        for k in 0..self.tiering(r).map_or(0, |t| t.levels) {
            self.clear_run(r, k)?;
        }
        self.empty_runs.insert(r.0);
        Ok(())
    }

    /// The union of two sorted sets of the same columns, sorted and duplicate-free;
    /// `disjoint`: the two share no row (the kernel then does not look for equal rows).
    pub(super) fn union_sets(&mut self, a: &Val, b: &Val, disjoint: bool) -> R<Val> {
        let mut args = a.cols.clone();
        args.extend(&b.cols);
        let mut columns = a.columns.clone();
        for c in &mut columns {
            c.name = format!("merged.{}", c.name);
        }
        let width = a.cols.len();
        let outs = self.launch_cols(Kernel::MergeUnion { width, disjoint }, args, &columns)?;
        Ok(Val {
            cols: outs,
            ..a.clone()
        })
    }

    /// `merge from into r` (statement `at` of the block) for a tiered `r`: into run 0,
    /// then the folds of the runs that outgrow the next, each in a block of its own,
    /// continuing in a new block. Rows of `from` that [`fresh_rows`] does not prove new
    /// to `r` are first subtracted from it (the relation, then each run).
    pub(super) fn tiered_merge(&mut self, r: RelId, from: RelId, at: usize) -> R<()> {
        let fresh = fresh_rows(self.stmts, at, r, from);
        let Some(t) = self.tiering(r) else {
            return self.merge(r, from, fresh);
        };
        let rel = &self.ra.relations[r.0 as usize];
        self.prefix = rel.name.clone();
        let name = rel.name.clone();
        let columns = rel.columns.clone();
        let set = Props::set(rel.columns.len());
        let new = self.rel_val(from);
        let mut new = self.ensure(new, &set)?;
        if !fresh {
            let all: Vec<usize> = (0..new.arity()).collect();
            let held = self.rel_val(r);
            new = self.semi_join_vals(new, &all, held, &all, true, columns.clone())?;
            new = self.subtract_runs(new, r, &columns)?;
        }
        self.empty_runs.remove(&r.0);
        let run0 = self.run_val(r, 0);
        let merged = self.union_sets(&run0, &new, true)?;
        self.set_run(r, 0, &merged);
        let label = self.cur_label.clone();
        let cont = self.new_block(format!("{label} after merging {name}"));
        for k in 0..t.levels {
            let (small, next) = (self.run_val(r, k), self.run_val(r, k + 1));
            let flag = self.launch1(
                Kernel::Outgrows { factor: t.factor },
                vec![small.cols[0], next.cols[0]],
                &format!("run{k}.full"),
                None,
            )?;
            let fold = self.new_block(format!("{label} fold {name} run {k}"));
            self.end_block(Terminator::If {
                nonempty: vec![flag],
                then: fold,
                otherwise: cont,
            });
            self.start_block(fold);
            let folded = self.union_sets(&next, &small, true)?;
            if k + 1 == t.levels {
                self.move_into(r, &folded);
            } else {
                self.set_run(r, k + 1, &folded);
            }
            self.clear_run(r, k)?;
        }
        self.end_block(Terminator::Jump(cont));
        self.start_block(cont);
        Ok(())
    }

    /// Folds every run of `r` into its buffers: the relation's rows all in one sorted
    /// set, the runs empty. The runs merge smallest first, then into the relation.
    pub(super) fn fold_runs(&mut self, r: RelId) -> R<()> {
        let Some(t) = self.tiering(r) else {
            return Ok(());
        };
        if self.empty_runs.contains(&r.0) {
            return Ok(());
        }
        self.prefix = self.ra.relations[r.0 as usize].name.clone();
        let mut acc = self.run_val(r, 0);
        for k in 1..t.levels {
            let run = self.run_val(r, k);
            acc = self.union_sets(&run, &acc, true)?;
        }
        let all = self.rel_val(r);
        let all = self.union_sets(&all, &acc, true)?;
        self.move_into(r, &all);
        self.clear_runs(r)
    }

    /// Whether every reader of temp `t` in the block being lowered is a difference that
    /// subtracts it (which subtracts the runs as well).
    pub(super) fn only_subtracted(&self, t: fox_ra::TempId) -> bool {
        let mut any = false;
        for s in self.stmts {
            match s {
                Stmt::Let {
                    op: Op::Difference { left, right },
                    ..
                } if *right == t && *left != t => any = true,
                Stmt::Let { op, .. } if op.inputs().contains(&t) => return false,
                Stmt::Store { src, .. } | Stmt::Output { src, .. } | Stmt::CheckFunctional { src, .. } if *src == t => {
                    return false
                }
                _ => {}
            }
        }
        any
    }

    /// `v` (rows of `r`'s columns) without the rows of `r`'s runs: one `MatchFlags` with
    /// every run as a right side, and one compaction.
    pub(super) fn subtract_runs(&mut self, v: Val, r: RelId, columns: &[Column]) -> R<Val> {
        let levels = self.tiering(r).map_or(0, |t| t.levels);
        if levels == 0 {
            return Ok(v);
        }
        let perm = self.key_perm(v.arity());
        let order = asc(perm.iter().copied());
        let v = self.sort_code(v, &order)?;
        let mut args: Vec<BufId> = perm.iter().map(|&c| v.cols[c]).collect();
        for k in 0..levels {
            // Runs are sorted on every column (a no-op unless the key order differs).
            let run = self.sort_code(self.run_val(r, k), &order)?;
            args.extend(perm.iter().map(|&c| run.cols[c]));
        }
        let nkeys = perm.len();
        let flags = self.launch1(Kernel::MatchFlags { nkeys, anti: true }, args, "match", None)?;
        let cols = self.compact(flags, &v.cols, columns)?;
        Ok(Val {
            cols,
            columns: columns.to_vec(),
            ..v
        })
    }
}

/// Whether the rows of relation `from` are, where statement `at` of `stmts` (a merge of
/// `from` into `into`) runs, provably none of `into`'s: the last write of `from` before
/// it in the block is a clear, or the store of `left − s` where `s` is a scan of `into`
/// after which, up to the merge, nothing writes `into` and nothing else scans it (so the
/// difference subtracted exactly the rows `into` holds at the merge). A semi-naive loop's
/// `new := (∪ variants) − full; merge new into full` is of that form.
pub(super) fn fresh_rows(stmts: &[Stmt], at: usize, into: RelId, from: RelId) -> bool {
    let writes = |s: &Stmt, r: RelId| match s {
        Stmt::Store { rel, .. } | Stmt::Clear { rel } => *rel == r,
        Stmt::Merge { into, .. } => *into == r,
        Stmt::Assign { dst, .. } => *dst == r,
        _ => false,
    };
    let def = |t: fox_ra::TempId, before: usize| {
        stmts[..before].iter().enumerate().rev().find_map(|(i, s)| match s {
            Stmt::Let { dst, op, .. } if *dst == t => Some((i, op)),
            _ => None,
        })
    };
    let Some(prefix) = stmts.get(..at) else {
        return false;
    };
    let Some((k, last)) = prefix.iter().enumerate().rev().find(|(_, s)| writes(s, from)) else {
        return false;
    };
    let src = match last {
        Stmt::Clear { .. } => return true,
        Stmt::Store { src, .. } => *src,
        _ => return false,
    };
    let Some((_, Op::Difference { right, .. })) = def(src, k) else {
        return false;
    };
    let Some((f, Op::Scan(scanned))) = def(*right, k) else {
        return false;
    };
    if *scanned != into {
        return false;
    }
    stmts[f + 1..at]
        .iter()
        .all(|s| !writes(s, into) && !matches!(s, Stmt::Let { op: Op::Scan(r), .. } if *r == into))
}
