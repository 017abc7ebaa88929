//! The exchange between devices: rows routed on the GPU against the CPU twin
//! (`Backend::route_rows`), and rows moved between two GPUs by the NCCL link.

use fox_cuda::testing::{describe, first_mismatch, gpu, random_col, value_at, Dist, Rng, ELEMS, SIZES};
use fox_cuda::CudaBackend;
use fox_kernel::Elem;
use fox_runtime::{Backend, DevBuf, HostCol};
use std::sync::{Arc, Barrier, Mutex};

/// `want` and `got` hold the same parts, column by column, bit for bit.
fn assert_parts(want: &[Vec<HostCol>], got: &[Vec<HostCol>], case: &str) {
    assert_eq!(want.len(), got.len(), "{case}: parts");
    for (d, (w, g)) in want.iter().zip(got).enumerate() {
        assert_eq!(w.len(), g.len(), "{case}: columns of part {d}");
        for (c, (a, b)) in w.iter().zip(g).enumerate() {
            if let Some((i, n)) = first_mismatch(a, b) {
                panic!(
                    "{case}: part {d} column {c} ({} on the cpu, {} on the gpu) differs at {n} rows, first {i}: cpu {}, gpu {}",
                    describe(a),
                    describe(b),
                    if i < a.len() { value_at(a, i) } else { "-".into() },
                    if i < b.len() { value_at(b, i) } else { "-".into() },
                );
            }
        }
    }
}

/// The parts `backend` routes `cols` into, downloaded (and freed).
fn routed(backend: &mut dyn Backend, cols: &[HostCol], keys: &[usize], devices: usize) -> Vec<Vec<HostCol>> {
    let bufs: Vec<DevBuf> = cols
        .iter()
        .map(|c| backend.upload(c.clone()).expect("upload"))
        .collect();
    let refs: Vec<&DevBuf> = bufs.iter().collect();
    let parts = backend
        .route_rows(&refs, keys, devices)
        .expect("routes")
        .expect("the backend routes rows");
    let out = parts
        .into_iter()
        .map(|p| p.into_iter().map(|b| backend.take(b).expect("download")).collect())
        .collect();
    for b in bufs {
        backend.free(b);
    }
    out
}

fn route_rows_match_the_cpu_for_every_type_size_and_device_count() {
    let mut gpu = gpu("route_rows_match_the_cpu_for_every_type_size_and_device_count");
    let mut cpu = fox_cpu::CpuBackend::new();
    let mut rng = Rng::new(7);
    let sizes: Vec<usize> = SIZES.iter().copied().chain([100_003]).collect();
    for &n in &sizes {
        for (di, dist) in Dist::ALL.iter().enumerate() {
            let cols: Vec<HostCol> = ELEMS.iter().map(|&e| random_col(&mut rng, e, n, *dist)).collect();
            let key_sets: Vec<Vec<usize>> = vec![
                vec![],
                vec![0],
                vec![1],
                vec![2],
                vec![3],
                vec![4],
                vec![5],
                vec![6],
                vec![1, 3],
                vec![6, 5, 4, 3, 2, 1, 0],
            ];
            for keys in &key_sets {
                for devices in [1usize, 2, 3, 4, 8] {
                    let case = format!("n {n}, dist {dist:?} (#{di}), keys {keys:?}, devices {devices}");
                    let want = routed(&mut cpu, &cols, keys, devices);
                    let got = routed(&mut gpu, &cols, keys, devices);
                    assert_parts(&want, &got, &case);
                }
            }
        }
    }
    // Equal I32 and I64 values go to the same device, and -0.0 with 0.0.
    let ints = vec![HostCol::I32(vec![-5, 0, 7, i32::MIN, i32::MAX])];
    let longs = vec![HostCol::I64(vec![-5, 0, 7, i64::from(i32::MIN), i64::from(i32::MAX)])];
    let zeros = vec![HostCol::F64(vec![0.0, -0.0])];
    for devices in [2usize, 3, 5] {
        let a = routed(&mut gpu, &ints, &[0], devices);
        let b = routed(&mut gpu, &longs, &[0], devices);
        let lens = |p: &Vec<Vec<HostCol>>| p.iter().map(|c| c[0].len()).collect::<Vec<_>>();
        assert_eq!(lens(&a), lens(&b), "i32 and i64 on {devices} devices");
        let z = routed(&mut gpu, &zeros, &[0], devices);
        assert!(
            lens(&z).contains(&2),
            "0.0 and -0.0 on {devices} devices: {:?}",
            lens(&z)
        );
    }
}

