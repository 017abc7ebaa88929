//! Statistics of loaded input relations ([`fox_phys::Statistics`]): per relation its rows,
//! and per loaded column an estimate of its distinct values (a [`Hll`] sketch, exact for
//! few values), its least and greatest values by value (strings by string order, through
//! the dictionary) and whether its rows are in ascending order as loaded.
//!
//! Each column is read once, in chunks on all cores: a chunk gives its sketch, its least
//! and greatest values, its first and last values and whether it is sorted, and adjacent
//! chunks combine in order, so the result does not depend on the chunking or the number of
//! cores.

use crate::database::Database;
use crate::dict::Dictionary;
use crate::stored::{each_small, ColRef, StoredCol};
use crate::HostCol;
use fox_kernel::InputRel;
use fox_phys::{ColumnStats, Hll, RelationStats, Statistics};
use fox_sema::core::{Type, Value};
use rayon::prelude::*;

/// The rows of a column one task reads.
const CHUNK: usize = 1 << 17;

/// What a run of rows holds: its least, greatest, first and last values (by key), whether
/// it is in ascending order, and its sketch.
struct Part<T> {
    min: T,
    max: T,
    first: T,
    last: T,
    sorted: bool,
    sketch: Hll,
}

/// A column's least and greatest values, whether it is sorted, and its distinct values;
/// `None` for no rows.
struct Summary<T> {
    min: T,
    max: T,
    sorted: bool,
    distinct: u64,
}

/// The summary of `values` read in chunks of `chunk` rows: `key` orders the values (equal
/// keys are equal values) and `bits` gives the word the sketch hashes (equal exactly when
/// the values are equal).
fn summarize<T, K>(
    values: &[T],
    chunk: usize,
    key: impl Fn(T) -> K + Sync,
    bits: impl Fn(T) -> u64 + Sync,
) -> Option<Summary<T>>
where
    T: Copy + Send + Sync,
    K: Ord + Copy,
{
    let part = |c: &[T]| -> Option<Part<T>> {
        let (&first, rest) = c.split_first()?;
        let mut sketch = Hll::new();
        sketch.insert(bits(first));
        let (mut min, mut max, mut sorted) = (first, first, true);
        let mut kp = key(first);
        let (mut kmin, mut kmax) = (kp, kp);
        for &x in rest {
            let kx = key(x);
            if kx != kp {
                sketch.insert(bits(x));
                sorted &= kp < kx;
                if kx < kmin {
                    (min, kmin) = (x, kx);
                } else if kx > kmax {
                    (max, kmax) = (x, kx);
                }
                kp = kx;
            }
        }
        Some(Part {
            min,
            max,
            first,
            last: c[c.len() - 1],
            sorted,
            sketch,
        })
    };
    summarize_parts(values, chunk, &key, part)
}

/// The summary of `values` from the parts `part` makes of its chunks of `chunk` rows,
/// joined in row order (`key` orders the values, as in [`summarize`]).
fn summarize_parts<T, K>(
    values: &[T],
    chunk: usize,
    key: impl Fn(T) -> K + Sync,
    part: impl Fn(&[T]) -> Option<Part<T>> + Sync + Send,
) -> Option<Summary<T>>
where
    T: Copy + Send + Sync,
    K: Ord + Copy,
{
    let join = |a: Option<Part<T>>, b: Option<Part<T>>| match (a, b) {
        (Some(mut a), Some(b)) => {
            a.sketch.merge(&b.sketch);
            Some(Part {
                min: if key(b.min) < key(a.min) { b.min } else { a.min },
                max: if key(b.max) > key(a.max) { b.max } else { a.max },
                sorted: a.sorted && b.sorted && key(a.last) <= key(b.first),
                first: a.first,
                last: b.last,
                sketch: a.sketch,
            })
        }
        (a, None) => a,
        (None, b) => b,
    };
    // Rayon's reduce joins adjacent results, left before right, so the order of the
    // chunks is kept.
    let all = values.par_chunks(chunk.max(1)).map(part).reduce(|| None, join)?;
    Some(Summary {
        min: all.min,
        max: all.max,
        sorted: all.sorted,
        distinct: all.sketch.estimate(),
    })
}

