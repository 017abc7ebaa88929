//! A deliberately simple tuple-at-a-time evaluator of the typed core program.
//!
//! Every relation is a `BTreeSet` of rows. Each stratum is evaluated naively: all its rules
//! are re-evaluated against the current relations until no rule adds a tuple. A rule body
//! is evaluated by nested loops over its literals: a positive atom scans its relation (a
//! range scan over the longest bound prefix of its arguments), a negated atom is a lookup,
//! an assignment binds its variable, a filter tests the current binding. An aggregation
//! rule collects the distinct bindings of all body variables, groups them by the head
//! variables that are not aggregate results, and emits one tuple per non-empty group.
//! Expressions are evaluated exactly: decimals as `i128` with their scale, and every
//! overflow, division by zero or out-of-range conversion is an error.

use crate::value::{civil_from_days, dec_cmp, from_value, to_value, RV};
use fox_sema::core::{
    AggFunc, ArithOp, Builtin, CExpr, CExprKind, CmpOp, Column, CoreAgg, CoreLit, CoreProgram, CoreRule, PredId, Term,
    Type, Value, MAX_WIDE_DECIMAL,
};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Input relations by predicate name: one `Vec<Value>` per row, in declaration column order.
pub type Inputs = BTreeMap<String, Vec<Vec<Value>>>;

/// One output relation: its rows in the final output order of `LANGUAGE.md`.
#[derive(Clone, Debug, PartialEq)]
pub struct RefTable {
    pub name: String,
    pub columns: Vec<Column>,
    pub rows: Vec<Vec<Value>>,
}

/// Why a program could not be evaluated.
#[derive(Clone, Debug, PartialEq)]
pub enum EvalError {
    /// The source does not check: the rendered diagnostics.
    Compile(String),
    /// An `.input` predicate has no rows in the inputs map.
    MissingInput(String),
    /// An input row does not fit its predicate's declaration.
    BadInput { pred: String, row: usize, message: String },
    /// An expression or aggregate failed (overflow, division by zero, bad conversion).
    Arith(String),
    /// A functional predicate got two values for one key.
    Functional { pred: String, key: String },
    /// A relation grew past the evaluator's size limit (a rule keeps inventing values).
    TooLarge { pred: String, limit: usize },
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalError::Compile(d) => write!(f, "the program does not compile:\n{d}"),
            EvalError::MissingInput(p) => write!(f, "no input rows given for `{p}`"),
            EvalError::BadInput { pred, row, message } => write!(f, "input row {row} of `{pred}`: {message}"),
            EvalError::Arith(m) => write!(f, "evaluation error: {m}"),
            EvalError::Functional { pred, key } => {
                write!(f, "functional predicate `{pred}` has two values for the key ({key})")
            }
            EvalError::TooLarge { pred, limit } => write!(f, "`{pred}` grew beyond {limit} tuples"),
        }
    }
}

impl std::error::Error for EvalError {}

type Res<T> = Result<T, EvalError>;

fn arith_err<T>(msg: impl Into<String>) -> Res<T> {
    Err(EvalError::Arith(msg.into()))
}

/// Parses and checks a program, rendering the diagnostics on failure.
pub fn compile(source: &str) -> Result<CoreProgram, EvalError> {
    let (ast, mut diags) = fox_syntax::parse(source);
    let core = if diags.iter().any(|d| d.is_error()) {
        None
    } else {
        let (core, more) = fox_sema::check(&ast);
        diags.extend(more);
        core
    };
    core.ok_or_else(|| EvalError::Compile(fox_syntax::diag::render("program.logic", source, &diags, false)))
}

/// The largest relation the evaluator builds before it gives up.
const MAX_TUPLES: usize = 2_000_000;

/// Evaluates `prog` over `inputs` and returns its outputs in the order of `prog.outputs`.
pub fn evaluate(prog: &CoreProgram, inputs: &Inputs) -> Result<Vec<RefTable>, EvalError> {
    let mut rels: Vec<BTreeSet<Vec<RV>>> = vec![BTreeSet::new(); prog.preds.len()];
    for spec in &prog.inputs {
        let info = &prog.preds[spec.pred.0 as usize];
        let rows = inputs
            .get(&info.name)
            .ok_or_else(|| EvalError::MissingInput(info.name.clone()))?;
        let rel = &mut rels[spec.pred.0 as usize];
        for (i, row) in rows.iter().enumerate() {
            let bad = |message: String| EvalError::BadInput {
                pred: info.name.clone(),
                row: i + 1,
                message,
            };
            if row.len() != info.columns.len() {
                return Err(bad(format!("{} values for {} columns", row.len(), info.columns.len())));
            }
            let mut t = Vec::with_capacity(row.len());
            for (v, c) in row.iter().zip(&info.columns) {
                let from = value_type(v);
                let rv = convert(from_value(v), from, c.ty)
                    .map_err(|_| bad(format!("{v:?} does not fit column `{}` of type {}", c.name, c.ty)))?;
                t.push(rv);
            }
            rel.insert(t);
        }
        check_functional(prog, spec.pred, rel)?;
    }
    for stratum in &prog.strata {
        for fact in &stratum.facts {
            let cols = &prog.preds[fact.pred.0 as usize].columns;
            let mut t = Vec::with_capacity(cols.len());
            for (v, c) in fact.values.iter().zip(cols) {
                t.push(convert(from_value(v), value_type(v), c.ty)?);
            }
            rels[fact.pred.0 as usize].insert(t);
        }
        loop {
            let mut changed = false;
            for rule in &stratum.rules {
                let derived = eval_rule(prog, rule, &rels)?;
                let rel = &mut rels[rule.head.0 as usize];
                for t in derived {
                    changed |= rel.insert(t);
                }
                if rel.len() > MAX_TUPLES {
                    let pred = prog.preds[rule.head.0 as usize].name.clone();
                    return Err(EvalError::TooLarge {
                        pred,
                        limit: MAX_TUPLES,
                    });
                }
            }
            if !changed {
                break;
            }
        }
        for p in &stratum.preds {
            check_functional(prog, *p, &rels[p.0 as usize])?;
        }
    }
    let mut out = Vec::new();
    for spec in &prog.outputs {
        let info = &prog.preds[spec.pred.0 as usize];
        let mut rows: Vec<&Vec<RV>> = rels[spec.pred.0 as usize].iter().collect();
        // The set is already ascending on all columns; a stable sort on the order keys
        // keeps that as the tie-break.
        rows.sort_by(|a, b| {
            for &(c, desc) in &spec.order_by {
                let o = a[c].cmp(&b[c]);
                if o != Ordering::Equal {
                    return if desc { o.reverse() } else { o };
                }
            }
            Ordering::Equal
        });
        let limit = spec
            .limit
            .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
        let rows = rows
            .into_iter()
            .take(limit)
            .map(|r| r.iter().zip(&info.columns).map(|(v, c)| to_value(v, c.ty)).collect())
            .collect();
        out.push(RefTable {
            name: info.name.clone(),
            columns: info.columns.clone(),
            rows,
        });
    }
    Ok(out)
}

