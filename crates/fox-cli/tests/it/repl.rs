//! `fox repl` driven through standard input (every command, recursion added after data,
//! an error followed by its correction, `.explain`, the exit status, Ctrl-C) and through a
//! pseudo-terminal (prompts, Ctrl-C while a query runs and while a statement is typed,
//! history).

use crate::common::repo;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Runs `fox repl --backend cpu ARGS` with `script` on standard input, which must succeed
/// (exit 0, nothing on standard error); returns stdout.
fn repl(args: &[&str], script: &str) -> String {
    repl_on("cpu", args, script)
}

/// `fox repl --backend BACKEND ARGS` with `script` on standard input, which must succeed;
/// returns stdout.
fn repl_on(backend: &str, args: &[&str], script: &str) -> String {
    let o = repl_run(backend, args, script.as_bytes());
    assert_eq!(o.code, 0, "{backend}: {}", o.err);
    assert!(!o.err.contains("error"), "{backend}: {}", o.err);
    o.out
}

/// What a scripted session printed, and its exit status.
struct Ran {
    out: String,
    err: String,
    code: i32,
}

/// `fox repl --backend BACKEND ARGS` with `script` (bytes) on standard input.
fn repl_run(backend: &str, args: &[&str], script: &[u8]) -> Ran {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fox"))
        .args(["repl", "--backend", backend])
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(script).unwrap();
    let o = child.wait_with_output().unwrap();
    Ran {
        out: String::from_utf8(o.stdout).unwrap(),
        err: String::from_utf8(o.stderr).unwrap(),
        code: o.status.code().unwrap_or(-1),
    }
}

