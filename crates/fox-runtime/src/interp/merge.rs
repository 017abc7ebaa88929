//! A `MergeUnion` whose sides and union do not fit the device budget at once runs in
//! pieces cut along its merge path. The merge path orders the rows of `a` and `b` as
//! the merge takes them (rows compared by code on every column, floats by total order
//! with every NaN equal and last; a row of `a` before an equal row of `b`); a cut at
//! diagonal `d` is the pair `(i, j)`, `i + j = d`, of the rows of each side among its
//! first `d`. Each piece merges rows `i0..i1` of `a` with rows `j0..j1` of `b` on the
//! device; since every row of a piece comes after every row of the pieces before it in
//! the union, the pieces' outputs concatenated in order are the one launch's output.
//!
//! A cut never separates a row of `a` from an equal row of `b` (`cut_at` moves it past
//! the row of `b`), so the two meet in one launch, which keeps one copy (or, for
//! `disjoint`, does what the one launch does with a shared row: fails on the CPU, keeps
//! both on the GPU). A piece whose rows all come from one side is that side's rows as
//! they are: it is copied on the host, extended to the whole run of that side's rows
//! before the other side's next row, without a launch.
//!
//! The sides move to the host tier, where the cuts are found by binary search; each
//! piece's rows are uploaded, its union taken back to the host, and the union is
//! defined in the host tier. Pieces hold a target of bytes (a quarter of the budget,
//! halved when a piece does not fit); a piece of one row of each side that does not
//! fit is the out-of-memory error naming the operator and what that piece needs. Another
//! error of a piece names the rows of the whole sides, as the one launch's does.

use super::rows::Part;
use super::sort::KeyCol;
use super::*;
use std::cmp::Ordering;

/// Compares row `i` of the columns `a` with row `j` of the columns `b`, as the merge
/// does.
fn cmp_at(a: &[&HostCol], i: usize, b: &[&HostCol], j: usize) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match KeyCol::plain(x).cmp(i, &KeyCol::plain(y), j) {
            Ordering::Equal => {}
            o => return o,
        }
    }
    Ordering::Equal
}

/// The first `x` in `lo..hi` where `pred` turns false (`pred` true then false); `lo`
/// when the range is empty.
fn partition_point(lo: usize, hi: usize, pred: impl Fn(usize) -> bool) -> usize {
    lo + crate::strings::partition_point(hi.saturating_sub(lo), |k| pred(lo + k))
}

/// The cut of the merge path of `a` (`na` rows) and `b` (`nb` rows), each sorted, at
/// diagonal `d ≤ na + nb`: the rows `(i, j)` of each side among the first `d` the merge
/// takes, a row of `a` taken before an equal row of `b`. `from` is a cut at a diagonal
/// not past `d`: the cut is searched at or after it on both sides (so that it moves
/// forward even over sides out of order, which the plan promises they are not).
pub(super) fn co_rank(
    a: &[&HostCol],
    na: usize,
    b: &[&HostCol],
    nb: usize,
    (i0, j0): (usize, usize),
    d: usize,
) -> (usize, usize) {
    // `i` rows of `a` are too few while a[i] comes before b[d - i - 1] (a[i] <= it):
    // true for small `i`, false from the cut on.
    let (lo, hi) = (d.saturating_sub(nb).max(i0), (d - j0).min(na));
    let i = partition_point(lo, hi, |i| cmp_at(a, i, b, d - i - 1) != Ordering::Greater);
    (i, d - i)
}

/// The cut at diagonal `d` (see [`co_rank`]), one row of `b` further when the last row
/// of `a` before it equals the first row of `b` after it, so that equal rows of the two
/// sides are never in different pieces. (Each side is duplicate-free, so the cut one
/// row further is the merge path's at `d + 1`.)
pub(super) fn cut_at(
    a: &[&HostCol],
    na: usize,
    b: &[&HostCol],
    nb: usize,
    from: (usize, usize),
    d: usize,
) -> (usize, usize) {
    let (i, j) = co_rank(a, na, b, nb, from, d);
    if i > 0 && j < nb && cmp_at(a, i - 1, b, j) == Ordering::Equal {
        (i, j + 1)
    } else {
        (i, j)
    }
}

