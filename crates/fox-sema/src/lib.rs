//! fox-sema: from the AST to the typed core.
//!
//! [`check`] resolves names (declarations, `.input`, `.output`, built-ins), infers and
//! checks types (inserting explicit widening casts), desugars (disjunction, several heads,
//! comparison chains, functional terms, negated formulas), checks safety, and stratifies
//! the program (petgraph SCCs). It reports every error of a file with its span and never
//! panics on user input. [`print_core`] prints the result readably.
//!
//! Decisions where the language contract leaves room:
//! - A predicate read with `.input` may not also be defined by facts or rules.
//! - `avg` of integers or of `decimal(s)` is `decimal(max(s, 6))`; of `float64` it is `float64`.
//! - `strlen`, `year`, `month` and `day` are `int32`; `date - date` is `int64`.
//! - A negated parenthesised formula that only tests bound values becomes a filter; one
//!   with atoms (and a negated atom with `_` arguments) becomes an auxiliary predicate
//!   `$notN` over the variables it shares with the rest of the rule.
//! - Without `.output`, every derived predicate is output that no rule of another stratum
//!   reads (so a recursive predicate reading itself is still output).

pub mod core;
mod desugar;
mod env;
mod lower;
mod print;
mod strat;
mod types;

pub use print::print_core;

use crate::core::{Column, CoreProgram, Fact, InputSpec, OutputSpec, PredId, PredInfo, Stratum};
use crate::desugar::{blit_vars, dnf, expr_vars, formula_vars};
use crate::env::{builtin, closest, type_name_error, BLit, BuiltinUse, Env, FlatRule, PredSig};
use crate::lower::{const_lit, const_value, lower_rule, Dep, Lowered};
use crate::types::{common, lit_value, type_from_name, value_type, MAX_SCALE, TYPE_NAMES};
use fox_syntax::ast::{self, Atom, Decl, DeclShape, Expr, ExprKind, Formula, HeadKind, Ident, Item, Span};
use fox_syntax::diag::Diagnostic;
use fox_syntax::pretty::print_expr;
use std::collections::{HashMap, HashSet};

/// What the checker is told about the program besides its items.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Spans of library files (read through `.include`, such as a schema): predicates
    /// declared there are not reported as unused, since a program uses a part of a library.
    pub library: Vec<Span>,
}

/// Checks a program. The core program is `Some` exactly when there is no error; warnings
/// may accompany it.
pub fn check(program: &ast::Program) -> (Option<CoreProgram>, Vec<Diagnostic>) {
    check_with(program, &Options::default())
}

/// [`check`] with `options`.
pub fn check_with(program: &ast::Program, options: &Options) -> (Option<CoreProgram>, Vec<Diagnostic>) {
    let mut c = Checker {
        library: options.library.clone(),
        ..Checker::default()
    };
    let core = c.run(program);
    // Warnings about a rule with an error, and about what is unused in a program with
    // errors (whose uses may be the ones that failed), say nothing more.
    let mut error_at: Vec<Span> = c.diags.iter().filter(|d| d.is_error()).map(Diagnostic::span).collect();
    error_at.sort();
    for (rule, d) in std::mem::take(&mut c.singletons) {
        let k = error_at.partition_point(|s| s.start < rule.start);
        if error_at.get(k).is_none_or(|s| s.start >= rule.end) {
            c.diags.push(d);
        }
    }
    if error_at.is_empty() {
        c.diags.append(&mut c.unused_warnings);
    }
    let error_at: HashSet<Span> = error_at.into_iter().collect();
    let mut seen: HashSet<Diagnostic> = HashSet::with_capacity(c.diags.len());
    let mut diags: Vec<Diagnostic> = Vec::with_capacity(c.diags.len());
    for d in c.diags {
        if (d.is_error() || !error_at.contains(&d.span())) && seen.insert(d.clone()) {
            diags.push(d);
        }
    }
    diags.sort_by_key(|d| (d.span().start, d.span().end));
    let errors = diags.iter().any(Diagnostic::is_error);
    (if errors { None } else { core }, diags)
}

struct FactItem {
    pred: usize,
    args: Vec<Expr>,
    span: Span,
}

#[derive(Default)]
struct Checker {
    env: Env,
    diags: Vec<Diagnostic>,
    rules: Vec<FlatRule>,
    facts: Vec<FactItem>,
    aux: HashMap<(Span, Vec<String>), usize>,
    /// Undeclared predicates whose column names came from a fact (a rule renames them).
    named_by_fact: HashSet<usize>,
    inputs: Vec<InputSpec>,
    /// See [`Options::library`].
    library: Vec<Span>,
    /// Variables used once, with the span of their rule.
    singletons: Vec<(Span, Diagnostic)>,
    /// Predicates nothing uses.
    unused_warnings: Vec<Diagnostic>,
}

