//! `foxbench`: benchmarks of the backends' primitives.
//!
//! `foxbench kernels` times the kernels the plans are made of on random data (never
//! zeros): the radix sort (`SortPerm`) of 32-bit keys, the sort of key/value pairs
//! (`SortPerm` then `Gather`), `ExclusiveScan` of u64 counts, `Compact` of a u32 column
//! by 50% flags, the sort-merge join (`JoinCount`, `ExclusiveScan`, `JoinWrite`) of two
//! pre-sorted relations with about one match per key, and the device-to-device copy
//! whose bandwidth (bytes read plus bytes written) is the ceiling of the memory-bound
//! primitives, plus on the GPU uploads and downloads. Each is run once untimed
//! (compilation, module loading; its result is checked against a host computation), then
//! `--repeat` times; the median is reported. On the GPU, times come from CUDA events on
//! the backend's stream; on the CPU, from the wall clock.

use clap::{Args, Parser, Subcommand, ValueEnum};
use fox_cli::progress::Spinner;
use fox_kernel::Kernel;
use fox_runtime::{human_bytes, plural};
use fox_runtime::{Backend, BackendError, DevBuf, HostCol, LaunchCtx};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[path = "foxbench/datalog.rs"]
mod datalog;

fox_cli::check_stdout_at_start!();
fox_cli::exit_on_out_of_memory!("foxbench");

#[derive(Parser)]
#[command(
    name = "foxbench",
    version,
    about = "Benchmarks Fox's kernels on a backend",
    long_about = "Benchmarks Fox's kernels on a backend: the GPU when one is usable, otherwise the \
                  CPU (--backend auto, the default, says which it took), or the one --backend \
                  names.\n\n\
                  `foxbench kernels` times, on random data: the radix sort (sort_perm) of 2^LOG2N \
                  u32 keys; the sort of 2^LOG2N key/value pairs (sort_perm, gather of the values, \
                  and both together); exclusive_scan of 2^LOG2N u64 counts; compact of 2^LOG2N u32 \
                  rows by 50% flags; the sort-merge join (join_count + exclusive_scan + join_write) \
                  of two pre-sorted 2^JOIN_LOG2N-row relations with about one match per key; a \
                  device-to-device copy (the bandwidth ceiling: bytes read plus bytes written); \
                  and on the GPU uploads and downloads. Each primitive runs once untimed \
                  (compilation, module loading), its result checked on the host, then --repeat \
                  times; the table gives the median time (CUDA events on the GPU, the wall clock \
                  on the CPU), the throughput, the fraction of the copy bandwidth for the \
                  memory-bound primitives, and with --cub the speed relative to CUB's primitives \
                  (bench/cub_reference.cu, run by bench/kernels.sh). Sizes are in decimal units \
                  (1 KB = 1000 bytes).\n\n\
                  Progress is drawn on standard error while it is a terminal (--no-progress: \
                  never); tables go to standard output.\n\n\
                  Exit status: 0 on success, 1 when the backend fails or a result is wrong, 2 \
                  for a bad command line."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// Draw no progress. Progress (data generation and loading, the benchmark and run
    /// under way) is drawn on standard error only when it is a terminal.
    #[arg(long, global = true)]
    no_progress: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Time the primitive kernels (sort, gather, scan, compaction, join, copy, transfers).
    Kernels(KernelsCli),
    /// Run the TPC-H queries (tpch/queries/qNN.logic) on data loaded once and resident on
    /// the backend: per query the planning time, the first run, the median of the hot
    /// runs with its upload/compute/download/output split, and the peak memory; then the
    /// total and the geometric mean of the medians.
    Tpch(TpchArgs),
    /// Write the eight TPC-H tables at a scale factor as `.tbl` files (for DuckDB or
    /// `--data`), with the same rows `--tpch` generates.
    TpchGen(TpchGenArgs),
    /// Count the k-cliques (k = 3: triangles) of a graph with the leapfrog triejoin on a
    /// backend, and, in the same run, with the classic iterator LFTJ on all CPU cores
    /// (fox_cpu::lftj) and with binary joins as baselines: per system the count, the
    /// median time, its split into building the trie and joining, edges per second, and
    /// the peak memory. The run fails when the systems disagree on the count.
    Clique(CliqueArgs),
    /// Compare the equi-join algorithms on two generated relations: per size, the time of
    /// the join forced to each algorithm (merge, hash, inl; nl only up to --nl-max) and of
    /// auto, the fastest, and the algorithm auto picked. The run fails when the
    /// algorithms disagree on the join's size.
    Joins(JoinsArgs),
    /// Run a recursive Datalog program of queries/datalog (tc, sg, reach, cc, cspa, csda,
    /// andersen) on a graph or on generated program-analysis inputs: the tuples derived,
    /// the iterations, the time split into load, compute and output, tuples per second
    /// and the peak memory, on the backend, on the CPU backend beside a GPU, and with
    /// --souffle on Soufflé's interpreter. The run fails when the answers differ.
    Datalog(datalog::DatalogArgs),
}

#[derive(Args)]
struct JoinsArgs {
    /// log2 of the rows of the probing relation `r`, one run per size (4..=30; default
    /// 20,22,24,26 on the GPU, 12,14,16 on the CPU).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(4..=30))]
    sizes: Vec<u32>,
    /// The building relation `s` has 2^-RATIO as many rows as `r` (its keys are distinct).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(0..=20))]
    ratio: u32,
    /// The percentage of `r`'s rows whose key occurs in `s`.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(0..=100))]
    match_rate: u32,
    /// The Zipf exponent of `r`'s matching keys over `s`'s (0: uniform).
    #[arg(long, default_value_t = 0.0)]
    zipf: f64,
    /// Join keys: 1 (one int column) or 2 (two int columns).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=2))]
    keys: u32,
    /// The algorithms to run, e.g. merge,hash (default: all of auto, merge, hash, inl, nl).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "ALGORITHM")]
    join: Vec<fox_cli::JoinArg>,
    /// The nested loop runs only where `r` has at most 2^NL_MAX rows (it compares every
    /// pair).
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u32).range(0..=30))]
    nl_max: u32,
    /// Where the joins run: auto (the GPU when one is usable, otherwise the CPU; the
    /// choice is printed), gpu, cpu.
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    backend: BackendChoice,
    /// Timed runs per algorithm after one untimed run; the median is reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeat: u32,
    /// Seed of the random data.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Args)]
struct CliqueArgs {
    /// The graph: rmat:SCALE[:EDGEFACTOR][:SEED], gnm:N:M:SEED, or an edge-list file
    /// (as `foxrun --graph`).
    #[arg(long, value_name = "SPEC|PATH", value_parser = fox_runtime::graph::GraphSpec::parse)]
    graph: fox_runtime::graph::GraphSpec,
    /// With an edge-list file: add the reverse of every edge and drop self-loops.
    #[arg(long)]
    symmetrize: bool,
    /// Renumber the graph's vertices 0, 1, … in ascending order of degree (ties by label)
    /// before running, so that `x < y` orients every edge from its endpoint of lower degree
    /// (clique counts are unchanged; listed vertices carry the new numbers).
    #[arg(long)]
    degree_order: bool,
    /// The variable order of the multi-way joins (leapfrog triejoin), for experiments:
    /// the named variables come first, in this order, and the others follow in the
    /// planner's order (e.g. `--var-order z,y,x`). Each name must be a variable of the
    /// clique query (x, y, z and w for k = 3 and 4; a to e for k = 5).
    #[arg(long, value_name = "VARS", value_delimiter = ',')]
    var_order: Vec<String>,
    /// The clique size: 3 (queries/triangle_count.logic), 4 or 5 (queries/cliqueK_count.logic).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(3..=5))]
    k: u32,
    /// Where the measured LFTJ runs: auto (the GPU when one is usable, otherwise the
    /// CPU; the choice is printed), gpu, cpu.
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    backend: BackendChoice,
    /// Timed runs per system after one untimed run; the median is reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeat: u32,
    /// Run only the LFTJ on --backend, without the baselines.
    #[arg(long)]
    no_baselines: bool,
    /// On the GPU, also run the plan's breadth-first LFTJ kernels on the CPU
    /// backend (about 100 times slower than the GPU, and several times slower than the
    /// CPU iterator LFTJ on the same cores).
    #[arg(long)]
    cpu_kernels: bool,
    /// Write the per-kernel table of each system's timed run (the run that splits build
    /// from join) to FILE.
    #[arg(long, value_name = "FILE")]
    profile: Option<PathBuf>,
    /// The memory the backend runs may use (e.g. 512M, 16G; default: all of the device's);
    /// levels of the LFTJ that would expand beyond it run in rounds.
    #[arg(long, value_name = "SIZE", value_parser = fox_cli::parse_memory_size)]
    memory_limit: Option<u64>,
    /// Also run the LFTJ over N devices (SPMD, as `foxrun --devices`: planned for N
    /// devices, each device holding the edges, which only the multi-way join reads, from the
    /// warm-up run on, and taking boxes of the first variable's bindings until none is
    /// left), in a row of its own after the LFTJ on one device (and the CPU LFTJ), and
    /// print the speed-up (the 1-device median over the N-device one); the run fails when
    /// the counts differ. Several counts (e.g. 2,4) run one after the other on the same
    /// graph, a row and a speed-up each. On the GPU backend N GPUs from the first (`all`:
    /// every visible GPU), on the CPU backend N simulated devices (`all`: 1).
    /// --memory-limit applies to each device. A device that fails stops the others at
    /// their next collective; devices waiting at a collective while no device made
    /// progress for FOX_STALL_TIMEOUT_S seconds (default 120) fail the run with an error
    /// naming the devices that did not come.
    #[arg(long, value_name = "N[,M…]|all", default_value = "1", value_delimiter = ',', value_parser = fox_cli::parse_devices)]
    devices: Vec<fox_cli::Devices>,
}

