//! The readable forms of a kernel plan: text (`foxc compile --emit kernels`) and a
//! graphviz drawing of its CFG (`--emit dot`).

use std::fmt::Write;

use fox_sema::core::{AggFunc, ArithOp, CmpOp, Column, Value};

use crate::ir::*;

/// Renders a plan: its inputs, then every block with one launch per line (outputs with
/// their element types, then the kernel and its arguments), moves, frees, outputs and the
/// terminator.
pub fn print_kernels(plan: &KernelPlan) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "kernel plan (version {}): {} buffers, planned peak {} live",
        plan.version,
        plan.buffers.len(),
        plan.planned_peak_buffers
    );
    if !plan.inputs.is_empty() {
        out.push_str("inputs:\n");
        for (i, r) in plan.inputs.iter().enumerate() {
            let _ = writeln!(
                out,
                "  {i}: {} from {:?} sep {:?}{} {}",
                r.name,
                r.file,
                r.sep,
                if r.header { " header" } else { "" },
                columns(&r.columns)
            );
        }
    }
    for (b, block) in plan.blocks.iter().enumerate() {
        let entry = if plan.entry.0 as usize == b { ", entry" } else { "" };
        let local = if block.local { ", each device by itself" } else { "" };
        let _ = writeln!(out, "block b{b} ({}{entry}{local}):", block.label);
        for line in block_lines(plan, block) {
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}

/// The lines of a block: its instructions (consecutive frees on one line) and terminator.
fn block_lines(plan: &KernelPlan, block: &Block) -> Vec<String> {
    let mut lines = Vec::new();
    let mut frees: Vec<String> = Vec::new();
    for i in &block.instrs {
        if let Instr::Free { buf } = i {
            frees.push(name(plan, *buf));
            continue;
        }
        if !frees.is_empty() {
            lines.push(format!("free {}", frees.join(", ")));
            frees.clear();
        }
        lines.push(instr_text(plan, i));
    }
    if !frees.is_empty() {
        lines.push(format!("free {}", frees.join(", ")));
    }
    lines.push(term_text(plan, &block.term));
    lines
}

fn name(plan: &KernelPlan, b: BufId) -> String {
    plan.buffers
        .get(b.0 as usize)
        .map_or_else(|| format!("#{}?", b.0), |v| v.name.clone())
}

fn typed(plan: &KernelPlan, b: BufId) -> String {
    match plan.buffers.get(b.0 as usize) {
        Some(v) => format!("{}:{}", v.name, v.elem.name()),
        None => format!("#{}?", b.0),
    }
}

fn columns(cols: &[Column]) -> String {
    let parts: Vec<String> = cols.iter().map(|c| format!("{}: {}", c.name, c.ty)).collect();
    format!("({})", parts.join(", "))
}

/// One instruction as text.
pub fn instr_text(plan: &KernelPlan, i: &Instr) -> String {
    match i {
        Instr::Launch { kernel, args, outs, .. } => {
            let outs: Vec<String> = outs.iter().map(|&b| typed(plan, b)).collect();
            let args_s: Vec<String> = args.iter().map(|&b| name(plan, b)).collect();
            format!(
                "{} = {}({})",
                outs.join(", "),
                kernel_text(plan, kernel, args),
                args_s.join(", ")
            )
        }
        Instr::Move { dst, src } => format!("{} = move {}", typed(plan, *dst), name(plan, *src)),
        Instr::Free { buf } => format!("free {}", name(plan, *buf)),
        Instr::Observe { id, bufs } => {
            let bufs: Vec<String> = bufs.iter().map(|&b| name(plan, b)).collect();
            let what = plan
                .observed
                .get(*id as usize)
                .map_or_else(|| format!("#{id}?"), |o| o.label.clone());
            format!("observe the rows of {what} in [{}]", bufs.join(", "))
        }
        Instr::Assert { check, args, .. } => {
            let args: Vec<String> = args.iter().map(|&b| name(plan, b)).collect();
            match check {
                Check::Functional { pred, keys, .. } => format!(
                    "assert no row in ({}): `{pred}` gives a key of {} two values",
                    args.join(", "),
                    plural(*keys, "column")
                ),
            }
        }
        Instr::Output {
            name: n,
            columns: cols,
            cols: bufs,
            order,
            limit,
        } => {
            let bufs: Vec<String> = bufs.iter().map(|&b| name(plan, b)).collect();
            let mut s = format!("{} {} from [{}]", output_label(n), columns(cols), bufs.join(", "));
            if !order.is_empty() {
                let keys: Vec<String> = order
                    .iter()
                    .map(|&(c, desc)| {
                        let n = cols.get(c).map_or_else(|| format!("#{c}"), |c| c.name.clone());
                        if desc {
                            format!("{n} desc")
                        } else {
                            n
                        }
                    })
                    .collect();
                let _ = write!(s, " order by {}", keys.join(", "));
            }
            if let Some(l) = limit {
                let _ = write!(s, " limit {l}");
            }
            s
        }
    }
}

fn term_text(plan: &KernelPlan, t: &Terminator) -> String {
    match t {
        Terminator::Jump(b) => format!("goto b{}", b.0),
        Terminator::Halt => "halt".into(),
        Terminator::LoopIf { nonempty, body, exit } => {
            let bufs: Vec<String> = nonempty.iter().map(|&b| name(plan, b)).collect();
            format!("if nonempty({}) goto b{} else b{}", bufs.join(", "), body.0, exit.0)
        }
        Terminator::If {
            nonempty,
            then,
            otherwise,
        } => {
            let bufs: Vec<String> = nonempty.iter().map(|&b| name(plan, b)).collect();
            format!(
                "if nonempty({}) then b{} else b{}",
                bufs.join(", "),
                then.0,
                otherwise.0
            )
        }
    }
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// The kernel's name as `--emit kernels` prints it, before its parameters (`sort_perm`,
/// `join_count`, `anti_match`, `substr`).
pub fn op_name(k: &Kernel) -> &'static str {
    match k {
        Kernel::LoadInput { .. } => "load_input",
        Kernel::Const { .. } => "const",
        Kernel::DictTable { .. } => "dict_table",
        Kernel::Eval { .. } => "eval",
        Kernel::StrFn { func } => func.name(),
        Kernel::Compact => "compact",
        Kernel::Gather { .. } => "gather",
        Kernel::Concat { .. } => "concat_rows",
        Kernel::Slice { .. } => "slice",
        Kernel::SortPerm { .. } => "sort_perm",
        Kernel::AdjacentDistinct => "adjacent_distinct",
        Kernel::RepeatedKey { .. } => "repeated_key",
        Kernel::JoinCount { .. } => "join_count",
        Kernel::ExclusiveScan => "exclusive_scan",
        Kernel::JoinWrite { .. } => "join_write",
        Kernel::MatchFlags { anti: false, .. } => "match",
        Kernel::MatchFlags { anti: true, .. } => "anti_match",
        Kernel::MergeUnion { .. } => "merge_union",
        Kernel::ReduceByKey { .. } => "reduce_by_key",
        Kernel::FusedReduce { .. } => "fused_reduce",
        Kernel::TrieBuild { .. } => "trie_build",
        Kernel::RootRange => "root_range",
        Kernel::RangeCount => "range_count",
        Kernel::Expand => "expand",
        Kernel::Window { .. } => "window",
        Kernel::Claim { .. } => "claim",
        Kernel::Outgrows { .. } => "outgrows",
        Kernel::Exchange { .. } => "exchange",
        Kernel::SortedSearch => "sorted_search",
        Kernel::IntersectCount { .. } => "intersect_count",
        Kernel::MinRange { .. } => "min_range",
        Kernel::BoundRange { .. } => "bound_range",
        Kernel::HashBuild { .. } => "hash_build",
        Kernel::HashProbe { .. } => "hash_probe",
        Kernel::HashMatch { anti: false, .. } => "hash_match",
        Kernel::HashMatch { anti: true, .. } => "hash_anti_match",
        Kernel::NestedLoopCount { .. } => "nested_loop_count",
        Kernel::NestedLoopWrite { .. } => "nested_loop_write",
        Kernel::NestedLoopMatch { anti: false, .. } => "nested_loop_match",
        Kernel::NestedLoopMatch { anti: true, .. } => "nested_loop_anti_match",
        Kernel::IneqTree => "ineq_tree",
        Kernel::IneqRanges { .. } => "ineq_ranges",
    }
}

/// The name of a launch in timing tables and run-time messages: [`op_name`], and for
/// `load_input` and `dict_table` the relation or table too, exactly as `--emit kernels`
/// prints them (`load_input[edge]`, `dict_table[like "%BRASS"]`). Every such name is the
/// start of the launch's text in `--emit kernels`.
pub fn kernel_label(plan: &KernelPlan, k: &Kernel) -> String {
    match k {
        Kernel::LoadInput { .. } | Kernel::DictTable { .. } => kernel_text(plan, k, &[]),
        other => op_name(other).to_string(),
    }
}

/// The name of an `Output` instruction in timing tables: `output NAME`, as `--emit
/// kernels` starts its line.
pub fn output_label(name: &str) -> String {
    format!("output {name}")
}

fn kernel_text(plan: &KernelPlan, k: &Kernel, args: &[BufId]) -> String {
    let op = op_name(k);
    match k {
        Kernel::LoadInput { input, whole, hash } => match plan.inputs.get(*input) {
            Some(r) if *whole => format!("{op}[{}, whole on every device]", r.name),
            Some(r) if !hash.is_empty() => {
                let keys: Vec<&str> = hash
                    .iter()
                    .map(|&c| r.columns.get(c).map_or("?", |c| c.name.as_str()))
                    .collect();
                format!("{op}[{}, hashed on {}]", r.name, keys.join(", "))
            }
            Some(r) => format!("{op}[{}]", r.name),
            None => format!("{op}[#{input}?]"),
        },
        Kernel::Const { rows, .. } => {
            const SHOWN: usize = 6;
            let mut parts: Vec<String> = rows
                .iter()
                .take(SHOWN)
                .map(|r| {
                    let vals: Vec<String> = r.iter().map(fox_ra::print_value).collect();
                    format!("({})", vals.join(", "))
                })
                .collect();
            if rows.len() > SHOWN {
                parts.push(format!("… {} rows", rows.len()));
            }
            format!("{op}[{}]", parts.join(", "))
        }
        Kernel::DictTable { op: d } => format!("{op}[{}]", dict_text(d)),
        Kernel::Eval { expr, n_cols } => {
            let (names, tables) = expr_args(plan, args, *n_cols);
            format!("{op}[{}]", expr_text(expr, &names, &tables))
        }
        Kernel::StrFn { .. }
        | Kernel::Compact
        | Kernel::AdjacentDistinct
        | Kernel::ExclusiveScan
        | Kernel::RootRange
        | Kernel::RangeCount
        | Kernel::IneqTree
        | Kernel::Expand
        | Kernel::SortedSearch => op.into(),
        Kernel::Gather { shift } => {
            if *shift == 0 {
                op.into()
            } else {
                format!("{op}[+{shift}]")
            }
        }
        Kernel::Concat { parts, width } => format!("{op}[{parts} × {width}]"),
        Kernel::Slice { start, len } => format!("{op}[{start}, len {len}]"),
        Kernel::SortPerm { desc, by_rank } => {
            let keys: Vec<String> = desc
                .iter()
                .zip(by_rank)
                .map(|(&d, &r)| {
                    let mut s = if d { "desc" } else { "asc" }.to_string();
                    if r {
                        s.push_str(" by rank");
                    }
                    s
                })
                .collect();
            format!("{op}[{}]", keys.join(", "))
        }
        Kernel::JoinCount { nkeys }
        | Kernel::JoinWrite { nkeys }
        | Kernel::MatchFlags { nkeys, .. }
        | Kernel::RepeatedKey { nkeys }
        | Kernel::HashBuild { nkeys }
        | Kernel::HashProbe { nkeys }
        | Kernel::HashMatch { nkeys, .. }
        | Kernel::NestedLoopCount { nkeys }
        | Kernel::NestedLoopWrite { nkeys }
        | Kernel::NestedLoopMatch { nkeys, .. } => {
            format!("{op}[{}]", keys_text(*nkeys))
        }
        Kernel::MergeUnion { width, disjoint } => {
            let disjoint = if *disjoint { ", disjoint" } else { "" };
            format!("{op}[{}{disjoint}]", plural(*width, "column"))
        }
        Kernel::ReduceByKey { nkeys, aggs } => {
            let aggs: Vec<String> = aggs
                .iter()
                .map(|a| {
                    let f = agg_name(a.func);
                    match a.input {
                        Some(t) => format!("{f}({t}) -> {}", a.output),
                        None => format!("{f}() -> {}", a.output),
                    }
                })
                .collect();
            format!("{op}[{}; {}]", plural(*nkeys, "key"), aggs.join(", "))
        }
        Kernel::FusedReduce {
            filter,
            nkeys,
            aggs,
            exprs,
            n_cols,
        } => {
            let (names, tables) = expr_args(plan, args, *n_cols);
            let show = |e: &KExpr| expr_text(e, &names, &tables);
            let aggs: Vec<String> = aggs
                .iter()
                .zip(exprs)
                .map(|(a, e)| {
                    let f = agg_name(a.func);
                    match e {
                        Some(e) => format!("{f}({}) -> {}", show(e), a.output),
                        None => format!("{f}() -> {}", a.output),
                    }
                })
                .collect();
            let filter = filter
                .as_ref()
                .map(|f| format!("where {}; ", show(f)))
                .unwrap_or_default();
            format!("{op}[{filter}{}; {}]", plural(*nkeys, "key"), aggs.join(", "))
        }
        Kernel::TrieBuild { arity } => format!("{op}[{}]", plural(*arity, "level")),
        Kernel::Window {
            row_bytes,
            max_rows: None,
        } => format!("{op}[{row_bytes} bytes/row]"),
        Kernel::Window {
            row_bytes,
            max_rows: Some(m),
        } => format!("{op}[{row_bytes} bytes/row, at most {m} rows]"),
        Kernel::Outgrows { factor } => format!("{op}[×{factor}]"),
        Kernel::Claim { boxes, row_bytes: None } => format!("{op}[{boxes} boxes]"),
        Kernel::Claim {
            boxes,
            row_bytes: Some(b),
        } => format!("{op}[{boxes} boxes, {b} bytes/row]"),
        Kernel::Exchange { to, .. } => {
            let cols = |c: &[usize]| c.iter().map(|c| format!("#{c}")).collect::<Vec<_>>().join(", ");
            match to {
                Exchange::Hash { cols: c } => format!("{op}[hash {}]", cols(c)),
                Exchange::Gather => format!("{op}[to device 0]"),
                Exchange::Broadcast => format!("{op}[to every device]"),
                Exchange::Keep { cols: c } => format!("{op}[keep by hash {}]", cols(c)),
            }
        }
        Kernel::IntersectCount { ways } | Kernel::MinRange { ways } => format!("{op}[{}]", plural(*ways, "way")),
        Kernel::BoundRange { nkeys, lower, upper } => {
            // `bound_range[>= lo, < hi + 50]`: each bound's relation, column and offset.
            let side = bound_text;
            let keys = if *nkeys == 0 {
                String::new()
            } else {
                format!("{}, ", plural(*nkeys, "key"))
            };
            if lower.is_none() && upper.is_none() {
                return format!("{op}[{}, equal]", plural(*nkeys, "key"));
            }
            format!(
                "{op}[{keys}{}, {}]",
                side(lower, ">=", ">", "lo"),
                side(upper, "<=", "<", "hi")
            )
        }
        Kernel::IneqRanges { lower, upper } => format!(
            "{op}[{}, {}]",
            bound_text(lower, ">=", ">", "lo"),
            bound_text(upper, "<=", "<", "hi")
        ),
    }
}

/// A bound of a bounded search as `>= lo + 5` (`-` without one).
fn bound_text(b: &Option<RangeBound>, closed: &str, open: &str, col: &str) -> String {
    match b {
        Some(b) => {
            let rel = if b.open { open } else { closed };
            match b.offset {
                0 => format!("{rel} {col}"),
                o if o < 0 => format!("{rel} {col} - {}", o.unsigned_abs()),
                o => format!("{rel} {col} + {o}"),
            }
        }
        None => "-".to_string(),
    }
}

/// The names of an expression kernel's columns, and of its tables (by what they hold).
fn expr_args(plan: &KernelPlan, args: &[BufId], n_cols: usize) -> (Vec<String>, Vec<String>) {
    let names: Vec<String> = args.iter().map(|&b| name(plan, b)).collect();
    let tables: Vec<String> = args
        .iter()
        .skip(n_cols)
        .map(|&b| {
            plan.blocks
                .iter()
                .flat_map(|bl| &bl.instrs)
                .find_map(|i| match i {
                    Instr::Launch {
                        kernel: Kernel::DictTable { op },
                        outs,
                        ..
                    } if outs.contains(&b) => Some(dict_text(op)),
                    _ => None,
                })
                .unwrap_or_else(|| name(plan, b))
        })
        .collect();
    (names, tables)
}

fn keys_text(n: usize) -> String {
    if n == 0 {
        "cross".into()
    } else {
        plural(n, "key")
    }
}

fn agg_name(f: AggFunc) -> &'static str {
    match f {
        AggFunc::Sum => "sum",
        AggFunc::Count => "count",
        AggFunc::Min => "min",
        AggFunc::Max => "max",
        AggFunc::Avg => "avg",
    }
}

