//! Lowering of one flattened rule into a typed core rule: functional terms become atoms,
//! variables get their types from the atoms that bind them, expressions are typed (with
//! explicit widening casts), literals are ordered so that every assignment and filter
//! follows the literals binding its inputs, and safety is checked.

use crate::core::{
    AggFunc, ArithOp, Builtin, CExpr, CExprKind, CmpOp, CoreAgg, CoreLit, CoreRule, PredId, Term, Type, Value, VarId,
    VarInfo,
};
use crate::desugar::{blit_vars, expr_vars};
use crate::env::{builtin, closest, type_name_error, BLit, BuiltinUse, Env, FlatRule, BUILTIN_FUNCS};
use crate::types::{
    common, convert_value, is_integral, is_numeric, lit_value, scale_of, value_type, widens_to, MAX_SCALE,
};
use fox_syntax::ast::{self, AggBinding, Atom, BinOp, Expr, ExprKind, Ident, Lit, Span};
use fox_syntax::diag::Diagnostic;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DepKind {
    Pos,
    Neg,
    Agg,
}

/// A body predicate a rule reads.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dep {
    pub pred: usize,
    pub kind: DepKind,
    pub span: Span,
}

pub(crate) struct Lowered {
    /// The core rule: only when the rule is error-free and every type is known.
    pub rule: Option<CoreRule>,
    /// The type of each head term as derived by the body (before widening to the column).
    pub head_types: Vec<Option<Type>>,
    pub deps: Vec<Dep>,
    pub diags: Vec<Diagnostic>,
    pub had_errors: bool,
}

/// Why an expression has no type: a reported error, or a type not known yet (inference in
/// progress, or caused by an error reported elsewhere).
#[derive(Debug)]
enum Fail {
    Unknown,
    Reported,
}

type TyRes = Result<CExpr, Fail>;

struct LVar {
    name: String,
    ty: Option<Type>,
    generated: bool,
    bound: bool,
    /// The first occurrence.
    span: Span,
}

/// A positive atom of the body, after functional terms have been turned into atoms.
struct PAtom {
    pred: Ident,
    args: Vec<Expr>,
    functional: bool,
    span: Span,
}

enum Pending {
    Cmp {
        left: Expr,
        op: ast::CmpOp,
        right: Expr,
        span: Span,
    },
    In {
        expr: Expr,
        list: Vec<Expr>,
        negated: bool,
        span: Span,
    },
    BuiltinPred {
        atom: Atom,
        negated: bool,
        span: Span,
    },
    NotAtom {
        pred: usize,
        atom: Atom,
        span: Span,
    },
    NotFilters {
        alts: Vec<Vec<BLit>>,
        span: Span,
    },
    /// A variable bound by two atoms whose columns have different types.
    TypeJoin {
        var: usize,
        other: usize,
        span: Span,
    },
}

enum Ready {
    No,
    Yes,
    AssignLeft,
    AssignRight,
}

struct AggState {
    var: usize,
    func: AggFunc,
    arg: Option<CExpr>,
}

struct Lower<'e> {
    env: &'e Env,
    diags: Vec<Diagnostic>,
    vars: Vec<LVar>,
    names: HashMap<String, usize>,
    body: Vec<CoreLit>,
    /// Literals that wait for their variables, not yet taken in by `drain`.
    pending: Vec<Pending>,
    /// The waiting literals `drain` took in, by arrival (the order they are emitted in).
    queue: BTreeMap<u64, Pending>,
    next_arrival: u64,
    /// Per variable name: the arrivals of the queued literals that read it (literals
    /// emitted since are dropped lazily).
    queued_by_var: HashMap<String, Vec<u64>>,
    /// The queued literals whose readiness is not `Ready::No`: it stays so as variables
    /// are bound (a variable to assign that gets bound makes the comparison a test).
    ready: BTreeSet<u64>,
    /// The variables in the order they were bound, and how many of them `drain` has seen.
    bound_log: Vec<usize>,
    bound_seen: usize,
    deps: Vec<Dep>,
    /// Variables that some positive atom binds: never the target of an assignment.
    atom_bound: HashSet<String>,
    unsafe_reported: HashSet<String>,
    /// A positive atom for "bind it with …" hints.
    example_atom: Option<usize>,
    fresh: u32,
    errors: bool,
    unknown: bool,
}

/// Lowers one rule. `head_types` gives the column types to check the head against (`None`
/// for a column whose type is being inferred).
pub(crate) fn lower_rule(env: &Env, rule: &FlatRule, head_types: &[Option<Type>]) -> Lowered {
    let mut lw = Lower {
        env,
        diags: Vec::new(),
        vars: Vec::new(),
        names: HashMap::new(),
        body: Vec::new(),
        pending: Vec::new(),
        queue: BTreeMap::new(),
        next_arrival: 0,
        queued_by_var: HashMap::new(),
        ready: BTreeSet::new(),
        bound_log: Vec::new(),
        bound_seen: 0,
        deps: Vec::new(),
        atom_bound: HashSet::new(),
        unsafe_reported: HashSet::new(),
        example_atom: None,
        fresh: 0,
        errors: false,
        unknown: false,
    };
    let (rule_out, head_out) = lw.run(rule, head_types);
    Lowered {
        rule: rule_out,
        head_types: head_out,
        deps: lw.deps,
        diags: lw.diags,
        had_errors: lw.errors,
    }
}

fn ident_expr(name: &str, span: Span) -> Expr {
    Expr {
        kind: ExprKind::Var(name.to_string()),
        span,
    }
}

/// A literal, possibly negated: a constant.
pub(crate) fn const_lit(e: &Expr) -> Option<(&Lit, bool)> {
    match &e.kind {
        ExprKind::Lit(l) => Some((l, false)),
        ExprKind::Neg(x) => match &x.kind {
            ExprKind::Lit(l @ (Lit::Int(_) | Lit::Decimal(_) | Lit::Float(_))) => Some((l, true)),
            _ => None,
        },
        _ => None,
    }
}

/// A numeric literal, whose type adapts to the other operand.
fn is_flexible(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Lit(Lit::Int(_) | Lit::Decimal(_) | Lit::Float(_)) => true,
        ExprKind::Neg(x) => is_flexible(x),
        _ => false,
    }
}

fn lit_hint(other: Type, op: Option<BinOp>) -> Option<Type> {
    match other {
        Type::Decimal(_) | Type::WideDecimal(_) if matches!(op, Some(BinOp::Mul | BinOp::Div)) => None,
        t if is_numeric(t) => Some(t),
        _ => None,
    }
}

fn cmp_op(op: ast::CmpOp) -> CmpOp {
    match op {
        ast::CmpOp::Eq => CmpOp::Eq,
        ast::CmpOp::Ne => CmpOp::Ne,
        ast::CmpOp::Lt => CmpOp::Lt,
        ast::CmpOp::Le => CmpOp::Le,
        ast::CmpOp::Gt => CmpOp::Gt,
        ast::CmpOp::Ge => CmpOp::Ge,
    }
}

fn arith_op(op: BinOp) -> ArithOp {
    match op {
        BinOp::Add => ArithOp::Add,
        BinOp::Sub => ArithOp::Sub,
        BinOp::Mul => ArithOp::Mul,
        BinOp::Div => ArithOp::Div,
    }
}

/// `e` converted to `t` (a widening or rescale): constants are converted in place.
pub(crate) fn cast(e: CExpr, t: Type) -> CExpr {
    if e.ty == t {
        return e;
    }
    if let CExprKind::Const(v) = &e.kind {
        if let Some(v) = convert_value(v, t) {
            return CExpr {
                kind: CExprKind::Const(v),
                ty: t,
            };
        }
    }
    CExpr {
        kind: CExprKind::Cast(Box::new(e)),
        ty: t,
    }
}

fn bool_expr(kind: CExprKind) -> CExpr {
    CExpr { kind, ty: Type::Bool }
}

