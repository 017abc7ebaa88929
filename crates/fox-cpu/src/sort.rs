//! Sorting: the stable permutation of `SortPerm`, and `AdjacentDistinct`.

use crate::keys::Img;
use crate::util::{
    alloc, as_u32, check_stop, check_u32_rows, f64_key, par_map, with_capacity, KResult, Stop, CHUNK, PAR_MIN,
};
use fox_runtime::cancel::{is_set, never};
use fox_runtime::HostCol;
use rayon::prelude::*;
use std::cmp::Ordering;

/// One key column as order-preserving unsigned integers.
struct Key {
    v: Vec<u64>,
}

/// What the encoded sort keys are called in out-of-memory messages.
const KEYS: &str = "the sort keys";

/// `f` of every element of `v`, or an out-of-memory error.
fn map_all<T, U>(v: &[T], f: impl Fn(&T) -> U) -> KResult<Vec<U>> {
    let mut out = with_capacity(v.len(), KEYS)?;
    out.extend(v.iter().map(f));
    Ok(out)
}

/// The keys of one column: one, or two (high then low half) for a 128-bit column.
fn encode(col: &HostCol, desc: bool, rank: Option<&[u32]>, k: usize) -> KResult<Vec<Key>> {
    let (v, bits): (Vec<u64>, u32) = match (col, rank) {
        (HostCol::U32(v), Some(rank)) => {
            let mut out = with_capacity(v.len(), KEYS)?;
            for (row, &code) in v.iter().enumerate() {
                let Some(&r) = rank.get(code as usize) else {
                    return Err(format!(
                        "string code {code} of key {k} at row {row} is outside the rank table ({} entries)",
                        rank.len()
                    ));
                };
                out.push(u64::from(r));
            }
            (out, 32)
        }
        (other, Some(_)) => {
            return Err(format!(
                "key {k} is ordered by string rank but is {}, not a string code column",
                other.elem().name()
            ))
        }
        (HostCol::U8(v), None) => (map_all(v, |&x| u64::from(x))?, 8),
        (HostCol::I32(v), None) => (map_all(v, |&x| u64::from(x as u32 ^ 0x8000_0000))?, 32),
        (HostCol::U32(v), None) => (map_all(v, |&x| u64::from(x))?, 32),
        (HostCol::I64(v), None) => (map_all(v, |&x| x as u64 ^ (1 << 63))?, 64),
        (HostCol::U64(v), None) => (map_all(v, |&x| x)?, 64),
        (HostCol::F64(v), None) => (map_all(v, |&x| f64_key(x))?, 64),
        (HostCol::I128(v), None) => {
            let d = if desc { u64::MAX } else { 0 };
            let hi = map_all(v, |&x| ((x >> 64) as u64 ^ (1 << 63)) ^ d)?;
            let lo = map_all(v, |&x| x as u64 ^ d)?;
            return Ok(vec![Key { v: hi }, Key { v: lo }]);
        }
    };
    let mut v = v;
    if desc {
        let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
        v.iter_mut().for_each(|x| *x = !*x & mask);
    }
    Ok(vec![Key { v }])
}

fn sort_pairs<K: Ord + Copy + Send>(mut pairs: Vec<(K, u32)>) -> KResult<Vec<u32>> {
    if pairs.len() < PAR_MIN {
        pairs.sort_unstable();
    } else {
        pairs.par_sort_unstable();
    }
    map_all(&pairs, |&(_, i)| i)
}

/// `SortPerm { desc, by_rank }`: args k key columns, then the `Rank` table if any key
/// is by rank. The stable permutation ordering the rows by the keys.
pub(crate) fn sort_perm(args: &[&HostCol], desc: &[bool], by_rank: &[bool]) -> KResult<HostCol> {
    sort_perm_until(args, desc, by_rank, never())
}

