//! Builders for core programs, so tests read close to the LogiQL they stand for.
#![allow(dead_code)]

use fox_sema::core::*;
use fox_syntax::ast::Span;

pub fn sp() -> Span {
    Span::new(0, 0)
}

pub struct Prog {
    pub core: CoreProgram,
}

impl Prog {
    pub fn new() -> Prog {
        Prog {
            core: CoreProgram {
                preds: Vec::new(),
                strata: Vec::new(),
                inputs: Vec::new(),
                outputs: Vec::new(),
            },
        }
    }

    pub fn pred(&mut self, name: &str, cols: &[(&str, Type)]) -> PredId {
        self.core.preds.push(PredInfo {
            name: name.into(),
            columns: cols
                .iter()
                .map(|(n, t)| Column {
                    name: n.to_string(),
                    ty: *t,
                })
                .collect(),
            functional_keys: None,
            input: false,
            span: sp(),
        });
        PredId(self.core.preds.len() as u32 - 1)
    }

    pub fn input(&mut self, name: &str, cols: &[(&str, Type)]) -> PredId {
        let p = self.pred(name, cols);
        self.core.preds[p.0 as usize].input = true;
        self.core.inputs.push(InputSpec {
            pred: p,
            file: format!("{name}.csv"),
            sep: ",".into(),
            key: Vec::new(),
            header: false,
            span: sp(),
        });
        p
    }

    pub fn stratum(&mut self, preds: &[PredId], recursive: bool, rules: Vec<CoreRule>, facts: Vec<Fact>) {
        self.core.strata.push(Stratum {
            preds: preds.to_vec(),
            recursive,
            facts,
            rules,
        });
    }

    pub fn output(&mut self, pred: PredId, order_by: &[(usize, bool)], limit: Option<u64>) {
        self.core.outputs.push(OutputSpec {
            pred,
            order_by: order_by.to_vec(),
            limit,
            span: sp(),
        });
    }
}

pub fn fact(pred: PredId, values: Vec<Value>) -> Fact {
    Fact {
        pred,
        values,
        span: sp(),
    }
}

#[derive(Default)]
pub struct Rule {
    pub vars: Vec<VarInfo>,
    pub body: Vec<CoreLit>,
    pub aggs: Option<Vec<CoreAgg>>,
}

impl Rule {
    pub fn new() -> Rule {
        Rule::default()
    }

    pub fn var(&mut self, name: &str, ty: Type) -> VarId {
        self.vars.push(VarInfo {
            name: name.into(),
            ty,
            generated: name.starts_with('_'),
        });
        VarId(self.vars.len() as u32 - 1)
    }

    pub fn atom(&mut self, pred: PredId, args: Vec<Term>) -> &mut Rule {
        self.body.push(CoreLit::Atom { pred, args, span: sp() });
        self
    }

    pub fn not(&mut self, pred: PredId, args: Vec<Term>) -> &mut Rule {
        self.body.push(CoreLit::NotAtom { pred, args, span: sp() });
        self
    }

    pub fn filter(&mut self, cond: CExpr) -> &mut Rule {
        self.body.push(CoreLit::Filter { cond, span: sp() });
        self
    }

    pub fn assign(&mut self, var: VarId, expr: CExpr) -> &mut Rule {
        self.body.push(CoreLit::Assign { var, expr, span: sp() });
        self
    }

    pub fn agg(&mut self, var: VarId, func: AggFunc, arg: Option<CExpr>) -> &mut Rule {
        self.aggs.get_or_insert_with(Vec::new).push(CoreAgg { var, func, arg });
        self
    }

    pub fn ty(&self, v: VarId) -> Type {
        self.vars[v.0 as usize].ty
    }

    /// A variable as an expression.
    pub fn e(&self, v: VarId) -> CExpr {
        CExpr {
            kind: CExprKind::Var(v),
            ty: self.ty(v),
        }
    }

    pub fn head(&self, head: PredId, args: Vec<Term>) -> CoreRule {
        CoreRule {
            head,
            head_args: args,
            vars: self.vars.clone(),
            body: self.body.clone(),
            aggs: self.aggs.clone(),
            span: sp(),
        }
    }
}

pub mod eval;

pub fn v(x: VarId) -> Term {
    Term::Var(x)
}

pub fn c(x: Value) -> Term {
    Term::Const(x)
}

pub fn cmp(op: CmpOp, a: CExpr, b: CExpr) -> CExpr {
    CExpr {
        kind: CExprKind::Cmp(op, Box::new(a), Box::new(b)),
        ty: Type::Bool,
    }
}

pub fn lit(v: Value, ty: Type) -> CExpr {
    CExpr {
        kind: CExprKind::Const(v),
        ty,
    }
}

pub fn arith(op: ArithOp, a: CExpr, b: CExpr, ty: Type) -> CExpr {
    CExpr {
        kind: CExprKind::Arith(op, Box::new(a), Box::new(b)),
        ty,
    }
}
