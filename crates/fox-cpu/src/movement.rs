//! Data movement: stream compaction, gather, concatenation, slicing.

use crate::util::{
    alloc, as_u32, as_u8, check_stop, chunks, map_col, map_ranges, par_map, with_capacity, KResult, Stop, PAR_MIN,
};
use fox_runtime::HostCol;
use rayon::prelude::*;

/// `Compact`: args `flags` then k columns; the rows whose flag is non-zero, in order.
/// Fails once `stop` is set (read before each column).
pub(crate) fn compact_until(args: &[&HostCol], stop: &Stop) -> KResult<Vec<HostCol>> {
    let (flags, cols) = (args[0], &args[1..]);
    let flags = as_u8(flags, "flags")?;
    // Count per chunk, then each chunk writes its rows into its own slice of the output.
    let ranges = chunks(flags.len());
    let counts = map_ranges(&ranges, |a, b| flags[a..b].iter().filter(|f| **f != 0).count());
    let total: usize = counts.iter().sum();
    cols.iter()
        .map(|c| {
            check_stop(stop)?;
            Ok(match c {
                HostCol::U8(v) => HostCol::U8(compact_col(flags, v, &ranges, &counts, total)?),
                HostCol::I32(v) => HostCol::I32(compact_col(flags, v, &ranges, &counts, total)?),
                HostCol::U32(v) => HostCol::U32(compact_col(flags, v, &ranges, &counts, total)?),
                HostCol::I64(v) => HostCol::I64(compact_col(flags, v, &ranges, &counts, total)?),
                HostCol::U64(v) => HostCol::U64(compact_col(flags, v, &ranges, &counts, total)?),
                HostCol::F64(v) => HostCol::F64(compact_col(flags, v, &ranges, &counts, total)?),
                HostCol::I128(v) => HostCol::I128(compact_col(flags, v, &ranges, &counts, total)?),
            })
        })
        .collect()
}

fn compact_col<T: Copy + Default + Send + Sync>(
    flags: &[u8],
    v: &[T],
    ranges: &[(usize, usize)],
    counts: &[usize],
    total: usize,
) -> KResult<Vec<T>> {
    let mut out = alloc::<T>(total, "the compacted column")?;
    let mut parts = Vec::with_capacity(ranges.len());
    let mut rest = &mut out[..];
    for (&r, &c) in ranges.iter().zip(counts) {
        let (o, tail) = rest.split_at_mut(c);
        rest = tail;
        parts.push((r, o));
    }
    let write = |((a, b), o): ((usize, usize), &mut [T])| {
        // Branch-free: write every row into a scratch buffer, advancing only on a flag.
        let mut tmp = vec![T::default(); b - a + 1];
        let mut k = 0;
        for (&f, &x) in flags[a..b].iter().zip(&v[a..b]) {
            tmp[k] = x;
            k += usize::from(f != 0);
        }
        o.copy_from_slice(&tmp[..k]);
    };
    if parts.len() <= 1 {
        parts.into_iter().for_each(write);
    } else {
        parts.into_par_iter().for_each(write);
    }
    Ok(out)
}

/// The positions of the non-zero flags, in order (count per chunk, scan, write); an
/// error naming `what` when memory runs out.
pub(crate) fn selected(flags: &[u8], what: &str) -> KResult<Vec<usize>> {
    let ranges = chunks(flags.len());
    let counts = map_ranges(&ranges, |a, b| flags[a..b].iter().filter(|f| **f != 0).count());
    let mut out = alloc::<usize>(counts.iter().sum(), what)?;
    let mut parts = Vec::with_capacity(ranges.len());
    let mut rest = &mut out[..];
    for (&r, &c) in ranges.iter().zip(&counts) {
        let (o, tail) = rest.split_at_mut(c);
        rest = tail;
        parts.push((r, o));
    }
    let write = |((a, b), o): ((usize, usize), &mut [usize])| {
        let positions = flags[a..b]
            .iter()
            .enumerate()
            .filter(|(_, f)| **f != 0)
            .map(|(i, _)| a + i);
        for (slot, i) in o.iter_mut().zip(positions) {
            *slot = i;
        }
    };
    if flags.len() < PAR_MIN {
        parts.into_iter().for_each(write);
    } else {
        parts.into_par_iter().for_each(write);
    }
    Ok(out)
}

