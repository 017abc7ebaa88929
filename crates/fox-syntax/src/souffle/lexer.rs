//! The tokens of Soufflé's language.

use crate::ast::Span;
use crate::diag::Diagnostic;

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    /// An identifier (a relation, variable, type or functor name; may contain `?`).
    Ident(String),
    /// `.decl`, `.input`, … (the word after the dot).
    Directive(String),
    /// An integer literal (decimal, `0x…` or `0b…`), its value.
    Int(i64),
    /// An integer literal with a `u` suffix.
    Unsigned(u64),
    /// A float literal as written.
    Float(String),
    /// A string literal with its escapes resolved.
    Str(String),
    /// Punctuation and operators: `( ) { } [ ] , . : ; ! = != < <= > >= + - * / % ^ :- <: | $ @ _`.
    Punct(&'static str),
}

impl Tok {
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Directive(s) => format!("`.{s}`"),
            Tok::Int(n) => format!("`{n}`"),
            Tok::Unsigned(n) => format!("`{n}u`"),
            Tok::Float(s) => format!("`{s}`"),
            Tok::Str(_) => "a string".to_string(),
            Tok::Punct(p) => format!("`{p}`"),
        }
    }
}

const PUNCTS: &[&str] = &[
    ":-", "<:", "!=", "<=", ">=", "(", ")", "{", "}", "[", "]", ",", ".", ":", ";", "!", "=", "<", ">", "+", "-", "*",
    "/", "%", "^", "|", "$", "@",
];

/// The tokens of `src` with their spans, and the lexical errors (the lexer skips what it
/// cannot read and goes on).
pub fn lex(src: &str) -> (Vec<(Tok, Span)>, Vec<Diagnostic>) {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut diags = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if b[i..].starts_with(b"/*") {
            let start = i;
            match src[i + 2..].find("*/") {
                Some(k) => i = i + 2 + k + 2,
                None => {
                    diags.push(
                        Diagnostic::error("unterminated block comment", Span::new(start, start + 2))
                            .with_label("this comment is never closed"),
                    );
                    i = b.len();
                }
            }
            continue;
        }
        let start = i;
        if c == b'#' {
            let end = src[i..].find('\n').map_or(b.len(), |k| i + k);
            diags.push(
                Diagnostic::error(
                    "C preprocessor lines are not supported in Fox yet",
                    Span::new(start, end),
                )
                .with_label("a preprocessor directive")
                .with_help(
                    "Fox reads Soufflé programs as `souffle --no-preprocessor` does; expand the directive first",
                ),
            );
            i = end;
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' || c == b'?' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'?') {
                i += 1;
            }
            out.push((Tok::Ident(src[start..i].to_string()), Span::new(start, i)));
            continue;
        }
        if c == b'.' && i + 1 < b.len() && b[i + 1].is_ascii_alphabetic() {
            // A directive only where a clause may start: after the `.` that ends a
            // clause, a directive follows whitespace, so `.decl` is always preceded by
            // whitespace or the start of the file (a `.` after a number is a full stop).
            let at_start = start == 0 || b[start - 1].is_ascii_whitespace() || matches!(b[start - 1], b'/' | b'{');
            if at_start {
                i += 1;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                out.push((Tok::Directive(src[start + 1..i].to_string()), Span::new(start, i)));
                continue;
            }
        }
        if c.is_ascii_digit() {
            i = number(src, start, &mut out, &mut diags);
            continue;
        }
        if c == b'"' {
            i += 1;
            let mut s = String::new();
            let mut closed = false;
            while i < b.len() {
                let ch = src[i..].chars().next().unwrap_or('\0');
                if ch == '"' {
                    i += 1;
                    closed = true;
                    break;
                }
                if ch == '\n' {
                    break;
                }
                if ch == '\\' && i + 1 < b.len() {
                    let e = src[i + 1..].chars().next().unwrap_or('\0');
                    let v = match e {
                        'n' => Some('\n'),
                        't' => Some('\t'),
                        'r' => Some('\r'),
                        '"' => Some('"'),
                        '\\' => Some('\\'),
                        '\'' => Some('\''),
                        _ => None,
                    };
                    match v {
                        Some(v) => {
                            s.push(v);
                            i += 1 + e.len_utf8();
                        }
                        None => {
                            diags.push(
                                Diagnostic::error(
                                    format!("unknown escape `\\{e}` in a string"),
                                    Span::new(i, i + 1 + e.len_utf8()),
                                )
                                .with_label("not an escape")
                                .with_help("the escapes are \\\" \\\\ \\n \\t \\r \\'"),
                            );
                            i += 1 + e.len_utf8();
                        }
                    }
                    continue;
                }
                s.push(ch);
                i += ch.len_utf8();
            }
            if !closed {
                diags.push(
                    Diagnostic::error("unterminated string", Span::new(start, i))
                        .with_label("this string is not closed on its line"),
                );
                continue;
            }
            out.push((Tok::Str(s), Span::new(start, i)));
            continue;
        }
        if let Some(p) = PUNCTS.iter().find(|p| b[i..].starts_with(p.as_bytes())) {
            i += p.len();
            out.push((Tok::Punct(p), Span::new(start, i)));
            continue;
        }
        let ch = src[i..].chars().next().unwrap_or('\0');
        i += ch.len_utf8().max(1);
        diags.push(
            Diagnostic::error(format!("unexpected character `{ch}`"), Span::new(start, i))
                .with_label("not part of Soufflé's language"),
        );
    }
    (out, diags)
}

