//! Recursive programs over many iterations keep their full relations in sorted runs
//! (the `tiering` pass): the answers are those of the plans that merge in place
//! (`--disable-pass tiering`), and the plans show the runs and their folds.

use crate::common::{repo, temp_dir};
use std::process::Command;

const PROGRAM: &str = "e(x, y) -> int32(x), int32(y).\n.input e.\n\
    path(x, y) <- e(x, y).\n\
    path(x, z) <- path(x, y), e(y, z).\n\
    nl(x, y) <- e(x, y).\n\
    nl(x, z) <- nl(x, y), nl(y, z).\n\
    sg(x, y) <- e(p, x), e(p, y), x != y.\n\
    sg(x, y) <- e(a, x), sg(a, b), e(b, y).\n\
    even(0).\n\
    even(n) <- e(m, n), odd(m).\n\
    odd(n) <- e(m, n), even(m).\n\
    far[x] = n <- agg<<n = count()>> path(x, _).\n\
    .output path.\n.output nl.\n.output sg.\n.output even.\n.output odd.\n.output far.\n";

fn foxc(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_foxc")).args(args).output().unwrap();
    assert!(
        o.status.success(),
        "foxc {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn long_recursions_in_runs_give_the_answers_of_merging_in_place() {
    let dir = temp_dir("tiering", "chain");
    // A chain of 300 vertices (300 iterations, each adding fewer rows than the relation
    // holds, so runs fold at every level), with a few shortcuts and a cycle at its end.
    let n = 300;
    let mut edges: Vec<(i32, i32)> = (0..n - 1).map(|i| (i, i + 1)).collect();
    edges.extend([(5, 40), (100, 102), (250, 7), (n - 1, n - 3)]);
    let text: String = edges.iter().map(|(a, b)| format!("{a},{b}\n")).collect();
    std::fs::write(dir.join("e.csv"), text).unwrap();
    let prog = dir.join("rec.logic");
    std::fs::write(&prog, PROGRAM).unwrap();
    let prog = prog.to_str().unwrap();
    let physical = foxc(&["compile", prog, "--emit", "physical"]);
    for rel in ["path", "nl", "sg", "even", "odd"] {
        assert!(
            physical.contains(&format!("relation {rel}: in its loop, the relation plus 3 sorted runs")),
            "{physical}"
        );
    }
    let kernels = foxc(&["compile", prog, "--emit", "kernels"]);
    assert!(
        kernels.contains("outgrows[×2]") && kernels.contains("fold path run 2"),
        "{kernels}"
    );
    let untiered = foxc(&["compile", prog, "--emit", "physical", "--disable-pass", "tiering"]);
    assert!(!untiered.contains("sorted runs"), "{untiered}");
    let mut outs = Vec::new();
    for (tag, extra) in [("runs", vec![]), ("in-place", vec!["--disable-pass", "tiering"])] {
        let plan = dir.join(format!("{tag}.ron"));
        let mut args = vec!["compile", prog, "-o", plan.to_str().unwrap()];
        args.extend(extra);
        foxc(&args);
        let out = dir.join(tag);
        let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
            .arg(&plan)
            .args([
                "--data",
                dir.to_str().unwrap(),
                "--backend",
                "cpu",
                "--no-progress",
                "--out",
            ])
            .arg(&out)
            .current_dir(repo())
            .output()
            .unwrap();
        assert!(o.status.success(), "{tag}: {}", String::from_utf8_lossy(&o.stderr));
        let mut files = Vec::new();
        for name in ["path", "nl", "sg", "even", "odd", "far"] {
            files.push(std::fs::read_to_string(out.join(format!("{name}.csv"))).unwrap());
        }
        outs.push(files);
    }
    assert_eq!(outs[0], outs[1]);
    // The closure of the chain with its shortcuts and cycles, counted independently.
    let mut reach = vec![vec![false; n as usize]; n as usize];
    for &(a, b) in &edges {
        reach[a as usize][b as usize] = true;
    }
    for k in 0..n as usize {
        let via = reach[k].clone();
        for row in reach.iter_mut() {
            if row[k] {
                for (r, &v) in row.iter_mut().zip(&via) {
                    *r |= v;
                }
            }
        }
    }
    let pairs: usize = reach.iter().map(|r| r.iter().filter(|&&b| b).count()).sum();
    assert_eq!(outs[0][0].lines().count() - 1, pairs);
    assert_eq!(outs[0][0], outs[0][1], "path and nl are the same relation");
}

/// Writes a chain of `n` edges `i → i + 1` (`e.csv`) and the transitive closure over it
/// (`tc.logic`) into `dir`; returns the program's path.
fn chain_closure(dir: &std::path::Path, n: usize) -> std::path::PathBuf {
    let edges: String = (0..n).map(|i| format!("{i},{}\n", i + 1)).collect();
    std::fs::write(dir.join("e.csv"), edges).unwrap();
    let tc = dir.join("tc.logic");
    std::fs::write(
        &tc,
        "e(x, y) -> int32(x), int32(y).\n.input e from \"e.csv\".\n\
         path(x, y) <- e(x, y).\npath(x, z) <- path(x, y), e(y, z).\n.output path.\n",
    )
    .unwrap();
    tc
}

#[test]
fn foxrun_disable_pass_leaves_the_runs_out_and_keeps_the_answers() {
    let dir = temp_dir("tiering", "disable-pass");
    let prog = chain_closure(&dir, 80);
    let run = |extra: &[&str], out: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
            .arg(&prog)
            .args(["--backend", "cpu", "--no-progress", "--timing", "--data"])
            .arg(&dir)
            .arg("--out")
            .arg(dir.join(out))
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        (
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr),
            std::fs::read_to_string(dir.join(out).join("path.csv")).unwrap(),
        )
    };
    // Without rounds, whose runs of distinct rows fold with `outgrows` too.
    let (tiered, a) = run(&["--disable-pass", "rounds"], "tiered");
    let (in_place, b) = run(&["--disable-pass", "rounds", "--disable-pass", "tiering"], "in-place");
    assert!(tiered.contains("outgrows"), "{tiered}");
    assert!(!in_place.contains("outgrows"), "{in_place}");
    assert_eq!(a, b);
    assert_eq!(a.lines().count() - 1, 80 * 81 / 2);
    // A pass that does not exist, and a compiled plan, whose passes have run.
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .arg(&prog)
        .args(["--disable-pass", "nosuch"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("possible values"));
    let plan = dir.join("tc.ron");
    foxc(&["compile", prog.to_str().unwrap(), "-o", plan.to_str().unwrap()]);
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .arg(&plan)
        .args(["--disable-pass", "tiering", "--backend", "cpu"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("a PLAN.ron's passes have run already"));
}

#[test]
fn max_iterations_stops_a_recursion_that_does_not_converge() {
    let dir = temp_dir("tiering", "max-iterations");
    let prog = dir.join("n.logic");
    std::fs::write(&prog, "n(x) -> int64(x).\nn(0).\nn(x + 1) <- n(x).\n.output n.\n").unwrap();
    let out = dir.join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .arg(&prog)
        .args(["--backend", "cpu", "--no-progress", "--max-iterations", "7", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the recursion of `stratum 0 loop (n)` reached no fixpoint within 7 iterations (the limit of --max-iterations): the last derived 1 new row"),
        "{err}"
    );
    assert!(!out.exists(), "nothing is written");
    // A recursion that converges within the limit runs as without it; --timing prints
    // each iteration.
    let tc = chain_closure(&dir, 30);
    let run = |limit: &str| {
        Command::new(env!("CARGO_BIN_EXE_foxrun"))
            .arg(&tc)
            .args([
                "--backend",
                "cpu",
                "--no-progress",
                "--timing",
                "--max-iterations",
                limit,
                "--data",
            ])
            .arg(&dir)
            .output()
            .unwrap()
    };
    let o = run("100");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("stratum 0 loop (path): iteration 1, 29 new rows (at "),
        "{err}"
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("465 rows"),
        "30 * 31 / 2 paths"
    );
    let o = run("3");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("within 3 iterations"));
    // The limit is a positive number.
    let o = run("0");
    assert_eq!(o.status.code(), Some(2));
}

