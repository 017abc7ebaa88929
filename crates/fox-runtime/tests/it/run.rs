//! The interpreter on a backend that only stores buffers: host-side instructions (inputs,
//! constants, dictionary tables, string functions), `Move`/`Free` reference counting, outputs,
//! and clean errors for inconsistent plans.

use fox_kernel::{
    Block, BlockId, BufId, BufVar, DictOp, Elem, InputRel, Instr, KExpr, KExprKind, Kernel, KernelPlan, StrFunc,
    Terminator, KERNEL_PLAN_VERSION,
};
use fox_runtime::{run, Backend, BackendError, DevBuf, HostCol, LaunchCtx, MemStats, RunOptions, RuntimeError};
use fox_sema::core::{ArithOp, Column, Type, Value};
use std::collections::HashMap;

/// Stores uploaded columns and counts bytes; runs no kernel.
#[derive(Default)]
struct Store {
    bufs: HashMap<u64, HostCol>,
    next: u64,
    mem: MemStats,
    frees: usize,
    /// Every uploaded column, in upload order.
    uploads: Vec<HostCol>,
}

impl Backend for Store {
    fn name(&self) -> String {
        "store".into()
    }
    fn upload(&mut self, col: HostCol) -> Result<DevBuf, BackendError> {
        self.next += 1;
        let buf = DevBuf {
            id: self.next,
            elem: col.elem(),
            len: col.len(),
        };
        self.mem.in_use += buf.bytes();
        self.mem.total_allocated += buf.bytes();
        self.mem.peak = self.mem.peak.max(self.mem.in_use);
        self.uploads.push(col.clone());
        self.bufs.insert(buf.id, col);
        Ok(buf)
    }
    fn download(&mut self, buf: &DevBuf) -> Result<HostCol, BackendError> {
        self.bufs
            .get(&buf.id)
            .cloned()
            .ok_or_else(|| BackendError(format!("no buffer {}", buf.id)))
    }
    /// Runs `Slice` of one i32 column (the loop test below needs a shrinking buffer) and
    /// no other kernel.
    fn launch(&mut self, k: &Kernel, args: &[&DevBuf], _: &dyn LaunchCtx) -> Result<Vec<DevBuf>, BackendError> {
        match (k, args) {
            (Kernel::Slice { start, len }, [a]) => match self.bufs.get(&a.id) {
                Some(HostCol::I32(v)) => {
                    let from = (*start as usize).min(v.len());
                    let to = from.saturating_add(*len as usize).min(v.len());
                    let part = HostCol::I32(v[from..to].to_vec());
                    Ok(vec![self.upload(part)?])
                }
                _ => Err(BackendError("the store backend slices one i32 column".into())),
            },
            _ => Err(BackendError("the store backend runs no kernels but Slice".into())),
        }
    }
    fn free(&mut self, buf: DevBuf) {
        let col = self.bufs.remove(&buf.id).expect("a buffer is freed once");
        self.mem.in_use -= col.len() * col.elem().size();
        self.frees += 1;
    }
    fn sync(&mut self) -> Result<(), BackendError> {
        Ok(())
    }
    fn mem(&self) -> MemStats {
        self.mem
    }
    fn reset_peak(&mut self) {
        self.mem.peak = self.mem.in_use;
    }
}

fn col(name: &str, ty: Type) -> Column {
    Column { name: name.into(), ty }
}