#[derive(Args)]
struct TpchArgs {
    /// Scale factor of the generated data (1 = 6 million lineitems).
    #[arg(long, value_name = "SF", value_parser = fox_cli::parse_scale_factor, required_unless_present = "data")]
    sf: Option<f64>,
    /// Read the tables from DIR/<table>.tbl instead of generating them; a table whose
    /// .tbl file DIR lacks is read from DIR/<table>.parquet when DIR has that.
    #[arg(long, value_name = "DIR", conflicts_with = "sf")]
    data: Option<PathBuf>,
    /// Where kernels run: auto (the GPU when one is usable, otherwise the CPU; the choice
    /// is printed), gpu, cpu.
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    backend: BackendChoice,
    /// The queries to run, e.g. 1,6,14 (default: 1 to 22).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=22))]
    queries: Vec<u32>,
    /// Hot runs per query after the first; the median is reported.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=1000))]
    repeat: u32,
    /// The folder of the query programs.
    #[arg(long, value_name = "DIR", default_value = "tpch/queries")]
    dir: PathBuf,
    /// Compare each result with DIR/qNN.csv (a header row, then the rows; numbers within
    /// 0.01) and fail on a difference.
    #[arg(long, value_name = "DIR")]
    check: Option<PathBuf>,
    /// Compare each result with the official SF1 answers shipped in the tpchgen crate
    /// (needs --sf 1).
    #[arg(long)]
    check_sf1: bool,
    /// The device memory the runs may use (e.g. 512M, 16G; default: all of the
    /// device's): operators that do not fit run in pieces and buffers wait in the host
    /// tier; each query's device peak and host-tier peak are printed after the table,
    /// then the bytes its median run copied to the device and their floor at the
    /// host-to-device bandwidth measured before the runs (256 MiB copies, median of 3),
    /// per query and against the total, and on a GPU the total's floor from page-locked
    /// memory too (the database columns runs read again are locked). The columns the runs read stay on the device
    /// between runs within the limit less the largest working set of a run so far; on a
    /// GPU, the packed rows of columns too large for that stay within half the limit,
    /// for the queries whose runs do not need the room (each query's line gives their
    /// bytes and the bytes widened from them); over --devices the limit is each
    /// device's.
    #[arg(long, value_name = "SIZE", value_parser = fox_cli::parse_memory_size)]
    memory_limit: Option<u64>,
    /// With --memory-limit: first run every query without the limit too, on the same
    /// data (once and --repeat times, on one device), then print a table of each query's
    /// median without the limit and under it, the ratio (the limited median over the
    /// other) and the totals; the run fails when an answer under the limit differs from
    /// the one without.
    #[arg(long, requires = "memory_limit")]
    also_unlimited: bool,
    /// Also write the measurements to FILE as JSON (tpch/bench-duckdb.py --fox-json reads it).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write each query's result to DIR/qNN.csv.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// After the timed runs, run each query once more with per-kernel timing (each
    /// launch waited for), on one device and over each --devices count, and write to
    /// FILE per query: `== QN`, the 1-device run's statistics (time by kernel, slowest
    /// instructions, split, memory); then per count `== QN on N devices`, that run's
    /// statistics (each instruction's time the slowest device's) and its kernels by
    /// device: each kernel's ms on one device, on device 0, device 1, … and its calls on
    /// each. The extra runs are not in the medians.
    #[arg(long, value_name = "FILE")]
    profile: Option<PathBuf>,
    #[arg(long, value_enum, value_name = "ALGORITHM", default_value_t = fox_cli::JoinArg::Auto, help = fox_cli::JoinArg::HELP)]
    join: fox_cli::JoinArg,
    /// Also run every query over N devices (SPMD, as `foxrun --devices`: planned for N
    /// devices, each device keeping the parts of the tables the runs read between runs,
    /// within its resident bound: the device's memory, or --memory-limit, less the largest
    /// working set of a run so far) after the runs on one device, and print a table of the
    /// medians, the speed-up (the 1-device median over the N-device one), whether the
    /// answers are the same, and the totals; the run fails when any differ. Each query's
    /// line gives each device's resident bytes after its runs and the bound. Several
    /// counts (e.g. 2,4) run one after the other, each over its own devices, with a
    /// column each. On the GPU backend N GPUs from the first (`all`: every visible GPU),
    /// on the CPU backend N simulated devices (`all`: 1). --memory-limit applies to each
    /// device; --profile profiles the N-device runs too; --check, --out and --json are
    /// of the 1-device runs.
    /// A device that fails stops the others at their next collective; devices waiting
    /// at a collective while no device made progress for FOX_STALL_TIMEOUT_S seconds
    /// (default 120) fail the run with an error naming the devices that did not come.
    #[arg(long, value_name = "N[,M…]|all", default_value = "1", value_delimiter = ',', value_parser = fox_cli::parse_devices)]
    devices: Vec<fox_cli::Devices>,
}

