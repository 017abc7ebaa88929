//! Leapfrog-triejoin levels on kernels/trie.cu: `TrieBuild`, `Expand` (load-balanced
//! expansion) and `SortedSearch`.
//!
//! `TrieBuild` marks, level by level, the rows that start a new prefix (a row starts a
//! prefix of length d+1 when it starts one of length d or differs from the previous row in
//! column d), compacts their row numbers into the level's node rows, gathers the level's
//! values, and finds each parent's first child by binary search in the child node rows
//! (every parent row is also a child row); a last level of distinct rows is the last
//! column itself.

use crate::device::{Gpu, KArg};
use crate::k_join::{blocks, desc_buffer, err, expand_pairs, stride_grid, tile_owners, Scratch, BLOCK, EXPAND_TILE};
use crate::prelude::type_code;
use crate::{k_move, k_scan, k_sort};
use fox_kernel::Elem;
use fox_runtime::{BackendError, DevBuf, HostCol};

/// `0, 1, …, n-1` as u32 (n must fit u32 indices).
pub(crate) fn iota(gpu: &mut Gpu, s: &mut Scratch, n: usize) -> Result<DevBuf, BackendError> {
    let out = s.alloc(gpu, Elem::U32, n)?;
    let grid = stride_grid(gpu, n);
    let args = [KArg::Ptr(gpu.ptr(&out)?), KArg::U64(n as u64)];
    gpu.launch("trie", "iota_u32", grid, BLOCK, 0, &args)?;
    Ok(out)
}

/// `TrieBuild { arity }`: the levels of the trie of a sorted, duplicate-free relation.
/// One byte per row marks, updated in place level by level, the rows that start a new
/// prefix; a level's node rows are the marked rows' numbers. A last level whose every row
/// is a node (a duplicate-free relation's) is the last column itself, and each parent's
/// first child the node of its own row: no node rows, no gather. Besides the outputs it
/// holds the marks, the tiles' offsets and the node rows of the levels above the last.
pub(crate) fn trie_build(gpu: &mut Gpu, arity: usize, args: &[&DevBuf]) -> Result<Vec<DevBuf>, BackendError> {
    let n = args[0].len;
    if n > u32::MAX as usize {
        return Err(err(format!(
            "the relation has {n} rows, more than u32 row indices can address"
        )));
    }
    let mut s = Scratch::new();
    let res = (|| {
        let mut outs = Vec::with_capacity(2 * arity - 1);
        if n == 0 {
            for (d, col) in args.iter().enumerate() {
                if d > 0 {
                    outs.push(s.alloc_zeroed(gpu, Elem::U32, 1)?);
                }
                outs.push(s.alloc(gpu, col.elem, 0)?);
            }
            return Ok(outs);
        }
        let flags = s.alloc(gpu, Elem::U8, n)?;
        let flags_ptr = gpu.ptr(&flags)?;
        // The node rows of the level above.
        let mut parents: Option<DevBuf> = None;
        for (d, col) in args.iter().enumerate() {
            let fargs = [
                KArg::Ptr(if d == 0 { 0 } else { flags_ptr }),
                KArg::Ptr(gpu.ptr(col)?),
                KArg::I32(type_code(col.elem) as i32),
                KArg::U64(n as u64),
                KArg::Ptr(flags_ptr),
            ];
            let grid = stride_grid(gpu, n);
            gpu.launch("trie", "trie_flags", grid, BLOCK, 0, &fargs)?;
            let (offsets, m) = k_scan::count_flags(gpu, &flags)?;
            let offsets = s.adopt(offsets);
            if d + 1 == arity && m == n {
                if let Some(parents) = &parents {
                    let start = s.alloc(gpu, Elem::U32, parents.len + 1)?;
                    let targs = [
                        KArg::Ptr(gpu.ptr(parents)?),
                        KArg::U64(parents.len as u64),
                        KArg::U64(n as u64),
                        KArg::Ptr(gpu.ptr(&start)?),
                    ];
                    let grid = stride_grid(gpu, parents.len + 1);
                    gpu.launch("trie", "trie_start_rows", grid, BLOCK, 0, &targs)?;
                    outs.push(start);
                }
                let values = s.alloc(gpu, col.elem, n)?;
                gpu.copy(&values, 0, col, 0, n)?;
                outs.push(values);
                break;
            }
            let nodes = s.adopt(k_scan::flagged_rows(gpu, &flags, &offsets, m)?);
            if let Some(parents) = &parents {
                let start = s.alloc(gpu, Elem::U32, parents.len + 1)?;
                let targs = [
                    KArg::Ptr(gpu.ptr(parents)?),
                    KArg::U64(parents.len as u64),
                    KArg::Ptr(gpu.ptr(&nodes)?),
                    KArg::U64(nodes.len as u64),
                    KArg::Ptr(gpu.ptr(&start)?),
                ];
                let grid = stride_grid(gpu, parents.len + 1);
                gpu.launch("trie", "trie_start", grid, BLOCK, 0, &targs)?;
                outs.push(start);
            }
            let mut values = s.adopt_all(k_move::gather(gpu, &nodes, 0, &[*col])?);
            outs.push(values.remove(0));
            parents = Some(nodes);
        }
        Ok(outs)
    })();
    s.finish(gpu, res)
}

