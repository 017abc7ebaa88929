//! Temporary files that must not outlive the process.
//!
//! Output files are written under a temporary name and renamed into place once complete
//! (see [`crate::outfile`]). Each temporary is registered here while it exists; when a
//! binary has called [`remove_on_signals`], SIGINT, SIGTERM or SIGHUP removes every
//! registered temporary and ends the process with status 128 + the signal's number (130
//! for Ctrl-C). [`remove_all`] does the same removal for a caller with its own handling of
//! signals (it is async-signal-safe).
//!
//! The registry is a fixed table of atomic pointers to C strings, so that the signal
//! handler needs no lock and no allocation: registration and the handler both take a
//! path out of its slot with an atomic swap, so each path is removed or freed exactly
//! once. A process with more than [`SLOTS`] temporaries at once leaves the further ones
//! unregistered (they are still removed on errors, not on signals).

use std::ffi::{c_char, CString};
use std::path::Path;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};

/// Temporaries registered at once at most.
pub const SLOTS: usize = 512;

static REGISTRY: [AtomicPtr<c_char>; SLOTS] = [const { AtomicPtr::new(null_mut()) }; SLOTS];

/// A registered temporary path; dropping it unregisters the path (it does not remove the
/// file: its owner removes or renames it first).
#[derive(Debug)]
pub struct Registered {
    slot: Option<usize>,
}

/// Registers `path` for removal by [`remove_all`] (and so by the handler of
/// [`remove_on_signals`]) until the returned guard is dropped.
pub fn register(path: &Path) -> Registered {
    #[cfg(unix)]
    let bytes = {
        use std::os::unix::ffi::OsStrExt;
        path.as_os_str().as_bytes().to_vec()
    };
    #[cfg(not(unix))]
    let bytes = path.to_string_lossy().into_owned().into_bytes();
    let Ok(c) = CString::new(bytes) else {
        return Registered { slot: None };
    };
    let p = c.into_raw();
    for (i, s) in REGISTRY.iter().enumerate() {
        if s.compare_exchange(null_mut(), p, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return Registered { slot: Some(i) };
        }
    }
    // SAFETY: `p` came from `CString::into_raw` above and was stored nowhere.
    drop(unsafe { CString::from_raw(p) });
    Registered { slot: None }
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            let p = REGISTRY[i].swap(null_mut(), Ordering::SeqCst);
            if !p.is_null() {
                // SAFETY: every non-null pointer in the registry came from
                // `CString::into_raw`, and the swap took it out, so no one else holds it.
                drop(unsafe { CString::from_raw(p) });
            }
        }
    }
}

/// Removes every registered temporary file. Async-signal-safe: atomics and `unlink` only.
/// The paths taken out are not freed (the process is about to end).
pub fn remove_all() {
    for s in &REGISTRY {
        let p = s.swap(null_mut(), Ordering::SeqCst);
        if !p.is_null() {
            #[cfg(unix)]
            // SAFETY: `p` is a NUL-terminated string from `CString::into_raw` that the
            // swap took out of the registry; it is never freed after this point.
            unsafe {
                libc::unlink(p);
            }
        }
    }
}

/// Installs handlers of SIGINT, SIGTERM and SIGHUP that remove the registered temporaries
/// and end the process with status 128 + the signal (130 for SIGINT). A signal that was
/// ignored when the process started (`nohup`, a background job) stays ignored. For
/// binaries whose only response to these signals is to stop; idempotent.
pub fn remove_on_signals() {
    #[cfg(unix)]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                // SAFETY: `sigaction` with valid pointers to zero-initialised (valid)
                // `sigaction` structs; the handler only calls async-signal-safe functions.
                unsafe {
                    let mut old: libc::sigaction = std::mem::zeroed();
                    if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 || old.sa_sigaction == libc::SIG_IGN {
                        continue;
                    }
                    let mut act: libc::sigaction = std::mem::zeroed();
                    act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                    libc::sigemptyset(&mut act.sa_mask);
                    libc::sigaction(sig, &act, std::ptr::null_mut());
                }
            }
        });
    }
}

#[cfg(unix)]
extern "C" fn on_signal(sig: libc::c_int) {
    remove_all();
    // SAFETY: `_exit` is async-signal-safe and ends the process at once.
    unsafe { libc::_exit(128 + sig) }
}
