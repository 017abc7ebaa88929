//! `ReduceByKey`: sum, count, min, max, avg per run of equal keys.

use crate::movement::selected;
use crate::util::{as_u32, cmp_at, gather_col, par_map, with_capacity, KResult};
use fox_kernel::{finish_int_sum, scale_of, AggSpec, Elem};
use fox_runtime::HostCol;
use fox_sema::core::{AggFunc, Type, MAX_DECIMAL, MAX_WIDE_DECIMAL};
use std::cmp::Ordering;

/// Why integers do not make a column of an element type.
pub(crate) enum IntColumnError {
    /// Value `i` does not fit.
    Overflow(usize),
    /// The element type is a float.
    Float,
    /// Memory ran out (the message).
    Memory(String),
}

/// Integers as a column of element type `elem`, range-checked.
pub(crate) fn int_column(vals: &[i128], elem: Elem) -> Result<HostCol, IntColumnError> {
    fn conv<T>(vals: &[i128], fits: impl Fn(i128) -> Option<T>) -> Result<Vec<T>, IntColumnError> {
        let mut out = with_capacity(vals.len(), "the aggregated column").map_err(IntColumnError::Memory)?;
        for (i, &x) in vals.iter().enumerate() {
            out.push(fits(x).ok_or(IntColumnError::Overflow(i))?);
        }
        Ok(out)
    }
    Ok(match elem {
        Elem::U8 => HostCol::U8(conv(vals, |x| u8::try_from(x).ok())?),
        Elem::I32 => HostCol::I32(conv(vals, |x| i32::try_from(x).ok())?),
        Elem::U32 => HostCol::U32(conv(vals, |x| u32::try_from(x).ok())?),
        Elem::I64 => HostCol::I64(conv(vals, |x| i64::try_from(x).ok())?),
        Elem::U64 => HostCol::U64(conv(vals, |x| u64::try_from(x).ok())?),
        Elem::I128 => HostCol::I128(conv(vals, |x| {
            (x.unsigned_abs() <= MAX_WIDE_DECIMAL.unsigned_abs()).then_some(x)
        })?),
        Elem::F64 => return Err(IntColumnError::Float),
    })
}

/// Integer-stored values of type `ty` as a column: `Overflow(i)` when value `i` is out
/// of the type's range (its element type's; 18 digits for a decimal, 38 for a wide one).
pub(crate) fn typed_column(vals: &[i128], ty: Type) -> Result<HostCol, IntColumnError> {
    if let Type::Decimal(_) = ty {
        if let Some(i) = vals.iter().position(|x| x.unsigned_abs() > MAX_DECIMAL.unsigned_abs()) {
            return Err(IntColumnError::Overflow(i));
        }
    }
    int_column(vals, Elem::of(ty))
}

/// Integer-stored results in the output's element type, range-checked.
fn store_ints(vals: Vec<i128>, ty: Type, bounds: &[(usize, usize)], what: &str) -> KResult<HostCol> {
    typed_column(&vals, ty).map_err(|e| match e {
        IntColumnError::Overflow(g) => format!("the {what} of the group at row {} does not fit {ty}", bounds[g].0),
        IntColumnError::Float => format!("the {what} cannot be stored as {ty}"),
        IntColumnError::Memory(msg) => msg,
    })
}

/// Value `i` of an integer-stored column, widened.
pub(crate) fn int_at(col: &HostCol, i: usize) -> i128 {
    match col {
        HostCol::U8(v) => i128::from(v[i]),
        HostCol::I32(v) => i128::from(v[i]),
        HostCol::U32(v) => i128::from(v[i]),
        HostCol::I64(v) => i128::from(v[i]),
        HostCol::U64(v) => i128::from(v[i]),
        HostCol::F64(v) => v[i] as i128,
        HostCol::I128(v) => v[i],
    }
}

fn float_sum(v: &[f64], a: usize, b: usize) -> f64 {
    v[a..b].iter().sum()
}

/// `ReduceByKey { nkeys, aggs }`: args `nkeys` sorted key columns, one value column per
/// aggregate other than `count` (with no keys and only counts, one column giving the row
/// count), then the `Rank` table if a `min`/`max` is over strings.
pub(crate) fn reduce_by_key(args: &[&HostCol], nkeys: usize, aggs: &[AggSpec]) -> KResult<Vec<HostCol>> {
    let nvals = aggs.iter().filter(|a| a.func != AggFunc::Count).count();
    let len_col = usize::from(nkeys == 0 && nvals == 0);
    let need_rank = aggs
        .iter()
        .any(|a| matches!(a.func, AggFunc::Min | AggFunc::Max) && a.input == Some(Type::String));
    let ncols = nkeys + nvals + len_col;
    let n = args[0].len();
    let rank = if need_rank {
        Some(as_u32(args[ncols], "the rank table")?)
    } else {
        None
    };
    let keys = &args[..nkeys];
    let starts: Vec<usize> = if n == 0 {
        Vec::new()
    } else if nkeys == 0 {
        vec![0]
    } else {
        let flags = par_map(n, "the group starts", |i| {
            u8::from(i == 0 || keys.iter().any(|c| cmp_at(c, i, c, i - 1) != Ordering::Equal))
        })?;
        selected(&flags, "the group starts")?
    };
    let bounds: Vec<(usize, usize)> = par_map(starts.len(), "the group bounds", |g| {
        (starts[g], starts.get(g + 1).copied().unwrap_or(n))
    })?;
    let mut out: Vec<HostCol> = keys
        .iter()
        .map(|k| gather_col(k, &starts, "the group keys"))
        .collect::<KResult<_>>()?;
    let mut next_val = nkeys;
    for (a, spec) in aggs.iter().enumerate() {
        let val = match (spec.func, spec.input) {
            (AggFunc::Count, _) | (_, None) => None,
            (_, Some(ty)) => {
                let col = args[next_val];
                next_val += 1;
                Some((col, ty))
            }
        };
        out.push(aggregate(a, spec, val, rank, &bounds)?);
    }
    Ok(out)
}

