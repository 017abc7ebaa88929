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

use super::*;
use fox_phys::Band;

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
            let mut args = vec![d, tree, range[0], range[1]];
            for b in [inner.lower, inner.upper].iter().flatten() {
                args.push(col(&probe, b.col)?);
            }
            let kernel = Kernel::IneqRanges {
                lower: inner.lower.as_ref().map(bound),
                upper: inner.upper.as_ref().map(bound),
            };
            let ranges = self.launch(kernel, args, &[("lo", None), ("hi", None), ("row", None)])?;
            let idx = self.expand_pairs(ranges[0], ranges[1], ["range", "entry"])?;
            let gather = Kernel::Gather { shift: 0 };
            let p = self.launch1(gather.clone(), vec![idx[0], ranges[2]], "probe", None)?;
            let m = self.launch1(gather, vec![idx[1], tree], "match", None)?;
            return match band.sorted {
                Side::Left => self.join_rows(&sorted, m, &probe, p, output, columns),
                Side::Right => self.join_rows(&probe, p, &sorted, m, output, columns),
            };
        }
        self.expand_ranges_join(&range, &sorted, &probe, band.sorted, output, columns)
    }
}
