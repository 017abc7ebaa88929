//! GPU vs CPU: Gather, Concat, Slice, RootRange, RangeCount on random inputs.

use crate::compare;
use fox_cuda::testing::{gpu, random_col, random_index, Dist, Rng, Strings, ELEMS, LARGE, SIZES};
use fox_kernel::{Elem, Kernel};
use fox_runtime::HostCol;

fn gather_every_type_size_and_shift() {
    let mut gpu = gpu("gather_every_type_size_and_shift");
    let ctx = Strings::default();
    let mut rng = Rng::new(1);
    for &n in SIZES {
        for shift in [0u32, 1, 7] {
            for (d, dist) in Dist::ALL.iter().enumerate() {
                let m = 1 + rng.below(3000) as usize + shift as usize;
                let idx = random_index(&mut rng, n, (m - shift as usize) as u64);
                let mut args = vec![idx];
                for &e in &ELEMS {
                    args.push(random_col(&mut rng, e, m, *dist));
                }
                let case = format!("n {n}, shift {shift}, column rows {m}, dist {dist:?} (#{d})");
                compare(&mut gpu, &Kernel::Gather { shift }, &args, &ctx, &case).expect("gather succeeds");
            }
        }
    }
}

fn gather_columns_of_different_lengths_and_no_columns() {
    let mut gpu = gpu("gather_columns_of_different_lengths_and_no_columns");
    let ctx = Strings::default();
    let mut rng = Rng::new(2);
    let idx = random_index(&mut rng, 1025, 10);
    let args = vec![
        idx.clone(),
        random_col(&mut rng, Elem::I32, 10, Dist::Uniform),
        random_col(&mut rng, Elem::F64, 4097, Dist::Uniform),
    ];
    compare(
        &mut gpu,
        &Kernel::Gather { shift: 0 },
        &args,
        &ctx,
        "lengths 10 and 4097",
    )
    .expect("succeeds");
    // A gather of no column breaks the kernel's contract: the launch is refused.
    compare(&mut gpu, &Kernel::Gather { shift: 3 }, &[idx], &ctx, "no columns").expect_err("refused");
}

fn gather_out_of_range_is_an_error_on_both() {
    let mut gpu = gpu("gather_out_of_range_is_an_error_on_both");
    let ctx = Strings::default();
    let mut rng = Rng::new(3);
    for (n, m, shift) in [(1usize, 0usize, 0u32), (1025, 100, 0), (4097, 1000, 5), (1000, 999, 1)] {
        let mut idx = match random_index(&mut rng, n, m.max(1) as u64) {
            HostCol::U32(v) => v,
            _ => unreachable!(),
        };
        // Rows past the end in the middle and near the end.
        idx[n / 2] = m as u32;
        idx[n - 1] = u32::MAX;
        let args = vec![
            HostCol::U32(idx),
            random_col(&mut rng, Elem::U64, m + 50, Dist::Uniform),
            random_col(&mut rng, Elem::I128, m + 20, Dist::Uniform),
            random_col(&mut rng, Elem::U8, m, Dist::Uniform),
        ];
        let case = format!("n {n}, column rows {m} and {}, shift {shift}", m + 50);
        let cpu_msg = compare(&mut gpu, &Kernel::Gather { shift }, &args, &ctx, &case).expect_err("out of range");
        // The same message: first failing column, then its first failing row.
        assert!(cpu_msg.contains("out of range"), "{cpu_msg}");
        let gpu_msg = gpu_error(&mut gpu, &Kernel::Gather { shift }, &args);
        assert_eq!(gpu_msg, cpu_msg, "{case}");
        let good: Vec<HostCol> = std::iter::once(HostCol::U32(vec![0; n]))
            .chain(args[1..].iter().cloned())
            .collect();
        crate::trie::deferred_fails_like_immediate(&mut gpu, &Kernel::Gather { shift }, &args, &good, &case);
    }
}

