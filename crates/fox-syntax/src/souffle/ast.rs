//! The syntax tree of a Soufflé program, as the parser reads it (before it is lowered to
//! Fox's tree by [`super::lower`]).

use crate::ast::{CmpOp, Ident, Span};

#[derive(Clone)]
pub enum SItem {
    Decl(SDecl),
    Type(STypeDecl),
    Io(SIo),
    Clause(SClause),
    /// `.comp Name<T, …> : Base<…>, … { … }`: a component declaration.
    Comp(SComp),
    /// `.init inst = Name<…>`: a component instance.
    Init(SInit),
    /// `.override rel` inside a component.
    Override(Ident),
}

/// A component declaration (see [`super::components`]).
#[derive(Clone)]
pub struct SComp {
    pub name: Ident,
    /// Type parameters.
    pub params: Vec<Ident>,
    /// Components it inherits from.
    pub bases: Vec<SCompType>,
    pub body: Vec<SItem>,
}

/// `Name<A, B>`: a component named with its type arguments.
#[derive(Clone)]
pub struct SCompType {
    pub name: Ident,
    pub args: Vec<Ident>,
}

/// `.init inst = Name<…>`.
#[derive(Clone)]
pub struct SInit {
    pub name: Ident,
    pub ty: SCompType,
    pub span: Span,
}

/// `.decl r(a: number, b: T)` (one per name of `.decl a, b(…)`).
#[derive(Clone)]
pub struct SDecl {
    pub name: Ident,
    /// Attribute name and type name.
    pub attrs: Vec<(Ident, Ident)>,
    /// `eqrel`: the relation is an equivalence relation (two attributes of one type),
    /// the reflexive, symmetric and transitive closure of the pairs put in it.
    pub eqrel: bool,
    /// `overridable`: a component inheriting this one may replace its clauses.
    pub overridable: bool,
    pub span: Span,
}

/// `.type T <: number`, `.type T = A | B`.
#[derive(Clone)]
pub struct STypeDecl {
    pub name: Ident,
    pub def: STypeDef,
}

#[derive(Clone)]
pub enum STypeDef {
    /// A subtype or alias of the first type, or a union of the types.
    Union(Vec<Ident>),
    /// `[a: T, b: U]`: a record of named fields.
    Record(Vec<(Ident, Ident)>),
    /// `A {x: T} | B {}`: an algebraic data type, its branches with their named fields.
    Adt(Vec<(Ident, Vec<(Ident, Ident)>)>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoKind {
    Input,
    Output,
    PrintSize,
}

/// `.input r(IO=file, filename="…")` (one per relation named).
#[derive(Clone)]
pub struct SIo {
    pub kind: IoKind,
    pub rel: Ident,
    pub params: Vec<IoParam>,
    pub span: Span,
}

#[derive(Clone)]
pub struct IoParam {
    pub key: Ident,
    pub value: String,
    pub span: Span,
}

/// A fact or a rule: `h1(…), h2(…) :- body.`
#[derive(Clone)]
pub struct SClause {
    pub heads: Vec<SAtom>,
    pub body: Option<SBody>,
    pub span: Span,
}

#[derive(Clone)]
pub struct SAtom {
    pub rel: Ident,
    pub args: Vec<SExpr>,
    pub span: Span,
}

#[derive(Clone)]
pub enum SBody {
    Or(Vec<SBody>, Span),
    And(Vec<SBody>, Span),
    Not(Box<SBody>, Span),
    Atom(SAtom),
    Cmp(CmpOp, SExpr, SExpr, Span),
    Bool(bool, Span),
}

impl SBody {
    pub fn span(&self) -> Span {
        match self {
            SBody::Or(_, s) | SBody::And(_, s) | SBody::Not(_, s) | SBody::Cmp(_, _, _, s) | SBody::Bool(_, s) => *s,
            SBody::Atom(a) => a.span,
        }
    }
}

#[derive(Clone)]
pub struct SExpr {
    pub kind: SExprKind,
    pub span: Span,
}

#[derive(Clone)]
pub enum SExprKind {
    Var(String),
    Anon,
    Int(i64),
    Unsigned(u64),
    Float(String),
    Str(String),
    /// `-e`, `bnot e`, `lnot e` (the span is the operator's).
    Unary(&'static str, Span, Box<SExpr>),
    /// `a op b` (the span is the operator's).
    Bin(&'static str, Span, Box<SExpr>, Box<SExpr>),
    /// A functor: `cat(a, b)`, `strlen(s)`, …
    Call(Ident, Vec<SExpr>),
    /// `[a, b]`: a record (expanded away by `super::records` before lowering).
    Record(Vec<SExpr>),
    /// `$A(a, b)`: a branch constructor of an algebraic data type (expanded away by
    /// `super::records` before lowering).
    Ctor(Ident, Vec<SExpr>),
    /// `count : { … }`, `sum e : { … }`, …
    Agg(AggFn, Option<Box<SExpr>>, Box<SBody>),
    /// A construct the parser refuses (never in a tree it returns).
    Unsupported(&'static str),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggFn {
    Count,
    Sum,
    Min,
    Max,
    Mean,
}
