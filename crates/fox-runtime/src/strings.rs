//! Compact string storage for loading and for the dictionary: the text of every string in
//! one buffer with the end offsets beside it (a string costs its bytes and 8 bytes, not a
//! heap allocation of its own), and an interner that numbers distinct strings with a hash
//! table of ids into that buffer (the text is kept once).

use crate::load::{FieldError, FxHasher};
use std::hash::Hasher;

/// Strings `0..len()`, stored end to end.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StrArena {
    text: String,
    ends: Vec<u64>,
}

impl StrArena {
    pub fn with_capacity(strings: usize, bytes: usize) -> StrArena {
        StrArena {
            text: String::with_capacity(bytes),
            ends: Vec::with_capacity(strings),
        }
    }

    /// [`StrArena::with_capacity`], or the out-of-memory message naming `what`.
    pub fn try_with_capacity(strings: usize, bytes: usize, what: &str) -> Result<StrArena, String> {
        let mut text = String::new();
        crate::alloc::request(bytes as u128, 1, what, || text.try_reserve_exact(bytes))?;
        Ok(StrArena {
            text,
            ends: crate::alloc::try_with_capacity(strings, what)?,
        })
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The total length of the strings in bytes.
    pub fn bytes(&self) -> usize {
        self.text.len()
    }

    pub fn push(&mut self, s: &str) {
        self.text.push_str(s);
        self.ends.push(self.text.len() as u64);
    }

    /// [`StrArena::push`], or the out-of-memory message naming `what`.
    pub fn try_push(&mut self, s: &str, what: &str) -> Result<(), String> {
        crate::alloc::try_reserve(&mut self.ends, 1, what)?;
        crate::alloc::try_push_str(&mut self.text, s, what)?;
        self.ends.push(self.text.len() as u64);
        Ok(())
    }

    /// String `i`; panics when `i >= len()`.
    #[inline]
    pub fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }

    /// The end of string `i` in the text of all strings (its first byte is at the end of
    /// string `i - 1`, or 0); panics when `i >= len()`.
    #[inline]
    pub fn end(&self, i: usize) -> usize {
        self.ends[i] as usize
    }