/// The GPU's error message for a launch that fails.
fn gpu_error(gpu: &mut fox_cuda::CudaBackend, kernel: &Kernel, args: &[HostCol]) -> String {
    use fox_runtime::Backend;
    let bufs: Vec<_> = args.iter().map(|a| gpu.upload(a.clone()).expect("upload")).collect();
    let refs: Vec<_> = bufs.iter().collect();
    let msg = match gpu.launch(kernel, &refs, &Strings::default()) {
        Ok(outs) => {
            for o in outs {
                gpu.free(o);
            }
            "no error".to_string()
        }
        Err(e) => e.0,
    };
    for b in bufs {
        gpu.free(b);
    }
    msg
}

fn gather_large() {
    let mut gpu = gpu("gather_large");
    let ctx = Strings::default();
    let mut rng = Rng::new(4);
    let m = LARGE / 2 + 3;
    let args = vec![
        random_index(&mut rng, LARGE, m as u64),
        random_col(&mut rng, Elem::U32, m, Dist::Uniform),
        random_col(&mut rng, Elem::I64, m, Dist::Skewed),
        random_col(&mut rng, Elem::U8, m, Dist::Uniform),
        random_col(&mut rng, Elem::I128, m, Dist::Uniform),
    ];
    compare(&mut gpu, &Kernel::Gather { shift: 0 }, &args, &ctx, "large").expect("succeeds");
}

fn concat_groups() {
    let mut gpu = gpu("concat_groups");
    let ctx = Strings::default();
    let mut rng = Rng::new(5);
    for parts in 1..=4usize {
        for width in 1..=3usize {
            for &base in SIZES {
                let elems: Vec<Elem> = (0..width)
                    .map(|_| ELEMS[rng.below(ELEMS.len() as u64) as usize])
                    .collect();
                let mut args = Vec::new();
                let mut lens = Vec::new();
                for p in 0..parts {
                    let len = if p % 2 == 1 { rng.below(3) as usize } else { base };
                    lens.push(len);
                    for &e in &elems {
                        args.push(random_col(&mut rng, e, len, Dist::Uniform));
                    }
                }
                let case = format!("parts {parts}, width {width}, lengths {lens:?}, elems {elems:?}");
                compare(&mut gpu, &Kernel::Concat { parts, width }, &args, &ctx, &case).expect("succeeds");
            }
        }
    }
    // Mismatched element types and lengths are errors on both.
    let bad = vec![HostCol::I32(vec![1]), HostCol::U32(vec![1])];
    compare(
        &mut gpu,
        &Kernel::Concat { parts: 2, width: 1 },
        &bad,
        &ctx,
        "type mismatch",
    )
    .expect_err("error");
    let bad = vec![
        HostCol::I32(vec![1]),
        HostCol::I32(vec![1, 2]),
        HostCol::I32(vec![3]),
        HostCol::I32(vec![4]),
    ];
    compare(
        &mut gpu,
        &Kernel::Concat { parts: 2, width: 2 },
        &bad,
        &ctx,
        "length mismatch",
    )
    .expect_err("error");
    compare(&mut gpu, &Kernel::Concat { parts: 0, width: 1 }, &[], &ctx, "no groups").expect_err("error");
    let large = vec![
        random_col(&mut rng, Elem::F64, LARGE, Dist::Uniform),
        random_col(&mut rng, Elem::F64, 12345, Dist::Uniform),
    ];
    compare(&mut gpu, &Kernel::Concat { parts: 2, width: 1 }, &large, &ctx, "large").expect("succeeds");
    let large = vec![
        random_col(&mut rng, Elem::I128, 12345, Dist::Uniform),
        random_col(&mut rng, Elem::I128, LARGE, Dist::Uniform),
    ];
    compare(
        &mut gpu,
        &Kernel::Concat { parts: 2, width: 1 },
        &large,
        &ctx,
        "large i128",
    )
    .expect("succeeds");
}

