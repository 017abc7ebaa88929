//! The repository's programs through the whole front end.
//!
//! - every `.logic` file in `queries/`, `tests/programs/` and `tpch/` checks clean, plans,
//!   lowers to kernels, and both plans round-trip through RON;
//! - every program in `tests/bad/` fails with located diagnostics, snapshotted;
//! - the typed core and the RA plan of the example programs are snapshotted.

use fox_cli::{check, Source};
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn logic_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            logic_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "logic") {
            out.push(p);
        }
    }
}

/// A source named by its path relative to the repository root, so snapshots do not
/// depend on where the checkout lives.
fn load(path: &Path) -> Source {
    let root = repo_root();
    let mut s = Source::read(path).unwrap();
    s.name = path.strip_prefix(&root).unwrap_or(path).display().to_string();
    s
}

fn good_programs() -> Vec<PathBuf> {
    let root = repo_root();
    let mut files = Vec::new();
    for d in ["queries", "tests/programs", "tpch"] {
        logic_files(&root.join(d), &mut files);
    }
    files.sort();
    files
}

#[test]
fn every_good_program_checks_plans_and_round_trips() {
    let files = good_programs();
    assert!(
        files.len() >= 10,
        "expected the example programs, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for path in &files {
        let source = load(path);
        let checked = check(&source);
        if checked.has_errors() {
            failures.push(source.render(&checked.diagnostics, false));
            continue;
        }
        let core = checked.core.expect("no errors, so a core program");
        let plan = match fox_ra::plan(&core) {
            Ok(p) => p,
            Err(e) => {
                failures.push(format!("{}: plan failed: {e}", source.name));
                continue;
            }
        };
        let ron = fox_ra::to_ron(&plan);
        match fox_ra::from_ron(&ron) {
            Ok(back) if back == plan => {}
            Ok(_) => failures.push(format!("{}: plan changed through RON", source.name)),
            Err(e) => failures.push(format!("{}: plan RON does not load: {e}", source.name)),
        }
        let kernels = match fox_kernel::lower(&plan) {
            Ok(k) => k,
            Err(e) => {
                failures.push(format!("{}: lowering failed: {e}", source.name));
                continue;
            }
        };
        match fox_kernel::from_ron(&fox_kernel::to_ron(&kernels)) {
            Ok(back) if back == kernels => {}
            Ok(_) => failures.push(format!("{}: kernel plan changed through RON", source.name)),
            Err(e) => failures.push(format!("{}: kernel plan RON does not load: {e}", source.name)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn bad_programs_report_located_errors() {
    let root = repo_root();
    let mut files = Vec::new();
    logic_files(&root.join("tests/bad"), &mut files);
    files.sort();
    assert!(
        files.len() >= 20,
        "expected the bad-program corpus, found {}",
        files.len()
    );
    for path in &files {
        let source = load(path);
        let checked = check(&source);
        assert!(checked.has_errors(), "{} should have errors", source.name);
        let rendered = source.render(&checked.diagnostics, false);
        // Every error is located: file:line:col and a caret line.
        for d in checked.diagnostics.iter().filter(|d| d.is_error()) {
            let (line, col) = fox_syntax::diag::line_col(&source.text, d.span().start as usize);
            let loc = format!("{}:{line}:{col}", source.name);
            assert!(
                rendered.contains(&loc),
                "{}: diagnostic `{}` lacks location {loc}",
                source.name,
                d.message
            );
        }
        assert!(rendered.contains('^'), "{}: no caret in\n{rendered}", source.name);
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        insta::assert_snapshot!(format!("bad__{name}"), rendered);
    }
}

/// The typed core and the RA plan of every example, so a change to either is reviewed.
#[test]
fn example_plans_snapshot() {
    let root = repo_root();
    for path in good_programs() {
        let rel = path.strip_prefix(&root).unwrap();
        if rel.starts_with("tpch") {
            continue;
        }
        let source = load(&path);
        let checked = check(&source);
        let core = checked.core.unwrap_or_else(|| panic!("{} does not check", source.name));
        let plan = fox_ra::plan(&core).unwrap();
        let key = rel.with_extension("").display().to_string().replace('/', "__");
        insta::assert_snapshot!(format!("core__{key}"), fox_sema::print_core(&core));
        insta::assert_snapshot!(format!("ra__{key}"), fox_ra::print_plan(&plan));
    }
}

/// The syntax tree of every example, spans left out (the parser's own tests check them).
#[test]
fn example_asts_snapshot() {
    let root = repo_root();
    for path in good_programs() {
        let rel = path.strip_prefix(&root).unwrap();
        if rel.starts_with("tpch") {
            continue;
        }
        let source = load(&path);
        let checked = check(&source);
        assert!(!checked.has_errors(), "{}", source.render(&checked.diagnostics, false));
        let key = rel.with_extension("").display().to_string().replace('/', "__");
        insta::assert_snapshot!(format!("ast__{key}"), ast_without_spans(&checked.ast));
    }
}

/// The AST as pretty RON without its `span` fields (and with every other span zeroed).
fn ast_without_spans(ast: &fox_syntax::ast::Program) -> String {
    let mut ast = ast.clone();
    ast.erase_spans();
    let text = ron::ser::to_string_pretty(&ast, ron::ser::PrettyConfig::default()).unwrap();
    let mut out = String::new();
    let mut skipping: Option<usize> = None;
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        if let Some(depth) = skipping {
            if indent == depth && line.trim_start().starts_with(')') {
                skipping = None;
            }
            continue;
        }
        let t = line.trim_start();
        if t.starts_with("span: (") && !t.ends_with("),") {
            skipping = Some(indent);
            continue;
        }
        if t.starts_with("span: ") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}
