//! `fox`: the interactive front door. `fox repl` reads statements (declarations, facts,
//! rules, directives), queries `?- body.` and commands (`.help`) from a terminal, with
//! history and completion, or from standard input without a prompt.

use clap::{Parser, Subcommand, ValueEnum};
use fox_cli::repl::{BackendKind, Input, Session};
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
    /// Reading from a pipe or a file (`fox repl < script`) runs the statements without
    /// prompts.
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
    if !notice.is_empty() {
        eprint!("fox: {notice}");
    }
    let written = if interactive {
        interactive_loop(&mut session)
    } else {
        let stdin = std::io::stdin();
        let mut written = Ok(());
        for line in stdin.lock().lines() {
            let Ok(line) = line else { break };
            let mut text = String::new();
            let r = session.line(&line, &mut text);
            written = fox_cli::stdout::print(&text);
            if written.is_err() || matches!(r, Input::Quit) {
                break;
            }
        }
        if written.is_ok() && session.in_statement() {
            written = fox_cli::stdout::print("error: the input ended inside a statement (a statement ends with `.`)\n");
        }
        written
    };
    session.close();
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fox: error: {e:#}");
            ExitCode::from(1)
        }
    }
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
    while written.is_ok() {
        let prompt = if session.in_statement() { "  ...> " } else { "fox> " };
        match ed.readline(prompt) {
            Ok(line) => {
                if !line.trim().is_empty() {
                    let _ = ed.add_history_entry(line.as_str());
                }
                let mut out = String::new();
                let r = session.line(&line, &mut out);
                written = fox_cli::stdout::print(&out);
                *names.borrow_mut() = session.names();
                if matches!(r, Input::Quit) {
                    break;
                }
            }
            Err(rustyline::error::ReadlineError::Interrupted) => continue,
            Err(_) => break,
        }
    }
    if let Some(h) = &history {
        let _ = ed.save_history(h);
    }
    written
}
