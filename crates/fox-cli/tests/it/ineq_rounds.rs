//! An inequality join whose rows are kept probes in rounds of its probing rows: under a
//! small `--memory-limit` many rounds, whose pairs appended in probing order are byte for
//! byte those of one round.

use crate::common::{foxrun_cpu_timed as foxrun, next, repo, temp_dir, timing_rounds as rounds};
use std::process::Command;

#[test]
fn an_inequality_join_probed_in_rounds_as_at_once() {
    let dir = temp_dir("fox-ineq-rounds", "overlap");
    let mut seed = 3;
    for f in ["a.csv", "b.csv"] {
        let rows: String = (0..3_000)
            .map(|i| {
                let s = next(&mut seed) % 1_000_000;
                let e = s + 1 + next(&mut seed) % 200;
                let u = next(&mut seed) % 100_000;
                let v = next(&mut seed) % 100_000;
                format!("{i},{s},{e},{u},{v}\n")
            })
            .collect();
        std::fs::write(dir.join(f), rows).unwrap();
    }
    let p = dir.join("q.logic");
    std::fs::write(
        &p,
        "a(x, s, e, u, v) -> int32(x), int64(s), int64(e), int32(u), int32(v).\n\
         b(x, s, e, u, v) -> int32(x), int64(s), int64(e), int32(u), int32(v).\n\
         .input a.\n.input b.\n\
         ov(x, y, s2) <- a(x, s1, e1, _, _), b(y, s2, e2, _, _), s1 < e2, s2 < e1.\n\
         cr(x, y) <- a(x, _, _, u1, v1), b(y, _, _, u2, v2), u1 < u2 - 80000, v1 > v2 + 80000.\n\
         .output ov.\n.output cr.\n",
    )
    .unwrap();
    let plan = Command::new(env!("CARGO_BIN_EXE_foxc"))
        .current_dir(repo())
        .arg("compile")
        .arg(&p)
        .args(["--emit", "kernels"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&plan.stdout);
    assert!(plan.status.success(), "{}", String::from_utf8_lossy(&plan.stderr));
    assert_eq!(text.matches("ineq_ranges").count(), 2, "{text}");
    let whole = foxrun(&p, &dir, &[]);
    let e = String::from_utf8_lossy(&whole.stderr).into_owned();
    assert!(whole.status.success(), "{e}");
    // One round each.
    assert_eq!(rounds(&e), 2, "{e}");
    let cut = foxrun(&p, &dir, &["--memory-limit", "1M"]);
    let e = String::from_utf8_lossy(&cut.stderr).into_owned();
    assert!(cut.status.success(), "{e}");
    assert!(rounds(&e) > 10, "{} rounds: {e}", rounds(&e));
    assert_eq!(cut.stdout, whole.stdout);
    let out = String::from_utf8(whole.stdout).unwrap();
    let rows: usize = out
        .lines()
        .filter_map(|l| l.strip_suffix(" rows")?.parse::<usize>().ok())
        .sum();
    assert!(rows > 100, "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}
