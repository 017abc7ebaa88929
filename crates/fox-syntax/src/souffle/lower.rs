//! Lowering a Soufflé program to Fox's syntax tree, which `fox-sema` checks and lowers as
//! it does a LogiQL program.
//!
//! - Types: `number` and `unsigned` become `int64`, `float` `float64`, `symbol` `string`;
//!   a declared type (`.type T <: number`, `.type T = A | B`) is its base type.
//! - Every relation must be declared (`fox-sema` would infer an undeclared one; Soufflé
//!   does not).
//! - An aggregate `f e : { body }` inside a clause becomes an auxiliary aggregation
//!   predicate `souffle:aggN(g…, r)`, grouped by the variables `g` the aggregate shares
//!   with the rest of its clause, and the clause reads it. When a group variable is not
//!   bound by a positive atom of the aggregate's body, the body also reads a domain
//!   predicate `souffle:domN(g…)` computed from the rest of the clause. `count` and `sum`
//!   of no bindings are 0 in Soufflé: for them the clause is also emitted with
//!   `!souffle:aggN(g…, _)` and the result 0.
//! - Functors map to Fox's built-ins (`cat` → `concat`, `substr` 0-based → 1-based,
//!   `contains` with a constant first argument → `like`); Soufflé's own operators and
//!   functors (`%`, `^`, `band`, …, `min`, `max`, `to_number`, `to_string`,
//!   `to_unsigned`) to the `souffle:…` functions of `fox-sema` (`souffle:mod`,
//!   `souffle:band`, …), which LogiQL does not name; the others are refused with a
//!   located "not supported in Fox yet".

use super::ast::*;
use super::{components, records, regex, OutShape};
use super::{SouffleInput, SouffleIo, SouffleOutput};
use crate::ast::{
    AggBinding, Atom, BinOp, Body, CmpOp, Compare, Decl, DeclShape, Expr, ExprKind, Formula, Head, HeadKind, Ident,
    InputDirective, Item, Lit, Literal, OutputDirective, Program, Rule, Span, TypeAtom,
};
use crate::diag::Diagnostic;
use std::collections::{BTreeMap, HashMap, HashSet};

/// A Soufflé base type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Base {
    Number,
    Unsigned,
    Float,
    Symbol,
}

impl Base {
    fn fox(self) -> &'static str {
        match self {
            Base::Number | Base::Unsigned => "int64",
            Base::Float => "float64",
            Base::Symbol => "string",
        }
    }
}

struct RelInfo {
    columns: Vec<(String, Base)>,
    /// The relation has clauses (facts or rules) or is an `eqrel`: an `.input` of it is
    /// read into an auxiliary relation that a rule copies into it.
    defined: bool,
}

pub struct Lowerer {
    pub diags: Vec<Diagnostic>,
    rels: HashMap<String, RelInfo>,
    items: Vec<Item>,
    io: SouffleIo,
    /// The attribute shapes of the relations with a record attribute (`records::expand`).
    shapes: HashMap<String, Vec<OutShape>>,
    counter: usize,
    /// The types of the variables of the clause being lowered, from the columns they
    /// stand in (positive atoms and heads).
    var_types: HashMap<String, Base>,
    /// The type the expression being lowered takes from where it stands (a column, the
    /// other side of a comparison), when known.
    expect: Option<Base>,
}

pub fn lower(items: Vec<SItem>) -> (Program, SouffleIo, Vec<Diagnostic>) {
    let mut l = Lowerer {
        diags: Vec::new(),
        rels: HashMap::new(),
        items: Vec::new(),
        io: SouffleIo::default(),
        shapes: HashMap::new(),
        counter: 0,
        var_types: HashMap::new(),
        expect: None,
    };
    let items = components::expand(items, &mut l.diags);
    let (items, shapes) = records::expand(items, &mut l.diags);
    l.shapes = shapes;
    let types = l.types(&items);
    for it in &items {
        if let SItem::Decl(d) = it {
            l.decl(d, &types);
        }
    }
    for it in &items {
        let defined = match it {
            SItem::Decl(d) if d.eqrel => vec![&d.name.name],
            SItem::Clause(c) => c.heads.iter().map(|h| &h.rel.name).collect(),
            _ => Vec::new(),
        };
        for rel in defined {
            if let Some(info) = l.rels.get_mut(rel) {
                info.defined = true;
            }
        }
    }
    let mut outputs: HashSet<String> = HashSet::new();
    for it in &items {
        match it {
            SItem::Io(io) => l.io(io, &mut outputs),
            SItem::Clause(c) => l.clause(c),
            SItem::Decl(d) if d.eqrel => {
                for c in eqrel_clauses(d) {
                    l.clause(&c);
                }
            }
            // Expanded away by `components::expand`.
            SItem::Decl(_) | SItem::Type(_) | SItem::Comp(_) | SItem::Init(_) | SItem::Override(_) => {}
        }
    }
    (Program { items: l.items }, l.io, l.diags)
}

/// The rules that make the relation of an `eqrel` declaration its pairs' equivalence
/// closure: `r(a, a) :- r(a, _).`, `r(b, a) :- r(a, b).`, `r(a, c) :- r(a, b), r(b, c).`
/// (reflexivity on the second attribute follows from the first two).
fn eqrel_clauses(d: &SDecl) -> Vec<SClause> {
    let span = d.span;
    let var = |v: &str| SExpr {
        kind: if v == "_" {
            SExprKind::Anon
        } else {
            SExprKind::Var(v.to_string())
        },
        span,
    };
    let atom = |x: &str, y: &str| SAtom {
        rel: d.name.clone(),
        args: vec![var(x), var(y)],
        span,
    };
    let rule = |head: SAtom, body: Vec<SAtom>| SClause {
        heads: vec![head],
        body: Some(SBody::And(body.into_iter().map(SBody::Atom).collect(), span)),
        span,
    };
    vec![
        rule(atom("a", "a"), vec![atom("a", "_")]),
        rule(atom("b", "a"), vec![atom("a", "b")]),
        rule(atom("a", "c"), vec![atom("a", "b"), atom("b", "c")]),
    ]
}

