//! NCCL, loaded at run time: the link between the GPUs of one run over several devices.
//!
//! The library is looked up as `FOX_NCCL_LIBRARY` (a path), else by its soname
//! `libnccl.so.2` (and `libnccl.so`) on the loader's path, else in the `nvidia/nccl/lib`
//! folder of the Python packages `nvidia-nccl-cu13`/`-cu12` installs (site-packages and
//! dist-packages under the usual prefixes, a virtual environment, `~/.local`). A machine
//! without it gets [`NCCL_MISSING`], never a panic. Only the few entry points an
//! all-to-all needs are bound (grouped `ncclSend`/`ncclRecv` of bytes); cudarc's own NCCL
//! bindings look the library up under names NCCL does not install (`libnccl.so`, or with
//! the CUDA version as suffix), so they would not find the packaged `libnccl.so.2`.
//!
//! One communicator per device, made together by `ncclCommInitAll` over the devices'
//! ordinals (under the stall limit: a set-up that does not return within it is an
//! error). Every operation is enqueued on the device's stream. No thread ever blocks on
//! a group's completion: each device polls its stream's events and the communicators'
//! asynchronous errors ([`Rank::wait_group`]) until its part of the group is done, and
//! fails when a device fails or no device made progress for the stall limit. A failure
//! shuts the link: every communicator is aborted (`ncclCommAbort`, which makes kernels
//! still waiting for a peer return) and later exchanges are refused with the reason. A
//! group is launched only once every device's stream has done its work before it, so an
//! aborted communicator never has work queued behind a stream that had not come; a
//! device whose stream does not come before the launch refuses the link without
//! aborting anything ([`Rank::refuse`]).

use libloading::Library;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The message for a machine without NCCL.
pub const NCCL_MISSING: &str = "NCCL (libnccl.so.2) was not found; a run over several GPUs moves rows \
     between them with it: install it (`pip install nvidia-nccl-cu13`, or the libnccl2 package) or set \
     FOX_NCCL_LIBRARY to the path of libnccl.so.2";

type Comm = *mut c_void;
type Res = c_int;
/// `ncclUint8`: rows move as bytes.
const NCCL_UINT8: c_int = 1;

/// The entry points of the loaded library.
struct Api {
    _lib: Library,
    get_version: unsafe extern "C" fn(*mut c_int) -> Res,
    init_all: unsafe extern "C" fn(*mut Comm, c_int, *const c_int) -> Res,
    destroy: unsafe extern "C" fn(Comm) -> Res,
    abort: unsafe extern "C" fn(Comm) -> Res,
    async_error: unsafe extern "C" fn(Comm, *mut Res) -> Res,
    group_start: unsafe extern "C" fn() -> Res,
    group_end: unsafe extern "C" fn() -> Res,
    send: unsafe extern "C" fn(*const c_void, usize, c_int, c_int, Comm, *mut c_void) -> Res,
    recv: unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, Comm, *mut c_void) -> Res,
    error_string: unsafe extern "C" fn(Res) -> *const c_char,
}

// SAFETY: the function pointers and the library handle are shared read-only; NCCL's
// entry points may be called from any thread.
unsafe impl Send for Api {}
unsafe impl Sync for Api {}

/// Where to look for the library, in order.
fn candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os("FOX_NCCL_LIBRARY") {
        out.push(PathBuf::from(p));
        return out;
    }
    out.push(PathBuf::from("libnccl.so.2"));
    out.push(PathBuf::from("libnccl.so"));
    let mut prefixes: Vec<PathBuf> = ["/usr/local/lib", "/usr/lib", "/opt/conda/lib"]
        .iter()
        .map(PathBuf::from)
        .collect();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(v) = std::env::var_os(var) {
            let root = PathBuf::from(v);
            out.push(root.join("lib/libnccl.so.2"));
            prefixes.push(root.join("lib"));
        }
    }
    if let Some(home) = std::env::var_os("HOME") {
        prefixes.push(PathBuf::from(home).join(".local/lib"));
    }
    for prefix in prefixes {
        let Ok(dir) = std::fs::read_dir(&prefix) else {
            continue;
        };
        let mut pythons: Vec<PathBuf> = dir
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("python3"))
            })
            .collect();
        pythons.sort();
        for py in pythons {
            for packages in ["site-packages", "dist-packages"] {
                out.push(py.join(packages).join("nvidia/nccl/lib/libnccl.so.2"));
                out.push(py.join(packages).join("nvidia/cu13/lib/libnccl.so.2"));
            }
        }
    }
    out
}

