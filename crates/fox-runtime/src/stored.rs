//! Database columns as host memory keeps them: the column a plan reads, or a narrower
//! encoding of it that is widened when it is read.
//!
//! Invariant: widening a stored column gives back exactly the column it was packed from
//! (same element type, same values, same length); only the bytes held differ. Packing
//! never changes which values a plan sees, so every reader may widen any rows it needs
//! at any time.

use crate::HostCol;
use fox_kernel::Elem;
use rayon::prelude::*;
use std::borrow::Cow;
use std::sync::Arc;

/// Unsigned offsets of the narrowest width that holds a column's range.
#[derive(Debug, Clone, PartialEq)]
pub enum Small {
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
}

impl Small {
    fn len(&self) -> usize {
        match self {
            Small::U8(v) => v.len(),
            Small::U16(v) => v.len(),
            Small::U32(v) => v.len(),
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Small::U8(v) => v.len(),
            Small::U16(v) => 2 * v.len(),
            Small::U32(v) => 4 * v.len(),
        }
    }

    /// Room for `n` offsets of `bytes` bytes each (1, 2 or 4).
    fn with_capacity(bytes: usize, n: usize, what: &str) -> Result<Small, String> {
        use crate::alloc::try_with_capacity;
        Ok(match bytes {
            1 => Small::U8(try_with_capacity(n, what)?),
            2 => Small::U16(try_with_capacity(n, what)?),
            _ => Small::U32(try_with_capacity(n, what)?),
        })
    }

    /// Appends the offsets `off(0..n)` (on all cores; each fits the width).
    fn extend(&mut self, n: usize, off: impl Fn(usize) -> u64 + Sync + Send) {
        let rows = (0..n).into_par_iter();
        match self {
            Small::U8(v) => v.par_extend(rows.map(|i| off(i) as u8)),
            Small::U16(v) => v.par_extend(rows.map(|i| off(i) as u16)),
            Small::U32(v) => v.par_extend(rows.map(|i| off(i) as u32)),
        }
    }
}

/// The bytes of the narrowest offset that holds `span` when narrower than `limit`.
fn width(span: u64, limit: usize) -> Option<usize> {
    [1usize, 2, 4]
        .into_iter()
        .find(|&w| w < limit && span <= u64::MAX >> (64 - 8 * w))
}

/// Applies `$body` to the offsets of a [`Small`] as a slice named `$v`.
macro_rules! each_small {
    ($s:expr, $v:ident => $body:expr) => {
        match $s {
            $crate::stored::Small::U8($v) => $body,
            $crate::stored::Small::U16($v) => $body,
            $crate::stored::Small::U32($v) => $body,
        }
    };
}
pub(crate) use each_small;

/// A loaded database column.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredCol {
    /// The column as a plan reads it.
    Plain(HostCol),
    /// An int32 or int64 column (`elem`) as offsets from its least value `base`.
    Offset { elem: Elem, base: i64, offsets: Small },
    /// A string column as the position of each row's dictionary code among the column's
    /// distinct codes `codes` (ascending).
    Codes { codes: Arc<Vec<u32>>, at: Small },
}

const WHAT: &str = "a loaded column, packed";

/// The bytes of one packed row.
fn small_width(s: &Small) -> usize {
    match s {
        Small::U8(_) => 1,
        Small::U16(_) => 2,
        Small::U32(_) => 4,
    }
}

impl StoredCol {
    /// `col` in the fewest bytes this type knows: integer columns (int32, int64) whose
    /// range fits a narrower width as offsets from their least value, and string columns
    /// (`distinct`, their distinct codes, is `Some`) of at most 65,536 distinct strings
    /// as positions among them; any other column as it is, and every column as it is
    /// when memory for the packed copy runs out.
    pub fn pack(col: HostCol, distinct: Option<&Arc<Vec<u32>>>) -> StoredCol {
        match Self::pack_pieces(col.elem(), vec![col], distinct, WHAT) {
            Ok(s) => s,
            Err(mut pieces) => StoredCol::Plain(pieces.pop().expect("the one piece given back")),
        }
    }

