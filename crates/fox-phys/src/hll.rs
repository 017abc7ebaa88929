//! A HyperLogLog sketch of the distinct values of a column.
//!
//! Values are 64-bit words (a column's value bits) mixed by [`hash64`], a fixed bijection of
//! `u64`, so the sketch of a column is the same on every machine and in every run, and two
//! different values never share a hash. The sketch has `2^PRECISION` registers of one byte;
//! the estimate is Ertl's improved estimator ("New cardinality estimation algorithms for
//! HyperLogLog sketches", 2017), which needs no empirical bias tables and is unbiased from
//! one value up (relative standard error `1.04 / 2^(PRECISION / 2)`, 0.8%). While a sketch
//! has seen at most [`EXACT_LIMIT`] distinct values it keeps their hashes instead (no
//! registers yet), and its count is exact.
//!
//! Sketches merge: the sketch of a column equals the merge of the sketches of any split of
//! its values into parts (so parts can be sketched in parallel).

/// Bits of the hash that choose a register.
pub const PRECISION: u32 = 14;

/// The number of registers.
const REGISTERS: usize = 1 << PRECISION;

/// Bits of the hash left for the rank: a register holds 1 ..= `Q + 1`, or 0 when empty.
const Q: u32 = 64 - PRECISION;

/// Up to this many distinct values a sketch counts exactly.
pub const EXACT_LIMIT: usize = 256;

/// `1 / (2 ln 2)`, the limit of HyperLogLog's bias constant for many registers.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// A fixed 64-bit mix (the finaliser of SplitMix64): a bijection of `u64`, so distinct
/// values have distinct hashes, and every output bit depends on every input bit.
pub fn hash64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A HyperLogLog sketch; see the module's documentation.
#[derive(Clone, PartialEq, Eq)]
pub struct Hll(Repr);

/// A sketch holds the distinct hashes it has seen while there are at most
/// [`EXACT_LIMIT`], and its registers from then on (filled with those hashes first, so
/// they are the registers of every value seen).
#[derive(Clone, PartialEq, Eq)]
enum Repr {
    Exact(Small),
    Registers(Box<[u8]>),
}

/// The slots of a [`Small`] set: twice its most hashes, so a probe is short.
const SLOTS: usize = 2 * EXACT_LIMIT;

/// A set of at most [`EXACT_LIMIT`] hashes: open addressing with linear probing on the
/// hash's low bits (hashes are mixed already), 0 marking an empty slot (the hash 0 is
/// kept aside).
#[derive(Clone)]
struct Small {
    slots: Box<[u64]>,
    /// The hashes in `slots`.
    len: usize,
    zero: bool,
}

impl Small {
    fn new() -> Small {
        Small {
            slots: vec![0u64; SLOTS].into_boxed_slice(),
            len: 0,
            zero: false,
        }
    }

    fn count(&self) -> usize {
        self.len + usize::from(self.zero)
    }

    fn contains(&self, h: u64) -> bool {
        if h == 0 {
            return self.zero;
        }
        let mut i = h as usize % SLOTS;
        loop {
            match self.slots[i] {
                0 => return false,
                s if s == h => return true,
                _ => i = (i + 1) % SLOTS,
            }
        }
    }

    /// Adds `h`; false when it is new and the set is full (it is not added then).
    #[inline]
    fn insert(&mut self, h: u64) -> bool {
        if h == 0 {
            if !self.zero && self.count() == EXACT_LIMIT {
                return false;
            }
            self.zero = true;
            return true;
        }
        // At most `EXACT_LIMIT` of the `SLOTS` slots are taken: a probe meets an empty one.
        let mut i = h as usize % SLOTS;
        loop {
            match self.slots[i] {
                s if s == h => return true,
                0 => {
                    if self.count() == EXACT_LIMIT {
                        return false;
                    }
                    self.slots[i] = h;
                    self.len += 1;
                    return true;
                }
                _ => i = (i + 1) % SLOTS,
            }
        }
    }

    fn hashes(&self) -> impl Iterator<Item = u64> + '_ {
        let zero = self.zero.then_some(0);
        self.slots.iter().copied().filter(|&h| h != 0).chain(zero)
    }
}

/// Sets are equal when they hold the same hashes, wherever their probes put them.
impl PartialEq for Small {
    fn eq(&self, other: &Small) -> bool {
        self.count() == other.count() && self.hashes().all(|h| other.contains(h))
    }
}

impl Eq for Small {}

impl std::fmt::Debug for Hll {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hll")
            .field("estimate", &self.estimate())
            .field("exact", &self.is_exact())
            .finish()
    }
}

impl Default for Hll {
    fn default() -> Self {
        Hll::new()
    }
}

