//! Parquet and Arrow as a user meets them: `foxrun --format parquet|arrow --out DIR`,
//! `.input p from "x.parquet"` (its round trip and its errors), and the TPC-H queries on a
//! folder of Parquet tables written by foxrun.

use crate::common::repo as root;
use fox_cli::tpch;
use fox_runtime::DataSource;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

fn temp_dir(tag: &str) -> PathBuf {
    crate::common::temp_dir("fox-cli-parquet", tag)
}

fn foxrun(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .args(args)
        .args(["--backend", "cpu", "--no-progress"])
        .current_dir(root())
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

const FACTS: &str = r#"
t(k, n, m, d, s, b, f) -> int32(k), int64(n), decimal(m), date(d), string(s), bool(b), float(f).
t(1, 9000000000, 1.25, date("1998-09-02"), "a, \"quoted\"", true, 1.5).
t(2, -7, -0.05, date("1970-01-01"), "", false, -0.25).
t(3, 0, 100.00, date("2024-02-29"), "BRASS", true, 3.0e10).
.output t.
"#;

const READ: &str = r#"
t(k, n, m, d, s, b, f) -> int32(k), int64(n), decimal(m), date(d), string(s), bool(b), float(f).
.input t from "t.parquet" key (k).
u(k, n, m, d, s, b, f) <- t(k, n, m, d, s, b, f).
.output u.
"#;

/// foxrun writes Parquet and Arrow files, reads its Parquet back, and the rows (as CSV)
/// are those it wrote.
#[test]
fn foxrun_writes_parquet_and_arrow_and_reads_parquet_back() {
    let d = temp_dir("roundtrip");
    let facts = d.join("facts.logic");
    std::fs::write(&facts, FACTS).unwrap();
    let o = foxrun(&[s(&facts), "--out", s(&d.join("pq")), "--format", "parquet"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("t.parquet (3 rows)"), "{}", text(&o.stderr));
    let bytes = std::fs::read(d.join("pq/t.parquet")).unwrap();
    assert!(bytes.starts_with(b"PAR1") && bytes.ends_with(b"PAR1"));
    let o = foxrun(&[s(&facts), "--out", s(&d.join("arrow")), "--format", "arrow"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(std::fs::read(d.join("arrow/t.arrow")).unwrap().starts_with(b"ARROW1"));
    let want = foxrun(&[s(&facts), "--format", "csv"]);
    assert!(want.status.success());
    let read = d.join("read.logic");
    std::fs::write(&read, READ).unwrap();
    let got = foxrun(&[s(&read), "--data", s(&d.join("pq")), "--format", "csv"]);
    assert!(got.status.success(), "{}", text(&got.stderr));
    assert_eq!(text(&got.stdout), text(&want.stdout));
    assert!(text(&want.stdout).contains("1,9000000000,1.25,1998-09-02,\"a, \"\"quoted\"\"\",true,1.5"));
}

#[test]
fn binary_formats_need_an_output_folder() {
    let d = temp_dir("stdout");
    let facts = d.join("facts.logic");
    std::fs::write(&facts, FACTS).unwrap();
    for format in ["parquet", "arrow"] {
        for extra in [&[][..], &["--out", "-"][..]] {
            let mut args = vec![s(&facts), "--format", format];
            args.extend_from_slice(extra);
            let o = foxrun(&args);
            assert_eq!(o.status.code(), Some(2), "{format} {extra:?}");
            assert!(o.stdout.is_empty());
            assert!(
                text(&o.stderr).contains("--format parquet and --format arrow write files: give --out DIR"),
                "{}",
                text(&o.stderr)
            );
        }
    }
}

#[test]
fn parquet_input_errors_exit_1_with_the_file_column_and_row() {
    let d = temp_dir("errors");
    let facts = d.join("facts.logic");
    std::fs::write(&facts, FACTS).unwrap();
    assert!(foxrun(&[s(&facts), "--out", s(&d), "--format", "parquet"])
        .status
        .success());
    let run = |program: &str| {
        let p = d.join("p.logic");
        std::fs::write(&p, program).unwrap();
        let o = foxrun(&[s(&p), "--data", s(&d)]);
        let e = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{e}");
        assert!(!e.contains("panicked"), "{e}");
        e
    };
    // A column of another type.
    let e = run(&READ.replace("int64(n)", "string(n)"));
    assert!(
        e.contains("t.parquet`: column 2 (`n` in the file, `n` of `t`) has the Parquet (Arrow) type Int64, which does not fit the declared type string"),
        "{e}"
    );
    // int64 narrowed to int32: 9000000000 does not fit.
    let e = run(&READ.replace("int64(n)", "int32(n)"));
    assert!(
        e.contains("t.parquet`: row 1: column 2 (`n`, int32): 9000000000 is out of the range of int32"),
        "{e}"
    );
    // A wrong number of columns.
    let e = run("t(k, n) -> int32(k), int64(n).\n.input t from \"t.parquet\".\nu(k) <- t(k, _).\n");
    assert!(e.contains("the file has 7 columns"), "{e}");
    // Damaged files: cut short, random bytes.
    let bytes = std::fs::read(d.join("t.parquet")).unwrap();
    std::fs::write(d.join("t.parquet"), &bytes[..bytes.len() - 10]).unwrap();
    let e = run(READ);
    assert!(
        e.contains("t.parquet` (input of `t`) is not a readable Parquet file"),
        "{e}"
    );
    std::fs::write(d.join("t.parquet"), (0..=255u8).cycle().take(5000).collect::<Vec<u8>>()).unwrap();
    let e = run(READ);
    assert!(
        e.contains("t.parquet` (input of `t`) is not a readable Parquet file"),
        "{e}"
    );
    // `sep` and `header` mean nothing for Parquet: compile errors at their place.
    let e = run(&READ.replace("key (k)", "sep \"|\" header key (k)"));
    assert!(e.contains("`sep` does not apply to a Parquet file"), "{e}");
    assert!(e.contains("`header` does not apply to a Parquet file"), "{e}");
    assert!(e.contains("p.logic:3:"), "{e}");
}

/// The TPC-H tables written as Parquet by foxrun (`--tpch 0.01 --format parquet`) serve
/// the TPC-H programs, which name `.tbl` files, from a folder holding only the Parquet
/// files, and the queries give the results they give on generated data.
#[test]
fn tpch_queries_on_parquet_tables_match_generated_data() {
    let d = temp_dir("tpch");
    let program = d.join("dump.logic");
    let mut text_of = std::fs::read_to_string(root().join("tpch/schema.logic")).unwrap();
    for t in fox_runtime::tpch::TABLES {
        text_of.push_str(&format!(".output {t}.\n"));
    }
    std::fs::write(&program, text_of).unwrap();
    let data = d.join("data");
    let o = foxrun(&[s(&program), "--tpch", "0.01", "--out", s(&data), "--format", "parquet"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for t in fox_runtime::tpch::TABLES {
        assert!(data.join(format!("{t}.parquet")).is_file(), "{t}");
        assert!(!data.join(format!("{t}.tbl")).exists());
    }
    let queries = [1, 3, 9, 13, 18];
    let plans = tpch::compile_queries(&root().join("tpch/queries"), &queries).unwrap();
    let from_parquet = tpch::load(&DataSource::Files(data.clone()), &plans, false).unwrap();
    let generated = tpch::load(&DataSource::Tpch(0.01), &plans, false).unwrap();
    let rows: Vec<(String, usize)> = from_parquet.tables().map(|t| (t.input.name.clone(), t.rows)).collect();
    assert!(rows.contains(&("lineitem".to_string(), 60175)), "{rows:?}");
    assert!(from_parquet.tables().all(|t| t.input.file.ends_with(".parquet")));
    let mut backend = fox_cpu::CpuBackend::new();
    let a = tpch::run_queries(&mut backend, Arc::new(from_parquet), &plans, 0, false, |_| {}).unwrap();
    let b = tpch::run_queries(&mut backend, Arc::new(generated), &plans, 0, false, |_| {}).unwrap();
    for (x, y) in a.iter().zip(&b) {
        assert!(!y.output.is_empty(), "Q{}", y.query);
        assert_eq!(
            tpch::result_rows(&x.output),
            tpch::result_rows(&y.output),
            "Q{}",
            x.query
        );
    }
    // foxbench reads the folder too.
    let o = Command::new(env!("CARGO_BIN_EXE_foxbench"))
        .args([
            "tpch",
            "--backend",
            "cpu",
            "--queries",
            "6",
            "--repeat",
            "0",
            "--no-progress",
            "--data",
        ])
        .arg(&data)
        .current_dir(root())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("(60175 rows in 1 table)"),
        "{}",
        text(&o.stderr)
    );
    std::fs::remove_dir_all(&d).unwrap();
}
