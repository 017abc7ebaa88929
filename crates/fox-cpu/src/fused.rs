//! `FusedReduce`: a filter and an aggregation as one kernel, defined as the composition
//! `fox_kernel::expand` gives: `Eval` of the filter, `Compact`, `Eval` of each value,
//! `SortPerm` and `Gather` by the keys, `ReduceByKey`. When every aggregate is exact
//! (counts, and sums, averages, minima and maxima of integers, decimals and dates), the
//! keys are at most four integer columns and the groups are few, the rows are read once:
//! each range of rows evaluates the filter and the values and adds them to per-group
//! accumulators (128-bit sums), the partial groups of all cores are merged, and the
//! groups are put in key order. Sums of exact values do not depend on the order of the
//! additions, so the result is the composition's. Otherwise, and whenever a row fails or
//! a result does not fit (so that the error is the one the composition names), the
//! backend declines the launch and the runtime runs the composition.

use crate::expr::Compiled;
use crate::util::chunks;
use crate::{reduce, sort};
use fox_kernel::{AggSpec, Elem, KExpr};
use fox_runtime::load::FxHashMap;
use fox_runtime::{HostCol, LaunchCtx};
use fox_sema::core::{AggFunc, Type};
use rayon::prelude::*;

/// `FusedReduce { filter, nkeys, aggs, exprs, n_cols }` on `args` (`n_cols` columns, the
/// first `nkeys` the keys, then dictionary tables) in one pass, or `None` when one pass
/// cannot settle it (the composition must run).
pub(crate) fn fused_reduce(
    args: &[&HostCol],
    filter: Option<&KExpr>,
    nkeys: usize,
    aggs: &[AggSpec],
    exprs: &[Option<KExpr>],
    n_cols: usize,
    ctx: &dyn LaunchCtx,
) -> Option<Vec<HostCol>> {
    one_pass(&Fused {
        args,
        filter,
        nkeys,
        aggs,
        exprs,
        n_cols,
        ctx,
    })
}

/// The operands of a `FusedReduce`.
#[derive(Clone, Copy)]
struct Fused<'a> {
    args: &'a [&'a HostCol],
    filter: Option<&'a KExpr>,
    nkeys: usize,
    aggs: &'a [AggSpec],
    exprs: &'a [Option<KExpr>],
    n_cols: usize,
    ctx: &'a dyn LaunchCtx,
}

/// The most key columns of a one-pass reduction.
const MAX_KEYS: usize = 4;
/// The most groups one core's partial result may hold before the composition is used.
const MAX_GROUPS: usize = 1 << 16;

type Key = [i64; MAX_KEYS];

#[derive(Clone, Copy, PartialEq)]
enum Acc {
    Sum,
    Min,
    Max,
}

/// Groups of a range of rows: their keys in first-seen order, row counts, and `accs`
/// accumulators per group.
struct Partial {
    ids: FxHashMap<Key, u32>,
    keys: Vec<Key>,
    counts: Vec<i64>,
    vals: Vec<i128>,
}

impl Partial {
    fn new() -> Partial {
        Partial {
            ids: FxHashMap::default(),
            keys: Vec::new(),
            counts: Vec::new(),
            vals: Vec::new(),
        }
    }

    /// The group of `key`, added (with identity accumulators) when new; `None` past
    /// [`MAX_GROUPS`].
    fn group(&mut self, key: &Key, accs: &[(Acc, usize)]) -> Option<usize> {
        if let Some(&g) = self.ids.get(key) {
            return Some(g as usize);
        }
        let g = self.keys.len();
        if g >= MAX_GROUPS {
            return None;
        }
        self.ids.insert(*key, g as u32);
        self.keys.push(*key);
        self.counts.push(0);
        self.vals.extend(accs.iter().map(|(a, _)| match a {
            Acc::Sum => 0,
            Acc::Min => i128::MAX,
            Acc::Max => i128::MIN,
        }));
        Some(g)
    }

    fn add(&mut self, g: usize, accs: &[(Acc, usize)], v: impl Fn(usize) -> i128) {
        self.counts[g] += 1;
        let at = g * accs.len();
        for (k, (a, e)) in accs.iter().enumerate() {
            let x = v(*e);
            let slot = &mut self.vals[at + k];
            match a {
                Acc::Sum => *slot += x,
                Acc::Min => *slot = (*slot).min(x),
                Acc::Max => *slot = (*slot).max(x),
            }
        }
    }

