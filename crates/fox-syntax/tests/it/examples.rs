//! Every example block of LANGUAGE.md parses, and every program round-trips through the
//! pretty-printer.

use fox_syntax::ast::*;
use fox_syntax::parse;
use fox_syntax::pretty::print_program;

fn parse_ok(src: &str) -> Program {
    let (p, diags) = parse(src);
    assert!(
        diags.is_empty(),
        "unexpected diagnostics:\n{}",
        fox_syntax::diag::render("test.logic", src, &diags, false)
    );
    p
}

/// Parses, prints, parses the printed text, and checks the two trees are equal; also
/// checks that printing is idempotent.
fn round_trip(src: &str) -> Program {
    let mut first = parse_ok(src);
    let printed = print_program(&first);
    let mut second = parse_ok(&printed);
    assert_eq!(print_program(&second), printed, "printing is not idempotent");
    first.erase_spans();
    second.erase_spans();
    assert_eq!(first, second, "round trip changed the tree; printed:\n{printed}");
    first
}

const DECLARATIONS: &str = r#"edge(x, y) -> int32(x), int32(y).                 // relational predicate; column names = x, y
price[p] = v -> int64(p), decimal(v).             // functional predicate: p is the key, v the value
total[] = v -> decimal(v).                        // functional predicate with no key (a scalar)
"#;

const FACTS: &str = r#"edge(1, 2).  edge(2, 3).
price[7] = 19.99.
"#;

const RULES: &str = r#"path(x, y) <- edge(x, y).
path(x, z) <- path(x, y), edge(y, z).                        // recursion
tri(x, y, z) <- edge(x, y), edge(y, z), edge(x, z), x < y, y < z.
revenue(k, r) <- lineitem(k, _, p, d), r = p * (1 - d).      // arithmetic binds r
even(n) <- number(n), next(m, n), odd(m).                    // mutual recursion
unreached(x) <- node(x), !path(1, x).                        // stratified negation
cheap(p) <- price[p] = v, v < 10.                            // functional atom in a body
big(p) <- price[p] > 100.                                    // functional term used as a value
either(x) <- a(x) ; b(x).                                    // disjunction (desugars into two rules)
"#;

const AGGREGATION: &str = r#"q1(flag, status, sum_qty, n) <- agg<<sum_qty = sum(q), n = count()>> line1(flag, status, _, q).
total[] = s <- agg<<s = sum(v)>> sales(_, v).
cnt[k] = n <- agg<<n = count()>> tri(k, _, _).
"#;

const INPUT_OUTPUT: &str = r#".input edge.                                   // reads <data>/edge.csv: comma-separated, no header
.input lineitem from "lineitem.tbl" sep "|".   // path relative to the data directory
.output tri.                                   // printed, or written to <out>/tri.csv
.output q3 order by revenue desc, orderdate limit 10.
"#;

#[test]
fn language_md_declarations() {
    let p = round_trip(DECLARATIONS);
    assert_eq!(p.items.len(), 3);
    let Item::Decl(d) = &p.items[1] else {
        panic!("expected a declaration")
    };
    assert_eq!(d.pred.name, "price");
    assert!(matches!(&d.shape, DeclShape::Functional { keys, value } if keys.len() == 1 && value.name == "v"));
    let Item::Decl(d) = &p.items[2] else {
        panic!("expected a declaration")
    };
    assert!(matches!(&d.shape, DeclShape::Functional { keys, .. } if keys.is_empty()));
}

#[test]
fn language_md_facts() {
    let p = round_trip(FACTS);
    assert_eq!(p.items.len(), 3);
    let Item::Rule(r) = &p.items[2] else {
        panic!("expected a fact")
    };
    assert!(r.body.is_none());
    let HeadKind::Functional { value, .. } = &r.heads[0].kind else {
        panic!("expected a functional head")
    };
    assert_eq!(value.kind, ExprKind::Lit(Lit::Decimal("19.99".into())));
}

#[test]
fn language_md_rules() {
    let p = round_trip(RULES);
    assert_eq!(p.items.len(), 9);
    let body = |i: usize| match &p.items[i] {
        Item::Rule(Rule {
            body: Some(Body::Formula(f)),
            ..
        }) => f.clone(),
        other => panic!("expected a rule, got {other:?}"),
    };
    // `price[p] = v` and `price[p] > 100` are comparisons with a functional term.
    let Formula::And(parts, _) = body(6) else {
        panic!("expected a conjunction")
    };
    assert!(matches!(&parts[0], Formula::Lit(Literal::Compare(c))
        if matches!(c.first.kind, ExprKind::FuncTerm(..)) && c.rest[0].0 == CmpOp::Eq));
    assert!(matches!(body(7), Formula::Lit(Literal::Compare(c)) if c.rest[0].0 == CmpOp::Gt));
    assert!(matches!(body(8), Formula::Or(parts, _) if parts.len() == 2));
    let Formula::And(parts, _) = body(5) else {
        panic!("expected a conjunction")
    };
    assert!(matches!(&parts[1], Formula::Lit(Literal::Not(inner, _)) if matches!(**inner, Literal::Atom(_))));
}

