//! GPU vs CPU: hash joins, index nested-loop searches and nested-loop joins. Each backend builds its own table (`HashBuild`; where a run
//! lands differs between them) and probes it (`HashProbe`, `HashMatch`); the probe results
//! must be equal, as must the index nested loop's `BoundRange` without bounds: empty sides, one row, all-equal, skewed and Zipf-like keys, duplicates,
//! sizes around block sizes, 1 to 3 keys of each element type, a malformed table, and a
//! 10^7-row probe. The radix-partitioned table (forced on small inputs by a size
//! threshold of 0, with sub-tables of 64 bytes to 48 KiB: one partition to thousands) is
//! probed against the CPU's table on the same cases, and under a memory limit that makes
//! its probe partition the probing rows in slices. The nested-loop kernels are compared directly (counts, pairs after a
//! host scan, flags, offsets that are not the scan) on sides of up to a few thousand rows.

use fox_cuda::testing::{
    gpu, random_col, run_on, sort_rows, Dist, PartitionedTable, Rng, Strings, ELEMS, LARGE, SIZES,
};
use fox_kernel::{Elem, Kernel};
use fox_runtime::{Backend, HostCol};

/// The sizes of the partitioned table's sub-tables the tests use: many partitions of a
/// few runs (most sub-tables then too large for the probe's shared memory), a few, and the
/// default.
const SUB_TABLES: [u32; 3] = [64, 1024, fox_cuda::HASH_SUB_TABLE_BYTES];

/// `kernel` (a `HashProbe` or `HashMatch`) over the table `backend` builds from `build`.
fn probe_on(
    backend: &mut dyn Backend,
    kernel: &Kernel,
    build: &[HostCol],
    probe: &[HostCol],
) -> Result<Vec<HostCol>, String> {
    let ctx = Strings::default();
    let table = run_on(backend, &Kernel::HashBuild { nkeys: build.len() }, build, &ctx)?;
    let mut args = build.to_vec();
    args.extend(table);
    args.extend(probe.iter().cloned());
    run_on(backend, kernel, &args, &ctx)
}

/// The probe and match results of both backends on one pair of sides are equal, and so
/// are the index nested loop's searches (`BoundRange` without bounds).
fn check(gpu: &mut fox_cuda::CudaBackend, build: &[HostCol], probe: &[HostCol], case: &str) {
    let nkeys = build.len();
    let mut args = build.to_vec();
    args.extend(probe.iter().cloned());
    let kernel = Kernel::BoundRange {
        nkeys,
        lower: None,
        upper: None,
    };
    crate::compare(gpu, &kernel, &args, &Strings::default(), case).expect("BoundRange without bounds succeeds");
    for kernel in [
        Kernel::HashProbe { nkeys },
        Kernel::HashMatch { nkeys, anti: false },
        Kernel::HashMatch { nkeys, anti: true },
    ] {
        let mut cpu = fox_cpu::CpuBackend::new();
        let want = probe_on(&mut cpu, &kernel, build, probe).unwrap_or_else(|e| panic!("{case}: cpu: {e}"));
        let got = probe_on(gpu, &kernel, build, probe).unwrap_or_else(|e| panic!("{case}: gpu: {e}"));
        assert_eq!(got.len(), want.len(), "{case}: {kernel:?}: outputs");
        for (o, (g, w)) in got.iter().zip(&want).enumerate() {
            if g != w {
                let at = (0..w.len().min(g.len())).find(|&i| format!("{:?}", row(g, i)) != format!("{:?}", row(w, i)));
                panic!(
                    "{case}: {kernel:?}: output {o} differs (lengths gpu {} cpu {}), first at row {at:?}: gpu {:?}, cpu {:?}",
                    g.len(),
                    w.len(),
                    at.map(|i| row(g, i)),
                    at.map(|i| row(w, i))
                );
            }
        }
    }
}

fn row(c: &HostCol, i: usize) -> u64 {
    match c {
        HostCol::U32(x) => u64::from(x[i]),
        HostCol::U8(x) => u64::from(x[i]),
        _ => u64::MAX,
    }
}