fn check_functional(prog: &CoreProgram, pred: PredId, rel: &BTreeSet<Vec<RV>>) -> Res<()> {
    let info = &prog.preds[pred.0 as usize];
    let Some(k) = info.functional_keys else {
        return Ok(());
    };
    let mut prev: Option<&Vec<RV>> = None;
    for t in rel {
        if let Some(p) = prev {
            if p[..k] == t[..k] {
                let key: Vec<String> = t[..k].iter().map(|v| format!("{v:?}")).collect();
                return Err(EvalError::Functional {
                    pred: info.name.clone(),
                    key: key.join(", "),
                });
            }
        }
        prev = Some(t);
    }
    Ok(())
}

/// The type of a constant.
fn value_type(v: &Value) -> Type {
    match v {
        Value::Int32(_) => Type::Int32,
        Value::Int64(_) => Type::Int64,
        Value::Decimal { unscaled, scale } => Type::decimal(*scale, unscaled.unsigned_abs() >= 10u128.pow(18)),
        Value::Float64(_) => Type::Float64,
        Value::String(_) => Type::String,
        Value::Date(_) => Type::Date,
        Value::Bool(_) => Type::Bool,
    }
}

// ---- rule bodies ---------------------------------------------------------------------

type Env = Vec<Option<RV>>;

/// The variables an expression reads.
fn expr_vars(e: &CExpr, out: &mut Vec<usize>) {
    match &e.kind {
        CExprKind::Var(v) => out.push(v.0 as usize),
        CExprKind::Const(_) => {}
        CExprKind::Cast(a) | CExprKind::Neg(a) | CExprKind::Not(a) | CExprKind::In(a, _) => expr_vars(a, out),
        CExprKind::Arith(_, a, b) | CExprKind::Cmp(_, a, b) => {
            expr_vars(a, out);
            expr_vars(b, out);
        }
        CExprKind::And(xs) | CExprKind::Or(xs) | CExprKind::Call(_, xs) => xs.iter().for_each(|x| expr_vars(x, out)),
    }
}

fn term_vars(args: &[Term]) -> Vec<usize> {
    args.iter()
        .filter_map(|t| match t {
            Term::Var(v) => Some(v.0 as usize),
            Term::Const(_) => None,
        })
        .collect()
}

/// An evaluation order of the body: a literal is taken once everything it reads is bound;
/// filters and negations as early as possible, atoms and assignments in source order.
fn schedule(rule: &CoreRule) -> Vec<&CoreLit> {
    let mut bound = vec![false; rule.vars.len()];
    let mut left: Vec<&CoreLit> = rule.body.iter().collect();
    let mut order = Vec::with_capacity(left.len());
    while !left.is_empty() {
        let ready = |l: &CoreLit, bound: &[bool]| -> bool {
            let reads = match l {
                CoreLit::Atom { .. } => return true,
                CoreLit::NotAtom { args, .. } => term_vars(args),
                CoreLit::Assign { expr, .. } | CoreLit::Filter { cond: expr, .. } => {
                    let mut v = Vec::new();
                    expr_vars(expr, &mut v);
                    v
                }
            };
            reads.iter().all(|v| bound[*v])
        };
        let is_test = |l: &CoreLit| matches!(l, CoreLit::NotAtom { .. } | CoreLit::Filter { .. });
        let pick = left
            .iter()
            .position(|l| is_test(l) && ready(l, &bound))
            .or_else(|| left.iter().position(|l| !is_test(l) && ready(l, &bound)))
            // Unreachable for a safe rule; keeps the order total for any input.
            .unwrap_or(0);
        let l = left.remove(pick);
        match l {
            CoreLit::Atom { args, .. } => term_vars(args).into_iter().for_each(|v| bound[v] = true),
            CoreLit::Assign { var, .. } => bound[var.0 as usize] = true,
            _ => {}
        }
        order.push(l);
    }
    order
}

