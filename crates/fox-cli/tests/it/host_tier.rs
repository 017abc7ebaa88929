//! The host tier: under a `--memory-limit` smaller than what a run holds at once, buffers
//! that the running operator does not read move to host memory and come back before they
//! are read. The results are byte for byte those of the run without a limit, the device
//! peak stays within the limit, and `--timing` counts the evictions. An operator whose own
//! arguments and outputs do not fit is an out-of-memory error naming it.

use crate::common::{next, repo, temp_dir};
use fox_cli::tpch;
use fox_kernel::Kernel;
use fox_runtime::{BackendError, DataSource, DevBuf, HostCol, LaunchCtx, RunOptions};
use std::process::{Command, Output};
use std::sync::Arc;

/// A field of the `--timing` report: the number before `word` on the line starting
/// with `line`.
fn timing_number(stderr: &str, line: &str, word: &str) -> u64 {
    let l = stderr
        .lines()
        .find(|l| l.starts_with(line))
        .unwrap_or_else(|| panic!("no `{line}` line: {stderr}"));
    let at = l.find(word).unwrap_or_else(|| panic!("no `{word}` in {l}"));
    l[..at]
        .split_whitespace()
        .last()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number before `{word}` in {l}"))
}

/// `device peak N bytes` of `--timing`.
fn device_peak(stderr: &str) -> u64 {
    let at = stderr.find("device peak ").expect("a device peak") + "device peak ".len();
    stderr[at..].split_whitespace().next().unwrap().parse().unwrap()
}

fn evictions(stderr: &str) -> u64 {
    timing_number(stderr, "host tier: ", "eviction")
}

fn foxrun(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .current_dir(repo())
        .args(["--backend", "cpu", "--timing", "--no-progress"])
        .args(args)
        .output()
        .unwrap()
}

/// Runs `args` without a limit and under `limit` bytes: the same standard output, a
/// device peak within the limit, and evictions; the limited run's `--timing` report.
fn same_under(args: &[&str], limit: u64) -> String {
    let whole = foxrun(args);
    let e = String::from_utf8_lossy(&whole.stderr).into_owned();
    assert!(whole.status.success(), "{e}");
    assert_eq!(evictions(&e), 0, "{e}");
    let l = limit.to_string();
    let cut = foxrun(&[args, &["--memory-limit", &l]].concat());
    let e = String::from_utf8_lossy(&cut.stderr).into_owned();
    assert!(cut.status.success(), "{args:?} under {limit}: {e}");
    assert!(device_peak(&e) <= limit, "{e}");
    assert!(evictions(&e) > 0, "{args:?} under {limit}: {e}");
    assert_eq!(
        String::from_utf8_lossy(&cut.stdout),
        String::from_utf8_lossy(&whole.stdout),
        "{args:?} under {limit}"
    );
    e
}

#[test]
fn every_tpch_query_at_sf_0_01_gives_its_results_with_buffers_moved_to_the_host() {
    let queries: Vec<u32> = (1..=22).collect();
    let plans = tpch::compile_queries(&repo().join("tpch/queries"), &queries).unwrap();
    let db = Arc::new(tpch::load(&DataSource::Tpch(0.01), &plans, false).unwrap());
    let mut evicting = 0;
    for (q, plan, _) in &plans {
        let run = |limit: Option<u64>| {
            let mut cpu = fox_cpu::CpuBackend::new();
            let opts = RunOptions {
                database: Some(db.clone()),
                memory_limit: limit,
                ..RunOptions::default()
            };
            let r = fox_runtime::run(plan, &mut cpu, &opts);
            assert_eq!(fox_runtime::Backend::mem(&cpu).in_use, 0, "Q{q}: every buffer freed");
            r
        };
        let whole = run(None).unwrap();
        assert_eq!(whole.stats.tier, fox_runtime::TierStats::default(), "Q{q}");
        // Two thirds of the peak without a limit: some buffer must leave the device at
        // the peak, unless the operator there needs more than that for itself (then the
        // run is an out-of-memory error, never a wrong result).
        let limit = whole.stats.peak_bytes as u64 * 2 / 3;
        match run(Some(limit)) {
            Ok(cut) => {
                assert!(cut.stats.peak_bytes as u64 <= limit, "Q{q}");
                let rows = |r: &fox_runtime::RunResult| r.outputs.iter().map(tpch::result_rows).collect::<Vec<_>>();
                assert_eq!(rows(&cut), rows(&whole), "Q{q} under {limit} bytes");
                let t = cut.stats.tier;
                if t.evictions > 0 {
                    assert!(t.bytes_to_host > 0 && t.host_peak_bytes > 0, "Q{q}: {t:?}");
                }
                if t.evictions > 0 || t.in_database > 0 {
                    evicting += 1;
                    let out = t.bytes_to_host + t.in_database_bytes;
                    assert!(t.bytes_to_device <= out * 64, "Q{q}: {t:?}");
                }
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains("out of memory"), "Q{q} under {limit} bytes: {msg}");
            }
        }
    }
    assert!(evicting >= 15, "only {evicting} queries moved buffers off the device");
}

