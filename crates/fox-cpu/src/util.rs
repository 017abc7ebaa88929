//! Shared helpers: argument checks, typed views of columns, row comparison, parallel maps.

use fox_runtime::HostCol;
use rayon::prelude::*;
use std::cmp::Ordering;

/// Inputs shorter than this run sequentially: below it, rayon's scheduling costs more
/// than it saves.
pub(crate) const PAR_MIN: usize = 16 * 1024;

/// Rows per parallel work item.
pub(crate) const CHUNK: usize = 8 * 1024;

/// A kernel's error before the kernel name is attached.
pub(crate) type KResult<T> = Result<T, String>;

/// The run's cancellation flag, as kernels whose work can run long read it: once per
/// chunk of rows, never per row. A kernel that sees it set skips its remaining chunks and
/// returns an error (the interpreter discards what a launch returns once it is set).
pub(crate) type Stop = std::sync::atomic::AtomicBool;

/// `Err` once `stop` is set.
pub(crate) fn check_stop(stop: &Stop) -> KResult<()> {
    if fox_runtime::cancel::is_set(stop) {
        Err("interrupted".to_string())
    } else {
        Ok(())
    }
}

pub(crate) fn as_u8<'a>(c: &'a HostCol, what: &str) -> KResult<&'a [u8]> {
    match c {
        HostCol::U8(v) => Ok(v),
        other => Err(format!("{what} must be u8, got {}", other.elem().name())),
    }
}

pub(crate) fn as_u32<'a>(c: &'a HostCol, what: &str) -> KResult<&'a [u32]> {
    match c {
        HostCol::U32(v) => Ok(v),
        other => Err(format!("{what} must be u32, got {}", other.elem().name())),
    }
}

pub(crate) fn as_u64<'a>(c: &'a HostCol, what: &str) -> KResult<&'a [u64]> {
    match c {
        HostCol::U64(v) => Ok(v),
        other => Err(format!("{what} must be u64, got {}", other.elem().name())),
    }
}

/// A vector of `n` default elements, or an error instead of an abort when memory runs out.
pub(crate) fn alloc<T: Default + Clone>(n: usize, what: &str) -> KResult<Vec<T>> {
    fox_runtime::alloc::try_filled(n, T::default(), what)
}

/// An empty vector with room for `n` elements, or an error when memory runs out.
pub(crate) fn with_capacity<T>(n: usize, what: &str) -> KResult<Vec<T>> {
    fox_runtime::alloc::try_with_capacity(n, what)
}

/// Row count as a u32 index space (permutations and row indices are u32).
pub(crate) fn check_u32_rows(n: usize, what: &str) -> KResult<()> {
    if n > u32::MAX as usize {
        Err(format!("{what} has {n} rows, more than u32 row indices can address"))
    } else {
        Ok(())
    }
}

/// The order-preserving unsigned image of a float under total order, with every NaN
/// mapped to the largest value (NaN last).
pub(crate) fn f64_key(x: f64) -> u64 {
    if x.is_nan() {
        u64::MAX
    } else {
        let b = x.to_bits();
        if b >> 63 == 1 {
            !b
        } else {
            b | (1 << 63)
        }
    }
}

/// Compares row `i` of `a` with row `j` of `b` (same element type; floats by total order).
#[inline]
pub(crate) fn cmp_at(a: &HostCol, i: usize, b: &HostCol, j: usize) -> Ordering {
    match (a, b) {
        (HostCol::U8(x), HostCol::U8(y)) => x[i].cmp(&y[j]),
        (HostCol::I32(x), HostCol::I32(y)) => x[i].cmp(&y[j]),
        (HostCol::U32(x), HostCol::U32(y)) => x[i].cmp(&y[j]),
        (HostCol::I64(x), HostCol::I64(y)) => x[i].cmp(&y[j]),
        (HostCol::U64(x), HostCol::U64(y)) => x[i].cmp(&y[j]),
        (HostCol::F64(x), HostCol::F64(y)) => f64_key(x[i]).cmp(&f64_key(y[j])),
        (HostCol::I128(x), HostCol::I128(y)) => x[i].cmp(&y[j]),
        _ => a.elem().cmp(&b.elem()),
    }
}

/// Lexicographic comparison of row `i` of `a` with row `j` of `b` (column lists of equal
/// length and element types).
#[inline]
pub(crate) fn cmp_rows(a: &[&HostCol], i: usize, b: &[&HostCol], j: usize) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match cmp_at(x, i, y, j) {
            Ordering::Equal => {}
            o => return o,
        }
    }
    Ordering::Equal
}

/// `(0..n).map(f)`, in parallel for large `n`; an error naming `what` when memory runs
/// out.
pub(crate) fn par_map<T: Send, F: Fn(usize) -> T + Sync + Send>(n: usize, what: &str, f: F) -> KResult<Vec<T>> {
    let mut v = with_capacity(n, what)?;
    if n < PAR_MIN {
        v.extend((0..n).map(f));
    } else {
        v.par_extend((0..n).into_par_iter().map(f));
    }
    Ok(v)
}

/// The chunk boundaries `[0, CHUNK, 2*CHUNK, …, n)` as ranges.
pub(crate) fn chunks(n: usize) -> Vec<(usize, usize)> {
    (0..n.div_ceil(CHUNK))
        .map(|c| (c * CHUNK, ((c + 1) * CHUNK).min(n)))
        .collect()
}

/// Runs `f` on each range, in parallel when there is more than one, results in order.
pub(crate) fn map_ranges<T: Send, F: Fn(usize, usize) -> T + Sync + Send>(ranges: &[(usize, usize)], f: F) -> Vec<T> {
    if ranges.len() <= 1 {
        ranges.iter().map(|&(a, b)| f(a, b)).collect()
    } else {
        ranges.par_iter().map(|&(a, b)| f(a, b)).collect()
    }
}

/// Collects per-range results, keeping the first error in range order.
pub(crate) fn first_err<T>(parts: Vec<KResult<T>>) -> KResult<Vec<T>> {
    parts.into_iter().collect()
}

/// Applies `$body` to the vector inside a `HostCol`, rebuilding a `HostCol` of the same
/// element type from the result.
macro_rules! map_col {
    ($col:expr, $v:ident => $body:expr) => {
        match $col {
            HostCol::U8($v) => HostCol::U8($body),
            HostCol::I32($v) => HostCol::I32($body),
            HostCol::U32($v) => HostCol::U32($body),
            HostCol::I64($v) => HostCol::I64($body),
            HostCol::U64($v) => HostCol::U64($body),
            HostCol::F64($v) => HostCol::F64($body),
            HostCol::I128($v) => HostCol::I128($body),
        }
    };
}
pub(crate) use map_col;

/// Gathers `col[idx[i]]` for every `i` (indices already checked); an error naming `what`
/// when memory runs out.
pub(crate) fn gather_col(col: &HostCol, idx: &[usize], what: &str) -> KResult<HostCol> {
    Ok(map_col!(col, v => par_map(idx.len(), what, |i| v[idx[i]])?))
}

/// A xorshift generator of test data (the same sequence for a seed).
#[cfg(test)]
pub(crate) fn test_rng(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed.max(1);
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}