#[test]
fn language_md_aggregation() {
    let p = round_trip(AGGREGATION);
    assert_eq!(p.items.len(), 3);
    let Item::Rule(Rule {
        body: Some(Body::Agg { aggs, .. }),
        ..
    }) = &p.items[0]
    else {
        panic!("expected an aggregation")
    };
    assert_eq!(aggs.len(), 2);
    assert_eq!(aggs[1].func.name, "count");
    assert!(aggs[1].arg.is_none());
}

#[test]
fn language_md_input_output() {
    let p = round_trip(INPUT_OUTPUT);
    assert_eq!(p.items.len(), 4);
    let Item::Input(i) = &p.items[1] else {
        panic!("expected .input")
    };
    assert_eq!(i.from.as_ref().map(|f| f.0.as_str()), Some("lineitem.tbl"));
    assert_eq!(i.sep.as_ref().map(|f| f.0.as_str()), Some("|"));
    let Item::Output(o) = &p.items[3] else {
        panic!("expected .output")
    };
    assert_eq!(o.order_by.len(), 2);
    assert!(o.order_by[0].descending);
    assert!(!o.order_by[1].descending);
    assert_eq!(o.limit.map(|l| l.0), Some(10));
}

#[test]
fn empty_programs_are_valid() {
    assert!(parse_ok("").items.is_empty());
    assert!(parse_ok("  // only a comment\n/* and a block */ ").items.is_empty());
}

#[test]
fn unicode_arrows() {
    let a = round_trip("even(n) ← number(n), next(m, n), odd(m).\nedge(x, y) −> int32(x), int32(y).\np(x) → int(x).");
    let b = round_trip("even(n) <- number(n), next(m, n), odd(m).\nedge(x, y) -> int32(x), int32(y).\np(x) -> int(x).");
    let (mut a, mut b) = (a, b);
    a.erase_spans();
    b.erase_spans();
    assert_eq!(a, b);
}

#[test]
fn every_construct_round_trips() {
    let src = r#"
lineitem(orderkey, partkey, quantity, extendedprice, discount, shipdate) -> int64(orderkey), int64(partkey), decimal(quantity, 2), decimal(extendedprice, 2), decimal(discount, 2), date(shipdate).
lineitem:shipdate(x) -> date(x).
flag() -> .
a(x), b(x) <- c(x).
r(x) <- s(x, y), (t(y); u(y), !v(y)), x != y, x <= 3, y >= -7, 1 < x < 10.
q(s) <- p(s), like(s, "%BRASS"), !like(s, "x\"y\\z\n\t"), prefix(s, "PROMO").
q(y) <- o(d), y = year(d), substr(s, 1, 2) = "ab", strlen(s) > 3, concat(a, b) = c.
q(d) <- o(d), d >= date("1994-01-01"), d < date("1994-01-01") + 365, d - 90 > e.
q(x) <- t(x), x in ("1-URGENT", "2-HIGH"), !x in (1, 2, 3).
q(x) <- t(x), !(a(x); b(x)), !x < 3.
q(v) <- t(a, b, c), v = a * (1 - b) * (1 + c) / 2 - -7 - (a - b) - -c + -(3), w = -a * -1.50 + 1.5e3 - 2.5f.
q(v) <- t(a), (a + 1) * 2 > v, (a) = v, (((a))) = v, year(a) = 1998, year(a) + 1 = 1999, (year(a)) < 2.
q(x) <- t(x), b = true, c = false, total[] = s, price[x, 2] = p, p[] > price[x, x + 1] * 2.
q[k] = n <- agg<<n = count(), s = sum(v * 2), m = min(v), a = avg(v), t = total(v)>> r(k, v), !z(k) ; w(k, v).
from(order, by) <- asc(desc, limit), sep(from).
.input lineitem:x from "a\"b.tbl".
.input t sep "\t".
.output q order by k asc, n desc, from limit 0.
.output q limit 5.
total[] = v <- s(v).
f(-9223372036854775808, 9223372036854775807, 0.0, 1e10).
"#;
    let p = round_trip(src);
    assert_eq!(p.items.len(), 21);
}

