//! Bounds on nesting, so that no input can overflow the stack of the parser's actions,
//! of the pretty-printer or of the passes that walk the tree recursively.

use crate::ast::*;
use crate::diag::Diagnostic;
use crate::lexer::{Spanned, Token};

/// The deepest nesting of brackets (`(`, `[`, `agg<<`) plus directly repeated prefix
/// operators (`!`, `-`) that a clause may have.
pub const MAX_NESTING: usize = 256;

/// The deepest expression or formula tree a clause may have (long operator chains such as
/// `a + b + c + …` nest one level per operator).
pub const MAX_EXPR_DEPTH: usize = 1024;

/// Removes every clause that nests deeper than [`MAX_NESTING`], with an error for each.
pub fn limit_nesting(tokens: Vec<Spanned>, diags: &mut Vec<Diagnostic>) -> Vec<Spanned> {
    let mut out: Vec<Spanned> = Vec::with_capacity(tokens.len());
    let mut clause_start = 0;
    let mut depth = 0usize;
    let mut prefix_run = 0usize;
    let mut skipping = false;
    for (l, tok, r) in tokens {
        if skipping {
            if tok == Token::Dot {
                skipping = false;
                depth = 0;
                prefix_run = 0;
                clause_start = out.len();
            }
            continue;
        }
        match tok {
            Token::LParen | Token::LBracket | Token::AggOpen => depth += 1,
            Token::RParen | Token::RBracket | Token::AggClose => depth = depth.saturating_sub(1),
            Token::Dot => depth = 0,
            _ => {}
        }
        prefix_run = if matches!(tok, Token::Bang | Token::Minus) {
            prefix_run + 1
        } else {
            0
        };
        if depth + prefix_run > MAX_NESTING {
            diags.push(
                Diagnostic::error(
                    format!("this clause is nested too deeply (more than {MAX_NESTING} levels)"),
                    Span::new(l, r),
                )
                .with_label("nesting limit reached here")
                .with_help("split the clause into several rules with intermediate predicates"),
            );
            out.truncate(clause_start);
            skipping = true;
            continue;
        }
        let is_dot = tok == Token::Dot;
        out.push((l, tok, r));
        if is_dot {
            clause_start = out.len();
        }
    }
    out
}

/// Removes every item whose tree is deeper than [`MAX_EXPR_DEPTH`], with an error for each.
pub fn limit_depth(items: &mut Vec<Item>, diags: &mut Vec<Diagnostic>) {
    if !items.iter().any(|i| depth_exceeds(i, MAX_EXPR_DEPTH)) {
        return;
    }
    let all = std::mem::take(items);
    for item in all {
        if depth_exceeds(&item, MAX_EXPR_DEPTH) {
            let span = item.span();
            diags.push(
                Diagnostic::error(
                    format!("this clause is nested too deeply (more than {MAX_EXPR_DEPTH} levels)"),
                    Span::new(span.start as usize, (span.start as usize).max(span.end as usize)),
                )
                .with_label("too deep")
                .with_help("split long expressions into several rules with intermediate predicates"),
            );
            drop_iteratively(item);
        } else {
            items.push(item);
        }
    }
}

