//! The human-readable form of a plan (`foxc compile --emit ra`).

use std::fmt::Write;

use fox_sema::core::{ArithOp, Builtin, CmpOp, Column, Value};

use crate::ir::*;

/// Renders a plan: its relation variables, then every block with its statements and
/// terminator. Expressions are infix and name the columns they read.
pub fn print_plan(plan: &RaPlan) -> String {
    let p = Printer { plan };
    let mut out = String::new();
    let _ = writeln!(out, "ra plan (version {})", plan.version);
    out.push_str("relations:\n");
    for r in &plan.relations {
        let _ = writeln!(
            out,
            "  {}: {} {}{}",
            r.name,
            p.kind(&r.kind, &r.columns),
            columns(&r.columns),
            props(&r.props, &r.columns)
        );
    }
    for (i, b) in plan.blocks.iter().enumerate() {
        let entry = if plan.entry.0 as usize == i { ", entry" } else { "" };
        let _ = writeln!(out, "block b{i} ({}{entry}):", b.label);
        for s in &b.stmts {
            let _ = writeln!(out, "  {}", p.stmt(s));
        }
        let _ = writeln!(out, "  {}", p.term(&b.term));
    }
    out
}

/// One statement of `plan` as [`print_plan`] renders it, without the schema of the temp
/// it defines.
pub fn print_stmt(plan: &RaPlan, s: &Stmt) -> String {
    let p = Printer { plan };
    match s {
        Stmt::Let { dst, op, .. } => format!("t{} = {}", dst.0, p.op(op)),
        _ => p.stmt(s),
    }
}

/// A block's terminator as [`print_plan`] renders it.
pub fn print_term(plan: &RaPlan, t: &Terminator) -> String {
    Printer { plan }.term(t)
}

struct Printer<'a> {
    plan: &'a RaPlan,
}