/// `Expand`: for each row i, `offsets[i+1] - offsets[i]` outputs with `parent = i` and
/// `pos = lo[i] + k`.
pub(crate) fn expand(gpu: &mut Gpu, args: &[&DevBuf]) -> Result<Vec<DevBuf>, BackendError> {
    let (lo, offsets, total) = (args[0], args[1], args[2]);
    let n = lo.len;
    if n > u32::MAX as usize {
        return Err(err(format!(
            "the input has {n} rows, more than u32 row indices can address"
        )));
    }
    let total = gpu.read_u64(total, 0)?;
    if n == 0 && total != 0 {
        return Err(err(format!("total is {total} for no rows")));
    }
    // The outputs written: all of them, or those of the window.
    let window = match args.get(3) {
        None => (0, total),
        Some(w) => {
            let (a, b) = (gpu.read_u64(w, 0)?, gpu.read_u64(w, 1)?);
            if a > b || b > total {
                return Err(err(format!("window {a} .. {b} is not within the {total} outputs")));
            }
            (a, b)
        }
    };
    let mut s = Scratch::new();
    let res = (|| {
        if n > 0 {
            let word = gpu.check_word()?;
            let args = [
                KArg::Ptr(gpu.ptr(lo)?),
                KArg::Ptr(gpu.ptr(offsets)?),
                KArg::U64(n as u64),
                KArg::U64(total),
                KArg::Ptr(word),
            ];
            let grid = stride_grid(gpu, n);
            gpu.launch("trie", "expand_check", grid, BLOCK, 0, &args)?;
            // The expansion stays within its rows on any offsets (kernels/trie.cu
            // `tile_rows`), so the check may be read later.
            gpu.finish_check_err(
                "Expand (code 1: the offsets are not an exclusive scan ending at total; code 2: positions exceed u32)",
            )?;
        }
        let (parent, pos) = expand_pairs(gpu, &mut s, lo, offsets, window)?;
        Ok(vec![parent, pos])
    })();
    s.finish(gpu, res)
}

/// `SortedSearch`: whether `needle[i]` occurs in `values[lo[i]..hi[i]]`, and the first
/// index of that slice whose value is not below it.
pub(crate) fn sorted_search(gpu: &mut Gpu, args: &[&DevBuf]) -> Result<Vec<DevBuf>, BackendError> {
    let (values, lo, hi, needle) = (args[0], args[1], args[2], args[3]);
    let n = lo.len;
    let mut s = Scratch::new();
    let res = (|| {
        let found = s.alloc(gpu, Elem::U8, n)?;
        let pos = s.alloc(gpu, Elem::U32, n)?;
        if n > 0 {
            gpu.reset_err()?;
            let args = [
                KArg::Ptr(gpu.ptr(values)?),
                KArg::U64(values.len as u64),
                KArg::I32(type_code(values.elem) as i32),
                KArg::Ptr(gpu.ptr(lo)?),
                KArg::Ptr(gpu.ptr(hi)?),
                KArg::Ptr(gpu.ptr(needle)?),
                KArg::U64(n as u64),
                KArg::Ptr(gpu.ptr(&found)?),
                KArg::Ptr(gpu.ptr(&pos)?),
                KArg::Ptr(gpu.err_ptr()),
            ];
            let grid = stride_grid(gpu, n);
            gpu.launch("trie", "sorted_search", grid, BLOCK, 0, &args)?;
            gpu.check_err("SortedSearch (a range lo .. hi is not within the values)")?;
        }
        Ok(vec![found, pos])
    })();
    s.finish(gpu, res)
}