struct Body<'a> {
    prog: &'a CoreProgram,
    rule: &'a CoreRule,
    rels: &'a [BTreeSet<Vec<RV>>],
    lits: Vec<&'a CoreLit>,
}

impl Body<'_> {
    /// Calls `emit` with every binding that satisfies the literals from `i` on.
    fn solve(&self, i: usize, env: &mut Env, emit: &mut dyn FnMut(&Env) -> Res<()>) -> Res<()> {
        let Some(lit) = self.lits.get(i) else {
            return emit(env);
        };
        match lit {
            CoreLit::Atom { pred, args, .. } => {
                let cols = &self.prog.preds[pred.0 as usize].columns;
                let mut prefix = Vec::new();
                for (a, c) in args.iter().zip(cols) {
                    match self.arg_value(a, c.ty, env)? {
                        Some(v) => prefix.push(v),
                        None => break,
                    }
                }
                let rel = &self.rels[pred.0 as usize];
                for t in rel.range(prefix.clone()..) {
                    if !t.starts_with(&prefix) {
                        break;
                    }
                    let mut newly = Vec::new();
                    let mut ok = true;
                    for (k, a) in args.iter().enumerate().skip(prefix.len()) {
                        let col_ty = cols[k].ty;
                        match a {
                            Term::Const(c) => {
                                if convert(from_value(c), value_type(c), col_ty)? != t[k] {
                                    ok = false;
                                }
                            }
                            Term::Var(v) => {
                                let vi = v.0 as usize;
                                let var_ty = self.rule.vars[vi].ty;
                                let val = convert(t[k].clone(), col_ty, var_ty)?;
                                match &env[vi] {
                                    Some(b) => ok = *b == val,
                                    None => {
                                        env[vi] = Some(val);
                                        newly.push(vi);
                                    }
                                }
                            }
                        }
                        if !ok {
                            break;
                        }
                    }
                    let r = if ok { self.solve(i + 1, env, emit) } else { Ok(()) };
                    for v in newly {
                        env[v] = None;
                    }
                    r?;
                }
                Ok(())
            }
            CoreLit::NotAtom { pred, args, .. } => {
                let cols = &self.prog.preds[pred.0 as usize].columns;
                let mut t = Vec::with_capacity(args.len());
                for (a, c) in args.iter().zip(cols) {
                    match self.arg_value(a, c.ty, env)? {
                        Some(v) => t.push(v),
                        None => return arith_err("a negated atom reads an unbound variable"),
                    }
                }
                if self.rels[pred.0 as usize].contains(&t) {
                    Ok(())
                } else {
                    self.solve(i + 1, env, emit)
                }
            }
            CoreLit::Assign { var, expr, .. } => {
                let vi = var.0 as usize;
                let val = convert(eval(expr, env)?, expr.ty, self.rule.vars[vi].ty)?;
                match &env[vi] {
                    Some(b) if *b == val => self.solve(i + 1, env, emit),
                    Some(_) => Ok(()),
                    None => {
                        env[vi] = Some(val);
                        let r = self.solve(i + 1, env, emit);
                        env[vi] = None;
                        r
                    }
                }
            }
            CoreLit::Filter { cond, .. } => {
                if truth(&eval(cond, env)?)? {
                    self.solve(i + 1, env, emit)
                } else {
                    Ok(())
                }
            }
        }
    }

    /// The value of an atom argument as stored in a column of type `col`, or `None` when
    /// it is an unbound variable.
    fn arg_value(&self, a: &Term, col: Type, env: &Env) -> Res<Option<RV>> {
        match a {
            Term::Const(c) => Ok(Some(convert(from_value(c), value_type(c), col)?)),
            Term::Var(v) => match &env[v.0 as usize] {
                Some(x) => Ok(Some(convert(x.clone(), self.rule.vars[v.0 as usize].ty, col)?)),
                None => Ok(None),
            },
        }
    }
}

fn truth(v: &RV) -> Res<bool> {
    match v {
        RV::Bool(b) => Ok(*b),
        other => arith_err(format!("a condition evaluated to {other:?}, not a boolean")),
    }
}

/// All head tuples a rule derives from the current relations.
fn eval_rule(prog: &CoreProgram, rule: &CoreRule, rels: &[BTreeSet<Vec<RV>>]) -> Res<Vec<Vec<RV>>> {
    let body = Body {
        prog,
        rule,
        rels,
        lits: schedule(rule),
    };
    let mut env: Env = vec![None; rule.vars.len()];
    let cols = &prog.preds[rule.head.0 as usize].columns;
    let head = |env: &Env| -> Res<Vec<RV>> {
        let mut t = Vec::with_capacity(cols.len());
        for (a, c) in rule.head_args.iter().zip(cols) {
            let v = match a {
                Term::Const(k) => convert(from_value(k), value_type(k), c.ty)?,
                Term::Var(v) => match &env[v.0 as usize] {
                    Some(x) => convert(x.clone(), rule.vars[v.0 as usize].ty, c.ty)?,
                    None => return arith_err(format!("head variable `{}` is unbound", rule.vars[v.0 as usize].name)),
                },
            };
            t.push(v);
        }
        Ok(t)
    };
    let Some(aggs) = &rule.aggs else {
        let mut out = Vec::new();
        body.solve(0, &mut env, &mut |env| {
            out.push(head(env)?);
            Ok(())
        })?;
        return Ok(out);
    };
    // The distinct bindings of all body variables.
    let mut bindings: BTreeSet<Env> = BTreeSet::new();
    body.solve(0, &mut env, &mut |env| {
        bindings.insert(env.clone());
        Ok(())
    })?;
    let agg_vars: BTreeSet<usize> = aggs.iter().map(|a| a.var.0 as usize).collect();
    let key_vars: Vec<usize> = term_vars(&rule.head_args)
        .into_iter()
        .filter(|v| !agg_vars.contains(v))
        .collect();
    let mut groups: BTreeMap<Vec<Option<RV>>, Vec<&Env>> = BTreeMap::new();
    for b in &bindings {
        let key = key_vars.iter().map(|v| b[*v].clone()).collect();
        groups.entry(key).or_default().push(b);
    }
    let mut out = Vec::new();
    for (key, members) in groups {
        let mut env: Env = vec![None; rule.vars.len()];
        for (v, k) in key_vars.iter().zip(key) {
            env[*v] = k;
        }
        for agg in aggs {
            let ty = rule.vars[agg.var.0 as usize].ty;
            env[agg.var.0 as usize] = Some(aggregate(agg, ty, &members)?);
        }
        out.push(head(&env)?);
    }
    Ok(out)
}

