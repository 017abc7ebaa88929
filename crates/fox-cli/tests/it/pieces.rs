//! Joins, searches and aggregations by key whose own arguments do not fit the
//! `--memory-limit` run in pieces (sort-merge joins by ranges of left rows with the right
//! rows their keys meet, searched sides in pieces, aggregations cut at group boundaries
//! or merged from chunks, unions of sorted relations cut along their merge path): the
//! results are byte for byte those of the run without a limit, and `--timing` counts the
//! operators run in pieces.

use crate::common::{next, repo, temp_dir};
use std::process::{Command, Output};

fn foxrun(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .current_dir(repo())
        .args(["--backend", "cpu", "--timing", "--no-progress", "--format", "csv"])
        .args(args)
        .output()
        .unwrap()
}

/// The operators `--timing` says ran in pieces (0 without the line).
fn in_pieces(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("in pieces: "))
        .and_then(|l| l.split_whitespace().next())
        .map_or(0, |n| n.parse().unwrap())
}

#[test]
fn tpch_joins_and_aggregations_by_key_at_sf_0_1_under_budgets_far_below_their_peaks() {
    // The budgets are a fiftieth to a three-hundredth of each query's device peak without
    // a limit (Q9 about 48 MB, Q18 25 MB, Q3 19 MB, Q5 31 MB).
    for (q, limit) in [("q03", "256K"), ("q05", "128K"), ("q09", "512K"), ("q18", "128K")] {
        let path = format!("tpch/queries/{q}.logic");
        let whole = foxrun(&[&path, "--tpch", "0.1"]);
        let e = String::from_utf8_lossy(&whole.stderr).into_owned();
        assert!(whole.status.success(), "{e}");
        assert_eq!(in_pieces(&e), 0, "{e}");
        let cut = foxrun(&[&path, "--tpch", "0.1", "--memory-limit", limit]);
        let e = String::from_utf8_lossy(&cut.stderr).into_owned();
        assert!(cut.status.success(), "{q} under {limit}: {e}");
        assert!(in_pieces(&e) >= 3, "{q} under {limit}: {e}");
        let at = e.find("device peak ").expect("a device peak") + "device peak ".len();
        let peak: u64 = e[at..].split_whitespace().next().unwrap().parse().unwrap();
        assert!(
            peak <= fox_cli::parse_memory_size(limit).unwrap(),
            "{q} under {limit}: {e}"
        );
        assert!(cut.stdout == whole.stdout, "{q} under {limit}: outputs differ");
    }
}

#[test]
fn every_tpch_query_at_sf_0_01_keeps_a_48k_limit_and_q1_q6_and_q9_smaller_ones() {
    // Q1's groups are thousands of rows each: under 16K a group is aggregated in pieces
    // of a row or two, and the pieces' partial rows are combined as they come, never
    // more of them at once than a piece's rows; so are Q6's chunks' partial sums under
    // 8K. Under 4K, Q9's `like` runs over chunks of a few rows.
    for q in 1..=22 {
        let path = format!("tpch/queries/q{q:02}.logic");
        let whole = foxrun(&[&path, "--tpch", "0.01"]);
        assert!(whole.status.success(), "{}", String::from_utf8_lossy(&whole.stderr));
        let limits: &[&str] = match q {
            1 => &["48K", "16K"],
            6 => &["48K", "8K"],
            9 => &["48K", "4K"],
            _ => &["48K"],
        };
        for limit in limits {
            let cut = foxrun(&[&path, "--tpch", "0.01", "--memory-limit", limit]);
            let e = String::from_utf8_lossy(&cut.stderr).into_owned();
            assert!(cut.status.success(), "{path} under {limit}: {e}");
            assert!(cut.stdout == whole.stdout, "{path} under {limit}: outputs differ");
        }
    }
}

#[test]
fn a_concatenation_that_does_not_fit_is_made_on_the_host() {
    // The corpus's interval program under 32K, its joins written whole: the rows of a
    // union concatenated take more than the limit leaves, and are put together on the
    // host instead.
    let p = "tests/programs/intervals.logic";
    let whole = foxrun(&[p, "--data", "tests/programs/data", "--disable-pass", "rounds"]);
    assert!(whole.status.success(), "{}", String::from_utf8_lossy(&whole.stderr));
    for limit in ["32K", "24K"] {
        let cut = foxrun(&[
            p,
            "--data",
            "tests/programs/data",
            "--disable-pass",
            "rounds",
            "--memory-limit",
            limit,
        ]);
        let e = String::from_utf8_lossy(&cut.stderr).into_owned();
        assert!(cut.status.success(), "under {limit}: {e}");
        assert!(cut.stdout == whole.stdout, "under {limit}: outputs differ");
    }
}

