//! The classic Leapfrog Triejoin (Veldhuizen; seed 000 §1, see
//! `../shared/research/seeds-lftj.md`) on the CPU: depth-first, one leapfrog join per
//! variable, galloping seeks (exponential steps, then a binary search), over tries in the
//! layout of the `TrieBuild` kernel.
//!
//! This is not a kernel of the IR: the CPU backend runs the breadth-first LFTJ kernels the
//! GPU runs (`TrieBuild`, `RootRange`, `RangeCount`, `Expand`, `SortedSearch`,
//! `IntersectCount`), which keeps
//! the two backends identical but is far slower on a CPU than the iterator algorithm. This
//! module is the baseline the graph benchmarks compare with (`foxbench clique`).
//!
//! - A trie of arity m is `values_0 … values_{m-1}` and `start_0 … start_{m-2}`: the
//!   children of node j of level d are the nodes `start_d[j] .. start_d[j+1]` of level d+1,
//!   and the children of a node are strictly ascending ([`Trie`] builds one, [`TrieRef`]
//!   borrows the levels of one built elsewhere, e.g. by the `TrieBuild` kernel).
//! - A query is a list of [`Atom`]s over the variables `0 .. n_vars` (the global variable
//!   order): each atom binds, level by level, the variables it lists, in ascending order.
//!   Several atoms may share one trie. Atoms with the same trie and the same variables up
//!   to a level always sit at the same node there, so each level intersects only the
//!   distinct ones (a k-clique query over one edge trie intersects k-1 lists at the last
//!   level, not more).
//! - Each variable intersects the children lists of its atoms' current nodes, shortest
//!   first. When the shortest belongs to an atom that binds no later variable (its
//!   position is not needed), the lists of such atoms are intersected first (a
//!   branch-free merge of blocks of 8 values, or galloping when one list is over 16 times
//!   longer, after cutting both to the range of values they share), and the result drives
//!   a galloping search of the others; otherwise the leapfrog proper runs.
//! - [`count`] counts without enumerating the last variable: its lists are intersected and
//!   only the size is kept; [`collect`] returns the results as one column per variable in
//!   lexicographic order; [`for_each`] calls back with each result, sequentially.
//! - [`count`] and [`collect`] run on rayon's pool: the first variable's values are split
//!   into many more pieces than threads (work stealing), and a value whose second-level
//!   intersection is large is split again over the second variable, so a hub of a skewed
//!   graph does not serialise the run. The results do not depend on the thread count.

use rayon::prelude::*;
use std::ops::Range;

/// The element types a trie can hold.
pub trait Key: Copy + Ord + Send + Sync + std::fmt::Debug {}
impl Key for i32 {}
impl Key for i64 {}
impl Key for u32 {}
impl Key for u64 {}

/// A trie in the `TrieBuild` layout, owned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trie<T> {
    values: Vec<Vec<T>>,
    starts: Vec<Vec<u32>>,
}

/// A trie in the `TrieBuild` layout, borrowed: per level `values_d`, and for every level
/// but the last `start_d` (`len(values_d) + 1` child offsets into level d+1).
#[derive(Clone, Debug)]
pub struct TrieRef<'a, T> {
    values: Vec<&'a [T]>,
    starts: Vec<&'a [u32]>,
}

/// One atom of a join: a trie and the variables its levels bind, ascending.
#[derive(Clone, Debug)]
pub struct Atom<'a, T> {
    pub trie: &'a TrieRef<'a, T>,
    pub vars: Vec<usize>,
}

impl<'a, T> Atom<'a, T> {
    pub fn new(trie: &'a TrieRef<'a, T>, vars: &[usize]) -> Atom<'a, T> {
        Atom {
            trie,
            vars: vars.to_vec(),
        }
    }
}

impl<T: Key> Trie<T> {
    /// The trie of a relation given as columns sorted lexicographically, without
    /// duplicate rows (checked).
    pub fn from_sorted(cols: &[&[T]]) -> Result<Trie<T>, String> {
        let n = check_columns(cols)?;
        if let Some(i) = (1..n).into_par_iter().find_first(|&i| {
            cols.iter().map(|c| c[i - 1].cmp(&c[i])).find(|o| o.is_ne()) != Some(std::cmp::Ordering::Less)
        }) {
            return Err(format!("rows {} and {i} are not in strictly ascending order", i - 1));
        }
        Trie::build_sorted(cols)
    }

    /// The trie of the pairs `(x, y)`, in any order and with duplicates (they are sorted
    /// and removed).
    pub fn from_pairs(mut pairs: Vec<(T, T)>) -> Result<Trie<T>, String> {
        pairs.par_sort_unstable();
        pairs.dedup();
        if u32::try_from(pairs.len()).is_err() {
            return Err(format!("{} rows are more than a trie holds (2^32 - 1)", pairs.len()));
        }
        let x = fox_runtime::alloc::try_par_collect(pairs.par_iter().map(|p| p.0), TRIE)?;
        let y = fox_runtime::alloc::try_par_collect(pairs.par_iter().map(|p| p.1), TRIE)?;
        drop(pairs);
        Trie::build_sorted(&[&x, &y])
    }

    /// Builds the levels of sorted, distinct columns of at most `u32::MAX` rows; an error
    /// when memory runs out.
    fn build_sorted(cols: &[&[T]]) -> Result<Trie<T>, String> {
        use fox_runtime::alloc::{try_par_collect, try_to_vec, try_with_capacity};
        let n = cols.first().map_or(0, |c| c.len());
        let mut values = Vec::with_capacity(cols.len());
        let mut starts = Vec::with_capacity(cols.len().saturating_sub(1));
        // The rows that start a node of the previous level.
        let mut prev: Option<Vec<u32>> = None;
        for (d, col) in cols.iter().enumerate() {
            let last = d + 1 == cols.len();
            // Rows that start a node of level d: every row at the last level (the rows are
            // distinct), otherwise where the prefix of length d+1 changes.
            let nodes: Option<Vec<u32>> = if last {
                None
            } else {
                let flags: Vec<bool> = try_par_collect(
                    (0..n)
                        .into_par_iter()
                        .map(|i| i == 0 || cols[..=d].iter().any(|c| c[i] != c[i - 1])),
                    TRIE,
                )?;
                let mut nd = try_with_capacity(flags.iter().filter(|&&f| f).count(), TRIE)?;
                nd.extend((0..n as u32).filter(|&i| flags[i as usize]));
                Some(nd)
            };
            if let Some(p) = &prev {
                // start_{d-1}[j]: the rank, among level d's node rows, of parent j's row.
                let mut start = try_with_capacity(p.len() + 1, TRIE)?;
                match &nodes {
                    None => start.extend_from_slice(p),
                    Some(nd) => {
                        let mut k = 0usize;
                        for &r in p {
                            while nd[k] < r {
                                k += 1;
                            }
                            start.push(k as u32);
                        }
                    }
                }
                start.push(nodes.as_ref().map_or(n, Vec::len) as u32);
                starts.push(start);
            }
            values.push(match &nodes {
                None => try_to_vec(col, TRIE)?,
                Some(nd) => try_par_collect(nd.par_iter().map(|&i| col[i as usize]), TRIE)?,
            });
            prev = nodes;
        }
        Ok(Trie { values, starts })
    }
}

