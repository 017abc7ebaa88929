//! Sort-merge joins and expansions whose arguments do not fit the device budget at once
//! run in pieces: `JoinCount`, `MatchFlags` and `JoinWrite` over a range of left rows
//! with the range of right rows their keys can meet (both sides sorted on the keys, so
//! the right range of left rows `a..b` is from the first right row not below row `a`'s
//! keys to the last not above row `b - 1`'s; a `MatchFlags` of several right sides, such
//! a range of each); `Expand` over a range of its rows. Pieces
//! are cut on the host from the key columns (moved to the host tier) and sized to a
//! target of bytes (each piece's arguments and outputs), which halves when a piece does
//! not fit. A left row whose own piece exceeds the target (one key meeting a long run of
//! right rows) is answered from its run alone: every row of the run has its keys, so it
//! counts, flags or writes every pair of the run. Each piece's outputs leave for the
//! host, where `JoinWrite`'s and `Expand`'s row numbers are shifted by the piece's first
//! rows and its offsets rebased; concatenated in piece order they are the one launch's
//! outputs, row for row, and are defined in the host tier.
//!
//! `NestedLoopWrite` runs the same way over ranges of left rows, each piece reading every
//! right row (neither side is sorted); a left row whose piece exceeds the target compares
//! its keys with every right row on the host.
//!
//! `ExclusiveScan` of counts that do not fit is a prefix sum on the host.

use super::rows::Part;
use super::sort::KeyCol;
use super::*;
use std::cmp::Ordering;

/// The kernels that run in pieces of rows here.
pub(super) fn runs_in_pieces(kernel: &Kernel, n_args: usize) -> bool {
    match kernel {
        Kernel::JoinCount { nkeys } => n_args == 2 * (*nkeys).max(1),
        // One or more right sides.
        Kernel::MatchFlags { nkeys, .. } => n_args >= 2 * (*nkeys).max(1) && n_args % (*nkeys).max(1) == 0,
        Kernel::JoinWrite { nkeys } => n_args == 2 * (*nkeys).max(1) + 2,
        Kernel::NestedLoopWrite { nkeys } => *nkeys >= 1 && n_args == 2 * nkeys + 2,
        Kernel::Expand => n_args == 3 || n_args == 4,
        _ => false,
    }
}

/// Compares row `i` of the columns `a` with row `j` of the columns `b` (sorted ascending
/// by code; floats by total order, every NaN equal and last), as the join kernels
/// compare keys; no columns compare equal.
pub(super) fn cmp_rows(a: &[HostCol], i: usize, b: &[HostCol], j: usize) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let kx = KeyCol::plain(x);
        let ky = KeyCol::plain(y);
        match kx.cmp(i, &ky, j) {
            Ordering::Equal => {}
            o => return o,
        }
    }
    Ordering::Equal
}

/// The rows of the sorted columns `right` whose keys equal row `i` of `left`: `lo..hi`.
pub(super) fn run_of(left: &[HostCol], i: usize, right: &[HostCol], m: usize) -> (usize, usize) {
    let lo = partition_point(0, m, |j| cmp_rows(right, j, left, i) == Ordering::Less);
    let hi = partition_point(lo, m, |j| cmp_rows(right, j, left, i) != Ordering::Greater);
    (lo, hi)
}

/// The first `x` in `lo..hi` where `pred` turns false (`pred` true then false).
fn partition_point(mut lo: usize, mut hi: usize, pred: impl Fn(usize) -> bool) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The end `b` of the piece starting at row `a` of `n`: the largest `b ≤ n` with
/// `cost(a, b) ≤ target` (`cost` grows with `b`), or `a` when not even one row fits.
pub(super) fn piece_end(a: usize, n: usize, target: usize, cost: impl Fn(usize, usize) -> usize) -> usize {
    // The first b in a+1..=n whose cost exceeds the target, less one.
    let first_over = partition_point(a + 1, n + 1, |b| cost(a, b) <= target);
    first_over - 1
}

/// The layout of a join kernel's arguments.
struct Sides {
    /// Columns of each side sliced per piece (keys; with no keys one column).
    width: usize,
    /// Key columns compared (0 for a cross product: every pair matches).
    nkeys: usize,
    /// Whether every piece of left rows reads every right row (a nested loop: neither
    /// side sorted).
    whole_right: bool,
}

