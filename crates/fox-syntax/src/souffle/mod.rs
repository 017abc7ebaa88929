//! Soufflé's language as a second front end: a Soufflé program (a `.dl` file) is parsed
//! here and lowered to Fox's syntax tree, which `fox-sema` checks and lowers to the typed
//! core as it does a LogiQL program. Soufflé's I/O conventions, which Fox's tree does not
//! express (output files, delimiters, `.printsize`), come back beside the tree as a
//! [`SouffleIo`], for the drivers that write the results.
//!
//! Diagnostics are Fox's [`Diagnostic`]s, located in the Soufflé source; constructs Fox
//! cannot run yet are refused with a located "not supported in Fox yet" error, never
//! approximated. `docs/souffle.md` lists what is supported and every difference in
//! semantics.

mod ast;
mod components;
mod lexer;
mod lower;
mod parser;
mod records;
pub mod regex;

use crate::ast::Program;
use crate::diag::Diagnostic;
use serde::{Deserialize, Serialize};

/// How a Soufflé program's results are written.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SouffleIo {
    /// The `.output` directives, in source order (a relation may be written to several files).
    pub outputs: Vec<SouffleOutput>,
    /// The relations of `.printsize` directives, in source order.
    pub printsize: Vec<String>,
    /// The `.input`s of relations with a record attribute or an attribute of an
    /// algebraic data type, whose files hold those values as Soufflé writes them
    /// (`[1, a]`, `$A(1, x)`) and are read by [`SouffleInput`]'s shape, not as plain
    /// delimited fields.
    #[serde(default)]
    pub inputs: Vec<SouffleInput>,
}

/// An `.input` of a relation whose attributes are not all plain values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SouffleInput {
    /// The predicate of Fox's program the input loads (the relation, or its auxiliary
    /// `souffle:inputN:rel` when the relation also has clauses).
    pub pred: String,
    /// The shape of each Soufflé attribute; the predicate's columns are their leaf fields.
    pub shape: Vec<OutShape>,
}

/// One `.output` of a Soufflé program.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SouffleOutput {
    pub rel: String,
    /// Relative to the output directory (`<rel>.csv` by default).
    pub file: String,
    /// Field delimiter (a tab by default).
    pub delimiter: String,
    /// `headers=true`: a first line naming the attributes.
    pub headers: bool,
    /// The attribute names.
    pub columns: Vec<String>,
    /// Which attributes are `unsigned` (held as 64-bit signed integers by Fox: a negative
    /// value there cannot be written as Soufflé would).
    pub unsigned: Vec<bool>,
    /// For a relation with a record attribute or an attribute of an algebraic data type, the shape of each Soufflé attribute (the
    /// columns are their leaf fields, in order); empty otherwise (each column is one
    /// attribute).
    #[serde(default)]
    pub shape: Vec<OutShape>,
}

/// How the columns of an output make up a Soufflé attribute.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum OutShape {
    /// One column.
    Leaf,
    /// A record of these fields, written `[a, b]`.
    Record(Vec<OutShape>),
    /// A value of an algebraic data type: a tag column (the index of its branch here)
    /// followed by the fields of every branch, in this order; written `$A(a, b)`, or `$B`
    /// for a branch without fields.
    Adt(Vec<(String, Vec<OutShape>)>),
}

impl OutShape {
    /// How many columns it takes.
    pub fn columns(&self) -> usize {
        match self {
            OutShape::Leaf => 1,
            OutShape::Record(fs) => fs.iter().map(OutShape::columns).sum(),
            OutShape::Adt(bs) => 1 + bs.iter().flat_map(|(_, fs)| fs).map(OutShape::columns).sum::<usize>(),
        }
    }
}

/// Parses a Soufflé program and lowers it to Fox's tree. Never panics; every error is
/// a diagnostic with a span inside `source`.
pub fn parse(source: &str) -> (Program, SouffleIo, Vec<Diagnostic>) {
    if u32::try_from(source.len()).is_err() {
        let d = Diagnostic::error(
            "source file is too large (the limit is 4 GiB)",
            crate::ast::Span::default(),
        );
        return (Program { items: Vec::new() }, SouffleIo::default(), vec![d]);
    }
    let (tokens, mut diags) = lexer::lex(source);
    let mut p = parser::Parser::new(&tokens, source.len());
    let items = p.program();
    diags.append(&mut p.diags);
    if diags.iter().any(Diagnostic::is_error) {
        diags.sort_by_key(|d| (d.span().start, d.span().end));
        return (Program { items: Vec::new() }, SouffleIo::default(), diags);
    }
    let (program, io, mut more) = lower::lower(items);
    diags.append(&mut more);
    diags.sort_by_key(|d| (d.span().start, d.span().end));
    (program, io, diags)
}

/// Whether a program file is Soufflé's language by its name (it ends in `.dl`).
pub fn is_souffle_path(path: &std::path::Path) -> bool {
    path.extension().is_some_and(|e| e == "dl")
}
