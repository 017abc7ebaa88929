//! A sort whose keys and permutation do not fit the device budget at once sorts runs:
//! chunks of rows are sorted on the device (`SortPerm`, then their keys gathered in that
//! order) and taken to the host, where the runs are merged; the permutation of the
//! whole is defined in the host tier. Ties keep row order (each run is stable, and the
//! merge takes the earlier run first), so the result is the one launch's permutation.
//! Runs that follow each other (rows already in order) are concatenated without a merge.

use super::*;
use std::cmp::Ordering;

/// How a column's values compare: by code, reversed, by string rank.
pub(super) struct KeyCol<'a> {
    col: &'a HostCol,
    desc: bool,
    rank: Option<&'a [u32]>,
}

fn cmp_f64(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.total_cmp(&b),
    }
}

impl<'a> KeyCol<'a> {
    /// A column compared by code, ascending.
    pub(super) fn plain(col: &'a HostCol) -> Self {
        KeyCol {
            col,
            desc: false,
            rank: None,
        }
    }

    pub(super) fn cmp(&self, i: usize, other: &KeyCol<'_>, j: usize) -> Ordering {
        let o = match (self.col, other.col) {
            (HostCol::U32(a), HostCol::U32(b)) => match self.rank {
                Some(r) => r
                    .get(a[i] as usize)
                    .unwrap_or(&u32::MAX)
                    .cmp(r.get(b[j] as usize).unwrap_or(&u32::MAX)),
                None => a[i].cmp(&b[j]),
            },
            (HostCol::U8(a), HostCol::U8(b)) => a[i].cmp(&b[j]),
            (HostCol::I32(a), HostCol::I32(b)) => a[i].cmp(&b[j]),
            (HostCol::I64(a), HostCol::I64(b)) => a[i].cmp(&b[j]),
            (HostCol::U64(a), HostCol::U64(b)) => a[i].cmp(&b[j]),
            (HostCol::I128(a), HostCol::I128(b)) => a[i].cmp(&b[j]),
            (HostCol::F64(a), HostCol::F64(b)) => cmp_f64(a[i], b[j]),
            _ => Ordering::Equal,
        };
        if self.desc {
            o.reverse()
        } else {
            o
        }
    }
}

/// A sorted run: its keys in order and the rows of the whole they come from.
pub(super) struct Run {
    pub(super) keys: Vec<HostCol>,
    pub(super) rows: Vec<u32>,
}

/// Merges sorted runs into the permutation of the whole: a binary heap of run heads,
/// ordered by key and then by run (stability).
pub(super) fn merge_runs(
    runs: &[Run],
    desc: &[bool],
    by_rank: &[bool],
    rank: Option<&[u32]>,
    n: usize,
) -> Result<Vec<u32>, String> {
    let views: Vec<Vec<KeyCol<'_>>> = runs
        .iter()
        .map(|r| {
            r.keys
                .iter()
                .enumerate()
                .map(|(k, col)| KeyCol {
                    col,
                    desc: desc.get(k).copied().unwrap_or(false),
                    rank: if by_rank.get(k).copied().unwrap_or(false) {
                        rank
                    } else {
                        None
                    },
                })
                .collect()
        })
        .collect();
    let less = |a: (usize, usize), b: (usize, usize)| -> bool {
        for (ka, kb) in views[a.0].iter().zip(&views[b.0]) {
            match ka.cmp(a.1, kb, b.1) {
                Ordering::Less => return true,
                Ordering::Greater => return false,
                Ordering::Equal => {}
            }
        }
        a.0 < b.0
    };
    let mut out = crate::alloc::try_with_capacity(n, "the permutation of a sort merged from runs")?;
    // Runs that follow each other (each one's last key not above the next one's first;
    // ties go to the earlier run anyway), as those of rows already in order are, merge
    // into their concatenation.
    let full: Vec<usize> = (0..runs.len()).filter(|&r| !runs[r].rows.is_empty()).collect();
    if full
        .windows(2)
        .all(|w| less((w[0], runs[w[0]].rows.len() - 1), (w[1], 0)))
    {
        for &r in &full {
            out.extend_from_slice(&runs[r].rows);
        }
        return Ok(out);
    }
    let mut pos = vec![0usize; runs.len()];
    let mut heap: Vec<usize> = (0..runs.len()).filter(|&r| !runs[r].rows.is_empty()).collect();
    let head = |pos: &[usize], r: usize| (r, pos[r]);
    // A binary min-heap of run indices by their heads.
    let sift_down = |heap: &mut Vec<usize>, pos: &[usize], mut i: usize| loop {
        let (l, r) = (2 * i + 1, 2 * i + 2);
        let mut m = i;
        if l < heap.len() && less(head(pos, heap[l]), head(pos, heap[m])) {
            m = l;
        }
        if r < heap.len() && less(head(pos, heap[r]), head(pos, heap[m])) {
            m = r;
        }
        if m == i {
            break;
        }
        heap.swap(i, m);
        i = m;
    };
    for i in (0..heap.len()).rev() {
        sift_down(&mut heap, &pos, i);
    }
    while let Some(&r) = heap.first() {
        out.push(runs[r].rows[pos[r]]);
        pos[r] += 1;
        if pos[r] == runs[r].rows.len() {
            let last = heap.pop().expect("non-empty");
            if heap.is_empty() {
                break;
            }
            heap[0] = last;
        }
        sift_down(&mut heap, &pos, 0);
    }
    Ok(out)
}

