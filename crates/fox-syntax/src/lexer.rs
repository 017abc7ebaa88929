//! The lexer: source text to tokens with byte spans.
//!
//! Lexical errors never stop lexing. Each one is recorded as a [`Diagnostic`] and the
//! lexer goes on: a bad character is dropped, a string with a bad escape or a missing
//! closing quote still yields a string token, an invalid date still yields a date token,
//! so the parser can report the errors that follow.
//!
//! Reserved words: `in`, `true` and `false` cannot be used as names. The directive words
//! `from`, `sep`, `order`, `by`, `asc`, `desc` and `limit` are keywords only inside
//! `.input`/`.output` directives; the grammar accepts them as names everywhere else.
//! `agg` is a name too: only `agg<<` (no space) opens an aggregation.

use crate::ast::Span;
use crate::diag::Diagnostic;
use logos::{Logos, Skip};
use std::fmt;

/// Lexical diagnostics collected while lexing.
#[derive(Default, Debug)]
pub struct LexExtras {
    pub diags: Vec<Diagnostic>,
}

/// The error logos reports for input that matches no token.
#[derive(Default, Debug, Clone, PartialEq)]
pub struct UnexpectedChar;

#[derive(Logos, Debug, Clone, PartialEq)]
#[logos(extras = LexExtras)]
#[logos(error = UnexpectedChar)]
#[logos(skip r"[ \t\r\n\f]+")]
#[logos(skip(r"//[^\n]*", allow_greedy = true))]
pub enum Token {
    /// `/* … */`; never produced: the callback skips the comment.
    #[token("/*", block_comment)]
    BlockComment,

    #[regex(r"[A-Za-z_][A-Za-z0-9_]*(:[A-Za-z_][A-Za-z0-9_]*)*", |l| l.slice().to_string())]
    Ident(String),
    #[token("_", priority = 10)]
    Underscore,

    #[regex(r"[0-9]+", lex_int)]
    Int(u64),
    #[regex(r"[0-9]+\.[0-9]+", |l| l.slice().to_string())]
    Decimal(String),
    #[regex(r"[0-9]+(\.[0-9]+)?[eE][+-]?[0-9]+f?", |l| l.slice().to_string())]
    #[regex(r"[0-9]+(\.[0-9]+)?f", |l| l.slice().to_string())]
    Float(String),
    #[token("\"", lex_string)]
    Str(String),
    // The text holds no quote and no backslash: `date("\")" + x)` is the
    // predicate `date` applied to a string that starts with an escaped quote.
    #[regex(r#"date\("[^"\\\n]*"\)"#, lex_date)]
    Date(String),
    #[token("true")]
    True,
    #[token("false")]
    False,

    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token(",")]
    Comma,
    #[token(";")]
    Semi,
    #[token(".")]
    Dot,
    #[token("!")]
    Bang,
    #[token("=")]
    Eq,
    #[token("!=")]
    Ne,
    #[token("<")]
    Lt,
    #[token("<=")]
    Le,
    #[token(">")]
    Gt,
    #[token(">=")]
    Ge,
    #[token("+")]
    Plus,
    #[token("-")]
    Minus,
    #[token("*")]
    Star,
    #[token("/")]
    Slash,
    /// `<-` or `←`
    #[token("<-")]
    #[token("←")]
    LArrow,
    /// `->`, `→` or `−>`
    #[token("->")]
    #[token("→")]
    #[token("−>")]
    RArrow,
    #[token("agg<<")]
    AggOpen,
    #[token(">>")]
    AggClose,

    #[token(".input")]
    DotInput,
    #[token(".output")]
    DotOutput,
    #[token(".include")]
    DotInclude,
    #[token("from")]
    From,
    #[token("sep")]
    Sep,
    #[token("key")]
    Key,
    #[token("order")]
    Order,
    #[token("by")]
    By,
    #[token("asc")]
    Asc,
    #[token("desc")]
    Desc,
    #[token("limit")]
    Limit,
    #[token("in")]
    In,
}

