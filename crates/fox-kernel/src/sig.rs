//! The element types each kernel takes and produces: the machine-checkable part of the
//! contracts documented on [`Kernel`]. Lowering uses it to type the buffers it creates and
//! [`crate::validate`] to check plans read from disk.

use fox_sema::core::{AggFunc, Type};

use crate::checked::check_types;
use crate::ir::*;

/// The element types of the outputs of `kernel` applied to arguments of element types
/// `args`, or why the arguments do not fit its contract. `inputs` are the plan's base
/// relations (for `LoadInput`).
pub fn kernel_outputs(kernel: &Kernel, args: &[Elem], inputs: &[InputRel]) -> Result<Vec<Elem>, String> {
    outputs(kernel, args, inputs, true)
}

/// [`kernel_outputs`]; with `types` false, only what the arguments' number and element
/// types must be (the shape a backend reads them by), without the rules on the types of
/// expressions and aggregates.
fn outputs(kernel: &Kernel, args: &[Elem], inputs: &[InputRel], types: bool) -> Result<Vec<Elem>, String> {
    let count = |n: usize| -> Result<(), String> {
        if args.len() == n {
            Ok(())
        } else {
            Err(format!("takes {n} arguments, found {}", args.len()))
        }
    };
    let at_least = |n: usize| -> Result<(), String> {
        if args.len() >= n {
            Ok(())
        } else {
            Err(format!("takes at least {n} arguments, found {}", args.len()))
        }
    };
    let expect = |i: usize, e: Elem, what: &str| -> Result<(), String> {
        match args.get(i) {
            Some(&a) if a == e => Ok(()),
            Some(&a) => Err(format!("argument {i} ({what}) must be {e:?}, found {a:?}")),
            None => Err(format!("argument {i} ({what}) is missing")),
        }
    };
    let same_groups = |groups: usize, width: usize| -> Result<(), String> {
        for g in 1..groups {
            for c in 0..width {
                let (a, b) = (args[c], args[g * width + c]);
                if a != b {
                    return Err(format!(
                        "column {c} of group {g} is {b:?}, but column {c} of group 0 is {a:?}"
                    ));
                }
            }
        }
        Ok(())
    };
    // `groups` groups of `width` arguments: their number, or an error when the plan's
    // counts exceed any argument list (so no product of plan-supplied counts wraps).
    let groups_of = |groups: usize, width: usize| -> Result<usize, String> {
        groups
            .checked_mul(width)
            .ok_or_else(|| format!("{groups} groups of {width} columns are more than any argument list holds"))
    };
    // The key arguments of a join-like kernel: the number of leading args they take.
    let join_keys = |nkeys: usize| -> Result<usize, String> {
        if nkeys == 0 {
            at_least(2)?;
            return Ok(2);
        }
        let n = groups_of(2, nkeys)?;
        at_least(n)?;
        same_groups(2, nkeys)?;
        Ok(n)
    };
    match kernel {
        Kernel::LoadInput { input, whole, hash } => {
            count(0)?;
            let rel = inputs
                .get(*input)
                .ok_or_else(|| format!("loads input {input}, but the plan has {} inputs", inputs.len()))?;
            if rel.columns.is_empty() {
                return Err(format!("input `{}` has no columns", rel.name));
            }
            if *whole && !hash.is_empty() {
                return Err(format!("input `{}` is loaded both whole and hashed", rel.name));
            }
            if let Some(c) = hash.iter().find(|&&c| c >= rel.columns.len()) {
                return Err(format!(
                    "input `{}` is hashed on column {c}, but it has {} columns",
                    rel.name,
                    rel.columns.len()
                ));
            }
            Ok(rel.columns.iter().map(|c| Elem::of(c.ty)).collect())
        }
        Kernel::Const { types, rows } => {
            count(0)?;
            if types.is_empty() {
                return Err("constant rows need at least one column".into());
            }
            for (r, row) in rows.iter().enumerate() {
                if row.len() != types.len() {
                    return Err(format!("row {r} has {} values, expected {}", row.len(), types.len()));
                }
                for (v, &t) in row.iter().zip(types) {
                    if !fox_ra::value_has_type(v, t) {
                        return Err(format!(
                            "row {r} holds a {} in a column of type {t}",
                            fox_ra::value_type(v)
                        ));
                    }
                }
            }
            Ok(types.iter().map(|&t| Elem::of(t)).collect())
        }
        Kernel::DictTable { op } => {
            count(0)?;
            Ok(vec![dict_elem(op)])
        }
        Kernel::Eval { expr, n_cols } => {
            if *n_cols == 0 {
                return Err("an expression kernel needs at least one column argument".into());
            }
            at_least(*n_cols)?;
            if types {
                check_types(expr, *n_cols, args)?;
            }
            Ok(vec![Elem::of(expr.ty)])
        }
        Kernel::StrFn { func } => {
            let params = func.params();
            count(params.len())?;
            for (i, &e) in params.iter().enumerate() {
                expect(i, e, if e == Elem::U32 { "string" } else { "integer" })?;
            }
            Ok(vec![func.output()])
        }
        Kernel::Compact => {
            at_least(2)?;
            expect(0, Elem::U8, "flags")?;
            Ok(args[1..].to_vec())
        }
        Kernel::Gather { .. } => {
            at_least(2)?;
            expect(0, Elem::U32, "index")?;
            Ok(args[1..].to_vec())
        }
        Kernel::Concat { parts, width } => {
            if *parts == 0 || *width == 0 {
                return Err("a concatenation needs at least one part of at least one column".into());
            }
            count(groups_of(*parts, *width)?)?;
            same_groups(*parts, *width)?;
            Ok(args[..*width].to_vec())
        }
        Kernel::Slice { .. } => {
            at_least(1)?;
            Ok(args.to_vec())
        }
        Kernel::SortPerm { desc, by_rank } => {
            let k = desc.len();
            if k == 0 || by_rank.len() != k {
                return Err(format!(
                    "a sort needs at least one key and one `desc` and `by_rank` flag per key ({} and {})",
                    desc.len(),
                    by_rank.len()
                ));
            }
            let ranked = by_rank.iter().any(|&b| b);
            count(k + usize::from(ranked))?;
            for (i, &b) in by_rank.iter().enumerate() {
                if b {
                    expect(i, Elem::U32, "a string key ordered by rank")?;
                }
            }
            if ranked {
                expect(k, Elem::U32, "the rank table")?;
            }
            Ok(vec![Elem::U32])
        }
        Kernel::AdjacentDistinct => {
            at_least(1)?;
            Ok(vec![Elem::U8])
        }
        Kernel::RepeatedKey { nkeys } => {
            count((*nkeys).max(1))?;
            Ok(vec![Elem::U32])
        }
        Kernel::JoinCount { nkeys } => {
            count(join_keys(*nkeys)?)?;
            Ok(vec![Elem::U64])
        }
        Kernel::ExclusiveScan => {
            count(1)?;
            expect(0, Elem::U64, "counts")?;
            Ok(vec![Elem::U64, Elem::U64])
        }
        Kernel::JoinWrite { nkeys } => {
            let k = join_keys(*nkeys)?;
            count(k.saturating_add(2))?;
            expect(k, Elem::U64, "offsets")?;
            expect(k + 1, Elem::U64, "total")?;
            Ok(vec![Elem::U32, Elem::U32])
        }
        Kernel::MatchFlags { nkeys, .. } => {
            // The left side and one or more right sides of the same key types.
            let width = (*nkeys).max(1);
            let groups = args.len() / width;
            if groups < 2 || args.len() % width != 0 {
                return Err(format!(
                    "takes {width} key columns of the left side and of each right side, but has {} arguments",
                    args.len()
                ));
            }
            if *nkeys > 0 {
                same_groups(groups, width)?;
            }
            Ok(vec![Elem::U8])
        }
        Kernel::MergeUnion { width, .. } => {
            if *width == 0 {
                return Err("a merge needs at least one column".into());
            }
            count(groups_of(2, *width)?)?;
            same_groups(2, *width)?;
            Ok(args[..*width].to_vec())
        }
        Kernel::ReduceByKey { nkeys, aggs } => {
            let mut outs: Vec<Elem> = Vec::new();
            let mut i = 0;
            for _ in 0..*nkeys {
                let e = *args
                    .get(i)
                    .ok_or_else(|| format!("takes {nkeys} key columns, found {}", args.len()))?;
                outs.push(e);
                i += 1;
            }
            let mut rank = false;
            let mut values = 0;
            for (n, a) in aggs.iter().enumerate() {
                match (a.func, a.input) {
                    (AggFunc::Count, None) => {
                        if types && a.output != Type::Int64 {
                            return Err(format!("aggregate {n}: count yields int64, not {}", a.output));
                        }
                    }
                    (AggFunc::Count, Some(_)) => return Err(format!("aggregate {n}: count takes no value column")),
                    (f, None) => return Err(format!("aggregate {n}: {f:?} needs a value column")),
                    (f, Some(t)) => {
                        expect(i, Elem::of(t), &format!("the value of aggregate {n}"))?;
                        if types {
                            check_agg_type(f, t, a.output).map_err(|m| format!("aggregate {n}: {m}"))?;
                        }
                        rank |= t == Type::String && matches!(f, AggFunc::Min | AggFunc::Max);
                        i += 1;
                        values += 1;
                    }
                }
                outs.push(Elem::of(a.output));
            }
            if *nkeys == 0 && values == 0 {
                if args.len() <= i {
                    return Err("without keys or value columns, one column giving the row count is needed".into());
                }
                i += 1;
            }
            if rank {
                expect(i, Elem::U32, "the rank table")?;
                i += 1;
            }
            count(i)?;
            Ok(outs)
        }
        Kernel::FusedReduce {
            filter,
            nkeys,
            aggs,
            exprs,
            n_cols,
        } => {
            if *n_cols == 0 {
                return Err("a fused reduction needs at least one column argument".into());
            }
            if nkeys > n_cols {
                return Err(format!("takes {nkeys} key columns among {n_cols} columns"));
            }
            at_least(*n_cols)?;
            let cols = &args[..*n_cols];
            if let (Some(f), true) = (filter, types) {
                check_types(f, *n_cols, args).map_err(|m| format!("the filter: {m}"))?;
                if f.ty != Type::Bool {
                    return Err(format!("the filter is of type {}, not bool", f.ty));
                }
            }
            if exprs.len() != aggs.len() {
                return Err(format!(
                    "has {} aggregates but {} value expressions",
                    aggs.len(),
                    exprs.len()
                ));
            }
            let mut outs: Vec<Elem> = cols[..*nkeys].to_vec();
            for (n, (a, e)) in aggs.iter().zip(exprs).enumerate() {
                match (a.func, a.input, e) {
                    (AggFunc::Count, None, None) => {
                        if types && a.output != Type::Int64 {
                            return Err(format!("aggregate {n}: count yields int64, not {}", a.output));
                        }
                    }
                    (AggFunc::Count, _, _) => return Err(format!("aggregate {n}: count takes no value")),
                    (f, Some(t), Some(e)) => {
                        if t == Type::String && matches!(f, AggFunc::Min | AggFunc::Max) {
                            return Err(format!("aggregate {n}: {f:?} of strings is not fused"));
                        }
                        if types {
                            check_types(e, *n_cols, args).map_err(|m| format!("aggregate {n}: {m}"))?;
                            if e.ty != t {
                                return Err(format!("aggregate {n}: the value is of type {}, not {t}", e.ty));
                            }
                            check_agg_type(f, t, a.output).map_err(|m| format!("aggregate {n}: {m}"))?;
                        }
                    }
                    (f, _, _) => return Err(format!("aggregate {n}: {f:?} needs a value of its input type")),
                }
                outs.push(Elem::of(a.output));
            }
            Ok(outs)
        }
        Kernel::TrieBuild { arity } => {
            if *arity == 0 {
                return Err("a trie needs at least one column".into());
            }
            count(*arity)?;
            let mut outs = Vec::with_capacity(2 * arity - 1);
            for (d, &e) in args.iter().enumerate() {
                outs.push(e);
                if d + 1 < *arity {
                    outs.push(Elem::U32);
                }
            }
            Ok(outs)
        }
        Kernel::RootRange => {
            count(1)?;
            Ok(vec![Elem::U32, Elem::U32])
        }
        Kernel::RangeCount => {
            count(2)?;
            expect(0, Elem::U32, "lo")?;
            expect(1, Elem::U32, "hi")?;
            Ok(vec![Elem::U64])
        }
        Kernel::Expand => {
            if args.len() != 3 {
                count(4)?;
                expect(3, Elem::U64, "window")?;
            }
            expect(0, Elem::U32, "lo")?;
            expect(1, Elem::U64, "offsets")?;
            expect(2, Elem::U64, "total")?;
            Ok(vec![Elem::U32, Elem::U32])
        }
        Kernel::Exchange { width, to } => {
            if *width == 0 {
                return Err("an exchange needs at least one column".into());
            }
            count(*width)?;
            if let Exchange::Hash { cols } | Exchange::Keep { cols } = to {
                if let Some(c) = cols.iter().find(|&&c| c >= *width) {
                    return Err(format!("hashes column {c} of {width}"));
                }
            }
            Ok(args.to_vec())
        }
        Kernel::Outgrows { factor } => {
            if *factor == 0 {
                return Err("a growth test needs a factor of at least 1".into());
            }
            count(2)?;
            Ok(vec![Elem::U8])
        }
        Kernel::Window { row_bytes, max_rows } => {
            if *row_bytes == 0 {
                return Err("a window needs a row size of at least one byte".into());
            }
            if *max_rows == Some(0) {
                return Err("a window needs room for at least one row".into());
            }
            if args.len() != 1 {
                count(2)?;
                expect(1, Elem::U64, "prev")?;
            }
            expect(0, Elem::U64, "total")?;
            Ok(vec![Elem::U64])
        }
        Kernel::Claim { boxes, row_bytes } => {
            if *boxes == 0 {
                return Err("a claim needs at least one box".into());
            }
            if *row_bytes == Some(0) {
                return Err("a claim needs a row size of at least one byte".into());
            }
            if args.len() != 1 {
                count(2)?;
                expect(1, Elem::U64, "prev")?;
            }
            expect(0, Elem::U64, "total")?;
            Ok(vec![Elem::U64])
        }
        Kernel::SortedSearch => {
            count(4)?;
            expect(1, Elem::U32, "lo")?;
            expect(2, Elem::U32, "hi")?;
            expect(3, args[0], "needle")?;
            Ok(vec![Elem::U8, Elem::U32])
        }
        Kernel::IntersectCount { ways } => {
            if *ways == 0 {
                return Err("an intersection needs at least one range".into());
            }
            count(groups_of(3, *ways)?)?;
            for w in 0..*ways {
                expect(3 * w, args[0], "values")?;
                expect(3 * w + 1, Elem::U32, "lo")?;
                expect(3 * w + 2, Elem::U32, "hi")?;
            }
            Ok(vec![Elem::I64])
        }
        Kernel::BoundRange { nkeys, lower, upper } => {
            let bounds = usize::from(lower.is_some()) + usize::from(upper.is_some());
            if bounds == 0 {
                // The range of equal keys: no values, no bounds.
                if *nkeys == 0 {
                    return Err("a range without bounds needs at least one key".into());
                }
                count(groups_of(2, *nkeys)?)?;
                for k in 0..*nkeys {
                    expect(nkeys + k, args[k], &format!("probing key {k}"))?;
                }
                return Ok(vec![Elem::U32, Elem::U32]);
            }
            count(groups_of(2, *nkeys)?.saturating_add(1 + bounds))?;
            let values = args[*nkeys];
            if !matches!(values, Elem::I32 | Elem::I64) {
                return Err(format!("the values are {}, not i32 or i64", values.name()));
            }
            for k in 0..*nkeys {
                expect(nkeys + 1 + k, args[k], &format!("probing key {k}"))?;
            }
            for i in 0..bounds {
                expect(2 * nkeys + 1 + i, values, "bound")?;
            }
            Ok(vec![Elem::U32, Elem::U32])
        }
        Kernel::HashBuild { nkeys } => {
            if *nkeys == 0 {
                return Err("a hash table needs at least one key".into());
            }
            count(*nkeys)?;
            Ok(vec![Elem::U32])
        }
        Kernel::HashProbe { nkeys } | Kernel::HashMatch { nkeys, .. } => {
            if *nkeys == 0 {
                return Err("a hash probe needs at least one key".into());
            }
            count(groups_of(2, *nkeys)?.saturating_add(1))?;
            expect(*nkeys, Elem::U32, "table")?;
            for k in 0..*nkeys {
                expect(nkeys + 1 + k, args[k], &format!("probing key {k}"))?;
            }
            Ok(if matches!(kernel, Kernel::HashProbe { .. }) {
                vec![Elem::U32, Elem::U32]
            } else {
                vec![Elem::U8]
            })
        }
        Kernel::NestedLoopCount { nkeys } | Kernel::NestedLoopMatch { nkeys, .. } => {
            if *nkeys == 0 {
                return Err("a nested-loop join needs at least one key".into());
            }
            count(join_keys(*nkeys)?)?;
            Ok(vec![if matches!(kernel, Kernel::NestedLoopCount { .. }) {
                Elem::U64
            } else {
                Elem::U8
            }])
        }
        Kernel::NestedLoopWrite { nkeys } => {
            if *nkeys == 0 {
                return Err("a nested-loop join needs at least one key".into());
            }
            let k = join_keys(*nkeys)?;
            count(k.saturating_add(2))?;
            expect(k, Elem::U64, "offsets")?;
            expect(k + 1, Elem::U64, "total")?;
            Ok(vec![Elem::U32, Elem::U32])
        }
        Kernel::IneqTree => {
            count(1)?;
            if !matches!(args[0], Elem::I32 | Elem::I64) {
                return Err(format!("the values are {}, not i32 or i64", args[0].name()));
            }
            Ok(vec![Elem::U32])
        }
        Kernel::IneqRanges { lower, upper } => {
            let bounds = usize::from(lower.is_some()) + usize::from(upper.is_some());
            if bounds == 0 {
                return Err("an inequality join's ranges need a lower or an upper bound".into());
            }
            count(4 + bounds)?;
            if !matches!(args[0], Elem::I32 | Elem::I64) {
                return Err(format!("the values are {}, not i32 or i64", args[0].name()));
            }
            expect(1, Elem::U32, "tree")?;
            expect(2, Elem::U32, "lo")?;
            expect(3, Elem::U32, "hi")?;
            for i in 0..bounds {
                expect(4 + i, args[0], "bound")?;
            }
            Ok(vec![Elem::U32, Elem::U32, Elem::U32])
        }
        Kernel::MinRange { ways } => {
            if *ways == 0 {
                return Err("the smallest of no ranges".into());
            }
            count(groups_of(2, *ways)?)?;
            for i in 0..2 * ways {
                expect(i, Elem::U32, if i % 2 == 0 { "lo" } else { "hi" })?;
            }
            Ok(vec![Elem::U32, Elem::U32])
        }
    }
}