/// The most ways an `IntersectCount` takes (kernels/trie.cu `IC_MAX_WAYS`).
pub(crate) const IC_MAX_WAYS: usize = 16;

/// Candidates per thread of `ic_hash_*` (kernels/trie.cu `ICH_ITEMS`).
pub(crate) const ICH_ITEMS: u32 = 32;
/// Candidates per block of `ic_hash_*` (kernels/trie.cu `ICH_TILE`).
const IC_HASH_TILE: u64 = (BLOCK * ICH_ITEMS) as u64;

/// A row is looked up in the shared way's table when its candidates are at most this many
/// times the shared range (otherwise it searches from its smallest range): on the
/// triangles of R-MAT scale 22 (degree order) on an H100, 8 took 20.8 G lookups and
/// 0.44 G searches, 167 ms for the whole count, against 189 ms with searches alone and
/// 196 ms with lookups for every row whose shared range fits a table.
const IC_HASH_FACTOR: u32 = 8;

/// `IntersectCount { ways }`: the number of (row, value) pairs whose value lies in the
/// range of every way of that row; one I64 row, or none when the count is 0. When a way's
/// range is shared by runs of rows, candidates are looked up in shared-memory tables
/// (`intersect_shared`; with two ways, each row's smaller range in a table of its larger,
/// `intersect_pair`); otherwise each row's candidates are the values of its smallest
/// range (`ic_work`), each searched in the other ranges (`count_searched`).
pub(crate) fn intersect_count(gpu: &mut Gpu, ways: usize, args: &[&DevBuf]) -> Result<Vec<DevBuf>, BackendError> {
    if ways > IC_MAX_WAYS {
        return Err(err(format!("takes at most {IC_MAX_WAYS} ways, not {ways}")));
    }
    let n = args[1].len;
    if n > u32::MAX as usize {
        return Err(err(format!("{n} rows are more than u32 row indices can address")));
    }
    let mut s = Scratch::new();
    let res = (|| {
        let mut total_count = 0u64;
        if n > 0 {
            let mut words = Vec::with_capacity(4 * ways);
            for part in 0..3 {
                for w in 0..ways {
                    words.push(gpu.ptr(args[3 * w + part])?);
                }
            }
            words.extend((0..ways).map(|w| args[3 * w].len as u64));
            let (desc, _) = desc_buffer(gpu, &mut s, "join", &words)?;
            let elem = args[0].elem;
            let out = s.alloc_zeroed(gpu, Elem::U64, 1)?;
            let level = Level {
                args,
                desc: &desc,
                ways,
                n,
                elem,
            };
            if !intersect_shared(gpu, &mut s, &level, &out)? {
                let work = s.alloc(gpu, Elem::U64, n)?;
                let lead = s.alloc(gpu, Elem::U8, n)?;
                gpu.reset_err()?;
                let wargs = [
                    KArg::Ptr(gpu.ptr(&desc)?),
                    KArg::I32(ways as i32),
                    KArg::U64(n as u64),
                    KArg::Ptr(gpu.ptr(&work)?),
                    KArg::Ptr(gpu.ptr(&lead)?),
                    KArg::Ptr(gpu.err_ptr()),
                ];
                gpu.launch("trie", "ic_work", stride_grid(gpu, n), BLOCK, 0, &wargs)?;
                gpu.check_err("IntersectCount (a range lo .. hi is not within its values)")?;
                count_searched(gpu, &mut s, (&desc, ways, n, elem), &work, &lead, &out)?;
            }
            total_count = gpu.read_u64(&out, 0)?;
        }
        let total = i64::try_from(total_count).map_err(|_| err(format!("the count {total_count} exceeds int64")))?;
        let rows = if total == 0 { Vec::new() } else { vec![total] };
        Ok(vec![gpu.upload(&HostCol::I64(rows))?])
    })();
    s.finish(gpu, res)
}

