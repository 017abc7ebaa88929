//! `FusedReduce`: a filter and an aggregation as one kernel. On the CPU it is exactly the
//! composition its contract names: `Eval` of the filter, `Compact`, `Eval` of each value,
//! `SortPerm` and `Gather` by the keys, `ReduceByKey`; the GPU computes the same result in
//! one pass when it can, and runs this composition otherwise.

use crate::util::KResult;
use crate::{expr, movement, reduce, sort};
use fox_kernel::{AggSpec, KExpr};
use fox_runtime::{HostCol, LaunchCtx};

/// `FusedReduce { filter, nkeys, aggs, exprs, n_cols }` on `args` (`n_cols` columns, the
/// first `nkeys` the keys, then dictionary tables).
pub(crate) fn fused_reduce(
    args: &[&HostCol],
    filter: Option<&KExpr>,
    nkeys: usize,
    aggs: &[AggSpec],
    exprs: &[Option<KExpr>],
    n_cols: usize,
    ctx: &dyn LaunchCtx,
) -> KResult<Vec<HostCol>> {
    if n_cols == 0 || nkeys > n_cols || args.len() < n_cols {
        return Err(format!(
            "expects {n_cols} column(s) ({nkeys} of them keys) and the tables, got {} arguments",
            args.len()
        ));
    }
    if exprs.len() != aggs.len() {
        return Err(format!(
            "has {} aggregates but {} value expressions",
            aggs.len(),
            exprs.len()
        ));
    }
    let (cols, tables) = args.split_at(n_cols);
    // The rows that pass the filter.
    let kept: Option<Vec<HostCol>> = match filter {
        Some(f) => {
            let flags = expr::eval(f, n_cols, args, ctx).map_err(|m| format!("the filter: {m}"))?;
            let mut cargs: Vec<&HostCol> = vec![&flags];
            cargs.extend(cols);
            Some(movement::compact(&cargs)?)
        }
        None => None,
    };
    let mut rows: Vec<&HostCol> = match &kept {
        Some(k) => k.iter().collect(),
        None => cols.to_vec(),
    };
    rows.extend(tables);
    // The value of each aggregate but `count`.
    let mut vals = Vec::new();
    for (j, e) in exprs.iter().enumerate() {
        if let Some(e) = e {
            vals.push(expr::eval(e, n_cols, &rows, ctx).map_err(|m| format!("aggregate {j}: {m}"))?);
        }
    }
    // Keys and values in key order.
    let mut cols_in: Vec<&HostCol> = rows[..nkeys].to_vec();
    cols_in.extend(&vals);
    let sorted: Vec<HostCol>;
    let reduce_args: Vec<&HostCol> = if nkeys > 0 {
        let perm = sort::sort_perm(&rows[..nkeys], &vec![false; nkeys], &vec![false; nkeys])?;
        let mut gargs: Vec<&HostCol> = vec![&perm];
        gargs.extend(&cols_in);
        sorted = movement::gather(&gargs, 0)?;
        sorted.iter().collect()
    } else if vals.is_empty() {
        // Only counts: one column gives the row count.
        vec![rows[0]]
    } else {
        cols_in
    };
    reduce::reduce_by_key(&reduce_args, nkeys, aggs)
}
