//! The integration tests of fox-tests (the reference evaluator and the differential tests)
//! in one test executable, one module per area: every test executable links the whole
//! dependency graph, so one per package keeps the build short, and libtest runs the tests
//! of every area in parallel.

mod clingo;
mod common;
mod differential;
mod ineq_rounds;
mod reference;
mod round_room;
mod unique_rounds;
