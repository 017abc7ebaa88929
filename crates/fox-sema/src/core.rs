//! The typed core language: what `fox-sema` produces and `fox-ra` plans.
//!
//! A [`CoreProgram`] is a list of predicates (with column names and types) and an ordered
//! list of strata. Each stratum holds the core rules that define its predicates; a stratum
//! only reads predicates of earlier strata or its own (recursive strata are marked).
//! Core rules are flat: one head, a conjunction of literals over numbered, typed variables,
//! no disjunction, no functional terms (they became atoms), no comparison chains, no
//! nested negation. Every variable is bound by a positive atom or an assignment
//! (safety has been checked), and the literals appear in an order in which each
//! assignment's inputs are bound before it.

use fox_syntax::ast::Span;
use serde::{Deserialize, Serialize};

/// A column or value type. Decimal carries its scale (number of fraction digits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Type {
    Int32,
    Int64,
    /// A decimal of up to 18 digits (stored in 64 bits).
    Decimal(u8),
    /// A decimal of up to 38 digits (stored in 128 bits): sums of decimals, values computed
    /// from them, and the columns of derived predicates that hold them. A user declares
    /// `decimal`; the checker decides where a column is wide.
    WideDecimal(u8),
    Float64,
    String,
    Date,
    Bool,
}

impl std::fmt::Display for Type {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Type::Int32 => write!(f, "int32"),
            Type::Int64 => write!(f, "int64"),
            Type::Decimal(s) => write!(f, "decimal({s})"),
            Type::WideDecimal(s) => write!(f, "decimal38({s})"),
            Type::Float64 => write!(f, "float64"),
            Type::String => write!(f, "string"),
            Type::Date => write!(f, "date"),
            Type::Bool => write!(f, "bool"),
        }
    }
}

/// The largest number of fraction digits of a decimal (of either width).
pub const MAX_SCALE: u8 = 18;

/// The largest unscaled magnitude of a 38-digit decimal (`WideDecimal`).
pub const MAX_WIDE_DECIMAL: i128 = 10i128.pow(38) - 1;

/// The largest unscaled magnitude of a `Decimal`: 18 digits, fraction digits included.
/// Literals, input values and computed values beyond it are errors, never wrapped.
pub const MAX_DECIMAL: i128 = 10i128.pow(18) - 1;

/// The first date, 0000-01-01, as days since 1970-01-01: dates are those written
/// `YYYY-MM-DD` with a four-digit year, so every date read can be written and read back,
/// and date arithmetic that leaves the range is an overflow error.
pub const MIN_DATE: i32 = -719_528;

/// The last date, 9999-12-31, as days since 1970-01-01.
pub const MAX_DATE: i32 = 2_932_896;

impl Type {
    /// The scale of a decimal type (of either width).
    pub fn decimal_scale(self) -> Option<u8> {
        match self {
            Type::Decimal(s) | Type::WideDecimal(s) => Some(s),
            _ => None,
        }
    }

    pub fn is_decimal(self) -> bool {
        self.decimal_scale().is_some()
    }

    /// A decimal of scale `scale`, wide when `wide`.
    pub fn decimal(scale: u8, wide: bool) -> Type {
        if wide {
            Type::WideDecimal(scale)
        } else {
            Type::Decimal(scale)
        }
    }
}

