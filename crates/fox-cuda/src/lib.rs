//! Every kernel of the kernel IR on an NVIDIA GPU: `kernels/*.cu` compiled at run time
//! with NVRTC (PTX cached on disk), generated expression kernels, one stream, the
//! device memory pool.
//!
//! The crate builds without CUDA: the driver and NVRTC are loaded when a backend is
//! opened, and [`CudaBackend::new`] reports what is missing instead of panicking.
//! [`prelude`] generates the part of `kernels/common.cuh` that must agree with the host;
//! [`testing`] holds the harness of the GPU tests.

mod backend;
pub mod codegen;
pub mod compile;
mod device;
mod k_eval;
mod k_fused;
mod k_ineq;
mod k_join;
mod k_move;
mod k_reduce;
mod k_scan;
mod k_sort;
mod k_trie;
pub mod nccl;
pub mod prelude;
pub mod testing;

pub use backend::{device_count, link_devices, CudaBackend};
pub use compile::CompileStats;
pub use k_join::{HASH_PARTITION_BYTES, HASH_SUB_TABLE_BYTES};
pub use k_move::WIDEN_PIECE_BYTES;
