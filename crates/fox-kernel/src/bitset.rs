//! A dense set of buffer ids, for the dataflow analyses.

use crate::ir::BufId;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct BufSet {
    words: Vec<u64>,
}

impl BufSet {
    pub fn new(n: usize) -> BufSet {
        BufSet {
            words: vec![0; n.div_ceil(64)],
        }
    }

    fn grow(&mut self, i: usize) {
        if self.words.len() <= i / 64 {
            self.words.resize(i / 64 + 1, 0);
        }
    }

    pub fn insert(&mut self, b: BufId) -> bool {
        let i = b.0 as usize;
        self.grow(i);
        let had = self.words[i / 64] & (1 << (i % 64)) != 0;
        self.words[i / 64] |= 1 << (i % 64);
        !had
    }

    pub fn remove(&mut self, b: BufId) -> bool {
        let i = b.0 as usize;
        match self.words.get_mut(i / 64) {
            Some(w) => {
                let had = *w & (1 << (i % 64)) != 0;
                *w &= !(1 << (i % 64));
                had
            }
            None => false,
        }
    }

    pub fn contains(&self, b: BufId) -> bool {
        let i = b.0 as usize;
        self.words.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Adds every element of `other`; true when the set grew.
    pub fn union_with(&mut self, other: &BufSet) -> bool {
        if self.words.len() < other.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        let mut changed = false;
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            let n = *a | b;
            changed |= n != *a;
            *a = n;
        }
        changed
    }

    /// Keeps only the elements of `other`; true when the set shrank.
    pub fn intersect_with(&mut self, other: &BufSet) -> bool {
        let mut changed = false;
        for (i, a) in self.words.iter_mut().enumerate() {
            let n = *a & other.words.get(i).copied().unwrap_or(0);
            changed |= n != *a;
            *a = n;
        }
        changed
    }

    pub fn difference(&self, other: &BufSet) -> BufSet {
        let words = self
            .words
            .iter()
            .enumerate()
            .map(|(i, a)| a & !other.words.get(i).copied().unwrap_or(0))
            .collect();
        BufSet { words }
    }

    pub fn iter(&self) -> impl Iterator<Item = BufId> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            (0..64)
                .filter(move |b| w & (1u64 << b) != 0)
                .map(move |b| BufId((wi * 64 + b) as u32))
        })
    }
}
