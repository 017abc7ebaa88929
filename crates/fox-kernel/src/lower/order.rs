//! Order and uniqueness: sorts (by code for merges, by value for `order by`), duplicate
//! removal and projections, applied only where a value is not known to have the order an
//! algorithm needs.

use super::*;

impl Lower<'_> {
    /// Gathers every column of `v` at `idx`, into columns named after `columns`.
    pub(super) fn gather(&mut self, idx: BufId, cols: &[BufId], columns: &[Column], shift: u32) -> R<Vec<BufId>> {
        let mut args = vec![idx];
        args.extend(cols);
        self.launch_cols(Kernel::Gather { shift }, args, columns)
    }

    pub(super) fn permute(&mut self, v: Val, perm: BufId) -> R<Val> {
        let cols = self.gather(perm, &v.cols, &v.columns, 0)?;
        Ok(Val { cols, ..v })
    }

    /// Sorts `v` on `keys` in code order (what the merge-based kernels need).
    pub(super) fn sort_code(&mut self, v: Val, keys: &[SortKey]) -> R<Val> {
        let types = v.types();
        if v.order.code_sorted(&types).starts_with(keys) {
            return Ok(v);
        }
        let args: Vec<BufId> = keys.iter().map(|k| v.cols[k.col]).collect();
        let kernel = Kernel::SortPerm {
            desc: keys.iter().map(|k| k.desc).collect(),
            by_rank: vec![false; keys.len()],
        };
        let perm = self.launch1(kernel, args, "perm", None)?;
        let mut v = self.permute(v, perm)?;
        v.order = v.order.sort_code(keys, &types);
        Ok(v)
    }

    /// Sorts `v` on `keys` in value order (strings by string value), as `order by` means.
    pub(super) fn sort_value(&mut self, v: Val, keys: &[SortKey]) -> R<Val> {
        let types = v.types();
        if v.order.value_sorted(&types).starts_with(keys) {
            return Ok(v);
        }
        let by_rank: Vec<bool> = keys.iter().map(|k| v.ty(k.col) == Type::String).collect();
        let ranked = by_rank.iter().any(|&b| b);
        let mut args: Vec<BufId> = keys.iter().map(|k| v.cols[k.col]).collect();
        if ranked {
            args.push(self.dict_table(DictOp::Rank)?);
        }
        let kernel = Kernel::SortPerm {
            desc: keys.iter().map(|k| k.desc).collect(),
            by_rank,
        };
        let perm = self.launch1(kernel, args, "perm", None)?;
        let mut v = self.permute(v, perm)?;
        v.order = v.order.sort_value(keys, &types);
        Ok(v)
    }

    /// Drops repeated rows of `v`, which is sorted on all columns in code order.
    pub(super) fn distinct(&mut self, v: Val) -> R<Val> {
        let flags = self.launch1(Kernel::AdjacentDistinct, v.cols.clone(), "distinct", None)?;
        let cols = self.compact(flags, &v.cols, &v.columns)?;
        let mut v = Val { cols, ..v };
        v.order.unique = true;
        Ok(v)
    }

    pub(super) fn compact(&mut self, flags: BufId, cols: &[BufId], columns: &[Column]) -> R<Vec<BufId>> {
        let mut args = vec![flags];
        args.extend(cols);
        self.launch_cols(Kernel::Compact, args, columns)
    }

    /// `v` sorted on `keys` and then on the remaining columns, duplicate-free.
    pub(super) fn unique_on(&mut self, v: Val, keys: &[SortKey]) -> R<Val> {
        // Without columns all rows are equal, and are adjacent.
        let v = if v.order.needs_sort_for_unique(keys, &v.types()) {
            let full = Order::unique_keys(keys, v.arity());
            self.sort_code(v, &full)?
        } else {
            v
        };
        if v.order.unique {
            Ok(v)
        } else {
            self.distinct(v)
        }
    }

    /// `v` with the properties `req` promises, sorting and dropping duplicates as needed.
    pub(super) fn ensure(&mut self, v: Val, req: &Props) -> R<Val> {
        let v = if req.unique && !v.order.unique {
            self.unique_on(v, &req.sorted)?
        } else {
            v
        };
        self.sort_code(v, &req.sorted)
    }

    /// The order in which the operator being lowered compares its `n` key pairs (group
    /// columns), as the order pass chose it: a permutation of `0..n`; the listed order
    /// without one.
    pub(super) fn key_perm(&self, n: usize) -> Vec<usize> {
        match self.dst.and_then(|d| self.phys.node(d).order.as_ref()) {
            Some(a) if a.key_order.len() == n => a.key_order.clone(),
            _ => (0..n).collect(),
        }
    }

    /// The columns `cols` of `v` (no kernel unless no column is kept).
    pub(super) fn project(&mut self, v: &Val, cols: &[usize]) -> R<Val> {
        let columns: Vec<Column> = cols.iter().map(|&c| v.columns[c].clone()).collect();
        let bufs = if cols.is_empty() {
            vec![self.ones(v.cols[0])?]
        } else {
            cols.iter().map(|&c| v.cols[c]).collect()
        };
        Ok(Val {
            cols: bufs,
            columns,
            order: v.order.project(cols, v.arity()),
            pending: v.pending.clone(),
        })
    }
}
