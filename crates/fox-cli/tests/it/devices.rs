//! `foxrun --devices N`: a run over N simulated devices on the CPU backend gives the
//! results of one device, byte for byte; bad counts are command-line errors; a count the
//! GPUs cannot meet is an error naming them; `--timing` reports the exchanges and each
//! device's peak.

use crate::common::{device_peaks, repo, temp_dir};
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
    // The program's unions of derived relations are hashed on their columns: rows move.
    let line = err
        .lines()
        .find(|l| l.starts_with("exchanges: "))
        .unwrap_or_else(|| panic!("no exchanges line: {err}"));
    let count: u64 = line["exchanges: ".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(count > 0 && line.ends_with(" bytes moved between devices)"), "{line}");
    // The output's parts come from every device and are joined on device 0.
    let line = err
        .lines()
        .find(|l| l.starts_with("outputs of several devices: "))
        .unwrap_or_else(|| panic!("no line of the outputs' parts: {err}"));
    assert!(
        line.contains(" ms waiting for the devices' parts, ")
            && line.ends_with(" ms joining them in order (in `output`)"),
        "{line}"
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
/// recursion, negation, functional checks, strings made at run time, triangles): the
/// partitioning pass places their relations and exchanges rows, and every program of
/// the test corpus gives one device's output on 2, 3, 4 and 8, errors included.
#[test]
fn every_program_of_the_corpus_gives_one_device_s_results_on_several() {
    let data = repo().join("tests/programs/data").display().to_string();
    let mut programs: Vec<_> = std::fs::read_dir(repo().join("tests/programs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "logic"))
        .collect();
    programs.sort();
    assert!(programs.len() >= 20);
    for program in &programs {
        let program = program.display().to_string();
        let run = |n: &str| {
            foxrun(
                &repo(),
                &[
                    &program,
                    "--backend",
                    "cpu",
                    "--data",
                    &data,
                    "--devices",
                    n,
                    "--out",
                    "-",
                ],
            )
        };
        let one = run("1");
        for n in ["2", "3", "4", "8"] {
            let o = run(n);
            assert_eq!(
                o.status.code(),
                one.status.code(),
                "{program} --devices {n}: {}",
                text(&o.stderr)
            );
            assert_eq!(text(&o.stdout), text(&one.stdout), "{program} --devices {n}");
        }
    }
}

/// The 22 TPC-H queries, generated at SF 0.01 and sliced over three and over eight
/// devices: each answer byte for byte one device's.
#[test]
fn tpch_queries_give_one_device_s_answers_on_three_and_eight_devices() {
    for q in 1..=22 {
        let q = format!("tpch/queries/q{q:02}.logic");
        let run = |n: &str| {
            let o = foxrun(
                &repo(),
                &[
                    "--tpch",
                    "0.01",
                    &q,
                    "--backend",
                    "cpu",
                    "--devices",
                    n,
                    "--out",
                    "-",
                    "--no-progress",
                ],
            );
            assert_eq!(o.status.code(), Some(0), "{q} --devices {n}: {}", text(&o.stderr));
            o.stdout
        };
        let one = text(&run("1"));
        assert_eq!(text(&run("3")), one, "{q} on 3 devices");
        assert_eq!(text(&run("8")), one, "{q} on 8 devices");
    }
}

/// Soufflé programs (records, ADTs, components, eqrel, aggregates, negation) over two
/// devices: every output file as one device writes it.
#[test]
fn souffle_programs_give_one_device_s_outputs_on_two_devices() {
    let dir = temp_dir("devices", "souffle");
    let mut programs: Vec<_> = std::fs::read_dir(repo().join("tests/souffle"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "dl"))
        .collect();
    programs.sort();
    for program in &programs {
        let stem = program.file_stem().unwrap().to_str().unwrap();
        let facts = repo().join("tests/souffle").join(stem).join("facts");
        let facts = if facts.is_dir() {
            facts
        } else {
            repo().join("tests/souffle")
        };
        let mut outs = Vec::new();
        for n in ["1", "2"] {
            let out = dir.join(format!("{stem}-{n}"));
            let o = foxrun(
                &repo(),
                &[
                    program.to_str().unwrap(),
                    "--backend",
                    "cpu",
                    "--data",
                    facts.to_str().unwrap(),
                    "--devices",
                    n,
                    "--out",
                    out.to_str().unwrap(),
                ],
            );
            assert_eq!(o.status.code(), Some(0), "{stem} --devices {n}: {}", text(&o.stderr));
            let mut files: Vec<(String, String)> = std::fs::read_dir(&out)
                .unwrap()
                .map(|e| {
                    let p = e.unwrap().path();
                    (
                        p.file_name().unwrap().to_string_lossy().into_owned(),
                        std::fs::read_to_string(&p).unwrap(),
                    )
                })
                .collect();
            files.sort();
            outs.push(files);
        }
        assert!(!outs[0].is_empty(), "{stem}");
        assert_eq!(outs[1], outs[0], "{stem}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
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

/// `foxc compile --devices N` promises a plan that gives the same results on N devices
/// or on one (where every exchange keeps the rows where they are).
#[test]
fn a_plan_compiled_for_several_devices_gives_the_same_results_on_one() {
    let dir = temp_dir("devices", "compiled");
    let data = repo().join("tests/programs/data").display().to_string();
    let program = repo().join("tests/programs/aggregates.logic").display().to_string();
    let plan = dir.join("plan.ron").display().to_string();
    let o = Command::new(env!("CARGO_BIN_EXE_foxc"))
        .args(["compile", &program, "--devices", "3", "-o", &plan])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let run = |what: &str, n: &str| {
        let o = foxrun(
            &repo(),
            &[what, "--backend", "cpu", "--data", &data, "--devices", n, "--out", "-"],
        );
        assert_eq!(o.status.code(), Some(0), "{what} --devices {n}: {}", text(&o.stderr));
        text(&o.stdout)
    };
    let want = run(&program, "1");
    assert_eq!(run(&plan, "1"), want);
    assert_eq!(run(&plan, "3"), want);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Averages of int32, int64 and decimal values, grouped and over all rows, with negative
/// values and quotients to round (half away from zero), over 2 and 3 devices: each
/// device sums and counts its rows, only those partial rows move, and the averages are
/// one device's, byte for byte. An average of floats gives one device's answer too (its
/// input moves, and one kernel averages).
#[test]
fn averages_of_partial_sums_and_counts_give_one_device_s_answers() {
    let dir = temp_dir("devices", "avg");
    let mut s = 5u64;
    let mut rows = String::new();
    for i in 0..3000u64 {
        let r = |s: &mut u64, m: u64| (crate::common::next(s) % m) as i64;
        let a = r(&mut s, 2_000_001) - 1_000_000;
        let b = r(&mut s, 1 << 40) - (1 << 39);
        let d = r(&mut s, 200_001) - 100_000;
        let f = r(&mut s, 1000) as f64 / 8.0;
        rows.push_str(&format!(
            "{},{a},{b},{}{}.{:02},{f}\n",
            i % 11,
            if d < 0 { "-" } else { "" },
            d.abs() / 100,
            d.abs() % 100
        ));
    }
    std::fs::write(dir.join("m.csv"), rows).unwrap();
    // The groups are computed (`j = k * 2`), so `m` is not loaded placed by them: each
    // device holds rows of every group.
    let decl = "m(k, a, b, d, f) -> int32(k), int32(a), int64(b), decimal(d), float64(f).\n.input m.\n\
                g(j, x, y, z, c) <- agg<<x = avg(a), y = avg(b), z = avg(d), c = count()>> m(k, a, b, d, _), j = k * 2.\n\
                t(x, y, z) <- agg<<x = avg(a), y = avg(b), z = avg(d)>> m(_, a, b, d, _).\n.output g.\n.output t.\n";
    std::fs::write(dir.join("exact.logic"), decl).unwrap();
    std::fs::write(
        dir.join("q.logic"),
        format!("{decl}fl(j, v) <- agg<<v = avg(f)>> m(k, _, _, _, f), j = k * 2.\n.output fl.\n"),
    )
    .unwrap();
    let run = |file: &str, n: &str| {
        foxrun(
            &dir,
            &[
                file,
                "--backend",
                "cpu",
                "--data",
                ".",
                "--devices",
                n,
                "--out",
                "-",
                "--timing",
            ],
        )
    };
    let one = run("q.logic", "1");
    assert_eq!(one.status.code(), Some(0), "{}", text(&one.stderr));
    let out = text(&one.stdout);
    assert_eq!(
        out.lines().filter(|l| l.contains(',')).count(),
        3 + 11 + 1 + 11,
        "{out}"
    );
    for n in ["2", "3"] {
        let o = run("q.logic", n);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        assert_eq!(text(&o.stdout), out, "--devices {n}");
        // Without the floats, the rows moved are the input's once (placed by all its
        // columns, which makes its rows distinct) and at most one partial row per group
        // and device for each aggregation, not the input again for each.
        let o = run("exact.logic", n);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let e = text(&o.stderr);
        let moved: u64 = e
            .lines()
            .find_map(|l| l.strip_prefix("exchanges: "))
            .and_then(|l| l.split('(').nth(1))
            .and_then(|l| l.split_whitespace().next())
            .map(|r| r.parse().unwrap())
            .unwrap_or_else(|| panic!("{e}"));
        assert!(
            moved <= 3000 + 3 * (11 + 1) + 11 + 1,
            "--devices {n}: {moved} rows moved\n{e}"
        );
    }
    let plan = Command::new(env!("CARGO_BIN_EXE_foxc"))
        .current_dir(&dir)
        .args(["compile", "q.logic", "--devices", "3", "--emit", "kernels"])
        .output()
        .unwrap();
    let k = text(&plan.stdout);
    let averaging: Vec<&str> = k.lines().filter(|l| l.contains("avg(")).collect();
    assert!(averaging.len() == 1 && averaging[0].contains(") -> float64]"), "{k}");
}

/// Triangles of a generated graph: `edge`, read only by the multi-way join, is loaded
/// whole on every device (as one device loads it), so no edge moves between devices:
/// only the partial counts do, one row per other device. The count is one device's.
#[test]
fn a_triangle_count_moves_only_its_partial_counts() {
    let repo = repo();
    let run = |n: &str, timing: bool| {
        let mut args = vec![
            "queries/triangle_count.logic",
            "--graph",
            "rmat:9",
            "--degree-order",
            "--backend",
            "cpu",
            "--devices",
            n,
            "--out",
            "-",
            "--no-progress",
        ];
        if timing {
            args.push("--timing");
        }
        let o = foxrun(&repo, &args);
        assert_eq!(o.status.code(), Some(0), "--devices {n}: {}", text(&o.stderr));
        o
    };
    let one = text(&run("1", false).stdout);
    assert!(one.lines().count() >= 2, "{one}");
    for (n, others) in [("2", 1u64), ("3", 2)] {
        let o = run(n, true);
        assert_eq!(text(&o.stdout), one, "--devices {n}");
        let err = text(&o.stderr);
        assert!(err.contains("load_input[edge, whole on every device]"), "{err}");
        let line = err
            .lines()
            .find(|l| l.starts_with("exchanges: "))
            .unwrap_or_else(|| panic!("no exchanges line: {err}"));
        let rows: u64 = line
            .split('(')
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|r| r.replace(',', "").parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        // The partial counts to device 0, and at most the one count row hashed to its
        // device for the store into `ntri`.
        assert!(rows <= others + 1, "--devices {n}: {line}");
    }
}

/// A run over several devices that fails on one of them writes no file of `--out DIR`
/// (the files of the outputs are written only once every device's run succeeded), and
/// no table on standard output with `--out -`.
#[test]
fn a_run_that_fails_on_one_device_writes_no_partial_output() {
    let dir = temp_dir("devices", "partial");
    // The row whose `y` is 0 is the input's last: device 1's slice on two devices.
    let mut rows: Vec<String> = (1..40).map(|i| format!("{i},{}\n", 1 + i % 7)).collect();
    rows.push("40,0\n".into());
    std::fs::write(dir.join("edge.csv"), rows.concat()).unwrap();
    std::fs::write(
        dir.join("q.logic"),
        "edge(x, y) -> int32(x), int32(y).\n\
         .input edge.\n\
         ok(x, y) <- edge(x, y), x > 3.\n\
         q(x, r) <- edge(x, y), r = 100 / y.\n\
         .output ok.\n\
         .output q.\n",
    )
    .unwrap();
    let out = dir.join("out");
    for n in ["1", "2", "3"] {
        let o = foxrun(
            &dir,
            &[
                "q.logic",
                "--backend",
                "cpu",
                "--devices",
                n,
                "--out",
                out.to_str().unwrap(),
            ],
        );
        assert_eq!(o.status.code(), Some(1), "--devices {n}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains("division by zero"),
            "--devices {n}: {}",
            text(&o.stderr)
        );
        let written: Vec<_> = std::fs::read_dir(&out)
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(written.is_empty(), "--devices {n} wrote {written:?}");
        let o = foxrun(&dir, &["q.logic", "--backend", "cpu", "--devices", n, "--out", "-"]);
        assert_eq!(o.status.code(), Some(1), "--devices {n}: {}", text(&o.stderr));
        assert!(o.stdout.is_empty(), "--devices {n}: {}", text(&o.stdout));
    }
    // Without the failing row, every output is written.
    rows.pop();
    std::fs::write(dir.join("edge.csv"), rows.concat()).unwrap();
    let o = foxrun(
        &dir,
        &[
            "q.logic",
            "--backend",
            "cpu",
            "--devices",
            "2",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(out.join("ok.csv").is_file() && out.join("q.csv").is_file());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The boxes each device took, from `--timing`'s line (none when it has none).
fn boxes_taken(stderr: &str) -> Option<Vec<u64>> {
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("boxes of multi-way joins taken per device: "))?;
    let each = line.split(" (").next().unwrap_or(line);
    Some(each.split(", ").map(|b| b.parse().unwrap()).collect())
}

/// Triangles and 4-cliques of an R-MAT graph, counted and listed, on 2, 3 and 4 devices:
/// every device claims boxes of the joins' first variable bindings until none is left
/// (`--timing` tells how many each took: at least one, a few in all), and every
/// answer is one device's, byte for byte; `--emit physical` says how the work is taken.
#[test]
fn multi_way_joins_in_boxes_give_one_device_s_counts_and_listings() {
    let repo = repo();
    let run = |query: &str, n: &str, timing: bool| {
        let mut args = vec![
            query,
            "--graph",
            "rmat:8",
            "--degree-order",
            "--backend",
            "cpu",
            "--devices",
            n,
            "--out",
            "-",
            "--no-progress",
        ];
        if timing {
            args.push("--timing");
        }
        let o = foxrun(&repo, &args);
        assert_eq!(o.status.code(), Some(0), "{query} --devices {n}: {}", text(&o.stderr));
        o
    };
    let per_device = u64::from(fox_phys::passes::BOXES_PER_DEVICE);
    for query in [
        "queries/triangle_count.logic",
        "queries/clique4_count.logic",
        "queries/triangle.logic",
        "queries/clique4.logic",
    ] {
        let one = run(query, "1", true);
        assert_eq!(boxes_taken(&text(&one.stderr)), None, "{query}");
        let one = text(&one.stdout);
        assert!(one.lines().count() >= 2, "{query}: {one}");
        for n in [2u64, 3, 4] {
            let o = run(query, &n.to_string(), true);
            assert_eq!(text(&o.stdout), one, "{query} --devices {n}");
            let taken = boxes_taken(&text(&o.stderr)).unwrap_or_else(|| panic!("{}", text(&o.stderr)));
            assert_eq!(taken.len() as u64, n, "{query}: {taken:?}");
            // Every device takes a box; large boxes first keep them to a few per device.
            assert!(taken.iter().all(|&t| t >= 1), "{query}: {taken:?}");
            let most = n * (u64::from((per_device / 2).ilog2()) + 3);
            assert!(taken.iter().sum::<u64>() <= most, "{query}: {taken:?}");
        }
    }
    let o = Command::new(env!("CARGO_BIN_EXE_foxc"))
        .args([
            "compile",
            "queries/triangle_count.logic",
            "--devices",
            "2",
            "--emit",
            "physical",
        ])
        .current_dir(&repo)
        .output()
        .unwrap();
    let plan = text(&o.stdout);
    assert!(
        plan.contains(&format!(
            "work taken by the devices in boxes of the first variable's bindings, large ones first, the smallest 1/{} of them",
            2 * per_device
        )),
        "{plan}{}",
        text(&o.stderr)
    );
}

/// A graph whose triangles mostly hang off one hub: the hub's bindings expand to most of
/// the second level's rows, so the boxes, cut by those rows, cut the hub's work into many
/// and every device takes some; the counts and the listing are one device's.
#[test]
fn a_hub_s_work_is_spread_over_the_devices() {
    let dir = crate::common::temp_dir("devices", "hub");
    let n = 3000u32;
    let mut edges = std::collections::BTreeSet::new();
    for i in 1..=n {
        edges.insert((0, i));
        for k in 1..=3 {
            let j = (i + k - 1) % n + 1;
            edges.insert((i.min(j), i.max(j)));
        }
    }
    let lines: String = edges
        .iter()
        .flat_map(|&(a, b)| [format!("{a},{b}\n"), format!("{b},{a}\n")])
        .collect();
    std::fs::write(dir.join("edge.csv"), lines).unwrap();
    let repo = repo();
    let data = dir.display().to_string();
    for query in ["queries/triangle_count.logic", "queries/triangle.logic"] {
        let run = |devices: &str| {
            let o = foxrun(
                &repo,
                &[
                    query,
                    "--data",
                    &data,
                    "--backend",
                    "cpu",
                    "--devices",
                    devices,
                    "--timing",
                    "--out",
                    "-",
                    "--no-progress",
                ],
            );
            assert_eq!(o.status.code(), Some(0), "--devices {devices}: {}", text(&o.stderr));
            (text(&o.stdout), text(&o.stderr))
        };
        let (one, _) = run("1");
        if query.ends_with("count.logic") {
            // A triangle through the hub per edge of the ring (3n), and 3n along it.
            assert_eq!(one, format!("n\n{}\n", 6 * n), "{query}");
        }
        let (two, err) = run("2");
        assert_eq!(two, one, "{query}");
        let taken = boxes_taken(&err).unwrap_or_else(|| panic!("{err}"));
        assert_eq!(taken.len(), 2, "{taken:?}");
        assert!(
            taken.iter().all(|&b| b > 0),
            "{query}: boxes taken per device {taken:?}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A float sum over a triangle listing (additions whose bits depend on their order)
/// and a listing that drops the first variable: whichever device took which box, the
/// rows move to their device and are sorted after the boxes, so every run on a count of
/// devices gives the same bits, and the listing is one device's.
#[test]
fn what_follows_a_listing_in_boxes_does_not_depend_on_timing() {
    let dir = crate::common::temp_dir("devices", "timing-free");
    let n = 400u32;
    let mut edges = std::collections::BTreeSet::new();
    let mut weights = String::new();
    for i in 1..=n {
        edges.insert((0, i));
        for k in 1..=3 {
            let j = (i + k - 1) % n + 1;
            edges.insert((i.min(j), i.max(j)));
        }
        let w = ["1e16", "1.0", "3.3", "-1e16", "0.1", "7e-5"][(i * 7 % 6) as usize];
        weights.push_str(&format!("{i},{w}\n"));
    }
    let lines: String = edges
        .iter()
        .flat_map(|&(a, b)| [format!("{a},{b}\n"), format!("{b},{a}\n")])
        .collect();
    std::fs::write(dir.join("edge.csv"), lines).unwrap();
    std::fs::write(dir.join("w.csv"), weights).unwrap();
    std::fs::write(
        dir.join("q.logic"),
        "edge(x, y) -> int32(x), int32(y).\nw(x, v) -> int32(x), float64(v).\n\
         .input edge.\n.input w.\n\
         tri(x, y, z) <- edge(x, y), edge(y, z), edge(x, z), x < y < z.\n\
         s[] = t <- agg<<t = total(v)>> tri(_, _, z), w(z, v).\n\
         q(z, y) <- edge(x, y), edge(y, z), edge(x, z), x < y < z.\n\
         .output s.\n.output q.\n",
    )
    .unwrap();
    let run = |devices: &str| {
        let o = foxrun(
            &dir,
            &[
                "q.logic",
                "--backend",
                "cpu",
                "--devices",
                devices,
                "--out",
                "-",
                "--no-progress",
            ],
        );
        assert_eq!(o.status.code(), Some(0), "--devices {devices}: {}", text(&o.stderr));
        text(&o.stdout)
    };
    let listing = |out: &str| out.split("\nq\n").nth(1).unwrap_or_else(|| panic!("{out}")).to_string();
    let one = run("1");
    for devices in ["2", "3"] {
        let first = run(devices);
        assert_eq!(listing(&first), listing(&one), "--devices {devices}");
        for _ in 0..4 {
            assert_eq!(run(devices), first, "--devices {devices}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
