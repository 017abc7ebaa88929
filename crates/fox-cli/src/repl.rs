//! The REPL (`fox repl`): a session program built statement by statement, queries run
//! against loaded data, and commands to look at plans.
//!
//! A statement is a program item (declaration, fact, rule, `.input`, `.output`) or a query
//! `?- body.`; it ends with `.` (several lines may make one). Items are checked together
//! with the session's program and added only when the whole program is still correct,
//! so an error never changes the session. A query becomes the rule
//! `query(v1, …) <- body.` over the body's named variables, compiled with the session's
//! program and run; its rows are printed (the first 50, then a count).
//!
//! With generated data (`--tpch`, `--graph`), which cannot change during a session, the
//! answer of a query is kept with the program that produced it: asking again while the
//! program is the same answers from the stored result; any change of the program runs the
//! query again (the whole program, not only the strata that changed).

use crate::{check, Source};
use fox_kernel::KernelPlan;
use fox_runtime::{Backend, DataSource, Database, Resident, RunOptions};
use fox_syntax::ast::{Expr, ExprKind, Formula, Item, Literal};
use fox_syntax::diag::Diagnostic;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// Rows printed for a query before the count.
pub const SHOWN_ROWS: usize = 50;

/// The name of the predicate a query becomes.
const QUERY_PRED: &str = "query";

/// Where the backend comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    Auto,
    Gpu,
    Cpu,
}

/// One accepted program item, as the user wrote it.
#[derive(Clone, Debug)]
struct Stmt {
    text: String,
}

/// What a line or statement asks for.
pub enum Input {
    /// More lines are needed to end the statement.
    Incomplete,
    /// A statement or command was handled; keep going.
    Done,
    /// `.quit`.
    Quit,
}

/// A REPL session.
pub struct Session {
    stmts: Vec<Stmt>,
    /// Lines of a statement not yet ended with `.`.
    pending: String,
    backend: Box<dyn Backend>,
    backend_name: String,
    data_dir: Option<PathBuf>,
    source: Option<DataSource>,
    /// The loaded data and the plans it was loaded for.
    db: Option<(Arc<Database>, Vec<KernelPlan>)>,
    resident: Resident,
    timing: bool,
    color: bool,
    /// With generated data: results of queries, by the program text that produced them.
    answers: HashMap<String, fox_runtime::OutputTable>,
    /// Counter of statements, for diagnostics' file names.
    count: usize,
}

impl Session {
    pub fn new(
        kind: BackendKind,
        data_dir: Option<PathBuf>,
        source: Option<DataSource>,
        color: bool,
    ) -> Result<(Session, String), String> {
        let (backend, notice) = make_backend(kind)?;
        let backend_name = backend.name();
        Ok((
            Session {
                stmts: Vec::new(),
                pending: String::new(),
                backend,
                backend_name,
                data_dir,
                source,
                db: None,
                resident: Resident::default(),
                timing: false,
                color,
                answers: HashMap::new(),
                count: 0,
            },
            notice,
        ))
    }

    /// The names of the session's predicates and the commands (for completion).
    pub fn names(&self) -> Vec<String> {
        let mut out: Vec<String> = COMMANDS.iter().map(|(c, _)| c.to_string()).collect();
        if let Some(core) = self.core(&self.program_text()) {
            out.extend(core.preds.iter().map(|p| p.name.clone()));
        }
        out
    }

    /// True while a statement is open (for the continuation prompt).
    pub fn in_statement(&self) -> bool {
        !self.pending.trim().is_empty()
    }

    /// Handles one line of input, writing what it prints to `out`.
    pub fn line(&mut self, line: &str, out: &mut String) -> Input {
        let trimmed = line.trim();
        if self.pending.trim().is_empty() && is_command(trimmed) {
            self.pending.clear();
            return self.command(trimmed, out);
        }
        self.pending.push_str(line);
        self.pending.push('\n');
        if !ends_statement(&self.pending) {
            return Input::Incomplete;
        }
        let text = std::mem::take(&mut self.pending);
        self.statement(text.trim(), out);
        Input::Done
    }

