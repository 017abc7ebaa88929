//! Data movement: `Gather`, `Concat`, `Slice`, and the trie range kernels `RootRange`
//! and `RangeCount` (kernels/movement.cu; concatenation and slices are device copies).

use crate::device::{Gpu, KArg};
use fox_kernel::Elem;
use fox_runtime::{BackendError, DevBuf, HostCol};

use crate::prelude::BLOCK;

/// Error code of `range_count` (kernels/movement.cu).
pub(crate) const ERR_RANGE: u64 = 2;

fn err(msg: impl Into<String>) -> BackendError {
    BackendError(msg.into())
}

/// Frees every buffer of `bufs` (on an error path).
pub(crate) fn free_all(gpu: &mut Gpu, bufs: Vec<DevBuf>) {
    for b in bufs {
        gpu.free(b);
    }
}

/// The gather kernel for an element width.
fn gather_name(elem: Elem) -> &'static str {
    match elem.size() {
        1 => "gather_u8",
        4 => "gather_u32",
        8 => "gather_u64",
        _ => "gather_u128",
    }
}

/// A handle of `buf` for a deferred check to read it by, if it is still allocated then
/// (a handle the runtime does not own: never freed).
fn reread(buf: &DevBuf) -> DevBuf {
    DevBuf {
        id: buf.id,
        elem: buf.elem,
        len: buf.len,
    }
}

/// `out[i] = col[idx[i] + shift]` for every column of `cols` (columns may differ in
/// length). An index out of range of a column is an error naming the first such column
/// and, in it, the first row, as the CPU backend reports it.
pub(crate) fn gather(gpu: &mut Gpu, idx: &DevBuf, shift: u32, cols: &[&DevBuf]) -> Result<Vec<DevBuf>, BackendError> {
    if idx.elem != Elem::U32 {
        return Err(err(format!("the index column must be u32, got {:?}", idx.elem)));
    }
    let n = idx.len;
    let idx_ptr = gpu.ptr(idx)?;
    let mut outs = Vec::with_capacity(cols.len());
    let res = (|| {
        let checked = n > 0 && !cols.is_empty();
        let word = if checked { gpu.check_word()? } else { 0 };
        for (c, col) in cols.iter().enumerate() {
            let out = gpu.alloc(col.elem, n)?;
            let out_ptr = gpu.ptr(&out)?;
            outs.push(out);
            let grid = gpu.grid_for(n, BLOCK, 4, 16);
            let args = [
                KArg::Ptr(out_ptr),
                KArg::Ptr(gpu.ptr(col)?),
                KArg::Ptr(idx_ptr),
                KArg::U64(n as u64),
                KArg::U32(shift),
                KArg::U64(col.len as u64),
                KArg::U64(c as u64),
                KArg::Ptr(word),
            ];
            gpu.launch("movement", gather_name(col.elem), grid, BLOCK, 0, &args)?;
        }
        if checked {
            let idx = reread(idx);
            let lens: Vec<usize> = cols.iter().map(|col| col.len).collect();
            gpu.finish_check(move |gpu, [code, key, _, _]| {
                if code == 0 {
                    return Ok(());
                }
                let c = (key >> 40) as usize;
                let row = (key & ((1 << 40) - 1)) as usize;
                let len = lens.get(c).copied().unwrap_or(0);
                // A deferred check may find the index column freed: the row still names it.
                Err(err(match gpu.read_u32(&idx, row) {
                    Ok(i) => format!(
                        "index {i} + shift {shift} = {} at row {row} is out of range of column {c} ({len} rows)",
                        u64::from(i) + u64::from(shift)
                    ),
                    Err(_) => {
                        format!("the index + shift {shift} at row {row} is out of range of column {c} ({len} rows)")
                    }
                }))
            })?;
        }
        Ok(())
    })();
    match res {
        Ok(()) => Ok(outs),
        Err(e) => {
            free_all(gpu, outs);
            Err(e)
        }
    }
}

/// `Gather { shift }`: args `idx` then k columns.
pub(crate) fn gather_kernel(gpu: &mut Gpu, shift: u32, args: &[&DevBuf]) -> Result<Vec<DevBuf>, BackendError> {
    gather(gpu, args[0], shift, &args[1..])
}