/// Under a memory limit, a column a run loads from the database that does not fit beside
/// the run's buffers is read where the database holds it, and one that leaves the device
/// is freed, not downloaded: no byte of it is copied to the host tier. The results are
/// byte for byte those without a limit, one-shot and with the columns kept resident
/// across runs (as `foxbench` runs), and the device peak stays within the limit.
#[test]
fn database_columns_beyond_the_limit_are_read_in_place_not_copied_to_the_host() {
    let queries = [1, 3, 6, 9, 14, 18];
    let plans = tpch::compile_queries(&repo().join("tpch/queries"), &queries).unwrap();
    let db = Arc::new(tpch::load(&DataSource::Tpch(0.01), &plans, false).unwrap());
    let lineitem = db.tables().find(|t| t.input.name == "lineitem").unwrap().rows as u64;
    let text = |r: &fox_runtime::RunResult| r.outputs.iter().map(fox_runtime::output::csv_text).collect::<Vec<_>>();
    for (q, plan, _) in &plans {
        let opts = |limit: Option<u64>| RunOptions {
            database: Some(db.clone()),
            memory_limit: limit,
            ..RunOptions::default()
        };
        let mut cpu = fox_cpu::CpuBackend::new();
        let whole = fox_runtime::run(plan, &mut cpu, &opts(None)).unwrap();
        assert_eq!(whole.stats.tier, fox_runtime::TierStats::default(), "Q{q}");
        let expected = text(&whole);
        let peak = whole.stats.peak_bytes as u64;
        for limit in [peak * 2 / 3, peak / 2, peak / 3] {
            let mut cpu = fox_cpu::CpuBackend::new();
            let one = fox_runtime::run(plan, &mut cpu, &opts(Some(limit)))
                .unwrap_or_else(|e| panic!("Q{q} under {limit} bytes: {e}"));
            assert_eq!(fox_runtime::Backend::mem(&cpu).in_use, 0, "Q{q}: every buffer freed");
            let mut resident = fox_runtime::Resident::default();
            let mut cpu = fox_cpu::CpuBackend::new();
            let mut runs = vec![one];
            for _ in 0..2 {
                fox_runtime::Backend::reset_peak(&mut cpu);
                runs.push(
                    fox_runtime::run_resident(plan, &mut cpu, &opts(Some(limit)), Some(&mut resident))
                        .unwrap_or_else(|e| panic!("Q{q} under {limit} bytes, resident: {e}")),
                );
            }
            resident.release(&mut cpu);
            for r in &runs {
                assert_eq!(text(r), expected, "Q{q} under {limit} bytes");
                assert!(r.stats.peak_bytes as u64 <= limit, "Q{q} under {limit} bytes");
                let t = r.stats.tier;
                // Every query here scans lineitem, whose columns do not all fit: some are
                // read in place.
                assert!(t.in_database > 0, "Q{q} under {limit} bytes: {t:?}");
                // Q1, Q6 and Q14 keep few of its rows: what goes to the host is the run's
                // own buffers, fewer bytes than a copy of one of lineitem's columns (4
                // bytes a row or more).
                if [1, 6, 14].contains(q) {
                    assert!(t.bytes_to_host < lineitem * 4, "Q{q} under {limit} bytes: {t:?}");
                }
            }
        }
    }
}

/// The CPU backend as a device with memory of its own: the upload of a packed database
/// column moves its packed rows into a buffer of their own (counted against the limit,
/// as the GPU's are) while the rows are widened, as the GPU backend does; packed rows
/// kept on the "device" are a buffer of the bytes the GPU backend keeps, from which rows
/// are widened (from the column itself, the CPU twin of the device's widening).
struct OwnMemory {
    cpu: fox_cpu::CpuBackend,
    /// Uploads widened "on the device".
    widened: usize,
    /// Rows of database columns uploaded.
    stored_rows: usize,
}

