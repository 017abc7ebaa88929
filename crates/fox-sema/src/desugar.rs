//! Desugaring of body formulas into disjunctive normal form: disjunctions distribute into
//! alternatives, comparison chains split into pairs, negations are pushed to literals.

use crate::env::{builtin, BLit, BuiltinUse};
use fox_syntax::ast::{Atom, CmpOp, Compare, Expr, ExprKind, Formula, Literal, Span};
use fox_syntax::diag::Diagnostic;

/// The most alternatives a body may distribute into.
const MAX_ALTERNATIVES: usize = 1024;

/// The alternatives (conjunctions) of a formula.
pub(crate) fn dnf(f: &Formula) -> Result<Vec<Vec<BLit>>, Diagnostic> {
    match f {
        Formula::Or(fs, _) => {
            let mut out = Vec::new();
            for f in fs {
                out.extend(dnf(f)?);
                check_size(out.len(), f)?;
            }
            Ok(out)
        }
        Formula::And(fs, span) => {
            let mut acc: Vec<Vec<BLit>> = vec![Vec::new()];
            for f in fs {
                let mut alts = dnf(f)?;
                if acc.len().saturating_mul(alts.len()) > MAX_ALTERNATIVES {
                    return Err(too_many(*span));
                }
                if let [one] = alts.as_mut_slice() {
                    // A conjunct without disjunction extends every alternative in place
                    // (copying the alternatives at every conjunct would be quadratic).
                    let one = std::mem::take(one);
                    if let Some((last, rest)) = acc.split_last_mut() {
                        for a in rest {
                            a.extend(one.iter().cloned());
                        }
                        last.extend(one);
                    }
                    continue;
                }
                let mut next = Vec::with_capacity(acc.len() * alts.len());
                for a in &acc {
                    for b in &alts {
                        let mut c = a.clone();
                        c.extend(b.iter().cloned());
                        next.push(c);
                    }
                }
                acc = next;
            }
            Ok(acc)
        }
        Formula::Lit(l) => dnf_lit(l),
    }
}

fn check_size(n: usize, f: &Formula) -> Result<(), Diagnostic> {
    if n > MAX_ALTERNATIVES {
        Err(too_many(formula_span(f)))
    } else {
        Ok(())
    }
}

fn too_many(span: Span) -> Diagnostic {
    Diagnostic::error(
        format!("this body expands into more than {MAX_ALTERNATIVES} alternatives"),
        span,
    )
    .with_label("too many disjunctions")
    .with_help("split the rule into several rules, or introduce helper predicates for the disjunctions")
}

pub(crate) fn formula_span(f: &Formula) -> Span {
    match f {
        Formula::Or(_, s) | Formula::And(_, s) => *s,
        Formula::Lit(l) => literal_span(l),
    }
}

pub(crate) fn literal_span(l: &Literal) -> Span {
    match l {
        Literal::Atom(a) => a.span,
        Literal::Not(_, s) | Literal::Paren(_, s) => *s,
        Literal::Compare(c) => c.span,
        Literal::In { span, .. } => *span,
    }
}

fn dnf_lit(l: &Literal) -> Result<Vec<Vec<BLit>>, Diagnostic> {
    Ok(match l {
        Literal::Atom(a) => vec![vec![BLit::Atom {
            atom: a.clone(),
            functional: false,
        }]],
        Literal::Compare(c) => vec![split_chain(c)],
        Literal::In { expr, list, span } => vec![vec![BLit::In {
            expr: expr.clone(),
            list: list.clone(),
            negated: false,
            span: *span,
        }]],
        Literal::Paren(f, _) => dnf(f)?,
        Literal::Not(inner, span) => negate(inner, *span)?,
    })
}

/// `a < b < c` → `a < b`, `b < c`.
fn split_chain(c: &Compare) -> Vec<BLit> {
    let mut out = Vec::new();
    let mut prev = &c.first;
    for (op, e) in &c.rest {
        out.push(BLit::Cmp {
            left: prev.clone(),
            op: *op,
            right: e.clone(),
            span: if c.rest.len() == 1 {
                c.span
            } else {
                prev.span.to(e.span)
            },
        });
        prev = e;
    }
    out
}