/// The ways of an `IntersectCount`: its arguments (values, lo, hi per way), their device
/// descriptor (kernels/trie.cu), the number of rows and the values' type.
#[derive(Clone, Copy)]
struct Level<'a> {
    args: &'a [&'a DevBuf],
    desc: &'a DevBuf,
    ways: usize,
    n: usize,
    elem: Elem,
}

/// Rows fewer than this are intersected by search alone.
const IC_SHARED_MIN_ROWS: usize = 2048;

/// `IntersectCount` when one way's range is shared by runs of consecutive rows (on
/// average at least two rows a run): the rows whose shared range fits a shared-memory table
/// look their candidates up in it (`ic_hash_*`), the others search as usual
/// (`count_searched`); the count is added to `out`. `false` when no way is shared enough,
/// and nothing was counted.
fn intersect_shared(gpu: &mut Gpu, s: &mut Scratch, level: &Level, out: &DevBuf) -> Result<bool, BackendError> {
    let Level {
        desc, ways, n, elem, ..
    } = *level;
    // i128 values have no hash kernel: their rows are searched.
    if ways < 2 || n < IC_SHARED_MIN_ROWS || elem == Elem::I128 {
        return Ok(false);
    }
    let runs = s.alloc_zeroed(gpu, Elem::U64, ways)?;
    let rargs = [
        KArg::Ptr(gpu.ptr(desc)?),
        KArg::I32(ways as i32),
        KArg::U64(n as u64),
        KArg::Ptr(gpu.ptr(&runs)?),
    ];
    gpu.launch("trie", "ic_runs", stride_grid(gpu, n), BLOCK, 0, &rargs)?;
    let runs = match gpu.download(&runs)? {
        HostCol::U64(v) => v,
        _ => return Err(err("the run counts are not U64")),
    };
    let (shared, &fewest) = runs
        .iter()
        .enumerate()
        .min_by_key(|&(_, r)| *r)
        .ok_or_else(|| err("no way to share"))?;
    if fewest.saturating_mul(2) > n as u64 {
        return Ok(false);
    }
    if ways == 2 {
        intersect_pair(gpu, s, level, shared, out)?;
        return Ok(true);
    }
    let cap = table_cap(ways, elem);
    let work_h = s.alloc(gpu, Elem::U64, n)?;
    let lead_h = s.alloc(gpu, Elem::U8, n)?;
    let work_b = s.alloc(gpu, Elem::U64, n)?;
    let lead_b = s.alloc(gpu, Elem::U8, n)?;
    gpu.reset_err()?;
    let sargs = [
        KArg::Ptr(gpu.ptr(desc)?),
        KArg::I32(ways as i32),
        KArg::I32(shared as i32),
        KArg::U64(n as u64),
        KArg::U32(cap),
        KArg::U32(IC_HASH_FACTOR),
        KArg::Ptr(gpu.ptr(&work_h)?),
        KArg::Ptr(gpu.ptr(&lead_h)?),
        KArg::Ptr(gpu.ptr(&work_b)?),
        KArg::Ptr(gpu.ptr(&lead_b)?),
        KArg::Ptr(gpu.err_ptr()),
    ];
    gpu.launch("trie", "ic_split", stride_grid(gpu, n), BLOCK, 0, &sargs)?;
    gpu.check_err("IntersectCount (a range lo .. hi is not within its values)")?;
    let (off_h, tot_h) = k_scan::exclusive_scan_u64(gpu, &work_h)?;
    let (off_h, tot_h) = (s.adopt(off_h), s.adopt(tot_h));
    let hashed = gpu.read_u64(&tot_h, 0)?;
    if hashed > 0 {
        let (tstart, ntiles) = tile_owners(gpu, s, &off_h, hashed, (0, hashed), IC_HASH_TILE)?;
        let hargs = [
            KArg::Ptr(gpu.ptr(desc)?),
            KArg::I32(ways as i32),
            KArg::I32(shared as i32),
            KArg::Ptr(gpu.ptr(&off_h)?),
            KArg::Ptr(gpu.ptr(&lead_h)?),
            KArg::U64(n as u64),
            KArg::U64(hashed),
            KArg::Ptr(gpu.ptr(&tstart)?),
            KArg::U64(ntiles),
            KArg::Ptr(gpu.ptr(out)?),
        ];
        let kernel = format!("ic_hash_{}", elem.name());
        gpu.launch("trie", &kernel, blocks(hashed, IC_HASH_TILE)?, BLOCK, 0, &hargs)?;
    }
    count_searched(gpu, s, (desc, ways, n, elem), &work_b, &lead_b, out)?;
    Ok(true)
}

