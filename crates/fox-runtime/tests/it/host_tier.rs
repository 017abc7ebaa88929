//! The interpreter's host tier on a backend that keeps a byte budget: a launch refused for
//! want of memory is tried again after the buffers it does not read leave the device (the
//! one read latest first), a buffer in the host tier comes back before a launch reads it,
//! outputs read it from the host, and a launch whose failure left memory behind is not
//! tried again.

use fox_kernel::{BufId, BufVar, Elem, Instr, Kernel, KernelPlan};
use fox_runtime::{run, Backend, BackendError, DevBuf, HostCol, LaunchCtx, MemStats, RunOptions};
use fox_sema::core::{Column, Type, Value};
use std::collections::HashMap;

/// Buffers in host memory under `limit` bytes; runs `Slice` of one i32 column.
struct Budget {
    bufs: HashMap<u64, HostCol>,
    next: u64,
    mem: MemStats,
    limit: Option<u64>,
    launches: usize,
    /// A refused launch leaves a buffer of this many i32 allocated (a broken backend).
    leak: usize,
    leaked: Vec<DevBuf>,
}

impl Budget {
    fn new(leak: usize) -> Budget {
        Budget {
            bufs: HashMap::new(),
            next: 0,
            mem: MemStats::default(),
            limit: None,
            launches: 0,
            leak,
            leaked: Vec::new(),
        }
    }

    fn alloc(&mut self, col: HostCol) -> Result<DevBuf, BackendError> {
        let bytes = col.len() * col.elem().size();
        if self.limit.is_some_and(|l| (self.mem.in_use + bytes) as u64 > l) {
            return Err(BackendError(format!("out of memory: cannot allocate {bytes} bytes")));
        }
        self.next += 1;
        let buf = DevBuf {
            id: self.next,
            elem: col.elem(),
            len: col.len(),
        };
        self.mem.in_use += bytes;
        self.mem.total_allocated += bytes;
        self.mem.peak = self.mem.peak.max(self.mem.in_use);
        self.bufs.insert(buf.id, col);
        Ok(buf)
    }
}

impl Backend for Budget {
    fn name(&self) -> String {
        "budget".into()
    }
    fn upload(&mut self, col: HostCol) -> Result<DevBuf, BackendError> {
        self.alloc(col)
    }
    fn download(&mut self, buf: &DevBuf) -> Result<HostCol, BackendError> {
        self.bufs
            .get(&buf.id)
            .cloned()
            .ok_or_else(|| BackendError(format!("no buffer {}", buf.id)))
    }
    fn launch(&mut self, k: &Kernel, args: &[&DevBuf], _: &dyn LaunchCtx) -> Result<Vec<DevBuf>, BackendError> {
        self.launches += 1;
        let (Kernel::Slice { start, len }, [a]) = (k, args) else {
            return Err(BackendError("only Slice of one column".into()));
        };
        let Some(HostCol::I32(v)) = self.bufs.get(&a.id) else {
            return Err(BackendError(format!("no i32 buffer {}", a.id)));
        };
        let from = (*start as usize).min(v.len());
        let to = from.saturating_add(*len as usize).min(v.len());
        let part = HostCol::I32(v[from..to].to_vec());
        match self.alloc(part) {
            Err(e) if self.leak > 0 => {
                let saved = self.limit.take();
                let b = self.alloc(HostCol::I32(vec![0; self.leak]))?;
                self.limit = saved;
                self.leaked.push(b);
                Err(e)
            }
            r => Ok(vec![r?]),
        }
    }
    fn free(&mut self, buf: DevBuf) {
        let col = self.bufs.remove(&buf.id).expect("a buffer is freed once");
        self.mem.in_use -= col.len() * col.elem().size();
    }
    fn sync(&mut self) -> Result<(), BackendError> {
        Ok(())
    }
    fn mem(&self) -> MemStats {
        self.mem
    }
    fn set_memory_limit(&mut self, limit: Option<u64>) {
        self.limit = limit;
    }
    fn reset_peak(&mut self) {
        self.mem.peak = self.mem.in_use;
    }
}

/// 250 int32 values from `from` (1,000 bytes).
fn column(from: i32) -> Instr {
    column_of(from, 250)
}

/// `rows` int32 values from `from`.
fn column_of(from: i32, rows: i32) -> Instr {
    Instr::Launch {
        kernel: Kernel::Const {
            types: vec![Type::Int32],
            rows: (from..from + rows).map(|v| vec![Value::Int32(v)]).collect(),
        },
        args: Vec::new(),
        outs: Vec::new(),
        origin: None,
    }
}

