//! Support code for the grammar: the parse context that collects diagnostics, the
//! "cover" tree used where a formula and an expression share a prefix, and the
//! conversion of lalrpop errors into user-facing diagnostics.
//!
//! At the start of a body literal, `p(x)` may be an atom or a call (`year(d) = 1998`), and
//! `( … )` may be a parenthesised formula or a parenthesised expression (`(a + b) * 2 > c`).
//! The grammar parses both as a [`Cover`] and decides by what follows: a comparison or
//! arithmetic operator makes it an expression, anything else a literal.

use crate::ast::*;
use crate::diag::Diagnostic;
use crate::lexer::{Spanned, Token, UnexpectedChar};
use lalrpop_util::{ErrorRecovery, ParseError};

/// The state threaded through the grammar's actions.
#[derive(Default)]
pub struct Ctx {
    /// Errors the parser recovered from (`!` in the grammar).
    pub recovered: Vec<ErrorRecovery<usize, Token, UnexpectedChar>>,
    /// Errors found by the grammar's actions (an expression where a condition belongs, …).
    pub diags: Vec<Diagnostic>,
    /// Set when an action reported an error in the item being parsed; the item is dropped.
    poisoned: bool,
}

/// One option of an `.input` directive, as written.
pub enum InputOpt {
    From((String, Span), Span),
    Sep((String, Span), Span),
    Key((Vec<Ident>, Span)),
    /// A bare word: `header` is the only one.
    Word(String, Span),
}

/// The words `.input` takes as options.
pub const INPUT_OPTIONS: [&str; 4] = ["from", "sep", "header", "key"];

/// A body formula before it is known whether parenthesised parts are formulas or expressions.
#[derive(Debug)]
pub enum Cover {
    Or(Vec<Cover>, Span),
    And(Vec<Cover>, Span),
    Not(Box<Cover>, Span),
    /// A comparison or an in-list.
    Lit(Literal),
    /// `p(args)`: an atom, or a call when used as an expression.
    Atom(Atom),
    /// `( … )`
    Paren(Box<Cover>, Span),
    /// An expression on its own: only valid where the cover turns out to be an expression.
    Bare(Expr),
}

impl Cover {
    pub fn span(&self) -> Span {
        match self {
            Cover::Or(_, s) | Cover::And(_, s) | Cover::Not(_, s) | Cover::Paren(_, s) => *s,
            Cover::Lit(l) => literal_span(l),
            Cover::Atom(a) => a.span,
            Cover::Bare(e) => e.span,
        }
    }
}

pub fn literal_span(l: &Literal) -> Span {
    match l {
        Literal::Atom(a) => a.span,
        Literal::Not(_, s) | Literal::In { span: s, .. } | Literal::Paren(_, s) => *s,
        Literal::Compare(c) => c.span,
    }
}

pub fn sp(l: usize, r: usize) -> Span {
    Span::new(l, r)
}

pub fn ident(name: String, l: usize, r: usize) -> Ident {
    Ident {
        name,
        span: Span::new(l, r),
    }
}

pub fn expr(kind: ExprKind, l: usize, r: usize) -> Expr {
    Expr {
        kind,
        span: Span::new(l, r),
    }
}

pub fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    let span = a.span.to(b.span);
    Expr {
        kind: ExprKind::Bin(op, Box::new(a), Box::new(b)),
        span,
    }
}

impl Ctx {
    fn error(&mut self, d: Diagnostic) {
        self.diags.push(d);
        self.poisoned = true;
    }

    /// Called when an item is complete: returns it unless an action reported an error in it.
    pub fn finish(&mut self, item: Option<Item>) -> Option<Item> {
        let poisoned = std::mem::take(&mut self.poisoned);
        if poisoned {
            None
        } else {
            item
        }
    }

    /// Called when the parser skipped a broken clause.
    pub fn recover(&mut self, e: ErrorRecovery<usize, Token, UnexpectedChar>) -> Option<Item> {
        self.recovered.push(e);
        self.poisoned = false;
        None
    }

