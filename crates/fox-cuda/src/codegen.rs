//! `Eval` on the GPU: a [`KExpr`] becomes the CUDA C++ source of one kernel.
//!
//! The expression is checked into its one checked form (`fox_kernel::check_expr`, which
//! the CPU evaluates too: the same plan errors, the same error sites and messages), and
//! each node of that tree becomes a device function that evaluates one row: it returns 0
//! and writes the value, or returns the id of the row's error. A node evaluates its
//! operands left to right and returns the first operand error, so a row reports the same
//! error as on the CPU; `and`/`or` stop at the first operand that decides the row, so
//! operands they do not need never fail.
//!
//! Values stored as integers are carried as `long long` and computed in `__int128`
//! (decimal products and quotients, rescales, overflow checks), floats as `double` with
//! the `_rn` intrinsics so that no multiply-add is ever contracted: results are bit-equal
//! to the CPU's. A tree that holds a 38-digit decimal (`WideDecimal`, stored as `i128`)
//! carries every integer-stored value as `__int128` instead, as fox-cpu computes such a
//! tree in `i128`: sums, differences and products are checked for overflow of 128 bits
//! (which fox-cpu reports as the node's overflow) before the node's range check, and the
//! helpers this needs (`WIDE_PRELUDE`) are only in such kernels. A failing row records `(row << 24) | error id`
//! with an atomic maximum of its complement in an error word, so the host reads the
//! smallest failing row, whatever the scheduling.
//!
//! Kernel parameters, in order: one pointer per argument (columns, then dictionary
//! tables), typed by the argument's element type; the length (`unsigned long long`) of
//! each table argument; the output pointer; `lo`, `hi` (the rows to evaluate); the error
//! word pointer (2 x u64); `probe` (u32). With `probe` set, the kernel writes the raw
//! value of its rows to `err[1]` instead of the output (used for the one row whose value
//! does not fit the output's element type, to print that value).

use fox_kernel::checked::{Checked, DatePart, ErrId, FNode, INode, Range, Root};
use fox_kernel::{Elem, KExpr};
use fox_runtime::LaunchCtx;
use fox_sema::core::{ArithOp, CmpOp, Type};
use std::fmt::Write as _;

/// NVRTC options a generated source needs besides the architecture (`__int128`).
pub const NVRTC_OPTIONS: &[&str] = &["--device-int128"];

pub use crate::prelude::BLOCK;

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

fn c_type(e: Elem) -> &'static str {
    match e {
        Elem::U8 => "unsigned char",
        Elem::I32 => "int",
        Elem::U32 => "unsigned int",
        Elem::I64 => "long long",
        Elem::U64 => "unsigned long long",
        Elem::F64 => "double",
        Elem::I128 => "i128",
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
/// tables, string constants without a code) are those of `fox_kernel::check_expr`.
pub fn generate_source(
    expr: &KExpr,
    n_cols: usize,
    arg_elems: &[Elem],
    ctx: &dyn LaunchCtx,
) -> Result<Generated, String> {
    let c = fox_kernel::check_expr(expr, n_cols, arg_elems, &|s: &str| ctx.string_code(s))?;
    let wide = c.wide;
    let mut g = Gen {
        funcs: String::new(),
        next: 0,
        wide,
    };
    let out_elem;
    let mut narrow = false;
    let root;
    match &c.root {
        Root::Float(f) => {
            root = g.float(f);
            out_elem = Elem::F64;
        }
        Root::Int(i) => {
            root = g.int(i);
            out_elem = Elem::of(c.ty);
            narrow = i.unranged() && !matches!(out_elem, Elem::I64 | Elem::I128);
        }
    }
    if c.msgs.len() >= 1 << ID_BITS {
        return Err(format!("`{}` has too many error sites for one kernel", c.what));
    }
    let mut src = String::new();
    src.push_str(&crate::prelude::common_header());
    src.push_str(PRELUDE);
    if wide {
        src.push_str(WIDE_PRELUDE);
    }
    // Argument block.
    src.push_str(&arg_struct(arg_elems, n_cols));
    src.push_str(&g.funcs);
    // The kernel.
    let mut params = arg_params(arg_elems, n_cols);
    params.push(format!("{}* __restrict__ out", c_type(out_elem)));
    params.extend(["u64 lo", "u64 hi", "u64* err", "unsigned probe"].map(String::from));
    let _ = writeln!(
        src,
        "extern \"C\" __global__ void __launch_bounds__({BLOCK}) KERNEL_NAME({}) {{",
        params.join(", ")
    );
    src.push_str(&arg_init(arg_elems, n_cols));
    src.push_str("  const u64 stride = (u64)gridDim.x * blockDim.x;\n");
    src.push_str("  for (u64 i = lo + (u64)blockIdx.x * blockDim.x + threadIdx.x; i < hi; i += stride) {\n");
    let vty = if out_elem == Elem::F64 { "double" } else { g.ity() };
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
        msgs: c.msgs,
        narrow,
        what: c.what,
        ty: c.ty,
    })
}

/// The struct `P` through which node functions read the arguments: one pointer per
/// argument (columns, then tables) and the length of each table.
fn arg_struct(arg_elems: &[Elem], n_cols: usize) -> String {
    let mut src = String::from("struct P {\n");
    for (j, e) in arg_elems.iter().enumerate() {
        let _ = writeln!(src, "  const {}* __restrict__ a{j};", c_type(*e));
    }
    for j in n_cols..arg_elems.len() {
        let _ = writeln!(src, "  u64 l{j};");
    }
    src.push_str("};\n\n");
    src
}

/// The kernel parameters that fill `P`.
fn arg_params(arg_elems: &[Elem], n_cols: usize) -> Vec<String> {
    let mut params: Vec<String> = arg_elems
        .iter()
        .enumerate()
        .map(|(j, e)| format!("const {}* __restrict__ a{j}", c_type(*e)))
        .collect();
    params.extend((n_cols..arg_elems.len()).map(|j| format!("u64 l{j}")));
    params
}

/// The kernel's first lines: `P p` filled from its parameters.
fn arg_init(arg_elems: &[Elem], n_cols: usize) -> String {
    let mut src = String::from("  P p;\n");
    for j in 0..arg_elems.len() {
        let _ = writeln!(src, "  p.a{j} = a{j};");
    }
    for j in n_cols..arg_elems.len() {
        let _ = writeln!(src, "  p.l{j} = l{j};");
    }
    src
}

/// The helpers of every generated kernel, after the common prelude
/// (`kernels/common.cuh`, whose typedefs they use).
const PRELUDE: &str = r#"// Generated by fox-cuda from an Eval expression.
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

