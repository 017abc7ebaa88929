//! The integration tests of fox-syntax (syntax and parsing) in one test executable, one
//! module per area: every test executable links the whole dependency graph, so one per
//! package keeps the build short, and libtest runs the tests of every area in parallel.

mod directives;
mod errors;
mod examples;
mod fuzz;
mod project_programs;
mod roundtrip_prop;
mod snapshot;
