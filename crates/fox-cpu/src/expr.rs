//! `Eval`: typed scalar expressions over columns.
//!
//! A [`KExpr`] is first compiled into a typed tree ([`INode`] for values stored as
//! integers — ints, decimals, dates, string codes, bools — and [`FNode`] for floats), which
//! checks the types against the arguments, resolves string constants to codes and prepares
//! every error message. The tree is then evaluated column-wise over chunks of rows, in
//! parallel. A row whose evaluation fails carries the id of its error; `and`/`or` combine
//! their operands left to right and drop the errors of operands they do not need, so
//! `x != 0 and 10 / x > 1` never fails. The first failing row stops the run.

use crate::date::civil_from_days;
use crate::util::{chunks, elem_name, map_ranges, with_capacity, KResult};
use fox_kernel::{Elem, KExpr, KExprKind, ScalarFn};
use fox_runtime::{HostCol, LaunchCtx};
use fox_sema::core::{ArithOp, CmpOp, Type, Value, MAX_DATE, MAX_DECIMAL, MAX_WIDE_DECIMAL, MIN_DATE};

/// The largest number of fraction digits of a decimal.
const MAX_SCALE: u32 = 18;

/// Evaluates `expr` over the rows of `args[..n_cols]` (dictionary tables follow).
pub(crate) fn eval(expr: &KExpr, n_cols: usize, args: &[&HostCol], ctx: &dyn LaunchCtx) -> KResult<HostCol> {
    let n = check_args(n_cols, args)?;
    let prog = Compiled::new(expr, n_cols, args, ctx)?;
    let ranges = chunks(n);
    let parts = map_ranges(&ranges, |a, b| prog.run(args, a, b));
    for ((a, _), (_, err)) in ranges.iter().zip(&parts) {
        if let Some(err) = err {
            if let Some(row) = err.iter().position(|&e| e != 0) {
                let msg = &prog.msgs[err[row] as usize - 1];
                return Err(format!("{msg} (row {})", a + row));
            }
        }
    }
    match prog.root {
        Root::F(_) => {
            let mut out = with_capacity(n, "the evaluated column")?;
            for (p, _) in parts {
                if let Part::F(v) = p {
                    out.extend(v);
                }
            }
            Ok(HostCol::F64(out))
        }
        Root::I(_, elem, ty) if prog.wide => {
            let mut out = with_capacity(n, "the evaluated column")?;
            for (p, _) in parts {
                if let Part::W(v) = p {
                    out.extend(v);
                }
            }
            narrow_wide(out, elem, ty, &show(expr))
        }
        Root::I(_, elem, ty) => {
            let mut out = with_capacity(n, "the evaluated column")?;
            for (p, _) in parts {
                if let Part::I(v) = p {
                    out.extend(v);
                }
            }
            narrow(out, elem, ty, &show(expr))
        }
    }
}

/// The row count of `args[..n_cols]`, checked.
pub(crate) fn check_args(n_cols: usize, args: &[&HostCol]) -> KResult<usize> {
    if n_cols == 0 {
        return Err("needs at least one column argument to give the row count".to_string());
    }
    if args.len() < n_cols {
        return Err(format!("expects {n_cols} column argument(s), got {}", args.len()));
    }
    crate::util::common_len(&args[..n_cols], "columns")
}

/// An expression compiled against its arguments, to be evaluated a range of rows at a
/// time.
pub(crate) struct Compiled {
    root: Root,
    msgs: Vec<String>,
    /// Whether a value of the tree is a 38-digit decimal: then every integer-stored value
    /// is computed in 128 bits, otherwise in 64.
    wide: bool,
}

impl Compiled {
    pub(crate) fn new(expr: &KExpr, n_cols: usize, args: &[&HostCol], ctx: &dyn LaunchCtx) -> KResult<Compiled> {
        let mut c = Compiler {
            args,
            n_cols,
            ctx,
            msgs: Vec::new(),
        };
        let root = if expr.ty == Type::Float64 {
            Root::F(c.float(expr)?)
        } else {
            Root::I(c.int(expr)?, Elem::of(expr.ty), expr.ty)
        };
        Ok(Compiled {
            root,
            msgs: c.msgs,
            wide: expr.has_wide(),
        })
    }

    /// The values of rows `a..b` and, where a row failed, the error id per row (0: none).
    fn run(&self, args: &[&HostCol], a: usize, b: usize) -> (Part, Option<Vec<u32>>) {
        let ev = Ev {
            args,
            start: a,
            len: b - a,
        };
        match &self.root {
            Root::F(f) if self.wide => {
                let r = ev.float::<i128>(f);
                (Part::F(r.v), r.err)
            }
            Root::F(f) => {
                let r = ev.float::<i64>(f);
                (Part::F(r.v), r.err)
            }
            Root::I(i, _, _) if self.wide => {
                let r = ev.int::<i128>(i);
                (Part::W(r.v), r.err)
            }
            Root::I(i, _, _) => {
                let r = ev.int::<i64>(i);
                (Part::I(r.v), r.err)
            }
        }
    }

    /// The integer-stored values of rows `a..b` (before narrowing to the column's element
    /// type), or `None` when the expression is a float or a row in `a..b` for which
    /// `needed` holds failed.
    pub(crate) fn ints(
        &self,
        args: &[&HostCol],
        a: usize,
        b: usize,
        needed: impl Fn(usize) -> bool,
    ) -> Option<Vec<i64>> {
        let Root::I(_, elem, _) = self.root else {
            return None;
        };
        if self.wide {
            return None;
        }
        let (Part::I(v), err) = self.run(args, a, b) else {
            return None;
        };
        // The column would hold the value in `elem`: a value that does not fit is the
        // error `eval` reports when it narrows.
        let fits = |x: i64| match elem {
            Elem::U8 => u8::try_from(x).is_ok(),
            Elem::I32 => i32::try_from(x).is_ok(),
            Elem::U32 => u32::try_from(x).is_ok(),
            Elem::U64 => u64::try_from(x).is_ok(),
            Elem::I64 => true,
            Elem::F64 | Elem::I128 => false,
        };
        let ok = |i: usize, x: i64| !needed(i) || (err.as_ref().is_none_or(|e| e[i] == 0) && fits(x));
        v.iter().enumerate().all(|(i, &x)| ok(i, x)).then_some(v)
    }
}

