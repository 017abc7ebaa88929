//! Runs over several simulated devices (`fox_runtime::run_devices`, one CPU backend per
//! device), on kernel plans written by hand: exchanges of every kind, terminators decided
//! over all devices, rounds loops in which a device has no rows, strings made at run time,
//! an error on one device, and cancellation.

use fox_kernel::{
    device_of, row_hash, value_bits_f64, value_bits_i32, Block, BlockId, BufId, BufVar, Elem, Exchange, InputRel,
    Instr, KExpr, KExprKind, Kernel, KernelPlan, StrFunc, Terminator, KERNEL_PLAN_VERSION,
};
use fox_runtime::{
    run_devices, Backend, BackendError, CancelToken, DevBuf, HostCol, LaunchCtx, MemStats, RunEvent, RunObserver,
    RunOptions, RunResult, RuntimeError,
};
use fox_sema::core::{ArithOp, Column, Type, Value};
use std::sync::{Arc, Mutex};

/// The CPU backend, recording every column uploaded to it.
struct Spy {
    cpu: fox_cpu::CpuBackend,
    uploads: Vec<HostCol>,
}

impl Spy {
    fn new() -> Spy {
        Spy {
            cpu: fox_cpu::CpuBackend::new(),
            uploads: Vec::new(),
        }
    }
}

impl Backend for Spy {
    fn name(&self) -> String {
        self.cpu.name()
    }
    fn upload(&mut self, col: HostCol) -> Result<DevBuf, BackendError> {
        self.uploads.push(col.clone());
        self.cpu.upload(col)
    }
    fn download(&mut self, buf: &DevBuf) -> Result<HostCol, BackendError> {
        self.cpu.download(buf)
    }
    fn launch(&mut self, k: &Kernel, args: &[&DevBuf], ctx: &dyn LaunchCtx) -> Result<Vec<DevBuf>, BackendError> {
        fox_runtime::launch_kernel(&mut self.cpu, k, args, ctx)
    }
    fn free(&mut self, buf: DevBuf) {
        self.cpu.free(buf)
    }
    fn sync(&mut self) -> Result<(), BackendError> {
        self.cpu.sync()
    }
    fn mem(&self) -> MemStats {
        self.cpu.mem()
    }
    fn reset_peak(&mut self) {
        self.cpu.reset_peak()
    }
}

fn launch(kernel: Kernel, args: &[u32], outs: &[u32]) -> Instr {
    Instr::Launch {
        kernel,
        args: args.iter().map(|&b| BufId(b)).collect(),
        outs: outs.iter().map(|&b| BufId(b)).collect(),
        origin: None,
    }
}

fn output(name: &str, columns: &[(&str, Type)], cols: &[u32]) -> Instr {
    Instr::Output {
        name: name.into(),
        columns: columns
            .iter()
            .map(|(n, t)| Column {
                name: n.to_string(),
                ty: *t,
            })
            .collect(),
        cols: cols.iter().map(|&b| BufId(b)).collect(),
        order: Vec::new(),
        limit: None,
    }
}

fn buffers(types: &[Type]) -> Vec<BufVar> {
    types
        .iter()
        .enumerate()
        .map(|(i, t)| BufVar {
            name: format!("b{i}"),
            elem: Elem::of(*t),
            ty: Some(*t),
        })
        .collect()
}

fn plan(buffers: Vec<BufVar>, inputs: Vec<InputRel>, blocks: Vec<Block>) -> KernelPlan {
    KernelPlan {
        version: KERNEL_PLAN_VERSION,
        buffers,
        inputs,
        blocks,
        entry: BlockId(0),
        planned_peak_buffers: 1,
        sources: Vec::new(),
        observed: Vec::new(),
    }
}

fn block(label: &str, instrs: Vec<Instr>, term: Terminator) -> Block {
    Block {
        label: label.into(),
        local: false,
        instrs,
        term,
    }
}

