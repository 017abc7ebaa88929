//! Random ASTs print to source that parses back to the same AST.

use fox_syntax::ast::*;
use fox_syntax::parse;
use fox_syntax::pretty::print_program;
use proptest::prelude::*;

fn sp() -> Span {
    Span::default()
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z][a-z0-9_]{0,5}".prop_filter("reserved word", |s| !matches!(s.as_str(), "in" | "true" | "false")),
        1 => "[A-Z_][A-Za-z0-9_]{1,4}",
        1 => "[a-z]{1,4}:[a-z_]{1,4}(:[a-z]{1,3})?",
        1 => prop::sample::select(vec!["from", "sep", "order", "by", "asc", "desc", "limit", "date", "agg", "count"])
            .prop_map(str::to_string),
    ]
}

fn ident() -> impl Strategy<Value = Ident> {
    name().prop_map(|name| Ident { name, span: sp() })
}

fn date() -> impl Strategy<Value = String> {
    (1u32..=9999, 1u32..=12, 1u32..=31).prop_map(|(y, m, d)| {
        let d = d.min(fox_syntax::lexer::days_in_month(y, m));
        format!("{y:04}-{m:02}-{d:02}")
    })
}

fn lit() -> impl Strategy<Value = Lit> {
    prop_oneof![
        any::<i64>().prop_map(Lit::Int),
        (any::<bool>(), "[0-9]{1,6}", "[0-9]{1,4}")
            .prop_map(|(neg, a, b)| Lit::Decimal(format!("{}{a}.{b}", if neg { "-" } else { "" }))),
        (any::<bool>(), "[0-9]{1,3}(\\.[0-9]{1,3})?([eE][+-]?[0-9]{1,2}f?|f)")
            .prop_map(|(neg, s)| Lit::Float(format!("{}{s}", if neg { "-" } else { "" }))),
        any::<String>().prop_map(Lit::Str),
        "[ -~]{0,8}".prop_map(Lit::Str),
        date().prop_map(Lit::Date),
        any::<bool>().prop_map(Lit::Bool),
    ]
}

fn e(kind: ExprKind) -> Expr {
    Expr { kind, span: sp() }
}

fn expr() -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        name().prop_map(|n| e(ExprKind::Var(n))),
        Just(e(ExprKind::Anon)),
        lit().prop_map(|l| e(ExprKind::Lit(l))),
    ];
    leaf.prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|x| e(ExprKind::Neg(Box::new(x)))),
            (
                prop::sample::select(vec![BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div]),
                inner.clone(),
                inner.clone()
            )
                .prop_map(|(op, a, b)| e(ExprKind::Bin(op, Box::new(a), Box::new(b)))),
            (ident(), prop::collection::vec(inner.clone(), 0..3))
                .prop_filter("date of a string literal", |(f, a)| !date_literal_form(
                    f,
                    a.first(),
                    a.len()
                ))
                .prop_map(|(f, a)| e(ExprKind::Call(f, a))),
            (ident(), prop::collection::vec(inner, 0..3)).prop_map(|(f, a)| e(ExprKind::FuncTerm(f, a))),
        ]
    })
}

fn cmp_op() -> impl Strategy<Value = CmpOp> {
    prop::sample::select(vec![CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge])
}

/// Formulas in the shape the parser builds: `Or` of `And`s and literals, `And` of literals.
fn formula() -> impl Strategy<Value = Formula> {
    let atom = (ident(), prop::collection::vec(expr(), 0..3))
        .prop_filter("date of a string literal", |(p, a)| {
            !date_literal_form(p, a.first(), a.len())
        })
        .prop_map(|(pred, args)| Literal::Atom(Atom { pred, args, span: sp() }));
    let compare = (expr(), prop::collection::vec((cmp_op(), expr()), 1..3)).prop_map(|(first, rest)| {
        Literal::Compare(Compare {
            first,
            rest,
            span: sp(),
        })
    });
    let in_list =
        (expr(), prop::collection::vec(expr(), 1..3)).prop_map(|(expr, list)| Literal::In { expr, list, span: sp() });
    let leaf = prop_oneof![atom, compare, in_list].prop_map(Formula::Lit);
    leaf.prop_recursive(3, 12, 3, |inner| {
        let lit = inner.clone().prop_filter_map("a literal", |f| match f {
            Formula::Lit(l) => Some(l),
            _ => None,
        });
        let and = prop::collection::vec(lit.clone().prop_map(Formula::Lit), 2..4).prop_map(|v| Formula::And(v, sp()));
        let conj = prop_oneof![lit.clone().prop_map(Formula::Lit), and.clone()];
        prop_oneof![
            inner
                .clone()
                .prop_map(|f| Formula::Lit(Literal::Paren(Box::new(f), sp()))),
            lit.prop_map(|l| Formula::Lit(Literal::Not(Box::new(l), sp()))),
            and,
            prop::collection::vec(conj, 2..4).prop_map(|v| Formula::Or(v, sp())),
        ]
    })
}

