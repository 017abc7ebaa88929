//! The canonical pretty-printer: one item per line, ASCII arrows, spaces around binary
//! operators, and only the parentheses needed to keep the tree. Its output parses back to
//! the same tree (spans aside).

use crate::ast::*;
use std::fmt::Write;

/// Prints a whole program, one item per line.
pub fn print_program(p: &Program) -> String {
    let mut out = String::new();
    for item in &p.items {
        write_item(&mut out, item);
        out.push('\n');
    }
    out
}

/// Prints one item, with its final `.` and no newline.
pub fn print_item(item: &Item) -> String {
    let mut out = String::new();
    write_item(&mut out, item);
    out
}

/// Prints an expression.
pub fn print_expr(e: &Expr) -> String {
    let mut out = String::new();
    write_expr(&mut out, e);
    out
}

/// Prints a body formula.
pub fn print_formula(f: &Formula) -> String {
    let mut out = String::new();
    write_formula(&mut out, f);
    out
}

/// Prints a body literal.
pub fn print_literal(l: &Literal) -> String {
    let mut out = String::new();
    write_literal(&mut out, l);
    out
}

/// Quotes a string value as a string literal, escaping `"`, `\`, line breaks and tabs.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn write_item(out: &mut String, item: &Item) {
    match item {
        Item::Decl(d) => {
            out.push_str(&d.pred.name);
            match &d.shape {
                DeclShape::Relational(cols) => {
                    out.push('(');
                    join(out, cols, |o, c| o.push_str(&c.name));
                    out.push(')');
                }
                DeclShape::Functional { keys, value } => {
                    out.push('[');
                    join(out, keys, |o, c| o.push_str(&c.name));
                    out.push_str("] = ");
                    out.push_str(&value.name);
                }
            }
            out.push_str(" ->");
            if !d.types.is_empty() {
                out.push(' ');
            }
            join(out, &d.types, |o, t| {
                let _ = write!(o, "{}({}", t.ty.name, t.var.name);
                if let Some(s) = t.scale {
                    let _ = write!(o, ", {s}");
                }
                o.push(')');
            });
            out.push('.');
        }
        Item::Rule(r) => {
            join(out, &r.heads, write_head);
            if let Some(body) = &r.body {
                out.push_str(" <- ");
                write_body(out, body);
            }
            out.push('.');
        }
        Item::Input(i) => {
            out.push_str(".input ");
            out.push_str(&i.pred.name);
            if let Some((f, _)) = &i.from {
                out.push_str(" from ");
                out.push_str(&quote(f));
            }
            if let Some((s, _)) = &i.sep {
                out.push_str(" sep ");
                out.push_str(&quote(s));
            }
            if i.header.is_some() {
                out.push_str(" header");
            }
            if let Some((cols, _)) = &i.key {
                out.push_str(" key (");
                join(out, cols, |o, c| o.push_str(&c.name));
                out.push(')');
            }
            out.push('.');
        }
        Item::Include(i) => {
            out.push_str(".include ");
            out.push_str(&quote(&i.path.0));
            out.push('.');
        }
        Item::Output(o) => {
            out.push_str(".output ");
            out.push_str(&o.pred.name);
            if !o.order_by.is_empty() {
                out.push_str(" order by ");
                join(out, &o.order_by, |o, k| {
                    o.push_str(&k.column.name);
                    if k.descending {
                        o.push_str(" desc");
                    }
                });
            }
            if let Some((n, _)) = o.limit {
                let _ = write!(out, " limit {n}");
            }
            out.push('.');
        }
    }
}

fn join<T>(out: &mut String, xs: &[T], mut f: impl FnMut(&mut String, &T)) {
    for (i, x) in xs.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        f(out, x);
    }
}

fn write_head(out: &mut String, h: &Head) {
    match &h.kind {
        HeadKind::Relational(args) => write_application(out, &h.pred, args),
        HeadKind::Functional { keys, value } => {
            write_func_term(out, &h.pred, keys);
            out.push_str(" = ");
            write_expr(out, value);
        }
    }
}

fn write_body(out: &mut String, b: &Body) {
    match b {
        Body::Formula(f) => write_formula(out, f),
        Body::Agg { aggs, body, .. } => {
            out.push_str("agg<<");
            join(out, aggs, |o, a| {
                let _ = write!(o, "{} = {}(", a.var.name, a.func.name);
                if let Some(arg) = &a.arg {
                    write_expr(o, arg);
                }
                o.push(')');
            });
            out.push_str(">> ");
            write_formula(out, body);
        }
    }
}

