//! The annotations the physical passes set on the operators of an RA plan. Every field
//! has a default that the translation always accepts (it means "no decision taken": the
//! general algorithm, no fusion, one round, one partition).

use fox_ra::{Side, SortKey, TempId};
use fox_sema::core::Type;

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
    /// Set by `partitioning`: the inputs (by position in `Op::inputs`) whose rows move
    /// between devices before the operator reads them. Positions holding the same temp
    /// with the same move share one exchange.
    pub moves: Vec<(usize, Redistribute)>,
    /// Set by `partitioning` on a multi-way join over several devices (0 otherwise): the
    /// finest cut of its work, the smallest box holding `1/boxes` of it. Every input is
    /// replicated, every device computes the first variable's bindings, and the
    /// expansion of the next level (each binding weighing the rows it expands to) is cut
    /// into contiguous boxes, large ones first and down to that size last;
    /// each device takes the next box no device has taken (`fox_kernel::Kernel::Claim`)
    /// and runs the rest of the join on it until none is left (work stealing: a device
    /// with a skewed share takes fewer boxes). A counting join's partial counts are
    /// gathered to device 0 and summed. Which device takes which box depends on timing,
    /// so a listing's rows then move to the device their first variable hashes to and are
    /// sorted in the order of the variables
    /// (`passes::boxed_listing_placement`): what each device holds after the join, in
    /// which order, does not depend on timing.
    pub boxes: u32,
    /// Set by `partitioning` on an aggregation over several devices whose aggregates
    /// combine exactly (count, integer or decimal sum, min/max of non-strings): each
    /// device aggregates its own rows, the partial rows move so (`Hash` on the group
    /// columns, or `Gather` without groups), and are aggregated once more (counts
    /// summed). Its input then moves nowhere.
    pub partial: Option<Redistribute>,
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

/// The rules of order, shared by the `order` pass (which records what each result has)
/// and the translation (which sorts only where a result lacks what an algorithm needs).
/// `types` are the result's column types: strings sort by dictionary code unless
/// `ranked`.
impl Order {
    /// Nothing known.
    pub fn unordered() -> Order {
        Order::default()
    }

    /// The prefix of `sorted` that holds in code order (what merge-based kernels need).
    pub fn code_sorted(&self, types: &[Type]) -> &[SortKey] {
        let cut = if self.ranked {
            first_string(&self.sorted, types)
        } else {
            self.sorted.len()
        };
        &self.sorted[..cut]
    }

    /// The prefix of `sorted` that holds in value order (what `order by` means).
    pub fn value_sorted(&self, types: &[Type]) -> &[SortKey] {
        let cut = if self.ranked {
            self.sorted.len()
        } else {
            first_string(&self.sorted, types)
        };
        &self.sorted[..cut]
    }

    /// Sorted in code order on every column (in some order), so that equal rows are
    /// adjacent.
    pub fn fully_sorted(&self, types: &[Type]) -> bool {
        let s = self.code_sorted(types);
        (0..types.len()).all(|c| s.iter().any(|k| k.col == c))
    }

    /// The order after sorting in code order on `keys`: unchanged when it holds already.
    pub fn sort_code(self, keys: &[SortKey], types: &[Type]) -> Order {
        if self.code_sorted(types).starts_with(keys) {
            return self;
        }
        Order {
            sorted: keys.to_vec(),
            ranked: false,
            ..self
        }
    }

    /// The order after sorting in value order on `keys`: unchanged when it holds already.
    pub fn sort_value(self, keys: &[SortKey], types: &[Type]) -> Order {
        if self.value_sorted(types).starts_with(keys) {
            return self;
        }
        Order {
            sorted: keys.to_vec(),
            ranked: keys.iter().any(|k| types[k.col] == Type::String),
            ..self
        }
    }

