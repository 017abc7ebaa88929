//! The equi-join algorithms `join-selection` chooses by cost (hash, index nested loop,
//! nested loop, sort-merge) and forces (`Options::join`), the order each leaves, their
//! printing and `verify`'s checks of them.

use fox_phys::{Algorithm, ColumnStats, JoinChoice, Options, PhysError, PhysPlan, RelationStats, Statistics, PASSES};
use fox_ra::{Op, Side, Stmt};

use crate::common::*;

const BIG_SMALL: &str = "big(x, k) -> int32(x), int32(k).\nsmall(k, v) -> int32(k), int32(v).\n\
                         .input big.\n.input small.\n";

/// Statistics of two-column relations: `(name, rows)`.
fn stats(rels: &[(&str, u64)]) -> Statistics {
    let col = |distinct| {
        Some(ColumnStats {
            distinct,
            min: None,
            max: None,
            sorted: false,
        })
    };
    let mut s = Statistics::none();
    for &(name, rows) in rels {
        s.insert(
            name,
            RelationStats {
                rows,
                columns: vec![col(rows.min(1000)), col(rows.min(1000))],
                rows_sorted: false,
                rows_distinct: false,
            },
        );
    }
    s
}

fn run(src: &str, stats: &Statistics, join: JoinChoice) -> PhysPlan {
    let opts = Options {
        join,
        ..Options::default()
    };
    fox_phys::run(ra(src), stats, &opts).unwrap()
}

/// The algorithm of every join-like operator (join, semi-join, anti-join, difference),
/// with the estimated rows of its left and right inputs.
fn joins(p: &PhysPlan) -> Vec<(Algorithm, f64, f64)> {
    let rows = |t: &fox_ra::TempId| p.node(*t).est.as_ref().map_or(0.0, |e| e.rows);
    p.ra.blocks
        .iter()
        .flat_map(|b| &b.stmts)
        .filter_map(|s| match s {
            Stmt::Let {
                dst,
                op:
                    Op::Join { left, right, .. }
                    | Op::SemiJoin { left, right, .. }
                    | Op::AntiJoin { left, right, .. }
                    | Op::Difference { left, right },
                ..
            } => Some((p.node(*dst).algorithm.clone(), rows(left), rows(right))),
            _ => None,
        })
        .collect()
}

#[test]
fn a_small_build_side_and_a_large_unsorted_probe_hash() {
    let src = format!("{BIG_SMALL}r(x, v) <- big(x, k), small(k, v).\n.output r.\n");
    let p = run(&src, &stats(&[("big", 10_000_000), ("small", 1000)]), JoinChoice::Auto);
    let got = joins(&p);
    assert_eq!(got.len(), 1, "{got:?}");
    let (alg, l, r) = &got[0];
    let build = match alg {
        Algorithm::Hash { build } => *build,
        other => panic!("not a hash join: {other:?}"),
    };
    // The build side is the small one.
    let (b, probe) = if build == Side::Left { (l, r) } else { (r, l) };
    assert!(b < probe, "build {b} rows, probe {probe}");
    let text = fox_phys::print_physical(&p);
    assert!(text.contains("hash join (build t"), "{text}");
    assert!(text.contains("~1000 rows"), "{text}");
    assert!(text.contains("~10.0M rows unsorted)"), "{text}");
}

#[test]
fn a_much_smaller_unsorted_side_beyond_shared_memory_is_sorted_and_indexed() {
    let src = format!("{BIG_SMALL}r(x, v) <- big(x, k), small(k, v).\n.output r.\n");
    for (big, small) in [(16_000_000, 1_000_000), (1_000_000, 100_000)] {
        let p = run(&src, &stats(&[("big", big), ("small", small)]), JoinChoice::Auto);
        let got = joins(&p);
        let (alg, l, r) = &got[0];
        let indexed = match alg {
            Algorithm::IndexNestedLoop { indexed } => *indexed,
            other => panic!("{big} and {small} rows: not an index nested loop: {other:?}"),
        };
        let (i, probe) = if indexed == Side::Left { (l, r) } else { (r, l) };
        assert!(i < probe, "index {i} rows, probe {probe}");
    }
    // The index side is the smaller one whichever side of the body it is on.
    let src = format!("{BIG_SMALL}r(x, v) <- small(k, v), big(x, k).\n.output r.\n");
    let p = run(
        &src,
        &stats(&[("big", 16_000_000), ("small", 1_000_000)]),
        JoinChoice::Auto,
    );
    match &joins(&p)[0] {
        (Algorithm::IndexNestedLoop { indexed }, l, r) => {
            let i = if *indexed == Side::Left { l } else { r };
            assert!(*i < 2_000_000.0, "the indexed side has {i} rows");
        }
        other => panic!("not an index nested loop: {other:?}"),
    }
}

