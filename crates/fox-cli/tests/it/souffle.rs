//! Soufflé programs (`tests/souffle/NAME.dl`, facts in `tests/souffle/NAME/facts/`) run by
//! `foxrun` give Soufflé's answers: the files each writes and what it prints equal, as sets
//! of lines (Soufflé orders symbols by when it first saw them, Fox by text), the outputs
//! the Soufflé binary wrote once (`NAME/expected/`, `NAME/stdout.expected`, made by
//! `tests/souffle/regen.sh`), and, where the binary is at hand
//! (`../shared/tools/souffle.xz` beside the clone, unpacked with `xz` or Python's lzma), what it writes
//! now. Without it the differential half is skipped with a message, unless
//! `FOX_REQUIRE_SOUFFLE=1`, which makes its absence a failure. The programs of
//! `tests/souffle/errors/` are refused with the error their first line states
//! (`// expect: LINE:COL: message`), located.

use crate::common::repo as root;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn temp_dir(tag: &str) -> PathBuf {
    crate::common::temp_dir("fox-souffle", tag)
}

/// The test programs, by name.
fn programs() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root().join("tests/souffle"))
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            (p.extension()? == "dl").then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    names
}

/// Each file of `dir` with its lines sorted.
fn sorted_files(dir: &Path) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        out.insert(
            p.file_name().unwrap().to_string_lossy().into_owned(),
            sorted_lines(&text),
        );
    }
    out
}

fn sorted_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

/// The facts folder of a program (an empty one when it has no facts).
fn facts(name: &str, scratch: &Path) -> PathBuf {
    let f = root().join("tests/souffle").join(name).join("facts");
    if f.is_dir() {
        return f;
    }
    let empty = scratch.join("no-facts");
    std::fs::create_dir_all(&empty).unwrap();
    empty
}

/// Runs `name` with foxrun on the CPU: its output files (lines sorted) and its printed lines.
fn run_fox(name: &str, scratch: &Path) -> (BTreeMap<String, Vec<String>>, Vec<String>) {
    let out = scratch.join(format!("fox-{name}"));
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .arg(root().join("tests/souffle").join(format!("{name}.dl")))
        .arg("--data")
        .arg(facts(name, scratch))
        .arg("--out")
        .arg(&out)
        .args(["--backend", "cpu", "--no-progress"])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{name}: foxrun failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let files = if out.is_dir() {
        sorted_files(&out)
    } else {
        BTreeMap::new()
    };
    (files, sorted_lines(&String::from_utf8_lossy(&o.stdout)))
}

#[test]
fn souffle_programs_give_the_committed_answers() {
    let scratch = temp_dir("committed");
    let names = programs();
    assert!(names.len() >= 10, "the Soufflé test programs are missing");
    for name in names {
        let (files, printed) = run_fox(&name, &scratch);
        let dir = root().join("tests/souffle").join(&name);
        assert_eq!(files, sorted_files(&dir.join("expected")), "{name}: output files");
        let expected = std::fs::read_to_string(dir.join("stdout.expected")).unwrap();
        assert_eq!(printed, sorted_lines(&expected), "{name}: printed lines");
    }
    let _ = std::fs::remove_dir_all(&scratch);
}

/// The Soufflé binary unpacked into `scratch`, or why there is none.
fn souffle_binary(scratch: &Path) -> Result<PathBuf, String> {
    let root = root();
    let candidates = [
        root.join("../shared/tools/souffle.xz"),
        root.join("../../shared/tools/souffle.xz"),
    ];
    let Some(xz) = candidates.iter().find(|p| p.is_file()) else {
        return Err("../shared/tools/souffle.xz is not beside the clone".to_string());
    };
    let bin = scratch.join("souffle");
    // `xz`, or Python's lzma module where `xz` is not installed.
    let o = Command::new("xz").arg("-dc").arg(xz).output().or_else(|_| {
        Command::new("python3")
            .args([
                "-c",
                "import lzma, sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())",
            ])
            .arg(xz)
            .output()
    });
    let o = o.map_err(|e| format!("cannot run xz or python3: {e}"))?;
    if !o.status.success() {
        return Err(format!("unpacking failed: {}", String::from_utf8_lossy(&o.stderr)));
    }
    std::fs::write(&bin, &o.stdout).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    Ok(bin)
}

