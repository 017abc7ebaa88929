//! The directives: `.input` options in any order (with `header`), `.include`, misspelled
//! directives, and programs read from several files with one source map.

use fox_syntax::ast::{Item, Program, Span};
use fox_syntax::diag::{Diagnostic, SourceMap};
use fox_syntax::parse;
use fox_syntax::pretty::print_program;
use fox_syntax::sources::load_files;
use std::path::{Path, PathBuf};

fn clean(src: &str) -> Program {
    let (p, diags) = parse(src);
    assert!(diags.is_empty(), "{src}: {diags:#?}");
    p
}

fn erased(src: &str) -> Program {
    let mut p = clean(src);
    p.erase_spans();
    p
}

#[test]
fn input_options_come_in_any_order_and_header_is_one() {
    let canonical = ".input p from \"p.csv\" sep \"\\t\" header key (a, b).";
    let p = clean(canonical);
    let Item::Input(i) = &p.items[0] else {
        panic!("not an input: {p:?}")
    };
    assert_eq!(&canonical[i.header.unwrap().range()], "header");
    assert_eq!(i.from.as_ref().unwrap().0, "p.csv");
    assert_eq!(i.sep.as_ref().unwrap().0, "\t");
    for other in [
        ".input p header from \"p.csv\" key (a, b) sep \"\\t\".",
        ".input p key (a, b) header sep \"\\t\" from \"p.csv\".",
        ".input p sep \"\\t\" from \"p.csv\" key (a, b) header.",
    ] {
        assert_eq!(erased(other), erased(canonical), "{other}");
    }
    // The printer writes the canonical order, which parses back to the same tree.
    assert_eq!(print_program(&p), format!("{canonical}\n"));
    let plain = clean(".input p from \"p.csv\" header.");
    let Item::Input(i) = &plain.items[0] else { panic!() };
    assert!(i.header.is_some() && i.sep.is_none() && i.key.is_none());
    // `header` stays a name everywhere else.
    clean("header(x) -> int32(x). .input header header. q(x) <- header(x).");
}

#[test]
fn repeated_and_unknown_input_options_are_errors() {
    let src = "e(x) -> int32(x).\n.input e from \"a.csv\" from \"b.csv\".\n.input e headr.\n.input e header header.\n.input e colour.\n";
    let (p, diags) = parse(src);
    let msgs: Vec<&str> = diags.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        msgs,
        [
            "`from` is given twice in `.input`",
            "unknown option `headr` in `.input`",
            "`header` is given twice in `.input`",
            "unknown option `colour` in `.input`",
        ],
        "{diags:#?}"
    );
    assert!(
        diags[1].notes.iter().any(|n| n.contains("did you mean `header`?")),
        "{diags:#?}"
    );
    assert!(diags[3].notes.iter().any(|n| n.contains("`header`")), "{diags:#?}");
    assert_eq!(&src[diags[0].span().range()], "from \"b.csv\"");
    // Only the declaration is kept.
    assert_eq!(p.items.len(), 1);
}

#[test]
fn include_is_a_directive() {
    let p = clean(".include \"../schema.logic\".\np(1).");
    let Item::Include(i) = &p.items[0] else {
        panic!("not an include: {p:?}")
    };
    assert_eq!(i.path.0, "../schema.logic");
    assert_eq!(print_program(&p), ".include \"../schema.logic\".\np(1).\n");
    let (_, diags) = parse(".include schema.");
    assert_eq!(diags.len(), 1, "{diags:#?}");
}

#[test]
fn misspelled_directives_are_one_error_with_a_suggestion() {
    let src = "e(x) -> int32(x).\ne(1).\n.ouput e.\n.inputs e.\n.includ \"x\".\n.decl e(x: number).\n.frobnicate e.\nf(x) <- e(x).\n";
    let (p, diags) = parse(src);
    let got: Vec<(&str, &str)> = diags
        .iter()
        .map(|d| (d.message.as_str(), &src[d.span().range()]))
        .collect();
    assert_eq!(
        got,
        [
            ("unknown directive `.ouput`", ".ouput"),
            ("unknown directive `.inputs`", ".inputs"),
            ("unknown directive `.includ`", ".includ"),
            ("unknown directive `.decl`", ".decl"),
            ("unknown directive `.frobnicate`", ".frobnicate"),
        ],
        "{diags:#?}"
    );
    let help = |k: usize| diags[k].notes.join(" ");
    assert!(help(0).contains("did you mean `.output`?"), "{}", help(0));
    assert!(help(1).contains("did you mean `.input`?"), "{}", help(1));
    assert!(help(2).contains("did you mean `.include`?"), "{}", help(2));
    assert!(help(3).contains("-> int32(x), int32(y)"), "{}", help(3));
    assert!(help(4).contains("`.input`, `.output` and `.include`"), "{}", help(4));
    // The clauses around them parse.
    assert_eq!(p.items.len(), 3, "{p:?}");
    // A clause right after a `.` without a space is no directive.
    assert_eq!(clean("p(1).q(2).").items.len(), 2);
}

