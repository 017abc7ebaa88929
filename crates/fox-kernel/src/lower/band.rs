//! Band joins (`fox_phys::Algorithm::Band`): the searched side ordered on the join's keys
//! and then the bounded column, each probing row's range of equal keys within its bounds
//! (`BoundRange`), then one output row per row of each range: range counts, scan,
//! load-balanced expansion, gathers. The probing side is never sorted, so the join keeps
//! its order.
//!
//! An inequality join (a band with a second bounded column) searches the first column's
//! range the same way, then splits it into the aligned blocks of a merge-sort tree over
//! the second column (`IneqTree`), each ordered by it, and takes from each block the part
//! within the second column's bounds (`IneqRanges`); the expansion runs over those
//! ranges, which hold tree entries (positions of the sorted side). Pairs come by probing
//! row, then by the blocks in position order, then by the second column.
//!
//! An inequality join probes in rounds: a `Window` of its probing rows at a time (what
//! half the memory left holds at [`probe_row_bytes`] a row, and at most
//! [`MAX_PROBE_ROWS`], or the smaller `LowerOptions::probe_rows`, so that a round's
//! `rows · 2L` ranges stay u32-addressed). Where its rows are kept, each round's pairs are
//! appended to the rounds' before; the rounds in probing order give the pairs of the
//! whole in its order. Where only an aggregation reads them, each round's pairs are
//! written in rounds of their own (`expand_pairs_within`), each aggregated and combined
//! with the aggregation's running result, made before the first round: the rounds of
//! pairs end, then the round of probing rows, at that aggregation.

use super::*;
use fox_phys::Band;

/// The most probing rows of an inequality join one round probes: their `2L` ranges each,
/// with `L` the levels of a tree over the most rows a u32 position addresses, stay below
/// 2^32.
pub const MAX_PROBE_ROWS: u64 = u32::MAX as u64 / (2 * ineq_levels(u32::MAX as usize) as u64);

/// What one probing row of an inequality join's round costs: its row index and position
/// (8 bytes), its range on the first column and its `bounds` bound columns (gathered, at
/// most 8 bytes each), and its `2L` ranges (`lo`, `hi`, `row`, count and offset: 28 bytes
/// each) for the deepest tree a u32 position addresses.
pub(super) fn probe_row_bytes(bounds: usize) -> u64 {
    8 + 8 + 8 * bounds as u64 + 2 * ineq_levels(u32::MAX as usize) as u64 * 28
}

