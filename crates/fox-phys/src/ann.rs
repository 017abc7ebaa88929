//! The annotations the physical passes set on the operators of an RA plan. Every field
//! has a default that the translation always accepts (it means "no decision taken": the
//! general algorithm, no fusion, one round, one partition).

use fox_ra::{SortKey, TempId};

/// What the physical passes decided about one operator (one temp of the RA plan).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Node {
    /// Set by `estimate`.
    pub est: Option<Estimate>,
    /// Set by `join-selection` for joins, semi-joins, anti-joins, differences and
    /// multi-way joins, and by `fusion` for aggregations.
    pub algorithm: Algorithm,
    /// Set by `fusion` on a select whose compaction is left to the aggregation that reads
    /// its rows (through projections): that aggregation's temp.
    pub deferred_into: Option<TempId>,
    /// Set by `rounds` on multi-way joins.
    pub rounds: Rounds,
    /// Set by `partitioning`.
    pub partitioning: Partitioning,
    /// Set by `order`; `None`: nothing is known of the result's order, and keys are
    /// compared in the order the RA plan lists them.
    pub order: Option<OrderAnn>,
}

/// The order and uniqueness of a result.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Order {
    /// The rows are ordered on these keys (lexicographically).
    pub sorted: Vec<SortKey>,
    /// String keys of `sorted` are ordered by string value rather than by dictionary
    /// code.
    pub ranked: bool,
    /// No row occurs twice.
    pub unique: bool,
}

/// What `order` decided for one operator.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OrderAnn {
    /// The order of the operator's result.
    pub provides: Order,
    /// For joins, semi-joins, anti-joins, differences and aggregations: the order in
    /// which their key pairs (group columns) are compared, a permutation of their
    /// positions; empty for other operators.
    pub key_order: Vec<usize>,
}

/// Estimated size of an operator's result.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    pub rows: f64,
    /// Per output column, the estimated number of distinct values (at most `rows`).
    pub distinct: Vec<f64>,
}

/// The algorithm an operator runs with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Algorithm {
    /// The operator has a single implementation.
    #[default]
    Direct,
    /// Both sides sorted on the keys (sorts elided where an order is known), then a
    /// merge: count, scan, write (joins) or match flags (semi-joins, anti-joins,
    /// differences).
    SortMerge,
    /// Leapfrog triejoin, breadth first: a trie per input, one level per variable.
    /// `min_range`: a level whose members index one trie level with different ranges (a
    /// clique's atoms) expands each binding from its smallest range; `twins`: members
    /// that hold exactly the lead's range follow it without a search.
    Lftj { min_range: bool, twins: bool },
    /// An aggregation.
    Aggregate(AggAlgorithm),
}

/// How an aggregation runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AggAlgorithm {
    /// Sort on the group keys (elided where the input is sorted on them), then reduce by
    /// key.
    #[default]
    SortReduce,
    /// One `FusedReduce` over the unsorted input and its deferred filter, where the input
    /// is not already sorted on the group keys or carries a deferred filter; otherwise as
    /// `SortReduce`.
    Fused,
}

/// How a multi-way join's levels are split into rounds that bound the rows expanded at
/// once. Default: one round for every level.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rounds {
    /// Per variable of the join's order, whether its level runs in windowed rounds.
    pub windowed: Vec<bool>,
}

/// How an operator's result is distributed over devices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Partitioning {
    /// All rows on one device.
    #[default]
    Single,
    /// Rows hashed on these columns over `parts` devices.
    Hash { cols: Vec<usize>, parts: usize },
}
