//! Soufflé's records, expanded away before lowering. A record type `.type P = [a: A, b: B]`
//! whose fields do not lead back to it (no `nil`-terminated lists) is a tuple, and two
//! records are equal exactly when their fields are: so an attribute `p: P` becomes one
//! column per leaf field (`p.a`, `p.b`, recursively for nested records), a record
//! `[x, y]` in such a column becomes its fields, a variable standing for a record becomes
//! one variable per leaf field (`p.a`, `p.b`), `_` one `_` per leaf, and `=`/`!=` between
//! records become the conjunction of the fields' equalities (its negation, `!(a = b, …)`, for
//! inequalities). Outputs write a record as Soufflé does (`[1, x y]`, nested
//! `[[1, a], 2.5]`), from the shapes [`expand`] returns.
//!
//! Algebraic data types `.type T = A {x: X} | B {}` whose fields do not lead back to them
//! are expanded the same way: a value is a tag (the index of its branch among the
//! branches sorted by name, a `number` column) followed by the fields of every branch in
//! that order, the fields of the branches it is not holding a fixed default (`0`, `0.0`,
//! `""`, recursively). So two values are equal exactly when all their columns are, a
//! constructor `$A(e)` becomes `[tag of A, e, defaults of B's fields]`, a variable one
//! variable per column (`v.$`, `v.A.x`, …), and outputs write `$A(1, x)` or `$B` as Soufflé
//! does. An `.input` of a relation with such attributes is read by its shape (the
//! drivers parse `[1, a]` and `$A(1, x)` into the leaf columns, defaults included).
//!
//! Refused with a located error: recursive record types and algebraic data types,
//! `<`-style comparisons of them, and them as aggregate values or functor arguments.

use std::collections::{HashMap, HashSet};

use super::ast::*;
use super::OutShape;
use crate::ast::{CmpOp, Ident, Span};
use crate::diag::Diagnostic;

/// The shape of a Soufflé type: a leaf of a base or declared type, or a record.
#[derive(Clone, Debug)]
enum Shape {
    Leaf(Ident),
    Record(String, Vec<(String, Shape)>),
    /// An algebraic data type: its name, and its branches sorted by name (a branch's tag
    /// is its index) with their fields.
    Adt(Ident, Vec<(String, Vec<(String, Shape)>)>),
}

impl Shape {
    fn leaves(&self) -> usize {
        match self {
            Shape::Leaf(_) => 1,
            Shape::Record(_, fs) => fs.iter().map(|(_, s)| s.leaves()).sum(),
            Shape::Adt(_, bs) => 1 + bs.iter().flat_map(|(_, fs)| fs).map(|(_, s)| s.leaves()).sum::<usize>(),
        }
    }

    fn is_composite(&self) -> bool {
        !matches!(self, Shape::Leaf(_))
    }

    fn out(&self) -> OutShape {
        match self {
            Shape::Leaf(_) => OutShape::Leaf,
            Shape::Record(_, fs) => OutShape::Record(fs.iter().map(|(_, s)| s.out()).collect()),
            Shape::Adt(_, bs) => OutShape::Adt(
                bs.iter()
                    .map(|(b, fs)| (b.clone(), fs.iter().map(|(_, s)| s.out()).collect()))
                    .collect(),
            ),
        }
    }

    /// `(name suffix, leaf type)` of every leaf, in order.
    fn leaf_list(&self, prefix: &str, out: &mut Vec<(String, Ident)>) {
        match self {
            Shape::Leaf(t) => out.push((prefix.to_string(), t.clone())),
            Shape::Record(_, fs) => {
                for (f, s) in fs {
                    s.leaf_list(&format!("{prefix}.{f}"), out);
                }
            }
            Shape::Adt(t, bs) => {
                out.push((
                    format!("{prefix}.$"),
                    Ident {
                        name: "number".to_string(),
                        span: t.span,
                    },
                ));
                for (b, fs) in bs {
                    for (f, s) in fs {
                        s.leaf_list(&format!("{prefix}.{b}.{f}"), out);
                    }
                }
            }
        }
    }

