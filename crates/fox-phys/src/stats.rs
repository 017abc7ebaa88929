//! Statistics of the input relations: what the physical passes know about the data.
//!
//! `foxrun` collects them from the loaded inputs; `foxc compile`, which has no data, plans
//! with [`Statistics::none`], under which every estimate falls back to the defaults below.

use std::collections::BTreeMap;

use fox_sema::core::Value;
use serde::{Deserialize, Serialize};

/// The rows assumed for an input relation without statistics.
pub const DEFAULT_ROWS: f64 = 1_000_000.0;

/// What is known about one column of an input relation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ColumnStats {
    /// An estimate of the number of distinct values (exact when the column has few).
    pub distinct: u64,
    /// The least and greatest values, by value (strings by string order); `None` for an
    /// empty relation.
    pub min: Option<Value>,
    pub max: Option<Value>,
    /// The rows are in ascending order of this column, by value, as loaded.
    pub sorted: bool,
}

/// What is known about one input relation: its row count and per-column statistics (one
/// entry per declared column, in declaration order; `None` for a column that was not
/// loaded, because nothing in the plan reads it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RelationStats {
    pub rows: u64,
    pub columns: Vec<Option<ColumnStats>>,
    /// The rows, as loaded, ascend on all their columns taken together (in declaration
    /// order, compared by value), every column loaded and of a type whose codes order as
    /// its values (not strings, nor floats).
    #[serde(default)]
    pub rows_sorted: bool,
    /// And strictly: no two rows are equal.
    #[serde(default)]
    pub rows_distinct: bool,
}

impl RelationStats {
    /// The statistics of column `c`, when it was loaded.
    pub fn column(&self, c: usize) -> Option<&ColumnStats> {
        self.columns.get(c).and_then(Option::as_ref)
    }
}

/// Statistics of the input relations, by predicate name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Statistics {
    relations: BTreeMap<String, RelationStats>,
}

impl Statistics {
    /// No statistics: every estimate takes its default.
    pub fn none() -> Statistics {
        Statistics::default()
    }

    pub fn insert(&mut self, relation: impl Into<String>, stats: RelationStats) {
        self.relations.insert(relation.into(), stats);
    }

    pub fn get(&self, relation: &str) -> Option<&RelationStats> {
        self.relations.get(relation)
    }

    /// The estimated rows of an input relation: its count when known, else [`DEFAULT_ROWS`].
    pub fn rows(&self, relation: &str) -> f64 {
        self.get(relation).map_or(DEFAULT_ROWS, |r| r.rows as f64)
    }

    /// The statistics of column `c` of an input relation, when its data was loaded.
    pub fn column(&self, relation: &str, c: usize) -> Option<&ColumnStats> {
        self.get(relation).and_then(|r| r.column(c))
    }

    pub fn is_empty(&self) -> bool {
        self.relations.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &RelationStats)> {
        self.relations.iter().map(|(k, v)| (k.as_str(), v))
    }
}
