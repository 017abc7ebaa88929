//! Binary joins, semi-joins, anti-joins and differences: both sides sorted on their keys
//! (in the key order the order pass chose), then count, scan and write, or match flags.

use super::*;

impl Lower<'_> {
    /// The key columns of the two sides of a join-like kernel; with no keys, one column of
    /// each side (which give the row counts).
    pub(super) fn key_args(l: &Val, lk: &[usize], r: &Val, rk: &[usize]) -> Vec<BufId> {
        if lk.is_empty() {
            return vec![l.cols[0], r.cols[0]];
        }
        let mut args: Vec<BufId> = lk.iter().map(|&c| l.cols[c]).collect();
        args.extend(rk.iter().map(|&c| r.cols[c]));
        args
    }

    /// Sorts both sides of a join-like operator on their keys, in an order that reuses an
    /// existing sort where there is one. Returns the sorted sides and the reordered keys.
    pub(super) fn sort_sides(
        &mut self,
        l: Val,
        lk: &[usize],
        r: Val,
        rk: &[usize],
    ) -> R<(Val, Vec<usize>, Val, Vec<usize>)> {
        if lk.is_empty() {
            return Ok((l, Vec::new(), r, Vec::new()));
        }
        let perm = self.key_perm(lk.len());
        let lk: Vec<usize> = perm.iter().map(|&i| lk[i]).collect();
        let rk: Vec<usize> = perm.iter().map(|&i| rk[i]).collect();
        let l = self.sort_code(l, &asc(lk.iter().copied()))?;
        let r = self.sort_code(r, &asc(rk.iter().copied()))?;
        Ok((l, lk, r, rk))
    }

    pub(super) fn join(
        &mut self,
        left: fox_ra::TempId,
        right: fox_ra::TempId,
        lk: &[usize],
        rk: &[usize],
        output: &[JoinCol],
        columns: Vec<Column>,
    ) -> R<Val> {
        let (l, r) = (self.temp(left)?, self.temp(right)?);
        let (l, lk, r, rk) = self.sort_sides(l, lk, r, rk)?;
        let nkeys = lk.len();
        if self.join_window.is_some() && nkeys > 0 {
            // Written in rounds: each left row's run of equal keys in the sorted right
            // (`BoundRange` without bounds), expanded a window at a time; the pairs come
            // in the order `JoinWrite` writes them.
            let mut args: Vec<BufId> = rk.iter().map(|&c| r.cols[c]).collect();
            args.extend(lk.iter().map(|&c| l.cols[c]));
            let kernel = Kernel::BoundRange {
                nkeys,
                lower: None,
                upper: None,
            };
            let range = self.launch(kernel, args, &[("lo", None), ("hi", None)])?;
            return self.expand_ranges_join(&range, &r, &l, Side::Right, output, columns);
        }
        if self.join_window.is_some() && nkeys == 0 {
            // A cross product filtered per round: every left row's range is the whole
            // right side, the run of one constant key on both sides (`BoundRange` without
            // bounds), expanded a window at a time; the pairs come by left row, then right
            // row, as `JoinWrite` writes them.
            let rkey = self.ones(r.cols[0])?;
            let lkey = self.ones(l.cols[0])?;
            let kernel = Kernel::BoundRange {
                nkeys: 1,
                lower: None,
                upper: None,
            };
            let range = self.launch(kernel, vec![rkey, lkey], &[("lo", None), ("hi", None)])?;
            return self.expand_ranges_join(&range, &r, &l, Side::Right, output, columns);
        }
        let keys = Self::key_args(&l, &lk, &r, &rk);
        let counts = self.launch1(Kernel::JoinCount { nkeys }, keys.clone(), "counts", None)?;
        let scan = self.launch(
            Kernel::ExclusiveScan,
            vec![counts],
            &[("offsets", None), ("total", None)],
        )?;
        let mut args = keys;
        args.extend(&scan);
        let idx = self.launch(Kernel::JoinWrite { nkeys }, args, &[("lidx", None), ("ridx", None)])?;
        self.join_rows(&l, idx[0], &r, idx[1], output, columns)
    }

    /// The output of a join whose probing rows found their matches as ranges of the
    /// searched side (`range`: `lo`, `hi` per probing row): one pair per position of each
    /// range (range counts, scan, load-balanced expansion: `expand_pairs`, in rounds when
    /// the join is written in rounds), then `join_rows`, the `searched` side being
    /// `sorted`.
    pub(super) fn expand_ranges_join(
        &mut self,
        range: &[BufId],
        sorted: &Val,
        probe: &Val,
        searched: Side,
        output: &[JoinCol],
        columns: Vec<Column>,
    ) -> R<Val> {
        let [lo, hi] = range else {
            return Err(LowerError::Invalid("a join's ranges are not `lo`, `hi`".into()));
        };
        let idx = self.expand_pairs(*lo, *hi, ["probe", "match"])?;
        match searched {
            Side::Left => self.join_rows(sorted, idx[1], probe, idx[0], output, columns),
            Side::Right => self.join_rows(probe, idx[0], sorted, idx[1], output, columns),
        }
    }

    /// The output of a join from its pairs: `lidx` rows of `l` with `ridx` rows of `r`,
    /// one gather per side of the columns the output takes from it.
    pub(super) fn join_rows(
        &mut self,
        l: &Val,
        lidx: BufId,
        r: &Val,
        ridx: BufId,
        output: &[JoinCol],
        columns: Vec<Column>,
    ) -> R<Val> {
        let mut picked: HashMap<(bool, usize), BufId> = HashMap::new();
        for (side, v, ix) in [(Side::Left, l, lidx), (Side::Right, r, ridx)] {
            let mut want: Vec<usize> = Vec::new();
            for jc in output {
                if jc.side == side && !want.contains(&jc.col) {
                    want.push(jc.col);
                }
            }
            if want.is_empty() {
                continue;
            }
            let srcs: Vec<BufId> = want.iter().map(|&c| v.cols[c]).collect();
            let names: Vec<Column> = want
                .iter()
                .map(|&c| {
                    let pos = output.iter().position(|o| o.side == side && o.col == c).unwrap_or(0);
                    columns.get(pos).cloned().unwrap_or_else(|| v.columns[c].clone())
                })
                .collect();
            let got = self.gather(ix, &srcs, &names, 0)?;
            for (c, b) in want.into_iter().zip(got) {
                picked.insert((side == Side::Left, c), b);
            }
        }
        let mut cols: Vec<BufId> = output
            .iter()
            .map(|jc| picked[&(jc.side == Side::Left, jc.col)])
            .collect();
        if cols.is_empty() {
            cols.push(self.ones(lidx)?);
        }
        Ok(Val::unordered(cols, columns))
    }

    /// Semi-join (`anti == false`), anti-join and difference: the rows of the left side
    /// with (without) a match on the right. The output has the left's (sorted) order.
    pub(super) fn semi_join(
        &mut self,
        left: fox_ra::TempId,
        right: fox_ra::TempId,
        lk: &[usize],
        rk: &[usize],
        anti: bool,
        columns: Vec<Column>,
    ) -> R<Val> {
        let (l, r) = (self.temp(left)?, self.temp(right)?);
        self.semi_join_vals(l, lk, r, rk, anti, columns)
    }

    /// [`Self::semi_join`] of two values.
    pub(super) fn semi_join_vals(
        &mut self,
        l: Val,
        lk: &[usize],
        r: Val,
        rk: &[usize],
        anti: bool,
        columns: Vec<Column>,
    ) -> R<Val> {
        // Only the right's key columns matter.
        let r = if rk.is_empty() { r } else { self.project(&r, rk)? };
        let rk: Vec<usize> = (0..rk.len()).collect();
        let (l, lk, r, rk) = self.sort_sides(l, lk, r, &rk)?;
        let nkeys = lk.len();
        let keys = Self::key_args(&l, &lk, &r, &rk);
        let flags = self.launch1(Kernel::MatchFlags { nkeys, anti }, keys, "match", None)?;
        let cols = self.compact(flags, &l.cols, &columns)?;
        Ok(Val { cols, columns, ..l })
    }
}