    /// The column of element type `elem` made of `pieces` (in order), packed as
    /// [`StoredCol::pack`] packs a column, each piece freed as soon as it is copied; the
    /// pieces back, untouched, when the column has no narrower form or memory for it
    /// runs out (`what` names it then).
    pub fn pack_pieces(
        elem: Elem,
        pieces: Vec<HostCol>,
        distinct: Option<&Arc<Vec<u32>>>,
        what: &str,
    ) -> Result<StoredCol, Vec<HostCol>> {
        let n: usize = pieces.iter().map(HostCol::len).sum();
        if n == 0 || pieces.iter().any(|p| p.elem() != elem) {
            return Err(pieces);
        }
        // The offsets' origin: the least value, or the distinct codes.
        let (base, codes, span) = match (elem, distinct) {
            (Elem::U32, Some(codes)) => (0, Some(codes), codes.len().saturating_sub(1) as u64),
            (Elem::I32 | Elem::I64, _) => {
                let range = |p: &HostCol| -> (i64, i64) {
                    let fold = |a: (i64, i64), x: i64| (a.0.min(x), a.1.max(x));
                    let id = || (i64::MAX, i64::MIN);
                    let both = |a: (i64, i64), b: (i64, i64)| (a.0.min(b.0), a.1.max(b.1));
                    match p {
                        HostCol::I32(v) => v.par_iter().fold(id, |a, &x| fold(a, x as i64)).reduce(id, both),
                        HostCol::I64(v) => v.par_iter().fold(id, |a, &x| fold(a, x)).reduce(id, both),
                        _ => id(),
                    }
                };
                let (lo, hi) = pieces
                    .iter()
                    .map(range)
                    .fold((i64::MAX, i64::MIN), |a, b| (a.0.min(b.0), a.1.max(b.1)));
                let span = (hi as i128 - lo as i128) as u128;
                if span > u32::MAX as u128 {
                    return Err(pieces);
                }
                (lo, None, span as u64)
            }
            _ => return Err(pieces),
        };
        let Some(bytes) = width(span, if codes.is_some() { 4 } else { elem.size() }) else {
            return Err(pieces);
        };
        let Ok(mut at) = Small::with_capacity(bytes, n, what) else {
            return Err(pieces);
        };
        for p in pieces {
            match (&p, codes) {
                (HostCol::U32(v), Some(codes)) => at.extend(v.len(), |i| codes.partition_point(|&c| c < v[i]) as u64),
                (HostCol::I32(v), _) => at.extend(v.len(), |i| (v[i] as i64 - base) as u64),
                (HostCol::I64(v), _) => at.extend(v.len(), |i| (v[i] as i128 - base as i128) as u64),
                _ => unreachable!("every piece is of the column's element type"),
            }
        }
        Ok(match codes {
            Some(codes) => StoredCol::Codes {
                codes: codes.clone(),
                at,
            },
            None => StoredCol::Offset {
                elem,
                base,
                offsets: at,
            },
        })
    }