fn not(e: CExpr) -> CExpr {
    bool_expr(CExprKind::Not(Box::new(e)))
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

impl Lower<'_> {
    fn error(&mut self, d: Diagnostic) {
        self.errors = true;
        self.diags.push(d);
    }

    fn fail<T>(&mut self, d: Diagnostic) -> Result<T, Fail> {
        self.error(d);
        Err(Fail::Reported)
    }

    fn new_var(&mut self, name: String, ty: Option<Type>, generated: bool, bound: bool, span: Span) -> usize {
        let id = self.vars.len();
        self.names.insert(name.clone(), id);
        if bound {
            self.bound_log.push(id);
        }
        self.vars.push(LVar {
            name,
            ty,
            generated,
            bound,
            span,
        });
        id
    }

    fn fresh_var(&mut self, prefix: &str, ty: Option<Type>, bound: bool, span: Span) -> usize {
        let name = format!("{prefix}{}", self.fresh);
        self.fresh += 1;
        self.new_var(name, ty, true, bound, span)
    }

    /// The variable of a source name, created unbound on first use.
    fn named_var(&mut self, name: &str, span: Span) -> usize {
        match self.names.get(name) {
            Some(&v) => v,
            None => self.new_var(name.to_string(), None, false, false, span),
        }
    }

    /// Marks variable `v` bound.
    fn bind(&mut self, v: usize) {
        if !self.vars[v].bound {
            self.vars[v].bound = true;
            self.bound_log.push(v);
        }
    }

    fn is_bound(&self, name: &str) -> bool {
        self.names
            .get(name)
            .is_some_and(|&v| self.vars.get(v).is_some_and(|v| v.bound))
    }

    fn run(&mut self, rule: &FlatRule, head_cols: &[Option<Type>]) -> (Option<CoreRule>, Vec<Option<Type>>) {
        let mut atoms: Vec<PAtom> = Vec::new();
        for lit in &rule.lits {
            self.classify(lit, &mut atoms);
        }
        let head_args: Vec<Expr> = rule
            .head_args
            .iter()
            .map(|e| self.extract(e, true, &mut atoms))
            .collect();
        let agg_args: Vec<Option<Expr>> = match &rule.aggs {
            Some((aggs, _)) => aggs
                .iter()
                .map(|b| b.arg.as_ref().map(|e| self.extract(e, false, &mut atoms)))
                .collect(),
            None => Vec::new(),
        };
        let mut pending = std::mem::take(&mut self.pending);
        for p in &mut pending {
            self.extract_pending(p, &mut atoms);
        }
        self.pending = pending;
        // Atom arguments may hold functional terms, which add atoms in turn.
        let mut i = 0;
        while i < atoms.len() {
            let args = std::mem::take(&mut atoms[i].args);
            let args = args.iter().map(|e| self.extract(e, true, &mut atoms)).collect();
            atoms[i].args = args;
            i += 1;
        }
        for a in &atoms {
            for e in &a.args {
                if let ExprKind::Var(v) = &e.kind {
                    self.atom_bound.insert(v.clone());
                }
            }
        }

        for a in &atoms {
            match self.resolve(&a.pred, a.functional, a.args.len(), a.span) {
                Some(p) => {
                    self.deps.push(Dep {
                        pred: p,
                        kind: DepKind::Pos,
                        span: a.span,
                    });
                    self.example_atom.get_or_insert(p);
                    self.bind_atom(p, a);
                }
                None => self.bind_unknown(&a.args),
            }
            self.drain();
        }
        self.drain();
        let left: Vec<Pending> = std::mem::take(&mut self.queue).into_values().collect();
        for p in left.into_iter().chain(std::mem::take(&mut self.pending)) {
            self.report_unsafe(&p);
        }

        let aggs = rule
            .aggs
            .as_ref()
            .map(|(bindings, _)| self.aggregates(bindings, &agg_args));
        if aggs.is_some() {
            for d in &mut self.deps {
                if d.kind == DepKind::Pos {
                    d.kind = DepKind::Agg;
                }
            }
        }
        let mut aggs = aggs.unwrap_or_default();

        let sig = self.env.preds.get(rule.head);
        let mut head_terms = Vec::new();
        let mut head_types = Vec::new();
        for (j, e) in head_args.iter().enumerate() {
            let ct = head_cols.get(j).copied().flatten();
            let col = sig.and_then(|s| s.columns.get(j)).map(String::as_str).unwrap_or("?");
            let pred = sig.map(|s| s.name.as_str()).unwrap_or("?");
            let what = format!("column `{col}` of `{pred}`");
            let (term, ty) = self.head_term(e, ct, &what, &mut aggs);
            head_terms.push(term);
            head_types.push(ty);
        }

        if self.errors || self.unknown {
            return (None, head_types);
        }
        let Some(head_args) = head_terms.into_iter().collect::<Option<Vec<Term>>>() else {
            return (None, head_types);
        };
        let Some(vars) = self
            .vars
            .iter()
            .map(|v| {
                v.ty.map(|ty| VarInfo {
                    name: v.name.clone(),
                    ty,
                    generated: v.generated,
                })
            })
            .collect::<Option<Vec<_>>>()
        else {
            return (None, head_types);
        };
        let aggs = rule.aggs.as_ref().map(|_| {
            aggs.into_iter()
                .map(|a| CoreAgg {
                    var: VarId(a.var as u32),
                    func: a.func,
                    arg: a.arg,
                })
                .collect()
        });
        let core = CoreRule {
            head: PredId(rule.head as u32),
            head_args,
            vars,
            body: std::mem::take(&mut self.body),
            aggs,
            span: rule.span,
        };
        (Some(core), head_types)
    }

    /// Sorts a body literal into positive atoms and pending literals.
    fn classify(&mut self, lit: &BLit, atoms: &mut Vec<PAtom>) {
        match lit {
            BLit::Atom { atom, functional } => match builtin(&atom.pred.name) {
                Some(BuiltinUse::Pred(_)) if !functional => self.pending.push(Pending::BuiltinPred {
                    atom: atom.clone(),
                    negated: false,
                    span: atom.span,
                }),
                Some(_) => self.not_a_predicate(&atom.pred),
                None => atoms.push(PAtom {
                    pred: atom.pred.clone(),
                    args: atom.args.clone(),
                    functional: *functional,
                    span: atom.span,
                }),
            },
            BLit::NotAtom { atom, functional, span } => match builtin(&atom.pred.name) {
                Some(BuiltinUse::Pred(_)) if !functional => self.pending.push(Pending::BuiltinPred {
                    atom: atom.clone(),
                    negated: true,
                    span: *span,
                }),
                Some(_) => self.not_a_predicate(&atom.pred),
                None => match self.resolve(&atom.pred, *functional, atom.args.len(), atom.span) {
                    Some(p) => {
                        self.deps.push(Dep {
                            pred: p,
                            kind: DepKind::Neg,
                            span: *span,
                        });
                        self.pending.push(Pending::NotAtom {
                            pred: p,
                            atom: atom.clone(),
                            span: *span,
                        });
                    }
                    None => self.unknown = true,
                },
            },
            BLit::Cmp { left, op, right, span } => {
                if *op == ast::CmpOp::Eq {
                    for (ft, other) in [(left, right), (right, left)] {
                        if let ExprKind::FuncTerm(pred, keys) = &ft.kind {
                            let mut args = keys.clone();
                            args.push(other.clone());
                            atoms.push(PAtom {
                                pred: pred.clone(),
                                args,
                                functional: true,
                                span: *span,
                            });
                            return;
                        }
                    }
                }
                self.pending.push(Pending::Cmp {
                    left: left.clone(),
                    op: *op,
                    right: right.clone(),
                    span: *span,
                });
            }
            BLit::In {
                expr,
                list,
                negated,
                span,
            } => self.pending.push(Pending::In {
                expr: expr.clone(),
                list: list.clone(),
                negated: *negated,
                span: *span,
            }),
            BLit::NotFilters { alts, span } => self.pending.push(Pending::NotFilters {
                alts: alts.clone(),
                span: *span,
            }),
            BLit::NegFormula { span, .. } => self.error(
                Diagnostic::error("this negated formula is not supported", *span)
                    .with_label("cannot be negated")
                    .with_help("define the formula as a separate predicate and negate that predicate"),
            ),
        }
    }

    fn not_a_predicate(&mut self, name: &Ident) {
        self.error(
            Diagnostic::error(
                format!("`{}` is a built-in function, not a predicate", name.name),
                name.span,
            )
            .with_label("used as a predicate here")
            .with_help(format!("use it in an expression, e.g. `v = {}(…)`", name.name)),
        );
    }

    /// Replaces functional terms in `e` by fresh variables bound by new atoms. `_` is only
    /// allowed when `e` itself is an atom argument (`top_anon`).
    fn extract(&mut self, e: &Expr, top_anon: bool, atoms: &mut Vec<PAtom>) -> Expr {
        let kind = match &e.kind {
            ExprKind::FuncTerm(pred, keys) => {
                let v = self.fresh_var("$f", None, false, e.span);
                let name = self.vars[v].name.clone();
                let mut args: Vec<Expr> = keys.clone();
                args.push(ident_expr(&name, e.span));
                atoms.push(PAtom {
                    pred: pred.clone(),
                    args,
                    functional: true,
                    span: e.span,
                });
                ExprKind::Var(name)
            }
            ExprKind::Anon if !top_anon => {
                self.error(
                    Diagnostic::error("`_` cannot be used in an expression", e.span)
                        .with_label("anonymous variable")
                        .with_help("`_` stands for an ignored atom argument; name the variable to use its value"),
                );
                self.unknown = true;
                ExprKind::Anon
            }
            ExprKind::Neg(x) => ExprKind::Neg(Box::new(self.extract(x, false, atoms))),
            ExprKind::Bin(op, a, b) => ExprKind::Bin(
                *op,
                Box::new(self.extract(a, false, atoms)),
                Box::new(self.extract(b, false, atoms)),
            ),
            ExprKind::Call(f, args) => {
                ExprKind::Call(f.clone(), args.iter().map(|a| self.extract(a, false, atoms)).collect())
            }
            k => k.clone(),
        };
        Expr { kind, span: e.span }
    }

    fn extract_pending(&mut self, p: &mut Pending, atoms: &mut Vec<PAtom>) {
        match p {
            Pending::Cmp { left, right, .. } => {
                *left = self.extract(left, false, atoms);
                *right = self.extract(right, false, atoms);
            }
            Pending::In { expr, list, .. } => {
                *expr = self.extract(expr, false, atoms);
                for e in list.iter_mut() {
                    *e = self.extract(e, false, atoms);
                }
            }
            Pending::BuiltinPred { atom, .. } | Pending::NotAtom { atom, .. } => {
                for e in atom.args.iter_mut() {
                    *e = self.extract(e, false, atoms);
                }
            }
            Pending::NotFilters { .. } | Pending::TypeJoin { .. } => {}
        }
    }

    /// Looks a body predicate up and checks how it is used.
    fn resolve(&mut self, pred: &Ident, functional: bool, nargs: usize, span: Span) -> Option<usize> {
        if let Some(e) = type_name_error(pred) {
            self.error(e);
            return None;
        }
        let Some(id) = self.env.lookup(&pred.name) else {
            if self.env.undeclared_inputs.contains(&pred.name) {
                // Reported at the `.input`; the rule still counts as failed.
                self.errors = true;
                return None;
            }
            let mut d = Diagnostic::error(format!("unknown predicate `{}`", pred.name), pred.span)
                .with_label("not declared, and defined by no fact or rule");
            d = match self.env.suggest(&pred.name) {
                Some(s) => d.with_help(format!("did you mean `{s}`?")),
                None => d.with_help(format!(
                    "declare it (e.g. `{}(x) -> int64(x).`) and read it with `.input {}.`, or define it with facts or rules",
                    pred.name, pred.name
                )),
            };
            self.error(d);
            return None;
        };
        let sig = &self.env.preds[id];
        match (sig.functional, functional) {
            (Some(_), false) => {
                let d = Diagnostic::error(
                    format!("`{}` is a functional predicate, used here as a relation", sig.name),
                    span,
                )
                .with_label("used as a relation")
                .with_secondary(sig.span, format!("declared as `{}`", sig.shape_text()))
                .with_help(format!("write `{}[…] = v`", sig.name));
                self.error(d);
                return None;
            }
            (None, true) => {
                let d = Diagnostic::error(
                    format!("`{}` is a relation, used here as a functional predicate", sig.name),
                    span,
                )
                .with_label("used as a functional predicate")
                .with_secondary(sig.span, format!("declared as `{}`", sig.shape_text()))
                .with_help(format!("write `{}(…)`", sig.name));
                self.error(d);
                return None;
            }
            _ => {}
        }
        if sig.arity() != nargs {
            let d = match sig.functional {
                Some(k) => Diagnostic::error(
                    format!(
                        "`{}` takes {} but {} given",
                        sig.name,
                        plural(k, "key"),
                        plural(nargs.saturating_sub(1), "key")
                    ),
                    span,
                ),
                None => Diagnostic::error(
                    format!(
                        "`{}` has {} but {} given",
                        sig.name,
                        plural(sig.arity(), "column"),
                        plural(nargs, "argument")
                    ),
                    span,
                ),
            };
            self.error(
                d.with_label("wrong number of arguments")
                    .with_secondary(sig.span, format!("`{}` is defined here", sig.shape_text())),
            );
            return None;
        }
        Some(id)
    }

    /// Binds the variables of an atom that could not be resolved, so that no further errors
    /// follow from it.
    fn bind_unknown(&mut self, args: &[Expr]) {
        self.unknown = true;
        let mut vs = Vec::new();
        args.iter().for_each(|e| expr_vars(e, &mut vs));
        for (name, span) in vs {
            let v = self.named_var(name, span);
            self.bind(v);
        }
    }

    fn bind_atom(&mut self, pred: usize, atom: &PAtom) {
        let sig = &self.env.preds[pred];
        let mut args = Vec::new();
        for (j, e) in atom.args.iter().enumerate() {
            let ct = sig.types.get(j).copied().flatten();
            let what = format!(
                "column `{}` of `{}`",
                sig.columns.get(j).map_or("?", String::as_str),
                sig.name
            );
            let term = match &e.kind {
                ExprKind::Var(name) => match self.names.get(name.as_str()).copied() {
                    Some(v) if self.vars[v].bound => match (self.vars[v].ty, ct) {
                        (Some(a), Some(b)) if a != b => {
                            let other = self.fresh_var("$j", Some(b), true, e.span);
                            self.pending.push(Pending::TypeJoin {
                                var: v,
                                other,
                                span: e.span,
                            });
                            Term::Var(VarId(other as u32))
                        }
                        (None, Some(_)) => {
                            self.vars[v].ty = ct;
                            Term::Var(VarId(v as u32))
                        }
                        _ => Term::Var(VarId(v as u32)),
                    },
                    found => {
                        let v = found.unwrap_or_else(|| self.new_var(name.clone(), None, false, false, e.span));
                        self.bind(v);
                        self.vars[v].ty = ct;
                        if ct.is_none() {
                            self.unknown = true;
                        }
                        Term::Var(VarId(v as u32))
                    }
                },
                ExprKind::Anon => {
                    if ct.is_none() {
                        self.unknown = true;
                    }
                    Term::Var(VarId(self.fresh_var("_", ct, true, e.span) as u32))
                }
                _ => match const_lit(e) {
                    Some((l, neg)) => match self.constant(l, neg, ct, e.span, &what) {
                        Some(v) => Term::Const(v),
                        None => continue,
                    },
                    None => {
                        if ct.is_none() {
                            self.unknown = true;
                        }
                        let v = self.fresh_var("$a", ct, true, e.span);
                        let name = self.vars[v].name.clone();
                        self.pending.push(Pending::Cmp {
                            left: ident_expr(&name, e.span),
                            op: ast::CmpOp::Eq,
                            right: e.clone(),
                            span: e.span,
                        });
                        Term::Var(VarId(v as u32))
                    }
                },
            };
            args.push(term);
        }
        self.body.push(CoreLit::Atom {
            pred: PredId(pred as u32),
            args,
            span: atom.span,
        });
    }

    /// A literal as a constant for a place of type `want` (`what` names the place).
    fn constant(&mut self, l: &Lit, neg: bool, want: Option<Type>, span: Span, what: &str) -> Option<Value> {
        match const_value(l, neg, want, span, what) {
            Ok(v) => Some(v),
            Err(d) => {
                self.error(d);
                None
            }
        }
    }

    /// Emits the pending literals that are ready, in order, each seeing what the ones
    /// before it bound; repeats while any was emitted. A pass keeps the others in order.
    ///
    /// The literals wait in `queue` by arrival; a pass goes through the ready ones in
    /// that order, from the one after the last emitted, and a literal that becomes ready
    /// behind that point waits for the next pass. A literal's readiness changes only when
    /// one of its variables is bound, so it is looked at when it arrives and when one of
    /// its variables is bound: the work is proportional to the literals' variables.
    fn drain(&mut self) {
        loop {
            self.admit();
            self.note_bound();
            let mut progressed = false;
            let mut from = 0;
            while let Some(&a) = self.ready.range(from..).next() {
                self.ready.remove(&a);
                from = a + 1;
                let Some(p) = self.queue.remove(&a) else {
                    continue;
                };
                let r = self.readiness(&p);
                if matches!(r, Ready::No) {
                    self.queue.insert(a, p);
                    continue;
                }
                self.emit(p, r);
                progressed = true;
                self.note_bound();
            }
            if !progressed {
                break;
            }
        }
    }

    /// Takes the literals of `pending` into the queue, after those there.
    fn admit(&mut self) {
        for p in std::mem::take(&mut self.pending) {
            let a = self.next_arrival;
            self.next_arrival += 1;
            let mut vs = Vec::new();
            Self::pending_vars(&p, &mut vs);
            let mut names: Vec<&str> = vs.into_iter().map(|(n, _)| n).collect();
            names.sort_unstable();
            names.dedup();
            for n in names {
                match self.queued_by_var.get_mut(n) {
                    Some(list) => list.push(a),
                    None => {
                        self.queued_by_var.insert(n.to_string(), vec![a]);
                    }
                }
            }
            if !matches!(self.readiness(&p), Ready::No) {
                self.ready.insert(a);
            }
            self.queue.insert(a, p);
        }
    }

    /// Looks again at the queued literals that read a variable bound since the last call.
    fn note_bound(&mut self) {
        while self.bound_seen < self.bound_log.len() {
            let v = self.bound_log[self.bound_seen];
            self.bound_seen += 1;
            let Some(mut list) = self.queued_by_var.remove(&self.vars[v].name) else {
                continue;
            };
            list.retain(|a| self.queue.contains_key(a));
            for &a in &list {
                if !self.ready.contains(&a)
                    && self
                        .queue
                        .get(&a)
                        .is_some_and(|p| !matches!(self.readiness(p), Ready::No))
                {
                    self.ready.insert(a);
                }
            }
            self.queued_by_var.insert(self.vars[v].name.clone(), list);
        }
    }

    fn all_bound(&self, e: &Expr) -> bool {
        let mut vs = Vec::new();
        expr_vars(e, &mut vs);
        vs.iter().all(|(n, _)| self.is_bound(n))
    }

    fn assignable(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Var(n) => !self.is_bound(n) && !self.atom_bound.contains(n.as_str()),
            _ => false,
        }
    }

    fn pending_vars<'p>(p: &'p Pending, out: &mut Vec<(&'p str, Span)>) {
        match p {
            Pending::Cmp { left, right, .. } => {
                expr_vars(left, out);
                expr_vars(right, out);
            }
            Pending::In { expr, list, .. } => {
                expr_vars(expr, out);
                list.iter().for_each(|e| expr_vars(e, out));
            }
            Pending::BuiltinPred { atom, .. } | Pending::NotAtom { atom, .. } => {
                atom.args.iter().for_each(|e| expr_vars(e, out))
            }
            Pending::NotFilters { alts, .. } => alts.iter().flatten().for_each(|l| blit_vars(l, out)),
            Pending::TypeJoin { .. } => {}
        }
    }

    fn readiness(&self, p: &Pending) -> Ready {
        if let Pending::Cmp { left, op, right, .. } = p {
            let (lb, rb) = (self.all_bound(left), self.all_bound(right));
            return if lb && rb {
                Ready::Yes
            } else if *op == ast::CmpOp::Eq && rb && self.assignable(left) {
                Ready::AssignLeft
            } else if *op == ast::CmpOp::Eq && lb && self.assignable(right) {
                Ready::AssignRight
            } else {
                Ready::No
            };
        }
        let mut vs = Vec::new();
        Self::pending_vars(p, &mut vs);
        if vs.iter().all(|(n, _)| self.is_bound(n)) {
            Ready::Yes
        } else {
            Ready::No
        }
    }

    fn filter(&mut self, r: TyRes, span: Span) {
        match r {
            Ok(cond) => self.body.push(CoreLit::Filter { cond, span }),
            Err(Fail::Unknown) => self.unknown = true,
            Err(Fail::Reported) => {}
        }
    }

    fn emit(&mut self, p: Pending, r: Ready) {
        match p {
            Pending::Cmp { left, op, right, span } => match r {
                Ready::AssignLeft => self.assign(&left, &right, span),
                Ready::AssignRight => self.assign(&right, &left, span),
                _ => {
                    let c = self.ty_compare(&left, op, &right, span);
                    self.filter(c, span);
                }
            },
            Pending::In {
                expr,
                list,
                negated,
                span,
            } => {
                let c = self.ty_in(&expr, &list, negated);
                self.filter(c, span);
            }
            Pending::BuiltinPred { atom, negated, span } => {
                let c = self.ty_pred_call(&atom).map(|c| if negated { not(c) } else { c });
                self.filter(c, span);
            }
            Pending::NotAtom { pred, atom, span } => self.not_atom(pred, &atom, span),
            Pending::NotFilters { alts, span } => {
                let c = self.filters_expr(&alts).map(not);
                self.filter(c, span);
            }
            Pending::TypeJoin { var, other, span } => {
                let (Some(a), Some(b)) = (self.vars[var].ty, self.vars[other].ty) else {
                    self.unknown = true;
                    return;
                };
                match common(a, b) {
                    Some(t) => {
                        let l = cast(self.var_expr(var, a), t);
                        let r = cast(self.var_expr(other, b), t);
                        self.body.push(CoreLit::Filter {
                            cond: bool_expr(CExprKind::Cmp(CmpOp::Eq, Box::new(l), Box::new(r))),
                            span,
                        });
                    }
                    None => {
                        let name = self.vars[var].name.clone();
                        let first = self.vars[var].span;
                        self.error(
                            Diagnostic::error(
                                format!("variable `{name}` is used for values of type {a} and of type {b}"),
                                span,
                            )
                            .with_label(format!("here it is {b}"))
                            .with_secondary(first, format!("here it is {a}")),
                        );
                    }
                }
            }
        }
    }

    fn var_expr(&self, v: usize, ty: Type) -> CExpr {
        CExpr {
            kind: CExprKind::Var(VarId(v as u32)),
            ty,
        }
    }

    fn assign(&mut self, target: &Expr, e: &Expr, span: Span) {
        let ExprKind::Var(name) = &target.kind else {
            return;
        };
        let v = self.named_var(name, target.span);
        let r = self.ty_expr(e, None);
        self.bind(v);
        match r {
            Ok(c) => {
                self.vars[v].ty = Some(c.ty);
                self.body.push(CoreLit::Assign {
                    var: VarId(v as u32),
                    expr: c,
                    span,
                });
            }
            Err(Fail::Unknown) => self.unknown = true,
            Err(Fail::Reported) => {}
        }
    }

    /// A term for a typed expression: variables and constants directly, anything else
    /// through a fresh variable assigned before use.
    fn term_of(&mut self, c: CExpr, span: Span) -> Term {
        match c.kind {
            CExprKind::Var(v) => Term::Var(v),
            CExprKind::Const(v) => Term::Const(v),
            _ => {
                let v = self.fresh_var("$t", Some(c.ty), true, span);
                self.body.push(CoreLit::Assign {
                    var: VarId(v as u32),
                    expr: c,
                    span,
                });
                Term::Var(VarId(v as u32))
            }
        }
    }

    /// Widens `c` to `want`, or reports the mismatch.
    fn fit(&mut self, c: CExpr, want: Option<Type>, span: Span, what: &str) -> TyRes {
        match want {
            None => Ok(c),
            Some(t) if widens_to(c.ty, t) => Ok(cast(c, t)),
            Some(t) => {
                let found = c.ty;
                self.fail(mismatch(t, found, span, what))
            }
        }
    }

    fn not_atom(&mut self, pred: usize, atom: &Atom, span: Span) {
        let sig = &self.env.preds[pred];
        let mut args = Vec::new();
        for (j, e) in atom.args.iter().enumerate() {
            let ct = sig.types.get(j).copied().flatten();
            let what = format!(
                "column `{}` of `{}`",
                sig.columns.get(j).map_or("?", String::as_str),
                sig.name
            );
            if ct.is_none() {
                self.unknown = true;
            }
            let r = if let Some((l, neg)) = const_lit(e) {
                match self.constant(l, neg, ct, e.span, &what) {
                    Some(v) => Ok(Term::Const(v)),
                    None => Err(Fail::Reported),
                }
            } else {
                self.ty_expr(e, ct)
                    .and_then(|c| self.fit(c, ct, e.span, &what))
                    .map(|c| self.term_of(c, e.span))
            };
            match r {
                Ok(t) => args.push(t),
                Err(Fail::Unknown) => self.unknown = true,
                Err(Fail::Reported) => {}
            }
        }
        self.body.push(CoreLit::NotAtom {
            pred: PredId(pred as u32),
            args,
            span,
        });
    }

    fn report_unsafe(&mut self, p: &Pending) {
        let mut vs = Vec::new();
        Self::pending_vars(p, &mut vs);
        let ctx = match p {
            Pending::NotAtom { .. } => "a negated atom",
            Pending::Cmp { op: ast::CmpOp::Eq, .. } => "an equation",
            Pending::Cmp { .. } => "a comparison",
            Pending::In { .. } => "an `in` test",
            Pending::BuiltinPred { .. } => "a built-in predicate",
            Pending::NotFilters { .. } => "a negated formula",
            Pending::TypeJoin { .. } => "a join",
        };
        for (name, span) in vs {
            if !self.is_bound(name) {
                self.unbound(name, span, ctx);
            }
        }
    }

    fn unbound(&mut self, name: &str, span: Span, ctx: &str) {
        if !self.unsafe_reported.insert(name.to_string()) {
            return;
        }
        let help = match self.example(name) {
            Some(ex) => format!("bind `{name}` with a positive atom such as {ex}, or with an assignment `{name} = …`"),
            None => format!("bind `{name}` with a positive atom or an assignment `{name} = …`"),
        };
        self.error(
            Diagnostic::error(format!("unsafe rule: variable `{name}` is not bound"), span)
                .with_label(format!(
                    "`{name}` is used in {ctx} but no positive atom or assignment binds it"
                ))
                .with_help(help),
        );
    }

    /// An atom of the rule's first body predicate showing where `name` could be bound.
    fn example(&self, name: &str) -> Option<String> {
        let sig = self.example_atom.and_then(|p| self.env.preds.get(p))?;
        Some(match (sig.functional, sig.arity()) {
            (Some(k), _) if k > 0 => format!("`{}[…] = {name}`", sig.name),
            (Some(_), _) => format!("`{}[] = {name}`", sig.name),
            (None, 0) => return None,
            (None, 1) => format!("`{}({name})`", sig.name),
            (None, _) => format!("`{}(…, {name})`", sig.name),
        })
    }

    fn aggregates(&mut self, bindings: &[AggBinding], args: &[Option<Expr>]) -> Vec<AggState> {
        let mut out: Vec<AggState> = Vec::new();
        for (b, arg) in bindings.iter().zip(args) {
            if let Some(&v) = self.names.get(&b.var.name) {
                let first = self.vars[v].span;
                if out.iter().any(|a| a.var == v) {
                    self.error(
                        Diagnostic::error(format!("aggregate result `{}` is bound twice", b.var.name), b.var.span)
                            .with_label("bound again here")
                            .with_secondary(first, "first bound here"),
                    );
                } else {
                    self.error(
                        Diagnostic::error(
                            format!("aggregate result `{}` is also used in the body", b.var.name),
                            b.var.span,
                        )
                        .with_label("the aggregate binds it here")
                        .with_secondary(first, "used in the aggregated body here")
                        .with_help("an aggregate result is only available in the head; rename one of the variables"),
                    );
                }
                continue;
            }
            let func = match b.func.name.as_str() {
                "sum" | "total" => AggFunc::Sum,
                "count" => AggFunc::Count,
                "min" => AggFunc::Min,
                "max" => AggFunc::Max,
                "avg" => AggFunc::Avg,
                other => {
                    let mut d = Diagnostic::error(format!("unknown aggregate function `{other}`"), b.func.span)
                        .with_label("not an aggregate");
                    d = match closest(other, ["sum", "count", "min", "max", "avg", "total"].into_iter()) {
                        Some(s) => d.with_help(format!("did you mean `{s}`?")),
                        None => d.with_help("the aggregates are sum, count, min, max, avg and total"),
                    };
                    self.error(d);
                    self.new_var(b.var.name.clone(), None, false, true, b.var.span);
                    continue;
                }
            };
            let (arg, ty) = self.agg_arg(b, func, arg.as_ref());
            let v = self.new_var(b.var.name.clone(), ty, false, true, b.var.span);
            out.push(AggState { var: v, func, arg });
        }
        out
    }

    fn agg_arg(&mut self, b: &AggBinding, func: AggFunc, arg: Option<&Expr>) -> (Option<CExpr>, Option<Type>) {
        let name = &b.func.name;
        let arg = match (func, arg) {
            (AggFunc::Count, None) => return (None, Some(Type::Int64)),
            (AggFunc::Count, Some(e)) => {
                self.error(
                    Diagnostic::error("`count()` takes no argument", e.span)
                        .with_label("remove this argument")
                        .with_help("count() counts the distinct bindings of the body; to count distinct values of a variable, aggregate over a body that binds only it"),
                );
                return (None, Some(Type::Int64));
            }
            (_, None) => {
                self.error(
                    Diagnostic::error(format!("`{name}` needs an argument"), b.span)
                        .with_label(format!("write `{name}(x)`")),
                );
                return (None, None);
            }
            (_, Some(e)) => e,
        };
        let mut vs = Vec::new();
        expr_vars(arg, &mut vs);
        let mut all = true;
        for (n, s) in vs {
            if !self.is_bound(n) {
                all = false;
                self.unbound(n, s, "an aggregate");
            }
        }
        if !all {
            return (None, None);
        }
        let c = match self.ty_expr(arg, None) {
            Ok(c) => c,
            Err(Fail::Unknown) => {
                self.unknown = true;
                return (None, None);
            }
            Err(Fail::Reported) => return (None, None),
        };
        let t = c.ty;
        let bad = |lw: &mut Self, what: &str| {
            lw.error(
                Diagnostic::error(format!("cannot compute `{name}` of values of type {t}"), arg.span)
                    .with_label(format!("this is {t}"))
                    .with_help(what.to_string()),
            );
            (None, None)
        };
        match func {
            AggFunc::Sum => match t {
                Type::Int32 | Type::Int64 => (Some(cast(c, Type::Int64)), Some(Type::Int64)),
                // Sums of decimals have 38 digits (128-bit accumulation, as SQL's DECIMAL(38, s)).
                Type::Decimal(s) | Type::WideDecimal(s) => (Some(c), Some(Type::WideDecimal(s))),
                Type::Float64 => (Some(c), Some(t)),
                _ => bad(self, "sum adds numbers: int32, int64, decimal or float64"),
            },
            AggFunc::Avg => match t {
                Type::Int32 | Type::Int64 => (Some(c), Some(Type::Decimal(6))),
                Type::Decimal(s) => (Some(c), Some(Type::Decimal(s.max(6)))),
                Type::WideDecimal(s) => (Some(c), Some(Type::WideDecimal(s.max(6)))),
                Type::Float64 => (Some(c), Some(t)),
                _ => bad(self, "avg averages numbers: int32, int64, decimal or float64"),
            },
            AggFunc::Min | AggFunc::Max => (Some(c), Some(t)),
            AggFunc::Count => (None, Some(Type::Int64)),
        }
    }

    /// The term and type of one head argument.
    fn head_term(
        &mut self,
        e: &Expr,
        ct: Option<Type>,
        what: &str,
        aggs: &mut [AggState],
    ) -> (Option<Term>, Option<Type>) {
        if let Some((l, neg)) = const_lit(e) {
            let natural = lit_value(l, neg, None).ok().map(|v| value_type(&v));
            return (self.constant(l, neg, ct, e.span, what).map(Term::Const), natural);
        }
        match &e.kind {
            ExprKind::Anon => {
                self.error(
                    Diagnostic::error("`_` cannot appear in a rule head", e.span)
                        .with_label("every head column needs a value")
                        .with_help("use a variable bound by the body, or a constant"),
                );
                return (None, None);
            }
            ExprKind::Var(name) => {
                if let Some(a) = aggs.iter_mut().find(|a| self.names.get(name) == Some(&a.var)) {
                    return self.agg_head(a, ct, e.span, what);
                }
                if !self.is_bound(name) {
                    let name = name.clone();
                    if self.unsafe_reported.insert(name.clone()) {
                        let help = match self.example(&name) {
                            Some(ex) => format!(
                                "bind `{name}` in the body with a positive atom such as {ex}, or with an assignment `{name} = …`"
                            ),
                            None => format!("bind `{name}` in the body with a positive atom or an assignment `{name} = …`"),
                        };
                        self.error(
                            Diagnostic::error(format!("unsafe rule: head variable `{name}` is not bound"), e.span)
                                .with_label("not bound by the body")
                                .with_help(help),
                        );
                    }
                    return (None, None);
                }
            }
            _ => {
                let mut vs = Vec::new();
                expr_vars(e, &mut vs);
                let mut ok = true;
                for (n, s) in vs {
                    if aggs.iter().any(|a| self.names.get(n) == Some(&a.var)) {
                        self.error(
                            Diagnostic::error("an expression over an aggregate result cannot appear in the head", e.span)
                                .with_label(format!("uses the aggregate result `{n}`"))
                                .with_secondary(s, "aggregate result")
                                .with_help("put the aggregate result in the head as it is, and compute the expression in another rule"),
                        );
                        return (None, None);
                    }
                    if !self.is_bound(n) {
                        ok = false;
                        self.unbound(n, s, "the head");
                    }
                }
                if !ok {
                    return (None, None);
                }
            }
        }
        match self.ty_expr(e, ct) {
            Ok(c) => {
                let ty = c.ty;
                match self.fit(c, ct, e.span, what) {
                    Ok(c) => (Some(self.term_of(c, e.span)), Some(ty)),
                    Err(_) => (None, Some(ty)),
                }
            }
            Err(Fail::Unknown) => {
                self.unknown = true;
                (None, None)
            }
            Err(Fail::Reported) => (None, None),
        }
    }

    /// An aggregate result in the head: a wider column makes sum/min/max aggregate widened
    /// values; count and avg must match.
    fn agg_head(&mut self, a: &mut AggState, ct: Option<Type>, span: Span, what: &str) -> (Option<Term>, Option<Type>) {
        let Some(ty) = self.vars[a.var].ty else {
            return (None, None);
        };
        let term = Some(Term::Var(VarId(a.var as u32)));
        let Some(want) = ct else {
            return (term, Some(ty));
        };
        if ty == want {
            return (term, Some(ty));
        }
        if a.func == AggFunc::Sum && is_integral(ty) && want.is_decimal() && widens_to(ty, want) {
            // An integer sum stays an exact int64 that the head widens to the decimal
            // column (summing the values as decimals would give a 38-digit sum).
            return (term, Some(ty));
        }
        let widenable = matches!(a.func, AggFunc::Sum | AggFunc::Min | AggFunc::Max) && widens_to(ty, want);
        match a.arg.take() {
            Some(arg) if widenable => {
                a.arg = Some(cast(arg, want));
                self.vars[a.var].ty = Some(want);
                (term, Some(ty))
            }
            arg => {
                a.arg = arg;
                self.error(mismatch(want, ty, span, what));
                (None, Some(ty))
            }
        }
    }

    // ---- expressions ----

    fn ty_expr(&mut self, e: &Expr, hint: Option<Type>) -> TyRes {
        match &e.kind {
            ExprKind::Var(n) => match self.names.get(n.as_str()).map(|&v| (v, &self.vars[v])) {
                Some((
                    v,
                    LVar {
                        bound: true,
                        ty: Some(t),
                        ..
                    },
                )) => Ok(self.var_expr(v, *t)),
                _ => Err(Fail::Unknown),
            },
            ExprKind::Anon | ExprKind::FuncTerm(..) => Err(Fail::Unknown),
            ExprKind::Lit(l) => self.lit(l, false, hint, e.span),
            ExprKind::Neg(x) => {
                if let ExprKind::Lit(l @ (Lit::Int(_) | Lit::Decimal(_) | Lit::Float(_))) = &x.kind {
                    return self.lit(l, true, hint, e.span);
                }
                let c = self.ty_expr(x, hint)?;
                if !is_numeric(c.ty) {
                    let t = c.ty;
                    return self.fail(
                        Diagnostic::error(format!("cannot negate a value of type {t}"), e.span)
                            .with_label(format!("this is {t}")),
                    );
                }
                Ok(CExpr {
                    ty: c.ty,
                    kind: CExprKind::Neg(Box::new(c)),
                })
            }
            ExprKind::Bin(op, a, b) => {
                let (ca, cb) = self.ty_pair(a, b, hint, Some(*op))?;
                self.arith(*op, ca, cb, a.span, b.span, e.span)
            }
            ExprKind::Call(f, args) => self.ty_call(f, args, e.span),
        }
    }

    /// An operand of one of Soufflé's integer operators: an integer (literals are int64,
    /// as Soufflé's numbers), widened to int64.
    fn souffle_int(&mut self, e: &Expr, op: &str) -> TyRes {
        let c = self.ty_expr(e, Some(Type::Int64))?;
        self.souffle_int_of(c, e.span, op)
    }

    fn souffle_int_of(&mut self, c: CExpr, span: Span, op: &str) -> TyRes {
        if is_integral(c.ty) {
            return Ok(cast(c, Type::Int64));
        }
        let t = c.ty;
        self.fail(
            Diagnostic::error(format!("`{op}` applies to integers, not {t}"), span).with_label(format!("this is {t}")),
        )
    }

    /// Soufflé's operators and functors (`souffle:…`, which only its front end writes).
    fn ty_souffle(&mut self, b: BuiltinUse, f: &Ident, args: &[Expr], span: Span) -> TyRes {
        let arity_error = |want: &str| {
            Diagnostic::error(format!("`{}` takes {want}", f.name), span).with_label("wrong number of arguments")
        };
        match b {
            BuiltinUse::Arith(op) => {
                let [x, y] = args else {
                    return self.fail(arity_error("2 arguments"));
                };
                let (cx, cy) = (self.ty_expr(x, Some(Type::Int64)), self.ty_expr(y, Some(Type::Int64)));
                let (cx, cy) = (cx?, cy?);
                if op == ArithOp::Pow && (cx.ty == Type::Float64 || cy.ty == Type::Float64) {
                    return self.fail(
                        Diagnostic::error("`^` of floats is not supported in Fox yet", span)
                            .with_label("not supported")
                            .with_help("Soufflé computes it with C's pow, which is not correctly rounded: its last bit depends on the machine"),
                    );
                }
                let (x, y) = (
                    self.souffle_int_of(cx, x.span, op.symbol()),
                    self.souffle_int_of(cy, y.span, op.symbol()),
                );
                let (x, y) = (x?, y?);
                Ok(CExpr {
                    kind: CExprKind::Arith(op, Box::new(x), Box::new(y)),
                    ty: Type::Int64,
                })
            }
            BuiltinUse::Func(n) => {
                let [x] = args else {
                    return self.fail(arity_error("1 argument"));
                };
                let name = match n {
                    Builtin::BitNot => "bnot",
                    Builtin::LogNot => "lnot",
                    _ => "unsigned",
                };
                let x = self.souffle_int(x, name)?;
                Ok(CExpr {
                    kind: CExprKind::Call(n, vec![x]),
                    ty: Type::Int64,
                })
            }
            BuiltinUse::MinMax(n) => {
                let name = if n == Builtin::Min { "min" } else { "max" };
                let Some((first, rest)) = args.split_first().filter(|_| args.len() >= 2) else {
                    return self.fail(arity_error("2 or more arguments"));
                };
                // `min(a, b, c)` is `min(min(a, b), c)`, as Soufflé folds it.
                let mut acc: Option<CExpr> = None;
                let mut acc_expr = first;
                for y in rest {
                    let (a, c) = match acc.take() {
                        None => self.ty_pair(acc_expr, y, None, None)?,
                        Some(a) => {
                            let c = self.ty_expr(y, lit_hint(a.ty, None))?;
                            (a, c)
                        }
                    };
                    let t = match common(a.ty, c.ty) {
                        Some(Type::Int32 | Type::Int64) => Type::Int64,
                        Some(t @ (Type::Float64 | Type::String)) => t,
                        _ => {
                            let (ta, tc) = (a.ty, c.ty);
                            return self.fail(
                                Diagnostic::error(format!("cannot take the {name} of {ta} and {tc}"), span)
                                    .with_label(format!("{name}({ta}, {tc})"))
                                    .with_help("the operands must be numbers, or all strings"),
                            );
                        }
                    };
                    acc = Some(CExpr {
                        kind: CExprKind::Call(n, vec![cast(a, t), cast(c, t)]),
                        ty: t,
                    });
                    acc_expr = y;
                }
                acc.ok_or(Fail::Unknown)
            }
            BuiltinUse::Convert(n) => {
                let [x] = args else {
                    return self.fail(arity_error("1 argument"));
                };
                let c = self.ty_expr(x, Some(Type::Int64))?;
                let t = c.ty;
                match (n, t) {
                    (Builtin::ToString, t) if is_integral(t) => Ok(CExpr {
                        kind: CExprKind::Call(Builtin::ToString, vec![cast(c, Type::Int64)]),
                        ty: Type::String,
                    }),
                    (Builtin::ToString, Type::Float64) => self.fail(
                        Diagnostic::error("`to_string` of a float is not supported in Fox yet", x.span)
                            .with_label("this is float64")
                            .with_help("Soufflé writes it with C++'s std::to_string (six decimals)"),
                    ),
                    (Builtin::ToNumber | Builtin::ToUnsigned, Type::String) => Ok(CExpr {
                        kind: CExprKind::Call(n, vec![c]),
                        ty: Type::Int64,
                    }),
                    (Builtin::ToNumber | Builtin::ToUnsigned, t) if is_integral(t) => Ok(cast(c, Type::Int64)),
                    // A float truncates toward zero, as `to_int` (out of range is an error).
                    (Builtin::ToNumber | Builtin::ToUnsigned, Type::Float64) => Ok(CExpr {
                        kind: CExprKind::Cast(Box::new(c)),
                        ty: Type::Int64,
                    }),
                    _ => {
                        let name = f.name.trim_start_matches("souffle:");
                        self.fail(
                            Diagnostic::error(format!("`{name}` does not apply to {t}"), x.span)
                                .with_label(format!("this is {t}")),
                        )
                    }
                }
            }
            _ => Err(Fail::Unknown),
        }
    }

    fn lit(&mut self, l: &Lit, neg: bool, hint: Option<Type>, span: Span) -> TyRes {
        match lit_value(l, neg, hint) {
            Ok(v) => Ok(CExpr {
                ty: value_type(&v),
                kind: CExprKind::Const(v),
            }),
            Err(msg) => self.fail(Diagnostic::error(msg, span).with_label("this literal")),
        }
    }

    /// Types two operands; a numeric literal takes the type of the other operand.
    fn ty_pair(&mut self, a: &Expr, b: &Expr, hint: Option<Type>, op: Option<BinOp>) -> Result<(CExpr, CExpr), Fail> {
        let (fa, fb) = (is_flexible(a), is_flexible(b));
        if fa && !fb {
            let cb = self.ty_expr(b, hint)?;
            let ca = self.ty_expr(a, lit_hint(cb.ty, op))?;
            Ok((ca, cb))
        } else if fb && !fa {
            let ca = self.ty_expr(a, hint)?;
            let cb = self.ty_expr(b, lit_hint(ca.ty, op))?;
            Ok((ca, cb))
        } else {
            let ra = self.ty_expr(a, hint);
            let rb = self.ty_expr(b, hint);
            Ok((ra?, rb?))
        }
    }

    fn arith(&mut self, op: BinOp, a: CExpr, b: CExpr, sa: Span, sb: Span, span: Span) -> TyRes {
        let (ta, tb) = (a.ty, b.ty);
        let mk = |ty: Type, a: CExpr, b: CExpr| CExpr {
            ty,
            kind: CExprKind::Arith(arith_op(op), Box::new(a), Box::new(b)),
        };
        match (ta, tb) {
            (Type::Date, t) if is_integral(t) && matches!(op, BinOp::Add | BinOp::Sub) => {
                return Ok(mk(Type::Date, a, b))
            }
            (t, Type::Date) if is_integral(t) && op == BinOp::Add => return Ok(mk(Type::Date, a, b)),
            (Type::Date, Type::Date) if op == BinOp::Sub => return Ok(mk(Type::Int64, a, b)),
            _ => {}
        }
        if is_numeric(ta) && is_numeric(tb) {
            if ta == Type::Float64 || tb == Type::Float64 {
                return Ok(mk(Type::Float64, cast(a, Type::Float64), cast(b, Type::Float64)));
            }
            if is_integral(ta) && is_integral(tb) {
                let t = common(ta, tb).unwrap_or(Type::Int64);
                return Ok(mk(t, cast(a, t), cast(b, t)));
            }
            let (s1, s2) = (scale_of(ta), scale_of(tb));
            // A value computed from a 38-digit decimal has 38 digits.
            let wide = matches!(ta, Type::WideDecimal(_)) || matches!(tb, Type::WideDecimal(_));
            return match op {
                BinOp::Add | BinOp::Sub => {
                    let t = Type::decimal(s1.max(s2), wide);
                    Ok(mk(t, cast(a, t), cast(b, t)))
                }
                BinOp::Mul => {
                    let s = u16::from(s1) + u16::from(s2);
                    if s > u16::from(MAX_SCALE) {
                        return self.fail(
                            Diagnostic::error(
                                format!("this product has {s} fraction digits; decimals have at most {MAX_SCALE}"),
                                span,
                            )
                            .with_label(format!("{ta} * {tb}"))
                            .with_help("round an operand first, e.g. `round(x, 2)`, or convert with to_float(…)"),
                        );
                    }
                    Ok(mk(
                        Type::decimal(s as u8, wide),
                        cast(a, Type::decimal(s1, wide)),
                        cast(b, Type::decimal(s2, wide)),
                    ))
                }
                BinOp::Div => Ok(mk(
                    Type::decimal(6, wide),
                    cast(a, Type::decimal(s1, wide)),
                    cast(b, Type::decimal(s2, wide)),
                )),
            };
        }
        let sym = op.symbol();
        let mut d = Diagnostic::error(format!("cannot apply `{sym}` to {ta} and {tb}"), span)
            .with_label(format!("{ta} {sym} {tb}"))
            .with_secondary(sa, ta.to_string())
            .with_secondary(sb, tb.to_string());
        if ta == Type::String && tb == Type::String && op == BinOp::Add {
            d = d.with_help("to join strings, use concat(a, b)");
        } else if ta == Type::Date || tb == Type::Date {
            d = d.with_help("a date plus or minus an integer number of days is a date, and date - date is the number of days between them");
        }
        self.fail(d)
    }

    fn ty_compare(&mut self, l: &Expr, op: ast::CmpOp, r: &Expr, span: Span) -> TyRes {
        let (cl, cr) = self.ty_pair(l, r, None, None)?;
        self.compare(op, cl, cr, l, r, span)
    }

    fn compare(&mut self, op: ast::CmpOp, cl: CExpr, cr: CExpr, l: &Expr, r: &Expr, span: Span) -> TyRes {
        let (tl, tr) = (cl.ty, cr.ty);
        match common(tl, tr) {
            Some(t) => Ok(bool_expr(CExprKind::Cmp(
                cmp_op(op),
                Box::new(cast(cl, t)),
                Box::new(cast(cr, t)),
            ))),
            None => {
                let mut d = if l.span.start < r.span.end && r.span.start < l.span.end {
                    Diagnostic::error(format!("cannot compare {tl} with {tr}"), span)
                        .with_label(format!("{tl} {} {tr}", op.symbol()))
                } else {
                    Diagnostic::error(format!("cannot compare {tl} with {tr}"), l.span)
                        .with_label(side_label(l, tl))
                        .with_secondary(r.span, side_label(r, tr))
                };
                if tl == Type::Date || tr == Type::Date {
                    d = d.with_help("dates compare only with dates; write a date constant as date(\"1998-09-02\")");
                } else if tl == Type::String || tr == Type::String {
                    d = d.with_help("strings compare only with strings");
                } else if widens_to(tr, tl) || widens_to(tl, tr) || (is_numeric(tl) && is_numeric(tr)) {
                    d = d.with_help("convert one side explicitly with to_float(…) or to_int(…)");
                }
                self.fail(d)
            }
        }
    }

    fn ty_in(&mut self, expr: &Expr, list: &[Expr], negated: bool) -> TyRes {
        let ce = self.ty_expr(expr, None)?;
        let consts: Option<Vec<(&Lit, bool)>> = list.iter().map(const_lit).collect();
        let cond = match consts {
            Some(items) => {
                let mut values = Vec::new();
                let mut t = ce.ty;
                for ((l, neg), e) in items.iter().zip(list) {
                    let v = match lit_value(l, *neg, Some(ce.ty)) {
                        Ok(v) => v,
                        Err(msg) => return self.fail(Diagnostic::error(msg, e.span).with_label("this literal")),
                    };
                    let vt = value_type(&v);
                    match common(t, vt) {
                        Some(c) => t = c,
                        None => {
                            return self.fail(
                                Diagnostic::error(format!("cannot compare {} with {vt}", ce.ty), e.span)
                                    .with_label(format!("this is {vt}"))
                                    .with_secondary(expr.span, ce.ty.to_string()),
                            )
                        }
                    }
                    values.push(v);
                }
                let values = values
                    .iter()
                    .map(|v| convert_value(v, t).unwrap_or_else(|| v.clone()))
                    .collect();
                bool_expr(CExprKind::In(Box::new(cast(ce, t)), values))
            }
            None => {
                let mut alts = Vec::new();
                for e in list {
                    let (a, b) = self.ty_pair(expr, e, None, None)?;
                    alts.push(self.compare(ast::CmpOp::Eq, a, b, expr, e, e.span)?);
                }
                bool_expr(CExprKind::Or(alts))
            }
        };
        Ok(if negated { not(cond) } else { cond })
    }

    fn filters_expr(&mut self, alts: &[Vec<BLit>]) -> TyRes {
        let mut ors = Vec::new();
        for conj in alts {
            let mut ands = Vec::new();
            for l in conj {
                ands.push(self.filter_lit(l)?);
            }
            ors.push(if ands.len() == 1 {
                ands.remove(0)
            } else {
                bool_expr(CExprKind::And(ands))
            });
        }
        Ok(if ors.len() == 1 {
            ors.remove(0)
        } else {
            bool_expr(CExprKind::Or(ors))
        })
    }

    fn filter_lit(&mut self, l: &BLit) -> TyRes {
        match l {
            BLit::Cmp { left, op, right, span } => self.ty_compare(left, *op, right, *span),
            BLit::In {
                expr, list, negated, ..
            } => self.ty_in(expr, list, *negated),
            BLit::Atom { atom, .. } => self.ty_pred_call(atom),
            BLit::NotAtom { atom, .. } => self.ty_pred_call(atom).map(not),
            BLit::NotFilters { alts, .. } => self.filters_expr(alts).map(not),
            BLit::NegFormula { span, .. } => self.fail(
                Diagnostic::error("this negated formula is not supported", *span)
                    .with_label("cannot be negated")
                    .with_help("define the formula as a separate predicate and negate that predicate"),
            ),
        }
    }

    fn ty_pred_call(&mut self, atom: &Atom) -> TyRes {
        self.ty_call(&atom.pred, &atom.args, atom.span)
    }

    fn ty_call(&mut self, f: &Ident, args: &[Expr], span: Span) -> TyRes {
        let Some(b) = builtin(&f.name) else {
            let mut d = Diagnostic::error(format!("unknown function `{}`", f.name), f.span)
                .with_label("not a built-in function");
            if let Some(p) = self.env.lookup(&f.name).map(|p| &self.env.preds[p]) {
                d = d.with_help(match p.functional {
                    Some(_) => format!("`{}` is a functional predicate: write `{}[…]`", p.name, p.name),
                    None => format!("`{}` is a relation: use it as an atom in the body", p.name),
                });
            } else if let Some(s) = closest(&f.name, BUILTIN_FUNCS.iter().copied()) {
                d = d.with_help(format!("did you mean `{s}`?"));
            }
            return self.fail(d);
        };
        let (params, usage): (&[&str], &str) = match b {
            BuiltinUse::Arith(_)
            | BuiltinUse::MinMax(_)
            | BuiltinUse::Convert(_)
            | BuiltinUse::Func(Builtin::BitNot | Builtin::LogNot | Builtin::Unsigned) => {
                return self.ty_souffle(b, f, args, span)
            }
            BuiltinUse::Pred(Builtin::Like) => (&["string", "string"], "like(s, pattern)"),
            BuiltinUse::Pred(Builtin::Regex) => (&["string", "string"], "souffle:match(s, pattern)"),
            BuiltinUse::Pred(_) => (&["string", "string"], "prefix(s, p)"),
            BuiltinUse::Func(Builtin::Substr) => (&["string", "int", "int"], "substr(s, start, length)"),
            BuiltinUse::Func(Builtin::Strlen) => (&["string"], "strlen(s)"),
            BuiltinUse::Func(Builtin::Concat) => (&["string", "string"], "concat(a, b)"),
            BuiltinUse::Func(Builtin::Year) => (&["date"], "year(d)"),
            BuiltinUse::Func(Builtin::Month) => (&["date"], "month(d)"),
            BuiltinUse::Func(Builtin::Day) => (&["date"], "day(d)"),
            BuiltinUse::Func(Builtin::Round) => (&["number", "digits"], "round(x, digits)"),
            BuiltinUse::Func(_) | BuiltinUse::ToFloat | BuiltinUse::ToInt => (&["number"], ""),
        };
        if args.len() != params.len() {
            let usage = if usage.is_empty() {
                format!("{}(x)", f.name)
            } else {
                usage.to_string()
            };
            return self.fail(
                Diagnostic::error(
                    format!(
                        "`{}` takes {} but {} given",
                        f.name,
                        plural(params.len(), "argument"),
                        if args.len() == 1 {
                            "1 was".to_string()
                        } else {
                            format!("{} were", args.len())
                        }
                    ),
                    span,
                )
                .with_label("wrong number of arguments")
                .with_help(format!("use it as `{usage}`")),
            );
        }
        let mut cs = Vec::new();
        let mut failed = None;
        for (p, e) in params.iter().zip(args) {
            if *p == "digits" {
                continue;
            }
            let hint = if *p == "int" { Some(Type::Int64) } else { None };
            match self.ty_expr(e, hint) {
                Ok(c) => {
                    let ok = match *p {
                        "string" => c.ty == Type::String,
                        "date" => c.ty == Type::Date,
                        "int" => is_integral(c.ty),
                        _ => is_numeric(c.ty),
                    };
                    if !ok {
                        let expected = match *p {
                            "int" => "an integer",
                            "number" => "a number",
                            "string" => "a string",
                            _ => "a date",
                        };
                        self.error(
                            Diagnostic::error(format!("`{}` expects {expected} here, found {}", f.name, c.ty), e.span)
                                .with_label(format!("this is {}", c.ty)),
                        );
                        failed = Some(Fail::Reported);
                    }
                    cs.push(c);
                }
                Err(x) => failed = Some(x),
            }
        }
        if let Some(x) = failed {
            return Err(x);
        }
        if let (BuiltinUse::Pred(p), Some(pattern)) = (b, args.get(1)) {
            // The pattern is matched against the dictionary once, before the run.
            if !matches!(pattern.kind, ExprKind::Lit(Lit::Str(_))) {
                let (name, example) = match p {
                    Builtin::Like => ("like", "like(s, \"%BRASS\")"),
                    Builtin::Regex => ("souffle:match", "souffle:match(s, \"a.*\")"),
                    _ => ("prefix", "prefix(s, \"PROMO\")"),
                };
                return self.fail(
                    Diagnostic::error(
                        format!("the pattern of `{name}` must be a string literal"),
                        pattern.span,
                    )
                    .with_label("not a string literal")
                    .with_help(format!("write the pattern itself, e.g. `{example}`")),
                );
            }
        }
        let call = |b: Builtin, ty: Type, cs: Vec<CExpr>| CExpr {
            kind: CExprKind::Call(b, cs),
            ty,
        };
        match b {
            BuiltinUse::Pred(p) => Ok(call(p, Type::Bool, cs)),
            BuiltinUse::Func(Builtin::Substr) => {
                let cs = cs
                    .into_iter()
                    .map(|c| if c.ty == Type::String { c } else { cast(c, Type::Int64) })
                    .collect();
                Ok(call(Builtin::Substr, Type::String, cs))
            }
            BuiltinUse::Func(Builtin::Concat) => Ok(call(Builtin::Concat, Type::String, cs)),
            BuiltinUse::Func(x @ (Builtin::Strlen | Builtin::Year | Builtin::Month | Builtin::Day)) => {
                Ok(call(x, Type::Int32, cs))
            }
            BuiltinUse::Func(Builtin::Round) => {
                let Some(x) = cs.into_iter().next() else {
                    return Err(Fail::Unknown);
                };
                let digits = args.get(1).and_then(|e| match &e.kind {
                    ExprKind::Lit(Lit::Int(d)) => u8::try_from(*d).ok().filter(|d| *d <= MAX_SCALE),
                    _ => None,
                });
                let Some(digits) = digits else {
                    let s = args.get(1).map_or(span, |e| e.span);
                    return self.fail(
                        Diagnostic::error("the digits of `round` must be an integer constant from 0 to 18", s)
                            .with_label("not a digit count")
                            .with_help("write e.g. `round(x, 2)`"),
                    );
                };
                let ty = match x.ty {
                    Type::Decimal(s) => Type::Decimal(s.min(digits)),
                    Type::WideDecimal(s) => Type::WideDecimal(s.min(digits)),
                    t => t,
                };
                let d = CExpr {
                    kind: CExprKind::Const(Value::Int32(i32::from(digits))),
                    ty: Type::Int32,
                };
                Ok(call(Builtin::Round, ty, vec![x, d]))
            }
            BuiltinUse::Func(other) => {
                let ty = cs.first().map_or(Type::Int64, |c| c.ty);
                Ok(call(other, ty, cs))
            }
            BuiltinUse::Arith(_) | BuiltinUse::MinMax(_) | BuiltinUse::Convert(_) => Err(Fail::Unknown),
            BuiltinUse::ToFloat | BuiltinUse::ToInt => {
                let Some(x) = cs.into_iter().next() else {
                    return Err(Fail::Unknown);
                };
                let t = if b == BuiltinUse::ToFloat {
                    Type::Float64
                } else {
                    Type::Int64
                };
                if x.ty == t {
                    return Ok(x);
                }
                Ok(CExpr {
                    kind: CExprKind::Cast(Box::new(x)),
                    ty: t,
                })
            }
        }
    }
}

