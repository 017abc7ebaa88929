//! Soufflé's `match(pattern, s)`: `std::regex_match(s, std::regex(pattern))`, the
//! ECMAScript grammar of C++'s `<regex>` over the string's bytes, matching the whole
//! string. [`translate`] rewrites such a pattern into an equivalent pattern of the Rust
//! `regex` crate, to be compiled for bytes with Unicode off
//! ([`compile_bytes`]), so that both match the same strings:
//!
//! - the result is anchored (`\A(?:…)\z`): `regex_match` matches the whole string;
//! - `.` is any byte but `\n` and `\r` (ECMAScript's line terminators, as C++ reads a
//!   `char` pattern);
//! - a non-ASCII character is its UTF-8 bytes, each an atom (C++ sees bytes, so `é+`
//!   repeats the last byte of `é`);
//! - escapes are those of ECMAScript (`\d \w \s \b \n \t \xHH \uHHHH \cX \0`, escaped
//!   punctuation); inside a class `\b` is a backspace, `[` is itself and `&`, `~` are
//!   escaped (Rust reads `&&`, `~~` and `--` as class operations);
//! - POSIX classes `[[:alpha:]]` mean the same in both.
//!
//! What the Rust crate cannot express is refused: backreferences (`\1`), lookahead
//! (`(?=`, `(?!`), empty classes `[]`, `[^]`, collating elements `[[.a.]]`, `[[=a=]]`,
//! `\u` above `\u00FF`, and letter escapes ECMAScript does not define.

/// Why a pattern cannot be translated: a message and the byte range of the pattern it
/// concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegexError {
    pub msg: String,
    pub at: std::ops::Range<usize>,
}

fn err<T>(msg: impl Into<String>, at: std::ops::Range<usize>) -> Result<T, RegexError> {
    Err(RegexError { msg: msg.into(), at })
}

/// The Rust `regex` pattern (for [`compile_bytes`]) matching exactly the strings Soufflé's
/// `match(pattern, s)` accepts.
pub fn translate(pattern: &str) -> Result<String, RegexError> {
    let b = pattern.as_bytes();
    let mut out = String::from(r"\A(?:");
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\\' => {
                let (s, n) = escape(b, i, false)?;
                out.push_str(&s);
                i += n;
            }
            b'.' => {
                out.push_str(r"[^\n\r]");
                i += 1;
            }
            b'(' if b.get(i + 1) == Some(&b'?') => {
                if b.get(i + 2) == Some(&b':') {
                    out.push_str("(?:");
                    i += 3;
                } else {
                    let what = match b.get(i + 2) {
                        Some(b'=') | Some(b'!') => "lookahead (`(?=…)`, `(?!…)`)",
                        _ => "a group of this kind",
                    };
                    return err(format!("{what} in `match` is not supported in Fox yet"), i..i + 3);
                }
            }
            b'[' => {
                i = class(b, i, &mut out)?;
            }
            0x80.. => {
                hex_byte(&mut out, c);
                i += 1;
            }
            _ => {
                out.push(c as char);
                i += 1;
            }
        }
    }
    out.push_str(r")\z");
    Ok(out)
}

/// Compiles a pattern of [`translate`] (or any pattern in the same dialect) for byte
/// strings, with Unicode off.
pub fn compile_bytes(rust_pattern: &str) -> Result<regex::bytes::Regex, String> {
    regex::bytes::RegexBuilder::new(rust_pattern)
        .unicode(false)
        .size_limit(64 << 20)
        .build()
        .map_err(|e| match e {
            regex::Error::Syntax(s) => s
                .lines()
                .last()
                .unwrap_or_default()
                .trim()
                .trim_start_matches("error: ")
                .to_string(),
            regex::Error::CompiledTooBig(_) => "the regular expression is too large".to_string(),
            other => other.to_string(),
        })
}

/// The Rust pattern (for [`compile_bytes`]) matching the strings that hold `sub`.
pub fn contains(sub: &str) -> String {
    let mut out = String::from(r"\A(?s:.)*?");
    for &c in sub.as_bytes() {
        hex_byte(&mut out, c);
    }
    out.push_str(r"(?s:.)*\z");
    out
}