// Soufflé's a ^ b on int64 where it is exact (fox_kernel::int_pow): 0 with r set, 1 for
// 0 to a negative power, 2 where the power does not fit int64 or a double does not hold
// it exactly.
static __device__ __forceinline__ unsigned fox_pow(i64 a, i64 b, i64& r) {
  const u64 exact = 1ull << 53;
  const u64 ub = b < 0 ? 0ull - (u64)b : (u64)b;
  const bool odd = (b & 1) != 0 && ub <= exact;
  if (a == 0) { if (b < 0) return 1u; r = b == 0 ? 1 : 0; return 0u; }
  if (a == 1) { r = 1; return 0u; }
  if (a == -1) { r = odd ? -1 : 1; return 0u; }
  if (b < 0) { r = 0; return 0u; }
  if (b >= 64) return 2u;
  const u64 ua = a < 0 ? 0ull - (u64)a : (u64)a;
  u64 m = 1ull;
  for (i64 k = 0; k < b; ++k) {
    if (__umul64hi(m, ua) != 0ull) return 2u;
    m *= ua;
    if (m > (1ull << 63)) return 2u;
  }
  const bool neg = a < 0 && (b & 1) != 0;
  if (!neg && m > 9223372036854775807ull) return 2u;
  const u64 sig = m >> (__ffsll((long long)m) - 1);
  if (sig > exact) return 2u;
  r = neg ? (i64)(0ull - m) : (i64)m;
  return 0u;
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

/// The helpers of kernels whose tree holds a 38-digit decimal (after [`PRELUDE`]).
const WIDE_PRELUDE: &str = r#"// 128-bit helpers (a tree with a 38-digit decimal).
static __device__ __forceinline__ bool fox_in_range128(i128 x, i128 lo, i128 hi) {
  return x >= lo && x <= hi;
}

// r = a + b (a - b); false when it overflows 128 bits.
static __device__ __forceinline__ bool fox_add128(i128 a, i128 b, i128& r) {
  r = (i128)((u128)a + (u128)b);
  return ((a ^ r) & (b ^ r)) >= 0;
}

static __device__ __forceinline__ bool fox_sub128(i128 a, i128 b, i128& r) {
  r = (i128)((u128)a - (u128)b);
  return ((a ^ b) & (a ^ r)) >= 0;
}

// r = a * b; false when the product does not fit 128 bits.
static __device__ __forceinline__ bool fox_mul128(i128 a, i128 b, i128& r) {
  const bool neg = (a < 0) != (b < 0);
  const u128 ua = a < 0 ? (u128)0 - (u128)a : (u128)a;
  const u128 ub = b < 0 ? (u128)0 - (u128)b : (u128)b;
  const u64 a1 = (u64)(ua >> 64), a0 = (u64)ua, b1 = (u64)(ub >> 64), b0 = (u64)ub;
  if (a1 != 0ull && b1 != 0ull) return false;
  // The cross product a1 * b0 + a0 * b1 (one term is 0) must fit 64 bits.
  const u128 cross = a1 != 0ull ? (u128)a1 * b0 : (u128)b1 * a0;
  if ((u64)(cross >> 64) != 0ull) return false;
  const u128 low = (u128)a0 * b0;
  const u64 top = (u64)(low >> 64) + (u64)cross;
  if (top < (u64)cross) return false;
  const u128 m = ((u128)top << 64) | (u128)(u64)low;
  const u128 lim = neg ? ((u128)1 << 127) : (((u128)1 << 127) - 1);
  if (m > lim) return false;
  r = neg ? (i128)((u128)0 - m) : (i128)m;
  return true;
}

// x as the nearest double (ties to even), as Rust's `i128 as f64`.
static __device__ __forceinline__ double fox_i128_to_double(i128 x) {
  if (x >= (i128)(-9223372036854775807LL - 1) && x <= (i128)9223372036854775807LL) return __ll2double_rn((i64)x);
  const bool neg = x < 0;
  const u128 u = neg ? (u128)0 - (u128)x : (u128)x;
  const u64 hi = (u64)(u >> 64);
  double d;
  if (hi == 0ull) {
    d = __ull2double_rn((u64)u);
  } else {
    // The top 64 bits, the bits below them folded into the lowest one (sticky), rounded
    // once, then scaled exactly.
    const int sh = 64 - __clzll((long long)hi);
    const u64 top = (u64)(u >> sh) | (((u & (((u128)1 << sh) - 1)) != 0) ? 1ull : 0ull);
    d = scalbn(__ull2double_rn(top), sh);
  }
  return neg ? -d : d;
}

// Binary search in a sorted array of 128-bit values.
static __device__ __forceinline__ bool fox_in_sorted128(const i128* xs, int n, i128 v) {
  int lo = 0, hi = n;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (xs[mid] < v) lo = mid + 1; else hi = mid;
  }
  return lo < n && xs[lo] == v;
}

"#;

