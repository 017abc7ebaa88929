//! The TPC-H benchmark driver (`foxbench tpch`) and the comparison of query results with
//! reference answers, shared by the benchmark and the tests.
//!
//! The data set is loaded (generated or read) once for all the queries asked for, with
//! the columns their plans read; each query is compiled, run once (its first run uploads
//! the columns it reads and compiles its kernels) and then `repeat` times on the resident
//! data.

use fox_kernel::KernelPlan;
use fox_runtime::{Backend, DataSource, Database, OutputTable, Resident, RunOptions, RunStats};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One query of the benchmark.
#[derive(Clone, Debug)]
pub struct QueryRun {
    pub query: u32,
    /// Parsing, checking, planning and lowering.
    pub compile: Duration,
    /// The first run (uploads of the columns it reads, kernel compilation).
    pub first: Duration,
    /// The later runs.
    pub hot: Vec<Duration>,
    /// The statistics of the last run.
    pub stats: RunStats,
    /// The result of the last run.
    pub output: OutputTable,
    /// With `profile`: the statistics of one more run with per-kernel timing (each launch
    /// waited for), which the medians do not include.
    pub profile: Option<RunStats>,
}

impl QueryRun {
    pub fn median(&self) -> Duration {
        median(&self.hot).unwrap_or(self.first)
    }
}

pub fn median(xs: &[Duration]) -> Option<Duration> {
    let mut v = xs.to_vec();
    v.sort();
    if v.is_empty() {
        return None;
    }
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 { v[m] } else { (v[m - 1] + v[m]) / 2 })
}

/// The program of query `q` in `dir` (`q06.logic`).
pub fn query_path(dir: &Path, q: u32) -> PathBuf {
    dir.join(format!("q{q:02}.logic"))
}

/// Compiles the queries `qs` of `dir`, in order.
pub fn compile_queries(dir: &Path, qs: &[u32]) -> anyhow::Result<Vec<(u32, KernelPlan, Duration)>> {
    let mut out = Vec::new();
    for &q in qs {
        let path = query_path(dir, q);
        let t = Instant::now();
        let plan = crate::load_plan(&path, false, "foxbench")?
            .ok_or_else(|| anyhow::anyhow!("{} has errors", path.display()))?;
        out.push((q, plan, t.elapsed()));
    }
    Ok(out)
}

/// Loads the data for `plans` from `source`.
pub fn load(source: &DataSource, plans: &[(u32, KernelPlan, Duration)], progress: bool) -> anyhow::Result<Database> {
    let refs: Vec<&KernelPlan> = plans.iter().map(|(_, p, _)| p).collect();
    let db = if progress {
        Database::load(source, &refs, &crate::Bars::new())
    } else {
        Database::load(source, &refs, &fox_runtime::NoProgress)
    };
    db.map_err(|e| anyhow::anyhow!("{e}"))
}

