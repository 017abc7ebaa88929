//! A readable text form of the typed core, for snapshots and `foxc compile --emit core`.
//!
//! ```text
//! pred edge(x: int32, y: int32) input
//! input edge from "edge.csv" sep ","
//! stratum 0 (recursive): path
//!   path(x:int32, z:int32) <- path(x, y:int32), edge(y, z).
//! output path
//! ```
//! Each variable is annotated with its type where it first occurs in a rule (head first).

use crate::core::{
    AggFunc, ArithOp, CExpr, CExprKind, CmpOp, CoreLit, CoreProgram, CoreRule, PredId, Term, Value, VarId,
};
use crate::types::civil_from_days;
use fox_syntax::pretty::quote;
use std::fmt::Write;

/// Prints a core program: predicates, inputs, strata with their facts and rules, outputs.
pub fn print_core(p: &CoreProgram) -> String {
    let mut out = String::new();
    for pred in &p.preds {
        let cols: Vec<String> = pred.columns.iter().map(|c| format!("{}: {}", c.name, c.ty)).collect();
        let shape = match pred.functional_keys {
            Some(k) if k < cols.len() => format!(
                "{}[{}] = {}",
                pred.name,
                cols.get(..k).unwrap_or_default().join(", "),
                cols.get(k).map_or("", String::as_str)
            ),
            _ => format!("{}({})", pred.name, cols.join(", ")),
        };
        let _ = writeln!(out, "pred {shape}{}", if pred.input { " input" } else { "" });
    }
    for i in &p.inputs {
        let _ = writeln!(
            out,
            "input {} from {} sep {}{}",
            pred_name(p, i.pred),
            quote(&i.file),
            quote(&i.sep),
            if i.header { " header" } else { "" }
        );
    }
    for (n, s) in p.strata.iter().enumerate() {
        let names: Vec<&str> = s.preds.iter().map(|&id| pred_name(p, id)).collect();
        let _ = writeln!(
            out,
            "stratum {n}{}: {}",
            if s.recursive { " (recursive)" } else { "" },
            names.join(", ")
        );
        for f in &s.facts {
            let vals: Vec<String> = f.values.iter().map(value).collect();
            let _ = writeln!(out, "  {}({}).", pred_name(p, f.pred), vals.join(", "));
        }
        for r in &s.rules {
            let _ = writeln!(out, "  {}", rule(p, r));
        }
    }
    for o in &p.outputs {
        let mut line = format!("output {}", pred_name(p, o.pred));
        if !o.order_by.is_empty() {
            let cols = p.preds.get(o.pred.0 as usize).map(|x| &x.columns);
            let keys: Vec<String> = o
                .order_by
                .iter()
                .map(|(c, desc)| {
                    let name = cols.and_then(|cs| cs.get(*c)).map_or("?", |c| c.name.as_str());
                    if *desc {
                        format!("{name} desc")
                    } else {
                        name.to_string()
                    }
                })
                .collect();
            let _ = write!(line, " order by {}", keys.join(", "));
        }
        if let Some(l) = o.limit {
            let _ = write!(line, " limit {l}");
        }
        let _ = writeln!(out, "{line}");
    }
    out
}

fn pred_name(p: &CoreProgram, id: PredId) -> &str {
    p.preds.get(id.0 as usize).map_or("?", |x| x.name.as_str())
}

struct RulePrinter<'a> {
    rule: &'a CoreRule,
    seen: Vec<bool>,
}

