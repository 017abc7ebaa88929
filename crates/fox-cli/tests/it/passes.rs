//! The physical passes from the command line: `foxc compile --list-passes`,
//! `--emit physical`, `--after-pass` and `--disable-pass`, whose plans must give the same
//! results as the plans of every pass.

use fox_cli::tpch;
use fox_runtime::DataSource;
use std::process::{Command, Output};
use std::sync::Arc;

use crate::common::repo;
use crate::graph::{cliques, foxrun_count_with};

fn foxc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_foxc"))
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap()
}

fn stdout_ok(args: &[&str]) -> String {
    let o = foxc(args);
    assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// The kernel names of a plan's `--emit kernels`, with how often each occurs.
fn kernels(query: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["compile", query, "--emit", "kernels"];
    args.extend(extra);
    let text = stdout_ok(&args);
    let mut names: Vec<String> = text
        .split("= ")
        .skip(1)
        .filter_map(|s| {
            let n: String = s.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
            (!n.is_empty()).then_some(n)
        })
        .collect();
    names.sort();
    names
}

#[test]
fn list_passes_names_each_pass_in_order_with_what_it_decides() {
    let text = stdout_ok(&["compile", "--list-passes"]);
    let lines: Vec<&str> = text.lines().collect();
    let names = fox_phys::pass_names();
    assert_eq!(lines.len(), names.len(), "{text}");
    for (i, (line, name)) in lines.iter().zip(&names).enumerate() {
        assert!(line.starts_with(&format!("{:>2}. {name} ", i + 1)), "{line}");
        assert!(line.len() > name.len() + 10, "no description: {line}");
    }
    // It takes no program, and nothing else.
    let o = foxc(&["compile", "--list-passes", "queries/triangle.logic"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn emit_physical_shows_each_operator_with_its_algorithm_and_estimated_rows() {
    let text = stdout_ok(&["compile", "tpch/queries/q01.logic", "--emit", "physical"]);
    assert!(
        text.starts_with("physical plan (passes: estimate, join-selection, fusion,"),
        "{text}"
    );
    assert!(text.contains("aggregate t3 by [l_returnflag, l_linestatus]"), "{text}");
    assert!(
        text.contains("fused reduce · sorted on all columns · unique · rows ~"),
        "{text}"
    );
    assert!(text.contains("filter, applied by the fused reduce of t4"), "{text}");
    let ops = text
        .lines()
        .filter(|l| l.trim_start().starts_with('t') && l.contains(" = "))
        .count();
    let notes = text.lines().filter(|l| l.contains(" · rows ")).count();
    assert_eq!(ops, notes, "every operator has its annotations:\n{text}");

    let text = stdout_ok(&["compile", "queries/clique4_count.logic", "--emit", "physical"]);
    assert!(
        text.contains("leapfrog triejoin (smallest-range levels, twins) · rounds at levels 1 (190 bytes/row), 2 (182 bytes/row) ·"),
        "{text}"
    );
    // The level plan, under the join: z expands from the smallest of two ranges, the last
    // level is only counted.
    assert!(
        text.contains(
            "\n      levels: x lead a0 twins a1,a2; y lead a0 search a3=a4; z smallest of a1,a3 search a1,a3,a5; w count a2,a4,a5\n"
        ),
        "{text}"
    );
    let text = stdout_ok(&[
        "compile",
        "queries/clique4_count.logic",
        "--emit",
        "physical",
        "--disable-pass",
        "join-selection",
    ]);
    assert!(!text.contains("levels:") && !text.contains("smallest-range"), "{text}");
}

#[test]
fn after_pass_shows_the_plan_as_that_pass_left_it() {
    let text = stdout_ok(&[
        "compile",
        "tpch/queries/q01.logic",
        "--emit",
        "physical",
        "--after-pass",
        "join-selection",
    ]);
    assert!(
        text.starts_with("physical plan (passes: estimate, join-selection)\n"),
        "{text}"
    );
    assert!(!text.contains("fused reduce"), "{text}");
}

#[test]
fn an_unknown_pass_is_a_command_line_error_listing_the_passes() {
    for flag in ["--disable-pass", "--after-pass"] {
        let o = foxc(&["compile", "queries/triangle.logic", flag, "fusoin"]);
        assert_eq!(o.status.code(), Some(2));
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(
            e.contains("fusoin") && e.contains("join-selection") && e.contains("fusion"),
            "{e}"
        );
    }
}

#[test]
fn disabling_a_pass_changes_the_plan_and_not_the_counts_of_cliques() {
    let dir = std::env::temp_dir().join(format!("fox-passes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let spec = "rmat:9:8:3";
    let (_, k4) = cliques(spec);
    assert!(k4 > 0);
    let all = kernels("queries/clique4_count.logic", &[]);
    for (pass, gone) in [("join-selection", "min_range"), ("rounds", "window")] {
        let without = kernels("queries/clique4_count.logic", &["--disable-pass", pass]);
        assert!(
            all.iter().any(|k| k == gone) && !without.iter().any(|k| k == gone),
            "{pass}: {without:?}"
        );
        let plan = dir.join(format!("{pass}.ron"));
        let plan = plan.to_str().unwrap();
        stdout_ok(&[
            "compile",
            "queries/clique4_count.logic",
            "--disable-pass",
            pass,
            "-o",
            plan,
        ]);
        assert_eq!(foxrun_count_with(plan, &["--graph", spec]), k4, "without {pass}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn without_fusion_every_tpch_query_gives_duckdbs_answer() {
    let all = kernels("tpch/queries/q01.logic", &[]);
    let without = kernels("tpch/queries/q01.logic", &["--disable-pass", "fusion"]);
    assert!(all.iter().any(|k| k == "fused_reduce") && !without.iter().any(|k| k == "fused_reduce"));
    tpch_without("fusion");
}

#[test]
fn without_order_every_tpch_query_gives_duckdbs_answer() {
    let all = kernels("tpch/queries/q03.logic", &[]);
    let without = kernels("tpch/queries/q03.logic", &["--disable-pass", "order"]);
    let sorts = |k: &[String]| k.iter().filter(|k| *k == "sort_perm").count();
    assert!(sorts(&without) > sorts(&all), "{without:?}");
    tpch_without("order");
}

/// The 22 queries compiled without `pass`, run at SF 0.01 on the CPU, against DuckDB's
/// answers.
fn tpch_without(pass: &str) {
    let mut plans = Vec::new();
    for q in 1..=22u32 {
        let path = format!("tpch/queries/q{q:02}.logic");
        let ron = stdout_ok(&["compile", &path, "--disable-pass", pass]);
        let plan = fox_kernel::from_ron(&ron).unwrap();
        plans.push((q, plan, std::time::Duration::ZERO));
    }
    let db = tpch::load(&DataSource::Tpch(0.01), &plans, false).unwrap();
    let mut backend = fox_cpu::CpuBackend::new();
    let runs = tpch::run_queries(&mut backend, Arc::new(db), &plans, 0, false, |_| {}).unwrap();
    let mut failures = Vec::new();
    for r in &runs {
        let text = std::fs::read_to_string(repo().join(format!("tests/tpch/sf0.01/q{:02}.csv", r.query))).unwrap();
        let mut want = tpch::parse_csv(&text);
        want.remove(0);
        if let Err(e) = tpch::compare_rows(&tpch::result_rows(&r.output), &want, 0.01) {
            failures.push(format!("Q{}: {e}", r.query));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Two group columns that are one buffer (`j = i`) still aggregate in one fused kernel,
/// which reads the buffer twice.
#[test]
fn a_fused_aggregation_groups_on_one_column_twice() {
    let dir = std::env::temp_dir().join(format!("fox-passes-alias-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("sale.csv"), "1,5\n1,6\n2,1\n3,4\n").unwrap();
    let q = dir.join("q.logic");
    std::fs::write(
        &q,
        "sale(i, a) -> int32(i), int32(a).\n.input sale.\n\
         t[i, j] = n <- agg<<n = sum(a)>> sale(i, a), j = i, a > 1.\n.output t.\n",
    )
    .unwrap();
    let q = q.to_str().unwrap();
    assert!(kernels(q, &[]).iter().any(|k| k == "fused_reduce"));
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .args([
            q,
            "--data",
            dir.to_str().unwrap(),
            "--backend",
            "cpu",
            "--format",
            "csv",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "i,j,n\n1,1,11\n3,3,4\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn devices_place_results_and_show_each_exchange() {
    let text = stdout_ok(&[
        "compile",
        "queries/datalog/tc.logic",
        "--devices",
        "2",
        "--emit",
        "physical",
    ]);
    assert!(text.contains("relation edge: hash(#0) over 2"), "{text}");
    assert!(text.contains("relation path: hash(#1) over 2"), "{text}");
    assert!(text.contains("exchanged by hash(#1)"), "{text}");
    // One device: nothing is placed or moved.
    let one = stdout_ok(&["compile", "queries/datalog/tc.logic", "--emit", "physical"]);
    assert!(!one.contains("exchanged") && !one.contains(" over 2"), "{one}");
    let kernels = stdout_ok(&[
        "compile",
        "queries/datalog/tc.logic",
        "--devices",
        "2",
        "--emit",
        "kernels",
    ]);
    assert!(kernels.contains("exchange[hash #"), "{kernels}");
    for bad in ["0", "x", "-1"] {
        let o = foxc(&["compile", "queries/datalog/tc.logic", "--devices", bad]);
        assert_eq!(o.status.code(), Some(2), "--devices {bad}");
    }
}
