//! The run's string dictionary: every string of the input data and every string constant of
//! the plan gets a code before the run starts, in sorted (byte) order, so that code order is
//! string order. Strings created during the run (`substr`, `concat`) are appended; after
//! that, string order is given by the `Rank` table.

use crate::alloc::{fallible, out_of_memory, try_filled, try_par_collect, try_reserve, try_string, try_with_capacity};
use crate::strings::StrArena;
use fox_kernel::DictOp;
use std::collections::HashMap;

/// A string dictionary. Codes are dense (`0..len()`), and no string has two codes.
///
/// The sorted part is shared (cloning a dictionary is cheap), so a loaded database can
/// hand its dictionary to every run, and each run appends its own new strings.
#[derive(Debug, Default, Clone)]
pub struct Dictionary {
    /// The strings assigned in sorted order when the dictionary was built.
    sorted: std::sync::Arc<Sorted>,
    /// Strings appended since, in the order they came.
    extra: Vec<String>,
    extra_codes: HashMap<String, u32>,
}

/// Strings in ascending order; a string's code is its position (found by binary search).
#[derive(Debug, Default)]
struct Sorted {
    strings: StrArena,
}

impl Dictionary {
    /// A dictionary of `strings` (duplicates allowed) with codes in sorted order.
    pub fn from_strings<I: IntoIterator<Item = String>>(strings: I) -> Dictionary {
        let mut all: Vec<String> = strings.into_iter().collect();
        if all.len() > 100_000 {
            use rayon::slice::ParallelSliceMut;
            all.par_sort_unstable();
        } else {
            all.sort_unstable();
        }
        all.dedup();
        Dictionary::from_sorted(all.into_iter().collect())
    }

