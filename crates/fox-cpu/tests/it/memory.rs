//! The run's memory limit on the CPU backend: each launch may allocate what the limit
//! leaves beside the buffers in use, and a kernel that needs more stops with the
//! out-of-memory error naming what it was building, not an abort.

use crate::common::Ctx;
use fox_kernel::Kernel;
use fox_runtime::{Backend, BackendError, DevBuf, HostCol};

/// Launches `k` on `args` on a CPU backend whose run may use `limit` bytes beyond the
/// arguments; the outputs' lengths, or the error.
fn launch_limited(k: &Kernel, args: &[HostCol], limit: Option<u64>) -> Result<Vec<usize>, BackendError> {
    let mut cpu = fox_cpu::CpuBackend::new();
    let bufs: Vec<DevBuf> = args.iter().map(|a| cpu.upload(a.clone())).collect::<Result<_, _>>()?;
    cpu.set_memory_limit(limit.map(|l| l + cpu.mem().in_use as u64));
    let refs: Vec<&DevBuf> = bufs.iter().collect();
    let res = cpu.launch(k, &refs, &Ctx::default()).map(|outs| {
        let lens = outs.iter().map(|o| o.len).collect();
        outs.into_iter().for_each(|o| cpu.free(o));
        lens
    });
    bufs.into_iter().for_each(|b| cpu.free(b));
    res
}

#[test]
fn a_cross_product_beyond_the_limit_is_an_error_naming_its_rows() {
    // 2,000 × 2,000 pairs: 16 MB of row indices a side.
    let side = HostCol::I32((0..2000).collect());
    let offsets = HostCol::U64((0..2000).map(|i| i * 2000).collect());
    let total = HostCol::U64(vec![4_000_000]);
    let args = [side.clone(), side, offsets, total];
    let join = Kernel::JoinWrite { nkeys: 0 };
    assert_eq!(launch_limited(&join, &args, None).unwrap(), vec![4_000_000; 2]);
    assert_eq!(
        launch_limited(&join, &args, Some(40 << 20)).unwrap(),
        vec![4_000_000; 2]
    );
    let e = launch_limited(&join, &args, Some(20 << 20)).unwrap_err().0;
    assert_eq!(
        e,
        "kernel JoinWrite: out of memory: cannot allocate 15.3 MiB (4000000 rows of 4 bytes) for the \
         joined rows (right indices): the memory limit (--memory-limit) leaves 4.7 MiB to this operation"
    );
}

#[test]
fn the_buffers_in_use_never_exceed_the_limit() {
    // 80 KB of outputs: within a limit that leaves that much beside the arguments, and
    // refused when it leaves a byte less (a launch may take nothing beyond the limit).
    let side = HostCol::I32((0..100).collect());
    let offsets = HostCol::U64((0..100).map(|i| i * 100).collect());
    let args = [side.clone(), side, offsets, HostCol::U64(vec![10_000])];
    let join = Kernel::JoinWrite { nkeys: 0 };
    assert_eq!(launch_limited(&join, &args, Some(80_000)).unwrap(), vec![10_000; 2]);
    let e = launch_limited(&join, &args, Some(79_999)).unwrap_err().0;
    assert!(e.contains("the memory limit (--memory-limit) leaves "), "{e}");
    let e = launch_limited(&join, &args, Some(0)).unwrap_err().0;
    assert!(e.ends_with("leaves 0 bytes to this operation"), "{e}");
    // An upload beyond the limit is refused too.
    let mut cpu = fox_cpu::CpuBackend::new();
    cpu.set_memory_limit(Some(1000));
    let kept = cpu.upload(HostCol::U64(vec![0; 125])).unwrap();
    let e = cpu.upload(HostCol::U8(vec![0; 2])).unwrap_err().0;
    assert_eq!(
        e,
        "out of memory: cannot allocate 2 bytes for an uploaded column: \
         the memory limit (--memory-limit) leaves 0 bytes to this operation"
    );
    assert_eq!(cpu.mem().peak, 1000);
    cpu.free(kept);
}

