//! The tests of the physical passes, one module per pass: each shows a plan as the passes
//! before it left it and as the pass leaves it (insta snapshots), and checks what the pass
//! decides on the cases that matter.

mod common;
mod estimate;
mod fusion;
mod join_algorithms;
mod join_selection;
mod order;
mod partitioning;
mod passes;
mod rounds;
mod verify;