/// The element type of a dictionary table.
pub fn dict_elem(op: &DictOp) -> Elem {
    match op {
        DictOp::Rank => Elem::U32,
        DictOp::Like(_) | DictOp::Prefix(_) | DictOp::Regex(_) => Elem::U8,
        DictOp::Strlen => Elem::I32,
    }
}

fn check_agg_type(f: AggFunc, input: Type, output: Type) -> Result<(), String> {
    let expected = match (f, input) {
        (AggFunc::Count, _) => Type::Int64,
        (AggFunc::Min | AggFunc::Max, t) => t,
        (AggFunc::Sum, Type::Int32 | Type::Int64) => Type::Int64,
        (AggFunc::Sum, Type::Decimal(s) | Type::WideDecimal(s)) => Type::WideDecimal(s),
        (AggFunc::Sum, Type::Float64) => Type::Float64,
        (AggFunc::Avg, Type::Int32 | Type::Int64) => Type::Decimal(6),
        (AggFunc::Avg, Type::Decimal(s)) => Type::Decimal(s.max(6)),
        (AggFunc::Avg, Type::WideDecimal(s)) => Type::WideDecimal(s.max(6)),
        (AggFunc::Avg, Type::Float64) => Type::Float64,
        (f, t) => return Err(format!("{f:?} of {t} is not defined")),
    };
    if expected == output {
        Ok(())
    } else {
        Err(format!("{f:?} of {input} yields {expected}, not {output}"))
    }
}

