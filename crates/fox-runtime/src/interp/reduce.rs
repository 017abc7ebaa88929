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
//! `FusedReduce` with keys (its rows in any order) runs over chunks of rows, in one of
//! two ways, each giving the one launch's output byte for byte:
//! - When its aggregates combine exactly once each average of int32, int64 or decimal
//!   values is carried as an exact sum (a 38-digit decimal) and a count of rows
//!   ([`split_averages`]), each chunk's groups (sorted on the keys) are merged on the
//!   host into one order of the keys (stable: a key's partial rows in chunk order), a
//!   `ReduceByKey` of the combining aggregates, itself in pieces, gives one row per
//!   group, and each average is then its sum over its count, rounded as one launch
//!   rounds ([`finish_averages`], `fox_kernel::finish_int_sum`, the division the
//!   multi-device plan makes of partial averages). An error of an expression names
//!   the row one launch names: of the whole input for the filter, of the rows it keeps
//!   (counted in every chunk) for an aggregate's value.
//! - Otherwise (float sums and averages, whose value depends on the order of the
//!   additions, and averages of 38-digit decimals) each chunk runs the kernel's
//!   expansion up to its `ReduceByKey` (`fox_kernel::expand`: the filter, the
//!   compaction, the values, sorted on the keys stably), the chunks' rows are merged on
//!   the host (a key's rows in chunk order, which is their order in the input, as one
//!   launch's stable sort leaves them) and the expansion's `ReduceByKey` runs over
//!   pieces cut at group boundaries. Each group is so aggregated whole and in the order
//!   one launch adds it (on both backends a float group's values one after the other in
//!   row order, from -0.0). A float group larger than a piece is the out-of-memory error
//!   naming it: its sum would have to carry from piece to piece, which no kernel does.
//!   An error of a step names the row of the whole the one launch's expansion names.

use super::joins::{cmp_rows, piece_end};
use super::rows::{combined, host_append, Part};
use super::sort::{merge_runs, Run};
use super::*;
use fox_kernel::{finish_int_sum, scale_of, AggSpec, Operand};
use fox_sema::core::AggFunc;
use std::cmp::Ordering;

