//! `estimate`: the rows (and per column the distinct values) of every operator's result,
//! from the statistics of the inputs, flowing through the plan.
//!
//! An input relation has the rows and distinct counts of its statistics, or
//! [`DEFAULT_ROWS`] rows with every value distinct. A relation variable has the largest
//! estimate stored into it anywhere in the plan (the blocks are swept twice, so a loop's
//! body sees what its exit stores): inside a fixpoint loop, the estimates are of one
//! iteration. The operators follow the textbook rules: an equality between a column and
//! a constant keeps `1/distinct` of the rows, any other condition a third; an equi-join
//! of `l` and `r` rows on keys with `dl` and `dr` distinct values gives `l·r/max(dl, dr)`
//! per key; an aggregation gives as many rows as the product of its group columns'
//! distinct values, at most its input's rows. The estimates are printed by
//! `--emit physical` and compared with the actual rows by `foxrun --timing`.

use std::collections::HashMap;

use fox_ra::{Expr, ExprKind, JoinCol, Op, RelId, RelKind, Side, Stmt, TempId};
use fox_sema::core::CmpOp;

use super::{Pass, PhysError};
use crate::ann::Estimate as Est;
use crate::stats::{Statistics, DEFAULT_ROWS};
use crate::PhysPlan;

pub struct Estimate;

/// The fraction of rows a condition other than an equality with a constant keeps.
const RANGE_SELECTIVITY: f64 = 1.0 / 3.0;

impl Pass for Estimate {
    fn name(&self) -> &'static str {
        "estimate"
    }

    fn decides(&self) -> &'static str {
        "the estimated rows and distinct values of every operator's result, from the statistics of the inputs"
    }

    fn run(&self, plan: &mut PhysPlan, stats: &Statistics) -> Result<(), PhysError> {
        let ra = &plan.ra;
        let mut rels: HashMap<RelId, Est> = HashMap::new();
        for (i, r) in ra.relations.iter().enumerate() {
            if let RelKind::Input { .. } = r.kind {
                rels.insert(RelId(i as u32), input_estimate(stats, &r.name, r.columns.len()));
            }
        }
        let mut temps: Vec<Option<Est>> = vec![None; ra.temps.len()];
        for _sweep in 0..2 {
            for b in &ra.blocks {
                for s in &b.stmts {
                    match s {
                        Stmt::Let { dst, op, .. } => {
                            let e = estimate_op(op, &temps, &rels, ra.temps[dst.0 as usize].columns.len());
                            temps[dst.0 as usize] = Some(e);
                        }
                        Stmt::Store { rel, src } => {
                            if let Some(e) = temps[src.0 as usize].clone() {
                                grow(&mut rels, *rel, e);
                            }
                        }
                        Stmt::Merge { into, from } => {
                            if let Some(e) = rels.get(from).cloned() {
                                grow(&mut rels, *into, e);
                            }
                        }
                        Stmt::Assign { dst, src } => {
                            if let Some(e) = rels.get(src).cloned() {
                                grow(&mut rels, *dst, e);
                            }
                        }
                        Stmt::Clear { .. } | Stmt::Output { .. } | Stmt::CheckFunctional { .. } => {}
                    }
                }
            }
        }
        for (i, e) in temps.into_iter().enumerate() {
            plan.nodes[i].est = e;
        }
        Ok(())
    }
}

fn input_estimate(stats: &Statistics, name: &str, arity: usize) -> Est {
    match stats.get(name) {
        Some(r) => {
            let rows = r.rows as f64;
            let distinct = (0..arity)
                .map(|c| r.column(c).map_or(rows, |s| (s.distinct as f64).min(rows)))
                .collect();
            Est { rows, distinct }
        }
        None => Est {
            rows: DEFAULT_ROWS,
            distinct: vec![DEFAULT_ROWS; arity],
        },
    }
}

/// A relation variable holds the largest of the values stored into it.
fn grow(rels: &mut HashMap<RelId, Est>, r: RelId, e: Est) {
    match rels.get_mut(&r) {
        Some(old) if old.rows >= e.rows => {}
        _ => {
            rels.insert(r, e);
        }
    }
}

fn unknown(arity: usize) -> Est {
    Est {
        rows: 0.0,
        distinct: vec![0.0; arity],
    }
}

/// `e` with every distinct count capped at its rows.
fn capped(mut e: Est) -> Est {
    for d in &mut e.distinct {
        *d = d.min(e.rows).max(0.0);
    }
    e
}

fn scaled(e: &Est, f: f64) -> Est {
    capped(Est {
        rows: e.rows * f,
        distinct: e.distinct.clone(),
    })
}

