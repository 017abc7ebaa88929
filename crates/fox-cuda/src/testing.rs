//! The harness of the GPU tests: what a test needs beyond the CPU ([`Needs`]), opening
//! the GPU, random columns, running a kernel on a backend ([`run_on`]) and describing the
//! first difference of two outputs ([`first_mismatch`], [`value_at`]). The comparison
//! with the CPU backend itself lives in the tests (`tests/it/main.rs`, `compare`), so
//! that this crate does not depend on fox-cpu.
//!
//! The test executables that hold GPU tests run them through their own harness
//! (`harness = false`), which asks [`Needs::ready`] before each test: a test whose need is
//! missing is reported as ignored with the reason (`ignored (no GPU: …)`), never as
//! passed, and fails instead when the need is required (`FOX_REQUIRE_GPU=1` on the GPU
//! machine requires the GPU and NVRTC, `FOX_REQUIRE_NVRTC=1` in CI requires NVRTC).

use crate::CudaBackend;
use fox_kernel::{Elem, Kernel};
use fox_runtime::{Backend, DevBuf, HostCol, LaunchCtx};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Whether `FOX_REQUIRE_GPU=1` is set (on the GPU machine).
pub fn require_gpu() -> bool {
    std::env::var("FOX_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// Whether `FOX_REQUIRE_NVRTC=1` is set (in CI).
pub fn require_nvrtc() -> bool {
    std::env::var("FOX_REQUIRE_NVRTC").is_ok_and(|v| v == "1")
}

/// What a test needs beyond the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// Nothing: it runs everywhere.
    Cpu,
    /// A usable GPU (driver, NVRTC and a device).
    Gpu,
    /// The NVRTC library (no GPU).
    Nvrtc,
    /// A host C++ compiler, `g++`.
    Gxx,
    /// Two usable GPUs linked by NCCL. Fewer than two GPUs is a missing need even with
    /// `FOX_REQUIRE_GPU=1` (most GPU machines have one); with two or more and
    /// `FOX_REQUIRE_GPU=1`, a missing NCCL fails the test.
    Gpus2,
}

/// Whether a test can run here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ready {
    Yes,
    /// What it needs is missing; the reason, shown with the test reported as ignored.
    Missing(String),
    /// What it needs is missing but required here: the test fails with this message.
    Required(String),
}

/// Why the GPU cannot be opened, found once per process.
fn gpu_error() -> Option<&'static str> {
    static PROBE: OnceLock<Option<String>> = OnceLock::new();
    PROBE
        .get_or_init(|| CudaBackend::new().err().map(|e| e.to_string()))
        .as_deref()
}

impl Needs {
    /// Whether a test with this need can run on this machine. The reason of a missing need
    /// starts with `no GPU`, `no NVRTC` or `no g++`.
    pub fn ready(self) -> Ready {
        match self {
            Needs::Cpu => Ready::Yes,
            Needs::Gpu => match gpu_error() {
                None => Ready::Yes,
                Some(e) if require_gpu() => {
                    Ready::Required(format!("FOX_REQUIRE_GPU=1 but the GPU cannot be opened: {e}"))
                }
                Some(e) => Ready::Missing(format!("no GPU: {e}")),
            },
            Needs::Nvrtc if crate::compile::nvrtc_available() => Ready::Yes,
            // A usable GPU includes NVRTC, so requiring the GPU requires NVRTC too.
            Needs::Nvrtc if require_nvrtc() || require_gpu() => Ready::Required(format!(
                "FOX_REQUIRE_NVRTC=1 or FOX_REQUIRE_GPU=1 but {}",
                crate::compile::NVRTC_MISSING
            )),
            Needs::Nvrtc => Ready::Missing(format!("no NVRTC: {}", crate::compile::NVRTC_MISSING)),
            Needs::Gpus2 => match (gpu_error(), crate::device_count()) {
                (Some(e), _) if require_gpu() => {
                    Ready::Required(format!("FOX_REQUIRE_GPU=1 but the GPU cannot be opened: {e}"))
                }
                (Some(e), _) => Ready::Missing(format!("no GPU: {e}")),
                (None, Ok(n)) if n >= 2 => match crate::nccl::version() {
                    Ok(_) => Ready::Yes,
                    Err(e) if require_gpu() => Ready::Required(format!("FOX_REQUIRE_GPU=1 and {n} GPUs but {e}")),
                    Err(e) => Ready::Missing(format!("no GPU link: {e}")),
                },
                (None, _) => Ready::Missing("no GPU: one GPU, two needed".to_string()),
            },
            Needs::Gxx => match std::process::Command::new("g++").arg("--version").output() {
                Ok(o) if o.status.success() => Ready::Yes,
                _ => Ready::Missing("no g++".to_string()),
            },
        }
    }
}