    /// A dictionary of `strings` (duplicates allowed) with codes in sorted order; an error
    /// when memory runs out.
    pub fn try_from_strs<'s>(strings: impl Iterator<Item = &'s str>) -> Result<Dictionary, String> {
        use rayon::slice::ParallelSliceMut;
        const WHAT: &str = "the string dictionary";
        let mut all: Vec<&str> = try_with_capacity(strings.size_hint().0, WHAT)?;
        for s in strings {
            if all.len() == all.capacity() {
                try_reserve(&mut all, 1, WHAT)?;
            }
            all.push(s);
        }
        all.par_sort_unstable();
        all.dedup();
        let bytes = all.iter().map(|s| s.len()).sum();
        let mut sorted = StrArena::try_with_capacity(all.len(), bytes, WHAT)?;
        for s in all {
            sorted.push(s);
        }
        Ok(Dictionary::from_sorted(sorted))
    }

    /// A dictionary of strings that are already in ascending order without duplicates.
    pub fn from_sorted(strings: StrArena) -> Dictionary {
        debug_assert!((1..strings.len()).all(|i| strings.get(i - 1) < strings.get(i)));
        Dictionary {
            sorted: std::sync::Arc::new(Sorted { strings }),
            extra: Vec::new(),
            extra_codes: HashMap::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.sorted.strings.len() + self.extra.len()
    }

    /// The number of strings of the sorted part (the codes below it).
    pub fn sorted_len(&self) -> usize {
        self.sorted.strings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn code(&self, s: &str) -> Option<u32> {
        let sorted = &self.sorted.strings;
        let i = crate::strings::partition_point(sorted.len(), |i| sorted.get(i) < s);
        if i < sorted.len() && sorted.get(i) == s {
            Some(i as u32)
        } else {
            self.extra_codes.get(s).copied()
        }
    }

    pub fn get(&self, code: u32) -> Option<&str> {
        let c = code as usize;
        let n = self.sorted.strings.len();
        if c < n {
            Some(self.sorted.strings.get(c))
        } else {
            self.extra.get(c - n).map(String::as_str)
        }
    }

    /// True when no string has been appended since the dictionary was built, so that code
    /// order is string order.
    pub fn is_ordered(&self) -> bool {
        self.extra.is_empty()
    }

    /// The code of `s`, appending it when it is new. Fails when the dictionary is full
    /// (2^32 strings) or memory runs out.
    pub fn intern(&mut self, s: &str) -> Result<u32, String> {
        if let Some(c) = self.code(s) {
            return Ok(c);
        }
        let code = u32::try_from(self.len())
            .ok()
            .filter(|&c| c != u32::MAX)
            .ok_or_else(|| "the string dictionary is full (2^32 strings)".to_string())?;
        const WHAT: &str = "a string of the dictionary";
        let (a, b) = (try_string(s, WHAT)?, try_string(s, WHAT)?);
        try_reserve(&mut self.extra, 1, "the string dictionary")?;
        fallible(|| self.extra_codes.try_reserve(1)).map_err(|_| {
            let entries = 2 * (self.extra_codes.len() as u128 + 1);
            out_of_memory(
                entries * std::mem::size_of::<(String, u32)>() as u128,
                "the string dictionary",
            )
        })?;
        self.extra.push(a);
        self.extra_codes.insert(b, code);
        Ok(code)
    }

    /// `rank[code]`: the position of each string in sorted order; an error when memory
    /// runs out.
    pub fn rank(&self) -> Result<Vec<u32>, String> {
        use rayon::prelude::*;
        const WHAT: &str = "the rank table of the string dictionary";
        let n = self.len() as u32;
        if self.is_ordered() {
            return try_par_collect((0..n).into_par_iter(), WHAT);
        }
        let mut order: Vec<u32> = try_par_collect((0..n).into_par_iter(), WHAT)?;
        let text = |c: u32| self.get(c).unwrap_or_default();
        order.par_sort_unstable_by(|&a, &b| text(a).cmp(text(b)));
        let mut rank = try_filled(order.len(), 0u32, WHAT)?;
        for (pos, code) in order.into_iter().enumerate() {
            rank[code as usize] = pos as u32;
        }
        Ok(rank)
    }

    /// The table of a `DictTable` instruction; an error when memory runs out.
    pub fn table(&self, op: &DictOp) -> Result<crate::HostCol, String> {
        self.table_for(op, None)
    }

    /// The table of a `DictTable` instruction, computed only at the codes of `codes`
    /// (sorted, distinct) when given, and at every code from the sorted part's end on
    /// (the strings appended since it was built): the other entries are never read by the
    /// run (its string columns hold no other code) and are 0. A rank table then orders
    /// those codes among themselves. An error when memory runs out.
    pub fn table_for(&self, op: &DictOp, codes: Option<&[u32]>) -> Result<crate::HostCol, String> {
        use crate::HostCol;
        let Some(codes) = codes else {
            return Ok(match op {
                DictOp::Rank => HostCol::U32(self.rank()?),
                DictOp::Like(pattern) => HostCol::U8(self.like_table(&LikeMatcher::new(pattern), None)?),
                DictOp::Prefix(p) => HostCol::U8(self.par_map(|s| s.starts_with(p.as_str()) as u8)?),
                DictOp::Regex(p) => {
                    let r = regex(p)?;
                    HostCol::U8(self.par_map(|s| r.is_match(s.as_bytes()) as u8)?)
                }
                DictOp::Strlen => HostCol::I32(self.par_map(strlen)?),
            });
        };
        Ok(match op {
            DictOp::Rank => {
                if self.is_ordered() {
                    return Ok(HostCol::U32(self.at_codes(codes, |c| c)?));
                }
                let mut rank = try_filled(self.len(), 0u32, "the rank table of the string dictionary")?;
                use rayon::slice::ParallelSliceMut;
                let mut order: Vec<u32> = try_with_capacity(
                    codes.len() + (self.len() - self.sorted_len()),
                    "the rank table of the string dictionary",
                )?;
                order.extend(
                    codes
                        .iter()
                        .copied()
                        .filter(|&c| (c as usize) < self.sorted_len())
                        .chain(self.sorted_len() as u32..self.len() as u32),
                );
                let text = |c: u32| self.get(c).unwrap_or_default();
                order.par_sort_unstable_by(|&a, &b| text(a).cmp(text(b)));
                for (pos, c) in order.into_iter().enumerate() {
                    rank[c as usize] = pos as u32;
                }
                HostCol::U32(rank)
            }
            DictOp::Like(pattern) => HostCol::U8(self.like_table(&LikeMatcher::new(pattern), Some(codes))?),
            DictOp::Prefix(p) => HostCol::U8(self.scatter(codes, |s| s.starts_with(p.as_str()) as u8)?),
            DictOp::Regex(p) => {
                let r = regex(p)?;
                HostCol::U8(self.scatter(codes, |s| r.is_match(s.as_bytes()) as u8)?)
            }
            DictOp::Strlen => HostCol::I32(self.scatter(codes, strlen)?),
        })
    }

    /// The codes at which the table of `op` is 1, when it is a table of flags (`like`,
    /// `prefix`, `match`; `None` for ranks and lengths): those of `codes` (sorted,
    /// distinct; codes of appended strings among them are skipped) whose strings match,
    /// then those of the appended strings that match, in increasing order. With the
    /// dictionary's length this is [`Dictionary::table_for`]'s table at `codes`, for a
    /// device to build from the positions alone.
    pub fn flags_at(&self, op: &DictOp, codes: &[u32]) -> Result<Option<Vec<u32>>, String> {
        use rayon::prelude::*;
        let regex_matcher;
        let like_matcher;
        let pred: &(dyn Fn(&str) -> bool + Sync) = match op {
            DictOp::Like(pattern) => {
                like_matcher = LikeMatcher::new(pattern);
                &|s| like_matcher.matches(s)
            }
            DictOp::Prefix(p) => &move |s: &str| s.starts_with(p.as_str()),
            DictOp::Regex(p) => {
                regex_matcher = regex(p)?;
                &|s: &str| regex_matcher.is_match(s.as_bytes())
            }
            DictOp::Rank | DictOp::Strlen => return Ok(None),
        };
        let n = self.sorted_len();
        let asked = &codes[..codes.partition_point(|&c| (c as usize) < n)];
        let mut ones: Vec<u32> = asked
            .par_iter()
            .with_min_len(4096)
            .copied()
            .filter(|&c| pred(self.sorted.strings.get(c as usize)))
            .collect();
        ones.extend(
            self.extra
                .iter()
                .enumerate()
                .filter(|(_, s)| pred(s))
                .map(|(i, _)| (n + i) as u32),
        );
        Ok(Some(ones))
    }

    /// A table with `f` of the strings of `codes` and of the appended strings at their
    /// codes, 0 elsewhere.
    fn scatter<T: Send + Copy + Default>(&self, codes: &[u32], f: impl Fn(&str) -> T + Sync) -> Result<Vec<T>, String> {
        let mut out = self.at_codes(codes, |c| f(self.get(c).unwrap_or_default()))?;
        out.extend(self.extra.iter().map(|s| f(s)));
        debug_assert_eq!(out.len(), self.len());
        Ok(out)
    }

    /// A table over the sorted part's codes with `g(c)` at the codes `c` of `codes` (sorted,
    /// distinct; those of appended strings are skipped) and 0 elsewhere, with room for the
    /// appended strings' entries after it.
    ///
    /// The table is as long as the dictionary (tens of millions of entries for large
    /// data) while `codes` may be few: it is filled and evaluated in blocks of codes on
    /// every core, each block writing its zeros and then `g` at the codes within it (one
    /// run of `codes`, which is sorted).
    fn at_codes<T: Send + Copy + Default>(&self, codes: &[u32], g: impl Fn(u32) -> T + Sync) -> Result<Vec<T>, String> {
        self.in_blocks(Some(codes), |start, block, asked| {
            for &c in asked.unwrap_or_default() {
                block[c as usize - start] = g(c);
            }
        })
    }

    /// A table over the sorted part's codes, 0 everywhere, with room for the appended
    /// strings' entries after it, then `fill(start, block, asked)` on each block of codes
    /// from `start` on every core, with the run of `codes` (sorted, distinct) within the
    /// block (`None` when `codes` is `None`: every code is asked).
    fn in_blocks<T: Send + Copy + Default>(
        &self,
        codes: Option<&[u32]>,
        fill: impl Fn(usize, &mut [T], Option<&[u32]>) + Sync,
    ) -> Result<Vec<T>, String> {
        use rayon::prelude::*;
        const WHAT: &str = "a table of the string dictionary";
        const BLOCK: usize = TABLE_BLOCK;
        let n = self.sorted_len();
        let mut out: Vec<T> = try_with_capacity(self.len(), WHAT)?;
        out.par_extend(rayon::iter::repeat_n(T::default(), n));
        out.par_chunks_mut(BLOCK).enumerate().for_each(|(b, block)| {
            let start = b * BLOCK;
            let asked = codes.map(|codes| {
                let first = codes.partition_point(|&c| (c as usize) < start);
                &codes[first..codes.partition_point(|&c| (c as usize) < start + block.len())]
            });
            fill(start, block, asked);
        });
        Ok(out)
    }
}

/// The number of codes of the blocks in which tables over the dictionary are filled.
const TABLE_BLOCK: usize = 1 << 16;

impl Dictionary {
    /// The table of `LIKE m` at `codes` (sorted, distinct; `None`: every code) and at the
    /// appended strings, 0 elsewhere.
    ///
    /// A pattern with a piece every match contains ([`LikeMatcher::required`]) is
    /// evaluated only on the strings holding that piece where the asked codes are at least
    /// a quarter of a block: one search runs over the block's strings stored end to end,
    /// each string holding the piece (not across its end) is matched (from the piece on when
    /// it is the pattern's first), and the search goes on from the next string. Sparser blocks match their asked strings one by one.
    fn like_table(&self, m: &LikeMatcher, codes: Option<&[u32]>) -> Result<Vec<u8>, String> {
        let Some(req) = m.required() else {
            return match codes {
                Some(codes) => self.scatter(codes, |s| m.matches(s) as u8),
                None => self.par_map(|s| m.matches(s) as u8),
            };
        };
        let strings = &self.sorted.strings;
        // Blocks with few asked codes match them one by one and need no searcher.
        let finder = if codes.is_none_or(|c| c.len() * 4 >= TABLE_BLOCK) {
            tuned_finder(req.piece.as_bytes(), strings.span(0, strings.len()).0)
        } else {
            memchr::memmem::Finder::new(req.piece.as_bytes()).into_owned()
        };
        let finder = &finder;
        let mut out = self.in_blocks(codes, |start, block: &mut [u8], asked| {
            let end = start + block.len();
            if let Some(asked) = asked.filter(|a| a.len() * 4 < block.len()) {
                for &c in asked {
                    block[c as usize - start] = m.matches(strings.get(c as usize)) as u8;
                }
                return;
            }
            let (text, base) = strings.span(start, end);
            let len = finder.needle().len();
            let (mut from, mut i, mut next_asked) = (0usize, start, 0usize);
            while let Some(pos) = finder.find(&text[from..]) {
                let at = base + from + pos;
                // The string holding the piece's first byte: the first whose end is past it
                // (at or after the last one found, and usually a few strings on).
                i = crate::strings::gallop(i, end, |k| strings.end(k) <= at);
                let string_end = strings.end(i);
                from = string_end - base;
                if at + len > string_end {
                    // Across the string's end: the search restarts at the next string.
                    continue;
                }
                let wanted = match asked {
                    None => true,
                    Some(asked) => {
                        next_asked = crate::strings::gallop(next_asked, asked.len(), |k| (asked[k] as usize) < i);
                        asked.get(next_asked) == Some(&(i as u32))
                    }
                };
                if wanted {
                    let s = strings.get(i);
                    let string_start = string_end - s.len();
                    block[i - start] = match req.first {
                        // The leftmost occurrence in the string: the search began at or
                        // before the string's start.
                        Some(piece) => m.matches_after(s, piece, at + len - string_start),
                        None => m.matches(s),
                    } as u8;
                }
            }
        })?;
        out.extend(self.extra.iter().map(|s| m.matches(s) as u8));
        debug_assert_eq!(out.len(), self.len());
        Ok(out)
    }
}

/// The matcher of a `DictOp::Regex` pattern.
fn regex(pattern: &str) -> Result<regex::bytes::Regex, String> {
    fox_syntax::souffle::regex::compile_bytes(pattern)
        .map_err(|e| format!("the regular expression {pattern:?} does not compile: {e}"))
}

fn strlen(s: &str) -> i32 {
    i32::try_from(s.chars().count()).unwrap_or(i32::MAX)
}

/// A compiled `LIKE` pattern: the byte matcher when the pattern is ASCII (then `_` still
/// matches one character of a non-ASCII text, by falling back to characters).
pub struct LikeMatcher {
    pattern: Vec<char>,
    ascii: Option<Vec<u8>>,
    /// Without `_`: the literal pieces between `%`s, and whether the first and last are
    /// anchored at the start and the end of the text. Matching is then a prefix test, a
    /// suffix test and a left-to-right substring search for the pieces in between, each
    /// with a searcher built once (SIMD `memmem`).
    pieces: Option<Pieces>,
}

struct Pieces {
    parts: Vec<String>,
    finders: Vec<memchr::memmem::Finder<'static>>,
    anchored_start: bool,
    anchored_end: bool,
}

/// A searcher for `needle` (at least one byte) in `text` or parts of it, finding what
/// `memmem::Finder::new(needle)` finds: where `text` is large, the two bytes of the needle
/// its SIMD prefilter looks for (each at its offset in the needle) are those that occur
/// together least often in samples of `text`, since which bytes are rare depends on the
/// data (on TPC-H comments the pair memchr's general frequency table picks for `special`
/// gives 2.7 times as many candidates as the best pair).
fn tuned_finder(needle: &[u8], text: &[u8]) -> memchr::memmem::Finder<'static> {
    use memchr::arch::all::packedpair::HeuristicFrequencyRank;
    const WINDOWS: usize = 16;
    const WINDOW: usize = 4096;
    // The distinct bytes of the needle at their first offsets: those a ranker can select.
    let mut firsts: Vec<(usize, u8)> = Vec::new();
    for (i, &b) in needle.iter().enumerate().take(usize::from(u8::MAX)) {
        if firsts.iter().all(|&(_, c)| c != b) {
            firsts.push((i, b));
        }
    }
    if text.len() < WINDOWS * WINDOW * 4 || firsts.len() < 2 {
        return memchr::memmem::Finder::new(needle).into_owned();
    }
    let step = text.len() / WINDOWS;
    let mut id = [u8::MAX; 256];
    for (k, &(_, b)) in firsts.iter().enumerate() {
        id[usize::from(b)] = k as u8;
    }
    let pairs: Vec<(usize, usize)> = (0..firsts.len())
        .flat_map(|x| (x + 1..firsts.len()).map(move |y| (x, y)))
        .collect();
    // Per pair (x, y), its candidates: positions p of a window with byte x of `firsts` at
    // p + (its offset) and byte y at p + (its offset), counted from the occurrences of
    // the rarer of the two in the window.
    use rayon::prelude::*;
    let counts = (0..WINDOWS)
        .into_par_iter()
        .map(|w| {
            let window = &text[w * step..w * step + WINDOW];
            let mut at: Vec<Vec<u16>> = vec![Vec::new(); firsts.len()];
            for (p, &b) in window.iter().enumerate() {
                if let Some(v) = at.get_mut(usize::from(id[usize::from(b)])) {
                    v.push(p as u16);
                }
            }
            pairs
                .iter()
                .map(|&(x, y)| {
                    let (x, y) = if at[x].len() <= at[y].len() { (x, y) } else { (y, x) };
                    let ((ix, _), (iy, by)) = (firsts[x], firsts[y]);
                    at[x]
                        .iter()
                        .filter(|&&q| {
                            let q = usize::from(q);
                            q >= ix && window.get(q - ix + iy) == Some(&by)
                        })
                        .count()
                })
                .collect::<Vec<usize>>()
        })
        .reduce(
            || vec![0; pairs.len()],
            |a, b| a.iter().zip(&b).map(|(x, y)| x + y).collect(),
        );
    let (x, y) = pairs[(0..pairs.len()).min_by_key(|&k| counts[k]).unwrap_or(0)];
    let best = (firsts[x].1, firsts[y].1);
    /// Ranks the two chosen bytes rarest; memchr then pairs their first offsets.
    struct Chosen(u8, u8);
    impl HeuristicFrequencyRank for Chosen {
        fn rank(&self, byte: u8) -> u8 {
            if byte == self.0 {
                0
            } else if byte == self.1 {
                1
            } else {
                u8::MAX
            }
        }
    }
    memchr::memmem::FinderBuilder::new().build_forward_with_ranker_owned(Chosen(best.0, best.1), needle)
}