/// A literal as a constant for a place of type `want` (`what` names the place, e.g.
/// "column `x` of `edge`"): it adapts to `want` or widens to it.
pub(crate) fn const_value(l: &Lit, neg: bool, want: Option<Type>, span: Span, what: &str) -> Result<Value, Diagnostic> {
    let v = lit_value(l, neg, want).map_err(|msg| Diagnostic::error(msg, span).with_label(format!("for {what}")))?;
    let Some(want) = want else {
        return Ok(v);
    };
    let found = value_type(&v);
    if found == want {
        return Ok(v);
    }
    convert_value(&v, want).ok_or_else(|| mismatch(want, found, span, what))
}

/// "expected T for …, found U".
pub(crate) fn mismatch(want: Type, found: Type, span: Span, what: &str) -> Diagnostic {
    let mut d = Diagnostic::error(format!("mismatched types: {what} is {want}, but this is {found}"), span)
        .with_label(format!("expected {want}, found {found}"));
    if is_numeric(want) && is_numeric(found) {
        d = d.with_note(format!(
            "{found} does not widen to {want} without losing information; values only widen int32 → int64 → decimal → float64"
        ));
        d = d.with_help(match want {
            Type::Int32 | Type::Int64 => {
                "convert explicitly with to_int(…), or declare the column with a wider type".to_string()
            }
            _ => format!("declare the column as {found}, or round the value explicitly"),
        });
    }
    d
}

/// "`name` is a string" or "this is an integer": what one side of a comparison is.
fn side_label(e: &Expr, t: Type) -> String {
    let what = match t {
        Type::Int32 | Type::Int64 => "an integer",
        Type::Decimal(_) | Type::WideDecimal(_) => "a decimal",
        Type::Float64 => "a float",
        Type::String => "a string",
        Type::Date => "a date",
        Type::Bool => "a boolean",
    };
    match &e.kind {
        ExprKind::Var(v) if !v.starts_with('$') => format!("`{v}` is {what}"),
        _ => format!("this is {what}"),
    }
}