fn slices() {
    let mut gpu = gpu("slices");
    let ctx = Strings::default();
    let mut rng = Rng::new(6);
    for &n in SIZES {
        let args = vec![
            random_col(&mut rng, Elem::U8, n, Dist::Uniform),
            random_col(&mut rng, Elem::I64, n, Dist::Uniform),
            random_col(&mut rng, Elem::F64, n, Dist::Uniform),
            random_col(&mut rng, Elem::I128, n, Dist::Uniform),
        ];
        let n64 = n as u64;
        for (start, len) in [
            (0, 0),
            (0, n64),
            (0, u64::MAX),
            (1, 10),
            (n64 / 2, 3),
            (n64, 5),
            (n64 + 7, 1),
            (u64::MAX, u64::MAX),
            (3, u64::MAX - 1),
        ] {
            let case = format!("rows {n}, start {start}, len {len}");
            compare(&mut gpu, &Kernel::Slice { start, len }, &args, &ctx, &case).expect("succeeds");
        }
    }
    let bad = vec![HostCol::I32(vec![1]), HostCol::I32(vec![1, 2])];
    compare(
        &mut gpu,
        &Kernel::Slice { start: 0, len: 1 },
        &bad,
        &ctx,
        "length mismatch",
    )
    .expect_err("error");
    // A slice of no column breaks the kernel's contract: the launch is refused.
    compare(&mut gpu, &Kernel::Slice { start: 0, len: 1 }, &[], &ctx, "no columns").expect_err("refused");
}

fn root_range_and_range_count() {
    let mut gpu = gpu("root_range_and_range_count");
    let ctx = Strings::default();
    let mut rng = Rng::new(7);
    for &n in SIZES {
        for e in [Elem::I32, Elem::U64] {
            let values = random_col(&mut rng, e, n, Dist::Uniform);
            compare(&mut gpu, &Kernel::RootRange, &[values], &ctx, &format!("{n} x {e:?}")).expect("succeeds");
        }
        for dist in Dist::ALL {
            let lo = match random_col(&mut rng, Elem::U32, n, dist) {
                HostCol::U32(v) => v,
                _ => unreachable!(),
            };
            let hi: Vec<u32> = lo
                .iter()
                .map(|&l| {
                    let span = if rng.chance(30) { 1 } else { 5000 };
                    l.saturating_add(rng.below(span) as u32)
                })
                .collect();
            let args = vec![HostCol::U32(lo.clone()), HostCol::U32(hi.clone())];
            let case = format!("rows {n}, lo {dist:?}");
            compare(&mut gpu, &Kernel::RangeCount, &args, &ctx, &case).expect("succeeds");
            if n > 0 {
                let mut bad_hi = hi.clone();
                let row = rng.below(n as u64) as usize;
                if lo[row] > 0 {
                    bad_hi[row] = lo[row] - 1;
                    let args = vec![HostCol::U32(lo), HostCol::U32(bad_hi)];
                    let case = format!("rows {n}, hi below lo at row {row}");
                    let cpu = compare(&mut gpu, &Kernel::RangeCount, &args, &ctx, &case).expect_err("error");
                    assert_eq!(gpu_error(&mut gpu, &Kernel::RangeCount, &args), cpu, "{case}");
                    let good = vec![args[0].clone(), args[0].clone()];
                    crate::trie::deferred_fails_like_immediate(&mut gpu, &Kernel::RangeCount, &args, &good, &case);
                }
            }
        }
    }
    compare(&mut gpu, &Kernel::RootRange, &[], &ctx, "no args").expect_err("error");
    let bad = vec![HostCol::U32(vec![1]), HostCol::U32(vec![1, 2])];
    compare(&mut gpu, &Kernel::RangeCount, &bad, &ctx, "length mismatch").expect_err("error");
    let bad = vec![HostCol::U32(vec![1]), HostCol::I32(vec![2])];
    compare(&mut gpu, &Kernel::RangeCount, &bad, &ctx, "type mismatch").expect_err("error");
    let lo = random_col(&mut rng, Elem::U32, LARGE, Dist::Range(1 << 30));
    let hi = match &lo {
        HostCol::U32(v) => HostCol::U32(v.iter().map(|&l| l + (l % 97)).collect()),
        _ => unreachable!(),
    };
    compare(&mut gpu, &Kernel::RangeCount, &[lo, hi], &ctx, "large").expect("succeeds");
}

