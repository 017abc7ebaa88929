//! Plans from LogiQL source text, through `fox_syntax::parse` and `fox_sema::check`.
use crate::common;

use common::eval::{ints, run};
use fox_ra::*;

fn plan_source(src: &str) -> RaPlan {
    let (ast, diags) = fox_syntax::parse(src);
    assert!(
        diags.iter().all(|d| !d.is_error()),
        "{}",
        fox_syntax::diag::render("q.logic", src, &diags, false)
    );
    let (core, diags) = fox_sema::check(&ast);
    let core = core.unwrap_or_else(|| panic!("{}", fox_syntax::diag::render("q.logic", src, &diags, false)));
    let plan = plan(&core).unwrap_or_else(|e| panic!("{e}"));
    validate(&plan).unwrap_or_else(|e| panic!("{e}\n{}", print_plan(&plan)));
    assert_eq!(from_ron(&to_ron(&plan)).as_ref(), Ok(&plan));
    plan
}

fn multi_joins(plan: &RaPlan) -> usize {
    plan.blocks
        .iter()
        .flat_map(|b| &b.stmts)
        .filter(|s| {
            matches!(
                s,
                Stmt::Let {
                    op: Op::MultiJoin { .. },
                    ..
                }
            )
        })
        .count()
}

#[test]
fn transitive_closure_from_source() {
    let plan = plan_source(
        "edge(x, y) -> int32(x), int32(y).
         .input edge.
         path(x, y) <- edge(x, y).
         path(x, z) <- path(x, y), edge(y, z).
         .output path.",
    );
    insta::assert_snapshot!(print_plan(&plan));
    let out = run(&plan, &[("edge", ints(&[&[1, 2], &[2, 3]]))]);
    assert_eq!(out["path"], ints(&[&[1, 2], &[1, 3], &[2, 3]]));
}

#[test]
fn triangles_from_source() {
    let plan = plan_source(
        "edge(x, y) -> int32(x), int32(y).
         .input edge.
         tri(x, y, z) <- edge(x, y), edge(y, z), edge(x, z), x < y < z.
         .output tri.",
    );
    insta::assert_snapshot!(print_plan(&plan));
    assert_eq!(multi_joins(&plan), 1);
    let edges = ints(&[&[1, 2], &[2, 3], &[1, 3], &[3, 4], &[2, 4]]);
    let both: Vec<_> = edges
        .iter()
        .flat_map(|e| [e.clone(), vec![e[1].clone(), e[0].clone()]])
        .collect();
    assert_eq!(run(&plan, &[("edge", both)])["tri"], ints(&[&[1, 2, 3], &[2, 3, 4]]));
}

#[test]
fn even_odd_from_source() {
    let plan = plan_source(
        "number(n) -> int32(n).
         next(m, n) -> int32(m), int32(n).
         .input number. .input next.
         even(0).
         odd(n) <- number(n), next(m, n), even(m).
         even(n) <- number(n), next(m, n), odd(m).
         .output even. .output odd.",
    );
    insta::assert_snapshot!(print_plan(&plan));
    let out = run(
        &plan,
        &[
            ("number", ints(&[&[0], &[1], &[2], &[3]])),
            ("next", ints(&[&[0, 1], &[1, 2], &[2, 3]])),
        ],
    );
    assert_eq!(out["even"], ints(&[&[0], &[2]]));
    assert_eq!(out["odd"], ints(&[&[1], &[3]]));
}

#[test]
fn aggregation_and_negation_from_source() {
    let plan = plan_source(
        "node(x) -> int32(x).
         edge(x, y) -> int32(x), int32(y).
         .input node. .input edge.
         reach(x) <- x = 1.
         reach(y) <- reach(x), edge(x, y).
         unreached(x) <- node(x), !reach(x).
         deg[x] = n <- agg<<n = count()>> edge(x, _).
         .output unreached.
         .output deg order by n desc limit 2.",
    );
    insta::assert_snapshot!(print_plan(&plan));
    // `edge(x, y)` with `x: int64` from `reach` joins on a widened key, not a cross product.
    let cross = plan
        .blocks
        .iter()
        .flat_map(|b| &b.stmts)
        .any(|s| matches!(s, Stmt::Let { op: Op::Join { left_keys, .. }, .. } if left_keys.is_empty()));
    assert!(!cross, "{}", print_plan(&plan));
    let out = run(
        &plan,
        &[
            ("node", ints(&[&[1], &[2], &[3], &[4]])),
            ("edge", ints(&[&[1, 2], &[3, 4], &[3, 1], &[3, 2], &[2, 1]])),
        ],
    );
    assert_eq!(out["unreached"], ints(&[&[3], &[4]]));
    assert_eq!(out["deg"].len(), 2);
    assert_eq!(out["deg"][0][0], fox_sema::core::Value::Int32(3));
}