/// The negation of one literal, as alternatives (a single literal unless it is `!!f`).
fn negate(inner: &Literal, span: Span) -> Result<Vec<Vec<BLit>>, Diagnostic> {
    match inner {
        Literal::Not(x, _) => dnf_lit(x),
        _ => Ok(vec![vec![negate_single(inner, span)?]]),
    }
}

fn negate_single(inner: &Literal, span: Span) -> Result<BLit, Diagnostic> {
    match inner {
        Literal::Not(x, _) => Ok(BLit::NegFormula {
            formula: Formula::Lit(Literal::Not(x.clone(), span)),
            local_ok: true,
            span,
        }),
        Literal::In { expr, list, span: s } => Ok(BLit::In {
            expr: expr.clone(),
            list: list.clone(),
            negated: true,
            span: s.to(span),
        }),
        Literal::Atom(a) => Ok(negate_atom(a, false, span)),
        Literal::Compare(c) => {
            if let Some((atom, true)) = functional_compare(c) {
                return Ok(negate_atom(&atom, true, span));
            }
            let alts = vec![split_chain(c)];
            Ok(negate_alts(alts, Formula::Lit(inner.clone()), false, span))
        }
        Literal::Paren(f, _) => {
            let alts = dnf(f)?;
            if let [conj] = alts.as_slice() {
                if let [BLit::Atom { atom, functional }] = conj.as_slice() {
                    return Ok(negate_atom(atom, *functional, span));
                }
            }
            Ok(negate_alts(alts, (**f).clone(), true, span))
        }
    }
}

fn negate_atom(a: &Atom, functional: bool, span: Span) -> BLit {
    let has_anon = a.args.iter().any(|e| matches!(e.kind, ExprKind::Anon));
    if has_anon && !is_builtin_pred(&a.pred.name) {
        let formula = if functional {
            Formula::Lit(Literal::Compare(functional_to_compare(a)))
        } else {
            Formula::Lit(Literal::Atom(a.clone()))
        };
        BLit::NegFormula {
            formula,
            local_ok: false,
            span,
        }
    } else {
        BLit::NotAtom {
            atom: a.clone(),
            functional,
            span,
        }
    }
}

/// Rebuilds `p[k…] = v` from its atom form.
fn functional_to_compare(a: &Atom) -> Compare {
    let (keys, value) = match a.args.split_last() {
        Some((v, ks)) => (ks.to_vec(), v.clone()),
        None => (
            Vec::new(),
            Expr {
                kind: ExprKind::Anon,
                span: a.span,
            },
        ),
    };
    Compare {
        first: Expr {
            kind: ExprKind::FuncTerm(a.pred.clone(), keys),
            span: a.pred.span.to(a.span),
        },
        rest: vec![(CmpOp::Eq, value)],
        span: a.span,
    }
}

fn negate_alts(alts: Vec<Vec<BLit>>, formula: Formula, local_ok: bool, span: Span) -> BLit {
    if alts.iter().flatten().all(is_filter) {
        BLit::NotFilters { alts, span }
    } else {
        BLit::NegFormula {
            formula,
            local_ok,
            span,
        }
    }
}

/// A literal that only tests bound values (no atom, no functional term).
fn is_filter(l: &BLit) -> bool {
    match l {
        BLit::Atom { atom, .. } | BLit::NotAtom { atom, .. } => {
            is_builtin_pred(&atom.pred.name) && atom.args.iter().all(|e| !has_functerm(e))
        }
        BLit::Cmp { left, right, .. } => !has_functerm(left) && !has_functerm(right),
        BLit::In { expr, list, .. } => !has_functerm(expr) && list.iter().all(|e| !has_functerm(e)),
        BLit::NotFilters { .. } => true,
        BLit::NegFormula { .. } => false,
    }
}

