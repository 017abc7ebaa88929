//! Every program of `queries/` and `tests/programs/` on the CPU and the GPU backend through
//! `fox_runtime::run`: the outputs, written as CSV, must be byte-identical. Programs whose
//! data is absent must fail the same way on both. Graph queries also run on a generated
//! graph larger than the shipped one. The programs of `tests/programs` run again with
//! every equi-join forced to each algorithm (`--join`).

use fox_cpu::CpuBackend;
use fox_cuda::testing::{gpu, Rng};
use fox_kernel::KernelPlan;
use fox_runtime::{run, write_csv_to, Backend, RunOptions, RunResult, RuntimeError};
use std::io::Write;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The kernel plan of a program with every equi-join's algorithm forced by `join`
/// (`Auto`: chosen by the cost model), or why there is none.
fn plan_forced(path: &Path, join: fox_phys::JoinChoice) -> Result<KernelPlan, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (ast, diags) = fox_syntax::parse(&text);
    if diags.iter().any(|d| d.is_error()) {
        return Err(format!("{}: syntax errors", path.display()));
    }
    let (core, _) = fox_sema::check(&ast);
    let core = core.ok_or_else(|| format!("{}: type errors", path.display()))?;
    let ra = fox_ra::plan(&core).map_err(|e| format!("{}: {e}", path.display()))?;
    let opts = fox_phys::Options {
        join,
        ..Default::default()
    };
    let phys =
        fox_phys::run(ra, &fox_phys::Statistics::none(), &opts).map_err(|e| format!("{}: {e}", path.display()))?;
    fox_kernel::lower_physical(&phys).map_err(|e| format!("{}: {e}", path.display()))
}

fn programs(dir: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .expect("the directory is readable")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "logic"))
        .collect();
    out.sort();
    out
}

/// Each output as (name, CSV bytes).
fn csv(result: &RunResult) -> Vec<(String, Vec<u8>)> {
    result
        .outputs
        .iter()
        .map(|t| {
            let mut bytes = Vec::new();
            write_csv_to(t, &mut bytes).expect("writing to memory");
            (t.name.clone(), bytes)
        })
        .collect()
}

fn first_diff_line(a: &[u8], b: &[u8]) -> String {
    let (a, b) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {}: cpu {x:?}, gpu {y:?}", i + 1);
        }
    }
    format!(
        "{} lines on the cpu, {} on the gpu",
        a.lines().count(),
        b.lines().count()
    )
}

/// Runs `program` on both backends with `data`; returns whether it produced outputs.
fn check(gpu: &mut dyn Backend, program: &Path, data: &Path) -> bool {
    check_with(gpu, program, data, None)
}

/// [`check`] with a memory limit for the runs (multi-way joins then expand in rounds).
fn check_with(gpu: &mut dyn Backend, program: &Path, data: &Path, memory_limit: Option<u64>) -> bool {
    check_forced(gpu, program, data, memory_limit, fox_phys::JoinChoice::Auto)
}

/// [`check_with`] with every equi-join's algorithm forced by `join`.
fn check_forced(
    gpu: &mut dyn Backend,
    program: &Path,
    data: &Path,
    memory_limit: Option<u64>,
    join: fox_phys::JoinChoice,
) -> bool {
    let plan = match plan_forced(program, join) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    let opts = RunOptions {
        data_dir: Some(data.to_path_buf()),
        timing: false,
        memory_limit,
        ..Default::default()
    };
    let want = run(&plan, &mut CpuBackend::new(), &opts);
    let got = run(&plan, gpu, &opts);
    let what = format!(
        "{} with data {}{}, --join {}",
        program.display(),
        data.display(),
        memory_limit.map_or(String::new(), |m| format!(", memory limit {m}")),
        join.name()
    );
    match (want, got) {
        (Ok(w), Ok(g)) => {
            let (w, g) = (csv(&w), csv(&g));
            let names = |v: &[(String, Vec<u8>)]| v.iter().map(|o| o.0.clone()).collect::<Vec<_>>();
            assert_eq!(names(&w), names(&g), "{what}: different outputs");
            for ((name, a), (_, b)) in w.iter().zip(&g) {
                assert!(a == b, "{what}: output {name} differs: {}", first_diff_line(a, b));
            }
            true
        }
        (Err(RuntimeError::Data { msg: w }), Err(RuntimeError::Data { msg: g })) => {
            assert_eq!(w, g, "{what}: different data errors");
            let _ = writeln!(std::io::stderr(), "{what}: no data on either backend ({w})");
            false
        }
        (Err(w), Err(g)) => {
            let _ = writeln!(std::io::stderr(), "{what}: fails on both: cpu {w}; gpu {g}");
            false
        }
        // The CPU backend keeps every operation within the limit; the GPU's limit sizes
        // only the multi-way joins' rounds, so it may finish where the CPU refuses.
        (Err(w), Ok(_)) if memory_limit.is_some() && w.to_string().contains("out of memory") => {
            let _ = writeln!(
                std::io::stderr(),
                "{what}: the cpu needs more memory than the limit ({w})"
            );
            false
        }
        (Ok(_), Err(g)) => panic!("{what}: the cpu succeeds, the gpu fails: {g}"),
        (Err(w), Ok(_)) => panic!("{what}: the cpu fails ({w}), the gpu succeeds"),
    }
}

