//! `foxbench datalog`: a recursive Datalog program of queries/datalog on a graph or on
//! generated program-analysis inputs, on a Fox backend, on the CPU backend beside a GPU,
//! and on Soufflé's interpreter, with the answers compared.
//!
//! The inputs are written once as CSV files (`<relation>.csv`, `src,dst` lines) into a
//! scratch folder (on /dev/shm where there is one), which every system reads: Fox runs
//! `<PROGRAM>.logic` as `foxrun --timing` does (files loaded, statistics taken, plan made,
//! run), Soufflé its twin `<PROGRAM>.dl`. Each system's answer is, per output relation,
//! its number of tuples and an order-independent hash of them (the wrapping sum of a
//! 64-bit mix of each tuple's integers), so that answers compare without sorting; the
//! run fails when they differ.

use clap::{Args, ValueEnum};
use fox_cli::datalog_gen::{self, GenSpec};
use fox_runtime::graph::GraphSpec;
use fox_runtime::{human_bytes, Backend, LoadedInputs, RunEvent, RunObserver, RunOptions};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct DatalogArgs {
    /// The program: queries/datalog/PROGRAM.logic (with --souffle, also its Soufflé twin
    /// PROGRAM.dl).
    #[arg(long, value_enum)]
    program: Program,
    /// The input. For tc, sg, reach and cc, the relation `edge`: an edge-list file (as
    /// `foxrun --graph`: two int32 ids a line, separated by whitespace, commas or tabs;
    /// duplicates removed; gzip-compressed when its name ends in .gz), or generated,
    /// rmat:SCALE[:EDGEFACTOR][:SEED] or gnm:N:M:SEED.
    /// For cspa, csda and andersen, generated look-alike inputs: gen:SCALE[:SEED] (scale
    /// 1: CSPA's inputs have the size of httpd's, 362,799 assign and 1,147,612
    /// dereference edges; see docs/benchmarks.md).
    #[arg(
        long,
        value_name = "SPEC|PATH",
        required_unless_present = "data",
        conflicts_with = "data"
    )]
    graph: Option<String>,
    /// Read the inputs from DIR/<relation>.csv (comma-separated pairs, no header) instead
    /// of writing them from --graph.
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// With an edge-list file: add the reverse of every edge and drop self-loops.
    #[arg(long)]
    symmetrize: bool,
    /// reach: the source vertex (default: the least vertex with an outgoing edge).
    #[arg(long, value_name = "VERTEX")]
    source: Option<i32>,
    /// Where Fox runs: auto (the GPU when one is usable, otherwise the CPU; the choice is
    /// printed), gpu, cpu. On the GPU the CPU backend runs too, unless --no-cpu.
    #[arg(long, value_enum, default_value_t = fox_cli::BackendChoice::Auto)]
    backend: fox_cli::BackendChoice,
    /// On the GPU, do not also run Fox's CPU backend (for inputs on which it would take
    /// long); the answers of the systems that ran are still compared.
    #[arg(long)]
    no_cpu: bool,
    /// Runs per Fox backend; the run of median total time is reported (every run's
    /// answer must be the same).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeat: u32,
    /// Also run Soufflé's interpreter (the binary at PATH) on PROGRAM.dl, with
    /// --souffle-threads threads, and compare its answer.
    #[arg(long, value_name = "PATH")]
    souffle: Option<PathBuf>,
    /// Stop Soufflé after this many seconds (the run then reports it as timed out and
    /// compares the other systems).
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    souffle_timeout: u64,
    /// Soufflé's threads (-j; default: every core of the machine).
    #[arg(long, value_name = "N")]
    souffle_threads: Option<usize>,
    /// The folder of the programs.
    #[arg(long, value_name = "DIR", default_value = "queries/datalog")]
    dir: PathBuf,
    /// Write the inputs into DIR (created) and keep them, instead of a scratch folder
    /// removed at the end.
    #[arg(long, value_name = "DIR", conflicts_with = "data")]
    keep_inputs: Option<PathBuf>,
    /// Fail unless every system derives N tuples (summed over the output relations), for
    /// checking against a published count.
    #[arg(long, value_name = "N")]
    expect_tuples: Option<u64>,
    /// Also run Fox over N devices (SPMD, as `foxrun --devices`: planned for N devices,
    /// each device reading its part of every input), in the row after Fox on one device,
    /// and print the speed-up (the 1-device total over the N-device one); the run fails
    /// when the answers differ. On the GPU backend N GPUs from the first (`all`: every
    /// visible GPU), on the CPU backend N simulated devices (`all`: 1).
    #[arg(long, value_name = "N|all", default_value = "1", value_parser = fox_cli::parse_devices)]
    devices: fox_cli::Devices,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Program {
    Tc,
    Sg,
    Reach,
    Cc,
    Cspa,
    Csda,
    Andersen,
}

