//! The routing of an input loaded hashed over the devices of a run (`LoadInput { hash }`):
//! the device of every row by the rule of [`fox_kernel::Exchange::Hash`] on the key
//! columns, computed once for all devices as a counting sort of the row numbers by
//! device. Device `d`'s rows are one contiguous, increasing run of row numbers, so a
//! device gathers its part of each column it loads by that list alone, and the part keeps
//! the input's order.

use crate::backend::HostCol;
use crate::stored::StoredCol;
use fox_kernel::{device_of, mix64, row_hash, value_bits_f64, value_bits_i128, value_bits_i32};
use std::mem::MaybeUninit;

/// Rows hashed per piece of work: each piece's rows are hashed into a buffer of this many
/// `u64`s (512 KiB), counted per device, then hashed again and written to each device's
/// list at the piece's place in it.
const PIECE: usize = 1 << 16;

/// What the routing's row lists are named in out-of-memory messages.
const WHAT: &str = "the rows of each device of an input hashed over the devices";

/// The rows of an input that each device of `devices` loads when the input is hashed on
/// key columns: `rows[starts[d] .. starts[d + 1]]` are device `d`'s row numbers, in
/// increasing order. 4 bytes a row (8 beyond 2^32 rows).
pub(crate) struct Routing {
    /// `devices + 1` offsets into `rows`: 0, then the end of each device's rows.
    starts: Vec<usize>,
    rows: RowList,
}

/// Row numbers, as narrow as the input allows.
enum RowList {
    Narrow(Vec<u32>),
    Wide(Vec<u64>),
}

impl std::fmt::Debug for Routing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Routing")
            .field("rows", &self.len())
            .field("devices", &self.devices())
            .finish()
    }
}

/// A row number in a routing's list.
trait RowIndex: Copy + Send + Sync {
    fn of(row: usize) -> Self;
    fn at(self) -> usize;
}

impl RowIndex for u32 {
    fn of(row: usize) -> u32 {
        row as u32
    }
    fn at(self) -> usize {
        self as usize
    }
}

impl RowIndex for u64 {
    fn of(row: usize) -> u64 {
        row as u64
    }
    fn at(self) -> usize {
        self as usize
    }
}

impl Routing {
    /// The routing of the input of columns `cols` (`None`: a column not loaded; every
    /// loaded one is as long as the input) hashed on the columns `keys` over `devices`
    /// devices; or the message naming a key column that is missing, or what ran out of
    /// memory.
    pub(crate) fn of(cols: &[Option<&HostCol>], keys: &[usize], devices: usize) -> Result<Routing, String> {
        if devices == 0 {
            return Err("an input hashed over no device".into());
        }
        let key_cols = keys
            .iter()
            .map(|&c| {
                cols.get(c)
                    .copied()
                    .flatten()
                    .ok_or_else(|| format!("the key column {c} of an input hashed over the devices is not loaded"))
            })
            .collect::<Result<Vec<&HostCol>, String>>()?;
        let len = cols.iter().flatten().map(|c| c.len()).max().unwrap_or(0);
        if key_cols.iter().any(|c| c.len() != len) {
            return Err("the key columns of an input hashed over the devices are not all loaded".into());
        }
        if len <= u32::MAX as usize + 1 {
            let (starts, rows) = route::<u32>(&key_cols, len, devices)?;
            Ok(Routing {
                starts,
                rows: RowList::Narrow(rows),
            })
        } else {
            Routing::wide(&key_cols, len, devices)
        }
    }

    /// [`Routing::of`] with 8-byte row numbers, whatever the input's length.
    fn wide(key_cols: &[&HostCol], len: usize, devices: usize) -> Result<Routing, String> {
        let (starts, rows) = route::<u64>(key_cols, len, devices)?;
        Ok(Routing {
            starts,
            rows: RowList::Wide(rows),
        })
    }

    /// The input's rows.
    pub(crate) fn len(&self) -> usize {
        self.starts.last().copied().unwrap_or(0)
    }

    pub(crate) fn devices(&self) -> usize {
        self.starts.len() - 1
    }

    /// The bytes of its row lists.
    pub(crate) fn bytes(&self) -> usize {
        match &self.rows {
            RowList::Narrow(r) => 4 * r.len(),
            RowList::Wide(r) => 8 * r.len(),
        }
    }

    /// Device `rank`'s part of `col`, a column of the input: its rows in their order,
    /// gathered in parallel; or the message naming what does not match or ran out of
    /// memory (`what`).
    pub(crate) fn pick(&self, col: &HostCol, rank: usize, what: &str) -> Result<HostCol, String> {
        let span = self.span(col.len(), rank)?;
        match &self.rows {
            RowList::Narrow(r) => col.try_par_pick(&r[span], what),
            RowList::Wide(r) => col.try_par_pick_by(&r[span], RowIndex::at, what),
        }
    }