fn test_programs_match_the_cpu() {
    let mut gpu = gpu("test_programs_match_the_cpu");
    let data = root().join("tests/programs/data");
    let mut ran = 0;
    for p in programs("tests/programs") {
        ran += usize::from(check(&mut gpu, &p, &data));
    }
    assert!(ran > 0, "no program of tests/programs produced outputs");
}

fn queries_match_the_cpu() {
    let mut gpu = gpu("queries_match_the_cpu");
    let shipped = root().join("queries/data");
    let generated = std::env::temp_dir().join(format!("fox-cuda-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&generated).expect("a temporary directory");
    // A random graph of 400 nodes and 6000 edges, and a random forest for parent/2.
    let mut rng = Rng::new(11);
    let mut edges = String::new();
    for _ in 0..6000 {
        edges.push_str(&format!("{},{}\n", rng.below(400), rng.below(400)));
    }
    std::fs::write(generated.join("edge.csv"), edges).expect("write edge.csv");
    let mut parents = String::new();
    for child in 1..3000u64 {
        parents.push_str(&format!("{},{child}\n", rng.below(child)));
    }
    std::fs::write(generated.join("parent.csv"), parents).expect("write parent.csv");
    let mut ran = 0;
    let mut limited = 0;
    for p in programs("queries") {
        ran += usize::from(check(&mut gpu, &p, &shipped));
        ran += usize::from(check(&mut gpu, &p, &generated));
        // Little memory: the levels of the multi-way joins run in many rounds.
        limited += usize::from(check_with(&mut gpu, &p, &generated, Some(400 << 10)));
    }
    let _ = std::fs::remove_dir_all(&generated);
    assert!(ran > 0, "no query produced outputs");
    assert!(limited > 0, "no query produced outputs within the memory limit");
}

fn clique_counts_on_rmat_graphs_match_the_cpu() {
    let mut gpu = gpu("clique_counts_on_rmat_graphs_match_the_cpu");
    use fox_runtime::graph::{generate, GraphSpec};
    let dir = std::env::temp_dir().join(format!("fox-cuda-rmat-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    // Skewed degrees: with vertices numbered by degree the triangles' last level is
    // intersected through tables of both ways; without, hubs' ranges exceed a table.
    for spec in ["rmat:14", "rmat:14 --degree-order", "rmat:12:48:3 --degree-order"] {
        let (base, ordered) = match spec.split_once(' ') {
            Some((b, _)) => (b, true),
            None => (spec, false),
        };
        let g = GraphSpec::parse(base).expect("a graph spec").with_degree_order(ordered);
        let (x, y) = generate(&g, &|_| {}).expect("the graph");
        let mut edges = String::new();
        for (a, b) in x.iter().zip(&y) {
            edges.push_str(&format!("{a},{b}\n"));
        }
        std::fs::write(dir.join("edge.csv"), edges).expect("write edge.csv");
        for q in ["queries/triangle_count.logic", "queries/clique4_count.logic"] {
            assert!(check(&mut gpu, &root().join(q), &dir), "{q} on {spec}: no output");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The programs of `tests/programs` with every equi-join forced to each algorithm (hash,
/// index nested-loop and nested-loop joins in whole plans, not only kernel by kernel).
fn forced_joins_match_the_cpu() {
    let mut gpu = gpu("forced_joins_match_the_cpu");
    let data = root().join("tests/programs/data");
    for join in fox_phys::JoinChoice::ALL {
        let mut ran = 0;
        for p in programs("tests/programs") {
            ran += usize::from(check_forced(&mut gpu, &p, &data, None, join));
        }
        assert!(ran > 0, "--join {}: no program produced outputs", join.name());
    }
}

/// Joins without keys filtered per round (a product, a float sum, a string inequality)
/// and inequality joins probed in rounds of probing rows, without a limit (one round) and
/// under a small one (many rounds).
fn cross_products_and_inequality_joins_in_rounds_match_the_cpu() {
    let mut gpu = gpu("cross_products_and_inequality_joins_in_rounds_match_the_cpu");
    let dir = std::env::temp_dir().join(format!("fox-cuda-cross-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let mut rng = Rng::new(5);
    for f in ["a.csv", "b.csv"] {
        let mut rows = String::new();
        for i in 0..1500 {
            let s = rng.below(1_000_000);
            let e = s + 1 + rng.below(400);
            let g = rng.below(16) as f64 / 2.0;
            rows.push_str(&format!("{i},{},{s},{e},{g},s{}\n", rng.below(1000), rng.below(5)));
        }
        std::fs::write(dir.join(f), rows).expect("write the input");
    }
    let p = dir.join("q.logic");
    std::fs::write(
        &p,
        "a(x, u, s, e, f, t) -> int32(x), int32(u), int64(s), int64(e), float64(f), string(t).\n\
         b(x, u, s, e, f, t) -> int32(x), int32(u), int64(s), int64(e), float64(f), string(t).\n\
         .input a.\n.input b.\n\
         prod(x, y) <- a(x, u, _, _, _, _), b(y, v, _, _, _, _), u * v > 990000.\n\
         sum(x, y) <- a(x, _, _, _, f, _), b(y, _, _, _, g, _), f + g = 7.0, x < 100.\n\
         diff(x, t1, t2) <- a(x, _, _, _, _, t1), b(_, _, _, _, _, t2), t1 != t2, x < 4.\n\
         none() <- a(_, u, _, _, _, _), b(_, v, _, _, _, _), u * v > 2000000.\n\
         ov(x, y) <- a(x, _, s1, e1, _, _), b(y, _, s2, e2, _, _), s1 < e2, s2 < e1.\n\
         .output prod.\n.output sum.\n.output diff.\n.output none.\n.output ov.\n",
    )
    .expect("write the program");
    assert!(check(&mut gpu, &p, &dir), "no output");
    assert!(
        check_with(&mut gpu, &p, &dir, Some(1 << 20)),
        "no output within the limit"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Transitive closure and same generation under a limit far below their unions of full
/// relations, which run in pieces cut along their merge path: the outputs are the CPU's
/// without a limit, and the GPU ran its unions in pieces.
fn recursive_unions_in_pieces_match_the_cpu() {
    let mut gpu = gpu("recursive_unions_in_pieces_match_the_cpu");
    let dir = std::env::temp_dir().join(format!("fox-cuda-unions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let mut rng = Rng::new(17);
    // 1000 edges among 500 nodes (160,000 paths), a random forest of 3000 nodes.
    let mut edges = String::new();
    for _ in 0..1000 {
        edges.push_str(&format!("{},{}\n", rng.below(500), rng.below(500)));
    }
    std::fs::write(dir.join("edge.csv"), edges).expect("write edge.csv");
    let mut parents = String::new();
    for child in 1..3000u64 {
        parents.push_str(&format!("{},{child}\n", rng.below(child)));
    }
    std::fs::write(dir.join("parent.csv"), parents).expect("write parent.csv");
    for q in ["transitive_closure", "same_generation"] {
        let path = root().join(format!("queries/{q}.logic"));
        let plan = plan_forced(&path, fox_phys::JoinChoice::Auto).unwrap_or_else(|e| panic!("{e}"));
        let opts = |memory_limit| RunOptions {
            data_dir: Some(dir.clone()),
            memory_limit,
            ..Default::default()
        };
        let want = run(&plan, &mut CpuBackend::new(), &opts(None)).unwrap_or_else(|e| panic!("{q} on the cpu: {e}"));
        let got = run(&plan, &mut gpu, &opts(Some(1 << 20))).unwrap_or_else(|e| panic!("{q} on the gpu: {e}"));
        let (w, g) = (csv(&want), csv(&got));
        assert_eq!(w.len(), g.len(), "{q}: different outputs");
        for ((name, a), (_, b)) in w.iter().zip(&g) {
            assert!(a == b, "{q}: output {name} differs: {}", first_diff_line(a, b));
        }
        let pieces: u64 = got
            .stats
            .pieces
            .iter()
            .filter(|p| p.kernel == "merge_union")
            .map(|p| p.pieces)
            .sum();
        assert!(
            pieces > 2,
            "{q}: the unions ran in {pieces} pieces: {:?}",
            got.stats.pieces
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A plan edited by hand: `c` = [3, 1, 2], its sort permutation `p`, then `n` gathers of
/// `c` by `p` with `shift` (the first of them out of range when `shift` is 1 or more),
/// a slice of the last and its output.
fn gathers_plan(n: usize, shift: u32) -> KernelPlan {
    use fox_kernel::{Block, BlockId, BufId, BufVar, Elem, Instr, Kernel, Terminator, KERNEL_PLAN_VERSION};
    use fox_sema::core::{Column, Type, Value};
    let var = |name: &str, elem, ty| BufVar {
        name: name.into(),
        elem,
        ty,
    };
    let launch = |kernel, args: &[u32], outs: &[u32]| Instr::Launch {
        kernel,
        args: args.iter().map(|&b| BufId(b)).collect(),
        outs: outs.iter().map(|&b| BufId(b)).collect(),
        origin: None,
    };
    let mut buffers = vec![
        var("c", Elem::I32, Some(Type::Int32)),
        var("p", Elem::U32, None),
        var("s", Elem::I32, Some(Type::Int32)),
    ];
    let mut instrs = vec![
        launch(
            Kernel::Const {
                types: vec![Type::Int32],
                rows: [3, 1, 2].iter().map(|&v| vec![Value::Int32(v)]).collect(),
            },
            &[],
            &[0],
        ),
        launch(
            Kernel::SortPerm {
                desc: vec![false],
                by_rank: vec![false],
            },
            &[0],
            &[1],
        ),
    ];
    for k in 0..n {
        buffers.push(var(&format!("g{k}"), Elem::I32, Some(Type::Int32)));
        let shift = if k == 0 { shift } else { 0 };
        instrs.push(launch(Kernel::Gather { shift }, &[1, 0], &[3 + k as u32]));
    }
    instrs.push(launch(Kernel::Slice { start: 0, len: 2 }, &[2 + n as u32], &[2]));
    instrs.push(Instr::Output {
        name: "o".into(),
        columns: vec![Column {
            name: "x".into(),
            ty: Type::Int32,
        }],
        cols: vec![BufId(2)],
        order: vec![],
        limit: None,
    });
    KernelPlan {
        version: KERNEL_PLAN_VERSION,
        buffers,
        inputs: vec![],
        blocks: vec![Block {
            label: "main".into(),
            local: false,
            instrs,
            term: Terminator::Halt,
        }],
        entry: BlockId(0),
        planned_peak_buffers: 3 + n,
        sources: Vec::new(),
        observed: Vec::new(),
    }
}

/// The GPU reads the checks of what a kernel's contract says of its arguments (here a
/// gather's indices) at its next wait, not after every launch: a failure found later is
/// still reported as the CPU reports it, at the launch that failed; the backend runs the
/// next plan cleanly; more checking launches than the GPU keeps error words for in one
/// run give the CPU's results.
fn deferred_checks_fail_at_their_launch() {
    let mut gpu = gpu("deferred_checks_fail_at_their_launch");
    for n in [1, 5] {
        let plan = gathers_plan(n, 1);
        let opts = RunOptions::default();
        let want = run(&plan, &mut CpuBackend::new(), &opts).expect_err("the cpu fails");
        let got = run(&plan, &mut gpu, &opts).expect_err("the gpu fails");
        let (want, got) = (want.to_string(), got.to_string());
        assert!(want.contains("instruction 2 (gather)"), "{want}");
        assert_eq!(got, want, "{n} gathers");
    }
    for n in [1, 300, 700] {
        let plan = gathers_plan(n, 0);
        let opts = RunOptions::default();
        let want = run(&plan, &mut CpuBackend::new(), &opts).expect("the cpu runs it");
        let got = run(&plan, &mut gpu, &opts).unwrap_or_else(|e| panic!("{n} gathers on the gpu: {e}"));
        assert_eq!(csv(&got), csv(&want), "{n} gathers");
    }
}

tests![
    Gpu deferred_checks_fail_at_their_launch,
    Gpu cross_products_and_inequality_joins_in_rounds_match_the_cpu,
    Gpu recursive_unions_in_pieces_match_the_cpu,
    Gpu forced_joins_match_the_cpu,
    Gpu test_programs_match_the_cpu,
    Gpu queries_match_the_cpu,
    Gpu clique_counts_on_rmat_graphs_match_the_cpu,
];
