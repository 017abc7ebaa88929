//! An inequality join whose rows are kept probes in rounds of its probing rows: under a
//! small `--memory-limit` many rounds, whose pairs appended in probing order are byte for
//! byte those of one round; one whose pairs only an aggregation reads, in rounds of
//! probing rows and of pairs within them, gives the answers of one round.

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
    // One round each, of probing rows and of the pairs within it (the rows only the
    // relation's duplicate removal reads).
    assert_eq!(rounds(&e), 4, "{e}");
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

#[test]
fn aggregated_inequality_joins_in_rounds_of_probing_rows_and_of_pairs_on_one_and_two_devices() {
    // 3,000 intervals a side: the overlap count and the dominance sum, each join's pairs
    // aggregated. Under 1M each join probes a few hundred rows a round and aggregates a
    // round's pairs in rounds of their own; on two devices each device does so with its
    // rows. The answers are those of one round each, and the counts those computed here.
    let dir = temp_dir("fox-ineq-rounds", "aggregated");
    let mut seed = 9;
    let mut sides = Vec::new();
    for f in ["a.csv", "b.csv"] {
        let rows: Vec<(i64, i64, i64, i64)> = (0..3_000)
            .map(|_| {
                let s = (next(&mut seed) % 200_000) as i64;
                let e = s + 1 + (next(&mut seed) % 2_000) as i64;
                let (u, v) = ((next(&mut seed) % 1_000) as i64, (next(&mut seed) % 1_000) as i64);
                (s, e, u, v)
            })
            .collect();
        let text: String = rows
            .iter()
            .enumerate()
            .map(|(i, (s, e, u, v))| format!("{i},{s},{e},{u},{v}\n"))
            .collect();
        std::fs::write(dir.join(f), text).unwrap();
        sides.push(rows);
    }
    let p = dir.join("q.logic");
    std::fs::write(
        &p,
        "a(x, s, e, u, v) -> int32(x), int64(s), int64(e), int32(u), int32(v).\n\
         b(x, s, e, u, v) -> int32(x), int64(s), int64(e), int32(u), int32(v).\n\
         .input a.\n.input b.\n\
         ov[] = c <- agg<<c = count()>> a(_, s1, e1, _, _), b(_, s2, e2, _, _), s1 < e2, s2 < e1.\n\
         dom[] = c <- agg<<c = count()>> a(_, _, _, u1, v1), b(_, _, _, u2, v2), u1 < u2, v1 > v2.\n\
         per[x] = t <- agg<<t = sum(v2)>> a(x, _, _, u1, v1), b(_, _, _, u2, v2), u1 < u2, v1 > v2.\n\
         .output ov.\n.output dom.\n.output per.\n",
    )
    .unwrap();
    let (a, b) = (&sides[0], &sides[1]);
    let overlap = a
        .iter()
        .map(|x| b.iter().filter(|y| x.0 < y.1 && y.0 < x.1).count())
        .sum::<usize>();
    let dominated = a
        .iter()
        .map(|x| b.iter().filter(|y| x.2 < y.2 && x.3 > y.3).count())
        .sum::<usize>();
    assert!(overlap > 1_000 && dominated > 100_000, "{overlap} {dominated}");
    let whole = foxrun(&p, &dir, &[]);
    let e = String::from_utf8_lossy(&whole.stderr).into_owned();
    assert!(whole.status.success(), "{e}");
    // One window of probing rows and one of pairs a join.
    assert_eq!(rounds(&e), 6, "{e}");
    let out = String::from_utf8(whole.stdout.clone()).unwrap();
    for n in [overlap, dominated] {
        assert!(out.lines().any(|l| l.trim() == n.to_string()), "{n}: {out}");
    }
    for extra in [
        &["--memory-limit", "1M"][..],
        &["--memory-limit", "1M", "--devices", "2"],
    ] {
        let cut = foxrun(&p, &dir, extra);
        let e = String::from_utf8_lossy(&cut.stderr).into_owned();
        assert!(cut.status.success(), "{extra:?}: {e}");
        // Far more windows than the rounds of probing rows alone (a few hundred rows
        // each, so about 40): each round's pairs take many.
        assert!(rounds(&e) > 200, "{extra:?}: {} rounds: {e}", rounds(&e));
        assert_eq!(cut.stdout, whole.stdout, "{extra:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
