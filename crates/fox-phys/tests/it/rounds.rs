use fox_phys::levels::window_row_bytes;
use fox_phys::Statistics;
use fox_ra::{Op, Stmt};

use crate::common::*;

fn rounds(src: &str) -> Vec<Vec<Option<u64>>> {
    let p = phys_after(src, Some("rounds"), &Statistics::none());
    p.ra.blocks
        .iter()
        .flat_map(|b| &b.stmts)
        .filter_map(|s| match s {
            Stmt::Let {
                dst,
                op: Op::MultiJoin { .. },
                ..
            } => Some(p.node(*dst).rounds.windows.clone()),
            _ => None,
        })
        .collect()
}

const CLIQUE4: &str = "n[] = c <- agg<<c = count()>> e(x, y), e(x, z), e(x, w), e(y, z), e(y, w), e(z, w), x < y, y < z, z < w.\n.output n.\n";

#[test]
fn before_and_after() {
    let src = format!("{EDGE}{CLIQUE4}");
    insta::assert_snapshot!(before_after(&src, "rounds", &Statistics::none()));
}

#[test]
fn levels_from_the_second_variable_run_in_rounds() {
    let src = format!("{EDGE}t(x, y, z) <- e(x, y), e(y, z), e(x, z).\n.output t.\n");
    // At y: x and the ranges of the three atoms (7 columns); at z: x, y and the ranges of
    // e(y, z) and e(x, z) (6 columns); 3 atoms.
    assert_eq!(
        rounds(&src),
        vec![vec![None, Some(window_row_bytes(7, 3)), Some(window_row_bytes(6, 3))]]
    );
    assert_eq!(window_row_bytes(6, 3), 104);
}

#[test]
fn a_counted_triangle_is_windowed_at_its_second_variable() {
    // Every intersection of the counted last level works per row of the second level:
    // windows of (x, y) bound them.
    let src = format!("{EDGE}n[] = c <- agg<<c = count()>> e(x, y), e(y, z), e(x, z), x < y, y < z.\n.output n.\n");
    assert_eq!(rounds(&src), vec![vec![None, Some(window_row_bytes(7, 3)), None]]);
}

#[test]
fn a_join_of_two_variables_runs_in_one_round() {
    let src = format!("{EDGE}t(x, y) <- e(x, y), e(y, x).\n.output t.\n");
    let r = rounds(&src);
    assert!(r.iter().all(|w| w.iter().all(Option::is_none)), "{r:?}");
}

#[test]
fn a_counted_last_level_is_never_expanded() {
    let src = format!("{EDGE}{CLIQUE4}");
    let r = rounds(&src);
    assert_eq!(r.len(), 1, "{r:?}");
    // At y: x and the ranges of all six atoms; at z: x, y and the ranges of the five
    // atoms other than e(x, y).
    assert_eq!(r[0], [None, Some(190), Some(182), None]);
}

#[test]
fn a_row_costs_its_parent_and_position_the_state_it_carries_the_value_the_searches_and_flags_twice() {
    assert_eq!(window_row_bytes(0, 0), 2 * (8 + 4 + 1));
    assert_eq!(window_row_bytes(1, 0) - window_row_bytes(0, 0), 8);
    assert_eq!(window_row_bytes(0, 1) - window_row_bytes(0, 0), 10);
}

#[test]
fn a_level_carrying_more_state_costs_more_per_row() {
    // A 4-clique listed: at y (x and six ranges), at z (x, y and five ranges) and at w
    // (x, y, z and three ranges).
    let src = format!("{EDGE}q(x, y, z, w) <- e(x, y), e(x, z), e(x, w), e(y, z), e(y, w), e(z, w), x < y, y < z, z < w.\n.output q.\n");
    assert_eq!(
        rounds(&src),
        vec![vec![
            None,
            Some(window_row_bytes(13, 6)),
            Some(window_row_bytes(12, 6)),
            Some(window_row_bytes(9, 6))
        ]]
    );
}

/// The rounds of each binary join, in plan order.
fn join_rounds(src: &str) -> Vec<Vec<Option<u64>>> {
    let p = phys_after(src, Some("rounds"), &Statistics::none());
    find(&p, |op| matches!(op, Op::Join { .. }))
        .into_iter()
        .map(|t| p.node(t).rounds.windows.clone())
        .collect()
}

