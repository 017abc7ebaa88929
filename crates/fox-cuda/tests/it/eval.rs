//! `Eval` on the GPU against fox-cpu: random expressions over random data (numbers,
//! decimals of several scales, dates, string codes and dictionary tables), targeted edge
//! cases (rounding, overflow, division by zero, dates, narrowing), the same error messages
//! with the same first failing row, and one 10^7-row case. Without a GPU these are
//! reported as ignored; the NVRTC compile check of generated kernels needs only NVRTC, the
//! host check of generated kernels only g++, and the plan-error check runs everywhere.

use fox_cuda::codegen::generate_source;
use fox_cuda::compile;
use fox_cuda::testing::{describe, first_mismatch, gpu, Rng, Strings, LARGE};
use fox_cuda::CudaBackend;
use fox_kernel::show_kexpr;
use fox_kernel::{Elem, KExpr, KExprKind, Kernel, ScalarFn};
use fox_runtime::{Backend, DevBuf, HostCol};
use fox_sema::core::{ArithOp, CmpOp, Type, Value};
use std::fmt::Write as _;
use std::io::Write;
use std::time::Instant;

// ---- expression builders ---------------------------------------------------------------

fn col(i: usize, ty: Type) -> KExpr {
    KExpr {
        kind: KExprKind::Col(i),
        ty,
    }
}

fn lit(v: Value, ty: Type) -> KExpr {
    KExpr {
        kind: KExprKind::Const(v),
        ty,
    }
}

fn dec(unscaled: i128, scale: u8) -> Value {
    Value::Decimal { unscaled, scale }
}

fn arith(op: ArithOp, a: KExpr, b: KExpr, ty: Type) -> KExpr {
    KExpr {
        kind: KExprKind::Arith(op, Box::new(a), Box::new(b)),
        ty,
    }
}

fn cmp(op: CmpOp, a: KExpr, b: KExpr) -> KExpr {
    KExpr {
        kind: KExprKind::Cmp(op, Box::new(a), Box::new(b)),
        ty: Type::Bool,
    }
}

fn cast(x: KExpr, ty: Type) -> KExpr {
    KExpr {
        kind: KExprKind::Cast(Box::new(x)),
        ty,
    }
}

fn call(f: ScalarFn, xs: Vec<KExpr>, ty: Type) -> KExpr {
    KExpr {
        kind: KExprKind::Call(f, xs),
        ty,
    }
}

fn round(x: KExpr, digits: i32, ty: Type) -> KExpr {
    call(ScalarFn::Round, vec![x, lit(Value::Int32(digits), Type::Int32)], ty)
}

fn table(t: usize, x: KExpr, ty: Type) -> KExpr {
    KExpr {
        kind: KExprKind::Table(t, Box::new(x)),
        ty,
    }
}

fn neg(x: KExpr) -> KExpr {
    KExpr {
        ty: x.ty,
        kind: KExprKind::Neg(Box::new(x)),
    }
}

fn and(xs: Vec<KExpr>) -> KExpr {
    KExpr {
        kind: KExprKind::And(xs),
        ty: Type::Bool,
    }
}

fn or(xs: Vec<KExpr>) -> KExpr {
    KExpr {
        kind: KExprKind::Or(xs),
        ty: Type::Bool,
    }
}

fn not(x: KExpr) -> KExpr {
    KExpr {
        kind: KExprKind::Not(Box::new(x)),
        ty: Type::Bool,
    }
}

fn in_list(x: KExpr, vs: Vec<Value>) -> KExpr {
    KExpr {
        kind: KExprKind::In(Box::new(x), vs),
        ty: Type::Bool,
    }
}

fn string(s: &str) -> KExpr {
    lit(Value::String(s.to_string()), Type::String)
}

// ---- running on both backends ------------------------------------------------------------

fn cell(c: &HostCol, i: usize) -> String {
    match c {
        HostCol::U8(v) => v[i].to_string(),
        HostCol::I32(v) => v[i].to_string(),
        HostCol::U32(v) => v[i].to_string(),
        HostCol::I64(v) => v[i].to_string(),
        HostCol::U64(v) => v[i].to_string(),
        HostCol::F64(v) => format!("{:?} (bits {:#018x})", v[i], v[i].to_bits()),
        HostCol::I128(v) => v[i].to_string(),
    }
}

/// The shape of a launch's arguments that the runtime guarantees both backends
/// (`fox_kernel::check_shape`). The expression itself is left to the backends' checked
/// form, so that expressions the lowering never makes still compare the two.
fn contract(k: &Kernel, args: &[HostCol]) -> Result<(), String> {
    let shapes: Vec<(Elem, usize)> = args.iter().map(|a| (a.elem(), a.len())).collect();
    fox_kernel::check_shape(k, &shapes)
        .map(|_| ())
        .map_err(|m| format!("kernel {}: {m}", k.name()))
}

fn cpu_eval(e: &KExpr, n_cols: usize, args: &[HostCol], ctx: &Strings) -> Result<HostCol, String> {
    let k = Kernel::Eval {
        expr: e.clone(),
        n_cols,
    };
    contract(&k, args)?;
    cpu_backend_eval(e, n_cols, args, ctx)
}

/// `Eval` on the CPU backend alone, arguments not checked against the contract (they fit
/// it, the expression may not).
fn cpu_backend_eval(e: &KExpr, n_cols: usize, args: &[HostCol], ctx: &Strings) -> Result<HostCol, String> {
    let refs: Vec<&HostCol> = args.iter().collect();
    let k = Kernel::Eval {
        expr: e.clone(),
        n_cols,
    };
    fox_cpu::run_kernel(&k, &refs, ctx)
        .map(|mut v| v.remove(0))
        .map_err(|e| e.0)
}

fn gpu_eval(
    gpu: &mut CudaBackend,
    e: &KExpr,
    n_cols: usize,
    args: &[HostCol],
    ctx: &Strings,
) -> Result<HostCol, String> {
    let k = Kernel::Eval {
        expr: e.clone(),
        n_cols,
    };
    contract(&k, args)?;
    let before = gpu.mem().in_use;
    let mut bufs: Vec<DevBuf> = Vec::new();
    for a in args {
        bufs.push(gpu.upload(a.clone()).map_err(|e| format!("upload: {e}"))?);
    }
    let refs: Vec<&DevBuf> = bufs.iter().collect();
    let res = match gpu.launch(&k, &refs, ctx) {
        Ok(mut outs) => {
            assert_eq!(outs.len(), 1, "Eval gives one output");
            let o = outs.remove(0);
            let host = gpu.download(&o).map_err(|e| format!("download: {e}"));
            gpu.free(o);
            host
        }
        Err(e) => Err(e.0),
    };
    for b in bufs {
        gpu.free(b);
    }
    let after = gpu.mem().in_use;
    assert_eq!(
        after, before,
        "Eval leaks device memory: {after} bytes in use, {before} before"
    );
    res
}

/// Runs `e` on both backends and panics, naming the expression, the case, the number of
/// rows, the first mismatching row and that row's inputs, unless both give the same
/// column or fail with the same message. Returns whether the expression failed.
fn check(gpu: &mut CudaBackend, e: &KExpr, n_cols: usize, args: &[HostCol], ctx: &Strings, case: &str) -> bool {
    let want = cpu_eval(e, n_cols, args, ctx);
    let got = gpu_eval(gpu, e, n_cols, args, ctx);
    let n = args.first().map_or(0, |c| c.len());
    let shapes: Vec<String> = args.iter().map(describe).collect();
    let head = format!(
        "Eval `{}` case {case}, {n} rows, args [{}]",
        show_kexpr(e),
        shapes.join(", ")
    );
    match (want, got) {
        (Ok(w), Ok(g)) => {
            if w.elem() != g.elem() || w.len() != g.len() {
                panic!(
                    "{head}: output is {} on the cpu, {} on the gpu",
                    describe(&w),
                    describe(&g)
                );
            }
            if let Some((i, count)) = first_mismatch(&w, &g) {
                let inputs: Vec<String> = args[..n_cols].iter().map(|c| cell(c, i)).collect();
                panic!(
                    "{head}: {count} rows differ, first row {i}: cpu {}, gpu {} (inputs of row {i}: [{}])",
                    cell(&w, i),
                    cell(&g, i),
                    inputs.join(", ")
                );
            }
            false
        }
        (Err(w), Err(g)) => {
            assert_eq!(g, w, "{head}: the gpu's error (left) differs from the cpu's (right)");
            true
        }
        (Ok(_), Err(g)) => panic!("{head}: the cpu succeeds, the gpu fails: {g}"),
        (Err(w), Ok(_)) => panic!("{head}: the cpu fails ({w}), the gpu succeeds"),
    }
}

// ---- random expressions --------------------------------------------------------------------

/// Column types of the random rows.
const COLS: [Type; 9] = [
    Type::Int64,
    Type::Int64,
    Type::Decimal(2),
    Type::Decimal(4),
    Type::Float64,
    Type::Int32,
    Type::Date,
    Type::String,
    Type::Bool,
];
const C_DATE: usize = 6;
const C_STR: usize = 7;
const C_BOOL: usize = 8;

/// The 38-digit decimal columns of a generator with `wide` set, after `COLS`.
const WIDE_COLS: [Type; 2] = [Type::WideDecimal(2), Type::WideDecimal(4)];
const C_WIDE: usize = COLS.len();

/// The largest magnitude of a 38-digit decimal.
const MAX_WIDE: i128 = fox_sema::core::MAX_WIDE_DECIMAL;

/// Strings of the dictionary: `s00`..`s39`, with codes in an order that is not string
/// order (as after appends), so that rank lookups matter.
const DICT: usize = 40;

fn dict_code(k: usize) -> u32 {
    ((k * 17) % DICT) as u32
}

fn dict() -> Strings {
    Strings((0..DICT).map(|k| (format!("s{k:02}"), dict_code(k))).collect())
}

/// The dictionary tables: t0 rank (U32), t1 a like-table (U8), t2 strlen (I32).
fn tables() -> Vec<HostCol> {
    let mut rank = vec![0u32; DICT];
    let mut like = vec![0u8; DICT];
    let mut len = vec![0i32; DICT];
    for k in 0..DICT {
        let c = dict_code(k) as usize;
        rank[c] = k as u32;
        like[c] = u8::from(k % 3 == 0);
        len[c] = 3 + (k % 5) as i32;
    }
    vec![HostCol::U32(rank), HostCol::U8(like), HostCol::I32(len)]
}

struct Gen {
    rng: Rng,
    /// Whether expressions and rows include 38-digit decimals (`WIDE_COLS`).
    wide: bool,
}

fn scale(t: Type) -> u8 {
    match t {
        Type::Decimal(s) | Type::WideDecimal(s) => s,
        _ => 0,
    }
}

fn is_wide(t: Type) -> bool {
    matches!(t, Type::WideDecimal(_))
}

fn integral(t: Type) -> bool {
    matches!(t, Type::Int32 | Type::Int64)
}

impl Gen {
    fn new(seed: u64) -> Gen {
        Gen {
            rng: Rng::new(seed),
            wide: false,
        }
    }

    fn new_wide(seed: u64) -> Gen {
        Gen {
            rng: Rng::new(seed),
            wide: true,
        }
    }

    /// The number of column arguments (tables follow).
    fn n_cols(&self) -> usize {
        if self.wide {
            COLS.len() + WIDE_COLS.len()
        } else {
            COLS.len()
        }
    }

    fn pick(&mut self, n: usize) -> usize {
        self.rng.below(n as u64) as usize
    }

    /// A 38-digit decimal leaf: a column, or a constant of up to 38 digits.
    fn wide_leaf(&mut self) -> KExpr {
        match self.pick(5) {
            0 => {
                let s = [0u8, 2, 4, 6][self.pick(4)];
                let digits = [3u32, 12, 20, 30, 37][self.pick(5)];
                let m = 10i128.pow(digits);
                let v = (i128::from(self.rng.next_u64()) << 40 | i128::from(self.rng.next_u64())) % m;
                let v = if self.pick(2) == 0 { -v } else { v };
                lit(dec(v, s), Type::WideDecimal(s))
            }
            k => {
                let i = k % 2;
                col(C_WIDE + i, WIDE_COLS[i])
            }
        }
    }

