//! Results: device columns turned into values, ordered, and written as a text table or CSV.

use crate::alloc::{try_collect, try_filled, try_par_collect, try_reserve, try_string, try_with_capacity};
use crate::dict::Dictionary;
use crate::load::civil_from_days;
use crate::{HostCol, RuntimeError};
use fox_sema::core::{Column, Type, Value};
use rayon::prelude::*;
use std::cmp::Ordering;
use std::path::Path;

/// One output relation, its rows in final output order.
///
/// Results produced by a run are held column by column (with the strings they use in a
/// small dictionary of their own, sorted by text) and, when the columns are not already
/// in output order, a permutation giving it; rows of values are built only on demand
/// ([`OutputTable::rows`]).
#[derive(Clone, Debug)]
pub struct OutputTable {
    pub name: String,
    pub columns: Vec<Column>,
    data: Data,
}

/// A table's rows as columns in their encodings, and the strings their codes index.
pub(crate) type Encoded<'a> = (Vec<HostCol>, &'a [String]);

#[derive(Clone, Debug)]
enum Data {
    Rows(Vec<Vec<Value>>),
    Cols(ColTable),
}

/// A table's rows in output order: values, or columns in their encodings with the
/// strings their codes index and the permutation giving output order (row `r` is row
/// `perm[r]`; row `r` itself when `None`), for rows `0..OutputTable::len()`.
pub(crate) enum Ordered<'a> {
    Rows(&'a [Vec<Value>]),
    Cols {
        cols: &'a [HostCol],
        strings: &'a [String],
        perm: Option<&'a [u32]>,
    },
}

/// Columns in their encodings. String columns hold codes into `strings`, which is sorted
/// by text, so code order is string order.
#[derive(Clone, Debug)]
struct ColTable {
    cols: Vec<HostCol>,
    strings: Vec<String>,
    /// Output row `r` is row `perm[r]` of the columns; the identity when `None`.
    perm: Option<Vec<u32>>,
    len: usize,
}

impl PartialEq for OutputTable {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.columns == other.columns
            && self.len() == other.len()
            && (0..self.len()).all(|r| self.row(r) == other.row(r))
    }
}