#[test]
fn a_join_only_an_aggregation_reads_may_be_written_in_rounds() {
    use fox_phys::join_window_row_bytes;
    // Counted, summed through a filter and a computed column, and by a minimum: one window
    // each, by the join's output columns.
    for rule in [
        "n[x] = c <- agg<<c = count()>> e(x, y), e(y, z).\n.output n.\n",
        "n[] = c <- agg<<c = sum(x + z)>> e(x, y), e(y, z), x < z.\n.output n.\n",
        "n[x] = c <- agg<<c = min(z)>> e(x, y), e(y, z).\n.output n.\n",
    ] {
        let r = join_rounds(&format!("{EDGE}{rule}"));
        assert_eq!(r.len(), 1, "{rule}: {r:?}");
        assert!(matches!(r[0].as_slice(), [Some(_)]), "{rule}: {r:?}");
    }
    let r = join_rounds(&format!(
        "{EDGE}n[x] = c <- agg<<c = count()>> e(x, y), e(y, z).\n.output n.\n"
    ));
    assert_eq!(r[0], [Some(join_window_row_bytes(1))]);
    assert_eq!(join_window_row_bytes(1), 2 * (8 + 8 + 1));
}

#[test]
fn a_join_that_is_averaged_runs_in_one_round() {
    for rule in [
        // Aggregates of the rounds' aggregates that are not the aggregate of all the rows
        // exactly: an average, a sum of floats.
        "n[x] = c <- agg<<c = avg(z)>> e(x, y), e(y, z).\n.output n.\n",
        "n[x] = c <- agg<<c = sum(f)>> e(x, y), e(y, z), f = to_float(z).\n.output n.\n",
    ] {
        let r = join_rounds(&format!("{EDGE}{rule}"));
        assert!(!r.is_empty(), "{rule}");
        assert!(r.iter().all(Vec::is_empty), "{rule}: {r:?}");
    }
}

#[test]
fn a_cross_product_only_a_select_reads_is_filtered_per_round_and_the_select_not_deferred() {
    use fox_phys::join_window_row_bytes;
    // Predicates no band join searches: the product's survivors kept.
    for (rule, cols) in [("p(x, y) <- e(x, u), e(y, v), u * v > 100.\n.output p.\n", 4)] {
        let src = format!("{EDGE}{rule}");
        let r = join_rounds(&src);
        assert_eq!(r, vec![vec![Some(join_window_row_bytes(cols))]], "{rule}");
        let p = phys_after(&src, Some("rounds"), &Statistics::none());
        let selects = find(&p, |op| matches!(op, Op::Select { .. }));
        assert!(!selects.is_empty(), "{rule}");
        for s in selects {
            assert_eq!(p.node(s).deferred_into, None, "{rule}");
        }
    }
    // Counted: aggregated per round instead, nothing of the product kept.
    let src = format!("{EDGE}n[] = c <- agg<<c = count()>> e(x, u), e(y, v), u + v * 2 = 7.\n.output n.\n");
    assert_eq!(join_rounds(&src), vec![vec![Some(join_window_row_bytes(2))]]);
    let p = phys_after(&src, Some("rounds"), &Statistics::none());
    let j = find(&p, |op| matches!(op, Op::Join { .. }))[0];
    let b = &p.ra.blocks[0];
    assert!(
        matches!(
            fox_phys::join_rounds_end(&b.stmts, j, &p.node(j).algorithm, 0),
            Some(fox_phys::JoinRoundsEnd::Aggregation(_))
        ),
        "{src}"
    );
    // A band join and a join with keys are not filtered per round: their rows, through
    // the select, only a duplicate removal reads, so they are deduplicated per round.
    for rule in [
        "p(x, y) <- e(x, u), e(y, v), u < v, v <= u + 5.\n.output p.\n",
        "p(x, y) <- e(x, u), e(y, u), x * y > 100.\n.output p.\n",
    ] {
        let src = format!("{EDGE}{rule}");
        let p = phys_after(&src, Some("rounds"), &Statistics::none());
        let j = find(&p, |op| matches!(op, Op::Join { .. }))[0];
        let end = fox_phys::join_rounds_end(&p.ra.blocks[0].stmts, j, &p.node(j).algorithm, join_keys(&p, j));
        assert!(
            matches!(end, Some(fox_phys::JoinRoundsEnd::Unique(_))),
            "{rule}: {end:?}"
        );
    }
}