    fn describe(&self) -> String {
        match self {
            Shape::Leaf(t) => format!("`{}`", t.name),
            Shape::Record(n, _) => format!("the record type `{n}`"),
            Shape::Adt(t, _) => format!("the algebraic data type `{}`", t.name),
        }
    }
}

/// The program with records expanded, and the shape of every relation that has a record
/// attribute (one [`OutShape`] per attribute), for writing its outputs.
pub fn expand(items: Vec<SItem>, diags: &mut Vec<Diagnostic>) -> (Vec<SItem>, HashMap<String, Vec<OutShape>>) {
    let has_records = items.iter().any(|it| {
        matches!(
            it,
            SItem::Type(STypeDecl {
                def: STypeDef::Record(_) | STypeDef::Adt(_),
                ..
            })
        )
    });
    if !has_records {
        return (items, HashMap::new());
    }
    let mut x = Expander {
        diags,
        types: HashMap::new(),
        rels: HashMap::new(),
        vars: HashMap::new(),
        adts: HashMap::new(),
        ctors: HashMap::new(),
        dropped: HashSet::new(),
    };
    for it in &items {
        if let SItem::Type(t) = it {
            x.types.insert(t.name.name.clone(), t.clone());
        }
    }
    for it in &items {
        let SItem::Type(STypeDecl {
            name,
            def: STypeDef::Adt(branches),
        }) = it
        else {
            continue;
        };
        for (b, _) in branches {
            if let Some(other) = x.ctors.get(&b.name) {
                x.diags.push(
                    Diagnostic::error(
                        format!("`{}` is already a branch of the type `{other}`", b.name),
                        b.span,
                    )
                    .with_label("a branch name used twice")
                    .with_help("a branch name names one branch of one type"),
                );
                return (Vec::new(), HashMap::new());
            }
            x.ctors.insert(b.name.clone(), name.name.clone());
        }
    }
    for it in &items {
        if let SItem::Type(STypeDecl {
            name,
            def: STypeDef::Adt(_),
        }) = it
        {
            match x.shape(name, &mut Vec::new()) {
                Some(s) => {
                    x.adts.insert(name.name.clone(), s);
                }
                None => return (Vec::new(), HashMap::new()),
            }
        }
    }
    let mut out = Vec::new();
    let mut shapes = HashMap::new();
    for it in &items {
        if let SItem::Decl(d) = it {
            let mut attr_shapes = Vec::new();
            for (_, t) in &d.attrs {
                match x.shape(t, &mut Vec::new()) {
                    Some(s) => attr_shapes.push(s),
                    None => return (Vec::new(), HashMap::new()),
                }
            }
            if attr_shapes.iter().any(Shape::is_composite) {
                shapes.insert(d.name.name.clone(), attr_shapes.iter().map(Shape::out).collect());
                x.rels.insert(d.name.name.clone(), attr_shapes);
            }
        }
    }
    for it in items {
        match it {
            SItem::Type(STypeDecl {
                def: STypeDef::Record(_) | STypeDef::Adt(_),
                ..
            }) => {}
            SItem::Type(t) if x.is_record_alias(&t) => {}
            SItem::Decl(mut d) => {
                if d.eqrel
                    && x.rels
                        .get(&d.name.name)
                        .is_some_and(|s| s.iter().any(|s| s.leaves() > 1))
                {
                    x.diags.push(
                        Diagnostic::error(
                            "an equivalence relation (`eqrel`) over records or algebraic data types with fields is not supported in Fox yet",
                            d.span,
                        )
                        .with_label("values of several columns"),
                    );
                    // Declared all the same, so that its uses are not reported as undeclared.
                    d.eqrel = false;
                }
                if let Some(attr_shapes) = x.rels.get(&d.name.name) {
                    let mut attrs = Vec::new();
                    for ((a, _), s) in d.attrs.iter().zip(attr_shapes) {
                        let mut leaves = Vec::new();
                        s.leaf_list(&a.name, &mut leaves);
                        attrs.extend(leaves.into_iter().map(|(n, t)| (Ident { name: n, span: a.span }, t)));
                    }
                    d.attrs = attrs;
                }
                out.push(SItem::Decl(d));
            }
            SItem::Clause(c) => {
                if let Some(c) = x.clause(c) {
                    out.push(SItem::Clause(c));
                }
            }
            other => out.push(other),
        }
    }
    (out, shapes)
}

