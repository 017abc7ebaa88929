//! `foxrun` as a user runs it: the example programs end to end on the CPU backend against
//! the results stated in their header comments, plans loaded from RON, and every kind of
//! bad input (exit 1, a message naming file and line or the plan element, no output file).

use crate::common::repo as root;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn foxrun(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_foxrun"))
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
    crate::common::temp_dir("foxrun-cli", tag)
}

/// Runs `program` on the CPU with `data` and checks the CSV file of each listed output.
fn check_program(program: &str, data: Option<&Path>, expected: &[(&str, &str)]) {
    let out = temp_dir(&format!("out-{}", program.replace(['/', '.'], "_")));
    let out_s = out.display().to_string();
    let mut args = vec![program, "--backend", "cpu", "--out", &out_s];
    let data_s = data.map(|d| d.display().to_string());
    if let Some(d) = &data_s {
        args.extend(["--data", d.as_str()]);
    }
    let o = foxrun(&args);
    assert_eq!(o.status.code(), Some(0), "{program}: {}", stderr(&o));
    for (pred, csv) in expected {
        let path = out.join(format!("{pred}.csv"));
        let got = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{program}: {}: {e}", path.display()));
        assert_eq!(got, *csv, "{program}: output `{pred}`");
    }
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn aggregates() {
    check_program(
        "tests/programs/aggregates.logic",
        None,
        &[
            (
                "stats",
                "r,s,n,lo,hi,a\neast,14.75,2,4.25,10.50,7.375000\nnorth,1.00,1,1.00,1.00,1.000000\n\
                 west,14.00,2,7.00,7.00,7.000000\n",
            ),
            ("grand", "t\n29.75\n"),
            ("per_region", "r,n\neast,2\nnorth,1\nwest,2\n"),
            ("doubled", "r,s\neast,29.50\nnorth,2.00\nwest,28.00\n"),
            ("first_region", "r\neast\n"),
            ("distinct_amounts", "n\n4\n"),
            ("all_sales", "n\n5\n"),
            ("big_sales", "n\n"),
        ],
    );
}

#[test]
fn arithmetic() {
    check_program(
        "tests/programs/arithmetic.logic",
        None,
        &[
            (
                "calc",
                "k,a,b,c,d,e,g\n1,15,16,-3,9,3,5\n2,-7,-6,8,-2,-2,-6\n3,21,22,-6,12,5,8\n",
            ),
            ("left_assoc", "a,b\n4,2\n"),
            ("absolute", "k,y\n1,7\n2,4\n3,10\n"),
            ("rounded", "k,r\n1,2.3\n2,-1.2\n3,0.1\n"),
            ("floats", "k,f\n1,10500.0\n2,-6000.0\n3,15000.0\n"),
            ("ints", "k,i\n1,2\n2,-2\n3,0\n"),
            ("halves", "k,h\n1,3.5\n2,-2.0\n3,5.0\n"),
        ],
    );
}

#[test]
fn comparison_chains() {
    check_program(
        "tests/programs/comparison_chains.logic",
        None,
        &[
            ("ascending", "x,y,z\n1,2,3\n1,2,4\n1,3,4\n2,3,4\n"),
            ("in_range", "v\n2\n3\n"),
            ("descending", "a,b,c\n2,1,1\n3,1,1\n3,2,2\n4,1,1\n4,2,2\n4,3,3\n"),
            (
                "zigzag",
                "x,y,z\n1,2,1\n1,3,1\n1,4,1\n2,1,2\n2,3,2\n2,4,2\n3,1,3\n3,2,3\n3,4,3\n4,1,4\n4,2,4\n4,3,4\n",
            ),
            ("doubled_lt", "x,y\n1,2\n1,3\n2,3\n"),
            ("eq_ne", "x\n1\n"),
            ("listed", "x\n1\n3\n"),
        ],
    );
}

#[test]
fn dates() {
    check_program(
        "tests/programs/dates.logic",
        None,
        &[
            ("lead_time", "id,days\n1,3\n2,2\n3,30\n"),
            ("due", "id,d\n1,1998-12-01\n2,1996-05-28\n3,1996-03-30\n"),
            ("week_before", "id,d\n1,1998-08-26\n2,1996-02-21\n3,1995-12-24\n"),
            ("parts", "id,y,m,dd\n1,1998,9,2\n2,1996,2,28\n3,1995,12,31\n"),
            ("in_1996", "id\n2\n"),
            ("late", "id\n3\n"),
            ("leap_day", "id\n2\n"),
        ],
    );
}

#[test]
fn decimals() {
    check_program(
        "tests/programs/decimals.logic",
        None,
        &[
            ("net", "id,n\n1,9.5000\n2,17.9910\n3,5.5000\n"),
            ("taxed", "id,t\n1,10.28375000\n2,19.47525750\n3,5.95375000\n"),
            ("third", "id,q\n1,3.333333\n2,6.663333\n3,1.833333\n"),
            ("plus", "id,s\n1,10.125\n2,20.115\n3,5.625\n"),
            ("line", "id,l\n1,30.00\n2,19.99\n3,22.00\n"),
            ("total", "s\n35.49\n"),
            ("as_float", "id,f\n1,15.0\n2,29.985\n3,8.25\n"),
        ],
    );
}

#[test]
fn wide_decimals() {
    check_program(
        "tests/programs/wide_decimals.logic",
        None,
        &[
            (
                "by_region",
                "r,t\neast,18000000000000012.34\nwest,8999999999999999.99\nnorth,5.00\n",
            ),
            ("total", "t\n27000000000000017.33\n"),
            ("share", "r,s\neast,0.666667\nnorth,0.000000\nwest,0.333333\n"),
            (
                "scaled",
                "r,x\neast,180000000000000123.90\nnorth,50.50\nwest,90000000000000000.40\n",
            ),
            ("avg_region", "m\n9000000000000005.776667\n"),
            ("largest", "m\n18000000000000012.34\n"),
            ("top", "r\neast\n"),
            ("big", "r\neast\n"),
        ],
    );
}

#[test]
fn disjunction() {
    check_program(
        "tests/programs/disjunction.logic",
        None,
        &[
            ("either", "x\n1\n2\n3\n"),
            ("both_c", "x\n2\n3\n"),
            ("mixed", "x\n2\n4\n"),
            ("nested", "x\n2\n4\n"),
            ("tagged", "x,t\n1,a\n2,a\n2,b\n3,b\n"),
        ],
    );
}

#[test]
fn functional() {
    check_program(
        "tests/programs/functional.logic",
        None,
        &[
            ("cheap", "p\n1\n"),
            ("big", "p\n2\n"),
            ("above", "p\n2\n"),
            ("stock_value", "s\n349.97\n"),
            ("as_relation", "p,v\n1,5.00\n2,150.00\n3,99.99\n"),
            ("discounted", "p,d\n1,4.50\n3,99.49\n"),
        ],
    );
}

#[test]
fn multiple_heads() {
    check_program(
        "tests/programs/multiple_heads.logic",
        None,
        &[
            ("tagged", "x,c1\n1,small\n2,small\n"),
            ("doubled", "x,y\n1,2\n2,4\n"),
            ("marker", "c0\n7\n"),
            ("flag", "c0\n7\n"),
            ("size", "c\n2\n"),
        ],
    );
}

#[test]
fn names_and_comments() {
    check_program(
        "tests/programs/names_and_comments.logic",
        None,
        &[
            ("lineitem:late", "o\n100\n102\n"),
            ("order_2:total", "o,n\n100,2\n101,1\n102,1\n"),
            (
                "shipped_on:day",
                "o,d\n100,1998-09-01\n100,1998-09-03\n101,1998-08-30\n102,1998-09-10\n",
            ),
        ],
    );
}

#[test]
fn negation() {
    check_program(
        "tests/programs/negation.logic",
        None,
        &[
            ("reached", "x\n1\n2\n3\n"),
            ("leaf", "x\n3\n5\n"),
            ("not_from_1", "x\n3\n5\n"),
        ],
    );
}

#[test]
fn strings() {
    check_program(
        "tests/programs/strings.logic",
        None,
        &[
            ("brass", "id\n1\n3\n6\n"),
            ("not_brass", "id\n2\n4\n5\n"),
            ("promo", "id\n2\n3\n"),
            ("romo", "id\n2\n3\n"),
            (
                "short_kind",
                "id,s\n1,STAND\n2,PROMO\n3,PROMO\n4,LARGE\n5,SMALL\n6,MEDIU\n",
            ),
            ("name_len", "id,n\n1,12\n2,10\n3,11\n4,8\n5,10\n6,9\n"),
            ("long_name", "id\n1\n3\n"),
            (
                "label",
                "id,l\n1,STANDARD BRASS: brass widget\n2,PROMO STEEL: steel bolt\n3,PROMO BRASS: copper pipe\n\
                 4,\"LARGE TIN: say \"\"hi\"\"\"\n5,SMALL COPPER: back\\slash\n6,\"MEDIUM BRASS: two\nlines\"\n",
            ),
            ("sized", "id\n4\n5\n"),
            ("after_m", "id\n1\n2\n3\n5\n"),
        ],
    );
}

#[test]
fn types() {
    check_program(
        "tests/programs/types.logic",
        None,
        &[
            (
                "wide",
                "x64,xd,xf\n-2,-1.50,-1.5\n-1,-1.00,-1.0\n1,1.00,1.0\n2,19.99,19.99\n",
            ),
            ("yes", "a\n1\n"),
            ("no", "a\n-1\n"),
        ],
    );
}

#[test]
fn recursion() {
    check_program(
        "tests/programs/unicode_arrows.logic",
        None,
        &[
            ("even", "n\n0\n2\n4\n"),
            ("odd", "n\n1\n3\n"),
            ("path", "x,y\n0,1\n0,2\n0,3\n0,4\n1,2\n1,3\n1,4\n2,3\n2,4\n3,4\n"),
        ],
    );
    check_program(
        "tests/programs/recursion_mutual.logic",
        None,
        &[
            ("even", "n\n0\n2\n4\n6\n8\n"),
            ("odd", "n\n1\n3\n5\n7\n9\n"),
            ("from_two", "n,k\n3,1\n4,2\n5,3\n6,4\n7,5\n8,6\n9,7\n"),
        ],
    );
    check_program(
        "queries/even_odd.logic",
        None,
        &[("even", "n\n0\n2\n4\n"), ("odd", "n\n1\n3\n5\n")],
    );
}

const SG: &str = "x,y\n2,3\n3,2\n4,5\n4,6\n5,4\n5,6\n6,4\n6,5\n7,8\n8,7\n";

#[test]
fn same_generation() {
    check_program("tests/programs/same_generation.logic", None, &[("sg", SG)]);
    let data = temp_dir("sg-data");
    std::fs::write(data.join("parent.csv"), "1,2\n1,3\n2,4\n3,5\n3,6\n4,7\n6,8\n").unwrap();
    check_program("queries/same_generation.logic", Some(&data), &[("sg", SG)]);
    std::fs::remove_dir_all(&data).unwrap();
}

#[test]
fn inputs_from_data_files() {
    let data = root().join("tests/programs/data");
    check_program(
        "tests/programs/io_directives.logic",
        Some(&data),
        &[
            ("path", "x,y\n1,2\n1,3\n1,4\n2,3\n2,4\n3,4\n"),
            ("revenue", "orderkey,rev\n2,380.0000\n1,300.0000\n3,300.0000\n"),
            (
                "shipped",
                "orderkey,shipdate,shipmode\n3,1998-09-02,AIR\n2,1998-09-01,AIR\n",
            ),
        ],
    );
    check_program(
        "tests/programs/triangles_input.logic",
        Some(&data),
        &[("tri", "x,y,z\n1,2,3\n2,3,4\n"), ("ntri", "n\n2\n")],
    );
    check_program(
        "queries/transitive_closure.logic",
        Some(&data),
        &[("path", "x,y\n1,2\n1,3\n1,4\n2,3\n2,4\n3,4\n")],
    );
}

/// The graph queries on the complete graph K5 (both directions of every edge): 10
/// triangles, 5 4-cliques, one 5-clique.
#[test]
fn cliques_of_k5() {
    let data = temp_dir("k5");
    let mut edges = String::new();
    for a in 1..=5 {
        for b in 1..=5 {
            if a != b {
                edges.push_str(&format!("{a},{b}\n"));
            }
        }
    }
    std::fs::write(data.join("edge.csv"), edges).unwrap();
    let mut tri = String::from("x,y,z\n");
    let mut c4 = String::from("x,y,z,w\n");
    for a in 1..=5 {
        for b in a + 1..=5 {
            for c in b + 1..=5 {
                tri.push_str(&format!("{a},{b},{c}\n"));
                for d in c + 1..=5 {
                    c4.push_str(&format!("{a},{b},{c},{d}\n"));
                }
            }
        }
    }
    check_program("queries/triangle.logic", Some(&data), &[("tri", &tri)]);
    check_program("queries/triangle_count.logic", Some(&data), &[("ntri", "n\n10\n")]);
    check_program("queries/clique4.logic", Some(&data), &[("clique4", &c4)]);
    check_program("queries/clique4_count.logic", Some(&data), &[("n4", "n\n5\n")]);
    check_program("queries/clique5_count.logic", Some(&data), &[("n5", "n\n1\n")]);
    std::fs::remove_dir_all(&data).unwrap();
}

#[test]
fn stdout_tables_timing_and_backend_notice() {
    let o = foxrun(&["queries/even_odd.logic", "--timing"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "even\nn\n-\n0\n2\n4\n3 rows\n\nodd\nn\n-\n1\n3\n5\n3 rows\n"
    );
    let e = stderr(&o);
    let notice = e.lines().next().unwrap_or("");
    assert!(
        notice.starts_with("foxrun: running on the gpu (")
            || (notice.starts_with("foxrun: no usable GPU (") && notice.ends_with("); running on the CPU")),
        "{e}"
    );
    assert!(
        e.contains("load ") && e.contains("compute ") && e.contains("output "),
        "{e}"
    );
    assert!(e.contains("memory: planned peak "), "{e}");
    assert!(e.contains("output even"), "{e}");
    let o = foxrun(&["queries/even_odd.logic", "--backend", "gpu"]);
    if notice.starts_with("foxrun: no usable GPU") {
        assert_eq!(o.status.code(), Some(1));
        assert!(
            stderr(&o).contains("no usable GPU for --backend gpu: "),
            "{}",
            stderr(&o)
        );
    } else {
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(
            stdout(&o),
            "even\nn\n-\n0\n2\n4\n3 rows\n\nodd\nn\n-\n1\n3\n5\n3 rows\n"
        );
    }
    let o = foxrun(&["queries/even_odd.logic", "--backend", "tpu"]);
    assert_eq!(o.status.code(), Some(2));
}

fn kernel_plan(program: &str) -> fox_kernel::KernelPlan {
    let source = fox_cli::Source::read(&root().join(program)).unwrap();
    let core = fox_cli::check(&source).core.unwrap();
    fox_kernel::lower(&fox_ra::plan(&core).unwrap()).unwrap()
}

#[test]
fn runs_a_compiled_plan() {
    let dir = temp_dir("ron");
    let plan_path = dir.join("plan.ron");
    std::fs::write(
        &plan_path,
        fox_kernel::to_ron(&kernel_plan("tests/programs/strings.logic")),
    )
    .unwrap();
    let out = dir.join("out");
    let o = foxrun(&[
        plan_path.to_str().unwrap(),
        "--backend",
        "cpu",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(out.join("short_kind.csv")).unwrap(),
        "id,s\n1,STAND\n2,PROMO\n3,PROMO\n4,LARGE\n5,SMALL\n6,MEDIU\n"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs a failing case and checks exit status 1, the message, and that nothing was written.
fn expect_failure(args: &[&str], out: &Path, needles: &[&str]) {
    let mut all: Vec<&str> = args.to_vec();
    let out_s = out.display().to_string();
    all.extend(["--backend", "cpu", "--out", &out_s]);
    let o = foxrun(&all);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    for n in needles {
        assert!(e.contains(n), "expected {n:?} in: {e}");
    }
    assert!(!e.contains("panicked"), "{e}");
    let written: Vec<_> = std::fs::read_dir(out)
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    assert!(written.is_empty(), "files were written: {written:?}");
}

const TYPED: &str = "t(i, d, dt, b, s) -> int32(i), decimal(d), date(dt), bool(b), string(s).\n.input t.\n\
                     ok(i, s) <- t(i, _, _, _, s).\n.output ok.\n";

#[test]
fn bad_data_is_an_error_naming_file_line_and_column() {
    let dir = temp_dir("bad-data");
    let program = dir.join("q.logic");
    std::fs::write(&program, TYPED).unwrap();
    let good = "1,2.50,2020-01-01,true,\"a, b\"\n";
    let cases: &[(&str, Option<&str>, &[&str])] = &[
        (
            "missing file",
            None,
            &["cannot read `", "t.csv` (input of `t`): No such file"],
        ),
        (
            "column count",
            Some("1,2.50,2020-01-01,true\n"),
            &["t.csv:2: expected 5 fields", "found 4"],
        ),
        (
            "bad int",
            Some("x1,2.50,2020-01-01,true,s\n"),
            &["t.csv:2: column 1 (`i`, int32)", "`x1`"],
        ),
        (
            "bad decimal",
            Some("1,2.5x,2020-01-01,true,s\n"),
            &["t.csv:2: column 2 (`d`, decimal(2))", "`2.5x`"],
        ),
        (
            "decimal digits",
            Some("1,2.505,2020-01-01,true,s\n"),
            &["t.csv:2: column 2", "3 fraction digits"],
        ),
        (
            "bad date",
            Some("1,2.50,2020-02-30,true,s\n"),
            &["t.csv:2: column 3 (`dt`, date)", "`2020-02-30`"],
        ),
        (
            "bad bool",
            Some("1,2.50,2020-01-01,yes,s\n"),
            &["t.csv:2: column 4 (`b`, bool)", "`yes`"],
        ),
        (
            "unterminated quote",
            Some("1,2.50,2020-01-01,true,\"s\n"),
            &["t.csv:2: unterminated quoted field"],
        ),
    ];
    for (what, row, needles) in cases {
        let data = dir.join(what.replace(' ', "_"));
        std::fs::create_dir_all(&data).unwrap();
        if let Some(row) = row {
            std::fs::write(data.join("t.csv"), format!("{good}{row}")).unwrap();
        }
        let out = data.join("out");
        expect_failure(
            &[program.to_str().unwrap(), "--data", data.to_str().unwrap()],
            &out,
            needles,
        );
        assert!(!out.exists(), "{what}: the output directory was created");
    }
    // The good row alone runs.
    let data = dir.join("good");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("t.csv"), good).unwrap();
    let out = data.join("out");
    let o = foxrun(&[
        program.to_str().unwrap(),
        "--data",
        data.to_str().unwrap(),
        "--backend",
        "cpu",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(out.join("ok.csv")).unwrap(),
        "i,s\n1,\"a, b\"\n"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_programs_and_plans_are_clean_errors() {
    let dir = temp_dir("bad-plan");
    let out = dir.join("out");
    // A program with errors: diagnostics, exit 1.
    let bad = dir.join("bad.logic");
    std::fs::write(&bad, "edge(x, y) -> int32(x), int32(y).\npath(x, y) <- edg(x, y).\n").unwrap();
    expect_failure(
        &[bad.to_str().unwrap(), "--color", "never"],
        &out,
        &["bad.logic:2:15", "1 error"],
    );
    // A plan of another version.
    let mut plan = kernel_plan("queries/even_odd.logic");
    plan.version += 1;
    let other = dir.join("other.ron");
    std::fs::write(&other, fox_kernel::to_ron(&plan)).unwrap();
    expect_failure(&[other.to_str().unwrap()], &out, &["other.ron", "version"]);
    // A plan hand-edited to output a buffer that nothing defines.
    let mut plan = kernel_plan("queries/even_odd.logic");
    let id = plan.buffers.len() as u32;
    plan.buffers.push(fox_kernel::BufVar {
        name: "hand_edited".into(),
        elem: fox_kernel::Elem::I32,
        ty: Some(fox_sema::core::Type::Int32),
    });
    let edited = plan
        .blocks
        .iter_mut()
        .flat_map(|b| b.instrs.iter_mut())
        .find_map(|i| match i {
            fox_kernel::Instr::Output { cols, .. } => {
                cols[0] = fox_kernel::BufId(id);
                Some(())
            }
            _ => None,
        });
    assert!(edited.is_some());
    let edited_path = dir.join("edited.ron");
    std::fs::write(&edited_path, fox_kernel::to_ron(&plan)).unwrap();
    expect_failure(&[edited_path.to_str().unwrap()], &out, &["hand_edited"]);
    // Not a plan at all.
    let junk = dir.join("junk.ron");
    std::fs::write(&junk, "(this is not a plan").unwrap();
    expect_failure(&[junk.to_str().unwrap()], &out, &["junk.ron"]);
    // A missing file.
    expect_failure(&["no/such/plan.ron"], &out, &["cannot read `no/such/plan.ron`"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--timing`: a total that the parts add up to, sizes in units beside the bytes, and
/// kernel names as `foxc compile --emit kernels` prints them.
#[test]
fn timing_has_a_total_sizes_in_units_and_the_plan_s_kernel_names() {
    // The join forced to one algorithm on both sides: the run plans with the statistics of
    // its data (a sorted input may make an index nested loop cheaper), `foxc` without.
    let o = foxrun(&[
        "queries/transitive_closure.logic",
        "--data",
        "tests/programs/data",
        "--backend",
        "cpu",
        "--timing",
        "--join",
        "merge",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let e = stderr(&o);
    let ms_after = |line: &str, label: &str| -> f64 {
        let rest = &line[line.find(label).unwrap_or_else(|| panic!("no {label:?} in {line:?}")) + label.len()..];
        rest.split(" ms").next().unwrap().trim().parse().unwrap()
    };
    let total_line = e
        .lines()
        .find(|l| l.starts_with("total "))
        .unwrap_or_else(|| panic!("{e}"));
    let total = ms_after(total_line, "total ");
    let parts = e.lines().find(|l| l.starts_with("load (parse) ")).unwrap();
    let sum: f64 = ["load (parse) ", "upload ", "compute ", "download ", "output ", "other "]
        .iter()
        .map(|p| ms_after(parts, p))
        .sum();
    // Six parts rounded to 0.001 ms against the rounded total.
    assert!((sum - total).abs() <= 0.004, "{sum} vs {total}:\n{e}");
    // The writing of the results comes last, timed apart from the run.
    let written = e.lines().last().unwrap();
    assert!(written.starts_with("results written in "), "{e}");
    assert!(ms_after(written, "results written in ") >= 0.0, "{e}");
    let mem = e.lines().find(|l| l.starts_with("memory: ")).unwrap();
    let peak = mem.split("device peak ").nth(1).unwrap();
    let bytes: u64 = peak.split(" bytes (").next().unwrap().parse().unwrap();
    let human = peak.split(" bytes (").nth(1).unwrap().split(')').next().unwrap();
    assert_eq!(human, fox_runtime::human_bytes(bytes), "{mem}");
    assert!(human.ends_with(" KB") || human.ends_with(" B"), "{mem}");

    let c = Command::new(env!("CARGO_BIN_EXE_foxc"))
        .args([
            "compile",
            "queries/transitive_closure.logic",
            "--emit",
            "kernels",
            "--join",
            "merge",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    let printed = stdout(&c);
    let table: Vec<&str> = e
        .lines()
        .skip_while(|l| !l.starts_with("kernel "))
        .skip(1)
        .take_while(|l| !l.starts_with("slowest instructions"))
        .collect();
    assert!(table.len() >= 8, "{e}");
    for line in table {
        // The name, then the calls and the time.
        let w: Vec<&str> = line.split_whitespace().collect();
        let name = w[..w.len() - 2].join(" ");
        assert!(
            printed.contains(&name),
            "`{name}` is not in the printed plan:\n{printed}"
        );
    }
    // The merge join searches each row's run of equal keys (`bound_range`): its pairs,
    // which only the relation's duplicate removal reads, are written in rounds.
    for name in [
        "sort_perm",
        "bound_range",
        "anti_match",
        "merge_union",
        "load_input[edge]",
        "output path",
    ] {
        assert!(e.contains(name), "no {name} in:\n{e}");
    }
}

/// Progress is for terminals: with standard error captured, a recursive program, a
/// generated graph and written outputs leave nothing there but the files written.
#[test]
fn no_progress_when_standard_error_is_not_a_terminal() {
    let out = temp_dir("silent");
    let out_s = out.display().to_string();
    let o = foxrun(&[
        "queries/transitive_closure.logic",
        "--data",
        "tests/programs/data",
        "--backend",
        "cpu",
        "--out",
        &out_s,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!("foxrun: wrote {} (6 rows)\n", out.join("path.csv").display())
    );
    assert_eq!(stdout(&o), "");
    let o = foxrun(&[
        "queries/triangle_count.logic",
        "--graph",
        "gnm:40:200:1",
        "--backend",
        "cpu",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
    std::fs::remove_dir_all(&out).unwrap();
}

/// On a terminal (a pseudo-terminal made by util-linux's `script`, where it is installed)
/// progress names the loop and its iterations; `--no-progress` draws none.
#[test]
fn progress_on_a_terminal_and_no_progress() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: no `script` command to make a terminal");
        return;
    }
    let out = temp_dir("tty");
    let run = |extra: &str| -> String {
        let cmd = format!(
            "{} queries/transitive_closure.logic --data tests/programs/data --backend cpu --out {} {extra}",
            env!("CARGO_BIN_EXE_foxrun"),
            out.display()
        );
        let o = Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .current_dir(root())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
        stdout(&o)
    };
    let screen = run("");
    assert!(screen.contains("stratum 0 loop (path): iteration 1, "), "{screen:?}");
    assert!(screen.contains("reading input `edge`"), "{screen:?}");
    assert_eq!(
        run("--no-progress"),
        format!("foxrun: wrote {} (6 rows)\r\n", out.join("path.csv").display())
    );
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn ctrl_c_stops_the_run_with_status_130() {
    // The transitive closure of 16,384 vertices: minutes of work.
    let dir = temp_dir("interrupt");
    let program = dir.join("closure.logic");
    std::fs::write(
        &program,
        "edge(x, y) -> int32(x), int32(y).\n.input edge.\n\
         path(x, y) <- edge(x, y).\npath(x, z) <- path(x, y), edge(y, z).\n\
         q(y) <- path(1, y), y < 5.\n.output q.\n",
    )
    .unwrap();
    let out = dir.join("out");
    let child = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .arg(&program)
        .args(["--backend", "cpu", "--graph", "rmat:14", "--out"])
        .arg(&out)
        .current_dir(root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(3000));
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(stderr(&o).ends_with("foxrun: interrupted\n"), "{}", stderr(&o));
    assert_eq!(stdout(&o), "");
    assert!(!out.exists(), "nothing is written");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn decimals_beyond_18_digits_are_errors() {
    let dir = temp_dir("decimal-digits");
    let out = dir.join("out");
    let program = dir.join("q.logic");
    std::fs::write(
        &program,
        "p(x) -> decimal(x).\n.input p.\nq(y) <- p(x), y = x * 9.\n.output q.\n",
    )
    .unwrap();
    // 1111111111111111.11 * 9 has 18 digits; 9999999999999999.99 * 9 has 19.
    std::fs::write(dir.join("p.csv"), "1111111111111111.11\n").unwrap();
    let o = foxrun(&[
        program.to_str().unwrap(),
        "--data",
        dir.to_str().unwrap(),
        "--backend",
        "cpu",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("9999999999999999.99"), "{}", stdout(&o));
    std::fs::write(dir.join("p.csv"), "1.00\n9999999999999999.99\n").unwrap();
    expect_failure(
        &[program.to_str().unwrap(), "--data", dir.to_str().unwrap()],
        &out,
        &["overflow", "does not fit decimal(2)"],
    );
    // An input value of 19 digits.
    std::fs::write(dir.join("p.csv"), "1.00\n92233720368547758.07\n").unwrap();
    expect_failure(
        &[program.to_str().unwrap(), "--data", dir.to_str().unwrap()],
        &out,
        &["p.csv:2: column 1 (`x`, decimal(2)): `92233720368547758.07` has more than 18 digits"],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn dates_stay_in_the_years_that_read_back() {
    let dir = temp_dir("date-range");
    let out = dir.join("out");
    let far = dir.join("far.logic");
    std::fs::write(&far, "d(x) <- x = date(\"9999-12-31\") + 100000000.\n.output d.\n").unwrap();
    expect_failure(&[far.to_str().unwrap()], &out, &["overflow", "does not fit date"]);
    let before = dir.join("before.logic");
    std::fs::write(&before, "d(x) <- x = date(\"0000-01-01\") - 1.\n.output d.\n").unwrap();
    expect_failure(&[before.to_str().unwrap()], &out, &["overflow", "does not fit date"]);
    // The last date is written and reads back.
    let last = dir.join("last.logic");
    std::fs::write(
        &last,
        "d(x) <- x = date(\"9999-12-30\") + 1.\ne(x) <- x = date(\"0000-01-02\") - 1.\n.output d.\n.output e.\n",
    )
    .unwrap();
    let o = foxrun(&[
        last.to_str().unwrap(),
        "--backend",
        "cpu",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(out.join("d.csv")).unwrap(), "x\n9999-12-31\n");
    assert_eq!(std::fs::read_to_string(out.join("e.csv")).unwrap(), "x\n0000-01-01\n");
    let back = dir.join("back.logic");
    std::fs::write(
        &back,
        "d(x) -> date(x).\n.input d.\nn(y) <- d(x), y = x - date(\"1970-01-01\").\n.output n.\n",
    )
    .unwrap();
    std::fs::write(out.join("d.csv"), "9999-12-31\n0000-01-01\n").unwrap();
    let o = foxrun(&[
        back.to_str().unwrap(),
        "--data",
        out.to_str().unwrap(),
        "--backend",
        "cpu",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("2932896") && stdout(&o).contains("-719528"),
        "{}",
        stdout(&o)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_sum_of_integers_into_a_decimal_column() {
    let dir = temp_dir("int-sum-decimal");
    let program = dir.join("q.logic");
    std::fs::write(
        &program,
        "p(x) -> int32(x).\n.input p.\nt[] = s -> decimal(s).\nt[] = s <- agg<<s = sum(x)>> p(x).\n.output t.\n",
    )
    .unwrap();
    std::fs::write(dir.join("p.csv"), "1\n2\n3\n").unwrap();
    let out = dir.join("out");
    let o = foxrun(&[
        program.to_str().unwrap(),
        "--data",
        dir.to_str().unwrap(),
        "--backend",
        "cpu",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(out.join("t.csv")).unwrap(), "s\n6.00\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--stats` does what its help says: per input relation its rows (and whether they
/// ascend on all columns together, and strictly), and per column its type, distinct
/// values, least and greatest values by value and whether it is sorted as loaded, `not
/// read` for a column the program does not read; the program does not run.
#[test]
fn stats_prints_the_statistics_of_the_inputs_instead_of_running() {
    let dir = temp_dir("stats");
    std::fs::write(
        dir.join("sale.csv"),
        "3,banana,2024-02-29,-1.50,x\n1,apple,1999-12-31,10.25,y\n2,cherry,2024-02-29,-1.50,z\n2,apple,2000-01-01,0.05,w\n",
    )
    .unwrap();
    std::fs::write(dir.join("visit.csv"), "1\n2\n2\n7\n").unwrap();
    std::fs::write(dir.join("none.csv"), "").unwrap();
    let program = dir.join("q.logic");
    std::fs::write(
        &program,
        "sale(id, item, on, price, note) -> int32(id), string(item), date(on), decimal(price), string(note).\n\
         .input sale.\n\
         visit(d) -> int64(d).\n.input visit.\n\
         none(n) -> float64(n).\n.input none.\n\
         cheap(item, on) <- sale(_, item, on, price, _), price < 1.\n\
         late(d) <- visit(d), none(n), n < 0.0.\n\
         .output cheap.\n.output late.\n",
    )
    .unwrap();
    let (p, d) = (program.display().to_string(), dir.display().to_string());
    let o = foxrun(&[&p, "--data", &d, "--backend", "cpu", "--stats"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "sale: 4 rows\n  \
         column  type        distinct  min         max         sorted\n  \
         id      int32       not read  -           -           -\n  \
         item    string             3  \"apple\"     \"cherry\"    no\n  \
         on      date               3  1999-12-31  2024-02-29  no\n  \
         price   decimal(2)         3  -1.50       10.25       no\n  \
         note    string      not read  -           -           -\n\
         \n\
         visit: 4 rows (ascending on all columns together)\n  \
         column  type   distinct  min  max  sorted\n  \
         d       int64         3  1    7    yes\n\
         \n\
         none: 0 rows\n  \
         column  type     distinct  min  max  sorted\n  \
         n       float64         0  -    -    yes\n"
    );
    // No results: the program did not run.
    assert!(!stdout(&o).contains("cheap"));
    // A bad row is the loader's error, as in a run.
    std::fs::write(dir.join("visit.csv"), "1\nx\n").unwrap();
    let o = foxrun(&[&p, "--data", &d, "--backend", "cpu", "--stats"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("visit.csv:2:"), "{}", stderr(&o));
    // Generated data too: a generated graph is sorted on its first column.
    let o = foxrun(&[
        "queries/triangle.logic",
        "--graph",
        "gnm:6:15:1",
        "--backend",
        "cpu",
        "--stats",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "edge: 30 rows (ascending on all columns together, no two equal)\n  \
         column  type   distinct  min  max  sorted\n  \
         x       int32         6  0    5    yes\n  \
         y       int32         6  0    5    no\n"
    );
    let help = stdout(&foxrun(&["--help"]));
    assert!(help.contains("--stats"), "{help}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A program's run on files reads its inputs before planning, and gives the results of
/// its compiled plan run on its own (which reads them as it runs), with string constants
/// the data lacks, and has, ordered among the data's strings; `--timing` shows the
/// statistics' time on its own line, outside the total.
#[test]
fn programs_load_before_planning_with_the_same_results() {
    let dir = temp_dir("load-first");
    std::fs::write(
        dir.join("item.csv"),
        "1,brass widget,STANDARD BRASS\n2,steel bolt,PROMO STEEL\n3,copper pipe,PROMO BRASS\n4,zinc,ABC\n5,\"a, b\",Mz\n",
    )
    .unwrap();
    let program = dir.join("q.logic");
    std::fs::write(
        &program,
        "item(id, name, kind) -> int32(id), string(name), string(kind).\n.input item.\n\
         after(id, k) <- item(id, _, k), k > \"M\", k < \"PROMO STEEL\".\n\
         brass(id) <- item(id, _, k), like(k, \"%BRASS\").\n\
         label(id, l) <- item(id, n, k), l = concat(k, n).\n\
         first[] = m <- agg<<m = min(k)>> item(_, _, k).\n\
         .output after.\n.output brass.\n.output label.\n.output first.\n",
    )
    .unwrap();
    let plan = dir.join("q.ron");
    let c = Command::new(env!("CARGO_BIN_EXE_foxc"))
        .arg("compile")
        .arg(&program)
        .arg("-o")
        .arg(&plan)
        .output()
        .unwrap();
    assert_eq!(c.status.code(), Some(0), "{}", stderr(&c));
    let (p, d, r) = (
        program.display().to_string(),
        dir.display().to_string(),
        plan.display().to_string(),
    );
    let args = ["--data", d.as_str(), "--backend", "cpu", "--max-rows", "all"];
    let from_program = foxrun(&[&[p.as_str(), "--timing"], &args[..]].concat());
    let from_plan = foxrun(&[&[r.as_str(), "--timing"], &args[..]].concat());
    assert_eq!(from_program.status.code(), Some(0), "{}", stderr(&from_program));
    assert_eq!(from_plan.status.code(), Some(0), "{}", stderr(&from_plan));
    assert_eq!(stdout(&from_program), stdout(&from_plan));
    assert!(
        stdout(&from_program).starts_with("after\nid | k\n---+------------\n 3 | PROMO BRASS\n 5 | Mz\n2 rows\n"),
        "{}",
        stdout(&from_program)
    );
    let e = stderr(&from_program);
    let line = e
        .lines()
        .find(|l| l.starts_with("statistics of the inputs "))
        .unwrap_or_else(|| panic!("{e}"));
    assert!(line.ends_with(" ms (before planning, not in the total)"), "{line}");
    // A compiled plan collects no statistics.
    assert!(
        !stderr(&from_plan).contains("statistics of the inputs"),
        "{}",
        stderr(&from_plan)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
