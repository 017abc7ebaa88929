//! The project's example programs are written in the language this crate parses: every
//! program under `queries/` and `tests/programs/` parses cleanly and round-trips, every
//! `tests/bad/syntax_*.logic` has syntax errors, and the other `tests/bad` programs (which
//! are wrong in types, safety or stratification, not in syntax) parse cleanly.

use std::path::{Path, PathBuf};

fn logic_files(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|rd| rd.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "logic"));
    files.sort();
    files
}

fn parse_file(path: &Path) -> (String, fox_syntax::ast::Program, Vec<fox_syntax::diag::Diagnostic>) {
    let src = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (p, d) = fox_syntax::parse(&src);
    (src, p, d)
}

#[test]
fn example_programs_parse_and_round_trip() {
    let mut files = logic_files("queries");
    files.extend(logic_files("tests/programs"));
    for path in files {
        let (src, mut program, diags) = parse_file(&path);
        assert!(
            diags.is_empty(),
            "{}",
            fox_syntax::diag::render(&path.display().to_string(), &src, &diags, false)
        );
        let printed = fox_syntax::pretty::print_program(&program);
        let (mut again, diags) = fox_syntax::parse(&printed);
        assert!(
            diags.is_empty(),
            "{}: printed form does not parse:\n{printed}",
            path.display()
        );
        program.erase_spans();
        again.erase_spans();
        assert_eq!(program, again, "{}: round trip changed the tree", path.display());
    }
}

#[test]
fn bad_programs_have_syntax_errors_exactly_when_named_so() {
    for path in logic_files("tests/bad") {
        let (src, _, diags) = parse_file(&path);
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.starts_with("syntax_") {
            assert!(!diags.is_empty(), "{name}: expected syntax errors");
        } else {
            assert!(
                diags.is_empty(),
                "{}",
                fox_syntax::diag::render(&path.display().to_string(), &src, &diags, false)
            );
        }
    }
}
