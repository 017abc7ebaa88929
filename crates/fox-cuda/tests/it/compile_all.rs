//! Every kernel source compiles to PTX for sm_90 with NVRTC (no GPU needed). Reported as
//! ignored when libnvrtc cannot be loaded, and failing under `FOX_REQUIRE_NVRTC=1` (CI).

use fox_cuda::compile::{self, MODULES};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

fn kernels_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../kernels")
}

/// The `.entry` names of a PTX module.
fn entries(ptx: &str) -> Vec<String> {
    ptx.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let rest = l
                .strip_prefix(".visible .entry ")
                .or_else(|| l.strip_prefix(".entry "))?;
            Some(rest.split(['(', ' ']).next().unwrap_or("").to_string())
        })
        .collect()
}

/// The names of the `extern "C" __global__` functions of a CUDA source (skipping
/// `__launch_bounds__(...)` between the return type and the name, and macro bodies).
fn globals(src: &str) -> Vec<String> {
    const MARK: &str = "extern \"C\" __global__";
    let mut out = Vec::new();
    let mut rest = src;
    while let Some(at) = rest.find(MARK) {
        rest = &rest[at + MARK.len()..];
        let mut head = rest;
        let mut name = None;
        while let Some(open) = head.find('(') {
            let word = head[..open]
                .split_whitespace()
                .last()
                .unwrap_or("")
                .trim_start_matches('*');
            if word == "__launch_bounds__" {
                let Some(close) = head[open..].find(')') else { break };
                head = &head[open + close + 1..];
                continue;
            }
            name = Some(word.to_string());
            break;
        }
        // A macro's parameter (`NAME` in a `#define`) is not a kernel name.
        out.extend(name.filter(|n| !n.is_empty() && n.chars().any(|c| c.is_ascii_lowercase())));
    }
    out
}

fn every_kernel_file_is_embedded() {
    let mut on_disk = Vec::new();
    for entry in std::fs::read_dir(kernels_dir()).expect("kernels/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "cu") {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).expect("a kernel source is readable");
            let embedded = compile::module_file(&name)
                .unwrap_or_else(|| panic!("kernels/{name}.cu is not in fox_cuda::compile::MODULES"));
            assert_eq!(embedded, text, "kernels/{name}.cu differs from the embedded copy");
            on_disk.push(name);
        }
    }
    for (name, _) in MODULES {
        assert!(
            on_disk.iter().any(|n| n == name),
            "module {name} has no kernels/{name}.cu"
        );
    }
}

fn every_kernel_module_includes_the_prelude() {
    for (name, text) in MODULES {
        assert_eq!(
            text.matches(fox_cuda::prelude::INCLUDE).count(),
            1,
            "kernels/{name}.cu must include common.cuh once"
        );
        let src = compile::module_source(name).expect("a module");
        assert!(
            !src.contains(fox_cuda::prelude::INCLUDE),
            "kernels/{name}.cu: the include is replaced"
        );
        assert!(
            src.contains(&fox_cuda::prelude::generated()),
            "kernels/{name}.cu: the generated codes"
        );
    }
}