#[test]
fn an_expansion_holds_its_outputs_alone_against_the_limit() {
    // 100,000 rows expanding to one output each: 800 KB of outputs, written in pieces of
    // outputs with no list of the rows' work.
    let n = 100_000u64;
    let lo = HostCol::U32(vec![0; n as usize]);
    let offsets = HostCol::U64((0..n).collect());
    let args = [lo, offsets, HostCol::U64(vec![n])];
    assert_eq!(
        launch_limited(&Kernel::Expand, &args, None).unwrap(),
        vec![n as usize; 2]
    );
    assert_eq!(
        launch_limited(&Kernel::Expand, &args, Some(800_000)).unwrap(),
        vec![n as usize; 2]
    );
    let e = launch_limited(&Kernel::Expand, &args, Some(799_999)).unwrap_err().0;
    assert!(
        e.starts_with("kernel Expand: out of memory: cannot allocate ") && e.contains("for the expanded rows'"),
        "{e}"
    );
}

/// Sorted, distinct rows `(x, y)` of a side: `n` rows drawn from `0..v` squared.
fn side_rows(n: usize, v: i32, seed: &mut u64) -> Vec<(i32, i32)> {
    let mut next = || {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*seed >> 33) % v as u64) as i32
    };
    let mut rows: Vec<(i32, i32)> = (0..n).map(|_| (next(), next())).collect();
    rows.sort_unstable();
    rows.dedup();
    rows
}

/// A plan of one `MatchFlags` of a left side against several right sides (constants),
/// and the left rows with their flags as its output.
fn match_plan(left: &[(i32, i32)], rights: &[Vec<(i32, i32)>], anti: bool) -> fox_kernel::KernelPlan {
    use fox_kernel::{Block, BlockId, BufId, BufVar, Elem, Instr, KernelPlan, Terminator, KERNEL_PLAN_VERSION};
    use fox_sema::core::{Column, Type, Value};
    let mut buffers = Vec::new();
    let mut instrs = Vec::new();
    let mut keys = Vec::new();
    for (s, rows) in std::iter::once(left)
        .chain(rights.iter().map(|r| r.as_slice()))
        .enumerate()
    {
        let (x, y) = (buffers.len() as u32, buffers.len() as u32 + 1);
        for c in ["x", "y"] {
            buffers.push(BufVar {
                name: format!("s{s}.{c}"),
                elem: Elem::I32,
                ty: Some(Type::Int32),
            });
        }
        instrs.push(Instr::Launch {
            kernel: Kernel::Const {
                types: vec![Type::Int32, Type::Int32],
                rows: rows
                    .iter()
                    .map(|&(a, b)| vec![Value::Int32(a), Value::Int32(b)])
                    .collect(),
            },
            args: Vec::new(),
            outs: vec![BufId(x), BufId(y)],
            origin: None,
        });
        keys.extend([BufId(x), BufId(y)]);
    }
    let flags = BufId(buffers.len() as u32);
    buffers.push(BufVar {
        name: "flags".into(),
        elem: Elem::U8,
        ty: Some(Type::Bool),
    });
    instrs.push(Instr::Launch {
        kernel: Kernel::MatchFlags { nkeys: 2, anti },
        args: keys,
        outs: vec![flags],
        origin: None,
    });
    // The left rows beside their flags (outputs are ordered on every column).
    let col = |name: &str, ty: Type| Column { name: name.into(), ty };
    instrs.push(Instr::Output {
        name: "flags".into(),
        columns: vec![col("x", Type::Int32), col("y", Type::Int32), col("f", Type::Bool)],
        cols: vec![BufId(0), BufId(1), flags],
        order: Vec::new(),
        limit: None,
    });
    KernelPlan {
        version: KERNEL_PLAN_VERSION,
        buffers,
        inputs: Vec::new(),
        blocks: vec![Block {
            label: "main".into(),
            local: false,
            instrs,
            term: Terminator::Halt,
        }],
        entry: BlockId(0),
        planned_peak_buffers: 0,
        sources: Vec::new(),
        observed: Vec::new(),
    }
}