enum Root {
    I(INode, Elem, Type),
    F(FNode),
}

enum Part {
    I(Vec<i64>),
    /// Values of a tree computed in 128 bits.
    W(Vec<i128>),
    F(Vec<f64>),
}

/// Stores integer results in the column's element type.
fn narrow(v: Vec<i64>, elem: Elem, ty: Type, what: &str) -> KResult<HostCol> {
    fn conv<T: TryFrom<i64>>(v: Vec<i64>, ty: Type, what: &str) -> KResult<Vec<T>> {
        let mut out = with_capacity(v.len(), "the evaluated column")?;
        for (i, x) in v.into_iter().enumerate() {
            out.push(T::try_from(x).map_err(|_| format!("`{what}` = {x} does not fit {ty} (row {i})"))?);
        }
        Ok(out)
    }
    Ok(match elem {
        Elem::U8 => HostCol::U8(conv(v, ty, what)?),
        Elem::I32 => HostCol::I32(conv(v, ty, what)?),
        Elem::U32 => HostCol::U32(conv(v, ty, what)?),
        Elem::I64 => HostCol::I64(v),
        Elem::U64 => HostCol::U64(conv(v, ty, what)?),
        Elem::I128 => {
            let mut out = with_capacity(v.len(), "the evaluated column")?;
            out.extend(v.into_iter().map(i128::from));
            HostCol::I128(out)
        }
        Elem::F64 => return Err(format!("`{what}` of type {ty} cannot be stored as f64")),
    })
}

/// Stores the results of a tree computed in 128 bits in the column's element type.
fn narrow_wide(v: Vec<i128>, elem: Elem, ty: Type, what: &str) -> KResult<HostCol> {
    if elem == Elem::I128 {
        return Ok(HostCol::I128(v));
    }
    let mut narrowed = with_capacity(v.len(), "the evaluated column")?;
    for (i, x) in v.into_iter().enumerate() {
        narrowed.push(i64::try_from(x).map_err(|_| format!("`{what}` = {x} does not fit {ty} (row {i})"))?);
    }
    narrow(narrowed, elem, ty, what)
}

// ---- the compiled tree ----------------------------------------------------------------

/// An error site: index into the compiler's messages.
type ErrId = u32;

#[derive(Clone, Copy)]
struct Range {
    min: i128,
    max: i128,
}

impl Range {
    fn of(ty: Type) -> Range {
        match ty {
            Type::Int32 => Range {
                min: i128::from(i32::MIN),
                max: i128::from(i32::MAX),
            },
            // 0000-01-01 ..= 9999-12-31.
            Type::Date => Range {
                min: i128::from(MIN_DATE),
                max: i128::from(MAX_DATE),
            },
            Type::String => Range {
                min: 0,
                max: i128::from(u32::MAX),
            },
            Type::Bool => Range { min: 0, max: 1 },
            Type::Int64 | Type::Float64 => Range {
                min: i128::from(i64::MIN),
                max: i128::from(i64::MAX),
            },
            // 18 digits.
            Type::Decimal(_) => Range {
                min: -MAX_DECIMAL,
                max: MAX_DECIMAL,
            },
            // 38 digits.
            Type::WideDecimal(_) => Range {
                min: -MAX_WIDE_DECIMAL,
                max: MAX_WIDE_DECIMAL,
            },
        }
    }

    /// `x` as a value of the tree's width `T`, when it is in range (a range never exceeds
    /// `T`: 64-bit trees hold no 38-digit type).
    fn fit<T: Int>(self, x: i128, err: ErrId) -> Result<T, ErrId> {
        if x >= self.min && x <= self.max {
            Ok(T::of(x))
        } else {
            Err(err)
        }
    }
}

#[derive(Clone, Copy)]
enum DatePart {
    Year,
    Month,
    Day,
}

/// A node whose values are stored as integers.
enum INode {
    Col(usize),
    Table {
        table: usize,
        idx: Box<INode>,
        err: ErrId,
    },
    Const(i128),
    /// `round_or_truncate(x / div) * mul`, checked against `range`.
    Scale {
        x: Box<INode>,
        div: i128,
        mul: i128,
        round: bool,
        range: Range,
        err: ErrId,
    },
    /// Truncation toward zero of a float.
    FromFloat {
        x: Box<FNode>,
        range: Range,
        err: ErrId,
    },
    Neg {
        x: Box<INode>,
        range: Range,
        err: ErrId,
    },
    Abs {
        x: Box<INode>,
        range: Range,
        err: ErrId,
    },
    /// Plain integer arithmetic (ints, same-scale decimal `+`/`-`, dates ± days,
    /// date − date); `/` truncates.
    Arith {
        op: ArithOp,
        a: Box<INode>,
        b: Box<INode>,
        range: Range,
        err: ErrId,
        err_div: ErrId,
    },
    /// Decimal product: `a * b` at the sum of the scales, then `round(p / div) * mul`.
    DecMul {
        a: Box<INode>,
        b: Box<INode>,
        div: i128,
        mul: i128,
        range: Range,
        err: ErrId,
    },
    /// Decimal quotient: `round_half_away(a * num / (b * den))`.
    DecDiv {
        a: Box<INode>,
        b: Box<INode>,
        num: i128,
        den: i128,
        range: Range,
        err: ErrId,
        err_div: ErrId,
    },
    CmpI(CmpOp, Box<INode>, Box<INode>),
    CmpF(CmpOp, Box<FNode>, Box<FNode>),
    And(Vec<INode>),
    Or(Vec<INode>),
    Not(Box<INode>),
    InI(Box<INode>, Vec<i128>),
    InF(Box<FNode>, Vec<f64>),
    Date(DatePart, Box<INode>),
}