struct Expander<'a> {
    diags: &'a mut Vec<Diagnostic>,
    types: HashMap<String, STypeDecl>,
    /// The attribute shapes of relations with a record attribute.
    rels: HashMap<String, Vec<Shape>>,
    /// The shapes of the record variables of the clause being expanded.
    vars: HashMap<String, Shape>,
    /// The shape of every algebraic data type.
    adts: HashMap<String, Shape>,
    /// The type of every branch constructor.
    ctors: HashMap<String, String>,
    /// The column variables of the clause being expanded that a `!=` did not compare.
    dropped: HashSet<String>,
}

impl Expander<'_> {
    fn shape(&mut self, t: &Ident, seen: &mut Vec<String>) -> Option<Shape> {
        let Some(def) = self.types.get(&t.name).cloned() else {
            return Some(Shape::Leaf(t.clone()));
        };
        if let Some(s) = self.adts.get(&t.name) {
            return Some(s.clone());
        }
        if seen.contains(&t.name) {
            // A cycle through a record is a recursive record; a cycle of plain types is
            // reported when types are resolved.
            if seen.iter().any(|n| {
                matches!(
                    self.types.get(n),
                    Some(STypeDecl {
                        def: STypeDef::Adt(_),
                        ..
                    })
                )
            }) {
                self.diags.push(
                    Diagnostic::error(
                        format!(
                            "the recursive type `{}` (an algebraic data type whose fields lead back to it) is not supported in Fox yet",
                            t.name
                        ),
                        t.span,
                    )
                    .with_label("leads back to itself"),
                );
                return None;
            }
            if seen.iter().any(|n| {
                matches!(
                    self.types.get(n),
                    Some(STypeDecl {
                        def: STypeDef::Record(_),
                        ..
                    })
                )
            }) {
                self.diags.push(
                    Diagnostic::error(
                        format!(
                            "the recursive record type `{}` (a list ending in `nil`) is not supported in Fox yet",
                            t.name
                        ),
                        t.span,
                    )
                    .with_label("leads back to itself"),
                );
                return None;
            }
            return Some(Shape::Leaf(t.clone()));
        }
        seen.push(t.name.clone());
        let s = match &def.def {
            STypeDef::Record(fields) => {
                let mut fs = Vec::new();
                for (f, ft) in fields {
                    fs.push((f.name.clone(), self.shape(ft, seen)?));
                }
                Shape::Record(t.name.clone(), fs)
            }
            STypeDef::Adt(branches) => {
                let mut bs = Vec::new();
                for (b, fields) in branches {
                    let mut fs = Vec::new();
                    for (f, ft) in fields {
                        fs.push((f.name.clone(), self.shape(ft, seen)?));
                    }
                    bs.push((b.name.clone(), fs));
                }
                bs.sort_by(|a, b| a.0.cmp(&b.0));
                Shape::Adt(t.clone(), bs)
            }
            STypeDef::Union(parts) => {
                let shapes: Vec<Shape> = parts.iter().map(|p| self.shape(p, seen)).collect::<Option<_>>()?;
                match shapes.as_slice() {
                    [s] if s.is_composite() => s.clone(),
                    _ if shapes.iter().any(Shape::is_composite) => {
                        self.diags.push(
                            Diagnostic::error(
                                format!(
                                    "the union type `{}` holds a record type or an algebraic data type, which Fox does not support yet",
                                    t.name
                                ),
                                t.span,
                            )
                            .with_label("a union with a record"),
                        );
                        return None;
                    }
                    _ => Shape::Leaf(t.clone()),
                }
            }
        };
        seen.pop();
        Some(s)
    }

    /// `.type Q = P` (or `<: P`) where `P` is a record type.
    fn is_record_alias(&mut self, t: &STypeDecl) -> bool {
        self.shape(&t.name, &mut Vec::new()).is_some_and(|s| s.is_composite())
    }

    fn clause(&mut self, mut c: SClause) -> Option<SClause> {
        self.vars.clear();
        self.dropped.clear();
        let mut ok = true;
        for h in &c.heads {
            ok &= self.learn_atom(h);
        }
        if let Some(b) = &c.body {
            ok &= self.learn_body(b);
        }
        for h in &mut c.heads {
            ok &= self.atom(h);
        }
        if let Some(b) = c.body.take() {
            match self.body(b) {
                Some(b) => c.body = Some(b),
                None => ok = false,
            }
        }
        // A column variable that a `!=` left out and that stands nowhere else is `_`
        // (the Soufflé variable it comes from is used more than once).
        if !self.dropped.is_empty() {
            let mut counts = HashMap::new();
            for h in &c.heads {
                h.args.iter().for_each(|e| count_vars(e, &mut counts));
            }
            if let Some(b) = &c.body {
                count_body_vars(b, &mut counts);
            }
            let once: HashSet<String> = std::mem::take(&mut self.dropped)
                .into_iter()
                .filter(|v| counts.get(v) == Some(&1))
                .collect();
            if let Some(b) = &mut c.body {
                anon_vars(b, &once);
            }
        }
        ok.then_some(c)
    }

    /// Notes the shapes of the variables standing in record columns of `a`.
    fn learn_atom(&mut self, a: &SAtom) -> bool {
        let Some(shapes) = self.rels.get(&a.rel.name).cloned() else {
            return true;
        };
        a.args.iter().zip(&shapes).all(|(e, s)| self.learn(e, s))
    }

    fn learn(&mut self, e: &SExpr, s: &Shape) -> bool {
        if !s.is_composite() {
            return true;
        }
        match &e.kind {
            SExprKind::Var(v) => {
                if let Some(old) = self.vars.get(v) {
                    if old.leaves() != s.leaves() || old.describe() != s.describe() {
                        self.diags.push(
                            Diagnostic::error(
                                format!(
                                    "`{v}` stands for {} here and for {} elsewhere",
                                    s.describe(),
                                    old.describe()
                                ),
                                e.span,
                            )
                            .with_label("two record types"),
                        );
                        return false;
                    }
                }
                self.vars.insert(v.clone(), s.clone());
                true
            }
            SExprKind::Record(es) => match s {
                Shape::Record(_, fields) if es.len() == fields.len() => {
                    es.iter().zip(fields).all(|(e, (_, s))| self.learn(e, s))
                }
                _ => true,
            },
            SExprKind::Ctor(name, es) => match s {
                Shape::Adt(_, bs) => match bs.iter().find(|(b, _)| *b == name.name) {
                    Some((_, fields)) if es.len() == fields.len() => {
                        es.iter().zip(fields).all(|(e, (_, s))| self.learn(e, s))
                    }
                    _ => true,
                },
                _ => true,
            },
            _ => true,
        }
    }

    fn learn_body(&mut self, b: &SBody) -> bool {
        match b {
            SBody::Or(ps, _) | SBody::And(ps, _) => ps.iter().all(|p| self.learn_body(p)),
            SBody::Not(p, _) => self.learn_body(p),
            SBody::Atom(a) => self.learn_atom(a) && a.args.iter().all(|e| self.learn_expr(e)),
            SBody::Cmp(_, x, y, _) => self.learn_expr(x) && self.learn_expr(y),
            SBody::Bool(..) => true,
        }
    }

    /// Learns from the atoms inside aggregates.
    fn learn_expr(&mut self, e: &SExpr) -> bool {
        match &e.kind {
            SExprKind::Agg(_, _, b) => self.learn_body(b),
            SExprKind::Unary(_, _, x) => self.learn_expr(x),
            SExprKind::Bin(_, _, x, y) => self.learn_expr(x) && self.learn_expr(y),
            SExprKind::Call(_, args) | SExprKind::Record(args) | SExprKind::Ctor(_, args) => {
                args.iter().all(|a| self.learn_expr(a))
            }
            _ => true,
        }
    }

    fn atom(&mut self, a: &mut SAtom) -> bool {
        let shapes = self.rels.get(&a.rel.name).cloned();
        let mut args = Vec::new();
        let mut ok = true;
        for (i, e) in std::mem::take(&mut a.args).into_iter().enumerate() {
            match shapes.as_ref().and_then(|s| s.get(i)) {
                Some(s) => match self.fields(e, s) {
                    Some(mut es) => args.append(&mut es),
                    None => ok = false,
                },
                None => match self.value(e) {
                    Some(e) => args.push(e),
                    None => ok = false,
                },
            }
        }
        a.args = args;
        ok
    }

    /// The leaf expressions of `e` in a column of shape `s`.
    fn fields(&mut self, e: SExpr, s: &Shape) -> Option<Vec<SExpr>> {
        let span = e.span;
        match (s, e.kind) {
            (Shape::Leaf(_), kind) => Some(vec![self.value(SExpr { kind, span })?]),
            (_, SExprKind::Anon) => Some(vec![
                SExpr {
                    kind: SExprKind::Anon,
                    span
                };
                s.leaves()
            ]),
            (_, SExprKind::Var(v)) => {
                let mut leaves = Vec::new();
                s.leaf_list(&v, &mut leaves);
                Some(
                    leaves
                        .into_iter()
                        .map(|(n, _)| SExpr {
                            kind: SExprKind::Var(n),
                            span,
                        })
                        .collect(),
                )
            }
            (Shape::Record(name, fs), SExprKind::Record(es)) => {
                if es.len() != fs.len() {
                    self.diags.push(
                        Diagnostic::error(
                            format!(
                                "record type `{name}` has {} fields but this record has {}",
                                fs.len(),
                                es.len()
                            ),
                            span,
                        )
                        .with_label("wrong number of fields"),
                    );
                    return None;
                }
                let mut out = Vec::new();
                for (e, (_, s)) in es.into_iter().zip(fs) {
                    out.append(&mut self.fields(e, s)?);
                }
                Some(out)
            }
            (Shape::Adt(t, bs), SExprKind::Ctor(name, es)) => {
                let Some(tag) = bs.iter().position(|(b, _)| *b == name.name) else {
                    let msg = match self.ctors.get(&name.name) {
                        Some(other) => format!(
                            "`${}` is a branch of the type `{other}`, but a value of `{}` belongs here",
                            name.name, t.name
                        ),
                        None => format!("unknown branch constructor `${}`", name.name),
                    };
                    self.diags
                        .push(Diagnostic::error(msg, name.span).with_label("not a branch of this type"));
                    return None;
                };
                let fs = &bs[tag].1;
                if es.len() != fs.len() {
                    self.diags.push(
                        Diagnostic::error(
                            format!(
                                "the branch `{}` of `{}` has {} field{} but this constructor has {}",
                                name.name,
                                t.name,
                                fs.len(),
                                if fs.len() == 1 { "" } else { "s" },
                                es.len()
                            ),
                            span,
                        )
                        .with_label("wrong number of fields"),
                    );
                    return None;
                }
                let mut out = vec![SExpr {
                    kind: SExprKind::Int(tag as i64),
                    span,
                }];
                let mut es = es.into_iter();
                for (k, (_, fs)) in bs.iter().enumerate() {
                    for (_, s) in fs {
                        if k == tag {
                            out.append(&mut self.fields(es.next()?, s)?);
                        } else {
                            self.defaults(s, span, &mut out);
                        }
                    }
                }
                Some(out)
            }
            (Shape::Adt(t, _), _) => {
                self.diags.push(
                    Diagnostic::error(
                        format!("a value of the algebraic data type `{}` belongs here", t.name),
                        span,
                    )
                    .with_label("not a value of this type")
                    .with_help("write a branch constructor `$Branch(…)`, a variable or `_`"),
                );
                None
            }
            (Shape::Record(name, _), _) => {
                self.diags.push(
                    Diagnostic::error(format!("a value of the record type `{name}` belongs here"), span)
                        .with_label("not a record")
                        .with_help("write a record `[…]`, a variable or `_`"),
                );
                None
            }
        }
    }

    /// The columns of shape `s` in a branch a value is not holding: each a fixed default
    /// of its type (`0`, `0.0`, `""`).
    fn defaults(&self, s: &Shape, span: Span, out: &mut Vec<SExpr>) {
        let mut leaves = Vec::new();
        s.leaf_list("", &mut leaves);
        for (_, t) in leaves {
            let kind = match self.base_of(&t.name) {
                "unsigned" => SExprKind::Unsigned(0),
                "float" => SExprKind::Float("0.0".to_string()),
                "symbol" => SExprKind::Str(String::new()),
                _ => SExprKind::Int(0),
            };
            out.push(SExpr { kind, span });
        }
    }

    /// The base type (`number`, `unsigned`, `float`, `symbol`) a type name leads to, through
    /// subtypes and unions (their first part); `number` where it leads nowhere (an unknown
    /// type or a cycle, reported when types are resolved).
    fn base_of(&self, name: &str) -> &'static str {
        let mut name = name;
        for _ in 0..=self.types.len() {
            match name {
                "number" => return "number",
                "unsigned" => return "unsigned",
                "float" => return "float",
                "symbol" => return "symbol",
                _ => {}
            }
            match self.types.get(name) {
                Some(STypeDecl {
                    def: STypeDef::Union(parts),
                    ..
                }) if !parts.is_empty() => name = &parts[0].name,
                _ => break,
            }
        }
        "number"
    }

    /// `e` where a plain value belongs: no record, no record variable.
    fn value(&mut self, mut e: SExpr) -> Option<SExpr> {
        let span = e.span;
        match &mut e.kind {
            SExprKind::Var(v) if self.vars.contains_key(v.as_str()) => {
                let d = match &self.vars[v.as_str()] {
                    Shape::Adt(t, _) => Diagnostic::error(
                        format!(
                            "`{v}` stands for a value of the algebraic data type `{}`, not a plain value",
                            t.name
                        ),
                        span,
                    )
                    .with_label("a variable of an algebraic data type"),
                    _ => Diagnostic::error(format!("`{v}` stands for a record, not a value"), span)
                        .with_label("a record variable"),
                };
                self.diags.push(d);
                return None;
            }
            SExprKind::Ctor(name, _) => {
                let d = if self.ctors.contains_key(&name.name) {
                    misplaced_ctor(name, span)
                } else {
                    Diagnostic::error(format!("unknown branch constructor `${}`", name.name), name.span)
                        .with_label("not a branch of any type")
                };
                self.diags.push(d);
                return None;
            }
            SExprKind::Record(_) => {
                self.diags.push(misplaced_record(span));
                return None;
            }
            SExprKind::Unary(_, _, x) => {
                **x = self.value(std::mem::replace(&mut **x, anon(span)))?;
            }
            SExprKind::Bin(_, _, x, y) => {
                **x = self.value(std::mem::replace(&mut **x, anon(span)))?;
                **y = self.value(std::mem::replace(&mut **y, anon(span)))?;
            }
            SExprKind::Call(_, args) => {
                for a in args.iter_mut() {
                    *a = self.value(std::mem::replace(a, anon(span)))?;
                }
            }
            SExprKind::Agg(_, target, b) => {
                if let Some(t) = target {
                    **t = self.value(std::mem::replace(&mut **t, anon(span)))?;
                }
                **b = self.body(std::mem::replace(&mut **b, SBody::Bool(true, span)))?;
            }
            _ => {}
        }
        Some(e)
    }

    fn body(&mut self, b: SBody) -> Option<SBody> {
        Some(match b {
            SBody::Or(ps, s) => SBody::Or(ps.into_iter().map(|p| self.body(p)).collect::<Option<_>>()?, s),
            SBody::And(ps, s) => SBody::And(ps.into_iter().map(|p| self.body(p)).collect::<Option<_>>()?, s),
            SBody::Not(p, s) => SBody::Not(Box::new(self.body(*p)?), s),
            SBody::Atom(mut a) => {
                if !self.atom(&mut a) {
                    return None;
                }
                SBody::Atom(a)
            }
            SBody::Cmp(op, x, y, s) => {
                // A variable's or a constructor's shape is its type's; a record literal's
                // only what its fields tell.
                let named = |e: &SExpr| matches!(e.kind, SExprKind::Var(_) | SExprKind::Ctor(..));
                let shape = [&x, &y]
                    .into_iter()
                    .filter(|e| named(e))
                    .chain([&x, &y])
                    .find_map(|e| self.record_shape(e));
                let Some(shape) = shape else {
                    return Some(SBody::Cmp(op, self.value(x)?, self.value(y)?, s));
                };
                if !matches!(op, CmpOp::Eq | CmpOp::Ne) {
                    let d = match shape {
                        Shape::Adt(..) => {
                            Diagnostic::error("values of algebraic data types compare only with `=` and `!=`", s)
                                .with_label("values of an algebraic data type compared here")
                        }
                        _ => Diagnostic::error("records compare only with `=` and `!=`", s)
                            .with_label("records compared here"),
                    };
                    self.diags.push(d);
                    return None;
                }
                if let (Some(a), Some(b)) = (self.record_shape(&x), self.record_shape(&y)) {
                    if (matches!(a, Shape::Adt(..)) || matches!(b, Shape::Adt(..))) && a.describe() != b.describe() {
                        self.diags.push(
                            Diagnostic::error(format!("compares {} with {}", a.describe(), b.describe()), s)
                                .with_label("values of two types"),
                        );
                        return None;
                    }
                }
                // `!=`: the columns of the branches a constructor does not build hold
                // defaults, and so do those of the other side when the tags agree: only the
                // tag and the constructed branch's columns need comparing. (`=` compares
                // every column: it may bind the other side.)
                let mut keep = vec![true; shape.leaves()];
                if op == CmpOp::Ne {
                    for r in [relevant(&x, &shape), relevant(&y, &shape)] {
                        for (k, r) in keep.iter_mut().zip(r) {
                            *k &= r;
                        }
                    }
                }
                let xs = self.fields(x, &shape)?;
                let ys = self.fields(y, &shape)?;
                let mut parts = Vec::new();
                for ((a, b), keep) in xs.into_iter().zip(ys).zip(keep) {
                    if !keep {
                        for e in [&a, &b] {
                            if let SExprKind::Var(v) = &e.kind {
                                self.dropped.insert(v.clone());
                            }
                        }
                    } else if !matches!(a.kind, SExprKind::Anon) && !matches!(b.kind, SExprKind::Anon) {
                        parts.push(SBody::Cmp(op, a, b, s));
                    }
                }
                if parts.is_empty() {
                    SBody::Bool(op == CmpOp::Eq, s)
                } else if parts.len() == 1 {
                    parts.pop().expect("one part")
                } else if op == CmpOp::Eq {
                    SBody::And(parts, s)
                } else {
                    // Not all columns equal: `!(a = b, c = d)`.
                    let eqs = parts
                        .into_iter()
                        .map(|p| match p {
                            SBody::Cmp(_, a, b, s) => SBody::Cmp(CmpOp::Eq, a, b, s),
                            p => p,
                        })
                        .collect();
                    SBody::Not(Box::new(SBody::And(eqs, s)), s)
                }
            }
            b @ SBody::Bool(..) => b,
        })
    }

    /// The record shape of `e` when it is a record variable, or a record literal whose
    /// fields tell its shape (by a record variable among them, or leaves).
    fn record_shape(&self, e: &SExpr) -> Option<Shape> {
        match &e.kind {
            SExprKind::Var(v) => self.vars.get(v).cloned(),
            SExprKind::Ctor(name, _) => self.ctors.get(&name.name).and_then(|t| self.adts.get(t)).cloned(),
            SExprKind::Record(es) => {
                let fs: Vec<(String, Shape)> = es
                    .iter()
                    .enumerate()
                    .map(|(i, f)| {
                        let s = self.record_shape(f).unwrap_or_else(|| {
                            Shape::Leaf(Ident {
                                name: String::new(),
                                span: f.span,
                            })
                        });
                        (i.to_string(), s)
                    })
                    .collect();
                Some(Shape::Record("[…]".to_string(), fs))
            }
            _ => None,
        }
    }
}

