use fox_phys::Statistics;
use fox_ra::{Op, Stmt};

use crate::common::*;

fn rounds(src: &str) -> Vec<Vec<bool>> {
    let p = phys_after(src, Some("rounds"), &Statistics::none());
    p.ra.blocks
        .iter()
        .flat_map(|b| &b.stmts)
        .filter_map(|s| match s {
            Stmt::Let {
                dst,
                op: Op::MultiJoin { .. },
                ..
            } => Some(p.node(*dst).rounds.windowed.clone()),
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
fn levels_from_the_third_variable_run_in_rounds() {
    let src = format!("{EDGE}t(x, y, z) <- e(x, y), e(y, z), e(x, z).\n.output t.\n");
    assert_eq!(rounds(&src), vec![vec![false, false, true]]);
}

#[test]
fn a_counted_last_level_is_never_expanded() {
    let src = format!("{EDGE}{CLIQUE4}");
    let r = rounds(&src);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0], [false, false, true, false]);
}
