//! `fox`: the interactive front door. `fox repl` reads statements (declarations, facts,
//! rules, directives), queries `?- body.` and commands (`.help`) from a terminal, with
//! history and completion, or from standard input without a prompt. Results go to
//! standard output, errors to standard error; Ctrl-C stops the query under way.

use clap::{Parser, Subcommand, ValueEnum};
use fox_cli::interrupt;
use fox_cli::repl::{BackendKind, Input, Out, Session, Stream};
use fox_runtime::DataSource;
use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;
use std::process::ExitCode;

fox_cli::check_stdout_at_start!();
fox_cli::exit_on_out_of_memory!("fox");

#[derive(Parser)]
#[command(
    name = "fox",
    version,
    about = "Fox: LogiQL rules compiled to GPU kernels",
    long_about = "Fox compiles LogiQL rules to data-parallel kernels and runs them on an NVIDIA GPU or the \
                  CPU. `fox repl` is an interactive session; `foxc` checks and compiles programs, `foxrun` \
                  runs them, `foxbench` measures."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// An interactive session: add declarations, facts and rules one statement at a
    /// time, ask queries `?- body.`, look at plans (`.explain`), and more (`.help`).
    /// Ctrl-C stops the query under way and returns to the prompt. Reading from a pipe
    /// or a file (`fox repl < script`) runs the statements without prompts; the exit
    /// status is then 0 when every statement succeeded, 1 when one failed, and 130 when
    /// Ctrl-C stopped the script.
    Repl(ReplArgs),
}

#[derive(clap::Args)]
struct ReplArgs {
    /// The directory `.input` files are read from (default: the current directory).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["tpch", "graph"])]
    data: Option<PathBuf>,
    /// Generate the TPC-H tables at scale factor SF for the `.input`s of TPC-H tables.
    #[arg(long, value_name = "SF", value_parser = fox_cli::parse_scale_factor, conflicts_with = "graph")]
    tpch: Option<f64>,
    /// The `edge` relation of a graph: rmat:SCALE[:EF][:SEED], gnm:N:M:SEED, or an
    /// edge-list file (as `foxrun --graph`).
    #[arg(long, value_name = "SPEC|PATH", value_parser = fox_runtime::graph::GraphSpec::parse)]
    graph: Option<fox_runtime::graph::GraphSpec>,
    /// With an edge-list file for --graph: add the reverse of every edge and drop
    /// self-loops.
    #[arg(long, requires = "graph")]
    symmetrize: bool,
    /// Renumber the graph's vertices 0, 1, … in ascending order of degree (ties by label)
    /// before running, so that `x < y` orients every edge from its endpoint of lower degree
    /// (clique counts are unchanged; listed vertices carry the new numbers).
    #[arg(long, requires = "graph")]
    degree_order: bool,
    /// Where queries run: auto (the GPU when one is usable), gpu, cpu.
    #[arg(long, value_enum, default_value_t = Choice::Auto)]
    backend: Choice,
    #[arg(long, value_enum, value_name = "ALGORITHM", default_value_t = fox_cli::JoinArg::Auto, help = fox_cli::JoinArg::HELP)]
    join: fox_cli::JoinArg,
    /// Run every query over N devices, SPMD (as `foxrun --devices`): planned for N
    /// devices, each device taking a slice of the loaded tables at each query, rows moving
    /// between devices where the plan exchanges them, and the answers those of one device.
    /// On the GPU backend N GPUs from the first (`all`: every visible GPU); on the CPU
    /// backend N simulated devices (`all`: 1). `.backend` keeps the count.
    /// A device that fails stops the others at their next collective; devices waiting
    /// at a collective while no device made progress for FOX_STALL_TIMEOUT_S seconds
    /// (default 120) fail the run with an error naming the devices that did not come.
    #[arg(long, value_name = "N|all", default_value = "1", value_parser = fox_cli::parse_devices)]
    devices: fox_cli::Devices,
}

#[derive(Clone, Copy, ValueEnum)]
enum Choice {
    Auto,
    Gpu,
    Cpu,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let Cmd::Repl(a) = cli.cmd;
    let kind = match a.backend {
        Choice::Auto => BackendKind::Auto,
        Choice::Gpu => BackendKind::Gpu,
        Choice::Cpu => BackendKind::Cpu,
    };
    let source = match (a.tpch, &a.graph) {
        (Some(sf), _) => Some(DataSource::Tpch(sf)),
        (None, Some(g)) => Some(DataSource::Graph(
            g.clone()
                .with_symmetrize(a.symmetrize)
                .with_degree_order(a.degree_order),
        )),
        _ => None,
    };
    let interactive = std::io::stdin().is_terminal();
    let (mut session, notice) = match Session::new(
        kind,
        a.data.clone(),
        source,
        interactive && std::io::stderr().is_terminal(),
    ) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fox: error: {e}");
            return ExitCode::from(1);
        }
    };
    // With --devices, the notice is that of the devices opened below.
    if !notice.is_empty() && a.devices == fox_cli::Devices::Count(1) {
        eprint!("fox: {notice}");
    }
    session.set_join(a.join.choice());
    if a.devices != fox_cli::Devices::Count(1) {
        match session.set_devices(kind, a.devices) {
            Ok(notice) => eprint!("{}", notice.lines().map(|l| format!("fox: {l}\n")).collect::<String>()),
            Err(e) => {
                eprintln!("fox: error: {e}");
                session.close();
                return ExitCode::from(1);
            }
        }
    }
    // Ctrl-C sets the session's token: the query under way stops, and the session goes on.
    interrupt::install(&session.cancel_token(), None);
    let code = if interactive {
        match interactive_loop(&mut session) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("fox: error: {e:#}");
                ExitCode::from(1)
            }
        }
    } else {
        script(&mut session)
    };
    session.close();
    code
}