/// For each column of `e` in a column of shape `s`: whether comparing it matters, which
/// it does not for the columns of the branches a constructor in `e` does not build (they
/// hold defaults, and so do the other side's whenever the tags compared agree).
/// Malformed expressions keep every column (`fields` reports them).
fn relevant(e: &SExpr, s: &Shape) -> Vec<bool> {
    match (&e.kind, s) {
        (SExprKind::Record(es), Shape::Record(_, fs)) if es.len() == fs.len() => {
            es.iter().zip(fs).flat_map(|(e, (_, s))| relevant(e, s)).collect()
        }
        (SExprKind::Ctor(name, es), Shape::Adt(_, bs)) => match bs.iter().position(|(b, _)| *b == name.name) {
            Some(tag) if es.len() == bs[tag].1.len() => {
                let mut out = vec![true];
                for (k, (_, fs)) in bs.iter().enumerate() {
                    if k == tag {
                        for (e, (_, s)) in es.iter().zip(fs) {
                            out.extend(relevant(e, s));
                        }
                    } else {
                        out.extend(std::iter::repeat_n(false, fs.iter().map(|(_, s)| s.leaves()).sum()));
                    }
                }
                out
            }
            _ => vec![true; s.leaves()],
        },
        _ => vec![true; s.leaves()],
    }
}

