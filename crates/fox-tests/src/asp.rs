//! Integer programs as ASP, evaluated by clingo, to check the reference evaluator.
//!
//! The translation covers the core constructs over integers: atoms, negated atoms,
//! comparisons, in-lists, `+ - *`, `abs`, and the aggregates `count`, `sum`, `min`, `max`.
//! Each predicate `p` becomes `p<id>`, each variable `V<id>`. An aggregation rule becomes
//! a domain rule for its groups and an ASP aggregate over the tuples of all body variables,
//! so that it ranges over distinct bindings exactly as the language says:
//!
//! ```text
//! dom3(V0) :- body.
//! p5(V0, V7) :- dom3(V0), V7 = #sum{ V2, V0, V1, V2 : body }.
//! ```

use crate::reference::Inputs;
use fox_sema::core::{AggFunc, ArithOp, Builtin, CExpr, CExprKind, CmpOp, CoreLit, CoreProgram, CoreRule, Term, Value};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::process::{Command, Stdio};

/// The ASP text of a program and its inputs, with `#show` for every output predicate.
pub fn translate(prog: &CoreProgram, inputs: &Inputs) -> Result<String, String> {
    let mut t = Tr {
        out: String::new(),
        aux: 0,
    };
    for spec in &prog.inputs {
        let info = &prog.preds[spec.pred.0 as usize];
        for row in inputs.get(&info.name).ok_or(format!("no rows for `{}`", info.name))? {
            let vals: Vec<String> = row.iter().map(int).collect::<Result<_, _>>()?;
            t.fact(spec.pred.0, &vals);
        }
    }
    for stratum in &prog.strata {
        for f in &stratum.facts {
            let vals: Vec<String> = f.values.iter().map(int).collect::<Result<_, _>>()?;
            t.fact(f.pred.0, &vals);
        }
        for r in &stratum.rules {
            t.rule(r)?;
        }
    }
    for spec in &prog.outputs {
        let n = prog.preds[spec.pred.0 as usize].columns.len();
        let _ = writeln!(t.out, "#show p{}/{n}.", spec.pred.0);
    }
    Ok(t.out)
}

fn int(v: &Value) -> Result<String, String> {
    match v {
        Value::Int32(i) => Ok(i.to_string()),
        Value::Int64(i) if i32::try_from(*i).is_ok() => Ok(i.to_string()),
        other => Err(format!("{other:?} is not a 32-bit integer")),
    }
}

struct Tr {
    out: String,
    aux: usize,
}

fn atom(pred: u32, args: &[String]) -> String {
    if args.is_empty() {
        format!("p{pred}")
    } else {
        format!("p{pred}({})", args.join(","))
    }
}

fn terms(args: &[Term]) -> Result<Vec<String>, String> {
    args.iter()
        .map(|a| match a {
            Term::Var(v) => Ok(format!("V{}", v.0)),
            Term::Const(c) => int(c),
        })
        .collect()
}

fn cmp(op: CmpOp, negate: bool) -> &'static str {
    let op = if negate { op.negated() } else { op };
    match op {
        CmpOp::Eq => "=",
        CmpOp::Ne => "!=",
        CmpOp::Lt => "<",
        CmpOp::Le => "<=",
        CmpOp::Gt => ">",
        CmpOp::Ge => ">=",
    }
}

impl Tr {
    fn fact(&mut self, pred: u32, vals: &[String]) {
        let _ = writeln!(self.out, "{}.", atom(pred, vals));
    }

