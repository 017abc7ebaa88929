//! The reference evaluator on programs whose results are known by hand, and on the
//! generated programs (which must all check and evaluate).

use fox_sema::core::Value;
use fox_tests::gen::{case, GenOptions};
use fox_tests::{compile, data, evaluate, EvalError, Inputs};

/// Evaluates `src` without inputs and renders each output as `name: (a, b) (c, d)`.
fn run(src: &str) -> Vec<String> {
    run_with(src, &Inputs::new())
}

fn run_with(src: &str, inputs: &Inputs) -> Vec<String> {
    let prog = compile(src).unwrap_or_else(|e| panic!("{e}"));
    let tables = evaluate(&prog, inputs).unwrap_or_else(|e| panic!("{e}"));
    tables
        .iter()
        .map(|t| {
            let rows: Vec<String> = t
                .rows
                .iter()
                .map(|r| format!("({})", r.iter().map(data::field).collect::<Vec<_>>().join(", ")))
                .collect();
            format!("{}: {}", t.name, rows.join(" ")).trim_end().to_string()
        })
        .collect()
}

#[test]
fn transitive_closure_and_same_generation() {
    let out = run("edge(1, 2). edge(2, 3). edge(3, 1). edge(4, 4).
        path(x, y) <- edge(x, y).
        path(x, z) <- path(x, y), edge(y, z).
        .output path.");
    assert_eq!(
        out,
        ["path: (1, 1) (1, 2) (1, 3) (2, 1) (2, 2) (2, 3) (3, 1) (3, 2) (3, 3) (4, 4)"]
    );
    let out = run("parent(1, 2). parent(1, 3). parent(2, 4). parent(3, 5). parent(4, 6).
        sg(x, y) <- parent(p, x), parent(p, y), x != y.
        sg(x, y) <- parent(a, x), sg(a, b), parent(b, y), x != y.
        .output sg.");
    assert_eq!(out, ["sg: (2, 3) (3, 2) (4, 5) (5, 4)"]);
}

#[test]
fn mutual_recursion_and_stratified_negation() {
    let out = run("next(0, 1). next(1, 2). next(2, 3). next(3, 4).
        even(0).
        even(n) <- next(m, n), odd(m).
        odd(n) <- next(m, n), even(m).
        node(0). node(1). node(2). node(3). node(4). node(5).
        unreached(x) <- node(x), !even(x), !odd(x).
        .output even. .output odd. .output unreached.");
    assert_eq!(out, ["even: (0) (2) (4)", "odd: (1) (3)", "unreached: (5)"]);
}

#[test]
fn aggregates_range_over_distinct_bindings() {
    let out = run("sale(r, i, v) -> string(r), int32(i), decimal(v).
        sale(\"w\", 3, 7.00). sale(\"w\", 4, 7.00). sale(\"e\", 1, 10.50). sale(\"e\", 2, 4.25).
        s(r, t, n, lo, hi, a) <- agg<<t = sum(v), n = count(), lo = min(v), hi = max(v), a = avg(v)>> sale(r, _, v).
        amount(v) <- sale(_, _, v).
        d[] = n <- agg<<n = count()>> amount(_).
        none[] = n <- agg<<n = count()>> sale(_, _, v), v > 100.
        av[] = a <- agg<<a = avg(i)>> sale(_, i, _).
        .output s. .output d. .output none. .output av.");
    assert_eq!(
        out,
        [
            "s: (e, 14.75, 2, 4.25, 10.50, 7.375000) (w, 14.00, 2, 7.00, 7.00, 7.000000)",
            "d: (3)",
            "none:",
            "av: (2.500000)"
        ]
    );
}

#[test]
fn decimals_are_exact_and_round_half_away() {
    let out = run("x(k, v) -> int32(k), decimal(v).
        x(1, 10.00). x(2, 2.00). x(3, -2.25).
        q(k, a, b, c, d) <- x(k, v), a = v / 3, b = v * 0.90, c = round(v, 1), d = v + 0.125.
        .output q.");
    assert_eq!(
        out,
        ["q: (1, 3.333333, 9.0000, 10.0, 10.125) (2, 0.666667, 1.8000, 2.0, 2.125) (3, -0.750000, -2.0250, -2.3, -2.125)"]
    );
}

#[test]
fn strings_dates_and_in_lists() {
    let out = run("p(k, s, d) -> int32(k), string(s), date(d).
        p(1, \"SMALL BRASS\", date(\"1996-02-28\")). p(2, \"PROMO STEEL\", date(\"1996-12-31\")).
        p(3, \"über\", date(\"1995-03-01\")).
        a(k) <- p(k, s, _), like(s, \"%BRASS\").
        b(k, t) <- p(k, s, _), prefix(s, \"PROMO\"), t = substr(s, 7, 3).
        c(k, n, j) <- p(k, s, _), n = strlen(s), j = concat(s, \"!\").
        e(k, y, m, x) <- p(k, _, d), y = year(d), m = month(d + 2), x = d - date(\"1995-01-01\").
        f(k) <- p(k, _, _), k in (1, 3).
        g(s) <- p(_, s, _), s > \"Q\".
        .output a. .output b. .output c. .output e. .output f. .output g.");
    assert_eq!(
        out,
        [
            "a: (1)",
            "b: (2, STE)",
            "c: (1, 11, SMALL BRASS!) (2, 11, PROMO STEEL!) (3, 4, über!)",
            "e: (1, 1996, 3, 423) (2, 1996, 1, 730) (3, 1995, 3, 59)",
            "f: (1) (3)",
            "g: (SMALL BRASS) (über)"
        ]
    );
}

#[test]
fn order_by_and_limit() {
    let out = run("r(a, b) -> int32(a), int32(b).
        r(1, 5). r(2, 5). r(3, 1). r(4, 9).
        .output r order by b desc limit 3.");
    assert_eq!(out, ["r: (4, 9) (1, 5) (2, 5)"]);
}

#[test]
fn functional_predicates_and_disjunction() {
    let out = run("price[p] = v -> int32(p), decimal(v).
        price[1] = 5.00. price[2] = 150.00.
        big(p) <- price[p] > 100.
        either(x) <- price[x] = _ ; x = 7.
        .output big. .output either.");
    assert_eq!(out, ["big: (2)", "either: (1) (2) (7)"]);
}

#[test]
fn inputs_and_evaluation_errors() {
    let src = "e(a, b) -> int32(a), int32(b). .input e.
        f[a] = b <- e(a, b).
        q(x) <- e(x, y), z = x / y, z > 0.
        .output f. .output q.";
    let prog = compile(src).unwrap();
    assert_eq!(
        evaluate(&prog, &Inputs::new()),
        Err(EvalError::MissingInput("e".into()))
    );
    let rows = |v: &[(i32, i32)]| {
        v.iter()
            .map(|(a, b)| vec![Value::Int32(*a), Value::Int32(*b)])
            .collect()
    };
    let inputs = Inputs::from([("e".to_string(), rows(&[(4, 2), (4, 2), (1, 1)]))]);
    assert_eq!(run_with(src, &inputs), ["f: (1, 1) (4, 2)", "q: (1) (4)"]);
    let inputs = Inputs::from([("e".to_string(), rows(&[(4, 2), (4, 3)]))]);
    assert!(matches!(evaluate(&prog, &inputs), Err(EvalError::Functional { .. })));
    let inputs = Inputs::from([("e".to_string(), rows(&[(4, 0)]))]);
    assert!(matches!(evaluate(&prog, &inputs), Err(EvalError::Arith(_))));
    let overflow = compile("n(x) -> int32(x). n(2147483647). m(y) <- n(x), y = x + 1. .output m.").unwrap();
    assert!(matches!(evaluate(&overflow, &Inputs::new()), Err(EvalError::Arith(_))));
}

#[test]
fn generated_programs_check_and_evaluate() {
    for seed in 0..400 {
        let c = case(seed, GenOptions::default());
        let prog = compile(&c.source).unwrap_or_else(|e| panic!("{}\n{e}", c.describe()));
        if let Err(e) = evaluate(&prog, &c.inputs) {
            panic!("{}\n{e}", c.describe());
        }
    }
}