fn count_vars(e: &SExpr, counts: &mut HashMap<String, usize>) {
    match &e.kind {
        SExprKind::Var(v) => *counts.entry(v.clone()).or_insert(0) += 1,
        SExprKind::Unary(_, _, x) => count_vars(x, counts),
        SExprKind::Bin(_, _, x, y) => {
            count_vars(x, counts);
            count_vars(y, counts);
        }
        SExprKind::Call(_, args) | SExprKind::Record(args) | SExprKind::Ctor(_, args) => {
            args.iter().for_each(|a| count_vars(a, counts))
        }
        SExprKind::Agg(_, target, b) => {
            if let Some(t) = target {
                count_vars(t, counts);
            }
            count_body_vars(b, counts);
        }
        _ => {}
    }
}

fn count_body_vars(b: &SBody, counts: &mut HashMap<String, usize>) {
    match b {
        SBody::Or(ps, _) | SBody::And(ps, _) => ps.iter().for_each(|p| count_body_vars(p, counts)),
        SBody::Not(p, _) => count_body_vars(p, counts),
        SBody::Atom(a) => a.args.iter().for_each(|e| count_vars(e, counts)),
        SBody::Cmp(_, x, y, _) => {
            count_vars(x, counts);
            count_vars(y, counts);
        }
        SBody::Bool(..) => {}
    }
}