/// The GPU backend of a test of [`Needs::Gpu`] (run only where [`Needs::ready`] found a
/// GPU). Panics, naming the test, when it cannot be opened.
pub fn gpu(test: &str) -> CudaBackend {
    CudaBackend::new().unwrap_or_else(|e| panic!("{test}: the GPU cannot be opened: {e}"))
}

/// Checks how the test executable `exe`, whose harness runs its tests through
/// [`Needs::ready`], reports its GPU test `name` (which should be quick): without a GPU,
/// ignored with the reason `no GPU: …` and, with `FOX_REQUIRE_GPU=1`, failed with the
/// reason; with a GPU, passed both times. Panics with the executable's output otherwise.
pub fn check_gpu_test_reporting(exe: &std::path::Path, name: &str) {
    let gpu = Needs::Gpu.ready() == Ready::Yes;
    for require in [false, true] {
        let mut cmd = std::process::Command::new(exe);
        cmd.args(["--exact", name, "--test-threads", "1"]);
        if require {
            cmd.env("FOX_REQUIRE_GPU", "1");
        } else {
            cmd.env_remove("FOX_REQUIRE_GPU");
        }
        let o = cmd.output().expect("the test executable runs");
        let text = format!(
            "FOX_REQUIRE_GPU={}:\n{}{}",
            if require { "1" } else { "(unset)" },
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        if gpu {
            assert!(o.status.success(), "{text}");
            assert!(text.contains(&format!("test {name} ... ok")), "{text}");
            assert!(text.contains("1 passed; 0 failed; 0 ignored"), "{text}");
        } else if !require {
            assert!(o.status.success(), "{text}");
            assert!(text.contains(&format!("test {name} ... ignored (no GPU: ")), "{text}");
            assert!(text.contains("0 passed; 0 failed; 1 ignored"), "{text}");
        } else {
            assert_eq!(o.status.code(), Some(101), "{text}");
            assert!(text.contains(&format!("test {name} ... FAILED")), "{text}");
            assert!(
                text.contains("FOX_REQUIRE_GPU=1 but the GPU cannot be opened: "),
                "{text}"
            );
            assert!(text.contains("0 passed; 1 failed; 0 ignored"), "{text}");
        }
    }
}

/// Sizes every kernel is tested at: empty, one row, around block sizes.
pub const SIZES: &[usize] = &[0, 1, 2, 1000, 1023, 1024, 1025, 4097];

/// The large case of each kernel family (10^7 + a few, not a multiple of any block).
pub const LARGE: usize = 10_000_019;

/// SplitMix64: a small deterministic generator.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
        }
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// How the values of a random column are spread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dist {
    /// Over the element type's whole range (floats: finite values of every magnitude,
    /// with some NaN, ±0.0 and ±infinity mixed in).
    Uniform,
    /// Uniform over `0..k` (many duplicates for small k; signed types also get negative
    /// values `-k/2..k/2`).
    Range(u64),
    /// Every row the same value.
    AllEqual,
    /// 90% of the rows one value, the rest uniform over `0..1000`.
    Skewed,
}

impl Dist {
    /// The distributions every kernel is tested with.
    pub const ALL: [Dist; 5] = [
        Dist::Uniform,
        Dist::Range(16),
        Dist::Range(1000),
        Dist::AllEqual,
        Dist::Skewed,
    ];
}

/// Every element type.
pub const ELEMS: [Elem; 7] = Elem::ALL;