fn estimate_op(op: &Op, temps: &[Option<Est>], rels: &HashMap<RelId, Est>, arity: usize) -> Est {
    let get = |t: &TempId| temps.get(t.0 as usize).cloned().flatten().unwrap_or_else(|| unknown(0));
    let col = |e: &Est, c: usize| e.distinct.get(c).copied().unwrap_or(e.rows).max(1.0);
    let e = match op {
        Op::Scan(r) => rels.get(r).cloned().unwrap_or_else(|| unknown(arity)),
        Op::Const(rows) => {
            let n = rows.len() as f64;
            Est {
                rows: n,
                distinct: vec![n; arity],
            }
        }
        Op::Select { input, pred } => {
            let i = get(input);
            scaled(&i, selectivity(pred, &i))
        }
        Op::Map { input, exprs } => {
            let i = get(input);
            let distinct = exprs
                .iter()
                .map(|x| match x.kind {
                    ExprKind::Col(c) => col(&i, c),
                    ExprKind::Const(_) => 1.0,
                    _ => i.rows,
                })
                .collect();
            Est { rows: i.rows, distinct }
        }
        Op::Project { input, cols } => {
            let i = get(input);
            Est {
                rows: i.rows,
                distinct: cols.iter().map(|&c| col(&i, c)).collect(),
            }
        }
        Op::Join {
            left,
            right,
            left_keys,
            right_keys,
            output,
        } => {
            let (l, r) = (get(left), get(right));
            let mut rows = l.rows * r.rows;
            for (&a, &b) in left_keys.iter().zip(right_keys) {
                rows /= col(&l, a).max(col(&r, b));
            }
            let distinct = output
                .iter()
                .map(|&JoinCol { side, col: c }| match side {
                    Side::Left => col(&l, c),
                    Side::Right => col(&r, c),
                })
                .collect();
            Est { rows, distinct }
        }
        Op::SemiJoin {
            left,
            right,
            left_keys,
            right_keys,
        }
        | Op::AntiJoin {
            left,
            right,
            left_keys,
            right_keys,
        } => {
            let (l, r) = (get(left), get(right));
            // The fraction of the left's key values that occur on the right.
            let mut matched = if r.rows > 0.0 { 1.0 } else { 0.0 };
            for (&a, &b) in left_keys.iter().zip(right_keys) {
                matched *= (col(&r, b) / col(&l, a)).min(1.0);
            }
            let f = if matches!(op, Op::SemiJoin { .. }) {
                matched
            } else {
                1.0 - matched
            };
            scaled(&l, f)
        }
        Op::Difference { left, .. } => get(left),
        Op::Union(ts) => {
            let parts: Vec<Est> = ts.iter().map(get).collect();
            let rows = parts.iter().map(|p| p.rows).sum();
            let distinct = (0..arity).map(|c| parts.iter().map(|p| col(p, c)).sum()).collect();
            capped(Est { rows, distinct })
        }
        Op::Aggregate { input, group, .. } => {
            let i = get(input);
            let groups = if group.is_empty() {
                1.0f64.min(i.rows)
            } else {
                group.iter().map(|&c| col(&i, c)).product::<f64>().min(i.rows)
            };
            let mut distinct: Vec<f64> = group.iter().map(|&c| col(&i, c)).collect();
            distinct.resize(arity, groups);
            capped(Est { rows: groups, distinct })
        }
        Op::Sort { input, .. } => get(input),
        Op::Unique(input) => {
            let i = get(input);
            let rows = i.distinct.iter().map(|d| d.max(1.0)).product::<f64>().min(i.rows);
            capped(Est {
                rows,
                distinct: i.distinct,
            })
        }
        Op::Limit { input, n } => {
            let i = get(input);
            capped(Est {
                rows: i.rows.min(*n as f64),
                distinct: i.distinct,
            })
        }
        Op::MultiJoin {
            vars,
            inputs,
            output,
            count,
        } => {
            // Joined input by input: each divides by the larger distinct count of every
            // variable it shares with the inputs before it.
            let mut rows = 1.0;
            let mut var_distinct: Vec<Option<f64>> = vec![None; vars.len()];
            for inp in inputs {
                let e = get(&inp.src);
                rows *= e.rows;
                for (c, &v) in inp.vars.iter().enumerate() {
                    let d = col(&e, c);
                    match var_distinct[v] {
                        Some(old) => {
                            rows /= old.max(d);
                            var_distinct[v] = Some(old.min(d));
                        }
                        None => var_distinct[v] = Some(d),
                    }
                }
            }
            if *count {
                Est {
                    rows: 1.0,
                    distinct: vec![1.0; arity],
                }
            } else {
                let distinct = output.iter().map(|&v| var_distinct[v].unwrap_or(rows)).collect();
                capped(Est { rows, distinct })
            }
        }
    };
    capped(e)
}

/// The fraction of `input`'s rows for which `pred` holds.
fn selectivity(pred: &Expr, input: &Est) -> f64 {
    match &pred.kind {
        ExprKind::And(es) => es.iter().map(|e| selectivity(e, input)).product(),
        ExprKind::Or(es) => es.iter().map(|e| selectivity(e, input)).sum::<f64>().min(1.0),
        ExprKind::Not(e) => 1.0 - selectivity(e, input),
        ExprKind::Cmp(CmpOp::Eq, a, b) => match (&a.kind, &b.kind) {
            (ExprKind::Col(c), ExprKind::Const(_)) | (ExprKind::Const(_), ExprKind::Col(c)) => {
                1.0 / input.distinct.get(*c).copied().unwrap_or(input.rows).max(1.0)
            }
            _ => RANGE_SELECTIVITY,
        },
        ExprKind::Const(fox_sema::core::Value::Bool(b)) => f64::from(u8::from(*b)),
        _ => RANGE_SELECTIVITY,
    }
}
