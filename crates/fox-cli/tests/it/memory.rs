//! Liveness-based freeing keeps peak memory at the largest live set: on multi-join
//! programs the actual high-water mark is below the sum of every buffer allocated, and
//! in a fixpoint loop far below it.

use fox_cli::{check, Source};
use std::path::Path;

fn run_on_graph(query: &str, edges: &[(i32, i32)]) -> fox_runtime::RunResult {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let source = Source::read(&root.join("queries").join(query)).unwrap();
    let core = check(&source).core.expect("the query checks");
    let plan = fox_kernel::lower(&fox_ra::plan(&core).unwrap()).unwrap();
    let dir = std::env::temp_dir().join(format!("fox-memory-{}-{query}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv: String = edges.iter().map(|(a, b)| format!("{a},{b}\n")).collect();
    std::fs::write(dir.join("edge.csv"), csv).unwrap();
    let mut backend = fox_cpu::CpuBackend::new();
    let opts = fox_runtime::RunOptions {
        data_dir: Some(dir.clone()),
        timing: false,
        ..Default::default()
    };
    let result = fox_runtime::run(&plan, &mut backend, &opts).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    result
}

/// Both directions of every edge of the complete graph K_n.
fn complete(n: i32) -> Vec<(i32, i32)> {
    (0..n)
        .flat_map(|a| (0..n).filter(move |&b| b != a).map(move |b| (a, b)))
        .collect()
}

#[test]
fn peak_is_below_the_sum_of_all_buffers_on_multi_joins() {
    for (query, expected_rows) in [("clique4.logic", 1820), ("triangle.logic", 560)] {
        // K_16: C(16,4) = 1820 four-cliques, C(16,3) = 560 triangles.
        let r = run_on_graph(query, &complete(16));
        assert_eq!(r.outputs[0].rows().len(), expected_rows, "{query}");
        let s = &r.stats;
        assert!(s.peak_bytes > 0);
        assert!(
            s.peak_bytes < s.total_allocated_bytes,
            "{query}: peak {} bytes is not below the {} bytes allocated in all",
            s.peak_bytes,
            s.total_allocated_bytes
        );
        assert!(
            s.actual_peak_buffers <= s.planned_peak_buffers,
            "{query}: {} buffers live at once, the plan promised at most {}",
            s.actual_peak_buffers,
            s.planned_peak_buffers
        );
    }
}

#[test]
fn recursion_frees_each_iteration() {
    // A path 0 → 1 → … → 199: 199 iterations, closure of 19,900 pairs.
    let edges: Vec<(i32, i32)> = (0..199).map(|i| (i, i + 1)).collect();
    let r = run_on_graph("transitive_closure.logic", &edges);
    assert_eq!(r.outputs[0].rows().len(), 199 * 200 / 2);
    let s = &r.stats;
    // Every iteration allocates new buffers; without frees the total would be the peak
    // (the peak is the last merge: the closure twice).
    assert!(
        s.peak_bytes * 5 < s.total_allocated_bytes,
        "peak {} bytes against {} allocated",
        s.peak_bytes,
        s.total_allocated_bytes
    );
}
