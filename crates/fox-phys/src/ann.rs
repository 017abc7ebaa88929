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
    /// `min_range` allows a level whose members index one trie level with different
    /// ranges (a clique's atoms) to expand each binding from its smallest range; `twins`
    /// allows members that hold exactly the lead's range to follow it without a search.
    /// `levels`: how each level runs, one per variable of the join's order (see
    /// [`crate::levels`]), using only the refinements allowed; empty: no level plan, and
    /// the translation runs every level without a refinement.
    Lftj {
        min_range: bool,
        twins: bool,
        levels: Vec<Level>,
    },
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

/// One level of a leapfrog triejoin: how the bindings of one variable are found.
///
/// Atoms are the join's inputs that bind variables, numbered from 0 in input order (an
/// input without variables is no atom); they name the kernel buffers (`a3.lo`). Atoms
/// over the same input with the same column order share a trie, and at each level an
/// atom that is not yet fully bound holds a range of its trie's current level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Level {
    /// The atoms that bind the level's variable, ascending.
    pub members: Vec<usize>,
    /// The member whose range the level expands (unless it expands from the smallest
    /// range); the first member.
    pub lead: usize,
    pub expand: Expand,
    /// Members over the lead's trie level holding the lead's range: they take the lead's
    /// values and its child range without a search. Only with `Expand::Lead`.
    pub twins: Vec<usize>,
    /// The members that search each expanded value in their range, in groups that share
    /// one search (members over one trie level with one range), each group ascending and
    /// the groups in the order of their first member. With `Expand::Lead`: every member
    /// but the lead and its twins; with `Expand::Smallest`: every member; with
    /// `Expand::Count`: none.
    pub searches: Vec<Vec<usize>>,
    /// The state columns carried into the level: one per variable bound before it and
    /// two (a range) per atom not yet fully bound.
    pub carried: usize,
}

/// How a leapfrog triejoin level expands its bindings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expand {
    /// One row per value of the lead's range.
    Lead,
    /// One row per value of the smallest of these members' ranges (`MinRange`): members
    /// over the lead's trie level with different ranges, each the first of its search
    /// group, the lead first.
    Smallest(Vec<usize>),
    /// The last level of a counting join: only the size of the intersection of the
    /// members' ranges is computed (`IntersectCount`), nothing expands.
    Count,
}

/// How a multi-way join's levels are split into rounds that bound the rows expanded at
/// once. Default: one round for every level.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rounds {
    /// Per variable of the join's order, `Some(bytes)` where its level runs in windowed
    /// rounds: what one expanded row of the level costs, by which its windows are sized
    /// (`Kernel::Window`). Empty or `None`: one round.
    pub windows: Vec<Option<u64>>,
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