/// Writes what a line printed: results to standard output, errors to standard error, in
/// order. An error when standard output cannot be written (a reader that went away is
/// not one).
fn emit(out: &Out) -> anyhow::Result<()> {
    for (stream, text) in out.parts() {
        if *stream == Stream::Out {
            fox_cli::stdout::print(text)?;
        } else {
            eprint!("{text}");
        }
    }
    Ok(())
}

/// Runs the statements of standard input (not a terminal): 0 when every one succeeded,
/// 1 when one failed (a line that is not UTF-8 text is one, and is skipped), 130 when
/// Ctrl-C stopped it.
fn script(session: &mut Session) -> ExitCode {
    let mut input = std::io::stdin().lock();
    let mut failed = false;
    let mut bytes = Vec::new();
    let interrupts = interrupt::count();
    for number in 1.. {
        bytes.clear();
        match input.read_until(b'\n', &mut bytes) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                eprintln!("fox: error: cannot read standard input: {e}");
                failed = true;
                break;
            }
        }
        if bytes.ends_with(b"\n") {
            bytes.pop();
            if bytes.ends_with(b"\r") {
                bytes.pop();
            }
        }
        let mut out = Out::new();
        let r = match std::str::from_utf8(&bytes) {
            Ok(line) => session.line(line, &mut out),
            Err(e) => {
                out.error(not_utf8(number, &bytes, &e));
                Input::Done
            }
        };
        failed |= out.failed();
        if let Err(e) = emit(&out) {
            eprintln!("fox: error: {e:#}");
            return ExitCode::from(1);
        }
        if out.interrupted() || interrupt::count() > interrupts {
            if !out.interrupted() {
                eprintln!("interrupted");
            }
            return ExitCode::from(interrupt::STATUS);
        }
        if matches!(r, Input::Quit) {
            break;
        }
    }
    if session.in_statement() {
        eprintln!("error: the input ended inside a statement (a statement ends with `.`)");
        failed = true;
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// The error for line `number` of the input, which is not UTF-8 text.
fn not_utf8(number: usize, bytes: &[u8], e: &std::str::Utf8Error) -> String {
    let at = e.valid_up_to();
    // The valid prefix is text: the column counts its characters.
    let column = std::str::from_utf8(&bytes[..at]).map_or(at, |s| s.chars().count()) + 1;
    format!(
        "error: line {number}, column {column}: the line is not UTF-8 text (byte 0x{:02X}); it was skipped\n",
        bytes[at]
    )
}

/// Completion of commands and predicate names.
struct Helper {
    names: std::rc::Rc<std::cell::RefCell<Vec<String>>>,
}

impl rustyline::completion::Completer for Helper {
    type Candidate = String;

    fn complete(&self, line: &str, pos: usize, _: &rustyline::Context<'_>) -> rustyline::Result<(usize, Vec<String>)> {
        let start = line[..pos]
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':' || c == '.'))
            .map_or(0, |i| i + 1);
        let word = &line[start..pos];
        if word.is_empty() {
            return Ok((pos, Vec::new()));
        }
        let mut c: Vec<String> = self
            .names
            .borrow()
            .iter()
            .map(|n| n.split_whitespace().next().unwrap_or(n).to_string())
            .filter(|n| n.starts_with(word))
            .collect();
        c.sort();
        c.dedup();
        Ok((start, c))
    }
}

impl rustyline::hint::Hinter for Helper {
    type Hint = String;
}
impl rustyline::highlight::Highlighter for Helper {}
impl rustyline::validate::Validator for Helper {}
impl rustyline::Helper for Helper {}

/// The interactive session; an error when standard output cannot be written.
fn interactive_loop(session: &mut Session) -> anyhow::Result<()> {
    let names = std::rc::Rc::new(std::cell::RefCell::new(session.names()));
    let mut ed = match rustyline::Editor::<Helper, rustyline::history::FileHistory>::new() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("fox: error: cannot start the line editor: {e}");
            return Ok(());
        }
    };
    ed.set_helper(Some(Helper { names: names.clone() }));
    let history = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".fox_history"));
    if let Some(h) = &history {
        let _ = ed.load_history(h);
    }
    let mut written = fox_cli::stdout::print(
        "Fox REPL: statements end with `.`; `?- body.` asks a query; `.help` lists the commands.\n",
    );
    // The lines of the statement being typed: history keeps whole statements.
    let mut typed: Vec<String> = Vec::new();
    while written.is_ok() {
        let prompt = if session.in_statement() { "  ...> " } else { "fox> " };
        match ed.readline(prompt) {
            Ok(line) => {
                let mut out = Out::new();
                let r = session.line(&line, &mut out);
                if !line.trim().is_empty() || !typed.is_empty() {
                    typed.push(line);
                }
                if !session.in_statement() && !typed.is_empty() {
                    let _ = ed.add_history_entry(typed.join("\n"));
                    typed.clear();
                }
                written = emit(&out);
                *names.borrow_mut() = session.names();
                if matches!(r, Input::Quit) {
                    break;
                }
            }
            // Ctrl-C while typing drops the statement begun.
            Err(rustyline::error::ReadlineError::Interrupted) => {
                session.discard_statement();
                typed.clear();
            }
            // A line that is not UTF-8 text: it is dropped, with what was typed after it.
            Err(rustyline::error::ReadlineError::Io(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
                // SAFETY: tcflush on standard input (a terminal here) only discards input.
                unsafe { libc::tcflush(libc::STDIN_FILENO, libc::TCIFLUSH) };
                eprintln!("error: the line is not UTF-8 text; it was dropped");
            }
            Err(_) => break,
        }
    }
    if let Some(h) = &history {
        let _ = ed.save_history(h);
    }
    written
}
