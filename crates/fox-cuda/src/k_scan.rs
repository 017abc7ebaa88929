//! `ExclusiveScan` and `Compact` (kernels/scan.cu), and the shared primitives other
//! launchers build on: [`exclusive_scan_u64`] and [`compact`].
//!
//! The scan is one pass over the counts: each tile of 2560 counts is scanned in a block,
//! and its offset comes from a decoupled look-back over the 16-byte status words (flag and
//! value together) of the tiles before it (tile indices are handed out in launch order by an atomic counter, so a tile
//! only ever waits for tiles that are running). Compaction counts the flags of each tile
//! of 2048 rows, scans the counts, reads the total, and then writes each column with one
//! order-preserving scatter kernel per column.

use crate::device::{Gpu, KArg};
use fox_kernel::Elem;
use fox_runtime::{BackendError, DevBuf};

/// Threads and counts per thread of a scan tile (kernels/scan.cu).
pub(crate) const SCAN_THREADS: u32 = 128;
pub(crate) const SCAN_ITEMS: u32 = 20;
/// Counts per scan tile (`SCAN_TILE` in kernels/scan.cu).
const SCAN_TILE: usize = (SCAN_THREADS * SCAN_ITEMS) as usize;
/// Threads and rows per thread of a compaction tile (kernels/scan.cu).
pub(crate) const CPT_THREADS: u32 = 128;
pub(crate) const CPT_ITEMS: u32 = 16;
/// Rows per compaction tile (`CPT_TILE` in kernels/scan.cu).
const CPT_TILE: usize = (CPT_THREADS * CPT_ITEMS) as usize;
/// Error code of an overflowing scan (`ERR_OVERFLOW` in kernels/scan.cu).
pub(crate) const ERR_OVERFLOW: u64 = 3;

fn err(msg: impl Into<String>) -> BackendError {
    BackendError(msg.into())
}

/// Frees every buffer of `bufs`.
pub(crate) fn free_all(gpu: &mut Gpu, bufs: Vec<DevBuf>) {
    for b in bufs {
        gpu.free(b);
    }
}

/// A grid dimension, or an error when `tiles` does not fit one.
pub(crate) fn grid_u32(tiles: usize, what: &str) -> Result<u32, BackendError> {
    u32::try_from(tiles).map_err(|_| err(format!("{what}: {tiles} tiles do not fit one grid")))
}

/// The scan behind [`exclusive_scan_u64`]; `check` reads the error word afterwards (a
/// synchronisation), which callers whose sums cannot overflow skip.
fn scan(gpu: &mut Gpu, counts: &DevBuf, check: bool) -> Result<(DevBuf, DevBuf), BackendError> {
    let n = counts.len;
    let offsets = gpu.alloc(Elem::U64, n)?;
    let total = match gpu.alloc(Elem::U64, 1) {
        Ok(t) => t,
        Err(e) => {
            gpu.free(offsets);
            return Err(e);
        }
    };
    let mut temps = Vec::new();
    let res = (|| {
        if n == 0 {
            return gpu.write_u64(&total, 0, 0);
        }
        let ntiles = n.div_ceil(SCAN_TILE);
        let grid = grid_u32(ntiles, "exclusive scan")?;
        // The tile counter, then one {flag, value} pair of u64 per tile (16-byte aligned:
        // allocations are).
        let status = gpu.alloc_zeroed(Elem::U64, 2 + 2 * ntiles)?;
        let counter_ptr = gpu.ptr(&status)?;
        temps.push(status);
        let word = if check { gpu.check_word()? } else { gpu.err_ptr() };
        let args = [
            KArg::Ptr(gpu.ptr(counts)?),
            KArg::Ptr(gpu.ptr(&offsets)?),
            KArg::Ptr(gpu.ptr(&total)?),
            KArg::U64(n as u64),
            KArg::Ptr(counter_ptr),
            KArg::Ptr(counter_ptr + 16),
            KArg::U32(grid),
            KArg::Ptr(word),
        ];
        gpu.launch("scan", "exclusive_scan_u64", grid, SCAN_THREADS, 0, &args)?;
        if check {
            gpu.finish_check(|_, [code, _, _, _]| match code {
                0 => Ok(()),
                ERR_OVERFLOW => Err(err("the sum of the counts overflows u64")),
                _ => Err(err(format!("unexpected error code {code} from the scan"))),
            })?;
        }
        Ok(())
    })();
    free_all(gpu, temps);
    match res {
        Ok(()) => Ok((offsets, total)),
        Err(e) => {
            gpu.free(offsets);
            gpu.free(total);
            Err(e)
        }
    }
}

/// The exclusive prefix sum of `counts` (U64) and its total (U64, length 1). A sum that
/// overflows u64 is an error.
pub(crate) fn exclusive_scan_u64(gpu: &mut Gpu, counts: &DevBuf) -> Result<(DevBuf, DevBuf), BackendError> {
    scan(gpu, counts, true)
}

/// `ExclusiveScan`: args `counts`; outs `offsets`, `total`.
pub(crate) fn exclusive_scan(gpu: &mut Gpu, args: &[&DevBuf]) -> Result<Vec<DevBuf>, BackendError> {
    let (offsets, total) = exclusive_scan_u64(gpu, args[0])?;
    Ok(vec![offsets, total])
}

