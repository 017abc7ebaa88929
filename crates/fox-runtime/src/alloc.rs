//! Memory: fallible allocation of data-sized buffers, and the allocator's settings while
//! large data is loaded.
//!
//! Every allocation whose size comes from the data or the user (columns, strings,
//! dictionaries, generated tables, the outputs and intermediates of kernels) goes through
//! [`try_reserve`] and the functions built on it, which return the message
//! [`out_of_memory`] naming what was being built instead of aborting the process; their
//! callers report it as an error. While such an allocation runs, [`failure_is_handled`]
//! is true on its thread, so that a global allocator can end the process cleanly on any
//! other failure (see `fox_cli::oom`).
//!
//! Before a request is made it is admitted ([`admit`]): it must fit the budget of the
//! launch running on this thread under a memory limit ([`with_budget`]), and a request of
//! [`CHECKED_BYTES`] or more must fit the memory the machine has available less the
//! reserve a load keeps ([`load_reserve`]). Linux grants far more address space than it
//! has memory and kills the process when the pages are touched; the check turns that into
//! an error naming what was being built.
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
    meminfo_in(&std::fs::read_to_string("/proc/meminfo").ok()?, field)
}

/// The most host memory this process has held resident so far (`VmHWM` of
/// /proc/self/status), in bytes, where the system says.
pub fn peak_resident() -> Option<u64> {
    meminfo_in(&std::fs::read_to_string("/proc/self/status").ok()?, "VmHWM")
}

/// The words ` (host memory peak N)` for a message, empty where the system does not say.
pub fn peak_resident_words() -> String {
    peak_resident().map_or(String::new(), |b| {
        format!(" (host memory peak {})", crate::human_bytes(b))
    })
}

/// A field of the text of /proc/meminfo in bytes.
fn meminfo_in(info: &str, field: &str) -> Option<u64> {
    let line = info
        .lines()
        .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok()?.checked_mul(1024)
}

/// The host memory a load leaves free: `FOX_HOST_RESERVE` bytes when set, else 1/32 of
/// the machine's memory and at least 1 GiB (nothing where the system does not say).
pub(crate) fn load_reserve() -> Result<u64, String> {
    reserve_of(meminfo("MemTotal"))
}

/// [`load_reserve`] on a machine of `total` bytes.
fn reserve_of(total: Option<u64>) -> Result<u64, String> {
    match std::env::var("FOX_HOST_RESERVE") {
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .map_err(|_| format!("FOX_HOST_RESERVE=`{v}` is not a number of bytes")),
        Err(_) => Ok(total.map_or(0, |total| (total / 32).max(1 << 30))),
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
    /// The bytes fallible allocations on this thread may still take, while a launch runs
    /// under a memory limit ([`with_budget`]).
    static BUDGET: std::cell::Cell<Option<u128>> = const { std::cell::Cell::new(None) };
}

/// Requests of at least this many bytes are checked against the memory the machine has
/// available before they are made (smaller ones cost less than reading the figure).
pub const CHECKED_BYTES: u128 = 64 << 20;

/// Runs `f` with the fallible allocations made on this thread limited to `bytes` in all
/// (none when `None`): each one admitted is taken from the budget and none is given back
/// while `f` runs, so the budget bounds everything `f` allocates, temporaries included.
/// A backend runs each launch so, with what the run's memory limit leaves. Allocations
/// made on other threads (a parallel kernel's workers) are not counted.
pub fn with_budget<R>(bytes: Option<u64>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<u128>);
    impl Drop for Restore {
        fn drop(&mut self) {
            BUDGET.with(|b| b.set(self.0));
        }
    }
    let _restore = Restore(BUDGET.with(|b| b.replace(bytes.map(u128::from))));
    f()
}

/// The memory the machine has for new allocations: `MemAvailable` and `SwapFree` of
/// /proc/meminfo less the reserve a load keeps ([`load_reserve`]); `None` where the
/// system does not say. Requests of [`CHECKED_BYTES`] or more beyond it are refused.
pub fn machine_available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let available = meminfo_in(&info, "MemAvailable")?;
    let swap = meminfo_in(&info, "SwapFree").unwrap_or(0);
    let reserve = reserve_of(meminfo_in(&info, "MemTotal")).unwrap_or(0);
    Some(available.saturating_add(swap).saturating_sub(reserve))
}