fn dict_text(op: &DictOp) -> String {
    match op {
        DictOp::Rank => "rank".into(),
        DictOp::Like(p) => format!("like {p:?}"),
        DictOp::Prefix(p) => format!("prefix {p:?}"),
        DictOp::Regex(p) => format!("match {p:?}"),
        DictOp::Strlen => "strlen".into(),
    }
}

/// An expression in infix form, naming the argument buffers it reads.
fn expr_text(e: &KExpr, cols: &[String], tables: &[String]) -> String {
    let col = |i: usize| cols.get(i).cloned().unwrap_or_else(|| format!("#{i}?"));
    let table = |t: usize| tables.get(t).cloned().unwrap_or_else(|| format!("table#{t}?"));
    let style = ExprStyle {
        col: &col,
        table: &table,
        value: fox_ra::print_value,
        minimal: true,
    };
    write_expr(e, &style)
}

/// How [`write_expr`] writes an expression: the one walk behind the plan's text
/// ([`print_kernels`]) and the text of messages ([`show_kexpr`]).
struct ExprStyle<'a> {
    /// The name of column argument `i`.
    col: &'a dyn Fn(usize) -> String,
    /// The name of dictionary table `t`.
    table: &'a dyn Fn(usize) -> String,
    /// The text of a constant.
    value: fn(&Value) -> String,
    /// Plan style: an operand in parentheses only when it is compound (not a column, a
    /// constant, a table lookup or a call), a cast as `x::type`, an empty `and`/`or` as
    /// `true`/`false`. Otherwise message style: every arithmetic, comparison, `and` and
    /// `or` in parentheses of its own, a cast as `type(x)`.
    minimal: bool,
}