/// [`summarize`] of values ordered by themselves (integers): the same summary, each
/// chunk read by plain loops (least, greatest, ascending) and its sketch fed every value
/// (a sketch is the same whatever the repeats and the order of its values).
fn summarize_ordered<T>(values: &[T], chunk: usize, bits: impl Fn(T) -> u64 + Sync) -> Option<Summary<T>>
where
    T: Copy + Ord + Send + Sync,
{
    let part = |c: &[T]| -> Option<Part<T>> {
        let (&first, &last) = (c.first()?, c.last()?);
        let mut sketch = Hll::new();
        sketch.extend(c.iter().map(|&x| bits(x)));
        Some(Part {
            min: c.iter().copied().min()?,
            max: c.iter().copied().max()?,
            first,
            last,
            sorted: c.windows(2).all(|w| w[0] <= w[1]),
            sketch,
        })
    };
    summarize_parts(values, chunk, |x| x, part)
}

/// The statistics of integer `values` with `to_value` giving a value's [`Value`] (see
/// [`summarize_ordered`]).
fn stats_of_ordered<T>(values: &[T], bits: impl Fn(T) -> u64 + Sync, to_value: impl Fn(T) -> Value) -> ColumnStats
where
    T: Copy + Ord + Send + Sync,
{
    column_of(summarize_ordered(values, CHUNK, bits), to_value)
}

/// The column statistics of a summary (`None` for no rows).
fn column_of<T>(summary: Option<Summary<T>>, to_value: impl Fn(T) -> Value) -> ColumnStats {
    match summary {
        Some(s) => ColumnStats {
            distinct: s.distinct,
            min: Some(to_value(s.min)),
            max: Some(to_value(s.max)),
            sorted: s.sorted,
        },
        None => ColumnStats {
            distinct: 0,
            min: None,
            max: None,
            sorted: true,
        },
    }
}

/// The statistics of `values` with `to_value` giving a value's [`Value`].
fn stats_of<T, K>(
    values: &[T],
    key: impl Fn(T) -> K + Sync,
    bits: impl Fn(T) -> u64 + Sync,
    to_value: impl Fn(T) -> Value,
) -> ColumnStats
where
    T: Copy + Send + Sync,
    K: Ord + Copy,
{
    column_of(summarize(values, CHUNK, key, bits), to_value)
}

/// A float's place in the order of values: IEEE total order with `-0.0` taken as `0.0`
/// (they are the same value), so NaNs come after every number.
fn float_key(x: f64) -> i64 {
    let b = float_bits(x) as i64;
    b ^ ((((b >> 63) as u64) >> 1) as i64)
}

/// The bits a float's value is sketched by: `-0.0` as `0.0`, every NaN as one.
fn float_bits(x: f64) -> u64 {
    if x.is_nan() {
        f64::NAN.to_bits()
    } else {
        (x + 0.0).to_bits()
    }
}

/// The statistics of a column of type `ty` held as `col` (strings as codes of `dict`;
/// `rank`, when given, orders codes when the dictionary's codes are not in string order).
/// `None` when the column's elements are not those of its type.
pub fn column_stats(col: &HostCol, ty: Type, dict: &Dictionary, rank: Option<&[u32]>) -> Option<ColumnStats> {
    Some(match (col, ty) {
        (HostCol::I32(v), Type::Int32) => stats_of_ordered(v, |x| x as u32 as u64, Value::Int32),
        (HostCol::I32(v), Type::Date) => stats_of_ordered(v, |x| x as u32 as u64, Value::Date),
        (HostCol::I64(v), Type::Int64) => stats_of_ordered(v, |x| x as u64, Value::Int64),
        (HostCol::I64(v), Type::Decimal(scale)) => stats_of_ordered(
            v,
            |x| x as u64,
            |x| Value::Decimal {
                unscaled: i128::from(x),
                scale,
            },
        ),
        (HostCol::I128(v), Type::WideDecimal(scale)) => {
            stats_of_ordered(v, fold128, |x| Value::Decimal { unscaled: x, scale })
        }
        (HostCol::F64(v), Type::Float64) => stats_of(v, float_key, float_bits, Value::Float64),
        (HostCol::U8(v), Type::Bool) => stats_of(v, |x| x != 0, |x| u64::from(x != 0), |x| Value::Bool(x != 0)),
        (HostCol::U32(v), Type::String) => {
            let text = |c: u32| Value::String(dict.get(c).unwrap_or_default().to_string());
            match rank {
                Some(rank) => stats_of(
                    v,
                    |c| rank.get(c as usize).copied().unwrap_or(u32::MAX),
                    u64::from,
                    text,
                ),
                None => stats_of(v, |c| c, u64::from, text),
            }
        }
        _ => return None,
    })
}

