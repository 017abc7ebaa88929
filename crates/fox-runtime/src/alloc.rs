//! The allocator's settings while large data is loaded.
//!
//! Tables are generated and read in parts of a few megabytes that are freed once they are
//! copied into whole columns. glibc's malloc raises its mmap threshold as such pieces are
//! freed and then serves the next ones from its heap, where freed memory between live
//! blocks stays resident: about a third of the peak at TPC-H scale. While a [`LoadPhase`]
//! is alive every allocation of 1 MiB or more gets its own mapping, returned to the system
//! when freed. Queries allocate and free large temporaries in a loop, and fresh mappings
//! would fault every page in again each time, so when the load ends the threshold goes
//! to 32 MiB (where glibc's own adjustment ends up), and free heap pages are returned.

use std::sync::atomic::{AtomicUsize, Ordering};

static LOADING: AtomicUsize = AtomicUsize::new(0);

/// Loading settings until dropped; nested phases restore the query settings when the
/// outermost ends.
pub(crate) struct LoadPhase(());

impl LoadPhase {
    pub(crate) fn enter() -> LoadPhase {
        if LOADING.fetch_add(1, Ordering::SeqCst) == 0 {
            set_mmap_threshold(1 << 20, 2 << 20);
        }
        LoadPhase(())
    }
}

impl Drop for LoadPhase {
    fn drop(&mut self) {
        if LOADING.fetch_sub(1, Ordering::SeqCst) == 1 {
            set_mmap_threshold(32 << 20, 64 << 20);
            trim();
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_mmap_threshold(mmap: i32, trim: i32) {
    // SAFETY: `mallopt` sets malloc parameters (word-sized values read by later calls);
    // it has no memory-safety preconditions.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, mmap);
        libc::mallopt(libc::M_TRIM_THRESHOLD, trim);
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: `malloc_trim` only returns free memory of malloc's arenas to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_mmap_threshold(_: i32, _: i32) {}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

/// A field of /proc/meminfo (`MemTotal`, `MemAvailable`, …) in bytes, where the system
/// says.
pub fn meminfo(field: &str) -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info
        .lines()
        .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok()?.checked_mul(1024)
}

/// The host memory a load leaves free: `FOX_HOST_RESERVE` bytes when set, else 1/32 of
/// the machine's memory and at least 1 GiB (nothing where the system does not say).
pub(crate) fn load_reserve() -> Result<u64, String> {
    match std::env::var("FOX_HOST_RESERVE") {
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .map_err(|_| format!("FOX_HOST_RESERVE=`{v}` is not a number of bytes")),
        Err(_) => Ok(meminfo("MemTotal").map_or(0, |total| (total / 32).max(1 << 30))),
    }
}

/// An error when the host's available memory has fallen under `keep` bytes, so that a
/// load too large for the machine stops with a message instead of being killed by the
/// system; `Ok` where the system does not say.
pub(crate) fn check_headroom(keep: u64) -> Result<(), String> {
    let Some(available) = meminfo("MemAvailable") else {
        return Ok(());
    };
    if available >= keep {
        return Ok(());
    }
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    Err(format!(
        "the machine is out of memory ({:.1} GiB of {:.1} GiB left, under the {:.1} GiB kept free)",
        gib(available),
        gib(meminfo("MemTotal").unwrap_or(0)),
        gib(keep)
    ))
}
