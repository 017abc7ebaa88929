//! Joins that meet a recursive relation on a column that is no prefix of its order read
//! it through a secondary index kept in runs (the `indexes` pass): the answers, byte for
//! byte, are those of the plans without indexes, of the index without runs, of index
//! nested-loop joins through it, and over two devices.

use crate::common::{next, repo, temp_dir};
use std::path::Path;
use std::process::Command;

/// The closure of `e` joined with itself (`nl`: its delta meets the full `nl` on its
/// second column) and a rule joining the full `q` on its second column through `e`.
const NONLINEAR: &str = "e(x, y) -> int32(x), int32(y).\n.input e.\n\
    nl(x, y) <- e(x, y).\n\
    nl(x, z) <- nl(x, y), nl(y, z).\n\
    q(x, y) <- e(x, y).\n\
    q(x, z) <- q(x, y), e(y, w), q(w, z).\n\
    .output nl.\n.output q.\n";

fn foxc(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_foxc"))
        .current_dir(repo())
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "foxc {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// The output files of `program` run on the CPU over `dir` with `extra`, in `outputs`'
/// order.
fn run(program: &Path, dir: &Path, extra: &[&str], outputs: &[&str], tag: &str) -> Vec<String> {
    let out = dir.join(tag);
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .current_dir(repo())
        .arg(program)
        .arg("--data")
        .arg(dir)
        .args(["--backend", "cpu", "--no-progress", "--out"])
        .arg(&out)
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "{tag}: {}", String::from_utf8_lossy(&o.stderr));
    outputs
        .iter()
        .map(|n| std::fs::read_to_string(out.join(format!("{n}.csv"))).unwrap())
        .collect()
}

fn write_pairs(dir: &Path, name: &str, pairs: &[(u64, u64)]) {
    let text: String = pairs.iter().map(|(a, b)| format!("{a},{b}\n")).collect();
    std::fs::write(dir.join(format!("{name}.csv")), text).unwrap();
}

fn random_pairs(s: &mut u64, n: u64, m: usize) -> Vec<(u64, u64)> {
    (0..m).map(|_| (next(s) % n, next(s) % n)).collect()
}

/// Runs `program` with every variant of the plan and checks that each writes the files
/// of the default plan.
fn same_answers(program: &Path, dir: &Path, outputs: &[&str], what: &str) {
    let base = run(program, dir, &[], outputs, "indexed");
    assert!(base.iter().any(|f| f.lines().count() > 1), "{what}: nothing derived");
    for (tag, extra) in [
        ("no-index", &["--disable-pass", "indexes"][..]),
        ("no-runs", &["--disable-pass", "tiering"][..]),
        ("inl", &["--join", "inl"][..]),
        ("merge", &["--join", "merge"][..]),
        ("devices", &["--devices", "2"][..]),
    ] {
        assert_eq!(run(program, dir, extra, outputs, tag), base, "{what}: {tag}");
    }
}

#[test]
fn joins_through_indexes_give_the_answers_without_them() {
    let dir = temp_dir("indexes", "nonlinear");
    let prog = dir.join("nl.logic");
    std::fs::write(&prog, NONLINEAR).unwrap();
    // A chain of 70 vertices with shortcuts and a cycle: many iterations, so the runs of
    // the relations and of their indexes fold at every level.
    let mut edges: Vec<(u64, u64)> = (0..69).map(|i| (i, i + 1)).collect();
    edges.extend([(3, 30), (50, 52), (65, 10), (69, 67)]);
    write_pairs(&dir, "e", &edges);
    let physical = foxc(&["compile", prog.to_str().unwrap(), "--emit", "physical"]);
    assert!(
        physical.contains("relation nl: in its loop, also an index sorted on [y, x]"),
        "{physical}"
    );
    assert!(
        physical.contains("relation q: in its loop, also an index sorted on [y, x]"),
        "{physical}"
    );
    let kernels = foxc(&["compile", prog.to_str().unwrap(), "--emit", "kernels"]);
    assert!(kernels.contains("fold nl.by_y_x run 2"), "{kernels}");
    same_answers(&prog, &dir, &["nl", "q"], "a chain");
    // Random graphs, and no edge at all.
    let mut s = 11u64;
    for (n, m) in [(20u64, 30usize), (60, 90), (5, 0)] {
        write_pairs(&dir, "e", &random_pairs(&mut s, n, m));
        if m > 0 {
            same_answers(&prog, &dir, &["nl", "q"], &format!("random {n} {m}"));
        } else {
            let got = run(&prog, &dir, &[], &["nl", "q"], "empty");
            assert!(got.iter().all(|f| f.lines().count() <= 1), "{got:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cspa_and_andersen_through_indexes_give_the_answers_without_them() {
    let dir = temp_dir("indexes", "analyses");
    let mut s = 3u64;
    for k in 0..2u64 {
        let n = 25 + 20 * k;
        write_pairs(&dir, "assign", &random_pairs(&mut s, n, 30 + 10 * k as usize));
        write_pairs(&dir, "dereference", &random_pairs(&mut s, n, 25));
        let cspa = repo().join("queries/datalog/cspa.logic");
        same_answers(
            &cspa,
            &dir,
            &["valueFlow", "valueAlias", "memoryAlias"],
            &format!("cspa {k}"),
        );
        for name in ["addressOf", "load", "store"] {
            write_pairs(&dir, name, &random_pairs(&mut s, n, 12));
        }
        let andersen = repo().join("queries/datalog/andersen.logic");
        same_answers(&andersen, &dir, &["pointsTo"], &format!("andersen {k}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