/// The key columns, the row-aligned arguments and the aggregates of a keyed aggregation
/// that runs in pieces here; `None` for another kernel.
pub(super) fn keyed(kernel: &Kernel, n_args: usize) -> Option<(usize, usize)> {
    match kernel {
        Kernel::ReduceByKey { nkeys, aggs } if *nkeys >= 1 => {
            let aligned = nkeys + aggs.iter().filter(|a| a.input.is_some()).count();
            (aligned <= n_args).then_some((*nkeys, aligned))
        }
        Kernel::FusedReduce { nkeys, n_cols, .. } if *nkeys >= 1 && *n_cols <= n_args && *nkeys <= *n_cols => {
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
            keys.push(self.download_arg(s).map_err(|e| host_error(e, what))?);
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
        // Every argument of a combining launch is a column of the host (the slots beside
        // them are not read).
        let unread = vec![arg_slots[0]; out_elems.len()];
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
            // The partial rows are combined once they are as many as a piece's rows, into
            // one, so that no combining launch reads more rows than a piece (the smaller
            // the pieces, the more partial rows): the rows are combined in their order,
            // as one launch over all of them would.
            if x < b && partial[0].len() >= chunk.max(2) {
                let parts = std::mem::take(&mut partial).into_iter().map(Part::Col).collect();
                partial = self.launch_parts(combine, &unread, parts, out_elems, what)?;
            }
        }
        let parts = partial.into_iter().map(Part::Col).collect();
        self.launch_parts(combine, &unread, parts, out_elems, what)
    }

    /// `FusedReduce` with keys in pieces (see the module): over chunks of rows merged
    /// and combined where its aggregates, averages carried as sums and counts, combine
    /// exactly ([`split_averages`]); otherwise over the chunks' evaluated rows, sorted
    /// and aggregated a group at a time. Its output columns.
    fn fused_in_chunks(
        &mut self,
        kernel: &Kernel,
        arg_slots: &[usize],
        out_elems: &[Elem],
        what: &dyn Fn() -> String,
    ) -> Result<Vec<HostCol>, RuntimeError> {
        let kerr = |msg: String| RuntimeError::Kernel { at: what(), msg };
        let Some((nkeys, n_cols)) = keyed(kernel, arg_slots.len()) else {
            return Err(RuntimeError::Plan(format!("{}: not an aggregation by key", what())));
        };
        for &s in &arg_slots[..n_cols] {
            if matches!(self.tiers[s], Tier::Device) && !self.pinned[s] {
                self.evict(s).map_err(kerr)?;
            }
        }
        match split_averages(kernel) {
            Some(split) => {
                let partial = self.fused_partials(&split, arg_slots, nkeys, n_cols, &out_elems[..nkeys], what)?;
                finish_averages(kernel, partial, nkeys, &split.avgs).map_err(kerr)
            }
            None => self.fused_rows(kernel, arg_slots, nkeys, n_cols, out_elems, what),
        }
    }

    /// The chunk kernel of `split` over chunks of rows, the chunks' groups merged and
    /// combined: the keys, then one combined column per aggregate of the chunk kernel.
    fn fused_partials(
        &mut self,
        split: &Split,
        arg_slots: &[usize],
        nkeys: usize,
        n_cols: usize,
        key_elems: &[Elem],
        what: &dyn Fn() -> String,
    ) -> Result<Vec<HostCol>, RuntimeError> {
        let kerr = |msg: String| RuntimeError::Kernel { at: what(), msg };
        let kernel = &split.chunk;
        let combine = Kernel::ReduceByKey {
            nkeys,
            aggs: split.combine.clone(),
        };
        let out_elems: Vec<Elem> = key_elems
            .iter()
            .copied()
            .chain(split.combine.iter().map(|a| Elem::of(a.output)))
            .collect();
        let n = self.slot_buf(arg_slots[0]).len;
        let row_bytes: usize = arg_slots[..n_cols]
            .iter()
            .map(|&s| self.slot_buf(s).elem.size())
            .chain(out_elems.iter().map(|e| e.size()))
            .sum::<usize>()
            .max(1);
        let budget = self.device_cap.unwrap_or(u64::MAX).min(usize::MAX as u64) as usize;
        let mut chunk = (budget / 4 / row_bytes).clamp(1, n.max(1));
        let mut chunks = Chunks::new(nkeys, out_elems.iter().map(|&e| HostCol::empty(e)).collect());
        // The rows that pass the filter before row `a`.
        let mut kept = 0usize;
        let mut a = 0;
        while a < n {
            self.check_cancel()?;
            let b = (a + chunk).min(n);
            let parts = (0..arg_slots.len())
                .map(|i| if i < n_cols { Part::Rows(a, b) } else { Part::Whole })
                .collect();
            match self.launch_parts(kernel, arg_slots, parts, &out_elems, what) {
                Ok(cols) => {
                    if let Some(HostCol::I64(counts)) = cols.last() {
                        kept += counts.iter().sum::<i64>() as usize;
                    }
                    chunks.push(cols, "the keys of a chunk's groups").map_err(kerr)?;
                    a = b;
                }
                Err(RuntimeError::Kernel { msg, .. }) if is_out_of_memory(&msg) && rows::may_halve(chunk, n) => {
                    chunk /= 2;
                }
                // The filter names a row of the whole input; an aggregate's value, as the
                // expansion evaluates it, a row of those the filter keeps.
                Err(RuntimeError::Kernel { msg, at }) => {
                    let base = if msg.contains(": the filter: ") { a } else { kept };
                    return Err(RuntimeError::Kernel {
                        msg: rows::rebase_row(msg, base),
                        at,
                    });
                }
                Err(e) => return Err(e),
            }
        }
        // The partial rows in the order of their keys, aggregated again by key.
        self.reduce_chunks(chunks, &combine, &out_elems, what)
    }

    /// A keyed `FusedReduce` over chunks of rows as its expansion (`fox_kernel::expand`):
    /// each chunk's rows that pass the filter, with their keys and values sorted on the
    /// keys (stably), kept on the host; the chunks merged (a key's rows in chunk order,
    /// so every group's rows are in the order one launch sorts them in) and the
    /// expansion's `ReduceByKey` run over pieces cut at group boundaries, each group
    /// aggregated whole. Its output columns.
    fn fused_rows(
        &mut self,
        kernel: &Kernel,
        arg_slots: &[usize],
        nkeys: usize,
        n_cols: usize,
        out_elems: &[Elem],
        what: &dyn Fn() -> String,
    ) -> Result<Vec<HostCol>, RuntimeError> {
        let kerr = |msg: String| RuntimeError::Kernel { at: what(), msg };
        let plan_err = |m: &str| RuntimeError::Plan(format!("{}: {m}", what()));
        let exp = fox_kernel::expand(kernel, arg_slots.len()).ok_or_else(|| plan_err("not a composite kernel"))?;
        // The steps before the expansion's last, a `ReduceByKey` reading all the outputs
        // of the step before it (the keys and values, sorted).
        let (reduce, steps) = exp.steps.split_last().ok_or_else(|| plan_err("an empty expansion"))?;
        let width = reduce.args.len();
        let reads_last = steps.len().checked_sub(1).is_some_and(|l| {
            steps[l].outs == width
                && reduce
                    .args
                    .iter()
                    .enumerate()
                    .all(|(out, o)| *o == Operand::Out { step: l, out })
        });
        if !matches!(reduce.kernel, Kernel::ReduceByKey { .. }) || !reads_last || width < nkeys {
            return Err(plan_err(
                "the expansion of a keyed FusedReduce does not end in sorted rows reduced by key",
            ));
        }
        let n = self.slot_buf(arg_slots[0]).len;
        // A chunk's arguments, its kept rows, their values and their sorted copies.
        let in_bytes: usize = arg_slots[..n_cols].iter().map(|&s| self.slot_buf(s).elem.size()).sum();
        let out_bytes: usize = out_elems.iter().map(|e| e.size()).sum();
        let row_bytes = (2 * in_bytes + 2 * out_bytes + 5).max(1);
        let budget = self.device_cap.unwrap_or(u64::MAX).min(usize::MAX as u64) as usize;
        let mut chunk = (budget / 4 / row_bytes).clamp(1, n.max(1));
        let mut chunks = Chunks::new(nkeys, Vec::new());
        let mut a = 0;
        while a < n {
            self.check_cancel()?;
            let b = (a + chunk).min(n);
            let mut temps = Vec::new();
            let res = self.chunk_steps(kernel, steps, arg_slots, n_cols, (a, b), chunks.total, what, &mut temps);
            for t in temps {
                self.drop_temp_slot(t);
            }
            match res {
                Ok(cols) => {
                    chunks.push(cols, "the keys of a chunk's rows").map_err(kerr)?;
                    a = b;
                }
                Err(RuntimeError::Kernel { msg, .. }) if is_out_of_memory(&msg) && rows::may_halve(chunk, n) => {
                    chunk /= 2;
                }
                Err(e) => return Err(e),
            }
        }
        self.reduce_chunks(chunks, &reduce.kernel, out_elems, what)
    }

    /// The rows of `chunks` merged into the order of their keys (a key's rows in chunk
    /// order) and reduced by `reduce` in pieces at group boundaries; no columns
    /// gathered (no chunk ran): no groups.
    fn reduce_chunks(
        &mut self,
        chunks: Chunks,
        reduce: &Kernel,
        out_elems: &[Elem],
        what: &dyn Fn() -> String,
    ) -> Result<Vec<HostCol>, RuntimeError> {
        self.note_pieces(chunks.runs.len() as u64);
        if chunks.cols.is_empty() {
            return Ok(out_elems.iter().map(|&e| HostCol::empty(e)).collect());
        }
        let sorted = merge_chunks(chunks.cols, &chunks.runs, chunks.nkeys, chunks.total)
            .map_err(|msg| RuntimeError::Kernel { at: what(), msg })?;
        let temps: Vec<usize> = sorted.into_iter().map(|c| self.host_temp_slot(c)).collect();
        let res = self.reduce_in_groups(reduce, &temps, out_elems, what);
        for t in temps {
            self.drop_temp_slot(t);
        }
        res
    }

    /// The steps `steps` of a composite `kernel`'s expansion on rows `a..b` of its first
    /// `n_cols` arguments (the others whole): the last step's outputs, on the host. Its
    /// temporary slots are recorded in `temps` for the caller to drop. An error of a step
    /// is the composite's, as `launch_kernel` reports it, naming a row of the whole: of
    /// its rows for the filter, of the rows it keeps (`kept` of them before row `a`)
    /// after the filter.
    #[allow(clippy::too_many_arguments)]
    fn chunk_steps(
        &mut self,
        kernel: &Kernel,
        steps: &[fox_kernel::Step],
        arg_slots: &[usize],
        n_cols: usize,
        (a, b): (usize, usize),
        kept: usize,
        what: &dyn Fn() -> String,
        temps: &mut Vec<usize>,
    ) -> Result<Vec<HostCol>, RuntimeError> {
        let parts = (0..arg_slots.len())
            .map(|i| if i < n_cols { Part::Rows(a, b) } else { Part::Whole })
            .collect();
        let args = self.part_args(arg_slots, parts, what, temps)?;
        let compact = steps.iter().position(|s| matches!(s.kernel, Kernel::Compact));
        let broken = || RuntimeError::Plan(format!("{}: an expansion reads a value it has not computed", what()));
        let mut outs: Vec<Vec<usize>> = Vec::with_capacity(steps.len());
        for (i, s) in steps.iter().enumerate() {
            let slots = s
                .args
                .iter()
                .map(|o| match *o {
                    Operand::Arg(k) => args.get(k).copied(),
                    Operand::Out { step, out } => outs.get(step).and_then(|o| o.get(out)).copied(),
                })
                .collect::<Option<Vec<usize>>>()
                .ok_or_else(broken)?;
            let shapes: Vec<(Elem, usize)> = slots
                .iter()
                .map(|&x| {
                    let buf = self.slot_buf(x);
                    (buf.elem, buf.len)
                })
                .collect();
            let elems = fox_kernel::check_args(&s.kernel, &shapes, &self.plan.inputs)
                .map_err(|m| RuntimeError::Plan(format!("{}: {m}", what())))?;
            let got = self
                .launch_evicting(&s.kernel, &slots, &elems, what)
                .map_err(|e| match e {
                    RuntimeError::Kernel { at, msg } => {
                        let prefix = format!("kernel {}: ", s.kernel.name());
                        let rest = msg.strip_prefix(&prefix).unwrap_or(&msg);
                        let msg = format!("kernel {}: {}{rest}", kernel.name(), s.context);
                        let base = if compact.is_some_and(|c| i > c) { kept } else { a };
                        RuntimeError::Kernel {
                            at,
                            msg: rows::rebase_row(msg, base),
                        }
                    }
                    e => e,
                })?;
            if i + 1 == steps.len() {
                return self.take_all(got, what);
            }
            outs.push(
                got.into_iter()
                    .map(|buf| {
                        let t = self.temp_slot(buf);
                        temps.push(t);
                        t
                    })
                    .collect(),
            );
        }
        Err(broken())
    }
}