/// One aggregate over the bindings of a group; `out` is the result type.
fn aggregate(agg: &CoreAgg, out: Type, members: &[&Env]) -> Res<RV> {
    let n = members.len();
    if agg.func == AggFunc::Count {
        return Ok(RV::Int(n as i64));
    }
    let Some(arg) = &agg.arg else {
        return arith_err(format!("{:?} without an argument", agg.func));
    };
    let vals: Vec<RV> = members.iter().map(|b| eval(arg, b)).collect::<Res<_>>()?;
    match agg.func {
        AggFunc::Count => Ok(RV::Int(n as i64)),
        AggFunc::Min => vals
            .into_iter()
            .min()
            .ok_or(EvalError::Arith("min of no values".into())),
        AggFunc::Max => vals
            .into_iter()
            .max()
            .ok_or(EvalError::Arith("max of no values".into())),
        AggFunc::Sum | AggFunc::Avg => {
            let avg = agg.func == AggFunc::Avg;
            if arg.ty == Type::Float64 {
                let s: f64 = vals.iter().map(as_f64).sum();
                return Ok(RV::Float(if avg { s / n as f64 } else { s }));
            }
            let in_scale = scale_of(arg.ty);
            let mut sum: i128 = 0;
            for v in &vals {
                let u = match v {
                    RV::Int(i) => i128::from(*i),
                    RV::Dec(u, _) => *u,
                    other => return arith_err(format!("sum over {other:?}")),
                };
                sum = sum
                    .checked_add(u)
                    .ok_or(EvalError::Arith("sum overflows 128 bits".into()))?;
            }
            let r = if avg {
                let s_out = scale_of(out);
                let num = rescale_exact(sum, in_scale, s_out)?;
                RV::Dec(div_round(num, n as i128)?, s_out)
            } else if let Some(s) = out.decimal_scale() {
                RV::Dec(sum, s)
            } else {
                match i64::try_from(sum) {
                    Ok(i) => RV::Int(i),
                    Err(_) => return arith_err(format!("sum {sum} overflows {out}")),
                }
            };
            fit(r, out)
        }
    }
}

// ---- expressions -----------------------------------------------------------------------

fn scale_of(t: Type) -> u8 {
    t.decimal_scale().unwrap_or(0)
}

fn pow10(e: u32) -> Res<i128> {
    10i128
        .checked_pow(e)
        .ok_or(EvalError::Arith(format!("10^{e} overflows")))
}

/// `u` at scale `from` rescaled to the larger scale `to` (exact), or to a smaller one.
fn rescale_exact(u: i128, from: u8, to: u8) -> Res<i128> {
    if to >= from {
        u.checked_mul(pow10(u32::from(to - from))?)
            .ok_or(EvalError::Arith("decimal rescale overflows".into()))
    } else {
        div_round(u, pow10(u32::from(from - to))?)
    }
}

/// `n / d` rounded half away from zero.
fn div_round(n: i128, d: i128) -> Res<i128> {
    if d == 0 {
        return arith_err("division by zero");
    }
    let q = n.checked_div(d).ok_or(EvalError::Arith("division overflows".into()))?;
    let r = n % d;
    let (ra, da) = (r.unsigned_abs(), d.unsigned_abs());
    if ra >= da - ra {
        let away = if (n < 0) != (d < 0) { -1 } else { 1 };
        Ok(q + away)
    } else {
        Ok(q)
    }
}

/// Checks that a value fits its type's range: a decimal has at most 18 digits (38 for a
/// wide one), a date lies in 0000-01-01 ..= 9999-12-31.
fn fit(v: RV, ty: Type) -> Res<RV> {
    let ok = match (&v, ty) {
        (RV::Int(i), Type::Int32) => i32::try_from(*i).is_ok(),
        (RV::Dec(u, _), Type::WideDecimal(_)) => u.unsigned_abs() <= MAX_WIDE_DECIMAL.unsigned_abs(),
        (RV::Dec(u, _), _) => u.unsigned_abs() < 10u128.pow(18),
        (RV::Date(d), _) => (-719_528..=2_932_896).contains(d),
        _ => true,
    };
    if ok {
        Ok(v)
    } else {
        arith_err(format!("{v:?} overflows {ty}"))
    }
}

