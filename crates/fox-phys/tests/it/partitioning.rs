use fox_phys::{Partitioning, Statistics};

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
    assert!(p.nodes.iter().all(|n| n.partitioning == Partitioning::Single));
}