    /// An integer literal; `negative` when a unary minus was folded into it.
    pub fn int(&mut self, n: u64, negative: bool, l: usize, r: usize) -> Expr {
        let value = if negative {
            if n <= i64::MAX as u64 {
                Some(-(n as i64))
            } else if n == i64::MAX as u64 + 1 {
                Some(i64::MIN)
            } else {
                None
            }
        } else {
            i64::try_from(n).ok()
        };
        match value {
            Some(v) => expr(ExprKind::Lit(Lit::Int(v)), l, r),
            None => {
                self.error(
                    Diagnostic::error("integer literal is too large", sp(l, r))
                        .with_label("does not fit in a 64-bit integer")
                        .with_help("integers range from -9223372036854775808 to 9223372036854775807"),
                );
                expr(ExprKind::Lit(Lit::Int(0)), l, r)
            }
        }
    }

    /// The scale of `decimal(v, 4)`.
    pub fn scale(&mut self, n: u64, l: usize, r: usize) -> u32 {
        match u32::try_from(n) {
            Ok(s) if s <= 38 => s,
            _ => {
                self.error(
                    Diagnostic::error(format!("decimal scale {n} is too large"), sp(l, r))
                        .with_label("the scale is the number of fraction digits")
                        .with_help("use a scale between 0 and 38"),
                );
                0
            }
        }
    }

    /// A body formula: every parenthesised part must be a formula.
    pub fn formula(&mut self, c: Cover) -> Formula {
        match c {
            Cover::Or(parts, s) => Formula::Or(parts.into_iter().map(|p| self.formula(p)).collect(), s),
            Cover::And(parts, s) => Formula::And(parts.into_iter().map(|p| self.formula(p)).collect(), s),
            other => Formula::Lit(self.literal(other)),
        }
    }

    fn literal(&mut self, c: Cover) -> Literal {
        match c {
            Cover::Not(inner, s) => Literal::Not(Box::new(self.literal(*inner)), s),
            Cover::Lit(l) => l,
            Cover::Atom(a) => Literal::Atom(a),
            Cover::Paren(inner, s) => Literal::Paren(Box::new(self.formula(*inner)), s),
            c @ (Cover::Or(..) | Cover::And(..)) => {
                let s = c.span();
                Literal::Paren(Box::new(self.formula(c)), s)
            }
            Cover::Bare(e) => {
                self.error(
                    Diagnostic::error("expected a condition, found an expression", e.span)
                        .with_label("this expression is not a condition")
                        .with_help("compare it with `=`, `!=`, `<`, `<=`, `>` or `>=`, or use an atom `p(…)`"),
                );
                Literal::Paren(Box::new(Formula::And(Vec::new(), e.span)), e.span)
            }
        }
    }

    /// A cover used as an operand of arithmetic or a comparison: it must be an expression.
    pub fn expr(&mut self, c: Cover) -> Expr {
        match c {
            Cover::Bare(e) => e,
            Cover::Atom(a) => Expr {
                kind: ExprKind::Call(a.pred, a.args),
                span: a.span,
            },
            Cover::Paren(inner, _) => self.expr(*inner),
            other => {
                let s = other.span();
                self.error(
                    Diagnostic::error("expected an expression, found a condition", s)
                        .with_label("a condition cannot be used as a value")
                        .with_help("inside parentheses used in arithmetic, write one expression"),
                );
                expr(ExprKind::Anon, s.start as usize, s.end as usize)
            }
        }
    }

