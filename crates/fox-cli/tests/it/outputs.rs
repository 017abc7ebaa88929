//! Output files, standard output and result formats of the binaries as a user meets
//! them: paths that are links, FIFOs or devices, outputs written all or nothing (also on
//! SIGINT), a closed or full standard output, and `foxrun --format`.

use crate::common::repo as root;
use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn cmd(bin: &str, args: &[&str]) -> Command {
    let mut c = Command::new(bin);
    c.args(args).current_dir(root());
    c
}

fn foxc(args: &[&str]) -> Output {
    cmd(env!("CARGO_BIN_EXE_foxc"), args).output().unwrap()
}

fn foxrun(args: &[&str]) -> Output {
    cmd(env!("CARGO_BIN_EXE_foxrun"), args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn temp_dir(tag: &str) -> PathBuf {
    crate::common::temp_dir("fox-outputs", tag)
}

/// The names in `dir`, sorted (temporaries start with a dot).
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo failed");
}

/// What `write` writes into the FIFO at `path`. The test holds the FIFO's read end and a
/// write end of its own while `write` runs, so that a writer that replaced the FIFO
/// instead of writing into it leaves the result empty rather than the test waiting.
fn through_fifo(path: &Path, write: impl FnOnce()) -> String {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let r = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .unwrap();
    let w = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    // SAFETY: `fcntl` on a descriptor this function owns, clearing O_NONBLOCK.
    unsafe {
        let flags = libc::fcntl(r.as_raw_fd(), libc::F_GETFL);
        assert_eq!(libc::fcntl(r.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK), 0);
    }
    let reader = std::thread::spawn(move || {
        let mut r = r;
        let mut s = String::new();
        r.read_to_string(&mut s).unwrap();
        s
    });
    write();
    drop(w);
    reader.join().unwrap()
}

/// `/dev/full` when this system has it (as a character device). Tests only ever write
/// into it, through its own path or a link in a private directory.
fn dev_full() -> Option<&'static Path> {
    let p = Path::new("/dev/full");
    std::fs::metadata(p)
        .is_ok_and(|m| m.file_type().is_char_device())
        .then_some(p)
}

fn assert_dev_full_intact() {
    if let Some(p) = dev_full() {
        assert!(std::fs::symlink_metadata(p).unwrap().file_type().is_char_device());
    }
}

const PLAN_OF: &str = "queries/even_odd.logic";