impl RulePrinter<'_> {
    fn var(&mut self, v: VarId) -> String {
        let i = v.0 as usize;
        let Some(info) = self.rule.vars.get(i) else {
            return format!("?{i}");
        };
        match self.seen.get_mut(i) {
            Some(s) if !*s => {
                *s = true;
                format!("{}:{}", info.name, info.ty)
            }
            _ => info.name.clone(),
        }
    }

    fn term(&mut self, t: &Term) -> String {
        match t {
            Term::Var(v) => self.var(*v),
            Term::Const(c) => value(c),
        }
    }

    fn terms(&mut self, ts: &[Term]) -> String {
        ts.iter().map(|t| self.term(t)).collect::<Vec<_>>().join(", ")
    }

    fn expr(&mut self, e: &CExpr, min_prec: u8) -> String {
        let (prec, s) = match &e.kind {
            CExprKind::Var(v) => (9, self.var(*v)),
            CExprKind::Const(c) => (9, value(c)),
            CExprKind::Cast(x) => (9, format!("cast<{}>({})", e.ty, self.expr(x, 0))),
            CExprKind::Neg(x) => (8, format!("-{}", self.expr(x, 8))),
            CExprKind::Arith(op, a, b) => match op.function_name() {
                Some(f) => (9, format!("{f}({}, {})", self.expr(a, 0), self.expr(b, 0))),
                None => {
                    let p = if matches!(op, ArithOp::Add | ArithOp::Sub) {
                        6
                    } else {
                        7
                    };
                    (
                        p,
                        format!("{} {} {}", self.expr(a, p), op.symbol(), self.expr(b, p + 1)),
                    )
                }
            },
            CExprKind::Cmp(op, a, b) => {
                let sym = match op {
                    CmpOp::Eq => "=",
                    CmpOp::Ne => "!=",
                    CmpOp::Lt => "<",
                    CmpOp::Le => "<=",
                    CmpOp::Gt => ">",
                    CmpOp::Ge => ">=",
                };
                (5, format!("{} {sym} {}", self.expr(a, 6), self.expr(b, 6)))
            }
            CExprKind::And(xs) => (2, xs.iter().map(|x| self.expr(x, 3)).collect::<Vec<_>>().join(", ")),
            CExprKind::Or(xs) => (1, xs.iter().map(|x| self.expr(x, 2)).collect::<Vec<_>>().join("; ")),
            CExprKind::Not(x) => (4, format!("!{}", self.expr(x, 9))),
            CExprKind::In(x, vs) => (
                5,
                format!(
                    "{} in ({})",
                    self.expr(x, 6),
                    vs.iter().map(value).collect::<Vec<_>>().join(", ")
                ),
            ),
            CExprKind::Call(b, args) => {
                let name = b.name();
                let args: Vec<String> = args.iter().map(|a| self.expr(a, 0)).collect();
                (9, format!("{name}({})", args.join(", ")))
            }
        };
        if prec < min_prec {
            format!("({s})")
        } else {
            s
        }
    }
}

fn rule(p: &CoreProgram, r: &CoreRule) -> String {
    let mut pr = RulePrinter {
        rule: r,
        seen: vec![false; r.vars.len()],
    };
    let head = format!("{}({})", pred_name(p, r.head), pr.terms(&r.head_args));
    let mut parts = Vec::new();
    for lit in &r.body {
        parts.push(match lit {
            CoreLit::Atom { pred, args, .. } => format!("{}({})", pred_name(p, *pred), pr.terms(args)),
            CoreLit::NotAtom { pred, args, .. } => format!("!{}({})", pred_name(p, *pred), pr.terms(args)),
            CoreLit::Assign { var, expr, .. } => {
                let rhs = pr.expr(expr, 0);
                format!("{} = {rhs}", pr.var(*var))
            }
            CoreLit::Filter { cond, .. } => pr.expr(cond, 3),
        });
    }
    let body = parts.join(", ");
    match &r.aggs {
        Some(aggs) => {
            let specs: Vec<String> = aggs
                .iter()
                .map(|a| {
                    let f = match a.func {
                        AggFunc::Sum => "sum",
                        AggFunc::Count => "count",
                        AggFunc::Min => "min",
                        AggFunc::Max => "max",
                        AggFunc::Avg => "avg",
                    };
                    let arg = a.arg.as_ref().map(|e| pr.expr(e, 0)).unwrap_or_default();
                    format!("{} = {f}({arg})", pr.var(a.var))
                })
                .collect();
            format!("{head} <- agg<<{}>> {body}.", specs.join(", "))
        }
        None if body.is_empty() => format!("{head}."),
        None => format!("{head} <- {body}."),
    }
}

/// A constant as LogiQL source.
pub(crate) fn value(v: &Value) -> String {
    match v {
        Value::Int32(i) => i.to_string(),
        Value::Int64(i) => i.to_string(),
        Value::Decimal { unscaled, scale } => {
            let digits = unscaled.unsigned_abs().to_string();
            let s = usize::from(*scale);
            let padded = format!("{digits:0>width$}", width = s + 1);
            let (int, frac) = padded.split_at(padded.len() - s);
            let sign = if *unscaled < 0 { "-" } else { "" };
            if s == 0 {
                format!("{sign}{int}.0")
            } else {
                format!("{sign}{int}.{frac}")
            }
        }
        Value::Float64(f) => {
            let s = format!("{f:?}");
            format!("{s}f")
        }
        Value::String(s) => quote(s),
        Value::Date(d) => {
            let (y, m, dd) = civil_from_days(i64::from(*d));
            format!("date(\"{y:04}-{m:02}-{dd:02}\")")
        }
        Value::Bool(b) => b.to_string(),
    }
}
