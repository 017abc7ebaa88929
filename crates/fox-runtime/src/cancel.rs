//! Stopping a run from outside: a flag that a signal handler or another thread sets, and
//! that the run reads between pieces of its work.
//!
//! The contract (see `docs/architecture.md`): the interpreter reads the flag before every
//! instruction and after every launch; host loops that can run long (the CPU backend's
//! kernels whose work is not bounded by their inputs' size, the generators of graphs and
//! TPC-H tables, the reading and parsing of input files) read it once per chunk of rows
//! or block of bytes. A run that sees it set stops with
//! [`RuntimeError::Cancelled`](crate::RuntimeError::Cancelled), frees every buffer it
//! allocated, and returns no output; a kernel that sees it may stop early and return an
//! error, because whatever a launch returns once the flag is set is discarded.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A request to stop runs, shared by the runs and whoever may stop them. Clones share one
/// flag. Setting it is one atomic store, so a signal handler may call [`CancelToken::cancel`].
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A token not yet cancelled.
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// Asks every run that reads this token to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Clears the request (before the next run).
    pub fn reset(&self) {
        self.0.store(false, Ordering::SeqCst);
    }

    /// The flag itself, for loops that read it often.
    pub fn flag(&self) -> &AtomicBool {
        &self.0
    }
}

/// A flag that is never set: what runs without a token read.
pub fn never() -> &'static AtomicBool {
    static NEVER: AtomicBool = AtomicBool::new(false);
    &NEVER
}

/// True when `flag` is set (a relaxed read: callers read it once per chunk of work).
#[inline]
pub fn is_set(flag: &AtomicBool) -> bool {
    flag.load(Ordering::Relaxed)
}