/// A u32 column of `n` Zipf-like values (s ≈ 1 over `1..=d`: value k with weight ~1/k).
fn zipf(rng: &mut Rng, n: usize, d: u64) -> HostCol {
    let ln = (d as f64).ln();
    HostCol::U32(
        (0..n)
            .map(|_| {
                let u = rng.below(1 << 52) as f64 / (1u64 << 52) as f64;
                ((u * ln).exp() as u64).clamp(1, d) as u32
            })
            .collect(),
    )
}

/// Random sorted build sides and probing sides for 1 to 3 keys of every element type and
/// distribution (the first key of the type, each other of it or of any type) and every
/// size of SIZES, the probing side of 0, 1, n or 2n + 5 rows: `f` gets each with its case
/// and `rng` to draw more.
fn key_cases(rng: &mut Rng, mut f: impl FnMut(&mut Rng, &[HostCol], &[HostCol], &str)) {
    for nkeys in 1..=3usize {
        for elem in ELEMS {
            for &dist in &Dist::ALL {
                for &n in SIZES {
                    let elems: Vec<Elem> = (0..nkeys)
                        .map(|k| {
                            if k == 0 || rng.chance(50) {
                                elem
                            } else {
                                ELEMS[rng.below(ELEMS.len() as u64) as usize]
                            }
                        })
                        .collect();
                    let keys = |rng: &mut Rng, n: usize| -> Vec<HostCol> {
                        elems.iter().map(|&e| random_col(rng, e, n, dist)).collect()
                    };
                    let build = sort_rows(&keys(rng, n), false);
                    let np = [0, 1, n, 2 * n + 5][rng.below(4) as usize];
                    let probe = keys(rng, np);
                    let case = format!("keys {elems:?}, dist {dist:?}, build {n}, probe {np}");
                    f(rng, &build, &probe, &case);
                }
            }
        }
    }
}

/// Zipf-like keys on both sides, one key and a Zipf key beside an i64 one, for build sides
/// of 1000, 4097 and 100,003 rows: (sorted build side, probing side, case).
fn zipf_cases(rng: &mut Rng) -> Vec<(Vec<HostCol>, Vec<HostCol>, String)> {
    let mut cases = Vec::new();
    for &n in &[1000usize, 4097, 100_003] {
        let b = sort_rows(&[zipf(rng, n, 10_000)], false);
        let p = vec![zipf(rng, 3 * n + 1, 10_000)];
        cases.push((b, p, format!("zipf, build {n}")));
        let b2 = sort_rows(
            &[zipf(rng, n, 100), random_col(rng, Elem::I64, n, Dist::Range(16))],
            false,
        );
        let p2 = vec![
            zipf(rng, 2 * n, 100),
            random_col(rng, Elem::I64, 2 * n, Dist::Range(16)),
        ];
        cases.push((b2, p2, format!("zipf and i64, build {n}")));
    }
    cases
}

fn hash_probe_keys_and_distributions() {
    let mut gpu = gpu("hash_probe_keys_and_distributions");
    let mut rng = Rng::new(53);
    key_cases(&mut rng, |_, build, probe, case| check(&mut gpu, build, probe, case));
    for (b, p, case) in zipf_cases(&mut rng) {
        check(&mut gpu, &b, &p, &case);
    }
}

fn hash_probe_rejects_a_malformed_table() {
    let mut gpu = gpu("hash_probe_rejects_a_malformed_table");
    let ctx = Strings::default();
    let keys = HostCol::I32(vec![1, 2, 3]);
    for table in [HostCol::U32(vec![0, 0, 0]), HostCol::U32(vec![0])] {
        let args = [keys.clone(), table, keys.clone()];
        let err = run_on(&mut gpu, &Kernel::HashProbe { nkeys: 1 }, &args, &ctx).unwrap_err();
        assert!(err.contains("power of two"), "{err}");
    }
    // A full table (no empty slot) ends every probe, as on the CPU.
    let args = [keys.clone(), HostCol::U32(vec![1, 2]), HostCol::I32(vec![9, 1])];
    let kernel = Kernel::HashProbe { nkeys: 1 };
    let mut cpu = fox_cpu::CpuBackend::new();
    assert_eq!(
        run_on(&mut gpu, &kernel, &args, &ctx),
        run_on(&mut cpu, &kernel, &args, &ctx)
    );
}

