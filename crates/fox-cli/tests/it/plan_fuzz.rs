//! No kernel plan makes `foxrun` panic. The plans of the repository's programs
//! (`queries/`, `tests/programs/`, `tpch/queries/`) are mutated, seeded and
//! deterministically: in their RON text (a number replaced by an edge value or by another
//! number of the plan, a name or a string by another of the plan) and in their structure
//! (instructions removed, duplicated, moved or swapped, arguments, outputs and terminators
//! rewired). Each mutant goes through `from_ron` (parsing and `validate`) and, when it is
//! accepted, runs on the CPU backend on a few rows of generated data. Any outcome but a
//! panic is fine: a mutant is an error or a result.
//!
//! A run is bounded: the backend is wrapped in one that refuses work beyond a budget of
//! launches and of rows (so a mutated loop that never ends, or a join that would grow
//! without bound, becomes an error), and the run's memory limit is small. A mutant with a
//! cycle of blocks that launch nothing (only moves and frees) could spin without reaching
//! the backend, so it is checked but not run.
//!
//! `FOX_PLAN_FUZZ_CASES` (mutants per program, default 24) and `FOX_PLAN_FUZZ_SEED` run
//! more or other cases.

use crate::common::repo as root;
use fox_kernel::{BlockId, BufId, DictOp, Instr, KExpr, KExprKind, Kernel, KernelPlan, Terminator};
use fox_runtime::{Backend, BackendError, DevBuf, HostCol, LaunchCtx, MemStats, RunOptions};
use fox_sema::core::{AggFunc, Type, Value};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// SplitMix64: a small deterministic generator, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> Option<&'a T> {
        if xs.is_empty() {
            None
        } else {
            Some(&xs[self.below(xs.len())])
        }
    }
}

