//! A join without keys read only by a select whose predicate is not band-shaped is
//! filtered per round: a window of the cross product's pairs at a time (a run of left rows
//! by the whole right side) goes through the predicate and only the survivors are kept,
//! appended in round order. The results are byte for byte those of the cross product
//! filtered at once (the plan without the `rounds` pass), in one round or in many under a
//! small `--memory-limit`, and a product far beyond memory completes when few pairs
//! survive.

use crate::common::{foxrun_cpu_timed as foxrun, next, repo, temp_dir, timing_rounds as rounds};
use std::path::PathBuf;
use std::process::{Command, Output};

const SCHEMA: &str = "a(k, u, f, s) -> int32(k), int32(u), float64(f), string(s).\n\
                      b(k, v, g, t) -> int32(k), int32(v), float64(g), string(t).\n\
                      .input a.\n.input b.\n";

/// Rules whose joins have no keys and whose selects no band join can search.
const RULES: &str = "prod(x, y) <- a(x, u, _, _), b(y, v, _, _), u * v > 250000.\n\
                     sum7(x, y) <- a(x, _, f, _), b(y, _, g, _), f + g = 7.0.\n\
                     diff(x, s, t) <- a(x, _, _, s), b(_, _, _, t), s != t, x < 3.\n\
                     odd(x, y, u) <- a(x, u, f, _), b(y, v, _, _), abs(u - 2 * v) < f + 2.0.\n\
                     none() <- a(_, u, _, _), b(_, v, _, _), u * v > 2000000.\n\
                     .output prod.\n.output sum7.\n.output diff.\n.output odd.\n.output none.\n";

/// `a.csv` of `na` rows and `b.csv` of `nb` rows (`k` the row number, `u` below 1000, `f`
/// a small float in steps of 0.5, `s` one of 5 strings), and the program `rules`.
fn program(tag: &str, na: usize, nb: usize, rules: &str) -> (PathBuf, PathBuf) {
    let dir = temp_dir("fox-cross-rounds", tag);
    let mut seed = 11;
    for (f, n) in [("a.csv", na), ("b.csv", nb)] {
        let rows: String = (0..n)
            .map(|i| {
                let u = next(&mut seed) % 1000;
                let f = (next(&mut seed) % 16) as f64 / 2.0;
                let s = next(&mut seed) % 5;
                format!("{i},{u},{f},s{s}\n")
            })
            .collect();
        std::fs::write(dir.join(f), rows).unwrap();
    }
    let p = dir.join("q.logic");
    std::fs::write(&p, format!("{SCHEMA}{rules}")).unwrap();
    (dir, p)
}

fn ok(o: &Output) -> String {
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{e}");
    e
}

/// The joins of `RULES` on `na` × `nb` rows: the cross product filtered at once, the
/// joins filtered per round (one round each without a limit, more than `min_rounds` under
/// `limit`): the same bytes. Returns the standard output.
fn same_per_round(tag: &str, na: usize, nb: usize, limit: &str, min_rounds: u64) -> String {
    let (dir, p) = program(tag, na, nb, RULES);
    let whole = foxrun(&p, &dir, &["--disable-pass", "rounds"]);
    let e = ok(&whole);
    assert_eq!(rounds(&e), 0, "{e}");
    let one = foxrun(&p, &dir, &[]);
    let e = ok(&one);
    assert_eq!(one.stdout, whole.stdout);
    let joins = if na == 0 || nb == 0 { 0 } else { 5 };
    assert_eq!(rounds(&e), joins, "{e}");
    let cut = foxrun(&p, &dir, &["--memory-limit", limit]);
    let e = ok(&cut);
    if joins == 0 {
        assert_eq!(rounds(&e), 0, "{e}");
    } else {
        assert!(rounds(&e) > min_rounds, "{} rounds: {e}", rounds(&e));
    }
    assert_eq!(cut.stdout, whole.stdout);
    std::fs::remove_dir_all(&dir).unwrap();
    String::from_utf8(whole.stdout).unwrap()
}

#[test]
fn filtered_per_round_as_the_cross_product_filtered_at_once() {
    let out = same_per_round("small", 300, 200, "1M", 10);
    // Every relation has survivors but `none`.
    for name in ["prod", "sum7", "diff", "odd"] {
        let rows = out
            .split("\n\n")
            .find(|s| s.starts_with(name))
            .map_or(0, |s| s.lines().count());
        assert!(rows > 2, "{name}: {out}");
    }
}

#[test]
fn an_empty_side_and_one_row_sides_per_round() {
    for (tag, na, nb) in [
        ("empty-l", 0, 50),
        ("empty-r", 50, 0),
        ("one-l", 1, 300),
        ("one-r", 300, 1),
        ("one", 1, 1),
    ] {
        let min: u64 = if na == 0 || nb == 0 { 0 } else { 4 };
        // A limit of which one round holds a single pair or a few.
        let _ = same_per_round(tag, na, nb, if min == 0 { "1M" } else { "40K" }, min.saturating_sub(1));
    }
}

