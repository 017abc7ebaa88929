//! Aggregations by key whose arguments do not fit the device budget at once run in
//! pieces.
//!
//! `ReduceByKey` (its keys sorted) runs over pieces of rows cut at group boundaries, so
//! each group is aggregated whole in one piece and the pieces' outputs, concatenated,
//! are the one launch's; any aggregate (`avg` too). A group larger than a piece is
//! aggregated in pieces of its rows whose partial rows are combined (`rows::combined`)
//! when its aggregates combine exactly, and is otherwise the out-of-memory error naming
//! the group's rows and the bytes it needs.
//!
//! `FusedReduce` with keys (its rows in any order) runs over chunks of rows when its
//! aggregates combine exactly: each chunk's groups (sorted on the keys) are merged on the
//! host into one order of the keys (stable: a key's partial rows in chunk order), and a
//! `ReduceByKey` of the combining aggregates, itself in pieces, gives one row per group.
//! An error of an expression names the row of the whole.

use super::joins::{cmp_rows, piece_end};
use super::rows::{combined, host_append, Part};
use super::sort::{merge_runs, Run};
use super::*;
use std::cmp::Ordering;

/// The key columns, the row-aligned arguments and the aggregates of a keyed aggregation
/// that runs in pieces here; `None` for another kernel.
pub(super) fn keyed(kernel: &Kernel, n_args: usize) -> Option<(usize, usize)> {
    match kernel {
        Kernel::ReduceByKey { nkeys, aggs } if *nkeys >= 1 => {
            let aligned = nkeys + aggs.iter().filter(|a| a.input.is_some()).count();
            (aligned <= n_args).then_some((*nkeys, aligned))
        }
        Kernel::FusedReduce {
            nkeys, aggs, n_cols, ..
        } if *nkeys >= 1 && *n_cols <= n_args && *nkeys <= *n_cols && combined(aggs).is_some() => {
            Some((*nkeys, *n_cols))
        }
        _ => None,
    }
}

/// The end of the piece of sorted `keys` that starts at row `a` and holds at most
/// `rows` rows, cut at a group boundary; a group longer than `rows` from `a` is the
/// piece whole (`(end, true)`: one group).
pub(super) fn group_piece(keys: &[HostCol], a: usize, n: usize, rows: usize) -> (usize, bool) {
    let b = (a + rows.max(1)).min(n);
    if b == n {
        return (b, false);
    }
    // The first row of the group that row `b` is in.
    let g = {
        let (mut lo, mut hi) = (a, b);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if cmp_rows(keys, mid, keys, b) == Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    };
    if g > a {
        return (g, false);
    }
    // Row `a`'s group runs past `b`: its end.
    let end = piece_end(a, n, 0, |x, y| {
        usize::from(cmp_rows(keys, x, keys, y - 1) != Ordering::Equal)
    });
    (end, true)
}

