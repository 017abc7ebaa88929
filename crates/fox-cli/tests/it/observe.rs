//! Estimated against actual rows: plans made to observe each operator's rows compute
//! exactly what the plans without observations compute, and `foxrun --timing` and the
//! REPL's `.explain analyze` show the counts beside the estimates.

use std::path::PathBuf;
use std::process::Command;

use crate::common::repo;
use fox_kernel::{Instr, KernelPlan, LowerOptions};

/// Every program of the repository: the queries, the test programs and TPC-H.
fn programs() -> Vec<PathBuf> {
    let mut all = Vec::new();
    for dir in ["queries", "tests/programs", "tpch/queries"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "logic"))
            .collect();
        files.sort();
        all.extend(files);
    }
    assert!(all.len() > 40, "{all:?}");
    all
}

fn without_observations(mut plan: KernelPlan) -> KernelPlan {
    for b in &mut plan.blocks {
        b.instrs.retain(|i| !matches!(i, Instr::Observe { .. }));
    }
    plan.observed.clear();
    plan
}

#[test]
fn observing_rows_adds_observations_and_changes_nothing_else() {
    for path in programs() {
        let program = fox_cli::compile_program(
            std::slice::from_ref(&path),
            false,
            "test",
            &fox_ra::PlanOptions::default(),
        )
        .unwrap()
        .unwrap_or_else(|| panic!("{} does not compile", path.display()));
        let stats = fox_phys::Statistics::none();
        let plain = program.kernel_plan(&stats, &LowerOptions::default()).unwrap();
        let observed = program
            .kernel_plan(
                &stats,
                &LowerOptions {
                    observe_rows: true,
                    ..Default::default()
                },
            )
            .unwrap();
        assert!(plain.observed.is_empty());
        let observes: Vec<&Instr> = observed
            .blocks
            .iter()
            .flat_map(|b| &b.instrs)
            .filter(|i| matches!(i, Instr::Observe { .. }))
            .collect();
        assert!(!observes.is_empty(), "{}: nothing observed", path.display());
        assert!(observes.len() <= observed.observed.len() * observed.blocks.len());
        // The observations are consistent (each reads buffers defined before it) and the
        // rest of the plan is the plan without them, instruction for instruction.
        fox_kernel::validate(&observed).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let stripped = without_observations(observed);
        if stripped != plain {
            let (a, b) = (fox_kernel::print_kernels(&plain), fox_kernel::print_kernels(&stripped));
            let at = a.lines().zip(b.lines()).position(|(x, y)| x != y).unwrap_or(0);
            let near = |t: &str| {
                t.lines()
                    .skip(at.saturating_sub(3))
                    .take(8)
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            panic!(
                "{}: observing changes the plan; without observations:\n{}\nwith them:\n{}",
                path.display(),
                near(&a),
                near(&b)
            );
        }
    }
}

fn foxrun(args: &[&str]) -> (String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    (
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    )
}

/// The rows table of a `--timing` report: per temp, its calls, estimated and actual rows.
fn rows_table(report: &str) -> Vec<(String, String, String, String)> {
    let start = report
        .find("rows per operator")
        .unwrap_or_else(|| panic!("no rows table in:\n{report}"));
    report[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('t'))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let n = w.len();
            (
                w[0].to_string(),
                w[n - 4].to_string(),
                w[n - 3].to_string(),
                w[n - 2].to_string(),
            )
        })
        .collect()
}

#[test]
fn timing_shows_each_operators_estimated_and_actual_rows() {
    // Recursion: the loop's operators run once per iteration; the actual rows are their
    // mean per iteration.
    let (_, err) = foxrun(&["queries/even_odd.logic", "--backend", "cpu", "--timing"]);
    let rows = rows_table(&err);
    let scans: Vec<_> = rows.iter().filter(|r| r.1 == "1" && r.3 == "3").collect();
    assert_eq!(scans.len(), 2, "the final scans of even and odd, 3 rows each:\n{err}");
    assert!(rows.iter().any(|r| r.1 == "6"), "six iterations:\n{err}");
    assert!(err.contains("scan even"), "{err}");

    // Statistics of the generated tables: the scan of `customer` is estimated exactly,
    // and the final `limit 10` gives ten rows.
    let (out, err) = foxrun(&[
        "tpch/queries/q03.logic",
        "--tpch",
        "0.01",
        "--backend",
        "cpu",
        "--timing",
    ]);
    assert!(out.contains("10 rows"), "{out}");
    let rows = rows_table(&err);
    let scan = err.lines().find(|l| l.contains("scan customer")).unwrap();
    let scan = rows.iter().find(|r| scan.starts_with(&format!("{} ", r.0))).unwrap();
    assert_eq!(
        (scan.1.as_str(), scan.2.as_str(), scan.3.as_str()),
        ("1", "1500", "1500"),
        "{err}"
    );
    let limit = err.lines().find(|l| l.contains("limit ")).unwrap();
    assert!(limit.split_whitespace().rev().nth(1) == Some("10"), "{limit}");

    // Without --timing the report (and the observations) are absent.
    let (_, err) = foxrun(&["queries/even_odd.logic", "--backend", "cpu"]);
    assert!(!err.contains("rows per operator"), "{err}");
}

