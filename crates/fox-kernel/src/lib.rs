//! The kernel IR: a CFG of basic blocks holding data-parallel kernel launches over typed
//! buffer variables, lowered from the RA plan of `fox-ra`, with list scheduling, liveness
//! analysis and explicit free points; and its serialised form (versioned RON).
//!
//! * [`ir`]: the plan ([`KernelPlan`]) and the kernel vocabulary with its contracts.
//! * [`lower()`]: RA plan → kernel plan (lowering, scheduling, liveness, frees).
//! * [`print_kernels`] / [`to_dot`]: the readable text and the graphviz drawing.
//! * [`to_ron`] / [`from_ron`] / [`validate`]: the plan file and its consistency check.
//! * [`kernel_outputs`]: the element types each kernel takes and produces.
//!
//! This crate never touches a device.

mod bitset;
pub mod ir;
mod live;
mod lower;
mod print;
mod ron_io;
mod sched;
mod sig;

pub use ir::*;
pub use lower::{lower, lower_physical, lower_with, LowerError};
pub use print::{kernel_label, op_name, output_label, print_kernels, to_dot};
pub use ron_io::{from_ron, to_ron, validate, LoadError};
pub use sig::{dict_elem, kernel_outputs};
