//! Random token streams and random text: `parse` never panics, every diagnostic's span
//! lies within the source, rendering never panics, and whatever parsed cleanly prints
//! back to source that parses to the same tree.

use fox_syntax::diag::render;
use fox_syntax::parse;
use fox_syntax::pretty::print_program;
use proptest::prelude::*;

const TOKENS: &[&str] = &[
    "p",
    "q",
    "edge",
    "x",
    "y",
    "lineitem:shipdate",
    "a:",
    ":",
    "_",
    "_x",
    "0",
    "1",
    "42",
    "2.",
    "0.06",
    "1.5e3",
    "1.5f",
    "1e",
    "99999999999999999999",
    "9223372036854775808",
    "\"s\"",
    "\"a\\\"b\"",
    "\"\\q\"",
    "\"open",
    "date(\"1998-09-02\")",
    "date(\"1998-02-30\")",
    "date(\"x\")",
    "date",
    "true",
    "false",
    "(",
    ")",
    "[",
    "]",
    ",",
    ";",
    ".",
    "!",
    "=",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "+",
    "-",
    "*",
    "/",
    "<-",
    "->",
    "←",
    "→",
    "−>",
    "−",
    "agg<<",
    ">>",
    "agg",
    ".input",
    ".output",
    "from",
    "sep",
    "order",
    "by",
    "asc",
    "desc",
    "limit",
    "in",
    "sum",
    "count",
    "//c\n",
    "/*c*/",
    "/*",
    "*/",
    "\n",
    " ",
    "\t",
    "#",
    "é",
    "€",
    "\u{0}",
];

fn check(src: &str) -> Result<(), TestCaseError> {
    let (program, diags) = parse(src);
    for d in &diags {
        for l in &d.labels {
            prop_assert!(
                l.span.start <= l.span.end && (l.span.end as usize) <= src.len(),
                "span {:?} outside a source of {} bytes: {:?}",
                l.span,
                src.len(),
                d
            );
        }
        prop_assert!(!d.message.is_empty());
    }
    let _ = render("fuzz.logic", src, &diags, false);
    // Items that parsed are complete and valid: they round-trip.
    let printed = print_program(&program);
    let (mut again, diags2) = parse(&printed);
    prop_assert!(
        diags2.is_empty(),
        "source {:?} printed as {:?} gives {:?}",
        src,
        printed,
        diags2
    );
    let mut program = program;
    program.erase_spans();
    again.erase_spans();
    prop_assert_eq!(program, again);
    Ok(())
}

fn token_soup() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        8 => prop::sample::select(TOKENS).prop_map(str::to_string),
        1 => any::<char>().prop_map(|c| c.to_string()),
        1 => "[ -~]{1,4}",
    ];
    let sep = prop::sample::select(vec!["", " ", "\n"]);
    prop::collection::vec((piece, sep), 0..60).prop_map(|v| v.into_iter().map(|(p, s)| p + s).collect::<String>())
}

/// Mostly-valid clauses with random damage, so that the parser gets deep into the grammar.
fn damaged_program() -> impl Strategy<Value = String> {
    let clauses = prop::sample::select(vec![
        "edge(x, y) -> int32(x), int32(y).",
        "price[p] = v -> int64(p), decimal(v, 2).",
        "edge(1, 2).",
        "path(x, z) <- path(x, y), edge(y, z).",
        "revenue(k, r) <- lineitem(k, _, p, d), r = p * (1 - d).",
        "q(x) <- t(x), !(a(x); b(x)), x in (1, 2), (x + 1) * 2 > year(x).",
        "total[] = s <- agg<<s = sum(v), n = count()>> sales(_, v).",
        ".input lineitem from \"lineitem.tbl\" sep \"|\".",
        ".output q3 order by revenue desc, orderdate limit 10.",
        "d(x) <- x = date(\"1998-09-02\") + 90, !like(s, \"%A\").",
    ]);
    (
        prop::collection::vec(clauses, 1..6),
        prop::collection::vec((any::<prop::sample::Index>(), 0..4usize), 0..4),
    )
        .prop_map(|(clauses, cuts)| {
            let mut src = clauses.join("\n");
            for (at, what) in cuts {
                let mut i = at.index(src.len() + 1);
                while !src.is_char_boundary(i) {
                    i -= 1;
                }
                match what {
                    0 => {
                        src.insert(i, '(');
                    }
                    1 => {
                        src.insert(i, '.');
                    }
                    2 => {
                        let end = (i + 3).min(src.len());
                        if src.is_char_boundary(end) {
                            src.replace_range(i..end, "");
                        }
                    }
                    _ => src.insert_str(i, " , "),
                }
            }
            src
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn token_soup_never_panics(src in token_soup()) {
        check(&src)?;
    }

    #[test]
    fn random_text_never_panics(src in any::<String>()) {
        check(&src)?;
    }

    #[test]
    fn damaged_programs_never_panic(src in damaged_program()) {
        check(&src)?;
    }
}

#[test]
fn pathological_inputs() {
    for src in [
        ".".repeat(300),
        ".".repeat(300),
        ".".repeat(300),
        "agg<<".repeat(10_000),
        "p(x) <- ".to_string() + &"!".repeat(10_000),
        ".".repeat(300),
        "\"".repeat(10_001),
        "/*".repeat(1000),
        ".".repeat(300),
        "p(x) <- q(x), x = ".to_string() + &"1 * ".repeat(20_000) + "1.",
        "p(x) <- q(x), x = ".to_string() + &"f(".repeat(300) + &")".repeat(300) + ".",
    ] {
        check(&src).unwrap_or_else(|e| panic!("{e}"));
    }
}