/// Beyond 2^22 build rows the GPU partitions the hash table and its probing rows, which
/// prices a probe below a binary search over the build side: a much larger unsorted side
/// probes it. Without 8 times the rows on the probing side the merge stays.
#[test]
fn a_build_side_beyond_the_partitioning_threshold_is_searched_not_hashed() {
    // Beyond 2^22 build rows the GPU's table is partitioned, whose build and probe cost
    // more than a binary search of the sorted small side: measured, hashing never won.
    let src = format!("{BIG_SMALL}r(x, v) <- big(x, k), small(k, v).\n.output r.\n");
    let p = run(
        &src,
        &stats(&[("big", 200_000_000), ("small", 10_000_000)]),
        JoinChoice::Auto,
    );
    let got = joins(&p);
    assert!(
        matches!(got[0].0, Algorithm::IndexNestedLoop { .. }),
        "not an index nested loop: {got:?}"
    );
    let p = run(
        &src,
        &stats(&[("big", 50_000_000), ("small", 10_000_000)]),
        JoinChoice::Auto,
    );
    assert_eq!(joins(&p)[0].0, Algorithm::SortMerge);
}

#[test]
fn sides_of_similar_size_merge() {
    let src = format!("{BIG_SMALL}r(x, v) <- big(x, k), small(k, v).\n.output r.\n");
    for (a, b) in [(1_000_000, 1_000_000), (1_000_000, 400_000)] {
        let p = run(&src, &stats(&[("big", a), ("small", b)]), JoinChoice::Auto);
        let got = joins(&p);
        assert_eq!(got[0].0, Algorithm::SortMerge, "{a} and {b} rows: {got:?}");
    }
}

#[test]
fn a_sorted_side_is_an_index_for_an_unsorted_one() {
    // A derived relation is sorted on its columns: `d` is an index on `k`.
    let src = format!("{BIG_SMALL}d(k, v) <- small(k, v), v > 0.\nr(x, v) <- big(x, k), d(k, v).\n.output r.\n");
    let p = run(
        &src,
        &stats(&[("big", 1_000_000), ("small", 1_000_000)]),
        JoinChoice::Auto,
    );
    let got = joins(&p);
    assert!(
        got.iter()
            .any(|(a, _, _)| matches!(a, Algorithm::IndexNestedLoop { .. })),
        "{got:?}"
    );
    let text = fox_phys::print_physical(&p);
    assert!(text.contains("index nested-loop join (index t"), "{text}");
    assert!(text.contains("rows sorted, probe t"), "{text}");
}

#[test]
fn tiny_sides_nest_loops_outside_loops_only() {
    let src = "f(x, y) -> int32(x), int32(y).\ng(y) -> int32(y).\nf(1, 2). f(2, 3). f(3, 3).\ng(2). g(3).\n\
               r(x) <- f(x, y), g(y).\n.output r.\n\
               p(x, y) <- f(x, y).\np(x, z) <- p(x, y), f(y, z).\n.output p.\n";
    let p = run(src, &Statistics::none(), JoinChoice::Auto);
    let blocks: Vec<(usize, Algorithm)> =
        p.ra.blocks
            .iter()
            .enumerate()
            .flat_map(|(i, b)| {
                b.stmts.iter().filter_map(move |s| match s {
                    Stmt::Let {
                        dst,
                        op: Op::Join { .. } | Op::SemiJoin { .. },
                        ..
                    } => Some((i, *dst)),
                    _ => None,
                })
            })
            .map(|(i, t)| (i, p.node(t).algorithm.clone()))
            .collect();
    let looping = |i: usize| p.ra.blocks[i].term.successors().iter().any(|s| s.0 as usize == i);
    assert!(
        blocks.iter().any(|(i, a)| !looping(*i) && *a == Algorithm::NestedLoop),
        "{blocks:?}"
    );
    assert!(
        blocks.iter().all(|(i, a)| !looping(*i) || *a != Algorithm::NestedLoop),
        "{blocks:?}"
    );
    assert!(fox_phys::print_physical(&p).contains("nested-loop "));
}