fn hex_byte(out: &mut String, c: u8) {
    out.push_str(&format!(r"\x{c:02X}"));
}

/// A byte as a literal atom (escaped where Rust gives it a meaning).
fn literal(out: &mut String, c: u8) {
    if c.is_ascii_alphanumeric() {
        out.push(c as char);
    } else {
        hex_byte(out, c);
    }
}

/// The escape at `b[i] == '\\'`: its translation and its length in bytes.
fn escape(b: &[u8], i: usize, in_class: bool) -> Result<(String, usize), RegexError> {
    let Some(&c) = b.get(i + 1) else {
        return err("the pattern ends with a lone `\\`", i..i + 1);
    };
    let hex = |from: usize, n: usize| -> Option<u32> {
        let digits = b.get(from..from + n)?;
        if !digits.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    };
    let mut out = String::new();
    let n = match c {
        b'd' | b'D' | b'w' | b'W' | b's' | b'S' => {
            out.push('\\');
            out.push(c as char);
            2
        }
        b'b' | b'B' if !in_class => {
            out.push('\\');
            out.push(c as char);
            2
        }
        b'b' => {
            out.push_str(r"\x08");
            2
        }
        b'n' | b'r' | b't' | b'f' | b'v' => {
            out.push('\\');
            out.push(c as char);
            2
        }
        b'0' if !b.get(i + 2).is_some_and(u8::is_ascii_digit) => {
            out.push_str(r"\x00");
            2
        }
        b'1'..=b'9' => return err("backreferences in `match` are not supported in Fox yet", i..i + 2),
        b'x' => {
            let Some(v) = hex(i + 2, 2) else {
                return err("`\\x` must be followed by two hexadecimal digits", i..i + 2);
            };
            hex_byte(&mut out, v as u8);
            4
        }
        b'u' => {
            let Some(v) = hex(i + 2, 4) else {
                return err("`\\u` must be followed by four hexadecimal digits", i..i + 2);
            };
            if v > 0xFF {
                return err(
                    "`\\u` above `\\u00FF` in `match` is not supported in Fox yet (Soufflé matches bytes)",
                    i..i + 6,
                );
            }
            hex_byte(&mut out, v as u8);
            6
        }
        b'c' if b.get(i + 2).is_some_and(u8::is_ascii_alphabetic) => {
            hex_byte(&mut out, b[i + 2] % 32);
            3
        }
        _ if c.is_ascii_alphanumeric() => {
            return err(
                format!("the escape `\\{}` is not one of ECMAScript's", c as char),
                i..i + 2,
            )
        }
        // An escaped punctuation character (or byte) is itself.
        _ => {
            literal(&mut out, c);
            2
        }
    };
    Ok((out, n))
}

