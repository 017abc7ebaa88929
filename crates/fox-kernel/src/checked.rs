//! The checked form of a kernel expression: a [`KExpr`] type-checked against the element
//! types of its launch's arguments into a tree of [`INode`]s (values stored as integers)
//! and [`FNode`]s (floats), with string constants resolved to their dictionary codes,
//! every decimal rescale worked out, and every error a row can raise numbered with its
//! message. Every backend consumes this form (the CPU evaluates it, the CUDA generator
//! translates it), so the checks, the arithmetic and the messages are the same on each.
//!
//! It is also the one type checker of kernel expressions: the contract of `Eval` and
//! `FusedReduce` ([`crate::kernel_outputs`], so [`crate::check_args`] and
//! [`crate::validate`]) checks their expressions with [`check_types`]. So an expression
//! that a plan's validation or a launch's check accepts has a checked form, whatever
//! dictionary its string constants are resolved in (only a string without a code fails).
//!
//! A node's operands are evaluated left to right and a row fails with the first error
//! met; `and`/`or` stop at the first operand that decides the row, so the operands they
//! do not need never fail. Integer-stored values are computed in 64 bits, or in 128 when
//! the tree holds a 38-digit decimal ([`Checked::wide`]), and checked against their
//! node's [`Range`].

use crate::arith::scale_of;
use crate::ir::{Elem, KExpr, KExprKind, ScalarFn};
use crate::print::{show_kexpr as show, show_value};
use fox_ra::{value_has_type, value_type};
use fox_sema::core::{ArithOp, CmpOp, Type, Value, MAX_DATE, MAX_DECIMAL, MAX_SCALE, MAX_WIDE_DECIMAL, MIN_DATE};

/// A checked expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    pub root: Root,
    /// The message of error id `k` is `msgs[k - 1]`.
    pub msgs: Vec<String>,
    /// Whether a value of the tree is a 38-digit decimal: then every integer-stored value
    /// is computed in 128 bits, otherwise in 64.
    pub wide: bool,
    /// The expression's type; its values are stored as `Elem::of(ty)`.
    pub ty: Type,
    /// The expression as messages print it.
    pub what: String,
}

/// The root of a checked tree.
#[derive(Clone, Debug, PartialEq)]
pub enum Root {
    Int(INode),
    Float(FNode),
}

impl INode {
    /// Whether the node's value may fall outside its type's range without an error of
    /// its own (a table entry, a part of a date): storing it narrower checks it.
    pub fn unranged(&self) -> bool {
        matches!(self, INode::Table { .. } | INode::Date(..))
    }
}

/// Checks `expr`, the expression of `Eval { expr, n_cols }`, against arguments of the
/// element types `elems` (the columns, then the dictionary tables), resolving string
/// constants with `string_code`. The error is a plan error (types that do not fit,
/// columns or tables that are not there, a string constant without a code).
pub fn check_expr(
    expr: &KExpr,
    n_cols: usize,
    elems: &[Elem],
    string_code: &dyn Fn(&str) -> Option<u32>,
) -> Result<Checked, String> {
    let mut c = Checker {
        elems,
        n_cols: n_cols.min(elems.len()),
        string_code,
        msgs: Vec::new(),
    };
    let root = if expr.ty == Type::Float64 {
        Root::Float(c.float(expr)?)
    } else {
        Root::Int(c.int(expr)?)
    };
    Ok(Checked {
        root,
        msgs: c.msgs,
        wide: expr.has_wide(),
        ty: expr.ty,
        what: show(expr),
    })
}

/// Checks `expr`, the expression of `Eval { expr, n_cols }`, against arguments of the
/// element types `elems` by every rule of [`check_expr`] but one: string constants are
/// not resolved (a plan read from disk has no dictionary).
pub fn check_types(expr: &KExpr, n_cols: usize, elems: &[Elem]) -> Result<(), String> {
    check_expr(expr, n_cols, elems, &|_| Some(0)).map(|_| ())
}

/// The type an entry of a dictionary table of element type `table` reads as in an
/// expression: a rank (`U32`) as int64, a flag (`U8`) as bool, a length (`I32`) as int32;
/// `None` for an element type no dictionary table has.
fn table_type(table: Elem) -> Option<Type> {
    match table {
        Elem::U32 => Some(Type::Int64),
        Elem::U8 => Some(Type::Bool),
        Elem::I32 => Some(Type::Int32),
        _ => None,
    }
}