    fn int_lit(&mut self) -> KExpr {
        lit(Value::Int64(self.rng.below(7) as i64 - 3), Type::Int64)
    }

    /// A string-typed expression: the column or a constant.
    fn str_expr(&mut self) -> KExpr {
        if self.pick(3) == 0 {
            string(&format!("s{:02}", self.pick(DICT)))
        } else {
            col(C_STR, Type::String)
        }
    }

    /// A date-typed expression.
    fn date(&mut self, depth: u32) -> KExpr {
        if depth == 0 || self.pick(2) == 0 {
            return if self.pick(4) == 0 {
                lit(Value::Date(self.rng.below(40_000) as i32 - 20_000), Type::Date)
            } else {
                col(C_DATE, Type::Date)
            };
        }
        let d = self.date(depth - 1);
        let k = if self.pick(2) == 0 {
            lit(Value::Int64(self.rng.below(2000) as i64 - 1000), Type::Int64)
        } else {
            col(5, Type::Int32)
        };
        match self.pick(3) {
            0 => arith(ArithOp::Add, d, k, Type::Date),
            1 => arith(ArithOp::Add, k, d, Type::Date),
            _ => arith(ArithOp::Sub, d, k, Type::Date),
        }
    }

    /// A number-typed expression (int32, int64, a decimal, or float64).
    fn num(&mut self, depth: u32) -> KExpr {
        if self.wide && (depth == 0 || self.pick(4) == 0) && self.pick(3) == 0 {
            return self.wide_leaf();
        }
        if depth == 0 || self.pick(4) == 0 {
            return match self.pick(12) {
                0 => self.int_lit(),
                1 => {
                    let s = 1 + self.pick(3) as u8;
                    lit(dec(self.rng.below(2001) as i128 - 1000, s), Type::Decimal(s))
                }
                2 => {
                    let f = [ScalarFn::Year, ScalarFn::Month, ScalarFn::Day][self.pick(3)];
                    let d = self.date(1);
                    call(f, vec![d], Type::Int32)
                }
                3 => {
                    let (a, b) = (self.date(1), self.date(1));
                    arith(ArithOp::Sub, a, b, Type::Int64)
                }
                4 => {
                    let s = self.str_expr();
                    if self.pick(2) == 0 {
                        table(0, s, Type::Int64)
                    } else {
                        table(2, s, Type::Int32)
                    }
                }
                5 => lit(Value::Float64([0.5, -2.0, 1e-3, 3.0][self.pick(4)]), Type::Float64),
                _ => {
                    let i = self.pick(6);
                    col(i, COLS[i])
                }
            };
        }
        let a = self.num(depth - 1);
        let b = self.num(depth - 1);
        match self.pick(10) {
            0 => neg(a),
            1 => {
                let ty = a.ty;
                call(ScalarFn::Abs, vec![a], ty)
            }
            2 => {
                let d = self.pick(4) as i32;
                let ty = match a.ty {
                    Type::Decimal(s) => Type::Decimal(s.min(d as u8)),
                    Type::WideDecimal(s) => Type::WideDecimal(s.min(d as u8)),
                    t => t,
                };
                round(a, d, ty)
            }
            3 if self.wide && self.pick(2) == 0 => {
                // To or from 38 digits.
                match a.ty {
                    Type::WideDecimal(_) => match self.pick(4) {
                        0 => cast(a, Type::Int64),
                        1 => cast(a, Type::Float64),
                        k => cast(a, Type::Decimal([0u8, 2, 4, 8][self.pick(4)] + k as u8 - 2)),
                    },
                    Type::Float64 => cast(a, Type::Int64),
                    t => {
                        let s = scale(t) + self.pick(4) as u8;
                        cast(a, Type::WideDecimal(s))
                    }
                }
            }
            3 => {
                // to_int, to_float, or a rescale.
                match a.ty {
                    Type::Float64 => cast(a, Type::Int64),
                    Type::Decimal(_) if self.pick(2) == 0 => {
                        let s = self.pick(5) as u8;
                        cast(a, Type::Decimal(s))
                    }
                    Type::WideDecimal(_) => {
                        let s = self.pick(7) as u8;
                        cast(a, Type::WideDecimal(s))
                    }
                    Type::Int32 => cast(a, Type::Int64),
                    Type::Int64 if self.pick(3) == 0 => cast(a, Type::Int32),
                    _ => cast(a, Type::Float64),
                }
            }
            _ => {
                let op = [ArithOp::Add, ArithOp::Sub, ArithOp::Mul, ArithOp::Div][self.pick(4)];
                self.arith(op, a, b)
            }
        }
    }

    /// Typed like sema types arithmetic: floats win, integers stay integers, decimals
    /// align scales for + and -, add them for *, and give scale 6 for /.
    fn arith(&mut self, op: ArithOp, a: KExpr, b: KExpr) -> KExpr {
        let (ta, tb) = (a.ty, b.ty);
        if ta == Type::Float64 || tb == Type::Float64 {
            let up = |x: KExpr| {
                if x.ty == Type::Float64 {
                    x
                } else {
                    cast(x, Type::Float64)
                }
            };
            return arith(op, up(a), up(b), Type::Float64);
        }
        if integral(ta) && integral(tb) {
            let ty = if ta == Type::Int32 && tb == Type::Int32 {
                Type::Int32
            } else {
                Type::Int64
            };
            return arith(op, a, b, ty);
        }
        let (sa, sb) = (scale(ta), scale(tb));
        // A 38-digit operand makes the operation 38 digits wide (the operands are cast).
        if is_wide(ta) || is_wide(tb) {
            let to = |x: KExpr, s: u8| {
                if x.ty == Type::WideDecimal(s) {
                    x
                } else {
                    cast(x, Type::WideDecimal(s))
                }
            };
            return match op {
                ArithOp::Add | ArithOp::Sub => {
                    let s = sa.max(sb);
                    arith(op, to(a, s), to(b, s), Type::WideDecimal(s))
                }
                ArithOp::Mul => {
                    let r = [sa + sb, (sa + sb).saturating_sub(2), sa.max(sb)][self.pick(3)];
                    arith(op, to(a, sa), to(b, sb), Type::WideDecimal(r))
                }
                ArithOp::Div => {
                    let r = [6, 2, 0, 12][self.pick(4)];
                    arith(op, to(a, sa), to(b, sb), Type::WideDecimal(r))
                }
                // Soufflé's operators take int64 only: the generator never picks them here.
                _ => {
                    let s = sa.max(sb);
                    arith(ArithOp::Add, to(a, s), to(b, s), Type::WideDecimal(s))
                }
            };
        }
        let to = |x: KExpr, s: u8| {
            if x.ty == Type::Decimal(s) {
                x
            } else {
                cast(x, Type::Decimal(s))
            }
        };
        match op {
            ArithOp::Add | ArithOp::Sub => {
                let s = sa.max(sb);
                arith(op, to(a, s), to(b, s), Type::Decimal(s))
            }
            ArithOp::Mul if sa + sb <= 12 => arith(op, to(a, sa), to(b, sb), Type::Decimal(sa + sb)),
            ArithOp::Mul => arith(
                ArithOp::Add,
                to(a, sa.max(sb)),
                to(b, sa.max(sb)),
                Type::Decimal(sa.max(sb)),
            ),
            ArithOp::Div => {
                let r = [6, 2, 0, 9][self.pick(4)];
                arith(op, to(a, sa), to(b, sb), Type::Decimal(r))
            }
            // Soufflé's operators take int64 only: the generator never picks them here.
            _ => {
                let s = sa.max(sb);
                arith(ArithOp::Add, to(a, s), to(b, s), Type::Decimal(s))
            }
        }
    }

    fn num_cmp(&mut self) -> KExpr {
        let a = self.num(2);
        let b = self.num(2);
        let op = [CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge][self.pick(6)];
        let common = if a.ty == Type::Float64 || b.ty == Type::Float64 {
            Type::Float64
        } else if integral(a.ty) && integral(b.ty) {
            Type::Int64
        } else if is_wide(a.ty) || is_wide(b.ty) {
            Type::WideDecimal(scale(a.ty).max(scale(b.ty)))
        } else {
            Type::Decimal(scale(a.ty).max(scale(b.ty)))
        };
        let up = |x: KExpr| {
            if x.ty == common || (integral(x.ty) && integral(common)) {
                x
            } else {
                cast(x, common)
            }
        };
        cmp(op, up(a), up(b))
    }

    fn bool_leaf(&mut self) -> KExpr {
        let op = [CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge][self.pick(6)];
        if self.wide && self.pick(4) == 0 {
            // A 38-digit column in a list of constants, some beyond 64 bits (short lists
            // compare in turn, long ones search a sorted table).
            let k = [3, 12][self.pick(2)];
            let big = self.pick(2) == 0;
            let vs = (0..k)
                .map(|_| {
                    let v = self.rng.below(41) as i128 - 20;
                    dec(if big { v * 10i128.pow(25) + v } else { v }, 2)
                })
                .collect();
            return in_list(col(C_WIDE, WIDE_COLS[0]), vs);
        }
        match self.pick(12) {
            0..=3 => self.num_cmp(),
            4 => {
                let (a, b) = (self.date(2), self.date(2));
                cmp(op, a, b)
            }
            5 => {
                let (a, b) = (self.str_expr(), self.str_expr());
                cmp([CmpOp::Eq, CmpOp::Ne][self.pick(2)], a, b)
            }
            6 => {
                let (a, b) = (self.str_expr(), self.str_expr());
                cmp(op, table(0, a, Type::Int64), table(0, b, Type::Int64))
            }
            7 => {
                let s = self.str_expr();
                table(1, s, Type::Bool)
            }
            8 => col(C_BOOL, Type::Bool),
            9 => {
                let k = if self.pick(2) == 0 { 3 } else { 12 };
                let vs = (0..k).map(|_| Value::Int32(self.rng.below(41) as i32 - 20)).collect();
                in_list(col(5, Type::Int32), vs)
            }
            10 => {
                let k = 1 + self.pick(12);
                let vs = (0..k)
                    .map(|_| Value::String(format!("s{:02}", self.pick(DICT))))
                    .collect();
                in_list(col(C_STR, Type::String), vs)
            }
            _ => match self.pick(3) {
                0 => in_list(
                    col(4, Type::Float64),
                    vec![Value::Float64(-1.5), Value::Float64(0.0), Value::Float64(7.0)],
                ),
                1 => in_list(
                    col(2, Type::Decimal(2)),
                    (0..10).map(|k| dec(k * 50 - 200, 2)).collect(),
                ),
                _ => {
                    let d = self.date(1);
                    in_list(d, (0..4).map(|k| Value::Date(k * 3000 - 6000)).collect())
                }
            },
        }
    }

    fn boolean(&mut self, depth: u32) -> KExpr {
        if depth == 0 || self.pick(3) == 0 {
            return self.bool_leaf();
        }
        let n = 1 + self.pick(3);
        let xs: Vec<KExpr> = (0..n).map(|_| self.boolean(depth - 1)).collect();
        match self.pick(3) {
            0 => and(xs),
            1 => or(xs),
            _ => not(xs.into_iter().next().unwrap()),
        }
    }

