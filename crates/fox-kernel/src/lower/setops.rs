//! Set operations: a bag union concatenates its inputs; a fixpoint's merge of new rows
//! into a relation (both sets sorted on all columns) is one merge-union kernel.

use super::*;

impl Lower<'_> {
    /// `into ∪= from` between relation variables (an untiered `into`); `disjoint`:
    /// `from` holds none of `into`'s rows ([`super::tiered::fresh_rows`]).
    pub(super) fn merge(&mut self, into: RelId, from: RelId, disjoint: bool) -> R<()> {
        let r = &self.ra.relations[into.0 as usize];
        self.prefix = r.name.clone();
        let set = Props::set(r.columns.len());
        let a = self.rel_val(into);
        let a = self.ensure(a, &set)?;
        let b = self.rel_val(from);
        let b = self.ensure(b, &set)?;
        let merged = self.union_sets(&a, &b, disjoint)?;
        self.move_into(into, &merged);
        Ok(())
    }

    /// The bag union of `inputs` (the input itself when there is one).
    pub(super) fn union(&mut self, inputs: &[fox_ra::TempId], columns: Vec<Column>) -> R<Val> {
        let vals: Vec<Val> = inputs.iter().map(|&t| self.temp(t)).collect::<R<_>>()?;
        if vals.len() == 1 {
            return Ok(Val {
                columns,
                ..vals[0].clone()
            });
        }
        let width = vals[0].cols.len();
        let args: Vec<BufId> = vals.iter().flat_map(|v| v.cols.clone()).collect();
        let cols = self.launch_cols(
            Kernel::Concat {
                parts: vals.len(),
                width,
            },
            args,
            &columns,
        )?;
        Ok(Val::unordered(cols, columns))
    }
}
