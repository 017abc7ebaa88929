//! A naive reference interpreter of RA plans (nested loops, rows of values), used to
//! check that plans compute what the rules say. It also checks every property a temp
//! claims (sortedness, uniqueness) on the rows it actually holds.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use fox_ra::*;
use fox_sema::core::{AggFunc, ArithOp, CmpOp, Value};

pub type Row = Vec<Value>;

fn rank(v: &Value) -> u8 {
    match v {
        Value::Int32(_) => 0,
        Value::Int64(_) => 1,
        Value::Decimal { .. } => 2,
        Value::Float64(_) => 3,
        Value::String(_) => 4,
        Value::Date(_) => 5,
        Value::Bool(_) => 6,
    }
}

pub fn cmpv(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Int32(x), Value::Int32(y)) => x.cmp(y),
        (Value::Int64(x), Value::Int64(y)) => x.cmp(y),
        (Value::Decimal { unscaled: x, scale: s }, Value::Decimal { unscaled: y, scale: t }) => {
            assert_eq!(s, t, "decimals of different scales compared");
            x.cmp(y)
        }
        (Value::Float64(x), Value::Float64(y)) => x.total_cmp(y),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Date(x), Value::Date(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        _ => panic!("values of different types compared: {a:?} {b:?}"),
    }
    .then(rank(a).cmp(&rank(b)))
}

pub fn cmp_rows(a: &[Value], b: &[Value]) -> Ordering {
    a.iter()
        .zip(b)
        .map(|(x, y)| cmpv(x, y))
        .find(|o| o.is_ne())
        .unwrap_or(a.len().cmp(&b.len()))
}

fn cmp_keys(a: &[Value], b: &[Value], keys: &[SortKey]) -> Ordering {
    for k in keys {
        let o = cmpv(&a[k.col], &b[k.col]);
        let o = if k.desc { o.reverse() } else { o };
        if o.is_ne() {
            return o;
        }
    }
    Ordering::Equal
}

fn set(mut rows: Vec<Row>) -> Vec<Row> {
    rows.sort_by(|a, b| cmp_rows(a, b));
    rows.dedup_by(|a, b| cmp_rows(a, b).is_eq());
    rows
}

fn int(v: &Value) -> i128 {
    match v {
        Value::Int32(i) => i128::from(*i),
        Value::Int64(i) => i128::from(*i),
        Value::Decimal { unscaled, .. } => *unscaled,
        Value::Date(d) => i128::from(*d),
        _ => panic!("not a number: {v:?}"),
    }
}

fn make(ty: fox_sema::core::Type, i: i128) -> Value {
    use fox_sema::core::Type;
    match ty {
        Type::Int32 => Value::Int32(i as i32),
        Type::Int64 => Value::Int64(i as i64),
        Type::Decimal(s) => Value::Decimal { unscaled: i, scale: s },
        Type::Date => Value::Date(i as i32),
        t => panic!("no numbers of type {t}"),
    }
}

fn scale(v: &Value) -> u8 {
    match v {
        Value::Decimal { scale, .. } => *scale,
        _ => 0,
    }
}

pub fn eval(e: &Expr, row: &[Value]) -> Value {
    match &e.kind {
        ExprKind::Col(i) => row[*i].clone(),
        ExprKind::Const(v) => v.clone(),
        ExprKind::Cast(a) => {
            let x = eval(a, row);
            let s = match e.ty {
                fox_sema::core::Type::Decimal(s) => s,
                _ => 0,
            };
            make(e.ty, int(&x) * 10i128.pow(u32::from(s - scale(&x))))
        }
        ExprKind::Neg(a) => make(e.ty, -int(&eval(a, row))),
        ExprKind::Arith(op, a, b) => {
            let (x, y) = (eval(a, row), eval(b, row));
            let (xi, yi) = (int(&x), int(&y));
            let r = match op {
                ArithOp::Add => xi + yi,
                ArithOp::Sub => xi - yi,
                ArithOp::Mul => xi * yi,
                ArithOp::Div => xi / yi,
                ArithOp::Rem => xi % yi,
                op => panic!("the plans' evaluator has no {op:?}"),
            };
            make(e.ty, r)
        }
        ExprKind::Cmp(op, a, b) => {
            let o = cmpv(&eval(a, row), &eval(b, row));
            Value::Bool(match op {
                CmpOp::Eq => o.is_eq(),
                CmpOp::Ne => o.is_ne(),
                CmpOp::Lt => o.is_lt(),
                CmpOp::Le => o.is_le(),
                CmpOp::Gt => o.is_gt(),
                CmpOp::Ge => o.is_ge(),
            })
        }
        ExprKind::And(es) => Value::Bool(es.iter().all(|x| eval(x, row) == Value::Bool(true))),
        ExprKind::Or(es) => Value::Bool(es.iter().any(|x| eval(x, row) == Value::Bool(true))),
        ExprKind::Not(a) => Value::Bool(eval(a, row) == Value::Bool(false)),
        ExprKind::In(a, vs) => {
            let x = eval(a, row);
            Value::Bool(vs.iter().any(|v| cmpv(v, &x).is_eq()))
        }
        ExprKind::Call(f, _) => panic!("the reference interpreter has no {f:?}"),
    }
}