impl Interp<'_> {
    /// Runs a join kernel ([`runs_in_pieces`]) in pieces (see the module) and defines its
    /// outputs `outs` in the host tier.
    pub(super) fn join_in_pieces(
        &mut self,
        kernel: &Kernel,
        arg_slots: &[usize],
        out_elems: &[Elem],
        outs: &[fox_kernel::BufId],
        what: &dyn Fn() -> String,
    ) -> Result<(), RuntimeError> {
        let kerr = |msg: String| RuntimeError::Kernel { at: what(), msg };
        let sides = match kernel {
            Kernel::JoinCount { nkeys } | Kernel::MatchFlags { nkeys, .. } | Kernel::JoinWrite { nkeys } => Sides {
                width: (*nkeys).max(1),
                nkeys: *nkeys,
                whole_right: *nkeys == 0,
            },
            Kernel::NestedLoopWrite { nkeys } => Sides {
                width: *nkeys,
                nkeys: *nkeys,
                whole_right: true,
            },
            // `lo`, the left column; no right side.
            _ => Sides {
                width: 1,
                nkeys: 0,
                whole_right: false,
            },
        };
        let expand = matches!(kernel, Kernel::Expand);
        // The arguments move to the host tier: pieces are cut from there.
        for &s in arg_slots {
            if matches!(self.tiers[s], Tier::Device) && !self.pinned[s] {
                self.evict(s).map_err(kerr)?;
            }
        }
        let host = |me: &mut Self, s: usize| me.download_arg(s).map_err(|e| host_error(e, what));
        let w = sides.width;
        // The right sides: none for `Expand`, one or more for `MatchFlags`, else one.
        let nsides = match kernel {
            Kernel::Expand => 0,
            Kernel::MatchFlags { .. } => arg_slots.len() / w - 1,
            _ => 1,
        };
        let lslots = if expand { &arg_slots[..1] } else { &arg_slots[..w] };
        let rslots: Vec<&[usize]> = (1..=nsides).map(|g| &arg_slots[g * w..(g + 1) * w]).collect();
        let mut lkeys = Vec::new();
        for &slot in &lslots[..sides.nkeys] {
            lkeys.push(host(self, slot)?);
        }
        let mut rkeys: Vec<Vec<HostCol>> = Vec::with_capacity(nsides);
        for side in &rslots {
            let mut keys = Vec::with_capacity(sides.nkeys);
            for &slot in &side[..sides.nkeys] {
                keys.push(host(self, slot)?);
            }
            rkeys.push(keys);
        }
        let n = self.slot_buf(lslots[0]).len;
        let ms: Vec<usize> = rslots.iter().map(|side| self.slot_buf(side[0]).len).collect();
        // Past the left keys and every right side's: the offsets and total, if any.
        let after_keys = if expand { 1 } else { (nsides + 1) * w };
        // `JoinWrite`'s and `Expand`'s offsets (with the total as row `n`); `Expand`'s `lo`.
        let offsets: Option<Vec<u64>> = match kernel {
            Kernel::JoinWrite { .. } | Kernel::NestedLoopWrite { .. } | Kernel::Expand => {
                let at = after_keys;
                let (HostCol::U64(mut off), HostCol::U64(total)) =
                    (host(self, arg_slots[at])?, host(self, arg_slots[at + 1])?)
                else {
                    return Err(RuntimeError::Plan(format!("{}: offsets and total are not U64", what())));
                };
                if off.len() != n || total.len() != 1 {
                    return Err(kerr(format!(
                        "the offsets have {} rows for {n} rows and the total {} rows",
                        off.len(),
                        total.len()
                    )));
                }
                off.push(total[0]);
                if off.windows(2).any(|p| p[0] > p[1]) {
                    return Err(kerr("the offsets are not the scan of the counts".to_string()));
                }
                Some(off)
            }
            _ => None,
        };
        let lo_col: Option<Vec<u32>> = if expand {
            match host(self, arg_slots[0])? {
                HostCol::U32(v) => Some(v),
                _ => return Err(RuntimeError::Plan(format!("{}: `lo` is not U32", what()))),
            }
        } else {
            None
        };
        // The outputs written of `Expand`'s sequence: its window's, or all.
        let (w0, w1) = match (expand, arg_slots.get(3), &offsets) {
            (true, Some(&s), Some(off)) => match host(self, s)? {
                HostCol::U64(w) if w.len() == 2 && w[0] <= w[1] && w[1] <= off[n] => (w[0], w[1]),
                _ => return Err(kerr("the window is not two rows within the outputs".to_string())),
            },
            (_, _, Some(off)) => (0, off[n]),
            _ => (0, 0),
        };
        let windowed = expand && arg_slots.len() == 4;
        // The rows whose outputs meet the window (every row without offsets).
        let (r0, r1) = match &offsets {
            Some(off) if expand => (
                partition_point(0, n, |r| off[r + 1] <= w0),
                partition_point(0, n, |r| off[r] < w1),
            ),
            _ => (0, n),
        };
        let lrow: usize = lslots.iter().map(|&s| self.slot_buf(s).elem.size()).sum();
        let rrow: usize = rslots
            .first()
            .map_or(0, |side| side.iter().map(|&s| self.slot_buf(s).elem.size()).sum());
        let out_row: usize = out_elems.iter().map(|e| e.size()).sum();
        // The rows of each right side the left rows `a..b` may meet.
        let right_of = |a: usize, b: usize| -> Vec<(usize, usize)> {
            (0..nsides)
                .map(|g| {
                    let (keys, m) = (&rkeys[g], ms[g]);
                    if sides.whole_right {
                        (0, m)
                    } else {
                        (run_of(&lkeys, a, keys, m).0, run_of(&lkeys, b - 1, keys, m).1)
                    }
                })
                .collect()
        };
        let right_rows = |r: &[(usize, usize)]| -> usize { r.iter().map(|(ra, rb)| rb - ra).sum() };
        let cost = |a: usize, b: usize| -> usize {
            let rr = right_rows(&right_of(a, b));
            let written = match &offsets {
                // Rebased offsets and total, and the pairs or expansions written.
                Some(off) => {
                    let (x, y) = (off[a].max(w0), off[b].min(w1));
                    8 * (b - a + 3) + out_row * y.saturating_sub(x) as usize
                }
                None => out_row * (b - a),
            };
            lrow * (b - a) + rrow * rr + written
        };
        let budget = self.device_cap.unwrap_or(u64::MAX).min(usize::MAX as u64) as usize;
        // A piece of a nested loop reads every right row besides its own.
        let whole = if sides.whole_right {
            rrow * ms.iter().sum::<usize>()
        } else {
            0
        };
        let mut target = (budget / 4).max(whole.saturating_add(budget / 8)).max(1);
        let mut acc: Vec<HostCol> = out_elems.iter().map(|&e| HostCol::empty(e)).collect();
        // The rows `JoinWrite` and `Expand` write are known: the host must hold them, or
        // the run stops before any piece runs.
        if offsets.is_some() {
            let rows = (w1 - w0) as usize;
            let names = if expand {
                ["the expanded rows' parents", "the expanded rows' positions"]
            } else {
                ["the joined rows (left indices)", "the joined rows (right indices)"]
            };
            for (col, name) in acc.iter_mut().zip(names) {
                if let HostCol::U32(v) = col {
                    *v = crate::alloc::try_with_capacity(rows, name).map_err(kerr)?;
                }
            }
        }
        let append = |acc: &mut Vec<HostCol>, cols: Vec<HostCol>| -> Result<(), RuntimeError> {
            for (x, c) in acc.iter_mut().zip(cols) {
                rows::host_append(x, c).map_err(|msg| RuntimeError::Kernel { at: what(), msg })?;
            }
            Ok(())
        };
        let mut pieces = 0u64;
        let mut a = r0;
        while a < r1.max(r0) {
            self.check_cancel()?;
            let b = piece_end(a, r1, target, cost);
            if b == a {
                // One left row beyond the target: its run of right rows answers it.
                let cols = self
                    .one_row(
                        kernel,
                        a,
                        &lkeys,
                        &rkeys,
                        &ms,
                        offsets.as_deref(),
                        lo_col.as_deref(),
                        (w0, w1),
                    )
                    .map_err(kerr)?;
                append(&mut acc, cols)?;
                pieces += 1;
                a += 1;
                continue;
            }
            let ranges = right_of(a, b);
            let ra = ranges.first().map_or(0, |r| r.0);
            let mut parts: Vec<Part> = Vec::with_capacity(arg_slots.len());
            parts.extend(lslots.iter().map(|_| Part::Rows(a, b)));
            for (side, &(ra, rb)) in rslots.iter().zip(&ranges) {
                parts.extend(side.iter().map(|_| Part::Rows(ra, rb)));
            }
            if let Some(off) = &offsets {
                let base = off[a];
                let rebased =
                    crate::alloc::try_collect(off[a..b].iter().map(|o| o - base), "a piece's offsets").map_err(kerr)?;
                parts.push(Part::Col(HostCol::U64(rebased)));
                parts.push(Part::Col(HostCol::U64(vec![off[b] - base])));
                if windowed {
                    let (x, y) = (off[a].max(w0), off[b].min(w1).max(off[a].max(w0)));
                    parts.push(Part::Col(HostCol::U64(vec![x - base, y - base])));
                }
            }
            match self.launch_parts(kernel, arg_slots, parts, out_elems, what) {
                Ok(mut cols) => {
                    // Row numbers of the piece are rows of the whole.
                    match kernel {
                        Kernel::JoinWrite { .. } | Kernel::NestedLoopWrite { .. } => {
                            shift_u32(&mut cols[0], a);
                            shift_u32(&mut cols[1], ra);
                        }
                        Kernel::Expand => shift_u32(&mut cols[0], a),
                        _ => {}
                    }
                    append(&mut acc, cols)?;
                    pieces += 1;
                    a = b;
                }
                Err(RuntimeError::Kernel { msg, .. }) if is_out_of_memory(&msg) && target > 1 && b - a > 1 => {
                    // Halving what a piece reads beyond the right rows every piece reads.
                    target = whole + (cost(a, b) - whole) / 2;
                }
                Err(RuntimeError::Kernel { msg, at }) if is_out_of_memory(&msg) => {
                    return Err(RuntimeError::Kernel {
                        at,
                        msg: format!(
                            "{msg}; the smallest piece of this operator ({} left rows, {} right rows) needs {} \
                             on the device",
                            b - a,
                            right_rows(&right_of(a, b)),
                            crate::alloc::bytes_text(cost(a, b) as u128)
                        ),
                    });
                }
                Err(e) => return Err(e),
            }
        }
        self.note_pieces(pieces);
        for (o, col) in outs.iter().zip(acc) {
            self.define_in_host_tier(o.0 as usize, col);
        }
        Ok(())
    }

    /// The outputs of a join kernel for left row `a` alone, from its run of right rows
    /// (every row of which has its keys): `JoinCount` the run's length, `MatchFlags`
    /// whether it is empty, `JoinWrite` every pair; `Expand` its `k` expansions.
    #[allow(clippy::too_many_arguments)]
    fn one_row(
        &self,
        kernel: &Kernel,
        a: usize,
        lkeys: &[HostCol],
        rsides: &[Vec<HostCol>],
        ms: &[usize],
        offsets: Option<&[u64]>,
        lo: Option<&[u32]>,
        (w0, w1): (u64, u64),
    ) -> Result<Vec<HostCol>, String> {
        // Row `a`'s run in right side `g`.
        let run = |g: usize| match kernel {
            Kernel::JoinCount { nkeys: 0 } | Kernel::MatchFlags { nkeys: 0, .. } | Kernel::JoinWrite { nkeys: 0 } => {
                (0, ms[g])
            }
            Kernel::NestedLoopWrite { .. } => (0, ms[g]),
            _ if !lkeys.is_empty() => run_of(lkeys, a, &rsides[g], ms[g]),
            _ => (0, 0),
        };
        let (ra, rb) = if rsides.is_empty() { (0, 0) } else { run(0) };
        let rkeys: &[HostCol] = rsides.first().map_or(&[], |k| k.as_slice());
        let what = "the pairs of one row of a join";
        Ok(match kernel {
            Kernel::NestedLoopWrite { .. } => {
                // Neither side sorted: every right row compared, in order.
                let off = offsets.expect("NestedLoopWrite has offsets");
                let right: Vec<u32> = (ra..rb)
                    .filter(|&j| cmp_rows(lkeys, a, rkeys, j) == Ordering::Equal)
                    .map(|j| j as u32)
                    .collect();
                if off[a + 1] - off[a] != right.len() as u64 {
                    return Err("the offsets are not the scan of the join's counts".to_string());
                }
                vec![
                    HostCol::U32(crate::alloc::try_filled(right.len(), a as u32, what)?),
                    HostCol::U32(right),
                ]
            }
            Kernel::JoinCount { .. } => vec![HostCol::U64(vec![(rb - ra) as u64])],
            Kernel::MatchFlags { anti, .. } => {
                let found = (0..rsides.len()).any(|g| {
                    let (ra, rb) = run(g);
                    rb > ra
                });
                vec![HostCol::U8(vec![u8::from(found != *anti)])]
            }
            Kernel::JoinWrite { .. } => {
                let off = offsets.expect("JoinWrite has offsets");
                if off[a + 1] - off[a] != (rb - ra) as u64 {
                    return Err("the offsets are not the scan of the join's counts".to_string());
                }
                vec![
                    HostCol::U32(crate::alloc::try_filled(rb - ra, a as u32, what)?),
                    HostCol::U32(crate::alloc::try_collect((ra as u32)..(rb as u32), what)?),
                ]
            }
            Kernel::Expand => {
                let off = offsets.expect("Expand has offsets");
                // The row's outputs within the window: the k-th is position `lo + k`.
                let (x, y) = (off[a].max(w0), off[a + 1].min(w1));
                let (k0, k1) = (x - off[a], y.max(x) - off[a]);
                let start = lo.expect("Expand has lo")[a] as u64;
                if start + k1 > u64::from(u32::MAX) + 1 {
                    return Err(format!("an expansion of {k1} positions from {start} passes u32"));
                }
                vec![
                    HostCol::U32(crate::alloc::try_filled((k1 - k0) as usize, a as u32, what)?),
                    HostCol::U32(crate::alloc::try_collect(
                        (0..(k1 - k0) as usize).map(|i| (start + k0 + i as u64) as u32),
                        what,
                    )?),
                ]
            }
            _ => return Err("the kernel does not run in pieces".to_string()),
        })
    }

    /// `ExclusiveScan` of counts that do not fit the device, on the host: `offsets` in
    /// the host tier, `total` too (one row, brought back when read).
    pub(super) fn scan_on_host(
        &mut self,
        arg_slots: &[usize],
        outs: &[fox_kernel::BufId],
        what: &dyn Fn() -> String,
    ) -> Result<(), RuntimeError> {
        let kerr = |msg: String| RuntimeError::Kernel { at: what(), msg };
        let ([counts], [o_off, o_total]) = (arg_slots, outs) else {
            return Err(RuntimeError::Plan(format!("{}: a scan of one column", what())));
        };
        let counts = match self.download_arg(*counts) {
            Ok(HostCol::U64(v)) => v,
            Ok(_) => return Err(RuntimeError::Plan(format!("{}: the counts are not U64", what()))),
            Err(HostError::Plan(m)) | Err(HostError::Kernel(m)) => return Err(kerr(m)),
            Err(HostError::Run(e)) => return Err(e),
        };
        let mut off = crate::alloc::try_with_capacity(counts.len(), "the offsets of a scan").map_err(kerr)?;
        let mut total = 0u64;
        for c in counts {
            off.push(total);
            total = total
                .checked_add(c)
                .ok_or_else(|| kerr("the counts' sum passes u64".to_string()))?;
        }
        self.define_in_host_tier(o_off.0 as usize, HostCol::U64(off));
        self.define_in_host_tier(o_total.0 as usize, HostCol::U64(vec![total]));
        Ok(())
    }
}