/// The rows of a keyed `FusedReduce`'s chunks, `cols` (each chunk's rows `runs` of them,
/// sorted on the first `nkeys` columns), in the order of the keys: stably, a key's rows
/// in chunk order.
/// The outputs of the chunks of a keyed aggregation on the host: their columns in chunk
/// order (the keys first, sorted within each chunk) and each chunk's run of keys.
struct Chunks {
    nkeys: usize,
    /// The columns so far: those given to [`Chunks::new`] (empty columns, or none, which
    /// the first chunk's columns then replace) with every chunk's rows appended.
    cols: Vec<HostCol>,
    runs: Vec<Run>,
    /// The rows of all chunks.
    total: usize,
}

impl Chunks {
    fn new(nkeys: usize, cols: Vec<HostCol>) -> Chunks {
        Chunks {
            nkeys,
            cols,
            runs: Vec::new(),
            total: 0,
        }
    }

    /// Adds a chunk's output columns; `what` names its keys' copy for an out-of-memory
    /// error.
    fn push(&mut self, cols: Vec<HostCol>, what: &str) -> Result<(), String> {
        let len = cols.first().map_or(0, HostCol::len);
        let keys = cols[..self.nkeys]
            .iter()
            .map(|c| c.try_clone(what))
            .collect::<Result<Vec<_>, _>>()?;
        self.runs.push(Run {
            keys,
            rows: (self.total as u32..(self.total + len) as u32).collect(),
        });
        self.total += len;
        if self.cols.is_empty() {
            self.cols = cols;
        } else {
            for (x, c) in self.cols.iter_mut().zip(cols) {
                host_append(x, c)?;
            }
        }
        Ok(())
    }
}

