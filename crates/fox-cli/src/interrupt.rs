//! Ctrl-C (SIGINT) as a request to stop the run under way: the handler sets a
//! [`CancelToken`], which the run reads between instructions and chunks of work (see
//! `fox_runtime::cancel`), and counts the interrupts.

use fox_runtime::CancelToken;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The token the handler sets; set once, before the handler is installed.
static TOKEN: OnceLock<CancelToken> = OnceLock::new();
/// The interrupts received so far.
static COUNT: AtomicUsize = AtomicUsize::new(0);
/// With a value n > 0: the n-th interrupt ends the process at once with status 130.
static EXIT_AT: AtomicUsize = AtomicUsize::new(0);

/// The process's status after an interrupt (128 + SIGINT), as shells report it.
pub const STATUS: u8 = 130;

extern "C" fn on_sigint(_: libc::c_int) {
    // Only atomic operations, unlinking files and `_exit`: all are async-signal-safe.
    let n = COUNT.fetch_add(1, Ordering::SeqCst) + 1;
    let exit_at = EXIT_AT.load(Ordering::SeqCst);
    if exit_at > 0 && n >= exit_at {
        // Temporary output files go with the process (async-signal-safe, as `_exit`).
        fox_runtime::tempfiles::remove_all();
        unsafe { libc::_exit(STATUS as libc::c_int) };
    }
    if let Some(t) = TOKEN.get() {
        t.cancel();
    }
}

/// Makes SIGINT set `token` instead of ending the process; with `exit_at` = n, the n-th
/// interrupt still ends it at once (status 130), for a run that does not stop soon
/// enough. The first call decides the token; later calls only change `exit_at`. False
/// when the handler could not be installed (SIGINT then ends the process as before).
pub fn install(token: &CancelToken, exit_at: Option<usize>) -> bool {
    EXIT_AT.store(exit_at.unwrap_or(0), Ordering::SeqCst);
    if TOKEN.set(token.clone()).is_err() {
        return true;
    }
    // SAFETY: a zeroed sigaction is a valid value to fill in; the handler only touches
    // atomics and calls `_exit`.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut()) == 0
    }
}

/// The interrupts received since the handler was installed.
pub fn count() -> usize {
    COUNT.load(Ordering::SeqCst)
}
