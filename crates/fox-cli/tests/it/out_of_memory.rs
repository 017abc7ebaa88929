//! Running out of memory is an error (exit status 1, a message naming what was being
//! built), never an abort: `foxrun` under a small address-space limit.

use crate::common::repo as root;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, Output};

/// The address space the runs may use.
const LIMIT: libc::rlim_t = 256 << 20;

/// Runs `foxrun` with its address space limited to [`LIMIT`] (two worker threads and two
/// malloc arenas, so that the limit means the same on any machine).
fn foxrun_limited(args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_foxrun"));
    c.args(args)
        .current_dir(root())
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
    let o = foxrun_limited(args);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.signal(), None, "{args:?} died of a signal: {e}");
    assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
    assert!(
        e.contains("error: ") && e.contains("out of memory: cannot allocate ") && e.contains(what),
        "{args:?}: {e}"
    );
    assert!(!e.contains("memory allocation of"), "{args:?}: {e}");
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
    expect_out_of_memory(
        &[p.to_str().unwrap(), "--graph", "gnm:3000:400000:1", "--backend", "cpu"],
        "for the joined rows",
    );
    std::fs::remove_file(&p).unwrap();
}