fn write_expr(e: &KExpr, s: &ExprStyle) -> String {
    let sub = |x: &KExpr| write_expr(x, s);
    let operand = |x: &KExpr| match x.kind {
        KExprKind::Col(_) | KExprKind::Const(_) | KExprKind::Table(..) | KExprKind::Call(..) => sub(x),
        _ if s.minimal => format!("({})", sub(x)),
        _ => sub(x),
    };
    let group = |text: String| if s.minimal { text } else { format!("({text})") };
    let list = |xs: &[KExpr], sep: &str, empty: &str| {
        if xs.is_empty() && s.minimal {
            empty.to_string()
        } else {
            group(xs.iter().map(operand).collect::<Vec<_>>().join(sep))
        }
    };
    match &e.kind {
        KExprKind::Col(i) => (s.col)(*i),
        KExprKind::Table(t, x) => format!("{}[{}]", (s.table)(*t), sub(x)),
        KExprKind::Const(v) => (s.value)(v),
        KExprKind::Cast(x) if s.minimal => format!("{}::{}", operand(x), e.ty),
        KExprKind::Cast(x) => format!("{}({})", e.ty, sub(x)),
        KExprKind::Neg(x) => format!("-{}", operand(x)),
        KExprKind::Arith(op, a, b) => group(format!("{} {} {}", operand(a), op_symbol(*op), operand(b))),
        KExprKind::Cmp(op, a, b) => group(format!("{} {} {}", operand(a), cmp_symbol(*op), operand(b))),
        KExprKind::And(xs) => list(xs, " and ", "true"),
        KExprKind::Or(xs) => list(xs, " or ", "false"),
        KExprKind::Not(x) => format!("!{}", operand(x)),
        KExprKind::In(x, vs) => {
            let vs: Vec<String> = vs.iter().map(s.value).collect();
            format!("{} in ({})", operand(x), vs.join(", "))
        }
        KExprKind::Call(f, xs) => {
            let xs: Vec<String> = xs.iter().map(sub).collect();
            format!("{}({})", fn_name(*f), xs.join(", "))
        }
    }
}