#[test]
fn match_flags_against_several_right_sides_run_in_pieces_under_a_limit() {
    use fox_runtime::{run, RunOptions};
    let mut seed = 17;
    let left = side_rows(6000, 120, &mut seed);
    // Sides as a relation's runs: disjoint, of different sizes, one empty.
    let all = side_rows(9000, 120, &mut seed);
    let mut rights: Vec<Vec<(i32, i32)>> = vec![Vec::new(); 4];
    for (k, r) in all.into_iter().enumerate() {
        rights[[0, 1, 1, 3, 3, 3, 3][k % 7]].push(r);
    }
    for anti in [true, false] {
        let plan = match_plan(&left, &rights, anti);
        let want: Vec<String> = left
            .iter()
            .map(|r| {
                format!(
                    "{:?}",
                    fox_sema::core::Value::Bool(rights.iter().any(|s| s.binary_search(r).is_ok()) != anti)
                )
            })
            .collect();
        let rows = |r: &fox_runtime::RunResult| -> Vec<String> {
            r.outputs[0].rows().iter().map(|row| format!("{:?}", row[2])).collect()
        };
        let whole = run(&plan, &mut fox_cpu::CpuBackend::new(), &RunOptions::default()).unwrap();
        assert!(rows(&whole) == want, "anti {anti}");
        assert!(whole.stats.pieces.is_empty());
        for limit in [80_000u64, 40_000, 20_000] {
            let opts = RunOptions {
                memory_limit: Some(limit),
                ..Default::default()
            };
            let cut = run(&plan, &mut fox_cpu::CpuBackend::new(), &opts).unwrap();
            assert!(rows(&cut) == want, "anti {anti}, limit {limit}");
            let p = cut
                .stats
                .pieces
                .iter()
                .find(|p| p.kernel.contains("match"))
                .expect("in pieces");
            assert!(p.pieces > 2, "{p:?}");
            assert!(cut.stats.peak_bytes as u64 <= limit);
        }
    }
}

/// A row of a union test: `(x, y, z)`, of which the first `width` columns are used.
type Row3 = (i32, i64, f64);

/// The order the kernels compare rows in (floats by total order).
fn row_key(r: &Row3, width: usize) -> (i32, i64, u64) {
    let f = r.2.to_bits();
    let z = if f >> 63 == 1 { !f } else { f | (1 << 63) };
    (r.0, if width > 1 { r.1 } else { 0 }, if width > 2 { z } else { 0 })
}

/// Sorted, duplicate-free rows of `width` columns, `n` drawn from `0..v` per column (the
/// third among -3.0, -0.0, 0.0, 1.5, 2.5).
fn union_rows(n: usize, v: u64, width: usize, seed: &mut u64) -> Vec<Row3> {
    let mut next = || {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (*seed >> 33) % v
    };
    let floats = [-3.0, -0.0, 0.0, 1.5, 2.5];
    let mut rows: Vec<Row3> = (0..n)
        .map(|_| {
            let (x, y, z) = (next() as i32, next() as i64 - 5, floats[(next() % 5) as usize]);
            (x, if width > 1 { y } else { 0 }, if width > 2 { z } else { 0.0 })
        })
        .collect();
    sort_rows(&mut rows, width);
    rows
}

fn sort_rows(rows: &mut Vec<Row3>, width: usize) {
    rows.sort_by_key(|r| row_key(r, width));
    rows.dedup_by_key(|r| row_key(r, width));
}

/// A plan of `MergeUnion { width, disjoint }` of `a` and `b` (constants), then
/// `MatchFlags` of the union (left, read in order by the sort-merge) against `probe`,
/// output as the union's rows beside their flags.
fn union_plan(a: &[Row3], b: &[Row3], probe: &[Row3], width: usize, disjoint: bool) -> fox_kernel::KernelPlan {
    use fox_kernel::{Block, BlockId, BufId, BufVar, Elem, Instr, KernelPlan, Terminator, KERNEL_PLAN_VERSION};
    use fox_sema::core::{Column, Type, Value};
    let types = [Type::Int32, Type::Int64, Type::Float64];
    let elems = [Elem::I32, Elem::I64, Elem::F64];
    let mut buffers = Vec::new();
    let mut instrs = Vec::new();
    let group = |name: &str, buffers: &mut Vec<BufVar>| -> Vec<BufId> {
        (0..width)
            .map(|c| {
                buffers.push(BufVar {
                    name: format!("{name}.{c}"),
                    elem: elems[c],
                    ty: Some(types[c]),
                });
                BufId(buffers.len() as u32 - 1)
            })
            .collect()
    };
    let (ga, gb, gu, gp) = (
        group("a", &mut buffers),
        group("b", &mut buffers),
        group("u", &mut buffers),
        group("p", &mut buffers),
    );
    let values =
        |r: &Row3| -> Vec<Value> { vec![Value::Int32(r.0), Value::Int64(r.1), Value::Float64(r.2)][..width].to_vec() };
    let konst = |rows: &[Row3], outs: &[BufId]| Instr::Launch {
        kernel: Kernel::Const {
            types: types[..width].to_vec(),
            rows: rows.iter().map(values).collect(),
        },
        args: Vec::new(),
        outs: outs.to_vec(),
        origin: None,
    };
    instrs.push(konst(a, &ga));
    instrs.push(konst(b, &gb));
    instrs.push(Instr::Launch {
        kernel: Kernel::MergeUnion { width, disjoint },
        args: [ga.clone(), gb.clone()].concat(),
        outs: gu.clone(),
        origin: None,
    });
    instrs.push(konst(probe, &gp));
    let flags = BufId(buffers.len() as u32);
    buffers.push(BufVar {
        name: "flags".into(),
        elem: Elem::U8,
        ty: Some(Type::Bool),
    });
    instrs.push(Instr::Launch {
        kernel: Kernel::MatchFlags {
            nkeys: width,
            anti: false,
        },
        args: [gu.clone(), gp].concat(),
        outs: vec![flags],
        origin: None,
    });
    let mut columns: Vec<Column> = (0..width)
        .map(|c| Column {
            name: format!("c{c}"),
            ty: types[c],
        })
        .collect();
    columns.push(Column {
        name: "f".into(),
        ty: Type::Bool,
    });
    instrs.push(Instr::Output {
        name: "u".into(),
        columns,
        cols: [gu, vec![flags]].concat(),
        order: Vec::new(),
        limit: None,
    });
    KernelPlan {
        version: KERNEL_PLAN_VERSION,
        buffers,
        inputs: Vec::new(),
        blocks: vec![Block {
            label: "main".into(),
            local: false,
            instrs,
            term: Terminator::Halt,
        }],
        entry: BlockId(0),
        planned_peak_buffers: 0,
        sources: Vec::new(),
        observed: Vec::new(),
    }
}