/// A piece every string matching a pattern contains ([`LikeMatcher::required`]).
pub struct Required<'m> {
    pub piece: &'m str,
    /// `Some(i)`: the piece is piece `i`, the pattern's first, and the pattern is not
    /// anchored at its start.
    pub first: Option<usize>,
}

impl LikeMatcher {
    pub fn new(pattern: &str) -> LikeMatcher {
        let pieces = (!pattern.contains('_')).then(|| {
            let parts: Vec<String> = pattern.split('%').map(str::to_string).collect();
            let finders = parts
                .iter()
                .map(|p| memchr::memmem::Finder::new(p.as_bytes()).into_owned())
                .collect();
            Pieces {
                parts,
                finders,
                anchored_start: !pattern.starts_with('%'),
                anchored_end: !pattern.ends_with('%'),
            }
        });
        LikeMatcher {
            pattern: pattern.chars().collect(),
            ascii: pattern.is_ascii().then(|| pattern.as_bytes().to_vec()),
            pieces,
        }
    }

    /// A piece of text every matching string contains, when the pattern has no `_` and a
    /// non-empty piece: the first piece of a pattern not anchored at its start (then
    /// [`LikeMatcher::matches_after`] finishes the match from its leftmost occurrence),
    /// otherwise the longest.
    pub fn required(&self) -> Option<Required<'_>> {
        let p = self.pieces.as_ref()?;
        let n = p.parts.len();
        if !p.anchored_start {
            if let Some(i) = (1..n.saturating_sub(1)).find(|&i| !p.parts[i].is_empty()) {
                return Some(Required {
                    piece: &p.parts[i],
                    first: Some(i),
                });
            }
        }
        let longest = p.parts.iter().max_by_key(|s| s.len())?;
        (!longest.is_empty()).then(|| Required {
            piece: longest,
            first: None,
        })
    }

    /// Whether `s` matches, given that the leftmost occurrence in `s` of the piece
    /// [`LikeMatcher::required`] returned with `first: Some(piece)` ends at byte `end`.
    pub fn matches_after(&self, s: &str, piece: usize, end: usize) -> bool {
        let Some(p) = &self.pieces else {
            return self.matches(s);
        };
        let parts = &p.parts;
        let mut to = s.len();
        if p.anchored_end {
            let last = &parts[parts.len() - 1];
            if !s.ends_with(last.as_str()) || to - last.len() < end {
                return false;
            }
            to -= last.len();
        }
        pieces_in(s.as_bytes(), p, piece + 1, end, to)
    }

    pub fn matches(&self, s: &str) -> bool {
        if let Some(p) = &self.pieces {
            return like_pieces(s, p);
        }
        match &self.ascii {
            Some(p) if s.is_ascii() => like_bytes(s.as_bytes(), p),
            _ => like(s, &self.pattern),
        }
    }
}