#[test]
fn a_source_map_renders_each_label_in_its_file() {
    let mut map = SourceMap::new();
    let a = map.add("a.logic", "edge(x, y) -> int32(x), int32(y).\n").unwrap();
    let b = map.add("b.logic", "p(x) <- edg(x, _).\n").unwrap();
    let (fa, fb) = (&map.files()[a], &map.files()[b]);
    assert_eq!(fa.base, 0);
    assert!(fb.base as usize > fa.text.len(), "files do not share offsets");
    let at_b = Span::new(fb.base as usize + 8, fb.base as usize + 11);
    let at_a = Span::new(0, 4);
    let d = Diagnostic::error("unknown predicate `edg`", at_b).with_secondary(at_a, "`edge` is declared here");
    let text = map.render(&[d], false);
    assert!(text.contains("┌─ b.logic:1:9"), "{text}");
    assert!(text.contains("a.logic:1:1"), "{text}");
    assert_eq!(map.position(at_b), Some(("b.logic".to_string(), 1, 9)));
    // The end of a file belongs to it, not to the next one.
    assert_eq!(map.file_of(fa.text.len() as u32), a);
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fox-syntax-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("lib")).unwrap();
    d
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

#[test]
fn included_files_join_the_program_where_they_are_included() {
    let d = temp_dir("include");
    write(
        &d.join("lib/schema.logic"),
        "edge(x, y) -> int32(x), int32(y).\n.input edge.\n",
    );
    write(
        &d.join("lib/more.logic"),
        ".include \"schema.logic\".\nn(x) -> int32(x).\n",
    );
    write(
        &d.join("q.logic"),
        ".include \"lib/more.logic\".\npath(x, y) <- edge(x, y).\n",
    );
    write(
        &d.join("r.logic"),
        ".include \"lib/schema.logic\".\nback(y, x) <- edge(x, y).\n",
    );
    let l = load_files(&[d.join("q.logic"), d.join("r.logic")]).unwrap();
    assert!(l.diagnostics.is_empty(), "{:#?}", l.diagnostics);
    let text = print_program(&l.program);
    // schema.logic is read once, at its first `.include`, and its items come first.
    assert_eq!(
        text,
        "edge(x, y) -> int32(x), int32(y).\n.input edge.\nn(x) -> int32(x).\npath(x, y) <- edge(x, y).\nback(y, x) <- edge(x, y).\n"
    );
    let names: Vec<String> = l.map.files().iter().map(|f| f.name.clone()).collect();
    assert_eq!(names.len(), 4, "{names:?}");
    assert!(
        names[1].ends_with("lib/more.logic") && names[2].ends_with("lib/schema.logic"),
        "{names:?}"
    );
    assert_eq!(l.included, [false, true, true, false]);
    // Every span points into the file the item came from.
    let edge = &l.program.items[0];
    let (k, range) = l.map.locate(edge.span()).unwrap();
    assert_eq!(k, 2);
    assert_eq!(&l.map.files()[k].text[range], "edge(x, y) -> int32(x), int32(y).");
    assert_eq!(l.included_spans().len(), 2);
}

#[test]
fn include_errors_name_the_directive_and_the_chain() {
    let d = temp_dir("cycle");
    write(&d.join("a.logic"), "a(1).\n.include \"b.logic\".\n");
    write(&d.join("b.logic"), "b(1).\n\n  .include \"a.logic\".\n");
    write(
        &d.join("m.logic"),
        "m(1).\n.include \"lib/none.logic\".\n.include \"lib\".\n",
    );
    let l = load_files(&[d.join("a.logic")]).unwrap();
    assert_eq!(l.diagnostics.len(), 1, "{:#?}", l.diagnostics);
    let e = &l.diagnostics[0];
    assert!(e.message.starts_with("`.include` cycle: "), "{}", e.message);
    let chain: Vec<&str> = e.message["`.include` cycle: ".len()..].split(" -> ").collect();
    assert_eq!(chain.len(), 3, "{}", e.message);
    assert!(chain[0].ends_with("a.logic") && chain[1].ends_with("b.logic") && chain[2].ends_with("a.logic"));
    assert_eq!(
        l.map.position(e.span()).map(|(n, l, c)| (n.ends_with("b.logic"), l, c)),
        Some((true, 3, 3))
    );
    assert!(l.map.render(&l.diagnostics, false).contains("b.logic:3:3"));
    // Both files' items are there once.
    assert_eq!(l.program.items.len(), 2);

    let l = load_files(&[d.join("m.logic")]).unwrap();
    let msgs: Vec<String> = l.diagnostics.iter().map(|d| d.message.clone()).collect();
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert!(
        msgs[0].starts_with("cannot read `") && msgs[0].ends_with("lib/none.logic`: No such file"),
        "{msgs:?}"
    );
    assert!(msgs[1].contains("it is a folder"), "{msgs:?}");
    let text = l.map.render(&l.diagnostics, false);
    assert!(text.contains("m.logic:2:10"), "{text}");
    assert!(text.contains("m.logic:3:10"), "{text}");

    // A file named on the command line that cannot be read is an error of its own.
    let e = load_files(&[d.join("none.logic")]).unwrap_err();
    assert!(e.0.contains("none.logic`: No such file"), "{e}");
}

#[test]
fn syntax_errors_of_an_included_file_are_reported_in_it() {
    let d = temp_dir("syntax");
    write(&d.join("lib/s.logic"), "e(x) -> int32(x).\ne(1)\ne(2).\n");
    write(
        &d.join("q.logic"),
        "// the query\n.include \"lib/s.logic\".\np(x) <- e(x).\n",
    );
    let l = load_files(&[d.join("q.logic")]).unwrap();
    assert!(l.has_errors());
    let text = l.map.render(&l.diagnostics, false);
    assert!(text.contains("lib/s.logic:2:4"), "{text}");
    assert!(!text.contains("q.logic:"), "{text}");
}