fn every_kernel_module_compiles_for_sm_90() {
    let mut failures = Vec::new();
    for (name, _) in MODULES {
        let src = compile::module_source(name).expect("a module");
        let t0 = Instant::now();
        match compile::compile_ptx(&format!("kernels/{name}.cu"), src, "compute_90") {
            Ok(ptx) => {
                let have = entries(&ptx);
                let want = globals(src);
                assert!(
                    !want.is_empty(),
                    "kernels/{name}.cu declares no extern \"C\" __global__ kernel"
                );
                for k in &want {
                    assert!(
                        have.contains(k),
                        "kernels/{name}.cu: kernel {k} is missing from the PTX ({have:?})"
                    );
                }
                let _ = writeln!(
                    std::io::stderr(),
                    "kernels/{name}.cu: {} kernels, {} bytes of PTX, {:.0} ms",
                    have.len(),
                    ptx.len(),
                    t0.elapsed().as_secs_f64() * 1e3
                );
            }
            Err(e) => failures.push(e.0),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

fn a_compile_error_carries_the_nvrtc_log() {
    let err = compile::compile_ptx(
        "broken",
        "extern \"C\" __global__ void k() { undeclared_name = 1; }",
        "compute_90",
    )
    .expect_err("the source has an error");
    assert!(err.0.contains("undeclared_name"), "{}", err.0);
    assert!(err.0.contains("broken"), "{}", err.0);
}

fn modules_compile_to_cubins_and_are_cached() {
    let src = format!(
        "extern \"C\" __global__ void cubin_probe(unsigned* out) {{ out[threadIdx.x] = {}u; }}",
        std::process::id()
    );
    let bytes = compile::compile_cubin("probe", &src, "sm_90").expect("compiles");
    assert!(bytes.starts_with(b"\x7fELF"), "a CUBIN is an ELF image");
    let err = compile::compile_cubin("broken", "extern \"C\" __global__ void k() { nope = 1; }", "sm_90")
        .expect_err("the source has an error");
    assert!(err.0.contains("nope") && err.0.contains("broken"), "{}", err.0);
    let mut c = compile::Compiler::new("compute_90").expect("NVRTC is present");
    let image = c.image("probe", &src).expect("compiles");
    assert!(matches!(image, compile::Image::Cubin(_)), "{image:?}");
    assert_eq!(c.stats().compiled + c.stats().from_cache, 1);
    // Again: from the process cache, no new compile.
    let again = c.image("probe", &src).expect("compiles");
    assert_eq!(c.stats().compiled + c.stats().from_cache, 1);
    match (image, again) {
        (compile::Image::Cubin(a), compile::Image::Cubin(b)) => assert_eq!(a, b),
        other => panic!("{other:?}"),
    }
    // Every kernel module compiles to a CUBIN: `foxc precompile-kernels` (fox-cli's tests).
}

fn the_disk_cache_is_reused() {
    let src = format!(
        "extern \"C\" __global__ void cache_probe(unsigned* out) {{ out[threadIdx.x] = {}u; }}",
        std::process::id()
    );
    let mut c = compile::Compiler::new("compute_90").expect("NVRTC is present");
    let a = c.ptx("probe", &src).expect("compiles");
    assert!(a.contains("cache_probe"));
    let s = c.stats();
    assert_eq!(s.compiled + s.from_cache, 1);
    // The same source again comes from the process cache: no new compile.
    let b = c.ptx("probe", &src).expect("compiles");
    assert_eq!(a, b);
    assert_eq!(c.stats().compiled + c.stats().from_cache, 1);
    if let Some(dir) = compile::cache_dir() {
        let file = dir.join(format!("{:032x}.ptx", c.key(&src)));
        assert!(file.exists(), "{} was not written", file.display());
    }
}

/// A sample of generated expression kernels (integers, decimals, floats, dates, strings
/// through dictionary tables, short-circuit logic, 38-digit decimals computed in 128
/// bits) compiles for sm_90.
fn generated_expression_kernels_compile_for_sm_90() {
    use fox_kernel::{Elem, KExpr, KExprKind, ScalarFn};
    use fox_sema::core::{ArithOp, CmpOp, Type, Value};
    let e = |kind: KExprKind, ty: Type| KExpr { kind, ty };
    let col = |i: usize, ty: Type| e(KExprKind::Col(i), ty);
    let b = Box::new;
    let dec = Type::Decimal(2);
    let w2 = Type::WideDecimal(2);
    let wide_const = |unscaled: i128| e(KExprKind::Const(Value::Decimal { unscaled, scale: 2 }), w2);
    let samples: Vec<(KExpr, usize, Vec<Elem>)> = vec![
        // 38 digits: a checked product with rounding, a sum with a constant beyond 64 bits,
        // a quotient, a narrowing rescale, a conversion to float and a long in-list.
        (
            e(
                KExprKind::Arith(
                    ArithOp::Add,
                    b(e(
                        KExprKind::Arith(ArithOp::Mul, b(col(0, w2)), b(e(KExprKind::Cast(b(col(1, dec))), w2))),
                        w2,
                    )),
                    b(wide_const(10i128.pow(37))),
                ),
                w2,
            ),
            2,
            vec![Elem::I128, Elem::I64],
        ),
        (
            e(
                KExprKind::Arith(ArithOp::Div, b(col(0, w2)), b(col(1, w2))),
                Type::WideDecimal(6),
            ),
            2,
            vec![Elem::I128, Elem::I128],
        ),
        (
            e(
                KExprKind::Cmp(
                    CmpOp::Gt,
                    b(e(KExprKind::Cast(b(col(0, w2))), Type::Decimal(1))),
                    b(e(
                        KExprKind::Arith(
                            ArithOp::Mul,
                            b(e(KExprKind::Cast(b(col(0, w2))), Type::Float64)),
                            b(e(KExprKind::Const(Value::Float64(0.5)), Type::Float64)),
                        ),
                        Type::Float64,
                    )),
                ),
                Type::Bool,
            ),
            1,
            vec![Elem::I128],
        ),
        (
            e(
                KExprKind::In(
                    b(col(0, w2)),
                    (0..12)
                        .map(|k| Value::Decimal {
                            unscaled: k << 70,
                            scale: 2,
                        })
                        .collect(),
                ),
                Type::Bool,
            ),
            1,
            vec![Elem::I128],
        ),
        (
            e(
                KExprKind::Call(
                    ScalarFn::Round,
                    vec![
                        e(KExprKind::Neg(b(col(0, Type::WideDecimal(4)))), Type::WideDecimal(4)),
                        e(KExprKind::Const(Value::Int32(1)), Type::Int32),
                    ],
                ),
                Type::WideDecimal(3),
            ),
            1,
            vec![Elem::I128],
        ),
        (
            e(
                KExprKind::Cmp(
                    CmpOp::Lt,
                    b(col(0, Type::Int32)),
                    b(e(KExprKind::Const(Value::Int32(5)), Type::Int32)),
                ),
                Type::Bool,
            ),
            1,
            vec![Elem::I32],
        ),
        (
            e(
                KExprKind::Arith(ArithOp::Add, b(col(0, Type::Int64)), b(col(1, Type::Int64))),
                Type::Int64,
            ),
            2,
            vec![Elem::I64, Elem::I64],
        ),
        (
            e(KExprKind::Arith(ArithOp::Div, b(col(0, dec)), b(col(1, dec))), dec),
            2,
            vec![Elem::I64, Elem::I64],
        ),
        (
            e(
                KExprKind::Arith(ArithOp::Mul, b(col(0, dec)), b(col(1, dec))),
                Type::Decimal(4),
            ),
            2,
            vec![Elem::I64, Elem::I64],
        ),
        (
            e(
                KExprKind::Arith(
                    ArithOp::Mul,
                    b(col(0, Type::Float64)),
                    b(e(KExprKind::Const(Value::Float64(1.5)), Type::Float64)),
                ),
                Type::Float64,
            ),
            1,
            vec![Elem::F64],
        ),
        (
            e(KExprKind::Call(ScalarFn::Year, vec![col(0, Type::Date)]), Type::Int32),
            1,
            vec![Elem::I32],
        ),
        (
            e(
                KExprKind::And(vec![
                    e(
                        KExprKind::Cmp(
                            CmpOp::Ne,
                            b(col(0, Type::String)),
                            b(e(KExprKind::Const(Value::String("x".into())), Type::String)),
                        ),
                        Type::Bool,
                    ),
                    e(KExprKind::Table(0, b(col(0, Type::String))), Type::Bool),
                ]),
                Type::Bool,
            ),
            1,
            vec![Elem::U32, Elem::U8],
        ),
    ];
    let ctx = fox_cuda::testing::Strings([("x".to_string(), 3u32)].into_iter().collect());
    let mut failures = Vec::new();
    for (k, (expr, n_cols, elems)) in samples.iter().enumerate() {
        let g = match fox_cuda::codegen::generate_source(expr, *n_cols, elems, &ctx) {
            Ok(g) => g,
            Err(msg) => {
                failures.push(format!("sample {k} ({expr:?}): cannot generate: {msg}"));
                continue;
            }
        };
        match compile::compile_ptx(&format!("generated sample {k}"), &g.source, "compute_90") {
            Ok(ptx) => assert!(
                entries(&ptx).contains(&g.kernel),
                "sample {k}: kernel {} is missing from the PTX",
                g.kernel
            ),
            Err(err) => failures.push(format!("sample {k}: {}\n--- source ---\n{}", err.0, g.source)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Generated fused reductions (a filter, 0 to 2 keys, sums of columns and of decimal
/// products, minima and maxima) compile for sm_90.
fn generated_fused_reductions_compile_for_sm_90() {
    use fox_cuda::codegen::{generate_fused, AccKind, FusedShape};
    use fox_kernel::{Elem, KExpr, KExprKind};
    use fox_sema::core::{ArithOp, CmpOp, Type, Value};
    let e = |kind: KExprKind, ty: Type| KExpr { kind, ty };
    let col = |i: usize, ty: Type| e(KExprKind::Col(i), ty);
    let b = Box::new;
    let dec = Type::Decimal(2);
    let ctx = fox_cuda::testing::Strings::default();
    let mut failures = Vec::new();
    for nkeys in 0..=2usize {
        let v = nkeys;
        let filter = e(
            KExprKind::Cmp(
                CmpOp::Le,
                b(col(v + 2, Type::Date)),
                b(e(KExprKind::Const(Value::Date(10_000)), Type::Date)),
            ),
            Type::Bool,
        );
        let prod = e(
            KExprKind::Arith(ArithOp::Mul, b(col(v, dec)), b(col(v + 1, dec))),
            Type::Decimal(4),
        );
        let price = col(v, dec);
        let day = col(v + 2, Type::Date);
        let accs = [
            (AccKind::Sum, &price),
            (AccKind::Sum, &prod),
            (AccKind::Min, &day),
            (AccKind::Max, &price),
        ];
        let mut elems = vec![Elem::U32; nkeys];
        elems.extend([Elem::I64, Elem::I64, Elem::I32]);
        let shape = FusedShape {
            cap: 256,
            gcap: 4096,
            greg: 4,
            unroll: 2,
            min_blocks: 2,
        };
        for with_filter in [false, true] {
            let f = with_filter.then_some(&filter);
            let g = match generate_fused(f, &accs, nkeys, nkeys + 3, &elems, &shape, &ctx) {
                Ok(g) => g,
                Err(msg) => {
                    failures.push(format!("{nkeys} keys: cannot generate: {msg}"));
                    continue;
                }
            };
            match compile::compile_ptx(&format!("fused sample {nkeys}"), &g.source, "compute_90") {
                Ok(ptx) => assert!(entries(&ptx).contains(&g.kernel), "{nkeys} keys: {} missing", g.kernel),
                Err(err) => failures.push(format!("{nkeys} keys: {}\n--- source ---\n{}", err.0, g.source)),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

tests![
    Cpu every_kernel_file_is_embedded,
    Cpu every_kernel_module_includes_the_prelude,
    Nvrtc every_kernel_module_compiles_for_sm_90,
    Nvrtc a_compile_error_carries_the_nvrtc_log,
    Nvrtc the_disk_cache_is_reused,
    Nvrtc modules_compile_to_cubins_and_are_cached,
    Nvrtc generated_expression_kernels_compile_for_sm_90,
    Nvrtc generated_fused_reductions_compile_for_sm_90,
];