#[test]
fn foxc_output_into_a_fifo_a_link_a_device_or_a_directory() {
    let dir = temp_dir("foxc");
    let want = text(&foxc(&["compile", PLAN_OF]).stdout);
    assert!(want.starts_with("KernelPlan("), "{want}");
    // A FIFO is written into and stays a FIFO.
    let fifo = dir.join("plan.fifo");
    mkfifo(&fifo);
    let got = through_fifo(&fifo, || {
        let o = foxc(&["compile", PLAN_OF, "-o", fifo.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    });
    assert_eq!(got, want);
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    // A link to a regular file: the target is replaced, the link stays.
    std::fs::write(dir.join("target.ron"), "old").unwrap();
    std::os::unix::fs::symlink("target.ron", dir.join("link.ron")).unwrap();
    let o = foxc(&["compile", PLAN_OF, "-o", dir.join("link.ron").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(std::fs::symlink_metadata(dir.join("link.ron"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_to_string(dir.join("target.ron")).unwrap(), want);
    // A directory is an error.
    std::fs::create_dir(dir.join("sub")).unwrap();
    let o = foxc(&["compile", PLAN_OF, "-o", dir.join("sub").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("it is a directory"), "{}", text(&o.stderr));
    // A full device (reached through a link in this directory, so that a writer that
    // replaced what it writes would replace the link, never the device) is an error
    // (ENOSPC), and the link and the device stay what they were.
    if let Some(full) = dev_full() {
        std::os::unix::fs::symlink(full, dir.join("full.ron")).unwrap();
        let o = foxc(&["compile", PLAN_OF, "-o", dir.join("full.ron").to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1));
        assert!(
            text(&o.stderr).contains("No space left on device"),
            "{}",
            text(&o.stderr)
        );
        assert_dev_full_intact();
        assert!(std::fs::symlink_metadata(dir.join("full.ron"))
            .unwrap()
            .file_type()
            .is_symlink());
    }
    assert_eq!(
        names(&dir),
        ["full.ron", "link.ron", "plan.fifo", "sub", "target.ron"][usize::from(dev_full().is_none())..]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn foxrun_writes_every_output_or_none() {
    let dir = temp_dir("foxrun-all");
    let out = dir.join("out");
    let out_s = out.to_str().unwrap();
    // The second output cannot be written: the first is not written either.
    std::fs::create_dir_all(out.join("odd.csv")).unwrap();
    let o = foxrun(&[PLAN_OF, "--backend", "cpu", "--out", out_s]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("odd.csv`: it is a directory"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(names(&out), ["odd.csv"]);
    if let Some(full) = dev_full() {
        std::fs::remove_dir(out.join("odd.csv")).unwrap();
        std::os::unix::fs::symlink(full, out.join("odd.csv")).unwrap();
        let o = foxrun(&[PLAN_OF, "--backend", "cpu", "--out", out_s]);
        assert_eq!(o.status.code(), Some(1));
        assert!(
            text(&o.stderr).contains("No space left on device"),
            "{}",
            text(&o.stderr)
        );
        assert_eq!(names(&out), ["odd.csv"]);
        assert_dev_full_intact();
        std::fs::remove_file(out.join("odd.csv")).unwrap();
    } else {
        std::fs::remove_dir(out.join("odd.csv")).unwrap();
    }
    // A run that succeeds writes both, and says so on standard error.
    let o = foxrun(&[PLAN_OF, "--backend", "cpu", "--out", out_s]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(names(&out), ["even.csv", "odd.csv"]);
    let e = text(&o.stderr);
    assert!(
        e.contains(&format!("foxrun: wrote {out_s}/even.csv (3 rows)\n"))
            && e.contains(&format!("foxrun: wrote {out_s}/odd.csv (3 rows)\n")),
        "{e}"
    );
    assert_eq!(text(&o.stdout), "");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn foxrun_interrupted_while_writing_leaves_no_temporary() {
    let dir = temp_dir("foxrun-sigint");
    // `odd.csv` is a FIFO nobody reads: foxrun has written even's temporary and waits to
    // open the FIFO when the signal comes.
    mkfifo(&dir.join("odd.csv"));
    let mut child = cmd(
        env!("CARGO_BIN_EXE_foxrun"),
        &[PLAN_OF, "--backend", "cpu", "--out", dir.to_str().unwrap()],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let start = std::time::Instant::now();
    while !names(&dir).iter().any(|n| n.starts_with(".even.csv.tmp")) {
        assert!(
            start.elapsed().as_secs() < 120,
            "no temporary appeared: {:?}",
            names(&dir)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: sends SIGINT to the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) }, 0);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert_eq!(names(&dir), ["odd.csv"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs a binary with standard output closed (`>&-`) or sent to `/dev/full`.
fn with_stdout(bin: &str, args: &[&str], stdin: &str, closed: bool) -> Option<Output> {
    let mut c = cmd(bin, args);
    if closed {
        // SAFETY: `close` is async-signal-safe, as `pre_exec` requires.
        unsafe {
            c.pre_exec(|| {
                libc::close(1);
                Ok(())
            });
        }
    } else {
        let full = std::fs::OpenOptions::new().write(true).open(dev_full()?).unwrap();
        c.stdout(full);
    }
    let mut child = c.stdin(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let status = child.wait().unwrap();
    Some(Output {
        status,
        stdout: Vec::new(),
        stderr: err.into_bytes(),
    })
}

#[test]
fn a_closed_or_full_standard_output_is_an_error() {
    let cases: [(&str, &[&str], &str, &str); 4] = [
        (env!("CARGO_BIN_EXE_foxc"), &["compile", PLAN_OF], "", "foxc: error: "),
        (
            env!("CARGO_BIN_EXE_foxrun"),
            &[PLAN_OF, "--backend", "cpu"],
            "",
            "foxrun: error: ",
        ),
        (
            env!("CARGO_BIN_EXE_foxbench"),
            &[
                "kernels",
                "--backend",
                "cpu",
                "--log2n",
                "4",
                "--join-log2n",
                "4",
                "--repeat",
                "1",
            ],
            "",
            "foxbench: error: ",
        ),
        (
            env!("CARGO_BIN_EXE_fox"),
            &["repl", "--backend", "cpu"],
            "?- 1 = 1.\n",
            "fox: error: ",
        ),
    ];
    for (bin, args, stdin, prefix) in cases {
        for (closed, why) in [(true, "it is closed"), (false, "No space left on device")] {
            let Some(o) = with_stdout(bin, args, stdin, closed) else {
                continue;
            };
            let e = text(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{bin} {args:?} (closed: {closed}): {e}");
            assert!(
                e.contains(&format!("{prefix}cannot write to standard output: {why}")),
                "{bin} {args:?}: {e}"
            );
            assert!(!e.contains("panicked"), "{e}");
        }
    }
    assert_dev_full_intact();
    // With nothing for standard output, a closed one is no error.
    let dir = temp_dir("closed-ok");
    let plan = dir.join("p.ron");
    let o = with_stdout(
        env!("CARGO_BIN_EXE_foxc"),
        &["compile", PLAN_OF, "-o", plan.to_str().unwrap()],
        "",
        true,
    )
    .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(std::fs::read_to_string(&plan).unwrap().starts_with("KernelPlan("));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tpch_gen_and_tpch_out_write_all_files_or_none() {
    let dir = temp_dir("tpch");
    let foxbench = |args: &[&str]| cmd(env!("CARGO_BIN_EXE_foxbench"), args).output().unwrap();
    // A table that cannot be written after others were: no table is left, nor any
    // temporary.
    let gen = dir.join("gen");
    std::fs::create_dir(&gen).unwrap();
    std::os::unix::fs::symlink("missing/partsupp.tbl", gen.join("partsupp.tbl")).unwrap();
    let o = foxbench(&["tpch-gen", "--sf", "0.001", "--out", gen.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("partsupp.tbl`: No such file or directory"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(names(&gen), ["partsupp.tbl"]);
    // `foxbench tpch --out`: a result that cannot be written leaves none written, nor the
    // JSON measurements.
    let data = dir.join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(
        data.join("lineitem.tbl"),
        "1|156|4|1|17|17954.55|0.04|0.02|N|O|1994-03-13|1994-02-12|1994-03-22|DELIVER IN PERSON|TRUCK|egular courts|\n\
         1|68|9|2|17|34850.16|0.06|0.06|A|F|1994-04-12|1994-02-28|1994-04-20|TAKE BACK RETURN|MAIL|ly final|\n",
    )
    .unwrap();
    let out = dir.join("out");
    std::fs::create_dir_all(out.join("q06.csv")).unwrap();
    let json = dir.join("bench.json");
    let args = [
        "tpch",
        "--data",
        data.to_str().unwrap(),
        "--queries",
        "1,6",
        "--repeat",
        "0",
        "--backend",
        "cpu",
        "--out",
        out.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ];
    let o = foxbench(&args);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("q06.csv`: it is a directory"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(names(&out), ["q06.csv"]);
    assert!(!json.exists());
    std::fs::remove_dir(out.join("q06.csv")).unwrap();
    let o = foxbench(&args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(names(&out), ["q01.csv", "q06.csv"]);
    assert_eq!(
        std::fs::read_to_string(out.join("q06.csv")).unwrap(),
        "revenue\n2091.0096\n"
    );
    assert!(json.is_file());
    std::fs::remove_dir_all(&dir).unwrap();
}

const TYPES: &str = r#"t(i, s, d, dt, f, b) -> int32(i), string(s), decimal(d), date(dt), float64(f), bool(b).
t(1, "a, \"b\"", 12.50, date("2020-01-02"), 1.5, true).
t(2, "tab\there", -0.05, date("1999-12-31"), -2.0e-3, false).
t(3, "back\\slash", 100.00, date("2000-02-29"), 1.0e300, true).
.output t.
n(x) -> int32(x).
n(x) <- t(x, _, _, _, _, _).
n(x) <- t(y, _, _, _, _, _), x = y + 10.
.output n.
"#;

#[test]
fn foxrun_formats_on_standard_output_and_in_files() {
    let dir = temp_dir("formats");
    let q = dir.join("q.logic");
    std::fs::write(&q, TYPES).unwrap();
    let q = q.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec![q, "--backend", "cpu"];
        args.extend(extra);
        let o = foxrun(&args);
        assert_eq!(o.status.code(), Some(0), "{extra:?}: {}", text(&o.stderr));
        text(&o.stdout)
    };
    assert_eq!(
        run(&["--format", "csv"]),
        "t\ni,s,d,dt,f,b\n1,\"a, \"\"b\"\"\",12.50,2020-01-02,1.5,true\n2,tab\there,-0.05,1999-12-31,-0.002,false\n\
         3,back\\slash,100.00,2000-02-29,1e300,true\n\nn\nx\n1\n2\n3\n11\n12\n13\n"
    );
    assert_eq!(
        run(&["--format", "tsv"]),
        "t\ni\ts\td\tdt\tf\tb\n1\ta, \"b\"\t12.50\t2020-01-02\t1.5\ttrue\n2\ttab\\there\t-0.05\t1999-12-31\t-0.002\tfalse\n\
         3\tback\\\\slash\t100.00\t2000-02-29\t1e300\ttrue\n\nn\nx\n1\n2\n3\n11\n12\n13\n"
    );
    let json = run(&["--format", "json"]);
    assert_eq!(
        json,
        r#"[
  {
    "name": "t",
    "columns": [{"name": "i", "type": "int32"}, {"name": "s", "type": "string"}, {"name": "d", "type": "decimal(2)"}, {"name": "dt", "type": "date"}, {"name": "f", "type": "float64"}, {"name": "b", "type": "bool"}],
    "rows": [
      [1, "a, \"b\"", 12.50, "2020-01-02", 1.5, true],
      [2, "tab\there", -0.05, "1999-12-31", -0.002, false],
      [3, "back\\slash", 100.00, "2000-02-29", 1e300, true]
    ]
  },
  {
    "name": "n",
    "columns": [{"name": "x", "type": "int32"}],
    "rows": [
      [1],
      [2],
      [3],
      [11],
      [12],
      [13]
    ]
  }
]
"#
    );
    // The table cut at --max-rows, numbers right-aligned.
    assert_eq!(
        run(&["--max-rows", "4"]).split("\n\n").nth(1).unwrap(),
        "n\n x\n--\n 1\n 2\n 3\n11\n… 2 more rows\n6 rows\n"
    );
    for all in ["all", "0"] {
        assert!(run(&["--max-rows", all]).ends_with("n\n x\n--\n 1\n 2\n 3\n11\n12\n13\n6 rows\n"));
    }
    assert!(run(&[]).ends_with("13\n6 rows\n"));
    // `--out -` is standard output, in CSV unless --format says otherwise.
    assert_eq!(run(&["--out", "-"]), run(&["--format", "csv"]));
    assert_eq!(run(&["--out", "-", "--format", "json"]), json);
    // Files in each format.
    let out = dir.join("out");
    for (format, first) in [
        ("csv", "x\n1\n"),
        ("tsv", "x\n1\n"),
        ("json", "{\n  \"name\": \"n\",\n  \"columns\": [{\"name\": \"x\", \"type\": \"int32\"}],\n  \"rows\": [\n    [1],\n"),
    ] {
        assert_eq!(run(&["--out", out.to_str().unwrap(), "--format", format]), "");
        let t = std::fs::read_to_string(out.join(format!("n.{format}"))).unwrap();
        assert!(t.starts_with(first), "{format}: {t}");
        assert!(out.join(format!("t.{format}")).is_file());
    }
    // One output alone on standard output has no name line.
    let one = dir.join("one.logic");
    std::fs::write(&one, "n(x) -> int32(x).\nn(7).\n.output n.\n").unwrap();
    let o = foxrun(&[one.to_str().unwrap(), "--backend", "cpu", "--format", "csv"]);
    assert_eq!(text(&o.stdout), "x\n7\n");
    // The table format is for standard output only; a bad --max-rows is refused.
    let o = foxrun(&[q, "--out", out.to_str().unwrap(), "--format", "table"]);
    assert_eq!(o.status.code(), Some(2));
    let o = foxrun(&[q, "--max-rows", "many"]);
    assert_eq!(o.status.code(), Some(2));
    let o = foxrun(&[q, "--format", "parquet"]);
    assert_eq!(o.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs `bin args` with files limited to `limit` bytes: a write beyond fails with EFBIG
/// part-way through a file, as on a full filesystem (SIGXFSZ ignored, as it is inherited).
fn with_file_limit(bin: &str, args: &[&str], limit: u64) -> Output {
    let mut c = cmd(bin, args);
    // SAFETY: between fork and exec only async-signal-safe calls are made.
    unsafe {
        c.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    c.output().unwrap()
}

#[test]
fn a_write_that_fails_part_way_leaves_no_file() {
    let dir = temp_dir("file-limit");
    let gen = dir.join("gen");
    std::fs::create_dir(&gen).unwrap();
    // SF 0.01: the small tables fit under 256 KiB, `lineitem.tbl` (about 7 MB) does not.
    let bin = env!("CARGO_BIN_EXE_foxbench");
    let o = with_file_limit(
        bin,
        &["tpch-gen", "--sf", "0.01", "--out", gen.to_str().unwrap()],
        256 << 10,
    );
    let e = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("File too large"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    assert_eq!(names(&gen), Vec::<String>::new(), "{e}");
    // The same for a result of `foxrun --out`.
    let out = dir.join("out");
    std::fs::create_dir(&out).unwrap();
    let o = with_file_limit(
        env!("CARGO_BIN_EXE_foxrun"),
        &[
            "queries/transitive_closure.logic",
            "--graph",
            "gnm:300:1000:1",
            "--backend",
            "cpu",
            "--no-progress",
            "--out",
            out.to_str().unwrap(),
        ],
        64 << 10,
    );
    let e = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("File too large"), "{e}");
    assert_eq!(names(&out), Vec::<String>::new(), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