#[test]
fn explain_analyze_shows_estimated_and_actual_rows() {
    let (ok, out) = repl(
        &["--backend", "cpu"],
        ".load queries/even_odd.logic\n?- odd(x).\n.explain analyze ?- even(x).\n",
    );
    assert!(ok, "{out}");
    // A plain query shows no table; `.explain analyze` does, after the kernel times.
    let table = out.find("rows per operator").unwrap_or_else(|| panic!("{out}"));
    assert!(out[..table].contains("timing on cpu"), "{out}");
    assert_eq!(out.matches("rows per operator").count(), 1, "{out}");
    let rows = rows_table(&out[table..]);
    assert!(rows.iter().any(|r| r.1 == "1" && r.3 == "3"), "{out}");
}

#[test]
fn a_compiled_plan_counts_rows_when_compiled_to() {
    let dir = std::env::temp_dir().join(format!("fox-observe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (flag, counted) in [(true, true), (false, false)] {
        let plan = dir.join(format!("plan-{flag}.ron"));
        let mut args = vec!["compile", "queries/even_odd.logic", "-o", plan.to_str().unwrap()];
        if flag {
            args.push("--observe-rows");
        }
        let o = Command::new(env!("CARGO_BIN_EXE_foxc"))
            .args(&args)
            .current_dir(repo())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let (out, err) = foxrun(&[plan.to_str().unwrap(), "--backend", "cpu", "--timing"]);
        assert!(out.contains("3 rows"), "{out}");
        if counted {
            assert!(rows_table(&err).len() > 20, "{err}");
        } else {
            assert!(!err.contains("rows per operator (estimated"), "{err}");
            assert!(err.contains("compile it with `foxc compile --observe-rows`"), "{err}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `fox repl ARGS` on `script`: whether it succeeded, and its standard output then
/// its standard error.
fn repl(args: &[&str], script: &str) -> (bool, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fox"))
        .arg("repl")
        .args(args)
        .current_dir(repo())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(script.as_bytes()).unwrap();
    }
    let o = child.wait_with_output().unwrap();
    (
        o.status.success(),
        String::from_utf8(o.stdout).unwrap() + &String::from_utf8(o.stderr).unwrap(),
    )
}

#[test]
fn the_repl_plans_queries_with_the_statistics_of_their_data() {
    // tests/programs/data/edge.csv holds 3 edges: the scan of `edge` is estimated at 3
    // rows, by `.explain` (which loads the data) and `.explain analyze` alike.
    let script = ".load queries/transitive_closure.logic\n.explain ?- edge(x, y).\n.explain analyze ?- edge(1, y).\n";
    let (_, out) = repl(&["--backend", "cpu", "--data", "tests/programs/data"], script);
    let scan = out
        .lines()
        .position(|l| l.contains("= scan edge"))
        .unwrap_or_else(|| panic!("{out}"));
    let ann = out.lines().nth(scan + 1).unwrap();
    assert!(ann.contains("rows ~3 "), "{ann}\n{out}");
    let row = out
        .lines()
        .find(|l| l.contains(" scan edge "))
        .unwrap_or_else(|| panic!("{out}"));
    let w: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(w[w.len() - 3..w.len() - 1], ["3", "3"], "{row}");
    // Without the data, `.explain` still shows the plan, with the default estimates.
    let (_, out) = repl(&["--backend", "cpu", "--data", "/nonexistent"], script);
    let scan = out
        .lines()
        .position(|l| l.contains("= scan edge"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(out.lines().nth(scan + 1).unwrap().contains("rows ~1.0M"), "{out}");
}

/// The loaded columns of a program are those its kernel plan made without statistics
/// reads (`Compiled::inputs`): the plans made with the statistics of the data, and with
/// observations, must read no other column.
#[test]
fn statistics_and_observations_change_no_column_a_plan_reads() {
    let programs: Vec<_> = programs()
        .into_iter()
        .map(|path| {
            let p = fox_cli::compile_program(
                std::slice::from_ref(&path),
                false,
                "test",
                &fox_ra::PlanOptions::default(),
            )
            .unwrap()
            .unwrap();
            (0, p, std::time::Duration::ZERO)
        })
        .collect();
    // The statistics of TPC-H data, with every table the programs read.
    let tpch: Vec<_> = programs
        .iter()
        .filter(|(_, p, _)| p.name.contains("tpch"))
        .map(|(q, p, t)| {
            let again = fox_cli::compile_program(
                &[PathBuf::from(&p.name)],
                false,
                "test",
                &fox_ra::PlanOptions::default(),
            )
            .unwrap()
            .unwrap();
            (*q, again, *t)
        })
        .collect();
    let db = fox_cli::tpch::load_programs(&fox_runtime::DataSource::Tpch(0.01), &tpch, false).unwrap();
    let stats = fox_runtime::stats::of_database(&db);
    assert!(!stats.is_empty());
    for (_, p, _) in &programs {
        let loaded = p.inputs().unwrap();
        for options in [
            LowerOptions::default(),
            LowerOptions {
                observe_rows: true,
                ..Default::default()
            },
        ] {
            let plan = p.kernel_plan(&stats, &options).unwrap();
            let read = fox_runtime::database::used_input_columns(&plan);
            for ((input, want), got) in loaded.iter().zip(&read) {
                assert_eq!(want, got, "{}: the columns of `{}` read", p.name, input.name);
            }
        }
    }
}
