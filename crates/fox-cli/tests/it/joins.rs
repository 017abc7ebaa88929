//! `--join`: each value changes the physical plan of `foxc compile`, and every value gives
//! the same answers with `foxrun` on a program of several joins, semi-joins, anti-joins,
//! a difference and a band join; `fox repl` plans with it; a bad value is clap's error.

use crate::common::{repo, temp_dir};
use std::process::{Command, Output};

const PROGRAM: &str = "a(x, k, s) -> int(x), int(k), string(s).\nb(y, k, s) -> int(y), int(k), string(s).\n\
    .input a.\n.input b.\n\
    j(x, y) <- a(x, k, _), b(y, k, _).\n\
    j2(x, y, s) <- a(x, k, s), b(y, k, s).\n\
    semi(x) <- a(x, k, _), b(_, k, _).\n\
    anti(x, s) <- a(x, k, s), !b(_, k, s).\n\
    both(x, k) <- a(x, k, _), b(x, k, _).\n\
    only(x, k) <- a(x, k, _), !b(x, k, _).\n\
    near(x, y) <- a(x, k1, _), b(y, k2, _), k2 >= k1, k2 <= k1 + 1.\n\
    n[k] = c <- agg<<c = count()>> a(_, k, _), b(_, k, _).\n\
    .output j.\n.output j2.\n.output semi.\n.output anti.\n.output both.\n.output only.\n.output near.\n.output n.\n";

const JOINS: [&str; 5] = ["auto", "merge", "hash", "inl", "nl"];

fn program(tag: &str) -> std::path::PathBuf {
    let dir = temp_dir("joins", tag);
    let mut a = String::new();
    let mut b = String::new();
    for i in 0..60 {
        a.push_str(&format!("{i},{},s{}\n", (i * 7) % 13, i % 3));
        b.push_str(&format!("{},{},s{}\n", i / 2, (i * 5) % 11, i % 4));
    }
    std::fs::write(dir.join("a.csv"), a).unwrap();
    std::fs::write(dir.join("b.csv"), b).unwrap();
    std::fs::write(dir.join("joins.logic"), PROGRAM).unwrap();
    dir
}