impl Program {
    fn name(self) -> &'static str {
        match self {
            Program::Tc => "tc",
            Program::Sg => "sg",
            Program::Reach => "reach",
            Program::Cc => "cc",
            Program::Cspa => "cspa",
            Program::Csda => "csda",
            Program::Andersen => "andersen",
        }
    }

    /// The generated inputs of a program analysis; `None` for the graph programs.
    fn generate(self, spec: &GenSpec) -> Option<Vec<datalog_gen::Relation>> {
        match self {
            Program::Cspa => Some(datalog_gen::cspa(spec)),
            Program::Csda => Some(datalog_gen::csda(spec)),
            Program::Andersen => Some(datalog_gen::andersen(spec)),
            _ => None,
        }
    }
}

/// One output relation of an answer: its tuples and their hash.
#[derive(Clone, Debug, PartialEq, Eq)]
struct RelAnswer {
    name: String,
    tuples: u64,
    hash: u64,
}

/// A system's measurements (times in ms; `None` where the system does not report it).
struct Measured {
    answer: Vec<RelAnswer>,
    load: Option<f64>,
    compute: Option<f64>,
    output: Option<f64>,
    total: f64,
    iterations: Option<u64>,
    peak: Option<u64>,
}

impl Measured {
    fn tuples(&self) -> u64 {
        self.answer.iter().map(|r| r.tuples).sum()
    }
}

/// One system's row: its name, and its measurements or why it has none.
struct Row {
    system: String,
    /// The devices Fox ran over (1, or `--devices`; Soufflé: 1).
    devices: usize,
    result: Result<Measured, String>,
    /// The result is not an answer (a time-out), so it is not compared.
    skipped: bool,
}

