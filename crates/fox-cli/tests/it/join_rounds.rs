//! Joins whose rows only an aggregation reads are written in rounds under a small
//! `--memory-limit`: one window of their pairs at a time, each aggregated, the rounds'
//! aggregates combined. The results are byte for byte those of the run without a limit,
//! and `--timing` counts the rounds. A join whose rows are materialised must fit: beyond
//! the limit it is an out-of-memory error naming the rule, never an abort.

use crate::common::{foxrun_cpu_timed as foxrun, next, repo, temp_dir, timing_rounds as rounds};
use std::process::Command;

/// `a.csv` and `b.csv` of `n` rows `key, value` each (keys below `keys`, values below
/// 1000), and the program `rules` over `a(k, v)` and `b(k, v)`.
fn program(tag: &str, n: usize, keys: u64, rules: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = temp_dir("fox-join-rounds", tag);
    let mut seed = 7;
    for f in ["a.csv", "b.csv"] {
        let rows: String = (0..n)
            .map(|_| format!("{},{}\n", next(&mut seed) % keys, next(&mut seed) % 1000))
            .collect();
        std::fs::write(dir.join(f), rows).unwrap();
    }
    let p = dir.join("q.logic");
    std::fs::write(
        &p,
        format!("a(k, v) -> int32(k), int32(v).\nb(k, v) -> int32(k), int32(v).\n.input a.\n.input b.\n{rules}"),
    )
    .unwrap();
    (dir, p)
}

/// A program over `n` rows a side with keys below `keys`, whose `rules` aggregate joins
/// that take `windows` windows without a limit: one per join, two per inequality join
/// (one of its probing rows, one of its pairs).
struct Case<'a> {
    tag: &'a str,
    n: usize,
    keys: u64,
    rules: &'a str,
    windows: u64,
}

/// Runs the program without a limit and under `limit` (small beside the pairs, but above
/// what the run holds besides them, so that a window holds many pairs): the same standard
/// output, the windows of `c` without the limit and more than `min_rounds` under it.
fn same_in_rounds(c: &Case, join: &str, limit: &str, min_rounds: u64) -> String {
    let Case {
        tag,
        n,
        keys,
        rules,
        windows,
    } = *c;
    let (dir, p) = program(tag, n, keys, rules);
    let whole = foxrun(&p, &dir, &["--join", join]);
    let e = String::from_utf8_lossy(&whole.stderr).into_owned();
    assert!(whole.status.success(), "{e}");
    assert_eq!(rounds(&e), windows, "{e}");
    let cut = foxrun(&p, &dir, &["--join", join, "--memory-limit", limit]);
    let e = String::from_utf8_lossy(&cut.stderr).into_owned();
    assert!(cut.status.success(), "{e}");
    assert!(rounds(&e) > min_rounds, "{} rounds: {e}", rounds(&e));
    assert_eq!(cut.stdout, whole.stdout);
    std::fs::remove_dir_all(&dir).unwrap();
    String::from_utf8(whole.stdout).unwrap()
}

#[test]
fn a_count_over_an_inequality_join_in_rounds() {
    // About 2,000 × 2,000 / 2 pairs.
    let case = Case {
        tag: "ineq",
        n: 2_000,
        keys: 1 << 30,
        rules: "n[] = c <- agg<<c = count()>> a(x, v), b(y, w), x < y, v > w.\n.output n.\n",
        windows: 2,
    };
    let out = same_in_rounds(&case, "auto", "1M", 20);
    assert!(out.lines().count() >= 2, "{out}");
}

#[test]
fn a_sum_over_a_band_join_in_rounds() {
    let case = Case {
        tag: "band",
        n: 3_000,
        keys: 100_000,
        rules: "s[] = t <- agg<<t = sum(v + w)>> a(x, v), b(y, w), y >= x - 2000, y <= x + 2000.\n.output s.\n",
        windows: 1,
    };
    let out = same_in_rounds(&case, "auto", "256K", 5);
    assert!(out.lines().count() >= 2, "{out}");
}

#[test]
fn an_equi_join_of_heavy_duplicates_aggregated_in_rounds_by_every_algorithm() {
    // 2,000 rows a side over 8 keys: about 500,000 pairs, grouped by key.
    let rules = "n[k] = c <- agg<<c = count()>> a(k, v), b(k, w).\n\
                 s[k] = t <- agg<<t = sum(w)>> a(k, v), b(k, w), v < 500.\n\
                 m[k] = t <- agg<<t = max(v - w)>> a(k, v), b(k, w).\n\
                 .output n.\n.output s.\n.output m.\n";
    let mut outs = Vec::new();
    for join in ["merge", "hash", "inl"] {
        let tag = format!("dups-{join}");
        let case = Case {
            tag: &tag,
            n: 2_000,
            keys: 8,
            rules,
            windows: 3,
        };
        outs.push(same_in_rounds(&case, join, "64K", 20));
    }
    assert!(outs.iter().all(|o| *o == outs[0]), "{outs:?}");
}