impl OwnMemory {
    fn new() -> OwnMemory {
        OwnMemory {
            cpu: fox_cpu::CpuBackend::new(),
            widened: 0,
            stored_rows: 0,
        }
    }
}

/// The bytes the GPU backend keeps for the packed rows `rows` of `col`: the rows, then a
/// string column's codes from `codes_at`.
fn packed_image(col: &fox_runtime::stored::StoredCol, rows: std::ops::Range<usize>) -> Option<Vec<u8>> {
    let (bytes, _, how) = col.packed_rows(rows.start, rows.end)?;
    let mut image = bytes.to_vec();
    if let Err(codes) = how {
        image.resize(col.codes_at(rows.len()), 0);
        image.extend(codes.iter().flat_map(|c| c.to_ne_bytes()));
    }
    assert_eq!(image.len(), col.packed_bytes(rows.len()));
    Some(image)
}

impl fox_runtime::Backend for OwnMemory {
    fn name(&self) -> String {
        self.cpu.name()
    }
    fn upload(&mut self, col: HostCol) -> Result<DevBuf, BackendError> {
        self.cpu.upload(col)
    }
    fn upload_stored(
        &mut self,
        col: &fox_runtime::stored::StoredCol,
        rows: std::ops::Range<usize>,
    ) -> Result<DevBuf, BackendError> {
        self.stored_rows += rows.len();
        let Some((bytes, _, _)) = col.packed_rows(rows.start, rows.end.min(col.len()).max(rows.start)) else {
            return self.cpu.upload_stored(col, rows);
        };
        let packed = self.cpu.upload(HostCol::U8(bytes.to_vec()))?;
        let out = self.cpu.upload_stored(col, rows);
        self.cpu.free(packed);
        self.widened += 1;
        out
    }
    fn upload_packed(
        &mut self,
        col: &fox_runtime::stored::StoredCol,
        rows: std::ops::Range<usize>,
    ) -> Result<Option<DevBuf>, BackendError> {
        match packed_image(col, rows) {
            Some(image) => self.cpu.upload(HostCol::U8(image)).map(Some),
            None => Ok(None),
        }
    }
    fn widen_packed(
        &mut self,
        packed: &DevBuf,
        col: &fox_runtime::stored::StoredCol,
        kept: std::ops::Range<usize>,
        rows: std::ops::Range<usize>,
    ) -> Result<DevBuf, BackendError> {
        let held = self.cpu.download(packed)?;
        assert!(
            kept.start <= rows.start && rows.end <= kept.end,
            "rows {rows:?} of the kept rows {kept:?}"
        );
        assert_eq!(
            Some(held),
            packed_image(col, kept.clone()).map(HostCol::U8),
            "the kept rows {kept:?}"
        );
        self.cpu.upload_stored(col, rows)
    }
    fn download(&mut self, buf: &DevBuf) -> Result<HostCol, BackendError> {
        self.cpu.download(buf)
    }
    fn launch(&mut self, kernel: &Kernel, args: &[&DevBuf], ctx: &dyn LaunchCtx) -> Result<Vec<DevBuf>, BackendError> {
        self.cpu.launch(kernel, args, ctx)
    }
    fn launch_composite(
        &mut self,
        kernel: &Kernel,
        args: &[&DevBuf],
        ctx: &dyn LaunchCtx,
    ) -> Result<Option<Vec<DevBuf>>, BackendError> {
        self.cpu.launch_composite(kernel, args, ctx)
    }
    fn free(&mut self, buf: DevBuf) {
        self.cpu.free(buf)
    }
    fn take(&mut self, buf: DevBuf) -> Result<HostCol, BackendError> {
        self.cpu.take(buf)
    }
    fn sync(&mut self) -> Result<(), BackendError> {
        self.cpu.sync()
    }
    fn mem(&self) -> fox_runtime::MemStats {
        self.cpu.mem()
    }
    fn memory_capacity(&self) -> Option<usize> {
        self.cpu.memory_capacity()
    }
    fn memory_is_separate(&self) -> bool {
        true
    }
    fn set_memory_limit(&mut self, limit: Option<u64>) {
        self.cpu.set_memory_limit(limit)
    }
    fn reset_peak(&mut self) {
        self.cpu.reset_peak()
    }
}

