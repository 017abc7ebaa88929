//! `SortPerm` and `AdjacentDistinct` (kernels/sort.cu), and the shared primitive
//! [`sort_perm`].
//!
//! The permutation comes from an LSB radix sort of (key, row) pairs with 8-bit digits.
//! Key columns are sorted from the last (least significant) to the first; for each, the
//! column is read through the permutation so far and turned into order-preserving
//! unsigned integers (32 or 64 bits), one kernel counts every digit place at once, and
//! the digit places whose digit is the same for every key are skipped. Each remaining
//! place is one onesweep kernel: a tile ranks its keys by the digit in shared memory and
//! finds where its keys go from the counts of the tiles before it (decoupled look-back
//! per digit), then writes keys and rows (the last pass of the last key only the rows,
//! when only the permutation is wanted). Every pass is stable, so the result is the
//! stable lexicographic order. An i128 key column is sorted as two 64-bit keys, its high
//! word (signed) and then its low word (unsigned), as fox-cpu splits it.

use crate::device::{Gpu, KArg, ERR_INDEX};
use crate::k_join::Scratch;
use crate::k_scan::{free_all, grid_u32};
use crate::k_trie;
use fox_kernel::Elem;
use fox_runtime::{BackendError, DevBuf, HostCol};

use crate::prelude::BLOCK;
/// Threads of a onesweep tile, and keys per thread for 32- and 64-bit keys
/// (kernels/sort.cu).
pub(crate) const SWEEP_THREADS: u32 = 384;
pub(crate) const SWEEP_ITEMS_32: u32 = 23;
pub(crate) const SWEEP_ITEMS_64: u32 = 15;
/// Keys per onesweep tile for 32-bit keys.
const TILE_32: usize = (SWEEP_THREADS * SWEEP_ITEMS_32) as usize;
/// Keys per onesweep tile for 64-bit keys.
const TILE_64: usize = (SWEEP_THREADS * SWEEP_ITEMS_64) as usize;

fn err(msg: impl Into<String>) -> BackendError {
    BackendError(msg.into())
}

/// Which part of a key column a radix key is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    /// The whole column.
    Whole,
    /// The high word of an i128 column (signed).
    High,
    /// The low word of an i128 column (unsigned).
    Low,
}

/// One radix key: a key column, or one 64-bit word of an i128 key column.
#[derive(Clone, Copy)]
struct RadixKey<'a> {
    col: &'a DevBuf,
    /// The key column's index (for messages).
    index: usize,
    desc: bool,
    by_rank: bool,
    part: Part,
}

/// The radix keys of the key columns, most significant first: one per column, two (high
/// word, then low word) per i128 column.
fn radix_keys<'a>(keys: &[&'a DevBuf], desc: &[bool], by_rank: &[bool]) -> Vec<RadixKey<'a>> {
    let mut out = Vec::with_capacity(keys.len());
    for (index, col) in keys.iter().enumerate() {
        let key = |part| RadixKey {
            col,
            index,
            desc: desc[index],
            by_rank: by_rank[index],
            part,
        };
        if col.elem == Elem::I128 && !by_rank[index] {
            out.extend([key(Part::High), key(Part::Low)]);
        } else {
            out.push(key(Part::Whole));
        }
    }
    out
}

/// The transformed width of a radix key in bytes (4 or 8) and its prep kernel.
fn key_kind(key: &RadixKey) -> (usize, &'static str) {
    if key.by_rank {
        return (4, "sort_prep_rank");
    }
    match (key.col.elem, key.part) {
        (_, Part::High) => (8, "sort_prep_i128_hi"),
        (_, Part::Low) => (8, "sort_prep_i128_lo"),
        (Elem::U8, _) => (4, "sort_prep_u8"),
        (Elem::I32, _) => (4, "sort_prep_i32"),
        (Elem::U32, _) => (4, "sort_prep_u32"),
        (Elem::I64, _) => (8, "sort_prep_i64"),
        (Elem::U64, _) => (8, "sort_prep_u64"),
        (Elem::F64, _) => (8, "sort_prep_f64"),
        // Never: `radix_keys` splits every i128 key (one by rank is rejected before).
        (Elem::I128, Part::Whole) => (8, "sort_prep_i128_hi"),
    }
}