/// A node whose values are floats.
enum FNode {
    Col(usize),
    Const(f64),
    /// `x / div` where `x` is an integer or a decimal of scale `log10(div)`.
    FromInt {
        x: Box<INode>,
        div: f64,
    },
    Neg(Box<FNode>),
    Abs(Box<FNode>),
    Arith {
        op: ArithOp,
        a: Box<FNode>,
        b: Box<FNode>,
        err_div: ErrId,
    },
    Round {
        x: Box<FNode>,
        digits: i32,
    },
}

fn pow10(k: u32) -> Option<i128> {
    10i128.checked_pow(k)
}

/// `n / d` rounded half away from zero (`None` when `d` is 0 or the quotient overflows).
pub(crate) fn div_round_half_away(n: i128, d: i128) -> Option<i128> {
    let q = n.checked_div(d)?;
    let r = n.checked_rem(d)?;
    if r != 0 && r.unsigned_abs() >= d.unsigned_abs() - r.unsigned_abs() {
        Some(if (n < 0) != (d < 0) { q - 1 } else { q + 1 })
    } else {
        Some(q)
    }
}

/// The scale of a type stored as a scaled integer (0 for integers).
fn scale_of(ty: Type) -> Option<u32> {
    match ty {
        Type::Int32 | Type::Int64 => Some(0),
        Type::Decimal(s) | Type::WideDecimal(s) => Some(u32::from(s)),
        _ => None,
    }
}

fn is_integral(ty: Type) -> bool {
    matches!(ty, Type::Int32 | Type::Int64)
}

struct Compiler<'a> {
    args: &'a [&'a HostCol],
    n_cols: usize,
    ctx: &'a dyn LaunchCtx,
    msgs: Vec<String>,
}

