//! `foxc`: the Fox compiler. `foxc check` reports diagnostics; `foxc compile` writes the plan.

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use fox_cli::{check, Source};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

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
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check programs for errors (syntax, names, types, safety, stratification) and print
    /// the diagnostics; nothing is written.
    Check {
        /// One or more .logic files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Compile a program to its kernel plan (versioned RON, what `foxrun` executes).
    /// Without -o and --emit the plan goes to standard output.
    Compile {
        /// The .logic file.
        file: PathBuf,
        /// Write the plan to this file (written whole or not at all).
        #[arg(short, long, value_name = "PLAN.ron")]
        output: Option<PathBuf>,
        /// Print a stage of the pipeline to standard output instead of the plan:
        /// ast (the syntax tree), core (the typed, stratified core clauses), ra (the
        /// relational plan), kernels (the kernel plan with its frees), dot (the kernel
        /// CFG for graphviz: `foxc compile q.logic --emit dot | dot -Tsvg > q.svg`).
        #[arg(long, value_enum, value_name = "STAGE")]
        emit: Option<Emit>,
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
    Kernels,
    Dot,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let color = match cli.color {
        ColorChoice::Auto => std::io::stderr().is_terminal(),
        ColorChoice::Always => true,
        ColorChoice::Never => false,
    };
    let result = match cli.command {
        Command::Check { files } => cmd_check(&files, color),
        Command::Compile { file, output, emit } => cmd_compile(&file, output.as_deref(), emit, color),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("foxc: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn report(source: &Source, diags: &[fox_syntax::diag::Diagnostic], color: bool) {
    if !diags.is_empty() {
        eprint!("{}", source.render(diags, color));
    }
}

fn error_summary(source: &Source, n: usize) {
    eprintln!("foxc: {}: {} error{}", source.name, n, if n == 1 { "" } else { "s" });
}

fn cmd_check(files: &[PathBuf], color: bool) -> anyhow::Result<ExitCode> {
    let mut failed = false;
    for path in files {
        let source = match Source::read(path) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("foxc: error: {e:#}");
                failed = true;
                continue;
            }
        };
        let checked = check(&source);
        report(&source, &checked.diagnostics, color);
        let errors = checked.diagnostics.iter().filter(|d| d.is_error()).count();
        if errors > 0 {
            error_summary(&source, errors);
            failed = true;
        }
    }
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

fn cmd_compile(path: &Path, output: Option<&Path>, emit: Option<Emit>, color: bool) -> anyhow::Result<ExitCode> {
    let source = Source::read(path)?;
    let checked = check(&source);
    report(&source, &checked.diagnostics, color);
    let errors = checked.diagnostics.iter().filter(|d| d.is_error()).count();
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
        error_summary(&source, errors.max(1));
        return Ok(ExitCode::from(1));
    };
    if emit == Some(Emit::Core) {
        write_stdout(&fox_sema::print_core(&core))?;
        return Ok(ExitCode::SUCCESS);
    }
    let plan = fox_ra::plan(&core).map_err(|e| fox_cli::plan_error(&source, &e, color))?;
    if emit == Some(Emit::Ra) {
        write_stdout(&fox_ra::print_plan(&plan))?;
        return Ok(ExitCode::SUCCESS);
    }
    let kernels = fox_kernel::lower(&plan)
        .map_err(|e| anyhow::anyhow!("{}: cannot lower the plan to kernels: {e}", source.name))?;
    match emit {
        Some(Emit::Kernels) => write_stdout(&fox_kernel::print_kernels(&kernels))?,
        Some(Emit::Dot) => write_stdout(&fox_kernel::to_dot(&kernels))?,
        Some(Emit::Ast | Emit::Core | Emit::Ra) => unreachable!("handled above"),
        None if output.is_none() => write_stdout(&fox_kernel::to_ron(&kernels))?,
        None => {}
    }
    if let Some(out) = output {
        write_atomically(out, fox_kernel::to_ron(&kernels).as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn write_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        // A closed pipe (`foxc … | head`) is not an error worth reporting.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("cannot write to standard output"),
    }
}

/// Writes `bytes` to a temporary file beside `path` and renames it into place, so a
/// failed write never leaves a partial plan behind.
fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| anyhow::anyhow!("`{}` is not a file name", path.display()))?;
    let tmp = dir.join(format!(".{}.tmp{}", name.to_string_lossy(), std::process::id()));
    let res = std::fs::write(&tmp, bytes).and_then(|_| std::fs::rename(&tmp, path));
    if let Err(e) = res {
        let _ = std::fs::remove_file(&tmp);
        anyhow::bail!("cannot write `{}`: {e}", path.display());
    }
    Ok(())
}