/// The loaded library, or why it could not be loaded.
fn api() -> Result<&'static Api, String> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(load).as_ref().map_err(Clone::clone)
}

fn load() -> Result<Api, String> {
    let lib = candidates()
        .into_iter()
        // SAFETY: loading runs the library's initialisers, NCCL's own.
        .find_map(|p| unsafe { Library::new(&p) }.ok())
        .ok_or_else(|| NCCL_MISSING.to_string())?;
    macro_rules! sym {
        ($name:literal) => {
            // SAFETY: the symbol's type is NCCL's C signature of that name.
            *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                .map_err(|e| format!("the NCCL library lacks {}: {e}", $name))?
        };
    }
    Ok(Api {
        get_version: sym!("ncclGetVersion"),
        init_all: sym!("ncclCommInitAll"),
        destroy: sym!("ncclCommDestroy"),
        abort: sym!("ncclCommAbort"),
        async_error: sym!("ncclCommGetAsyncError"),
        group_start: sym!("ncclGroupStart"),
        group_end: sym!("ncclGroupEnd"),
        send: sym!("ncclSend"),
        recv: sym!("ncclRecv"),
        error_string: sym!("ncclGetErrorString"),
        _lib: lib,
    })
}

fn check(api: &Api, r: Res, what: &str) -> Result<(), String> {
    if r == 0 {
        return Ok(());
    }
    Err(format!("NCCL: {what}: {} (code {r})", error_text(api, r)))
}

fn error_text(api: &Api, r: Res) -> String {
    // SAFETY: NCCL returns a static string for every result code.
    unsafe { CStr::from_ptr((api.error_string)(r)) }
        .to_string_lossy()
        .into_owned()
}

/// `ncclInProgress`: an operation of a non-blocking communicator still running (not an
/// error).
const NCCL_IN_PROGRESS: Res = 7;

