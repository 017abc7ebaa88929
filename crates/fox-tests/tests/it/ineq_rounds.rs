//! Inequality joins probed in rounds of their probing rows, against the reference
//! evaluator: counts, sums, minima and kept pairs of `p1 < p2, q1 > q2` (and its
//! non-strict form), and interval-overlap self-joins, with the rounds capped at a few
//! probing rows (`LowerOptions::probe_rows`) so that small inputs take many rounds, round
//! boundaries falling inside the probing side and exactly at its end; and under a memory
//! limit small enough that each round's pairs are aggregated in rounds of their own.

use crate::common::{differential_opts, engine_plan, EngineOptions};
use fox_kernel::{Kernel, KernelPlan};
use fox_sema::core::Value;
use fox_tests::gen::Rng;
use fox_tests::Inputs;

const DECLS: &str = r#"a(x, p, q) -> int32(x), int64(p), int64(q).
b(y, p, q) -> int32(y), int64(p), int64(q).
.input a. .input b.
"#;

/// Rules over inequality joins only an aggregation reads (`a` probes each).
const AGGREGATED_RULES: &str = r#"n[] = c <- agg<<c = count()>> a(_, p1, q1), b(_, p2, q2), p1 < p2, q1 > q2.
s[] = t <- agg<<t = sum(q1 - q2 + x)>> a(x, p1, q1), b(_, p2, q2), p1 < p2, q1 > q2.
g[y] = c <- agg<<c = count()>> a(_, p1, q1), b(y, p2, q2), p1 <= p2, q1 >= q2.
h[y] = m <- agg<<m = min(x)>> a(x, p1, q1), b(y, p2, q2), p1 < p2, q1 > q2.
ovn[] = c <- agg<<c = count()>> a(_, s1, e1), a(_, s2, e2), s1 < e2, s2 < e1.
.output n. .output s. .output g. .output h. .output ovn.
"#;

/// Rules over inequality joins whose rows are kept.
const KEPT_RULES: &str = r#"kept(x, y, q2) <- a(x, p1, q1), b(y, p2, q2), p1 < p2, q1 > q2.
ov(x, y) <- a(x, s1, e1), a(y, s2, e2), s1 < e2, s2 < e1, x < y.
.output kept. .output ov.
"#;

fn source(kept: bool) -> String {
    format!("{DECLS}{AGGREGATED_RULES}{}", if kept { KEPT_RULES } else { "" })
}

/// The inequality joins of [`source`]`(true)`, and those of them only an aggregation reads.
const JOINS: usize = 7;
const AGGREGATED: usize = 5;

fn windows(plan: &KernelPlan) -> Vec<Option<u64>> {
    plan.blocks
        .iter()
        .flat_map(|b| &b.instrs)
        .filter_map(|i| match i {
            fox_kernel::Instr::Launch {
                kernel: Kernel::Window { max_rows, .. },
                ..
            } => Some(*max_rows),
            _ => None,
        })
        .collect()
}

fn ineq_ranges(plan: &KernelPlan) -> usize {
    plan.blocks
        .iter()
        .flat_map(|b| &b.instrs)
        .filter(|i| {
            matches!(
                i,
                fox_kernel::Instr::Launch {
                    kernel: Kernel::IneqRanges { .. },
                    ..
                }
            )
        })
        .count()
}