/// LIKE for a pattern without `_`, split at its `%`s.
fn like_pieces(s: &str, p: &Pieces) -> bool {
    let parts = &p.parts;
    if parts.len() == 1 {
        // No `%` at all: equality.
        return s == parts[0];
    }
    let first = &parts[0];
    let last = &parts[parts.len() - 1];
    // `parts.len() >= 2`: the first and the last piece are distinct occurrences.
    if p.anchored_start && !s.starts_with(first.as_str()) {
        return false;
    }
    let from = if p.anchored_start { first.len() } else { 0 };
    let mut to = s.len();
    if p.anchored_end {
        if !s.ends_with(last.as_str()) || to - last.len() < from {
            return false;
        }
        to -= last.len();
    }
    pieces_in(s.as_bytes(), p, 1, from, to)
}

/// Whether the middle pieces of `p` from piece `first` on occur in order, without
/// overlapping, in `text[from..to]` (leftmost occurrences, which leave the most room for
/// the pieces after them).
fn pieces_in(text: &[u8], p: &Pieces, first: usize, mut from: usize, to: usize) -> bool {
    let parts = &p.parts;
    let middle = parts.len().saturating_sub(1);
    for (piece, finder) in parts.iter().zip(&p.finders).take(middle).skip(first) {
        if piece.is_empty() {
            continue;
        }
        match finder.find(&text[from..to]) {
            Some(i) => from += i + piece.len(),
            None => return false,
        }
    }
    true
}