/// [`sort_perm`], which fails once `stop` is set (read between the passes of a radix sort).
pub(crate) fn sort_perm_until(args: &[&HostCol], desc: &[bool], by_rank: &[bool], stop: &Stop) -> KResult<HostCol> {
    let k = desc.len();
    let need_rank = by_rank.iter().any(|b| *b);
    let rank = if need_rank {
        Some(as_u32(args[k], "the rank table")?)
    } else {
        None
    };
    let n = args[0].len();
    check_u32_rows(n, "the input")?;
    if !need_rank {
        if let Some(perm) = sort_direct(&args[..k], desc, n, stop)? {
            check_stop(stop)?;
            return Ok(HostCol::U32(perm));
        }
    }
    let keys: Vec<Key> = (0..k)
        .map(|i| encode(args[i], desc[i], if by_rank[i] { rank } else { None }, i))
        .collect::<KResult<Vec<_>>>()?
        .into_iter()
        .flatten()
        .collect();
    // Each key's range: only the bits that vary are packed.
    let ranges: Vec<(u64, u32)> = keys
        .iter()
        .map(|key| {
            let (lo, hi) = min_max(&key.v);
            (lo, 64 - (hi - lo).leading_zeros())
        })
        .collect();
    let total_bits: u32 = ranges.iter().map(|r| r.1).sum();
    let perm = if total_bits == 0 {
        par_map(n, "the permutation", |i| i as u32)?
    } else if total_bits <= 32 {
        let packed = par_map(n, KEYS, |i| {
            let mut p = 0u32;
            for (key, &(lo, w)) in keys.iter().zip(&ranges) {
                if w > 0 {
                    p = (p << w) | (key.v[i] - lo) as u32;
                }
            }
            p
        })?;
        drop(keys);
        radix_perm_until(packed, total_bits, stop)?
    } else if total_bits <= 64 {
        let packed = par_map(n, KEYS, |i| {
            let mut p = 0u64;
            for (key, &(lo, w)) in keys.iter().zip(&ranges) {
                if w > 0 {
                    p = if w == 64 {
                        key.v[i] - lo
                    } else {
                        (p << w) | (key.v[i] - lo)
                    };
                }
            }
            p
        })?;
        drop(keys);
        radix_perm_until(packed, total_bits, stop)?
    } else if total_bits <= 128 {
        let pairs = par_map(n, KEYS, |i| {
            let mut p = 0u128;
            for (key, &(lo, w)) in keys.iter().zip(&ranges) {
                if w > 0 {
                    p = (p << w) | u128::from(key.v[i] - lo);
                }
            }
            (p, i as u32)
        })?;
        sort_pairs(pairs)?
    } else {
        let mut idx: Vec<u32> = par_map(n, "the permutation", |i| i as u32)?;
        let cmp = |a: &u32, b: &u32| {
            for key in &keys {
                match key.v[*a as usize].cmp(&key.v[*b as usize]) {
                    Ordering::Equal => {}
                    o => return o,
                }
            }
            Ordering::Equal
        };
        if n < PAR_MIN {
            idx.sort_by(cmp);
        } else {
            idx.par_sort_by(cmp);
        }
        idx
    };
    check_stop(stop)?;
    Ok(HostCol::U32(perm))
}

/// The image of `x` for a key sorted descending or not.
#[inline(always)]
fn dimg<T: Img>(x: T, desc: bool) -> u64 {
    if desc {
        !x.img()
    } else {
        x.img()
    }
}

/// Smallest and largest image of a column (`(0, 0)` when empty).
fn col_range<T: Img>(v: &[T], desc: bool) -> (u64, u64) {
    let fold = |(lo, hi): (u64, u64), &x: &T| {
        let x = dimg(x, desc);
        (lo.min(x), hi.max(x))
    };
    let (lo, hi) = if v.len() < PAR_MIN {
        v.iter().fold((u64::MAX, 0), fold)
    } else {
        v.par_chunks(CHUNK)
            .map(|c| c.iter().fold((u64::MAX, 0), fold))
            .reduce(|| (u64::MAX, 0), |a, b| (a.0.min(b.0), a.1.max(b.1)))
    };
    if v.is_empty() {
        (0, 0)
    } else {
        (lo, hi)
    }
}