impl Lower<'_> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn band_join(
        &mut self,
        left: fox_ra::TempId,
        right: fox_ra::TempId,
        lk: &[usize],
        rk: &[usize],
        band: &Band,
        output: &[JoinCol],
        columns: Vec<Column>,
    ) -> R<Val> {
        let (l, r) = (self.temp(left)?, self.temp(right)?);
        // Keys in the order the order pass chose (which reuses an existing sort).
        let perm = self.key_perm(lk.len());
        let lk: Vec<usize> = perm.iter().map(|&i| lk[i]).collect();
        let rk: Vec<usize> = perm.iter().map(|&i| rk[i]).collect();
        let ((sorted, sk), (probe, pk)) = match band.sorted {
            Side::Left => ((l, lk), (r, rk)),
            Side::Right => ((r, rk), (l, lk)),
        };
        let col = |v: &Val, c: usize| {
            v.cols
                .get(c)
                .copied()
                .ok_or_else(|| LowerError::Invalid(format!("a band join reads column {c} of {}", v.arity())))
        };
        let sorted = self.sort_code(sorted, &asc(sk.iter().copied().chain([band.col])))?;
        let mut args = Vec::new();
        for &c in sk.iter().chain([&band.col]) {
            args.push(col(&sorted, c)?);
        }
        for &c in &pk {
            args.push(col(&probe, c)?);
        }
        for b in [band.lower, band.upper].iter().flatten() {
            args.push(col(&probe, b.col)?);
        }
        let bound = |b: &fox_phys::BandBound| RangeBound {
            offset: b.offset,
            open: b.open,
        };
        let kernel = Kernel::BoundRange {
            nkeys: sk.len(),
            lower: band.lower.as_ref().map(bound),
            upper: band.upper.as_ref().map(bound),
        };
        let range = self.launch(kernel, args, &[("lo", None), ("hi", None)])?;
        if let Some(inner) = &band.inner {
            let d = col(&sorted, inner.col)?;
            let tree = self.launch1(Kernel::IneqTree, vec![d], "tree", None)?;
            let mut bounds = Vec::new();
            for b in [inner.lower, inner.upper].iter().flatten() {
                bounds.push(col(&probe, b.col)?);
            }
            let kernel = Kernel::IneqRanges {
                lower: inner.lower.as_ref().map(bound),
                upper: inner.upper.as_ref().map(bound),
            };
            let gather = Kernel::Gather { shift: 0 };
            // Probed in rounds of probing rows: one per probing row (`JoinCount` without
            // keys against the one row of `RootRange`), a window of them per round, whose
            // rows (`parent`) select the round's ranges and bounds.
            let root = self.launch(Kernel::RootRange, vec![d], &[("root.lo", None), ("root.hi", None)])?;
            let ones = self.launch1(Kernel::JoinCount { nkeys: 0 }, vec![range[0], root[0]], "ones", None)?;
            let scan = self.launch(
                Kernel::ExclusiveScan,
                vec![ones],
                &[("rows.offsets", None), ("rows.total", None)],
            )?;
            // Written in rounds of its pairs up to the aggregation that reads it: the
            // aggregation's running result, made before the rounds of probing rows.
            let result = self.join_result()?;
            // Kept: the pairs of the rounds so far.
            let acc = match &result {
                Some(_) => Vec::new(),
                None => self.launch(
                    Kernel::Const {
                        types: phys_types(&columns),
                        rows: Vec::new(),
                    },
                    Vec::new(),
                    &Self::col_names(&columns)
                        .iter()
                        .map(|(n, t)| (format!("{n}.acc"), *t))
                        .collect::<Vec<_>>()
                        .iter()
                        .map(|(n, t)| (n.as_str(), *t))
                        .collect::<Vec<_>>(),
                )?,
            };
            let row_bytes = probe_row_bytes(bounds.len());
            let max_rows = Some(self.probe_rows);
            let w = self.launch1(Kernel::Window { row_bytes, max_rows }, vec![scan[1]], "probes", None)?;
            let n = self.blocks.len();
            let body = self.new_block(format!("{}.probe{n}", self.prefix));
            let exit = self.new_block(format!("{}.probed{n}", self.prefix));
            self.end_block(Terminator::LoopIf {
                nonempty: vec![w],
                body,
                exit,
            });
            self.start_block(body);
            let round = OpenRound {
                body,
                exit,
                total: scan[1],
                window: w,
                row_bytes,
                max_rows,
                claim: None,
            };
            let rows = self.launch(
                Kernel::Expand,
                vec![range[0], scan[0], scan[1], w],
                &[("rows", None), ("rows.pos", None)],
            )?;
            let mut part = vec![rows[0], range[0], range[1]];
            part.extend(&bounds);
            let mut names = vec![("lo.part".to_string(), None), ("hi.part".to_string(), None)];
            names.extend((0..bounds.len()).map(|i| (format!("bound{i}.part"), None)));
            let refs: Vec<(&str, Option<Type>)> = names.iter().map(|(n, t)| (n.as_str(), *t)).collect();
            let part = self.launch(gather.clone(), part, &refs)?;
            let mut args = vec![d, tree];
            args.extend(part);
            let ranges = self.launch(kernel, args, &[("lo", None), ("hi", None), ("row", None)])?;
            // The aggregation's rounds of the pairs run within this round and end it.
            let (outer, round) = match result {
                Some(r) => (Some((round, r)), None),
                None => (None, Some(round)),
            };
            let idx = self.expand_pairs_within(ranges[0], ranges[1], ["range", "entry"], outer)?;
            let local = self.launch1(gather.clone(), vec![idx[0], ranges[2]], "probe.part", None)?;
            let p = self.launch1(gather.clone(), vec![local, rows[0]], "probe", None)?;
            let m = self.launch1(gather, vec![idx[1], tree], "match", None)?;
            let v = match band.sorted {
                Side::Left => self.join_rows(&sorted, m, &probe, p, output, columns.clone())?,
                Side::Right => self.join_rows(&probe, p, &sorted, m, output, columns.clone())?,
            };
            let Some(round) = round else {
                return Ok(v);
            };
            let width = acc.len();
            if v.cols.len() != width {
                return Err(LowerError::Invalid("an inequality join's rounds lost a column".into()));
            }
            let mut args = acc.clone();
            args.extend(v.cols);
            let grown = self.launch_cols(Kernel::Concat { parts: 2, width }, args, &columns)?;
            for (&a, g) in acc.iter().zip(grown) {
                self.instrs.push(Instr::Move { dst: a, src: g });
            }
            self.end_round(&round)?;
            return Ok(Val::unordered(acc, columns));
        }
        self.expand_ranges_join(&range, &sorted, &probe, band.sorted, output, columns)
    }
}
