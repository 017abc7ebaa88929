//! The first planner: core program → [`RaPlan`].
//!
//! Strata are planned in order. A non-recursive stratum computes each predicate once as
//! the union of its facts and rules. A recursive stratum is evaluated semi-naively: the
//! non-recursive rules initialise the full relations and the deltas, then a loop block
//! evaluates, for every rule and every recursive body atom, the variant that reads that
//! atom's delta and the full relations elsewhere, and merges the new tuples until no
//! delta holds a row.
//!
//! A rule body becomes a join tree: each positive atom is scanned with its constant
//! arguments and repeated variables turned into a selection and its unused columns
//! projected away; the atoms are joined greedily (smallest estimate first, connected
//! atoms before cross products); filters, assignments and negations are applied as soon
//! as their variables are bound. When three or more atoms form a cycle (the body's
//! hypergraph is not α-acyclic) over at most 16 variables, the atoms of the cycle become
//! one [`Op::MultiJoin`]. Planning a body takes time near-linear in its size: the join
//! order's greedy choice and the literals waiting for their variables are indexed by
//! variable, not searched for at every step.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use fox_sema::core::{
    CExpr, CExprKind, CmpOp, Column, CoreLit, CoreProgram, CoreRule, Fact, PredId, Term, Type, Value, VarId,
};
use fox_syntax::ast::Span;
use fox_syntax::diag::Diagnostic;

use crate::error::PlanError;
use crate::ir::*;

/// Estimated rows of a relation of unknown size.
const DEFAULT_ROWS: f64 = 1_000_000.0;
/// Estimated rows of a delta relation: deltas are usually much smaller than full relations.
const DEFAULT_DELTA_ROWS: f64 = 10_000.0;
/// The fraction of rows an equality selection keeps.
const EQ_SELECTIVITY: f64 = 0.1;
/// The most variables a multi-way join binds; a cycle of more is planned as binary joins.
const MAX_MULTIWAY_VARS: usize = 16;

/// Plans a checked core program.
pub fn plan(core: &CoreProgram) -> Result<RaPlan, PlanError> {
    plan_with(core, &PlanOptions::default())
}

/// Choices of the planner a user may override (for experiments and baselines).
#[derive(Clone, Debug)]
pub struct PlanOptions {
    /// Route cyclic bodies to the multi-way join (leapfrog triejoin) where the cycle has at
    /// most 16 variables; `false` plans every body as binary joins.
    pub multiway: bool,
    /// Variables that come first, in this order, in the variable order of every
    /// multi-way join that binds them (the others follow in the planner's order); each
    /// must be bound by some multi-way join of the program.
    pub var_order: Vec<String>,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            multiway: true,
            var_order: Vec::new(),
        }
    }
}

/// [`plan`] with `options`.
pub fn plan_with(core: &CoreProgram, options: &PlanOptions) -> Result<RaPlan, PlanError> {
    let mut p = Planner::new(core)?;
    p.multiway = options.multiway;
    p.var_order = options.var_order.clone();
    p.check_functional_inputs()?;
    for (i, s) in core.strata.iter().enumerate() {
        p.plan_stratum(i, s)?;
    }
    p.plan_outputs()?;
    if let Some(v) = p.var_order.iter().find(|v| !p.ordered.contains(*v)) {
        let bound: Vec<&str> = p.ordered.iter().map(String::as_str).collect();
        return Err(PlanError::Options(if bound.is_empty() {
            format!("--var-order names `{v}`, but the program has no multi-way join")
        } else {
            format!(
                "--var-order names `{v}`, which no multi-way join binds (they bind {})",
                bound.join(", ")
            )
        }));
    }
    let mut plan = p.plan;
    crate::opt::optimize(&mut plan);
    Ok(plan)
}

struct Planner<'a> {
    core: &'a CoreProgram,
    plan: RaPlan,
    /// The full relation of each predicate, indexed by `PredId`.
    full: Vec<RelId>,
    /// The block statements are appended to.
    cur: usize,
    /// See [`PlanOptions::multiway`].
    multiway: bool,
    /// See [`PlanOptions::var_order`].
    var_order: Vec<String>,
    /// The variables of the multi-way joins planned so far.
    ordered: BTreeSet<String>,
    /// The part of the program the operators emitted now compute (see [`Stmt::Let`]).
    origin: Option<Span>,
    /// The number of facts of each predicate, indexed by `PredId`.
    fact_count: Vec<usize>,
}

struct View<'p>(&'p RaPlan);

impl SchemaSource for View<'_> {
    fn relation(&self, id: RelId) -> Option<&RelVar> {
        self.0.relations.get(id.0 as usize)
    }
    fn temp(&self, id: TempId) -> Option<&Schema> {
        self.0.temps.get(id.0 as usize)
    }
}

/// A partial result of a rule body: column `i` of `temp` holds variable `vars[i]`.
#[derive(Clone, Debug)]
struct Unit {
    temp: TempId,
    vars: Vec<VarId>,
    est: f64,
}

fn internal(msg: impl Into<String>) -> PlanError {
    PlanError::Internal(msg.into())
}

fn program_error(d: Diagnostic) -> PlanError {
    PlanError::Program(Box::new(d))
}

impl<'a> Planner<'a> {
    fn new(core: &'a CoreProgram) -> Result<Planner<'a>, PlanError> {
        let mut plan = RaPlan {
            version: PLAN_VERSION,
            relations: Vec::new(),
            temps: Vec::new(),
            blocks: vec![Block {
                label: "start".into(),
                stmts: Vec::new(),
                term: Terminator::Halt,
            }],
            entry: BlockId(0),
        };
        let mut has_rules = vec![false; core.preds.len()];
        let mut has_facts = vec![false; core.preds.len()];
        let mut fact_count = vec![0usize; core.preds.len()];
        for s in &core.strata {
            for r in &s.rules {
                *has_rules
                    .get_mut(r.head.0 as usize)
                    .ok_or_else(|| internal(format!("a rule defines unknown predicate #{}", r.head.0)))? = true;
            }
            for f in &s.facts {
                *has_facts
                    .get_mut(f.pred.0 as usize)
                    .ok_or_else(|| internal(format!("a fact of unknown predicate #{}", f.pred.0)))? = true;
                fact_count[f.pred.0 as usize] += 1;
            }
        }
        let mut input_spec: Vec<Option<&fox_sema::core::InputSpec>> = vec![None; core.preds.len()];
        for s in core.inputs.iter().rev() {
            if let Some(slot) = input_spec.get_mut(s.pred.0 as usize) {
                *slot = Some(s);
            }
        }
        let mut full = Vec::with_capacity(core.preds.len());
        for (i, p) in core.preds.iter().enumerate() {
            let kind = if p.input {
                if has_rules[i] || has_facts[i] {
                    return Err(program_error(
                        Diagnostic::error(
                            format!("`{}` is read with `.input` and also defined in the program", p.name),
                            p.span,
                        )
                        .with_help(
                            "put the extra tuples in a predicate of their own and take the union of both in a rule",
                        ),
                    ));
                }
                let spec = input_spec.get(i).copied().flatten();
                RelKind::Input {
                    file: spec.map_or_else(|| format!("{}.csv", p.name), |s| s.file.clone()),
                    sep: spec.map_or_else(|| ",".to_string(), |s| s.sep.clone()),
                    key: spec.map(|s| s.key.clone()).unwrap_or_default(),
                    header: spec.is_some_and(|s| s.header),
                }
            } else if has_facts[i] && !has_rules[i] {
                RelKind::Facts
            } else {
                RelKind::Derived
            };
            let props = if let RelKind::Input { key, .. } = &kind {
                // A key makes the input a set; its rows still come in file order.
                Props {
                    sorted: Vec::new(),
                    unique: !key.is_empty(),
                }
            } else {
                Props::set(p.columns.len())
            };
            full.push(RelId(plan.relations.len() as u32));
            plan.relations.push(RelVar {
                name: p.name.clone(),
                columns: p.columns.clone(),
                kind,
                props,
            });
        }
        Ok(Planner {
            core,
            plan,
            full,
            cur: 0,
            multiway: true,
            var_order: Vec::new(),
            ordered: BTreeSet::new(),
            origin: None,
            fact_count,
        })
    }

    fn full_rel(&self, p: PredId) -> Result<RelId, PlanError> {
        self.full
            .get(p.0 as usize)
            .copied()
            .ok_or_else(|| internal(format!("unknown predicate #{}", p.0)))
    }

    fn pred_columns(&self, p: PredId) -> Result<&'a [Column], PlanError> {
        self.core
            .preds
            .get(p.0 as usize)
            .map(|i| i.columns.as_slice())
            .ok_or_else(|| internal(format!("unknown predicate #{}", p.0)))
    }