/// A scripted session on the CPU in which some statement fails: exit status 1.
fn repl_failing(args: &[&str], script: &str) -> Ran {
    let o = repl_run("cpu", args, script.as_bytes());
    assert_eq!(o.code, 1, "stdout:\n{}\nstderr:\n{}", o.out, o.err);
    o
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
    let Ran { out, err, .. } = repl_failing(
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
    assert!(err.contains("error: unknown predicate `nope`"), "{err}");
    assert!(err.contains("<input:2>:1:25"), "{err}");
    assert!(err.contains("^^^^"), "{err}");
    assert!(!out.contains("error"), "errors go to standard error:\n{out}");
    // The failed rule was not added: the list holds the fact alone.
    assert!(out.contains("  1  edge(1, 2).\n"), "{out}");
    assert!(!out.contains("  2  reach(x) <- edge(1, x), nope(x)."), "{out}");
    // A type error in a query points into the query.
    assert!(err.contains("<query>"), "{err}");
    assert!(out.contains("y\n-\n2\n1 row\n"), "{out}");
    // A syntax error spread over two lines, and a cycle through negation, are refused.
    assert!(err.contains("depends negatively on itself"), "{err}");
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
    let Ran { out, err, .. } = repl_failing(&["--data", "tests/programs/data"], &script);
    for needle in [
        ".load FILE.logic",
        ".explain analyze QUERY",
        "path(x: int32, y: int32)  derived",
        "edge(x: int32, y: int32)  input",
        "timing on",
        " ms)\n",
        "timing off",
        "physical plan (passes: estimate,",
        "kernel plan (version 1)",
        "timing on cpu",
        "backend: cpu",
    ] {
        assert!(out.contains(needle), "expected {needle:?} in:\n{out}");
    }
    for needle in [
        "error: cannot read `/nonexistent/file.logic`",
        "error: no predicate `nothing`",
        "error: `.retract N` with N from 1 to",
        "error: `.timing on` or `.timing off`",
        "error: `.backend gpu`, `.backend cpu` or `.backend auto`",
        "error: unknown command `.frobnicate`",
    ] {
        assert!(err.contains(needle), "expected {needle:?} in:\n{err}");
    }
    assert!(!out.contains("error"), "errors go to standard error:\n{out}");
    // Without its base rule `path` has no type: that retraction is refused; without the
    // recursive rule `path` is `edge`.
    assert!(
        err.contains("error: without statement 3 the program is not correct, so it stays:"),
        "{err}"
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
    let Ran { out, err, .. } = repl_failing(
        &["--graph", "gnm:5:10:1"],
        "edge(x, y) -> int32(x), int32(y).\n.input edge.\n?- edge(0, y).\n?- edge(0, y).\nn(c) <- agg<<c = count()>> edge(_, _).\n?- n(c).\ntri(x, y, z) <- edge(x, y), edge(y, z),\n",
    );
    assert!(
        out.contains("y\n-\n1\n2\n3\n4\n4 rows\ny\n-\n1\n2\n3\n4\n4 rows\n"),
        "{out}"
    );
    assert!(out.contains(" c\n--\n20\n1 row\n"), "{out}");
    assert!(
        err.ends_with("error: the input ended inside a statement (a statement ends with `.`)\n"),
        "{err}"
    );
}

/// Through a pseudo-terminal: the prompt, the continuation prompt, an answer.
#[test]
fn through_a_pseudo_terminal() {
    let py = r#"
import os, pty, re, sys, time, select
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
            # The prompt is followed by the line editor's cursor and terminal-mode
            # escape sequences. Input typed before the editor has switched the terminal
            # to raw mode may be discarded, so the next line waits a moment after it.
            if re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", out).rstrip().endswith((b"fox>", b"...>")):
                time.sleep(0.5)
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

#[test]
fn the_exit_status_of_a_script_says_whether_every_statement_succeeded() {
    let ok = repl_run("cpu", &[], b"e(1, 2).\n?- e(x, y).\n");
    assert_eq!((ok.code, ok.err.as_str()), (0, ""), "{}", ok.err);
    assert_eq!(ok.out, "ok (1 item added)\nx | y\n--+--\n1 | 2\n1 row\n");
    // One failing statement among good ones: results on stdout, the error on stderr, 1.
    let bad = repl_failing(&[], "e(1, 2).\n?- f(x).\n?- e(x, y).\n");
    assert_eq!(bad.out, "ok (1 item added)\nx | y\n--+--\n1 | 2\n1 row\n");
    assert!(bad.err.contains("error: unknown predicate `f`"), "{}", bad.err);
    // A failing command counts too.
    repl_failing(&[], "e(1, 2).\n.frobnicate\n");
}

#[test]
fn an_error_of_a_query_while_it_runs_names_its_place_and_values() {
    // A division by zero, and a functional predicate given two values for a key.
    let o = repl_failing(
        &[],
        "e(1, 5).\ne(5, 7).\n?- e(x, y), z = 10 / (y - 5).\nf[x] = y <- e(x, y) ; e(y, x).\n?- f[5] = v.\n",
    );
    // The columns of `e` (facts without declared names) are `c0` and `c1`.
    assert!(
        o.err.contains("error: division by zero in `(10 / (c1 - 5))`"),
        "{}",
        o.err
    );
    assert!(o.err.contains("<session>:3:"), "{}", o.err);
    assert!(o.err.contains("z = 10 / (y - 5)"), "{}", o.err);
    assert!(o.err.contains("the values of row 0: c1 = 5"), "{}", o.err);
    assert!(o.err.contains("error: `f[5]` has two values, 1 and 7"), "{}", o.err);
    assert!(!o.err.contains("Program {"), "{}", o.err);
}

#[test]
fn a_line_that_is_not_utf8_is_an_error_and_the_script_goes_on() {
    // Line 3 is a comment with a Latin-1 `é`.
    let mut script = b"e(1, 2).\ne(2, 3).\n// caf".to_vec();
    script.push(0xE9);
    script.extend_from_slice(b" au lait\ne(3, 4).\n?- e(x, 4).\n");
    let o = repl_run("cpu", &[], &script);
    assert_eq!(o.code, 1, "{}", o.err);
    assert_eq!(
        o.err,
        "error: line 3, column 7: the line is not UTF-8 text (byte 0xE9); it was skipped\n"
    );
    assert_eq!(
        o.out,
        "ok (1 item added)\nok (1 item added)\nok (1 item added)\nx\n-\n3\n1 row\n"
    );
}

#[test]
fn commands_that_take_a_file_say_when_its_name_is_missing() {
    let o = repl_failing(
        &[],
        "edge(1, 2).\n.dot ?- edge(1, y).\n.dot ?- edge(1, y)\n.dot edge(x, y), x < 2.\n.dot\n.dot plan.svg\n.load\n.save\n",
    );
    let missing = "error: the file name is missing: `.dot QUERY FILE.svg` (the file name follows the query)\n";
    assert_eq!(
        o.err,
        format!(
            "{missing}{missing}{missing}\
             error: the query and the file name are missing: `.dot QUERY FILE.svg`\n\
             error: the query is missing: `.dot QUERY plan.svg`\n\
             error: the file name is missing: `.load FILE.logic`\n\
             error: the file name is missing: `.save FILE.logic`\n"
        )
    );
    assert!(!std::path::Path::new("plan.svg").exists());
}

/// `fox repl --backend cpu --graph rmat:14` with the transitive closure (minutes of work
/// on 16,384 vertices) defined.
const CLOSURE: &str = "edge(x, y) -> int32(x), int32(y).\n\
                       .input edge.\n\
                       path(x, y) <- edge(x, y).\n\
                       path(x, z) <- path(x, y), edge(y, z).\n";

/// A quick query over the same graph.
const SMALL: &str = "?- edge(x, y), x < 30, y < 300.";

#[test]
fn ctrl_c_stops_a_script_with_status_130() {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_fox"))
        .args(["repl", "--backend", "cpu", "--graph", "rmat:14"])
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let script = format!("{CLOSURE}{SMALL}\n?- path(1, y), y < 5.\n.schema edge\n");
    child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    // Once the quick query is answered, the closure runs.
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    while !seen.ends_with(" rows\n") && !seen.ends_with(" row\n") {
        assert_ne!(out.read_line(&mut seen).unwrap(), 0, "{seen}");
    }
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert_eq!(err, "interrupted\n");
    // The script stopped there.
    assert_eq!(rest, "", "{seen}");
}

/// Runs `fox repl ARGS` on a pseudo-terminal with `HOME` at `home` and does `actions`:
/// `["line", text]` types a line and waits for the next prompt, `["send", text]` types
/// a line, `["sleep", seconds]`, `["ctrl-c"]` types Ctrl-C and waits for the next prompt.
/// Returns the transcript, then `STATUS n` (the exit status).
fn on_a_terminal(args: &[&str], home: &Path, actions: &str) -> String {
    let py = r#"
import json, os, pty, select, sys, time
fox, args, actions = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
pid, fd = pty.fork()
if pid == 0:
    os.execv(fox, [fox, "repl"] + args)
out = b""
def prompts():
    return out.count(b"fox> ") + out.count(b"...> ")
def wait(n, t=120.0):
    global out
    end = time.time() + t
    while time.time() < end and prompts() <= n:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                return
            if not chunk:
                return
            out += chunk
wait(0)
for a in actions:
    n = prompts()
    if a[0] == "sleep":
        time.sleep(a[1])
    elif a[0] == "ctrl-c":
        os.write(fd, b"\x03")
        wait(n)
    else:
        os.write(fd, (a[1] + "\r").encode())
        if a[0] == "line":
            wait(n)
wait(prompts(), 10.0)
_, status = os.waitpid(pid, 0)
sys.stdout.write(out.decode("utf-8", "replace"))
sys.stdout.write("\nSTATUS %d\n" % os.waitstatus_to_exitcode(status))
"#;
    let args = format!(
        "[{}]",
        args.iter().map(|a| format!("{a:?}")).collect::<Vec<_>>().join(", ")
    );
    let o = Command::new("python3")
        .args(["-c", py, env!("CARGO_BIN_EXE_fox"), &args, actions])
        .env("HOME", home)
        .current_dir(repo())
        .output()
        .expect("python3 runs the pseudo-terminal test");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The lines of a terminal transcript without the terminal's control sequences.
fn plain(transcript: &str) -> String {
    let mut out = String::new();
    let mut chars = transcript.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => {
                // CSI: ESC [ parameters final-byte.
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
            }
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

#[test]
fn ctrl_c_while_a_query_runs_returns_to_the_prompt_with_the_session_intact() {
    let home = tmp("home-query");
    std::fs::create_dir_all(&home).unwrap();
    let mut actions: Vec<String> = CLOSURE.lines().map(|l| format!("[\"line\", {l:?}]")).collect();
    actions.push(format!("[\"line\", {SMALL:?}]"));
    actions.push("[\"send\", \"?- path(1, y), y < 5.\"]".into());
    actions.push("[\"sleep\", 1.5]".into());
    actions.push("[\"ctrl-c\"]".into());
    actions.push(format!("[\"line\", {SMALL:?}]"));
    actions.push("[\"line\", \".explain ?- path(1, y).\"]".into());
    actions.push("[\"line\", \".quit\"]".into());
    let t = on_a_terminal(
        &["--backend", "cpu", "--graph", "rmat:14"],
        &home,
        &format!("[{}]", actions.join(", ")),
    );
    let text = plain(&t);
    assert!(text.ends_with("\nSTATUS 0\n"), "{text}");
    // The query stopped, and the prompt came back.
    let (before, after) = text
        .split_once("?- path(1, y), y < 5.\n")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(after.starts_with("^Cinterrupted\nfox> "), "{text}");
    // The quick query answers as before, and nothing of `path` was kept.
    let answer = |s: &str| -> String {
        // From the table's header (after the progress bar of the first load).
        let asked = s.find(SMALL).unwrap_or_else(|| panic!("{text}"));
        let from = asked + s[asked..].find(" x |   y\n").unwrap_or_else(|| panic!("{text}"));
        s[from..s[from..].find("fox> ").map_or(s.len(), |e| from + e)].to_string()
    };
    assert!(answer(before).ends_with(" rows\n"), "{text}");
    assert_eq!(answer(before), answer(after), "{text}");
    assert!(after.contains("computed: path, query\n"), "{text}");
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn ctrl_c_drops_the_statement_being_typed_and_history_keeps_whole_statements() {
    let home = tmp("home-typing");
    std::fs::create_dir_all(&home).unwrap();
    let t = on_a_terminal(
        &["--backend", "cpu"],
        &home,
        r#"[["line", "e(1, 2). e(2, 3)."],
            ["line", "p(x, z) <- e(x, y),"],
            ["ctrl-c"],
            ["line", "e(3, 4)."],
            ["line", "p(x, z) <- e(x, y),"],
            ["line", "  e(y, z)."],
            ["line", "?- p(x, z)."],
            ["line", ".quit"]]"#,
    );
    let text = plain(&t);
    assert!(text.ends_with("\nSTATUS 0\n"), "{text}");
    // The half-typed rule was dropped: `e(3, 4).` is a statement of its own.
    assert!(text.contains("fox> e(3, 4).\nok (1 item added)\n"), "{text}");
    assert!(text.contains("1 | 3\n2 | 4\n2 rows\n"), "{text}");
    assert!(!text.contains("error"), "{text}");
    // One history entry per statement (rustyline escapes the line break), none for the
    // dropped one.
    let history = std::fs::read_to_string(home.join(".fox_history")).unwrap();
    assert_eq!(
        history,
        "#V2\ne(1, 2). e(2, 3).\ne(3, 4).\np(x, z) <- e(x, y),\\n  e(y, z).\n?- p(x, z).\n.quit\n"
    );
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn a_query_stopped_through_the_session_token_leaves_the_session_as_it_was() {
    use fox_cli::repl::{BackendKind, Out, Session, Stream};
    use std::sync::atomic::{AtomicBool, Ordering};
    let graph = fox_runtime::graph::GraphSpec::parse("rmat:14").unwrap();
    let (mut s, _) = Session::new(
        BackendKind::Cpu,
        None,
        Some(fox_runtime::DataSource::Graph(graph)),
        false,
    )
    .unwrap();
    let line = |s: &mut Session, text: &str| {
        let mut o = Out::new();
        s.line(text, &mut o);
        o
    };
    for l in CLOSURE.lines() {
        assert!(!line(&mut s, l).failed(), "{l}");
    }
    let before = line(&mut s, SMALL);
    assert!(!before.failed() && before.text(Stream::Out).ends_with(" rows\n"));
    // Another thread asks to stop (as the SIGINT handler does) while the closure runs.
    let token = s.cancel_token();
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let stopper = {
        let done = done.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(1000));
            while !done.load(Ordering::SeqCst) {
                token.cancel();
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        })
    };
    let stopped = line(&mut s, "?- path(1, y), y < 5.");
    done.store(true, Ordering::SeqCst);
    stopper.join().unwrap();
    assert!(stopped.interrupted() && stopped.failed());
    assert_eq!(stopped.text(Stream::Err), "interrupted\n");
    assert_eq!(stopped.text(Stream::Out), "");
    // Nothing of `path` was kept, and the session answers as before.
    let plan = line(&mut s, ".explain ?- path(1, y).");
    assert!(plan.text(Stream::Out).ends_with("computed: path, query\n"));
    let after = line(&mut s, SMALL);
    assert!(!after.failed() && !after.interrupted());
    assert_eq!(after.text(Stream::Out), before.text(Stream::Out));
    s.close();
}

// ---- incremental re-planning -------------------------------------------------------------

/// One step of a session checked by [`incremental`].
enum Step<'a> {
    /// A statement of one item.
    Add(&'a str),
    /// `.retract N`.
    Retract(usize),
    /// `?- body.` with the query's variables (as the REPL orders them), and the
    /// predicates it must compute and reuse (`"computed: a, b; reused: c"`, in any order).
    Ask(&'a str, &'a str, &'a str),
    /// Writes a file (to change the data during the session).
    Write(PathBuf, String),
    /// A command and a text its output must contain.
    Command(&'a str, &'a str),
}

/// A `fox repl --backend cpu` on pipes, read line by line.
struct Live {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
    seen: String,
}

impl Live {
    fn start(args: &[&str]) -> Live {
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
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        // The lines of both streams, each in order (errors are on standard error).
        let (tx, lines) = std::sync::mpsc::channel();
        fn forward(from: impl std::io::Read + Send + 'static, tx: std::sync::mpsc::Sender<String>) {
            std::thread::spawn(move || {
                use std::io::BufRead;
                for line in std::io::BufReader::new(from).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        forward(stdout, tx.clone());
        forward(stderr, tx);
        Live {
            child,
            stdin,
            lines,
            seen: String::new(),
        }
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The lines printed up to the first one `last` accepts (included).
    fn until(&mut self, last: impl Fn(&str) -> bool) -> Vec<String> {
        let mut got = Vec::new();
        loop {
            let line = self
                .lines
                .recv_timeout(std::time::Duration::from_secs(120))
                .unwrap_or_else(|_| panic!("the REPL stopped answering; it printed:\n{}", self.seen));
            self.seen.push_str(&line);
            self.seen.push('\n');
            let done = last(&line);
            got.push(line);
            if done {
                return got;
            }
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The predicates of a report `computed: a, b; reused: c` as sorted lists.
fn report_sets(r: &str) -> (Vec<String>, Vec<String>) {
    let mut computed = Vec::new();
    let mut reused = Vec::new();
    for part in r.split("; ") {
        let (list, names) = match part.split_once(": ") {
            Some(("computed", n)) => (&mut computed, n),
            Some(("reused", n)) => (&mut reused, n),
            _ => panic!("not a report: {r:?}"),
        };
        list.extend(names.split(", ").map(str::to_string));
    }
    computed.sort();
    reused.sort();
    (computed, reused)
}

/// The answer of `foxrun` (a fresh run of the whole program, nothing kept) to the query:
/// the table as the REPL prints it.
fn fresh_answer(args: &[&str], items: &[String], body: &str, vars: &str) -> String {
    let file = tmp(&format!(
        "fresh-{}.logic",
        std::thread::current().name().unwrap_or("t").replace("::", "-")
    ));
    let mut program = items.join("\n");
    program.push_str(&format!("\nquery({vars}) <- {body}.\n.output query.\n"));
    std::fs::write(&file, &program).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .arg(&file)
        .args(["--backend", "cpu"])
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    assert!(
        o.status.success(),
        "foxrun failed on\n{program}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8(o.stdout).unwrap();
    out.strip_prefix("query\n").unwrap_or(&out).to_string()
}

/// Runs a session step by step with `.timing on`: each query's answer must be the one a
/// fresh run of the program gives, and its report must name exactly the predicates
/// computed and reused that the step says.
fn incremental(args: &[&str], steps: &[Step]) {
    let mut live = Live::start(args);
    live.send(".timing on");
    live.until(|l| l == "timing on");
    let mut items: Vec<String> = Vec::new();
    for step in steps {
        match step {
            Step::Add(s) => {
                live.send(s);
                let got = live.until(|l| l.starts_with("ok (") || l.starts_with("error"));
                assert_eq!(got.last().unwrap(), "ok (1 item added)", "{s}:\n{}", live.seen);
                items.push(s.to_string());
            }
            Step::Retract(n) => {
                live.send(&format!(".retract {n}"));
                let got = live.until(|l| l.starts_with("retracted") || l.starts_with("error"));
                assert!(got.last().unwrap().starts_with("retracted"), "{}", live.seen);
                items.remove(n - 1);
            }
            Step::Write(path, text) => std::fs::write(path, text).unwrap(),
            Step::Command(c, want) => {
                live.send(c);
                live.send(".timing on");
                let got = live.until(|l| l == "timing on").join("\n");
                assert!(got.contains(want), "{c}: expected {want:?} in\n{got}");
            }
            Step::Ask(body, vars, report) => {
                live.send(&format!("?- {body}."));
                let mut got = live.until(|l| (l.starts_with('(') && l.ends_with(" ms)")) || l.starts_with("error"));
                let timing = got.pop().unwrap();
                assert!(!timing.starts_with("error"), "?- {body}.\n{}", live.seen);
                let answer: String = got.iter().map(|l| format!("{l}\n")).collect();
                let fresh = fresh_answer(args, &items, body, vars);
                assert_eq!(answer, fresh, "?- {body}. (the REPL, then a fresh run)\n{}", live.seen);
                let r = timing[1..].rsplit_once("; ").unwrap().0;
                assert_eq!(report_sets(r), report_sets(report), "?- {body}.\n{}", live.seen);
            }
        }
    }
    live.send(".quit");
}

#[test]
fn a_recursive_predicate_is_computed_once_and_then_reused() {
    use Step::*;
    incremental(
        &[],
        &[
            Add("edge(x, y) -> int32(x), int32(y)."),
            Add("edge(1, 2)."),
            Add("edge(2, 3)."),
            Add("edge(3, 4)."),
            Add("edge(4, 2)."),
            Add("edge(5, 6)."),
            Add("path(x, y) <- edge(x, y)."),
            Add("path(x, z) <- path(x, y), edge(y, z)."),
            Ask("path(1, y)", "y", "computed: path, query"),
            Ask("path(x, 4)", "x", "computed: query; reused: path"),
            Ask("path(x, y), path(y, x), x < y", "x, y", "computed: query; reused: path"),
            // The same query again is answered from its kept answer.
            Ask("path(1, y)", "y", "reused: query"),
            // Mutual recursion is one component: computed together, reused together.
            Add("even(x) -> int32(x)."),
            Add("odd(y) <- even(x), path(x, y), x != y."),
            Add("even(y) <- odd(x), edge(x, y)."),
            Add("even(1)."),
            Ask("odd(x)", "x", "computed: even, odd, query; reused: path"),
            Ask("even(x), !odd(x)", "x", "computed: query; reused: even, odd"),
            // Aggregates, functional predicates and negation over a reused predicate.
            Add("deg[x] = n <- agg<<n = count()>> path(x, _)."),
            Add("unreached(x) <- edge(x, _), !path(1, x)."),
            Ask("deg[x] = n, n > 2", "x, n", "computed: deg, query; reused: path"),
            Ask(
                "unreached(x), deg[x] = n",
                "x, n",
                "computed: unreached, query; reused: deg, path",
            ),
            Command(".explain analyze deg[x] = n.", "computed: query; reused: deg"),
            Command(
                ".explain ?- deg[x] = n, path(x, _).",
                "computed: query; reused: path, deg",
            ),
        ],
    );
}

#[test]
fn adding_or_retracting_a_rule_recomputes_it_and_its_dependents_only() {
    use Step::*;
    incremental(
        &[],
        &[
            Add("edge(x, y) -> int32(x), int32(y)."),
            Add("edge(1, 2)."),
            Add("edge(2, 3)."),
            Add("edge(3, 1)."),
            Add("edge(7, 8)."),
            Add("path(x, y) <- edge(x, y)."),
            Add("two(x, z) <- path(x, y), edge(y, z)."),
            Add("out(x) <- edge(x, _), !two(x, _)."),
            Add("other(x) <- edge(_, x)."),
            Ask("out(x)", "x", "computed: path, two, out, query"),
            Ask("other(x)", "x", "computed: other, query"),
            Ask("two(x, y), other(y)", "x, y", "computed: query; reused: two, other"),
            // Statement 10: the recursive rule of `path` changes `path`, `two`, `out`, not
            // `other`.
            Add("path(x, z) <- path(x, y), edge(y, z)."),
            Ask(
                "two(x, y), other(y)",
                "x, y",
                "computed: path, two, query; reused: other",
            ),
            Ask("out(x)", "x", "computed: out, query; reused: two"),
            // A fact of `edge` changes everything.
            Add("edge(8, 9)."),
            Ask("out(x), other(x)", "x", "computed: path, two, out, other, query"),
            // Retracting the recursive rule: back to the first `path`.
            Retract(10),
            Ask(
                "two(x, y), other(y)",
                "x, y",
                "computed: path, two, query; reused: other",
            ),
            Ask("out(x)", "x", "computed: out, query; reused: two"),
            // Retracting the fact of statement 5 (`edge(7, 8)`).
            Retract(5),
            Ask("out(x), path(x, y)", "x, y", "computed: path, two, out, query"),
            Ask("other(x)", "x", "computed: other, query"),
            // Retracting `other`'s only rule and defining it again by another rule.
            Retract(8),
            Add("other(x) <- edge(x, _), x > 1."),
            Ask("other(x), out(x)", "x", "computed: other, query; reused: out"),
        ],
    );
}

#[test]
fn kept_string_columns_keep_their_strings_and_their_order() {
    use Step::*;
    incremental(
        &[],
        &[
            Add("part(id, name) -> int32(id), string(name)."),
            Add("part(1, \"bolt\")."),
            Add("part(2, \"anchor\")."),
            Add("part(3, \"zebra\")."),
            Add("part(4, \"Mango\")."),
            Add("part(5, \"été\")."),
            // Strings made by `concat` and `substr` (not in any dictionary of the data),
            // and recursion over made strings.
            Add("label(id, l) <- part(id, n), l = concat(n, \"-x\")."),
            Add("short(id, s) <- label(id, l), s = substr(l, 2, 3)."),
            Add("word(s) <- part(_, n), strlen(n) < 5, s = n."),
            Add("word(t) <- word(s), strlen(s) < 7, t = concat(s, \"a\")."),
            Ask("label(id, l)", "id, l", "computed: label, query"),
            Ask("label(id, l), l > \"b\"", "id, l", "computed: query; reused: label"),
            Ask("short(id, s)", "id, s", "computed: short, query; reused: label"),
            Ask(
                "label(id, l), short(id2, s), s < l",
                "id, l, id2, s",
                "computed: query; reused: label, short",
            ),
            Ask(
                "label(id, l), like(l, \"%o%\"), strlen(l) > 5",
                "id, l",
                "computed: query; reused: label",
            ),
            Ask(
                "label(id, l), part(id2, n), m = concat(n, \"-w\"), l < m",
                "id, l, id2, n, m",
                "computed: query; reused: label",
            ),
            Ask("word(s)", "s", "computed: word, query"),
            Ask(
                "word(s), label(_, l), substr(l, 1, 4) = s",
                "s, l",
                "computed: query; reused: word, label",
            ),
            Ask(
                "word(s), word(t), s < t, strlen(t) = strlen(s) + 1",
                "s, t",
                "computed: query; reused: word",
            ),
            Ask(
                "word(s), s in (\"bolta\", \"zeb\")",
                "s",
                "computed: query; reused: word",
            ),
            Ask("word(s), s = \"Mangoaa\"", "s", "computed: query; reused: word"),
        ],
    );
}

#[test]
fn with_data_files_a_changed_file_is_noticed() {
    use Step::*;
    let dir = tmp("data");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let edge = dir.join("edge.csv");
    let name = dir.join("name.csv");
    std::fs::write(&edge, "1,2\n2,3\n3,4\n").unwrap();
    std::fs::write(&name, "1,one\n2,two\n3,three\n4,four\n5,five\n").unwrap();
    let d = dir.to_str().unwrap();
    incremental(
        &["--data", d],
        &[
            Add("edge(x, y) -> int32(x), int32(y)."),
            Add(".input edge."),
            Add("name(x, n) -> int32(x), string(n)."),
            Add(".input name."),
            Add("path(x, y) <- edge(x, y)."),
            Add("path(x, z) <- path(x, y), edge(y, z)."),
            Add("named(a, b) <- path(x, y), name(x, a), name(y, b)."),
            Add("tagged(t) <- named(a, b), t = concat(a, b)."),
            Ask("path(1, y)", "y", "computed: path, query"),
            Ask("named(a, b), a < b", "a, b", "computed: named, query; reused: path"),
            Ask(
                "tagged(t), t > \"three\"",
                "t",
                "computed: tagged, query; reused: named",
            ),
            Ask("path(x, 4)", "x", "computed: query; reused: path"),
            // Another row in `edge.csv`: everything over `edge` is computed again.
            Write(edge.clone(), "1,2\n2,3\n3,4\n4,5\n".into()),
            Ask("path(1, y)", "y", "computed: path, query"),
            Ask("named(a, b), a < b", "a, b", "computed: named, query; reused: path"),
            Ask(
                "tagged(t), t > \"three\"",
                "t",
                "computed: tagged, query; reused: named",
            ),
            // Another name: `path` stays.
            Write(name.clone(), "1,one\n2,two\n3,three\n4,four\n5,zz\n".into()),
            Ask(
                "tagged(t), t > \"three\"",
                "t",
                "computed: named, tagged, query; reused: path",
            ),
            Ask("named(a, b), name(_, b)", "a, b", "computed: query; reused: named"),
            // Dictionary tables over kept strings of the data and made ones.
            Ask(
                "named(a, b), like(b, \"t%\"), strlen(a) > 3",
                "a, b",
                "computed: query; reused: named",
            ),
            Ask("tagged(t), like(t, \"%o%\")", "t", "computed: query; reused: tagged"),
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn load_reads_a_souffle_program() {
    let facts = repo().join("tests/souffle/aggregates/facts");
    let out = repl(
        &["--data", facts.to_str().unwrap()],
        ".load tests/souffle/aggregates.dl\n?- per_region(r, n, s).\n",
    );
    assert!(out.contains("north | 3 | 47"), "{out}");
    assert!(out.contains("west  | 0 |  0"), "{out}");
}

#[test]
fn load_refuses_a_souffle_program_reading_records_from_files() {
    let facts = repo().join("tests/souffle/record_input/facts");
    let o = repl_run(
        "cpu",
        &["--data", facts.to_str().unwrap()],
        b".load tests/souffle/record_input.dl\n.schema\n",
    );
    let out = o.out + &o.err;
    assert_eq!(o.code, 1, "{out}");
    assert!(
        out.contains("the input of `pair`, `nest`, `shape`, `tagged`, `scored`, `souffle:input1:color` holds records or values of algebraic data types, which the REPL does not read"),
        "{out}"
    );
    assert!(out.contains("(no predicates)"), "nothing was added: {out}");
}

/// `fox repl --devices 3` on simulated CPU devices: every query (recursion, aggregates,
/// a selection, a query over a predicate kept from an earlier one) answers as on one
/// device, byte for byte, also after `.backend`, which keeps the count of devices;
/// `.explain analyze` shows the exchanges and each device's peak.
#[test]
fn a_session_over_three_devices_answers_as_one_device() {
    let dir = tmp("devices");
    std::fs::create_dir_all(&dir).unwrap();
    let mut s = 11u64;
    let mut edges = std::collections::BTreeSet::new();
    while edges.len() < 120 {
        let a = crate::common::next(&mut s) % 40;
        let b = crate::common::next(&mut s) % 40;
        edges.insert((a, b));
    }
    let lines: String = edges.iter().map(|(a, b)| format!("{a},{b}\n")).collect();
    std::fs::write(dir.join("edge.csv"), lines).unwrap();
    let data = dir.to_str().unwrap();
    let script = "edge(x, y) -> int32(x), int32(y).\n.input edge.\n\
                  path(x, y) <- edge(x, y).\npath(x, z) <- path(x, y), edge(y, z).\n\
                  deg[x] = n <- agg<<n = count()>> path(x, _).\n?- deg[x] = n.\n\
                  ?- deg[x] = n, n > 30.\n\
                  tot[] = s <- agg<<s = sum(y)>> edge(_, y).\n?- tot[] = s.\n\
                  ?- edge(x, y), x < 5.\n.backend cpu\n?- edge(x, y), y < 4.\n";
    let one = repl(&["--data", data], script);
    assert!(one.contains(" rows") && one.contains("backend: cpu\n"), "{one}");
    let three = repl(&["--data", data, "--devices", "3"], script);
    assert!(three.contains("backend: 3 x cpu\n"), "{three}");
    assert_eq!(one, three.replace("backend: 3 x cpu\n", "backend: cpu\n"));
    let o = repl_run(
        "cpu",
        &["--data", data, "--devices", "3"],
        format!("{script}.explain analyze ?- deg[x] = n.\n").as_bytes(),
    );
    assert_eq!(o.code, 0, "{}", o.err);
    assert!(o.out.contains("\nexchanges: "), "{}", o.out);
    assert!(o.out.contains("\ndevice 2: device peak "), "{}", o.out);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `fox repl --devices 3`, whose devices keep their parts of the loaded table between
/// queries: the same query again, queries over predicates kept in memory whose facts
/// change between queries (those tables are uploaded again), and the loaded table read
/// after them answer as on one device, byte for byte.
#[test]
fn resident_parts_on_three_devices_answer_as_one_device_as_the_facts_change() {
    let dir = tmp("devices-resident");
    std::fs::create_dir_all(&dir).unwrap();
    let lines: String = (0..50).map(|k| format!("{},{}\n", k % 9, (k * 7) % 23)).collect();
    std::fs::write(dir.join("edge.csv"), lines).unwrap();
    let data = dir.to_str().unwrap();
    let script = "edge(x, y) -> int32(x), int32(y).\n.input edge.\n\
                  ?- edge(x, y), x < 5.\n?- edge(x, y), x < 5.\n\
                  r(x, y) <- edge(x, y), x < 4.\n?- r(x, y).\n\
                  s[x] = n <- agg<<n = count()>> r(x, _).\n?- s[x] = n.\n\
                  f(20, 21).\nf(1, 30).\nr(x, y) <- f(x, y).\n?- s[x] = n.\n?- r(x, y), y > 3.\n\
                  f(2, 40).\n?- s[x] = n.\n?- edge(x, y), y > 20.\n?- edge(x, y), x < 5.\n";
    let one = repl(&["--data", data], script);
    assert!(one.contains("20 | 1"), "{one}");
    let three = repl(&["--data", data, "--devices", "3"], script);
    assert_eq!(one, three);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `fox repl --devices 0` is a command-line error.
#[test]
fn a_session_needs_a_device() {
    let o = repl_run("cpu", &["--devices", "0"], b"");
    assert_eq!(o.code, 2, "{}", o.err);
    assert!(o.err.contains("at least 1 device"), "{}", o.err);
}

/// `fox repl --devices 3` with triangles and 4-cliques counted and listed, each query
/// asked twice: each run's devices claim the boxes of its multi-way joins afresh, so the
/// second answer is the first, and both are one device's, byte for byte.
#[test]
fn multi_way_joins_over_three_devices_answer_again_as_one_device() {
    let dir = tmp("devices-boxes");
    std::fs::create_dir_all(&dir).unwrap();
    // Node 0 is a hub joined to every other node.
    let linked = |a: u32, b: u32| a < b && ((a * 7 + b * 13) % 5 < 2 || a == 0);
    let mut lines = String::new();
    for a in 0..40u32 {
        for b in (a + 1)..40 {
            if linked(a, b) {
                lines.push_str(&format!("{a},{b}\n"));
            }
        }
    }
    std::fs::write(dir.join("edge.csv"), lines).unwrap();
    let (mut triangles, mut cliques) = (0u64, 0u64);
    for x in 0..40 {
        for y in x + 1..40 {
            for z in y + 1..40 {
                if linked(x, y) && linked(y, z) && linked(x, z) {
                    triangles += 1;
                    cliques += (z + 1..40)
                        .filter(|&w| linked(x, w) && linked(y, w) && linked(z, w))
                        .count() as u64;
                }
            }
        }
    }
    let data = dir.to_str().unwrap();
    let tri = "?- edge(x, y), edge(y, z), edge(x, z), x < y, y < z.\n";
    let script = format!(
        "edge(x, y) -> int32(x), int32(y).\n.input edge.\n\
         ntri[] = n <- agg<<n = count()>> edge(x, y), edge(y, z), edge(x, z), x < y, y < z.\n\
         ncl[] = n <- agg<<n = count()>> edge(x, y), edge(x, z), edge(x, w), edge(y, z), edge(y, w), edge(z, w), x < y, y < z, z < w.\n\
         ?- ntri[] = n.\n?- ncl[] = n.\n{tri}?- ntri[] = n.\n?- ncl[] = n.\n{tri}"
    );
    let one = repl(&["--data", data], &script);
    for n in [triangles, cliques] {
        assert_eq!(one.matches(&format!("\n{n}\n1 row\n")).count(), 2, "{n}: {one}");
    }
    assert_eq!(
        one.matches(&format!(" {triangles} rows (50 shown)\n")).count(),
        2,
        "{one}"
    );
    let three = repl(&["--data", data, "--devices", "3"], &script);
    assert_eq!(one, three);
    let _ = std::fs::remove_dir_all(&dir);
}