    /// [`Routing::pick`] of a database's stored column: device `rank`'s rows, widened
    /// as they are gathered (a packed column is never widened whole).
    pub(crate) fn pick_stored(&self, col: &StoredCol, rank: usize, what: &str) -> Result<HostCol, String> {
        let span = self.span(col.len(), rank)?;
        match &self.rows {
            RowList::Narrow(r) => col.try_par_pick_by(&r[span], RowIndex::at, what),
            RowList::Wide(r) => col.try_par_pick_by(&r[span], RowIndex::at, what),
        }
    }

    /// Where device `rank`'s rows are in the list, for a column of `len` rows.
    fn span(&self, len: usize, rank: usize) -> Result<std::ops::Range<usize>, String> {
        if len != self.len() || rank >= self.devices() {
            return Err(format!(
                "the routing of an input of {} rows over {} devices was asked for device {rank}'s part of a column \
                 of {len} rows",
                self.len(),
                self.devices(),
            ));
        }
        Ok(self.starts[rank]..self.starts[rank + 1])
    }
}

/// The counting sort of the rows `0..len` by the device of their keys `key_cols` among
/// `devices`: the offsets of each device's rows, and the row numbers, each device's in
/// increasing order. Two parallel passes over pieces of [`PIECE`] rows: the first counts
/// each piece's rows per device, the second writes each piece's row numbers at its
/// place in each device's list.
fn route<I: RowIndex>(key_cols: &[&HostCol], len: usize, devices: usize) -> Result<(Vec<usize>, Vec<I>), String> {
    use rayon::prelude::*;
    let n = devices;
    let pieces = len.div_ceil(PIECE);
    let piece = |k: usize| k * PIECE..((k + 1) * PIECE).min(len);
    // counts[k·n + d]: the rows of piece k that go to device d.
    let mut counts: Vec<usize> = crate::alloc::try_filled(pieces * n, 0, WHAT)?;
    counts
        .par_chunks_mut(n)
        .enumerate()
        .for_each_init(Vec::new, |buf, (k, count)| {
            devices_of(key_cols, piece(k), n, buf);
            for &d in buf.iter() {
                count[d as usize] += 1;
            }
        });
    let mut starts = vec![0; n + 1];
    for d in 0..n {
        starts[d + 1] = starts[d] + (0..pieces).map(|k| counts[k * n + d]).sum::<usize>();
    }
    let mut rows: Vec<I> = crate::alloc::try_with_capacity(len, WHAT)?;
    {
        // out[k][d]: where piece k's rows of device d go, cut from device d's list in
        // piece order.
        let mut out: Vec<Vec<&mut [MaybeUninit<I>]>> = (0..pieces).map(|_| Vec::with_capacity(n)).collect();
        let mut rest = &mut rows.spare_capacity_mut()[..len];
        for d in 0..n {
            for (k, o) in out.iter_mut().enumerate() {
                let (mine, tail) = std::mem::take(&mut rest).split_at_mut(counts[k * n + d]);
                o.push(mine);
                rest = tail;
            }
        }
        out.into_par_iter()
            .enumerate()
            .for_each_init(Vec::new, |buf, (k, mut to)| {
                let rows = piece(k);
                devices_of(key_cols, rows.clone(), n, buf);
                let mut at = vec![0usize; n];
                for (r, &d) in rows.zip(buf.iter()) {
                    let d = d as usize;
                    to[d][at[d]].write(I::of(r));
                    at[d] += 1;
                }
                debug_assert!(at.iter().zip(&to).all(|(a, t)| *a == t.len()));
            });
    }
    // SAFETY: the slices cut above cover the first `len` slots, and each was written in
    // full: piece k writes to its slice of device d exactly its rows of device d, which
    // the first pass counted with the same function of the same keys.
    unsafe { rows.set_len(len) };
    Ok((starts, rows))
}