/// `if (!in range) return err; v = (i64)y;` for an `i128 y`; in a 128-bit tree
/// (`wide`) `v = y`.
fn fit(range: Range, y: &str, err: ErrId, wide: bool) -> String {
    match (i64::try_from(range.min), i64::try_from(range.max)) {
        (Ok(lo), Ok(hi)) => format!(
            "  if (!fox_in_range({y}, {}, {})) return {err}u;\n  v = {}{y};\n",
            lit64(lo),
            lit64(hi),
            if wide { "" } else { "(i64)" }
        ),
        _ => format!(
            "  if (!fox_in_range128({y}, {}, {})) return {err}u;\n  v = {y};\n",
            lit128(range.min),
            lit128(range.max)
        ),
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

fn call_f(f: &str, var: &str) -> String {
    call(f, "double", var)
}

/// The translation of a checked tree into node functions.
struct Gen {
    funcs: String,
    next: usize,
    /// Whether integer-stored values are carried in 128 bits (the tree holds a 38-digit
    /// decimal).
    wide: bool,
}

impl Gen {
    /// The type integer-stored values are carried in.
    fn ity(&self) -> &'static str {
        if self.wide {
            "i128"
        } else {
            "i64"
        }
    }

    /// Calls integer node function `f` into a new local `var`, returning its error.
    fn call_i(&self, f: &str, var: &str) -> String {
        call(f, self.ity(), var)
    }

    /// An integer constant in the tree's width.
    fn lit(&self, x: i128) -> String {
        match i64::try_from(x) {
            Ok(v) if !self.wide => lit64(v),
            _ => lit128(x),
        }
    }

    /// Emits a node function with `body` (which sets `v`) and returns its name.
    fn func(&mut self, float: bool, body: &str) -> String {
        let name = format!("n{}", self.next);
        self.next += 1;
        let vty = if float { "double" } else { self.ity() };
        let _ = write!(
            self.funcs,
            "static __device__ __forceinline__ unsigned {name}(const P& p, u64 i, {vty}& v) {{\n{body}  return 0u;\n}}\n\n"
        );
        name
    }

    /// The function of an integer-stored node.
    fn int(&mut self, n: &INode) -> String {
        let body = match n {
            INode::Col(i) => format!("  v = ({})p.a{i}[i];\n", self.ity()),
            INode::Table { table, idx, err } => {
                let idx = self.int(idx);
                if self.wide {
                    format!(
                        "{}  if (x < 0 || x >= (i128)p.l{table}) return {err}u;\n  v = (i128)p.a{table}[(u64)x];\n",
                        self.call_i(&idx, "x")
                    )
                } else {
                    format!(
                        "{}  if (x < 0 || (u64)x >= p.l{table}) return {err}u;\n  v = (i64)p.a{table}[x];\n",
                        self.call_i(&idx, "x")
                    )
                }
            }
            INode::Const(c) => format!("  v = {};\n", self.lit(*c)),
            INode::Scale {
                x,
                div,
                mul,
                round,
                range,
                err,
            } => {
                let f = self.int(x);
                format!(
                    "{}{}",
                    self.call_i(&f, "x"),
                    self.scale_body(*div, *mul, *round, *range, *err)
                )
            }
            INode::FromFloat { x, range, err } => {
                let f = self.float(x);
                format!(
                    "{}  const double t = trunc(x);\n  if (!(t >= -9223372036854775808.0 && t < 9223372036854775808.0)) return {err}u;\n  const i128 y = (i128)(i64)t;\n{}",
                    call_f(&f, "x"),
                    fit(*range, "y", *err, self.wide)
                )
            }
            INode::Neg { x, range, err } => {
                let f = self.int(x);
                format!(
                    "{}  const i128 y = -(i128)x;\n{}",
                    self.call_i(&f, "x"),
                    fit(*range, "y", *err, self.wide)
                )
            }
            INode::Abs { x, range, err } => {
                let f = self.int(x);
                format!(
                    "{}  const i128 y = x < 0 ? -(i128)x : (i128)x;\n{}",
                    self.call_i(&f, "x"),
                    fit(*range, "y", *err, self.wide)
                )
            }
            INode::Arith {
                op,
                a,
                b,
                range,
                err,
                err_div,
            } => {
                let (fa, fb) = (self.int(a), self.int(b));
                let mut body = format!("{}{}", self.call_i(&fa, "a"), self.call_i(&fb, "b"));
                match op {
                    // In a 128-bit tree the operands may have 38 digits: the sum is checked
                    // for overflow of 128 bits (the node's overflow on the CPU too).
                    ArithOp::Add | ArithOp::Sub if self.wide => {
                        let f = if *op == ArithOp::Add {
                            "fox_add128"
                        } else {
                            "fox_sub128"
                        };
                        let _ = writeln!(body, "  i128 y;\n  if (!{f}(a, b, y)) return {err}u;");
                    }
                    ArithOp::Add => body.push_str("  const i128 y = (i128)a + (i128)b;\n"),
                    ArithOp::Sub => body.push_str("  const i128 y = (i128)a - (i128)b;\n"),
                    // Products and quotients here are of integers (64-bit values).
                    ArithOp::Mul => body.push_str("  const i128 y = (i128)a * (i128)b;\n"),
                    ArithOp::Div => {
                        let _ = writeln!(body, "  if (b == 0) return {err_div}u;");
                        if self.wide {
                            body.push_str("  const i128 y = (b == -1) ? -(i128)a : (i128)((i64)a / (i64)b);\n");
                        } else {
                            body.push_str("  const i128 y = (b == -1) ? -(i128)a : (i128)(a / b);\n");
                        }
                    }
                    // Soufflé's operators take int64 operands (in a 128-bit tree too).
                    ArithOp::Rem => {
                        let _ = writeln!(
                            body,
                            "  if (b == 0) return {err_div}u;\n  if (b == -1 && (i64)a == (-9223372036854775807LL - 1)) return {err}u;\n  const i128 y = (i128)((i64)a % (i64)b);"
                        );
                    }
                    ArithOp::Pow => {
                        let _ = writeln!(
                            body,
                            "  i64 r = 0;\n  const unsigned pe = fox_pow((i64)a, (i64)b, r);\n  if (pe == 1u) return {err_div}u;\n  if (pe != 0u) return {err}u;\n  const i128 y = (i128)r;"
                        );
                    }
                    // The checker makes `INode::Bits` of the bitwise operators.
                    _ => {
                        let _ = writeln!(body, "  return {err}u;\n  const i128 y = 0;");
                    }
                }
                body.push_str(&fit(*range, "y", *err, self.wide));
                body
            }
            INode::DecMul {
                a,
                b,
                div,
                mul,
                range,
                err,
            } => {
                let (fa, fb) = (self.int(a), self.int(b));
                let mut body = format!("{}{}", self.call_i(&fa, "a"), self.call_i(&fb, "b"));
                if self.wide {
                    let _ = writeln!(body, "  i128 y;\n  if (!fox_mul128(a, b, y)) return {err}u;");
                } else {
                    body.push_str("  i128 y = (i128)a * (i128)b;\n");
                }
                if *div != 1 {
                    let _ = writeln!(body, "  y = fox_rha128(y, {});", lit128(*div));
                }
                if self.wide {
                    body.push_str(&Self::mul_body_wide(*mul, *range, *err));
                } else {
                    body.push_str(&Self::mul_body(*mul, *err));
                }
                body.push_str(&fit(*range, "y", *err, self.wide));
                body
            }
            INode::DecDiv {
                a,
                b,
                num,
                den,
                range,
                err,
                err_div,
            } => {
                let (fa, fb) = (self.int(a), self.int(b));
                let mut body = format!("{}{}", self.call_i(&fa, "a"), self.call_i(&fb, "b"));
                let _ = writeln!(body, "  if (b == 0) return {err_div}u;");
                body.push_str(&self.scaled_operand("n", "a", *num, *err));
                body.push_str(&self.scaled_operand("d", "b", *den, *err));
                body.push_str("  const i128 y = fox_rha128(n, d);\n");
                body.push_str(&fit(*range, "y", *err, self.wide));
                body
            }
            INode::CmpI(op, a, b) => {
                let (fa, fb) = (self.int(a), self.int(b));
                format!(
                    "{}{}  v = (a {} b) ? 1 : 0;\n",
                    self.call_i(&fa, "a"),
                    self.call_i(&fb, "b"),
                    cmp_op(*op)
                )
            }
            INode::CmpF(op, a, b) => {
                let (fa, fb) = (self.float(a), self.float(b));
                format!(
                    "{}{}  v = (a {} b) ? 1 : 0;\n",
                    call_f(&fa, "a"),
                    call_f(&fb, "b"),
                    cmp_op(*op)
                )
            }
            INode::And(xs) => return self.junction(xs, 1),
            INode::Or(xs) => return self.junction(xs, 0),
            INode::Not(x) => {
                let f = self.int(x);
                format!("{}  v = (x == 0) ? 1 : 0;\n", self.call_i(&f, "x"))
            }
            INode::InI(x, vs) => {
                let f = self.int(x);
                return self.in_list(&f, vs.clone());
            }
            INode::InF(x, vs) => {
                let f = self.float(x);
                let test = if vs.is_empty() {
                    "false".to_string()
                } else {
                    vs.iter()
                        .map(|c| format!("x == {}", litf(*c)))
                        .collect::<Vec<_>>()
                        .join(" || ")
                };
                format!("{}  v = ({test}) ? 1 : 0;\n", call_f(&f, "x"))
            }
            INode::Bits { op, a, b } => {
                let (fa, fb) = (self.int(a), self.int(b));
                let expr = match op {
                    ArithOp::BitAnd => "x & z",
                    ArithOp::BitOr => "x | z",
                    ArithOp::BitXor => "x ^ z",
                    ArithOp::Shl => "(i64)((u64)x << s)",
                    ArithOp::Shr => "x >> s",
                    ArithOp::ShrU => "(i64)((u64)x >> s)",
                    ArithOp::LogAnd => "(x != 0 && z != 0) ? 1 : 0",
                    ArithOp::LogOr => "(x != 0 || z != 0) ? 1 : 0",
                    ArithOp::LogXor => "((x != 0) != (z != 0)) ? 1 : 0",
                    // Not bitwise: the checker makes no `Bits` node of them.
                    ArithOp::Add | ArithOp::Sub | ArithOp::Mul | ArithOp::Div | ArithOp::Rem | ArithOp::Pow => "0",
                };
                format!(
                    "{}{}  const i64 x = (i64)a, z = (i64)b;\n  const unsigned s = (unsigned)((u64)z & 63ull);\n  (void)s;\n  v = ({})({expr});\n",
                    self.call_i(&fa, "a"),
                    self.call_i(&fb, "b"),
                    self.ity()
                )
            }
            INode::BitNot(x) => {
                let f = self.int(x);
                format!("{}  v = ({})(~(i64)x);\n", self.call_i(&f, "x"), self.ity())
            }
            INode::MinMax { max, a, b, keys } => {
                let (fa, fb) = (self.int(a), self.int(b));
                let mut body = format!("{}{}", self.call_i(&fa, "a"), self.call_i(&fb, "b"));
                let (ka, kb) = match keys {
                    Some((ka, kb)) => {
                        let (fka, fkb) = (self.int(ka), self.int(kb));
                        body.push_str(&self.call_i(&fka, "ka"));
                        body.push_str(&self.call_i(&fkb, "kb"));
                        ("ka", "kb")
                    }
                    None => ("a", "b"),
                };
                let test = if *max {
                    format!("{ka} < {kb}")
                } else {
                    format!("{kb} < {ka}")
                };
                let _ = writeln!(body, "  v = ({test}) ? b : a;");
                body
            }
            INode::Date(part, x) => {
                let f = self.int(x);
                let part = match part {
                    DatePart::Year => "y",
                    DatePart::Month => "m",
                    DatePart::Day => "d",
                };
                format!(
                    "{}  i64 y, m, d;\n  fox_civil({}x, y, m, d);\n  v = {part};\n",
                    self.call_i(&f, "x"),
                    if self.wide { "(i64)" } else { "" }
                )
            }
        };
        self.func(false, &body)
    }

    /// Membership in integer constants: a chain of comparisons, or a binary search in a
    /// sorted table for long lists (of 128-bit values when a constant needs them).
    fn in_list(&mut self, f: &str, mut vs: Vec<i128>) -> String {
        let mut body = self.call_i(f, "x");
        if vs.is_empty() {
            body.push_str("  v = 0;\n");
        } else if vs.len() <= 8 {
            let test = vs
                .iter()
                .map(|c| format!("x == {}", self.lit(*c)))
                .collect::<Vec<_>>()
                .join(" || ");
            let _ = writeln!(body, "  v = ({test}) ? 1 : 0;");
        } else {
            vs.sort_unstable();
            vs.dedup();
            let table = format!("in{}", self.next);
            let narrow: Option<Vec<i64>> = vs.iter().map(|c| i64::try_from(*c).ok()).collect();
            let (ty, items, search) = match narrow {
                Some(vs) => ("i64", vs.iter().map(|c| lit64(*c)).collect::<Vec<_>>(), "fox_in_sorted"),
                None => ("i128", vs.iter().map(|c| lit128(*c)).collect(), "fox_in_sorted128"),
            };
            let _ = write!(
                self.funcs,
                "static __device__ const {ty} {table}[{}] = {{{}}};\n\n",
                vs.len(),
                items.join(", ")
            );
            if ty == "i64" && self.wide {
                // x may lie outside the 64-bit table's type.
                let _ = writeln!(
                    body,
                    "  v = (x >= (i128)(-9223372036854775807LL - 1) && x <= (i128)9223372036854775807LL && {search}({table}, {}, (i64)x)) ? 1 : 0;",
                    vs.len()
                );
            } else {
                let _ = writeln!(body, "  v = {search}({table}, {}, x) ? 1 : 0;", vs.len());
            }
        }
        self.func(false, &body)
    }

    /// `and` (`unit` 1) or `or` (`unit` 0): the first operand that fails or is not `unit`
    /// decides the row.
    fn junction(&mut self, xs: &[INode], unit: i64) -> String {
        let fs: Vec<String> = xs.iter().map(|x| self.int(x)).collect();
        let mut body = String::new();
        for (k, f) in fs.iter().enumerate() {
            let var = format!("x{k}");
            body.push_str(&self.call_i(f, &var));
            let _ = writeln!(body, "  if ({var} != {unit}) {{ v = {}; return 0u; }}", 1 - unit);
        }
        let _ = writeln!(body, "  v = {unit};");
        self.func(false, &body)
    }

    /// `x` rounded or truncated by `div`, then multiplied by `mul`, checked against
    /// `range`: the body after `x` (an `i64`, in a 128-bit tree an `i128`) is set.
    fn scale_body(&self, div: i128, mul: i128, round: bool, range: Range, err: ErrId) -> String {
        if self.wide {
            let mut body = String::new();
            if div == 1 {
                body.push_str("  i128 y = x;\n");
            } else if round {
                let _ = writeln!(body, "  i128 y = fox_rha128(x, {});", lit128(div));
            } else {
                let _ = writeln!(body, "  i128 y = x / {};", lit128(div));
            }
            body.push_str(&Self::mul_body_wide(mul, range, err));
            body.push_str(&fit(range, "y", err, true));
            return body;
        }
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
        body.push_str(&fit(range, "y", err, false));
        body
    }

    /// `y = y * mul` for an `i128 y` in a 128-bit tree, failing with `err` where the
    /// product falls outside `range` (fox-cpu fails there either way: the product overflows
    /// 128 bits, or its range check fails).
    fn mul_body_wide(mul: i128, range: Range, err: ErrId) -> String {
        if mul == 1 {
            return String::new();
        }
        // y * mul is in range exactly when y is in [ceil(min / mul), floor(max / mul)].
        let lo = range.min.div_euclid(mul) + i128::from(range.min.rem_euclid(mul) != 0);
        let hi = range.max.div_euclid(mul);
        format!(
            "  if (y < {} || y > {}) return {err}u;\n  y = y * {};\n",
            lit128(lo),
            lit128(hi),
            lit128(mul)
        )
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

    /// `const i128 name = (i128)x * k`, failing with `err` where the product overflows
    /// 128 bits (`k` a positive power of ten).
    fn scaled_operand(&self, name: &str, x: &str, k: i128, err: ErrId) -> String {
        if self.wide {
            // x may have 38 digits: check |x| <= i128::MAX / k (k is not a power of two
            // above 1, so the negative bound is the same).
            if k == 1 {
                return format!("  const i128 {name} = {x};\n");
            }
            let lim = lit128(i128::MAX / k);
            return format!(
                "  if ({x} > {lim} || {x} < -{lim}) return {err}u;\n  const i128 {name} = {x} * {};\n",
                lit128(k)
            );
        }
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

    /// The function of a float node.
    fn float(&mut self, n: &FNode) -> String {
        let body = match n {
            FNode::Col(i) => format!("  v = p.a{i}[i];\n"),
            FNode::Const(c) => format!("  v = {};\n", litf(*c)),
            FNode::FromInt { x, div } => {
                let f = self.int(x);
                // A 38-digit value rounds to the nearest double as the CPU's `as f64`
                // (`fox_i128_to_double` converts a 64-bit value as `__ll2double_rn`).
                let conv = if self.wide {
                    "fox_i128_to_double(x)"
                } else {
                    "__ll2double_rn(x)"
                };
                format!("{}  v = __ddiv_rn({conv}, {});\n", self.call_i(&f, "x"), litf(*div))
            }
            FNode::Neg(x) => {
                let f = self.float(x);
                format!("{}  v = -x;\n", call_f(&f, "x"))
            }
            FNode::Abs(x) => {
                let f = self.float(x);
                format!("{}  v = fabs(x);\n", call_f(&f, "x"))
            }
            FNode::Arith { op, a, b, err_div } => {
                let (fa, fb) = (self.float(a), self.float(b));
                let mut body = format!("{}{}", call_f(&fa, "a"), call_f(&fb, "b"));
                match op {
                    ArithOp::Add => body.push_str("  v = __dadd_rn(a, b);\n"),
                    ArithOp::Sub => body.push_str("  v = __dsub_rn(a, b);\n"),
                    ArithOp::Mul => body.push_str("  v = __dmul_rn(a, b);\n"),
                    ArithOp::Div => {
                        let _ = writeln!(body, "  if (b == 0.0) return {err_div}u;\n  v = __ddiv_rn(a, b);");
                    }
                    // The checker takes Soufflé's operators on int64 only.
                    _ => body.push_str("  v = __longlong_as_double(0x7ff8000000000000ll);\n"),
                }
                body
            }
            FNode::MinMax { max, a, b } => {
                let (fa, fb) = (self.float(a), self.float(b));
                let test = if *max { "a < b" } else { "b < a" };
                format!("{}{}  v = ({test}) ? b : a;\n", call_f(&fa, "a"), call_f(&fb, "b"))
            }
            FNode::Round { x, digits } => {
                let f = self.float(x);
                let m = litf(10f64.powi(*digits));
                format!(
                    "{}  const double s = __dmul_rn(x, {m});\n  v = isfinite(s) ? __ddiv_rn(round(s), {m}) : x;\n",
                    call_f(&f, "x")
                )
            }
        };
        self.func(true, &body)
    }
}

// ---- fused filter and aggregation ------------------------------------------------------------

/// Threads per block of a fused reduction.
pub const FUSED_BLOCK: u32 = 128;

/// The identity of an accumulator.
fn ident(kind: AccKind) -> &'static str {
    match kind {
        AccKind::Sum => "0",
        AccKind::Min => "FUSED_I64_MAX",
        AccKind::Max => "FUSED_I64_MIN",
    }
}

/// The bits flipped in a packed key of one key column (see [`generate_fused`]).
pub const FUSED_KEY_FLIP_1: u64 = 1 << 63;
/// The bits flipped in a packed key of two 4-byte key columns.
pub const FUSED_KEY_FLIP_2: u64 = (1 << 63) | (1 << 31);

/// What one accumulator of a fused reduction keeps per group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccKind {
    /// The exact sum (128 bits) of the values.
    Sum,
    Min,
    Max,
}

/// The kernel of a fused reduction over a small set of groups (see [`crate::k_fused`]).
/// Each warp takes `FUSED_UNROLL` rows per lane at a time: it first evaluates every row's
/// filter, packed 64-bit key and values (loads only, so they overlap), then numbers each
/// key in the block's hash table in shared memory (the order in which the block met its
/// keys). A row of one of the block's first `GREG` groups is added into its thread's own
/// accumulators (shared memory, no atomics; sums in 64 bits, values of 2^55 or more go
/// straight to the table); a row of a later group goes straight into the table with
/// shared atomics (128-bit sums). Every 256 rows per thread, and at the end, each warp
/// sums its threads' accumulators (`redux` in 16-bit parts unless every value is small,
/// shuffles for minima and maxima) and one lane adds them into the table; at the end each
/// block adds its table into the table in global memory. Anything the kernel cannot
/// settle exactly (a failing or out-of-range value, a full table, a key equal to the
/// empty marker) sets the fail word, and every warp stops soon after; the host then runs
/// the unfused kernels instead.
///
/// Kernel parameters: one pointer per argument (columns, then tables), the length of
/// each table, `n` (rows), the global table `g` (u64 words: `gcap` keys, `gcap` counts,
/// then per accumulator `gcap` slots: two words (low, high) for a sum, one for a min or
/// max) and the fail word (`unsigned*`).
#[derive(Clone, Debug)]
pub struct GeneratedFused {
    pub source: String,
    pub kernel: String,
}

/// Where the global table of a fused reduction keeps what, in u64 words: `gcap` keys,
/// `gcap` counts, then per accumulator `gcap` slots (two words, low and high, for a sum;
/// one for a min or max), sums first, then minima, then maxima.
pub struct FusedLayout {
    pub gcap: usize,
    /// The first word of the sums, the minima and the maxima.
    pub sum_at: usize,
    pub min_at: usize,
    pub max_at: usize,
    /// The word of slot 0 of each accumulator.
    pub acc_at: Vec<usize>,
    pub words: usize,
}

impl FusedLayout {
    pub fn new(accs: &[(AccKind, &KExpr)], gcap: usize) -> FusedLayout {
        let count = |k: AccKind| accs.iter().filter(|(a, _)| *a == k).count();
        let sum_at = 2 * gcap;
        let min_at = sum_at + 2 * gcap * count(AccKind::Sum);
        let max_at = min_at + gcap * count(AccKind::Min);
        let words = max_at + gcap * count(AccKind::Max);
        let mut next = [sum_at, min_at, max_at];
        let acc_at = accs
            .iter()
            .map(|(k, _)| {
                let (i, width) = match k {
                    AccKind::Sum => (0, 2 * gcap),
                    AccKind::Min => (1, gcap),
                    AccKind::Max => (2, gcap),
                };
                next[i] += width;
                next[i] - width
            })
            .collect();
        FusedLayout {
            gcap,
            sum_at,
            min_at,
            max_at,
            acc_at,
            words,
        }
    }
}

/// Shared-memory slots per block and global slots of the fused reduction's tables.
pub struct FusedShape {
    pub cap: u32,
    pub gcap: u32,
    /// Groups per block whose accumulators each thread keeps in registers.
    pub greg: u32,
    /// Rows per lane whose loads a warp issues together.
    pub unroll: u32,
    /// Blocks per SM the kernel is compiled for (`__launch_bounds__`), and launched with.
    pub min_blocks: u32,
}

/// Generates the fused reduction kernel: `filter` (bool) and the accumulators `accs`
/// (kind and value expression) over arguments of element types `arg_elems`, with
/// `nkeys` leading key columns (at most two of 4 bytes, or one of 8).
pub fn generate_fused(
    filter: Option<&KExpr>,
    accs: &[(AccKind, &KExpr)],
    nkeys: usize,
    n_cols: usize,
    arg_elems: &[Elem],
    shape: &FusedShape,
    ctx: &dyn LaunchCtx,
) -> Result<GeneratedFused, String> {
    // The kernel computes in 64 bits, as fox-cpu's one-pass reduction does: a tree with a
    // 38-digit decimal runs unfused.
    if filter.is_some_and(KExpr::has_wide) || accs.iter().any(|(_, e)| e.has_wide()) {
        return Err("a fused reduction over 38-digit decimals".to_string());
    }
    let mut g = Gen {
        funcs: String::new(),
        next: 0,
        wide: false,
    };
    let check = |e: &KExpr| fox_kernel::check_expr(e, n_cols, arg_elems, &|s: &str| ctx.string_code(s));
    let int_root = |c: &Checked| match &c.root {
        Root::Int(i) => Ok(i.clone()),
        Root::Float(_) => Err(format!(
            "`{}` is float64 where an integer-stored value is expected",
            c.what
        )),
    };
    let filter_f = match filter {
        Some(f) => Some(g.int(&int_root(&check(f)?)?)),
        None => None,
    };
    let mut vals = Vec::with_capacity(accs.len());
    for (_, e) in accs {
        let node = int_root(&check(e)?)?;
        let f = g.int(&node);
        let unchecked = node.unranged();
        let range = match Elem::of(e.ty) {
            Elem::I64 => None,
            _ if !unchecked => None,
            Elem::I32 => Some(("-2147483648LL", "2147483647LL")),
            Elem::U8 => Some(("0LL", "255LL")),
            Elem::U32 => Some(("0LL", "4294967295LL")),
            other => return Err(format!("a fused value of element type {other:?}")),
        };
        vals.push((f, range));
    }
    let key_word = |j: usize| -> Result<String, String> {
        Ok(match arg_elems[j] {
            Elem::U8 | Elem::U32 => format!("(u64)p.a{j}[i]"),
            Elem::I32 => format!("(u64)(unsigned)p.a{j}[i]"),
            Elem::I64 | Elem::U64 => format!("(u64)p.a{j}[i]"),
            Elem::F64 => return Err("a fused reduction keyed by a float".into()),
            Elem::I128 => return Err("a fused reduction keyed by a 38-digit decimal".into()),
        })
    };
    // The packed key, its top bit (and with two keys bit 31) flipped so that the empty
    // marker stands for a rare key (i64::MAX, or two i32::MAX), not -1.
    let pack = match nkeys {
        0 => "0ull".to_string(),
        1 => format!("({}) ^ {FUSED_KEY_FLIP_1:#x}ull", key_word(0)?),
        2 => format!(
            "((({}) << 32) | ({})) ^ {FUSED_KEY_FLIP_2:#x}ull",
            key_word(0)?,
            key_word(1)?
        ),
        _ => return Err(format!("a fused reduction with {nkeys} keys")),
    };
    let count = |k: AccKind| accs.iter().filter(|(a, _)| *a == k).count();
    let (nsum, nmin, nmax) = (count(AccKind::Sum), count(AccKind::Min), count(AccKind::Max));
    let layout = FusedLayout::new(accs, shape.gcap as usize);

    let mut src = String::new();
    src.push_str(&crate::prelude::common_header());
    src.push_str(PRELUDE);
    let (cap, gcap) = (shape.cap, shape.gcap);
    let _ = writeln!(
        src,
        "#define CAP {cap}u\n#define GCAP {gcap}u\n#define GREG {}\n#define FUSED_UNROLL {}\n#define FUSED_BLOCK {FUSED_BLOCK}",
        shape.greg.max(1),
        shape.unroll.max(1)
    );
    src.push_str(FUSED_PRELUDE);
    src.push_str(&arg_struct(arg_elems, n_cols));
    src.push_str(&g.funcs);
    let mut params = arg_params(arg_elems, n_cols);
    params.extend(["u64 n", "u64* g", "unsigned* fail"].map(String::from));
    let _ = writeln!(
        src,
        "extern \"C\" __global__ void __launch_bounds__({FUSED_BLOCK}, {}) KERNEL_NAME({}) {{",
        shape.min_blocks.max(1),
        params.join(", ")
    );
    src.push_str(&arg_init(arg_elems, n_cols));
    let arr = |k: usize| k.max(1);
    let _ = writeln!(
        src,
        "  __shared__ u64 s_keys[CAP];\n  __shared__ unsigned s_dense[CAP];\n  __shared__ unsigned s_slot_of[GREG];\n  __shared__ unsigned s_ngroups;\n  __shared__ u64 s_cnt[CAP];\n  __shared__ u64 s_sum[{}];\n  __shared__ i64 s_min[{}];\n  __shared__ i64 s_max[{}];",
        2 * arr(nsum) * cap as usize,
        arr(nmin) * cap as usize,
        arr(nmax) * cap as usize
    );
    let _ = writeln!(
        src,
        "  if (threadIdx.x == 0) s_ngroups = 0u;\n  for (unsigned s = threadIdx.x; s < CAP; s += blockDim.x) {{\n    s_keys[s] = FUSED_EMPTY;\n    s_dense[s] = FUSED_NONE;\n    s_cnt[s] = 0;\n    for (int j = 0; j < {}; j++) {{ s_sum[2 * (j * CAP + s)] = 0; s_sum[2 * (j * CAP + s) + 1] = 0; }}\n    for (int j = 0; j < {nmin}; j++) s_min[j * CAP + s] = FUSED_I64_MAX;\n    for (int j = 0; j < {nmax}; j++) s_max[j * CAP + s] = FUSED_I64_MIN;\n  }}\n  __syncthreads();",
        nsum
    );
    // Per-thread accumulators of the first GREG groups of the block, in shared memory
    // (each thread its own, so no atomics): C(s) counts, R(s, j) accumulator j.
    let _ = writeln!(
        src,
        "  __shared__ unsigned s_c[GREG * FUSED_BLOCK];\n  __shared__ i64 s_acc[GREG * {} * FUSED_BLOCK];\n#define C(s) s_c[(s) * FUSED_BLOCK + threadIdx.x]\n#define R(s, j) s_acc[((s) * {} + (j)) * FUSED_BLOCK + threadIdx.x]",
        arr(accs.len()),
        arr(accs.len())
    );
    src.push_str("  for (int s = 0; s < GREG; s++) {\n    C(s) = 0u;\n");
    for (j, (kind, _)) in accs.iter().enumerate() {
        let _ = writeln!(src, "    R(s, {j}) = {};", ident(*kind));
    }
    src.push_str("  }\n");
    // The warp-wide flush of the accumulators into the shared table (every lane calls it).
    let mut flush = String::from(
        "#pragma unroll\n    for (int s = 0; s < GREG; s++) {\n      const unsigned tot = __reduce_add_sync(FUSED_FULL, C(s));\n      if (tot != 0u) {\n",
    );
    let mut lane0 = String::new();
    let (mut si, mut mi, mut xi) = (0usize, 0usize, 0usize);
    let mut direct = String::new();
    let mut reg_add = String::new();
    let mut big_add = String::new();
    for (j, (kind, _)) in accs.iter().enumerate() {
        // Adds value `x` into this accumulator's slot `h` of the block's table.
        let into_table = |x: &str| match kind {
            AccKind::Sum => format!("fused_add128(&s_sum[2 * ({si}u * CAP + h)], {x});"),
            AccKind::Min => format!("atomicMin((long long*)&s_min[{mi}u * CAP + h], (long long){x});"),
            AccKind::Max => format!("atomicMax((long long*)&s_max[{xi}u * CAP + h], (long long){x});"),
        };
        let (ty, reduce, update) = match kind {
            AccKind::Sum => ("i128", "fused_warp_sum", format!("if (sm{j}[u]) R(s, {j}) += v{j}[u];")),
            AccKind::Min => (
                "i64",
                "fused_warp_min",
                format!("R(s, {j}) = v{j}[u] < R(s, {j}) ? v{j}[u] : R(s, {j});"),
            ),
            AccKind::Max => (
                "i64",
                "fused_warp_max",
                format!("R(s, {j}) = v{j}[u] > R(s, {j}) ? v{j}[u] : R(s, {j});"),
            ),
        };
        let _ = writeln!(
            flush,
            "        const {ty} t{j} = {reduce}(R(s, {j})); R(s, {j}) = {};",
            ident(*kind)
        );
        let _ = writeln!(lane0, "          {}", into_table(&format!("t{j}")));
        let _ = writeln!(direct, "          {}", into_table(&format!("v{j}[u]")));
        let _ = writeln!(reg_add, "          {update}");
        match kind {
            AccKind::Sum => {
                let _ = writeln!(big_add, "          if (!sm{j}[u]) {}", into_table(&format!("v{j}[u]")));
                si += 1;
            }
            AccKind::Min => mi += 1,
            AccKind::Max => xi += 1,
        }
    }
    let _ = write!(
        flush,
        "        if (lane == 0u) {{\n          const unsigned h = *(volatile unsigned*)&s_slot_of[s];\n          atomicAdd(&s_cnt[h], (u64)tot);\n{lane0}        }}\n        C(s) = 0u;\n      }}\n    }}\n"
    );
    // Each warp takes FUSED_UNROLL rows per lane at a time: first every row's filter,
    // key and values (loads only, so they overlap), then the table updates.
    let _ = writeln!(
        src,
        "  const unsigned lane = threadIdx.x & 31u;\n  const u64 warp = ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;\n  const u64 nwarps = ((u64)gridDim.x * blockDim.x) >> 5;\n  u64 step = 0;\n  for (u64 base = warp * (32 * FUSED_UNROLL); base < n; base += nwarps * (32 * FUSED_UNROLL), step++) {{\n    bool act[FUSED_UNROLL];\n    u64 key[FUSED_UNROLL];\n    unsigned bad = 0u;"
    );
    for (j, (kind, _)) in accs.iter().enumerate() {
        let _ = writeln!(src, "    i64 v{j}[FUSED_UNROLL];");
        if *kind == AccKind::Sum {
            let _ = writeln!(src, "    bool sm{j}[FUSED_UNROLL];");
        }
    }
    src.push_str("#pragma unroll\n    for (int u = 0; u < FUSED_UNROLL; u++) {\n      const u64 i = base + (u64)u * 32 + lane;\n      act[u] = i < n;\n");
    if let Some(f) = &filter_f {
        let _ = writeln!(
            src,
            "      if (act[u]) {{ i64 fv; if ({f}(p, i, fv) != 0u) bad = 1u; else act[u] = fv != 0; }}"
        );
    }
    let _ = writeln!(
        src,
        "      key[u] = 0ull;\n      if (act[u]) {{ key[u] = {pack}; if (key[u] == FUSED_EMPTY) bad = 3u; }}"
    );
    for (j, ((kind, _), (f, range))) in accs.iter().zip(&vals).enumerate() {
        let _ = writeln!(
            src,
            "      v{j}[u] = {};\n      if (act[u]) {{ if ({f}(p, i, v{j}[u]) != 0u) bad = 1u;{} }}",
            ident(*kind),
            match range {
                Some((lo, hi)) => format!(" else if (v{j}[u] < {lo} || v{j}[u] > {hi}) bad = 1u;"),
                None => String::new(),
            }
        );
        if *kind == AccKind::Sum {
            // Below 2^55 in magnitude: 256 of them add up within 64 bits.
            let _ = writeln!(src, "      sm{j}[u] = (u64)(v{j}[u] + (1LL << 55)) < (1ull << 56);");
        }
    }
    src.push_str("    }\n");
    let _ = write!(
        src,
        "    if (__any_sync(FUSED_FULL, bad != 0u)) {{ if (lane == 0u) atomicOr(fail, 1u); return; }}\n    bool full = false;\n#pragma unroll\n    for (int u = 0; u < FUSED_UNROLL; u++) {{\n    if (act[u]) {{\n      unsigned h = 0u;\n      const unsigned d = fused_group(s_keys, s_dense, s_slot_of, &s_ngroups, key[u], h);\n      if (d == FUSED_NONE) {{\n        full = true;\n      }} else {{\n        if (d < GREG) {{\n          const unsigned s = d;\n          C(s)++;\n{reg_add}{big_add}        }} else {{\n          atomicAdd(&s_cnt[h], 1ull);\n{direct}        }}\n      }}\n    }}\n    }}\n    if (__any_sync(FUSED_FULL, full)) {{ if (lane == 0u) atomicOr(fail, 2u); return; }}\n    if ((step & (256u / FUSED_UNROLL - 1u)) == 256u / FUSED_UNROLL - 1u) {{\n    {flush}    }}\n"
    );
    src.push_str(
        "    if ((step & 3u) == 3u) {\n      unsigned f = 0u;\n      if (lane == 0u) f = *(volatile unsigned*)fail;\n      if (__shfl_sync(FUSED_FULL, f, 0) != 0u) return;\n    }\n  }\n",
    );
    let _ = write!(src, "  {{\n    {flush}  }}\n");
    src.push_str("  __syncthreads();\n  if (*(volatile unsigned*)fail != 0u) return;\n");
    // Merge into the global table.
    let _ = writeln!(
        src,
        "  u64* g_keys = g;\n  u64* g_cnt = g + GCAP;\n  u64* g_sum = g + {};\n  i64* g_min = (i64*)(g + {});\n  i64* g_max = (i64*)(g + {});",
        layout.sum_at,
        layout.min_at,
        layout.max_at
    );
    let _ = writeln!(
        src,
        "  for (unsigned s = threadIdx.x; s < CAP; s += blockDim.x) {{\n    const u64 k = s_keys[s];\n    if (k == FUSED_EMPTY) continue;\n    const unsigned gs = fused_slot(g_keys, GCAP, k);\n    if (gs == FUSED_NONE) {{ atomicOr(fail, 2u); continue; }}\n    atomicAdd(&g_cnt[gs], s_cnt[s]);\n    for (int j = 0; j < {nsum}; j++) {{\n      const u64 lo = s_sum[2 * (j * CAP + s)], hi = s_sum[2 * (j * CAP + s) + 1];\n      fused_add128(&g_sum[2 * (j * GCAP + gs)], (i128)(((u128)hi << 64) | (u128)lo));\n    }}\n    for (int j = 0; j < {nmin}; j++) atomicMin((long long*)&g_min[j * GCAP + gs], (long long)s_min[j * CAP + s]);\n    for (int j = 0; j < {nmax}; j++) atomicMax((long long*)&g_max[j * GCAP + gs], (long long)s_max[j * CAP + s]);\n  }}\n}}"
    );
    let kernel = format!("fox_fused_{:016x}", fnv1a(&src));
    let source = src.replace("KERNEL_NAME", &kernel);
    Ok(GeneratedFused { source, kernel })
}

const FUSED_PRELUDE: &str = r#"
#define FUSED_FULL 0xffffffffu
#define FUSED_EMPTY 0xffffffffffffffffull
#define FUSED_NONE 0xffffffffu
#define FUSED_I64_MAX 9223372036854775807LL
#define FUSED_I64_MIN (-9223372036854775807LL - 1)

// The slot of key k in a linear-probing table of `cap` (a power of two) slots, inserting
// it when absent; FUSED_NONE when the table is full.
static __device__ __forceinline__ unsigned fused_slot(u64* keys, unsigned cap, u64 k) {
  unsigned h = (unsigned)((k * 0x9E3779B97F4A7C15ull) >> 40) & (cap - 1u);
  for (unsigned probe = 0; probe < cap; probe++) {
    const u64 cur = *(volatile u64*)&keys[h];
    if (cur == k) return h;
    if (cur == FUSED_EMPTY) {
      const u64 prev = atomicCAS((unsigned long long*)&keys[h], FUSED_EMPTY, k);
      if (prev == FUSED_EMPTY || prev == k) return h;
    }
    h = (h + 1u) & (cap - 1u);
  }
  return FUSED_NONE;
}

// The block's dense number of key k (the order in which the block met its keys) and in
// `slot` its slot in the block's table, inserting it when absent; FUSED_NONE when the
// table is full. The first GREG numbers also record their slot in `slot_of`.
static __device__ __forceinline__ unsigned fused_group(u64* keys, unsigned* dense, unsigned* slot_of,
                                                       unsigned* ngroups, u64 k, unsigned& slot) {
  unsigned h = (unsigned)((k * 0x9E3779B97F4A7C15ull) >> 40) & (CAP - 1u);
  for (unsigned probe = 0; probe < CAP; probe++) {
    u64 cur = *(volatile u64*)&keys[h];
    if (cur == FUSED_EMPTY) {
      cur = atomicCAS((unsigned long long*)&keys[h], FUSED_EMPTY, k);
      if (cur == FUSED_EMPTY) {
        const unsigned d = atomicAdd(ngroups, 1u);
        if (d < GREG) *(volatile unsigned*)&slot_of[d] = h;
        __threadfence_block();
        *(volatile unsigned*)&dense[h] = d;
        slot = h;
        return d;
      }
    }
    if (cur == k) {
      unsigned d;
      while ((d = *(volatile unsigned*)&dense[h]) == FUSED_NONE) {}
      slot = h;
      return d;
    }
    h = (h + 1u) & (CAP - 1u);
  }
  return FUSED_NONE;
}

// Adds x to the 128-bit value at p[0] (low word), p[1] (high word).
static __device__ __forceinline__ void fused_add128(u64* p, i128 x) {
  if (x == 0) return;
  const u64 lo = (u64)x;
  const u64 hi = (u64)((u128)x >> 64);
  const u64 old = atomicAdd((unsigned long long*)&p[0], lo);
  const u64 carry = (old + lo < old) ? 1ull : 0ull;
  if (hi + carry != 0ull) atomicAdd((unsigned long long*)&p[1], hi + carry);
}

// The exact sum of v over the warp (every lane calls it).
static __device__ __forceinline__ i128 fused_warp_sum(i64 v) {
  if (__all_sync(FUSED_FULL, v >= -(1LL << 26) && v < (1LL << 26))) return (i128)__reduce_add_sync(FUSED_FULL, (int)v);
  const u64 u = (u64)v;
  const unsigned s0 = __reduce_add_sync(FUSED_FULL, (unsigned)(u & 0xffffull));
  const unsigned s1 = __reduce_add_sync(FUSED_FULL, (unsigned)((u >> 16) & 0xffffull));
  const unsigned s2 = __reduce_add_sync(FUSED_FULL, (unsigned)((u >> 32) & 0xffffull));
  const int s3 = __reduce_add_sync(FUSED_FULL, (int)(v >> 48));
  return (i128)s3 * ((i128)1 << 48) + (i128)s2 * ((i128)1 << 32) + (i128)s1 * ((i128)1 << 16) + (i128)s0;
}

static __device__ __forceinline__ i64 fused_warp_min(i64 v) {
  for (int o = 16; o > 0; o >>= 1) { const i64 w = __shfl_xor_sync(FUSED_FULL, v, o); v = w < v ? w : v; }
  return v;
}

static __device__ __forceinline__ i64 fused_warp_max(i64 v) {
  for (int o = 16; o > 0; o >>= 1) { const i64 w = __shfl_xor_sync(FUSED_FULL, v, o); v = w > v ? w : v; }
  return v;
}

"#;
