use fox_phys::{ColumnStats, Options, Partitioning, PhysPlan, Redistribute, RelationStats, Statistics};
use fox_ra::{Op, Stmt};

use crate::common::*;

#[test]
fn before_and_after() {
    let src = format!("{EDGE}p(x, z) <- e(x, y), e(y, z).\n.output p.\n");
    insta::assert_snapshot!(before_after(&src, "partitioning", &Statistics::none()));
}

#[test]
fn with_one_device_every_result_is_whole() {
    let src = format!("{EDGE}p(x, z) <- e(x, y), e(y, z).\n.output p.\n");
    let p = phys_after(&src, None, &Statistics::none());
    assert!(p
        .nodes
        .iter()
        .all(|n| n.partitioning == Partitioning::Single && n.moves.is_empty()));
    assert!(p.stmt_moves.is_empty());
}

fn on_devices(src: &str, n: usize) -> PhysPlan {
    let opts = Options {
        devices: n,
        ..Options::default()
    };
    fox_phys::run(ra(src), &Statistics::none(), &opts).unwrap()
}

/// The node of the first operator `pick` accepts, in plan order.
fn first(p: &PhysPlan, pick: impl Fn(&Op) -> bool) -> &fox_phys::Node {
    let t =
        p.ra.blocks
            .iter()
            .flat_map(|b| &b.stmts)
            .find_map(|s| match s {
                Stmt::Let { dst, op, .. } if pick(op) => Some(*dst),
                _ => None,
            })
            .expect("the operator is in the plan");
    p.node(t)
}

#[test]
fn transitive_closure_over_two_devices_exchanges_each_new_delta_once() {
    let src = "edge(x, y) -> int32(x), int32(y).\n.input edge.\n\
               path(x, y) <- edge(x, y).\npath(x, z) <- path(x, y), edge(y, z).\n.output path.\n";
    let p = on_devices(src, 2);
    insta::assert_snapshot!(fox_phys::print_physical(&p));
    // The join in the loop reads both sides where they are: the edges are hashed on their
    // source once as loaded, the closure on its target.
    let join = first(&p, |op| matches!(op, Op::Join { .. }));
    assert!(join.moves.is_empty(), "{:?}", join.moves);
    let edge = p.ra.relations.iter().position(|r| r.name == "edge").unwrap();
    assert_eq!(
        p.rel_partitioning[edge],
        Partitioning::Hash {
            cols: vec![0],
            parts: 2
        }
    );
}

#[test]
fn aggregations_combine_partial_rows_or_move_their_input_by_group() {
    // `f`, derived, is hashed on both its columns: its readers group on `x` and on `y`,
    // so it is not placed by the groups.
    let src = "e(x, y) -> int32(x), int32(y).\n.input e.\nf(x, y) <- e(x, y), x != y.\n\
               n[] = c <- agg<<c = count()>> f(_, _).\n\
               d[x] = c <- agg<<c = count()>> f(x, _).\ng[y] = c <- agg<<c = count()>> f(_, y).\n\
               .output n.\n.output d.\n.output g.\n";
    let p = on_devices(src, 3);
    // Counts combine: each device counts its rows, and only the partial counts move.
    let global = first(&p, |op| matches!(op, Op::Aggregate { group, .. } if group.is_empty()));
    assert!(global.moves.is_empty());
    assert_eq!(global.partial, Some(Redistribute::Gather));
    assert_eq!(global.partitioning, Partitioning::Single);
    let grouped = first(&p, |op| matches!(op, Op::Aggregate { group, .. } if !group.is_empty()));
    assert_eq!(grouped.partial, Some(Redistribute::Hash { cols: vec![0] }));
    assert_eq!(
        grouped.partitioning,
        Partitioning::Hash {
            cols: vec![0],
            parts: 3
        }
    );
    // An average of integers or decimals combines (as an exact sum and a count); one of
    // floats does not (its sum depends on the order of the additions): its input moves.
    // (`f` is also counted by `y`: its readers keep no common column, so it is hashed on
    // both, not placed by `x`.)
    for (ty, partial) in [("int32", true), ("int64", true), ("decimal", true), ("float64", false)] {
        let src = format!(
            "e(x, y) -> int32(x), {ty}(y).\n.input e.\nf(x, y) <- e(x, y), x != 0.\na[x] = v <- agg<<v = avg(y)>> f(x, y).\n\
             b[y] = c <- agg<<c = count()>> f(_, y).\n.output a.\n.output b.\n.output f.\n"
        );
        let p = on_devices(&src, 2);
        let avg = first(&p, |op| matches!(op, Op::Aggregate { .. }));
        if partial {
            assert_eq!(avg.partial, Some(Redistribute::Hash { cols: vec![0] }), "{ty}");
            assert!(avg.moves.is_empty(), "{ty}: {:?}", avg.moves);
        } else {
            assert_eq!(avg.partial, None, "{ty}");
            assert!(
                matches!(&avg.moves[..], [(0, Redistribute::Hash { .. })]),
                "{ty}: {:?}",
                avg.moves
            );
        }
    }
}

