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
//! Queries are answered incrementally. Every predicate has a fingerprint: a hash of the
//! text of the items that define it (its rules and facts), its column types, and the
//! fingerprints of the predicates its rules read, so that a recursive component (one
//! stratum) has one fingerprint for all its predicates; an input's fingerprint is its
//! declaration and the identity of the data (the generator, or the file's size and
//! modification time). The contents of the derived predicates a query computed are kept,
//! by fingerprint; a later query reads every predicate whose fingerprint is kept as an
//! input whose rows come from memory (its rules are dropped), and computes only the
//! predicates it needs whose fingerprint changed, and the query rule. Adding or retracting
//! a rule changes the fingerprints of its predicate and of everything that depends on it,
//! so exactly those are computed again; only the contents of the current fingerprints are
//! kept. The answers of the last few queries are kept the same way, by the fingerprint of
//! the query rule. The data (`--data DIR` or the current directory, or generated data) is
//! loaded once into a [`Database`] shared by the runs, and loaded again when a query needs
//! another table or column, or when a file changed.
//!
//! The session's [`CancelToken`] (set by Ctrl-C) stops the run or load under way; the
//! statement then ends with `interrupted` and the session is as it was before it: the
//! contents of predicates and answers are kept only from runs that finished, and a load
//! that did not finish leaves the data loaded before. What a line prints is an [`Out`]:
//! results for standard output, errors for standard error.

use crate::{check, Source};
use fox_kernel::{InputRel, KernelPlan};
use fox_runtime::{Backend, CancelToken, DataSource, Database, OutputTable, Resident, RunOptions, RuntimeError};
use fox_sema::core::{CoreLit, CoreProgram, InputSpec, OutputSpec, PredId, PredInfo};
use fox_syntax::ast::{Expr, ExprKind, Formula, Item, Literal};
use fox_syntax::diag::Diagnostic;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// Rows printed for a query before the count.
pub const SHOWN_ROWS: usize = 50;

/// The name of the predicate a query becomes.
const QUERY_PRED: &str = "query";

/// How many answers of queries are kept (by the fingerprint of the query rule).
const ANSWERS_KEPT: usize = 16;

/// A predicate's fingerprint: a hash of everything its contents depend on.
type Fp = u128;

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

/// Where a piece of what the session prints goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// Results: answers, plans, acknowledgements (standard output).
    Out,
    /// Errors and notices (standard error).
    Err,
}

/// What handling a line printed, in order, each piece with its stream; and whether a
/// statement or command failed, or a run was interrupted.
#[derive(Debug, Default)]
pub struct Out {
    parts: Vec<(Stream, String)>,
    failed: bool,
    interrupted: bool,
}

impl Out {
    pub fn new() -> Out {
        Out::default()
    }

    fn push_to(&mut self, stream: Stream, s: &str) {
        match self.parts.last_mut() {
            Some((last, text)) if *last == stream => text.push_str(s),
            _ => self.parts.push((stream, s.to_string())),
        }
    }

    /// Results.
    pub fn push_str(&mut self, s: &str) {
        self.push_to(Stream::Out, s);
    }

    pub fn push(&mut self, c: char) {
        self.push_to(Stream::Out, c.encode_utf8(&mut [0; 4]));
    }

    /// An error: the statement or command failed.
    pub fn error(&mut self, s: impl AsRef<str>) {
        self.failed = true;
        self.push_to(Stream::Err, s.as_ref());
    }

    /// A notice, on the error stream, that is not a failure.
    pub fn note(&mut self, s: impl AsRef<str>) {
        self.push_to(Stream::Err, s.as_ref());
    }

    /// The pieces, in the order they were printed.
    pub fn parts(&self) -> &[(Stream, String)] {
        &self.parts
    }

    /// The text of one stream.
    pub fn text(&self, stream: Stream) -> String {
        self.parts
            .iter()
            .filter(|(s, _)| *s == stream)
            .map(|(_, t)| t.as_str())
            .collect()
    }

    /// True when an error was reported (an interrupted run is one).
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// True when a run was stopped by the session's [`CancelToken`].
    pub fn interrupted(&self) -> bool {
        self.interrupted
    }

    /// The error of a run or a load: `interrupted` when it was cancelled; an error of the
    /// program located in the session's text when `plan` (the run's) holds it.
    fn run_error(&mut self, e: &RuntimeError, plan: Option<&KernelPlan>, color: bool) {
        if *e == RuntimeError::Cancelled {
            self.interrupted = true;
            self.error("interrupted\n");
        } else if let Some(text) = plan.and_then(|p| e.located(p, color)) {
            self.error(text);
        } else {
            self.error(format!("error: {e}\n"));
        }
    }
}

impl std::fmt::Write for Out {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.push_str(s);
        Ok(())
    }
}