#[test]
fn a_forced_algorithm_applies_to_every_equi_join() {
    let src = format!(
        "{BIG_SMALL}r(x, v) <- big(x, k), small(k, v).\ns(x) <- big(x, k), !small(k, _).\n\
         w(x, y) <- big(x, k), small(y, v), v >= k, v <= k + 3.\n.output r.\n.output s.\n.output w.\n"
    );
    let none = Statistics::none();
    for (join, want) in [
        (JoinChoice::Merge, "merge"),
        (JoinChoice::Hash, "hash"),
        (JoinChoice::IndexNestedLoop, "inl"),
        (JoinChoice::NestedLoop, "nl"),
    ] {
        let p = run(&src, &none, join);
        for (alg, _, _) in joins(&p) {
            let ok = match (want, &alg) {
                // A band join stays one unless forced to merge or nl; a band join without
                // keys then is a cross product (sort-merge's counting).
                (_, Algorithm::SortMerge) => want == "merge" || want == "nl",
                ("hash", Algorithm::Hash { .. }) | ("inl", Algorithm::IndexNestedLoop { .. }) => true,
                ("hash" | "inl", Algorithm::Band(_)) => true,
                ("nl", Algorithm::NestedLoop) => true,
                _ => false,
            };
            assert!(ok, "--join {want}: {alg:?}");
        }
        let algs: Vec<Algorithm> = joins(&p).into_iter().map(|j| j.0).collect();
        let forced_any = algs.iter().any(|a| match want {
            "merge" => *a == Algorithm::SortMerge,
            "hash" => matches!(a, Algorithm::Hash { .. }),
            "inl" => matches!(a, Algorithm::IndexNestedLoop { .. }),
            _ => *a == Algorithm::NestedLoop,
        });
        assert!(forced_any, "--join {want}: {algs:?}");
        // Forced to merge or nl, the band join is gone.
        let band = algs.iter().any(|a| matches!(a, Algorithm::Band(_)));
        assert_eq!(band, want == "hash" || want == "inl", "--join {want}: {algs:?}");
        // Semi-joins and anti-joins search their right side.
        for (alg, _, _) in joins(&p) {
            assert!(!matches!(alg, Algorithm::Hash { build: Side::Left }) || want == "hash");
        }
    }
}

#[test]
fn a_hash_or_index_join_has_its_probing_sides_order() {
    // `d` is sorted on (k, v); `big` has no order: the hash join's rows come in big's
    // order (none), the merge's sorted on the key.
    let src = format!("{BIG_SMALL}d(k, v) <- small(k, v), v > 0.\nr(x, k, v) <- d(k, v), big(x, k).\n.output r.\n");
    let none = Statistics::none();
    for join in [JoinChoice::Hash, JoinChoice::IndexNestedLoop, JoinChoice::NestedLoop] {
        let p = run(&src, &none, join);
        let t = find(&p, |op| matches!(op, Op::Join { .. }))[0];
        let o = &p.node(t).order.as_ref().unwrap().provides;
        let probe_left = matches!(
            p.node(t).algorithm,
            Algorithm::Hash { build: Side::Right }
                | Algorithm::IndexNestedLoop { indexed: Side::Right }
                | Algorithm::NestedLoop
        );
        // The left (d) drives: its sort on k survives; otherwise big's (none) does.
        assert_eq!(
            !o.sorted.is_empty(),
            probe_left,
            "{join:?}: {:?} {o:?}",
            p.node(t).algorithm
        );
    }
    let p = run(&src, &none, JoinChoice::Merge);
    let t = find(&p, |op| matches!(op, Op::Join { .. }))[0];
    assert!(!p.node(t).order.as_ref().unwrap().provides.sorted.is_empty());
}

fn verify(p: &mut PhysPlan) -> Result<(), PhysError> {
    let v = PASSES.iter().find(|p| p.name() == "verify").unwrap();
    v.run(p, &Statistics::none())
}

#[test]
fn verify_checks_searched_joins() {
    let src = format!(
        "{BIG_SMALL}s(x) <- big(x, k), !small(k, _).\nc(x, v) <- big(x, _), small(_, v).\n.output s.\n.output c.\n"
    );
    let mut p = run(&src, &Statistics::none(), JoinChoice::Auto);
    verify(&mut p).unwrap();
    let anti = find(&p, |op| matches!(op, Op::AntiJoin { .. }))[0];
    p.node_mut(anti).algorithm = Algorithm::Hash { build: Side::Left };
    let e = verify(&mut p).unwrap_err().to_string();
    assert!(e.contains("searches its right side"), "{e}");
    p.node_mut(anti).algorithm = Algorithm::Hash { build: Side::Right };
    verify(&mut p).unwrap();
    let cross = find(
        &p,
        |op| matches!(op, Op::Join { left_keys, .. } if left_keys.is_empty()),
    )[0];
    p.node_mut(cross).algorithm = Algorithm::NestedLoop;
    let e = verify(&mut p).unwrap_err().to_string();
    assert!(e.contains("without keys"), "{e}");
}

#[test]
fn tiny_estimates_of_inputs_never_nest_loops() {
    // Inputs of a few rows by their statistics: their sizes are still data, not
    // constants, so the model does not bet the product on them.
    let src = format!("{BIG_SMALL}r(x, v) <- big(x, k), small(k, v).\n.output r.\n");
    let p = run(&src, &stats(&[("big", 3), ("small", 2)]), JoinChoice::Auto);
    let got = joins(&p);
    assert!(got.iter().all(|(a, _, _)| *a != Algorithm::NestedLoop), "{got:?}");
}