impl Checker {
    fn error(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    fn run(&mut self, program: &ast::Program) -> Option<CoreProgram> {
        for item in &program.items {
            match item {
                Item::Decl(d) => self.declare(d),
                // The tools that read files replace every `.include` by the file's items.
                Item::Include(i) => self.error(
                    Diagnostic::error(format!("`.include \"{}\"` is not read here", i.path.0), i.span)
                        .with_label("not resolved")
                        .with_help("`.include` is resolved when a program is read from files (foxc, foxrun, the REPL's `.load`)"),
                ),
                _ => {}
            }
        }
        for item in &program.items {
            if let Item::Input(i) = item {
                self.input(i);
            }
        }
        for item in &program.items {
            if let Item::Rule(r) = item {
                self.rule(r);
            }
        }
        self.resolve_negations();
        self.infer();

        let lowered: Vec<Lowered> = self
            .rules
            .iter()
            .map(|r| {
                let cols = self.env.preds.get(r.head).map(|s| s.types.clone()).unwrap_or_default();
                lower_rule(&self.env, r, &cols)
            })
            .collect();
        for (l, r) in lowered.iter().zip(&self.rules) {
            for d in &l.diags {
                let mut d = d.clone();
                if r.aux {
                    d = d.with_note(
                        "note: a negated formula is checked as a rule of its own: every variable it shares with the rest of the rule must be bound inside it",
                    );
                }
                self.diags.push(d);
            }
        }
        let facts = self.facts();

        let heads: Vec<(usize, &[Dep])> = self
            .rules
            .iter()
            .zip(&lowered)
            .map(|(r, l)| (r.head, l.deps.as_slice()))
            .collect();
        let strata = strat::stratify(&self.env, &heads, &mut self.diags);
        self.uninferred(&lowered, &strata.component);
        let outputs = self.outputs(program, &lowered, &strata.component);
        self.unused(&lowered, &outputs);

        if self.diags.iter().any(Diagnostic::is_error) {
            return None;
        }
        let mut rules: Vec<Option<core::CoreRule>> = Vec::with_capacity(lowered.len());
        for (l, r) in lowered.into_iter().zip(&self.rules) {
            if l.rule.is_none() {
                self.diags.push(
                    Diagnostic::error("the types of this rule could not be determined", r.span)
                        .with_help("declare the predicates it uses"),
                );
            }
            rules.push(l.rule);
        }
        let mut preds = Vec::new();
        for s in &self.env.preds {
            let columns: Option<Vec<Column>> = s
                .columns
                .iter()
                .zip(&s.types)
                .map(|(n, t)| t.map(|ty| Column { name: n.clone(), ty }))
                .collect();
            let Some(columns) = columns else {
                self.diags.push(Diagnostic::error(
                    format!("the column types of `{}` could not be determined", s.name),
                    s.span,
                ));
                continue;
            };
            preds.push(PredInfo {
                name: s.name.clone(),
                columns,
                functional_keys: s.functional,
                input: s.input.is_some(),
                span: s.span,
            });
        }
        if self.diags.iter().any(Diagnostic::is_error) {
            return None;
        }
        // Facts and rules go to the stratum of their predicate, in program order.
        let mut stratum_of: Vec<Option<usize>> = vec![None; self.env.preds.len()];
        for (k, plan) in strata.strata.iter().enumerate() {
            for &p in &plan.preds {
                stratum_of[p] = Some(k);
            }
        }
        let mut out_strata: Vec<Stratum> = strata
            .strata
            .iter()
            .map(|plan| Stratum {
                preds: plan.preds.iter().map(|&p| PredId(p as u32)).collect(),
                recursive: plan.recursive,
                facts: Vec::new(),
                rules: Vec::new(),
            })
            .collect();
        for f in facts {
            if let Some(k) = stratum_of.get(f.pred.0 as usize).copied().flatten() {
                out_strata[k].facts.push(f);
            }
        }
        for r in rules.into_iter().flatten() {
            if let Some(k) = stratum_of.get(r.head.0 as usize).copied().flatten() {
                out_strata[k].rules.push(r);
            }
        }
        Some(CoreProgram {
            preds,
            strata: out_strata,
            inputs: std::mem::take(&mut self.inputs),
            outputs,
        })
    }

    // ---- declarations ----

    fn declare(&mut self, d: &Decl) {
        if builtin(&d.pred.name).is_some() {
            self.error(shadow_error(&d.pred));
            return;
        }
        if let Some(e) = type_name_error(&d.pred) {
            self.error(e);
            return;
        }
        let columns = d.shape.columns();
        let mut types: Vec<Option<ast::Span>> = vec![None; columns.len()];
        let mut tys = vec![None; columns.len()];
        let mut ok = true;
        // Each column name's first column.
        let mut index: HashMap<&str, usize> = HashMap::with_capacity(columns.len());
        for (i, c) in columns.iter().enumerate() {
            let first = *index.entry(c.name.as_str()).or_insert(i);
            if first != i {
                let first = &columns[first];
                self.error(
                    Diagnostic::error(
                        format!("column `{}` appears twice in `{}`", c.name, d.pred.name),
                        c.span,
                    )
                    .with_label("duplicate column")
                    .with_secondary(first.span, "first here"),
                );
                ok = false;
            }
        }
        for ta in &d.types {
            let Some(&i) = index.get(ta.var.name.as_str()) else {
                let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
                self.error(
                    Diagnostic::error(
                        format!("`{}` is not a column of `{}`", ta.var.name, d.pred.name),
                        ta.var.span,
                    )
                    .with_label("unknown column")
                    .with_help(format!("the columns are: {}", names.join(", "))),
                );
                ok = false;
                continue;
            };
            let Some(ty) = type_from_name(&ta.ty.name, ta.scale) else {
                let mut e =
                    Diagnostic::error(format!("unknown type `{}`", ta.ty.name), ta.ty.span).with_label("not a type");
                e = match closest(&ta.ty.name, TYPE_NAMES.iter().copied()) {
                    Some(s) => e.with_help(format!("did you mean `{s}`?")),
                    None => e.with_help(format!("the types are: {}", TYPE_NAMES.join(", "))),
                };
                self.error(e);
                ok = false;
                continue;
            };
            if let Some(scale) = ta.scale {
                if ta.ty.name != "decimal" {
                    self.error(
                        Diagnostic::error(format!("only `decimal` takes a scale, not `{}`", ta.ty.name), ta.span)
                            .with_label("remove the scale"),
                    );
                    ok = false;
                } else if scale > u32::from(MAX_SCALE) {
                    self.error(
                        Diagnostic::error(
                            format!("decimal scale {scale} is too large; at most {MAX_SCALE}"),
                            ta.span,
                        )
                        .with_label("too many fraction digits"),
                    );
                    ok = false;
                }
            }
            if let Some(first) = types[i] {
                self.error(
                    Diagnostic::error(
                        format!("column `{}` of `{}` has two types", ta.var.name, d.pred.name),
                        ta.span,
                    )
                    .with_label("second type")
                    .with_secondary(first, "first type"),
                );
                ok = false;
                continue;
            }
            types[i] = Some(ta.span);
            tys[i] = Some(ty);
        }
        for (i, c) in columns.iter().enumerate() {
            if types[i].is_none() && ok {
                self.error(
                    Diagnostic::error(format!("column `{}` of `{}` has no type", c.name, d.pred.name), c.span)
                        .with_label("no type")
                        .with_help(format!("add a type atom for it after `->`, e.g. `int64({})`", c.name)),
                );
            }
        }
        let functional = match &d.shape {
            DeclShape::Functional { keys, .. } => Some(keys.len()),
            DeclShape::Relational(_) => None,
        };
        let sig = PredSig {
            name: d.pred.name.clone(),
            columns: columns.iter().map(|c| c.name.clone()).collect(),
            types: tys,
            functional,
            declared: true,
            span: d.span,
            input: None,
            defined: false,
            aux: false,
        };
        if let Some(id) = self.env.lookup(&d.pred.name) {
            let old = &self.env.preds[id];
            if old.functional != sig.functional || old.columns.len() != sig.columns.len() || old.types != sig.types {
                let d = Diagnostic::error(
                    format!("`{}` is declared twice with different shapes", sig.name),
                    d.span,
                )
                .with_label(format!("declared here as `{}`", describe(&sig)))
                .with_secondary(old.span, format!("first declared here as `{}`", describe(old)));
                self.error(d);
            }
            return;
        }
        self.env.add(sig);
    }

    fn input(&mut self, i: &ast::InputDirective) {
        if let Some(e) = type_name_error(&i.pred) {
            self.error(e);
            self.env.undeclared_inputs.insert(i.pred.name.clone());
            return;
        }
        let Some(id) = self.env.lookup(&i.pred.name) else {
            let mut d = Diagnostic::error(
                format!("`.input` of undeclared predicate `{}`", i.pred.name),
                i.pred.span,
            )
            .with_label("not declared");
            d = match self.env.suggest(&i.pred.name) {
                Some(s) => d.with_help(format!("did you mean `{s}`?")),
                None => d.with_help(format!(
                    "an input predicate needs a declaration of its columns and types, e.g. `{}(x, y) -> int32(x), string(y).`",
                    i.pred.name
                )),
            };
            self.error(d);
            self.env.undeclared_inputs.insert(i.pred.name.clone());
            return;
        };
        if self.env.preds[id].columns.is_empty() {
            self.error(
                Diagnostic::error(
                    format!("`.input` of `{}`, which has no columns", i.pred.name),
                    i.pred.span,
                )
                .with_label("an input needs at least one column")
                .with_secondary(self.env.preds[id].span, "declared without columns here"),
            );
            // Read, though not loadable: no warning that it is never defined.
            self.env.preds[id].input = Some(i.span);
            return;
        }
        if let Some(prev) = self.env.preds[id].input {
            self.error(
                Diagnostic::error(format!("`{}` is read twice", i.pred.name), i.span)
                    .with_label("second `.input`")
                    .with_secondary(prev, "first `.input`"),
            );
            return;
        }
        if let Some((sep, span)) = &i.sep {
            if sep.is_empty() {
                self.error(Diagnostic::error("the separator must not be empty", *span).with_label("empty separator"));
                return;
            }
        }
        // A Parquet file has typed columns, not text: separators and header lines mean
        // nothing there.
        if let Some((file, _)) = &i.from {
            let parquet = file.len() >= 8
                && file.is_char_boundary(file.len() - 8)
                && file[file.len() - 8..].eq_ignore_ascii_case(".parquet");
            let text_only = [
                i.sep.as_ref().map(|(_, span)| ("sep", *span)),
                i.header.map(|span| ("header", span)),
            ];
            if parquet {
                for (what, span) in text_only.into_iter().flatten() {
                    self.error(
                        Diagnostic::error(format!("`{what}` does not apply to a Parquet file"), span)
                            .with_label("only for text inputs (CSV, TSV, TBL)")
                            .with_help("a Parquet file's columns are read by position with their own types; remove it"),
                    );
                }
            }
        }
        let mut key = Vec::new();
        if let Some((cols, _)) = &i.key {
            let columns = self.env.preds[id].columns.clone();
            let mut index: HashMap<&str, usize> = HashMap::with_capacity(columns.len());
            for (k, n) in columns.iter().enumerate().rev() {
                index.insert(n.as_str(), k);
            }
            let mut in_key = HashSet::new();
            for c in cols {
                match index.get(c.name.as_str()).copied() {
                    Some(k) if !in_key.insert(k) => {
                        self.error(
                            Diagnostic::error(format!("column `{}` is named twice in the key", c.name), c.span)
                                .with_label("named again here"),
                        );
                    }
                    Some(k) => key.push(k),
                    None => {
                        let d = Diagnostic::error(format!("`{}` has no column `{}`", i.pred.name, c.name), c.span)
                            .with_label("not a column")
                            .with_help(format!(
                                "the columns of `{}` are {}",
                                i.pred.name,
                                columns.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
                            ));
                        self.error(d);
                    }
                }
            }
        }
        self.env.preds[id].input = Some(i.span);
        self.inputs.push(InputSpec {
            pred: PredId(id as u32),
            file: i
                .from
                .as_ref()
                .map_or_else(|| format!("{}.csv", i.pred.name), |(f, _)| f.clone()),
            sep: i.sep.as_ref().map_or_else(
                || {
                    // A `.tsv` file is tab-separated unless `sep` says otherwise.
                    let file = i.from.as_ref().map_or("", |(f, _)| f.as_str());
                    if file.ends_with(".tsv") || file.ends_with(".tsv.gz") {
                        "\t".to_string()
                    } else {
                        ",".to_string()
                    }
                },
                |(s, _)| s.clone(),
            ),
            key,
            header: i.header.is_some(),
            span: i.span,
        });
    }

    // ---- rules and facts ----

    fn rule(&mut self, r: &ast::Rule) {
        let (formula, aggs) = match &r.body {
            None => {
                for h in &r.heads {
                    let args = head_args(h);
                    if let Some(p) = self.head_pred(h, &args, true) {
                        self.facts.push(FactItem {
                            pred: p,
                            args,
                            span: h.span,
                        });
                    }
                }
                return;
            }
            Some(ast::Body::Formula(f)) => (f, None),
            Some(ast::Body::Agg { aggs, body, span }) => (body, Some((aggs.clone(), *span))),
        };
        let alts = match dnf(formula) {
            Ok(a) => a,
            Err(d) => {
                self.error(d);
                return;
            }
        };
        self.singletons(r, aggs.as_ref().map(|(a, _)| a.as_slice()), &alts);
        for h in &r.heads {
            let args = head_args(h);
            let Some(p) = self.head_pred(h, &args, false) else {
                continue;
            };
            for conj in &alts {
                self.rules.push(FlatRule {
                    head: p,
                    head_args: args.clone(),
                    lits: conj.clone(),
                    aggs: aggs.clone(),
                    span: r.span,
                    aux: false,
                });
            }
        }
    }

    /// Warns about each named variable that occurs once in an alternative of a rule (its
    /// heads, aggregates and the literals of one branch of its disjunctions): it matches
    /// anything and joins with nothing, which is mostly a misspelling. Names starting with
    /// `_` are exempt, as in Soufflé.
    fn singletons(&mut self, r: &ast::Rule, aggs: Option<&[ast::AggBinding]>, alts: &[Vec<BLit>]) {
        let mut shared: Vec<(&str, Span)> = Vec::new();
        for h in &r.heads {
            match &h.kind {
                HeadKind::Relational(args) => args.iter().for_each(|e| expr_vars(e, &mut shared)),
                HeadKind::Functional { keys, value } => {
                    keys.iter().for_each(|e| expr_vars(e, &mut shared));
                    expr_vars(value, &mut shared);
                }
            }
        }
        for a in aggs.unwrap_or_default() {
            shared.push((a.var.name.as_str(), a.var.span));
            if let Some(e) = &a.arg {
                expr_vars(e, &mut shared);
            }
        }
        for alt in alts {
            let mut vars = shared.clone();
            alt.iter().for_each(|l| blit_vars(l, &mut vars));
            let mut count: HashMap<&str, (usize, Span)> = HashMap::with_capacity(vars.len());
            for &(n, s) in &vars {
                count.entry(n).or_insert((0, s)).0 += 1;
            }
            // Suggestions compare names pairwise: only for rules of a readable size.
            let suggest = count.len() <= 64;
            let mut once: Vec<(&str, Span)> = count
                .iter()
                .filter(|(n, (c, _))| *c == 1 && !n.starts_with('_'))
                .map(|(n, (_, s))| (*n, *s))
                .collect();
            once.sort_by_key(|(_, s)| *s);
            for (n, s) in once {
                let mut d = Diagnostic::warning(format!("variable `{n}` occurs only once in this rule"), s)
                    .with_label("used once");
                let similar = if suggest {
                    closest(n, count.keys().copied().filter(|m| *m != n))
                } else {
                    None
                };
                d = match similar {
                    Some(m) => d.with_help(format!(
                        "did you mean `{m}`? A variable used once matches any value; write `_` (or a name starting with `_`) when that is meant"
                    )),
                    None => d.with_help(format!(
                        "a variable used once matches any value; write `_` (or `_{n}`) when that is meant"
                    )),
                };
                self.singletons.push((r.span, d));
            }
        }
    }

    /// The predicate a head defines, registering undeclared ones.
    fn head_pred(&mut self, h: &ast::Head, args: &[Expr], fact: bool) -> Option<usize> {
        if builtin(&h.pred.name).is_some() {
            self.error(shadow_error(&h.pred));
            return None;
        }
        if let Some(e) = type_name_error(&h.pred) {
            self.error(e);
            return None;
        }
        let functional = match &h.kind {
            HeadKind::Functional { keys, .. } => Some(keys.len()),
            HeadKind::Relational(_) => None,
        };
        // A column is named by its variable where that variable occurs first.
        let mut seen: HashSet<&str> = HashSet::new();
        let names: Vec<String> = args
            .iter()
            .enumerate()
            .map(|(i, e)| match &e.kind {
                ExprKind::Var(v) if seen.insert(v.as_str()) => v.clone(),
                _ => format!("c{i}"),
            })
            .collect();
        let Some(id) = self.env.lookup(&h.pred.name) else {
            let id = self.env.add(PredSig {
                name: h.pred.name.clone(),
                types: vec![None; names.len()],
                columns: names,
                functional,
                declared: false,
                span: h.span,
                input: None,
                defined: true,
                aux: false,
            });
            if fact {
                self.named_by_fact.insert(id);
            }
            return Some(id);
        };
        let sig = &self.env.preds[id];
        let what = if fact { "facts" } else { "rules" };
        if let Some(input) = sig.input {
            let d = Diagnostic::error(
                format!(
                    "`{}` is read with `.input` and cannot also be defined by {what}",
                    sig.name
                ),
                h.span,
            )
            .with_label(format!("defined here by {what}"))
            .with_secondary(input, "read from data here")
            .with_help("remove the `.input` directive, or give the derived predicate another name");
            self.error(d);
            return None;
        }
        if sig.functional.is_some() != functional.is_some() {
            let first = if sig.declared {
                format!("declared as `{}`", sig.shape_text())
            } else {
                format!("first defined here as `{}`", sig.shape_text())
            };
            let d = match &h.kind {
                HeadKind::Relational(_) => {
                    let example = match args.split_last() {
                        Some((value, keys)) => format!(
                            "{}[{}] = {}",
                            h.pred.name,
                            keys.iter().map(print_expr).collect::<Vec<_>>().join(", "),
                            print_expr(value)
                        ),
                        None => format!("{}[…] = v", h.pred.name),
                    };
                    Diagnostic::error(
                        format!(
                            "`{}` is a functional predicate, written here as a relation",
                            h.pred.name
                        ),
                        h.span,
                    )
                    .with_label("written as a relation")
                    .with_secondary(sig.span, first)
                    .with_help(format!("write `{example}`"))
                }
                HeadKind::Functional { .. } => Diagnostic::error(
                    format!(
                        "`{}` is a relation, written here as a functional predicate",
                        h.pred.name
                    ),
                    h.span,
                )
                .with_label("written as a functional predicate")
                .with_secondary(sig.span, first)
                .with_help(format!(
                    "write `{}({})`",
                    h.pred.name,
                    args.iter().map(print_expr).collect::<Vec<_>>().join(", ")
                )),
            };
            self.env.preds[id].defined = true;
            self.error(d);
            return None;
        }
        if sig.arity() != args.len() || sig.functional != functional {
            let used = match functional {
                Some(k) => format!("`{}` with {} and a value", h.pred.name, plural(k, "key")),
                None => format!("`{}` with {}", h.pred.name, plural(args.len(), "column")),
            };
            let d = Diagnostic::error(format!("{used} does not match its earlier definition"), h.span)
                .with_label(format!("defined here as {used}"))
                .with_secondary(sig.span, format!("`{}` is defined here", sig.shape_text()));
            self.env.preds[id].defined = true;
            self.error(d);
            return None;
        }
        if !fact && self.named_by_fact.remove(&id) && !sig.declared {
            self.env.preds[id].columns = names;
        }
        self.env.preds[id].defined = true;
        Some(id)
    }

    /// Replaces negated formulas by negated auxiliary predicates (which may in turn hold
    /// negated formulas).
    fn resolve_negations(&mut self) {
        let mut i = 0;
        while i < self.rules.len() {
            if self.rules[i].lits.iter().any(|l| matches!(l, BLit::NegFormula { .. })) {
                let rule = self.rules[i].clone();
                let mut lits = Vec::new();
                let mut reported = HashSet::new();
                for (k, lit) in rule.lits.iter().enumerate() {
                    let BLit::NegFormula {
                        formula,
                        local_ok,
                        span,
                    } = lit
                    else {
                        lits.push(lit.clone());
                        continue;
                    };
                    let mut outside = Vec::new();
                    for (k2, l) in rule.lits.iter().enumerate() {
                        if k2 != k {
                            blit_vars(l, &mut outside);
                        }
                    }
                    rule.head_args.iter().for_each(|e| expr_vars(e, &mut outside));
                    if let Some((aggs, _)) = &rule.aggs {
                        aggs.iter()
                            .filter_map(|a| a.arg.as_ref())
                            .for_each(|e| expr_vars(e, &mut outside));
                    }
                    let outside: HashSet<&str> = outside.into_iter().map(|(n, _)| n).collect();
                    let mut inner = Vec::new();
                    formula_vars(formula, &mut inner);
                    let mut shared: Vec<(String, Span)> = Vec::new();
                    for (n, s) in inner {
                        if outside.contains(n) {
                            if !shared.iter().any(|(m, _)| m == n) {
                                shared.push((n.to_string(), s));
                            }
                        } else if !local_ok && reported.insert(n.to_string()) {
                            self.error(
                                Diagnostic::error(format!("unsafe rule: variable `{n}` is not bound"), s)
                                    .with_label(format!(
                                        "`{n}` is used in a negated atom but no positive atom or assignment binds it"
                                    ))
                                    .with_help(format!(
                                        "bind `{n}` with a positive atom, or write `_` if its value does not matter"
                                    )),
                            );
                        }
                    }
                    if let Some(aux) = self.aux_pred(formula, *span, &shared) {
                        let name = self.env.preds[aux].name.clone();
                        lits.push(BLit::NotAtom {
                            atom: Atom {
                                pred: Ident { name, span: *span },
                                args: shared
                                    .iter()
                                    .map(|(n, s)| Expr {
                                        kind: ExprKind::Var(n.clone()),
                                        span: *s,
                                    })
                                    .collect(),
                                span: *span,
                            },
                            functional: false,
                            span: *span,
                        });
                    }
                }
                self.rules[i].lits = lits;
            }
            i += 1;
        }
    }

    fn aux_pred(&mut self, formula: &Formula, span: Span, shared: &[(String, Span)]) -> Option<usize> {
        let key = (span, shared.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>());
        if let Some(&id) = self.aux.get(&key) {
            return Some(id);
        }
        let alts = match dnf(formula) {
            Ok(a) => a,
            Err(d) => {
                self.error(d);
                return None;
            }
        };
        let name = format!("$not{}", self.aux.len());
        let id = self.env.add(PredSig {
            name: name.clone(),
            columns: key.1.clone(),
            types: vec![None; shared.len()],
            functional: None,
            declared: false,
            span,
            input: None,
            defined: true,
            aux: true,
        });
        self.aux.insert(key, id);
        let head_args: Vec<Expr> = shared
            .iter()
            .map(|(n, s)| Expr {
                kind: ExprKind::Var(n.clone()),
                span: *s,
            })
            .collect();
        for conj in alts {
            self.rules.push(FlatRule {
                head: id,
                head_args: head_args.clone(),
                lits: conj,
                aggs: None,
                span,
                aux: true,
            });
        }
        Some(id)
    }

    // ---- types ----

    /// Infers the column types of undeclared predicates: each rule and fact contributes the
    /// types it derives, widened to a common type, until nothing changes. Integer constants
    /// in facts and heads adapt to the other definitions' types: they decide a column's type
    /// (`int64`) only where nothing else does.
    fn infer(&mut self) {
        let mut weak: Vec<(usize, usize, core::Type)> = Vec::new();
        let mut strong: Vec<(usize, usize, core::Type)> = Vec::new();
        let heads = self
            .facts
            .iter()
            .map(|f| (f.pred, &f.args))
            .chain(self.rules.iter().map(|r| (r.head, &r.head_args)));
        for (p, args) in heads {
            if self.env.preds.get(p).is_none_or(|s| s.declared) {
                continue;
            }
            for (j, e) in args.iter().enumerate() {
                if let Some((l, neg)) = const_lit(e) {
                    if let Ok(v) = lit_value(l, neg, None) {
                        let out = if matches!(l, ast::Lit::Int(_)) {
                            &mut weak
                        } else {
                            &mut strong
                        };
                        out.push((p, j, value_type(&v)));
                    }
                }
            }
        }
        for (p, j, t) in strong {
            self.widen(p, j, t);
        }
        self.infer_rules();
        let mut changed = false;
        for (p, j, t) in weak {
            if self.env.preds[p].types.get(j).is_some_and(Option::is_none) {
                changed |= self.widen(p, j, t);
            }
        }
        if changed {
            self.infer_rules();
        }
    }

    fn infer_rules(&mut self) {
        let mut updates: Vec<(usize, usize, core::Type)> = Vec::new();
        // Every round either fixes or widens a column type; widening is bounded.
        for _ in 0..64 {
            let mut changed = false;
            for i in 0..self.rules.len() {
                let r = &self.rules[i];
                let Some(sig) = self.env.preds.get(r.head) else {
                    continue;
                };
                if sig.declared {
                    if sig.input.is_none() {
                        changed |= self.widen_decimals(i);
                    }
                    continue;
                }
                let lw = lower_rule(&self.env, r, &vec![None; sig.arity()]);
                for (j, t) in lw.head_types.iter().enumerate() {
                    let int_const = r
                        .head_args
                        .get(j)
                        .and_then(const_lit)
                        .is_some_and(|(l, _)| matches!(l, ast::Lit::Int(_)));
                    if let (Some(t), false) = (t, int_const) {
                        updates.push((r.head, j, *t));
                    }
                }
                for (p, j, t) in updates.drain(..) {
                    changed |= self.widen(p, j, t);
                }
            }
            if !changed {
                break;
            }
        }
    }

    /// A declared `decimal` column of a derived predicate holds 38 digits when rule `i`
    /// stores a 38-digit value (a sum of decimals) in it. Returns whether a column changed.
    fn widen_decimals(&mut self, i: usize) -> bool {
        let r = &self.rules[i];
        let sig = &self.env.preds[r.head];
        let lw = lower_rule(&self.env, r, &vec![None; sig.arity()]);
        let mut changed = false;
        for (j, t) in lw.head_types.iter().enumerate() {
            let slot = self.env.preds[r.head].types.get_mut(j);
            if let (Some(core::Type::WideDecimal(s)), Some(Some(core::Type::Decimal(d)))) = (t, slot) {
                if s <= d {
                    self.env.preds[r.head].types[j] = Some(core::Type::WideDecimal(*d));
                    changed = true;
                }
            }
        }
        changed
    }

    fn widen(&mut self, p: usize, j: usize, t: core::Type) -> bool {
        let Some(slot) = self.env.preds.get_mut(p).and_then(|s| s.types.get_mut(j)) else {
            return false;
        };
        match *slot {
            None => {
                *slot = Some(t);
                true
            }
            Some(cur) => match common(cur, t) {
                Some(n) if n != cur => {
                    *slot = Some(n);
                    true
                }
                _ => false,
            },
        }
    }

    /// Reports undeclared predicates whose types could not be inferred (unless that follows
    /// from another error).
    fn uninferred(&mut self, lowered: &[Lowered], component: &[usize]) {
        let unknown: Vec<bool> = self
            .env
            .preds
            .iter()
            .map(|s| s.types.iter().any(Option::is_none))
            .collect();
        let mut rules_of: Vec<Vec<usize>> = vec![Vec::new(); self.env.preds.len()];
        for (i, r) in self.rules.iter().enumerate() {
            if let Some(v) = rules_of.get_mut(r.head) {
                v.push(i);
            }
        }
        for (p, sig) in self.env.preds.iter().enumerate() {
            if sig.declared || sig.aux || !unknown[p] {
                continue;
            }
            let mut caused_elsewhere = false;
            for &i in &rules_of[p] {
                let l = &lowered[i];
                caused_elsewhere |= l.had_errors
                    || l.deps.iter().any(|d| {
                        unknown.get(d.pred).copied().unwrap_or(false) && component.get(d.pred) != component.get(p)
                    });
            }
            if caused_elsewhere {
                continue;
            }
            let missing: Vec<&str> = sig
                .columns
                .iter()
                .zip(&sig.types)
                .filter(|(_, t)| t.is_none())
                .map(|(c, _)| c.as_str())
                .collect();
            let example: Vec<String> = sig
                .columns
                .iter()
                .zip(&sig.types)
                .map(|(c, t)| format!("{}({c})", t.map_or("int64".to_string(), |t| t.to_string())))
                .collect();
            let d = Diagnostic::error(
                format!(
                    "cannot infer the type of {} `{}` of `{}`",
                    if missing.len() == 1 { "column" } else { "columns" },
                    missing.join("`, `"),
                    sig.name
                ),
                sig.span,
            )
            .with_label("no rule or fact determines this type")
            .with_help(format!("declare it: `{} -> {}.`", sig.shape_text(), example.join(", ")));
            self.diags.push(d);
        }
    }

    /// Warns about predicates that nothing reads: not a rule of another predicate, not an
    /// output. Those of library files (see [`Options::library`]) are exempt, and so are
    /// those of a program without facts or rules (a schema, made to be included).
    fn unused(&mut self, lowered: &[Lowered], outputs: &[OutputSpec]) {
        let schema = self.rules.is_empty() && !self.env.preds.iter().any(|s| s.defined);
        let mut used = vec![schema; self.env.preds.len()];
        for (r, l) in self.rules.iter().zip(lowered) {
            for d in &l.deps {
                if d.pred != r.head {
                    if let Some(u) = used.get_mut(d.pred) {
                        *u = true;
                    }
                }
            }
        }
        for o in outputs {
            if let Some(u) = used.get_mut(o.pred.0 as usize) {
                *u = true;
            }
        }
        let mut library = self.library.clone();
        library.sort();
        let in_library = |s: Span| {
            let k = library.partition_point(|l| l.start <= s.start);
            k > 0 && s.end <= library[k - 1].end
        };
        for (p, s) in self.env.preds.iter().enumerate() {
            if used[p] || s.aux || in_library(s.input.unwrap_or(s.span)) {
                continue;
            }
            let (msg, span, label, help) = if let Some(input) = s.input {
                (
                    format!("`{}` is read with `.input` but never used", s.name),
                    input,
                    "read here",
                    "use it in a rule, or remove the `.input`".to_string(),
                )
            } else if !s.defined {
                (
                    format!("`{}` is declared but never used", s.name),
                    s.span,
                    "declared here",
                    "use it in a rule, or remove the declaration".to_string(),
                )
            } else {
                (
                    format!("`{}` is never used and not output", s.name),
                    s.span,
                    if s.declared { "declared here" } else { "defined here" },
                    format!("use it in a rule, or output it with `.output {}.`", s.name),
                )
            };
            self.unused_warnings
                .push(Diagnostic::warning(msg, span).with_label(label).with_help(help));
        }
        for (p, s) in self.env.preds.iter().enumerate() {
            if used[p] && s.declared && !s.defined && s.input.is_none() {
                self.diags.push(
                    Diagnostic::warning(
                        format!(
                            "`{}` is declared but has no facts, rules or `.input`; it is always empty",
                            s.name
                        ),
                        s.span,
                    )
                    .with_label("declared here")
                    .with_help(format!("read it from data with `.input {}.`", s.name)),
                );
            }
        }
    }

    fn facts(&mut self) -> Vec<Fact> {
        let mut out = Vec::new();
        // The first fact of each key of a functional predicate: its value and span.
        let mut keyed: HashMap<(usize, Vec<String>), (core::Value, Span)> = HashMap::new();
        for f in std::mem::take(&mut self.facts) {
            let Some(sig) = self.env.preds.get(f.pred) else {
                continue;
            };
            let mut values = Vec::new();
            let mut ok = true;
            for (j, e) in f.args.iter().enumerate() {
                let what = format!(
                    "column `{}` of `{}`",
                    sig.columns.get(j).map_or("?", String::as_str),
                    sig.name
                );
                let Some((l, neg)) = const_lit(e) else {
                    let d = match &e.kind {
                        ExprKind::Var(v) => Diagnostic::error(format!("a fact must be ground, but `{v}` is a variable"), e.span)
                            .with_label("variable in a fact")
                            .with_help("a fact lists constant values; to derive tuples from other predicates, write a rule with `<-`"),
                        ExprKind::Anon => Diagnostic::error("`_` cannot appear in a fact", e.span)
                            .with_label("every column of a fact needs a value"),
                        _ => Diagnostic::error("a fact may only contain constants", e.span)
                            .with_label("not a constant")
                            .with_help("write the value itself, or derive it with a rule"),
                    };
                    self.diags.push(d);
                    ok = false;
                    continue;
                };
                match const_value(l, neg, sig.types.get(j).copied().flatten(), e.span, &what) {
                    Ok(v) => values.push(v),
                    Err(d) => {
                        self.diags.push(d);
                        ok = false;
                    }
                }
            }
            if let (true, Some(k)) = (ok, sig.functional) {
                if let Some(value) = values.get(k) {
                    let keys: Vec<String> = values[..k].iter().map(print::value).collect();
                    match keyed.get(&(f.pred, keys.clone())) {
                        Some((first, span)) if first != value => {
                            let d = Diagnostic::error(
                                format!("`{}[{}]` is given two values", sig.name, keys.join(", ")),
                                f.span,
                            )
                            .with_label(format!("second value `{}`", print::value(value)))
                            .with_secondary(*span, format!("first value `{}`", print::value(first)))
                            .with_help(
                                "a functional predicate has at most one value per key; remove one of these facts",
                            );
                            self.diags.push(d);
                            ok = false;
                        }
                        Some(_) => {}
                        None => {
                            keyed.insert((f.pred, keys), (value.clone(), f.span));
                        }
                    }
                }
            }
            if ok {
                out.push(Fact {
                    pred: PredId(f.pred as u32),
                    values,
                    span: f.span,
                });
            }
        }
        out
    }

    fn outputs(&mut self, program: &ast::Program, lowered: &[Lowered], component: &[usize]) -> Vec<OutputSpec> {
        let mut out = Vec::new();
        let mut seen: HashMap<usize, Span> = HashMap::new();
        let mut any = false;
        for item in &program.items {
            let Item::Output(o) = item else { continue };
            any = true;
            if let Some(e) = type_name_error(&o.pred) {
                self.error(e);
                continue;
            }
            let Some(id) = self.env.lookup(&o.pred.name).filter(|&id| !self.env.preds[id].aux) else {
                let mut d = Diagnostic::error(format!("`.output` of unknown predicate `{}`", o.pred.name), o.pred.span)
                    .with_label("not declared or defined");
                if let Some(s) = self.env.suggest(&o.pred.name) {
                    d = d.with_help(format!("did you mean `{s}`?"));
                }
                self.error(d);
                continue;
            };
            if let Some(prev) = seen.insert(id, o.span) {
                self.error(
                    Diagnostic::error(format!("`{}` is output twice", o.pred.name), o.span)
                        .with_label("second `.output`")
                        .with_secondary(prev, "first `.output`"),
                );
                continue;
            }
            let sig = &self.env.preds[id];
            let mut order_by = Vec::new();
            let mut errs = Vec::new();
            for k in &o.order_by {
                match sig.columns.iter().position(|c| *c == k.column.name) {
                    Some(i) => order_by.push((i, k.descending)),
                    None => {
                        let mut d = Diagnostic::error(
                            format!("`{}` is not a column of `{}`", k.column.name, sig.name),
                            k.column.span,
                        )
                        .with_label("unknown column");
                        d = match closest(&k.column.name, sig.columns.iter().map(String::as_str)) {
                            Some(s) => d.with_help(format!("did you mean `{s}`?")),
                            None => {
                                d.with_help(format!("the columns of `{}` are: {}", sig.name, sig.columns.join(", ")))
                            }
                        };
                        errs.push(d.with_secondary(sig.span, format!("`{}` is defined here", sig.shape_text())));
                    }
                }
            }
            self.diags.extend(errs);
            out.push(OutputSpec {
                pred: PredId(id as u32),
                order_by,
                limit: o.limit.map(|(l, _)| l),
                span: o.span,
            });
        }
        if any {
            return out;
        }
        let mut consumed = vec![false; self.env.preds.len()];
        for (r, l) in self.rules.iter().zip(lowered) {
            for d in &l.deps {
                if component.get(d.pred) != component.get(r.head) {
                    if let Some(c) = consumed.get_mut(d.pred) {
                        *c = true;
                    }
                }
            }
        }
        let mut ids: Vec<usize> = (0..self.env.preds.len())
            .filter(|&p| {
                let s = &self.env.preds[p];
                s.defined && !s.aux && s.input.is_none() && !consumed[p]
            })
            .collect();
        ids.sort_by(|a, b| self.env.preds[*a].name.cmp(&self.env.preds[*b].name));
        ids.into_iter()
            .map(|p| OutputSpec {
                pred: PredId(p as u32),
                order_by: Vec::new(),
                limit: None,
                span: self.env.preds[p].span,
            })
            .collect()
    }
}

fn head_args(h: &ast::Head) -> Vec<Expr> {
    match &h.kind {
        HeadKind::Relational(args) => args.clone(),
        HeadKind::Functional { keys, value } => keys.iter().chain(std::iter::once(value)).cloned().collect(),
    }
}

fn shadow_error(name: &Ident) -> Diagnostic {
    let kind = match builtin(&name.name) {
        Some(BuiltinUse::Pred(_)) => "predicate",
        _ => "function",
    };
    Diagnostic::error(
        format!("`{}` is a built-in {kind} and cannot be redefined", name.name),
        name.span,
    )
    .with_label(format!("shadows the built-in `{}`", name.name))
    .with_help("choose another name for the predicate")
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

fn describe(sig: &PredSig) -> String {
    let col = |i: usize| {
        let name = sig.columns.get(i).map_or("?", String::as_str);
        match sig.types.get(i).copied().flatten() {
            Some(t) => format!("{name}: {t}"),
            None => name.to_string(),
        }
    };
    match sig.functional {
        Some(k) => format!(
            "{}[{}] = {}",
            sig.name,
            (0..k).map(col).collect::<Vec<_>>().join(", "),
            col(k)
        ),
        None => format!(
            "{}({})",
            sig.name,
            (0..sig.arity()).map(col).collect::<Vec<_>>().join(", ")
        ),
    }
}

#[cfg(test)]
mod tests;
