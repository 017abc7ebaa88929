//! Large cyclic bodies: a cycle of more than 16 variables is joined pairwise rather than
//! by one multi-way join (whose loop nest, one level per variable, the kernel plan's
//! analyses handle in time that grows faster than linearly with its depth).

use fox_ra::*;

fn plan_source(src: &str) -> RaPlan {
    let (ast, diags) = fox_syntax::parse(src);
    assert!(diags.iter().all(|d| !d.is_error()), "{diags:?}");
    let (core, diags) = fox_sema::check(&ast);
    let core = core.unwrap_or_else(|| panic!("{diags:?}"));
    let plan = plan(&core).unwrap_or_else(|e| panic!("{e}"));
    validate(&plan).unwrap_or_else(|e| panic!("{e}"));
    plan
}

fn ops(plan: &RaPlan, f: impl Fn(&Op) -> bool) -> usize {
    plan.blocks
        .iter()
        .flat_map(|b| &b.stmts)
        .filter(|s| matches!(s, Stmt::Let { op, .. } if f(op)))
        .count()
}

const EDGE: &str = "e(x, y) -> int32(x), int32(y).\n.input e.\n";

/// `p(x0) <- e(x0, x1), e(x1, x2), …, e(xn-1, x0).`
fn cycle(n: usize) -> String {
    let atoms: Vec<String> = (0..n).map(|i| format!("e(x{i}, x{})", (i + 1) % n)).collect();
    format!("{EDGE}p(x0) <- {}.\n.output p.\n", atoms.join(", "))
}

#[test]
fn a_cycle_of_more_than_sixteen_variables_is_joined_pairwise() {
    let plan = plan_source(&cycle(16));
    assert_eq!(
        ops(&plan, |o| matches!(o, Op::MultiJoin { .. })),
        1,
        "{}",
        print_plan(&plan)
    );
    let plan = plan_source(&cycle(17));
    assert_eq!(
        ops(&plan, |o| matches!(o, Op::MultiJoin { .. })),
        0,
        "{}",
        print_plan(&plan)
    );
    assert!(
        ops(&plan, |o| matches!(o, Op::Join { .. })) >= 15,
        "{}",
        print_plan(&plan)
    );
}
