//! `TrieBuild` whose relation and levels do not fit the device budget at once runs over
//! pieces of the relation's rows: each piece's trie is built on the device and its levels
//! leave for the host, where they are joined to the levels of the rows before. Rows `a -
//! 1` and `a` at a cut share a prefix of `s < arity` columns (the relation is sorted and
//! duplicate-free), so the last node of the rows before and the piece's first node are
//! one node at each level `d < s` and distinct below: the piece's first value of such a
//! level is dropped and the node's children run on into the piece's; every `start_d` of
//! the piece is shifted by the nodes of level `d + 1` before it. The joined levels are
//! the one launch's, node for node, and are defined in the host tier.

use super::rows::Part;
use super::sort::KeyCol;
use super::*;
use std::cmp::Ordering;

/// The number of leading columns on which row `i` and row `j` of `cols` are equal, as
/// the trie compares values.
fn shared_prefix(cols: &[HostCol], i: usize, j: usize) -> usize {
    cols.iter()
        .take_while(|c| {
            let k = KeyCol::plain(c);
            k.cmp(i, &k, j) == Ordering::Equal
        })
        .count()
}

/// Appends to the levels `acc` (`values_0, start_0, …, values_{m-1}`, as `TrieBuild`
/// outputs them) those of the next piece of rows, `piece`, whose first row shares a
/// prefix of `s` columns with the last row before it (0 for the first piece).
fn join_levels(acc: &mut [HostCol], piece: Vec<HostCol>, s: usize) -> Result<(), String> {
    let m = acc.len().div_ceil(2);
    // The nodes of each level before the piece.
    let before: Vec<usize> = (0..m).map(|d| acc[2 * d].len()).collect();
    for (k, col) in piece.into_iter().enumerate() {
        let (d, is_start) = (k / 2, k % 2 == 1);
        let merged = d < s;
        if !is_start {
            let skip = usize::from(merged && before[d] > 0);
            rows::host_append(&mut acc[k], rows::host_slice(&col, skip.min(col.len()), col.len())?)?;
            continue;
        }
        let (HostCol::U32(start), HostCol::U32(into)) = (col, &mut acc[k]) else {
            return Err("a trie's starts are not U32".to_string());
        };
        // The nodes of level d + 1 before the piece, less the one it shares.
        let shift = before[d + 1] - usize::from(d + 1 < s && before[d + 1] > 0);
        // A level before any piece holds the one `0` of no nodes' starts.
        if before[d] == 0 {
            into.clear();
        } else {
            // The last entry (the end of the level's children) is the piece's to give.
            into.pop();
        }
        let from = usize::from(merged && before[d] > 0);
        crate::alloc::try_reserve(into, start.len() - from, "the starts of a trie built in pieces")?;
        for &x in &start[from..] {
            let x = x as usize + shift;
            into.push(u32::try_from(x).map_err(|_| "a trie level of more than u32 nodes".to_string())?);
        }
    }
    Ok(())
}