fn as_f64(v: &RV) -> f64 {
    match v {
        RV::Int(i) => *i as f64,
        RV::Dec(u, s) => *u as f64 / 10f64.powi(i32::from(*s)),
        RV::Float(f) => *f,
        RV::Date(d) => f64::from(*d),
        RV::Str(_) | RV::Bool(_) => f64::NAN,
    }
}

/// Converts a value of type `from` to type `to`: widening, decimal rescale (rounding half
/// away from zero when the scale shrinks), `to_float`, and `to_int` (truncating).
fn convert(v: RV, from: Type, to: Type) -> Res<RV> {
    if from == to {
        return Ok(v);
    }
    let r = match (v, to) {
        (RV::Int(i), Type::Int32 | Type::Int64) => RV::Int(i),
        (RV::Int(i), Type::Decimal(s) | Type::WideDecimal(s)) => RV::Dec(rescale_exact(i128::from(i), 0, s)?, s),
        (RV::Dec(u, s), Type::Decimal(t) | Type::WideDecimal(t)) => RV::Dec(rescale_exact(u, s, t)?, t),
        (RV::Dec(u, s), Type::Int32 | Type::Int64) => {
            let q = u / pow10(u32::from(s))?;
            RV::Int(i64::try_from(q).map_err(|_| EvalError::Arith(format!("{q} does not fit {to}")))?)
        }
        (v @ (RV::Int(_) | RV::Dec(..)), Type::Float64) => RV::Float(as_f64(&v)),
        (RV::Float(f), Type::Int32 | Type::Int64) => {
            let t = f.trunc();
            if !t.is_finite() || !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&t) {
                return arith_err(format!("{f} does not fit {to}"));
            }
            RV::Int(t as i64)
        }
        (v, _) => v,
    };
    fit(r, to)
}

fn int_of(v: &RV) -> Res<i64> {
    match v {
        RV::Int(i) => Ok(*i),
        other => arith_err(format!("expected an integer, found {other:?}")),
    }
}

fn str_of(v: &RV) -> Res<&str> {
    match v {
        RV::Str(s) => Ok(s),
        other => arith_err(format!("expected a string, found {other:?}")),
    }
}

/// The exact decimal view of an integer or decimal value.
fn dec_of(v: &RV) -> Res<(i128, u8)> {
    match v {
        RV::Int(i) => Ok((i128::from(*i), 0)),
        RV::Dec(u, s) => Ok((*u, *s)),
        other => arith_err(format!("expected a number, found {other:?}")),
    }
}

/// Compares two values; `None` when they are unordered (a float NaN).
fn compare(a: &RV, b: &RV) -> Res<Option<Ordering>> {
    Ok(match (a, b) {
        (RV::Float(_), _) | (_, RV::Float(_)) => as_f64(a).partial_cmp(&as_f64(b)),
        (RV::Int(_) | RV::Dec(..), RV::Int(_) | RV::Dec(..)) => {
            let ((x, sx), (y, sy)) = (dec_of(a)?, dec_of(b)?);
            Some(dec_cmp(x, sx, y, sy))
        }
        _ => Some(a.cmp(b)),
    })
}

/// SQL LIKE over characters: `%` any run, `_` exactly one character.
pub(crate) fn like(s: &str, pat: &str) -> bool {
    let s: Vec<char> = s.chars().collect();
    let p: Vec<char> = pat.chars().collect();
    // m[j]: the pattern prefix seen so far matches s[..j].
    let mut m = vec![false; s.len() + 1];
    m[0] = true;
    for pc in &p {
        let mut next = vec![false; s.len() + 1];
        match pc {
            '%' => {
                let mut any = false;
                for j in 0..=s.len() {
                    any |= m[j];
                    next[j] = any;
                }
            }
            c => {
                for j in 0..s.len() {
                    next[j + 1] = m[j] && (*c == '_' || s[j] == *c);
                }
            }
        }
        m = next;
    }
    m[s.len()]
}

/// SQL `substring(s from start for len)` over characters, 1-based.
pub(crate) fn substr(s: &str, start: i64, len: i64) -> String {
    let from = start.max(1);
    let to = start.saturating_add(len.max(0));
    if to <= from {
        return String::new();
    }
    let skip = usize::try_from(from - 1).unwrap_or(usize::MAX);
    let take = usize::try_from(to - from).unwrap_or(usize::MAX);
    s.chars().skip(skip).take(take).collect()
}

