//! The kernel IR: a CFG of basic blocks holding data-parallel kernel launches over
//! typed buffer variables, lowered from the RA plan of `fox-ra`, with list scheduling,
//! liveness analysis and explicit alloc/free points.
//!
//! Not implemented yet: this crate is a reserved slot in the workspace layout
//! (see docs/architecture.md). Nothing depends on it.