/// `Concat { parts, width }`: `parts` groups of `width` columns, concatenated in order.
pub(crate) fn concat(gpu: &mut Gpu, parts: usize, width: usize, args: &[&DevBuf]) -> Result<Vec<DevBuf>, BackendError> {
    debug_assert_eq!(args.len(), parts * width);
    let groups: Vec<&[&DevBuf]> = args.chunks(width).collect();
    let mut outs = Vec::with_capacity(width);
    let res = (|| {
        for c in 0..width {
            let total = groups
                .iter()
                .try_fold(0usize, |acc, g| acc.checked_add(g[c].len))
                .ok_or_else(|| err("the concatenation's length overflows"))?;
            let out = gpu.alloc(groups[0][c].elem, total)?;
            let mut at = 0;
            for g in &groups {
                gpu.copy(&out, at, g[c], 0, g[c].len)?;
                at += g[c].len;
            }
            outs.push(out);
        }
        Ok(())
    })();
    match res {
        Ok(()) => Ok(outs),
        Err(e) => {
            free_all(gpu, outs);
            Err(e)
        }
    }
}

/// `Slice { start, len }`: rows `start .. min(start + len, rows)` of k columns.
pub(crate) fn slice(gpu: &mut Gpu, start: u64, len: u64, args: &[&DevBuf]) -> Result<Vec<DevBuf>, BackendError> {
    let rows = args[0].len;
    let a = usize::try_from(start).unwrap_or(usize::MAX).min(rows);
    let b = a.saturating_add(usize::try_from(len).unwrap_or(usize::MAX)).min(rows);
    let mut outs = Vec::with_capacity(args.len());
    let res = (|| {
        for col in args {
            let out = gpu.alloc(col.elem, b - a)?;
            let r = gpu.copy(&out, 0, col, a, b - a);
            outs.push(out);
            r?;
        }
        Ok(())
    })();
    match res {
        Ok(()) => Ok(outs),
        Err(e) => {
            free_all(gpu, outs);
            Err(e)
        }
    }
}

/// `RootRange`: `lo = [0]`, `hi = [len(values_0)]`.
pub(crate) fn root_range(gpu: &mut Gpu, args: &[&DevBuf]) -> Result<Vec<DevBuf>, BackendError> {
    gpu.ptr(args[0])?;
    let len = u32::try_from(args[0].len).map_err(|_| err("the root level has more than u32 rows"))?;
    let lo = gpu.upload(&HostCol::U32(vec![0]))?;
    match gpu.upload(&HostCol::U32(vec![len])) {
        Ok(hi) => Ok(vec![lo, hi]),
        Err(e) => {
            gpu.free(lo);
            Err(e)
        }
    }
}

/// `RangeCount`: `hi - lo` per row (U64); a row with `hi < lo` is an error.
pub(crate) fn range_count(gpu: &mut Gpu, args: &[&DevBuf]) -> Result<Vec<DevBuf>, BackendError> {
    let (lo, hi) = (args[0], args[1]);
    let n = lo.len;
    let out = gpu.alloc(Elem::U64, n)?;
    let res = (|| {
        if n == 0 {
            return Ok(());
        }
        let word = gpu.check_word()?;
        let args = [
            KArg::Ptr(gpu.ptr(&out)?),
            KArg::Ptr(gpu.ptr(lo)?),
            KArg::Ptr(gpu.ptr(hi)?),
            KArg::U64(n as u64),
            KArg::Ptr(word),
        ];
        let grid = gpu.grid_for(n, BLOCK, 4, 16);
        gpu.launch("movement", "range_count", grid, BLOCK, 0, &args)?;
        let (lo, hi) = (reread(lo), reread(hi));
        gpu.finish_check(move |gpu, [code, row, _, _]| {
            if code == ERR_RANGE {
                let row = row as usize;
                // A deferred check may find the ranges freed: the row still names them.
                return Err(err(match (gpu.read_u32(&lo, row), gpu.read_u32(&hi, row)) {
                    (Ok(l), Ok(h)) => format!("row {row} has hi {h} below lo {l}"),
                    _ => format!("row {row} has hi below lo"),
                }));
            }
            if code != 0 {
                return Err(err(format!("device error code {code} at row {row}")));
            }
            Ok(())
        })
    })();
    match res {
        Ok(()) => Ok(vec![out]),
        Err(e) => {
            gpu.free(out);
            Err(e)
        }
    }
}

/// The routing kernel of a key column's element type.
fn route_hash_name(elem: Elem) -> &'static str {
    match elem {
        Elem::U8 => "route_hash_u8",
        Elem::I32 => "route_hash_i32",
        Elem::U32 => "route_hash_u32",
        Elem::I64 | Elem::U64 => "route_hash_u64",
        Elem::F64 => "route_hash_f64",
        Elem::I128 => "route_hash_i128",
    }
}