/// The kernel CFG for graphviz: one node per block labelled with its instructions, one
/// edge per control-flow successor (`nonempty` / `empty` on the loop test).
pub fn to_dot(plan: &KernelPlan) -> String {
    let mut out = String::from("digraph kernels {\n  node [shape=box, fontname=\"monospace\"];\n");
    for (b, block) in plan.blocks.iter().enumerate() {
        let mut label = format!("b{b} ({})\\l", escape(&block.label));
        for line in block_lines(plan, block) {
            label.push_str(&escape(&line));
            label.push_str("\\l");
        }
        let style = if plan.entry.0 as usize == b { ", penwidth=2" } else { "" };
        let _ = writeln!(out, "  b{b} [label=\"{label}\"{style}];");
    }
    for (b, block) in plan.blocks.iter().enumerate() {
        match &block.term {
            Terminator::Jump(t) => {
                let _ = writeln!(out, "  b{b} -> b{};", t.0);
            }
            Terminator::Halt => {}
            Terminator::LoopIf { body, exit, .. }
            | Terminator::If {
                then: body,
                otherwise: exit,
                ..
            } => {
                let _ = writeln!(out, "  b{b} -> b{} [label=\"nonempty\"];", body.0);
                let _ = writeln!(out, "  b{b} -> b{} [label=\"empty\"];", exit.0);
            }
        }
    }
    out.push_str("}\n");
    out
}

