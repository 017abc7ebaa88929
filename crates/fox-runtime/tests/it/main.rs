//! The integration tests of fox-runtime (loading, outputs and the interpreter) in one test
//! executable, one module per area: every test executable links the whole dependency graph,
//! so one per package keeps the build short, and libtest runs the tests of every area in
//! parallel.

mod host_tier;
mod load;
mod load_cancel;
mod outfile;
mod output;
mod parquet;
mod run;
