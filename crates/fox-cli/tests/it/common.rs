//! What every area of the tests uses: the repository's root and scratch folders.

use std::path::{Path, PathBuf};

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
