//! The 22 TPC-H queries of tpch/queries on generated data at scale factor 0.01, on the CPU
//! backend, against answers DuckDB computed on the same data (tests/tpch/sf0.01, written
//! by `python3 tpch/bench-duckdb.py --data DIR --answers-out tests/tpch/sf0.01` over the
//! files of `foxbench tpch-gen --sf 0.01 --out DIR`); and the schema each query declares.

use crate::common::repo;
use fox_cli::tpch;
use fox_runtime::DataSource;
use std::process::Command;
use std::sync::Arc;

#[test]
fn all_queries_match_duckdb_at_sf_0_01() {
    let queries: Vec<u32> = (1..=22).collect();
    let plans = tpch::compile_queries(&repo().join("tpch/queries"), &queries).unwrap();
    let db = tpch::load(&DataSource::Tpch(0.01), &plans, false).unwrap();
    let mut backend = fox_cpu::CpuBackend::new();
    // One hot run after the first: the second run reads the resident columns.
    let runs = tpch::run_queries(&mut backend, Arc::new(db), &plans, 1, false, |_| {}).unwrap();
    assert_eq!(backend_in_use(&backend), 0, "resident columns are released");
    let mut failures = Vec::new();
    for r in &runs {
        let path = repo().join(format!("tests/tpch/sf0.01/q{:02}.csv", r.query));
        let text = std::fs::read_to_string(&path).unwrap();
        let mut want = tpch::parse_csv(&text);
        let header = want.remove(0);
        let ours: Vec<String> = r.output.columns.iter().map(|c| c.name.clone()).collect();
        if ours != header {
            failures.push(format!("Q{}: columns {ours:?}, expected {header:?}", r.query));
        }
        if let Err(e) = tpch::compare_rows(&tpch::result_rows(&r.output), &want, 0.01) {
            failures.push(format!("Q{}: {e}", r.query));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn backend_in_use(b: &fox_cpu::CpuBackend) -> usize {
    fox_runtime::Backend::mem(b).in_use
}

/// Every query declares the tables it reads exactly as tpch/schema.logic does.
#[test]
fn queries_declare_the_schema_verbatim() {
    let schema = std::fs::read_to_string(repo().join("tpch/schema.logic")).unwrap();
    // The declaration of a table with its `.input` line: from `name(` at the start of a
    // line to the end of its `.input` line.
    let block = |text: &str, table: &str| -> Option<String> {
        let start = text.find(&format!("\n{table}("))? + 1;
        let input = text[start..].find(&format!(".input {table} "))? + start;
        let end = text[input..].find('\n').map_or(text.len(), |e| input + e);
        Some(text[start..end].to_string())
    };
    for q in 1..=22 {
        let path = repo().join(format!("tpch/queries/q{q:02}.logic"));
        let text = std::fs::read_to_string(&path).unwrap();
        let mut tables = 0;
        for table in fox_runtime::tpch::TABLES {
            if let Some(b) = block(&text, table) {
                tables += 1;
                assert_eq!(
                    Some(&b),
                    block(&schema, table).as_ref(),
                    "Q{q}: `{table}` differs from the schema"
                );
            }
        }
        assert!(tables > 0, "Q{q} reads no table");
    }
}

/// `foxrun Q --tpch SF --out DIR` writes DIR/qNN.csv, the same as the answer.
#[test]
fn foxrun_generates_the_data() {
    let dir = std::env::temp_dir().join(format!("fox-tpch-foxrun-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .args(["tpch/queries/q06.logic", "--tpch", "0.01", "--backend", "cpu", "--out"])
        .arg(&dir)
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = std::fs::read_to_string(dir.join("q06.csv")).unwrap();
    let want = std::fs::read_to_string(repo().join("tests/tpch/sf0.01/q06.csv")).unwrap();
    assert_eq!(got, want);
    std::fs::remove_dir_all(&dir).unwrap();

    // A bad scale factor and a table TPC-H does not have are clear errors.
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .args(["tpch/queries/q06.logic", "--tpch", "0"])
        .current_dir(repo())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("scale factor"));
    let prog = std::env::temp_dir().join(format!("fox-tpch-bad-{}.logic", std::process::id()));
    std::fs::write(
        &prog,
        "shipments(a) -> int32(a).\n.input shipments.\nn[] = c <- agg<<c = count()>> shipments(_).\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .arg(&prog)
        .args(["--tpch", "0.01", "--backend", "cpu"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("no table `shipments`") && e.contains("lineitem"), "{e}");
    std::fs::remove_file(&prog).unwrap();

    // Running out of host memory while generating stops with a message (here a reserve
    // larger than any machine stands for a scale factor too large for this one): the
    // generators' text pool, the first large allocation, is refused before it is made.
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .args(["tpch/queries/q06.logic", "--tpch", "0.01", "--backend", "cpu"])
        .env("FOX_HOST_RESERVE", "18000000000000000000")
        .current_dir(repo())
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    if std::path::Path::new("/proc/meminfo").exists() {
        assert_eq!(o.status.code(), Some(1), "{e}");
        assert!(
            e.contains(
                "out of memory: cannot allocate 300.0 MiB for the text pool of the TPC-H generator: \
                 the machine has 0 bytes available"
            ),
            "{e}"
        );
    }
    // A reserve that is not a number of bytes is an error of its own.
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .args(["tpch/queries/q06.logic", "--tpch", "0.01", "--backend", "cpu"])
        .env("FOX_HOST_RESERVE", "4G")
        .current_dir(repo())
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("FOX_HOST_RESERVE=`4G` is not a number of bytes"), "{e}");
}

/// `foxbench tpch-gen` writes the .tbl files, and the same queries on them give the same
/// results as on generated data.
#[test]
fn tbl_files_and_generated_data_agree() {
    let dir = std::env::temp_dir().join(format!("fox-tpch-gen-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let o = Command::new(env!("CARGO_BIN_EXE_foxbench"))
        .args(["tpch-gen", "--sf", "0.01", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for t in fox_runtime::tpch::TABLES {
        assert!(dir.join(format!("{t}.tbl")).is_file(), "{t}.tbl");
    }
    let queries = [1, 9, 13, 16, 22];
    let plans = tpch::compile_queries(&repo().join("tpch/queries"), &queries).unwrap();
    let from_files = tpch::load(&DataSource::Files(dir.clone()), &plans, false).unwrap();
    let generated = tpch::load(&DataSource::Tpch(0.01), &plans, false).unwrap();
    let mut backend = fox_cpu::CpuBackend::new();
    let a = tpch::run_queries(&mut backend, Arc::new(from_files), &plans, 0, false, |_| {}).unwrap();
    let b = tpch::run_queries(&mut backend, Arc::new(generated), &plans, 0, true, |_| {}).unwrap();
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(
            tpch::result_rows(&x.output),
            tpch::result_rows(&y.output),
            "Q{}",
            x.query
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn comparison_of_answers() {
    let rows = |t: &str| tpch::parse_csv(t);
    assert!(tpch::compare_rows(&rows("a,1.004\n"), &rows("a,1.00\n"), 0.01).is_ok());
    assert!(tpch::compare_rows(&rows("a,1.02\n"), &rows("a,1.00\n"), 0.01).is_err());
    assert!(tpch::compare_rows(&rows("a,1\n"), &rows("b,1\n"), 0.01).is_err());
    assert!(tpch::compare_rows(&rows("a,1\nb,2\n"), &rows("b,2\na,1\n"), 0.01).is_ok());
    assert!(tpch::compare_rows(&rows("a,1\n"), &rows("a,1\na,1\n"), 0.01).is_err());
    assert!(tpch::compare_rows(&[], &rows("\"\"\n"), 0.01).is_ok());
    assert_eq!(
        rows("x,\"a, \"\"b\"\"\"\n1,2"),
        vec![vec!["x", "a, \"b\""], vec!["1", "2"]]
    );
    // The official SF1 answers, with their known defects, accept the exact results.
    assert!(tpch::compare_sf1(6, &rows("123141078.2283\n")).is_ok());
    assert!(tpch::compare_sf1(6, &rows("123141079.2283\n")).is_err());
    assert!(tpch::compare_sf1(17, &rows("348406.054286\n")).is_ok());
}

/// The CPU backend, counting the bytes uploaded to it.
struct Counting {
    cpu: fox_cpu::CpuBackend,
    uploaded: Arc<std::sync::atomic::AtomicUsize>,
}

impl fox_runtime::Backend for Counting {
    fn name(&self) -> String {
        self.cpu.name()
    }
    fn upload(&mut self, col: fox_runtime::HostCol) -> Result<fox_runtime::DevBuf, fox_runtime::BackendError> {
        let bytes = col.len() * col.elem().size();
        self.uploaded.fetch_add(bytes, std::sync::atomic::Ordering::SeqCst);
        self.cpu.upload(col)
    }
    fn download(&mut self, buf: &fox_runtime::DevBuf) -> Result<fox_runtime::HostCol, fox_runtime::BackendError> {
        self.cpu.download(buf)
    }
    fn launch(
        &mut self,
        k: &fox_kernel::Kernel,
        args: &[&fox_runtime::DevBuf],
        ctx: &dyn fox_runtime::LaunchCtx,
    ) -> Result<Vec<fox_runtime::DevBuf>, fox_runtime::BackendError> {
        fox_runtime::launch_kernel(&mut self.cpu, k, args, ctx)
    }
    fn free(&mut self, buf: fox_runtime::DevBuf) {
        self.cpu.free(buf)
    }
    fn sync(&mut self) -> Result<(), fox_runtime::BackendError> {
        self.cpu.sync()
    }
    fn mem(&self) -> fox_runtime::MemStats {
        self.cpu.mem()
    }
    fn reset_peak(&mut self) {
        self.cpu.reset_peak()
    }
}

/// Over two devices the columns the queries read stay on the devices: after the first
/// run that reads them no run uploads them again (a hot run uploads only the rows its
/// exchanges receive), every answer is one device's, and the columns are freed when the
/// queries are done.
#[test]
fn hot_runs_over_two_devices_read_resident_columns() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let queries = [1, 6, 14];
    let mut programs = tpch::compile_programs(&repo().join("tpch/queries"), &queries).unwrap();
    let db = tpch::load_programs_for(&DataSource::Tpch(0.01), &mut programs, &[1, 2], false).unwrap();
    let stats = fox_runtime::stats::of_database(&db);
    let on_two = tpch::plan_programs_for(&mut programs, &stats, 2).unwrap();
    let plans = tpch::plan_programs(programs, &stats).unwrap();
    let db = Arc::new(db);
    let mut one = fox_cpu::CpuBackend::new();
    let want = tpch::run_queries(&mut one, db.clone(), &plans, 0, false, |_| {}).unwrap();
    let counters: Vec<Arc<AtomicUsize>> = (0..2).map(|_| Arc::new(AtomicUsize::new(0))).collect();
    let mut backends: Vec<Box<dyn fox_runtime::Backend + Send>> = counters
        .iter()
        .map(|c| {
            Box::new(Counting {
                cpu: fox_cpu::CpuBackend::new(),
                uploaded: c.clone(),
            }) as Box<dyn fox_runtime::Backend + Send>
        })
        .collect();
    let total = || counters.iter().map(|c| c.load(Ordering::SeqCst)).sum::<usize>();
    let mut starts: Vec<(u32, tpch::Run, usize)> = Vec::new();
    let runs = tpch::run_queries_on_devices(
        &mut backends,
        db,
        &on_two,
        3,
        &mut |q, r| starts.push((q, r, total())),
        |_| {},
    )
    .unwrap();
    for (d, b) in backends.iter().enumerate() {
        assert_eq!(b.mem().in_use, 0, "device {d} kept buffers");
    }
    starts.push((0, tpch::Run::First, total()));
    let uploaded: Vec<(u32, tpch::Run, usize)> = starts.windows(2).map(|w| (w[0].0, w[0].1, w[1].2 - w[0].2)).collect();
    // Q1 reads four columns of lineitem and more: what its first run uploads.
    let first_q1 = uploaded[0].2;
    assert!(first_q1 > 4 * 8 * 60_000, "{uploaded:?}");
    for &(q, run, bytes) in &uploaded {
        let first = uploaded.iter().find(|u| u.0 == q && u.1 == tpch::Run::First).unwrap().2;
        if run != tpch::Run::First {
            // Q1 and Q6 exchange a few partial aggregates; Q14 also exchanges the rows
            // of its join, uploaded by each run. No hot run uploads a column again.
            assert!(bytes <= first, "Q{q} {run:?} uploaded {bytes} bytes: {uploaded:?}");
            if q != 14 {
                assert!(
                    bytes * 20 < first_q1,
                    "Q{q} {run:?} uploaded {bytes} bytes: {uploaded:?}"
                );
            }
        }
    }
    // Q14's first run uploads the parts of the columns of `part`, new to it, as well.
    let q14: Vec<usize> = uploaded.iter().filter(|u| u.0 == 14).map(|u| u.2).collect();
    assert!(q14[0] > q14[1] && q14[1..].iter().all(|&b| b == q14[1]), "{uploaded:?}");
    assert_eq!(runs.len(), want.len());
    for (a, b) in want.iter().zip(&runs) {
        assert_eq!(tpch::difference(&a.output, &b.output), None, "Q{}", a.query);
    }
}