/// `upload_rows` copies the rows straight from the caller's column: what comes back is
/// what the CPU backend (which copies the rows first) holds, for every element type,
/// empty, one-row, whole and interior ranges; a range past the column is an error.
fn upload_rows_matches_cpu() {
    use fox_runtime::Backend;
    let mut gpu = gpu("upload_rows_matches_cpu");
    let mut cpu = fox_cpu::CpuBackend::new();
    let mut rng = Rng::new(8);
    for &n in SIZES {
        for &e in &ELEMS {
            let col = random_col(&mut rng, e, n, Dist::Uniform);
            for rows in [0..0, 0..n, 0..n.min(1), n / 3..n, n / 4..n / 2 + 1, n..n] {
                let rows = rows.start.min(n)..rows.end.min(n).max(rows.start.min(n));
                let case = format!("{e:?}, {n} rows, rows {rows:?}");
                let g = gpu
                    .upload_rows(&col, rows.clone())
                    .unwrap_or_else(|err| panic!("{case}: {err}"));
                let c = cpu
                    .upload_rows(&col, rows.clone())
                    .unwrap_or_else(|err| panic!("{case}: {err}"));
                let got = gpu.download(&g).expect("download");
                let want = cpu.download(&c).expect("download");
                let bits = |c: &HostCol| match c {
                    HostCol::F64(v) => HostCol::U64(v.iter().map(|x| x.to_bits()).collect()),
                    other => other.clone(),
                };
                assert_eq!(bits(&got), bits(&want), "{case}");
                assert_eq!(got.len(), rows.len(), "{case}");
                gpu.free(g);
                cpu.free(c);
            }
        }
    }
    let col = HostCol::I32(vec![1, 2, 3]);
    assert!(gpu.upload_rows(&col, 2..4).is_err(), "rows past the end are refused");
}

/// `upload_flags` builds on the device the table the CPU backend builds on the host: 1 at
/// the given rows (none, one, every row, random sparse and dense sets, the last row),
/// tables of sizes around the block size; a row past the table is an error on both.
fn upload_flags_matches_cpu() {
    use fox_runtime::Backend;
    let mut gpu = gpu("upload_flags_matches_cpu");
    let mut cpu = fox_cpu::CpuBackend::new();
    let mut rng = Rng::new(9);
    for &n in SIZES {
        let mut sets: Vec<Vec<u32>> = vec![Vec::new(), (0..n as u32).collect()];
        if n > 0 {
            sets.push(vec![n as u32 - 1]);
            sets.push(vec![0]);
            for every in [2u64, 97] {
                sets.push((0..n as u32).filter(|_| rng.below(every) == 0).collect());
            }
        }
        for ones in sets {
            let case = format!("{n} rows, {} ones", ones.len());
            let g = gpu.upload_flags(n, &ones).unwrap_or_else(|e| panic!("{case}: {e}"));
            let c = cpu.upload_flags(n, &ones).unwrap_or_else(|e| panic!("{case}: {e}"));
            let got = gpu.download(&g).expect("download");
            assert_eq!(got, cpu.download(&c).expect("download"), "{case}");
            assert_eq!(got.len(), n, "{case}");
            gpu.free(g);
            cpu.free(c);
        }
    }
    assert!(gpu.upload_flags(10, &[3, 10]).is_err(), "a row past the table");
    assert!(cpu.upload_flags(10, &[3, 10]).is_err(), "a row past the table");
    let before = gpu.mem().in_use;
    let _ = gpu.upload_flags(4097, &[1, 5000]);
    assert_eq!(gpu.mem().in_use, before, "nothing left allocated after a refusal");
}