    /// Random argument columns (`COLS`) of `n` rows, then the dictionary tables.
    fn args(&mut self, n: usize) -> Vec<HostCol> {
        let mut c: Vec<Vec<i64>> = vec![Vec::with_capacity(n); COLS.len()];
        let mut f = Vec::with_capacity(n);
        for _ in 0..n {
            let big = self.pick(50) == 0;
            let int = |g: &mut Gen| {
                if big {
                    (g.rng.next_u64() as i64) >> g.pick(3)
                } else {
                    g.rng.below(41) as i64 - 20
                }
            };
            let (a, b) = (int(self), int(self));
            c[0].push(a);
            c[1].push(b);
            c[2].push(self.rng.below(200_001) as i64 - 100_000);
            c[3].push(if big {
                self.rng.next_u64() as i64
            } else {
                self.rng.below(2_000_001) as i64 - 1_000_000
            });
            f.push(if self.pick(200) == 0 {
                [f64::NAN, 1e300, -1e300, f64::INFINITY][self.pick(4)]
            } else {
                [0.0, -1.5, 2.25, 1e-3, 7.0, -0.0, 0.1, 1e15][self.pick(8)]
            });
            c[5].push(if big {
                i64::from(self.rng.next_u64() as i32)
            } else {
                self.rng.below(41) as i64 - 20
            });
            c[6].push(if big {
                i64::from(self.rng.next_u64() as i32)
            } else {
                // 1800-01-01 .. 2200-01-01 and around.
                self.rng.below(146_100) as i64 - 62_000
            });
            c[7].push(if self.pick(400) == 0 {
                (DICT + 3) as i64
            } else {
                i64::from(dict_code(self.pick(DICT)))
            });
            c[8].push(self.pick(2) as i64);
        }
        let mut out: Vec<HostCol> = COLS
            .iter()
            .enumerate()
            .map(|(i, t)| match Elem::of(*t) {
                Elem::F64 => HostCol::F64(f.clone()),
                Elem::I64 => HostCol::I64(c[i].clone()),
                Elem::I32 => HostCol::I32(c[i].iter().map(|&x| x as i32).collect()),
                Elem::U32 => HostCol::U32(c[i].iter().map(|&x| x as u32).collect()),
                Elem::U8 => HostCol::U8(c[i].iter().map(|&x| x as u8).collect()),
                Elem::U64 => HostCol::U64(c[i].iter().map(|&x| x as u64).collect()),
                Elem::I128 => HostCol::I128(c[i].iter().map(|&x| i128::from(x)).collect()),
            })
            .collect();
        if self.wide {
            for _ in &WIDE_COLS {
                let v = (0..n).map(|_| self.wide_value()).collect();
                out.push(HostCol::I128(v));
            }
        }
        out.extend(tables());
        out
    }

    /// A value of a 38-digit decimal column: mostly small, some of up to 38 digits (near
    /// ±(10^38 - 1) too), some near the bounds of i64.
    fn wide_value(&mut self) -> i128 {
        let sign = |g: &mut Gen, x: i128| if g.pick(2) == 0 { -x } else { x };
        match self.pick(20) {
            0 => {
                let x = MAX_WIDE - self.rng.below(3) as i128;
                sign(self, x)
            }
            1 => {
                let x = i128::from(i64::MAX) + self.rng.below(5) as i128 - 2;
                sign(self, x)
            }
            2..=4 => {
                let digits = [19u32, 25, 30, 36][self.pick(4)];
                let x = (i128::from(self.rng.next_u64()) << 64 | i128::from(self.rng.next_u64()))
                    .rem_euclid(10i128.pow(digits));
                sign(self, x)
            }
            _ => self.rng.below(2_000_001) as i128 - 1_000_000,
        }
    }

    /// A random expression of any result type.
    fn any(&mut self, depth: u32) -> KExpr {
        match self.pick(10) {
            0..=4 => self.num(depth),
            5..=7 => self.boolean(depth),
            8 => self.date(depth),
            _ => self.str_expr(),
        }
    }
}

/// Sizes of the random cases, in turn.
const RANDOM_SIZES: [usize; 5] = [1, 7, 1025, 4097, 0];

fn random_cases(test: &str, seed: u64, count: usize, boolean: bool) {
    random_cases_of(test, Gen::new(seed), seed, count, boolean);
}

fn random_cases_of(test: &str, mut g: Gen, seed: u64, count: usize, boolean: bool) {
    let mut gpu = gpu(test);
    let ctx = dict();
    let (mut failed, mut total) = (0, 0);
    let t0 = Instant::now();
    for case in 0..count {
        let e = if boolean { g.boolean(3) } else { g.any(3) };
        let n = if case % 50 == 49 {
            20_011
        } else {
            RANDOM_SIZES[case % RANDOM_SIZES.len()]
        };
        let args = g.args(n);
        if check(
            &mut gpu,
            &e,
            g.n_cols(),
            &args,
            &ctx,
            &format!("{test} #{case} (seed {seed})"),
        ) {
            failed += 1;
        }
        total += 1;
    }
    let _ = writeln!(
        std::io::stderr(),
        "{test}: {total} expressions, {failed} failed on both backends alike, {:.1} s, compile {:?}",
        t0.elapsed().as_secs_f64(),
        gpu.compile_stats()
    );
    // The generator must exercise both outcomes.
    assert!(failed > 0 && failed < total / 2, "{failed} of {total} cases failed");
}

fn random_expressions_match_cpu() {
    random_cases("random_expressions_match_cpu", 41, 600, false);
}

fn random_boolean_expressions_match_cpu() {
    random_cases("random_boolean_expressions_match_cpu", 42, 400, true);
}

fn random_wide_expressions_match_cpu() {
    let test = "random_wide_expressions_match_cpu";
    random_cases_of(test, Gen::new_wide(43), 43, 500, false);
}

fn random_wide_boolean_expressions_match_cpu() {
    let test = "random_wide_boolean_expressions_match_cpu";
    random_cases_of(test, Gen::new_wide(44), 44, 300, true);
}

fn wide_decimals_match_cpu() {
    let mut gpu = gpu("wide_decimals_match_cpu");
    let (mut failed, mut total) = (0, 0);
    for (k, (e, cols)) in wide_cases().iter().enumerate() {
        if both(&mut gpu, e, cols, &format!("wide case {k}")).is_err() {
            failed += 1;
        }
        total += 1;
    }
    assert!(failed > 0 && failed < total, "{failed} of {total} cases failed");
    // 10^7 rows of 38-digit sums and products, with an overflow near the end.
    let n = LARGE;
    let mut rng = Rng::new(8);
    let mut a: Vec<i128> = (0..n)
        .map(|_| (i128::from(rng.next_u64()) << 40) - (1i128 << 103) + rng.below(1000) as i128)
        .collect();
    let mut b: Vec<i128> = (0..n).map(|_| rng.below(2_000_001) as i128 - 1_000_000).collect();
    let w2 = Type::WideDecimal(2);
    let e = arith(
        ArithOp::Add,
        arith(ArithOp::Mul, col(0, w2), col(1, w2), Type::WideDecimal(2)),
        col(0, w2),
        w2,
    );
    same(&mut gpu, &e, &[w(a.clone()), w(b.clone())], "10^7 rows of 38 digits");
    a[n - 5] = MAX_WIDE;
    b[n - 5] = 1_000_000;
    let err = both(&mut gpu, &e, &[w(a), w(b)], "10^7 rows, an overflow near the end").unwrap_err();
    assert!(
        err.contains("overflow") && err.contains(&format!("(row {})", n - 5)),
        "{err}"
    );
}

// ---- targeted cases ------------------------------------------------------------------------

fn d2(v: Vec<i64>) -> HostCol {
    HostCol::I64(v)
}

/// Checks `e` on `cols` (no tables).
fn same(gpu: &mut CudaBackend, e: &KExpr, cols: &[HostCol], case: &str) {
    check(gpu, e, cols.len(), cols, &Strings::default(), case);
}

/// Checks `e` on `cols` (no tables) and returns the CPU's outcome for extra assertions.
fn both(gpu: &mut CudaBackend, e: &KExpr, cols: &[HostCol], case: &str) -> Result<HostCol, String> {
    check(gpu, e, cols.len(), cols, &Strings::default(), case);
    cpu_eval(e, cols.len(), cols, &Strings::default())
}

fn decimal_rounding_and_scales() {
    let mut gpu = gpu("decimal_rounding_and_scales");
    let g = &mut gpu;
    let x = d2(vec![25, -25, 24, -24, 226, -226, 0, 15, -15, 5, -5]);
    let e = cast(col(0, Type::Decimal(2)), Type::Decimal(1));
    assert_eq!(
        both(g, &e, std::slice::from_ref(&x), "rescale down").unwrap(),
        d2(vec![3, -3, 2, -2, 23, -23, 0, 2, -2, 1, -1])
    );
    for (d, ty) in [
        (0, Type::Decimal(0)),
        (1, Type::Decimal(1)),
        (5, Type::Decimal(2)),
        (1, Type::Decimal(4)),
    ] {
        let e = round(col(0, Type::Decimal(2)), d, ty);
        same(g, &e, std::slice::from_ref(&x), &format!("round {d} to {ty}"));
    }
    let e = cast(col(0, Type::Decimal(2)), Type::Int64);
    same(
        g,
        &e,
        &[d2(vec![-299, 299, 5, -5, i64::MIN, i64::MAX])],
        "to_int truncates",
    );
    let e = cast(col(0, Type::Decimal(2)), Type::Float64);
    same(g, &e, &[d2(vec![125, -5, i64::MIN, 1])], "to_float");
    // Products and quotients at many scales, with rounding at the last digit.
    let a = d2(vec![1999, -1999, 1, -1, 3, -3, 5, -5, 123_456_789, -987_654_321, 0]);
    let b = d2(vec![90, 90, 2, 2, 2, -2, -8, 8, 7, -3, 5]);
    for (sa, sb, r) in [
        (2, 2, 4),
        (2, 2, 2),
        (2, 2, 0),
        (4, 2, 1),
        (6, 0, 6),
        (2, 0, 6),
        (0, 6, 9),
    ] {
        let (ta, tb) = (Type::Decimal(sa), Type::Decimal(sb));
        let mul = arith(ArithOp::Mul, col(0, ta), col(1, tb), Type::Decimal(r));
        same(
            g,
            &mul,
            &[a.clone(), b.clone()],
            &format!("dec({sa}) * dec({sb}) -> dec({r})"),
        );
        let div = arith(ArithOp::Div, col(0, ta), col(1, tb), Type::Decimal(r));
        same(
            g,
            &div,
            &[a.clone(), b.clone()],
            &format!("dec({sa}) / dec({sb}) -> dec({r})"),
        );
    }
    // 128-bit intermediates: a decimal(18) quotient needs a * 10^(18 + 18).
    let big = d2(vec![i64::MAX, i64::MIN, 1, -1, 999_999_999_999, 7]);
    let small = d2(vec![3, 7, -3, 3, -9, 1]);
    for r in [0u8, 6, 18] {
        let div = arith(
            ArithOp::Div,
            col(0, Type::Decimal(0)),
            col(1, Type::Decimal(18)),
            Type::Decimal(r),
        );
        same(
            g,
            &div,
            &[big.clone(), small.clone()],
            &format!("wide quotient dec({r})"),
        );
        let mul = arith(
            ArithOp::Mul,
            col(0, Type::Decimal(18)),
            col(1, Type::Decimal(18)),
            Type::Decimal(r),
        );
        same(
            g,
            &mul,
            &[big.clone(), small.clone()],
            &format!("wide product dec({r})"),
        );
    }
}