    /// Ends the session: frees the device buffers.
    pub fn close(mut self) {
        let r = std::mem::take(&mut self.resident);
        r.release(self.backend.as_mut());
    }

    fn program_text(&self) -> String {
        let mut s = String::new();
        for st in &self.stmts {
            s.push_str(&st.text);
            s.push('\n');
        }
        s
    }

    fn core(&self, text: &str) -> Option<fox_sema::core::CoreProgram> {
        let src = Source {
            name: "<session>".into(),
            text: text.to_string(),
        };
        check(&src).core
    }

    fn statement(&mut self, text: &str, out: &mut String) {
        self.count += 1;
        if let Some(body) = text.strip_prefix("?-") {
            let body = body.trim();
            self.query(body, out);
            return;
        }
        self.add_items(text, &format!("<input:{}>", self.count), out);
    }

    /// Checks `text` (one or more items) with the session's program; adds its items when
    /// the result is correct, reports the errors otherwise.
    fn add_items(&mut self, text: &str, name: &str, out: &mut String) -> bool {
        let (ast, diags) = fox_syntax::parse(text);
        if diags.iter().any(Diagnostic::is_error) {
            out.push_str(&fox_syntax::diag::render(name, text, &diags, self.color));
            return false;
        }
        let items: Vec<String> = ast
            .items
            .iter()
            .map(|i| {
                let s = item_span(i);
                text[s.start as usize..s.end as usize].to_string()
            })
            .collect();
        let before = self.program_text();
        let combined = format!("{before}{text}\n");
        let src = Source {
            name: name.to_string(),
            text: combined.clone(),
        };
        let checked = check(&src);
        let errors: Vec<Diagnostic> = checked.diagnostics.iter().filter(|d| d.is_error()).cloned().collect();
        if !errors.is_empty() {
            out.push_str(&render_in(name, &before, text, &errors, self.color));
            return false;
        }
        if let Some(core) = &checked.core {
            if core.preds.iter().any(|p| p.name == QUERY_PRED) {
                out.push_str(&format!(
                    "error: `{QUERY_PRED}` is the name queries use; name the predicate otherwise\n"
                ));
                return false;
            }
        }
        let n = items.len();
        self.stmts.extend(items.into_iter().map(|text| Stmt { text }));
        let _ = writeln!(out, "ok ({n} item{} added)", if n == 1 { "" } else { "s" });
        true
    }

    /// The program of a query: the session's items without their `.output`s, the query
    /// rule and its `.output`. Returns the program and the query's variables.
    fn query_program(&self, body: &str, out: &mut String) -> Option<(String, Vec<String>)> {
        let body = body.trim().trim_end_matches('.').trim();
        if body.is_empty() {
            out.push_str("error: a query needs a body: `?- edge(x, y).`\n");
            return None;
        }
        // The variables of the body, in the order they first appear.
        let probe = format!("{QUERY_PRED}() <- {body}.");
        let (ast, diags) = fox_syntax::parse(&probe);
        if diags.iter().any(Diagnostic::is_error) {
            // Point at the body as the user wrote it.
            let shift = QUERY_PRED.len() + 6;
            let shifted: Vec<Diagnostic> = diags.into_iter().map(|d| shift_diag(d, shift, body.len())).collect();
            out.push_str(&fox_syntax::diag::render("<query>", body, &shifted, self.color));
            return None;
        }
        let mut vars = Vec::new();
        if let Some(Item::Rule(r)) = ast.items.first() {
            if let Some(b) = &r.body {
                body_vars(b, &mut vars);
            }
        }
        let mut text = String::new();
        for st in &self.stmts {
            if !st.text.trim_start().starts_with(".output") {
                text.push_str(&st.text);
                text.push('\n');
            }
        }
        let _ = writeln!(text, "{QUERY_PRED}({}) <- {body}.", vars.join(", "));
        let _ = writeln!(text, ".output {QUERY_PRED}.");
        Some((text, vars))
    }