/// On a device with memory of its own, a packed database column is uploaded with room
/// for its packed rows beside it (widened there where they fit, on the host where not):
/// under budgets of a half and a third of the unlimited peak, with the columns kept
/// resident across runs, every buffer stays within the limit, every answer is the
/// unlimited one, and some uploads widened on the device. Columns read in place keep
/// their packed rows on the device between runs: a later run widens from them without
/// uploading them again, and a plan whose run kept some while moving more than a 64th
/// of the bytes widened from them to the host keeps none in its next runs.
/// Every TPC-H query at SF 0.1 on a device with memory of its own (the GPU's paths: the
/// database read in place, filters whose marks and compaction run together chunk by
/// chunk, packed rows widened on the device), under a sixth of its peak without a
/// limit: the results are byte for byte those without a limit, the device peak stays
/// within the limit, every buffer is freed, and most queries read columns in place and
/// run operators in pieces.
#[test]
fn every_tpch_query_at_sf_0_1_on_a_device_of_its_own_memory_under_a_sixth_of_its_peak() {
    use fox_runtime::Backend;
    let queries: Vec<u32> = (1..=22).collect();
    let plans = tpch::compile_queries(&repo().join("tpch/queries"), &queries).unwrap();
    let db = Arc::new(tpch::load(&DataSource::Tpch(0.1), &plans, false).unwrap());
    let text = |r: &fox_runtime::RunResult| r.outputs.iter().map(fox_runtime::output::csv_text).collect::<Vec<_>>();
    let (mut in_place, mut pieces) = (0, 0);
    for (q, plan, _) in &plans {
        let opts = |limit: Option<u64>| RunOptions {
            database: Some(db.clone()),
            memory_limit: limit,
            ..RunOptions::default()
        };
        let whole = fox_runtime::run(plan, &mut fox_cpu::CpuBackend::new(), &opts(None)).unwrap();
        let limit = whole.stats.peak_bytes as u64 / 6;
        let mut dev = OwnMemory::new();
        let cut = fox_runtime::run(plan, &mut dev, &opts(Some(limit)))
            .unwrap_or_else(|e| panic!("Q{q} under {limit} bytes: {e}"));
        assert_eq!(text(&cut), text(&whole), "Q{q} under {limit} bytes");
        assert!(cut.stats.peak_bytes as u64 <= limit, "Q{q}");
        assert_eq!(dev.mem().in_use, 0, "Q{q}: every buffer freed");
        in_place += usize::from(cut.stats.tier.in_database > 0);
        pieces += usize::from(cut.stats.tier.operators_in_pieces > 0);
    }
    assert!(in_place >= 15, "only {in_place} queries read columns in place");
    assert!(pieces >= 15, "only {pieces} queries ran an operator in pieces");
}

#[test]
fn packed_columns_widened_on_a_device_of_its_own_keep_the_limit_and_the_answers() {
    use fox_runtime::Backend;
    let queries = [1, 3, 6, 9, 14, 18];
    let plans = tpch::compile_queries(&repo().join("tpch/queries"), &queries).unwrap();
    let db = Arc::new(tpch::load(&DataSource::Tpch(0.1), &plans, false).unwrap());
    let text = |r: &fox_runtime::RunResult| r.outputs.iter().map(fox_runtime::output::csv_text).collect::<Vec<_>>();
    let (mut widened, mut reused, mut turned_off) = (0, 0, 0);
    for (q, plan, _) in &plans {
        let opts = |limit: Option<u64>| RunOptions {
            database: Some(db.clone()),
            memory_limit: limit,
            ..RunOptions::default()
        };
        let mut cpu = fox_cpu::CpuBackend::new();
        let whole = fox_runtime::run(plan, &mut cpu, &opts(None)).unwrap();
        let (expected, peak) = (text(&whole), whole.stats.peak_bytes as u64);
        for limit in [peak / 2, peak / 3] {
            let mut dev = OwnMemory::new();
            let mut resident = fox_runtime::Resident::default();
            let mut runs: Vec<fox_runtime::TierStats> = Vec::new();
            for run in 0..3 {
                let case = format!("Q{q} under {limit} bytes, run {run}");
                dev.reset_peak();
                let r = fox_runtime::run_resident(plan, &mut dev, &opts(Some(limit)), Some(&mut resident))
                    .unwrap_or_else(|e| panic!("{case}: {e}"));
                assert_eq!(text(&r), expected, "{case}");
                assert!(r.stats.peak_bytes as u64 <= limit, "{case}");
                let t = r.stats.tier;
                if let Some(last) = runs.last() {
                    let kept = last.packed_kept + last.widened_on_device > 0;
                    if kept && last.bytes_to_host * 64 > last.widened_on_device_bytes {
                        assert_eq!((t.packed_kept, t.widened_on_device), (0, 0), "{case}: {last:?}");
                        turned_off += 1;
                    }
                    if t.widened_on_device > 0 && t.packed_kept_bytes < last.packed_kept_bytes {
                        reused += 1;
                    }
                }
                runs.push(t);
            }
            resident.release(&mut dev);
            assert_eq!(dev.mem().in_use, 0, "Q{q}: every buffer freed");
            widened += dev.widened;
        }
    }
    assert!(widened > 0, "no packed column was widened on the device");
    assert!(reused > 0, "no run widened from packed rows an earlier run kept");
    assert!(turned_off > 0, "no plan stopped keeping packed rows");
}