/// The memory the machine has for a request of `bytes` ([`machine_available`]), or `None`
/// when it is not checked: under [`CHECKED_BYTES`], or where the system does not say.
pub fn available_for(bytes: u128) -> Option<u64> {
    if bytes < CHECKED_BYTES {
        return None;
    }
    machine_available()
}

/// Why a request of `bytes` is refused before it is made, given the budget of the launch
/// (`budget`) and what the machine has available (`machine`, asked only for requests of
/// [`CHECKED_BYTES`] or more); `None` when it may be made.
fn refusal(bytes: u128, budget: Option<u128>, machine: impl FnOnce() -> Option<u64>) -> Option<String> {
    if let Some(left) = budget {
        if bytes > left {
            return Some(limit_refusal(left));
        }
    }
    if bytes >= CHECKED_BYTES {
        if let Some(free) = machine() {
            if bytes > u128::from(free) {
                return Some(format!(
                    "the machine has {} available (less the reserve kept free)",
                    bytes_text(u128::from(free))
                ));
            }
        }
    }
    None
}

/// Why a request is refused under the run's memory limit when `left` bytes are left to
/// it: the reason every backend gives.
pub fn limit_refusal(left: u128) -> String {
    format!(
        "the memory limit (--memory-limit) leaves {} to this operation",
        bytes_text(left)
    )
}

/// Admits a request of `bytes` before it is made: an error saying why when it exceeds
/// the budget of this thread's launch ([`with_budget`]) or, for [`CHECKED_BYTES`] or more,
/// the memory the machine has available less the reserve kept free. An admitted request
/// is taken from the budget.
pub fn admit(bytes: u128) -> Result<(), String> {
    let budget = BUDGET.with(|b| b.get());
    if let Some(why) = refusal(bytes, budget, machine_available) {
        return Err(why);
    }
    if let Some(left) = budget {
        BUDGET.with(|b| b.set(Some(left - bytes)));
    }
    Ok(())
}