fn rel_part(p: &PhysPlan, name: &str) -> Partitioning {
    let r = p.ra.relations.iter().position(|r| r.name == name).unwrap();
    p.rel_partitioning[r].clone()
}

#[test]
fn a_triangle_count_loads_its_input_whole_on_every_device_and_splits_the_first_variable() {
    let src = "e(x, y) -> int32(x), int32(y).\n.input e.\n\
               n[] = c <- agg<<c = count()>> e(x, y), e(y, z), e(x, z), x < y, y < z.\n.output n.\n";
    for n in [2, 3, 4] {
        let p = on_devices(src, n);
        // Only the multi-way join reads `e`, and it needs every row on every device: each
        // device loads it whole, and nothing is broadcast.
        assert_eq!(rel_part(&p, "e"), Partitioning::Replicated { parts: n });
        let mj = first(&p, |op| matches!(op, Op::MultiJoin { .. }));
        assert_eq!(mj.boxes, fox_phys::passes::BOXES_PER_DEVICE * n as u32);
        assert!(mj.moves.is_empty(), "{:?}", mj.moves);
        assert_eq!(
            mj.partitioning,
            Partitioning::Single,
            "the partial counts are summed on device 0"
        );
        let scan = first(&p, |op| matches!(op, Op::Scan(_)));
        assert_eq!(scan.partitioning, Partitioning::Replicated { parts: n });
    }
}

#[test]
fn an_input_another_reader_needs_in_parts_is_broadcast_to_the_multi_way_join() {
    // `e` is also counted: loaded whole, every device would count all of it.
    let src = "e(x, y) -> int32(x), int32(y).\n.input e.\n\
               n[] = c <- agg<<c = count()>> e(x, y), e(y, z), e(x, z), x < y, y < z.\n\
               m[] = c <- agg<<c = count()>> e(_, _).\n.output n.\n.output m.\n";
    let p = on_devices(src, 2);
    assert_eq!(rel_part(&p, "e"), Partitioning::Split { parts: 2 });
    let mj = first(&p, |op| matches!(op, Op::MultiJoin { .. }));
    assert!(!mj.moves.is_empty() && mj.moves.iter().all(|(_, m)| *m == Redistribute::Broadcast));
    // A relation a rule derives is never loaded whole, whatever reads it.
    let src = "e(x, y) -> int32(x), int32(y).\n.input e.\nf(x, y) <- e(x, y).\n\
               n[] = c <- agg<<c = count()>> f(x, y), f(y, z), f(x, z), x < y, y < z.\n.output n.\n";
    let p = on_devices(src, 2);
    assert!(p
        .rel_partitioning
        .iter()
        .all(|r| !matches!(r, Partitioning::Replicated { .. })));
}

#[test]
fn inputs_are_hashed_at_load_on_the_keys_their_readers_meet_on() {
    // The join on `x` reads `e` through a select: each device loads the rows of `e` and of
    // `f` whose `x` hashes to it, and nothing moves to join them.
    let src = "e(x, y) -> int32(x), int32(y).\nf(x, y) -> int32(x), int32(y).\n.input e.\n.input f.\n\
               p(x, z) <- e(x, 3), f(x, z).\n.output p.\n";
    let p = on_devices(src, 2);
    let on_x = Partitioning::Hash {
        cols: vec![0],
        parts: 2,
    };
    assert_eq!(rel_part(&p, "e"), on_x);
    assert_eq!(rel_part(&p, "f"), on_x);
    let join = first(&p, |op| matches!(op, Op::Join { .. }));
    assert!(join.moves.is_empty(), "{:?}", join.moves);
    // An aggregation's groups: loaded hashed on the group column, each device's groups
    // are whole, and neither its rows nor partial rows move.
    let src = "e(x, y) -> int32(x), int32(y).\n.input e.\n\
               s[y] = t <- agg<<t = sum(x)>> e(x, y).\n.output s.\n";
    let p = on_devices(src, 3);
    assert_eq!(
        rel_part(&p, "e"),
        Partitioning::Hash {
            cols: vec![1],
            parts: 3
        }
    );
    let agg = first(&p, |op| matches!(op, Op::Aggregate { .. }));
    assert!(
        agg.moves.is_empty() && agg.partial.is_none(),
        "{:?} {:?}",
        agg.moves,
        agg.partial
    );
    // Counted too, `e` is read in parts either way: the count's partial counts are the
    // only rows that move.
    let src = "e(x, y) -> int32(x), int32(y).\n.input e.\n\
               s[y] = t <- agg<<t = sum(x)>> e(x, y).\nm[] = c <- agg<<c = count()>> e(_, _).\n\
               .output s.\n.output m.\n";
    let p = on_devices(src, 2);
    assert_eq!(
        rel_part(&p, "e"),
        Partitioning::Hash {
            cols: vec![1],
            parts: 2
        }
    );
}

