//! `foxrun`: runs a compiled kernel plan (`.ron`) or a program (`.logic`, compiled in
//! process) on a backend, and prints or writes its results.

use clap::{Parser, ValueEnum};
use fox_cli::{load_plan_files, parse_scale_factor, Bars};
use fox_runtime::{format_stats, format_table, run, write_csv_all, Backend, DataSource, Database, RunOptions};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "foxrun",
    version,
    about = "Runs a Fox kernel plan or program and prints or writes its results",
    long_about = "Runs a Fox kernel plan (PLAN.ron, from `foxc compile`) or a program (Q.logic, compiled \
                  first) on a backend. Results go to standard output, one table per output predicate, \
                  or with --out to DIR/<predicate>.csv.\n\n\
                  Exit status: 0 on success, 1 when the program, the plan or the data has an error \
                  (nothing is written then), 2 for a bad command line."
)]
struct Cli {
    /// A kernel plan (.ron), or the files of a program (.logic; several make one program).
    #[arg(value_name = "PLAN.ron|Q.logic", required = true)]
    files: Vec<PathBuf>,
    /// The directory `.input` files are read from (default: the current directory).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["tpch", "graph"])]
    data: Option<PathBuf>,
    /// Generate the TPC-H tables at scale factor SF in memory (with the dbgen rules, as the
    /// `tpchgen` crate does) instead of reading files: each `.input` of `part`, `supplier`,
    /// `partsupp`, `customer`, `orders`, `lineitem`, `nation` or `region` reads the
    /// generated table (see tpch/schema.logic for their columns).
    #[arg(long, value_name = "SF", value_parser = parse_scale_factor, conflicts_with = "graph")]
    tpch: Option<f64>,
    /// The relation `edge` (two integer columns) of a graph: generated,
    /// `rmat:SCALE[:EDGEFACTOR][:SEED]` (Graph500's R-MAT, 2^SCALE vertices, EDGEFACTOR ×
    /// 2^SCALE edges drawn, default 16) or `gnm:N:M:SEED` (N vertices, M edges, uniform),
    /// without self-loops or duplicates and every edge in both directions; or read from
    /// an edge-list file PATH (two int32 vertex ids a line, separated by whitespace,
    /// commas or tabs, further columns ignored, lines starting with # or % skipped), taken
    /// as given (direction and self-loops kept) with duplicates removed.
    #[arg(long, value_name = "SPEC|PATH", value_parser = fox_runtime::graph::GraphSpec::parse)]
    graph: Option<fox_runtime::graph::GraphSpec>,
    /// With an edge-list file for --graph: add the reverse of every edge and drop
    /// self-loops (duplicates are removed either way). Generated graphs are symmetric
    /// already.
    #[arg(long, requires = "graph")]
    symmetrize: bool,
    /// Renumber the graph's vertices 0, 1, … in ascending order of degree (ties by label)
    /// before running, so that `x < y` orients every edge from its endpoint of lower degree
    /// (clique counts are unchanged; listed vertices carry the new numbers).
    #[arg(long, requires = "graph")]
    degree_order: bool,
    /// The variable order of the multi-way joins (leapfrog triejoin), for experiments:
    /// the named variables come first, in this order, and the others follow in the
    /// planner's order (e.g. `--var-order z,y,x`). Each name must be bound by some
    /// multi-way join of the program.
    #[arg(long, value_name = "VARS", value_delimiter = ',')]
    var_order: Vec<String>,
    /// Write each output predicate to DIR/<predicate>.csv (DIR is created) instead of
    /// printing it.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Where kernels run: auto (the GPU when one is usable, otherwise the CPU), gpu, cpu.
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    backend: BackendChoice,
    /// Print per-kernel times, the load/upload/compute/download/output split (with
    /// kernel compilation) and memory use to standard error.
    #[arg(long)]
    timing: bool,
    /// The memory the run may use on the backend (e.g. 512M, 16G; default: all of the
    /// device's). Levels of multi-way joins that would expand beyond it run in rounds.
    #[arg(long, value_name = "SIZE", value_parser = fox_cli::parse_memory_size)]
    memory_limit: Option<u64>,
    /// Colour diagnostics: auto (when standard error is a terminal), always, never.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
}