/// Runs each plan once and then `repeat` times on `backend`, with `db` resident.
pub fn run_queries(
    backend: &mut dyn Backend,
    db: Arc<Database>,
    plans: &[(u32, KernelPlan, Duration)],
    repeat: u32,
    profile: bool,
    mut each: impl FnMut(&QueryRun),
) -> anyhow::Result<Vec<QueryRun>> {
    let mut resident = Resident::default();
    let opts = RunOptions {
        database: Some(db),
        ..Default::default()
    };
    let mut out = Vec::new();
    let res = (|| {
        for (q, plan, compile) in plans {
            backend.reset_peak();
            let t = Instant::now();
            let r = fox_runtime::run_resident(plan, backend, &opts, Some(&mut resident))
                .map_err(|e| anyhow::anyhow!("Q{q}: {e}"))?;
            let first = t.elapsed();
            let mut hot = Vec::new();
            let mut last = r;
            for _ in 0..repeat {
                backend.reset_peak();
                let t = Instant::now();
                last = fox_runtime::run_resident(plan, backend, &opts, Some(&mut resident))
                    .map_err(|e| anyhow::anyhow!("Q{q}: {e}"))?;
                hot.push(t.elapsed());
            }
            let output = last
                .outputs
                .into_iter()
                .next()
                .ok_or_else(|| anyhow::anyhow!("Q{q} has no output"))?;
            let profile = if profile {
                let timed = RunOptions {
                    timing: true,
                    ..opts.clone()
                };
                let r = fox_runtime::run_resident(plan, backend, &timed, Some(&mut resident))
                    .map_err(|e| anyhow::anyhow!("Q{q}: {e}"))?;
                Some(r.stats)
            } else {
                None
            };
            let run = QueryRun {
                query: *q,
                compile: *compile,
                first,
                hot,
                stats: last.stats,
                output,
                profile,
            };
            each(&run);
            out.push(run);
        }
        Ok(())
    })();
    resident.release(backend);
    res.map(|_| out)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The table `foxbench tpch` prints.
pub fn table(runs: &[QueryRun]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>5} {:>8} {:>9} {:>10} {:>10} {:>8} {:>9} {:>10} {:>9} {:>9} {:>10}",
        "query",
        "rows",
        "plan ms",
        "first ms",
        "median ms",
        "prepare",
        "upload",
        "compute",
        "download",
        "output",
        "peak MB"
    );
    for r in runs {
        let st = &r.stats;
        let _ = writeln!(
            s,
            "{:>5} {:>8} {:>9.2} {:>10.2} {:>10.2} {:>8.2} {:>9.2} {:>10.2} {:>9.2} {:>9.2} {:>10.1}",
            format!("Q{}", r.query),
            r.output.len(),
            ms(r.compile),
            ms(r.first),
            ms(r.median()),
            ms(st.load),
            ms(st.upload),
            ms(st.compute),
            ms(st.download),
            ms(st.output),
            st.peak_bytes as f64 / 1e6
        );
    }
    let total: f64 = runs.iter().map(|r| ms(r.median())).sum();
    let geo = (runs.iter().map(|r| ms(r.median()).max(1e-3).ln()).sum::<f64>() / runs.len().max(1) as f64).exp();
    let peak = runs.iter().map(|r| r.stats.peak_bytes).max().unwrap_or(0);
    let _ = writeln!(
        s,
        "total of medians {total:.1} ms, geometric mean {geo:.2} ms, largest peak {:.1} MB",
        peak as f64 / 1e6
    );
    s
}

/// The runs as JSON (for tpch/bench-duckdb.py --fox-json and for the record).
pub fn json(runs: &[QueryRun], sf: &str, backend: &str) -> String {
    let mut s = format!("{{\"system\":\"fox\",\"backend\":{backend:?},\"scale\":{sf:?},\"queries\":[");
    for (i, r) in runs.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let hot: Vec<String> = r.hot.iter().map(|d| format!("{:.4}", ms(*d))).collect();
        let st = &r.stats;
        s.push_str(&format!(
            "{{\"query\":{},\"rows\":{},\"plan_ms\":{:.4},\"first_ms\":{:.4},\"median_ms\":{:.4},\"runs_ms\":[{}],\
             \"prepare_ms\":{:.4},\"upload_ms\":{:.4},\"compute_ms\":{:.4},\"download_ms\":{:.4},\"output_ms\":{:.4},\
             \"kernel_compile_ms\":{:.4},\"peak_bytes\":{}}}",
            r.query,
            r.output.len(),
            ms(r.compile),
            ms(r.first),
            ms(r.median()),
            hot.join(","),
            ms(st.load),
            ms(st.upload),
            ms(st.compute),
            ms(st.download),
            ms(st.output),
            ms(st.compile),
            st.peak_bytes
        ));
    }
    s.push_str("]}\n");
    s
}

// ---- comparison with reference answers ---------------------------------------------------

