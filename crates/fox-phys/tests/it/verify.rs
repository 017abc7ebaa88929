use fox_phys::{AggAlgorithm, Algorithm, Expand, Level, PhysError, PhysPlan, Rounds, Statistics, PASSES};
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
        levels: Vec::new(),
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
    let s = find(&p, |op| matches!(op, Op::Select { .. }))[0];
    p.node_mut(s).rounds = Rounds {
        windows: vec![Some(100)],
    };
    assert!(err(&mut p).contains("neither a multi-way join nor a join"));
    // A binary join has one window.
    let mut p = plan();
    let j = find(&p, |op| matches!(op, Op::Join { .. }))[0];
    p.node_mut(j).rounds = Rounds {
        windows: vec![Some(100), None],
    };
    assert!(err(&mut p).contains("other than one positive window"));
    // The join of `q` is read by an anti-join, neither aggregated nor only deduplicated.
    let src = "e(x, y) -> int32(x), int32(y).\n.input e.\nq(x, z) <- e(x, y), e(y, z), !e(x, z).\n.output q.\n";
    let mut p = phys_after(src, Some("partitioning"), &Statistics::none());
    let j = find(&p, |op| matches!(op, Op::Join { .. }))[0];
    p.node_mut(j).rounds = Rounds {
        windows: vec![Some(100)],
    };
    assert!(err(&mut p).contains(
        "neither an expanding join read only by an aggregation or a duplicate removal nor a join without keys"
    ));
}

#[test]
fn a_cross_product_filtered_per_round_by_a_deferred_select_is_caught() {
    // The product's survivors are kept (a count of them is only an aggregate of the kept
    // relation, in a later statement), so the product is filtered per round.
    let src = "e(x, y) -> int32(x), int32(y).\n.input e.\n\
               p(x, y) <- e(x, u), e(y, v), u * v > 7.\n\
               n[] = c <- agg<<c = count()>> p(_, _).\n.output n.\n.output p.\n";
    let mut p = phys_after(src, Some("rounds"), &Statistics::none());
    let j = find(&p, |op| matches!(op, Op::Join { .. }))[0];
    let s = find(&p, |op| matches!(op, Op::Select { .. }))[0];
    let a = find(&p, |op| matches!(op, Op::Aggregate { .. }))[0];
    assert_eq!(p.node(j).rounds.windows.len(), 1);
    // Left to the fused aggregation, the select would read the whole product.
    p.node_mut(s).deferred_into = Some(a);
    assert!(err(&mut p).contains("deferred into"), "{}", err(&mut p));
}

#[test]
fn an_estimate_with_more_distinct_values_than_rows_is_caught() {
    let mut p = plan();
    let j = find(&p, |op| matches!(op, Op::Join { .. }))[0];
    let e = p.node_mut(j).est.as_mut().unwrap();
    e.distinct[0] = e.rows + 1.0;
    assert!(err(&mut p).contains("inconsistent estimate"));
}

const CLIQUE: &str = "e(x, y) -> int32(x), int32(y).\n.input e.\nn[] = c <- agg<<c = count()>> e(x, y), e(x, z), e(x, w), e(y, z), e(y, w), e(z, w), x < y, y < z, z < w.\n.output n.\n";

/// The 4-clique count's plan, and its multi-way join's level plan to break.
fn clique() -> (PhysPlan, fox_ra::TempId) {
    let p = phys_after(CLIQUE, Some("rounds"), &Statistics::none());
    let j = find(&p, |op| matches!(op, Op::MultiJoin { .. }))[0];
    (p, j)
}

fn levels(p: &mut PhysPlan, j: fox_ra::TempId) -> &mut Vec<Level> {
    match &mut p.node_mut(j).algorithm {
        Algorithm::Lftj { levels, .. } => levels,
        a => panic!("{a:?}"),
    }
}

#[test]
fn the_level_plan_of_a_clique_passes() {
    let (mut p, j) = clique();
    assert_eq!(levels(&mut p, j).len(), 4);
    verify(&mut p).unwrap();
}

#[test]
fn a_level_whose_members_are_not_the_atoms_binding_its_variable_is_caught() {
    let (mut p, j) = clique();
    levels(&mut p, j)[1].members.push(5);
    assert!(err(&mut p).contains("are not the atoms binding the variable"));
}

#[test]
fn a_lead_that_is_no_member_is_caught() {
    let (mut p, j) = clique();
    levels(&mut p, j)[0].lead = 3;
    assert!(err(&mut p).contains("the lead a3 is not a member"));
}

