use fox_phys::{Algorithm, Expand, Level, Statistics};
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
    let got = algorithms(&src, "join-selection");
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, "multijoin");
    assert!(
        matches!(
            &got[0].1,
            Algorithm::Lftj {
                min_range: true,
                twins: true,
                levels,
            } if levels.len() == 3
        ),
        "{got:?}"
    );
}

/// The level plan join-selection stores on the only multi-way join of `src`.
fn levels_of(src: &str) -> Vec<Level> {
    let got = algorithms(src, "join-selection");
    match &got[..] {
        [(_, Algorithm::Lftj { levels, .. })] => levels.clone(),
        _ => panic!("not one leapfrog triejoin: {got:?}"),
    }
}

fn level(members: &[usize], expand: Expand, twins: &[usize], searches: &[&[usize]], carried: usize) -> Level {
    Level {
        members: members.to_vec(),
        lead: members[0],
        expand,
        twins: twins.to_vec(),
        searches: searches.iter().map(|g| g.to_vec()).collect(),
        carried,
    }
}

#[test]
fn a_triangle_over_three_relations_expands_from_the_lead_and_searches() {
    let src = "r(x, y) -> int32(x), int32(y).\n.input r.\ns(x, y) -> int32(x), int32(y).\n.input s.\n\
               t(x, y) -> int32(x), int32(y).\n.input t.\n\
               p(x, y, z) <- r(x, y), s(y, z), t(x, z).\n.output p.\n";
    // Three tries, so no member ever holds another's range.
    assert_eq!(
        levels_of(src),
        vec![
            level(&[0, 2], Expand::Lead, &[], &[&[2]], 6),
            level(&[0, 1], Expand::Lead, &[], &[&[1]], 7),
            level(&[1, 2], Expand::Lead, &[], &[&[2]], 6),
        ]
    );
}

#[test]
fn the_atoms_of_a_clique_share_a_trie_twins_follow_the_lead_and_later_levels_expand_from_the_smallest_range() {
    // e(x, y), e(x, z), e(x, w), e(y, z), e(y, w), e(z, w) over one filtered edge relation.
    let src = format!("{EDGE}q(x, y, z, w) <- e(x, y), e(x, z), e(x, w), e(y, z), e(y, w), e(z, w), x < y, y < z, z < w.\n.output q.\n");
    assert_eq!(
        levels_of(&src),
        vec![
            // All six atoms hold the root range; those binding x follow a0.
            level(&[0, 1, 2], Expand::Lead, &[1, 2], &[], 12),
            // a3 and a4 still hold the root range: one search for both.
            level(&[0, 3, 4], Expand::Lead, &[], &[&[3, 4]], 13),
            // a1 holds a0's child range, a3 its own; a5 the root range (another level).
            level(&[1, 3, 5], Expand::Smallest(vec![1, 3]), &[], &[&[1], &[3], &[5]], 12),
            level(&[2, 4, 5], Expand::Smallest(vec![2, 4, 5]), &[], &[&[2], &[4], &[5]], 9),
        ]
    );
}

#[test]
fn the_last_level_of_a_counting_join_only_counts() {
    let src = format!("{EDGE}n[] = c <- agg<<c = count()>> e(x, y), e(y, z), e(x, z), x < y, y < z.\n.output n.\n");
    let levels = levels_of(&src);
    assert_eq!(levels.len(), 3);
    assert_eq!(levels[2], level(&[1, 2], Expand::Count, &[], &[], 6));
}

#[test]
fn the_level_plan_records_only_the_refinements_allowed() {
    use fox_phys::levels::{plan_levels, Refinements};
    let p = phys_after(&format!("{EDGE}{CLIQUE4}"), Some("join-selection"), &Statistics::none());
    let j = find(&p, |op| matches!(op, Op::MultiJoin { .. }))[0];
    let Some(Stmt::Let {
        op: Op::MultiJoin {
            vars, inputs, count, ..
        },
        ..
    }) =
        p.ra.blocks
            .iter()
            .flat_map(|b| &b.stmts)
            .find(|s| matches!(s, Stmt::Let { dst, .. } if *dst == j))
    else {
        panic!("no multi-way join")
    };
    for (min_range, twins) in [(false, false), (false, true), (true, false), (true, true)] {
        let levels = plan_levels(vars, inputs, *count, Refinements { min_range, twins }).unwrap();
        assert_eq!(levels.len(), 4);
        let smallest = levels.iter().any(|l| matches!(l.expand, Expand::Smallest(_)));
        let has_twins = levels.iter().any(|l| !l.twins.is_empty());
        assert_eq!(smallest, min_range, "{levels:?}");
        assert_eq!(has_twins, twins, "{levels:?}");
        // The state carried into each level does not depend on the refinements.
        let carried: Vec<usize> = levels.iter().map(|l| l.carried).collect();
        assert_eq!(carried, [12, 13, 12, 9]);
    }
    // Without either refinement, members holding the lead's range search it, once.
    let none = plan_levels(vars, inputs, *count, Refinements::default()).unwrap();
    assert_eq!(none[0], level(&[0, 1, 2], Expand::Lead, &[], &[&[1, 2]], 12));
}