fn ident(name: impl Into<String>, span: Span) -> Ident {
    Ident {
        name: name.into(),
        span,
    }
}

fn ex(kind: ExprKind, span: Span) -> Expr {
    Expr { kind, span }
}

fn not_supported(what: impl std::fmt::Display, span: Span) -> Diagnostic {
    Diagnostic::error(format!("{what} is not supported in Fox yet"), span).with_label("not supported")
}

impl Lowerer {
    /// The base type of every declared type name.
    fn types(&mut self, items: &[SItem]) -> HashMap<String, (Base, bool)> {
        let mut defs: BTreeMap<String, &STypeDecl> = BTreeMap::new();
        for it in items {
            if let SItem::Type(t) = it {
                if defs.insert(t.name.name.clone(), t).is_some() || builtin_type(&t.name.name).is_some() {
                    self.diags.push(
                        Diagnostic::error(format!("type `{}` is declared twice", t.name.name), t.name.span)
                            .with_label("declared again here"),
                    );
                }
            }
        }
        let mut out: HashMap<String, (Base, bool)> = HashMap::new();
        for name in defs.keys() {
            let mut seen = Vec::new();
            if let Some(b) = self.resolve(name, &defs, &mut seen) {
                out.insert(name.clone(), b);
            }
        }
        out
    }

    /// The base of the type `name` (with whether it is `unsigned`), following
    /// declarations; `None` after reporting an error.
    fn resolve(
        &mut self,
        name: &str,
        defs: &BTreeMap<String, &STypeDecl>,
        seen: &mut Vec<String>,
    ) -> Option<(Base, bool)> {
        if let Some(b) = builtin_type(name) {
            return Some((b, b == Base::Unsigned));
        }
        let d = defs.get(name)?;
        if seen.iter().any(|s| s == name) {
            self.diags.push(
                Diagnostic::error(format!("type `{name}` is defined through itself"), d.name.span)
                    .with_label("a cycle of type definitions"),
            );
            return None;
        }
        seen.push(name.to_string());
        // Record types and algebraic data types are expanded away by `records::expand`.
        let STypeDef::Union(parts) = &d.def else {
            return None;
        };
        let mut base: Option<(Base, bool)> = None;
        for p in parts {
            if builtin_type(&p.name).is_none() && !defs.contains_key(&p.name) {
                self.diags.push(
                    Diagnostic::error(format!("unknown type `{}`", p.name), p.span)
                        .with_label("not a declared type")
                        .with_help("the base types are number, unsigned, float and symbol"),
                );
                return None;
            }
            let b = self.resolve(&p.name, defs, seen)?;
            match base {
                Some((x, _)) if x.fox() != b.0.fox() || (x == Base::Float) != (b.0 == Base::Float) => {
                    self.diags.push(
                        Diagnostic::error(
                            format!("the union type `{name}` mixes types of different kinds"),
                            p.span,
                        )
                        .with_label("of another kind than the first"),
                    );
                    return None;
                }
                Some(_) => {}
                None => base = Some(b),
            }
        }
        seen.pop();
        base
    }

    fn decl(&mut self, d: &SDecl, types: &HashMap<String, (Base, bool)>) {
        if self.rels.contains_key(&d.name.name) {
            self.diags.push(
                Diagnostic::error(format!("relation `{}` is declared twice", d.name.name), d.name.span)
                    .with_label("declared again here"),
            );
            return;
        }
        let mut columns = Vec::new();
        let mut atoms = Vec::new();
        let mut names = HashSet::new();
        for (a, t) in &d.attrs {
            if !names.insert(a.name.clone()) {
                self.diags.push(
                    Diagnostic::error(format!("attribute `{}` is named twice", a.name), a.span)
                        .with_label("named again here"),
                );
                return;
            }
            let base = match builtin_type(&t.name) {
                Some(b) => b,
                None => match types.get(&t.name) {
                    Some((b, _)) => *b,
                    None => {
                        self.diags.push(
                            Diagnostic::error(format!("unknown type `{}`", t.name), t.span)
                                .with_label("not a declared type")
                                .with_help("the base types are number, unsigned, float and symbol"),
                        );
                        return;
                    }
                },
            };
            columns.push((a.name.clone(), base));
            atoms.push(TypeAtom {
                ty: ident(base.fox(), t.span),
                var: a.clone(),
                scale: None,
                span: a.span.to(t.span),
            });
        }
        self.items.push(Item::Decl(Decl {
            pred: d.name.clone(),
            shape: DeclShape::Relational(d.attrs.iter().map(|(a, _)| a.clone()).collect()),
            types: atoms,
            span: d.span,
        }));
        self.rels.insert(
            d.name.name.clone(),
            RelInfo {
                columns,
                defined: false,
            },
        );
    }

    /// A new relation `souffle:inputN:rel` of `rel`'s columns, and the rule copying it into
    /// `rel`: Fox's relations are read from data or defined by rules, not both, where a
    /// Soufflé relation may have an `.input` and clauses.
    fn input_aux(&mut self, rel: &Ident, span: Span) -> Ident {
        self.counter += 1;
        let aux = ident(format!("souffle:input{}:{}", self.counter, rel.name), rel.span);
        let decl = self.items.iter().find_map(|it| match it {
            Item::Decl(d) if d.pred.name == rel.name => Some(d.clone()),
            _ => None,
        });
        if let Some(d) = decl {
            self.items.push(Item::Decl(Decl { pred: aux.clone(), ..d }));
        }
        let columns = self.rels[&rel.name].columns.clone();
        let vars: Vec<SExpr> = (0..columns.len())
            .map(|i| SExpr {
                kind: SExprKind::Var(format!("x{i}")),
                span,
            })
            .collect();
        self.rels.insert(
            aux.name.clone(),
            RelInfo {
                columns,
                defined: false,
            },
        );
        let atom = |r: &Ident| SAtom {
            rel: r.clone(),
            args: vars.clone(),
            span,
        };
        self.clause(&SClause {
            heads: vec![atom(rel)],
            body: Some(SBody::Atom(atom(&aux))),
            span,
        });
        aux
    }

