//! Standard output of the binaries, with every write checked.
//!
//! Rust's runtime opens `/dev/null` on a descriptor 1 that is closed when the process
//! starts (so that no file the program opens takes its number), which makes
//! `foxc compile q.logic >&-` succeed having written nothing; and `print!` panics on
//! write errors (`> /dev/full`). The binaries write their results through [`Stdout`]
//! instead, which reports every error, and declare [`check_stdout_at_start!`], which
//! notes before the runtime starts whether descriptor 1 was open: when it was not,
//! every write to [`Stdout`] is an error saying standard output is closed.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Notes whether descriptor 1 is closed. Runs before Rust's runtime starts, from the
/// constructor that [`check_stdout_at_start!`] declares.
pub extern "C" fn check_at_start() {
    #[cfg(unix)]
    // SAFETY: `fcntl(F_GETFD)` only reads the descriptor's flags.
    unsafe {
        if libc::fcntl(1, libc::F_GETFD) == -1 && io::Error::last_os_error().raw_os_error() == Some(libc::EBADF) {
            CLOSED.store(true, Ordering::SeqCst);
        }
    }
}

/// Declares, in a binary, the constructor that runs [`check_at_start`] before `main` and
/// before Rust's runtime fills a closed descriptor 1 with `/dev/null`.
#[macro_export]
macro_rules! check_stdout_at_start {
    () => {
        #[used]
        #[cfg_attr(target_os = "linux", link_section = ".init_array")]
        static CHECK_STDOUT_AT_START: extern "C" fn() = $crate::stdout::check_at_start;
    };
}

/// Descriptor 1, unbuffered, reporting every error (wrap it in a `BufWriter` for many
/// small writes).
#[derive(Debug, Default, Clone, Copy)]
pub struct Stdout;

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if CLOSED.load(Ordering::Relaxed) {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "it is closed"));
        }
        #[cfg(unix)]
        loop {
            // SAFETY: writes `buf.len()` bytes from a live slice to descriptor 1.
            let n = unsafe { libc::write(1, buf.as_ptr().cast(), buf.len()) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        #[cfg(not(unix))]
        io::stdout().write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Whether a write error is a reader that went away (`foxrun … | head`): the output is
/// no longer wanted, which is not an error worth reporting. A descriptor closed at start
/// is not that.
pub fn is_closed_pipe(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::BrokenPipe && !CLOSED.load(Ordering::Relaxed)
}

/// Runs `f` with a buffered standard output and flushes it: `Ok` when everything was
/// written or the reader went away ([`is_closed_pipe`]), otherwise an error saying that
/// standard output could not be written.
pub fn with_stdout(f: impl FnOnce(&mut io::BufWriter<Stdout>) -> io::Result<()>) -> anyhow::Result<()> {
    let mut w = io::BufWriter::with_capacity(1 << 16, Stdout);
    match f(&mut w).and_then(|()| w.flush()) {
        Err(e) if is_closed_pipe(&e) => {
            // Drop what is still buffered instead of retrying it.
            let _ = w.into_parts();
            Ok(())
        }
        Err(e) => {
            let _ = w.into_parts();
            Err(anyhow::anyhow!("cannot write to standard output: {e}"))
        }
        Ok(()) => Ok(()),
    }
}

/// Writes `text` to standard output (see [`with_stdout`]).
pub fn print(text: &str) -> anyhow::Result<()> {
    with_stdout(|w| w.write_all(text.as_bytes()))
}
