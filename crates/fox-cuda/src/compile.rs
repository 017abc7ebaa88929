//! NVRTC compilation of the kernel modules (`kernels/*.cu`) and of generated expression
//! kernels, with a PTX cache on disk.
//!
//! The cache lives in `$XDG_CACHE_HOME/fox/ptx` (else `$HOME/.cache/fox/ptx`); an entry is
//! keyed by a 128-bit FNV-1a hash of the source, the NVRTC version, the target
//! architecture and the compile options, and is written atomically (temporary file and
//! rename). A cache entry that cannot be read, or does not look like PTX, is ignored and
//! the source is compiled again. Within a process, each PTX is compiled or read once.

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

/// Time spent getting PTX, and where it came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompileStats {
    /// Time spent in NVRTC and reading the disk cache.
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
fn process_cache() -> &'static Mutex<HashMap<u128, Arc<String>>> {
    static CACHE: OnceLock<Mutex<HashMap<u128, Arc<String>>>> = OnceLock::new();
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
#[derive(Debug)]
pub struct Compiler {
    arch: String,
    nvrtc: (i32, i32),
    dir: Option<PathBuf>,
    stats: CompileStats,
}

impl Compiler {
    /// A compiler for `arch` (`compute_90`). Fails when NVRTC is absent.
    pub fn new(arch: &str) -> Result<Compiler, BackendError> {
        Ok(Compiler {
            arch: arch.to_string(),
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

    /// The cache key of `source`.
    pub fn key(&self, source: &str) -> u128 {
        let version = format!("nvrtc {}.{}", self.nvrtc.0, self.nvrtc.1);
        let options = compile_options(&self.arch).join("\n");
        fnv1a128(&[
            source.as_bytes(),
            version.as_bytes(),
            self.arch.as_bytes(),
            options.as_bytes(),
        ])
    }

    /// The PTX of `source`: from this process, the disk cache, or NVRTC.
    pub fn ptx(&mut self, what: &str, source: &str) -> Result<Arc<String>, BackendError> {
        let key = self.key(source);
        if let Some(p) = process_cache().lock().ok().and_then(|c| c.get(&key).cloned()) {
            return Ok(p);
        }
        let t0 = Instant::now();
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
                    let _ = write_atomic(dir, file, &text);
                }
                text
            }
        };
        self.stats.total += t0.elapsed();
        let ptx = Arc::new(ptx);
        if let Ok(mut c) = process_cache().lock() {
            c.insert(key, ptx.clone());
        }
        Ok(ptx)
    }
}

/// Writes `text` to `file` in `dir` (created) through the shared writer of output files
/// (a temporary and a rename for a regular file).
fn write_atomic(dir: &std::path::Path, file: &std::path::Path, text: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    fox_runtime::write_bytes(file, text.as_bytes()).map_err(|e| e.error)
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