    /// Whether `rel` is declared, reporting it when not.
    fn declared(&mut self, rel: &Ident) -> bool {
        if self.rels.contains_key(&rel.name) {
            return true;
        }
        let d = Diagnostic::error(format!("relation `{}` is not declared", rel.name), rel.span)
            .with_label("undeclared relation")
            .with_help(format!("declare it: `.decl {}(…)`", rel.name));
        self.diags.push(d);
        false
    }

    fn io(&mut self, io: &SIo, outputs: &mut HashSet<String>) {
        if !self.declared(&io.rel) {
            return;
        }
        let rel = io.rel.name.clone();
        let (default_file, default_kind) = match io.kind {
            IoKind::Input => (format!("{rel}.facts"), "file"),
            _ => (format!("{rel}.csv"), "file"),
        };
        let mut file = (default_file, io.rel.span);
        let mut delimiter = ("\t".to_string(), io.rel.span);
        let mut headers: Option<Span> = None;
        let mut ok = true;
        for p in &io.params {
            match p.key.name.as_str() {
                "IO" => {
                    if p.value != default_kind {
                        self.diags.push(
                            not_supported(format!("`IO={}`", p.value), p.span)
                                .with_help("Fox reads and writes files only (`IO=file`)"),
                        );
                        ok = false;
                    }
                }
                "filename" => file = (p.value.clone(), p.span),
                "deliminator" => self.diags.push(
                    Diagnostic::warning("Soufflé ignores the IO parameter `deliminator`", p.key.span)
                        .with_label("ignored: the delimiter stays as it was")
                        .with_help("the parameter is spelt `delimiter`"),
                ),
                "delimiter" => {
                    if p.value.is_empty() {
                        self.diags
                            .push(Diagnostic::error("the delimiter is empty", p.span).with_label("an empty delimiter"));
                        ok = false;
                    }
                    delimiter = (p.value.clone(), p.span);
                }
                "headers" => match p.value.as_str() {
                    "true" => headers = Some(p.span),
                    "false" => headers = None,
                    _ => {
                        self.diags.push(
                            Diagnostic::error("`headers` is `true` or `false`", p.span).with_label("not a boolean"),
                        );
                        ok = false;
                    }
                },
                other => {
                    self.diags
                        .push(not_supported(format!("the IO parameter `{other}`"), p.key.span));
                    ok = false;
                }
            }
        }
        if !ok {
            return;
        }
        match io.kind {
            IoKind::Input => {
                let pred = if self.rels[&rel].defined {
                    self.input_aux(&io.rel, io.span)
                } else {
                    io.rel.clone()
                };
                if let Some(shape) = self.shapes.get(&rel) {
                    self.io.inputs.push(SouffleInput {
                        pred: pred.name.clone(),
                        shape: shape.clone(),
                    });
                }
                self.items.push(Item::Input(InputDirective {
                    pred,
                    from: Some(file),
                    sep: Some(delimiter),
                    header: headers,
                    key: None,
                    span: io.span,
                }));
            }
            IoKind::Output | IoKind::PrintSize => {
                if outputs.insert(rel.clone()) {
                    self.items.push(Item::Output(OutputDirective {
                        pred: io.rel.clone(),
                        order_by: Vec::new(),
                        limit: None,
                        span: io.span,
                    }));
                }
                let info = &self.rels[&rel];
                if io.kind == IoKind::PrintSize {
                    if !io.params.is_empty() {
                        self.diags
                            .push(not_supported("IO parameters of `.printsize`", io.params[0].span));
                        return;
                    }
                    self.io.printsize.push(rel);
                } else {
                    let shape = self.shapes.get(&rel).cloned().unwrap_or_default();
                    self.io.outputs.push(SouffleOutput {
                        shape,
                        columns: info.columns.iter().map(|(c, _)| c.clone()).collect(),
                        unsigned: info.columns.iter().map(|(_, b)| *b == Base::Unsigned).collect(),
                        rel,
                        file: file.0,
                        delimiter: delimiter.0,
                        headers: headers.is_some(),
                    });
                }
            }
        }
    }

    fn clause(&mut self, c: &SClause) {
        self.var_types.clear();
        for h in &c.heads {
            self.note_var_types(h);
        }
        if let Some(b) = &c.body {
            self.body_var_types(b);
        }
        let mut ok = true;
        for h in &c.heads {
            ok &= self.atom_ok(h);
        }
        if let Some(b) = &c.body {
            ok &= self.body_ok(b);
        }
        if !ok {
            return;
        }
        let has_agg =
            c.heads.iter().any(|h| h.args.iter().any(has_agg_expr)) || c.body.as_ref().is_some_and(has_agg_body);
        if !has_agg {
            let heads: Option<Vec<Head>> = c.heads.iter().map(|h| self.head(h)).collect();
            let Some(heads) = heads else { return };
            let body = match &c.body {
                None => {
                    // A fact whose arguments are not all literals (`f(1.0/3.0).`) is a
                    // rule binding each computed argument.
                    return self.fact(heads, c.span);
                }
                Some(b) => match self.formula(b) {
                    Some(f) => f,
                    None => return,
                },
            };
            self.items.push(Item::Rule(Rule {
                heads,
                body: Some(Body::Formula(body)),
                span: c.span,
            }));
            return;
        }
        // With aggregates: one clause per disjunct of the body.
        let disjuncts = match &c.body {
            None => vec![Vec::new()],
            Some(b) => dnf(b),
        };
        for lits in disjuncts {
            self.agg_clause(c.heads.clone(), lits, c.span);
        }
    }

    fn fact(&mut self, heads: Vec<Head>, span: Span) {
        let mut lits = Vec::new();
        let mut heads = heads;
        for h in &mut heads {
            let HeadKind::Relational(args) = &mut h.kind else {
                continue;
            };
            for a in args.iter_mut() {
                if matches!(a.kind, ExprKind::Lit(_)) {
                    continue;
                }
                let v = self.fresh("v");
                let value = std::mem::replace(a, ex(ExprKind::Var(v.clone()), a.span));
                lits.push(Formula::Lit(Literal::Compare(Compare {
                    first: ex(ExprKind::Var(v), value.span),
                    rest: vec![(CmpOp::Eq, value.clone())],
                    span: value.span,
                })));
            }
        }
        let body = match lits.len() {
            0 => None,
            1 => Some(Body::Formula(lits.pop().expect("one literal"))),
            _ => Some(Body::Formula(Formula::And(lits, span))),
        };
        self.items.push(Item::Rule(Rule { heads, body, span }));
    }

