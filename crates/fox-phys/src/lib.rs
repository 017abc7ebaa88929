//! The physical layer between the RA plan and the kernel plan: statistics of the data and
//! the ordered list of named passes that annotate the RA plan with every physical choice
//! (order, join algorithm, rounds, partitioning, fusion) before the translation to kernels,
//! which decides nothing.

pub mod hll;
pub mod stats;

pub use hll::Hll;
pub use stats::{ColumnStats, RelationStats, Statistics};