impl Token {
    /// A short description for error messages: "identifier `foo`", "`)`".
    pub fn describe(&self) -> String {
        match self {
            Token::Ident(s) => format!("identifier `{s}`"),
            Token::Int(n) => format!("integer `{n}`"),
            Token::Decimal(s) => format!("decimal `{s}`"),
            Token::Float(s) => format!("float `{s}`"),
            Token::Str(_) => "string literal".to_string(),
            Token::Date(s) => format!("date literal `date(\"{s}\")`"),
            other => format!("`{other}`"),
        }
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Token::BlockComment => "/*",
            Token::Ident(s) => s,
            Token::Underscore => "_",
            Token::Int(n) => return write!(f, "{n}"),
            Token::Decimal(s) | Token::Float(s) => s,
            Token::Str(s) => return write!(f, "{s:?}"),
            Token::Date(s) => return write!(f, "date(\"{s}\")"),
            Token::True => "true",
            Token::False => "false",
            Token::LParen => "(",
            Token::RParen => ")",
            Token::LBracket => "[",
            Token::RBracket => "]",
            Token::Comma => ",",
            Token::Semi => ";",
            Token::Dot => ".",
            Token::Bang => "!",
            Token::Eq => "=",
            Token::Ne => "!=",
            Token::Lt => "<",
            Token::Le => "<=",
            Token::Gt => ">",
            Token::Ge => ">=",
            Token::Plus => "+",
            Token::Minus => "-",
            Token::Star => "*",
            Token::Slash => "/",
            Token::LArrow => "<-",
            Token::RArrow => "->",
            Token::AggOpen => "agg<<",
            Token::AggClose => ">>",
            Token::DotInput => ".input",
            Token::DotOutput => ".output",
            Token::DotInclude => ".include",
            Token::From => "from",
            Token::Sep => "sep",
            Token::Key => "key",
            Token::Order => "order",
            Token::By => "by",
            Token::Asc => "asc",
            Token::Desc => "desc",
            Token::Limit => "limit",
            Token::In => "in",
        };
        f.write_str(s)
    }
}

/// A token with its byte span.
pub type Spanned = (usize, Token, usize);

/// Lexes the whole source. Returns every token and every lexical error.
pub fn lex(source: &str) -> (Vec<Spanned>, Vec<Diagnostic>) {
    let mut lexer = Token::lexer(source);
    let mut tokens = Vec::new();
    let mut diags = Vec::new();
    while let Some(result) = lexer.next() {
        let span = lexer.span();
        match result {
            Ok(tok) => tokens.push((span.start, tok, span.end)),
            Err(UnexpectedChar) => {
                let text = lexer.slice();
                let shown: String = text.chars().take(1).collect();
                let mut d = Diagnostic::error(
                    format!("unexpected character `{}`", shown.escape_debug()),
                    Span::new(span.start, span.end),
                )
                .with_label("not part of any token");
                if shown == ":" {
                    d = d.with_help("a namespaced name has no spaces around the colon: `lineitem:shipdate`");
                } else if shown == "\u{2212}" {
                    d = d.with_help("use `-` for minus; `−>` is accepted only as an arrow");
                }
                diags.push(d);
            }
        }
        diags.append(&mut lexer.extras.diags);
    }
    diags.append(&mut lexer.extras.diags);
    (tokens, diags)
}

fn lex_int(lex: &mut logos::Lexer<Token>) -> u64 {
    match lex.slice().parse::<u64>() {
        Ok(n) => n,
        Err(_) => {
            let span = lex.span();
            lex.extras.diags.push(
                Diagnostic::error("integer literal is too large", Span::new(span.start, span.end))
                    .with_label("does not fit in 64 bits")
                    .with_help(
                        "the largest integer is 9223372036854775807; write a decimal or float for larger values",
                    ),
            );
            0
        }
    }
}

fn block_comment(lex: &mut logos::Lexer<Token>) -> Skip {
    match lex.remainder().find("*/") {
        Some(end) => lex.bump(end + 2),
        None => {
            let start = lex.span().start;
            lex.extras.diags.push(
                Diagnostic::error("unterminated block comment", Span::new(start, start + 2))
                    .with_label("this comment is never closed")
                    .with_help("close it with `*/`"),
            );
            let rest = lex.remainder().len();
            lex.bump(rest);
        }
    }
    Skip
}

