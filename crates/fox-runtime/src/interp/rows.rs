//! Row-local kernels whose arguments and outputs do not fit the device budget at once run
//! over chunks of their rows: `Eval` (its column arguments), `Compact` (the flags and
//! every column), `Gather` (the positions; the gathered columns are read whole) and
//! `AdjacentDistinct` (each chunk with the row before it, whose flag is dropped), and
//! aggregations without keys whose aggregates combine exactly (`combined`: each chunk's
//! partial row, then one `ReduceByKey` over them; a sum beyond its type in a chunk is
//! the overflow error of the whole). Each
//! chunk's row-aligned arguments are sliced on the device, or uploaded from the host
//! tier, the kernel runs on them, and its outputs leave for the host; the outputs,
//! concatenated in chunk order (so the result is the one launch's, row for row), are
//! defined in the host tier and come back when an instruction reads them.

use super::*;
use fox_kernel::AggSpec;

macro_rules! each_col {
    ($col:expr, $v:ident => $body:expr) => {
        match $col {
            HostCol::U8($v) => HostCol::U8($body),
            HostCol::I32($v) => HostCol::I32($body),
            HostCol::U32($v) => HostCol::U32($body),
            HostCol::I64($v) => HostCol::I64($body),
            HostCol::U64($v) => HostCol::U64($body),
            HostCol::F64($v) => HostCol::F64($body),
            HostCol::I128($v) => HostCol::I128($body),
        }
    };
}

/// The arguments of a row-local kernel that are aligned with its rows (sliced per chunk),
/// the others being read whole; `None` for any other kernel.
pub(super) fn row_aligned(kernel: &Kernel, n_args: usize) -> Option<Vec<bool>> {
    match kernel {
        Kernel::Eval { n_cols, .. } if *n_cols >= 1 && *n_cols <= n_args => {
            Some((0..n_args).map(|i| i < *n_cols).collect())
        }
        Kernel::Compact if n_args >= 2 => Some(vec![true; n_args]),
        Kernel::Gather { .. } if n_args >= 2 => Some((0..n_args).map(|i| i == 0).collect()),
        Kernel::AdjacentDistinct if n_args >= 1 => Some(vec![true; n_args]),
        // Per-row searches and counts: the probing rows in chunks, the searched side whole.
        Kernel::RangeCount if n_args == 2 => Some(vec![true; 2]),
        Kernel::HashProbe { nkeys } | Kernel::HashMatch { nkeys, .. } if n_args == 2 * nkeys + 1 => {
            Some((0..n_args).map(|i| i > *nkeys).collect())
        }
        Kernel::BoundRange { nkeys, lower, upper } => {
            let searched = nkeys + usize::from(lower.is_some() || upper.is_some());
            (n_args > searched).then(|| (0..n_args).map(|i| i >= searched).collect())
        }
        Kernel::NestedLoopCount { nkeys } | Kernel::NestedLoopMatch { nkeys, .. } if n_args == 2 * nkeys => {
            Some((0..n_args).map(|i| i < *nkeys).collect())
        }
        // Aggregations of the whole input: each chunk's partial aggregates, combined.
        Kernel::FusedReduce {
            nkeys: 0, aggs, n_cols, ..
        } if *n_cols >= 1 && *n_cols <= n_args && combined(aggs).is_some() => {
            Some((0..n_args).map(|i| i < *n_cols).collect())
        }
        Kernel::ReduceByKey { nkeys: 0, aggs } if n_args >= 1 && combined(aggs).is_some() => Some(vec![true; n_args]),
        _ => None,
    }
}

/// The aggregates that combine the partial aggregates of chunks into the whole's:
/// counts and integer or decimal sums add up, minima and maxima of other than strings
/// and floats' sums excluded; `None` when one does not combine exactly.
pub(super) fn combined(aggs: &[AggSpec]) -> Option<Vec<AggSpec>> {
    use fox_sema::core::AggFunc;
    aggs.iter()
        .map(|a| {
            let exact_sum = !matches!(a.output, Type::Float64);
            let func = match a.func {
                AggFunc::Count => AggFunc::Sum,
                AggFunc::Sum if exact_sum => AggFunc::Sum,
                AggFunc::Min | AggFunc::Max if !matches!(a.output, Type::String) => a.func,
                _ => return None,
            };
            Some(AggSpec {
                func,
                input: Some(a.output),
                output: a.output,
            })
        })
        .collect()
}