fn is_builtin_pred(name: &str) -> bool {
    matches!(builtin(name), Some(BuiltinUse::Pred(_)))
}

pub(crate) fn has_functerm(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::FuncTerm(..) => true,
        ExprKind::Neg(x) => has_functerm(x),
        ExprKind::Bin(_, a, b) => has_functerm(a) || has_functerm(b),
        ExprKind::Call(_, args) => args.iter().any(has_functerm),
        ExprKind::Var(_) | ExprKind::Anon | ExprKind::Lit(_) => false,
    }
}

/// `p[k…] = e` or `e = p[k…]` as the atom `p(k…, e)`; the flag says whether it was a
/// single `=` with a functional term on one side.
pub(crate) fn functional_compare(c: &Compare) -> Option<(Atom, bool)> {
    let [(CmpOp::Eq, right)] = c.rest.as_slice() else {
        return None;
    };
    let (ft, other) = match (&c.first.kind, &right.kind) {
        (ExprKind::FuncTerm(..), _) => (&c.first, right),
        (_, ExprKind::FuncTerm(..)) => (right, &c.first),
        _ => return None,
    };
    let ExprKind::FuncTerm(pred, keys) = &ft.kind else {
        return None;
    };
    let mut args = keys.clone();
    args.push(other.clone());
    Some((
        Atom {
            pred: pred.clone(),
            args,
            span: c.span,
        },
        true,
    ))
}

/// Names of the variables of an expression with the span of each occurrence.
pub(crate) fn expr_vars<'a>(e: &'a Expr, out: &mut Vec<(&'a str, Span)>) {
    match &e.kind {
        ExprKind::Var(v) => out.push((v.as_str(), e.span)),
        ExprKind::Neg(x) => expr_vars(x, out),
        ExprKind::Bin(_, a, b) => {
            expr_vars(a, out);
            expr_vars(b, out);
        }
        ExprKind::Call(_, args) | ExprKind::FuncTerm(_, args) => args.iter().for_each(|a| expr_vars(a, out)),
        ExprKind::Anon | ExprKind::Lit(_) => {}
    }
}

/// The variables of a flattened literal.
pub(crate) fn blit_vars<'a>(l: &'a BLit, out: &mut Vec<(&'a str, Span)>) {
    match l {
        BLit::Atom { atom, .. } | BLit::NotAtom { atom, .. } => atom.args.iter().for_each(|e| expr_vars(e, out)),
        BLit::Cmp { left, right, .. } => {
            expr_vars(left, out);
            expr_vars(right, out);
        }
        BLit::In { expr, list, .. } => {
            expr_vars(expr, out);
            list.iter().for_each(|e| expr_vars(e, out));
        }
        BLit::NotFilters { alts, .. } => alts.iter().flatten().for_each(|l| blit_vars(l, out)),
        BLit::NegFormula { formula, .. } => formula_vars(formula, out),
    }
}

pub(crate) fn formula_vars<'a>(f: &'a Formula, out: &mut Vec<(&'a str, Span)>) {
    match f {
        Formula::Or(fs, _) | Formula::And(fs, _) => fs.iter().for_each(|f| formula_vars(f, out)),
        Formula::Lit(l) => literal_vars(l, out),
    }
}

fn literal_vars<'a>(l: &'a Literal, out: &mut Vec<(&'a str, Span)>) {
    match l {
        Literal::Atom(a) => a.args.iter().for_each(|e| expr_vars(e, out)),
        Literal::Not(x, _) => literal_vars(x, out),
        Literal::Compare(c) => {
            expr_vars(&c.first, out);
            c.rest.iter().for_each(|(_, e)| expr_vars(e, out));
        }
        Literal::In { expr, list, .. } => {
            expr_vars(expr, out);
            list.iter().for_each(|e| expr_vars(e, out));
        }
        Literal::Paren(f, _) => formula_vars(f, out),
    }
}