    fn fresh(&mut self, what: &str) -> String {
        self.counter += 1;
        format!("souffle:{what}{}", self.counter)
    }

    fn atom_ok(&mut self, a: &SAtom) -> bool {
        let mut ok = is_builtin_pred(&a.rel.name) || self.declared(&a.rel);
        for e in &a.args {
            ok &= self.expr_ok(e);
        }
        ok
    }

    fn body_ok(&mut self, b: &SBody) -> bool {
        match b {
            SBody::Or(ps, _) | SBody::And(ps, _) => {
                // Every part is looked at, so that every error is reported.
                let mut ok = true;
                for p in ps {
                    ok &= self.body_ok(p);
                }
                ok
            }
            SBody::Not(p, _) => self.body_ok(p),
            SBody::Atom(a) => self.atom_ok(a),
            SBody::Cmp(_, x, y, _) => self.expr_ok(x) & self.expr_ok(y),
            SBody::Bool(..) => true,
        }
    }

    fn expr_ok(&mut self, e: &SExpr) -> bool {
        match &e.kind {
            SExprKind::Unary(_, _, x) => self.expr_ok(x),
            SExprKind::Bin(_, _, x, y) => self.expr_ok(x) & self.expr_ok(y),
            SExprKind::Call(_, args) => {
                let mut ok = true;
                for a in args {
                    ok &= self.expr_ok(a);
                }
                ok
            }
            SExprKind::Agg(_, t, body) => {
                let mut ok = t.as_ref().is_none_or(|t| self.expr_ok(t));
                ok &= self.body_ok(body);
                if has_agg_body(body) || t.as_ref().is_some_and(|t| has_agg_expr(t)) {
                    self.diags
                        .push(not_supported("an aggregate inside an aggregate", e.span));
                    ok = false;
                } else if has_or(body) {
                    self.diags
                        .push(not_supported("a disjunction inside an aggregate", body.span()));
                    ok = false;
                }
                ok
            }
            _ => true,
        }
    }

    /// The type of column `i` of relation `rel`.
    fn col_base(&self, rel: &str, i: usize) -> Option<Base> {
        self.rels.get(rel)?.columns.get(i).map(|c| c.1)
    }

    /// Notes the types of the variables that stand as arguments of `a`.
    fn note_var_types(&mut self, a: &SAtom) {
        for (i, x) in a.args.iter().enumerate() {
            if let (SExprKind::Var(v), Some(b)) = (&x.kind, self.col_base(&a.rel.name, i)) {
                self.var_types.entry(v.clone()).or_insert(b);
            }
        }
    }

    fn body_var_types(&mut self, b: &SBody) {
        match b {
            SBody::Or(ps, _) | SBody::And(ps, _) => ps.iter().for_each(|p| self.body_var_types(p)),
            SBody::Atom(a) => self.note_var_types(a),
            SBody::Cmp(_, x, y, _) => {
                for e in [x, y] {
                    if let SExprKind::Agg(_, _, body) = &e.kind {
                        self.body_var_types(body);
                    }
                }
            }
            SBody::Not(..) | SBody::Bool(..) => {}
        }
    }

    /// The Soufflé type of `e`, where its operands or functor tell it.
    fn sty(&self, e: &SExpr) -> Option<Base> {
        match &e.kind {
            SExprKind::Var(v) => self.var_types.get(v).copied(),
            SExprKind::Unsigned(_) => Some(Base::Unsigned),
            SExprKind::Float(_) => Some(Base::Float),
            SExprKind::Str(_) => Some(Base::Symbol),
            SExprKind::Int(_)
            | SExprKind::Anon
            | SExprKind::Unsupported(_)
            | SExprKind::Record(_)
            | SExprKind::Ctor(..) => None,
            SExprKind::Unary(_, _, x) => self.sty(x),
            SExprKind::Bin(_, _, x, y) => self.sty(x).or_else(|| self.sty(y)),
            SExprKind::Call(f, args) => match f.name.as_str() {
                "to_unsigned" => Some(Base::Unsigned),
                "to_number" | "strlen" | "ord" => Some(Base::Number),
                "to_float" => Some(Base::Float),
                "cat" | "substr" | "to_string" => Some(Base::Symbol),
                _ => args.iter().find_map(|a| self.sty(a)),
            },
            SExprKind::Agg(AggFn::Count, _, _) => Some(Base::Number),
            SExprKind::Agg(_, t, _) => t.as_ref().and_then(|t| self.sty(t)),
        }
    }

    /// Whether `e` is of Soufflé's `unsigned` type.
    fn is_unsigned(&self, e: &SExpr) -> bool {
        self.sty(e).or(self.expect) == Some(Base::Unsigned)
    }

    /// `e` lowered where a value of type `expect` stands.
    fn expr_as(&mut self, e: &SExpr, expect: Option<Base>) -> Option<Expr> {
        let saved = std::mem::replace(&mut self.expect, expect);
        let r = self.expr(e);
        self.expect = saved;
        r
    }

