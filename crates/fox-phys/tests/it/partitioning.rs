use fox_phys::{Options, Partitioning, PhysPlan, Redistribute, Statistics};
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
    // `f`, derived, is hashed on both its columns: not placed by the groups.
    let src = "e(x, y) -> int32(x), int32(y).\n.input e.\nf(x, y) <- e(x, y), x != y.\n\
               n[] = c <- agg<<c = count()>> f(_, _).\n\
               d[x] = c <- agg<<c = count()>> f(x, _).\n.output n.\n.output d.\n";
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
    for (ty, partial) in [("int32", true), ("int64", true), ("decimal", true), ("float64", false)] {
        let src =
            format!("e(x, y) -> int32(x), {ty}(y).\n.input e.\nf(x, y) <- e(x, y), x != 0.\na[x] = v <- agg<<v = avg(y)>> f(x, y).\n.output a.\n.output f.\n");
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