/// An error site: the message of error id `k` is `Checked::msgs[k - 1]` (0 is no error).
pub type ErrId = u32;

/// The values a type may hold, as integers (its element type's range; 18 digits for a
/// decimal, 38 for a wide one; dates from 0000-01-01 to 9999-12-31). A computed value out
/// of its node's range is the node's overflow error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub min: i128,
    pub max: i128,
}

impl Range {
    pub fn of(ty: Type) -> Range {
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

    pub fn contains(self, x: i128) -> bool {
        x >= self.min && x <= self.max
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatePart {
    Year,
    Month,
    Day,
}

/// A node whose values are stored as integers (ints, decimals, dates, string codes,
/// bools), in 64 bits or, in a tree that holds a 38-digit decimal, 128.
#[derive(Clone, Debug, PartialEq)]
pub enum INode {
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
    /// date − date); `/` truncates; Soufflé's `%` (C's remainder: `err_div` for a zero
    /// divisor, `err` for the smallest int64 by -1) and `^` ([`crate::int_pow`]: `err_div`
    /// for 0 to a negative power, `err` where it has no exact value) on int64.
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
    /// Soufflé's bitwise and logical operators on int64 ([`crate::int_bits`]): never fail.
    Bits {
        op: ArithOp,
        a: Box<INode>,
        b: Box<INode>,
    },
    /// `!x` on int64 (Soufflé's `bnot`).
    BitNot(Box<INode>),
    /// `min` (`b < a ? b : a`) or `max` (`a < b ? b : a`) of `a` and `b`, compared by
    /// themselves or, with `keys`, by `ka` and `kb` (string ranks).
    MinMax {
        max: bool,
        a: Box<INode>,
        b: Box<INode>,
        keys: Option<(Box<INode>, Box<INode>)>,
    },
}

/// A node whose values are floats.
#[derive(Clone, Debug, PartialEq)]
pub enum FNode {
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
    /// `min` (`b < a ? b : a`) or `max` (`a < b ? b : a`), as C++'s `std::min`/`std::max`.
    MinMax {
        max: bool,
        a: Box<FNode>,
        b: Box<FNode>,
    },
}

fn pow10(k: u32) -> Option<i128> {
    10i128.checked_pow(k)
}

fn is_integral(ty: Type) -> bool {
    matches!(ty, Type::Int32 | Type::Int64)
}

/// Why the constant `v` is not a value of type `ty`.
fn not_of_type(v: &Value, ty: Type) -> String {
    let own = value_type(v);
    if own == ty {
        format!("constant {} is outside the range of {ty}", show_value(v))
    } else {
        format!("constant {} is {own}, not {ty}", show_value(v))
    }
}

struct Checker<'a> {
    elems: &'a [Elem],
    n_cols: usize,
    string_code: &'a dyn Fn(&str) -> Option<u32>,
    msgs: Vec<String>,
}

impl Checker<'_> {
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

    fn col(&self, i: usize, e: &KExpr) -> Result<usize, String> {
        let Some(&c) = self.elems[..self.n_cols].get(i) else {
            return Err(format!(
                "`{}` reads column {i}, but there are {} columns",
                show(e),
                self.n_cols
            ));
        };
        let want = Elem::of(e.ty);
        if c != want {
            return Err(format!(
                "column {i} is {}, but `{}` has type {} (stored as {})",
                c.name(),
                show(e),
                e.ty,
                want.name()
            ));
        }
        Ok(i)
    }

    /// The integer a constant of type `ty` is stored as, or why `v` is not a value of `ty`
    /// (`fox_ra::value_has_type`: the type of its own, a decimal of exactly the scale, a
    /// date within the calendar's range).
    fn const_int(&self, v: &Value, ty: Type) -> Result<i128, String> {
        if !value_has_type(v, ty) {
            return Err(not_of_type(v, ty));
        }
        match v {
            Value::Int32(i) => Ok(i128::from(*i)),
            Value::Int64(i) => Ok(i128::from(*i)),
            Value::Decimal { unscaled, .. } => Ok(*unscaled),
            Value::Date(d) => Ok(i128::from(*d)),
            Value::Bool(b) => Ok(i128::from(*b)),
            Value::String(s) => (self.string_code)(s)
                .map(i128::from)
                .ok_or_else(|| format!("string constant {s:?} has no dictionary code")),
            Value::Float64(_) => Err(not_of_type(v, ty)),
        }
    }

    /// A float constant, or why `v` is not one.
    fn const_float(&self, v: &Value) -> Result<f64, String> {
        match v {
            Value::Float64(x) => Ok(*x),
            other => Err(not_of_type(other, Type::Float64)),
        }
    }

    fn digits(&self, e: &KExpr, d: &KExpr) -> Result<u32, String> {
        let n = match (&d.kind, d.ty) {
            (KExprKind::Const(Value::Int32(n)), Type::Int32) => i64::from(*n),
            (KExprKind::Const(Value::Int64(n)), Type::Int64) => *n,
            (KExprKind::Const(v), ty) if !value_has_type(v, ty) => return Err(not_of_type(v, ty)),
            _ => return Err(format!("the digits of `{}` must be an integer constant", show(e))),
        };
        u32::try_from(n)
            .ok()
            .filter(|d| *d <= u32::from(MAX_SCALE))
            .ok_or_else(|| format!("the digits of `{}` must be from 0 to {MAX_SCALE}", show(e)))
    }

    fn int(&mut self, e: &KExpr) -> Result<INode, String> {
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
                    .and_then(|table| Some((table, *self.elems.get(table)?)))
                else {
                    return Err(format!(
                        "`{}` reads table {t}, which is not among the arguments",
                        show(e)
                    ));
                };
                match table_type(col) {
                    None => return Err(format!("table {t} is {}, not a dictionary table", col.name())),
                    Some(ty) if ty != e.ty => {
                        return Err(format!(
                            "table {t} is {}, whose entries read as {ty}, but `{}` has type {}",
                            col.name(),
                            show(e),
                            e.ty
                        ))
                    }
                    Some(_) => {}
                }
                if x.ty != Type::String {
                    return Err(format!(
                        "`{}` looks up table {t} by {}, not by a string code",
                        show(e),
                        x.ty
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
                if let Some(v) = vs.iter().find(|v| !value_has_type(v, x.ty)) {
                    return Err(format!("in `{}`: {}", show(e), not_of_type(v, x.ty)));
                }
                if x.ty == Type::Float64 {
                    let vs = vs.iter().map(|v| self.const_float(v)).collect::<Result<_, String>>()?;
                    INode::InF(Box::new(self.float(x)?), vs)
                } else {
                    let vs = vs
                        .iter()
                        .map(|v| self.const_int(v, x.ty))
                        .collect::<Result<_, String>>()?;
                    INode::InI(Box::new(self.int(x)?), vs)
                }
            }
            KExprKind::Call(f, xs) => self.call(e, *f, xs)?,
        })
    }

    fn bools(&mut self, xs: &[KExpr]) -> Result<Vec<INode>, String> {
        xs.iter()
            .map(|x| {
                if x.ty != Type::Bool {
                    return Err(format!("`{}` is {}, not bool", show(x), x.ty));
                }
                self.int(x)
            })
            .collect()
    }

    fn cast(&mut self, e: &KExpr, x: &KExpr) -> Result<INode, String> {
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

    fn arith(&mut self, e: &KExpr, op: ArithOp, a: &KExpr, b: &KExpr) -> Result<INode, String> {
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
                _ => return Err(bad()),
            });
        }
        if !op.is_basic() {
            if (e.ty, a.ty, b.ty) != (Type::Int64, Type::Int64, Type::Int64) {
                return Err(bad());
            }
            let (x, y) = (Box::new(self.int(a)?), Box::new(self.int(b)?));
            // `land` and `lor` stop at the operand that decides, as C's `&&` and `||`: an
            // `and`/`or` of the operands' truth, whose errors it drops where not needed.
            if matches!(op, ArithOp::LogAnd | ArithOp::LogOr) {
                let truth = |v: Box<INode>| INode::CmpI(CmpOp::Ne, v, Box::new(INode::Const(0)));
                let both = vec![truth(x), truth(y)];
                return Ok(if op == ArithOp::LogAnd {
                    INode::And(both)
                } else {
                    INode::Or(both)
                });
            }
            if op.is_bitwise() {
                return Ok(INode::Bits { op, a: x, b: y });
            }
            let err = if op == ArithOp::Pow {
                self.err(format!(
                    "`{}` has no exact value: the power does not fit int64, or a double does not hold it exactly (Soufflé computes `^` in double precision)",
                    show(e)
                ))
            } else {
                self.overflow(e)
            };
            let err_div = self.div_zero(e);
            return Ok(INode::Arith {
                op,
                a: x,
                b: y,
                range,
                err,
                err_div,
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

    fn call(&mut self, e: &KExpr, f: ScalarFn, xs: &[KExpr]) -> Result<INode, String> {
        let arity_ok = match f {
            ScalarFn::Round => xs.len() == 2,
            ScalarFn::Min | ScalarFn::Max => xs.len() == 2 || xs.len() == 4,
            _ => xs.len() == 1,
        };
        if !arity_ok {
            return Err(format!("`{}` cannot take {} argument(s)", show(e), xs.len()));
        }
        let x = &xs[0];
        Ok(match f {
            ScalarFn::BitNot | ScalarFn::LogNot => {
                if (e.ty, x.ty) != (Type::Int64, Type::Int64) {
                    return Err(format!("`{}` needs an int64 giving int64, got {}", show(e), x.ty));
                }
                let x = Box::new(self.int(x)?);
                if f == ScalarFn::BitNot {
                    INode::BitNot(x)
                } else {
                    INode::Not(x)
                }
            }
            ScalarFn::Unsigned => {
                if (e.ty, x.ty) != (Type::Int64, Type::Int64) {
                    return Err(format!("`{}` needs an int64 giving int64, got {}", show(e), x.ty));
                }
                let err = self.err(format!(
                    "`{}` is below 0: as Soufflé's `unsigned` it is 2^64 more, above the largest `unsigned` Fox holds (9223372036854775807)",
                    show(x)
                ));
                INode::Scale {
                    x: Box::new(self.int(x)?),
                    div: 1,
                    mul: 1,
                    round: false,
                    range: Range {
                        min: 0,
                        max: i128::from(i64::MAX),
                    },
                    err,
                }
            }
            ScalarFn::Min | ScalarFn::Max => {
                let max = f == ScalarFn::Max;
                let (a, b) = (&xs[0], &xs[1]);
                if let [_, _, ka, kb] = xs {
                    if (e.ty, a.ty, b.ty) != (Type::String, Type::String, Type::String) {
                        return Err(format!("`{}` with keys takes two strings", show(e)));
                    }
                    if ka.ty != Type::Int64 || kb.ty != Type::Int64 {
                        return Err(format!("the keys of `{}` must be int64 ranks", show(e)));
                    }
                    INode::MinMax {
                        max,
                        a: Box::new(self.int(a)?),
                        b: Box::new(self.int(b)?),
                        keys: Some((Box::new(self.int(ka)?), Box::new(self.int(kb)?))),
                    }
                } else {
                    if (e.ty, a.ty, b.ty) != (Type::Int64, Type::Int64, Type::Int64) {
                        return Err(format!(
                            "`{}` takes two int64, two float64 or two strings with keys",
                            show(e)
                        ));
                    }
                    INode::MinMax {
                        max,
                        a: Box::new(self.int(a)?),
                        b: Box::new(self.int(b)?),
                        keys: None,
                    }
                }
            }
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

    fn float(&mut self, e: &KExpr) -> Result<FNode, String> {
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
                if !op.is_basic() {
                    return Err(format!("`{}` applies to int64, not float64", show(e)));
                }
                let err_div = self.div_zero(e);
                FNode::Arith {
                    op: *op,
                    a: Box::new(self.float(a)?),
                    b: Box::new(self.float(b)?),
                    err_div,
                }
            }
            KExprKind::Call(ScalarFn::Abs, xs) if xs.len() == 1 => FNode::Abs(Box::new(self.float(&xs[0])?)),
            KExprKind::Call(f @ (ScalarFn::Min | ScalarFn::Max), xs) if xs.len() == 2 => {
                if xs.iter().any(|x| x.ty != Type::Float64) {
                    return Err(format!("the operands of `{}` must be float64", show(e)));
                }
                FNode::MinMax {
                    max: *f == ScalarFn::Max,
                    a: Box::new(self.float(&xs[0])?),
                    b: Box::new(self.float(&xs[1])?),
                }
            }
            KExprKind::Call(ScalarFn::Round, xs) if xs.len() == 2 => FNode::Round {
                digits: self.digits(e, &xs[1])? as i32,
                x: Box::new(self.float(&xs[0])?),
            },
            _ => return Err(format!("`{}` cannot have type float64", show(e))),
        })
    }
}