#[test]
fn literal_folding_and_negation() {
    let p = parse_ok("p(-7, -(7), - 7, --7, -x, 2 - 1).");
    let Item::Rule(r) = &p.items[0] else {
        panic!("expected a fact")
    };
    let HeadKind::Relational(args) = &r.heads[0].kind else {
        panic!("expected a relational head")
    };
    assert_eq!(args[0].kind, ExprKind::Lit(Lit::Int(-7)));
    assert!(matches!(&args[1].kind, ExprKind::Neg(e) if e.kind == ExprKind::Lit(Lit::Int(7))));
    assert_eq!(args[2].kind, ExprKind::Lit(Lit::Int(-7)));
    assert!(matches!(&args[3].kind, ExprKind::Neg(e) if e.kind == ExprKind::Lit(Lit::Int(-7))));
    assert!(matches!(&args[4].kind, ExprKind::Neg(_)));
    assert!(matches!(&args[5].kind, ExprKind::Bin(BinOp::Sub, ..)));
}

#[test]
fn precedence_and_associativity() {
    let p = parse_ok("p(x) <- x = a - b - c * d / e.");
    let Item::Rule(Rule {
        body: Some(Body::Formula(Formula::Lit(Literal::Compare(c)))),
        ..
    }) = &p.items[0]
    else {
        panic!("expected a comparison")
    };
    // ((a - b) - ((c * d) / e))
    let ExprKind::Bin(BinOp::Sub, l, r) = &c.rest[0].1.kind else {
        panic!("expected `-` at the top")
    };
    assert!(matches!(&l.kind, ExprKind::Bin(BinOp::Sub, ..)));
    let ExprKind::Bin(BinOp::Div, rl, _) = &r.kind else {
        panic!("expected `/`")
    };
    assert!(matches!(&rl.kind, ExprKind::Bin(BinOp::Mul, ..)));
    assert_eq!(fox_syntax::pretty::print_expr(&c.rest[0].1), "a - b - c * d / e");
}

#[test]
fn conjunction_binds_tighter_than_disjunction() {
    let p = parse_ok("p(x) <- a(x), b(x) ; c(x), d(x) ; e(x).");
    let Item::Rule(Rule {
        body: Some(Body::Formula(Formula::Or(parts, _))),
        ..
    }) = &p.items[0]
    else {
        panic!("expected a disjunction")
    };
    assert_eq!(parts.len(), 3);
    assert!(matches!(&parts[0], Formula::And(v, _) if v.len() == 2));
    assert!(matches!(&parts[1], Formula::And(v, _) if v.len() == 2));
    assert!(matches!(&parts[2], Formula::Lit(Literal::Atom(_))));
}

#[test]
fn calls_versus_atoms() {
    let p = parse_ok("p(y) <- year(d) = y, like(s, \"a\"), (q(y)), (r(y)) = 1.");
    let Item::Rule(Rule {
        body: Some(Body::Formula(Formula::And(parts, _))),
        ..
    }) = &p.items[0]
    else {
        panic!("expected a conjunction")
    };
    assert!(matches!(&parts[0], Formula::Lit(Literal::Compare(c)) if matches!(c.first.kind, ExprKind::Call(..))));
    assert!(matches!(&parts[1], Formula::Lit(Literal::Atom(a)) if a.pred.name == "like"));
    assert!(matches!(&parts[2], Formula::Lit(Literal::Paren(f, _)) if matches!(**f, Formula::Lit(Literal::Atom(_)))));
    assert!(matches!(&parts[3], Formula::Lit(Literal::Compare(c)) if matches!(c.first.kind, ExprKind::Call(..))));
}

#[test]
fn spans_point_at_the_source() {
    let src = "path(x, z) <- path(x, y), edge(y, z).";
    let p = parse_ok(src);
    let Item::Rule(r) = &p.items[0] else {
        panic!("expected a rule")
    };
    assert_eq!(&src[r.span.range()], src);
    assert_eq!(&src[r.heads[0].span.range()], "path(x, z)");
    let Some(Body::Formula(Formula::And(parts, s))) = &r.body else {
        panic!("expected a conjunction")
    };
    assert_eq!(&src[s.range()], "path(x, y), edge(y, z)");
    let Formula::Lit(Literal::Atom(a)) = &parts[1] else {
        panic!("expected an atom")
    };
    assert_eq!(&src[a.span.range()], "edge(y, z)");
    assert_eq!(&src[a.args[1].span.range()], "z");
}