#[derive(Args)]
struct TpchGenArgs {
    /// Scale factor.
    #[arg(long, value_name = "SF", value_parser = fox_cli::parse_scale_factor)]
    sf: f64,
    /// The folder to write part.tbl … region.tbl into (created).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

#[derive(Args)]
struct KernelsCli {
    /// Where kernels run: auto (the GPU when one is usable, otherwise the CPU; the choice
    /// is printed), gpu, cpu.
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    backend: BackendChoice,
    /// log2 of the number of keys, pairs, counts and rows (4..=30; default 28 on the GPU,
    /// 22 on the CPU).
    #[arg(long, value_parser = clap::value_parser!(u32).range(4..=30))]
    log2n: Option<u32>,
    /// log2 of the number of rows of each side of the join (4..=30; default 26 on the
    /// GPU, 20 on the CPU).
    #[arg(long, value_parser = clap::value_parser!(u32).range(4..=30))]
    join_log2n: Option<u32>,
    /// Timed runs per primitive (after one untimed warm-up run); the median is reported
    /// (default 10 on the GPU, 5 on the CPU).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: Option<u32>,
    /// Also write every measurement (all times, not only medians) to FILE as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// CUB's times from bench/cub_reference.cu (lines `cub <name> <n> <ms>`): adds CUB's
    /// time and Fox's speed as a percentage of CUB's to the matching rows.
    #[arg(long, value_name = "FILE")]
    cub: Option<PathBuf>,
    /// Skip the host checks of the warm-up results.
    #[arg(long)]
    no_check: bool,
    /// Seed of the random data.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// `foxbench kernels` with the sizes of its backend.
struct KernelsArgs {
    log2n: u32,
    join_log2n: u32,
    repeat: u32,
    seed: u64,
}

impl KernelsArgs {
    /// The sizes given, or the defaults of the backend: on the GPU the sizes of the
    /// published measurements, on the CPU sizes a two-core machine runs in seconds.
    fn new(c: &KernelsCli, gpu: bool) -> KernelsArgs {
        let (log2n, join_log2n, repeat) = if gpu { (28, 26, 10) } else { (22, 20, 5) };
        KernelsArgs {
            log2n: c.log2n.unwrap_or(log2n),
            join_log2n: c.join_log2n.unwrap_or(join_log2n),
            repeat: c.repeat.unwrap_or(repeat),
            seed: c.seed,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BackendChoice {
    Auto,
    Gpu,
    Cpu,
}

fn main() -> ExitCode {
    fox_runtime::tempfiles::remove_on_signals();
    let cli = Cli::parse();
    let progress = fox_cli::progress::wanted(cli.no_progress);
    let res = match &cli.cmd {
        Cmd::Kernels(a) => kernels(a, progress),
        Cmd::Tpch(a) => tpch(a, progress),
        Cmd::TpchGen(a) => tpch_gen(a, progress),
        Cmd::Clique(a) => clique(a, progress),
        Cmd::Joins(a) => joins(a, progress),
        Cmd::Datalog(a) => datalog::datalog(a),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("foxbench: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// The launch context of the benchmarks: their kernels use no string constants.
struct NoStrings;

impl LaunchCtx for NoStrings {
    fn string_code(&self, _s: &str) -> Option<u32> {
        None
    }
}

enum Dev {
    Gpu(Box<fox_cuda::CudaBackend>),
    Cpu(fox_cpu::CpuBackend),
}

impl Dev {
    /// The backend `choice` names; `auto` takes the GPU when one is usable and otherwise
    /// the CPU, and says which on standard error.
    fn open(choice: BackendChoice) -> anyhow::Result<Dev> {
        match choice {
            BackendChoice::Cpu => Ok(Dev::Cpu(fox_cpu::CpuBackend::new())),
            BackendChoice::Gpu => match fox_cuda::CudaBackend::new() {
                Ok(g) => Ok(Dev::Gpu(Box::new(g))),
                Err(e) => {
                    anyhow::bail!("no usable GPU for --backend gpu: {e}; use --backend cpu to run on the CPU")
                }
            },
            BackendChoice::Auto => match fox_cuda::CudaBackend::new() {
                Ok(g) => {
                    eprintln!("foxbench: running on the {}", g.name());
                    Ok(Dev::Gpu(Box::new(g)))
                }
                Err(e) => {
                    eprintln!("foxbench: no usable GPU ({e}); running on the CPU");
                    Ok(Dev::Cpu(fox_cpu::CpuBackend::new()))
                }
            },
        }
    }

    fn is_gpu(&self) -> bool {
        matches!(self, Dev::Gpu(_))
    }

    fn into_backend(self) -> Box<dyn Backend + Send> {
        match self {
            Dev::Gpu(g) => g,
            Dev::Cpu(c) => Box::new(c),
        }
    }

    fn backend(&mut self) -> &mut dyn Backend {
        match self {
            Dev::Gpu(g) => g.as_mut(),
            Dev::Cpu(c) => c,
        }
    }

    /// Runs `f` and returns its result with its time in milliseconds: CUDA events on the
    /// GPU, the wall clock (after a sync) on the CPU.
    fn time<R>(
        &mut self,
        f: impl FnOnce(&mut dyn Backend) -> Result<R, BackendError>,
    ) -> Result<(R, f64), BackendError> {
        match self {
            Dev::Gpu(g) => g.timed(|b| f(b)),
            Dev::Cpu(c) => {
                let start = Instant::now();
                let r = f(c)?;
                c.sync()?;
                Ok((r, start.elapsed().as_secs_f64() * 1e3))
            }
        }
    }
}

/// One measured primitive.
struct Row {
    name: &'static str,
    /// Keys, rows or pairs per run (the join: rows of one side).
    n: usize,
    times_ms: Vec<f64>,
    /// The work per run in `unit`s (keys, tuples) or bytes (for `GB/s`).
    work: f64,
    unit: Unit,
    /// Whether the row is compared with the copy bandwidth.
    vs_ceiling: bool,
    /// The CUB primitive it is compared with.
    cub_name: Option<&'static str>,
    /// What the table adds in words (the join's output size).
    note: String,
}

#[derive(Clone, Copy, PartialEq)]
enum Unit {
    Keys,
    Pairs,
    Tuples,
    Bytes,
}

impl Row {
    fn median(&self) -> f64 {
        median(&self.times_ms)
    }

    /// Work per second in the unit (bytes/s for `Bytes`).
    fn rate(&self) -> f64 {
        self.work / (self.median() * 1e-3)
    }

    fn rate_text(&self) -> String {
        let r = self.rate();
        let per_s = |what: &str| {
            if !r.is_finite() {
                format!("- {what}/s")
            } else if r >= 1e9 {
                format!("{:.3} G{what}/s", r / 1e9)
            } else {
                format!("{:.3} M{what}/s", r / 1e6)
            }
        };
        match self.unit {
            Unit::Bytes if r.is_finite() => format!("{}/s", human_bytes(r as u64)),
            Unit::Bytes => "- B/s".into(),
            Unit::Keys => per_s("keys"),
            Unit::Pairs => per_s("pairs"),
            Unit::Tuples => per_s("tuples"),
        }
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len();
    if m == 0 {
        f64::NAN
    } else if m % 2 == 1 {
        s[m / 2]
    } else {
        0.5 * (s[m / 2 - 1] + s[m / 2])
    }
}

/// splitmix64: the random data of the benchmarks.
fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// `n` values `f(mix64(seed, i))`, generated on all cores.
fn random<T: Send + Default + Clone>(n: usize, seed: u64, f: impl Fn(u64) -> T + Sync) -> Vec<T> {
    let mut v = vec![T::default(); n];
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get()).min(32);
    let part = n.div_ceil(threads).max(1 << 16);
    let salt = mix64(seed);
    std::thread::scope(|s| {
        for (c, chunk) in v.chunks_mut(part).enumerate() {
            let f = &f;
            s.spawn(move || {
                for (k, x) in chunk.iter_mut().enumerate() {
                    let i = (c * part + k) as u64;
                    *x = f(mix64(salt ^ i.wrapping_mul(0x2545_f491_4f6c_dd1d)));
                }
            });
        }
    });
    v
}

impl BackendChoice {
    fn choice(self) -> fox_cli::BackendChoice {
        match self {
            BackendChoice::Auto => fox_cli::BackendChoice::Auto,
            BackendChoice::Gpu => fox_cli::BackendChoice::Gpu,
            BackendChoice::Cpu => fox_cli::BackendChoice::Cpu,
        }
    }
}

/// The backends of one benchmark run, one per device.
type Backends = Vec<Box<dyn Backend + Send>>;

/// The backends of the largest of `devices` (`all`: every visible GPU), and the counts
/// above 1 to run over, in increasing order without repeats.
fn open_device_counts(choice: BackendChoice, devices: &[fox_cli::Devices]) -> anyhow::Result<(Backends, Vec<usize>)> {
    let widest = devices
        .iter()
        .copied()
        .max_by_key(|d| match d {
            fox_cli::Devices::All => usize::MAX,
            fox_cli::Devices::Count(n) => *n,
        })
        .unwrap_or(fox_cli::Devices::Count(1));
    let backends = open_devices(choice, widest)?;
    let most = backends.len();
    let mut counts: Vec<usize> = devices
        .iter()
        .map(|d| match d {
            fox_cli::Devices::All => most,
            fox_cli::Devices::Count(n) => *n,
        })
        .filter(|&n| n > 1)
        .collect();
    counts.sort_unstable();
    counts.dedup();
    Ok((backends, counts))
}

/// The backends of a benchmark with `--devices`: the one `choice` names for
/// `--devices 1` ([`Dev::open`]), else those of [`fox_cli::open_backends`] (the first is
/// the device of the 1-device runs); `auto` says which it took on standard error.
fn open_devices(choice: BackendChoice, devices: fox_cli::Devices) -> anyhow::Result<Vec<Box<dyn Backend + Send>>> {
    if devices == fox_cli::Devices::Count(1) {
        return Ok(vec![Dev::open(choice)?.into_backend()]);
    }
    let (backends, line) = fox_cli::open_backends(choice.choice(), devices).map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(line) = line {
        eprintln!("foxbench: {line}");
    }
    Ok(backends)
}

/// `plan` run over `backends` with `opts.database`'s columns resident: with one, on it;
/// with several, SPMD over all ([`fox_runtime::run_devices_resident`]), each device
/// keeping its part of each column. `residents` holds a [`fox_runtime::Resident`] per
/// backend, in their order.
fn run_on(
    backends: &mut [Box<dyn Backend + Send>],
    plan: &fox_kernel::KernelPlan,
    opts: &fox_runtime::RunOptions,
    residents: &mut [fox_runtime::Resident],
) -> Result<fox_runtime::RunResult, fox_runtime::RuntimeError> {
    let devices = backends.iter_mut().map(|b| b.as_mut()).collect();
    fox_runtime::run_devices_resident(plan, devices, opts, residents)
}

fn be(e: BackendError) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

/// Runs `f` once untimed (its outputs are returned for checking) and `repeat` times
/// timed (their outputs are freed).
fn measure(
    dev: &mut Dev,
    repeat: u32,
    what: &str,
    progress: &Spinner,
    mut f: impl FnMut(&mut dyn Backend) -> Result<Vec<DevBuf>, BackendError>,
) -> anyhow::Result<(Vec<DevBuf>, Vec<f64>)> {
    let ctx = |e: BackendError| anyhow::anyhow!("{what}: {e}");
    progress.set(format!("{what}: warm-up run"));
    let first = f(dev.backend()).map_err(ctx)?;
    dev.backend().sync().map_err(ctx)?;
    let mut times = Vec::with_capacity(repeat as usize);
    for r in 0..repeat {
        progress.set(format!("{what}: run {} of {repeat}", r + 1));
        let (outs, ms) = dev.time(&mut f).map_err(ctx)?;
        for b in outs {
            dev.backend().free(b);
        }
        times.push(ms);
    }
    Ok((first, times))
}

fn launch(b: &mut dyn Backend, k: &Kernel, args: &[&DevBuf]) -> Result<Vec<DevBuf>, BackendError> {
    b.launch(k, args, &NoStrings)
}

fn take1(mut v: Vec<DevBuf>, what: &str) -> Result<DevBuf, BackendError> {
    match (v.pop(), v.is_empty()) {
        (Some(b), true) => Ok(b),
        _ => Err(BackendError(format!("{what} did not return one buffer"))),
    }
}

fn download_u32(dev: &mut Dev, b: &DevBuf) -> anyhow::Result<Vec<u32>> {
    match dev.backend().download(b).map_err(be)? {
        HostCol::U32(v) => Ok(v),
        c => anyhow::bail!("expected a u32 buffer, got {:?}", c.elem()),
    }
}

fn download_u64(dev: &mut Dev, b: &DevBuf) -> anyhow::Result<Vec<u64>> {
    match dev.backend().download(b).map_err(be)? {
        HostCol::U64(v) => Ok(v),
        c => anyhow::bail!("expected a u64 buffer, got {:?}", c.elem()),
    }
}

fn free_all(dev: &mut Dev, bufs: Vec<DevBuf>) {
    for b in bufs {
        dev.backend().free(b);
    }
}

fn sort_perm_kernel() -> Kernel {
    Kernel::SortPerm {
        desc: vec![false],
        by_rank: vec![false],
    }
}

/// Checks that `perm` is the stable sorting permutation of `keys`.
fn check_perm(keys: &[u32], perm: &[u32]) -> anyhow::Result<()> {
    anyhow::ensure!(
        perm.len() == keys.len(),
        "the permutation has {} rows for {}",
        perm.len(),
        keys.len()
    );
    let mut seen = vec![false; keys.len()];
    for (i, &p) in perm.iter().enumerate() {
        let p = p as usize;
        anyhow::ensure!(
            p < keys.len() && !seen[p],
            "perm[{i}] = {p} is out of range or repeated"
        );
        seen[p] = true;
        if i > 0 {
            let q = perm[i - 1] as usize;
            anyhow::ensure!(
                (keys[q], q) < (keys[p], p),
                "rows {q} and {p} at positions {} and {i} are out of (stable) order",
                i - 1
            );
        }
    }
    Ok(())
}

fn kernels(c: &KernelsCli, progress: bool) -> anyhow::Result<()> {
    let cub = match &c.cub {
        Some(p) => read_cub(p)?,
        None => Vec::new(),
    };
    let mut dev = Dev::open(c.backend)?;
    let a = &KernelsArgs::new(c, dev.is_gpu());
    let check = !c.no_check;
    let n = 1usize << a.log2n;
    let jn = 1usize << a.join_log2n;
    let rep = a.repeat;
    let name = dev.backend().name();
    eprintln!(
        "foxbench: {name}, n = 2^{} ({n} keys, {} of u32), join 2^{} x 2^{}, {} each",
        a.log2n,
        human_bytes(4 * n as u64),
        a.join_log2n,
        a.join_log2n,
        plural(u64::from(rep), "timed run")
    );
    let progress = Spinner::new(progress, "generating the random data");
    let mut rows: Vec<Row> = Vec::new();

    // The copy ceiling: n u32 read and written.
    let keys_host: Vec<u32> = random(n, a.seed, |x| x as u32);
    progress.set("copy");
    let keys = dev.backend().upload(HostCol::U32(keys_host.clone())).map_err(be)?;
    {
        let times = match &mut dev {
            Dev::Gpu(g) => {
                let dst = g.upload(HostCol::U32(vec![0; n])).map_err(be)?;
                g.copy_buffer(&dst, &keys).map_err(be)?;
                let mut times = Vec::new();
                for r in 0..rep {
                    progress.set(format!("copy: run {} of {rep}", r + 1));
                    let ((), ms) = g.timed(|g| g.copy_buffer(&dst, &keys)).map_err(be)?;
                    times.push(ms);
                }
                if check {
                    let got = match g.download(&dst).map_err(be)? {
                        HostCol::U32(v) => v,
                        _ => anyhow::bail!("copy: the copy is not u32"),
                    };
                    anyhow::ensure!(got == keys_host, "copy: the copy differs from its source");
                }
                g.free(dst);
                times
            }
            Dev::Cpu(_) => {
                let mut dst = vec![0u32; n];
                dst.copy_from_slice(&keys_host);
                let mut times = Vec::new();
                for r in 0..rep {
                    progress.set(format!("copy: run {} of {rep}", r + 1));
                    let start = Instant::now();
                    dst.copy_from_slice(std::hint::black_box(&keys_host));
                    std::hint::black_box(&mut dst);
                    times.push(start.elapsed().as_secs_f64() * 1e3);
                }
                times
            }
        };
        rows.push(Row {
            name: "copy",
            n,
            times_ms: times,
            work: 8.0 * n as f64,
            unit: Unit::Bytes,
            vs_ceiling: true,
            cub_name: Some("memcpy_dtod"),
            note: "u32, read + written".into(),
        });
    }

    // Radix sort of the keys.
    let (outs, times) = measure(&mut dev, rep, "sort_keys", &progress, |b| {
        launch(b, &sort_perm_kernel(), &[&keys])
    })?;
    let perm = take1(outs, "SortPerm").map_err(be)?;
    if check {
        check_perm(&keys_host, &download_u32(&mut dev, &perm)?).map_err(|e| anyhow::anyhow!("sort_keys: {e}"))?;
    }
    rows.push(Row {
        name: "sort_keys",
        n,
        times_ms: times,
        work: n as f64,
        unit: Unit::Keys,
        vs_ceiling: false,
        cub_name: Some("sort_keys"),
        note: "sort_perm, u32 keys".into(),
    });

    // Key/value pairs: the gather of the values by the permutation, and both together.
    let vals_host: Vec<u32> = random(n, a.seed ^ 0x5151, |x| (x >> 32) as u32);
    let vals = dev.backend().upload(HostCol::U32(vals_host.clone())).map_err(be)?;
    let gather = Kernel::Gather { shift: 0 };
    let (outs, times) = measure(&mut dev, rep, "gather", &progress, |b| {
        launch(b, &gather, &[&perm, &vals])
    })?;
    let gathered = take1(outs, "Gather").map_err(be)?;
    // The values in key order (the permutation was checked above).
    let mut sorted_vals = Vec::new();
    if check {
        let p = download_u32(&mut dev, &perm)?;
        let got = download_u32(&mut dev, &gathered)?;
        sorted_vals = p.iter().map(|&i| vals_host[i as usize]).collect();
        anyhow::ensure!(got == sorted_vals, "gather: wrong values");
    }
    free_all(&mut dev, vec![gathered, perm]);
    rows.push(Row {
        name: "gather",
        n,
        times_ms: times,
        work: 12.0 * n as f64,
        unit: Unit::Bytes,
        vs_ceiling: true,
        cub_name: None,
        note: "u32 by a u32 permutation".into(),
    });
    let (outs, times) = measure(&mut dev, rep, "sort_pairs", &progress, |b| {
        let perm = take1(launch(b, &sort_perm_kernel(), &[&keys])?, "SortPerm")?;
        let out = launch(b, &gather, &[&perm, &vals]);
        b.free(perm);
        out
    })?;
    if check {
        anyhow::ensure!(outs.len() == 1, "sort_pairs: Gather returned {} buffers", outs.len());
        let got = download_u32(&mut dev, &outs[0])?;
        anyhow::ensure!(got == sorted_vals, "sort_pairs: the values are not in stable key order");
    }
    drop(sorted_vals);
    free_all(&mut dev, outs);
    dev.backend().free(vals);
    rows.push(Row {
        name: "sort_pairs",
        n,
        times_ms: times,
        work: n as f64,
        unit: Unit::Pairs,
        vs_ceiling: false,
        cub_name: Some("sort_pairs"),
        note: "sort_perm + gather, u32/u32".into(),
    });

    // Exclusive scan of u64 counts in 0..=3.
    let counts_host: Vec<u64> = random(n, a.seed ^ 0x5ca7, |x| x & 3);
    let counts = dev.backend().upload(HostCol::U64(counts_host.clone())).map_err(be)?;
    let (outs, times) = measure(&mut dev, rep, "scan", &progress, |b| {
        launch(b, &Kernel::ExclusiveScan, &[&counts])
    })?;
    if check {
        anyhow::ensure!(outs.len() == 2, "scan: ExclusiveScan returned {} buffers", outs.len());
        let offsets = download_u64(&mut dev, &outs[0])?;
        let total = download_u64(&mut dev, &outs[1])?;
        let mut sum = 0u64;
        for (i, (&o, &c)) in offsets.iter().zip(&counts_host).enumerate() {
            anyhow::ensure!(o == sum, "scan: offset {i} is {o}, expected {sum}");
            sum += c;
        }
        anyhow::ensure!(total == [sum], "scan: total {total:?}, expected {sum}");
    }
    free_all(&mut dev, outs);
    dev.backend().free(counts);
    rows.push(Row {
        name: "scan",
        n,
        times_ms: times,
        work: 16.0 * n as f64,
        unit: Unit::Bytes,
        vs_ceiling: true,
        cub_name: Some("scan_u64"),
        note: "exclusive_scan, u64".into(),
    });

    // Compaction of the keys by 50% flags.
    let flags_host: Vec<u8> = random(n, a.seed ^ 0xf1a9, |x| (x >> 40) as u8 & 1);
    let selected = flags_host.iter().filter(|&&f| f != 0).count();
    let flags = dev.backend().upload(HostCol::U8(flags_host.clone())).map_err(be)?;
    let (outs, times) = measure(&mut dev, rep, "compact", &progress, |b| {
        launch(b, &Kernel::Compact, &[&flags, &keys])
    })?;
    if check {
        let got = download_u32(&mut dev, &outs[0])?;
        let want: Vec<u32> = keys_host
            .iter()
            .zip(&flags_host)
            .filter(|(_, &f)| f != 0)
            .map(|(&k, _)| k)
            .collect();
        anyhow::ensure!(got == want, "compact: wrong rows");
    }
    free_all(&mut dev, outs);
    dev.backend().free(flags);
    rows.push(Row {
        name: "compact",
        n,
        times_ms: times,
        work: (n + 4 * n + 4 * selected) as f64,
        unit: Unit::Bytes,
        vs_ceiling: true,
        cub_name: Some("select_flagged"),
        note: format!("compact, u32, {selected} kept"),
    });

    // Uploads and downloads of the keys (on the GPU with and without pinned staging; the
    // CPU backend has no transfers to measure).
    let modes: Vec<(bool, &'static str, &'static str)> = match &dev {
        Dev::Gpu(g) if g.pinned_staging() => vec![
            (true, "upload", "download"),
            (false, "upload_pageable", "download_pageable"),
        ],
        Dev::Gpu(_) => vec![(false, "upload", "download")],
        Dev::Cpu(_) => Vec::new(),
    };
    for (pinned, up_name, down_name) in modes {
        if let Dev::Gpu(g) = &mut dev {
            g.set_pinned_staging(pinned);
        }
        let mut up_times = Vec::new();
        let mut down_times = Vec::new();
        for r in 0..=rep {
            progress.set(format!("{up_name} and {down_name}: run {r} of {rep}"));
            let col = HostCol::U32(keys_host.clone());
            let (buf, ms) = dev.time(|b| b.upload(col)).map_err(be)?;
            let (col, dms) = dev.time(|b| b.download(&buf)).map_err(be)?;
            dev.backend().free(buf);
            if check && r == 0 {
                anyhow::ensure!(
                    col == HostCol::U32(keys_host.clone()),
                    "{up_name}/{down_name}: data differs"
                );
            }
            if r > 0 {
                up_times.push(ms);
                down_times.push(dms);
            }
        }
        for (nm, times) in [(up_name, up_times), (down_name, down_times)] {
            rows.push(Row {
                name: nm,
                n,
                times_ms: times,
                work: 4.0 * n as f64,
                unit: Unit::Bytes,
                vs_ceiling: false,
                cub_name: None,
                note: if pinned {
                    "u32, pinned staging"
                } else {
                    "u32, plain copy"
                }
                .into(),
            });
        }
    }
    if let Dev::Gpu(g) = &mut dev {
        g.set_pinned_staging(true);
    }
    dev.backend().free(keys);
    drop(keys_host);

    // Sort-merge join of two sorted relations with keys in 0..jn: about one match per key.
    progress.set("generating the join's relations");
    let mut lk_host: Vec<u32> = random(jn, a.seed ^ 0x1ef7, |x| (x % jn as u64) as u32);
    let mut rk_host: Vec<u32> = random(jn, a.seed ^ 0x1e57, |x| (x % jn as u64) as u32);
    lk_host.sort_unstable();
    rk_host.sort_unstable();
    let lk = dev.backend().upload(HostCol::U32(lk_host.clone())).map_err(be)?;
    let rk = dev.backend().upload(HostCol::U32(rk_host.clone())).map_err(be)?;
    let (outs, times) = measure(&mut dev, rep, "join", &progress, |b| {
        let counts = take1(launch(b, &Kernel::JoinCount { nkeys: 1 }, &[&lk, &rk])?, "JoinCount")?;
        let scanned = launch(b, &Kernel::ExclusiveScan, &[&counts]);
        b.free(counts);
        let scanned = scanned?;
        if scanned.len() != 2 {
            let n = scanned.len();
            scanned.into_iter().for_each(|x| b.free(x));
            return Err(BackendError(format!("ExclusiveScan returned {n} buffers")));
        }
        let out = launch(
            b,
            &Kernel::JoinWrite { nkeys: 1 },
            &[&lk, &rk, &scanned[0], &scanned[1]],
        );
        scanned.into_iter().for_each(|x| b.free(x));
        out
    })?;
    anyhow::ensure!(outs.len() == 2, "join: JoinWrite returned {} buffers", outs.len());
    let pairs = outs[0].len;
    if check {
        let (mut i, mut j, mut want) = (0usize, 0usize, 0usize);
        while i < jn && j < jn {
            match lk_host[i].cmp(&rk_host[j]) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    let k = lk_host[i];
                    let i0 = i;
                    let j0 = j;
                    while i < jn && lk_host[i] == k {
                        i += 1;
                    }
                    while j < jn && rk_host[j] == k {
                        j += 1;
                    }
                    want += (i - i0) * (j - j0);
                }
            }
        }
        anyhow::ensure!(pairs == want, "join: {pairs} pairs, expected {want}");
        let li = download_u32(&mut dev, &outs[0])?;
        let ri = download_u32(&mut dev, &outs[1])?;
        for t in 0..pairs {
            let (l, r) = (li[t] as usize, ri[t] as usize);
            anyhow::ensure!(
                l < jn && r < jn && lk_host[l] == rk_host[r],
                "join: pair {t} ({l}, {r}) does not match"
            );
            anyhow::ensure!(
                t == 0 || (li[t - 1], ri[t - 1]) < (li[t], ri[t]),
                "join: pair {t} is out of order"
            );
        }
    }
    free_all(&mut dev, outs);
    free_all(&mut dev, vec![lk, rk]);
    rows.push(Row {
        name: "join",
        n: jn,
        times_ms: times,
        work: 2.0 * jn as f64,
        unit: Unit::Tuples,
        vs_ceiling: false,
        cub_name: None,
        note: format!("2 x {jn} rows in, {} out", plural(pairs as u64, "pair")),
    });

    progress.finish();
    let ceiling = rows.iter().find(|r| r.name == "copy").map_or(f64::NAN, Row::rate);
    let table = format_table(&name, &rows, ceiling, &cub);
    fox_cli::stdout::print(&table)?;
    if let Some(p) = &c.json {
        let json = to_json(&name, a, &rows, ceiling, &cub);
        fox_runtime::write_bytes(p, json.as_bytes())?;
    }
    Ok(())
}

/// CUB's times: (name, n, ms).
fn read_cub(path: &Path) -> anyhow::Result<Vec<(String, usize, f64)>> {
    let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (k, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.is_empty() {
            continue;
        }
        let bad = || {
            anyhow::anyhow!(
                "{}:{}: expected `cub <name> <n> <ms>`, got {line:?}",
                path.display(),
                k + 1
            )
        };
        if f.len() != 4 || f[0] != "cub" {
            return Err(bad());
        }
        let n: usize = f[2].parse().map_err(|_| bad())?;
        let ms: f64 = f[3].parse().map_err(|_| bad())?;
        if !ms.is_finite() || ms <= 0.0 {
            return Err(bad());
        }
        out.push((f[1].to_string(), n, ms));
    }
    Ok(out)
}

/// CUB's time for a row, when the reference ran the same size.
fn cub_ms(row: &Row, cub: &[(String, usize, f64)]) -> Option<f64> {
    let name = row.cub_name?;
    cub.iter().find(|c| c.0 == name && c.1 == row.n).map(|c| c.2)
}

fn format_table(device: &str, rows: &[Row], ceiling: f64, cub: &[(String, usize, f64)]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "foxbench kernels on {device}");
    let _ = writeln!(
        out,
        "copy ceiling {}/s (device-to-device copy, bytes read + written)",
        human_bytes(if ceiling.is_finite() { ceiling as u64 } else { 0 })
    );
    let header = [
        "primitive",
        "n",
        "median ms",
        "throughput",
        "% copy bw",
        "CUB ms",
        "% of CUB speed",
        "notes",
    ];
    let mut cells: Vec<[String; 8]> = Vec::new();
    for r in rows {
        let frac = if r.vs_ceiling && r.unit == Unit::Bytes {
            format!("{:.1}%", 100.0 * r.rate() / ceiling)
        } else {
            "-".into()
        };
        let (cub_t, cub_r) = match cub_ms(r, cub) {
            Some(c) => (format!("{c:.3}"), format!("{:.1}%", 100.0 * c / r.median())),
            None => ("-".into(), "-".into()),
        };
        cells.push([
            r.name.to_string(),
            format!("2^{}", r.n.trailing_zeros()),
            format!("{:.3}", r.median()),
            r.rate_text(),
            frac,
            cub_t,
            cub_r,
            r.note.clone(),
        ]);
    }
    let mut w = header.map(|h| h.len());
    for c in &cells {
        for (k, s) in c.iter().enumerate() {
            w[k] = w[k].max(s.chars().count());
        }
    }
    let line = |c: &[String; 8]| {
        let mut s = format!("{:<w0$}", c[0], w0 = w[0]);
        for k in 1..7 {
            s.push_str(&format!("  {:>wk$}", c[k], wk = w[k]));
        }
        s.push_str(&format!("  {}", c[7]));
        s.trim_end().to_string()
    };
    let _ = writeln!(out, "{}", line(&header.map(String::from)));
    for c in &cells {
        let _ = writeln!(out, "{}", line(c));
    }
    if !cub.is_empty() {
        let missing: Vec<&str> = rows
            .iter()
            .filter(|r| r.cub_name.is_some() && cub_ms(r, cub).is_none())
            .map(|r| r.name)
            .collect();
        if !missing.is_empty() {
            let _ = writeln!(
                out,
                "no CUB time of the same size for: {} (run the reference with the same --log2n)",
                missing.join(", ")
            );
        }
    }
    out
}

fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn json_num(x: f64) -> String {
    if x.is_finite() {
        format!("{x}")
    } else {
        "null".into()
    }
}

fn to_json(device: &str, a: &KernelsArgs, rows: &[Row], ceiling: f64, cub: &[(String, usize, f64)]) -> String {
    let mut o = String::from("{\n");
    let _ = writeln!(o, "  \"device\": {},", json_str(device));
    let _ = writeln!(
        o,
        "  \"log2n\": {},\n  \"join_log2n\": {},\n  \"repeat\": {},\n  \"seed\": {},",
        a.log2n, a.join_log2n, a.repeat, a.seed
    );
    let _ = writeln!(o, "  \"copy_ceiling_bytes_per_s\": {},", json_num(ceiling));
    o.push_str("  \"rows\": [\n");
    for (k, r) in rows.iter().enumerate() {
        let unit = match r.unit {
            Unit::Keys => "keys/s",
            Unit::Pairs => "pairs/s",
            Unit::Tuples => "tuples/s",
            Unit::Bytes => "bytes/s",
        };
        let times: Vec<String> = r.times_ms.iter().map(|t| json_num(*t)).collect();
        let frac = if r.vs_ceiling && r.unit == Unit::Bytes {
            json_num(r.rate() / ceiling)
        } else {
            "null".into()
        };
        let cub_t = cub_ms(r, cub);
        let _ = write!(
            o,
            "    {{\"name\": {}, \"n\": {}, \"median_ms\": {}, \"times_ms\": [{}], \"throughput\": {}, \"unit\": {}, \
             \"ceiling_fraction\": {}, \"cub\": {}, \"cub_ms\": {}, \"cub_speed_fraction\": {}, \"note\": {}}}",
            json_str(r.name),
            r.n,
            json_num(r.median()),
            times.join(", "),
            json_num(r.rate()),
            json_str(unit),
            frac,
            r.cub_name.map_or("null".into(), json_str),
            cub_t.map_or("null".into(), json_num),
            cub_t.map_or("null".into(), |c| json_num(c / r.median())),
            json_str(&r.note)
        );
        o.push_str(if k + 1 < rows.len() { ",\n" } else { "\n" });
    }
    o.push_str("  ]\n}\n");
    o
}

fn tpch(a: &TpchArgs, progress: bool) -> anyhow::Result<()> {
    use fox_cli::tpch as t;
    let queries: Vec<u32> = if a.queries.is_empty() {
        (1..=22).collect()
    } else {
        a.queries.clone()
    };
    if a.check_sf1 && a.sf != Some(1.0) {
        anyhow::bail!("--check-sf1 compares with the answers at scale factor 1: use --sf 1");
    }
    // The largest count's devices are opened first: `all` becomes a number, and a count
    // beyond the machine's stops before the data is generated.
    let (mut backends, counts) = open_device_counts(a.backend, &a.devices)?;
    let most = backends.len();
    let mut programs = t::compile_programs(&a.dir, &queries)?;
    for (_, program, _) in &mut programs {
        program.join = a.join.choice();
    }
    let (source, scale) = match (&a.data, a.sf) {
        (Some(d), _) => (fox_runtime::DataSource::Files(d.clone()), d.display().to_string()),
        (None, Some(sf)) => (fox_runtime::DataSource::Tpch(sf), format!("{sf}")),
        (None, None) => anyhow::bail!("give --sf SF or --data DIR"),
    };
    // The queries are planned once the data is loaded, with its statistics: for one
    // device, and with --devices for that many too.
    let every: Vec<usize> = std::iter::once(1).chain(counts.iter().copied()).collect();
    let db = t::load_programs_for(&source, &mut programs, &every, progress)?;
    let stats = fox_runtime::stats::of_database(&db);
    let plans_on_devices = counts
        .iter()
        .map(|&n| Ok((n, t::plan_programs_for(&mut programs, &stats, n)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let plans = t::plan_programs(programs, &stats)?;
    let rows: usize = db.tables().map(|t| t.rows).sum();
    let name = backends[0].name();
    eprintln!(
        "foxbench: TPC-H {} ({} in {}) loaded in {:.1} s{}; {}, {} per query{}",
        match &a.data {
            Some(d) => format!("from {}", d.display()),
            None => format!("SF {scale}"),
        },
        plural(rows as u64, "row"),
        plural(db.tables().count() as u64, "table"),
        db.load_time.as_secs_f64(),
        fox_runtime::alloc::peak_resident_words(),
        name,
        plural(u64::from(a.repeat), "hot run"),
        match counts.iter().map(|n| n.to_string()).collect::<Vec<_>>()[..] {
            [] => String::new(),
            ref ns => format!(", on 1 device and on {}", ns.join(" and on ")),
        }
    );
    let db = std::sync::Arc::new(db);
    // Under a limit, the bus's bandwidth, for the floor of the bytes the runs move.
    let bandwidth = match a.memory_limit {
        Some(_) => {
            let staged = t::upload_bandwidth(backends[0].as_mut()).map_err(|e| anyhow::anyhow!("{e}"))?;
            let locked = t::locked_bandwidth(backends[0].as_mut()).map_err(|e| anyhow::anyhow!("{e}"))?;
            Some((staged, locked))
        }
        None => None,
    };
    let spinner = Spinner::new(progress, "running the queries");
    let mut failures = Vec::new();
    // The queries on one device, under `limit`, each run's line said with `tag`.
    let mut on_one = |limit: Option<u64>, profile: bool, tag: &str| {
        t::run_queries_with(
            backends[0].as_mut(),
            db.clone(),
            &plans,
            a.repeat,
            profile,
            limit,
            &mut |q, run| {
                spinner.set(match run {
                    t::Run::First => format!("Q{q}{tag}: first run"),
                    t::Run::Hot(k) => format!("Q{q}{tag}: hot run {k} of {}", a.repeat),
                    t::Run::Profile => format!("Q{q}{tag}: run with per-kernel timing"),
                })
            },
            |r| {
                spinner.suspend(|| {
                    eprintln!(
                        "  Q{:<2} {:>9.2} ms median{tag}, first {:.2} ms, {}",
                        r.query,
                        r.median().as_secs_f64() * 1e3,
                        r.first.as_secs_f64() * 1e3,
                        plural(r.output.len() as u64, "row")
                    )
                });
            },
        )
    };
    let unlimited = match a.also_unlimited {
        true => Some(on_one(None, false, " without the limit")?),
        false => None,
    };
    let runs = on_one(a.memory_limit, a.profile.is_some(), "")?;
    // Each count runs over its own devices (a communicator spans exactly the devices of
    // a run): the widest set opened above, the others opened for their runs and closed
    // after them.
    let mut runs_on_devices: Vec<(usize, Vec<t::QueryRun>)> = Vec::new();
    for (devices, plans) in &plans_on_devices {
        let devices = *devices;
        let mut opened;
        let set = if devices == most {
            &mut backends
        } else {
            opened = open_devices(a.backend, fox_cli::Devices::Count(devices))?;
            &mut opened
        };
        let many = t::run_queries_on_devices(
            set,
            db.clone(),
            plans,
            a.repeat,
            a.profile.is_some(),
            a.memory_limit,
            &mut |q, run| {
                spinner.set(match run {
                    t::Run::Hot(k) => format!("Q{q} on {devices} devices: hot run {k} of {}", a.repeat),
                    t::Run::Profile => format!("Q{q} on {devices} devices: run with per-kernel timing"),
                    t::Run::First => format!("Q{q} on {devices} devices: first run"),
                })
            },
            |r| {
                spinner.suspend(|| {
                    eprintln!(
                        "  Q{:<2} {:>9.2} ms median on {devices} devices, first {:.2} ms, {}; {}",
                        r.query,
                        r.median().as_secs_f64() * 1e3,
                        r.first.as_secs_f64() * 1e3,
                        plural(r.output.len() as u64, "row"),
                        t::resident_words(&r.resident)
                    )
                });
            },
        )?;
        runs_on_devices.push((devices, many));
    }
    spinner.finish();
    for r in &runs {
        let ours = t::result_rows(&r.output);
        let verdict = if a.check_sf1 {
            Some(t::compare_sf1(r.query, &ours))
        } else if let Some(dir) = &a.check {
            let p = dir.join(format!("q{:02}.csv", r.query));
            let text = std::fs::read_to_string(&p).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?;
            let want: Vec<Vec<String>> = t::parse_csv(&text).into_iter().skip(1).collect();
            Some(t::compare_rows(&ours, &want, 0.01))
        } else {
            None
        };
        if let Some(Err(e)) = verdict {
            failures.push(format!("Q{}: {e}", r.query));
        }
    }
    fox_cli::stdout::print(&t::table(&runs))?;
    for (devices, many) in &runs_on_devices {
        fox_cli::stdout::print(&format!("on {devices} devices:\n{}\n", t::table(many)))?;
    }
    if !runs_on_devices.is_empty() {
        let many: Vec<(usize, &[t::QueryRun])> = runs_on_devices.iter().map(|(n, r)| (*n, &r[..])).collect();
        fox_cli::stdout::print(&t::devices_table(&runs, &many))?;
    }
    if a.memory_limit.is_some() {
        fox_cli::stdout::print(&t::tier_lines(&runs))?;
    }
    if let Some((staged, locked)) = bandwidth {
        fox_cli::stdout::print(&t::bus_floor(&runs, staged, locked))?;
    }
    if let Some(whole) = &unlimited {
        fox_cli::stdout::print(&t::limit_table(whole, &runs))?;
    }
    // Every file of the run (results, profile, measurements) is written, or none is.
    let mut files = fox_runtime::OutputFiles::new();
    let created = a.out.as_ref().filter(|dir| !dir.exists());
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create the output directory `{}`: {e}", dir.display()))?;
        for r in &runs {
            files.add(dir.join(format!("q{:02}.csv", r.query)), |w| {
                fox_runtime::write_csv_to(&r.output, w)
            });
        }
    }
    if let Some(p) = &a.profile {
        let text = t::profile_text(&runs, &runs_on_devices);
        files.add(p, move |w| w.write_all(text.as_bytes()));
    }
    if let Some(p) = &a.json {
        let json = t::json(&runs, &scale, &name);
        files.add(p, move |w| w.write_all(json.as_bytes()));
    }
    if let Err(e) = files.commit() {
        if let Some(dir) = created {
            let _ = std::fs::remove_dir(dir);
        }
        return Err(e.into());
    }
    if let Some(whole) = &unlimited {
        let differ = t::differences(whole, &runs);
        if !differ.is_empty() {
            anyhow::bail!(
                "answers under the memory limit differ from those without it: {}",
                differ.join(", ")
            );
        }
    }
    for (devices, many) in &runs_on_devices {
        let differ = t::differences(&runs, many);
        if !differ.is_empty() {
            anyhow::bail!(
                "the answers on 1 device and on {devices} devices differ: {}",
                differ.join(", ")
            );
        }
    }
    if a.check.is_some() || a.check_sf1 {
        if failures.is_empty() {
            fox_cli::stdout::print(&format!("all {} results match the answers\n", runs.len()))?;
        } else {
            let mut text = String::new();
            for f in &failures {
                text.push_str(&format!("MISMATCH {f}\n"));
            }
            fox_cli::stdout::print(&text)?;
            anyhow::bail!("{} of {} results differ from the answers", failures.len(), runs.len());
        }
    }
    Ok(())
}

fn tpch_gen(a: &TpchGenArgs, progress: bool) -> anyhow::Result<()> {
    let bars = fox_cli::Bars::enabled(progress);
    let current = std::sync::Mutex::new(String::new());
    let t0 = Instant::now();
    fox_runtime::tpch::write_tbl(&a.out, a.sf, &|table, rows| {
        use fox_runtime::LoadProgress;
        if let Ok(mut c) = current.lock() {
            if *c != table {
                if !c.is_empty() {
                    bars.finish();
                }
                *c = table.to_string();
                bars.start(table, fox_runtime::tpch::approx_rows(table, a.sf));
            }
        }
        bars.advance(rows);
    })
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    fox_runtime::LoadProgress::finish(&bars);
    eprintln!(
        "foxbench: wrote TPC-H SF {} to {} in {:.1} s",
        a.sf,
        a.out.display(),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

/// One system of `foxbench clique`.
struct CliqueRow {
    system: &'static str,
    backend: String,
    /// The devices it ran over (1, or `--devices`).
    devices: usize,
    result: Result<CliqueResult, String>,
}

/// What `foxbench clique` measured of one system (times in ms).
struct CliqueResult {
    count: u64,
    /// The median of the timed runs.
    median: f64,
    /// One more run, with each kernel timed (the CPU LFTJ: its median run), split into
    /// building the tries, joining and the rest: `build + join + other = timed`.
    timed: f64,
    build: f64,
    join: f64,
    /// The peak memory of the runs, in bytes.
    peak: usize,
    /// The rounds of multi-round expansions.
    rounds: u64,
    /// The host tier's peak in bytes (runs under `--memory-limit`; 0 for the CPU LFTJ).
    host_peak: u64,
}

/// The classic iterator LFTJ of `fox_cpu::lftj` on all cores: per run, the trie of the
/// edges with x < y (sorted, deduplicated) is built, then the k-cliques counted. One
/// untimed run, then `repeat` timed ones; the median of the totals, and the build and
/// join times of the median run (the upper middle one of an even count).
fn cpu_lftj<T: fox_cpu::lftj::Key>(
    x: &[T],
    y: &[T],
    k: u32,
    repeat: u32,
    progress: &Spinner,
) -> Result<CliqueResult, String> {
    use fox_cpu::lftj;
    let once = || -> Result<(u64, f64, f64, usize), String> {
        let t0 = Instant::now();
        let trie = lftj::ascending_edge_trie(x, y)?;
        let build = t0.elapsed().as_secs_f64() * 1e3;
        let t1 = Instant::now();
        let n = lftj::count_cliques(&trie, k as usize)?;
        let join = t1.elapsed().as_secs_f64() * 1e3;
        // The sorted pairs and the trie's levels live together while building.
        let peak = trie.bytes() + trie.len() * 2 * std::mem::size_of::<T>();
        Ok((n, build, join, peak))
    };
    progress.set("CPU LFTJ: warm-up run");
    let (n, _, _, peak) = once()?;
    let mut runs = Vec::new();
    for r in 0..repeat {
        progress.set(format!("CPU LFTJ: run {} of {repeat}", r + 1));
        let (m, b, j, _) = once()?;
        if m != n {
            return Err("the count changed between runs".into());
        }
        runs.push((b + j, b, j));
    }
    let totals: Vec<f64> = runs.iter().map(|r| r.0).collect();
    runs.sort_by(|p, q| p.0.total_cmp(&q.0));
    let (timed, build, join) = runs[runs.len() / 2];
    Ok(CliqueResult {
        count: n,
        median: median(&totals),
        timed,
        build,
        join,
        peak,
        rounds: 0,
        host_peak: 0,
    })
}

fn clique(a: &CliqueArgs, progress: bool) -> anyhow::Result<()> {
    use fox_runtime::{DataSource, Database, HostCol, Resident, RunOptions};
    let query = match a.k {
        3 => "queries/triangle_count.logic",
        4 => "queries/clique4_count.logic",
        _ => "queries/clique5_count.logic",
    };
    let path = Path::new(query);
    let options = fox_ra::PlanOptions {
        var_order: a.var_order.clone(),
        ..fox_ra::PlanOptions::default()
    };
    // The plans over `devices` devices: before loading without statistics (they say
    // which columns to load), after it with the graph's, as `foxrun` plans after loading
    // (an edge list sorted on its rows needs no sort, a distinct one no duplicate
    // removal).
    let plan_with = |options: &fox_ra::PlanOptions,
                     devices: usize,
                     stats: &fox_phys::Statistics|
     -> anyhow::Result<fox_kernel::KernelPlan> {
        let mut program = fox_cli::compile_program(&[path.to_path_buf()], false, "foxbench", options)?
            .ok_or_else(|| anyhow::anyhow!("{query} has errors"))?;
        program.devices = devices;
        program.kernel_plan(stats, &fox_kernel::LowerOptions::default())
    };
    let none = fox_phys::Statistics::none();
    let lftj = plan_with(&options, 1, &none)?;
    // The backends first: `auto` says which it took before the graph is generated.
    // The largest count's devices: `all` becomes a number, and a count beyond the
    // machine's stops before the graph is generated.
    let (mut held, device_counts) = open_device_counts(a.backend, &a.devices)?;
    let gpu = match a.backend {
        BackendChoice::Gpu => true,
        BackendChoice::Cpu => false,
        BackendChoice::Auto => held[0].name() != fox_cpu::CpuBackend::new().name(),
    };
    // With --devices, the LFTJ planned for each count too.
    let lftj_on_devices = device_counts
        .iter()
        .map(|&n| Ok((n, plan_with(&options, n, &none)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let spec = a
        .graph
        .clone()
        .with_symmetrize(a.symmetrize)
        .with_degree_order(a.degree_order);
    let mut plans = vec![&lftj];
    plans.extend(lftj_on_devices.iter().map(|(_, p)| p));
    let db = Database::load(
        &DataSource::Graph(spec.clone()),
        &plans,
        &fox_cli::Bars::enabled(progress),
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let table = db
        .tables()
        .find(|t| t.input.name == "edge")
        .ok_or_else(|| anyhow::anyhow!("{query} reads no relation `edge`"))?;
    // Every plan made again with the statistics of the graph.
    let stats = fox_runtime::stats::of_database(&db);
    let lftj = plan_with(&options, 1, &stats)?;
    let binary = plan_with(
        &fox_ra::PlanOptions {
            multiway: false,
            ..fox_ra::PlanOptions::default()
        },
        1,
        &stats,
    )?;
    let lftj_on_devices = device_counts
        .iter()
        .map(|&n| Ok((n, plan_with(&options, n, &stats)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    // The columns as plans read them (borrowed unless the database packed them).
    let widen = |c: usize| {
        Database::column(table, c)
            .map(|s| s.widen("the edges, widened"))
            .transpose()
            .map_err(|e| anyhow::anyhow!("{e}"))
    };
    let (xw, yw) = (widen(0)?, widen(1)?);
    let (x, y) = (xw.as_deref(), yw.as_deref());
    // The edges the query can use: x < y (each undirected edge once when symmetric).
    let edges = match (x, y) {
        (Some(HostCol::I32(x)), Some(HostCol::I32(y))) => x.iter().zip(y).filter(|(a, b)| a < b).count(),
        (Some(HostCol::I64(x)), Some(HostCol::I64(y))) => x.iter().zip(y).filter(|(a, b)| a < b).count(),
        _ => anyhow::bail!("{query}: `edge` must have two int32 or two int64 columns"),
    };
    let threads = fox_cpu::lftj::threads();
    eprintln!(
        "foxbench: graph {spec} ({}{} of edge, {edges} undirected edges) loaded in {:.1} s{}; {}-cliques with {query}",
        spec.vertex_labels()
            .map_or(String::new(), |n| format!("{n} vertex labels, ")),
        plural(table.rows as u64, "row"),
        db.load_time.as_secs_f64(),
        fox_runtime::alloc::peak_resident_words(),
        a.k
    );
    let progress = Spinner::new(progress, "running");
    // The classic CPU LFTJ first (it needs the columns, not the backends).
    let mut cpu_row = (!a.no_baselines).then(|| CliqueRow {
        system: "CPU LFTJ",
        backend: format!("iterator LFTJ (fox_cpu::lftj), {threads} threads"),
        devices: 1,
        result: match (x, y) {
            (Some(HostCol::I32(x)), Some(HostCol::I32(y))) => cpu_lftj(x, y, a.k, a.repeat, &progress),
            (Some(HostCol::I64(x)), Some(HostCol::I64(y))) => cpu_lftj(x, y, a.k, a.repeat, &progress),
            _ => Err("`edge` must have two int32 or two int64 columns".into()),
        },
    });
    let db = std::sync::Arc::new(db);
    // (system, on the GPU, devices, plan)
    let mut systems: Vec<(&'static str, bool, usize, &fox_kernel::KernelPlan)> = vec![("LFTJ", gpu, 1, &lftj)];
    for (n, plan) in &lftj_on_devices {
        systems.push(("LFTJ", gpu, *n, plan));
    }
    if !a.no_baselines {
        if gpu && a.cpu_kernels {
            systems.push(("LFTJ", false, 1, &lftj));
        }
        systems.push(("binary joins", gpu, 1, &binary));
    }
    let mut rows = Vec::new();
    let mut profile = String::new();
    for (k, (system, on_gpu, n, plan)) in systems.into_iter().enumerate() {
        // The LFTJ on one device and over the largest count run on the devices opened
        // first; a smaller count over devices opened for it (a communicator spans exactly
        // the devices of a run), the other systems on a backend of their own.
        let mut own = Vec::new();
        let backends: &mut [Box<dyn Backend + Send>] = if n > 1 && n == held.len() {
            &mut held[..]
        } else if n > 1 {
            own = open_devices(a.backend, fox_cli::Devices::Count(n))?;
            &mut own[..]
        } else if k == 0 {
            &mut held[..1]
        } else {
            own.push(Dev::open(if on_gpu { BackendChoice::Gpu } else { BackendChoice::Cpu })?.into_backend());
            &mut own[..]
        };
        let name = match on_gpu {
            false if system == "LFTJ" => format!("cpu backend, breadth-first kernels, {threads} threads"),
            false => format!("cpu backend, {threads} threads"),
            true => backends[0].name(),
        };
        let name = match (n, on_gpu) {
            (1, _) => name,
            (n, true) => format!("{n} devices, {name}"),
            (n, false) => format!("{n} cpu devices (simulated), breadth-first"),
        };

        let mut residents: Vec<Resident> = backends.iter().map(|_| Resident::default()).collect();
        let opts = RunOptions {
            database: Some(db.clone()),
            memory_limit: a.memory_limit,
            ..Default::default()
        };
        let result = (|| -> Result<CliqueResult, String> {
            let count = |r: &fox_runtime::RunResult| -> u64 {
                r.outputs
                    .first()
                    .filter(|t| !t.is_empty())
                    .map(|t| match t.row(0).first() {
                        Some(fox_sema::core::Value::Int64(n)) => *n as u64,
                        _ => 0,
                    })
                    .unwrap_or(0)
            };
            progress.set(format!("{system} on the {name}: warm-up run"));
            let first = run_on(backends, plan, &opts, &mut residents).map_err(|e| e.to_string())?;
            let n = count(&first);
            let mut times = Vec::new();
            let mut peak = 0;
            let mut host_peak = 0;
            for k in 0..a.repeat {
                progress.set(format!("{system} on the {name}: run {} of {}", k + 1, a.repeat));
                backends.iter_mut().for_each(|b| b.reset_peak());
                let t = Instant::now();
                let r = run_on(backends, plan, &opts, &mut residents).map_err(|e| e.to_string())?;
                times.push(t.elapsed().as_secs_f64() * 1e3);
                peak = peak.max(r.stats.peak_bytes);
                host_peak = host_peak.max(r.stats.tier.host_peak_bytes);
                if count(&r) != n {
                    return Err("the count changed between runs".into());
                }
            }
            // One more run with per-kernel timing splits building the tries from joining.
            progress.set(format!("{system} on the {name}: run with per-kernel timing"));
            let timed = RunOptions {
                timing: true,
                ..opts.clone()
            };
            let t = Instant::now();
            let r = run_on(backends, plan, &timed, &mut residents).map_err(|e| e.to_string())?;
            let timed_ms = t.elapsed().as_secs_f64() * 1e3;
            profile.push_str(&format!(
                "== {system} on {name}\n{}\n",
                fox_runtime::format_stats(&r.stats)
            ));
            let last_build = plan
                .blocks
                .iter()
                .flat_map(|b| {
                    b.instrs
                        .iter()
                        .enumerate()
                        .map(move |(i, ins)| (b.label.clone(), i, ins))
                })
                .filter(|(_, _, ins)| {
                    matches!(
                        ins,
                        fox_kernel::Instr::Launch {
                            kernel: fox_kernel::Kernel::TrieBuild { .. },
                            ..
                        }
                    )
                })
                .map(|(label, i, _)| (label, i))
                .next_back();
            let (mut build, mut total) = (0.0, 0.0);
            for s in &r.stats.instrs {
                let ms = s.total.as_secs_f64() * 1e3;
                total += ms;
                if let Some((label, i)) = &last_build {
                    let at = s
                        .label
                        .rsplit_once('.')
                        .and_then(|(l, k)| Some((l, k.parse::<usize>().ok()?)));
                    if at.is_some_and(|(l, k)| l == label && k <= *i) {
                        build += ms;
                    }
                }
            }
            Ok(CliqueResult {
                count: n,
                median: median(&times),
                timed: timed_ms.max(total),
                build,
                join: total - build,
                peak,
                rounds: r.stats.rounds,
                host_peak,
            })
        })();
        for (r, b) in residents.into_iter().zip(backends.iter_mut()) {
            r.release(b.as_mut());
        }
        rows.push(CliqueRow {
            system,
            backend: name,
            devices: n,
            result,
        });
        // The CPU LFTJ right after the measured LFTJ.
        if rows.len() == 1 {
            rows.extend(cpu_row.take());
        }
    }
    progress.finish();
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{:<13} {:<44} {:>14} {:>11} {:>10} {:>10} {:>10} {:>10} {:>12} {:>9} {:>7}",
        "system",
        "backend",
        "cliques",
        "median ms",
        "timed ms",
        "build ms",
        "join ms",
        "other ms",
        "Medges/s",
        "peak",
        "rounds"
    );
    let mut counts = Vec::new();
    for r in &rows {
        match &r.result {
            Ok(c) => {
                counts.push(c.count);
                let _ = writeln!(
                    text,
                    "{:<13} {:<44} {:>14} {:>11.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>12.1} {:>9} {:>7}",
                    r.system,
                    r.backend,
                    c.count,
                    c.median,
                    c.timed,
                    c.build,
                    c.join,
                    c.timed - c.build - c.join,
                    edges as f64 / (c.median * 1e-3) / 1e6,
                    human_bytes(c.peak as u64),
                    c.rounds
                );
            }
            Err(e) => {
                let _ = writeln!(text, "{:<13} {:<44} error: {e}", r.system, r.backend);
            }
        }
    }
    let _ = writeln!(
        text,
        "edges/s counts undirected edges ({edges}) in the median time; build + join + other = timed, one more run with \
         each kernel timed (CPU LFTJ: its median run; its peak is the sorted pairs and the trie)"
    );
    if let (Some(ms0), true) = (
        rows.first().and_then(|r| r.result.as_ref().ok()).map(|c| c.median),
        rows.len() > 1,
    ) {
        for r in &rows[1..] {
            if let Ok(c) = &r.result {
                let _ = writeln!(
                    text,
                    "time of {} on {}: {:.2}x the first row's",
                    r.system,
                    r.backend,
                    c.median / ms0
                );
            }
        }
    }
    // The LFTJ on one device (the first row) against the LFTJ on each --devices count.
    let one_and_many: Vec<(&CliqueResult, &CliqueResult, usize)> = match rows.first().map(|r| &r.result) {
        Some(Ok(one)) => rows
            .iter()
            .filter(|r| r.devices > 1)
            .filter_map(|r| r.result.as_ref().ok().map(|many| (one, many, r.devices)))
            .collect(),
        _ => Vec::new(),
    };
    for (one, many, n) in &one_and_many {
        let _ = writeln!(
            text,
            "speed-up of the LFTJ on {n} devices: {:.2}x (the median on 1 device over the median on {n}); \
             counts {}",
            one.median / many.median,
            if one.count == many.count { "the same" } else { "DIFFER" }
        );
    }
    if a.memory_limit.is_some() {
        for r in &rows {
            if let Ok(c) = &r.result {
                let _ = writeln!(
                    text,
                    "{} on {}: device peak {}, host tier peak {}",
                    r.system,
                    r.backend,
                    human_bytes(c.peak as u64),
                    human_bytes(c.host_peak)
                );
            }
        }
    }
    fox_cli::stdout::print(&text)?;
    if let Some(p) = &a.profile {
        fox_runtime::write_bytes(p, profile.as_bytes())?;
    }
    if let Some((one, many, n)) = one_and_many.iter().find(|(one, many, _)| one.count != many.count) {
        anyhow::bail!(
            "the answers on 1 device and on {n} devices differ: {} cliques against {}",
            one.count,
            many.count
        );
    }
    if counts.windows(2).any(|w| w[0] != w[1]) {
        anyhow::bail!("the systems disagree on the count: {counts:?}");
    }
    Ok(())
}

/// The program `foxbench joins` runs: the count of the join of `r` and `s` on `keys` int
/// columns.
fn joins_program(keys: u32) -> String {
    let (cols, decl, vars) = if keys == 1 {
        ("k", "int(k)", "k")
    } else {
        ("k, l", "int(k), int(l)", "k, l")
    };
    format!(
        "r(a, {cols}) -> int(a), {decl}.\ns(b, {cols}) -> int(b), {decl}.\n.input r.\n.input s.\n\
         n[] = c <- agg<<c = count()>> r(_, {vars}), s(_, {vars}).\n.output n.\n"
    )
}

/// The key of row `i` of `r` (`nr` rows) over `s`'s `ns` distinct keys `0..ns`: in `s` for
/// `match_rate` percent of the rows, Zipf-distributed with exponent `zipf` (small keys
/// most often), else a key `s` lacks.
fn r_key(x: u64, ns: u64, match_rate: u32, zipf: f64) -> u64 {
    let u = (x >> 11) as f64 / (1u64 << 53) as f64;
    if (x % 100) as u32 >= match_rate || ns == 0 {
        return ns + (x >> 7) % (ns + 1);
    }
    let d = ns as f64;
    let rank = if zipf <= 0.0 {
        u * d
    } else if (zipf - 1.0).abs() < 1e-9 {
        d.powf(u) - 1.0
    } else {
        let e = 1.0 - zipf;
        ((d.powf(e) - 1.0) * u + 1.0).powf(1.0 / e) - 1.0
    };
    (rank as u64).min(ns - 1)
}

/// The name `--join` gives the algorithm of the first join of a physical plan.
fn join_algorithm(phys: &fox_phys::PhysPlan) -> &'static str {
    for b in &phys.ra.blocks {
        for st in &b.stmts {
            if let fox_ra::Stmt::Let {
                dst,
                op: fox_ra::Op::Join { .. },
                ..
            } = st
            {
                return match phys.node(*dst).algorithm {
                    fox_phys::Algorithm::Hash { .. } => "hash",
                    fox_phys::Algorithm::IndexNestedLoop { .. } => "inl",
                    fox_phys::Algorithm::NestedLoop => "nl",
                    fox_phys::Algorithm::Band(_) => "band",
                    _ => "merge",
                };
            }
        }
    }
    "none"
}

fn joins(a: &JoinsArgs, progress: bool) -> anyhow::Result<()> {
    use fox_cli::JoinArg;
    let mut dev = Dev::open(a.backend)?;
    let gpu = dev.is_gpu();
    let sizes: Vec<u32> = match (&a.sizes[..], gpu) {
        ([], true) => vec![20, 22, 24, 26],
        ([], false) => vec![12, 14, 16],
        (s, _) => s.to_vec(),
    };
    let algs: Vec<JoinArg> = if a.join.is_empty() {
        vec![JoinArg::Merge, JoinArg::Hash, JoinArg::Inl, JoinArg::Nl, JoinArg::Auto]
    } else {
        a.join.clone()
    };
    let dir = std::env::temp_dir().join(format!("foxbench-joins-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    let _cleanup = fox_runtime::tempfiles::register(&dir);
    let prog_path = dir.join("joins.logic");
    std::fs::write(&prog_path, joins_program(a.keys))?;
    let Some(mut program) = fox_cli::compile_program(&[prog_path], false, "foxbench", &fox_ra::PlanOptions::default())?
    else {
        anyhow::bail!("the join program does not compile");
    };
    let wanted = program.inputs()?;
    let name = |j: JoinArg| j.choice().name();
    let mut table = String::new();
    let _ = write!(
        table,
        "{:>10} {:>10} {:>4} {:>6} {:>5}",
        "rows r", "rows s", "keys", "match", "zipf"
    );
    for &j in &algs {
        let _ = write!(table, " {:>10}", format!("{} ms", name(j)));
    }
    let _ = writeln!(table, " {:>7} {:>11} {:>12}", "winner", "auto picked", "pairs");
    let spinner = Spinner::new(progress, "generating the relations");
    for &log2 in &sizes {
        let nr = 1u64 << log2;
        let ns = (nr >> a.ratio).max(1);
        spinner.set(format!("generating r ({nr} rows) and s ({ns} rows)"));
        let split = |k: u64| {
            if a.keys == 1 {
                format!("{k}")
            } else {
                format!("{},{}", k >> 6, k & 63)
            }
        };
        let seed = a.seed ^ u64::from(log2);
        let rkeys = random(nr as usize, seed, |x| r_key(x, ns, a.match_rate, a.zipf));
        let mut text = String::with_capacity(nr as usize * 16);
        for (i, k) in rkeys.iter().enumerate() {
            let _ = writeln!(text, "{i},{}", split(*k));
        }
        std::fs::write(dir.join("r.csv"), &text)?;
        // `s`: every key of 0..ns once, in a random order.
        let order = random(ns as usize, seed ^ 0x5eed, |x| x);
        let mut perm: Vec<u64> = (0..ns).collect();
        perm.sort_by_key(|&i| order[i as usize]);
        text.clear();
        for (i, k) in perm.iter().enumerate() {
            let _ = writeln!(text, "{i},{}", split(*k));
        }
        std::fs::write(dir.join("s.csv"), &text)?;
        let load = || fox_runtime::LoadedInputs::load(&dir, &wanted, None, None).map_err(|e| anyhow::anyhow!("{e}"));
        let stats = load()?.statistics();
        program.join = fox_phys::JoinChoice::Auto;
        let (phys, _) =
            fox_cli::plan_physical_with(&program.ra, &stats, &fox_kernel::LowerOptions::default(), program.join)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        let picked = join_algorithm(&phys);
        let mut times: Vec<Option<f64>> = Vec::new();
        let mut pairs: Option<String> = None;
        for &j in &algs {
            if j == JoinArg::Nl && log2 > a.nl_max {
                times.push(None);
                continue;
            }
            program.join = j.choice();
            let plan = program.kernel_plan(&stats, &fox_kernel::LowerOptions::default())?;
            let mut ms = Vec::new();
            for run in 0..=a.repeat {
                spinner.set(format!("2^{log2} rows, {}: run {run} of {}", name(j), a.repeat));
                let opts = fox_runtime::RunOptions::default();
                let r = fox_runtime::run_loaded(&plan, dev.backend(), &opts, load()?)
                    .map_err(|e| anyhow::anyhow!("--join {}: {e}", name(j)))?;
                let count = r
                    .outputs
                    .first()
                    .and_then(|t| t.rows().first().and_then(|row| row.first().map(|v| format!("{v:?}"))))
                    .unwrap_or_else(|| "0".into());
                match &pairs {
                    None => pairs = Some(count),
                    Some(p) if *p != count => anyhow::bail!(
                        "2^{log2} rows: --join {} counts {}, the first algorithm {}",
                        name(j),
                        count.trim(),
                        p.trim()
                    ),
                    _ => {}
                }
                if run > 0 {
                    ms.push(r.stats.compute.as_secs_f64() * 1e3);
                }
            }
            times.push(Some(median(&ms)));
        }
        let winner = algs
            .iter()
            .zip(&times)
            .filter(|(j, _)| **j != JoinArg::Auto)
            .filter_map(|(j, t)| t.map(|t| (t, name(*j))))
            .min_by(|x, y| x.0.total_cmp(&y.0))
            .map_or("-", |w| w.1);
        let _ = write!(
            table,
            "{nr:>10} {ns:>10} {:>4} {:>5}% {:>5}",
            a.keys, a.match_rate, a.zipf
        );
        for t in &times {
            match t {
                Some(t) => {
                    let _ = write!(table, " {t:>10.2}");
                }
                None => {
                    let _ = write!(table, " {:>10}", "-");
                }
            }
        }
        let count = pairs.as_deref().map_or("-".to_string(), |p| {
            p.trim_start_matches("Int64(").trim_end_matches(')').to_string()
        });
        let _ = writeln!(table, " {winner:>7} {picked:>11} {count:>12}");
    }
    spinner.finish();
    let _ = std::fs::remove_dir_all(&dir);
    fox_cli::stdout::print(&format!(
        "equi-joins on {} (compute time, median of {}):\n{table}",
        dev.backend().name(),
        plural(u64::from(a.repeat), "run")
    ))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(args: &[&str]) -> KernelsCli {
        let mut all = vec!["foxbench", "kernels"];
        all.extend(args);
        match Cli::parse_from(all).cmd {
            Cmd::Kernels(k) => k,
            _ => unreachable!(),
        }
    }

    #[test]
    fn kernel_sizes_default_by_backend() {
        let sizes = |a: KernelsArgs| (a.log2n, a.join_log2n, a.repeat);
        assert_eq!(sizes(KernelsArgs::new(&cli(&[]), true)), (28, 26, 10));
        assert_eq!(sizes(KernelsArgs::new(&cli(&[]), false)), (22, 20, 5));
        let given = cli(&["--log2n", "12", "--join-log2n", "10", "--repeat", "3"]);
        assert_eq!(sizes(KernelsArgs::new(&given, false)), (12, 10, 3));
        assert_eq!(sizes(KernelsArgs::new(&given, true)), (12, 10, 3));
        assert!(matches!(cli(&[]).backend, BackendChoice::Auto));
    }
}