    /// An `.input` directive from its options, each allowed once.
    pub fn input(&mut self, pred: Ident, opts: Vec<InputOpt>, span: Span) -> Option<Item> {
        let mut d = InputDirective {
            pred,
            from: None,
            sep: None,
            header: None,
            key: None,
            span,
        };
        let mut ok = true;
        for opt in opts {
            let (name, at, first) = match opt {
                InputOpt::From(f, s) => ("from", s, d.from.replace(f).map(|(_, p)| p)),
                InputOpt::Sep(f, s) => ("sep", s, d.sep.replace(f).map(|(_, p)| p)),
                InputOpt::Key(k) => {
                    let s = k.1;
                    ("key", s, d.key.replace(k).map(|(_, p)| p))
                }
                InputOpt::Word(w, s) if w == "header" => ("header", s, d.header.replace(s)),
                InputOpt::Word(w, s) => {
                    let mut e = Diagnostic::error(format!("unknown option `{w}` in `.input`"), s)
                        .with_label("not an option of `.input`");
                    e = match closest_word(&w, &INPUT_OPTIONS) {
                        Some(c) => e.with_help(format!("did you mean `{c}`?")),
                        None => {
                            e.with_help("the options are `from \"file\"`, `sep \"|\"`, `header` and `key (column, …)`")
                        }
                    };
                    self.error(e);
                    ok = false;
                    continue;
                }
            };
            if let Some(first) = first {
                self.error(
                    Diagnostic::error(format!("`{name}` is given twice in `.input`"), at)
                        .with_label("given again here")
                        .with_secondary(first, "first given here")
                        .with_help("each option of `.input` may be given once"),
                );
                ok = false;
            }
        }
        ok.then_some(Item::Input(d))
    }

    /// Turns the heads of `heads -> types.` into a declaration.
    pub fn decl(&mut self, heads: Vec<Head>, types: Vec<TypeAtom>, span: Span) -> Option<Item> {
        if let Some(extra) = heads.get(1) {
            self.error(
                Diagnostic::error("a declaration declares one predicate", extra.span)
                    .with_label("second predicate in the declaration")
                    .with_help("write one declaration per predicate"),
            );
            return None;
        }
        let head = heads.into_iter().next()?;
        let shape = match head.kind {
            HeadKind::Relational(args) => DeclShape::Relational(self.columns(args)?),
            HeadKind::Functional { keys, value } => {
                let keys = self.columns(keys)?;
                let value = self.columns(vec![value])?.into_iter().next()?;
                DeclShape::Functional { keys, value }
            }
        };
        Some(Item::Decl(Decl {
            pred: head.pred,
            shape,
            types,
            span,
        }))
    }

    fn columns(&mut self, args: Vec<Expr>) -> Option<Vec<Ident>> {
        let mut out = Vec::with_capacity(args.len());
        let mut ok = true;
        for a in args {
            match a.kind {
                ExprKind::Var(name) => out.push(Ident { name, span: a.span }),
                _ => {
                    ok = false;
                    self.error(
                        Diagnostic::error("expected a column name in the declaration", a.span)
                            .with_label("not a name")
                            .with_help("a declaration names its columns, e.g. `edge(x, y) -> int32(x), int32(y).`"),
                    );
                }
            }
        }
        ok.then_some(out)
    }
}

/// The word of `words` closest to `w`, if it is a likely misspelling of it.
pub fn closest_word<'a>(w: &str, words: &[&'a str]) -> Option<&'a str> {
    let limit = (w.chars().count() / 3).max(1);
    words
        .iter()
        .map(|c| (strsim::damerau_levenshtein(w, c), *c))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, c)| c)
}

/// The directives, without their dot.
const DIRECTIVES: [&str; 3] = ["input", "output", "include"];