    fn compile(&self, program: &str, body: &str, out: &mut String) -> Option<(fox_ra::RaPlan, KernelPlan)> {
        let src = Source {
            name: "<query>".into(),
            text: program.to_string(),
        };
        let checked = check(&src);
        let errors: Vec<Diagnostic> = checked.diagnostics.iter().filter(|d| d.is_error()).cloned().collect();
        if !errors.is_empty() {
            // Errors in the query's body are shown against the body as the user wrote it.
            let rule = program.rfind(&format!("\n{QUERY_PRED}(")).map_or(0, |p| p + 1);
            let body_start = rule + program[rule..].find("<- ").map_or(0, |p| p + 3);
            let in_body = errors
                .iter()
                .all(|d| d.labels.iter().all(|l| l.span.start as usize >= body_start));
            if in_body {
                let shifted: Vec<Diagnostic> = errors
                    .into_iter()
                    .map(|d| shift_diag(d, body_start, body.len()))
                    .collect();
                out.push_str(&fox_syntax::diag::render("<query>", body, &shifted, self.color));
            } else {
                out.push_str(&fox_syntax::diag::render("<session>", program, &errors, self.color));
            }
            return None;
        }
        let core = checked.core?;
        let ra = match fox_ra::plan(&core) {
            Ok(p) => p,
            Err(e) => {
                let _ = writeln!(out, "error: cannot plan the query: {e}");
                return None;
            }
        };
        match fox_kernel::lower(&ra) {
            Ok(k) => Some((ra, k)),
            Err(e) => {
                let _ = writeln!(out, "error: cannot lower the query to kernels: {e}");
                None
            }
        }
    }

    /// The loaded data for `plan` (loading it, or loading it again with more columns,
    /// when the data comes from a generator).
    fn options_for(&mut self, plan: &KernelPlan, out: &mut String) -> Option<RunOptions> {
        let Some(source) = self.source.clone() else {
            return Some(RunOptions {
                data_dir: self.data_dir.clone(),
                timing: self.timing,
                database: None,
            });
        };
        let covered = self.db.as_ref().is_some_and(|(db, _)| db.covers(plan));
        if !covered {
            let mut plans: Vec<KernelPlan> = self.db.take().map(|(_, p)| p).unwrap_or_default();
            plans.push(plan.clone());
            // The device copies belong to the old data.
            let r = std::mem::take(&mut self.resident);
            r.release(self.backend.as_mut());
            let refs: Vec<&KernelPlan> = plans.iter().collect();
            match Database::load(&source, &refs, &crate::Bars::new()) {
                Ok(db) => self.db = Some((Arc::new(db), plans)),
                Err(e) => {
                    let _ = writeln!(out, "error: {e}");
                    return None;
                }
            }
        }
        Some(RunOptions {
            data_dir: None,
            timing: self.timing,
            database: self.db.as_ref().map(|(db, _)| db.clone()),
        })
    }

    fn run(&mut self, plan: &KernelPlan, out: &mut String) -> Option<fox_runtime::RunResult> {
        let opts = self.options_for(plan, out)?;
        let resident = opts.database.is_some().then_some(&mut self.resident);
        match fox_runtime::run_resident(plan, self.backend.as_mut(), &opts, resident) {
            Ok(r) => Some(r),
            Err(e) => {
                let _ = writeln!(out, "error: {e}");
                None
            }
        }
    }

