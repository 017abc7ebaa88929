//! Loads kernel plans and interprets their CFG on a [`Backend`], owns the string
//! dictionary, loads input data (CSV/TBL), writes results, and measures time and memory.
//!
//! This crate never contains a kernel algorithm: kernels run on a backend.

pub mod backend;
pub use backend::{Backend, BackendError, DevBuf, HostCol, LaunchCtx, MemStats};