/// Stored columns made from the values `v`, for each span 200, 60,000 and 3·10^9: an
/// int64 column of `v` modulo the span from the least value `lo(r)` (`r` drawn below
/// 1,000) and, for spans within int32, an int32 column of `v` modulo the span less
/// `shift`; then string columns of 3 and 300 distinct codes (`code(c)` for the c-th).
/// Each packed as a loaded column is.
fn packed_cases(
    rng: &mut Rng,
    v: &[i64],
    lo: impl Fn(i64) -> i64,
    shift: i64,
    code: impl Fn(u32) -> u32,
) -> Vec<fox_runtime::stored::StoredCol> {
    use fox_runtime::stored::StoredCol;
    let mut cols = Vec::new();
    for span in [200i64, 60_000, 3_000_000_000] {
        let lo = lo(rng.below(1000) as i64);
        cols.push(StoredCol::pack(
            HostCol::I64(v.iter().map(|&x| lo + x.rem_euclid(span)).collect()),
            None,
        ));
        if span < 1 << 31 {
            let narrow = v.iter().map(|&x| (x.rem_euclid(span) - shift) as i32).collect();
            cols.push(StoredCol::pack(HostCol::I32(narrow), None));
        }
    }
    for k in [3i64, 300] {
        let codes: Vec<u32> = (0..k as u32).map(&code).collect();
        let col: Vec<u32> = v.iter().map(|&x| codes[x.rem_euclid(k) as usize]).collect();
        let mut distinct = col.clone();
        distinct.sort_unstable();
        distinct.dedup();
        cols.push(StoredCol::pack(HostCol::U32(col), Some(&std::sync::Arc::new(distinct))));
    }
    cols
}

/// `upload_stored` widens a packed database column on the device to exactly what the CPU
/// backend widens on the host: int32 and int64 columns whose ranges pack in 1, 2 and 4
/// bytes, string columns of 3 and 300 distinct codes (1 and 2 bytes), under every
/// distribution, sizes around the block size, whole, interior and empty ranges, moved at
/// once and in pieces of a few bytes; a column held as it is uploads as it is; rows past
/// the column are refused, nothing left allocated.
fn upload_stored_matches_cpu() {
    use fox_runtime::stored::StoredCol;
    use fox_runtime::Backend;
    let mut gpu = gpu("upload_stored_matches_cpu");
    let mut cpu = fox_cpu::CpuBackend::new();
    let mut rng = Rng::new(10);
    let mut packed = 0;
    // Whole, and through pieces of 4 and 37 packed bytes (not a multiple of any width).
    for (piece, &n) in [fox_cuda::WIDEN_PIECE_BYTES, 4, 37]
        .into_iter()
        .flat_map(|p| SIZES.iter().map(move |n| (p, n)))
    {
        gpu.set_widen_piece_bytes(piece);
        for dist in Dist::ALL {
            let HostCol::I64(v) = random_col(&mut rng, Elem::I64, n, dist) else {
                unreachable!("an int64 column")
            };
            let mut cols = packed_cases(&mut rng, &v, |r| -(1i64 << 40) + r, 5_000, |c| c * 7919 + 11);
            cols.push(StoredCol::Plain(HostCol::I64(v.clone())));
            for col in &cols {
                packed += usize::from(col.plain().is_none());
                for (a, b) in [(0, n), (n / 3, n / 2 + 1), (n, n), (0, n.min(1))] {
                    let rows = a.min(n)..b.min(n).max(a.min(n));
                    let case = format!(
                        "{dist:?}, {n} rows, rows {rows:?}, {:?} held in {} bytes, pieces of {piece} bytes",
                        col.elem(),
                        col.bytes()
                    );
                    let before = gpu.mem().in_use;
                    let g = gpu
                        .upload_stored(col, rows.clone())
                        .unwrap_or_else(|e| panic!("{case}: {e}"));
                    let c = cpu
                        .upload_stored(col, rows.clone())
                        .unwrap_or_else(|e| panic!("{case}: {e}"));
                    let got = gpu.download(&g).expect("download");
                    assert_eq!(got, cpu.download(&c).expect("download"), "{case}");
                    assert_eq!(got.len(), rows.len(), "{case}");
                    assert_eq!(got, col.slice(rows.start, rows.end, "t").expect("slice"), "{case}");
                    gpu.free(g);
                    cpu.free(c);
                    assert_eq!(gpu.mem().in_use, before, "{case}: nothing else left allocated");
                }
            }
        }
    }
    gpu.set_widen_piece_bytes(fox_cuda::WIDEN_PIECE_BYTES);
    assert!(packed > 300, "the cases pack their columns ({packed} packed)");
    let col = StoredCol::pack(HostCol::I64(vec![5, 6, 7]), None);
    assert!(col.plain().is_none());
    let before = gpu.mem().in_use;
    assert!(gpu.upload_stored(&col, 2..4).is_err(), "rows past the end are refused");
    assert!(cpu.upload_stored(&col, 2..4).is_err(), "rows past the end are refused");
    assert_eq!(gpu.mem().in_use, before, "nothing left allocated after a refusal");
}

