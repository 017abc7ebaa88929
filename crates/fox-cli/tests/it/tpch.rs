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
        false,
        None,
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

/// Runs `plan` over the backends of `backends` with `residents`, under `memory_limit` on
/// each device; its output as CSV and the bytes the backends uploaded.
fn run_counted(
    plan: &fox_kernel::KernelPlan,
    backends: &mut [Counting],
    residents: &mut [fox_runtime::Resident],
    db: &Arc<fox_runtime::Database>,
    memory_limit: Option<u64>,
) -> (String, usize) {
    use std::sync::atomic::Ordering;
    let before: usize = backends.iter().map(|b| b.uploaded.load(Ordering::SeqCst)).sum();
    let opts = fox_runtime::RunOptions {
        database: Some(db.clone()),
        memory_limit,
        ..Default::default()
    };
    for b in backends.iter_mut() {
        fox_runtime::Backend::reset_peak(b);
    }
    let devices: Vec<&mut (dyn fox_runtime::Backend + Send)> = backends
        .iter_mut()
        .map(|b| b as &mut (dyn fox_runtime::Backend + Send))
        .collect();
    let r = fox_runtime::run_devices_resident(plan, devices, &opts, residents).unwrap();
    let after: usize = backends.iter().map(|b| b.uploaded.load(Ordering::SeqCst)).sum();
    (fox_runtime::output::csv_text(&r.outputs[0]), after - before)
}

fn counting(n: usize) -> Vec<Counting> {
    (0..n)
        .map(|_| Counting {
            cpu: fox_cpu::CpuBackend::new(),
            uploaded: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
        })
        .collect()
}

/// The columns each resident holds in more than one placement (other rows of the same
/// column), in words.
fn placed_twice(residents: &[fox_runtime::Resident]) -> Vec<String> {
    let mut twice = Vec::new();
    for (d, r) in residents.iter().enumerate() {
        let held = r.held();
        for w in held.windows(2) {
            if w[0].0 == w[1].0 && w[0].1 == w[1].1 {
                twice.push(format!(
                    "device {d}: {} column {} as {} and {}",
                    w[0].0, w[0].1, w[0].2, w[1].2
                ));
            }
        }
    }
    twice
}

/// Q12 and Q17 over two devices load `lineitem` hashed on its order key and on its part
/// key (about 1.4 MB of each device at SF 0.01). Run alternately under a resident bound
/// of 2 MB, which holds one placement but not both, the answers are those of one device,
/// no device ever holds both placements of a column and the resident bytes stay within
/// the bound; the same query run again uploads none of its columns.
#[test]
fn two_placements_of_a_table_alternate_within_the_resident_bound() {
    let queries = [12, 17];
    let mut programs = tpch::compile_programs(&repo().join("tpch/queries"), &queries).unwrap();
    let db = tpch::load_programs_for(&DataSource::Tpch(0.01), &mut programs, &[1, 2], false).unwrap();
    let stats = fox_runtime::stats::of_database(&db);
    let on_two = tpch::plan_programs_for(&mut programs, &stats, 2).unwrap();
    let plans = tpch::plan_programs(programs, &stats).unwrap();
    let db = Arc::new(db);
    let mut one = counting(1);
    let want: Vec<String> = plans
        .iter()
        .map(|(_, p, _)| run_counted(p, &mut one, &mut [fox_runtime::Resident::default()], &db, None).0)
        .collect();
    let bound = 2_000_000;
    let mut backends = counting(2);
    let mut residents: Vec<fox_runtime::Resident> = (0..2).map(|_| fox_runtime::Resident::with_limit(bound)).collect();
    let mut first = [0usize; 2];
    for (round, k) in [0, 0, 1, 1, 0, 1, 0].into_iter().enumerate() {
        let (q, plan, _) = &on_two[k];
        let (out, uploaded) = run_counted(plan, &mut backends, &mut residents, &db, None);
        assert_eq!(out, want[k], "Q{q}, run {round}");
        let twice = placed_twice(&residents);
        assert!(twice.is_empty(), "Q{q}, run {round}: {twice:?}");
        for (d, r) in residents.iter().enumerate() {
            assert_eq!(r.bound(), Some(bound));
            assert!(
                r.bytes() as u64 <= bound,
                "Q{q}, run {round}, device {d}: {} bytes",
                r.bytes()
            );
            assert!(
                r.bytes() > 1_000_000,
                "Q{q}, run {round}, device {d}: {} bytes",
                r.bytes()
            );
            assert!(r.held().iter().any(|h| h.0 == "lineitem"), "Q{q}, run {round}");
        }
        match round {
            0 | 2 => first[k] = uploaded,
            // The same query again: its columns are resident (Q12 and Q17 exchange a
            // few rows, uploaded by every run).
            1 | 3 => assert!(
                uploaded * 10 < first[k],
                "Q{q}, run {round}: {uploaded} of {}",
                first[k]
            ),
            // After the other query: its placement was given back, and is uploaded again.
            _ => assert!(
                uploaded * 10 >= first[k] * 9,
                "Q{q}, run {round}: {uploaded} of {}",
                first[k]
            ),
        }
    }
    for (r, b) in residents.into_iter().zip(backends.iter_mut()) {
        r.release(b);
        assert_eq!(fox_runtime::Backend::mem(b).in_use, 0);
    }
    // Without a bound both placements stay, and nothing is uploaded twice.
    let mut free: Vec<fox_runtime::Resident> = (0..2).map(|_| fox_runtime::Resident::default()).collect();
    for (_, plan, _) in &on_two {
        run_counted(plan, &mut backends, &mut free, &db, None);
    }
    assert!(!placed_twice(&free).is_empty());
    for (k, (_, plan, _)) in on_two.iter().enumerate() {
        let (out, uploaded) = run_counted(plan, &mut backends, &mut free, &db, None);
        assert_eq!(out, want[k]);
        assert!(uploaded * 10 < first[k], "{uploaded} of {}", first[k]);
    }
    for (r, b) in free.into_iter().zip(backends.iter_mut()) {
        r.release(b);
    }
}