/// A scratch folder removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(tag: &str) -> anyhow::Result<Scratch> {
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let dir = base.join(format!("foxbench-datalog-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    Ok(Scratch(dir))
}

/// The 64-bit mix of the hashes (SplitMix64's finaliser).
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The hash of one tuple of integers.
fn tuple_hash(values: impl Iterator<Item = i64>) -> u64 {
    let mut h = 0x243F_6A88_85A3_08D3u64;
    for v in values {
        h = mix(h ^ v as u64);
    }
    h
}

fn write_pairs(path: &Path, pairs: impl Iterator<Item = (i64, i64)>) -> anyhow::Result<u64> {
    let f = std::fs::File::create(path).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    let mut w = std::io::BufWriter::new(f);
    let mut n = 0;
    for (x, y) in pairs {
        writeln!(w, "{x},{y}")?;
        n += 1;
    }
    w.flush()
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    Ok(n)
}

/// Writes the program's inputs from `--graph` into `dir`; a line saying what they are.
fn write_inputs(a: &DatalogArgs, spec: &str, dir: &Path) -> anyhow::Result<String> {
    let name = a.program.name();
    if let Some(gen) = GenSpec::parse(spec) {
        let gen = gen.map_err(|e| anyhow::anyhow!("--graph: {e}"))?;
        let rels = a.program.generate(&gen).ok_or_else(|| {
            anyhow::anyhow!(
                "--graph gen:… generates the inputs of cspa, csda and andersen; {name} reads a graph \
                 (an edge-list file, rmat:… or gnm:…)"
            )
        })?;
        let mut parts = Vec::new();
        for r in &rels {
            let n = write_pairs(
                &dir.join(format!("{}.csv", r.name)),
                r.pairs.iter().map(|&(x, y)| (x as i64, y as i64)),
            )?;
            parts.push(format!("{n} {}", r.name));
        }
        return Ok(format!("{gen}: {}", parts.join(", ")));
    }
    if matches!(a.program, Program::Cspa | Program::Csda | Program::Andersen) {
        anyhow::bail!("{name} reads generated program-analysis inputs: give --graph gen:SCALE[:SEED] or --data DIR");
    }
    // A gzip-compressed edge list (as the graphs of the GPU Datalog literature come) is
    // unpacked next to the inputs first.
    let (unpacked, given) = (dir.join("graph.unpacked"), spec);
    let spec = if spec.ends_with(".gz") && Path::new(spec).is_file() {
        let f = std::fs::File::open(spec).map_err(|e| anyhow::anyhow!("cannot read {spec}: {e}"))?;
        let mut out = std::io::BufWriter::new(
            std::fs::File::create(&unpacked)
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", unpacked.display()))?,
        );
        std::io::copy(&mut flate2::read::MultiGzDecoder::new(f), &mut out)
            .and_then(|_| out.flush())
            .map_err(|e| anyhow::anyhow!("cannot unpack {spec}: {e}"))?;
        unpacked
            .to_str()
            .ok_or_else(|| anyhow::anyhow!("{} is not UTF-8", unpacked.display()))?
    } else {
        spec
    };
    let graph = GraphSpec::parse(spec)
        .map_err(|e| anyhow::anyhow!("--graph: {e}"))?
        .with_symmetrize(a.symmetrize);
    let edges = fox_runtime::graph::generate(&graph, &|_| {});
    if given != spec {
        let _ = std::fs::remove_file(&unpacked);
    }
    // Errors name the file given, not its unpacked copy.
    let (x, y) = edges.map_err(|e| anyhow::anyhow!("{}", e.replace(spec, given)))?;
    let n = write_pairs(&dir.join("edge.csv"), x.iter().copied().zip(y.iter().copied()))?;
    let shown = if given == spec {
        graph.to_string()
    } else {
        given.to_string()
    };
    let mut what = format!("{shown}: {n} edges");
    if a.program == Program::Reach {
        let source = match a.source {
            Some(s) => s as i64,
            None => *x
                .iter()
                .min()
                .ok_or_else(|| anyhow::anyhow!("the graph {shown} has no edges: give --source"))?,
        };
        std::fs::write(dir.join("source.csv"), format!("{source}\n"))
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", dir.join("source.csv").display()))?;
        let _ = write!(what, ", source vertex {source}");
    }
    Ok(what)
}

/// Counts the iterations of the recursive loops: at each semi-naive loop's exit, the
/// times its body ran (the loops over the rounds of a windowed join are not counted).
#[derive(Debug, Default)]
struct Iterations(AtomicU64);

impl RunObserver for Iterations {
    fn event(&self, event: &RunEvent<'_>) {
        if let RunEvent::Iteration {
            block,
            iterations,
            rows: 0,
        } = event
        {
            if fox_cli::progress::semi_naive_loop(block) {
                self.0.fetch_add(*iterations, Ordering::Relaxed);
            }
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The answer of a Fox run: per output relation its tuples and their hash.
fn fox_answer(outputs: &[fox_runtime::OutputTable]) -> Result<Vec<RelAnswer>, String> {
    use rayon::prelude::*;
    let mut answer = Vec::new();
    for t in outputs {
        let ncols = t.columns.len();
        if let Some(c) = t
            .columns
            .iter()
            .find(|c| !matches!(c.ty, fox_sema::core::Type::Int32 | fox_sema::core::Type::Int64))
        {
            return Err(format!("{}: column `{}` is {}, not an integer", t.name, c.name, c.ty));
        }
        // A sum of the rows' hashes: the same in any order, so summed in parallel.
        let hash = (0..t.len())
            .into_par_iter()
            .with_min_len(1 << 16)
            .map(|r| tuple_hash((0..ncols).map(|c| t.int_at(r, c).expect("an integer column"))))
            .reduce(|| 0u64, u64::wrapping_add);
        answer.push(RelAnswer {
            name: t.name.clone(),
            tuples: t.len() as u64,
            hash,
        });
    }
    answer.sort_by(|p, q| p.name.cmp(&q.name));
    Ok(answer)
}

/// Opens the backends `choice` names for `devices` ([`fox_cli::open_backends`]):
/// (backends, on the GPU).
fn open(
    choice: fox_cli::BackendChoice,
    devices: fox_cli::Devices,
) -> anyhow::Result<(Vec<Box<dyn Backend + Send>>, bool)> {
    let (backends, line) = fox_cli::open_backends(choice, devices).map_err(|e| {
        if e.starts_with("no usable GPU") {
            anyhow::anyhow!("{e}; use --backend cpu to run on the CPU")
        } else {
            anyhow::anyhow!("{e}")
        }
    })?;
    if let Some(line) = line {
        eprintln!("foxbench: {line}");
    }
    let gpu = match choice {
        fox_cli::BackendChoice::Gpu => true,
        fox_cli::BackendChoice::Cpu => false,
        fox_cli::BackendChoice::Auto => backends[0].name() != fox_cpu::CpuBackend::new().name(),
    };
    Ok((backends, gpu))
}

/// One Fox run as `foxrun --timing` makes it: the inputs loaded from `dir`, the plan made
/// with their statistics (for as many devices as `program` is planned for, which must be
/// those of `backends`), the run timed per phase on the host clock; over several devices
/// SPMD ([`fox_runtime::run_devices`]). Launches are not waited for one by one (as
/// per-kernel timing would), so a phase's time is what the run spends in it: the work a
/// phase leaves queued is waited for by the next read of a result.
fn fox_once(
    program: &fox_cli::Compiled,
    dir: &Path,
    backends: &mut [Box<dyn Backend + Send>],
) -> Result<Measured, String> {
    let wanted = program.inputs().map_err(|e| format!("{e:#}"))?;
    let started = Instant::now();
    let inputs = LoadedInputs::load(dir, &wanted, None, None).map_err(|e| e.to_string())?;
    let plan = program
        .kernel_plan(&inputs.statistics(), &fox_kernel::LowerOptions::default())
        .map_err(|e| format!("{e:#}"))?;
    let iterations = Arc::new(Iterations::default());
    let opts = RunOptions {
        data_dir: Some(dir.to_path_buf()),
        observer: Some(iterations.clone()),
        ..Default::default()
    };
    backends.iter_mut().for_each(|b| b.reset_peak());
    let r = fox_runtime::run_devices(
        &plan,
        backends.iter_mut().map(|b| b.as_mut()).collect(),
        &opts,
        Some(inputs),
    )
    .map_err(|e| e.to_string())?;
    let total = ms(started.elapsed());
    let s = &r.stats;
    Ok(Measured {
        answer: fox_answer(&r.outputs)?,
        load: Some(ms(s.load + s.upload)),
        compute: Some(ms(s.compute)),
        output: Some(ms(s.download + s.output)),
        total,
        iterations: Some(iterations.0.load(Ordering::Relaxed)),
        peak: Some(s.peak_bytes as u64),
    })
}

/// `repeat` Fox runs: the one of median total time, once every answer agreed.
fn fox_runs(
    program: &fox_cli::Compiled,
    dir: &Path,
    backends: &mut [Box<dyn Backend + Send>],
    repeat: u32,
) -> Result<Measured, String> {
    let mut runs = Vec::new();
    for _ in 0..repeat {
        let m = fox_once(program, dir, backends)?;
        if let Some(first) = runs.first() {
            let first: &Measured = first;
            if first.answer != m.answer {
                return Err("the answer changed between runs".into());
            }
        }
        runs.push(m);
    }
    runs.sort_by(|p, q| p.total.total_cmp(&q.total));
    Ok(runs.swap_remove(runs.len() / 2))
}

/// What Soufflé's run came to.
enum SouffleRun {
    Done(Measured),
    TimedOut(u64),
}

/// Soufflé's interpreter on `prog` with the facts of `facts`, its outputs written into a
/// scratch folder and read back as answers; its peak resident memory from the kernel's
/// accounting of the child.
fn souffle_run(a: &DatalogArgs, exe: &Path, prog: &Path, facts: &Path) -> Result<SouffleRun, String> {
    let out = scratch("souffle-out").map_err(|e| e.to_string())?;
    let threads = a
        .souffle_threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let started = Instant::now();
    let mut child = std::process::Command::new(exe)
        .arg(format!("-j{threads}"))
        .arg("--no-preprocessor")
        .arg("-F")
        .arg(facts)
        .arg("-D")
        .arg(&out.0)
        .arg(prog)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    let pid = child.id() as libc::pid_t;
    let mut stderr = child.stderr.take();
    let err_text = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(e) = stderr.as_mut() {
            let _ = std::io::Read::read_to_string(e, &mut s);
        }
        s
    });
    let timeout = Duration::from_secs(a.souffle_timeout);
    let (status, usage) = loop {
        let mut status = 0;
        // SAFETY: rusage is plain data the kernel fills in; the pid is our child's.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break (status, usage);
        }
        if r < 0 {
            return Err(format!("waiting for Soufflé: {}", std::io::Error::last_os_error()));
        }
        if started.elapsed() >= timeout {
            let _ = child.kill();
            let mut status = 0;
            // SAFETY: as above; reaps the killed child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            return Ok(SouffleRun::TimedOut(a.souffle_timeout));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let total = ms(started.elapsed());
    let err_text = err_text.join().unwrap_or_default();
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        let tail: String = err_text
            .lines()
            .rev()
            .take(20)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        return Err(format!("Soufflé failed (wait status {status}):\n{tail}"));
    }
    let mut answer = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&out.0)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "csv"))
        .collect();
    files.sort();
    for f in files {
        let name = f
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(&f).map_err(|e| format!("cannot read {}: {e}", f.display()))?;
        let (mut tuples, mut hash) = (0u64, 0u64);
        for (k, line) in text.lines().enumerate() {
            let mut ints = Vec::new();
            for field in line.split('\t') {
                ints.push(
                    field
                        .parse::<i64>()
                        .map_err(|_| format!("{}:{}: `{field}` is not an integer", f.display(), k + 1))?,
                );
            }
            tuples += 1;
            hash = hash.wrapping_add(tuple_hash(ints.into_iter()));
        }
        answer.push(RelAnswer { name, tuples, hash });
    }
    answer.sort_by(|p, q| p.name.cmp(&q.name));
    Ok(SouffleRun::Done(Measured {
        answer,
        load: None,
        compute: None,
        output: None,
        total,
        iterations: None,
        peak: Some(usage.ru_maxrss as u64 * 1024),
    }))
}