impl Compiler<'_> {
    fn err(&mut self, msg: String) -> ErrId {
        self.msgs.push(msg);
        self.msgs.len() as ErrId
    }

    fn overflow(&mut self, e: &KExpr) -> ErrId {
        self.err(format!("overflow: `{}` does not fit {}", show(e), e.ty))
    }

    fn div_zero(&mut self, e: &KExpr) -> ErrId {
        self.err(format!("division by zero in `{}`", show(e)))
    }

    fn col(&self, i: usize, e: &KExpr) -> KResult<usize> {
        let Some(c) = self.args[..self.n_cols].get(i) else {
            return Err(format!(
                "`{}` reads column {i}, but there are {} columns",
                show(e),
                self.n_cols
            ));
        };
        let want = Elem::of(e.ty);
        if c.elem() != want {
            return Err(format!(
                "column {i} is {}, but `{}` has type {} (stored as {})",
                elem_name(c.elem()),
                show(e),
                e.ty,
                elem_name(want)
            ));
        }
        Ok(i)
    }

    /// A constant stored as an integer of type `ty`.
    fn const_int(&self, v: &Value, ty: Type) -> KResult<i128> {
        let bad = || format!("constant {} does not have type {ty}", show_value(v));
        let range = Range::of(ty);
        let fit = |x: i128| range.fit::<i128>(x, 0).map_err(|_| bad());
        match (v, ty) {
            (Value::Int32(i), _) if scale_of(ty).is_some() => {
                fit(i128::from(*i) * pow10(scale_of(ty).unwrap_or(0)).ok_or_else(bad)?)
            }
            (Value::Int64(i), _) if scale_of(ty).is_some() => {
                fit(i128::from(*i) * pow10(scale_of(ty).unwrap_or(0)).ok_or_else(bad)?)
            }
            (Value::Decimal { unscaled, scale }, Type::Decimal(s) | Type::WideDecimal(s)) => {
                let (from, to) = (u32::from(*scale), u32::from(s));
                if to >= from {
                    fit(unscaled
                        .checked_mul(pow10(to - from).ok_or_else(bad)?)
                        .ok_or_else(bad)?)
                } else {
                    let d = pow10(from - to).ok_or_else(bad)?;
                    if unscaled % d != 0 {
                        return Err(bad());
                    }
                    fit(unscaled / d)
                }
            }
            (Value::Date(d), Type::Date) => Ok(i128::from(*d)),
            (Value::Bool(b), Type::Bool) => Ok(i128::from(*b)),
            (Value::String(s), Type::String) => self
                .ctx
                .string_code(s)
                .map(i128::from)
                .ok_or_else(|| format!("string constant {s:?} has no dictionary code")),
            _ => Err(bad()),
        }
    }

    fn const_float(&self, v: &Value) -> KResult<f64> {
        match v {
            Value::Float64(x) => Ok(*x),
            Value::Int32(i) => Ok(f64::from(*i)),
            Value::Int64(i) => Ok(*i as f64),
            Value::Decimal { unscaled, scale } => Ok(*unscaled as f64 / 10f64.powi(i32::from(*scale))),
            other => Err(format!("constant {} is not a number", show_value(other))),
        }
    }

    fn digits(&self, e: &KExpr, d: &KExpr) -> KResult<u32> {
        let n = match &d.kind {
            KExprKind::Const(Value::Int32(n)) => i64::from(*n),
            KExprKind::Const(Value::Int64(n)) => *n,
            _ => return Err(format!("the digits of `{}` must be an integer constant", show(e))),
        };
        u32::try_from(n)
            .ok()
            .filter(|d| *d <= MAX_SCALE)
            .ok_or_else(|| format!("the digits of `{}` must be from 0 to {MAX_SCALE}", show(e)))
    }

    fn int(&mut self, e: &KExpr) -> KResult<INode> {
        if e.ty == Type::Float64 {
            return Err(format!(
                "`{}` is float64 where an integer-stored value is expected",
                show(e)
            ));
        }
        let range = Range::of(e.ty);
        Ok(match &e.kind {
            KExprKind::Col(i) => INode::Col(self.col(*i, e)?),
            KExprKind::Table(t, x) => {
                let Some((table, col)) = self
                    .n_cols
                    .checked_add(*t)
                    .and_then(|table| Some((table, self.args.get(table)?)))
                else {
                    return Err(format!(
                        "`{}` reads table {t}, which is not among the arguments",
                        show(e)
                    ));
                };
                if !matches!(col.elem(), Elem::U8 | Elem::I32 | Elem::U32 | Elem::I64) {
                    return Err(format!(
                        "table {t} is {}, not a dictionary table",
                        elem_name(col.elem())
                    ));
                }
                let err = self.err(format!("string code outside dictionary table {t} in `{}`", show(e)));
                INode::Table {
                    table,
                    idx: Box::new(self.int(x)?),
                    err,
                }
            }
            KExprKind::Const(v) => INode::Const(self.const_int(v, e.ty)?),
            KExprKind::Cast(x) => self.cast(e, x)?,
            KExprKind::Neg(x) => {
                if scale_of(e.ty).is_none() {
                    return Err(format!("cannot negate {} in `{}`", e.ty, show(e)));
                }
                let err = self.overflow(e);
                INode::Neg {
                    x: Box::new(self.int(x)?),
                    range,
                    err,
                }
            }
            KExprKind::Arith(op, a, b) => self.arith(e, *op, a, b)?,
            KExprKind::Cmp(op, a, b) => {
                if a.ty == Type::Float64 || b.ty == Type::Float64 {
                    INode::CmpF(*op, Box::new(self.float(a)?), Box::new(self.float(b)?))
                } else {
                    let same = a.ty == b.ty || (is_integral(a.ty) && is_integral(b.ty));
                    if !same {
                        return Err(format!("cannot compare {} with {} in `{}`", a.ty, b.ty, show(e)));
                    }
                    INode::CmpI(*op, Box::new(self.int(a)?), Box::new(self.int(b)?))
                }
            }
            KExprKind::And(xs) => INode::And(self.bools(xs)?),
            KExprKind::Or(xs) => INode::Or(self.bools(xs)?),
            KExprKind::Not(x) => INode::Not(Box::new(self.bools(std::slice::from_ref(&**x))?.remove(0))),
            KExprKind::In(x, vs) => {
                if x.ty == Type::Float64 {
                    let vs = vs.iter().map(|v| self.const_float(v)).collect::<KResult<_>>()?;
                    INode::InF(Box::new(self.float(x)?), vs)
                } else {
                    let vs = vs.iter().map(|v| self.const_int(v, x.ty)).collect::<KResult<_>>()?;
                    INode::InI(Box::new(self.int(x)?), vs)
                }
            }
            KExprKind::Call(f, xs) => self.call(e, *f, xs)?,
        })
    }

    fn bools(&mut self, xs: &[KExpr]) -> KResult<Vec<INode>> {
        xs.iter()
            .map(|x| {
                if x.ty != Type::Bool {
                    return Err(format!("`{}` is {}, not bool", show(x), x.ty));
                }
                self.int(x)
            })
            .collect()
    }

    fn cast(&mut self, e: &KExpr, x: &KExpr) -> KResult<INode> {
        let (from, to) = (x.ty, e.ty);
        if from == to {
            return self.int(x);
        }
        let range = Range::of(to);
        let err = self.overflow(e);
        if from == Type::Float64 && is_integral(to) {
            return Ok(INode::FromFloat {
                x: Box::new(self.float(x)?),
                range,
                err,
            });
        }
        let (Some(sf), Some(st)) = (scale_of(from), scale_of(to)) else {
            return Err(format!("cannot cast {from} to {to} in `{}`", show(e)));
        };
        let too_big = || format!("the rescale in `{}` exceeds 38 digits", show(e));
        let (div, mul, round) = if is_integral(to) {
            // to_int of a decimal truncates toward zero.
            (pow10(sf).ok_or_else(too_big)?, 1, false)
        } else if st >= sf {
            (1, pow10(st - sf).ok_or_else(too_big)?, false)
        } else {
            (pow10(sf - st).ok_or_else(too_big)?, 1, true)
        };
        Ok(INode::Scale {
            x: Box::new(self.int(x)?),
            div,
            mul,
            round,
            range,
            err,
        })
    }

    fn arith(&mut self, e: &KExpr, op: ArithOp, a: &KExpr, b: &KExpr) -> KResult<INode> {
        let range = Range::of(e.ty);
        let bad = || {
            format!(
                "cannot apply {op:?} to {} and {} giving {} in `{}`",
                a.ty,
                b.ty,
                e.ty,
                show(e)
            )
        };
        if let Type::Decimal(r) | Type::WideDecimal(r) = e.ty {
            let r = u32::from(r);
            let (Some(sa), Some(sb)) = (scale_of(a.ty), scale_of(b.ty)) else {
                return Err(bad());
            };
            let err = self.overflow(e);
            let too_big = || format!("the scales in `{}` exceed 38 digits", show(e));
            return Ok(match op {
                ArithOp::Add | ArithOp::Sub => {
                    if sa != r || sb != r {
                        return Err(format!(
                            "the operands of `{}` must have the result's scale {r}, not {sa} and {sb}",
                            show(e)
                        ));
                    }
                    let err_div = err;
                    INode::Arith {
                        op,
                        a: Box::new(self.int(a)?),
                        b: Box::new(self.int(b)?),
                        range,
                        err,
                        err_div,
                    }
                }
                ArithOp::Mul => {
                    let p = sa + sb;
                    let (div, mul) = if r >= p {
                        (1, pow10(r - p).ok_or_else(too_big)?)
                    } else {
                        (pow10(p - r).ok_or_else(too_big)?, 1)
                    };
                    INode::DecMul {
                        a: Box::new(self.int(a)?),
                        b: Box::new(self.int(b)?),
                        div,
                        mul,
                        range,
                        err,
                    }
                }
                ArithOp::Div => {
                    // a/10^sa / (b/10^sb) at scale r: a * 10^(r + sb - sa) / b.
                    let k = r as i64 + sb as i64 - sa as i64;
                    let (num, den) = if k >= 0 {
                        (pow10(k as u32).ok_or_else(too_big)?, 1)
                    } else {
                        (1, pow10((-k) as u32).ok_or_else(too_big)?)
                    };
                    let err_div = self.div_zero(e);
                    INode::DecDiv {
                        a: Box::new(self.int(a)?),
                        b: Box::new(self.int(b)?),
                        num,
                        den,
                        range,
                        err,
                        err_div,
                    }
                }
            });
        }
        let ok = match (e.ty, a.ty, b.ty) {
            (Type::Int64, Type::Date, Type::Date) => op == ArithOp::Sub,
            (Type::Int32 | Type::Int64, x, y) => is_integral(x) && is_integral(y),
            (Type::Date, Type::Date, y) => is_integral(y) && matches!(op, ArithOp::Add | ArithOp::Sub),
            (Type::Date, x, Type::Date) => is_integral(x) && op == ArithOp::Add,
            _ => false,
        };
        if !ok {
            return Err(bad());
        }
        let err = self.overflow(e);
        let err_div = self.div_zero(e);
        Ok(INode::Arith {
            op,
            a: Box::new(self.int(a)?),
            b: Box::new(self.int(b)?),
            range,
            err,
            err_div,
        })
    }

    fn call(&mut self, e: &KExpr, f: ScalarFn, xs: &[KExpr]) -> KResult<INode> {
        let arity = if f == ScalarFn::Round { 2 } else { 1 };
        if xs.len() != arity {
            return Err(format!("`{}` takes {arity} argument(s), got {}", show(e), xs.len()));
        }
        let x = &xs[0];
        Ok(match f {
            ScalarFn::Year | ScalarFn::Month | ScalarFn::Day => {
                if x.ty != Type::Date {
                    return Err(format!("`{}` needs a date, got {}", show(e), x.ty));
                }
                let part = match f {
                    ScalarFn::Year => DatePart::Year,
                    ScalarFn::Month => DatePart::Month,
                    _ => DatePart::Day,
                };
                INode::Date(part, Box::new(self.int(x)?))
            }
            ScalarFn::Abs => {
                if scale_of(x.ty).is_none() {
                    return Err(format!("`{}` needs a number, got {}", show(e), x.ty));
                }
                let err = self.overflow(e);
                INode::Abs {
                    x: Box::new(self.int(x)?),
                    range: Range::of(e.ty),
                    err,
                }
            }
            ScalarFn::Round => {
                let digits = self.digits(e, &xs[1])?;
                let (Some(s), Some(r)) = (scale_of(x.ty), scale_of(e.ty)) else {
                    return Err(format!("`{}` needs a number, got {}", show(e), x.ty));
                };
                let m = s.min(digits);
                if r < m {
                    return Err(format!("`{}` has scale {r}, below the {m} digits it keeps", show(e)));
                }
                let err = self.overflow(e);
                let too_big = || format!("the scales in `{}` exceed 38 digits", show(e));
                INode::Scale {
                    x: Box::new(self.int(x)?),
                    div: pow10(s - m).ok_or_else(too_big)?,
                    mul: pow10(r - m).ok_or_else(too_big)?,
                    round: true,
                    range: Range::of(e.ty),
                    err,
                }
            }
        })
    }

    fn float(&mut self, e: &KExpr) -> KResult<FNode> {
        if e.ty != Type::Float64 {
            if let Some(s) = scale_of(e.ty) {
                // An integer or decimal operand where a float is needed.
                return Ok(FNode::FromInt {
                    x: Box::new(self.int(e)?),
                    div: 10f64.powi(s as i32),
                });
            }
            return Err(format!("`{}` is {}, not a number", show(e), e.ty));
        }
        Ok(match &e.kind {
            KExprKind::Col(i) => FNode::Col(self.col(*i, e)?),
            KExprKind::Const(v) => FNode::Const(self.const_float(v)?),
            KExprKind::Cast(x) => self.float(x)?,
            KExprKind::Neg(x) => FNode::Neg(Box::new(self.float(x)?)),
            KExprKind::Arith(op, a, b) => {
                let err_div = self.div_zero(e);
                FNode::Arith {
                    op: *op,
                    a: Box::new(self.float(a)?),
                    b: Box::new(self.float(b)?),
                    err_div,
                }
            }
            KExprKind::Call(ScalarFn::Abs, xs) if xs.len() == 1 => FNode::Abs(Box::new(self.float(&xs[0])?)),
            KExprKind::Call(ScalarFn::Round, xs) if xs.len() == 2 => FNode::Round {
                digits: self.digits(e, &xs[1])? as i32,
                x: Box::new(self.float(&xs[0])?),
            },
            _ => return Err(format!("`{}` cannot have type float64", show(e))),
        })
    }
}