#[test]
fn a_join_only_a_duplicate_removal_reads_may_be_written_in_rounds() {
    use fox_phys::{join_unique_row_bytes, join_window_row_bytes};
    // Listed: its rows go through the unique that makes the relation a set, directly and
    // through a select.
    let src = format!("{EDGE}p(x, z) <- e(x, y), e(y, z).\n.output p.\n");
    assert_eq!(join_rounds(&src), vec![vec![Some(join_unique_row_bytes(2))]]);
    assert_eq!(
        join_unique_row_bytes(2),
        join_window_row_bytes(2) + 2 * (8 + 16),
        "the pairs' cost and their sort's"
    );
    let p = phys_after(&src, Some("rounds"), &Statistics::none());
    let j = find(&p, |op| matches!(op, Op::Join { .. }))[0];
    let u = find(&p, |op| matches!(op, Op::Unique(_)))[0];
    let stmts = &p.ra.blocks[0].stmts;
    let end = fox_phys::join_rounds_end(stmts, j, &p.node(j).algorithm, 1);
    assert_eq!(end, Some(fox_phys::JoinRoundsEnd::Unique(u)));
    let printed = fox_phys::print_physical(&p);
    assert!(
        printed.contains(&format!(
            "may be written in rounds ({} bytes/pair",
            join_unique_row_bytes(2)
        )) && printed.contains(&format!("each deduplicated, the rounds' rows merged by t{}", u.0)),
        "{printed}"
    );
    // Same generation: the first rule's join through its select, and the loop's second
    // join; the loop's first join is read by the second, not by a unique.
    let sg =
        format!("{EDGE}sg(x, y) <- e(p, x), e(p, y), x != y.\nsg(x, y) <- e(a, x), sg(a, b), e(b, y).\n.output sg.\n");
    let b = Some(join_unique_row_bytes(2));
    assert_eq!(join_rounds(&sg), vec![vec![b], vec![], vec![b]]);
}

#[test]
fn a_join_read_otherwise_than_by_a_chain_to_one_unique_runs_in_one_round() {
    let src = format!("{EDGE}p(x, z) <- e(x, y), e(y, z).\n.output p.\n");
    let p = phys_after(&src, Some("rounds"), &Statistics::none());
    let j = find(&p, |op| matches!(op, Op::Join { .. }))[0];
    let u = find(&p, |op| matches!(op, Op::Unique(_)))[0];
    let alg = p.node(j).algorithm.clone();
    let stmts = p.ra.blocks[0].stmts.clone();
    assert!(fox_phys::join_rounds_end(&stmts, j, &alg, 1).is_some());
    // The join read by two statements: the unique and an output.
    let mut two = stmts.clone();
    two.push(Stmt::Output {
        rel: fox_ra::RelId(0),
        src: j,
    });
    assert_eq!(fox_phys::join_rounds_end(&two, j, &alg, 1), None);
    // A sort between the join and the unique: not a select, map or projection.
    let sorted = fox_ra::TempId(p.ra.temps.len() as u32);
    let mut chain = Vec::new();
    for s in &stmts {
        match s {
            Stmt::Let { dst, origin, .. } if *dst == u => {
                chain.push(Stmt::Let {
                    dst: sorted,
                    op: Op::Sort {
                        input: j,
                        keys: vec![fox_ra::SortKey::asc(0)],
                    },
                    origin: *origin,
                });
                chain.push(Stmt::Let {
                    dst: u,
                    op: Op::Unique(sorted),
                    origin: *origin,
                });
            }
            s => chain.push(s.clone()),
        }
    }
    assert_eq!(fox_phys::join_rounds_end(&chain, j, &alg, 1), None);
    // A join whose pairs do not come from an expansion: a merge without keys (whose
    // unique is no select to filter it per round).
    assert_eq!(
        fox_phys::join_rounds_end(&stmts, j, &fox_phys::Algorithm::SortMerge, 0),
        None
    );
    // An anti-join between the join and the unique, from Datalog.
    let neg = format!("{EDGE}p(x, z) <- e(x, y), e(y, z), !e(x, z).\n.output p.\n");
    let r = join_rounds(&neg);
    assert!(!r.is_empty() && r.iter().all(Vec::is_empty), "{r:?}");
    // A chain whose rows move between devices before the unique.
    let tc = "e(x, y) -> int32(x), int32(y).\n.input e.\npath(x, y) <- e(x, y).\npath(x, z) <- path(x, y), e(y, z).\n.output path.\n";
    let opts = fox_phys::Options {
        disabled: Vec::new(),
        stop_after: Some("rounds".into()),
        join: fox_phys::JoinChoice::Auto,
        devices: 2,
    };
    let p = fox_phys::run(ra(tc), &Statistics::none(), &opts).unwrap();
    for j in find(&p, |op| matches!(op, Op::Join { .. })) {
        let moved = p.ra.blocks.iter().any(|b| {
            matches!(
                fox_phys::join_rounds_end(&b.stmts, j, &p.node(j).algorithm, join_keys(&p, j)),
                Some(fox_phys::JoinRoundsEnd::Unique(_))
            )
        });
        assert!(moved, "t{} is read by a unique", j.0);
        assert!(p.node(j).rounds.windows.is_empty(), "t{}: {:?}", j.0, p.node(j).rounds);
    }
}

/// The number of keys of the join `j` of `p`.
fn join_keys(p: &fox_phys::PhysPlan, j: fox_ra::TempId) -> usize {
    p.ra.blocks
        .iter()
        .flat_map(|b| &b.stmts)
        .find_map(|s| match s {
            Stmt::Let {
                dst,
                op: Op::Join { left_keys, .. },
                ..
            } if *dst == j => Some(left_keys.len()),
            _ => None,
        })
        .unwrap()
}
