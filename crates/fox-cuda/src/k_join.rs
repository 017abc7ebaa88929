//! Sort-merge joins (`JoinCount`, `JoinWrite`), semi/anti-join flags (`MatchFlags`), the
//! merge union (`MergeUnion`), band and index nested-loop searches (`BoundRange`), hash
//! joins (`HashBuild`, `HashProbe`, `HashMatch`: the table built with atomicCAS and linear
//! probing, probed from shared memory when it fits in 32 KiB; beyond
//! [`HASH_PARTITION_BYTES`] radix-partitioned, its probing rows partitioned alike and each
//! partition probed against its sub-table in shared memory) and nested-loop joins
//! (`NestedLoopCount`, `NestedLoopWrite`, `NestedLoopMatch`: the right side's key words
//! tiled through shared memory), on kernels/join.cu.
//!
//! Every left row finds its matching right range `[lo, hi)` by binary search, narrowed per
//! block to the range matching the block's first and last rows (both sides are sorted;
//! the blocks' ranges come from one launch before, a thread per block). A block whose
//! range is short copies it into shared memory and searches there; `MatchFlags` searches
//! only the range's start and compares one row.
//! `JoinWrite` then checks that the offsets are the scan of those counts and writes the
//! pairs with the load-balanced expansion of kernels/trie.cu, so a left row with a huge
//! run of matches is spread over many threads. The union removes from `b` the rows that
//! `a` holds (anti-join flags and compaction), then places every row of the two disjoint
//! sides at its merged position (its index plus its rank in the other side).
//!
//! Multi-column keys reach the kernels as a descriptor in device memory (type codes and
//! column pointers, see kernels/join.cu), filled by a small kernel rather than host copies.
//! An i128 key column is two key words there (its high word, signed, then its low word),
//! so every kernel that compares keys through the descriptor takes i128 keys.

use crate::device::{Gpu, KArg};
use crate::k_scan;
use crate::prelude::{type_code, TYPE_I128_LO};
use fox_kernel::{Elem, RangeBound};
use fox_runtime::{BackendError, DevBuf, HostCol};

pub(crate) use crate::prelude::BLOCK;

/// Outputs per thread of `expand_write` (kernels/trie.cu `EXPAND_ITEMS`).
pub(crate) const EXPAND_ITEMS: u32 = 4;
/// Outputs of `expand_write` per block (kernels/trie.cu `EXPAND_TILE`).
pub(crate) const EXPAND_TILE: u64 = (BLOCK * EXPAND_ITEMS) as u64;

pub(crate) fn err(msg: impl Into<String>) -> BackendError {
    BackendError(msg.into())
}

/// A second handle to the same buffer (the original stays in a [`Scratch`]).
fn alias(b: &DevBuf) -> DevBuf {
    DevBuf {
        id: b.id,
        elem: b.elem,
        len: b.len,
    }
}

/// The buffers a launcher allocates: on success every one that is not an output is freed,
/// on an error all of them.
pub(crate) struct Scratch(Vec<DevBuf>);

impl Scratch {
    pub(crate) fn new() -> Scratch {
        Scratch(Vec::new())
    }

    /// Allocates a buffer owned by the scratch and returns a handle to it.
    pub(crate) fn alloc(&mut self, gpu: &mut Gpu, elem: Elem, len: usize) -> Result<DevBuf, BackendError> {
        let b = gpu.alloc(elem, len)?;
        Ok(self.adopt(b))
    }

    pub(crate) fn alloc_zeroed(&mut self, gpu: &mut Gpu, elem: Elem, len: usize) -> Result<DevBuf, BackendError> {
        let b = gpu.alloc_zeroed(elem, len)?;
        Ok(self.adopt(b))
    }

    /// Takes ownership of a buffer made elsewhere and returns a handle to it.
    pub(crate) fn adopt(&mut self, b: DevBuf) -> DevBuf {
        let h = alias(&b);
        self.0.push(b);
        h
    }

    pub(crate) fn adopt_all(&mut self, bufs: Vec<DevBuf>) -> Vec<DevBuf> {
        bufs.into_iter().map(|b| self.adopt(b)).collect()
    }

    /// Frees the scratch buffers: all of them on an error, the non-outputs on success.
    pub(crate) fn finish(
        self,
        gpu: &mut Gpu,
        res: Result<Vec<DevBuf>, BackendError>,
    ) -> Result<Vec<DevBuf>, BackendError> {
        match res {
            Ok(outs) => {
                for b in self.0 {
                    if !outs.iter().any(|o| o.id == b.id) {
                        gpu.free(b);
                    }
                }
                Ok(outs)
            }
            Err(e) => {
                for b in self.0 {
                    gpu.free(b);
                }
                Err(e)
            }
        }
    }
}

/// Blocks of `per` items covering `n` items.
pub(crate) fn blocks(n: u64, per: u64) -> Result<u32, BackendError> {
    let b = n.div_ceil(per);
    u32::try_from(b)
        .ok()
        .filter(|&b| b <= i32::MAX as u32)
        .ok_or_else(|| err(format!("{n} items need {b} thread blocks, more than a grid holds")))
}

/// A grid for a grid-stride loop over `n` items.
pub(crate) fn stride_grid(gpu: &Gpu, n: usize) -> u32 {
    gpu.grid_for(n, BLOCK, 1, 32)
}

/// Writes `words` into a new u64 device buffer through `fill_desc` launches of `module`
/// (16 words each). Returns the buffer and the shared memory its kernels need.
pub(crate) fn desc_buffer(
    gpu: &mut Gpu,
    s: &mut Scratch,
    module: &'static str,
    words: &[u64],
) -> Result<(DevBuf, u32), BackendError> {
    let bytes = words.len() * 8;
    if bytes > 40 * 1024 {
        return Err(err(format!(
            "{} key columns are more than the kernels' key descriptor holds",
            words.len()
        )));
    }
    let desc = s.alloc(gpu, Elem::U64, words.len().max(1))?;
    let ptr = gpu.ptr(&desc)?;
    for (c, chunk) in words.chunks(16).enumerate() {
        let mut a = vec![
            KArg::Ptr(ptr),
            KArg::U32((c * 16) as u32),
            KArg::U32(chunk.len() as u32),
        ];
        a.extend((0..16).map(|i| KArg::U64(chunk.get(i).copied().unwrap_or(0))));
        gpu.launch(module, "fill_desc", 1, 32, 0, &a)?;
    }
    Ok((desc, bytes as u32))
}