fn buf(name: &str, elem: Elem, ty: Option<Type>) -> BufVar {
    BufVar {
        name: name.into(),
        elem,
        ty,
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

fn output(name: &str, columns: Vec<Column>, cols: &[u32], order: Vec<(usize, bool)>, limit: Option<u64>) -> Instr {
    Instr::Output {
        name: name.into(),
        columns,
        cols: cols.iter().map(|&b| BufId(b)).collect(),
        order,
        limit,
    }
}

/// A plan of one block `instrs` over `buffers` and `inputs`, planned to hold 3 buffers.
pub(crate) fn plan(buffers: Vec<BufVar>, inputs: Vec<InputRel>, instrs: Vec<Instr>) -> KernelPlan {
    KernelPlan {
        version: KERNEL_PLAN_VERSION,
        buffers,
        inputs,
        blocks: vec![Block {
            label: "main".into(),
            local: false,
            instrs,
            term: Terminator::Halt,
        }],
        entry: BlockId(0),
        planned_peak_buffers: 3,
        sources: Vec::new(),
        observed: Vec::new(),
    }
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("fox-runtime-run-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn people_input() -> InputRel {
    InputRel {
        name: "person".into(),
        columns: vec![col("name", Type::String), col("age", Type::Int32)],
        file: "person.csv".into(),
        sep: ",".into(),
        key: Vec::new(),
        header: false,
    }
}

fn s(x: &str) -> Value {
    Value::String(x.into())
}

#[test]
fn load_then_output_orders_strings_by_text() {
    let dir = temp_dir("load");
    std::fs::write(dir.join("person.csv"), "carol,30\nalice,41\nbob,30\n\"dave, jr\",7\n").unwrap();
    let p = plan(
        vec![
            buf("person.name", Elem::U32, Some(Type::String)),
            buf("person.age", Elem::I32, Some(Type::Int32)),
        ],
        vec![people_input()],
        vec![
            launch(
                Kernel::LoadInput {
                    input: 0,
                    whole: false,
                    hash: Vec::new(),
                },
                &[],
                &[0, 1],
            ),
            output("by_age", people_input().columns, &[0, 1], vec![(1, true)], Some(3)),
            output("all", people_input().columns, &[0, 1], vec![], None),
            Instr::Free { buf: BufId(0) },
            Instr::Free { buf: BufId(1) },
        ],
    );
    let mut be = Store::default();
    let opts = RunOptions {
        data_dir: Some(dir.clone()),
        timing: true,
        ..Default::default()
    };
    let r = run(&p, &mut be, &opts).unwrap();
    assert_eq!(r.outputs.len(), 2);
    assert_eq!(r.outputs[0].name, "by_age");
    assert_eq!(
        r.outputs[0].rows(),
        vec![
            vec![s("alice"), Value::Int32(41)],
            vec![s("bob"), Value::Int32(30)],
            vec![s("carol"), Value::Int32(30)]
        ]
    );
    assert_eq!(r.outputs[1].rows()[0], vec![s("alice"), Value::Int32(41)]);
    assert_eq!(r.outputs[1].rows()[3], vec![s("dave, jr"), Value::Int32(7)]);
    assert_eq!(be.mem.in_use, 0);
    assert_eq!(be.mem.peak, 4 * 4 + 4 * 4);
    assert_eq!(r.stats.peak_bytes, 32);
    assert_eq!(r.stats.planned_peak_buffers, 3);
    assert_eq!(r.stats.actual_peak_buffers, 2);
    let kernels: Vec<&str> = r.stats.instrs.iter().map(|i| i.kernel.as_str()).collect();
    assert_eq!(kernels, vec!["load_input[person]", "output by_age", "output all"]);
    let report = fox_runtime::format_stats(&r.stats);
    assert!(report.contains("load_input[person]"), "{report}");
    // The report's names are the ones `foxc compile --emit kernels` prints.
    let printed = fox_kernel::print_kernels(&p);
    for k in kernels {
        assert!(printed.contains(k), "{k} is not in:\n{printed}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Codes are assigned in sorted order over data strings and plan constants together;
/// `substr`/`concat` append, after which `Rank` gives string order. The same holds, code
/// for code, when the inputs were read before the run (`run_loaded`): the constants the
/// data lacks join the dictionary in their place.
#[test]
fn dictionary_codes_constants_and_string_functions() {
    dictionary_codes(false);
    dictionary_codes(true);
}

fn dictionary_codes(preloaded: bool) {
    let dir = temp_dir(if preloaded { "dict-loaded" } else { "dict" });
    std::fs::write(dir.join("person.csv"), "mallory,1\nbob,2\n").unwrap();
    let buffers = vec![
        buf("person.name", Elem::U32, Some(Type::String)),
        buf("person.age", Elem::I32, Some(Type::Int32)),
        buf("c.s", Elem::U32, Some(Type::String)),
        buf("c.start", Elem::I64, Some(Type::Int64)),
        buf("c.len", Elem::I64, Some(Type::Int64)),
        buf("sub", Elem::U32, Some(Type::String)),
        buf("cat", Elem::U32, Some(Type::String)),
        buf("rank", Elem::U32, None),
        buf("like", Elem::U8, None),
        buf("len", Elem::I32, None),
    ];
    let consts = Kernel::Const {
        types: vec![Type::String, Type::Int64, Type::Int64],
        rows: vec![
            vec![s("zed"), Value::Int64(1), Value::Int64(2)],
            vec![s("alpha"), Value::Int64(2), Value::Int64(3)],
        ],
    };
    let p = plan(
        buffers,
        vec![people_input()],
        vec![
            launch(
                Kernel::LoadInput {
                    input: 0,
                    whole: false,
                    hash: Vec::new(),
                },
                &[],
                &[0, 1],
            ),
            launch(consts, &[], &[2, 3, 4]),
            launch(Kernel::StrFn { func: StrFunc::Substr }, &[2, 3, 4], &[5]),
            launch(Kernel::StrFn { func: StrFunc::Concat }, &[2, 5], &[6]),
            launch(Kernel::DictTable { op: DictOp::Rank }, &[], &[7]),
            launch(
                Kernel::DictTable {
                    op: DictOp::Like("%e%".into()),
                },
                &[],
                &[8],
            ),
            launch(Kernel::DictTable { op: DictOp::Strlen }, &[], &[9]),
            output(
                "names",
                vec![col("s", Type::String), col("sub", Type::String)],
                &[2, 6],
                vec![],
                None,
            ),
            // Reads the input's names, so they are loaded (unread columns are not).
            output("people", vec![col("name", Type::String)], &[0], vec![], None),
        ],
    );
    let mut be = Store::default();
    let opts = RunOptions {
        data_dir: Some(dir.clone()),
        timing: false,
        ..Default::default()
    };
    let r = if preloaded {
        let wanted: Vec<(InputRel, Vec<bool>)> = p
            .inputs
            .iter()
            .cloned()
            .zip(fox_runtime::database::used_input_columns(&p))
            .collect();
        let inputs = fox_runtime::LoadedInputs::load(&dir, &wanted, None, None).unwrap();
        // Before the constants: bob=0, mallory=1.
        let stats = inputs.statistics();
        let name = stats.column("person", 0).unwrap();
        assert_eq!(
            (name.min.clone(), name.max.clone()),
            (Some(s("bob")), Some(s("mallory")))
        );
        assert!(!name.sorted);
        assert_eq!(stats.column("person", 1), None, "the age is not read");
        assert_eq!(stats.get("person").map(|r| r.rows), Some(2));
        fox_runtime::run_loaded(&p, &mut be, &opts, inputs).unwrap()
    } else {
        run(&p, &mut be, &opts).unwrap()
    };
    // Data and constants: alpha=0, bob=1, mallory=2, zed=3. substr gives "ze" (new, 4)
    // and "lph" (new, 5); concat gives "zedze" (6) and "alphalph" (7).
    assert_eq!(
        r.outputs[0].rows(),
        vec![vec![s("alpha"), s("alphalph")], vec![s("zed"), s("zedze")]]
    );
    // Every buffer, defined or not freed by the plan, is freed at the end.
    assert_eq!(be.mem.in_use, 0);
    assert_eq!(be.frees, 10);
    // Input codes follow string order: bob=1, mallory=2.
    assert_eq!(be.uploads[0], HostCol::U32(vec![2, 1]));
    assert_eq!(be.uploads[2], HostCol::U32(vec![3, 0]));
    assert_eq!(be.uploads[5], HostCol::U32(vec![4, 5]));
    assert_eq!(be.uploads[6], HostCol::U32(vec![6, 7]));
    // The tables over [alpha, bob, mallory, zed, ze, lph, zedze, alphalph].
    assert_eq!(be.uploads[7], HostCol::U32(vec![0, 2, 4, 6, 5, 3, 7, 1]));
    assert_eq!(be.uploads[8], HostCol::U8(vec![0, 0, 0, 1, 1, 0, 1, 0]));
    assert_eq!(be.uploads[9], HostCol::I32(vec![5, 3, 7, 3, 2, 3, 5, 8]));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn move_shares_a_buffer_until_its_last_name_is_freed() {
    let p = plan(
        vec![
            buf("a", Elem::I32, Some(Type::Int32)),
            buf("b", Elem::I32, Some(Type::Int32)),
        ],
        vec![],
        vec![
            launch(
                Kernel::Const {
                    types: vec![Type::Int32],
                    rows: vec![vec![Value::Int32(2)], vec![Value::Int32(1)]],
                },
                &[],
                &[0],
            ),
            Instr::Move {
                dst: BufId(1),
                src: BufId(0),
            },
            Instr::Free { buf: BufId(0) },
            output("b", vec![col("x", Type::Int32)], &[1], vec![], None),
            // Redefining `a` while `b` still holds the first array keeps that array.
            launch(
                Kernel::Const {
                    types: vec![Type::Int32],
                    rows: vec![vec![Value::Int32(9)]],
                },
                &[],
                &[0],
            ),
            Instr::Move {
                dst: BufId(1),
                src: BufId(0),
            },
            output("b2", vec![col("x", Type::Int32)], &[1], vec![], None),
            Instr::Free { buf: BufId(0) },
            Instr::Free { buf: BufId(1) },
        ],
    );
    let mut be = Store::default();
    let r = run(&p, &mut be, &RunOptions::default()).unwrap();
    assert_eq!(r.outputs[0].rows(), vec![vec![Value::Int32(1)], vec![Value::Int32(2)]]);
    assert_eq!(r.outputs[1].rows(), vec![vec![Value::Int32(9)]]);
    assert_eq!(be.frees, 2);
    assert_eq!(be.mem.in_use, 0);
    assert_eq!(be.mem.peak, 12);
}

#[test]
fn a_relation_without_columns_outputs_its_row_count() {
    let p = plan(
        vec![buf("p.$rows", Elem::U8, None)],
        vec![],
        vec![
            launch(
                Kernel::Const {
                    types: vec![],
                    rows: vec![vec![]],
                },
                &[],
                &[0],
            ),
            output("p", vec![], &[0], vec![], None),
        ],
    );
    let r = run(&p, &mut Store::default(), &RunOptions::default()).unwrap();
    assert_eq!(r.outputs[0].rows(), vec![Vec::<Value>::new()]);
    assert_eq!(fox_runtime::format_table(&r.outputs[0]), "true\n1 row\n");
}

fn plan_error(p: &KernelPlan) -> String {
    let mut be = Store::default();
    let e = run(p, &mut be, &RunOptions::default()).unwrap_err();
    assert_eq!(be.mem.in_use, 0, "everything is freed after an error");
    match e {
        RuntimeError::Plan(_) => e.to_string(),
        other => panic!("not a plan error: {other}"),
    }
}

fn one_const() -> Instr {
    launch(
        Kernel::Const {
            types: vec![Type::Int32],
            rows: vec![vec![Value::Int32(1)]],
        },
        &[],
        &[0],
    )
}

#[test]
fn inconsistent_plans_are_clean_errors() {
    let bufs = || {
        vec![
            buf("a", Elem::I32, Some(Type::Int32)),
            buf("b", Elem::I32, Some(Type::Int32)),
        ]
    };
    // A use of a buffer that is not defined.
    let e = plan_error(&plan(
        bufs(),
        vec![],
        vec![
            one_const(),
            output("o", vec![col("x", Type::Int32)], &[1], vec![], None),
        ],
    ));
    assert_eq!(
        e,
        "inconsistent plan: block `main` (0), instruction 1 (output `o`): reads buffer `b` (b1), which is not defined here"
    );
    // A buffer that does not exist.
    let e = plan_error(&plan(
        bufs(),
        vec![],
        vec![
            one_const(),
            Instr::Move {
                dst: BufId(1),
                src: BufId(7),
            },
        ],
    ));
    assert!(
        e.contains("instruction 1: Move reads buffer b7, which does not exist"),
        "{e}"
    );
    // Used after it was freed.
    let e = plan_error(&plan(
        bufs(),
        vec![],
        vec![
            one_const(),
            Instr::Free { buf: BufId(0) },
            launch(Kernel::StrFn { func: StrFunc::Concat }, &[0, 0], &[1]),
        ],
    ));
    assert!(
        e.contains("instruction 2 (concat): reads buffer `a` (b0), which is not defined here"),
        "{e}"
    );
    // An output whose types do not match its buffers.
    let e = plan_error(&plan(
        bufs(),
        vec![],
        vec![
            one_const(),
            output("o", vec![col("x", Type::String)], &[0], vec![], None),
        ],
    ));
    assert!(
        e.contains("column `x` of type string is held in a buffer of I32 elements"),
        "{e}"
    );
    // A const value of the wrong type, an output ordered by a missing column, a missing input.
    let e = plan_error(&plan(
        bufs(),
        vec![],
        vec![launch(
            Kernel::Const {
                types: vec![Type::Int32],
                rows: vec![vec![Value::Bool(true)]],
            },
            &[],
            &[0],
        )],
    ));
    assert!(e.contains("is not a value of type int32"), "{e}");
    let e = plan_error(&plan(
        bufs(),
        vec![],
        vec![
            one_const(),
            output("o", vec![col("x", Type::Int32)], &[0], vec![(3, true)], None),
        ],
    ));
    assert!(e.contains("ordered by column 3"), "{e}");
    let e = plan_error(&plan(
        bufs(),
        vec![],
        vec![launch(
            Kernel::LoadInput {
                input: 2,
                whole: false,
                hash: Vec::new(),
            },
            &[],
            &[0],
        )],
    ));
    assert!(e.contains("LoadInput of input 2, but the plan has 0 inputs"), "{e}");
    // A jump to a block that does not exist, and a loop test of an undefined buffer.
    let mut p = plan(bufs(), vec![], vec![one_const()]);
    p.blocks[0].term = Terminator::Jump(BlockId(5));
    assert!(plan_error(&p).contains("jumps to block 5, which does not exist"));
    p.blocks[0].term = Terminator::LoopIf {
        nonempty: vec![BufId(1)],
        body: BlockId(0),
        exit: BlockId(0),
    };
    assert!(plan_error(&p).contains("the loop test reads buffer `b` (b1), which is not defined here"));
    // A kernel output declared with another element type than it produces.
    let e = plan_error(&plan(vec![buf("a", Elem::F64, None)], vec![], vec![one_const()]));
    assert!(e.contains("output 1 is I32 but buffer `a` (b0) is declared F64"), "{e}");
}

/// `b0 := const(rows i32 rows)`, one per row count, then `launch` over them.
fn consts_then(rows: &[usize], kernel: Kernel, args: &[u32], outs: &[(Elem, u32)]) -> KernelPlan {
    let mut bufs: Vec<BufVar> = (0..rows.len())
        .map(|i| buf(&format!("c{i}"), Elem::I32, Some(Type::Int32)))
        .collect();
    let mut instrs: Vec<Instr> = rows
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            launch(
                Kernel::Const {
                    types: vec![Type::Int32],
                    rows: (0..n).map(|r| vec![Value::Int32(r as i32)]).collect(),
                },
                &[],
                &[i as u32],
            )
        })
        .collect();
    for &(e, _) in outs {
        bufs.push(buf(&format!("o{}", bufs.len()), e, None));
    }
    let out_ids: Vec<u32> = outs.iter().map(|o| o.1).collect();
    instrs.push(launch(kernel, args, &out_ids));
    plan(bufs, vec![], instrs)
}

#[test]
fn launch_arguments_are_checked_against_the_contract_before_any_backend() {
    // Columns of an expression of different lengths: the store backend runs no `Eval`,
    // so the error can only be the runtime's.
    let sum = KExpr {
        kind: KExprKind::Arith(
            ArithOp::Add,
            Box::new(KExpr {
                kind: KExprKind::Col(0),
                ty: Type::Int32,
            }),
            Box::new(KExpr {
                kind: KExprKind::Col(1),
                ty: Type::Int32,
            }),
        ),
        ty: Type::Int32,
    };
    let e = plan_error(&consts_then(
        &[2, 3],
        Kernel::Eval { expr: sum, n_cols: 2 },
        &[0, 1],
        &[(Elem::I32, 2)],
    ));
    assert_eq!(
        e,
        "inconsistent plan: block `main` (0), instruction 2 (eval): the columns: argument 1 has 3 rows, but argument 0 has 2"
    );
    // Too few arguments, and arguments of the wrong element type.
    let e = plan_error(&consts_then(&[2], Kernel::Compact, &[0], &[(Elem::I32, 1)]));
    assert!(
        e.contains("instruction 1 (compact): takes at least 2 arguments, found 1"),
        "{e}"
    );
    let e = plan_error(&consts_then(&[2, 2], Kernel::Compact, &[0, 1], &[(Elem::I32, 2)]));
    assert!(e.contains("argument 0 (flags) must be U8, found I32"), "{e}");
    // An output declared with another element type than the kernel's.
    let e = plan_error(&consts_then(
        &[2],
        Kernel::Slice { start: 0, len: 1 },
        &[0],
        &[(Elem::I64, 1)],
    ));
    assert!(
        e.contains("output 0 is declared i64, but the kernel produces i32"),
        "{e}"
    );
}

/// A plan over one int32 buffer `a`: `entry` (which defines it), then a loop running
/// `body` while `a` is not empty, then a block freeing `a`.
fn looping(entry: Vec<Instr>, body: Vec<Instr>) -> KernelPlan {
    let mut p = plan(vec![buf("a", Elem::I32, Some(Type::Int32))], vec![], entry);
    p.blocks[0].term = Terminator::Jump(BlockId(1));
    p.blocks.push(Block {
        label: "loop".into(),
        local: false,
        instrs: body,
        term: Terminator::LoopIf {
            nonempty: vec![BufId(0)],
            body: BlockId(1),
            exit: BlockId(2),
        },
    });
    p.blocks.push(Block {
        label: "exit".into(),
        local: false,
        instrs: vec![Instr::Free { buf: BufId(0) }],
        term: Terminator::Halt,
    });
    p
}

/// [`looping`] with a body that runs `body`, empties `a` and runs `after_empty`, so that
/// it runs once.
fn loop_once(entry: Vec<Instr>, body: Vec<Instr>, after_empty: Vec<Instr>) -> KernelPlan {
    let empty = launch(
        Kernel::Const {
            types: vec![Type::Int32],
            rows: vec![],
        },
        &[],
        &[0],
    );
    looping(entry, body.into_iter().chain([empty]).chain(after_empty).collect())
}

#[test]
fn observations_count_rows_per_execution_and_bad_ones_are_plan_errors() {
    // a := {1}; observe t0 and t1; loop body: observe t1, a := {}, observe t1. The body
    // runs once: t0 is counted once (1 row), t1 three times (1, 1 and 0 rows).
    let observe = |id: u32, b: u32| Instr::Observe {
        id,
        bufs: vec![BufId(b)],
    };
    let mut p = loop_once(
        vec![one_const(), observe(0, 0), observe(1, 0)],
        vec![observe(1, 0)],
        vec![observe(1, 0)],
    );
    p.observed = ["t0", "t1"]
        .iter()
        .map(|l| fox_kernel::Observed {
            label: l.to_string(),
            op: "const".into(),
            est: Some(4.0),
        })
        .collect();
    let mut be = Store::default();
    let r = run(&p, &mut be, &RunOptions::default()).unwrap();
    let rows: Vec<(u64, u64, u64)> = r.stats.rows.iter().map(|s| (s.calls, s.total, s.max)).collect();
    assert_eq!(rows, [(1, 1, 1), (3, 2, 1)]);
    assert_eq!(r.stats.rows[1].label, "t1");
    assert_eq!(r.stats.rows[1].est, Some(4.0));
    // An observation of an operator the plan does not list, or of an undefined buffer.
    let mut bad = p.clone();
    bad.blocks[0].instrs[1] = observe(7, 0);
    assert!(
        plan_error(&bad).contains("Observe of operator #7"),
        "{}",
        plan_error(&bad)
    );
    let mut bad = p.clone();
    bad.blocks[0].instrs.insert(0, observe(0, 0));
    assert!(plan_error(&bad).contains("Observe reads"), "{}", plan_error(&bad));
    assert!(fox_kernel::validate(&bad).is_err());
}

#[test]
fn a_loop_runs_until_its_buffers_are_empty() {
    // b0 := {1}; loop: output, then b0 := {} — the body runs once, then exits.
    let p = loop_once(
        vec![one_const()],
        vec![output("o", vec![col("x", Type::Int32)], &[0], vec![], None)],
        Vec::new(),
    );
    let mut be = Store::default();
    let r = run(&p, &mut be, &RunOptions::default()).unwrap();
    assert_eq!(r.outputs.len(), 1);
    assert_eq!(be.mem.in_use, 0);
    assert_eq!(be.frees, 2);
}

#[test]
fn bad_input_data_stops_the_run_and_frees_everything() {
    let dir = temp_dir("bad");
    std::fs::write(dir.join("person.csv"), "alice,41\nbob,old\n").unwrap();
    let p = plan(
        vec![
            buf("person.name", Elem::U32, Some(Type::String)),
            buf("person.age", Elem::I32, Some(Type::Int32)),
        ],
        vec![people_input()],
        vec![launch(
            Kernel::LoadInput {
                input: 0,
                whole: false,
                hash: Vec::new(),
            },
            &[],
            &[0, 1],
        )],
    );
    let mut be = Store::default();
    let opts = RunOptions {
        data_dir: Some(dir.clone()),
        timing: false,
        ..Default::default()
    };
    let e = run(&p, &mut be, &opts).unwrap_err();
    let file = dir.join("person.csv").display().to_string();
    assert_eq!(
        e.to_string(),
        format!("{file}:2: column 2 (`age`, int32): `old` is not an int32")
    );
    assert_eq!(be.mem.total_allocated, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A loop whose test buffer loses a row per iteration: the observer hears of each input
/// read, each evaluation of the loop test with the iterations run so far and the rows the
/// next one starts from, and each output.
#[test]
fn the_observer_hears_inputs_loop_iterations_and_outputs() {
    use fox_runtime::{RunEvent, RunObserver};
    use std::sync::{Arc, Mutex};

    #[derive(Debug, Default)]
    struct Log(Mutex<Vec<String>>);
    impl RunObserver for Log {
        fn event(&self, e: &RunEvent<'_>) {
            let line = match e {
                RunEvent::Loading { input } => format!("load {input}"),
                RunEvent::Iteration {
                    block,
                    iterations,
                    rows,
                } => format!("{block} {iterations} {rows}"),
                RunEvent::Output { name } => format!("output {name}"),
            };
            self.0.lock().unwrap().push(line);
        }
    }

    let dir = temp_dir("observer");
    std::fs::write(dir.join("person.csv"), "alice,41\nbob,30\n").unwrap();
    let mut p = plan(
        vec![
            buf("person.name", Elem::U32, Some(Type::String)),
            buf("person.age", Elem::I32, Some(Type::Int32)),
            buf("delta", Elem::I32, Some(Type::Int32)),
            buf("next", Elem::I32, Some(Type::Int32)),
        ],
        vec![people_input()],
        vec![
            launch(
                Kernel::LoadInput {
                    input: 0,
                    whole: false,
                    hash: Vec::new(),
                },
                &[],
                &[0, 1],
            ),
            launch(
                Kernel::Const {
                    types: vec![Type::Int32],
                    rows: (0..4).map(|i| vec![Value::Int32(i)]).collect(),
                },
                &[],
                &[2],
            ),
        ],
    );
    p.blocks[0].term = Terminator::Jump(BlockId(1));
    p.blocks.push(Block {
        label: "stratum 0 loop (d)".into(),
        local: false,
        instrs: vec![
            launch(Kernel::Slice { start: 1, len: 100 }, &[2], &[3]),
            Instr::Move {
                dst: BufId(2),
                src: BufId(3),
            },
            Instr::Free { buf: BufId(3) },
        ],
        term: Terminator::LoopIf {
            nonempty: vec![BufId(2)],
            body: BlockId(1),
            exit: BlockId(2),
        },
    });
    p.blocks.push(Block {
        label: "after".into(),
        local: false,
        instrs: vec![
            output("ages", vec![col("age", Type::Int32)], &[1], vec![], None),
            Instr::Free { buf: BufId(0) },
            Instr::Free { buf: BufId(1) },
            Instr::Free { buf: BufId(2) },
        ],
        term: Terminator::Halt,
    });
    let log = Arc::new(Log::default());
    let opts = RunOptions {
        data_dir: Some(dir.clone()),
        observer: Some(log.clone()),
        ..Default::default()
    };
    let mut be = Store::default();
    let r = run(&p, &mut be, &opts).unwrap();
    assert_eq!(r.outputs[0].len(), 2);
    assert_eq!(be.mem.in_use, 0);
    assert_eq!(
        *log.0.lock().unwrap(),
        vec![
            "load person",
            "stratum 0 loop (d) 1 3",
            "stratum 0 loop (d) 2 2",
            "stratum 0 loop (d) 3 1",
            "stratum 0 loop (d) 4 0",
            "output ages",
        ]
    );
    // Without an observer the same run gives the same result.
    let r2 = run(
        &p,
        &mut Store::default(),
        &RunOptions {
            data_dir: Some(dir.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(r2.outputs[0].rows(), r.outputs[0].rows());
    // The total covers the parts.
    let st = &r.stats;
    assert!(st.total >= st.load + st.upload + st.compute + st.download + st.output);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// [`Store`] that sets a cancellation token: at its `at`-th upload, or in every launch
/// (which then returns a copy of its first argument per output, or an error).
struct Cancels {
    store: Store,
    token: fox_runtime::CancelToken,
    at_upload: Option<usize>,
    launch_fails: bool,
    launches: usize,
    downloads: usize,
}

impl Cancels {
    fn new(at_upload: Option<usize>, launch_fails: bool) -> Cancels {
        Cancels {
            store: Store::default(),
            token: fox_runtime::CancelToken::new(),
            at_upload,
            launch_fails,
            launches: 0,
            downloads: 0,
        }
    }
}

impl Backend for Cancels {
    fn name(&self) -> String {
        "cancels".into()
    }
    fn upload(&mut self, col: HostCol) -> Result<DevBuf, BackendError> {
        if self.at_upload.is_some_and(|at| self.store.uploads.len() > at + 1000) {
            return Err(BackendError("the run did not stop".into()));
        }
        let b = self.store.upload(col)?;
        if Some(self.store.uploads.len()) == self.at_upload {
            self.token.cancel();
        }
        Ok(b)
    }
    fn download(&mut self, buf: &DevBuf) -> Result<HostCol, BackendError> {
        self.downloads += 1;
        self.store.download(buf)
    }
    fn launch(&mut self, _: &Kernel, args: &[&DevBuf], _: &dyn LaunchCtx) -> Result<Vec<DevBuf>, BackendError> {
        self.launches += 1;
        self.token.cancel();
        if self.launch_fails {
            return Err(BackendError("stopped early".into()));
        }
        let col = self.store.download(args[0])?;
        Ok(vec![self.store.upload(col)?])
    }
    fn free(&mut self, buf: DevBuf) {
        self.store.free(buf)
    }
    fn sync(&mut self) -> Result<(), BackendError> {
        Ok(())
    }
    fn mem(&self) -> MemStats {
        self.store.mem
    }
    fn reset_peak(&mut self) {
        self.store.reset_peak()
    }
}

#[test]
fn a_cancelled_run_stops_before_the_next_instruction_and_frees_everything() {
    // An endless loop: b0 := {1}, again and again; the backend sets the token at its
    // 100th upload (as Ctrl-C would, from anywhere).
    let p = looping(vec![one_const()], vec![one_const()]);
    let mut be = Cancels::new(Some(100), false);
    let opts = RunOptions {
        cancel: Some(be.token.clone()),
        ..Default::default()
    };
    assert_eq!(run(&p, &mut be, &opts).unwrap_err(), RuntimeError::Cancelled);
    assert_eq!(be.store.uploads.len(), 100, "no instruction runs once the token is set");
    assert_eq!(be.store.mem.in_use, 0, "every buffer is freed");
    assert_eq!(RuntimeError::Cancelled.to_string(), "interrupted");
}

#[test]
fn what_a_launch_returns_once_the_run_is_cancelled_is_discarded() {
    // b0 := {1}; b1 := kernel(b0); output b1 — the token is set during the launch.
    let bufs = vec![
        buf("a", Elem::I32, Some(Type::Int32)),
        buf("b", Elem::I32, Some(Type::Int32)),
    ];
    let instrs = vec![
        one_const(),
        launch(Kernel::Slice { start: 0, len: 1 }, &[0], &[1]),
        output("o", vec![col("x", Type::Int32)], &[1], vec![], None),
        Instr::Free { buf: BufId(0) },
        Instr::Free { buf: BufId(1) },
    ];
    let p = plan(bufs, vec![], instrs);
    // The launch's outputs, or its error, give way to `Cancelled`.
    for launch_fails in [false, true] {
        let mut be = Cancels::new(None, launch_fails);
        let opts = RunOptions {
            cancel: Some(be.token.clone()),
            ..Default::default()
        };
        assert_eq!(run(&p, &mut be, &opts).unwrap_err(), RuntimeError::Cancelled);
        assert_eq!(be.launches, 1);
        assert_eq!(be.downloads, 0, "the output is never read");
        assert_eq!(be.store.mem.in_use, 0, "every buffer is freed");
    }
    // A token that is not set changes nothing.
    let mut be = Store::default();
    let opts = RunOptions {
        cancel: Some(fox_runtime::CancelToken::new()),
        ..Default::default()
    };
    let r = run(
        &plan(
            vec![buf("a", Elem::I32, Some(Type::Int32))],
            vec![],
            vec![
                one_const(),
                output("o", vec![col("x", Type::Int32)], &[0], vec![], None),
            ],
        ),
        &mut be,
        &opts,
    )
    .unwrap();
    assert_eq!(r.outputs[0].rows(), vec![vec![Value::Int32(1)]]);
}

#[test]
fn a_cancelled_load_or_generator_stops_with_cancelled() {
    use fox_runtime::graph::{generate_until, GraphSpec};
    use fox_runtime::{CancelToken, CancellableProgress, DataSource, Database, NoProgress};
    let token = CancelToken::new();
    token.cancel();
    for spec in ["rmat:12", "gnm:1000:5000:1"] {
        let g = GraphSpec::parse(spec).unwrap();
        assert_eq!(generate_until(&g, &|_| {}, token.flag()).unwrap_err(), "interrupted");
        let edge = InputRel {
            name: "edge".into(),
            columns: vec![col("x", Type::Int32), col("y", Type::Int32)],
            file: "edge.csv".into(),
            sep: ",".into(),
            key: Vec::new(),
            header: false,
        };
        let progress = CancellableProgress {
            progress: &NoProgress,
            cancel: &token,
        };
        let wanted = vec![(edge.clone(), vec![true, true])];
        let e = Database::load_tables(&DataSource::Graph(g.clone()), wanted.clone(), &progress).unwrap_err();
        assert_eq!(e, RuntimeError::Cancelled);
        // Without the request the same load succeeds.
        token.reset();
        assert!(Database::load_tables(&DataSource::Graph(g), wanted, &progress).is_ok());
        token.cancel();
    }
    let region = InputRel {
        name: "region".into(),
        columns: vec![
            col("r_regionkey", Type::Int32),
            col("r_name", Type::String),
            col("r_comment", Type::String),
        ],
        file: "region.tbl".into(),
        sep: "|".into(),
        key: Vec::new(),
        header: false,
    };
    let e = fox_runtime::tpch::generate(&region, 0.01, &[true, true, true], &|_| {}, token.flag()).unwrap_err();
    assert_eq!(e, RuntimeError::Cancelled);
}

/// A run on inputs read before it refuses inputs that are not the plan's, or that lack a
/// column the plan reads, with a plain error.
#[test]
fn inputs_read_before_the_run_must_be_the_plan_s() {
    let dir = temp_dir("loaded-mismatch");
    std::fs::write(dir.join("person.csv"), "alice,41\n").unwrap();
    let p = plan(
        vec![
            buf("person.name", Elem::U32, Some(Type::String)),
            buf("person.age", Elem::I32, Some(Type::Int32)),
        ],
        vec![people_input()],
        vec![
            launch(
                Kernel::LoadInput {
                    input: 0,
                    whole: false,
                    hash: Vec::new(),
                },
                &[],
                &[0, 1],
            ),
            output("all", people_input().columns, &[0, 1], vec![], None),
        ],
    );
    let opts = RunOptions::default();
    let load = |used: Vec<bool>| fox_runtime::LoadedInputs::load(&dir, &[(people_input(), used)], None, None).unwrap();
    let e = fox_runtime::run_loaded(&p, &mut Store::default(), &opts, load(vec![true, false])).unwrap_err();
    assert_eq!(
        e,
        RuntimeError::Plan("input `person`: its column `age` was not read before the run".into())
    );
    let mut other = people_input();
    other.columns[1].ty = Type::Int64;
    let inputs = fox_runtime::LoadedInputs::load(&dir, &[(other, vec![true, true])], None, None).unwrap();
    let e = fox_runtime::run_loaded(&p, &mut Store::default(), &opts, inputs).unwrap_err();
    assert_eq!(
        e,
        RuntimeError::Plan("input `person`: it was read with another declaration".into())
    );
    let r = fox_runtime::run_loaded(&p, &mut Store::default(), &opts, load(vec![true, true])).unwrap();
    assert_eq!(r.outputs[0].rows(), vec![vec![s("alice"), Value::Int32(41)]]);
    std::fs::remove_dir_all(&dir).unwrap();
}

fn consts(rows: &[i32], out: u32) -> Instr {
    launch(
        Kernel::Const {
            types: vec![Type::Int32],
            rows: rows.iter().map(|&v| vec![Value::Int32(v)]).collect(),
        },
        &[],
        &[out],
    )
}

/// Runs a plan whose entry computes `Outgrows { factor }` of `a` (`na` rows) and `b`
/// (`nb` rows) and branches on it with `If`: the `then` block outputs {1}, the other {2}.
fn branch_on_outgrows(na: usize, nb: usize, factor: u32) -> Vec<Vec<Value>> {
    let col = || Column {
        name: "v".into(),
        ty: Type::Int32,
    };
    let mut p = plan(
        vec![
            buf("a", Elem::I32, Some(Type::Int32)),
            buf("b", Elem::I32, Some(Type::Int32)),
            buf("flag", Elem::U8, None),
            buf("r", Elem::I32, Some(Type::Int32)),
        ],
        vec![],
        vec![
            consts(&vec![0; na], 0),
            consts(&vec![0; nb], 1),
            launch(Kernel::Outgrows { factor }, &[0, 1], &[2]),
        ],
    );
    p.blocks[0].term = Terminator::If {
        nonempty: vec![BufId(2)],
        then: BlockId(1),
        otherwise: BlockId(2),
    };
    for (label, v) in [("then", 1), ("otherwise", 2)] {
        p.blocks.push(Block {
            label: label.into(),
            local: false,
            instrs: vec![consts(&[v], 3), output("r", vec![col()], &[3], vec![], None)],
            term: Terminator::Halt,
        });
    }
    let r = run(&p, &mut Store::default(), &RunOptions::default()).unwrap();
    r.outputs[0].rows()
}

#[test]
fn outgrows_compares_lengths_and_if_branches_on_it() {
    let then = vec![vec![Value::Int32(1)]];
    let otherwise = vec![vec![Value::Int32(2)]];
    // 3 * 2 > 5; 2 * 2 > 5 fails; equal lengths with factor 1 do not outgrow.
    assert_eq!(branch_on_outgrows(3, 5, 2), then);
    assert_eq!(branch_on_outgrows(2, 5, 2), otherwise);
    assert_eq!(branch_on_outgrows(4, 4, 1), otherwise);
    assert_eq!(branch_on_outgrows(1, 0, 1), then);
    assert_eq!(branch_on_outgrows(0, 0, 3), otherwise);
}

#[test]
fn a_merge_with_an_empty_side_shares_the_other_side() {
    // The store backend runs no `MergeUnion`: the result can only come from sharing the
    // non-empty side's buffer, in either position.
    let col = Column {
        name: "v".into(),
        ty: Type::Int32,
    };
    for (left, right) in [(vec![], vec![1, 2, 3]), (vec![4, 5], vec![])] {
        let want: Vec<Vec<Value>> = left.iter().chain(&right).map(|&v| vec![Value::Int32(v)]).collect();
        let p = plan(
            vec![
                buf("a", Elem::I32, Some(Type::Int32)),
                buf("b", Elem::I32, Some(Type::Int32)),
                buf("m", Elem::I32, Some(Type::Int32)),
            ],
            vec![],
            vec![
                consts(&left, 0),
                consts(&right, 1),
                launch(
                    Kernel::MergeUnion {
                        width: 1,
                        disjoint: false,
                    },
                    &[0, 1],
                    &[2],
                ),
                Instr::Free { buf: BufId(0) },
                Instr::Free { buf: BufId(1) },
                output("m", vec![col.clone()], &[2], vec![], None),
            ],
        );
        let mut be = Store::default();
        let r = run(&p, &mut be, &RunOptions::default()).unwrap();
        assert_eq!(r.outputs[0].rows(), want);
        assert_eq!(be.mem.in_use, 0, "the shared buffer is freed once");
    }
    // Two non-empty sides reach the backend (which refuses here).
    let p = plan(
        vec![
            buf("a", Elem::I32, Some(Type::Int32)),
            buf("b", Elem::I32, Some(Type::Int32)),
            buf("m", Elem::I32, Some(Type::Int32)),
        ],
        vec![],
        vec![
            consts(&[1], 0),
            consts(&[2], 1),
            launch(
                Kernel::MergeUnion {
                    width: 1,
                    disjoint: false,
                },
                &[0, 1],
                &[2],
            ),
        ],
    );
    assert!(run(&p, &mut Store::default(), &RunOptions::default()).is_err());
}

/// The store, running `SortPerm` of one i32 column, `Gather` of one i32 column and
/// `Slice`, whose gathers check their indices at once or, with `defer`, as a GPU defers
/// such checks ([`Backend::set_check_site`]): at the next download or sync.
struct Deferring {
    store: Store,
    defer: bool,
    site: Option<(usize, usize)>,
    /// A failed check not read yet.
    unread: Option<((usize, usize), String)>,
    failed: Option<((usize, usize), String)>,
}

impl Deferring {
    fn new(defer: bool) -> Deferring {
        Deferring {
            store: Store::default(),
            defer,
            site: None,
            unread: None,
            failed: None,
        }
    }

    fn read_checks(&mut self) -> Result<(), BackendError> {
        match self.unread.take() {
            Some((site, msg)) => {
                self.failed = Some((site, msg.clone()));
                Err(BackendError(msg))
            }
            None => Ok(()),
        }
    }
}

impl Backend for Deferring {
    fn name(&self) -> String {
        "deferring".into()
    }
    fn upload(&mut self, col: HostCol) -> Result<DevBuf, BackendError> {
        self.store.upload(col)
    }
    fn download(&mut self, buf: &DevBuf) -> Result<HostCol, BackendError> {
        self.read_checks()?;
        self.store.download(buf)
    }
    fn launch(&mut self, k: &Kernel, args: &[&DevBuf], ctx: &dyn LaunchCtx) -> Result<Vec<DevBuf>, BackendError> {
        let col = |b: &DevBuf| self.store.bufs.get(&b.id).cloned();
        match (k, args) {
            (Kernel::SortPerm { .. }, [a]) => {
                let Some(HostCol::I32(v)) = col(a) else {
                    return Err(BackendError("sorts one i32 column".into()));
                };
                let mut perm: Vec<u32> = (0..v.len() as u32).collect();
                perm.sort_by_key(|&i| v[i as usize]);
                Ok(vec![self.store.upload(HostCol::U32(perm))?])
            }
            (Kernel::Gather { shift }, [idx, c]) => {
                let (Some(HostCol::U32(idx)), Some(HostCol::I32(c))) = (col(idx), col(c)) else {
                    return Err(BackendError("gathers one i32 column by u32 indices".into()));
                };
                let mut out = Vec::with_capacity(idx.len());
                let mut bad = None;
                for (row, &i) in idx.iter().enumerate() {
                    let p = i as usize + *shift as usize;
                    out.push(c.get(p).copied().unwrap_or(0));
                    if p >= c.len() && bad.is_none() {
                        bad = Some(format!(
                            "kernel Gather: index {i} + shift {shift} = {p} at row {row} is out of range"
                        ));
                    }
                }
                match (bad, self.site.filter(|_| self.defer)) {
                    (Some(msg), Some(site)) => {
                        self.unread.get_or_insert((site, msg));
                    }
                    (Some(msg), None) => return Err(BackendError(msg)),
                    (None, _) => {}
                }
                Ok(vec![self.store.upload(HostCol::I32(out))?])
            }
            _ => self.store.launch(k, args, ctx),
        }
    }
    fn free(&mut self, buf: DevBuf) {
        self.store.free(buf);
    }
    fn sync(&mut self) -> Result<(), BackendError> {
        self.read_checks()
    }
    fn set_check_site(&mut self, site: Option<(usize, usize)>) -> Result<(), BackendError> {
        self.site = site;
        if site.is_none() {
            self.unread = None;
        }
        Ok(())
    }
    fn take_failed_check(&mut self) -> Option<((usize, usize), String)> {
        self.failed.take()
    }
    fn mem(&self) -> MemStats {
        self.store.mem
    }
    fn reset_peak(&mut self) {
        self.store.reset_peak();
    }
}

/// `c` = [3, 1, 2], its sort permutation, `gathers` gathers of `c` by it (the first with
/// `shift`), a slice of the last, and its output or, with `output` false, nothing more.
fn gathers(gathers: usize, shift: u32, with_output: bool) -> KernelPlan {
    let mut bufs = vec![
        buf("c", Elem::I32, Some(Type::Int32)),
        buf("p", Elem::U32, None),
        buf("s", Elem::I32, Some(Type::Int32)),
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
    for k in 0..gathers {
        bufs.push(buf(&format!("g{k}"), Elem::I32, Some(Type::Int32)));
        let shift = if k == 0 { shift } else { 0 };
        instrs.push(launch(Kernel::Gather { shift }, &[1, 0], &[3 + k as u32]));
    }
    instrs.push(launch(Kernel::Slice { start: 0, len: 2 }, &[2 + gathers as u32], &[2]));
    if with_output {
        instrs.push(output("o", vec![col("x", Type::Int32)], &[2], vec![], None));
    }
    plan(bufs, vec![], instrs)
}

#[test]
fn a_deferred_check_fails_at_the_launch_it_checked() {
    for (n, out) in [(1, true), (4, true), (4, false)] {
        let p = gathers(n, 1, out);
        let mut now = Deferring::new(false);
        let want = run(&p, &mut now, &RunOptions::default())
            .expect_err("fails")
            .to_string();
        assert!(
            want.starts_with("block `main` (0), instruction 2 (gather): kernel Gather: index 2"),
            "{want}"
        );
        let mut later = Deferring::new(true);
        let got = run(&p, &mut later, &RunOptions::default())
            .expect_err("fails")
            .to_string();
        assert_eq!(got, want, "{n} gathers, output {out}");
        assert_eq!(later.store.mem.in_use, 0, "everything is freed after the error");
        assert!(
            later.site.is_none() && later.unread.is_none(),
            "the run leaves no site or check"
        );
        // Good indices: the same rows either way.
        let ok = |defer| {
            let mut be = Deferring::new(defer);
            let r = run(&gathers(n, 0, true), &mut be, &RunOptions::default()).expect("runs");
            format!("{:?}", r.outputs[0].columns)
        };
        assert_eq!(ok(true), ok(false));
    }
}
