//! Reading the files of a program: the files named on a command line and, through
//! `.include "path".`, the files they include, parsed into one program whose spans lie in
//! one [`SourceMap`].
//!
//! - An included path is relative to the folder of the file that includes it.
//! - A file is part of a program once: a file named again (on the command line, or by a
//!   second `.include`, as when two files include one schema) adds nothing more.
//! - A file that includes itself, directly or through others, is an error at the
//!   `.include` that closes the cycle, naming the chain of files.
//! - An included file that cannot be read (or is not UTF-8 text) is an error at its
//!   `.include`; a file named on the command line that cannot be read is a [`LoadError`].

use crate::ast::{Item, Program, Span};
use crate::diag::{Diagnostic, SourceMap};
use std::path::{Component, Path, PathBuf};

/// A program read from files.
#[derive(Debug)]
pub struct Loaded {
    /// Every file read, in the order read.
    pub map: SourceMap,
    /// The items of all files, each `.include` replaced by the items of the file it names
    /// (so the program holds no `Item::Include`).
    pub program: Program,
    /// Syntax errors and `.include` errors, in file order.
    pub diagnostics: Vec<Diagnostic>,
    /// For each file of `map`: whether it was read through an `.include` (rather than
    /// named on the command line).
    pub included: Vec<bool>,
    /// `Some` when the program is Soufflé's language: how its results are written.
    pub souffle: Option<crate::souffle::SouffleIo>,
}

/// The language of a program's files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Dialect {
    /// By the file's name: Soufflé for a name ending in `.dl`, LogiQL otherwise.
    #[default]
    ByName,
    LogiQL,
    Souffle,
}