/// The class opening at `b[start] == '['`, written to `out`; returns the index after it.
fn class(b: &[u8], start: usize, out: &mut String) -> Result<usize, RegexError> {
    let mut i = start + 1;
    out.push('[');
    if b.get(i) == Some(&b'^') {
        out.push('^');
        i += 1;
    }
    if b.get(i) == Some(&b']') {
        return err(
            "empty classes (`[]`, `[^]`) in `match` are not supported in Fox yet",
            start..i + 1,
        );
    }
    loop {
        let Some(&c) = b.get(i) else {
            return err("the class is not closed by `]`", start..b.len());
        };
        match c {
            b']' => {
                out.push(']');
                return Ok(i + 1);
            }
            b'\\' => {
                let (s, n) = escape(b, i, true)?;
                out.push_str(&s);
                i += n;
            }
            b'[' => match b.get(i + 1) {
                Some(b':') => {
                    let Some(len) = b[i + 2..].windows(2).position(|w| w == b":]") else {
                        return err("the class `[:` is not closed by `:]`", i..b.len());
                    };
                    let name = &b[i..i + 2 + len + 2];
                    out.push_str(std::str::from_utf8(name).unwrap_or_default());
                    i += name.len();
                }
                Some(b'.') | Some(b'=') => {
                    return err(
                        "collating elements (`[.a.]`, `[=a=]`) in `match` are not supported in Fox yet",
                        i..i + 2,
                    )
                }
                _ => {
                    out.push_str(r"\[");
                    i += 1;
                }
            },
            b'&' | b'~' => {
                hex_byte(out, c);
                i += 1;
            }
            b'-' => {
                // A range's dash, or a literal one at either end; `--` would be Rust's
                // class difference, so a dash after a dash is escaped.
                if out.ends_with('-') {
                    out.push_str(r"\x2D");
                } else {
                    out.push('-');
                }
                i += 1;
            }
            0x80.. => {
                hex_byte(out, c);
                i += 1;
            }
            _ => {
                out.push(c as char);
                i += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mb(pattern: &str, s: &[u8]) -> bool {
        let p = translate(pattern).unwrap_or_else(|e| panic!("{pattern:?}: {e:?}"));
        compile_bytes(&p)
            .unwrap_or_else(|e| panic!("{pattern:?} → {p:?}: {e}"))
            .is_match(s)
    }

    fn m(pattern: &str, s: &str) -> bool {
        mb(pattern, s.as_bytes())
    }

    #[test]
    fn whole_string_and_alternatives() {
        assert!(m("a.c", "abc"));
        assert!(!m("a.c", "abcd"));
        assert!(!m("b", "abc"));
        assert!(m("a|ab", "ab"));
        assert!(m(".*an.*", "banana"));
        assert!(m("", ""));
        assert!(!m("", "x"));
    }

    #[test]
    fn dot_is_a_byte_but_not_a_line_break() {
        assert!(!m("a.b", "a\nb"));
        assert!(!m("a.b", "a\rb"));
        assert!(m("a..b", "aéb"));
        assert!(!m("a.b", "aéb"));
        // A quantifier after a non-ASCII character repeats its last byte.
        assert!(mb("é+", b"\xC3\xA9\xA9"));
        assert!(!m("é+", "éé"));
    }

    #[test]
    fn escapes_and_classes() {
        assert!(m(r"\d+", "2024"));
        assert!(!m(r"\d+", "20x4"));
        assert!(m(r"\w+\s\w+", "hello world"));
        assert!(m(r"[a-c]+", "abcabc"));
        assert!(m(r"[^a-c]+", "xyz"));
        assert!(m(r"[[:alpha:]]+[[:digit:]]", "abc1"));
        assert!(m(r"a\.b", "a.b"));
        assert!(!m(r"a\.b", "axb"));
        assert!(m(r"\x41\u0042", "AB"));
        assert!(m(r"[a&b~]+", "a&b~"));
        assert!(m(r"[a[]+", "[a["));
        assert!(m(r"[a-]+", "a-a"));
        assert!(m(r"(?:ab){2,3}", "ababab"));
        assert!(m(r"\bfoo\b.*", "foo bar"));
        assert!(m(r"[\b]", "\u{8}"));
        assert!(m(r"\cJ", "\n"));
        assert!(m(r"x\0y", "x\0y"));
        assert!(m(r"[é]+", "é"));
        assert!(m(r"a\/b", "a/b"));
        assert!(m("a#b c", "a#b c"));
    }

    #[test]
    fn refused_constructs() {
        for p in [
            r"(a)\1", "(?=a)a", "(?!a)b", "[]", "[^]", "[[.a.]]", r"\u0100", r"\p{L}", r"\k", "(?i)a", "[ab", "ab\\",
        ] {
            assert!(translate(p).is_err(), "{p:?} should be refused");
        }
    }

    #[test]
    fn contains_is_a_substring_test() {
        let r = compile_bytes(&contains("a%b_.")).unwrap();
        assert!(r.is_match(b"xxa%b_.yy\nz"));
        assert!(!r.is_match(b"a%b_x"));
        assert!(compile_bytes(&contains("")).unwrap().is_match(b""));
    }
}