/// Whether `f(arg)` (with `n` arguments) prints as `date("…")`: a date literal, not a call
/// or an aggregate.
fn date_literal_form(f: &Ident, arg: Option<&Expr>, n: usize) -> bool {
    f.name == "date" && n == 1 && arg.is_some_and(|a| matches!(a.kind, ExprKind::Lit(Lit::Str(_))))
}

fn body() -> impl Strategy<Value = Body> {
    let agg = (ident(), ident(), prop::option::of(expr()))
        .prop_filter("date of a string literal", |(_, func, arg)| {
            !date_literal_form(func, arg.as_ref(), usize::from(arg.is_some()))
        })
        .prop_map(|(var, func, arg)| AggBinding {
            var,
            func,
            arg,
            span: sp(),
        });
    prop_oneof![
        formula().prop_map(Body::Formula),
        (prop::collection::vec(agg, 1..3), formula()).prop_map(|(aggs, body)| Body::Agg { aggs, body, span: sp() }),
    ]
}

fn head() -> impl Strategy<Value = Head> {
    let kind = prop_oneof![
        prop::collection::vec(expr(), 0..3).prop_map(HeadKind::Relational),
        (prop::collection::vec(expr(), 0..3), expr()).prop_map(|(keys, value)| HeadKind::Functional { keys, value }),
    ];
    (ident(), kind)
        .prop_filter("date of a string literal", |(pred, kind)| match kind {
            HeadKind::Relational(a) => !date_literal_form(pred, a.first(), a.len()),
            HeadKind::Functional { .. } => true,
        })
        .prop_map(|(pred, kind)| Head { pred, kind, span: sp() })
}

fn item() -> impl Strategy<Value = Item> {
    let rule = (prop::collection::vec(head(), 1..3), prop::option::of(body())).prop_map(|(heads, body)| {
        Item::Rule(Rule {
            heads,
            body,
            span: sp(),
        })
    });
    let shape = prop_oneof![
        prop::collection::vec(ident(), 0..4).prop_map(DeclShape::Relational),
        (prop::collection::vec(ident(), 0..3), ident()).prop_map(|(keys, value)| DeclShape::Functional { keys, value }),
    ];
    let type_atom = (ident(), ident(), prop::option::of(0u32..=38)).prop_map(|(ty, var, scale)| TypeAtom {
        ty,
        var,
        scale,
        span: sp(),
    });
    let decl = (ident(), shape, prop::collection::vec(type_atom, 0..4)).prop_map(|(pred, shape, types)| {
        Item::Decl(Decl {
            pred,
            shape,
            types,
            span: sp(),
        })
    });
    let input = (
        ident(),
        prop::option::of(any::<String>()),
        prop::option::of("[ -~]{0,3}"),
        prop::option::of(prop::collection::vec(ident(), 1..3)),
        any::<bool>(),
    )
        .prop_map(|(pred, from, sep, key, header)| {
            Item::Input(InputDirective {
                pred,
                from: from.map(|f| (f, sp())),
                sep: sep.map(|s| (s, sp())),
                header: header.then(sp),
                key: key.map(|k| (k, sp())),
                span: sp(),
            })
        });
    let key = (ident(), any::<bool>()).prop_map(|(column, descending)| OrderKey {
        column,
        descending,
        span: sp(),
    });
    let output = (
        ident(),
        prop::collection::vec(key, 0..3),
        prop::option::of(any::<u64>()),
    )
        .prop_map(|(pred, order_by, limit)| {
            Item::Output(OutputDirective {
                pred,
                order_by,
                limit: limit.map(|l| (l, sp())),
                span: sp(),
            })
        });
    let include = any::<String>().prop_map(|path| {
        Item::Include(IncludeDirective {
            path: (path, sp()),
            span: sp(),
        })
    });
    prop_oneof![4 => rule, 1 => decl, 1 => input, 1 => output, 1 => include]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn printed_programs_parse_back_to_the_same_tree(items in prop::collection::vec(item(), 0..5)) {
        let program = Program { items };
        let text = print_program(&program);
        let (mut parsed, diags) = parse(&text);
        prop_assert!(diags.is_empty(), "diagnostics for\n{}\n{}", text,
            fox_syntax::diag::render("gen.logic", &text, &diags, false));
        parsed.erase_spans();
        prop_assert_eq!(&parsed, &program, "printed:\n{}", text);
    }

    #[test]
    fn printed_expressions_parse_back(x in expr()) {
        let text = format!("p({}).", fox_syntax::pretty::print_expr(&x));
        let (mut parsed, diags) = parse(&text);
        prop_assert!(diags.is_empty(), "{} {:?}", text, diags);
        parsed.erase_spans();
        let expected = Program { items: vec![Item::Rule(Rule {
            heads: vec![Head { pred: Ident { name: "p".into(), span: sp() }, kind: HeadKind::Relational(vec![x]), span: sp() }],
            body: None,
            span: sp(),
        })] };
        prop_assert_eq!(parsed, expected);
    }
}