// ---- evaluation -----------------------------------------------------------------------

/// The integer width a tree is computed in: `i64`, or `i128` when it holds a 38-digit
/// decimal. Operations widen to `i128`, check against the node's range and narrow back.
trait Int: Copy + PartialOrd + Send + Sync + 'static {
    /// `x`, which the caller has checked to be in range.
    fn of(x: i128) -> Self;
    fn wide(self) -> i128;
    fn as_f64(self) -> f64;
}

impl Int for i64 {
    #[inline]
    fn of(x: i128) -> i64 {
        x as i64
    }
    #[inline]
    fn wide(self) -> i128 {
        i128::from(self)
    }
    #[inline]
    fn as_f64(self) -> f64 {
        self as f64
    }
}

impl Int for i128 {
    #[inline]
    fn of(x: i128) -> i128 {
        x
    }
    #[inline]
    fn wide(self) -> i128 {
        self
    }
    #[inline]
    fn as_f64(self) -> f64 {
        self as f64
    }
}

/// Values of one chunk and, where any row failed, the error id per row (0: none).
struct IV<T> {
    v: Vec<T>,
    err: Option<Vec<u32>>,
}

struct FV {
    v: Vec<f64>,
    err: Option<Vec<u32>>,
}

fn failed(err: &Option<Vec<u32>>, i: usize) -> bool {
    err.as_ref().is_some_and(|e| e[i] != 0)
}