enum Node<'a> {
    E(&'a Expr),
    F(&'a Formula),
    L(&'a Literal),
}

fn item_roots(item: &Item) -> Vec<Node<'_>> {
    let mut roots = Vec::new();
    if let Item::Rule(rule) = item {
        for h in &rule.heads {
            match &h.kind {
                HeadKind::Relational(args) => roots.extend(args.iter().map(Node::E)),
                HeadKind::Functional { keys, value } => {
                    roots.extend(keys.iter().map(Node::E));
                    roots.push(Node::E(value));
                }
            }
        }
        match &rule.body {
            Some(Body::Formula(f)) => roots.push(Node::F(f)),
            Some(Body::Agg { aggs, body, .. }) => {
                roots.extend(aggs.iter().filter_map(|a| a.arg.as_ref()).map(Node::E));
                roots.push(Node::F(body));
            }
            None => {}
        }
    }
    roots
}

/// Whether the item's tree is deeper than `limit`, computed without recursion.
fn depth_exceeds(item: &Item, limit: usize) -> bool {
    let mut stack: Vec<(Node<'_>, usize)> = item_roots(item).into_iter().map(|n| (n, 1)).collect();
    while let Some((node, d)) = stack.pop() {
        if d > limit {
            return true;
        }
        match node {
            Node::E(e) => match &e.kind {
                ExprKind::Neg(x) => stack.push((Node::E(x), d + 1)),
                ExprKind::Bin(_, a, b) => {
                    stack.push((Node::E(a), d + 1));
                    stack.push((Node::E(b), d + 1));
                }
                ExprKind::Call(_, args) | ExprKind::FuncTerm(_, args) => {
                    stack.extend(args.iter().map(|a| (Node::E(a), d + 1)))
                }
                ExprKind::Var(_) | ExprKind::Anon | ExprKind::Lit(_) => {}
            },
            Node::F(f) => match f {
                Formula::Or(parts, _) | Formula::And(parts, _) => {
                    stack.extend(parts.iter().map(|p| (Node::F(p), d + 1)))
                }
                Formula::Lit(l) => stack.push((Node::L(l), d + 1)),
            },
            Node::L(l) => match l {
                Literal::Atom(a) => stack.extend(a.args.iter().map(|x| (Node::E(x), d + 1))),
                Literal::Not(x, _) => stack.push((Node::L(x), d + 1)),
                Literal::Compare(c) => {
                    stack.push((Node::E(&c.first), d + 1));
                    stack.extend(c.rest.iter().map(|(_, x)| (Node::E(x), d + 1)));
                }
                Literal::In { expr, list, .. } => {
                    stack.push((Node::E(expr), d + 1));
                    stack.extend(list.iter().map(|x| (Node::E(x), d + 1)));
                }
                Literal::Paren(f, _) => stack.push((Node::F(f), d + 1)),
            },
        }
    }
    false
}

/// Drops a tree of any depth without recursion (the derived drop glue recurses).
fn drop_iteratively(item: Item) {
    let mut exprs: Vec<Expr> = Vec::new();
    let mut formulas: Vec<Formula> = Vec::new();
    let mut literals: Vec<Literal> = Vec::new();
    if let Item::Rule(rule) = item {
        for h in rule.heads {
            match h.kind {
                HeadKind::Relational(args) => exprs.extend(args),
                HeadKind::Functional { keys, value } => {
                    exprs.extend(keys);
                    exprs.push(value);
                }
            }
        }
        match rule.body {
            Some(Body::Formula(f)) => formulas.push(f),
            Some(Body::Agg { aggs, body, .. }) => {
                exprs.extend(aggs.into_iter().filter_map(|a| a.arg));
                formulas.push(body);
            }
            None => {}
        }
    }
    loop {
        if let Some(f) = formulas.pop() {
            match f {
                Formula::Or(parts, _) | Formula::And(parts, _) => formulas.extend(parts),
                Formula::Lit(l) => literals.push(l),
            }
        } else if let Some(l) = literals.pop() {
            match l {
                Literal::Atom(a) => exprs.extend(a.args),
                Literal::Not(x, _) => literals.push(*x),
                Literal::Compare(c) => {
                    exprs.push(c.first);
                    exprs.extend(c.rest.into_iter().map(|(_, x)| x));
                }
                Literal::In { expr, list, .. } => {
                    exprs.push(expr);
                    exprs.extend(list);
                }
                Literal::Paren(f, _) => formulas.push(*f),
            }
        } else if let Some(e) = exprs.pop() {
            match e.kind {
                ExprKind::Neg(x) => exprs.push(*x),
                ExprKind::Bin(_, a, b) => {
                    exprs.push(*a);
                    exprs.push(*b);
                }
                ExprKind::Call(_, args) | ExprKind::FuncTerm(_, args) => exprs.extend(args),
                ExprKind::Var(_) | ExprKind::Anon | ExprKind::Lit(_) => {}
            }
        } else {
            break;
        }
    }
}