impl OutputTable {
    /// A table of rows of values, already in output order.
    pub fn from_rows(name: impl Into<String>, columns: Vec<Column>, rows: Vec<Vec<Value>>) -> OutputTable {
        OutputTable {
            name: name.into(),
            columns,
            data: Data::Rows(rows),
        }
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        match &self.data {
            Data::Rows(r) => r.len(),
            Data::Cols(t) => t.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rows as columns in their encodings, in no particular order, and the strings
    /// the codes of string columns index (sorted by text); `None` for a table built from
    /// values or one without columns. An error when memory runs out.
    pub(crate) fn encoded(&self) -> Result<Option<Encoded<'_>>, String> {
        const WHAT: &str = "a copy of the rows";
        let Data::Cols(t) = &self.data else {
            return Ok(None);
        };
        if t.cols.is_empty() {
            return Ok(None);
        }
        let n = t.cols.first().map_or(0, HostCol::len);
        if n == t.len {
            let cols = t.cols.iter().map(|c| c.try_clone(WHAT)).collect::<Result<_, _>>()?;
            return Ok(Some((cols, &t.strings)));
        }
        // Fewer rows than the columns hold (a limit): the output's rows.
        fn pick<T: Copy>(v: &[T], rows: &[usize]) -> Result<Vec<T>, String> {
            try_collect(rows.iter().map(|&r| v[r]), WHAT)
        }
        let rows: Vec<usize> = try_collect((0..t.len).map(|r| t.src(r)), WHAT)?;
        let cols = t
            .cols
            .iter()
            .map(|c| {
                Ok(match c {
                    HostCol::U8(v) => HostCol::U8(pick(v, &rows)?),
                    HostCol::I32(v) => HostCol::I32(pick(v, &rows)?),
                    HostCol::U32(v) => HostCol::U32(pick(v, &rows)?),
                    HostCol::I64(v) => HostCol::I64(pick(v, &rows)?),
                    HostCol::U64(v) => HostCol::U64(pick(v, &rows)?),
                    HostCol::F64(v) => HostCol::F64(pick(v, &rows)?),
                    HostCol::I128(v) => HostCol::I128(pick(v, &rows)?),
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(Some((cols, &t.strings)))
    }

    /// The rows in output order as the columnar writers ([`crate::columnar_output`])
    /// read them.
    pub(crate) fn ordered(&self) -> Ordered<'_> {
        match &self.data {
            Data::Rows(rows) => Ordered::Rows(rows),
            Data::Cols(t) => Ordered::Cols {
                cols: &t.cols,
                strings: &t.strings,
                perm: t.perm.as_deref(),
            },
        }
    }

    /// Every row as values, in output order.
    pub fn rows(&self) -> Vec<Vec<Value>> {
        match &self.data {
            Data::Rows(r) => r.clone(),
            Data::Cols(_) => (0..self.len()).map(|r| self.row(r)).collect(),
        }
    }

    /// Row `r` (in output order) as values. Panics when `r >= len()`.
    pub fn row(&self, r: usize) -> Vec<Value> {
        match &self.data {
            Data::Rows(rows) => rows[r].clone(),
            Data::Cols(t) => {
                let src = t.src(r);
                (0..self.columns.len()).map(|c| self.value_at(t, src, c)).collect()
            }
        }
    }

    /// Cell (`r`, `c`) (row `r` in output order) of an int32 or int64 column (not a date
    /// or a decimal) as an i64, without building the row's values; `None` for a column
    /// of another type. Panics when `r >= len()`.
    pub fn int_at(&self, r: usize, c: usize) -> Option<i64> {
        match &self.data {
            Data::Rows(rows) => match rows[r][c] {
                Value::Int32(x) => Some(i64::from(x)),
                Value::Int64(x) => Some(x),
                _ => None,
            },
            Data::Cols(t) => match (&t.cols[c], self.columns[c].ty) {
                (HostCol::I32(v), Type::Int32) => Some(i64::from(v[t.src(r)])),
                (HostCol::I64(v), Type::Int64) => Some(v[t.src(r)]),
                _ => None,
            },
        }
    }

    fn value_at(&self, t: &ColTable, src: usize, c: usize) -> Value {
        match (&t.cols[c], self.columns[c].ty) {
            (HostCol::I32(v), Type::Date) => Value::Date(v[src]),
            (HostCol::I32(v), _) => Value::Int32(v[src]),
            (HostCol::I64(v), Type::Decimal(scale)) => Value::Decimal {
                unscaled: v[src] as i128,
                scale,
            },
            (HostCol::I64(v), _) => Value::Int64(v[src]),
            (HostCol::I128(v), ty) => Value::Decimal {
                unscaled: v[src],
                scale: ty.decimal_scale().unwrap_or(0),
            },
            (HostCol::F64(v), _) => Value::Float64(v[src]),
            (HostCol::U8(v), _) => Value::Bool(v[src] != 0),
            (HostCol::U32(v), _) => Value::String(t.strings[v[src] as usize].clone()),
            (HostCol::U64(v), _) => Value::Int64(v[src] as i64),
        }
    }

    /// The text of cell (`r`, `c`) as CSV and the stdout table show it (unquoted).
    fn cell_text(&self, r: usize, c: usize) -> String {
        match &self.data {
            Data::Rows(rows) => format_value(&rows[r][c], self.columns[c].ty),
            Data::Cols(t) => {
                let mut out = Vec::new();
                write_cell(&t.cols[c], self.columns[c].ty, t.src(r), &t.strings, &mut out);
                String::from_utf8(out).expect("cells are UTF-8")
            }
        }
    }
}

impl ColTable {
    #[inline]
    fn src(&self, r: usize) -> usize {
        match &self.perm {
            Some(p) => p[r] as usize,
            None => r,
        }
    }
}

/// Checks that downloaded columns match the types of `columns` and have one length.
fn check_columns(what: &str, columns: &[Column], cols: &[HostCol]) -> Result<usize, RuntimeError> {
    let n = cols.first().map_or(0, HostCol::len);
    for (c, (col, column)) in cols.iter().zip(columns).enumerate() {
        if col.len() != n {
            return Err(RuntimeError::Plan(format!(
                "{what}: column {} has {} rows but column 1 has {n}",
                c + 1,
                col.len()
            )));
        }
        let ok = matches!(
            (column.ty, col),
            (Type::Int32 | Type::Date, HostCol::I32(_))
                | (Type::Int64 | Type::Decimal(_), HostCol::I64(_))
                | (Type::WideDecimal(_), HostCol::I128(_))
                | (Type::Float64, HostCol::F64(_))
                | (Type::Bool, HostCol::U8(_))
                | (Type::String, HostCol::U32(_))
        );
        if !ok {
            return Err(RuntimeError::Plan(format!(
                "{what}: column `{}` of type {} is held in a buffer of {:?} elements",
                column.name,
                column.ty,
                col.elem()
            )));
        }
    }
    Ok(n)
}

/// Replaces the dictionary codes of the string columns by codes into a dictionary of
/// only the strings they use, sorted by text, which it returns.
fn localize_strings(
    what: &str,
    columns: &[Column],
    cols: &mut [HostCol],
    dict: &Dictionary,
) -> Result<Vec<String>, RuntimeError> {
    const UNSEEN: u32 = u32::MAX;
    let values: usize = cols
        .iter()
        .map(|c| match c {
            HostCol::U32(v) => v.len(),
            _ => 0,
        })
        .sum();
    let oom = |msg: String| RuntimeError::Kernel {
        at: what.to_string(),
        msg,
    };
    if values < dict.len() / 64 {
        return localize_few(what, columns, cols, dict);
    }
    let mut local: Vec<u32> = Vec::new();
    let mut used: Vec<u32> = Vec::new();
    for (col, column) in cols.iter().zip(columns) {
        let HostCol::U32(v) = col else { continue };
        if local.is_empty() {
            local = try_filled(dict.len(), UNSEEN, "the strings of the output").map_err(oom)?;
        }
        for &code in v {
            match local.get_mut(code as usize) {
                Some(l) => {
                    if *l == UNSEEN {
                        *l = 0;
                        used.push(code);
                    }
                }
                None => {
                    return Err(RuntimeError::Plan(format!(
                        "{what}: column `{}` holds string code {code}, but the dictionary has {} strings",
                        column.name,
                        dict.len()
                    )))
                }
            }
        }
    }
    if used.is_empty() {
        return Ok(Vec::new());
    }
    let text = |code: u32| dict.get(code).expect("checked above");
    used.sort_unstable_by(|&a, &b| text(a).cmp(text(b)));
    for (k, &code) in used.iter().enumerate() {
        local[code as usize] = k as u32;
    }
    for col in cols.iter_mut() {
        if let HostCol::U32(v) = col {
            v.par_iter_mut()
                .with_min_len(1 << 16)
                .for_each(|x| *x = local[*x as usize]);
        }
    }
    drop(local);
    strings_of(&used, dict).map_err(oom)
}

/// Copies of the strings of `codes`, or the out-of-memory message.
fn strings_of(codes: &[u32], dict: &Dictionary) -> Result<Vec<String>, String> {
    const WHAT: &str = "the strings of the output";
    let mut out = try_with_capacity(codes.len(), WHAT)?;
    for &c in codes {
        out.push(try_string(dict.get(c).expect("checked above"), WHAT)?);
    }
    Ok(out)
}

/// [`localize_strings`] for outputs with few string values next to a large dictionary:
/// the codes they use are collected in a map rather than a table over the dictionary.
fn localize_few(
    what: &str,
    columns: &[Column],
    cols: &mut [HostCol],
    dict: &Dictionary,
) -> Result<Vec<String>, RuntimeError> {
    let mut used: Vec<u32> = Vec::new();
    for (col, column) in cols.iter().zip(columns) {
        let HostCol::U32(v) = col else { continue };
        if let Some(&code) = v.iter().find(|&&c| c as usize >= dict.len()) {
            return Err(RuntimeError::Plan(format!(
                "{what}: column `{}` holds string code {code}, but the dictionary has {} strings",
                column.name,
                dict.len()
            )));
        }
        try_reserve(&mut used, v.len(), "the strings of the output").map_err(|msg| RuntimeError::Kernel {
            at: what.to_string(),
            msg,
        })?;
        used.extend_from_slice(v);
    }
    used.sort_unstable();
    used.dedup();
    let text = |code: u32| dict.get(code).expect("checked above");
    used.sort_unstable_by(|&a, &b| text(a).cmp(text(b)));
    let local: std::collections::HashMap<u32, u32> = used.iter().enumerate().map(|(k, &c)| (c, k as u32)).collect();
    for col in cols.iter_mut() {
        if let HostCol::U32(v) = col {
            v.iter_mut().for_each(|x| *x = local[x]);
        }
    }
    strings_of(&used, dict).map_err(|msg| RuntimeError::Kernel {
        at: what.to_string(),
        msg,
    })
}

/// The order-preserving unsigned image of row `i` of a column (strings by local code,
/// floats by total order), reversed when `desc`.
#[inline]
fn image(col: &HostCol, i: usize, desc: bool) -> u128 {
    let x = match col {
        HostCol::I32(v) => u64::from(v[i] as u32 ^ 0x8000_0000),
        HostCol::I64(v) => v[i] as u64 ^ (1 << 63),
        HostCol::I128(v) => {
            let x = v[i] as u128 ^ (1 << 127);
            return if desc { !x } else { x };
        }
        HostCol::F64(v) => {
            let b = v[i].to_bits();
            if b >> 63 == 1 {
                !b
            } else {
                b | (1 << 63)
            }
        }
        HostCol::U8(v) => u64::from(v[i]),
        HostCol::U32(v) => u64::from(v[i]),
        HostCol::U64(v) => v[i],
    };
    u128::from(if desc { !x } else { x })
}

/// Bits of a column's image.
fn image_bits(col: &HostCol) -> u32 {
    match col {
        HostCol::U8(_) => 8,
        HostCol::I32(_) | HostCol::U32(_) => 32,
        HostCol::I64(_) | HostCol::U64(_) | HostCol::F64(_) => 64,
        HostCol::I128(_) => 128,
    }
}

/// The comparison keys of output order: the `order` columns, then every other column
/// ascending. Columns that repeat an order key add nothing and are left out.
fn order_keys(order: &[(usize, bool)], ncols: usize) -> Vec<(usize, bool)> {
    let mut keys: Vec<(usize, bool)> = Vec::with_capacity(order.len() + ncols);
    for &(c, desc) in order {
        if !keys.iter().any(|k| k.0 == c) {
            keys.push((c, desc));
        }
    }
    for c in 0..ncols {
        if !keys.iter().any(|k| k.0 == c) {
            keys.push((c, false));
        }
    }
    keys
}

#[inline]
fn cmp_keyed(cols: &[HostCol], keys: &[(usize, bool)], i: usize, j: usize) -> Ordering {
    for &(c, desc) in keys {
        let o = image(&cols[c], i, desc).cmp(&image(&cols[c], j, desc));
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// [`cmp_keyed`] of row `i` of `a` and row `j` of `b` (columns of the same types).
fn cmp_across(a: &[HostCol], i: usize, b: &[HostCol], j: usize, keys: &[(usize, bool)]) -> Ordering {
    for &(c, desc) in keys {
        let o = image(&a[c], i, desc).cmp(&image(&b[c], j, desc));
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// Whether the rows `rows` of `cols` are already in the order of `keys` (one linear pass).
/// Keys of at most 64 bits in all are packed ([`packed_keys`]) a block of rows at a time,
/// column by column, and the packed words compared; wider keys row by row.
pub(crate) fn is_ordered(cols: &[HostCol], keys: &[(usize, bool)], rows: std::ops::Range<usize>) -> bool {
    if rows.len() < 2 {
        return true;
    }
    if key_bits(cols, keys) <= 64 {
        // Block `b` reads rows `start + b * ORDER_BLOCK ..= start + (b + 1) * ORDER_BLOCK`
        // (the next block's first row too), so every adjacent pair is compared in a block.
        let nblocks = (rows.len() - 1).div_ceil(ORDER_BLOCK);
        let block_ok = |b: usize| {
            let a = rows.start + b * ORDER_BLOCK;
            let e = (a + ORDER_BLOCK + 1).min(rows.end);
            let mut words = vec![0u64; e - a];
            packed_keys(cols, keys, a, &mut words);
            words.windows(2).all(|w| w[0] <= w[1])
        };
        return if nblocks == 1 {
            block_ok(0)
        } else {
            (0..nblocks).into_par_iter().all(block_ok)
        };
    }
    let ok = |i: usize| cmp_keyed(cols, keys, i - 1, i) != Ordering::Greater;
    let after = rows.start + 1..rows.end;
    if rows.len() < PAR_MIN {
        after.into_iter().all(ok)
    } else {
        after.into_par_iter().with_min_len(1 << 16).all(ok)
    }
}

/// Rows whose packed keys [`is_ordered`] compares in one task.
const ORDER_BLOCK: usize = 1 << 18;

/// The packed keys ([`packed_key`]) of rows `a..a + out.len()`, one column at a time over
/// its typed slice (keys of at most 64 bits in all).
fn packed_keys(cols: &[HostCol], keys: &[(usize, bool)], a: usize, out: &mut [u64]) {
    fn fold<T: Copy>(out: &mut [u64], v: &[T], b: u32, desc: bool, img: impl Fn(T) -> u64) {
        let mask = if b == 64 { u64::MAX } else { (1u64 << b) - 1 };
        let flip = if desc { mask } else { 0 };
        for (w, &x) in out.iter_mut().zip(v) {
            let x = (img(x) ^ flip) & mask;
            *w = if b == 64 { x } else { (*w << b) | x };
        }
    }
    let e = a + out.len();
    for &(c, desc) in keys {
        let b = image_bits(&cols[c]);
        match &cols[c] {
            HostCol::I32(v) => fold(out, &v[a..e], b, desc, |x| u64::from(x as u32 ^ 0x8000_0000)),
            HostCol::I64(v) => fold(out, &v[a..e], b, desc, |x| x as u64 ^ (1 << 63)),
            HostCol::U8(v) => fold(out, &v[a..e], b, desc, u64::from),
            HostCol::U32(v) => fold(out, &v[a..e], b, desc, u64::from),
            HostCol::U64(v) => fold(out, &v[a..e], b, desc, |x| x),
            HostCol::F64(v) => fold(out, &v[a..e], b, desc, |x| {
                let b = x.to_bits();
                if b >> 63 == 1 {
                    !b
                } else {
                    b | (1 << 63)
                }
            }),
            // Wider than 64 bits: never packed.
            HostCol::I128(_) => {}
        }
    }
}

/// The bits of the images of the key columns `keys`, all together.
fn key_bits(cols: &[HostCol], keys: &[(usize, bool)]) -> u32 {
    keys.iter().map(|&(c, _)| image_bits(&cols[c])).sum()
}

/// Row `i`'s key images packed into one word, first key highest, for keys of at most
/// 64 bits in all ([`key_bits`]): words order as `cmp_keyed` orders rows.
fn packed_key(cols: &[HostCol], keys: &[(usize, bool)], i: usize) -> u64 {
    let mut k = 0u64;
    for &(c, desc) in keys {
        let b = image_bits(&cols[c]);
        let x = image(&cols[c], i, desc) as u64;
        k = if b == 64 { x } else { (k << b) | (x & ((1u64 << b) - 1)) };
    }
    k
}

/// The permutation that puts the rows of `cols` in the order of `keys`; an error when
/// memory runs out.
pub(crate) fn order_perm(cols: &[HostCol], keys: &[(usize, bool)], n: usize) -> Result<Vec<u32>, String> {
    const WHAT: &str = "the order of the output's rows";
    if key_bits(cols, keys) <= 64 {
        let pack = |i: usize| (packed_key(cols, keys, i), i as u32);
        let mut pairs: Vec<(u64, u32)> = try_par_collect((0..n).into_par_iter().with_min_len(PAR_MIN).map(pack), WHAT)?;
        if n < PAR_MIN {
            pairs.sort_unstable();
        } else {
            pairs.par_sort_unstable();
        }
        return try_collect(pairs.into_iter().map(|(_, i)| i), WHAT);
    }
    let mut perm: Vec<u32> = try_collect(0..n as u32, WHAT)?;
    let cmp = |a: &u32, b: &u32| cmp_keyed(cols, keys, *a as usize, *b as usize).then(a.cmp(b));
    if n < PAR_MIN {
        perm.sort_unstable_by(cmp);
    } else {
        perm.par_sort_unstable_by(cmp);
    }
    Ok(perm)
}

/// The permutation that merges the parts `bounds[k]..bounds[k + 1]` of `cols`, each in
/// the order of `keys`, ties to the earlier part: the permutation of a stable sort (what
/// [`order_perm`] gives). See [`merge_sources`].
#[cfg(test)]
fn merge_perm(cols: &[HostCol], keys: &[(usize, bool)], bounds: &[usize]) -> Result<Vec<u32>, String> {
    let lens: Vec<usize> = bounds.windows(2).map(|w| w[1] - w[0]).collect();
    let m = if key_bits(cols, keys) <= 64 {
        merge_sources(
            &lens,
            |p, i| packed_key(cols, keys, bounds[p] + i),
            |a: &u64, b: &u64| a < b,
        )?
    } else {
        merge_sources(
            &lens,
            |p, i| bounds[p] + i,
            |&a: &usize, &b: &usize| cmp_keyed(cols, keys, a, b) == Ordering::Less,
        )?
    };
    let firsts: Vec<u32> = bounds[..lens.len()].iter().map(|&b| b as u32).collect();
    replay(&firsts, &m, m.src.len(), |&first, i| first + i as u32)
}

/// A merge of parts each in order: the part each output row comes from, and the pieces
/// the output was cut into (each piece's first output row and where it begins in each
/// part), merged and replayed in parallel.
struct Merge {
    src: Vec<u8>,
    pieces: Vec<(usize, Vec<usize>)>,
}

/// The merge of parts of `lens` rows (at most 255 parts), each in the order of
/// `head(part, row)` under `less`, ties to the earlier part: the order of a stable sort
/// of the parts one after the other. One k-way pass: the output is cut into pieces at
/// rows of the largest part (every part's rows up to and including that row's key go
/// before the cut, so equal keys never straddle a cut), and the pieces are merged in
/// parallel, each writing its own range of sources.
fn merge_sources<H: Send>(
    lens: &[usize],
    head: impl Fn(usize, usize) -> H + Sync,
    less: impl Fn(&H, &H) -> bool + Sync,
) -> Result<Merge, String> {
    const WHAT: &str = "the order of the output's rows";
    let parts = lens.len();
    if parts > usize::from(u8::MAX) {
        return Err(format!("{parts} parts to merge; at most 255 are merged"));
    }
    let n: usize = lens.iter().sum();
    if parts == 0 || n == 0 {
        return Ok(Merge {
            src: Vec::new(),
            pieces: Vec::new(),
        });
    }
    let big = (0..parts).max_by_key(|&p| (lens[p], std::cmp::Reverse(p))).unwrap_or(0);
    // The first row of part `p` whose key is greater than `s`.
    let after = |p: usize, s: &H| {
        let (mut lo, mut hi) = (0, lens[p]);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if less(s, &head(p, mid)) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    };
    let pieces = (n / PAR_MIN).clamp(1, 4096);
    // cuts[j][p]: where piece j begins in part p; nondecreasing in j because the cutting
    // rows of the largest part are.
    let mut cuts: Vec<Vec<usize>> = Vec::with_capacity(pieces + 1);
    cuts.push(vec![0; parts]);
    let inner: Vec<Vec<usize>> = (1..pieces)
        .into_par_iter()
        .map(|j| {
            let s = head(big, lens[big] * j / pieces);
            (0..parts).map(|p| after(p, &s)).collect()
        })
        .collect();
    cuts.extend(inner);
    cuts.push(lens.to_vec());
    let mut src: Vec<u8> = try_with_capacity(n, WHAT)?;
    let mut rest = &mut src.spare_capacity_mut()[..n];
    let mut work = Vec::with_capacity(pieces);
    let mut starts = Vec::with_capacity(pieces);
    let mut first = 0;
    for w in cuts.windows(2) {
        let size: usize = (0..parts).map(|p| w[1][p] - w[0][p]).sum();
        let (dst, tail) = rest.split_at_mut(size);
        work.push((dst, &w[0], &w[1]));
        starts.push((first, w[0].clone()));
        first += size;
        rest = tail;
    }
    work.into_par_iter().for_each(|(dst, from, to)| {
        let mut at = from.clone();
        let mut heads: Vec<Option<H>> = (0..parts).map(|p| (at[p] < to[p]).then(|| head(p, at[p]))).collect();
        for d in dst.iter_mut() {
            // The smallest head, ties to the earlier part.
            let mut best = usize::MAX;
            for p in 0..parts {
                if let Some(h) = &heads[p] {
                    if best == usize::MAX || less(h, heads[best].as_ref().expect("a head")) {
                        best = p;
                    }
                }
            }
            d.write(best as u8);
            at[best] += 1;
            heads[best] = (at[best] < to[best]).then(|| head(best, at[best]));
        }
    });
    // SAFETY: the pieces' ranges tile `0..n`, and each piece wrote every slot of its range
    // (its size is the number of rows its parts hold between its cuts).
    unsafe { src.set_len(n) };
    Ok(Merge { src, pieces: starts })
}

/// The first `n` rows of a merge ([`merge_sources`]) of the parts `parts`, row `i` of a
/// part read as `value(part, i)`: each piece replayed in parallel into its own range.
fn replay<P: Sync, T: Send>(
    parts: &[P],
    m: &Merge,
    n: usize,
    value: impl Fn(&P, usize) -> T + Sync,
) -> Result<Vec<T>, String> {
    let n = n.min(m.src.len());
    let mut out: Vec<T> = try_with_capacity(n, "the merged rows of an output")?;
    let mut rest = &mut out.spare_capacity_mut()[..n];
    let mut work = Vec::with_capacity(m.pieces.len());
    for (j, (first, at)) in m.pieces.iter().enumerate() {
        if *first >= n {
            break;
        }
        let end = m.pieces.get(j + 1).map_or(n, |p| p.0).min(n);
        let (dst, tail) = rest.split_at_mut(end - first);
        work.push((dst, &m.src[*first..end], at));
        rest = tail;
    }
    work.into_par_iter().for_each(|(dst, src, at)| {
        let mut at = at.clone();
        for (d, &p) in dst.iter_mut().zip(src) {
            let p = usize::from(p);
            d.write(value(&parts[p], at[p]));
            at[p] += 1;
        }
    });
    // SAFETY: the pieces before `n` tile `0..n` (the last one cut at `n`), and each wrote
    // every slot of its range.
    unsafe { out.set_len(n) };
    Ok(out)
}

/// The first `n` rows of the merge `m` of `parts` (each a list of columns of the same
/// types), as columns: a column at a time, each part's column freed once merged.
fn merge_columns(mut parts: Vec<Vec<HostCol>>, m: &Merge, n: usize) -> Result<Vec<HostCol>, String> {
    let width = parts.first().map_or(0, Vec::len);
    let mut out = Vec::with_capacity(width);
    for c in 0..width {
        macro_rules! merged_as {
            ($variant:ident) => {{
                let srcs: Vec<&[_]> = parts
                    .iter()
                    .map(|p| match &p[c] {
                        HostCol::$variant(v) => Ok(v.as_slice()),
                        other => Err(format!("a part's column {c} is {:?}", other.elem())),
                    })
                    .collect::<Result<_, String>>()?;
                HostCol::$variant(replay(&srcs, m, n, |v, i| v[i])?)
            }};
        }
        out.push(match &parts[0][c] {
            HostCol::U8(_) => merged_as!(U8),
            HostCol::I32(_) => merged_as!(I32),
            HostCol::U32(_) => merged_as!(U32),
            HostCol::I64(_) => merged_as!(I64),
            HostCol::U64(_) => merged_as!(U64),
            HostCol::F64(_) => merged_as!(F64),
            HostCol::I128(_) => merged_as!(I128),
        });
        for p in parts.iter_mut() {
            p[c] = HostCol::U8(Vec::new());
        }
    }
    Ok(out)
}

/// Inputs shorter than this are ordered and written without threads.
const PAR_MIN: usize = 1 << 15;

/// Builds an output table from downloaded columns of the types of `columns` (or, for a
/// relation with no columns, the row count `hidden_rows`): ordered by `order` (column
/// index, descending) then ascending on every column, at most `limit` rows. `what` names
/// the output in messages. The rows come in parts (the outputs of several devices, one
/// after the other; one part otherwise): when every part is already in order they are
/// merged from the parts into new columns ([`merge_sources`]), to the order a sort of
/// them all gives; otherwise they are put one after the other and sorted.
#[allow(clippy::too_many_arguments)]
pub(crate) fn build_table_parts(
    what: &str,
    name: &str,
    columns: &[Column],
    mut parts: Vec<Vec<HostCol>>,
    hidden_rows: Option<usize>,
    dict: &Dictionary,
    order: &[(usize, bool)],
    limit: Option<u64>,
) -> Result<OutputTable, RuntimeError> {
    let limit = limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
    let kernel_error = |msg: String| RuntimeError::Kernel {
        at: what.to_string(),
        msg,
    };
    let (cols, strings, perm, len) = match hidden_rows {
        Some(n) => (Vec::new(), Vec::new(), None, n.min(limit)),
        None => {
            let mut n = 0;
            for part in &parts {
                n += check_columns(what, columns, part)?;
            }
            let strings = if parts.len() == 1 {
                localize_strings(what, columns, &mut parts[0], dict)?
            } else {
                // One table of local strings for every part: each part's columns in turn.
                let width = columns.len();
                let reps: Vec<Column> = parts.iter().flat_map(|_| columns.iter().cloned()).collect();
                let mut flat: Vec<HostCol> = parts.drain(..).flatten().collect();
                let strings = localize_strings(what, &reps, &mut flat, dict)?;
                let mut it = flat.into_iter();
                while it.len() > 0 {
                    parts.push(it.by_ref().take(width).collect());
                }
                strings
            };
            let keys = order_keys(order, columns.len());
            let rows = |p: &[HostCol]| p.first().map_or(0, HostCol::len);
            if parts.len() > 1 && parts.iter().all(|p| is_ordered(p, &keys, 0..rows(p))) {
                // Parts each in order: merged into new columns, in the merged order, so that
                // the writers read them in sequence.
                let lens: Vec<usize> = parts.iter().map(|p| rows(p)).collect();
                let m = if parts.iter().all(|p| key_bits(p, &keys) <= 64) {
                    merge_sources(&lens, |p, i| packed_key(&parts[p], &keys, i), |a: &u64, b: &u64| a < b)
                } else {
                    merge_sources(
                        &lens,
                        |p, i| (p, i),
                        |&(p, i): &(usize, usize), &(q, j): &(usize, usize)| {
                            cmp_across(&parts[p], i, &parts[q], j, &keys) == Ordering::Less
                        },
                    )
                }
                .map_err(kernel_error)?;
                let cols = merge_columns(parts, &m, n.min(limit)).map_err(kernel_error)?;
                (cols, strings, None, n.min(limit))
            } else {
                let cols = if parts.len() == 1 {
                    parts.pop().unwrap_or_default()
                } else {
                    let mut cols = Vec::with_capacity(columns.len());
                    for c in 0..columns.len() {
                        let elem = parts[0][c].elem();
                        let col_parts = parts
                            .iter_mut()
                            .map(|p| std::mem::replace(&mut p[c], HostCol::empty(elem)));
                        cols.push(
                            HostCol::try_concat(elem, col_parts.collect(), "the rows of an output")
                                .map_err(kernel_error)?,
                        );
                    }
                    cols
                };
                let perm = if is_ordered(&cols, &keys, 0..n) {
                    None
                } else {
                    let mut p = order_perm(&cols, &keys, n).map_err(kernel_error)?;
                    p.truncate(limit);
                    Some(p)
                };
                (cols, strings, perm, n.min(limit))
            }
        }
    };
    Ok(OutputTable {
        name: name.to_string(),
        columns: columns.to_vec(),
        data: Data::Cols(ColTable {
            cols,
            strings,
            perm,
            len,
        }),
    })
}

/// Orders two values of one column: numbers numerically (floats by total order), strings
/// by their text (byte order), dates by day, `false < true`.
pub fn cmp_values(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Int32(x), Value::Int32(y)) => x.cmp(y),
        (Value::Int64(x), Value::Int64(y)) => x.cmp(y),
        (Value::Date(x), Value::Date(y)) => x.cmp(y),
        (Value::Float64(x), Value::Float64(y)) => x.total_cmp(y),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Decimal { unscaled: x, scale: sx }, Value::Decimal { unscaled: y, scale: sy }) => {
            if sx == sy {
                x.cmp(y)
            } else {
                // Compare at the common (larger) scale; i128 holds any i64 times 10^38 / 10^19.
                let (x, y) = (
                    x.checked_mul(10i128.pow(sy.saturating_sub(*sx) as u32)),
                    y.checked_mul(10i128.pow(sx.saturating_sub(*sy) as u32)),
                );
                x.cmp(&y)
            }
        }
        // Columns hold one type; values of different types order by type so that sorting
        // never panics.
        _ => rank_of(a).cmp(&rank_of(b)),
    }
}

fn rank_of(v: &Value) -> u8 {
    match v {
        Value::Int32(_) => 0,
        Value::Int64(_) => 1,
        Value::Decimal { .. } => 2,
        Value::Float64(_) => 3,
        Value::String(_) => 4,
        Value::Date(_) => 5,
        Value::Bool(_) => 6,
    }
}

/// Sorts rows by `order` (column index, descending), then ascending on every column from
/// left to right, and keeps at most `limit` rows.
pub fn sort_rows(rows: &mut Vec<Vec<Value>>, order: &[(usize, bool)], limit: Option<u64>) {
    rows.sort_by(|a, b| {
        for &(c, desc) in order {
            let o = cmp_values(&a[c], &b[c]);
            let o = if desc { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        a.iter()
            .zip(b)
            .map(|(x, y)| cmp_values(x, y))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal)
    });
    if let Some(l) = limit {
        rows.truncate(usize::try_from(l).unwrap_or(usize::MAX));
    }
}

/// The text of one value as CSV and the stdout table write it (unquoted): decimals with
/// exactly the digits of the scale of `ty`, dates `YYYY-MM-DD`, floats in Rust's shortest
/// round-trip form (`15.0`, `29.985`, `1e300`), booleans `true`/`false`.
pub fn format_value(v: &Value, ty: Type) -> String {
    match v {
        Value::Int32(x) => x.to_string(),
        Value::Int64(x) => x.to_string(),
        Value::Decimal { unscaled, scale } => {
            let (mut u, mut s) = (*unscaled, *scale);
            if let Type::Decimal(ts) = ty {
                if ts > s {
                    if let Some(scaled) = 10i128.checked_pow((ts - s) as u32).and_then(|p| u.checked_mul(p)) {
                        u = scaled;
                        s = ts;
                    }
                }
            }
            format_decimal(u, s)
        }
        Value::Float64(x) => format!("{x:?}"),
        Value::String(s) => s.clone(),
        Value::Date(d) => format_date(*d),
        Value::Bool(b) => b.to_string(),
    }
}

/// An unscaled integer at `scale` as a decimal: `(-125, 2)` is `-1.25`, `(5, 2)` is `0.05`.
pub fn format_decimal(unscaled: i128, scale: u8) -> String {
    let digits = unscaled.unsigned_abs().to_string();
    let sign = if unscaled < 0 { "-" } else { "" };
    let scale = scale as usize;
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = if digits.len() <= scale {
        format!("{}{digits}", "0".repeat(scale + 1 - digits.len()))
    } else {
        digits
    };
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

/// A day number as `YYYY-MM-DD`.
pub fn format_date(days: i32) -> String {
    let (y, m, d) = civil_from_days(days as i64);
    if (0..=9999).contains(&y) {
        format!("{y:04}-{m:02}-{d:02}")
    } else {
        format!("{y}-{m:02}-{d:02}")
    }
}

fn is_numeric(ty: Type) -> bool {
    matches!(ty, Type::Int32 | Type::Int64 | Type::Decimal(_) | Type::Float64)
}

/// Appends the decimal digits of `x`.
#[inline]
fn push_int(out: &mut Vec<u8>, x: i64) {
    let mut buf = [0u8; 20];
    let mut u = x.unsigned_abs();
    let mut k = buf.len();
    loop {
        k -= 1;
        buf[k] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if x < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[k..]);
}

/// Appends the text of row `src` of a column of type `ty` (strings from `strings`).
#[inline]
fn write_cell(col: &HostCol, ty: Type, src: usize, strings: &[String], out: &mut Vec<u8>) {
    match (col, ty) {
        (HostCol::I32(v), Type::Date) => out.extend_from_slice(format_date(v[src]).as_bytes()),
        (HostCol::I32(v), _) => push_int(out, i64::from(v[src])),
        (HostCol::I64(v), Type::Decimal(scale)) => {
            out.extend_from_slice(format_decimal(v[src] as i128, scale).as_bytes())
        }
        (HostCol::I64(v), _) => push_int(out, v[src]),
        (HostCol::I128(v), ty) => {
            out.extend_from_slice(format_decimal(v[src], ty.decimal_scale().unwrap_or(0)).as_bytes())
        }
        (HostCol::F64(v), _) => {
            use std::io::Write;
            let _ = write!(out, "{:?}", v[src]);
        }
        (HostCol::U8(v), _) => out.extend_from_slice(if v[src] != 0 { b"true" } else { b"false" }),
        (HostCol::U32(v), _) => out.extend_from_slice(strings[v[src] as usize].as_bytes()),
        (HostCol::U64(v), _) => push_int(out, v[src] as i64),
    }
}

/// The stdout form of a table: a header of column names, a rule, one line per row with
/// numbers right-aligned and other values left-aligned, and a `N rows` footer.
pub fn format_table(t: &OutputTable) -> String {
    format_table_max(t, None)
}

/// [`format_table`] showing at most `max_rows` rows (all when `None`); when rows are left
/// out, a line `… N more rows` follows the rows shown, before the footer that counts
/// every row. Column widths fit the rows shown.
pub fn format_table_max(t: &OutputTable, max_rows: Option<usize>) -> String {
    let mut out = Vec::new();
    write_table_text_to(t, max_rows, &mut out).expect("writing to memory does not fail");
    String::from_utf8(out).expect("the table is UTF-8")
}

/// Writes [`format_table_max`]'s text to `w`: the column widths found and the lines
/// formatted in parallel ([`write_rows`]).
pub fn write_table_text_to<W: std::io::Write + Send + ?Sized>(
    t: &OutputTable,
    max_rows: Option<usize>,
    w: &mut W,
) -> std::io::Result<()> {
    write_table_text_chunked(t, max_rows, w, Chunking::for_pool())
}

fn write_table_text_chunked<W: std::io::Write + Send + ?Sized>(
    t: &OutputTable,
    max_rows: Option<usize>,
    w: &mut W,
    chunking: Chunking,
) -> std::io::Result<()> {
    let n = t.len();
    let plural = |k: usize| if k == 1 { "" } else { "s" };
    if t.columns.is_empty() {
        // A relation with no columns is true (one row) or false (none).
        return write!(w, "{}\n{n} row{}\n", n > 0, plural(n));
    }
    let shown = max_rows.map_or(n, |m| m.min(n));
    let cell = |r: usize, c: usize| display_cell(&t.cell_text(r, c));
    let ncols = t.columns.len();
    let names: Vec<usize> = t.columns.iter().map(|c| c.name.chars().count()).collect();
    let widths = (0..shown)
        .into_par_iter()
        .with_min_len(1 << 12)
        .fold(
            || names.clone(),
            |mut acc, r| {
                for (c, w) in acc.iter_mut().enumerate() {
                    *w = (*w).max(cell(r, c).chars().count());
                }
                acc
            },
        )
        .reduce(
            || names.clone(),
            |a, b| a.iter().zip(&b).map(|(x, y)| *x.max(y)).collect(),
        );
    let numeric: Vec<bool> = t.columns.iter().map(|c| is_numeric(c.ty)).collect();
    let line = |out: &mut Vec<u8>, cells: &[String]| {
        let mut s = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i > 0 {
                s.push_str(" | ");
            }
            let pad = widths[i] - cell.chars().count();
            if numeric[i] {
                s.push_str(&" ".repeat(pad));
                s.push_str(cell);
            } else {
                s.push_str(cell);
                s.push_str(&" ".repeat(pad));
            }
        }
        out.extend_from_slice(s.trim_end().as_bytes());
        out.push(b'\n');
    };
    let mut head = Vec::new();
    let header: Vec<String> = t.columns.iter().map(|c| c.name.clone()).collect();
    line(&mut head, &header);
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    head.extend_from_slice(rule.join("-+-").as_bytes());
    head.push(b'\n');
    w.write_all(&head)?;
    write_rows(w, shown, chunking, |a, b, out| {
        for r in a..b {
            let cells: Vec<String> = (0..ncols).map(|c| cell(r, c)).collect();
            line(out, &cells);
        }
        Ok(())
    })?;
    if shown < n {
        writeln!(w, "… {} more row{}", n - shown, plural(n - shown))?;
    }
    writeln!(w, "{n} row{}", plural(n))
}

/// Control characters would break the table's lines: show them escaped.
fn display_cell(s: &str) -> String {
    if s.chars().any(char::is_control) {
        s.escape_default().to_string()
    } else {
        s.to_string()
    }
}

/// A CSV field, quoted per RFC 4180 when it holds a comma, a quote or a line break.
fn csv_field(s: &str, out: &mut String) {
    if s.contains([',', '"', '\n', '\r']) {
        out.push('"');
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}

/// How the row-at-a-time formats cut a table's rows for [`write_rows`]: chunks of `rows`
/// rows, each formatted into a buffer of its own by one task, `batch` chunks formatted
/// in parallel while the previous batch is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunking {
    pub rows: usize,
    pub batch: usize,
}

impl Chunking {
    /// Chunks of 65,536 rows, twice as many per batch as the thread pool has threads.
    pub fn for_pool() -> Chunking {
        Chunking {
            rows: 1 << 16,
            batch: (2 * rayon::current_num_threads()).max(2),
        }
    }
}

/// Writes the text of rows `0..n` to `w` in row order: `format(a, b, out)` appends the
/// text of rows `a..b` to `out`, and must give the same bytes for a range as for its
/// pieces one after the other (each row's text depends on that row alone). Rows are
/// formatted in chunks ([`Chunking`]) by every thread of the pool while one thread
/// writes the previous batch, so at most two batches of text are held at once. The
/// bytes written are exactly those of `format(0, n, ..)`; on an error (of a chunk's
/// formatting, the earliest such chunk, or of a write) the chunks before it have been
/// written, nothing after it, and the error is returned.
pub fn write_rows<W, F>(w: &mut W, n: usize, c: Chunking, format: F) -> std::io::Result<()>
where
    W: std::io::Write + Send + ?Sized,
    F: Fn(usize, usize, &mut Vec<u8>) -> std::io::Result<()> + Sync,
{
    let rows = c.rows.max(1);
    if n <= rows {
        let mut out = Vec::new();
        format(0, n, &mut out)?;
        return w.write_all(&out);
    }
    let span = rows.saturating_mul(c.batch.max(1));
    let batch = |a: usize| -> Vec<std::io::Result<Vec<u8>>> {
        let b = a.saturating_add(span).min(n);
        let starts: Vec<usize> = (a..b).step_by(rows).collect();
        starts
            .into_par_iter()
            .with_max_len(1)
            .map(|p| {
                let mut out = Vec::new();
                format(p, (p + rows).min(b), &mut out).map(|()| out)
            })
            .collect()
    };
    let write = |w: &mut W, parts: Vec<std::io::Result<Vec<u8>>>| parts.into_iter().try_for_each(|p| w.write_all(&p?));
    let mut pending = batch(0);
    let mut a = span;
    while a < n {
        let (res, next) = rayon::join(|| write(w, std::mem::take(&mut pending)), || batch(a));
        res?;
        pending = next;
        a = a.saturating_add(span);
    }
    write(w, pending)
}

/// The delimited text formats: CSV (RFC 4180 quoting) and TSV (escapes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Delimited {
    Csv,
    Tsv,
}

impl Delimited {
    fn sep(self) -> u8 {
        match self {
            Delimited::Csv => b',',
            Delimited::Tsv => b'\t',
        }
    }

    /// Appends the field form of `s`.
    fn field(self, s: &str, out: &mut Vec<u8>) {
        match self {
            Delimited::Csv => {
                let mut q = String::new();
                csv_field(s, &mut q);
                out.extend_from_slice(q.as_bytes());
            }
            Delimited::Tsv => tsv_field(s, out),
        }
    }

    /// The header line of a table: its column names as fields.
    fn header(self, t: &OutputTable) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, c) in t.columns.iter().enumerate() {
            if i > 0 {
                out.push(self.sep());
            }
            self.field(&c.name, &mut out);
        }
        out.push(b'\n');
        out
    }

    /// The field form of every string of a columnar table, which the lines then copy
    /// (allocated fallibly: the strings are as large as the output's); empty for a
    /// table of values.
    fn strings(self, t: &OutputTable) -> std::io::Result<Vec<String>> {
        const WHAT: &str = "the text of the output's strings";
        let Data::Cols(ct) = &t.data else {
            return Ok(Vec::new());
        };
        let mut q = try_with_capacity(ct.strings.len(), WHAT).map_err(std::io::Error::other)?;
        for s in &ct.strings {
            let needs = match self {
                Delimited::Csv => s.contains([',', '"', '\n', '\r']),
                Delimited::Tsv => s.contains(['\t', '\n', '\r', '\\']),
            };
            if needs {
                let mut f = Vec::new();
                self.field(s, &mut f);
                q.push(String::from_utf8(f).expect("fields of UTF-8 text are UTF-8"));
            } else {
                q.push(try_string(s, WHAT).map_err(std::io::Error::other)?);
            }
        }
        Ok(q)
    }

    /// Appends the lines of output rows `a..b`; `fields` holds the field form of each
    /// string of a columnar table ([`Delimited::strings`]). Only strings need quoting
    /// or escapes: no other value's text holds a separator, a quote, a line break or
    /// a backslash.
    fn lines(self, t: &OutputTable, fields: &[String], a: usize, b: usize, out: &mut Vec<u8>) {
        let sep = self.sep();
        match &t.data {
            Data::Rows(rows) => {
                for row in &rows[a..b] {
                    for (i, (v, c)) in row.iter().zip(&t.columns).enumerate() {
                        if i > 0 {
                            out.push(sep);
                        }
                        self.field(&format_value(v, c.ty), out);
                    }
                    out.push(b'\n');
                }
            }
            Data::Cols(ct) => {
                let cols: Vec<(&HostCol, Type)> = ct.cols.iter().zip(&t.columns).map(|(h, c)| (h, c.ty)).collect();
                match (cols.as_slice(), &ct.perm) {
                    // The common shape of graph results, without a match per cell.
                    ([(HostCol::I32(x), Type::Int32), (HostCol::I32(y), Type::Int32)], None) => {
                        out.reserve((b - a) * 12);
                        for (&x, &y) in x[a..b].iter().zip(&y[a..b]) {
                            push_int(out, i64::from(x));
                            out.push(sep);
                            push_int(out, i64::from(y));
                            out.push(b'\n');
                        }
                    }
                    _ => {
                        for r in a..b {
                            let src = ct.src(r);
                            for (i, (col, ty)) in cols.iter().enumerate() {
                                if i > 0 {
                                    out.push(sep);
                                }
                                write_cell(col, *ty, src, fields, out);
                            }
                            out.push(b'\n');
                        }
                    }
                }
            }
        }
    }

    /// Writes a table: the header, then its lines through [`write_rows`].
    fn write<W: std::io::Write + Send + ?Sized>(self, t: &OutputTable, w: &mut W, c: Chunking) -> std::io::Result<()> {
        w.write_all(&self.header(t))?;
        let fields = self.strings(t)?;
        let n = t.len();
        if t.columns.is_empty() {
            // A relation with no columns has one empty line per row (it has at most one).
            return w.write_all(&vec![b'\n'; n]);
        }
        write_rows(w, n, c, |a, b, out| {
            self.lines(t, &fields, a, b, out);
            Ok(())
        })
    }
}

/// Writes the CSV text of a table (a header of column names, then one line per row) to
/// `w`, the rows formatted in parallel while earlier ones are written ([`write_rows`]).
pub fn write_csv_to<W: std::io::Write + Send + ?Sized>(t: &OutputTable, w: &mut W) -> std::io::Result<()> {
    Delimited::Csv.write(t, w, Chunking::for_pool())
}

/// The CSV text of a table: a header of column names, then one line per row.
pub fn csv_text(t: &OutputTable) -> String {
    let mut out = Vec::new();
    write_csv_to(t, &mut out).expect("writing to memory does not fail");
    String::from_utf8(out).expect("CSV text is UTF-8")
}

/// A file format of results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// A header row of column names, then one line per row; RFC 4180 quoting.
    Csv,
    /// A header row, then one line per row, fields separated by tabs; a tab, a line
    /// break or a backslash inside a field is written `\t`, `\n`, `\r` or `\\`.
    Tsv,
    /// One object `{"name": …, "columns": [{"name": …, "type": …}, …], "rows": [[…], …]}`:
    /// integers and decimals as JSON numbers with exactly the digits of their text in CSV
    /// (decimals with all the digits of their scale, never rounded through a float),
    /// floats as numbers in their shortest round-trip form (`NaN`, `inf` and `-inf` as
    /// strings), dates as `"YYYY-MM-DD"` strings, booleans as `true`/`false`.
    Json,
    /// A Parquet file (snappy-compressed) of one row group per million rows; the column
    /// types are those of [`crate::columnar_output::arrow_type`].
    Parquet,
    /// An Arrow IPC file (the `ARROW1` file format), the same Arrow types as Parquet.
    Arrow,
}

impl Format {
    /// The file extension: `csv`, `tsv`, `json`, `parquet`, `arrow`.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Tsv => "tsv",
            Format::Json => "json",
            Format::Parquet => "parquet",
            Format::Arrow => "arrow",
        }
    }

