//! User-facing diagnostics: every error names a span of the source, and renders as
//! `file:line:col` with the source line and a caret (codespan-reporting).

use crate::ast::Span;
use codespan_reporting::diagnostic as cs;
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    pub span: Span,
    pub message: String,
    /// The primary label is the one the `file:line:col` header points at.
    pub primary: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub message: String,
    pub labels: Vec<Label>,
    /// Extra lines: `help: …`, `note: …`.
    pub notes: Vec<String>,
}

impl Diagnostic {
    pub fn error(message: impl Into<String>, span: Span) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            labels: vec![Label {
                span,
                message: String::new(),
                primary: true,
            }],
            notes: Vec::new(),
        }
    }
    pub fn warning(message: impl Into<String>, span: Span) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(message, span)
        }
    }
    /// Sets the text under the primary caret.
    pub fn with_label(mut self, message: impl Into<String>) -> Diagnostic {
        if let Some(l) = self.labels.iter_mut().find(|l| l.primary) {
            l.message = message.into();
        }
        self
    }
    /// Adds a secondary label pointing at another place.
    pub fn with_secondary(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.labels.push(Label {
            span,
            message: message.into(),
            primary: false,
        });
        self
    }
    pub fn with_note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }
    pub fn with_help(self, help: impl Into<String>) -> Diagnostic {
        self.with_note(format!("help: {}", help.into()))
    }
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
    /// The primary span (the first label's if none is marked primary).
    pub fn span(&self) -> Span {
        self.labels
            .iter()
            .find(|l| l.primary)
            .or(self.labels.first())
            .map(|l| l.span)
            .unwrap_or_default()
    }
}

/// Renders diagnostics as text: `error: message` then `┌─ file:line:col`, the source
/// line and carets. Spans past the end of the source are clamped, so rendering never fails.
pub fn render(file_name: &str, source: &str, diags: &[Diagnostic], color: bool) -> String {
    let file = SimpleFile::new(file_name, source);
    let config = term::Config::default();
    let mut out = String::new();
    for d in diags {
        let clamp = |s: Span| {
            let mut a = (s.start as usize).min(source.len());
            let mut b = (s.end as usize).clamp(a, source.len());
            while !source.is_char_boundary(a) {
                a -= 1;
            }
            while !source.is_char_boundary(b) {
                b += 1;
            }
            a..b
        };
        let labels = d
            .labels
            .iter()
            .map(|l| {
                let style = if l.primary {
                    cs::LabelStyle::Primary
                } else {
                    cs::LabelStyle::Secondary
                };
                cs::Label::new(style, (), clamp(l.span)).with_message(l.message.clone())
            })
            .collect();
        let sev = match d.severity {
            Severity::Error => cs::Severity::Error,
            Severity::Warning => cs::Severity::Warning,
        };
        let diag = cs::Diagnostic::new(sev)
            .with_message(d.message.clone())
            .with_labels(labels)
            .with_notes(d.notes.clone());
        let mut buf: Vec<u8> = Vec::new();
        if color {
            let mut w = term::termcolor::Ansi::new(&mut buf);
            let _ = term::emit_to_write_style(&mut w, &config, &file, &diag);
        } else {
            let mut w = term::termcolor::NoColor::new(&mut buf);
            let _ = term::emit_to_write_style(&mut w, &config, &file, &diag);
        }
        out.push_str(&String::from_utf8_lossy(&buf));
    }
    out
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(source.len());
    let before = &source[..floor_boundary(source, offset)];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
    (line, col)
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}