/// The transitive closure's relational plan, and its kernel plan lowered with `extra`
/// merged into `path` right before the loop merges its new rows.
fn tc_plans(extra: bool) -> (fox_ra::RaPlan, fox_kernel::KernelPlan) {
    let source = fox_cli::Source {
        name: "tc.logic".into(),
        text: "e(x, y) -> int32(x), int32(y).\n.input e from \"e.csv\".\n\
               path(x, y) <- e(x, y).\npath(x, z) <- path(x, y), e(y, z).\n.output path.\n"
            .into(),
    };
    let core = fox_cli::check(&source).core.expect("the program checks");
    let mut ra = fox_ra::plan(&core).unwrap();
    if extra {
        let delta = ra
            .relations
            .iter()
            .position(|r| matches!(r.kind, fox_ra::RelKind::Delta { .. }))
            .expect("a delta relation");
        let delta = fox_ra::RelId(delta as u32);
        let block = ra
            .blocks
            .iter_mut()
            .find(|b| b.stmts.iter().any(|s| matches!(s, fox_ra::Stmt::Merge { .. })))
            .expect("a loop that merges");
        let at = block
            .stmts
            .iter()
            .position(|s| matches!(s, fox_ra::Stmt::Merge { .. }))
            .unwrap();
        let fox_ra::Stmt::Merge { into, .. } = block.stmts[at] else {
            unreachable!()
        };
        block.stmts.insert(at, fox_ra::Stmt::Merge { into, from: delta });
    }
    // Without rounds, whose runs of distinct rows merge with repeats too.
    let opts = fox_phys::Options {
        disabled: vec!["rounds".into()],
        stop_after: None,
        join: fox_phys::JoinChoice::Auto,
        devices: 1,
    };
    let phys = fox_phys::run(ra.clone(), &fox_phys::Statistics::none(), &opts).unwrap();
    let kernels = fox_kernel::lower_physical(&phys).unwrap();
    fox_kernel::validate(&kernels).unwrap();
    (ra, kernels)
}

