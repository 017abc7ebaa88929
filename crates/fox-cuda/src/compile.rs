//! NVRTC compilation of the kernel modules (`kernels/*.cu`) and of generated expression
//! kernels, with a cache on disk.
//!
//! A source is compiled to a CUBIN for the device's real architecture (`sm_90`), which the
//! driver loads without compiling again; when NVRTC cannot make one for it (an NVRTC older
//! than the device), to PTX for its virtual architecture (`compute_90`), which the driver
//! compiles as it loads. The cache lives in `$XDG_CACHE_HOME/fox/ptx` (else
//! `$HOME/.cache/fox/ptx`); an entry is keyed by a 128-bit FNV-1a hash of the source, the
//! NVRTC version, the target architecture, the kind of image and the compile options, and
//! is written atomically (temporary file and rename). A cache entry that cannot be read,
//! or does not look like PTX or an ELF image, is ignored and the source is compiled again.
//! Within a process, each image is compiled or read once.
//!
//! Kernel module images may also ship beside the binaries ([`precompile_modules`], run by
//! `foxc precompile-kernels`): a folder `fox-kernels` next to the executable (or the one
//! `FOX_KERNEL_IMAGES` names) holding `<key>.cubin` files, keyed by a hash of the
//! module's source and the architecture only ([`shipped_key`]), so a fresh machine loads
//! them without compiling. The driver loads a CUBIN made by an NVRTC no newer than it
//! (Fox needs a CUDA 13 driver, and NVRTC 13 makes them), and an image is read only for
//! the source it was made from.

use fox_runtime::BackendError;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The kernel modules, by name: the text of `kernels/<name>.cu`, embedded in the binary.
/// Each includes the prelude (`#include "common.cuh"`); [`module_source`] is the source
/// compiled, the prelude in place.
pub const MODULES: &[(&str, &str)] = &[
    ("movement", include_str!("../../../kernels/movement.cu")),
    ("scan", include_str!("../../../kernels/scan.cu")),
    ("sort", include_str!("../../../kernels/sort.cu")),
    ("join", include_str!("../../../kernels/join.cu")),
    ("reduce", include_str!("../../../kernels/reduce.cu")),
    ("trie", include_str!("../../../kernels/trie.cu")),
    ("ineq", include_str!("../../../kernels/ineq.cu")),
];

/// The text of `kernels/<name>.cu` as embedded.
pub fn module_file(name: &str) -> Option<&'static str> {
    MODULES.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
}

/// The source of kernel module `name` as it is compiled: its file with the prelude
/// (`kernels/common.cuh`, see [`crate::prelude`]) in place of its include line. Made once
/// per process.
pub fn module_source(name: &str) -> Option<&'static str> {
    static SOURCES: OnceLock<Vec<(&'static str, String)>> = OnceLock::new();
    let sources = SOURCES.get_or_init(|| {
        MODULES
            .iter()
            .map(|(n, s)| (*n, crate::prelude::with_prelude(s, &crate::prelude::module_defines(n))))
            .collect()
    });
    sources.iter().find(|(n, _)| *n == name).map(|(_, s)| s.as_str())
}

