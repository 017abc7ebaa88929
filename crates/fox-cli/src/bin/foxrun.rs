//! `foxrun`: runs a compiled kernel plan (`.ron`) or a program (`.logic`, compiled in
//! process) on a backend, and prints or writes its results.

use clap::{Parser, ValueEnum};
use fox_cli::{check, Source};
use fox_kernel::KernelPlan;
use fox_runtime::{format_stats, format_table, run, write_csv_all, Backend, RunOptions};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
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
    /// A kernel plan (.ron) or a program (.logic).
    #[arg(value_name = "PLAN.ron|Q.logic")]
    file: PathBuf,
    /// The directory `.input` files are read from (default: the current directory).
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
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
    let Some(plan) = load_plan(&cli.file, color)? else {
        return Ok(ExitCode::from(1));
    };
    let opts = RunOptions {
        data_dir: cli.data.clone(),
        timing: cli.timing,
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

/// The kernel plan of `path`: loaded from RON, or compiled from a program. `None` when the
/// program has errors (its diagnostics are printed).
fn load_plan(path: &Path, color: bool) -> anyhow::Result<Option<KernelPlan>> {
    let is_plan = path.extension().is_some_and(|e| e == "ron");
    let source = Source::read(path)?;
    if is_plan {
        let plan = fox_kernel::from_ron(&source.text).map_err(|e| anyhow::anyhow!("{}: {e}", source.name))?;
        return Ok(Some(plan));
    }
    let checked = check(&source);
    if !checked.diagnostics.is_empty() {
        eprint!("{}", source.render(&checked.diagnostics, color));
    }
    let errors = checked.diagnostics.iter().filter(|d| d.is_error()).count();
    let Some(core) = checked.core.filter(|_| errors == 0) else {
        let n = errors.max(1);
        eprintln!("foxrun: {}: {} error{}", source.name, n, if n == 1 { "" } else { "s" });
        return Ok(None);
    };
    let ra = fox_ra::plan(&core).map_err(|e| anyhow::anyhow!("{}: cannot plan the program: {e}", source.name))?;
    let plan = fox_kernel::lower(&ra)
        .map_err(|e| anyhow::anyhow!("{}: cannot lower the plan to kernels: {e}", source.name))?;
    Ok(Some(plan))
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