fn set_err(err: &mut Option<Vec<u32>>, n: usize, i: usize, id: ErrId) {
    let e = err.get_or_insert_with(|| vec![0; n]);
    if e[i] == 0 {
        e[i] = id;
    }
}

/// The row errors of two operands, the left one's first.
fn merge_err(a: Option<Vec<u32>>, b: Option<Vec<u32>>) -> Option<Vec<u32>> {
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some(mut a), Some(b)) => {
            for (x, y) in a.iter_mut().zip(b) {
                if *x == 0 {
                    *x = y;
                }
            }
            Some(a)
        }
    }
}

fn un_i<T: Int>(x: IV<T>, f: impl Fn(T) -> Result<T, ErrId>) -> IV<T> {
    let IV { mut v, mut err } = x;
    let n = v.len();
    for (i, x) in v.iter_mut().enumerate() {
        if failed(&err, i) {
            continue;
        }
        match f(*x) {
            Ok(y) => *x = y,
            Err(id) => set_err(&mut err, n, i, id),
        }
    }
    IV { v, err }
}

fn bin_i<T: Int>(a: IV<T>, b: IV<T>, f: impl Fn(T, T) -> Result<T, ErrId>) -> IV<T> {
    let IV { mut v, err } = a;
    let mut err = merge_err(err, b.err);
    let n = v.len();
    for (i, (x, y)) in v.iter_mut().zip(&b.v).enumerate() {
        if failed(&err, i) {
            continue;
        }
        match f(*x, *y) {
            Ok(r) => *x = r,
            Err(id) => set_err(&mut err, n, i, id),
        }
    }
    IV { v, err }
}

/// The operator with its operands swapped: `a op b` is `b flipped(op) a`.
fn flipped(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::Le => CmpOp::Ge,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::Ge => CmpOp::Le,
        CmpOp::Eq | CmpOp::Ne => op,
    }
}

/// `v[i] = v[i] op c` as 0 or 1, one loop per operator so that each vectorises.
fn cmp_const<T: Int>(op: CmpOp, v: &mut [T], c: T) {
    macro_rules! each {
        ($op:tt) => {
            v.iter_mut().for_each(|x| *x = T::of(i128::from(*x $op c)))
        };
    }
    match op {
        CmpOp::Eq => each!(==),
        CmpOp::Ne => each!(!=),
        CmpOp::Lt => each!(<),
        CmpOp::Le => each!(<=),
        CmpOp::Gt => each!(>),
        CmpOp::Ge => each!(>=),
    }
}

fn cmp_result<T: PartialOrd>(op: CmpOp, a: T, b: T) -> bool {
    match op {
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
    }
}

struct Ev<'a> {
    args: &'a [&'a HostCol],
    start: usize,
    len: usize,
}