fn write_formula(out: &mut String, f: &Formula) {
    match f {
        Formula::Or(parts, _) => {
            for (i, p) in parts.iter().enumerate() {
                if i > 0 {
                    out.push_str("; ");
                }
                // A parser never nests `Or` directly in `Or`; keep the grouping if a tree does.
                let group = matches!(p, Formula::Or(..));
                write_grouped(out, p, group);
            }
        }
        Formula::And(parts, _) => {
            for (i, p) in parts.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let group = matches!(p, Formula::Or(..) | Formula::And(..));
                write_grouped(out, p, group);
            }
        }
        Formula::Lit(l) => write_literal(out, l),
    }
}

fn write_grouped(out: &mut String, f: &Formula, group: bool) {
    if group {
        out.push('(');
        write_formula(out, f);
        out.push(')');
    } else {
        write_formula(out, f);
    }
}

fn write_literal(out: &mut String, l: &Literal) {
    match l {
        Literal::Atom(a) => write_application(out, &a.pred, &a.args),
        Literal::Not(inner, _) => {
            out.push('!');
            write_literal(out, inner);
        }
        Literal::Compare(c) => {
            write_expr(out, &c.first);
            for (op, e) in &c.rest {
                out.push(' ');
                out.push_str(op.symbol());
                out.push(' ');
                write_expr(out, e);
            }
        }
        Literal::In { expr, list, .. } => {
            write_expr(out, expr);
            out.push_str(" in (");
            join(out, list, write_expr);
            out.push(')');
        }
        Literal::Paren(f, _) => {
            out.push('(');
            write_formula(out, f);
            out.push(')');
        }
    }
}

/// `p(args)`. A predicate or function named `date` applied to one string is printed with a
/// space, so that it does not read back as a date literal.
fn write_application(out: &mut String, name: &Ident, args: &[Expr]) {
    out.push_str(&name.name);
    if name.name == "date"
        && matches!(
            args,
            [Expr {
                kind: ExprKind::Lit(Lit::Str(_)),
                ..
            }]
        )
    {
        out.push(' ');
    }
    out.push('(');
    join(out, args, write_expr);
    out.push(')');
}

fn write_func_term(out: &mut String, name: &Ident, keys: &[Expr]) {
    out.push_str(&name.name);
    out.push('[');
    join(out, keys, write_expr);
    out.push(']');
}

const PREC_SUM: u8 = 1;
const PREC_PROD: u8 = 2;
const PREC_UNARY: u8 = 3;
const PREC_ATOM: u8 = 4;

fn bin_prec(op: BinOp) -> u8 {
    match op {
        BinOp::Add | BinOp::Sub => PREC_SUM,
        BinOp::Mul | BinOp::Div => PREC_PROD,
    }
}

fn is_number(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Lit(Lit::Int(_) | Lit::Decimal(_) | Lit::Float(_)))
}

fn prec(e: &Expr) -> u8 {
    match &e.kind {
        ExprKind::Bin(op, _, _) => bin_prec(*op),
        ExprKind::Neg(_) => PREC_UNARY,
        ExprKind::Lit(Lit::Int(n)) if *n < 0 => PREC_UNARY,
        ExprKind::Lit(Lit::Decimal(s) | Lit::Float(s)) if s.starts_with('-') => PREC_UNARY,
        _ => PREC_ATOM,
    }
}

fn write_paren_if(out: &mut String, e: &Expr, paren: bool) {
    if paren {
        out.push('(');
        write_expr(out, e);
        out.push(')');
    } else {
        write_expr(out, e);
    }
}

fn write_expr(out: &mut String, e: &Expr) {
    match &e.kind {
        ExprKind::Var(name) => out.push_str(name),
        ExprKind::Anon => out.push('_'),
        ExprKind::Lit(lit) => write_lit(out, lit),
        ExprKind::Neg(inner) => {
            out.push('-');
            // `-(7)` stays a negation of 7; `-7` would read back as the literal -7.
            write_paren_if(out, inner, prec(inner) < PREC_UNARY || is_number(inner));
        }
        ExprKind::Bin(op, a, b) => {
            let p = bin_prec(*op);
            write_paren_if(out, a, prec(a) < p);
            out.push(' ');
            out.push_str(op.symbol());
            out.push(' ');
            write_paren_if(out, b, prec(b) <= p);
        }
        ExprKind::Call(f, args) => write_application(out, f, args),
        ExprKind::FuncTerm(p, keys) => write_func_term(out, p, keys),
    }
}

fn write_lit(out: &mut String, lit: &Lit) {
    match lit {
        Lit::Int(n) => {
            let _ = write!(out, "{n}");
        }
        Lit::Decimal(s) | Lit::Float(s) => out.push_str(s),
        Lit::Str(s) => out.push_str(&quote(s)),
        Lit::Date(d) => {
            let _ = write!(out, "date(\"{d}\")");
        }
        Lit::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
    }
}