/// A key descriptor in device memory: the buffer, the shared memory its kernels need and
/// the number of key words per row (`k` of the kernels).
pub(crate) struct KeyDesc {
    pub(crate) buf: DevBuf,
    pub(crate) smem: u32,
    pub(crate) k: i32,
}

/// The descriptor of key column groups of equal element types: the type codes of the
/// first group, then each group's column pointers. An i128 column is two key words, its
/// high word (signed) and then its low word (unsigned), which order as the value does.
pub(crate) fn key_desc(
    gpu: &mut Gpu,
    s: &mut Scratch,
    module: &'static str,
    groups: &[&[&DevBuf]],
) -> Result<KeyDesc, BackendError> {
    let mut words: Vec<u64> = Vec::new();
    for c in groups[0] {
        words.push(type_code(c.elem));
        if c.elem == Elem::I128 {
            words.push(TYPE_I128_LO);
        }
    }
    let k = words.len();
    for g in groups {
        for c in g.iter() {
            let p = gpu.ptr(c)?;
            words.push(p);
            if c.elem == Elem::I128 {
                words.push(p);
            }
        }
    }
    let (buf, smem) = desc_buffer(gpu, s, module, &words)?;
    let k = i32::try_from(k).map_err(|_| err(format!("{k} key words are too many")))?;
    Ok(KeyDesc { buf, smem, k })
}

fn key_args(nkeys: usize) -> usize {
    if nkeys == 0 {
        2
    } else {
        2 * nkeys
    }
}