/// The largest magnitude of a 38-digit decimal.
pub const MAX_WIDE: i128 = fox_sema::core::MAX_WIDE_DECIMAL;

/// A random i128 of [`Dist::Uniform`]: every bit pattern, values of up to 38 digits, values
/// near ±(10^38 - 1) and near the bounds of i64, and small ones.
pub fn random_i128(rng: &mut Rng) -> i128 {
    let near = |rng: &mut Rng| rng.below(2001) as i128 - 1000;
    let sign = |rng: &mut Rng, x: i128| if rng.chance(50) { -x } else { x };
    match rng.below(6) {
        0 => ((u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64())) as i128,
        1 => {
            let x = MAX_WIDE - rng.below(1000) as i128;
            sign(rng, x)
        }
        2 => {
            let x = i128::from(i64::MAX) + near(rng);
            sign(rng, x)
        }
        3 => {
            let u = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
            let m = MAX_WIDE as u128;
            // Uniform over -m ..= m.
            let r = u % (2 * m + 1);
            if r >= m {
                (r - m) as i128
            } else {
                -((m - r) as i128)
            }
        }
        4 => {
            let x = (u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64())) >> (rng.below(120) + 8);
            sign(rng, x as i128)
        }
        _ => near(rng),
    }
}

/// The i128 value standing for small value `v` of a distribution: `v * (10^20 + 1)`, so
/// that both 64-bit words vary with `v` and the order is `v`'s.
fn spread_i128(v: i64) -> i128 {
    i128::from(v) * (10i128.pow(20) + 1)
}

/// One random raw value (as i64 bits of the "small" domain, or full-range bits).
fn small_value(rng: &mut Rng, dist: Dist) -> Option<i64> {
    match dist {
        Dist::Uniform => None,
        Dist::Range(k) => Some(rng.below(k.max(1)) as i64),
        Dist::AllEqual => Some(7),
        Dist::Skewed => Some(if rng.chance(90) { 42 } else { rng.below(1000) as i64 }),
    }
}

fn random_f64(rng: &mut Rng) -> f64 {
    match rng.below(20) {
        0 => f64::NAN,
        1 => -0.0,
        2 => 0.0,
        3 => f64::INFINITY,
        4 => f64::NEG_INFINITY,
        5 => -f64::NAN,
        _ => {
            let mant = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            let exp = rng.below(80) as i32 - 40;
            let sign = if rng.chance(50) { -1.0 } else { 1.0 };
            sign * mant * 2f64.powi(exp)
        }
    }
}

/// A random column of `n` values of `elem` spread as `dist`.
pub fn random_col(rng: &mut Rng, elem: Elem, n: usize, dist: Dist) -> HostCol {
    let signed = |rng: &mut Rng, v: i64| -> i64 {
        match dist {
            Dist::Range(k) => v - (k / 2) as i64,
            _ => {
                if rng.chance(10) {
                    -v
                } else {
                    v
                }
            }
        }
    };
    match elem {
        Elem::U8 => HostCol::U8(
            (0..n)
                .map(|_| small_value(rng, dist).map_or(rng.next_u64() as u8, |v| v as u8))
                .collect(),
        ),
        Elem::U32 => HostCol::U32(
            (0..n)
                .map(|_| small_value(rng, dist).map_or(rng.next_u64() as u32, |v| v as u32))
                .collect(),
        ),
        Elem::U64 => HostCol::U64(
            (0..n)
                .map(|_| small_value(rng, dist).map_or(rng.next_u64(), |v| v as u64))
                .collect(),
        ),
        Elem::I32 => HostCol::I32(
            (0..n)
                .map(|_| match small_value(rng, dist) {
                    None => rng.next_u64() as i32,
                    Some(v) => signed(rng, v) as i32,
                })
                .collect(),
        ),
        Elem::I64 => HostCol::I64(
            (0..n)
                .map(|_| match small_value(rng, dist) {
                    None => rng.next_u64() as i64,
                    Some(v) => signed(rng, v),
                })
                .collect(),
        ),
        Elem::F64 => HostCol::F64(
            (0..n)
                .map(|_| match small_value(rng, dist) {
                    None => random_f64(rng),
                    Some(v) => signed(rng, v) as f64 * 0.5,
                })
                .collect(),
        ),
        Elem::I128 => HostCol::I128(
            (0..n)
                .map(|_| match small_value(rng, dist) {
                    None => random_i128(rng),
                    Some(v) => spread_i128(signed(rng, v)),
                })
                .collect(),
        ),
    }
}

