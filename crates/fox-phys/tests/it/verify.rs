use fox_phys::{AggAlgorithm, Algorithm, PhysError, PhysPlan, Rounds, Statistics, PASSES};
use fox_ra::Op;

use crate::common::*;

fn verify(p: &mut PhysPlan) -> Result<(), PhysError> {
    let v = PASSES.iter().find(|p| p.name() == "verify").unwrap();
    v.run(p, &Statistics::none())
}

const SRC: &str = "e(x, y) -> int32(x), int32(y).\n.input e.\nt[x] = n <- agg<<n = sum(y)>> e(x, y), y > 3.\np(x, z) <- e(x, y), e(y, z).\n.output t.\n.output p.\n";

fn plan() -> PhysPlan {
    phys_after(SRC, Some("partitioning"), &Statistics::none())
}

fn err(p: &mut PhysPlan) -> String {
    verify(p).unwrap_err().to_string()
}

#[test]
fn the_plans_of_the_passes_pass() {
    verify(&mut plan()).unwrap();
}

#[test]
fn an_algorithm_its_operator_does_not_have_is_caught() {
    let mut p = plan();
    let j = find(&p, |op| matches!(op, Op::Join { .. }))[0];
    p.node_mut(j).algorithm = Algorithm::Lftj {
        min_range: true,
        twins: true,
    };
    assert!(err(&mut p).contains("which its operator does not have"));
}

#[test]
fn a_select_deferred_into_an_aggregation_that_is_not_fused_is_caught() {
    let mut p = plan();
    let a = find(&p, |op| matches!(op, Op::Aggregate { .. }))[0];
    p.node_mut(a).algorithm = Algorithm::Aggregate(AggAlgorithm::SortReduce);
    assert!(err(&mut p).contains("does not run fused"));
}

#[test]
fn a_select_deferred_into_an_operator_that_does_not_read_it_is_caught() {
    let mut p = plan();
    let s = find(&p, |op| matches!(op, Op::Select { .. }))[0];
    let j = find(&p, |op| matches!(op, Op::Join { .. }))[0];
    p.node_mut(s).deferred_into = Some(j);
    assert!(err(&mut p).contains("which does not read it"));
}

#[test]
fn rounds_on_an_operator_that_is_not_a_multi_way_join_are_caught() {
    let mut p = plan();
    let j = find(&p, |op| matches!(op, Op::Join { .. }))[0];
    p.node_mut(j).rounds = Rounds { windowed: vec![true] };
    assert!(err(&mut p).contains("not a multi-way join"));
}

#[test]
fn an_estimate_with_more_distinct_values_than_rows_is_caught() {
    let mut p = plan();
    let j = find(&p, |op| matches!(op, Op::Join { .. }))[0];
    let e = p.node_mut(j).est.as_mut().unwrap();
    e.distinct[0] = e.rows + 1.0;
    assert!(err(&mut p).contains("inconsistent estimate"));
}
