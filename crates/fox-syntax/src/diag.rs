//! User-facing diagnostics: every error names a span of the source, and renders as
//! `file:line:col` with the source line and a caret (codespan-reporting).

use crate::ast::Span;
use codespan_reporting::diagnostic as cs;
use codespan_reporting::term;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Label {
    pub span: Span,
    pub message: String,
    /// The primary label is the one the `file:line:col` header points at.
    pub primary: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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

/// The files of a program, laid end to end in one space of byte offsets, so that a span
/// names a file as well as a place in it: file `k` holds the offsets `base_k ..= base_k +
/// len_k` (its end included, for spans at the end of the file), and the next file starts
/// one byte later. The spans of a program read from several files are in this space.
#[derive(Clone, Debug, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

/// One file of a [`SourceMap`].
#[derive(Clone, Debug)]
pub struct SourceFile {
    /// The name diagnostics show: the path as the user gave it (or as an `.include`
    /// resolved it).
    pub name: String,
    pub text: String,
    /// The offset of the file's first byte in the map.
    pub base: u32,
}

impl SourceMap {
    pub fn new() -> SourceMap {
        SourceMap::default()
    }

    /// Adds a file after the others; returns its index, or `None` when the files together
    /// pass the 4 GiB that spans can address.
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> Option<usize> {
        let text = text.into();
        let base = match self.files.last() {
            Some(f) => f.base as u64 + f.text.len() as u64 + 1,
            None => 0,
        };
        if base + text.len() as u64 >= u64::from(u32::MAX) {
            return None;
        }
        self.files.push(SourceFile {
            name: name.into(),
            text,
            base: base as u32,
        });
        Some(self.files.len() - 1)
    }

    pub fn files(&self) -> &[SourceFile] {
        &self.files
    }

    /// The index of the file that holds `offset` (the first file when none does).
    pub fn file_of(&self, offset: u32) -> usize {
        self.files.partition_point(|f| f.base <= offset).saturating_sub(1)
    }

    /// The file of a span and the span's byte range in it, clamped to the file and to
    /// character boundaries.
    pub fn locate(&self, span: Span) -> Option<(usize, std::ops::Range<usize>)> {
        let k = self.file_of(span.start);
        let f = self.files.get(k)?;
        let text = f.text.as_str();
        let mut a = (span.start.saturating_sub(f.base) as usize).min(text.len());
        let mut b = (span.end.saturating_sub(f.base) as usize).clamp(a, text.len());
        while !text.is_char_boundary(a) {
            a -= 1;
        }
        while !text.is_char_boundary(b) {
            b += 1;
        }
        Some((k, a..b))
    }

    /// `file:line:col` of the start of a span.
    pub fn position(&self, span: Span) -> Option<(String, usize, usize)> {
        let (k, range) = self.locate(span)?;
        let f = &self.files[k];
        let (line, col) = line_col(&f.text, range.start);
        Some((f.name.clone(), line, col))
    }

    /// Renders diagnostics as text: `error: message` (or `warning: …`) then `┌─
    /// file:line:col`, the source line and carets, each label in the file its span lies in.
    pub fn render(&self, diags: &[Diagnostic], color: bool) -> String {
        let mut files = codespan_reporting::files::SimpleFiles::new();
        for f in &self.files {
            files.add(f.name.as_str(), f.text.as_str());
        }
        let config = term::Config::default();
        let mut out = String::new();
        for d in diags {
            let labels = d
                .labels
                .iter()
                .filter_map(|l| {
                    let style = if l.primary {
                        cs::LabelStyle::Primary
                    } else {
                        cs::LabelStyle::Secondary
                    };
                    let (k, range) = self.locate(l.span)?;
                    Some(cs::Label::new(style, k, range).with_message(l.message.clone()))
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
                let _ = term::emit_to_write_style(&mut w, &config, &files, &diag);
            } else {
                let mut w = term::termcolor::NoColor::new(&mut buf);
                let _ = term::emit_to_write_style(&mut w, &config, &files, &diag);
            }
            out.push_str(&String::from_utf8_lossy(&buf));
        }
        out
    }
}

/// Renders the diagnostics of one source (see [`SourceMap::render`]). Spans past the end
/// of the source are clamped, so rendering never fails.
pub fn render(file_name: &str, source: &str, diags: &[Diagnostic], color: bool) -> String {
    let mut map = SourceMap::new();
    if map.add(file_name, source).is_none() {
        // Too large for spans; show the messages without their places.
        return diags
            .iter()
            .map(|d| {
                let sev = if d.is_error() { "error" } else { "warning" };
                format!("{sev}: {}\n", d.message)
            })
            .collect();
    }
    map.render(diags, color)
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