fn eval(e: &CExpr, env: &Env) -> Res<RV> {
    match &e.kind {
        CExprKind::Var(v) => env[v.0 as usize]
            .clone()
            .ok_or(EvalError::Arith(format!("variable {} read before it is bound", v.0))),
        CExprKind::Const(c) => convert(from_value(c), value_type(c), e.ty),
        CExprKind::Cast(a) => convert(eval(a, env)?, a.ty, e.ty),
        CExprKind::Neg(a) => {
            let r = match eval(a, env)? {
                RV::Int(i) => RV::Int(i.checked_neg().ok_or(EvalError::Arith(format!("-({i}) overflows")))?),
                RV::Dec(u, s) => RV::Dec(-u, s),
                RV::Float(f) => RV::Float(-f),
                other => return arith_err(format!("cannot negate {other:?}")),
            };
            fit(r, e.ty)
        }
        CExprKind::Arith(op, a, b) => {
            let (x, y) = (eval(a, env)?, eval(b, env)?);
            arith(*op, x, y, e.ty)
        }
        CExprKind::Cmp(op, a, b) => {
            let o = compare(&eval(a, env)?, &eval(b, env)?)?;
            let r = match (op, o) {
                (CmpOp::Ne, None) => true,
                (_, None) => false,
                (CmpOp::Eq, Some(o)) => o == Ordering::Equal,
                (CmpOp::Ne, Some(o)) => o != Ordering::Equal,
                (CmpOp::Lt, Some(o)) => o == Ordering::Less,
                (CmpOp::Le, Some(o)) => o != Ordering::Greater,
                (CmpOp::Gt, Some(o)) => o == Ordering::Greater,
                (CmpOp::Ge, Some(o)) => o != Ordering::Less,
            };
            Ok(RV::Bool(r))
        }
        CExprKind::And(xs) => {
            for x in xs {
                if !truth(&eval(x, env)?)? {
                    return Ok(RV::Bool(false));
                }
            }
            Ok(RV::Bool(true))
        }
        CExprKind::Or(xs) => {
            for x in xs {
                if truth(&eval(x, env)?)? {
                    return Ok(RV::Bool(true));
                }
            }
            Ok(RV::Bool(false))
        }
        CExprKind::Not(a) => Ok(RV::Bool(!truth(&eval(a, env)?)?)),
        CExprKind::In(a, list) => {
            let x = eval(a, env)?;
            for c in list {
                if compare(&x, &from_value(c))? == Some(Ordering::Equal) {
                    return Ok(RV::Bool(true));
                }
            }
            Ok(RV::Bool(false))
        }
        CExprKind::Call(f, args) => {
            let vals: Vec<RV> = args.iter().map(|a| eval(a, env)).collect::<Res<_>>()?;
            call(*f, &vals, args, e.ty)
        }
    }
}

fn arith(op: ArithOp, x: RV, y: RV, ty: Type) -> Res<RV> {
    let overflow = || EvalError::Arith(format!("{x:?} {op:?} {y:?} overflows {ty}"));
    let r = match (&x, &y, ty) {
        (RV::Date(d), RV::Int(n), Type::Date) | (RV::Int(n), RV::Date(d), Type::Date) => {
            let n = if op == ArithOp::Sub {
                n.checked_neg().ok_or_else(overflow)?
            } else {
                *n
            };
            let day = i64::from(*d).checked_add(n).ok_or_else(overflow)?;
            RV::Date(i32::try_from(day).map_err(|_| overflow())?)
        }
        (RV::Date(a), RV::Date(b), _) => RV::Int(i64::from(*a) - i64::from(*b)),
        (_, _, Type::Float64) => {
            let (a, b) = (as_f64(&x), as_f64(&y));
            RV::Float(match op {
                ArithOp::Add => a + b,
                ArithOp::Sub => a - b,
                ArithOp::Mul => a * b,
                ArithOp::Div => {
                    if b == 0.0 {
                        return arith_err("division by zero");
                    }
                    a / b
                }
                other => return arith_err(format!("{other:?} of floats")),
            })
        }
        (_, _, Type::Int32 | Type::Int64) => {
            let (a, b) = (int_of(&x)?, int_of(&y)?);
            let r = match op {
                ArithOp::Add => a.checked_add(b),
                ArithOp::Sub => a.checked_sub(b),
                ArithOp::Mul => a.checked_mul(b),
                ArithOp::Div => {
                    if b == 0 {
                        return arith_err("division by zero");
                    }
                    a.checked_div(b)
                }
                ArithOp::Rem => {
                    if b == 0 {
                        return arith_err("division by zero");
                    }
                    // C traps on the smallest integer's remainder by -1.
                    if b == -1 && a == i64::MIN {
                        None
                    } else {
                        a.checked_rem(b)
                    }
                }
                ArithOp::Pow => {
                    if a == 0 && b < 0 {
                        return arith_err("division by zero");
                    }
                    pow_exact(a, b)
                }
                op => Some(bits(op, a, b)),
            };
            RV::Int(r.ok_or_else(overflow)?)
        }
        (_, _, Type::Decimal(rs) | Type::WideDecimal(rs)) => {
            let ((a, sa), (b, sb)) = (dec_of(&x)?, dec_of(&y)?);
            let u = match op {
                ArithOp::Add | ArithOp::Sub => {
                    let (a, b) = (rescale_exact(a, sa, rs)?, rescale_exact(b, sb, rs)?);
                    if op == ArithOp::Add {
                        a.checked_add(b)
                    } else {
                        a.checked_sub(b)
                    }
                    .ok_or_else(overflow)?
                }
                ArithOp::Mul => rescale_exact(a.checked_mul(b).ok_or_else(overflow)?, sa + sb, rs)?,
                ArithOp::Div => {
                    if b == 0 {
                        return arith_err("division by zero");
                    }
                    // (a / 10^sa) / (b / 10^sb) at scale rs = a * 10^(rs + sb) / (b * 10^sa).
                    let num = a
                        .checked_mul(pow10(u32::from(rs) + u32::from(sb))?)
                        .ok_or_else(overflow)?;
                    let den = b.checked_mul(pow10(u32::from(sa))?).ok_or_else(overflow)?;
                    div_round(num, den)?
                }
                other => return arith_err(format!("{other:?} of decimals")),
            };
            RV::Dec(u, rs)
        }
        _ => return arith_err(format!("cannot compute {x:?} {op:?} {y:?} as {ty}")),
    };
    fit(r, ty)
}