    fn query(&mut self, body: &str, out: &mut String) {
        let Some((program, vars)) = self.query_program(body, out) else {
            return;
        };
        let start = Instant::now();
        let cached = if self.source.is_some() {
            self.answers.get(&program)
        } else {
            None
        };
        let table = match cached {
            Some(t) => t.clone(),
            None => {
                let Some((_, plan)) = self.compile(&program, body.trim().trim_end_matches('.').trim(), out) else {
                    return;
                };
                let Some(r) = self.run(&plan, out) else {
                    return;
                };
                let Some(t) = r.outputs.into_iter().next() else {
                    out.push_str("error: the query produced no output\n");
                    return;
                };
                if self.source.is_some() {
                    self.answers.insert(program, t.clone());
                }
                t
            }
        };
        print_answer(&table, vars.is_empty(), out);
        if self.timing {
            let _ = writeln!(out, "({:.3} ms)", start.elapsed().as_secs_f64() * 1e3);
        }
    }

    fn command(&mut self, line: &str, out: &mut String) -> Input {
        let (cmd, arg) = match line.split_once(char::is_whitespace) {
            Some((c, a)) => (c, a.trim()),
            None => (line, ""),
        };
        match cmd {
            ".quit" | ".exit" => return Input::Quit,
            ".help" => {
                out.push_str(HELP_HEAD);
                for (c, h) in COMMANDS {
                    let _ = writeln!(out, "  {c:<24} {h}");
                }
            }
            ".load" => self.load(arg, out),
            ".schema" => self.schema(arg, out),
            ".list" => {
                if self.stmts.is_empty() {
                    out.push_str("(no statements)\n");
                }
                for (i, s) in self.stmts.iter().enumerate() {
                    let _ = writeln!(out, "{:>3}  {}", i + 1, s.text);
                }
            }
            ".retract" => self.retract(arg, out),
            ".explain" => {
                let (analyze, q) = match arg.strip_prefix("analyze") {
                    Some(rest) if rest.is_empty() || rest.starts_with(char::is_whitespace) => (true, rest.trim()),
                    _ => (false, arg),
                };
                self.explain(q, analyze, out);
            }
            ".dot" => self.dot(arg, out),
            ".timing" => match arg {
                "on" => {
                    self.timing = true;
                    out.push_str("timing on\n");
                }
                "off" => {
                    self.timing = false;
                    out.push_str("timing off\n");
                }
                _ => out.push_str("error: `.timing on` or `.timing off`\n"),
            },
            ".backend" => {
                let kind = match arg {
                    "gpu" => BackendKind::Gpu,
                    "cpu" => BackendKind::Cpu,
                    "auto" => BackendKind::Auto,
                    _ => {
                        out.push_str("error: `.backend gpu`, `.backend cpu` or `.backend auto`\n");
                        return Input::Done;
                    }
                };
                match make_backend(kind) {
                    Ok((b, notice)) => {
                        let r = std::mem::take(&mut self.resident);
                        r.release(self.backend.as_mut());
                        self.backend = b;
                        self.backend_name = self.backend.name();
                        out.push_str(&notice);
                        let _ = writeln!(out, "backend: {}", self.backend_name);
                    }
                    Err(e) => {
                        let _ = writeln!(out, "error: {e} (the backend stays {})", self.backend_name);
                    }
                }
            }
            ".save" => {
                if arg.is_empty() {
                    out.push_str("error: `.save FILE.logic`\n");
                } else {
                    match std::fs::write(arg, self.program_text()) {
                        Ok(()) => {
                            let _ = writeln!(out, "saved {} statements to {arg}", self.stmts.len());
                        }
                        Err(e) => {
                            let _ = writeln!(out, "error: cannot write `{arg}`: {e}");
                        }
                    }
                }
            }
            other => {
                let _ = writeln!(out, "error: unknown command `{other}` (`.help` lists the commands)");
            }
        }
        Input::Done
    }

    fn load(&mut self, path: &str, out: &mut String) {
        if path.is_empty() {
            out.push_str("error: `.load FILE.logic`\n");
            return;
        }
        match std::fs::read_to_string(path) {
            Ok(text) => {
                self.add_items(&text, path, out);
            }
            Err(e) => {
                let _ = writeln!(out, "error: cannot read `{path}`: {e}");
            }
        }
    }

