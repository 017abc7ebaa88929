//! The predicate table and the flattened (disjunction-free) form of rules that the
//! checker lowers into core rules.

use crate::core::{ArithOp, Builtin, Type};
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
    /// The names of `preds[..n]` that are not auxiliary, for [`Env::suggest`]; extended
    /// with the predicates added since when it is asked.
    names: std::cell::RefCell<(usize, NameIndex)>,
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

    /// The closest known predicate name, for "did you mean" hints: what [`closest`] picks
    /// among the predicates that are not auxiliary.
    pub fn suggest(&self, name: &str) -> Option<String> {
        let mut names = self.names.borrow_mut();
        let (seen, index) = &mut *names;
        for p in self.preds.get(*seen..).unwrap_or_default() {
            if !p.aux {
                index.insert(&p.name);
            }
        }
        *seen = self.preds.len();
        index.closest(name)
    }
}

/// The candidate closest to `name` by edit distance, if close enough to be a likely typo.
pub(crate) fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<String> {
    let len = name.chars().count();
    let limit = typo_limit(len);
    candidates
        .filter(|c| *c != name)
        // A one-letter name is no useful suggestion for another one.
        .filter(|c| len > 1 || c.chars().count() > 1)
        .map(|c| (strsim::damerau_levenshtein(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, c)| (*d, c.to_string()))
        .map(|(_, c)| c.to_string())
}

/// The largest edit distance at which a name of `len` characters is taken for a typo.
fn typo_limit(len: usize) -> usize {
    (len / 3).max(1)
}

/// A set of names as a trie, to find the names within [`closest`]'s distance of a name
/// without comparing it with every one.
#[derive(Debug, Default)]
pub(crate) struct NameIndex {
    /// Node 0 is the root.
    nodes: Vec<TrieNode>,
}

/// A node of [`NameIndex`]: its children by character (sorted), and the name ending there.
type TrieNode = (Vec<(char, usize)>, Option<String>);

impl NameIndex {
    pub fn insert(&mut self, name: &str) {
        if self.nodes.is_empty() {
            self.nodes.push((Vec::new(), None));
        }
        let mut at = 0;
        for ch in name.chars() {
            at = match self.nodes[at].0.binary_search_by_key(&ch, |c| c.0) {
                Ok(k) => self.nodes[at].0[k].1,
                Err(k) => {
                    let id = self.nodes.len();
                    self.nodes.push((Vec::new(), None));
                    self.nodes[at].0.insert(k, (ch, id));
                    id
                }
            };
        }
        self.nodes[at].1 = Some(name.to_string());
    }

    /// What [`closest`] picks among the names, without comparing `name` with every one.
    ///
    /// The distance is at least `max(|a|, |b|) - LCS(a, b)`: each edit touches at most one
    /// character of either side, and the characters no edit touches are a common
    /// subsequence. So a name with prefix `p` is at least `min over i of max(i, |p|) -
    /// LCS(name[..i], p)` away (its rest adds at most as much to the common subsequence as
    /// to its length). The walk down the trie keeps the row of `LCS(name[..i], p)` and
    /// visits prefixes in increasing order of that bound, computing the distance of the
    /// names it meets, until the bound exceeds the best distance found (or the limit).
    pub fn closest(&self, name: &str) -> Option<String> {
        use std::cmp::Reverse;
        let q: Vec<char> = name.chars().collect();
        let limit = typo_limit(q.len());
        if self.nodes.is_empty() {
            return None;
        }
        let bound = |row: &[usize], depth: usize| (0..row.len()).map(|i| i.max(depth) - row[i]).min().unwrap_or(0);
        let mut best: Option<(usize, String)> = None;
        let mut heap = std::collections::BinaryHeap::new();
        heap.push(Reverse((0, 0, 0, vec![0; q.len() + 1])));
        while let Some(Reverse((lb, node, depth, row))) = heap.pop() {
            let worst = best.as_ref().map_or(limit, |b| b.0);
            if lb > worst {
                break;
            }
            if let Some(c) = &self.nodes[node].1 {
                // The bound of this name itself.
                let own = q.len().max(depth) - row[q.len()];
                if own <= worst && c != name && (q.len() > 1 || depth > 1) {
                    let d = strsim::damerau_levenshtein(name, c);
                    if d <= limit && best.as_ref().is_none_or(|(bd, b)| (d, c) < (*bd, b)) {
                        best = Some((d, c.clone()));
                    }
                }
            }
            let worst = best.as_ref().map_or(limit, |b| b.0);
            for &(ch, child) in &self.nodes[node].0 {
                let mut next = vec![0; q.len() + 1];
                for i in 1..=q.len() {
                    next[i] = if q[i - 1] == ch {
                        row[i - 1] + 1
                    } else {
                        next[i - 1].max(row[i])
                    };
                }
                let b = bound(&next, depth + 1);
                if b <= worst {
                    heap.push(Reverse((b, child, depth + 1, next)));
                }
            }
        }
        best.map(|(_, c)| c)
    }
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
    /// An operator of Soufflé's on two integers (`souffle:mod`, `souffle:band`, …).
    Arith(ArithOp),
    /// Soufflé's `min`/`max` of two or more operands of one type (`souffle:min`, …).
    MinMax(Builtin),
    /// Soufflé's conversions `souffle:to_number`, `souffle:to_unsigned` (of a string:
    /// parsing; of a number: `to_int`) and `souffle:to_string` (of an integer).
    Convert(Builtin),
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
        // Soufflé's operators and functors, which its front end lowers to these names
        // (not part of LogiQL: the plain names would shadow user predicates).
        "souffle:mod" => BuiltinUse::Arith(ArithOp::Rem),
        "souffle:pow" => BuiltinUse::Arith(ArithOp::Pow),
        "souffle:band" => BuiltinUse::Arith(ArithOp::BitAnd),
        "souffle:bor" => BuiltinUse::Arith(ArithOp::BitOr),
        "souffle:bxor" => BuiltinUse::Arith(ArithOp::BitXor),
        "souffle:bshl" => BuiltinUse::Arith(ArithOp::Shl),
        "souffle:bshr" => BuiltinUse::Arith(ArithOp::Shr),
        "souffle:bshru" => BuiltinUse::Arith(ArithOp::ShrU),
        "souffle:land" => BuiltinUse::Arith(ArithOp::LogAnd),
        "souffle:lor" => BuiltinUse::Arith(ArithOp::LogOr),
        "souffle:lxor" => BuiltinUse::Arith(ArithOp::LogXor),
        "souffle:bnot" => BuiltinUse::Func(Builtin::BitNot),
        "souffle:lnot" => BuiltinUse::Func(Builtin::LogNot),
        "souffle:unsigned" => BuiltinUse::Func(Builtin::Unsigned),
        "souffle:min" => BuiltinUse::MinMax(Builtin::Min),
        "souffle:max" => BuiltinUse::MinMax(Builtin::Max),
        "souffle:to_number" => BuiltinUse::Convert(Builtin::ToNumber),
        "souffle:to_unsigned" => BuiltinUse::Convert(Builtin::ToUnsigned),
        "souffle:to_string" => BuiltinUse::Convert(Builtin::ToString),
        "souffle:match" => BuiltinUse::Pred(Builtin::Regex),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_index_picks_what_comparing_with_every_name_picks() {
        let mut seed = 0x51_7cc1_b727_220au64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        let word = |next: &mut dyn FnMut(u64) -> u64| -> String {
            let len = next(10);
            (0..len).map(|_| ['a', 'b', 'c', 'd', 'é'][next(5) as usize]).collect()
        };
        let mut found = 0;
        for _ in 0..6 {
            let names: Vec<String> = (0..120).map(|_| word(&mut next)).collect();
            let mut index = NameIndex::default();
            names.iter().for_each(|n| index.insert(n));
            for _ in 0..120 {
                let q = word(&mut next);
                let want = closest(&q, names.iter().map(String::as_str));
                assert_eq!(index.closest(&q), want, "{q}");
                let env = Env::default();
                for n in &names {
                    env.names.borrow_mut().1.insert(n);
                }
                env.names.borrow_mut().0 = 0;
                assert_eq!(env.suggest(&q), want);
                found += usize::from(want.is_some());
            }
        }
        assert!(found > 300, "{found}");
    }
}