#[test]
fn facts_are_replicated_and_output_by_device_zero_alone() {
    let src = "f(x) -> int32(x).\nf(1). f(2).\ng(x) <- f(x).\n.output f.\n.output g.\n";
    let p = on_devices(src, 2);
    let f = p.ra.relations.iter().position(|r| r.name == "f").unwrap();
    assert_eq!(p.rel_partitioning[f], Partitioning::Replicated { parts: 2 });
    assert!(p
        .stmt_moves
        .values()
        .any(|m| *m == Redistribute::Keep { cols: Vec::new() }));
}

/// Statistics giving each named input its rows and its columns' distinct values.
fn rows_of(rels: &[(&str, u64, &[u64])]) -> Statistics {
    let mut s = Statistics::none();
    for (name, rows, distinct) in rels {
        s.insert(
            *name,
            RelationStats {
                rows: *rows,
                columns: distinct
                    .iter()
                    .map(|&d| {
                        Some(ColumnStats {
                            distinct: d,
                            min: None,
                            max: None,
                            sorted: false,
                        })
                    })
                    .collect(),
                rows_sorted: false,
                rows_distinct: false,
            },
        );
    }
    s
}

fn on_devices_with(src: &str, n: usize, stats: &Statistics) -> PhysPlan {
    let opts = Options {
        devices: n,
        ..Options::default()
    };
    fox_phys::run(ra(src), stats, &opts).unwrap()
}

#[test]
fn a_relation_read_by_no_join_stays_as_its_producer_leaves_it() {
    // The join leaves `p` hashed on `y` (both sides are hashed on it as loaded): each
    // row, so each distinct row, is on one device, and the output gathers every device's
    // part. Neither the duplicate removal nor the store moves a row.
    let src = "e(x, y) -> int32(x), int32(y).\nf(y, z) -> int32(y), int32(z).\n.input e.\n.input f.\n\
               p(x, y, z) <- e(x, y), f(y, z).\n.output p.\n";
    for n in [2, 4] {
        let p = on_devices(src, n);
        assert_eq!(
            rel_part(&p, "p"),
            Partitioning::Hash {
                cols: vec![1],
                parts: n
            }
        );
        let unique = first(&p, |op| matches!(op, Op::Unique(_)));
        assert!(unique.moves.is_empty(), "{:?}", unique.moves);
        assert!(p.nodes.iter().all(|n| n.moves.is_empty()));
        assert!(p.stmt_moves.is_empty(), "{:?}", p.stmt_moves);
    }
    // An aggregation's result stays hashed on its groups: its partial rows are the only
    // rows that move, not its result again before the output.
    let src = "e(x, y) -> int32(x), int32(y).\nf(x, y) -> int32(x), int32(y).\n.input e.\n.input f.\n\
               g(x, y) <- e(x, y), f(y, x).\n\
               s[y] = t <- agg<<t = count()>> g(_, y).\n.output s.\n.output g.\n";
    let p = on_devices(src, 2);
    let agg = first(&p, |op| matches!(op, Op::Aggregate { .. }));
    let Partitioning::Hash { cols, .. } = &agg.partitioning else {
        panic!("{:?}", agg.partitioning)
    };
    assert_eq!(
        rel_part(&p, "s"),
        Partitioning::Hash {
            cols: cols.clone(),
            parts: 2
        }
    );
    assert!(p.stmt_moves.is_empty(), "{:?}", p.stmt_moves);
    // An aggregation without groups leaves its one row on device 0, and so does `n`.
    let src = "e(x, y) -> int32(x), int32(y).\n.input e.\nn[] = c <- agg<<c = count()>> e(_, _).\n.output n.\n";
    let p = on_devices(src, 2);
    assert_eq!(rel_part(&p, "n"), Partitioning::Single);
    assert!(p.stmt_moves.is_empty(), "{:?}", p.stmt_moves);
}