#[derive(Clone, Copy, ValueEnum)]
enum BackendChoice {
    Auto,
    Gpu,
    Cpu,
}

#[derive(Clone, Copy, ValueEnum)]
enum ColorChoice {
    Auto,
    Always,
    Never,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run_cli(&cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("foxrun: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run_cli(cli: &Cli) -> anyhow::Result<ExitCode> {
    let color = match cli.color {
        ColorChoice::Auto => std::io::stderr().is_terminal(),
        ColorChoice::Always => true,
        ColorChoice::Never => false,
    };
    let mut backend: Box<dyn Backend> = match cli.backend {
        BackendChoice::Cpu => Box::new(fox_cpu::CpuBackend::new()),
        BackendChoice::Gpu => match fox_cuda::CudaBackend::new() {
            Ok(gpu) => Box::new(gpu),
            Err(e) => anyhow::bail!("no usable GPU for --backend gpu: {e}"),
        },
        BackendChoice::Auto => match fox_cuda::CudaBackend::new() {
            Ok(gpu) => {
                eprintln!("foxrun: running on the {}", gpu.name());
                Box::new(gpu)
            }
            Err(e) => {
                eprintln!("foxrun: no usable GPU ({e}); running on the CPU");
                Box::new(fox_cpu::CpuBackend::new())
            }
        },
    };
    if !cli.var_order.is_empty() && cli.files.iter().any(|f| f.extension().is_some_and(|e| e == "ron")) {
        eprintln!("foxrun: --var-order applies when a program is compiled, not to a compiled plan (.ron)");
        return Ok(ExitCode::from(2));
    }
    let options = fox_ra::PlanOptions {
        var_order: cli.var_order.clone(),
        ..fox_ra::PlanOptions::default()
    };
    let Some(plan) = load_plan_files(&cli.files, color, "foxrun", &options)? else {
        return Ok(ExitCode::from(1));
    };
    let source = match (cli.tpch, &cli.graph) {
        (Some(sf), _) => Some((DataSource::Tpch(sf), format!("TPC-H SF {sf}"))),
        (None, Some(g)) => {
            let g = g
                .clone()
                .with_symmetrize(cli.symmetrize)
                .with_degree_order(cli.degree_order);
            let what = format!("the graph {g}");
            Some((DataSource::Graph(g), what))
        }
        (None, None) => None,
    };
    let database = match source {
        Some((source, what)) => {
            let db = Database::load(&source, &[&plan], &Bars::new()).map_err(|e| anyhow::anyhow!("{e}"))?;
            if cli.timing {
                eprintln!("loaded {what} in {:.1} s", db.load_time.as_secs_f64());
            }
            Some(std::sync::Arc::new(db))
        }
        None => None,
    };
    let opts = RunOptions {
        data_dir: cli.data.clone(),
        timing: cli.timing,
        database,
        memory_limit: cli.memory_limit,
    };
    let result = run(&plan, backend.as_mut(), &opts).map_err(|e| anyhow::anyhow!("{e}"))?;
    if cli.timing {
        eprint!("{}", format_stats(&result.stats));
    }
    match &cli.out {
        Some(dir) => {
            write_csv_all(&result.outputs, dir).map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        None => {
            let mut text = String::new();
            for (k, t) in result.outputs.iter().enumerate() {
                if k > 0 {
                    text.push('\n');
                }
                text.push_str(&t.name);
                text.push('\n');
                text.push_str(&format_table(t));
            }
            write_stdout(&text)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn write_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        // A closed pipe (`foxrun … | head`) is not an error worth reporting.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(anyhow::anyhow!("cannot write to standard output: {e}")),
        Ok(()) => Ok(()),
    }
}