/// [`column_stats`] of a packed database column read where it is, without widening it:
/// the same statistics, the sketch fed the same words in the same chunks (offsets order
/// as their values, positions as their codes). `None` for a column held as it is read,
/// or whose type its packing does not know.
pub fn packed_column_stats(col: &StoredCol, ty: Type, dict: &Dictionary, rank: Option<&[u32]>) -> Option<ColumnStats> {
    Some(match col {
        StoredCol::Plain(_) => return None,
        StoredCol::Offset { base, offsets, .. } => {
            let base = *base;
            let at = move |o: u64| base.wrapping_add(o as i64);
            each_small!(offsets, v => match ty {
                Type::Int32 => stats_of_ordered(v, |o| at(o.into()) as i32 as u32 as u64, |o| Value::Int32(at(o.into()) as i32)),
                Type::Date => stats_of_ordered(v, |o| at(o.into()) as i32 as u32 as u64, |o| Value::Date(at(o.into()) as i32)),
                Type::Int64 => stats_of_ordered(v, |o| at(o.into()) as u64, |o| Value::Int64(at(o.into()))),
                Type::Decimal(scale) => stats_of_ordered(
                    v,
                    |o| at(o.into()) as u64,
                    |o| Value::Decimal {
                        unscaled: i128::from(at(o.into())),
                        scale,
                    },
                ),
                _ => return None,
            })
        }
        StoredCol::Codes { codes, at } => {
            if ty != Type::String {
                return None;
            }
            let code = |p: usize| codes[p];
            let text = |c: u32| Value::String(dict.get(c).unwrap_or_default().to_string());
            each_small!(at, v => match rank {
                Some(rank) => stats_of(
                    v,
                    |p| rank.get(code(p as usize) as usize).copied().unwrap_or(u32::MAX),
                    |p| u64::from(code(p as usize)),
                    |p| text(code(p as usize)),
                ),
                None => stats_of(v, |p| code(p as usize), |p| u64::from(code(p as usize)), |p| text(code(p as usize))),
            })
        }
    })
}

/// A 128-bit value as one word for the sketch: equal values give equal words; values
/// that fit in 64 bits (every decimal of an input) give distinct words.
fn fold128(x: i128) -> u64 {
    let (lo, hi) = (x as u64, (x >> 64) as u64);
    if (lo as i64 as i128) == x {
        lo
    } else {
        fox_phys::hll::hash64(hi) ^ lo.rotate_left(17)
    }
}

/// The statistics of a relation of `rows` rows declared as `input`, whose column `c` is
/// `cols[c]` when it was loaded.
fn relation_stats(
    input: &InputRel,
    cols: &[Option<ColRef>],
    rows: usize,
    dict: &Dictionary,
    rank: Option<&[u32]>,
) -> RelationStats {
    // Every column read where it is held, packed ones too (`None`, as for a column held
    // as it is, when its elements are not those of its type).
    let columns: Vec<Option<ColumnStats>> = input
        .columns
        .par_iter()
        .zip(cols.par_iter())
        .map(|(col, h)| match (h.and_then(|h| h.plain()), h) {
            (Some(p), _) => column_stats(p, col.ty, dict, rank),
            (None, Some(ColRef::Stored(s))) => packed_column_stats(s, col.ty, dict, rank),
            (None, _) => None,
        })
        .collect();
    let (rows_sorted, rows_distinct) = rows_order(input, cols, rows);
    RelationStats {
        rows: rows as u64,
        columns,
        rows_sorted,
        rows_distinct,
    }
}