/// Lexes a string literal after its opening quote, resolving escapes. A string ends at
/// the closing quote; a line break or the end of input before it is an error.
fn lex_string(lex: &mut logos::Lexer<Token>) -> String {
    let start = lex.span().start;
    let rest = lex.remainder();
    let mut value = String::new();
    let mut chars = rest.char_indices().peekable();
    let mut consumed = rest.len();
    let mut terminated = false;
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => {
                consumed = i + 1;
                terminated = true;
                break;
            }
            '\n' => {
                consumed = i;
                break;
            }
            '\\' => match chars.peek().copied() {
                Some((_, e @ ('"' | '\\' | 'n' | 't' | 'r'))) => {
                    chars.next();
                    value.push(match e {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        other => other,
                    });
                }
                Some((j, e)) if e != '\n' => {
                    chars.next();
                    let at = start + 1 + i;
                    lex.extras.diags.push(
                        Diagnostic::error(
                            format!("unknown escape sequence `\\{}` in string", e.escape_debug()),
                            Span::new(at, start + 1 + j + e.len_utf8()),
                        )
                        .with_label("unknown escape")
                        .with_help("the escapes are `\\\"`, `\\\\`, `\\n`, `\\t` and `\\r`"),
                    );
                    value.push('\\');
                    value.push(e);
                }
                _ => {
                    let at = start + 1 + i;
                    lex.extras.diags.push(
                        Diagnostic::error("escape sequence at the end of the line", Span::new(at, at + 1))
                            .with_label("nothing to escape here"),
                    );
                }
            },
            other => value.push(other),
        }
    }
    lex.bump(consumed);
    if !terminated {
        let end = lex.span().end;
        let mut d = Diagnostic::error("unterminated string literal", Span::new(start, end))
            .with_label("this string has no closing quote");
        // A string broken over two lines: the next line holds its closing quote when it has
        // an odd number of quotes. The string then ends there, so that quote does not open
        // another (unterminated) string.
        if let Some(next) = lex.remainder().strip_prefix('\n') {
            let line = next.split('\n').next().unwrap_or_default();
            let quotes: Vec<usize> = line
                .char_indices()
                .filter(|&(i, c)| c == '"' && !line[..i].ends_with('\\'))
                .map(|(i, _)| i)
                .collect();
            if quotes.len() % 2 == 1 {
                value.push('\n');
                value.push_str(&line[..quotes[0]]);
                lex.bump(1 + quotes[0] + 1);
                d = d.with_note("note: the string goes on up to the quote on the next line");
                d = d.with_help("a string cannot span lines; write a line break as `\\n`");
                lex.extras.diags.push(d);
                return value;
            }
        }
        lex.extras
            .diags
            .push(d.with_help("close the string with `\"` on the same line"));
    }
    value
}