/// Shifts `w` bits of key `v` (image minus `lo`) into every packed key.
fn pack_col<T: Img, K: PackKey>(packed: &mut [K], v: &[T], desc: bool, lo: u64, w: u32) {
    let run = |(c, out): (usize, &mut [K])| {
        for (p, &x) in out.iter_mut().zip(&v[c * CHUNK..]) {
            *p = p.push(w, dimg(x, desc) - lo);
        }
    };
    if packed.len() < PAR_MIN {
        packed.chunks_mut(CHUNK).enumerate().for_each(run);
    } else {
        packed.par_chunks_mut(CHUNK).enumerate().for_each(run);
    }
}

/// A packed sort key.
trait PackKey: RadixKey {
    /// `self << w | x` (`x < 2^w`, and the result fits).
    fn push(self, w: u32, x: u64) -> Self;
}

impl PackKey for u32 {
    #[inline(always)]
    fn push(self, w: u32, x: u64) -> u32 {
        if w >= 32 {
            x as u32
        } else {
            (self << w) | x as u32
        }
    }
}

impl PackKey for u64 {
    #[inline(always)]
    fn push(self, w: u32, x: u64) -> u64 {
        if w >= 64 {
            x
        } else {
            (self << w) | x
        }
    }
}

fn pack_all<K: PackKey>(keys: &[&HostCol], desc: &[bool], ranges: &[(u64, u32)], n: usize) -> KResult<Vec<K>> {
    let mut packed = alloc::<K>(n, KEYS)?;
    for ((col, &d), &(lo, w)) in keys.iter().zip(desc).zip(ranges) {
        if w == 0 {
            continue;
        }
        match col {
            HostCol::U8(v) => pack_col(&mut packed, v, d, lo, w),
            HostCol::I32(v) => pack_col(&mut packed, v, d, lo, w),
            HostCol::U32(v) => pack_col(&mut packed, v, d, lo, w),
            HostCol::I64(v) => pack_col(&mut packed, v, d, lo, w),
            HostCol::U64(v) => pack_col(&mut packed, v, d, lo, w),
            HostCol::F64(v) => pack_col(&mut packed, v, d, lo, w),
            // `sort_direct` takes no 128-bit key.
            HostCol::I128(_) => {}
        }
    }
    Ok(packed)
}

/// The permutation of keys without rank tables that pack into 64 bits once each key is
/// reduced to its range, by radix sort straight from the columns; `None` when wider.
fn sort_direct(keys: &[&HostCol], desc: &[bool], n: usize, stop: &Stop) -> KResult<Option<Vec<u32>>> {
    if keys.iter().any(|c| c.elem() == fox_kernel::Elem::I128) {
        return Ok(None);
    }
    let ranges: Vec<(u64, u32)> = keys
        .iter()
        .zip(desc)
        .map(|(col, &d)| {
            let (lo, hi) = match col {
                HostCol::U8(v) => col_range(v, d),
                HostCol::I32(v) => col_range(v, d),
                HostCol::U32(v) => col_range(v, d),
                HostCol::I64(v) => col_range(v, d),
                HostCol::U64(v) => col_range(v, d),
                HostCol::F64(v) => col_range(v, d),
                HostCol::I128(_) => (0, u64::MAX),
            };
            (lo, 64 - (hi - lo).leading_zeros())
        })
        .collect();
    let bits: u32 = ranges.iter().map(|r| r.1).sum();
    Ok(if bits <= 32 {
        Some(radix_perm_until(pack_all::<u32>(keys, desc, &ranges, n)?, bits, stop)?)
    } else if bits <= 64 {
        Some(radix_perm_until(pack_all::<u64>(keys, desc, &ranges, n)?, bits, stop)?)
    } else {
        None
    })
}

