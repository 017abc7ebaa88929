//! `foxc` as a user runs it: exit codes, messages, files written.

use crate::common::repo as root;
use std::path::PathBuf;
use std::process::{Command, Output};

fn foxc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_foxc"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn temp_dir(tag: &str) -> PathBuf {
    crate::common::temp_dir("foxc-cli", tag)
}

#[test]
fn check_clean_program_exits_zero_silently() {
    let o = foxc(&["check", "queries/triangle.logic"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
}

#[test]
fn check_bad_program_exits_one_with_location() {
    let dir = temp_dir("bad");
    let f = dir.join("q.logic");
    std::fs::write(&f, "edge(x, y) -> int32(x), int32(y).\npath(x, y) <- edg(x, y).\n").unwrap();
    let o = foxc(&["check", "--color", "never", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("q.logic:2:15"), "{e}");
    assert!(e.contains("edg"), "{e}");
    assert!(e.contains("edge"), "a suggestion of the closest name: {e}");
    assert!(e.contains('^'), "{e}");
}

#[test]
fn check_reports_every_file_and_fails_if_any_fails() {
    let dir = temp_dir("multi");
    let bad = dir.join("bad.logic");
    std::fs::write(&bad, "p(x) <- q(x)\n").unwrap();
    let o = foxc(&[
        "check",
        "--color",
        "never",
        "queries/triangle.logic",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("bad.logic:"), "{}", stderr(&o));
}

#[test]
fn missing_file_is_a_clear_error() {
    let o = foxc(&["check", "no/such/file.logic"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("cannot read `no/such/file.logic`"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
}

#[test]
fn non_utf8_file_is_a_clear_error() {
    let dir = temp_dir("utf8");
    let f = dir.join("q.logic");
    std::fs::write(&f, b"p(1).\n\xff\xfe\n").unwrap();
    let o = foxc(&["check", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("not UTF-8"), "{}", stderr(&o));
    // The line and column (in characters) of the first invalid byte, for programs and
    // plans alike.
    std::fs::write(
        &f,
        "p(1).\n// café \u{e9}".bytes().chain([0xc3, b'(']).collect::<Vec<u8>>(),
    )
    .unwrap();
    let o = foxc(&["check", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains(&format!("{}:2:10: the file is not UTF-8 text", f.display())),
        "{e}"
    );
    assert!(!e.contains("offset"), "{e}");
    let plan = dir.join("plan.ron");
    std::fs::write(&plan, b"KernelPlan(\n  version: 1,\n  \x80").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .args([plan.to_str().unwrap(), "--backend", "cpu"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains(&format!("{}:3:3: the file is not UTF-8 text", plan.display())),
        "{e}"
    );
}

#[test]
fn a_plan_that_is_not_ron_is_located() {
    let dir = temp_dir("ron-syntax");
    let plan = dir.join("plan.ron");
    std::fs::write(&plan, "KernelPlan(\n  version: 1,\n  buffers: [}\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .args([plan.to_str().unwrap(), "--backend", "cpu"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains(&format!("{}:3:13: the kernel plan is not valid RON", plan.display())),
        "{e}"
    );
}

#[test]
fn compile_writes_a_plan_that_loads_back() {
    let dir = temp_dir("compile");
    let out = dir.join("plan.ron");
    let o = foxc(&[
        "compile",
        "queries/transitive_closure.logic",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&out).unwrap();
    let plan = fox_kernel::from_ron(&text).unwrap();
    assert_eq!(fox_kernel::to_ron(&plan), text);
}

#[test]
fn compile_of_a_bad_program_writes_nothing() {
    let dir = temp_dir("nowrite");
    let src = dir.join("q.logic");
    std::fs::write(&src, "p(x) <- q(x, y), !r(z).\n").unwrap();
    let out = dir.join("plan.ron");
    let o = foxc(&["compile", src.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(!out.exists());
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "no temporary file is left behind"
    );
}

#[test]
fn emit_stages_print_to_stdout() {
    for (stage, needle) in [
        ("ast", "Rule"),
        ("core", "path"),
        ("ra", "path"),
        ("kernels", "merge_union"),
    ] {
        let o = foxc(&["compile", "queries/transitive_closure.logic", "--emit", stage]);
        assert_eq!(o.status.code(), Some(0), "{stage}: {}", stderr(&o));
        assert!(stdout(&o).contains(needle), "{stage}: {}", stdout(&o));
    }
}

#[test]
fn emit_ra_of_triangle_uses_the_multiway_join() {
    let o = foxc(&["compile", "queries/triangle.logic", "--emit", "ra"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).to_lowercase().contains("multijoin"), "{}", stdout(&o));
}

#[test]
fn emit_kernels_and_dot() {
    let o = foxc(&["compile", "queries/triangle.logic", "--emit", "kernels"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let k = stdout(&o);
    assert!(
        k.contains("trie_build") && k.contains("sorted_search") && k.contains("free "),
        "{k}"
    );
    let o = foxc(&["compile", "queries/transitive_closure.logic", "--emit", "dot"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let d = stdout(&o);
    assert!(d.starts_with("digraph") && d.contains("->"), "{d}");
}

#[test]
fn help_explains_the_commands() {
    let o = foxc(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    let h = stdout(&o);
    assert!(h.contains("check") && h.contains("compile"), "{h}");
    let o = foxc(&["compile", "--help"]);
    assert!(stdout(&o).contains("--emit"), "{}", stdout(&o));
}

#[test]
fn a_program_error_of_the_planner_is_located() {
    let mut map = fox_syntax::diag::SourceMap::new();
    map.add("schema.logic", "p(x) -> int32(x).\n");
    map.add("q.logic", "q(x) <- p(x).\n");
    // The second file starts one byte after the first one's end.
    let d = fox_syntax::diag::Diagnostic::error("something the planner refuses", fox_syntax::ast::Span::new(19, 23));
    let e = fox_cli::plan_error(&map, "q.logic", &fox_ra::PlanError::Program(Box::new(d)), false).to_string();
    assert!(e.contains("q.logic:1:1"), "{e}");
    assert!(e.contains("error: something the planner refuses"), "{e}");
    let e = fox_cli::plan_error(&map, "q.logic", &fox_ra::PlanError::Options("bad order".into()), false).to_string();
    assert_eq!(e, "q.logic: cannot plan the program: bad order");
}

#[test]
fn foxc_precompile_kernels_writes_a_cubin_per_module_and_architecture() {
    use fox_cuda::compile::{module_source, nvrtc_available, shipped_key, MODULES};
    let foxc = env!("CARGO_BIN_EXE_foxc");
    let dir = crate::common::temp_dir("fox-cli", "precompile");
    // A bad architecture is refused before anything is compiled.
    let o = std::process::Command::new(foxc)
        .args(["precompile-kernels", "--arch", "compute_90", "--out"])
        .arg(dir.join("bad"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("`compute_90` is not a real GPU architecture") || err.contains("libnvrtc"),
        "{err}"
    );
    if !nvrtc_available() {
        assert!(
            std::env::var("FOX_REQUIRE_NVRTC").is_err(),
            "FOX_REQUIRE_NVRTC is set but NVRTC is missing"
        );
        eprintln!("skipped: NVRTC is not available");
        return;
    }
    let out = dir.join("images");
    let o = std::process::Command::new(foxc)
        .args(["precompile-kernels", "--arch", "sm_90", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for (name, _) in MODULES {
        let file = out.join(format!(
            "{:032x}.cubin",
            shipped_key(module_source(name).unwrap(), "sm_90")
        ));
        let bytes = std::fs::read(&file).unwrap_or_else(|e| panic!("{name}: {}: {e}", file.display()));
        assert!(bytes.starts_with(b"\x7fELF"), "{name}: a CUBIN is an ELF image");
    }
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), MODULES.len());
}