/// Whether the NVRTC library can be loaded (compiling without it would panic inside
/// cudarc, so every entry point checks this first).
pub fn nvrtc_available() -> bool {
    // SAFETY: only tries to open the library by its candidate names.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// The message for a missing NVRTC library.
pub const NVRTC_MISSING: &str = "libnvrtc.so.13 not found: install the CUDA 13.0 NVRTC, or set LD_LIBRARY_PATH";

/// NVRTC's version, `(major, minor)`.
pub fn nvrtc_version() -> Result<(i32, i32), BackendError> {
    if !nvrtc_available() {
        return Err(BackendError(NVRTC_MISSING.to_string()));
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is present; both pointers are valid for writes.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| BackendError(format!("nvrtcVersion failed: {e:?}")))?;
    Ok((major, minor))
}

/// The CCCL (CUB) include directory: `$FOX_CCCL_INCLUDE`, else
/// `$CUDA_HOME/include/cccl` with `CUDA_HOME` defaulting to `/usr/local/cuda`.
pub fn cccl_include() -> String {
    if let Some(p) = std::env::var_os("FOX_CCCL_INCLUDE").filter(|p| !p.is_empty()) {
        return p.to_string_lossy().into_owned();
    }
    let home = std::env::var_os("CUDA_HOME")
        .filter(|p| !p.is_empty())
        .map_or_else(|| "/usr/local/cuda".to_string(), |p| p.to_string_lossy().into_owned());
    format!("{home}/include/cccl")
}

/// The NVRTC options for `arch` (`compute_90`).
pub fn compile_options(arch: &str) -> Vec<String> {
    vec![
        format!("--gpu-architecture={arch}"),
        "--std=c++17".to_string(),
        "-default-device".to_string(),
        // `__int128` (exact decimal arithmetic) needs this flag under NVRTC.
        "--device-int128".to_string(),
        format!("--include-path={}", cccl_include()),
        "-lineinfo".to_string(),
    ]
}

/// Compiles `source` to PTX for `arch` (no cache). `what` names the source in errors;
/// a compile error carries NVRTC's log.
pub fn compile_ptx(what: &str, source: &str, arch: &str) -> Result<String, BackendError> {
    if !nvrtc_available() {
        return Err(BackendError(NVRTC_MISSING.to_string()));
    }
    if source.contains('\0') {
        return Err(BackendError(format!("{what}: the CUDA source contains a NUL byte")));
    }
    let opts = cudarc::nvrtc::CompileOptions {
        options: compile_options(arch),
        name: Some(if what.ends_with(".cu") {
            what.to_string()
        } else {
            format!("{what}.cu")
        }),
        ..Default::default()
    };
    match cudarc::nvrtc::compile_ptx_with_opts(source, opts) {
        Ok(ptx) => Ok(ptx.to_src()),
        Err(cudarc::nvrtc::CompileError::CompileError { nvrtc, options, log }) => Err(BackendError(format!(
            "NVRTC cannot compile {what} ({:?}, options {}):\n{}",
            nvrtc.0,
            options.join(" "),
            log.to_string_lossy().trim_end()
        ))),
        Err(e) => Err(BackendError(format!("NVRTC failed on {what}: {e:?}"))),
    }
}

/// Compiles `source` to a CUBIN for the real architecture `sm` (`sm_90`, no cache).
/// `what` names the source in errors; a compile error carries NVRTC's log.
pub fn compile_cubin(what: &str, source: &str, sm: &str) -> Result<Vec<u8>, BackendError> {
    use cudarc::nvrtc::{result, sys};
    if !nvrtc_available() {
        return Err(BackendError(NVRTC_MISSING.to_string()));
    }
    let src = std::ffi::CString::new(source)
        .map_err(|_| BackendError(format!("{what}: the CUDA source contains a NUL byte")))?;
    let name = std::ffi::CString::new(if what.ends_with(".cu") {
        what.to_string()
    } else {
        format!("{what}.cu")
    })
    .map_err(|_| BackendError(format!("{what}: a NUL byte in the name")))?;
    let prog = result::create_program(&src, Some(&name))
        .map_err(|e| BackendError(format!("NVRTC cannot create a program of {what}: {e:?}")))?;
    let out = (|| {
        let options = compile_options(sm);
        // SAFETY: `prog` was created above and is destroyed only after this closure.
        if let Err(e) = unsafe { result::compile_program(prog, &options) } {
            // SAFETY: as above.
            let log = unsafe { result::get_program_log(prog) }.unwrap_or_default();
            let log: Vec<u8> = log.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
            return Err(BackendError(format!(
                "NVRTC cannot compile {what} ({e:?}, options {}):\n{}",
                options.join(" "),
                String::from_utf8_lossy(&log).trim_end()
            )));
        }
        let mut size = 0usize;
        // SAFETY: as above; `size` is a valid out-pointer.
        unsafe { sys::nvrtcGetCUBINSize(prog, &mut size) }
            .result()
            .map_err(|e| BackendError(format!("NVRTC made no CUBIN of {what}: {e:?}")))?;
        let mut image = vec![0u8; size];
        // SAFETY: `image` holds the `size` bytes NVRTC reported.
        unsafe { sys::nvrtcGetCUBIN(prog, image.as_mut_ptr().cast()) }
            .result()
            .map_err(|e| BackendError(format!("NVRTC made no CUBIN of {what}: {e:?}")))?;
        Ok(image)
    })();
    // SAFETY: created above, not destroyed before.
    let _ = unsafe { result::destroy_program(prog) };
    out
}

/// A compiled module image for the driver to load.
#[derive(Clone, Debug)]
pub enum Image {
    /// A CUBIN for the device's architecture: loaded as it is.
    Cubin(Arc<Vec<u8>>),
    /// PTX: compiled by the driver as it loads.
    Ptx(Arc<String>),
}

impl Image {
    /// The image in the form the driver API loads.
    pub fn to_loadable(&self) -> cudarc::nvrtc::Ptx {
        match self {
            Image::Cubin(b) => cudarc::nvrtc::Ptx::from_binary(b.as_ref().clone()),
            Image::Ptx(p) => cudarc::nvrtc::Ptx::from_src(p.as_str()),
        }
    }
}

/// Whether `bytes` look like a complete ELF image (a CUBIN).
fn looks_like_cubin(bytes: &[u8]) -> bool {
    bytes.len() > 64 && bytes.starts_with(b"\x7fELF")
}

/// Time spent getting module images, and where they came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompileStats {
    /// Time the run spent waiting for images: in NVRTC and reading the disk cache, and
    /// waiting for the kernel modules compiled in the background
    /// ([`crate::device::Gpu::prefetch_modules`]).
    pub total: Duration,
    /// Sources compiled with NVRTC.
    pub compiled: u32,
    /// Sources whose PTX came from the disk cache.
    pub from_cache: u32,
}