/// Candidates per thread of `ic_hash2_*` (kernels/trie.cu `IC2_ITEMS`).
pub(crate) const IC2_ITEMS: u32 = 64;
/// Candidates per block of `ic_hash2_*` (kernels/trie.cu `IC2_TILE`).
const IC_HASH2_TILE: u64 = (BLOCK * IC2_ITEMS) as u64;

/// The largest range a shared-memory table holds (32 KiB of keys): a cuckoo table of
/// `ic_hash2_*` for two ways, a linear-probing table of `ic_hash_*` for more; by the
/// values' width.
fn table_cap(ways: usize, elem: Elem) -> u32 {
    match (ways, elem.size() <= 4) {
        (2, true) => IC2_SLOTS_32 / 2,
        (2, false) => IC2_SLOTS_64 / 2,
        (_, true) => ICH_CAP_32,
        (_, false) => ICH_CAP_64,
    }
}

/// The largest range the linear-probing table of `ic_hash_*` holds, for values of at most
/// 32 bits and of 64 (kernels/trie.cu `ICH_CAP_32`, `ICH_CAP_64`; twice as many slots).
pub(crate) const ICH_CAP_32: u32 = 4096;
pub(crate) const ICH_CAP_64: u32 = 2048;
/// Slots of each of the two cuckoo tables of `ic_hash2_*`, for values of at most 32 bits
/// and of 64 (kernels/trie.cu `IC2_SLOTS_32`, `IC2_SLOTS_64`); they hold a range of half
/// as many values.
pub(crate) const IC2_SLOTS_32: u32 = 4096;
pub(crate) const IC2_SLOTS_64: u32 = 2048;

/// Rows whose ranges both have at most this many values search (`count_searched`): a
/// table for them would serve few lookups, and blocks whose tiles hold many such tables
/// would lag behind the others.
const PAIR_SMALL: u32 = 64;

/// Evictions an insertion into a cuckoo table of `ic_hash2_*` makes before the block
/// searches its segment instead; tables are at most a quarter full, where chains this
/// long are rare.
pub(crate) const DEFAULT_TABLE_KICKS: u32 = 64;