fn float_semantics() {
    let mut gpu = gpu("float_semantics");
    let g = &mut gpu;
    let xs = HostCol::F64(vec![
        2.26,
        -2.25,
        2.5,
        -2.5,
        0.1 + 0.2,
        1e300,
        -0.0,
        0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        5e-324,
        1e15 + 0.3,
    ]);
    let ys = HostCol::F64(vec![
        3.0, 0.1, -7.5, 1e-300, 3.0, 1e300, 2.0, -1.0, 2.0, 0.5, 1.0, 3.0, 0.7,
    ]);
    for d in [0, 1, 2, 7, 18] {
        let e = round(col(0, Type::Float64), d, Type::Float64);
        same(g, &e, std::slice::from_ref(&xs), &format!("round float {d}"));
    }
    for op in [ArithOp::Add, ArithOp::Sub, ArithOp::Mul, ArithOp::Div] {
        let e = arith(op, col(0, Type::Float64), col(1, Type::Float64), Type::Float64);
        same(g, &e, &[xs.clone(), ys.clone()], &format!("float {op:?}"));
        // a * b + c: must not be contracted into a fused multiply-add.
        let fma = arith(
            ArithOp::Add,
            arith(
                ArithOp::Mul,
                col(0, Type::Float64),
                col(1, Type::Float64),
                Type::Float64,
            ),
            col(0, Type::Float64),
            Type::Float64,
        );
        same(g, &fma, &[xs.clone(), ys.clone()], "a * b + a");
    }
    for op in [CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge] {
        let e = cmp(op, col(0, Type::Float64), col(1, Type::Float64));
        same(g, &e, &[xs.clone(), ys.clone()], &format!("float {op:?}"));
    }
    let e = neg(col(0, Type::Float64));
    same(g, &e, std::slice::from_ref(&xs), "float neg");
    let e = call(ScalarFn::Abs, vec![col(0, Type::Float64)], Type::Float64);
    same(g, &e, std::slice::from_ref(&xs), "float abs");
    let e = in_list(
        col(0, Type::Float64),
        vec![Value::Float64(0.0), Value::Float64(f64::NAN), Value::Float64(2.5)],
    );
    same(
        g,
        &e,
        std::slice::from_ref(&xs),
        "float in-list (NaN never matches, -0.0 = 0.0)",
    );
    // to_int: truncation, and the overflow of NaN, infinities and 1e19.
    let e = cast(col(0, Type::Float64), Type::Int64);
    same(g, &e, &[HostCol::F64(vec![-2.4, 2.9, -0.0, 9.2e18, -9.2e18])], "to_int");
    for x in [1e19, f64::NAN, f64::INFINITY, -9.3e18, 9_223_372_036_854_775_808.0] {
        let err = both(g, &e, &[HostCol::F64(vec![1.0, x])], "to_int overflow").unwrap_err();
        assert!(err.contains("overflow") && err.contains("row 1"), "{err}");
    }
    let e = cast(col(0, Type::Float64), Type::Int32);
    same(
        g,
        &e,
        &[HostCol::F64(vec![2_147_483_647.9, -2_147_483_648.5, 3e9])],
        "to_int32",
    );
    // Integer and decimal operands of float arithmetic.
    let e = arith(
        ArithOp::Div,
        cast(col(0, Type::Decimal(3)), Type::Float64),
        cast(col(1, Type::Int64), Type::Float64),
        Type::Float64,
    );
    same(
        g,
        &e,
        &[d2(vec![1, -7, i64::MAX, i64::MIN]), d2(vec![3, 3, 7, 1])],
        "decimal / int as floats",
    );
}

fn overflow_and_division_by_zero() {
    let mut gpu = gpu("overflow_and_division_by_zero");
    let g = &mut gpu;
    let big = d2(vec![1, i64::MAX]);
    let e = arith(
        ArithOp::Add,
        col(0, Type::Int64),
        lit(Value::Int64(1), Type::Int64),
        Type::Int64,
    );
    let err = both(g, &e, std::slice::from_ref(&big), "int64 + 1").unwrap_err();
    assert!(
        err.contains("overflow") && err.contains("(c0 + 1)") && err.contains("row 1"),
        "{err}"
    );
    let e = arith(ArithOp::Mul, col(0, Type::Int32), col(0, Type::Int32), Type::Int32);
    same(g, &e, &[HostCol::I32(vec![46_340, 46_341])], "int32 square");
    let e = arith(
        ArithOp::Mul,
        col(0, Type::Decimal(2)),
        col(0, Type::Decimal(2)),
        Type::Decimal(4),
    );
    same(g, &e, &[d2(vec![4_000_000_000, 3_000_000_000])], "decimal square");
    let e = cast(col(0, Type::Int64), Type::Decimal(2));
    same(
        g,
        &e,
        &[d2(vec![92_233_720_368_547_758, 92_233_720_368_547_759])],
        "int to decimal",
    );
    let e = cast(col(0, Type::Int64), Type::Decimal(18));
    same(g, &e, &[d2(vec![9, -9, 10, 0])], "int to decimal(18)");
    let e = call(ScalarFn::Abs, vec![col(0, Type::Int32)], Type::Int32);
    same(g, &e, &[HostCol::I32(vec![-5, i32::MIN])], "abs int32 min");
    let e = neg(col(0, Type::Int64));
    same(g, &e, &[d2(vec![5, i64::MIN])], "neg int64 min");
    let e = arith(ArithOp::Div, col(0, Type::Int64), col(1, Type::Int64), Type::Int64);
    same(
        g,
        &e,
        &[d2(vec![7, -7, 7, i64::MIN]), d2(vec![2, 2, -2, -1])],
        "int64 min / -1",
    );
    // Division by zero: integers, decimals, floats, each reporting row 1.
    for (ty, a, b) in [
        (Type::Int64, d2(vec![1, 1, 1]), d2(vec![1, 0, 0])),
        (Type::Decimal(6), d2(vec![1, 1, 1]), d2(vec![1, 0, 0])),
        (
            Type::Float64,
            HostCol::F64(vec![1.0, 1.0, 1.0]),
            HostCol::F64(vec![1.0, -0.0, 0.0]),
        ),
    ] {
        let (ta, tb) = match ty {
            Type::Decimal(_) => (Type::Decimal(2), Type::Decimal(2)),
            t => (t, t),
        };
        let e = arith(ArithOp::Div, col(0, ta), col(1, tb), ty);
        let err = both(g, &e, &[a, b], &format!("{ty} division by zero")).unwrap_err();
        assert!(
            err.contains("division by zero in `(c0 / c1)`") && err.contains("(row 1)"),
            "{err}"
        );
    }
    // Short-circuit: c0 != 0 and 10 / c0 > 1 never divides by zero.
    let guard = cmp(CmpOp::Ne, col(0, Type::Int64), lit(Value::Int64(0), Type::Int64));
    let div = arith(
        ArithOp::Div,
        lit(Value::Int64(10), Type::Int64),
        col(0, Type::Int64),
        Type::Int64,
    );
    let test = cmp(CmpOp::Gt, div, lit(Value::Int64(1), Type::Int64));
    let c = d2(vec![0, 5, 20, 0, -3]);
    assert_eq!(
        both(
            g,
            &and(vec![guard.clone(), test.clone()]),
            std::slice::from_ref(&c),
            "and guard"
        )
        .unwrap(),
        HostCol::U8(vec![0, 1, 0, 0, 0])
    );
    same(
        g,
        &or(vec![not(guard.clone()), test.clone()]),
        std::slice::from_ref(&c),
        "or guard",
    );
    let bad = and(vec![test.clone(), guard]);
    assert!(both(g, &bad, std::slice::from_ref(&c), "unguarded").is_err());
    // The first failing row, whatever the order the GPU runs rows in: errors of two kinds
    // spread over a large input.
    let n = 300_000;
    let mut a: Vec<i64> = (0..n as i64).map(|i| i % 97 + 1).collect();
    let mut b: Vec<i64> = vec![3; n];
    for k in [299_990, 250_001, 123_457, 200_000] {
        b[k] = 0;
    }
    a[123_456] = i64::MAX;
    let e = arith(
        ArithOp::Div,
        arith(ArithOp::Add, col(0, Type::Int64), col(1, Type::Int64), Type::Int64),
        col(1, Type::Int64),
        Type::Int64,
    );
    let err = both(g, &e, &[d2(a), d2(b)], "first failing row").unwrap_err();
    assert!(err.contains("overflow") && err.contains("(row 123456)"), "{err}");
}

fn dates() {
    let mut gpu = gpu("dates");
    let g = &mut gpu;
    // 1900-03-01, 2000-02-29, 1969-12-31, 1600-02-29 and every day from 1890 to 2110, then
    // far-away days of both signs.
    let mut days: Vec<i32> = vec![-25_508, 11_016, -1, 0, -135_080];
    days.extend(-29_220..51_000);
    days.extend([i32::MIN, i32::MAX, -719_468, -719_469, 2_932_896, -12_687_794]);
    let c = HostCol::I32(days);
    for f in [ScalarFn::Year, ScalarFn::Month, ScalarFn::Day] {
        let e = call(f, vec![col(0, Type::Date)], Type::Int32);
        same(g, &e, std::slice::from_ref(&c), &format!("{f:?}"));
        let e = call(f, vec![col(0, Type::Date)], Type::Int64);
        same(g, &e, std::slice::from_ref(&c), &format!("{f:?} as int64"));
    }
    let e = arith(
        ArithOp::Sub,
        col(0, Type::Date),
        lit(Value::Int64(90), Type::Int64),
        Type::Date,
    );
    same(
        g,
        &e,
        &[HostCol::I32(vec![10_561, i32::MIN + 89, i32::MIN + 90])],
        "date - 90",
    );
    let e = arith(
        ArithOp::Add,
        lit(Value::Int32(1), Type::Int32),
        col(0, Type::Date),
        Type::Date,
    );
    same(g, &e, &[HostCol::I32(vec![10_561, i32::MAX])], "1 + date");
    let e = arith(
        ArithOp::Sub,
        col(0, Type::Date),
        lit(Value::Date(-25_508), Type::Date),
        Type::Int64,
    );
    same(g, &e, &[HostCol::I32(vec![10_561, i32::MIN, i32::MAX])], "date - date");
    let e = in_list(col(0, Type::Date), (0..20).map(|k| Value::Date(k * 7 - 30)).collect());
    same(g, &e, &[HostCol::I32((-40..40).collect())], "date in long list");
}

fn decimal_and_date_bounds() {
    let mut gpu = gpu("decimal_and_date_bounds");
    let g = &mut gpu;
    // Decimals hold 18 digits: results of 19 are overflows, at the same row as the CPU's.
    let max = 10i64.pow(18) - 1;
    let c = d2(vec![1, max / 9, max / 9 + 1, -max, max, 0]);
    let e = arith(
        ArithOp::Mul,
        col(0, Type::Decimal(2)),
        lit(Value::Int64(9), Type::Int64),
        Type::Decimal(2),
    );
    let err = both(g, &e, std::slice::from_ref(&c), "decimal * 9").unwrap_err();
    assert!(err.contains("does not fit decimal(2) (row 2)"), "{err}");
    for (op, k) in [(ArithOp::Add, 1), (ArithOp::Sub, 1), (ArithOp::Add, -1)] {
        let e = arith(
            op,
            col(0, Type::Decimal(2)),
            lit(dec(k, 2), Type::Decimal(2)),
            Type::Decimal(2),
        );
        assert!(both(g, &e, &[d2(vec![max - 1, 0, -max + 1])], "within").is_ok());
        let _ = both(g, &e, &[d2(vec![0, max, -max])], "beyond").unwrap_err();
    }
    let e = cast(col(0, Type::Decimal(2)), Type::Decimal(4));
    let _ = both(g, &e, &[d2(vec![10i64.pow(16) - 1, 10i64.pow(16)])], "rescale").unwrap_err();
    let e = cast(col(0, Type::Int64), Type::Decimal(0));
    let _ = both(g, &e, &[HostCol::I64(vec![max, max + 1])], "int64 to decimal").unwrap_err();
    let e = arith(
        ArithOp::Div,
        col(0, Type::Decimal(2)),
        col(1, Type::Decimal(2)),
        Type::Decimal(6),
    );
    let _ = both(
        g,
        &e,
        &[d2(vec![100, 10i64.pow(14)]), d2(vec![100, 100])],
        "quotient of 19 digits",
    )
    .unwrap_err();
    // Dates run from 0000-01-01 to 9999-12-31.
    let (first, last) = (-719_528, 2_932_896);
    let plus = |n: i64| {
        arith(
            ArithOp::Add,
            col(0, Type::Date),
            lit(Value::Int64(n), Type::Int64),
            Type::Date,
        )
    };
    assert!(both(g, &plus(1), &[HostCol::I32(vec![last - 1, first - 1])], "last date").is_ok());
    let err = both(g, &plus(1), &[HostCol::I32(vec![0, last])], "after the last date").unwrap_err();
    assert!(err.contains("does not fit date (row 1)"), "{err}");
    let err = both(g, &plus(100_000_000), &[HostCol::I32(vec![0])], "far").unwrap_err();
    assert!(err.contains("does not fit date (row 0)"), "{err}");
    let _ = both(
        g,
        &plus(-1),
        &[HostCol::I32(vec![first + 1, first])],
        "before the first",
    )
    .unwrap_err();
}

