//! Joins, searches and aggregations by key whose own arguments do not fit the
//! `--memory-limit` run in pieces (sort-merge joins by ranges of left rows with the right
//! rows their keys meet, searched sides in pieces, aggregations cut at group boundaries
//! or merged from chunks): the results are byte for byte those of the run without a
//! limit, and `--timing` counts the operators run in pieces.

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
    let whole = foxrun(&[p, "--data", d]);
    let e = String::from_utf8_lossy(&whole.stderr).into_owned();
    assert!(whole.status.success(), "{e}");
    assert_eq!(in_pieces(&e), 0, "{e}");
    for limit in limits {
        let cut = foxrun(&[p, "--data", d, "--memory-limit", limit]);
        let e = String::from_utf8_lossy(&cut.stderr).into_owned();
        assert!(cut.status.success(), "{program} under {limit}: {e}");
        assert!(in_pieces(&e) > 0, "{program} under {limit}: {e}");
        assert!(
            String::from_utf8_lossy(&cut.stdout) == String::from_utf8_lossy(&whole.stdout),
            "{program} under {limit}: outputs differ"
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
