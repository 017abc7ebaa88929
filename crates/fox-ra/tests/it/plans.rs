use crate::common;

use common::eval::{ints, run};
use common::*;
use fox_ra::*;
use fox_sema::core::{AggFunc, ArithOp, CmpOp, Type, Value};

const I: Type = Type::Int32;

fn ops(plan: &RaPlan) -> Vec<&Op> {
    plan.blocks
        .iter()
        .flat_map(|b| &b.stmts)
        .filter_map(|s| match s {
            Stmt::Let { op, .. } => Some(op),
            _ => None,
        })
        .collect()
}

fn count(plan: &RaPlan, pred: impl Fn(&Op) -> bool) -> usize {
    ops(plan).into_iter().filter(|o| pred(o)).count()
}

/// The relations a temp is computed from.
fn scanned(plan: &RaPlan, t: TempId) -> Vec<String> {
    let def = plan.blocks.iter().flat_map(|b| &b.stmts).find_map(|s| match s {
        Stmt::Let { dst, op, .. } if *dst == t => Some(op),
        _ => None,
    });
    match def {
        Some(Op::Scan(r)) => vec![plan.relations[r.0 as usize].name.clone()],
        Some(op) => op.inputs().into_iter().flat_map(|i| scanned(plan, i)).collect(),
        None => panic!("t{} is not defined", t.0),
    }
}

fn is_multi(o: &Op) -> bool {
    matches!(o, Op::MultiJoin { .. })
}

fn is_join(o: &Op) -> bool {
    matches!(o, Op::Join { .. })
}

/// Plans, validates, and checks that the RON form reads back equal.
fn planned(p: &Prog) -> RaPlan {
    let plan = plan(&p.core).unwrap_or_else(|e| panic!("planning failed: {e}"));
    validate(&plan).unwrap_or_else(|e| panic!("{e}\n{}", print_plan(&plan)));
    let back = from_ron(&to_ron(&plan)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back, plan);
    plan
}

/// `path(x, y) <- edge(x, y).  path(x, z) <- path(x, y), edge(y, z).`
fn transitive_closure() -> Prog {
    let mut p = Prog::new();
    let edge = p.input("edge", &[("x", I), ("y", I)]);
    let path = p.pred("path", &[("x", I), ("y", I)]);
    let mut r1 = Rule::new();
    let (x, y) = (r1.var("x", I), r1.var("y", I));
    r1.atom(edge, vec![v(x), v(y)]);
    let mut r2 = Rule::new();
    let (x2, y2, z2) = (r2.var("x", I), r2.var("y", I), r2.var("z", I));
    r2.atom(path, vec![v(x2), v(y2)]).atom(edge, vec![v(y2), v(z2)]);
    let rules = vec![r1.head(path, vec![v(x), v(y)]), r2.head(path, vec![v(x2), v(z2)])];
    p.stratum(&[path], true, rules, vec![]);
    p.output(path, &[], None);
    p
}

#[test]
fn transitive_closure_is_semi_naive() {
    let plan = planned(&transitive_closure());
    insta::assert_snapshot!(print_plan(&plan));
    assert_eq!(count(&plan, is_multi), 0);
    let out = run(&plan, &[("edge", ints(&[&[1, 2], &[2, 3], &[3, 4], &[4, 2]]))]);
    let expected = ints(&[
        &[1, 2],
        &[1, 3],
        &[1, 4],
        &[2, 2],
        &[2, 3],
        &[2, 4],
        &[3, 2],
        &[3, 3],
        &[3, 4],
        &[4, 2],
        &[4, 3],
        &[4, 4],
    ]);
    assert_eq!(out["path"], expected);
    assert_eq!(run(&plan, &[("edge", vec![])])["path"], Vec::<Vec<Value>>::new());
}