/// A resident bound smaller than the columns a query reads: the answers are those of one
/// device, each run uploads what does not fit again, and the resident bytes stay within
/// the bound after every run. The bound a memory limit gives is the limit less the
/// largest working set of a run so far.
#[test]
fn a_resident_bound_below_the_data_uploads_again_with_the_same_answers() {
    let queries = [1, 12];
    let mut programs = tpch::compile_programs(&repo().join("tpch/queries"), &queries).unwrap();
    let db = tpch::load_programs_for(&DataSource::Tpch(0.01), &mut programs, &[1, 2], false).unwrap();
    let stats = fox_runtime::stats::of_database(&db);
    let on_two = tpch::plan_programs_for(&mut programs, &stats, 2).unwrap();
    let plans = tpch::plan_programs(programs, &stats).unwrap();
    let db = Arc::new(db);
    for (k, (q, plan, _)) in on_two.iter().enumerate() {
        let mut one = counting(1);
        let want = run_counted(
            &plans[k].1,
            &mut one,
            &mut [fox_runtime::Resident::default()],
            &db,
            None,
        )
        .0;
        let bound = 500_000;
        let mut backends = counting(2);
        let mut residents: Vec<fox_runtime::Resident> =
            (0..2).map(|_| fox_runtime::Resident::with_limit(bound)).collect();
        let mut uploads = Vec::new();
        for run in 0..3 {
            let (out, uploaded) = run_counted(plan, &mut backends, &mut residents, &db, None);
            assert_eq!(out, want, "Q{q}, run {run}");
            for (d, r) in residents.iter().enumerate() {
                assert!(
                    r.bytes() as u64 <= bound,
                    "Q{q}, run {run}, device {d}: {} bytes",
                    r.bytes()
                );
            }
            uploads.push(uploaded);
        }
        // Each hot run uploads the columns that were not kept: over half of the first's.
        assert!(
            uploads[1] * 2 > uploads[0] && uploads[2] == uploads[1],
            "Q{q}: {uploads:?}"
        );
        for (r, b) in residents.into_iter().zip(backends.iter_mut()) {
            r.release(b);
            assert_eq!(fox_runtime::Backend::mem(b).in_use, 0);
        }
        // Under a memory limit of 3 MB a device: the bound is the limit less the run's
        // working set, and the columns kept stay within it.
        let limit = 3_000_000;
        let mut backends = counting(2);
        let mut residents: Vec<fox_runtime::Resident> = (0..2).map(|_| fox_runtime::Resident::default()).collect();
        for run in 0..3 {
            let (out, _) = run_counted(plan, &mut backends, &mut residents, &db, Some(limit));
            assert_eq!(out, want, "Q{q} under {limit} bytes, run {run}");
            for (d, r) in residents.iter().enumerate() {
                let b = r.bound().unwrap();
                assert!(b < limit, "Q{q}, run {run}, device {d}: bound {b}");
                assert!(
                    r.bytes() as u64 <= b,
                    "Q{q}, run {run}, device {d}: {} bytes of {b}",
                    r.bytes()
                );
            }
        }
        for (r, b) in residents.into_iter().zip(backends.iter_mut()) {
            r.release(b);
        }
    }
}

/// On one device a bound that holds every column changes nothing: each run uploads what
/// it uploads without a bound (the hot runs none of the columns), with the same answers.
#[test]
fn one_device_under_a_bound_that_holds_everything_uploads_as_without_one() {
    let queries = [1, 3, 9, 16];
    let plans = tpch::compile_queries(&repo().join("tpch/queries"), &queries).unwrap();
    let db = Arc::new(tpch::load(&DataSource::Tpch(0.01), &plans, false).unwrap());
    let mut seen = Vec::new();
    for limit in [None, Some(1u64 << 30)] {
        let mut backends = counting(1);
        let mut residents = vec![limit.map_or_else(fox_runtime::Resident::default, fox_runtime::Resident::with_limit)];
        let mut runs = Vec::new();
        for _ in 0..2 {
            for (_, plan, _) in &plans {
                runs.push(run_counted(plan, &mut backends, &mut residents, &db, None));
            }
        }
        let held = residents[0].held();
        assert!(held.iter().all(|h| h.2 == "all"), "{held:?}");
        residents.pop().unwrap().release(&mut backends[0]);
        assert_eq!(fox_runtime::Backend::mem(&backends[0]).in_use, 0);
        seen.push((runs, held));
    }
    assert_eq!(seen[0], seen[1]);
    // The hot runs upload a small part of what the first runs did (no column).
    let uploads: Vec<usize> = seen[0].0.iter().map(|r| r.1).collect();
    let (first, hot) = uploads.split_at(queries.len());
    assert!(
        hot.iter().sum::<usize>() * 20 < first.iter().sum::<usize>(),
        "{uploads:?}"
    );
}