impl Ev<'_> {
    fn read_int<T: Int>(&self, col: &HostCol) -> Vec<T> {
        let r = self.start..self.start + self.len;
        match col {
            HostCol::U8(v) => v[r].iter().map(|&x| T::of(i128::from(x))).collect(),
            HostCol::I32(v) => v[r].iter().map(|&x| T::of(i128::from(x))).collect(),
            HostCol::U32(v) => v[r].iter().map(|&x| T::of(i128::from(x))).collect(),
            HostCol::I64(v) => v[r].iter().map(|&x| T::of(i128::from(x))).collect(),
            HostCol::U64(v) => v[r].iter().map(|&x| T::of(i128::from(x as i64))).collect(),
            HostCol::F64(v) => v[r].iter().map(|&x| T::of(x as i64 as i128)).collect(),
            HostCol::I128(v) => v[r].iter().map(|&x| T::of(x)).collect(),
        }
    }

    fn int<T: Int>(&self, node: &INode) -> IV<T> {
        let n = self.len;
        match node {
            INode::Col(i) => IV {
                v: self.read_int(self.args[*i]),
                err: None,
            },
            INode::Table { table, idx, err } => {
                let t = self.args[*table];
                let tl = t.len();
                un_i(self.int::<T>(idx), |c| {
                    let c = c.wide();
                    if c < 0 || c >= tl as i128 {
                        return Err(*err);
                    }
                    let c = c as usize;
                    Ok(T::of(match t {
                        HostCol::U8(v) => i128::from(v[c]),
                        HostCol::I32(v) => i128::from(v[c]),
                        HostCol::U32(v) => i128::from(v[c]),
                        HostCol::I64(v) => i128::from(v[c]),
                        HostCol::U64(v) => i128::from(v[c] as i64),
                        HostCol::F64(v) => v[c] as i64 as i128,
                        HostCol::I128(v) => v[c],
                    }))
                })
            }
            INode::Const(c) => IV {
                v: vec![T::of(*c); n],
                err: None,
            },
            INode::Scale {
                x,
                div,
                mul,
                round,
                range,
                err,
            } => un_i(self.int::<T>(x), |v| {
                let mut y = v.wide();
                if *div != 1 {
                    y = if *round {
                        div_round_half_away(y, *div).ok_or(*err)?
                    } else {
                        y / *div
                    };
                }
                range.fit(y.checked_mul(*mul).ok_or(*err)?, *err)
            }),
            INode::FromFloat { x, range, err } => {
                let FV { v, err: e } = self.float::<T>(x);
                let mut out = IV {
                    v: vec![T::of(0); n],
                    err: e,
                };
                for (i, x) in v.iter().enumerate() {
                    if failed(&out.err, i) {
                        continue;
                    }
                    let t = x.trunc();
                    // i64 bounds are exact powers of two in f64.
                    if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&t) {
                        match range.fit(t as i128, *err) {
                            Ok(y) => out.v[i] = y,
                            Err(id) => set_err(&mut out.err, n, i, id),
                        }
                    } else {
                        set_err(&mut out.err, n, i, *err);
                    }
                }
                out
            }
            INode::Neg { x, range, err } => un_i(self.int::<T>(x), |v| {
                range.fit(v.wide().checked_neg().ok_or(*err)?, *err)
            }),
            INode::Abs { x, range, err } => un_i(self.int::<T>(x), |v| {
                range.fit(v.wide().checked_abs().ok_or(*err)?, *err)
            }),
            INode::Arith {
                op,
                a,
                b,
                range,
                err,
                err_div,
            } => bin_i(self.int::<T>(a), self.int::<T>(b), |x, y| {
                let (x, y) = (x.wide(), y.wide());
                let r = match op {
                    ArithOp::Add => x.checked_add(y),
                    ArithOp::Sub => x.checked_sub(y),
                    ArithOp::Mul => x.checked_mul(y),
                    ArithOp::Div => {
                        if y == 0 {
                            return Err(*err_div);
                        }
                        x.checked_div(y)
                    }
                };
                range.fit(r.ok_or(*err)?, *err)
            }),
            INode::DecMul {
                a,
                b,
                div,
                mul,
                range,
                err,
            } => bin_i(self.int::<T>(a), self.int::<T>(b), |x, y| {
                let mut p = x.wide().checked_mul(y.wide()).ok_or(*err)?;
                if *div != 1 {
                    p = div_round_half_away(p, *div).ok_or(*err)?;
                }
                range.fit(p.checked_mul(*mul).ok_or(*err)?, *err)
            }),
            INode::DecDiv {
                a,
                b,
                num,
                den,
                range,
                err,
                err_div,
            } => bin_i(self.int::<T>(a), self.int::<T>(b), |x, y| {
                let (x, y) = (x.wide(), y.wide());
                if y == 0 {
                    return Err(*err_div);
                }
                let n = x.checked_mul(*num).ok_or(*err)?;
                let d = y.checked_mul(*den).ok_or(*err)?;
                range.fit(div_round_half_away(n, d).ok_or(*err)?, *err)
            }),
            // A comparison cannot fail: rows where an operand failed keep that error, and
            // their values are never read.
            INode::CmpI(op, a, b) => match (&**a, &**b) {
                (_, INode::Const(c)) => {
                    let mut x = self.int::<T>(a);
                    cmp_const(*op, &mut x.v, T::of(*c));
                    x
                }
                (INode::Const(c), _) => {
                    let mut y = self.int::<T>(b);
                    cmp_const(flipped(*op), &mut y.v, T::of(*c));
                    y
                }
                _ => {
                    let (x, y) = (self.int::<T>(a), self.int::<T>(b));
                    let mut v = x.v;
                    for (p, &q) in v.iter_mut().zip(&y.v) {
                        *p = T::of(i128::from(cmp_result(*op, *p, q)));
                    }
                    IV {
                        v,
                        err: merge_err(x.err, y.err),
                    }
                }
            },
            INode::CmpF(op, a, b) => {
                let (a, b) = (self.float::<T>(a), self.float::<T>(b));
                IV {
                    v: a.v
                        .iter()
                        .zip(&b.v)
                        .map(|(x, y)| T::of(i128::from(cmp_result(*op, *x, *y))))
                        .collect(),
                    err: merge_err(a.err, b.err),
                }
            }
            INode::And(xs) => self.junction(xs, 1),
            INode::Or(xs) => self.junction(xs, 0),
            INode::Not(x) => un_i(self.int::<T>(x), |v| Ok(T::of(i128::from(v.wide() == 0)))),
            INode::InI(x, vs) => un_i(self.int::<T>(x), |v| Ok(T::of(i128::from(vs.contains(&v.wide()))))),
            INode::InF(x, vs) => {
                let x = self.float::<T>(x);
                IV {
                    v: x.v.iter().map(|v| T::of(i128::from(vs.contains(v)))).collect(),
                    err: x.err,
                }
            }
            INode::Date(part, x) => un_i(self.int::<T>(x), |d| {
                let (y, m, day) = civil_from_days(d.wide() as i64);
                Ok(T::of(match part {
                    DatePart::Year => i128::from(y),
                    DatePart::Month => i128::from(m),
                    DatePart::Day => i128::from(day),
                }))
            }),
        }
    }

    /// `and` (`unit` 1) or `or` (`unit` 0): operands left to right; a row is decided by
    /// the first operand that is not `unit` or that failed.
    fn junction<T: Int>(&self, xs: &[INode], unit: i64) -> IV<T> {
        let n = self.len;
        let unit = T::of(i128::from(unit));
        let flip = T::of(1 - unit.wide());
        let mut v = vec![unit; n];
        let mut err = None;
        let mut decided = vec![false; n];
        for x in xs {
            if decided.iter().all(|d| *d) {
                break;
            }
            let r = self.int::<T>(x);
            if r.err.is_none() {
                for ((vi, di), &ri) in v.iter_mut().zip(decided.iter_mut()).zip(&r.v) {
                    let hit = ri != unit;
                    *vi = if hit && !*di { flip } else { *vi };
                    *di |= hit;
                }
                continue;
            }
            for i in 0..n {
                if decided[i] {
                    continue;
                }
                if failed(&r.err, i) {
                    let id = r.err.as_ref().map_or(0, |e| e[i]);
                    set_err(&mut err, n, i, id);
                    decided[i] = true;
                } else if r.v[i] != unit {
                    v[i] = flip;
                    decided[i] = true;
                }
            }
        }
        IV { v, err }
    }

    fn float<T: Int>(&self, node: &FNode) -> FV {
        let n = self.len;
        match node {
            FNode::Col(i) => {
                let r = self.start..self.start + n;
                let v = match self.args[*i] {
                    HostCol::F64(v) => v[r].to_vec(),
                    other => self.read_int::<T>(other).into_iter().map(T::as_f64).collect(),
                };
                FV { v, err: None }
            }
            FNode::Const(c) => FV {
                v: vec![*c; n],
                err: None,
            },
            FNode::FromInt { x, div } => {
                let x = self.int::<T>(x);
                FV {
                    v: x.v.into_iter().map(|v| v.as_f64() / div).collect(),
                    err: x.err,
                }
            }
            FNode::Neg(x) => {
                let mut x = self.float::<T>(x);
                x.v.iter_mut().for_each(|v| *v = -*v);
                x
            }
            FNode::Abs(x) => {
                let mut x = self.float::<T>(x);
                x.v.iter_mut().for_each(|v| *v = v.abs());
                x
            }
            FNode::Round { x, digits } => {
                let mut x = self.float::<T>(x);
                let m = 10f64.powi(*digits);
                for v in x.v.iter_mut() {
                    let s = *v * m;
                    if s.is_finite() {
                        *v = s.round() / m;
                    }
                }
                x
            }
            FNode::Arith { op, a, b, err_div } => {
                let (a, b) = (self.float::<T>(a), self.float::<T>(b));
                let mut err = merge_err(a.err, b.err);
                let mut v = a.v;
                for (i, (x, &y)) in v.iter_mut().zip(&b.v).enumerate() {
                    *x = match op {
                        ArithOp::Add => *x + y,
                        ArithOp::Sub => *x - y,
                        ArithOp::Mul => *x * y,
                        ArithOp::Div => {
                            if y == 0.0 && !failed(&err, i) {
                                set_err(&mut err, n, i, *err_div);
                            }
                            *x / y
                        }
                    };
                }
                FV { v, err }
            }
        }
    }
}