#[test]
fn even_odd_mutual_recursion() {
    // even(0).  odd(n) <- number(n), next(m, n), even(m).  even(n) <- number(n), next(m, n), odd(m).
    let mut p = Prog::new();
    let number = p.input("number", &[("n", I)]);
    let next = p.input("next", &[("m", I), ("n", I)]);
    let even = p.pred("even", &[("n", I)]);
    let odd = p.pred("odd", &[("n", I)]);
    let mut rules = Vec::new();
    for (head, other) in [(odd, even), (even, odd)] {
        let mut r = Rule::new();
        let (n, m) = (r.var("n", I), r.var("m", I));
        r.atom(number, vec![v(n)])
            .atom(next, vec![v(m), v(n)])
            .atom(other, vec![v(m)]);
        rules.push(r.head(head, vec![v(n)]));
    }
    p.stratum(&[even, odd], true, rules, vec![fact(even, vec![Value::Int32(0)])]);
    p.output(even, &[], None);
    p.output(odd, &[], None);
    let plan = planned(&p);
    insta::assert_snapshot!(print_plan(&plan));
    let numbers: Vec<i32> = (0..10).collect();
    let number_rows: Vec<&[i32]> = numbers.iter().map(std::slice::from_ref).collect();
    let pairs: Vec<[i32; 2]> = (0..9).map(|i| [i, i + 1]).collect();
    let next_rows: Vec<&[i32]> = pairs.iter().map(|p| p.as_slice()).collect();
    let out = run(&plan, &[("number", ints(&number_rows)), ("next", ints(&next_rows))]);
    assert_eq!(out["even"], ints(&[&[0], &[2], &[4], &[6], &[8]]));
    assert_eq!(out["odd"], ints(&[&[1], &[3], &[5], &[7], &[9]]));
}

fn triangle() -> Prog {
    // tri(x, y, z) <- edge(x, y), edge(y, z), edge(x, z), x < y, y < z.
    let mut p = Prog::new();
    let edge = p.input("edge", &[("a", I), ("b", I)]);
    let tri = p.pred("tri", &[("x", I), ("y", I), ("z", I)]);
    let mut r = Rule::new();
    let (x, y, z) = (r.var("x", I), r.var("y", I), r.var("z", I));
    r.atom(edge, vec![v(x), v(y)])
        .atom(edge, vec![v(y), v(z)])
        .atom(edge, vec![v(x), v(z)]);
    let (xy, yz) = (cmp(CmpOp::Lt, r.e(x), r.e(y)), cmp(CmpOp::Lt, r.e(y), r.e(z)));
    r.filter(xy).filter(yz);
    p.stratum(&[tri], false, vec![r.head(tri, vec![v(x), v(y), v(z)])], vec![]);
    p.output(tri, &[], None);
    p
}

/// Both directions of each undirected edge.
fn undirected(edges: &[[i32; 2]]) -> Vec<Vec<Value>> {
    let rows: Vec<[i32; 2]> = edges.iter().flat_map(|&[a, b]| [[a, b], [b, a]]).collect();
    let refs: Vec<&[i32]> = rows.iter().map(|r| r.as_slice()).collect();
    ints(&refs)
}

#[test]
fn triangle_is_a_multi_join() {
    let plan = planned(&triangle());
    insta::assert_snapshot!(print_plan(&plan));
    assert_eq!(count(&plan, is_multi), 1);
    assert_eq!(count(&plan, is_join), 0);
    let out = run(
        &plan,
        &[("edge", undirected(&[[1, 2], [2, 3], [1, 3], [3, 4], [2, 4], [4, 5]]))],
    );
    assert_eq!(out["tri"], ints(&[&[1, 2, 3], &[2, 3, 4]]));
}

#[test]
fn four_clique_is_a_multi_join() {
    // cl(x,y,z,w) <- E(x,y), E(x,z), E(x,w), E(y,z), E(y,w), E(z,w), x < y, y < z, z < w.
    let mut p = Prog::new();
    let e = p.input("E", &[("a", I), ("b", I)]);
    let cl = p.pred("cl", &[("x", I), ("y", I), ("z", I), ("w", I)]);
    let mut r = Rule::new();
    let vs = [r.var("x", I), r.var("y", I), r.var("z", I), r.var("w", I)];
    for i in 0..4 {
        for j in i + 1..4 {
            r.atom(e, vec![v(vs[i]), v(vs[j])]);
        }
    }
    for i in 0..3 {
        r.filter(cmp(CmpOp::Lt, r.e(vs[i]), r.e(vs[i + 1])));
    }
    p.stratum(
        &[cl],
        false,
        vec![r.head(cl, vs.iter().map(|&x| v(x)).collect())],
        vec![],
    );
    p.output(cl, &[], None);
    let plan = planned(&p);
    insta::assert_snapshot!(print_plan(&plan));
    assert_eq!(count(&plan, is_multi), 1);
    assert_eq!(count(&plan, is_join), 0);
    let k5_minus: Vec<[i32; 2]> = vec![[1, 2], [1, 3], [1, 4], [2, 3], [2, 4], [3, 4], [4, 5], [3, 5], [2, 5]];
    let out = run(&plan, &[("E", undirected(&k5_minus))]);
    assert_eq!(out["cl"], ints(&[&[1, 2, 3, 4], &[2, 3, 4, 5]]));
}