type Received = Result<Vec<HostCol>, String>;

/// Runs one exchange on each linked GPU of `backends` on a thread of its own: device `d`
/// sends `send[d][p]` to device `p`; with `room[d]`, device `d` has that many bytes left
/// under its memory limit once its parts are on it. Returns each backend and its received
/// columns or error.
fn exchange_on_threads(
    backends: Vec<CudaBackend>,
    send: Vec<Vec<Vec<HostCol>>>,
    elems: Vec<Elem>,
    room: Vec<Option<u64>>,
) -> Vec<(CudaBackend, Received)> {
    let n = backends.len();
    let lens: Vec<Vec<usize>> = send
        .iter()
        .map(|parts| parts.iter().map(|p| p.first().map_or(0, HostCol::len)).collect())
        .collect();
    let barrier = Arc::new(Barrier::new(n));
    type Outcomes = Mutex<Vec<Option<Result<Vec<u64>, String>>>>;
    let outcomes: Arc<Outcomes> = Arc::new(Mutex::new(vec![None; n]));
    let threads: Vec<_> = backends
        .into_iter()
        .zip(send)
        .enumerate()
        .map(|(rank, (mut b, parts))| {
            let (barrier, outcomes, elems) = (barrier.clone(), outcomes.clone(), elems.clone());
            let room = room[rank];
            let recv_rows: Vec<usize> = (0..n).map(|q| lens[q][rank]).collect();
            std::thread::spawn(move || {
                let bufs: Vec<Vec<DevBuf>> = parts
                    .into_iter()
                    .map(|p| p.into_iter().map(|c| b.upload(c).expect("upload")).collect())
                    .collect();
                let refs: Vec<Vec<&DevBuf>> = bufs.iter().map(|p| p.iter().collect()).collect();
                if let Some(r) = room {
                    b.set_memory_limit(Some(b.mem().in_use as u64 + r));
                }
                let mut meet = |msg: Result<Vec<u64>, String>| {
                    outcomes.lock().unwrap()[rank] = Some(msg);
                    barrier.wait();
                    let all = outcomes.lock().unwrap().clone();
                    barrier.wait();
                    let mut words = Vec::new();
                    for (q, o) in all.into_iter().enumerate() {
                        match o {
                            Some(Ok(w)) => words.push(w),
                            Some(Err(e)) => return Err(format!("device {q}: {e}")),
                            None => return Err(format!("device {q} did not come")),
                        }
                    }
                    Ok(words)
                };
                let got = b.peer_exchange(&refs, &recv_rows, &elems, &mut meet);
                let out = got
                    .map_err(|e| e.0)
                    .map(|outs| outs.into_iter().map(|o| b.take(o).expect("download")).collect());
                for buf in bufs.into_iter().flatten() {
                    b.free(buf);
                }
                b.set_memory_limit(None);
                (b, out)
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().expect("a device's thread"))
        .collect()
}

fn two_gpus_exchange_rows_in_sender_order() {
    let mut backends: Vec<CudaBackend> = (0..2)
        .map(|d| CudaBackend::on(d).unwrap_or_else(|e| panic!("GPU {d}: {e}")))
        .collect();
    fox_cuda::link_devices(&mut backends).expect("NCCL links the GPUs");
    let mut rng = Rng::new(11);
    let mut back = Vec::new();
    let elems = vec![Elem::I32, Elem::F64, Elem::I128, Elem::U8];
    // Device d sends part p: sizes including empty parts and parts not multiples of any
    // block.
    let sizes = [[0usize, 1], [4097, 0], [1_000_003, 33], [7, 2_000_001]];
    for (k, s) in sizes.iter().enumerate() {
        let send: Vec<Vec<Vec<HostCol>>> = (0..2)
            .map(|d| {
                (0..2)
                    .map(|p| {
                        let rows = if d == 0 { s[p] } else { s[1 - p] };
                        elems
                            .iter()
                            .map(|&e| random_col(&mut rng, e, rows, Dist::Uniform))
                            .collect()
                    })
                    .collect()
            })
            .collect();
        let want: Vec<Vec<HostCol>> = (0..2)
            .map(|p| {
                (0..elems.len())
                    .map(|c| {
                        let parts: Vec<HostCol> = (0..2).map(|d| send[d][p][c].clone()).collect();
                        HostCol::try_concat(elems[c], parts, "test").expect("concat")
                    })
                    .collect()
            })
            .collect();
        let mut got = Vec::new();
        for (d, (b, r)) in exchange_on_threads(backends, send, elems.clone(), vec![None, None])
            .into_iter()
            .enumerate()
        {
            got.push(r.unwrap_or_else(|e| panic!("case {k}: device {d}: {e}")));
            back.push(b);
        }
        backends = std::mem::take(&mut back);
        assert_parts(&want, &got, &format!("case {k}, sizes {s:?}"));
    }
    // A gather: device 1 sends all its rows to device 0 and no columns to itself.
    let a = random_col(&mut rng, Elem::I64, 5000, Dist::Uniform);
    let b = random_col(&mut rng, Elem::I64, 3001, Dist::Uniform);
    let send = vec![vec![vec![a.clone()], vec![]], vec![vec![b.clone()], vec![]]];
    let mut got = Vec::new();
    for (d, (bk, r)) in exchange_on_threads(backends, send, vec![Elem::I64], vec![None, None])
        .into_iter()
        .enumerate()
    {
        got.push(r.unwrap_or_else(|e| panic!("gather: device {d}: {e}")));
        back.push(bk);
    }
    backends = std::mem::take(&mut back);
    let whole = HostCol::try_concat(Elem::I64, vec![a, b], "test").expect("concat");
    assert_parts(&[vec![whole], vec![HostCol::I64(Vec::new())]], &got, "gather");
    // A device that cannot allocate what it receives stops every device, none hangs.
    let send: Vec<Vec<Vec<HostCol>>> = (0..2)
        .map(|_| {
            (0..2)
                .map(|_| vec![random_col(&mut rng, Elem::U64, 10_000, Dist::Uniform)])
                .collect()
        })
        .collect();
    let got = exchange_on_threads(backends, send, vec![Elem::U64], vec![None, Some(1024)]);
    for (d, (_, r)) in got.iter().enumerate() {
        let e = r.as_ref().expect_err("every device fails");
        assert!(e.contains("device 1"), "device {d}: {e}");
    }
}

/// A device's message at a meeting, or its failure.
type Message = Result<Vec<u64>, String>;

/// A meeting of `n` threads for `Backend::peer_exchange`, as the runtime holds it.
fn meeting(n: usize) -> impl Fn(usize, Message) -> Result<Vec<Vec<u64>>, String> + Clone {
    let barrier = Arc::new(Barrier::new(n));
    type Outcomes = Mutex<Vec<Option<Result<Vec<u64>, String>>>>;
    let outcomes: Arc<Outcomes> = Arc::new(Mutex::new(vec![None; n]));
    move |rank, msg| {
        outcomes.lock().unwrap()[rank] = Some(msg);
        barrier.wait();
        let all = outcomes.lock().unwrap().clone();
        barrier.wait();
        let mut words = Vec::new();
        for (q, o) in all.into_iter().enumerate() {
            match o {
                Some(Ok(w)) => words.push(w),
                Some(Err(e)) => return Err(format!("device {q}: {e}")),
                None => return Err(format!("device {q} did not come")),
            }
        }
        Ok(words)
    }
}

/// Device 1's stream is held from the host, so its part of an exchange never starts:
/// device 1's wait ends at the stall limit before any NCCL work is queued, both devices
/// fail with an error naming device 1, the link is shut, and a later exchange (after the
/// hold is let go, so that device 1's stream runs again) is refused, naming why.
fn a_device_whose_stream_does_not_come_stops_the_exchange_at_the_stall_limit() {
    let mut backends: Vec<CudaBackend> = (0..2)
        .map(|d| CudaBackend::on(d).unwrap_or_else(|e| panic!("GPU {d}: {e}")))
        .collect();
    fox_cuda::link_devices(&mut backends).expect("NCCL links the GPUs");
    let limit = std::time::Duration::from_secs(1);
    let meet = meeting(2);
    let mut rng = Rng::new(5);
    let started = std::time::Instant::now();
    let (hold_tx, hold_rx) = std::sync::mpsc::channel();
    let threads: Vec<_> = backends
        .into_iter()
        .enumerate()
        .map(|(rank, mut b)| {
            let meet = meet.clone();
            let parts: Vec<HostCol> = (0..2)
                .map(|_| random_col(&mut rng, Elem::U64, 1000, Dist::Uniform))
                .collect();
            let hold_tx = hold_tx.clone();
            std::thread::spawn(move || {
                b.set_stall_limit(limit);
                let bufs: Vec<DevBuf> = parts.into_iter().map(|c| b.upload(c).expect("upload")).collect();
                b.sync().expect("uploaded");
                if rank == 1 {
                    hold_tx
                        .send(fox_cuda::testing::hold_stream(&b).expect("holds the stream"))
                        .unwrap();
                }
                let send: Vec<Vec<&DevBuf>> = bufs.iter().map(|c| vec![c]).collect();
                let mut m = |msg| meet(rank, msg);
                let got = b
                    .peer_exchange(&send, &[1000, 1000], &[Elem::U64], &mut m)
                    .map(|o| o.len());
                (b, bufs, got.map_err(|e| e.0))
            })
        })
        .collect();
    let hold = hold_rx.recv().unwrap();
    let results: Vec<_> = threads
        .into_iter()
        .map(|t| t.join().expect("a device's thread"))
        .collect();
    let took = started.elapsed();
    drop(hold);
    for (d, (_, _, got)) in results.iter().enumerate() {
        let e = got.as_ref().expect_err("the exchange fails");
        assert!(
            e.contains("device 1 had not finished its work before it")
                && e.contains("made no progress for 1 s (the stall limit; FOX_STALL_TIMEOUT_S sets it)"),
            "device {d}: {e}"
        );
    }
    assert!(took < std::time::Duration::from_secs(60), "{took:?}");
    // The link is shut: a later exchange is refused before it moves anything.
    let meet = meeting(2);
    let refused: Vec<String> = results
        .into_iter()
        .enumerate()
        .map(|(rank, (mut b, bufs, _))| {
            let meet = meet.clone();
            std::thread::spawn(move || {
                let mut m = |msg| meet(rank, msg);
                let got = b.peer_exchange(&[vec![], vec![]], &[0, 0], &[], &mut m);
                for buf in bufs {
                    b.free(buf);
                }
                got.map(|_| ()).expect_err("refused").0
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().expect("a device's thread"))
        .collect();
    for (d, e) in refused.iter().enumerate() {
        assert!(
            e.contains("the NCCL link between the devices was shut after an exchange failed"),
            "device {d}: {e}"
        );
    }
}

tests![
    Gpu route_rows_match_the_cpu_for_every_type_size_and_device_count,
    Gpus2 two_gpus_exchange_rows_in_sender_order,
    Gpus2 a_device_whose_stream_does_not_come_stops_the_exchange_at_the_stall_limit,
];