    /// True for the binary formats (Parquet, Arrow), which are written to files only.
    pub fn is_binary(self) -> bool {
        matches!(self, Format::Parquet | Format::Arrow)
    }
}

/// Writes a table in `format` to `w`.
pub fn write_table_to<W: std::io::Write + Send + ?Sized>(
    t: &OutputTable,
    format: Format,
    w: &mut W,
) -> std::io::Result<()> {
    match format {
        Format::Csv => write_csv_to(t, w),
        Format::Tsv => write_tsv_to(t, w),
        Format::Json => write_json_to(t, w),
        Format::Parquet => crate::columnar_output::write_parquet_to(t, w),
        Format::Arrow => crate::columnar_output::write_arrow_to(t, w),
    }
}

/// A TSV field: tabs, line breaks and backslashes escaped.
fn tsv_field(s: &str, out: &mut Vec<u8>) {
    if !s.contains(['\t', '\n', '\r', '\\']) {
        out.extend_from_slice(s.as_bytes());
        return;
    }
    for ch in s.chars() {
        match ch {
            '\t' => out.extend_from_slice(b"\\t"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\\' => out.extend_from_slice(b"\\\\"),
            c => {
                let mut b = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
        }
    }
}

/// Writes the TSV text of a table (see [`Format::Tsv`]), the rows formatted in parallel
/// while earlier ones are written ([`write_rows`]).
pub fn write_tsv_to<W: std::io::Write + Send + ?Sized>(t: &OutputTable, w: &mut W) -> std::io::Result<()> {
    Delimited::Tsv.write(t, w, Chunking::for_pool())
}

/// A JSON string literal.
fn json_string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    for ch in s.chars() {
        match ch {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            c if (c as u32) < 0x20 => out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes()),
            c => {
                let mut b = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
        }
    }
    out.push(b'"');
}

/// The type of a column as JSON output names it (the language's type names).
fn json_type(ty: Type) -> String {
    match ty {
        Type::Decimal(s) | Type::WideDecimal(s) => format!("decimal({s})"),
        other => other.to_string(),
    }
}

/// The JSON value of a cell whose CSV text is `text` (see [`Format::Json`]).
fn json_value(text: &str, ty: Type, out: &mut Vec<u8>) {
    match ty {
        Type::Int32 | Type::Int64 | Type::Decimal(_) | Type::WideDecimal(_) | Type::Bool => {
            out.extend_from_slice(text.as_bytes())
        }
        Type::Float64 if !matches!(text, "NaN" | "inf" | "-inf") => out.extend_from_slice(text.as_bytes()),
        Type::Float64 | Type::String | Type::Date => json_string(text, out),
    }
}

/// Writes the JSON object of a table (see [`Format::Json`]), indented by `indent` spaces
/// (its first line is not), one row a line, the rows formatted by [`write_rows`].
fn write_json_object<W: std::io::Write + Send + ?Sized>(
    t: &OutputTable,
    indent: usize,
    w: &mut W,
    chunking: Chunking,
) -> std::io::Result<()> {
    let pad = " ".repeat(indent);
    let mut out = Vec::new();
    out.extend_from_slice(format!("{{\n{pad}  \"name\": ").as_bytes());
    json_string(&t.name, &mut out);
    out.extend_from_slice(format!(",\n{pad}  \"columns\": [").as_bytes());
    for (i, c) in t.columns.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        out.extend_from_slice(b"{\"name\": ");
        json_string(&c.name, &mut out);
        out.extend_from_slice(b", \"type\": ");
        json_string(&json_type(c.ty), &mut out);
        out.push(b'}');
    }
    out.extend_from_slice(format!("],\n{pad}  \"rows\": [").as_bytes());
    w.write_all(&out)?;
    let n = t.len();
    write_rows(w, n, chunking, |a, b, out| {
        for r in a..b {
            out.extend_from_slice(format!("\n{pad}    [").as_bytes());
            for (k, col) in t.columns.iter().enumerate() {
                if k > 0 {
                    out.extend_from_slice(b", ");
                }
                json_value(&t.cell_text(r, k), col.ty, out);
            }
            out.push(b']');
            if r + 1 < n {
                out.push(b',');
            }
        }
        Ok(())
    })?;
    let mut out = Vec::new();
    if n > 0 {
        out.extend_from_slice(format!("\n{pad}  ").as_bytes());
    }
    out.extend_from_slice(format!("]\n{pad}}}").as_bytes());
    w.write_all(&out)
}

