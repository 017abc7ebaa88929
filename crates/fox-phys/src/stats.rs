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

/// The columns of each input relation of `ra` that the plan may read, in the order of
/// `ra.relations`: a column counts as read unless every use of every scan of the relation
/// is a projection that leaves it out. Key columns always count (the loader checks the
/// key), and so does the first column of a relation none of whose columns is read, so
/// that the rows of every input are known.
pub fn input_columns_read(ra: &fox_ra::RaPlan) -> Vec<(fox_ra::RelId, Vec<bool>)> {
    use fox_ra::{Op, RelKind, Stmt, TempId};
    use std::collections::HashMap;
    let mut read: Vec<Vec<bool>> = ra.relations.iter().map(|r| vec![false; r.columns.len()]).collect();
    let is_input = |r: usize| matches!(ra.relations.get(r).map(|r| &r.kind), Some(RelKind::Input { .. }));
    fn all(read: &mut [Vec<bool>], r: usize) {
        if let Some(cols) = read.get_mut(r) {
            cols.iter_mut().for_each(|c| *c = true);
        }
    }
    let mut scan_of: HashMap<TempId, usize> = HashMap::new();
    for b in &ra.blocks {
        for s in &b.stmts {
            if let Stmt::Let {
                dst, op: Op::Scan(r), ..
            } = s
            {
                if is_input(r.0 as usize) {
                    scan_of.insert(*dst, r.0 as usize);
                }
            }
        }
    }
    for b in &ra.blocks {
        for s in &b.stmts {
            match s {
                Stmt::Let { op, .. } => {
                    for t in op.inputs() {
                        let Some(&r) = scan_of.get(&t) else { continue };
                        match op {
                            Op::Project { cols, .. } if !cols.is_empty() => {
                                for &c in cols {
                                    if c < read[r].len() {
                                        read[r][c] = true;
                                    } else {
                                        all(&mut read, r);
                                    }
                                }
                            }
                            _ => all(&mut read, r),
                        }
                    }
                }
                Stmt::Store { src, .. } | Stmt::Output { src, .. } | Stmt::CheckFunctional { src, .. } => {
                    if let Some(&r) = scan_of.get(src) {
                        all(&mut read, r);
                    }
                }
                Stmt::Assign { src, .. } => all(&mut read, src.0 as usize),
                Stmt::Merge { from, .. } => all(&mut read, from.0 as usize),
                Stmt::Clear { .. } => {}
            }
        }
    }
    ra.relations
        .iter()
        .enumerate()
        .filter_map(|(r, rel)| {
            let RelKind::Input { key, .. } = &rel.kind else {
                return None;
            };
            let mut cols = std::mem::take(&mut read[r]);
            for &k in key {
                if let Some(x) = cols.get_mut(k) {
                    *x = true;
                }
            }
            if !cols.iter().any(|&c| c) {
                if let Some(first) = cols.first_mut() {
                    *first = true;
                }
            }
            Some((fox_ra::RelId(r as u32), cols))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn columns_read(src: &str) -> Vec<(String, Vec<bool>)> {
        let (ast, diags) = fox_syntax::parse(src);
        assert!(diags.is_empty(), "{diags:?}");
        let (core, diags) = fox_sema::check(&ast);
        let core = core.unwrap_or_else(|| panic!("{diags:?}"));
        let ra = fox_ra::plan(&core).unwrap();
        input_columns_read(&ra)
            .into_iter()
            .map(|(r, cols)| (ra.relations[r.0 as usize].name.clone(), cols))
            .collect()
    }

    #[test]
    fn the_columns_a_plan_reads() {
        let read = columns_read(
            "r(a, b, c) -> int32(a), string(b), date(c).\n.input r.\n\
             s(x, y, z) -> int32(x), int32(y), int32(z).\n.input s key (z).\n\
             u(v, w) -> int32(v), int32(w).\n.input u.\n\
             t(v) -> int32(v).\n.input t.\n\
             p(a) <- r(a, _, _).\n\
             q(x, y, z) <- s(x, y, z).\n\
             n[] = k <- agg<<k = count()>> u(_, _).\n\
             .output p.\n.output q.\n.output n.\n",
        );
        assert_eq!(
            read,
            [
                ("r".to_string(), vec![true, false, false]),
                ("s".to_string(), vec![true, true, true]),
                // Counted as a bag made a set: every column.
                ("u".to_string(), vec![true, true]),
                // Read by nothing: its first column, for its rows.
                ("t".to_string(), vec![true]),
            ]
        );
        let read = columns_read(
            "s(x, y, z) -> int32(x), int32(y), int32(z).\n.input s key (z).\n\
             p(y) <- s(_, y, _).\n.output p.\n",
        );
        assert_eq!(read, [("s".to_string(), vec![false, true, true])]);
    }
}
