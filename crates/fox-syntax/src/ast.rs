//! The abstract syntax tree of the Fox dialect of LogiQL.
//!
//! Every node carries the byte span of the source text it came from. The tree is
//! purely syntactic: names are not resolved and nothing is typed (that is `fox-sema`'s
//! job). The pretty-printer (`crate::pretty`) prints a tree as source text that parses
//! back to the same tree (spans aside: compare with [`Program::erase_spans`]).

use serde::{Deserialize, Serialize};

/// A half-open byte range `start..end` into the source text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end as u32,
        }
    }
    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// An identifier with its span: a predicate, variable, column or function name.
/// Namespaced names keep their colons: `lineitem:shipdate`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// A whole source file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Program {
    pub items: Vec<Item>,
}

/// A top-level item. Every item ends with `.`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Item {
    /// `edge(x, y) -> int32(x), int32(y).`
    Decl(Decl),
    /// A rule `heads <- body.` or a fact `heads.` (a rule with no body).
    Rule(Rule),
    /// `.input p [from "file"] [sep "|"] [key (c, …)].`
    Input(InputDirective),
    /// `.output p [order by col [asc|desc], …] [limit n].`
    Output(OutputDirective),
    /// `.include "file.logic".`: the items of another file, read by the driver that
    /// reads the files of a program (`fox_syntax::sources`), which replaces the directive
    /// with them. The checker never sees one.
    Include(IncludeDirective),
}

/// A type declaration. `price[p] = v -> int64(p), decimal(v).`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decl {
    pub pred: Ident,
    /// The column names, in column order.
    pub shape: DeclShape,
    /// The type atoms right of `->`, in source order (not necessarily column order).
    pub types: Vec<TypeAtom>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum DeclShape {
    /// `p(a, b, c)`
    Relational(Vec<Ident>),
    /// `p[k1, k2] = v` (and `p[] = v`)
    Functional { keys: Vec<Ident>, value: Ident },
}

impl DeclShape {
    /// All column names, keys first then the value for functional predicates.
    pub fn columns(&self) -> Vec<&Ident> {
        match self {
            DeclShape::Relational(cols) => cols.iter().collect(),
            DeclShape::Functional { keys, value } => keys.iter().chain(std::iter::once(value)).collect(),
        }
    }
}

/// `int32(x)`, `decimal(v)`, `decimal(v, 4)` in a declaration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TypeAtom {
    /// The type name as written: `int32`, `int64`, `int`, `float64`, `float`, `decimal`,
    /// `string`, `date`, `bool`. Unknown names are reported by `fox-sema`.
    pub ty: Ident,
    pub var: Ident,
    /// For `decimal(v, 4)`: the number of fraction digits.
    pub scale: Option<u32>,
    pub span: Span,
}

/// A rule or a fact. Several heads (`a(x), b(x) <- c(x).`) derive into each of them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    pub heads: Vec<Head>,
    /// `None` for a fact.
    pub body: Option<Body>,
    pub span: Span,
}

/// A rule head: `p(e1, …)` or `p[k…] = v`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Head {
    pub pred: Ident,
    pub kind: HeadKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum HeadKind {
    Relational(Vec<Expr>),
    Functional { keys: Vec<Expr>, value: Expr },
}

/// The right-hand side of `<-`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Body {
    Formula(Formula),
    /// `agg<<n = count(), s = sum(v)>> formula`
    Agg {
        aggs: Vec<AggBinding>,
        body: Formula,
        span: Span,
    },
}

/// `s = sum(v)` inside `agg<<…>>`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AggBinding {
    pub var: Ident,
    /// `sum`, `count`, `min`, `max`, `avg`, `total` (as written; sema resolves it).
    pub func: Ident,
    /// The argument; `None` for `count()`.
    pub arg: Option<Expr>,
    pub span: Span,
}