#[test]
fn two_atoms_make_a_binary_join() {
    // q(x, z) <- a(x, y), b(y, z).
    let mut p = Prog::new();
    let a = p.input("a", &[("s", I), ("t", I)]);
    let b = p.input("b", &[("s", I), ("t", I)]);
    let q = p.pred("q", &[("x", I), ("z", I)]);
    let mut r = Rule::new();
    let (x, y, z) = (r.var("x", I), r.var("y", I), r.var("z", I));
    r.atom(a, vec![v(x), v(y)]).atom(b, vec![v(y), v(z)]);
    p.stratum(&[q], false, vec![r.head(q, vec![v(x), v(z)])], vec![]);
    p.output(q, &[], None);
    let plan = planned(&p);
    insta::assert_snapshot!(print_plan(&plan));
    assert_eq!(count(&plan, is_multi), 0);
    assert_eq!(count(&plan, is_join), 1);
    let out = run(
        &plan,
        &[
            ("a", ints(&[&[1, 2], &[1, 3], &[5, 6]])),
            ("b", ints(&[&[2, 7], &[3, 7], &[4, 8]])),
        ],
    );
    assert_eq!(out["q"], ints(&[&[1, 7]]));
}

#[test]
fn acyclic_path_query_uses_binary_joins() {
    // q(x, w) <- a(x, y), b(y, z), c(z, 5, w).   c is selected on a constant, so it starts.
    let mut p = Prog::new();
    let a = p.input("a", &[("s", I), ("t", I)]);
    let b = p.input("b", &[("s", I), ("t", I)]);
    let c3 = p.input("c", &[("s", I), ("k", I), ("t", I)]);
    let q = p.pred("q", &[("x", I), ("w", I)]);
    let mut r = Rule::new();
    let (x, y, z, w) = (r.var("x", I), r.var("y", I), r.var("z", I), r.var("w", I));
    r.atom(a, vec![v(x), v(y)])
        .atom(b, vec![v(y), v(z)])
        .atom(c3, vec![v(z), c(Value::Int32(5)), v(w)]);
    p.stratum(&[q], false, vec![r.head(q, vec![v(x), v(w)])], vec![]);
    p.output(q, &[], None);
    let plan = planned(&p);
    insta::assert_snapshot!(print_plan(&plan));
    assert_eq!(count(&plan, is_multi), 0);
    assert_eq!(count(&plan, is_join), 2);
    // The constant-selected atom is the smallest estimate, so it starts the join order.
    let first_join = ops(&plan).into_iter().find(|o| is_join(o)).cloned();
    let Some(Op::Join { left, right, .. }) = first_join else {
        panic!("no join")
    };
    assert_eq!(scanned(&plan, left), vec!["c"]);
    assert_eq!(scanned(&plan, right), vec!["b"]);
    let out = run(
        &plan,
        &[
            ("a", ints(&[&[1, 2], &[9, 9]])),
            ("b", ints(&[&[2, 3], &[9, 4]])),
            ("c", ints(&[&[3, 5, 10], &[3, 6, 11], &[4, 5, 12]])),
        ],
    );
    assert_eq!(out["q"], ints(&[&[1, 10], &[9, 12]]));
}

