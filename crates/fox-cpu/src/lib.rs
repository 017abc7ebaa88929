//! Every kernel of the kernel IR, in Rust with rayon, with the same contracts as the
//! GPU kernels.
//!
//! Not implemented yet: this crate is a reserved slot in the workspace layout
//! (see docs/architecture.md). Nothing depends on it.
