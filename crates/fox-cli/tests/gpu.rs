//! The binaries on the GPU, in a test executable with its own harness (`harness = false`,
//! libtest-mimic) so that without a GPU its tests are reported as `ignored (no GPU: …)`,
//! never as passed, and with `FOX_REQUIRE_GPU=1` fail instead. The command line is
//! libtest's: a name filter, `--exact`, `--skip`, `--test-threads`, `--list`. A function
//! not listed in `TESTS` is dead code, which CI's clippy rejects.

use fox_cuda::testing::{check_gpu_test_reporting, Needs, Ready};
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Every test: its name, what it needs, its body (which panics on failure).
const TESTS: &[(&str, Needs, fn())] = &[
    (
        "repl::a_session_on_the_gpu_answers_as_on_the_cpu",
        Needs::Gpu,
        a_session_on_the_gpu_answers_as_on_the_cpu,
    ),
    (
        "joins::aggregated_joins_in_rounds_on_the_gpu_answer_as_on_the_cpu",
        Needs::Gpu,
        aggregated_joins_in_rounds_on_the_gpu_answer_as_on_the_cpu,
    ),
    (
        "host_tier::tpch_q9_under_a_small_limit_on_the_gpu_keeps_it_and_answers_as_on_the_cpu",
        Needs::Gpu,
        tpch_q9_under_a_small_limit_on_the_gpu_keeps_it_and_answers_as_on_the_cpu,
    ),
    (
        "foxbench::datalog_on_the_gpu_answers_as_the_cpu_backend_and_no_cpu_skips_it",
        Needs::Gpu,
        datalog_on_the_gpu_answers_as_the_cpu_backend_and_no_cpu_skips_it,
    ),
    (
        "harness::gpu_tests_are_ignored_without_a_gpu_and_fail_when_it_is_required",
        Needs::Cpu,
        gpu_tests_are_ignored_without_a_gpu_and_fail_when_it_is_required,
    ),
];