impl Printer<'_> {
    fn rel(&self, r: RelId) -> String {
        self.plan
            .relations
            .get(r.0 as usize)
            .map_or_else(|| format!("r{}?", r.0), |r| r.name.clone())
    }

    fn cols(&self, t: TempId) -> &[Column] {
        self.plan.temps.get(t.0 as usize).map_or(&[], |s| s.columns.as_slice())
    }

    fn col(&self, t: TempId, i: usize) -> String {
        self.cols(t).get(i).map_or_else(|| format!("#{i}"), |c| c.name.clone())
    }

    fn kind(&self, k: &RelKind, cols: &[Column]) -> String {
        match k {
            RelKind::Input { file, sep, key, header } => {
                let mut s = format!("input from {} sep {}", quote(file), quote(sep));
                if *header {
                    s.push_str(" header");
                }
                if !key.is_empty() {
                    let cols: Vec<String> = key
                        .iter()
                        .map(|&k| cols.get(k).map_or_else(|| format!("#{k}"), |c| c.name.clone()))
                        .collect();
                    s.push_str(&format!(" key ({})", cols.join(", ")));
                }
                s
            }
            RelKind::Facts => "facts".into(),
            RelKind::Derived => "derived".into(),
            RelKind::Delta { of } => format!("delta of {}", self.rel(*of)),
            RelKind::New { of } => format!("new of {}", self.rel(*of)),
            RelKind::Temp => "temp".into(),
        }
    }

    fn stmt(&self, s: &Stmt) -> String {
        match s {
            Stmt::Let { dst, op, .. } => {
                let schema = self.plan.temps.get(dst.0 as usize).map_or_else(String::new, |s| {
                    format!("{}{}", columns(&s.columns), props(&s.props, &s.columns))
                });
                format!("t{} = {} : {schema}", dst.0, self.op(op))
            }
            Stmt::Store { rel, src } => format!("{} := t{}", self.rel(*rel), src.0),
            Stmt::Merge { into, from } => format!("merge {} into {}", self.rel(*from), self.rel(*into)),
            Stmt::Assign { dst, src } => format!("{} := {}", self.rel(*dst), self.rel(*src)),
            Stmt::Clear { rel } => format!("clear {}", self.rel(*rel)),
            Stmt::Output { rel, src } => format!("output {} from t{}", self.rel(*rel), src.0),
            Stmt::CheckFunctional { src, keys, pred, .. } => {
                let s = if *keys == 1 { "" } else { "s" };
                format!("check {pred} is functional: t{} (key: {keys} column{s})", src.0)
            }
        }
    }

    fn term(&self, t: &Terminator) -> String {
        match t {
            Terminator::Jump(b) => format!("goto b{}", b.0),
            Terminator::Halt => "halt".into(),
            Terminator::LoopIf { nonempty, body, exit } => {
                let rels: Vec<String> = nonempty.iter().map(|r| self.rel(*r)).collect();
                format!("if nonempty({}) goto b{} else b{}", rels.join(", "), body.0, exit.0)
            }
        }
    }

    fn keys(&self, l: TempId, r: TempId, lk: &[usize], rk: &[usize]) -> String {
        if lk.is_empty() {
            return " (cross)".into();
        }
        let parts: Vec<String> = lk
            .iter()
            .zip(rk)
            .map(|(&a, &b)| format!("t{}.{} = t{}.{}", l.0, self.col(l, a), r.0, self.col(r, b)))
            .collect();
        format!(" on {}", parts.join(" and "))
    }

    fn op(&self, op: &Op) -> String {
        match op {
            Op::Scan(r) => format!("scan {}", self.rel(*r)),
            Op::Const(rows) => {
                const SHOWN: usize = 8;
                let mut parts: Vec<String> = rows
                    .iter()
                    .take(SHOWN)
                    .map(|row| {
                        let vs: Vec<String> = row.iter().map(value).collect();
                        format!("({})", vs.join(", "))
                    })
                    .collect();
                if rows.len() > SHOWN {
                    parts.push(format!("… {} more", rows.len() - SHOWN));
                }
                format!("const [{}]", parts.join(", "))
            }
            Op::Select { input, pred } => format!("select t{} where {}", input.0, self.expr(pred, *input, 0)),
            Op::Map { input, exprs } => {
                let parts: Vec<String> = exprs.iter().map(|e| self.expr(e, *input, 0)).collect();
                format!("map t{} [{}]", input.0, parts.join(", "))
            }
            Op::Project { input, cols } => {
                let parts: Vec<String> = cols.iter().map(|&c| self.col(*input, c)).collect();
                format!("project t{} [{}]", input.0, parts.join(", "))
            }
            Op::Join {
                left,
                right,
                left_keys,
                right_keys,
                output,
            } => {
                let outs: Vec<String> = output
                    .iter()
                    .map(|jc| {
                        let t = match jc.side {
                            Side::Left => *left,
                            Side::Right => *right,
                        };
                        format!("t{}.{}", t.0, self.col(t, jc.col))
                    })
                    .collect();
                format!(
                    "join t{}, t{}{} -> [{}]",
                    left.0,
                    right.0,
                    self.keys(*left, *right, left_keys, right_keys),
                    outs.join(", ")
                )
            }
            Op::SemiJoin {
                left,
                right,
                left_keys,
                right_keys,
            } => format!(
                "semijoin t{}, t{}{}",
                left.0,
                right.0,
                self.keys(*left, *right, left_keys, right_keys)
            ),
            Op::AntiJoin {
                left,
                right,
                left_keys,
                right_keys,
            } => format!(
                "antijoin t{}, t{}{}",
                left.0,
                right.0,
                self.keys(*left, *right, left_keys, right_keys)
            ),
            Op::Union(ts) => {
                let parts: Vec<String> = ts.iter().map(|t| format!("t{}", t.0)).collect();
                format!("union {}", parts.join(", "))
            }
            Op::Difference { left, right } => format!("difference t{}, t{}", left.0, right.0),
            Op::Aggregate { input, group, aggs } => {
                let g: Vec<String> = group.iter().map(|&c| self.col(*input, c)).collect();
                let a: Vec<String> = aggs
                    .iter()
                    .map(|a| {
                        let arg = a.arg.as_ref().map_or_else(String::new, |e| self.expr(e, *input, 0));
                        format!("{}({arg})", agg_name(a.func))
                    })
                    .collect();
                format!("aggregate t{} by [{}] [{}]", input.0, g.join(", "), a.join(", "))
            }
            Op::Sort { input, keys } => {
                let k: Vec<String> = keys
                    .iter()
                    .map(|k| {
                        let dir = if k.desc { " desc" } else { "" };
                        format!("{}{dir}", self.col(*input, k.col))
                    })
                    .collect();
                format!("sort t{} by [{}]", input.0, k.join(", "))
            }
            Op::Unique(t) => format!("unique t{}", t.0),
            Op::Limit { input, n } => format!("limit t{} {n}", input.0),
            Op::MultiJoin {
                vars,
                inputs,
                output,
                count,
            } => {
                let var = |v: usize| vars.get(v).map_or_else(|| format!("v{v}"), |c| c.name.clone());
                let order: Vec<String> = (0..vars.len()).map(var).collect();
                let ins: Vec<String> = inputs
                    .iter()
                    .map(|i| {
                        let vs: Vec<String> = i.vars.iter().map(|&v| var(v)).collect();
                        format!("t{}({})", i.src.0, vs.join(", "))
                    })
                    .collect();
                let outs: Vec<String> = output.iter().map(|&v| var(v)).collect();
                let outs = if *count {
                    "count".to_string()
                } else {
                    format!("[{}]", outs.join(", "))
                };
                format!("multijoin [{}] order [{}] -> {outs}", ins.join(", "), order.join(", "))
            }
        }
    }

    /// An expression in infix form; `prec` is the binding strength of the context, so
    /// parentheses appear only where they are needed.
    fn expr(&self, e: &Expr, input: TempId, prec: u8) -> String {
        let paren = |s: String, mine: u8| if mine < prec { format!("({s})") } else { s };
        let list = |es: &[Expr]| es.iter().map(|x| self.expr(x, input, 0)).collect::<Vec<_>>().join(", ");
        match &e.kind {
            ExprKind::Col(i) => self.col(input, *i),
            ExprKind::Const(v) => value(v),
            ExprKind::Cast(a) => format!("{}::{}", self.expr(a, input, 7), e.ty),
            ExprKind::Neg(a) => paren(format!("-{}", self.expr(a, input, 6)), 6),
            ExprKind::Arith(op, a, b) => {
                let (sym, p) = match op {
                    ArithOp::Add | ArithOp::Sub => (op.symbol(), 4),
                    // `*`, `/` and Soufflé's operators (`%`, `^`, `band`, …).
                    _ => (op.symbol(), 5),
                };
                paren(
                    format!("{} {sym} {}", self.expr(a, input, p), self.expr(b, input, p + 1)),
                    p,
                )
            }
            ExprKind::Cmp(op, a, b) => {
                let sym = match op {
                    CmpOp::Eq => "=",
                    CmpOp::Ne => "!=",
                    CmpOp::Lt => "<",
                    CmpOp::Le => "<=",
                    CmpOp::Gt => ">",
                    CmpOp::Ge => ">=",
                };
                paren(
                    format!("{} {sym} {}", self.expr(a, input, 4), self.expr(b, input, 4)),
                    3,
                )
            }
            ExprKind::And(es) if es.is_empty() => "true".into(),
            ExprKind::Or(es) if es.is_empty() => "false".into(),
            ExprKind::And(es) => {
                let parts: Vec<String> = es.iter().map(|x| self.expr(x, input, 2)).collect();
                paren(parts.join(" and "), 1)
            }
            ExprKind::Or(es) => {
                let parts: Vec<String> = es.iter().map(|x| self.expr(x, input, 1)).collect();
                paren(parts.join(" or "), 0)
            }
            ExprKind::Not(a) => paren(format!("not {}", self.expr(a, input, 3)), 2),
            ExprKind::In(a, vs) => {
                let vs: Vec<String> = vs.iter().map(value).collect();
                paren(format!("{} in ({})", self.expr(a, input, 4), vs.join(", ")), 3)
            }
            ExprKind::Call(f, es) => format!("{}({})", builtin_name(*f), list(es)),
        }
    }
}

