//! Equi-joins that search one side per row of the other, which is never sorted: hash
//! joins (`fox_phys::Algorithm::Hash`: the build side sorted on the keys, `HashBuild`,
//! then `HashProbe` per probing row) and index nested-loop joins
//! (`Algorithm::IndexNestedLoop`: the indexed side sorted on the keys, then `BoundRange`
//! without bounds per probing row). Both give each probing row its run of equal keys on
//! the searched side, expanded as a band join's ranges are (range counts, scan,
//! load-balanced expansion, gathers), so the join's rows come in the probing side's order
//! and, for one probing row, in the searched side's sorted order. Semi-joins, anti-joins
//! and differences search their right side: `HashMatch` flags, or `BoundRange` ranges
//! made flags, then a compaction of the left, which keeps its order. Nested-loop joins
//! (`Algorithm::NestedLoop`) sort neither side: `NestedLoopCount` → scan →
//! `NestedLoopWrite` (or `NestedLoopMatch` flags), rows by left row then right row.

use super::*;

/// A side and its key columns.
type Keyed = (Val, Vec<usize>);

/// How a searched join finds each probing row's run of equal keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Search {
    Hash,
    Index,
}

impl Lower<'_> {
    /// A semi-join, anti-join (`anti`) or difference by the algorithm `join-selection`
    /// chose for it.
    pub(super) fn match_rows(
        &mut self,
        left: fox_ra::TempId,
        right: fox_ra::TempId,
        lk: &[usize],
        rk: &[usize],
        anti: bool,
        columns: Vec<Column>,
    ) -> R<Val> {
        match self.dst.map(|d| &self.phys.node(d).algorithm) {
            Some(Algorithm::Hash { .. }) => self.searched_match(Search::Hash, left, right, lk, rk, anti, columns),
            Some(Algorithm::IndexNestedLoop { .. }) => {
                self.searched_match(Search::Index, left, right, lk, rk, anti, columns)
            }
            Some(Algorithm::NestedLoop) => self.nested_match(left, right, lk, rk, anti, columns),
            _ => self.semi_join(left, right, lk, rk, anti, columns),
        }
    }

    /// The run of equal keys in `searched` (sorted on `sk` by now) of every row of `probe`:
    /// `lo`, `hi`.
    fn search_runs(&mut self, how: Search, searched: &Val, sk: &[usize], probe: &Val, pk: &[usize]) -> R<Vec<BufId>> {
        let nkeys = sk.len();
        let skeys: Vec<BufId> = sk.iter().map(|&c| searched.cols[c]).collect();
        let pkeys = pk.iter().map(|&c| probe.cols[c]);
        let mut args = skeys.clone();
        let kernel = match how {
            Search::Hash => {
                let table = self.launch1(Kernel::HashBuild { nkeys }, skeys, "table", None)?;
                args.push(table);
                Kernel::HashProbe { nkeys }
            }
            Search::Index => Kernel::BoundRange {
                nkeys,
                lower: None,
                upper: None,
            },
        };
        args.extend(pkeys);
        self.launch(kernel, args, &[("lo", None), ("hi", None)])
    }

    /// The keys in the order the order pass chose (which reuses the searched side's sort),
    /// and the searched side sorted on them.
    fn searched_sides(&mut self, l: Val, lk: &[usize], r: Val, rk: &[usize], searched: Side) -> R<(Keyed, Keyed)> {
        let perm = self.key_perm(lk.len());
        let lk: Vec<usize> = perm.iter().map(|&i| lk[i]).collect();
        let rk: Vec<usize> = perm.iter().map(|&i| rk[i]).collect();
        let ((s, sk), probe) = match searched {
            Side::Left => ((l, lk), (r, rk)),
            Side::Right => ((r, rk), (l, lk)),
        };
        let s = self.sort_code(s, &asc(sk.iter().copied()))?;
        Ok(((s, sk), probe))
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn searched_join(
        &mut self,
        how: Search,
        left: fox_ra::TempId,
        right: fox_ra::TempId,
        lk: &[usize],
        rk: &[usize],
        searched: Side,
        output: &[JoinCol],
        columns: Vec<Column>,
    ) -> R<Val> {
        if lk.is_empty() {
            return Err(LowerError::Invalid(
                "a hash or index nested-loop join without keys".into(),
            ));
        }
        let (l, r) = (self.temp(left)?, self.temp(right)?);
        let ((s, sk), (p, pk)) = self.searched_sides(l, lk, r, rk, searched)?;
        let range = self.search_runs(how, &s, &sk, &p, &pk)?;
        self.expand_ranges_join(&range, &s, &p, searched, output, columns)
    }

    /// Semi-join (`anti == false`), anti-join and difference by searching the right side:
    /// the left's rows with (without) a run of equal keys on the right, in the left's order.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn searched_match(
        &mut self,
        how: Search,
        left: fox_ra::TempId,
        right: fox_ra::TempId,
        lk: &[usize],
        rk: &[usize],
        anti: bool,
        columns: Vec<Column>,
    ) -> R<Val> {
        if lk.is_empty() {
            return Err(LowerError::Invalid(
                "a hash or index nested-loop match without keys".into(),
            ));
        }
        let (l, r) = (self.temp(left)?, self.temp(right)?);
        // Only the right's key columns matter.
        let r = self.project(&r, rk)?;
        let rk: Vec<usize> = (0..rk.len()).collect();
        let ((s, sk), (p, pk)) = self.searched_sides(l, lk, r, &rk, Side::Right)?;
        let nkeys = sk.len();
        let flags = match how {
            Search::Hash => {
                let skeys: Vec<BufId> = sk.iter().map(|&c| s.cols[c]).collect();
                let table = self.launch1(Kernel::HashBuild { nkeys }, skeys.clone(), "table", None)?;
                let mut args = skeys;
                args.push(table);
                args.extend(pk.iter().map(|&c| p.cols[c]));
                self.launch1(Kernel::HashMatch { nkeys, anti }, args, "match", None)?
            }
            Search::Index => {
                let range = self.search_runs(how, &s, &sk, &p, &pk)?;
                let op = if anti { CmpOp::Eq } else { CmpOp::Ne };
                self.range_flags(range, op)?
            }
        };
        let cols = self.compact(flags, &p.cols, &columns)?;
        Ok(Val { cols, columns, ..p })
    }

    /// Flags of ranges `lo`, `hi`: `hi op lo` (`Ne`: the range holds a row, `Eq`: none).
    fn range_flags(&mut self, range: Vec<BufId>, op: CmpOp) -> R<BufId> {
        let col = |i: usize| KExpr {
            kind: KExprKind::Col(i),
            ty: Type::String,
        };
        let expr = KExpr {
            kind: KExprKind::Cmp(op, Box::new(col(1)), Box::new(col(0))),
            ty: Type::Bool,
        };
        self.launch1(Kernel::Eval { expr, n_cols: 2 }, range, "match", None)
    }

    /// A nested-loop join (`Algorithm::NestedLoop`): neither side sorted, every pair of
    /// rows compared; the rows come by left row, then right row.
    pub(super) fn nested_join(
        &mut self,
        left: fox_ra::TempId,
        right: fox_ra::TempId,
        lk: &[usize],
        rk: &[usize],
        output: &[JoinCol],
        columns: Vec<Column>,
    ) -> R<Val> {
        if lk.is_empty() {
            return Err(LowerError::Invalid("a nested-loop join without keys".into()));
        }
        let (l, r) = (self.temp(left)?, self.temp(right)?);
        let nkeys = lk.len();
        let keys = Self::key_args(&l, lk, &r, rk);
        let counts = self.launch1(Kernel::NestedLoopCount { nkeys }, keys.clone(), "counts", None)?;
        let scan = self.launch(
            Kernel::ExclusiveScan,
            vec![counts],
            &[("offsets", None), ("total", None)],
        )?;
        let mut args = keys;
        args.extend(&scan);
        let idx = self.launch(
            Kernel::NestedLoopWrite { nkeys },
            args,
            &[("lidx", None), ("ridx", None)],
        )?;
        self.join_rows(&l, idx[0], &r, idx[1], output, columns)
    }

    /// A nested-loop semi-join, anti-join (`anti`) or difference: the left's rows with
    /// (without) an equal right row, in the left's order.
    fn nested_match(
        &mut self,
        left: fox_ra::TempId,
        right: fox_ra::TempId,
        lk: &[usize],
        rk: &[usize],
        anti: bool,
        columns: Vec<Column>,
    ) -> R<Val> {
        if lk.is_empty() {
            return Err(LowerError::Invalid("a nested-loop match without keys".into()));
        }
        let (l, r) = (self.temp(left)?, self.temp(right)?);
        let nkeys = lk.len();
        let keys = Self::key_args(&l, lk, &r, rk);
        let flags = self.launch1(Kernel::NestedLoopMatch { nkeys, anti }, keys, "match", None)?;
        let cols = self.compact(flags, &l.cols, &columns)?;
        Ok(Val { cols, columns, ..l })
    }
}