/// The smallest and largest value (`(0, 0)` when empty).
fn min_max(v: &[u64]) -> (u64, u64) {
    let fold = |(lo, hi): (u64, u64), &x: &u64| (lo.min(x), hi.max(x));
    let (lo, hi) = if v.len() < PAR_MIN {
        v.iter().fold((u64::MAX, 0), fold)
    } else {
        v.par_chunks(crate::util::CHUNK)
            .map(|c| c.iter().fold((u64::MAX, 0), fold))
            .reduce(|| (u64::MAX, 0), |a, b| (a.0.min(b.0), a.1.max(b.1)))
    };
    if v.is_empty() {
        (0, 0)
    } else {
        (lo, hi)
    }
}

/// An unsigned key of a radix sort.
pub(crate) trait RadixKey: Copy + Ord + Default + Send + Sync {
    fn digit(self, shift: u32, mask: u32) -> usize;
}

impl RadixKey for u32 {
    #[inline(always)]
    fn digit(self, shift: u32, mask: u32) -> usize {
        ((self >> shift) & mask) as usize
    }
}

impl RadixKey for u64 {
    #[inline(always)]
    fn digit(self, shift: u32, mask: u32) -> usize {
        ((self >> shift) as u32 & mask) as usize
    }
}

/// Below this many rows, a comparison sort of (key, index) pairs is used.
const RADIX_MIN: usize = 1 << 12;

/// The widest digit of a radix pass.
const DIGIT_BITS: u32 = 11;

/// The stable permutation sorting `keys`, whose values are below `2^bits`: an LSB radix
/// sort, each pass with per-chunk histograms and a parallel scatter into disjoint slices.
/// An error when memory runs out.
#[cfg(test)]
pub(crate) fn radix_perm<K: RadixKey>(keys: Vec<K>, bits: u32) -> KResult<Vec<u32>> {
    radix_perm_until(keys, bits, never())
}

/// [`radix_perm`], which stops between passes once `stop` is set (its result is then no
/// permutation: the caller checks `stop`).
fn radix_perm_until<K: RadixKey>(keys: Vec<K>, bits: u32, stop: &Stop) -> KResult<Vec<u32>> {
    let n = keys.len();
    if n < RADIX_MIN || bits == 0 {
        let mut pairs: Vec<(K, u32)> = with_capacity(n, KEYS)?;
        pairs.extend(keys.into_iter().zip(0u32..));
        pairs.sort_unstable();
        return map_all(&pairs, |&(_, i)| i);
    }
    let passes = bits.div_ceil(DIGIT_BITS);
    let dbits = bits.div_ceil(passes);
    let mut ks = keys;
    let mut vs: Vec<u32> = par_map(n, "the permutation", |i| i as u32)?;
    let mut kt = alloc::<K>(n, KEYS)?;
    let mut vt = alloc::<u32>(n, "the permutation")?;
    for p in 0..passes {
        if is_set(stop) {
            break;
        }
        let shift = p * dbits;
        let last = p + 1 == passes;
        if scatter(&ks, &vs, &mut kt, &mut vt, shift, dbits.min(bits - shift), last) {
            std::mem::swap(&mut ks, &mut kt);
            std::mem::swap(&mut vs, &mut vt);
        }
    }
    Ok(vs)
}

