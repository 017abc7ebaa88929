//! Joins whose rows only a duplicate removal reads, written in rounds: each round's rows
//! deduplicated, the rounds' sorted runs merged with repeats dropped. With the windows
//! capped at a few pairs (`RunOptions::window_rows`) small inputs take many rounds; the
//! outputs are row for row those of one round and the reference evaluator's: same
//! generation and transitive closure on small graphs, rounds whose pairs a select drops
//! entirely, pairs that are all one row, and repeats across rounds.

use crate::common::{differential_opts, engine_plan, run_engine_opts, write_inputs, EngineOptions, Table, TempDir};
use fox_kernel::{Instr, Kernel};
use fox_sema::core::Value;
use fox_tests::gen::Rng;
use fox_tests::Inputs;

const EDGE: &str = "e(x, y) -> int32(x), int32(y).\n.input e.\n";

const SG: &str = "sg(x, y) <- e(p, x), e(p, y), x != y.\nsg(x, y) <- e(a, x), sg(a, b), e(b, y).\n.output sg.\n";

const SG_COUNT: &str = "sg(x, y) <- e(p, x), e(p, y), x != y.\nsg(x, y) <- e(a, x), sg(a, b), e(b, y).\nn(c) <- agg<<c = count()>> sg(_, _).\n.output n.\n";

const TC: &str = "path(x, y) <- e(x, y).\npath(x, z) <- path(x, y), e(y, z).\n.output path.\n";

/// Two-step paths: one join, read through a projection by the unique of `p`.
const TWO_STEPS: &str = "p(x, z) <- e(x, y), e(y, z).\n.output p.\n";

/// Whether some two-step path exists: an output without columns.
const ANY_TWO_STEPS: &str = "q() <- e(x, y), e(y, z).\n.output q.\n";

fn capped(cap: Option<u64>) -> EngineOptions {
    EngineOptions {
        window_rows: cap,
        ..Default::default()
    }
}

fn edges(pairs: &[(i32, i32)]) -> Inputs {
    let mut inputs = Inputs::new();
    inputs.insert(
        "e".to_string(),
        pairs
            .iter()
            .map(|&(x, y)| vec![Value::Int32(x), Value::Int32(y)])
            .collect(),
    );
    inputs
}

fn random_graph(rng: &mut Rng, n: usize, vertices: usize) -> Vec<(i32, i32)> {
    (0..n)
        .map(|_| (rng.below(vertices) as i32, rng.below(vertices) as i32))
        .collect()
}

/// The engine's outputs of `rules` over `inputs` with windows of at most `cap` pairs, and
/// the windows it took.
fn run(rules: &str, inputs: &Inputs, cap: Option<u64>) -> (Vec<Table>, u64) {
    let prog = fox_tests::compile(&format!("{EDGE}{rules}")).unwrap();
    let dir = TempDir::new("unique-rounds");
    write_inputs(&dir.0, &prog, inputs).unwrap();
    run_engine_opts(&prog, &dir.0, &capped(cap)).unwrap()
}

fn same_tables(a: &[Table], b: &[Table]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.name == y.name && x.columns == y.columns && x.rows == y.rows)
}

/// The named graphs: empty, one edge, self loops (pairs a select drops), a star (every
/// pair of children), a fan whose two-step paths are all one pair, a chain, and random
/// graphs with repeated edges.
fn graphs() -> Vec<(String, Vec<(i32, i32)>)> {
    let mut rng = Rng::new(22);
    let mut out = vec![
        ("empty".to_string(), vec![]),
        ("one edge".to_string(), vec![(1, 2)]),
        ("self loops".to_string(), vec![(1, 1), (2, 2), (3, 3), (1, 2)]),
        ("star".to_string(), (1..8).map(|c| (0, c)).collect()),
        (
            "fan of one two-step path".to_string(),
            (10..20).flat_map(|k| [(1, k), (k, 2)]).collect(),
        ),
        ("chain".to_string(), (0..12).map(|i| (i, i + 1)).collect()),
    ];
    for (n, v) in [(10, 6), (25, 8), (40, 12), (60, 10)] {
        out.push((format!("random {n} edges over {v}"), random_graph(&mut rng, n, v)));
    }
    out
}