impl<T> Trie<T> {
    pub fn arity(&self) -> usize {
        self.values.len()
    }

    /// The number of rows (leaves).
    pub fn len(&self) -> usize {
        self.values.last().map_or(0, Vec::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The level `d`: its values, and its child offsets unless it is the last.
    pub fn level(&self, d: usize) -> (&[T], Option<&[u32]>) {
        (&self.values[d], self.starts.get(d).map(Vec::as_slice))
    }

    /// The bytes the levels take.
    pub fn bytes(&self) -> usize {
        self.values
            .iter()
            .map(|v| v.len() * std::mem::size_of::<T>())
            .sum::<usize>()
            + self.starts.iter().map(|s| s.len() * 4).sum::<usize>()
    }

    /// The trie borrowed (it is valid by construction).
    pub fn as_ref(&self) -> TrieRef<'_, T> {
        TrieRef {
            values: self.values.iter().map(Vec::as_slice).collect(),
            starts: self.starts.iter().map(Vec::as_slice).collect(),
        }
    }
}

impl<'a, T: Key> TrieRef<'a, T> {
    /// Borrows levels built elsewhere (e.g. the outputs of the `TrieBuild` kernel),
    /// checking the layout: the lengths and bounds of the child offsets, and that the
    /// children of every node are strictly ascending.
    pub fn new(values: Vec<&'a [T]>, starts: Vec<&'a [u32]>) -> Result<TrieRef<'a, T>, String> {
        if values.is_empty() {
            return Err("a trie needs at least one level".into());
        }
        if starts.len() + 1 != values.len() {
            return Err(format!(
                "a trie of {} levels needs {} child offset arrays, not {}",
                values.len(),
                values.len() - 1,
                starts.len()
            ));
        }
        for (d, s) in starts.iter().enumerate() {
            if s.len() != values[d].len() + 1 {
                return Err(format!(
                    "start_{d} has {} entries for {} nodes (needs one more)",
                    s.len(),
                    values[d].len()
                ));
            }
            if s[0] != 0 || s[s.len() - 1] as usize != values[d + 1].len() {
                return Err(format!(
                    "start_{d} must run from 0 to {} (the nodes of level {}), not {} to {}",
                    values[d + 1].len(),
                    d + 1,
                    s[0],
                    s[s.len() - 1]
                ));
            }
            if let Some(j) = (0..s.len() - 1).into_par_iter().find_first(|&j| s[j] >= s[j + 1]) {
                return Err(format!(
                    "node {j} of level {d} has no children (start_{d} is {} then {})",
                    s[j],
                    s[j + 1]
                ));
            }
        }
        let ascending = |v: &[T]| v.windows(2).all(|w| w[0] < w[1]);
        if !ascending(values[0]) {
            return Err("level 0 is not strictly ascending".into());
        }
        for (d, s) in starts.iter().enumerate() {
            let level = values[d + 1];
            if let Some(j) = (0..s.len() - 1)
                .into_par_iter()
                .find_first(|&j| !ascending(&level[s[j] as usize..s[j + 1] as usize]))
            {
                return Err(format!(
                    "the children of node {j} of level {d} are not strictly ascending"
                ));
            }
        }
        Ok(TrieRef { values, starts })
    }

    pub fn arity(&self) -> usize {
        self.values.len()
    }
}

/// The number of rows of equal-length columns (at least one, at most `u32::MAX` rows).
fn check_columns<T>(cols: &[&[T]]) -> Result<usize, String> {
    let Some(first) = cols.first() else {
        return Err("a trie needs at least one column".into());
    };
    let n = first.len();
    if let Some((c, col)) = cols.iter().enumerate().find(|(_, c)| c.len() != n) {
        return Err(format!("column {c} has {} rows, column 0 has {n}", col.len()));
    }
    if u32::try_from(n).is_err() {
        return Err(format!("{n} rows are more than a trie holds (2^32 - 1)"));
    }
    Ok(n)
}

/// What a trie is called in out-of-memory messages.
const TRIE: &str = "the trie of the edges";

/// The number of threads [`count`] and [`collect`] use (rayon's current pool).
pub fn threads() -> usize {
    rayon::current_num_threads()
}