#[test]
fn a_relation_kept_as_its_producer_leaves_it_is_read_in_place_by_aggregations_on_its_key() {
    // `d` holds the rows of `e` whose key has a partner in `f`, hashed on that key by the
    // join; counting `d` by its key then needs no exchange (as TPC-H Q21's order lines,
    // counted by their order). Hashed on all its columns, `d` would move twice: to be
    // stored, and to be counted.
    let src = "e(k, l) -> int32(k), int32(l).\nf(k) -> int32(k).\n.input e.\n.input f.\n\
               d(k, l) <- e(k, l), f(k), l > 0.\n\
               c[k] = n <- agg<<n = count()>> d(k, _).\n.output c.\n.output d.\n";
    let p = on_devices(src, 2);
    assert_eq!(
        rel_part(&p, "d"),
        Partitioning::Hash {
            cols: vec![0],
            parts: 2
        }
    );
    for t in find(&p, |_| true) {
        let node = p.node(t);
        assert!(
            node.moves.is_empty() && node.partial.is_none(),
            "t{}: {:?}",
            t.0,
            node.moves
        );
    }
    assert!(p.stmt_moves.is_empty(), "{:?}", p.stmt_moves);
}

#[test]
fn an_input_is_hashed_on_a_key_it_meets_an_intermediate_result_on() {
    // TPC-H Q3's shape: `o` joins the few `c` rows on `ck`, then the many `l` rows on
    // `ok` through that join's result. Hashed on `ok` as loaded (as `l` is), `o`'s join
    // with `c` broadcasts the small `c` and the join with `l` moves nothing; hashed on
    // `ck`, the join's result would move to meet `l`.
    let src = "c(ck) -> int32(ck).\no(ok, ck) -> int32(ok), int32(ck).\nl(ok, v) -> int32(ok), int32(v).\n\
               .input c.\n.input o.\n.input l.\n\
               p(ok, v) <- c(ck), o(ok, ck), l(ok, v).\n.output p.\n";
    // Each of the 1000 `c` rows has 100 orders, each order 10 lines.
    let stats = rows_of(&[
        ("c", 1_000, &[1_000]),
        ("o", 100_000, &[100_000, 1_000]),
        ("l", 1_000_000, &[100_000, 1_000_000]),
    ]);
    let p = on_devices_with(src, 2, &stats);
    let on_ok = Partitioning::Hash {
        cols: vec![0],
        parts: 2,
    };
    assert_eq!(rel_part(&p, "o"), on_ok);
    assert_eq!(rel_part(&p, "l"), on_ok);
    let joins = find(&p, |op| matches!(op, Op::Join { .. }));
    assert_eq!(joins.len(), 2);
    assert_eq!(p.node(joins[0]).moves, vec![(0, Redistribute::Broadcast)]);
    assert!(p.node(joins[1]).moves.is_empty(), "{:?}", p.node(joins[1]).moves);
}

#[test]
fn an_input_joined_on_two_keys_may_be_hashed_on_one_of_them() {
    // TPC-H Q9's shape: the lines of a few parts meet their part-supplier rows on both
    // (part, supplier). Hashed on the part alone as loaded, `ps` meets the lines where the
    // join with the parts left them (hashed on the part), and nothing moves.
    let src = "pt(p) -> int32(p).\nl(p, s, v) -> int32(p), int32(s), int32(v).\n\
               ps(p, s, c) -> int32(p), int32(s), int32(c).\n.input pt.\n.input l.\n.input ps.\n\
               r(p, s, v, c) <- pt(p), l(p, s, v), ps(p, s, c).\n.output r.\n";
    let stats = rows_of(&[
        ("pt", 100_000, &[100_000]),
        ("l", 1_000_000, &[200_000, 10_000, 1_000_000]),
        ("ps", 400_000, &[200_000, 10_000, 400_000]),
    ]);
    let p = on_devices_with(src, 2, &stats);
    let on_p = Partitioning::Hash {
        cols: vec![0],
        parts: 2,
    };
    assert_eq!(rel_part(&p, "ps"), on_p);
    for t in find(&p, |op| matches!(op, Op::Join { .. })) {
        assert!(p.node(t).moves.is_empty(), "t{}: {:?}", t.0, p.node(t).moves);
    }
}

