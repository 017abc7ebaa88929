//! Every kernel of the kernel IR, in Rust with rayon, with the same contracts as the
//! GPU kernels (see `fox_kernel::Kernel`).