#[test]
fn negation_after_recursion() {
    // reach(x) <- x = 1.  reach(y) <- reach(x), edge(x, y).  unreached(x) <- node(x), !reach(x).
    let mut p = Prog::new();
    let node = p.input("node", &[("n", I)]);
    let edge = p.input("edge", &[("a", I), ("b", I)]);
    let reach = p.pred("reach", &[("n", I)]);
    let unreached = p.pred("unreached", &[("n", I)]);
    let mut r1 = Rule::new();
    let x1 = r1.var("x", I);
    r1.assign(x1, lit(Value::Int32(1), I));
    let mut r2 = Rule::new();
    let (x2, y2) = (r2.var("x", I), r2.var("y", I));
    r2.atom(reach, vec![v(x2)]).atom(edge, vec![v(x2), v(y2)]);
    p.stratum(
        &[reach],
        true,
        vec![r1.head(reach, vec![v(x1)]), r2.head(reach, vec![v(y2)])],
        vec![],
    );
    let mut r3 = Rule::new();
    let x3 = r3.var("x", I);
    r3.atom(node, vec![v(x3)]).not(reach, vec![v(x3)]);
    p.stratum(&[unreached], false, vec![r3.head(unreached, vec![v(x3)])], vec![]);
    p.output(unreached, &[], None);
    let plan = planned(&p);
    insta::assert_snapshot!(print_plan(&plan));
    assert_eq!(count(&plan, |o| matches!(o, Op::AntiJoin { .. })), 1);
    let out = run(
        &plan,
        &[
            ("node", ints(&[&[1], &[2], &[3], &[4], &[5]])),
            ("edge", ints(&[&[1, 2], &[2, 1], &[4, 5]])),
        ],
    );
    assert_eq!(out["unreached"], ints(&[&[3], &[4], &[5]]));
}

#[test]
fn negated_atom_with_a_constant() {
    // lonely(x) <- node(x), !edge(1, x).
    let mut p = Prog::new();
    let node = p.input("node", &[("n", I)]);
    let edge = p.input("edge", &[("a", I), ("b", I)]);
    let lonely = p.pred("lonely", &[("n", I)]);
    let mut r = Rule::new();
    let x = r.var("x", I);
    r.atom(node, vec![v(x)]).not(edge, vec![c(Value::Int32(1)), v(x)]);
    p.stratum(&[lonely], false, vec![r.head(lonely, vec![v(x)])], vec![]);
    p.output(lonely, &[], None);
    let plan = planned(&p);
    let out = run(
        &plan,
        &[("node", ints(&[&[1], &[2], &[3]])), ("edge", ints(&[&[1, 2], &[2, 3]]))],
    );
    assert_eq!(out["lonely"], ints(&[&[1], &[3]]));
}

fn dec(unscaled: i128, scale: u8) -> Value {
    Value::Decimal { unscaled, scale }
}

#[test]
fn aggregation_counts_distinct_bindings() {
    // rev(k, r) <- line(k, _, p, d), r = p * (1 - d).
    // q(k, total, n) <- agg<<total = sum(r), n = count()>> rev(k, r), line(k, _, _, _).
    // .output q order by total desc limit 2.
    let d2 = Type::Decimal(2);
    let d4 = Type::Decimal(4);
    let l = Type::Int64;
    let mut p = Prog::new();
    let line = p.input("line", &[("key", I), ("item", I), ("price", d2), ("disc", d2)]);
    let rev = p.pred("rev", &[("k", I), ("r", d4)]);
    let q = p.pred("q", &[("k", I), ("total", d4), ("n", l)]);
    let mut r1 = Rule::new();
    let (k, _i, pr, d, rv) = (
        r1.var("k", I),
        r1.var("_1", I),
        r1.var("p", d2),
        r1.var("d", d2),
        r1.var("r", d4),
    );
    r1.atom(line, vec![v(k), v(_i), v(pr), v(d)]);
    let one_minus_d = arith(ArithOp::Sub, lit(dec(100, 2), d2), r1.e(d), d2);
    r1.assign(rv, arith(ArithOp::Mul, r1.e(pr), one_minus_d, d4));
    p.stratum(&[rev], false, vec![r1.head(rev, vec![v(k), v(rv)])], vec![]);
    let mut r2 = Rule::new();
    let (k2, r, total, n) = (r2.var("k", I), r2.var("r", d4), r2.var("total", d4), r2.var("n", l));
    let (a, b, c_) = (r2.var("_2", I), r2.var("_3", d2), r2.var("_4", d2));
    r2.atom(rev, vec![v(k2), v(r)])
        .atom(line, vec![v(k2), v(a), v(b), v(c_)]);
    r2.agg(total, AggFunc::Sum, Some(r2.e(r))).agg(n, AggFunc::Count, None);
    p.stratum(&[q], false, vec![r2.head(q, vec![v(k2), v(total), v(n)])], vec![]);
    p.output(q, &[(1, true)], Some(2));
    let plan = planned(&p);
    insta::assert_snapshot!(print_plan(&plan));
    assert_eq!(count(&plan, |o| matches!(o, Op::Aggregate { .. })), 1);
    let row = |k: i32, item: i32, price: i128, disc: i128| {
        vec![Value::Int32(k), Value::Int32(item), dec(price, 2), dec(disc, 2)]
    };
    let out = run(
        &plan,
        &[(
            "line",
            vec![
                row(1, 1, 1000, 10),
                row(1, 2, 1000, 10),
                row(2, 1, 500, 0),
                row(3, 1, 100, 50),
            ],
        )],
    );
    // Key 1: one distinct r (9.0000) joined with two line rows → two bindings.
    assert_eq!(
        out["q"],
        vec![
            vec![Value::Int32(1), dec(180_000, 4), Value::Int64(2)],
            vec![Value::Int32(2), dec(50_000, 4), Value::Int64(1)],
        ]
    );
}