pub fn datalog(a: &DatalogArgs) -> anyhow::Result<()> {
    let name = a.program.name();
    let logic = a.dir.join(format!("{name}.logic"));
    let dl = a.dir.join(format!("{name}.dl"));
    if !logic.is_file() {
        anyhow::bail!(
            "there is no program {}: run foxbench from the repository's root, or give --dir DIR",
            logic.display()
        );
    }
    let mut program = fox_cli::compile_program_as(
        std::slice::from_ref(&logic),
        fox_syntax::sources::Dialect::ByName,
        false,
        "foxbench",
        &fox_ra::PlanOptions::default(),
    )?
    .ok_or_else(|| anyhow::anyhow!("{} has errors", logic.display()))?;
    if a.source.is_some() && (a.program != Program::Reach || a.data.is_some()) {
        anyhow::bail!("--source gives the source vertex of reach on a --graph; with --data, DIR/source.csv does");
    }
    if a.souffle.is_some() && !dl.is_file() {
        anyhow::bail!(
            "--souffle needs the Soufflé twin of the program, {}, which does not exist",
            dl.display()
        );
    }
    // The backend first: `auto` says which it took before the inputs are made.
    let (mut held, gpu) = open(a.backend, a.devices)?;
    let devices = held.len();
    let mut scratch_dir = None;
    let dir = match (&a.data, &a.keep_inputs, &a.graph) {
        (Some(d), _, _) => {
            eprintln!("foxbench: {name} on the inputs of {}", d.display());
            d.clone()
        }
        (None, keep, Some(spec)) => {
            let dir = match keep {
                Some(k) => {
                    std::fs::create_dir_all(k).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", k.display()))?;
                    k.clone()
                }
                None => {
                    let s = scratch("inputs")?;
                    let d = s.0.clone();
                    scratch_dir = Some(s);
                    d
                }
            };
            let t = Instant::now();
            let what = write_inputs(a, spec, &dir)?;
            eprintln!(
                "foxbench: {name} on {what} (inputs written to {} in {:.1} s)",
                dir.display(),
                t.elapsed().as_secs_f64()
            );
            dir
        }
        (None, _, None) => anyhow::bail!("give --graph or --data"),
    };
    let threads = fox_cpu::lftj::threads();
    let mut rows = Vec::new();
    // (on the GPU, devices): Fox on one device, on --devices, and on the CPU beside a GPU.
    let mut systems = vec![(gpu, 1)];
    if devices > 1 {
        systems.push((gpu, devices));
    }
    if gpu && !a.no_cpu {
        systems.push((false, 1));
    }
    for (k, (on_gpu, n)) in systems.into_iter().enumerate() {
        // Fox on one device and on --devices run on the devices opened first; the CPU
        // beside a GPU on a backend of its own.
        let mut own: Vec<Box<dyn Backend + Send>>;
        let backends: &mut [Box<dyn Backend + Send>] = if n > 1 {
            &mut held[..]
        } else if k == 0 {
            &mut held[..1]
        } else {
            own = open(fox_cli::BackendChoice::Cpu, fox_cli::Devices::Count(1))?.0;
            &mut own[..]
        };
        let system = match (on_gpu, n) {
            (true, 1) => format!("Fox, {}", backends[0].name()),
            (false, 1) => format!("Fox, cpu backend, {threads} threads"),
            (true, n) => format!("Fox, {n} devices, {}", backends[0].name()),
            (false, n) => format!("Fox, {n} devices, cpu backend"),
        };
        eprintln!("foxbench: running {name} with {system}");
        program.devices = n;
        rows.push(Row {
            system,
            devices: n,
            result: fox_runs(&program, &dir, backends, a.repeat),
            skipped: false,
        });
    }
    if let Some(exe) = &a.souffle {
        let threads = a
            .souffle_threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let system = format!("Soufflé interpreter, {threads} threads");
        eprintln!("foxbench: running {name} with {system}");
        let (result, skipped) = match souffle_run(a, exe, &dl, &dir) {
            Ok(SouffleRun::Done(m)) => (Ok(m), false),
            Ok(SouffleRun::TimedOut(s)) => (Err(format!("timed out after {s} s")), true),
            Err(e) => (Err(e), false),
        };
        rows.push(Row {
            system,
            devices: 1,
            result,
            skipped,
        });
    }
    drop(scratch_dir);
    fox_cli::stdout::print(&format_rows(name, &rows))?;
    check(&rows, a.expect_tuples)
}

