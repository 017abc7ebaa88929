//! `Eval`: typed scalar expressions over columns.
//!
//! A [`KExpr`] is first checked against the arguments into its checked form
//! (`fox_kernel::checked`: [`INode`] for values stored as integers — ints, decimals,
//! dates, string codes, bools — and [`FNode`] for floats, string constants resolved to
//! codes, every error message prepared). The tree is then evaluated column-wise over
//! chunks of rows, in parallel. A row whose evaluation fails carries the id of its error;
//! `and`/`or` combine their operands left to right and drop the errors of operands they
//! do not need, so `x != 0 and 10 / x > 1` never fails. The first failing row stops the
//! run.

use crate::date::civil_from_days;
use crate::util::{chunks, map_ranges, with_capacity, KResult};
use fox_kernel::checked::{self, DatePart, ErrId, FNode, INode, Range};
use fox_kernel::{div_round_half_away, int_bits, int_pow, Elem, KExpr, PowError};
use fox_runtime::{HostCol, LaunchCtx};
use fox_sema::core::{ArithOp, CmpOp, Type};

/// Evaluates `expr` over the rows of `args[..n_cols]` (dictionary tables follow).
pub(crate) fn eval(expr: &KExpr, n_cols: usize, args: &[&HostCol], ctx: &dyn LaunchCtx) -> KResult<HostCol> {
    let n = args[0].len();
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
            narrow_wide(out, elem, ty, &prog.what)
        }
        Root::I(_, elem, ty) => {
            let mut out = with_capacity(n, "the evaluated column")?;
            for (p, _) in parts {
                if let Part::I(v) = p {
                    out.extend(v);
                }
            }
            narrow(out, elem, ty, &prog.what)
        }
    }
}

/// An expression compiled against its arguments, to be evaluated a range of rows at a
/// time.
pub(crate) struct Compiled {
    root: Root,
    msgs: Vec<String>,
    /// Whether a value of the tree is a 38-digit decimal: then every integer-stored value
    /// is computed in 128 bits, otherwise in 64.
    wide: bool,
    /// The expression as messages print it.
    what: String,
}

impl Compiled {
    pub(crate) fn new(expr: &KExpr, n_cols: usize, args: &[&HostCol], ctx: &dyn LaunchCtx) -> KResult<Compiled> {
        let elems: Vec<Elem> = args.iter().map(|a| a.elem()).collect();
        let c = fox_kernel::check_expr(expr, n_cols, &elems, &|s: &str| ctx.string_code(s))?;
        let root = match c.root {
            checked::Root::Float(f) => Root::F(f),
            checked::Root::Int(i) => Root::I(i, Elem::of(c.ty), c.ty),
        };
        Ok(Compiled {
            root,
            msgs: c.msgs,
            wide: c.wide,
            what: c.what,
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

// ---- evaluation -----------------------------------------------------------------------

/// The range check of a node in the tree's width.
trait Fit {
    /// `x` as a value of the tree's width `T`, when it is in range (a range never exceeds
    /// `T`: 64-bit trees hold no 38-digit type).
    fn fit<T: Int>(self, x: i128, err: ErrId) -> Result<T, ErrId>;
}

impl Fit for Range {
    fn fit<T: Int>(self, x: i128, err: ErrId) -> Result<T, ErrId> {
        if self.contains(x) {
            Ok(T::of(x))
        } else {
            Err(err)
        }
    }
}

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

/// Whether `min` (`b < a ? b : a`) or `max` (`a < b ? b : a`) of operands with keys
/// `a`, `b` is the second operand.
fn pick_second<T: PartialOrd>(max: bool, a: T, b: T) -> bool {
    if max {
        a < b
    } else {
        b < a
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
                    // C's remainder; the smallest int64 by -1 traps in C.
                    ArithOp::Rem => {
                        if y == 0 {
                            return Err(*err_div);
                        }
                        if y == -1 && x == i128::from(i64::MIN) {
                            return Err(*err);
                        }
                        x.checked_rem(y)
                    }
                    ArithOp::Pow => match int_pow(x as i64, y as i64) {
                        Ok(r) => Some(i128::from(r)),
                        Err(PowError::ZeroToNegative) => return Err(*err_div),
                        Err(PowError::Inexact) => return Err(*err),
                    },
                    // The checker makes `INode::Bits` of the bitwise operators.
                    _ => None,
                };
                range.fit(r.ok_or(*err)?, *err)
            }),
            INode::Bits { op, a, b } => bin_i(self.int::<T>(a), self.int::<T>(b), |x, y| {
                Ok(T::of(i128::from(int_bits(*op, x.wide() as i64, y.wide() as i64))))
            }),
            INode::BitNot(x) => un_i(self.int::<T>(x), |v| Ok(T::of(i128::from(!(v.wide() as i64))))),
            INode::MinMax { max, a, b, keys } => {
                let (x, y) = (self.int::<T>(a), self.int::<T>(b));
                let (kx, ky) = match keys {
                    Some((ka, kb)) => (Some(self.int::<T>(ka)), Some(self.int::<T>(kb))),
                    None => (None, None),
                };
                let mut err = merge_err(x.err, y.err);
                let (kxv, kyv) = match (kx, ky) {
                    (Some(kx), Some(ky)) => {
                        err = merge_err(merge_err(err, kx.err), ky.err);
                        (Some(kx.v), Some(ky.v))
                    }
                    _ => (None, None),
                };
                let mut v = x.v;
                for (i, (p, &q)) in v.iter_mut().zip(&y.v).enumerate() {
                    let (kp, kq) = match (&kxv, &kyv) {
                        (Some(a), Some(b)) => (a[i], b[i]),
                        _ => (*p, q),
                    };
                    if pick_second(*max, kp, kq) {
                        *p = q;
                    }
                }
                IV { v, err }
            }
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
                    cmp_const(op.flipped(), &mut y.v, T::of(*c));
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
            FNode::MinMax { max, a, b } => {
                let (a, b) = (self.float::<T>(a), self.float::<T>(b));
                let mut v = a.v;
                for (p, &q) in v.iter_mut().zip(&b.v) {
                    if pick_second(*max, *p, q) {
                        *p = q;
                    }
                }
                FV {
                    v,
                    err: merge_err(a.err, b.err),
                }
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
                        // The checker takes Soufflé's operators on int64 only.
                        _ => f64::NAN,
                    };
                }
                FV { v, err }
            }
        }
    }
}