    /// The arguments of an atom of `rel`, each where a value of its column's type stands.
    fn atom_args(&mut self, rel: &str, args: &[SExpr]) -> Option<Vec<Expr>> {
        let mut out = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            let b = self.col_base(rel, i);
            out.push(self.expr_as(a, b));
        }
        out.into_iter().collect()
    }

    fn head(&mut self, h: &SAtom) -> Option<Head> {
        let args = self.atom_args(&h.rel.name, &h.args);
        Some(Head {
            pred: h.rel.clone(),
            kind: HeadKind::Relational(args?),
            span: h.span,
        })
    }

    fn expr(&mut self, e: &SExpr) -> Option<Expr> {
        let span = e.span;
        let kind = match &e.kind {
            SExprKind::Var(v) => ExprKind::Var(v.clone()),
            SExprKind::Anon => ExprKind::Anon,
            SExprKind::Int(n) => ExprKind::Lit(Lit::Int(*n)),
            SExprKind::Unsigned(n) => match i64::try_from(*n) {
                Ok(n) => ExprKind::Lit(Lit::Int(n)),
                Err(_) => {
                    self.diags.push(
                        not_supported("an `unsigned` value above 9223372036854775807", span)
                            .with_help("Fox holds `unsigned` values in 64-bit signed integers"),
                    );
                    return None;
                }
            },
            SExprKind::Float(f) => ExprKind::Lit(Lit::Float(f.clone())),
            SExprKind::Str(s) => ExprKind::Lit(Lit::Str(s.clone())),
            SExprKind::Unary(op, at, x) => match *op {
                "-" => ExprKind::Neg(Box::new(self.expr(x)?)),
                "bnot" | "lnot" => {
                    let unsigned = *op == "bnot" && self.is_unsigned(e);
                    let x = self.expr(x)?;
                    let call = ExprKind::Call(ident(format!("souffle:{op}"), *at), vec![x]);
                    if unsigned {
                        return Some(unsigned_check(ex(call, span)));
                    }
                    call
                }
                other => {
                    self.diags.push(not_supported(format!("the operator `{other}`"), *at));
                    return None;
                }
            },
            SExprKind::Bin(op, at, x, y) => {
                let bin = match *op {
                    "+" => Some(BinOp::Add),
                    "-" => Some(BinOp::Sub),
                    "*" => Some(BinOp::Mul),
                    "/" => Some(BinOp::Div),
                    _ => None,
                };
                let func = match *op {
                    "%" => Some("souffle:mod"),
                    "^" => Some("souffle:pow"),
                    "band" => Some("souffle:band"),
                    "bor" => Some("souffle:bor"),
                    "bxor" => Some("souffle:bxor"),
                    "bshl" => Some("souffle:bshl"),
                    "bshr" => Some("souffle:bshr"),
                    "bshru" => Some("souffle:bshru"),
                    "land" => Some("souffle:land"),
                    "lor" => Some("souffle:lor"),
                    "lxor" => Some("souffle:lxor"),
                    _ => None,
                };
                if bin.is_none() && func.is_none() {
                    self.diags.push(not_supported(format!("the operator `{op}`"), *at));
                    return None;
                }
                // A shift's count is a number whatever the shifted value's type.
                let unsigned = *op == "bshl" && self.is_unsigned(e);
                let x = self.expr(x)?;
                let y = if op.starts_with("bsh") {
                    self.expr_as(y, None)?
                } else {
                    self.expr(y)?
                };
                match (bin, func) {
                    (Some(b), _) => ExprKind::Bin(b, Box::new(x), Box::new(y)),
                    (None, Some(f)) if unsigned => {
                        return Some(unsigned_check(ex(ExprKind::Call(ident(f, *at), vec![x, y]), span)))
                    }
                    (None, Some(f)) => ExprKind::Call(ident(f, *at), vec![x, y]),
                    (None, None) => return None,
                }
            }
            SExprKind::Call(name, args) => return self.call(name, args, span),
            SExprKind::Agg(..) => {
                self.diags.push(not_supported("an aggregate here", span));
                return None;
            }
            SExprKind::Unsupported(what) => {
                self.diags.push(not_supported(what, span));
                return None;
            }
            // Records are expanded into their fields by `records::expand`; one left is
            // where no record belongs.
            SExprKind::Record(_) => {
                self.diags.push(records::misplaced_record(span));
                return None;
            }
            SExprKind::Ctor(name, _) => {
                self.diags.push(records::misplaced_ctor(name, span));
                return None;
            }
        };
        Some(ex(kind, span))
    }

    fn call(&mut self, name: &Ident, args: &[SExpr], span: Span) -> Option<Expr> {
        let arity = |n: usize| args.len() == n;
        let want = match name.name.as_str() {
            "cat" => args.len() >= 2,
            "strlen" | "to_float" | "to_number" | "to_string" | "to_unsigned" => arity(1),
            "substr" => arity(3),
            "min" | "max" => args.len() >= 2,
            "ord" => {
                self.diags.push(
                    not_supported("the functor `ord`", name.span)
                        .with_help("Soufflé's `ord` is the symbol's index in its symbol table, which depends on the order Soufflé meets symbols in"),
                );
                return None;
            }
            "contains" | "match" => {
                self.diags.push(
                    Diagnostic::error(format!("`{}` is a constraint, not a value", name.name), name.span)
                        .with_label("used as a value"),
                );
                return None;
            }
            "range" | "urange" | "frange" | "itof" | "itou" | "utoi" | "ftoi" | "ftou" | "utof" | "lower" | "upper" => {
                self.diags
                    .push(not_supported(format!("the functor `{}`", name.name), name.span));
                return None;
            }
            other => {
                self.diags.push(
                    Diagnostic::error(format!("unknown functor `{other}`"), name.span)
                        .with_label("not a functor of Soufflé")
                        .with_help("user-defined functors are written `@name(…)` (not supported in Fox yet)"),
                );
                return None;
            }
        };
        if !want {
            self.diags.push(
                Diagnostic::error(format!("wrong number of arguments to `{}`", name.name), span)
                    .with_label(format!("{} arguments", args.len())),
            );
            return None;
        }
        if name.name == "to_float" && args.first().and_then(|a| self.sty(a)) == Some(Base::Symbol) {
            self.diags
                .push(not_supported("`to_float` of a symbol", span).with_help("Soufflé reads it with C's strtod"));
            return None;
        }
        // The arguments of min and max have the call's type; the others their own.
        let expect = if matches!(name.name.as_str(), "min" | "max") {
            self.expect
        } else {
            None
        };
        let xs: Option<Vec<Expr>> = args.iter().map(|a| self.expr_as(a, expect)).collect();
        let mut xs = xs?;
        let call = |n: &str, a: Vec<Expr>, s: Span| ex(ExprKind::Call(ident(n, name.span), a), s);
        Some(match name.name.as_str() {
            "cat" => {
                let mut it = xs.into_iter();
                let first = it.next()?;
                it.fold(first, |acc, x| {
                    let s = acc.span.to(x.span);
                    call("concat", vec![acc, x], s)
                })
            }
            "substr" => {
                // Soufflé counts from 0, Fox (as SQL) from 1.
                let start = xs.remove(1);
                let s = start.span;
                let one = ex(ExprKind::Lit(Lit::Int(1)), s);
                xs.insert(1, ex(ExprKind::Bin(BinOp::Add, Box::new(start), Box::new(one)), s));
                call("substr", xs, span)
            }
            // `to_unsigned` of a negative number is 2^64 more in Soufflé.
            "to_unsigned" => unsigned_check(call("souffle:to_unsigned", xs, span)),
            n @ ("to_number" | "to_string" | "min" | "max") => call(&format!("souffle:{n}"), xs, span),
            n => call(n, xs, span),
        })
    }

    fn formula(&mut self, b: &SBody) -> Option<Formula> {
        Some(match b {
            SBody::Or(ps, s) | SBody::And(ps, s) => {
                let parts: Option<Vec<Formula>> = ps.iter().map(|p| self.formula(p)).collect();
                let parts = parts?;
                if matches!(b, SBody::Or(..)) {
                    Formula::Or(parts, *s)
                } else {
                    Formula::And(parts, *s)
                }
            }
            SBody::Not(inner, s) => {
                let lit = match self.formula(inner)? {
                    Formula::Lit(l) => l,
                    f => Literal::Paren(Box::new(f), inner.span()),
                };
                match lit {
                    Literal::Compare(c) if c.rest.len() == 1 => {
                        let (op, y) = c.rest.into_iter().next()?;
                        Formula::Lit(Literal::Compare(Compare {
                            first: c.first,
                            rest: vec![(negate(op), y)],
                            span: *s,
                        }))
                    }
                    lit => Formula::Lit(Literal::Not(Box::new(lit), *s)),
                }
            }
            SBody::Atom(a) => Formula::Lit(self.body_atom(a)?),
            SBody::Cmp(op, x, y, s) => {
                let (tx, ty) = (self.sty(x), self.sty(y));
                let x = self.expr_as(x, ty)?;
                let y = self.expr_as(y, tx)?;
                Formula::Lit(Literal::Compare(Compare {
                    first: x,
                    rest: vec![(*op, y)],
                    span: *s,
                }))
            }
            SBody::Bool(v, s) => {
                let zero = ex(ExprKind::Lit(Lit::Int(0)), *s);
                Formula::Lit(Literal::Compare(Compare {
                    first: zero.clone(),
                    rest: vec![(if *v { CmpOp::Eq } else { CmpOp::Ne }, zero)],
                    span: *s,
                }))
            }
        })
    }

    fn body_atom(&mut self, a: &SAtom) -> Option<Literal> {
        match a.rel.name.as_str() {
            name @ ("contains" | "match") => {
                let first = if name == "contains" { "sub" } else { "pattern" };
                if a.args.len() != 2 {
                    self.diags.push(
                        Diagnostic::error(format!("wrong number of arguments to `{name}`"), a.span)
                            .with_label(format!("`{name}({first}, s)` takes two")),
                    );
                    return None;
                }
                let SExprKind::Str(text) = &a.args[0].kind else {
                    self.diags.push(not_supported(
                        format!("`{name}` with a first argument that is not a string constant"),
                        a.args[0].span,
                    ));
                    return None;
                };
                let at = a.args[0].span;
                let (builtin, pattern) = if name == "contains" && !text.contains(['%', '_']) {
                    ("like", format!("%{text}%"))
                } else if name == "contains" {
                    ("souffle:match", regex::contains(text))
                } else {
                    let translated = match regex::translate(text) {
                        Ok(p) => p,
                        Err(e) => {
                            let piece = text.get(e.at.clone()).unwrap_or_default();
                            self.diags
                                .push(Diagnostic::error(e.msg, at).with_label(format!("at `{piece}` in this pattern")));
                            return None;
                        }
                    };
                    if let Err(e) = regex::compile_bytes(&translated) {
                        self.diags.push(
                            Diagnostic::error(format!("this regular expression is not valid: {e}"), at)
                                .with_label("not a valid pattern"),
                        );
                        return None;
                    }
                    ("souffle:match", translated)
                };
                let s = self.expr(&a.args[1])?;
                Some(Literal::Atom(Atom {
                    pred: ident(builtin, a.rel.span),
                    args: vec![s, ex(ExprKind::Lit(Lit::Str(pattern)), at)],
                    span: a.span,
                }))
            }
            _ => {
                let args = self.atom_args(&a.rel.name, &a.args);
                Some(Literal::Atom(Atom {
                    pred: a.rel.clone(),
                    args: args?,
                    span: a.span,
                }))
            }
        }
    }

    /// A clause whose body is the conjunction `lits` and which holds aggregates.
    fn agg_clause(&mut self, heads: Vec<SAtom>, lits: Vec<SBody>, span: Span) {
        // Clauses still to process: each aggregate is replaced in turn, and `count` and
        // `sum` double the clauses (a group with bindings, a group without).
        let mut work = vec![(heads, lits)];
        let mut done = Vec::new();
        while let Some((mut heads, mut lits)) = work.pop() {
            let Some((func, target, body, at)) = take_first_agg(&mut heads, &mut lits, &mut || self.fresh_var()) else {
                done.push((heads, lits));
                continue;
            };
            let result = at.0;
            let agg_span = at.1;
            // Variables the aggregate shares with the rest of the clause.
            let mut outside = Vec::new();
            for h in &heads {
                h.args.iter().for_each(|a| vars_expr(a, &mut outside));
            }
            lits.iter().for_each(|l| vars_body(l, &mut outside));
            let mut inside = Vec::new();
            if let Some(t) = &target {
                vars_expr(t, &mut inside);
            }
            vars_body(&body, &mut inside);
            let mut groups: Vec<String> = Vec::new();
            for v in inside {
                if outside.contains(&v) && !groups.contains(&v) {
                    groups.push(v);
                }
            }
            let n = {
                self.counter += 1;
                self.counter
            };
            let aux = format!("souffle:agg{n}");
            let var = |v: &str| SExpr {
                kind: SExprKind::Var(v.to_string()),
                span: agg_span,
            };
            let mut agg_body = body.clone();
            let mut bound = Vec::new();
            positive_vars(&body, &mut bound);
            if groups.iter().any(|g| !bound.contains(g)) {
                // The group variables come from the rest of the clause.
                let dom = format!("souffle:dom{n}");
                let rest: Vec<SBody> = lits.iter().filter(|l| !mentions_fresh(l)).cloned().collect();
                let dom_atom = SAtom {
                    rel: ident(dom.clone(), agg_span),
                    args: groups.iter().map(|g| var(g)).collect(),
                    span: agg_span,
                };
                self.rels.insert(
                    dom.clone(),
                    RelInfo {
                        columns: Vec::new(),
                        defined: true,
                    },
                );
                let Some(dom_head) = self.head(&dom_atom) else { return };
                let Some(rest) = self.conj(&rest, agg_span) else { return };
                self.items.push(Item::Rule(Rule {
                    heads: vec![dom_head],
                    body: Some(Body::Formula(rest)),
                    span: agg_span,
                }));
                agg_body = SBody::And(vec![SBody::Atom(dom_atom), body], agg_span);
            }
            // The auxiliary aggregation.
            let r = "souffle:r".to_string();
            let mut head_args: Vec<SExpr> = groups.iter().map(|g| var(g)).collect();
            head_args.push(var(&r));
            let aux_head = SAtom {
                rel: ident(aux.clone(), agg_span),
                args: head_args,
                span: agg_span,
            };
            self.rels.insert(
                aux.clone(),
                RelInfo {
                    columns: Vec::new(),
                    defined: true,
                },
            );
            let Some(head) = self.head(&aux_head) else { return };
            let Some(formula) = self.formula(&agg_body) else { return };
            let arg = match &target {
                Some(t) => match self.expr(t) {
                    Some(e) => Some(e),
                    None => return,
                },
                None => None,
            };
            let (fname, arg) = match func {
                AggFn::Count => ("count", None),
                AggFn::Sum => ("sum", arg),
                AggFn::Min => ("min", arg),
                AggFn::Max => ("max", arg),
                // Soufflé's mean is a float.
                AggFn::Mean => (
                    "avg",
                    arg.map(|a| {
                        let s = a.span;
                        ex(ExprKind::Call(ident("to_float", s), vec![a]), s)
                    }),
                ),
            };
            self.items.push(Item::Rule(Rule {
                heads: vec![head],
                body: Some(Body::Agg {
                    aggs: vec![AggBinding {
                        var: ident(r.clone(), agg_span),
                        func: ident(fname, agg_span),
                        arg,
                        span: agg_span,
                    }],
                    body: formula,
                    span: agg_span,
                }),
                span: agg_span,
            }));
            let mut read_args: Vec<SExpr> = groups.iter().map(|g| var(g)).collect();
            read_args.push(var(&result));
            let read = SAtom {
                rel: ident(aux.clone(), agg_span),
                args: read_args,
                span: agg_span,
            };
            if matches!(func, AggFn::Count | AggFn::Sum) {
                let mut none_args: Vec<SExpr> = groups.iter().map(|g| var(g)).collect();
                none_args.push(SExpr {
                    kind: SExprKind::Anon,
                    span: agg_span,
                });
                let none = SAtom {
                    rel: ident(aux, agg_span),
                    args: none_args,
                    span: agg_span,
                };
                let mut empty = lits.clone();
                empty.push(SBody::Not(Box::new(SBody::Atom(none)), agg_span));
                empty.push(SBody::Cmp(
                    CmpOp::Eq,
                    var(&result),
                    SExpr {
                        kind: SExprKind::Int(0),
                        span: agg_span,
                    },
                    agg_span,
                ));
                work.push((heads.clone(), empty));
            }
            lits.push(SBody::Atom(read));
            work.push((heads, lits));
        }
        for (heads, lits) in done.into_iter().rev() {
            let hs: Option<Vec<Head>> = heads.iter().map(|h| self.head(h)).collect();
            let Some(hs) = hs else { return };
            if lits.is_empty() {
                self.fact(hs, span);
                continue;
            }
            let Some(body) = self.conj(&lits, span) else { return };
            self.items.push(Item::Rule(Rule {
                heads: hs,
                body: Some(Body::Formula(body)),
                span,
            }));
        }
    }

    fn fresh_var(&mut self) -> String {
        self.fresh("agg")
    }

    fn conj(&mut self, lits: &[SBody], span: Span) -> Option<Formula> {
        let parts: Option<Vec<Formula>> = lits.iter().map(|l| self.formula(l)).collect();
        let mut parts = parts?;
        Some(match parts.len() {
            0 => {
                let zero = ex(ExprKind::Lit(Lit::Int(0)), span);
                Formula::Lit(Literal::Compare(Compare {
                    first: zero.clone(),
                    rest: vec![(CmpOp::Eq, zero)],
                    span,
                }))
            }
            1 => parts.pop()?,
            _ => Formula::And(parts, span),
        })
    }
}