    fn merge(mut self, other: Partial, accs: &[(Acc, usize)]) -> Option<Partial> {
        for (h, key) in other.keys.iter().enumerate() {
            let g = self.group(key, accs)?;
            self.counts[g] += other.counts[h];
            for (k, (a, _)) in accs.iter().enumerate() {
                let x = other.vals[h * accs.len() + k];
                let slot = &mut self.vals[g * accs.len() + k];
                match a {
                    Acc::Sum => *slot += x,
                    Acc::Min => *slot = (*slot).min(x),
                    Acc::Max => *slot = (*slot).max(x),
                }
            }
        }
        Some(self)
    }
}

/// The one-pass reduction described in the module documentation, or `None` when it does
/// not apply or cannot settle the result.
fn one_pass(f: &Fused) -> Option<Vec<HostCol>> {
    let Fused {
        args,
        filter,
        nkeys,
        aggs,
        exprs,
        n_cols,
        ctx,
    } = *f;
    if nkeys > MAX_KEYS {
        return None;
    }
    let n = args[0].len();
    let keys = &args[..nkeys];
    if keys.iter().any(|k| matches!(k.elem(), Elem::F64 | Elem::I128)) {
        return None;
    }
    // One accumulator per aggregate but `count`, over the distinct value expressions.
    let mut values: Vec<&KExpr> = Vec::new();
    let mut accs: Vec<(Acc, usize)> = Vec::new();
    let mut of_agg: Vec<Option<usize>> = Vec::with_capacity(aggs.len());
    for (a, e) in aggs.iter().zip(exprs) {
        let exact = |t: Type| matches!(t, Type::Int32 | Type::Int64 | Type::Decimal(_));
        let acc = match (a.func, a.input) {
            (AggFunc::Count, _) => {
                of_agg.push(None);
                continue;
            }
            (AggFunc::Sum | AggFunc::Avg, Some(t)) if exact(t) => Acc::Sum,
            (AggFunc::Min, Some(t)) if exact(t) || t == Type::Date => Acc::Min,
            (AggFunc::Max, Some(t)) if exact(t) || t == Type::Date => Acc::Max,
            _ => return None,
        };
        let e = e.as_ref()?;
        if Some(e.ty) != a.input {
            return None;
        }
        let v = match values.iter().position(|x| *x == e) {
            Some(v) => v,
            None => {
                values.push(e);
                values.len() - 1
            }
        };
        of_agg.push(Some(accs.len()));
        accs.push((acc, v));
    }
    let filter = match filter {
        Some(f) => Some(Compiled::new(f, n_cols, args, ctx).ok()?),
        None => None,
    };
    let values: Vec<Compiled> = values
        .iter()
        .map(|e| Compiled::new(e, n_cols, args, ctx).ok())
        .collect::<Option<_>>()?;
    let range = |mut p: Partial, &(a, b): &(usize, usize)| -> Option<Partial> {
        let flags = match &filter {
            Some(f) => Some(f.ints(args, a, b, |_| true)?),
            None => None,
        };
        let kept = |i: usize| flags.as_ref().is_none_or(|f| f[i] != 0);
        let vals: Vec<Vec<i64>> = values.iter().map(|v| v.ints(args, a, b, kept)).collect::<Option<_>>()?;
        let mut key: Key = [0; MAX_KEYS];
        for i in (0..b - a).filter(|&i| kept(i)) {
            for (j, k) in keys.iter().enumerate() {
                // Keys are integers of at most 64 bits: u64 keys keep their bits.
                key[j] = reduce::int_at(k, a + i) as i64;
            }
            let g = p.group(&key, &accs)?;
            p.add(g, &accs, |e| i128::from(vals[e][i]));
        }
        Some(p)
    };
    let ranges = chunks(n);
    let total = if ranges.len() <= 1 {
        ranges.iter().try_fold(Partial::new(), range)?
    } else {
        ranges
            .par_iter()
            .try_fold(Partial::new, range)
            .try_reduce(Partial::new, |a, b| a.merge(b, &accs))?
    };
    // The groups in key order.
    let ng = total.keys.len();
    let key_cols: Vec<HostCol> = keys
        .iter()
        .enumerate()
        .map(|(j, k)| {
            let wide = |x: i64| match k.elem() {
                Elem::U64 => i128::from(x as u64),
                _ => i128::from(x),
            };
            let v: Vec<i128> = total.keys.iter().map(|key| wide(key[j])).collect();
            reduce::int_column(&v, k.elem()).ok()
        })
        .collect::<Option<_>>()?;
    let order: Vec<usize> = if nkeys > 0 {
        let refs: Vec<&HostCol> = key_cols.iter().collect();
        match sort::sort_perm(&refs, &vec![false; nkeys], &vec![false; nkeys]).ok()? {
            HostCol::U32(p) => p.into_iter().map(|i| i as usize).collect(),
            _ => return None,
        }
    } else {
        (0..ng).collect()
    };
    let mut out: Vec<HostCol> = key_cols
        .iter()
        .map(|c| crate::util::gather_col(c, &order, "the group keys").ok())
        .collect::<Option<_>>()?;
    let acc_at = |g: usize, k: usize| total.vals[g * accs.len() + k];
    for (a, acc) in aggs.iter().zip(&of_agg) {
        let elem = Elem::of(a.output);
        let col = match (a.func, acc) {
            (AggFunc::Count, _) => {
                let v: Vec<i128> = order.iter().map(|&g| i128::from(total.counts[g])).collect();
                reduce::int_column(&v, elem).ok()?
            }
            (AggFunc::Sum | AggFunc::Avg, Some(k)) => {
                let (si, so) = (fox_kernel::scale_of(a.input?)?, fox_kernel::scale_of(a.output)?);
                let avg = a.func == AggFunc::Avg;
                let v: Vec<i128> = order
                    .iter()
                    .map(|&g| fox_kernel::finish_int_sum(avg, si, so, acc_at(g, *k), i128::from(total.counts[g])))
                    .collect::<Option<_>>()?;
                reduce::typed_column(&v, a.output).ok()?
            }
            (AggFunc::Min | AggFunc::Max, Some(k)) => {
                if elem != Elem::of(a.input?) {
                    return None;
                }
                let v: Vec<i128> = order.iter().map(|&g| acc_at(g, *k)).collect();
                reduce::int_column(&v, elem).ok()?
            }
            _ => return None,
        };
        out.push(col);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::test_rng;
    use crate::CpuBackend;
    use fox_kernel::{KExprKind, Kernel};
    use fox_runtime::{launch_kernel, Backend, BackendError, DevBuf, MemStats};
    use fox_sema::core::{ArithOp, CmpOp, Value};

    struct NoStrings;
    impl LaunchCtx for NoStrings {
        fn string_code(&self, _: &str) -> Option<u32> {
            None
        }
    }

    fn col(i: usize, ty: Type) -> KExpr {
        KExpr {
            kind: KExprKind::Col(i),
            ty,
        }
    }

    fn int(v: i64) -> KExpr {
        KExpr {
            kind: KExprKind::Const(Value::Int64(v)),
            ty: Type::Int64,
        }
    }

    fn bin(op: ArithOp, a: KExpr, b: KExpr, ty: Type) -> KExpr {
        KExpr {
            kind: KExprKind::Arith(op, Box::new(a), Box::new(b)),
            ty,
        }
    }

    fn agg(func: AggFunc, e: Option<KExpr>, output: Type) -> (AggSpec, Option<KExpr>) {
        (
            AggSpec {
                func,
                input: e.as_ref().map(|e| e.ty),
                output,
            },
            e,
        )
    }

    fn exact_aggs(v: usize) -> Vec<(AggSpec, Option<KExpr>)> {
        use AggFunc::*;
        let dec = Type::Decimal(2);
        let prod = || bin(ArithOp::Mul, col(v + 1, dec), col(v + 1, dec), Type::Decimal(4));
        vec![
            agg(Count, None, Type::Int64),
            agg(Sum, Some(col(v, Type::Int64)), Type::Int64),
            agg(Sum, Some(col(v + 1, dec)), Type::WideDecimal(2)),
            agg(Avg, Some(col(v + 1, dec)), Type::Decimal(6)),
            agg(Avg, Some(col(v + 2, Type::Int32)), Type::Decimal(6)),
            agg(Min, Some(col(v + 2, Type::Int32)), Type::Int32),
            agg(Max, Some(col(v + 3, Type::Date)), Type::Date),
            agg(Min, Some(col(v + 1, dec)), dec),
            agg(Max, Some(col(v, Type::Int64)), Type::Int64),
            agg(Sum, Some(prod()), Type::WideDecimal(4)),
            agg(Avg, Some(prod()), Type::Decimal(6)),
        ]
    }

    fn filter(v: usize, at_least: i64) -> KExpr {
        KExpr {
            kind: KExprKind::Cmp(CmpOp::Ge, Box::new(col(v + 5, Type::Int64)), Box::new(int(at_least))),
            ty: Type::Bool,
        }
    }

    /// Keys of the given element types with `distinct` values each, then the values:
    /// int64 (wide: any), decimal(2), int32, date, float64, and the int64 (0..16) the
    /// filter reads.
    fn columns(r: &mut impl FnMut() -> u64, keys: &[(Elem, u64)], n: usize, wide: bool) -> Vec<HostCol> {
        let mut cols: Vec<HostCol> = keys
            .iter()
            .map(|&(e, d)| {
                let mut v = || r() % d;
                match e {
                    Elem::U8 => HostCol::U8((0..n).map(|_| v() as u8).collect()),
                    Elem::I32 => HostCol::I32((0..n).map(|_| v() as i32 - (d / 2) as i32).collect()),
                    Elem::U32 => HostCol::U32((0..n).map(|_| v() as u32).collect()),
                    Elem::I64 => HostCol::I64((0..n).map(|_| v() as i64 - (d / 2) as i64).collect()),
                    Elem::U64 => HostCol::U64((0..n).map(|_| v() | (1 << 63)).collect()),
                    Elem::F64 => HostCol::F64((0..n).map(|_| v() as f64 - 1.5).collect()),
                    Elem::I128 => HostCol::I128((0..n).map(|_| (v() as i128 - (d / 2) as i128) << 70).collect()),
                }
            })
            .collect();
        let span = |r: &mut dyn FnMut() -> u64, m: u64| (r() % (2 * m + 1)) as i64 - m as i64;
        cols.push(HostCol::I64(
            (0..n)
                .map(|_| if wide { r() as i64 } else { span(r, 1_000_000_000) })
                .collect(),
        ));
        cols.push(HostCol::I64((0..n).map(|_| span(r, 1_000_000)).collect()));
        cols.push(HostCol::I32((0..n).map(|_| span(r, 1_000_000) as i32).collect()));
        cols.push(HostCol::I32((0..n).map(|_| span(r, 20_000) as i32).collect()));
        cols.push(HostCol::F64((0..n).map(|_| (r() % 1000) as f64 / 8.0).collect()));
        cols.push(HostCol::I64((0..n).map(|_| (r() % 16) as i64).collect()));
        cols
    }

    type Case<'a> = (&'a [HostCol], Option<KExpr>, usize, Vec<(AggSpec, Option<KExpr>)>);

    /// The CPU backend, declining every composite kernel: the runtime runs its expansion.
    struct Expanded(CpuBackend);

    impl Backend for Expanded {
        fn name(&self) -> String {
            self.0.name()
        }
        fn upload(&mut self, col: HostCol) -> Result<DevBuf, BackendError> {
            self.0.upload(col)
        }
        fn download(&mut self, buf: &DevBuf) -> Result<HostCol, BackendError> {
            self.0.download(buf)
        }
        fn launch(&mut self, k: &Kernel, args: &[&DevBuf], ctx: &dyn LaunchCtx) -> Result<Vec<DevBuf>, BackendError> {
            if fox_kernel::expand(k, args.len()).is_some() {
                return launch_kernel(self, k, args, ctx);
            }
            self.0.launch(k, args, ctx)
        }
        fn free(&mut self, buf: DevBuf) {
            self.0.free(buf)
        }
        fn sync(&mut self) -> Result<(), BackendError> {
            self.0.sync()
        }
        fn mem(&self) -> MemStats {
            self.0.mem()
        }
        fn reset_peak(&mut self) {
            self.0.reset_peak()
        }
    }

    /// `k` on `args` on `backend`, the outputs downloaded.
    fn launch_on(backend: &mut dyn Backend, k: &Kernel, args: &[HostCol]) -> Result<Vec<HostCol>, BackendError> {
        let bufs: Vec<DevBuf> = args
            .iter()
            .map(|a| backend.upload(a.clone()))
            .collect::<Result<_, _>>()?;
        let refs: Vec<&DevBuf> = bufs.iter().collect();
        let res = launch_kernel(backend, k, &refs, &NoStrings).and_then(|outs| {
            let host = outs.iter().map(|o| backend.download(o)).collect();
            outs.into_iter().for_each(|o| backend.free(o));
            host
        });
        bufs.into_iter().for_each(|b| backend.free(b));
        assert_eq!(backend.mem().in_use, 0, "{}: buffers left", k.name());
        res
    }

    /// Runs the kernel and the composition; they give the same columns or the same error.
    /// Returns whether the one-pass reduction settled the result.
    fn check((cols, filter, nkeys, aggs): Case, what: &str) -> bool {
        let (aggs, exprs): (Vec<AggSpec>, Vec<Option<KExpr>>) = aggs.into_iter().unzip();
        let args: Vec<&HostCol> = cols.iter().collect();
        let f = Fused {
            args: &args,
            filter: filter.as_ref(),
            nkeys,
            aggs: &aggs,
            exprs: &exprs,
            n_cols: cols.len(),
            ctx: &NoStrings,
        };
        let k = Kernel::FusedReduce {
            filter: filter.clone(),
            nkeys,
            aggs: aggs.clone(),
            exprs: exprs.clone(),
            n_cols: cols.len(),
        };
        let fused = launch_on(&mut CpuBackend::new(), &k, cols);
        let composed = launch_on(&mut Expanded(CpuBackend::new()), &k, cols);
        assert_eq!(fused, composed, "{what}");
        one_pass(&f).is_some()
    }

    const KEY_SETS: [&[(Elem, u64)]; 7] = [
        &[],
        &[(Elem::U32, 16)],
        &[(Elem::I32, 16)],
        &[(Elem::U32, 16), (Elem::U8, 4)],
        &[(Elem::I64, 40), (Elem::I32, 3), (Elem::U8, 2), (Elem::U32, 5)],
        &[(Elem::U64, 7)],
        &[(Elem::U8, 1)],
    ];

    #[test]
    fn one_pass_matches_the_composition() {
        let mut r = test_rng(5);
        for keys in KEY_SETS {
            for n in [0usize, 1, 2, 100, 8191, 8192, 8193, 100_003] {
                for at_least in [None, Some(0), Some(9), Some(16)] {
                    let cols = columns(&mut r, keys, n, false);
                    let case = (
                        &cols[..],
                        at_least.map(|m| filter(keys.len(), m)),
                        keys.len(),
                        exact_aggs(keys.len()),
                    );
                    let what = format!("keys {keys:?}, n {n}, filter {at_least:?}");
                    assert!(check(case, &what), "{what}: not settled in one pass");
                }
            }
        }
    }

    #[test]
    fn the_composition_settles_what_one_pass_cannot() {
        let mut r = test_rng(9);
        let n = 20_000;
        // Float keys and float sums.
        let cols = columns(&mut r, &[(Elem::F64, 5)], n, false);
        assert!(!check((&cols, None, 1, exact_aggs(1)), "float keys"));
        let cols = columns(&mut r, &[(Elem::U32, 5)], n, false);
        let fsum = vec![agg(AggFunc::Sum, Some(col(5, Type::Float64)), Type::Float64)];
        assert!(!check((&cols, None, 1, fsum), "a float sum"));
        // More groups than one core's partial may hold.
        let cols = columns(&mut r, &[(Elem::U32, 1 << 30)], 200_000, false);
        assert!(!check((&cols, Some(filter(1, 0)), 1, exact_aggs(1)), "many groups"));
        // 128-bit keys.
        let cols = columns(&mut r, &[(Elem::I128, 5)], n, false);
        assert!(!check((&cols, None, 1, exact_aggs(1)), "128-bit keys"));
        // Five keys.
        let five = [(Elem::U8, 2); 5];
        let cols = columns(&mut r, &five, n, false);
        assert!(!check((&cols, None, 5, exact_aggs(5)), "five keys"));
        // Sums that overflow their type: the composition names the group.
        let cols = columns(&mut r, &[(Elem::U32, 3)], n, true);
        let sum = vec![agg(AggFunc::Sum, Some(col(1, Type::Int64)), Type::Int64)];
        assert!(!check((&cols, None, 1, sum), "an overflowing sum"));
        // Division by zero: in rows the filter drops it is no error; in a kept row the
        // composition reports it.
        let cols = columns(&mut r, &[(Elem::U32, 3)], n, false);
        let quotient = |_: ()| {
            vec![agg(
                AggFunc::Sum,
                Some(bin(
                    ArithOp::Div,
                    int(100),
                    bin(ArithOp::Sub, col(6, Type::Int64), int(3), Type::Int64),
                    Type::Int64,
                )),
                Type::Int64,
            )]
        };
        assert!(check(
            (&cols, Some(filter(1, 4)), 1, quotient(())),
            "a division by zero filtered out"
        ));
        assert!(!check(
            (&cols, Some(filter(1, 0)), 1, quotient(())),
            "a division by zero kept"
        ));
    }
}
