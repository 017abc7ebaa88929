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

/// `foxbench ARGS…` from the repository's root (the query folders are named from it).
fn foxbench_at_root(args: &[&str]) -> Output {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    Command::new(env!("CARGO_BIN_EXE_foxbench"))
        .args(args)
        .current_dir(repo)
        .output()
        .unwrap()
}

/// `foxbench tpch --devices 2` on simulated CPU devices: each query runs on one device
/// and on two, with both tables printed and a third giving both medians, the speed-up
/// (the first over the second) and the same answers.
#[test]
fn tpch_on_one_device_and_on_two() {
    let o = foxbench_at_root(&[
        "tpch",
        "--sf",
        "0.001",
        "--queries",
        "1,6",
        "--backend",
        "cpu",
        "--repeat",
        "1",
        "--devices",
        "2",
    ]);
    let (out, e) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}{e}");
    assert!(e.contains(", on 1 device and on 2"), "{e}");
    assert!(
        e.lines()
            .any(|l| l.trim_start().starts_with("Q1 ") && l.contains(" ms median on 2 devices, ")),
        "{e}"
    );
    let (one, rest) = out.split_once("on 2 devices:\n").unwrap_or_else(|| panic!("{out}"));
    let medians = |table: &str| -> Vec<(String, f64)> {
        table
            .lines()
            .filter(|l| l.trim_start().starts_with('Q'))
            .map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                (w[0].to_string(), w[4].parse().unwrap())
            })
            .collect()
    };
    let (m1, m2) = (medians(one), medians(rest.split("\n\n").next().unwrap()));
    assert_eq!(m1.len(), 2, "{out}");
    assert_eq!(m2.len(), 2, "{out}");
    let header = rest.lines().find(|l| l.contains("speed-up")).unwrap();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["query", "1", "device", "ms", "2", "devices", "ms", "speed-up", "answers"]
    );
    let cmp: Vec<Vec<&str>> = rest
        .lines()
        .skip_while(|l| !l.contains("speed-up"))
        .filter(|l| l.trim_start().starts_with('Q'))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(cmp.len(), 2, "{out}");
    for (k, r) in cmp.iter().enumerate() {
        assert_eq!(r[0], m1[k].0, "{out}");
        let (t1, t2): (f64, f64) = (r[1].parse().unwrap(), r[2].parse().unwrap());
        // The medians of the tables above, and their ratio.
        assert!((t1 - m1[k].1).abs() < 0.006 && (t2 - m2[k].1).abs() < 0.006, "{out}");
        let speedup: f64 = r[3].trim_end_matches('x').parse().unwrap();
        assert!((speedup - t1 / t2).abs() <= 0.01 + 0.01 * speedup, "{r:?}");
        assert_eq!(r[4], "same", "{out}");
    }
    // Q1 (with its averages) has four groups on both.
    assert!(one
        .lines()
        .any(|l| l.trim_start().starts_with("Q1 ") && l.split_whitespace().nth(1) == Some("4")));
    assert!(rest
        .lines()
        .any(|l| l.trim_start().starts_with("Q1 ") && l.split_whitespace().nth(1) == Some("4")));
}

