//! The Fox dialect of LogiQL: lexer, parser, AST with spans, pretty-printer, diagnostics.
//!
//! This crate never knows about types or plans.
//!
//! ```
//! let (program, diags) = fox_syntax::parse("path(x, y) <- edge(x, y).");
//! assert!(diags.is_empty());
//! assert_eq!(program.items.len(), 1);
//! assert_eq!(fox_syntax::pretty::print_program(&program), "path(x, y) <- edge(x, y).\n");
//! ```

pub mod ast;
pub mod diag;
pub mod lexer;
mod limits;
mod parser;
pub mod pretty;
pub mod souffle;
pub mod sources;

lalrpop_util::lalrpop_mod!(
    #[allow(clippy::all, clippy::pedantic, unused_parens, unused_imports)]
    grammar
);

pub use limits::{MAX_EXPR_DEPTH, MAX_NESTING};

use ast::Program;
use diag::Diagnostic;

/// Parses a whole source file.
///
/// Returns every item that parsed cleanly and every syntax error (lexical and
/// grammatical), in source order. A clause with an error is left out and parsing resumes
/// after the `.` that ends it, so errors in later clauses are reported too. Never panics.
pub fn parse(source: &str) -> (Program, Vec<Diagnostic>) {
    if u32::try_from(source.len()).is_err() {
        let d = Diagnostic::error("source file is too large (the limit is 4 GiB)", ast::Span::default());
        return (Program { items: Vec::new() }, vec![d]);
    }
    let (tokens, mut diags) = lexer::lex(source);
    let mut lexical: Vec<ast::Span> = diags.iter().map(Diagnostic::span).collect();
    lexical.sort();
    let tokens = parser::directive_typos(tokens, &mut diags);
    let tokens = limits::limit_nesting(tokens, &mut diags);
    let mut ctx = parser::Ctx::default();
    let result = grammar::ProgramParser::new().parse(&mut ctx, tokens.iter().cloned().map(Ok));
    let mut syntax = Vec::new();
    let mut items = match result {
        Ok(items) => items,
        Err(e) => {
            syntax.push(parser::parse_error(&e, &tokens, source));
            Vec::new()
        }
    };
    for r in &ctx.recovered {
        syntax.push(parser::parse_error(&r.error, &tokens, source));
    }
    // A parse error at a token the lexer already reported is a consequence; report the cause only.
    syntax.retain(|d| {
        let s = d.span();
        let first = lexical.partition_point(|l| l.end < s.start);
        lexical.get(first).is_none_or(|l| l.start > s.end)
    });
    diags.append(&mut syntax);
    diags.append(&mut ctx.diags);
    // An item that holds a lexical error (a bad date, an integer too large, …) did not parse.
    items.retain(|item| {
        let s = item.span();
        let first = lexical.partition_point(|l| l.end <= s.start);
        lexical.get(first).is_none_or(|l| l.start >= s.end)
    });
    limits::limit_depth(&mut items, &mut diags);
    diags.sort_by_key(|d| (d.span().start, d.span().end));
    (Program { items }, diags)
}
