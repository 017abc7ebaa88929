//! A recursive-descent parser of Soufflé's language into [`super::ast`].
//!
//! On a syntax error the parser reports it and skips to the `.` that ends the clause
//! (or to the next directive), so that every error of a file is reported at once.

use super::ast::*;
use super::lexer::Tok;
use crate::ast::{CmpOp, Ident, Span};
use crate::diag::Diagnostic;

/// The deepest nesting of expressions and bodies the parser follows (deeper input is an
/// error, not a stack overflow).
const MAX_DEPTH: usize = 128;

pub struct Parser<'a> {
    toks: &'a [(Tok, Span)],
    pos: usize,
    end: usize,
    depth: usize,
    pub diags: Vec<Diagnostic>,
}

/// A syntax error already reported.
pub struct Failed;

type R<T> = Result<T, Failed>;

impl<'a> Parser<'a> {
    pub fn new(toks: &'a [(Tok, Span)], src_len: usize) -> Parser<'a> {
        Parser {
            toks,
            pos: 0,
            end: src_len,
            depth: 0,
            diags: Vec::new(),
        }
    }

    fn peek(&self) -> Option<&'a Tok> {
        self.toks.get(self.pos).map(|(t, _)| t)
    }

    fn peek_at(&self, k: usize) -> Option<&'a Tok> {
        self.toks.get(self.pos + k).map(|(t, _)| t)
    }

    fn span(&self) -> Span {
        self.toks
            .get(self.pos)
            .map_or(Span::new(self.end, self.end), |(_, s)| *s)
    }

    fn prev_end(&self) -> u32 {
        if self.pos == 0 {
            0
        } else {
            self.toks[self.pos - 1].1.end
        }
    }

    fn is(&self, p: &str) -> bool {
        matches!(self.peek(), Some(Tok::Punct(q)) if *q == p)
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(self.peek(), Some(Tok::Ident(q)) if q == w)
    }

    fn eat(&mut self, p: &str) -> bool {
        if self.is(p) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn fail<T>(&mut self, expected: &str) -> R<T> {
        let found = match self.peek() {
            Some(t) => t.describe(),
            None => "the end of the file".to_string(),
        };
        self.diags.push(
            Diagnostic::error(format!("syntax error: expected {expected}, found {found}"), self.span())
                .with_label(format!("expected {expected}")),
        );
        Err(Failed)
    }

    fn expect(&mut self, p: &str) -> R<Span> {
        let s = self.span();
        if self.eat(p) {
            Ok(s)
        } else {
            self.fail(&format!("`{p}`"))
        }
    }

    fn ident(&mut self, what: &str) -> R<Ident> {
        match self.peek() {
            Some(Tok::Ident(name)) => {
                let span = self.span();
                self.pos += 1;
                Ok(Ident {
                    name: name.clone(),
                    span,
                })
            }
            _ => self.fail(what),
        }
    }

    /// A relation name: identifiers joined by `.` (qualified names of components are
    /// parsed so that they can be refused by name).
    fn rel_name(&mut self) -> R<Ident> {
        let mut id = self.ident("a relation name")?;
        while self.is(".") && matches!(self.peek_at(1), Some(Tok::Ident(_))) && self.adjacent() {
            self.pos += 1;
            let next = self.ident("a name")?;
            id.name = format!("{}.{}", id.name, next.name);
            id.span = id.span.to(next.span);
        }
        Ok(id)
    }

    /// Whether the token at the cursor touches the one before it and the one after it
    /// (`a.b`, not `a. b`).
    fn adjacent(&self) -> bool {
        let (Some((_, here)), Some((_, next))) = (self.toks.get(self.pos), self.toks.get(self.pos + 1)) else {
            return false;
        };
        here.start == self.prev_end() && next.start == here.end
    }

    fn deeper(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            self.diags.push(
                Diagnostic::error(
                    format!("the program nests more than {MAX_DEPTH} levels deep here"),
                    self.span(),
                )
                .with_label("nested too deeply"),
            );
            return Err(Failed);
        }
        Ok(())
    }

    /// Skips to just after the `.` that ends the current clause, or to the next directive.
    fn recover(&mut self) {
        let mut nest = 0i32;
        while let Some(t) = self.peek() {
            match t {
                // A directive, or the `}` closing the component the clause is in.
                Tok::Directive(_) | Tok::Punct("}") if nest == 0 => return,
                Tok::Punct("(") | Tok::Punct("{") | Tok::Punct("[") => nest += 1,
                Tok::Punct(")") | Tok::Punct("}") | Tok::Punct("]") => nest = (nest - 1).max(0),
                Tok::Punct(".") if nest == 0 => {
                    self.pos += 1;
                    return;
                }
                _ => {}
            }
            self.pos += 1;
        }
    }

    pub fn program(&mut self) -> Vec<SItem> {
        let mut items = Vec::new();
        while self.peek().is_some() {
            let start = self.pos;
            self.depth = 0;
            match self.item() {
                Ok(mut it) => items.append(&mut it),
                Err(Failed) => {
                    if self.pos == start {
                        self.pos += 1;
                    }
                    self.recover();
                }
            }
        }
        items
    }

    fn item(&mut self) -> R<Vec<SItem>> {
        match self.peek() {
            Some(Tok::Directive(d)) => {
                let d = d.clone();
                let at = self.span();
                self.pos += 1;
                self.directive(&d, at)
            }
            _ => Ok(vec![SItem::Clause(self.clause()?)]),
        }
    }

    fn directive(&mut self, d: &str, at: Span) -> R<Vec<SItem>> {
        match d {
            "decl" => self.decl(at),
            "type" => self.type_decl(at, None),
            "number_type" => self.type_decl(at, Some("number")),
            "symbol_type" => self.type_decl(at, Some("symbol")),
            "input" | "output" | "printsize" => self.io(d, at),
            "comp" => Ok(vec![SItem::Comp(self.comp()?)]),
            "init" => {
                let name = self.ident("an instance name")?;
                self.expect("=")?;
                let ty = self.comp_type()?;
                let span = at.to(Span::new(self.prev_end() as usize, self.prev_end() as usize));
                Ok(vec![SItem::Init(SInit { name, ty, span })])
            }
            "override" => Ok(vec![SItem::Override(self.ident("a relation name")?)]),
            "functor" | "plan" | "pragma" | "limitsize" | "include" | "once" => {
                let what = match d {
                    "functor" => "user-defined functors",
                    "plan" => "query plans",
                    "pragma" => "pragmas",
                    "limitsize" => "`.limitsize`",
                    _ => "this directive",
                };
                self.diags.push(
                    Diagnostic::error(format!("{what} are not supported in Fox yet"), at)
                        .with_label(format!("`.{d}` is not supported")),
                );
                Err(Failed)
            }
            _ => {
                self.diags.push(
                    Diagnostic::error(format!("unknown directive `.{d}`"), at)
                        .with_label("not a directive of Soufflé")
                        .with_help("the directives Fox reads are .decl .type .input .output .printsize"),
                );
                Err(Failed)
            }
        }
    }

    /// `Name` or `Name<A, B>`.
    fn comp_type(&mut self) -> R<SCompType> {
        let name = self.ident("a component name")?;
        let mut args = Vec::new();
        if self.eat("<") {
            loop {
                args.push(self.ident("a type or component name")?);
                if !self.eat(",") {
                    break;
                }
            }
            self.expect(">")?;
        }
        Ok(SCompType { name, args })
    }

    /// After `.comp`: `Name<T, …> : Base<…>, … { items }`.
    fn comp(&mut self) -> R<SComp> {
        self.deeper()?;
        let SCompType { name, args: params } = self.comp_type()?;
        let mut bases = Vec::new();
        if self.eat(":") {
            loop {
                bases.push(self.comp_type()?);
                if !self.eat(",") {
                    break;
                }
            }
        }
        self.expect("{")?;
        let mut body = Vec::new();
        let mut failed = false;
        while !self.is("}") {
            if self.peek().is_none() {
                return self.fail("`}` closing the component");
            }
            let start = self.pos;
            match self.item() {
                Ok(mut it) => body.append(&mut it),
                Err(Failed) => {
                    failed = true;
                    if self.pos == start {
                        self.pos += 1;
                    }
                    self.recover();
                }
            }
        }
        self.expect("}")?;
        self.depth -= 1;
        if failed {
            return Err(Failed);
        }
        Ok(SComp {
            name,
            params,
            bases,
            body,
        })
    }

    fn decl(&mut self, at: Span) -> R<Vec<SItem>> {
        let mut names = vec![self.rel_name()?];
        while self.eat(",") {
            names.push(self.rel_name()?);
        }
        self.expect("(")?;
        let mut attrs = Vec::new();
        if !self.is(")") {
            loop {
                let name = self.ident("an attribute name")?;
                self.expect(":")?;
                let ty = self.type_name()?;
                attrs.push((name, ty));
                if !self.eat(",") {
                    break;
                }
            }
        }
        self.expect(")")?;
        let mut eqrel = false;
        let mut overridable = false;
        while let Some(Tok::Ident(q)) = self.peek() {
            let s = self.span();
            match q.as_str() {
                // Storage and evaluation hints that do not change the answer.
                "btree" | "brie" | "inline" | "no_inline" | "magic" | "no_magic" => self.pos += 1,
                "eqrel" => {
                    let same_type = matches!(attrs.as_slice(), [(_, a), (_, b)] if a.name == b.name);
                    if !same_type {
                        self.diags.push(
                            Diagnostic::error(
                                "an equivalence relation (`eqrel`) must have two attributes of one type",
                                s,
                            )
                            .with_label("not a binary relation over one type"),
                        );
                        return Err(Failed);
                    }
                    eqrel = true;
                    self.pos += 1;
                }
                "overridable" => {
                    overridable = true;
                    self.pos += 1;
                }
                "btree_delete" | "choice" => {
                    let what = match q.as_str() {
                        "btree_delete" => "subsumption (`btree_delete`)",
                        _ => "`choice-domain`",
                    };
                    self.diags.push(
                        Diagnostic::error(format!("{what} are not supported in Fox yet"), s)
                            .with_label("not supported"),
                    );
                    return Err(Failed);
                }
                _ => break,
            }
        }
        let span = at.to(Span::new(self.prev_end() as usize, self.prev_end() as usize));
        Ok(names
            .into_iter()
            .map(|name| {
                SItem::Decl(SDecl {
                    name,
                    attrs: attrs.clone(),
                    eqrel,
                    overridable,
                    span,
                })
            })
            .collect())
    }

    fn type_name(&mut self) -> R<Ident> {
        if self.is("[") {
            let s = self.span();
            self.diags
                .push(Diagnostic::error("record types are not supported in Fox yet", s).with_label("a record type"));
            return Err(Failed);
        }
        self.rel_name()
    }

    fn type_decl(&mut self, at: Span, base: Option<&str>) -> R<Vec<SItem>> {
        let name = self.ident("a type name")?;
        if let Some(base) = base {
            return Ok(vec![SItem::Type(STypeDecl {
                name,
                def: STypeDef::Union(vec![Ident {
                    name: base.to_string(),
                    span: at,
                }]),
            })]);
        }
        let def = if self.eat("<:") {
            STypeDef::Union(vec![self.type_name()?])
        } else if self.eat("=") {
            if self.eat("[") {
                let mut fields = Vec::new();
                if !self.is("]") {
                    loop {
                        let f = self.ident("a field name")?;
                        self.expect(":")?;
                        fields.push((f, self.type_name()?));
                        if !self.eat(",") {
                            break;
                        }
                    }
                }
                self.expect("]")?;
                return Ok(vec![SItem::Type(STypeDecl {
                    name,
                    def: STypeDef::Record(fields),
                })]);
            }
            if matches!(self.peek_at(1), Some(Tok::Punct("{"))) {
                let mut branches = Vec::new();
                loop {
                    let b = self.ident("a branch name")?;
                    self.expect("{")?;
                    let mut fields = Vec::new();
                    if !self.is("}") {
                        loop {
                            let f = self.ident("a field name")?;
                            self.expect(":")?;
                            fields.push((f, self.type_name()?));
                            if !self.eat(",") {
                                break;
                            }
                        }
                    }
                    self.expect("}")?;
                    branches.push((b, fields));
                    if !self.eat("|") {
                        break;
                    }
                }
                return Ok(vec![SItem::Type(STypeDecl {
                    name,
                    def: STypeDef::Adt(branches),
                })]);
            }
            let mut parts = vec![self.type_name()?];
            while self.eat("|") {
                parts.push(self.type_name()?);
            }
            STypeDef::Union(parts)
        } else {
            return self.fail("`<:` or `=`");
        };
        Ok(vec![SItem::Type(STypeDecl { name, def })])
    }

    fn io(&mut self, d: &str, at: Span) -> R<Vec<SItem>> {
        let kind = match d {
            "input" => IoKind::Input,
            "output" => IoKind::Output,
            _ => IoKind::PrintSize,
        };
        let mut names = vec![self.rel_name()?];
        while self.eat(",") {
            names.push(self.rel_name()?);
        }
        let mut params = Vec::new();
        if self.eat("(") {
            if !self.is(")") {
                loop {
                    let key = self.ident("a parameter name")?;
                    self.expect("=")?;
                    let s = self.span();
                    let value = match self.peek() {
                        Some(Tok::Str(v)) => v.clone(),
                        Some(Tok::Ident(v)) => v.clone(),
                        Some(Tok::Int(n)) => n.to_string(),
                        _ => return self.fail("a parameter value"),
                    };
                    self.pos += 1;
                    params.push(IoParam { key, value, span: s });
                    if !self.eat(",") {
                        break;
                    }
                }
            }
            self.expect(")")?;
        }
        let span = at.to(Span::new(self.prev_end() as usize, self.prev_end() as usize));
        Ok(names
            .into_iter()
            .map(|rel| {
                SItem::Io(SIo {
                    kind,
                    rel,
                    params: params.clone(),
                    span,
                })
            })
            .collect())
    }

    fn clause(&mut self) -> R<SClause> {
        let start = self.span();
        let mut heads = vec![self.atom()?];
        while self.eat(",") {
            heads.push(self.atom()?);
        }
        let body = if self.eat(":-") {
            Some(self.disjunction()?)
        } else if heads.len() > 1 {
            return self.fail("`:-` (a fact has one head)");
        } else {
            None
        };
        if self.is_word("choice") || (self.is(".") && matches!(self.peek_at(1), Some(Tok::Ident(p)) if p == "plan")) {
            let s = self.span();
            self.diags.push(
                Diagnostic::error("query plans are not supported in Fox yet", s).with_label("`.plan` is not supported"),
            );
            return Err(Failed);
        }
        let end = self.expect(".")?;
        Ok(SClause {
            heads,
            body,
            span: start.to(end),
        })
    }

    fn atom(&mut self) -> R<SAtom> {
        let rel = self.rel_name()?;
        self.expect("(")?;
        let args = self.args(")")?;
        let end = self.expect(")")?;
        Ok(SAtom {
            span: rel.span.to(end),
            rel,
            args,
        })
    }

    fn args(&mut self, close: &str) -> R<Vec<SExpr>> {
        let mut args = Vec::new();
        if self.is(close) {
            return Ok(args);
        }
        loop {
            args.push(self.expr()?);
            if !self.eat(",") {
                return Ok(args);
            }
        }
    }

    fn disjunction(&mut self) -> R<SBody> {
        self.deeper()?;
        let first = self.conjunction()?;
        let mut parts = vec![first];
        while self.eat(";") {
            parts.push(self.conjunction()?);
        }
        self.depth -= 1;
        Ok(if parts.len() == 1 {
            parts.pop().expect("one part")
        } else {
            let span = parts[0].span().to(parts[parts.len() - 1].span());
            SBody::Or(parts, span)
        })
    }

    fn conjunction(&mut self) -> R<SBody> {
        let mut parts = vec![self.literal()?];
        while self.eat(",") {
            parts.push(self.literal()?);
        }
        Ok(if parts.len() == 1 {
            parts.pop().expect("one part")
        } else {
            let span = parts[0].span().to(parts[parts.len() - 1].span());
            SBody::And(parts, span)
        })
    }

    fn literal(&mut self) -> R<SBody> {
        let start = self.span();
        if self.eat("!") {
            self.deeper()?;
            let inner = self.literal()?;
            self.depth -= 1;
            let span = start.to(inner.span());
            return Ok(SBody::Not(Box::new(inner), span));
        }
        if self.is("(") {
            // A parenthesised body, or a constraint whose left side starts with `(`:
            // try the body first and fall back to an expression.
            let save = self.pos;
            let saved_diags = self.diags.len();
            self.pos += 1;
            if let Ok(b) = self.disjunction() {
                if self.eat(")") && !self.is_cmp() && !self.is_arith() {
                    return Ok(b);
                }
            }
            self.pos = save;
            self.diags.truncate(saved_diags);
        }
        if self.is_word("true") || self.is_word("false") {
            let value = self.is_word("true");
            if !matches!(self.peek_at(1), Some(Tok::Punct("("))) {
                self.pos += 1;
                return Ok(SBody::Bool(value, start));
            }
        }
        // An atom: a relation name followed by `(` that is not a functor call in a
        // constraint (`strlen(x) > 2`): parse it as an expression when a comparison follows.
        if let Some(Tok::Ident(_)) = self.peek() {
            let save = self.pos;
            let saved_diags = self.diags.len();
            if let Ok(a) = self.atom() {
                if !self.is_cmp() && !self.is_arith() {
                    return Ok(SBody::Atom(a));
                }
            }
            self.pos = save;
            self.diags.truncate(saved_diags);
        }
        let left = self.expr()?;
        let op = match self.peek() {
            Some(Tok::Punct("=")) => CmpOp::Eq,
            Some(Tok::Punct("!=")) => CmpOp::Ne,
            Some(Tok::Punct("<")) => CmpOp::Lt,
            Some(Tok::Punct("<=")) => CmpOp::Le,
            Some(Tok::Punct(">")) => CmpOp::Gt,
            Some(Tok::Punct(">=")) => CmpOp::Ge,
            _ => return self.fail("a comparison (`=`, `!=`, `<`, `<=`, `>`, `>=`)"),
        };
        self.pos += 1;
        let right = self.expr()?;
        let span = left.span.to(right.span);
        Ok(SBody::Cmp(op, left, right, span))
    }

    fn is_cmp(&self) -> bool {
        matches!(self.peek(), Some(Tok::Punct("=" | "!=" | "<" | "<=" | ">" | ">=")))
    }

    fn is_arith(&self) -> bool {
        matches!(self.peek(), Some(Tok::Punct("+" | "-" | "*" | "/" | "%" | "^")))
            || matches!(self.peek(), Some(Tok::Ident(w)) if binary_word(w).is_some())
    }

    pub fn expr(&mut self) -> R<SExpr> {
        self.deeper()?;
        let e = self.binary(0);
        self.depth -= 1;
        e
    }

    /// Precedence climbing over Soufflé's binary operators (loosest first):
    /// `lor`, `lxor`, `land`, `bor`, `bxor`, `band`, `bshl bshr bshru`, `+ -`, `* / %`,
    /// then unary operators, then `^` (right-associative).
    fn binary(&mut self, level: usize) -> R<SExpr> {
        const LEVELS: &[&[&str]] = &[
            &["lor"],
            &["lxor"],
            &["land"],
            &["bor"],
            &["bxor"],
            &["band"],
            &["bshl", "bshr", "bshru"],
            &["+", "-"],
            &["*", "/", "%"],
        ];
        if level == LEVELS.len() {
            return self.unary();
        }
        let mut left = self.binary(level + 1)?;
        loop {
            let op = match self.peek() {
                Some(Tok::Punct(p)) if LEVELS[level].contains(p) => *p,
                Some(Tok::Ident(w)) if LEVELS[level].contains(&w.as_str()) => binary_word(w).unwrap_or("?"),
                _ => return Ok(left),
            };
            let op_span = self.span();
            self.pos += 1;
            let right = self.binary(level + 1)?;
            let span = left.span.to(right.span);
            left = SExpr {
                kind: SExprKind::Bin(op, op_span, Box::new(left), Box::new(right)),
                span,
            };
        }
    }

    fn unary(&mut self) -> R<SExpr> {
        let start = self.span();
        let op = if self.is("-") {
            Some("-")
        } else if self.is_word("bnot") {
            Some("bnot")
        } else if self.is_word("lnot") {
            Some("lnot")
        } else {
            None
        };
        if let Some(op) = op {
            self.pos += 1;
            self.deeper()?;
            let inner = self.unary()?;
            self.depth -= 1;
            let span = start.to(inner.span);
            // `-5` is the literal -5.
            if op == "-" {
                match inner.kind {
                    SExprKind::Int(n) if inner.span.start == start.end => {
                        return Ok(SExpr {
                            kind: SExprKind::Int(n.wrapping_neg()),
                            span,
                        })
                    }
                    SExprKind::Float(ref f) if inner.span.start == start.end => {
                        return Ok(SExpr {
                            kind: SExprKind::Float(format!("-{f}")),
                            span,
                        })
                    }
                    _ => {}
                }
            }
            return Ok(SExpr {
                kind: SExprKind::Unary(op, start, Box::new(inner)),
                span,
            });
        }
        self.power()
    }

    fn power(&mut self) -> R<SExpr> {
        let base = self.primary()?;
        if self.is("^") {
            let op_span = self.span();
            self.pos += 1;
            self.deeper()?;
            let exp = self.unary()?;
            self.depth -= 1;
            let span = base.span.to(exp.span);
            return Ok(SExpr {
                kind: SExprKind::Bin("^", op_span, Box::new(base), Box::new(exp)),
                span,
            });
        }
        Ok(base)
    }

    fn primary(&mut self) -> R<SExpr> {
        let span = self.span();
        let Some(t) = self.peek() else {
            return self.fail("an expression");
        };
        let kind = match t {
            Tok::Int(n) => SExprKind::Int(*n),
            Tok::Unsigned(n) => SExprKind::Unsigned(*n),
            Tok::Float(f) => SExprKind::Float(f.clone()),
            Tok::Str(s) => SExprKind::Str(s.clone()),
            Tok::Punct("(") => {
                self.pos += 1;
                let e = self.expr()?;
                let end = self.expect(")")?;
                return Ok(SExpr {
                    kind: e.kind,
                    span: span.to(end),
                });
            }
            Tok::Punct("$") if matches!(self.peek_at(1), Some(Tok::Ident(_))) => {
                // `$A(a, b)`: a branch constructor (Soufflé requires the parentheses).
                self.pos += 1;
                let name = self.rel_name()?;
                self.expect("(")?;
                let args = self.args(")")?;
                let end = self.expect(")")?;
                return Ok(SExpr {
                    kind: SExprKind::Ctor(name, args),
                    span: span.to(end),
                });
            }
            Tok::Punct("$") => SExprKind::Unsupported("autoincrement counters (`$`)"),
            Tok::Punct("@") => SExprKind::Unsupported("user-defined functors"),
            Tok::Punct("[") => {
                self.pos += 1;
                let fields = self.args("]")?;
                let end = self.expect("]")?;
                return Ok(SExpr {
                    kind: SExprKind::Record(fields),
                    span: span.to(end),
                });
            }
            Tok::Ident(name) => {
                if name == "_" {
                    SExprKind::Anon
                } else if name == "nil" {
                    SExprKind::Unsupported("`nil` (recursive records)")
                } else if let Some(func) = agg_word(name).filter(|f| {
                    !(matches!(f, AggFn::Min | AggFn::Max) && matches!(self.peek_at(1), Some(Tok::Punct("("))))
                }) {
                    return self.aggregate(func, span);
                } else if matches!(self.peek_at(1), Some(Tok::Punct("("))) {
                    let name = Ident {
                        name: name.clone(),
                        span,
                    };
                    self.pos += 2;
                    let args = self.args(")")?;
                    let end = self.expect(")")?;
                    return Ok(SExpr {
                        kind: SExprKind::Call(name, args),
                        span: span.to(end),
                    });
                } else {
                    SExprKind::Var(name.clone())
                }
            }
            _ => return self.fail("an expression"),
        };
        self.pos += 1;
        if let SExprKind::Unsupported(what) = kind {
            self.diags.push(
                Diagnostic::error(format!("{what} are not supported in Fox yet"), span).with_label("not supported"),
            );
            return Err(Failed);
        }
        Ok(SExpr { kind, span })
    }

    /// `count : { body }`, `sum e : { body }`, `min e : atom`, … (the body in braces or one atom).
    fn aggregate(&mut self, func: AggFn, start: Span) -> R<SExpr> {
        self.pos += 1;
        let target = if func == AggFn::Count {
            None
        } else {
            Some(Box::new(self.expr()?))
        };
        self.expect(":")?;
        let body = if self.eat("{") {
            let b = self.disjunction()?;
            self.expect("}")?;
            b
        } else {
            SBody::Atom(self.atom()?)
        };
        let span = start.to(Span::new(self.prev_end() as usize, self.prev_end() as usize));
        Ok(SExpr {
            kind: SExprKind::Agg(func, target, Box::new(body)),
            span,
        })
    }
}

fn agg_word(w: &str) -> Option<AggFn> {
    Some(match w {
        "count" => AggFn::Count,
        "sum" => AggFn::Sum,
        "min" => AggFn::Min,
        "max" => AggFn::Max,
        "mean" => AggFn::Mean,
        _ => return None,
    })
}

/// The binary operators written as words.
fn binary_word(w: &str) -> Option<&'static str> {
    Some(match w {
        "lor" => "lor",
        "lxor" => "lxor",
        "land" => "land",
        "bor" => "bor",
        "bxor" => "bxor",
        "band" => "band",
        "bshl" => "bshl",
        "bshr" => "bshr",
        "bshru" => "bshru",
        _ => return None,
    })
}
