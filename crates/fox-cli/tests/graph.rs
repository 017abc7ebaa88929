//! `foxrun --graph SPEC`: the generated graphs through the clique queries, against counts
//! made here with plain adjacency sets.

use fox_runtime::graph::{generate, GraphSpec};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The single value `foxrun` prints for a counting query (or 0 for "0 rows").
fn foxrun_count(query: &str, spec: &str) -> u64 {
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .args([query, "--graph", spec, "--backend", "cpu", "--out"])
        .arg(std::env::temp_dir().join(format!("fox-graph-{}-{}", std::process::id(), spec.replace(':', "_"))))
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{query} {spec}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let dir = std::env::temp_dir().join(format!("fox-graph-{}-{}", std::process::id(), spec.replace(':', "_")));
    let name = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
    let text = std::fs::read_to_string(&name).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    text.lines().nth(1).map_or(0, |l| l.trim().parse().unwrap())
}

/// Triangles and 4-cliques counted with adjacency sets (each clique once).
fn cliques(spec: &str) -> (u64, u64) {
    let (x, y) = generate(&GraphSpec::parse(spec).unwrap(), &|_| {});
    let n = x.iter().chain(&y).copied().max().map_or(0, |m| m as usize + 1);
    let mut adj: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
    for (&a, &b) in x.iter().zip(&y) {
        adj[a as usize].insert(b as usize);
    }
    let (mut t, mut k4) = (0u64, 0u64);
    for a in 0..n {
        for &b in adj[a].range(a + 1..) {
            for &c in adj[b].range(b + 1..) {
                if !adj[a].contains(&c) {
                    continue;
                }
                t += 1;
                for &d in adj[c].range(c + 1..) {
                    if adj[a].contains(&d) && adj[b].contains(&d) {
                        k4 += 1;
                    }
                }
            }
        }
    }
    (t, k4)
}

#[test]
fn clique_counts_on_generated_graphs() {
    for spec in [
        "gnm:5:10:1",
        "gnm:6:15:1",
        "gnm:60:600:3",
        "rmat:8:8:2",
        "gnm:40:0:1",
        "gnm:30:20:9",
    ] {
        let (t, k4) = cliques(spec);
        assert_eq!(
            foxrun_count("queries/triangle_count.logic", spec),
            t,
            "triangles of {spec}"
        );
        assert_eq!(
            foxrun_count("queries/clique4_count.logic", spec),
            k4,
            "4-cliques of {spec}"
        );
    }
    // K5 and K6: C(5,3) triangles, C(6,4) 4-cliques.
    assert_eq!(cliques("gnm:5:10:1").0, 10);
    assert_eq!(cliques("gnm:6:15:1").1, 15);
}

#[test]
fn bad_graph_specs_and_relations_are_clear_errors() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_foxrun"))
            .args(args)
            .current_dir(repo())
            .output()
            .unwrap()
    };
    let o = run(&["queries/triangle_count.logic", "--graph", "rmat:99"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("scale must be 1 to 30"));
    let o = run(&["queries/triangle_count.logic", "--graph", "gnm:4:7:1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("at most 6 edges"));
    let o = run(&["tpch/queries/q06.logic", "--graph", "rmat:4", "--backend", "cpu"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("has only the relation `edge`"));
}