/// The rows of `cols` split by device under `Exchange::Hash` on `keys` among `devices`
/// (the contract of `Backend::route_rows`): each row's hash folded over the key columns
/// (`route_hash_*`), then per device a flag of its rows and a stable compaction.
pub(crate) fn route_rows(
    gpu: &mut Gpu,
    cols: &[&DevBuf],
    keys: &[usize],
    devices: usize,
) -> Result<Vec<Vec<DevBuf>>, BackendError> {
    let n = cols.first().map_or(0, |c| c.len);
    if cols.iter().any(|c| c.len != n) {
        return Err(err("the columns an exchange routes differ in length"));
    }
    if let Some(&k) = keys.iter().find(|&&k| k >= cols.len()) {
        return Err(err(format!("key column {k} of an exchange of {} columns", cols.len())));
    }
    let devices32 = u32::try_from(devices).map_err(|_| err(format!("{devices} devices")))?;
    if keys.is_empty() {
        // Every row has the empty row's hash: all go to one device.
        let to = fox_kernel::device_of(fox_kernel::row_hash(std::iter::empty()), devices);
        let mut parts: Vec<Vec<DevBuf>> = Vec::with_capacity(devices);
        for d in 0..devices {
            let mut part = Vec::with_capacity(cols.len());
            for col in cols {
                let len = if d == to { col.len } else { 0 };
                match gpu.alloc(col.elem, len) {
                    Ok(b) => {
                        if len > 0 {
                            if let Err(e) = gpu.copy(&b, 0, col, 0, len) {
                                gpu.free(b);
                                free_all(gpu, parts.into_iter().flatten().chain(part).collect());
                                return Err(e);
                            }
                        }
                        part.push(b);
                    }
                    Err(e) => {
                        free_all(gpu, parts.into_iter().flatten().chain(part).collect());
                        return Err(e);
                    }
                }
            }
            parts.push(part);
        }
        return Ok(parts);
    }
    let h = gpu.alloc(Elem::U64, n)?;
    let flags = match gpu.alloc(Elem::U8, n) {
        Ok(f) => f,
        Err(e) => {
            gpu.free(h);
            return Err(e);
        }
    };
    let mut parts: Vec<Vec<DevBuf>> = Vec::with_capacity(devices);
    let res = (|| {
        if n > 0 {
            let grid = gpu.grid_for(n, BLOCK, 4, 16);
            let h_ptr = gpu.ptr(&h)?;
            for (i, &k) in keys.iter().enumerate() {
                let args = [
                    KArg::Ptr(h_ptr),
                    KArg::Ptr(gpu.ptr(cols[k])?),
                    KArg::U64(n as u64),
                    KArg::U32(u32::from(i == 0)),
                ];
                gpu.launch("movement", route_hash_name(cols[k].elem), grid, BLOCK, 0, &args)?;
            }
        }
        for d in 0..devices32 {
            if n > 0 {
                let grid = gpu.grid_for(n, BLOCK, 4, 16);
                let args = [
                    KArg::Ptr(gpu.ptr(&flags)?),
                    KArg::Ptr(gpu.ptr(&h)?),
                    KArg::U64(n as u64),
                    KArg::U32(devices32),
                    KArg::U32(d),
                ];
                gpu.launch("movement", "route_flags", grid, BLOCK, 0, &args)?;
            }
            parts.push(crate::k_scan::compact(gpu, &flags, cols)?);
        }
        Ok(())
    })();
    gpu.free(h);
    gpu.free(flags);
    match res {
        Ok(()) => Ok(parts),
        Err(e) => {
            free_all(gpu, parts.into_iter().flatten().collect());
            Err(e)
        }
    }
}

/// A `U8` table of `len` rows, 1 at the rows `ones` and 0 elsewhere, built on the
/// device: zeroed, then the positions uploaded and 1 scattered to them (kernels/join.cu
/// `scatter_u8` from a run of ones). A position past `len` is an error, and nothing is
/// left allocated.
pub(crate) fn upload_flags(gpu: &mut Gpu, len: usize, ones: &[u32]) -> Result<DevBuf, BackendError> {
    if let Some(&bad) = ones.iter().find(|&&r| r as usize >= len) {
        return Err(err(format!("flag at row {bad} of a table of {len} rows")));
    }
    let out = gpu.alloc_zeroed(Elem::U8, len)?;
    if ones.is_empty() {
        return Ok(out);
    }
    let mut temps = Vec::with_capacity(2);
    let res = (|| {
        temps.push(gpu.upload(&HostCol::U32(ones.to_vec()))?);
        temps.push(gpu.upload(&HostCol::U8(vec![1; ones.len()]))?);
        let args = [
            KArg::Ptr(gpu.ptr(&temps[1])?),
            KArg::Ptr(gpu.ptr(&temps[0])?),
            KArg::U64(ones.len() as u64),
            KArg::Ptr(gpu.ptr(&out)?),
        ];
        let grid = crate::k_join::stride_grid(gpu, ones.len());
        gpu.launch("join", "scatter_u8", grid, BLOCK, 0, &args)
    })();
    free_all(gpu, temps);
    match res {
        Ok(()) => Ok(out),
        Err(e) => {
            gpu.free(out);
            Err(e)
        }
    }
}