fn programs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in ["queries", "tests/programs", "tpch/queries"] {
        for e in std::fs::read_dir(root().join(d)).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "logic") {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

fn compile(path: &Path) -> KernelPlan {
    let source = fox_cli::Source::read(path).unwrap();
    let core = fox_cli::check(&source)
        .core
        .unwrap_or_else(|| panic!("{} does not check", path.display()));
    // With observations, so that the mutations reach them too.
    let options = fox_kernel::LowerOptions {
        observe_rows: true,
        ..Default::default()
    };
    fox_cli::plan_kernels(&fox_ra::plan(&core).unwrap(), &fox_phys::Statistics::none(), &options).unwrap()
}

/// Four rows for each input of `plan` under `dir`: column `c` of row `r` takes the
/// `(r + c) % 4`-th value of its type, so every column is a permutation (keys hold) and
/// two integer columns form a cycle (recursion runs a few rounds).
fn write_tiny_data(plan: &KernelPlan, dir: &Path) {
    const STRINGS: [&str; 4] = ["AIR", "BRASS", "PROMO x", "y%"];
    const DATES: [&str; 4] = ["1994-01-01", "1995-03-15", "1996-12-31", "1998-09-02"];
    for input in &plan.inputs {
        let mut text = String::new();
        for r in 0..4 {
            let fields: Vec<String> = input
                .columns
                .iter()
                .enumerate()
                .map(|(c, col)| {
                    let k = (r + c) % 4;
                    match col.ty {
                        Type::Int32 | Type::Int64 | Type::Decimal(_) | Type::WideDecimal(_) => k.to_string(),
                        Type::Float64 => format!("{k}.5"),
                        Type::String => STRINGS[k].to_string(),
                        Type::Date => DATES[k].to_string(),
                        Type::Bool => (k % 2 == 0).to_string(),
                    }
                })
                .collect();
            text.push_str(&fields.join(&input.sep));
            text.push('\n');
        }
        let path = dir.join(&input.file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(path, text).unwrap();
    }
}

/// Refuses work beyond a budget, so that a mutant's run ends and stays small.
struct Bounded<B> {
    inner: B,
    calls: usize,
}

/// Launches and uploads one run may make.
const MAX_CALLS: usize = 3000;
/// Rows a launch may read in all, and outputs an expansion or a join may write.
const MAX_ROWS: usize = 1 << 16;

impl<B: Backend> Bounded<B> {
    fn spend(&mut self) -> Result<(), BackendError> {
        self.calls += 1;
        if self.calls > MAX_CALLS {
            return Err(BackendError("the test's budget of launches is spent".into()));
        }
        Ok(())
    }

    /// The value of a one-row count buffer.
    fn count(&mut self, buf: &DevBuf) -> Result<u64, BackendError> {
        match self.inner.download(buf)? {
            HostCol::U64(v) if v.len() == 1 => Ok(v[0]),
            _ => Ok(0),
        }
    }
}

impl<B: Backend> Backend for Bounded<B> {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn upload(&mut self, col: HostCol) -> Result<DevBuf, BackendError> {
        self.spend()?;
        if col.len() > MAX_ROWS {
            return Err(BackendError("the test's budget of rows is spent".into()));
        }
        self.inner.upload(col)
    }
    fn download(&mut self, buf: &DevBuf) -> Result<HostCol, BackendError> {
        self.inner.download(buf)
    }
    fn launch(&mut self, kernel: &Kernel, args: &[&DevBuf], ctx: &dyn LaunchCtx) -> Result<Vec<DevBuf>, BackendError> {
        self.spend()?;
        if args.iter().map(|a| a.len).sum::<usize>() > MAX_ROWS {
            return Err(BackendError("the test's budget of rows is spent".into()));
        }
        // The kernels whose output length is a value rather than a length: the `total`
        // of a join's writes and of an expansion.
        let total = match kernel {
            Kernel::JoinWrite { .. } => args.last(),
            Kernel::Expand => args.get(2),
            _ => None,
        };
        if let Some(t) = total {
            if self.count(t)? > MAX_ROWS as u64 {
                return Err(BackendError("the test's budget of rows is spent".into()));
            }
        }
        self.inner.launch(kernel, args, ctx)
    }
    fn free(&mut self, buf: DevBuf) {
        self.inner.free(buf)
    }
    fn sync(&mut self) -> Result<(), BackendError> {
        self.inner.sync()
    }
    fn mem(&self) -> MemStats {
        self.inner.mem()
    }
    fn memory_capacity(&self) -> Option<usize> {
        Some(64 << 20)
    }
    fn reset_peak(&mut self) {
        self.inner.reset_peak()
    }
}

/// Whether the blocks that launch nothing hold a cycle reachable from the entry (a run
/// could go round it without ever reaching the backend).
fn has_launch_free_cycle(plan: &KernelPlan) -> bool {
    let nb = plan.blocks.len();
    let quiet: Vec<bool> = plan
        .blocks
        .iter()
        .map(|b| !b.instrs.iter().any(|i| matches!(i, Instr::Launch { .. })))
        .collect();
    // Depth-first search for a back edge among the quiet blocks: 0 new, 1 open, 2 done.
    let mut state = vec![0u8; nb];
    for start in 0..nb {
        if !quiet[start] || state[start] != 0 {
            continue;
        }
        let mut stack = vec![(start, 0usize)];
        state[start] = 1;
        while let Some(&mut (b, ref mut k)) = stack.last_mut() {
            let succ = plan.blocks[b].term.successors();
            if *k < succ.len() {
                let s = succ[*k].0 as usize;
                *k += 1;
                if s < nb && quiet[s] {
                    match state[s] {
                        0 => {
                            state[s] = 1;
                            stack.push((s, 0));
                        }
                        1 => return true,
                        _ => {}
                    }
                }
            } else {
                state[b] = 2;
                stack.pop();
            }
        }
    }
    false
}

/// The tokens of a RON text: numbers, names, strings, and everything else one character
/// at a time.
#[derive(Clone, Copy, PartialEq)]
enum Tok {
    Num,
    Name,
    Str,
    Other,
}

fn tokenize(text: &str) -> Vec<(Tok, String)> {
    let cs: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < cs.len() {
        let start = i;
        let kind = if cs[i].is_ascii_digit() || (cs[i] == '-' && cs.get(i + 1).is_some_and(char::is_ascii_digit)) {
            i += 1;
            while i < cs.len() && (cs[i].is_ascii_alphanumeric() || cs[i] == '.' || cs[i] == '_') {
                i += 1;
            }
            Tok::Num
        } else if cs[i].is_alphabetic() || cs[i] == '_' {
            while i < cs.len() && (cs[i].is_alphanumeric() || cs[i] == '_') {
                i += 1;
            }
            Tok::Name
        } else if cs[i] == '"' {
            i += 1;
            while i < cs.len() && cs[i] != '"' {
                if cs[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i = (i + 1).min(cs.len());
            Tok::Str
        } else {
            i += 1;
            Tok::Other
        };
        out.push((kind, cs[start..i].iter().collect()));
    }
    out
}

const EDGE_NUMBERS: [&str; 24] = [
    "0",
    "1",
    "2",
    "3",
    "7",
    "18",
    "19",
    "38",
    "39",
    "255",
    "256",
    "65536",
    "2147483647",
    "2147483648",
    "4294967295",
    "4294967296",
    "9007199254740993",
    "9223372036854775807",
    "9223372036854775808",
    "9223372036854775810",
    "18446744073709551615",
    "-1",
    "-2147483648",
    "-9223372036854775808",
];

/// A plan's tokens, with the positions of each kind and what follows each name.
struct Tokens {
    toks: Vec<(Tok, String)>,
    nums: Vec<usize>,
    strs: Vec<usize>,
    /// Names that are not field names (not followed by `:`), grouped by the character that
    /// follows them.
    names: std::collections::BTreeMap<String, Vec<usize>>,
}

impl Tokens {
    fn new(text: &str) -> Tokens {
        let toks = tokenize(text);
        let of = |k: Tok| -> Vec<usize> { (0..toks.len()).filter(|&i| toks[i].0 == k).collect() };
        let (nums, strs) = (of(Tok::Num), of(Tok::Str));
        let mut names: std::collections::BTreeMap<String, Vec<usize>> = Default::default();
        for i in of(Tok::Name) {
            let next = toks[i + 1..]
                .iter()
                .find(|t| !t.1.trim().is_empty())
                .map(|t| t.1.clone())
                .unwrap_or_default();
            if next != ":" {
                names.entry(next).or_default().push(i);
            }
        }
        Tokens {
            toks,
            nums,
            strs,
            names,
        }
    }
}

/// One mutation of the RON text: numbers, names and strings.
fn mutate_text(t: &Tokens, rng: &mut Rng) -> String {
    let toks = &t.toks;
    let mut m: Vec<String> = toks.iter().map(|t| t.1.clone()).collect();
    let groups: Vec<&Vec<usize>> = t.names.values().collect();
    for _ in 0..1 + rng.below(3) {
        match rng.below(6) {
            0..=2 => {
                let Some(&i) = rng.pick(&t.nums) else { continue };
                m[i] = match rng.below(3) {
                    0 => rng.pick(&EDGE_NUMBERS).unwrap().to_string(),
                    1 => toks[*rng.pick(&t.nums).unwrap()].1.clone(),
                    _ => match toks[i].1.parse::<i128>() {
                        Ok(v) => (v + [-1, 1, 2][rng.below(3)]).to_string(),
                        Err(_) => "0".into(),
                    },
                };
            }
            3 | 4 => {
                // A variant or a type for another followed by the same character
                // (`JoinCount(` for `MergeUnion(`, `Int32,` for `Date,`).
                let Some(group) = rng.pick(&groups) else { continue };
                let (i, j) = (*rng.pick(group).unwrap(), *rng.pick(group).unwrap());
                m[i] = toks[j].1.clone();
            }
            _ => {
                let Some(&i) = rng.pick(&t.strs) else { continue };
                m[i] = match rng.below(3) {
                    0 => "\"\"".into(),
                    1 => "\"../x\"".into(),
                    _ => toks[*rng.pick(&t.strs).unwrap()].1.clone(),
                };
            }
        }
    }
    m.concat()
}

/// One mutation of the plan's structure.
fn mutate_plan(plan: &KernelPlan, rng: &mut Rng) -> KernelPlan {
    let mut p = plan.clone();
    let nb = p.blocks.len();
    let nbuf = p.buffers.len().max(1) as u32;
    for _ in 0..1 + rng.below(2) {
        let b = rng.below(nb);
        let n = p.blocks[b].instrs.len();
        match rng.below(9) {
            0 if n > 0 => {
                p.blocks[b].instrs.remove(rng.below(n));
            }
            1 if n > 0 => {
                let i = p.blocks[b].instrs[rng.below(n)].clone();
                let at = rng.below(n + 1);
                p.blocks[b].instrs.insert(at, i);
            }
            2 if n > 1 => {
                let (x, y) = (rng.below(n), rng.below(n));
                p.blocks[b].instrs.swap(x, y);
            }
            3 if n > 0 => {
                let i = p.blocks[b].instrs.remove(rng.below(n));
                let to = rng.below(nb);
                let at = rng.below(p.blocks[to].instrs.len() + 1);
                p.blocks[to].instrs.insert(at, i);
            }
            4 | 5 if n > 0 => {
                let k = rng.below(n);
                let buf = BufId(rng.below(nbuf as usize) as u32);
                match &mut p.blocks[b].instrs[k] {
                    Instr::Launch { args, outs, .. } => {
                        let v = if rng.below(2) == 0 && !args.is_empty() {
                            args
                        } else {
                            outs
                        };
                        if !v.is_empty() {
                            let j = rng.below(v.len());
                            v[j] = buf;
                        } else {
                            v.push(buf);
                        }
                    }
                    Instr::Move { dst, src } => *(if rng.below(2) == 0 { dst } else { src }) = buf,
                    Instr::Free { buf: f } => *f = buf,
                    Instr::Output { cols, .. }
                    | Instr::Assert { args: cols, .. }
                    | Instr::Observe { bufs: cols, .. } => {
                        if !cols.is_empty() {
                            let j = rng.below(cols.len());
                            cols[j] = buf;
                        }
                    }
                }
            }
            6 if n > 0 => {
                // An argument list loses or gains a buffer.
                if let Instr::Launch { args, .. } = &mut p.blocks[b].instrs[rng.below(n)] {
                    if rng.below(2) == 0 && !args.is_empty() {
                        args.pop();
                    } else {
                        args.push(BufId(rng.below(nbuf as usize) as u32));
                    }
                }
            }
            7 => {
                let t = BlockId(rng.below(nb) as u32);
                p.blocks[b].term = match (&p.blocks[b].term, rng.below(3)) {
                    (Terminator::LoopIf { nonempty, body, exit }, 0) => Terminator::LoopIf {
                        nonempty: nonempty.clone(),
                        body: *body,
                        exit: if rng.below(2) == 0 { t } else { *exit },
                    },
                    (Terminator::LoopIf { nonempty, exit, .. }, 1) => Terminator::LoopIf {
                        nonempty: nonempty.clone(),
                        body: t,
                        exit: *exit,
                    },
                    (Terminator::Halt, _) => Terminator::Jump(t),
                    _ => Terminator::Halt,
                };
            }
            _ => {
                // A loop test reads another buffer.
                if let Terminator::LoopIf { nonempty, .. } = &mut p.blocks[b].term {
                    if !nonempty.is_empty() {
                        let j = rng.below(nonempty.len());
                        nonempty[j] = BufId(rng.below(nbuf as usize) as u32);
                    }
                }
            }
        }
    }
    p
}

/// A mutant: RON text to read, or a plan to validate.
enum Mutant {
    Text(String),
    Plan(KernelPlan),
}

/// An edge value in place of `v`, mostly of the same kind.
fn edge_value(v: &Value, rng: &mut Rng) -> Value {
    let pick = |rng: &mut Rng, xs: &[Value]| xs[rng.below(xs.len())].clone();
    match v {
        Value::Int32(_) => pick(
            rng,
            &[
                Value::Int32(i32::MIN),
                Value::Int32(i32::MAX),
                Value::Int32(0),
                Value::Int32(-1),
            ],
        ),
        Value::Int64(_) => pick(
            rng,
            &[
                Value::Int64(i64::MIN),
                Value::Int64(i64::MAX),
                Value::Int64(0),
                Value::Int32(7),
            ],
        ),
        Value::Decimal { scale, .. } => {
            let unscaled = [
                i128::from(i64::MAX),
                i128::from(i64::MIN),
                10i128.pow(18),
                -(10i128.pow(38)),
                i128::MAX,
                0,
            ];
            let scale = [*scale, 0, 18, 19, 38, 255][rng.below(6)];
            Value::Decimal {
                unscaled: unscaled[rng.below(unscaled.len())],
                scale,
            }
        }
        Value::Float64(_) => pick(
            rng,
            &[
                Value::Float64(f64::NAN),
                Value::Float64(f64::INFINITY),
                Value::Float64(-0.0),
                Value::Float64(1e308),
            ],
        ),
        Value::String(_) => pick(
            rng,
            &[
                Value::String(String::new()),
                Value::String("%".into()),
                Value::String("\u{10FFFF}é".into()),
            ],
        ),
        Value::Date(_) => pick(
            rng,
            &[
                Value::Date(i32::MIN),
                Value::Date(i32::MAX),
                Value::Date(-719_163),
                Value::Date(2_932_897),
            ],
        ),
        Value::Bool(b) => Value::Bool(!b),
    }
}

/// The constants of an expression, to be changed in place.
fn expr_consts<'e>(e: &'e mut KExpr, out: &mut Vec<&'e mut KExprKind>) {
    let kind = &mut e.kind;
    match kind {
        KExprKind::Const(_) | KExprKind::In(..) => out.push(kind),
        KExprKind::Col(_) => {}
        KExprKind::Table(_, x) | KExprKind::Cast(x) | KExprKind::Neg(x) | KExprKind::Not(x) => expr_consts(x, out),
        KExprKind::Arith(_, a, b) | KExprKind::Cmp(_, a, b) => {
            expr_consts(a, out);
            expr_consts(b, out);
        }
        KExprKind::And(xs) | KExprKind::Or(xs) | KExprKind::Call(_, xs) => {
            xs.iter_mut().for_each(|x| expr_consts(x, out))
        }
    }
}

/// A count changed by a little or to an edge.
fn edge_count(n: usize, rng: &mut Rng) -> usize {
    [n.wrapping_sub(1), n + 1, 0, 1, usize::MAX, n * 2][rng.below(6)]
}

/// One change of a kernel's parameters (counts, constants, offsets, limits), which
/// mostly keeps the plan valid and tests the kernels and the interpreter with them.
fn mutate_params(plan: &KernelPlan, rng: &mut Rng) -> KernelPlan {
    let mut p = plan.clone();
    let sites: Vec<(usize, usize)> = p
        .blocks
        .iter()
        .enumerate()
        .flat_map(|(b, blk)| {
            blk.instrs
                .iter()
                .enumerate()
                .filter(|(_, i)| matches!(i, Instr::Launch { .. } | Instr::Output { .. }))
                .map(move |(k, _)| (b, k))
        })
        .collect();
    let Some(&(b, k)) = rng.pick(&sites) else { return p };
    let u64s = [0u64, 1, 2, u64::from(u32::MAX), u64::MAX / 2, u64::MAX];
    match &mut p.blocks[b].instrs[k] {
        Instr::Output {
            order, limit, columns, ..
        } => match rng.below(3) {
            0 => *limit = [None, Some(0), Some(1), Some(u64::MAX)][rng.below(4)],
            1 => order.push((rng.below(columns.len() + 1), rng.below(2) == 0)),
            _ => order.reverse(),
        },
        Instr::Launch { kernel, .. } => match kernel {
            Kernel::Gather { shift } => *shift = [0, 1, u32::MAX, u32::MAX - 1][rng.below(4)],
            Kernel::Slice { start, len } => {
                *start = u64s[rng.below(u64s.len())];
                *len = u64s[rng.below(u64s.len())];
            }
            Kernel::Window { row_bytes, max_rows } => {
                *row_bytes = u64s[rng.below(u64s.len())];
                if max_rows.is_some() {
                    *max_rows = Some(u64s[rng.below(u64s.len())]);
                }
            }
            Kernel::Const { rows, types } => {
                if let Some(row) = rows.first().cloned() {
                    let mut row = row;
                    if let Some(v) = row.first_mut() {
                        *v = edge_value(v, rng);
                    }
                    rows.push(row);
                } else if rng.below(2) == 0 {
                    types.pop();
                }
            }
            Kernel::Eval { expr, n_cols } => {
                let mut consts = Vec::new();
                expr_consts(expr, &mut consts);
                match consts.into_iter().nth(rng.below(4)) {
                    Some(KExprKind::Const(v)) => *v = edge_value(v, rng),
                    Some(KExprKind::In(_, vs)) => vs.push(vs.first().map_or(Value::Int32(0), |v| edge_value(v, rng))),
                    _ => *n_cols = edge_count(*n_cols, rng),
                }
            }
            Kernel::FusedReduce {
                nkeys, n_cols, filter, ..
            } => match rng.below(3) {
                0 => *nkeys = edge_count(*nkeys, rng),
                1 => *n_cols = edge_count(*n_cols, rng),
                _ => *filter = None,
            },
            Kernel::ReduceByKey { nkeys, aggs } => {
                if rng.below(2) == 0 || aggs.is_empty() {
                    *nkeys = edge_count(*nkeys, rng);
                } else {
                    let j = rng.below(aggs.len());
                    aggs[j].func =
                        [AggFunc::Sum, AggFunc::Count, AggFunc::Min, AggFunc::Max, AggFunc::Avg][rng.below(5)];
                }
            }
            Kernel::JoinCount { nkeys }
            | Kernel::JoinWrite { nkeys }
            | Kernel::MatchFlags { nkeys, .. }
            | Kernel::HashBuild { nkeys }
            | Kernel::HashProbe { nkeys }
            | Kernel::HashMatch { nkeys, .. }
            | Kernel::NestedLoopCount { nkeys }
            | Kernel::NestedLoopWrite { nkeys }
            | Kernel::NestedLoopMatch { nkeys, .. } => *nkeys = edge_count(*nkeys, rng),
            Kernel::MergeUnion { width, disjoint } => {
                if rng.below(2) == 0 {
                    *disjoint = !*disjoint;
                } else {
                    *width = edge_count(*width, rng);
                }
            }
            Kernel::Concat { parts, width } => std::mem::swap(parts, width),
            Kernel::SortPerm { desc, by_rank } => {
                if let Some(d) = desc.first_mut() {
                    *d = !*d;
                }
                if rng.below(2) == 0 {
                    by_rank.iter_mut().for_each(|r| *r = !*r);
                }
            }
            Kernel::TrieBuild { arity } => *arity = edge_count(*arity, rng),
            Kernel::IntersectCount { ways } | Kernel::MinRange { ways } => *ways = edge_count(*ways, rng),
            Kernel::LoadInput { input, whole, hash } => {
                *input = edge_count(*input, rng);
                *whole = rng.below(2) == 0;
                if rng.below(3) == 0 {
                    hash.push(edge_count(0, rng));
                }
            }
            Kernel::DictTable { op } => {
                *op = [
                    DictOp::Like("%_%%_".into()),
                    DictOp::Like(String::new()),
                    DictOp::Prefix("\u{10FFFF}".into()),
                    DictOp::Rank,
                    DictOp::Strlen,
                ][rng.below(5)]
                .clone()
            }
            _ => {}
        },
        _ => {}
    }
    p
}

/// Reads or validates a mutant and, when it is accepted, runs it; `Err` describes a panic.
fn try_mutant(mutant: &Mutant, data: &Path) -> Result<&'static str, String> {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let plan = match mutant {
            Mutant::Text(text) => fox_kernel::from_ron(text),
            Mutant::Plan(plan) => fox_kernel::validate(plan).map(|_| plan.clone()),
        };
        let Ok(plan) = plan else {
            return "refused";
        };
        if has_launch_free_cycle(&plan) {
            return "not run";
        }
        let mut backend = Bounded {
            inner: fox_cpu::CpuBackend::new(),
            calls: 0,
        };
        let opts = RunOptions {
            data_dir: Some(data.to_path_buf()),
            memory_limit: Some(64 << 20),
            ..RunOptions::default()
        };
        match fox_runtime::run(&plan, &mut backend, &opts) {
            Ok(r) => {
                for t in &r.outputs {
                    let _ = fox_runtime::format_table(t);
                }
                "ran"
            }
            Err(_) => "failed",
        }
    }));
    outcome.map_err(|e| {
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    })
}