fn hash_probe_large() {
    let mut gpu = gpu("hash_probe_large");
    let mut rng = Rng::new(59);
    // A build side of 2^16 distinct-ish keys probed by 10^7 rows, and a 10^7-row build side
    // whose table (2^25 slots) is kept unpartitioned and probed in global memory.
    let build = sort_rows(&[random_col(&mut rng, Elem::I64, 1 << 16, Dist::Range(1 << 17))], false);
    let probe = vec![random_col(&mut rng, Elem::I64, LARGE, Dist::Range(1 << 17))];
    check(&mut gpu, &build, &probe, "large probe");
    gpu.set_hash_partitioning(usize::MAX, fox_cuda::HASH_SUB_TABLE_BYTES);
    let build = sort_rows(&[random_col(&mut rng, Elem::U32, LARGE, Dist::Range(1 << 22))], false);
    assert!(!builds_partitioned(&mut gpu, &build), "the table is partitioned");
    let probe = vec![random_col(&mut rng, Elem::U32, 1 << 20, Dist::Range(1 << 22))];
    check(&mut gpu, &build, &probe, "large build");
}

/// Whether the table `gpu` builds over `build` is the radix-partitioned one (a length that
/// is no power of two; the unpartitioned table's always is one).
fn builds_partitioned(gpu: &mut fox_cuda::CudaBackend, build: &[HostCol]) -> bool {
    let table = run_on(
        gpu,
        &Kernel::HashBuild { nkeys: build.len() },
        build,
        &Strings::default(),
    )
    .unwrap_or_else(|e| panic!("HashBuild: {e}"));
    !table[0].len().is_power_of_two()
}

/// [`check`] with the partitioned table (every table partitioned, sub-tables of
/// `sub` bytes), after making sure the build side gets one. The GPU's table has the
/// model's header, directory and runs per sub-table, every run reachable from its hash;
/// and the model's own table, probed on the GPU, gives the CPU's results too.
fn check_partitioned(gpu: &mut fox_cuda::CudaBackend, sub: u32, build: &[HostCol], probe: &[HostCol], case: &str) {
    gpu.set_hash_partitioning(0, sub);
    let ctx = Strings::default();
    let nkeys = build.len();
    let table = run_on(gpu, &Kernel::HashBuild { nkeys }, build, &ctx).unwrap_or_else(|e| panic!("{case}: {e}"));
    let HostCol::U32(words) = &table[0] else {
        panic!("{case}: the table is {:?}", table[0].elem())
    };
    let got = PartitionedTable::from_words(words).unwrap_or_else(|e| panic!("{case}: not a partitioned table: {e}"));
    let model = PartitionedTable::build(build, sub);
    assert_eq!(
        (got.pbits, got.k, got.nb, &got.dir),
        (model.pbits, model.k, model.nb, &model.dir),
        "{case}: header or directory"
    );
    for p in 0..model.dir.len() - 1 {
        assert_eq!(got.runs_of(p), model.runs_of(p), "{case}: the runs of partition {p}");
    }
    assert!(got.runs_are_reachable(), "{case}: a run is not reachable from its hash");
    let case = format!("{case}, partitioned, sub-tables of {sub} bytes");
    check(gpu, build, probe, &case);
    // The model's table (its runs in other slots than the GPU's) probed on the GPU.
    let mut args = build.to_vec();
    args.push(HostCol::U32(model.to_words()));
    args.extend(probe.iter().cloned());
    let mut cpu = fox_cpu::CpuBackend::new();
    let kernel = Kernel::HashProbe { nkeys };
    let want = probe_on(&mut cpu, &kernel, build, probe).unwrap_or_else(|e| panic!("{case}: cpu: {e}"));
    let got = run_on(gpu, &kernel, &args, &ctx).unwrap_or_else(|e| panic!("{case}: the model's table: {e}"));
    assert_eq!(got, want, "{case}: the probe of the model's table");
    gpu.set_hash_partitioning(fox_cuda::HASH_PARTITION_BYTES, fox_cuda::HASH_SUB_TABLE_BYTES);
}

