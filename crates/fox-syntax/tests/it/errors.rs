//! Syntax errors: every error in a file is reported, each with the right span and a
//! message in the user's terms.

use fox_syntax::ast::Span;
use fox_syntax::diag::{render, Diagnostic};
use fox_syntax::parse;

fn errors(src: &str) -> Vec<Diagnostic> {
    let (_, diags) = parse(src);
    assert!(diags.iter().all(|d| d.is_error()));
    diags
}

/// The source text under the diagnostic's primary span.
fn at<'a>(src: &'a str, d: &Diagnostic) -> &'a str {
    &src[d.span().range()]
}

#[test]
fn several_errors_are_all_reported() {
    let src = "edge(1, 2).\n\
               p(x) <- q(x)), r(x).\n\
               ok(x) <- edge(x, _).\n\
               s(x) <- t(x) u(x).\n\
               w(x) <- x = \"unterminated.\n\
               also_ok(x) <- ok(x).\n\
               d(x) <- x = date(\"1998-02-30\").\n\
               e(x) <- e(x), x + 1.\n\
               last(x) <- ok(x).\n";
    let (program, diags) = parse(src);
    let messages: Vec<&str> = diags.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        messages,
        vec![
            "unexpected `)`",
            "unexpected identifier `u`",
            "unterminated string literal",
            "invalid date `1998-02-30`: February has 28 days in 1998",
            "expected a condition, found an expression",
        ],
        "{diags:#?}"
    );
    assert_eq!(at(src, &diags[0]), ")");
    assert_eq!(at(src, &diags[1]), "u");
    assert_eq!(at(src, &diags[2]), "\"unterminated.");
    assert_eq!(at(src, &diags[3]), "date(\"1998-02-30\")");
    assert_eq!(at(src, &diags[4]), "x + 1");
    // The clauses without errors are all kept; the unterminated string swallows the
    // `.` of its line, so the clause after it is lost with it.
    let heads: Vec<String> = program
        .items
        .iter()
        .map(|i| {
            fox_syntax::pretty::print_item(i)
                .split('(')
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(heads, vec!["edge", "ok", "last"]);
}

#[test]
fn missing_dot_points_at_the_end_of_the_clause() {
    let src = "p(x) <- q(x)\nr(x) <- s(x).\n";
    let d = errors(src);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].message, "expected `.` at the end of the rule");
    assert_eq!(d[0].span(), Span::new(11, 12));
    let text = render("q.logic", src, &d, false);
    assert!(text.contains("q.logic:1:12"), "{text}");
    assert!(text.contains("help: every clause ends with `.`"), "{text}");

    let d = errors("edge(1, 2)");
    assert_eq!(d[0].message, "expected `.` at the end of the fact");
    let d = errors("p(x) -> int(x)\n.output p.");
    assert_eq!(d[0].message, "expected `.` at the end of the declaration");
}

#[test]
fn expected_tokens_are_readable() {
    let src = "p(x) <- q(x), .";
    let d = errors(src);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].message, "unexpected `.`");
    assert_eq!(d[0].span(), Span::new(14, 15));
    assert_eq!(
        d[0].labels[0].message,
        "expected one of: identifier, literal, `_`, `(`, `!`, `-`"
    );

    let d = errors(".output q order x.");
    assert_eq!(d[0].message, "unexpected identifier `x`");
    assert_eq!(d[0].labels[0].message, "expected `by`");

    let d = errors("p(x) <- q(x) r");
    assert_eq!(d[0].message, "unexpected identifier `r`");
    assert!(d[0].labels[0].message.starts_with("expected one of: `,`, `;`, `.`"));
}

#[test]
fn lexical_errors() {
    let src = "p(x) <- q(x), x = \"a\\qb\".\nr(x) <- q(x), x = 1 #.\n/* open";
    let d = errors(src);
    let messages: Vec<&str> = d.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        messages,
        vec![
            "unknown escape sequence `\\q` in string",
            "unexpected character `#`",
            "unterminated block comment"
        ]
    );
    assert_eq!(at(src, &d[0]), "\\q");
    assert_eq!(at(src, &d[1]), "#");
    assert_eq!(at(src, &d[2]), "/*");
}

