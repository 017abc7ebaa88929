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
