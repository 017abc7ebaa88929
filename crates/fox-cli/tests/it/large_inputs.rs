//! Input files too large for memory or time: running out of memory while one is read or
//! parsed is an error naming the file or its column (exit status 1, never an abort), and
//! Ctrl-C stops the parse of a large file at once (exit status 130).

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The address space the runs may use beyond the executable's own segments: about
/// twice what `foxrun` takes to load a small file.
const LIMIT: libc::rlim_t = 16 << 20;

/// The bytes of address space `foxrun`'s executable maps (the memory sizes of its ELF
/// `PT_LOAD` segments, each rounded up to pages): the limits below are this much plus
/// what the run may use, so that they mean the same however large the binary grows (a
/// debug build maps about 60 MB of code).
fn executable_bytes() -> libc::rlim_t {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(env!("CARGO_BIN_EXE_foxrun")).unwrap();
    let mut head = [0u8; 64];
    f.read_exact(&mut head).unwrap();
    assert_eq!(&head[..5], b"\x7fELF\x02", "a 64-bit ELF executable");
    let u16_at = |b: &[u8], at: usize| u16::from_le_bytes([b[at], b[at + 1]]) as usize;
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let (phoff, phentsize, phnum) = (u64_at(&head, 0x20), u16_at(&head, 0x36), u16_at(&head, 0x38));
    let mut table = vec![0u8; phentsize * phnum];
    f.seek(SeekFrom::Start(phoff)).unwrap();
    f.read_exact(&mut table).unwrap();
    table
        .chunks(phentsize)
        .filter(|h| u32::from_le_bytes([h[0], h[1], h[2], h[3]]) == 1)
        .map(|h| u64_at(h, 0x28).div_ceil(4096) * 4096)
        .sum::<u64>() as libc::rlim_t
}

fn temp_dir(tag: &str) -> PathBuf {
    crate::common::temp_dir("fox-large", tag)
}

/// A program reading `file` of `dir` as `r(x)` with `x` of type `ty`, and its count.
fn count_program(dir: &Path, file: &str, ty: &str) -> PathBuf {
    let p = dir.join("count.logic");
    std::fs::write(
        &p,
        format!("r(x) -> {ty}(x).\n.input r from \"{file}\".\nn(c) <- agg<<c = count()>> r(_).\n.output n.\n"),
    )
    .unwrap();
    p
}

/// Runs `foxrun PROGRAM --data DIR --backend cpu` with its address space limited to
/// [`LIMIT`].
fn foxrun_limited(program: &Path, dir: &Path) -> Output {
    let args = [program.as_os_str(), "--data".as_ref(), dir.as_os_str()];
    foxrun_within(LIMIT, &args)
}

/// Runs `foxrun ARGS --backend cpu` in the repository's root with its address space
/// limited to `limit` beyond its executable's segments (two worker threads and two malloc
/// arenas, so that the limit means the same on any machine).
fn foxrun_within(limit: libc::rlim_t, args: &[&std::ffi::OsStr]) -> Output {
    foxrun_within_threads(limit, args, 2)
}

/// [`foxrun_within`] with `threads` worker threads.
fn foxrun_within_threads(limit: libc::rlim_t, args: &[&std::ffi::OsStr], threads: usize) -> Output {
    let limit = executable_bytes() + limit;
    let mut c = Command::new(env!("CARGO_BIN_EXE_foxrun"));
    c.args(args)
        .args(["--backend", "cpu"])
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .env("RAYON_NUM_THREADS", threads.to_string())
        .env("MALLOC_ARENA_MAX", "2");
    // SAFETY: `setrlimit` is async-signal-safe, as `pre_exec` requires.
    unsafe {
        c.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c.output().unwrap()
}

/// Checks a clean out-of-memory failure: status 1 (no signal) and the message
/// `foxrun: error: out of memory: cannot allocate N for WHAT` with `what`.
fn expect_out_of_memory(o: &Output, what: &str) {
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.signal(), None, "died of a signal: {e}");
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.starts_with("foxrun: error: out of memory: cannot allocate "), "{e}");
    assert!(e.trim_end().ends_with(&format!(" for {what}")), "{e}");
    assert_eq!(o.stdout, b"", "nothing is written");
}