/// `IntersectCount` of two ways, way `shared` shared by runs of rows: each row's smaller
/// range is looked up in a cuckoo table of its larger one (`ic_split2`). Rows whose larger
/// range is the shared way are counted in place; rows whose larger range is the other way
/// are compacted and sorted by that range, so that its rows follow each other (each row
/// packed in one 16-byte word while it moves), then counted the same way with the roles
/// swapped; rows whose larger range does not fit a
/// table search (`count_searched`). The count is added to `out`.
fn intersect_pair(
    gpu: &mut Gpu,
    s: &mut Scratch,
    level: &Level,
    shared: usize,
    out: &DevBuf,
) -> Result<(), BackendError> {
    let Level {
        args, desc, n, elem, ..
    } = *level;
    let other = 1 - shared;
    let (vals_s, lo_s, hi_s) = (args[3 * shared], args[3 * shared + 1], args[3 * shared + 2]);
    let (vals_o, lo_o, hi_o) = (args[3 * other], args[3 * other + 1], args[3 * other + 2]);
    let flag_a = s.alloc(gpu, Elem::U8, n)?;
    let flag_b = s.alloc(gpu, Elem::U8, n)?;
    let work_c = s.alloc(gpu, Elem::U64, n)?;
    let lead_c = s.alloc(gpu, Elem::U8, n)?;
    // Each row's four words, the other way's range first (16-byte elements).
    let pack = s.alloc(gpu, Elem::I128, n)?;
    gpu.reset_err()?;
    let sargs = [
        KArg::Ptr(gpu.ptr(desc)?),
        KArg::I32(shared as i32),
        KArg::U64(n as u64),
        KArg::U32(PAIR_SMALL),
        KArg::U32(table_cap(2, elem)),
        KArg::Ptr(gpu.ptr(&flag_a)?),
        KArg::Ptr(gpu.ptr(&flag_b)?),
        KArg::Ptr(gpu.ptr(&work_c)?),
        KArg::Ptr(gpu.ptr(&lead_c)?),
        KArg::Ptr(gpu.ptr(&pack)?),
        KArg::Ptr(gpu.err_ptr()),
    ];
    gpu.launch("trie", "ic_split2", stride_grid(gpu, n), BLOCK, 0, &sargs)?;
    gpu.check_err("IntersectCount (a range lo .. hi is not within its values)")?;
    // Rows whose larger range is the shared way, in their order (grouped by it).
    let a = s.adopt_all(k_scan::compact(gpu, &flag_a, &[lo_s, hi_s, lo_o, hi_o])?);
    hash_pair(gpu, s, (vals_s, &a[0], &a[1]), (vals_o, &a[2], &a[3]), elem, out)?;
    // Rows whose larger range is the other way, sorted by it: the sort key and the packed
    // rows are compacted, and the rows move in one 16-byte read each.
    let b = s.adopt_all(k_scan::compact(gpu, &flag_b, &[lo_o, &pack])?);
    let m = b[0].len;
    if m > 0 {
        let perm = s.adopt(k_sort::sort_perm(gpu, &[&b[0]], &[false], None, &[false])?);
        let cols = [
            s.alloc(gpu, Elem::U32, m)?,
            s.alloc(gpu, Elem::U32, m)?,
            s.alloc(gpu, Elem::U32, m)?,
            s.alloc(gpu, Elem::U32, m)?,
        ];
        let uargs = [
            KArg::Ptr(gpu.ptr(&b[1])?),
            KArg::Ptr(gpu.ptr(&perm)?),
            KArg::U64(m as u64),
            KArg::Ptr(gpu.ptr(&cols[0])?),
            KArg::Ptr(gpu.ptr(&cols[1])?),
            KArg::Ptr(gpu.ptr(&cols[2])?),
            KArg::Ptr(gpu.ptr(&cols[3])?),
        ];
        gpu.launch("trie", "unpack_gather4", stride_grid(gpu, m), BLOCK, 0, &uargs)?;
        hash_pair(
            gpu,
            s,
            (vals_o, &cols[0], &cols[1]),
            (vals_s, &cols[2], &cols[3]),
            elem,
            out,
        )?;
    }
    // Rows whose larger range does not fit a table.
    count_searched(gpu, s, (desc, 2, n, elem), &work_c, &lead_c, out)
}

/// Adds to `out` the candidates of each row (the values `lo_c .. hi_c` of `vals_c`) that
/// lie in its table range (`lo_t .. hi_t` of `vals_t`): `ic_hash2_*`, the rows of equal
/// table ranges next to each other, every row with at least one candidate (a block walks
/// the rows of its tile one run at a time).
fn hash_pair(
    gpu: &mut Gpu,
    s: &mut Scratch,
    (vals_t, lo_t, hi_t): (&DevBuf, &DevBuf, &DevBuf),
    (vals_c, lo_c, hi_c): (&DevBuf, &DevBuf, &DevBuf),
    elem: Elem,
    out: &DevBuf,
) -> Result<(), BackendError> {
    let n = lo_c.len;
    if n == 0 {
        return Ok(());
    }
    // The kernel reads the candidates 16 aligned bytes at a time.
    if gpu.ptr(vals_c)? % 16 != 0 {
        return Err(err("the candidate values are not 16-byte aligned"));
    }
    let work = s.adopt_all(k_move::range_count(gpu, &[lo_c, hi_c])?);
    let (offsets, total) = k_scan::exclusive_scan_u64(gpu, &work[0])?;
    let (offsets, total) = (s.adopt(offsets), s.adopt(total));
    let candidates = gpu.read_u64(&total, 0)?;
    if candidates == 0 {
        return Ok(());
    }
    let (tstart, ntiles) = tile_owners(gpu, s, &offsets, candidates, (0, candidates), IC_HASH2_TILE)?;
    let args = [
        KArg::Ptr(gpu.ptr(vals_t)?),
        KArg::Ptr(gpu.ptr(lo_t)?),
        KArg::Ptr(gpu.ptr(hi_t)?),
        KArg::Ptr(gpu.ptr(vals_c)?),
        KArg::Ptr(gpu.ptr(lo_c)?),
        KArg::Ptr(gpu.ptr(&offsets)?),
        KArg::U64(n as u64),
        KArg::U64(candidates),
        KArg::Ptr(gpu.ptr(&tstart)?),
        KArg::U64(ntiles),
        KArg::U32(gpu.table_kicks),
        KArg::Ptr(gpu.ptr(out)?),
    ];
    let kernel = format!("ic_hash2_{}", elem.name());
    // Six blocks of 37 KiB fit an SM only with the largest carveout.
    gpu.prefer_shared("trie", &kernel)?;
    gpu.launch("trie", &kernel, blocks(candidates, IC_HASH2_TILE)?, BLOCK, 0, &args)
}