    /// The element type of the column a plan reads.
    pub fn elem(&self) -> Elem {
        match self {
            StoredCol::Plain(h) => h.elem(),
            StoredCol::Offset { elem, .. } => *elem,
            StoredCol::Codes { .. } => Elem::U32,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            StoredCol::Plain(h) => h.len(),
            StoredCol::Offset { offsets, .. } => offsets.len(),
            StoredCol::Codes { at, .. } => at.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes host memory holds for the column (the distinct codes of a string column
    /// are shared with the table and not counted).
    pub fn bytes(&self) -> usize {
        match self {
            StoredCol::Plain(h) => h.len() * h.elem().size(),
            StoredCol::Offset { offsets, .. } => offsets.bytes(),
            StoredCol::Codes { at, .. } => at.bytes(),
        }
    }

    /// The bytes `n` packed rows take (with the distinct codes of a string column), as
    /// a backend that widens them on its device holds them: the rows, then for a string
    /// column its codes from the next multiple of 4 bytes ([`StoredCol::codes_at`]); 0
    /// for a column held as it is read.
    pub fn packed_bytes(&self, n: usize) -> usize {
        match self {
            StoredCol::Plain(_) => 0,
            StoredCol::Offset { offsets, .. } => n * small_width(offsets),
            StoredCol::Codes { codes, .. } => self.codes_at(n) + 4 * codes.len(),
        }
    }

    /// Where a string column's distinct codes begin in the bytes of `n` of its packed
    /// rows as [`StoredCol::packed_bytes`] lays them out: the rows' bytes rounded up to a
    /// multiple of 4 (0 for any other column).
    pub fn codes_at(&self, n: usize) -> usize {
        match self {
            StoredCol::Codes { at, .. } => (n * small_width(at)).next_multiple_of(4),
            _ => 0,
        }
    }

    /// The packed rows `a..b` as bytes (native order), their width in bytes, and what
    /// widens them: `Ok(base)` for an integer column, `Err(codes)` for a string column;
    /// `None` for a column held as it is read.
    #[allow(clippy::type_complexity)]
    pub fn packed_rows(&self, a: usize, b: usize) -> Option<(&[u8], u32, Result<i64, &[u32]>)> {
        fn bytes<T: Copy>(v: &[T]) -> &[u8] {
            // SAFETY: u8, u16 and u32 have no padding and every byte is initialised.
            unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
        }
        let (s, how) = match self {
            StoredCol::Plain(_) => return None,
            StoredCol::Offset { base, offsets, .. } => (offsets, Ok(*base)),
            StoredCol::Codes { codes, at } => (at, Err(codes.as_slice())),
        };
        Some(match s {
            Small::U8(v) => (bytes(&v[a..b]), 1, how),
            Small::U16(v) => (bytes(&v[a..b]), 2, how),
            Small::U32(v) => (bytes(&v[a..b]), 4, how),
        })
    }

    /// The column as it is held when it is not packed.
    pub fn plain(&self) -> Option<&HostCol> {
        match self {
            StoredCol::Plain(h) => Some(h),
            _ => None,
        }
    }

    /// The host bytes every upload of the column's rows copies from: a plain column's
    /// values, a packed one's packed rows (every [`StoredCol::packed_rows`] lies within).
    pub fn storage(&self) -> &[u8] {
        fn bytes<T: Copy>(v: &[T]) -> &[u8] {
            // SAFETY: the element types of columns have no padding and every byte is
            // initialised.
            unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
        }
        let s = match self {
            StoredCol::Plain(h) => {
                return match h {
                    HostCol::U8(v) => bytes(v),
                    HostCol::I32(v) => bytes(v),
                    HostCol::U32(v) => bytes(v),
                    HostCol::I64(v) => bytes(v),
                    HostCol::U64(v) => bytes(v),
                    HostCol::F64(v) => bytes(v),
                    HostCol::I128(v) => bytes(v),
                }
            }
            StoredCol::Offset { offsets, .. } => offsets,
            StoredCol::Codes { at, .. } => at,
        };
        match s {
            Small::U8(v) => bytes(v),
            Small::U16(v) => bytes(v),
            Small::U32(v) => bytes(v),
        }
    }

    /// The rows `a..b` of the column a plan reads, as a new column (on all cores); an
    /// error for rows past the column.
    pub fn slice(&self, a: usize, b: usize, what: &str) -> Result<HostCol, String> {
        if a > b || b > self.len() {
            return Err(format!("{what}: rows {a}..{b} of a column of {} rows", self.len()));
        }
        match self {
            StoredCol::Plain(h) => h.try_slice(a..b, what),
            StoredCol::Offset { elem, base, offsets } => {
                let base = *base;
                Ok(each_small!(offsets, v => {
                    let v = &v[a..b];
                    match elem {
                        Elem::I32 => HostCol::I32(crate::alloc::try_par_collect(
                            v.par_iter().map(|&o| (base + o as i64) as i32),
                            what,
                        )?),
                        _ => HostCol::I64(crate::alloc::try_par_collect(v.par_iter().map(|&o| base + o as i64), what)?),
                    }
                }))
            }
            StoredCol::Codes { codes, at } => Ok(each_small!(at, v => HostCol::U32(crate::alloc::try_par_collect(
                v[a..b].par_iter().map(|&k| codes[k as usize]),
                what
            )?))),
        }
    }

    /// The rows `index(rows[i])` (each in range) of the column a plan reads, in the
    /// order of `rows`, gathered and widened in parallel.
    pub fn try_par_pick_by<I: Copy + Send + Sync>(
        &self,
        rows: &[I],
        index: impl Fn(I) -> usize + Send + Sync,
        what: &str,
    ) -> Result<HostCol, String> {
        use crate::alloc::try_par_collect;
        if let StoredCol::Plain(h) = self {
            return h.try_par_pick_by(rows, index, what);
        }
        let rows = rows.par_iter().with_min_len(1 << 14);
        Ok(match self {
            StoredCol::Plain(_) => unreachable!("picked above"),
            StoredCol::Offset { elem, base, offsets } => {
                let base = *base;
                each_small!(offsets, v => match elem {
                    Elem::I32 => HostCol::I32(try_par_collect(rows.map(|&r| (base + v[index(r)] as i64) as i32), what)?),
                    _ => HostCol::I64(try_par_collect(rows.map(|&r| base + v[index(r)] as i64), what)?),
                })
            }
            StoredCol::Codes { codes, at } => {
                each_small!(at, v => HostCol::U32(try_par_collect(rows.map(|&r| codes[v[index(r)] as usize]), what)?))
            }
        })
    }

    /// The whole column a plan reads: borrowed when it is held as it is, else widened.
    pub fn widen(&self, what: &str) -> Result<Cow<'_, HostCol>, String> {
        match self {
            StoredCol::Plain(h) => Ok(Cow::Borrowed(h)),
            _ => self.slice(0, self.len(), what).map(Cow::Owned),
        }
    }

    /// Row `r` as an integer in the order of the column's values (floats in their total
    /// order, string codes by code: equal values give equal integers).
    pub fn order_at(&self, r: usize) -> i128 {
        match self {
            StoredCol::Plain(h) => match h {
                HostCol::U8(v) => v[r].into(),
                HostCol::I32(v) => v[r].into(),
                HostCol::U32(v) => v[r].into(),
                HostCol::I64(v) => v[r].into(),
                HostCol::U64(v) => v[r].into(),
                HostCol::I128(v) => v[r],
                HostCol::F64(v) => {
                    // The total order of `f64::total_cmp`, as a signed integer.
                    let b = v[r].to_bits() as i64;
                    (b ^ (((b >> 63) as u64) >> 1) as i64).into()
                }
            },
            StoredCol::Offset { base, offsets, .. } => *base as i128 + each_small!(offsets, v => v[r] as i128),
            StoredCol::Codes { codes, at } => codes[each_small!(at, v => v[r] as usize)].into(),
        }
    }

    /// Row `r` as a column of one row.
    pub fn row(&self, r: usize) -> HostCol {
        self.slice(r, r + 1, "one row of a loaded column")
            .expect("one row is always allocated")
    }
}

/// The column of element type `elem` made of `pieces` (in order), as it is: allocated
/// once, each piece freed as soon as it is copied; one piece is the column itself.
pub fn concat_pieces(elem: Elem, mut pieces: Vec<HostCol>, what: &str) -> Result<HostCol, String> {
    if pieces.len() == 1 && pieces[0].elem() == elem {
        return Ok(pieces.pop().expect("one piece"));
    }
    if let Some(p) = pieces.iter().find(|p| p.elem() != elem) {
        return Err(format!("{what}: a piece is {:?}, not {elem:?}", p.elem()));
    }
    let n: usize = pieces.iter().map(HostCol::len).sum();
    macro_rules! concat_as {
        ($variant:ident) => {{
            let mut whole = crate::alloc::try_with_capacity(n, what)?;
            for p in pieces {
                if let HostCol::$variant(v) = p {
                    whole.par_extend(v.into_par_iter());
                }
            }
            HostCol::$variant(whole)
        }};
    }
    Ok(match elem {
        Elem::U8 => concat_as!(U8),
        Elem::I32 => concat_as!(I32),
        Elem::U32 => concat_as!(U32),
        Elem::I64 => concat_as!(I64),
        Elem::U64 => concat_as!(U64),
        Elem::F64 => concat_as!(F64),
        Elem::I128 => concat_as!(I128),
    })
}

/// One part's piece of a string column before the dictionary is built: the part's own
/// string ids (each part of a table numbers its strings itself) as offsets from the least
/// of them, in the narrowest width that holds them.
#[derive(Debug, Clone, PartialEq)]
pub struct IdPiece {
    first: u32,
    ids: Small,
}

impl IdPiece {
    /// The piece of string ids `ids`, packed; `ids` is freed.
    pub fn pack(ids: Vec<u32>, what: &str) -> Result<IdPiece, String> {
        let lo = ids.par_iter().copied().min().unwrap_or(0);
        let hi = ids.par_iter().copied().max().unwrap_or(0);
        let bytes = width(u64::from(hi - lo), 8).expect("a span of 32 bits fits 4 bytes");
        let mut packed = Small::with_capacity(bytes, ids.len(), what)?;
        packed.extend(ids.len(), |i| u64::from(ids[i] - lo));
        Ok(IdPiece { first: lo, ids: packed })
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The greatest offset (0 for an empty piece).
    fn span(&self) -> usize {
        each_small!(&self.ids, v => v.par_iter().map(|&o| o as usize).max().unwrap_or(0))
    }

    /// Appends `f(offset)` of every row, in order, to `out` (on all cores).
    fn extend<T: Send>(&self, out: &mut Vec<T>, f: impl Fn(usize) -> T + Sync + Send) {
        each_small!(&self.ids, v => out.par_extend(v.par_iter().map(|&o| f(o as usize))))
    }
}

/// The string column made of `pieces` (in order), piece `k` a part's string ids whose
/// dictionary codes are `remaps[k]` (indexed by id): its distinct codes (ascending), and
/// the column packed as positions among them ([`StoredCol::Codes`]), or as its codes
/// when it has more than 65,536. Each piece is freed once copied; each part's table of
/// positions (one entry per id in its piece's span) is held while its piece is copied.
/// `codes` is the dictionary's size (every code is less).
pub fn pack_string_pieces(
    pieces: Vec<IdPiece>,
    remaps: &[&[u32]],
    codes: usize,
    what: &str,
) -> Result<(Arc<Vec<u32>>, StoredCol), String> {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    if pieces.len() != remaps.len() {
        return Err(format!("{what}: {} pieces and {} parts", pieces.len(), remaps.len()));
    }
    let spans: Vec<usize> = pieces.iter().map(IdPiece::span).collect();
    for ((p, &span), remap) in pieces.iter().zip(&spans).zip(remaps) {
        let end = p.first as usize + span;
        if !p.is_empty() && end >= remap.len() {
            return Err(format!("{what}: string id {end} of a part of {} strings", remap.len()));
        }
        if let Some(&c) = remap.iter().find(|&&c| c as usize >= codes) {
            return Err(format!("{what}: code {c} is not in the dictionary of {codes} strings"));
        }
    }
    // The distinct codes: one bit per code, set for every id a piece holds.
    let words: Vec<AtomicU64> =
        crate::alloc::try_par_collect((0..codes.div_ceil(64)).into_par_iter().map(|_| AtomicU64::new(0)), what)?;
    for (p, remap) in pieces.iter().zip(remaps) {
        let first = p.first as usize;
        each_small!(&p.ids, v => v.par_iter().for_each(|&o| {
            let c = remap[first + o as usize];
            let (w, bit) = (&words[c as usize / 64], 1u64 << (c % 64));
            // Read first: most rows repeat a code whose bit is set, and reads share the line.
            if w.load(Relaxed) & bit == 0 {
                w.fetch_or(bit, Relaxed);
            }
        }));
    }
    let n: usize = words.iter().map(|w| w.load(Relaxed).count_ones() as usize).sum();
    let mut distinct = crate::alloc::try_with_capacity(n, what)?;
    for (k, w) in words.iter().enumerate() {
        let mut bits = w.load(Relaxed);
        while bits != 0 {
            distinct.push((k * 64) as u32 + bits.trailing_zeros());
            bits &= bits - 1;
        }
    }
    drop(words);
    let distinct = Arc::new(distinct);
    let rows: usize = pieces.iter().map(IdPiece::len).sum();
    // A part's table of codes (or positions) by offset, one entry per offset of its span.
    let by_offset = |first: u32, remap: &[u32], span: usize, f: &(dyn Fn(u32) -> u32 + Sync)| {
        crate::alloc::try_par_collect(
            (0..span + 1).into_par_iter().map(|o| f(remap[first as usize + o])),
            what,
        )
    };
    let col = match width(distinct.len().saturating_sub(1) as u64, 4) {
        Some(bytes) if rows > 0 => {
            let mut at = Small::with_capacity(bytes, rows, what)?;
            for ((p, &span), remap) in pieces.into_iter().zip(&spans).zip(remaps) {
                if p.is_empty() {
                    continue;
                }
                let pos = by_offset(p.first, remap, span, &|c| distinct.partition_point(|&d| d < c) as u32)?;
                match &mut at {
                    Small::U8(out) => p.extend(out, |o| pos[o] as u8),
                    Small::U16(out) => p.extend(out, |o| pos[o] as u16),
                    Small::U32(out) => p.extend(out, |o| pos[o]),
                }
            }
            StoredCol::Codes {
                codes: distinct.clone(),
                at,
            }
        }
        _ => {
            let mut out: Vec<u32> = crate::alloc::try_with_capacity(rows, what)?;
            for ((p, &span), remap) in pieces.into_iter().zip(&spans).zip(remaps) {
                if p.is_empty() {
                    continue;
                }
                let code = by_offset(p.first, remap, span, &|c| c)?;
                p.extend(&mut out, |o| code[o]);
            }
            StoredCol::Plain(HostCol::U32(out))
        }
    };
    Ok((distinct, col))
}

/// A column a load reads: a database's stored column or a column held as it is read.
#[derive(Debug, Clone, Copy)]
pub enum ColRef<'a> {
    Host(&'a HostCol),
    Stored(&'a StoredCol),
}

impl<'a> ColRef<'a> {
    pub fn len(&self) -> usize {
        match self {
            ColRef::Host(h) => h.len(),
            ColRef::Stored(s) => s.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element type of the column a plan reads.
    pub fn elem(&self) -> Elem {
        match self {
            ColRef::Host(h) => h.elem(),
            ColRef::Stored(s) => s.elem(),
        }
    }

    /// The whole column a plan reads: borrowed unless it is packed.
    pub fn widen(&self, what: &str) -> Result<Cow<'a, HostCol>, String> {
        match *self {
            ColRef::Host(h) => Ok(Cow::Borrowed(h)),
            ColRef::Stored(s) => s.widen(what),
        }
    }

    /// The column held as it is read, when it is not packed.
    pub fn plain(&self) -> Option<&'a HostCol> {
        match *self {
            ColRef::Host(h) => Some(h),
            ColRef::Stored(s) => s.plain(),
        }
    }

    /// The rows `a..b` of the column a plan reads, copied.
    pub fn slice(&self, a: usize, b: usize, what: &str) -> Result<HostCol, String> {
        match self {
            ColRef::Host(h) => h.try_slice(a..b, what),
            ColRef::Stored(s) => s.slice(a, b, what),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(col: HostCol, distinct: Option<Arc<Vec<u32>>>) -> StoredCol {
        let s = StoredCol::pack(col.clone(), distinct.as_ref());
        assert_eq!(s.len(), col.len());
        assert_eq!(s.elem(), col.elem());
        assert_eq!(s.widen("t").unwrap().into_owned(), col);
        for (a, b) in [(0, 0), (0, col.len()), (col.len() / 3, col.len() / 2)] {
            assert_eq!(s.slice(a, b, "t").unwrap(), col.try_slice(a..b, "t").unwrap());
        }
        if !col.is_empty() {
            let r = col.len() - 1;
            assert_eq!(s.row(r), col.try_slice(r..r + 1, "t").unwrap());
        }
        let plain = StoredCol::Plain(col.clone());
        for a in 0..col.len() {
            for b in 0..col.len().min(50) {
                assert_eq!(
                    s.order_at(a).cmp(&s.order_at(b)),
                    plain.order_at(a).cmp(&plain.order_at(b))
                );
            }
        }
        s
    }

    #[test]
    fn integer_columns_keep_their_values_in_the_narrowest_width() {
        let s = round_trip(HostCol::I32(vec![-3, 250, 7, -3]), None);
        assert_eq!(s.bytes(), 4, "a span of 253 takes one byte a row: {s:?}");
        let s = round_trip(HostCol::I32(vec![19920101, 19981231, 19950615]), None);
        assert_eq!(s.bytes(), 3 * 2, "a span under 65,536 takes two bytes a row: {s:?}");
        let s = round_trip(HostCol::I32(vec![i32::MIN, i32::MAX, 0]), None);
        assert_eq!(s, StoredCol::Plain(HostCol::I32(vec![i32::MIN, i32::MAX, 0])));
        let s = round_trip(HostCol::I64(vec![10_494_950, 90_100, 0, 55_528_516]), None);
        assert_eq!(s.bytes(), 4 * 4);
        let s = round_trip(HostCol::I64(vec![i64::MIN, i64::MAX]), None);
        assert!(matches!(s, StoredCol::Plain(_)));
        let s = round_trip(HostCol::I64(vec![i64::MAX - 3, i64::MAX, i64::MAX - 1]), None);
        assert_eq!(s.bytes(), 3);
        let s = round_trip(HostCol::I64(vec![-(1 << 40); 1000]), None);
        assert_eq!(s.bytes(), 1000, "all duplicates: a span of zero");
        // Empty and one-row columns, and a size not a multiple of anything.
        round_trip(HostCol::I64(vec![]), None);
        round_trip(HostCol::I32(vec![42]), None);
        let skewed: Vec<i64> = (0..1237).map(|i| if i % 97 == 0 { 1 << 31 } else { i % 5 }).collect();
        let s = round_trip(HostCol::I64(skewed), None);
        assert_eq!(s.bytes(), 1237 * 4);
    }

    #[test]
    fn string_columns_keep_their_codes_as_positions_among_the_distinct_ones() {
        let codes = Arc::new(vec![3u32, 17, 4000, 4_000_000]);
        let col = HostCol::U32(vec![17, 3, 4_000_000, 4000, 17, 17]);
        let s = round_trip(col, Some(codes.clone()));
        assert_eq!(s.bytes(), 6);
        let many: Arc<Vec<u32>> = Arc::new((0..300u32).map(|i| i * 7).collect());
        let col = HostCol::U32((0..1000u32).map(|i| (i * 13 % 300) * 7).collect());
        let s = round_trip(col, Some(many));
        assert_eq!(s.bytes(), 2000);
        // Without the distinct codes, a u32 column is kept as it is.
        let col = HostCol::U32(vec![1, 2, 3]);
        assert_eq!(round_trip(col.clone(), None), StoredCol::Plain(col));
        round_trip(HostCol::U32(vec![]), Some(Arc::new(vec![])));
        // Other element types are kept as they are.
        let col = HostCol::F64(vec![1.5, -0.0, 0.0, -2.5, f64::INFINITY]);
        let s = round_trip(col.clone(), None);
        assert_eq!(s, StoredCol::Plain(col.clone()));
        let HostCol::F64(v) = &col else { unreachable!() };
        for a in 0..v.len() {
            for b in 0..v.len() {
                assert_eq!(
                    s.order_at(a).cmp(&s.order_at(b)),
                    v[a].total_cmp(&v[b]),
                    "{} {}",
                    v[a],
                    v[b]
                );
            }
        }
    }

    #[test]
    fn pieces_pack_as_their_whole_column_does() {
        let pieces = vec![
            HostCol::I64(vec![100, 105]),
            HostCol::I64(vec![]),
            HostCol::I64(vec![90, 100_000, 7]),
        ];
        let whole = HostCol::I64(vec![100, 105, 90, 100_000, 7]);
        let s = StoredCol::pack_pieces(Elem::I64, pieces.clone(), None, "t").unwrap();
        assert_eq!(s, StoredCol::pack(whole.clone(), None));
        assert_eq!(s.widen("t").unwrap().into_owned(), whole);
        assert_eq!(concat_pieces(Elem::I64, pieces, "t").unwrap(), whole);
        // A column with no narrower form gives its pieces back.
        let wide = vec![HostCol::I32(vec![i32::MIN]), HostCol::I32(vec![i32::MAX])];
        assert_eq!(
            StoredCol::pack_pieces(Elem::I32, wide.clone(), None, "t"),
            Err(wide.clone())
        );
        assert_eq!(
            concat_pieces(Elem::I32, wide, "t").unwrap(),
            HostCol::I32(vec![i32::MIN, i32::MAX])
        );
        // String codes: the distinct ones of all pieces, then positions among them.
        let pieces = vec![HostCol::U32(vec![9, 2, 9]), HostCol::U32(vec![64, 2, 130])];
        let d = Arc::new(vec![2, 9, 64, 130]);
        let s = StoredCol::pack_pieces(Elem::U32, pieces, Some(&d), "t").unwrap();
        assert_eq!(
            s.widen("t").unwrap().into_owned(),
            HostCol::U32(vec![9, 2, 9, 64, 2, 130])
        );
        assert_eq!(s.bytes(), 6);
    }

    #[test]
    fn string_pieces_before_the_dictionary_pack_as_their_codes_would() {
        // Two parts numbering their own strings; remaps give each id its code.
        let remaps: Vec<Vec<u32>> = vec![vec![40, 7, 19, 7], vec![19, 3]];
        let ids = [vec![1u32, 2, 1, 3, 2], vec![1, 0, 1]];
        let codes: Vec<u32> = vec![7, 19, 7, 7, 19, 3, 19, 3];
        let pieces: Vec<IdPiece> = ids.iter().map(|v| IdPiece::pack(v.clone(), "t").unwrap()).collect();
        let r: Vec<&[u32]> = remaps.iter().map(Vec::as_slice).collect();
        let (distinct, col) = pack_string_pieces(pieces, &r, 41, "t").unwrap();
        assert_eq!(*distinct, vec![3, 7, 19]);
        assert!(matches!(col, StoredCol::Codes { .. }), "{col:?}");
        assert_eq!(col.widen("t").unwrap().into_owned(), HostCol::U32(codes.clone()));
        assert_eq!(col, StoredCol::pack(HostCol::U32(codes), Some(&distinct)));
        // More than 65,536 distinct codes: the codes themselves.
        let n = 70_000u32;
        let remap: Vec<u32> = (0..n).map(|i| n - 1 - i).collect();
        let piece = IdPiece::pack((0..n).collect(), "t").unwrap();
        let (distinct, col) = pack_string_pieces(vec![piece], &[&remap], n as usize, "t").unwrap();
        assert_eq!(distinct.len(), n as usize);
        assert_eq!(col, StoredCol::Plain(HostCol::U32(remap.clone())));
        // No rows; an id past its part's strings, a code past the dictionary.
        let (d, col) = pack_string_pieces(vec![IdPiece::pack(vec![], "t").unwrap()], &[&[]], 0, "t").unwrap();
        assert!(d.is_empty() && col.is_empty());
        assert!(pack_string_pieces(vec![IdPiece::pack(vec![2], "t").unwrap()], &[&[0, 1]], 5, "t").is_err());
        assert!(pack_string_pieces(vec![IdPiece::pack(vec![0], "t").unwrap()], &[&[9]], 5, "t").is_err());
    }

    #[test]
    fn column_references_widen_what_is_packed_and_borrow_the_rest() {
        let h = HostCol::I64(vec![5, 6, 7]);
        let s = StoredCol::pack(h.clone(), None);
        assert!(s.plain().is_none());
        let r = ColRef::Stored(&s);
        assert!(matches!(r.widen("t").unwrap(), Cow::Owned(_)));
        assert_eq!(r.widen("t").unwrap().into_owned(), h);
        assert_eq!(r.slice(1, 3, "t").unwrap(), HostCol::I64(vec![6, 7]));
        assert!(
            s.slice(2, 4, "t").is_err() && s.slice(2, 1, "t").is_err(),
            "rows past the column"
        );
        assert!(matches!(ColRef::Host(&h).widen("t").unwrap(), Cow::Borrowed(_)));
        // Rows picked from a packed column are its widened rows.
        let rows = [2u32, 0, 2];
        assert_eq!(
            s.try_par_pick_by(&rows, |r| r as usize, "t").unwrap(),
            HostCol::I64(vec![7, 5, 7])
        );
        let codes = Arc::new(vec![4u32, 900]);
        let c = StoredCol::pack(HostCol::U32(vec![900, 4, 4]), Some(&codes));
        assert_eq!(
            c.try_par_pick_by(&rows, |r| r as usize, "t").unwrap(),
            HostCol::U32(vec![4, 900, 4])
        );
        let i = StoredCol::pack(HostCol::I32(vec![-1, 300, 7]), None);
        assert!(i.plain().is_none());
        assert_eq!(
            i.try_par_pick_by(&rows, |r| r as usize, "t").unwrap(),
            HostCol::I32(vec![7, -1, 7])
        );
        assert_eq!(ColRef::Host(&h).elem(), Elem::I64);
    }
}