/// A body formula: conjunction binds tighter than disjunction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Formula {
    /// `a ; b ; c` (at least two).
    Or(Vec<Formula>, Span),
    /// `a, b, c` (at least two).
    And(Vec<Formula>, Span),
    Lit(Literal),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Literal {
    /// `p(e1, …)`: a predicate or a built-in predicate such as `like(s, "%X")`.
    Atom(Atom),
    /// `!lit` (negated atom, negated built-in, negated in-list, negated parenthesised formula).
    Not(Box<Literal>, Span),
    /// `e1 op e2 op e3 …`: comparisons, chains, assignments (`v = expr`), functional atoms
    /// (`price[p] = v`, `price[p] > 100`).
    Compare(Compare),
    /// `e in (e1, e2, …)`
    In { expr: Expr, list: Vec<Expr>, span: Span },
    /// `( formula )`
    Paren(Box<Formula>, Span),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Atom {
    pub pred: Ident,
    pub args: Vec<Expr>,
    pub span: Span,
}

/// `first op1 e1 op2 e2 …` with at least one `(op, e)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Compare {
    pub first: Expr,
    pub rest: Vec<(CmpOp, Expr)>,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ExprKind {
    Var(String),
    /// `_`
    Anon,
    Lit(Lit),
    /// `-e` (a negative number literal is folded into the literal instead)
    Neg(Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    /// A built-in function call: `year(d)`, `substr(s, 1, 2)`, `round(x, 2)`.
    Call(Ident, Vec<Expr>),
    /// A functional term `p[k1, …]` (`p[]` for a scalar).
    FuncTerm(Ident, Vec<Expr>),
}

/// A literal value, keeping the digits as written where they matter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Lit {
    Int(i64),
    /// A decimal literal as written (`0.06`, `-1.50`): sign, digits and the point.
    Decimal(String),
    /// A float literal as written (`1.5e3`, `1.5f`).
    Float(String),
    /// The string's value (escapes resolved).
    Str(String),
    /// `date("1998-09-02")`: the date text between the quotes, validated by the lexer/parser.
    Date(String),
    Bool(bool),
}

/// `.input p [from "file"] [sep "|"] [header] [key (c, …)].` (the options in any order,
/// each at most once).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputDirective {
    pub pred: Ident,
    pub from: Option<(String, Span)>,
    pub sep: Option<(String, Span)>,
    /// `header`: the file's first line names the columns and is not data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<Span>,
    /// `key (c1, …)`: columns that identify a row (no two rows share them).
    pub key: Option<(Vec<Ident>, Span)>,
    pub span: Span,
}

/// `.include "path".`: the path as written (relative to the including file's folder) and
/// its span.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IncludeDirective {
    pub path: (String, Span),
    pub span: Span,
}

/// `.output p [order by k [asc|desc], …] [limit n].`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutputDirective {
    pub pred: Ident,
    pub order_by: Vec<OrderKey>,
    pub limit: Option<(u64, Span)>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OrderKey {
    pub column: Ident,
    pub descending: bool,
    pub span: Span,
}

impl Program {
    /// Sets every span in the tree to `Span::default()`, so that trees parsed from
    /// differently formatted sources compare equal.
    pub fn erase_spans(&mut self) {
        self.map_spans(&|_| Span::default());
    }

    /// Replaces every span `s` in the tree by `f(s)` (for example to move a file's spans
    /// to its place in a source map).
    pub fn map_spans(&mut self, f: &dyn Fn(Span) -> Span) {
        for item in &mut self.items {
            item.map_spans(f);
        }
    }
}

impl Ident {
    pub fn map_spans(&mut self, f: &dyn Fn(Span) -> Span) {
        self.span = f(self.span);
    }
}