/// A constant value of a known type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Value {
    Int32(i32),
    Int64(i64),
    /// `unscaled / 10^scale`
    Decimal {
        unscaled: i128,
        scale: u8,
    },
    /// Kept as bits so that values compare and hash exactly.
    Float64(f64),
    String(String),
    /// Days since 1970-01-01.
    Date(i32),
    Bool(bool),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PredId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct VarId(pub u32);

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CoreProgram {
    /// Indexed by `PredId`.
    pub preds: Vec<PredInfo>,
    /// In evaluation order.
    pub strata: Vec<Stratum>,
    /// `.input` directives, in source order.
    pub inputs: Vec<InputSpec>,
    /// The predicates to output: the `.output` directives in source order, or, when the
    /// program has none, every derived predicate that no rule consumes (in name order).
    pub outputs: Vec<OutputSpec>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PredInfo {
    pub name: String,
    pub columns: Vec<Column>,
    /// `Some(k)` for a functional predicate: the first `k` columns are the key and the
    /// last column is the value (`k == columns.len() - 1`).
    pub functional_keys: Option<usize>,
    /// Read from data (`.input`).
    pub input: bool,
    /// Where it was declared, or first defined.
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Column {
    pub name: String,
    pub ty: Type,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stratum {
    /// The predicates this stratum defines (facts and rules).
    pub preds: Vec<PredId>,
    /// True when some predicate of this stratum depends on itself (directly or through
    /// other predicates of the stratum): it is evaluated to a fixpoint.
    pub recursive: bool,
    /// Ground facts of this stratum's predicates: one row of constants each.
    pub facts: Vec<Fact>,
    pub rules: Vec<CoreRule>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    pub pred: PredId,
    pub values: Vec<Value>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CoreRule {
    pub head: PredId,
    /// One term per head column.
    pub head_args: Vec<Term>,
    /// The variables of this rule, indexed by `VarId`.
    pub vars: Vec<VarInfo>,
    /// A conjunction.
    pub body: Vec<CoreLit>,
    /// `Some` for an aggregation rule: the body's distinct bindings of all its variables
    /// are grouped by the head variables that are not aggregate results.
    pub aggs: Option<Vec<CoreAgg>>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VarInfo {
    /// The source name, or a generated one (`_1`, `$f0`) for anonymous/introduced variables.
    pub name: String,
    pub ty: Type,
    /// True for variables the user did not name (`_`, functional terms, non-variable
    /// atom arguments).
    pub generated: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Term {
    Var(VarId),
    Const(Value),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum CoreLit {
    /// A positive atom: binds its variables. Arguments are variables or constants.
    Atom { pred: PredId, args: Vec<Term>, span: Span },
    /// A negated atom: all its variables are bound elsewhere.
    NotAtom { pred: PredId, args: Vec<Term>, span: Span },
    /// `var = expr`, binding `var` (its inputs are bound by earlier literals).
    Assign { var: VarId, expr: CExpr, span: Span },
    /// A filter over bound variables: comparisons, `like`, `prefix`, `in`, their negations.
    Filter { cond: CExpr, span: Span },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CoreAgg {
    /// The variable the aggregate binds (appears in the head).
    pub var: VarId,
    pub func: AggFunc,
    /// `None` for `count()`.
    pub arg: Option<CExpr>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
/// Result types: `Count` is int64; `Sum` of int32/int64 is int64 (its argument is cast to
/// int64), of decimal(s) decimal(s), of float64 float64; `Min`/`Max` keep the type; `Avg` of
/// an integer or decimal(s) is decimal(max(s, 6)), of float64 float64. The result type is
/// the aggregate variable's type.
pub enum AggFunc {
    Sum,
    Count,
    Min,
    Max,
    Avg,
}

/// A typed expression. Implicit widenings are explicit `Cast` nodes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CExpr {
    pub kind: CExprKind,
    pub ty: Type,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum CExprKind {
    Var(VarId),
    Const(Value),
    /// Widening (int32→int64→decimal→float64) or a decimal rescale, or `to_float`/`to_int`.
    Cast(Box<CExpr>),
    Neg(Box<CExpr>),
    /// Operands of the same type, except: on decimals, `Add`/`Sub` operands have the
    /// result's scale, `Mul` yields the sum of the operand scales, `Div` yields scale 6
    /// (integer operands are cast to `decimal(0)`); `int / int` truncates; a `Date` plus or
    /// minus an integer (int32 or int64) is a `Date`, and `Date - Date` is `Int64` days.
    Arith(ArithOp, Box<CExpr>, Box<CExpr>),
    Cmp(CmpOp, Box<CExpr>, Box<CExpr>),
    And(Vec<CExpr>),
    Or(Vec<CExpr>),
    Not(Box<CExpr>),
    /// `e in (c1, c2, …)` over constants.
    In(Box<CExpr>, Vec<Value>),
    /// A built-in function or predicate: `like`, `prefix`, `substr`, `strlen`, `concat`,
    /// `year`, `month`, `day`, `abs`, `round`.
    Call(Builtin, Vec<CExpr>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    /// Soufflé's `%`: the remainder of truncated division (C's `%`), on integers.
    Rem,
    /// Soufflé's `^` on integers: `a` to the power `b` as C's `pow` in double precision,
    /// defined where that is exact (see `fox_kernel::int_pow`).
    Pow,
    /// Soufflé's `band`, `bor`, `bxor` on integers (two's complement).
    BitAnd,
    BitOr,
    BitXor,
    /// Soufflé's `bshl`, `bshr` (sign-extending), `bshru` (zero-filling) on integers:
    /// the shift count is taken modulo the type's width; `bshl` wraps.
    Shl,
    Shr,
    ShrU,
    /// Soufflé's `land`, `lor`, `lxor` on integers: 1 or 0 (non-zero is true); `land`
    /// and `lor` do not evaluate the second operand when the first decides.
    LogAnd,
    LogOr,
    LogXor,
}

impl ArithOp {
    /// The operator as printed: `+`, `%`, `band`, …
    pub fn symbol(self) -> &'static str {
        match self {
            ArithOp::Add => "+",
            ArithOp::Sub => "-",
            ArithOp::Mul => "*",
            ArithOp::Div => "/",
            ArithOp::Rem => "%",
            ArithOp::Pow => "^",
            ArithOp::BitAnd => "band",
            ArithOp::BitOr => "bor",
            ArithOp::BitXor => "bxor",
            ArithOp::Shl => "bshl",
            ArithOp::Shr => "bshr",
            ArithOp::ShrU => "bshru",
            ArithOp::LogAnd => "land",
            ArithOp::LogOr => "lor",
            ArithOp::LogXor => "lxor",
        }
    }

    /// The name of the function Soufflé's front end writes the operator as
    /// (`souffle:mod`, …); `None` for `+ - * /`.
    pub fn function_name(self) -> Option<&'static str> {
        Some(match self {
            ArithOp::Add | ArithOp::Sub | ArithOp::Mul | ArithOp::Div => return None,
            ArithOp::Rem => "souffle:mod",
            ArithOp::Pow => "souffle:pow",
            ArithOp::BitAnd => "souffle:band",
            ArithOp::BitOr => "souffle:bor",
            ArithOp::BitXor => "souffle:bxor",
            ArithOp::Shl => "souffle:bshl",
            ArithOp::Shr => "souffle:bshr",
            ArithOp::ShrU => "souffle:bshru",
            ArithOp::LogAnd => "souffle:land",
            ArithOp::LogOr => "souffle:lor",
            ArithOp::LogXor => "souffle:lxor",
        })
    }

    /// Whether the operator is one of `+ - * /`, which apply to every numeric type; the
    /// others apply to integers only.
    pub fn is_basic(self) -> bool {
        matches!(self, ArithOp::Add | ArithOp::Sub | ArithOp::Mul | ArithOp::Div)
    }

    /// Whether the operator is a bitwise or logical one, which never fails and whose
    /// result always fits its type.
    pub fn is_bitwise(self) -> bool {
        matches!(
            self,
            ArithOp::BitAnd
                | ArithOp::BitOr
                | ArithOp::BitXor
                | ArithOp::Shl
                | ArithOp::Shr
                | ArithOp::ShrU
                | ArithOp::LogAnd
                | ArithOp::LogOr
                | ArithOp::LogXor
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    /// The operator with its operands swapped: `a op b` is `b op.flipped() a`.
    pub fn flipped(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            CmpOp::Eq | CmpOp::Ne => self,
        }
    }

    /// The operator that holds exactly where this one does not: `!(a op b)` is
    /// `a op.negated() b` (for operands that are ordered).
    pub fn negated(self) -> CmpOp {
        match self {
            CmpOp::Eq => CmpOp::Ne,
            CmpOp::Ne => CmpOp::Eq,
            CmpOp::Lt => CmpOp::Ge,
            CmpOp::Le => CmpOp::Gt,
            CmpOp::Gt => CmpOp::Le,
            CmpOp::Ge => CmpOp::Lt,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Builtin {
    Like,
    Prefix,
    /// Soufflé's `match`: the string (its bytes) matches the regular expression, a
    /// pattern of the Rust `regex` crate for bytes with Unicode off that matches whole
    /// strings (the front end translates Soufflé's ECMAScript pattern to one:
    /// `fox_syntax::souffle::regex`).
    Regex,
    Substr,
    Strlen,
    Concat,
    Year,
    Month,
    Day,
    Abs,
    Round,
    /// Soufflé's `bnot` (two's complement) and `lnot` (1 when 0, else 0), on integers.
    BitNot,
    LogNot,
    /// Soufflé's binary `min`/`max` over two operands of one type (numbers by value,
    /// strings by text): as C++'s `std::min` (`b < a ? b : a`) and `std::max`
    /// (`a < b ? b : a`).
    Min,
    Max,
    /// Soufflé's `to_string` of an integer: its decimal digits (a new string).
    ToString,
    /// Soufflé's `to_number`/`to_unsigned` of a string: the integer it starts with (see
    /// `fox_kernel::parse_souffle_int`); a string that does not start with one, or whose
    /// value is out of range (below 0 for `ToUnsigned`), stops the run.
    ToNumber,
    ToUnsigned,
    /// The int64 operand, which must not be negative: a value of Soufflé's `unsigned`
    /// (Fox holds those from 0 to 2^63 - 1; Soufflé's `bnot`, `bshl` or `to_unsigned`
    /// of a negative number give one from 2^63 on, which Fox would hold negative). A
    /// negative operand stops the run.
    Unsigned,
}

impl Builtin {
    /// The function's name in a program.
    pub fn name(self) -> &'static str {
        match self {
            Builtin::Like => "like",
            Builtin::Prefix => "prefix",
            Builtin::Regex => "souffle:match",
            Builtin::Substr => "substr",
            Builtin::Strlen => "strlen",
            Builtin::Concat => "concat",
            Builtin::Year => "year",
            Builtin::Month => "month",
            Builtin::Day => "day",
            Builtin::Abs => "abs",
            Builtin::Round => "round",
            Builtin::BitNot => "souffle:bnot",
            Builtin::LogNot => "souffle:lnot",
            Builtin::Min => "souffle:min",
            Builtin::Max => "souffle:max",
            Builtin::ToString => "souffle:to_string",
            Builtin::ToNumber => "souffle:to_number",
            Builtin::ToUnsigned => "souffle:to_unsigned",
            Builtin::Unsigned => "souffle:unsigned",
        }
    }

    /// Whether the function makes or reads strings as text at run time, on the host
    /// (the kernel plan computes it with a `StrFn` launch, never inside an expression).
    pub fn is_host(self) -> bool {
        matches!(
            self,
            Builtin::Substr | Builtin::Concat | Builtin::ToString | Builtin::ToNumber | Builtin::ToUnsigned
        )
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputSpec {
    pub pred: PredId,
    /// Path relative to the data directory; `<pred>.csv` when not given.
    pub file: String,
    /// Field separator; `,` when not given.
    pub sep: String,
    /// `key (…)`: the columns (indices, distinct, in the order written) that identify a
    /// row; empty when the directive names no key.
    #[serde(default)]
    pub key: Vec<usize>,
    /// `header`: the file's first line names the columns (checked against the
    /// declaration) and is not data.
    #[serde(default)]
    pub header: bool,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutputSpec {
    pub pred: PredId,
    /// Column index and descending flag. Empty: ascending on all columns.
    pub order_by: Vec<(usize, bool)>,
    pub limit: Option<u64>,
    pub span: Span,
}
