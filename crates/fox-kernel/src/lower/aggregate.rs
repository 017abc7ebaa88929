//! Aggregations: sort on the group keys and reduce by key, or one `FusedReduce` over the
//! unsorted rows and the deferred filter, as the fusion and order passes decided.

use super::*;

/// The kernel's description of an aggregate call.
pub(super) fn agg_spec(a: &fox_ra::AggCall) -> AggSpec {
    AggSpec {
        func: a.func,
        input: a.arg.as_ref().map(|e| e.ty),
        output: a.ty,
    }
}

impl Lower<'_> {
    pub(super) fn aggregate(
        &mut self,
        input: fox_ra::TempId,
        group: &[usize],
        aggs: &[fox_ra::AggCall],
        columns: Vec<Column>,
    ) -> R<Val> {
        let v = self.temp_raw(input)?;
        // Group keys in an order the input may already be sorted in (a pending filter
        // keeps the order). `perm[j]` is the position in `group` of the j-th sort key.
        let perm = self.key_perm(group.len());
        let keys: Vec<usize> = perm.iter().map(|&i| group[i]).collect();
        let order = asc(keys.iter().copied());
        let fused = self
            .dst
            .is_some_and(|d| self.phys.node(d).algorithm == Algorithm::Aggregate(AggAlgorithm::Fused));
        if fused {
            return self.fused_aggregate(&v, group, aggs, &columns);
        }
        let v = self.settle(v)?;
        let v = self.sort_code(v, &order)?;
        let mut args: Vec<BufId> = keys.iter().map(|&c| v.cols[c]).collect();
        let mut specs = Vec::with_capacity(aggs.len());
        let mut rank = false;
        let g = group.len();
        for (i, a) in aggs.iter().enumerate() {
            let label = columns.get(g + i).map_or("agg", |c| c.name.as_str()).to_string();
            if let Some(e) = &a.arg {
                args.push(self.expr_col(&v, e, &format!("{label}.arg"))?);
                rank |= e.ty == Type::String && matches!(a.func, AggFunc::Min | AggFunc::Max);
            }
            specs.push(agg_spec(a));
        }
        if g == 0 && specs.iter().all(|s| s.input.is_none()) {
            args.push(v.cols[0]);
        }
        if rank {
            args.push(self.dict_table(DictOp::Rank)?);
        }
        // Outputs: the keys in sort order, then the aggregates.
        let mut out_cols: Vec<Column> = perm.iter().map(|&i| columns[i].clone()).collect();
        out_cols.extend(columns[g..].iter().cloned());
        let outs = self.launch_cols(Kernel::ReduceByKey { nkeys: g, aggs: specs }, args, &out_cols)?;
        // Back to the declared column order: group columns, then aggregates.
        let mut cols = vec![BufId(0); columns.len()];
        for (j, &i) in perm.iter().enumerate() {
            cols[i] = outs[j];
        }
        cols[g..].copy_from_slice(&outs[g..]);
        if cols.is_empty() {
            return Err(LowerError::Invalid("an aggregation without columns".into()));
        }
        Ok(Val::unordered(cols, columns))
    }

    /// An aggregation of `v` (and of its pending filter) as one `FusedReduce`, without
    /// compacting or sorting its input (the fusion pass fuses only aggregations whose
    /// expressions, and deferred filters, the kernel evaluates).
    pub(super) fn fused_aggregate(
        &mut self,
        v: &Val,
        group: &[usize],
        aggs: &[fox_ra::AggCall],
        columns: &[Column],
    ) -> R<Val> {
        // The group keys are the first arguments, even where two are one buffer.
        let keys: Vec<BufId> = group.iter().map(|&c| v.cols[c]).collect();
        let mut cx = ExprCx {
            args: keys,
            tables: Vec::new(),
        };
        let filter = match &v.pending {
            Some(p) => Some(self.kexpr(&p.input, &mut cx, &p.pred)?),
            None => None,
        };
        let mut exprs = Vec::with_capacity(aggs.len());
        for a in aggs {
            exprs.push(match &a.arg {
                Some(e) => Some(self.kexpr(v, &mut cx, e)?),
                None => None,
            });
        }
        if cx.args.is_empty() {
            cx.args.push(v.cols[0]);
        }
        let n_cols = cx.args.len();
        let mut args = cx.args;
        args.extend(cx.tables);
        let kernel = Kernel::FusedReduce {
            filter,
            nkeys: group.len(),
            aggs: aggs.iter().map(agg_spec).collect(),
            exprs,
            n_cols,
        };
        let cols = self.launch_cols(kernel, args, columns)?;
        Ok(Val::unordered(cols, columns.to_vec()))
    }
}
