//! `foxrun`: runs a compiled kernel plan (`.ron`) or a program (`.logic`, compiled in
//! process) on a backend, and prints or writes its results.

use clap::{Parser, ValueEnum};
use fox_cli::progress::{RunProgress, Spinner};
use fox_cli::{load_plan_files, parse_scale_factor, Bars};
use fox_kernel::InputRel;
use fox_runtime::{
    format_stats, run_devices, Backend, CancelToken, CancellableProgress, DataSource, Database, Format, LoadedInputs,
    OutputTable, RunOptions, RuntimeError,
};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

fox_cli::check_stdout_at_start!();
fox_cli::exit_on_out_of_memory!("foxrun");

#[derive(Parser)]
#[command(
    name = "foxrun",
    version,
    about = "Runs a Fox kernel plan or program and prints or writes its results",
    long_about = "Runs a Fox kernel plan (PLAN.ron, from `foxc compile`) or a program (Q.logic, compiled \
                  first) on a backend. Results go to standard output, one table per output predicate, \
                  or with --out to DIR/<predicate>.csv (or .tsv, .json, .parquet, .arrow with --format), written only \
                  when the whole run succeeded, all of them or none.\n\n\
                  Exit status: 0 on success, 1 when the program, the plan or the data has an error \
                  (nothing is written then), 2 for a bad command line, 130 when Ctrl-C stopped the \
                  run (a second Ctrl-C ends it at once)."
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
    /// commas or tabs, further columns ignored, lines starting with # or % skipped;
    /// gzip-compressed files, such as .csv.gz, are decompressed), taken as given
    /// (direction and self-loops kept) with duplicates removed.
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
    /// Write each output predicate to DIR/<predicate>.csv (.tsv, .json, .parquet, .arrow with --format; DIR
    /// is created) instead of printing it, all files or none, and list them on standard
    /// error with their row counts; `--out -` writes the files' contents to standard
    /// output instead.
    #[arg(long, value_name = "DIR|-")]
    out: Option<PathBuf>,
    /// The format of the results: table (aligned columns for reading, cut at --max-rows;
    /// the default on standard output), csv (the default with --out), tsv, json (one
    /// object per output predicate; on standard output an array of them), parquet or arrow
    /// (a Parquet or an Arrow IPC file per output predicate, with --out DIR only).
    #[arg(long, value_enum, value_name = "FORMAT")]
    format: Option<FormatChoice>,
    /// The rows of each table shown in the table format: N, or `all` (or 0) for every row.
    /// Rows left out are counted in a line `… N more rows`.
    #[arg(long, value_name = "N|all", default_value = "40", value_parser = parse_max_rows)]
    max_rows: MaxRows,
    /// Where kernels run: auto (the GPU when one is usable, otherwise the CPU), gpu, cpu.
    #[arg(long, value_enum, default_value_t = fox_cli::BackendChoice::Auto)]
    backend: fox_cli::BackendChoice,
    /// Print per-kernel times, the load/upload/compute/download/output split (with
    /// kernel compilation), each operator's estimated against its actual rows, memory
    /// use, and the time the results then took to be written, to standard error.
    #[arg(long)]
    timing: bool,
    /// The memory the run may use on the backend (e.g. 512M, 16G; default: all of the
    /// device's): the device peak never passes it. Operators that do not fit run in
    /// pieces (multi-way joins and joins whose rows only an aggregation reads in rounds;
    /// sorts in runs; joins, unions, matches and aggregations piece by piece) and buffers
    /// wait in the host tier meanwhile; `--timing` prints the device peak and the host
    /// tier's traffic. An operation whose smallest piece needs more than the limit leaves
    /// stops the run with an out-of-memory error naming the rule and the sizes.
    #[arg(long, value_name = "SIZE", value_parser = fox_cli::parse_memory_size)]
    memory_limit: Option<u64>,
    /// Run over N devices, SPMD: a program is planned for N devices, each device reads its
    /// part of every input (a contiguous slice of its rows, the rows whose keys hash to
    /// the device, or every row, as the plan places the input) and runs the whole plan
    /// on its rows, rows move
    /// between devices where the plan exchanges them, and the results gather as one
    /// device's would (the same output). On the GPU backend N GPUs from the first (`all`:
    /// every visible GPU; more than there are is an error), which move rows to each other
    /// through NCCL (libnccl.so.2; its absence is an error); on the CPU backend N
    /// simulated devices, each a CPU backend of its own (`all`: 1). --memory-limit applies
    /// to each device; --timing adds the rows exchanged and each device's memory peak.
    /// A compiled plan (PLAN.ron) runs over several devices only when it exchanges rows.
    /// A device that fails stops the others at their next collective; devices waiting
    /// at a collective while no device made progress for FOX_STALL_TIMEOUT_S seconds
    /// (default 120) fail the run with an error naming the devices that did not come.
    #[arg(long, value_name = "N|all", default_value = "1", value_parser = fox_cli::parse_devices)]
    devices: fox_cli::Devices,
    #[arg(long, value_enum, value_name = "ALGORITHM", default_value_t = fox_cli::JoinArg::Auto, help = fox_cli::JoinArg::HELP)]
    join: fox_cli::JoinArg,
    /// Leave out a physical pass of the program's plan (`foxc compile --list-passes` lists
    /// them); may be repeated. The answers stay the same: each annotation a pass sets has a
    /// default (no fusion, no rounds, the general algorithm, relations merged in place)
    /// that the translation to kernels follows. For experiments, with --timing.
    #[arg(long, value_name = "NAME", value_parser = clap::builder::PossibleValuesParser::new(fox_phys::pass_names()))]
    disable_pass: Vec<String>,
    /// Stop with an error when a recursive stratum has not reached its fixpoint after N
    /// iterations (a recursion through arithmetic, `n(x + 1) <- n(x)`, can derive new
    /// rows forever); nothing is written. Default: no limit. With --timing each
    /// iteration is printed on standard error with the rows it derived.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_iterations: Option<u64>,
    /// Print the statistics of the program's inputs on standard output instead of running
    /// it: per input relation its rows (and, where they do, that they ascend on all its
    /// columns together, and with no two equal), and per column its type, its number of distinct
    /// values (exact up to 256, estimated beyond), its least and greatest values and
    /// whether the rows are in ascending order of it as loaded (`not read` for a column the
    /// program does not read, which is not loaded).
    #[arg(long, conflicts_with_all = ["out", "format"])]
    stats: bool,
    /// The language of the program: logiql, or souffle (Soufflé's language and its I/O
    /// conventions: `.input` reads `<rel>.facts`, tab-separated, from --data DIR; each
    /// `.output` is written to `<rel>.csv`, tab-separated without a header, in --out DIR,
    /// or to standard output without --out; `.printsize` prints `<rel>\t<rows>`).
    /// Default: souffle for a file ending in `.dl`, logiql otherwise.
    #[arg(long, value_enum, value_name = "LANG")]
    dialect: Option<fox_cli::DialectChoice>,
    /// Colour diagnostics: auto (when standard error is a terminal), always, never.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
    /// Draw no progress. Progress (data generation, inputs read, loop iterations with
    /// their new rows, outputs ordered and written) is drawn on standard error only
    /// when it is a terminal, and is cleared before anything else is printed.
    #[arg(long)]
    no_progress: bool,
}