    fn term(&self, e: &CExpr) -> Result<String, String> {
        Ok(match &e.kind {
            CExprKind::Var(v) => format!("V{}", v.0),
            CExprKind::Const(c) => int(c)?,
            CExprKind::Cast(a) if matches!(a.ty, fox_sema::core::Type::Int32 | fox_sema::core::Type::Int64) => {
                self.term(a)?
            }
            CExprKind::Neg(a) => format!("-({})", self.term(a)?),
            CExprKind::Arith(op, a, b) => {
                let sym = match op {
                    ArithOp::Add => "+",
                    ArithOp::Sub => "-",
                    ArithOp::Mul => "*",
                    other => return Err(format!("{other:?} is not translated")),
                };
                format!("({}{sym}{})", self.term(a)?, self.term(b)?)
            }
            CExprKind::Call(Builtin::Abs, args) if args.len() == 1 => format!("|{}|", self.term(&args[0])?),
            other => return Err(format!("{other:?} is not translated")),
        })
    }

    /// Body literals testing `cond` (negated when `negate`).
    fn cond(&mut self, cond: &CExpr, negate: bool, lits: &mut Vec<String>) -> Result<(), String> {
        match &cond.kind {
            CExprKind::Cmp(op, a, b) => lits.push(format!("{}{}{}", self.term(a)?, cmp(*op, negate), self.term(b)?)),
            CExprKind::Not(a) => self.cond(a, !negate, lits)?,
            CExprKind::And(xs) if !negate => {
                for x in xs {
                    self.cond(x, false, lits)?;
                }
            }
            CExprKind::Or(xs) if negate => {
                for x in xs {
                    self.cond(x, true, lits)?;
                }
            }
            CExprKind::In(a, list) => {
                self.aux += 1;
                let name = format!("in{}", self.aux);
                for c in list {
                    let _ = writeln!(self.out, "{name}({}).", int(c)?);
                }
                let not = if negate { "not " } else { "" };
                lits.push(format!("{not}{name}({})", self.term(a)?));
            }
            other => return Err(format!("condition {other:?} is not translated")),
        }
        Ok(())
    }

    fn body(&mut self, r: &CoreRule) -> Result<Vec<String>, String> {
        let mut lits = Vec::new();
        for l in &r.body {
            match l {
                CoreLit::Atom { pred, args, .. } => lits.push(atom(pred.0, &terms(args)?)),
                CoreLit::NotAtom { pred, args, .. } => lits.push(format!("not {}", atom(pred.0, &terms(args)?))),
                CoreLit::Assign { var, expr, .. } => lits.push(format!("V{}={}", var.0, self.term(expr)?)),
                CoreLit::Filter { cond, .. } => self.cond(cond, false, &mut lits)?,
            }
        }
        Ok(lits)
    }

    fn rule(&mut self, r: &CoreRule) -> Result<(), String> {
        let head = atom(r.head.0, &terms(&r.head_args)?);
        let body = self.body(r)?;
        let Some(aggs) = &r.aggs else {
            let _ = writeln!(self.out, "{head} :- {}.", body.join(", "));
            return Ok(());
        };
        let agg_vars: BTreeSet<u32> = aggs.iter().map(|a| a.var.0).collect();
        let keys: Vec<String> = r
            .head_args
            .iter()
            .filter_map(|a| match a {
                Term::Var(v) if !agg_vars.contains(&v.0) => Some(format!("V{}", v.0)),
                _ => None,
            })
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut body_vars: BTreeSet<u32> = BTreeSet::new();
        for l in &r.body {
            match l {
                CoreLit::Atom { args, .. } => body_vars.extend(args.iter().filter_map(|a| match a {
                    Term::Var(v) => Some(v.0),
                    Term::Const(_) => None,
                })),
                CoreLit::Assign { var, .. } => {
                    body_vars.insert(var.0);
                }
                _ => {}
            }
        }
        let tuple: Vec<String> = std::iter::once("0".to_string())
            .chain(body_vars.iter().map(|v| format!("V{v}")))
            .collect();
        self.aux += 1;
        let dom = format!("dom{}", self.aux);
        let dom_atom = if keys.is_empty() {
            dom.clone()
        } else {
            format!("{dom}({})", keys.join(","))
        };
        let _ = writeln!(self.out, "{dom_atom} :- {}.", body.join(", "));
        let mut lits = vec![dom_atom];
        let cond = body.join(", ");
        for a in aggs {
            let (func, weight) = match (a.func, &a.arg) {
                (AggFunc::Count, _) => ("#count", None),
                (AggFunc::Sum, Some(e)) => ("#sum", Some(self.term(e)?)),
                (AggFunc::Min, Some(e)) => ("#min", Some(self.term(e)?)),
                (AggFunc::Max, Some(e)) => ("#max", Some(self.term(e)?)),
                (f, _) => return Err(format!("aggregate {f:?} is not translated")),
            };
            let elems = match weight {
                Some(w) => format!("{w},{}", tuple.join(",")),
                None => tuple.join(","),
            };
            lits.push(format!("V{} = {func}{{ {elems} : {cond} }}", a.var.0));
        }
        let _ = writeln!(self.out, "{head} :- {}.", lits.join(", "));
        Ok(())
    }
}

