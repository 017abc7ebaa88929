//! Row keys without per-element dispatch: one or two key columns of common element types
//! are compared through an order-preserving packed integer computed on the fly, other key
//! lists through the generic row comparison.

use crate::util::{cmp_rows, f64_key};
use fox_runtime::HostCol;
use std::cmp::Ordering;

/// An element type with an order-preserving unsigned image (floats by total order, NaN
/// last, every NaN equal).
pub(crate) trait Img: Copy + Send + Sync {
    const BITS: u32;
    fn img(self) -> u64;
}

impl Img for u8 {
    const BITS: u32 = 8;
    #[inline(always)]
    fn img(self) -> u64 {
        u64::from(self)
    }
}

impl Img for i32 {
    const BITS: u32 = 32;
    #[inline(always)]
    fn img(self) -> u64 {
        u64::from(self as u32 ^ 0x8000_0000)
    }
}

impl Img for u32 {
    const BITS: u32 = 32;
    #[inline(always)]
    fn img(self) -> u64 {
        u64::from(self)
    }
}

impl Img for i64 {
    const BITS: u32 = 64;
    #[inline(always)]
    fn img(self) -> u64 {
        self as u64 ^ (1 << 63)
    }
}

impl Img for u64 {
    const BITS: u32 = 64;
    #[inline(always)]
    fn img(self) -> u64 {
        self
    }
}

impl Img for f64 {
    const BITS: u32 = 64;
    #[inline(always)]
    fn img(self) -> u64 {
        f64_key(self)
    }
}

/// The rows of a group of key columns, compared lexicographically.
pub(crate) trait Rows: Sync {
    /// An order-preserving key of one row.
    type K: Ord + Copy + Send + Sync;
    fn key(&self, i: usize) -> Self::K;
    /// Compares row `i` of `self` with row `j` of `other`.
    #[inline(always)]
    fn cmp_with(&self, i: usize, other: &Self, j: usize) -> Ordering {
        self.key(i).cmp(&other.key(j))
    }
}

/// One key column.
pub(crate) struct One<'a, A>(pub &'a [A]);

impl<A: Img> Rows for One<'_, A> {
    type K = u64;
    #[inline(always)]
    fn key(&self, i: usize) -> u64 {
        self.0[i].img()
    }
}

/// Two key columns whose images fit in 64 bits together.
pub(crate) struct Two<'a, A, B>(pub &'a [A], pub &'a [B]);

impl<A: Img, B: Img> Rows for Two<'_, A, B> {
    type K = u64;
    #[inline(always)]
    fn key(&self, i: usize) -> u64 {
        (self.0[i].img() << B::BITS) | self.1[i].img()
    }
}

/// Two key columns of 64-bit images.
pub(crate) struct Wide<'a, A, B>(pub &'a [A], pub &'a [B]);

impl<A: Img, B: Img> Rows for Wide<'_, A, B> {
    type K = u128;
    #[inline(always)]
    fn key(&self, i: usize) -> u128 {
        (u128::from(self.0[i].img()) << 64) | u128::from(self.1[i].img())
    }
}

/// Any key columns, compared column by column.
pub(crate) struct Dyn<'a>(pub &'a [&'a HostCol]);

impl Rows for Dyn<'_> {
    /// Unused: `cmp_with` compares the columns.
    type K = ();
    #[inline(always)]
    fn key(&self, _: usize) {}
    #[inline(always)]
    fn cmp_with(&self, i: usize, other: &Self, j: usize) -> Ordering {
        cmp_rows(self.0, i, other.0, j)
    }
}

/// Runs `$body` with `$x` and `$y` bound to [`Rows`] views of the key lists `$a` and `$b`
/// (equal element types, checked by the caller), monomorphised for common key shapes.
macro_rules! with_rows {
    ($a:expr, $b:expr, |$x:ident, $y:ident| $body:expr) => {{
        use crate::keys::{Dyn, One, Two, Wide};
        use fox_runtime::HostCol as H;
        let (ka, kb): (&[&HostCol], &[&HostCol]) = ($a, $b);
        match (ka, kb) {
            ([p], [q]) => match (p, q) {
                (H::I32(p), H::I32(q)) => {
                    let ($x, $y) = (One(&p[..]), One(&q[..]));
                    $body
                }
                (H::U32(p), H::U32(q)) => {
                    let ($x, $y) = (One(&p[..]), One(&q[..]));
                    $body
                }
                (H::I64(p), H::I64(q)) => {
                    let ($x, $y) = (One(&p[..]), One(&q[..]));
                    $body
                }
                (H::U64(p), H::U64(q)) => {
                    let ($x, $y) = (One(&p[..]), One(&q[..]));
                    $body
                }
                _ => {
                    let ($x, $y) = (Dyn(ka), Dyn(kb));
                    $body
                }
            },
            ([p1, p2], [q1, q2]) => match (p1, p2, q1, q2) {
                (H::I32(p1), H::I32(p2), H::I32(q1), H::I32(q2)) => {
                    let ($x, $y) = (Two(&p1[..], &p2[..]), Two(&q1[..], &q2[..]));
                    $body
                }
                (H::U32(p1), H::U32(p2), H::U32(q1), H::U32(q2)) => {
                    let ($x, $y) = (Two(&p1[..], &p2[..]), Two(&q1[..], &q2[..]));
                    $body
                }
                (H::I32(p1), H::U32(p2), H::I32(q1), H::U32(q2)) => {
                    let ($x, $y) = (Two(&p1[..], &p2[..]), Two(&q1[..], &q2[..]));
                    $body
                }
                (H::U32(p1), H::I32(p2), H::U32(q1), H::I32(q2)) => {
                    let ($x, $y) = (Two(&p1[..], &p2[..]), Two(&q1[..], &q2[..]));
                    $body
                }
                (H::I64(p1), H::I64(p2), H::I64(q1), H::I64(q2)) => {
                    let ($x, $y) = (Wide(&p1[..], &p2[..]), Wide(&q1[..], &q2[..]));
                    $body
                }
                _ => {
                    let ($x, $y) = (Dyn(ka), Dyn(kb));
                    $body
                }
            },
            _ => {
                let ($x, $y) = (Dyn(ka), Dyn(kb));
                $body
            }
        }
    }};
}
pub(crate) use with_rows;

/// The first row in `lo..hi` of `right` not less than (`upper`: greater than) row `i` of
/// `left`, by binary search.
#[inline]
pub(crate) fn search<R: Rows>(left: &R, i: usize, right: &R, mut lo: usize, mut hi: usize, upper: bool) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let o = right.cmp_with(mid, left, i);
        if o == Ordering::Less || (upper && o == Ordering::Equal) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// As [`search`], galloping from `lo` first: cheap when the answer is near `lo`.
#[inline]
pub(crate) fn gallop<R: Rows>(left: &R, i: usize, right: &R, lo: usize, hi: usize, upper: bool) -> usize {
    let before = |p: usize| {
        let o = right.cmp_with(p, left, i);
        o == Ordering::Less || (upper && o == Ordering::Equal)
    };
    let mut start = lo;
    let mut step = 1;
    while start < hi && before(start) {
        let next = start + step;
        if next >= hi || !before(next) {
            return search(left, i, right, start + 1, next.min(hi), upper);
        }
        start = next + 1;
        step *= 2;
    }
    start
}
