//! What a multi-way join's rounds make room for under a memory limit: windows capped at
//! a few outputs (`RunOptions::window_rows`) that fit beside everything else move nothing
//! to the host tier and give back no resident column, though all the rows left would not
//! fit; a limit that leaves no room for a capped window still moves what it must.

use crate::common::{engine_plan, write_inputs, EngineOptions, TempDir};
use fox_sema::core::Value;
use fox_tests::gen::Rng;
use fox_tests::Inputs;

const CLIQUE4: &str = "e(x, y) -> int32(x), int32(y).\n.input e.\n\
    c(x, y, z, w) <- e(x, y), e(x, z), e(x, w), e(y, z), e(y, w), e(z, w), x < y < z < w.\n\
    n[] = k <- agg<<k = count()>> c(_, _, _, _).\n.output n.\n";

/// A dense random graph, both directions of each edge.
fn graph(seed: u64, vertices: usize, edges: usize) -> Inputs {
    let mut rng = Rng::new(seed);
    let mut rows = Vec::new();
    for _ in 0..edges {
        let (a, b) = (rng.below(vertices) as i32, rng.below(vertices) as i32);
        rows.push(vec![Value::Int32(a), Value::Int32(b)]);
        rows.push(vec![Value::Int32(b), Value::Int32(a)]);
    }
    let mut inputs = Inputs::new();
    inputs.insert("e".to_string(), rows);
    inputs
}

/// The count, the windows and the host tier's statistics of a run under `limit` with
/// windows of at most `cap` outputs.
fn run(dir: &std::path::Path, limit: Option<u64>, cap: Option<u64>) -> (String, fox_runtime::RunStats) {
    let prog = fox_tests::compile(CLIQUE4).unwrap();
    let opts = EngineOptions {
        memory_limit: limit,
        window_rows: cap,
        ..Default::default()
    };
    let kp = engine_plan(&prog, &opts).unwrap();
    let mut backend = fox_cpu::CpuBackend::new();
    let ropts = fox_runtime::RunOptions {
        data_dir: Some(dir.to_path_buf()),
        memory_limit: limit,
        window_rows: cap,
        ..Default::default()
    };
    let r = fox_runtime::run(&kp, &mut backend, &ropts).unwrap_or_else(|e| panic!("limit {limit:?}, cap {cap:?}: {e}"));
    (format!("{:?}", r.outputs[0].rows()), r.stats)
}

#[test]
fn capped_windows_that_fit_move_nothing_to_the_host_tier() {
    let prog = fox_tests::compile(CLIQUE4).unwrap();
    let dir = TempDir::new("round-room");
    write_inputs(&dir.0, &prog, &graph(7, 160, 5000)).unwrap();
    let (whole, one) = run(&dir.0, None, None);
    // A third of the unlimited run's peak.
    let limit = one.peak_bytes as u64 / 3;
    assert!(!whole.contains("[]"), "the graph has 4-cliques: {whole}");
    // Unlimited, every expansion is one window; under a third of its peak with windows
    // of 256 outputs the rounds are many, and the rows all rounds expand to (more than
    // the limit holds) never need room: a capped window fits beside the rest.
    let (count, st) = run(&dir.0, Some(limit), Some(256));
    assert_eq!(count, whole);
    assert!(
        st.rounds > one.rounds + 8,
        "{} windows capped, {} unlimited",
        st.rounds,
        one.rounds
    );
    assert_eq!(
        (st.tier.evictions, st.tier.restores, st.tier.resident_released),
        (0, 0, 0),
        "capped windows that fit moved buffers to the host tier"
    );
    // Uncapped under the same limit, the windows are sized by memory alone: the join's
    // rounds need more than the limit holds and the answer is the same.
    let (count, st) = run(&dir.0, Some(limit), None);
    assert_eq!(count, whole);
    assert!(st.rounds > one.rounds, "{} windows under {limit} bytes", st.rounds);
}