/// Reports clauses that start with a misspelled directive (`.ouput p.`, `.inputs p.`:
/// a `.` that starts a clause followed, without a space, by a word) and removes them, so
/// the parser does not report their tokens one by one (nor the lexer its complaints
/// about them: a Soufflé `.decl e(x: number).` is one error).
pub fn directive_typos(tokens: Vec<Spanned>, diags: &mut Vec<Diagnostic>) -> Vec<Spanned> {
    let mut out: Vec<Spanned> = Vec::with_capacity(tokens.len());
    let mut skipping = false;
    let mut skipped: Vec<(usize, usize)> = Vec::new();
    let mut typos: Vec<Diagnostic> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let (l, tok, r) = &tokens[i];
        if skipping {
            skipping = *tok != Token::Dot;
            if let Some(last) = skipped.last_mut() {
                last.1 = *r;
            }
            i += 1;
            continue;
        }
        let clause_start = out.last().is_none_or(|(_, t, _)| *t == Token::Dot);
        let directive = match tok {
            Token::Dot => Some(""),
            Token::DotInput => Some("input"),
            Token::DotOutput => Some("output"),
            Token::DotInclude => Some("include"),
            _ => None,
        };
        if let (true, Some(known), Some((wl, Token::Ident(w), wr))) = (clause_start, directive, tokens.get(i + 1)) {
            if wl == r {
                let word = format!("{known}{w}");
                let mut d = Diagnostic::error(format!("unknown directive `.{word}`"), sp(*l, *wr))
                    .with_label("not a directive");
                d = match (closest_word(&word, &DIRECTIVES), word.as_str()) {
                    (Some(c), _) => d.with_help(format!("did you mean `.{c}`?")),
                    (None, "decl" | "type") => d.with_help(
                        "predicates are declared with their column types: `edge(x, y) -> int32(x), int32(y).`",
                    ),
                    _ => d.with_help("the directives are `.input`, `.output` and `.include`"),
                };
                typos.push(d);
                skipped.push((*l, *wr));
                skipping = true;
                i += 2;
                continue;
            }
        }
        out.push((*l, tok.clone(), *r));
        i += 1;
    }
    if !skipped.is_empty() {
        // `skipped` is in source order: the lexical errors inside a skipped clause go.
        diags.retain(|d| {
            let s = d.span();
            let k = skipped.partition_point(|&(a, _)| a <= s.start as usize);
            k == 0 || s.end as usize > skipped[k - 1].1
        });
        diags.append(&mut typos);
    }
    out
}

/// A readable name for a terminal as lalrpop spells it in `expected` lists.
fn readable(term: &str) -> String {
    let t = term.trim_matches('"');
    match t {
        "identifier" | "integer" | "decimal" | "float" | "string" | "date literal" => t.to_string(),
        _ => format!("`{}`", t.replace("\\\"", "\"")),
    }
}

const DIRECTIVE_WORDS: [&str; 8] = ["from", "sep", "key", "order", "by", "asc", "desc", "limit"];
const LITERALS: [&str; 7] = ["integer", "decimal", "float", "string", "date literal", "true", "false"];

/// `expected one of: identifier, literal, `(``, in a stable, readable order.
pub fn expected_list(expected: &[String]) -> String {
    let names: Vec<&str> = expected.iter().map(|e| e.trim_matches('"')).collect();
    let has = |n: &str| names.contains(&n);
    let ident = has("identifier");
    let all_literals = LITERALS.iter().all(|l| has(l));
    let mut out: Vec<String> = Vec::new();
    if ident {
        out.push("identifier".to_string());
    }
    if all_literals {
        out.push("literal".to_string());
    }
    for (raw, n) in expected.iter().zip(&names) {
        if *n == "identifier" || (ident && DIRECTIVE_WORDS.contains(n)) || (all_literals && LITERALS.contains(n)) {
            continue;
        }
        let r = readable(raw);
        if !out.contains(&r) {
            out.push(r);
        }
    }
    match out.len() {
        0 => "expected nothing more here".to_string(),
        1 => format!("expected {}", out.remove(0)),
        _ => format!("expected one of: {}", out.join(", ")),
    }
}

/// What kind of clause the tokens before `at` belong to, for "expected `.` at the end of the …".
fn clause_kind(tokens: &[Spanned], at: usize) -> &'static str {
    let start = tokens[..at]
        .iter()
        .rposition(|(_, t, _)| *t == Token::Dot)
        .map(|i| i + 1)
        .unwrap_or(0);
    let clause = &tokens[start..at];
    let has = |tok: &Token| clause.iter().any(|(_, t, _)| t == tok);
    if has(&Token::LArrow) {
        "rule"
    } else if has(&Token::RArrow) {
        "declaration"
    } else if has(&Token::DotInput) || has(&Token::DotOutput) || has(&Token::DotInclude) {
        "directive"
    } else {
        "fact"
    }
}