/// Adds a hash to registers.
#[inline]
fn update(registers: &mut [u8], h: u64) {
    // The rank: the position of the lowest set bit of the low `Q` bits, counted from 1,
    // and `Q + 1` when they are all zero; the high `PRECISION` bits choose the register.
    let rank = ((h | (1u64 << Q)).trailing_zeros() + 1) as u8;
    let r = &mut registers[(h >> Q) as usize];
    if rank > *r {
        *r = rank;
    }
}

/// Registers holding `hashes`.
fn registers_of(hashes: impl Iterator<Item = u64>) -> Box<[u8]> {
    let mut registers = vec![0u8; REGISTERS].into_boxed_slice();
    hashes.for_each(|h| update(&mut registers, h));
    registers
}

impl Hll {
    /// An empty sketch. It takes 16 KiB of registers once it has seen more than
    /// [`EXACT_LIMIT`] distinct values, and 4 KiB before.
    pub fn new() -> Hll {
        Hll(Repr::Exact(Small::new()))
    }

    /// Adds a value, given as its 64 bits.
    #[inline]
    pub fn insert(&mut self, value: u64) {
        self.insert_hash(hash64(value));
    }

    /// Adds a value by its hash (already mixed: see [`hash64`]).
    #[inline]
    pub fn insert_hash(&mut self, h: u64) {
        match &mut self.0 {
            Repr::Registers(registers) => update(registers, h),
            Repr::Exact(set) => {
                if !set.insert(h) {
                    let registers = registers_of(set.hashes().chain([h]));
                    self.0 = Repr::Registers(registers);
                }
            }
        }
    }

    /// Adds every value of `values`, each given as its 64 bits: the same sketch as
    /// [`Hll::insert`] of each in turn.
    pub fn extend(&mut self, values: impl IntoIterator<Item = u64>) {
        let mut values = values.into_iter();
        while self.is_exact() {
            match values.next() {
                Some(v) => self.insert(v),
                None => return,
            }
        }
        if let Repr::Registers(registers) = &mut self.0 {
            values.for_each(|v| update(registers, hash64(v)));
        }
    }

    /// Adds every value of `other`: the result is the sketch of both parts' values.
    pub fn merge(&mut self, other: &Hll) {
        match (&mut self.0, &other.0) {
            (Repr::Registers(a), Repr::Registers(b)) => {
                for (a, b) in a.iter_mut().zip(b.iter()) {
                    *a = (*a).max(*b);
                }
            }
            (Repr::Registers(a), Repr::Exact(b)) => b.hashes().for_each(|h| update(a, h)),
            (Repr::Exact(a), Repr::Registers(b)) => {
                let mut registers = b.clone();
                a.hashes().for_each(|h| update(&mut registers, h));
                self.0 = Repr::Registers(registers);
            }
            (Repr::Exact(a), Repr::Exact(b)) => {
                if !b.hashes().all(|h| a.insert(h)) {
                    let registers = registers_of(a.hashes().chain(b.hashes()));
                    self.0 = Repr::Registers(registers);
                }
            }
        }
    }

    /// True while the count is exact (at most [`EXACT_LIMIT`] distinct values were seen).
    pub fn is_exact(&self) -> bool {
        matches!(self.0, Repr::Exact(_))
    }

    /// The estimated number of distinct values: exact while [`Hll::is_exact`], otherwise
    /// within a few percent (0.8% standard error).
    pub fn estimate(&self) -> u64 {
        let registers = match &self.0 {
            Repr::Exact(set) => return set.count() as u64,
            Repr::Registers(r) => r,
        };
        // The histogram of register values.
        let mut counts = [0u32; Q as usize + 2];
        for &r in registers.iter() {
            counts[r as usize] += 1;
        }
        let m = REGISTERS as f64;
        let mut z = m * tau((m - f64::from(counts[Q as usize + 1])) / m);
        for k in (1..=Q as usize).rev() {
            z += f64::from(counts[k]);
            z *= 0.5;
        }
        z += m * sigma(f64::from(counts[0]) / m);
        (ALPHA_INF * m * m / z).round() as u64
    }
}

/// `σ(x) = x + Σ_{k≥1} x^(2^k) 2^(k-1)`, for the registers still empty.
fn sigma(x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut x, mut y, mut z) = (x, 1.0, x);
    loop {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if z == before {
            return z;
        }
    }
}