/// Packed rows kept on the device (`upload_packed` of a run of a column's rows) widen
/// into every run of the rows they hold as the CPU widens them (`StoredCol::slice`):
/// int32 and int64 columns packed in 1, 2 and 4 bytes, string columns of 3 and 300
/// distinct codes, every distribution, sizes around the block size, runs at odd offsets
/// (the packed rows misaligned to 4 bytes before the codes), empty runs; the kept buffer
/// takes `packed_bytes` and stays as it is; a column held as it is keeps nothing; rows the
/// buffer does not hold are refused with nothing left allocated.
fn widen_packed_matches_cpu() {
    use fox_runtime::stored::StoredCol;
    use fox_runtime::Backend;
    let mut gpu = gpu("widen_packed_matches_cpu");
    let mut rng = Rng::new(11);
    let mut cases = 0;
    for &n in SIZES {
        for dist in Dist::ALL {
            let HostCol::I64(v) = random_col(&mut rng, Elem::I64, n, dist) else {
                unreachable!("an int64 column")
            };
            let cols = packed_cases(&mut rng, &v, |r| (1i64 << 41) - r, 7, |c| c * 104_729 + 3);
            for col in &cols {
                if col.plain().is_some() {
                    continue;
                }
                // The kept rows: all of them, and an interior run from an odd row.
                let first = (n / 5) | usize::from(n > 2);
                for kept in [0..n, first.min(n)..n - n / 7] {
                    let case = format!("{dist:?}, {n} rows, kept {kept:?}, {:?}", col.elem());
                    let packed = gpu
                        .upload_packed(col, kept.clone())
                        .unwrap_or_else(|e| panic!("{case}: {e}"))
                        .unwrap_or_else(|| panic!("{case}: nothing kept"));
                    assert_eq!(packed.len, col.packed_bytes(kept.len()), "{case}");
                    let image = gpu.download(&packed).expect("download");
                    let len = kept.len();
                    for (a, b) in [(0, len), (1, len / 2 + 1), (len / 3, len), (len, len)] {
                        let rows = kept.start + a.min(len)..kept.start + b.min(len).max(a.min(len));
                        let w = gpu
                            .widen_packed(&packed, col, kept.clone(), rows.clone())
                            .unwrap_or_else(|e| panic!("{case}, rows {rows:?}: {e}"));
                        let got = gpu.download(&w).expect("download");
                        assert_eq!(
                            got,
                            col.slice(rows.start, rows.end, "t").expect("slice"),
                            "{case}, rows {rows:?}"
                        );
                        gpu.free(w);
                        cases += 1;
                    }
                    assert_eq!(
                        gpu.download(&packed).expect("download"),
                        image,
                        "{case}: the kept rows stay"
                    );
                    let before = gpu.mem().in_use;
                    let past = kept.start..kept.end + 1;
                    if kept.end < n {
                        assert!(gpu.widen_packed(&packed, col, kept.clone(), past).is_err(), "{case}");
                    }
                    if kept.start > 0 {
                        let before_first = kept.start - 1..kept.start;
                        assert!(
                            gpu.widen_packed(&packed, col, kept.clone(), before_first).is_err(),
                            "{case}"
                        );
                        let wrong = kept.start - 1..kept.end;
                        if col.packed_bytes(wrong.len()) != packed.len {
                            assert!(
                                gpu.widen_packed(&packed, col, wrong.clone(), wrong).is_err(),
                                "{case}: another size"
                            );
                        }
                    }
                    assert_eq!(
                        gpu.mem().in_use,
                        before,
                        "{case}: nothing left allocated after a refusal"
                    );
                    gpu.free(packed);
                }
            }
        }
    }
    assert!(cases > 500, "{cases} runs widened");
    let plain = StoredCol::Plain(HostCol::I64(vec![1, 2, 3]));
    assert!(gpu.upload_packed(&plain, 0..3).expect("a plain column").is_none());
}

