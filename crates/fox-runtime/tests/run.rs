//! The interpreter on a backend that only stores buffers: host-side instructions (inputs,
//! constants, dictionary tables, string functions), `Move`/`Free` reference counting, outputs,
//! and clean errors for inconsistent plans.

use fox_kernel::{
    Block, BlockId, BufId, BufVar, DictOp, Elem, InputRel, Instr, Kernel, KernelPlan, StrFunc, Terminator,
    KERNEL_PLAN_VERSION,
};
use fox_runtime::{run, Backend, BackendError, DevBuf, HostCol, LaunchCtx, MemStats, RunOptions, RuntimeError};
use fox_sema::core::{Column, Type, Value};
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
    fn launch(&mut self, _: &Kernel, _: &[&DevBuf], _: &dyn LaunchCtx) -> Result<Vec<DevBuf>, BackendError> {
        Err(BackendError("the store backend runs no kernels".into()))
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

fn plan(buffers: Vec<BufVar>, inputs: Vec<InputRel>, instrs: Vec<Instr>) -> KernelPlan {
    KernelPlan {
        version: KERNEL_PLAN_VERSION,
        buffers,
        inputs,
        blocks: vec![Block {
            label: "main".into(),
            instrs,
            term: Terminator::Halt,
        }],
        entry: BlockId(0),
        planned_peak_buffers: 3,
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
            launch(Kernel::LoadInput { input: 0 }, &[], &[0, 1]),
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
    assert_eq!(kernels, vec!["LoadInput(person)", "Output(by_age)", "Output(all)"]);
    assert!(fox_runtime::format_stats(&r.stats).contains("LoadInput(person)"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Codes are assigned in sorted order over data strings and plan constants together;
/// `substr`/`concat` append, after which `Rank` gives string order.
#[test]
fn dictionary_codes_constants_and_string_functions() {
    let dir = temp_dir("dict");
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
            launch(Kernel::LoadInput { input: 0 }, &[], &[0, 1]),
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
    let r = run(&p, &mut be, &opts).unwrap();
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
        e.contains("instruction 2 (StrFn(Concat)): reads buffer `a` (b0), which is not defined here"),
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
        vec![launch(Kernel::LoadInput { input: 2 }, &[], &[0])],
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

#[test]
fn a_loop_runs_until_its_buffers_are_empty() {
    // b0 := {1}; loop: output, then b0 := {} — the body runs once, then exits.
    let mut p = plan(vec![buf("a", Elem::I32, Some(Type::Int32))], vec![], vec![one_const()]);
    p.blocks[0].term = Terminator::Jump(BlockId(1));
    p.blocks.push(Block {
        label: "loop".into(),
        instrs: vec![
            output("o", vec![col("x", Type::Int32)], &[0], vec![], None),
            launch(
                Kernel::Const {
                    types: vec![Type::Int32],
                    rows: vec![],
                },
                &[],
                &[0],
            ),
        ],
        term: Terminator::LoopIf {
            nonempty: vec![BufId(0)],
            body: BlockId(1),
            exit: BlockId(2),
        },
    });
    p.blocks.push(Block {
        label: "exit".into(),
        instrs: vec![Instr::Free { buf: BufId(0) }],
        term: Terminator::Halt,
    });
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
        vec![launch(Kernel::LoadInput { input: 0 }, &[], &[0, 1])],
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