impl Item {
    pub fn map_spans(&mut self, f: &dyn Fn(Span) -> Span) {
        match self {
            Item::Decl(d) => {
                d.span = f(d.span);
                d.pred.map_spans(f);
                match &mut d.shape {
                    DeclShape::Relational(cols) => cols.iter_mut().for_each(|c| c.map_spans(f)),
                    DeclShape::Functional { keys, value } => {
                        keys.iter_mut().for_each(|c| c.map_spans(f));
                        value.map_spans(f);
                    }
                }
                for t in &mut d.types {
                    t.span = f(t.span);
                    t.ty.map_spans(f);
                    t.var.map_spans(f);
                }
            }
            Item::Rule(r) => {
                r.span = f(r.span);
                for h in &mut r.heads {
                    h.span = f(h.span);
                    h.pred.map_spans(f);
                    match &mut h.kind {
                        HeadKind::Relational(args) => args.iter_mut().for_each(|e| e.map_spans(f)),
                        HeadKind::Functional { keys, value } => {
                            keys.iter_mut().for_each(|e| e.map_spans(f));
                            value.map_spans(f);
                        }
                    }
                }
                match &mut r.body {
                    Some(Body::Formula(b)) => b.map_spans(f),
                    Some(Body::Agg { aggs, body, span }) => {
                        *span = f(*span);
                        for a in aggs {
                            a.span = f(a.span);
                            a.var.map_spans(f);
                            a.func.map_spans(f);
                            if let Some(arg) = &mut a.arg {
                                arg.map_spans(f);
                            }
                        }
                        body.map_spans(f);
                    }
                    None => {}
                }
            }
            Item::Input(i) => {
                i.span = f(i.span);
                i.pred.map_spans(f);
                for (_, s) in i.from.iter_mut().chain(i.sep.iter_mut()) {
                    *s = f(*s);
                }
                if let Some(s) = &mut i.header {
                    *s = f(*s);
                }
                if let Some((cols, s)) = &mut i.key {
                    *s = f(*s);
                    cols.iter_mut().for_each(|c| c.map_spans(f));
                }
            }
            Item::Output(o) => {
                o.span = f(o.span);
                o.pred.map_spans(f);
                for k in &mut o.order_by {
                    k.span = f(k.span);
                    k.column.map_spans(f);
                }
                if let Some((_, s)) = &mut o.limit {
                    *s = f(*s);
                }
            }
            Item::Include(i) => {
                i.span = f(i.span);
                i.path.1 = f(i.path.1);
            }
        }
    }
}

impl Formula {
    pub fn map_spans(&mut self, f: &dyn Fn(Span) -> Span) {
        match self {
            Formula::Or(parts, span) | Formula::And(parts, span) => {
                *span = f(*span);
                parts.iter_mut().for_each(|p| p.map_spans(f));
            }
            Formula::Lit(l) => l.map_spans(f),
        }
    }
}

impl Literal {
    pub fn map_spans(&mut self, f: &dyn Fn(Span) -> Span) {
        match self {
            Literal::Atom(a) => {
                a.span = f(a.span);
                a.pred.map_spans(f);
                a.args.iter_mut().for_each(|e| e.map_spans(f));
            }
            Literal::Not(inner, span) => {
                *span = f(*span);
                inner.map_spans(f);
            }
            Literal::Compare(c) => {
                c.span = f(c.span);
                c.first.map_spans(f);
                c.rest.iter_mut().for_each(|(_, e)| e.map_spans(f));
            }
            Literal::In { expr, list, span } => {
                *span = f(*span);
                expr.map_spans(f);
                list.iter_mut().for_each(|e| e.map_spans(f));
            }
            Literal::Paren(inner, span) => {
                *span = f(*span);
                inner.map_spans(f);
            }
        }
    }
}

impl Expr {
    pub fn map_spans(&mut self, f: &dyn Fn(Span) -> Span) {
        self.span = f(self.span);
        match &mut self.kind {
            ExprKind::Var(_) | ExprKind::Anon | ExprKind::Lit(_) => {}
            ExprKind::Neg(e) => e.map_spans(f),
            ExprKind::Bin(_, a, b) => {
                a.map_spans(f);
                b.map_spans(f);
            }
            ExprKind::Call(name, args) | ExprKind::FuncTerm(name, args) => {
                name.map_spans(f);
                args.iter_mut().for_each(|e| e.map_spans(f));
            }
        }
    }
}

impl Item {
    /// The span of the whole item, from its first token to its final `.`.
    pub fn span(&self) -> Span {
        match self {
            Item::Decl(d) => d.span,
            Item::Rule(r) => r.span,
            Item::Input(i) => i.span,
            Item::Output(o) => o.span,
            Item::Include(i) => i.span,
        }
    }
}