/// The device of each row of `rows` of the key columns `key_cols` among `n` by the rule
/// of [`fox_kernel::Exchange::Hash`] (`device_of(row_hash(value bits of the keys), n)`),
/// into `out`: the hash folded over the keys one column at a time.
fn devices_of(key_cols: &[&HostCol], rows: std::ops::Range<usize>, n: usize, out: &mut Vec<u64>) {
    out.clear();
    out.resize(rows.len(), row_hash(std::iter::empty()));
    fn fold<T: Copy>(hs: &mut [u64], vals: &[T], bits: impl Fn(T) -> u64) {
        for (h, &v) in hs.iter_mut().zip(vals) {
            *h = mix64(*h ^ mix64(bits(v)));
        }
    }
    for col in key_cols {
        let r = rows.clone();
        match col {
            HostCol::U8(v) => fold(out, &v[r], u64::from),
            HostCol::I32(v) => fold(out, &v[r], value_bits_i32),
            HostCol::U32(v) => fold(out, &v[r], u64::from),
            HostCol::I64(v) => fold(out, &v[r], |x| x as u64),
            HostCol::U64(v) => fold(out, &v[r], |x| x),
            HostCol::F64(v) => fold(out, &v[r], value_bits_f64),
            HostCol::I128(v) => fold(out, &v[r], value_bits_i128),
        }
    }
    for h in out.iter_mut() {
        *h = device_of(*h, n) as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Device `rank`'s part of `col` as the rows with `dest[r] == rank`, in order: the
    /// part a device loaded by scanning the destination of every row.
    fn scanned(col: &HostCol, dest: &[u32], rank: usize) -> HostCol {
        let idx: Vec<u32> = (0..dest.len() as u32)
            .filter(|&r| dest[r as usize] as usize == rank)
            .collect();
        col.try_pick(&idx, "test").unwrap()
    }

    fn inputs() -> Vec<(&'static str, Vec<HostCol>)> {
        let n = 3 * PIECE + 17;
        vec![
            (
                "empty",
                vec![HostCol::I64(vec![]), HostCol::F64(vec![]), HostCol::U32(vec![])],
            ),
            (
                "one row",
                vec![HostCol::I64(vec![-5]), HostCol::F64(vec![2.5]), HostCol::U32(vec![7])],
            ),
            (
                "all rows equal",
                vec![
                    HostCol::I64(vec![42; 1000]),
                    HostCol::F64(vec![-0.0; 1000]),
                    HostCol::U32(vec![3; 1000]),
                ],
            ),
            (
                // Most rows share a key; more rows than a piece, and not a multiple of it.
                "skewed keys",
                vec![
                    HostCol::I64((0..n as i64).map(|k| if k % 10 < 8 { 1 } else { k }).collect()),
                    HostCol::F64((0..n).map(|k| if k % 3 == 0 { 0.0 } else { -0.0 }).collect()),
                    HostCol::U32((0..n as u32).map(|k| k.wrapping_mul(2654435761) % 97).collect()),
                ],
            ),
            (
                "mixed types",
                vec![
                    HostCol::I32((0..5000).map(|k| (k * 37) % 101 - 50).collect()),
                    HostCol::I128((0..5000).map(|k| (k as i128) << 70 | (k % 7) as i128).collect()),
                    HostCol::U8((0..5000).map(|k| (k % 251) as u8).collect()),
                ],
            ),
        ]
    }

    /// Each device's part of every column, gathered by the shared routing, is the part
    /// the scan of every row's destination gives: the same rows in the same order; with
    /// 4-byte and 8-byte row numbers alike.
    #[test]
    fn every_device_gathers_the_part_the_scan_of_the_destinations_gives() {
        for (name, cols) in inputs() {
            let refs: Vec<Option<&HostCol>> = cols.iter().map(Some).collect();
            for keys in [vec![0], vec![1], vec![2], vec![0, 1], vec![2, 0, 1]] {
                for n in 1..=4usize {
                    let dest = crate::spmd::destinations(&cols, &keys, n);
                    let key_cols: Vec<&HostCol> = keys.iter().map(|&k| &cols[k]).collect();
                    let len = cols[0].len();
                    for routing in [
                        Routing::of(&refs, &keys, n).unwrap(),
                        Routing::wide(&key_cols, len, n).unwrap(),
                    ] {
                        assert_eq!((routing.len(), routing.devices()), (len, n));
                        let mut total = 0;
                        for d in 0..n {
                            total += routing.pick(&cols[0], d, "test").unwrap().len();
                            for col in &cols {
                                assert_eq!(
                                    routing.pick(col, d, "test").unwrap(),
                                    scanned(col, &dest, d),
                                    "{name}, keys {keys:?}, device {d} of {n}"
                                );
                            }
                        }
                        assert_eq!(total, len);
                    }
                }
            }
        }
    }

    #[test]
    fn a_missing_key_column_or_a_column_of_another_length_is_an_error() {
        let a = HostCol::I64(vec![1, 2, 3]);
        let err = Routing::of(&[Some(&a), None], &[1], 2).unwrap_err();
        assert!(err.contains("key column 1"), "{err}");
        let routing = Routing::of(&[Some(&a)], &[0], 2).unwrap();
        let err = routing.pick(&HostCol::I64(vec![1]), 0, "test").unwrap_err();
        assert!(err.contains("3 rows"), "{err}");
        assert!(Routing::of(&[Some(&a)], &[0], 0).is_err());
    }
}
