use crate::core::{CExprKind, CoreLit, CoreProgram, Type};
use crate::{check, print_core};
use fox_syntax::diag::render;

fn run(src: &str) -> (Option<CoreProgram>, String) {
    let (program, pdiags) = fox_syntax::parse(src);
    assert!(
        pdiags.is_empty(),
        "parse errors: {}",
        render("t.logic", src, &pdiags, false)
    );
    let (core, diags) = check(&program);
    (core, render("t.logic", src, &diags, false))
}

fn program(src: &str) -> CoreProgram {
    let (core, diags) = run(src);
    match core {
        Some(c) => c,
        None => panic!("expected success, got:\n{diags}"),
    }
}

fn core(src: &str) -> String {
    print_core(&program(src))
}

fn errors(src: &str) -> String {
    let (core, diags) = run(src);
    assert!(core.is_none(), "expected errors, got a program:\n{diags}");
    diags
}

fn error_count(diags: &str) -> usize {
    diags.lines().filter(|l| l.starts_with("error")).count()
}

const EDGE: &str = "edge(x, y) -> int32(x), int32(y).\n.input edge.\n";

// ---- programs that check ----

#[test]
fn transitive_closure() {
    let src = format!("{EDGE}path(x, y) <- edge(x, y).\npath(x, z) <- path(x, y), edge(y, z).\n.output path order by y desc limit 5.\n");
    insta::assert_snapshot!(core(&src), @r#"
    pred edge(x: int32, y: int32) input
    pred path(x: int32, y: int32)
    input edge from "edge.csv" sep ","
    stratum 0 (recursive): path
      path(x:int32, y:int32) <- edge(x, y).
      path(x:int32, z:int32) <- path(x, y:int32), edge(y, z).
    output path order by y desc limit 5
    "#);
}

#[test]
fn even_odd_is_one_recursive_stratum() {
    let src = "number(n) -> int32(n).\nnext(a, b) -> int32(a), int32(b).\n.input number. .input next.\n\
               even(0).\neven(n) <- number(n), next(m, n), odd(m).\nodd(n) <- number(n), next(m, n), even(m).\n";
    let p = program(src);
    assert_eq!(p.strata.len(), 1);
    assert!(p.strata[0].recursive);
    insta::assert_snapshot!(print_core(&p), @r#"
        pred number(n: int32) input
        pred next(a: int32, b: int32) input
        pred even(n: int32)
        pred odd(n: int32)
        input number from "number.csv" sep ","
        input next from "next.csv" sep ","
        stratum 0 (recursive): even, odd
          even(0).
          even(n:int32) <- number(n), next(m:int32, n), odd(m).
          odd(n:int32) <- number(n), next(m:int32, n), even(m).
        output even
        output odd
        "#);
}

#[test]
fn stratified_negation() {
    let src = format!(
        "{EDGE}node(x) <- edge(x, _).\nnode(y) <- edge(_, y).\npath(x, y) <- edge(x, y).\n\
         path(x, z) <- path(x, y), edge(y, z).\nunreached(x) <- node(x), !path(1, x).\n"
    );
    insta::assert_snapshot!(core(&src), @r#"
    pred edge(x: int32, y: int32) input
    pred node(x: int32)
    pred path(x: int32, y: int32)
    pred unreached(x: int32)
    input edge from "edge.csv" sep ","
    stratum 0: node
      node(x:int32) <- edge(x, _0:int32).
      node(y:int32) <- edge(_0:int32, y).
    stratum 1 (recursive): path
      path(x:int32, y:int32) <- edge(x, y).
      path(x:int32, z:int32) <- path(x, y:int32), edge(y, z).
    stratum 2: unreached
      unreached(x:int32) <- node(x), !path(1, x).
    output unreached
    "#);
}

#[test]
fn aggregation() {
    let src = "line(flag, status, qty, price) -> string(flag), string(status), int32(qty), decimal(price).\n.input line.\n\
               q1(flag, status, sum_qty, total, n, mean) <- agg<<sum_qty = sum(q), total = sum(p), n = count(), mean = avg(p)>> line(flag, status, q, p).\n\
               grand[] = s <- agg<<s = total(p)>> line(_, _, _, p).\n\
               cnt[f] = n <- agg<<n = count()>> line(f, _, _, _).\n";
    let p = program(src);
    insta::assert_snapshot!(print_core(&p), @r#"
        pred line(flag: string, status: string, qty: int32, price: decimal(2)) input
        pred q1(flag: string, status: string, sum_qty: int64, total: decimal38(2), n: int64, mean: decimal(6))
        pred grand[] = s: decimal38(2)
        pred cnt[f: string] = n: int64
        input line from "line.csv" sep ","
        stratum 0: q1
          q1(flag:string, status:string, sum_qty:int64, total:decimal38(2), n:int64, mean:decimal(6)) <- agg<<sum_qty = sum(cast<int64>(q)), total = sum(p), n = count(), mean = avg(p)>> line(flag, status, q:int32, p:decimal(2)).
        stratum 1: grand
          grand(s:decimal38(2)) <- agg<<s = sum(p)>> line(_0:string, _1:string, _2:int32, p:decimal(2)).
        stratum 2: cnt
          cnt(f:string, n:int64) <- agg<<n = count()>> line(f, _0:string, _1:int32, _2:decimal(2)).
        output cnt
        output grand
        output q1
        "#);
}

#[test]
fn sums_of_decimals_have_38_digits() {
    // A declared decimal column that receives a sum holds 38 digits, and so does what is
    // computed from it, in the predicates that read it; an input column never widens.
    let src = "line(k, price) -> int32(k), decimal(price).\n.input line.\n\
               total(k, t) -> int32(k), decimal(t, 4).\n\
               total(k, t) <- agg<<t = sum(p)>> line(k, p).\n\
               share(k, s) <- total(k, t), s = t * 2 + 1.5.\n\
               small(k, v) <- line(k, v), v < 10.\n";
    let p = program(src);
    let ty = |pred: &str, col: usize| {
        let info = p.preds.iter().find(|i| i.name == pred).unwrap();
        info.columns[col].ty
    };
    assert_eq!(ty("line", 1), Type::Decimal(2));
    assert_eq!(ty("total", 1), Type::WideDecimal(4));
    assert_eq!(ty("share", 1), Type::WideDecimal(4));
    assert_eq!(ty("small", 1), Type::Decimal(2));

    // Widening the digits never lowers the scale.
    let src = "line(k, price) -> int32(k), decimal(price).\n.input line.\n\
               total(k, t) -> int32(k), decimal(t, 1).\n\
               total(k, t) <- agg<<t = sum(p)>> line(k, p).\n";
    let e = errors(src);
    assert!(e.contains("decimal38(2)") && e.contains("decimal(1)"), "{e}");
}

#[test]
fn widening_inserts_casts() {
    let src = "a(x) -> int32(x).\nb(x) -> int64(x).\nw(x) -> int64(x).\n.input a. .input b.\n\
               s(v) <- a(x), b(y), v = x + y.\nw(x) <- a(x).\nj(x) <- a(x), b(x).\n";
    insta::assert_snapshot!(core(src), @r#"
        pred a(x: int32) input
        pred b(x: int64) input
        pred w(x: int64)
        pred s(v: int64)
        pred j(x: int32)
        input a from "a.csv" sep ","
        input b from "b.csv" sep ","
        stratum 0: w
          w($t0:int64) <- a(x:int32), $t0 = cast<int64>(x).
        stratum 1: s
          s(v:int64) <- a(x:int32), b(y:int64), v = cast<int64>(x) + y.
        stratum 2: j
          j(x:int32) <- a(x), b($j0:int64), cast<int64>(x) = $j0.
        output j
        output s
        output w
        "#);
}

#[test]
fn decimal_scales() {
    let src = "li(k, p, d, q) -> int64(k), decimal(p), decimal(d, 4), int32(q).\n.input li.\n\
               rev(k, r) <- li(k, p, d, _), r = p * (1 - d).\n\
               sum2(k, r) <- li(k, p, d, _), r = p + d.\n\
               ratio(k, r) <- li(k, p, d, _), r = p / d.\n\
               half(k, h) <- li(k, _, _, q), h = q / 2.\n\
               fl(k, f) <- li(k, p, _, _), f = p * 1.5e0.\n";
    let p = program(src);
    let ty = |name: &str| {
        let pred = p.preds.iter().find(|x| x.name == name).unwrap();
        pred.columns[1].ty
    };
    assert_eq!(ty("rev"), Type::Decimal(6));
    assert_eq!(ty("sum2"), Type::Decimal(4));
    assert_eq!(ty("ratio"), Type::Decimal(6));
    assert_eq!(ty("half"), Type::Int32);
    assert_eq!(ty("fl"), Type::Float64);
    insta::assert_snapshot!(print_core(&p).lines().filter(|l| l.contains("<-")).collect::<Vec<_>>().join("\n"), @r"
      rev(k:int64, r:decimal(6)) <- li(k, p:decimal(2), d:decimal(4), _0:int32), r = p * (1.0000 - d).
      sum2(k:int64, r:decimal(4)) <- li(k, p:decimal(2), d:decimal(4), _0:int32), r = cast<decimal(4)>(p) + d.
      ratio(k:int64, r:decimal(6)) <- li(k, p:decimal(2), d:decimal(4), _0:int32), r = p / d.
      half(k:int64, h:int32) <- li(k, _0:decimal(2), _1:decimal(4), q:int32), h = q / 2.
      fl(k:int64, f:float64) <- li(k, p:decimal(2), _0:decimal(4), _1:int32), f = cast<float64>(p) * 1.5f.
    ");
}

#[test]
fn dates() {
    let src = "o(k, d, e) -> int64(k), date(d), date(e).\n.input o.\n\
               late(k, n, s) <- o(k, d, e), d < date(\"1995-03-15\"), n = e - d, s = d + 90, year(d) = 1994.\n";
    insta::assert_snapshot!(core(src).lines().filter(|l| l.contains("<-")).collect::<Vec<_>>().join("\n"), @r#"  late(k:int64, n:int64, s:date) <- o(k, d:date, e:date), d < date("1995-03-15"), n = e - d, s = d + 90, year(d) = 1994."#);
}

#[test]
fn literal_adapts_to_int32() {
    let p = program(&format!("{EDGE}small(x) <- edge(x, _), x < 10.\n"));
    let rule = &p.strata[0].rules[0];
    let CoreLit::Filter { cond, .. } = &rule.body[1] else {
        panic!("expected a filter")
    };
    let CExprKind::Cmp(_, l, r) = &cond.kind else {
        panic!("expected a comparison")
    };
    assert_eq!(l.ty, Type::Int32);
    assert_eq!(r.ty, Type::Int32);
}

#[test]
fn types_inferred_and_widened_across_rules() {
    let src =
        "a(x) -> int32(x).\nb(x) -> decimal(x, 3).\n.input a. .input b.\nu(x) <- a(x).\nu(x) <- b(x).\nv(x) <- u(x).\n";
    insta::assert_snapshot!(core(src), @r#"
        pred a(x: int32) input
        pred b(x: decimal(3)) input
        pred u(x: decimal(3))
        pred v(x: decimal(3))
        input a from "a.csv" sep ","
        input b from "b.csv" sep ","
        stratum 0: u
          u($t0:decimal(3)) <- a(x:int32), $t0 = cast<decimal(3)>(x).
          u(x:decimal(3)) <- b(x).
        stratum 1: v
          v(x:decimal(3)) <- u(x).
        output v
        "#);
}

#[test]
fn desugaring() {
    let src = "p(x, s) -> int32(x), string(s).\nprice[k] = v -> int32(k), decimal(v).\n.input p. .input price.\n\
               either(x) <- p(x, _) ; price[x] = _.\n\
               both(x), also(x) <- p(x, _).\n\
               chain(x) <- p(x, _), 1 < x < 10.\n\
               big(k) <- price[k] > 100.\n\
               cheap(k) <- price[k] = v, v < 10.\n\
               named(x) <- p(x, s), like(s, \"%BRASS\"), !like(s, \"A%\"), !(s in (\"a\", \"b\")), x in (1, 2, 3).\n\
               dist(x, y) <- p(x, _), p(y, _), (x < 3 ; y > 5), x != y.\n";
    insta::assert_snapshot!(core(src), @r#"
        pred p(x: int32, s: string) input
        pred price[k: int32] = v: decimal(2) input
        pred either(x: int32)
        pred both(x: int32)
        pred also(x: int32)
        pred chain(x: int32)
        pred big(k: int32)
        pred cheap(k: int32)
        pred named(x: int32)
        pred dist(x: int32, y: int32)
        input p from "p.csv" sep ","
        input price from "price.csv" sep ","
        stratum 0: either
          either(x:int32) <- p(x, _0:string).
          either(x:int32) <- price(x, _0:decimal(2)).
        stratum 1: both
          both(x:int32) <- p(x, _0:string).
        stratum 2: also
          also(x:int32) <- p(x, _0:string).
        stratum 3: chain
          chain(x:int32) <- p(x, _0:string), 1 < x, x < 10.
        stratum 4: big
          big(k:int32) <- price(k, $f0:decimal(2)), $f0 > 100.00.
        stratum 5: cheap
          cheap(k:int32) <- price(k, v:decimal(2)), v < 10.00.
        stratum 6: named
          named(x:int32) <- p(x, s:string), like(s, "%BRASS"), !like(s, "A%"), !(s in ("a", "b")), x in (1, 2, 3).
        stratum 7: dist
          dist(x:int32, y:int32) <- p(x, _0:string), x < 3, p(y, _1:string), x != y.
          dist(x:int32, y:int32) <- p(x, _0:string), p(y, _1:string), y > 5, x != y.
        output also
        output big
        output both
        output chain
        output cheap
        output dist
        output either
        output named
        "#);
}

#[test]
fn negated_formulas() {
    let src = format!(
        "{EDGE}red(x) -> int32(x).\n.input red.\n\
         sink(x) <- edge(_, x), !edge(x, _).\n\
         nored(x) <- edge(x, _), !(edge(x, y), red(y)).\n\
         mid(x) <- edge(x, y), !(x < 3, y > 4).\n"
    );
    insta::assert_snapshot!(core(&src), @r#"
    pred edge(x: int32, y: int32) input
    pred red(x: int32) input
    pred sink(x: int32)
    pred nored(x: int32)
    pred mid(x: int32)
    pred $not0(x: int32)
    pred $not1(x: int32)
    input edge from "edge.csv" sep ","
    input red from "red.csv" sep ","
    stratum 0: $not0
      $not0(x:int32) <- edge(x, _0:int32).
    stratum 1: sink
      sink(x:int32) <- edge(_0:int32, x), !$not0(x).
    stratum 2: $not1
      $not1(x:int32) <- edge(x, y:int32), red(y).
    stratum 3: nored
      nored(x:int32) <- edge(x, _0:int32), !$not1(x).
    stratum 4: mid
      mid(x:int32) <- edge(x, y:int32), !(x < 3, y > 4).
    output mid
    output nored
    output sink
    "#);
}

#[test]
fn facts_and_default_outputs() {
    let src = "price[p] = v -> int64(p), decimal(v).\nprice[7] = 19.99.\nprice[8] = 5.\n\
               colour(\"red\", date(\"2020-01-31\"), true, 1.5f, -2).\ncheap(p) <- price[p] = v, v < 10.\n";
    insta::assert_snapshot!(core(src), @r#"
    pred price[p: int64] = v: decimal(2)
    pred colour(c0: string, c1: date, c2: bool, c3: float64, c4: int64)
    pred cheap(p: int64)
    stratum 0: price
      price(7, 19.99).
      price(8, 5.00).
    stratum 1: colour
      colour("red", date("2020-01-31"), true, 1.5f, -2).
    stratum 2: cheap
      cheap(p:int64) <- price(p, v:decimal(2)), v < 10.00.
    output cheap
    output colour
    "#);
}

#[test]
fn assignments_are_ordered_after_their_inputs() {
    let src = format!("{EDGE}r(x, w) <- w = v * 2, v = x + 1, edge(x, _).\n");
    let p = program(&src);
    let rule = &p.strata[0].rules[0];
    assert!(matches!(rule.body[0], CoreLit::Atom { .. }));
    let assigned: Vec<&str> = rule
        .body
        .iter()
        .filter_map(|l| match l {
            CoreLit::Assign { var, .. } => Some(rule.vars[var.0 as usize].name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(assigned, ["v", "w"]);
}

#[test]
fn rule_without_atoms_is_a_constant_rule() {
    insta::assert_snapshot!(core("one(x) <- x = 1.\n"), @r"
    pred one(x: int64)
    stratum 0: one
      one(x:int64) <- x = 1.
    output one
    ");
}

// ---- errors ----

#[test]
fn unknown_predicate_suggests() {
    insta::assert_snapshot!(errors(&format!("{EDGE}p(x, y) <- edg(x, y).\n")), @r"
    error: unknown predicate `edg`
      ┌─ t.logic:3:12
      │
    3 │ p(x, y) <- edg(x, y).
      │            ^^^ not declared, and defined by no fact or rule
      │
      = help: did you mean `edge`?
    ");
}

#[test]
fn unknown_type_suggests() {
    let d = errors("edge(x, y) -> int23(x), int32(y).\n");
    assert!(d.contains("error: unknown type `int23`"), "{d}");
    assert!(d.contains("help: did you mean `int32`?"), "{d}");
    let d = errors("p(x, y) -> int32(x).\n");
    assert!(d.contains("column `y` of `p` has no type"), "{d}");
    let d = errors("p(x) -> int32(x), string(x).\n");
    assert!(d.contains("column `x` of `p` has two types"), "{d}");
    let d = errors("p(x) -> int32(z).\n");
    assert!(d.contains("`z` is not a column of `p`"), "{d}");
}

#[test]
fn declared_twice_differently() {
    insta::assert_snapshot!(errors("p(x) -> int32(x).\np(x, y) -> int32(x), int32(y).\n"), @r"
        warning: `p` is declared but has no facts, rules or `.input`; it is always empty
          ┌─ t.logic:1:1
          │
        1 │ p(x) -> int32(x).
          │ ^^^^^^^^^^^^^^^^^ declared here
          │
          = help: read it from data with `.input p.`

        error: `p` is declared twice with different shapes
          ┌─ t.logic:2:1
          │
        1 │ p(x) -> int32(x).
          │ ----------------- first declared here as `p(x: int32)`
        2 │ p(x, y) -> int32(x), int32(y).
          │ ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ declared here as `p(x: int32, y: int32)`
        ");
}

#[test]
fn arity_mismatch_points_at_declaration() {
    insta::assert_snapshot!(errors(&format!("{EDGE}p(x) <- edge(x, y, z).\n")), @r"
    error: `edge` has 2 columns but 3 arguments given
      ┌─ t.logic:3:9
      │
    1 │ edge(x, y) -> int32(x), int32(y).
      │ --------------------------------- `edge(x, y)` is defined here
    2 │ .input edge.
    3 │ p(x) <- edge(x, y, z).
      │         ^^^^^^^^^^^^^ wrong number of arguments
    ");
}

#[test]
fn functional_and_relational_use() {
    let d = errors("price[p] = v -> int64(p), decimal(v).\n.input price.\nq(p) <- price(p, _).\n");
    assert!(
        d.contains("`price` is a functional predicate, used here as a relation"),
        "{d}"
    );
    let d = errors(&format!("{EDGE}q(y) <- edge[1] = y.\n"));
    assert!(
        d.contains("`edge` is a relation, used here as a functional predicate"),
        "{d}"
    );
}

#[test]
fn builtins_cannot_be_shadowed_or_misused() {
    let d = errors("like(x) -> string(x).\n");
    assert!(
        d.contains("`like` is a built-in predicate and cannot be redefined"),
        "{d}"
    );
    let d = errors(&format!("{EDGE}year(x) <- edge(x, _).\n"));
    assert!(
        d.contains("`year` is a built-in function and cannot be redefined"),
        "{d}"
    );
    let d = errors(&format!("{EDGE}p(x) <- edge(x, _), strlen(x).\n"));
    assert!(d.contains("`strlen` is a built-in function, not a predicate"), "{d}");
    let d = errors(&format!("{EDGE}p(x) <- edge(x, y), like(x, \"a%\").\n"));
    assert!(d.contains("`like` expects a string here, found int32"), "{d}");
    let d = errors(&format!("{EDGE}p(n) <- edge(x, _), n = substr(x, 1).\n"));
    assert!(d.contains("`substr` takes 3 arguments but 2 were given"), "{d}");
    let d = errors(&format!("{EDGE}p(n) <- edge(x, _), n = yaer(x).\n"));
    assert!(
        d.contains("unknown function `yaer`") && d.contains("did you mean `year`?"),
        "{d}"
    );
}

#[test]
fn inputs_must_be_declared_and_not_derived() {
    let d = errors(".input edge.\n");
    assert!(d.contains("`.input` of undeclared predicate `edge`"), "{d}");
    insta::assert_snapshot!(errors(&format!("{EDGE}edge(x, y) <- edge(y, x).\n")), @r"
    error: `edge` is read with `.input` and cannot also be defined by rules
      ┌─ t.logic:3:1
      │
    2 │ .input edge.
      │ ------------ read from data here
    3 │ edge(x, y) <- edge(y, x).
      │ ^^^^^^^^^^ defined here by rules
      │
      = help: remove the `.input` directive, or give the derived predicate another name
    ");
}

#[test]
fn outputs_are_checked() {
    let d = errors(&format!("{EDGE}.output edg.\n"));
    assert!(
        d.contains("`.output` of unknown predicate `edg`") && d.contains("did you mean `edge`?"),
        "{d}"
    );
    let d = errors(&format!("{EDGE}.output edge order by z.\n"));
    assert!(d.contains("`z` is not a column of `edge`"), "{d}");
}

#[test]
fn unsafe_variables() {
    insta::assert_snapshot!(errors(&format!("{EDGE}p(x) <- edge(x, y), !edge(y, z).\n")), @r"
    error: unsafe rule: variable `z` is not bound
      ┌─ t.logic:3:30
      │
    3 │ p(x) <- edge(x, y), !edge(y, z).
      │                              ^ `z` is used in a negated atom but no positive atom or assignment binds it
      │
      = help: bind `z` with a positive atom such as `edge(…, z)`, or with an assignment `z = …`
    ");
    let d = errors(&format!("{EDGE}p(x) <- edge(x, _), x < w.\n"));
    assert!(d.contains("unsafe rule: variable `w` is not bound"), "{d}");
    let d = errors(&format!("{EDGE}p(x, z) <- edge(x, _).\n"));
    assert!(d.contains("unsafe rule: head variable `z` is not bound"), "{d}");
    let d = errors("p(x) <- x > 1.\n");
    assert!(d.contains("variable `x` is not bound"), "{d}");
    let d = errors("p(x, y).\n");
    assert!(d.contains("a fact must be ground, but `x` is a variable"), "{d}");
}

#[test]
fn negation_and_aggregation_in_cycles() {
    insta::assert_snapshot!(errors(&format!("{EDGE}p(x) <- edge(x, _), !q(x).\nq(x) <- p(x).\nq(x) <- edge(x, _).\n")), @r"
    error: `p` depends negatively on itself through `p -> q -> p`
      ┌─ t.logic:3:21
      │
    3 │ p(x) <- edge(x, _), !q(x).
      │                     ^^^^^ negation inside a recursive cycle
      │
      = help: negation must not occur in a recursive cycle: what is negated has to be computed completely before `p`
    ");
    let d = errors(&format!("{EDGE}c(x, n) <- agg<<n = count()>> edge(x, _), c(x, _).\n"));
    assert!(d.contains("`c` aggregates over itself through `c -> c`"), "{d}");
}

#[test]
fn type_errors() {
    let d = errors("f(x) -> float64(x).\ni(x) -> int32(x).\n.input f.\ni(x) <- f(x).\n");
    assert!(d.contains("column `x` of `i` is int32, but this is float64"), "{d}");
    let d = errors(&format!("{EDGE}s(z) <- edge(x, y), z = \"a\" + \"b\".\n"));
    assert!(
        d.contains("cannot apply `+` to string and string") && d.contains("concat(a, b)"),
        "{d}"
    );
    let d = errors(&format!("{EDGE}p(x) <- edge(x, _), x < 3000000000.\n"));
    assert!(d.contains("integer literal 3000000000 does not fit in int32"), "{d}");
    let d = errors("o(d) -> date(d).\n.input o.\np(d) <- o(d), d < 5.\n");
    assert!(
        d.contains("cannot compare date with int64") && d.contains("dates compare only with dates"),
        "{d}"
    );
    let d = errors("o(d) -> date(d).\n.input o.\np(x) <- o(d), o(e), x = d + e.\n");
    assert!(d.contains("cannot apply `+` to date and date"), "{d}");
    let d = errors("o(s, n) -> string(s), int32(n).\n.input o.\np(s) <- o(s, n), s = n.\n");
    assert!(d.contains("cannot compare string with int32"), "{d}");
    let d = errors("o(s, n) -> string(s), int32(n).\n.input o.\np(s) <- o(s, _), o(_, s).\n");
    assert!(
        d.contains("variable `s` is used for values of type string and of type int32"),
        "{d}"
    );
}

#[test]
fn aggregate_errors() {
    let d = errors(&format!("{EDGE}c(x, n) <- agg<<n = count()>> edge(x, n).\n"));
    assert!(d.contains("aggregate result `n` is also used in the body"), "{d}");
    let d = errors(&format!("{EDGE}c(x, n) <- agg<<n = count(y)>> edge(x, y).\n"));
    assert!(d.contains("`count()` takes no argument"), "{d}");
    let d = errors(&format!("{EDGE}c(x, n) <- agg<<n = summ(y)>> edge(x, y).\n"));
    assert!(
        d.contains("unknown aggregate function `summ`") && d.contains("did you mean `sum`?"),
        "{d}"
    );
    let d = errors("s(x) -> string(x).\n.input s.\nc(n) <- agg<<n = sum(x)>> s(x).\n");
    assert!(d.contains("cannot compute `sum` of values of type string"), "{d}");
    let d = errors(&format!("{EDGE}c(x, n) <- agg<<n = sum(w)>> edge(x, _).\n"));
    assert!(d.contains("variable `w` is not bound"), "{d}");
}

#[test]
fn uninferable_type_asks_for_a_declaration() {
    insta::assert_snapshot!(errors("loop(x) <- loop(x).\n"), @r"
    error: cannot infer the type of column `x` of `loop`
      ┌─ t.logic:1:1
      │
    1 │ loop(x) <- loop(x).
      │ ^^^^^^^ no rule or fact determines this type
      │
      = help: declare it: `loop(x) -> int64(x).`
    ");
}

#[test]
fn all_errors_of_a_file_are_reported() {
    let src = format!(
        "{EDGE}a(x) <- edg(x, _).\nb(x) <- edge(x, _), x < \"s\".\nc(x, w) <- edge(x, _).\nd(x) <- edge(x), !e(x).\n"
    );
    let d = errors(&src);
    assert_eq!(error_count(&d), 5, "{d}");
}

#[test]
fn declared_but_empty_warns() {
    let (core, diags) = run("e(x) -> int32(x).\np(x) <- e(x).\n");
    assert!(core.is_some());
    assert!(
        diags.contains("warning: `e` is declared but has no facts, rules or `.input`"),
        "{diags}"
    );
}

#[test]
fn never_panics_on_mangled_programs() {
    let base = "edge(x, y) -> int32(x), int32(y).\n.input edge.\nprice[p] = v -> int64(p), decimal(v).\n\
                path(x, y) <- edge(x, y) ; edge(y, x).\npath(x, z) <- path(x, y), edge(y, z), !(edge(z, w), w < 3).\n\
                c(x, n) <- agg<<n = count(), s = sum(v)>> path(x, y), price[y] = v, v > 1.5, year(date(\"2000-01-01\")) = 2000.\n\
                q(x) <- c(x, n), n + 1 > x * 2 / 3 - 1, !like(\"a\", \"b\"), x in (1, 2), s = concat(\"a\", \"b\").\n\
                .output c order by n desc limit 3.\n";
    let bytes = base.as_bytes();
    for cut in 0..bytes.len() {
        for len in [1, 2, 5] {
            let end = (cut + len).min(bytes.len());
            let mut s = bytes[..cut].to_vec();
            s.extend_from_slice(&bytes[end..]);
            let Ok(src) = String::from_utf8(s) else { continue };
            let (program, _) = fox_syntax::parse(&src);
            let (core, diags) = check(&program);
            if let Some(c) = core {
                let _ = print_core(&c);
            }
            let _ = render("t.logic", &src, &diags, false);
        }
    }
}

#[test]
fn functional_predicate_written_as_relation_in_a_head() {
    insta::assert_snapshot!(errors("price[p] = v -> int64(p), decimal(v).\nprice(1, 2.00).\n"), @r"
        error: `price` is a functional predicate, written here as a relation
          ┌─ t.logic:2:1
          │
        1 │ price[p] = v -> int64(p), decimal(v).
          │ ------------------------------------- declared as `price[p] = v`
        2 │ price(1, 2.00).
          │ ^^^^^^^^^^^^^^ written as a relation
          │
          = help: write `price[1] = 2.00`
    ");
    let d = errors(
        "e(x, y) -> int64(x), int64(y).\ne[1] = 2.\nq(a, b) -> int64(a), int64(b).\n.input q.\ne[a] = b <- q(a, b).\n",
    );
    assert!(
        d.contains("`e` is a relation, written here as a functional predicate"),
        "{d}"
    );
    assert!(
        d.contains("help: write `e(1, 2)`") && d.contains("help: write `e(a, b)`"),
        "{d}"
    );
    assert!(!d.contains("declared but has no facts"), "{d}");
}

#[test]
fn conflicting_functional_facts() {
    insta::assert_snapshot!(errors("price[p] = v -> int64(p), decimal(v).\nprice[7] = 19.99.\nprice[7] = 18.00.\n"), @r"
        error: `price[7]` is given two values
          ┌─ t.logic:3:1
          │
        2 │ price[7] = 19.99.
          │ ---------------- first value `19.99`
        3 │ price[7] = 18.00.
          │ ^^^^^^^^^^^^^^^^ second value `18.00`
          │
          = help: a functional predicate has at most one value per key; remove one of these facts
    ");
    // Equal duplicates are one fact; other keys are independent.
    let p = program("price[p] = v -> int64(p), decimal(v).\nprice[7] = 19.99.\nprice[7] = 19.99.\nprice[8] = 18.00.\n");
    assert_eq!(p.strata[0].facts.len(), 3);
    let d = errors("m[a, b] = v <- v = 1, a = 1, b = 2.\nm[1, 2] = 1.\nm[1, 3] = 2.\nm[1, 2] = 3.\n");
    assert!(d.contains("`m[1, 2]` is given two values"), "{d}");
    assert_eq!(error_count(&d), 1, "{d}");
}

#[test]
fn type_names_are_not_predicate_names() {
    insta::assert_snapshot!(errors(&format!("{EDGE}int32(x) <- edge(x, _).\n")), @r"
        error: `int32` is a type and cannot be used as a predicate name
          ┌─ t.logic:3:1
          │
        3 │ int32(x) <- edge(x, _).
          │ ^^^^^ a type name
          │
          = help: choose another name
    ");
    for name in [
        "int32", "int64", "int", "float64", "float", "decimal", "string", "date", "bool",
    ] {
        let d = errors(&format!("{EDGE}p(x) <- edge(x, _), {name}(x).\n"));
        assert!(
            d.contains(&format!("`{name}` is a type and cannot be used as a predicate name")),
            "{d}"
        );
        let d = errors(&format!("{name}(x) -> int32(x).\n"));
        assert!(d.contains("is a type and cannot be used as a predicate name"), "{d}");
    }
    let d = errors(".input string.\n.output date.\n");
    assert_eq!(error_count(&d), 2, "{d}");
    // Type atoms in declarations are still types.
    program("t(a, b, c, d, e, f, g, h, i) -> int32(a), int64(b), int(c), float64(d), float(e), decimal(f), string(g), date(h), bool(i).\n.input t.\n");
}

#[test]
fn comparison_type_error_labels_each_side() {
    // codespan leaves trailing spaces on the connector line.
    let d = errors("o(name) -> string(name).\n.input o.\np(name) <- o(name), name = 42.\n");
    let d: Vec<&str> = d.lines().map(str::trim_end).collect();
    insta::assert_snapshot!(d.join("\n"), @r"
        error: cannot compare string with int64
          ┌─ t.logic:3:21
          │
        3 │ p(name) <- o(name), name = 42.
          │                     ^^^^   -- this is an integer
          │                     │
          │                     `name` is a string
          │
          = help: strings compare only with strings
    ");
}

#[test]
fn no_suggestion_between_one_letter_names() {
    let d = errors("e(x) -> int32(x).\n.input e.\nf(x) <- g(x).\n");
    assert!(!d.contains("did you mean"), "{d}");
    let d = errors("edge(x) -> int32(x).\n.input edge.\nf(x) <- edg(x).\n");
    assert!(d.contains("did you mean `edge`?"), "{d}");
}

#[test]
fn core_strings_are_escaped() {
    let src = "s(x) -> string(x).\ns(\"a\\tb\\rc\\nd\\\"e\\\\f\").\n";
    assert!(core(src).contains(r#"s("a\tb\rc\nd\"e\\f")."#), "{}", core(src));
}

#[test]
fn like_and_prefix_patterns_are_string_literals() {
    let src = "p(id, k) -> int32(id), string(k).\n.input p.\n";
    let d = errors(&format!("{src}q(id) <- p(id, k), like(k, k).\n"));
    assert!(
        d.contains("error: the pattern of `like` must be a string literal"),
        "{d}"
    );
    assert!(d.contains("t.logic:3:28"), "{d}");
    let d = errors(&format!("{src}q(id) <- p(id, k), s = \"A%\", !prefix(k, s).\n"));
    assert!(
        d.contains("error: the pattern of `prefix` must be a string literal"),
        "{d}"
    );
    assert!(d.contains("t.logic:3:41"), "{d}");
    let d = errors(&format!("{src}q(id, b) <- p(id, k), b = like(k, concat(k, \"%\")).\n"));
    assert!(d.contains("the pattern of `like` must be a string literal"), "{d}");
    program(&format!(
        "{src}q(id) <- p(id, k), like(k, \"%A\"), !prefix(k, \"B\").\n"
    ));
}

#[test]
fn an_input_needs_a_column() {
    let d = errors("z() -> .\n.input z.\nq() <- z().\n");
    assert!(d.contains("error: `.input` of `z`, which has no columns"), "{d}");
    assert!(d.contains("t.logic:2:8"), "{d}");
}

#[test]
fn decimal_literals_have_at_most_18_digits() {
    let decl = "p(x) -> decimal(x).\n";
    // 18 digits in all are a decimal; 19 are not, whether written or after padding to
    // the column's scale.
    program(&format!("{decl}p(9999999999999999.99).\np(-9999999999999999.99).\n"));
    program("q(x) <- x = 12345678901234567.8.\n");
    let d = errors("q(x) <- x = 123456789012345678.9.\n");
    assert!(
        d.contains("decimal literal 123456789012345678.9 has more than 18 digits; a decimal holds at most 18"),
        "{d}"
    );
    assert!(d.contains("t.logic:1:13"), "{d}");
    let d = errors(&format!("{decl}p(12345678901234567.8).\n"));
    assert!(d.contains("does not fit in decimal(2)"), "{d}");
    assert!(d.contains("t.logic:2:3"), "{d}");
    let d = errors(&format!("{decl}p(92233720368547758.07).\n"));
    assert!(d.contains("has more than 18 digits"), "{d}");
    // An integer literal in a decimal column is padded too.
    let d = errors(&format!("{decl}p(10000000000000000).\n"));
    assert!(d.contains("does not fit in decimal(2)"), "{d}");
}