/// `--devices 3,2` runs over two and over three simulated devices, a column and a
/// speed-up each, the counts ascending, and a total row.
#[test]
fn tpch_on_several_device_counts() {
    let o = foxbench_at_root(&[
        "tpch",
        "--sf",
        "0.001",
        "--queries",
        "6",
        "--backend",
        "cpu",
        "--repeat",
        "1",
        "--devices",
        "3,2",
    ]);
    let (out, e) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}{e}");
    assert!(e.contains(", on 1 device and on 2 and on 3"), "{e}");
    let two = out.find("on 2 devices:\n").unwrap_or_else(|| panic!("{out}"));
    let three = out.find("on 3 devices:\n").unwrap_or_else(|| panic!("{out}"));
    assert!(two < three, "{out}");
    let head = out.lines().find(|l| l.contains("speed-up")).unwrap();
    assert_eq!(
        head.split_whitespace().collect::<Vec<_>>(),
        [
            "query", "1", "device", "ms", "2", "devices", "ms", "3", "devices", "ms", "speed-up", "2", "speed-up", "3",
            "answers"
        ]
    );
    let q6: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.contains("speed-up 2"))
        .find(|l| l.trim_start().starts_with("Q6"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!((q6.len(), q6[6]), (7, "same"), "{out}");
    assert!(out.lines().any(|l| l.trim_start().starts_with("total ")), "{out}");
}

/// Without --devices (or with `--devices all` on the CPU backend, which is one device)
/// there is no second run; a count of 0 is a command-line error.
#[test]
fn tpch_on_one_device_has_no_comparison() {
    for devices in [&[][..], &["--devices", "all"][..]] {
        let mut args = vec![
            "tpch",
            "--sf",
            "0.001",
            "--queries",
            "6",
            "--backend",
            "cpu",
            "--repeat",
            "1",
        ];
        args.extend(devices);
        let o = foxbench_at_root(&args);
        let out = text(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
        assert!(!out.contains("devices") && !out.contains("speed-up"), "{out}");
    }
    let o = foxbench_at_root(&["tpch", "--sf", "0.001", "--backend", "cpu", "--devices", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("at least 1 device"), "{}", text(&o.stderr));
}

/// `foxbench clique --devices 3,2` on simulated CPU devices: the LFTJ on one device, on
/// two and on three (each count over devices of its own) count the same triangles, a row
/// each in increasing order, and each speed-up is the ratio of the medians.
#[test]
fn clique_on_one_device_and_on_two_and_three() {
    let o = foxbench_at_root(&[
        "clique",
        "--graph",
        "rmat:6",
        "--backend",
        "cpu",
        "--repeat",
        "1",
        "--no-baselines",
        "--devices",
        "3,2",
    ]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    let rows = clique_rows(&out);
    assert_eq!(rows.len(), 3, "{out}");
    assert!(!rows[0].contains("devices"), "{out}");
    assert!(rows[1].contains("2 cpu devices (simulated)"), "{out}");
    assert!(rows[2].contains("3 cpu devices (simulated)"), "{out}");
    let field = |r: &str, back: usize| -> String {
        let w: Vec<&str> = r.split_whitespace().collect();
        w[w.len() - back].to_string()
    };
    let m1: f64 = field(rows[0], 9).parse().unwrap();
    for (row, n) in [(rows[1], 2), (rows[2], 3)] {
        // The count (before the median and six more columns) is the same.
        assert_eq!(field(rows[0], 10), field(row, 10), "{out}");
        let mn: f64 = field(row, 9).parse().unwrap();
        let head = format!("speed-up of the LFTJ on {n} devices: ");
        let line = out
            .lines()
            .find(|l| l.starts_with(&head))
            .unwrap_or_else(|| panic!("{out}"));
        assert!(line.ends_with("counts the same"), "{line}");
        let speedup: f64 = line[head.len()..].split('x').next().unwrap().parse().unwrap();
        assert!(
            (speedup - m1 / mn).abs() <= 0.01 + 0.01 * speedup,
            "{line} vs {m1} / {mn}"
        );
    }
}

/// `foxbench datalog --devices 2` on simulated CPU devices: transitive closure on one
/// device and on two derives the same tuples (count and hash), with the speed-up.
#[test]
fn datalog_on_one_device_and_on_two() {
    let o = foxbench_at_root(&[
        "datalog",
        "--program",
        "tc",
        "--graph",
        "rmat:6",
        "--backend",
        "cpu",
        "--devices",
        "2",
    ]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    let fox: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("Fox, ") && !l.contains(": "))
        .collect();
    assert_eq!(fox.len(), 2, "{out}");
    assert!(fox[1].starts_with("Fox, 2 devices, cpu backend"), "{out}");
    let answers: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("Fox, ") && l.contains(": path "))
        .map(|l| l.split_once(": ").unwrap().1)
        .collect();
    assert_eq!(answers.len(), 2, "{out}");
    assert_eq!(answers[0], answers[1], "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("speed-up of Fox on 2 devices: "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.ends_with("answers the same"), "{line}");
}

/// Every benchmark that runs plans documents --devices and the comparison it makes.
#[test]
fn devices_help_says_what_it_does() {
    for cmd in ["tpch", "clique", "datalog"] {
        let o = foxbench(&[cmd, "--help"]);
        assert_eq!(o.status.code(), Some(0));
        let h = text(&o.stdout);
        assert!(h.contains("--devices <N"), "{cmd}: {h}");
        assert!(h.contains("speed-up"), "{cmd}: {h}");
        assert!(h.contains("the run fails when"), "{cmd}: {h}");
    }
}

/// `foxbench clique` on the CPU backend for k-cliques of R-MAT 10 (degree-ordered),
/// optionally under `--memory-limit`: the LFTJ's row of the table and the statistics of
/// its run with per-kernel timing (`--profile`).
fn clique_within(k: &str, limit: Option<&str>) -> (String, String) {
    let profile = std::env::temp_dir().join(format!("foxbench-clique-{k}-{limit:?}-{}.txt", std::process::id()));
    let mut args = vec![
        "clique",
        "--graph",
        "rmat:10",
        "--degree-order",
        "--k",
        k,
        "--backend",
        "cpu",
        "--repeat",
        "1",
        "--no-baselines",
        "--profile",
        profile.to_str().unwrap(),
    ];
    args.extend(limit.iter().flat_map(|l| ["--memory-limit", *l]));
    let o = foxbench_at_root(&args);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    let row = clique_rows(&out).first().unwrap_or_else(|| panic!("{out}")).to_string();
    let stats = std::fs::read_to_string(&profile).unwrap_or_default();
    let _ = std::fs::remove_file(&profile);
    (row, stats)
}

/// A number of `stats` on the line starting with `line`: the word after `words`.
fn stat_after(stats: &str, line: &str, words: &str) -> u64 {
    let l = stats
        .lines()
        .find(|l| l.starts_with(line))
        .unwrap_or_else(|| panic!("no `{line}` line: {stats}"));
    l.split(words)
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number after `{words}`: {l}"))
}

/// Triangles and 4-cliques under budgets below the unlimited run's peak (the edge
/// columns alone take 170,608 bytes; the trie of the oriented edges about 60 KB): the
/// count of the unlimited run, in more rounds, the device peak within the limit, and the
/// edge columns, which the resident bound (the limit less the warm-up run's working set)
/// does not keep, read from the database in place. A budget below the
/// trie's level that every round searches is an out-of-memory error located at the
/// operator that reads it.
#[test]
fn cliques_under_a_memory_limit_keep_their_count_within_the_budget() {
    for (k, limits) in [("3", &["200K", "150K"][..]), ("4", &["150K"][..])] {
        let (whole, stats) = clique_within(k, None);
        let count = |row: &str| row.split_whitespace().rev().nth(9).unwrap().to_string();
        let rounds = stat_after(&stats, "rounds:", "rounds:");
        assert!(stat_after(&stats, "memory:", "device peak") > 200 << 10, "{stats}");
        for limit in limits {
            let (row, stats) = clique_within(k, Some(limit));
            assert_eq!(
                count(&row),
                count(&whole),
                "{k}-cliques under {limit}: {row} vs {whole}"
            );
            let bytes = limit.trim_end_matches('K').parse::<u64>().unwrap() << 10;
            let peak = stat_after(&stats, "memory:", "device peak");
            assert!(peak <= bytes, "{k}-cliques under {limit}: device peak {peak}\n{stats}");
            let more = stat_after(&stats, "rounds:", "rounds:");
            assert!(
                more > rounds.max(1),
                "{k}-cliques under {limit}: {more} rounds\n{stats}"
            );
            assert!(stats.contains("\nread from the database in place: "), "{stats}");
        }
    }
    let o = foxbench_at_root(&[
        "clique",
        "--graph",
        "rmat:10",
        "--degree-order",
        "--backend",
        "cpu",
        "--repeat",
        "1",
        "--no-baselines",
        "--memory-limit",
        "40K",
    ]);
    let out = text(&o.stdout);
    // The level of the trie every round searches (10,663 values) does not fit.
    assert!(
        out.contains(
            "error: out of memory: cannot allocate 41.7 KiB (10663 rows of 4 bytes) for a buffer brought \
             back from the host tier: the memory limit (--memory-limit) leaves "
        ),
        "{out}"
    );
    assert!(
        out.contains("in block `y.round1` (1), instruction 17 (intersect_count)"),
        "{out}"
    );
}

/// `foxbench tpch` over Q1 and Q6 at SF 0.01 on the CPU, one hot run each.
const TPCH_Q1_Q6: [&str; 9] = [
    "tpch",
    "--sf",
    "0.01",
    "--backend",
    "cpu",
    "--queries",
    "1,6",
    "--repeat",
    "1",
];

/// Under `--memory-limit`, `tpch` prints the bytes each query's median run copied to the
/// device and their floor at the host-to-device bandwidth it measured, per query and in
/// all; the lines add up, and each floor is its bytes over that bandwidth. Without a
/// limit there is no such line. The load's line gives the peak host memory.
#[test]
fn tpch_under_a_memory_limit_prints_the_bytes_to_the_device_and_their_floor() {
    let run = |limit: Option<&str>| {
        let mut args = TPCH_Q1_Q6.to_vec();
        args.extend(limit.iter().flat_map(|l| ["--memory-limit", *l]));
        let o = foxbench_at_root(&args);
        let (out, e) = (text(&o.stdout), text(&o.stderr));
        assert_eq!(o.status.code(), Some(0), "{out}{e}");
        out
    };
    assert!(!run(None).contains("to the device:"));
    let out = run(Some("256K"));
    // The CPU backend's buffers are host memory: it locks nothing.
    assert!(!out.contains("page-locked"), "{out}");
    // The load's line gives the process's peak host memory (Linux says).
    let o = foxbench_at_root(&[
        "tpch",
        "--sf",
        "0.001",
        "--backend",
        "cpu",
        "--queries",
        "6",
        "--repeat",
        "0",
    ]);
    let loaded = text(&o.stderr);
    let loaded = loaded
        .lines()
        .find(|l| l.contains(" loaded in "))
        .unwrap_or_else(|| panic!("{loaded}"));
    if cfg!(target_os = "linux") {
        assert!(loaded.contains(" s (host memory peak "), "{loaded}");
    }
    let find = |prefix: &str| -> Vec<String> {
        let l = out.lines().find(|l| l.starts_with(prefix));
        let l = l.unwrap_or_else(|| panic!("no line `{prefix}…` in\n{out}"));
        l.split_whitespace().map(str::to_string).collect()
    };
    let num = |w: &[String], k: usize| -> f64 { w[k].parse().unwrap_or_else(|_| panic!("{w:?}")) };
    let words = find("to the device: ");
    let (total, gbs) = (num(&words, 3) as u64, num(&words, 10));
    assert!(total > 0 && gbs > 0.0, "{words:?}");
    let mut sum = 0;
    for q in [1, 6] {
        let w = find(&format!("  Q{q}: "));
        let (bytes, floor) = (num(&w, 1) as u64, num(&w, 4));
        assert!(bytes > 0, "the columns are read from the host under 256K: {w:?}");
        let want = bytes as f64 / (gbs * 1e9) * 1e3;
        assert!(
            (floor - want).abs() <= 0.05 + want * 0.01,
            "{w:?}: {want} ms at {gbs} GB/s"
        );
        sum += bytes;
    }
    assert_eq!(sum, total, "{out}");
}

/// `tpch --memory-limit … --also-unlimited` runs the queries without the limit too and
/// prints each query's two medians, their ratio and whether the answers are the same,
/// then the totals (which add up the medians); without --memory-limit the flag is a
/// usage error.
#[test]
fn tpch_also_unlimited_prints_both_medians_their_ratio_and_the_same_answers() {
    let o = foxbench_at_root(&[&TPCH_Q1_Q6[..], &["--memory-limit", "256K", "--also-unlimited"]].concat());
    let (out, e) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}{e}");
    assert!(e.contains("ms median without the limit"), "{e}");
    let table = out
        .split("under the memory limit against without it (medians, ms):\n")
        .nth(1)
        .unwrap_or_else(|| panic!("{out}"));
    let num = |w: &str| -> f64 { w.trim_end_matches('x').parse().unwrap_or_else(|_| panic!("{w}")) };
    let (mut a, mut b) = (0.0, 0.0);
    for q in [1, 6] {
        let l = table
            .lines()
            .find(|l| l.starts_with(&format!("  Q{q} ")))
            .unwrap_or_else(|| panic!("{table}"));
        let w: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(w.len(), 5, "{l}");
        let (x, y, r) = (num(w[1]), num(w[2]), num(w[3]));
        assert!(x > 0.0 && y > 0.0, "{l}");
        assert!((r - y / x).abs() <= 0.01 + r * 0.01, "{l}");
        assert_eq!(w[4], "same", "{l}");
        a += x;
        b += y;
    }
    let total = table
        .lines()
        .find(|l| l.starts_with("total"))
        .unwrap_or_else(|| panic!("{table}"));
    let w: Vec<&str> = total.split_whitespace().collect();
    assert!(
        (num(w[1]) - a).abs() <= 0.1 && (num(w[2]) - b).abs() <= 0.1,
        "{total} ({a}, {b})"
    );
    let o = foxbench_at_root(&["tpch", "--sf", "0.01", "--backend", "cpu", "--also-unlimited"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("--memory-limit"), "{}", text(&o.stderr));
}

/// `--profile` with `--devices 2` writes each query's 1-device statistics and, under
/// `== QN on 2 devices`, the 2-device run's statistics and its kernels by device: each
/// kernel's ms on one device, on device 0 and on device 1, and its calls on each; each
/// query's line on stderr gives the devices' resident bytes and bound.
#[test]
fn tpch_profile_covers_the_runs_over_several_devices() {
    let profile = std::env::temp_dir().join(format!("foxbench-tpch-profile-{}.txt", std::process::id()));
    let o = foxbench_at_root(&[
        "tpch",
        "--sf",
        "0.01",
        "--backend",
        "cpu",
        "--queries",
        "1,16",
        "--repeat",
        "1",
        "--devices",
        "2",
        "--profile",
        profile.to_str().unwrap(),
    ]);
    let (out, e) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}{e}");
    let p = std::fs::read_to_string(&profile).unwrap();
    let _ = std::fs::remove_file(&profile);
    for q in [1, 16] {
        let one = p.find(&format!("== Q{q}\n")).unwrap_or_then(&p);
        let two = p.find(&format!("== Q{q} on 2 devices\n")).unwrap_or_then(&p);
        assert!(one < two, "{p}");
        let section = &p[two..];
        let section = &section[..section[1..].find("\n== ").map_or(section.len(), |i| i + 1)];
        assert!(section.contains("timing on cpu × 2 devices\n"), "{section}");
        assert!(section.contains("device 1: device peak "), "{section}");
        let table = &section[section.find("kernels by device (2 devices)\n").unwrap_or_then(section)..];
        let head: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(
            head,
            ["kernel", "1", "device", "ms", "device", "0", "ms", "device", "1", "ms", "calls"],
            "{table}"
        );
        // Q16 over two devices exchanges rows: a kernel the 1-device run has not.
        let rows: Vec<Vec<&str>> = table
            .lines()
            .skip(2)
            .take_while(|l| !l.starts_with("total"))
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert!(rows.len() >= 3, "{table}");
        for r in &rows {
            // kernel, three times (or `-`), the calls `a / b / c`.
            let calls: Vec<&str> = r[r.len() - 5..].iter().copied().filter(|c| *c != "/").collect();
            assert_eq!(calls.len(), 3, "{table}");
            assert!(
                r[r.len() - 8..r.len() - 5]
                    .iter()
                    .all(|t| *t == "-" || t.parse::<f64>().is_ok()),
                "{table}"
            );
        }
        if q == 16 {
            assert!(
                rows.iter()
                    .any(|r| r[0].starts_with("exchange") && r[r.len() - 8] == "-"),
                "{table}"
            );
        }
        assert!(table.lines().any(|l| l.starts_with("total ")), "{table}");
    }
    let lines: Vec<&str> = e.lines().filter(|l| l.contains("on 2 devices, first")).collect();
    assert_eq!(lines.len(), 2, "{e}");
    for l in lines {
        assert!(l.contains("; resident ") && l.contains("(bound "), "{l}");
    }
}

trait FoundOr {
    fn unwrap_or_then(self, text: &str) -> usize;
}

impl FoundOr for Option<usize> {
    /// The position, or a panic showing `text`.
    fn unwrap_or_then(self, text: &str) -> usize {
        self.unwrap_or_else(|| panic!("{text}"))
    }
}

/// `foxbench datalog`'s iterations are the times the semi-naive loop's body ran: on a
/// chain of 5 vertices transitive closure derives paths of 2, 3 and 4 edges, then finds
/// nothing new, 4 iterations (`foxrun --timing` prints the same 4), though its join is
/// written in rounds, whose loops are not iterations of the recursion.
#[test]
fn datalog_iterations_count_the_recursion_not_the_rounds() {
    let dir = std::env::temp_dir().join(format!("foxbench-chain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let graph = dir.join("chain.txt");
    std::fs::write(&graph, "1 2\n2 3\n3 4\n4 5\n").unwrap();
    let o = foxbench_at_root(&[
        "datalog",
        "--program",
        "tc",
        "--graph",
        graph.to_str().unwrap(),
        "--backend",
        "cpu",
        "--no-progress",
    ]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    let row = out
        .lines()
        .find(|l| l.starts_with("Fox, ") && !l.contains(": "))
        .unwrap_or_else(|| panic!("{out}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    let at = cells
        .iter()
        .position(|c| *c == "10")
        .unwrap_or_else(|| panic!("10 tuples: {row}"));
    assert_eq!(cells[at + 1], "4", "iterations: {row}");
    std::fs::remove_dir_all(&dir).ok();
}