/// Adds to `out` the candidates of each row (`work` of them, the values of way `lead`'s
/// range) found in every other way's range by binary search (`ic_count_*`), spread evenly
/// over the threads whatever rows they come from.
fn count_searched(
    gpu: &mut Gpu,
    s: &mut Scratch,
    (desc, ways, n, elem): (&DevBuf, usize, usize, Elem),
    work: &DevBuf,
    lead: &DevBuf,
    out: &DevBuf,
) -> Result<(), BackendError> {
    let (offsets, total) = k_scan::exclusive_scan_u64(gpu, work)?;
    let (offsets, total) = (s.adopt(offsets), s.adopt(total));
    let candidates = gpu.read_u64(&total, 0)?;
    if candidates == 0 {
        return Ok(());
    }
    let (tstart, ntiles) = tile_owners(gpu, s, &offsets, candidates, (0, candidates), EXPAND_TILE)?;
    let cargs = [
        KArg::Ptr(gpu.ptr(desc)?),
        KArg::I32(ways as i32),
        KArg::Ptr(gpu.ptr(&offsets)?),
        KArg::Ptr(gpu.ptr(lead)?),
        KArg::U64(n as u64),
        KArg::U64(candidates),
        KArg::Ptr(gpu.ptr(&tstart)?),
        KArg::U64(ntiles),
        KArg::Ptr(gpu.ptr(out)?),
    ];
    let kernel = format!("ic_count_{}", elem.name());
    gpu.launch("trie", &kernel, blocks(candidates, EXPAND_TILE)?, BLOCK, 0, &cargs)
}

/// `MinRange { ways }`: per row, the `(lo, hi)` pair with the fewest values.
pub(crate) fn min_range(gpu: &mut Gpu, ways: usize, args: &[&DevBuf]) -> Result<Vec<DevBuf>, BackendError> {
    let n = args[0].len;
    let mut s = Scratch::new();
    let res = (|| {
        let lo = s.alloc(gpu, Elem::U32, n)?;
        let hi = s.alloc(gpu, Elem::U32, n)?;
        if n > 0 {
            let mut words = Vec::with_capacity(2 * ways);
            for part in 0..2 {
                for w in 0..ways {
                    words.push(gpu.ptr(args[2 * w + part])?);
                }
            }
            let (desc, _) = desc_buffer(gpu, &mut s, "join", &words)?;
            gpu.reset_err()?;
            let margs = [
                KArg::Ptr(gpu.ptr(&desc)?),
                KArg::I32(ways as i32),
                KArg::U64(n as u64),
                KArg::Ptr(gpu.ptr(&lo)?),
                KArg::Ptr(gpu.ptr(&hi)?),
                KArg::Ptr(gpu.err_ptr()),
            ];
            gpu.launch("trie", "min_range", stride_grid(gpu, n), BLOCK, 0, &margs)?;
            gpu.check_err("MinRange (a range has hi below lo)")?;
        }
        Ok(vec![lo, hi])
    })();
    s.finish(gpu, res)
}