impl Interp<'_> {
    /// Runs `TrieBuild { arity }` in pieces of rows (see the module) and defines its
    /// levels `outs` in the host tier. Pieces start at a quarter of the device budget's
    /// worth of rows and halve when one does not fit; a row that alone does not fit is
    /// the error, with the bytes it needs.
    pub(super) fn trie_in_pieces(
        &mut self,
        arity: usize,
        arg_slots: &[usize],
        out_elems: &[Elem],
        outs: &[fox_kernel::BufId],
        what: &dyn Fn() -> String,
    ) -> Result<(), RuntimeError> {
        let kerr = |msg: String| RuntimeError::Kernel { at: what(), msg };
        if arity == 0 || arg_slots.len() != arity || outs.len() != 2 * arity - 1 || out_elems.len() != outs.len() {
            return Err(RuntimeError::Plan(format!(
                "{}: the columns or levels of a trie",
                what()
            )));
        }
        let kernel = Kernel::TrieBuild { arity };
        for &s in arg_slots {
            if matches!(self.tiers[s], Tier::Device) && !self.pinned[s] {
                self.evict(s).map_err(kerr)?;
            }
        }
        let mut cols = Vec::with_capacity(arity);
        for &s in arg_slots {
            cols.push(self.download_arg(s).map_err(|e| host_error(e, what))?);
        }
        let n = self.slot_buf(arg_slots[0]).len;
        // A row's columns and, at most, a node of every level with its start.
        let row_bytes: usize = 2 * out_elems.iter().map(|e| e.size()).sum::<usize>();
        let budget = self.device_cap.unwrap_or(u64::MAX).min(usize::MAX as u64) as usize;
        let mut rows = (budget / 4 / row_bytes.max(1)).clamp(1, n.max(1));
        let mut acc: Vec<HostCol> = out_elems
            .iter()
            .enumerate()
            .map(|(k, &e)| {
                if k % 2 == 1 {
                    HostCol::U32(vec![0])
                } else {
                    HostCol::empty(e)
                }
            })
            .collect();
        let mut pieces = 0u64;
        let mut a = 0;
        while a < n {
            self.check_cancel()?;
            let b = (a + rows).min(n);
            let parts = (0..arity).map(|_| Part::Rows(a, b)).collect();
            match self.launch_parts(&kernel, arg_slots, parts, out_elems, what) {
                Ok(levels) => {
                    let s = if a == 0 { 0 } else { shared_prefix(&cols, a - 1, a) };
                    join_levels(&mut acc, levels, s).map_err(kerr)?;
                    pieces += 1;
                    a = b;
                }
                Err(RuntimeError::Kernel { msg, .. }) if is_out_of_memory(&msg) && b - a > 1 => {
                    rows = ((b - a) / 2).max(1);
                }
                Err(RuntimeError::Kernel { msg, at }) if is_out_of_memory(&msg) => {
                    return Err(RuntimeError::Kernel {
                        at,
                        msg: format!(
                            "{msg}; the smallest piece of this trie (one row) needs {} on the device",
                            crate::alloc::bytes_text(row_bytes as u128)
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The levels of the trie of sorted, duplicate-free `rows` (as `TrieBuild` defines
    /// them), built directly.
    fn trie(rows: &[Vec<i32>], m: usize) -> Vec<HostCol> {
        let mut out = Vec::new();
        let mut prev_nodes: Vec<usize> = Vec::new();
        for d in 0..m {
            let nodes: Vec<usize> = (0..rows.len())
                .filter(|&i| i == 0 || rows[i][..=d] != rows[i - 1][..=d])
                .collect();
            if d > 0 {
                let mut start: Vec<u32> = prev_nodes
                    .iter()
                    .map(|&p| nodes.iter().filter(|&&x| x < p).count() as u32)
                    .collect();
                start.push(nodes.len() as u32);
                out.push(HostCol::U32(start));
            }
            out.push(HostCol::I32(nodes.iter().map(|&i| rows[i][d]).collect()));
            prev_nodes = nodes;
        }
        out
    }

    fn same(a: &[HostCol], b: &[HostCol]) -> bool {
        a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| match (x, y) {
                (HostCol::I32(x), HostCol::I32(y)) => x == y,
                (HostCol::U32(x), HostCol::U32(y)) => x == y,
                _ => false,
            })
    }

    #[test]
    fn levels_of_pieces_joined_at_any_cut_are_the_whole_tries() {
        let mut seed = 7u64;
        let mut next = |k: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) % k) as i32
        };
        for m in 1..=3 {
            for (n, k) in [(0, 3), (1, 3), (2, 1), (40, 3), (60, 5), (200, 40)] {
                let mut rows: Vec<Vec<i32>> = (0..n).map(|_| (0..m).map(|_| next(k)).collect()).collect();
                rows.sort();
                rows.dedup();
                let whole = trie(&rows, m);
                let cols: Vec<HostCol> = (0..m)
                    .map(|d| HostCol::I32(rows.iter().map(|r| r[d]).collect()))
                    .collect();
                for step in [1, 2, 3, 7, 64] {
                    let mut acc: Vec<HostCol> = (0..2 * m - 1)
                        .map(|k| {
                            if k % 2 == 1 {
                                HostCol::U32(vec![0])
                            } else {
                                HostCol::I32(vec![])
                            }
                        })
                        .collect();
                    let mut a = 0;
                    while a < rows.len() {
                        let b = (a + step).min(rows.len());
                        let s = if a == 0 { 0 } else { shared_prefix(&cols, a - 1, a) };
                        join_levels(&mut acc, trie(&rows[a..b], m), s).unwrap();
                        a = b;
                    }
                    assert!(same(&acc, &whole), "arity {m}, {} rows, pieces of {step}", rows.len());
                }
            }
        }
    }
}
