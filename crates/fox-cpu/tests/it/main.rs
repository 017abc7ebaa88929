//! The integration tests of fox-cpu (the CPU backend's kernels and expressions) in one test
//! executable, one module per area: every test executable links the whole dependency graph,
//! so one per package keeps the build short, and libtest runs the tests of every area in
//! parallel.

mod common;
mod eval;
mod hash;
mod kernels;
mod memory;
mod spmd;