/// The number of results of the join of `atoms` over the variables `0 .. n_vars`.
pub fn count<T: Key>(atoms: &[Atom<'_, T>], n_vars: usize) -> Result<u64, String> {
    let plan = Plan::new(atoms, n_vars)?;
    Ok(plan.par_run::<Counter>().0)
}

/// The results of the join, one column per variable, in lexicographic order.
pub fn collect<T: Key>(atoms: &[Atom<'_, T>], n_vars: usize) -> Result<Vec<Vec<T>>, String> {
    let plan = Plan::new(atoms, n_vars)?;
    let (n, rows) = plan.par_run::<Rows>();
    let mut cols: Vec<Vec<T>> = (0..n_vars).map(|_| Vec::with_capacity(n as usize)).collect();
    for row in rows.chunks_exact(n_vars) {
        for (c, &v) in cols.iter_mut().zip(row) {
            c.push(v);
        }
    }
    Ok(cols)
}

/// Calls `f` with each result (the values of the variables `0 .. n_vars`), in
/// lexicographic order, on the calling thread.
pub fn for_each<T: Key>(atoms: &[Atom<'_, T>], n_vars: usize, mut f: impl FnMut(&[T])) -> Result<(), String> {
    let plan = Plan::new(atoms, n_vars)?;
    let mut frames = plan.frames();
    let mut pos = vec![0; plan.groups.len()];
    let Some(&first) = plan.first_values() else {
        return Ok(());
    };
    let mut vals = vec![first; n_vars];
    plan.rec(&mut Callback(&mut f), 0, &mut pos, &mut vals, &mut frames);
    Ok(())
}

/// The trie of the edges `(x[i], y[i])` with `x[i] < y[i]`, sorted and without
/// duplicates: the only edges the k-clique query `E(v_i, v_j)` for all `i < j` with
/// `v_0 < … < v_{k-1}` can use (for a symmetric relation, each undirected edge once).
pub fn ascending_edge_trie<T: Key>(x: &[T], y: &[T]) -> Result<Trie<T>, String> {
    if x.len() != y.len() {
        return Err(format!("the edge columns have {} and {} rows", x.len(), y.len()));
    }
    let ascending = x.par_iter().zip(y.par_iter()).filter(|(a, b)| a < b).count();
    let mut pairs: Vec<(T, T)> = fox_runtime::alloc::try_with_capacity(ascending, TRIE)?;
    pairs.par_extend(
        x.par_iter()
            .zip(y.par_iter())
            .filter(|(a, b)| a < b)
            .map(|(&a, &b)| (a, b)),
    );
    Trie::from_pairs(pairs)
}

/// The k-clique query over an edge trie: the atoms `E(v_i, v_j)` for all `i < j < k`.
pub fn clique_atoms<'a, T>(edges: &'a TrieRef<'a, T>, k: usize) -> Vec<Atom<'a, T>> {
    let mut atoms = Vec::new();
    for i in 0..k {
        for j in i + 1..k {
            atoms.push(Atom::new(edges, &[i, j]));
        }
    }
    atoms
}

/// The number of k-cliques (k ≥ 2) of a graph given by [`ascending_edge_trie`], on all
/// of rayon's threads.
pub fn count_cliques<T: Key>(edges: &Trie<T>, k: usize) -> Result<u64, String> {
    if k < 2 || edges.arity() != 2 {
        return Err(format!(
            "k-cliques need k ≥ 2 (not {k}) and a trie of arity 2 (not {})",
            edges.arity()
        ));
    }
    let t = edges.as_ref();
    count(&clique_atoms(&t, k), k)
}

/// Atoms that sit at the same node at a level: the same trie and the same variables up
/// to that level.
struct Group<'a, T> {
    values: &'a [T],
    /// The group of the atom's node at the previous level, and that level's offsets.
    parent: Option<(usize, &'a [u32])>,
    /// Whether a later group is its child (its node's position is needed).
    needed: bool,
}

/// A checked query: the distinct groups of each variable.
struct Plan<'a, T> {
    groups: Vec<Group<'a, T>>,
    /// The groups of each variable (contiguous).
    levels: Vec<Range<usize>>,
}

/// The intersection state of one variable, reused across its nodes.
struct Frame<'a, T> {
    group: Vec<usize>,
    lo: Vec<usize>,
    slices: Vec<&'a [T]>,
    idx: Vec<usize>,
    /// The lists (indices) whose positions are not needed, and those whose are.
    free: Vec<usize>,
    need: Vec<usize>,
    /// The intersection of the free lists, and a scratch list.
    buf: Vec<T>,
    tmp: Vec<T>,
}

/// What the depth-first walk does with results.
trait Sink<T> {
    /// Only the number of results is wanted (the last level is intersected, not walked).
    const COUNT: bool;
    fn emit(&mut self, vals: &[T]);
}

#[derive(Clone, Copy)]
struct Counter;
#[derive(Clone, Copy)]
struct Rows;
struct RowSink<'v, T>(&'v mut Vec<T>);
struct Callback<'f, F>(&'f mut F);

impl<T> Sink<T> for Counter {
    const COUNT: bool = true;
    fn emit(&mut self, _: &[T]) {}
}

impl<T: Copy> Sink<T> for RowSink<'_, T> {
    const COUNT: bool = false;
    fn emit(&mut self, vals: &[T]) {
        self.0.extend_from_slice(vals);
    }
}

impl<T, F: FnMut(&[T])> Sink<T> for Callback<'_, F> {
    const COUNT: bool = false;
    fn emit(&mut self, vals: &[T]) {
        (self.0)(vals)
    }
}

/// The parallel modes: counting, or collecting rows (row-major, in order).
trait ParMode {
    const COUNT: bool;
}
impl ParMode for Counter {
    const COUNT: bool = true;
}
impl ParMode for Rows {
    const COUNT: bool = false;
}

/// Variables this deep or deeper are never split across threads.
const PAR_DEPTH: usize = 2;
/// A node below the first level is split across threads when every list of its
/// intersection has at least this many values.
const PAR_MIN: usize = 64;
/// The fewest values of such a node a thread takes at once.
const PAR_PIECE: usize = 8;

