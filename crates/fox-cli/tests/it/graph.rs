//! `foxrun --graph SPEC`: the generated graphs through the clique queries, against counts
//! made here with plain adjacency sets.

use crate::common::repo;
use fox_runtime::graph::{generate, GraphSpec};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

/// The single value `foxrun` prints for a counting query (or 0 for "0 rows").
fn foxrun_count(query: &str, spec: &str) -> u64 {
    foxrun_count_with(query, &["--graph", spec])
}

/// [`foxrun_count`] with the data options `args`.
pub(crate) fn foxrun_count_with(query: &str, args: &[&str]) -> u64 {
    static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("fox-graph-{}-{n}", std::process::id()));
    let out = ["--out".to_string(), dir.display().to_string()];
    let args: Vec<&str> = args.iter().copied().chain(out.iter().map(String::as_str)).collect();
    foxrun_cpu(query, &args);
    let name = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
    let text = std::fs::read_to_string(&name).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    text.lines().nth(1).map_or(0, |l| l.trim().parse().unwrap())
}

/// Triangles and 4-cliques counted with adjacency sets (each clique once).
pub(crate) fn cliques(spec: &str) -> (u64, u64) {
    let (x, y) = generate(&GraphSpec::parse(spec).unwrap(), &|_| {}).unwrap();
    cliques_of(&x.into_iter().zip(y).collect::<Vec<_>>())
}