/// NCCL's version as `major.minor.patch`, or why it cannot be loaded.
pub fn version() -> Result<String, String> {
    let api = api()?;
    let mut v: c_int = 0;
    // SAFETY: a valid pointer to an int.
    check(api, unsafe { (api.get_version)(&mut v) }, "ncclGetVersion")?;
    Ok(format!("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100))
}

/// The communicators of one run's devices, destroyed when the last device lets go (or
/// aborted when the link was shut).
struct Clique {
    api: &'static Api,
    comms: Vec<Comm>,
    /// The state of the group launched last, and whether the link is shut. Every use of
    /// a communicator outside a group launch (its asynchronous error, its abort) is made
    /// under this lock, so none is used once aborted.
    watch: std::sync::Mutex<Watch>,
}

/// What the devices of a link know of the group launched last.
struct Watch {
    /// Why the link was shut, or `None` while it works. A link shut by
    /// [`Clique::shut`] has its communicators aborted; one shut by [`Rank::refuse`]
    /// leaves them alone. Neither is destroyed after.
    shut: Option<String>,
    /// `reached[d]`: device `d`'s stream finished its work before the group.
    reached: Vec<bool>,
    /// `passed[d]`: device `d`'s stream passed the group (its transfers are done).
    passed: Vec<bool>,
    /// When a device last made progress in the group (the launch counts as progress).
    progress: Instant,
}

// SAFETY: each communicator is used by one thread at a time: in a group launch
// (`Rank::launch_all`, one thread with every device's operations), or under the
// `watch` lock; `Drop` runs once every `Rank` is gone.
unsafe impl Send for Clique {}
unsafe impl Sync for Clique {}

impl Clique {
    /// Shuts the link for `why` (the first reason stands): every communicator is
    /// aborted, which makes their kernels that still wait for a peer return.
    fn shut(&self, w: &mut Watch, why: String) {
        if w.shut.is_some() {
            return;
        }
        w.shut = Some(why);
        for &c in &self.comms {
            // SAFETY: every communicator was made by ncclCommInitAll and is aborted once
            // (the `shut` flag under the lock); none is used after.
            unsafe { (self.api.abort)(c) };
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Watch> {
        self.watch.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Clique {
    fn drop(&mut self) {
        let w = self.watch.get_mut().unwrap_or_else(|e| e.into_inner());
        if w.shut.is_some() {
            return;
        }
        for &c in &self.comms {
            // SAFETY: every communicator was made by ncclCommInitAll and is no longer used.
            unsafe { (self.api.destroy)(c) };
        }
    }
}

/// One device's end of the link: its communicator and rank.
pub(crate) struct Rank {
    clique: Arc<Clique>,
    rank: usize,
}

/// The communicators `ncclCommInitAll` made, sent from the thread that made them.
struct Made(Vec<Comm>);

// SAFETY: the communicators are handed over once, to the thread that owns them after.
unsafe impl Send for Made {}

/// One [`Rank`] per ordinal of `ordinals` (the devices of a run, in rank order), made
/// together. A set-up that does not return within `limit` is an error (its thread is
/// left to finish, and destroys what it made).
pub(crate) fn link(ordinals: &[usize], limit: Duration) -> Result<Vec<Rank>, String> {
    let api = api()?;
    let n = ordinals.len();
    let devs: Vec<c_int> = ordinals.iter().map(|&o| o as c_int).collect();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut comms: Vec<Comm> = vec![std::ptr::null_mut(); n];
        // SAFETY: `comms` has room for `n` communicators and `devs` holds `n` ordinals.
        let res = check(
            api,
            unsafe { (api.init_all)(comms.as_mut_ptr(), n as c_int, devs.as_ptr()) },
            "cannot set up the devices' communicators (ncclCommInitAll)",
        );
        if let Err(std::sync::mpsc::SendError(Ok(Made(late)))) = tx.send(res.map(|()| Made(comms))) {
            // The caller gave up waiting.
            for c in late {
                // SAFETY: made above and never handed out.
                unsafe { (api.destroy)(c) };
            }
        }
    });
    let comms = match rx.recv_timeout(limit) {
        Ok(made) => made?.0,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            return Err(format!(
                "NCCL did not set up the communicators of the GPUs {ordinals:?} (ncclCommInitAll) within {} \
                 (the stall limit; {} sets it)",
                fox_runtime::seconds(limit),
                fox_runtime::STALL_LIMIT_VAR
            ))
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            return Err("the thread setting up the devices' communicators (ncclCommInitAll) ended".into())
        }
    };
    let clique = Arc::new(Clique {
        api,
        comms,
        watch: std::sync::Mutex::new(Watch {
            shut: None,
            reached: vec![true; n],
            passed: vec![true; n],
            progress: Instant::now(),
        }),
    });
    Ok((0..n)
        .map(|rank| Rank {
            clique: clique.clone(),
            rank,
        })
        .collect())
}

/// A device's part in [`Rank::wait_group`]: its rank and how to ask, without waiting,
/// whether its stream finished the work before the group (`reached`) and passed the
/// group (`passed`); `Err` when the device failed.
pub(crate) struct Part<'a> {
    pub rank: usize,
    pub reached: Box<dyn FnMut() -> Result<bool, String> + 'a>,
    pub passed: Box<dyn FnMut() -> Result<bool, String> + 'a>,
}

/// Why [`Rank::wait_group`] failed.
#[derive(Debug)]
pub(crate) enum GroupError {
    /// The waiting thread found the failure (and shut the link): the message says which
    /// device failed, or that no device made progress.
    Found(String),
    /// The link was shut by another device's thread, for this reason.
    Shut(String),
}

/// Held around every CUDA call that can wait for a device to go idle while blocking
/// other threads' calls into the driver (loading a module, allocating page-locked host
/// memory) and around the launch of an exchange's NCCL kernels. NCCL's kernels on the
/// devices of one exchange wait for each other: such a call made between the launches
/// of two devices' kernels would wait for the first kernel, which waits for the second,
/// which cannot be launched (NCCL's "concurrency between NCCL and CUDA calls"). All
/// devices' kernels of an exchange are launched together, by one thread, under this
/// lock.
pub(crate) fn driver_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A transfer of one grouped exchange: `bytes` at device address `ptr`, to or from `peer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Move {
    pub peer: usize,
    pub ptr: u64,
    pub bytes: usize,
}

/// One device's part of an exchange: its stream and the transfers it takes part in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub stream: u64,
    pub sends: Vec<Move>,
    pub recvs: Vec<Move>,
}

impl Plan {
    /// As words, for the devices' meeting.
    pub(crate) fn encode(&self) -> Vec<u64> {
        let mut w = vec![self.stream, self.sends.len() as u64, self.recvs.len() as u64];
        for m in self.sends.iter().chain(&self.recvs) {
            w.extend([m.peer as u64, m.ptr, m.bytes as u64]);
        }
        w
    }

    pub(crate) fn decode(w: &[u64]) -> Option<Plan> {
        let (&stream, rest) = w.split_first()?;
        let (&ns, rest) = rest.split_first()?;
        let (&nr, rest) = rest.split_first()?;
        let (ns, nr) = (usize::try_from(ns).ok()?, usize::try_from(nr).ok()?);
        if rest.len() != 3 * (ns.checked_add(nr)?) {
            return None;
        }
        let moves: Vec<Move> = rest
            .chunks(3)
            .map(|c| Move {
                peer: c[0] as usize,
                ptr: c[1],
                bytes: c[2] as usize,
            })
            .collect();
        Some(Plan {
            stream,
            sends: moves[..ns].to_vec(),
            recvs: moves[ns..].to_vec(),
        })
    }
}

impl Rank {
    pub(crate) fn rank(&self) -> usize {
        self.rank
    }

    pub(crate) fn size(&self) -> usize {
        self.clique.comms.len()
    }

    /// Launches every device's transfers of one exchange (`plans[d]`, on device `d`'s
    /// stream) as one NCCL group, from this thread, under [`driver_lock`]. The sends
    /// from `a` to `b` are matched in order with the receives of `b` from `a`.
    pub(crate) fn launch_all(&self, plans: &[Plan]) -> Result<(), String> {
        let api = self.clique.api;
        if plans.len() != self.clique.comms.len() {
            return Err(format!("{} plans for {} devices", plans.len(), self.clique.comms.len()));
        }
        let _lock = driver_lock();
        let mut w = self.clique.lock();
        self.open_in(&w)?;
        let n = plans.len();
        (w.reached, w.passed, w.progress) = (vec![false; n], vec![false; n], Instant::now());
        // SAFETY: the pointers address device buffers of at least `bytes` bytes that stay
        // allocated until their streams pass the group (frees are ordered on the streams),
        // and each stream belongs to its communicator's device.
        unsafe {
            check(api, (api.group_start)(), "ncclGroupStart")?;
            let mut res = Ok(());
            for (d, plan) in plans.iter().enumerate() {
                let comm = self.clique.comms[d];
                let stream = plan.stream as *mut c_void;
                for s in &plan.sends {
                    res = res.and_then(|()| {
                        check(
                            api,
                            (api.send)(
                                s.ptr as *const c_void,
                                s.bytes,
                                NCCL_UINT8,
                                s.peer as c_int,
                                comm,
                                stream,
                            ),
                            "ncclSend",
                        )
                    });
                }
                for r in &plan.recvs {
                    res = res.and_then(|()| {
                        check(
                            api,
                            (api.recv)(r.ptr as *mut c_void, r.bytes, NCCL_UINT8, r.peer as c_int, comm, stream),
                            "ncclRecv",
                        )
                    });
                }
            }
            let end = check(api, (api.group_end)(), "ncclGroupEnd");
            let res = res.and(end);
            if let Err(e) = &res {
                // Some devices' kernels may be launched, waiting for the others'.
                self.clique
                    .shut(&mut w, format!("the launch of an exchange failed: {e}"));
            }
            res
        }
    }

    /// Shuts the link for `why` (the first reason stands) without aborting its
    /// communicators, for a failure found before any NCCL work of the exchange was
    /// queued: later exchanges are refused, and the communicators are left as they are
    /// (neither aborted nor destroyed), since a device whose stream does not come may
    /// make any call that waits for the devices wait for ever.
    pub(crate) fn refuse(&self, why: String) {
        let mut w = self.clique.lock();
        if w.shut.is_none() {
            w.shut = Some(why);
        }
    }

    /// `Ok` while the link works; else the error every later exchange gets.
    pub(crate) fn check_open(&self) -> Result<(), String> {
        self.open_in(&self.clique.lock())
    }

    fn open_in(&self, w: &Watch) -> Result<(), String> {
        match &w.shut {
            None => Ok(()),
            Some(why) => Err(format!(
                "the NCCL link between the devices was shut after an exchange failed ({why}); no exchange can \
                 use it: open the devices again"
            )),
        }
    }

    /// Waits, without blocking in the driver, until the streams of `parts` passed the
    /// group launched last ([`Rank::launch_all`]). Polls each part and its
    /// communicator's asynchronous error; fails, shutting the link, when a device failed
    /// or when no device of the link made progress (reached or passed the group, as seen
    /// by any thread waiting on it) for `limit`; fails when another thread shut the link.
    /// The threads of a link may each wait for their own parts.
    pub(crate) fn wait_group(&self, parts: &mut [Part<'_>], limit: Duration) -> Result<(), GroupError> {
        let api = self.clique.api;
        let mut polls = 0u32;
        loop {
            {
                let mut w = self.clique.lock();
                if let Some(why) = &w.shut {
                    return Err(GroupError::Shut(why.clone()));
                }
                let mut all = true;
                for p in parts.iter_mut() {
                    let d = p.rank;
                    if w.passed[d] {
                        continue;
                    }
                    let mut r: Res = 0;
                    // SAFETY: the communicator is not aborted (`shut` is unset, under the lock).
                    let asked = unsafe { (api.async_error)(self.clique.comms[d], &mut r) };
                    let failed = if asked != 0 {
                        Some(format!("NCCL: ncclCommGetAsyncError: {}", error_text(api, asked)))
                    } else if r != 0 && r != NCCL_IN_PROGRESS {
                        Some(format!("NCCL: {} (code {r})", error_text(api, r)))
                    } else {
                        None
                    };
                    let failed = failed.map(|e| format!("device {d} failed in the exchange: {e}"));
                    let failed = failed.or_else(|| {
                        if w.reached[d] {
                            return None;
                        }
                        match (p.reached)() {
                            Ok(true) => {
                                (w.reached[d], w.progress) = (true, Instant::now());
                                None
                            }
                            Ok(false) => None,
                            Err(e) => Some(format!("device {d} failed before the exchange: {e}")),
                        }
                    });
                    let failed = failed.or_else(|| match (p.passed)() {
                        Ok(true) => {
                            (w.reached[d], w.passed[d], w.progress) = (true, true, Instant::now());
                            None
                        }
                        Ok(false) => {
                            all = false;
                            None
                        }
                        Err(e) => Some(format!("device {d} failed in the exchange: {e}")),
                    });
                    if let Some(why) = failed {
                        self.clique.shut(&mut w, why.clone());
                        return Err(GroupError::Found(why));
                    }
                }
                if all {
                    return Ok(());
                }
                if w.progress.elapsed() >= limit {
                    let n = w.passed.len();
                    let behind: Vec<usize> = (0..n).filter(|&d| !w.reached[d]).collect();
                    let stuck: Vec<usize> = (0..n).filter(|&d| w.reached[d] && !w.passed[d]).collect();
                    let mut what = Vec::new();
                    if !behind.is_empty() {
                        what.push(format!(
                            "{} had not finished {} work before it",
                            fox_runtime::name_devices(&behind),
                            if behind.len() == 1 { "its" } else { "their" }
                        ));
                    }
                    if !stuck.is_empty() {
                        what.push(format!(
                            "{} had not completed {} transfers",
                            fox_runtime::name_devices(&stuck),
                            if stuck.len() == 1 { "its" } else { "their" }
                        ));
                    }
                    let why = format!(
                        "the exchange between the devices did not complete: {}; no device made progress for {} \
                         (the stall limit; {} sets it)",
                        what.join("; "),
                        fox_runtime::seconds(limit),
                        fox_runtime::STALL_LIMIT_VAR
                    );
                    self.clique.shut(&mut w, why.clone());
                    return Err(GroupError::Found(why));
                }
            }
            back_off(&mut polls);
        }
    }
}

/// The pause after the `polls`-th poll of a wait that must not block in the driver (which
/// it counts): a transfer or a stream's last work usually ends within microseconds, so
/// the first polls yield, later ones sleep briefly, so that a long wait costs no core.
pub(crate) fn back_off(polls: &mut u32) {
    *polls = polls.saturating_add(1);
    if *polls < 256 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(Duration::from_micros(if *polls < 4096 { 20 } else { 500 }));
    }
}