    /// The text of strings `a..b`, end to end, and the offset of its first byte in the
    /// text of all strings; panics unless `a <= b <= len()`.
    pub fn span(&self, a: usize, b: usize) -> (&[u8], usize) {
        let start = if a == 0 { 0 } else { self.end(a - 1) };
        let end = if b == 0 { 0 } else { self.end(b - 1) };
        (&self.text.as_bytes()[start..end.max(start)], start)
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// Releases the unused capacity of both buffers.
    pub fn shrink_to_fit(&mut self) {
        self.text.shrink_to_fit();
        self.ends.shrink_to_fit();
    }
}

impl<S: AsRef<str>> FromIterator<S> for StrArena {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> StrArena {
        let mut a = StrArena::default();
        for s in iter {
            a.push(s.as_ref());
        }
        a
    }
}

/// The first `i` in `0..n` for which `before(i)` is false, where `before` is true on a
/// prefix of `0..n` and false after it (binary search).
pub fn partition_point(n: usize, before: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The first `k` in `lo..hi` for which `before(k)` is false (`hi` when there is none),
/// where `before` is true on a prefix of `lo..hi` and false after it: probes `lo`, `lo + 2`,
/// `lo + 6`, `lo + 14`, ... (gaps doubling) and then searches the last gap in halves, so
/// that a `k` near `lo` costs few probes however long the range.
pub fn gallop(mut lo: usize, hi: usize, before: impl Fn(usize) -> bool) -> usize {
    let mut step = 1usize;
    while lo < hi {
        let probe = lo + (step - 1).min(hi - 1 - lo);
        if !before(probe) {
            return lo + partition_point(probe - lo, |k| before(lo + k));
        }
        lo = probe + 1;
        step = step.saturating_mul(2);
    }
    hi
}

/// Strings met while loading, numbered in the order they were first seen. After loading,
/// the dictionary is built from them and every string column is renumbered.
#[derive(Default, Debug)]
pub struct Interner {
    strings: StrArena,
    /// Open addressing with linear probing: `slots[h]` is an id, or `EMPTY`. At most half
    /// the slots are used.
    slots: Vec<u32>,
}

const EMPTY: u32 = u32::MAX;

fn hash(s: &str) -> u64 {
    let mut h = FxHasher::default();
    h.write(s.as_bytes());
    // Fold the high bits in: FxHash's low bits are weak and the table is indexed by them.
    let x = h.finish();
    x ^ (x >> 29) ^ (x >> 47)
}

impl Interner {
    /// The id of `s`, numbering it when it is new. Fails past 2^32 - 1 distinct strings,
    /// and when memory runs out.
    pub fn intern(&mut self, s: &str) -> Result<u32, String> {
        self.intern_for(s, "the strings of the data")
            .map_err(FieldError::into_message)
    }

    /// [`Interner::intern`], naming the strings `what` when memory runs out (the error is
    /// then [`FieldError::OutOfMemory`]; past 2^32 - 1 strings it is [`FieldError::Bad`]).
    pub fn intern_for(&mut self, s: &str, what: &str) -> Result<u32, FieldError> {
        if 2 * (self.strings.len() + 1) > self.slots.len() {
            self.grow(what).map_err(FieldError::OutOfMemory)?;
        }
        let mask = self.slots.len() - 1;
        let mut at = hash(s) as usize & mask;
        loop {
            let id = self.slots[at];
            if id == EMPTY {
                break;
            }
            if self.strings.get(id as usize) == s {
                return Ok(id);
            }
            at = (at + 1) & mask;
        }
        let id = u32::try_from(self.strings.len())
            .ok()
            .filter(|&id| id != EMPTY)
            .ok_or_else(|| FieldError::Bad("more than 2^32 - 1 distinct strings".to_string()))?;
        self.strings.try_push(s, what).map_err(FieldError::OutOfMemory)?;
        self.slots[at] = id;
        Ok(id)
    }

    fn grow(&mut self, what: &str) -> Result<(), String> {
        let n = (self.slots.len() * 2).max(64);
        let mut slots = crate::alloc::try_filled(n, EMPTY, what)?;
        let mask = n - 1;
        for id in 0..self.strings.len() {
            let mut at = hash(self.strings.get(id)) as usize & mask;
            while slots[at] != EMPTY {
                at = (at + 1) & mask;
            }
            slots[at] = id as u32;
        }
        self.slots = slots;
        Ok(())
    }

    /// The number of distinct strings.
    pub fn len(&self) -> usize {
        self.strings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.strings.is_empty()
    }

    /// String `id`; panics when it was not given out.
    pub fn get(&self, id: u32) -> &str {
        self.strings.get(id as usize)
    }

    /// The strings in id order.
    pub fn strings(&self) -> &StrArena {
        &self.strings
    }

    /// The strings in id order, dropping the hash table.
    pub fn into_strings(self) -> StrArena {
        self.strings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arena_keeps_strings_in_order() {
        let a: StrArena = ["", "abc", "", "é", "x"].into_iter().collect();
        assert_eq!(a.len(), 5);
        assert_eq!(a.iter().collect::<Vec<_>>(), ["", "abc", "", "é", "x"]);
        assert_eq!(a.bytes(), 6);
    }

    #[test]
    fn interner_numbers_distinct_strings_in_first_seen_order() {
        let mut i = Interner::default();
        let mut seen = std::collections::HashMap::new();
        let mut ids = Vec::new();
        // Enough strings to grow the table several times, with repeats and an empty string.
        for k in 0..5000u32 {
            let s = if k % 7 == 0 {
                String::new()
            } else {
                format!("s{}", (k * 31) % 1500)
            };
            let next = seen.len() as u32;
            let want = *seen.entry(s.clone()).or_insert(next);
            ids.push((s.clone(), want));
            assert_eq!(i.intern(&s), Ok(want), "string {s:?}");
        }
        assert_eq!(i.len(), seen.len());
        for (s, id) in ids {
            assert_eq!(i.get(id), s);
        }
    }
}