/// `souffle:unsigned(e)`: `e`, which must not be negative (an `unsigned` value of
/// 2^63 or more, which Fox would hold negative, stops the run instead).
fn unsigned_check(e: Expr) -> Expr {
    let span = e.span;
    ex(ExprKind::Call(ident("souffle:unsigned", span), vec![e]), span)
}

fn negate(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Eq => CmpOp::Ne,
        CmpOp::Ne => CmpOp::Eq,
        CmpOp::Lt => CmpOp::Ge,
        CmpOp::Le => CmpOp::Gt,
        CmpOp::Gt => CmpOp::Le,
        CmpOp::Ge => CmpOp::Lt,
    }
}

fn builtin_type(name: &str) -> Option<Base> {
    Some(match name {
        "number" => Base::Number,
        "unsigned" => Base::Unsigned,
        "float" => Base::Float,
        "symbol" => Base::Symbol,
        _ => return None,
    })
}

fn is_builtin_pred(name: &str) -> bool {
    matches!(name, "contains" | "match")
}

fn has_agg_expr(e: &SExpr) -> bool {
    match &e.kind {
        SExprKind::Agg(..) => true,
        SExprKind::Unary(_, _, x) => has_agg_expr(x),
        SExprKind::Bin(_, _, x, y) => has_agg_expr(x) || has_agg_expr(y),
        SExprKind::Call(_, args) => args.iter().any(has_agg_expr),
        _ => false,
    }
}