/// The model of the partitioned table (fox_cuda::testing::PartitionedTable), which the GPU
/// tests hold the GPU's table to, probes as the CPU's table does, is laid out as the probe
/// checks, and places every run where linear probing reaches it.
fn partitioned_table_model_probes_as_the_cpu() {
    let mut rng = Rng::new(79);
    for nkeys in 1..=3usize {
        for elem in ELEMS {
            for &dist in &Dist::ALL {
                for &n in &[0usize, 1, 2, 255, 1000, 4097] {
                    let elems: Vec<Elem> = (0..nkeys)
                        .map(|k| {
                            if k == 0 {
                                elem
                            } else {
                                ELEMS[rng.below(ELEMS.len() as u64) as usize]
                            }
                        })
                        .collect();
                    let keys = |rng: &mut Rng, n: usize| -> Vec<HostCol> {
                        elems.iter().map(|&e| random_col(rng, e, n, dist)).collect()
                    };
                    let build = sort_rows(&keys(&mut rng, n), false);
                    let probe = keys(&mut rng, 2 * n + 3);
                    for sub in SUB_TABLES {
                        let case = format!("keys {elems:?}, dist {dist:?}, build {n}, sub-tables of {sub} bytes");
                        let model = PartitionedTable::build(&build, sub);
                        assert!(model.runs_are_reachable(), "{case}");
                        let words = model.to_words();
                        assert!(!words.len().is_power_of_two(), "{case}");
                        assert_eq!(PartitionedTable::from_words(&words).as_ref(), Ok(&model), "{case}");
                        let mut cpu = fox_cpu::CpuBackend::new();
                        let want = probe_on(&mut cpu, &Kernel::HashProbe { nkeys }, &build, &probe)
                            .unwrap_or_else(|e| panic!("{case}: {e}"));
                        let (lo, hi): (Vec<u32>, Vec<u32>) =
                            (0..probe[0].len()).map(|i| model.probe(&probe, i)).unzip();
                        assert_eq!(vec![HostCol::U32(lo), HostCol::U32(hi)], want, "{case}");
                    }
                }
            }
        }
    }
    // Sub-tables of 64 bytes hold one run on average: thousands of partitions.
    let build = sort_rows(&[zipf(&mut rng, 100_003, 10_000)], false);
    let model = PartitionedTable::build(&build, 64);
    assert!(model.pbits >= 12, "{} partition bits", model.pbits);
    assert!(model.runs_are_reachable());
}

fn hash_probe_partitioned_keys_and_distributions() {
    let mut gpu = gpu("hash_probe_partitioned_keys_and_distributions");
    let mut rng = Rng::new(67);
    key_cases(&mut rng, |rng, build, probe, case| {
        let sub = SUB_TABLES[rng.below(SUB_TABLES.len() as u64) as usize];
        check_partitioned(&mut gpu, sub, build, probe, case);
    });
    // Zipf-like keys (a few heavy partitions of probing rows) with every sub-table size:
    // from one partition to thousands.
    for (b, p, case) in zipf_cases(&mut rng) {
        for sub in SUB_TABLES {
            check_partitioned(&mut gpu, sub, &b, &p, &case);
        }
    }
    // Floats with NaN, -0.0 and 0.0 on both sides, with i128 keys beside them.
    let floats = |n: usize| {
        HostCol::F64(
            (0..n)
                .map(|i| [f64::NAN, -0.0, 0.0, 1.5, -1.5, f64::INFINITY, -f64::NAN][i % 7])
                .collect(),
        )
    };
    let wide = |rng: &mut Rng, n: usize| random_col(rng, Elem::I128, n, Dist::Range(3));
    let build = sort_rows(&[floats(5003), wide(&mut rng, 5003)], false);
    let probe = vec![floats(7001), wide(&mut rng, 7001)];
    for sub in SUB_TABLES {
        check_partitioned(&mut gpu, sub, &build, &probe, "nan, -0.0 and i128");
    }
}

