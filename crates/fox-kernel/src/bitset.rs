//! Sets of buffer ids for the dataflow analyses: a scratch set with constant-time
//! operations, and sorted lists for the sets they keep per block.

use crate::ir::BufId;

/// A set of buffer ids with constant-time insertion, removal and membership, whose
/// clearing costs its size: the scratch set the analyses walk blocks with.
#[derive(Clone, Debug, Default)]
pub(crate) struct SparseSet {
    /// Per buffer id: its place in `items`, or `u32::MAX`.
    slot: Vec<u32>,
    items: Vec<BufId>,
}

impl SparseSet {
    pub fn new(n: usize) -> SparseSet {
        SparseSet {
            slot: vec![u32::MAX; n],
            items: Vec::new(),
        }
    }

    pub fn insert(&mut self, b: BufId) -> bool {
        let i = b.0 as usize;
        if i >= self.slot.len() {
            self.slot.resize(i + 1, u32::MAX);
        }
        if self.slot[i] != u32::MAX {
            return false;
        }
        self.slot[i] = self.items.len() as u32;
        self.items.push(b);
        true
    }

    pub fn remove(&mut self, b: BufId) -> bool {
        let i = b.0 as usize;
        let Some(&k) = self.slot.get(i) else {
            return false;
        };
        if k == u32::MAX {
            return false;
        }
        let last = self.items.pop().unwrap_or(b);
        if last != b {
            self.items[k as usize] = last;
            self.slot[last.0 as usize] = k;
        }
        self.slot[i] = u32::MAX;
        true
    }

    pub fn contains(&self, b: BufId) -> bool {
        self.slot.get(b.0 as usize).is_some_and(|&k| k != u32::MAX)
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn clear(&mut self) {
        for b in self.items.drain(..) {
            self.slot[b.0 as usize] = u32::MAX;
        }
    }

    /// Empties the set and fills it with `items`.
    pub fn reset_to(&mut self, items: &[BufId]) {
        self.clear();
        for &b in items {
            self.insert(b);
        }
    }

    /// The elements, ascending.
    pub fn sorted(&self) -> Vec<BufId> {
        let mut v = self.items.clone();
        v.sort_unstable();
        v
    }
}

/// The union of two ascending lists, ascending.
pub(crate) fn union_sorted(a: &[BufId], b: &[BufId]) -> Vec<BufId> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => {
                out.push(a[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(b[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}