/// A U32 column of `n` values in `0..bound`.
pub fn random_index(rng: &mut Rng, n: usize, bound: u64) -> HostCol {
    HostCol::U32((0..n).map(|_| rng.below(bound) as u32).collect())
}

/// The order-preserving image of a float (total order, every NaN last), as fox-cpu
/// orders floats.
pub fn f64_key(x: f64) -> u64 {
    if x.is_nan() {
        u64::MAX
    } else {
        let b = x.to_bits();
        if b >> 63 == 1 {
            !b
        } else {
            b | (1 << 63)
        }
    }
}

/// Compares row `i` of `a` with row `j` of `b` (same element type).
pub fn cmp_at(a: &HostCol, i: usize, b: &HostCol, j: usize) -> Ordering {
    match (a, b) {
        (HostCol::U8(x), HostCol::U8(y)) => x[i].cmp(&y[j]),
        (HostCol::I32(x), HostCol::I32(y)) => x[i].cmp(&y[j]),
        (HostCol::U32(x), HostCol::U32(y)) => x[i].cmp(&y[j]),
        (HostCol::I64(x), HostCol::I64(y)) => x[i].cmp(&y[j]),
        (HostCol::U64(x), HostCol::U64(y)) => x[i].cmp(&y[j]),
        (HostCol::F64(x), HostCol::F64(y)) => f64_key(x[i]).cmp(&f64_key(y[j])),
        (HostCol::I128(x), HostCol::I128(y)) => x[i].cmp(&y[j]),
        _ => a.elem().cmp(&b.elem()),
    }
}

/// Takes rows `idx` of a column.
pub fn take(col: &HostCol, idx: &[usize]) -> HostCol {
    match col {
        HostCol::U8(v) => HostCol::U8(idx.iter().map(|&i| v[i]).collect()),
        HostCol::I32(v) => HostCol::I32(idx.iter().map(|&i| v[i]).collect()),
        HostCol::U32(v) => HostCol::U32(idx.iter().map(|&i| v[i]).collect()),
        HostCol::I64(v) => HostCol::I64(idx.iter().map(|&i| v[i]).collect()),
        HostCol::U64(v) => HostCol::U64(idx.iter().map(|&i| v[i]).collect()),
        HostCol::F64(v) => HostCol::F64(idx.iter().map(|&i| v[i]).collect()),
        HostCol::I128(v) => HostCol::I128(idx.iter().map(|&i| v[i]).collect()),
    }
}

/// The columns' rows sorted lexicographically (floats by total order), duplicates
/// removed when `dedup`.
pub fn sort_rows(cols: &[HostCol], dedup: bool) -> Vec<HostCol> {
    let n = cols.first().map_or(0, |c| c.len());
    let cmp = |&i: &usize, &j: &usize| {
        cols.iter()
            .map(|c| cmp_at(c, i, c, j))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal)
    };
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by(cmp);
    if dedup {
        idx.dedup_by(|a, b| cmp(a, b) == Ordering::Equal);
    }
    cols.iter().map(|c| take(c, &idx)).collect()
}

/// A launch context with string constants (none by default).
#[derive(Clone, Debug, Default)]
pub struct Strings(pub HashMap<String, u32>);

impl LaunchCtx for Strings {
    fn string_code(&self, s: &str) -> Option<u32> {
        self.0.get(s).copied()
    }
}

/// A short description of a column: `1025 x I32`.
pub fn describe(col: &HostCol) -> String {
    format!("{} x {:?}", col.len(), col.elem())
}