    fn schema(&self, pred: &str, out: &mut String) {
        let Some(core) = self.core(&self.program_text()) else {
            out.push_str("(no predicates)\n");
            return;
        };
        let mut shown = 0;
        for p in &core.preds {
            if !pred.is_empty() && p.name != pred {
                continue;
            }
            shown += 1;
            let cols: Vec<String> = p.columns.iter().map(|c| format!("{}: {}", c.name, c.ty)).collect();
            let kind = if p.input { "input" } else { "derived" };
            let _ = writeln!(out, "{}({})  {kind}", p.name, cols.join(", "));
        }
        if shown == 0 {
            if pred.is_empty() {
                out.push_str("(no predicates)\n");
            } else {
                let _ = writeln!(out, "error: no predicate `{pred}`");
            }
        }
    }

    fn retract(&mut self, arg: &str, out: &mut String) {
        let Some(n) = arg.parse::<usize>().ok().filter(|n| (1..=self.stmts.len()).contains(n)) else {
            let _ = writeln!(
                out,
                "error: `.retract N` with N from 1 to {} (see `.list`)",
                self.stmts.len()
            );
            return;
        };
        let removed = self.stmts.remove(n - 1);
        let text = self.program_text();
        let src = Source {
            name: "<session>".into(),
            text: text.clone(),
        };
        let checked = check(&src);
        let errors: Vec<Diagnostic> = checked.diagnostics.iter().filter(|d| d.is_error()).cloned().collect();
        if !errors.is_empty() {
            let _ = writeln!(
                out,
                "error: without statement {n} the program is not correct, so it stays:"
            );
            out.push_str(&fox_syntax::diag::render("<session>", &text, &errors, self.color));
            self.stmts.insert(n - 1, removed);
            return;
        }
        let _ = writeln!(out, "retracted {n}: {}", removed.text);
    }

    fn explain(&mut self, q: &str, analyze: bool, out: &mut String) {
        let body = q.strip_prefix("?-").unwrap_or(q).trim();
        let Some((program, _)) = self.query_program(body, out) else {
            return;
        };
        let body = body.trim_end_matches('.').trim();
        let Some((ra, plan)) = self.compile(&program, body, out) else {
            return;
        };
        if !analyze {
            out.push_str(&fox_ra::print_plan(&ra));
            out.push('\n');
            out.push_str(&fox_kernel::print_kernels(&plan));
            return;
        }
        let timing = std::mem::replace(&mut self.timing, true);
        let r = self.run(&plan, out);
        self.timing = timing;
        if let Some(r) = r {
            out.push_str(&fox_runtime::format_stats(&r.stats));
            let rows = r.outputs.first().map_or(0, |t| t.len());
            let _ = writeln!(out, "{rows} row{}", if rows == 1 { "" } else { "s" });
        }
    }

    fn dot(&mut self, arg: &str, out: &mut String) {
        // `.dot QUERY FILE.svg`: the file is the last word.
        let Some((q, file)) = arg.rsplit_once(char::is_whitespace) else {
            out.push_str("error: `.dot QUERY FILE.svg`\n");
            return;
        };
        let body = q.trim().strip_prefix("?-").unwrap_or(q.trim()).trim();
        let Some((program, _)) = self.query_program(body, out) else {
            return;
        };
        let Some((_, plan)) = self.compile(&program, body.trim_end_matches('.').trim(), out) else {
            return;
        };
        let dot = fox_kernel::to_dot(&plan);
        let svg = Path::new(file);
        let dot_path = svg.with_extension("dot");
        match std::process::Command::new("dot")
            .args(["-Tsvg", "-o"])
            .arg(svg)
            .stdin(std::process::Stdio::piped())
            .spawn()
        {
            Ok(mut child) => {
                use std::io::Write;
                let wrote = child.stdin.take().map(|mut i| i.write_all(dot.as_bytes())).transpose();
                match (wrote, child.wait()) {
                    (Ok(_), Ok(s)) if s.success() => {
                        let _ = writeln!(out, "wrote {}", svg.display());
                    }
                    _ => {
                        let _ = writeln!(out, "error: graphviz `dot` failed to write {}", svg.display());
                    }
                }
            }
            Err(_) => match std::fs::write(&dot_path, dot) {
                Ok(()) => {
                    let _ = writeln!(
                        out,
                        "graphviz `dot` is not installed: wrote {} (render it with `dot -Tsvg {} -o {}`)",
                        dot_path.display(),
                        dot_path.display(),
                        svg.display()
                    );
                }
                Err(e) => {
                    let _ = writeln!(out, "error: cannot write `{}`: {e}", dot_path.display());
                }
            },
        }
    }
}