#[test]
fn tpch_q9_at_sf_0_1_under_a_small_limit_from_the_command_line() {
    // Q9 holds about 25 MB at once at SF 0.1.
    let e = same_under(&["--tpch", "0.1", "tpch/queries/q09.logic"], 12 << 20);
    assert!(timing_number(&e, "host tier: ", "restore") > 0, "{e}");
    // Under 3 MiB, columns of lineitem (4.8 MB) do not fit at all: they stay in the host
    // tier, the filters, sorts and gathers that read them run in chunks, runs or on the
    // host.
    same_under(&["--tpch", "0.1", "tpch/queries/q09.logic"], 3 << 20);
}

#[test]
fn recursive_programs_under_a_small_limit_move_finished_relations_to_the_host() {
    let dir = temp_dir("fox-host-tier", "rec");
    let mut seed = 3;
    let edges: String = (0..300)
        .map(|_| format!("{},{}\n", next(&mut seed) % 200, next(&mut seed) % 200))
        .collect();
    std::fs::write(dir.join("e.csv"), edges).unwrap();
    let p = dir.join("q.logic");
    // Three recursions one after the other: the relations of the first ones wait on the
    // device for their outputs while the later ones run.
    std::fs::write(
        &p,
        "e(x, y) -> int32(x), int32(y).\n.input e.\n\
         path(x, y) <- e(x, y).\npath(x, z) <- path(x, y), e(y, z).\n\
         back(x, y) <- e(y, x).\nback(x, z) <- back(x, y), e(z, y).\n\
         sg(x, y) <- e(p, x), e(p, y), x != y.\nsg(x, y) <- e(a, x), sg(a, b), e(b, y).\n\
         .output path.\n.output back.\n.output sg.\n",
    )
    .unwrap();
    let (p, d) = (p.to_str().unwrap(), dir.to_str().unwrap());
    let whole = foxrun(&[p, "--data", d]);
    let e = String::from_utf8_lossy(&whole.stderr);
    assert!(whole.status.success(), "{e}");
    let peak = device_peak(&e);
    same_under(&[p, "--data", d], peak * 7 / 10);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_operator_whose_own_buffers_exceed_the_limit_is_an_error_naming_it() {
    let dir = temp_dir("fox-host-tier", "small");
    let rows: String = (0..5_000).map(|i| format!("{i},{}\n", i % 7)).collect();
    std::fs::write(dir.join("a.csv"), rows).unwrap();
    let p = dir.join("q.logic");
    std::fs::write(
        &p,
        "a(k, v) -> int32(k), int32(v).\n.input a.\nb(k, w) <- a(k, v), a(v, w).\n.output b.\n",
    )
    .unwrap();
    // 20 KB a column: under 48K the sorts and the join run in pieces; under 16 bytes
    // the smallest piece of an operator does not fit.
    let whole = foxrun(&[p.to_str().unwrap(), "--data", dir.to_str().unwrap()]);
    let cut = foxrun(&[
        p.to_str().unwrap(),
        "--data",
        dir.to_str().unwrap(),
        "--memory-limit",
        "48K",
    ]);
    assert!(cut.status.success(), "{}", String::from_utf8_lossy(&cut.stderr));
    assert_eq!(cut.stdout, whole.stdout);
    // The join written whole (in rounds up to its unique, the round's window is what
    // finds no room first).
    let o = foxrun(&[
        p.to_str().unwrap(),
        "--data",
        dir.to_str().unwrap(),
        "--memory-limit",
        "16",
        "--disable-pass",
        "rounds",
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("out of memory: cannot allocate "), "{e}");
    assert!(e.contains("the memory limit (--memory-limit) leaves "), "{e}");
    assert!(e.contains(&format!("{}:3:", p.display())), "{e}");
    assert!(e.contains("the operation's arguments take "), "{e}");
    assert!(e.contains("help: raise --memory-limit"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn operators_whose_columns_exceed_the_limit_run_in_chunks_of_rows_and_sorts_in_runs() {
    let dir = temp_dir("fox-host-tier", "rows");
    let mut seed = 11;
    let rows: String = (0..60_000)
        .map(|_| format!("{},{}\n", next(&mut seed) % 1_000_000, next(&mut seed) % 1_000_000))
        .collect();
    std::fs::write(dir.join("big.csv"), rows).unwrap();
    let p = dir.join("q.logic");
    // 240 KB a column; the filter reads both (480 KB) under a limit of 300 KB, and keeps
    // few rows.
    std::fs::write(
        &p,
        "big(x, y) -> int32(x), int32(y).\n.input big.\nsmall(x, y) <- big(x, y), x + y < 20000.\n.output small.\n",
    )
    .unwrap();
    let (p, d) = (p.to_str().unwrap(), dir.to_str().unwrap());
    same_under(&[p, "--data", d], 300_000);
    // The set of all the rows (480 KB) sorted in runs merged on the host, its repeats
    // dropped in chunks, and aggregated in chunks whose partial results combine.
    std::fs::write(
        dir.join("q.logic"),
        "big(x, y) -> int32(x), int32(y).\n.input big.\nn[] = c <- agg<<c = count()>> big(_, _).\n\
         s[] = t <- agg<<t = sum(x)>> big(x, y), y < 500000.\n\
         m[] = v <- agg<<v = max(y)>> big(x, y), x > 1000.\n.output n.\n.output s.\n.output m.\n",
    )
    .unwrap();
    let e = same_under(&[p, "--data", d], 300_000);
    assert!(!e.contains("error"), "{e}");
    // An expression that fails on a row names the same row and values when run in chunks.
    std::fs::write(
        dir.join("q.logic"),
        "big(x, y) -> int32(x), int32(y).\n.input big.\nq(x, z) <- big(x, y), z = x / (y - 777).\n.output q.\n",
    )
    .unwrap();
    let mut rows: Vec<String> = (0..60_000).map(|i| format!("{i},{}\n", i % 700)).collect();
    rows[50_001] = "5,777\n".into();
    std::fs::write(dir.join("big.csv"), rows.concat()).unwrap();
    let whole = foxrun(&[p, "--data", d]);
    let cut = foxrun(&[p, "--data", d, "--memory-limit", "300000"]);
    let (we, ce) = (
        String::from_utf8_lossy(&whole.stderr),
        String::from_utf8_lossy(&cut.stderr),
    );
    assert_eq!(whole.status.code(), Some(1), "{we}");
    assert_eq!(cut.status.code(), Some(1), "{ce}");
    let error = |e: &str| {
        e.lines()
            .filter(|l| !l.starts_with("memory:") && !l.contains("time"))
            .take(8)
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(we.contains("division by zero"), "{we}");
    assert!(we.contains("y = 777"), "{we}");
    assert_eq!(error(&ce), error(&we));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Over two devices under a limit each device keeps, each device's slice of a lineitem
/// column that does not fit is read where the database holds it (Q6 loads slices; Q1 and
/// Q14 load rows hashed to the devices, copies of their own that move to the host tier):
/// the answers are one device's without a limit, byte for byte.
#[test]
fn each_device_reads_its_slice_of_a_database_column_in_place_under_a_limit() {
    for q in [
        "tpch/queries/q01.logic",
        "tpch/queries/q06.logic",
        "tpch/queries/q14.logic",
    ] {
        let one = foxrun(&["--tpch", "0.01", q, "--out", "-"]);
        assert!(one.status.success(), "{}", String::from_utf8_lossy(&one.stderr));
        let free = foxrun(&["--tpch", "0.01", q, "--out", "-", "--devices", "2"]);
        let e = String::from_utf8_lossy(&free.stderr).into_owned();
        assert!(free.status.success(), "{e}");
        let p = crate::common::device_peaks(&e);
        assert_eq!(p.len(), 2, "{e}");
        let limit = (p.iter().max().unwrap() / 2).to_string();
        let cut = foxrun(&[
            "--tpch",
            "0.01",
            q,
            "--out",
            "-",
            "--devices",
            "2",
            "--memory-limit",
            &limit,
        ]);
        let e = String::from_utf8_lossy(&cut.stderr).into_owned();
        assert!(cut.status.success(), "{q} under {limit}: {e}");
        assert_eq!(
            String::from_utf8_lossy(&cut.stdout),
            String::from_utf8_lossy(&one.stdout),
            "{q}"
        );
        for p in crate::common::device_peaks(&e) {
            assert!(p <= limit.parse().unwrap(), "{q}: {p} > {limit}: {e}");
        }
        if q.ends_with("q06.logic") {
            assert!(
                timing_number(&e, "read from the database in place: ", "column") > 0,
                "{q}: {e}"
            );
            assert_eq!(timing_number(&e, "host tier: ", "eviction"), 0, "{q}: {e}");
        }
    }
}

/// The plan of `program` (a filter of input `t`, whose rows `rows` are written to
/// `t.csv` in a fresh folder named after `case`) up to the filter's `Eval`, its
/// `Compact` and the `frees` instructions after it, then an output `r` of the kept int32
/// columns `kept` (buffers named `t1.COL`, output as `COL`) and their frees; and the
/// database of `t` with every column loaded. The folder is the caller's to remove.
fn filter_plan(
    case: &str,
    program: &str,
    rows: String,
    kept: &[&str],
    frees: impl Fn(&[fox_kernel::Instr]) -> usize,
) -> (std::path::PathBuf, fox_kernel::KernelPlan, Arc<fox_runtime::Database>) {
    use fox_kernel::{BufId, Instr};
    let dir = temp_dir("host-tier", case);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("filter.logic");
    std::fs::write(&path, program).unwrap();
    std::fs::write(dir.join("t.csv"), rows).unwrap();
    let mut plan = fox_cli::load_plan_with(&path, false, "t", &fox_ra::PlanOptions::default())
        .unwrap()
        .unwrap();
    let kept: Vec<BufId> = kept
        .iter()
        .map(|c| {
            let name = format!("t1.{c}");
            BufId(plan.buffers.iter().position(|b| b.name == name).expect(&name) as u32)
        })
        .collect();
    let columns: Vec<fox_sema::core::Column> = kept
        .iter()
        .map(|b| fox_sema::core::Column {
            name: plan.buffers[b.0 as usize].name["t1.".len()..].into(),
            ty: fox_sema::core::Type::Int32,
        })
        .collect();
    let instrs = &mut plan.blocks[0].instrs;
    let at = instrs
        .iter()
        .position(|i| {
            matches!(
                i,
                Instr::Launch {
                    kernel: Kernel::Compact,
                    ..
                }
            )
        })
        .expect("a compaction");
    assert!(
        matches!(
            &instrs[at - 1],
            Instr::Launch {
                kernel: Kernel::Eval { .. },
                ..
            }
        ),
        "{instrs:?}"
    );
    let frees = frees(&instrs[at + 1..]);
    instrs.truncate(at + 1 + frees);
    instrs.push(Instr::Output {
        name: "r".into(),
        columns,
        cols: kept.clone(),
        order: Vec::new(),
        limit: None,
    });
    instrs.extend(kept.iter().map(|&buf| Instr::Free { buf }));
    let loaded = vec![true; plan.inputs[0].columns.len()];
    let db = Arc::new(
        fox_runtime::Database::load_tables(
            &DataSource::Files(dir.clone()),
            vec![(plan.inputs[0].clone(), loaded)],
            &fox_runtime::NoProgress,
        )
        .unwrap(),
    );
    (dir, plan, db)
}

/// On a device with memory of its own, a filter of a database column larger than the
/// budget leaves runs its marks and their compaction together chunk by chunk: each
/// chunk's rows come to the device once (the column is read once, not once per launch),
/// one operator runs in pieces, nothing goes to the host tier, and the rows kept are
/// those of the run without a limit; the same plan on a CPU backend (one memory) runs
/// the two launches in chunks of their own, with the same rows.
#[test]
fn a_filter_in_chunks_reads_its_rows_once_for_its_marks_and_compaction() {
    let rows: String = (0..40_000).map(|v| format!("{v},{}\n", (v * 31) % 1000)).collect();
    // The load, the marks, the compaction and the frees of the marks and the input.
    let (dir, plan, db) = filter_plan(
        "filter-once",
        "t(x, y) -> int32(x), int32(y).\n.input t.\nr(x, y) <- t(x, y), x * 7 > y + 250000.\n.output r.\n",
        rows,
        &["x", "y"],
        |after| {
            let frees = after
                .iter()
                .take_while(|i| matches!(i, fox_kernel::Instr::Free { .. }))
                .count();
            assert_eq!(frees, 3, "{after:?}");
            frees
        },
    );
    let opts = |limit: Option<u64>| RunOptions {
        database: Some(db.clone()),
        memory_limit: limit,
        ..RunOptions::default()
    };
    let text = |r: &fox_runtime::RunResult| fox_runtime::output::csv_text(&r.outputs[0]);
    let whole = fox_runtime::run(&plan, &mut fox_cpu::CpuBackend::new(), &opts(None)).unwrap();
    let expect = (0..40_000i64).filter(|v| v * 7 > (v * 31) % 1000 + 250_000).count();
    assert_eq!(whole.outputs[0].len(), expect);
    // The columns (320,000 bytes) do not fit; they fit, but not beside their marks
    // (40,000 bytes), so the load leaves them in place too, and the filter goes to its
    // chunks without bringing them to the device whole first.
    for limit in [200_000u64, 330_000, 350_000] {
        let mut dev = OwnMemory::new();
        let cut = fox_runtime::run(&plan, &mut dev, &opts(Some(limit))).unwrap();
        assert_eq!(text(&cut), text(&whole));
        assert!(cut.stats.peak_bytes <= limit as usize, "{}", cut.stats.peak_bytes);
        let t = cut.stats.tier;
        assert_eq!(t.operators_in_pieces, 1, "{limit}: {t:?}");
        assert!(t.pieces >= 2, "{limit}: {t:?}");
        assert_eq!(
            (t.evictions, t.bytes_to_host, t.host_peak_bytes),
            (0, 0, 0),
            "{limit}: {t:?}"
        );
        assert_eq!((t.restores, t.bytes_to_device), (0, 0), "{limit}: {t:?}");
        // Each of the two columns' 40,000 rows uploaded once.
        assert_eq!(dev.stored_rows, 80_000, "{limit}");
        let cpu = fox_runtime::run(&plan, &mut fox_cpu::CpuBackend::new(), &opts(Some(limit))).unwrap();
        assert_eq!(text(&cpu), text(&whole));
        assert!(cpu.stats.tier.operators_in_pieces >= 1, "{:?}", cpu.stats.tier);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// On a device with memory of its own, a row-local launch run in chunks keeps the
/// chunks' outputs there and joins them on the device: a filter of a database column
/// larger than the budget leaves (with its argument) reads the column's rows in place
/// chunk by chunk, and neither its marks nor the rows it keeps go to the host tier.
#[test]
fn chunks_of_a_row_local_launch_keep_their_outputs_on_the_device() {
    let rows: String = (0..40_000).map(|v| format!("{v}\n")).collect();
    // The plan's load, filter and compaction (and the free of the input after it, not of
    // the marks), and the output of what they keep.
    let (dir, plan, db) = filter_plan(
        "row-chunks",
        "t(x) -> int32(x).\n.input t.\nr(x) <- t(x), x * 7 > 250000.\n.output r.\n",
        rows,
        &["x"],
        |_| 1,
    );
    let opts = |limit: Option<u64>| RunOptions {
        database: Some(db.clone()),
        memory_limit: limit,
        ..RunOptions::default()
    };
    let text = |r: &fox_runtime::RunResult| fox_runtime::output::csv_text(&r.outputs[0]);
    let whole = fox_runtime::run(&plan, &mut fox_cpu::CpuBackend::new(), &opts(None)).unwrap();
    assert_eq!(whole.outputs[0].len(), 40_000 - 35_715);
    // The column (160,000 bytes) fits, but not beside its filter's marks (40,000).
    let mut dev = OwnMemory::new();
    let cut = fox_runtime::run(&plan, &mut dev, &opts(Some(180_000))).unwrap();
    assert_eq!(text(&cut), text(&whole));
    assert!(cut.stats.peak_bytes <= 180_000, "{}", cut.stats.peak_bytes);
    let t = cut.stats.tier;
    assert!(t.operators_in_pieces >= 2 && t.pieces >= 4, "{t:?}");
    assert_eq!((t.evictions, t.bytes_to_host, t.host_peak_bytes), (0, 0, 0), "{t:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