fn format_rows(program: &str, rows: &[Row]) -> String {
    let mut text = String::new();
    let opt_ms = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
    let _ = writeln!(
        text,
        "{:<38} {:>14} {:>10} {:>10} {:>11} {:>10} {:>11} {:>14} {:>10}",
        "system", "tuples", "iterations", "load ms", "compute ms", "output ms", "total ms", "tuples/s", "peak"
    );
    for r in rows {
        match &r.result {
            Ok(m) => {
                let n = m.tuples();
                // Per second of compute where it is known, of the whole run otherwise.
                let secs = m.compute.unwrap_or(m.total) / 1e3;
                let _ = writeln!(
                    text,
                    "{:<38} {:>14} {:>10} {:>10} {:>11} {:>10} {:>11.2} {:>14} {:>10}",
                    r.system,
                    n,
                    m.iterations.map_or("-".to_string(), |i| i.to_string()),
                    opt_ms(m.load),
                    opt_ms(m.compute),
                    opt_ms(m.output),
                    m.total,
                    if secs > 0.0 {
                        format!("{:.0}", n as f64 / secs)
                    } else {
                        "-".to_string()
                    },
                    m.peak.map_or("-".to_string(), human_bytes)
                );
            }
            Err(e) => {
                let _ = writeln!(text, "{:<38} {e}", r.system);
            }
        }
    }
    let _ = writeln!(
        text,
        "{program}: tuples summed over the output relations; load = reading and parsing the input files \
         and uploading them, compute (with the kernel compilation of a first GPU run: use --repeat for hot \
         runs), output = downloading and ordering the results; total = from reading the inputs to the \
         ordered results, planning included (Soufflé: its process's wall time); tuples/s per second of compute \
         (Soufflé: of its whole run, which includes reading its inputs and writing its outputs); peak: the \
         backend's memory high-water mark (Soufflé: its peak resident memory); iterations: the times the \
         recursive loops' bodies ran, summed over the strata"
    );
    // Fox on one device (the first row) against Fox on --devices.
    if let (Some(Ok(one)), Some((Ok(many), n))) = (
        rows.first().map(|r| &r.result),
        rows.iter().find(|r| r.devices > 1).map(|r| (&r.result, r.devices)),
    ) {
        let _ = writeln!(
            text,
            "speed-up of Fox on {n} devices: {:.2}x (the total on 1 device over the total on {n}); answers {}",
            one.total / many.total,
            if one.answer == many.answer {
                "the same"
            } else {
                "DIFFER"
            }
        );
    }
    for r in rows {
        if let Ok(m) = &r.result {
            let rels: Vec<String> = m
                .answer
                .iter()
                .map(|x| format!("{} {} (hash {:016x})", x.name, x.tuples, x.hash))
                .collect();
            let _ = writeln!(text, "{}: {}", r.system, rels.join(", "));
        }
    }
    text
}