/// A column's rows as keys ordered as its values: integers, dates and decimals as held,
/// or a packed column's offsets (ascending with the values).
enum OrderKeys<'a> {
    I32(&'a [i32]),
    I64(&'a [i64]),
    I128(&'a [i128]),
    U8(&'a [u8]),
    U16(&'a [u16]),
    U32(&'a [u32]),
}

impl OrderKeys<'_> {
    /// `None` for a column whose codes do not order as its values (strings, floats).
    fn of<'a>(col: &ColRef<'a>, ty: Type) -> Option<OrderKeys<'a>> {
        if matches!(ty, Type::String | Type::Float64) {
            return None;
        }
        let plain = |h: &'a HostCol| match h {
            HostCol::I32(v) => Some(OrderKeys::I32(v)),
            HostCol::I64(v) => Some(OrderKeys::I64(v)),
            HostCol::I128(v) => Some(OrderKeys::I128(v)),
            _ => None,
        };
        match *col {
            ColRef::Host(h) => plain(h),
            ColRef::Stored(StoredCol::Plain(h)) => plain(h),
            ColRef::Stored(StoredCol::Offset { offsets, .. }) => Some(match offsets {
                crate::stored::Small::U8(v) => OrderKeys::U8(v),
                crate::stored::Small::U16(v) => OrderKeys::U16(v),
                crate::stored::Small::U32(v) => OrderKeys::U32(v),
            }),
            ColRef::Stored(StoredCol::Codes { .. }) => None,
        }
    }

    fn len(&self) -> usize {
        match self {
            OrderKeys::I32(v) => v.len(),
            OrderKeys::I64(v) => v.len(),
            OrderKeys::I128(v) => v.len(),
            OrderKeys::U8(v) => v.len(),
            OrderKeys::U16(v) => v.len(),
            OrderKeys::U32(v) => v.len(),
        }
    }

    /// How row `i` compares with row `j`.
    fn cmp(&self, i: usize, j: usize) -> std::cmp::Ordering {
        match self {
            OrderKeys::I32(v) => v[i].cmp(&v[j]),
            OrderKeys::I64(v) => v[i].cmp(&v[j]),
            OrderKeys::I128(v) => v[i].cmp(&v[j]),
            OrderKeys::U8(v) => v[i].cmp(&v[j]),
            OrderKeys::U16(v) => v[i].cmp(&v[j]),
            OrderKeys::U32(v) => v[i].cmp(&v[j]),
        }
    }
}

/// Whether the `rows` rows of a relation declared as `input` (its columns `cols`) ascend
/// on all their columns together, and whether strictly (see
/// [`RelationStats::rows_sorted`]): read in chunks on every core, each pair of
/// neighbouring rows compared column by column until one differs, stopping at the first
/// pair that descends.
fn rows_order(input: &InputRel, cols: &[Option<ColRef>], rows: usize) -> (bool, bool) {
    let keys: Option<Vec<OrderKeys>> = input
        .columns
        .iter()
        .zip(cols)
        .map(|(c, col)| col.as_ref().and_then(|col| OrderKeys::of(col, c.ty)))
        .collect();
    let Some(keys) = keys.filter(|k| !k.is_empty() && k.iter().all(|k| k.len() == rows)) else {
        return (false, false);
    };
    let pair = |i: usize| {
        keys.iter()
            .map(|k| k.cmp(i - 1, i))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    };
    let all = |want: fn(std::cmp::Ordering) -> bool| {
        (1..rows.max(1))
            .into_par_iter()
            .with_min_len(CHUNK)
            .all(|i| want(pair(i)))
    };
    let sorted = all(|o| o.is_le());
    (sorted, sorted && all(|o| o.is_lt()))
}

/// The statistics of every table of a loaded database.
pub fn of_database(db: &Database) -> Statistics {
    of_tables_where(db, |_| true)
}

/// The statistics of the tables `names` of a loaded database (those it holds).
pub fn of_tables(db: &Database, names: &[&str]) -> Statistics {
    of_tables_where(db, |n| names.contains(&n))
}

fn of_tables_where(db: &Database, wanted: impl Fn(&str) -> bool) -> Statistics {
    let dict = db.dictionary();
    let has_strings = db
        .tables()
        .filter(|t| wanted(&t.input.name))
        .any(|t| t.input.columns.iter().any(|c| c.ty == Type::String));
    // Codes appended after the dictionary was built are ordered by its rank table; when
    // memory for it runs out, string columns get no statistics.
    let rank = if dict.is_ordered() || !has_strings {
        Ok(None)
    } else {
        dict.rank().map(Some)
    };
    let mut stats = Statistics::none();
    for t in db.tables().filter(|t| wanted(&t.input.name)) {
        let cols: Vec<Option<ColRef>> = (0..t.input.columns.len())
            .map(|c| {
                Database::column(t, c)
                    .filter(|_| rank.is_ok() || t.input.columns[c].ty != Type::String)
                    .map(ColRef::Stored)
            })
            .collect();
        let order = rank.as_ref().ok().and_then(|r| r.as_deref());
        stats.insert(
            t.input.name.clone(),
            relation_stats(&t.input, &cols, t.rows, dict, order),
        );
    }
    stats
}

/// The statistics of relations loaded from files, with strings coded by `dict` in string
/// order (see [`crate::LoadedInputs`]).
pub(crate) fn of_relations<'a>(
    relations: impl Iterator<Item = (&'a InputRel, Vec<Option<&'a HostCol>>, usize)>,
    dict: &Dictionary,
) -> Statistics {
    let mut stats = Statistics::none();
    for (input, cols, rows) in relations {
        let cols: Vec<Option<ColRef>> = cols.into_iter().map(|c| c.map(ColRef::Host)).collect();
        stats.insert(input.name.clone(), relation_stats(input, &cols, rows, dict, None));
    }
    stats
}