fn merge_chunks(cols: Vec<HostCol>, runs: &[Run], nkeys: usize, total: usize) -> Result<Vec<HostCol>, String> {
    if total > u32::MAX as usize {
        return Err(format!("{total} rows of chunks are more than a permutation can index"));
    }
    let plain = vec![false; nkeys];
    let perm = merge_runs(runs, &plain, &plain, None, total)?;
    let mut sorted = Vec::with_capacity(cols.len());
    for col in cols {
        sorted.push(rows::gather_host(&col, &perm)?);
    }
    Ok(sorted)
}

/// A keyed `FusedReduce` whose chunks' partial rows combine exactly.
pub(super) struct Split {
    /// The kernel each chunk runs: the `FusedReduce` with each average of int32, int64
    /// or decimal values as the exact sum of its values (a 38-digit decimal of the
    /// values' scale; integers cast to a decimal of scale 0, int64 to a 38-digit one so
    /// that every value converts) and a count of the rows last (the averages' divisor,
    /// and the rows a chunk keeps, which the rows errors name are counted in).
    pub(super) chunk: Kernel,
    /// The aggregates that combine the chunk kernel's partial rows ([`combined`]).
    pub(super) combine: Vec<AggSpec>,
    /// For each aggregate of the kernel, an average's input and output scales and output
    /// type.
    pub(super) avgs: Vec<Option<(u32, u32, Type)>>,
}