/// The run's verdict: every system ran, and every answer (and `expect`) agrees.
fn check(rows: &[Row], expect: Option<u64>) -> anyhow::Result<()> {
    let mut failed: Vec<String> = rows
        .iter()
        .filter_map(|r| match &r.result {
            Err(e) if !r.skipped => Some(format!("{} failed: {e}", r.system)),
            _ => None,
        })
        .collect();
    let answers: Vec<(&str, &Measured)> = rows
        .iter()
        .filter_map(|r| r.result.as_ref().ok().map(|m| (r.system.as_str(), m)))
        .collect();
    if let (Some(Ok(one)), Some((Ok(many), n))) = (
        rows.first().map(|r| &r.result),
        rows.iter().find(|r| r.devices > 1).map(|r| (&r.result, r.devices)),
    ) {
        if one.answer != many.answer {
            failed.push(format!(
                "the answers on 1 device and on {n} devices differ (see the relations above)"
            ));
        }
    }
    if let Some((first, m0)) = answers.first() {
        for (system, m) in &answers[1..] {
            if m.answer != m0.answer {
                failed.push(format!(
                    "the answers differ: {first} and {system} (see the relations above)"
                ));
            }
        }
    }
    if let Some(n) = expect {
        for (system, m) in &answers {
            if m.tuples() != n {
                failed.push(format!("{system} derived {} tuples, not the {n} expected", m.tuples()));
            }
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        anyhow::bail!("{}", failed.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fox(system: &str, devices: usize, hash: u64, total: f64) -> Row {
        Row {
            system: system.into(),
            devices,
            result: Ok(Measured {
                answer: vec![RelAnswer {
                    name: "path".into(),
                    tuples: 3,
                    hash,
                }],
                load: Some(1.0),
                compute: Some(1.0),
                output: Some(1.0),
                total,
                iterations: Some(2),
                peak: Some(1000),
            }),
            skipped: false,
        }
    }

    /// Fox on one device against Fox on N: the same answer passes with the speed-up
    /// printed; a different one (same count, other tuples) fails naming the devices.
    #[test]
    fn answers_on_one_device_and_on_several_are_compared() {
        let same = [fox("Fox, cpu", 1, 7, 40.0), fox("Fox, 2 devices, cpu", 2, 7, 20.0)];
        assert!(check(&same, Some(3)).is_ok());
        let text = format_rows("tc", &same);
        assert!(
            text.contains(
                "speed-up of Fox on 2 devices: 2.00x (the total on 1 device over the total on 2); answers the same"
            ),
            "{text}"
        );
        let differ = [fox("Fox, cpu", 1, 7, 40.0), fox("Fox, 2 devices, cpu", 2, 8, 20.0)];
        let e = check(&differ, None).unwrap_err().to_string();
        assert!(e.contains("the answers on 1 device and on 2 devices differ"), "{e}");
        assert!(format_rows("tc", &differ).contains("answers DIFFER"));
    }
}