fn has_agg_body(b: &SBody) -> bool {
    match b {
        SBody::Or(ps, _) | SBody::And(ps, _) => ps.iter().any(has_agg_body),
        SBody::Not(p, _) => has_agg_body(p),
        SBody::Atom(a) => a.args.iter().any(has_agg_expr),
        SBody::Cmp(_, x, y, _) => has_agg_expr(x) || has_agg_expr(y),
        SBody::Bool(..) => false,
    }
}

fn has_or(b: &SBody) -> bool {
    match b {
        SBody::Or(..) => true,
        SBody::And(ps, _) => ps.iter().any(has_or),
        SBody::Not(p, _) => has_or(p),
        _ => false,
    }
}

/// The disjunctive normal form of a body: a list of conjunctions of literals (a negated
/// body stays one literal).
fn dnf(b: &SBody) -> Vec<Vec<SBody>> {
    match b {
        SBody::Or(ps, _) => ps.iter().flat_map(dnf).collect(),
        SBody::And(ps, _) => {
            let mut acc: Vec<Vec<SBody>> = vec![Vec::new()];
            for p in ps {
                let d = dnf(p);
                let mut next = Vec::new();
                for a in &acc {
                    for x in &d {
                        let mut c = a.clone();
                        c.extend(x.iter().cloned());
                        next.push(c);
                    }
                }
                acc = next;
            }
            acc
        }
        other => vec![vec![other.clone()]],
    }
}