/// From the cut `(i, j)`, the end of the run of rows the merge takes from one side
/// only: rows of `a` below `b`'s next row (all of them when `b` is done), or rows of
/// `b` below `a`'s next row. The cut after the run (itself when the next rows of the
/// two sides are each other's next, or equal).
pub(super) fn one_side_run(
    a: &[&HostCol],
    na: usize,
    b: &[&HostCol],
    nb: usize,
    (i, j): (usize, usize),
) -> (usize, usize) {
    if j == nb {
        return (na, j);
    }
    if i == na {
        return (i, nb);
    }
    if cmp_at(a, i, b, j) == Ordering::Less {
        (partition_point(i, na, |x| cmp_at(a, x, b, j) == Ordering::Less), j)
    } else {
        (i, partition_point(j, nb, |y| cmp_at(b, y, a, i) == Ordering::Less))
    }
}

/// The piece of the union after the cut `from` (of neither side's end), of about
/// `step` rows of the merge path: its end, and whether it merges rows of both sides
/// (otherwise its rows are a run of one side's, to be copied as they are).
pub(super) fn next_piece(
    a: &[&HostCol],
    na: usize,
    b: &[&HostCol],
    nb: usize,
    (i, j): (usize, usize),
    step: usize,
) -> ((usize, usize), bool) {
    let d = (i + j).saturating_add(step.max(1)).min(na + nb);
    let cut = cut_at(a, na, b, nb, (i, j), d);
    if cut.0 > i && cut.1 > j {
        return (cut, true);
    }
    let run = one_side_run(a, na, b, nb, (i, j));
    (if run.0 + run.1 > i + j { run } else { cut }, false)
}

/// An empty column of element type `elem` with room for `n` rows.
fn with_room(elem: Elem, n: usize, what: &str) -> Result<HostCol, String> {
    use crate::alloc::try_with_capacity as cap;
    Ok(match elem {
        Elem::U8 => HostCol::U8(cap(n, what)?),
        Elem::I32 => HostCol::I32(cap(n, what)?),
        Elem::U32 => HostCol::U32(cap(n, what)?),
        Elem::I64 => HostCol::I64(cap(n, what)?),
        Elem::U64 => HostCol::U64(cap(n, what)?),
        Elem::F64 => HostCol::F64(cap(n, what)?),
        Elem::I128 => HostCol::I128(cap(n, what)?),
    })
}

/// Appends rows `from..to` of `src` to `acc` (of the same element type).
fn append_rows(acc: &mut HostCol, src: &HostCol, from: usize, to: usize) -> Result<(), String> {
    let what = "the union of an operator run in pieces";
    macro_rules! app {
        ($($t:ident),*) => {
            match (acc, src) {
                $((HostCol::$t(a), HostCol::$t(s)) => {
                    crate::alloc::try_reserve(a, to - from, what)?;
                    a.extend_from_slice(&s[from..to]);
                    Ok(())
                })*
                _ => Err("a side of the union differs in element type from its output".to_string()),
            }
        };
    }
    app!(U8, I32, U32, I64, U64, F64, I128)
}