/// Reads the number starting at `start`; returns where it ends.
fn number(src: &str, start: usize, out: &mut Vec<(Tok, Span)>, diags: &mut Vec<Diagnostic>) -> usize {
    let b = src.as_bytes();
    let mut i = start;
    let radix_prefix = |p: &[u8]| b[start..].len() > 2 && b[start..].starts_with(p);
    let (radix, digits_from) = if radix_prefix(b"0x") || radix_prefix(b"0X") {
        (16, start + 2)
    } else if radix_prefix(b"0b") || radix_prefix(b"0B") {
        (2, start + 2)
    } else {
        (10, start)
    };
    i = i.max(digits_from);
    while i < b.len() && (b[i] as char).is_digit(radix) {
        i += 1;
    }
    let mut float = false;
    if radix == 10 && i + 1 < b.len() && b[i] == b'.' && b[i + 1].is_ascii_digit() {
        float = true;
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
            let mut j = i + 1;
            if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
                j += 1;
            }
            if j < b.len() && b[j].is_ascii_digit() {
                i = j;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
            }
        }
    }
    let text = &src[start..i];
    let span = Span::new(start, i);
    if float {
        out.push((Tok::Float(text.to_string()), span));
        return i;
    }
    let digits = &src[digits_from..i];
    if i < b.len() && b[i] == b'u' {
        let span = Span::new(start, i + 1);
        match u64::from_str_radix(digits, radix) {
            Ok(n) => out.push((Tok::Unsigned(n), span)),
            Err(_) => diags.push(Diagnostic::error("unsigned literal out of range", span).with_label("too large")),
        }
        return i + 1;
    }
    // Hexadecimal and binary literals give the bits of the 64-bit number (Soufflé reads
    // `0xFFFFFFFFFFFFFFFF` as -1).
    let value = if radix == 10 {
        digits.parse::<i64>().ok()
    } else {
        u64::from_str_radix(digits, radix).ok().map(|n| n as i64)
    };
    match value {
        Some(n) => out.push((Tok::Int(n), span)),
        None => diags.push(
            Diagnostic::error("number literal out of range", span)
                .with_label("does not fit a 64-bit `number`")
                .with_help("a `number` is a 64-bit signed integer"),
        ),
    }
    i
}
