//! `Eval` on the GPU: a [`KExpr`] becomes the CUDA C++ source of one kernel.
//!
//! The translation follows fox-cpu's expression compiler step for step (the same type
//! checks in the same order, hence the same plan errors), and each node becomes a device
//! function that evaluates one row: it returns 0 and writes the value, or returns the id of
//! the row's error. A node evaluates its operands left to right and returns the first
//! operand error, so a row reports the same error as on the CPU; `and`/`or` stop at the
//! first operand that decides the row, so operands they do not need never fail.
//!
//! Values stored as integers are carried as `long long` and computed in `__int128`
//! (decimal products and quotients, rescales, overflow checks), floats as `double` with
//! the `_rn` intrinsics so that no multiply-add is ever contracted: results are bit-equal
//! to the CPU's. A failing row records `(row << 24) | error id` with an atomic maximum of
//! its complement in an error word, so the host reads the smallest failing row, whatever
//! the scheduling.
//!
//! Kernel parameters, in order: one pointer per argument (columns, then dictionary
//! tables), typed by the argument's element type; the length (`unsigned long long`) of
//! each table argument; the output pointer; `lo`, `hi` (the rows to evaluate); the error
//! word pointer (2 x u64); `probe` (u32). With `probe` set, the kernel writes the raw
//! value of its rows to `err[1]` instead of the output (used for the one row whose value
//! does not fit the output's element type, to print that value).

use fox_cpu::{show_kexpr as show, show_value};
use fox_kernel::{Elem, KExpr, KExprKind, ScalarFn};
use fox_runtime::LaunchCtx;
use fox_sema::core::{ArithOp, CmpOp, Type, Value};
use std::fmt::Write as _;

/// NVRTC options a generated source needs besides the architecture (`__int128`).
pub const NVRTC_OPTIONS: &[&str] = &["--device-int128"];

/// Threads per block of a generated kernel.
pub const BLOCK: u32 = 256;

/// The largest number of fraction digits of a decimal.
const MAX_SCALE: u32 = 18;

/// Bits of an error key below the row.
pub const ID_BITS: u32 = 24;

/// An error key with this bit set is a result that does not fit the output's element
/// type; it sorts after every evaluation error, as the CPU checks those first.
pub const NARROW_FLAG: u64 = 1 << 63;

/// The largest number of rows an error key can name.
pub const MAX_ROWS: u64 = 1 << (63 - ID_BITS);

/// A generated kernel and what the host needs to run it and explain its errors.
#[derive(Clone, Debug)]
pub struct Generated {
    pub source: String,
    /// The kernel's name: `fox_eval_` and a hash of the source.
    pub kernel: String,
    pub out_elem: Elem,
    /// The message of error id `k` is `msgs[k - 1]`.
    pub msgs: Vec<String>,
    /// Whether the result may not fit the output's element type (checked per row).
    pub narrow: bool,
    /// The expression as messages print it.
    pub what: String,
    pub ty: Type,
}

impl Generated {
    /// Whether any row can fail (then the kernel needs an error word).
    pub fn can_fail(&self) -> bool {
        self.narrow || !self.msgs.is_empty()
    }
}

/// The element type name used in messages.
pub fn elem_name(e: Elem) -> &'static str {
    match e {
        Elem::U8 => "u8",
        Elem::I32 => "i32",
        Elem::U32 => "u32",
        Elem::I64 => "i64",
        Elem::U64 => "u64",
        Elem::F64 => "f64",
    }
}

fn c_type(e: Elem) -> &'static str {
    match e {
        Elem::U8 => "unsigned char",
        Elem::I32 => "int",
        Elem::U32 => "unsigned int",
        Elem::I64 => "long long",
        Elem::U64 => "unsigned long long",
        Elem::F64 => "double",
    }
}

