//! Errors of a program found while it runs, as `foxrun` reports them on the CPU backend:
//! located at the rule (file:line:col, the source line and a caret) with the offending
//! values, exit status 1 and no result; functional predicates that give a key two values.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn temp_dir(tag: &str) -> PathBuf {
    crate::common::temp_dir("fox-runtime-errors", tag)
}

/// Writes `files` into a fresh directory and runs `foxrun q.logic --data . --backend cpu`.
fn run_program(tag: &str, program: &str, files: &[(&str, &str)]) -> (Output, PathBuf) {
    let d = temp_dir(tag);
    std::fs::write(d.join("q.logic"), program).unwrap();
    for (name, text) in files {
        std::fs::write(d.join(name), text).unwrap();
    }
    (run(&d, &["q.logic", "--data", ".", "--backend", "cpu"]), d)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Checks a failed run: exit 1, nothing on standard output, and standard error holding
/// each of `expected`.
fn assert_fails(o: &Output, expected: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "stderr: {err}");
    assert_eq!(stdout(o), "", "a failed run prints no result");
    for e in expected {
        assert!(err.contains(e), "stderr lacks {e:?}:\n{err}");
    }
}

const SALE: &str = "sale(i, a) -> int32(i), decimal(a).\n.input sale.\n";

#[test]
fn a_functional_rule_giving_a_key_two_values_is_an_error() {
    let program = format!("{SALE}best[i] = a -> int32(i), decimal(a).\nbest[i] = a <- sale(i, a).\n.output best.\n");
    let (o, d) = run_program("two-values", &program, &[("sale.csv", "1,5.00\n1,6.00\n2,1.00\n")]);
    assert_fails(
        &o,
        &[
            "error: `best[1]` has two values, 5.00 and 6.00",
            "q.logic:4:1",
            "best[i] = a <- sale(i, a).",
            "^^^^",
            "functional predicate",
        ],
    );
    // The same program over data that keeps the dependency runs.
    std::fs::write(d.join("sale.csv"), "1,5.00\n1,5.00\n2,1.00\n").unwrap();
    let o = run(&d, &["q.logic", "--data", ".", "--backend", "cpu"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("1 | 5.00"), "{}", stdout(&o));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn two_rules_that_disagree_on_a_key_are_an_error() {
    let program = "\
f[k] = v -> string(k), int64(v).
f[\"a\"] = 1.
f[k] = v <- g(k, v).
g(\"a\", 2).
g(\"b\", 3).
";
    let (o, d) = run_program("two-rules", program, &[]);
    assert_fails(&o, &["`f[\"a\"]` has two values, 1 and 2", "q.logic:3:1"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_scalar_with_two_values_is_an_error() {
    let program = format!("{SALE}total[] = v -> decimal(v).\ntotal[] = v <- sale(_, v).\n");
    let (o, d) = run_program("scalar", &program, &[("sale.csv", "1,5.00\n2,6.00\n")]);
    assert_fails(&o, &["`total[]` has two values, 5.00 and 6.00", "q.logic:4:1"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn recursion_that_gives_a_key_two_values_stops_with_an_error() {
    // Levels from vertex 1: vertex 3 is reached at level 1 and at level 2.
    let program = "\
edge(x, y) -> int32(x), int32(y).
.input edge.
level[x] = n -> int32(x), int64(n).
level[1] = 0.
level[y] = m <- level[x] = n, edge(x, y), m = n + 1.
";
    let (o, d) = run_program("recursive", program, &[("edge.csv", "1,2\n2,3\n1,3\n")]);
    assert_fails(&o, &["`level[3]` has two values, 1 and 2", "q.logic:5:1"]);
    // A chain keeps the dependency.
    std::fs::write(d.join("edge.csv"), "1,2\n2,3\n3,4\n").unwrap();
    let o = run(&d, &["q.logic", "--data", ".", "--backend", "cpu"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("4 | 3"), "{}", stdout(&o));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_input_of_a_functional_predicate_is_checked() {
    let program = "price[p] = v -> int64(p), decimal(v).\n.input price.\ncheap(p) <- price[p] = v, v < 10.\n";
    let (o, d) = run_program("input", program, &[("price.csv", "7,1.00\n8,2.00\n7,3.00\n")]);
    assert_fails(
        &o,
        &[
            "`price[7]` has two values, 1.00 and 3.00",
            "q.logic:2:1",
            ".input price.",
        ],
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn aggregations_need_no_check() {
    // One aggregation whose groups are the key gives one row per key: the plan holds no
    // check of the dependency.
    let d = temp_dir("aggregation");
    let program = format!("{SALE}n[i] = c <- agg<<c = count()>> sale(i, _).\nbest[i] = a <- sale(i, a).\n");
    std::fs::write(d.join("q.logic"), program).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_foxc"))
        .args(["compile", "q.logic", "--emit", "kernels"])
        .current_dir(&d)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let kernels = stdout(&o);
    assert_eq!(
        kernels.matches("repeated_key").count(),
        1,
        "only `best` is checked:\n{kernels}"
    );
    assert!(kernels.contains("`best` gives a key"), "{kernels}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn division_by_zero_names_the_rule_and_the_values() {
    let program = format!("{SALE}r(i, y) <- sale(i, a),\n    y = 10 / (a - 5.00).\n");
    let (o, d) = run_program("division", &program, &[("sale.csv", "2,7.50\n1,5.00\n")]);
    assert_fails(
        &o,
        &[
            "error: division by zero in `(10 / (a - 5.00))`",
            "q.logic:4:5",
            "y = 10 / (a - 5.00).",
            "a = 5.00",
            "instruction",
        ],
    );
    let err = stderr(&o);
    assert!(!err.contains("c0"), "columns are named by their variables: {err}");
    // A compiled plan keeps the program text: running it locates the error the same way.
    let c = Command::new(env!("CARGO_BIN_EXE_foxc"))
        .args(["compile", "q.logic", "-o", "q.ron"])
        .current_dir(&d)
        .output()
        .unwrap();
    assert_eq!(c.status.code(), Some(0), "{}", stderr(&c));
    let o = run(&d, &["q.ron", "--data", ".", "--backend", "cpu"]);
    assert_fails(&o, &["division by zero", "q.logic:4:5", "a = 5.00"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn overflow_names_the_rule_and_the_values() {
    let program = "n(x) -> int64(x).\nn(9223372036854775807).\nn(1).\nm(y) <- n(x), y = x * 2.\n";
    let (o, d) = run_program("overflow", program, &[]);
    assert_fails(&o, &["overflow", "q.logic:4:15", "x = 9223372036854775807"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_error_in_a_second_file_names_that_file() {
    let d = temp_dir("two-files");
    std::fs::write(d.join("schema.logic"), SALE).unwrap();
    std::fs::write(
        d.join("q.logic"),
        "// Rules over the schema.\nbest[i] = a -> int32(i), decimal(a).\nbest[i] = a <- sale(i, a).\n",
    )
    .unwrap();
    std::fs::write(d.join("sale.csv"), "1,5.00\n1,6.00\n").unwrap();
    let o = run(&d, &["schema.logic", "q.logic", "--data", ".", "--backend", "cpu"]);
    assert_fails(
        &o,
        &[
            "`best[1]` has two values, 5.00 and 6.00",
            "q.logic:3:1",
            "best[i] = a <- sale(i, a).",
        ],
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_error_of_an_expression_of_constants_shows_no_row() {
    let program = "x(d) <- d = date(\"9999-12-31\") + 100000000.\n.output x.\n";
    let (o, d) = run_program("constants", program, &[]);
    assert_fails(&o, &["overflow", "does not fit date", "q.logic:1:9"]);
    let err = stderr(&o);
    assert!(!err.contains("values of row"), "no column takes part: {err}");
    std::fs::remove_dir_all(&d).unwrap();
}