impl<'a, T: Key> Plan<'a, T> {
    fn new(atoms: &[Atom<'a, T>], n_vars: usize) -> Result<Plan<'a, T>, String> {
        if n_vars == 0 {
            return Err("a join needs at least one variable".into());
        }
        for (a, atom) in atoms.iter().enumerate() {
            if atom.vars.len() != atom.trie.arity() {
                return Err(format!(
                    "atom {a} lists {} variables for a trie of arity {}",
                    atom.vars.len(),
                    atom.trie.arity()
                ));
            }
            if let Some(&v) = atom.vars.iter().find(|&&v| v >= n_vars) {
                return Err(format!("atom {a} uses variable {v}, but there are {n_vars}"));
            }
            if atom.vars.windows(2).any(|w| w[0] >= w[1]) {
                return Err(format!(
                    "the variables of atom {a} ({:?}) are not in the variable order (ascending)",
                    atom.vars
                ));
            }
        }
        let mut groups: Vec<Group<'a, T>> = Vec::new();
        // Per group, the key that identifies it: (atom of its first member, depth).
        let mut keys: Vec<(usize, usize)> = Vec::new();
        // slot[a][d]: the group of atom a at depth d.
        let mut slot: Vec<Vec<usize>> = atoms.iter().map(|a| vec![0; a.vars.len()]).collect();
        let mut levels = Vec::with_capacity(n_vars);
        for v in 0..n_vars {
            let begin = groups.len();
            for (a, atom) in atoms.iter().enumerate() {
                let Some(d) = atom.vars.iter().position(|&x| x == v) else {
                    continue;
                };
                let same = |&(b, e): &(usize, usize)| {
                    e == d && std::ptr::eq(atoms[b].trie, atom.trie) && atoms[b].vars[..=d] == atom.vars[..=d]
                };
                if let Some(g) = keys[begin..].iter().position(same) {
                    slot[a][d] = begin + g;
                    continue;
                }
                slot[a][d] = groups.len();
                keys.push((a, d));
                let parent = (d > 0).then(|| (slot[a][d - 1], atom.trie.starts[d - 1]));
                if let Some((p, _)) = parent {
                    groups[p].needed = true;
                }
                groups.push(Group {
                    values: atom.trie.values[d],
                    parent,
                    needed: false,
                });
            }
            if groups.len() == begin {
                return Err(format!("variable {v} is not bound by any atom"));
            }
            levels.push(begin..groups.len());
        }
        Ok(Plan { groups, levels })
    }

    fn frames(&self) -> Vec<Frame<'a, T>> {
        self.levels
            .iter()
            .map(|r| Frame {
                group: Vec::with_capacity(r.len()),
                lo: Vec::with_capacity(r.len()),
                slices: Vec::with_capacity(r.len()),
                idx: Vec::with_capacity(r.len()),
                free: Vec::with_capacity(r.len()),
                need: Vec::with_capacity(r.len()),
                buf: Vec::new(),
                tmp: Vec::new(),
            })
            .collect()
    }

    /// Some value of the first level (to initialise value buffers); `None` when the
    /// result is empty for lack of values.
    fn first_values(&self) -> Option<&T> {
        self.groups[self.levels[0].clone()]
            .iter()
            .map(|g| g.values.first())
            .min()
            .flatten()
    }

    /// Fills the frame with the lists to intersect at variable `v` under the nodes `pos`
    /// of the earlier variables, shortest first; false when one is empty.
    fn open(&self, v: usize, pos: &[usize], f: &mut Frame<'a, T>) -> bool {
        f.group.clear();
        f.lo.clear();
        f.slices.clear();
        for g in self.levels[v].clone() {
            let grp = &self.groups[g];
            let (lo, hi) = match grp.parent {
                None => (0, grp.values.len()),
                Some((p, starts)) => (starts[pos[p]] as usize, starts[pos[p] + 1] as usize),
            };
            if lo >= hi {
                return false;
            }
            f.group.push(g);
            f.lo.push(lo);
            f.slices.push(&grp.values[lo..hi]);
        }
        // Shortest first: it drives the leapfrog (insertion sort: a few lists).
        for i in 1..f.slices.len() {
            let mut j = i;
            while j > 0 && f.slices[j - 1].len() > f.slices[j].len() {
                f.slices.swap(j - 1, j);
                f.lo.swap(j - 1, j);
                f.group.swap(j - 1, j);
                j -= 1;
            }
        }
        f.idx.clear();
        f.idx.resize(f.slices.len(), 0);
        true
    }

    /// The depth-first walk from variable `v` (the earlier ones bound in `pos` and
    /// `vals`); `frames[0]` belongs to `v`. Returns the number of results.
    fn rec<S: Sink<T>>(
        &self,
        sink: &mut S,
        v: usize,
        pos: &mut [usize],
        vals: &mut [T],
        frames: &mut [Frame<'a, T>],
    ) -> u64 {
        let (f, rest) = frames.split_first_mut().expect("one frame per variable");
        if !self.open(v, pos, f) {
            return 0;
        }
        let last = v + 1 == self.levels.len();
        let mut total = 0;
        if !self.groups[f.group[0]].needed {
            // The shortest list needs no position (at the last variable none does): the
            // lists that need none are intersected first, shortest first, and the result
            // drives, galloping through the lists whose positions are needed.
            f.free.clear();
            f.need.clear();
            for (i, &g) in f.group.iter().enumerate() {
                if self.groups[g].needed {
                    f.need.push(i);
                } else {
                    f.free.push(i);
                }
            }
            let m = f.free.len();
            if S::COUNT && last && f.need.is_empty() {
                return match m {
                    1 => f.slices[0].len() as u64,
                    2 => intersect2(f.slices[0], f.slices[1]),
                    _ => {
                        let n = intersect_lists(&f.slices, &f.free[..m - 1], &mut f.buf, &mut f.tmp);
                        intersect2(&f.buf[..n], f.slices[f.free[m - 1]])
                    }
                };
            }
            let driver: &[T] = if m == 1 {
                f.slices[f.free[0]]
            } else {
                let n = intersect_lists(&f.slices, &f.free, &mut f.buf, &mut f.tmp);
                &f.buf[..n]
            };
            'values: for &x in driver {
                for &i in &f.need {
                    let s = f.slices[i];
                    let j = gallop(s, f.idx[i], &x);
                    f.idx[i] = j;
                    if j == s.len() {
                        break 'values;
                    }
                    if s[j] != x {
                        continue 'values;
                    }
                }
                vals[v] = x;
                if last {
                    sink.emit(vals);
                    total += 1;
                } else {
                    for &i in &f.need {
                        pos[f.group[i]] = f.lo[i] + f.idx[i];
                    }
                    total += self.rec(sink, v + 1, pos, vals, rest);
                }
            }
            return total;
        }
        if f.slices.len() == 1 {
            let (g, lo, s) = (f.group[0], f.lo[0], f.slices[0]);
            for (i, &x) in s.iter().enumerate() {
                vals[v] = x;
                if last {
                    sink.emit(vals);
                    total += 1;
                } else {
                    pos[g] = lo + i;
                    total += self.rec(sink, v + 1, pos, vals, rest);
                }
            }
            return total;
        }
        while let Some(x) = leapfrog_search(&f.slices, &mut f.idx) {
            vals[v] = x;
            if last {
                sink.emit(vals);
                total += 1;
            } else {
                for i in 0..f.slices.len() {
                    pos[f.group[i]] = f.lo[i] + f.idx[i];
                }
                total += self.rec(sink, v + 1, pos, vals, rest);
            }
            f.idx[0] += 1;
        }
        total
    }

    /// The matches of variable `v` under `pos`: their values and, per match, the
    /// position of each of the frame's groups.
    fn matches(&self, v: usize, pos: &[usize], f: &mut Frame<'a, T>) -> (Vec<T>, Vec<usize>) {
        let (mut xs, mut ps) = (Vec::new(), Vec::new());
        if !self.open(v, pos, f) {
            return (xs, ps);
        }
        if f.slices.len() == 1 {
            xs.extend_from_slice(f.slices[0]);
            ps.extend(f.lo[0]..f.lo[0] + f.slices[0].len());
            return (xs, ps);
        }
        while let Some(x) = leapfrog_search(&f.slices, &mut f.idx) {
            xs.push(x);
            ps.extend(f.lo.iter().zip(&f.idx).map(|(l, i)| l + i));
            f.idx[0] += 1;
        }
        (xs, ps)
    }

    /// The whole join on rayon's pool: the number of results, and the rows (row-major)
    /// unless counting.
    fn par_run<M: ParMode>(&self) -> (u64, Vec<T>) {
        let Some(&first) = self.first_values() else {
            return (0, Vec::new());
        };
        let mut pos = vec![0; self.groups.len()];
        let mut vals = vec![first; self.levels.len()];
        let mut frames = self.frames();
        self.par_level::<M>(0, &mut pos, &mut vals, &mut frames)
    }

    /// The walk from variable `v`, split across threads when `v` is shallow and its
    /// node is large enough; `frames` holds one frame per variable.
    fn par_level<M: ParMode>(
        &self,
        v: usize,
        pos: &mut [usize],
        vals: &mut [T],
        frames: &mut [Frame<'a, T>],
    ) -> (u64, Vec<T>) {
        let last = v + 1 == self.levels.len();
        let seq = |pos: &mut [usize], vals: &mut [T], frames: &mut [Frame<'a, T>]| {
            if M::COUNT {
                (self.rec(&mut Counter, v, pos, vals, &mut frames[v..]), Vec::new())
            } else {
                let mut rows = Vec::new();
                let n = self.rec(&mut RowSink(&mut rows), v, pos, vals, &mut frames[v..]);
                (n, rows)
            }
        };
        if last || v >= PAR_DEPTH {
            return seq(pos, vals, frames);
        }
        if v > 0 {
            if !self.open(v, pos, &mut frames[v]) {
                return (0, Vec::new());
            }
            if frames[v].slices[0].len() < PAR_MIN {
                return seq(pos, vals, frames);
            }
        }
        let (xs, ps) = self.matches(v, pos, &mut frames[v]);
        if xs.is_empty() {
            return (0, Vec::new());
        }
        let groups = frames[v].group.clone();
        let k = groups.len();
        let threads = rayon::current_num_threads();
        // The first variable: many more pieces than threads, so that stealing evens out
        // the hubs. A node split below it: pieces of a few values (rayon splits them
        // further when threads are idle).
        let (min_len, max_len) = if v == 0 {
            (1, (xs.len() / (threads * 64)).max(1))
        } else {
            (PAR_PIECE, usize::MAX)
        };
        let (pos, vals) = (&*pos, &*vals);
        (0..xs.len())
            .into_par_iter()
            .with_min_len(min_len)
            .with_max_len(max_len)
            .map_init(
                || (pos.to_vec(), vals.to_vec(), self.frames()),
                |(pos, vals, frames), m| {
                    for (i, &g) in groups.iter().enumerate() {
                        pos[g] = ps[m * k + i];
                    }
                    vals[v] = xs[m];
                    self.par_level::<M>(v + 1, pos, vals, frames)
                },
            )
            .reduce(
                || (0, Vec::new()),
                |(n, mut a), (m, b)| {
                    if a.is_empty() {
                        (n + m, b)
                    } else {
                        a.extend_from_slice(&b);
                        (n + m, a)
                    }
                },
            )
    }
}

/// The first index at or after `lo` whose value is not below `target` (`s.len()` if
/// none), all values before `lo` being below it: steps of 1, 2, 4, … from `lo`, then a
/// binary search in the last step.
#[inline]
fn gallop<T: Ord>(s: &[T], mut lo: usize, target: &T) -> usize {
    let n = s.len();
    let mut hi = lo;
    let mut step = 1;
    while hi < n && s[hi] < *target {
        lo = hi + 1;
        hi += step;
        step <<= 1;
    }
    let hi = hi.min(n);
    lo + s[lo..hi].partition_point(|x| x < target)
}

/// Moves the positions `idx` of the sorted, distinct, non-empty lists `slices` (at least
/// two) forward to the next value present in all of them, and returns it; `None` when a
/// list runs out. The leapfrog: the list behind seeks the largest current value.
#[inline]
fn leapfrog_search<T: Ord + Copy>(slices: &[&[T]], idx: &mut [usize]) -> Option<T> {
    let k = slices.len();
    let mut max = *slices[0].get(idx[0])?;
    for i in 1..k {
        max = max.max(*slices[i].get(idx[i])?);
    }
    let (mut i, mut agree) = (0, 0);
    loop {
        let s = slices[i];
        let mut j = idx[i];
        if s[j] < max {
            j = gallop(s, j + 1, &max);
            if j == s.len() {
                idx[i] = j;
                return None;
            }
            idx[i] = j;
        }
        if s[j] == max {
            agree += 1;
            if agree == k {
                return Some(max);
            }
        } else {
            max = s[j];
            agree = 1;
        }
        i += 1;
        if i == k {
            i = 0;
        }
    }
}

/// Intersects the sorted, distinct lists `slices[ix[0]]`, `slices[ix[1]]`, … (at least
/// two, shortest first) into `buf[..n]` and returns `n`; `tmp` is scratch.
fn intersect_lists<T: Ord + Copy>(slices: &[&[T]], ix: &[usize], buf: &mut Vec<T>, tmp: &mut Vec<T>) -> usize {
    let mut n = intersect_into(slices[ix[0]], slices[ix[1]], buf);
    for &i in &ix[2..] {
        if n == 0 {
            break;
        }
        n = intersect_into(&buf[..n], slices[i], tmp);
        std::mem::swap(buf, tmp);
    }
    n
}

/// The parts of two sorted lists within the range of values both span (by galloping
/// from each end): what lies outside cannot match.
#[inline]
fn overlap<'s, T: Ord + Copy>(a: &'s [T], b: &'s [T]) -> (&'s [T], &'s [T]) {
    let (Some(&a0), Some(&b0)) = (a.first(), b.first()) else {
        return (&[], &[]);
    };
    let (a, b) = if a0 < b0 {
        (&a[gallop(a, 0, &b0)..], b)
    } else {
        (a, &b[gallop(b, 0, &a0)..])
    };
    let (Some(&a1), Some(&b1)) = (a.last(), b.last()) else {
        return (&[], &[]);
    };
    if a1 > b1 {
        (&a[..a.len() - gallop_back(a, &b1)], b)
    } else {
        (a, &b[..b.len() - gallop_back(b, &a1)])
    }
}

/// The number of values at the end of a sorted list that are above `target` (galloping
/// from the end).
#[inline]
fn gallop_back<T: Ord>(s: &[T], target: &T) -> usize {
    let n = s.len();
    // Count from the end: the k-th value from the end is s[n - 1 - k].
    let (mut lo, mut hi, mut step) = (0, 0, 1);
    while hi < n && s[n - 1 - hi] > *target {
        lo = hi + 1;
        hi += step;
        step <<= 1;
    }
    let hi = hi.min(n);
    // Among the last-from-end indices lo..hi, the values above `target` come first.
    let w = &s[n - hi..n - lo];
    lo + (w.len() - w.partition_point(|x| x <= target))
}

/// Lists this many times longer than the other are galloped through, not merged.
const GALLOP_RATIO: usize = 16;

/// The size of the intersection of two sorted, distinct lists: a block merge when their
/// lengths are close, galloping through the longer one otherwise.
fn intersect2<T: Ord + Copy>(a: &[T], b: &[T]) -> u64 {
    let (a, b) = overlap(a, b);
    let (a, b) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if a.is_empty() {
        return 0;
    }
    if b.len() > GALLOP_RATIO * a.len() {
        let mut n = 0u64;
        let mut j = 0;
        for x in a {
            j = gallop(b, j, x);
            if j == b.len() {
                break;
            }
            n += u64::from(b[j] == *x);
        }
        return n;
    }
    merge_count(a, b)
}

/// The intersection of two sorted, distinct lists into `out[..n]` (grown as needed);
/// returns `n`. Like [`intersect2`], with the values written (branch-free).
fn intersect_into<T: Ord + Copy>(a: &[T], b: &[T], out: &mut Vec<T>) -> usize {
    let (a, b) = overlap(a, b);
    let (a, b) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    let Some(&first) = a.first() else {
        return 0;
    };
    if out.len() < a.len() {
        out.resize(a.len(), first);
    }
    let mut n = 0;
    if b.len() > GALLOP_RATIO * a.len() {
        let mut j = 0;
        for &x in a {
            j = gallop(b, j, &x);
            if j == b.len() {
                break;
            }
            out[n] = x;
            n += usize::from(b[j] == x);
        }
        return n;
    }
    // Only values of `a` are written, each at or before its own index.
    let (mut i, mut j) = (0, 0);
    while i + BLOCK <= a.len() && j + BLOCK <= b.len() {
        let ba: [T; BLOCK] = a[i..i + BLOCK].try_into().expect("a block");
        let bb: &[T; BLOCK] = b[j..j + BLOCK].try_into().expect("a block");
        for x in ba {
            let hit = bb.iter().fold(false, |h, y| h | (*y == x));
            out[n] = x;
            n += usize::from(hit);
        }
        let (la, lb) = (ba[BLOCK - 1], bb[BLOCK - 1]);
        i += if la <= lb { BLOCK } else { 0 };
        j += if lb <= la { BLOCK } else { 0 };
    }
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        out[n] = x;
        n += usize::from(x == y);
        i += usize::from(x <= y);
        j += usize::from(y <= x);
    }
    n
}