/// The packed bytes an upload of a packed column moves at a time: the rows of a larger
/// upload go through one buffer of this size, each piece widened into the column before
/// the next moves.
pub const WIDEN_PIECE_BYTES: usize = 64 << 20;

/// The device bytes [`upload_stored`] of `n` rows of `col` holds besides the column: its
/// packed rows, at most `piece` bytes of them (and a string column's codes).
pub(crate) fn stored_upload_room(col: &fox_runtime::stored::StoredCol, n: usize, piece: usize) -> usize {
    let all = col.packed_bytes(n);
    if all - col.packed_bytes(0) <= piece {
        all
    } else {
        // The piece, rounded up to a multiple of 4 bytes, and the codes.
        piece + 4 + col.packed_bytes(0)
    }
}

/// The rows `rows` of a database's stored column as the column a plan reads: a column
/// held as it is read is copied as it is; a packed one moves its packed rows (1, 2 or 4
/// bytes a row, and a string column's distinct codes) and is widened on the device
/// ([`widen_packed`]): at once where they take at most `Gpu::widen_piece_bytes`
/// ([`WIDEN_PIECE_BYTES`]), else through one buffer of that size, piece by piece, into
/// the column. Nothing is left allocated on an error.
pub(crate) fn upload_stored(
    gpu: &mut Gpu,
    col: &fox_runtime::stored::StoredCol,
    rows: std::ops::Range<usize>,
) -> Result<DevBuf, BackendError> {
    if let Some(h) = col.plain() {
        return gpu.upload_rows(h, rows);
    }
    check_rows(col, &rows)?;
    let n = rows.len();
    let piece_bytes = gpu.widen_piece_bytes;
    if col.packed_bytes(n) - col.packed_bytes(0) <= piece_bytes {
        return match upload_packed(gpu, col, rows.clone())? {
            Some(packed) => {
                let out = widen_packed(gpu, &packed, col, rows.clone(), rows);
                gpu.free(packed);
                out
            }
            None => Err(err("a packed column without packed rows".to_string())),
        };
    }
    let Some((_, width, how)) = col.packed_rows(0, 0) else {
        return Err(err("a packed column without packed rows".to_string()));
    };
    let per = (piece_bytes / width as usize).max(1);
    let out = gpu.alloc(col.elem(), n)?;
    let mut temps: Vec<DevBuf> = Vec::with_capacity(2);
    let res = (|| {
        let piece = gpu.alloc(Elem::U8, (per * width as usize).next_multiple_of(4))?;
        let piece_ptr = gpu.ptr(&piece)?;
        temps.push(piece);
        let last = match how {
            Ok(base) => KArg::U64(base as u64),
            Err(codes) => {
                let c = gpu.alloc(Elem::U8, 4 * codes.len())?;
                temps.push(c);
                let c = temps.last().expect("just pushed");
                gpu.htod_at(c, 0, crate::device::bytes_of(codes))?;
                KArg::Ptr(gpu.ptr(c)?)
            }
        };
        let kernel = match (how, col.elem()) {
            (Err(_), _) => "widen_codes",
            (Ok(_), Elem::I32) => "widen_i32",
            (Ok(_), _) => "widen_i64",
        };
        let out_ptr = gpu.ptr(&out)?;
        let size = col.elem().size() as u64;
        let mut a = rows.start;
        while a < rows.end {
            let b = (a + per).min(rows.end);
            let (bytes, _, _) = col.packed_rows(a, b).expect("packed");
            // The piece's buffer is read by the widening of the piece before: the copy
            // into it follows that launch on the stream.
            gpu.htod_at(&temps[0], 0, bytes)?;
            let args = [
                KArg::Ptr(out_ptr + (a - rows.start) as u64 * size),
                KArg::Ptr(piece_ptr),
                KArg::U64((b - a) as u64),
                KArg::U32(width),
                last,
            ];
            let grid = gpu.grid_for(b - a, BLOCK, 4, 16);
            gpu.launch("movement", kernel, grid, BLOCK, 0, &args)?;
            a = b;
        }
        Ok(())
    })();
    free_all(gpu, temps);
    match res {
        Ok(()) => Ok(out),
        Err(e) => {
            gpu.free(out);
            Err(e)
        }
    }
}