fn builtin_name(f: Builtin) -> &'static str {
    f.name()
}

fn columns(cols: &[Column]) -> String {
    let parts: Vec<String> = cols.iter().map(|c| format!("{}: {}", c.name, c.ty)).collect();
    format!("({})", parts.join(", "))
}

/// ` sorted` when ordered ascending on all columns, else the sort keys by name; then
/// ` unique`.
fn props(p: &Props, cols: &[Column]) -> String {
    let mut out = String::new();
    if !p.sorted.is_empty() {
        if p.sorted.len() == cols.len() && p.sorted.iter().enumerate().all(|(i, k)| *k == SortKey::asc(i)) {
            out.push_str(" sorted");
        } else {
            let _ = write!(out, " sorted by [{}]", sort_keys(&p.sorted, cols));
        }
    }
    if p.unique {
        out.push_str(" unique");
    }
    out
}

/// Sort keys by column name (`#i` for a column `cols` lacks), `desc` where descending,
/// separated by commas.
pub fn sort_keys(keys: &[SortKey], cols: &[Column]) -> String {
    let names: Vec<String> = keys
        .iter()
        .map(|k| {
            let name = cols
                .get(k.col)
                .map_or_else(|| format!("#{}", k.col), |c| c.name.clone());
            if k.desc {
                format!("{name} desc")
            } else {
                name
            }
        })
        .collect();
    names.join(", ")
}

fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A constant as it is written in LogiQL source.
pub fn value(v: &Value) -> String {
    match v {
        Value::Int32(i) => i.to_string(),
        Value::Int64(i) => i.to_string(),
        Value::Decimal { unscaled, scale } => decimal(*unscaled, *scale),
        Value::Float64(f) => format!("{f:?}"),
        Value::String(s) => quote(s),
        Value::Date(d) => {
            let (y, m, day) = civil_from_days(i64::from(*d));
            format!("date(\"{y:04}-{m:02}-{day:02}\")")
        }
        Value::Bool(b) => b.to_string(),
    }
}

fn decimal(unscaled: i128, scale: u8) -> String {
    let digits = unscaled.unsigned_abs().to_string();
    let sign = if unscaled < 0 { "-" } else { "" };
    let scale = usize::from(scale);
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

/// (year, month, day) of a day number counted from 1970-01-01 (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_print_as_calendar_days() {
        assert_eq!(value(&Value::Date(0)), "date(\"1970-01-01\")");
        assert_eq!(value(&Value::Date(10_471)), "date(\"1998-09-02\")");
        assert_eq!(value(&Value::Date(-1)), "date(\"1969-12-31\")");
        assert_eq!(value(&Value::Date(11_017)), "date(\"2000-03-01\")");
    }

    #[test]
    fn decimals_keep_their_scale() {
        assert_eq!(decimal(6, 2), "0.06");
        assert_eq!(decimal(-150, 2), "-1.50");
        assert_eq!(decimal(1999, 2), "19.99");
        assert_eq!(decimal(-5, 0), "-5");
        assert_eq!(value(&Value::String("a\"b".into())), "\"a\\\"b\"");
    }
}