fn hash_probe_partitioned_large() {
    let mut gpu = gpu("hash_probe_partitioned_large");
    let mut rng = Rng::new(71);
    // A 10^7-row build side is partitioned at the default threshold (a table of 2^25
    // slots): probed by 2^20 rows, and by 10^7 rows of two keys.
    let build = sort_rows(&[random_col(&mut rng, Elem::U32, LARGE, Dist::Range(1 << 22))], false);
    assert!(
        builds_partitioned(&mut gpu, &build),
        "the 10^7-row table is not partitioned"
    );
    let probe = vec![random_col(&mut rng, Elem::U32, 1 << 20, Dist::Range(1 << 22))];
    check(&mut gpu, &build, &probe, "large build, default threshold");
    let build = sort_rows(
        &[
            random_col(&mut rng, Elem::I64, LARGE, Dist::Range(1 << 20)),
            random_col(&mut rng, Elem::I32, LARGE, Dist::Range(8)),
        ],
        false,
    );
    assert!(
        builds_partitioned(&mut gpu, &build),
        "the 10^7-row table is not partitioned"
    );
    let probe = vec![
        random_col(&mut rng, Elem::I64, LARGE, Dist::Range(1 << 20)),
        random_col(&mut rng, Elem::I32, LARGE, Dist::Range(8)),
    ];
    check(&mut gpu, &build, &probe, "large build and probe, two keys");
    // A small build side partitioned by force, probed by 10^7 rows.
    let build = sort_rows(&[random_col(&mut rng, Elem::I64, 1 << 16, Dist::Range(1 << 17))], false);
    let probe = vec![random_col(&mut rng, Elem::I64, LARGE, Dist::Range(1 << 17))];
    check_partitioned(&mut gpu, 1024, &build, &probe, "large probe");
}

/// Under a memory limit that leaves room for the outputs and a fraction of the
/// partitioned probing rows, the probe partitions them in slices and its results are the
/// CPU's; with no room for the outputs, it fails with an out-of-memory error.
fn hash_probe_partitioned_under_a_memory_limit() {
    let mut gpu = gpu("hash_probe_partitioned_under_a_memory_limit");
    let mut rng = Rng::new(73);
    let ctx = Strings::default();
    gpu.set_hash_partitioning(0, 1024);
    let n = 1 << 21;
    let build = sort_rows(&[random_col(&mut rng, Elem::I64, 5000, Dist::Range(20_000))], false);
    let probe = random_col(&mut rng, Elem::I64, n, Dist::Range(20_000));
    let kernel = Kernel::HashProbe { nkeys: 1 };
    let mut cpu = fox_cpu::CpuBackend::new();
    let want = probe_on(&mut cpu, &kernel, &build, std::slice::from_ref(&probe)).expect("cpu");
    let b = gpu.upload(build[0].clone()).expect("upload");
    let p = gpu.upload(probe.clone()).expect("upload");
    let table = gpu
        .launch(&Kernel::HashBuild { nkeys: 1 }, &[&b], &ctx)
        .expect("HashBuild")
        .remove(0);
    assert!(!table.len.is_power_of_two(), "the table is not partitioned");
    // The outputs (8 bytes per row) and a quarter of the rows' partitioned words (12
    // bytes per row), beside the partition counters.
    let room = 8 * n as u64 + 3 * n as u64 + (1 << 20);
    gpu.set_memory_limit(Some(gpu.mem().in_use as u64 + room));
    let got = gpu.launch(&kernel, &[&b, &table, &p], &ctx);
    gpu.set_memory_limit(Some(gpu.mem().in_use as u64 + 4 * n as u64));
    let refused = gpu.launch(&kernel, &[&b, &table, &p], &ctx);
    gpu.set_memory_limit(None);
    let got = got.expect("the probe in slices");
    let cols: Vec<HostCol> = got.iter().map(|o| gpu.download(o).expect("download")).collect();
    assert_eq!(cols, want, "the probe in slices differs from the CPU's");
    let e = refused.expect_err("no room for the outputs");
    assert!(e.0.contains("out of memory"), "{}", e.0);
    for buf in got.into_iter().chain([b, p, table]) {
        gpu.free(buf);
    }
}