impl Interp<'_> {
    /// Runs `SortPerm` over runs of its rows (see the module) and defines its
    /// permutation `out` in the host tier. Runs start at a quarter of the device budget's
    /// worth of rows and halve while one does not fit, as far as `rows::may_halve` allows.
    pub(super) fn sort_in_runs(
        &mut self,
        kernel: &Kernel,
        arg_slots: &[usize],
        out: fox_kernel::BufId,
        what: &dyn Fn() -> String,
    ) -> Result<(), RuntimeError> {
        let Kernel::SortPerm { desc, by_rank } = kernel else {
            return Err(RuntimeError::Plan(format!("{}: only a sort runs in runs", what())));
        };
        let nkeys = desc.len();
        if nkeys == 0 || arg_slots.len() < nkeys {
            return Err(RuntimeError::Plan(format!("{}: a sort without keys", what())));
        }
        let kerr = |msg: String| RuntimeError::Kernel { at: what(), msg };
        let rank: Option<HostCol> = match arg_slots.get(nkeys) {
            Some(&s) => Some(self.download_arg(s).map_err(|e| host_error(e, what))?),
            None => None,
        };
        let rank = match &rank {
            Some(HostCol::U32(r)) => Some(r.as_slice()),
            Some(_) => return Err(RuntimeError::Plan(format!("{}: the rank table is not U32", what()))),
            None => None,
        };
        let n = self.slot_buf(arg_slots[0]).len;
        if n > u32::MAX as usize {
            return Err(kerr(format!("{n} rows are more than a permutation can index")));
        }
        // Keys (sliced and gathered), the run's permutation and a temporary of its size.
        let row_bytes: usize = arg_slots[..nkeys]
            .iter()
            .map(|&s| 2 * self.slot_buf(s).elem.size())
            .sum::<usize>()
            + 8;
        let budget = self.device_cap.unwrap_or(u64::MAX).min(usize::MAX as u64) as usize;
        let mut chunk = (budget / 4 / row_bytes).clamp(1, n.max(1));
        // A rank table of more than a quarter of the budget is not read by the runs: the
        // keys sorted by rank are put in rank order on the host (each code replaced by
        // its rank, as the comparison by rank reads it), and the runs sort those plainly.
        let mut ranked: Vec<usize> = Vec::new();
        let by_ranks = match rank {
            Some(r) if r.len().saturating_mul(4).saturating_mul(4) > budget => {
                let res = self.ranked_keys(arg_slots, by_rank, r, what, &mut ranked);
                if let Err(e) = res {
                    for s in ranked {
                        self.drop_temp_slot(s);
                    }
                    return Err(e);
                }
                res.ok()
            }
            _ => None,
        };
        let no_ranks = vec![false; nkeys];
        let plain = Kernel::SortPerm {
            desc: desc.clone(),
            by_rank: no_ranks.clone(),
        };
        let (kernel, arg_slots, by_rank, rank) = match &by_ranks {
            Some(slots) => (&plain, slots.as_slice(), &no_ranks[..], None),
            None => (kernel, arg_slots, &by_rank[..], rank),
        };
        let aligned: Vec<bool> = (0..arg_slots.len()).map(|i| i < nkeys).collect();
        let mut runs: Vec<Run> = Vec::new();
        let mut a = 0;
        let mut failed = None;
        while a < n {
            let b = (a + chunk).min(n);
            match self.sort_run(kernel, arg_slots, &aligned, a, b, what) {
                Ok(run) => {
                    runs.push(run);
                    a = b;
                }
                Err(RuntimeError::Kernel { msg, .. }) if is_out_of_memory(&msg) && rows::may_halve(chunk, n) => {
                    chunk /= 2;
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        for s in ranked {
            self.drop_temp_slot(s);
        }
        if let Some(e) = failed {
            return Err(e);
        }
        self.note_pieces(runs.len() as u64);
        let perm = merge_runs(&runs, desc, by_rank, rank, n).map_err(kerr)?;
        drop(runs);
        self.define_in_host_tier(out.0 as usize, HostCol::U32(perm));
        Ok(())
    }

    /// The key slots of a sort with each key sorted by rank replaced by its ranks (each
    /// code's rank in `rank`, `u32::MAX` beyond it, as [`KeyCol`] compares), made on the
    /// host and held in the host tier in slots pushed to `temps`.
    fn ranked_keys(
        &mut self,
        arg_slots: &[usize],
        by_rank: &[bool],
        rank: &[u32],
        what: &dyn Fn() -> String,
        temps: &mut Vec<usize>,
    ) -> Result<Vec<usize>, RuntimeError> {
        use rayon::prelude::*;
        let mut slots = arg_slots[..by_rank.len()].to_vec();
        for (k, _) in by_rank.iter().enumerate().filter(|(_, &r)| r) {
            let codes = match self.download_arg(slots[k]) {
                Ok(HostCol::U32(v)) => v,
                Ok(_) => {
                    return Err(RuntimeError::Plan(format!(
                        "{}: a key sorted by rank is not U32",
                        what()
                    )))
                }
                Err(HostError::Run(e)) => return Err(e),
                Err(HostError::Plan(m)) | Err(HostError::Kernel(m)) => {
                    return Err(RuntimeError::Kernel { at: what(), msg: m })
                }
            };
            let ranks: Vec<u32> = crate::alloc::try_par_collect(
                codes
                    .par_iter()
                    .map(|&c| rank.get(c as usize).copied().unwrap_or(u32::MAX)),
                "the ranks of a sort's keys",
            )
            .map_err(|msg| RuntimeError::Kernel { at: what(), msg })?;
            let t = self.host_temp_slot(HostCol::U32(ranks));
            temps.push(t);
            slots[k] = t;
        }
        Ok(slots)
    }

    /// One run: rows `a..b` sorted on the device, its keys gathered in order; both taken
    /// to the host.
    fn sort_run(
        &mut self,
        kernel: &Kernel,
        arg_slots: &[usize],
        aligned: &[bool],
        a: usize,
        b: usize,
        what: &dyn Fn() -> String,
    ) -> Result<Run, RuntimeError> {
        let nkeys = aligned.iter().filter(|&&x| x).count();
        let mut temps: Vec<usize> = Vec::new();
        let res = (|| {
            let args = self.chunk_args(arg_slots, aligned, a, b, what, &mut temps)?;
            let perm = self.launch_evicting(kernel, &args, &[Elem::U32], what)?;
            let perm = self.one_column(perm, "a sort returned", what)?;
            let p = self.temp_slot(perm);
            temps.push(p);
            let mut keys = Vec::with_capacity(nkeys);
            for k in 0..nkeys {
                let elem = self.slot_buf(args[k]).elem;
                let mut g = self.launch_evicting(&Kernel::Gather { shift: 0 }, &[p, args[k]], &[elem], what)?;
                let Some(g) = g.pop() else {
                    return Err(RuntimeError::Plan(format!("{}: a gather returned no column", what())));
                };
                let t = Instant::now();
                let col = self.backend.take(g);
                self.stats.download += t.elapsed();
                keys.push(col.map_err(|e| RuntimeError::Kernel { at: what(), msg: e.0 })?);
            }
            let rows = match self.download_arg(p) {
                Ok(HostCol::U32(v)) => v.into_iter().map(|r| r + a as u32).collect(),
                Ok(_) => return Err(RuntimeError::Plan(format!("{}: a permutation is not U32", what()))),
                Err(HostError::Run(e)) => return Err(e),
                Err(HostError::Plan(m)) | Err(HostError::Kernel(m)) => {
                    return Err(RuntimeError::Kernel { at: what(), msg: m })
                }
            };
            Ok(Run { keys, rows })
        })();
        for s in temps {
            self.drop_temp_slot(s);
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stable permutation that sorts `keys` on the host, one comparison at a time.
    fn reference(keys: &[HostCol], desc: &[bool], by_rank: &[bool], rank: Option<&[u32]>) -> Vec<u32> {
        let n = keys[0].len();
        let cols: Vec<KeyCol<'_>> = keys
            .iter()
            .enumerate()
            .map(|(k, col)| KeyCol {
                col,
                desc: desc[k],
                rank: if by_rank[k] { rank } else { None },
            })
            .collect();
        let mut perm: Vec<u32> = (0..n as u32).collect();
        perm.sort_by(|&a, &b| {
            for c in &cols {
                match c.cmp(a as usize, c, b as usize) {
                    Ordering::Equal => {}
                    o => return o,
                }
            }
            Ordering::Equal
        });
        perm
    }

    /// Runs of `len` rows, each sorted by the reference, merged.
    fn merged(keys: &[HostCol], len: usize, desc: &[bool], by_rank: &[bool], rank: Option<&[u32]>) -> Vec<u32> {
        let n = keys[0].len();
        let mut runs = Vec::new();
        let mut a = 0;
        while a < n {
            let b = (a + len).min(n);
            let part: Vec<HostCol> = keys
                .iter()
                .map(|k| crate::interp::rows::host_slice_for_tests(k, a, b))
                .collect();
            let p = reference(&part, desc, by_rank, rank);
            let sorted: Vec<HostCol> = part
                .iter()
                .map(|c| match c {
                    HostCol::I32(v) => HostCol::I32(p.iter().map(|&i| v[i as usize]).collect()),
                    HostCol::F64(v) => HostCol::F64(p.iter().map(|&i| v[i as usize]).collect()),
                    HostCol::U32(v) => HostCol::U32(p.iter().map(|&i| v[i as usize]).collect()),
                    _ => unreachable!(),
                })
                .collect();
            runs.push(Run {
                keys: sorted,
                rows: p.iter().map(|&i| i + a as u32).collect(),
            });
            a = b;
        }
        merge_runs(&runs, desc, by_rank, rank, n).unwrap()
    }

    #[test]
    fn merged_runs_give_the_permutation_of_one_stable_sort() {
        let mut seed = 7u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as u32
        };
        let n = 1000;
        let a = HostCol::I32((0..n).map(|_| (next() % 5) as i32 - 2).collect());
        let specials = [f64::NAN, -0.0, 0.0, 1.5, -3.0, f64::INFINITY];
        let f = HostCol::F64((0..n).map(|_| specials[(next() % 6) as usize]).collect());
        let s = HostCol::U32((0..n).map(|_| next() % 4).collect());
        let rank = [3u32, 0, 2, 1];
        for (desc, by_rank) in [
            (vec![false, false, false], vec![false, false, false]),
            (vec![true, false, true], vec![false, false, true]),
            (vec![false, true, false], vec![false, false, true]),
        ] {
            let keys = [a.clone(), f.clone(), s.clone()];
            let want = reference(&keys, &desc, &by_rank, Some(&rank));
            for len in [1, 7, 64, 999, 1000, 5000] {
                assert_eq!(merged(&keys, len, &desc, &by_rank, Some(&rank)), want, "runs of {len}");
            }
        }
        // Rows already in order, and runs that follow each other though not in row
        // order: their concatenation.
        let sorted = [HostCol::I32((0..n).map(|i| i / 3).collect())];
        assert_eq!(
            merged(&sorted, 64, &[false], &[false], None),
            (0..n as u32).collect::<Vec<u32>>()
        );
        let blocks = [HostCol::I32((0..n).map(|i| (i / 100) * 100 + 99 - i % 100).collect())];
        let want = reference(&blocks, &[false], &[false], None);
        assert_eq!(merged(&blocks, 100, &[false], &[false], None), want);
        assert_eq!(merged(&blocks, 64, &[false], &[false], None), want);
        // Empty input, all equal keys (ties in row order).
        assert!(merge_runs(&[], &[false], &[false], None, 0).unwrap().is_empty());
        let same = [HostCol::I32(vec![4; 50])];
        assert_eq!(
            merged(&same, 8, &[false], &[false], None),
            (0..50).collect::<Vec<u32>>()
        );
    }
}