/// Triangles and 4-cliques of the undirected graph of `edges` (any direction, self-loops
/// and duplicates allowed), counted with adjacency sets.
fn cliques_of(edges: &[(i64, i64)]) -> (u64, u64) {
    let n = edges.iter().map(|&(a, b)| a.max(b)).max().map_or(0, |m| m as usize + 1);
    let mut adj: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
    for &(a, b) in edges {
        if a != b {
            adj[a as usize].insert(b as usize);
            adj[b as usize].insert(a as usize);
        }
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
    // Vertices renumbered by degree: the same counts, and the edges are the same graph.
    for spec in ["gnm:60:600:3", "rmat:8:8:2", "gnm:40:0:1"] {
        let (t, k4) = cliques(spec);
        let args = ["--graph", spec, "--degree-order"];
        assert_eq!(
            foxrun_count_with("queries/triangle_count.logic", &args),
            t,
            "triangles of {spec}, by degree"
        );
        assert_eq!(
            foxrun_count_with("queries/clique4_count.logic", &args),
            k4,
            "4-cliques of {spec}, by degree"
        );
        let g = GraphSpec::parse(spec).unwrap().with_degree_order(true);
        let (x, y) = generate(&g, &|_| {}).unwrap();
        let edges: Vec<(i64, i64)> = x.into_iter().zip(y).collect();
        assert_eq!(cliques_of(&edges), (t, k4), "{spec} renumbered");
        let n = edges.iter().map(|e| e.0.max(e.1) + 1).max().unwrap_or(0) as usize;
        let mut degree = vec![0usize; n];
        for &(a, _) in &edges {
            degree[a as usize] += 1;
        }
        let used: Vec<usize> = degree.into_iter().filter(|&d| d > 0).collect();
        assert!(
            used.windows(2).all(|w| w[0] <= w[1]),
            "{spec}: labels in order of degree"
        );
    }
    // Another variable order of the multi-way join: the same counts.
    let (t, k4) = cliques("rmat:8:8:2");
    for order in ["z,y,x", "y,x", "w,z,y,x", "z,x"] {
        let args = ["--graph", "rmat:8:8:2", "--var-order", order];
        if !order.contains('w') {
            assert_eq!(
                foxrun_count_with("queries/triangle_count.logic", &args),
                t,
                "triangles, --var-order {order}"
            );
        }
        assert_eq!(
            foxrun_count_with("queries/clique4_count.logic", &args),
            k4,
            "4-cliques, --var-order {order}"
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
    let out = run(&[
        "queries/triangle_count.logic",
        "--graph",
        "gnm:5:10:1",
        "--var-order",
        "x,q",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--var-order names `q`, which no multi-way join binds (they bind x, y, z)"),
        "{err}"
    );
    // A memory limit that is no size is a command-line error.
    for bad in ["abc", "12Q", "0", "1e3", ""] {
        let out = run(&[
            "queries/triangle_count.logic",
            "--graph",
            "gnm:5:10:1",
            "--memory-limit",
            bad,
        ]);
        assert_eq!(out.status.code(), Some(2), "--memory-limit {bad:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("is not a memory size"), "--memory-limit {bad:?}: {err}");
    }
    for good in ["512K", "1.5G", "64MiB", "100000"] {
        let out = run(&[
            "queries/triangle_count.logic",
            "--graph",
            "gnm:5:10:1",
            "--memory-limit",
            good,
        ]);
        assert!(
            out.status.success(),
            "--memory-limit {good}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A graph larger than the host memory the machine has is refused before it is built,
/// with the graph, the bytes it needs and the bytes available (a reserve larger than any
/// machine stands here for a graph too large for this one), exit 1. Steps under 64 MiB
/// are not checked, as other requests are not.
#[test]
fn a_graph_too_large_for_the_host_memory_is_an_error() {
    if !std::path::Path::new("/proc/meminfo").exists() {
        return;
    }
    for (spec, want) in [
        (
            "rmat:20",
            "foxrun: error: the graph rmat:20:16:1 needs 132.0 MiB of host memory to draw its 16777216 edges (8 bytes each) \
             and label its 1048576 vertices, but the machine has 0 bytes available (less the reserve kept free)",
        ),
        (
            "gnm:100000:5000000:1",
            "foxrun: error: the graph gnm:100000:5000000:1 needs 76.3 MiB of host memory for its 5000000 edges in both directions",
        ),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
            .args(["queries/triangle_count.logic", "--graph", spec, "--backend", "cpu"])
            .env("FOX_HOST_RESERVE", "18000000000000000000")
            .current_dir(repo())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{spec}: {err}");
        assert!(err.contains(want), "{spec}: {err}");
    }
}

/// A random undirected graph as `(x, y)` pairs, each edge once in a random direction.
fn random_edges(n: u64, m: usize, seed: u64) -> Vec<(i64, i64)> {
    let mut s = seed;
    let mut next = move || {
        s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    (0..m).map(|_| ((next() % n) as i64, (next() % n) as i64)).collect()
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("fox-graph-file-{}-{name}", std::process::id()))
}

/// `--graph FILE`: a SNAP-style file (comments, tabs, commas, weights, CRLF, duplicates,
/// self-loops) holding both directions gives the generated-graph counts; a one-directional
/// list of the same graph with `--symmetrize` gives the same counts.
#[test]
fn edge_list_files_with_and_without_symmetrize() {
    let edges = random_edges(40, 300, 7);
    let (t, k4) = cliques_of(&edges);
    assert!(t > 0 && k4 > 0, "{t} {k4}");
    // Both directions, in SNAP style, with noise the reader must skip or remove.
    let mut snap = String::from("# Undirected graph: test\n# Nodes: 40 Edges: 300\n# FromNodeId\tToNodeId\n");
    for (i, &(a, b)) in edges.iter().enumerate() {
        match i % 4 {
            0 => snap.push_str(&format!("{a}\t{b}\n{b}\t{a}\n")),
            1 => snap.push_str(&format!("{a} {b} 0.25\r\n{b},{a},7\n")),
            2 => snap.push_str(&format!("  {a}\t {b}\n\n{b} {a}\n{a} {b}\n")),
            _ => snap.push_str(&format!("% weighted\n{b}, {a}\n{a}  {b}\n{a} {a}\n")),
        }
    }
    let both = temp_path("snap.txt");
    std::fs::write(&both, &snap).unwrap();
    // One direction only (as drawn), with duplicates.
    let mut one = String::new();
    for &(a, b) in edges.iter().chain(&edges[..50]) {
        one.push_str(&format!("{a} {b}\n"));
    }
    let one_path = temp_path("one.tsv");
    std::fs::write(&one_path, &one).unwrap();
    let b = both.to_str().unwrap();
    let o = one_path.to_str().unwrap();
    for (query, want) in [("queries/triangle_count.logic", t), ("queries/clique4_count.logic", k4)] {
        assert_eq!(foxrun_count_with(query, &["--graph", b]), want, "{query} on {b}");
        assert_eq!(
            foxrun_count_with(query, &["--graph", b, "--symmetrize"]),
            want,
            "{query} on {b} --symmetrize"
        );
        assert_eq!(
            foxrun_count_with(query, &["--graph", o, "--symmetrize"]),
            want,
            "{query} on {o} --symmetrize"
        );
    }
    // Without --symmetrize a one-directional list is taken as given: only the edges
    // drawn with x < y can close a triangle x < y < z.
    let ascending: Vec<(i64, i64)> = edges.iter().copied().filter(|(a, b)| a < b).collect();
    let mut as_given = 0;
    let set: BTreeSet<(i64, i64)> = ascending.iter().copied().collect();
    for &(x, y) in &set {
        for &(y2, z) in set.range((y, i64::MIN)..) {
            if y2 != y {
                break;
            }
            as_given += u64::from(set.contains(&(x, z)));
        }
    }
    assert_eq!(
        foxrun_count_with("queries/triangle_count.logic", &["--graph", o]),
        as_given
    );
    assert!(as_given < t);
    std::fs::remove_file(&both).unwrap();
    std::fs::remove_file(&one_path).unwrap();
}

#[test]
fn bad_edge_list_lines_are_clear_errors() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_foxrun"))
            .args(args)
            .current_dir(repo())
            .output()
            .unwrap()
    };
    let bad = temp_path("bad.txt");
    std::fs::write(&bad, "# edges\n1 2\n2 3\n3 four\n").unwrap();
    let p = bad.to_str().unwrap();
    let o = run(&["queries/triangle_count.logic", "--graph", p, "--backend", "cpu"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("{p}:4: expected two integer vertex ids")) && err.contains("found `3 four`"),
        "{err}"
    );
    std::fs::write(&bad, "1 2\n2 4294967296\n").unwrap();
    let o = run(&[
        "queries/triangle_count.logic",
        "--graph",
        p,
        "--backend",
        "cpu",
        "--symmetrize",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("{p}:2: the vertex id 4294967296 does not fit in int32")),
        "{err}"
    );
    std::fs::remove_file(&bad).unwrap();
    // No such file: a bad command line.
    let o = run(&["queries/triangle_count.logic", "--graph", "no/such/edges.txt"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no file `no/such/edges.txt` exists"));
    // --symmetrize needs --graph.
    let o = run(&["queries/triangle_count.logic", "--symmetrize"]);
    assert_eq!(o.status.code(), Some(2));
}

/// `foxrun QUERY ARGS --backend cpu`, which must succeed.
fn foxrun_cpu(query: &str, args: &[&str]) -> std::process::Output {
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .arg(query)
        .args(args)
        .args(["--backend", "cpu"])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{query} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// `foxrun` on the CPU: standard output, and the `window` calls its `--timing` table shows.
fn foxrun_rounds(query: &str, args: &[&str]) -> (String, u64) {
    let args: Vec<&str> = args.iter().copied().chain(["--timing"]).collect();
    let o = foxrun_cpu(query, &args);
    let err = String::from_utf8_lossy(&o.stderr);
    let windows = err
        .lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("window")).then(|| w.next().unwrap().parse::<u64>().unwrap())
        })
        .unwrap_or(0);
    (String::from_utf8(o.stdout).unwrap(), windows)
}

#[test]
fn multi_round_expansion_gives_the_same_results() {
    let spec = "rmat:9:8:2";
    let (t, k4) = cliques(spec);
    for (query, limit, want) in [
        ("queries/clique4_count.logic", "300K", Some(k4)),
        ("queries/clique5_count.logic", "300K", None),
        ("queries/clique4.logic", "400K", None),
        ("queries/triangle.logic", "200K", None),
    ] {
        let (whole, w1) = foxrun_rounds(query, &["--graph", spec]);
        let (cut, w2) = foxrun_rounds(query, &["--graph", spec, "--memory-limit", limit]);
        assert_eq!(cut, whole, "{query}: the same output in rounds");
        // One window per round, and one more that finds no round left, per level.
        assert!(w2 > w1 + 2, "{query}: {w2} windows with the limit, {w1} without");
        if let Some(n) = want {
            assert!(whole.lines().any(|l| l.trim() == n.to_string()), "{query}: {whole}");
        }
    }
    assert!(t > 0 && k4 > 0);
    // A limit below what the run holds at once still makes progress, small windows at a
    // time, the buffers a step does not read waiting in the host tier.
    let (one, _) = foxrun_rounds(
        "queries/clique4_count.logic",
        &["--graph", "gnm:30:120:4", "--memory-limit", "4K"],
    );
    let (all, _) = foxrun_rounds("queries/clique4_count.logic", &["--graph", "gnm:30:120:4"]);
    assert_eq!(one, all);
}
