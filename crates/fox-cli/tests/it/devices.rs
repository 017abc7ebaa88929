//! `foxrun --devices N`: a run over N simulated devices on the CPU backend gives the
//! results of one device, byte for byte; bad counts are command-line errors; a count the
//! GPUs cannot meet is an error naming them; `--timing` reports the exchanges and each
//! device's peak.

use crate::common::{repo, temp_dir};
use std::path::Path;
use std::process::{Command, Output};

fn foxrun(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A program whose answer is a union over slices of its inputs (selections and
/// projections of one input each, strings made at run time), with inputs of distinct
/// rows: every device count gives one device's answer.
fn union_program(tag: &str) -> std::path::PathBuf {
    let dir = temp_dir("devices", tag);
    let mut s = 7u64;
    let mut edges = std::collections::BTreeSet::new();
    while edges.len() < 300 {
        let a = crate::common::next(&mut s) % 20;
        let b = crate::common::next(&mut s) % 500;
        edges.insert((a, b));
    }
    // Not in sorted order, so that the slices are not ranges of the answer.
    let mut lines: Vec<String> = edges.iter().map(|(a, b)| format!("{a},{b}\n")).collect();
    for i in (1..lines.len()).rev() {
        let j = (crate::common::next(&mut s) % (i as u64 + 1)) as usize;
        lines.swap(i, j);
    }
    std::fs::write(dir.join("edge.csv"), lines.concat()).unwrap();
    let people: String = (0..41)
        .map(|i| format!("p{i},{},{}.5\n", 10 + (i * 7) % 53, i % 9))
        .collect();
    std::fs::write(dir.join("person.csv"), people).unwrap();
    std::fs::write(
        dir.join("q.logic"),
        "edge(x, y) -> int32(x), int32(y).\n\
         person(n, a, w) -> string(n), int32(a), float64(w).\n\
         .input edge.\n\
         .input person.\n\
         big(x, y) <- edge(x, y), x > 12.\n\
         flipped(y, x) <- edge(x, y), y < 100.\n\
         named(n, a) <- person(n, a, _), a >= 30.\n\
         tag(s, w) <- person(n, _, w), s = concat(n, \"!\").\n\
         .output big.\n\
         .output flipped.\n\
         .output named.\n\
         .output tag.\n",
    )
    .unwrap();
    dir
}

#[test]
fn several_devices_give_one_device_s_results_byte_for_byte() {
    let dir = union_program("union");
    for format in [
        &["--out", "-"][..],
        &["--format", "table", "--max-rows", "all"][..],
        &["--format", "json"][..],
    ] {
        let run = |n: &str| {
            let mut args = vec!["q.logic", "--backend", "cpu", "--devices", n];
            args.extend(format);
            let o = foxrun(&dir, &args);
            assert_eq!(o.status.code(), Some(0), "--devices {n}: {}", text(&o.stderr));
            o.stdout
        };
        let one = run("1");
        assert!(text(&one).contains("p30!"), "{}", text(&one));
        for n in ["2", "3", "4", "all"] {
            assert_eq!(text(&run(n)), text(&one), "--devices {n} {format:?}");
        }
    }
}

#[test]
fn timing_reports_the_exchanges_and_each_device_s_peak() {
    let dir = union_program("timing");
    let o = foxrun(
        &dir,
        &[
            "q.logic",
            "--backend",
            "cpu",
            "--devices",
            "3",
            "--timing",
            "--out",
            "-",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains("timing on cpu × 3 devices\n"), "{err}");
    assert!(
        err.contains("\nexchanges: 0 (0 rows, 0 bytes moved between devices)\n"),
        "{err}"
    );
    for d in 0..3 {
        assert!(err.contains(&format!("\ndevice {d}: device peak ")), "{err}");
    }
    assert!(!err.contains("device 3:"), "{err}");
    // One device, and `all` on the CPU, report no exchanges.
    for n in ["1", "all"] {
        let o = foxrun(
            &dir,
            &["q.logic", "--backend", "cpu", "--devices", n, "--timing", "--out", "-"],
        );
        let err = text(&o.stderr);
        assert!(!err.contains("exchanges:") && !err.contains("device 0:"), "{err}");
        assert!(err.contains("timing on cpu\n"), "{err}");
    }
}

#[test]
fn generated_data_is_sliced_over_the_devices_too() {
    let dir = temp_dir("devices", "tpch");
    std::fs::write(
        dir.join("q.logic"),
        format!(
            ".include \"{}\".\nnamed(k, n) <- nation(k, n, r, _), r < 3.\n.output named.\n",
            repo().join("tpch/schema.logic").display()
        ),
    )
    .unwrap();
    let run = |n: &str| {
        foxrun(
            &dir,
            &[
                "q.logic",
                "--backend",
                "cpu",
                "--tpch",
                "0.01",
                "--devices",
                n,
                "--out",
                "-",
            ],
        )
    };
    let one = run("1");
    assert_eq!(one.status.code(), Some(0), "{}", text(&one.stderr));
    assert!(text(&one.stdout).lines().count() > 10, "{}", text(&one.stdout));
    for n in ["2", "3"] {
        let o = run(n);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        assert_eq!(text(&o.stdout), text(&one.stdout), "--devices {n}");
    }
}

#[test]
fn bad_device_counts_are_errors_with_no_output() {
    let dir = union_program("bad");
    for (n, want) in [
        ("0", "a run needs at least 1 device"),
        ("x", "`x` is not a number of devices or `all`"),
        ("-1", "'-1'"),
    ] {
        let o = foxrun(&dir, &["q.logic", "--backend", "cpu", "--devices", n]);
        assert_eq!(o.status.code(), Some(2), "--devices {n}");
        assert!(o.stdout.is_empty());
        assert!(text(&o.stderr).contains(want), "--devices {n}: {}", text(&o.stderr));
    }
    // Without a GPU, the GPU backend's own error; with one, more devices than it has.
    let o = foxrun(&dir, &["q.logic", "--backend", "gpu", "--devices", "4096"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    let err = text(&o.stderr);
    assert!(
        err.contains("no usable GPU for --backend gpu") || err.contains("--devices 4096: this machine has "),
        "{err}"
    );
}

#[test]
fn a_compiled_plan_without_exchanges_runs_on_one_device_only() {
    let dir = union_program("ron");
    let o = Command::new(env!("CARGO_BIN_EXE_foxc"))
        .current_dir(&dir)
        .args(["compile", "q.logic", "-o", "q.ron"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = foxrun(&dir, &["q.ron", "--backend", "cpu", "--devices", "2"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    assert!(
        text(&o.stderr).contains("--devices 2: the plan exchanges no rows between devices"),
        "{}",
        text(&o.stderr)
    );
    let o = foxrun(&dir, &["q.ron", "--backend", "cpu", "--devices", "1"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

/// Programs whose answers need rows of several slices to meet (joins, aggregations,
/// recursion, distinct rows across slices): one device's answer on several devices once
/// the planner exchanges rows for `Options::devices > 1`. Until it does, their rows are
/// per-device answers.
#[test]
#[ignore = "needs the exchanges the planner inserts for several devices"]
fn programs_that_join_or_aggregate_give_one_device_s_results_on_several() {
    for program in [
        "tests/programs/aggregates.logic",
        "tests/programs/negation.logic",
        "tests/programs/same_generation.logic",
        "tests/programs/recursion_mutual.logic",
        "tests/programs/strings.logic",
        "tests/programs/triangles_input.logic",
    ] {
        let data = repo().join("tests/programs/data");
        let data = data.display().to_string();
        let run = |n: &str| {
            let o = foxrun(
                &repo(),
                &[
                    program,
                    "--backend",
                    "cpu",
                    "--data",
                    &data,
                    "--devices",
                    n,
                    "--out",
                    "-",
                ],
            );
            assert_eq!(o.status.code(), Some(0), "{program} --devices {n}: {}", text(&o.stderr));
            o.stdout
        };
        let one = run("1");
        for n in ["2", "3"] {
            assert_eq!(text(&run(n)), text(&one), "{program} --devices {n}");
        }
    }
}

/// Each device's `device peak N bytes` from `--timing`.
fn device_peaks(stderr: &str) -> Vec<u64> {
    stderr
        .lines()
        .filter_map(|l| {
            l.strip_prefix("device ")?
                .split_once(": device peak ")?
                .1
                .split_whitespace()
                .next()
        })
        .map(|n| n.parse().unwrap())
        .collect()
}

#[test]
fn the_memory_limit_applies_to_each_device() {
    let dir = union_program("limit");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "q.logic",
            "--backend",
            "cpu",
            "--devices",
            "2",
            "--timing",
            "--out",
            "-",
        ];
        args.extend(extra);
        foxrun(&dir, &args)
    };
    let free = run(&[]);
    assert_eq!(free.status.code(), Some(0), "{}", text(&free.stderr));
    let peaks = device_peaks(&text(&free.stderr));
    assert_eq!(peaks.len(), 2, "{}", text(&free.stderr));
    // A limit each device keeps, which both together would not.
    let limit = peaks.iter().max().unwrap() + 64;
    assert!(peaks.iter().sum::<u64>() > limit, "{peaks:?}");
    let limited = run(&["--memory-limit", &limit.to_string()]);
    assert_eq!(limited.status.code(), Some(0), "{}", text(&limited.stderr));
    assert_eq!(text(&limited.stdout), text(&free.stdout));
    for p in device_peaks(&text(&limited.stderr)) {
        assert!(p <= limit, "{p} > {limit}");
    }
}
