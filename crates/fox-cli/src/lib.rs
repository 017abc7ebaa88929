//! The front-end driver shared by the `foxc` binary and the tests: read a source file,
//! parse, check, plan, and render diagnostics. Logic lives in the library crates; this
//! module only sequences them.

pub mod repl;
pub mod tpch;

use fox_sema::core::CoreProgram;
use fox_syntax::ast::Program;
use fox_syntax::diag::{render, Diagnostic};
use std::path::Path;

/// A source file read from disk.
pub struct Source {
    /// The name diagnostics show: the path as the user gave it.
    pub name: String,
    pub text: String,
}

impl Source {
    pub fn read(path: &Path) -> anyhow::Result<Source> {
        let bytes = std::fs::read(path).map_err(|e| anyhow::anyhow!("cannot read `{}`: {e}", path.display()))?;
        let text = String::from_utf8(bytes).map_err(|e| {
            let (line, col) = line_col(e.as_bytes(), e.utf8_error().valid_up_to());
            anyhow::anyhow!("{}:{line}:{col}: the file is not UTF-8 text", path.display())
        })?;
        Ok(Source {
            name: path.display().to_string(),
            text,
        })
    }

    pub fn render(&self, diags: &[Diagnostic], color: bool) -> String {
        render(&self.name, &self.text, diags, color)
    }
}

/// The line and column (1-based, in characters) of byte `at` of `bytes`, all of which
/// before `at` is UTF-8.
fn line_col(bytes: &[u8], at: usize) -> (usize, usize) {
    let before = &bytes[..at];
    let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let col = std::str::from_utf8(&before[line_start..]).map_or(at - line_start, |s| s.chars().count()) + 1;
    (line, col)
}

/// The result of running the front end on one source.
pub struct Checked {
    pub ast: Program,
    /// `Some` when there were no errors.
    pub core: Option<CoreProgram>,
    /// Syntax errors, or (when the syntax is clean) semantic errors and warnings.
    pub diagnostics: Vec<Diagnostic>,
}

impl Checked {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Parses and checks a source. Semantic checks run only when the syntax is clean, so a
/// clause that failed to parse does not cause follow-on errors about what it declared.
pub fn check(source: &Source) -> Checked {
    let (ast, mut diagnostics) = fox_syntax::parse(&source.text);
    if diagnostics.iter().any(Diagnostic::is_error) {
        return Checked {
            ast,
            core: None,
            diagnostics,
        };
    }
    let (core, sema_diags) = fox_sema::check(&ast);
    diagnostics.extend(sema_diags);
    Checked { ast, core, diagnostics }
}

/// The kernel plan of `path`: loaded from RON (`.ron`), or compiled from a program. `None`
/// when the program has errors (its diagnostics are printed to standard error, prefixed
/// with `tool`).
pub fn load_plan(path: &Path, color: bool, tool: &str) -> anyhow::Result<Option<fox_kernel::KernelPlan>> {
    load_plan_with(path, color, tool, &fox_ra::PlanOptions::default())
}

/// [`load_plan`] planning a program with `options`.
pub fn load_plan_with(
    path: &Path,
    color: bool,
    tool: &str,
    options: &fox_ra::PlanOptions,
) -> anyhow::Result<Option<fox_kernel::KernelPlan>> {
    let is_plan = path.extension().is_some_and(|e| e == "ron");
    let source = Source::read(path)?;
    if is_plan {
        let plan = fox_kernel::from_ron(&source.text).map_err(|e| match e {
            // `plan.ron:LINE:COL: …`, as compile errors are located.
            fox_kernel::LoadError::Syntax { .. } => anyhow::anyhow!("{}:{e}", source.name),
            _ => anyhow::anyhow!("{}: {e}", source.name),
        })?;
        return Ok(Some(plan));
    }
    let checked = check(&source);
    if !checked.diagnostics.is_empty() {
        eprint!("{}", source.render(&checked.diagnostics, color));
    }
    let errors = checked.diagnostics.iter().filter(|d| d.is_error()).count();
    let Some(core) = checked.core.filter(|_| errors == 0) else {
        let n = errors.max(1);
        eprintln!("{tool}: {}: {} error{}", source.name, n, if n == 1 { "" } else { "s" });
        return Ok(None);
    };
    let ra = fox_ra::plan_with(&core, options).map_err(|e| plan_error(&source, &e, color))?;
    let plan = fox_kernel::lower(&ra)
        .map_err(|e| anyhow::anyhow!("{}: cannot lower the plan to kernels: {e}", source.name))?;
    Ok(Some(plan))
}

/// The error of a program the planner refuses: a program error is rendered at its place
/// in the source (as `check`'s diagnostics are), anything else is named after the file.
pub fn plan_error(source: &Source, e: &fox_ra::PlanError, color: bool) -> anyhow::Error {
    match e.diagnostic() {
        Some(d) => anyhow::anyhow!(
            "cannot plan the program:\n{}",
            source.render(std::slice::from_ref(d), color).trim_end()
        ),
        None => anyhow::anyhow!("{}: cannot plan the program: {e}", source.name),
    }
}

/// A TPC-H scale factor from the command line (`1`, `0.01`, `10`).
pub fn parse_scale_factor(s: &str) -> Result<f64, String> {
    let sf: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a scale factor (a number such as 1, 0.1 or 10)"))?;
    fox_runtime::tpch::check_scale(sf)?;
    Ok(sf)
}

/// A memory size for the command line: bytes, or a number with a binary suffix K, M, G or
/// T (`512M`, `1.5G`; `KiB`, `MiB`, … and `KB`, `MB`, … mean the same).
pub fn parse_memory_size(s: &str) -> Result<u64, String> {
    let bad = || format!("`{s}` is not a memory size (bytes, or a number with K, M, G or T, such as 512M or 4G)");
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim().to_ascii_uppercase();
    let unit = unit.trim_end_matches("IB").trim_end_matches('B');
    let mult: u64 = match unit {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return Err(bad()),
    };
    let x: f64 = num.parse().map_err(|_| bad())?;
    let bytes = x * mult as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes as u64)
}

/// Progress bars on standard error for loading and generating data (drawn only when
/// standard error is a terminal).
pub struct Bars {
    bar: std::sync::Mutex<Option<indicatif::ProgressBar>>,
}

impl Bars {
    pub fn new() -> Bars {
        Bars {
            bar: std::sync::Mutex::new(None),
        }
    }
}

impl Default for Bars {
    fn default() -> Self {
        Bars::new()
    }
}

impl fox_runtime::LoadProgress for Bars {
    fn start(&self, table: &str, rows: u64) {
        let bar = if rows > 0 {
            indicatif::ProgressBar::new(rows).with_style(
                indicatif::ProgressStyle::with_template(
                    "{prefix:>10} [{bar:30}] {human_pos}/{human_len} rows {per_sec} {eta}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
            )
        } else {
            indicatif::ProgressBar::new_spinner()
        };
        bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        bar.set_prefix(table.to_string());
        if let Ok(mut b) = self.bar.lock() {
            *b = Some(bar);
        }
    }

    fn advance(&self, rows: u64) {
        if let Ok(b) = self.bar.lock() {
            if let Some(b) = b.as_ref() {
                b.inc(rows);
            }
        }
    }

    fn finish(&self) {
        if let Ok(mut b) = self.bar.lock() {
            if let Some(b) = b.take() {
                b.finish_and_clear();
            }
        }
    }
}