/// Writes the JSON text of a table: one object (see [`Format::Json`]) and a line break.
pub fn write_json_to<W: std::io::Write + Send + ?Sized>(t: &OutputTable, w: &mut W) -> std::io::Result<()> {
    write_json_object(t, 0, w, Chunking::for_pool())?;
    w.write_all(b"\n")
}

/// Writes several tables as one JSON array of their objects, in order.
pub fn write_json_array_to<W: std::io::Write + Send + ?Sized>(
    tables: &[OutputTable],
    w: &mut W,
) -> std::io::Result<()> {
    w.write_all(b"[")?;
    for (k, t) in tables.iter().enumerate() {
        w.write_all(b"\n  ")?;
        write_json_object(t, 2, w, Chunking::for_pool())?;
        if k + 1 < tables.len() {
            w.write_all(b",")?;
        }
    }
    w.write_all(if tables.is_empty() { b"]\n" } else { b"\n]\n" })
}

/// Writes `t` as CSV to `path`, whole or not at all (see [`crate::outfile`]).
pub fn write_csv(t: &OutputTable, path: &Path) -> Result<(), RuntimeError> {
    crate::outfile::write_file(path, |w| write_csv_to(t, w))?;
    Ok(())
}

/// Writes every table to `dir/<name>.<extension>` in `format`, creating `dir`: all files
/// or none (see [`crate::outfile::OutputFiles`]); a directory this call created is removed
/// again when nothing could be written. Returns each path written with its row count.
pub fn write_all(
    tables: &[OutputTable],
    dir: &Path,
    format: Format,
) -> Result<Vec<(std::path::PathBuf, usize)>, RuntimeError> {
    let created = !dir.exists();
    std::fs::create_dir_all(dir).map_err(|e| RuntimeError::Io {
        msg: format!("cannot create the output directory `{}`: {e}", dir.display()),
    })?;
    let mut files = crate::outfile::OutputFiles::new();
    let mut written = Vec::with_capacity(tables.len());
    for t in tables {
        let path = dir.join(format!("{}.{}", t.name, format.extension()));
        written.push((path.clone(), t.len()));
        files.add(path, move |w| write_table_to(t, format, w));
    }
    if let Err(e) = files.commit() {
        if created {
            let _ = std::fs::remove_dir(dir);
        }
        return Err(e.into());
    }
    Ok(written)
}