#[test]
fn merges_of_new_rows_are_disjoint_and_others_subtract_what_the_relation_holds() {
    // The loop merges the difference of its rows against `path`: every union of runs and
    // relation is disjoint.
    let (_, plain) = tc_plans(false);
    let text = fox_kernel::print_kernels(&plain);
    assert!(text.contains("merge_union[2 columns, disjoint]"), "{text}");
    assert!(!text.contains("merge_union[2 columns]("), "{text}");
    // `merge delta.path into path` adds rows `path` already holds (last iteration's, and
    // in the first iteration all of them): nothing proves them new, so they are
    // subtracted from first and the unions stay disjoint; the answer is unchanged.
    let (_, extra) = tc_plans(true);
    let text = fox_kernel::print_kernels(&extra);
    assert!(!text.contains("merge_union[2 columns]("), "{text}");
    let dir = temp_dir("tiering", "extra-merge");
    let n = 80;
    let edges: String = (0..n).map(|i| format!("{i},{}\n", i + 1)).collect();
    std::fs::write(dir.join("e.csv"), edges).unwrap();
    let mut answers = Vec::new();
    for (tag, plan) in [("plain", &plain), ("extra", &extra)] {
        let file = dir.join(format!("{tag}.ron"));
        std::fs::write(&file, fox_kernel::to_ron(plan)).unwrap();
        let out = dir.join(tag);
        let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
            .arg(&file)
            .args(["--backend", "cpu", "--no-progress", "--data"])
            .arg(&dir)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{tag}: {}", String::from_utf8_lossy(&o.stderr));
        answers.push(std::fs::read_to_string(out.join("path.csv")).unwrap());
    }
    assert_eq!(answers[0], answers[1]);
    assert_eq!(answers[0].lines().count() - 1, n * (n + 1) / 2);
}
