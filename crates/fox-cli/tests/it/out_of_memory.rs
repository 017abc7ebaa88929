//! Running out of memory is an error (exit status 1, a message naming what was being
//! built), never an abort: `foxrun` under a small address-space limit.

use crate::common::repo as root;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, Output};

/// The address space the runs may use.
const LIMIT: libc::rlim_t = 256 << 20;

/// Runs `foxrun` with its address space limited to [`LIMIT`] (two worker threads and two
/// malloc arenas, so that the limit means the same on any machine) and `env` set.
fn foxrun_limited(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_foxrun"));
    c.args(args)
        .current_dir(root())
        .envs(env.iter().copied())
        .env("RAYON_NUM_THREADS", "2")
        .env("MALLOC_ARENA_MAX", "2");
    // SAFETY: `setrlimit` is async-signal-safe, as `pre_exec` requires.
    unsafe {
        c.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: LIMIT,
                rlim_max: LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c.output().unwrap()
}

fn temp_program(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fox-oom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Checks a clean out-of-memory failure: status 1 (no signal), the message naming `what`
/// (located at the rule being computed, when there is one).
fn expect_out_of_memory(args: &[&str], what: &str) {
    expect_out_of_memory_with(args, &[], what);
}

/// [`expect_out_of_memory`] with environment variables set; returns standard error.
fn expect_out_of_memory_with(args: &[&str], env: &[(&str, &str)], what: &str) -> String {
    let o = foxrun_limited(args, env);
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.signal(), None, "{args:?} died of a signal: {e}");
    assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
    assert!(
        e.contains("error: ") && e.contains("out of memory: cannot allocate ") && e.contains(what),
        "{args:?}: {e}"
    );
    assert!(
        !e.contains("memory allocation of") && !e.contains("panicked"),
        "{args:?}: {e}"
    );
    e
}

/// A folder holding `a.csv` and `b.csv` of `n` rows `i,i` each, and the program `rule`
/// over them (its rule on line 5).
fn two_relations(tag: &str, n: usize, rule: &str) -> (PathBuf, PathBuf) {
    let dir = crate::common::temp_dir("fox-oom", tag);
    let rows: String = (1..=n).map(|i| format!("{i},{i}\n")).collect();
    std::fs::write(dir.join("a.csv"), &rows).unwrap();
    std::fs::write(dir.join("b.csv"), &rows).unwrap();
    let program = dir.join("cross.logic");
    std::fs::write(
        &program,
        format!(
            "a(x, t) -> int32(x), int32(t).\nb(y, t) -> int32(y), int32(t).\n.input a.\n.input b.\n{rule}\n.output r.\n"
        ),
    )
    .unwrap();
    (dir, program)
}

#[test]
fn strings_doubled_without_end() {
    let p = temp_program(
        "doubling.logic",
        "s(a) -> string(a).\ns(\"ab\").\ns(b) <- s(a), b = concat(a, a).\n.output s.\n",
    );
    expect_out_of_memory(&[p.to_str().unwrap(), "--backend", "cpu"], "string");
    std::fs::remove_file(&p).unwrap();
}

#[test]
fn strings_doubled_by_25_rules() {
    let mut text = String::from("s0(a) -> string(a).\ns0(\"abcdefgh\").\n");
    for i in 1..=25 {
        text.push_str(&format!("s{i}(b) <- s{}(a), b = concat(a, a).\n", i - 1));
    }
    text.push_str("n(x) <- s25(a), x = strlen(a).\n.output n.\n");
    let p = temp_program("doubling25.logic", &text);
    expect_out_of_memory(&[p.to_str().unwrap(), "--backend", "cpu"], "string");
    std::fs::remove_file(&p).unwrap();
}

#[test]
fn a_graph_larger_than_memory() {
    expect_out_of_memory(
        &[
            "queries/triangle_count.logic",
            "--graph",
            "gnm:1000000000:1000000000:1",
            "--backend",
            "cpu",
        ],
        "for the edges of the graph",
    );
}

#[test]
fn a_join_larger_than_memory() {
    // About 400,000 × 266 two-step paths: more joined rows than the limit holds.
    let p = temp_program(
        "paths.logic",
        "edge(x, y) -> int32(x), int32(y).\n.input edge.\nq(a, c) <- edge(a, b), edge(b, c).\n.output q.\n",
    );
    // The pairs, which only the relation's duplicate removal reads, are written in rounds
    // sized by the memory the backend reports, beyond what the process may allocate: the
    // expansion of a round fails on its parents' column.
    for (join, what) in [
        ("merge", "for the expanded rows' parents"),
        ("inl", "for the expanded rows' parents"),
    ] {
        expect_out_of_memory(
            &[
                p.to_str().unwrap(),
                "--graph",
                "gnm:3000:400000:1",
                "--backend",
                "cpu",
                "--join",
                join,
            ],
            what,
        );
    }
    std::fs::remove_file(&p).unwrap();
}

#[test]
fn a_cross_product_and_filter_beyond_the_memory_limit() {
    // 20,000 × 20,000 pairs before the filter, almost all of which pass it. Filtered per
    // round, the pairs never fit all at once, but the survivors outgrow the 64 MiB the
    // run may use: the error is located at the filter.
    let (dir, p) = two_relations("mul", 20_000, "r(x, y) <- a(x, t1), b(y, t2), t1 * t2 > 5.");
    let p = p.to_str().unwrap();
    let d = dir.to_str().unwrap();
    // The survivors' concatenation is made on the host, which this test's address-space
    // limit cannot hold either: the download of a round's rows or the concatenation fails.
    let e = expect_out_of_memory_with(
        &[p, "--data", d, "--backend", "cpu", "--memory-limit", "64M"],
        &[],
        "cannot allocate",
    );
    assert!(
        e.contains("for the concatenated column") || e.contains("for the downloaded buffer"),
        "{e}"
    );
    assert!(e.contains(&format!("{p}:5:32")), "{e}");
    // Written whole (without the `rounds` pass): 1.5 GiB of each side's row indices.
    let e = expect_out_of_memory_with(
        &[
            p,
            "--data",
            d,
            "--backend",
            "cpu",
            "--memory-limit",
            "64M",
            "--disable-pass",
            "rounds",
        ],
        &[],
        "(400000000 rows of 4 bytes) for the joined rows",
    );
    // Written in pieces to the host tier, which cannot hold them all under this test's
    // address-space limit.
    assert!(e.contains("more memory than the machine has available"), "{e}");
    // Located at the rule, with the sizes of the join and what to do.
    assert!(e.contains(&format!("{p}:5:1")), "{e}");
    assert!(
        e.contains("the join has 20000 rows on its left side and 20000 on its right and makes 400000000 rows"),
        "{e}"
    );
    assert!(
        e.contains("it is a cross product") && e.contains("make the rule produce fewer rows"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_cross_product_beyond_the_memory_limit() {
    let (dir, p) = two_relations("cross", 40_000, "r(x, y) <- a(x, _), b(y, _).");
    let p = p.to_str().unwrap();
    let e = expect_out_of_memory_with(
        &[
            p,
            "--data",
            dir.to_str().unwrap(),
            "--backend",
            "cpu",
            "--memory-limit",
            "1G",
        ],
        // The pairs are written in pieces to the host tier, which must hold them all: a
        // machine without room for them refuses before the first piece.
        &[("FOX_HOST_RESERVE", "18000000000000000000")],
        "cannot allocate 6.0 GiB (1600000000 rows of 4 bytes) for the joined rows",
    );
    assert!(e.contains(&format!("{p}:5:1")), "{e}");
    assert!(e.contains("makes 1600000000 rows (11.9 GiB of row indices"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_cross_product_larger_than_the_machine_is_refused_before_it_is_allocated() {
    // Linux grants more address space than it has memory and kills the process that
    // touches it: a request beyond what the machine has available (here, with a reserve
    // larger than any machine) is refused before it is made.
    if !std::path::Path::new("/proc/meminfo").exists() {
        return;
    }
    let (dir, p) = two_relations("ne", 20_000, "r(x, y) <- a(x, _), b(y, _).");
    let p = p.to_str().unwrap();
    let e = expect_out_of_memory_with(
        &[p, "--data", dir.to_str().unwrap(), "--backend", "cpu"],
        &[("FOX_HOST_RESERVE", "18000000000000000000")],
        "(400000000 rows of 4 bytes) for the joined rows",
    );
    assert!(e.contains(": the machine has 0 bytes available"), "{e}");
    assert!(e.contains(&format!("{p}:5:1")) && e.contains("cross product"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn rounds_are_sized_by_the_memory_the_machine_has_available() {
    // Without a limit, the windows of an expansion fit what the machine has available,
    // not its whole memory: with nothing available (a reserve larger than any machine)
    // there is no room for a round, which is an out-of-memory error rather than a round
    // per row.
    if !std::path::Path::new("/proc/meminfo").exists() {
        return;
    }
    let args = [
        "queries/clique4_count.logic",
        "--graph",
        "gnm:30:120:4",
        "--backend",
        "cpu",
        "--timing",
    ];
    let o = foxrun_limited(&args, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let o = foxrun_limited(&args, &[("FOX_HOST_RESERVE", "18000000000000000000")]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("the backend has leaves no room for a round of this expansion"),
        "{e}"
    );
    assert!(o.stdout.is_empty());
}