/// Replaces the variables `names` standing as arguments of positive atoms (also inside
/// aggregates) with `_`.
fn anon_vars(b: &mut SBody, names: &HashSet<String>) {
    match b {
        SBody::Or(ps, _) | SBody::And(ps, _) => ps.iter_mut().for_each(|p| anon_vars(p, names)),
        SBody::Not(..) | SBody::Bool(..) => {}
        SBody::Atom(a) => {
            for e in &mut a.args {
                if matches!(&e.kind, SExprKind::Var(v) if names.contains(v)) {
                    e.kind = SExprKind::Anon;
                }
            }
        }
        SBody::Cmp(_, x, y, _) => {
            for e in [x, y] {
                if let SExprKind::Agg(_, _, b) = &mut e.kind {
                    anon_vars(b, names);
                }
            }
        }
    }
}

/// The error of a branch constructor `$name(…)` at `span`, where a plain value belongs.
pub(super) fn misplaced_ctor(name: &Ident, span: Span) -> Diagnostic {
    Diagnostic::error(
        format!(
            "the branch constructor `${}` where no value of an algebraic data type belongs",
            name.name
        ),
        span,
    )
    .with_label("values of algebraic data types stand only in their columns and in `=`/`!=` between them")
}

/// The error of a record `[…]` at `span`, where a plain value belongs.
pub(super) fn misplaced_record(span: Span) -> Diagnostic {
    Diagnostic::error("a record where no record belongs", span)
        .with_label("records stand only in columns of record types and in `=`/`!=` between records")
}

fn anon(span: Span) -> SExpr {
    SExpr {
        kind: SExprKind::Anon,
        span,
    }
}
