//! Inequality joins as a user runs them: the interval-overlap self-join of 50,000
//! intervals (2.5 billion pairs as a cross product, which does not fit a CI machine)
//! gives the overlapping pairs, counted and listed, on the CPU backend.

use crate::common::{next, repo, temp_dir};
use std::collections::HashSet;
use std::process::Command;

#[test]
fn an_interval_overlap_self_join_of_50000_intervals_runs_in_memory() {
    let dir = temp_dir("ineq", "overlap");
    let n = 50_000usize;
    let mut seed = 11;
    let mut text = String::new();
    let mut iv = Vec::new();
    for i in 0..n {
        let s = (next(&mut seed) % 10_000_000) as i64;
        let e = s + 1 + (next(&mut seed) % 1_000) as i64;
        text.push_str(&format!("{i},{s},{e}\n"));
        iv.push((s, e));
    }
    std::fs::write(dir.join("iv.csv"), text).unwrap();
    let prog = dir.join("overlap.logic");
    std::fs::write(
        &prog,
        "iv(x, s, e) -> int(x), int(s), int(e).\n.input iv.\n\
         ov(x, y) <- iv(x, s1, e1), iv(y, s2, e2), e2 > s1, s2 < e1, x < y.\n\
         n[] = c <- agg<<c = count()>> ov(_, _).\n.output n.\n.output ov.\n",
    )
    .unwrap();
    // The ordered pairs (self included) overlap where s2 < e1 and not e2 <= s1; each
    // unordered pair of distinct intervals is two of them.
    let mut starts: Vec<i64> = iv.iter().map(|v| v.0).collect();
    let mut ends: Vec<i64> = iv.iter().map(|v| v.1).collect();
    starts.sort_unstable();
    ends.sort_unstable();
    let ordered: usize = iv
        .iter()
        .map(|&(s, e)| starts.partition_point(|&v| v < e) - ends.partition_point(|&v| v <= s))
        .sum();
    let want = (ordered - n) / 2;
    assert!(want > 10_000, "the intervals overlap ({want})");
    let out = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .current_dir(repo())
        .arg(&prog)
        .args(["--backend", "cpu", "--out"])
        .arg(dir.join("out"))
        .args(["--data"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let count = std::fs::read_to_string(dir.join("out/n.csv")).unwrap();
    assert_eq!(count.lines().last(), Some(want.to_string().as_str()), "{count}");
    let listed = std::fs::read_to_string(dir.join("out/ov.csv")).unwrap();
    let mut lines = listed.lines();
    assert_eq!(lines.next(), Some("x,y"), "the header");
    // As many distinct pairs as the count, each an overlapping pair with x < y: exactly
    // the answer.
    let mut seen = HashSet::new();
    for line in lines {
        let (x, y) = line.split_once(',').unwrap_or_else(|| panic!("a pair: {line}"));
        let (x, y): (usize, usize) = (x.parse().unwrap(), y.parse().unwrap());
        let ((s1, e1), (s2, e2)) = (iv[x], iv[y]);
        assert!(x < y && s1 < e2 && s2 < e1, "{line} does not overlap");
        assert!(seen.insert((x, y)), "{line} twice");
    }
    assert_eq!(seen.len(), want, "one line per pair");
}

#[test]
fn the_plan_names_the_inequality_join() {
    let dir = temp_dir("ineq", "plan");
    let prog = dir.join("overlap.logic");
    std::fs::write(
        &prog,
        "iv(x, s, e) -> int(x), int(s), int(e).\n.input iv.\n\
         ov(x, y) <- iv(x, s1, e1), iv(y, s2, e2), s1 < e2, s2 < e1.\n.output ov.\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_foxc"))
        .current_dir(repo())
        .args(["compile", "--emit", "physical"])
        .arg(&prog)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("inequality join t"), "{text}");
    assert!(text.contains("probed by t"), "{text}");
}