/// The kernel that combines the partial results of a row-local aggregation's chunks.
fn combiner(kernel: &Kernel) -> Option<Kernel> {
    match kernel {
        Kernel::FusedReduce { nkeys: 0, aggs, .. } | Kernel::ReduceByKey { nkeys: 0, aggs } => {
            Some(Kernel::ReduceByKey {
                nkeys: 0,
                aggs: combined(aggs)?,
            })
        }
        _ => None,
    }
}

/// The rows before a chunk a kernel reads besides the chunk's own: `AdjacentDistinct`
/// compares each row with the one before. Its outputs for them are dropped.
fn overlap(kernel: &Kernel) -> usize {
    usize::from(matches!(kernel, Kernel::AdjacentDistinct))
}

/// `col` without its first `k` rows.
fn host_skip(col: HostCol, k: usize) -> HostCol {
    each_col!(col, v => { let mut v = v; v.drain(..k.min(v.len())); v })
}

/// The most chunks a launch halves to; below their size, what does not fit is what is
/// read whole.
pub(super) const MAX_CHUNKS: usize = 4096;

/// Whether a chunk of `chunk` rows out of `n` may still halve: while its half has a row
/// and the rows make at most [`MAX_CHUNKS`] chunks of that half.
pub(super) fn may_halve(chunk: usize, n: usize) -> bool {
    chunk / 2 >= (n / MAX_CHUNKS).max(1)
}

/// Rows `a..b` of `col`, copied.
pub(super) fn host_slice(col: &HostCol, a: usize, b: usize) -> Result<HostCol, String> {
    let what = "a chunk of rows for the device";
    Ok(each_col!(col, v => crate::alloc::try_to_vec(&v[a..b], what)?))
}

/// `msg`, an error of a chunk starting at row `base` of the whole, with the row it names
/// (`failing_row`) made a row of the whole.
pub(super) fn rebase_row(msg: String, base: usize) -> String {
    match crate::backend::failing_row(&msg) {
        Some(r) => {
            let cut = msg.rfind(" (row ").unwrap_or(msg.len());
            format!("{} (row {})", &msg[..cut], base + r)
        }
        None => msg,
    }
}

#[cfg(test)]
pub(super) fn host_slice_for_tests(col: &HostCol, a: usize, b: usize) -> HostCol {
    host_slice(col, a, b).unwrap()
}

/// The rows `perm` of `col`, in that order.
pub(super) fn gather_host(col: &HostCol, perm: &[u32]) -> Result<HostCol, String> {
    let what = "rows of an operator run in pieces, in order";
    Ok(each_col!(col, v => {
        let mut o = crate::alloc::try_with_capacity(perm.len(), what)?;
        o.extend(perm.iter().map(|&i| v[i as usize]));
        o
    }))
}

/// Row `r` of `col` as a column of one row.
pub(super) fn host_row(col: &HostCol, r: usize) -> HostCol {
    each_col!(col, v => vec![v[r]])
}

/// `acc` followed by `more` (of the same element type).
pub(super) fn host_append(acc: &mut HostCol, more: HostCol) -> Result<(), String> {
    let what = "the rows of an operator run in chunks";
    macro_rules! app {
        ($($t:ident),*) => {
            match (acc, more) {
                $((HostCol::$t(a), HostCol::$t(m)) => {
                    crate::alloc::try_reserve(a, m.len(), what)?;
                    a.extend_from_slice(&m);
                    Ok(())
                })*
                _ => Err("a chunk's output changed its element type".to_string()),
            }
        };
    }
    app!(U8, I32, U32, I64, U64, F64, I128)
}

/// What a launch on pieces reads of one argument.
pub(super) enum Part {
    /// The whole buffer.
    Whole,
    /// Its rows `a..b`.
    Rows(usize, usize),
    /// A column made on the host (uploaded for the launch).
    Col(HostCol),
}

/// What a chunk of rows `a..b` reads of each argument: its rows of the row-aligned ones
/// (`aligned`), the others whole.
fn chunk_parts(aligned: &[bool], a: usize, b: usize) -> Vec<Part> {
    aligned
        .iter()
        .map(|&al| if al { Part::Rows(a, b) } else { Part::Whole })
        .collect()
}