fn strings_tables_and_narrowing() {
    let mut gpu = gpu("strings_tables_and_narrowing");
    let g = &mut gpu;
    let ctx = Strings(
        [("b", 0), ("d", 1), ("f", 2), ("a", 3), ("e", 4)]
            .iter()
            .map(|(s, c)| (s.to_string(), *c))
            .collect(),
    );
    let codes = HostCol::U32(vec![0, 1, 2, 3, 4]);
    let rank = HostCol::U32(vec![1, 2, 4, 0, 3]);
    let rank_of = |x: KExpr| table(0, x, Type::Int64);
    let run = |g: &mut CudaBackend, e: &KExpr, args: &[HostCol], case: &str| {
        check(g, e, 1, args, &ctx, case);
        cpu_eval(e, 1, args, &ctx)
    };
    let lt = cmp(CmpOp::Lt, rank_of(col(0, Type::String)), rank_of(string("e")));
    assert_eq!(
        run(g, &lt, &[codes.clone(), rank.clone()], "rank <").unwrap(),
        HostCol::U8(vec![1, 1, 0, 1, 0])
    );
    let eq = cmp(CmpOp::Eq, col(0, Type::String), string("d"));
    let _ = run(g, &eq, std::slice::from_ref(&codes), "string =");
    let inl = in_list(
        col(0, Type::String),
        vec![Value::String("a".into()), Value::String("f".into())],
    );
    let _ = run(g, &inl, std::slice::from_ref(&codes), "string in");
    let _ = run(g, &string("e"), std::slice::from_ref(&codes), "string constant");
    let err = run(g, &string("zz"), std::slice::from_ref(&codes), "missing constant").unwrap_err();
    assert!(err.contains("no dictionary code"), "{err}");
    let lt_d = cmp(CmpOp::Lt, rank_of(col(0, Type::String)), rank_of(string("d")));
    let err = run(
        g,
        &lt_d,
        &[codes.clone(), HostCol::U32(vec![1, 2])],
        "code outside the table",
    )
    .unwrap_err();
    assert!(
        err.contains("outside dictionary table 0") && err.contains("row 2"),
        "{err}"
    );
    // A like-table (U8) read as bool, a strlen table (I32) read as int32.
    let like = table(0, col(0, Type::String), Type::Bool);
    let _ = run(
        g,
        &like,
        &[HostCol::U32(vec![2, 0, 1]), HostCol::U8(vec![1, 0, 1])],
        "like table",
    );
    let strlen = table(0, col(0, Type::String), Type::Int32);
    let _ = run(
        g,
        &strlen,
        &[HostCol::U32(vec![2, 0, 1]), HostCol::I32(vec![5, 0, 7])],
        "strlen table",
    );
    // A table read as another type than its entries are is a plan error.
    let as_bool = table(0, col(0, Type::String), Type::Bool);
    let err = run(
        g,
        &as_bool,
        &[HostCol::U32(vec![0, 1]), HostCol::U32(vec![1, 300])],
        "rank read as bool",
    )
    .unwrap_err();
    assert!(
        err.contains("table 0 is u32, whose entries read as int64, but `t0[c0]` has type bool"),
        "{err}"
    );
    let as_i32 = table(0, col(0, Type::String), Type::Int32);
    let err = run(
        g,
        &as_i32,
        &[HostCol::U32(vec![0, 1]), HostCol::I64(vec![5, 6])],
        "int64 table",
    )
    .unwrap_err();
    assert!(err.contains("table 0 is i64, not a dictionary table"), "{err}");
    // Results that do not fit the output's element type: the first such row is named with
    // its value, after any evaluation error.
    let year_bool = call(ScalarFn::Year, vec![col(0, Type::Date)], Type::Bool);
    let err = both(g, &year_bool, &[HostCol::I32(vec![-719_528, 0])], "year as bool").unwrap_err();
    assert!(err.contains("= 1970 does not fit bool (row 1)"), "{err}");
    let later = arith(ArithOp::Add, col(0, Type::Date), col(1, Type::Int64), Type::Date);
    let year_bool = call(ScalarFn::Year, vec![later], Type::Bool);
    let err = both(
        g,
        &year_bool,
        &[HostCol::I32(vec![-719_528, 0, 0]), d2(vec![0, 0, 1_000_000_000])],
        "narrowing after an evaluation error",
    )
    .unwrap_err();
    assert!(err.contains("overflow") && err.contains("row 2"), "{err}");
    // Integer in-lists, short and long (a sorted table).
    for k in [0, 1, 8, 9, 50] {
        let vs: Vec<Value> = (0..k).map(|j| Value::Int64((j * 37 % 101) - 50)).collect();
        let e = in_list(col(0, Type::Int64), vs);
        same(
            g,
            &e,
            &[d2((-60..60).chain([i64::MIN, i64::MAX]).collect())],
            &format!("in-list of {k}"),
        );
    }
}

fn argument_errors_and_empty_inputs() {
    let mut gpu = gpu("argument_errors_and_empty_inputs");
    let g = &mut gpu;
    let ctx = Strings::default();
    let e = arith(ArithOp::Add, col(0, Type::Int64), col(1, Type::Int64), Type::Int64);
    check(
        g,
        &e,
        2,
        &[d2(vec![1]), d2(vec![1, 2])],
        &ctx,
        "columns of different lengths",
    );
    check(g, &e, 2, &[d2(vec![])], &ctx, "too few columns");
    check(g, &lit(Value::Int64(1), Type::Int64), 0, &[], &ctx, "no column");
    check(
        g,
        &col(0, Type::Int64),
        1,
        &[HostCol::I32(vec![1])],
        &ctx,
        "wrong element type",
    );
    // Structural errors are found with no rows too; an empty input gives an empty column.
    let bad = arith(ArithOp::Add, col(0, Type::Date), col(0, Type::Date), Type::Date);
    check(g, &bad, 1, &[HostCol::I32(vec![])], &ctx, "date + date, no rows");
    for n in [0, 1] {
        let e = arith(
            ArithOp::Div,
            col(0, Type::Decimal(2)),
            col(1, Type::Decimal(2)),
            Type::Decimal(6),
        );
        check(g, &e, 2, &[d2(vec![5; n]), d2(vec![3; n])], &ctx, &format!("{n} rows"));
        let c = lit(Value::Int64(7), Type::Int64);
        check(
            g,
            &c,
            1,
            &[HostCol::U8(vec![1; n])],
            &ctx,
            &format!("constant over {n} rows"),
        );
    }
}

fn large_input() {
    let mut gpu = gpu("large_input");
    let n = LARGE;
    let mut rng = Rng::new(7);
    let a: Vec<i64> = (0..n).map(|_| rng.below(2_000_001) as i64 - 1_000_000).collect();
    let mut b: Vec<i64> = (0..n).map(|_| rng.below(999) as i64 + 1).collect();
    let d: Vec<i32> = (0..n).map(|_| rng.below(40_000) as i32 - 10_000).collect();
    let s: Vec<u32> = (0..n).map(|_| dict_code(rng.below(DICT as u64) as usize)).collect();
    let ctx = dict();
    // (a / b) at scale 4 for rows of a late-enough year whose string is among a few.
    let e = and(vec![
        cmp(
            CmpOp::Ge,
            call(ScalarFn::Year, vec![col(2, Type::Date)], Type::Int32),
            lit(Value::Int32(1990), Type::Int32),
        ),
        in_list(
            col(3, Type::String),
            ["s01", "s05", "s17", "s33"]
                .iter()
                .map(|x| Value::String(x.to_string()))
                .collect(),
        ),
        cmp(
            CmpOp::Gt,
            arith(
                ArithOp::Div,
                col(0, Type::Decimal(2)),
                col(1, Type::Decimal(2)),
                Type::Decimal(4),
            ),
            lit(dec(25_000, 4), Type::Decimal(4)),
        ),
    ]);
    let mut args = vec![d2(a.clone()), d2(b.clone()), HostCol::I32(d), HostCol::U32(s)];
    let t0 = Instant::now();
    check(&mut gpu, &e, 4, &args, &ctx, "10^7 rows");
    let sum = arith(
        ArithOp::Mul,
        col(0, Type::Decimal(2)),
        col(1, Type::Decimal(2)),
        Type::Decimal(3),
    );
    check(&mut gpu, &sum, 4, &args, &ctx, "10^7 rows, decimal product");
    // Zero divisors near the end and one in the middle: the middle one is reported.
    for k in [n - 3, n - 1, n / 2 + 17] {
        b[k] = 0;
    }
    args[1] = d2(b);
    let div = arith(
        ArithOp::Div,
        col(0, Type::Decimal(2)),
        col(1, Type::Decimal(2)),
        Type::Decimal(4),
    );
    let failed = check(&mut gpu, &div, 4, &args, &ctx, "10^7 rows, zero divisors");
    assert!(failed);
    let _ = writeln!(std::io::stderr(), "large_input: {:.1} s", t0.elapsed().as_secs_f64());
}

// ---- without a GPU -------------------------------------------------------------------------

/// Expressions for the compile check: the targeted shapes and random ones.
fn sample_expressions() -> Vec<KExpr> {
    let mut out = vec![
        arith(
            ArithOp::Div,
            col(2, Type::Decimal(2)),
            col(3, Type::Decimal(4)),
            Type::Decimal(6),
        ),
        arith(
            ArithOp::Mul,
            col(3, Type::Decimal(4)),
            col(3, Type::Decimal(4)),
            Type::Decimal(2),
        ),
        arith(
            ArithOp::Div,
            col(0, Type::Decimal(0)),
            col(3, Type::Decimal(18)),
            Type::Decimal(18),
        ),
        cast(col(0, Type::Int64), Type::Decimal(18)),
        cast(col(3, Type::Decimal(4)), Type::Decimal(0)),
        round(col(4, Type::Float64), 2, Type::Float64),
        cast(col(4, Type::Float64), Type::Int32),
        call(ScalarFn::Year, vec![col(C_DATE, Type::Date)], Type::Bool),
        table(1, col(C_STR, Type::String), Type::Bool),
        in_list(col(0, Type::Int64), (0..30).map(Value::Int64).collect()),
        in_list(
            col(4, Type::Float64),
            vec![Value::Float64(f64::NAN), Value::Float64(-0.0)],
        ),
        in_list(col(0, Type::Int64), vec![Value::Int64(i64::MIN)]),
        string("s03"),
    ];
    let mut g = Gen::new(99);
    for k in 0..40 {
        out.push(if k % 2 == 0 { g.any(3) } else { g.boolean(3) });
    }
    out
}