#[test]
fn dates_are_validated() {
    for (text, why) in [
        ("1998-02-29", "February has 28 days in 1998"),
        ("1998-13-01", "there is no month 13"),
        ("1998-04-31", "April has 30 days"),
        ("1998-4-1", "dates are written YYYY-MM-DD"),
    ] {
        let src = format!("p(x) <- q(x), x = date(\"{text}\").");
        let d = errors(&src);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].message, format!("invalid date `{text}`: {why}"));
        assert_eq!(at(&src, &d[0]), format!("date(\"{text}\")"));
    }
    assert!(errors("p(x) <- q(x), x = date(\"2000-02-29\").").is_empty());
}

#[test]
fn integer_overflow_is_an_error() {
    let d = errors("p(9223372036854775808).");
    assert_eq!(d[0].message, "integer literal is too large");
    assert!(errors("p(-9223372036854775808).").is_empty());
    let d = errors("p(-9223372036854775809).");
    assert_eq!(d[0].message, "integer literal is too large");
    let d = errors("p(123456789012345678901234567890).");
    assert_eq!(d[0].message, "integer literal is too large");
    let d = errors("p(x) -> decimal(x, 99).");
    assert_eq!(d[0].message, "decimal scale 99 is too large");
}

#[test]
fn declarations_name_their_columns() {
    let src = "p(x, 1) -> int(x).\nq(x), r(x) -> int(x).";
    let d = errors(src);
    assert_eq!(d.len(), 2);
    assert_eq!(d[0].message, "expected a column name in the declaration");
    assert_eq!(at(src, &d[0]), "1");
    assert_eq!(d[1].message, "a declaration declares one predicate");
    assert_eq!(at(src, &d[1]), "r(x)");
}

#[test]
fn conditions_and_expressions_are_told_apart() {
    let src = "p(x) <- q(x), (x, x) + 1 > 2.";
    let d = errors(src);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].message, "expected an expression, found a condition");
    assert_eq!(at(src, &d[0]), "x, x");
    let src = "p(x) <- q(x), (x + 1).";
    let d = errors(src);
    assert_eq!(d[0].message, "expected a condition, found an expression");
    assert_eq!(at(src, &d[0]), "x + 1");
}

#[test]
fn reserved_words_get_a_hint() {
    let d = errors("p(x) <- q(x), true(x).");
    assert_eq!(d[0].message, "unexpected `(`");
    let d = errors("in(x) <- q(x).");
    assert_eq!(d[0].message, "unexpected `in`");
    assert!(d[0].notes.iter().any(|n| n.contains("reserved word")));
}

#[test]
fn directive_words_are_names_outside_directives() {
    let (p, d) = parse("from(x) <- sep(x), order(y, x), by = 1, limit(desc, asc).\n.output from order by limit desc.");
    assert!(d.is_empty(), "{d:?}");
    assert_eq!(p.items.len(), 2);
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let depth = 100_000;
    let src = format!(
        "ok(1).\np(x) <- q(x), x = {}1{}.\nok(2).",
        "(".repeat(depth),
        ")".repeat(depth)
    );
    let (p, d) = parse(&src);
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(d[0].message.contains("nested too deeply"));
    assert_eq!(p.items.len(), 2);

    let src = format!("p(x) <- {}q(x).", "!".repeat(depth));
    let (p, d) = parse(&src);
    assert_eq!((p.items.len(), d.len()), (0, 1));

    let src = format!("p(x) <- x = {}1.", "- ".repeat(depth));
    let (_, d) = parse(&src);
    assert_eq!(d.len(), 1);

    let src = format!("p(x) <- q(x), x = {}.", vec!["1"; 50_000].join(" + "));
    let (p, d) = parse(&src);
    assert_eq!(d.len(), 1);
    assert!(d[0].message.contains("nested too deeply"));
    assert!(p.items.is_empty());

    // Nesting within the limits is fine.
    let src = format!("p(x) <- q(x), x = {}1{}.", "(".repeat(200), ")".repeat(200));
    assert!(parse(&src).1.is_empty());
    // A tree just under the depth limit prints, compares and drops without trouble.
    let src = format!("p(x) <- q(x), x = {}.", vec!["1"; 1000].join(" + "));
    let (mut p, d) = parse(&src);
    assert!(d.is_empty());
    let printed = fox_syntax::pretty::print_program(&p);
    let (mut again, d) = parse(&printed);
    assert!(d.is_empty());
    p.erase_spans();
    again.erase_spans();
    assert_eq!(p, again);
}

#[test]
fn errors_at_end_of_input() {
    let d = errors("p(x) <- q(x), x = ");
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].message, "unexpected end of input");
    let d = errors("p(x) <- q(");
    assert_eq!(d.len(), 1);
    let d = errors(".input");
    assert_eq!(d.len(), 1);
}