/// `a ^ b` as C's `pow` in doubles gives it, truncated, where that is exact: `None`
/// where the power does not fit i64 or a double does not hold it exactly.
fn pow_exact(a: i64, b: i64) -> Option<i64> {
    if b < 0 {
        // |pow| < 1 truncates to 0, but for 1 and -1; an odd b beyond 2^53 is even as a double.
        let odd = b % 2 != 0 && b >= -(1 << 53);
        return Some(match a {
            1 => 1,
            -1 if odd => -1,
            -1 => 1,
            _ => 0,
        });
    }
    if a == -1 {
        return Some(if b % 2 == 1 && b <= 1 << 53 { -1 } else { 1 });
    }
    if a == 0 || a == 1 || b == 0 {
        return Some(if b == 0 { 1 } else { a });
    }
    let mut r: i128 = 1;
    for _ in 0..b.min(64) {
        r = r.checked_mul(i128::from(a))?;
        if r.unsigned_abs() > 1 << 64 {
            return None;
        }
    }
    let r = i64::try_from(r).ok()?;
    ((r as f64) as i128 == i128::from(r)).then_some(r)
}

/// Soufflé's bitwise and logical operators on 64-bit integers.
fn bits(op: ArithOp, a: i64, b: i64) -> i64 {
    let s = b.rem_euclid(64) as u32;
    match op {
        ArithOp::BitAnd => a & b,
        ArithOp::BitOr => a | b,
        ArithOp::BitXor => a ^ b,
        ArithOp::Shl => a.wrapping_shl(s),
        ArithOp::Shr => a >> s,
        ArithOp::ShrU => (a as u64 >> s) as i64,
        ArithOp::LogAnd => i64::from(a != 0 && b != 0),
        ArithOp::LogOr => i64::from(a != 0 || b != 0),
        _ => i64::from((a != 0) ^ (b != 0)),
    }
}

/// The integer a string starts with, as Soufflé's `to_number` (`to_unsigned`) reads it:
/// `0b`/`0x` prefixes (after a `-` for `to_number`), else decimal after white space and a
/// sign; trailing text ignored.
fn parse_leading_int(s: &str, unsigned: bool) -> Option<i64> {
    if unsigned && s.starts_with('-') {
        return None;
    }
    let (neg_prefix, body) = match s.strip_prefix('-') {
        Some(r) if !unsigned && (r.starts_with("0b") || r.starts_with("0x")) => (true, r),
        _ => (false, s),
    };
    let (radix, text) = if let Some(r) = body.strip_prefix("0b") {
        (2, r)
    } else if body.starts_with("0x") {
        (16, body)
    } else {
        (10, body)
    };
    let t = text.trim_start_matches([' ', '\t', '\n', '\r', '\u{b}', '\u{c}']);
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let t = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(r) if radix == 16 && r.chars().next().is_some_and(|c| c.is_ascii_hexdigit()) => r,
        _ => t,
    };
    let digits: String = t.chars().take_while(|c| c.is_digit(radix)).collect();
    if digits.is_empty() {
        return None;
    }
    let m = u128::from_str_radix(&digits, radix).unwrap_or(u128::MAX);
    let neg = neg != neg_prefix;
    if unsigned {
        let m = u64::try_from(m).ok()?;
        i64::try_from(if neg { m.wrapping_neg() } else { m }).ok()
    } else {
        let v = i128::try_from(m).ok()?;
        i64::try_from(if neg { -v } else { v }).ok()
    }
}

