//! The kernel IR: a CFG of basic blocks holding data-parallel kernel launches over typed
//! buffer variables, lowered from the RA plan of `fox-ra`, with list scheduling, liveness
//! analysis and explicit free points; and its serialised form (versioned RON).
//!
//! * [`ir`]: the plan ([`KernelPlan`]) and the kernel vocabulary with its contracts.
//! * [`lower()`]: RA plan → kernel plan (lowering, scheduling, loop-invariant code motion,
//!   liveness, frees).
//! * [`print_kernels`] / [`to_dot`]: the readable text and the graphviz drawing.
//! * [`to_ron`] / [`from_ron`] / [`validate`]: the plan file and its consistency check.
//! * [`kernel_outputs`] / [`check_args`]: the element types each kernel takes and
//!   produces, and the whole contract of a launch's arguments.
//! * [`check_expr`]: the one checked form of a kernel expression, which every backend
//!   evaluates or translates, and the one type check of expressions (the contracts'
//!   too: [`checked::check_types`]).
//! * [`expand`]: the composition a composite kernel (`FusedReduce`) stands for.
//! * [`arith`], [`show_kexpr`]: the arithmetic of the contracts and the text of
//!   expressions in messages, shared by every backend.
//!
//! This crate never touches a device.

pub mod arith;
mod bitset;
pub mod checked;
mod expand;
mod hoist;
pub mod ir;
mod live;
mod lower;
mod print;
mod ron_io;
mod sched;
mod sig;

pub use arith::{div_round_half_away, finish_int_sum, int_bits, int_pow, parse_souffle_int, scale_of, PowError};
pub use checked::{check_expr, Checked};
pub use expand::{expand, Expansion, Operand, Step};
pub use ir::*;
pub use lower::{lower, lower_physical, lower_physical_with, lower_with, LowerError, LowerOptions, MAX_PROBE_ROWS};
pub use print::{kernel_label, op_name, output_label, print_kernels, show_kexpr, show_value, to_dot};
pub use ron_io::{from_ron, to_ron, validate, LoadError};
pub use sig::{check_args, check_lengths, check_shape, dict_elem, kernel_outputs};