fn matches(l: &[Value], r: &[Value], lk: &[usize], rk: &[usize]) -> bool {
    lk.iter().zip(rk).all(|(&a, &b)| cmpv(&l[a], &r[b]).is_eq())
}

fn op(op: &Op, rels: &[Vec<Row>], temps: &BTreeMap<TempId, Vec<Row>>) -> Vec<Row> {
    let t = |id: &TempId| &temps[id];
    match op {
        Op::Scan(r) => rels[r.0 as usize].clone(),
        Op::Const(rows) => rows.clone(),
        Op::Select { input, pred } => t(input)
            .iter()
            .filter(|r| eval(pred, r) == Value::Bool(true))
            .cloned()
            .collect(),
        Op::Map { input, exprs } => t(input)
            .iter()
            .map(|r| exprs.iter().map(|e| eval(e, r)).collect())
            .collect(),
        Op::Project { input, cols } => t(input)
            .iter()
            .map(|r| cols.iter().map(|&c| r[c].clone()).collect())
            .collect(),
        Op::Join {
            left,
            right,
            left_keys,
            right_keys,
            output,
        } => {
            let mut out = Vec::new();
            for l in t(left) {
                for r in t(right) {
                    if matches(l, r, left_keys, right_keys) {
                        out.push(
                            output
                                .iter()
                                .map(|jc| match jc.side {
                                    Side::Left => l[jc.col].clone(),
                                    Side::Right => r[jc.col].clone(),
                                })
                                .collect(),
                        );
                    }
                }
            }
            out
        }
        Op::SemiJoin {
            left,
            right,
            left_keys,
            right_keys,
        } => t(left)
            .iter()
            .filter(|l| t(right).iter().any(|r| matches(l, r, left_keys, right_keys)))
            .cloned()
            .collect(),
        Op::AntiJoin {
            left,
            right,
            left_keys,
            right_keys,
        } => t(left)
            .iter()
            .filter(|l| !t(right).iter().any(|r| matches(l, r, left_keys, right_keys)))
            .cloned()
            .collect(),
        Op::Union(ts) => ts.iter().flat_map(|x| t(x).clone()).collect(),
        Op::Difference { left, right } => t(left)
            .iter()
            .filter(|l| !t(right).iter().any(|r| cmp_rows(l, r).is_eq()))
            .cloned()
            .collect(),
        Op::Aggregate { input, group, aggs } => {
            let mut groups: Vec<(Row, Vec<Row>)> = Vec::new();
            for r in t(input) {
                let k: Row = group.iter().map(|&c| r[c].clone()).collect();
                match groups.iter_mut().find(|(g, _)| cmp_rows(g, &k).is_eq()) {
                    Some((_, rows)) => rows.push(r.clone()),
                    None => groups.push((k, vec![r.clone()])),
                }
            }
            groups.sort_by(|a, b| cmp_rows(&a.0, &b.0));
            groups
                .into_iter()
                .map(|(mut k, rows)| {
                    for a in aggs {
                        let vals: Vec<Value> = rows
                            .iter()
                            .map(|r| a.arg.as_ref().map_or(Value::Bool(true), |e| eval(e, r)))
                            .collect();
                        k.push(match a.func {
                            AggFunc::Count => make(a.ty, vals.len() as i128),
                            AggFunc::Sum => make(a.ty, vals.iter().map(int).sum()),
                            AggFunc::Min => vals.iter().min_by(|x, y| cmpv(x, y)).cloned().unwrap(),
                            AggFunc::Max => vals.iter().max_by(|x, y| cmpv(x, y)).cloned().unwrap(),
                            AggFunc::Avg => panic!("the reference interpreter has no avg"),
                        });
                    }
                    k
                })
                .collect()
        }
        Op::Sort { input, keys } => {
            let mut rows = t(input).clone();
            rows.sort_by(|a, b| cmp_keys(a, b, keys));
            rows
        }
        Op::Unique(input) => set(t(input).clone()),
        Op::Limit { input, n } => t(input).iter().take(*n as usize).cloned().collect(),
        Op::MultiJoin {
            vars,
            inputs,
            output,
            count,
        } => {
            let mut bindings: Vec<Vec<Option<Value>>> = vec![vec![None; vars.len()]];
            for inp in inputs {
                let mut next = Vec::new();
                for b in &bindings {
                    for r in t(&inp.src) {
                        let mut nb = b.clone();
                        let ok = inp.vars.iter().zip(r).all(|(&v, x)| match &nb[v] {
                            Some(y) => cmpv(x, y).is_eq(),
                            None => {
                                nb[v] = Some(x.clone());
                                true
                            }
                        });
                        if ok {
                            next.push(nb);
                        }
                    }
                }
                bindings = next;
            }
            if *count {
                let n = set(bindings
                    .into_iter()
                    .map(|b| b.into_iter().map(Option::unwrap).collect())
                    .collect())
                .len();
                return if n == 0 {
                    Vec::new()
                } else {
                    vec![vec![Value::Int64(n as i64)]]
                };
            }
            let rows = bindings
                .into_iter()
                .map(|b| output.iter().map(|&v| b[v].clone().unwrap()).collect())
                .collect();
            set(rows)
        }
    }
}

