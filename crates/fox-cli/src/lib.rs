//! The front-end driver shared by the `foxc` binary and the tests: read a source file,
//! parse, check, plan, and render diagnostics. Logic lives in the library crates; this
//! module only sequences them.

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
            anyhow::anyhow!(
                "`{}` is not UTF-8 text (invalid byte at offset {})",
                path.display(),
                e.utf8_error().valid_up_to()
            )
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