/// Runs the union of `a` and `b` without a limit and under a limit that cuts it into
/// about ten pieces: both the sorted union (`disjoint`: of sides sharing no row), every
/// row of it flagged as found by a sort-merge against the expected union (a row out of
/// order is not found). The union's pieces under the limit (0 when it ran whole).
fn union_in_pieces(a: &[Row3], b: &[Row3], width: usize, disjoint: bool) -> u64 {
    use fox_runtime::{run, RunOptions};
    use fox_sema::core::Value;
    let mut want: Vec<Row3> = [a, b].concat();
    sort_rows(&mut want, width);
    let plan = union_plan(a, b, &want, width, disjoint);
    let mut want: Vec<String> = want
        .iter()
        .map(|r| {
            let mut v = vec![Value::Int32(r.0), Value::Int64(r.1), Value::Float64(r.2)][..width].to_vec();
            v.push(Value::Bool(true));
            format!("{v:?}")
        })
        .collect();
    want.sort();
    let rows = |r: &fox_runtime::RunResult| -> Vec<String> {
        let mut v: Vec<String> = r.outputs[0].rows().iter().map(|row| format!("{row:?}")).collect();
        v.sort();
        v
    };
    let what = format!("width {width}, disjoint {disjoint}, {} and {} rows", a.len(), b.len());
    let whole = run(&plan, &mut fox_cpu::CpuBackend::new(), &RunOptions::default()).unwrap();
    assert!(rows(&whole) == want, "{what}");
    assert!(whole.stats.pieces.is_empty(), "{what}");
    // Four fifths of what the one launch takes on the CPU: its sides, its union and a
    // byte a row of its merge.
    let row = [4u64, 8, 8][..width].iter().sum::<u64>();
    let n = (a.len() + b.len()) as u64;
    let limit = ((row * (n + want.len() as u64) + n) * 4 / 5).max(4096);
    let opts = RunOptions {
        memory_limit: Some(limit),
        ..Default::default()
    };
    let cut = run(&plan, &mut fox_cpu::CpuBackend::new(), &opts).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(rows(&cut) == want, "{what}, limit {limit}");
    assert!(cut.stats.peak_bytes as u64 <= limit, "{what}");
    cut.stats
        .pieces
        .iter()
        .find(|p| p.kernel == "merge_union")
        .map_or(0, |p| p.pieces)
}