const HELP_HEAD: &str = "Statements end with `.` and may span lines:\n  \
    edge(x, y) -> int32(x), int32(y).      a declaration\n  \
    edge(1, 2).                            a fact\n  \
    path(x, y) <- edge(x, y).              a rule\n  \
    .input edge.   .output path.           directives\n  \
    ?- path(1, y).                         a query (prints the bindings)\nCommands:\n";

/// The commands and their help lines.
pub const COMMANDS: &[(&str, &str)] = &[
    (".help", "this text"),
    (".load FILE.logic", "add the statements of a file"),
    (".schema [PRED]", "the predicates and their column types"),
    (".list", "the session's statements, numbered"),
    (".retract N", "remove statement N"),
    (".explain QUERY", "the relational plan and the kernel plan of a query"),
    (
        ".explain analyze QUERY",
        "run the query and show per-kernel times and memory",
    ),
    (
        ".dot QUERY FILE.svg",
        "draw the kernel plan (graphviz `dot`, else FILE.dot)",
    ),
    (".timing on|off", "print the time of each query"),
    (".backend gpu|cpu|auto", "where queries run"),
    (".save FILE.logic", "write the session's statements to a file"),
    (".quit", "leave (also end of input)"),
];

fn make_backend(kind: BackendKind) -> Result<(Box<dyn Backend>, String), String> {
    match kind {
        BackendKind::Cpu => Ok((Box::new(fox_cpu::CpuBackend::new()), String::new())),
        BackendKind::Gpu => fox_cuda::CudaBackend::new()
            .map(|g| (Box::new(g) as Box<dyn Backend>, String::new()))
            .map_err(|e| format!("no usable GPU: {e}")),
        BackendKind::Auto => match fox_cuda::CudaBackend::new() {
            Ok(g) => Ok((Box::new(g), String::new())),
            Err(e) => Ok((
                Box::new(fox_cpu::CpuBackend::new()),
                format!("no usable GPU ({e}); running on the CPU\n"),
            )),
        },
    }
}

/// A line that is a command rather than the start of a statement.
fn is_command(line: &str) -> bool {
    line.starts_with('.')
        && !line.starts_with(".input")
        && !line.starts_with(".output")
        && line[1..].starts_with(|c: char| c.is_ascii_alphabetic())
}

/// True when the text's last token is the `.` that ends a clause.
fn ends_statement(text: &str) -> bool {
    let (tokens, _) = fox_syntax::lexer::lex(text);
    matches!(tokens.last(), Some((_, fox_syntax::lexer::Token::Dot, _)))
}

fn item_span(i: &Item) -> fox_syntax::ast::Span {
    match i {
        Item::Decl(d) => d.span,
        Item::Rule(r) => r.span,
        Item::Input(d) => d.span,
        Item::Output(d) => d.span,
    }
}

/// Moves a diagnostic's spans back by `shift` bytes, clamped to `0..len`.
fn shift_diag(mut d: Diagnostic, shift: usize, len: usize) -> Diagnostic {
    for l in &mut d.labels {
        let a = (l.span.start as usize).saturating_sub(shift).min(len);
        let b = (l.span.end as usize).saturating_sub(shift).clamp(a, len);
        l.span = fox_syntax::ast::Span {
            start: a as u32,
            end: b as u32,
        };
    }
    d
}