    fn pred_name(&self, p: PredId) -> &'a str {
        self.core.preds.get(p.0 as usize).map_or("?", |i| i.name.as_str())
    }

    fn rel(&self, r: RelId) -> Result<&RelVar, PlanError> {
        self.plan
            .relations
            .get(r.0 as usize)
            .ok_or_else(|| internal(format!("unknown relation r{}", r.0)))
    }

    fn add_rel(&mut self, rel: RelVar) -> RelId {
        self.plan.relations.push(rel);
        RelId(self.plan.relations.len() as u32 - 1)
    }

    fn new_block(&mut self, label: String) -> usize {
        self.plan.blocks.push(Block {
            label,
            stmts: Vec::new(),
            term: Terminator::Halt,
        });
        self.plan.blocks.len() - 1
    }

    fn push(&mut self, s: Stmt) {
        if let Some(b) = self.plan.blocks.get_mut(self.cur) {
            b.stmts.push(s);
        }
    }

    fn set_term(&mut self, block: usize, term: Terminator) {
        if let Some(b) = self.plan.blocks.get_mut(block) {
            b.term = term;
        }
    }

    /// Appends `t := op` to the current block, with the given column names.
    fn emit(&mut self, op: Op, names: Vec<String>) -> Result<TempId, PlanError> {
        self.emit_typed(op, names, None)
    }

    fn emit_typed(&mut self, op: Op, names: Vec<String>, const_types: Option<&[Type]>) -> Result<TempId, PlanError> {
        let (types, props) = op_output(&op, &View(&self.plan), const_types).map_err(internal)?;
        if types.len() != names.len() {
            return Err(internal(format!(
                "{} column names for {} columns",
                names.len(),
                types.len()
            )));
        }
        let id = TempId(self.plan.temps.len() as u32);
        self.plan.temps.push(Schema {
            columns: names
                .into_iter()
                .zip(types)
                .map(|(name, ty)| Column { name, ty })
                .collect(),
            props,
        });
        self.push(Stmt::Let {
            dst: id,
            op,
            origin: self.origin,
        });
        Ok(id)
    }

    fn schema(&self, t: TempId) -> Result<&Schema, PlanError> {
        self.plan
            .temps
            .get(t.0 as usize)
            .ok_or_else(|| internal(format!("unknown temp t{}", t.0)))
    }

    fn col_names(&self, t: TempId) -> Result<Vec<String>, PlanError> {
        Ok(self.schema(t)?.columns.iter().map(|c| c.name.clone()).collect())
    }

    // ----- strata -----

    fn plan_stratum(&mut self, index: usize, s: &fox_sema::core::Stratum) -> Result<(), PlanError> {
        for r in &s.rules {
            if !s.preds.contains(&r.head) {
                return Err(internal(format!(
                    "a rule of `{}` is in the wrong stratum",
                    self.pred_name(r.head)
                )));
            }
        }
        for f in &s.facts {
            if !s.preds.contains(&f.pred) {
                return Err(internal(format!(
                    "a fact of `{}` is in the wrong stratum",
                    self.pred_name(f.pred)
                )));
            }
        }
        match (s.recursive, topo_order(s)) {
            (false, Some(order)) => {
                for p in order {
                    let facts: Vec<&Fact> = s.facts.iter().filter(|f| f.pred == p).collect();
                    let rules: Vec<(&CoreRule, Option<(usize, RelId)>)> =
                        s.rules.iter().filter(|r| r.head == p).map(|r| (r, None)).collect();
                    if let Some(t) = self.plan_pred(p, &facts, &rules)? {
                        let rel = self.full_rel(p)?;
                        self.push(Stmt::Store { rel, src: t });
                        self.check_functional(p, t, s)?;
                    }
                }
                Ok(())
            }
            _ => self.plan_recursive(index, s),
        }
    }

    fn plan_recursive(&mut self, index: usize, s: &fox_sema::core::Stratum) -> Result<(), PlanError> {
        let in_stratum = |p: PredId| s.preds.contains(&p);
        let recursive_atoms = |r: &CoreRule| -> Vec<usize> {
            r.body
                .iter()
                .enumerate()
                .filter(|(_, l)| matches!(l, CoreLit::Atom { pred, .. } if in_stratum(*pred)))
                .map(|(i, _)| i)
                .collect()
        };
        // Relation variables of the loop.
        let mut delta = BTreeMap::new();
        let mut new = BTreeMap::new();
        for &p in &s.preds {
            let of = self.full_rel(p)?;
            let (name, columns) = {
                let r = self.rel(of)?;
                (r.name.clone(), r.columns.clone())
            };
            let arity = columns.len();
            let d = self.add_rel(RelVar {
                name: format!("delta.{name}"),
                columns: columns.clone(),
                kind: RelKind::Delta { of },
                props: Props::set(arity),
            });
            let n = self.add_rel(RelVar {
                name: format!("new.{name}"),
                columns,
                kind: RelKind::New { of },
                props: Props::set(arity),
            });
            delta.insert(p, d);
            new.insert(p, n);
        }
        // Initialisation: facts and the rules without a recursive atom.
        for &p in &s.preds {
            let facts: Vec<&Fact> = s.facts.iter().filter(|f| f.pred == p).collect();
            let mut rules = Vec::new();
            for r in s.rules.iter().filter(|r| r.head == p) {
                if recursive_atoms(r).is_empty() {
                    rules.push((r, None));
                } else if r.aggs.is_some() {
                    return Err(program_error(
                        Diagnostic::error(
                            format!("aggregation inside the recursion of `{}`", self.pred_name(p)),
                            r.span,
                        )
                        .with_help("aggregate over the result of the recursion in a separate rule"),
                    ));
                }
            }
            let full = self.full_rel(p)?;
            if let Some(t) = self.plan_pred(p, &facts, &rules)? {
                self.push(Stmt::Store { rel: full, src: t });
                self.check_functional(p, t, s)?;
            }
        }
        for &p in &s.preds {
            let (dst, src) = (delta[&p], self.full_rel(p)?);
            self.push(Stmt::Assign { dst, src });
        }
        let names: Vec<&str> = s.preds.iter().map(|&p| self.pred_name(p)).collect();
        let body = self.new_block(format!("stratum {index} loop ({})", names.join(", ")));
        self.set_term(self.cur, Terminator::Jump(BlockId(body as u32)));
        self.cur = body;
        // One iteration: new := (∪ variants) − full.
        for &p in &s.preds {
            let mut variants = Vec::new();
            for r in s.rules.iter().filter(|r| r.head == p) {
                for k in recursive_atoms(r) {
                    if let Some(CoreLit::Atom { pred, .. }) = r.body.get(k) {
                        variants.push((r, Some((k, delta[pred]))));
                    }
                }
            }
            let n = new[&p];
            match self.plan_pred(p, &[], &variants)? {
                Some(t) => {
                    let full = self.full_rel(p)?;
                    let names = self.col_names(t)?;
                    let f = self.emit(Op::Scan(full), names.clone())?;
                    let d = self.emit(Op::Difference { left: t, right: f }, names)?;
                    self.push(Stmt::Store { rel: n, src: d });
                }
                None => self.push(Stmt::Clear { rel: n }),
            }
        }
        for &p in &s.preds {
            let into = self.full_rel(p)?;
            self.push(Stmt::Merge { into, from: new[&p] });
            if self.core.preds[p.0 as usize].functional_keys.is_some() {
                let names = self.pred_columns(p)?.iter().map(|c| c.name.clone()).collect();
                let t = self.emit(Op::Scan(into), names)?;
                self.check_functional(p, t, s)?;
            }
        }
        for &p in &s.preds {
            self.push(Stmt::Assign {
                dst: delta[&p],
                src: new[&p],
            });
        }
        let exit = self.new_block(format!("after stratum {index}"));
        self.set_term(
            body,
            Terminator::LoopIf {
                nonempty: s.preds.iter().map(|p| delta[p]).collect(),
                body: BlockId(body as u32),
                exit: BlockId(exit as u32),
            },
        );
        self.cur = exit;
        Ok(())
    }

    /// Adds the run-time check that `t`, the contents of predicate `p` computed by
    /// stratum `s`, gives no key two values, unless `p` is not functional or cannot break
    /// the dependency: facts alone are checked by `fox_sema`, and one aggregation whose
    /// group is part of the key yields one row per key.
    fn check_functional(&mut self, p: PredId, t: TempId, s: &fox_sema::core::Stratum) -> Result<(), PlanError> {
        let info = &self.core.preds[p.0 as usize];
        let Some(keys) = info.functional_keys else {
            return Ok(());
        };
        let rules: Vec<&CoreRule> = s.rules.iter().filter(|r| r.head == p).collect();
        let Some(first) = rules.first() else {
            return Ok(());
        };
        let has_facts = s.facts.iter().any(|f| f.pred == p);
        if let ([r], false) = (rules.as_slice(), has_facts) {
            if aggregation_is_functional(r, keys) {
                return Ok(());
            }
        }
        self.push(Stmt::CheckFunctional {
            src: t,
            keys,
            pred: info.name.clone(),
            origin: first.span,
        });
        Ok(())
    }

    /// Checks the inputs of functional predicates, before anything reads them, unless
    /// their declared key is part of the functional key (then the loader's key check
    /// covers it).
    fn check_functional_inputs(&mut self) -> Result<(), PlanError> {
        for spec in &self.core.inputs {
            let info = &self.core.preds[spec.pred.0 as usize];
            let Some(keys) = info.functional_keys else {
                continue;
            };
            if !spec.key.is_empty() && spec.key.iter().all(|&k| k < keys) {
                continue;
            }
            let rel = self.full_rel(spec.pred)?;
            let names: Vec<String> = info.columns.iter().map(|c| c.name.clone()).collect();
            let t = self.with_origin(spec.span, |p| {
                let t = p.emit(Op::Scan(rel), names.clone())?;
                p.emit(Op::Unique(t), names)
            })?;
            self.push(Stmt::CheckFunctional {
                src: t,
                keys,
                pred: info.name.clone(),
                origin: spec.span,
            });
        }
        Ok(())
    }

    /// The union of a predicate's facts and rule variants, as a set; `None` when it has
    /// neither.
    fn plan_pred(
        &mut self,
        p: PredId,
        facts: &[&Fact],
        rules: &[(&CoreRule, Option<(usize, RelId)>)],
    ) -> Result<Option<TempId>, PlanError> {
        let columns = self.pred_columns(p)?;
        let names: Vec<String> = columns.iter().map(|c| c.name.clone()).collect();
        let types: Vec<Type> = columns.iter().map(|c| c.ty).collect();
        let mut branches = Vec::new();
        if !facts.is_empty() {
            let mut rows = Vec::with_capacity(facts.len());
            for f in facts {
                if f.values.len() != columns.len() {
                    return Err(program_error(Diagnostic::error(
                        format!(
                            "`{}` has {} columns but this fact has {} values",
                            self.pred_name(p),
                            columns.len(),
                            f.values.len()
                        ),
                        f.span,
                    )));
                }
                let mut row = Vec::with_capacity(columns.len());
                for (v, c) in f.values.iter().zip(columns) {
                    row.push(convert_value(v, c.ty).ok_or_else(|| {
                        program_error(Diagnostic::error(
                            format!(
                                "the value {} does not fit column `{}` of `{}`, which has type {}",
                                crate::print::value(v),
                                c.name,
                                self.pred_name(p),
                                c.ty
                            ),
                            f.span,
                        ))
                    })?);
                }
                rows.push(row);
            }
            branches.push(self.emit_typed(Op::Const(rows), names.clone(), Some(&types))?);
        }
        for (r, delta) in rules {
            branches.push(self.plan_rule(r, *delta)?);
        }
        let t = match branches.len() {
            0 => return Ok(None),
            1 => branches[0],
            _ => self.emit(Op::Union(branches), names.clone())?,
        };
        if self.schema(t)?.props.implies(&Props::set(names.len())) {
            return Ok(Some(t));
        }
        // The set of a predicate defined by one rule is that rule's result.
        match (facts, rules) {
            ([], [(rule, _)]) => self.with_origin(rule.span, |p| p.emit(Op::Unique(t), names)).map(Some),
            _ => Ok(Some(self.emit(Op::Unique(t), names)?)),
        }
    }

    // ----- rules -----

    /// Plans one rule (reading the delta relation at body literal `delta.0` when given);
    /// the result has the head predicate's columns and may hold duplicates.
    fn plan_rule(&mut self, rule: &CoreRule, delta: Option<(usize, RelId)>) -> Result<TempId, PlanError> {
        self.with_origin(rule.span, |p| p.plan_rule_ops(rule, delta))
    }

    /// Runs `f` with the operators it emits attributed to `span`.
    fn with_origin<T>(&mut self, span: Span, f: impl FnOnce(&mut Self) -> T) -> T {
        let outer = self.origin.replace(span);
        let r = f(self);
        self.origin = outer;
        r
    }

    fn plan_rule_ops(&mut self, rule: &CoreRule, delta: Option<(usize, RelId)>) -> Result<TempId, PlanError> {
        let with_implied = with_implied_order(rule);
        let rule = &with_implied;
        let mut cx = RuleCx::new(rule);
        let body = self.plan_body(&mut cx, delta)?;
        let head_cols = self.pred_columns(rule.head)?;
        if head_cols.len() != rule.head_args.len() {
            return Err(program_error(Diagnostic::error(
                format!(
                    "`{}` has {} columns but this rule's head has {} arguments",
                    self.pred_name(rule.head),
                    head_cols.len(),
                    rule.head_args.len()
                ),
                rule.span,
            )));
        }
        let (t, vars) = match &rule.aggs {
            None => (body.temp, body.vars),
            Some(aggs) => {
                // The body is an exact bag of its bindings (see `RuleCx::bag`).
                let distinct = body.temp;
                let agg_vars: Vec<VarId> = aggs.iter().map(|a| a.var).collect();
                let mut group_vars = Vec::new();
                for t in &rule.head_args {
                    if let Term::Var(v) = t {
                        if !agg_vars.contains(v) && !group_vars.contains(v) {
                            group_vars.push(*v);
                        }
                    }
                }
                let mut group = Vec::new();
                for v in &group_vars {
                    group.push(cx.position(&body.vars, *v, rule.span)?);
                }
                let mut calls = Vec::new();
                for a in aggs {
                    let arg = match &a.arg {
                        Some(e) => Some(cx.lower(e, &body.vars)?),
                        None => None,
                    };
                    calls.push(AggCall {
                        func: a.func,
                        arg,
                        ty: cx.var_type(a.var)?,
                    });
                }
                let mut out_vars = group_vars.clone();
                out_vars.extend(&agg_vars);
                let names = out_vars.iter().map(|&v| cx.var_name(v)).collect();
                let t = self.emit(
                    Op::Aggregate {
                        input: distinct,
                        group,
                        aggs: calls,
                    },
                    names,
                )?;
                (t, out_vars)
            }
        };
        // The head: one expression per column of the predicate.
        let mut exprs = Vec::with_capacity(head_cols.len());
        for (term, col) in rule.head_args.iter().zip(head_cols) {
            exprs.push(match term {
                Term::Var(v) => {
                    let pos = cx.position(&vars, *v, rule.span)?;
                    let from = cx.var_type(*v)?;
                    coerce(Expr::col(pos, from), col.ty).ok_or_else(|| {
                        program_error(Diagnostic::error(
                            format!(
                                "`{}` has type {from}, but column `{}` of `{}` has type {}",
                                cx.var_name(*v),
                                col.name,
                                self.pred_name(rule.head),
                                col.ty
                            ),
                            rule.span,
                        ))
                    })?
                }
                Term::Const(c) => Expr::constant(convert_value(c, col.ty).ok_or_else(|| {
                    program_error(Diagnostic::error(
                        format!(
                            "the value {} does not fit column `{}` of `{}`, which has type {}",
                            crate::print::value(c),
                            col.name,
                            self.pred_name(rule.head),
                            col.ty
                        ),
                        rule.span,
                    ))
                })?),
            });
        }
        let names: Vec<String> = head_cols.iter().map(|c| c.name.clone()).collect();
        self.project_or_map(t, exprs, names)
    }

    /// `Project` when every expression is a plain column, `Map` otherwise; nothing when
    /// the expressions are the input's columns in order.
    fn project_or_map(&mut self, t: TempId, exprs: Vec<Expr>, names: Vec<String>) -> Result<TempId, PlanError> {
        let cols: Option<Vec<usize>> = exprs
            .iter()
            .map(|e| match e.kind {
                ExprKind::Col(i) => Some(i),
                _ => None,
            })
            .collect();
        match cols {
            // Column names are labels only: a projection that would just rename is left out.
            Some(cols) if cols.iter().copied().eq(0..self.schema(t)?.columns.len()) => Ok(t),
            Some(cols) => self.emit(Op::Project { input: t, cols }, names),
            None => self.emit(Op::Map { input: t, exprs }, names),
        }
    }

    fn plan_body(&mut self, cx: &mut RuleCx, delta: Option<(usize, RelId)>) -> Result<Unit, PlanError> {
        let rule = cx.rule;
        // Atoms on a cycle go to one multi-way join.
        let edges: Vec<BTreeSet<VarId>> = rule
            .body
            .iter()
            .filter_map(|lit| match lit {
                CoreLit::Atom { args, .. } => Some(term_vars(args).collect()),
                _ => None,
            })
            .collect();
        let mut core = cyclic_core(&edges);
        // The variables at the key columns of each atom (every column of a relation without
        // a declared key).
        let mut keys: Vec<BTreeSet<VarId>> = Vec::new();
        for (i, lit) in rule.body.iter().enumerate() {
            if let CoreLit::Atom { pred, args, .. } = lit {
                let rel = match delta {
                    Some((k, d)) if k == i => d,
                    _ => self.full_rel(*pred)?,
                };
                let key: Vec<usize> = match &self.rel(rel)?.kind {
                    RelKind::Input { key, .. } if !key.is_empty() => key.clone(),
                    _ => (0..args.len()).collect(),
                };
                keys.push(
                    key.iter()
                        .filter_map(|&k| match args.get(k) {
                            Some(Term::Var(v)) => Some(*v),
                            _ => None,
                        })
                        .collect(),
                );
            }
        }
        // No multi-way join when the cycle binds more than `MAX_MULTIWAY_VARS` variables
        // (the join nests one loop per variable, and the kernel plan's analyses grow faster
        // than linearly in that depth), nor when, joined in the right order, every atom of
        // the cycle but the first is found by its key (binary joins then never grow past
        // the first atom).
        let too_wide = || {
            let vars: BTreeSet<VarId> = core.iter().flat_map(|&a| edges[a].iter().copied()).collect();
            vars.len() > MAX_MULTIWAY_VARS
        };
        if core.len() >= 3 && (!self.multiway || too_wide() || key_lookup_order(&core, &edges, &keys)) {
            core.clear();
        }
        let multi = core.len() >= 3;
        let mut in_core = vec![false; edges.len()];
        for &a in &core {
            in_core[a] = true;
        }
        // Access paths for the positive atoms.
        let mut atoms: Vec<(usize, Unit)> = Vec::new();
        for (i, lit) in rule.body.iter().enumerate() {
            if let CoreLit::Atom { pred, args, span } = lit {
                let (rel, is_delta) = match delta {
                    Some((k, d)) if k == i => (d, true),
                    _ => (self.full_rel(*pred)?, false),
                };
                // The multi-way join treats its inputs as sets: in a bag, they keep their key
                // variables so that no binding is lost.
                let keep_all = cx.bag && multi && in_core[atoms.len()];
                let key = &keys[atoms.len()];
                let needed = |v: VarId| cx.is_needed_except(v, i) || (keep_all && key.contains(&v));
                let mut u = self.access(cx, *pred, args, *span, rel, is_delta, &needed)?;
                cx.set_applied(i, true);
                if keep_all {
                    // Filters over this atom's variables alone apply before the join; the
                    // atom keeps all its columns.
                    u = self.apply_filters(cx, u)?;
                } else {
                    // Filters, assignments and negations over this atom's variables alone
                    // apply before any join.
                    u = self.apply_ready(cx, u)?;
                }
                cx.set_applied(i, false);
                atoms.push((i, u));
            }
        }
        let mut cur = None;
        if core.len() >= 3 {
            for &a in &core {
                cx.set_applied(atoms[a].0, true);
            }
            let inputs: Vec<Unit> = core.iter().map(|&a| atoms[a].1.clone()).collect();
            cur = Some(self.multi_join(cx, &inputs)?);
        }
        let mut rest: Vec<(usize, Unit)> = atoms
            .into_iter()
            .enumerate()
            .filter(|(a, _)| !multi || !in_core[*a])
            .map(|(_, x)| x)
            .collect();
        let mut cur = match cur {
            Some(u) => u,
            None => {
                let start = rest
                    .iter()
                    .enumerate()
                    .min_by(|(_, a), (_, b)| a.1.est.total_cmp(&b.1.est))
                    .map(|(i, _)| i);
                match start {
                    Some(i) => {
                        let (lit, u) = rest.remove(i);
                        cx.set_applied(lit, true);
                        u
                    }
                    None => {
                        // No positive atom: one empty binding.
                        let t = self.emit_typed(Op::Const(vec![Vec::new()]), Vec::new(), Some(&[]))?;
                        Unit {
                            temp: t,
                            vars: Vec::new(),
                            est: 1.0,
                        }
                    }
                }
            }
        };
        cur = self.apply_ready(cx, cur)?;
        let mut choice = JoinChoice::new(cx, &rest);
        let mut rest: Vec<Option<(usize, Unit)>> = rest.into_iter().map(Some).collect();
        while let Some(next) = choice.next(cx, &cur.vars) {
            let Some((lit, u)) = rest.get_mut(next).and_then(Option::take) else {
                return Err(internal("an atom of a rule body was joined twice"));
            };
            cx.set_applied(lit, true);
            cur = self.join(cx, cur, u)?;
            cur = self.apply_ready(cx, cur)?;
        }
        if let Some((i, lit)) = rule.body.iter().enumerate().find(|(i, _)| !cx.applied[*i]) {
            let unbound = cx.lit_vars(lit).into_iter().find(|v| !cur.vars.contains(v));
            let span = lit_span(lit);
            let name = unbound.map_or_else(|| "?".to_string(), |v| cx.var_name(v));
            return Err(program_error(
                Diagnostic::error(
                    format!("variable `{name}` is not bound by a positive atom or an assignment"),
                    span,
                )
                .with_label(format!("literal {} of this rule cannot be evaluated", i + 1)),
            ));
        }
        Ok(cur)
    }

    /// Scans an atom's relation, selects on its constants and repeated variables, and keeps
    /// one column per distinct variable in `needed`.
    #[allow(clippy::too_many_arguments)]
    fn access(
        &mut self,
        cx: &RuleCx,
        pred: PredId,
        args: &[Term],
        span: Span,
        rel: RelId,
        is_delta: bool,
        needed: &dyn Fn(VarId) -> bool,
    ) -> Result<Unit, PlanError> {
        let (columns, kind) = {
            let r = self.rel(rel)?;
            (r.columns.clone(), r.kind.clone())
        };
        if columns.len() != args.len() {
            return Err(program_error(Diagnostic::error(
                format!(
                    "`{}` has {} columns but is used with {} arguments",
                    self.pred_name(pred),
                    columns.len(),
                    args.len()
                ),
                span,
            )));
        }
        let mut est = if is_delta {
            DEFAULT_DELTA_ROWS
        } else if kind == RelKind::Facts {
            self.fact_count.get(pred.0 as usize).copied().unwrap_or(0) as f64
        } else {
            DEFAULT_ROWS
        };
        let names: Vec<String> = columns.iter().map(|c| c.name.clone()).collect();
        let mut t = self.emit(Op::Scan(rel), names.clone())?;
        let mut conds = Vec::new();
        // Each variable's first column, in column order.
        let mut first: Vec<(VarId, usize)> = Vec::new();
        let mut first_col: HashMap<VarId, usize> = HashMap::new();
        for (j, (arg, col)) in args.iter().zip(&columns).enumerate() {
            match arg {
                Term::Const(v) => {
                    let c = Expr::col(j, col.ty);
                    let cond = match convert_value(v, col.ty) {
                        Some(v) => Expr::cmp(CmpOp::Eq, c, Expr::constant(v)),
                        None => {
                            let k = Expr::constant(v.clone());
                            let c = coerce(c, k.ty).ok_or_else(|| {
                                program_error(
                                    Diagnostic::error(
                                        format!(
                                            "the value {} can never equal column `{}` of `{}`, which has type {}",
                                            crate::print::value(v),
                                            col.name,
                                            self.pred_name(pred),
                                            col.ty
                                        ),
                                        span,
                                    )
                                    .with_label(format!(
                                        "argument {} has type {}",
                                        j + 1,
                                        k.ty
                                    )),
                                )
                            })?;
                            Expr::cmp(CmpOp::Eq, c, k)
                        }
                    };
                    conds.push(cond);
                    est *= EQ_SELECTIVITY;
                }
                Term::Var(v) => match first_col.get(v) {
                    Some(&p) => {
                        conds.push(Expr::cmp(CmpOp::Eq, Expr::col(p, columns[p].ty), Expr::col(j, col.ty)));
                        est *= EQ_SELECTIVITY;
                    }
                    None => {
                        first_col.insert(*v, j);
                        first.push((*v, j));
                    }
                },
            }
        }
        if !conds.is_empty() {
            t = self.emit(
                Op::Select {
                    input: t,
                    pred: Expr::and(conds),
                },
                names,
            )?;
        }
        if cx.bag && !self.schema(t)?.props.unique {
            // An input without a key may hold a row twice; a binding is one row.
            t = self.emit(Op::Unique(t), self.col_names(t)?)?;
        }
        let mut vars = Vec::new();
        let mut exprs = Vec::new();
        for &(v, j) in &first {
            if !cx.keep_all && !needed(v) {
                continue;
            }
            let want = cx.var_type(v)?;
            let col = &columns[j];
            exprs.push(coerce(Expr::col(j, col.ty), want).ok_or_else(|| {
                program_error(Diagnostic::error(
                    format!(
                        "`{}` has type {want}, but column `{}` of `{}` has type {}",
                        cx.var_name(v),
                        col.name,
                        self.pred_name(pred),
                        col.ty
                    ),
                    span,
                ))
            })?);
            vars.push(v);
        }
        let names = vars.iter().map(|&v| cx.var_name(v)).collect();
        let temp = self.project_or_map(t, exprs, names)?;
        Ok(Unit { temp, vars, est })
    }

    fn multi_join(&mut self, cx: &RuleCx, inputs: &[Unit]) -> Result<Unit, PlanError> {
        let mut order: Vec<VarId> = Vec::new();
        let mut seen: HashSet<VarId> = HashSet::new();
        for u in inputs {
            for v in &u.vars {
                if seen.insert(*v) {
                    order.push(*v);
                }
            }
        }
        // Variables named by `var_order` first, in its order; the rest keep theirs.
        let ranks: BTreeMap<&str, usize> = self
            .var_order
            .iter()
            .enumerate()
            .rev()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        let rank = |v: &VarId| ranks.get(cx.var_name(*v).as_str()).copied().unwrap_or(usize::MAX);
        order.sort_by_key(rank);
        for v in &order {
            self.ordered.insert(cx.var_name(*v));
        }
        let pos: BTreeMap<VarId, usize> = order.iter().enumerate().map(|(i, v)| (*v, i)).collect();
        let output_vars: Vec<VarId> = order
            .iter()
            .copied()
            .filter(|v| cx.keep_all || cx.bag || cx.is_needed(*v))
            .collect();
        let mut mj_inputs = Vec::new();
        for u in inputs {
            let vars = u.vars.iter().map(|v| pos.get(v).copied().unwrap_or(0)).collect();
            mj_inputs.push(MultiJoinInput { src: u.temp, vars });
        }
        let mut vars = Vec::new();
        for &v in &order {
            vars.push(Column {
                name: cx.var_name(v),
                ty: cx.var_type(v)?,
            });
        }
        let output = output_vars.iter().map(|v| pos.get(v).copied().unwrap_or(0)).collect();
        let names = output_vars.iter().map(|&v| cx.var_name(v)).collect();
        let temp = self.emit(
            Op::MultiJoin {
                vars,
                inputs: mj_inputs,
                output,
                count: false,
            },
            names,
        )?;
        let est = inputs.iter().map(|u| u.est).fold(f64::INFINITY, f64::min);
        Ok(Unit {
            temp,
            vars: output_vars,
            est,
        })
    }

    /// Joins `right` into `cur`, keeping the variables still needed.
    fn join(&mut self, cx: &mut RuleCx, cur: Unit, right: Unit) -> Result<Unit, PlanError> {
        let est = cur.est.min(right.est);
        if cur.vars.is_empty() && !right.vars.is_empty() && (!cx.bag || self.schema(cur.temp)?.props.unique) {
            // `cur` only says whether the body can hold at all.
            let t = self.emit(
                Op::SemiJoin {
                    left: right.temp,
                    right: cur.temp,
                    left_keys: Vec::new(),
                    right_keys: Vec::new(),
                },
                self.col_names(right.temp)?,
            )?;
            return self.trim(
                cx,
                Unit {
                    temp: t,
                    vars: right.vars,
                    est,
                },
            );
        }
        let mut left_keys = Vec::new();
        let mut right_keys = Vec::new();
        for (j, v) in right.vars.iter().enumerate() {
            if let Some(i) = cur.vars.iter().position(|w| w == v) {
                left_keys.push(i);
                right_keys.push(j);
            }
        }
        let shares_all = right_keys.len() == right.vars.len();
        // Equalities between an expression of each side (`x = y::int64`) are join keys
        // too; their expressions become extra columns where they are not plain columns.
        let links = cx.eq_links(&cur.vars, &right.vars);
        for (i, _, _) in &links {
            cx.set_applied(*i, true);
        }
        let (cur, lk) = self.key_columns(cx, cur, links.iter().map(|l| l.1))?;
        let (right, rk) = self.key_columns(cx, right, links.iter().map(|l| l.2))?;
        left_keys.extend(lk);
        right_keys.extend(rk);
        let keep = |v: &VarId| cx.keep_all || cx.is_needed(*v);
        if shares_all && (!cx.bag || self.schema(right.temp)?.props.unique) {
            // Every variable of `right` is bound already: it only filters.
            let t = self.emit(
                Op::SemiJoin {
                    left: cur.temp,
                    right: right.temp,
                    left_keys,
                    right_keys,
                },
                self.col_names(cur.temp)?,
            )?;
            return self.trim(
                cx,
                Unit {
                    temp: t,
                    vars: cur.vars,
                    est,
                },
            );
        }
        let mut output = Vec::new();
        let mut vars = Vec::new();
        for (i, v) in cur.vars.iter().enumerate() {
            if keep(v) {
                output.push(JoinCol {
                    side: Side::Left,
                    col: i,
                });
                vars.push(*v);
            }
        }
        for (j, v) in right.vars.iter().enumerate() {
            if keep(v) && !cur.vars.contains(v) {
                output.push(JoinCol {
                    side: Side::Right,
                    col: j,
                });
                vars.push(*v);
            }
        }
        let names = vars.iter().map(|&v| cx.var_name(v)).collect();
        let temp = self.emit(
            Op::Join {
                left: cur.temp,
                right: right.temp,
                left_keys,
                right_keys,
                output,
            },
            names,
        )?;
        Ok(Unit { temp, vars, est })
    }

    /// Appends a column for each key expression that is not a plain column of `u`;
    /// returns the key column of each expression.
    fn key_columns<'e>(
        &mut self,
        cx: &RuleCx,
        u: Unit,
        exprs: impl Iterator<Item = &'e CExpr>,
    ) -> Result<(Unit, Vec<usize>), PlanError> {
        let arity = self.schema(u.temp)?.columns.len();
        let mut keys = Vec::new();
        let mut computed = Vec::new();
        for e in exprs {
            let e = cx.lower(e, &u.vars)?;
            match e.kind {
                ExprKind::Col(i) => keys.push(i),
                _ => {
                    keys.push(arity + computed.len());
                    computed.push(e);
                }
            }
        }
        if computed.is_empty() {
            return Ok((u, keys));
        }
        let mut names = self.col_names(u.temp)?;
        let mut exprs: Vec<Expr> = self
            .schema(u.temp)?
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| Expr::col(i, c.ty))
            .collect();
        for (k, e) in computed.into_iter().enumerate() {
            names.push(format!("$key{k}"));
            exprs.push(e);
        }
        let temp = self.emit(Op::Map { input: u.temp, exprs }, names)?;
        Ok((Unit { temp, ..u }, keys))
    }

    /// Projects away the variables nothing later needs (and any key columns).
    fn trim(&mut self, cx: &RuleCx, u: Unit) -> Result<Unit, PlanError> {
        let arity = self.schema(u.temp)?.columns.len();
        if arity == u.vars.len() && (cx.keep_all || u.vars.iter().all(|v| cx.is_needed(*v))) {
            return Ok(u);
        }
        let (cols, vars): (Vec<usize>, Vec<VarId>) = u
            .vars
            .iter()
            .enumerate()
            .filter(|(_, v)| cx.keep_all || cx.is_needed(**v))
            .map(|(i, v)| (i, *v))
            .unzip();
        let names = vars.iter().map(|&v| cx.var_name(v)).collect();
        let temp = self.emit(Op::Project { input: u.temp, cols }, names)?;
        Ok(Unit { temp, vars, est: u.est })
    }

    /// Applies, in one selection, the filters among `ready` (pending literals whose
    /// variables `cur` binds, in body order); returns whether there was one.
    fn select_ready(&mut self, cx: &mut RuleCx, cur: &mut Unit, ready: &[usize]) -> Result<bool, PlanError> {
        let rule = cx.rule;
        let mut conds = Vec::new();
        let mut spans = Vec::new();
        for &i in ready {
            if let Some(CoreLit::Filter { cond, span }) = rule.body.get(i) {
                if !cx.applied[i] {
                    conds.push(cx.lower(cond, &cur.vars)?);
                    spans.push(*span);
                    cx.set_applied(i, true);
                }
            }
        }
        if conds.is_empty() {
            return Ok(false);
        }
        let names = self.col_names(cur.temp)?;
        let op = Op::Select {
            input: cur.temp,
            pred: Expr::and(conds),
        };
        cur.temp = match spans.as_slice() {
            [one] => self.with_origin(*one, |p| p.emit(op, names))?,
            _ => self.emit(op, names)?,
        };
        cur.est *= EQ_SELECTIVITY;
        Ok(true)
    }

    /// The filters `cur` binds, and nothing else (its columns stay).
    fn apply_filters(&mut self, cx: &mut RuleCx, mut cur: Unit) -> Result<Unit, PlanError> {
        let ready = cx.ready(&cur.vars, None);
        self.select_ready(cx, &mut cur, &ready)?;
        Ok(cur)
    }

    /// Applies every filter, assignment and negation whose variables are bound, until none
    /// is: in each round, the filters at once, then the negations in body order, then the
    /// assignments in body order (each sees the columns the ones before it added).
    fn apply_ready(&mut self, cx: &mut RuleCx, mut cur: Unit) -> Result<Unit, PlanError> {
        let rule = cx.rule;
        loop {
            let ready = cx.ready(&cur.vars, None);
            // Filters, all at once.
            let mut progress = self.select_ready(cx, &mut cur, &ready)?;
            // Negations.
            for &i in &ready {
                if let Some(CoreLit::NotAtom { pred, args, span }) = rule.body.get(i) {
                    if !cx.applied[i] {
                        cx.set_applied(i, true);
                        cur = self.anti_join(cx, cur, *pred, args, *span)?;
                        progress = true;
                    }
                }
            }
            // Assignments, one at a time in body order (each adds a column): `todo` holds
            // the pending ones whose expression's variables are bound; the pass goes on
            // from the one after the last applied.
            let mut todo: BTreeSet<usize> = ready
                .iter()
                .copied()
                .filter(|&i| matches!(rule.body.get(i), Some(CoreLit::Assign { .. })))
                .collect();
            let mut from = 0;
            while let Some(&i) = todo.range(from..).next() {
                todo.remove(&i);
                from = i + 1;
                let Some(CoreLit::Assign { var, expr, span }) = rule.body.get(i) else {
                    continue;
                };
                if cx.applied[i] {
                    continue;
                }
                let added = !cur.vars.contains(var);
                cx.set_applied(i, true);
                cur = self.assign(cx, cur, *var, expr, *span)?;
                progress = true;
                if added {
                    for j in cx.ready(&cur.vars, Some(&[*var])) {
                        if matches!(rule.body.get(j), Some(CoreLit::Assign { .. })) {
                            todo.insert(j);
                        }
                    }
                }
            }
            if !progress {
                break;
            }
        }
        self.trim(cx, cur)
    }

    fn assign(&mut self, cx: &RuleCx, cur: Unit, var: VarId, expr: &CExpr, span: Span) -> Result<Unit, PlanError> {
        self.with_origin(span, |p| p.assign_ops(cx, cur, var, expr, span))
    }

    fn assign_ops(&mut self, cx: &RuleCx, cur: Unit, var: VarId, expr: &CExpr, span: Span) -> Result<Unit, PlanError> {
        let e = cx.lower(expr, &cur.vars)?;
        let want = cx.var_type(var)?;
        if let Some(p) = cur.vars.iter().position(|v| *v == var) {
            // Already bound: the assignment is an equality test.
            let c = Expr::col(p, want);
            let (a, b) = match (coerce(c.clone(), e.ty), coerce(e.clone(), want)) {
                (_, Some(e2)) => (c, e2),
                (Some(c2), None) => (c2, e),
                (None, None) => {
                    return Err(program_error(Diagnostic::error(
                        format!(
                            "`{}` has type {want} and cannot equal a value of type {}",
                            cx.var_name(var),
                            e.ty
                        ),
                        span,
                    )))
                }
            };
            let temp = self.emit(
                Op::Select {
                    input: cur.temp,
                    pred: Expr::cmp(CmpOp::Eq, a, b),
                },
                self.col_names(cur.temp)?,
            )?;
            return Ok(Unit { temp, ..cur });
        }
        let ety = e.ty;
        let e = coerce(e, want).ok_or_else(|| {
            program_error(Diagnostic::error(
                format!(
                    "`{}` has type {want} but is assigned a value of type {ety}",
                    cx.var_name(var)
                ),
                span,
            ))
        })?;
        // The map also drops the columns nothing later needs.
        let mut exprs = Vec::new();
        let mut vars = Vec::new();
        for (i, (v, c)) in cur.vars.iter().zip(&self.schema(cur.temp)?.columns).enumerate() {
            if cx.keep_all || cx.is_needed(*v) {
                exprs.push(Expr::col(i, c.ty));
                vars.push(*v);
            }
        }
        exprs.push(e);
        vars.push(var);
        let names = vars.iter().map(|&v| cx.var_name(v)).collect();
        let temp = self.emit(Op::Map { input: cur.temp, exprs }, names)?;
        Ok(Unit {
            temp,
            vars,
            est: cur.est,
        })
    }

    fn anti_join(
        &mut self,
        cx: &RuleCx,
        cur: Unit,
        pred: PredId,
        args: &[Term],
        span: Span,
    ) -> Result<Unit, PlanError> {
        let rel = self.full_rel(pred)?;
        let neg = self.access(cx, pred, args, span, rel, false, &|_| true)?;
        let mut left_keys = Vec::new();
        for v in &neg.vars {
            left_keys.push(cur.vars.iter().position(|w| w == v).ok_or_else(|| {
                program_error(Diagnostic::error(
                    format!(
                        "variable `{}` of a negated atom is not bound by a positive atom",
                        cx.var_name(*v)
                    ),
                    span,
                ))
            })?);
        }
        let names = self.col_names(cur.temp)?;
        let temp = self.emit(
            Op::AntiJoin {
                left: cur.temp,
                right: neg.temp,
                right_keys: (0..left_keys.len()).collect(),
                left_keys,
            },
            names,
        )?;
        Ok(Unit { temp, ..cur })
    }

    // ----- outputs -----

    fn plan_outputs(&mut self) -> Result<(), PlanError> {
        for o in &self.core.outputs {
            // An output's operators (its duplicate removal, order and limit) come from its
            // directive: their errors point there.
            let outer = self.origin.replace(o.span);
            let r = self.plan_output(o);
            self.origin = outer;
            r?;
        }
        Ok(())
    }

    fn plan_output(&mut self, o: &fox_sema::core::OutputSpec) -> Result<(), PlanError> {
        {
            let rel = self.full_rel(o.pred)?;
            let (columns, props) = {
                let r = self.rel(rel)?;
                (r.columns.clone(), r.props.clone())
            };
            let names: Vec<String> = columns.iter().map(|c| c.name.clone()).collect();
            let mut t = self.emit(Op::Scan(rel), names.clone())?;
            if !props.unique {
                t = self.emit(Op::Unique(t), names.clone())?;
            }
            let mut keys = Vec::new();
            for &(col, desc) in &o.order_by {
                if col >= columns.len() {
                    return Err(program_error(Diagnostic::error(
                        format!("`{}` has no column {}", self.pred_name(o.pred), col + 1),
                        o.span,
                    )));
                }
                if !keys.iter().any(|k: &SortKey| k.col == col) {
                    keys.push(SortKey { col, desc });
                }
            }
            // The remaining columns break ties, so the order is total and deterministic.
            for col in 0..columns.len() {
                if !keys.iter().any(|k| k.col == col) {
                    keys.push(SortKey::asc(col));
                }
            }
            if !self.schema(t)?.props.sorted.starts_with(&keys) {
                t = self.emit(Op::Sort { input: t, keys }, names.clone())?;
            }
            if let Some(n) = o.limit {
                t = self.emit(Op::Limit { input: t, n }, names)?;
            }
            self.push(Stmt::Output { rel, src: t });
        }
        Ok(())
    }
}