#[test]
fn the_plan_writes_joins_read_by_a_unique_in_rounds_merging_their_runs() {
    let prog = fox_tests::compile(&format!("{EDGE}{SG}")).unwrap();
    let plan = engine_plan(&prog, &EngineOptions::default()).unwrap();
    let launches: Vec<&Kernel> = plan
        .blocks
        .iter()
        .flat_map(|b| &b.instrs)
        .filter_map(|i| match i {
            Instr::Launch { kernel, .. } => Some(kernel),
            _ => None,
        })
        .collect();
    // Each of the two joins: its first window and the next.
    let windows = launches.iter().filter(|k| matches!(k, Kernel::Window { .. })).count();
    assert_eq!(windows, 4, "{launches:?}");
    assert!(
        launches.iter().any(|k| matches!(
            k,
            Kernel::MergeUnion {
                width: 2,
                disjoint: false
            }
        )),
        "{launches:?}"
    );
}

#[test]
fn same_generation_and_transitive_closure_in_rounds_match_one_round_and_the_reference() {
    let mut failures = Vec::new();
    for (what, g) in graphs() {
        let data = edges(&g);
        for rules in [SG, SG_COUNT, TC, TWO_STEPS, ANY_TWO_STEPS] {
            let (whole, one) = run(rules, &data, None);
            for cap in [None, Some(1), Some(2), Some(3), Some(5), Some(16)] {
                let src = format!("{EDGE}{rules}");
                if let Err(e) = differential_opts(&src, &data, &capped(cap)) {
                    failures.push(format!("{what}, {rules}, cap {cap:?}:\n{e}"));
                    continue;
                }
                let (cut, rounds) = run(rules, &data, cap);
                if !same_tables(&whole, &cut) {
                    failures.push(format!("{what}, {rules}, cap {cap:?}: differs from one round"));
                }
                // Graphs of many edges have joins of many pairs: a cap of 1 makes more
                // rounds of them.
                let many = g.len() >= 10 && rules != ANY_TWO_STEPS;
                if rounds < one || (cap == Some(1) && many && rounds <= one) {
                    failures.push(format!(
                        "{what}, {rules}: {rounds} windows with a cap of {cap:?}, {one} without"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n==========\n"));
}

#[test]
fn a_window_holds_at_most_the_cap_of_pairs() {
    // 6 × 7 two-step paths through one vertex, 42 pairs, all distinct.
    let g: Vec<(i32, i32)> = (0..6).map(|i| (i, 100)).chain((0..7).map(|j| (100, 200 + j))).collect();
    let data = edges(&g);
    let (whole, rounds) = run(TWO_STEPS, &data, None);
    assert_eq!(rounds, 1, "one window without a cap");
    assert_eq!(whole[0].rows.len(), 42);
    for cap in [1u64, 4, 5, 41, 42, 43] {
        let (cut, rounds) = run(TWO_STEPS, &data, Some(cap));
        assert_eq!(rounds, 42u64.div_ceil(cap), "cap {cap}");
        assert!(same_tables(&whole, &cut), "cap {cap}");
    }
    // A cap of 0 is read as 1.
    assert_eq!(run(TWO_STEPS, &data, Some(0)).1, 42);
}

#[test]
fn pairs_all_one_row_and_repeated_across_rounds_give_it_once() {
    // Ten two-step paths from 1 to 2, one per middle vertex.
    let g: Vec<(i32, i32)> = (10..20).flat_map(|k| [(1, k), (k, 2)]).collect();
    let data = edges(&g);
    for cap in [None, Some(1), Some(3), Some(10)] {
        let (t, rounds) = run(TWO_STEPS, &data, cap);
        assert_eq!(t[0].rows, vec![vec![Value::Int32(1), Value::Int32(2)]], "cap {cap:?}");
        assert_eq!(rounds, cap.map_or(1, |c| 10u64.div_ceil(c)), "cap {cap:?}");
        let (t, _) = run(ANY_TWO_STEPS, &data, cap);
        assert_eq!(t[0].rows.len(), 1, "cap {cap:?}");
    }
}