/// The nested-loop kernels on both backends: counts, then the pairs from the host scan of
/// the counts, and the match flags.
fn check_nested(gpu: &mut fox_cuda::CudaBackend, left: &[HostCol], right: &[HostCol], case: &str) {
    let ctx = Strings::default();
    let nkeys = left.len();
    let mut keys = left.to_vec();
    keys.extend(right.iter().cloned());
    let counts =
        crate::compare(gpu, &Kernel::NestedLoopCount { nkeys }, &keys, &ctx, case).expect("NestedLoopCount succeeds");
    let HostCol::U64(c) = &counts[0] else {
        panic!("{case}: counts are {:?}", counts[0].elem())
    };
    let mut offsets = Vec::with_capacity(c.len());
    let mut sum = 0u64;
    for &x in c {
        offsets.push(sum);
        sum += x;
    }
    let mut wargs = keys.clone();
    wargs.push(HostCol::U64(offsets));
    wargs.push(HostCol::U64(vec![sum]));
    crate::compare(gpu, &Kernel::NestedLoopWrite { nkeys }, &wargs, &ctx, case).expect("NestedLoopWrite succeeds");
    for anti in [false, true] {
        crate::compare(gpu, &Kernel::NestedLoopMatch { nkeys, anti }, &keys, &ctx, case)
            .expect("NestedLoopMatch succeeds");
    }
    // Offsets that are not the scan are refused on both (all-zero offsets are the scan
    // when no row before the last has a pair).
    if c[..c.len().saturating_sub(1)].iter().any(|&x| x > 0) {
        let mut bad = keys.clone();
        bad.push(HostCol::U64(vec![0; c.len()]));
        bad.push(HostCol::U64(vec![sum]));
        assert!(
            crate::compare(gpu, &Kernel::NestedLoopWrite { nkeys }, &bad, &ctx, case).is_err(),
            "{case}"
        );
    }
}

fn nested_loop_keys_and_distributions() {
    let mut gpu = gpu("nested_loop_keys_and_distributions");
    let mut rng = Rng::new(61);
    for nkeys in 1..=3usize {
        for elem in ELEMS {
            for &dist in &Dist::ALL {
                for &n in &[0usize, 1, 2, 255, 257, 1025] {
                    let elems: Vec<Elem> = (0..nkeys)
                        .map(|k| {
                            if k == 0 {
                                elem
                            } else {
                                ELEMS[rng.below(ELEMS.len() as u64) as usize]
                            }
                        })
                        .collect();
                    let m = [0, 1, n, 3 * n + 1][rng.below(4) as usize];
                    let left: Vec<HostCol> = elems.iter().map(|&e| random_col(&mut rng, e, n, dist)).collect();
                    let right: Vec<HostCol> = elems.iter().map(|&e| random_col(&mut rng, e, m, dist)).collect();
                    check_nested(
                        &mut gpu,
                        &left,
                        &right,
                        &format!("keys {elems:?}, dist {dist:?}, {n} × {m}"),
                    );
                }
            }
        }
    }
    // Zipf-like keys, and a left side of many blocks against a right side of many tiles.
    let left = vec![zipf(&mut rng, 20_011, 300)];
    let right = vec![zipf(&mut rng, 3001, 300)];
    check_nested(&mut gpu, &left, &right, "zipf");
}

tests![
    Gpu nested_loop_keys_and_distributions,
    Gpu hash_probe_keys_and_distributions,
    Gpu hash_probe_rejects_a_malformed_table,
    Gpu hash_probe_large,
    Cpu partitioned_table_model_probes_as_the_cpu,
    Gpu hash_probe_partitioned_keys_and_distributions,
    Gpu hash_probe_partitioned_large,
    Gpu hash_probe_partitioned_under_a_memory_limit,
];