#[test]
fn the_physical_plan_says_a_join_read_by_an_aggregation_may_be_written_in_rounds() {
    let (dir, p) = program(
        "emit",
        10,
        4,
        "n[k] = c <- agg<<c = count()>> a(k, v), b(k, w).\n.output n.\n",
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
    assert!(text.contains("may be written in rounds"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_materialised_join_beyond_the_limit_is_an_error_naming_the_rule() {
    let (dir, p) = program("listed", 2_000, 8, "r(v, w) <- a(k, v), b(k, w).\n.output r.\n");
    // Under 64K the join runs in pieces; under 16 bytes not even a piece of it fits.
    let whole = foxrun(&p, &dir, &[]);
    let cut = foxrun(&p, &dir, &["--memory-limit", "64K"]);
    assert!(cut.status.success(), "{}", String::from_utf8_lossy(&cut.stderr));
    assert_eq!(cut.stdout, whole.stdout);
    let o = foxrun(&p, &dir, &["--memory-limit", "16"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("out of memory: cannot allocate ") && e.contains("bytes"),
        "{e}"
    );
    assert!(e.contains(&format!("{}:5:1", p.display())), "{e}");
    assert!(!e.contains("panicked") && !e.contains("memory allocation of"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_string_comparison_in_rounds_and_after_them_when_no_round_runs() {
    // `s < t` reads the rank table inside the rounds, and the rule after them reads it
    // too: without a pair (no key in common) no round runs.
    let dir = temp_dir("fox-join-rounds", "rank");
    std::fs::write(dir.join("a.csv"), "1,xa\n1,xc\n").unwrap();
    std::fs::write(dir.join("b.csv"), "3,xb\n").unwrap();
    let p = dir.join("q.logic");
    std::fs::write(
        &p,
        "a(k, s) -> int32(k), string(s).\nb(k, t) -> int32(k), string(t).\n.input a.\n.input b.\n\
         n[] = c <- agg<<c = count()>> a(k, s), b(k, t), s < t.\n\
         m(s) <- a(_, s), s < \"xb\".\n.output n.\n.output m.\n",
    )
    .unwrap();
    let o = foxrun(&p, &dir, &[]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{e}");
    assert_eq!(rounds(&e), 0, "{e}");
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("xa") && !out.contains("xc"), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_cross_product_only_an_aggregation_reads_is_aggregated_per_round() {
    // An inequality join forced to pair every row (merge without keys, nested loop), and
    // a product no band join searches: each round is filtered and aggregated, so the
    // survivors (about a quarter of the 4·10^6 pairs) are never held together.
    for (join, rules) in [
        (
            "merge",
            "m[] = x <- agg<<x = max(v - w)>> a(k, v), b(j, w), k < j, v > w.\n.output m.\n",
        ),
        (
            "nl",
            "m[] = x <- agg<<x = max(v - w)>> a(k, v), b(j, w), k < j, v > w.\n.output m.\n",
        ),
        (
            "auto",
            "c[] = n <- agg<<n = count()>> a(k, v), b(j, w), k * j > v * w.\n.output c.\n",
        ),
    ] {
        let case = Case {
            tag: &format!("cross-agg-{join}"),
            n: 2_000,
            keys: 1 << 10,
            rules,
            windows: 1,
        };
        let out = same_in_rounds(&case, join, "2M", 5);
        assert!(out.lines().count() >= 2, "{join}: {out}");
    }
}

#[test]
fn same_generation_deduplicated_in_rounds_under_a_small_limit_as_at_once() {
    // 600 edges over 80 vertices: each iteration's pairs repeat many times over.
    let dir = temp_dir("fox-join-rounds", "sg");
    let mut seed = 11;
    let edges: String = (0..600)
        .map(|_| format!("{},{}\n", next(&mut seed) % 80, next(&mut seed) % 80))
        .collect();
    std::fs::write(dir.join("edge.csv"), edges).unwrap();
    for q in ["queries/datalog/sg.logic", "queries/datalog/sg_count.logic"] {
        let p = repo().join(q);
        let plan = |extra: &[&str]| {
            let o = Command::new(env!("CARGO_BIN_EXE_foxc"))
                .current_dir(repo())
                .arg("compile")
                .arg(&p)
                .args(["--emit", "physical"])
                .args(extra)
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            String::from_utf8(o.stdout).unwrap()
        };
        // The first rule's join and the loop's second, each up to its unique.
        let text = plan(&[]);
        assert_eq!(
            text.matches("each deduplicated, the rounds' rows merged by t").count(),
            2,
            "{text}"
        );
        let text = plan(&["--disable-pass", "rounds"]);
        assert!(!text.contains("may be written in rounds"), "{text}");
        let whole = foxrun(&p, &dir, &[]);
        let e = String::from_utf8_lossy(&whole.stderr).into_owned();
        assert!(whole.status.success(), "{e}");
        let one = rounds(&e);
        let unrounded = foxrun(&p, &dir, &["--disable-pass", "rounds"]);
        assert!(unrounded.status.success());
        assert_eq!(unrounded.stdout, whole.stdout, "{q}");
        for limit in ["1M", "512K"] {
            let cut = foxrun(&p, &dir, &["--memory-limit", limit]);
            let e = String::from_utf8_lossy(&cut.stderr).into_owned();
            assert!(cut.status.success(), "{q} under {limit}: {e}");
            assert!(
                rounds(&e) > one,
                "{q} under {limit}: {} rounds, {one} at once: {e}",
                rounds(&e)
            );
            assert_eq!(cut.stdout, whole.stdout, "{q} under {limit}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