/// For a key column whose order-preserving transform is an xor with a constant (u32, i32,
/// u64, i64, ascending or descending): that constant. The first key sorted may then skip
/// the prep kernel: the histogram and the first onesweep pass read the column itself and
/// apply the xor, and the first pass makes up the identity permutation.
fn xor_transform(key: &RadixKey) -> Option<u64> {
    if key.by_rank || key.part != Part::Whole {
        return None;
    }
    let (sign, all) = match key.col.elem {
        Elem::U32 => (0, u64::from(u32::MAX)),
        Elem::I32 => (1u64 << 31, u64::from(u32::MAX)),
        Elem::U64 => (0, u64::MAX),
        Elem::I64 => (1u64 << 63, u64::MAX),
        _ => return None,
    };
    Some(if key.desc { sign ^ all } else { sign })
}

/// A kernel argument holding an xor mask of the key width (4 or 8 bytes).
fn xor_arg(width: usize, mask: u64) -> KArg {
    if width == 8 {
        KArg::U64(mask)
    } else {
        KArg::U32(mask as u32)
    }
}

/// Inputs of at least this many rows are first checked for being sorted already.
const SORTED_CHECK_MIN: usize = 1 << 16;

/// Whether the rows are already in order (`rows_sorted`), so that the identity is their
/// stable sort: checked when there are at most four radix keys, each an integer column
/// whose order is that of its bits after an xor; `false` (not checked) otherwise. One
/// read of the keys, against the several passes of a sort.
fn already_sorted(gpu: &mut Gpu, rkeys: &[RadixKey], n: usize) -> Result<bool, BackendError> {
    if rkeys.len() > 4 {
        return Ok(false);
    }
    let mut ptrs = [0u64; 4];
    let mut xors = [0u64; 4];
    let mut widths = 0u32;
    for (j, key) in rkeys.iter().enumerate() {
        let Some(x) = xor_transform(key) else {
            return Ok(false);
        };
        ptrs[j] = gpu.ptr(key.col)?;
        xors[j] = x;
        widths |= (key.col.elem.size() as u32) << (8 * j);
    }
    let flag = gpu.alloc_zeroed(Elem::U32, 1)?;
    let res = (|| {
        let mut args: Vec<KArg> = ptrs.iter().map(|&p| KArg::Ptr(p)).collect();
        args.extend(xors.iter().map(|&x| KArg::U64(x)));
        args.extend([
            KArg::U32(widths),
            KArg::I32(rkeys.len() as i32),
            KArg::U64(n as u64),
            KArg::Ptr(gpu.ptr(&flag)?),
        ]);
        let grid = gpu.grid_for(n, BLOCK, 4, 16);
        gpu.launch("sort", "rows_sorted", grid, BLOCK, 0, &args)?;
        Ok(gpu.read_u32(&flag, 0)? == 0)
    })();
    gpu.free(flag);
    res
}