/// Left keys, right keys and the row counts of both sides (no keys: the two columns only
/// give the row counts).
type Sides<'a> = (&'a [&'a DevBuf], &'a [&'a DevBuf], usize, usize);

/// The sides of join key arguments (checked by the runtime: one length per side, the
/// same element types).
fn sides<'a>(args: &'a [&'a DevBuf], nkeys: usize) -> Sides<'a> {
    if nkeys == 0 {
        return (&[], &[], args[0].len, args[1].len);
    }
    let (left, right) = args.split_at(nkeys);
    (left, right, left[0].len, right[0].len)
}

/// Blocks of `join_bounds` per multiprocessor below which its grid counts as one wave (a
/// lower bound of those resident at once: 256 threads and 16 KiB of shared memory each).
const ONE_WAVE_BLOCKS_PER_SM: u32 = 4;

/// What `join_bounds` writes per left row.
enum Mode<'a> {
    Counts(&'a DevBuf),
    /// Match flags: `prior` when the flags hold the matches of earlier right sides,
    /// `last` for the last side (the flags then become `found != anti`).
    Flags {
        flags: &'a DevBuf,
        anti: bool,
        prior: bool,
        last: bool,
    },
    /// `lo` per left row, checked against `offsets` and `total`.
    Lo(&'a DevBuf, &'a DevBuf, u64),
}

#[allow(clippy::too_many_arguments)]
fn bounds(
    gpu: &mut Gpu,
    s: &mut Scratch,
    left: &[&DevBuf],
    right: &[&DevBuf],
    nl: usize,
    nr: usize,
    mode: Mode,
) -> Result<(), BackendError> {
    if nl == 0 {
        return Ok(());
    }
    let desc = key_desc(gpu, s, "join", &[left, right])?;
    bounds_in(gpu, s, &desc, 1, nl, nr, mode)
}

/// [`bounds`] against right group `g` of the descriptor `desc` (group 0 is the left).
#[allow(clippy::too_many_arguments)]
fn bounds_in(
    gpu: &mut Gpu,
    s: &mut Scratch,
    desc: &KeyDesc,
    g: i32,
    nl: usize,
    nr: usize,
    mode: Mode,
) -> Result<(), BackendError> {
    if nl == 0 {
        return Ok(());
    }
    // The words the kernels copy to shared memory (`desc.smem` bytes; the buffer has at
    // least one word even when there are none).
    let nwords = i32::try_from(desc.smem / 8).map_err(|_| err("the key descriptor is too long"))?;
    let (m, anti, prior, last, counts, flags, lo, offsets, total) = match mode {
        Mode::Counts(c) => (0, 0, 0, 0, gpu.ptr(c)?, 0, 0, 0, 0),
        Mode::Flags {
            flags,
            anti,
            prior,
            last,
        } => (
            1,
            i32::from(anti),
            i32::from(prior),
            i32::from(last),
            0,
            gpu.ptr(flags)?,
            0,
            0,
            0,
        ),
        Mode::Lo(lo, offsets, total) => (2, 0, 0, 0, 0, 0, gpu.ptr(lo)?, gpu.ptr(offsets)?, total),
    };
    // The right range of each block of left rows, searched by all blocks at once; a grid
    // of one wave (every block resident at once) has each block search its own, which
    // takes as long and saves a launch.
    let grid = blocks(nl as u64, u64::from(BLOCK))?;
    let bounds_ptr = if grid <= ONE_WAVE_BLOCKS_PER_SM * gpu.sm_count() {
        0
    } else {
        let block_bounds = s.alloc(gpu, Elem::U64, 2 * grid as usize)?;
        let ptr = gpu.ptr(&block_bounds)?;
        let args = [
            KArg::Ptr(gpu.ptr(&desc.buf)?),
            KArg::I32(nwords),
            KArg::I32(desc.k),
            KArg::I32(g),
            KArg::U64(nl as u64),
            KArg::U64(nr as u64),
            KArg::U64(u64::from(grid)),
            KArg::Ptr(ptr),
        ];
        gpu.launch(
            "join",
            "join_block_bounds",
            blocks(u64::from(grid), u64::from(BLOCK))?,
            BLOCK,
            desc.smem,
            &args,
        )?;
        ptr
    };
    let word = if m == 2 { gpu.check_word()? } else { gpu.err_ptr() };
    let args = [
        KArg::Ptr(gpu.ptr(&desc.buf)?),
        KArg::I32(nwords),
        KArg::I32(desc.k),
        KArg::I32(g),
        KArg::U64(nl as u64),
        KArg::U64(nr as u64),
        KArg::Ptr(bounds_ptr),
        KArg::I32(m),
        KArg::I32(anti),
        KArg::I32(prior),
        KArg::I32(last),
        KArg::Ptr(counts),
        KArg::Ptr(flags),
        KArg::Ptr(lo),
        KArg::Ptr(offsets),
        KArg::U64(total),
        KArg::Ptr(word),
    ];
    gpu.launch("join", "join_bounds", grid, BLOCK, desc.smem, &args)?;
    // The expansion after it stays within its rows on any offsets (kernels/trie.cu
    // `tile_rows`), so the check may be read later.
    if m == 2 {
        gpu.finish_check_err("JoinWrite (the offsets and total are not the exclusive scan of the join counts)")?;
    }
    Ok(())
}

/// `JoinCount { nkeys }`: per left row, the number of right rows with equal keys.
pub(crate) fn join_count(gpu: &mut Gpu, nkeys: usize, args: &[&DevBuf]) -> Result<Vec<DevBuf>, BackendError> {
    let (left, right, nl, nr) = sides(args, nkeys);
    let mut s = Scratch::new();
    let res = (|| {
        let counts = s.alloc(gpu, Elem::U64, nl)?;
        bounds(gpu, &mut s, left, right, nl, nr, Mode::Counts(&counts))?;
        Ok(vec![counts])
    })();
    s.finish(gpu, res)
}

/// `MatchFlags { nkeys, anti }`: 1 per left row that has (`anti`: has no) match in some
/// right side. The sides after the first are searched only for the rows no side before
/// matched (the flags carry the matches from side to side).
pub(crate) fn match_flags(
    gpu: &mut Gpu,
    nkeys: usize,
    anti: bool,
    args: &[&DevBuf],
) -> Result<Vec<DevBuf>, BackendError> {
    let width = nkeys.max(1);
    let nsides = (args.len() / width).saturating_sub(1);
    let nl = args[0].len;
    let mut s = Scratch::new();
    let res = (|| {
        let flags = s.alloc(gpu, Elem::U8, nl)?;
        if nl == 0 {
            return Ok(vec![flags]);
        }
        let groups: Vec<&[&DevBuf]> = if nkeys == 0 {
            vec![&[]; nsides + 1]
        } else {
            args.chunks(width).collect()
        };
        let desc = key_desc(gpu, &mut s, "join", &groups)?;
        for g in 1..=nsides {
            let mode = Mode::Flags {
                flags: &flags,
                anti,
                prior: g > 1,
                last: g == nsides,
            };
            let nr = args[g * width].len;
            bounds_in(gpu, &mut s, &desc, g as i32, nl, nr, mode)?;
        }
        Ok(vec![flags])
    })();
    s.finish(gpu, res)
}

/// Load-balanced expansion (kernels/trie.cu `expand_write`): for every output `o < total`
/// the row `r` whose range of `offsets` holds it, and `lo[r] + (o - offsets[r])`. The
/// offsets must already be known to be the exclusive scan ending at `total`.
pub(crate) fn expand_pairs(
    gpu: &mut Gpu,
    s: &mut Scratch,
    lo: &DevBuf,
    offsets: &DevBuf,
    (start, end): (u64, u64),
) -> Result<(DevBuf, DevBuf), BackendError> {
    let total = end - start;
    let len = usize::try_from(total).map_err(|_| err(format!("{total} outputs do not fit in memory")))?;
    let parent = s.alloc(gpu, Elem::U32, len)?;
    let pos = s.alloc(gpu, Elem::U32, len)?;
    if total > 0 {
        let (tstart, ntiles) = tile_owners(gpu, s, offsets, end, (start, end), EXPAND_TILE)?;
        let args = [
            KArg::Ptr(gpu.ptr(lo)?),
            KArg::Ptr(gpu.ptr(offsets)?),
            KArg::U64(offsets.len as u64),
            KArg::U64(start),
            KArg::U64(end),
            KArg::Ptr(gpu.ptr(&tstart)?),
            KArg::U64(ntiles),
            KArg::Ptr(gpu.ptr(&parent)?),
            KArg::Ptr(gpu.ptr(&pos)?),
        ];
        gpu.launch("trie", "expand_write", blocks(total, EXPAND_TILE)?, BLOCK, 0, &args)?;
    }
    Ok((parent, pos))
}

/// The first row of each tile of `tile` outputs of `[start, end)` in a load-balanced
/// kernel over `offsets` (an exclusive scan whose sum is `total`): kernels/trie.cu
/// `tile_owners`. Returns the rows (U32, scratch) and the number of tiles.
pub(crate) fn tile_owners(
    gpu: &mut Gpu,
    s: &mut Scratch,
    offsets: &DevBuf,
    total: u64,
    (start, end): (u64, u64),
    tile: u64,
) -> Result<(DevBuf, u64), BackendError> {
    let ntiles = (end - start).div_ceil(tile);
    let len = usize::try_from(ntiles).map_err(|_| err(format!("{ntiles} tiles do not fit in memory")))?;
    let tstart = s.alloc(gpu, Elem::U32, len)?;
    if ntiles > 0 {
        let n = offsets.len;
        let args = [
            KArg::Ptr(gpu.ptr(offsets)?),
            KArg::U64(n as u64),
            KArg::U64(total),
            KArg::U64(start),
            KArg::U64(end),
            KArg::U64(tile),
            KArg::Ptr(gpu.ptr(&tstart)?),
        ];
        gpu.launch("trie", "tile_owners", stride_grid(gpu, n), BLOCK, 0, &args)?;
    }
    Ok((tstart, ntiles))
}

/// `JoinWrite { nkeys }`: every matching pair `(left_idx, right_idx)`, by left then right.
pub(crate) fn join_write(gpu: &mut Gpu, nkeys: usize, args: &[&DevBuf]) -> Result<Vec<DevBuf>, BackendError> {
    let k = key_args(nkeys);
    let (left, right, nl, nr) = sides(&args[..k], nkeys);
    let (offsets, total) = (args[k], args[k + 1]);
    if nl.max(nr) > u32::MAX as usize {
        return Err(err(format!(
            "a join side has {} rows, more than u32 row indices can address",
            nl.max(nr)
        )));
    }
    let total = gpu.read_u64(total, 0)?;
    if nl == 0 && total != 0 {
        return Err(err(format!("total is {total}, but the join has 0 pairs")));
    }
    let mut s = Scratch::new();
    let res = (|| {
        let lo = s.alloc(gpu, Elem::U32, nl)?;
        bounds(gpu, &mut s, left, right, nl, nr, Mode::Lo(&lo, offsets, total))?;
        let (li, ri) = expand_pairs(gpu, &mut s, &lo, offsets, (0, total))?;
        Ok(vec![li, ri])
    })();
    s.finish(gpu, res)
}

/// The scatter kernel for an element width.
pub(crate) fn scatter_name(elem: Elem) -> &'static str {
    match elem.size() {
        1 => "scatter_u8",
        4 => "scatter_u32",
        8 => "scatter_u64",
        _ => "scatter_u128",
    }
}

/// The most output positions a `merge_path_pos` tile holds per thread.
const MERGE_ITEMS: u64 = 8;

/// Shared memory a `merge_path_pos` block may fill without raising the device's limit.
const MERGE_SMEM: u64 = 48 * 1024;

/// The output positions of the merge of `a` (`na` rows) and `b` (`nb` rows), both sorted
/// and disjoint, described by `desc`: `pos_a[i]` for `a[i]`, `pos_b[j]` for `b[j]`.
/// Merge path: one binary search per tile boundary (`merge_path_splits`), then each
/// block merges its tile of up to `MERGE_ITEMS * BLOCK` outputs from shared memory
/// (`merge_path_pos`). Keys too wide for a tile of `BLOCK` rows in shared memory fall
/// back to one binary search per row into the other side (`union_pos`).
fn merge_positions(
    gpu: &mut Gpu,
    s: &mut Scratch,
    desc: &KeyDesc,
    na: usize,
    nb: usize,
    pos_a: &DevBuf,
    pos_b: &DevBuf,
) -> Result<(), BackendError> {
    let n = (na + nb) as u64;
    let k = desc.k as u64;
    let block = u64::from(BLOCK);
    let items = (MERGE_SMEM.saturating_sub(u64::from(desc.smem)) / (8 * k.max(1) * block)).min(MERGE_ITEMS);
    if items == 0 {
        let args = [
            KArg::Ptr(gpu.ptr(&desc.buf)?),
            KArg::I32(desc.k),
            KArg::U64(na as u64),
            KArg::U64(nb as u64),
            KArg::Ptr(gpu.ptr(pos_a)?),
            KArg::Ptr(gpu.ptr(pos_b)?),
        ];
        return gpu.launch("join", "union_pos", blocks(n, block)?, BLOCK, desc.smem, &args);
    }
    let tile = items * block;
    let ntiles = n.div_ceil(tile);
    let splits = s.alloc(gpu, Elem::U64, ntiles as usize + 1)?;
    let args = [
        KArg::Ptr(gpu.ptr(&desc.buf)?),
        KArg::I32(desc.k),
        KArg::U64(na as u64),
        KArg::U64(nb as u64),
        KArg::U64(tile),
        KArg::U64(ntiles),
        KArg::Ptr(gpu.ptr(&splits)?),
    ];
    gpu.launch(
        "join",
        "merge_path_splits",
        blocks(ntiles + 1, block)?,
        BLOCK,
        desc.smem,
        &args,
    )?;
    let smem = u64::from(desc.smem) + 8 * k * tile;
    let args = [
        KArg::Ptr(gpu.ptr(&desc.buf)?),
        KArg::I32(desc.k),
        KArg::U64(na as u64),
        KArg::U64(nb as u64),
        KArg::Ptr(gpu.ptr(&splits)?),
        KArg::U32(items as u32),
        KArg::Ptr(gpu.ptr(pos_a)?),
        KArg::Ptr(gpu.ptr(pos_b)?),
    ];
    let grid = u32::try_from(ntiles).map_err(|_| err(format!("{ntiles} merge tiles are more than a grid holds")))?;
    gpu.launch("join", "merge_path_pos", grid, BLOCK, smem as u32, &args)
}

/// `MergeUnion { width, disjoint }`: the sorted, duplicate-free union of two sorted,
/// duplicate-free relations. Without `disjoint` the rows of `b` that `a` holds are
/// removed first; the two disjoint sides then merge by [`merge_positions`] and a scatter
/// of each column. With `disjoint` and a row in both sides anyway, the result holds it
/// twice (still sorted).
pub(crate) fn merge_union(
    gpu: &mut Gpu,
    width: usize,
    disjoint: bool,
    args: &[&DevBuf],
) -> Result<Vec<DevBuf>, BackendError> {
    let (a, b, na, nb) = sides(args, width);
    let mut s = Scratch::new();
    let res = (|| {
        // b without the rows a holds.
        let b_only: Vec<DevBuf> = if disjoint || na == 0 || nb == 0 {
            Vec::new()
        } else {
            let keep = s.alloc(gpu, Elem::U8, nb)?;
            let mode = Mode::Flags {
                flags: &keep,
                anti: true,
                prior: false,
                last: true,
            };
            bounds(gpu, &mut s, b, a, nb, na, mode)?;
            let cols = k_scan::compact(gpu, &keep, b)?;
            s.adopt_all(cols)
        };
        let b2: Vec<&DevBuf> = if b_only.is_empty() {
            b.to_vec()
        } else {
            b_only.iter().collect()
        };
        let nb2 = b2[0].len;
        let n = na + nb2;
        if n > u32::MAX as usize + 1 {
            return Err(err(format!("the union has {n} rows, more than u32 positions address")));
        }
        let pos_a = s.alloc(gpu, Elem::U32, na)?;
        let pos_b = s.alloc(gpu, Elem::U32, nb2)?;
        if n > 0 {
            let desc = key_desc(gpu, &mut s, "join", &[a, &b2])?;
            merge_positions(gpu, &mut s, &desc, na, nb2, &pos_a, &pos_b)?;
        }
        let mut outs = Vec::with_capacity(width);
        for c in 0..width {
            let out = s.alloc(gpu, a[c].elem, n)?;
            for (src, pos) in [(a[c], &pos_a), (b2[c], &pos_b)] {
                if src.len == 0 {
                    continue;
                }
                let args = [
                    KArg::Ptr(gpu.ptr(src)?),
                    KArg::Ptr(gpu.ptr(pos)?),
                    KArg::U64(src.len as u64),
                    KArg::Ptr(gpu.ptr(&out)?),
                ];
                let grid = stride_grid(gpu, src.len);
                gpu.launch("join", scatter_name(src.elem), grid, BLOCK, 0, &args)?;
            }
            outs.push(out);
        }
        Ok(outs)
    })();
    s.finish(gpu, res)
}

/// `BoundRange { nkeys, lower, upper }`: per probing row, the range of the searched rows
/// with its keys within its bounds (kernels/join.cu `bound_range`).
pub(crate) fn bound_range(
    gpu: &mut Gpu,
    nkeys: usize,
    lower: Option<RangeBound>,
    upper: Option<RangeBound>,
    args: &[&DevBuf],
) -> Result<Vec<DevBuf>, BackendError> {
    let (skeys, rest) = args.split_at(nkeys);
    // Without bounds (the run of equal keys) there is no values column.
    let unbounded = lower.is_none() && upper.is_none();
    if unbounded && nkeys == 0 {
        return Err(err("a range without bounds needs at least one key"));
    }
    let (values, rest) = if unbounded {
        (None, rest)
    } else {
        (Some(rest[0]), &rest[1..])
    };
    let (pkeys, bounds) = rest.split_at(nkeys);
    let nv = values.map_or(skeys.first().map_or(0, |k| k.len), |v| v.len);
    if nv > u32::MAX as usize {
        return Err(err(format!(
            "the values have {nv} rows, more than u32 row indices can address"
        )));
    }
    // Per bound: 0 none, 1 closed, 2 open.
    let code = |b: Option<RangeBound>| b.map_or(0, |b| if b.open { 2 } else { 1 });
    let offset = |b: Option<RangeBound>| b.map_or(0, |b| b.offset);
    let lo_b = lower.map(|_| bounds[0]);
    let hi_b = upper.map(|_| bounds[usize::from(lower.is_some())]);
    let n = lo_b.or(hi_b).or(pkeys.first().copied()).map_or(0, |b| b.len);
    let mut s = Scratch::new();
    let res = (|| {
        let lo = s.alloc(gpu, Elem::U32, n)?;
        let hi = s.alloc(gpu, Elem::U32, n)?;
        if n > 0 {
            let desc = key_desc(gpu, &mut s, "join", &[skeys, pkeys])?;
            let ptr = |gpu: &Gpu, b: Option<&DevBuf>| b.map_or(Ok(0), |b| gpu.ptr(b));
            let args = [
                KArg::Ptr(gpu.ptr(&desc.buf)?),
                KArg::I32(desc.k),
                KArg::Ptr(ptr(gpu, values)?),
                KArg::U64(nv as u64),
                KArg::I32(i32::from(values.is_some_and(|v| v.elem == Elem::I64))),
                KArg::Ptr(ptr(gpu, lo_b)?),
                KArg::I32(code(lower)),
                KArg::I64(offset(lower)),
                KArg::Ptr(ptr(gpu, hi_b)?),
                KArg::I32(code(upper)),
                KArg::I64(offset(upper)),
                KArg::U64(n as u64),
                KArg::Ptr(gpu.ptr(&lo)?),
                KArg::Ptr(gpu.ptr(&hi)?),
            ];
            let grid = stride_grid(gpu, n);
            gpu.launch("join", "bound_range", grid, BLOCK, desc.smem, &args)?;
        }
        Ok(vec![lo, hi])
    })();
    s.finish(gpu, res)
}

/// The largest table `hash_probe` copies into shared memory (8192 slots).
const HASH_SHARED_BYTES: usize = 32 * 1024;

/// The table size in bytes (4 per slot of the unpartitioned table) beyond which
/// `HashBuild` builds the radix-partitioned table: an estimate of the share of the L2 (50
/// MB on an H100, 60 MB on an H200) that a table probed at random keeps resident beside
/// the probe's other traffic. Beyond it an unpartitioned probe misses the L2 on every
/// table read and on every read of the build side's keys.
pub const HASH_PARTITION_BYTES: usize = 32 << 20;

/// The shared memory in bytes a partitioned probe gives one sub-table (the partitions
/// are made for sub-tables of a quarter of this on average, so nearly every one fits).
pub const HASH_SUB_TABLE_BYTES: u32 = 48 * 1024;

/// The most shared memory a sub-table may take (no opt-in beyond the default limit).
pub(crate) const HASH_SUB_TABLE_MAX: u32 = 48 * 1024;

/// The most partition bits of a partitioned table (the directory and the probe's
/// counters hold a word per partition); beyond, sub-tables grow and are probed from
/// global memory.
const HASH_MAX_PART_BITS: u32 = 24;

/// The u64 words of a partitioned table before its directory (kernels/join.cu `HP_HEAD`)
/// and its first word (`HP_MAGIC`).
pub(crate) const HP_HEAD: usize = 4;
pub(crate) const HP_MAGIC: u64 = 0x5452_4150_504f_4658;

/// Partitioned rows per block of `hp_probe`.
const HP_CHUNK: u64 = 16 * BLOCK as u64;

/// The most probing rows partitioned at once (`hp_scatter`'s u32 row indices); more are
/// partitioned and probed in slices.
const HP_MAX_SLICE: usize = 1 << 31;

/// The fewest probing rows in a slice when the partitioned rows of a larger one do not fit
/// the device memory.
const HP_MIN_SLICE: usize = 1 << 16;

/// When `HashBuild` partitions its table and how large its sub-tables are
/// ([`crate::CudaBackend::set_hash_partitioning`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct HashPartitioning {
    pub(crate) threshold_bytes: usize,
    pub(crate) sub_table_bytes: u32,
}

impl Default for HashPartitioning {
    fn default() -> Self {
        HashPartitioning {
            threshold_bytes: HASH_PARTITION_BYTES,
            sub_table_bytes: HASH_SUB_TABLE_BYTES,
        }
    }
}

/// The slots of a hash table over `n` build rows: a power of two, at least twice the rows
/// (so at least twice the runs of equal keys, which are not counted first) and 2.
fn hash_capacity(n: usize) -> Result<usize, BackendError> {
    n.checked_mul(2)
        .and_then(|c| c.max(2).checked_next_power_of_two())
        .filter(|&c| c <= 1 << 32)
        .ok_or_else(|| err(format!("a hash table over {n} rows is larger than u32 slots address")))
}

/// The partition bits of a partitioned table of `runs` runs with `k` key words each, whose
/// sub-tables a probe keeps in `sub_bytes` of shared memory: partitions of a quarter of
/// the slots that fit on average (a sub-table has twice its runs' slots, rounded up to a
/// power of two), so that nearly all fit; at most [`HASH_MAX_PART_BITS`].
pub(crate) fn partition_bits(runs: u64, k: usize, sub_bytes: u32) -> u32 {
    let entry = 8 * (1 + k as u64);
    let slots = (u64::from(sub_bytes) / entry).max(2);
    let slots = 1u64 << (63 - slots.leading_zeros());
    let per = (slots / 4).max(1);
    runs.div_ceil(per)
        .max(1)
        .next_power_of_two()
        .trailing_zeros()
        .min(HASH_MAX_PART_BITS)
}

/// The u32 length of a partitioned table of `2^pbits` partitions and `entries` entries of
/// `k` key words: its u64 words (header, directory, entries) twice, and one word more
/// where that is a power of two (the probes tell the two layouts apart by it).
pub(crate) fn partitioned_len(pbits: u32, entries: u64, k: usize) -> Option<usize> {
    let words = (entries.checked_mul(1 + k as u64)?).checked_add(HP_HEAD as u64 + (1u64 << pbits) + 1)?;
    let words = if words.is_power_of_two() { words + 1 } else { words };
    usize::try_from(words.checked_mul(2)?).ok()
}

/// `HashBuild { nkeys }`: the table of the runs of equal keys of a sorted build side
/// (kernels/join.cu `hash_build`), or beyond [`HashPartitioning::threshold_bytes`] the
/// radix-partitioned table ([`hash_build_partitioned`]).
pub(crate) fn hash_build(gpu: &mut Gpu, args: &[&DevBuf]) -> Result<Vec<DevBuf>, BackendError> {
    let n = args[0].len;
    if n > u32::MAX as usize {
        return Err(err(format!(
            "the build side has {n} rows, more than u32 row indices can address"
        )));
    }
    let cap = hash_capacity(n)?;
    let mut s = Scratch::new();
    let res = (|| {
        if cap * 4 > gpu.hash_partitioning.threshold_bytes {
            return hash_build_partitioned(gpu, &mut s, args).map(|t| vec![t]);
        }
        let table = s.alloc_zeroed(gpu, Elem::U32, cap)?;
        if n > 0 {
            let desc = key_desc(gpu, &mut s, "join", &[args])?;
            let a = [
                KArg::Ptr(gpu.ptr(&desc.buf)?),
                KArg::I32(desc.k),
                KArg::U64(n as u64),
                KArg::Ptr(gpu.ptr(&table)?),
                KArg::U64(cap as u64 - 1),
            ];
            let grid = stride_grid(gpu, n);
            gpu.launch("join", "hash_build", grid, BLOCK, desc.smem, &a)?;
        }
        Ok(vec![table])
    })();
    s.finish(gpu, res)
}

/// The radix-partitioned table (layout in kernels/join.cu) of the sorted build keys
/// `args` (fewer than 2^32 rows): the runs counted, the partitions chosen from them
/// ([`partition_bits`]), the runs per partition counted and made sub-table sizes, their
/// scan the directory, and every run placed in its sub-table.
fn hash_build_partitioned(gpu: &mut Gpu, s: &mut Scratch, args: &[&DevBuf]) -> Result<DevBuf, BackendError> {
    let n = args[0].len;
    let desc = key_desc(gpu, s, "join", &[args])?;
    let k = desc.k as usize;
    let grid = stride_grid(gpu, n);
    let runs = s.alloc_zeroed(gpu, Elem::U64, 1)?;
    if n > 0 {
        let a = [
            KArg::Ptr(gpu.ptr(&desc.buf)?),
            KArg::I32(desc.k),
            KArg::U64(n as u64),
            KArg::Ptr(gpu.ptr(&runs)?),
        ];
        gpu.launch("join", "hp_count_runs", grid, BLOCK, desc.smem, &a)?;
    }
    let nruns = gpu.read_u64(&runs, 0)?;
    let pbits = partition_bits(nruns, k, gpu.hash_partitioning.sub_table_bytes);
    let parts = 1usize << pbits;
    let caps = s.alloc_zeroed(gpu, Elem::U64, parts)?;
    if n > 0 {
        let a = [
            KArg::Ptr(gpu.ptr(&desc.buf)?),
            KArg::I32(desc.k),
            KArg::U64(n as u64),
            KArg::I32(pbits as i32),
            KArg::Ptr(gpu.ptr(&caps)?),
        ];
        gpu.launch("join", "hp_count_parts", grid, BLOCK, desc.smem, &a)?;
    }
    let a = [KArg::Ptr(gpu.ptr(&caps)?), KArg::U64(parts as u64)];
    gpu.launch("join", "hp_caps", stride_grid(gpu, parts), BLOCK, 0, &a)?;
    let (dir, total) = k_scan::exclusive_scan_u64(gpu, &caps)?;
    let (dir, total) = (s.adopt(dir), s.adopt(total));
    let entries = gpu.read_u64(&total, 0)?;
    let len = partitioned_len(pbits, entries, k).ok_or_else(|| {
        err(format!(
            "a partitioned hash table of {entries} entries does not fit in memory"
        ))
    })?;
    let table = s.alloc_zeroed(gpu, Elem::U32, len)?;
    let t = gpu.ptr(&table)?;
    let a = [
        KArg::Ptr(t),
        KArg::Ptr(gpu.ptr(&dir)?),
        KArg::U64(parts as u64),
        KArg::I32(pbits as i32),
        KArg::I32(desc.k),
        KArg::U64(n as u64),
        KArg::U64(entries),
    ];
    gpu.launch("join", "hp_init", stride_grid(gpu, parts + 1), BLOCK, 0, &a)?;
    if n > 0 {
        let a = [
            KArg::Ptr(gpu.ptr(&desc.buf)?),
            KArg::I32(desc.k),
            KArg::U64(n as u64),
            KArg::I32(pbits as i32),
            KArg::U64(parts as u64),
            KArg::Ptr(t),
        ];
        gpu.launch("join", "hp_fill", grid, BLOCK, desc.smem, &a)?;
    }
    Ok(table)
}

/// What a partitioned table's header says that its probes need: its partition bits.
struct PartHeader {
    pbits: u32,
}

/// The header of `table` (no power of two long) when it is a partitioned table over `nb`
/// build rows with `k` key words whose length agrees with its header; else an error.
fn part_header(
    gpu: &mut Gpu,
    s: &mut Scratch,
    table: &DevBuf,
    nb: usize,
    k: usize,
) -> Result<PartHeader, BackendError> {
    let bad = || {
        err(format!(
            "the table has {} slots, not a power of two of at least 2 nor a partitioned table of this build side",
            table.len
        ))
    };
    if table.len < 2 * (HP_HEAD + 2) || table.len % 2 != 0 {
        return Err(bad());
    }
    let head = s.alloc(gpu, Elem::U32, 2 * HP_HEAD)?;
    gpu.copy(&head, 0, table, 0, 2 * HP_HEAD)?;
    let HostCol::U32(w) = gpu.download(&head)? else {
        return Err(bad());
    };
    let word = |i: usize| u64::from(w[2 * i]) | u64::from(w[2 * i + 1]) << 32;
    let (magic, shape, rows, entries) = (word(0), word(1), word(2), word(3));
    let pbits = (shape & 0xff) as u32;
    if magic != HP_MAGIC || pbits > HASH_MAX_PART_BITS || shape >> 8 != k as u64 || rows != nb as u64 {
        return Err(bad());
    }
    if partitioned_len(pbits, entries, k) != Some(table.len) {
        return Err(bad());
    }
    Ok(PartHeader { pbits })
}

/// `HashProbe { nkeys }` (`anti` `None`) and `HashMatch { nkeys, anti }`: per probing
/// row its run of equal build keys, or its match flag (kernels/join.cu `hash_probe`, or
/// for a partitioned table [`hash_probe_partitioned`]).
pub(crate) fn hash_probe(
    gpu: &mut Gpu,
    nkeys: usize,
    anti: Option<bool>,
    args: &[&DevBuf],
) -> Result<Vec<DevBuf>, BackendError> {
    let (build, rest) = args.split_at(nkeys);
    let table = rest[0];
    let probe = &rest[1..];
    let partitioned = !table.len.is_power_of_two();
    if !partitioned && table.len < 2 {
        return Err(err(format!(
            "the table has {} slots, not a power of two of at least 2",
            table.len
        )));
    }
    let nb = build[0].len;
    let n = probe[0].len;
    let mut s = Scratch::new();
    let res = (|| {
        let outs = match anti {
            None => vec![s.alloc(gpu, Elem::U32, n)?, s.alloc(gpu, Elem::U32, n)?],
            Some(_) => vec![s.alloc(gpu, Elem::U8, n)?],
        };
        if partitioned {
            let k: usize = build.iter().map(|c| if c.elem == Elem::I128 { 2 } else { 1 }).sum();
            let head = part_header(gpu, &mut s, table, nb, k)?;
            if n > 0 {
                hash_probe_partitioned(gpu, &mut s, table, &head, nb, probe, anti, &outs)?;
            }
            return Ok(outs);
        }
        if n > 0 {
            let desc = key_desc(gpu, &mut s, "join", &[build, probe])?;
            let (lo, hi, flags) = match anti {
                None => (gpu.ptr(&outs[0])?, gpu.ptr(&outs[1])?, 0),
                Some(_) => (0, 0, gpu.ptr(&outs[0])?),
            };
            // A table of at most 32 KiB is probed from shared memory.
            let bytes = table.len * 4;
            let shared = bytes <= HASH_SHARED_BYTES;
            let smem = desc.smem + if shared { bytes as u32 } else { 0 };
            let a = [
                KArg::Ptr(gpu.ptr(&desc.buf)?),
                KArg::I32(desc.k),
                KArg::U64(nb as u64),
                KArg::Ptr(gpu.ptr(table)?),
                KArg::U64(table.len as u64 - 1),
                KArg::I32(i32::from(shared)),
                KArg::U64(n as u64),
                KArg::I32(i32::from(anti.is_some())),
                KArg::I32(i32::from(anti == Some(true))),
                KArg::Ptr(lo),
                KArg::Ptr(hi),
                KArg::Ptr(flags),
            ];
            let grid = stride_grid(gpu, n);
            gpu.launch("join", "hash_probe", grid, BLOCK, smem, &a)?;
        }
        Ok(outs)
    })();
    s.finish(gpu, res)
}

/// The buffers [`hash_probe_partitioned`] needs for slices of `rows` probing rows with
/// `k` key words over `parts` partitions: the histogram (then the cursors), the row
/// indices and the key words. On an error none is left allocated.
fn probe_slice(gpu: &mut Gpu, rows: usize, parts: usize, k: usize) -> Result<Vec<DevBuf>, BackendError> {
    let words = rows
        .checked_mul(k)
        .ok_or_else(|| err(format!("{rows} probing rows of {k} key words do not fit in memory")))?;
    let mut bufs = Vec::new();
    for (elem, len) in [(Elem::U64, parts), (Elem::U32, rows), (Elem::U64, words)] {
        match gpu.alloc(elem, len) {
            Ok(b) => bufs.push(b),
            Err(e) => {
                k_scan::free_all(gpu, bufs);
                return Err(e);
            }
        }
    }
    Ok(bufs)
}

/// Probes the partitioned `table` (header `head`, over `nb` build rows) with the `probe`
/// key columns, writing `outs` (`lo`, `hi`, or the flags with `anti`). The probing rows
/// go in slices of at most 2^31 rows (fewer, down to [`HP_MIN_SLICE`], where the
/// partitioned rows of more do not fit the device): per slice a histogram of partitions,
/// its scan, a scatter of each row's index and key words into partition order, then
/// `hp_probe` over chunks of the partitioned rows. Temporaries: a word per partition
/// (twice, with the scan's) and 4 + 8k bytes per probing row of a slice.
#[allow(clippy::too_many_arguments)]
fn hash_probe_partitioned(
    gpu: &mut Gpu,
    s: &mut Scratch,
    table: &DevBuf,
    head: &PartHeader,
    nb: usize,
    probe: &[&DevBuf],
    anti: Option<bool>,
    outs: &[DevBuf],
) -> Result<(), BackendError> {
    let n = probe[0].len;
    let desc = key_desc(gpu, s, "join", &[probe])?;
    let k = desc.k as usize;
    let parts = 1usize << head.pbits;
    let mut rows = n.min(HP_MAX_SLICE);
    let bufs = loop {
        match probe_slice(gpu, rows, parts, k) {
            Ok(bufs) => break s.adopt_all(bufs),
            // Out of memory: half as many rows at a time, down to HP_MIN_SLICE; then the
            // allocation's own error.
            Err(e) if e.0.contains("out of memory") && rows > HP_MIN_SLICE => rows = rows.div_ceil(2),
            Err(e) => return Err(e),
        }
    };
    let (counts, idx, words) = (&bufs[0], &bufs[1], &bufs[2]);
    let sub_bytes = gpu.hash_partitioning.sub_table_bytes;
    let smem_words = u64::from(sub_bytes) / 8;
    let (lo, hi, flags) = match anti {
        None => (gpu.ptr(&outs[0])?, gpu.ptr(&outs[1])?, 0),
        Some(_) => (0, 0, gpu.ptr(&outs[0])?),
    };
    let mut base = 0usize;
    while base < n {
        let m = rows.min(n - base);
        let grid = stride_grid(gpu, m);
        gpu.memset_zero(counts)?;
        let a = [
            KArg::Ptr(gpu.ptr(&desc.buf)?),
            KArg::I32(desc.k),
            KArg::U64(base as u64),
            KArg::U64(m as u64),
            KArg::I32(head.pbits as i32),
            KArg::Ptr(gpu.ptr(counts)?),
        ];
        gpu.launch("join", "hp_hist", grid, BLOCK, desc.smem, &a)?;
        // The offsets of the partitions, and a copy of them as the scatter's cursors.
        let (offs, total) = k_scan::exclusive_scan_u64(gpu, counts)?;
        let (offs, _) = (s.adopt(offs), s.adopt(total));
        gpu.copy(counts, 0, &offs, 0, parts)?;
        let a = [
            KArg::Ptr(gpu.ptr(&desc.buf)?),
            KArg::I32(desc.k),
            KArg::U64(base as u64),
            KArg::U64(m as u64),
            KArg::I32(head.pbits as i32),
            KArg::Ptr(gpu.ptr(counts)?),
            KArg::Ptr(gpu.ptr(idx)?),
            KArg::Ptr(gpu.ptr(words)?),
        ];
        gpu.launch("join", "hp_scatter", grid, BLOCK, desc.smem, &a)?;
        let a = [
            KArg::Ptr(gpu.ptr(table)?),
            KArg::I32(desc.k),
            KArg::U64(nb as u64),
            KArg::I32(head.pbits as i32),
            KArg::Ptr(gpu.ptr(&offs)?),
            KArg::Ptr(gpu.ptr(idx)?),
            KArg::Ptr(gpu.ptr(words)?),
            KArg::U64(base as u64),
            KArg::U64(m as u64),
            KArg::U64(HP_CHUNK),
            KArg::U64(smem_words),
            KArg::I32(i32::from(anti.is_some())),
            KArg::I32(i32::from(anti == Some(true))),
            KArg::Ptr(lo),
            KArg::Ptr(hi),
            KArg::Ptr(flags),
        ];
        gpu.launch(
            "join",
            "hp_probe",
            blocks(m as u64, HP_CHUNK)?,
            BLOCK,
            (smem_words * 8) as u32,
            &a,
        )?;
        base += m;
    }
    Ok(())
}

/// What `nested_loop` does per left row.
enum Nested<'a> {
    Counts(&'a DevBuf),
    Flags(&'a DevBuf, bool),
    /// Checks `offsets` and `total` against the counts.
    Check(&'a DevBuf, u64),
    /// Writes `lidx`, `ridx` from the checked `offsets`.
    Write(&'a DevBuf, &'a DevBuf, &'a DevBuf),
}

/// One launch of kernels/join.cu `nested_loop` over unsorted keys.
fn nested_loop(
    gpu: &mut Gpu,
    s: &mut Scratch,
    left: &[&DevBuf],
    right: &[&DevBuf],
    mode: Nested,
) -> Result<(), BackendError> {
    let (nl, nr) = (left[0].len, right[0].len);
    if nl == 0 {
        return Ok(());
    }
    let desc = key_desc(gpu, s, "join", &[left, right])?;
    // Right rows per shared-memory tile: at most a block's, within 32 KiB of key words.
    let k = desc.k.max(1) as u32;
    let tile = (4096 / k).clamp(1, BLOCK);
    let smem = desc.smem + tile * k * 8;
    let (m, anti, counts, flags, offsets, total, lidx, ridx) = match mode {
        Nested::Counts(c) => (0, 0, gpu.ptr(c)?, 0, 0, 0, 0, 0),
        Nested::Flags(f, anti) => (1, i32::from(anti), 0, gpu.ptr(f)?, 0, 0, 0, 0),
        Nested::Check(o, total) => (2, 0, 0, 0, gpu.ptr(o)?, total, 0, 0),
        Nested::Write(o, l, r) => (3, 0, 0, 0, gpu.ptr(o)?, 0, gpu.ptr(l)?, gpu.ptr(r)?),
    };
    if m == 2 {
        gpu.reset_err()?;
    }
    let args = [
        KArg::Ptr(gpu.ptr(&desc.buf)?),
        KArg::I32(desc.k),
        KArg::U64(nl as u64),
        KArg::U64(nr as u64),
        KArg::U32(tile),
        KArg::I32(m),
        KArg::I32(anti),
        KArg::Ptr(counts),
        KArg::Ptr(flags),
        KArg::Ptr(offsets),
        KArg::U64(total),
        KArg::Ptr(lidx),
        KArg::Ptr(ridx),
        KArg::Ptr(gpu.err_ptr()),
    ];
    gpu.launch(
        "join",
        "nested_loop",
        blocks(nl as u64, u64::from(BLOCK))?,
        BLOCK,
        smem,
        &args,
    )?;
    if m == 2 {
        gpu.check_err("NestedLoopWrite (the offsets and total are not the exclusive scan of the join counts)")?;
    }
    Ok(())
}

/// `NestedLoopCount { nkeys }` (`flags` `None`) and `NestedLoopMatch { nkeys, anti }`.
pub(crate) fn nested_loop_count(
    gpu: &mut Gpu,
    nkeys: usize,
    flags: Option<bool>,
    args: &[&DevBuf],
) -> Result<Vec<DevBuf>, BackendError> {
    let (left, right) = args.split_at(nkeys);
    let nl = left[0].len;
    let mut s = Scratch::new();
    let res = (|| {
        let out = match flags {
            None => {
                let c = s.alloc(gpu, Elem::U64, nl)?;
                nested_loop(gpu, &mut s, left, right, Nested::Counts(&c))?;
                c
            }
            Some(anti) => {
                let f = s.alloc(gpu, Elem::U8, nl)?;
                nested_loop(gpu, &mut s, left, right, Nested::Flags(&f, anti))?;
                f
            }
        };
        Ok(vec![out])
    })();
    s.finish(gpu, res)
}

/// `NestedLoopWrite { nkeys }`: the offsets checked, then every pair written.
pub(crate) fn nested_loop_write(gpu: &mut Gpu, nkeys: usize, args: &[&DevBuf]) -> Result<Vec<DevBuf>, BackendError> {
    let (left, rest) = args.split_at(nkeys);
    let (right, rest) = rest.split_at(nkeys);
    let (offsets, total_buf) = (rest[0], rest[1]);
    if left[0].len.max(right[0].len) > u32::MAX as usize {
        return Err(err("a join side has more rows than u32 row indices can address"));
    }
    let total = gpu.read_u64(total_buf, 0)?;
    if left[0].len == 0 && total != 0 {
        return Err(err(format!("total is {total}, but the join has 0 pairs")));
    }
    let mut s = Scratch::new();
    let res = (|| {
        nested_loop(gpu, &mut s, left, right, Nested::Check(offsets, total))?;
        let n = usize::try_from(total).map_err(|_| err(format!("{total} pairs do not fit in memory")))?;
        let lidx = s.alloc(gpu, Elem::U32, n)?;
        let ridx = s.alloc(gpu, Elem::U32, n)?;
        if n > 0 {
            nested_loop(gpu, &mut s, left, right, Nested::Write(offsets, &lidx, &ridx))?;
        }
        Ok(vec![lidx, ridx])
    })();
    s.finish(gpu, res)
}