// ---- display --------------------------------------------------------------------------

/// The text of a constant for messages.
pub fn show_value(v: &Value) -> String {
    match v {
        Value::Int32(i) => i.to_string(),
        Value::Int64(i) => i.to_string(),
        Value::Decimal { unscaled, scale } => {
            let s = u32::from(*scale);
            let digits = unscaled.unsigned_abs().to_string();
            let sign = if *unscaled < 0 { "-" } else { "" };
            if s == 0 {
                format!("{sign}{digits}")
            } else {
                let padded = format!("{digits:0>width$}", width = s as usize + 1);
                let (int, frac) = padded.split_at(padded.len() - s as usize);
                format!("{sign}{int}.{frac}")
            }
        }
        Value::Float64(x) => format!("{x:?}"),
        Value::String(s) => format!("{s:?}"),
        Value::Date(d) => {
            let (y, m, d) = civil_from_days(i64::from(*d));
            format!("date(\"{y:04}-{m:02}-{d:02}\")")
        }
        Value::Bool(b) => b.to_string(),
    }
}

fn op_symbol(op: ArithOp) -> &'static str {
    match op {
        ArithOp::Add => "+",
        ArithOp::Sub => "-",
        ArithOp::Mul => "*",
        ArithOp::Div => "/",
    }
}

fn cmp_symbol(op: CmpOp) -> &'static str {
    match op {
        CmpOp::Eq => "=",
        CmpOp::Ne => "!=",
        CmpOp::Lt => "<",
        CmpOp::Le => "<=",
        CmpOp::Gt => ">",
        CmpOp::Ge => ">=",
    }
}

/// The text of an expression for messages: `c0` is column argument 0, `t0[…]` a lookup
/// in dictionary table 0.
pub fn show(e: &KExpr) -> String {
    let join = |xs: &[KExpr], sep: &str| xs.iter().map(show).collect::<Vec<_>>().join(sep);
    match &e.kind {
        KExprKind::Col(i) => format!("c{i}"),
        KExprKind::Table(t, x) => format!("t{t}[{}]", show(x)),
        KExprKind::Const(v) => show_value(v),
        KExprKind::Cast(x) => format!("{}({})", e.ty, show(x)),
        KExprKind::Neg(x) => format!("-{}", show(x)),
        KExprKind::Arith(op, a, b) => format!("({} {} {})", show(a), op_symbol(*op), show(b)),
        KExprKind::Cmp(op, a, b) => format!("({} {} {})", show(a), cmp_symbol(*op), show(b)),
        KExprKind::And(xs) => format!("({})", join(xs, " and ")),
        KExprKind::Or(xs) => format!("({})", join(xs, " or ")),
        KExprKind::Not(x) => format!("!{}", show(x)),
        KExprKind::In(x, vs) => format!(
            "{} in ({})",
            show(x),
            vs.iter().map(show_value).collect::<Vec<_>>().join(", ")
        ),
        KExprKind::Call(f, xs) => {
            let name = match f {
                ScalarFn::Year => "year",
                ScalarFn::Month => "month",
                ScalarFn::Day => "day",
                ScalarFn::Abs => "abs",
                ScalarFn::Round => "round",
            };
            format!("{name}({})", join(xs, ", "))
        }
    }
}