const CLIQUE4: &str =
    "q(x, y, z, w) <- e(x, y), e(x, z), e(x, w), e(y, z), e(y, w), e(z, w), x < y, y < z, z < w.\n.output q.\n";

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

mod plan_levels {
    use fox_phys::levels::{plan_levels, Refinements};
    use fox_phys::{Expand, Level};
    use fox_ra::{MultiJoinInput, TempId};
    use fox_sema::core::{Column, Type};

    use super::level;

    fn vars(names: &[&str]) -> Vec<Column> {
        names
            .iter()
            .map(|n| Column {
                name: n.to_string(),
                ty: Type::Int32,
            })
            .collect()
    }

    fn input(src: u32, vars: &[usize]) -> MultiJoinInput {
        MultiJoinInput {
            src: TempId(src),
            vars: vars.to_vec(),
        }
    }

    const BOTH: Refinements = Refinements {
        min_range: true,
        twins: true,
    };

    fn plan(names: &[&str], inputs: &[MultiJoinInput], count: bool) -> Vec<Level> {
        plan_levels(&vars(names), inputs, count, BOTH).unwrap()
    }

    #[test]
    fn an_input_without_variables_is_no_atom() {
        let inputs = [input(0, &[0, 1]), input(9, &[]), input(1, &[1, 2]), input(2, &[0, 2])];
        let got = plan(&["x", "y", "z"], &inputs, false);
        // The atoms are numbered 0, 1, 2 over the inputs 0, 2, 3.
        assert_eq!(got[0].members, [0, 2]);
        assert_eq!(got[1].members, [0, 1]);
        assert_eq!(got[2].members, [1, 2]);
        assert_eq!(got[0].carried, 6);
    }

    #[test]
    fn an_atom_repeated_follows_the_lead_at_every_level() {
        let inputs = [
            input(0, &[0, 1]),
            input(0, &[0, 1]),
            input(1, &[1, 2]),
            input(2, &[0, 2]),
        ];
        let got = plan(&["x", "y", "z"], &inputs, false);
        assert_eq!(got[0], level(&[0, 1, 3], Expand::Lead, &[1], &[&[3]], 8));
        assert_eq!(got[1], level(&[0, 1, 2], Expand::Lead, &[1], &[&[2]], 9));
        // a0 and a1 are bound: x, y and the ranges of a2 and a3.
        assert_eq!(got[2], level(&[2, 3], Expand::Lead, &[], &[&[3]], 6));
    }

    #[test]
    fn atoms_over_one_input_in_another_column_order_use_another_trie() {
        // e(x, y) and e(y, x): column orders (0, 1) and (1, 0), so two tries: at x they
        // index different trie levels, so a1 is no twin and x expands from a0's range.
        let inputs = [
            input(0, &[0, 1]),
            input(0, &[1, 0]),
            input(1, &[0, 2]),
            input(2, &[1, 2]),
        ];
        let got = plan(&["x", "y", "z"], &inputs, false);
        assert_eq!(got[0], level(&[0, 1, 2], Expand::Lead, &[], &[&[1], &[2]], 8));
        // The same input in the same column order: one trie, a1 a twin of a0.
        let inputs = [
            input(0, &[0, 1]),
            input(0, &[0, 1]),
            input(1, &[0, 2]),
            input(2, &[1, 2]),
        ];
        let got = plan(&["x", "y", "z"], &inputs, false);
        assert_eq!(got[0], level(&[0, 1, 2], Expand::Lead, &[1], &[&[2]], 8));
    }

    #[test]
    fn members_holding_one_range_share_a_search() {
        // The lead r(x, y) and two atoms of s holding its root range: s(x, z), s(x, w).
        let inputs = [
            input(0, &[0, 1]),
            input(1, &[0, 2]),
            input(1, &[0, 3]),
            input(2, &[1, 2, 3]),
        ];
        let got = plan(&["x", "y", "z", "w"], &inputs, false);
        assert_eq!(got[0], level(&[0, 1, 2], Expand::Lead, &[], &[&[1, 2]], 8));
        // After the shared search, both hold the same child range: at z a1 and a3 hold
        // ranges of different tries.
        assert_eq!(got[2].members, [1, 3]);
        assert_eq!(got[2].expand, Expand::Lead);
        // At w, a2 still holds the child range a1 held at z.
        assert_eq!(got[3].members, [2, 3]);
    }