/// Parses a CSV text (RFC 4180 quoting) into rows of fields.
pub fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    let mut any = false;
    while let Some(c) = chars.next() {
        any = true;
        if quoted {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => quoted = false,
                c => field.push(c),
            }
            continue;
        }
        match c {
            '"' => quoted = true,
            ',' => row.push(std::mem::take(&mut field)),
            '\r' => {}
            '\n' => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
                any = false;
            }
            c => field.push(c),
        }
    }
    if any {
        row.push(field);
        rows.push(row);
    }
    rows
}

/// Parses an answer of the `tpchgen` crate (`|`-separated, padded, a header row).
pub fn parse_pipe_answer(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split('|').map(|f| f.trim().to_string()).collect())
        .collect()
}

/// True when two fields agree: equal text, or numbers within `tol`.
fn field_eq(a: &str, b: &str, tol: f64) -> bool {
    let (a, b) = (a.trim(), b.trim());
    if a == b {
        return true;
    }
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => (x - y).abs() <= tol * (1.0 + 1e-12 * x.abs().max(y.abs())),
        _ => false,
    }
}

/// Compares result rows with reference rows (both without headers): same count, and row
/// by row equal fields, numbers within `tol`. Rows are compared in order first and, when
/// that fails, after sorting both (ties of the ORDER BY may come in either order).
pub fn compare_rows(ours: &[Vec<String>], want: &[Vec<String>], tol: f64) -> Result<(), String> {
    // SQL aggregates over no rows give one row of NULLs (written as empty fields); Fox's
    // give no row.
    if ours.is_empty() && want.len() == 1 && want[0].iter().all(|f| f.trim().is_empty()) {
        return Ok(());
    }
    if ours.len() != want.len() {
        return Err(format!("{} rows, expected {}", ours.len(), want.len()));
    }
    let rows_eq = |a: &[Vec<String>], b: &[Vec<String>]| -> Option<usize> {
        a.iter()
            .zip(b)
            .position(|(x, y)| x.len() != y.len() || x.iter().zip(y).any(|(p, q)| !field_eq(p, q, tol)))
    };
    let Some(first_bad) = rows_eq(ours, want) else {
        return Ok(());
    };
    let key = |r: &Vec<String>| -> Vec<String> {
        r.iter()
            .map(|f| match f.trim().parse::<f64>() {
                Ok(x) => format!("{:030.2}", x + 1e15),
                Err(_) => f.trim().to_string(),
            })
            .collect()
    };
    let mut a = ours.to_vec();
    let mut b = want.to_vec();
    a.sort_by_key(key);
    b.sort_by_key(key);
    match rows_eq(&a, &b) {
        None => Ok(()),
        Some(_) => Err(format!(
            "row {} differs: got [{}], expected [{}]",
            first_bad + 1,
            ours[first_bad].join(", "),
            want[first_bad].join(", ")
        )),
    }
}

/// The rows of a result as CSV fields (no header).
pub fn result_rows(t: &OutputTable) -> Vec<Vec<String>> {
    let text = fox_runtime::output::csv_text(t);
    parse_csv(&text).into_iter().skip(1).collect()
}

/// The official answer of query `q` at scale factor 1 shipped in the `tpchgen` crate, as
/// rows of fields (no header), with its two known defects undone so that a correct
/// result matches: Q11's part keys lack their last two digits there (129760 is printed
/// 1297, 34452 is 344), so ours are cut the same way before comparing; and Q17's value is
/// printed 348406.02 where the query's exact result (and the TPC-H specification's
/// answer) is 348406.05, so Q17 is compared within 0.05.
pub fn compare_sf1(q: u32, ours: &[Vec<String>]) -> Result<(), String> {
    let qa = tpchgen::q_and_a::QueryAndAnswer::new(q as i32, 1.0)?;
    let want: Vec<Vec<String>> = parse_pipe_answer(qa.answer()).into_iter().skip(1).collect();
    let mut ours = ours.to_vec();
    let mut tol = 0.01;
    match q {
        11 => ours.iter_mut().for_each(|r| {
            if let Some(k) = r.first_mut() {
                k.truncate(k.len().saturating_sub(2));
            }
        }),
        17 => tol = 0.05,
        _ => {}
    }
    compare_rows(&ours, &want, tol)
}