impl Loaded {
    /// The spans of the files read through an `.include`: libraries such as a schema,
    /// of which a program uses a part.
    pub fn included_spans(&self) -> Vec<Span> {
        self.map
            .files()
            .iter()
            .zip(&self.included)
            .filter(|(_, inc)| **inc)
            .map(|(f, _)| Span {
                start: f.base,
                end: f.base + f.text.len() as u32,
            })
            .collect()
    }

    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// A file named on the command line could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError(pub String);

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LoadError {}

/// Reads, parses and joins the files of one program, in the order given.
pub fn load_files(paths: &[PathBuf]) -> Result<Loaded, LoadError> {
    load_files_as(paths, Dialect::ByName)
}

/// [`load_files`] reading every file as `dialect`.
pub fn load_files_as(paths: &[PathBuf], dialect: Dialect) -> Result<Loaded, LoadError> {
    let mut l = Loader {
        dialect,
        out: Loaded {
            map: SourceMap::new(),
            program: Program { items: Vec::new() },
            diagnostics: Vec::new(),
            included: Vec::new(),
            souffle: None,
        },
        seen: Vec::new(),
    };
    for p in paths {
        let text = read_text(p).map_err(LoadError)?;
        let key = canonical(p);
        if l.seen.contains(&key) {
            continue;
        }
        let mut stack = Vec::new();
        l.file(p, key, text, false, &mut stack)?;
    }
    Ok(l.out)
}

/// Parses one text as a program file named `name` (with no `.include` resolved against
/// the disk: an `.include` in it is read relative to the current folder).
pub fn load_text(name: &str, text: &str) -> Result<Loaded, LoadError> {
    load_text_as(name, text, Dialect::ByName)
}

/// [`load_text`] reading the text as `dialect`.
pub fn load_text_as(name: &str, text: &str, dialect: Dialect) -> Result<Loaded, LoadError> {
    let mut l = Loader {
        dialect,
        out: Loaded {
            map: SourceMap::new(),
            program: Program { items: Vec::new() },
            diagnostics: Vec::new(),
            included: Vec::new(),
            souffle: None,
        },
        seen: Vec::new(),
    };
    let mut stack = Vec::new();
    l.file(
        Path::new(name),
        canonical(Path::new(name)),
        text.to_string(),
        false,
        &mut stack,
    )?;
    Ok(l.out)
}

struct Loader {
    dialect: Dialect,
    out: Loaded,
    /// The canonical paths of the files read so far.
    seen: Vec<PathBuf>,
}

impl Loader {
    /// Adds the file `path` (canonically `key`) with its text; `stack` holds the files
    /// that include it, outermost first, with the display names.
    fn file(
        &mut self,
        path: &Path,
        key: PathBuf,
        text: String,
        included: bool,
        stack: &mut Vec<(PathBuf, String)>,
    ) -> Result<(), LoadError> {
        let name = path.display().to_string();
        let Some(k) = self.out.map.add(name.clone(), text) else {
            return Err(LoadError(format!(
                "`{name}`: the files of the program pass 4 GiB together"
            )));
        };
        self.out.included.push(included);
        self.seen.push(key.clone());
        let base = self.out.map.files()[k].base;
        let souffle = match self.dialect {
            Dialect::ByName => crate::souffle::is_souffle_path(path),
            Dialect::LogiQL => false,
            Dialect::Souffle => true,
        };
        let (mut program, mut diags) = if souffle {
            let (program, io, diags) = crate::souffle::parse(&self.out.map.files()[k].text);
            let all = self.out.souffle.get_or_insert_with(Default::default);
            all.outputs.extend(io.outputs);
            all.printsize.extend(io.printsize);
            all.inputs.extend(io.inputs);
            (program, diags)
        } else {
            crate::parse(&self.out.map.files()[k].text)
        };
        let shift = |s: Span| Span {
            start: s.start + base,
            end: s.end + base,
        };
        program.map_spans(&shift);
        for d in &mut diags {
            for l in &mut d.labels {
                l.span = shift(l.span);
            }
        }
        self.out.diagnostics.append(&mut diags);
        stack.push((key, name));
        for item in program.items {
            let Item::Include(inc) = item else {
                self.out.program.items.push(item);
                continue;
            };
            let (rel, at) = &inc.path;
            let target = lexically_normal(&path.parent().unwrap_or(Path::new("")).join(rel));
            let text = match read_text(&target) {
                Ok(t) => t,
                Err(why) => {
                    self.out.diagnostics.push(
                        Diagnostic::error(why, *at)
                            .with_label("included here")
                            .with_help("an included path is relative to the folder of the file that includes it"),
                    );
                    continue;
                }
            };
            let tkey = canonical(&target);
            if let Some(pos) = stack.iter().position(|(k, _)| *k == tkey) {
                let mut chain: Vec<&str> = stack[pos..].iter().map(|(_, n)| n.as_str()).collect();
                let again = target.display().to_string();
                chain.push(&again);
                self.out.diagnostics.push(
                    Diagnostic::error(format!("`.include` cycle: {}", chain.join(" -> ")), inc.span)
                        .with_label(format!("`{again}` includes this file again"))
                        .with_help("a file cannot include itself, directly or through other files"),
                );
                continue;
            }
            if self.seen.contains(&tkey) {
                continue;
            }
            self.file(&target, tkey, text, true, stack)?;
        }
        stack.pop();
        Ok(())
    }
}

/// The text of a file, or why it cannot be had.
fn read_text(path: &Path) -> Result<String, String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read `{shown}`: {}", io_reason(&e)))?;
    if meta.is_dir() {
        return Err(format!("cannot read `{shown}`: it is a folder, not a file"));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read `{shown}`: {}", io_reason(&e)))?;
    String::from_utf8(bytes).map_err(|e| not_utf8(&shown.to_string(), &e))
}

/// Why the file `name` is not text: `name:LINE:COL: the file is not UTF-8 text`, at its
/// first byte that is not UTF-8 (the column counted in characters).
pub fn not_utf8(name: &str, e: &std::string::FromUtf8Error) -> String {
    let at = e.utf8_error().valid_up_to();
    let before = std::str::from_utf8(&e.as_bytes()[..at]).unwrap_or_default();
    let (line, col) = crate::diag::line_col(before, at);
    format!("{name}:{line}:{col}: the file is not UTF-8 text")
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "No such file".to_string(),
        std::io::ErrorKind::PermissionDenied => "Permission denied".to_string(),
        _ => e.to_string(),
    }
}

/// The path that identifies a file: canonical when it exists.
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| lexically_normal(path))
}

/// `a/./b/../c` as `a/c` (for the names diagnostics show; `..` after a symbolic link is
/// taken lexically).
fn lexically_normal(path: &Path) -> PathBuf {
    let mut out: Vec<Component> = Vec::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if matches!(out.last(), Some(Component::Normal(_))) => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    if out.is_empty() {
        return PathBuf::from(".");
    }
    out.iter().collect()
}