/// 128-bit FNV-1a.
pub fn fnv1a128(parts: &[&[u8]]) -> u128 {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    let mut h = OFFSET;
    for part in parts {
        for &b in *part {
            h ^= u128::from(b);
            h = h.wrapping_mul(PRIME);
        }
        // A separator, so that ("ab", "c") and ("a", "bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(PRIME);
    }
    h
}

/// The PTX cache directory, if a home for it is known.
pub fn cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|p| !p.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join("fox").join("ptx"))
}

/// PTX already obtained in this process, by cache key.
fn process_cache() -> &'static Mutex<HashMap<u128, Image>> {
    static CACHE: OnceLock<Mutex<HashMap<u128, Image>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Whether `text` looks like a complete PTX module (a module with kernels ends with the
/// closing brace of its last one).
fn looks_like_ptx(text: &str) -> bool {
    !text.contains('\0')
        && text.contains(".version")
        && text.contains(".target")
        && (!text.contains(".entry") || text.trim_end().ends_with('}'))
}

/// Compiles for one architecture, with the process and disk caches, and keeps statistics.
/// A clone compiles for the same architecture with statistics of its own.
#[derive(Clone, Debug)]
pub struct Compiler {
    arch: String,
    /// The real architecture (`sm_90`) CUBINs are made for; `None`: PTX only.
    sm: Option<String>,
    nvrtc: (i32, i32),
    dir: Option<PathBuf>,
    stats: CompileStats,
}

impl Compiler {
    /// A compiler for `arch` (`compute_90`). Fails when NVRTC is absent.
    pub fn new(arch: &str) -> Result<Compiler, BackendError> {
        Ok(Compiler {
            arch: arch.to_string(),
            sm: arch.strip_prefix("compute_").map(|v| format!("sm_{v}")),
            nvrtc: nvrtc_version()?,
            dir: cache_dir(),
            stats: CompileStats::default(),
        })
    }

    pub fn arch(&self) -> &str {
        &self.arch
    }

    pub fn stats(&self) -> CompileStats {
        self.stats
    }

    /// A compiler for the same architecture with statistics of its own.
    pub fn clone_fresh(&self) -> Compiler {
        Compiler {
            stats: CompileStats::default(),
            ..self.clone()
        }
    }

    /// Counts the images another compiler (a clone working in the background) obtained,
    /// and `waited`, the time the run waited for them.
    pub fn absorb(&mut self, other: CompileStats, waited: Duration) {
        self.stats.compiled += other.compiled;
        self.stats.from_cache += other.from_cache;
        self.stats.total += waited;
    }

    /// The cache key of `source` compiled for `arch` to an image of kind `kind`.
    fn key_for(&self, source: &str, arch: &str, kind: &str) -> u128 {
        let version = format!("nvrtc {}.{}", self.nvrtc.0, self.nvrtc.1);
        let options = compile_options(arch).join("\n");
        fnv1a128(&[
            source.as_bytes(),
            version.as_bytes(),
            arch.as_bytes(),
            options.as_bytes(),
            kind.as_bytes(),
        ])
    }

    /// The cache key of `source` as PTX.
    pub fn key(&self, source: &str) -> u128 {
        self.key_for(source, &self.arch, "ptx")
    }

    /// The PTX of `source`: from this process, the disk cache, or NVRTC.
    pub fn ptx(&mut self, what: &str, source: &str) -> Result<Arc<String>, BackendError> {
        let t0 = Instant::now();
        let out = self.ptx_untimed(what, source);
        self.stats.total += t0.elapsed();
        out
    }

    fn ptx_untimed(&mut self, what: &str, source: &str) -> Result<Arc<String>, BackendError> {
        let key = self.key(source);
        if let Some(Image::Ptx(p)) = process_cache().lock().ok().and_then(|c| c.get(&key).cloned()) {
            return Ok(p);
        }
        let file = self.dir.as_ref().map(|d| d.join(format!("{key:032x}.ptx")));
        let cached = file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .filter(|t| looks_like_ptx(t));
        let ptx = match cached {
            Some(text) => {
                self.stats.from_cache += 1;
                text
            }
            None => {
                let text = compile_ptx(what, source, &self.arch)?;
                self.stats.compiled += 1;
                if let (Some(dir), Some(file)) = (&self.dir, &file) {
                    // The cache is an optimisation: a failure to write it is not an error.
                    let _ = write_atomic(dir, file, text.as_bytes());
                }
                text
            }
        };
        let ptx = Arc::new(ptx);
        if let Ok(mut c) = process_cache().lock() {
            c.insert(key, Image::Ptx(ptx.clone()));
        }
        Ok(ptx)
    }

    /// The image of `source` for the driver: a CUBIN for the device's architecture (from
    /// this process, the disk cache, or NVRTC), or, when NVRTC cannot make one, its PTX.
    pub fn image(&mut self, what: &str, source: &str) -> Result<Image, BackendError> {
        let t0 = Instant::now();
        let out = self.image_untimed(what, source);
        self.stats.total += t0.elapsed();
        out
    }

    fn image_untimed(&mut self, what: &str, source: &str) -> Result<Image, BackendError> {
        let Some(sm) = self.sm.clone() else {
            return self.ptx_untimed(what, source).map(Image::Ptx);
        };
        let key = self.key_for(source, &sm, "cubin");
        if let Some(img) = process_cache().lock().ok().and_then(|c| c.get(&key).cloned()) {
            return Ok(img);
        }
        if let Some(bytes) = shipped_image(source, &sm) {
            self.stats.from_cache += 1;
            let image = Image::Cubin(Arc::new(bytes));
            if let Ok(mut c) = process_cache().lock() {
                c.insert(key, image.clone());
            }
            return Ok(image);
        }
        let file = self.dir.as_ref().map(|d| d.join(format!("{key:032x}.cubin")));
        let cached = file
            .as_ref()
            .and_then(|f| std::fs::read(f).ok())
            .filter(|b| looks_like_cubin(b));
        let image = match cached {
            Some(bytes) => {
                self.stats.from_cache += 1;
                Image::Cubin(Arc::new(bytes))
            }
            None => match compile_cubin(what, source, &sm) {
                Ok(bytes) => {
                    self.stats.compiled += 1;
                    if let (Some(dir), Some(file)) = (&self.dir, &file) {
                        let _ = write_atomic(dir, file, &bytes);
                    }
                    Image::Cubin(Arc::new(bytes))
                }
                // An NVRTC that does not know the architecture: PTX for its virtual one
                // (an error in the source fails there too, with its log).
                Err(_) if !nvrtc_knows(&sm) => return self.ptx_untimed(what, source).map(Image::Ptx),
                Err(e) => return Err(e),
            },
        };
        if let Ok(mut c) = process_cache().lock() {
            c.insert(key, image.clone());
        }
        Ok(image)
    }
}

/// The key of the shipped image of a module `source` for the real architecture `sm`: the
/// source and the architecture, not the NVRTC that made it or where its headers were.
pub fn shipped_key(source: &str, sm: &str) -> u128 {
    fnv1a128(&[source.as_bytes(), sm.as_bytes(), b"cubin"])
}

/// The folder of shipped module images: `FOX_KERNEL_IMAGES`, else `fox-kernels` next to
/// the executable, when it exists.
pub fn shipped_dir() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FOX_KERNEL_IMAGES").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let dir = std::env::current_exe().ok()?.parent()?.join("fox-kernels");
    dir.is_dir().then_some(dir)
}

