//! Band joins (`fox_phys::Algorithm::Band`): the sorted side ordered on the bounded
//! column, each probing row's range in it (`BoundRange`), then one output row per row of
//! each range: range counts, scan, load-balanced expansion, gathers.

use super::*;
use fox_phys::Band;

impl Lower<'_> {
    pub(super) fn band_join(
        &mut self,
        left: fox_ra::TempId,
        right: fox_ra::TempId,
        band: &Band,
        output: &[JoinCol],
        columns: Vec<Column>,
    ) -> R<Val> {
        let (l, r) = (self.temp(left)?, self.temp(right)?);
        let (sorted, probe) = match band.sorted {
            Side::Left => (l, r),
            Side::Right => (r, l),
        };
        let col = |v: &Val, c: usize| {
            v.cols
                .get(c)
                .copied()
                .ok_or_else(|| LowerError::Invalid(format!("a band join reads column {c} of {}", v.arity())))
        };
        let sorted = self.sort_code(sorted, &asc([band.col]))?;
        let mut args = vec![col(&sorted, band.col)?];
        for b in [band.lower, band.upper].iter().flatten() {
            args.push(col(&probe, b.col)?);
        }
        let bound = |b: &fox_phys::BandBound| RangeBound {
            offset: b.offset,
            open: b.open,
        };
        let kernel = Kernel::BoundRange {
            lower: band.lower.as_ref().map(bound),
            upper: band.upper.as_ref().map(bound),
        };
        let range = self.launch(kernel, args, &[("lo", None), ("hi", None)])?;
        let counts = self.launch1(Kernel::RangeCount, range.clone(), "counts", None)?;
        let scan = self.launch(
            Kernel::ExclusiveScan,
            vec![counts],
            &[("offsets", None), ("total", None)],
        )?;
        let idx = self.launch(
            Kernel::Expand,
            vec![range[0], scan[0], scan[1]],
            &[("probe", None), ("match", None)],
        )?;
        match band.sorted {
            Side::Left => self.join_rows(&sorted, idx[1], &probe, idx[0], output, columns),
            Side::Right => self.join_rows(&probe, idx[0], &sorted, idx[1], output, columns),
        }
    }
}