fn run(bin: &str, args: &[&str]) -> Output {
    Command::new(bin).current_dir(repo()).args(args).output().unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn each_join_value_changes_the_physical_plan() {
    let dir = program("physical");
    let prog = dir.join("joins.logic");
    let prog = prog.to_str().unwrap();
    let mut plans = Vec::new();
    for join in JOINS {
        let o = run(
            env!("CARGO_BIN_EXE_foxc"),
            &["compile", prog, "--emit", "physical", "--join", join],
        );
        let (out, err) = text(&o);
        assert!(o.status.success(), "--join {join}: {err}");
        let want = match join {
            "merge" => "sort-merge join",
            "hash" => "hash join (build t",
            "inl" => "index nested-loop join (index t",
            "nl" => "nested-loop join (t",
            _ => "join",
        };
        assert!(out.contains(want), "--join {join}: no `{want}` in\n{out}");
        // Semi-joins and anti-joins follow the forced algorithm too.
        let want_match = match join {
            "merge" => Some("sort-merge match"),
            "hash" => Some("hash match (build t"),
            "inl" => Some("index nested-loop match (index t"),
            "nl" => Some("nested-loop match (t"),
            _ => None,
        };
        if let Some(w) = want_match {
            assert!(out.contains(w), "--join {join}: no `{w}` in\n{out}");
        }
        // The band join stays one unless forced to merge or nl.
        assert_eq!(
            out.contains("band join"),
            !matches!(join, "merge" | "nl"),
            "--join {join}:\n{out}"
        );
        plans.push(out);
    }
    for i in 1..plans.len() {
        for j in 0..i {
            assert_ne!(
                plans[i], plans[j],
                "--join {} and --join {} plan alike",
                JOINS[i], JOINS[j]
            );
        }
    }
}

#[test]
fn every_join_value_gives_the_same_answers() {
    let dir = program("answers");
    let prog = dir.join("joins.logic");
    let mut answers = Vec::new();
    for join in JOINS {
        let o = run(
            env!("CARGO_BIN_EXE_foxrun"),
            &[
                prog.to_str().unwrap(),
                "--backend",
                "cpu",
                "--data",
                dir.to_str().unwrap(),
                "--max-rows",
                "all",
                "--join",
                join,
            ],
        );
        let (out, err) = text(&o);
        assert!(o.status.success(), "--join {join}: {err}");
        answers.push(out);
    }
    assert!(
        answers[0].contains("j2") && answers[0].lines().count() > 100,
        "{}",
        answers[0]
    );
    for (join, a) in JOINS.iter().zip(&answers).skip(1) {
        assert_eq!(a, &answers[0], "--join {join} answers differently from auto");
    }
}

#[test]
fn a_bad_join_value_is_refused_by_name() {
    let dir = program("bad");
    let prog = dir.join("joins.logic");
    let prog = prog.to_str().unwrap();
    for (bin, args) in [
        (env!("CARGO_BIN_EXE_foxc"), vec!["compile", prog, "--join", "quick"]),
        (env!("CARGO_BIN_EXE_foxrun"), vec![prog, "--join", "quick"]),
        (env!("CARGO_BIN_EXE_fox"), vec!["repl", "--join", "quick"]),
        (env!("CARGO_BIN_EXE_foxbench"), vec!["joins", "--join", "quick"]),
    ] {
        let o = run(bin, &args);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{bin}: {err}");
        assert!(err.contains("invalid value 'quick'"), "{bin}: {err}");
        assert!(err.contains("auto, merge, hash, inl, nl"), "{bin}: {err}");
    }
}

#[test]
fn help_tells_what_join_forces() {
    for (bin, args) in [
        (env!("CARGO_BIN_EXE_foxc"), vec!["compile", "--help"]),
        (env!("CARGO_BIN_EXE_foxrun"), vec!["--help"]),
        (env!("CARGO_BIN_EXE_fox"), vec!["repl", "--help"]),
    ] {
        let (out, _) = text(&run(bin, &args));
        assert!(out.contains("--join <ALGORITHM>"), "{bin}: {out}");
        assert!(
            out.contains("A band join stays one unless forced to merge or nl"),
            "{bin}: {out}"
        );
    }
}

#[test]
fn a_plan_file_refuses_join() {
    let dir = program("plan");
    let prog = dir.join("joins.logic");
    let plan = dir.join("joins.ron");
    let o = run(
        env!("CARGO_BIN_EXE_foxc"),
        &["compile", prog.to_str().unwrap(), "-o", plan.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", text(&o).1);
    let o = run(
        env!("CARGO_BIN_EXE_foxrun"),
        &[plan.to_str().unwrap(), "--backend", "cpu", "--join", "hash"],
    );
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--join chooses the algorithms of a program's plan"),
        "{err}"
    );
}

#[test]
fn the_repl_plans_with_join() {
    let dir = program("repl");
    let script = "a(x, k, s) -> int(x), int(k), string(s).\nb(y, k, s) -> int(y), int(k), string(s).\n\
                  .input a.\n.input b.\n.explain ?- a(x, k, _), b(y, k, _).\n";
    for (join, want) in [("hash", "hash join (build t"), ("nl", "nested-loop join (t")] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fox"))
            .current_dir(&dir)
            .args(["repl", "--backend", "cpu", "--join", join])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
        let o = child.wait_with_output().unwrap();
        let (out, err) = text(&o);
        assert!(out.contains(want), "--join {join}: {out}\n{err}");
    }
}

#[test]
fn foxbench_joins_prints_a_table_of_every_algorithm() {
    let o = run(
        env!("CARGO_BIN_EXE_foxbench"),
        &[
            "joins",
            "--backend",
            "cpu",
            "--sizes",
            "6,9",
            "--repeat",
            "1",
            "--no-progress",
        ],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("equi-joins on cpu"), "{out}");
    for col in [
        "merge ms",
        "hash ms",
        "inl ms",
        "nl ms",
        "auto ms",
        "winner",
        "auto picked",
        "pairs",
    ] {
        assert!(lines[1].contains(col), "{col}: {out}");
    }
    assert_eq!(lines.len(), 4, "one row per size: {out}");
    for (line, rows) in lines[2..].iter().zip(["64", "512"]) {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f[0], rows, "{out}");
        // Five times, the winner among the four forced algorithms, what auto picked.
        assert!(f[5..10].iter().all(|t| t.parse::<f64>().is_ok()), "{line}");
        assert!(["merge", "hash", "inl", "nl"].contains(&f[10]), "{line}");
        assert!(["merge", "hash", "inl", "nl"].contains(&f[11]), "{line}");
        assert!(f[12].parse::<u64>().unwrap() > 0, "{line}");
    }
    // Only the algorithms asked for, and the nested loop not beyond --nl-max.
    let o = run(
        env!("CARGO_BIN_EXE_foxbench"),
        &[
            "joins",
            "--backend",
            "cpu",
            "--sizes",
            "7",
            "--join",
            "nl,hash",
            "--nl-max",
            "6",
            "--keys",
            "2",
            "--zipf",
            "1",
            "--repeat",
            "1",
            "--no-progress",
        ],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("nl ms") && out.contains("hash ms") && !out.contains("merge ms"),
        "{out}"
    );
    let row: Vec<&str> = out.lines().nth(2).unwrap().split_whitespace().collect();
    assert_eq!(row[5], "-", "{out}");
    assert_eq!(row[7], "hash", "{out}");
}