/// Per-rule planning state.
struct RuleCx<'r> {
    rule: &'r CoreRule,
    /// Which body literals the partial result already reflects.
    applied: Vec<bool>,
    /// Keep every body variable (no projection of the body).
    keep_all: bool,
    /// Aggregation rules: the aggregate runs over the distinct bindings of all body
    /// variables. The body is planned as an exact bag of those bindings instead of keeping
    /// every variable: each atom is made a set of its rows (a no-op for sets), and then
    /// projections keep duplicates and joins multiply them, so every binding is one row
    /// however few of its variables remain; only a semi-join against something that is
    /// not known to be a set would lose rows, and the planner joins instead.
    bag: bool,
    /// The distinct variables of each body literal.
    lit_vars: Vec<Vec<VarId>>,
    /// Per variable: the literals not yet applied that read it, plus one when the head or
    /// an aggregate reads it (so a variable is needed while its count is positive).
    need: Vec<u32>,
    /// The equality filters `a = b` between expressions of one type, with their variables.
    eqs: Vec<(usize, Vec<VarId>, Vec<VarId>)>,
    /// Per variable: the entries of `eqs` that read it, less those found applied.
    eqs_by_var: Vec<Vec<usize>>,
    /// Per body literal that is not an atom: the variables that must be bound to apply it
    /// (a filter's and a negation's, an assignment's expression's), sorted and distinct.
    ready_vars: Vec<Vec<VarId>>,
    /// Per variable: the non-atom literals it watches. Every pending non-atom literal with
    /// variables is in the list of exactly one of its `ready_vars` (a literal found applied
    /// is dropped from it), so one that a set of variables binds is in the list of one of
    /// them; when a scan finds a literal not bound, it moves it to a variable the set lacks.
    watch: Vec<Vec<usize>>,
    /// The non-atom literals without variables (ready anywhere), less those found applied.
    unwatched: Vec<usize>,
    /// `mark[v] == epoch`: `v` is in the set of variables of the current scan.
    mark: Vec<u32>,
    epoch: u32,
    /// The literals in the order they became applied.
    applied_log: Vec<usize>,
}