/// [`write_all`] in CSV, returning the paths written.
pub fn write_csv_all(tables: &[OutputTable], dir: &Path) -> Result<Vec<std::path::PathBuf>, RuntimeError> {
    Ok(write_all(tables, dir, Format::Csv)?
        .into_iter()
        .map(|(p, _)| p)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_parts_give_the_permutation_of_one_stable_sort() {
        let mut seed = 11u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as i32
        };
        for (n, parts, distinct) in [
            (0usize, 2usize, 50),
            (1, 2, 50),
            (10, 3, 50),
            (100_000, 2, 50),
            (150_000, 5, 50),
            (70_000, 4, 50),
            (300_001, 3, 1_000_000),
            (200_000, 3, 1),
            (90_000, 8, 2),
        ] {
            // Each part sorted on (a, b) with repeats; `c` tells equal rows apart.
            let mut bounds = vec![0];
            let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
            for k in 0..parts {
                let len = n / parts + usize::from(k < n % parts);
                let mut rows: Vec<(i32, i32)> = (0..len).map(|_| (next() % distinct, next() % 3)).collect();
                rows.sort();
                for (x, y) in rows {
                    a.push(x);
                    b.push(y);
                    c.push(k as i32);
                }
                bounds.push(a.len());
            }
            let cols = vec![HostCol::I32(a), HostCol::I32(b), HostCol::I32(c)];
            let keys = vec![(0, false), (1, false)];
            let merged = merge_perm(&cols, &keys, &bounds).unwrap();
            let sorted = order_perm(&cols[..2], &keys, n).unwrap();
            assert_eq!(merged, sorted, "{n} rows in {parts} parts");
            // Keys wider than one packed word: compared column by column.
            let wide = vec![
                HostCol::I64(cols_i64(&cols[0])),
                HostCol::I64(cols_i64(&cols[1])),
                cols[2].clone(),
            ];
            let merged = merge_perm(&wide, &keys, &bounds).unwrap();
            assert_eq!(merged, sorted, "{n} rows in {parts} parts, 128-bit keys");
        }
    }

    fn cols_i64(c: &HostCol) -> Vec<i64> {
        match c {
            HostCol::I32(v) => v.iter().map(|&x| i64::from(x)).collect(),
            _ => unreachable!("an int32 column"),
        }
    }

    fn col(name: &str, ty: Type) -> Column {
        Column { name: name.into(), ty }
    }

    fn table(
        cols: Vec<HostCol>,
        columns: &[Column],
        dict: &Dictionary,
        order: &[(usize, bool)],
        limit: Option<u64>,
    ) -> OutputTable {
        build_table_parts("test", "t", columns, vec![cols], None, dict, order, limit).unwrap()
    }

    fn expected(t: &OutputTable, order: &[(usize, bool)], limit: Option<u64>) -> Vec<Vec<Value>> {
        let mut rows = match &t.data {
            Data::Cols(ct) => (0..ct.cols[0].len())
                .map(|src| (0..t.columns.len()).map(|c| t.value_at(ct, src, c)).collect())
                .collect(),
            Data::Rows(r) => r.clone(),
        };
        sort_rows(&mut rows, order, limit);
        rows
    }

    #[test]
    fn parts_each_in_order_are_merged_into_ordered_columns() {
        // Three parts (the outputs of three devices), each ordered on (y desc, x), with
        // rows of equal keys in several parts; with and without a limit.
        let order = [(1, true)];
        let columns = [col("x", Type::Int32), col("y", Type::Int64)];
        let dict = Dictionary::default();
        let mut seed = 5u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as i64
        };
        let (mut x, mut y, mut bounds) = (Vec::new(), Vec::new(), vec![0]);
        for len in [40_000usize, 0, 70_001] {
            let mut rows: Vec<(i64, i32)> = (0..len).map(|_| (next() % 300, (next() % 50) as i32)).collect();
            rows.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            for (b, a) in rows {
                x.push(a);
                y.push(b);
            }
            bounds.push(x.len());
        }
        for limit in [None, Some(1000)] {
            let cols = || vec![HostCol::I32(x.clone()), HostCol::I64(y.clone())];
            let parts: Vec<Vec<HostCol>> = bounds
                .windows(2)
                .map(|w| {
                    vec![
                        HostCol::I32(x[w[0]..w[1]].to_vec()),
                        HostCol::I64(y[w[0]..w[1]].to_vec()),
                    ]
                })
                .collect();
            let merged = build_table_parts("test", "t", &columns, parts, None, &dict, &order, limit).unwrap();
            let Data::Cols(ct) = &merged.data else { panic!() };
            assert!(ct.perm.is_none(), "merged columns are in order");
            let sorted = table(cols(), &columns, &dict, &order, limit);
            assert_eq!(merged.rows(), sorted.rows());
            assert_eq!(csv_text(&merged), csv_text(&sorted));
        }
    }

    #[test]
    fn parts_with_strings_and_keys_wider_than_a_word_are_merged_into_ordered_columns() {
        // Strings appended to the dictionary out of text order, so the parts are in the
        // order of the strings' text, not of their codes; keys of 32 + 64 + 64 bits.
        let mut dict = Dictionary::from_strings(["m", "c", "x"].map(String::from));
        for w in ["b", "zz", "a", "n"] {
            dict.intern(w).unwrap();
        }
        let words = ["a", "b", "c", "m", "n", "x", "zz"];
        let columns = [col("s", Type::String), col("a", Type::Int64), col("b", Type::Int64)];
        let mut seed = 7u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            seed >> 33
        };
        let mut parts = Vec::new();
        for len in [50_000usize, 1, 0, 80_003] {
            let mut rows: Vec<(&str, i64, i64)> = (0..len)
                .map(|_| {
                    let w = words[(next() % 7) as usize];
                    (w, (next() % 5) as i64 - 2, (next() % 1000) as i64 * 1_000_000_007)
                })
                .collect();
            rows.sort();
            parts.push(vec![
                HostCol::U32(rows.iter().map(|r| dict.code(r.0).unwrap()).collect()),
                HostCol::I64(rows.iter().map(|r| r.1).collect()),
                HostCol::I64(rows.iter().map(|r| r.2).collect()),
            ]);
        }
        for limit in [None, Some(777)] {
            let merged = build_table_parts("test", "t", &columns, parts.clone(), None, &dict, &[], limit).unwrap();
            let Data::Cols(ct) = &merged.data else { panic!() };
            assert!(ct.perm.is_none(), "merged columns are in order");
            let whole: Vec<HostCol> = (0..3)
                .map(|c| {
                    HostCol::try_concat(parts[0][c].elem(), parts.iter().map(|p| p[c].clone()).collect(), "t").unwrap()
                })
                .collect();
            let sorted = table(whole, &columns, &dict, &[], limit);
            assert_eq!(merged.rows(), sorted.rows(), "limit {limit:?}");
            assert_eq!(csv_text(&merged), csv_text(&sorted), "limit {limit:?}");
        }
        // A part out of order: the parts are put one after the other and sorted.
        let mut unordered = parts.clone();
        unordered[3][1] = HostCol::I64((0..80_003).map(|i| (i % 3) as i64).rev().collect());
        let t = build_table_parts("test", "t", &columns, unordered.clone(), None, &dict, &[], None).unwrap();
        let Data::Cols(ct) = &t.data else { panic!() };
        assert!(ct.perm.is_some(), "sorted through a permutation");
        assert_eq!(t.rows(), expected(&t, &[], None));
    }

    #[test]
    fn the_ordered_check_agrees_with_comparing_rows_for_every_key_type() {
        let mut seed = 3u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            seed >> 11
        };
        // Sorted, then one pair of adjacent rows swapped (or none) at a block's edge, in a
        // block, or at either end.
        let n = 2 * ORDER_BLOCK + 5;
        for swap in [
            None,
            Some(0),
            Some(ORDER_BLOCK - 1),
            Some(ORDER_BLOCK),
            Some(n / 2),
            Some(n - 2),
        ] {
            for desc in [false, true] {
                let mut rows: Vec<(u8, i32, f64)> = (0..n)
                    .map(|_| ((next() % 3) as u8, (next() % 7) as i32 - 3, (next() % 5) as f64 - 2.5))
                    .collect();
                rows.sort_by(|a, b| {
                    let o = a.0.cmp(&b.0).then(a.1.cmp(&b.1));
                    let o = o.then(a.2.total_cmp(&b.2));
                    if desc {
                        o.reverse()
                    } else {
                        o
                    }
                });
                if let Some(i) = swap {
                    // Swap with the next row that differs, so the order breaks.
                    if let Some(j) = (i + 1..n).find(|&j| rows[j] != rows[i]) {
                        rows.swap(i, j);
                    }
                }
                let cols = vec![
                    HostCol::U8(rows.iter().map(|r| r.0).collect()),
                    HostCol::I32(rows.iter().map(|r| r.1).collect()),
                    HostCol::F64(rows.iter().map(|r| r.2).collect()),
                    HostCol::I64(rows.iter().map(|r| i64::from(r.1)).collect()),
                ];
                // Packed (at most 64 bits) and compared row by row (wider).
                let cases: [&[(usize, bool)]; 6] = [
                    &[(0, desc), (1, desc)],
                    &[(2, desc)],
                    &[(3, desc)],
                    &[(1, desc), (0, desc)],
                    &[(0, desc), (2, desc)],
                    &[(0, desc), (3, desc), (2, desc)],
                ];
                for keys in cases {
                    for range in [0..n, 1..n - 1, ORDER_BLOCK - 3..ORDER_BLOCK + 4, 5..6] {
                        let naive = range
                            .clone()
                            .skip(1)
                            .all(|i| cmp_keyed(&cols, keys, i - 1, i) != Ordering::Greater);
                        assert_eq!(
                            is_ordered(&cols, keys, range.clone()),
                            naive,
                            "keys {keys:?}, rows {range:?}, swap {swap:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn ordered_columns_are_detected_and_kept_without_a_permutation() {
        let n = 100_000;
        let x: Vec<i32> = (0..n).map(|i| i / 10 - 5000).collect();
        let y: Vec<i32> = (0..n).map(|i| i % 10).collect();
        let columns = [col("x", Type::Int32), col("y", Type::Int32)];
        let dict = Dictionary::default();
        let t = table(
            vec![HostCol::I32(x.clone()), HostCol::I32(y.clone())],
            &columns,
            &dict,
            &[],
            None,
        );
        let Data::Cols(ct) = &t.data else { panic!() };
        assert!(ct.perm.is_none());
        assert_eq!(t.len(), n as usize);
        assert_eq!(t.row(12), vec![Value::Int32(-4999), Value::Int32(2)]);
        assert!(csv_text(&t).starts_with("x,y\n-5000,0\n-5000,1\n"));
        // Descending on y is not the order of the columns: a permutation is built.
        let t = table(
            vec![HostCol::I32(x), HostCol::I32(y)],
            &columns,
            &dict,
            &[(1, true)],
            Some(25),
        );
        let Data::Cols(ct) = &t.data else { panic!() };
        assert!(ct.perm.is_some());
        assert_eq!(t.rows(), expected(&t, &[(1, true)], Some(25)));
    }

    #[test]
    fn unordered_columns_sort_like_rows_strings_by_text() {
        let dict = Dictionary::from_strings(["b", "a", "B", "c, d", "é"].map(String::from));
        let code = |s: &str| dict.code(s).unwrap();
        let mut state = 17u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let n = 50_000;
        let s: Vec<u32> = (0..n)
            .map(|_| code(["b", "a", "B", "c, d", "é"][(next() % 5) as usize]))
            .collect();
        let v: Vec<i64> = (0..n).map(|_| (next() % 100) as i64 - 50).collect();
        let f: Vec<f64> = (0..n)
            .map(|_| [-0.0, 0.0, 1.5, f64::NAN, -2.0][(next() % 5) as usize])
            .collect();
        let columns = [
            col("s", Type::String),
            col("v", Type::Decimal(2)),
            col("f", Type::Float64),
        ];
        for (order, limit) in [
            (vec![], None),
            (vec![(1, true)], Some(100)),
            (vec![(2, false), (0, true)], None),
        ] {
            let cols = vec![
                HostCol::U32(s.clone()),
                HostCol::I64(v.clone()),
                HostCol::F64(f.clone()),
            ];
            let t = table(cols, &columns, &dict, &order, limit);
            let got = t.rows();
            let want = expected(&t, &order, limit);
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(&want) {
                assert_eq!(format!("{g:?}"), format!("{w:?}"));
            }
        }
    }

    /// A reference for the text formats: row by row, each value's text from
    /// [`format_value`], one buffer, no chunks.
    fn reference(t: &OutputTable, format: &str, max_rows: Option<usize>) -> Vec<u8> {
        let rows = t.rows();
        let mut out = Vec::new();
        match format {
            "csv" | "tsv" => {
                let d = if format == "csv" {
                    Delimited::Csv
                } else {
                    Delimited::Tsv
                };
                out.extend_from_slice(&d.header(t));
                for row in &rows {
                    for (i, (v, c)) in row.iter().zip(&t.columns).enumerate() {
                        if i > 0 {
                            out.push(d.sep());
                        }
                        d.field(&format_value(v, c.ty), &mut out);
                    }
                    out.push(b'\n');
                }
            }
            "json" => {
                out.extend_from_slice(b"{\n  \"name\": ");
                json_string(&t.name, &mut out);
                out.extend_from_slice(b",\n  \"columns\": [");
                for (i, c) in t.columns.iter().enumerate() {
                    if i > 0 {
                        out.extend_from_slice(b", ");
                    }
                    out.extend_from_slice(b"{\"name\": ");
                    json_string(&c.name, &mut out);
                    out.extend_from_slice(b", \"type\": ");
                    json_string(&json_type(c.ty), &mut out);
                    out.push(b'}');
                }
                out.extend_from_slice(b"],\n  \"rows\": [");
                for (r, row) in rows.iter().enumerate() {
                    out.extend_from_slice(b"\n    [");
                    for (i, (v, c)) in row.iter().zip(&t.columns).enumerate() {
                        if i > 0 {
                            out.extend_from_slice(b", ");
                        }
                        json_value(&format_value(v, c.ty), c.ty, &mut out);
                    }
                    out.push(b']');
                    if r + 1 < rows.len() {
                        out.push(b',');
                    }
                }
                if !rows.is_empty() {
                    out.extend_from_slice(b"\n  ");
                }
                out.extend_from_slice(b"]\n}\n");
            }
            "table" => {
                let shown = max_rows.map_or(rows.len(), |m| m.min(rows.len()));
                let cells: Vec<Vec<String>> = rows[..shown]
                    .iter()
                    .map(|row| {
                        row.iter()
                            .zip(&t.columns)
                            .map(|(v, c)| display_cell(&format_value(v, c.ty)))
                            .collect()
                    })
                    .collect();
                let mut widths: Vec<usize> = t.columns.iter().map(|c| c.name.chars().count()).collect();
                for row in &cells {
                    for (w, c) in widths.iter_mut().zip(row) {
                        *w = (*w).max(c.chars().count());
                    }
                }
                let line = |out: &mut Vec<u8>, row: &[String]| {
                    let mut s = String::new();
                    for (i, c) in row.iter().enumerate() {
                        if i > 0 {
                            s.push_str(" | ");
                        }
                        let pad = " ".repeat(widths[i] - c.chars().count());
                        if is_numeric(t.columns[i].ty) {
                            s.push_str(&pad);
                            s.push_str(c);
                        } else {
                            s.push_str(c);
                            s.push_str(&pad);
                        }
                    }
                    out.extend_from_slice(s.trim_end().as_bytes());
                    out.push(b'\n');
                };
                let names: Vec<String> = t.columns.iter().map(|c| c.name.clone()).collect();
                line(&mut out, &names);
                let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
                out.extend_from_slice(format!("{}\n", rule.join("-+-")).as_bytes());
                for row in &cells {
                    line(&mut out, row);
                }
                let n = rows.len();
                let plural = |k: usize| if k == 1 { "" } else { "s" };
                if shown < n {
                    out.extend_from_slice(format!("… {} more row{}\n", n - shown, plural(n - shown)).as_bytes());
                }
                out.extend_from_slice(format!("{n} row{}\n", plural(n)).as_bytes());
            }
            _ => unreachable!(),
        }
        out
    }

    /// The parallel writer's text of `t` in `format` under `c`.
    fn chunked(t: &OutputTable, format: &str, c: Chunking, max_rows: Option<usize>) -> Vec<u8> {
        let mut out = Vec::new();
        match format {
            "csv" => Delimited::Csv.write(t, &mut out, c).unwrap(),
            "tsv" => Delimited::Tsv.write(t, &mut out, c).unwrap(),
            "json" => {
                write_json_object(t, 0, &mut out, c).unwrap();
                out.push(b'\n');
            }
            "table" => write_table_text_chunked(t, max_rows, &mut out, c).unwrap(),
            _ => unreachable!(),
        }
        out
    }

    /// Random columns of every type, strings with separators, quotes, line breaks,
    /// tabs and backslashes, floats with signed zeros, infinities and NaN.
    fn random_table(
        n: usize,
        seed: u64,
        dict: &Dictionary,
        order: &[(usize, bool)],
        limit: Option<u64>,
    ) -> OutputTable {
        let mut state = seed | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let s: Vec<u32> = (0..n).map(|_| (next() % dict.len() as u64) as u32).collect();
        let i: Vec<i32> = (0..n).map(|_| next() as i32).collect();
        let l: Vec<i64> = (0..n).map(|_| (next() as i64) >> (next() % 64)).collect();
        let d: Vec<i64> = (0..n).map(|_| (next() % 200_001) as i64 - 100_000).collect();
        let wd: Vec<i128> = (0..n)
            .map(|_| ((next() as i128) << (next() % 60)) - (1 << 90))
            .collect();
        let f: Vec<f64> = (0..n)
            .map(|_| match next() % 8 {
                0 => [-0.0, 0.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY][(next() % 5) as usize],
                1 => f64::from_bits(next()),
                _ => (next() % 1_000_000) as f64 / 1000.0 - 500.0,
            })
            .collect();
        let dt: Vec<i32> = (0..n).map(|_| (next() % 100_000) as i32 - 30_000).collect();
        let b: Vec<u8> = (0..n).map(|_| (next() % 2) as u8).collect();
        let columns = [
            col("s", Type::String),
            col("i, \"x\"", Type::Int32),
            col("l", Type::Int64),
            col("d", Type::Decimal(2)),
            col("wd", Type::WideDecimal(3)),
            col("f", Type::Float64),
            col("dt", Type::Date),
            col("b\tc", Type::Bool),
        ];
        let cols = vec![
            HostCol::U32(s),
            HostCol::I32(i),
            HostCol::I64(l),
            HostCol::I64(d),
            HostCol::I128(wd),
            HostCol::F64(f),
            HostCol::I32(dt),
            HostCol::U8(b),
        ];
        table(cols, &columns, dict, order, limit)
    }

    #[test]
    fn parallel_text_is_the_sequential_text() {
        let dict = Dictionary::from_strings(
            [
                "plain",
                "a,b",
                "q\"uote\"",
                "new\nline",
                "cr\rlf",
                "tab\there",
                "back\\slash",
                "é",
                "",
                " ",
            ]
            .map(String::from),
        );
        let chunkings = [
            Chunking { rows: 1, batch: 1 },
            Chunking { rows: 7, batch: 3 },
            Chunking { rows: 64, batch: 2 },
            Chunking::for_pool(),
        ];
        for (n, order, limit) in [
            (0usize, vec![], None),
            (1, vec![], None),
            (2, vec![(0, false)], None),
            (7, vec![], None),
            (21, vec![(5, true)], None),
            (22, vec![], None),
            (1000, vec![(1, false)], None),
            (1003, vec![(0, true), (2, false)], Some(500)),
            (20_003, vec![(1, false)], None),
        ] {
            let t = random_table(n, n as u64 * 7919 + 3, &dict, &order, limit);
            let rows = OutputTable::from_rows("t", t.columns.clone(), t.rows());
            for format in ["csv", "tsv", "json", "table"] {
                for max_rows in [None, Some(5)] {
                    if format != "table" && max_rows.is_some() {
                        continue;
                    }
                    let want = reference(&t, format, max_rows);
                    for c in chunkings {
                        if n > 5000 && c.rows < 64 {
                            continue;
                        }
                        let what = format!("{format}, {n} rows, {c:?}, at most {max_rows:?}");
                        assert!(chunked(&t, format, c, max_rows) == want, "columns: {what}");
                        assert!(chunked(&rows, format, c, max_rows) == want, "values: {what}");
                    }
                }
            }
            // The public writers are the same text.
            let mut csv = Vec::new();
            write_csv_to(&t, &mut csv).unwrap();
            assert!(csv == reference(&t, "csv", None));
            let mut tsv = Vec::new();
            write_tsv_to(&t, &mut tsv).unwrap();
            assert!(tsv == reference(&t, "tsv", None));
            let mut json = Vec::new();
            write_json_to(&t, &mut json).unwrap();
            assert!(json == reference(&t, "json", None));
            assert!(format_table_max(&t, Some(5)).as_bytes() == reference(&t, "table", Some(5)));
        }
    }

    /// A writer that fails once it has taken `room` bytes.
    struct Full {
        taken: Vec<u8>,
        room: usize,
    }

    impl std::io::Write for Full {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.taken.len() + buf.len() > self.room {
                return Err(std::io::Error::other("full"));
            }
            self.taken.extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn parallel_writes_stop_at_the_first_error_in_order() {
        let text = |a: usize, b: usize, out: &mut Vec<u8>| {
            for r in a..b {
                out.extend_from_slice(format!("{r}\n").as_bytes());
            }
        };
        let mut all = Vec::new();
        text(0, 1000, &mut all);
        let c = Chunking { rows: 10, batch: 4 };
        // A chunk that fails to format: the chunks before it and nothing else.
        let mut out = Vec::new();
        let e = write_rows(&mut out, 1000, c, |a, b, out| {
            if (a..b).contains(&537) || (a..b).contains(&911) {
                return Err(std::io::Error::other(format!("row {a}")));
            }
            text(a, b, out);
            Ok(())
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "row 530");
        let mut want = Vec::new();
        text(0, 530, &mut want);
        assert!(out == want);
        // A writer that fails: the error, and only whole chunks before it.
        let mut full = Full {
            taken: Vec::new(),
            room: 2000,
        };
        let e = write_rows(&mut full, 1000, c, |a, b, out| {
            text(a, b, out);
            Ok(())
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "full");
        assert!(full.taken.len() <= 2000 && all.starts_with(&full.taken));
        // No rows: nothing written, no call that fails matters.
        let mut out = Vec::new();
        write_rows(&mut out, 0, c, |_, _, _| Ok(())).unwrap();
        assert!(out.is_empty());
    }

    /// Times the text formats written to a file under the temporary directory, one
    /// thread formatting and writing chunk after chunk against [`write_rows`]
    /// (`cargo test -p fox-runtime --lib output_timing -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn output_timing() {
        use std::io::Write;
        let n = 4_000_000usize;
        let dict = Dictionary::from_strings((0..1000).map(|k| format!("name {k}, with a comma")));
        let ints = table(
            vec![
                HostCol::I32((0..n as i32).map(|k| k / 7).collect()),
                HostCol::I32((0..n as i32).map(|k| k % 7919).collect()),
            ],
            &[col("x", Type::Int32), col("y", Type::Int32)],
            &dict,
            &[],
            None,
        );
        let mixed = random_table(n / 4, 5, &dict, &[], None);
        let path = std::env::temp_dir().join(format!("fox-output-timing-{}", std::process::id()));
        for (what, t) in [("2 × int32", &ints), ("8 columns", &mixed)] {
            for d in [Delimited::Csv, Delimited::Tsv] {
                let fields = d.strings(t).unwrap();
                let one = std::time::Instant::now();
                let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
                let rows = 1 << 16;
                let mut out = Vec::new();
                for a in (0..t.len()).step_by(rows) {
                    out.clear();
                    d.lines(t, &fields, a, (a + rows).min(t.len()), &mut out);
                    f.write_all(&out).unwrap();
                }
                f.flush().unwrap();
                let one = one.elapsed();
                let par = std::time::Instant::now();
                let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
                d.write(t, &mut f, Chunking::for_pool()).unwrap();
                f.flush().unwrap();
                let par = par.elapsed();
                let bytes = std::fs::metadata(&path).unwrap().len();
                println!(
                    "{what} {d:?}: {} rows, {bytes} bytes: one thread {:.3} s, write_rows on {} threads {:.3} s",
                    t.len(),
                    one.as_secs_f64(),
                    rayon::current_num_threads(),
                    par.as_secs_f64()
                );
            }
        }
        let _ = std::fs::remove_file(&path);
    }
}