/// `msg`, an error of a piece starting at rows `i` of `a` and `j` of `b`, with the rows
/// it names (`row N of a`, `row N of b`) made rows of the whole sides.
pub(super) fn rebase_sides(msg: &str, i: usize, j: usize) -> String {
    let mut out = String::with_capacity(msg.len() + 8);
    let mut rest = msg;
    while let Some(at) = rest.find("row ") {
        out.push_str(&rest[..at + 4]);
        rest = &rest[at + 4..];
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let base = match &rest[digits..] {
            t if t.starts_with(" of a") => Some(i),
            t if t.starts_with(" of b") => Some(j),
            _ => None,
        };
        match (rest[..digits].parse::<usize>(), base) {
            (Ok(r), Some(base)) if digits > 0 => out.push_str(&(r + base).to_string()),
            _ => out.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    out.push_str(rest);
    out
}

impl Interp<'_> {
    /// The columns of the sides of a union in pieces: from the host tier, or the copies
    /// in `owned` of those that stay on the device.
    fn union_sides<'s>(
        &'s self,
        arg_slots: &[usize],
        owned: &'s [Option<HostCol>],
    ) -> Result<Vec<&'s HostCol>, String> {
        arg_slots
            .iter()
            .zip(owned)
            .map(|(&s, own)| match (&self.tiers[s], own) {
                (_, Some(c)) | (Tier::Host(c), None) => Ok(c),
                _ => Err("a side of a union in pieces left the host".to_string()),
            })
            .collect()
    }

    /// Runs `MergeUnion` in pieces along its merge path (see the module) and defines
    /// its outputs `outs` in the host tier.
    pub(super) fn merge_in_pieces(
        &mut self,
        kernel: &Kernel,
        arg_slots: &[usize],
        out_elems: &[Elem],
        outs: &[fox_kernel::BufId],
        what: &dyn Fn() -> String,
    ) -> Result<(), RuntimeError> {
        let kerr = |msg: String| RuntimeError::Kernel { at: what(), msg };
        let w = match kernel {
            Kernel::MergeUnion { width, .. } if *width > 0 && arg_slots.len() == 2 * width && outs.len() == *width => {
                *width
            }
            _ => {
                return Err(RuntimeError::Plan(format!(
                    "{}: only a union of two sides of equal width runs in pieces along its merge path",
                    what()
                )))
            }
        };
        // The sides move to the host tier, where the cuts are found; those that stay on
        // the device (resident columns) are read from copies.
        for &s in arg_slots {
            if matches!(self.tiers[s], Tier::Device) && !self.pinned[s] {
                self.evict(s).map_err(kerr)?;
            }
        }
        let mut owned: Vec<Option<HostCol>> = Vec::with_capacity(arg_slots.len());
        for &s in arg_slots {
            owned.push(match self.tiers[s] {
                Tier::Host(_) => None,
                _ => Some(self.download_arg(s).map_err(|e| host_error(e, what))?),
            });
        }
        let (na, nb) = (self.slot_buf(arg_slots[0]).len, self.slot_buf(arg_slots[w]).len);
        let row_bytes: usize = arg_slots[..w].iter().map(|&s| self.slot_buf(s).elem.size()).sum();
        // A piece's rows, its union and the kernel's temporaries (a copy of `b`'s rows
        // not in `a`, positions and flags), per row of its merge path.
        let per_row = 3 * row_bytes + 8;
        let cost = |rows: usize| rows.saturating_mul(per_row);
        let budget = self.device_cap.unwrap_or(u64::MAX).min(usize::MAX as u64) as usize;
        let mut target = (budget / 4).max(1);
        let mut acc: Vec<HostCol> = Vec::with_capacity(w);
        for &e in out_elems {
            acc.push(with_room(e, na + nb, "the union of an operator run in pieces").map_err(kerr)?);
        }
        let mut pieces = 0u64;
        let (mut i, mut j) = (0, 0);
        while i < na || j < nb {
            self.check_cancel()?;
            let (i1, j1) = {
                let sides = self.union_sides(arg_slots, &owned).map_err(kerr)?;
                let (a, b) = sides.split_at(w);
                let ((i1, j1), merged) = next_piece(a, na, b, nb, (i, j), target / per_row);
                if !merged {
                    // Rows of one side only: copied as they are.
                    let (side, from, to) = if i1 > i { (a, i, i1) } else { (b, j, j1) };
                    for (x, col) in acc.iter_mut().zip(side) {
                        append_rows(x, col, from, to).map_err(kerr)?;
                    }
                    pieces += 1;
                    (i, j) = (i1, j1);
                    continue;
                }
                (i1, j1)
            };
            let mut parts: Vec<Part> = Vec::with_capacity(2 * w);
            parts.extend((0..w).map(|_| Part::Rows(i, i1)));
            parts.extend((0..w).map(|_| Part::Rows(j, j1)));
            let rows = i1 - i + j1 - j;
            match self.launch_parts(kernel, arg_slots, parts, out_elems, what) {
                Ok(cols) => {
                    for (x, c) in acc.iter_mut().zip(cols) {
                        rows::host_append(x, c).map_err(kerr)?;
                    }
                    pieces += 1;
                    (i, j) = (i1, j1);
                }
                Err(RuntimeError::Kernel { msg, .. }) if is_out_of_memory(&msg) && rows > 2 => {
                    target = cost(rows / 2);
                }
                Err(RuntimeError::Kernel { msg, at }) if is_out_of_memory(&msg) => {
                    return Err(RuntimeError::Kernel {
                        at,
                        msg: format!(
                            "{msg}; the smallest piece of this union (one row of each side) needs {} on the \
                             device",
                            crate::alloc::bytes_text(cost(rows) as u128)
                        ),
                    });
                }
                // An error of the kernel names rows of the whole sides, as the one
                // launch's does.
                Err(RuntimeError::Kernel { msg, at }) => {
                    return Err(RuntimeError::Kernel {
                        at,
                        msg: rebase_sides(&msg, i, j),
                    })
                }
                Err(e) => return Err(e),
            }
        }
        drop(owned);
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

    /// The union the kernel makes of the rows `a` and `b` (each sorted, duplicate-free):
    /// the merge, equal rows once (`disjoint`: both, as fox-cuda keeps them).
    fn whole(a: &[HostCol], b: &[HostCol], disjoint: bool) -> Vec<HostCol> {
        let (ra, rb): (Vec<&HostCol>, Vec<&HostCol>) = (a.iter().collect(), b.iter().collect());
        let (na, nb) = (a[0].len(), b[0].len());
        let mut out: Vec<HostCol> = a.iter().map(|c| HostCol::empty(c.elem())).collect();
        let push = |out: &mut Vec<HostCol>, side: &[&HostCol], r: usize| {
            out.iter_mut()
                .zip(side)
                .for_each(|(x, c)| append_rows(x, c, r, r + 1).unwrap())
        };
        let (mut i, mut j) = (0, 0);
        loop {
            let o = match (i < na, j < nb) {
                (false, false) => break,
                (true, false) => Ordering::Less,
                (false, true) => Ordering::Greater,
                (true, true) => cmp_at(&ra, i, &rb, j),
            };
            if o != Ordering::Greater {
                push(&mut out, &ra, i);
                i += 1;
            }
            if o == Ordering::Greater || (o == Ordering::Equal && disjoint) {
                push(&mut out, &rb, j);
            }
            j += usize::from(o != Ordering::Less);
        }
        out
    }

    /// The union in pieces of about `step` merge rows, as `merge_in_pieces` cuts them,
    /// each piece merged by [`whole`]; and the number of pieces.
    fn pieced(a: &[HostCol], b: &[HostCol], disjoint: bool, step: usize) -> (Vec<HostCol>, usize) {
        let (ra, rb): (Vec<&HostCol>, Vec<&HostCol>) = (a.iter().collect(), b.iter().collect());
        let (na, nb) = (a[0].len(), b[0].len());
        let mut out: Vec<HostCol> = a.iter().map(|c| HostCol::empty(c.elem())).collect();
        let (mut i, mut j, mut pieces) = (0, 0, 0);
        while i < na || j < nb {
            let ((i1, j1), merged) = next_piece(&ra, na, &rb, nb, (i, j), step);
            assert!(
                i1 >= i && j1 >= j && i1 + j1 > i + j,
                "{:?} after {:?}",
                (i1, j1),
                (i, j)
            );
            assert_eq!(merged, i1 > i && j1 > j);
            if merged {
                assert!(
                    i1 + j1 <= i + j + step + 1,
                    "a piece of at most one row more than asked"
                );
            }
            // The rows on either side of the cut differ.
            if i1 > 0 && j1 < nb {
                assert_ne!(cmp_at(&ra, i1 - 1, &rb, j1), Ordering::Equal);
            }
            if j1 > 0 && i1 < na {
                assert_ne!(cmp_at(&rb, j1 - 1, &ra, i1), Ordering::Equal);
            }
            let slice = |cols: &[HostCol], x: usize, y: usize| -> Vec<HostCol> {
                cols.iter().map(|c| rows::host_slice(c, x, y).unwrap()).collect()
            };
            let part = whole(&slice(a, i, i1), &slice(b, j, j1), disjoint);
            out.iter_mut()
                .zip(part)
                .for_each(|(x, p)| rows::host_append(x, p).unwrap());
            (i, j) = (i1, j1);
            pieces += 1;
        }
        (out, pieces)
    }

    /// Sorted, duplicate-free rows of `width` columns (i32, then i64, then f64 with
    /// -0.0, 0.0 and NaN among its values) drawn from `choose(k)` per column.
    fn rows_of(n: usize, width: usize, choose: &mut impl FnMut(usize) -> i64) -> Vec<HostCol> {
        let floats = [f64::NAN, -0.0, 0.0, 1.5, -3.0];
        let mut rows: Vec<(i32, i64, usize)> = (0..n)
            .map(|_| (choose(0) as i32, choose(1), (choose(2).unsigned_abs() % 5) as usize))
            .map(|(x, y, z)| (x, if width > 1 { y } else { 0 }, if width > 2 { z } else { 0 }))
            .collect();
        // In the order of the columns as compared (the float's total order, NaN last).
        let key = |f: usize| [4u8, 1, 2, 3, 0][f];
        rows.sort_by_key(|&(x, y, z)| (x, y, key(z)));
        rows.dedup();
        let mut cols = vec![HostCol::I32(rows.iter().map(|r| r.0).collect())];
        if width > 1 {
            cols.push(HostCol::I64(rows.iter().map(|r| r.1).collect()));
        }
        if width > 2 {
            cols.push(HostCol::F64(rows.iter().map(|r| floats[r.2]).collect()));
        }
        cols
    }

    fn same(x: &[HostCol], y: &[HostCol]) -> bool {
        // Byte for byte (NaN equal to itself).
        let bits = |c: &HostCol| match c {
            HostCol::F64(v) => HostCol::U64(v.iter().map(|f| f.to_bits()).collect()),
            c => c.clone(),
        };
        x.len() == y.len() && x.iter().zip(y).all(|(p, q)| bits(p) == bits(q))
    }

    #[test]
    fn pieces_cut_on_the_merge_path_concatenate_to_the_whole_union() {
        let mut seed = 11u64;
        let mut next = move |m: i64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) as i64) % m
        };
        for width in 1..=3 {
            for (na, nb, spread) in [
                (0, 0, 50),
                (0, 37, 50),
                (41, 0, 50),
                (1, 1, 3),
                (1, 300, 40),
                (997, 613, 60),
                (500, 500, 8),
                (1000, 1, 1000),
            ] {
                let a = rows_of(na, width, &mut |_| next(spread));
                let b = rows_of(nb, width, &mut |_| next(spread));
                // Shared rows (many, on a narrow spread), and `b` without them.
                let b_only = {
                    let (ra, rb): (Vec<&HostCol>, Vec<&HostCol>) = (a.iter().collect(), b.iter().collect());
                    let na = a[0].len();
                    let keep: Vec<u32> = (0..b[0].len())
                        .filter(|&y| (0..na).all(|x| cmp_at(&ra, x, &rb, y) != Ordering::Equal))
                        .map(|y| y as u32)
                        .collect();
                    b.iter().map(|c| c.try_pick(&keep, "test").unwrap()).collect::<Vec<_>>()
                };
                for (b, disjoint) in [(&b, false), (&b_only, true), (&b, true)] {
                    let want = whole(&a, b, disjoint);
                    for step in [1, 2, 3, 7, 64, 5000] {
                        let (got, pieces) = pieced(&a, b, disjoint, step);
                        assert!(
                            same(&got, &want),
                            "width {width}, sides {na}/{nb}, disjoint {disjoint}, step {step}"
                        );
                        let n = a[0].len() + b[0].len();
                        assert!(pieces <= n.max(1), "{pieces} pieces of {n} rows");
                    }
                }
            }
        }
    }

    #[test]
    fn rows_named_by_a_piece_are_rows_of_the_whole_sides() {
        assert_eq!(
            rebase_sides("share a row (row 3 of a, row 0 of b)", 100, 7),
            "share a row (row 103 of a, row 7 of b)"
        );
        assert_eq!(
            rebase_sides("no row here; row x of a; row 5", 1, 2),
            "no row here; row x of a; row 5"
        );
    }

    #[test]
    fn a_run_of_one_side_is_one_piece_and_equal_rows_share_a_piece() {
        let col = |v: &[i32]| vec![HostCol::I32(v.to_vec())];
        // All of `a` before all of `b`: two pieces for any step short of both sides.
        let (a, b) = (col(&(0..100).collect::<Vec<_>>()), col(&(100..250).collect::<Vec<_>>()));
        for step in [1, 10, 249] {
            let (got, pieces) = pieced(&a, &b, true, step);
            assert!(same(&got, &col(&(0..250).collect::<Vec<_>>())));
            assert_eq!(pieces, 2, "step {step}");
        }
        // The same rows on both sides: every cut falls between pairs of equal rows.
        let (a, b) = (col(&[1, 2, 3, 4, 5]), col(&[1, 2, 3, 4, 5]));
        let (ra, rb): (Vec<&HostCol>, Vec<&HostCol>) = (a.iter().collect(), b.iter().collect());
        for d in 0..=10 {
            let (i, j) = cut_at(&ra, 5, &rb, 5, (0, 0), d);
            assert_eq!(i, j, "diagonal {d}");
            assert!(i + j >= d && i + j <= d + 1);
        }
        let (got, pieces) = pieced(&a, &b, false, 1);
        assert!(same(&got, &a));
        assert_eq!(pieces, 5);
        // Interleaved sides: the cut at each diagonal is the merge's.
        let (a, b) = (col(&[0, 2, 4, 6]), col(&[1, 3, 5, 7]));
        let (ra, rb): (Vec<&HostCol>, Vec<&HostCol>) = (a.iter().collect(), b.iter().collect());
        for d in 0..=8 {
            assert_eq!(co_rank(&ra, 4, &rb, 4, (0, 0), d), (d.div_ceil(2), d / 2));
        }
    }
}