/// The variables of an expression, outside aggregates, in order of first occurrence.
fn vars_expr(e: &SExpr, out: &mut Vec<String>) {
    match &e.kind {
        SExprKind::Var(v) if !out.contains(v) => out.push(v.clone()),
        SExprKind::Unary(_, _, x) => vars_expr(x, out),
        SExprKind::Bin(_, _, x, y) => {
            vars_expr(x, out);
            vars_expr(y, out);
        }
        SExprKind::Call(_, args) => args.iter().for_each(|a| vars_expr(a, out)),
        _ => {}
    }
}

fn vars_body(b: &SBody, out: &mut Vec<String>) {
    match b {
        SBody::Or(ps, _) | SBody::And(ps, _) => ps.iter().for_each(|p| vars_body(p, out)),
        SBody::Not(p, _) => vars_body(p, out),
        SBody::Atom(a) => a.args.iter().for_each(|x| vars_expr(x, out)),
        SBody::Cmp(_, x, y, _) => {
            vars_expr(x, out);
            vars_expr(y, out);
        }
        SBody::Bool(..) => {}
    }
}

/// The variables that are arguments of positive atoms of a conjunction.
fn positive_vars(b: &SBody, out: &mut Vec<String>) {
    match b {
        SBody::And(ps, _) => ps.iter().for_each(|p| positive_vars(p, out)),
        SBody::Atom(a) if !is_builtin_pred(&a.rel.name) => {
            for x in &a.args {
                if let SExprKind::Var(v) = &x.kind {
                    out.push(v.clone());
                }
            }
        }
        _ => {}
    }
}

/// Whether a literal mentions a variable that stands for an aggregate's result, or holds
/// an aggregate still.
fn mentions_fresh(b: &SBody) -> bool {
    let mut vs = Vec::new();
    vars_body(b, &mut vs);
    vs.iter().any(|v| v.starts_with("souffle:")) || has_agg_body(b)
}

/// Replaces the first aggregate of the clause (heads first, then the literals in order)
/// by a fresh variable; returns the aggregate and (the variable, the aggregate's span).
#[allow(clippy::type_complexity)]
fn take_first_agg(
    heads: &mut [SAtom],
    lits: &mut [SBody],
    fresh: &mut dyn FnMut() -> String,
) -> Option<(AggFn, Option<SExpr>, SBody, (String, Span))> {
    fn in_expr(
        e: &mut SExpr,
        fresh: &mut dyn FnMut() -> String,
    ) -> Option<(AggFn, Option<SExpr>, SBody, (String, Span))> {
        match &mut e.kind {
            SExprKind::Agg(..) => {
                let v = fresh();
                let span = e.span;
                let old = std::mem::replace(
                    e,
                    SExpr {
                        kind: SExprKind::Var(v.clone()),
                        span,
                    },
                );
                let SExprKind::Agg(f, t, b) = old.kind else { return None };
                Some((f, t.map(|t| *t), *b, (v, span)))
            }
            SExprKind::Unary(_, _, x) => in_expr(x, fresh),
            SExprKind::Bin(_, _, x, y) => in_expr(x, fresh).or_else(|| in_expr(y, fresh)),
            SExprKind::Call(_, args) => args.iter_mut().find_map(|a| in_expr(a, fresh)),
            _ => None,
        }
    }
    fn in_body(
        b: &mut SBody,
        fresh: &mut dyn FnMut() -> String,
    ) -> Option<(AggFn, Option<SExpr>, SBody, (String, Span))> {
        match b {
            SBody::Or(ps, _) | SBody::And(ps, _) => ps.iter_mut().find_map(|p| in_body(p, fresh)),
            SBody::Not(p, _) => in_body(p, fresh),
            SBody::Atom(a) => a.args.iter_mut().find_map(|x| in_expr(x, fresh)),
            SBody::Cmp(_, x, y, _) => in_expr(x, fresh).or_else(|| in_expr(y, fresh)),
            SBody::Bool(..) => None,
        }
    }
    for h in heads.iter_mut() {
        if let Some(r) = h.args.iter_mut().find_map(|x| in_expr(x, fresh)) {
            return Some(r);
        }
    }
    lits.iter_mut().find_map(|l| in_body(l, fresh))
}
