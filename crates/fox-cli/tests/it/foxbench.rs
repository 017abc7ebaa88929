//! `foxbench` as CI runs it: the kernel benchmarks on the CPU backend at a small size.

use std::process::{Command, Output};

fn foxbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_foxbench"))
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The rows of the CPU backend's table (it has no transfers to time).
const ROWS: [&str; 7] = ["copy", "sort_keys", "gather", "sort_pairs", "scan", "compact", "join"];

#[test]
fn kernels_on_the_cpu_print_every_row() {
    let json = std::env::temp_dir().join(format!("foxbench-{}.json", std::process::id()));
    let o = foxbench(&[
        "kernels",
        "--backend",
        "cpu",
        "--log2n",
        "12",
        "--join-log2n",
        "10",
        "--repeat",
        "2",
        "--json",
        json.to_str().unwrap(),
    ]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{}", text(&o.stderr));
    assert!(out.contains("copy ceiling"), "{out}");
    for row in ROWS {
        assert!(
            out.lines().any(|l| l.split_whitespace().next() == Some(row)),
            "no row {row} in:\n{out}"
        );
    }
    // The join reports its output size; 2^10 rows a side with keys in 0..2^10.
    assert!(out.contains("2 x 1024 rows in"), "{out}");
    // No upload or download rates for the CPU backend.
    assert!(
        !out.lines()
            .any(|l| l.starts_with("upload") || l.starts_with("download")),
        "{out}"
    );
    // Rates and sizes in units: bytes per second through the one formatter.
    let copy = out.lines().find(|l| l.starts_with("copy ")).unwrap();
    assert!(copy.contains("B/s"), "{copy}");
    let e = text(&o.stderr);
    assert!(e.contains("n = 2^12 (4096 keys, 16.4 KB of u32)"), "{e}");
    let j = std::fs::read_to_string(&json).unwrap();
    let _ = std::fs::remove_file(&json);
    for row in ROWS {
        assert!(
            j.contains(&format!("\"name\": \"{row}\"")),
            "no row {row} in the JSON:\n{j}"
        );
    }
}

#[test]
fn kernels_with_a_cub_reference_give_ratios() {
    let dir = std::env::temp_dir().join(format!("foxbench-cub-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cub = dir.join("cub.txt");
    std::fs::write(
        &cub,
        "cub sort_keys 4096 0.5\ncub sort_pairs 4096 0.6\ncub scan_u64 4096 0.01\n\
         cub select_flagged 4096 0.02\ncub memcpy_dtod 4096 0.001\n",
    )
    .unwrap();
    let o = foxbench(&[
        "kernels",
        "--backend",
        "cpu",
        "--log2n",
        "12",
        "--join-log2n",
        "8",
        "--repeat",
        "1",
        "--cub",
        cub.to_str().unwrap(),
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    let sort = out.lines().find(|l| l.starts_with("sort_keys")).unwrap();
    assert!(sort.contains("0.500") && sort.contains('%'), "{sort}");
}

#[test]
fn bad_cub_file_and_bad_sizes_fail() {
    let bad = std::env::temp_dir().join(format!("foxbench-badcub-{}.txt", std::process::id()));
    std::fs::write(&bad, "sort_keys 12\n").unwrap();
    let o = foxbench(&[
        "kernels",
        "--backend",
        "cpu",
        "--log2n",
        "6",
        "--cub",
        bad.to_str().unwrap(),
    ]);
    let _ = std::fs::remove_file(&bad);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("expected `cub <name> <n> <ms>`"),
        "{}",
        text(&o.stderr)
    );
    let o = foxbench(&["kernels", "--backend", "cpu", "--log2n", "40"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn help_explains() {
    let o = foxbench(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    let h = text(&o.stdout);
    assert!(h.contains("kernels"), "{h}");
    assert!(h.contains("Exit status"), "{h}");
    let o = foxbench(&["kernels", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    let h = text(&o.stdout);
    for flag in ["--backend", "--log2n", "--join-log2n", "--repeat", "--json", "--cub"] {
        assert!(h.contains(flag), "no {flag} in:\n{h}");
    }
}

#[test]
fn foxrun_timing_separates_transfers() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .args(["queries/even_odd.logic", "--timing", "--backend", "cpu"])
        .current_dir(root)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let e = text(&o.stderr);
    let line = e
        .lines()
        .find(|l| l.starts_with("load (parse) "))
        .unwrap_or_else(|| panic!("{e}"));
    for part in [
        "upload ",
        "compute ",
        "kernel compilation ",
        "download ",
        "output ",
        "other ",
    ] {
        assert!(line.contains(part), "no {part:?} in {line:?}");
    }
}

/// `foxbench clique` on the CPU: the CPU backend's LFTJ, the iterator CPU LFTJ and the
/// binary-join plan agree on K6's 20 triangles and 15 4-cliques.
#[test]
fn clique_benchmark_on_the_cpu() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for (k, want) in [("3", "20"), ("4", "15")] {
        let o = Command::new(env!("CARGO_BIN_EXE_foxbench"))
            .args([
                "clique",
                "--graph",
                "gnm:6:15:1",
                "--k",
                k,
                "--backend",
                "cpu",
                "--repeat",
                "1",
            ])
            .current_dir(&repo)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        let out = text(&o.stdout);
        let rows = clique_rows(&out);
        assert_eq!(rows.len(), 3, "{out}");
        for r in &rows {
            assert!(r.split_whitespace().any(|w| w == want), "{k}-cliques: {r}");
        }
        assert!(rows[1].starts_with("CPU LFTJ") && rows[1].contains(" threads"), "{out}");
        // build + join + other = timed (each rounded to 0.01 ms).
        for r in &rows {
            let w: Vec<&str> = r.split_whitespace().collect();
            let num = |back: usize| w[w.len() - back].parse::<f64>().unwrap_or_else(|_| panic!("{r}"));
            let (timed, parts) = (num(8), num(7) + num(6) + num(5));
            assert!((timed - parts).abs() <= 0.025, "{timed} vs {parts}: {r}");
            assert!(num(5) >= 0.0, "{r}");
        }
    }
}

fn clique_rows(out: &str) -> Vec<&str> {
    out.lines()
        .filter(|l| l.starts_with("LFTJ") || l.starts_with("CPU LFTJ") || l.starts_with("binary joins"))
        .collect()
}

/// `foxbench clique --graph FILE --symmetrize`: a one-directional edge list of K7 with a
/// duplicate and a self-loop; every system counts C(7,3) = 35 triangles.
#[test]
fn clique_benchmark_on_an_edge_list_file() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let file = std::env::temp_dir().join(format!("foxbench-k7-{}.txt", std::process::id()));
    let mut t = String::from("# K7, one direction\n3 3\n0 1\n");
    for a in 0..7 {
        for b in a + 1..7 {
            t.push_str(&format!("{b}\t{a}\n"));
        }
    }
    std::fs::write(&file, t).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_foxbench"))
        .args([
            "clique",
            "--graph",
            file.to_str().unwrap(),
            "--symmetrize",
            "--backend",
            "cpu",
            "--repeat",
            "1",
        ])
        .current_dir(&repo)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let rows = clique_rows(&out);
    assert_eq!(rows.len(), 3, "{out}");
    for r in &rows {
        assert!(r.split_whitespace().any(|w| w == "35"), "{r}");
    }
    assert!(out.contains("undirected edges (21)"), "{out}");
}

/// Without --backend, foxbench takes the GPU when one is usable and otherwise the CPU, and
/// says which; --backend gpu without a GPU is an error that points to --backend cpu.
#[test]
fn the_backend_defaults_to_auto_and_is_named() {
    let o = foxbench(&["kernels", "--log2n", "8", "--join-log2n", "6", "--repeat", "1"]);
    let e = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{e}");
    let notice = e.lines().next().unwrap_or("");
    let gpu = notice.starts_with("foxbench: running on the ");
    assert!(
        gpu || (notice.starts_with("foxbench: no usable GPU (") && notice.ends_with("); running on the CPU")),
        "{e}"
    );
    let out = text(&o.stdout);
    assert!(
        out.starts_with(if gpu {
            "foxbench kernels on "
        } else {
            "foxbench kernels on cpu"
        }),
        "{out}"
    );
    if !gpu {
        let o = foxbench(&["kernels", "--backend", "gpu", "--log2n", "8"]);
        assert_eq!(o.status.code(), Some(1));
        let e = text(&o.stderr);
        assert!(
            e.contains("no usable GPU for --backend gpu: ") && e.contains("use --backend cpu"),
            "{e}"
        );
    }
}

/// Standard error of a run that is not on a terminal has no progress: only foxbench's own
/// lines. --no-progress is accepted by every subcommand.
#[test]
fn no_progress_when_standard_error_is_not_a_terminal() {
    let o = foxbench(&[
        "kernels",
        "--backend",
        "cpu",
        "--log2n",
        "8",
        "--join-log2n",
        "6",
        "--repeat",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let e = text(&o.stderr);
    assert!(e.lines().all(|l| l.starts_with("foxbench: ")), "{e:?}");
    assert!(!e.contains('\r') && !e.contains('\x1b'), "{e:?}");
    let o = foxbench(&[
        "kernels",
        "--backend",
        "cpu",
        "--log2n",
        "8",
        "--join-log2n",
        "6",
        "--repeat",
        "1",
        "--no-progress",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = foxbench(&["clique", "--help"]);
    assert!(text(&o.stdout).contains("--no-progress"));
}

/// `foxbench tpch` on the CPU: each query's parts (prepare, upload, compute, download,
/// output, other) add up to its median (of an even number of hot runs: the mean of the
/// middle two); one row is "1 row".
#[test]
fn tpch_parts_add_up_to_the_median() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    {
        let repeat = "2";
        let o = Command::new(env!("CARGO_BIN_EXE_foxbench"))
            .args([
                "tpch",
                "--sf",
                "0.001",
                "--queries",
                "6,14",
                "--backend",
                "cpu",
                "--repeat",
                repeat,
            ])
            .current_dir(&repo)
            .output()
            .unwrap();
        let (out, e) = (text(&o.stdout), text(&o.stderr));
        assert_eq!(o.status.code(), Some(0), "{out}{e}");
        let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(
            header,
            [
                "query", "rows", "plan", "ms", "first", "ms", "median", "ms", "prepare", "upload", "compute",
                "download", "output", "other", "peak"
            ],
            "{out}"
        );
        let rows: Vec<Vec<&str>> = out
            .lines()
            .filter(|l| l.trim_start().starts_with('Q'))
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows.len(), 2, "{out}");
        for r in &rows {
            let num = |i: usize| r[i].parse::<f64>().unwrap_or_else(|_| panic!("{r:?}"));
            let parts: f64 = (5..=10).map(num).sum();
            // Six parts rounded to 0.01 ms against the rounded median.
            assert!(
                (parts - num(4)).abs() <= 0.035,
                "parts {parts} vs median {}: {r:?}",
                num(4)
            );
            // The peak in units.
            assert!(["B", "KB", "MB", "GB"].contains(&r[12]), "{r:?}");
        }
        assert!(
            e.lines()
                .any(|l| l.trim_start().starts_with("Q6 ") && l.ends_with(", 1 row")),
            "{e}"
        );
    }
}