/// The shipped image of `source` for `sm`, if there is one.
fn shipped_image(source: &str, sm: &str) -> Option<Vec<u8>> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    let dir = DIR.get_or_init(shipped_dir).as_ref()?;
    let bytes = std::fs::read(dir.join(format!("{:032x}.cubin", shipped_key(source, sm)))).ok()?;
    looks_like_cubin(&bytes).then_some(bytes)
}

/// Compiles every kernel module to a CUBIN for each real architecture of `archs`
/// (`sm_90`, …), in parallel, into `dir` (created) under its [`shipped_key`]; returns per
/// image the module, the architecture, the file and the seconds it took.
pub fn precompile_modules(
    dir: &std::path::Path,
    archs: &[String],
) -> Result<Vec<(String, String, PathBuf, f64)>, BackendError> {
    for a in archs {
        let ok = a
            .strip_prefix("sm_")
            .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric()));
        if !ok {
            return Err(BackendError(format!(
                "`{a}` is not a real GPU architecture: write it as sm_90, sm_100, …"
            )));
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| BackendError(format!("cannot create {}: {e}", dir.display())))?;
    let jobs: Vec<(&str, &str)> = archs
        .iter()
        .flat_map(|a| MODULES.iter().map(move |(n, _)| (*n, a.as_str())))
        .collect();
    let results: Vec<Result<(String, String, PathBuf, f64), BackendError>> = std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .iter()
            .map(|&(name, sm)| {
                s.spawn(move || {
                    let source = module_source(name).ok_or_else(|| BackendError(format!("no module {name}")))?;
                    let t0 = Instant::now();
                    let bytes = compile_cubin(&format!("kernels/{name}.cu"), source, sm)?;
                    let file = dir.join(format!("{:032x}.cubin", shipped_key(source, sm)));
                    write_atomic(dir, &file, &bytes)
                        .map_err(|e| BackendError(format!("cannot write {}: {e}", file.display())))?;
                    Ok((name.to_string(), sm.to_string(), file, t0.elapsed().as_secs_f64()))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BackendError("a compile thread failed".into())))
            })
            .collect()
    });
    results.into_iter().collect()
}

