//! Soufflé's records, expanded away before lowering. A record type `.type P = [a: A, b: B]`
//! whose fields do not lead back to it (no `nil`-terminated lists) is a tuple, and two
//! records are equal exactly when their fields are: so an attribute `p: P` becomes one
//! column per leaf field (`p.a`, `p.b`, recursively for nested records), a record
//! `[x, y]` in such a column becomes its fields, a variable standing for a record becomes
//! one variable per leaf field (`p.a`, `p.b`), `_` one `_` per leaf, and `=`/`!=` between
//! records become the conjunction of the fields' equalities (the disjunction of their
//! inequalities). Outputs write a record as Soufflé does (`[1, x y]`, nested
//! `[[1, a], 2.5]`), from the shapes [`expand`] returns.
//!
//! Refused with a located error: recursive record types, records read by `.input`,
//! `<`-style comparisons of records, records as aggregate values or functor arguments.

use std::collections::HashMap;

use super::ast::*;
use super::OutShape;
use crate::ast::{CmpOp, Ident, Span};
use crate::diag::Diagnostic;

/// The shape of a Soufflé type: a leaf of a base or declared type, or a record.
#[derive(Clone, Debug)]
enum Shape {
    Leaf(Ident),
    Record(String, Vec<(String, Shape)>),
}

impl Shape {
    fn leaves(&self) -> usize {
        match self {
            Shape::Leaf(_) => 1,
            Shape::Record(_, fs) => fs.iter().map(|(_, s)| s.leaves()).sum(),
        }
    }

    fn out(&self) -> OutShape {
        match self {
            Shape::Leaf(_) => OutShape::Leaf,
            Shape::Record(_, fs) => OutShape::Record(fs.iter().map(|(_, s)| s.out()).collect()),
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
        }
    }

    fn describe(&self) -> String {
        match self {
            Shape::Leaf(t) => format!("`{}`", t.name),
            Shape::Record(n, _) => format!("the record type `{n}`"),
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
                def: STypeDef::Record(_),
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
    };
    for it in &items {
        if let SItem::Type(t) = it {
            x.types.insert(t.name.name.clone(), t.clone());
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
            if attr_shapes.iter().any(|s| matches!(s, Shape::Record(..))) {
                shapes.insert(d.name.name.clone(), attr_shapes.iter().map(Shape::out).collect());
                x.rels.insert(d.name.name.clone(), attr_shapes);
            }
        }
    }
    for it in items {
        match it {
            SItem::Type(STypeDecl {
                def: STypeDef::Record(_),
                ..
            }) => {}
            SItem::Type(t) if x.is_record_alias(&t) => {}
            SItem::Decl(mut d) => {
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
            SItem::Io(io) if io.kind == IoKind::Input && x.rels.contains_key(&io.rel.name) => {
                x.diags.push(
                    Diagnostic::error(
                        format!(
                            "reading records with `.input` is not supported in Fox yet (`{}` has a record attribute)",
                            io.rel.name
                        ),
                        io.rel.span,
                    )
                    .with_label("a relation with a record attribute"),
                );
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
}

impl Expander<'_> {
    fn shape(&mut self, t: &Ident, seen: &mut Vec<String>) -> Option<Shape> {
        let Some(def) = self.types.get(&t.name).cloned() else {
            return Some(Shape::Leaf(t.clone()));
        };
        if seen.contains(&t.name) {
            // A cycle through a record is a recursive record; a cycle of plain types is
            // reported when types are resolved.
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
            STypeDef::Union(parts) => {
                let shapes: Vec<Shape> = parts.iter().map(|p| self.shape(p, seen)).collect::<Option<_>>()?;
                match shapes.as_slice() {
                    [s @ Shape::Record(..)] => s.clone(),
                    _ if shapes.iter().any(|s| matches!(s, Shape::Record(..))) => {
                        self.diags.push(
                            Diagnostic::error(
                                format!(
                                    "the union type `{}` holds a record type, which Fox does not support yet",
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
        matches!(self.shape(&t.name, &mut Vec::new()), Some(Shape::Record(..)))
    }

    fn clause(&mut self, mut c: SClause) -> Option<SClause> {
        self.vars.clear();
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
        let Shape::Record(_, fields) = s else {
            return true;
        };
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
            SExprKind::Record(es) if es.len() == fields.len() => {
                es.iter().zip(fields).all(|(e, (_, s))| self.learn(e, s))
            }
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
            SExprKind::Call(_, args) | SExprKind::Record(args) => args.iter().all(|a| self.learn_expr(a)),
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
            (Shape::Record(..), SExprKind::Anon) => Some(vec![
                SExpr {
                    kind: SExprKind::Anon,
                    span
                };
                s.leaves()
            ]),
            (Shape::Record(..), SExprKind::Var(v)) => {
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

    /// `e` where a plain value belongs: no record, no record variable.
    fn value(&mut self, mut e: SExpr) -> Option<SExpr> {
        let span = e.span;
        match &mut e.kind {
            SExprKind::Var(v) if self.vars.contains_key(v.as_str()) => {
                self.diags.push(
                    Diagnostic::error(format!("`{v}` stands for a record, not a value"), span)
                        .with_label("a record variable"),
                );
                return None;
            }
            SExprKind::Record(_) => {
                self.diags.push(
                    Diagnostic::error("a record where no record belongs", span)
                        .with_label("records stand only in columns of record types and in `=`/`!=` between records"),
                );
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
                let shape = self.record_shape(&x).or_else(|| self.record_shape(&y));
                let Some(shape) = shape else {
                    return Some(SBody::Cmp(op, self.value(x)?, self.value(y)?, s));
                };
                if !matches!(op, CmpOp::Eq | CmpOp::Ne) {
                    self.diags.push(
                        Diagnostic::error("records compare only with `=` and `!=`", s)
                            .with_label("records compared here"),
                    );
                    return None;
                }
                let xs = self.fields(x, &shape)?;
                let ys = self.fields(y, &shape)?;
                let parts: Vec<SBody> = xs
                    .into_iter()
                    .zip(ys)
                    .filter(|(a, b)| !matches!(a.kind, SExprKind::Anon) && !matches!(b.kind, SExprKind::Anon))
                    .map(|(a, b)| SBody::Cmp(op, a, b, s))
                    .collect();
                if parts.is_empty() {
                    SBody::Bool(op == CmpOp::Eq, s)
                } else if op == CmpOp::Eq {
                    SBody::And(parts, s)
                } else {
                    SBody::Or(parts, s)
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

fn anon(span: Span) -> SExpr {
    SExpr {
        kind: SExprKind::Anon,
        span,
    }
}