pub fn value_at(col: &HostCol, i: usize) -> String {
    match col {
        HostCol::U8(v) => v[i].to_string(),
        HostCol::I32(v) => v[i].to_string(),
        HostCol::U32(v) => v[i].to_string(),
        HostCol::I64(v) => v[i].to_string(),
        HostCol::U64(v) => v[i].to_string(),
        HostCol::F64(v) => format!("{:?} (bits {:#018x})", v[i], v[i].to_bits()),
        HostCol::I128(v) => v[i].to_string(),
    }
}

/// The first index where `a` and `b` differ (F64 bitwise, every NaN equal to every NaN),
/// and the number of differing indices; `None` when equal. Columns of different types or
/// lengths differ at index `min(len)`.
pub fn first_mismatch(a: &HostCol, b: &HostCol) -> Option<(usize, usize)> {
    if a.elem() != b.elem() || a.len() != b.len() {
        return Some((a.len().min(b.len()), 1));
    }
    let same = |i: usize| match (a, b) {
        (HostCol::F64(x), HostCol::F64(y)) => x[i].to_bits() == y[i].to_bits() || (x[i].is_nan() && y[i].is_nan()),
        _ => cmp_at(a, i, b, i) == Ordering::Equal,
    };
    let mut first = None;
    let mut count = 0;
    for i in 0..a.len() {
        if !same(i) {
            first.get_or_insert(i);
            count += 1;
        }
    }
    first.map(|f| (f, count))
}

/// Runs `kernel` on `backend` with `args` uploaded, their shape checked first as the
/// runtime checks it (`fox_kernel::check_shape`: what both backends rely on; the types of
/// expressions and aggregates are left to the backends, so that the tests compare them on
/// launches the lowering never makes too); the outputs downloaded, or the error.
pub fn run_on(
    backend: &mut dyn Backend,
    kernel: &Kernel,
    args: &[HostCol],
    ctx: &dyn LaunchCtx,
) -> Result<Vec<HostCol>, String> {
    let shapes: Vec<(Elem, usize)> = args.iter().map(|a| (a.elem(), a.len())).collect();
    fox_kernel::check_shape(kernel, &shapes).map_err(|m| format!("kernel {}: {m}", kernel.name()))?;
    let before = backend.mem().in_use;
    let mut bufs: Vec<DevBuf> = Vec::with_capacity(args.len());
    let mut res = Ok(Vec::new());
    for a in args {
        match backend.upload(a.clone()) {
            Ok(b) => bufs.push(b),
            Err(e) => {
                res = Err(format!("upload: {e}"));
                break;
            }
        }
    }
    if res.is_ok() {
        let refs: Vec<&DevBuf> = bufs.iter().collect();
        res = match backend.launch(kernel, &refs, ctx) {
            Ok(outs) => {
                let host: Result<Vec<HostCol>, String> = outs
                    .iter()
                    .map(|o| backend.download(o).map_err(|e| format!("download: {e}")))
                    .collect();
                for o in outs {
                    backend.free(o);
                }
                host
            }
            Err(e) => Err(e.0),
        };
    }
    for b in bufs {
        backend.free(b);
    }
    let after = backend.mem().in_use;
    if after != before {
        return Err(format!(
            "{}: {} bytes in use after the launch and frees, {before} before (a leak)",
            backend.name(),
            after
        ));
    }
    res
}

/// The key words of row `i` of `cols` as the kernels compare and hash them
/// (kernels/common.cuh `okey`): signed integers with the sign bit flipped, floats by
/// [`f64_key`], an i128 as its high word (signed) then its low word.
pub fn key_words(cols: &[HostCol], i: usize) -> Vec<u64> {
    let mut w = Vec::with_capacity(cols.len());
    for c in cols {
        match c {
            HostCol::U8(x) => w.push(u64::from(x[i])),
            HostCol::I32(x) => w.push(u64::from(x[i] as u32 ^ 0x8000_0000)),
            HostCol::U32(x) => w.push(u64::from(x[i])),
            HostCol::I64(x) => w.push(x[i] as u64 ^ (1 << 63)),
            HostCol::U64(x) => w.push(x[i]),
            HostCol::F64(x) => w.push(f64_key(x[i])),
            HostCol::I128(x) => {
                let v = x[i] as u128;
                w.push(((v >> 64) as u64) ^ (1 << 63));
                w.push(v as u64);
            }
        }
    }
    w
}