/// One stable counting pass on the digit at `shift`. Returns false (and writes nothing)
/// when every key has the same digit.
fn scatter<K: RadixKey>(
    ks: &[K],
    vs: &[u32],
    kd: &mut [K],
    vd: &mut [u32],
    shift: u32,
    dbits: u32,
    last: bool,
) -> bool {
    let n = ks.len();
    let radix = 1usize << dbits;
    let mask = (radix - 1) as u32;
    let parts = if n < PAR_MIN {
        1
    } else {
        2 * rayon::current_num_threads().max(1)
    };
    let size = n.div_ceil(parts);
    let bounds: Vec<(usize, usize)> = (0..parts).map(|c| (c * size, ((c + 1) * size).min(n))).collect();
    let hist = |&(a, b): &(usize, usize)| {
        let mut h = vec![0usize; radix];
        for &k in &ks[a..b] {
            h[k.digit(shift, mask)] += 1;
        }
        h
    };
    let hists: Vec<Vec<usize>> = if parts == 1 {
        bounds.iter().map(hist).collect()
    } else {
        bounds.par_iter().map(hist).collect()
    };
    if (0..radix).any(|d| hists.iter().map(|h| h[d]).sum::<usize>() == n) {
        return false;
    }
    // Bucket-major, part-minor layout: each (bucket, part) owns one contiguous slice.
    let mut kslices: Vec<Vec<&mut [K]>> = (0..parts).map(|_| Vec::with_capacity(radix)).collect();
    let mut vslices: Vec<Vec<&mut [u32]>> = (0..parts).map(|_| Vec::with_capacity(radix)).collect();
    let (mut krest, mut vrest) = (kd, vd);
    for d in 0..radix {
        for (c, h) in hists.iter().enumerate() {
            let (k, kr) = std::mem::take(&mut krest).split_at_mut(if last { 0 } else { h[d] });
            let (v, vr) = std::mem::take(&mut vrest).split_at_mut(h[d]);
            kslices[c].push(k);
            vslices[c].push(v);
            krest = kr;
            vrest = vr;
        }
    }
    type Part<'s, K> = ((&'s (usize, usize), Vec<&'s mut [K]>), Vec<&'s mut [u32]>);
    let run = |((&(a, b), mut kout), mut vout): Part<K>| {
        let mut cur = vec![0usize; radix];
        for (&k, &v) in ks[a..b].iter().zip(&vs[a..b]) {
            let d = k.digit(shift, mask);
            let c = cur[d];
            if !last {
                kout[d][c] = k;
            }
            vout[d][c] = v;
            cur[d] = c + 1;
        }
    };
    if parts == 1 {
        bounds.iter().zip(kslices).zip(vslices).for_each(run);
    } else {
        bounds.par_iter().zip(kslices).zip(vslices).for_each(run);
    }
    true
}

/// `AdjacentDistinct`: 1 where row i differs from row i-1 in any column (row 0: 1).
pub(crate) fn adjacent_distinct(args: &[&HostCol]) -> KResult<HostCol> {
    let n = args[0].len();
    let mut flags = alloc::<u8>(n, "the distinct-row flags")?;
    for col in args {
        match col {
            HostCol::U8(v) => mark_changes(&mut flags, v),
            HostCol::I32(v) => mark_changes(&mut flags, v),
            HostCol::U32(v) => mark_changes(&mut flags, v),
            HostCol::I64(v) => mark_changes(&mut flags, v),
            HostCol::U64(v) => mark_changes(&mut flags, v),
            HostCol::F64(v) => mark_changes(&mut flags, v),
            HostCol::I128(v) => {
                for i in 1..n {
                    flags[i] |= u8::from(v[i] != v[i - 1]);
                }
            }
        }
    }
    if let Some(f) = flags.first_mut() {
        *f = 1;
    }
    Ok(HostCol::U8(flags))
}

/// `RepeatedKey`: the first row `i` whose row `i + 1` has the same keys (compared as
/// `AdjacentDistinct` compares), as one U32 row, or no row. With `nkeys == 0` the one
/// argument gives the row count and every row has the same key.
pub(crate) fn repeated_key(args: &[&HostCol], nkeys: usize) -> KResult<HostCol> {
    let n = args[0].len();
    let first = if nkeys == 0 || n < 2 {
        (nkeys == 0 && n >= 2).then_some(0)
    } else {
        let HostCol::U8(flags) = adjacent_distinct(args)? else {
            return Err("adjacent_distinct made no flags".into());
        };
        flags[1..].par_iter().position_first(|&f| f == 0)
    };
    let row = match first {
        Some(i) => vec![u32::try_from(i).map_err(|_| format!("row {i} does not fit a u32 row index"))?],
        None => Vec::new(),
    };
    Ok(HostCol::U32(row))
}