/// Mutates the plan of one program `cases` times; the panics found.
fn fuzz_program(path: &Path, data: &Path, cases: usize, seed: u64, tally: &mut Vec<&'static str>) -> Vec<String> {
    let plan = compile(path);
    std::fs::create_dir_all(data).unwrap();
    write_tiny_data(&plan, data);
    let text = fox_kernel::to_ron(&plan);
    // The plan itself runs.
    assert_eq!(
        try_mutant(&Mutant::Text(text.clone()), data),
        Ok("ran"),
        "{} does not run on its tiny data",
        path.display()
    );
    let toks = Tokens::new(&text);
    let mut rng = Rng(seed);
    let mut panics = Vec::new();
    for case in 0..cases {
        let mutant = match case % 3 {
            0 => Mutant::Text(mutate_text(&toks, &mut rng)),
            1 => Mutant::Plan(mutate_plan(&plan, &mut rng)),
            _ => Mutant::Plan(mutate_params(&plan, &mut rng)),
        };
        match try_mutant(&mutant, data) {
            Ok(what) => tally.push(what),
            Err(msg) => {
                let file = data.join(format!("panic-{case}.ron"));
                let text = match &mutant {
                    Mutant::Text(t) => t.clone(),
                    Mutant::Plan(p) => fox_kernel::to_ron(p),
                };
                let _ = std::fs::write(&file, text);
                panics.push(format!(
                    "{} mutant {case}: {msg} (the plan is kept in {})",
                    path.display(),
                    file.display()
                ));
            }
        }
    }
    panics
}