/// Escapes text for a double-quoted graphviz label.
fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\l"),
            c => o.push(c),
        }
    }
    o
}

// ---- expressions in messages -------------------------------------------------------------

/// The text of a constant in kernel errors: as LogiQL writes it, a string as Rust's `{:?}`
/// quotes it.
pub fn show_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        v => fox_ra::print_value(v),
    }
}

fn op_symbol(op: ArithOp) -> &'static str {
    op.symbol()
}

fn cmp_symbol(op: CmpOp) -> &'static str {
    match op {
        CmpOp::Eq => "=",
        CmpOp::Ne => "!=",
        CmpOp::Lt => "<",
        CmpOp::Le => "<=",
        CmpOp::Gt => ">",
        CmpOp::Ge => ">=",
    }
}

fn fn_name(f: ScalarFn) -> &'static str {
    match f {
        ScalarFn::Year => "year",
        ScalarFn::Month => "month",
        ScalarFn::Day => "day",
        ScalarFn::Abs => "abs",
        ScalarFn::Round => "round",
        ScalarFn::BitNot => "bnot",
        ScalarFn::LogNot => "lnot",
        ScalarFn::Unsigned => "unsigned",
        ScalarFn::Min => "min",
        ScalarFn::Max => "max",
    }
}

/// The text of an expression in the messages of kernel errors, the same from every
/// backend: `c0` is column argument 0, `t0[…]` a lookup in dictionary table 0 (the
/// runtime names the columns by the variables they hold).
pub fn show_kexpr(e: &KExpr) -> String {
    let style = ExprStyle {
        col: &|i| format!("c{i}"),
        table: &|t| format!("t{t}"),
        value: show_value,
        minimal: false,
    };
    write_expr(e, &style)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::ScalarFn;
    use fox_sema::core::Type;

    fn x(kind: KExprKind, ty: Type) -> KExpr {
        KExpr { kind, ty }
    }

    /// One tree with every kind of node, operands atomic and compound.
    fn every_kind() -> KExpr {
        let c = |i| x(KExprKind::Col(i), Type::Int64);
        let k = |v| x(KExprKind::Const(v), Type::Int64);
        let b = Box::new;
        let sum = x(
            KExprKind::Arith(ArithOp::Add, b(c(0)), b(k(Value::Int64(1)))),
            Type::Int64,
        );
        let prod = x(KExprKind::Arith(ArithOp::Mul, b(sum.clone()), b(c(1))), Type::Int64);
        let neg = x(KExprKind::Neg(b(prod.clone())), Type::Int64);
        let cast = x(KExprKind::Cast(b(neg)), Type::Float64);
        let cast_atom = x(KExprKind::Cast(b(c(2))), Type::Decimal(2));
        let lookup = x(KExprKind::Table(0, b(x(KExprKind::Col(3), Type::String))), Type::Int64);
        let round = x(
            KExprKind::Call(ScalarFn::Round, vec![cast_atom, k(Value::Int32(1))]),
            Type::Decimal(1),
        );
        let lt = x(KExprKind::Cmp(CmpOp::Lt, b(cast), b(round)), Type::Bool);
        let ge = x(KExprKind::Cmp(CmpOp::Ge, b(lookup), b(c(1))), Type::Bool);
        let is = x(
            KExprKind::In(
                b(x(KExprKind::Col(3), Type::String)),
                vec![Value::String("a\"b".into()), Value::String("c".into())],
            ),
            Type::Bool,
        );
        let in_sum = x(KExprKind::In(b(sum), vec![Value::Int64(2)]), Type::Bool);
        let t = x(KExprKind::And(vec![]), Type::Bool);
        let f = x(KExprKind::Or(vec![]), Type::Bool);
        let or = x(KExprKind::Or(vec![ge, is, f]), Type::Bool);
        let not = x(KExprKind::Not(b(or)), Type::Bool);
        let not_atom = x(KExprKind::Not(b(x(KExprKind::Col(4), Type::Bool))), Type::Bool);
        x(KExprKind::And(vec![lt, not, in_sum, not_atom, t]), Type::Bool)
    }

    #[test]
    fn the_plan_and_the_messages_write_an_expression_each_in_its_style() {
        let e = every_kind();
        let cols: Vec<String> = ["a", "b", "c", "s", "p"].iter().map(|n| n.to_string()).collect();
        assert_eq!(
            expr_text(&e, &cols, &["rank".to_string()]),
            "(((-((a + 1) * b))::float64) < round(c::decimal(2), 1)) and (!((rank[s] >= b) or (s in (\"a\\\"b\", \"c\")) or (false))) and ((a + 1) in (2)) and (!p) and (true)"
        );
        assert_eq!(
            show_kexpr(&e),
            "((float64(-((c0 + 1) * c1)) < round(decimal(2)(c2), 1)) and !((t0[c3] >= c1) or c3 in (\"a\\\"b\", \"c\") or ()) and (c0 + 1) in (2) and !c4 and ())"
        );
        // Names of arguments that are not there.
        assert_eq!(
            expr_text(&e, &[], &[]),
            "(((-((#0? + 1) * #1?))::float64) < round(#2?::decimal(2), 1)) and (!((table#0?[#3?] >= #1?) or (#3? in (\"a\\\"b\", \"c\")) or (false))) and ((#0? + 1) in (2)) and (!#4?) and (true)"
        );
    }
}