/// The row hash of key words (kernels/join.cu `row_hash`, fox-cpu's `row_hash`).
pub fn hash_words(words: &[u64]) -> u64 {
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15;
    for &w in words {
        let x = (h ^ w).wrapping_mul(0xff51_afd7_ed55_8ccd);
        h = x ^ (x >> 32);
    }
    h ^ (h >> 29)
}

/// A model of the GPU's radix-partitioned hash table (layout in kernels/join.cu): what
/// `HashBuild` makes of a sorted build side beyond the partitioning threshold, built
/// sequentially. Its header, directory and the runs of each sub-table are exactly the
/// GPU's; where a run lands in its sub-table depends on the order of insertion, which on
/// the GPU is any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionedTable {
    pub pbits: u32,
    /// Key words per run.
    pub k: usize,
    /// Build rows.
    pub nb: u64,
    /// The first entry of each sub-table, and the entries in all (`parts + 1` words).
    pub dir: Vec<u64>,
    /// Per slot: empty, or a run's start, end and key words.
    pub slots: Vec<Option<(u32, u32, Vec<u64>)>>,
}

impl PartitionedTable {
    /// The table over the sorted rows of `build` whose probes keep sub-tables in
    /// `sub_bytes` of shared memory.
    pub fn build(build: &[HostCol], sub_bytes: u32) -> PartitionedTable {
        let nb = build.first().map_or(0, |c| c.len());
        let k = build.iter().map(|c| if c.elem() == Elem::I128 { 2 } else { 1 }).sum();
        let mut runs: Vec<(u32, u32, Vec<u64>)> = Vec::new();
        for i in 0..nb {
            let w = key_words(build, i);
            match runs.last_mut() {
                Some(r) if r.2 == w => r.1 = i as u32 + 1,
                _ => runs.push((i as u32, i as u32 + 1, w)),
            }
        }
        let pbits = crate::k_join::partition_bits(runs.len() as u64, k, sub_bytes);
        let part = |h: u64| if pbits == 0 { 0 } else { (h >> (64 - pbits)) as usize };
        let mut counts = vec![0u64; 1 << pbits];
        for r in &runs {
            counts[part(hash_words(&r.2))] += 1;
        }
        let mut dir = Vec::with_capacity(counts.len() + 1);
        let mut e = 0u64;
        for &c in &counts {
            dir.push(e);
            e += if c == 0 { 0 } else { (2 * c).next_power_of_two() };
        }
        dir.push(e);
        let mut slots = vec![None; e as usize];
        for r in runs {
            let h = hash_words(&r.2);
            let p = part(h);
            let (e0, cap) = (dir[p], dir[p + 1] - dir[p]);
            let mut s = h & (cap - 1);
            while slots[(e0 + s) as usize].is_some() {
                s = (s + 1) & (cap - 1);
            }
            slots[(e0 + s) as usize] = Some(r);
        }
        PartitionedTable {
            pbits,
            k,
            nb: nb as u64,
            dir,
            slots,
        }
    }

    /// The table's words as `HashBuild` lays them out in its U32 buffer.
    pub fn to_words(&self) -> Vec<u32> {
        let mut w: Vec<u64> = vec![
            crate::k_join::HP_MAGIC,
            u64::from(self.pbits) | (self.k as u64) << 8,
            self.nb,
        ];
        w.push(self.slots.len() as u64);
        w.extend(&self.dir);
        for s in &self.slots {
            match s {
                Some((a, b, key)) => {
                    w.push(u64::from(*a) | u64::from(*b) << 32);
                    w.extend(key);
                }
                None => w.extend(std::iter::repeat_n(0, 1 + self.k)),
            }
        }
        if w.len().is_power_of_two() {
            w.push(0);
        }
        assert_eq!(
            Some(2 * w.len()),
            crate::k_join::partitioned_len(self.pbits, self.slots.len() as u64, self.k)
        );
        w.iter().flat_map(|&x| [x as u32, (x >> 32) as u32]).collect()
    }