fn main() {
    let args = Arguments::from_args();
    let trials = TESTS
        .iter()
        .map(|&(name, needs, run)| {
            Trial::ignorable_test(name, move || match needs.ready() {
                Ready::Yes => {
                    run();
                    Ok(Completion::Completed)
                }
                Ready::Missing(reason) => Ok(Completion::ignored_with(reason)),
                Ready::Required(msg) => Err(Failed::from(msg)),
            })
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `fox repl --backend BACKEND ARGS` with `script` on standard input, which must succeed
/// (exit 0, no error on standard error); returns stdout.
fn repl_on(backend: &str, args: &[&str], script: &str) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fox"))
        .args(["repl", "--backend", backend])
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(o.status.code(), Some(0), "{backend}: {err}");
    assert!(!err.contains("error"), "{backend}: {err}");
    String::from_utf8(o.stdout).unwrap()
}

fn a_session_on_the_gpu_answers_as_on_the_cpu() {
    let sessions: [(&[&str], &str); 2] = [
        (
            &[],
            "edge(x, y) -> int32(x), int32(y).\n\
             edge(1, 2). edge(2, 3). edge(3, 4). edge(4, 1). edge(2, 4).\n\
             path(x, y) <- edge(x, y).\n\
             path(x, z) <- path(x, y), edge(y, z).\n\
             ?- path(1, y).\n\
             ?- path(x, y), path(y, x), x < y.\n\
             deg[x] = n <- agg<<n = count()>> edge(x, _).\n\
             ?- deg[x] = n, n > 1.\n\
             edge(4, 5).\n\
             ?- path(x, 5).\n\
             ?- deg[x] = n.\n",
        ),
        (
            &["--graph", "gnm:60:600:3"],
            "edge(x, y) -> int32(x), int32(y).\n\
             .input edge.\n\
             tri(x, y, z) <- edge(x, y), edge(y, z), edge(x, z), x < y < z.\n\
             ntri[] = n <- agg<<n = count()>> tri(_, _, _).\n\
             ?- ntri[] = n.\n\
             ?- tri(x, y, z), x < 5.\n\
             ?- ntri[] = n.\n",
        ),
    ];
    for (args, script) in sessions {
        let cpu = repl_on("cpu", args, script);
        let gpu = repl_on("gpu", args, script);
        assert_eq!(gpu, cpu, "{args:?}");
        assert!(cpu.contains(" row") && !cpu.contains("error"), "{cpu}");
    }
}

/// `foxrun PROGRAM --graph gnm:300:3000:3 --timing ARGS`, which must succeed; returns
/// stdout and the windows `--timing` reports.
fn foxrun_graph(program: &Path, args: &[&str]) -> (Vec<u8>, u64) {
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .arg(program)
        .args(["--graph", "gnm:300:3000:3", "--timing"])
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
    let rounds = err
        .lines()
        .find_map(|l| l.strip_prefix("rounds: "))
        .and_then(|l| l.split_whitespace().next())
        .map_or(0, |n| n.parse().unwrap());
    (o.stdout, rounds)
}

/// `foxbench datalog --backend gpu`: TC and SG (recursion over a relation kept in runs)
/// derive on the GPU what the CPU backend derives (count and hash per relation), and
/// `--no-cpu` leaves the CPU backend out.
fn datalog_on_the_gpu_answers_as_the_cpu_backend_and_no_cpu_skips_it() {
    for program in ["tc", "sg"] {
        for no_cpu in [false, true] {
            let mut args = vec![
                "datalog",
                "--program",
                program,
                "--graph",
                "gnm:1000:1500:5",
                "--backend",
                "gpu",
            ];
            if no_cpu {
                args.push("--no-cpu");
            }
            let o = Command::new(env!("CARGO_BIN_EXE_foxbench"))
                .args(&args)
                .current_dir(repo())
                .output()
                .unwrap();
            let out = String::from_utf8_lossy(&o.stdout).into_owned();
            assert_eq!(
                o.status.code(),
                Some(0),
                "{args:?}: {out}{}",
                String::from_utf8_lossy(&o.stderr)
            );
            let answers: Vec<&str> = out
                .lines()
                .filter(|l| l.starts_with("Fox, ") && l.contains(": "))
                .map(|l| l.split_once(": ").unwrap().1)
                .collect();
            let cpu_rows = out.lines().filter(|l| l.starts_with("Fox, cpu backend")).count();
            if no_cpu {
                assert_eq!((answers.len(), cpu_rows), (1, 0), "{out}");
            } else {
                assert_eq!(answers.len(), 2, "{out}");
                assert!(cpu_rows > 0, "{out}");
                assert_eq!(answers[0], answers[1], "{out}");
            }
        }
    }
}

/// Joins read only by an aggregation (an equi-join, a band join, an inequality join),
/// written in many rounds on the GPU under a small `--memory-limit`, give the CPU's
/// results without a limit.
fn aggregated_joins_in_rounds_on_the_gpu_answer_as_on_the_cpu() {
    let dir = std::env::temp_dir().join(format!("fox-gpu-join-rounds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let program = dir.join("q.logic");
    std::fs::write(
        &program,
        "edge(x, y) -> int32(x), int32(y).\n.input edge.\n\
         two[x] = c <- agg<<c = count()>> edge(x, y), edge(y, z).\n\
         band[] = s <- agg<<s = sum(w)>> edge(x, y), edge(z, w), z >= x - 3, z <= x + 3.\n\
         ineq[] = m <- agg<<m = max(y - w)>> edge(x, y), edge(z, w), x < z, y > w.\n\
         .output two.\n.output band.\n.output ineq.\n",
    )
    .unwrap();
    for join in ["auto", "hash", "merge", "inl"] {
        let (cpu, _) = foxrun_graph(&program, &["--backend", "cpu", "--join", join]);
        let (gpu, rounds) = foxrun_graph(&program, &["--backend", "gpu", "--join", join, "--memory-limit", "8M"]);
        assert_eq!(gpu, cpu, "--join {join}");
        // At least one join ran in more than one round (how many depends on the
        // algorithm: forced to merge, the band and inequality joins pair on no keys).
        assert!(rounds >= 2, "--join {join}: {rounds} rounds");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// TPC-H Q9 at SF 0.1 (about 48 MB held at once without a limit) under a 12 MiB
/// `--memory-limit` on the GPU: the device peak stays within the limit, buffers move to
/// the host tier and back, and the answer is the CPU's without a limit, byte for byte.
fn tpch_q9_under_a_small_limit_on_the_gpu_keeps_it_and_answers_as_on_the_cpu() {
    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
            .args(["--tpch", "0.1", "tpch/queries/q09.logic", "--timing", "--no-progress"])
            .args(args)
            .current_dir(repo())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
        (o.stdout, err)
    };
    let (cpu, _) = run(&["--backend", "cpu"]);
    let limit: u64 = 12 << 20;
    let (gpu, err) = run(&["--backend", "gpu", "--memory-limit", &limit.to_string()]);
    assert_eq!(gpu, cpu);
    let at = err.find("device peak ").expect("a device peak") + "device peak ".len();
    let peak: u64 = err[at..].split_whitespace().next().unwrap().parse().unwrap();
    assert!(peak <= limit, "{err}");
    let tier = err
        .lines()
        .find(|l| l.starts_with("host tier: "))
        .expect("the host tier");
    assert!(!tier.contains(" 0 evictions"), "{tier}");
}

fn gpu_tests_are_ignored_without_a_gpu_and_fail_when_it_is_required() {
    let exe = std::env::current_exe().expect("the test executable");
    check_gpu_test_reporting(&exe, "repl::a_session_on_the_gpu_answers_as_on_the_cpu");
}