impl Interp<'_> {
    /// Runs a row-local `kernel` ([`row_aligned`]) over chunks of its rows and defines
    /// its outputs `outs`: joined on the device where its memory is its own and the kernel
    /// keeps every row it writes ([`Interp::rows_on_device`]), else in the host tier (an
    /// aggregation's partial rows combined as they come). Chunks start at a quarter of the device
    /// budget's worth of rows and halve when one does not fit, down to
    /// [`may_halve`]; an error of an expression on a row names the row of the whole.
    pub(super) fn launch_in_rows(
        &mut self,
        kernel: &Kernel,
        arg_slots: &[usize],
        out_elems: &[Elem],
        outs: &[fox_kernel::BufId],
        what: &dyn Fn() -> String,
    ) -> Result<(), RuntimeError> {
        let Some(aligned) = row_aligned(kernel, arg_slots.len()) else {
            return Err(RuntimeError::Plan(format!(
                "{}: the kernel does not run in chunks of rows",
                what()
            )));
        };
        // The rows of the first row-aligned argument (each has as many).
        let first = aligned.iter().position(|&a| a).unwrap_or(0);
        let n = self.slot_buf(arg_slots[first]).len;
        let row_bytes: usize = arg_slots
            .iter()
            .zip(&aligned)
            .filter(|(_, &a)| a)
            .map(|(&s, _)| self.slot_buf(s).elem.size())
            .chain(out_elems.iter().map(|e| e.size()))
            .sum::<usize>()
            .max(1);
        let budget = self.device_cap.unwrap_or(u64::MAX).min(usize::MAX as u64) as usize;
        let mut chunk = (budget / 4 / row_bytes).clamp(1, n.max(1));
        let mut acc: Vec<HostCol> = out_elems.iter().map(|&e| HostCol::empty(e)).collect();
        let combine = combiner(kernel);
        // On a device with memory of its own, the chunks' outputs of a kernel that keeps
        // every row it writes stay there (moving to the host tier only to make room) and
        // are concatenated on the device at the end.
        if combine.is_none() && overlap(kernel) == 0 && self.backend.memory_is_separate() {
            return self.rows_on_device(kernel, arg_slots, &aligned, n, chunk, out_elems, outs, what);
        }
        // The combining launch reads host columns only (the slots beside them are not read).
        let unread = vec![arg_slots[first]; out_elems.len()];
        let mut chunks = 0u64;
        let mut a = 0;
        while a < n {
            let b = (a + chunk).min(n);
            let before = overlap(kernel).min(a);
            match self.launch_chunk(kernel, arg_slots, &aligned, a - before, b, out_elems, what) {
                Ok(cols) => {
                    for (x, c) in acc.iter_mut().zip(cols) {
                        let c = host_skip(c, before);
                        host_append(x, c).map_err(|msg| RuntimeError::Kernel { at: what(), msg })?;
                    }
                    chunks += 1;
                    a = b;
                    // An aggregation's partial rows are combined once they are as many as
                    // a chunk's rows, into one, in their order: no combining launch reads
                    // more rows than a chunk, however small the chunks.
                    if let Some(c) = &combine {
                        if a < n && acc.first().map_or(0, HostCol::len) >= chunk.max(2) {
                            let parts = std::mem::take(&mut acc).into_iter().map(Part::Col).collect();
                            acc = self.launch_parts(c, &unread, parts, out_elems, what)?;
                        }
                    }
                }
                Err(RuntimeError::Kernel { msg, .. }) if is_out_of_memory(&msg) && may_halve(chunk, n) => {
                    chunk /= 2;
                }
                Err(RuntimeError::Kernel { msg, at }) => {
                    return Err(RuntimeError::Kernel {
                        msg: rebase_row(msg, a),
                        at,
                    });
                }
                Err(e) => return Err(e),
            }
        }
        self.note_pieces(chunks);
        if let Some(combine) = combine {
            // The chunks' partial aggregates (a row each, none for no rows) aggregated.
            let mut temps = Vec::with_capacity(acc.len());
            let mut res = Ok(Vec::new());
            for col in acc {
                match self.upload_room(col) {
                    Ok(b) => temps.push(self.temp_slot(b)),
                    Err(e) => {
                        res = Err(RuntimeError::Kernel { at: what(), msg: e.0 });
                        break;
                    }
                }
            }
            if res.is_ok() {
                res = self.launch_evicting(&combine, &temps, out_elems, what);
            }
            for t in temps {
                self.drop_temp_slot(t);
            }
            for (o, b) in outs.iter().zip(res?) {
                self.define(o.0 as usize, b);
            }
            return Ok(());
        }
        for (o, col) in outs.iter().zip(acc) {
            self.define_in_host_tier(o.0 as usize, col);
        }
        Ok(())
    }

    /// [`Interp::launch_in_rows`] whose chunks' outputs stay in slots of their own, on the
    /// device until room is made there, and are joined by one concatenation per output
    /// (on the device, or on the host where that does not fit) into `outs`.
    #[allow(clippy::too_many_arguments)]
    fn rows_on_device(
        &mut self,
        kernel: &Kernel,
        arg_slots: &[usize],
        aligned: &[bool],
        n: usize,
        chunk: usize,
        out_elems: &[Elem],
        outs: &[fox_kernel::BufId],
        what: &dyn Fn() -> String,
    ) -> Result<(), RuntimeError> {
        self.hold_chunks(n, chunk, out_elems, outs, what, |me, a, b| {
            me.launch_parts_held(kernel, arg_slots, chunk_parts(aligned, a, b), out_elems, what)
        })
    }

    /// Runs `launch` over the chunks `a..b` of `n` rows (`chunk` rows at first, halved
    /// while one does not fit, down to [`may_halve`]), each chunk's outputs (`out_elems`,
    /// left on the device by `launch`) held in slots of their own, then joined into `outs`
    /// ([`Interp::join_held`]); an error of a chunk names the row of the whole. Every
    /// held slot is dropped, whatever fails.
    fn hold_chunks(
        &mut self,
        n: usize,
        mut chunk: usize,
        out_elems: &[Elem],
        outs: &[fox_kernel::BufId],
        what: &dyn Fn() -> String,
        mut launch: impl FnMut(&mut Self, usize, usize) -> Result<Vec<DevBuf>, RuntimeError>,
    ) -> Result<(), RuntimeError> {
        // The chunks' outputs: a slot per chunk and output, chunk by chunk (`None` once
        // dropped).
        let mut held: Vec<Option<usize>> = Vec::new();
        let res = (|| {
            let mut chunks = 0u64;
            let mut a = 0;
            while a < n {
                let b = (a + chunk).min(n);
                match launch(self, a, b) {
                    Ok(bufs) => {
                        held.extend(bufs.into_iter().map(|b| Some(self.temp_slot(b))));
                        chunks += 1;
                        a = b;
                    }
                    Err(RuntimeError::Kernel { msg, .. }) if is_out_of_memory(&msg) && may_halve(chunk, n) => {
                        chunk /= 2;
                    }
                    Err(RuntimeError::Kernel { msg, at }) => {
                        return Err(RuntimeError::Kernel {
                            msg: rebase_row(msg, a),
                            at,
                        })
                    }
                    Err(e) => return Err(e),
                }
            }
            self.note_pieces(chunks);
            self.join_held(&mut held, out_elems, outs, what)
        })();
        for s in held.into_iter().flatten() {
            self.drop_temp_slot(s);
        }
        res
    }

    /// Defines `outs` as the concatenation of the chunks' outputs `held` (a slot per chunk
    /// and output, chunk by chunk), one output at a time: on the device, or on the host
    /// where that does not fit. Each chunk's slot is dropped (set to `None`) once joined.
    fn join_held(
        &mut self,
        held: &mut [Option<usize>],
        out_elems: &[Elem],
        outs: &[fox_kernel::BufId],
        what: &dyn Fn() -> String,
    ) -> Result<(), RuntimeError> {
        let width = out_elems.len();
        let parts = held.len() / width.max(1);
        let concat = Kernel::Concat { parts, width: 1 };
        for (j, o) in outs.iter().enumerate() {
            if parts == 0 {
                let b = self
                    .upload_room(HostCol::empty(out_elems[j]))
                    .map_err(|e| RuntimeError::Kernel { at: what(), msg: e.0 })?;
                self.define(o.0 as usize, b);
                continue;
            }
            let slots: Vec<usize> = (0..parts).filter_map(|g| held[g * width + j]).collect();
            match self.launch_evicting(&concat, &slots, &out_elems[j..=j], what) {
                Ok(mut got) if got.len() == 1 => {
                    let b = got.pop().expect("one column");
                    self.define(o.0 as usize, b);
                }
                Ok(got) => {
                    got.into_iter().for_each(|b| self.backend.free(b));
                    return Err(RuntimeError::Plan(format!(
                        "{}: a concatenation returned other than one column",
                        what()
                    )));
                }
                Err(RuntimeError::Kernel { msg, .. }) if is_out_of_memory(&msg) && !self.failure_leaked => {
                    self.concat_on_host(&concat, &slots, &outs[j..=j], what)?;
                }
                Err(e) => return Err(e),
            }
            // Each chunk's output is freed once it is joined.
            for g in 0..parts {
                if let Some(s) = held[g * width + j].take() {
                    self.drop_temp_slot(s);
                }
            }
        }
        Ok(())
    }

    /// The `Compact` that keeps the rows a filter's `Eval` (instruction `i` of `block`,
    /// writing `marks` for `n` rows) marks: instruction `i + 1`, reading `marks` first and
    /// then columns of `n` rows each (on the device or off it), none of them its own
    /// output, with `marks` freed by the frees right after it (nothing else reads them).
    /// Its column slots (without `marks`) and outputs; `None` where the plan is otherwise.
    pub(super) fn compact_after(
        &self,
        block: usize,
        i: usize,
        marks: fox_kernel::BufId,
        n: usize,
    ) -> Option<(Vec<usize>, Vec<fox_kernel::BufId>)> {
        let instrs = &self.plan.blocks.get(block)?.instrs;
        let Some(Instr::Launch {
            kernel: Kernel::Compact,
            args,
            outs,
            ..
        }) = instrs.get(i + 1)
        else {
            return None;
        };
        if args.len() < 2 || args[0] != marks || args[1..].contains(&marks) || outs.len() + 1 != args.len() {
            return None;
        }
        if outs.iter().any(|o| args.contains(o)) {
            return None;
        }
        let freed = instrs[i + 2..]
            .iter()
            .map_while(|ins| match ins {
                Instr::Free { buf } => Some(*buf),
                _ => None,
            })
            .any(|b| b == marks);
        if !freed {
            return None;
        }
        let mut slots = Vec::with_capacity(args.len() - 1);
        for a in &args[1..] {
            let s = self.var_slot(a.0 as usize).ok()?;
            if self.slot_buf(s).len != n {
                return None;
            }
            slots.push(s);
        }
        Some((slots, outs.clone()))
    }

    /// A filter run in chunks of its rows on a device with memory of its own: the
    /// `Eval` `kernel` over `arg_slots` (its `n` rows' marks) and the `Compact` right after
    /// it ([`Interp::compact_after`]: its columns `cols`, outputs `outs` of `out_elems`)
    /// run chunk by chunk, each chunk's rows brought to the device once for both (a
    /// column both read is sliced or uploaded once), its marks kept only for its
    /// compaction, and the rows kept held on the device and joined as
    /// [`Interp::rows_on_device`] joins them. Chunks start at a quarter of the budget's
    /// worth of rows and halve when one does not fit. The result is the two launches'
    /// row for row; `marks` is left defined with no rows (only the frees after the
    /// compaction read it), and the caller skips the compaction.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn filter_in_rows(
        &mut self,
        kernel: &Kernel,
        arg_slots: &[usize],
        marks: fox_kernel::BufId,
        cols: &[usize],
        outs: &[fox_kernel::BufId],
        out_elems: &[Elem],
        what: &dyn Fn() -> String,
    ) -> Result<(), RuntimeError> {
        let Some(aligned) = row_aligned(kernel, arg_slots.len()) else {
            return Err(RuntimeError::Plan(format!(
                "{}: the kernel does not run in chunks of rows",
                what()
            )));
        };
        // The row-aligned slots both launches read, each sliced once per chunk.
        let mut rowed: Vec<usize> = arg_slots
            .iter()
            .zip(&aligned)
            .filter(|(_, &a)| a)
            .map(|(&s, _)| s)
            .chain(cols.iter().copied())
            .collect();
        rowed.sort_unstable();
        rowed.dedup();
        let n = cols.first().map_or(0, |&s| self.slot_buf(s).len);
        let row_bytes: usize = rowed
            .iter()
            .map(|&s| self.slot_buf(s).elem.size())
            .chain(out_elems.iter().map(|e| e.size()))
            .sum::<usize>()
            + 1;
        let budget = self.device_cap.unwrap_or(u64::MAX).min(usize::MAX as u64) as usize;
        let chunk = (budget / 4 / row_bytes).clamp(1, n.max(1));
        self.hold_chunks(n, chunk, out_elems, outs, what, |me, a, b| {
            let mut temps = Vec::new();
            let got = me.filter_chunk(
                kernel, arg_slots, &aligned, &rowed, cols, out_elems, a, b, what, &mut temps,
            );
            for t in temps {
                me.drop_temp_slot(t);
            }
            got
        })?;
        let none = self
            .upload_room(HostCol::U8(Vec::new()))
            .map_err(|e| RuntimeError::Kernel { at: what(), msg: e.0 })?;
        self.define(marks.0 as usize, none);
        Ok(())
    }

    /// One chunk of [`Interp::filter_in_rows`], rows `a..b`: the slots `rowed` sliced
    /// once (temporary slots in `temps`, for the caller to drop), the marks, the
    /// compaction; its outputs left on the device.
    #[allow(clippy::too_many_arguments)]
    fn filter_chunk(
        &mut self,
        kernel: &Kernel,
        arg_slots: &[usize],
        aligned: &[bool],
        rowed: &[usize],
        cols: &[usize],
        out_elems: &[Elem],
        a: usize,
        b: usize,
        what: &dyn Fn() -> String,
        temps: &mut Vec<usize>,
    ) -> Result<Vec<DevBuf>, RuntimeError> {
        let parts = rowed.iter().map(|_| Part::Rows(a, b)).collect();
        let pieces = self.part_args(rowed, parts, what, temps)?;
        let piece = |s: usize| rowed.iter().position(|&r| r == s).map_or(s, |k| pieces[k]);
        let eval_args: Vec<usize> = arg_slots
            .iter()
            .zip(aligned)
            .map(|(&s, &al)| if al { piece(s) } else { s })
            .collect();
        let marks = self.launch_evicting(kernel, &eval_args, &[Elem::U8], what)?;
        let m = self.one_column(marks, "a filter's marks are", what)?;
        let m = self.temp_slot(m);
        temps.push(m);
        let mut compact_args = vec![m];
        compact_args.extend(cols.iter().map(|&s| piece(s)));
        self.launch_evicting(&Kernel::Compact, &compact_args, out_elems, what)
    }

    /// The one buffer of `bufs`, a launch's outputs; otherwise every buffer freed and a plan
    /// error, "`what`: `returned` other than one column".
    pub(super) fn one_column(
        &mut self,
        mut bufs: Vec<DevBuf>,
        returned: &str,
        what: &dyn Fn() -> String,
    ) -> Result<DevBuf, RuntimeError> {
        match (bufs.pop(), bufs.is_empty()) {
            (Some(b), true) => Ok(b),
            (b, _) => {
                b.into_iter().chain(bufs).for_each(|b| self.backend.free(b));
                Err(RuntimeError::Plan(format!(
                    "{}: {returned} other than one column",
                    what()
                )))
            }
        }
    }

    /// One launch of `kernel` on pieces of its arguments (`parts`, one per argument): its
    /// arguments on the device (their pieces' temporary slots dropped after), the launch,
    /// its outputs left on the device.
    fn launch_parts_held(
        &mut self,
        kernel: &Kernel,
        arg_slots: &[usize],
        parts: Vec<Part>,
        out_elems: &[Elem],
        what: &dyn Fn() -> String,
    ) -> Result<Vec<DevBuf>, RuntimeError> {
        let mut temps: Vec<usize> = Vec::new();
        let res = self
            .part_args(arg_slots, parts, what, &mut temps)
            .and_then(|args| self.launch_evicting(kernel, &args, out_elems, what));
        for s in temps {
            self.drop_temp_slot(s);
        }
        res
    }

    /// One chunk of rows `a..b`: its arguments on the device, the launch, its outputs
    /// moved to the host.
    #[allow(clippy::too_many_arguments)]
    fn launch_chunk(
        &mut self,
        kernel: &Kernel,
        arg_slots: &[usize],
        aligned: &[bool],
        a: usize,
        b: usize,
        out_elems: &[Elem],
        what: &dyn Fn() -> String,
    ) -> Result<Vec<HostCol>, RuntimeError> {
        let parts = chunk_parts(aligned, a, b);
        self.launch_parts(kernel, arg_slots, parts, out_elems, what)
    }

    /// One launch of `kernel` on pieces of its arguments (`parts`, one per argument): its
    /// arguments on the device, the launch, its outputs moved to the host.
    pub(super) fn launch_parts(
        &mut self,
        kernel: &Kernel,
        arg_slots: &[usize],
        parts: Vec<Part>,
        out_elems: &[Elem],
        what: &dyn Fn() -> String,
    ) -> Result<Vec<HostCol>, RuntimeError> {
        let outs = self.launch_parts_held(kernel, arg_slots, parts, out_elems, what)?;
        self.take_all(outs, what)
    }

    /// The buffers `outs` moved to the host (all of them freed on the device, whatever
    /// fails).
    pub(super) fn take_all(
        &mut self,
        outs: Vec<DevBuf>,
        what: &dyn Fn() -> String,
    ) -> Result<Vec<HostCol>, RuntimeError> {
        let mut cols = Vec::with_capacity(outs.len());
        let mut err = None;
        for o in outs {
            if err.is_some() {
                self.backend.free(o);
                continue;
            }
            let t = Instant::now();
            match self.backend.take(o) {
                Ok(c) => cols.push(c),
                Err(e) => err = Some(e.0),
            }
            self.stats.download += t.elapsed();
        }
        match err {
            Some(msg) => Err(RuntimeError::Kernel { at: what(), msg }),
            None => Ok(cols),
        }
    }

    /// The argument slots of a chunk: row-aligned ones replaced by temporary slots
    /// holding their rows `a..b` (recorded in `temps`, for the caller to drop).
    pub(super) fn chunk_args(
        &mut self,
        arg_slots: &[usize],
        aligned: &[bool],
        a: usize,
        b: usize,
        what: &dyn Fn() -> String,
        temps: &mut Vec<usize>,
    ) -> Result<Vec<usize>, RuntimeError> {
        let parts = chunk_parts(aligned, a, b);
        self.part_args(arg_slots, parts, what, temps)
    }

    /// Rows `a..b` of slot `s`'s column where it waits off the device, in the host tier or
    /// in the database (copied to the host); `None` where it is on the device or lost.
    pub(super) fn rows_off_device(&self, s: usize, a: usize, b: usize) -> Option<Result<HostCol, String>> {
        match &self.tiers[s] {
            Tier::Host(col) => Some(host_slice(col, a, b)),
            Tier::Db(rows) => Some(rows.slice(a, b)),
            Tier::Device | Tier::Gone => None,
        }
    }

    /// The argument slots of a launch on pieces: each argument whole, its rows `a..b`
    /// or a column of the host, the latter two in temporary slots (recorded in `temps`,
    /// for the caller to drop).
    pub(super) fn part_args(
        &mut self,
        arg_slots: &[usize],
        parts: Vec<Part>,
        what: &dyn Fn() -> String,
        temps: &mut Vec<usize>,
    ) -> Result<Vec<usize>, RuntimeError> {
        let mut args = Vec::with_capacity(arg_slots.len());
        for (&s, part) in arg_slots.iter().zip(parts) {
            let (a, b) = match part {
                Part::Whole => {
                    args.push(s);
                    continue;
                }
                Part::Col(col) => {
                    let up = self
                        .upload_room(col)
                        .map_err(|e| RuntimeError::Kernel { at: what(), msg: e.0 })?;
                    let t = self.temp_slot(up);
                    temps.push(t);
                    args.push(t);
                    continue;
                }
                Part::Rows(a, b) => (a, b),
            };
            let mut sliced = None;
            if matches!(self.tiers[s], Tier::Device) {
                let elem = self.slot_buf(s).elem;
                let slice = Kernel::Slice {
                    start: a as u64,
                    len: (b - a) as u64,
                };
                match self.launch_evicting(&slice, &[s], &[elem], what) {
                    Ok(got) => sliced = Some(self.one_column(got, "a slice returned", what)?),
                    // The column itself leaves no room for its piece beside it (nothing
                    // else was left to move): it moves to the host tier, and the piece
                    // comes from there.
                    Err(RuntimeError::Kernel { msg, .. }) if is_out_of_memory(&msg) && !self.pinned[s] => {
                        self.evict(s).map_err(|msg| RuntimeError::Kernel { at: what(), msg })?;
                    }
                    Err(e) => return Err(e),
                }
            }
            let part = match sliced {
                Some(x) => x,
                // The database's rows, widened where the backend chooses.
                None if matches!(self.tiers[s], Tier::Db(_)) => {
                    let Tier::Db(rows) = &self.tiers[s] else {
                        unreachable!("matched above")
                    };
                    let rows = rows.clone();
                    self.upload_db_rows(&rows, a..b, &[])
                        .map_err(|msg| RuntimeError::Kernel { at: what(), msg })?
                }
                None => match self.rows_off_device(s, a, b) {
                    Some(part) => {
                        let part = part.map_err(|msg| RuntimeError::Kernel { at: what(), msg })?;
                        self.upload_room(part)
                            .map_err(|e| RuntimeError::Kernel { at: what(), msg: e.0 })?
                    }
                    None if matches!(self.tiers[s], Tier::Device) => {
                        return Err(RuntimeError::Plan(format!(
                            "{}: a column on the device was neither sliced nor moved to the host tier",
                            what()
                        )))
                    }
                    None => {
                        return Err(RuntimeError::Kernel {
                            at: what(),
                            msg: "a buffer was lost bringing it back to the device".into(),
                        })
                    }
                },
            };
            let t = self.temp_slot(part);
            temps.push(t);
            args.push(t);
        }
        Ok(args)
    }

    /// A slot holding `buf` that no variable names (a chunk's argument).
    pub(super) fn temp_slot(&mut self, buf: DevBuf) -> usize {
        self.new_slot(buf, false)
    }

    /// Frees a slot of [`Interp::temp_slot`] wherever its buffer is.
    pub(super) fn drop_temp_slot(&mut self, s: usize) {
        let Some((buf, _)) = self.slots[s].take() else {
            return;
        };
        self.free_slots.push(s);
        match std::mem::replace(&mut self.tiers[s], Tier::Device) {
            Tier::Device => self.backend.free(buf),
            Tier::Host(_) => self.host_in_use -= buf.bytes() as u64,
            Tier::Db(_) | Tier::Gone => {}
        }
    }

    /// A slot holding `col` in the host tier that no variable names (for the caller to
    /// drop with [`Interp::drop_temp_slot`]).
    pub(super) fn host_temp_slot(&mut self, col: HostCol) -> usize {
        let stale = DevBuf {
            id: u64::MAX,
            elem: col.elem(),
            len: col.len(),
        };
        let bytes = stale.bytes() as u64;
        let s = self.new_slot(stale, false);
        self.tiers[s] = Tier::Host(col);
        self.count_to_host(bytes);
        s
    }

    /// Defines `var` as `col`, held in the host tier until an instruction reads it on
    /// the device.
    pub(super) fn define_in_host_tier(&mut self, var: usize, col: HostCol) {
        let stale = DevBuf {
            id: u64::MAX,
            elem: col.elem(),
            len: col.len(),
        };
        let bytes = stale.bytes() as u64;
        self.define(var, stale);
        let slot = self.vars[var].expect("just defined");
        self.tiers[slot] = Tier::Host(col);
        self.count_to_host(bytes);
    }

    /// `Gather { shift }` of one column (`args`: the positions, the column) on the host,
    /// for a column larger than the device budget: its output is defined in the host
    /// tier. Positions out of range are the kernel's error.
    pub(super) fn gather_on_host(
        &mut self,
        kernel: &Kernel,
        args: &[usize],
        out: fox_kernel::BufId,
        what: &dyn Fn() -> String,
    ) -> Result<(), RuntimeError> {
        let (Kernel::Gather { shift }, [idx, data]) = (kernel, args) else {
            return Err(RuntimeError::Plan(format!(
                "{}: gathers one column on the host",
                what()
            )));
        };
        let kerr = |msg: String| RuntimeError::Kernel { at: what(), msg };
        let idx = match self.download_arg(*idx) {
            Ok(HostCol::U32(v)) => v,
            Ok(_) => return Err(RuntimeError::Plan(format!("{}: the positions are not U32", what()))),
            Err(HostError::Plan(m)) | Err(HostError::Kernel(m)) => return Err(kerr(m)),
            Err(HostError::Run(e)) => return Err(e),
        };
        let owned;
        let col: &HostCol = match &self.tiers[*data] {
            Tier::Host(c) => c,
            _ => {
                owned = self.download_arg(*data).map_err(|e| match e {
                    HostError::Plan(m) | HostError::Kernel(m) => kerr(m),
                    HostError::Run(e) => e,
                })?;
                &owned
            }
        };
        let len = col.len();
        let bad = idx.iter().find(|&&i| i as usize + *shift as usize >= len);
        if let Some(&i) = bad {
            return Err(kerr(format!(
                "position {} is beyond the {len} rows of the gathered column",
                i as usize + *shift as usize
            )));
        }
        let what_alloc = "a column gathered on the host";
        let at = |i: &u32| *i as usize + *shift as usize;
        let gathered = each_col!(col, v => {
            let mut o = crate::alloc::try_with_capacity(idx.len(), what_alloc).map_err(kerr)?;
            o.extend(idx.iter().map(|i| v[at(i)]));
            o
        });
        self.define_in_host_tier(out.0 as usize, gathered);
        Ok(())
    }
}