/// A join of `na` × `nb` rows (`u`, `v` below 10^6) whose survivors are the pairs with
/// `u * v > threshold`, few, under `limit`: the survivors counted here, in more than
/// `min_rounds` rounds; the plan without rounds, which writes the product whole, runs
/// out of memory.
fn beyond_memory(tag: &str, na: usize, nb: usize, threshold: u64, limit: &str, min_rounds: u64) {
    let dir = temp_dir("fox-cross-rounds", tag);
    let mut seed = 5;
    let mut sides = Vec::new();
    for (f, n) in [("a.csv", na), ("b.csv", nb)] {
        let side: Vec<u64> = (0..n).map(|_| next(&mut seed) % 1_000_000).collect();
        let rows: String = side.iter().enumerate().map(|(i, u)| format!("{i},{u},0,x\n")).collect();
        std::fs::write(dir.join(f), rows).unwrap();
        sides.push(side);
    }
    let p = dir.join("q.logic");
    let rules = format!("big(x, y) <- a(x, u, _, _), b(y, v, _, _), u * v > {threshold}.\n.output big.\n");
    let schema = SCHEMA.replace("int32(u)", "int64(u)").replace("int32(v)", "int64(v)");
    std::fs::write(&p, format!("{schema}{rules}")).unwrap();
    let o = foxrun(&p, &dir, &["--memory-limit", limit]);
    let e = ok(&o);
    assert!(rounds(&e) > min_rounds, "{e}");
    let want: usize = sides[0]
        .iter()
        .map(|&u| sides[1].iter().filter(|&&v| u * v > threshold).count())
        .sum();
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(want > 0 && want < 10_000, "{want}");
    // The relation's name, a header, a rule, the rows, and the count.
    assert!(out.contains(&format!("{want} rows")), "{want}: {out}");
    // Without rounds the pairs are written in pieces to the host tier and filtered in
    // chunks: the same rows.
    let o = foxrun(&p, &dir, &["--memory-limit", limit, "--disable-pass", "rounds"]);
    let e = ok(&o);
    assert!(e.contains("in pieces: "), "{e}");
    let again = String::from_utf8(o.stdout).unwrap();
    assert!(again.contains(&format!("{want} rows")), "{want}: {again}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_cross_product_beyond_memory_completes_per_round() {
    // 40,000 × 250 = 10^7 pairs (about 500 MB at the plan's bytes per pair) under 64 MB.
    beyond_memory("large", 40_000, 250, 996_800_000_000, "64M", 20);
}

/// 40,000 × 40,000 = 1.6·10^9 pairs (about 80 GB at the plan's bytes per pair), a few
/// hundred of which survive, under 512 MB. Minutes of CPU in a debug build: run with
/// `cargo test --release -p fox-cli --test it -- --ignored cross_rounds`.
#[test]
#[ignore]
fn a_cross_product_of_40000_by_40000_rows_completes_per_round() {
    beyond_memory("huge", 40_000, 40_000, 999_500_000_000, "512M", 100);
}

#[test]
fn the_physical_plan_says_a_cross_product_is_filtered_per_round() {
    let (dir, p) = program(
        "emit",
        3,
        3,
        "prod(x, y) <- a(x, u, _, _), b(y, v, _, _), u * v > 10.\n.output prod.\n",
    );
    let o = Command::new(env!("CARGO_BIN_EXE_foxc"))
        .current_dir(repo())
        .arg("compile")
        .arg(&p)
        .args(["--emit", "physical"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("nested loop, filtered per round"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Many rounds, each with survivors: the survivors are kept in runs folded into one
/// another as they grow (`Outgrows` in the plan's kernels) and concatenated once at the
/// end, in round order: the same bytes as the cross product filtered at once, in one
/// round and in hundreds.
#[test]
fn survivors_of_hundreds_of_rounds_keep_their_order() {
    let (dir, p) = program(
        "many",
        2000,
        400,
        "keep(x, y, f) <- a(x, u, f, _), b(y, v, _, _), u * v > 700000.\n.output keep.\n",
    );
    let kernels = Command::new(env!("CARGO_BIN_EXE_foxc"))
        .current_dir(repo())
        .arg("compile")
        .arg(&p)
        .args(["--emit", "kernels"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&kernels.stdout);
    assert!(kernels.status.success(), "{}", String::from_utf8_lossy(&kernels.stderr));
    assert!(text.contains("Outgrows") || text.contains("outgrows"), "{text}");
    let csv = ["--out", "-", "--format", "csv"];
    let whole = foxrun(&p, &dir, &[&csv[..], &["--disable-pass", "rounds"]].concat());
    let e = ok(&whole);
    assert_eq!(rounds(&e), 0, "{e}");
    let rows = whole.stdout.iter().filter(|&&b| b == b'\n').count() - 1;
    assert!(rows > 10_000, "{rows} rows");
    let one = foxrun(&p, &dir, &csv);
    let e = ok(&one);
    assert_eq!(rounds(&e), 1, "{e}");
    assert!(one.stdout == whole.stdout);
    let cut = foxrun(&p, &dir, &[&csv[..], &["--memory-limit", "1M"]].concat());
    let e = ok(&cut);
    assert!(rounds(&e) > 300, "{} rounds: {e}", rounds(&e));
    assert!(cut.stdout == whole.stdout);
    std::fs::remove_dir_all(&dir).unwrap();
}