/// 64-bit FNV-1a: a stable hash for kernel names.
pub fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Generates the kernel of `Eval { expr, n_cols }` over arguments of the element types
/// `arg_elems` (columns, then dictionary tables). Plan errors (types, missing columns or
/// tables, string constants without a code) are returned as fox-cpu words them.
pub fn generate_source(
    expr: &KExpr,
    n_cols: usize,
    arg_elems: &[Elem],
    ctx: &dyn LaunchCtx,
) -> Result<Generated, String> {
    if n_cols == 0 {
        return Err("needs at least one column argument to give the row count".to_string());
    }
    if arg_elems.len() < n_cols {
        return Err(format!("expects {n_cols} column argument(s), got {}", arg_elems.len()));
    }
    let mut g = Gen {
        elems: arg_elems,
        n_cols,
        ctx,
        msgs: Vec::new(),
        funcs: String::new(),
        next: 0,
    };
    let out_elem;
    let mut narrow = false;
    let root;
    if expr.ty == Type::Float64 {
        root = g.float(expr)?;
        out_elem = Elem::F64;
    } else {
        let (f, unchecked) = g.int(expr)?;
        root = f;
        out_elem = Elem::of(expr.ty);
        narrow = unchecked && out_elem != Elem::I64;
    }
    if g.msgs.len() >= 1 << ID_BITS {
        return Err(format!("`{}` has too many error sites for one kernel", show(expr)));
    }
    let mut src = String::new();
    src.push_str(PRELUDE);
    // Argument block.
    src.push_str("struct P {\n");
    for (j, e) in arg_elems.iter().enumerate() {
        let _ = writeln!(src, "  const {}* __restrict__ a{j};", c_type(*e));
    }
    for j in n_cols..arg_elems.len() {
        let _ = writeln!(src, "  u64 l{j};");
    }
    src.push_str("};\n\n");
    src.push_str(&g.funcs);
    // The kernel.
    let mut params = Vec::new();
    for (j, e) in arg_elems.iter().enumerate() {
        params.push(format!("const {}* __restrict__ a{j}", c_type(*e)));
    }
    for j in n_cols..arg_elems.len() {
        params.push(format!("u64 l{j}"));
    }
    params.push(format!("{}* __restrict__ out", c_type(out_elem)));
    params.extend(["u64 lo", "u64 hi", "u64* err", "unsigned probe"].map(String::from));
    let _ = writeln!(
        src,
        "extern \"C\" __global__ void __launch_bounds__({BLOCK}) KERNEL_NAME({}) {{",
        params.join(", ")
    );
    src.push_str("  P p;\n");
    for j in 0..arg_elems.len() {
        let _ = writeln!(src, "  p.a{j} = a{j};");
    }
    for j in n_cols..arg_elems.len() {
        let _ = writeln!(src, "  p.l{j} = l{j};");
    }
    src.push_str("  const u64 stride = (u64)gridDim.x * blockDim.x;\n");
    src.push_str("  for (u64 i = lo + (u64)blockIdx.x * blockDim.x + threadIdx.x; i < hi; i += stride) {\n");
    let vty = if out_elem == Elem::F64 { "double" } else { "i64" };
    let _ = writeln!(src, "    {vty} v;\n    const unsigned e = {root}(p, i, v);");
    let _ = writeln!(
        src,
        "    if (e != 0u) {{ atomicMax(err, ~((i << {ID_BITS}) | (u64)e)); continue; }}"
    );
    let _ = writeln!(src, "    if (probe != 0u) {{ err[1] = (u64)v; continue; }}");
    if narrow {
        let (lo, hi) = match out_elem {
            Elem::U8 => ("0LL", "255LL"),
            Elem::I32 => ("-2147483648LL", "2147483647LL"),
            _ => ("0LL", "4294967295LL"),
        };
        let _ = writeln!(
            src,
            "    if (v < {lo} || v > {hi}) {{ atomicMax(err, ~({NARROW_FLAG}ull | (i << {ID_BITS}))); continue; }}"
        );
    }
    let _ = writeln!(src, "    out[i] = ({})v;", c_type(out_elem));
    src.push_str("  }\n}\n");
    let kernel = format!("fox_eval_{:016x}", fnv1a(&src));
    let source = src.replace("KERNEL_NAME", &kernel);
    Ok(Generated {
        source,
        kernel,
        out_elem,
        msgs: g.msgs,
        narrow,
        what: show(expr),
        ty: expr.ty,
    })
}

const PRELUDE: &str = r#"// Generated by fox-cuda from an Eval expression.
typedef long long i64;
typedef unsigned long long u64;
typedef __int128 i128;
typedef unsigned __int128 u128;

// n / d rounded half away from zero; d != 0 and not (n, d) == (INT64_MIN, -1).
static __device__ __forceinline__ i64 fox_rha64(i64 n, i64 d) {
  i64 q = n / d;
  const i64 r = n % d;
  if (r != 0) {
    const u64 ar = r < 0 ? 0ull - (u64)r : (u64)r;
    const u64 ad = d < 0 ? 0ull - (u64)d : (u64)d;
    if (ar >= ad - ar) q = ((n < 0) != (d < 0)) ? q - 1 : q + 1;
  }
  return q;
}