/// Gives `bytes` admitted by [`admit`] back to this thread's budget (an allocation that
/// then failed).
fn refund(bytes: u128) {
    BUDGET.with(|b| b.set(b.get().map(|left| left + bytes)));
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

/// The message of an allocation of `rows` elements of `size` bytes that was refused or
/// failed, and why when something other than the allocator said no: `out of memory:
/// cannot allocate 1.5 GiB (400000000 rows of 4 bytes) for WHAT[: WHY]` (without the
/// rows for bytes: `size` 1). Every backend builds its out-of-memory errors with it.
pub fn rows_out_of_memory(rows: u128, size: usize, what: &str, why: Option<&str>) -> String {
    let base = if size == 1 {
        out_of_memory(rows, what)
    } else {
        format!(
            "out of memory: cannot allocate {} ({rows} rows of {size} bytes) for {what}",
            bytes_text(rows * size as u128)
        )
    };
    match why {
        Some(why) => format!("{base}: {why}"),
        None => base,
    }
}

/// Admits ([`admit`]), then makes the request `f` for `rows` elements of `size` bytes
/// (a `try_reserve` of a `Vec`, `String` or `HashMap`) with [`failure_is_handled`] true:
/// the error ([`rows_out_of_memory`]) names `what` and says why it was refused or failed.
pub fn request<E>(rows: u128, size: usize, what: &str, f: impl FnOnce() -> Result<(), E>) -> Result<(), String> {
    request_growth(rows, rows * size as u128, size, what, f)
}

/// [`request`] for `f` growing a buffer by `growth` bytes to `need` elements of `size`
/// bytes: `growth` is admitted, and the error gives the whole buffer.
fn request_growth<E>(
    need: u128,
    growth: u128,
    size: usize,
    what: &str,
    f: impl FnOnce() -> Result<(), E>,
) -> Result<(), String> {
    admit(growth).map_err(|why| rows_out_of_memory(need, size, what, Some(&why)))?;
    fallible(f).map_err(|_| {
        refund(growth);
        rows_out_of_memory(need, size, what, None)
    })
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
    let size = std::mem::size_of::<T>();
    let need = v.len() as u128 + additional as u128;
    let cap = v.capacity() as u128;
    if need <= cap {
        return Ok(());
    }
    // `Vec::try_reserve` grows to the larger of what is needed and twice the capacity.
    let growth = (need.max(2 * cap) - cap) * size as u128;
    request_growth(need, growth, size, what, || v.try_reserve(additional))
}

/// Reserves room for exactly `additional` more elements in `v` (no more than that), or
/// the out-of-memory message naming `what`.
pub fn try_reserve_exact<T>(v: &mut Vec<T>, additional: usize, what: &str) -> Result<(), String> {
    let size = std::mem::size_of::<T>();
    let need = v.len() as u128 + additional as u128;
    let cap = v.capacity() as u128;
    if need <= cap {
        return Ok(());
    }
    request_growth(need, (need - cap) * size as u128, size, what, || {
        v.try_reserve_exact(additional)
    })
}

/// An empty vector with room for exactly `n` elements, or the out-of-memory message
/// naming `what`.
pub fn try_with_capacity<T>(n: usize, what: &str) -> Result<Vec<T>, String> {
    let mut v = Vec::new();
    request(n as u128, std::mem::size_of::<T>(), what, || v.try_reserve_exact(n))?;
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
    request(s.len() as u128, 1, what, || t.try_reserve_exact(s.len()))?;
    t.push_str(s);
    Ok(t)
}

/// Appends `s` to `out`, growing it as `String::push_str` does (to at least twice its
/// capacity, so that repeated calls take amortised linear time), or the out-of-memory
/// message naming `what` (with the whole string's size).
pub fn try_push_str(out: &mut String, s: &str, what: &str) -> Result<(), String> {
    if out.capacity() - out.len() < s.len() {
        let need = out.len() + s.len();
        let target = need.max(2 * out.capacity());
        let growth = (target - out.capacity()) as u128;
        request_growth(need as u128, growth, 1, what, || out.try_reserve(target - out.len()))?;
    }
    out.push_str(s);
    Ok(())
}

/// A copy of `s`, or the out-of-memory message naming `what`.
pub fn try_to_vec<T: Clone>(s: &[T], what: &str) -> Result<Vec<T>, String> {
    let mut v = try_with_capacity(s.len(), what)?;
    v.extend_from_slice(s);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_resident_memory_is_read_from_the_status_text() {
        let status = "Name:\tfoxbench\nVmPeak:\t 2048 kB\nVmHWM:\t  826380 kB\nVmRSS:\t  708004 kB\n";
        assert_eq!(meminfo_in(status, "VmHWM"), Some(826_380 * 1024));
        assert_eq!(meminfo_in(status, "VmHW"), None, "a field is matched whole");
        if cfg!(target_os = "linux") {
            let peak = peak_resident().expect("Linux says");
            assert!(peak > 0 && peak_resident_words().starts_with(" (host memory peak "));
        }
    }

    #[test]
    fn a_request_over_the_budget_is_refused_and_names_the_limit() {
        assert_eq!(refusal(1000, Some(1000), || None), None);
        let why = refusal(1001, Some(1000), || None).unwrap();
        assert_eq!(
            why,
            "the memory limit (--memory-limit) leaves 1000 bytes to this operation"
        );
    }

    #[test]
    fn only_large_requests_ask_the_machine() {
        let asked = std::cell::Cell::new(false);
        let machine = || {
            asked.set(true);
            Some(0)
        };
        assert_eq!(refusal(CHECKED_BYTES - 1, None, machine), None);
        assert!(!asked.get());
        let why = refusal(CHECKED_BYTES, None, || Some(1 << 30)).map(|_| ());
        assert_eq!(why, None);
        let why = refusal(2 << 30, None, || Some(1 << 30)).unwrap();
        assert_eq!(why, "the machine has 1.0 GiB available (less the reserve kept free)");
        // The machine that does not say refuses nothing.
        assert_eq!(refusal(1 << 60, None, || None), None);
    }

    #[test]
    fn the_budget_bounds_every_allocation_of_the_scope_and_ends_with_it() {
        with_budget(Some(1000), || {
            let a: Vec<u64> = try_with_capacity(100, "the first column").unwrap();
            assert!(a.capacity() >= 100);
            // 800 bytes taken: 200 are left, and freeing gives nothing back.
            drop(a);
            let e = try_with_capacity::<u64>(26, "the second column").unwrap_err();
            assert_eq!(
                e,
                "out of memory: cannot allocate 208 bytes (26 rows of 8 bytes) for the second column: \
                 the memory limit (--memory-limit) leaves 200 bytes to this operation"
            );
            // A refused request takes nothing.
            let b: Vec<u64> = try_filled(25, 7, "the third column").unwrap();
            assert_eq!(b, vec![7; 25]);
            assert!(try_string("x", "a string").is_err());
            // A nested scope has its own budget; the outer one is back after it.
            with_budget(None, || assert!(try_with_capacity::<u8>(4096, "free").is_ok()));
            assert!(try_to_vec(&[1u8], "one byte").is_err());
        });
        assert!(try_with_capacity::<u8>(4096, "after the scope").is_ok());
    }

    #[test]
    fn growth_is_charged_as_the_vector_grows_and_named_whole() {
        with_budget(Some(100), || {
            let mut v: Vec<u8> = Vec::new();
            try_reserve(&mut v, 40, "the growing column").unwrap();
            v.extend([0; 40]);
            // Growing to 41 takes the capacity to 80: 40 more, 60 were left.
            try_reserve(&mut v, 1, "the growing column").unwrap();
            v.extend([0; 40]);
            // Growing to 81 would take it to 160: 80 more, 20 are left.
            let e = try_reserve(&mut v, 1, "the growing column").unwrap_err();
            assert_eq!(
                e,
                "out of memory: cannot allocate 81 bytes for the growing column: \
                 the memory limit (--memory-limit) leaves 20 bytes to this operation"
            );
        });
    }

    #[test]
    fn a_request_larger_than_the_machine_is_refused_before_it_is_made() {
        let Some(total) = meminfo("MemTotal") else {
            return;
        };
        // Linux would grant the address space and kill the process as the pages are
        // touched: the request is refused first.
        let n = usize::try_from(2 * total).unwrap();
        let e = try_with_capacity::<u8>(n, "the huge column").unwrap_err();
        assert!(e.starts_with("out of memory: cannot allocate "), "{e}");
        assert!(e.contains("for the huge column: the machine has "), "{e}");
        let e = try_filled::<u32>(n / 4, 0, "the huge column").unwrap_err();
        assert!(e.contains(&format!("({} rows of 4 bytes)", n / 4)), "{e}");
    }

    #[test]
    fn strings_grow_within_the_budget() {
        with_budget(Some(100), || {
            let mut s = String::new();
            try_push_str(&mut s, &"x".repeat(30), "the text").unwrap();
            // 30 taken; growing to 60 takes 30 more; then 40 are left and 120 are asked.
            try_push_str(&mut s, &"y".repeat(30), "the text").unwrap();
            assert_eq!(s.len(), 60);
            let e = try_push_str(&mut s, &"z".repeat(5), "the text").unwrap_err();
            assert_eq!(
                e,
                "out of memory: cannot allocate 65 bytes for the text: \
                 the memory limit (--memory-limit) leaves 40 bytes to this operation"
            );
            assert_eq!(s.len(), 60);
        });
    }

    #[test]
    fn messages_give_bytes_rows_and_why() {
        assert_eq!(
            rows_out_of_memory(400_000_000, 4, "the joined rows", None),
            "out of memory: cannot allocate 1.5 GiB (400000000 rows of 4 bytes) for the joined rows"
        );
        assert_eq!(
            rows_out_of_memory(2048, 1, "a string", Some("why")),
            "out of memory: cannot allocate 2.0 KiB for a string: why"
        );
    }
}