#[test]
fn facts_become_constant_rows() {
    // edge(1, 2). edge(2, 3). edge(1, 2).  two(x, z) <- edge(x, y), edge(y, z).
    let mut p = Prog::new();
    let edge = p.pred("edge", &[("x", I), ("y", I)]);
    let two = p.pred("two", &[("x", I), ("z", I)]);
    let facts = [[1, 2], [2, 3], [1, 2]]
        .iter()
        .map(|&[a, b]| fact(edge, vec![Value::Int32(a), Value::Int32(b)]))
        .collect();
    p.stratum(&[edge], false, vec![], facts);
    let mut r = Rule::new();
    let (x, y, z) = (r.var("x", I), r.var("y", I), r.var("z", I));
    r.atom(edge, vec![v(x), v(y)]).atom(edge, vec![v(y), v(z)]);
    p.stratum(&[two], false, vec![r.head(two, vec![v(x), v(z)])], vec![]);
    p.output(two, &[], None);
    p.output(edge, &[], None);
    let plan = planned(&p);
    assert_eq!(plan.relations[edge.0 as usize].kind, RelKind::Facts);
    let out = run(&plan, &[]);
    assert_eq!(out["edge"], ints(&[&[1, 2], &[2, 3]]));
    assert_eq!(out["two"], ints(&[&[1, 3]]));
}

#[test]
fn repeated_variables_and_constants_in_the_head() {
    // loop(x, 7) <- edge(x, x).
    let mut p = Prog::new();
    let edge = p.input("edge", &[("a", I), ("b", I)]);
    let lp = p.pred("loop", &[("x", I), ("tag", Type::Int64)]);
    let mut r = Rule::new();
    let x = r.var("x", I);
    r.atom(edge, vec![v(x), v(x)]);
    p.stratum(&[lp], false, vec![r.head(lp, vec![v(x), c(Value::Int32(7))])], vec![]);
    p.output(lp, &[], None);
    let plan = planned(&p);
    let out = run(&plan, &[("edge", ints(&[&[1, 1], &[1, 2], &[3, 3], &[3, 3]]))]);
    assert_eq!(
        out["loop"],
        vec![
            vec![Value::Int32(1), Value::Int64(7)],
            vec![Value::Int32(3), Value::Int64(7)]
        ]
    );
}

#[test]
fn a_fact_that_does_not_fit_its_column_is_a_program_error() {
    let mut p = Prog::new();
    let e = p.pred("e", &[("x", I)]);
    p.stratum(&[e], false, vec![], vec![fact(e, vec![Value::String("a".into())])]);
    let err = plan(&p.core).unwrap_err();
    let d = err.diagnostic().expect("a diagnostic");
    assert_eq!(
        d.message,
        "the value \"a\" does not fit column `x` of `e`, which has type int32"
    );
}

#[test]
fn an_unbound_variable_is_a_program_error() {
    // bad(x) <- e(y), x < y.   (sema rejects this; the planner must not panic either)
    let mut p = Prog::new();
    let e = p.input("e", &[("y", I)]);
    let bad = p.pred("bad", &[("x", I)]);
    let mut r = Rule::new();
    let (x, y) = (r.var("x", I), r.var("y", I));
    let xy = cmp(CmpOp::Lt, r.e(x), r.e(y));
    r.atom(e, vec![v(y)]).filter(xy);
    p.stratum(&[bad], false, vec![r.head(bad, vec![v(x)])], vec![]);
    let err = plan(&p.core).unwrap_err();
    assert_eq!(
        err.to_string(),
        "variable `x` is not bound by a positive atom or an assignment"
    );
}
