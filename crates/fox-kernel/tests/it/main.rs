//! The integration tests of fox-kernel (the kernel plans) in one test executable, one
//! module per area: every test executable links the whole dependency graph, so one per
//! package keeps the build short, and libtest runs the tests of every area in parallel.

mod common;
mod contracts;
mod exchange;
mod hoist;
mod levels;
mod plans;
mod validate;