/// The contract of a launch, checked: the element types of `kernel`'s outputs for
/// arguments of the element types and lengths `args`, or why the arguments do not fit
/// it ([`kernel_outputs`], then [`check_lengths`]). The runtime checks every launch so
/// before a backend sees it.
pub fn check_args(kernel: &Kernel, args: &[(Elem, usize)], inputs: &[InputRel]) -> Result<Vec<Elem>, String> {
    let elems: Vec<Elem> = args.iter().map(|a| a.0).collect();
    let outs = kernel_outputs(kernel, &elems, inputs)?;
    let lens: Vec<usize> = args.iter().map(|a| a.1).collect();
    check_lengths(kernel, &lens)?;
    Ok(outs)
}

/// The part of [`check_args`] a backend needs to read a launch's arguments safely: their
/// number, element types and lengths, without the rules on the types of expressions (the
/// backends check those themselves, in the checked form, by the same rules) and of
/// aggregates (which the backends' arithmetic handles more generally). Tests that compare
/// backends on launches beyond the contract check this.
pub fn check_shape(kernel: &Kernel, args: &[(Elem, usize)]) -> Result<Vec<Elem>, String> {
    let elems: Vec<Elem> = args.iter().map(|a| a.0).collect();
    let outs = outputs(kernel, &elems, &[], false)?;
    let lens: Vec<usize> = args.iter().map(|a| a.1).collect();
    check_lengths(kernel, &lens)?;
    Ok(outs)
}