/// The [`Split`] of a keyed `FusedReduce`, or `None` when its aggregates do not combine
/// exactly (float sums and averages, whose additions depend on their order, averages of
/// 38-digit decimals, and what [`combined`] refuses). The averages are carried as a
/// sum and a count and divided once all rows are combined, as the multi-device plan
/// does for partial averages (`fox_kernel::lower`'s `partial_averages`), with the
/// division of one launch ([`fox_kernel::finish_int_sum`]).
pub(super) fn split_averages(kernel: &Kernel) -> Option<Split> {
    let Kernel::FusedReduce {
        filter,
        nkeys,
        aggs,
        exprs,
        n_cols,
    } = kernel
    else {
        return None;
    };
    if aggs.len() != exprs.len() {
        return None;
    }
    let mut chunk_aggs = Vec::with_capacity(aggs.len() + 1);
    let mut chunk_exprs = Vec::with_capacity(aggs.len() + 1);
    let mut avgs = Vec::with_capacity(aggs.len());
    for (a, e) in aggs.iter().zip(exprs) {
        if a.func != AggFunc::Avg {
            chunk_aggs.push(a.clone());
            chunk_exprs.push(e.clone());
            avgs.push(None);
            continue;
        }
        let (e, so) = (e.as_ref()?, scale_of(a.output)?);
        if !matches!(a.output, Type::Decimal(_)) || a.input != Some(e.ty) {
            return None;
        }
        let (value, si) = match e.ty {
            Type::Int32 | Type::Int64 => {
                let ty = if e.ty == Type::Int32 {
                    Type::Decimal(0)
                } else {
                    Type::WideDecimal(0)
                };
                let cast = KExpr {
                    kind: KExprKind::Cast(Box::new(e.clone())),
                    ty,
                };
                (cast, 0)
            }
            Type::Decimal(s) => (e.clone(), u32::from(s)),
            _ => return None,
        };
        chunk_aggs.push(AggSpec {
            func: AggFunc::Sum,
            input: Some(value.ty),
            output: Type::WideDecimal(si as u8),
        });
        chunk_exprs.push(Some(value));
        avgs.push(Some((si, so, a.output)));
    }
    chunk_aggs.push(AggSpec {
        func: AggFunc::Count,
        input: None,
        output: Type::Int64,
    });
    chunk_exprs.push(None);
    let combine = combined(&chunk_aggs)?;
    Some(Split {
        chunk: Kernel::FusedReduce {
            filter: filter.clone(),
            nkeys: *nkeys,
            aggs: chunk_aggs,
            exprs: chunk_exprs,
            n_cols: *n_cols,
        },
        combine,
        avgs,
    })
}