/// [`like`] on bytes (exact for ASCII patterns without `_`, and for ASCII texts).
fn like_bytes(text: &[u8], pattern: &[u8]) -> bool {
    like_units(text, pattern, b'%', b'_')
}

/// LIKE over units (bytes or characters) with the wildcards `any` (`%`) and `one` (`_`).
/// Greedy matching with backtracking to the last `any`: linear in practice, quadratic at
/// worst, never exponential.
fn like_units<T: Copy + PartialEq>(text: &[T], pattern: &[T], any: T, one: T) -> bool {
    let (mut t, mut p) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == one || (pattern[p] != any && pattern[p] == text[t])) {
            t += 1;
            p += 1;
        } else if p < pattern.len() && pattern[p] == any {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == any)
}

impl Dictionary {
    /// `f` of every string, in code order (in parallel for large dictionaries).
    fn par_map<T: Send>(&self, f: impl Fn(&str) -> T + Sync) -> Result<Vec<T>, String> {
        use rayon::prelude::*;
        const WHAT: &str = "a table of the string dictionary";
        let n = self.sorted.strings.len();
        let sorted = &self.sorted.strings;
        let mut out: Vec<T> = try_with_capacity(self.len(), WHAT)?;
        out.par_extend((0..n).into_par_iter().with_min_len(100_000).map(|i| f(sorted.get(i))));
        out.extend(self.extra.iter().map(|s| f(s)));
        debug_assert_eq!(out.len(), n + self.extra.len());
        Ok(out)
    }
}

