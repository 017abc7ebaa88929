//! Programs of several files (`foxc check a b`, `foxrun a b`, `.include`, the REPL's
//! `.load`), warnings as `foxc check` prints them, and the `.input` options end to end
//! (`header`, `.tsv`, gzip, and files that are not regular files).

use crate::common::repo as root;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn run(bin: &str, args: &[&str]) -> Output {
    Command::new(bin).args(args).current_dir(root()).output().unwrap()
}

fn foxc(args: &[&str]) -> Output {
    run(env!("CARGO_BIN_EXE_foxc"), args)
}

fn foxrun(args: &[&str]) -> Output {
    run(env!("CARGO_BIN_EXE_foxrun"), args)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn temp_dir(tag: &str) -> PathBuf {
    crate::common::temp_dir("fox-files", tag)
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

const SCHEMA: &str = "// the schema\nedge(x, y) -> int32(x), int32(y).\n.input edge.\n";
const PATHS: &str = "path(x, y) <- edge(x, y).\npath(x, z) <- path(x, y), edge(y, z).\n.output path.\n";

#[test]
fn several_files_make_one_program() {
    let d = temp_dir("several");
    let schema = write(&d, "schema.logic", SCHEMA);
    let paths = write(&d, "paths.logic", PATHS);
    let o = foxc(&["check", "--color", "never", &schema, &paths]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
    // Alone, the second file lacks the declaration; `--each` checks the files apart.
    let o = foxc(&["check", "--color", "never", &paths]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("paths.logic:1:15"), "{}", stderr(&o));
    let o = foxc(&["check", "--each", "--color", "never", &schema, &paths]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("unknown predicate `edge`"), "{}", stderr(&o));

    // Compiled and run as one program.
    let plan = d.join("plan.ron").display().to_string();
    let o = foxc(&["compile", &schema, &paths, "-o", &plan]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let data = write(&d, "data/edge.csv", "1,2\n2,3\n");
    let data = Path::new(&data).parent().unwrap().display().to_string();
    for program in [vec![plan.as_str()], vec![schema.as_str(), paths.as_str()]] {
        let mut args = program.clone();
        args.extend(["--backend", "cpu", "--data", &data]);
        let o = foxrun(&args);
        assert_eq!(o.status.code(), Some(0), "{program:?}: {}", stderr(&o));
        assert!(stdout(&o).contains("1 | 3"), "{}", stdout(&o));
    }
    let o = foxrun(&[&plan, &schema, "--backend", "cpu"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("a compiled plan (.ron) is run on its own"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn diagnostics_name_the_file_of_each_error() {
    let d = temp_dir("names");
    let a = write(&d, "a.logic", SCHEMA);
    let b = write(&d, "b.logic", "\n\nbad(x) <- edge(x).\nalso(x) <- edg(x, _).\n");
    let o = foxc(&["check", "--color", "never", &a, &b]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    // The error in b.logic, its note in a.logic where `edge` is declared.
    assert!(e.contains("┌─ ") && e.contains("b.logic:3:11"), "{e}");
    assert!(e.contains("a.logic:2:1"), "{e}");
    assert!(e.contains("b.logic:4:12"), "{e}");
    assert!(e.contains("did you mean `edge`?"), "{e}");
    assert!(e.contains("a.logic, ") && e.contains("b.logic: 2 errors"), "{e}");
}

#[test]
fn include_reads_a_schema_relative_to_the_including_file() {
    let d = temp_dir("include");
    write(&d, "lib/schema.logic", SCHEMA);
    let q = write(
        &d,
        "queries/q.logic",
        &format!(".include \"../lib/schema.logic\".\n{PATHS}"),
    );
    let r = write(
        &d,
        "queries/r.logic",
        ".include \"../lib/schema.logic\".\nback(y, x) <- edge(x, y).\n.output back.\n",
    );
    let o = foxc(&["check", "--color", "never", &q]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Two programs that include one schema make one program with it once.
    let o = foxc(&["check", "--color", "never", &q, &r]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let data = Path::new(&write(&d, "data/edge.csv", "1,2\n"))
        .parent()
        .unwrap()
        .display()
        .to_string();
    let o = foxrun(&[&q, &r, "--backend", "cpu", "--data", &data]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("back") && stdout(&o).contains("path"),
        "{}",
        stdout(&o)
    );

    // An error in the included file is shown there.
    write(&d, "lib/bad.logic", "edge(x, y) -> int32(x), int33(y).\n");
    let q2 = write(&d, "queries/q2.logic", "\n.include \"../lib/bad.logic\".\n");
    let o = foxc(&["check", "--color", "never", &q2]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("lib/bad.logic:1:25"), "{}", stderr(&o));
    assert!(stderr(&o).contains("unknown type `int33`"), "{}", stderr(&o));
}

#[test]
fn include_errors_point_at_the_directive() {
    let d = temp_dir("include-errors");
    let q = write(&d, "q.logic", "p(1).\n  .include \"nowhere.logic\".\n");
    let o = foxc(&["check", "--color", "never", &q]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("nowhere.logic`: No such file"), "{e}");
    assert!(e.contains("q.logic:2:12"), "{e}");
    assert!(e.contains('^'), "{e}");

    write(&d, "a.logic", "a(1).\n.include \"b.logic\".\n");
    write(&d, "b.logic", "b(1).\n.include \"a.logic\".\n");
    let o = foxc(&["check", "--color", "never", &d.join("a.logic").display().to_string()]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("error: `.include` cycle: "), "{e}");
    assert!(
        e.contains("a.logic -> ") && e.contains("b.logic -> ") && e.contains("b.logic:2:1"),
        "{e}"
    );
}

#[test]
fn repl_load_reads_included_files() {
    let d = temp_dir("repl");
    write(
        &d,
        "lib/schema.logic",
        "edge(x, y) -> int32(x), int32(y).\nedge(1, 2). edge(2, 3).\n",
    );
    let q = write(
        &d,
        "q.logic",
        ".include \"lib/schema.logic\".\npath(x, y) <- edge(x, y).\npath(x, z) <- path(x, y), edge(y, z).\n",
    );
    let bad = write(&d, "bad.logic", ".include \"lib/none.logic\".\n");
    let mut child = Command::new(env!("CARGO_BIN_EXE_fox"))
        .args(["repl", "--backend", "cpu"])
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let script = format!(".load {q}\n?- path(1, y).\n.load {bad}\n");
    child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    let out = stdout(&o);
    assert!(out.starts_with("ok (5 items added)\ny\n-\n2\n3\n2 rows\n"), "{out}");
    assert!(
        out.contains("bad.logic:1:10") && out.contains("lib/none.logic`: No such file"),
        "{out}"
    );
}

#[test]
fn warnings_print_located_and_leave_the_exit_status_alone() {
    let d = temp_dir("warnings");
    let q = write(
        &d,
        "q.logic",
        "edge(x, y) -> int32(x), int32(y).\nedge(1, 2).\nnode(n) -> int32(n).\nnode(1).\n\
         path(x, y) <- edge(x, y).\npath(x, z) <- path(x, y), edge(yy, z).\n\
         ok(x) <- edge(x, _ignored).\n.output path.\n.output ok.\n",
    );
    let o = foxc(&["check", "--color", "never", &q]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("warning: variable `yy` occurs only once in this rule"),
        "{e}"
    );
    assert!(e.contains("q.logic:6:32"), "{e}");
    assert!(e.contains("did you mean `y`?"), "{e}");
    assert!(e.contains("warning: variable `y` occurs only once in this rule"), "{e}");
    assert!(e.contains("warning: `node` is never used and not output"), "{e}");
    assert!(e.contains("q.logic:3:1"), "{e}");
    assert!(e.contains('^'), "{e}");
    assert!(!e.contains("_ignored") && !e.contains("error"), "{e}");
    // The program still compiles and runs.
    let o = foxrun(&[&q, "--backend", "cpu"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("warning: variable `yy`"), "{}", stderr(&o));

    // A misspelled directive is an error.
    let bad = write(
        &d,
        "bad.logic",
        "edge(x, y) -> int32(x), int32(y).\nedge(1, 2).\n.ouput edge.\n",
    );
    let o = foxc(&["check", "--color", "never", &bad]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("error: unknown directive `.ouput`") && e.contains("bad.logic:3:1"),
        "{e}"
    );
    assert!(e.contains("did you mean `.output`?"), "{e}");
}

fn logic_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            logic_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "logic") {
            out.push(p);
        }
    }
}

#[test]
fn the_shipped_programs_have_no_warnings() {
    let mut files = Vec::new();
    for d in ["queries", "tests/programs", "tpch"] {
        logic_files(&root().join(d), &mut files);
    }
    files.sort();
    assert!(files.len() >= 40, "{}", files.len());
    let mut noisy = Vec::new();
    for f in &files {
        let checked = fox_cli::check_files(std::slice::from_ref(f)).unwrap();
        if !checked.diagnostics.is_empty() {
            noisy.push(checked.render(false));
        }
    }
    assert!(noisy.is_empty(), "{}", noisy.join("\n"));
}

/// Runs foxrun and gives up (killing it) after `secs`: an input that blocks must not
/// hang the test.
fn foxrun_within(args: &[&str], secs: u64) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .args(args)
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("foxrun {args:?} did not finish within {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn input_options_end_to_end() {
    use flate2::write::GzEncoder;
    let d = temp_dir("inputs");
    let data = d.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let data_s = data.display().to_string();
    // A result written by Fox reads back with `header`.
    let first = write(
        &d,
        "first.logic",
        "item(id, name) -> int32(id), string(name).\nitem(1, \"bolt, steel\"). item(2, \"nut\").\n.output item.\n",
    );
    let out = d.join("out").display().to_string();
    let o = foxrun(&[&first, "--backend", "cpu", "--out", &out]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    std::fs::copy(d.join("out/item.csv"), data.join("item.csv")).unwrap();
    let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(b"1|10|\n2|20|\n\n").unwrap();
    std::fs::write(data.join("price.tbl.gz"), gz.finish().unwrap()).unwrap();
    std::fs::write(data.join("stock.tsv"), "1\t5\n2\t0\n").unwrap();
    let second = write(
        &d,
        "second.logic",
        "item(id, name) -> int32(id), string(name).\n.input item from \"item.csv\" header.\n\
         price(id, p) -> int32(id), int32(p).\n.input price from \"price.tbl.gz\" sep \"|\".\n\
         stock(id, n) -> int32(id), int32(n).\n.input stock from \"stock.tsv\".\n\
         offer(name, p) <- item(id, name), price(id, p), stock(id, n), n > 0.\n",
    );
    let o = foxrun(&[&second, "--backend", "cpu", "--data", &data_s]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("bolt, steel") && stdout(&o).contains("10"),
        "{}",
        stdout(&o)
    );
    assert!(!stdout(&o).contains("nut"), "{}", stdout(&o));

    // Without `header`, the hint.
    let third = write(
        &d,
        "third.logic",
        "item(id, name) -> int32(id), string(name).\n.input item.\nn(x) <- item(x, _).\n",
    );
    let o = foxrun(&[&third, "--backend", "cpu", "--data", &data_s]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("item.csv:1: column 1 (`id`, int32): `id` is not an int32"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("add `header` to the .input"), "{}", stderr(&o));

    // A FIFO with no writer is refused at once.
    #[cfg(unix)]
    {
        let fifo = std::ffi::CString::new(data.join("edge.csv").display().to_string()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let o = foxrun_within(
            &[
                "queries/transitive_closure.logic",
                "--backend",
                "cpu",
                "--data",
                &data_s,
            ],
            60,
        );
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("edge.csv` (input of `edge`): it is a FIFO (named pipe), not a regular file"),
            "{}",
            stderr(&o)
        );
    }
}