/// The longest value text the table of statistics shows whole.
const SHOWN: usize = 32;

/// A value for the table of statistics: strings quoted (and cut when long), dates as
/// `YYYY-MM-DD`, decimals with their scale.
fn shown(v: &Value, ty: Type) -> String {
    match v {
        Value::String(s) => {
            let cut: String = s.chars().take(SHOWN).collect();
            if cut.len() < s.len() {
                format!("{cut:?}…")
            } else {
                format!("{s:?}")
            }
        }
        v => crate::output::format_value(v, ty),
    }
}

/// The statistics of `inputs` as text, one table per input relation in the order given:
/// a line `NAME: N rows`, then one line per declared column with its type, distinct
/// values, least and greatest values and whether it is sorted (`not read` for a column
/// that was not loaded, because the program does not read it).
pub fn format_statistics(stats: &Statistics, inputs: &[InputRel]) -> String {
    let mut out = String::new();
    for (k, input) in inputs.iter().enumerate() {
        if k > 0 {
            out.push('\n');
        }
        let Some(r) = stats.get(&input.name) else {
            out.push_str(&format!("{}: no statistics\n", input.name));
            continue;
        };
        let together = match (r.rows_sorted, r.rows_distinct) {
            (true, true) => " (ascending on all columns together, no two equal)",
            (true, false) => " (ascending on all columns together)",
            _ => "",
        };
        out.push_str(&format!("{}: {}{together}\n", input.name, crate::plural(r.rows, "row")));
        let mut rows: Vec<[String; 6]> = vec![[
            "column".into(),
            "type".into(),
            "distinct".into(),
            "min".into(),
            "max".into(),
            "sorted".into(),
        ]];
        for (c, col) in input.columns.iter().enumerate() {
            let dash = || "-".to_string();
            rows.push(match r.column(c) {
                Some(s) => [
                    col.name.clone(),
                    col.ty.to_string(),
                    s.distinct.to_string(),
                    s.min.as_ref().map_or_else(dash, |v| shown(v, col.ty)),
                    s.max.as_ref().map_or_else(dash, |v| shown(v, col.ty)),
                    if s.sorted { "yes" } else { "no" }.into(),
                ],
                None => [
                    col.name.clone(),
                    col.ty.to_string(),
                    "not read".into(),
                    dash(),
                    dash(),
                    dash(),
                ],
            });
        }
        let width = |i: usize| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0);
        let w: Vec<usize> = (0..6).map(width).collect();
        for row in &rows {
            let line = format!(
                "  {:<w0$}  {:<w1$}  {:>w2$}  {:<w3$}  {:<w4$}  {}",
                row[0],
                row[1],
                row[2],
                row[3],
                row[4],
                row[5],
                w0 = w[0],
                w1 = w[1],
                w2 = w[2],
                w3 = w[3],
                w4 = w[4],
            );
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// A small seeded generator (xorshift), so the tests need no dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A packed column's statistics, read where it is, are those of the column it packs:
    /// the same distinct estimate (the same words sketched in the same chunks), least and
    /// greatest values and order, for int32, dates, int64, decimals and strings (with and
    /// without a rank table), sorted, unsorted, all equal, over several chunks.
    #[test]
    fn packed_columns_have_the_statistics_of_the_columns_they_pack() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut dict = Dictionary::default();
        let codes: Vec<u32> = (0..300)
            .map(|k| dict.intern(&format!("s{:04}", 7 * k % 1000)).unwrap())
            .collect();
        let rank: Vec<u32> = (0..codes.len() as u32).rev().collect();
        let mut packed = 0;
        for n in [1usize, 1000, CHUNK + 17, 3 * CHUNK] {
            for span in [1u64, 200, 60_000, 3_000_000_000] {
                let mut v: Vec<i64> = (0..n).map(|_| rng.below(span) as i64 - 7).collect();
                if span == 200 {
                    v.sort_unstable();
                }
                let cols = [
                    (
                        HostCol::I64(v.iter().map(|&x| x * 3 + (1 << 40)).collect()),
                        Type::Int64,
                    ),
                    (HostCol::I64(v.iter().map(|&x| -x).collect()), Type::Decimal(2)),
                    (
                        HostCol::I32(v.iter().map(|&x| (x % 65_000) as i32).collect()),
                        Type::Date,
                    ),
                    (
                        HostCol::I32(v.iter().map(|&x| (x % 100_000) as i32 - 50).collect()),
                        Type::Int32,
                    ),
                ];
                for (col, ty) in cols {
                    let s = StoredCol::pack(col.clone(), None);
                    packed += usize::from(s.plain().is_none());
                    let want = column_stats(&col, ty, &dict, None);
                    let got = packed_column_stats(&s, ty, &dict, None)
                        .or_else(|| s.plain().and_then(|p| column_stats(p, ty, &dict, None)));
                    assert_eq!(got, want, "{ty:?}, {n} rows, span {span}");
                }
                let strings: Vec<u32> = v.iter().map(|&x| codes[x.rem_euclid(300) as usize]).collect();
                let mut distinct = strings.clone();
                distinct.sort_unstable();
                distinct.dedup();
                let col = HostCol::U32(strings);
                let s = StoredCol::pack(col.clone(), Some(&std::sync::Arc::new(distinct)));
                assert!(s.plain().is_none());
                for r in [None, Some(&rank[..])] {
                    let want = column_stats(&col, Type::String, &dict, r);
                    assert_eq!(
                        packed_column_stats(&s, Type::String, &dict, r),
                        want,
                        "strings, {n} rows, span {span}"
                    );
                }
            }
        }
        assert!(packed > 40, "{packed} columns packed");
    }

    /// The statistics of `v` computed the plain way.
    fn exact<T: Copy + Ord>(v: &[T]) -> (usize, Option<T>, Option<T>, bool) {
        let set: BTreeSet<T> = v.iter().copied().collect();
        (
            set.len(),
            v.iter().copied().min(),
            v.iter().copied().max(),
            v.windows(2).all(|w| w[0] <= w[1]),
        )
    }

    /// Checks `summarize` against the plain computation in chunks of several sizes.
    fn check_ints(v: &[i64]) {
        let chunks: &[usize] = if v.len() < 100 {
            &[1, 2, 3, 7, CHUNK]
        } else {
            &[64, 997, CHUNK]
        };
        let (n, min, max, sorted) = exact(v);
        for &chunk in chunks {
            let s = summarize(v, chunk, |x| x, |x| x as u64);
            let ordered = summarize_ordered(v, chunk, |x| x as u64);
            assert_eq!(
                s.as_ref().map(|s| (s.min, s.max, s.sorted, s.distinct)),
                ordered.map(|s| (s.min, s.max, s.sorted, s.distinct)),
                "{v:?} in chunks of {chunk}"
            );
            match &s {
                None => assert!(v.is_empty()),
                Some(s) => {
                    assert_eq!(
                        (Some(s.min), Some(s.max), s.sorted),
                        (min, max, sorted),
                        "{v:?} in chunks of {chunk}"
                    );
                    if n <= fox_phys::hll::EXACT_LIMIT {
                        assert_eq!(s.distinct, n as u64, "{chunk}");
                    } else {
                        let e = (s.distinct as f64 - n as f64).abs() / n as f64;
                        assert!(e <= 0.03, "{} against {n}", s.distinct);
                    }
                }
            }
        }
    }

    #[test]
    fn small_columns_against_exact_statistics() {
        check_ints(&[]);
        check_ints(&[-5]);
        check_ints(&[7; 100]);
        check_ints(&[1, 2, 2, 3, 10, 10, 11]);
        check_ints(&[3, 2, 1]);
        check_ints(&[1, 2, 3, 2, 5]);
        check_ints(&[i64::MIN, -1, 0, i64::MAX]);
        let mut rng = Rng(0x9e37_79b9);
        for round in 0..200 {
            let len = rng.below(60) as usize;
            let range = 1 + rng.below(if round % 2 == 0 { 10 } else { 1000 });
            let mut v: Vec<i64> = (0..len).map(|_| rng.below(range) as i64 - (range / 2) as i64).collect();
            check_ints(&v);
            v.sort();
            check_ints(&v);
        }
        // Past the exact count, sorted and not.
        let mut v: Vec<i64> = (0..20_000).map(|_| rng.below(5_000) as i64 - 2_500).collect();
        check_ints(&v);
        v.sort();
        check_ints(&v);
        // Skewed: nine rows in ten one value, the others spread over a wide range.
        let mut v: Vec<i64> = (0..30_000)
            .map(|_| if rng.below(10) == 0 { rng.next() as i64 } else { 42 })
            .collect();
        check_ints(&v);
        v.sort();
        check_ints(&v);
        v.reverse();
        check_ints(&v);
    }

    /// Rows ascending on all their columns together are seen so (strictly when no two
    /// are equal) whether their columns are held as they are or packed, across the chunks
    /// the rows are read in; a descending pair anywhere, a string or float column, or a
    /// column not loaded says nothing.
    #[test]
    fn rows_ascending_together_are_seen_sorted_and_distinct() {
        let input = |tys: &[Type]| InputRel {
            name: "r".into(),
            columns: tys.iter().map(|&t| col("c", t)).collect(),
            file: String::new(),
            sep: ",".into(),
            key: Vec::new(),
            header: false,
        };
        let n = 3 * CHUNK + 17;
        // (x, y): x = i / 4 ascending, y cycling within each x, so y alone does not ascend.
        let x: Vec<i64> = (0..n as i64).map(|i| 1_000_000 + i / 4).collect();
        let y: Vec<i32> = (0..n as i32).map(|i| 7 * (i % 4)).collect();
        let order = |x: &[i64], y: &[i32], packed: bool| {
            let (hx, hy) = (HostCol::I64(x.to_vec()), HostCol::I32(y.to_vec()));
            let (sx, sy) = (StoredCol::pack(hx.clone(), None), StoredCol::pack(hy.clone(), None));
            let cols = if packed {
                assert!(x.len() < 2 || (sx.plain().is_none() && sy.plain().is_none()), "packed");
                vec![Some(ColRef::Stored(&sx)), Some(ColRef::Stored(&sy))]
            } else {
                vec![Some(ColRef::Host(&hx)), Some(ColRef::Host(&hy))]
            };
            rows_order(&input(&[Type::Int64, Type::Int32]), &cols, x.len())
        };
        for packed in [false, true] {
            assert_eq!(order(&x, &y, packed), (true, true), "packed {packed}");
            // A repeated row, in the last chunk.
            let (mut x2, mut y2) = (x.clone(), y.clone());
            x2[n - 1] = x2[n - 2];
            y2[n - 1] = y2[n - 2];
            assert_eq!(order(&x2, &y2, packed), (true, false), "packed {packed}");
            // A pair that descends on the second column only, in the second chunk.
            let mut y3 = y.clone();
            y3.swap(CHUNK + 1, CHUNK + 2);
            assert_eq!(order(&x, &y3, packed), (false, false), "packed {packed}");
            // One row, and no rows.
            assert_eq!(order(&x[..1], &y[..1], packed), (true, true));
            assert_eq!(order(&[], &[], packed), (true, true));
        }
        let h = HostCol::I64(x.clone());
        let f = HostCol::F64((0..n).map(|i| i as f64).collect());
        assert_eq!(
            rows_order(
                &input(&[Type::Int64, Type::Float64]),
                &[Some(ColRef::Host(&h)), Some(ColRef::Host(&f))],
                n
            ),
            (false, false),
            "a float column"
        );
        assert_eq!(
            rows_order(&input(&[Type::Int64, Type::Int64]), &[Some(ColRef::Host(&h)), None], n),
            (false, false),
            "a column not loaded"
        );
    }

    fn col(name: &str, ty: Type) -> fox_sema::core::Column {
        fox_sema::core::Column { name: name.into(), ty }
    }

    #[test]
    fn every_type_by_value() {
        let dict = Dictionary::from_strings(["apple", "banana", "cherry"].map(String::from));
        let none = Dictionary::default();
        let s = column_stats(&HostCol::U32(vec![2, 0, 2, 1]), Type::String, &dict, None).unwrap();
        assert_eq!(s.min, Some(Value::String("apple".into())));
        assert_eq!(s.max, Some(Value::String("cherry".into())));
        assert_eq!((s.distinct, s.sorted), (3, false));
        // Codes out of string order: the rank table orders them.
        let mut appended = dict.clone();
        appended.intern("aardvark").unwrap();
        let rank = appended.rank().unwrap();
        let s = column_stats(&HostCol::U32(vec![3, 0, 1]), Type::String, &appended, Some(&rank)).unwrap();
        assert_eq!(s.min, Some(Value::String("aardvark".into())));
        assert_eq!(s.max, Some(Value::String("banana".into())));
        assert!(s.sorted);
        let s = column_stats(&HostCol::I32(vec![-3, 10957, 0]), Type::Date, &none, None).unwrap();
        assert_eq!((s.min, s.max), (Some(Value::Date(-3)), Some(Value::Date(10957))));
        let s = column_stats(&HostCol::I64(vec![-125, 5, 5]), Type::Decimal(2), &none, None).unwrap();
        let dec = |unscaled| Some(Value::Decimal { unscaled, scale: 2 });
        assert_eq!((s.min, s.max, s.distinct, s.sorted), (dec(-125), dec(5), 2, true));
        let s = column_stats(
            &HostCol::F64(vec![0.0, -0.0, 1.5, f64::NAN, -2.0]),
            Type::Float64,
            &none,
            None,
        )
        .unwrap();
        assert_eq!(s.min, Some(Value::Float64(-2.0)));
        assert!(matches!(s.max, Some(Value::Float64(x)) if x.is_nan()));
        assert_eq!((s.distinct, s.sorted), (4, false));
        let s = column_stats(&HostCol::F64(vec![-0.0, 0.0, 0.0]), Type::Float64, &none, None).unwrap();
        assert_eq!((s.distinct, s.sorted), (1, true));
        let s = column_stats(&HostCol::U8(vec![1, 0, 1]), Type::Bool, &none, None).unwrap();
        assert_eq!(
            (s.min, s.max, s.distinct),
            (Some(Value::Bool(false)), Some(Value::Bool(true)), 2)
        );
        let s = column_stats(&HostCol::I64(vec![]), Type::Int64, &none, None).unwrap();
        assert_eq!((s.distinct, s.min, s.max, s.sorted), (0, None, None, true));
        // Elements that are not the type's are no statistics, not a panic.
        assert_eq!(column_stats(&HostCol::I64(vec![1]), Type::String, &none, None), None);
        assert_eq!(
            column_stats(&HostCol::I128(vec![-1, 1 << 70]), Type::WideDecimal(1), &none, None).map(|s| s.distinct),
            Some(2)
        );
    }

    #[test]
    fn the_table_of_statistics() {
        let mut stats = Statistics::none();
        stats.insert(
            "r",
            RelationStats {
                rows: 2,
                columns: vec![
                    Some(ColumnStats {
                        distinct: 2,
                        min: Some(Value::Date(0)),
                        max: Some(Value::Date(31)),
                        sorted: true,
                    }),
                    None,
                    Some(ColumnStats {
                        distinct: 1,
                        min: Some(Value::String("a \"b\"".into())),
                        max: Some(Value::String("x".repeat(40))),
                        sorted: false,
                    }),
                ],
                rows_sorted: false,
                rows_distinct: false,
            },
        );
        let input = |name: &str| InputRel {
            name: name.into(),
            columns: vec![col("day", Type::Date), col("n", Type::Int32), col("s", Type::String)],
            file: String::new(),
            sep: ",".into(),
            key: Vec::new(),
            header: false,
        };
        let text = format_statistics(&stats, &[input("r"), input("q")]);
        let want = format!(
            "r: 2 rows\n  \
             column  type    distinct  min         max                                  sorted\n  \
             day     date           2  1970-01-01  1970-02-01                           yes\n  \
             n       int32   not read  -           -                                    -\n  \
             s       string         1  \"a \\\"b\\\"\"   \"{}\"…  no\n\
             \nq: no statistics\n",
            "x".repeat(32)
        );
        assert_eq!(text, want);
    }
}
