//! `fox repl` driven through standard input (every command, recursion added after data,
//! an error followed by its correction, `.explain`) and once through a pseudo-terminal.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `fox repl --backend cpu ARGS` with `script` on standard input; returns stdout.
fn repl(args: &[&str], script: &str) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fox"))
        .arg("repl")
        .args(["--backend", "cpu"])
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("fox-repl-{}-{name}", std::process::id()))
}

#[test]
fn statements_queries_and_recursion_added_after_data() {
    let out = repl(
        &[],
        "edge(x, y) -> int32(x), int32(y).\n\
         edge(1, 2). edge(2, 3).\n\
         edge(3, 4).\n\
         ?- edge(x, y), x > 1.\n\
         path(x, y) <- edge(x, y).\n\
         path(x, z) <- path(x, y),\n\
             edge(y, z).\n\
         ?- path(1, y).\n\
         ?- path(1, 4).\n\
         ?- path(4, 1).\n",
    );
    let want = "ok (1 item added)\nok (2 items added)\nok (1 item added)\n\
                x | y\n--+--\n2 | 3\n3 | 4\n2 rows\n\
                ok (1 item added)\nok (1 item added)\n\
                y\n-\n2\n3\n4\n3 rows\n\
                true\nfalse\n";
    assert_eq!(out, want);
}

#[test]
fn an_error_leaves_the_session_as_it_was_and_a_correction_is_taken() {
    let out = repl(
        &[],
        "edge(1, 2).\n\
         reach(x) <- edge(1, x), nope(x).\n\
         .list\n\
         reach(x) <- edge(1, x).\n\
         ?- reach(y), y = \"two\".\n\
         ?- reach(y).\n\
         ?- reach(y\n\
         .\n\
         odd(x) <- edge(x, _), !even(x). even(x) <- edge(x, _), !odd(x).\n\
         .list\n",
    );
    // The undeclared predicate is reported with a caret under it, against the statement.
    assert!(out.contains("error: unknown predicate `nope`"), "{out}");
    assert!(out.contains("<input:2>:1:25"), "{out}");
    assert!(out.contains("^^^^"), "{out}");
    // The failed rule was not added: the list holds the fact alone.
    assert!(out.contains("  1  edge(1, 2).\n"), "{out}");
    assert!(!out.contains("  2  reach(x) <- edge(1, x), nope(x)."), "{out}");
    // A type error in a query points into the query.
    assert!(out.contains("<query>"), "{out}");
    assert!(out.contains("y\n-\n2\n1 row\n"), "{out}");
    // A syntax error spread over two lines, and a cycle through negation, are refused.
    assert!(out.contains("depends negatively on itself"), "{out}");
    assert!(out.trim_end().ends_with("  2  reach(x) <- edge(1, x)."), "{out}");
}

#[test]
fn every_command() {
    let save = tmp("saved.logic");
    let dot = tmp("plan.svg");
    let script = format!(
        ".help\n\
         .load queries/transitive_closure.logic\n\
         .load /nonexistent/file.logic\n\
         .schema\n\
         .schema path\n\
         .schema nothing\n\
         .list\n\
         .retract 9\n\
         .retract 3\n\
         .retract 4\n\
         .list\n\
         .timing on\n\
         ?- path(1, y).\n\
         .timing off\n\
         .timing sometimes\n\
         .explain ?- path(1, y).\n\
         .explain analyze path(1, y).\n\
         .dot ?- path(1, y). {}\n\
         .backend cpu\n\
         .backend tpu\n\
         .save {}\n\
         .frobnicate\n\
         .quit\n\
         edge(9, 9).\n",
        dot.display(),
        save.display()
    );
    let out = repl(&["--data", "tests/programs/data"], &script);
    for needle in [
        ".load FILE.logic",
        ".explain analyze QUERY",
        "error: cannot read `/nonexistent/file.logic`",
        "path(x: int32, y: int32)  derived",
        "edge(x: int32, y: int32)  input",
        "error: no predicate `nothing`",
        "error: `.retract N` with N from 1 to",
        "timing on",
        " ms)\n",
        "timing off",
        "error: `.timing on` or `.timing off`",
        "ra plan (version 1)",
        "kernel plan (version 1)",
        "timing on cpu",
        "backend: cpu",
        "error: `.backend gpu`, `.backend cpu` or `.backend auto`",
        "error: unknown command `.frobnicate`",
    ] {
        assert!(out.contains(needle), "expected {needle:?} in:\n{out}");
    }
    // Without its base rule `path` has no type: that retraction is refused; without the
    // recursive rule `path` is `edge`.
    assert!(
        out.contains("error: without statement 3 the program is not correct, so it stays:"),
        "{out}"
    );
    assert!(
        out.contains("retracted 4: path(x, z) <- path(x, y), edge(y, z)."),
        "{out}"
    );
    // `.dot` draws with graphviz when it is installed, and otherwise writes the .dot file.
    let drawn = dot.exists() || dot.with_extension("dot").exists();
    assert!(drawn, "{out}");
    assert!(out.contains("wrote"), "{out}");
    // `.save` writes the statements; `.quit` stops before the last line.
    let saved = std::fs::read_to_string(&save).unwrap();
    assert!(saved.contains("path(x, y) <- edge(x, y)."), "{saved}");
    assert!(!saved.contains("edge(9, 9)"), "{saved}");
    let _ = std::fs::remove_file(&save);
    let _ = std::fs::remove_file(&dot);
    let _ = std::fs::remove_file(dot.with_extension("dot"));
}

#[test]
fn generated_data_and_an_unfinished_statement() {
    let out = repl(
        &["--graph", "gnm:5:10:1"],
        "edge(x, y) -> int32(x), int32(y).\n.input edge.\n?- edge(0, y).\n?- edge(0, y).\nn(c) <- agg<<c = count()>> edge(_, _).\n?- n(c).\ntri(x, y, z) <- edge(x, y), edge(y, z),\n",
    );
    assert!(
        out.contains("y\n-\n1\n2\n3\n4\n4 rows\ny\n-\n1\n2\n3\n4\n4 rows\n"),
        "{out}"
    );
    assert!(out.contains(" c\n--\n20\n1 row\n"), "{out}");
    assert!(
        out.ends_with("error: the input ended inside a statement (a statement ends with `.`)\n"),
        "{out}"
    );
}

/// Through a pseudo-terminal: the prompt, the continuation prompt, an answer.
#[test]
fn through_a_pseudo_terminal() {
    let py = r#"
import os, pty, sys, time, select
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], [sys.argv[1], "repl", "--backend", "cpu"])
out = b""
def read(t=5.0):
    global out
    end = time.time() + t
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                return
            if not chunk:
                return
            out += chunk
            if out.rstrip().endswith((b"fox>", b"...>")):
                return
read()
for line in ["e(1, 2). e(2, 3).", "p(x, z) <- e(x, y),", "  e(y, z).", "?- p(x, z).", ".quit"]:
    os.write(fd, (line + "\r").encode())
    read()
time.sleep(0.2)
read(1.0)
sys.stdout.write(out.decode("utf-8", "replace"))
"#;
    let o = Command::new("python3")
        .args(["-c", py, env!("CARGO_BIN_EXE_fox")])
        .env("HOME", std::env::temp_dir())
        .output()
        .expect("python3 runs the pseudo-terminal test");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("fox> "), "{out}");
    assert!(out.contains("...> "), "{out}");
    assert!(out.contains("1 | 3"), "{out}");
    assert!(out.contains("1 row"), "{out}");
}