fn lex_date(lex: &mut logos::Lexer<Token>) -> String {
    let slice = lex.slice();
    // The slice is `date("` + text + `")`.
    let text = slice
        .strip_prefix("date(\"")
        .and_then(|s| s.strip_suffix("\")"))
        .unwrap_or_default()
        .to_string();
    if let Err(why) = validate_date(&text) {
        let span = lex.span();
        lex.extras.diags.push(
            Diagnostic::error(format!("invalid date `{text}`: {why}"), Span::new(span.start, span.end))
                .with_label("not a calendar date")
                .with_help("dates are written `date(\"YYYY-MM-DD\")`"),
        );
    }
    text
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

fn is_leap(year: u32) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

/// The number of days in `month` (1-12) of `year`.
pub fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Checks that `text` is a real calendar date written `YYYY-MM-DD`.
pub fn validate_date(text: &str) -> Result<(), String> {
    let parts: Vec<&str> = text.split('-').collect();
    let well_formed = parts.len() == 3
        && parts
            .iter()
            .zip([4, 2, 2])
            .all(|(p, n)| p.len() == n && p.bytes().all(|b| b.is_ascii_digit()));
    let [y, m, d] = parts.as_slice() else {
        return Err("dates are written YYYY-MM-DD".to_string());
    };
    if !well_formed {
        return Err("dates are written YYYY-MM-DD".to_string());
    }
    let (Ok(year), Ok(month), Ok(day)) = (y.parse::<u32>(), m.parse::<u32>(), d.parse::<u32>()) else {
        return Err("dates are written YYYY-MM-DD".to_string());
    };
    if !(1..=12).contains(&month) {
        return Err(format!("there is no month {month}"));
    }
    let max = days_in_month(year, month);
    if day == 0 || day > max {
        let name = MONTHS.get(month as usize - 1).copied().unwrap_or("that month");
        return Err(if month == 2 {
            format!("{name} has {max} days in {year}")
        } else {
            format!("{name} has {max} days")
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(src: &str) -> Vec<Token> {
        let (t, d) = lex(src);
        assert!(d.is_empty(), "unexpected diagnostics for {src:?}: {d:?}");
        t.into_iter().map(|(_, t, _)| t).collect()
    }

    #[test]
    fn numbers_and_fact_dot() {
        assert_eq!(
            toks("edge(1, 2)."),
            vec![
                Token::Ident("edge".into()),
                Token::LParen,
                Token::Int(1),
                Token::Comma,
                Token::Int(2),
                Token::RParen,
                Token::Dot
            ]
        );
        assert_eq!(toks("2."), vec![Token::Int(2), Token::Dot]);
        assert_eq!(toks("0.06"), vec![Token::Decimal("0.06".into())]);
        assert_eq!(
            toks("1.5e3 1.5f 2E-4 7f"),
            vec![
                Token::Float("1.5e3".into()),
                Token::Float("1.5f".into()),
                Token::Float("2E-4".into()),
                Token::Float("7f".into())
            ]
        );
        assert_eq!(toks("1.e3"), vec![Token::Int(1), Token::Dot, Token::Ident("e3".into())]);
    }

    #[test]
    fn identifiers_and_keywords() {
        assert_eq!(
            toks("lineitem:shipdate"),
            vec![Token::Ident("lineitem:shipdate".into())]
        );
        assert!(lex("p : q").1.len() == 1);
        assert_eq!(
            toks("_ _x from in"),
            vec![Token::Underscore, Token::Ident("_x".into()), Token::From, Token::In]
        );
        assert_eq!(toks("fromage"), vec![Token::Ident("fromage".into())]);
        assert_eq!(
            toks("agg<< >> agg < <"),
            vec![
                Token::AggOpen,
                Token::AggClose,
                Token::Ident("agg".into()),
                Token::Lt,
                Token::Lt
            ]
        );
    }

    #[test]
    fn arrows_and_directives() {
        assert_eq!(
            toks("<- ← -> → −>"),
            vec![
                Token::LArrow,
                Token::LArrow,
                Token::RArrow,
                Token::RArrow,
                Token::RArrow
            ]
        );
        assert_eq!(
            toks(".input .output ."),
            vec![Token::DotInput, Token::DotOutput, Token::Dot]
        );
        assert_eq!(toks("!= ! <= >="), vec![Token::Ne, Token::Bang, Token::Le, Token::Ge]);
    }

    #[test]
    fn strings_and_comments() {
        assert_eq!(toks(r#""a\"b\\c\nd\te""#), vec![Token::Str("a\"b\\c\nd\te".into())]);
        assert_eq!(
            toks("a /* x \n y */ b // c\n d"),
            vec![
                Token::Ident("a".into()),
                Token::Ident("b".into()),
                Token::Ident("d".into())
            ]
        );
        let (_, d) = lex("\"abc\nx");
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].message, "unterminated string literal");
        assert_eq!(d[0].span(), Span::new(0, 4));
        let (t, d) = lex(r#""a\qb" x"#);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].span(), Span::new(2, 4));
        assert_eq!(t.len(), 2);
        let (_, d) = lex("a /* never closed");
        assert_eq!(d[0].message, "unterminated block comment");
        let (_, d) = lex("\"abc\\");
        assert_eq!(d.len(), 2);
    }

    #[test]
    fn string_broken_over_two_lines_is_one_error() {
        // The quote on the next line closes the broken string instead of opening another.
        let (t, d) = lex("e(\"ab\ncd\").");
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].message, "unterminated string literal");
        assert_eq!(d[0].span(), Span::new(2, 5));
        assert_eq!(
            t.into_iter().map(|(_, t, _)| t).collect::<Vec<_>>(),
            vec![
                Token::Ident("e".into()),
                Token::LParen,
                Token::Str("ab\ncd".into()),
                Token::RParen,
                Token::Dot
            ]
        );
        // A next line with balanced quotes is a clause of its own.
        let (t, d) = lex("\"ab\nx(\"c\").");
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(t.iter().any(|(_, t, _)| *t == Token::Str("c".into())));
        // The whole file parses with that one error.
        let (_, d) = crate::parse("e(x) -> string(x).\ne(\"ab\ncd\").\n");
        assert_eq!(d.len(), 1, "{d:?}");
    }

    #[test]
    fn dates() {
        assert_eq!(toks(r#"date("1998-09-02")"#), vec![Token::Date("1998-09-02".into())]);
        assert_eq!(
            toks("date(d)"),
            vec![
                Token::Ident("date".into()),
                Token::LParen,
                Token::Ident("d".into()),
                Token::RParen
            ]
        );
        // An escaped quote ends no date literal: this is an atom of `date`.
        assert_eq!(
            toks(r#"date("\")" + a)"#),
            vec![
                Token::Ident("date".into()),
                Token::LParen,
                Token::Str("\")".into()),
                Token::Plus,
                Token::Ident("a".into()),
                Token::RParen
            ]
        );
        let (_, d) = lex(r#"x = date("1998-02-30")"#);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].message, "invalid date `1998-02-30`: February has 28 days in 1998");
        assert_eq!(d[0].span(), Span::new(4, 22));
        assert!(validate_date("2000-02-29").is_ok());
        assert!(validate_date("1900-02-29").is_err());
        assert!(validate_date("1998-13-01").is_err());
        assert!(validate_date("1998-1-01").is_err());
        assert!(validate_date("1998-04-31").is_err());
    }

    #[test]
    fn integer_overflow_is_an_error() {
        let (t, d) = lex("99999999999999999999999");
        assert_eq!(t.len(), 1);
        assert_eq!(d.len(), 1);
        assert_eq!(toks("18446744073709551615"), vec![Token::Int(u64::MAX)]);
    }
}