/// The stable permutation (U32) ordering the rows of `keys` lexicographically: `desc[i]`
/// reverses key i, `by_rank[i]` orders string key i by `rank[code]` (then `rank` must be
/// given). Floats order by total order (-0.0 < 0.0, NaN last).
pub(crate) fn sort_perm(
    gpu: &mut Gpu,
    keys: &[&DevBuf],
    desc: &[bool],
    rank: Option<&DevBuf>,
    by_rank: &[bool],
) -> Result<DevBuf, BackendError> {
    debug_assert!(desc.len() == keys.len() && by_rank.len() == keys.len());
    debug_assert!(rank.is_some() || !by_rank.contains(&true));
    let n = keys.first().map_or(0, |c| c.len);
    if n > u32::MAX as usize {
        return Err(err(format!(
            "the input has {n} rows, more than u32 row indices can address"
        )));
    }
    if n == 0 {
        return gpu.alloc(Elem::U32, 0);
    }

    let rkeys = radix_keys(keys, desc, by_rank);
    if n >= SORTED_CHECK_MIN && already_sorted(gpu, &rkeys, n)? {
        let mut s = Scratch::new();
        let res = k_trie::iota(gpu, &mut s, n).map(|perm| vec![perm]);
        return s.finish(gpu, res).map(|mut outs| outs.remove(0));
    }
    let kinds: Vec<(usize, &'static str)> = rkeys.iter().map(key_kind).collect();
    let wide = kinds.iter().any(|(w, _)| *w == 8);
    let max_tiles = kinds
        .iter()
        .map(|(w, _)| n.div_ceil(if *w == 8 { TILE_64 } else { TILE_32 }))
        .max()
        .unwrap_or(0);
    let key_elem = if wide { Elem::U64 } else { Elem::U32 };

    let mut bufs: Vec<DevBuf> = Vec::new();
    let alloc = |gpu: &mut Gpu, bufs: &mut Vec<DevBuf>, elem: Elem, len: usize| -> Result<usize, BackendError> {
        bufs.push(gpu.alloc(elem, len)?);
        Ok(bufs.len() - 1)
    };
    let res = (|| -> Result<usize, BackendError> {
        let key_bufs = [alloc(gpu, &mut bufs, key_elem, n)?, alloc(gpu, &mut bufs, key_elem, n)?];
        let perm_bufs = [
            alloc(gpu, &mut bufs, Elem::U32, n)?,
            alloc(gpu, &mut bufs, Elem::U32, n)?,
        ];
        let hist = alloc(gpu, &mut bufs, Elem::U32, 8 * 256)?;
        let offsets = alloc(gpu, &mut bufs, Elem::U32, 8 * 256)?;
        let mask = alloc(gpu, &mut bufs, Elem::U64, 1)?;
        let status = alloc(gpu, &mut bufs, Elem::U64, max_tiles * 256)?;
        let counters = alloc(gpu, &mut bufs, Elem::U64, 8 * rkeys.len())?;
        gpu.memset_zero(&bufs[counters])?;
        let ptr = |gpu: &Gpu, bufs: &[DevBuf], i: usize| gpu.ptr(&bufs[i]);
        let keys_p = [ptr(gpu, &bufs, key_bufs[0])?, ptr(gpu, &bufs, key_bufs[1])?];
        let perms_p = [ptr(gpu, &bufs, perm_bufs[0])?, ptr(gpu, &bufs, perm_bufs[1])?];
        let hist_p = ptr(gpu, &bufs, hist)?;
        let offsets_p = ptr(gpu, &bufs, offsets)?;
        let status_p = ptr(gpu, &bufs, status)?;
        let counters_p = ptr(gpu, &bufs, counters)?;
        let rank_p = match rank {
            Some(r) => gpu.ptr(r)?,
            None => 0,
        };
        let rank_len = rank.map_or(0, |r| r.len as u64);

        // kc/pc: the key and permutation buffers holding the current data.
        let (mut kc, mut pc) = (0usize, 0usize);
        let mut first = true;
        let mut pass_no = 0usize;
        let grid = gpu.grid_for(n, BLOCK, 4, 16);
        for (rk, key) in rkeys.iter().enumerate().rev() {
            let (width, prep) = kinds[rk];
            let places: u32 = if width == 8 { 8 } else { 4 };
            let (hist_k, sweep_k, tile) = if width == 8 {
                ("radix_hist_u64", "onesweep_u64", TILE_64)
            } else {
                ("radix_hist_u32", "onesweep_u32", TILE_32)
            };
            // The first key of a plain integer type skips the prep kernel (see xor_transform).
            let fused = if first { xor_transform(key) } else { None };
            let run_prep = |gpu: &mut Gpu, first: bool| -> Result<(), BackendError> {
                let mut args = vec![
                    KArg::Ptr(gpu.ptr(key.col)?),
                    KArg::Ptr(if first { 0 } else { perms_p[pc] }),
                    KArg::Ptr(if first { perms_p[pc] } else { 0 }),
                    KArg::Ptr(keys_p[kc]),
                    KArg::U64(n as u64),
                    KArg::U32(u32::from(key.desc)),
                ];
                if key.by_rank {
                    args.extend([KArg::Ptr(rank_p), KArg::U64(rank_len), KArg::Ptr(gpu.err_ptr())]);
                    gpu.reset_err()?;
                }
                gpu.launch("sort", prep, grid, BLOCK, 0, &args)?;
                if key.by_rank {
                    let [code, row, _, _] = gpu.read_err()?;
                    if code == ERR_INDEX {
                        let row = usize::try_from(row).unwrap_or(usize::MAX);
                        let code = if row < n { gpu.read_u32(key.col, row)? } else { 0 };
                        return Err(err(format!(
                            "string code {code} of key {} at row {row} is outside the rank table ({rank_len} entries)",
                            key.index
                        )));
                    } else if code != 0 {
                        return Err(err(format!("unexpected error code {code} from the rank lookup")));
                    }
                }
                Ok(())
            };
            if fused.is_none() {
                run_prep(gpu, first)?;
            }

            // The histogram reads the column itself when fused, else the prepared keys.
            let (hist_in, hist_xor) = match fused {
                Some(x) => (gpu.ptr(key.col)?, x),
                None => (keys_p[kc], 0),
            };
            gpu.memset_zero(&bufs[hist])?;
            let hgrid = gpu.grid_for(n, BLOCK, 32, 4);
            let hargs = [
                KArg::Ptr(hist_in),
                KArg::U64(n as u64),
                KArg::Ptr(hist_p),
                xor_arg(width, hist_xor),
            ];
            gpu.launch("sort", hist_k, hgrid, BLOCK, 0, &hargs)?;
            let mask_p = ptr(gpu, &bufs, mask)?;
            let oargs = [
                KArg::Ptr(hist_p),
                KArg::Ptr(offsets_p),
                KArg::U32(places),
                KArg::U64(n as u64),
                KArg::Ptr(mask_p),
            ];
            gpu.launch("sort", "radix_digit_offsets", 1, 256, 0, &oargs)?;
            let constant = gpu.read_u64(&bufs[mask], 0)?;
            let all_constant = (0..places).all(|p| constant & (1 << p) != 0);
            if fused.is_some() && all_constant {
                // No pass runs: the prep kernel still makes the identity permutation.
                run_prep(gpu, first)?;
            }
            let mut pass_xor = fused.filter(|_| !all_constant);
            first = false;

            let ntiles = n.div_ceil(tile);
            let sgrid = grid_u32(ntiles, "radix sort")?;
            // The last pass of the last key writes only the permutation.
            let last_place = (0..places).rev().find(|p| constant & (1 << p) == 0);
            for p in 0..places {
                if constant & (1 << p) != 0 {
                    continue;
                }
                // Status words carry their pass modulo 64: one zeroing serves 64 passes.
                let epoch = (pass_no % 64) as u32;
                if epoch == 0 {
                    gpu.memset_zero(&bufs[status])?;
                }
                let keys_out = if rk == 0 && Some(p) == last_place {
                    0
                } else {
                    keys_p[1 - kc]
                };
                // The first pass of a fused key reads the column and makes up the rows.
                let (kin, vin, x) = match pass_xor.take() {
                    Some(x) => (gpu.ptr(key.col)?, 0, x),
                    None => (keys_p[kc], perms_p[pc], 0),
                };
                let sargs = [
                    KArg::Ptr(kin),
                    KArg::Ptr(vin),
                    KArg::Ptr(keys_out),
                    KArg::Ptr(perms_p[1 - pc]),
                    KArg::U64(n as u64),
                    KArg::U32(8 * p),
                    KArg::Ptr(offsets_p + u64::from(p) * 256 * 4),
                    KArg::Ptr(status_p),
                    KArg::Ptr(counters_p + pass_no as u64 * 8),
                    KArg::U32(epoch),
                    xor_arg(width, x),
                ];
                gpu.launch("sort", sweep_k, sgrid, SWEEP_THREADS, 0, &sargs)?;
                pass_no += 1;
                kc = 1 - kc;
                pc = 1 - pc;
            }
        }
        Ok(perm_bufs[pc])
    })();
    match res {
        Ok(keep) => {
            let perm = bufs.swap_remove(keep);
            free_all(gpu, bufs);
            Ok(perm)
        }
        Err(e) => {
            free_all(gpu, bufs);
            Err(e)
        }
    }
}

/// `SortPerm { desc, by_rank }`: args k key columns, then the `Rank` table if any key is
/// by rank; outs `perm`.
pub(crate) fn sort_perm_kernel(
    gpu: &mut Gpu,
    desc: &[bool],
    by_rank: &[bool],
    args: &[&DevBuf],
) -> Result<Vec<DevBuf>, BackendError> {
    let k = desc.len();
    let need_rank = by_rank.iter().any(|b| *b);
    let rank = if need_rank { Some(args[k]) } else { None };
    Ok(vec![sort_perm(gpu, &args[..k], desc, rank, by_rank)?])
}

/// The adjacent-distinct kernel for an element type.
fn adjacent_name(elem: Elem) -> &'static str {
    match elem {
        Elem::F64 => "adjacent_distinct_f64",
        Elem::U8 => "adjacent_distinct_u8",
        Elem::I32 | Elem::U32 => "adjacent_distinct_u32",
        Elem::I64 | Elem::U64 => "adjacent_distinct_u64",
        Elem::I128 => "adjacent_distinct_u128",
    }
}