#[test]
fn souffle_programs_give_the_answers_of_the_souffle_binary() {
    let scratch = temp_dir("differential");
    let souffle = match souffle_binary(&scratch) {
        Ok(b) => b,
        Err(why) => {
            assert!(
                std::env::var("FOX_REQUIRE_SOUFFLE").as_deref() != Ok("1"),
                "FOX_REQUIRE_SOUFFLE=1 but the Soufflé binary is not available: {why}"
            );
            eprintln!("skipped: the differential test against Soufflé needs its binary: {why}");
            return;
        }
    };
    for name in programs() {
        let (files, printed) = run_fox(&name, &scratch);
        let out = scratch.join(format!("souffle-{name}"));
        std::fs::create_dir_all(&out).unwrap();
        let o = Command::new(&souffle)
            .args(["-j1", "--no-preprocessor", "-F"])
            .arg(facts(&name, &scratch))
            .arg("-D")
            .arg(&out)
            .arg(root().join("tests/souffle").join(format!("{name}.dl")))
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{name}: souffle failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(files, sorted_files(&out), "{name}: output files, Fox against Soufflé");
        assert_eq!(
            printed,
            sorted_lines(&String::from_utf8_lossy(&o.stdout)),
            "{name}: printed lines, Fox against Soufflé"
        );
    }
    let _ = std::fs::remove_dir_all(&scratch);
}

#[test]
fn bad_souffle_programs_are_refused_with_located_errors() {
    let dir = root().join("tests/souffle/errors");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "dl") {
            continue;
        }
        n += 1;
        let text = std::fs::read_to_string(&p).unwrap();
        let expect = text.lines().next().unwrap().strip_prefix("// expect: ").unwrap();
        let (place, message) = expect.split_once(": ").unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_foxc"))
            .arg("check")
            .arg(&p)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        let file = p.file_name().unwrap().to_string_lossy();
        assert_eq!(o.status.code(), Some(1), "{file}: {err}");
        assert!(
            err.contains(&format!("error: {message}")),
            "{file}: wants `{message}`, got:\n{err}"
        );
        assert!(
            err.contains(&format!("{file}:{place}")),
            "{file}: wants the place {place}, got:\n{err}"
        );
        assert!(!err.contains("panicked"), "{file}: {err}");
    }
    assert!(n >= 10, "the bad Soufflé programs are missing");
}