/// A format of results.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FormatChoice {
    Table,
    Csv,
    Tsv,
    Json,
    Parquet,
    Arrow,
}

/// `--max-rows`: `None` shows every row.
#[derive(Clone, Copy, Debug)]
struct MaxRows(Option<usize>);

fn parse_max_rows(s: &str) -> Result<MaxRows, String> {
    match s {
        "all" | "0" => Ok(MaxRows(None)),
        _ => s
            .parse::<usize>()
            .map(|n| MaxRows(Some(n)))
            .map_err(|_| format!("`{s}` is not a number of rows or `all`")),
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum ColorChoice {
    Auto,
    Always,
    Never,
}

fn main() -> ExitCode {
    fox_runtime::tempfiles::remove_on_signals();
    let cli = Cli::parse();
    // Ctrl-C stops the load or the run between two pieces of work; a second one ends the
    // process at once.
    let cancel = CancelToken::new();
    fox_cli::interrupt::install(&cancel, Some(2));
    match run_cli(&cli, &cancel) {
        Ok(code) => code,
        Err(e) if e.downcast_ref::<RuntimeError>() == Some(&RuntimeError::Cancelled) => {
            eprintln!("foxrun: interrupted");
            ExitCode::from(fox_cli::interrupt::STATUS)
        }
        Err(e) => {
            eprintln!("foxrun: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run_cli(cli: &Cli, cancel: &CancelToken) -> anyhow::Result<ExitCode> {
    let color = match cli.color {
        ColorChoice::Auto => std::io::stderr().is_terminal(),
        ColorChoice::Always => true,
        ColorChoice::Never => false,
    };
    let mut backends = match fox_cli::open_backends(cli.backend, cli.devices) {
        Ok((backends, line)) => {
            if let Some(line) = line {
                eprintln!("foxrun: {line}");
            }
            backends
        }
        Err(e) => anyhow::bail!("{e}"),
    };
    let devices = backends.len();
    let to_dir = cli.out.as_ref().filter(|d| d.as_os_str() != "-");
    if to_dir.is_some() && cli.format == Some(FormatChoice::Table) {
        eprintln!(
            "foxrun: --format table is for standard output; with --out DIR choose csv, tsv, json, parquet or arrow"
        );
        return Ok(ExitCode::from(2));
    }
    if to_dir.is_none() && matches!(cli.format, Some(FormatChoice::Parquet | FormatChoice::Arrow)) {
        eprintln!(
            "foxrun: --format parquet and --format arrow write files: give --out DIR (one file per output predicate)"
        );
        return Ok(ExitCode::from(2));
    }
    if !cli.var_order.is_empty() && cli.files.iter().any(|f| f.extension().is_some_and(|e| e == "ron")) {
        eprintln!("foxrun: --var-order applies when a program is compiled, not to a compiled plan (.ron)");
        return Ok(ExitCode::from(2));
    }
    let options = fox_ra::PlanOptions {
        var_order: cli.var_order.clone(),
        ..fox_ra::PlanOptions::default()
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
    let progress = fox_cli::progress::wanted(cli.no_progress);
    // The spinner of the run, which also tells of the input files read; generated data
    // draws its own bars, so the spinner starts once it is loaded.
    let started = Instant::now();
    let spinner = |on: bool| {
        Arc::new(RunProgress {
            spinner: Spinner::new(on, "running"),
            iterations: cli.timing.then_some(started),
        })
    };
    let mut observer = spinner(progress && source.is_none());
    let watch = |o: &Arc<RunProgress>| (progress || cli.timing).then(|| o.clone() as Arc<dyn fox_runtime::RunObserver>);
    let is_plan = cli.files.iter().any(|f| f.extension().is_some_and(|e| e == "ron"));
    if is_plan && cli.join != fox_cli::JoinArg::Auto {
        anyhow::bail!("--join chooses the algorithms of a program's plan; a PLAN.ron's are already chosen");
    }
    if is_plan && !cli.disable_pass.is_empty() {
        anyhow::bail!("--disable-pass leaves a pass out of a program's plan; a PLAN.ron's passes have run already");
    }
    // A program is planned after its inputs are loaded, with their statistics; a compiled
    // plan reads its inputs as it runs (or from the data generated for it).
    let mut souffle = None;
    let (plan, data, statistics) = if is_plan && !cli.stats {
        let Some(plan) = load_plan_files(&cli.files, color, "foxrun", &options)? else {
            return Ok(ExitCode::from(1));
        };
        if devices > 1 && !exchanges_rows(&plan) {
            anyhow::bail!(
                "--devices {devices}: the plan exchanges no rows between devices, so it was compiled for one \
                 device; run the program (.logic) with --devices, which plans it for {devices} devices"
            );
        }
        let data = match &source {
            Some((source, what)) => Data::Database(load_database(cli, cancel, progress, what, &|p| {
                Database::load(source, &[&plan], p)
            })?),
            None => Data::Later,
        };
        (plan, data, None)
    } else {
        let (program, wanted) = if is_plan {
            let Some(plan) = load_plan_files(&cli.files, color, "foxrun", &options)? else {
                return Ok(ExitCode::from(1));
            };
            let wanted: Vec<(InputRel, Vec<bool>)> = plan
                .inputs
                .iter()
                .cloned()
                .zip(fox_runtime::database::used_input_columns(&plan))
                .collect();
            (Program::Plan(plan), wanted)
        } else {
            let dialect = fox_cli::DialectChoice::dialect(cli.dialect);
            let Some(mut program) = fox_cli::compile_program_as(&cli.files, dialect, color, "foxrun", &options)? else {
                return Ok(ExitCode::from(1));
            };
            // The columns loaded are those of the plan for these devices.
            program.devices = devices;
            let wanted = program.inputs()?;
            (Program::Compiled(program), wanted)
        };
        let data = match &source {
            Some((source, what)) => Data::Database(load_database(cli, cancel, progress, what, &|p| {
                fox_runtime::database::merge_wanted(wanted.clone()).and_then(|w| Database::load_tables(source, w, p))
            })?),
            None => {
                let dir = cli.data.clone().unwrap_or_default();
                let inputs = match &program {
                    Program::Compiled(c) => {
                        c.load_inputs(&dir, &wanted, Vec::new(), watch(&observer).as_deref(), Some(cancel))
                    }
                    Program::Plan(_) => LoadedInputs::load(&dir, &wanted, watch(&observer).as_deref(), Some(cancel)),
                };
                observer.spinner.set("running");
                Data::Files(inputs.map_err(run_error)?)
            }
        };
        let started = Instant::now();
        let stats = match &data {
            Data::Files(inputs) => inputs.statistics(),
            Data::Database(db) => fox_runtime::stats::of_database(db),
            Data::Later => fox_phys::Statistics::none(),
        };
        let took = started.elapsed();
        if cli.stats {
            observer.spinner.finish();
            let inputs: Vec<InputRel> = wanted.into_iter().map(|(i, _)| i).collect();
            fox_cli::stdout::print(&fox_runtime::stats::format_statistics(&stats, &inputs))?;
            return Ok(ExitCode::SUCCESS);
        }
        let plan = match program {
            Program::Plan(plan) => plan,
            Program::Compiled(mut program) => {
                souffle = program.souffle.clone();
                program.join = cli.join.choice();
                program.disabled_passes = cli.disable_pass.clone();
                program.devices = devices;
                program.kernel_plan(
                    &stats,
                    &fox_kernel::LowerOptions {
                        observe_rows: cli.timing,
                        ..Default::default()
                    },
                )?
            }
        };
        (plan, data, Some(took))
    };
    if source.is_some() {
        observer = spinner(progress);
    }
    let mut opts = RunOptions {
        data_dir: cli.data.clone(),
        timing: cli.timing,
        database: None,
        memory_limit: cli.memory_limit,
        window_rows: None,
        observer: watch(&observer),
        cancel: Some(cancel.clone()),
        max_iterations: cli.max_iterations,

        stall_timeout: None,
    };
    let backends: Vec<&mut (dyn Backend + Send)> = backends.iter_mut().map(|b| b.as_mut()).collect();
    let result = match data {
        Data::Files(inputs) => run_devices(&plan, backends, &opts, Some(inputs)),
        Data::Database(db) => {
            opts.database = Some(db);
            run_devices(&plan, backends, &opts, None)
        }
        Data::Later => run_devices(&plan, backends, &opts, None),
    };
    observer.spinner.finish();
    let result = match result {
        Ok(r) => r,
        Err(RuntimeError::Cancelled) => return Err(run_error(RuntimeError::Cancelled)),
        Err(e) => {
            match e.located(&plan, color) {
                Some(text) => eprint!("{text}"),
                None => eprintln!("foxrun: error: {e}"),
            }
            return Ok(ExitCode::from(1));
        }
    };
    // The run is over: a Ctrl-C while the results are written ends the process at once,
    // removing the temporary files, so that no result is written in part.
    fox_cli::interrupt::install(cancel, Some(fox_cli::interrupt::count() + 1));
    if cli.timing {
        let mut stats = result.stats.clone();
        stats.statistics = statistics;
        eprint!("{}", format_stats(&stats));
        if plan.observed.is_empty() {
            eprintln!(
                "rows per operator: not counted by this compiled plan (compile it with `foxc compile --observe-rows`)"
            );
        }
    }
    if let Some(io) = &souffle {
        if cli.format.is_some() {
            eprintln!("foxrun: --format does not apply to a Soufflé program, whose outputs say their format");
            return Ok(ExitCode::from(2));
        }
        let started = std::time::Instant::now();
        fox_cli::souffle::write_results(&result.outputs, io, to_dir.map(|d| d.as_path()))?;
        report_writing(cli.timing, started);
        return Ok(ExitCode::SUCCESS);
    }
    let started = std::time::Instant::now();
    let file_format = |f: FormatChoice| match f {
        FormatChoice::Table | FormatChoice::Csv => Format::Csv,
        FormatChoice::Tsv => Format::Tsv,
        FormatChoice::Json => Format::Json,
        FormatChoice::Parquet => Format::Parquet,
        FormatChoice::Arrow => Format::Arrow,
    };
    match (to_dir, cli.out.is_some()) {
        (Some(dir), _) => {
            let format = file_format(cli.format.unwrap_or(FormatChoice::Csv));
            let spinner = Spinner::new(progress, format!("writing the outputs to {}", dir.display()));
            let written = fox_runtime::write_all(&result.outputs, dir, format);
            spinner.finish();
            let written = written.map_err(|e| anyhow::anyhow!("{e}"))?;
            for (path, rows) in written {
                eprintln!(
                    "foxrun: wrote {} ({rows} row{})",
                    path.display(),
                    if rows == 1 { "" } else { "s" }
                );
            }
        }
        (None, to_stdout) => {
            let default = if to_stdout {
                FormatChoice::Csv
            } else {
                FormatChoice::Table
            };
            let format = cli.format.unwrap_or(default);
            let spinner = Spinner::new(progress, "formatting the results");
            let printed = print_results(&result.outputs, format, cli.max_rows);
            spinner.finish();
            printed?;
        }
    }
    report_writing(cli.timing, started);
    Ok(ExitCode::SUCCESS)
}

/// With `--timing`, the time the results took to be formatted and written (files or
/// standard output), which comes after the run and is not part of its total.
fn report_writing(timing: bool, started: std::time::Instant) {
    if timing {
        eprintln!(
            "results written in {:.3} ms (after the run, not in its total)",
            started.elapsed().as_secs_f64() * 1e3
        );
    }
}

/// Whether a plan was made for several devices: it moves rows between them (an
/// `Exchange` anywhere) or loads an input whole or hashed on each.
fn exchanges_rows(plan: &fox_kernel::KernelPlan) -> bool {
    plan.blocks.iter().flat_map(|b| &b.instrs).any(|i| match i {
        fox_kernel::Instr::Launch { kernel, .. } => match kernel {
            fox_kernel::Kernel::Exchange { .. } => true,
            fox_kernel::Kernel::LoadInput { whole, hash, .. } => *whole || !hash.is_empty(),
            _ => false,
        },
        _ => false,
    })
}

/// What runs: a compiled plan, or a program planned once its data is loaded.
enum Program {
    Plan(fox_kernel::KernelPlan),
    Compiled(fox_cli::Compiled),
}

/// Where a run's inputs come from.
enum Data {
    /// Read by the run itself (a compiled plan, from files).
    Later,
    /// Read from files before planning.
    Files(LoadedInputs),
    /// Generated (or read) into a database before planning.
    Database(Arc<Database>),
}

/// The database `load` makes of `what` (generated data), with progress bars; `--timing`
/// reports the time it took.
fn load_database(
    cli: &Cli,
    cancel: &CancelToken,
    progress: bool,
    what: &str,
    load: &dyn Fn(&dyn fox_runtime::LoadProgress) -> Result<Database, RuntimeError>,
) -> anyhow::Result<Arc<Database>> {
    let bars = Bars::enabled(progress);
    let progress = CancellableProgress {
        progress: &bars,
        cancel,
    };
    let db = load(&progress).map_err(run_error)?;
    if cli.timing {
        eprintln!("loaded {what} in {:.1} s", db.load_time.as_secs_f64());
    }
    Ok(Arc::new(db))
}

/// A run's error, kept as it is when the run was cancelled (`main` tells it apart).
fn run_error(e: RuntimeError) -> anyhow::Error {
    match e {
        RuntimeError::Cancelled => anyhow::Error::new(e),
        e => anyhow::anyhow!("{e}"),
    }
}

/// Writes the results to standard output: in the table format each output predicate's
/// name and table, separated by empty lines; in CSV and TSV the text of each (preceded by
/// its name and separated by empty lines when there are several); in JSON one array of
/// the tables' objects.
fn print_results(outputs: &[OutputTable], format: FormatChoice, max_rows: MaxRows) -> anyhow::Result<()> {
    fox_cli::stdout::with_stdout(|w| {
        if format == FormatChoice::Json {
            return fox_runtime::output::write_json_array_to(outputs, w);
        }
        let named = format == FormatChoice::Table || outputs.len() > 1;
        for (k, t) in outputs.iter().enumerate() {
            if k > 0 {
                w.write_all(b"\n")?;
            }
            if named {
                writeln!(w, "{}", t.name)?;
            }
            match format {
                FormatChoice::Table => fox_runtime::output::write_table_text_to(t, max_rows.0, w)?,
                FormatChoice::Csv => fox_runtime::write_csv_to(t, w)?,
                FormatChoice::Tsv => fox_runtime::output::write_tsv_to(t, w)?,
                FormatChoice::Json => unreachable!("written above"),
                FormatChoice::Parquet | FormatChoice::Arrow => unreachable!("refused without --out DIR"),
            }
        }
        Ok(())
    })
}
