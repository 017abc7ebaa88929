//! Expressions: typed RA expressions become `Eval` kernels over column buffers, string
//! functions become dictionary kernels.

use super::*;

/// The arguments of an `Eval` being built.
#[derive(Default)]
pub(super) struct ExprCx {
    pub(super) args: Vec<BufId>,
    pub(super) tables: Vec<BufId>,
}

impl ExprCx {
    pub(super) fn arg(&mut self, b: BufId) -> usize {
        match self.args.iter().position(|&a| a == b) {
            Some(i) => i,
            None => {
                self.args.push(b);
                self.args.len() - 1
            }
        }
    }
}

impl Lower<'_> {
    /// A column holding `e` over the rows of `v`: the column itself for a column
    /// reference, the output of a string function, or an `Eval`.
    pub(super) fn expr_col(&mut self, v: &Val, e: &Expr, label: &str) -> R<BufId> {
        match &e.kind {
            ExprKind::Col(i) => {
                return v
                    .cols
                    .get(*i)
                    .copied()
                    .ok_or_else(|| LowerError::Invalid(format!("an expression reads column {i} of {}", v.arity())))
            }
            ExprKind::Call(b, args) if b.is_host() => return self.str_fn(v, *b, args, label),
            _ => {}
        }
        let mut cx = ExprCx::default();
        let k = self.kexpr(v, &mut cx, e)?;
        if cx.args.is_empty() {
            cx.args.push(v.cols[0]);
        }
        let n_cols = cx.args.len();
        let mut args = cx.args;
        args.extend(cx.tables);
        let ty = if label == "flags" { None } else { Some(e.ty) };
        self.launch1(Kernel::Eval { expr: k, n_cols }, args, label, ty)
    }

    /// A built-in that works on the text of strings (`substr`, `concat`, `to_string`,
    /// `to_number`, `to_unsigned`) over the rows of `v`: its arguments as columns, then
    /// the host kernel.
    pub(super) fn str_fn(&mut self, v: &Val, b: Builtin, args: &[Expr], label: &str) -> R<BufId> {
        let (func, want): (StrFunc, &[Type]) = match b {
            Builtin::Substr => (StrFunc::Substr, &[Type::String, Type::Int64, Type::Int64]),
            Builtin::Concat => (StrFunc::Concat, &[Type::String, Type::String]),
            Builtin::ToString => (StrFunc::ToString, &[Type::Int64]),
            Builtin::ToNumber => (StrFunc::ToNumber, &[Type::String]),
            Builtin::ToUnsigned => (StrFunc::ToUnsigned, &[Type::String]),
            other => {
                return Err(LowerError::Invalid(format!(
                    "`{}` is not a string function",
                    other.name()
                )))
            }
        };
        if args.len() != want.len() {
            return Err(LowerError::Invalid(format!(
                "{func:?} takes {} arguments, found {}",
                want.len(),
                args.len()
            )));
        }
        let mut cols = Vec::with_capacity(args.len());
        for (i, (a, &t)) in args.iter().zip(want).enumerate() {
            // A constant after the first argument is one row, the value of every row (as
            // `substr(s, 1, 2)`'s start and length), not a column of the rows' length.
            if i > 0 {
                if let Some(value) = const_arg(a, t) {
                    let kernel = Kernel::Const {
                        types: vec![t],
                        rows: vec![vec![value]],
                    };
                    cols.push(self.launch1(kernel, Vec::new(), &format!("{label}.arg{i}"), Some(t))?);
                    continue;
                }
            }
            let a = if a.ty == t {
                a.clone()
            } else {
                Expr {
                    kind: ExprKind::Cast(Box::new(a.clone())),
                    ty: t,
                }
            };
            cols.push(self.expr_col(v, &a, &format!("{label}.arg{i}"))?);
        }
        let ty = if func.output() == Elem::U32 {
            Type::String
        } else {
            Type::Int64
        };
        let out = self.launch1(Kernel::StrFn { func }, cols, label, Some(ty))?;
        if ty == Type::String {
            // The dictionary grew: tables computed before no longer cover every code.
            self.tables.clear();
        }
        Ok(out)
    }

    pub(super) fn kexpr(&mut self, v: &Val, cx: &mut ExprCx, e: &Expr) -> R<KExpr> {
        let ty = e.ty;
        let node = |kind| KExpr { kind, ty };
        Ok(match &e.kind {
            ExprKind::Col(i) => {
                let b = *v
                    .cols
                    .get(*i)
                    .ok_or_else(|| LowerError::Invalid(format!("an expression reads column {i} of {}", v.arity())))?;
                node(KExprKind::Col(cx.arg(b)))
            }
            ExprKind::Const(c) => node(KExprKind::Const(c.clone())),
            ExprKind::Cast(a) => node(KExprKind::Cast(Box::new(self.kexpr(v, cx, a)?))),
            ExprKind::Neg(a) => node(KExprKind::Neg(Box::new(self.kexpr(v, cx, a)?))),
            ExprKind::Not(a) => node(KExprKind::Not(Box::new(self.kexpr(v, cx, a)?))),
            ExprKind::Arith(op, a, b) => {
                let (a, b) = (self.kexpr(v, cx, a)?, self.kexpr(v, cx, b)?);
                node(KExprKind::Arith(*op, Box::new(a), Box::new(b)))
            }
            ExprKind::Cmp(op, a, b) => {
                let string = a.ty == Type::String;
                let (mut a, mut b) = (self.kexpr(v, cx, a)?, self.kexpr(v, cx, b)?);
                if string && !matches!(op, CmpOp::Eq | CmpOp::Ne) {
                    let t = self.table(cx, DictOp::Rank)?;
                    let rank = |x: KExpr| KExpr {
                        kind: KExprKind::Table(t, Box::new(x)),
                        ty: Type::Int64,
                    };
                    a = rank(a);
                    b = rank(b);
                }
                node(KExprKind::Cmp(*op, Box::new(a), Box::new(b)))
            }
            ExprKind::And(es) => node(KExprKind::And(
                es.iter().map(|a| self.kexpr(v, cx, a)).collect::<R<_>>()?,
            )),
            ExprKind::Or(es) => node(KExprKind::Or(
                es.iter().map(|a| self.kexpr(v, cx, a)).collect::<R<_>>()?,
            )),
            ExprKind::In(a, vals) => node(KExprKind::In(Box::new(self.kexpr(v, cx, a)?), vals.clone())),
            ExprKind::Call(b, args) => match b {
                Builtin::Like | Builtin::Prefix | Builtin::Regex => {
                    let name = b.name();
                    let [s, p] = args.as_slice() else {
                        return Err(LowerError::Invalid(format!("`{name}` takes two arguments")));
                    };
                    let ExprKind::Const(Value::String(pat)) = &p.kind else {
                        return Err(LowerError::Unsupported(format!(
                            "the pattern of `{name}` must be a string constant"
                        )));
                    };
                    let s = self.kexpr(v, cx, s)?;
                    let op = match b {
                        Builtin::Like => DictOp::Like(pat.clone()),
                        Builtin::Regex => DictOp::Regex(pat.clone()),
                        _ => DictOp::Prefix(pat.clone()),
                    };
                    let t = self.table(cx, op)?;
                    KExpr {
                        kind: KExprKind::Table(t, Box::new(s)),
                        ty: Type::Bool,
                    }
                }
                Builtin::Strlen => {
                    let [s] = args.as_slice() else {
                        return Err(LowerError::Invalid("`strlen` takes one argument".into()));
                    };
                    let s = self.kexpr(v, cx, s)?;
                    let t = self.table(cx, DictOp::Strlen)?;
                    let len = KExpr {
                        kind: KExprKind::Table(t, Box::new(s)),
                        ty: Type::Int32,
                    };
                    if ty == Type::Int32 {
                        len
                    } else {
                        node(KExprKind::Cast(Box::new(len)))
                    }
                }
                Builtin::Substr | Builtin::Concat | Builtin::ToString | Builtin::ToNumber | Builtin::ToUnsigned => {
                    let col = self.str_fn(v, *b, args, "str")?;
                    node(KExprKind::Col(cx.arg(col)))
                }
                Builtin::BitNot | Builtin::LogNot | Builtin::Unsigned => {
                    let f = match b {
                        Builtin::BitNot => ScalarFn::BitNot,
                        Builtin::LogNot => ScalarFn::LogNot,
                        _ => ScalarFn::Unsigned,
                    };
                    let args = args.iter().map(|a| self.kexpr(v, cx, a)).collect::<R<_>>()?;
                    node(KExprKind::Call(f, args))
                }
                Builtin::Min | Builtin::Max => {
                    let f = if *b == Builtin::Min {
                        ScalarFn::Min
                    } else {
                        ScalarFn::Max
                    };
                    let mut ks: Vec<KExpr> = args.iter().map(|a| self.kexpr(v, cx, a)).collect::<R<_>>()?;
                    if ty == Type::String {
                        // Strings compare by text: by their ranks.
                        let t = self.table(cx, DictOp::Rank)?;
                        let keys: Vec<KExpr> = ks
                            .iter()
                            .map(|x| KExpr {
                                kind: KExprKind::Table(t, Box::new(x.clone())),
                                ty: Type::Int64,
                            })
                            .collect();
                        ks.extend(keys);
                    }
                    node(KExprKind::Call(f, ks))
                }
                Builtin::Year | Builtin::Month | Builtin::Day | Builtin::Abs | Builtin::Round => {
                    let f = match b {
                        Builtin::Year => ScalarFn::Year,
                        Builtin::Month => ScalarFn::Month,
                        Builtin::Day => ScalarFn::Day,
                        Builtin::Abs => ScalarFn::Abs,
                        _ => ScalarFn::Round,
                    };
                    let args = args.iter().map(|a| self.kexpr(v, cx, a)).collect::<R<_>>()?;
                    node(KExprKind::Call(f, args))
                }
            },
        })
    }

    /// The index of a dictionary table among the expression's tables.
    pub(super) fn table(&mut self, cx: &mut ExprCx, op: DictOp) -> R<usize> {
        let b = self.dict_table(op)?;
        Ok(match cx.tables.iter().position(|&t| t == b) {
            Some(i) => i,
            None => {
                cx.tables.push(b);
                cx.tables.len() - 1
            }
        })
    }
}

/// The value of `a` as a `t` where `a` is a literal (an integer literal as an int64 too).
fn const_arg(a: &Expr, t: Type) -> Option<Value> {
    let ExprKind::Const(v) = &a.kind else {
        return None;
    };
    match (v, t) {
        (Value::Int64(_), Type::Int64) | (Value::String(_), Type::String) => Some(v.clone()),
        (Value::Int32(x), Type::Int64) => Some(Value::Int64(i64::from(*x))),
        _ => None,
    }
}
