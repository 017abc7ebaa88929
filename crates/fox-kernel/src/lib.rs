//! The kernel IR: a CFG of basic blocks holding data-parallel kernel launches over typed
//! buffer variables, lowered from the RA plan of `fox-ra`, with list scheduling, liveness
//! analysis and explicit free points; and its serialised form (versioned RON).
//!
//! This crate never touches a device.

pub mod ir;
pub use ir::*;