/// A plan of one block `instrs` over the int32 buffers b0..b{buffers} and `inputs`
/// ([`crate::run::plan`]), planned to hold `planned_peak_buffers` at once.
fn one_block(
    buffers: usize,
    inputs: Vec<fox_kernel::InputRel>,
    instrs: Vec<Instr>,
    planned_peak_buffers: usize,
) -> KernelPlan {
    let buffers = (0..buffers)
        .map(|i| BufVar {
            name: format!("b{i}"),
            elem: Elem::I32,
            ty: Some(Type::Int32),
        })
        .collect();
    KernelPlan {
        planned_peak_buffers,
        ..crate::run::plan(buffers, inputs, instrs)
    }
}

fn with_outs(mut i: Instr, o: &[u32]) -> Instr {
    if let Instr::Launch { outs, .. } = &mut i {
        *outs = o.iter().map(|&b| BufId(b)).collect();
    }
    i
}

fn slice(arg: u32, out: u32) -> Instr {
    Instr::Launch {
        kernel: Kernel::Slice { start: 0, len: 250 },
        args: vec![BufId(arg)],
        outs: vec![BufId(out)],
        origin: None,
    }
}

fn output(name: &str, b: u32) -> Instr {
    Instr::Output {
        name: name.into(),
        columns: vec![Column {
            name: "v".into(),
            ty: Type::Int32,
        }],
        cols: vec![BufId(b)],
        order: Vec::new(),
        limit: None,
    }
}

/// b0, b1, b2 of 1,000 bytes each; b3 := slice(b2) needs a fourth while b0 is read
/// last and b1 sooner; then b4 := slice(b0) brings b0 back.
fn plan() -> KernelPlan {
    let instrs = vec![
        with_outs(column(0), &[0]),
        with_outs(column(1000), &[1]),
        with_outs(column(2000), &[2]),
        slice(2, 3),
        Instr::Free { buf: BufId(2) },
        output("one", 1),
        Instr::Free { buf: BufId(1) },
        output("three", 3),
        Instr::Free { buf: BufId(3) },
        slice(0, 4),
        Instr::Free { buf: BufId(0) },
        output("four", 4),
        Instr::Free { buf: BufId(4) },
    ];
    one_block(5, Vec::new(), instrs, 4)
}

fn values(r: &fox_runtime::RunResult, k: usize) -> Vec<String> {
    r.outputs[k].rows().iter().map(|row| format!("{:?}", row[0])).collect()
}

#[test]
fn a_launch_without_room_runs_after_the_buffer_read_latest_leaves_the_device() {
    let p = plan();
    let whole = run(&p, &mut Budget::new(0), &RunOptions::default()).unwrap();
    assert_eq!(whole.stats.peak_bytes, 4000);
    let mut be = Budget::new(0);
    let opts = RunOptions {
        memory_limit: Some(3000),
        ..Default::default()
    };
    let cut = run(&p, &mut be, &opts).unwrap();
    for k in 0..3 {
        assert_eq!(values(&cut, k), values(&whole, k));
    }
    assert_eq!(values(&cut, 2)[0], format!("{:?}", Value::Int32(0)));
    assert!(cut.stats.peak_bytes <= 3000);
    // b0 (read last) left for the slice of b2, and came back for its own slice; b1 was
    // output from the device.
    let t = cut.stats.tier;
    assert_eq!((t.evictions, t.bytes_to_host), (1, 1000), "{t:?}");
    assert_eq!((t.restores, t.bytes_to_device), (1, 1000), "{t:?}");
    assert_eq!(t.host_peak_bytes, 1000);
    // The slice of b2 was refused once, then ran; the slice of b0 ran at once.
    assert_eq!(be.launches, 3);
    assert_eq!(be.mem.in_use, 0);
}

#[test]
fn a_launch_whose_failure_left_memory_behind_is_not_tried_again() {
    let mut be = Budget::new(10);
    let opts = RunOptions {
        memory_limit: Some(3000),
        ..Default::default()
    };
    let e = run(&plan(), &mut be, &opts).unwrap_err().to_string();
    assert!(e.contains("out of memory: cannot allocate 1000 bytes"), "{e}");
    assert_eq!(be.launches, 1);
    // Only the leaked buffer is left: the run freed its own.
    assert_eq!(be.mem.in_use, 40);
}