    #[test]
    fn a_malformed_join_has_no_plan() {
        let unbound = plan_levels(
            &vars(&["x", "y", "z"]),
            &[input(0, &[0, 1]), input(1, &[1, 0])],
            false,
            BOTH,
        );
        assert_eq!(
            unbound.unwrap_err(),
            "variable `z` of a multi-way join is bound by no input"
        );
        let twice = plan_levels(&vars(&["x", "y"]), &[input(0, &[0, 0]), input(1, &[0, 1])], false, BOTH);
        assert_eq!(twice.unwrap_err(), "a multi-way join input binds `x` twice");
        let outside = plan_levels(&vars(&["x", "y"]), &[input(0, &[0, 5]), input(1, &[0, 1])], false, BOTH);
        assert!(outside.is_err());
    }
}

const EVENTS: &str = "a(x, t) -> int(x), int(t).\nb(y, t) -> int(y), int(t).\n.input a.\n.input b.\n";

/// The band plan of the only join of `rule` over `EVENTS`, if it is one.
fn band_of(rule: &str) -> Option<fox_phys::Band> {
    let got = algorithms(&format!("{EVENTS}{rule}\n.output r.\n"), "join-selection");
    let joins: Vec<_> = got.into_iter().filter(|(k, _)| k == "join").collect();
    assert_eq!(joins.len(), 1, "{joins:?}");
    match &joins[0].1 {
        Algorithm::Band(b) => Some(b.clone()),
        Algorithm::SortMerge => None,
        other => panic!("unexpected algorithm {other:?}"),
    }
}

fn bound(col: usize, offset: i64, open: bool) -> Option<fox_phys::BandBound> {
    Some(fox_phys::BandBound { col, offset, open })
}

#[test]
fn a_window_between_two_columns_is_a_band_join() {
    let b = band_of("r(x, y) <- a(x, t1), b(y, t2), t2 >= t1, t2 <= t1 + 50.").expect("a band join");
    assert_eq!(b.sorted, fox_ra::Side::Right);
    assert_eq!(b.col, 1);
    assert_eq!((b.lower, b.upper), (bound(1, 0, false), bound(1, 50, false)));
    // Written the other way round, with open bounds and a subtraction.
    let b = band_of("r(x, y) <- a(x, t1), b(y, t2), t1 - 3 < t2, t1 > t2.").expect("a band join");
    assert_eq!((b.col, b.lower, b.upper), (1, bound(1, -3, true), bound(1, 0, true)));
}

#[test]
fn one_inequality_is_a_half_open_band() {
    let b = band_of("r(x, y) <- a(x, t1), b(y, t2), t1 < t2.").expect("a band join");
    assert_eq!(b.sorted, fox_ra::Side::Right);
    assert_eq!((b.lower, b.upper), (bound(1, 0, true), None));
}

#[test]
fn a_column_bounded_on_both_sides_is_preferred() {
    // The left's t1 is bounded twice, the right's t2 and y once each.
    let b = band_of("r(x, y) <- a(x, t1), b(y, t2), t1 >= t2, t1 <= y + 5.").expect("a band join");
    assert_eq!(b.sorted, fox_ra::Side::Left);
    assert_eq!((b.col, b.lower, b.upper), (1, bound(1, 0, false), bound(0, 5, false)));
    assert_eq!(b.inner, None);
    // A window on both sides (`t2 + 5 >= t1` bounds t2 too): the right side's.
    let b = band_of("r(x, y) <- a(x, t1), b(y, t2), t1 >= t2, t1 <= t2 + 5.").expect("a band join");
    assert_eq!(b.sorted, fox_ra::Side::Right);
    assert_eq!((b.col, b.lower, b.upper), (1, bound(1, -5, false), bound(1, 0, false)));
}

#[test]
fn predicates_that_bound_no_column_stay_a_cross_product() {
    for rule in [
        "r(x, y) <- a(x, t1), b(y, t2), t1 * t2 > 5.",
        "r(x, y) <- a(x, t1), b(y, t2), t1 != t2.",
        "r(x, y) <- a(x, t1), b(y, t2), t2 <= t1 * 2.",
        "r(x, y) <- a(x, _), b(y, _).",
    ] {
        assert_eq!(band_of(rule), None, "{rule}");
    }
}