/// The scatter kernel for an element width.
fn scatter_name(elem: Elem) -> &'static str {
    match elem.size() {
        1 => "compact_scatter_u8",
        4 => "compact_scatter_u32",
        8 => "compact_scatter_u64",
        _ => "compact_scatter_u128",
    }
}

/// The flags (U8) counted by tiles of compaction and the counts scanned: each tile's
/// offset among the flagged rows (for the scatter kernels) and how many rows are flagged.
/// `n > 0`.
pub(crate) fn count_flags(gpu: &mut Gpu, flags: &DevBuf) -> Result<(DevBuf, usize), BackendError> {
    let n = flags.len;
    let ntiles = n.div_ceil(CPT_TILE);
    let grid = grid_u32(ntiles, "compaction")?;
    let counts = gpu.alloc(Elem::U64, ntiles)?;
    let res = (|| {
        let args = [
            KArg::Ptr(gpu.ptr(flags)?),
            KArg::U64(n as u64),
            KArg::Ptr(gpu.ptr(&counts)?),
        ];
        gpu.launch("scan", "compact_count", grid, CPT_THREADS, 0, &args)?;
        // Per-tile counts are at most 2048 and sum to at most n: the scan cannot overflow.
        scan(gpu, &counts, false)
    })();
    gpu.free(counts);
    let (offsets, total) = res?;
    let m = gpu.read_u64(&total, 0);
    gpu.free(total);
    match m.map(usize::try_from) {
        Ok(Ok(m)) if m <= n => Ok((offsets, m)),
        Ok(m) => {
            gpu.free(offsets);
            Err(err(format!("compaction counted {m:?} rows out of {n}")))
        }
        Err(e) => {
            gpu.free(offsets);
            Err(e)
        }
    }
}

/// The row numbers (U32) of the `m` rows whose flag is set, in order, from the tiles'
/// `offsets` of [`count_flags`]. The flags' rows must fit u32 indices.
pub(crate) fn flagged_rows(gpu: &mut Gpu, flags: &DevBuf, offsets: &DevBuf, m: usize) -> Result<DevBuf, BackendError> {
    let n = flags.len;
    if n > u32::MAX as usize {
        return Err(err(format!("{n} rows are more than u32 row numbers can address")));
    }
    let out = gpu.alloc(Elem::U32, m)?;
    if m == 0 {
        return Ok(out);
    }
    let res = (|| {
        let grid = grid_u32(n.div_ceil(CPT_TILE), "compaction")?;
        let args = [
            KArg::Ptr(gpu.ptr(flags)?),
            KArg::U64(n as u64),
            KArg::Ptr(gpu.ptr(offsets)?),
            KArg::Ptr(gpu.ptr(&out)?),
        ];
        gpu.launch("scan", "compact_rows_u32", grid, CPT_THREADS, 0, &args)
    })();
    match res {
        Ok(()) => Ok(out),
        Err(e) => {
            gpu.free(out);
            Err(e)
        }
    }
}

/// The rows of `cols` whose flag (U8) is non-zero, in order. Every column has as many
/// rows as `flags`.
pub(crate) fn compact(gpu: &mut Gpu, flags: &DevBuf, cols: &[&DevBuf]) -> Result<Vec<DevBuf>, BackendError> {
    let n = flags.len;
    let mut outs = Vec::with_capacity(cols.len());
    if n == 0 || cols.is_empty() {
        for c in cols {
            match gpu.alloc(c.elem, 0) {
                Ok(b) => outs.push(b),
                Err(e) => {
                    free_all(gpu, outs);
                    return Err(e);
                }
            }
        }
        return Ok(outs);
    }
    let (offsets, m) = count_flags(gpu, flags)?;
    let res = (|| {
        let grid = grid_u32(n.div_ceil(CPT_TILE), "compaction")?;
        let flags_ptr = gpu.ptr(flags)?;
        let offsets_ptr = gpu.ptr(&offsets)?;
        for col in cols {
            let out = gpu.alloc(col.elem, m)?;
            let out_ptr = gpu.ptr(&out)?;
            outs.push(out);
            if m == 0 {
                continue;
            }
            let args = [
                KArg::Ptr(flags_ptr),
                KArg::Ptr(gpu.ptr(col)?),
                KArg::U64(n as u64),
                KArg::Ptr(offsets_ptr),
                KArg::Ptr(out_ptr),
            ];
            gpu.launch("scan", scatter_name(col.elem), grid, CPT_THREADS, 0, &args)?;
        }
        Ok(())
    })();
    gpu.free(offsets);
    match res {
        Ok(()) => Ok(outs),
        Err(e) => {
            free_all(gpu, outs);
            Err(e)
        }
    }
}

/// `Compact`: args `flags` then k columns; outs the k compacted columns.
pub(crate) fn compact_kernel(gpu: &mut Gpu, args: &[&DevBuf]) -> Result<Vec<DevBuf>, BackendError> {
    compact(gpu, args[0], &args[1..])
}