fn call(f: Builtin, vals: &[RV], args: &[CExpr], ty: Type) -> Res<RV> {
    let arg = |i: usize| {
        vals.get(i)
            .ok_or(EvalError::Arith(format!("{f:?} is missing argument {}", i + 1)))
    };
    let r = match f {
        Builtin::Like => RV::Bool(like(str_of(arg(0)?)?, str_of(arg(1)?)?)),
        Builtin::Regex => {
            let r = fox_syntax::souffle::regex::compile_bytes(str_of(arg(1)?)?).map_err(EvalError::Arith)?;
            RV::Bool(r.is_match(str_of(arg(0)?)?.as_bytes()))
        }
        Builtin::Prefix => RV::Bool(str_of(arg(0)?)?.starts_with(str_of(arg(1)?)?)),
        Builtin::Substr => RV::Str(substr(str_of(arg(0)?)?, int_of(arg(1)?)?, int_of(arg(2)?)?)),
        Builtin::Strlen => RV::Int(str_of(arg(0)?)?.chars().count() as i64),
        Builtin::Concat => RV::Str(format!("{}{}", str_of(arg(0)?)?, str_of(arg(1)?)?)),
        Builtin::Year | Builtin::Month | Builtin::Day => {
            let RV::Date(d) = arg(0)? else {
                return arith_err(format!("{f:?} of a non-date"));
            };
            let (y, m, day) = civil_from_days(i64::from(*d));
            RV::Int(match f {
                Builtin::Year => y,
                Builtin::Month => i64::from(m),
                _ => i64::from(day),
            })
        }
        Builtin::Abs => match arg(0)? {
            RV::Int(i) => RV::Int(i.checked_abs().ok_or(EvalError::Arith(format!("abs({i}) overflows")))?),
            RV::Dec(u, s) => RV::Dec(u.abs(), *s),
            RV::Float(x) => RV::Float(x.abs()),
            other => return arith_err(format!("abs of {other:?}")),
        },
        Builtin::Round => {
            let digits = int_of(arg(1)?)?;
            match (arg(0)?, args.first().map(|a| a.ty)) {
                (RV::Dec(u, s), _) => {
                    let to = scale_of(ty);
                    RV::Dec(rescale_exact(*u, *s, to)?, to)
                }
                (RV::Float(x), _) => {
                    let p = 10f64.powi(i32::try_from(digits).unwrap_or(0));
                    RV::Float((x * p).round() / p)
                }
                (RV::Int(i), _) => RV::Int(*i),
                (other, _) => return arith_err(format!("round of {other:?}")),
            }
        }
        Builtin::BitNot => RV::Int(!int_of(arg(0)?)?),
        Builtin::LogNot => RV::Int(i64::from(int_of(arg(0)?)? == 0)),
        Builtin::Unsigned => match int_of(arg(0)?)? {
            x if x >= 0 => RV::Int(x),
            x => return arith_err(format!("unsigned {x} is out of range")),
        },
        Builtin::Min | Builtin::Max => {
            let (a, b) = (arg(0)?, arg(1)?);
            let second = match (a, b) {
                (RV::Str(x), RV::Str(y)) => {
                    if f == Builtin::Max {
                        x < y
                    } else {
                        y < x
                    }
                }
                _ if f == Builtin::Max => compare(a, b)? == Some(Ordering::Less),
                _ => compare(b, a)? == Some(Ordering::Less),
            };
            if second {
                b.clone()
            } else {
                a.clone()
            }
        }
        Builtin::ToString => RV::Str(int_of(arg(0)?)?.to_string()),
        Builtin::ToNumber | Builtin::ToUnsigned => {
            let s = str_of(arg(0)?)?;
            match parse_leading_int(s, f == Builtin::ToUnsigned) {
                Some(n) => RV::Int(n),
                None => return arith_err(format!("{f:?} of {s:?}")),
            }
        }
    };
    fit(r, ty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_matches_sql_patterns() {
        assert!(like("SMALL BRASS", "%BRASS"));
        assert!(!like("SMALL BRASS ", "%BRASS"));
        assert!(like("abc", "a_c"));
        assert!(!like("ac", "a_c"));
        assert!(like("", "%"));
        assert!(!like("", "_"));
        assert!(like("special x requests", "%special%requests%"));
        assert!(like("ünï", "_n_"));
    }

    #[test]
    fn substr_is_one_based_and_clipped() {
        assert_eq!(substr("hello", 1, 2), "he");
        assert_eq!(substr("hello", 4, 10), "lo");
        assert_eq!(substr("hello", 0, 2), "h");
        assert_eq!(substr("hello", 6, 1), "");
        assert_eq!(substr("hello", 2, 0), "");
        assert_eq!(substr("héllo", 2, 2), "él");
    }

    #[test]
    fn division_rounds_half_away_from_zero() {
        assert_eq!(div_round(5, 2).unwrap(), 3);
        assert_eq!(div_round(-5, 2).unwrap(), -3);
        assert_eq!(div_round(5, -2).unwrap(), -3);
        assert_eq!(div_round(7, 3).unwrap(), 2);
        assert_eq!(div_round(-7, 3).unwrap(), -2);
        assert!(div_round(1, 0).is_err());
    }

    #[test]
    fn decimal_arithmetic_is_exact() {
        let d = |u, s| RV::Dec(u, s);
        // 19.99 * 0.90 = 17.9910
        assert_eq!(
            arith(ArithOp::Mul, d(1999, 2), d(90, 2), Type::Decimal(4)).unwrap(),
            d(179_910, 4)
        );
        // 10.00 / 3 = 3.333333
        assert_eq!(
            arith(ArithOp::Div, d(1000, 2), d(3, 0), Type::Decimal(6)).unwrap(),
            d(3_333_333, 6)
        );
        // 2.00 / 3 = 0.666667 (half away)
        assert_eq!(
            arith(ArithOp::Div, d(200, 2), d(3, 0), Type::Decimal(6)).unwrap(),
            d(666_667, 6)
        );
        assert_eq!(
            arith(ArithOp::Add, d(1000, 2), d(125, 3), Type::Decimal(3)).unwrap(),
            d(10_125, 3)
        );
        assert!(arith(ArithOp::Div, d(1, 0), d(0, 2), Type::Decimal(6)).is_err());
        assert!(arith(ArithOp::Add, RV::Int(i64::from(i32::MAX)), RV::Int(1), Type::Int32).is_err());
        assert_eq!(
            arith(ArithOp::Div, RV::Int(-7), RV::Int(2), Type::Int64).unwrap(),
            RV::Int(-3)
        );
    }

    #[test]
    fn conversions_round_and_truncate() {
        assert_eq!(
            convert(RV::Dec(226, 2), Type::Decimal(2), Type::Decimal(1)).unwrap(),
            RV::Dec(23, 1)
        );
        assert_eq!(
            convert(RV::Dec(-225, 2), Type::Decimal(2), Type::Decimal(1)).unwrap(),
            RV::Dec(-23, 1)
        );
        assert_eq!(
            convert(RV::Float(-2.4), Type::Float64, Type::Int64).unwrap(),
            RV::Int(-2)
        );
        assert_eq!(
            convert(RV::Dec(-299, 2), Type::Decimal(2), Type::Int64).unwrap(),
            RV::Int(-2)
        );
        assert!(convert(RV::Float(f64::NAN), Type::Float64, Type::Int64).is_err());
        assert!(convert(RV::Int(i64::MAX), Type::Int64, Type::Decimal(2)).is_err());
    }
}