#[test]
fn a_file_larger_than_memory() {
    let dir = temp_dir("file");
    // 300 MB that take no room on the disk (the file is sparse).
    std::fs::File::create(dir.join("r.csv"))
        .unwrap()
        .set_len(300 << 20)
        .unwrap();
    let o = foxrun_limited(&count_program(&dir, "r.csv", "int64"), &dir);
    expect_out_of_memory(&o, &format!("the file `{}`", dir.join("r.csv").display()));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_gzip_file_whose_text_is_larger_than_memory() {
    use std::io::Write;
    let dir = temp_dir("gzip");
    // 200 gzip members of 1 MB of text each: 200 MB of text in a file of a few hundred KB.
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(&b"1\n".repeat(1 << 19)).unwrap();
    let member = e.finish().unwrap();
    std::fs::write(dir.join("r.csv.gz"), member.repeat(200)).unwrap();
    let o = foxrun_limited(&count_program(&dir, "r.csv.gz", "int64"), &dir);
    expect_out_of_memory(
        &o,
        &format!("the decompressed text of `{}`", dir.join("r.csv.gz").display()),
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_column_larger_than_memory() {
    let dir = temp_dir("column");
    // 9 MB of text whose column takes 36 MB: with its doubling, more than the limit leaves
    // next to the file (a limit well above what reading the file needs, so that the
    // column is what fails). One worker thread: pieces parsed at once could leave the
    // last bytes of the limit to a small allocation of another piece, which fails as an
    // allocation, not as the column.
    std::fs::write(dir.join("r.csv"), "1\n".repeat(4_500_000)).unwrap();
    let program = count_program(&dir, "r.csv", "int64");
    let args = [program.as_os_str(), "--data".as_ref(), dir.as_os_str()];
    let o = foxrun_within_threads(34 << 20, &args, 1);
    expect_out_of_memory(&o, &format!("the column `x` of `{}`", dir.join("r.csv").display()));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tpch_data_without_memory_for_the_generators_text() {
    // The generators' text pool alone is 300 MiB.
    let args = ["tpch/queries/q06.logic", "--tpch", "1"].map(std::ffi::OsStr::new);
    let o = foxrun_within(192 << 20, &args);
    expect_out_of_memory(&o, "the text pool of the TPC-H generator");
}

/// The resident memory of process `pid` in bytes (0 once it has ended).
fn resident_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[test]
fn ctrl_c_stops_the_parse_of_a_large_file() {
    let dir = temp_dir("interrupt");
    // 16 million rows: tens of seconds of parsing in a debug build.
    let size = 32_000_000;
    std::fs::write(dir.join("r.csv"), "1\n".repeat(size / 2)).unwrap();
    let program = count_program(&dir, "r.csv", "int64");
    let mut child = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .arg(&program)
        .arg("--data")
        .arg(&dir)
        .args(["--backend", "cpu"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The file is in memory: the parse is under way (or the run failed early).
    let waiting = Instant::now();
    while resident_bytes(child.id()) < size as u64 && child.try_wait().unwrap().is_none() {
        assert!(waiting.elapsed() < Duration::from_secs(60), "the file is never read");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    let sent = Instant::now();
    // SAFETY: sends SIGINT to the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) }, 0);
    let o = child.wait_with_output().unwrap();
    let stopped = sent.elapsed();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{e}");
    assert!(e.ends_with("foxrun: interrupted\n"), "{e}");
    assert_eq!(o.stdout, b"", "nothing is written");
    assert!(stopped < Duration::from_secs(5), "stopped {stopped:?} after Ctrl-C");
    std::fs::remove_dir_all(&dir).unwrap();
}