/// Adds `by` to every row number of a `U32` column.
fn shift_u32(col: &mut HostCol, by: usize) {
    if let HostCol::U32(v) = col {
        for x in v {
            *x += by as u32;
        }
    }
}

impl Interp<'_> {
    /// `BoundRange` whose searched side does not fit the device beside a chunk of its
    /// probing rows: pieces of the searched side, each searched by chunks of the probing
    /// rows. A row's `lo` is the number of searched rows before its range and `hi` of
    /// those up to its end (both counts of rows ordered below a bound, as the side is
    /// sorted), so the whole side's are the sums of the pieces' (`hi` raised to `lo`
    /// where the bounds cross in every piece, as they then do in the whole). Outputs in
    /// the host tier.
    pub(super) fn search_in_pieces(
        &mut self,
        kernel: &Kernel,
        arg_slots: &[usize],
        out_elems: &[Elem],
        outs: &[fox_kernel::BufId],
        what: &dyn Fn() -> String,
    ) -> Result<(), RuntimeError> {
        if outs.len() != 2 {
            return Err(RuntimeError::Plan(format!("{}: a search has two outputs", what())));
        }
        let (lo, hi) = self.search_pieces(kernel, arg_slots, out_elems, what)?;
        self.define_in_host_tier(outs[0].0 as usize, HostCol::U32(lo));
        self.define_in_host_tier(outs[1].0 as usize, HostCol::U32(hi));
        Ok(())
    }

    /// The ranges `lo`, `hi` of [`Interp::search_in_pieces`], on the host.
    fn search_pieces(
        &mut self,
        kernel: &Kernel,
        arg_slots: &[usize],
        out_elems: &[Elem],
        what: &dyn Fn() -> String,
    ) -> Result<(Vec<u32>, Vec<u32>), RuntimeError> {
        let kerr = |msg: String| RuntimeError::Kernel { at: what(), msg };
        let Kernel::BoundRange { nkeys, lower, upper } = kernel else {
            return Err(RuntimeError::Plan(format!("{}: not a search", what())));
        };
        let sw = nkeys + usize::from(lower.is_some() || upper.is_some());
        if arg_slots.len() <= sw {
            return Err(RuntimeError::Plan(format!("{}: a search without probing rows", what())));
        }
        for &s in arg_slots {
            if matches!(self.tiers[s], Tier::Device) && !self.pinned[s] {
                self.evict(s).map_err(kerr)?;
            }
        }
        let m = self.slot_buf(arg_slots[0]).len;
        let n = self.slot_buf(arg_slots[sw]).len;
        let srow: usize = arg_slots[..sw]
            .iter()
            .map(|&s| self.slot_buf(s).elem.size())
            .sum::<usize>()
            .max(1);
        let prow: usize = arg_slots[sw..]
            .iter()
            .map(|&s| self.slot_buf(s).elem.size())
            .sum::<usize>()
            + 8;
        let budget = self.device_cap.unwrap_or(u64::MAX).min(usize::MAX as u64) as usize;
        let mut s_rows = (budget / 8 / srow).clamp(1, m.max(1));
        let mut p_rows = (budget / 8 / prow).clamp(1, n.max(1));
        let what_alloc = "the ranges of a search in pieces";
        let mut lo = crate::alloc::try_filled(n, 0u32, what_alloc).map_err(kerr)?;
        let mut hi = crate::alloc::try_filled(n, 0u32, what_alloc).map_err(kerr)?;
        let mut pieces = 0u64;
        // The ranges within the piece of the searched side being searched.
        let mut piece_lo = crate::alloc::try_filled(n, 0u32, what_alloc).map_err(kerr)?;
        let mut piece_hi = crate::alloc::try_filled(n, 0u32, what_alloc).map_err(kerr)?;
        let mut s0 = 0;
        // Each piece of the searched side (one, empty, for an empty side).
        'piece: loop {
            let s1 = (s0 + s_rows).min(m);
            let mut p0 = 0;
            while p0 < n {
                self.check_cancel()?;
                let p1 = (p0 + p_rows).min(n);
                let parts = (0..arg_slots.len())
                    .map(|i| if i < sw { Part::Rows(s0, s1) } else { Part::Rows(p0, p1) })
                    .collect();
                match self.launch_parts(kernel, arg_slots, parts, out_elems, what) {
                    Ok(cols) => {
                        let [HostCol::U32(l), HostCol::U32(h)] = &cols[..] else {
                            return Err(RuntimeError::Plan(format!(
                                "{}: ranges are not two U32 columns",
                                what()
                            )));
                        };
                        piece_lo[p0..p1].copy_from_slice(l);
                        piece_hi[p0..p1].copy_from_slice(h);
                        pieces += 1;
                        p0 = p1;
                    }
                    Err(RuntimeError::Kernel { msg, at }) if is_out_of_memory(&msg) => {
                        // The larger of the two halves; the piece starts over.
                        if p_rows > 1 && (p_rows >= s_rows || s_rows == 1) {
                            p_rows = (p_rows.min(p1 - p0) / 2).max(1);
                        } else if s_rows > 1 {
                            s_rows = (s_rows.min(s1 - s0) / 2).max(1);
                            continue 'piece;
                        } else {
                            return Err(RuntimeError::Kernel {
                                at,
                                msg: format!(
                                    "{msg}; the smallest piece of this search (one searched row, one probing row) \
                                     needs {} on the device",
                                    crate::alloc::bytes_text((srow + prow) as u128)
                                ),
                            });
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
            for i in 0..n {
                lo[i] += piece_lo[i];
                hi[i] += piece_hi[i];
            }
            s0 = s1;
            if s0 >= m {
                break;
            }
        }
        self.note_pieces(pieces);
        Ok((lo, hi))
    }

    /// `HashProbe` or `HashMatch` (`args`: the build side's sorted keys, its table, the
    /// probing keys) answered by searching the build side's sorted keys instead of its
    /// table, in pieces of both sides ([`Interp::search_in_pieces`] of the search without
    /// bounds): the run of equal keys is the same rows whatever finds it. A probing row
    /// without a run gets `lo == hi == 0`, as from the table. Taken when the table is
    /// not built ([`UNBUILT_TABLE`]) or a probe does not fit beside it; outputs in the
    /// host tier.
    pub(super) fn probe_by_search(
        &mut self,
        kernel: &Kernel,
        arg_slots: &[usize],
        outs: &[fox_kernel::BufId],
        what: &dyn Fn() -> String,
    ) -> Result<(), RuntimeError> {
        let (nkeys, anti) = match kernel {
            Kernel::HashProbe { nkeys } => (*nkeys, None),
            Kernel::HashMatch { nkeys, anti } => (*nkeys, Some(*anti)),
            _ => return Err(RuntimeError::Plan(format!("{}: not a hash probe", what()))),
        };
        if nkeys == 0 || arg_slots.len() != 2 * nkeys + 1 || outs.len() != if anti.is_some() { 1 } else { 2 } {
            return Err(RuntimeError::Plan(format!(
                "{}: the arguments or outputs of a hash probe",
                what()
            )));
        }
        let slots: Vec<usize> = arg_slots[..nkeys]
            .iter()
            .chain(&arg_slots[nkeys + 1..])
            .copied()
            .collect();
        let search = Kernel::BoundRange {
            nkeys,
            lower: None,
            upper: None,
        };
        let (mut lo, mut hi) = self.search_pieces(&search, &slots, &[Elem::U32, Elem::U32], what)?;
        match anti {
            None => {
                for (l, h) in lo.iter_mut().zip(hi.iter_mut()) {
                    if l == h {
                        (*l, *h) = (0, 0);
                    }
                }
                self.define_in_host_tier(outs[0].0 as usize, HostCol::U32(lo));
                self.define_in_host_tier(outs[1].0 as usize, HostCol::U32(hi));
            }
            Some(anti) => {
                let flags = crate::alloc::try_collect(
                    lo.iter().zip(&hi).map(|(l, h)| u8::from((h > l) != anti)),
                    "the flags of a hash probe by search",
                )
                .map_err(|msg| RuntimeError::Kernel { at: what(), msg })?;
                drop((lo, hi));
                self.define_in_host_tier(outs[0].0 as usize, HostCol::U8(flags));
            }
        }
        Ok(())
    }
}

/// The table a `HashBuild` that does not fit the device defines instead of its table:
/// no slots (a table has at least two). Its probes search the sorted build keys
/// ([`Interp::probe_by_search`]); nothing else reads a table.
pub(super) const UNBUILT_TABLE: usize = 0;

#[cfg(test)]
mod tests {
    use super::*;

    /// Left rows `a..b` of sorted `left` meet exactly the right rows `run_of(a).0 ..
    /// run_of(b - 1).1`: every matching pair of a naive join is within, every right row
    /// within has keys between.
    fn check_pieces(left: &[i32], right: &[i32], target: usize) {
        let (l, r) = ([HostCol::I32(left.to_vec())], [HostCol::I32(right.to_vec())]);
        let (n, m) = (left.len(), right.len());
        let cost = |a: usize, b: usize| {
            let (ra, rb) = (run_of(&l, a, &r, m).0, run_of(&l, b - 1, &r, m).1);
            4 * (b - a) + 4 * (rb - ra)
        };
        let mut a = 0;
        let mut pairs = Vec::new();
        while a < n {
            let b = piece_end(a, n, target, cost);
            assert!(b == a || cost(a, b) <= target);
            assert!(b == n || cost(a, b + 1) > target, "the piece is the longest that fits");
            let b = b.max(a + 1);
            let (ra, rb) = (run_of(&l, a, &r, m).0, run_of(&l, b - 1, &r, m).1);
            for (i, x) in left.iter().enumerate().take(b).skip(a) {
                for (j, y) in right.iter().enumerate().take(rb).skip(ra) {
                    if x == y {
                        pairs.push((i, j));
                    }
                }
            }
            a = b;
        }
        let mut want = Vec::new();
        for (i, x) in left.iter().enumerate() {
            for (j, y) in right.iter().enumerate() {
                if x == y {
                    want.push((i, j));
                }
            }
        }
        assert_eq!(pairs, want, "target {target}");
    }

    #[test]
    fn pieces_of_a_sorted_join_meet_every_matching_pair_once_in_order() {
        let mut seed = 1u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as i32
        };
        let mut skew: Vec<i32> = (0..300)
            .map(|_| next() % 40)
            .chain(std::iter::repeat_n(7, 200))
            .collect();
        skew.sort();
        let mut spread: Vec<i32> = (0..200).map(|_| next() % 60).collect();
        spread.sort();
        let cases: Vec<(Vec<i32>, Vec<i32>)> = vec![
            (vec![], vec![]),
            (vec![], vec![1, 2]),
            (vec![1, 2], vec![]),
            (vec![5], vec![5]),
            (vec![5], vec![1, 5, 5, 9]),
            (vec![3; 50], vec![3; 70]),
            (skew.clone(), spread.clone()),
            (spread.clone(), skew.clone()),
            (skew.clone(), skew.clone()),
            (vec![1, 2, 3, 4], vec![5, 6]),
        ];
        for (l, r) in &cases {
            for target in [1, 8, 16, 40, 100, 1000, 1 << 20] {
                check_pieces(l, r, target);
            }
        }
    }

    #[test]
    fn a_row_run_covers_equal_keys_floats_by_total_order_and_no_keys_everything() {
        let l = [HostCol::F64(vec![f64::NAN, -0.0, 0.0])];
        let r = [HostCol::F64(vec![-1.0, -0.0, 0.0, 0.0, f64::NAN, f64::NAN])];
        assert_eq!(run_of(&l, 0, &r, 6), (4, 6));
        assert_eq!(run_of(&l, 1, &r, 6), (1, 2));
        assert_eq!(run_of(&l, 2, &r, 6), (2, 4));
        // Two keys: the second decides within the first's run.
        let l = [HostCol::I32(vec![2]), HostCol::I64(vec![5])];
        let r = [HostCol::I32(vec![1, 2, 2, 2, 3]), HostCol::I64(vec![9, 4, 5, 5, 0])];
        assert_eq!(run_of(&l, 0, &r, 5), (2, 4));
        assert_eq!(run_of(&[], 0, &[], 7), (0, 7));
        // A piece starting at the end of its rows, and one whose first row is too large.
        assert_eq!(piece_end(3, 3, 10, |_, _| 0), 3);
        assert_eq!(piece_end(0, 3, 10, |a, b| 20 * (b - a)), 0);
        assert_eq!(piece_end(0, 3, 40, |a, b| 20 * (b - a)), 2);
    }
}