// The same on 128 bits; d != 0 and not (n, d) == (INT128_MIN, -1). Takes the 64-bit
// path when both fit.
static __device__ __forceinline__ i128 fox_rha128(i128 n, i128 d) {
  const i128 m = (i128)(-9223372036854775807LL - 1);
  const i128 M = (i128)9223372036854775807LL;
  if (n >= m && n <= M && d >= m && d <= M && !(n == m && d == -1)) return (i128)fox_rha64((i64)n, (i64)d);
  i128 q = n / d;
  const i128 r = n % d;
  if (r != 0) {
    const u128 ar = r < 0 ? (u128)0 - (u128)r : (u128)r;
    const u128 ad = d < 0 ? (u128)0 - (u128)d : (u128)d;
    if (ar >= ad - ar) q = ((n < 0) != (d < 0)) ? q - 1 : q + 1;
  }
  return q;
}

static __device__ __forceinline__ bool fox_in_range(i128 x, i64 lo, i64 hi) {
  return x >= (i128)lo && x <= (i128)hi;
}

// (year, month, day) of a day number (days since 1970-01-01), after Howard Hinnant.
static __device__ __forceinline__ void fox_civil(i64 days, i64& year, i64& month, i64& day) {
  const i64 z = days + 719468;
  const i64 era = (z >= 0 ? z : z - 146096) / 146097;
  const u64 doe = (u64)(z - era * 146097);
  const u64 yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const u64 doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const u64 mp = (5 * doy + 2) / 153;
  day = (i64)(unsigned)(doy - (153 * mp + 2) / 5 + 1);
  month = (i64)(unsigned)(mp < 10 ? mp + 3 : mp - 9);
  year = (i64)yoe + era * 400 + (month <= 2 ? 1 : 0);
}

// Binary search in a sorted array.
static __device__ __forceinline__ bool fox_in_sorted(const i64* xs, int n, i64 v) {
  int lo = 0, hi = n;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (xs[mid] < v) lo = mid + 1; else hi = mid;
  }
  return lo < n && xs[lo] == v;
}

"#;

/// An error site: a 1-based index into the messages.
type ErrId = u32;

/// The range a value of a type must fall in (as fox-cpu checks it).
#[derive(Clone, Copy)]
struct Range {
    min: i64,
    max: i64,
}

impl Range {
    fn of(ty: Type) -> Range {
        match ty {
            Type::Int32 | Type::Date => Range {
                min: i64::from(i32::MIN),
                max: i64::from(i32::MAX),
            },
            Type::String => Range {
                min: 0,
                max: i64::from(u32::MAX),
            },
            Type::Bool => Range { min: 0, max: 1 },
            Type::Int64 | Type::Decimal(_) | Type::Float64 => Range {
                min: i64::MIN,
                max: i64::MAX,
            },
        }
    }

    /// `if (!in range) return err; v = (i64)y;` for an `i128 y`.
    fn fit(self, y: &str, err: ErrId) -> String {
        format!(
            "  if (!fox_in_range({y}, {}, {})) return {err}u;\n  v = (i64){y};\n",
            lit64(self.min),
            lit64(self.max)
        )
    }
}

/// A 64-bit integer literal (`INT64_MIN` cannot be written directly).
fn lit64(x: i64) -> String {
    if x == i64::MIN {
        "(-9223372036854775807LL - 1)".to_string()
    } else {
        format!("{x}LL")
    }
}

/// A 128-bit integer constant expression.
fn lit128(x: i128) -> String {
    if let Ok(s) = i64::try_from(x) {
        format!("((i128){})", lit64(s))
    } else {
        let u = x as u128;
        format!(
            "((i128)(((u128){:#x}ull << 64) | (u128){:#x}ull))",
            (u >> 64) as u64,
            u as u64
        )
    }
}

/// A double constant, bit-exact.
fn litf(x: f64) -> String {
    format!("__longlong_as_double((long long){:#x}ull)", x.to_bits())
}

fn pow10(k: u32) -> Option<i128> {
    10i128.checked_pow(k)
}

fn scale_of(ty: Type) -> Option<u32> {
    match ty {
        Type::Int32 | Type::Int64 => Some(0),
        Type::Decimal(s) => Some(u32::from(s)),
        _ => None,
    }
}