#[test]
fn unions_run_in_pieces_along_their_merge_path_under_a_limit() {
    let mut seed = 41;
    for width in 1..=3 {
        // Interleaved sides, sizes of no round number, many rows in both (drawn from
        // about 4,000 rows).
        let v = [4000, 63, 28][width - 1];
        let a = union_rows(2999, v, width, &mut seed);
        let b = union_rows(3001, v, width, &mut seed);
        let shared = b.iter().filter(|r| a.contains(r)).count();
        assert!(shared > 100, "{shared}");
        let p = union_in_pieces(&a, &b, width, false);
        assert!((5..=20).contains(&p), "width {width}: {p} pieces");
        // Disjoint sides: `b` without `a`'s rows.
        let b_only: Vec<Row3> = b.iter().filter(|r| !a.contains(r)).copied().collect();
        let p = union_in_pieces(&a, &b_only, width, true);
        assert!((5..=20).contains(&p), "width {width}, disjoint: {p} pieces");
        // Nearly the same rows on both sides: equal rows at every cut.
        let near: Vec<Row3> = a
            .iter()
            .enumerate()
            .filter(|(k, _)| k % 50 != 7)
            .map(|(_, r)| *r)
            .chain(b.iter().step_by(40).copied())
            .collect();
        let mut near = near;
        sort_rows(&mut near, width);
        let p = union_in_pieces(&a, &near, width, false);
        assert!((5..=20).contains(&p), "width {width}, equal rows: {p} pieces");
        // All of `a` before all of `b`: each side's rows copied as they are, one piece
        // each.
        let low: Vec<Row3> = a.iter().map(|r| (r.0 - 5000, r.1, r.2)).collect();
        for disjoint in [false, true] {
            assert_eq!(union_in_pieces(&low, &b, width, disjoint), 2, "width {width}");
            assert_eq!(union_in_pieces(&b, &low, width, disjoint), 2, "width {width}");
        }
        // One row on a side (in the middle of the other, and equal to one of its rows),
        // and an empty side (the other side shared whole, no piece).
        for one in [vec![(1500, 0, 0.0)], vec![b[1000]]] {
            let p = union_in_pieces(&b, &one, width, false);
            assert!((1..=20).contains(&p), "width {width}: {p} pieces");
            let p = union_in_pieces(&one, &b, width, false);
            assert!((1..=20).contains(&p), "width {width}: {p} pieces");
        }
        assert_eq!(union_in_pieces(&a, &[], width, true), 0);
        assert_eq!(union_in_pieces(&[], &b, width, false), 0);
    }
}

#[test]
fn a_union_whose_smallest_piece_does_not_fit_is_an_error_naming_it_and_its_need() {
    use fox_runtime::{run, RunOptions};
    // The rows 2 and 5 in both sides: pieces of one side's rows are copied, but the equal
    // rows must meet in a launch of one row of each side.
    let rows = |v: &[i32]| -> Vec<Row3> { v.iter().map(|&x| (x, 0, 0.0)).collect() };
    let plan = union_plan(&rows(&[1, 2, 3, 5]), &rows(&[2, 4, 5]), &rows(&[1]), 1, false);
    let opts = RunOptions {
        memory_limit: Some(8),
        ..Default::default()
    };
    let err = run(&plan, &mut fox_cpu::CpuBackend::new(), &opts)
        .unwrap_err()
        .to_string();
    assert!(err.contains("merge_union"), "{err}");
    assert!(
        err.contains("the smallest piece of this union (one row of each side) needs 40 bytes on the device"),
        "{err}"
    );
}

#[test]
fn a_disjoint_union_whose_sides_share_a_row_fails_in_pieces_as_in_one_launch() {
    use fox_runtime::{run, RunOptions};
    // The sides share the row 1,500 (row 750 of `a`, row 749 of `b`).
    let a: Vec<Row3> = (0..1500).map(|x| (2 * x, 0, 0.0)).collect();
    let b: Vec<Row3> = (0..1500)
        .map(|x| (2 * x + 1, 0, 0.0))
        .map(|r| if r.0 == 1499 { (1500, 0, 0.0) } else { r })
        .collect();
    let plan = union_plan(&a, &b, &a, 1, true);
    let whole = run(&plan, &mut fox_cpu::CpuBackend::new(), &RunOptions::default())
        .unwrap_err()
        .to_string();
    assert!(whole.contains("share a row (row 750 of a, row 749 of b)"), "{whole}");
    let opts = RunOptions {
        memory_limit: Some(8 << 10),
        ..Default::default()
    };
    let cut = run(&plan, &mut fox_cpu::CpuBackend::new(), &opts)
        .unwrap_err()
        .to_string();
    assert!(cut.contains("share a row (row 750 of a, row 749 of b)"), "{cut}");
}