/// Renders the errors of `text` (added after `before`): against the statement itself when
/// they all point into it, against the whole session program otherwise.
fn render_in(name: &str, before: &str, text: &str, errors: &[Diagnostic], color: bool) -> String {
    let off = before.len();
    let inside = errors
        .iter()
        .all(|d| d.labels.iter().all(|l| l.span.start as usize >= off));
    if inside {
        let shifted: Vec<Diagnostic> = errors.iter().cloned().map(|d| shift_diag(d, off, text.len())).collect();
        fox_syntax::diag::render(name, text, &shifted, color)
    } else {
        fox_syntax::diag::render("<session>", &format!("{before}{text}\n"), errors, color)
    }
}

fn expr_vars(e: &Expr, out: &mut Vec<String>) {
    match &e.kind {
        ExprKind::Var(v) => {
            if !out.contains(v) {
                out.push(v.clone());
            }
        }
        ExprKind::Anon | ExprKind::Lit(_) => {}
        ExprKind::Neg(x) => expr_vars(x, out),
        ExprKind::Bin(_, a, b) => {
            expr_vars(a, out);
            expr_vars(b, out);
        }
        ExprKind::Call(_, xs) | ExprKind::FuncTerm(_, xs) => xs.iter().for_each(|x| expr_vars(x, out)),
    }
}

fn lit_vars(l: &Literal, out: &mut Vec<String>) {
    match l {
        Literal::Atom(a) => a.args.iter().for_each(|x| expr_vars(x, out)),
        // Variables only under a negation are not bindings.
        Literal::Not(..) => {}
        Literal::Compare(c) => {
            expr_vars(&c.first, out);
            c.rest.iter().for_each(|(_, x)| expr_vars(x, out));
        }
        Literal::In { expr, .. } => expr_vars(expr, out),
        Literal::Paren(f, _) => formula_vars(f, out),
    }
}

fn formula_vars(f: &Formula, out: &mut Vec<String>) {
    match f {
        Formula::Or(fs, _) | Formula::And(fs, _) => fs.iter().for_each(|x| formula_vars(x, out)),
        Formula::Lit(l) => lit_vars(l, out),
    }
}

fn body_vars(b: &fox_syntax::ast::Body, out: &mut Vec<String>) {
    match b {
        fox_syntax::ast::Body::Formula(f) => formula_vars(f, out),
        fox_syntax::ast::Body::Agg { body, .. } => formula_vars(body, out),
    }
}

/// Prints a query's answer: its rows (the first [`SHOWN_ROWS`]) and their count, or
/// `true`/`false` for a query without variables.
fn print_answer(t: &fox_runtime::OutputTable, closed: bool, out: &mut String) {
    if closed {
        out.push_str(if t.is_empty() { "false\n" } else { "true\n" });
        return;
    }
    let n = t.len();
    let shown = if n > SHOWN_ROWS {
        let rows: Vec<Vec<fox_sema::core::Value>> = (0..SHOWN_ROWS).map(|r| t.row(r)).collect();
        fox_runtime::OutputTable::from_rows(t.name.clone(), t.columns.clone(), rows)
    } else {
        t.clone()
    };
    let table = fox_runtime::format_table(&shown);
    // format_table ends with its own row count; ours counts every row.
    let body: Vec<&str> = table.lines().collect();
    let keep = if body.last().is_some_and(|l| l.ends_with("rows") || l.ends_with("row")) {
        &body[..body.len() - 1]
    } else {
        &body[..]
    };
    for l in keep {
        out.push_str(l);
        out.push('\n');
    }
    if n > SHOWN_ROWS {
        let _ = writeln!(out, "… {n} rows ({SHOWN_ROWS} shown)");
    } else {
        let _ = writeln!(out, "{n} row{}", if n == 1 { "" } else { "s" });
    }
}