fn is_integral(ty: Type) -> bool {
    matches!(ty, Type::Int32 | Type::Int64)
}

fn cmp_op(op: CmpOp) -> &'static str {
    match op {
        CmpOp::Eq => "==",
        CmpOp::Ne => "!=",
        CmpOp::Lt => "<",
        CmpOp::Le => "<=",
        CmpOp::Gt => ">",
        CmpOp::Ge => ">=",
    }
}

/// Calls node function `f` into a new local `var` (`i64` or `double`), returning the
/// operand's error.
fn call(f: &str, ty: &str, var: &str) -> String {
    format!("  {ty} {var};\n  {{ const unsigned e = {f}(p, i, {var}); if (e != 0u) return e; }}\n")
}

fn call_i(f: &str, var: &str) -> String {
    call(f, "i64", var)
}

fn call_f(f: &str, var: &str) -> String {
    call(f, "double", var)
}

struct Gen<'a> {
    elems: &'a [Elem],
    n_cols: usize,
    ctx: &'a dyn LaunchCtx,
    msgs: Vec<String>,
    funcs: String,
    next: usize,
}

/// A compiled integer node: its function, and whether its value may fall outside the
/// range of its type (table entries, date parts).
type INode = (String, bool);

impl Gen<'_> {
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

    /// Emits a node function with `body` (which sets `v`) and returns its name.
    fn func(&mut self, float: bool, body: &str) -> String {
        let name = format!("n{}", self.next);
        self.next += 1;
        let vty = if float { "double" } else { "i64" };
        let _ = write!(
            self.funcs,
            "static __device__ __forceinline__ unsigned {name}(const P& p, u64 i, {vty}& v) {{\n{body}  return 0u;\n}}\n\n"
        );
        name
    }

    fn col(&self, i: usize, e: &KExpr) -> Result<usize, String> {
        let Some(c) = self.elems[..self.n_cols].get(i) else {
            return Err(format!(
                "`{}` reads column {i}, but there are {} columns",
                show(e),
                self.n_cols
            ));
        };
        let want = Elem::of(e.ty);
        if *c != want {
            return Err(format!(
                "column {i} is {}, but `{}` has type {} (stored as {})",
                elem_name(*c),
                show(e),
                e.ty,
                elem_name(want)
            ));
        }
        Ok(i)
    }

    fn const_int(&self, v: &Value, ty: Type) -> Result<i64, String> {
        let bad = || format!("constant {} does not have type {ty}", show_value(v));
        let range = Range::of(ty);
        let fit = |x: i128| {
            if x >= i128::from(range.min) && x <= i128::from(range.max) {
                Ok(x as i64)
            } else {
                Err(bad())
            }
        };
        match (v, ty) {
            (Value::Int32(i), _) if scale_of(ty).is_some() => {
                fit(i128::from(*i) * pow10(scale_of(ty).unwrap_or(0)).ok_or_else(bad)?)
            }
            (Value::Int64(i), _) if scale_of(ty).is_some() => {
                fit(i128::from(*i) * pow10(scale_of(ty).unwrap_or(0)).ok_or_else(bad)?)
            }
            (Value::Decimal { unscaled, scale }, Type::Decimal(s)) => {
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
            (Value::Date(d), Type::Date) => Ok(i64::from(*d)),
            (Value::Bool(b), Type::Bool) => Ok(i64::from(*b)),
            (Value::String(s), Type::String) => self
                .ctx
                .string_code(s)
                .map(i64::from)
                .ok_or_else(|| format!("string constant {s:?} has no dictionary code")),
            _ => Err(bad()),
        }
    }

    fn const_float(&self, v: &Value) -> Result<f64, String> {
        match v {
            Value::Float64(x) => Ok(*x),
            Value::Int32(i) => Ok(f64::from(*i)),
            Value::Int64(i) => Ok(*i as f64),
            Value::Decimal { unscaled, scale } => Ok(*unscaled as f64 / 10f64.powi(i32::from(*scale))),
            other => Err(format!("constant {} is not a number", show_value(other))),
        }
    }

    fn digits(&self, e: &KExpr, d: &KExpr) -> Result<u32, String> {
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

    fn int(&mut self, e: &KExpr) -> Result<INode, String> {
        if e.ty == Type::Float64 {
            return Err(format!(
                "`{}` is float64 where an integer-stored value is expected",
                show(e)
            ));
        }
        let range = Range::of(e.ty);
        Ok(match &e.kind {
            KExprKind::Col(i) => {
                let i = self.col(*i, e)?;
                (self.func(false, &format!("  v = (i64)p.a{i}[i];\n")), false)
            }
            KExprKind::Table(t, x) => {
                let table = self.n_cols + t;
                let Some(elem) = self.elems.get(table) else {
                    return Err(format!(
                        "`{}` reads table {t}, which is not among the arguments",
                        show(e)
                    ));
                };
                if !matches!(elem, Elem::U8 | Elem::I32 | Elem::U32 | Elem::I64) {
                    return Err(format!("table {t} is {}, not a dictionary table", elem_name(*elem)));
                }
                let err = self.err(format!("string code outside dictionary table {t} in `{}`", show(e)));
                let (idx, _) = self.int(x)?;
                let body = format!(
                    "{}  if (x < 0 || (u64)x >= p.l{table}) return {err}u;\n  v = (i64)p.a{table}[x];\n",
                    call_i(&idx, "x")
                );
                (self.func(false, &body), true)
            }
            KExprKind::Const(v) => {
                let c = self.const_int(v, e.ty)?;
                (self.func(false, &format!("  v = {};\n", lit64(c))), false)
            }
            KExprKind::Cast(x) => self.cast(e, x)?,
            KExprKind::Neg(x) => {
                if scale_of(e.ty).is_none() {
                    return Err(format!("cannot negate {} in `{}`", e.ty, show(e)));
                }
                let err = self.overflow(e);
                let (x, _) = self.int(x)?;
                let body = format!("{}  const i128 y = -(i128)x;\n{}", call_i(&x, "x"), range.fit("y", err));
                (self.func(false, &body), false)
            }
            KExprKind::Arith(op, a, b) => self.arith(e, *op, a, b)?,
            KExprKind::Cmp(op, a, b) => {
                let body = if a.ty == Type::Float64 || b.ty == Type::Float64 {
                    let fa = self.float(a)?;
                    let fb = self.float(b)?;
                    format!("{}{}", call_f(&fa, "a"), call_f(&fb, "b"))
                } else {
                    let same = a.ty == b.ty || (is_integral(a.ty) && is_integral(b.ty));
                    if !same {
                        return Err(format!("cannot compare {} with {} in `{}`", a.ty, b.ty, show(e)));
                    }
                    let (fa, _) = self.int(a)?;
                    let (fb, _) = self.int(b)?;
                    format!("{}{}", call_i(&fa, "a"), call_i(&fb, "b"))
                };
                let body = format!("{body}  v = (a {} b) ? 1 : 0;\n", cmp_op(*op));
                (self.func(false, &body), false)
            }
            KExprKind::And(xs) => {
                let fs = self.bools(xs)?;
                (self.junction(&fs, 1), false)
            }
            KExprKind::Or(xs) => {
                let fs = self.bools(xs)?;
                (self.junction(&fs, 0), false)
            }
            KExprKind::Not(x) => {
                let f = self.bools(std::slice::from_ref(&**x))?.remove(0);
                let body = format!("{}  v = (x == 0) ? 1 : 0;\n", call_i(&f, "x"));
                (self.func(false, &body), false)
            }
            KExprKind::In(x, vs) => {
                if x.ty == Type::Float64 {
                    let vs = vs.iter().map(|v| self.const_float(v)).collect::<Result<Vec<_>, _>>()?;
                    let f = self.float(x)?;
                    let test = if vs.is_empty() {
                        "false".to_string()
                    } else {
                        vs.iter()
                            .map(|c| format!("x == {}", litf(*c)))
                            .collect::<Vec<_>>()
                            .join(" || ")
                    };
                    let body = format!("{}  v = ({test}) ? 1 : 0;\n", call_f(&f, "x"));
                    (self.func(false, &body), false)
                } else {
                    let vs = vs
                        .iter()
                        .map(|v| self.const_int(v, x.ty))
                        .collect::<Result<Vec<_>, _>>()?;
                    let (f, _) = self.int(x)?;
                    (self.in_list(&f, vs), false)
                }
            }
            KExprKind::Call(f, xs) => self.call(e, *f, xs)?,
        })
    }

    /// Membership in integer constants: a chain of comparisons, or a binary search in a
    /// sorted table for long lists.
    fn in_list(&mut self, f: &str, mut vs: Vec<i64>) -> String {
        let mut body = call_i(f, "x");
        if vs.is_empty() {
            body.push_str("  v = 0;\n");
        } else if vs.len() <= 8 {
            let test = vs
                .iter()
                .map(|c| format!("x == {}", lit64(*c)))
                .collect::<Vec<_>>()
                .join(" || ");
            let _ = writeln!(body, "  v = ({test}) ? 1 : 0;");
        } else {
            vs.sort_unstable();
            vs.dedup();
            let table = format!("in{}", self.next);
            let items = vs.iter().map(|c| lit64(*c)).collect::<Vec<_>>().join(", ");
            let _ = write!(
                self.funcs,
                "static __device__ const i64 {table}[{}] = {{{items}}};\n\n",
                vs.len()
            );
            let _ = writeln!(body, "  v = fox_in_sorted({table}, {}, x) ? 1 : 0;", vs.len());
        }
        self.func(false, &body)
    }

    fn bools(&mut self, xs: &[KExpr]) -> Result<Vec<String>, String> {
        xs.iter()
            .map(|x| {
                if x.ty != Type::Bool {
                    return Err(format!("`{}` is {}, not bool", show(x), x.ty));
                }
                self.int(x).map(|(f, _)| f)
            })
            .collect()
    }

    /// `and` (`unit` 1) or `or` (`unit` 0): the first operand that fails or is not `unit`
    /// decides the row.
    fn junction(&mut self, fs: &[String], unit: i64) -> String {
        let mut body = String::new();
        for (k, f) in fs.iter().enumerate() {
            let var = format!("x{k}");
            body.push_str(&call_i(f, &var));
            let _ = writeln!(body, "  if ({var} != {unit}) {{ v = {}; return 0u; }}", 1 - unit);
        }
        let _ = writeln!(body, "  v = {unit};");
        self.func(false, &body)
    }

    /// `x` rounded or truncated by `div`, then multiplied by `mul`, checked against
    /// `range`: the body after `x` (an `i64`) is set.
    fn scale_body(div: i128, mul: i128, round: bool, range: Range, err: ErrId) -> String {
        let mut body = String::new();
        if div == 1 {
            body.push_str("  i128 y = (i128)x;\n");
        } else if let Ok(d) = i64::try_from(div) {
            if round {
                let _ = writeln!(body, "  i128 y = (i128)fox_rha64(x, {});", lit64(d));
            } else {
                let _ = writeln!(body, "  i128 y = (i128)(x / {});", lit64(d));
            }
        } else if round {
            let _ = writeln!(body, "  i128 y = fox_rha128((i128)x, {});", lit128(div));
        } else {
            let _ = writeln!(body, "  i128 y = (i128)x / {};", lit128(div));
        }
        body.push_str(&Self::mul_body(mul, err));
        body.push_str(&range.fit("y", err));
        body
    }

    /// `y = y * mul` for an `i128 y`, failing with `err` where the product cannot fit 64
    /// bits (every result range is within 64 bits, and fox-cpu reports an `i128` overflow
    /// and a range overflow with the same error).
    fn mul_body(mul: i128, err: ErrId) -> String {
        if mul == 1 {
            return String::new();
        }
        match i64::try_from(mul) {
            Ok(m) => format!(
                "  if (!fox_in_range(y, (-9223372036854775807LL - 1), 9223372036854775807LL)) return {err}u;\n  y = y * (i128){};\n",
                lit64(m)
            ),
            Err(_) => format!("  if (y != 0) return {err}u;\n"),
        }
    }

    fn cast(&mut self, e: &KExpr, x: &KExpr) -> Result<INode, String> {
        let (from, to) = (x.ty, e.ty);
        if from == to {
            return self.int(x);
        }
        let range = Range::of(to);
        let err = self.overflow(e);
        if from == Type::Float64 && is_integral(to) {
            let f = self.float(x)?;
            let body = format!(
                "{}  const double t = trunc(x);\n  if (!(t >= -9223372036854775808.0 && t < 9223372036854775808.0)) return {err}u;\n  const i128 y = (i128)(i64)t;\n{}",
                call_f(&f, "x"),
                range.fit("y", err)
            );
            return Ok((self.func(false, &body), false));
        }
        let (Some(sf), Some(st)) = (scale_of(from), scale_of(to)) else {
            return Err(format!("cannot cast {from} to {to} in `{}`", show(e)));
        };
        let too_big = || format!("the rescale in `{}` exceeds 38 digits", show(e));
        let (div, mul, round) = if is_integral(to) {
            (pow10(sf).ok_or_else(too_big)?, 1, false)
        } else if st >= sf {
            (1, pow10(st - sf).ok_or_else(too_big)?, false)
        } else {
            (pow10(sf - st).ok_or_else(too_big)?, 1, true)
        };
        let (f, _) = self.int(x)?;
        let body = format!("{}{}", call_i(&f, "x"), Self::scale_body(div, mul, round, range, err));
        Ok((self.func(false, &body), false))
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
        if let Type::Decimal(r) = e.ty {
            let r = u32::from(r);
            let (Some(sa), Some(sb)) = (scale_of(a.ty), scale_of(b.ty)) else {
                return Err(bad());
            };
            let err = self.overflow(e);
            let too_big = || format!("the scales in `{}` exceed 38 digits", show(e));
            let body = match op {
                ArithOp::Add | ArithOp::Sub => {
                    if sa != r || sb != r {
                        return Err(format!(
                            "the operands of `{}` must have the result's scale {r}, not {sa} and {sb}",
                            show(e)
                        ));
                    }
                    let (fa, _) = self.int(a)?;
                    let (fb, _) = self.int(b)?;
                    let sign = if op == ArithOp::Add { "+" } else { "-" };
                    format!(
                        "{}{}  const i128 y = (i128)a {sign} (i128)b;\n{}",
                        call_i(&fa, "a"),
                        call_i(&fb, "b"),
                        range.fit("y", err)
                    )
                }
                ArithOp::Mul => {
                    let p = sa + sb;
                    let (div, mul) = if r >= p {
                        (1, pow10(r - p).ok_or_else(too_big)?)
                    } else {
                        (pow10(p - r).ok_or_else(too_big)?, 1)
                    };
                    let (fa, _) = self.int(a)?;
                    let (fb, _) = self.int(b)?;
                    let mut body = format!(
                        "{}{}  i128 y = (i128)a * (i128)b;\n",
                        call_i(&fa, "a"),
                        call_i(&fb, "b")
                    );
                    if div != 1 {
                        let _ = writeln!(body, "  y = fox_rha128(y, {});", lit128(div));
                    }
                    body.push_str(&Self::mul_body(mul, err));
                    body.push_str(&range.fit("y", err));
                    body
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
                    let (fa, _) = self.int(a)?;
                    let (fb, _) = self.int(b)?;
                    let mut body = format!("{}{}", call_i(&fa, "a"), call_i(&fb, "b"));
                    let _ = writeln!(body, "  if (b == 0) return {err_div}u;");
                    body.push_str(&Self::scaled_operand("n", "a", num, err));
                    body.push_str(&Self::scaled_operand("d", "b", den, err));
                    body.push_str("  const i128 y = fox_rha128(n, d);\n");
                    body.push_str(&range.fit("y", err));
                    body
                }
            };
            return Ok((self.func(false, &body), false));
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
        let (fa, _) = self.int(a)?;
        let (fb, _) = self.int(b)?;
        let mut body = format!("{}{}", call_i(&fa, "a"), call_i(&fb, "b"));
        match op {
            ArithOp::Add => body.push_str("  const i128 y = (i128)a + (i128)b;\n"),
            ArithOp::Sub => body.push_str("  const i128 y = (i128)a - (i128)b;\n"),
            ArithOp::Mul => body.push_str("  const i128 y = (i128)a * (i128)b;\n"),
            ArithOp::Div => {
                let _ = writeln!(body, "  if (b == 0) return {err_div}u;");
                body.push_str("  const i128 y = (b == -1) ? -(i128)a : (i128)(a / b);\n");
            }
        }
        body.push_str(&range.fit("y", err));
        Ok((self.func(false, &body), false))
    }

    /// `const i128 name = (i128)x * k`, failing with `err` where the product overflows
    /// 128 bits (`k` a positive power of ten).
    fn scaled_operand(name: &str, x: &str, k: i128, err: ErrId) -> String {
        if i64::try_from(k).is_ok() {
            return format!("  const i128 {name} = (i128){x} * {};\n", lit128(k));
        }
        // |x| * k fits 128 bits exactly when |x| <= i128::MAX / k (k is not a power of two).
        let lim = i128::MAX / k;
        let mut s = String::new();
        if let Ok(l) = i64::try_from(lim) {
            let _ = writeln!(s, "  if ({x} > {} || {x} < -{}) return {err}u;", lit64(l), lit64(l));
        }
        let _ = writeln!(s, "  const i128 {name} = (i128){x} * {};", lit128(k));
        s
    }

    fn call(&mut self, e: &KExpr, f: ScalarFn, xs: &[KExpr]) -> Result<INode, String> {
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
                    ScalarFn::Year => "y",
                    ScalarFn::Month => "m",
                    _ => "d",
                };
                let (fx, _) = self.int(x)?;
                let body = format!(
                    "{}  i64 y, m, d;\n  fox_civil(x, y, m, d);\n  v = {part};\n",
                    call_i(&fx, "x")
                );
                (self.func(false, &body), true)
            }
            ScalarFn::Abs => {
                if scale_of(x.ty).is_none() {
                    return Err(format!("`{}` needs a number, got {}", show(e), x.ty));
                }
                let err = self.overflow(e);
                let (fx, _) = self.int(x)?;
                let body = format!(
                    "{}  const i128 y = x < 0 ? -(i128)x : (i128)x;\n{}",
                    call_i(&fx, "x"),
                    Range::of(e.ty).fit("y", err)
                );
                (self.func(false, &body), false)
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
                let (fx, _) = self.int(x)?;
                let div = pow10(s - m).ok_or_else(too_big)?;
                let mul = pow10(r - m).ok_or_else(too_big)?;
                let body = format!(
                    "{}{}",
                    call_i(&fx, "x"),
                    Self::scale_body(div, mul, true, Range::of(e.ty), err)
                );
                (self.func(false, &body), false)
            }
        })
    }

    fn float(&mut self, e: &KExpr) -> Result<String, String> {
        if e.ty != Type::Float64 {
            if let Some(s) = scale_of(e.ty) {
                // An integer or decimal operand where a float is needed.
                let (f, _) = self.int(e)?;
                let div = 10f64.powi(s as i32);
                let body = format!(
                    "{}  v = __ddiv_rn(__ll2double_rn(x), {});\n",
                    call_i(&f, "x"),
                    litf(div)
                );
                return Ok(self.func(true, &body));
            }
            return Err(format!("`{}` is {}, not a number", show(e), e.ty));
        }
        Ok(match &e.kind {
            KExprKind::Col(i) => {
                let i = self.col(*i, e)?;
                self.func(true, &format!("  v = p.a{i}[i];\n"))
            }
            KExprKind::Const(v) => {
                let c = self.const_float(v)?;
                self.func(true, &format!("  v = {};\n", litf(c)))
            }
            KExprKind::Cast(x) => self.float(x)?,
            KExprKind::Neg(x) => {
                let f = self.float(x)?;
                self.func(true, &format!("{}  v = -x;\n", call_f(&f, "x")))
            }
            KExprKind::Arith(op, a, b) => {
                let err_div = self.div_zero(e);
                let fa = self.float(a)?;
                let fb = self.float(b)?;
                let mut body = format!("{}{}", call_f(&fa, "a"), call_f(&fb, "b"));
                match op {
                    ArithOp::Add => body.push_str("  v = __dadd_rn(a, b);\n"),
                    ArithOp::Sub => body.push_str("  v = __dsub_rn(a, b);\n"),
                    ArithOp::Mul => body.push_str("  v = __dmul_rn(a, b);\n"),
                    ArithOp::Div => {
                        let _ = writeln!(body, "  if (b == 0.0) return {err_div}u;\n  v = __ddiv_rn(a, b);");
                    }
                }
                self.func(true, &body)
            }
            KExprKind::Call(ScalarFn::Abs, xs) if xs.len() == 1 => {
                let f = self.float(&xs[0])?;
                self.func(true, &format!("{}  v = fabs(x);\n", call_f(&f, "x")))
            }
            KExprKind::Call(ScalarFn::Round, xs) if xs.len() == 2 => {
                let digits = self.digits(e, &xs[1])? as i32;
                let f = self.float(&xs[0])?;
                let m = litf(10f64.powi(digits));
                let body = format!(
                    "{}  const double s = __dmul_rn(x, {m});\n  v = isfinite(s) ? __ddiv_rn(round(s), {m}) : x;\n",
                    call_f(&f, "x")
                );
                self.func(true, &body)
            }
            _ => return Err(format!("`{}` cannot have type float64", show(e))),
        })
    }
}