#[test]
fn strings_made_at_run_time_are_ordered_by_rank_under_a_limit_below_their_rank_table() {
    // 3,000 strings and 3,000 more made by the rule: the dictionary's rank table (about
    // 24 KiB) is more than a quarter of each limit, so the output's sort runs over the
    // strings' ranks made on the host; appended strings make ranks differ from codes,
    // and the limit keeps the rows the sort puts first.
    let dir = temp_dir("fox-pieces", "ranks");
    let mut seed = 3u64;
    let rows: String = (0..3000)
        .map(|i| {
            let w: String = (0..4).map(|_| (b'a' + (next(&mut seed) % 10) as u8) as char).collect();
            format!("{w},{i}\n")
        })
        .collect();
    std::fs::write(dir.join("w.csv"), rows).unwrap();
    let p = dir.join("q.logic");
    std::fs::write(
        &p,
        "w(s, y) -> string(s), int32(y).\n.input w.\n\
         t(c, y) <- w(s, y), c = concat(substr(s, 2, 2), s).\n.output t order by c desc limit 50.\n",
    )
    .unwrap();
    let (p, d) = (p.to_str().unwrap(), dir.to_str().unwrap());
    let whole = foxrun(&[p, "--data", d]);
    assert!(whole.status.success(), "{}", String::from_utf8_lossy(&whole.stderr));
    for limit in ["4K", "16K"] {
        let cut = foxrun(&[p, "--data", d, "--memory-limit", limit]);
        let e = String::from_utf8_lossy(&cut.stderr).into_owned();
        assert!(cut.status.success(), "under {limit}: {e}");
        assert!(in_pieces(&e) > 0, "under {limit}: {e}");
        assert!(cut.stdout == whole.stdout, "under {limit}: outputs differ");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_output_ordered_by_strings_and_limited_runs_under_16k_with_its_operators_at_its_directive() {
    // Q10's output is ordered by strings: its sort's runs read the strings' ranks, made
    // on the host where the dictionary's rank table (23.5 KiB at SF 0.01) is more than a
    // quarter of the limit, and its limit's slice is taken on the host.
    let q = "tpch/queries/q10.logic";
    let whole = foxrun(&[q, "--tpch", "0.01"]);
    assert!(whole.status.success(), "{}", String::from_utf8_lossy(&whole.stderr));
    for limit in ["16K", "8K"] {
        let cut = foxrun(&[q, "--tpch", "0.01", "--memory-limit", limit]);
        let e = String::from_utf8_lossy(&cut.stderr).into_owned();
        assert!(cut.status.success(), "under {limit}: {e}");
        assert!(cut.stdout == whole.stdout, "under {limit}: outputs differ");
    }
    // The output's sort and slice carry the span of its directive, where their errors
    // point.
    let plan = fox_cli::load_plan(&repo().join(q), false, "test").unwrap().unwrap();
    let mut seen = 0;
    for b in &plan.blocks {
        for i in &b.instrs {
            if let fox_kernel::Instr::Launch {
                kernel: fox_kernel::Kernel::SortPerm { .. } | fox_kernel::Kernel::Slice { .. },
                origin,
                ..
            } = i
            {
                let span = origin.expect("an output's operator has an origin");
                let (file, at) = plan.locate(span).expect("in the program");
                let text = &file.text[at.start as usize..at.end as usize];
                if text.starts_with(".output q10") {
                    seen += 1;
                }
            }
        }
    }
    assert!(seen >= 2, "the output's sort and slice are at its directive ({seen})");
}

/// A program over `e.csv` (and `one.csv`) run without a limit and under each of
/// `limits`: the same output, some operator in pieces.
fn same_in_pieces(program: &str, e_rows: &str, limits: &[&str]) {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let k = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = temp_dir("fox-pieces", &format!("prog{k}"));
    std::fs::write(dir.join("e.csv"), e_rows).unwrap();
    let p = dir.join("q.logic");
    std::fs::write(&p, program).unwrap();
    let (p, d) = (p.to_str().unwrap(), dir.to_str().unwrap());
    // Joins written whole (not in rounds), which run in pieces.
    let whole = foxrun(&[p, "--data", d, "--disable-pass", "rounds"]);
    let e = String::from_utf8_lossy(&whole.stderr).into_owned();
    assert!(whole.status.success(), "{e}");
    assert_eq!(in_pieces(&e), 0, "{e}");
    for limit in limits {
        let cut = foxrun(&[p, "--data", d, "--disable-pass", "rounds", "--memory-limit", limit]);
        let e = String::from_utf8_lossy(&cut.stderr).into_owned();
        assert!(cut.status.success(), "{program} under {limit}: {e}");
        assert!(in_pieces(&e) > 0, "{program} under {limit}: {e}");
        assert!(
            String::from_utf8_lossy(&cut.stdout) == String::from_utf8_lossy(&whole.stdout),
            "{program} under {limit}: outputs differ"
        );
        // The same joins written in rounds (the default plan) keep the limit too: what
        // every round reads goes to the host tier where it leaves no room for a round.
        let rounds = foxrun(&[p, "--data", d, "--memory-limit", limit]);
        let e = String::from_utf8_lossy(&rounds.stderr).into_owned();
        assert!(rounds.status.success(), "{program} in rounds under {limit}: {e}");
        assert!(
            rounds.stdout == whole.stdout,
            "{program} in rounds under {limit}: outputs differ"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Rows `x,y`: keys skewed (a third of them on key 7), the rest spread.
fn skewed_rows(n: usize, seed: u64) -> String {
    let mut seed = seed;
    (0..n)
        .map(|i| {
            let x = if i % 3 == 0 { 7 } else { next(&mut seed) % 400 };
            format!("{x},{}\n", next(&mut seed) % 1000)
        })
        .collect()
}

#[test]
fn a_join_gives_the_same_rows_under_every_limit_from_8k_to_40k() {
    // Near 16K the join's own arguments take nearly all of the limit, so a piece of
    // them sliced on the device has no room beside them: the argument moves to the host
    // tier and its pieces come from there.
    let dir = temp_dir("fox-pieces", "sweep");
    std::fs::write(dir.join("e.csv"), skewed_rows(4000, 5)).unwrap();
    let p = dir.join("q.logic");
    std::fs::write(
        &p,
        "e(x, y) -> int32(x), int32(y).\n.input e.\nj(a, b, c) <- e(a, b), e(c, b).\n.output j.\n",
    )
    .unwrap();
    let (p, d) = (p.to_str().unwrap(), dir.to_str().unwrap());
    let whole = foxrun(&[p, "--data", d]);
    assert!(whole.status.success(), "{}", String::from_utf8_lossy(&whole.stderr));
    for k in (8..=40).step_by(4) {
        let limit = format!("{k}K");
        for rounds in [true, false] {
            let mut args = vec![p, "--data", d, "--memory-limit", &limit];
            if !rounds {
                args.extend(["--disable-pass", "rounds"]);
            }
            let o = foxrun(&args);
            let e = String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success(), "under {limit}, rounds {rounds}: {e}");
            assert!(
                o.stdout == whole.stdout,
                "under {limit}, rounds {rounds}: outputs differ"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn joins_of_skewed_keys_one_key_everywhere_one_row_and_an_empty_side_in_pieces() {
    let decl = "e(x, y) -> int32(x), int32(y).\n.input e.\n";
    // Skew: key 7 meets a long run on both sides (a join of 4000 rows with itself).
    same_in_pieces(
        &format!("{decl}j(a, b, c) <- e(a, b), e(c, b).\n.output j.\n"),
        &skewed_rows(4000, 5),
        &["96K", "48K"],
    );
    same_in_pieces(
        &format!("{decl}j(a, x, c) <- e(x, a), e(x, c).\n.output j.\n"),
        &skewed_rows(4000, 9),
        &["96K", "48K"],
    );
    // One key on every row: every pair of rows meets (a key group larger than a piece).
    let same: String = (0..400).map(|i| format!("1,{i}\n")).collect();
    same_in_pieces(
        &format!("{decl}j(a, b) <- e(k, a), e(k, b).\n.output j.\n"),
        &same,
        &["128K", "64K"],
    );
    // One row on one side, and an empty side.
    same_in_pieces(
        &format!(
            "{decl}one(x) <- e(x, _), x = 7.\nj(x, y) <- one(x), e(x, y).\n\
             none(x) <- e(x, _), x > 100000.\nk(x, y) <- e(x, y), none(y).\n\
             m(x, y) <- e(x, y), !none(x).\n.output j.\n.output k.\n.output m.\n"
        ),
        &skewed_rows(6000, 13),
        &["64K"],
    );
}

#[test]
fn aggregations_by_key_of_skewed_and_single_groups_in_pieces() {
    let decl = "e(x, y) -> int32(x), int32(y).\n.input e.\n";
    let prog = format!(
        "{decl}n[x] = c <- agg<<c = count()>> e(x, _).\ns[x] = t <- agg<<t = sum(y)>> e(x, y).\n\
         lo[x] = t <- agg<<t = min(y)>> e(x, y).\nhi[x] = t <- agg<<t = max(y)>> e(x, y).\n\
         .output n.\n.output s.\n.output lo.\n.output hi.\n"
    );
    same_in_pieces(&prog, &skewed_rows(20_000, 17), &["96K", "48K"]);
    // Every row in one group.
    let same: String = (0..20_000).map(|i| format!("3,{}\n", i % 977)).collect();
    same_in_pieces(&prog, &same, &["64K"]);
}

#[test]
fn a_group_too_large_for_the_limit_whose_aggregate_does_not_combine_is_an_error_naming_it() {
    let dir = temp_dir("fox-pieces", "avg");
    let rows: String = (0..20_000).map(|i| format!("3,{i}\n")).collect();
    std::fs::write(dir.join("e.csv"), rows).unwrap();
    let p = dir.join("q.logic");
    std::fs::write(
        &p,
        "e(x, y) -> int32(x), int32(y).\n.input e.\na[x] = t <- agg<<t = avg(y)>> e(x, y).\n.output a.\n",
    )
    .unwrap();
    let (p, d) = (p.to_str().unwrap(), dir.to_str().unwrap());
    // The group's 20,000 rows take 156 KiB: under 64K it cannot be read at once, and an
    // average does not combine from parts.
    let o = foxrun(&[p, "--data", d, "--memory-limit", "64K"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("the group of one key has 20000 rows"), "{e}");
    assert!(e.contains("its arguments alone take 156.2 KiB on the device"), "{e}");
    assert!(e.contains("(reduce_by_key)"), "{e}");
    assert!(e.contains(&format!("{p}:3:")), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    // With room for the group the answer is the unlimited run's.
    let whole = foxrun(&[p, "--data", d]);
    let cut = foxrun(&[p, "--data", d, "--memory-limit", "200K"]);
    assert!(cut.status.success(), "{}", String::from_utf8_lossy(&cut.stderr));
    assert_eq!(cut.stdout, whole.stdout);
    assert!(String::from_utf8_lossy(&whole.stdout).contains("3,9999.500000"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A program over the files `files` (name, rows) run with `extra` arguments, without a
/// limit and under each of `limits`: the same output, some operator in pieces. The
/// standard error of each limited run.
fn same_in_pieces_with(files: &[(&str, String)], program: &str, extra: &[&str], limits: &[&str]) -> Vec<String> {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let k = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = temp_dir("fox-pieces-with", &format!("prog{k}"));
    for (name, rows) in files {
        std::fs::write(dir.join(name), rows).unwrap();
    }
    let p = dir.join("q.logic");
    std::fs::write(&p, program).unwrap();
    let (p, d) = (p.to_str().unwrap(), dir.to_str().unwrap());
    let run = |more: &[&str]| foxrun(&[&[p, "--data", d], extra, more].concat());
    let whole = run(&[]);
    let e = String::from_utf8_lossy(&whole.stderr).into_owned();
    assert!(whole.status.success(), "{e}");
    assert_eq!(in_pieces(&e), 0, "{e}");
    assert!(!whole.stdout.is_empty());
    let mut errs = Vec::new();
    for limit in limits {
        let cut = run(&["--memory-limit", limit]);
        let e = String::from_utf8_lossy(&cut.stderr).into_owned();
        assert!(cut.status.success(), "{program} under {limit}: {e}");
        assert!(in_pieces(&e) > 0, "{program} under {limit}: {e}");
        assert!(cut.stdout == whole.stdout, "{program} under {limit}: outputs differ");
        errs.push(e);
    }
    std::fs::remove_dir_all(&dir).unwrap();
    errs
}

/// The pieces `--timing` lists for the kernel `kernel` (its launches' pieces summed), or
/// `None` when it is not listed.
fn kernel_pieces(stderr: &str, kernel: &str) -> Option<u64> {
    let lines: Vec<u64> = stderr
        .lines()
        .skip_while(|l| !l.starts_with("in pieces: "))
        .filter_map(|l| {
            // The label (words of its own), the kernel, `N launch(es), P piece(s)`.
            let w: Vec<&str> = l.split_whitespace().collect();
            let at = w.iter().position(|x| x.starts_with("piece"))?;
            let k = w.iter().position(|x| x.starts_with("launch"))?.checked_sub(2)?;
            (w[k] == kernel).then(|| w[at - 1].parse().unwrap())
        })
        .collect();
    (!lines.is_empty()).then(|| lines.iter().sum())
}

/// Rows `x,y` of `n` edges among `v` vertices, drawn uniformly.
fn spread_rows(n: usize, v: u64, seed: u64) -> String {
    let mut seed = seed;
    (0..n)
        .map(|_| format!("{},{}\n", next(&mut seed) % v, next(&mut seed) % v))
        .collect()
}

const JOINS: &str = "e(x, y) -> int32(x), int32(y).\n.input e.\n\
     j(a, b, c) <- e(a, b), e(b, c).\ns(a, b) <- e(a, b), e(b, _).\nt(a, b) <- e(a, b), !e(b, _).\n\
     .output j.\n.output s.\n.output t.\n";

#[test]
fn hash_tables_that_do_not_fit_are_searched_as_sorted_keys_in_pieces() {
    // 3000 rows: a build side's keys take 11.7 KiB and its table 16 KiB.
    let errs = same_in_pieces_with(
        &[("e.csv", spread_rows(3000, 3000, 21))],
        JOINS,
        &["--join", "hash"],
        &["24K", "16K"],
    );
    for e in &errs {
        // The tables not built (no piece on the device), their probes searching.
        assert_eq!(kernel_pieces(e, "hash_build"), Some(0), "{e}");
        assert!(kernel_pieces(e, "hash_probe").unwrap() > 1, "{e}");
        assert!(kernel_pieces(e, "hash_match").unwrap() > 1, "{e}");
    }
    assert!(kernel_pieces(&errs[1], "hash_anti_match").unwrap() > 1, "{}", errs[1]);
    // Skewed keys: a third of the rows on one key, the probes in pieces.
    let errs = same_in_pieces_with(
        &[("e.csv", skewed_rows(3000, 23))],
        JOINS,
        &["--join", "hash"],
        &["16K"],
    );
    assert!(kernel_pieces(&errs[0], "hash_probe").unwrap() > 1, "{}", errs[0]);
}

#[test]
fn nested_loop_writes_over_pieces_of_left_rows() {
    let errs = same_in_pieces_with(
        &[("e.csv", spread_rows(1500, 1500, 29))],
        JOINS,
        &["--join", "nl"],
        &["12K", "8K"],
    );
    for e in &errs {
        assert!(kernel_pieces(e, "nested_loop_write").unwrap() > 2, "{e}");
    }
    // One key on every row: each left row meets every right row.
    let same: String = (0..300).map(|i| format!("1,{i}\n")).collect();
    let prog = "e(x, y) -> int32(x), int32(y).\n.input e.\nj(a, b) <- e(k, a), e(k, b).\n.output j.\n";
    let errs = same_in_pieces_with(&[("e.csv", same)], prog, &["--join", "nl"], &["64K"]);
    assert!(kernel_pieces(&errs[0], "nested_loop_write").unwrap() > 2, "{}", errs[0]);
}

#[test]
fn trie_levels_of_a_triangle_query_in_pieces() {
    // Both directions of 3000 edges among 300 vertices.
    let mut seed = 31;
    let mut edges = std::collections::BTreeSet::new();
    while edges.len() < 6000 {
        let (a, b) = (next(&mut seed) % 300, next(&mut seed) % 300);
        if a != b {
            edges.insert((a, b));
            edges.insert((b, a));
        }
    }
    let rows: String = edges.iter().map(|(a, b)| format!("{a},{b}\n")).collect();
    let prog = std::fs::read_to_string(repo().join("queries/triangle.logic")).unwrap();
    let errs = same_in_pieces_with(&[("edge.csv", rows)], &prog, &[], &["16K", "14K"]);
    assert!(kernel_pieces(&errs[0], "trie_build").unwrap() > 2, "{}", errs[0]);
}

#[test]
fn an_inequality_join_whose_tree_does_not_fit_is_an_error_naming_it_and_its_need() {
    let dir = temp_dir("fox-pieces", "ineq");
    let mut seed = 3;
    let rows: String = (0..3_000)
        .map(|i| {
            let (u, v) = (next(&mut seed) % 100_000, next(&mut seed) % 100_000);
            format!("{i},{u},{v}\n")
        })
        .collect();
    std::fs::write(dir.join("a.csv"), rows).unwrap();
    let p = dir.join("q.logic");
    std::fs::write(
        &p,
        "a(x, u, v) -> int32(x), int32(u), int32(v).\n.input a.\n\
         cr(x, y) <- a(x, u1, v1), a(y, u2, v2), u1 < u2 - 80000, v1 > v2 + 80000.\n.output cr.\n",
    )
    .unwrap();
    let (p, d) = (p.to_str().unwrap(), dir.to_str().unwrap());
    // 3000 values and a tree of 13 levels: 11.7 KiB and 152.3 KiB.
    let o = foxrun(&[p, "--data", d, "--memory-limit", "64K"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("(ineq_tree)") || e.contains("(ineq_ranges)"), "{e}");
    assert!(
        e.contains("is searched whole: its values and tree over 3000 rows need 164.1 KiB on the device"),
        "{e}"
    );
    assert!(e.contains(&format!("{p}:3:")), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    let whole = foxrun(&[p, "--data", d]);
    let cut = foxrun(&[p, "--data", d, "--memory-limit", "512K"]);
    assert!(cut.status.success(), "{}", String::from_utf8_lossy(&cut.stderr));
    assert_eq!(cut.stdout, whole.stdout);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every TPC-H query, read from `.tbl` files at scale factor `sf`, on the CPU backend
/// without a limit and under a sixteenth of its device peak (at least 192 KiB, below which
/// chunks of rows stop halving): the same rows, within the limit, and the kernels that
/// ran in pieces over all of them (Q1's averages by key among them).
/// Every TPC-H query at scale factor `sf` under a sixteenth of its unlimited peak gives
/// its unlimited rows, most of them in pieces, and each of `kernels` ran in pieces in
/// some query.
fn tpch_queries_in_pieces(sf: f64, tag: &str, kernels: &[&str]) {
    let dir = temp_dir("fox-pieces-tpch", tag);
    fox_runtime::tpch::write_tbl(&dir, sf, &|_, _| {}).unwrap();
    let queries: Vec<u32> = (1..=22).collect();
    let plans = fox_cli::tpch::compile_queries(&repo().join("tpch/queries"), &queries).unwrap();
    let mut ran = std::collections::BTreeSet::new();
    let mut failures = Vec::new();
    let mut in_pieces = 0;
    for (q, plan, _) in &plans {
        let run = |limit: Option<u64>| {
            let mut cpu = fox_cpu::CpuBackend::new();
            let opts = fox_runtime::RunOptions {
                data_dir: Some(dir.clone()),
                memory_limit: limit,
                ..fox_runtime::RunOptions::default()
            };
            fox_runtime::run(plan, &mut cpu, &opts)
        };
        let whole = run(None).unwrap();
        assert!(whole.stats.pieces.is_empty(), "Q{q}");
        let peak = whole.stats.peak_bytes as u64;
        let limit = (peak / 16).max(192 << 10);
        let rows = |r: &fox_runtime::RunResult| r.outputs.iter().map(fox_cli::tpch::result_rows).collect::<Vec<_>>();
        match run(Some(limit)) {
            Ok(cut) => {
                assert!(cut.stats.peak_bytes as u64 <= limit, "Q{q}");
                if rows(&cut) != rows(&whole) {
                    failures.push(format!("Q{q} under {limit} bytes: the rows differ"));
                }
                in_pieces += usize::from(!cut.stats.pieces.is_empty());
                // Q1 averages by key in one `FusedReduce`: its sums and counts in pieces.
                if *q == 1 && !cut.stats.pieces.iter().any(|p| p.kernel == "fused_reduce") {
                    failures.push(format!("Q1 under {limit} bytes: its aggregation ran whole"));
                }
                ran.extend(cut.stats.pieces.iter().map(|p| p.kernel.clone()));
            }
            Err(e) => failures.push(format!("Q{q} under {limit} bytes: {e}")),
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The others (the smallest peaks) fit their operators whole and only evict.
    assert!(in_pieces >= 18, "only {in_pieces} queries ran in pieces");
    for k in kernels {
        assert!(ran.contains(*k), "{k} never ran in pieces: {ran:?}");
    }
}

#[test]
fn every_tpch_query_at_sf_0_01_under_a_sixteenth_of_its_peak_in_pieces() {
    // The joins the cost model picks at this scale are mostly index nested-loop joins
    // (`bound_range`); hash probes in pieces are checked with the join forced to hash
    // (`hash_tables_that_do_not_fit_are_searched_as_sorted_keys_in_pieces`).
    tpch_queries_in_pieces(
        0.01,
        "sf0.01",
        &[
            "sort_perm",
            "gather",
            "compact",
            "eval",
            "fused_reduce",
            "bound_range",
            "expand",
        ],
    );
}

#[test]
fn every_tpch_query_at_sf_0_1_under_a_sixteenth_of_its_peak_in_pieces() {
    // At this scale hash joins are chosen too: their probes ran in pieces.
    tpch_queries_in_pieces(
        0.1,
        "sf0.1",
        &[
            "sort_perm",
            "gather",
            "compact",
            "eval",
            "fused_reduce",
            "reduce_by_key",
            "bound_range",
            "hash_probe",
            "merge_union",
            "expand",
        ],
    );
}

/// Rows `p,x,y,z,d,f` of `n` rows: `p` spread first (so that a key's rows are scattered
/// over the input's order), keys `x` with `big` of every ten rows on key 7 and the rest
/// spread over 300, int32 `y` (even), int64 `z`, decimals `d` of two digits and floats
/// `f`. Row `odd` alone has an odd `y`, 7777777.
fn average_rows(n: usize, big: u64, odd: usize, seed: u64) -> String {
    let mut seed = seed;
    (0..n)
        .map(|i| {
            let mut r = || next(&mut seed);
            let p = r() % 1_000_000;
            let x = if r() % 10 < big { 7 } else { r() % 300 };
            let y = match i == odd {
                true => 7_777_777,
                false => 2 * (r() % 1_000_000_000) as i64 - 1_000_000_000,
            };
            let z = (r() % 200_000_000_000) as i64 - 100_000_000_000;
            let d = (r() % 200_000_000) as i64 - 100_000_000;
            let sign = if d < 0 { "-" } else { "" };
            let f = (r() % 2_000_000_000) as f64 / 997.0 - 1_000_000.0;
            format!("{p},{x},{y},{z},{sign}{}.{:02},{f:?}\n", d.abs() / 100, d.abs() % 100)
        })
        .collect()
}

const AVERAGES: &str = "e(p, x, y, z, d, f) -> int32(p), int32(x), int32(y), int64(z), decimal(d), float64(f).\n\
     .input e.\n";

/// The data rows of relation `rel` in `foxrun`'s CSV output (a line naming each relation,
/// its header, its rows).
fn csv_rows<'a>(out: &'a str, rel: &str) -> Vec<&'a str> {
    let mut lines = out.lines().skip_while(|l| *l != rel).skip(2);
    let mut rows = Vec::new();
    for l in lines.by_ref() {
        if !l.contains(',') {
            break;
        }
        rows.push(l);
    }
    rows
}

#[test]
fn averages_by_key_of_integers_and_decimals_fused_with_a_filter_in_pieces() {
    // One key holds 40% of the rows, far more than a piece; one aggregation keeps one
    // row, one none.
    let prog = format!(
        "{AVERAGES}ai[x] = t <- agg<<t = avg(y)>> e(_, x, y, _, _, _), y != 3.\n\
         al(x, t, n) <- agg<<t = avg(z), n = count()>> e(_, x, _, z, _, _), z != 5.\n\
         ad(x, t, s, lo) <- agg<<t = avg(d), s = sum(d), lo = min(y)>> e(_, x, y, _, d, _), d != 1.5.\n\
         am(x, t, u) <- agg<<t = avg(d * 3), u = avg(y + 1)>> e(_, x, y, _, d, _), y > -900000000.\n\
         one(x, t, u) <- agg<<t = avg(d), u = avg(y)>> e(_, x, y, _, d, _), y = 7777777.\n\
         none(x, t) <- agg<<t = avg(y)>> e(_, x, y, _, _, _), y > 2000000000.\n\
         .output ai.\n.output al.\n.output ad.\n.output am.\n.output one.\n.output none.\n"
    );
    let rows = average_rows(20_000, 4, 12_345, 23);
    let dir = temp_dir("fox-pieces", "averages");
    std::fs::write(dir.join("e.csv"), &rows).unwrap();
    std::fs::write(dir.join("q.logic"), &prog).unwrap();
    let whole = foxrun(&[dir.join("q.logic").to_str().unwrap(), "--data", dir.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&whole.stdout);
    assert!(whole.status.success(), "{}", String::from_utf8_lossy(&whole.stderr));
    assert_eq!(csv_rows(&out, "ai").len(), 300, "{out}");
    let one = csv_rows(&out, "one");
    assert!(one.len() == 1 && one[0].ends_with(",7777777.000000"), "{one:?}");
    assert!(csv_rows(&out, "none").is_empty(), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
    let errs = same_in_pieces_with(&[("e.csv", rows)], &prog, &[], &["96K", "32K", "16K"]);
    for e in &errs {
        assert!(kernel_pieces(e, "fused_reduce").is_some_and(|p| p > 6), "{e}");
    }
    // No rows at all: the same (empty) answer under a limit.
    let dir = temp_dir("fox-pieces", "no-averages");
    std::fs::write(dir.join("e.csv"), "").unwrap();
    std::fs::write(dir.join("q.logic"), &prog).unwrap();
    let (p, d) = (dir.join("q.logic"), dir.to_str().unwrap().to_string());
    let whole = foxrun(&[p.to_str().unwrap(), "--data", &d]);
    let cut = foxrun(&[p.to_str().unwrap(), "--data", &d, "--memory-limit", "16K"]);
    assert!(whole.status.success() && cut.status.success());
    assert_eq!(whole.stdout, cut.stdout);
    assert!(csv_rows(&String::from_utf8_lossy(&cut.stdout), "ai").is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn float_averages_by_key_fused_in_pieces_add_in_row_order_and_a_group_too_large_is_an_error() {
    // Float sums depend on the order of the additions: the evaluated rows are sorted on
    // the keys (stably, in chunks merged in order) and each group is summed whole, in
    // the one launch's order. Keys are spread (no group larger than a piece).
    let prog = format!(
        "{AVERAGES}af(x, t, s) <- agg<<t = avg(f), s = sum(f * 3.0)>> e(_, x, _, _, _, f), f != 0.5.\n\
         ax(x, t, u, n) <- agg<<t = avg(f), u = avg(d), n = count()>> e(_, x, _, _, d, f), d != 1.5.\n\
         one(x, t) <- agg<<t = avg(f)>> e(_, x, y, _, _, f), y = 7777777.\n\
         .output af.\n.output ax.\n.output one.\n"
    );
    let rows = average_rows(20_000, 0, 777, 29);
    let errs = same_in_pieces_with(&[("e.csv", rows)], &prog, &[], &["128K", "64K"]);
    for e in &errs {
        assert!(kernel_pieces(e, "fused_reduce").is_some_and(|p| p > 4), "{e}");
    }
    // A float group of 8,000 rows under 64K: read whole, it does not fit.
    let dir = temp_dir("fox-pieces", "float-group");
    std::fs::write(dir.join("e.csv"), average_rows(20_000, 4, 777, 31)).unwrap();
    std::fs::write(dir.join("q.logic"), &prog).unwrap();
    let (p, d) = (dir.join("q.logic"), dir.to_str().unwrap().to_string());
    let o = foxrun(&[p.to_str().unwrap(), "--data", &d, "--memory-limit", "64K"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("the group of one key has"), "{e}");
    assert!(e.contains("(its aggregates do not combine from parts)"), "{e}");
    assert!(e.contains("(fused_reduce)"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn errors_of_aggregations_by_key_fused_in_pieces_name_the_rows_one_launch_names() {
    // One row divides by zero. The filter names a row of the whole input, an aggregate's
    // value a row of those the filter keeps, with and without averages and floats.
    let mut seed = 41;
    let rows: String = (0..20_000)
        .map(|i| {
            let w = if i == 15_000 { 0 } else { 1 + next(&mut seed) % 4 };
            let f = (next(&mut seed) % 1_000_000) as f64 / 7.0;
            format!("{},{f:?},{w},{}\n", next(&mut seed) % 50, i % 3)
        })
        .collect();
    let dir = temp_dir("fox-pieces", "fused-errors");
    std::fs::write(dir.join("e.csv"), rows).unwrap();
    let decl = "e(x, f, w, k) -> int32(x), float64(f), int32(w), int32(k).\n.input e.\n";
    let rules = [
        "a(x, s) <- agg<<s = sum(100 / w)>> e(x, _, w, k), k != 1.",
        "a(x, t, s) <- agg<<t = avg(w), s = sum(100 / w)>> e(x, _, w, k), k != 1.",
        "a(x, t, s) <- agg<<t = avg(f), s = sum(100 / w)>> e(x, f, w, k), k != 1.",
        "a(x, s) <- agg<<s = avg(w)>> e(x, _, w, k), 100 / w > k.",
        "a(x, s) <- agg<<s = avg(f)>> e(x, f, w, k), 100 / w > k.",
    ];
    let d = dir.to_str().unwrap().to_string();
    for (i, rule) in rules.iter().enumerate() {
        let p = dir.join(format!("q{i}.logic"));
        std::fs::write(&p, format!("{decl}{rule}\n.output a.\n")).unwrap();
        let p = p.to_str().unwrap();
        let said = |limit: &[&str]| {
            let o = foxrun(&[&[p, "--data", &d], limit].concat());
            assert_eq!(o.status.code(), Some(1), "{rule}");
            let e = String::from_utf8_lossy(&o.stderr).into_owned();
            let lines: Vec<String> = e
                .lines()
                .filter(|l| l.starts_with("error") || l.contains("the values of row"))
                .map(String::from)
                .collect();
            assert!(lines.len() == 2 && lines[0].contains("division by zero"), "{rule}: {e}");
            lines
        };
        assert_eq!(said(&[]), said(&["--memory-limit", "32K"]), "{rule}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn recursive_unions_of_full_relations_in_pieces_along_their_merge_path() {
    // Transitive closure of 400 edges among 200 vertices (21,000 paths): the full
    // relation's unions with its runs and the stratum's last fold in pieces.
    let mut seed = 37;
    let mut edges = std::collections::BTreeSet::new();
    while edges.len() < 400 {
        let (a, b) = (next(&mut seed) % 200, next(&mut seed) % 200);
        if a != b {
            edges.insert((a, b));
        }
    }
    let rows: String = edges.iter().map(|(a, b)| format!("{a},{b}\n")).collect();
    let prog = std::fs::read_to_string(repo().join("queries/transitive_closure.logic")).unwrap();
    let errs = same_in_pieces_with(&[("edge.csv", rows)], &prog, &[], &["96K", "48K"]);
    for e in &errs {
        assert!(kernel_pieces(e, "merge_union").unwrap() >= 5, "{e}");
    }
    // Same generation over a forest of 400 nodes, a fifth with a second parent (61,000
    // rows): under 256K only its unions run in pieces.
    let mut rows = String::new();
    for c in 1..400u64 {
        let p = c.saturating_sub(1 + next(&mut seed) % 40);
        rows.push_str(&format!("{p},{c}\n"));
        let q = next(&mut seed) % c;
        if c % 5 == 0 && q != p {
            rows.push_str(&format!("{q},{c}\n"));
        }
    }
    let prog = std::fs::read_to_string(repo().join("queries/same_generation.logic")).unwrap();
    let errs = same_in_pieces_with(&[("parent.csv", rows)], &prog, &[], &["256K", "96K"]);
    for e in &errs {
        assert!(kernel_pieces(e, "merge_union").unwrap() >= 5, "{e}");
    }
}