/// Sets `flags[i]` where `v[i]` differs from `v[i - 1]` (floats by total order, NaNs equal).
fn mark_changes<T: Img>(flags: &mut [u8], v: &[T]) {
    let run = |(c, out): (usize, &mut [u8])| {
        let a = c * CHUNK;
        for (k, f) in out.iter_mut().enumerate() {
            let i = a + k;
            if i > 0 {
                *f |= u8::from(v[i].img() != v[i - 1].img());
            }
        }
    };
    if flags.len() < PAR_MIN {
        flags.chunks_mut(CHUNK).enumerate().for_each(run);
    } else {
        flags.par_chunks_mut(CHUNK).enumerate().for_each(run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::test_rng as rng;

    fn reference<K: Ord + Copy>(keys: &[K]) -> Vec<u32> {
        let mut idx: Vec<u32> = (0..keys.len() as u32).collect();
        idx.sort_by_key(|&i| keys[i as usize]);
        idx
    }

    #[test]
    fn radix_matches_a_stable_comparison_sort() {
        let mut r = rng(7);
        for &n in &[0usize, 1, 5, RADIX_MIN - 1, RADIX_MIN + 3, 100_000] {
            let wide: Vec<u64> = (0..n).map(|_| r()).collect();
            assert_eq!(radix_perm(wide.clone(), 64).unwrap(), reference(&wide), "u64, n = {n}");
            let narrow: Vec<u32> = (0..n).map(|_| (r() % 1000) as u32).collect();
            assert_eq!(
                radix_perm(narrow.clone(), 10).unwrap(),
                reference(&narrow),
                "u32, n = {n}"
            );
            let equal = vec![42u64; n];
            assert_eq!(
                radix_perm(equal.clone(), 6).unwrap(),
                reference(&equal),
                "equal, n = {n}"
            );
            // Skewed: most keys in one bucket, a few spread wide.
            let skewed: Vec<u64> = (0..n).map(|_| if r() % 16 == 0 { r() >> 20 } else { 3 }).collect();
            assert_eq!(
                radix_perm(skewed.clone(), 44).unwrap(),
                reference(&skewed),
                "skewed, n = {n}"
            );
        }
    }

    fn perm_of(args: &[&HostCol], desc: &[bool]) -> Vec<u32> {
        match sort_perm(args, desc, &vec![false; desc.len()]).unwrap() {
            HostCol::U32(p) => p,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sort_perm_orders_signed_and_descending_keys_stably() {
        let mut r = rng(11);
        for &n in &[10usize, 70_000] {
            let x: Vec<i32> = (0..n).map(|_| (r() % 2001) as i32 - 1000).collect();
            let y: Vec<i32> = (0..n).map(|_| r() as i32).collect();
            let z: Vec<i64> = (0..n).map(|_| (r() % 50) as i64 - 25).collect();
            let f: Vec<f64> = (0..n).map(|_| (r() % 9) as f64 - 4.5).collect();
            let (cx, cy, cz, cf) = (
                HostCol::I32(x.clone()),
                HostCol::I32(y.clone()),
                HostCol::I64(z.clone()),
                HostCol::F64(f.clone()),
            );
            let mut want: Vec<u32> = (0..n as u32).collect();
            want.sort_by_key(|&i| (x[i as usize], y[i as usize]));
            assert_eq!(perm_of(&[&cx, &cy], &[false, false]), want);
            let mut want: Vec<u32> = (0..n as u32).collect();
            want.sort_by_key(|&i| (std::cmp::Reverse(x[i as usize]), z[i as usize]));
            assert_eq!(perm_of(&[&cx, &cz], &[true, false]), want);
            let mut want: Vec<u32> = (0..n as u32).collect();
            want.sort_by(|&a, &b| f[b as usize].total_cmp(&f[a as usize]));
            assert_eq!(perm_of(&[&cf], &[true]), want);
            // Three wide keys take the comparison path.
            let mut want: Vec<u32> = (0..n as u32).collect();
            want.sort_by_key(|&i| (z[i as usize], y[i as usize], x[i as usize]));
            assert_eq!(perm_of(&[&cz, &cy, &cx], &[false, false, false]), want);
        }
    }
}
