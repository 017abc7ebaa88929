//! Memory: fallible allocation of data-sized buffers, and the allocator's settings while
//! large data is loaded.
//!
//! Every allocation whose size comes from the data or the user (columns, strings,
//! dictionaries, generated tables) goes through [`try_reserve`] and the functions built
//! on it, which return the message [`out_of_memory`] naming what was being built instead
//! of aborting the process; their callers report it as an error. While such an
//! allocation runs, [`failure_is_handled`] is true on its thread, so that a global
//! allocator can end the process cleanly on any other failure (see `fox_cli::oom`).
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

thread_local! {
    /// Whether this thread is inside a fallible allocation ([`try_reserve`]), whose
    /// failure its caller reports.
    static FALLIBLE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether an allocation failing now on this thread is one its caller handles (one made
/// by [`try_reserve`] and the functions built on it). A global allocator that ends the
/// process on other failures (as the binaries' does, instead of aborting) asks this.
pub fn failure_is_handled() -> bool {
    FALLIBLE.with(|f| f.get())
}

/// The message of an allocation that failed: `out of memory: cannot allocate 1.5 GiB
/// for WHAT`.
pub fn out_of_memory(bytes: u128, what: &str) -> String {
    format!("out of memory: cannot allocate {} for {what}", bytes_text(bytes))
}

/// A size in bytes for messages: `512 bytes`, `1.5 KiB` … `2.0 TiB`.
pub fn bytes_text(bytes: u128) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut x = bytes as f64 / 1024.0;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < UNITS.len() {
        x /= 1024.0;
        u += 1;
    }
    format!("{x:.1} {}", UNITS[u])
}

/// Runs `f`, a fallible allocation (`try_reserve` of a `Vec`, `String` or `HashMap`) whose
/// failure the caller reports, with [`failure_is_handled`] true on this thread.
pub fn fallible<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            FALLIBLE.with(|f| f.set(self.0));
        }
    }
    let _restore = Restore(FALLIBLE.with(|f| f.replace(true)));
    f()
}

/// Reserves room for `additional` more elements in `v` (growing it as `Vec::reserve`
/// does, so that repeated calls take amortised linear time), or the out-of-memory message
/// naming `what` instead of aborting the process.
pub fn try_reserve<T>(v: &mut Vec<T>, additional: usize, what: &str) -> Result<(), String> {
    fallible(|| v.try_reserve(additional)).map_err(|_| {
        let bytes = (v.len() as u128 + additional as u128) * std::mem::size_of::<T>() as u128;
        out_of_memory(bytes, what)
    })
}

/// An empty vector with room for exactly `n` elements, or the out-of-memory message
/// naming `what`.
pub fn try_with_capacity<T>(n: usize, what: &str) -> Result<Vec<T>, String> {
    let mut v = Vec::new();
    fallible(|| v.try_reserve_exact(n))
        .map_err(|_| out_of_memory(n as u128 * std::mem::size_of::<T>() as u128, what))?;
    Ok(v)
}

/// `n` copies of `x`, or the out-of-memory message naming `what`.
pub fn try_filled<T: Clone>(n: usize, x: T, what: &str) -> Result<Vec<T>, String> {
    let mut v = try_with_capacity(n, what)?;
    v.resize(n, x);
    Ok(v)
}

/// The items of an iterator of known length, or the out-of-memory message naming `what`.
pub fn try_collect<T>(it: impl ExactSizeIterator<Item = T>, what: &str) -> Result<Vec<T>, String> {
    let mut v = try_with_capacity(it.len(), what)?;
    v.extend(it);
    Ok(v)
}

/// The items of an indexed parallel iterator, in order, or the out-of-memory message
/// naming `what`.
pub fn try_par_collect<T: Send>(
    it: impl rayon::iter::IndexedParallelIterator<Item = T>,
    what: &str,
) -> Result<Vec<T>, String> {
    use rayon::iter::ParallelExtend;
    let mut v = try_with_capacity(it.len(), what)?;
    // `par_extend` of an indexed iterator reserves its length, which is there already.
    v.par_extend(it);
    Ok(v)
}

/// A copy of the string `s`, or the out-of-memory message naming `what`.
pub fn try_string(s: &str, what: &str) -> Result<String, String> {
    let mut t = String::new();
    fallible(|| t.try_reserve_exact(s.len())).map_err(|_| out_of_memory(s.len() as u128, what))?;
    t.push_str(s);
    Ok(t)
}

/// A copy of `s`, or the out-of-memory message naming `what`.
pub fn try_to_vec<T: Clone>(s: &[T], what: &str) -> Result<Vec<T>, String> {
    let mut v = try_with_capacity(s.len(), what)?;
    v.extend_from_slice(s);
    Ok(v)
}