/// A launch that can run in pieces (a `Slice`, taken on the host when it does not fit)
/// whose argument could never be on the device, even with every other buffer moved,
/// moves nothing for it: the 1,000-byte column b0 waits in the host tier under a limit of
/// 900 bytes, and the 400-byte b1 stays on the device while b0's slice is taken on the
/// host.
#[test]
fn a_launch_whose_arguments_could_never_fit_moves_no_other_buffer() {
    let instrs = vec![
        with_outs(column(0), &[0]),
        with_outs(column_of(0, 100), &[1]),
        slice(0, 2),
        Instr::Free { buf: BufId(0) },
        output("slice", 2),
        Instr::Free { buf: BufId(2) },
        output("small", 1),
        Instr::Free { buf: BufId(1) },
    ];
    let p = one_block(3, Vec::new(), instrs, 3);
    let whole = run(&p, &mut Budget::new(0), &RunOptions::default()).unwrap();
    let mut be = Budget::new(0);
    let opts = RunOptions {
        memory_limit: Some(900),
        ..Default::default()
    };
    let cut = run(&p, &mut be, &opts).unwrap();
    for k in 0..2 {
        assert_eq!(values(&cut, k), values(&whole, k));
    }
    // b0 and the slice were made in the host tier; b1 never left the device.
    let t = cut.stats.tier;
    assert_eq!(t.bytes_to_host, 2000, "{t:?}");
    assert_eq!((t.restores, t.bytes_to_device), (0, 0), "{t:?}");
    assert_eq!(be.launches, 0, "the slice was taken on the host without a launch");
    assert_eq!(be.mem.in_use, 0);
}

/// A loaded table `t` of three int32 columns of 250 rows (1,000 bytes each, the column
/// `c` holding `v + 1000 * c` at row `v`), and a plan that loads it (b0, b1, b2), slices
/// b2, then b1, then b0, outputting each slice.
fn database_and_plan(dir: &std::path::Path) -> (fox_runtime::Database, KernelPlan) {
    let col = |n: &str| Column {
        name: n.into(),
        ty: Type::Int32,
    };
    let rel = fox_kernel::InputRel {
        name: "t".into(),
        columns: vec![col("a"), col("b"), col("c")],
        file: "t.csv".into(),
        sep: ",".into(),
        key: Vec::new(),
        header: false,
    };
    let rows: String = (0..250).map(|v| format!("{v},{},{}\n", v + 1000, v + 2000)).collect();
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("t.csv"), rows).unwrap();
    let db = fox_runtime::Database::load_tables(
        &fox_runtime::DataSource::Files(dir.to_path_buf()),
        vec![(rel.clone(), vec![true; 3])],
        &fox_runtime::NoProgress,
    )
    .unwrap();
    let load = Instr::Launch {
        kernel: Kernel::LoadInput {
            input: 0,
            whole: false,
            hash: Vec::new(),
        },
        args: Vec::new(),
        outs: vec![BufId(0), BufId(1), BufId(2)],
        origin: None,
    };
    let free = |b| Instr::Free { buf: BufId(b) };
    let instrs = vec![
        load,
        slice(2, 3),
        free(2),
        output("c", 3),
        free(3),
        slice(1, 4),
        free(1),
        output("b", 4),
        free(4),
        slice(0, 5),
        free(0),
        output("a", 5),
        free(5),
    ];
    let plan = one_block(6, vec![rel], instrs, 4);
    (db, plan)
}

#[test]
fn database_columns_beyond_the_limit_are_read_in_place_and_freed_without_a_download() {
    let dir = std::env::temp_dir().join(format!("fox-host-tier-db-{}", std::process::id()));
    let (db, p) = database_and_plan(&dir);
    let db = std::sync::Arc::new(db);
    let opts = |limit| RunOptions {
        database: Some(db.clone()),
        memory_limit: limit,
        ..Default::default()
    };
    let whole = run(&p, &mut Budget::new(0), &opts(None)).unwrap();
    assert_eq!(whole.stats.peak_bytes, 4000);
    assert_eq!(whole.stats.tier, fox_runtime::TierStats::default());
    let mut be = Budget::new(0);
    let cut = run(&p, &mut be, &opts(Some(2500))).unwrap();
    for k in 0..3 {
        assert_eq!(values(&cut, k), values(&whole, k));
    }
    assert_eq!(values(&cut, 0)[1], format!("{:?}", Value::Int32(2001)));
    assert!(cut.stats.peak_bytes <= 2500, "{}", cut.stats.peak_bytes);
    // c does not fit beside a and b: it is not uploaded at the load. Its slice then needs
    // it and its output on the device: a (read last) and b leave by being freed. Nothing
    // is downloaded; each comes back from the database for its slice.
    let t = cut.stats.tier;
    assert_eq!((t.evictions, t.bytes_to_host, t.host_peak_bytes), (0, 0, 0), "{t:?}");
    assert_eq!((t.in_database, t.in_database_bytes), (3, 3000), "{t:?}");
    assert_eq!((t.restores, t.bytes_to_device), (3, 3000), "{t:?}");
    assert_eq!(be.mem.in_use, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}
