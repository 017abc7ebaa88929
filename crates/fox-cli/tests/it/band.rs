//! Band joins as a user runs them: a window between two relations of 40,000 rows each
//! (1.6 billion pairs as a cross product, which does not fit a CI machine) gives the
//! pairs within the window, counted and listed, on the CPU backend.

use crate::common::{next, repo, temp_dir};
use std::process::Command;

#[test]
fn a_window_join_of_two_large_relations_runs_in_memory() {
    let dir = temp_dir("band", "window");
    let n = 40_000u64;
    let mut seed = 7;
    let mut times = Vec::new();
    for name in ["a", "b"] {
        let mut text = String::new();
        let mut ts = Vec::new();
        for i in 0..n {
            let t = (next(&mut seed) % 1_000_000) as i64;
            text.push_str(&format!("{i},{t}\n"));
            ts.push(t);
        }
        std::fs::write(dir.join(format!("{name}.csv")), text).unwrap();
        times.push(ts);
    }
    let prog = dir.join("window.logic");
    std::fs::write(
        &prog,
        "a(x, t) -> int(x), int(t).\nb(y, t) -> int(y), int(t).\n.input a.\n.input b.\n\
         near(x, y) <- a(x, t1), b(y, t2), t2 >= t1, t2 <= t1 + 50.\n\
         n[] = c <- agg<<c = count()>> near(_, _).\n.output n.\n.output near.\n",
    )
    .unwrap();
    // The pairs, recounted: for each row of a, the rows of b within its window.
    let mut b = times[1].clone();
    b.sort_unstable();
    let want: usize = times[0]
        .iter()
        .map(|&t| b.partition_point(|&v| v <= t + 50) - b.partition_point(|&v| v < t))
        .sum();
    assert!(want > 10_000, "the window finds pairs ({want})");
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
    let listed = std::fs::read_to_string(dir.join("out/near.csv")).unwrap();
    assert_eq!(listed.lines().next(), Some("x,y"), "the header");
    assert_eq!(listed.lines().count(), want + 1, "one line per pair");
}