fn capped(cap: Option<u64>) -> EngineOptions {
    EngineOptions {
        lower: fox_kernel::LowerOptions {
            probe_rows: cap,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The `(p, q)` of a side's rows.
type Side = Vec<(i64, i64)>;

/// Rows `(x, p, q)` with `x` their index.
fn rows(pq: &[(i64, i64)]) -> Vec<Vec<Value>> {
    pq.iter()
        .enumerate()
        .map(|(i, &(p, q))| vec![Value::Int32(i as i32), Value::Int64(p), Value::Int64(q)])
        .collect()
}

fn random(rng: &mut Rng, n: usize, domain: u64) -> Side {
    (0..n)
        .map(|_| {
            let p = rng.below(domain as usize) as i64;
            (p, p + rng.below(domain as usize) as i64 - (domain / 4) as i64)
        })
        .collect()
}

/// The named cases: empty sides, one row, all-equal values, and random rows of a small
/// domain (ties) of sizes whose round boundaries fall inside and exactly at the end.
fn cases() -> Vec<(String, Side, Side)> {
    let mut rng = Rng::new(18);
    let mut out = vec![
        ("both empty".to_string(), vec![], vec![]),
        ("a empty".to_string(), vec![], vec![(1, 5), (2, 0)]),
        ("b empty".to_string(), vec![(1, 5), (2, 0)], vec![]),
        ("one row each, a pair".to_string(), vec![(1, 5)], vec![(2, 4)]),
        ("one row each, no pair".to_string(), vec![(2, 4)], vec![(1, 5)]),
        (
            "one row against several".to_string(),
            vec![(3, 3)],
            random(&mut rng, 7, 6),
        ),
        ("all equal".to_string(), vec![(4, 4); 6], vec![(4, 4); 8]),
    ];
    for (n, m) in [(4, 8), (8, 4), (5, 6), (12, 9), (16, 16)] {
        out.push((
            format!("random {n} by {m}"),
            random(&mut rng, n, 6),
            random(&mut rng, m, 6),
        ));
    }
    out
}

fn inputs(a: &[(i64, i64)], b: &[(i64, i64)]) -> Inputs {
    let mut inputs = Inputs::new();
    inputs.insert("a".to_string(), rows(a));
    inputs.insert("b".to_string(), rows(b));
    inputs
}

#[test]
fn the_plan_probes_every_inequality_join_in_rounds_of_the_cap() {
    let prog = fox_tests::compile(&source(true)).unwrap();
    let plan = engine_plan(&prog, &capped(Some(3))).unwrap();
    assert_eq!(ineq_ranges(&plan), JOINS);
    let w = windows(&plan);
    // Each join's first window and its next, per round; their pairs too, which only an
    // aggregation or the kept relation's duplicate removal reads.
    assert_eq!(w.iter().filter(|m| **m == Some(3)).count(), 2 * JOINS, "{w:?}");
    assert_eq!(w.iter().filter(|m| m.is_none()).count(), 2 * JOINS, "{w:?}");
    let plan = engine_plan(&prog, &capped(None)).unwrap();
    let w = windows(&plan);
    assert_eq!(
        w.iter().filter(|m| **m == Some(fox_kernel::MAX_PROBE_ROWS)).count(),
        2 * JOINS,
        "{w:?}"
    );
    // A cap of 0 is read as 1; one beyond the u32 addressing as the most it allows.
    let plan = engine_plan(&prog, &capped(Some(0))).unwrap();
    assert_eq!(windows(&plan).iter().filter(|m| **m == Some(1)).count(), 2 * JOINS);
    let plan = engine_plan(&prog, &capped(Some(u64::MAX))).unwrap();
    assert_eq!(
        windows(&plan)
            .iter()
            .filter(|m| **m == Some(fox_kernel::MAX_PROBE_ROWS))
            .count(),
        2 * JOINS
    );
}

#[test]
fn inequality_joins_in_rounds_of_probing_rows_match_the_reference() {
    let mut failures = Vec::new();
    for (what, a, b) in cases() {
        let data = inputs(&a, &b);
        for cap in [None, Some(1), Some(2), Some(3), Some(4), Some(8)] {
            match differential_opts(&source(true), &data, &capped(cap)) {
                Err(e) => failures.push(format!("{what}, cap {cap:?}:\n{e}")),
                Ok(rounds) => {
                    // At least one window per `cap` probing rows of every join (the
                    // probing side is `a` or `b`).
                    let least = a.len().min(b.len()) as u64;
                    if let Some(c) = cap.filter(|_| least > 0) {
                        let want = JOINS as u64 * least.div_ceil(c);
                        if rounds < want {
                            failures.push(format!("{what}, cap {c}: {rounds} windows, fewer than {want}"));
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n==========\n"));
}

#[test]
fn aggregated_inequality_joins_in_rounds_of_pairs_within_rounds_of_probing_rows() {
    // 300 rows a side over a wide domain: tens of thousands of pairs a join (kept pairs
    // must fit, so only aggregated ones). Under the limit a round probes some rows, and
    // its pairs are aggregated in rounds of their own.
    let mut rng = Rng::new(5);
    let (a, b) = (random(&mut rng, 300, 1_000), random(&mut rng, 300, 1_000));
    let data = inputs(&a, &b);
    let src = source(false);
    let whole = differential_opts(&src, &data, &capped(None)).unwrap();
    // Without a limit, one window of probing rows and one of pairs a join.
    assert_eq!(whole, 2 * AGGREGATED as u64);
    // Without the limit each join takes one window of pairs per window of probing rows:
    // the limit makes more of either.
    for (limit, cap) in [(96 << 10, None), (128 << 10, Some(7)), (256 << 10, Some(40))] {
        let opts = EngineOptions {
            memory_limit: Some(limit),
            ..capped(cap)
        };
        let rounds = differential_opts(&src, &data, &opts).unwrap_or_else(|e| panic!("{limit}, {cap:?}: {e}"));
        let free = 2 * AGGREGATED as u64 * cap.map_or(1, |c| 300u64.div_ceil(c));
        assert!(
            rounds > free,
            "{limit}, {cap:?}: {rounds} windows, {free} without the limit"
        );
    }
}