/// Checks the lengths of a launch's arguments against `kernel`'s contract: the groups of
/// arguments it reads row by row have equal lengths, and the arguments of a fixed length
/// (a `total` of one row, a `window` of two) have it. `lens` are the arguments' lengths,
/// whose number and element types [`kernel_outputs`] has accepted. With the element
/// types, this is everything a backend may assume of its arguments.
pub fn check_lengths(kernel: &Kernel, lens: &[usize]) -> Result<(), String> {
    let n = lens.len();
    // Arguments `range` have one length, which `what` names.
    let equal = |range: std::ops::Range<usize>, what: &str| -> Result<(), String> {
        let range = range.start.min(n)..range.end.min(n);
        let Some(&first) = lens.get(range.start) else {
            return Ok(());
        };
        match lens[range.clone()].iter().position(|&l| l != first) {
            Some(k) => Err(format!(
                "{what}: argument {} has {} rows, but argument {} has {first}",
                range.start + k,
                lens[range.start + k],
                range.start
            )),
            None => Ok(()),
        }
    };
    let fixed = |i: usize, len: usize, what: &str| -> Result<(), String> {
        match lens.get(i) {
            Some(&l) if l != len => Err(format!("argument {i} ({what}) has {l} rows, but must have {len}")),
            _ => Ok(()),
        }
    };
    match kernel {
        Kernel::LoadInput { .. } | Kernel::Const { .. } | Kernel::DictTable { .. } => Ok(()),
        Kernel::Eval { n_cols, .. } | Kernel::FusedReduce { n_cols, .. } => equal(0..(*n_cols).min(n), "the columns"),
        Kernel::StrFn { .. }
        | Kernel::Compact
        | Kernel::Slice { .. }
        | Kernel::AdjacentDistinct
        | Kernel::RepeatedKey { .. }
        | Kernel::TrieBuild { .. }
        | Kernel::RangeCount
        | Kernel::MinRange { .. } => equal(0..n, "the columns"),
        Kernel::Concat { parts, width } => {
            for g in 0..*parts {
                equal(g * width..(g + 1) * width, &format!("part {g}"))?;
            }
            Ok(())
        }
        Kernel::SortPerm { desc, .. } => equal(0..desc.len().min(n), "the keys"),
        Kernel::JoinCount { nkeys } => {
            if *nkeys > 0 {
                equal(0..*nkeys, "the left keys")?;
                equal(*nkeys..2 * nkeys, "the right keys")?;
            }
            Ok(())
        }
        Kernel::MatchFlags { nkeys, .. } => {
            if *nkeys > 0 {
                equal(0..*nkeys, "the left keys")?;
                for g in 1..n / nkeys {
                    equal(g * nkeys..(g + 1) * nkeys, &format!("the keys of right side {g}"))?;
                }
            }
            Ok(())
        }
        // Gathered columns may differ in length (each index is checked against each).
        Kernel::ExclusiveScan | Kernel::RootRange | Kernel::Gather { .. } => Ok(()),
        Kernel::JoinWrite { nkeys } => {
            let k = if *nkeys == 0 { 2 } else { 2 * nkeys };
            if *nkeys > 0 {
                equal(0..*nkeys, "the left keys")?;
                equal(*nkeys..k, "the right keys")?;
            }
            // The offsets are per left row.
            if let (Some(&o), Some(&l)) = (lens.get(k), lens.first()) {
                if o != l {
                    return Err(format!(
                        "the offsets (argument {k}) have {o} rows, but the left side has {l}"
                    ));
                }
            }
            fixed(k + 1, 1, "total")
        }
        Kernel::MergeUnion { width, .. } => {
            equal(0..*width, "the left columns")?;
            equal(*width..2 * width, "the right columns")
        }
        Kernel::ReduceByKey { nkeys, aggs } => {
            let values = aggs.iter().filter(|a| a.input.is_some()).count();
            let cols = if *nkeys == 0 && values == 0 { 1 } else { nkeys + values };
            equal(0..cols.min(n), "the keys and values")
        }
        Kernel::Expand => {
            equal(0..2, "lo and the offsets")?;
            fixed(2, 1, "total")?;
            fixed(3, 2, "window")
        }
        // The runtime reads `prev` itself (no rows, or two).
        Kernel::Window { .. } | Kernel::Claim { .. } => fixed(0, 1, "total"),
        // Only the lengths are read, whatever they are.
        Kernel::Outgrows { .. } => Ok(()),
        Kernel::Exchange { width, .. } => equal(0..*width, "the columns"),
        Kernel::SortedSearch => equal(1..4, "lo, hi and the needles"),
        Kernel::NestedLoopCount { nkeys } | Kernel::NestedLoopMatch { nkeys, .. } => {
            equal(0..*nkeys, "the left keys")?;
            equal(*nkeys..n, "the right keys")
        }
        Kernel::NestedLoopWrite { nkeys } => {
            let k = 2 * nkeys;
            equal(0..*nkeys, "the left keys")?;
            equal(*nkeys..k, "the right keys")?;
            if let (Some(&o), Some(&l)) = (lens.get(k), lens.first()) {
                if o != l {
                    return Err(format!(
                        "the offsets (argument {k}) have {o} rows, but the left side has {l}"
                    ));
                }
            }
            fixed(k + 1, 1, "total")
        }
        Kernel::HashBuild { .. } => equal(0..n, "the keys"),
        Kernel::HashProbe { nkeys } | Kernel::HashMatch { nkeys, .. } => {
            equal(0..*nkeys, "the build keys")?;
            equal(nkeys + 1..n, "the probing keys")
        }
        Kernel::BoundRange {
            nkeys,
            lower: None,
            upper: None,
        } => {
            equal(0..*nkeys, "the searched keys")?;
            equal(*nkeys..n, "the probing keys")
        }
        Kernel::IneqTree => Ok(()),
        Kernel::IneqRanges { .. } => {
            let rows = lens.first().copied().unwrap_or(0);
            if lens
                .get(1)
                .is_some_and(|&t| Some(t) != rows.checked_mul(ineq_levels(rows)))
            {
                return Err(format!(
                    "the tree has {} entries, not {} levels of the {rows} values",
                    lens[1],
                    ineq_levels(rows)
                ));
            }
            equal(2..n, "the ranges and bounds")
        }
        Kernel::BoundRange { nkeys, .. } => {
            equal(0..nkeys + 1, "the searched keys and values")?;
            equal(nkeys + 1..n, "the probing keys and bounds")
        }
        Kernel::IntersectCount { ways } => {
            // Every range has the rows of the first.
            let rows = lens.get(1).copied().unwrap_or(0);
            for w in 0..*ways {
                for i in [3 * w + 1, 3 * w + 2] {
                    match lens.get(i) {
                        Some(&l) if l != rows => {
                            return Err(format!(
                                "the ranges: argument {i} has {l} rows, but argument 1 has {rows}"
                            ))
                        }
                        _ => {}
                    }
                }
            }
            Ok(())
        }
    }
}
