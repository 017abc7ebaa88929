use fox_phys::{ColumnStats, RelationStats, Statistics};
use fox_ra::{Op, Stmt};

use crate::common::*;

fn stats_e(rows: u64, dx: u64, dy: u64) -> Statistics {
    let col = |distinct| ColumnStats {
        distinct,
        min: None,
        max: None,
        sorted: false,
    };
    let mut s = Statistics::none();
    s.insert(
        "e",
        RelationStats {
            rows,
            columns: vec![Some(col(dx)), Some(col(dy))],
            rows_sorted: false,
            rows_distinct: false,
        },
    );
    s
}

/// The estimated rows of the first operator of the kind `pick` accepts.
fn rows_of(src: &str, stats: &Statistics, pick: impl Fn(&Op) -> bool) -> f64 {
    let p = phys_after(src, Some("estimate"), stats);
    for b in &p.ra.blocks {
        for s in &b.stmts {
            if let Stmt::Let { dst, op, .. } = s {
                if pick(op) {
                    return p.node(*dst).est.as_ref().unwrap().rows;
                }
            }
        }
    }
    panic!("no such operator");
}

const PATH2: &str = "p(x, z) <- e(x, y), e(y, z).\n.output p.\n";

#[test]
fn before_and_after() {
    let src = format!("{EDGE}{PATH2}");
    insta::assert_snapshot!(before_after(&src, "estimate", &stats_e(1000, 100, 50)));
}

#[test]
fn without_statistics_inputs_take_the_default_rows() {
    let src = format!("{EDGE}{PATH2}");
    let r = rows_of(&src, &Statistics::none(), |op| matches!(op, Op::Scan(_)));
    assert_eq!(r, fox_phys::stats::DEFAULT_ROWS);
}

#[test]
fn a_join_divides_by_the_larger_distinct_count_of_its_keys() {
    let src = format!("{EDGE}{PATH2}");
    // e(x, y) ⋈ e(y, z) on y: the left's y has 50 values, the right's x 100.
    let r = rows_of(&src, &stats_e(1000, 100, 50), |op| matches!(op, Op::Join { .. }));
    assert_eq!(r, 1000.0 * 1000.0 / 100.0);
}

#[test]
fn an_equality_with_a_constant_keeps_one_value_in_distinct() {
    let src = format!("{EDGE}p(y) <- e(5, y).\n.output p.\n");
    let r = rows_of(&src, &stats_e(1000, 100, 50), |op| matches!(op, Op::Select { .. }));
    assert_eq!(r, 10.0);
}

#[test]
fn an_aggregation_has_a_row_per_group_value() {
    let src = format!("{EDGE}n[x] = c <- agg<<c = count()>> e(x, _).\n.output n.\n");
    let r = rows_of(&src, &stats_e(1000, 100, 50), |op| matches!(op, Op::Aggregate { .. }));
    assert_eq!(r, 100.0);
    // Never more groups than rows.
    let r = rows_of(&src, &stats_e(10, 100, 50), |op| matches!(op, Op::Aggregate { .. }));
    assert_eq!(r, 10.0);
}

#[test]
fn every_operator_of_a_recursive_program_is_estimated() {
    let src = format!("{EDGE}r(x, y) <- e(x, y).\nr(x, z) <- r(x, y), e(y, z).\n.output r.\n");
    let p = phys_after(&src, Some("estimate"), &stats_e(1000, 100, 50));
    for b in &p.ra.blocks {
        for s in &b.stmts {
            if let Stmt::Let { dst, .. } = s {
                let e = p
                    .node(*dst)
                    .est
                    .as_ref()
                    .unwrap_or_else(|| panic!("t{} has no estimate", dst.0));
                assert!(e.rows.is_finite() && e.rows >= 0.0, "t{}: {e:?}", dst.0);
            }
        }
    }
    // The loop reads what the rules before it stored: not an empty relation.
    let scans: Vec<f64> =
        p.ra.blocks
            .iter()
            .flat_map(|b| &b.stmts)
            .filter_map(|s| match s {
                Stmt::Let {
                    dst, op: Op::Scan(_), ..
                } => Some(p.node(*dst).est.as_ref().unwrap().rows),
                _ => None,
            })
            .collect();
    assert!(scans.iter().all(|&r| r > 0.0), "{scans:?}");
}
