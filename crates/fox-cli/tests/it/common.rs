//! What every area of the tests uses: the repository's root and scratch folders.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository's root, canonical (the programs, data and tools are named from it).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// An empty scratch folder `<temp>/<area>-<tag>-<pid>`, made afresh: `area` keeps the
/// folders of the areas apart, since they run in parallel in one process.
pub fn temp_dir(area: &str, tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("{area}-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// SplitMix64, for data the test can recount.
pub fn next(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `foxrun P --data DIR --backend cpu --timing EXTRA…` from the repository's root.
pub fn foxrun_cpu_timed(p: &Path, dir: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .current_dir(repo())
        .arg(p)
        .arg("--data")
        .arg(dir)
        .args(["--backend", "cpu", "--timing"])
        .args(extra)
        .output()
        .unwrap()
}

/// The windows of the `rounds: N windows …` line `--timing` prints (0 without it).
pub fn timing_rounds(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("rounds: "))
        .and_then(|l| l.split_whitespace().next())
        .map_or(0, |n| n.parse().unwrap())
}

/// Each device's `device peak N bytes` from `--timing`.
pub fn device_peaks(stderr: &str) -> Vec<u64> {
    stderr
        .lines()
        .filter_map(|l| {
            l.strip_prefix("device ")?
                .split_once(": device peak ")?
                .1
                .split_whitespace()
                .next()
        })
        .map(|n| n.parse().unwrap())
        .collect()
}
