use fox_phys::{Algorithm, Statistics};
use fox_ra::{Op, Stmt};

use crate::common::*;

fn algorithms(src: &str, last: &str) -> Vec<(String, Algorithm)> {
    let p = phys_after(src, Some(last), &Statistics::none());
    p.ra.blocks
        .iter()
        .flat_map(|b| &b.stmts)
        .filter_map(|s| match s {
            Stmt::Let { dst, op, .. } => Some((kind(op), p.node(*dst).algorithm.clone())),
            _ => None,
        })
        .filter(|(k, _)| k != "other")
        .collect()
}

fn kind(op: &Op) -> String {
    match op {
        Op::Join { .. } => "join",
        Op::AntiJoin { .. } => "antijoin",
        Op::SemiJoin { .. } => "semijoin",
        Op::MultiJoin { .. } => "multijoin",
        _ => "other",
    }
    .into()
}

const TRIANGLE: &str = "t(x, y, z) <- e(x, y), e(y, z), e(x, z).\n.output t.\n";

#[test]
fn before_and_after() {
    let src = format!("{EDGE}{TRIANGLE}");
    insta::assert_snapshot!(before_after(&src, "join-selection", &Statistics::none()));
}

#[test]
fn a_cycle_runs_as_a_leapfrog_triejoin_with_both_refinements() {
    let src = format!("{EDGE}{TRIANGLE}");
    let lftj = Algorithm::Lftj {
        min_range: true,
        twins: true,
    };
    assert_eq!(
        algorithms(&src, "join-selection"),
        vec![("multijoin".to_string(), lftj)]
    );
}

#[test]
fn binary_joins_and_negations_merge_sorted_sides() {
    let src = format!("{EDGE}p(x, z) <- e(x, y), e(y, z), !e(x, z).\n.output p.\n");
    let got = algorithms(&src, "join-selection");
    assert!(!got.is_empty());
    assert!(got.iter().all(|(_, a)| *a == Algorithm::SortMerge), "{got:?}");
    assert!(got.iter().any(|(k, _)| k == "antijoin"), "{got:?}");
}

#[test]
fn before_the_pass_every_join_has_the_general_algorithm() {
    let src = format!("{EDGE}{TRIANGLE}");
    let got = algorithms(&src, "estimate");
    assert!(got.iter().all(|(_, a)| *a == Algorithm::Direct), "{got:?}");
}