/// Whether NVRTC can compile for the real architecture `sm` (`sm_90`).
fn nvrtc_knows(sm: &str) -> bool {
    static KNOWN: OnceLock<Mutex<HashMap<String, bool>>> = OnceLock::new();
    let known = KNOWN.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(k) = known.lock().ok().and_then(|m| m.get(sm).copied()) {
        return k;
    }
    let k = compile_cubin("an empty source", "extern \"C\" __global__ void fox_empty() {}\n", sm).is_ok();
    if let Ok(mut m) = known.lock() {
        m.insert(sm.to_string(), k);
    }
    k
}

/// Writes `text` to `file` in `dir` (created) through the shared writer of output files
/// (a temporary and a rename for a regular file).
fn write_atomic(dir: &std::path::Path, file: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    fox_runtime::write_bytes(file, bytes).map_err(|e| e.error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_separates_parts() {
        assert_ne!(fnv1a128(&[b"ab", b"c"]), fnv1a128(&[b"a", b"bc"]));
        assert_eq!(fnv1a128(&[b"x"]), fnv1a128(&[b"x"]));
    }

    #[test]
    fn ptx_shape() {
        assert!(looks_like_ptx(".version 9.0\n.target sm_90\n.entry f() {\n}\n"));
        assert!(!looks_like_ptx(".version 9.0\n.target sm_90\n.entry f() {\n"));
        assert!(!looks_like_ptx(""));
    }
}