impl<'r> RuleCx<'r> {
    fn new(rule: &'r CoreRule) -> RuleCx<'r> {
        let mut need = vec![0u32; rule.vars.len()];
        fn count(v: VarId, need: &mut Vec<u32>) {
            let i = v.0 as usize;
            if i >= need.len() {
                need.resize(i + 1, 0);
            }
            need[i] += 1;
        }
        let mut head: Vec<VarId> = term_vars(&rule.head_args).collect();
        if let Some(aggs) = &rule.aggs {
            for a in aggs {
                if let Some(e) = &a.arg {
                    collect_vars(e, &mut head);
                }
            }
        }
        head.sort_unstable();
        head.dedup();
        for v in head {
            count(v, &mut need);
        }
        let mut lit_vars = Vec::with_capacity(rule.body.len());
        let mut eqs = Vec::new();
        for (i, lit) in rule.body.iter().enumerate() {
            let mut vs = literal_vars(lit);
            vs.sort_unstable();
            vs.dedup();
            for &v in &vs {
                count(v, &mut need);
            }
            lit_vars.push(vs);
            if let CoreLit::Filter { cond, .. } = lit {
                if let CExprKind::Cmp(CmpOp::Eq, a, b) = &cond.kind {
                    if a.ty == b.ty {
                        let (mut va, mut vb) = (Vec::new(), Vec::new());
                        collect_vars(a, &mut va);
                        collect_vars(b, &mut vb);
                        eqs.push((i, va, vb));
                    }
                }
            }
        }
        let nvars = need.len();
        let mut eqs_by_var: Vec<Vec<usize>> = vec![Vec::new(); nvars];
        for (k, (_, va, vb)) in eqs.iter().enumerate() {
            let mut vs: Vec<VarId> = va.iter().chain(vb).copied().collect();
            vs.sort_unstable();
            vs.dedup();
            for v in vs {
                eqs_by_var[v.0 as usize].push(k);
            }
        }
        let mut ready_vars = Vec::with_capacity(rule.body.len());
        let mut watch: Vec<Vec<usize>> = vec![Vec::new(); nvars];
        let mut unwatched = Vec::new();
        for (i, lit) in rule.body.iter().enumerate() {
            let vs = match lit {
                CoreLit::Atom { .. } => Vec::new(),
                CoreLit::Filter { .. } | CoreLit::NotAtom { .. } => lit_vars[i].clone(),
                CoreLit::Assign { expr, .. } => {
                    let mut vs = Vec::new();
                    collect_vars(expr, &mut vs);
                    vs.sort_unstable();
                    vs.dedup();
                    vs
                }
            };
            if !matches!(lit, CoreLit::Atom { .. }) {
                match vs.first() {
                    Some(v) => watch[v.0 as usize].push(i),
                    None => unwatched.push(i),
                }
            }
            ready_vars.push(vs);
        }
        RuleCx {
            rule,
            applied: vec![false; rule.body.len()],
            keep_all: false,
            bag: rule.aggs.is_some(),
            lit_vars,
            need,
            eqs,
            eqs_by_var,
            ready_vars,
            watch,
            unwatched,
            mark: vec![0; nvars],
            epoch: 0,
            applied_log: Vec::new(),
        }
    }

    /// Starts a scan over the variables `vars`: afterwards `self.marked(v)` tells whether
    /// `v` is one of them.
    fn mark_vars(&mut self, vars: &[VarId]) {
        if self.epoch == u32::MAX {
            self.mark.iter_mut().for_each(|m| *m = 0);
            self.epoch = 0;
        }
        self.epoch += 1;
        for v in vars {
            let i = v.0 as usize;
            if i >= self.mark.len() {
                self.mark.resize(i + 1, 0);
                self.watch.resize(i + 1, Vec::new());
                self.eqs_by_var.resize(i + 1, Vec::new());
            }
            self.mark[i] = self.epoch;
        }
    }

    fn marked(&self, v: VarId) -> bool {
        self.mark.get(v.0 as usize) == Some(&self.epoch)
    }

    /// The pending non-atom literals whose variables `vars` all binds, in body order.
    /// With `scan`, only those watched by the variables of `scan` (and found bound) are
    /// returned: after the variables of `scan` joined a set of variables whose ready
    /// literals are all known, these are the ones that became ready.
    fn ready(&mut self, vars: &[VarId], scan: Option<&[VarId]>) -> Vec<usize> {
        self.mark_vars(vars);
        let mut out = Vec::new();
        if scan.is_none() {
            let applied = &self.applied;
            self.unwatched.retain(|&i| !applied[i]);
            out.extend(self.unwatched.iter().copied());
        }
        for &v in scan.unwrap_or(vars) {
            let list = std::mem::take(&mut self.watch[v.0 as usize]);
            let mut keep = Vec::with_capacity(list.len());
            for i in list {
                if self.applied[i] {
                    continue;
                }
                match self.ready_vars[i].iter().find(|w| !self.marked(**w)) {
                    None => {
                        out.push(i);
                        keep.push(i);
                    }
                    Some(w) => self.watch[w.0 as usize].push(i),
                }
            }
            self.watch[v.0 as usize] = keep;
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Marks body literal `i` as reflected in the partial result (or no longer).
    fn set_applied(&mut self, i: usize, on: bool) {
        if self.applied[i] == on {
            return;
        }
        self.applied[i] = on;
        if on {
            self.applied_log.push(i);
        }
        for v in &self.lit_vars[i] {
            let n = &mut self.need[v.0 as usize];
            *n = if on { n.saturating_sub(1) } else { *n + 1 };
        }
    }

    /// Whether the head or a literal not yet applied reads `v`.
    fn is_needed(&self, v: VarId) -> bool {
        self.need.get(v.0 as usize).is_some_and(|&n| n > 0)
    }

    /// [`RuleCx::is_needed`] leaving literal `skip` out.
    fn is_needed_except(&self, v: VarId, skip: usize) -> bool {
        let own = u32::from(!self.applied[skip] && self.lit_vars[skip].contains(&v));
        self.need.get(v.0 as usize).is_some_and(|&n| n > own)
    }

    fn var_name(&self, v: VarId) -> String {
        self.rule
            .vars
            .get(v.0 as usize)
            .map_or_else(|| format!("v{}", v.0), |i| i.name.clone())
    }

    fn var_type(&self, v: VarId) -> Result<Type, PlanError> {
        self.rule
            .vars
            .get(v.0 as usize)
            .map(|i| i.ty)
            .ok_or_else(|| internal(format!("a rule uses undeclared variable #{}", v.0)))
    }

    fn position(&self, vars: &[VarId], v: VarId, span: Span) -> Result<usize, PlanError> {
        vars.iter().position(|w| *w == v).ok_or_else(|| {
            program_error(Diagnostic::error(
                format!(
                    "variable `{}` is not bound by a positive atom or an assignment",
                    self.var_name(v)
                ),
                span,
            ))
        })
    }

    fn lit_vars(&self, lit: &CoreLit) -> Vec<VarId> {
        literal_vars(lit)
    }

    /// The pending equality filters `a = b` where `a` reads only variables of `left` and
    /// `b` only variables of `right`, some of them not in `left`: (literal, a, b), in body
    /// order. Only the equalities that read a variable of `right` can be such.
    fn eq_links(&mut self, left: &[VarId], right: &[VarId]) -> Vec<(usize, &'r CExpr, &'r CExpr)> {
        if self.eqs.is_empty() {
            return Vec::new();
        }
        let mut cand = Vec::new();
        for v in right {
            if let Some(list) = self.eqs_by_var.get_mut(v.0 as usize) {
                let (applied, eqs) = (&self.applied, &self.eqs);
                list.retain(|&k| !applied[eqs[k].0]);
                cand.extend(list.iter().copied());
            }
        }
        cand.sort_unstable();
        cand.dedup();
        let left_set: HashSet<VarId> = left.iter().copied().collect();
        let mut out = Vec::new();
        for k in cand {
            let (i, va, vb) = &self.eqs[k];
            let Some(CoreLit::Filter { cond, .. }) = self.rule.body.get(*i) else {
                continue;
            };
            let CExprKind::Cmp(CmpOp::Eq, a, b) = &cond.kind else {
                continue;
            };
            match link_side(&left_set, right, va, vb) {
                Some(true) => out.push((*i, &**a, &**b)),
                Some(false) => out.push((*i, &**b, &**a)),
                None => {}
            }
        }
        out
    }

    /// Rewrites a core expression over variables into one over the columns holding them.
    fn lower(&self, e: &CExpr, vars: &[VarId]) -> Result<Expr, PlanError> {
        let b = |x: &CExpr| self.lower(x, vars).map(Box::new);
        let kind = match &e.kind {
            CExprKind::Var(v) => ExprKind::Col(self.position(vars, *v, self.rule.span)?),
            CExprKind::Const(c) => ExprKind::Const(c.clone()),
            CExprKind::Cast(a) => ExprKind::Cast(b(a)?),
            CExprKind::Neg(a) => ExprKind::Neg(b(a)?),
            CExprKind::Arith(op, x, y) => ExprKind::Arith(*op, b(x)?, b(y)?),
            CExprKind::Cmp(op, x, y) => ExprKind::Cmp(*op, b(x)?, b(y)?),
            CExprKind::And(es) => ExprKind::And(es.iter().map(|x| self.lower(x, vars)).collect::<Result<_, _>>()?),
            CExprKind::Or(es) => ExprKind::Or(es.iter().map(|x| self.lower(x, vars)).collect::<Result<_, _>>()?),
            CExprKind::Not(a) => ExprKind::Not(b(a)?),
            CExprKind::In(a, vs) => ExprKind::In(b(a)?, vs.clone()),
            CExprKind::Call(f, es) => {
                ExprKind::Call(*f, es.iter().map(|x| self.lower(x, vars)).collect::<Result<_, _>>()?)
            }
        };
        Ok(Expr { kind, ty: e.ty })
    }
}

/// The greedy choice of the next atom to join into a partial result: among the atoms
/// connected to it (sharing a variable with it, linked to it by a pending equality between
/// an expression of its variables and one of the atom's, or without variables; all of
/// them while it binds no variable), the one of the smallest estimate, the first in body
/// order of equal ones; the smallest of all when none is connected.
///
/// Kept up to date as the partial result's variables change instead of being searched
/// for at every join, so a body of n atoms takes time near-linear in n: per atom, how
/// many of its variables are bound and how many active equality sides reach it, and the
/// connected atoms ordered by estimate. An equality side (`from`, `to`) is active while
/// its literal is pending, all of `from` is bound and some of `to` is not; it reaches the
/// atoms whose variables include all of `to`. The variables of a pending literal (every
/// atom not joined yet is one) stay bound once bound, so each side turns active and back
/// at most once.
struct JoinChoice {
    /// Per atom (by its position among the atoms to join): its unit's variables.
    vars: Vec<Vec<VarId>>,
    /// Per atom: its estimate as a key that orders like `f64::total_cmp`.
    key: Vec<i64>,
    alive: Vec<bool>,
    all: BTreeSet<(i64, usize)>,
    connected: BTreeSet<(i64, usize)>,
    /// Per atom: how many of its variables are bound.
    shared: Vec<u32>,
    /// Per atom: how many active equality sides reach it.
    linked: Vec<u32>,
    /// Per variable: the atoms whose variables include it (those joined are dropped lazily).
    atoms_of: Vec<Vec<usize>>,
    /// Per variable: whether the partial result binds it; and the bound variables.
    bound: Vec<bool>,
    bound_vars: Vec<VarId>,
    sides: Vec<EqSide>,
    /// Per variable: the equality sides that read it (side, in `from`).
    sides_of_var: Vec<Vec<(usize, bool)>>,
    /// Per body literal: its equality sides.
    sides_of_lit: BTreeMap<usize, Vec<usize>>,
    /// How much of `RuleCx::applied_log` has been seen.
    log_seen: usize,
    /// Scratch marks of the variables of the partial result being synced.
    seen: Vec<bool>,
}

/// One direction of a pending equality filter `a = b`, for [`JoinChoice`].
struct EqSide {
    /// Variables of `from` and of `to` that are not bound.
    from_missing: usize,
    to_missing: usize,
    /// The atoms whose variables include all of `to`.
    targets: Vec<usize>,
    applied: bool,
    active: bool,
}

/// `x` as an integer that orders like `f64::total_cmp`.
fn total_key(x: f64) -> i64 {
    let b = x.to_bits() as i64;
    b ^ ((((b >> 63) as u64) >> 1) as i64)
}

impl JoinChoice {
    fn new(cx: &RuleCx, rest: &[(usize, Unit)]) -> JoinChoice {
        let n = rest.len();
        let mut nvars = cx.need.len();
        for (_, u) in rest {
            for v in &u.vars {
                nvars = nvars.max(v.0 as usize + 1);
            }
        }
        for (_, va, vb) in &cx.eqs {
            for v in va.iter().chain(vb) {
                nvars = nvars.max(v.0 as usize + 1);
            }
        }
        let mut atoms_of: Vec<Vec<usize>> = vec![Vec::new(); nvars];
        let mut vars = Vec::with_capacity(n);
        let mut key = Vec::with_capacity(n);
        let mut all = BTreeSet::new();
        for (p, (_, u)) in rest.iter().enumerate() {
            let mut vs = u.vars.clone();
            vs.sort_unstable();
            vs.dedup();
            for v in &vs {
                atoms_of[v.0 as usize].push(p);
            }
            vars.push(vs);
            key.push(total_key(u.est));
            all.insert((total_key(u.est), p));
        }
        let mut c = JoinChoice {
            vars,
            key,
            alive: vec![true; n],
            all,
            connected: BTreeSet::new(),
            shared: vec![0; n],
            linked: vec![0; n],
            atoms_of,
            bound: vec![false; nvars],
            bound_vars: Vec::new(),
            sides: Vec::new(),
            sides_of_var: vec![Vec::new(); nvars],
            sides_of_lit: BTreeMap::new(),
            log_seen: cx.applied_log.len(),
            seen: vec![false; nvars],
        };
        for (i, va, vb) in &cx.eqs {
            if cx.applied[*i] || va.is_empty() || vb.is_empty() {
                continue;
            }
            for (from, to) in [(va, vb), (vb, va)] {
                // The atoms holding all of `to`, from the shortest list of one of them.
                let Some(fewest) = to.iter().min_by_key(|v| c.atoms_of[v.0 as usize].len()) else {
                    continue;
                };
                let targets: Vec<usize> = c.atoms_of[fewest.0 as usize]
                    .iter()
                    .copied()
                    .filter(|&p| to.iter().all(|v| c.vars[p].binary_search(v).is_ok()))
                    .collect();
                if targets.is_empty() {
                    continue;
                }
                let s = c.sides.len();
                for v in from {
                    c.sides_of_var[v.0 as usize].push((s, true));
                }
                for v in to {
                    c.sides_of_var[v.0 as usize].push((s, false));
                }
                c.sides_of_lit.entry(*i).or_default().push(s);
                c.sides.push(EqSide {
                    from_missing: from.len(),
                    to_missing: to.len(),
                    targets,
                    applied: false,
                    active: false,
                });
            }
        }
        for p in 0..n {
            c.refresh(p);
        }
        c
    }

    /// Puts atom `p` in or out of the connected ones.
    fn refresh(&mut self, p: usize) {
        let on = self.alive[p] && (self.vars[p].is_empty() || self.shared[p] > 0 || self.linked[p] > 0);
        if on {
            self.connected.insert((self.key[p], p));
        } else {
            self.connected.remove(&(self.key[p], p));
        }
    }

    fn refresh_side(&mut self, s: usize) {
        let side = &self.sides[s];
        let on = !side.applied && side.from_missing == 0 && side.to_missing > 0;
        if on == side.active {
            return;
        }
        self.sides[s].active = on;
        for k in 0..self.sides[s].targets.len() {
            let p = self.sides[s].targets[k];
            if on {
                self.linked[p] += 1;
            } else {
                self.linked[p] -= 1;
            }
            self.refresh(p);
        }
    }

    /// Variable `v` becomes bound (`on`) or unbound.
    fn set_bound(&mut self, v: VarId, on: bool) {
        let vi = v.0 as usize;
        self.bound[vi] = on;
        let mut list = std::mem::take(&mut self.atoms_of[vi]);
        list.retain(|&p| self.alive[p]);
        for &p in &list {
            if on {
                self.shared[p] += 1;
            } else {
                self.shared[p] -= 1;
            }
            self.refresh(p);
        }
        self.atoms_of[vi] = list;
        for k in 0..self.sides_of_var[vi].len() {
            let (s, in_from) = self.sides_of_var[vi][k];
            let side = &mut self.sides[s];
            let missing = if in_from {
                &mut side.from_missing
            } else {
                &mut side.to_missing
            };
            if on {
                *missing -= 1;
            } else {
                *missing += 1;
            }
            self.refresh_side(s);
        }
    }

    /// The next atom to join into a partial result with variables `cur`, if any is left.
    fn next(&mut self, cx: &RuleCx, cur: &[VarId]) -> Option<usize> {
        // Equalities applied since the last call no longer link.
        for k in self.log_seen..cx.applied_log.len() {
            let lit = cx.applied_log[k];
            for s in self.sides_of_lit.get(&lit).cloned().unwrap_or_default() {
                self.sides[s].applied = true;
                self.refresh_side(s);
            }
        }
        self.log_seen = cx.applied_log.len();
        // The bound variables become `cur`.
        for v in cur {
            let vi = v.0 as usize;
            if vi >= self.bound.len() {
                self.bound.resize(vi + 1, false);
                self.seen.resize(vi + 1, false);
                self.atoms_of.resize(vi + 1, Vec::new());
                self.sides_of_var.resize(vi + 1, Vec::new());
            }
            self.seen[vi] = true;
        }
        for v in std::mem::take(&mut self.bound_vars) {
            if !self.seen[v.0 as usize] && self.bound[v.0 as usize] {
                self.set_bound(v, false);
            }
        }
        for &v in cur {
            if !self.bound[v.0 as usize] {
                self.set_bound(v, true);
            }
        }
        for v in cur {
            self.seen[v.0 as usize] = false;
        }
        self.bound_vars = cur.to_vec();
        let first = if cur.is_empty() {
            self.all.first()
        } else {
            self.connected.first().or(self.all.first())
        };
        let &(_, p) = first?;
        self.alive[p] = false;
        self.all.remove(&(self.key[p], p));
        self.connected.remove(&(self.key[p], p));
        Some(p)
    }
}

/// Whether an aggregation rule of a functional predicate with `keys` key columns yields at
/// most one row per key: its groups are the head's variables that are not aggregate
/// results, one row each, so it does when every one of them is among the key arguments.
fn aggregation_is_functional(rule: &CoreRule, keys: usize) -> bool {
    let Some(aggs) = &rule.aggs else {
        return false;
    };
    let key_args = &rule.head_args[..keys.min(rule.head_args.len())];
    term_vars(&rule.head_args)
        .filter(|v| aggs.iter().all(|a| a.var != *v))
        .all(|v| key_args.contains(&Term::Var(v)))
}

fn collect_vars(e: &CExpr, out: &mut Vec<VarId>) {
    match &e.kind {
        CExprKind::Var(v) => {
            if !out.contains(v) {
                out.push(*v)
            }
        }
        CExprKind::Const(_) => {}
        CExprKind::Cast(a) | CExprKind::Neg(a) | CExprKind::Not(a) | CExprKind::In(a, _) => collect_vars(a, out),
        CExprKind::Arith(_, a, b) | CExprKind::Cmp(_, a, b) => {
            collect_vars(a, out);
            collect_vars(b, out);
        }
        CExprKind::And(es) | CExprKind::Or(es) | CExprKind::Call(_, es) => {
            for a in es {
                collect_vars(a, out);
            }
        }
    }
}

/// The variables a body literal reads (an assignment's target included).
fn literal_vars(lit: &CoreLit) -> Vec<VarId> {
    match lit {
        CoreLit::Atom { args, .. } | CoreLit::NotAtom { args, .. } => term_vars(args).collect(),
        CoreLit::Assign { var, expr, .. } => {
            let mut v = Vec::new();
            collect_vars(expr, &mut v);
            v.push(*var);
            v
        }
        CoreLit::Filter { cond, .. } => {
            let mut v = Vec::new();
            collect_vars(cond, &mut v);
            v
        }
    }
}

/// For an equality `a = b` with variables `va` and `vb`: `Some(true)` when `a` reads only
/// variables of `left` and `b` only of `right`, some not in `left`; `Some(false)` the
/// other way round; `None` when it links neither way.
fn link_side(left: &HashSet<VarId>, right: &[VarId], va: &[VarId], vb: &[VarId]) -> Option<bool> {
    let in_left = |vs: &[VarId]| !vs.is_empty() && vs.iter().all(|v| left.contains(v));
    let in_right = |vs: &[VarId]| !vs.is_empty() && vs.iter().all(|v| right.contains(v));
    let new = |vs: &[VarId]| vs.iter().any(|v| !left.contains(v));
    if in_left(va) && in_right(vb) && new(vb) {
        Some(true)
    } else if in_left(vb) && in_right(va) && new(va) {
        Some(false)
    } else {
        None
    }
}

fn term_vars(args: &[Term]) -> impl Iterator<Item = VarId> + '_ {
    args.iter().filter_map(|t| match t {
        Term::Var(v) => Some(*v),
        Term::Const(_) => None,
    })
}

fn lit_span(lit: &CoreLit) -> Span {
    match lit {
        CoreLit::Atom { span, .. }
        | CoreLit::NotAtom { span, .. }
        | CoreLit::Assign { span, .. }
        | CoreLit::Filter { span, .. } => *span,
    }
}

/// The predicates of a non-recursive stratum in an order where each comes after the
/// ones of the stratum it reads; `None` when they depend on each other cyclically.
fn topo_order(s: &fox_sema::core::Stratum) -> Option<Vec<PredId>> {
    let deps = |p: PredId| -> BTreeSet<PredId> {
        s.rules
            .iter()
            .filter(|r| r.head == p)
            .flat_map(|r| &r.body)
            .filter_map(|l| match l {
                CoreLit::Atom { pred, .. } | CoreLit::NotAtom { pred, .. } if s.preds.contains(pred) => Some(*pred),
                _ => None,
            })
            .collect()
    };
    let mut order = Vec::new();
    let mut left: Vec<PredId> = s.preds.clone();
    while !left.is_empty() {
        let ready = left.iter().position(|&p| deps(p).iter().all(|d| order.contains(d)))?;
        order.push(left.remove(ready));
    }
    Some(order)
}

/// `rule` with the order comparisons between variables that its own imply by
/// transitivity (`x < y, y < z` gives `x < z`) added as filters, where an atom binds both
/// variables: such a filter then selects on the atom before any join (in a clique query,
/// every edge atom keeps only its increasing edges, so all read one relation).
///
/// The implied comparisons are those of the transitive closure of the comparisons, as
/// [`implied_by_closure`] computes it; a filter is added for each pair of distinct
/// variables that an atom binds, that no comparison relates directly and that the closure
/// relates, in the order of the pairs, strict when the closure's is. Only those pairs are
/// looked for: `a < b` is implied when a path of comparisons leads from `a` to `b`,
/// strictly when one of a path's comparisons is strict, found by a search from `a` over
/// the variables that can still reach `b`. Where no strict comparison lies on a cycle, the
/// paths and the closure agree; where one does (the comparisons cannot all hold, and the
/// rule derives nothing), the closure is computed when it is small (at most 64 direct
/// comparisons), and the paths decide above that.
fn with_implied_order(rule: &CoreRule) -> CoreRule {
    // Edges a -> b meaning a < b (strict) or a <= b.
    let mut less: BTreeMap<(VarId, VarId), bool> = BTreeMap::new();
    for lit in &rule.body {
        if let CoreLit::Filter { cond, .. } = lit {
            if let CExprKind::Cmp(op, a, b) = &cond.kind {
                if let (CExprKind::Var(x), CExprKind::Var(y)) = (&a.kind, &b.kind) {
                    if a.ty != b.ty {
                        continue;
                    }
                    let (lo, hi, strict) = match op {
                        CmpOp::Lt => (*x, *y, true),
                        CmpOp::Le => (*x, *y, false),
                        CmpOp::Gt => (*y, *x, true),
                        CmpOp::Ge => (*y, *x, false),
                        _ => continue,
                    };
                    let e = less.entry((lo, hi)).or_insert(false);
                    *e |= strict;
                }
            }
        }
    }
    if less.len() < 2 {
        return rule.clone();
    }
    // The pairs an atom binds together that no comparison relates directly.
    let mut pairs: BTreeSet<(VarId, VarId)> = BTreeSet::new();
    let lower: BTreeSet<VarId> = less.keys().map(|p| p.0).collect();
    let upper: BTreeSet<VarId> = less.keys().map(|p| p.1).collect();
    for lit in &rule.body {
        if let CoreLit::Atom { args, .. } = lit {
            let vs: BTreeSet<VarId> = term_vars(args).collect();
            let los: Vec<VarId> = vs.iter().copied().filter(|v| lower.contains(v)).collect();
            let his: Vec<VarId> = vs.iter().copied().filter(|v| upper.contains(v)).collect();
            for &a in &los {
                for &b in &his {
                    if a != b && !less.contains_key(&(a, b)) {
                        pairs.insert((a, b));
                    }
                }
            }
        }
    }
    if pairs.is_empty() {
        return rule.clone();
    }
    let implied = implied_order(&less, &pairs);
    let mut out = rule.clone();
    for ((a, b), strict) in implied {
        let ty = match rule.vars.get(a.0 as usize) {
            Some(v) => v.ty,
            None => continue,
        };
        out.body.push(CoreLit::Filter {
            cond: CExpr {
                kind: CExprKind::Cmp(
                    if strict { CmpOp::Lt } else { CmpOp::Le },
                    Box::new(CExpr {
                        kind: CExprKind::Var(a),
                        ty,
                    }),
                    Box::new(CExpr {
                        kind: CExprKind::Var(b),
                        ty,
                    }),
                ),
                ty: Type::Bool,
            },
            span: rule.span,
        });
    }
    out
}

/// The pairs of `pairs` that the comparisons `less` ((a, b) ↦ strict: a < b or a <= b)
/// imply, with whether strictly, in the order of `pairs` (see [`with_implied_order`]).
fn implied_order(
    less: &BTreeMap<(VarId, VarId), bool>,
    pairs: &BTreeSet<(VarId, VarId)>,
) -> Vec<((VarId, VarId), bool)> {
    // The variables of the comparisons, numbered; the edges of each.
    let mut ids: BTreeMap<VarId, usize> = BTreeMap::new();
    for &(a, b) in less.keys() {
        let n = ids.len();
        ids.entry(a).or_insert(n);
        let n = ids.len();
        ids.entry(b).or_insert(n);
    }
    let mut succ: Vec<Vec<(usize, bool)>> = vec![Vec::new(); ids.len()];
    for (&(a, b), &strict) in less {
        succ[ids[&a]].push((ids[&b], strict));
    }
    let comp = components(&succ);
    let contradiction = succ
        .iter()
        .enumerate()
        .any(|(a, es)| es.iter().any(|&(b, strict)| strict && comp[a] == comp[b]));
    if contradiction && less.len() <= 64 {
        let closure = implied_by_closure(less);
        return pairs
            .iter()
            .filter_map(|p| closure.get(p).map(|&strict| (*p, strict)))
            .collect();
    }
    let mut found = Vec::new();
    let pairs: Vec<(VarId, VarId)> = pairs
        .iter()
        .copied()
        .filter(|(a, b)| ids.contains_key(a) && ids.contains_key(b))
        .collect();
    // `seen[v]`: bit 0, reached; bit 1, reached by a path with a strict step.
    let mut seen = vec![0u8; ids.len()];
    let mut from = 0;
    while from < pairs.len() {
        // One search per source variable, for all its pairs.
        let a = pairs[from].0;
        let ia = ids[&a];
        let to = from + pairs[from..].iter().take_while(|p| p.0 == a).count();
        let low = pairs[from..to]
            .iter()
            .map(|(_, b)| comp[ids[b]])
            .filter(|&c| c <= comp[ia])
            .min();
        if let Some(low) = low {
            let mut stack = vec![(ia, false)];
            let mut touched = vec![ia];
            seen[ia] = 1;
            while let Some((v, strict)) = stack.pop() {
                for &(w, s) in &succ[v] {
                    // Only a variable of a component numbered at least `b`'s reaches `b`.
                    if comp[w] < low {
                        continue;
                    }
                    let st = strict || s;
                    let bit = if st { 3 } else { 1 };
                    if seen[w] & bit == bit {
                        continue;
                    }
                    if seen[w] == 0 {
                        touched.push(w);
                    }
                    seen[w] |= bit;
                    stack.push((w, st));
                }
            }
            for (_, b) in &pairs[from..to] {
                let r = seen[ids[b]];
                if r != 0 {
                    found.push(((a, *b), r & 2 != 0));
                }
            }
            for v in touched {
                seen[v] = 0;
            }
        }
        from = to;
    }
    found
}

/// The transitive closure of the comparisons `less` ((a, b) ↦ strict: a < b or a <= b)
/// over pairs of distinct variables, strict where a composed comparison is.
fn implied_by_closure(less: &BTreeMap<(VarId, VarId), bool>) -> BTreeMap<(VarId, VarId), bool> {
    let mut less = less.clone();
    loop {
        let mut added = Vec::new();
        for (&(a, b), &s1) in &less {
            for (&(c, d), &s2) in &less {
                if b == c && a != d {
                    let strict = s1 || s2;
                    match less.get(&(a, d)) {
                        Some(&old) if old || !strict => {}
                        _ => added.push(((a, d), strict)),
                    }
                }
            }
        }
        if added.is_empty() {
            return less;
        }
        for (k, s) in added {
            let e = less.entry(k).or_insert(false);
            *e |= s;
        }
    }
}

/// The strongly connected components of a graph (`succ[v]`: v's edges), numbered so that
/// an edge never leads to a component of a larger number (Tarjan's order: sinks first).
fn components(succ: &[Vec<(usize, bool)>]) -> Vec<usize> {
    let n = succ.len();
    let mut g = petgraph::graph::DiGraph::<(), ()>::with_capacity(n, n);
    let nodes: Vec<_> = (0..n).map(|_| g.add_node(())).collect();
    for (v, es) in succ.iter().enumerate() {
        for &(w, _) in es {
            g.add_edge(nodes[v], nodes[w], ());
        }
    }
    let mut comp = vec![0; n];
    for (c, members) in petgraph::algo::tarjan_scc(&g).into_iter().enumerate() {
        for v in members {
            comp[v.index()] = c;
        }
    }
    comp
}

/// True when the atoms of a cycle (`core`, indices into `vars` and `keys`) can be joined
/// one at a time so that each atom after the first has all its key variables bound by
/// the atoms before it (a join on a key of the new atom never grows the result).
///
/// From each start, the atoms join while one has its key bound. The atoms a start joins
/// bind at least what any of them would bind as a start, so a start that another start's
/// failed search joined fails too and is not tried: each search costs what it joins.
fn key_lookup_order(core: &[usize], vars: &[BTreeSet<VarId>], keys: &[BTreeSet<VarId>]) -> bool {
    let n = core.len();
    // The atoms of the cycle (positions in `core`) whose key holds each variable.
    let mut by_var: BTreeMap<VarId, Vec<usize>> = BTreeMap::new();
    for (k, &a) in core.iter().enumerate() {
        for v in &keys[a] {
            by_var.entry(*v).or_default().push(k);
        }
    }
    let keyless: Vec<usize> = (0..n).filter(|&k| keys[core[k]].is_empty()).collect();
    // Per atom, its key variables not bound yet (valid where `stamp` is the search's).
    let mut missing = vec![0usize; n];
    let mut stamp = vec![usize::MAX; n];
    let mut joined_by = vec![usize::MAX; n];
    let mut ever_joined = vec![false; n];
    let mut bound: BTreeSet<VarId> = BTreeSet::new();
    for start in 0..n {
        if ever_joined[start] {
            continue;
        }
        bound.clear();
        let mut joined = 0;
        let mut ready: Vec<usize> = keyless.clone();
        ready.push(start);
        ready.reverse();
        while let Some(k) = ready.pop() {
            if joined_by[k] == start {
                continue;
            }
            joined_by[k] = start;
            ever_joined[k] = true;
            joined += 1;
            for v in &vars[core[k]] {
                if !bound.insert(*v) {
                    continue;
                }
                for &b in by_var.get(v).into_iter().flatten() {
                    if stamp[b] != start {
                        stamp[b] = start;
                        missing[b] = keys[core[b]].len();
                    }
                    missing[b] -= 1;
                    if missing[b] == 0 {
                        ready.push(b);
                    }
                }
            }
        }
        if joined == n {
            return true;
        }
    }
    false
}

/// The atoms that remain after GYO reduction of the body's hypergraph (one edge per atom,
/// over its variables): empty for an α-acyclic body, otherwise the atoms on cycles.
///
/// Rounds as in the textbook reduction: a round first drops every variable that only one
/// edge holds, then removes, in index order, each edge that is empty or contained in
/// another remaining edge (of two equal edges, the later one stays). Only the edges a
/// round can affect are looked at (all in the first round; then those that lost a
/// variable and those that share a variable with one), so a long path of atoms takes
/// time proportional to its length.
fn cyclic_core(edges: &[BTreeSet<VarId>]) -> Vec<usize> {
    let n = edges.len();
    let mut edges: Vec<BTreeSet<VarId>> = edges.to_vec();
    let mut alive = vec![true; n];
    // The remaining edges holding each variable.
    let mut holders: BTreeMap<VarId, BTreeSet<usize>> = BTreeMap::new();
    for (i, e) in edges.iter().enumerate() {
        for v in e {
            holders.entry(*v).or_default().insert(i);
        }
    }
    let mut private: Vec<VarId> = holders.iter().filter(|(_, h)| h.len() <= 1).map(|(v, _)| *v).collect();
    let mut candidates: BTreeSet<usize> = (0..n).collect();
    loop {
        let mut changed = false;
        // Variables held by one edge are its private ones.
        let mut shrunk: BTreeSet<usize> = BTreeSet::new();
        for v in std::mem::take(&mut private) {
            let Some(h) = holders.get(&v) else { continue };
            if h.len() > 1 {
                continue;
            }
            if let Some(&e) = h.iter().next() {
                edges[e].remove(&v);
                shrunk.insert(e);
                changed = true;
            }
            holders.remove(&v);
        }
        // An edge that shrank may now equal a smaller-indexed one: the edges holding one
        // of its variables are candidates (each variable's holders added once).
        let mut touched: BTreeSet<VarId> = BTreeSet::new();
        for &e in &shrunk {
            candidates.insert(e);
            touched.extend(edges[e].iter().copied());
        }
        for v in &touched {
            if let Some(h) = holders.get(v) {
                candidates.extend(h.iter().copied());
            }
        }
        // Ears, in index order.
        for i in std::mem::take(&mut candidates) {
            if !alive[i] {
                continue;
            }
            let ear = match edges[i].iter().min_by_key(|v| holders.get(*v).map_or(0, BTreeSet::len)) {
                None => true,
                Some(v) => holders.get(v).is_some_and(|h| {
                    h.iter()
                        .any(|&j| j != i && edges[i].is_subset(&edges[j]) && (edges[j].len() > edges[i].len() || j > i))
                }),
            };
            if !ear {
                continue;
            }
            alive[i] = false;
            changed = true;
            for v in &edges[i] {
                if let Some(h) = holders.get_mut(v) {
                    h.remove(&i);
                    if h.len() == 1 {
                        private.push(*v);
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    alive.iter().enumerate().filter(|(_, a)| **a).map(|(i, _)| i).collect()
}

/// True when a value of type `from` converts to `to` without loss (LANGUAGE.md's implicit
/// widening, and decimal rescaling to a larger scale).
pub fn widens(from: Type, to: Type) -> bool {
    use Type::*;
    match (from, to) {
        _ if from == to => true,
        (Int32, Int64 | Decimal(_) | WideDecimal(_) | Float64)
        | (Int64, Decimal(_) | WideDecimal(_) | Float64)
        | (Decimal(_) | WideDecimal(_), Float64) => true,
        (Decimal(a), Decimal(b)) | (Decimal(a) | WideDecimal(a), WideDecimal(b)) => b >= a,
        _ => false,
    }
}

/// `e` as type `to`, wrapped in a cast when the types differ; `None` when `to` is not a
/// widening of `e`'s type.
fn coerce(e: Expr, to: Type) -> Option<Expr> {
    if e.ty == to {
        Some(e)
    } else if widens(e.ty, to) {
        Some(Expr {
            kind: ExprKind::Cast(Box::new(e)),
            ty: to,
        })
    } else {
        None
    }
}

/// A constant converted to type `to` when that loses nothing (an integer that fits,
/// a decimal with no digits beyond the target scale, a widening) and the result is a
/// value of `to` (at most 18 digits for a decimal).
pub fn convert_value(v: &Value, to: Type) -> Option<Value> {
    convert_unchecked(v, to).filter(|r| value_has_type(r, to))
}

fn convert_unchecked(v: &Value, to: Type) -> Option<Value> {
    fn pow10(s: u8) -> Option<i128> {
        10i128.checked_pow(u32::from(s))
    }
    fn int_to(i: i128, to: Type) -> Option<Value> {
        match to {
            Type::Int32 => i32::try_from(i).ok().map(Value::Int32),
            Type::Int64 => i64::try_from(i).ok().map(Value::Int64),
            Type::Decimal(s) | Type::WideDecimal(s) => Some(Value::Decimal {
                unscaled: i.checked_mul(pow10(s)?)?,
                scale: s,
            }),
            Type::Float64 => Some(Value::Float64(i as f64)),
            _ => None,
        }
    }
    match (v, to) {
        _ if value_has_type(v, to) => Some(v.clone()),
        (Value::Int32(i), _) => int_to(i128::from(*i), to),
        (Value::Int64(i), _) => int_to(i128::from(*i), to),
        (Value::Decimal { unscaled, scale }, Type::Decimal(s) | Type::WideDecimal(s)) => {
            if s >= *scale {
                Some(Value::Decimal {
                    unscaled: unscaled.checked_mul(pow10(s - scale)?)?,
                    scale: s,
                })
            } else {
                let d = pow10(scale - s)?;
                (unscaled % d == 0).then(|| Value::Decimal {
                    unscaled: unscaled / d,
                    scale: s,
                })
            }
        }
        (Value::Decimal { unscaled, scale }, Type::Float64) => {
            Some(Value::Float64(*unscaled as f64 / 10f64.powi(i32::from(*scale))))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GYO reduction as a fixpoint of whole passes, the definition `cyclic_core` keeps.
    fn cyclic_core_by_passes(edges: &[BTreeSet<VarId>]) -> Vec<usize> {
        let mut edges: Vec<BTreeSet<VarId>> = edges.to_vec();
        let mut alive = vec![true; edges.len()];
        loop {
            let mut changed = false;
            let mut count: BTreeMap<VarId, usize> = BTreeMap::new();
            for (e, _) in edges.iter().zip(&alive).filter(|(_, a)| **a) {
                for v in e {
                    *count.entry(*v).or_default() += 1;
                }
            }
            for (e, _) in edges.iter_mut().zip(&alive).filter(|(_, a)| **a) {
                let before = e.len();
                e.retain(|v| count.get(v).copied().unwrap_or(0) > 1);
                changed |= e.len() != before;
            }
            let n = edges.len();
            for i in 0..n {
                if !alive[i] {
                    continue;
                }
                if edges[i].is_empty() || (0..n).any(|j| j != i && alive[j] && edges[i].is_subset(&edges[j])) {
                    alive[i] = false;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        alive.iter().enumerate().filter(|(_, a)| **a).map(|(i, _)| i).collect()
    }

    /// The definition of `key_lookup_order`: from some start, atoms join one at a time
    /// while one has its key bound.
    fn key_lookup_by_search(core: &[usize], vars: &[BTreeSet<VarId>], keys: &[BTreeSet<VarId>]) -> bool {
        core.iter().any(|&start| {
            let mut bound: BTreeSet<VarId> = vars[start].clone();
            let mut left: Vec<usize> = core.iter().copied().filter(|&a| a != start).collect();
            while let Some(p) = left.iter().position(|&a| keys[a].is_subset(&bound)) {
                let a = left.remove(p);
                bound.extend(vars[a].iter().copied());
            }
            left.is_empty()
        })
    }

    #[test]
    fn key_lookup_order_matches_the_search_on_random_cycles() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        let mut agree = [0usize; 2];
        for _ in 0..3000 {
            let atoms = 1 + next(7) as usize;
            let nv = 1 + next(6);
            let vars: Vec<BTreeSet<VarId>> = (0..atoms)
                .map(|_| (0..1 + next(4)).map(|_| VarId(next(nv) as u32)).collect())
                .collect();
            let keys: Vec<BTreeSet<VarId>> = vars
                .iter()
                .map(|vs| vs.iter().copied().filter(|_| next(2) == 0).collect())
                .collect();
            let core: Vec<usize> = (0..atoms).filter(|_| next(4) != 0).collect();
            let want = key_lookup_by_search(&core, &vars, &keys);
            assert_eq!(
                key_lookup_order(&core, &vars, &keys),
                want,
                "{core:?} {vars:?} {keys:?}"
            );
            agree[usize::from(want)] += 1;
        }
        assert!(agree[0] > 100 && agree[1] > 100, "{agree:?}");
    }

    /// The definition of the greedy join order that `JoinChoice` keeps up to date: among
    /// the atoms left, connected ones first (sharing a variable with `cur`, linked to it
    /// by a pending equality, without variables, or all when `cur` binds none), then the
    /// smallest estimate, then the first.
    fn choose_by_search(cx: &RuleCx, cur: &[VarId], rest: &[(usize, Unit)], alive: &[bool]) -> Option<usize> {
        let bound: HashSet<VarId> = cur.iter().copied().collect();
        let linked = |u: &Unit| {
            cx.eqs
                .iter()
                .any(|(i, va, vb)| !cx.applied[*i] && link_side(&bound, &u.vars, va, vb).is_some())
        };
        let connected =
            |u: &Unit| u.vars.is_empty() || cur.is_empty() || u.vars.iter().any(|v| bound.contains(v)) || linked(u);
        (0..rest.len()).filter(|&p| alive[p]).min_by(|&a, &b| {
            (!connected(&rest[a].1))
                .cmp(&!connected(&rest[b].1))
                .then(rest[a].1.est.total_cmp(&rest[b].1.est))
        })
    }

    #[test]
    fn join_choice_matches_the_search_on_random_bodies() {
        let mut seed = 0x0bad_cafe_dead_beefu64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        let var = |v: u64| CExpr {
            kind: CExprKind::Var(VarId(v as u32)),
            ty: Type::Int32,
        };
        let mut linked_choices = 0;
        for _ in 0..1500 {
            let nv = 1 + next(9);
            let atoms = 1 + next(8) as usize;
            let mut body = Vec::new();
            for _ in 0..atoms {
                let args = (0..next(4)).map(|_| Term::Var(VarId(next(nv) as u32))).collect();
                body.push(CoreLit::Atom {
                    pred: PredId(0),
                    args,
                    span: Span::default(),
                });
            }
            for _ in 0..next(4) {
                // `a = b` or `a = b + c`.
                let left = var(next(nv));
                let right = if next(2) == 0 {
                    var(next(nv))
                } else {
                    CExpr {
                        kind: CExprKind::Arith(
                            fox_sema::core::ArithOp::Add,
                            Box::new(var(next(nv))),
                            Box::new(var(next(nv))),
                        ),
                        ty: Type::Int32,
                    }
                };
                body.push(CoreLit::Filter {
                    cond: CExpr {
                        kind: CExprKind::Cmp(CmpOp::Eq, Box::new(left), Box::new(right)),
                        ty: Type::Bool,
                    },
                    span: Span::default(),
                });
            }
            let rule = CoreRule {
                head: PredId(0),
                head_args: Vec::new(),
                vars: (0..nv)
                    .map(|i| fox_sema::core::VarInfo {
                        name: format!("v{i}"),
                        ty: Type::Int32,
                        generated: false,
                    })
                    .collect(),
                body,
                aggs: None,
                span: Span::default(),
            };
            let mut cx = RuleCx::new(&rule);
            // Units: each atom's variables (some left out), with estimates that often tie.
            let rest: Vec<(usize, Unit)> = (0..atoms)
                .map(|i| {
                    let vars: Vec<VarId> = cx.lit_vars[i].iter().copied().filter(|_| next(4) != 0).collect();
                    let est = [1.0, 10.0, 10.0, 1e6][next(4) as usize];
                    (
                        i,
                        Unit {
                            temp: TempId(0),
                            vars,
                            est,
                        },
                    )
                })
                .collect();
            let mut choice = JoinChoice::new(&cx, &rest);
            let mut alive = vec![true; rest.len()];
            let mut cur: Vec<VarId> = Vec::new();
            loop {
                let want = choose_by_search(&cx, &cur, &rest, &alive);
                let got = choice.next(&cx, &cur);
                assert_eq!(got, want, "{cur:?} {:?}", rule.body);
                let Some(p) = got else { break };
                alive[p] = false;
                let connected_by_var = rest[p].1.vars.iter().any(|v| cur.contains(v));
                if !cur.is_empty() && !connected_by_var && !rest[p].1.vars.is_empty() {
                    linked_choices += 1;
                }
                // The partial result gains the atom's variables and loses some others; a
                // pending equality may be applied.
                for v in &rest[p].1.vars {
                    if !cur.contains(v) {
                        cur.push(*v);
                    }
                }
                cur.retain(|_| next(5) != 0);
                if next(3) == 0 {
                    let i = atoms + next(rule.body.len() as u64 - atoms as u64 + 1) as usize;
                    if i < rule.body.len() {
                        cx.set_applied(i, true);
                    }
                }
            }
        }
        assert!(linked_choices > 20, "{linked_choices}");
    }

    #[test]
    fn implied_order_matches_the_closure_on_random_comparisons() {
        let mut seed = 0x1234_5678_9abc_def1u64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        let mut checked = [0usize; 2];
        for round in 0..4000 {
            let nv = 2 + next(7);
            let mut less: BTreeMap<(VarId, VarId), bool> = BTreeMap::new();
            for _ in 0..1 + next(10) {
                let (a, b) = (next(nv), next(nv));
                // Half of the rounds order the variables, so that no strict comparison
                // is on a cycle.
                let (a, b) = if round % 2 == 0 { (a.min(b), a.max(b)) } else { (a, b) };
                *less.entry((VarId(a as u32), VarId(b as u32))).or_default() |= next(2) == 0;
            }
            let pairs: BTreeSet<(VarId, VarId)> = (0..nv as u32)
                .flat_map(|a| (0..nv as u32).map(move |b| (VarId(a), VarId(b))))
                .filter(|(a, b)| a != b && !less.contains_key(&(*a, *b)))
                .collect();
            let closure = implied_by_closure(&less);
            let want: Vec<((VarId, VarId), bool)> = pairs
                .iter()
                .filter_map(|p| closure.get(p).map(|&strict| (*p, strict)))
                .collect();
            assert_eq!(implied_order(&less, &pairs), want, "{less:?}");
            checked[usize::from(want.iter().any(|w| w.1))] += 1;
        }
        assert!(checked[0] > 100 && checked[1] > 100, "{checked:?}");
        // Above 64 comparisons, paths decide: a long chain implies its pairs two apart.
        let n = 3000u32;
        let less: BTreeMap<(VarId, VarId), bool> = (0..n).map(|i| ((VarId(i), VarId(i + 1)), i % 2 == 0)).collect();
        let pairs: BTreeSet<(VarId, VarId)> = (0..n - 1)
            .flat_map(|i| [(VarId(i), VarId(i + 2)), (VarId(i + 2), VarId(i))])
            .collect();
        let got = implied_order(&less, &pairs);
        let want: Vec<((VarId, VarId), bool)> = (0..n - 1).map(|i| ((VarId(i), VarId(i + 2)), true)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn cyclic_core_matches_the_passes_on_random_bodies() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for _ in 0..3000 {
            let atoms = 1 + next(9) as usize;
            let vars = 1 + next(8);
            let edges: Vec<BTreeSet<VarId>> = (0..atoms)
                .map(|_| (0..1 + next(4)).map(|_| VarId(next(vars) as u32)).collect())
                .collect();
            assert_eq!(cyclic_core(&edges), cyclic_core_by_passes(&edges), "{edges:?}");
        }
        // A path is acyclic, a ring is its own core.
        let path: Vec<BTreeSet<VarId>> = (0..2000).map(|i| BTreeSet::from([VarId(i), VarId(i + 1)])).collect();
        assert!(cyclic_core(&path).is_empty());
        let mut ring = path.clone();
        ring.push(BTreeSet::from([VarId(2000), VarId(0)]));
        assert_eq!(cyclic_core(&ring).len(), 2001);
    }
}
