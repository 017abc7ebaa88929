//! Loads kernel plans and interprets their CFG on a backend (GPU or CPU), owns the
//! buffer pool, loads input data and writes results.
//!
//! Not implemented yet: this crate is a reserved slot in the workspace layout
//! (see docs/architecture.md). Nothing depends on it.
