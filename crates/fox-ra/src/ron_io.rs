//! The RON form of a plan, and the consistency check applied when reading one.

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::error::PlanError;
use crate::ir::*;

/// The plan as pretty-printed RON.
pub fn to_ron(plan: &RaPlan) -> String {
    let config = ron::ser::PrettyConfig::new().struct_names(true);
    // The plan is plain data with derived impls (128-bit integers are enabled), so this
    // does not fail; if it did, the text says why and `from_ron` refuses it.
    ron::ser::to_string_pretty(plan, config)
        .unwrap_or_else(|e| format!("// the plan could not be written as RON: {e}\n"))
}

#[derive(Deserialize)]
#[serde(rename = "RaPlan")]
struct VersionProbe {
    version: u32,
}

/// Reads a plan written by [`to_ron`]: checks the format version first, then that the
/// plan is consistent (see [`validate`]).
pub fn from_ron(text: &str) -> Result<RaPlan, PlanError> {
    let probe: VersionProbe = ron::from_str(text).map_err(|e| PlanError::Syntax(e.to_string()))?;
    if probe.version != PLAN_VERSION {
        return Err(PlanError::Version {
            found: probe.version,
            expected: PLAN_VERSION,
        });
    }
    let plan: RaPlan = ron::from_str(text).map_err(|e| PlanError::Syntax(e.to_string()))?;
    validate(&plan)?;
    Ok(plan)
}

fn invalid(msg: impl Into<String>) -> PlanError {
    PlanError::Invalid(msg.into())
}

/// The temps defined so far in the block being checked.
struct Scope<'p> {
    plan: &'p RaPlan,
    defined: BTreeSet<TempId>,
}

impl SchemaSource for Scope<'_> {
    fn relation(&self, id: RelId) -> Option<&RelVar> {
        self.plan.relations.get(id.0 as usize)
    }
    fn temp(&self, id: TempId) -> Option<&Schema> {
        if self.defined.contains(&id) {
            self.plan.temps.get(id.0 as usize)
        } else {
            None
        }
    }
}