/// Runs `plan` over `n` spies; the result and each device's uploads. Every device's
/// buffers are freed whatever the result.
fn run_on(n: usize, plan: &KernelPlan, opts: &RunOptions) -> (Result<RunResult, RuntimeError>, Vec<Vec<HostCol>>) {
    let mut spies: Vec<Spy> = (0..n).map(|_| Spy::new()).collect();
    let res = run_devices(
        plan,
        spies.iter_mut().map(|s| s as &mut (dyn Backend + Send)).collect(),
        opts,
        None,
    );
    for (d, s) in spies.iter().enumerate() {
        assert_eq!(s.mem().in_use, 0, "device {d} of {n} kept buffers");
    }
    (res, spies.into_iter().map(|s| s.uploads).collect())
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("fox-cpu-spmd-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The input `t(a: int32, s: string, f: float64, d: int64)` of `rows` in `dir`.
fn input_t(dir: &std::path::Path, rows: &[(i32, &str, f64, i64)]) -> InputRel {
    let text: String = rows.iter().map(|(a, s, f, d)| format!("{a},{s},{f:?},{d}\n")).collect();
    std::fs::write(dir.join("t.csv"), text).unwrap();
    InputRel {
        name: "t".into(),
        columns: [
            ("a", Type::Int32),
            ("s", Type::String),
            ("f", Type::Float64),
            ("d", Type::Int64),
        ]
        .iter()
        .map(|(n, t)| Column {
            name: n.to_string(),
            ty: *t,
        })
        .collect(),
        file: "t.csv".into(),
        sep: ",".into(),
        key: Vec::new(),
        header: false,
    }
}

const T: [Type; 4] = [Type::Int32, Type::String, Type::Float64, Type::Int64];
const T_COLS: [(&str, Type); 4] = [
    ("a", Type::Int32),
    ("s", Type::String),
    ("f", Type::Float64),
    ("d", Type::Int64),
];

/// `t` loaded into b0..b3, exchanged by `to` into b4..b7 and output.
fn exchange_plan(input: InputRel, to: Exchange) -> KernelPlan {
    let mut types = T.to_vec();
    types.extend(T);
    plan(
        buffers(&types),
        vec![input],
        vec![block(
            "main",
            vec![
                launch(
                    Kernel::LoadInput {
                        input: 0,
                        whole: false,
                        hash: Vec::new(),
                    },
                    &[],
                    &[0, 1, 2, 3],
                ),
                launch(Kernel::Exchange { width: 4, to }, &[0, 1, 2, 3], &[4, 5, 6, 7]),
                output("t", &T_COLS, &[4, 5, 6, 7]),
            ],
            Terminator::Halt,
        )],
    )
}

/// Rows of columns, as tuples of their cells' bits.
fn rows_of(cols: &[HostCol]) -> Vec<Vec<u64>> {
    let len = cols.first().map_or(0, HostCol::len);
    (0..len)
        .map(|r| {
            cols.iter()
                .map(|c| match c {
                    HostCol::I32(v) => value_bits_i32(v[r]),
                    HostCol::U32(v) => u64::from(v[r]),
                    HostCol::F64(v) => v[r].to_bits(),
                    HostCol::I64(v) => v[r] as u64,
                    other => panic!("unexpected column {other:?}"),
                })
                .collect()
        })
        .collect()
}

/// The hash bits of a row as `rows_of` gives it (the float column is column 2).
fn hash_of(row: &[u64], keys: &[usize]) -> u64 {
    row_hash(keys.iter().map(|&k| {
        if k == 2 {
            value_bits_f64(f64::from_bits(row[k]))
        } else {
            row[k]
        }
    }))
}

const ROWS: [(i32, &str, f64, i64); 8] = [
    (1, "x", 0.0, 10),
    (-1, "y", -0.0, -10),
    (2, "x", 1.5, 20),
    (1, "z", 0.0, 30),
    (3, "y", -0.0, 40),
    (-7, "x", 2.5, 50),
    (1, "y", 0.0, 60),
    (9, "w", -0.0, 70),
];

/// Checks every device's part after the exchange against the rule of `to`: each device
/// loaded its slice (its first four uploads) and received (the next four) what `to`
/// sends it, in sender order.
fn check_exchange(rows: &[(i32, &str, f64, i64)], to: Exchange, tag: &str) {
    let dir = temp_dir(tag);
    let input = input_t(&dir, rows);
    let p = exchange_plan(input, to.clone());
    let opts = RunOptions {
        data_dir: Some(dir.clone()),
        ..RunOptions::default()
    };
    let (one, _) = run_on(1, &p, &opts);
    let one = one.unwrap();
    assert_eq!(one.outputs[0].len(), rows.len());
    for n in 1..=4usize {
        let (res, uploads) = run_on(n, &p, &opts);
        let res = res.unwrap_or_else(|e| panic!("{tag} on {n} devices: {e}"));
        let sent: Vec<Vec<Vec<u64>>> = uploads.iter().map(|u| rows_of(&u[0..4])).collect();
        // On one device the exchange shares its arguments: nothing is uploaded.
        let got: Vec<Vec<Vec<u64>>> = if n == 1 {
            sent.clone()
        } else {
            uploads.iter().map(|u| rows_of(&u[4..8])).collect()
        };
        // The slices: contiguous, in order, every row once.
        let all: Vec<Vec<u64>> = sent.iter().flatten().cloned().collect();
        assert_eq!(all.len(), rows.len(), "{tag}: slices on {n} devices");
        for d in 0..n {
            let want: Vec<Vec<u64>> = match &to {
                Exchange::Hash { cols } => sent
                    .iter()
                    .flatten()
                    .filter(|r| device_of(hash_of(r, cols), n) == d)
                    .cloned()
                    .collect(),
                Exchange::Gather if d == 0 => all.clone(),
                Exchange::Gather => Vec::new(),
                Exchange::Broadcast => all.clone(),
                Exchange::Keep { cols } => sent[d]
                    .iter()
                    .filter(|r| device_of(hash_of(r, cols), n) == d)
                    .cloned()
                    .collect(),
            };
            assert_eq!(got[d], want, "{tag}: device {d} of {n}");
        }
        let e = &res.stats.exchange;
        if n > 1 {
            assert_eq!(res.stats.device_peaks.len(), n);
            let moved: usize = match &to {
                Exchange::Keep { .. } => 0,
                Exchange::Broadcast => rows.len() * (n - 1),
                Exchange::Gather => rows.len() - sent[0].len(),
                Exchange::Hash { cols } => (0..n)
                    .map(|d| sent[d].iter().filter(|r| device_of(hash_of(r, cols), n) != d).count())
                    .sum(),
            };
            assert_eq!((e.exchanges, e.rows), (1, moved as u64), "{tag} on {n} devices");
            assert_eq!(e.bytes, moved as u64 * (4 + 4 + 8 + 8));
        }
        // Every device's rows together, ordered on the host: one device's answer (a
        // broadcast holds every row once per device).
        let copies = if matches!(to, Exchange::Broadcast) { n } else { 1 };
        let mut want = Vec::new();
        for r in one.outputs[0].rows() {
            want.extend(std::iter::repeat_n(r, copies));
        }
        if !matches!(to, Exchange::Keep { .. }) || n == 1 {
            assert_eq!(res.outputs[0].rows(), want, "{tag} on {n} devices");
        }
    }
}

#[test]
fn a_hash_exchange_sends_each_row_to_the_device_of_its_key_in_sender_order() {
    check_exchange(&ROWS, Exchange::Hash { cols: vec![0] }, "hash-a");
    check_exchange(&ROWS, Exchange::Hash { cols: vec![1, 3] }, "hash-sd");
    // -0.0 and 0.0 are equal: they meet on one device.
    check_exchange(&ROWS, Exchange::Hash { cols: vec![2] }, "hash-f");
    check_exchange(&ROWS[..1], Exchange::Hash { cols: vec![0, 1, 2, 3] }, "hash-one");
    check_exchange(&[], Exchange::Hash { cols: vec![0] }, "hash-none");
    // Every row has the same key: one device receives them all, the others none.
    let same: Vec<(i32, &str, f64, i64)> = (0..7).map(|d| (5, "k", 1.0, d)).collect();
    check_exchange(&same, Exchange::Hash { cols: vec![0, 1] }, "hash-same");
}

#[test]
fn zeroes_of_both_signs_hash_alike() {
    let zeroes: Vec<(i32, &str, f64, i64)> = (0..6)
        .map(|d| (0, "z", if d % 2 == 0 { 0.0 } else { -0.0 }, d))
        .collect();
    let dir = temp_dir("zeroes");
    let p = exchange_plan(input_t(&dir, &zeroes), Exchange::Hash { cols: vec![2] });
    let opts = RunOptions {
        data_dir: Some(dir),
        ..RunOptions::default()
    };
    for n in 2..=4 {
        let (res, uploads) = run_on(n, &p, &opts);
        res.unwrap();
        let holding: Vec<usize> = (0..n).filter(|&d| !uploads[d][4].is_empty()).collect();
        assert_eq!(holding.len(), 1, "{n} devices: {holding:?}");
        assert_eq!(uploads[holding[0]][4].len(), 6);
    }
}

#[test]
fn gather_broadcast_and_keep_move_rows_by_their_rule() {
    check_exchange(&ROWS, Exchange::Gather, "gather");
    check_exchange(&ROWS[..1], Exchange::Gather, "gather-one");
    check_exchange(&ROWS, Exchange::Broadcast, "broadcast");
    check_exchange(&[], Exchange::Broadcast, "broadcast-none");
    check_exchange(&ROWS, Exchange::Keep { cols: vec![0] }, "keep");
}

#[test]
fn keep_of_a_replicated_relation_leaves_each_row_on_one_device() {
    // A `Const` is replicated: every device holds its rows; `Keep` leaves each on one.
    let rows: Vec<Vec<Value>> = (0..20).map(|v| vec![Value::Int32(v)]).collect();
    let p = plan(
        buffers(&[Type::Int32, Type::Int32]),
        Vec::new(),
        vec![block(
            "main",
            vec![
                launch(
                    Kernel::Const {
                        types: vec![Type::Int32],
                        rows: rows.clone(),
                    },
                    &[],
                    &[0],
                ),
                launch(
                    Kernel::Exchange {
                        width: 1,
                        to: Exchange::Keep { cols: vec![0] },
                    },
                    &[0],
                    &[1],
                ),
                output("v", &[("v", Type::Int32)], &[1]),
            ],
            Terminator::Halt,
        )],
    );
    for n in 1..=4 {
        let (res, uploads) = run_on(n, &p, &RunOptions::default());
        let res = res.unwrap();
        assert_eq!(res.outputs[0].rows(), rows, "{n} devices");
        assert_eq!(res.stats.exchange.rows, 0);
        let kept: usize = uploads.iter().map(|u| u[if n == 1 { 0 } else { 1 }].len()).sum();
        assert_eq!(kept, 20);
    }
}

/// Records the loop iterations the observer hears.
#[derive(Debug, Default)]
struct Iterations(Mutex<Vec<(u64, u64)>>);

impl RunObserver for Iterations {
    fn event(&self, e: &RunEvent<'_>) {
        if let RunEvent::Iteration { iterations, rows, .. } = e {
            self.0.lock().unwrap().push((*iterations, *rows));
        }
    }
}

/// `t` loaded; a loop drops the first row of its column `a` per iteration until no
/// device has one left; then `a` (empty) is output.
fn shrinking_loop(input: InputRel, body_label: &str) -> KernelPlan {
    let mut types = T.to_vec();
    types.push(Type::Int32);
    plan(
        buffers(&types),
        vec![input],
        vec![
            block(
                "main",
                vec![launch(
                    Kernel::LoadInput {
                        input: 0,
                        whole: false,
                        hash: Vec::new(),
                    },
                    &[],
                    &[0, 1, 2, 3],
                )],
                Terminator::LoopIf {
                    nonempty: vec![BufId(0)],
                    body: BlockId(1),
                    exit: BlockId(2),
                },
            ),
            block(
                body_label,
                vec![
                    launch(
                        Kernel::Slice {
                            start: 1,
                            len: u64::MAX >> 1,
                        },
                        &[0],
                        &[4],
                    ),
                    Instr::Move {
                        dst: BufId(0),
                        src: BufId(4),
                    },
                ],
                Terminator::LoopIf {
                    nonempty: vec![BufId(0)],
                    body: BlockId(1),
                    exit: BlockId(2),
                },
            ),
            block("done", vec![output("a", &[("a", Type::Int32)], &[0])], Terminator::Halt),
        ],
    )
}

#[test]
fn a_loop_goes_on_while_any_device_has_rows_and_the_observer_hears_their_sum() {
    let dir = temp_dir("loop");
    // 5 rows: device 0 of 2 holds 2, device 1 holds 3.
    let p = shrinking_loop(input_t(&dir, &ROWS[..5]), "loop");
    for n in 1..=3 {
        let seen = Arc::new(Iterations::default());
        let opts = RunOptions {
            data_dir: Some(dir.clone()),
            observer: Some(seen.clone()),
            ..RunOptions::default()
        };
        let (res, _) = run_on(n, &p, &opts);
        let res = res.unwrap();
        assert_eq!(res.outputs[0].len(), 0);
        let heard = seen.0.lock().unwrap().clone();
        let longest = (0..n).map(|d| 5 * (d + 1) / n - 5 * d / n).max().unwrap() as u64;
        // The first test (before the body ran) and one after each run of the body.
        assert_eq!(heard.len() as u64, longest + 1, "{n} devices: {heard:?}");
        let rows: Vec<u64> = heard.iter().map(|h| h.1).collect();
        let want: Vec<u64> = (0..=longest)
            .map(|k| {
                (0..n)
                    .map(|d| ((5 * (d + 1) / n - 5 * d / n) as u64).saturating_sub(k))
                    .sum()
            })
            .collect();
        assert_eq!(rows, want, "{n} devices");
    }
    // The iteration limit sees every device's rows.
    let p = shrinking_loop(input_t(&dir, &ROWS[..5]), "stratum 0");
    let opts = RunOptions {
        data_dir: Some(dir.clone()),
        max_iterations: Some(2),
        ..RunOptions::default()
    };
    let (res, _) = run_on(2, &p, &opts);
    let e = res.unwrap_err().to_string();
    assert!(
        e.contains("within 2 iterations") && e.contains("the last derived 1 new row"),
        "{e}"
    );
}

/// `copies` rows ("a", "c") of a constant, all kept on one device (`Keep` by a column of
/// one value), expanded in rounds of one row (`Window` with `max_rows` 1): every row
/// gives its positions 0 and 1, output as the strings of those codes ("a", "b").
fn rounds_plan(copies: usize) -> KernelPlan {
    use Type::String as S;
    let rows: Vec<Vec<Value>> = (0..copies)
        .map(|_| vec![Value::String("a".into()), Value::String("c".into())])
        .collect();
    let consts = vec![Value::String("b".into())];
    // b0 lo, b1 hi, b2 lo kept, b3 hi kept, b4 counts, b5 offsets, b6 total, b7 window,
    // b8 parent, b9 pos, b10 acc, b11 grown, b12 next window, b13 an unused "b".
    let mut bufs = buffers(&[S, S, S, S]);
    for (name, elem, ty) in [
        ("counts", Elem::U64, None),
        ("offsets", Elem::U64, None),
        ("total", Elem::U64, None),
        ("window", Elem::U64, None),
        ("parent", Elem::U32, None),
        ("pos", Elem::U32, Some(S)),
        ("acc", Elem::U32, Some(S)),
        ("grown", Elem::U32, Some(S)),
        ("next", Elem::U64, None),
        ("b", Elem::U32, Some(S)),
    ] {
        bufs.push(BufVar {
            name: name.into(),
            elem,
            ty,
        });
    }
    let window = Kernel::Window {
        row_bytes: 8,
        max_rows: Some(1),
    };
    let test = Terminator::LoopIf {
        nonempty: vec![BufId(7)],
        body: BlockId(1),
        exit: BlockId(2),
    };
    plan(
        bufs,
        Vec::new(),
        vec![
            block(
                "main",
                vec![
                    launch(
                        Kernel::Const {
                            types: vec![S, S],
                            rows,
                        },
                        &[],
                        &[0, 1],
                    ),
                    launch(
                        Kernel::Const {
                            types: vec![S],
                            rows: vec![consts],
                        },
                        &[],
                        &[13],
                    ),
                    launch(
                        Kernel::Exchange {
                            width: 2,
                            to: Exchange::Keep { cols: vec![0] },
                        },
                        &[0, 1],
                        &[2, 3],
                    ),
                    launch(Kernel::RangeCount, &[2, 3], &[4]),
                    launch(Kernel::ExclusiveScan, &[4], &[5, 6]),
                    launch(
                        Kernel::Const {
                            types: vec![S],
                            rows: Vec::new(),
                        },
                        &[],
                        &[10],
                    ),
                    launch(window.clone(), &[6], &[7]),
                ],
                test.clone(),
            ),
            block(
                "rows.round",
                vec![
                    launch(Kernel::Expand, &[2, 5, 6, 7], &[8, 9]),
                    launch(Kernel::Concat { parts: 2, width: 1 }, &[10, 9], &[11]),
                    Instr::Move {
                        dst: BufId(10),
                        src: BufId(11),
                    },
                    launch(window, &[6, 7], &[12]),
                    Instr::Move {
                        dst: BufId(7),
                        src: BufId(12),
                    },
                ],
                test,
            ),
            block("rows.done", vec![output("pos", &[("p", S)], &[10])], Terminator::Halt),
        ],
    )
}

#[test]
fn a_rounds_loop_runs_until_no_device_has_a_window_left() {
    let p = rounds_plan(3);
    let (one, _) = run_on(1, &p, &RunOptions::default());
    let one = one.unwrap();
    let s = |x: &str| Value::String(x.into());
    let want: Vec<Vec<Value>> = [s("a"), s("a"), s("a"), s("b"), s("b"), s("b")]
        .into_iter()
        .map(|v| vec![v])
        .collect();
    assert_eq!(one.outputs[0].rows(), want);
    assert_eq!(one.stats.rounds, 6);
    for n in 2..=4 {
        let (res, uploads) = run_on(n, &p, &RunOptions::default());
        let res = res.unwrap_or_else(|e| panic!("{n} devices: {e}"));
        assert_eq!(res.outputs[0].rows(), want, "{n} devices");
        // Only the device holding the rows took windows of rows.
        assert_eq!(res.stats.rounds, 6, "{n} devices");
        // Uploads: the two constant columns, the "b", then the kept rows.
        let holding = uploads.iter().filter(|u| !u[3].is_empty()).count();
        assert_eq!(holding, 1, "{n} devices");
    }
}

/// `concat(x, y)` of constant rows spread over the devices by `Keep`: every device makes
/// new strings, and device 0 reads every device's codes.
#[test]
fn strings_made_on_every_device_get_the_same_codes_everywhere() {
    use Type::String as S;
    let pairs = [("x", "1"), ("y", "2"), ("z", "3"), ("w", "4"), ("v", "5"), ("u", "1")];
    let rows: Vec<Vec<Value>> = pairs
        .iter()
        .map(|(a, b)| vec![Value::String(a.to_string()), Value::String(b.to_string())])
        .collect();
    let p = plan(
        buffers(&[S, S, S, S, S]),
        Vec::new(),
        vec![block(
            "main",
            vec![
                launch(
                    Kernel::Const {
                        types: vec![S, S],
                        rows,
                    },
                    &[],
                    &[0, 1],
                ),
                launch(
                    Kernel::Exchange {
                        width: 2,
                        to: Exchange::Keep { cols: vec![0] },
                    },
                    &[0, 1],
                    &[2, 3],
                ),
                launch(Kernel::StrFn { func: StrFunc::Concat }, &[2, 3], &[4]),
                output("c", &[("c", S)], &[4]),
            ],
            Terminator::Halt,
        )],
    );
    let want: Vec<Vec<Value>> = ["u1", "v5", "w4", "x1", "y2", "z3"]
        .iter()
        .map(|s| vec![Value::String(s.to_string())])
        .collect();
    for n in 1..=4 {
        let (res, uploads) = run_on(n, &p, &RunOptions::default());
        let res = res.unwrap_or_else(|e| panic!("{n} devices: {e}"));
        assert_eq!(res.outputs[0].rows(), want, "{n} devices");
        if n > 1 {
            // The strings really were made on more than one device.
            assert!(uploads.iter().filter(|u| !u[4].is_empty()).count() > 1, "{n} devices");
        }
    }
}

/// A row's string, start and length.
type SubstrRow = (String, i64, i64);

/// `substr(s, start, length)` of constant rows spread by `Keep`.
fn substr_plan(rows: &[SubstrRow]) -> KernelPlan {
    use Type::{Int64 as I, String as S};
    let rows: Vec<Vec<Value>> = rows
        .iter()
        .map(|(s, st, ln)| vec![Value::String(s.clone()), Value::Int64(*st), Value::Int64(*ln)])
        .collect();
    plan(
        buffers(&[S, I, I, S, I, I, S]),
        Vec::new(),
        vec![block(
            "main",
            vec![
                launch(
                    Kernel::Const {
                        types: vec![S, I, I],
                        rows,
                    },
                    &[],
                    &[0, 1, 2],
                ),
                launch(
                    Kernel::Exchange {
                        width: 3,
                        to: Exchange::Keep { cols: vec![0] },
                    },
                    &[0, 1, 2],
                    &[3, 4, 5],
                ),
                launch(Kernel::StrFn { func: StrFunc::Substr }, &[3, 4, 5], &[6]),
                output("s", &[("s", S)], &[6]),
            ],
            Terminator::Halt,
        )],
    )
}

#[test]
fn substrings_over_several_devices_are_those_of_one_device() {
    // Phone-like strings: their prefixes are new strings, some of them also in the
    // dictionary ("13"), made by code over a table every device shares where start and
    // length are the same on every row, else row by row.
    let phones: Vec<String> = (0..300)
        .map(|i| format!("{}-{:03}-{:04}", 10 + (i * 7) % 25, (i * 37) % 1000, (i * 101) % 10_000))
        .chain(["13".to_string(), "".to_string(), "1é-2".to_string()])
        .collect();
    let cases: Vec<(&str, Vec<SubstrRow>)> = vec![
        ("a prefix", phones.iter().map(|s| (s.clone(), 1, 2)).collect()),
        ("a middle", phones.iter().map(|s| (s.clone(), 2, 3)).collect()),
        ("past the end", phones.iter().map(|s| (s.clone(), 20, 3)).collect()),
        (
            "starts that differ by row",
            phones
                .iter()
                .enumerate()
                .map(|(i, s)| (s.clone(), 1 + (i % 3) as i64, 2))
                .collect(),
        ),
        (
            "a range sparser than 4 codes a row",
            phones.iter().step_by(60).map(|s| (s.clone(), 1, 2)).collect(),
        ),
    ];
    for (what, rows) in cases {
        let p = substr_plan(&rows);
        let (one, _) = run_on(1, &p, &RunOptions::default());
        let want = one.unwrap_or_else(|e| panic!("{what}, 1 device: {e}")).outputs[0].rows();
        for n in 2..=4 {
            let (res, _) = run_on(n, &p, &RunOptions::default());
            let got = res.unwrap_or_else(|e| panic!("{what}, {n} devices: {e}")).outputs[0].rows();
            assert_eq!(got, want, "{what}, {n} devices");
        }
    }
}

/// `1 / ((v - z0) * (v - z1) * …)` of constant rows `values` spread by `Keep`, so that a
/// row of a `z` fails on its device only; then an exchange every device must reach.
fn failing_plan(values: &[i32], zeroes: &[i32]) -> KernelPlan {
    let rows: Vec<Vec<Value>> = values.iter().map(|&v| vec![Value::Int32(v)]).collect();
    let int = |kind| KExpr { kind, ty: Type::Int32 };
    let mut den = int(KExprKind::Const(Value::Int32(1)));
    for &z in zeroes {
        let factor = int(KExprKind::Arith(
            ArithOp::Sub,
            Box::new(int(KExprKind::Col(0))),
            Box::new(int(KExprKind::Const(Value::Int32(z)))),
        ));
        den = int(KExprKind::Arith(ArithOp::Mul, Box::new(den), Box::new(factor)));
    }
    let div = int(KExprKind::Arith(
        ArithOp::Div,
        Box::new(int(KExprKind::Const(Value::Int32(1)))),
        Box::new(den),
    ));
    plan(
        buffers(&[Type::Int32; 4]),
        Vec::new(),
        vec![block(
            "main",
            vec![
                launch(
                    Kernel::Const {
                        types: vec![Type::Int32],
                        rows,
                    },
                    &[],
                    &[0],
                ),
                launch(
                    Kernel::Exchange {
                        width: 1,
                        to: Exchange::Keep { cols: vec![0] },
                    },
                    &[0],
                    &[1],
                ),
                launch(Kernel::Eval { expr: div, n_cols: 1 }, &[1], &[2]),
                launch(
                    Kernel::Exchange {
                        width: 1,
                        to: Exchange::Gather,
                    },
                    &[2],
                    &[3],
                ),
                output("q", &[("q", Type::Int32)], &[3]),
            ],
            Terminator::Halt,
        )],
    )
}

#[test]
fn an_error_on_one_device_stops_every_device_and_is_the_run_s_error() {
    let p = failing_plan(&(0..12).collect::<Vec<i32>>(), &[0]);
    let (one, _) = run_on(1, &p, &RunOptions::default());
    let want = one.unwrap_err();
    assert!(want.to_string().contains("division by zero"), "{want}");
    for n in 2..=4 {
        let started = std::time::Instant::now();
        // `run_on` checks that every device freed its buffers.
        let (res, _) = run_on(n, &p, &RunOptions::default());
        let e = res.unwrap_err();
        assert_eq!(e, want, "{n} devices");
        assert!(
            started.elapsed().as_secs() < 30,
            "{n} devices took {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn cancelling_stops_every_device_of_a_loop_that_would_not_end() {
    // A loop on a buffer that never empties, with an exchange in its body.
    let p = plan(
        buffers(&[Type::Int32, Type::Int32]),
        Vec::new(),
        vec![
            block(
                "main",
                vec![launch(
                    Kernel::Const {
                        types: vec![Type::Int32],
                        rows: vec![vec![Value::Int32(1)]],
                    },
                    &[],
                    &[0],
                )],
                Terminator::Jump(BlockId(1)),
            ),
            block(
                "forever",
                vec![launch(
                    Kernel::Exchange {
                        width: 1,
                        to: Exchange::Hash { cols: vec![0] },
                    },
                    &[0],
                    &[1],
                )],
                Terminator::LoopIf {
                    nonempty: vec![BufId(0)],
                    body: BlockId(1),
                    exit: BlockId(1),
                },
            ),
        ],
    );
    for n in [2, 3] {
        let cancel = CancelToken::new();
        let opts = RunOptions {
            cancel: Some(cancel.clone()),
            ..RunOptions::default()
        };
        let stopper = {
            let cancel = cancel.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(200));
                cancel.cancel();
            })
        };
        let (res, _) = run_on(n, &p, &opts);
        stopper.join().unwrap();
        assert_eq!(res.unwrap_err(), RuntimeError::Cancelled, "{n} devices");
    }
}

#[test]
fn one_device_is_the_plain_run() {
    let dir = temp_dir("one");
    let p = exchange_plan(input_t(&dir, &ROWS), Exchange::Hash { cols: vec![0] });
    let opts = RunOptions {
        data_dir: Some(dir),
        ..RunOptions::default()
    };
    let (res, uploads) = run_on(1, &p, &opts);
    let res = res.unwrap();
    // The exchange shares its arguments on one device: only the input was uploaded.
    assert_eq!(uploads[0].len(), 4);
    assert_eq!(res.stats.exchange, fox_runtime::ExchangeStats::default());
    assert!(res.stats.device_peaks.is_empty());
    let (none, _) = run_on(0, &p, &opts);
    assert!(none.is_err());
}

#[test]
fn of_errors_on_several_devices_the_first_device_s_is_the_run_s() {
    // A value kept on device 0 fails at its row 1, one kept on device 1 at its row 0.
    let on = |d: usize| {
        (100..)
            .find(|&v| device_of(row_hash([value_bits_i32(v)]), 2) == d)
            .unwrap()
    };
    let (ok0, bad0) = (
        on(0),
        (on(0) + 1..)
            .find(|&v| device_of(row_hash([value_bits_i32(v)]), 2) == 0)
            .unwrap(),
    );
    let bad1 = on(1);
    let p = failing_plan(&[bad1, ok0, bad0], &[bad0, bad1]);
    for _ in 0..5 {
        let (res, _) = run_on(2, &p, &RunOptions::default());
        let e = res.unwrap_err().to_string();
        assert!(e.contains("division by zero") && e.ends_with("(row 1)"), "{e}");
    }
}

/// An input loaded whole (`LoadInput::whole`): every device uploads every row, in the
/// input's order, as one device does; a kept share (`Exchange::Keep`) then gives each
/// row to one device, so the output is one device's rows once.
#[test]
fn an_input_loaded_whole_is_on_every_device_in_its_order() {
    let dir = temp_dir("whole");
    let input = input_t(&dir, &ROWS);
    let mut types = T.to_vec();
    types.extend(T);
    let p = plan(
        buffers(&types),
        vec![input],
        vec![block(
            "main",
            vec![
                launch(
                    Kernel::LoadInput {
                        input: 0,
                        whole: true,
                        hash: Vec::new(),
                    },
                    &[],
                    &[0, 1, 2, 3],
                ),
                launch(
                    Kernel::Exchange {
                        width: 4,
                        to: Exchange::Keep { cols: vec![0] },
                    },
                    &[0, 1, 2, 3],
                    &[4, 5, 6, 7],
                ),
                output("t", &T_COLS, &[4, 5, 6, 7]),
            ],
            Terminator::Halt,
        )],
    );
    let opts = RunOptions {
        data_dir: Some(dir.clone()),
        ..RunOptions::default()
    };
    let (one, one_uploads) = run_on(1, &p, &opts);
    let one = one.unwrap();
    assert_eq!(one.outputs[0].len(), ROWS.len());
    let whole = rows_of(&one_uploads[0][0..4]);
    assert_eq!(whole.len(), ROWS.len());
    for n in 2..=4usize {
        let (res, uploads) = run_on(n, &p, &opts);
        let res = res.unwrap_or_else(|e| panic!("on {n} devices: {e}"));
        for (d, u) in uploads.iter().enumerate() {
            assert_eq!(
                rows_of(&u[0..4]),
                whole,
                "device {d} of {n} loaded the input whole, in order"
            );
        }
        let mut got: Vec<String> = (0..res.outputs[0].len())
            .map(|r| format!("{:?}", res.outputs[0].row(r)))
            .collect();
        let mut want: Vec<String> = (0..one.outputs[0].len())
            .map(|r| format!("{:?}", one.outputs[0].row(r)))
            .collect();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{n} devices: each row kept by one device");
    }
}

/// The rows of `t` loaded into b0..b3 and output as they are (no exchange: a run on
/// resident data uploads nothing).
fn load_plan(input: InputRel) -> KernelPlan {
    plan(
        buffers(&T),
        vec![input],
        vec![block(
            "main",
            vec![
                launch(
                    Kernel::LoadInput {
                        input: 0,
                        whole: false,
                        hash: Vec::new(),
                    },
                    &[],
                    &[0, 1, 2, 3],
                ),
                output("t", &T_COLS, &[0, 1, 2, 3]),
            ],
            Terminator::Halt,
        )],
    )
}

/// Every output's rows, in order.
fn outputs_of(r: &RunResult) -> Vec<(String, Vec<Vec<Value>>)> {
    r.outputs.iter().map(|t| (t.name.clone(), t.rows())).collect()
}

#[test]
fn a_resident_database_over_several_devices_uploads_each_device_s_part_once() {
    use fox_runtime::{run_devices_resident, run_resident, DataSource, Database, NoProgress, Resident};
    let dir = temp_dir("resident");
    let rows: Vec<(i32, String, f64, i64)> = (0..37)
        .map(|k| (k * 7 % 11, format!("s{}", k % 5), k as f64 / 4.0, -(k as i64)))
        .collect();
    let refs: Vec<(i32, &str, f64, i64)> = rows.iter().map(|(a, s, f, d)| (*a, s.as_str(), *f, *d)).collect();
    let input = input_t(&dir, &refs);
    let plain = load_plan(input.clone());
    let hashed = exchange_plan(input, Exchange::Hash { cols: vec![0] });
    let db = Database::load(&DataSource::Files(dir.clone()), &[&plain, &hashed], &NoProgress).unwrap();
    let opts = RunOptions {
        database: Some(Arc::new(db)),
        ..RunOptions::default()
    };
    // One device, resident: the answers every device count must give.
    let mut one = Spy::new();
    let mut one_resident = Resident::default();
    let want_plain = outputs_of(&run_resident(&plain, &mut one, &opts, Some(&mut one_resident)).unwrap());
    let want_hashed = outputs_of(&run_resident(&hashed, &mut one, &opts, Some(&mut one_resident)).unwrap());
    assert_eq!(want_plain[0].1.len(), 37);
    let whole = one_resident.bytes();
    one_resident.release(&mut one);
    assert_eq!(one.mem().in_use, 0);

    let mut spies: Vec<Spy> = (0..3).map(|_| Spy::new()).collect();
    let mut residents: Vec<Resident> = (0..3).map(|_| Resident::default()).collect();
    let run = |spies: &mut [Spy], residents: &mut [Resident], p: &KernelPlan| {
        let devices = spies.iter_mut().map(|s| s as &mut (dyn Backend + Send)).collect();
        let r = run_devices_resident(p, devices, &opts, residents).unwrap();
        let uploads: Vec<usize> = spies.iter_mut().map(|s| std::mem::take(&mut s.uploads).len()).collect();
        (outputs_of(&r), uploads)
    };
    // The first run uploads each device's part of the four columns and keeps it.
    let (got, uploads) = run(&mut spies, &mut residents, &plain);
    assert_eq!(got, want_plain);
    assert_eq!(uploads, vec![4, 4, 4]);
    assert!(residents.iter().all(|r| r.buffers() == 4));
    // The parts are disjoint: together they hold the bytes of one device's columns.
    assert_eq!(residents.iter().map(Resident::bytes).sum::<usize>(), whole);
    let held: Vec<usize> = spies.iter().map(|s| s.mem().in_use).collect();
    assert!(held.iter().all(|&b| b > 0), "{held:?}");
    // Later runs upload nothing and free nothing of the parts.
    for _ in 0..2 {
        let (got, uploads) = run(&mut spies, &mut residents, &plain);
        assert_eq!(got, want_plain);
        assert_eq!(uploads, vec![0, 0, 0]);
        assert_eq!(spies.iter().map(|s| s.mem().in_use).collect::<Vec<_>>(), held);
    }
    // Another plan over the same table reads the same parts: only what its exchange
    // receives is uploaded.
    for _ in 0..2 {
        let (got, uploads) = run(&mut spies, &mut residents, &hashed);
        assert_eq!(got, want_hashed);
        assert_eq!(uploads, vec![4, 4, 4]);
        assert!(residents.iter().all(|r| r.buffers() == 4));
    }
    // Two of the devices split the table otherwise: each uploads its own part (the parts
    // of three devices are not taken for it), then reuses it.
    for uploaded in [4, 0] {
        let (got, uploads) = run(&mut spies[..2], &mut residents[..2], &plain);
        assert_eq!(got, want_plain);
        assert_eq!(uploads, vec![uploaded, uploaded]);
    }
    assert_eq!(residents[0].buffers(), 8);
    // A table that changes is uploaded again after its parts are released.
    for (r, s) in residents.iter_mut().zip(spies.iter_mut()) {
        r.release_tables(&["t"], s);
        assert_eq!(r.buffers(), 0);
    }
    let (got, uploads) = run(&mut spies, &mut residents, &plain);
    assert_eq!(got, want_plain);
    assert_eq!(uploads, vec![4, 4, 4]);
    // A count of residents that is not the count of devices is an error.
    let devices = spies.iter_mut().map(|s| s as &mut (dyn Backend + Send)).collect();
    assert!(run_devices_resident(&plain, devices, &opts, &mut residents[..2]).is_err());
    for (r, s) in residents.into_iter().zip(spies.iter_mut()) {
        r.release(s);
        assert_eq!(s.mem().in_use, 0);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_part_that_does_not_fit_the_memory_limit_stays_in_the_host_tier_and_is_not_kept() {
    use fox_runtime::{run_devices_resident, run_resident, DataSource, Database, NoProgress, Resident};
    let dir = temp_dir("resident-limit");
    let rows: Vec<(i32, String, f64, i64)> = (0..4000)
        .map(|k| (k % 97, format!("v{}", k % 13), k as f64, k as i64 * 3))
        .collect();
    let refs: Vec<(i32, &str, f64, i64)> = rows.iter().map(|(a, s, f, d)| (*a, s.as_str(), *f, *d)).collect();
    let p = load_plan(input_t(&dir, &refs));
    let db = Database::load(&DataSource::Files(dir.clone()), &[&p], &NoProgress).unwrap();
    let mut opts = RunOptions {
        database: Some(Arc::new(db)),
        ..RunOptions::default()
    };
    let mut one = Spy::new();
    let want = outputs_of(&run_resident(&p, &mut one, &opts, None).unwrap());
    // Each device's part of a column of 8-byte values is 16000 bytes: under a limit of
    // 12000 bytes those parts stay in the host tier and are not kept; the first column
    // (8000 bytes) is kept.
    opts.memory_limit = Some(12_000);
    let mut spies: Vec<Spy> = (0..2).map(|_| Spy::new()).collect();
    let mut residents: Vec<Resident> = (0..2).map(|_| Resident::default()).collect();
    for _ in 0..2 {
        let devices = spies.iter_mut().map(|s| s as &mut (dyn Backend + Send)).collect();
        let r = run_devices_resident(&p, devices, &opts, &mut residents).unwrap();
        assert_eq!(outputs_of(&r), want);
        for (d, res) in residents.iter().enumerate() {
            assert!(res.bytes() <= 12_000, "device {d} keeps {} bytes", res.bytes());
            assert_eq!(res.buffers(), 1, "device {d}");
        }
    }
    for (r, s) in residents.into_iter().zip(spies.iter_mut()) {
        r.release(s);
        assert_eq!(s.mem().in_use, 0);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A dictionary table that depends on the dictionary alone (lengths, ranks) over a
/// resident database is made once at every code, uploaded once to each device and kept:
/// later runs upload nothing. A query's pattern table (`like`) is made again by every
/// run (on several devices once, shared). Every run gives the values the run without a
/// resident gives (its table made at the codes the plan reads).
#[test]
fn a_dictionary_index_is_uploaded_once_per_device_and_kept_with_the_data() {
    use fox_runtime::{run_devices_resident, run_resident, DataSource, Database, NoProgress, Resident};
    let dir = temp_dir("resident-dict");
    let rows: Vec<(i32, String, f64, i64)> = (0..53)
        .map(|k| (k % 7, format!("s{}", k * k % 131), k as f64, k as i64))
        .collect();
    let refs: Vec<(i32, &str, f64, i64)> = rows.iter().map(|(a, s, f, d)| (*a, s.as_str(), *f, *d)).collect();
    let input = input_t(&dir, &refs);
    let cases = [
        (fox_kernel::DictOp::Strlen, Elem::I32, Type::Int32, 0),
        (fox_kernel::DictOp::Like("s1%".into()), Elem::U8, Type::Bool, 1),
    ];
    for (op, elem, ty, again) in cases {
        let mut bufs = buffers(&T);
        bufs.push(BufVar {
            name: "table".into(),
            elem,
            ty: None,
        });
        bufs.push(BufVar {
            name: "m".into(),
            elem,
            ty: Some(ty),
        });
        let p = plan(
            bufs,
            vec![input.clone()],
            vec![block(
                "main",
                vec![
                    launch(
                        Kernel::LoadInput {
                            input: 0,
                            whole: false,
                            hash: Vec::new(),
                        },
                        &[],
                        &[0, 1, 2, 3],
                    ),
                    launch(Kernel::DictTable { op: op.clone() }, &[], &[4]),
                    launch(Kernel::Gather { shift: 0 }, &[1, 4], &[5]),
                    output("t", &[("a", Type::Int32), ("s", Type::String), ("m", ty)], &[0, 1, 5]),
                ],
                Terminator::Halt,
            )],
        );
        let db = Database::load(&DataSource::Files(dir.clone()), &[&p], &NoProgress).unwrap();
        let opts = RunOptions {
            database: Some(Arc::new(db)),
            ..RunOptions::default()
        };
        let mut one = Spy::new();
        let want = outputs_of(&run_resident(&p, &mut one, &opts, None).unwrap());
        let values: Vec<Value> = want[0].1.iter().map(|r| r[2].clone()).collect();
        let expected: Vec<Value> = want[0]
            .1
            .iter()
            .map(|r| match (&op, &r[1]) {
                (fox_kernel::DictOp::Strlen, Value::String(s)) => Value::Int32(s.len() as i32),
                (_, Value::String(s)) => Value::Bool(s.starts_with("s1")),
                _ => unreachable!("a string column"),
            })
            .collect();
        assert_eq!(values, expected, "{op:?}");
        assert!(values.iter().any(|v| *v != values[0]), "{op:?}");
        one.uploads.clear();
        // One device: the two columns read and the table, then the pattern's table only
        // (the columns the plan does not read are empty).
        let mut resident = Resident::default();
        for uploads in [3, again, again] {
            let got = outputs_of(&run_resident(&p, &mut one, &opts, Some(&mut resident)).unwrap());
            assert_eq!(got, want, "{op:?}");
            let u = std::mem::take(&mut one.uploads);
            assert_eq!(u.iter().filter(|c| !c.is_empty()).count(), uploads, "{op:?}");
        }
        resident.release(&mut one);
        assert_eq!(one.mem().in_use, 0);
        // Three devices: each its part of the columns and the table, then as above.
        let mut spies: Vec<Spy> = (0..3).map(|_| Spy::new()).collect();
        let mut residents: Vec<Resident> = (0..3).map(|_| Resident::default()).collect();
        for uploads in [3, again] {
            let devices = spies.iter_mut().map(|s| s as &mut (dyn Backend + Send)).collect();
            let r = run_devices_resident(&p, devices, &opts, &mut residents).unwrap();
            let mut got = outputs_of(&r)[0].1.clone();
            let mut all = want[0].1.clone();
            let key = |r: &Vec<Value>| format!("{r:?}");
            got.sort_by_key(key);
            all.sort_by_key(key);
            assert_eq!(got, all, "{op:?}");
            for s in spies.iter_mut() {
                let u = std::mem::take(&mut s.uploads);
                assert_eq!(u.iter().filter(|c| !c.is_empty()).count(), uploads, "{op:?}");
            }
        }
        for (r, s) in residents.into_iter().zip(spies.iter_mut()) {
            r.release(s);
            assert_eq!(s.mem().in_use, 0);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An input loaded hashed on some columns puts on each device the rows that loading
/// slices and exchanging them by `Exchange::Hash` on those columns puts there, in the
/// same order, with no row moving; from a resident database each device's part is
/// uploaded once.
#[test]
fn an_input_loaded_hashed_holds_what_slices_exchanged_by_hash_hold() {
    use fox_runtime::{run_devices_resident, DataSource, Database, NoProgress, Resident};
    let dir = temp_dir("hashed-load");
    let rows: Vec<(i32, String, f64, i64)> = (0..101)
        .map(|k| {
            (
                (k * 13) % 17 - 8,
                format!("s{}", k % 9),
                (k % 5) as f64 - 2.0,
                k as i64 % 3,
            )
        })
        .collect();
    let refs: Vec<(i32, &str, f64, i64)> = rows.iter().map(|(a, s, f, d)| (*a, s.as_str(), *f, *d)).collect();
    let input = input_t(&dir, &refs);
    for keys in [vec![0], vec![1], vec![3, 2], vec![0, 1, 2, 3]] {
        let exchanged = exchange_plan(input.clone(), Exchange::Hash { cols: keys.clone() });
        let hashed = plan(
            buffers(&T),
            vec![input.clone()],
            vec![block(
                "main",
                vec![
                    launch(
                        Kernel::LoadInput {
                            input: 0,
                            whole: false,
                            hash: keys.clone(),
                        },
                        &[],
                        &[0, 1, 2, 3],
                    ),
                    output("t", &T_COLS, &[0, 1, 2, 3]),
                ],
                Terminator::Halt,
            )],
        );
        let opts = RunOptions {
            data_dir: Some(dir.clone()),
            ..RunOptions::default()
        };
        for n in 1..=4usize {
            let (want, want_up) = run_on(n, &exchanged, &opts);
            let (got, got_up) = run_on(n, &hashed, &opts);
            let (want, got) = (want.unwrap(), got.unwrap());
            assert_eq!(outputs_of(&got), outputs_of(&want), "{keys:?} on {n} devices");
            for d in 0..n {
                // The exchanged rows are the second group of uploads (on one device the
                // exchange shares its arguments).
                let received = if n == 1 { &want_up[d][0..4] } else { &want_up[d][4..8] };
                assert_eq!(
                    rows_of(&got_up[d][0..4]),
                    rows_of(received),
                    "{keys:?}: device {d} of {n}"
                );
            }
            if n > 1 {
                assert_eq!(got.stats.exchange.rows, 0);
            }
            // The input is routed once for all its devices.
            assert_eq!(got.stats.exchange.routings, u64::from(n > 1), "{keys:?} on {n} devices");
        }
        // From a resident database: each device's part once, then nothing.
        let db = Database::load(&DataSource::Files(dir.clone()), &[&hashed], &NoProgress).unwrap();
        let opts = RunOptions {
            database: Some(Arc::new(db)),
            ..RunOptions::default()
        };
        let (want, _) = run_on(
            3,
            &hashed,
            &RunOptions {
                data_dir: Some(dir.clone()),
                ..RunOptions::default()
            },
        );
        let want = outputs_of(&want.unwrap());
        let mut spies: Vec<Spy> = (0..3).map(|_| Spy::new()).collect();
        let mut residents: Vec<Resident> = (0..3).map(|_| Resident::default()).collect();
        // The first run routes the table; the second uploads nothing and needs no
        // routing; devices that hold no part yet upload theirs by the routing the
        // database kept.
        for (uploads, routings, fresh) in [(4, 1, false), (0, 0, false), (4, 0, true)] {
            if fresh {
                for (r, s) in std::mem::take(&mut residents).into_iter().zip(spies.iter_mut()) {
                    r.release(s);
                }
                residents = (0..3).map(|_| Resident::default()).collect();
            }
            let devices = spies.iter_mut().map(|s| s as &mut (dyn Backend + Send)).collect();
            let r = run_devices_resident(&hashed, devices, &opts, &mut residents).unwrap();
            assert_eq!(outputs_of(&r), want, "{keys:?}, resident");
            assert_eq!(r.stats.exchange.routings, routings, "{keys:?}, resident");
            for s in spies.iter_mut() {
                assert_eq!(std::mem::take(&mut s.uploads).len(), uploads, "{keys:?}");
            }
        }
        for (r, s) in residents.into_iter().zip(spies.iter_mut()) {
            r.release(s);
            assert_eq!(s.mem().in_use, 0);
        }
        // Over another number of devices the table is routed again.
        let mut spies: Vec<Spy> = (0..2).map(|_| Spy::new()).collect();
        let mut residents: Vec<Resident> = (0..2).map(|_| Resident::default()).collect();
        let devices = spies.iter_mut().map(|s| s as &mut (dyn Backend + Send)).collect();
        let r = run_devices_resident(&hashed, devices, &opts, &mut residents).unwrap();
        assert_eq!(r.stats.exchange.routings, 1, "{keys:?}, resident on 2 devices");
        for (r, s) in residents.into_iter().zip(spies.iter_mut()) {
            r.release(s);
            assert_eq!(s.mem().in_use, 0);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// What goes wrong on the troubled device of [`run_troubled`], at its `Eval` launches.
#[derive(Clone, Copy, Debug)]
enum Trouble {
    /// The first blocks until the run's stop flag is set: a kernel that would not end on
    /// its own (it gives up after a minute, so that a run that never sets the flag fails
    /// the test instead of hanging it).
    Stall,
    /// Each sleeps this long first: a device slower than the stall limit in all, but
    /// finishing an instruction within it.
    Slow(std::time::Duration),
    /// The `k`-th (from 0) fails.
    Fail(usize),
}

/// A CPU backend (linked to the others or not) that may be in trouble.
struct Troubled {
    cpu: fox_cpu::CpuBackend,
    trouble: Option<Trouble>,
    evals: usize,
}

impl Backend for Troubled {
    fn name(&self) -> String {
        self.cpu.name()
    }
    fn upload(&mut self, col: HostCol) -> Result<DevBuf, BackendError> {
        self.cpu.upload(col)
    }
    fn download(&mut self, buf: &DevBuf) -> Result<HostCol, BackendError> {
        self.cpu.download(buf)
    }
    fn launch(&mut self, k: &Kernel, args: &[&DevBuf], ctx: &dyn LaunchCtx) -> Result<Vec<DevBuf>, BackendError> {
        if matches!(k, Kernel::Eval { .. }) {
            let nth = self.evals;
            self.evals += 1;
            match self.trouble {
                Some(Trouble::Stall) if nth == 0 => {
                    let started = std::time::Instant::now();
                    while !ctx.cancel_flag().load(std::sync::atomic::Ordering::Relaxed) {
                        if started.elapsed() > std::time::Duration::from_secs(60) {
                            return Err(BackendError("the run never set the stop flag".into()));
                        }
                        std::thread::sleep(std::time::Duration::from_millis(2));
                    }
                    return Err(BackendError("stopped".into()));
                }
                Some(Trouble::Slow(d)) => std::thread::sleep(d),
                Some(Trouble::Fail(k)) if k == nth => {
                    return Err(BackendError(format!("the device failed at its launch {nth}")))
                }
                _ => {}
            }
        }
        fox_runtime::launch_kernel(&mut self.cpu, k, args, ctx)
    }
    fn free(&mut self, buf: DevBuf) {
        self.cpu.free(buf)
    }
    fn sync(&mut self) -> Result<(), BackendError> {
        self.cpu.sync()
    }
    fn mem(&self) -> MemStats {
        self.cpu.mem()
    }
    fn reset_peak(&mut self) {
        self.cpu.reset_peak()
    }
    fn route_rows(
        &mut self,
        cols: &[&DevBuf],
        keys: &[usize],
        devices: usize,
    ) -> Result<Option<Vec<Vec<DevBuf>>>, BackendError> {
        self.cpu.route_rows(cols, keys, devices)
    }
    fn has_peer_link(&self) -> bool {
        self.cpu.has_peer_link()
    }
    fn peer_exchange(
        &mut self,
        send: &[Vec<&DevBuf>],
        recv_rows: &[usize],
        elems: &[Elem],
        meet: &mut fox_runtime::Meet<'_>,
    ) -> Result<Vec<DevBuf>, BackendError> {
        self.cpu.peer_exchange(send, recv_rows, elems, meet)
    }
}

/// 24 constant rows kept spread over the devices, `evals` steps of `+ 1` on each device
/// (every one an instruction of its own), then gathered on device 0 and output.
fn steps_plan(evals: usize) -> KernelPlan {
    let rows: Vec<Vec<Value>> = (0..24).map(|v| vec![Value::Int32(v)]).collect();
    let int = |kind| KExpr { kind, ty: Type::Int32 };
    let plus_one = int(KExprKind::Arith(
        ArithOp::Add,
        Box::new(int(KExprKind::Col(0))),
        Box::new(int(KExprKind::Const(Value::Int32(1)))),
    ));
    let mut instrs = vec![
        launch(
            Kernel::Const {
                types: vec![Type::Int32],
                rows,
            },
            &[],
            &[0],
        ),
        launch(
            Kernel::Exchange {
                width: 1,
                to: Exchange::Keep { cols: vec![0] },
            },
            &[0],
            &[1],
        ),
    ];
    for e in 0..evals as u32 {
        instrs.push(launch(
            Kernel::Eval {
                expr: plus_one.clone(),
                n_cols: 1,
            },
            &[1 + e],
            &[2 + e],
        ));
    }
    let last = 1 + evals as u32;
    instrs.push(launch(
        Kernel::Exchange {
            width: 1,
            to: Exchange::Gather,
        },
        &[last],
        &[last + 1],
    ));
    instrs.push(output("v", &[("v", Type::Int32)], &[last + 1]));
    plan(
        buffers(&vec![Type::Int32; evals + 3]),
        Vec::new(),
        vec![block("main", instrs, Terminator::Halt)],
    )
}

/// Runs `plan` over `n` CPU backends (linked, so that exchanges move rows backend to
/// backend, or not, so that the runtime stages them), device `on` in `trouble`; the
/// result and how long the run took. Every device's buffers are freed whatever the
/// result.
fn run_troubled(
    n: usize,
    plan: &KernelPlan,
    opts: &RunOptions,
    on: usize,
    trouble: Trouble,
    linked: bool,
) -> (Result<RunResult, RuntimeError>, std::time::Duration) {
    let cpus = if linked {
        fox_cpu::CpuBackend::linked(n)
    } else {
        (0..n).map(|_| fox_cpu::CpuBackend::new()).collect()
    };
    let mut devices: Vec<Troubled> = cpus
        .into_iter()
        .enumerate()
        .map(|(d, cpu)| Troubled {
            cpu,
            trouble: (d == on).then_some(trouble),
            evals: 0,
        })
        .collect();
    let started = std::time::Instant::now();
    let res = run_devices(
        plan,
        devices.iter_mut().map(|s| s as &mut (dyn Backend + Send)).collect(),
        opts,
        None,
    );
    let took = started.elapsed();
    for (d, s) in devices.iter().enumerate() {
        assert_eq!(s.mem().in_use, 0, "device {d} of {n} kept buffers");
    }
    (res, took)
}

#[test]
fn a_device_that_stalls_is_named_once_no_device_made_progress_for_the_stall_limit() {
    let p = steps_plan(1);
    let limit = std::time::Duration::from_millis(300);
    let opts = RunOptions {
        stall_timeout: Some(limit),
        ..RunOptions::default()
    };
    for linked in [false, true] {
        for (n, waiting) in [(2, "device 0 was"), (3, "devices 0 and 2 were")] {
            let (res, took) = run_troubled(n, &p, &opts, 1, Trouble::Stall, linked);
            let e = res.unwrap_err().to_string();
            let want = format!(
                "block `main` (0), instruction 3 (exchange): device 1 did not reach this collective, where \
                 {waiting} waiting: no device made progress for 0.3 s (the stall limit; FOX_STALL_TIMEOUT_S sets it)"
            );
            assert_eq!(e, want, "{n} devices, linked {linked}");
            assert!(
                took >= limit && took < std::time::Duration::from_secs(20),
                "{n} devices took {took:?}"
            );
        }
    }
}

#[test]
fn a_device_slower_than_the_stall_limit_in_all_but_making_progress_is_waited_for() {
    let p = steps_plan(24);
    let (want, _) = run_troubled(1, &p, &RunOptions::default(), 25, Trouble::Fail(0), false);
    let want = want.unwrap();
    // Each step is a twelfth of the limit, so a loaded machine's scheduling delays (of either
    // device) stay far inside it, while the whole slow part lasts twice the limit.
    let limit = std::time::Duration::from_millis(1200);
    let opts = RunOptions {
        stall_timeout: Some(limit),
        ..RunOptions::default()
    };
    for linked in [false, true] {
        // Device 1 takes 24 times 100 ms before the gather, twice the limit.
        let (res, took) = run_troubled(
            2,
            &p,
            &opts,
            1,
            Trouble::Slow(std::time::Duration::from_millis(100)),
            linked,
        );
        let res = res.unwrap_or_else(|e| panic!("linked {linked}: {e}"));
        assert!(took > 2 * limit, "{took:?}");
        assert_eq!(res.outputs[0].rows(), want.outputs[0].rows(), "linked {linked}");
    }
}

#[test]
fn a_device_that_fails_gives_its_own_error_and_the_others_stop() {
    let p = steps_plan(4);
    for linked in [false, true] {
        for n in [2, 3] {
            let (res, took) = run_troubled(n, &p, &RunOptions::default(), 1, Trouble::Fail(2), linked);
            let e = res.unwrap_err().to_string();
            assert_eq!(
                e, "block `main` (0), instruction 4 (eval): the device failed at its launch 2",
                "{n} devices, linked {linked}"
            );
            assert!(took < std::time::Duration::from_secs(20), "{took:?}");
        }
    }
}

#[test]
fn cancelling_stops_a_device_inside_a_kernel_long_before_the_stall_limit() {
    let p = steps_plan(1);
    for linked in [false, true] {
        let cancel = CancelToken::new();
        let opts = RunOptions {
            cancel: Some(cancel.clone()),
            stall_timeout: Some(std::time::Duration::from_secs(600)),
            ..RunOptions::default()
        };
        let stopper = {
            let cancel = cancel.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(200));
                cancel.cancel();
            })
        };
        // Device 1's kernel ends only when the kernels' stop flag is set.
        let (res, took) = run_troubled(2, &p, &opts, 1, Trouble::Stall, linked);
        stopper.join().unwrap();
        assert_eq!(res.unwrap_err(), RuntimeError::Cancelled, "linked {linked}");
        assert!(took < std::time::Duration::from_secs(20), "{took:?}");
    }
}

/// Two loops over claimed boxes one after the other, in blocks each device runs by
/// itself: each expands the rows `0 .. values.len()` of `values` in `boxes` boxes, every
/// device taking the boxes it claims, and keeps `v + 1 / (v - z)` of each row (`v` when
/// `z` is far, a division by zero at `v = z`); after each loop the rows meet on device 0
/// (`Gather`) and are output, as `q` and `r`.
fn claim_plan(values: &[i32], z: i32, boxes: u32) -> KernelPlan {
    use Type::Int32 as I;
    let rows: Vec<Vec<Value>> = values.iter().map(|&v| vec![Value::Int32(v)]).collect();
    // b0 values, b1 lo, b2 hi, b3 counts, b4 offsets, b5 total; per loop (k = 0, 1, from
    // b6 + 9k): window, parent, pos, v, q, acc, grown, next window, all.
    let mut bufs = buffers(&[I]);
    for (name, elem) in [
        ("lo", Elem::U32),
        ("hi", Elem::U32),
        ("counts", Elem::U64),
        ("offsets", Elem::U64),
        ("total", Elem::U64),
    ] {
        bufs.push(BufVar {
            name: name.into(),
            elem,
            ty: None,
        });
    }
    for k in 0..2 {
        for (name, elem, ty) in [
            ("window", Elem::U64, None),
            ("parent", Elem::U32, None),
            ("pos", Elem::U32, None),
            ("v", Elem::I32, Some(I)),
            ("q", Elem::I32, Some(I)),
            ("acc", Elem::I32, Some(I)),
            ("grown", Elem::I32, Some(I)),
            ("next", Elem::U64, None),
            ("all", Elem::I32, Some(I)),
        ] {
            bufs.push(BufVar {
                name: format!("{name}{k}"),
                elem,
                ty,
            });
        }
    }
    let int = |kind| KExpr { kind, ty: I };
    let col = || int(KExprKind::Col(0));
    let expr = int(KExprKind::Arith(
        ArithOp::Add,
        Box::new(col()),
        Box::new(int(KExprKind::Arith(
            ArithOp::Div,
            Box::new(int(KExprKind::Const(Value::Int32(1)))),
            Box::new(int(KExprKind::Arith(
                ArithOp::Sub,
                Box::new(col()),
                Box::new(int(KExprKind::Const(Value::Int32(z)))),
            ))),
        ))),
    ));
    let local = |label: &str, instrs: Vec<Instr>, term: Terminator| Block {
        local: true,
        ..block(label, instrs, term)
    };
    let claim = Kernel::Claim { boxes, row_bytes: None };
    let mut blocks = vec![block(
        "main",
        vec![
            launch(Kernel::Const { types: vec![I], rows }, &[], &[0]),
            launch(Kernel::RootRange, &[0], &[1, 2]),
            launch(Kernel::RangeCount, &[1, 2], &[3]),
            launch(Kernel::ExclusiveScan, &[3], &[4, 5]),
        ],
        Terminator::Jump(BlockId(1)),
    )];
    for k in 0..2u32 {
        let b = |i: u32| 6 + 9 * k + i;
        let (head, body, exit) = (1 + 3 * k, 2 + 3 * k, 3 + 3 * k);
        let name = if k == 0 { "q" } else { "r" };
        blocks[head as usize - 1].instrs.push(launch(
            Kernel::Const {
                types: vec![I],
                rows: Vec::new(),
            },
            &[],
            &[b(5)],
        ));
        let test = Terminator::LoopIf {
            nonempty: vec![BufId(b(0))],
            body: BlockId(body),
            exit: BlockId(exit),
        };
        blocks.push(local("boxes", vec![launch(claim.clone(), &[5], &[b(0)])], test.clone()));
        blocks.push(local(
            "box",
            vec![
                launch(Kernel::Expand, &[1, 4, 5, b(0)], &[b(1), b(2)]),
                launch(Kernel::Gather { shift: 0 }, &[b(2), 0], &[b(3)]),
                launch(
                    Kernel::Eval {
                        expr: expr.clone(),
                        n_cols: 1,
                    },
                    &[b(3)],
                    &[b(4)],
                ),
                launch(Kernel::Concat { parts: 2, width: 1 }, &[b(5), b(4)], &[b(6)]),
                Instr::Move {
                    dst: BufId(b(5)),
                    src: BufId(b(6)),
                },
                launch(claim.clone(), &[5, b(0)], &[b(7)]),
                Instr::Move {
                    dst: BufId(b(0)),
                    src: BufId(b(7)),
                },
            ],
            test,
        ));
        blocks.push(block(
            "after the boxes",
            vec![
                launch(
                    Kernel::Exchange {
                        width: 1,
                        to: Exchange::Gather,
                    },
                    &[b(5)],
                    &[b(8)],
                ),
                output(name, &[("v", I)], &[b(8)]),
            ],
            if k == 0 {
                Terminator::Jump(BlockId(exit + 1))
            } else {
                Terminator::Halt
            },
        ));
    }
    plan(bufs, Vec::new(), blocks)
}

/// Each device of a loop over claimed boxes decides its loop by itself and takes boxes
/// until none is left: every row is found exactly once on 1 to 4 devices, the boxes
/// taken add up to the boxes of both loops as the run's devices cut them (the second
/// loop's boxes are its own), and the outputs are one device's.
#[test]
fn devices_take_every_box_once_and_give_one_device_s_rows() {
    let values: Vec<i32> = (0..997).map(|i| (i * 7919) % 1009).collect();
    let boxes = 23;
    let p = claim_plan(&values, -5000, boxes);
    fox_kernel::validate(&p).unwrap();
    let mut want: Vec<i32> = values.clone();
    want.sort_unstable();
    let want: Vec<Vec<Value>> = want.into_iter().map(|v| vec![Value::Int32(v)]).collect();
    for n in 1..=4 {
        let (res, _) = run_on(n, &p, &RunOptions::default());
        let res = res.unwrap_or_else(|e| panic!("{n} devices: {e}"));
        let outs = outputs_of(&res);
        assert_eq!(outs.len(), 2);
        for (name, rows) in &outs {
            assert_eq!(rows, &want, "{name} on {n} devices");
        }
        let cut = u64::from(fox_runtime::box_count(values.len() as u64, boxes, n));
        assert!(cut >= n as u64 && cut <= u64::from(boxes), "{n} devices: {cut} boxes");
        assert_eq!(res.stats.boxes, 2 * cut, "{n} devices");
        if n > 1 {
            assert_eq!(res.stats.device_boxes.len(), n);
            assert_eq!(res.stats.device_boxes.iter().sum::<u64>(), 2 * cut);
        }
    }
    // Fewer rows than boxes: the empty boxes are skipped.
    let p = claim_plan(&[4, 1, 3], -5000, 64);
    for n in 1..=3 {
        let (res, _) = run_on(n, &p, &RunOptions::default());
        let res = res.unwrap_or_else(|e| panic!("{n} devices: {e}"));
        for (name, rows) in outputs_of(&res) {
            assert_eq!(rows.len(), 3, "{name} on {n} devices");
        }
    }
}

/// A device that fails on a box it claimed stops every device (the others at their next
/// claim or collective), and its error is the run's, as on one device (the row it names
/// is one of the box's, and boxes are cut by the number of devices); every device frees
/// its buffers.
#[test]
fn an_error_in_a_claimed_box_stops_every_device_with_it() {
    let values: Vec<i32> = (0..500).collect();
    let p = claim_plan(&values, 311, 16);
    let (one, _) = run_on(1, &p, &RunOptions::default());
    let want = one.unwrap_err();
    assert!(want.to_string().contains("division by zero"), "{want}");
    let without_row = |e: &fox_runtime::RuntimeError| {
        let t = e.to_string();
        t.rfind(" (row ").map_or(t.clone(), |k| t[..k].to_string())
    };
    for n in 2..=4 {
        let started = std::time::Instant::now();
        let (res, _) = run_on(n, &p, &RunOptions::default());
        let got = res.unwrap_err();
        assert_eq!(without_row(&got), without_row(&want), "{n} devices");
        assert!(got.to_string().contains(" (row "), "{got}");
        assert!(
            started.elapsed().as_secs() < 30,
            "{n} devices took {:?}",
            started.elapsed()
        );
    }
}

/// A block each device runs by itself holds no collective, and a claim of boxes is in
/// such a block: other plans are refused.
#[test]
fn a_collective_in_a_block_each_device_runs_alone_is_refused() {
    let mut p = claim_plan(&[1, 2, 3], -5000, 4);
    let gather = p.blocks[3].instrs.remove(0);
    p.blocks[2].instrs.insert(0, gather);
    let e = fox_kernel::validate(&p).unwrap_err().to_string();
    assert!(e.contains("a collective in a block each device runs by itself"), "{e}");
    // A claim in a block the devices run together (their loop test would be collective).
    let mut p = claim_plan(&[1, 2, 3], -5000, 4);
    p.blocks[1].local = false;
    let e = fox_kernel::validate(&p).unwrap_err().to_string();
    assert!(
        e.contains("a claim of boxes in a block the devices run together"),
        "{e}"
    );
}