    /// Whether removing duplicates on `keys` needs a sort first (on
    /// [`Order::unique_keys`]): unless the rows are sorted in code order on `keys` and
    /// on every column. A relation without columns needs none.
    pub fn needs_sort_for_unique(&self, keys: &[SortKey], types: &[Type]) -> bool {
        let adjacent = self.code_sorted(types).starts_with(keys) && self.fully_sorted(types);
        !types.is_empty() && !adjacent
    }

    /// The keys a duplicate removal sorts on: `keys`, then every other column ascending.
    pub fn unique_keys(keys: &[SortKey], arity: usize) -> Vec<SortKey> {
        let mut full = keys.to_vec();
        for c in 0..arity {
            if !full.iter().any(|k| k.col == c) {
                full.push(SortKey::asc(c));
            }
        }
        full
    }

    /// The order of the columns `cols` (in this order) of a result of `arity` columns: the
    /// prefix of the sort keys they keep, unique when they keep every column.
    pub fn project(&self, cols: &[usize], arity: usize) -> Order {
        Order {
            sorted: self.kept_prefix(|c| cols.iter().position(|&k| k == c)),
            ranked: self.ranked,
            unique: self.unique && (0..arity).all(|c| cols.contains(&c)),
        }
    }

    /// The prefix of the sort keys whose columns `at` places in another result, with
    /// their places there.
    pub fn kept_prefix(&self, at: impl Fn(usize) -> Option<usize>) -> Vec<SortKey> {
        self.sorted
            .iter()
            .map_while(|k| at(k.col).map(|col| SortKey { col, desc: k.desc }))
            .collect()
    }
}

fn first_string(keys: &[SortKey], types: &[Type]) -> usize {
    keys.iter()
        .position(|k| types[k.col] == Type::String)
        .unwrap_or(keys.len())
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
    /// A join without equal keys whose only reader is a select bounding one column of
    /// one side by expressions over the other side's columns: that side sorted on the
    /// column, a search of each row's bounds in it, and an expansion of the rows between.
    /// The join yields the pairs within the bounds (a superset of the select's rows: the
    /// select still applies its whole predicate).
    Band(Band),
    /// An equi-join, semi-join, anti-join or difference by hashing: the `build` side
    /// sorted on the keys (elided where it already is), a table over its runs of equal
    /// keys (`HashBuild`), and a probe of every row of the other side, which is never
    /// sorted (`HashProbe` and an expansion for a join, `HashMatch` and a compaction
    /// otherwise). The result has the probing side's order (a join's rows of one probing
    /// row in the build side's sorted order). Semi-joins, anti-joins and differences
    /// build on the right.
    Hash { build: Side },
    /// An equi-join, semi-join, anti-join or difference by binary search: the `indexed`
    /// side sorted on the keys (chosen where it already is), each row of the other side
    /// searching its range of equal keys there (`BoundRange` without bounds), then the
    /// expansion of a hash join. The result has the probing side's order. Semi-joins,
    /// anti-joins and differences index the right.
    IndexNestedLoop { indexed: Side },
    /// An equi-join, semi-join, anti-join or difference over unsorted sides: per left row,
    /// the right rows with equal keys by a scan of the whole right side
    /// (`NestedLoopCount` → scan → `NestedLoopWrite`); the rows come in the left's order,
    /// then the right's.
    NestedLoop,
}

/// A join algorithm forced on every equi-join (`--join`), or `Auto`: chosen by the cost
/// model of `join-selection`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum JoinChoice {
    #[default]
    Auto,
    Merge,
    Hash,
    IndexNestedLoop,
    NestedLoop,
}

impl JoinChoice {
    /// Every choice, in the order `--join` lists them.
    pub const ALL: [JoinChoice; 5] = [
        JoinChoice::Auto,
        JoinChoice::Merge,
        JoinChoice::Hash,
        JoinChoice::IndexNestedLoop,
        JoinChoice::NestedLoop,
    ];