#[test]
fn mutated_plans_never_panic() {
    let cases: usize = std::env::var("FOX_PLAN_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(36);
    let seed: u64 = std::env::var("FOX_PLAN_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0xF0C5_9A17);
    let base = std::env::temp_dir().join(format!("fox-plan-fuzz-{}", std::process::id()));
    let programs = programs();
    // Two workers, each program with its own generator, so the cases do not depend on
    // which worker takes which program.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<(Vec<String>, Vec<&'static str>)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let (mut panics, mut tally) = (Vec::new(), Vec::new());
                    loop {
                        let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(path) = programs.get(n) else { break };
                        let seed = seed ^ (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                        panics.extend(fuzz_program(path, &base.join(n.to_string()), cases, seed, &mut tally));
                    }
                    (panics, tally)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let panics: Vec<String> = results.iter().flat_map(|r| r.0.clone()).collect();
    let mut tally: std::collections::BTreeMap<&str, usize> = Default::default();
    for what in results.iter().flat_map(|r| r.1.iter()) {
        *tally.entry(what).or_default() += 1;
    }
    eprintln!("mutated plans: {tally:?}, {} panics", panics.len());
    assert!(panics.is_empty(), "mutated plans panicked:\n{}", panics.join("\n"));
    // Enough mutants get past validation to test the interpreter and the kernels.
    let run = tally.get("ran").copied().unwrap_or(0) + tally.get("failed").copied().unwrap_or(0);
    assert!(run * 4 > cases * programs.len(), "only {run} mutants ran: {tally:?}");
    let _ = std::fs::remove_dir_all(&base);
}