/// `RepeatedKey`: args `nkeys` key columns sorted lexicographically (one column giving the
/// row count when `nkeys == 0`); outs `row` (U32): the first `i` whose row `i + 1` has the
/// same keys, as one row, or no row. The flags of `AdjacentDistinct` over the keys, then
/// one reduction to the first zero flag.
pub(crate) fn repeated_key(gpu: &mut Gpu, nkeys: usize, args: &[&DevBuf]) -> Result<Vec<DevBuf>, BackendError> {
    let n = args.first().map_or(0, |c| c.len);
    let first = if nkeys == 0 {
        (n >= 2).then_some(0)
    } else if n < 2 {
        None
    } else {
        let flags = adjacent_distinct(gpu, args)?.remove(0);
        let res = (|| {
            let last = gpu.alloc_zeroed(Elem::U64, 1)?;
            let r = (|| {
                let a = [
                    KArg::Ptr(gpu.ptr(&flags)?),
                    KArg::U64(n as u64),
                    KArg::Ptr(gpu.ptr(&last)?),
                ];
                let grid = gpu.grid_for(n, BLOCK, 4, 16);
                gpu.launch("sort", "repeated_key", grid, BLOCK, 0, &a)?;
                gpu.read_u64(&last, 0)
            })();
            gpu.free(last);
            r
        })();
        gpu.free(flags);
        let last = res?;
        (last != 0).then(|| n - last as usize - 1)
    };
    let row = match first {
        Some(i) => vec![u32::try_from(i).map_err(|_| err(format!("row {i} does not fit a u32 row index")))?],
        None => Vec::new(),
    };
    Ok(vec![gpu.upload(&HostCol::U32(row))?])
}

/// `AdjacentDistinct`: args k columns of equal length; outs flags (U8), 1 where row i
/// differs from row i-1 in any column (row 0 is 1). Floats compare by total order.
pub(crate) fn adjacent_distinct(gpu: &mut Gpu, args: &[&DevBuf]) -> Result<Vec<DevBuf>, BackendError> {
    let n = args.first().map_or(0, |c| c.len);
    let out = gpu.alloc(Elem::U8, n)?;
    let res = (|| {
        let out_ptr = gpu.ptr(&out)?;
        let grid = gpu.grid_for(n, BLOCK, 4, 16);
        for (c, col) in args.iter().enumerate() {
            let a = [
                KArg::Ptr(gpu.ptr(col)?),
                KArg::Ptr(out_ptr),
                KArg::U64(n as u64),
                KArg::U32(u32::from(c > 0)),
            ];
            gpu.launch("sort", adjacent_name(col.elem), grid, BLOCK, 0, &a)?;
        }
        Ok(())
    })();
    match res {
        Ok(()) => Ok(vec![out]),
        Err(e) => {
            gpu.free(out);
            Err(e)
        }
    }
}