#[test]
fn floats_and_strings_are_not_searched() {
    let src = "a(x, t) -> int(x), float(t).\nb(y, t) -> int(y), float(t).\n.input a.\n.input b.\n\
               r(x, y) <- a(x, t1), b(y, t2), t2 >= t1, t2 <= t1 + 1.0.\n.output r.\n";
    let got = algorithms(src, "join-selection");
    assert!(got.iter().all(|(_, a)| !matches!(a, Algorithm::Band(_))), "{got:?}");
    let src = "a(x, t) -> int(x), string(t).\nb(y, t) -> int(y), string(t).\n.input a.\n.input b.\n\
               r(x, y) <- a(x, t1), b(y, t2), t2 > t1.\n.output r.\n";
    let got = algorithms(src, "join-selection");
    assert!(got.iter().all(|(_, a)| !matches!(a, Algorithm::Band(_))), "{got:?}");
}

#[test]
fn a_one_row_side_pairs_with_everything_instead() {
    // The mean is one row: comparing it with every row costs less than a sort.
    let src =
        format!("{EVENTS}m[] = v <- agg<<v = max(t)>> a(_, t).\nr(x) <- b(x, t), m[] = v, t >= v - 5.\n.output r.\n");
    let got = algorithms(&src, "join-selection");
    assert!(
        got.iter().any(|(k, a)| k == "join" && *a == Algorithm::SortMerge),
        "{got:?}"
    );
    assert!(got.iter().all(|(_, a)| !matches!(a, Algorithm::Band(_))), "{got:?}");
}

#[test]
fn a_window_within_equal_keys_is_a_band_join_of_equal_keys() {
    let src = "ev(u, t, x) -> int(u), int(t), int(x).\n.input ev.\n\
               follow(x, y) <- ev(u, t1, x), ev(u, t2, y), t2 > t1, t2 <= t1 + 5.\n.output follow.\n";
    let p = phys_after(src, Some("join-selection"), &Statistics::none());
    let joins = find(
        &p,
        |op| matches!(op, Op::Join { left_keys, .. } if !left_keys.is_empty()),
    );
    assert_eq!(joins.len(), 1);
    match &p.node(joins[0]).algorithm {
        Algorithm::Band(b) => {
            assert_eq!((b.sorted, b.col), (fox_ra::Side::Right, 1));
            assert_eq!((b.lower, b.upper), (bound(1, 0, true), bound(1, 5, false)));
        }
        other => panic!("not a band join: {other:?}"),
    }
    let text = fox_phys::print_physical(&p);
    assert!(
        text.contains("band t0.t of equal keys in (t0.t, t0.t + 5] probed by t0"),
        "{text}"
    );
}

const INTERVALS: &str = "iv(x, s, e) -> int(x), int(s), int(e).\njv(y, s, e) -> int(y), int(s), int(e).\n\
                         .input iv.\n.input jv.\n";

/// The band plan of the only join of `rule` over `INTERVALS`, if it is one.
fn ineq_of(rule: &str) -> Option<fox_phys::Band> {
    let got = algorithms(&format!("{INTERVALS}{rule}\n.output r.\n"), "join-selection");
    let joins: Vec<_> = got.into_iter().filter(|(k, _)| k == "join").collect();
    assert_eq!(joins.len(), 1, "{joins:?}");
    match &joins[0].1 {
        Algorithm::Band(b) => Some(b.clone()),
        Algorithm::SortMerge => None,
        other => panic!("unexpected algorithm {other:?}"),
    }
}

fn inner(
    col: usize,
    lower: Option<fox_phys::BandBound>,
    upper: Option<fox_phys::BandBound>,
) -> Option<fox_phys::BandInner> {
    Some(fox_phys::BandInner { col, lower, upper })
}

