//! Every kernel of the kernel IR on an NVIDIA GPU: `kernels/*.cu` compiled at run time
//! with NVRTC, generated expression kernels, streams, events and a memory pool.
//!
//! Not implemented yet: this crate is a reserved slot in the workspace layout
//! (see docs/architecture.md). Nothing depends on it.