#[test]
fn dialect_flag_reads_any_file_as_souffle() {
    let scratch = temp_dir("dialect");
    let prog = scratch.join("prog.txt");
    std::fs::write(
        &prog,
        ".decl a(x: number)\na(1). a(2).\n.decl b(x: number)\nb(x + 1) :- a(x).\n.output b\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .arg(&prog)
        .args(["--dialect", "souffle", "--backend", "cpu", "--no-progress"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "2\n3\n");
    // Without the flag the file is LogiQL, which it is not.
    let o = Command::new(env!("CARGO_BIN_EXE_foxc"))
        .arg("check")
        .arg(&prog)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let o = Command::new(env!("CARGO_BIN_EXE_foxc"))
        .args(["check", "--dialect", "souffle"])
        .arg(&prog)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let _ = std::fs::remove_dir_all(&scratch);
}

#[test]
fn negative_unsigned_values_are_an_error_not_a_wrong_answer() {
    let scratch = temp_dir("unsigned");
    let prog = scratch.join("u.dl");
    std::fs::write(
        &prog,
        ".decl u(x: unsigned)\nu(3).\nu(x - 5) :- u(x), x = 3.\n.output u\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .arg(&prog)
        .args(["--backend", "cpu", "--no-progress", "--out"])
        .arg(scratch.join("out"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("negative value -2 in its `unsigned` attribute `x`"),
        "{err}"
    );
    assert!(!scratch.join("out/u.csv").exists());
    let _ = std::fs::remove_dir_all(&scratch);
}

/// Runs the Soufflé program `text` on the CPU; its exit code and standard error.
fn run_program(scratch: &Path, text: &str) -> (Option<i32>, String) {
    let prog = scratch.join("p.dl");
    std::fs::write(&prog, text).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .arg(&prog)
        .args(["--backend", "cpu", "--no-progress"])
        .output()
        .unwrap();
    (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn operators_without_a_defined_value_stop_with_a_located_error() {
    let scratch = temp_dir("operator-errors");
    // Soufflé traps (SIGFPE) or gives what C leaves undefined: Fox stops, naming the
    // expression and the row.
    let cases = [
        (
            ".decl a(x: number)\na(7). a(0).\n.decl r(x: number)\nr(7 % x) :- a(x).\n.output r\n",
            "division by zero in `(7 % x)`",
            "p.dl:4:3",
        ),
        (
            ".decl a(x: number)\na(-9223372036854775807).\n.decl r(x: number)\nr((x - 1) % -1) :- a(x).\n.output r\n",
            "overflow: `((x - 1) % -1)` does not fit int64",
            "p.dl:4:3",
        ),
        (
            ".decl a(x: number)\na(63).\n.decl r(x: number)\nr(2 ^ x) :- a(x).\n.output r\n",
            "`(2 ^ x)` has no exact value",
            "p.dl:4:3",
        ),
        (
            ".decl a(x: number)\na(39).\n.decl r(x: number)\nr(3 ^ x) :- a(x).\n.output r\n",
            "`(3 ^ x)` has no exact value",
            "p.dl:4:3",
        ),
        (
            ".decl a(x: number)\na(-1).\n.decl r(x: number)\nr(0 ^ x) :- a(x).\n.output r\n",
            "division by zero in `(0 ^ x)`",
            "p.dl:4:3",
        ),
        (
            ".decl s(x: symbol)\ns(\"12\"). s(\"abc\").\n.decl r(x: number)\nr(to_number(x)) :- s(x).\n.output r\n",
            "`to_number` of \"abc\" has no value",
            "p.dl:4:3",
        ),
        (
            ".decl s(x: symbol)\ns(\"9223372036854775808\").\n.decl r(x: number)\nr(to_number(x)) :- s(x).\n.output r\n",
            "`to_number` of \"9223372036854775808\" has no value",
            "p.dl:4:3",
        ),
        (
            ".decl s(x: symbol)\ns(\"-1\").\n.decl r(x: unsigned)\nr(to_unsigned(x)) :- s(x).\n.output r\n",
            "`to_unsigned` of \"-1\" has no value",
            "p.dl:4:3",
        ),
        // Soufflé's `unsigned` from 2^63 on, which Fox would hold negative.
        (
            ".decl u(x: unsigned)\nu(5).\n.decl r(x: unsigned)\nr(x) :- u(x), bnot x > 10.\n.output r\n",
            "`bnot(x)` is below 0: as Soufflé's `unsigned` it is 2^64 more",
            "p.dl:4:15",
        ),
        (
            ".decl u(x: unsigned)\nu(3).\n.decl r(x: unsigned)\nr(x bshl 62) :- u(x).\n.output r\n",
            "`(x bshl 62)` is below 0: as Soufflé's `unsigned` it is 2^64 more",
            "p.dl:4:3",
        ),
        (
            ".decl n(x: number)\nn(-3).\n.decl r(x: unsigned)\nr(to_unsigned(x)) :- n(x).\n.output r\n",
            "`x` is below 0: as Soufflé's `unsigned` it is 2^64 more",
            "p.dl:4:3",
        ),
    ];
    for (text, message, place) in cases {
        let (code, err) = run_program(&scratch, text);
        assert_eq!(code, Some(1), "{text}\n{err}");
        assert!(
            err.contains(&format!("error: {message}")),
            "{text}\nwants `{message}`, got:\n{err}"
        );
        assert!(err.contains(place), "{text}\nwants {place}, got:\n{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // A filter before the conversion keeps the rows it would fail on from it.
    let (code, err) = run_program(
        &scratch,
        ".decl s(x: symbol)\ns(\"12\"). s(\"abc\").\n.decl r(x: number)\nr(to_number(x)) :- s(x), x != \"abc\".\n.output r\n",
    );
    assert_eq!(code, Some(0), "{err}");
    // Inside an aggregate too: the conversion is not fused into the filtered reduction,
    // which would read every row.
    let prog = scratch.join("agg.dl");
    std::fs::write(
        &prog,
        ".decl s(t: symbol)\ns(\"12\"). s(\"30\"). s(\"x5\").\n.decl r(n: number)\nr(n) :- n = sum to_number(t) : { s(t), t != \"x5\" }.\n.output r\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .arg(&prog)
        .args(["--backend", "cpu", "--no-progress"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "42\n");
    let _ = std::fs::remove_dir_all(&scratch);
}

#[test]
fn souffle_operators_are_not_logiql() {
    // LogiQL keeps its names: `min`, `band`, … are not built-in functions there, and a
    // user predicate may be called so.
    let scratch = temp_dir("logiql-names");
    let prog = scratch.join("p.logic");
    std::fs::write(
        &prog,
        "min(x) -> int(x).\nmin(1).\nband(x) <- min(x).\nq(y) <- min(x), y = max(x, 2).\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_foxc"))
        .arg("check")
        .arg(&prog)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("unknown function `max`"), "{err}");
    assert!(!err.contains("`min`") && !err.contains("`band`"), "{err}");
    let _ = std::fs::remove_dir_all(&scratch);
}

#[test]
fn malformed_records_and_adt_values_in_input_files_are_located_errors() {
    let scratch = temp_dir("record-input-errors");
    let prog = scratch.join("p.dl");
    std::fs::write(
        &prog,
        ".type P = [a: number, b: symbol]\n.type S = C {r: number} | D {}\n\
         .decl r(id: number, p: P)\n.input r\n.decl s(id: number, v: S)\n.input s\n.output r, s\n",
    )
    .unwrap();
    let cases = [
        (
            "1\t[1, a]\n2\t[2, b\n",
            "",
            "r.facts:2: attribute 2 (`[2, b`)",
            "is not closed",
        ),
        (
            "1\t[x, a]\n",
            "",
            "r.facts:1: attribute 2 (`[x, a]`)",
            "`x` is not a number",
        ),
        (
            "1\t1, a\n",
            "",
            "r.facts:1: attribute 2 (`1, a`)",
            "expected `[`, found `1`",
        ),
        (
            "1\t[1, a] z\n",
            "",
            "r.facts:1: attribute 2 (`[1, a] z`)",
            "`z` follows the value",
        ),
        (
            "1\t[1, a]\t3\n",
            "",
            "r.facts:1: 3 fields where `r` has 2 attributes",
            "",
        ),
        (
            "1\t[1, \"a]\n",
            "",
            "r.facts:1:",
            "a quoted symbol without its closing `\"`",
        ),
        (
            "",
            "1\t$E(1)\n",
            "s.facts:1: attribute 2 (`$E(1)`)",
            "`$E` is not a branch of this type ($C, $D)",
        ),
        (
            "",
            "1\t$C(1, 2)\n",
            "s.facts:1: attribute 2 (`$C(1, 2)`)",
            "expected `)`, found `,`",
        ),
        ("", "1\t$C\n", "s.facts:1: attribute 2 (`$C`)", "expected `(`"),
    ];
    for (r, s, at, what) in cases {
        let data = scratch.join("data");
        let _ = std::fs::remove_dir_all(&data);
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(data.join("r.facts"), r).unwrap();
        std::fs::write(data.join("s.facts"), s).unwrap();
        let out = scratch.join("out");
        let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
            .arg(&prog)
            .args(["--backend", "cpu", "--no-progress", "--data"])
            .arg(&data)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{r:?} {s:?}: {err}");
        assert!(err.contains(at) && err.contains(what), "{r:?} {s:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(!out.exists(), "{r:?} {s:?}: nothing is written");
    }
}