    /// The name `--join` takes.
    pub fn name(self) -> &'static str {
        match self {
            JoinChoice::Auto => "auto",
            JoinChoice::Merge => "merge",
            JoinChoice::Hash => "hash",
            JoinChoice::IndexNestedLoop => "inl",
            JoinChoice::NestedLoop => "nl",
        }
    }

    /// The choice named `name`, if any.
    pub fn parse(name: &str) -> Option<JoinChoice> {
        JoinChoice::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// The plan of a band join (see [`Algorithm::Band`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Band {
    /// The side sorted on `col` and searched; each row of the other (probing) side finds
    /// its range there, and the join's rows come in the probing side's order.
    pub sorted: Side,
    /// The bounded column, a column of the sorted side's input.
    pub col: usize,
    /// `col ≥ bound` (`>` when open).
    pub lower: Option<BandBound>,
    /// `col ≤ bound` (`<` when open).
    pub upper: Option<BandBound>,
    /// An inequality join: a second column of the sorted side with its own bounds. The
    /// join yields the pairs within the bounds of both columns, searched in a merge-sort
    /// tree over the second column (`None`: a band join on `col` alone).
    pub inner: Option<BandInner>,
}

/// The second bounded column of an inequality join (see [`Band::inner`]): a column of the
/// sorted side other than [`Band::col`], with at least one bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BandInner {
    pub col: usize,
    /// `col ≥ bound` (`>` when open).
    pub lower: Option<BandBound>,
    /// `col ≤ bound` (`<` when open).
    pub upper: Option<BandBound>,
}

/// One bound of a band join: a column of the probing side's input (of the bounded
/// column's type) plus a constant in that type's storage unit (days for dates, units of
/// the scale for decimals).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BandBound {
    pub col: usize,
    pub offset: i64,
    /// The bound excludes equality (`<`, `>`).
    pub open: bool,
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

/// How the full relation of a recursive predicate is kept while its loop runs: besides
/// the relation itself, `levels` sorted, duplicate-free runs of the rows merged in since,
/// newest and smallest first (a log-structured merge). A loop's merge goes into the
/// first run; a run folds into the next (the last into the relation) when it holds more
/// than `1 / factor` of the next's rows, so every row is copied `O(log)` times rather than
/// once per iteration. The relation's rows are the union of the relation and its runs;
/// a difference against it subtracts each run, any other read folds the runs first, and
/// the runs fold into the relation when the loop exits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tiering {
    pub levels: usize,
    pub factor: u32,
}

/// How an operator's result (or a relation variable) is distributed over the devices of
/// a run over several (`Options::devices`). With one device every result is `Single`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Partitioning {
    /// All rows on device 0 (with one device: the whole result).
    #[default]
    Single,
    /// Each row on the device its `cols` hash to (`fox_kernel::device_of` of
    /// `fox_kernel::row_hash`), over `parts` devices: rows equal on `cols` are on one.
    Hash { cols: Vec<usize>, parts: usize },
    /// Every device holds every row.
    Replicated { parts: usize },
    /// Each row on one device, by no key (the slices of a loaded input).
    Split { parts: usize },
}

impl Partitioning {
    /// Each row is on exactly one device (the union of the devices' parts is the result).
    pub fn is_partitioned(&self) -> bool {
        !matches!(self, Partitioning::Replicated { .. })
    }
}

/// Rows moved between devices before an operator reads an input (or a statement reads
/// its temp): the runtime's exchange (`fox_kernel::Exchange`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Redistribute {
    /// Each row to the device its `cols` hash to (never without columns: `Gather`).
    Hash { cols: Vec<usize> },
    /// Every row to device 0.
    Gather,
    /// Every row to every device.
    Broadcast,
    /// A replicated input keeps on each device the rows `Hash { cols }` would send there
    /// (with no columns: device 0 keeps every row, the others none): nothing moves, and
    /// the order is kept.
    Keep { cols: Vec<usize> },
}

impl Redistribute {
    /// Whether the rows received lose their order (they come from several devices).
    pub fn reorders(&self) -> bool {
        !matches!(self, Redistribute::Keep { .. })
    }
}