/// The packed rows `rows` of a stored column in one new `U8` buffer, laid out as
/// `StoredCol::packed_bytes` says (the rows, then a string column's distinct codes at
/// `StoredCol::codes_at`); `None` for a column held as it is read. Nothing is left
/// allocated on an error.
pub(crate) fn upload_packed(
    gpu: &mut Gpu,
    col: &fox_runtime::stored::StoredCol,
    rows: std::ops::Range<usize>,
) -> Result<Option<DevBuf>, BackendError> {
    check_rows(col, &rows)?;
    let Some((bytes, _, how)) = col.packed_rows(rows.start, rows.end) else {
        return Ok(None);
    };
    let n = rows.len();
    let buf = gpu.alloc(Elem::U8, col.packed_bytes(n))?;
    let res = gpu.htod_at(&buf, 0, bytes).and_then(|()| match how {
        Ok(_) => Ok(()),
        Err(codes) => gpu.htod_at(&buf, col.codes_at(n), crate::device::bytes_of(codes)),
    });
    match res {
        Ok(()) => Ok(Some(buf)),
        Err(e) => {
            gpu.free(buf);
            Err(e)
        }
    }
}

fn check_rows(col: &fox_runtime::stored::StoredCol, rows: &std::ops::Range<usize>) -> Result<(), BackendError> {
    if rows.start > rows.end || rows.end > col.len() {
        return Err(err(format!(
            "rows {}..{} of a packed column of {} rows uploaded",
            rows.start,
            rows.end,
            col.len()
        )));
    }
    Ok(())
}

/// The rows `rows` of a packed stored column widened into a new buffer from `packed`,
/// the buffer [`upload_packed`] made of its rows `kept` (kernels/movement.cu
/// `widen_i32`, `widen_i64`, `widen_codes`); `packed` stays. An error for rows outside
/// `kept` or a buffer not of their packed bytes; nothing is left allocated on an error.
pub(crate) fn widen_packed(
    gpu: &mut Gpu,
    packed: &DevBuf,
    col: &fox_runtime::stored::StoredCol,
    kept: std::ops::Range<usize>,
    rows: std::ops::Range<usize>,
) -> Result<DevBuf, BackendError> {
    check_rows(col, &rows)?;
    check_rows(col, &kept)?;
    let Some((_, width, how)) = col.packed_rows(0, 0) else {
        return Err(err("packed rows widened for a column held as it is read".to_string()));
    };
    if packed.elem != Elem::U8
        || packed.len != col.packed_bytes(kept.len())
        || rows.start < kept.start
        || rows.end > kept.end
    {
        return Err(err(format!(
            "rows {}..{} widened from a {} buffer of {} bytes said to hold the packed rows {}..{} ({} bytes)",
            rows.start,
            rows.end,
            packed.elem.name(),
            packed.len,
            kept.start,
            kept.end,
            col.packed_bytes(kept.len())
        )));
    }
    let (from, n) = (rows.start - kept.start, rows.len());
    // A string column's codes follow the kept rows, from a multiple of 4 bytes.
    let codes_at = col.codes_at(kept.len());
    let out = gpu.alloc(col.elem(), n)?;
    if n == 0 {
        return Ok(out);
    }
    let res = (|| {
        let base = gpu.ptr(packed)?;
        let at = base + (from * width as usize) as u64;
        let (kernel, last) = match how {
            Ok(b) => (
                if col.elem() == Elem::I32 {
                    "widen_i32"
                } else {
                    "widen_i64"
                },
                KArg::U64(b as u64),
            ),
            Err(_) => ("widen_codes", KArg::Ptr(base + codes_at as u64)),
        };
        let args = [
            KArg::Ptr(gpu.ptr(&out)?),
            KArg::Ptr(at),
            KArg::U64(n as u64),
            KArg::U32(width),
            last,
        ];
        let grid = gpu.grid_for(n, BLOCK, 4, 16);
        gpu.launch("movement", kernel, grid, BLOCK, 0, &args)
    })();
    match res {
        Ok(()) => Ok(out),
        Err(e) => {
            gpu.free(out);
            Err(e)
        }
    }
}
