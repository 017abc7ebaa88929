//! The predicate table and the flattened (disjunction-free) form of rules that the
//! checker lowers into core rules.

use crate::core::{Builtin, Type};
use crate::types::TYPE_NAMES;
use fox_syntax::ast::{AggBinding, Atom, CmpOp, Expr, Formula, Ident, Span};
use fox_syntax::diag::Diagnostic;
use std::collections::HashMap;

/// What the checker knows about a predicate.
#[derive(Clone, Debug)]
pub(crate) struct PredSig {
    pub name: String,
    pub columns: Vec<String>,
    /// Declared types, or inferred ones (`None` until known).
    pub types: Vec<Option<Type>>,
    /// `Some(k)`: functional with `k` key columns.
    pub functional: Option<usize>,
    pub declared: bool,
    /// The declaration, or the first head that defined it.
    pub span: Span,
    /// The `.input` directive reading it.
    pub input: Option<Span>,
    /// Defined by at least one rule or fact.
    pub defined: bool,
    /// Introduced by the checker (negated formulas).
    pub aux: bool,
}

impl PredSig {
    pub fn arity(&self) -> usize {
        self.columns.len()
    }

    /// `edge(x, y)` or `price[p] = v`, for messages.
    pub fn shape_text(&self) -> String {
        match self.functional {
            Some(k) => format!(
                "{}[{}] = {}",
                self.name,
                self.columns.get(..k).unwrap_or_default().join(", "),
                self.columns.get(k).map(String::as_str).unwrap_or("v")
            ),
            None => format!("{}({})", self.name, self.columns.join(", ")),
        }
    }
}

#[derive(Default)]
pub(crate) struct Env {
    pub preds: Vec<PredSig>,
    pub by_name: HashMap<String, usize>,
    /// Names read by an `.input` directive without a declaration: that error has been
    /// reported once, so their uses are not reported again as unknown predicates.
    pub undeclared_inputs: std::collections::HashSet<String>,
}

impl Env {
    pub fn lookup(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    pub fn add(&mut self, sig: PredSig) -> usize {
        let id = self.preds.len();
        self.by_name.insert(sig.name.clone(), id);
        self.preds.push(sig);
        id
    }

    /// The closest known predicate name, for "did you mean" hints.
    pub fn suggest(&self, name: &str) -> Option<String> {
        closest(name, self.preds.iter().filter(|p| !p.aux).map(|p| p.name.as_str()))
    }
}

/// The candidate closest to `name` by edit distance, if close enough to be a likely typo.
pub(crate) fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<String> {
    let len = name.chars().count();
    let limit = (len / 3).max(1);
    candidates
        .filter(|c| *c != name)
        // A one-letter name is no useful suggestion for another one.
        .filter(|c| len > 1 || c.chars().count() > 1)
        .map(|c| (strsim::damerau_levenshtein(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, c)| (*d, c.to_string()))
        .map(|(_, c)| c.to_string())
}

/// How a built-in name is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BuiltinUse {
    /// A predicate (`like`, `prefix`): usable as a body literal, or as a `bool` expression.
    Pred(Builtin),
    /// A function used in expressions.
    Func(Builtin),
    /// `to_float` / `to_int`: conversions, lowered to casts.
    ToFloat,
    ToInt,
}

pub(crate) fn builtin(name: &str) -> Option<BuiltinUse> {
    Some(match name {
        "like" => BuiltinUse::Pred(Builtin::Like),
        "prefix" => BuiltinUse::Pred(Builtin::Prefix),
        "substr" => BuiltinUse::Func(Builtin::Substr),
        "strlen" => BuiltinUse::Func(Builtin::Strlen),
        "concat" => BuiltinUse::Func(Builtin::Concat),
        "year" => BuiltinUse::Func(Builtin::Year),
        "month" => BuiltinUse::Func(Builtin::Month),
        "day" => BuiltinUse::Func(Builtin::Day),
        "abs" => BuiltinUse::Func(Builtin::Abs),
        "round" => BuiltinUse::Func(Builtin::Round),
        "to_float" => BuiltinUse::ToFloat,
        "to_int" => BuiltinUse::ToInt,
        _ => return None,
    })
}

pub(crate) const BUILTIN_FUNCS: &[&str] = &[
    "substr", "strlen", "concat", "year", "month", "day", "abs", "round", "to_float", "to_int", "like", "prefix",
];

/// A body literal of a flattened rule.
#[derive(Clone, Debug)]
pub(crate) enum BLit {
    /// A positive atom, or a built-in predicate call. `functional` for `p[k…] = v`.
    Atom { atom: Atom, functional: bool },
    /// A negated atom or negated built-in predicate; no `_` among its arguments.
    NotAtom { atom: Atom, functional: bool, span: Span },
    /// One comparison of a (split) chain, or an assignment.
    Cmp {
        left: Expr,
        op: CmpOp,
        right: Expr,
        span: Span,
    },
    In {
        expr: Expr,
        list: Vec<Expr>,
        negated: bool,
        span: Span,
    },
    /// The negation of a disjunction of conjunctions of filters (no atoms).
    NotFilters { alts: Vec<Vec<BLit>>, span: Span },
    /// A negated formula that needs an auxiliary predicate. `local_ok`: variables that occur
    /// only inside it are existential (a parenthesised formula); otherwise they are unsafe.
    NegFormula {
        formula: Formula,
        local_ok: bool,
        span: Span,
    },
}

/// A rule with one head and a conjunctive body.
#[derive(Clone, Debug)]
pub(crate) struct FlatRule {
    pub head: usize,
    pub head_args: Vec<Expr>,
    pub lits: Vec<BLit>,
    pub aggs: Option<(Vec<AggBinding>, Span)>,
    pub span: Span,
    /// The rule was introduced for a negated formula.
    pub aux: bool,
}

/// The error for a predicate named like a type (`int32(x) <- …`), if it is one.
pub(crate) fn type_name_error(name: &Ident) -> Option<Diagnostic> {
    TYPE_NAMES.contains(&name.name.as_str()).then(|| {
        Diagnostic::error(
            format!("`{}` is a type and cannot be used as a predicate name", name.name),
            name.span,
        )
        .with_label("a type name")
        .with_help("choose another name")
    })
}