/// The block of the block merge.
const BLOCK: usize = 8;

/// The size of the intersection of two sorted, distinct lists by merging blocks of
/// [`BLOCK`] values: all pairs of the two current blocks are compared (vectorised), then
/// the block with the smaller last value is passed (both when equal). Every pair of
/// blocks that shares a value is met once. The rest is merged value by value.
fn merge_count<T: Ord + Copy>(a: &[T], b: &[T]) -> u64 {
    let (mut i, mut j, mut n) = (0, 0, 0u64);
    while i + BLOCK <= a.len() && j + BLOCK <= b.len() {
        let ba: &[T; BLOCK] = a[i..i + BLOCK].try_into().expect("a block");
        let bb: &[T; BLOCK] = b[j..j + BLOCK].try_into().expect("a block");
        let mut c = 0u32;
        for x in ba {
            for y in bb {
                c += u32::from(x == y);
            }
        }
        n += u64::from(c);
        let (la, lb) = (ba[BLOCK - 1], bb[BLOCK - 1]);
        i += if la <= lb { BLOCK } else { 0 };
        j += if lb <= la { BLOCK } else { 0 };
    }
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        n += u64::from(x == y);
        i += usize::from(x <= y);
        j += usize::from(y <= x);
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeSet, HashSet};

    /// splitmix64.
    fn rng(seed: u64) -> impl FnMut() -> u64 {
        let mut s = seed;
        move || {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
    }

    /// The oriented edges (x < y) of an undirected graph given as any pairs.
    fn oriented(edges: &[(i32, i32)]) -> Vec<(i32, i32)> {
        edges
            .iter()
            .filter(|(a, b)| a != b)
            .map(|&(a, b)| (a.min(b), a.max(b)))
            .collect()
    }

    fn random_graph(n: i32, m: usize, seed: u64) -> Vec<(i32, i32)> {
        let mut r = rng(seed);
        (0..m)
            .map(|_| ((r() % n as u64) as i32, (r() % n as u64) as i32))
            .collect()
    }

    fn lftj_cliques(edges: &[(i32, i32)], k: usize) -> u64 {
        let o = oriented(edges);
        let (x, y): (Vec<i32>, Vec<i32>) = o.iter().copied().unzip();
        let trie = ascending_edge_trie(&x, &y).unwrap();
        // Both directions of every edge, as the `edge` relation holds them: the same trie.
        let (sx, sy): (Vec<i32>, Vec<i32>) = edges.iter().flat_map(|&(a, b)| [(a, b), (b, a)]).unzip();
        assert_eq!(ascending_edge_trie(&sx, &sy).unwrap(), trie);
        assert_eq!(trie, Trie::from_pairs(o).unwrap());
        count_cliques(&trie, k).unwrap()
    }

    /// k-cliques by brute force over adjacency sets (each clique once, ascending).
    fn brute_cliques(edges: &[(i32, i32)], k: usize) -> u64 {
        use std::collections::BTreeMap;
        let mut out: BTreeMap<i32, BTreeSet<i32>> = BTreeMap::new();
        for (a, b) in oriented(edges) {
            out.entry(a).or_default().insert(b);
            out.entry(b).or_default();
        }
        fn grow(out: &BTreeMap<i32, BTreeSet<i32>>, clique: &mut Vec<i32>, k: usize) -> u64 {
            if clique.len() == k {
                return 1;
            }
            let cands: Vec<i32> = match clique.last() {
                None => out.keys().copied().collect(),
                Some(l) => out[l].iter().copied().collect(),
            };
            let mut n = 0;
            for v in cands {
                if clique.iter().all(|c| out[c].contains(&v)) {
                    clique.push(v);
                    n += grow(out, clique, k);
                    clique.pop();
                }
            }
            n
        }
        grow(&out, &mut Vec::new(), k)
    }

    fn binom(n: u64, k: u64) -> u64 {
        if k > n {
            return 0;
        }
        (0..k).fold(1, |acc, i| acc * (n - i) / (i + 1))
    }

    fn complete(n: i32) -> Vec<(i32, i32)> {
        (0..n).flat_map(|a| (0..n).map(move |b| (a, b))).collect()
    }

    #[test]
    fn cliques_of_random_graphs_match_brute_force() {
        for (n, m, seed) in [
            (10, 30, 1),
            (30, 200, 2),
            (60, 600, 3),
            (100, 1500, 4),
            (200, 800, 5),
            (40, 500, 6),
        ] {
            let g = random_graph(n, m, seed);
            for k in 3..=5 {
                assert_eq!(
                    lftj_cliques(&g, k),
                    brute_cliques(&g, k),
                    "G({n}, {m}) seed {seed}, k = {k}"
                );
            }
        }
    }

    #[test]
    fn complete_graphs() {
        for n in [1, 2, 3, 4, 7, 12, 30] {
            let g = complete(n);
            for k in 3..=5 {
                assert_eq!(lftj_cliques(&g, k), binom(n as u64, k as u64), "K{n}, k = {k}");
            }
        }
        // A hub big enough to be split across threads at the second level.
        let g = complete(150);
        assert_eq!(lftj_cliques(&g, 3), binom(150, 3));
        assert_eq!(lftj_cliques(&g, 4), binom(150, 4));
    }

    #[test]
    fn skewed_star_plus_clique() {
        // A star with centre 0 over 5000 leaves, a clique on 40 of them, and noise.
        let mut g: Vec<(i32, i32)> = (1..=5000).map(|v| (0, v)).collect();
        for a in 0..40 {
            for b in a + 1..40 {
                g.push((100 + a * 7, 100 + b * 7));
            }
        }
        g.extend(random_graph(5001, 3000, 9));
        for k in 3..=5 {
            assert_eq!(lftj_cliques(&g, k), brute_cliques(&g, k), "k = {k}");
        }
        // The same star with the centre last in the order (all edges point to it).
        let g2: Vec<(i32, i32)> = g.iter().map(|&(a, b)| (if a == 0 { 9999 } else { a }, b)).collect();
        assert_eq!(lftj_cliques(&g2, 3), brute_cliques(&g2, 3));
    }

    #[test]
    fn same_counts_on_one_thread_and_many() {
        let g = random_graph(300, 6000, 11);
        let many = lftj_cliques(&g, 4);
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| lftj_cliques(&g, 4));
        let four = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap()
            .install(|| lftj_cliques(&g, 4));
        assert_eq!(many, one);
        assert_eq!(many, four);
        assert_eq!(many, brute_cliques(&g, 4));
    }

    #[test]
    fn empty_relations_and_one_atom() {
        let empty = Trie::<i32>::from_pairs(Vec::new()).unwrap();
        let e = empty.as_ref();
        assert_eq!(count(&clique_atoms(&e, 3), 3).unwrap(), 0);
        assert!(collect(&clique_atoms(&e, 3), 3).unwrap().iter().all(Vec::is_empty));
        let trie = Trie::from_pairs(vec![(3, 4), (1, 2), (1, 5), (3, 4)]).unwrap();
        let t = trie.as_ref();
        // One atom: its rows.
        assert_eq!(count(&[Atom::new(&t, &[0, 1])], 2).unwrap(), 3);
        assert_eq!(
            collect(&[Atom::new(&t, &[0, 1])], 2).unwrap(),
            vec![vec![1, 1, 3], vec![2, 5, 4]]
        );
        // One atom binding variables 0 and 2, another binding 1: a product.
        let single = Trie::from_sorted(&[&[7i32, 8][..]]).unwrap();
        let s = single.as_ref();
        assert_eq!(count(&[Atom::new(&t, &[0, 2]), Atom::new(&s, &[1])], 3).unwrap(), 6);
        // Joined with an empty relation: nothing.
        assert_eq!(count(&[Atom::new(&t, &[0, 1]), Atom::new(&e, &[1, 2])], 3).unwrap(), 0);
        // A unary relation with itself.
        assert_eq!(count(&[Atom::new(&s, &[0]), Atom::new(&s, &[0])], 1).unwrap(), 2);
    }

    /// R(x, y), S(y, z), T(x, z) over three different relations, and a path R(x,y),
    /// S(y,z) (acyclic), against nested loops; listings too.
    #[test]
    fn general_joins_match_nested_loops() {
        let mut r = rng(42);
        let mut rel = |n: usize, dom: u64| -> Vec<(i64, i64)> {
            (0..n)
                .map(|_| ((r() % dom) as i64 - 5, (r() % dom) as i64 - 5))
                .collect()
        };
        for round in 0..5 {
            let (rr, ss, tt) = (rel(300, 25 + round), rel(250, 20), rel(400, 30));
            let sets: Vec<HashSet<(i64, i64)>> = [&rr, &ss, &tt].iter().map(|v| v.iter().copied().collect()).collect();
            let tries: Vec<Trie<i64>> = [&rr, &ss, &tt]
                .iter()
                .map(|v| Trie::from_pairs(v.to_vec()).unwrap())
                .collect();
            let refs: Vec<TrieRef<i64>> = tries.iter().map(Trie::as_ref).collect();
            let mut want = BTreeSet::new();
            let mut path = 0u64;
            for &(x, y) in &sets[0] {
                for &(y2, z) in &sets[1] {
                    if y2 == y {
                        path += 1;
                        if sets[2].contains(&(x, z)) {
                            want.insert((x, y, z));
                        }
                    }
                }
            }
            let atoms = [
                Atom::new(&refs[0], &[0, 1]),
                Atom::new(&refs[1], &[1, 2]),
                Atom::new(&refs[2], &[0, 2]),
            ];
            assert_eq!(count(&atoms, 3).unwrap(), want.len() as u64);
            let cols = collect(&atoms, 3).unwrap();
            let got: Vec<(i64, i64, i64)> = (0..cols[0].len())
                .map(|i| (cols[0][i], cols[1][i], cols[2][i]))
                .collect();
            assert_eq!(got, want.iter().copied().collect::<Vec<_>>());
            let mut seq = Vec::new();
            for_each(&atoms, 3, |v| seq.push((v[0], v[1], v[2]))).unwrap();
            assert_eq!(seq, got);
            assert_eq!(count(&atoms[..2], 3).unwrap(), path);
        }
    }

    #[test]
    fn listing_cliques_matches_counting() {
        let g = random_graph(80, 1200, 3);
        let trie = Trie::from_pairs(oriented(&g)).unwrap();
        let t = trie.as_ref();
        let atoms = clique_atoms(&t, 4);
        let cols = collect(&atoms, 4).unwrap();
        assert_eq!(cols[0].len() as u64, count(&atoms, 4).unwrap());
        let und: HashSet<(i32, i32)> = oriented(&g).into_iter().collect();
        for i in 0..cols[0].len() {
            let c: Vec<i32> = cols.iter().map(|col| col[i]).collect();
            assert!(c.windows(2).all(|w| w[0] < w[1]));
            for (a, &ca) in c.iter().enumerate() {
                assert!(c[a + 1..].iter().all(|&cb| und.contains(&(ca, cb))));
            }
        }
    }

    #[test]
    fn tries_have_the_triebuild_layout() {
        let x = [1i32, 1, 1, 2, 5, 5];
        let y = [1i32, 1, 2, 3, 0, 0];
        let z = [0i32, 4, 1, 2, 1, 9];
        let t = Trie::from_sorted(&[&x, &y, &z]).unwrap();
        assert_eq!(t.level(0), (&[1, 2, 5][..], Some(&[0u32, 2, 3, 4][..])));
        assert_eq!(t.level(1), (&[1, 2, 3, 0][..], Some(&[0u32, 2, 3, 4, 6][..])));
        assert_eq!(t.level(2), (&[0, 4, 1, 2, 1, 9][..], None));
        assert_eq!(t.len(), 6);
        // Borrowing checked levels, as the TrieBuild kernel's outputs would be.
        let (v0, s0) = t.level(0);
        let (v1, s1) = t.level(1);
        let (v2, _) = t.level(2);
        assert!(TrieRef::new(vec![v0, v1, v2], vec![s0.unwrap(), s1.unwrap()]).is_ok());
        assert!(TrieRef::new(vec![v0, v1, v2], vec![s0.unwrap()]).is_err());
        assert!(TrieRef::new(vec![v0, v1], vec![&[0, 2, 3, 3]]).is_err());
        assert!(TrieRef::new(vec![&[2, 1][..]], vec![]).is_err());
        assert!(TrieRef::new(vec![&[1, 2][..], &[5, 4, 6][..]], vec![&[0, 2, 3]]).is_err());
        assert!(Trie::from_sorted(&[&[1i32, 1][..], &[2, 2][..]]).is_err());
        assert!(Trie::from_sorted(&[&[2i32, 1][..]]).is_err());
        assert!(Trie::from_sorted(&[&[1i32, 2][..], &[2][..]]).is_err());
    }

    #[test]
    fn bad_queries_are_errors() {
        let trie = Trie::from_pairs(vec![(1, 2)]).unwrap();
        let t = trie.as_ref();
        assert!(count(&[Atom::new(&t, &[1, 0])], 2).is_err());
        assert!(count(&[Atom::new(&t, &[0])], 1).is_err());
        assert!(count(&[Atom::new(&t, &[0, 2])], 2).is_err());
        assert!(count(&[Atom::new(&t, &[0, 2])], 3).is_err(), "variable 1 unbound");
        assert!(count::<i32>(&[], 0).is_err());
    }

    #[test]
    fn gallop_and_intersections() {
        let s: Vec<i32> = (0..1000).map(|i| i * 3).collect();
        for t in -2..3005 {
            let want = s.partition_point(|&x| x < t);
            let from = s.partition_point(|&x| x < t - 50).min(want);
            assert_eq!(gallop(&s, from, &t), want, "{t}");
        }
        let a: Vec<i32> = (0..500).map(|i| i * 2).collect();
        let b: Vec<i32> = (0..20).map(|i| i * 7).collect();
        let want = b.iter().filter(|x| *x % 2 == 0).count() as u64;
        assert_eq!(intersect2(&a, &b), want);
        assert_eq!(intersect2(&b, &a), want);
        assert_eq!(
            intersect2(&a[..30], &b),
            b.iter().filter(|x| *x % 2 == 0 && **x < 60).count() as u64
        );
        let (mut buf, mut tmp) = (Vec::new(), Vec::new());
        let n = intersect_lists(&[&a[..], &b[..], &s[..]], &[1, 0, 2], &mut buf, &mut tmp);
        assert_eq!(
            buf[..n],
            b.iter().copied().filter(|x| *x % 6 == 0).collect::<Vec<_>>()[..]
        );
        // Every overlap of two lists, around the block size.
        let mut r = rng(5);
        for _ in 0..300 {
            let mut mk = |len: u64| -> Vec<i32> {
                let mut v: Vec<i32> = (0..r() % len).map(|_| (r() % 200) as i32).collect();
                v.sort_unstable();
                v.dedup();
                v
            };
            let (a, b) = (mk(40), mk(300));
            for t in -1..202 {
                assert_eq!(gallop_back(&b, &t), b.iter().filter(|&&x| x > t).count());
            }
            let want: Vec<i32> = a.iter().copied().filter(|x| b.binary_search(x).is_ok()).collect();
            assert_eq!(intersect2(&a, &b), want.len() as u64);
            assert_eq!(merge_count(&a, &b), want.len() as u64);
            let mut out = Vec::new();
            let n = intersect_into(&a, &b, &mut out);
            assert_eq!(out[..n], want[..]);
            let n = intersect_into(&b, &a, &mut out);
            assert_eq!(out[..n], want[..]);
        }
    }
}