/// The innermost bracket opened in the clause before token `at` and not closed before it.
fn unclosed_bracket(tokens: &[Spanned], at: usize) -> Option<&Spanned> {
    let before = tokens.get(..at)?;
    let start = before
        .iter()
        .rposition(|(_, t, _)| *t == Token::Dot)
        .map_or(0, |i| i + 1);
    let mut open: Vec<&Spanned> = Vec::new();
    for tok in before.get(start..)? {
        match tok.1 {
            Token::LParen | Token::LBracket | Token::AggOpen => open.push(tok),
            Token::RParen | Token::RBracket | Token::AggClose => {
                open.pop();
            }
            _ => {}
        }
    }
    open.pop()
}

fn closer(open: &Token) -> &'static str {
    match open {
        Token::LBracket => "]",
        Token::AggOpen => ">>",
        _ => ")",
    }
}

fn unclosed_diag(open: &Spanned, end: Span, what: &str) -> Diagnostic {
    let (l, tok, r) = open;
    Diagnostic::error(format!("unclosed `{tok}`"), sp(*l, *r))
        .with_label(format!("this `{tok}` is never closed"))
        .with_secondary(end, what.to_string())
        .with_help(format!("add the missing `{}`", closer(tok)))
}

/// Converts a parse error into a diagnostic. `tokens` are the tokens the parser saw.
pub fn parse_error(err: &ParseError<usize, Token, UnexpectedChar>, tokens: &[Spanned], source: &str) -> Diagnostic {
    match err {
        ParseError::UnrecognizedToken {
            token: (l, tok, r),
            expected,
        } => {
            let index = tokens.partition_point(|(s, _, _)| *s < *l);
            let prev = index.checked_sub(1).and_then(|i| tokens.get(i));
            let wants_dot = expected.iter().any(|e| e.trim_matches('"') == ".");
            if let Some((pl, _, pr)) = prev {
                let on_new_line = source.get(*pr..*l).is_some_and(|gap| gap.contains('\n'));
                if wants_dot && on_new_line {
                    return Diagnostic::error(
                        format!("expected `.` at the end of the {}", clause_kind(tokens, index)),
                        sp(*pl, *pr),
                    )
                    .with_label("expected `.` after this")
                    .with_secondary(sp(*l, *r), format!("{} starts a new line", tok.describe()))
                    .with_help("every clause ends with `.`");
                }
            }
            if *tok == Token::Dot {
                if let Some(open) = unclosed_bracket(tokens, index) {
                    return unclosed_diag(open, sp(*l, *r), "the clause ends here");
                }
            }
            let mut d = Diagnostic::error(format!("unexpected {}", tok.describe()), sp(*l, *r))
                .with_label(expected_list(expected));
            if *tok == Token::Ident("date".to_string()) {
                d = d.with_help("a date literal is written `date(\"YYYY-MM-DD\")`");
            }
            if matches!(tok, Token::In | Token::True | Token::False) {
                d = d.with_help(format!("`{tok}` is a reserved word and cannot be used as a name"));
            }
            d
        }
        ParseError::UnrecognizedEof { location, expected } => {
            if let Some(open) = unclosed_bracket(tokens, tokens.len()) {
                return unclosed_diag(open, sp(*location, *location), "the input ends here");
            }
            let wants_dot = expected.iter().any(|e| e.trim_matches('"') == ".");
            match tokens.last() {
                Some((pl, _, pr)) if wants_dot => Diagnostic::error(
                    format!("expected `.` at the end of the {}", clause_kind(tokens, tokens.len())),
                    sp(*pl, *pr),
                )
                .with_label("expected `.` after this")
                .with_help("every clause ends with `.`"),
                _ => Diagnostic::error("unexpected end of input", sp(*location, *location))
                    .with_label(expected_list(expected)),
            }
        }
        ParseError::ExtraToken { token: (l, tok, r) } => {
            Diagnostic::error(format!("unexpected {}", tok.describe()), sp(*l, *r)).with_label("expected end of input")
        }
        ParseError::InvalidToken { location } => {
            Diagnostic::error("invalid token", sp(*location, *location)).with_label("not part of any token")
        }
        ParseError::User { error: UnexpectedChar } => {
            Diagnostic::error("unexpected character", sp(source.len(), source.len()))
        }
    }
}