/// A REPL session.
pub struct Session {
    stmts: Vec<Stmt>,
    /// Lines of a statement not yet ended with `.`.
    pending: String,
    /// The device queries run on: the only one, or the first of `--devices`.
    backend: Box<dyn Backend + Send>,
    /// With `--devices N`: the other N - 1 devices, which run every query with `backend`
    /// (SPMD, [`fox_runtime::run_devices`]); empty for one device.
    others: Vec<Box<dyn Backend + Send>>,
    /// The devices asked for (`--devices`); `.backend` opens as many.
    devices: crate::Devices,
    backend_name: String,
    data_dir: Option<PathBuf>,
    source: Option<DataSource>,
    /// The loaded data.
    loaded: Option<Loaded>,
    /// The device copies of the loaded tables' columns: one [`Resident`] per device, in
    /// the order `backend`, `others` (each device keeps its part of a column).
    residents: Vec<Resident>,
    timing: bool,
    color: bool,
    /// The contents of derived predicates computed by earlier queries, by fingerprint.
    cache: HashMap<Fp, Arc<OutputTable>>,
    /// The answers of the last queries, by the fingerprint of the query predicate.
    answers: VecDeque<(Fp, OutputTable)>,
    /// Counter of statements, for diagnostics' file names.
    count: usize,
    /// Stops the run or load under way when set; cleared when a statement or command
    /// starts.
    cancel: CancelToken,
    /// The algorithm forced on every equi-join of the queries (`fox repl --join`).
    join: fox_phys::JoinChoice,
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
                others: Vec::new(),
                devices: crate::Devices::Count(1),
                backend_name,
                data_dir,
                source,
                loaded: None,
                residents: Vec::new(),
                timing: false,
                color,
                cache: HashMap::new(),
                answers: VecDeque::new(),
                count: 0,
                cancel: CancelToken::new(),
                join: fox_phys::JoinChoice::Auto,
            },
            notice,
        ))
    }

    /// Forces `join` on every equi-join of the queries planned from now on.
    pub fn set_join(&mut self, join: fox_phys::JoinChoice) {
        self.join = join;
    }

    /// Runs the queries from now on over `devices` of the backend `kind` names (as
    /// [`crate::open_backends`] opens them: N GPUs from the first, or N simulated devices
    /// on the CPU): each query is planned for that many devices and run over all of them
    /// ([`fox_runtime::run_devices_resident`]), each device keeping its part of the loaded
    /// tables' columns between queries (until the data changes), with the
    /// answers of one device. Returns the notice of `auto`'s choice; on an error the
    /// session's devices stay as they were.
    pub fn set_devices(&mut self, kind: BackendKind, devices: crate::Devices) -> Result<String, String> {
        let (backend, others, notice) = open_devices(kind, devices)?;
        self.replace_devices(backend, others);
        self.devices = devices;
        Ok(notice)
    }

    /// The number of devices each query runs over.
    pub fn device_count(&self) -> usize {
        1 + self.others.len()
    }

    /// Takes `backend` and `others` as the session's devices, freeing the device copies
    /// of the ones before.
    fn replace_devices(&mut self, backend: Box<dyn Backend + Send>, others: Vec<Box<dyn Backend + Send>>) {
        self.release_resident();
        self.backend = backend;
        self.others = others;
        self.backend_name = match self.others.len() {
            0 => self.backend.name(),
            k => format!("{} x {}", k + 1, self.backend.name()),
        };
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

    /// Drops the lines of the statement not yet ended; true when there were any.
    pub fn discard_statement(&mut self) -> bool {
        let open = self.in_statement();
        self.pending.clear();
        open
    }

    /// The token that stops the query (or `.explain analyze`) running now: setting it
    /// from a signal handler or another thread makes that statement end with
    /// `interrupted`, leaving the session as it was before the statement. It is cleared
    /// when the next statement or command starts.
    pub fn cancel_token(&self) -> CancelToken {
        self.cancel.clone()
    }

    /// Handles one line of input, writing what it prints to `out`.
    pub fn line(&mut self, line: &str, out: &mut Out) -> Input {
        let trimmed = line.trim();
        if self.pending.trim().is_empty() && is_command(trimmed) {
            self.pending.clear();
            self.cancel.reset();
            return self.command(trimmed, out);
        }
        self.pending.push_str(line);
        self.pending.push('\n');
        if !ends_statement(&self.pending) {
            return Input::Incomplete;
        }
        let text = std::mem::take(&mut self.pending);
        self.cancel.reset();
        self.statement(text.trim(), out);
        Input::Done
    }

    /// Ends the session: frees the device buffers.
    pub fn close(mut self) {
        self.release_resident();
    }

    /// Frees the device copies of the loaded tables on every device.
    fn release_resident(&mut self) {
        let devices = std::iter::once(&mut self.backend).chain(self.others.iter_mut());
        for (r, b) in std::mem::take(&mut self.residents).into_iter().zip(devices) {
            r.release(b.as_mut());
        }
    }

    /// Frees the device copies of the columns of the tables named `names` on every
    /// device.
    fn release_resident_tables(&mut self, names: &[&str]) {
        let devices = std::iter::once(&mut self.backend).chain(self.others.iter_mut());
        for (r, b) in self.residents.iter_mut().zip(devices) {
            r.release_tables(names, b.as_mut());
        }
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

    fn statement(&mut self, text: &str, out: &mut Out) {
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
    fn add_items(&mut self, text: &str, name: &str, out: &mut Out) -> bool {
        let (ast, diags) = fox_syntax::parse(text);
        if diags.iter().any(Diagnostic::is_error) {
            out.error(fox_syntax::diag::render(name, text, &diags, self.color));
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
            out.error(render_in(name, &before, text, &errors, self.color));
            return false;
        }
        if let Some(core) = &checked.core {
            if core.preds.iter().any(|p| p.name == QUERY_PRED) {
                out.error(format!(
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
    /// rule and its `.output`, with the place of each item in the text.
    fn query_program(&self, body: &str, out: &mut Out) -> Option<QueryProgram> {
        let body = body.trim().trim_end_matches('.').trim();
        if body.is_empty() {
            out.error("error: a query needs a body: `?- edge(x, y).`\n");
            return None;
        }
        // The variables of the body, in the order they first appear.
        let probe = format!("{QUERY_PRED}() <- {body}.");
        let (ast, diags) = fox_syntax::parse(&probe);
        if diags.iter().any(Diagnostic::is_error) {
            // Point at the body as the user wrote it.
            let shift = QUERY_PRED.len() + 6;
            let shifted: Vec<Diagnostic> = diags.into_iter().map(|d| shift_diag(d, shift, body.len())).collect();
            out.error(fox_syntax::diag::render("<query>", body, &shifted, self.color));
            return None;
        }
        let mut vars = Vec::new();
        if let Some(Item::Rule(r)) = ast.items.first() {
            if let Some(b) = &r.body {
                body_vars(b, &mut vars);
            }
        }
        let mut text = String::new();
        let mut items = Vec::new();
        for st in &self.stmts {
            if !st.text.trim_start().starts_with(".output") {
                items.push(text.len()..text.len() + st.text.len());
                text.push_str(&st.text);
                text.push('\n');
            }
        }
        let rule = format!("{QUERY_PRED}({}) <- {body}.", vars.join(", "));
        items.push(text.len()..text.len() + rule.len());
        let _ = writeln!(text, "{rule}");
        let _ = writeln!(text, ".output {QUERY_PRED}.");
        Some(QueryProgram {
            text,
            vars,
            items,
            body: body.to_string(),
        })
    }

    /// Checks the program of a query; reports its errors (against the query's body when
    /// they all lie in it).
    fn check_query(&self, qp: &QueryProgram, out: &mut Out) -> Option<CoreProgram> {
        let (program, body) = (&qp.text, &qp.body);
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
                out.error(fox_syntax::diag::render("<query>", body, &shifted, self.color));
            } else {
                out.error(fox_syntax::diag::render("<session>", program, &errors, self.color));
            }
            return None;
        }
        checked.core
    }

    /// Where the data comes from: the generator, or the files of `--data DIR` (the
    /// current directory without it).
    fn data_source(&self) -> DataSource {
        self.source
            .clone()
            .unwrap_or_else(|| DataSource::Files(self.data_dir.clone().unwrap_or_default()))
    }

    /// Checks a query's program and takes the fingerprints of its predicates; forgets the
    /// kept contents of predicates whose fingerprints are no longer the program's.
    fn analyze(&mut self, qp: &QueryProgram, out: &mut Out) -> Option<Analysis> {
        let core = self.check_query(qp, out)?;
        let Some(query) = core.preds.iter().position(|p| p.name == QUERY_PRED) else {
            out.error("error: the query produced no output\n");
            return None;
        };
        let a = analysis(core, PredId(query as u32), qp, &self.data_source());
        let live: HashSet<Fp> = a.fps.iter().copied().collect();
        self.cache.retain(|fp, _| live.contains(fp));
        Some(a)
    }

    /// The relational and kernel plans of a query program with the predicates that are
    /// kept read from memory; when such a program cannot be planned, the whole program.
    fn plan_query(
        &self,
        a: &Analysis,
        stats: &fox_phys::Statistics,
        options: &fox_kernel::LowerOptions,
        out: &mut Out,
    ) -> Option<(Rewritten, fox_phys::PhysPlan, KernelPlan)> {
        let rw = rewrite(a, &self.cache);
        let mut msg = Out::new();
        let devices = self.device_count();
        if let Some((ra, k)) = plan_core(&rw.core, stats, options, self.join, devices, &mut msg) {
            return Some((rw, ra, k));
        }
        if rw.reused.is_empty() {
            out.error(msg.text(Stream::Err));
            return None;
        }
        let rw = rewrite(a, &HashMap::new());
        let (ra, k) = plan_core(&rw.core, stats, options, self.join, devices, out)?;
        Some((rw, ra, k))
    }

    /// The loaded data with the tables `wanted` (declaration and the columns read),
    /// loading them (again) when they are not all loaded with those columns, or when a
    /// file's stamp differs from `stamps` (taken when the fingerprints were).
    fn data_for(
        &mut self,
        wanted: Vec<(InputRel, Vec<bool>)>,
        stamps: &BTreeMap<String, String>,
        out: &mut Out,
    ) -> Option<Arc<Database>> {
        let source = self.data_source();
        let stamp_of = |input: &InputRel| -> String {
            match &source {
                DataSource::Files(dir) => stamps
                    .get(&input.name)
                    .cloned()
                    .unwrap_or_else(|| file_stamp(&dir.join(&input.file))),
                _ => String::new(),
            }
        };
        if let Some(l) = &self.loaded {
            let fresh = wanted.iter().all(|(i, u)| {
                l.tables.get(&i.name).is_some_and(|(li, lu, st)| {
                    li == i && u.iter().zip(lu).all(|(a, b)| !*a || *b) && *st == stamp_of(i)
                })
            });
            if fresh {
                return Some(l.db.clone());
            }
        }
        // Load again: the tables wanted, with the other tables and columns loaded before
        // (so that queries taking turns do not load in turn), when they still hold.
        let only_wanted: BTreeMap<String, LoadedTable> = wanted
            .into_iter()
            .map(|(i, u)| {
                let st = stamp_of(&i);
                (i.name.clone(), (i, u, st))
            })
            .collect();
        let mut tables = only_wanted.clone();
        // Kept until the new data is loaded: a load that fails leaves the session's data
        // as it was.
        let before = self.loaded.take();
        for (name, (li, lu, _)) in before.iter().flat_map(|l| &l.tables) {
            match tables.get_mut(name) {
                Some((i, u, _)) => {
                    if i == li {
                        u.iter_mut().zip(lu).for_each(|(a, b)| *a |= *b);
                    }
                }
                None => {
                    let st = stamp_of(li);
                    tables.insert(name.clone(), (li.clone(), lu.clone(), st));
                }
            }
        }
        // The device copies belong to the old data.
        self.release_resident();
        let bars = crate::Bars::new();
        let progress = fox_runtime::CancellableProgress {
            progress: &bars,
            cancel: &self.cancel,
        };
        let load = |t: &BTreeMap<String, LoadedTable>| {
            Database::load_tables(
                &source,
                t.values().map(|(i, u, _)| (i.clone(), u.clone())).collect(),
                &progress,
            )
        };
        let loaded = match load(&tables) {
            Ok(db) => Ok((db, tables)),
            // A table loaded before may be gone: the wanted ones alone.
            Err(e) if e != RuntimeError::Cancelled && tables.len() > only_wanted.len() => {
                load(&only_wanted).map(|db| (db, only_wanted))
            }
            Err(e) => Err(e),
        };
        match loaded {
            Ok((db, tables)) => {
                let db = Arc::new(db);
                self.loaded = Some(Loaded {
                    db: db.clone(),
                    tables,
                    stats: None,
                });
                Some(db)
            }
            Err(e) => {
                self.loaded = before;
                out.run_error(&e, None, self.color);
                None
            }
        }
    }

    /// The data `plan` reads: the loaded tables (loaded first when needed), with the
    /// predicates of `rw.reused` read from memory.
    fn database(&mut self, plan: &KernelPlan, rw: &Rewritten, out: &mut Out) -> Option<Arc<Database>> {
        let reused = |name: &str| rw.reused.iter().any(|(n, _)| n == name);
        let wanted: Vec<(InputRel, Vec<bool>)> = plan
            .inputs
            .iter()
            .cloned()
            .zip(fox_runtime::database::used_input_columns(plan))
            .filter(|(i, _)| !reused(&i.name))
            .collect();
        let base = self.data_for(wanted, &rw.stamps, out)?;
        if rw.reused.is_empty() {
            return Some(base);
        }
        let extra: Vec<(InputRel, &OutputTable)> = rw
            .reused
            .iter()
            .filter_map(|(n, t)| {
                plan.inputs
                    .iter()
                    .find(|i| i.name == *n)
                    .map(|i| (i.clone(), t.as_ref()))
            })
            .collect();
        match base.with_tables(&extra) {
            Ok(db) => Some(Arc::new(db)),
            Err(e) => {
                out.error(format!("error: {e}\n"));
                None
            }
        }
    }

    /// The statistics of the data `plan` reads (see [`Session::database`]): those of the
    /// loaded tables, collected once per load, and those of the predicates read from
    /// memory.
    fn statistics(&mut self, plan: &KernelPlan, rw: &Rewritten, out: &mut Out) -> Option<fox_phys::Statistics> {
        let db = self.database(plan, rw, out)?;
        let mut stats = match self.loaded.as_mut() {
            Some(loaded) => loaded
                .stats
                .get_or_insert_with(|| fox_runtime::stats::of_database(&loaded.db))
                .clone(),
            None => fox_phys::Statistics::none(),
        };
        let names: Vec<&str> = rw.reused.iter().map(|(n, _)| n.as_str()).collect();
        for (name, s) in fox_runtime::stats::of_tables(&db, &names).iter() {
            stats.insert(name, s.clone());
        }
        Some(stats)
    }

    /// The plans of a query made with the statistics of its data: planned once to learn
    /// the tables it reads, then, with their data loaded, with their statistics. With
    /// `quiet`, data that cannot be loaded is not an error: the plan is made without
    /// statistics.
    fn plan_with_data(
        &mut self,
        a: &Analysis,
        options: &fox_kernel::LowerOptions,
        quiet: bool,
        out: &mut Out,
    ) -> Option<(Rewritten, fox_phys::PhysPlan, KernelPlan)> {
        let none = fox_phys::Statistics::none();
        let (rw, _, plan) = self.plan_query(a, &none, &fox_kernel::LowerOptions::default(), out)?;
        let stats = if quiet {
            self.statistics(&plan, &rw, &mut Out::new()).unwrap_or(none)
        } else {
            self.statistics(&plan, &rw, out)?
        };
        self.plan_query(a, &stats, options, out)
    }

    /// Runs `plan` on the loaded data, with the predicates of `rw.reused` read from memory.
    fn run(&mut self, plan: &KernelPlan, rw: &Rewritten, out: &mut Out) -> Option<fox_runtime::RunResult> {
        let db = self.database(plan, rw, out)?;
        // Tables in memory are uploaded by each run (and a device copy of a loaded table
        // of the same name must not stand in for them).
        let names: Vec<&str> = rw.reused.iter().map(|(n, _)| n.as_str()).collect();
        self.release_resident_tables(&names);
        let opts = RunOptions {
            data_dir: None,
            timing: self.timing,
            database: Some(db),
            memory_limit: None,
            cancel: Some(self.cancel.clone()),
            ..Default::default()
        };
        // Over several devices each keeps its part of the database's columns.
        let n = self.device_count();
        self.residents.resize_with(n, Resident::default);
        let mut devices: Vec<&mut (dyn Backend + Send)> = vec![self.backend.as_mut()];
        devices.extend(self.others.iter_mut().map(|b| b.as_mut()));
        let r = fox_runtime::run_devices_resident(plan, devices, &opts, &mut self.residents);
        self.release_resident_tables(&names);
        match r {
            Ok(r) => Some(r),
            Err(e) => {
                out.run_error(&e, Some(plan), self.color);
                None
            }
        }
    }

    /// Plans and runs a query program, keeps the contents of the predicates it computed,
    /// and returns the query's rows, the run, and what was computed and reused.
    fn execute(
        &mut self,
        a: &Analysis,
        options: &fox_kernel::LowerOptions,
        out: &mut Out,
    ) -> Option<(OutputTable, fox_runtime::RunResult, Report)> {
        let (rw, _, mut plan) = self.plan_with_data(a, options, false, out)?;
        plan.sources = vec![fox_kernel::SourceFile {
            name: "<session>".into(),
            start: 0,
            text: a.text.clone(),
        }];
        let mut r = self.run(&plan, &rw, out)?;
        let Some(q) = r.outputs.iter().position(|t| t.name == QUERY_PRED) else {
            out.error("error: the query produced no output\n");
            return None;
        };
        let table = r.outputs.remove(q);
        for t in std::mem::take(&mut r.outputs) {
            if let Some((_, fp)) = rw.capture.iter().find(|(n, _)| *n == t.name) {
                self.cache.insert(*fp, Arc::new(t));
            }
        }
        let qfp = a.fps[a.query.0 as usize];
        self.answers.retain(|(f, _)| *f != qfp);
        if self.answers.len() >= ANSWERS_KEPT {
            self.answers.pop_front();
        }
        self.answers.push_back((qfp, table.clone()));
        Some((table, r, rw.report))
    }

    fn query(&mut self, body: &str, out: &mut Out) {
        let Some(qp) = self.query_program(body, out) else {
            return;
        };
        let start = Instant::now();
        let Some(a) = self.analyze(&qp, out) else {
            return;
        };
        let qfp = a.fps[a.query.0 as usize];
        let (table, report) = match self.answers.iter().find(|(f, _)| *f == qfp) {
            Some((_, t)) => (
                t.clone(),
                Report {
                    computed: Vec::new(),
                    reused: vec![QUERY_PRED.to_string()],
                },
            ),
            None => {
                let Some((t, _, report)) = self.execute(&a, &fox_kernel::LowerOptions::default(), out) else {
                    return;
                };
                (t, report)
            }
        };
        print_answer(&table, qp.vars.is_empty(), out);
        if self.timing {
            let _ = writeln!(out, "({report}; {:.3} ms)", start.elapsed().as_secs_f64() * 1e3);
        }
    }

    fn command(&mut self, line: &str, out: &mut Out) -> Input {
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
                _ => out.error("error: `.timing on` or `.timing off`\n"),
            },
            ".backend" => {
                let kind = match arg {
                    "gpu" => BackendKind::Gpu,
                    "cpu" => BackendKind::Cpu,
                    "auto" => BackendKind::Auto,
                    _ => {
                        out.error("error: `.backend gpu`, `.backend cpu` or `.backend auto`\n");
                        return Input::Done;
                    }
                };
                match open_devices(kind, self.devices) {
                    Ok((b, others, notice)) => {
                        self.replace_devices(b, others);
                        out.note(&notice);
                        let _ = writeln!(out, "backend: {}", self.backend_name);
                    }
                    Err(e) => {
                        out.error(format!("error: {e} (the backend stays {})\n", self.backend_name));
                    }
                }
            }
            ".save" => {
                if arg.is_empty() {
                    out.error("error: the file name is missing: `.save FILE.logic`\n");
                } else {
                    match fox_runtime::write_bytes(Path::new(arg), self.program_text().as_bytes()) {
                        Ok(()) => {
                            let _ = writeln!(out, "saved {} statements to {arg}", self.stmts.len());
                        }
                        Err(e) => {
                            out.error(format!("error: {e}\n"));
                        }
                    }
                }
            }
            other => {
                out.error(format!(
                    "error: unknown command `{other}` (`.help` lists the commands)\n"
                ));
            }
        }
        Input::Done
    }

    fn load(&mut self, path: &str, out: &mut Out) {
        if path.is_empty() {
            out.error("error: the file name is missing: `.load FILE.logic`\n");
            return;
        }
        // The file with the files it includes: syntax errors are shown in the file they
        // are in; the items, in order, are then added as one statement.
        match fox_syntax::sources::load_files(&[std::path::PathBuf::from(path)]) {
            Ok(loaded) if loaded.has_errors() => out.push_str(&loaded.map.render(&loaded.diagnostics, self.color)),
            Ok(loaded) if loaded.souffle.as_ref().is_some_and(|io| !io.inputs.is_empty()) => {
                let rels: Vec<String> = loaded
                    .souffle
                    .iter()
                    .flat_map(|io| &io.inputs)
                    .map(|i| format!("`{}`", i.pred))
                    .collect();
                out.error(format!(
                    "error: {path}: the input of {} holds records or values of algebraic data types, which the REPL does not read (its session is LogiQL); run the program with foxrun or the Python package\n",
                    rels.join(", ")
                ));
            }
            Ok(loaded) if loaded.souffle.is_some() => {
                // A Soufflé program (`.dl`) joins the session as the LogiQL it lowers to.
                let text: String = loaded
                    .program
                    .items
                    .iter()
                    .map(|item| fox_syntax::pretty::print_item(item) + "\n")
                    .collect();
                self.add_items(&text, &format!("{path} (as LogiQL)"), out);
            }
            Ok(loaded) => {
                let mut text = String::new();
                for item in &loaded.program.items {
                    if let Some((k, range)) = loaded.map.locate(item_span(item)) {
                        text.push_str(&loaded.map.files()[k].text[range]);
                        text.push('\n');
                    }
                }
                self.add_items(&text, path, out);
            }
            Err(e) => {
                out.error(format!("error: {e}\n"));
            }
        }
    }

    fn schema(&self, pred: &str, out: &mut Out) {
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
                out.error(format!("error: no predicate `{pred}`\n"));
            }
        }
    }

    fn retract(&mut self, arg: &str, out: &mut Out) {
        let Some(n) = arg.parse::<usize>().ok().filter(|n| (1..=self.stmts.len()).contains(n)) else {
            out.error(format!(
                "error: `.retract N` with N from 1 to {} (see `.list`)\n",
                self.stmts.len()
            ));
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
            out.error(format!(
                "error: without statement {n} the program is not correct, so it stays:\n"
            ));
            out.error(fox_syntax::diag::render("<session>", &text, &errors, self.color));
            self.stmts.insert(n - 1, removed);
            return;
        }
        let _ = writeln!(out, "retracted {n}: {}", removed.text);
    }

    fn explain(&mut self, q: &str, analyze: bool, out: &mut Out) {
        let body = q.strip_prefix("?-").unwrap_or(q).trim();
        let Some(qp) = self.query_program(body, out) else {
            return;
        };
        let Some(a) = self.analyze(&qp, out) else {
            return;
        };
        if !analyze {
            let Some((rw, phys, plan)) = self.plan_with_data(&a, &fox_kernel::LowerOptions::default(), true, out)
            else {
                return;
            };
            out.push_str(&fox_phys::print_physical(&phys));
            out.push('\n');
            out.push_str(&fox_kernel::print_kernels(&plan));
            let _ = writeln!(out, "{}", rw.report);
            return;
        }
        let timing = std::mem::replace(&mut self.timing, true);
        // The run counts each operator's rows, shown against the estimates.
        let r = self.execute(
            &a,
            &fox_kernel::LowerOptions {
                observe_rows: true,
                ..Default::default()
            },
            out,
        );
        self.timing = timing;
        if let Some((t, r, report)) = r {
            out.push_str(&fox_runtime::format_stats(&r.stats));
            let rows = t.len();
            let _ = writeln!(out, "{rows} row{}", if rows == 1 { "" } else { "s" });
            let _ = writeln!(out, "{report}");
        }
    }

    fn dot(&mut self, arg: &str, out: &mut Out) {
        // `.dot QUERY FILE.svg`: the file is the last word, unless the whole argument is a
        // query (then the file is missing).
        let arg = arg.trim();
        if arg.is_empty() {
            out.error("error: the query and the file name are missing: `.dot QUERY FILE.svg`\n");
            return;
        }
        if ends_statement(arg) || is_query_body(arg) {
            out.error("error: the file name is missing: `.dot QUERY FILE.svg` (the file name follows the query)\n");
            return;
        }
        let Some((q, file)) = arg.rsplit_once(char::is_whitespace) else {
            out.error(format!("error: the query is missing: `.dot QUERY {arg}`\n"));
            return;
        };
        let body = q.trim().strip_prefix("?-").unwrap_or(q.trim()).trim();
        let Some(qp) = self.query_program(body, out) else {
            return;
        };
        let Some(a) = self.analyze(&qp, out) else {
            return;
        };
        let Some((_, _, plan)) = self.plan_with_data(&a, &fox_kernel::LowerOptions::default(), true, out) else {
            return;
        };
        let dot = fox_kernel::to_dot(&plan);
        let svg = Path::new(file);
        let dot_path = svg.with_extension("dot");
        // graphviz renders to a pipe; the file is written by Fox's own writer.
        let rendered = std::process::Command::new("dot")
            .arg("-Tsvg")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map(|mut child| {
                use std::io::Write;
                // A failed write shows as a failed `dot`.
                let _ = child.stdin.take().map(|mut i| i.write_all(dot.as_bytes()));
                child.wait_with_output()
            });
        match rendered {
            Ok(Ok(o)) if o.status.success() => match fox_runtime::write_bytes(svg, &o.stdout) {
                Ok(()) => {
                    let _ = writeln!(out, "wrote {}", svg.display());
                }
                Err(e) => {
                    out.error(format!("error: {e}\n"));
                }
            },
            Ok(_) => {
                out.error(format!("error: graphviz `dot` failed to render {}\n", svg.display()));
            }
            Err(_) => match fox_runtime::write_bytes(&dot_path, dot.as_bytes()) {
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
                    out.error(format!("error: {e}\n"));
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
    (
        ".explain QUERY",
        "the physical plan (each operator's algorithm and estimated rows) and the kernel plan of a query",
    ),
    (
        ".explain analyze QUERY",
        "run the query and show per-kernel times, memory, and each operator's estimated against actual rows",
    ),
    (
        ".dot QUERY FILE.svg",
        "draw the kernel plan (graphviz `dot`, else FILE.dot)",
    ),
    (
        ".timing on|off",
        "print each query's time and what it computed and reused",
    ),
    (".backend gpu|cpu|auto", "where queries run"),
    (".save FILE.logic", "write the session's statements to a file"),
    (".quit", "leave (also end of input)"),
];

/// The devices of a session: `make_backend`'s for one, else [`crate::open_backends`]'s
/// (the first, the others, and the notice of `auto`'s choice).
#[allow(clippy::type_complexity)]
fn open_devices(
    kind: BackendKind,
    devices: crate::Devices,
) -> Result<(Box<dyn Backend + Send>, Vec<Box<dyn Backend + Send>>, String), String> {
    if devices == crate::Devices::Count(1) {
        let (b, notice) = make_backend(kind)?;
        return Ok((b, Vec::new(), notice));
    }
    let choice = match kind {
        BackendKind::Auto => crate::BackendChoice::Auto,
        BackendKind::Gpu => crate::BackendChoice::Gpu,
        BackendKind::Cpu => crate::BackendChoice::Cpu,
    };
    let (mut all, line) = crate::open_backends(choice, devices)?;
    let first = all.remove(0);
    Ok((first, all, line.map(|l| format!("{l}\n")).unwrap_or_default()))
}

fn make_backend(kind: BackendKind) -> Result<(Box<dyn Backend + Send>, String), String> {
    match kind {
        BackendKind::Cpu => Ok((Box::new(fox_cpu::CpuBackend::new()), String::new())),
        BackendKind::Gpu => fox_cuda::CudaBackend::new()
            .map(|g| (Box::new(g) as Box<dyn Backend + Send>, String::new()))
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

/// The program of a query.
struct QueryProgram {
    text: String,
    /// The query's variables (the columns of `query`).
    vars: Vec<String>,
    /// Where each item (the session's, then the query rule) lies in `text`, in order.
    items: Vec<Range<usize>>,
    /// The body as the user wrote it, without the final `.`.
    body: String,
}

/// A loaded table: its declaration, the columns loaded, and its file's stamp (with files).
type LoadedTable = (InputRel, Vec<bool>, String);

/// The data loaded for the runs, shared by them.
struct Loaded {
    db: Arc<Database>,
    tables: BTreeMap<String, LoadedTable>,
    /// The statistics of `db`'s tables, collected when a query is first planned with them.
    stats: Option<fox_phys::Statistics>,
}

/// A checked query program and the fingerprints of its predicates.
struct Analysis {
    core: CoreProgram,
    /// Indexed by `PredId`.
    fps: Vec<Fp>,
    query: PredId,
    /// The stratum of each predicate defined by facts or rules.
    stratum_of: Vec<Option<usize>>,
    /// The predicates each stratum's rules read, outside the stratum.
    deps: Vec<BTreeSet<PredId>>,
    /// With files: the stamp of each input's file when the fingerprints were taken.
    stamps: BTreeMap<String, String>,
    /// The program's text (the spans of `core` lie in it).
    text: String,
}

/// A query program in which the predicates whose contents are kept are inputs.
struct Rewritten {
    core: CoreProgram,
    /// The predicates read from memory, and their contents.
    reused: Vec<(String, Arc<OutputTable>)>,
    /// The predicates computed whose contents are to be kept, and their fingerprints.
    capture: Vec<(String, Fp)>,
    stamps: BTreeMap<String, String>,
    report: Report,
}

/// What a query computed and what it read from memory (predicates defined by rules).
struct Report {
    computed: Vec<String>,
    reused: Vec<String>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if !self.computed.is_empty() {
            parts.push(format!("computed: {}", self.computed.join(", ")));
        }
        if !self.reused.is_empty() {
            parts.push(format!("reused: {}", self.reused.join(", ")));
        }
        f.write_str(&parts.join("; "))
    }
}

/// 128 bits of hash from two differently seeded hashers.
struct FpHasher(DefaultHasher, DefaultHasher);

impl FpHasher {
    fn new(kind: &str) -> FpHasher {
        let mut h = FpHasher(DefaultHasher::new(), DefaultHasher::new());
        0x9E37_79B9_7F4A_7C15u64.hash(&mut h.1);
        h.add(kind);
        h
    }

    fn add<T: Hash + ?Sized>(&mut self, x: &T) {
        x.hash(&mut self.0);
        x.hash(&mut self.1);
    }

    fn finish(&self) -> Fp {
        (u128::from(self.0.finish()) << 64) | u128::from(self.1.finish())
    }
}

/// A file's size, modification time (and on Unix its inode and change time), to notice
/// that it changed; `missing` when it cannot be read.
fn file_stamp(path: &Path) -> String {
    let Ok(m) = std::fs::metadata(path) else {
        return "missing".to_string();
    };
    #[allow(unused_mut)]
    let mut s = format!("{} {:?}", m.len(), m.modified().ok());
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let _ = write!(s, " {} {}.{}", m.ino(), m.ctime(), m.ctime_nsec());
    }
    s
}

/// A predicate's name and columns, for a fingerprint.
fn add_signature(h: &mut FpHasher, p: &PredInfo) {
    h.add(&p.name);
    for c in &p.columns {
        h.add(&c.name);
        h.add(&c.ty);
    }
    h.add(&p.functional_keys);
}

/// Takes the fingerprints of the predicates of a query program (see the module's
/// documentation), in evaluation order.
fn analysis(core: CoreProgram, query: PredId, qp: &QueryProgram, data: &DataSource) -> Analysis {
    // The item whose text holds a byte of the program.
    let item_of = |at: u32| -> Option<usize> {
        let at = at as usize;
        let i = qp.items.partition_point(|r| r.start <= at);
        (i > 0 && at < qp.items[i - 1].end).then(|| i - 1)
    };
    let data_id = match data {
        DataSource::Files(dir) => format!("files in {:?}", dir),
        other => format!("{other:?}"),
    };
    let mut stamps = BTreeMap::new();
    let mut fps: Vec<Fp> = Vec::with_capacity(core.preds.len());
    for (i, p) in core.preds.iter().enumerate() {
        // Inputs, and predicates declared but never defined (empty).
        let mut h = FpHasher::new(if p.input { "input" } else { "empty" });
        add_signature(&mut h, p);
        if p.input {
            let spec = core.inputs.iter().find(|s| s.pred.0 as usize == i);
            let file = spec.map_or_else(|| format!("{}.csv", p.name), |s| s.file.clone());
            h.add(&data_id);
            h.add(&file);
            h.add(&spec.map(|s| (&s.sep, &s.key, s.header)));
            if let DataSource::Files(dir) = data {
                let st = file_stamp(&dir.join(&file));
                h.add(&st);
                stamps.insert(p.name.clone(), st);
            }
        }
        fps.push(h.finish());
    }
    let mut stratum_of = vec![None; core.preds.len()];
    let mut deps = Vec::with_capacity(core.strata.len());
    for (k, s) in core.strata.iter().enumerate() {
        let mine: HashSet<PredId> = s.preds.iter().copied().collect();
        let mut h = FpHasher::new("stratum");
        h.add(&s.recursive);
        for &p in &s.preds {
            stratum_of[p.0 as usize] = Some(k);
            add_signature(&mut h, &core.preds[p.0 as usize]);
        }
        // The text of the items that define the stratum's predicates; a definition that
        // lies in no item (none should) by its core form.
        let mut items = BTreeSet::new();
        for span in s.rules.iter().map(|r| r.span).chain(s.facts.iter().map(|f| f.span)) {
            match item_of(span.start) {
                Some(i) => {
                    items.insert(i);
                }
                None => h.add(&format!("{:?}", s)),
            }
        }
        for i in items {
            h.add(&qp.text[qp.items[i].clone()]);
        }
        let mut read = BTreeSet::new();
        for r in &s.rules {
            for l in &r.body {
                if let CoreLit::Atom { pred, .. } | CoreLit::NotAtom { pred, .. } = l {
                    if !mine.contains(pred) {
                        read.insert(*pred);
                    }
                }
            }
        }
        let read_fps: BTreeSet<(&str, Fp)> = read
            .iter()
            .map(|p| (core.preds[p.0 as usize].name.as_str(), fps[p.0 as usize]))
            .collect();
        h.add(&read_fps);
        let fp = h.finish();
        for &p in &s.preds {
            let mut h = FpHasher::new("pred");
            h.add(&fp);
            h.add(&core.preds[p.0 as usize].name);
            fps[p.0 as usize] = h.finish();
        }
        deps.push(read);
    }
    Analysis {
        core,
        fps,
        query,
        stratum_of,
        deps,
        stamps,
        text: qp.text.clone(),
    }
}

/// The query program that reads from `cache` every predicate the query needs whose
/// contents are kept: it becomes an input (its rules and facts dropped), and only the
/// other predicates the query needs are computed, those defined by rules with an
/// `.output` that keeps them. The inputs and predicates the query does not need are left
/// out.
fn rewrite(a: &Analysis, cache: &HashMap<Fp, Arc<OutputTable>>) -> Rewritten {
    let core = &a.core;
    let fp = |p: PredId| a.fps[p.0 as usize];
    let info = |p: PredId| &core.preds[p.0 as usize];
    // Kept are the strata of rules over predicates with columns (an input needs one),
    // apart from the query's and the auxiliary predicates of negated formulas.
    let keepable = |s: &fox_sema::core::Stratum| {
        !s.rules.is_empty()
            && s.preds
                .iter()
                .all(|&p| p != a.query && !info(p).name.starts_with('$') && !info(p).columns.is_empty())
    };
    // From the query down: a stratum is read from memory, or computed from what it reads.
    let mut state: Vec<Option<bool>> = vec![None; core.strata.len()];
    let mut inputs = HashSet::new();
    let mut stack = vec![a.query];
    while let Some(p) = stack.pop() {
        if info(p).input {
            inputs.insert(p);
            continue;
        }
        let Some(k) = a.stratum_of[p.0 as usize] else {
            continue;
        };
        if state[k].is_some() {
            continue;
        }
        let s = &core.strata[k];
        let reuse = keepable(s) && s.preds.iter().all(|&q| cache.contains_key(&fp(q)));
        state[k] = Some(reuse);
        if !reuse {
            stack.extend(a.deps[k].iter().copied());
        }
    }
    let mut out = core.clone();
    for (i, p) in out.preds.iter_mut().enumerate() {
        p.input = p.input && inputs.contains(&PredId(i as u32));
    }
    out.inputs.retain(|s| inputs.contains(&s.pred));
    out.strata.clear();
    out.outputs = core.outputs.iter().filter(|o| o.pred == a.query).cloned().collect();
    let (mut reused, mut capture) = (Vec::new(), Vec::new());
    let mut report = Report {
        computed: Vec::new(),
        reused: Vec::new(),
    };
    for (k, s) in core.strata.iter().enumerate() {
        let names = || {
            s.preds
                .iter()
                .map(|&p| info(p).name.clone())
                .filter(|n| !n.starts_with('$'))
        };
        match state[k] {
            Some(true) => {
                for &p in &s.preds {
                    let name = info(p).name.clone();
                    out.preds[p.0 as usize].input = true;
                    out.inputs.push(InputSpec {
                        pred: p,
                        file: "(kept from an earlier query)".into(),
                        sep: ",".into(),
                        // A set: every column is the key.
                        key: (0..info(p).columns.len()).collect(),
                        header: false,
                        span: info(p).span,
                    });
                    if let Some(t) = cache.get(&fp(p)) {
                        reused.push((name.clone(), t.clone()));
                    }
                    report.reused.push(name);
                }
            }
            Some(false) => {
                if keepable(s) {
                    for &p in &s.preds {
                        capture.push((info(p).name.clone(), fp(p)));
                        out.outputs.push(OutputSpec {
                            pred: p,
                            order_by: Vec::new(),
                            limit: None,
                            span: info(p).span,
                        });
                    }
                }
                if !s.rules.is_empty() {
                    report.computed.extend(names());
                }
                out.strata.push(s.clone());
            }
            None => {}
        }
    }
    Rewritten {
        core: out,
        reused,
        capture,
        stamps: a.stamps.clone(),
        report,
    }
}

/// The relational and kernel plans of a core program; errors are written to `out`.
fn plan_core(
    core: &CoreProgram,
    stats: &fox_phys::Statistics,
    options: &fox_kernel::LowerOptions,
    join: fox_phys::JoinChoice,
    devices: usize,
    out: &mut Out,
) -> Option<(fox_phys::PhysPlan, KernelPlan)> {
    let ra = match fox_ra::plan(core) {
        Ok(p) => p,
        Err(e) => {
            out.error(format!("error: cannot plan the query: {e}\n"));
            return None;
        }
    };
    let opts = fox_phys::Options {
        join,
        devices,
        ..fox_phys::Options::default()
    };
    let phys = match fox_phys::run(ra, stats, &opts) {
        Ok(p) => p,
        Err(e) => {
            out.error(format!("error: cannot plan the query: {e}\n"));
            return None;
        }
    };
    match fox_kernel::lower_physical_with(&phys, options) {
        Ok(k) => Some((phys, k)),
        Err(e) => {
            out.error(format!("error: cannot lower the query to kernels: {e}\n"));
            None
        }
    }
}

/// A line that is a command rather than the start of a statement.
fn is_command(line: &str) -> bool {
    line.starts_with('.')
        && !line.starts_with(".input")
        && !line.starts_with(".output")
        && line[1..].starts_with(|c: char| c.is_ascii_alphabetic())
}

/// True when `text` (with or without `?-` and the final `.`) is a query's body.
fn is_query_body(text: &str) -> bool {
    let t = text.trim();
    let body = t.strip_prefix("?-").unwrap_or(t).trim().trim_end_matches('.').trim();
    if body.is_empty() {
        return false;
    }
    let (_, diags) = fox_syntax::parse(&format!("{QUERY_PRED}() <- {body}."));
    !diags.iter().any(Diagnostic::is_error)
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
        Item::Include(d) => d.span,
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
fn print_answer(t: &fox_runtime::OutputTable, closed: bool, out: &mut Out) {
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
