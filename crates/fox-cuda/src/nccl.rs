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
//! ordinals; each device's thread uses only its own. Every operation is enqueued on the
//! device's stream, so later kernels see the rows it received without a host wait.

use libloading::Library;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

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
    // SAFETY: NCCL returns a static string for every result code.
    let text = unsafe { CStr::from_ptr((api.error_string)(r)) }
        .to_string_lossy()
        .into_owned();
    Err(format!("NCCL: {what}: {text} (code {r})"))
}

/// NCCL's version as `major.minor.patch`, or why it cannot be loaded.
pub fn version() -> Result<String, String> {
    let api = api()?;
    let mut v: c_int = 0;
    // SAFETY: a valid pointer to an int.
    check(api, unsafe { (api.get_version)(&mut v) }, "ncclGetVersion")?;
    Ok(format!("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100))
}

/// The communicators of one run's devices, destroyed when the last device lets go.
struct Clique {
    api: &'static Api,
    comms: Vec<Comm>,
    /// Set when a device stopped inside an exchange: the communicators are aborted, not
    /// destroyed (a destroy would wait for the peer).
    broken: std::sync::atomic::AtomicBool,
}

// SAFETY: each communicator is used by one device's thread at a time (its `Rank`), and by
// `Drop` only once every `Rank` is gone.
unsafe impl Send for Clique {}
unsafe impl Sync for Clique {}

impl Drop for Clique {
    fn drop(&mut self) {
        let broken = self.broken.load(std::sync::atomic::Ordering::SeqCst);
        for &c in &self.comms {
            // SAFETY: every communicator was made by ncclCommInitAll and is no longer used.
            unsafe {
                if broken {
                    (self.api.abort)(c);
                } else {
                    (self.api.destroy)(c);
                }
            }
        }
    }
}

/// One device's end of the link: its communicator and rank.
pub(crate) struct Rank {
    clique: Arc<Clique>,
    rank: usize,
}

/// One [`Rank`] per ordinal of `ordinals` (the devices of a run, in rank order), made
/// together.
pub(crate) fn link(ordinals: &[usize]) -> Result<Vec<Rank>, String> {
    let api = api()?;
    let n = ordinals.len();
    let devs: Vec<c_int> = ordinals.iter().map(|&o| o as c_int).collect();
    let mut comms: Vec<Comm> = vec![std::ptr::null_mut(); n];
    // SAFETY: `comms` has room for `n` communicators and `devs` holds `n` ordinals.
    check(
        api,
        unsafe { (api.init_all)(comms.as_mut_ptr(), n as c_int, devs.as_ptr()) },
        "cannot set up the devices' communicators (ncclCommInitAll)",
    )?;
    let clique = Arc::new(Clique {
        api,
        comms,
        broken: std::sync::atomic::AtomicBool::new(false),
    });
    Ok((0..n)
        .map(|rank| Rank {
            clique: clique.clone(),
            rank,
        })
        .collect())
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
            if res.is_err() || end.is_err() {
                self.clique.broken.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            res.and(end)
        }
    }
}
