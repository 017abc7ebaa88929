//! `foxc`: the Fox compiler. `foxc check` reports diagnostics; `foxc compile` writes the plan.

use clap::{Parser, Subcommand, ValueEnum};
use fox_cli::{check_files_as, plan_sources, Checked};
use fox_syntax::sources::Dialect;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

fox_cli::check_stdout_at_start!();
fox_cli::exit_on_out_of_memory!("foxc");

#[derive(Parser)]
#[command(
    name = "foxc",
    version,
    about = "The Fox compiler: LogiQL rules in, a query plan out",
    long_about = "The Fox compiler: parses and type-checks LogiQL programs and plans them.\n\n\
                  Every error names file:line:col with the source line and a caret. \
                  Exit status: 0 when the program is clean, 1 when it has errors \
                  (or a file cannot be read or written), 2 for a bad command line."
)]
struct Cli {
    /// Colour diagnostics: auto (when standard error is a terminal), always, never.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
    /// The language of the program: logiql, or souffle (Soufflé's language). Default:
    /// souffle for a file ending in `.dl`, logiql otherwise.
    #[arg(long, global = true, value_enum, value_name = "LANG")]
    dialect: Option<fox_cli::DialectChoice>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check a program for errors (syntax, names, types, safety, stratification) and
    /// print the diagnostics (errors and warnings); nothing is written. Several files make
    /// one program (with the files they `.include`).
    Check {
        /// The .logic files of the program.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Check each file as a program of its own instead.
        #[arg(long)]
        each: bool,
    },
    /// Compile a program to its kernel plan (versioned RON, what `foxrun` executes).
    /// Without -o and --emit the plan goes to standard output.
    Compile {
        /// The .logic files of the program (several files make one program).
        #[arg(required_unless_present = "list_passes", value_name = "FILE")]
        files: Vec<PathBuf>,
        /// List the physical passes in the order they run, each with what it decides, and
        /// exit.
        #[arg(long, exclusive = true)]
        list_passes: bool,
        /// Leave out a physical pass (see --list-passes); may be repeated. The plan stays
        /// correct: each annotation a pass sets has a default (no fusion, no rounds, the
        /// general algorithm) that the translation to kernels follows.
        #[arg(long, value_name = "NAME", value_parser = clap::builder::PossibleValuesParser::new(fox_phys::pass_names()))]
        disable_pass: Vec<String>,
        /// Run the physical passes up to this one and stop; with `--emit physical`, shows
        /// the plan as that pass left it.
        #[arg(long, value_name = "NAME", value_parser = clap::builder::PossibleValuesParser::new(fox_phys::pass_names()))]
        after_pass: Option<String>,
        /// Make the plan count the rows of every operator's result, so that `foxrun
        /// --timing` shows them beside the estimates (`foxrun` plans a `.logic` program
        /// this way itself when given --timing). It computes exactly what it computes
        /// without them.
        #[arg(long)]
        observe_rows: bool,
        /// Keep loop-invariant kernels in their loops: by default a kernel of a loop whose
        /// arguments the loop never changes (the sort of a join side read from a relation
        /// the loop does not write, a hash table or a trie over it) runs once before the
        /// loop instead of on every iteration. The plan computes the same outputs.
        #[arg(long)]
        keep_loop_invariants: bool,
        #[arg(long, value_enum, value_name = "ALGORITHM", default_value_t = fox_cli::JoinArg::Auto, help = fox_cli::JoinArg::HELP)]
        join: fox_cli::JoinArg,
        /// Plan for a run over N devices (`foxrun --devices N`): each result and relation
        /// is distributed over them (hashed on keys, split, replicated or on device 0)
        /// and rows are exchanged between devices where an operator needs them together;
        /// `--emit physical` shows the placement and every exchange. A plan made for N
        /// devices gives the same results on N devices or on one (where every exchange
        /// keeps the rows where they are).
        #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
        devices: u32,
        /// Write the plan to this file: a regular file is replaced whole or not at all (a
        /// symbolic link is followed and kept), a device or FIFO is written into.
        #[arg(short, long, value_name = "PLAN.ron")]
        output: Option<PathBuf>,
        /// Print a stage of the pipeline to standard output instead of the plan:
        /// ast (the syntax tree), core (the typed, stratified core clauses), ra (the
        /// relational plan), physical (the relational plan with each operator's
        /// algorithm, estimated rows and placement, as the physical passes set them; no
        /// data is read, so inputs are estimated at 1,000,000 rows), kernels (the kernel
        /// plan with its frees), dot (the kernel
        /// CFG for graphviz: `foxc compile q.logic --emit dot | dot -Tsvg > q.svg`).
        #[arg(long, value_enum, value_name = "STAGE")]
        emit: Option<Emit>,
    },
    /// Compile the GPU kernel modules (kernels/*.cu, embedded in the binaries) to CUBINs
    /// for the given architectures, with NVRTC (no GPU needed), into the folder `foxrun`,
    /// `foxbench`, the REPL and the Python package read them from: `fox-kernels` next to
    /// their executable (or the folder `FOX_KERNEL_IMAGES` names). A run on a machine
    /// whose kernel cache is empty then loads them instead of compiling them; the
    /// expression kernels of each program are still compiled (and cached) on first use.
    PrecompileKernels {
        /// Real architectures, comma-separated: sm_90 (H100, H200), sm_80 (A100), sm_100, …
        #[arg(long, value_name = "ARCHS", value_delimiter = ',', required = true)]
        arch: Vec<String>,
        /// The folder to write (default: `fox-kernels` next to this executable).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Emit {
    Ast,
    Core,
    Ra,
    Physical,
    Kernels,
    Dot,
}

fn main() -> ExitCode {
    fox_runtime::tempfiles::remove_on_signals();
    let cli = Cli::parse();
    let color = match cli.color {
        ColorChoice::Auto => std::io::stderr().is_terminal(),
        ColorChoice::Always => true,
        ColorChoice::Never => false,
    };
    let dialect = fox_cli::DialectChoice::dialect(cli.dialect);
    let result = match cli.command {
        Command::Check { files, each } => cmd_check(&files, each, dialect, color),
        Command::Compile { list_passes: true, .. } => list_passes(),
        Command::PrecompileKernels { arch, out } => precompile_kernels(&arch, out),
        Command::Compile {
            files,
            output,
            emit,
            disable_pass,
            after_pass,
            observe_rows,
            keep_loop_invariants,
            join,
            devices,
            ..
        } => {
            let passes = fox_phys::Options {
                disabled: disable_pass,
                stop_after: after_pass,
                join: join.choice(),
                devices: devices as usize,
            };
            let lowering = fox_kernel::LowerOptions {
                observe_rows,
                keep_loop_invariants,
                ..Default::default()
            };
            cmd_compile(&files, dialect, output.as_deref(), emit, &passes, &lowering, color)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("foxc: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn precompile_kernels(archs: &[String], out: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let dir = match out {
        Some(d) => d,
        None => std::env::current_exe()?
            .parent()
            .ok_or_else(|| anyhow::anyhow!("the executable has no folder"))?
            .join("fox-kernels"),
    };
    if !fox_cuda::compile::nvrtc_available() {
        anyhow::bail!("{}", fox_cuda::compile::NVRTC_MISSING);
    }
    let t0 = std::time::Instant::now();
    let done = fox_cuda::compile::precompile_modules(&dir, archs).map_err(|e| anyhow::anyhow!("{}", e.0))?;
    for (module, arch, file, secs) in &done {
        eprintln!("foxc: kernels/{module}.cu for {arch}: {} ({secs:.1} s)", file.display());
    }
    eprintln!(
        "foxc: {} images in {} ({:.1} s)",
        done.len(),
        dir.display(),
        t0.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

fn report(checked: &Checked, color: bool) {
    if !checked.diagnostics.is_empty() {
        eprint!("{}", checked.render(color));
    }
}

fn error_summary(name: &str, n: usize) {
    eprintln!("foxc: {name}: {n} error{}", if n == 1 { "" } else { "s" });
}

/// Checks `files` as one program, or with `each` every file as a program of its own;
/// fails when any has errors (or cannot be read).
fn cmd_check(files: &[PathBuf], each: bool, dialect: Dialect, color: bool) -> anyhow::Result<ExitCode> {
    let programs: Vec<&[PathBuf]> = if each { files.chunks(1).collect() } else { vec![files] };
    let mut failed = false;
    for paths in programs {
        let checked = match check_files_as(paths, dialect) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("foxc: error: {e:#}");
                failed = true;
                continue;
            }
        };
        report(&checked, color);
        let errors = checked.error_count();
        if errors > 0 {
            error_summary(&checked.name(), errors);
            failed = true;
        }
    }
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// Prints the physical passes in order, each with what it decides.
fn list_passes() -> anyhow::Result<ExitCode> {
    let width = fox_phys::pass_names().iter().map(|n| n.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (i, p) in fox_phys::PASSES.iter().enumerate() {
        out.push_str(&format!("{:>2}. {:<width$}  {}\n", i + 1, p.name(), p.decides()));
    }
    write_stdout(&out)?;
    Ok(ExitCode::SUCCESS)
}

fn cmd_compile(
    paths: &[PathBuf],
    dialect: Dialect,
    output: Option<&Path>,
    emit: Option<Emit>,
    passes: &fox_phys::Options,
    lowering: &fox_kernel::LowerOptions,
    color: bool,
) -> anyhow::Result<ExitCode> {
    let checked = check_files_as(paths, dialect)?;
    report(&checked, color);
    let errors = checked.error_count();
    let name = checked.name();
    if emit == Some(Emit::Ast) {
        // The syntax tree is useful even when later stages fail.
        let mut out = ron::ser::to_string_pretty(&checked.ast, ron::ser::PrettyConfig::default())?;
        out.push('\n');
        write_stdout(&out)?;
        return Ok(if errors > 0 {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        });
    }
    let Some(core) = checked.core.filter(|_| errors == 0) else {
        error_summary(&name, errors.max(1));
        return Ok(ExitCode::from(1));
    };
    if emit == Some(Emit::Core) {
        write_stdout(&fox_sema::print_core(&core))?;
        return Ok(ExitCode::SUCCESS);
    }
    let plan = fox_ra::plan(&core).map_err(|e| fox_cli::plan_error(&checked.map, &name, &e, color))?;
    if emit == Some(Emit::Ra) {
        write_stdout(&fox_ra::print_plan(&plan))?;
        return Ok(ExitCode::SUCCESS);
    }
    let phys = fox_phys::run(plan, &fox_phys::Statistics::none(), passes)
        .map_err(|e| anyhow::anyhow!("{name}: physical planning failed: {e}"))?;
    if emit == Some(Emit::Physical) {
        write_stdout(&fox_phys::print_physical(&phys))?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut kernels = fox_kernel::lower_physical_with(&phys, lowering)
        .map_err(|e| anyhow::anyhow!("{name}: cannot lower the plan to kernels: {e}"))?;
    kernels.sources = plan_sources(&checked.map);
    match emit {
        Some(Emit::Kernels) => write_stdout(&fox_kernel::print_kernels(&kernels))?,
        Some(Emit::Dot) => write_stdout(&fox_kernel::to_dot(&kernels))?,
        Some(Emit::Ast | Emit::Core | Emit::Ra | Emit::Physical) => unreachable!("handled above"),
        None if output.is_none() => write_stdout(&fox_kernel::to_ron(&kernels))?,
        None => {}
    }
    if let Some(out) = output {
        fox_runtime::write_bytes(out, fox_kernel::to_ron(&kernels).as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn write_stdout(text: &str) -> anyhow::Result<()> {
    fox_cli::stdout::print(text)
}