/// Checks that a plan hangs together: relation names are unique; every referenced
/// relation, temp and block exists; every temp is defined exactly once and read only
/// after its definition in the same block; each temp's recorded schema matches what its
/// operator produces; stores, merges and assignments connect relations of the same column
/// types, and a store keeps the properties its relation promises.
pub fn validate(plan: &RaPlan) -> Result<(), PlanError> {
    if plan.version != PLAN_VERSION {
        return Err(PlanError::Version {
            found: plan.version,
            expected: PLAN_VERSION,
        });
    }
    let rel = |r: RelId| {
        plan.relations.get(r.0 as usize).ok_or_else(|| {
            invalid(format!(
                "relation r{} does not exist ({} relations)",
                r.0,
                plan.relations.len()
            ))
        })
    };
    let mut names = BTreeSet::new();
    for r in &plan.relations {
        if !names.insert(r.name.as_str()) {
            return Err(invalid(format!("two relations are named `{}`", r.name)));
        }
        if let RelKind::Delta { of } | RelKind::New { of } = &r.kind {
            let base = rel(*of)?;
            if types(&base.columns) != types(&r.columns) {
                return Err(invalid(format!(
                    "`{}` has columns {} but `{}` has {}",
                    r.name,
                    fmt_types(&types(&r.columns)),
                    base.name,
                    fmt_types(&types(&base.columns))
                )));
            }
        }
        let arity = r.columns.len();
        if let Some(k) = r.props.sorted.iter().find(|k| k.col >= arity) {
            return Err(invalid(format!(
                "`{}` is sorted on column {}, but has {arity} columns",
                r.name, k.col
            )));
        }
    }
    let block = |b: BlockId| {
        if (b.0 as usize) < plan.blocks.len() {
            Ok(())
        } else {
            Err(format!("block b{} does not exist ({} blocks)", b.0, plan.blocks.len()))
        }
    };
    block(plan.entry).map_err(|e| invalid(format!("the entry {e}")))?;
    let mut defined_anywhere = vec![false; plan.temps.len()];
    for (bi, b) in plan.blocks.iter().enumerate() {
        let at = |msg: String| invalid(format!("block b{bi}: {msg}"));
        let mut scope = Scope {
            plan,
            defined: BTreeSet::new(),
        };
        for s in &b.stmts {
            match s {
                Stmt::Let { dst, op, .. } => {
                    let slot = defined_anywhere
                        .get_mut(dst.0 as usize)
                        .ok_or_else(|| at(format!("t{} has no schema ({} temps)", dst.0, plan.temps.len())))?;
                    if *slot {
                        return Err(at(format!("t{} is defined twice", dst.0)));
                    }
                    *slot = true;
                    let schema = &plan.temps[dst.0 as usize];
                    let declared = schema.types();
                    let (types, props) =
                        op_output(op, &scope, Some(&declared)).map_err(|e| at(format!("t{}: {e}", dst.0)))?;
                    if types != declared {
                        return Err(at(format!(
                            "t{} is declared with columns {} but its operator produces {}",
                            dst.0,
                            fmt_types(&declared),
                            fmt_types(&types)
                        )));
                    }
                    if !props.implies(&schema.props) {
                        return Err(at(format!(
                            "t{} claims an order or uniqueness its operator does not give",
                            dst.0
                        )));
                    }
                    scope.defined.insert(*dst);
                }
                Stmt::Store { rel: r, src } => {
                    let target = rel(*r)?;
                    let s = scope
                        .temp(*src)
                        .ok_or_else(|| at(format!("t{} is stored but not defined before", src.0)))?;
                    if s.types() != types(&target.columns) {
                        return Err(at(format!(
                            "t{} with columns {} is stored into `{}` with columns {}",
                            src.0,
                            fmt_types(&s.types()),
                            target.name,
                            fmt_types(&types(&target.columns))
                        )));
                    }
                    if !s.props.implies(&target.props) {
                        return Err(at(format!(
                            "t{} is stored into `{}` but lacks the order or uniqueness `{}` promises",
                            src.0, target.name, target.name
                        )));
                    }
                    if matches!(target.kind, RelKind::Input { .. }) {
                        return Err(at(format!("`{}` is an input and cannot be written", target.name)));
                    }
                }
                Stmt::Merge { into: a, from: b } | Stmt::Assign { dst: a, src: b } => {
                    let (a, b) = (rel(*a)?, rel(*b)?);
                    if types(&a.columns) != types(&b.columns) {
                        return Err(at(format!(
                            "`{}` {} and `{}` {} differ in column types",
                            a.name,
                            fmt_types(&types(&a.columns)),
                            b.name,
                            fmt_types(&types(&b.columns))
                        )));
                    }
                    if !b.props.implies(&a.props) {
                        return Err(at(format!(
                            "`{}` lacks the order or uniqueness `{}` promises",
                            b.name, a.name
                        )));
                    }
                }
                Stmt::Clear { rel: r } => {
                    rel(*r)?;
                }
                Stmt::CheckFunctional { src, keys, pred, .. } => {
                    let s = scope
                        .temp(*src)
                        .ok_or_else(|| at(format!("t{} is checked but not defined before", src.0)))?;
                    if keys.checked_add(1) != Some(s.columns.len()) || !s.props.unique {
                        return Err(at(format!(
                            "the check of `{pred}` reads t{} with {} columns, which is not a set of {keys} key columns and a value",
                            src.0,
                            s.columns.len()
                        )));
                    }
                }
                Stmt::Output { rel: r, src } => {
                    let target = rel(*r)?;
                    let s = scope
                        .temp(*src)
                        .ok_or_else(|| at(format!("t{} is output but not defined before", src.0)))?;
                    if s.types() != types(&target.columns) {
                        return Err(at(format!(
                            "t{} with columns {} is output as `{}` with columns {}",
                            src.0,
                            fmt_types(&s.types()),
                            target.name,
                            fmt_types(&types(&target.columns))
                        )));
                    }
                }
            }
        }
        match &b.term {
            Terminator::Jump(t) => block(*t).map_err(at)?,
            Terminator::Halt => {}
            Terminator::LoopIf { nonempty, body, exit } => {
                block(*body).map_err(at)?;
                block(*exit).map_err(at)?;
                for r in nonempty {
                    rel(*r)?;
                }
            }
        }
    }
    if let Some(t) = defined_anywhere.iter().position(|d| !d) {
        return Err(invalid(format!("t{t} has a schema but no definition")));
    }
    Ok(())
}

fn types(cols: &[fox_sema::core::Column]) -> Vec<fox_sema::core::Type> {
    cols.iter().map(|c| c.ty).collect()
}