impl Interp<'_> {
    /// Runs a keyed aggregation ([`keyed`]) in pieces (see the module) and defines its
    /// outputs `outs` in the host tier.
    pub(super) fn reduce_in_pieces(
        &mut self,
        kernel: &Kernel,
        arg_slots: &[usize],
        out_elems: &[Elem],
        outs: &[fox_kernel::BufId],
        what: &dyn Fn() -> String,
    ) -> Result<(), RuntimeError> {
        let cols = match kernel {
            Kernel::FusedReduce { .. } => self.fused_in_chunks(kernel, arg_slots, out_elems, what)?,
            _ => self.reduce_in_groups(kernel, arg_slots, out_elems, what)?,
        };
        for (o, col) in outs.iter().zip(cols) {
            self.define_in_host_tier(o.0 as usize, col);
        }
        Ok(())
    }

    /// `ReduceByKey` over pieces cut at group boundaries; its output columns.
    fn reduce_in_groups(
        &mut self,
        kernel: &Kernel,
        arg_slots: &[usize],
        out_elems: &[Elem],
        what: &dyn Fn() -> String,
    ) -> Result<Vec<HostCol>, RuntimeError> {
        let kerr = |msg: String| RuntimeError::Kernel { at: what(), msg };
        let Some((nkeys, n_aligned)) = keyed(kernel, arg_slots.len()) else {
            return Err(RuntimeError::Plan(format!("{}: not an aggregation by key", what())));
        };
        let Kernel::ReduceByKey { aggs, .. } = kernel else {
            return Err(RuntimeError::Plan(format!("{}: not a ReduceByKey", what())));
        };
        for &s in &arg_slots[..n_aligned] {
            if matches!(self.tiers[s], Tier::Device) && !self.pinned[s] {
                self.evict(s).map_err(kerr)?;
            }
        }
        let mut keys = Vec::with_capacity(nkeys);
        for &s in &arg_slots[..nkeys] {
            keys.push(self.download_arg(s).map_err(|e| match e {
                HostError::Plan(m) => RuntimeError::Plan(format!("{}: {m}", what())),
                HostError::Kernel(m) => kerr(m),
                HostError::Run(e) => e,
            })?);
        }
        let n = self.slot_buf(arg_slots[0]).len;
        let row_bytes: usize = arg_slots[..n_aligned]
            .iter()
            .map(|&s| self.slot_buf(s).elem.size())
            .chain(out_elems.iter().map(|e| e.size()))
            .sum::<usize>()
            .max(1);
        let arg_bytes: usize = arg_slots[..n_aligned]
            .iter()
            .map(|&s| self.slot_buf(s).elem.size())
            .sum();
        let budget = self.device_cap.unwrap_or(u64::MAX).min(usize::MAX as u64) as usize;
        let mut chunk = (budget / 4 / row_bytes).max(1);
        let mut acc: Vec<HostCol> = out_elems.iter().map(|&e| HostCol::empty(e)).collect();
        let combine = combined(aggs).map(|aggs| Kernel::ReduceByKey { nkeys, aggs });
        let parts = |a: usize, b: usize| -> Vec<Part> {
            (0..arg_slots.len())
                .map(|i| if i < n_aligned { Part::Rows(a, b) } else { Part::Whole })
                .collect()
        };
        let mut pieces = 0u64;
        let mut a = 0;
        while a < n {
            self.check_cancel()?;
            let (b, one_group) = group_piece(&keys, a, n, chunk);
            // A group longer than a piece: partial rows of pieces of it, combined, where
            // its aggregates combine; otherwise the group whole.
            let res = match &combine {
                Some(c) if one_group && b - a > chunk => {
                    self.group_in_pieces(kernel, c, arg_slots, n_aligned, a, b, chunk, out_elems, what)
                }
                _ => self.launch_parts(kernel, arg_slots, parts(a, b), out_elems, what),
            };
            match res {
                Ok(cols) => {
                    for (x, c) in acc.iter_mut().zip(cols) {
                        host_append(x, c).map_err(kerr)?;
                    }
                    pieces += 1;
                    a = b;
                }
                Err(RuntimeError::Kernel { msg, at }) if is_out_of_memory(&msg) && one_group && combine.is_none() => {
                    return Err(RuntimeError::Kernel {
                        at,
                        msg: format!(
                            "{msg}; the group of one key has {} rows, which this aggregation (its aggregates \
                             do not combine from parts) reads at once: its arguments alone take {} on the device",
                            b - a,
                            crate::alloc::bytes_text(((b - a) * arg_bytes) as u128)
                        ),
                    });
                }
                Err(RuntimeError::Kernel { msg, .. }) if is_out_of_memory(&msg) && chunk > 1 => {
                    chunk = (chunk.min(b - a) / 2).max(1);
                }
                Err(RuntimeError::Kernel { msg, at }) if is_out_of_memory(&msg) => {
                    return Err(RuntimeError::Kernel {
                        at,
                        msg: format!(
                            "{msg}; the smallest piece of this aggregation (one row) needs {} on the device",
                            crate::alloc::bytes_text(row_bytes as u128)
                        ),
                    });
                }
                Err(e) => return Err(e),
            }
        }
        self.note_pieces(pieces);
        Ok(acc)
    }

    /// One group, rows `a..b`, aggregated in pieces of `chunk` rows whose partial rows
    /// `combine` aggregates: one row.
    #[allow(clippy::too_many_arguments)]
    fn group_in_pieces(
        &mut self,
        kernel: &Kernel,
        combine: &Kernel,
        arg_slots: &[usize],
        n_aligned: usize,
        a: usize,
        b: usize,
        chunk: usize,
        out_elems: &[Elem],
        what: &dyn Fn() -> String,
    ) -> Result<Vec<HostCol>, RuntimeError> {
        let kerr = |msg: String| RuntimeError::Kernel { at: what(), msg };
        let mut partial: Vec<HostCol> = out_elems.iter().map(|&e| HostCol::empty(e)).collect();
        let mut x = a;
        while x < b {
            let y = (x + chunk).min(b);
            let parts = (0..arg_slots.len())
                .map(|i| if i < n_aligned { Part::Rows(x, y) } else { Part::Whole })
                .collect();
            let cols = self.launch_parts(kernel, arg_slots, parts, out_elems, what)?;
            for (p, c) in partial.iter_mut().zip(cols) {
                host_append(p, c).map_err(kerr)?;
            }
            x = y;
        }
        // Every argument of the combining launch is a column of the host (the slots
        // beside them are not read).
        let parts = partial.into_iter().map(Part::Col).collect();
        let unread = vec![arg_slots[0]; out_elems.len()];
        self.launch_parts(combine, &unread, parts, out_elems, what)
    }

    /// `FusedReduce` with keys over chunks of rows, the chunks' groups merged and
    /// combined; its output columns.
    fn fused_in_chunks(
        &mut self,
        kernel: &Kernel,
        arg_slots: &[usize],
        out_elems: &[Elem],
        what: &dyn Fn() -> String,
    ) -> Result<Vec<HostCol>, RuntimeError> {
        let kerr = |msg: String| RuntimeError::Kernel { at: what(), msg };
        let (Some((nkeys, n_cols)), Kernel::FusedReduce { aggs, .. }) = (keyed(kernel, arg_slots.len()), kernel) else {
            return Err(RuntimeError::Plan(format!("{}: not an aggregation by key", what())));
        };
        let combine = Kernel::ReduceByKey {
            nkeys,
            aggs: combined(aggs).expect("checked by keyed"),
        };
        for &s in &arg_slots[..n_cols] {
            if matches!(self.tiers[s], Tier::Device) && !self.pinned[s] {
                self.evict(s).map_err(kerr)?;
            }
        }
        let n = self.slot_buf(arg_slots[0]).len;
        let row_bytes: usize = arg_slots[..n_cols]
            .iter()
            .map(|&s| self.slot_buf(s).elem.size())
            .chain(out_elems.iter().map(|e| e.size()))
            .sum::<usize>()
            .max(1);
        let budget = self.device_cap.unwrap_or(u64::MAX).min(usize::MAX as u64) as usize;
        let mut chunk = (budget / 4 / row_bytes).clamp(1, n.max(1));
        let mut acc: Vec<HostCol> = out_elems.iter().map(|&e| HostCol::empty(e)).collect();
        let mut runs: Vec<Run> = Vec::new();
        let mut total = 0usize;
        let mut a = 0;
        while a < n {
            self.check_cancel()?;
            let b = (a + chunk).min(n);
            let parts = (0..arg_slots.len())
                .map(|i| if i < n_cols { Part::Rows(a, b) } else { Part::Whole })
                .collect();
            match self.launch_parts(kernel, arg_slots, parts, out_elems, what) {
                Ok(cols) => {
                    let len = cols.first().map_or(0, HostCol::len);
                    let keys = cols[..nkeys]
                        .iter()
                        .map(|c| c.try_clone("the keys of a chunk's groups"))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(kerr)?;
                    runs.push(Run {
                        keys,
                        rows: (total as u32..(total + len) as u32).collect(),
                    });
                    total += len;
                    for (x, c) in acc.iter_mut().zip(cols) {
                        host_append(x, c).map_err(kerr)?;
                    }
                    a = b;
                }
                Err(RuntimeError::Kernel { msg, .. }) if is_out_of_memory(&msg) && rows::may_halve(chunk, n) => {
                    chunk /= 2;
                }
                Err(RuntimeError::Kernel { msg, at }) => {
                    return Err(RuntimeError::Kernel {
                        msg: rows::rebase_row(msg, a),
                        at,
                    });
                }
                Err(e) => return Err(e),
            }
        }
        self.note_pieces(runs.len() as u64);
        if total > u32::MAX as usize {
            return Err(kerr(format!(
                "{total} partial rows are more than a permutation can index"
            )));
        }
        let plain = vec![false; nkeys];
        let perm = merge_runs(&runs, &plain, &plain, None, total).map_err(kerr)?;
        drop(runs);
        // The partial rows in the order of their keys, aggregated again by key.
        let mut temps = Vec::with_capacity(acc.len());
        for col in acc {
            let sorted = rows::gather_host(&col, &perm).map_err(kerr)?;
            drop(col);
            temps.push(self.host_temp_slot(sorted));
        }
        let res = self.reduce_in_groups(&combine, &temps, out_elems, what);
        for t in temps {
            self.drop_temp_slot(t);
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pieces `group_piece` cuts `keys` into with at most `rows` rows: every group in
    /// one piece, pieces cut only where a group ends, a group longer than `rows` alone
    /// (and flagged), the others at most `rows` rows.
    fn check(keys: &[i32], rows: usize) {
        let cols = [HostCol::I32(keys.to_vec())];
        let n = keys.len();
        let mut a = 0;
        while a < n {
            let (b, one) = group_piece(&cols, a, n, rows);
            assert!(b > a && b <= n);
            assert!(b == n || keys[b] != keys[b - 1], "cut inside a group at {b}");
            if one {
                assert!(keys[a..b].iter().all(|&k| k == keys[a]) && b - a > rows);
                assert!(b == n || keys[b] != keys[a]);
            } else {
                assert!(b - a <= rows, "{a}..{b} longer than {rows}");
            }
            a = b;
        }
    }

    #[test]
    fn pieces_of_sorted_keys_end_at_group_boundaries() {
        let mut skew: Vec<i32> = (0..500i32).map(|i| i * 7919 % 97).chain(vec![50; 300]).collect();
        skew.sort();
        let cases: Vec<Vec<i32>> = vec![
            vec![],
            vec![4],
            vec![4; 100],
            (0..100).collect(),
            vec![1, 1, 2, 2, 3, 3, 4, 4],
            skew,
        ];
        for keys in &cases {
            for rows in [1, 2, 3, 4, 7, 64, 1000] {
                check(keys, rows);
            }
        }
        // A boundary exactly at the end of a piece: the piece is whole.
        let k = [HostCol::I32(vec![1, 1, 2, 2])];
        assert_eq!(group_piece(&k, 0, 4, 2), (2, false));
        assert_eq!(group_piece(&k, 0, 4, 3), (2, false));
        assert_eq!(group_piece(&k, 0, 4, 1), (2, true));
    }
}