/// Host bytes of a database column offered to be page-locked: not locked at the first
/// offer, nor when small; locked at the second; uploads of any rows from them are the
/// CPU backend's; unlocked once the backend holds their owner alone (at the next offer),
/// nothing left allocated; a packed column's packed rows lock the same way.
fn pin_host_locks_a_column_read_again_and_lets_it_go() {
    use fox_runtime::stored::StoredCol;
    use fox_runtime::Backend;
    use std::any::Any;
    use std::sync::Arc;
    let mut gpu = gpu("pin_host_locks_a_column_read_again_and_lets_it_go");
    let mut cpu = fox_cpu::CpuBackend::new();
    let mut rng = Rng::new(41);
    // 80 MiB of int32 (at least the 64 MiB the backend locks), and a packed column of
    // 2-byte rows as large.
    let n = 20 << 20;
    let HostCol::I32(v) = random_col(&mut rng, Elem::I32, n, Dist::Uniform) else {
        unreachable!("an int32 column")
    };
    let small: Vec<i64> = (0..40i64 << 20).map(|i| (i * 7919) % 60_000 - 30_000).collect();
    let packed = StoredCol::pack(HostCol::I64(small), None);
    assert!(packed.plain().is_none(), "the column packs");
    for col in [StoredCol::Plain(HostCol::I32(v)), packed] {
        let owner: Arc<StoredCol> = Arc::new(col);
        let as_any: Arc<dyn Any + Send + Sync> = owner.clone();
        let bytes = owner.storage();
        let before = gpu.mem().in_use;
        // SAFETY: `owner` owns the bytes and never changes them.
        assert!(!unsafe { gpu.pin_host(&as_any, bytes) }, "the first offer");
        assert_eq!(gpu.pinned_host_bytes(), 0);
        assert!(!unsafe { gpu.pin_host(&as_any, &bytes[..1 << 20]) }, "a small range");
        assert!(
            !unsafe { gpu.pin_host(&as_any, &bytes[..1 << 20]) },
            "a small range again"
        );
        assert!(unsafe { gpu.pin_host(&as_any, bytes) }, "the second offer");
        assert!(unsafe { gpu.pin_host(&as_any, bytes) }, "locked");
        assert_eq!(gpu.pinned_host_bytes(), bytes.len());
        let len = owner.len();
        for (a, b) in [(0, len), (len / 3, len / 2 + 1), (len - 1, len), (5, 5)] {
            let g = gpu.upload_stored(&owner, a..b).expect("upload");
            let c = cpu.upload_stored(&owner, a..b).expect("upload");
            assert_eq!(
                gpu.download(&g).expect("download"),
                cpu.download(&c).expect("download"),
                "rows {a}..{b}"
            );
            gpu.free(g);
            cpu.free(c);
        }
        assert_eq!(gpu.mem().in_use, before);
        drop(as_any);
        drop(owner);
        // The next offer lets the range whose owner only the backend holds go.
        let other = Arc::new(vec![0u8; 8]);
        let other_any: Arc<dyn Any + Send + Sync> = other.clone();
        assert!(!unsafe { gpu.pin_host(&other_any, other.as_slice()) });
        assert_eq!(gpu.pinned_host_bytes(), 0);
    }
}

tests![
    Gpu pin_host_locks_a_column_read_again_and_lets_it_go,
    Gpu gather_every_type_size_and_shift,
    Gpu gather_columns_of_different_lengths_and_no_columns,
    Gpu gather_out_of_range_is_an_error_on_both,
    Gpu gather_large,
    Gpu concat_groups,
    Gpu slices,
    Gpu root_range_and_range_count,
    Gpu upload_rows_matches_cpu,
    Gpu upload_flags_matches_cpu,
    Gpu upload_stored_matches_cpu,
    Gpu widen_packed_matches_cpu,
];