/// `Gather { shift }`: args `idx` then k columns; `out[i] = col[idx[i] + shift]`. Fails
/// once `stop` is set (read before each column).
pub(crate) fn gather_until(args: &[&HostCol], shift: u32, stop: &Stop) -> KResult<Vec<HostCol>> {
    let (idx, cols) = (args[0], &args[1..]);
    let idx = as_u32(idx, "the index column")?;
    let max = if idx.len() < PAR_MIN {
        idx.iter().copied().max()
    } else {
        idx.par_iter().copied().max()
    };
    let max = max.map(|m| m as usize + shift as usize);
    for (c, col) in cols.iter().enumerate() {
        if max.is_some_and(|m| m >= col.len()) {
            let (row, p) = idx
                .iter()
                .enumerate()
                .map(|(r, &i)| (r, i as usize + shift as usize))
                .find(|(_, p)| *p >= col.len())
                .expect("the largest index is out of range");
            return Err(format!(
                "index {} + shift {shift} = {p} at row {row} is out of range of column {c} ({} rows)",
                idx[row],
                col.len()
            ));
        }
    }
    let shift = shift as usize;
    cols.iter()
        .map(|c| {
            check_stop(stop)?;
            Ok(map_col!(c, v => gather_u32(v, idx, shift)?))
        })
        .collect()
}

/// `v[idx[i] + shift]` for every `i` (indices already checked).
fn gather_u32<T: Copy + Send + Sync>(v: &[T], idx: &[u32], shift: usize) -> KResult<Vec<T>> {
    let mut out = with_capacity(idx.len(), "the gathered column")?;
    if idx.len() < PAR_MIN {
        out.extend(idx.iter().map(|&i| v[i as usize + shift]));
    } else {
        out.par_extend(idx.par_iter().with_min_len(4096).map(|&i| v[i as usize + shift]));
    }
    Ok(out)
}

/// `Concat { parts, width }`: `parts` groups of `width` columns, concatenated in order.
pub(crate) fn concat(args: &[&HostCol], parts: usize, width: usize) -> KResult<Vec<HostCol>> {
    debug_assert_eq!(args.len(), parts * width);
    let groups: Vec<&[&HostCol]> = args.chunks(width).collect();
    let mut out = Vec::with_capacity(width);
    for c in 0..width {
        let total: usize = groups.iter().map(|g| g[c].len()).sum();
        macro_rules! cat {
            ($var:ident) => {{
                let mut v = with_capacity(total, "the concatenated column")?;
                for g in &groups {
                    if let HostCol::$var(x) = g[c] {
                        v.extend_from_slice(x);
                    }
                }
                HostCol::$var(v)
            }};
        }
        out.push(match groups[0][c] {
            HostCol::U8(_) => cat!(U8),
            HostCol::I32(_) => cat!(I32),
            HostCol::U32(_) => cat!(U32),
            HostCol::I64(_) => cat!(I64),
            HostCol::U64(_) => cat!(U64),
            HostCol::F64(_) => cat!(F64),
            HostCol::I128(_) => cat!(I128),
        });
    }
    Ok(out)
}

/// `Slice { start, len }`: rows `start .. min(start + len, rows)` of k columns.
pub(crate) fn slice(args: &[&HostCol], start: u64, len: u64) -> KResult<Vec<HostCol>> {
    let rows = args[0].len();
    let a = usize::try_from(start).unwrap_or(usize::MAX).min(rows);
    let b = a.saturating_add(usize::try_from(len).unwrap_or(usize::MAX)).min(rows);
    args.iter()
        .map(|c| Ok(map_col!(c, v => par_map(b - a, "the sliced column", |i| v[a + i])?)))
        .collect()
}