#[test]
fn an_input_is_hashed_on_the_columns_a_later_store_wants() {
    // TPC-H Q13's shape: `q` holds `o`'s rows with their columns swapped and is joined on
    // its first column, `o`'s second, by two rules. No join reads `o` itself; loaded
    // hashed on that column, `o`'s rows are where `q` wants them, and the duplicate
    // removal before the store moves nothing.
    let src = "o(k, c) -> int32(k), int32(c).\ncu(c) -> int32(c).\n.input o.\n.input cu.\n\
               q(c, k) <- o(k, c), k > 0.\nj(c, k) <- cu(c), q(c, k).\nm(c) <- cu(c), !q(c, _).\n\
               .output j.\n.output m.\n";
    let p = on_devices(src, 2);
    assert_eq!(
        rel_part(&p, "o"),
        Partitioning::Hash {
            cols: vec![1],
            parts: 2
        }
    );
    assert_eq!(
        rel_part(&p, "q"),
        Partitioning::Hash {
            cols: vec![0],
            parts: 2
        }
    );
    let unique = first(&p, |op| matches!(op, Op::Unique(_)));
    assert!(unique.moves.is_empty(), "{:?}", unique.moves);
    assert!(p.stmt_moves.is_empty(), "{:?}", p.stmt_moves);
}

#[test]
fn a_relation_its_producer_hashes_on_all_columns_is_hashed_on_the_columns_its_readers_keep() {
    // TPC-H Q14's shape: `l`'s rows come from a join whose key they drop, so its duplicate
    // removal moves them. Its readers drop `t` before their own duplicate removal: hashed
    // on `k` and `v` instead of all columns, `l`'s rows move once, and the second
    // duplicate removal finds them placed.
    let src = "e(k, p, v) -> int32(k), int32(p), int32(v).\nf(p, t) -> int32(p), int32(t).\n\
               .input e.\n.input f.\nl(k, t, v) <- e(k, p, v), f(p, t).\n\
               a(k, v, w) <- l(k, t, v), t > 5, w = v.\na(k, v, w) <- l(k, t, v), t <= 5, w = 0.\n\
               .output a.\n";
    let p = on_devices(src, 2);
    assert_eq!(
        rel_part(&p, "l"),
        Partitioning::Hash {
            cols: vec![0, 2],
            parts: 2
        }
    );
    let uniques = find(&p, |op| matches!(op, Op::Unique(_)));
    assert_eq!(uniques.len(), 2);
    assert_eq!(
        p.node(uniques[0]).moves,
        vec![(0, Redistribute::Hash { cols: vec![0, 2] })]
    );
    assert!(p.node(uniques[1]).moves.is_empty(), "{:?}", p.node(uniques[1]).moves);
    assert!(p.stmt_moves.is_empty(), "{:?}", p.stmt_moves);
}

/// An input aggregated by a few groups (TPC-H Q1's `lineitem` by its 4 flag pairs) is
/// loaded split and aggregated in part on each device, not hashed on its groups, which
/// would leave some devices most of the rows and others none; with many groups it is
/// hashed on them and nothing moves.
#[test]
fn an_input_is_not_hashed_on_keys_too_few_to_spread_it() {
    let src = "l(f, s, q) -> int32(f), int32(s), int64(q).\n.input l.\n\
               t(f, s, n) <- agg<<n = sum(q)>> l(f, s, q).\n.output t.\n";
    let with = |df: u64, ds: u64| {
        let p = on_devices_with(src, 4, &rows_of(&[("l", 1_000_000, &[df, ds, 1000])]));
        let l = p.ra.relations.iter().position(|r| r.name == "l").unwrap();
        let agg = first(&p, |op| matches!(op, Op::Aggregate { .. }));
        (
            p.rel_partitioning[l].clone(),
            agg.partial.is_some(),
            agg.moves.is_empty(),
        )
    };
    // 3 × 2 keys over 4 devices: split, partial rows move.
    assert_eq!(with(3, 2), (Partitioning::Split { parts: 4 }, true, true));
    // 1,000 × 2 keys: hashed on the groups, nothing moves.
    let (p, partial, unmoved) = with(1000, 2);
    assert!(matches!(p, Partitioning::Hash { .. }), "{p:?}");
    assert!(!partial && unmoved);
}
