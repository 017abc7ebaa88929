//! The integration tests of fox-cli (the binaries as a user runs them) in one test
//! executable, one module per area: every test executable links the whole dependency graph,
//! so one per package keeps the build short, and libtest runs the tests of every area in
//! parallel.

mod band;
mod cli;
mod common;
mod corpus;
mod cross_rounds;
mod datalog;
mod devices;
mod files;
mod foxbench;
mod foxrun;
mod graph;
mod host_tier;
mod ineq;
mod ineq_rounds;
mod join_rounds;
mod joins;
mod large_inputs;
mod memory;
mod mutations;
mod observe;
mod out_of_memory;
mod outputs;
mod parquet;
mod passes;
mod pieces;
mod plan_fuzz;
mod repl;
mod runtime_errors;
mod souffle;
mod tiering;
mod tpch;