/// SQL `LIKE` (case-sensitive, no escape character): `%` matches any run of characters,
/// `_` exactly one character.
pub fn like(s: &str, pattern: &[char]) -> bool {
    let text: Vec<char> = s.chars().collect();
    like_units(&text, pattern, '%', '_')
}

/// SQL `substring(s from start for len)` on characters, 1-based: the characters at
/// positions `start .. start + len` that exist (a start before 1 still counts the missing
/// positions; a negative length is empty).
pub fn substr(s: &str, start: i64, len: i64) -> String {
    substr_of(s, start, len).to_string()
}

/// [`substr`] as a slice of `s`.
pub fn substr_of(s: &str, start: i64, len: i64) -> &str {
    if len <= 0 {
        return "";
    }
    let end = start.saturating_add(len);
    let from = start.max(1);
    if end <= from {
        return "";
    }
    let skip = usize::try_from(from - 1).unwrap_or(usize::MAX);
    let take = usize::try_from(end - from).unwrap_or(usize::MAX);
    if s.is_ascii() {
        // One byte per character.
        let b = skip.min(s.len());
        return &s[b..skip.saturating_add(take).min(s.len())];
    }
    let mut idx = s.char_indices().map(|(i, _)| i).chain(std::iter::once(s.len()));
    let Some(b) = idx.nth(skip) else {
        return "";
    };
    let e = if take == 0 {
        b
    } else {
        s.char_indices()
            .map(|(i, _)| i)
            .chain(std::iter::once(s.len()))
            .nth(skip.saturating_add(take))
            .unwrap_or(s.len())
    };
    &s[b..e.max(b)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(s: &str, p: &str) -> bool {
        like(s, &p.chars().collect::<Vec<_>>())
    }

    #[test]
    fn like_patterns() {
        assert!(l("LARGE BRASS", "%BRASS"));
        assert!(!l("LARGE BRASS X", "%BRASS"));
        assert!(l("abc", "a_c"));
        assert!(!l("abbc", "a_c"));
        assert!(l("", "%"));
        assert!(!l("", "_"));
        assert!(l("special packages requests", "%special%requests%"));
        assert!(!l("requests special", "%special%requests%"));
        assert!(l("aXbXc", "%X%X%"));
        assert!(!l("Brass", "%BRASS"));
        assert!(l("héllo", "h_llo"));
        assert!(l("abc", "abc"));
        assert!(!l("abc", "ab"));
        assert!(l("mississippi", "%iss%ppi"));
    }

    #[test]
    fn substr_is_one_based_on_characters() {
        assert_eq!(substr("13-555", 1, 2), "13");
        assert_eq!(substr("hello", 2, 3), "ell");
        assert_eq!(substr("hello", 4, 10), "lo");
        assert_eq!(substr("hello", 0, 2), "h");
        assert_eq!(substr("hello", -5, 3), "");
        assert_eq!(substr("hello", 9, 2), "");
        assert_eq!(substr("hello", 2, -1), "");
        assert_eq!(substr("héllo", 2, 2), "él");
        assert_eq!(substr("hello", i64::MAX, i64::MAX), "");
    }

    #[test]
    fn substr_slices_agree_with_characters() {
        let reference = |s: &str, start: i64, len: i64| -> String {
            if len <= 0 {
                return String::new();
            }
            let end = start.saturating_add(len);
            let from = start.max(1);
            if end <= from {
                return String::new();
            }
            s.chars()
                .skip(usize::try_from(from - 1).unwrap_or(usize::MAX))
                .take(usize::try_from(end - from).unwrap_or(usize::MAX))
                .collect()
        };
        for s in ["", "a", "héllo", "13-555-1234", "日本語テキスト"] {
            for start in [-3i64, -1, 0, 1, 2, 3, 5, 7, 20, i64::MAX, i64::MIN] {
                for len in [-1i64, 0, 1, 2, 3, 10, i64::MAX, i64::MIN] {
                    assert_eq!(
                        substr_of(s, start, len),
                        reference(s, start, len),
                        "{s:?} {start} {len}"
                    );
                }
            }
        }
    }

    #[test]
    fn like_matchers_agree() {
        let texts = [
            "",
            "a",
            "special requests",
            "xspecialyrequestsz",
            "requests special",
            "héllo",
            "BRASS",
            "LARGE BRASS",
        ];
        let pats = [
            "%",
            "_",
            "%special%requests%",
            "special%",
            "%BRASS",
            "h_llo",
            "%_%",
            "a",
            "%ss",
            "_%_",
        ];
        for t in texts {
            for p in pats {
                let chars: Vec<char> = p.chars().collect();
                assert_eq!(LikeMatcher::new(p).matches(t), like(t, &chars), "{t:?} like {p:?}");
            }
        }
        // Random texts and patterns over a small alphabet, so that matches are common.
        let mut rng = crate::test_xorshift(0x9E3779B97F4A7C15);
        let mut next = |n: u64| rng() % n;
        let alphabet = ['a', 'b', 'é', '%', '_'];
        for _ in 0..20000 {
            let t: String = (0..next(8)).map(|_| alphabet[next(3) as usize]).collect();
            let p: String = (0..next(6)).map(|_| alphabet[next(5) as usize]).collect();
            let chars: Vec<char> = p.chars().collect();
            assert_eq!(LikeMatcher::new(&p).matches(&t), like(&t, &chars), "{t:?} like {p:?}");
        }
    }

    #[test]
    fn codes_follow_sorted_order_until_appends() {
        let mut d = Dictionary::from_strings(["b", "a", "c", "a"].map(String::from));
        assert_eq!(d.len(), 3);
        assert_eq!(d.code("a"), Some(0));
        assert_eq!(d.code("c"), Some(2));
        assert!(d.is_ordered());
        assert_eq!(d.rank(), Ok(vec![0, 1, 2]));
        assert_eq!(d.intern("b"), Ok(1));
        assert_eq!(d.intern("ab"), Ok(3));
        assert!(!d.is_ordered());
        assert_eq!(d.rank(), Ok(vec![0, 2, 3, 1]));
        assert_eq!(d.get(3), Some("ab"));
        assert_eq!(d.table(&DictOp::Strlen), Ok(crate::HostCol::I32(vec![1, 1, 1, 2])));
        assert_eq!(
            d.table(&DictOp::Prefix("a".into())),
            Ok(crate::HostCol::U8(vec![1, 0, 0, 1]))
        );
        assert_eq!(
            d.table(&DictOp::Like("_b".into())),
            Ok(crate::HostCol::U8(vec![0, 0, 0, 1]))
        );
        assert_eq!(
            d.table(&DictOp::Regex(r"\A(?:a|c)b?\z".into())),
            Ok(crate::HostCol::U8(vec![1, 0, 1, 1]))
        );
        // Only the codes asked for and the appended strings are matched.
        assert_eq!(
            d.table_for(&DictOp::Regex(r"\A[a-c]\z".into()), Some(&[1])),
            Ok(crate::HostCol::U8(vec![0, 1, 0, 0]))
        );
        let bad = d.table(&DictOp::Regex("(".into())).unwrap_err();
        assert!(bad.contains("does not compile"), "{bad}");
    }

    /// Tables at some codes over a dictionary of several blocks: each asked code (those at
    /// block edges, the first and the last included) has the whole table's entry, every
    /// other code of the sorted part 0, and the appended strings their entries.
    #[test]
    fn tables_at_codes_across_blocks_match_the_whole_tables() {
        use crate::HostCol;
        let n = 3 * (1 << 16) + 5;
        let mut d = Dictionary::from_strings((0..n).map(|i| format!("s{i:07}{}", if i % 3 == 0 { "x" } else { "" })));
        let mut codes: Vec<u32> = (0..n as u32).step_by(7).collect();
        codes.extend([65535, 65536, 131071, 131072, n as u32 - 1]);
        codes.sort_unstable();
        codes.dedup();
        let ops = [
            DictOp::Like("%1%x".into()),
            DictOp::Prefix("s00001".into()),
            DictOp::Strlen,
            DictOp::Rank,
        ];
        let check = |d: &Dictionary, codes: &[u32]| {
            for op in &ops {
                let whole = d.table(op).unwrap();
                let part = d.table_for(op, Some(codes)).unwrap();
                assert_eq!(part.len(), d.len(), "{op:?}");
                let asked: std::collections::HashSet<u32> = codes.iter().copied().collect();
                for c in 0..d.len() {
                    let at = |t: &HostCol| match t {
                        HostCol::U8(v) => v[c] as u64,
                        HostCol::I32(v) => v[c] as u64,
                        HostCol::U32(v) => v[c] as u64,
                        t => panic!("{t:?}"),
                    };
                    if asked.contains(&(c as u32)) || c >= d.sorted_len() {
                        // A rank among the asked codes: order-preserving, not equal.
                        if !matches!(op, DictOp::Rank) || d.is_ordered() {
                            assert_eq!(at(&part), at(&whole), "{op:?} at {c}");
                        }
                    } else {
                        assert_eq!(at(&part), 0, "{op:?} at {c}");
                    }
                }
            }
        };
        check(&d, &codes);
        check(&d, &[]);
        d.intern("s00001z").unwrap();
        d.intern("a").unwrap();
        check(&d, &codes);
    }

    /// Searchers tuned to a text find exactly what the general one finds, for needles with
    /// repeated bytes, bytes absent from the text, non-ASCII bytes and one byte.
    #[test]
    fn tuned_finders_find_what_the_general_one_finds() {
        let mut next = crate::test_xorshift(0x2545_f491_4f6c_dd1du64);
        let words = ["special", "requests", "pending", "quickly", "aab", "é", "s", "pecs"];
        let mut text = String::new();
        while text.len() < 1 << 20 {
            text.push_str(words[(next() % words.len() as u64) as usize]);
            if next() % 3 == 0 {
                text.push(' ');
            }
        }
        let text = text.as_bytes();
        for needle in [
            "special",
            "requests",
            "sp",
            "aab",
            "aaaa",
            "é",
            "s",
            "zq",
            "ssp",
            "quickly pending",
        ] {
            let general = memchr::memmem::Finder::new(needle.as_bytes());
            for part in [text, &text[..1000], &text[12345..200_000]] {
                let tuned = tuned_finder(needle.as_bytes(), text);
                let a: Vec<usize> = tuned.find_iter(part).collect();
                let b: Vec<usize> = general.find_iter(part).collect();
                assert_eq!(a, b, "{needle}");
            }
        }
    }

    #[test]
    fn gallop_finds_the_partition_point() {
        for n in 0..40usize {
            for point in 0..=n {
                for lo in 0..=point {
                    for hi in point..=n {
                        let got = crate::strings::gallop(lo, hi, |k| {
                            assert!((lo..hi).contains(&k), "{k} outside {lo}..{hi}");
                            k < point
                        });
                        assert_eq!(got, point, "{lo}..{hi} point {point}");
                    }
                }
            }
        }
    }

    /// LIKE tables searched over the strings end to end agree with matching each string,
    /// for every code and for dense and sparse sets of codes, where pieces occur across
    /// two strings' boundary, in empty strings' neighbourhood and repeatedly in one string.
    #[test]
    fn flags_are_the_rows_where_a_pattern_table_is_one() {
        let mut next = crate::test_xorshift(0x2545_f491_4f6c_dd1du64);
        let strings: Vec<String> = (0..5_000)
            .map(|_| {
                let len = (next() % 9) as usize;
                (0..len)
                    .map(|_| [b'a', b'b', b'c'][(next() % 3) as usize] as char)
                    .collect()
            })
            .collect();
        let mut d = Dictionary::from_strings(strings);
        // Strings appended after the sorted part are always asked.
        d.intern("zzab").unwrap();
        d.intern("abzz").unwrap();
        let n = d.sorted_len() as u32;
        let ops = [
            DictOp::Like("%ab%".into()),
            DictOp::Like("a_c".into()),
            DictOp::Like("%".into()),
            DictOp::Like("nothing".into()),
            DictOp::Prefix("ab".into()),
            DictOp::Prefix("".into()),
            DictOp::Regex("^b+c$".into()),
        ];
        let all: Vec<u32> = (0..n).collect();
        let some: Vec<u32> = (0..n).step_by(7).collect();
        let one = vec![n / 2];
        let with_appended: Vec<u32> = vec![0, 3, n, n + 1];
        for op in &ops {
            for codes in [&all, &some, &one, &Vec::new(), &with_appended] {
                let table = match d.table_for(op, Some(codes)).unwrap() {
                    crate::HostCol::U8(t) => t,
                    other => panic!("{op:?}: a table of {:?}", other.elem()),
                };
                let want: Vec<u32> = (0..table.len() as u32).filter(|&c| table[c as usize] == 1).collect();
                let got = d.flags_at(op, codes).unwrap().expect("a table of flags");
                assert_eq!(got, want, "{op:?} at {} codes", codes.len());
            }
        }
        assert_eq!(d.flags_at(&DictOp::Rank, &all).unwrap(), None);
        assert_eq!(d.flags_at(&DictOp::Strlen, &all).unwrap(), None);
        assert!(d.flags_at(&DictOp::Regex("(".into()), &all).is_err());
    }

    #[test]
    fn like_tables_searched_end_to_end_agree_with_each_string() {
        let mut next = crate::test_xorshift(0x9e37_79b9_7f4a_7c15u64);
        let strings: Vec<String> = (0..400_000)
            .map(|_| {
                let len = (next() % 21) as usize;
                (0..len)
                    .map(|_| [b'a', b'b', b'c'][(next() % 3) as usize] as char)
                    .collect()
            })
            .chain(["", "ba", "bab", "é", "aé"].map(String::from))
            .collect();
        let mut d = Dictionary::from_strings(strings);
        assert!(d.len() > 2 * (1 << 16), "{}", d.len());
        let dense: Vec<u32> = (0..d.len() as u32).filter(|c| c % 3 != 1).collect();
        let sparse: Vec<u32> = (0..d.len() as u32).step_by(11).collect();
        let patterns = [
            "%ab%",
            "%abc",
            "a%b%c",
            "%cab%ba%",
            "%",
            "abc",
            "%aa%a",
            "ab%",
            "%é",
            "%a_b%",
            "%%b%%a",
            "%ba%ab%ba",
        ];
        let check = |d: &Dictionary| {
            for p in patterns {
                let m = LikeMatcher::new(p);
                let truth: Vec<u8> = (0..d.len())
                    .map(|c| m.matches(d.get(c as u32).unwrap()) as u8)
                    .collect();
                assert_eq!(d.like_table(&m, None).unwrap(), truth, "{p}");
                for codes in [&dense, &sparse] {
                    let got = d.like_table(&m, Some(codes)).unwrap();
                    for (c, &g) in got.iter().enumerate() {
                        let asked = codes.binary_search(&(c as u32)).is_ok() || c >= d.sorted_len();
                        assert_eq!(g, if asked { truth[c] } else { 0 }, "{p} at {c}");
                    }
                }
            }
        };
        check(&d);
        d.intern("zzab").unwrap();
        check(&d);
    }
}