    /// Reads a table from its words; `Err` says what does not follow the layout.
    pub fn from_words(words: &[u32]) -> Result<PartitionedTable, String> {
        if words.len() % 2 != 0 || words.len() < 12 {
            return Err(format!("{} words", words.len()));
        }
        let w: Vec<u64> = words
            .chunks(2)
            .map(|p| u64::from(p[0]) | u64::from(p[1]) << 32)
            .collect();
        if w[0] != crate::k_join::HP_MAGIC {
            return Err(format!("magic {:#x}", w[0]));
        }
        let (pbits, k, nb, e) = ((w[1] & 0xff) as u32, (w[1] >> 8) as usize, w[2], w[3] as usize);
        let parts = 1usize << pbits;
        let head = crate::k_join::HP_HEAD;
        let need = head + parts + 1 + e * (1 + k);
        if w.len() != need + usize::from(need.is_power_of_two()) {
            return Err(format!("{} u64 words, the header says {need}", w.len()));
        }
        let dir = w[head..head + parts + 1].to_vec();
        let body = &w[head + parts + 1..need];
        let slots = body
            .chunks(1 + k)
            .map(|s| (s[0] != 0).then(|| (s[0] as u32, (s[0] >> 32) as u32, s[1..].to_vec())))
            .collect();
        Ok(PartitionedTable {
            pbits,
            k,
            nb,
            dir,
            slots,
        })
    }

    /// The runs of sub-table `p`, sorted (as a set, independent of their slots).
    pub fn runs_of(&self, p: usize) -> Vec<(u32, u32, Vec<u64>)> {
        let mut r: Vec<_> = self.slots[self.dir[p] as usize..self.dir[p + 1] as usize]
            .iter()
            .flatten()
            .cloned()
            .collect();
        r.sort();
        r
    }

    /// Whether every run is in its partition's sub-table and reached from its hash by
    /// linear probing without crossing an empty slot.
    pub fn runs_are_reachable(&self) -> bool {
        (0..self.dir.len() - 1).all(|p| {
            let (e0, cap) = (self.dir[p], self.dir[p + 1] - self.dir[p]);
            (0..cap).all(|s| match &self.slots[(e0 + s) as usize] {
                None => true,
                Some((_, _, key)) => {
                    let h = hash_words(key);
                    let part = if self.pbits == 0 {
                        0
                    } else {
                        (h >> (64 - self.pbits)) as usize
                    };
                    let mut t = h & (cap - 1);
                    part == p
                        && loop {
                            if t == s {
                                break true;
                            }
                            if self.slots[(e0 + t) as usize].is_none() {
                                break false;
                            }
                            t = (t + 1) & (cap - 1);
                        }
                }
            })
        })
    }

    /// Probing row `i` of `probe` as kernels/join.cu `hp_probe` does: its run of build
    /// rows, `(0, 0)` for none.
    pub fn probe(&self, probe: &[HostCol], i: usize) -> (u32, u32) {
        let w = key_words(probe, i);
        let h = hash_words(&w);
        let p = if self.pbits == 0 {
            0
        } else {
            (h >> (64 - self.pbits)) as usize
        };
        let (e0, cap) = (self.dir[p], self.dir[p + 1] - self.dir[p]);
        if cap == 0 {
            return (0, 0);
        }
        let mut s = h & (cap - 1);
        for _ in 0..cap {
            match &self.slots[(e0 + s) as usize] {
                None => break,
                Some((a, b, key)) if *key == w => return (*a, *b),
                Some(_) => s = (s + 1) & (cap - 1),
            }
        }
        (0, 0)
    }
}

/// Holds `backend`'s stream from the host: work enqueued on it after this call (an
/// exchange's transfers included) waits until the returned sender sends or is dropped.
/// A device that does not come to an exchange, without a special kernel.
pub fn hold_stream(backend: &CudaBackend) -> Result<std::sync::mpsc::Sender<()>, fox_runtime::BackendError> {
    backend.hold_stream()
}