#[test]
fn interval_overlap_is_an_inequality_join_in_every_spelling() {
    // jv's e (column 2) above iv's s, jv's s (column 1) below iv's e.
    for rule in [
        "r(x, y) <- iv(x, s1, e1), jv(y, s2, e2), s1 < e2, s2 < e1.",
        "r(x, y) <- iv(x, s1, e1), jv(y, s2, e2), e2 > s1, s2 < e1.",
        "r(x, y) <- iv(x, s1, e1), jv(y, s2, e2), e2 > s1, e1 > s2.",
        "r(x, y) <- iv(x, s1, e1), jv(y, s2, e2), s2 < e1, s1 < e2.",
    ] {
        let b = ineq_of(rule).expect("an inequality join");
        assert_eq!(b.sorted, fox_ra::Side::Right, "{rule}");
        let mut cols = [(b.col, b.lower, b.upper), {
            let i = b.inner.expect("a second column");
            (i.col, i.lower, i.upper)
        }];
        cols.sort_by_key(|c| c.0);
        assert_eq!(cols[0], (1, None, bound(2, 0, true)), "{rule}");
        assert_eq!(cols[1], (2, bound(1, 0, true), None), "{rule}");
    }
    // Closed, with offsets.
    let b = ineq_of("r(x, y) <- iv(x, s1, e1), jv(y, s2, e2), s2 <= e1 + 3, e2 >= s1 - 1.").expect("a join");
    assert_eq!((b.col, b.lower, b.upper), (1, None, bound(2, 3, false)));
    assert_eq!(b.inner, inner(2, bound(1, -1, false), None));
    // With a further inequality on the join's ids, the interval columns still make the
    // tree (the ids stay a filter).
    let b = ineq_of("r(x, y) <- iv(x, s1, e1), jv(y, s2, e2), x < y, e2 > s1, s2 < e1.").expect("a join");
    let mut cols = [b.col, b.inner.expect("a second column").col];
    cols.sort_unstable();
    assert_eq!(cols, [1, 2]);
}

#[test]
fn two_inequalities_on_different_columns_are_an_inequality_join() {
    let b = ineq_of("r(x, y) <- iv(x, a1, b1), jv(y, a2, b2), a1 < a2, b1 > b2.").expect("a join");
    assert_eq!(b.sorted, fox_ra::Side::Right);
    assert!(b.inner.is_some(), "{b:?}");
    let text = {
        let src = format!("{INTERVALS}r(x, y) <- iv(x, a1, b1), jv(y, a2, b2), a1 < a2, b1 > b2.\n.output r.\n");
        let p = phys_after(&src, Some("join-selection"), &Statistics::none());
        fox_phys::print_physical(&p)
    };
    assert!(text.contains("inequality join"), "{text}");
    assert!(text.contains("t1.e < t0.e"), "{text}");
    assert!(text.contains("t1.s > t0.s"), "{text}");
    // A constant beside the bounded column moves to its bound.
    let b = ineq_of("r(x, y) <- iv(x, a1, b1), jv(y, a2, b2), a2 - 2 > a1, b2 + 1 < b1.").expect("a join");
    let mut cols = [(b.col, b.lower, b.upper), {
        let i = b.inner.expect("a second column");
        (i.col, i.lower, i.upper)
    }];
    cols.sort_by_key(|c| c.0);
    assert_eq!(cols, [(1, bound(1, 2, true), None), (2, None, bound(2, -1, true))]);
}

#[test]
fn a_window_or_a_single_inequality_stays_a_band_join() {
    // A column bounded on both sides: the window is the band.
    let b = ineq_of("r(x, y) <- iv(x, a1, b1), jv(y, a2, b2), a2 > a1, a2 < a1 + 5, b1 > b2.").expect("a join");
    assert_eq!((b.col, b.inner), (1, None));
    // One inequality: nothing for a second column.
    let b = ineq_of("r(x, y) <- iv(x, a1, b1), jv(y, a2, b2), a1 < a2, b1 != b2.").expect("a join");
    assert_eq!(b.inner, None);
    // Inequalities bounding columns of different sides do not make one tree.
    let b = ineq_of("r(x, y) <- iv(x, a1, b1), jv(y, a2, b2), a1 < a2, b1 * 2 > b2.").expect("a join");
    assert_eq!(b.inner, None);
}

#[test]
fn an_inequality_join_of_equal_keys_keeps_its_keys() {
    let src = "ev(u, s, e, x) -> int(u), int(s), int(e), int(x).\n.input ev.\n\
               ov(x, y) <- ev(u, s1, e1, x), ev(u, s2, e2, y), s1 < e2, s2 < e1.\n.output ov.\n";
    let p = phys_after(src, Some("join-selection"), &Statistics::none());
    let joins = find(
        &p,
        |op| matches!(op, Op::Join { left_keys, .. } if !left_keys.is_empty()),
    );
    assert_eq!(joins.len(), 1);
    match &p.node(joins[0]).algorithm {
        Algorithm::Band(b) => assert!(b.inner.is_some(), "{b:?}"),
        other => panic!("not an inequality join: {other:?}"),
    }
    let text = fox_phys::print_physical(&p);
    assert!(text.contains("inequality join of equal keys"), "{text}");
}
