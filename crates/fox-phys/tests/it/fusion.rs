use fox_phys::{AggAlgorithm, Algorithm, Statistics};
use fox_ra::Op;

use crate::common::*;

const SALE: &str = "sale(i, a, s) -> int32(i), int32(a), string(s).\n.input sale.\n";

#[test]
fn before_and_after() {
    let src = format!("{SALE}t[i] = n <- agg<<n = sum(a)>> sale(i, a, _), a > 3.\n.output t.\n");
    insta::assert_snapshot!(before_after(&src, "fusion", &Statistics::none()));
}

#[test]
fn a_filtered_aggregation_runs_fused_and_its_select_is_deferred() {
    let src = format!("{SALE}t[i] = n <- agg<<n = sum(a)>> sale(i, a, _), a > 3.\n.output t.\n");
    let p = phys_after(&src, Some("fusion"), &Statistics::none());
    let agg = find(&p, |op| matches!(op, Op::Aggregate { .. }))[0];
    assert_eq!(p.node(agg).algorithm, Algorithm::Aggregate(AggAlgorithm::Fused));
    let sel = find(&p, |op| matches!(op, Op::Select { .. }))[0];
    assert_eq!(p.node(sel).deferred_into, Some(agg));
}

#[test]
fn a_min_of_strings_is_not_fused() {
    let src = format!("{SALE}t[i] = m <- agg<<m = min(s)>> sale(i, _, s).\n.output t.\n");
    let p = phys_after(&src, Some("fusion"), &Statistics::none());
    let agg = find(&p, |op| matches!(op, Op::Aggregate { .. }))[0];
    assert_ne!(p.node(agg).algorithm, Algorithm::Aggregate(AggAlgorithm::Fused));
}

#[test]
fn a_select_read_twice_compacts() {
    // The filtered rows feed the aggregation and the output of `big`.
    let src = format!(
        "{SALE}big(i, a) <- sale(i, a, _), a > 3.\nt[i] = n <- agg<<n = sum(a)>> big(i, a).\n.output t.\n.output big.\n"
    );
    let p = phys_after(&src, Some("fusion"), &Statistics::none());
    for t in find(&p, |op| matches!(op, Op::Select { .. })) {
        assert_eq!(p.node(t).deferred_into, None, "t{}", t.0);
    }
}

#[test]
fn disabled_nothing_is_fused() {
    let src = format!("{SALE}t[i] = n <- agg<<n = sum(a)>> sale(i, a, _), a > 3.\n.output t.\n");
    let opts = fox_phys::Options {
        disabled: vec!["fusion".into()],
        stop_after: None,
        join: fox_phys::JoinChoice::Auto,
        devices: 1,
    };
    let p = fox_phys::run(ra(&src), &Statistics::none(), &opts).unwrap();
    assert!(p
        .nodes
        .iter()
        .all(|n| n.deferred_into.is_none() && !matches!(n.algorithm, Algorithm::Aggregate(AggAlgorithm::Fused))));
}