fn aggregate(
    a: usize,
    spec: &AggSpec,
    val: Option<(&HostCol, Type)>,
    rank: Option<&[u32]>,
    bounds: &[(usize, usize)],
) -> KResult<HostCol> {
    let out_ty = spec.output;
    let ng = bounds.len();
    let needs_input = || format!("aggregate {a} ({:?}) needs an input type and value column", spec.func);
    match spec.func {
        AggFunc::Count => store_ints(
            par_map(ng, "the counts", |g| (bounds[g].1 - bounds[g].0) as i128)?,
            out_ty,
            bounds,
            "count",
        ),
        AggFunc::Sum | AggFunc::Avg => {
            let (col, in_ty) = val.ok_or_else(needs_input)?;
            if let HostCol::F64(v) = col {
                if out_ty != Type::Float64 {
                    return Err(format!(
                        "aggregate {a}: a float {:?} must give float64, not {out_ty}",
                        spec.func
                    ));
                }
                let avg = spec.func == AggFunc::Avg;
                return Ok(HostCol::F64(par_map(ng, "the sums", |g| {
                    let (s, e) = bounds[g];
                    let sum = float_sum(v, s, e);
                    if avg {
                        sum / (e - s) as f64
                    } else {
                        sum
                    }
                })?));
            }
            let (Some(si), Some(so)) = (scale_of(in_ty), scale_of(out_ty)) else {
                return Err(format!("aggregate {a}: cannot {:?} {in_ty} into {out_ty}", spec.func));
            };
            let what = if spec.func == AggFunc::Sum { "sum" } else { "average" };
            let overflow = |g: usize| format!("the {what} of the group at row {} does not fit {out_ty}", bounds[g].0);
            let avg = spec.func == AggFunc::Avg;
            let wide = col.elem() == Elem::I128;
            let vals = par_map(ng, "the sums", |g| {
                let (s, e) = bounds[g];
                // At most 2^32 values of at most 2^63 each: the sum fits 96 bits; sums of
                // 38-digit values are checked.
                let sum: i128 = if wide {
                    (s..e)
                        .try_fold(0i128, |acc, i| acc.checked_add(int_at(col, i)))
                        .ok_or(g)?
                } else {
                    (s..e).map(|i| int_at(col, i)).sum()
                };
                finish_int_sum(avg, si, so, sum, (e - s) as i128).ok_or(g)
            })?;
            if let Some(g) = vals.iter().find_map(|v| v.err()) {
                return Err(overflow(g));
            }
            let vals = par_map(ng, "the sums", |g| vals[g].unwrap_or_default())?;
            store_ints(vals, out_ty, bounds, what)
        }
        AggFunc::Min | AggFunc::Max => {
            let (col, in_ty) = val.ok_or_else(needs_input)?;
            if Elem::of(out_ty) != col.elem() {
                return Err(format!(
                    "aggregate {a}: {:?} of {in_ty} cannot give {out_ty}",
                    spec.func
                ));
            }
            let max = spec.func == AggFunc::Max;
            let better = |o: Ordering| {
                if max {
                    o == Ordering::Greater
                } else {
                    o == Ordering::Less
                }
            };
            let picks: Vec<Result<usize, String>> = if in_ty == Type::String {
                let (HostCol::U32(codes), Some(rank)) = (col, rank) else {
                    return Err(format!(
                        "aggregate {a}: {:?} of strings needs codes and the rank table",
                        spec.func
                    ));
                };
                let rank_of = |i: usize| {
                    rank.get(codes[i] as usize).copied().ok_or_else(|| {
                        format!(
                            "string code {} at row {i} is outside the rank table ({} entries)",
                            codes[i],
                            rank.len()
                        )
                    })
                };
                par_map(ng, "the minima or maxima", |g| {
                    let (s, e) = bounds[g];
                    let mut best = s;
                    let mut best_rank = rank_of(s)?;
                    for i in s + 1..e {
                        let r = rank_of(i)?;
                        if better(r.cmp(&best_rank)) {
                            best = i;
                            best_rank = r;
                        }
                    }
                    Ok(best)
                })?
            } else {
                par_map(ng, "the minima or maxima", |g| {
                    let (s, e) = bounds[g];
                    let mut best = s;
                    for i in s + 1..e {
                        if better(cmp_at(col, i, col, best)) {
                            best = i;
                        }
                    }
                    Ok(best)
                })?
            };
            let picks = picks.into_iter().collect::<KResult<Vec<_>>>()?;
            gather_col(col, &picks, "the minima or maxima")
        }
    }
}