fn generated_kernels_compile_for_sm90() {
    let ctx = dict();
    let elems: Vec<Elem> = Gen::new(0).args(0).iter().map(|c| c.elem()).collect();
    let t0 = Instant::now();
    let mut compiled = 0;
    for e in sample_expressions() {
        let g =
            generate_source(&e, COLS.len(), &elems, &ctx).unwrap_or_else(|err| panic!("`{}`: {err}", show_kexpr(&e)));
        let ptx = compile::compile_ptx(&g.kernel, &g.source, "compute_90")
            .unwrap_or_else(|err| panic!("`{}`:\n{err}\n{}", show_kexpr(&e), g.source));
        assert!(
            ptx.contains(&format!(".entry {}", g.kernel)),
            "`{}`: no entry {} in the PTX",
            show_kexpr(&e),
            g.kernel
        );
        compiled += 1;
    }
    // Trees with 38-digit decimals: the targeted ones and random ones.
    let mut g = Gen::new_wide(98);
    let wide_elems: Vec<Elem> = g.args(0).iter().map(|c| c.elem()).collect();
    let mut wide: Vec<(KExpr, usize, Vec<Elem>)> = wide_cases()
        .into_iter()
        .map(|(e, cols)| {
            let elems = cols.iter().map(|c| c.elem()).collect();
            (e, cols.len(), elems)
        })
        .collect();
    for k in 0..30 {
        let e = if k % 2 == 0 { g.any(3) } else { g.boolean(3) };
        wide.push((e, g.n_cols(), wide_elems.clone()));
    }
    // Soufflé's operators, in 64 and in 128 bits (each expression once).
    let mut seen = std::collections::HashSet::new();
    for (e, cols) in souffle_cases() {
        if !seen.insert(show_kexpr(&e)) {
            continue;
        }
        let mut elems: Vec<Elem> = cols.iter().map(|c| c.elem()).collect();
        let n_cols = elems.len();
        elems.extend(tables().iter().map(|t| t.elem()));
        wide.push((e, n_cols, elems));
    }
    for (e, n_cols, elems) in &wide {
        let gs = generate_source(e, *n_cols, elems, &ctx).unwrap_or_else(|err| panic!("`{}`: {err}", show_kexpr(e)));
        let ptx = compile::compile_ptx(&gs.kernel, &gs.source, "compute_90")
            .unwrap_or_else(|err| panic!("`{}`:\n{err}\n{}", show_kexpr(e), gs.source));
        assert!(ptx.contains(&format!(".entry {}", gs.kernel)), "`{}`", show_kexpr(e));
        compiled += 1;
    }
    let _ = writeln!(
        std::io::stderr(),
        "generated_kernels_compile_for_sm90: {compiled} kernels in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

fn plan_errors_match_cpu() {
    let ctx = dict();
    let cols = Gen::new(0).args(3);
    let elems: Vec<Elem> = cols.iter().map(|c| c.elem()).collect();
    let n_cols = COLS.len();
    let bad = [
        col(0, Type::Int32),
        col(40, Type::Int64),
        table(7, col(C_STR, Type::String), Type::Int64),
        table(0, col(C_STR, Type::String), Type::Float64),
        table(0, col(C_STR, Type::String), Type::Bool),
        table(1, col(0, Type::Int64), Type::Bool),
        arith(
            ArithOp::Add,
            col(C_DATE, Type::Date),
            col(C_DATE, Type::Date),
            Type::Date,
        ),
        arith(
            ArithOp::Add,
            col(2, Type::Decimal(2)),
            col(3, Type::Decimal(4)),
            Type::Decimal(2),
        ),
        arith(
            ArithOp::Add,
            col(2, Type::Decimal(2)),
            col(C_STR, Type::String),
            Type::Decimal(2),
        ),
        arith(
            ArithOp::Mul,
            col(0, Type::Decimal(30)),
            col(0, Type::Decimal(30)),
            Type::Decimal(0),
        ),
        cmp(CmpOp::Lt, col(C_STR, Type::String), col(0, Type::Int64)),
        cast(col(C_DATE, Type::Date), Type::Int64),
        cast(col(0, Type::Decimal(40)), Type::Decimal(0)),
        cast(col(4, Type::Float64), Type::Decimal(2)),
        neg(col(C_DATE, Type::Date)),
        call(ScalarFn::Year, vec![col(0, Type::Int64)], Type::Int32),
        call(ScalarFn::Abs, vec![col(C_STR, Type::String)], Type::Int64),
        call(ScalarFn::Round, vec![col(2, Type::Decimal(2))], Type::Decimal(2)),
        round(col(2, Type::Decimal(2)), 19, Type::Decimal(2)),
        round(col(2, Type::Decimal(2)), 2, Type::Decimal(1)),
        call(
            ScalarFn::Round,
            vec![col(2, Type::Decimal(2)), col(0, Type::Int64)],
            Type::Decimal(2),
        ),
        round(col(4, Type::Float64), -1, Type::Float64),
        call(
            ScalarFn::Round,
            vec![col(2, Type::Decimal(2)), lit(Value::Int32(1), Type::Int64)],
            Type::Decimal(1),
        ),
        and(vec![col(0, Type::Int64)]),
        not(col(C_STR, Type::String)),
        in_list(col(0, Type::Int64), vec![Value::Float64(1.5)]),
        in_list(col(4, Type::Float64), vec![Value::String("x".into())]),
        in_list(col(2, Type::Decimal(2)), vec![dec(1, 3)]),
        string("not in the dictionary"),
        lit(Value::Int64(1), Type::Float64),
        call(ScalarFn::Year, vec![col(C_DATE, Type::Date)], Type::Float64),
        arith(
            ArithOp::Add,
            col(C_STR, Type::String),
            col(4, Type::Float64),
            Type::Float64,
        ),
        lit(Value::Int64(300), Type::Bool),
        lit(Value::Date(fox_sema::core::MAX_DATE + 1), Type::Date),
        lit(dec(i128::MAX, 0), Type::Decimal(2)),
        lit(dec(MAX_WIDE + 1, 2), Type::WideDecimal(2)),
        col(0, Type::WideDecimal(2)),
        col(C_BOOL, Type::Float64),
    ];
    let mut failures = 0;
    for e in &bad {
        let cpu = cpu_backend_eval(e, n_cols, &cols, &ctx);
        let gen = generate_source(e, n_cols, &elems, &ctx);
        match (&cpu, &gen) {
            (Err(c), Err(g)) => {
                assert_eq!(&format!("kernel Eval: {g}"), c, "`{}`", show_kexpr(e));
                failures += 1;
            }
            (Ok(_), Ok(_)) => {}
            _ => panic!(
                "`{}`: cpu {:?}, generator {:?}",
                show_kexpr(e),
                cpu.map(|c| describe(&c)),
                gen.map(|g| g.kernel)
            ),
        }
    }
    assert_eq!(failures, bad.len(), "only {failures} of {} plans fail", bad.len());
    // Random well-typed expressions generate without error, as they evaluate on the CPU.
    let mut g = Gen::new(5);
    for _ in 0..300 {
        let e = g.any(4);
        if let Err(err) = generate_source(&e, n_cols, &elems, &ctx) {
            panic!("`{}`: {err}", show_kexpr(&e));
        }
    }
}

// ---- 38-digit decimals ----------------------------------------------------------------------

fn w(v: Vec<i128>) -> HostCol {
    HostCol::I128(v)
}

/// Targeted expressions over 38-digit decimals and their columns (no tables): the bounds
/// ±(10^38 - 1), sums and products that overflow 128 bits, rescales with rounding, values
/// near the bounds of i64, conversions to float with ties, narrowing to 18 digits.
/// The int64 edge values of Soufflé's operators: zero, ±1, shift counts at and beyond
/// the width and negative ones, the bounds.
const SOUFFLE_EDGES: [i64; 14] = [0, 1, -1, 2, -2, 3, 7, -7, 63, 64, 65, -64, i64::MAX, i64::MIN];

/// Every pair of `xs` and `ys` as two int64 columns.
fn souffle_pairs(xs: &[i64], ys: &[i64]) -> Vec<HostCol> {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for &x in xs {
        for &y in ys {
            a.push(x);
            b.push(y);
        }
    }
    vec![HostCol::I64(a), HostCol::I64(b)]
}

/// Soufflé's operators (`%`, `^`, the bitwise and logical ones, `bnot`, `lnot`, `min`,
/// `max` of int64, float64 and strings by rank) on edge values, those that fail on
/// some row among them, and the same inside a tree computed in 128 bits. String columns
/// hold codes of [`dict`]; the expressions read the rank table t0 of [`tables`], which
/// follows the columns.
fn souffle_cases() -> Vec<(KExpr, Vec<HostCol>)> {
    let i = Type::Int64;
    let ab = || (col(0, Type::Int64), col(1, Type::Int64));
    let mut rng = Rng::new(31);
    let mut xs: Vec<i64> = SOUFFLE_EDGES.to_vec();
    xs.extend((0..40).map(|_| rng.next_u64() as i64 >> rng.below(64)));
    let mut cases = Vec::new();
    for op in [
        ArithOp::BitAnd,
        ArithOp::BitOr,
        ArithOp::BitXor,
        ArithOp::Shl,
        ArithOp::Shr,
        ArithOp::ShrU,
        ArithOp::LogAnd,
        ArithOp::LogOr,
        ArithOp::LogXor,
    ] {
        let (a, b) = ab();
        cases.push((arith(op, a, b, i), souffle_pairs(&xs, &xs)));
    }
    // `%` on every pair but a zero divisor and the smallest int64 by -1.
    let divs: Vec<i64> = xs.iter().copied().filter(|&y| y != 0).collect();
    let nums: Vec<i64> = xs.iter().copied().filter(|&x| x != i64::MIN).collect();
    let (a, b) = ab();
    cases.push((arith(ArithOp::Rem, a, b, i), souffle_pairs(&nums, &divs)));
    let (a, b) = ab();
    cases.push((arith(ArithOp::Rem, a, b, i), souffle_pairs(&[i64::MIN], &divs)));
    // Then the failing rows: a zero divisor at row 3, the smallest int64 by -1 at row 2.
    let (a, b) = ab();
    cases.push((
        arith(ArithOp::Rem, a, b, i),
        vec![HostCol::I64(vec![1, 2, 3, 5]), HostCol::I64(vec![1, 1, 1, 0])],
    ));
    let (a, b) = ab();
    cases.push((
        arith(ArithOp::Rem, a, b, i),
        vec![HostCol::I64(vec![1, 2, i64::MIN]), HostCol::I64(vec![-1, -1, -1])],
    ));
    // `^` where it has an exact value, then each way it has none.
    let pw: [(i64, i64); 24] = [
        (2, 10),
        (2, 62),
        (-2, 63),
        (2, -1),
        (3, -2),
        (-1, -3),
        (-1, 4),
        (1, -5),
        (0, 0),
        (0, 5),
        (3, 33),
        (10, 15),
        (10, 18),
        (-10, 17),
        (6, 24),
        (-3, 5),
        (7, 0),
        (5, -1),
        (-2, -1),
        (-1, (1 << 53) + 1),
        (-1, i64::MIN),
        (i64::MIN, 1),
        (i64::MAX, 0),
        (1, i64::MAX),
    ];
    let (a, b) = ab();
    cases.push((
        arith(ArithOp::Pow, a, b, i),
        vec![
            HostCol::I64(pw.iter().map(|p| p.0).collect()),
            HostCol::I64(pw.iter().map(|p| p.1).collect()),
        ],
    ));
    for (x, y) in [
        (2, 63),
        (3, 39),
        (0, -1),
        (2, 64),
        (i64::MAX, 1),
        (-3, 40),
        (2, i64::MAX),
    ] {
        let (a, b) = ab();
        cases.push((
            arith(ArithOp::Pow, a, b, i),
            vec![HostCol::I64(vec![2, x]), HostCol::I64(vec![3, y])],
        ));
    }
    for f in [ScalarFn::BitNot, ScalarFn::LogNot, ScalarFn::Unsigned] {
        cases.push((call(f, vec![col(0, i)], i), vec![HostCol::I64(xs.clone())]));
    }
    // `unsigned` of values that are all at least 0.
    cases.push((
        call(ScalarFn::Unsigned, vec![col(0, i)], i),
        vec![HostCol::I64(vec![0, 1, 7, i64::MAX])],
    ));
    for f in [ScalarFn::Min, ScalarFn::Max] {
        let (a, b) = ab();
        cases.push((call(f, vec![a, b], i), souffle_pairs(&xs, &xs)));
        let fl = [0.0, -0.0, 1.5, -2.25, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e300];
        let (mut fa, mut fb) = (Vec::new(), Vec::new());
        for &x in &fl {
            for &y in &fl {
                fa.push(x);
                fb.push(y);
            }
        }
        let f64t = Type::Float64;
        cases.push((
            call(f, vec![col(0, f64t), col(1, f64t)], f64t),
            vec![HostCol::F64(fa), HostCol::F64(fb)],
        ));
        let codes: Vec<u32> = (0..DICT).map(dict_code).collect();
        let (mut sa, mut sb) = (Vec::new(), Vec::new());
        for &x in &codes {
            for &y in &codes {
                sa.push(x);
                sb.push(y);
            }
        }
        let st = Type::String;
        cases.push((
            call(
                f,
                vec![col(0, st), col(1, st), table(0, col(0, st), i), table(0, col(1, st), i)],
                st,
            ),
            vec![HostCol::U32(sa), HostCol::U32(sb)],
        ));
    }
    // `land` and `lor` skip the second operand when the first decides: `a land 7 / a`
    // never divides by zero; `a lor 7 / (a - a)` does where a is 0.
    let seven_by = |x: KExpr| arith(ArithOp::Div, lit(Value::Int64(7), i), x, i);
    cases.push((
        arith(ArithOp::LogAnd, col(0, i), seven_by(col(0, i)), i),
        vec![HostCol::I64(xs.clone())],
    ));
    let a_minus_a = || arith(ArithOp::Sub, col(0, i), col(0, i), i);
    cases.push((
        arith(ArithOp::LogOr, col(0, i), seven_by(a_minus_a()), i),
        vec![HostCol::I64(divs.clone())],
    ));
    cases.push((
        arith(ArithOp::LogOr, col(0, i), seven_by(a_minus_a()), i),
        vec![HostCol::I64(xs.clone())],
    ));
    // Nested: `(a band b) % (a bor 1)` (never by zero) and `(a % 5) ^ (b band 7)`.
    let (a, b) = ab();
    let (a2, _) = ab();
    let one = lit(Value::Int64(1), i);
    cases.push((
        arith(
            ArithOp::Rem,
            arith(ArithOp::BitAnd, a, b, i),
            arith(ArithOp::BitOr, a2, one, i),
            i,
        ),
        souffle_pairs(&xs, &xs),
    ));
    let (a, b) = ab();
    cases.push((
        arith(
            ArithOp::Pow,
            arith(ArithOp::Rem, a, lit(Value::Int64(5), i), i),
            arith(ArithOp::BitAnd, b, lit(Value::Int64(7), i), i),
            i,
        ),
        souffle_pairs(&xs, &xs),
    ));
    // Inside trees computed in 128 bits (an operand widened to a 38-digit decimal).
    let w0 = Type::WideDecimal(0);
    let wide = |e: KExpr| {
        arith(
            ArithOp::Add,
            cast(e, w0),
            lit(Value::Decimal { unscaled: 1, scale: 0 }, w0),
            w0,
        )
    };
    for op in [ArithOp::Shl, ArithOp::ShrU, ArithOp::BitXor, ArithOp::LogXor] {
        let (a, b) = ab();
        cases.push((wide(arith(op, a, b, i)), souffle_pairs(&xs, &xs)));
    }
    let (a, b) = ab();
    cases.push((wide(arith(ArithOp::Rem, a, b, i)), souffle_pairs(&nums, &divs)));
    let (a, b) = ab();
    cases.push((
        wide(arith(ArithOp::Pow, a, b, i)),
        vec![
            HostCol::I64(pw.iter().map(|p| p.0).collect()),
            HostCol::I64(pw.iter().map(|p| p.1).collect()),
        ],
    ));
    let (a, b) = ab();
    cases.push((wide(call(ScalarFn::Max, vec![a, b], i)), souffle_pairs(&xs, &xs)));
    cases.push((
        wide(call(ScalarFn::BitNot, vec![col(0, i)], i)),
        vec![HostCol::I64(xs.clone())],
    ));
    cases
}

/// Soufflé's operators on the GPU and the CPU: the same values, or the same error at the
/// same row.
fn souffle_operators_match_cpu() {
    let mut gpu = gpu("souffle_operators_match_cpu");
    let ctx = dict();
    let (mut failed, mut total) = (0, 0);
    for (k, (e, cols)) in souffle_cases().into_iter().enumerate() {
        let n_cols = cols.len();
        let mut args = cols;
        args.extend(tables());
        if check(&mut gpu, &e, n_cols, &args, &ctx, &format!("souffle case {k}")) {
            failed += 1;
        }
        total += 1;
    }
    assert!(failed >= 10 && failed < total, "{failed} of {total} cases failed");
}

fn wide_cases() -> Vec<(KExpr, Vec<HostCol>)> {
    let (w2, w4) = (Type::WideDecimal(2), Type::WideDecimal(4));
    let m = MAX_WIDE;
    let i64max = i128::from(i64::MAX);
    // Values that most operations take without overflow (rounding ties, the bounds of
    // i64, 20 to 30 digits), then the same followed by the extremes, which fail late.
    let safe_a = vec![
        1,
        -1,
        0,
        i64max,
        i64max + 1,
        -i64max - 1,
        -i64max - 2,
        10i128.pow(19) * 5 + 5,
        -(10i128.pow(19) * 5 + 5),
        25,
        -25,
        15,
        -15,
        10i128.pow(30) + 7,
        -(10i128.pow(30)) + 3,
        123_456_789_012_345_678_901_234_567,
    ];
    let safe_b = vec![1i128, -1, 1, 3, 2, 3, -3, 10, -10, 3, 7, -7, 9, 11, 2, -7];
    let mut edge_a = safe_a.clone();
    edge_a.extend([m, -m, m - 1, 2]);
    let mut edge_b = safe_b.clone();
    edge_b.extend([1, -1, m, 0]);
    let pairs = [
        vec![w(safe_a.clone()), w(safe_b.clone())],
        vec![w(edge_a.clone()), w(edge_b.clone())],
    ];
    let singles = [w(safe_a.clone()), w(edge_a.clone())];
    let mut out = Vec::new();
    let both = |e: KExpr, out: &mut Vec<(KExpr, Vec<HostCol>)>| {
        for p in &pairs {
            out.push((e.clone(), p.clone()));
        }
    };
    for op in [ArithOp::Add, ArithOp::Sub] {
        both(arith(op, col(0, w2), col(1, w2), w2), &mut out);
    }
    // 2 * (10^38 - 1) overflows i128 itself.
    out.push((
        arith(ArithOp::Add, col(0, w2), col(1, w2), w2),
        vec![w(vec![5, m]), w(vec![5, m])],
    ));
    out.push((
        arith(ArithOp::Sub, col(0, w2), col(1, w2), w2),
        vec![w(vec![5, -m]), w(vec![5, m])],
    ));
    for r in [4u8, 2, 0, 6] {
        both(
            arith(ArithOp::Mul, col(0, w2), col(1, w2), Type::WideDecimal(r)),
            &mut out,
        );
        both(
            arith(ArithOp::Div, col(0, w2), col(1, w2), Type::WideDecimal(r)),
            &mut out,
        );
    }
    // Products whose exact value needs more than 128 bits, is exactly i128::MIN, or fits.
    let two63 = 1i128 << 63;
    for (a, b) in [
        (
            vec![3, -(1i128 << 64), two63, 1i128 << 64],
            vec![5, two63, -two63, 1i128 << 63],
        ),
        (
            vec![10i128.pow(19), -(10i128.pow(20)), 10i128.pow(20)],
            vec![10i128.pow(19), 10i128.pow(18), 10i128.pow(18)],
        ),
    ] {
        for r in [0u8, 2, 4] {
            out.push((
                arith(ArithOp::Mul, col(0, w2), col(1, w2), Type::WideDecimal(r)),
                vec![w(a.clone()), w(b.clone())],
            ));
        }
    }
    // Quotients whose scaled numerator needs the 128-bit bound check.
    for r in [0u8, 6, 20] {
        both(
            arith(ArithOp::Div, col(0, w2), col(1, w4), Type::WideDecimal(r)),
            &mut out,
        );
    }
    for to in [
        Type::WideDecimal(0),
        Type::WideDecimal(1),
        Type::WideDecimal(30),
        Type::WideDecimal(6),
        Type::Decimal(2),
        Type::Decimal(0),
        Type::Int64,
        Type::Int32,
        Type::Float64,
    ] {
        for c in &singles {
            out.push((cast(col(0, w2), to), vec![c.clone()]));
        }
    }
    out.push((
        cast(col(0, Type::Decimal(2)), Type::WideDecimal(30)),
        vec![d2(vec![1, -1, 0, i64::MAX, i64::MIN])],
    ));
    out.push((
        cast(col(0, Type::Decimal(2)), Type::WideDecimal(40)),
        vec![d2(vec![0, 1])],
    ));
    out.push((cast(col(0, Type::Int64), w4), vec![d2(vec![i64::MAX, i64::MIN, 7])]));
    // Conversions to float: ties round to even above 2^64.
    let ties = w(vec![
        (1i128 << 64) + (1 << 11),
        (1i128 << 64) + (1 << 11) + 1,
        (1i128 << 64) + 3 * (1 << 11),
        (1i128 << 100) + (1i128 << 47),
        (1i128 << 100) + 3 * (1i128 << 47),
        -((1i128 << 100) + (1i128 << 47)),
        (1i128 << 126) + (1i128 << 73) - 1,
        m,
        -m,
        i64max + 1,
        1i128 << 64,
        (1i128 << 64) - 1,
    ]);
    out.push((cast(col(0, Type::WideDecimal(0)), Type::Float64), vec![ties.clone()]));
    out.push((cast(col(0, w2), Type::Float64), vec![ties.clone()]));
    out.push((
        arith(
            ArithOp::Mul,
            cast(col(0, w4), Type::Float64),
            lit(Value::Float64(0.5), Type::Float64),
            Type::Float64,
        ),
        vec![ties],
    ));
    for c in &singles {
        out.push((neg(col(0, w2)), vec![c.clone()]));
        out.push((call(ScalarFn::Abs, vec![col(0, w2)], w2), vec![c.clone()]));
        for (d, ty) in [(0, Type::WideDecimal(0)), (1, Type::WideDecimal(1)), (1, w4), (2, w2)] {
            out.push((round(col(0, w2), d, ty), vec![c.clone()]));
        }
    }
    for op in [CmpOp::Eq, CmpOp::Lt, CmpOp::Ge] {
        both(cmp(op, col(0, w2), col(1, w2)), &mut out);
        out.push((
            cmp(op, col(0, w2), lit(dec(i64max + 1, 2), w2)),
            vec![w(edge_a.clone())],
        ));
    }
    let near: Vec<Value> = [m, -m, i64max, i64max + 1, 25, -15, 0, 10i128.pow(30) + 7, 7, 8]
        .iter()
        .map(|&v| dec(v, 2))
        .collect();
    out.push((in_list(col(0, w2), near[..4].to_vec()), vec![w(edge_a.clone())]));
    out.push((in_list(col(0, w2), near.clone()), vec![w(edge_a.clone())]));
    let small: Vec<Value> = (0..12).map(|k| dec(k * 5 - 25, 2)).collect();
    out.push((in_list(col(0, w2), small), vec![w(edge_a.clone())]));
    // A 38-digit constant beyond i64.
    for c in &singles {
        out.push((
            arith(ArithOp::Add, col(0, w2), lit(dec(m - 5, 2), w2), w2),
            vec![c.clone()],
        ));
    }
    // Narrow trees around a wide one: a comparison of a rescaled 38-digit value.
    out.push((
        and(vec![
            cmp(
                CmpOp::Gt,
                cast(col(0, w2), Type::Decimal(2)),
                lit(dec(0, 2), Type::Decimal(2)),
            ),
            cmp(CmpOp::Ne, col(1, Type::Int64), lit(Value::Int64(0), Type::Int64)),
        ]),
        vec![w(safe_a.clone()), d2((0..16).map(|k| k % 3).collect())],
    ));
    out
}

// ---- generated kernels as host C++ -----------------------------------------------------------

/// Defines the CUDA built-ins a generated kernel uses for a host C++ compiler: one block of
/// one thread, so the grid-stride loop visits every row in order.
const HOST_CUDA: &str = r#"#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#define __device__
#define __forceinline__ inline
#define __global__
#define __restrict__ __restrict
#define __launch_bounds__(x)
struct Dim3 { unsigned x; };
static Dim3 gridDim{1}, blockDim{1}, blockIdx{0}, threadIdx{0};
static inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) { auto o = *p; if (v > *p) *p = v; return o; }
static inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) { auto o = *p; if (v < *p) *p = v; return o; }
static inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long c, unsigned long long v) { auto o = *p; if (o == c) *p = v; return o; }
static inline long long __double_as_longlong(double d) { long long x; memcpy(&x, &d, 8); return x; }
static inline double __longlong_as_double(long long x) { double d; memcpy(&d, &x, 8); return d; }
static inline double __ll2double_rn(long long x) { return (double)x; }
static inline double __ull2double_rn(unsigned long long x) { return (double)x; }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) { return (unsigned long long)(((unsigned __int128)a * b) >> 64); }
static inline double __ddiv_rn(double a, double b) { volatile double r = a / b; return r; }
static inline double __dadd_rn(double a, double b) { volatile double r = a + b; return r; }
static inline double __dsub_rn(double a, double b) { volatile double r = a - b; return r; }
static inline double __dmul_rn(double a, double b) { volatile double r = a * b; return r; }
using std::trunc; using std::round; using std::isfinite; using std::fabs; using std::scalbn;
static std::vector<char> rd(const char* f) { FILE* fp = fopen(f, "rb"); std::vector<char> v; if (!fp) return v; char b[65536]; size_t k; while ((k = fread(b, 1, sizeof b, fp)) > 0) v.insert(v.end(), b, b + k); fclose(fp); return v; }
static void wr(const char* f, const void* p, size_t n) { FILE* fp = fopen(f, "wb"); if (fp) { fwrite(p, 1, n, fp); fclose(fp); } }
"#;