/// The output columns of a keyed `FusedReduce` from the combined partial rows of its
/// [`Split`] (`cols`: the keys, one column per aggregate of the chunk kernel, the count
/// of rows last, dropped): each average its sum over the count at its scale, rounded half away from zero ([`fox_kernel::finish_int_sum`]); one out of its
/// type's range is the error one launch gives (naming the first of the group's rows in
/// key order).
pub(super) fn finish_averages(
    kernel: &Kernel,
    mut cols: Vec<HostCol>,
    nkeys: usize,
    avgs: &[Option<(u32, u32, Type)>],
) -> Result<Vec<HostCol>, String> {
    let malformed = || "the partial rows of an aggregation in pieces are malformed".to_string();
    let Some(HostCol::I64(counts)) = cols.pop() else {
        return Err(malformed());
    };
    if cols.len() != nkeys + avgs.len() {
        return Err(malformed());
    }
    for (k, avg) in avgs.iter().enumerate() {
        let Some((si, so, ty)) = *avg else {
            continue;
        };
        let HostCol::I128(sums) = &cols[nkeys + k] else {
            return Err(malformed());
        };
        if sums.len() != counts.len() {
            return Err(malformed());
        }
        let mut out = crate::alloc::try_with_capacity(sums.len(), "the averages of groups")?;
        let mut start = 0i128;
        for (&sum, &count) in sums.iter().zip(&counts) {
            match finish_int_sum(true, si, so, sum, i128::from(count))
                .filter(|v| v.unsigned_abs() <= MAX_DECIMAL.unsigned_abs())
            {
                Some(v) => out.push(v as i64),
                None => {
                    return Err(format!(
                        "kernel {}: the average of the group at row {start} does not fit {ty}",
                        kernel.name()
                    ))
                }
            }
            start += i128::from(count);
        }
        cols[nkeys + k] = HostCol::I64(out);
    }
    Ok(cols)
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

    fn col(i: usize, ty: Type) -> KExpr {
        KExpr {
            kind: KExprKind::Col(i),
            ty,
        }
    }

    fn spec(func: AggFunc, input: Option<Type>, output: Type) -> AggSpec {
        AggSpec { func, input, output }
    }

    fn fused(aggs: Vec<(AggSpec, Option<KExpr>)>) -> Kernel {
        let (aggs, exprs) = aggs.into_iter().unzip();
        Kernel::FusedReduce {
            filter: None,
            nkeys: 1,
            aggs,
            exprs,
            n_cols: 5,
        }
    }

    #[test]
    fn averages_of_integers_and_decimals_split_into_exact_sums_and_one_count() {
        let (i32t, i64t, d2) = (Type::Int32, Type::Int64, Type::Decimal(2));
        let kernel = fused(vec![
            (spec(AggFunc::Avg, Some(i32t), Type::Decimal(6)), Some(col(1, i32t))),
            (spec(AggFunc::Sum, Some(d2), Type::WideDecimal(2)), Some(col(3, d2))),
            (spec(AggFunc::Count, None, Type::Int64), None),
            (spec(AggFunc::Avg, Some(d2), Type::Decimal(6)), Some(col(3, d2))),
            (spec(AggFunc::Avg, Some(i64t), Type::Decimal(6)), Some(col(2, i64t))),
            (spec(AggFunc::Min, Some(i32t), i32t), Some(col(1, i32t))),
        ]);
        let split = split_averages(&kernel).unwrap();
        let Kernel::FusedReduce { aggs, exprs, .. } = &split.chunk else {
            panic!("{:?}", split.chunk)
        };
        let funcs: Vec<(AggFunc, Option<Type>, Type)> = aggs.iter().map(|a| (a.func, a.input, a.output)).collect();
        assert_eq!(
            funcs,
            [
                (AggFunc::Sum, Some(Type::Decimal(0)), Type::WideDecimal(0)),
                (AggFunc::Sum, Some(d2), Type::WideDecimal(2)),
                (AggFunc::Count, None, Type::Int64),
                (AggFunc::Sum, Some(d2), Type::WideDecimal(2)),
                (AggFunc::Sum, Some(Type::WideDecimal(0)), Type::WideDecimal(0)),
                (AggFunc::Min, Some(i32t), i32t),
                (AggFunc::Count, None, Type::Int64),
            ]
        );
        assert!(matches!(&exprs[0], Some(KExpr { kind: KExprKind::Cast(x), .. }) if **x == col(1, i32t)));
        assert_eq!(exprs[3], Some(col(3, d2)));
        assert_eq!(exprs[6], None);
        assert_eq!(
            split.avgs,
            [
                Some((0, 6, Type::Decimal(6))),
                None,
                None,
                Some((2, 6, Type::Decimal(6))),
                Some((0, 6, Type::Decimal(6))),
                None
            ]
        );
        // The chunk kernel keeps the kernel contract, and its partial rows combine.
        let args = [Elem::I32, Elem::I32, Elem::I64, Elem::I64, Elem::U32];
        let outs = fox_kernel::kernel_outputs(&split.chunk, &args, &[]).unwrap();
        assert_eq!(
            outs[1..],
            [
                Elem::I128,
                Elem::I128,
                Elem::I64,
                Elem::I128,
                Elem::I128,
                Elem::I32,
                Elem::I64
            ]
        );
        assert_eq!(split.combine, combined(aggs).unwrap());
        // Without averages the kernel's aggregates and a count of rows.
        let sum = (spec(AggFunc::Sum, Some(i32t), i64t), Some(col(1, i32t)));
        let split = split_averages(&fused(vec![sum.clone()])).unwrap();
        let count = (spec(AggFunc::Count, None, i64t), None);
        assert_eq!(split.chunk, fused(vec![sum, count]));
        assert_eq!(split.avgs, [None]);
    }

    #[test]
    fn aggregates_whose_parts_do_not_combine_exactly_are_not_split() {
        let (f, w, s) = (Type::Float64, Type::WideDecimal(2), Type::String);
        for (a, e) in [
            (spec(AggFunc::Avg, Some(f), f), col(1, f)),
            (spec(AggFunc::Sum, Some(f), f), col(1, f)),
            (spec(AggFunc::Avg, Some(w), Type::WideDecimal(6)), col(1, w)),
            (spec(AggFunc::Max, Some(s), s), col(1, s)),
        ] {
            let count = (spec(AggFunc::Count, None, Type::Int64), None);
            assert!(split_averages(&fused(vec![count, (a, Some(e))])).is_none());
        }
    }

    #[test]
    fn averages_are_their_sums_over_their_counts_rounded_half_away_from_zero() {
        let kernel = fused(Vec::new());
        // Keys, an average of scale 0 to scale 2, a count, the count of rows.
        let cols = vec![
            HostCol::I32(vec![1, 2, 3, 4, 5]),
            HostCol::I128(vec![1, -1, 7, 5, 0]),
            HostCol::I64(vec![8, 8, 3, 2, 1]),
            HostCol::I64(vec![8, 8, 3, 2, 1]),
        ];
        let avgs = [Some((0, 2, Type::Decimal(2))), None];
        let out = finish_averages(&kernel, cols.clone(), 1, &avgs).unwrap();
        assert_eq!(out.len(), 3);
        // 0.125 → 0.13, -0.125 → -0.13, 2.333… → 2.33, 2.5 → 2.50, 0 → 0.
        assert!(matches!(&out[1], HostCol::I64(v) if v == &[13, -13, 233, 250, 0]));
        assert!(matches!(&out[2], HostCol::I64(v) if v == &[8, 8, 3, 2, 1]));
        // From scale 2 to scale 6.
        let out = finish_averages(&kernel, cols.clone(), 1, &[Some((2, 6, Type::Decimal(6))), None]).unwrap();
        assert!(matches!(&out[1], HostCol::I64(v) if v == &[1250, -1250, 23333, 25000, 0]));
        // A result beyond 18 digits names the first row of its group in key order.
        let mut big = cols;
        big[1] = HostCol::I128(vec![1, -1, 7, 10i128.pow(13) * 2, 0]);
        let e = finish_averages(&kernel, big, 1, &[Some((0, 6, Type::Decimal(6))), None]).unwrap_err();
        assert_eq!(
            e,
            "kernel FusedReduce: the average of the group at row 19 does not fit decimal(6)"
        );
        // No averages: the columns but the count of rows.
        let plain = vec![HostCol::I32(vec![1]), HostCol::I64(vec![4]), HostCol::I64(vec![2])];
        let out = finish_averages(&kernel, plain, 1, &[None]).unwrap();
        assert!(matches!(&out[..], [HostCol::I32(_), HostCol::I64(c)] if c == &[4]));
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
