//! GPU vs CPU: hash joins, index nested-loop searches and nested-loop joins. Each backend builds its own table (`HashBuild`; where a run
//! lands differs between them) and probes it (`HashProbe`, `HashMatch`); the probe results
//! must be equal, as must the index nested loop's `BoundRange` without bounds: empty sides, one row, all-equal, skewed and Zipf-like keys, duplicates,
//! sizes around block sizes, 1 to 3 keys of each element type, a malformed table, and a
//! 10^7-row probe. The nested-loop kernels are compared directly (counts, pairs after a
//! host scan, flags, offsets that are not the scan) on sides of up to a few thousand rows.

use fox_cuda::testing::{gpu, random_col, run_on, sort_rows, Dist, Rng, Strings, ELEMS, LARGE, SIZES};
use fox_kernel::{Elem, Kernel};
use fox_runtime::{Backend, HostCol};

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

fn hash_probe_keys_and_distributions() {
    let mut gpu = gpu("hash_probe_keys_and_distributions");
    let mut rng = Rng::new(53);
    for nkeys in 1..=3usize {
        for elem in ELEMS {
            for &dist in &Dist::ALL {
                for &n in SIZES {
                    // Keys of one type, or the type first and then others.
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
                    let build = sort_rows(&keys(&mut rng, n), false);
                    let np = [0, 1, n, 2 * n + 5][rng.below(4) as usize];
                    let probe = keys(&mut rng, np);
                    let case = format!("keys {elems:?}, dist {dist:?}, build {n}, probe {np}");
                    check(&mut gpu, &build, &probe, &case);
                }
            }
        }
    }
    // Zipf-like keys on both sides, one and two keys.
    for &n in &[1000usize, 4097, 100_003] {
        let b = sort_rows(&[zipf(&mut rng, n, 10_000)], false);
        let p = vec![zipf(&mut rng, 3 * n + 1, 10_000)];
        check(&mut gpu, &b, &p, &format!("zipf, build {n}"));
        let b2 = sort_rows(
            &[
                zipf(&mut rng, n, 100),
                random_col(&mut rng, Elem::I64, n, Dist::Range(16)),
            ],
            false,
        );
        let p2 = vec![
            zipf(&mut rng, 2 * n, 100),
            random_col(&mut rng, Elem::I64, 2 * n, Dist::Range(16)),
        ];
        check(&mut gpu, &b2, &p2, &format!("zipf and i64, build {n}"));
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
    // A build side of 2^16 distinct-ish keys probed by 10^7 rows, and a 10^7-row build side.
    let build = sort_rows(&[random_col(&mut rng, Elem::I64, 1 << 16, Dist::Range(1 << 17))], false);
    let probe = vec![random_col(&mut rng, Elem::I64, LARGE, Dist::Range(1 << 17))];
    check(&mut gpu, &build, &probe, "large probe");
    let build = sort_rows(&[random_col(&mut rng, Elem::U32, LARGE, Dist::Range(1 << 22))], false);
    let probe = vec![random_col(&mut rng, Elem::U32, 1 << 20, Dist::Range(1 << 22))];
    check(&mut gpu, &build, &probe, "large build");
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
];
