//! fox-ra: the relational-algebra query plan.
//!
//! * [`ir`]: the plan IR ([`RaPlan`]): relation variables and a CFG of basic blocks whose
//!   statements assign relational operators to SSA temporaries.
//! * [`plan()`]: the planner from `fox_sema::core::CoreProgram` (join order, semi-naive
//!   recursion, multi-way joins for cyclic bodies), then the rewrites of `opt` (inlining,
//!   common subexpressions, counting multi-way joins, dead temps).
//! * [`print_plan`]: the readable form (`foxc compile --emit ra`).
//! * [`to_ron`] / [`from_ron`]: the serialised form, checked by [`validate`] when read.
//!
//! This crate never names a kernel: choosing algorithms for operators is `fox-kernel`'s job.

mod error;
pub mod ir;
mod opt;
mod plan;
mod print;
mod ron_io;

pub use error::PlanError;
pub use ir::*;
pub use plan::{convert_value, plan, plan_with, widens, PlanOptions};
pub use print::{print_plan, print_stmt, print_term, sort_keys, value as print_value};
pub use ron_io::{from_ron, to_ron, validate};