fn check_props(rows: &[Row], props: &Props, what: &str) {
    if props.unique {
        let n = rows.len();
        assert_eq!(
            set(rows.to_vec()).len(),
            n,
            "{what} claims unique rows but has duplicates"
        );
    }
    for w in rows.windows(2) {
        assert!(
            cmp_keys(&w[0], &w[1], &props.sorted).is_le(),
            "{what} claims an order it does not have: {w:?}"
        );
    }
}

/// Runs a plan on the given input relations (by name); returns the outputs by name.
pub fn run(plan: &RaPlan, inputs: &[(&str, Vec<Row>)]) -> BTreeMap<String, Vec<Row>> {
    let mut rels: Vec<Vec<Row>> = vec![Vec::new(); plan.relations.len()];
    for (name, rows) in inputs {
        let i = plan
            .relations
            .iter()
            .position(|r| r.name == *name)
            .expect("no such input");
        rels[i] = rows.clone();
    }
    let mut out = BTreeMap::new();
    let mut b = plan.entry;
    let mut steps = 0;
    loop {
        steps += 1;
        assert!(steps < 10_000, "the plan does not terminate");
        let block = &plan.blocks[b.0 as usize];
        let mut temps = BTreeMap::new();
        for s in &block.stmts {
            match s {
                Stmt::Let { dst, op: o, .. } => {
                    let rows = op(o, &rels, &temps);
                    check_props(&rows, &plan.temps[dst.0 as usize].props, &format!("t{}", dst.0));
                    temps.insert(*dst, rows);
                }
                Stmt::Store { rel, src } => rels[rel.0 as usize] = temps[src].clone(),
                Stmt::Merge { into, from } => {
                    let mut rows = rels[into.0 as usize].clone();
                    rows.extend(rels[from.0 as usize].clone());
                    rels[into.0 as usize] = set(rows);
                }
                Stmt::Assign { dst, src } => rels[dst.0 as usize] = rels[src.0 as usize].clone(),
                Stmt::Clear { rel } => rels[rel.0 as usize].clear(),
                Stmt::Output { rel, src } => {
                    out.insert(plan.relations[rel.0 as usize].name.clone(), temps[src].clone());
                }
                Stmt::CheckFunctional { src, keys, pred, .. } => {
                    let rows = set(temps[src].clone());
                    let repeat = rows.windows(2).find(|w| w[0][..*keys] == w[1][..*keys]);
                    assert!(repeat.is_none(), "`{pred}` gives one key two values: {repeat:?}");
                }
            }
            for (i, r) in plan.relations.iter().enumerate() {
                check_props(&rels[i], &r.props, &r.name);
            }
        }
        b = match &block.term {
            Terminator::Jump(t) => *t,
            Terminator::Halt => return out,
            Terminator::LoopIf { nonempty, body, exit } => {
                if nonempty.iter().any(|r| !rels[r.0 as usize].is_empty()) {
                    *body
                } else {
                    *exit
                }
            }
        };
    }
}

pub fn ints(rows: &[&[i32]]) -> Vec<Row> {
    rows.iter()
        .map(|r| r.iter().map(|&i| Value::Int32(i)).collect())
        .collect()
}