fn le_bytes(c: &HostCol) -> Vec<u8> {
    match c {
        HostCol::U8(v) => v.clone(),
        HostCol::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostCol::U32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostCol::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostCol::U64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostCol::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostCol::I128(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

fn from_le_bytes(e: Elem, b: &[u8]) -> HostCol {
    fn words<const N: usize>(b: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
        b.chunks_exact(N).map(|c| c.try_into().expect("chunk of N bytes"))
    }
    match e {
        Elem::U8 => HostCol::U8(b.to_vec()),
        Elem::I32 => HostCol::I32(words(b).map(i32::from_le_bytes).collect()),
        Elem::U32 => HostCol::U32(words(b).map(u32::from_le_bytes).collect()),
        Elem::I64 => HostCol::I64(words(b).map(i64::from_le_bytes).collect()),
        Elem::U64 => HostCol::U64(words(b).map(u64::from_le_bytes).collect()),
        Elem::F64 => HostCol::F64(words(b).map(f64::from_le_bytes).collect()),
        Elem::I128 => HostCol::I128(words(b).map(i128::from_le_bytes).collect()),
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
        Elem::I128 => "__int128",
    }
}

/// The generated kernels of random and targeted expressions, compiled as host C++ (g++)
/// and run on one thread, give fox-cpu's columns and errors: a check of the generated
/// code's arithmetic, rounding, dates, short-circuits and error rows that needs no GPU.
/// Reported as ignored without `g++`.
fn generated_kernels_on_the_host_match_cpu() {
    let ctx = dict();
    let dir = std::env::temp_dir().join(format!("fox-eval-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let mut cases: Vec<(KExpr, Vec<HostCol>, usize)> = Vec::new();
    let mut g = Gen::new(77);
    for k in 0..240 {
        let e = if k % 3 == 0 { g.boolean(3) } else { g.any(3) };
        let n = [1, 7, 300, 2000][k % 4];
        cases.push((e, g.args(n), COLS.len()));
    }
    let x = d2(vec![25, -25, 24, -24, 226, -226, 0, 15, -15, 5, -5, i64::MIN, i64::MAX]);
    let y = d2(vec![3, 7, -3, 3, -9, 1, 2, -2, 8, -8, 1, -1, 3]);
    let mut extra = Vec::new();
    for (sa, sb, r) in [
        (2, 2, 4),
        (2, 2, 0),
        (0, 18, 18),
        (18, 18, 0),
        (18, 0, 18),
        (4, 2, 1),
        (0, 0, 18),
    ] {
        for op in [ArithOp::Mul, ArithOp::Div] {
            let e = arith(
                op,
                col(0, Type::Decimal(sa)),
                col(1, Type::Decimal(sb)),
                Type::Decimal(r),
            );
            extra.push((e, vec![x.clone(), y.clone()]));
        }
    }
    for (from, to) in [(2, 1), (2, 0), (0, 18), (18, 0), (19, 0), (20, 0)] {
        extra.push((cast(col(0, Type::Decimal(from)), Type::Decimal(to)), vec![x.clone()]));
        extra.push((
            round(col(0, Type::Decimal(from)), 1, Type::Decimal(from.max(1))),
            vec![x.clone()],
        ));
    }
    let days: Vec<i32> = (-800_000..800_000).step_by(7).chain([i32::MIN, i32::MAX]).collect();
    for f in [ScalarFn::Year, ScalarFn::Month, ScalarFn::Day] {
        extra.push((
            call(f, vec![col(0, Type::Date)], Type::Int32),
            vec![HostCol::I32(days.clone())],
        ));
    }
    extra.push((
        call(ScalarFn::Year, vec![col(0, Type::Date)], Type::Bool),
        vec![HostCol::I32(vec![-719_528, 0])],
    ));
    extra.extend(wide_cases());
    extra.extend(souffle_cases());
    for (e, mut a) in extra {
        let k = a.len();
        a.extend(tables());
        cases.push((e, a, k));
    }
    // Random expressions with 38-digit decimals.
    let mut gw = Gen::new_wide(78);
    for k in 0..200 {
        let e = if k % 3 == 0 { gw.boolean(3) } else { gw.any(3) };
        let n = [1, 7, 300, 2000][k % 4];
        cases.push((e, gw.args(n), gw.n_cols()));
    }
    // One C++ program per core, compiled in parallel: program p holds the cases k with
    // k % parts == p, each kernel in a namespace of its own; argument k runs case k.
    let parts = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
    let mut srcs: Vec<String> = vec![String::from(HOST_CUDA); parts];
    let mut mains: Vec<String> = vec![
        String::from(
            "int main(int argc, char** argv) {\n  const int which = argc > 1 ? atoi(argv[1]) : -1;\n  char f[4096];\n",
        );
        parts
    ];
    let path = |name: String| dir.join(name).to_string_lossy().into_owned();
    let mut gens = Vec::new();
    for (k, (e, args, n_cols)) in cases.iter().enumerate() {
        let elems: Vec<Elem> = args.iter().map(|c| c.elem()).collect();
        let gs = generate_source(e, *n_cols, &elems, &ctx).unwrap_or_else(|err| panic!("`{}`: {err}", show_kexpr(e)));
        let head = format!("extern \"C\" __global__ void __launch_bounds__(256) {}", gs.kernel);
        assert!(gs.source.contains(&head), "kernel head of `{}`", show_kexpr(e));
        let (src, main) = (&mut srcs[k % parts], &mut mains[k % parts]);
        let _ = writeln!(src, "namespace k{k} {{\n{}\n}}", gs.source.replace(&head, "void kern"));
        let mut params = Vec::new();
        let _ = writeln!(main, "  if (which == {k}) {{");
        for (j, a) in args.iter().enumerate() {
            std::fs::write(path(format!("c{k}_{j}.bin")), le_bytes(a)).expect("write input");
            let _ = writeln!(
                main,
                "    snprintf(f, sizeof f, \"%s\", \"{}\"); auto v{j} = rd(f);",
                path(format!("c{k}_{j}.bin"))
            );
            params.push(format!("(const {}*)v{j}.data()", c_type(a.elem())));
        }
        for a in &args[*n_cols..] {
            params.push(format!("{}ull", a.len()));
        }
        let n = args[0].len();
        let p = params.join(", ");
        let out = c_type(gs.out_elem);
        let _ = writeln!(
            main,
            "    std::vector<char> out({n} * 16 + 16); unsigned long long err[2] = {{0, 0}};\n    k{k}::kern({p}, ({out}*)out.data(), 0ull, {n}ull, err, 0u);\n    if (err[0] != 0 && ((~err[0]) >> 63)) {{ const unsigned long long row = ((~err[0]) << 1 >> 1) >> 24; k{k}::kern({p}, ({out}*)out.data(), row, row + 1, err, 1u); }}\n    snprintf(f, sizeof f, \"%s\", \"{}\"); wr(f, out.data(), {n} * {});\n    snprintf(f, sizeof f, \"%s\", \"{}\"); wr(f, err, 16);\n    return 0;\n  }}",
            path(format!("o{k}.bin")),
            gs.out_elem.size(),
            path(format!("e{k}.bin"))
        );
        gens.push(gs);
    }
    let exes: Vec<String> = (0..parts).map(|p| path(format!("eval{p}"))).collect();
    let compiles: Vec<std::process::Child> = (0..parts)
        .map(|p| {
            mains[p].push_str("  return 1;\n}\n");
            srcs[p].push_str(&mains[p]);
            let cpp = path(format!("eval{p}.cpp"));
            std::fs::write(&cpp, &srcs[p]).expect("write C++");
            std::process::Command::new("g++")
                .args(["-O1", "-ffp-contract=off", "-w", "-o", &exes[p], &cpp])
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("run g++")
        })
        .collect();
    for (p, child) in compiles.into_iter().enumerate() {
        let out = child.wait_with_output().expect("wait for g++");
        assert!(
            out.status.success(),
            "g++ failed on eval{p}.cpp:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for (k, ((e, args, n_cols), gs)) in cases.iter().zip(&gens).enumerate() {
        let st = std::process::Command::new(&exes[k % parts])
            .arg(k.to_string())
            .status()
            .expect("run");
        assert!(st.success(), "case {k} `{}` did not run", show_kexpr(e));
        let words = std::fs::read(path(format!("e{k}.bin"))).expect("error word");
        let w0 = u64::from_le_bytes(words[0..8].try_into().expect("8 bytes"));
        let w1 = u64::from_le_bytes(words[8..16].try_into().expect("8 bytes"));
        let got = if w0 == 0 {
            let bytes = std::fs::read(path(format!("o{k}.bin"))).expect("output");
            Ok(from_le_bytes(gs.out_elem, &bytes))
        } else {
            let key = !w0;
            let row = (key << 1 >> 1) >> 24;
            if key >> 63 == 0 {
                let id = (key & ((1 << 24) - 1)) as usize;
                Err(format!("kernel Eval: {} (row {row})", gs.msgs[id - 1]))
            } else {
                Err(format!(
                    "kernel Eval: `{}` = {} does not fit {} (row {row})",
                    gs.what, w1 as i64, gs.ty
                ))
            }
        };
        let want = cpu_eval(e, *n_cols, args, &ctx);
        match (&want, &got) {
            (Ok(w), Ok(g)) => {
                if let Some((i, count)) = first_mismatch(w, g) {
                    panic!(
                        "case {k} `{}`: {count} rows differ, first {i}: cpu {}, host C++ {}",
                        show_kexpr(e),
                        cell(w, i),
                        cell(g, i)
                    );
                }
            }
            (Err(w), Err(g)) => assert_eq!(g, w, "case {k} `{}`", show_kexpr(e)),
            _ => panic!("case {k} `{}`: cpu {want:?}, host C++ {got:?}", show_kexpr(e)),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

tests![
    Gpu random_expressions_match_cpu,
    Gpu random_boolean_expressions_match_cpu,
    Gpu random_wide_expressions_match_cpu,
    Gpu random_wide_boolean_expressions_match_cpu,
    Gpu wide_decimals_match_cpu,
    Gpu souffle_operators_match_cpu,
    Gpu decimal_rounding_and_scales,
    Gpu float_semantics,
    Gpu overflow_and_division_by_zero,
    Gpu dates,
    Gpu decimal_and_date_bounds,
    Gpu strings_tables_and_narrowing,
    Gpu argument_errors_and_empty_inputs,
    Gpu large_input,
    Nvrtc generated_kernels_compile_for_sm90,
    Cpu plan_errors_match_cpu,
    Gxx generated_kernels_on_the_host_match_cpu,
];