/// `τ(x) = (1 - x - Σ_{k≥1} (1 - x^(2^-k))² 2^-k) / 3`, for the registers at their
/// largest value.
fn tau(x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut x, mut y, mut z) = (x, 1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if z == before {
            return z / 3.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The relative error of the estimate of `n` distinct values (inserted twice each,
    /// in a scrambled order, starting at `start`).
    fn error(n: u64, start: u64) -> f64 {
        let mut s = Hll::new();
        for k in 0..2 * n {
            s.insert(start + (k * 7919) % n);
        }
        (s.estimate() as f64 - n as f64).abs() / n as f64
    }

    #[test]
    fn extend_is_insert_of_each() {
        for n in [0u64, 1, 5, 256, 257, 300, 10_000] {
            let values: Vec<u64> = (0..n).map(|k| (k * 7919) % (n / 2 + 1)).chain(0..n).collect();
            let mut one = Hll::new();
            values.iter().for_each(|&v| one.insert(v));
            let mut all = Hll::new();
            all.extend(values.iter().copied());
            assert_eq!(one, all, "{n}");
            // Extending a sketch that holds registers already.
            let mut more = one.clone();
            more.extend((0..n).map(|k| k * 31 + 1_000_000));
            let mut each = one;
            (0..n).for_each(|k| each.insert(k * 31 + 1_000_000));
            assert_eq!(more, each, "{n}");
        }
    }

    #[test]
    fn empty_one_and_duplicates() {
        let s = Hll::new();
        assert_eq!(s.estimate(), 0);
        assert!(s.is_exact());
        let mut s = Hll::new();
        s.insert(42);
        assert_eq!(s.estimate(), 1);
        for _ in 0..100_000 {
            s.insert(42);
        }
        assert_eq!(s.estimate(), 1);
        // Zero, negative numbers' bits and the largest word are values like any other.
        let mut s = Hll::new();
        for x in [0u64, u64::MAX, (-1i64) as u64, 0, u64::MAX] {
            s.insert(x);
        }
        assert_eq!(s.estimate(), 2);
        // The one value whose hash is 0 is kept like any other.
        let mut s = Hll::new();
        for h in [0, 5, 0, 7, 5] {
            s.insert_hash(h);
        }
        assert_eq!(s.estimate(), 3);
        let mut t = Hll::new();
        t.insert_hash(0);
        t.merge(&s);
        assert_eq!(t, s);
    }

    #[test]
    fn exact_up_to_the_limit() {
        for n in [2, 10, 100, EXACT_LIMIT as u64] {
            let mut s = Hll::new();
            for k in 0..3 * n {
                s.insert(k % n);
            }
            assert!(s.is_exact(), "{n}");
            assert_eq!(s.estimate(), n);
        }
        let mut s = Hll::new();
        (0..EXACT_LIMIT as u64 + 1).for_each(|x| s.insert(x));
        assert!(!s.is_exact());
        // Just past the limit the registers' estimate is still within 3%.
        assert!((s.estimate() as i64 - EXACT_LIMIT as i64 - 1).abs() <= 7, "{s:?}");
    }

    /// Known distinct counts from 10 to a million, each within 3% (more than three
    /// standard errors), over several value ranges.
    #[test]
    fn known_distinct_counts_within_three_percent() {
        let mut n = 10u64;
        while n <= 1_000_000 {
            for start in [0u64, 1 << 40, u64::MAX / 3] {
                let e = error(n, start);
                assert!(e <= 0.03, "{n} values from {start}: error {:.2}%", e * 100.0);
            }
            n = n * 3 + n / 2;
        }
        assert!(error(1_000_000, 7) <= 0.03);
    }

    #[test]
    fn merge_equals_one_pass() {
        for (n, parts) in [(0u64, 3u64), (50, 4), (300, 2), (100_000, 7)] {
            let mut whole = Hll::new();
            let mut split: Vec<Hll> = (0..parts).map(|_| Hll::new()).collect();
            for k in 0..n {
                let v = k.wrapping_mul(0x1234_5678_9abc_def1) % (n / 2 + 1);
                whole.insert(v);
                split[(k % parts) as usize].insert(v);
            }
            let mut merged = Hll::new();
            for p in &split {
                merged.merge(p);
            }
            assert_eq!(merged, whole, "{n} values in {parts} parts");
            assert_eq!(merged.estimate(), whole.estimate());
        }
        // A part with registers and a part still exact, merged either way.
        let (mut many, mut few, mut whole) = (Hll::new(), Hll::new(), Hll::new());
        for x in 0..1000u64 {
            many.insert(x);
            whole.insert(x);
        }
        for x in [3u64, 5000, 7, 6000] {
            few.insert(x);
            whole.insert(x);
        }
        let mut a = many.clone();
        a.merge(&few);
        let mut b = few.clone();
        b.merge(&many);
        assert_eq!((&a, &b), (&whole, &whole));
        // Two exact parts whose union is past the limit stop being exact.
        let mut a = Hll::new();
        let mut b = Hll::new();
        (0..200).for_each(|x| a.insert(x));
        (100..300).for_each(|x| b.insert(x));
        a.merge(&b);
        assert!(!a.is_exact());
        assert!((a.estimate() as i64 - 300).abs() <= 9, "{a:?}");
    }

    #[test]
    fn the_hash_is_fixed() {
        // SplitMix64's first output for seed 0.
        assert_eq!(hash64(0), 0xe220_a839_7b1d_cdaf);
    }
}
