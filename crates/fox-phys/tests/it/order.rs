use fox_phys::{AggAlgorithm, Algorithm, Order, Statistics};
use fox_ra::{Op, SortKey};

use crate::common::*;

const PATH2: &str = "p(x, z) <- e(x, y), e(y, z).\n.output p.\n";

#[test]
fn before_and_after() {
    let src = format!("{EDGE}{PATH2}");
    insta::assert_snapshot!(before_after(&src, "order", &Statistics::none()));
}

#[test]
fn a_join_is_sorted_on_its_left_keys_and_a_unique_on_all_columns() {
    let src = format!("{EDGE}{PATH2}");
    let p = phys_after(&src, Some("order"), &Statistics::none());
    let j = find(&p, |op| matches!(op, Op::Join { .. }))[0];
    let o = &p.node(j).order.as_ref().unwrap().provides;
    // e(x, y) ⋈ e(y, z) on y: the output [x, z] keeps no left key column first.
    assert!(!o.unique, "{o:?}");
    let u = find(&p, |op| matches!(op, Op::Unique(_)))[0];
    assert_eq!(
        p.node(u).order.as_ref().unwrap().provides,
        Order {
            sorted: vec![SortKey::asc(0), SortKey::asc(1)],
            ranked: false,
            unique: true
        }
    );
}

#[test]
fn join_keys_are_compared_in_the_order_a_side_is_sorted_on() {
    // `g` is sorted on (b, a) by its aggregation's keys; the join lists a first.
    let src = "e(x, y) -> int32(x), int32(y).\n.input e.\n\
               g[b, a] = n <- agg<<n = count()>> e(a, b).\n\
               p(a, b, n) <- e(a, b), g[b, a] = n.\n.output p.\n";
    let p = phys_after(src, Some("order"), &Statistics::none());
    for j in find(&p, |op| matches!(op, Op::Join { .. })) {
        let k = &p.node(j).order.as_ref().unwrap().key_order;
        assert_eq!(k.len(), 2);
        let mut sorted = k.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [0, 1]);
    }
}

#[test]
fn a_fused_aggregation_over_rows_sorted_on_its_keys_sorts_and_reduces() {
    // The keyed input is unique; its unique step sorts it on (i, a), the group key first.
    let src =
        "sale(i, a) -> int32(i), int32(a).\n.input sale.\nt[i] = n <- agg<<n = sum(a)>> sale(i, a).\n.output t.\n";
    let fused = phys_after(src, Some("fusion"), &Statistics::none());
    let agg = find(&fused, |op| matches!(op, Op::Aggregate { .. }))[0];
    assert_eq!(fused.node(agg).algorithm, Algorithm::Aggregate(AggAlgorithm::Fused));
    let p = phys_after(src, Some("order"), &Statistics::none());
    assert_eq!(p.node(agg).algorithm, Algorithm::Aggregate(AggAlgorithm::SortReduce));
    // A filter deferred into it keeps it fused.
    let src = "sale(i, a) -> int32(i), int32(a).\n.input sale.\nt[i] = n <- agg<<n = sum(a)>> sale(i, a), a > 3.\n.output t.\n";
    let p = phys_after(src, Some("order"), &Statistics::none());
    let agg = find(&p, |op| matches!(op, Op::Aggregate { .. }))[0];
    assert_eq!(p.node(agg).algorithm, Algorithm::Aggregate(AggAlgorithm::Fused));
}

#[test]
fn an_order_by_on_strings_is_sorted_by_value() {
    let src = "c(n, s) -> string(n), int32(s).\n.input c.\n.output c order by n limit 5.\n";
    let p = phys_after(src, Some("order"), &Statistics::none());
    let s = find(&p, |op| matches!(op, Op::Limit { .. }));
    assert!(!s.is_empty());
    assert!(p.node(s[0]).order.as_ref().unwrap().provides.ranked);
}

#[test]
fn disabled_no_order_is_known() {
    let src = format!("{EDGE}{PATH2}");
    let opts = fox_phys::Options {
        disabled: vec!["order".into()],
        stop_after: None,
        join: fox_phys::JoinChoice::Auto,
        devices: 1,
    };
    let p = fox_phys::run(ra(&src), &Statistics::none(), &opts).unwrap();
    assert!(p.nodes.iter().all(|n| n.order.is_none()));
}

#[test]
fn an_inequality_join_keeps_its_probing_sides_order() {
    // `u` is stored sorted on all its columns; the overlap join probes it as it is.
    let src = "iv(x, s, e) -> int(x), int(s), int(e).\n.input iv.\nu(x, s, e) <- iv(x, s, e).\n\
               ov(x, y) <- u(x, s1, e1), u(y, s2, e2), s1 < e2, s2 < e1.\n.output ov.\n";
    let p = phys_after(src, Some("order"), &Statistics::none());
    let j = find(&p, |op| matches!(op, Op::Join { .. }))[0];
    let Algorithm::Band(b) = &p.node(j).algorithm else {
        panic!("not an inequality join: {:?}", p.node(j).algorithm);
    };
    assert!(b.inner.is_some(), "{b:?}");
    let probing_first = match b.sorted {
        fox_ra::Side::Right => 0,
        fox_ra::Side::Left => 3,
    };
    let o = &p.node(j).order.as_ref().unwrap().provides;
    assert_eq!(o.sorted.first(), Some(&SortKey::asc(probing_first)), "{o:?}");
    // Each pair once: both sides are unique and the tree's blocks of a row are disjoint.
    assert!(o.unique, "{o:?}");
}

/// An input whose rows the statistics saw ascending on all their columns together is
/// sorted on all of them in their order (though neither column ascends alone), and
/// unique where they strictly ascend.
#[test]
fn a_scan_of_rows_sorted_together_is_sorted_on_all_columns_and_unique_when_strict() {
    use fox_phys::{ColumnStats, RelationStats};
    let src = format!("{EDGE}{PATH2}");
    for (sorted, distinct) in [(true, true), (true, false), (false, false)] {
        let col = || {
            Some(ColumnStats {
                distinct: 10,
                min: None,
                max: None,
                sorted: false,
            })
        };
        let mut stats = Statistics::none();
        stats.insert(
            "e",
            RelationStats {
                rows: 100,
                columns: vec![col(), col()],
                rows_sorted: sorted,
                rows_distinct: distinct,
            },
        );
        let p = phys_after(&src, Some("order"), &stats);
        let scan = find(&p, |op| matches!(op, Op::Scan(_)))[0];
        let o = &p.node(scan).order.as_ref().unwrap().provides;
        let want = if sorted {
            vec![SortKey::asc(0), SortKey::asc(1)]
        } else {
            Vec::new()
        };
        assert_eq!(
            (&o.sorted, o.unique),
            (&want, distinct),
            "sorted {sorted}, distinct {distinct}"
        );
    }
}