/// The line that separates programs on the runner's standard input.
const SEPARATOR: &str = "%% ---- next program ----";

/// The Python program that runs clingo on each program of its standard input and prints
/// the atoms of each answer set.
const RUNNER: &str = r#"
import sys
import clingo
for prog in sys.stdin.read().split("%% ---- next program ----\n"):
    print("PROGRAM")
    ctl = clingo.Control(["--models=0", "--warn=none"])
    ctl.add("base", [], prog)
    ctl.ground([("base", [])])
    def show(m):
        print("MODEL")
        for s in m.symbols(shown=True):
            print(s)
    ctl.solve(on_model=show)
"#;

/// Whether the `clingo` Python module can be imported.
pub fn clingo_available() -> bool {
    Command::new("python3")
        .args(["-c", "import clingo"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// One answer set: `(predicate id, arguments)` of every shown atom.
pub type Model = BTreeSet<(u32, Vec<i64>)>;

/// Runs clingo on each ASP program (in one process) and returns the answer sets of each.
pub fn solve_all(programs: &[String]) -> Result<Vec<Vec<Model>>, String> {
    use std::io::Write as _;
    let mut child = Command::new("python3")
        .args(["-c", RUNNER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start python3: {e}"))?;
    let input = programs.join(&format!("{SEPARATOR}\n"));
    let mut stdin = child.stdin.take().ok_or("no stdin for python3")?;
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().map_err(|e| format!("clingo failed: {e}"))?;
    writer
        .join()
        .map_err(|_| "the writer thread panicked".to_string())?
        .map_err(|e| format!("cannot write to clingo: {e}"))?;
    if !out.status.success() {
        return Err(format!("clingo failed:\n{}", String::from_utf8_lossy(&out.stderr)));
    }
    let mut results: Vec<Vec<Model>> = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        match line {
            "PROGRAM" => results.push(Vec::new()),
            "MODEL" => results
                .last_mut()
                .ok_or("a model before any program")?
                .push(Model::new()),
            atom => {
                let models = results
                    .last_mut()
                    .ok_or(format!("clingo printed `{atom}` outside a program"))?;
                let m = models
                    .last_mut()
                    .ok_or(format!("clingo printed `{atom}` outside a model"))?;
                m.insert(parse_atom(atom)?);
            }
        }
    }
    if results.len() != programs.len() {
        return Err(format!(
            "clingo answered {} programs of {}",
            results.len(),
            programs.len()
        ));
    }
    Ok(results)
}

fn parse_atom(s: &str) -> Result<(u32, Vec<i64>), String> {
    let bad = || format!("unexpected clingo atom `{s}`");
    let (name, args) = match s.split_once('(') {
        Some((n, rest)) => (n, rest.strip_suffix(')').ok_or_else(bad)?),
        None => (s, ""),
    };
    let id = name.strip_prefix('p').and_then(|n| n.parse().ok()).ok_or_else(bad)?;
    let vals = if args.is_empty() {
        Vec::new()
    } else {
        args.split(',')
            .map(|a| a.trim().parse().map_err(|_| bad()))
            .collect::<Result<_, _>>()?
    };
    Ok((id, vals))
}