#[test]
fn a_twin_that_is_no_other_member_is_caught() {
    let (mut p, j) = clique();
    levels(&mut p, j)[0].twins.push(4);
    assert!(err(&mut p).contains("the twin a4 is not another member"));
    let (mut p, j) = clique();
    levels(&mut p, j)[0].twins = vec![0, 1, 2];
    assert!(err(&mut p).contains("the twin a0 is not another member"));
}

#[test]
fn searches_that_do_not_split_the_members_left_are_caught() {
    let (mut p, j) = clique();
    // a1 twin of the lead and searching too.
    levels(&mut p, j)[0].searches.push(vec![1]);
    assert!(err(&mut p).contains("not the members other than the lead and its twins"));
    let (mut p, j) = clique();
    levels(&mut p, j)[2].searches.pop();
    assert!(err(&mut p).contains("are not the members"));
}

#[test]
fn refinements_the_algorithm_does_not_allow_are_caught() {
    let (mut p, j) = clique();
    if let Algorithm::Lftj { twins, .. } = &mut p.node_mut(j).algorithm {
        *twins = false;
    }
    assert!(err(&mut p).contains("twins, which its algorithm does not allow"));
    let (mut p, j) = clique();
    if let Algorithm::Lftj { min_range, .. } = &mut p.node_mut(j).algorithm {
        *min_range = false;
    }
    assert!(err(&mut p).contains("smallest range, which its algorithm does not allow"));
}

#[test]
fn a_smallest_range_level_with_one_source_or_a_source_that_does_not_search_first_is_caught() {
    let (mut p, j) = clique();
    levels(&mut p, j)[2].expand = Expand::Smallest(vec![1]);
    assert!(err(&mut p).contains("not two ranges or more"));
    let (mut p, j) = clique();
    let l = &mut levels(&mut p, j)[2];
    // a1 and a3 in one search group: a3 no longer searches first.
    l.searches = vec![vec![1, 3], vec![5]];
    assert!(err(&mut p).contains("the source a3 is not the first of a search group"));
}

#[test]
fn a_counted_level_that_is_not_the_last_of_a_counting_join_is_caught() {
    let (mut p, j) = clique();
    let l = &mut levels(&mut p, j)[3];
    l.expand = Expand::Lead;
    l.searches = vec![vec![4], vec![5]];
    assert!(err(&mut p).contains("only the last level of a counting join is counted"));
}

#[test]
fn a_level_carrying_the_wrong_state_is_caught() {
    let (mut p, j) = clique();
    levels(&mut p, j)[2].carried += 2;
    assert!(err(&mut p).contains("carries 14 state columns, where the join has 12"));
}

#[test]
fn a_level_plan_for_some_of_the_variables_is_caught() {
    let (mut p, j) = clique();
    levels(&mut p, j).pop();
    assert!(err(&mut p).contains("3 levels for 4 variables"));
}

#[test]
fn a_window_on_a_counted_last_level_is_caught() {
    let (mut p, j) = clique();
    p.node_mut(j).rounds.windows[3] = Some(100);
    assert!(err(&mut p).contains("expands its counted last level in rounds"));
}

#[test]
fn an_inequality_join_plan_its_inputs_contradict_is_caught() {
    let src = "iv(x, s, e) -> int(x), int(s), int(e).\n.input iv.\n\
               ov(x, y) <- iv(x, s1, e1), iv(y, s2, e2), s1 < e2, s2 < e1.\n.output ov.\n";
    let good = phys_after(src, Some("rounds"), &Statistics::none());
    verify(&mut good.clone()).unwrap();
    let j = find(&good, |op| matches!(op, Op::Join { .. }))[0];
    let Algorithm::Band(band) = good.node(j).algorithm.clone() else {
        panic!("not an inequality join: {:?}", good.node(j).algorithm);
    };
    let inner = band.inner.expect("a second column");
    let bad = [
        // The second column is the first.
        fox_phys::BandInner { col: band.col, ..inner },
        // A column the sorted side does not have.
        fox_phys::BandInner { col: 3, ..inner },
        // No bound.
        fox_phys::BandInner {
            lower: None,
            upper: None,
            ..inner
        },
    ];
    for inner in bad {
        let mut p = good.clone();
        let mut b = band.clone();
        b.inner = Some(inner);
        p.node_mut(j).algorithm = Algorithm::Band(b);
        assert!(err(&mut p).contains("inequality join plan"), "{inner:?}");
    }
}
