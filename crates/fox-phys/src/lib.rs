//! The physical layer between the RA plan and the kernel plan: statistics of the data and
//! the ordered list of named passes that annotate the RA plan with physical choices before
//! the translation to kernels (`fox_kernel::lower_physical`), which follows the
//! annotations.
//!
//! A pass reads the plan and the annotations set by the passes before it and sets its own;
//! it never changes the RA plan itself, so every prefix of the pass list leaves a plan the
//! translation accepts (each annotation has a default that is always correct: no fusion,
//! no rounds, one partition). [`PASSES`] is the order; `--disable-pass NAME` leaves one out.

pub mod ann;
pub mod band;
pub mod hll;
pub mod levels;
pub mod passes;
pub mod print;
pub mod stats;

pub use ann::{
    AggAlgorithm, Algorithm, Band, BandBound, BandInner, Estimate, Expand, JoinChoice, Level, Node, Order, OrderAnn,
    Partitioning, Redistribute, Rounds, Tiering,
};
pub use hll::Hll;
pub use passes::{
    join_rounds_end, join_unique_row_bytes, join_window_row_bytes, pass_names, run, JoinRoundsEnd, Options, Pass,
    PhysError, PASSES,
};
pub use print::print_physical;
pub use stats::{ColumnStats, RelationStats, Statistics};

use fox_ra::{RaPlan, TempId};

/// An RA plan with the annotations of the physical passes: one [`Node`] per temp.
#[derive(Clone, Debug)]
pub struct PhysPlan {
    pub ra: RaPlan,
    /// Indexed by temp; every temp the plan defines has a node.
    pub nodes: Vec<Node>,
    /// Indexed by relation: how a full relation that loops merge into is kept
    /// (`None`: as one sorted relation, merged in place each time).
    pub tiers: Vec<Option<Tiering>>,
    /// The passes that ran, in order.
    pub ran: Vec<&'static str>,
    /// The join algorithm `join-selection` forces (`Options::join`).
    pub join: ann::JoinChoice,
    /// The devices the plan runs over (`Options::devices`, at least 1).
    pub devices: usize,
    /// Indexed by relation, set by `partitioning`: how each relation variable's rows are
    /// distributed over the devices (every store into it leaves them so).
    pub rel_partitioning: Vec<Partitioning>,
    /// Set by `partitioning`: statements (by block and position) whose temp moves
    /// between devices before they read it: a store into a relation distributed
    /// otherwise, or a functional check of rows not placed by their key.
    pub stmt_moves: std::collections::HashMap<(u32, usize), Redistribute>,
}

impl PhysPlan {
    /// The plan with every annotation at its default: what the translation does when
    /// every pass is disabled.
    pub fn unannotated(ra: RaPlan) -> PhysPlan {
        let nodes = ra.temps.iter().map(|_| Node::default()).collect();
        let tiers = vec![None; ra.relations.len()];
        let rel_partitioning = vec![Partitioning::Single; ra.relations.len()];
        PhysPlan {
            ra,
            nodes,
            tiers,
            ran: Vec::new(),
            join: ann::JoinChoice::Auto,
            devices: 1,
            rel_partitioning,
            stmt_moves: std::collections::HashMap::new(),
        }
    }

    pub fn node(&self, t: TempId) -> &Node {
        &self.nodes[t.0 as usize]
    }

    pub fn node_mut(&mut self, t: TempId) -> &mut Node {
        &mut self.nodes[t.0 as usize]
    }
}
