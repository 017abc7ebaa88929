//! The arithmetic the kernel contracts define, shared by every backend: decimal scales,
//! rounding half away from zero, and the finishing of exact sums and averages.

use fox_sema::core::{ArithOp, Type};

/// The scale of a type stored as a scaled integer (0 for integers); `None` for the
/// other types.
pub fn scale_of(ty: Type) -> Option<u32> {
    match ty {
        Type::Int32 | Type::Int64 => Some(0),
        Type::Decimal(s) | Type::WideDecimal(s) => Some(u32::from(s)),
        _ => None,
    }
}

/// `n / d` rounded half away from zero (`None` when `d` is 0 or the quotient overflows).
pub fn div_round_half_away(n: i128, d: i128) -> Option<i128> {
    let q = n.checked_div(d)?;
    let r = n.checked_rem(d)?;
    if r != 0 && r.unsigned_abs() >= d.unsigned_abs() - r.unsigned_abs() {
        Some(if (n < 0) != (d < 0) { q - 1 } else { q + 1 })
    } else {
        Some(q)
    }
}

/// A `sum` (or with `avg`, an average over `count` values) of integer-stored values
/// whose exact sum is `sum`, rescaled from scale `si` to the result's scale `so`:
/// `round_half_away(sum * 10^(so - si) / count)` (the contract of `ReduceByKey`). `None`
/// when it overflows 128 bits.
pub fn finish_int_sum(avg: bool, si: u32, so: u32, sum: i128, count: i128) -> Option<i128> {
    let (num, den) = if so >= si {
        let m = 10i128.checked_pow(so - si)?;
        (sum.checked_mul(m)?, if avg { count } else { 1 })
    } else {
        let d = 10i128.checked_pow(si - so)?;
        (sum, if avg { count.checked_mul(d)? } else { d })
    };
    div_round_half_away(num, den)
}

/// Why [`int_pow`] has no value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PowError {
    /// `0 ^ b` with `b < 0` (C's `pow` gives infinity).
    ZeroToNegative,
    /// The power is not an integer that a double holds exactly within int64 (C's `pow`
    /// rounds it, or its conversion to an integer is undefined).
    Inexact,
}

/// Soufflé's `a ^ b` on integers, which it computes as C's `pow` on the operands
/// converted to double and truncates to an integer, defined where that is exact: with
/// `b < 0`, `1 ^ b` is 1, `-1 ^ b` is ±1 and any other `a` (but 0) gives 0 (`|pow| < 1`);
/// with `b >= 0`, the exact power, when a double holds it exactly and it fits int64.
/// An odd `b` above 2^53 is even as a double, so `-1 ^ b` is then 1, as in C.
pub fn int_pow(a: i64, b: i64) -> Result<i64, PowError> {
    const EXACT: u64 = 1 << 53;
    let odd = b & 1 != 0 && b.unsigned_abs() <= EXACT;
    match a {
        0 if b < 0 => return Err(PowError::ZeroToNegative),
        0 => return Ok(i64::from(b == 0)),
        1 => return Ok(1),
        -1 => return Ok(if odd { -1 } else { 1 }),
        _ if b < 0 => return Ok(0),
        _ => {}
    }
    // |a| >= 2: beyond 2^63 from b = 64 on.
    if b >= 64 {
        return Err(PowError::Inexact);
    }
    let mut m: u128 = 1;
    for _ in 0..b {
        m *= u128::from(a.unsigned_abs());
        if m > 1 << 63 {
            return Err(PowError::Inexact);
        }
    }
    let r = if a < 0 && b & 1 == 1 { -(m as i128) } else { m as i128 };
    let r = i64::try_from(r).map_err(|_| PowError::Inexact)?;
    // A double holds r exactly when r has at most 53 significant bits.
    let sig = r.unsigned_abs() >> r.unsigned_abs().trailing_zeros().min(63);
    if sig > EXACT {
        return Err(PowError::Inexact);
    }
    Ok(r)
}

/// Soufflé's bitwise and logical operators on int64 (`op` one of them; shift counts
/// modulo 64, `bshl` wrapping; `land`, `lor`, `lxor` give 1 or 0).
pub fn int_bits(op: ArithOp, a: i64, b: i64) -> i64 {
    let s = (b & 63) as u32;
    match op {
        ArithOp::BitAnd => a & b,
        ArithOp::BitOr => a | b,
        ArithOp::BitXor => a ^ b,
        ArithOp::Shl => ((a as u64) << s) as i64,
        ArithOp::Shr => a >> s,
        ArithOp::ShrU => ((a as u64) >> s) as i64,
        ArithOp::LogAnd => i64::from(a != 0 && b != 0),
        ArithOp::LogOr => i64::from(a != 0 || b != 0),
        ArithOp::LogXor => i64::from((a != 0) != (b != 0)),
        // Not bitwise operators: no caller passes them.
        ArithOp::Add | ArithOp::Sub | ArithOp::Mul | ArithOp::Div | ArithOp::Rem | ArithOp::Pow => 0,
    }
}

/// The integer at the start of `s` as Soufflé's `to_number` (`unsigned` false) or
/// `to_unsigned` (true) reads it (Soufflé 2.5, 64-bit): `0b…`/`-0b…` in base 2 and
/// `0x…`/`-0x…` in base 16 when the string starts so, else base 10; then as C's
/// `strtoll`/`strtoull`: leading white space, a sign, the digits, and whatever follows is
/// ignored. `None` when there is no digit or the value is out of range of int64 (for
/// `to_unsigned`: a string starting with `-`, a value out of range of uint64, or one
/// above int64's largest, which Fox cannot hold).
pub fn parse_souffle_int(s: &str, unsigned: bool) -> Option<i64> {
    let b = s.as_bytes();
    let (text, base): (std::borrow::Cow<[u8]>, u32) = if unsigned {
        if b.starts_with(b"-") {
            return None;
        }
        if let Some(rest) = b.strip_prefix(b"0b") {
            (rest.into(), 2)
        } else if b.starts_with(b"0x") {
            (b.into(), 16)
        } else {
            (b.into(), 10)
        }
    } else if let Some(rest) = b.strip_prefix(b"-0b") {
        let mut v = b"-".to_vec();
        v.extend_from_slice(rest);
        (v.into(), 2)
    } else if let Some(rest) = b.strip_prefix(b"0b") {
        (rest.into(), 2)
    } else if b.starts_with(b"0x") || b.starts_with(b"-0x") {
        (b.into(), 16)
    } else {
        (b.into(), 10)
    };
    let (neg, mag) = strto_magnitude(&text, base)?;
    if unsigned {
        // strtoull: a value above uint64 is out of range; a negated one wraps.
        let m = u64::try_from(mag).ok()?;
        let v = if neg { m.wrapping_neg() } else { m };
        i64::try_from(v).ok()
    } else {
        let v = if neg { -(mag as i128) } else { mag as i128 };
        i64::try_from(v).ok()
    }
}

/// C's `strto*` on `s` in `base` (2, 10 or 16): whether a `-` was read, and the
/// magnitude of the digits (saturated above u64::MAX + 1); `None` when there is no digit.
fn strto_magnitude(s: &[u8], base: u32) -> Option<(bool, u128)> {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    let digit = |c: u8| (c as char).to_digit(base);
    // Base 16 reads a `0x` prefix when a hexadecimal digit follows it.
    if base == 16
        && i + 2 < s.len()
        && s[i] == b'0'
        && (s[i + 1] == b'x' || s[i + 1] == b'X')
        && digit(s[i + 2]).is_some()
    {
        i += 2;
    }
    let start = i;
    let mut mag: u128 = 0;
    while i < s.len() {
        let Some(d) = digit(s[i]) else { break };
        mag = (mag * u128::from(base) + u128::from(d)).min(u128::from(u64::MAX) + 2);
        i += 1;
    }
    (i > start).then_some((neg, mag))
}

#[cfg(test)]
mod souffle_tests {
    use super::*;

    #[test]
    fn pow_is_exact_or_fails() {
        assert_eq!(int_pow(2, 10), Ok(1024));
        assert_eq!(int_pow(-2, 3), Ok(-8));
        assert_eq!(int_pow(2, 62), Ok(1 << 62));
        assert_eq!(int_pow(-2, 63), Ok(i64::MIN));
        assert_eq!(int_pow(2, 63), Err(PowError::Inexact));
        assert_eq!(int_pow(3, 39), Err(PowError::Inexact));
        assert_eq!(int_pow(3, 33), Ok(5_559_060_566_555_523));
        assert_eq!(int_pow(0, 0), Ok(1));
        assert_eq!(int_pow(0, -1), Err(PowError::ZeroToNegative));
        assert_eq!(int_pow(2, -1), Ok(0));
        assert_eq!(int_pow(-1, -3), Ok(-1));
        assert_eq!(int_pow(-1, (1 << 53) + 1), Ok(1));
        assert_eq!(int_pow(7, 0), Ok(1));
        assert_eq!(int_pow(i64::MIN, 1), Ok(i64::MIN));
        assert_eq!(int_pow(i64::MAX, 1), Err(PowError::Inexact));
        assert_eq!(int_pow(2, i64::MAX), Err(PowError::Inexact));
    }

    #[test]
    fn bits_follow_souffle() {
        assert_eq!(int_bits(ArithOp::Shl, 1, 63), i64::MIN);
        assert_eq!(int_bits(ArithOp::Shl, 1, 64), 1);
        assert_eq!(int_bits(ArithOp::Shl, 1, -1), i64::MIN);
        assert_eq!(int_bits(ArithOp::Shr, -16, 2), -4);
        assert_eq!(int_bits(ArithOp::ShrU, -16, 2), 4_611_686_018_427_387_900);
        assert_eq!(int_bits(ArithOp::Shr, 16, -1), 0);
        assert_eq!(int_bits(ArithOp::LogXor, 2, 3), 0);
        assert_eq!(int_bits(ArithOp::LogOr, 0, -3), 1);
    }

    #[test]
    fn parses_as_souffle() {
        let n = |s: &str| parse_souffle_int(s, false);
        let u = |s: &str| parse_souffle_int(s, true);
        assert_eq!(n("42"), Some(42));
        assert_eq!(n(" 42abc"), Some(42));
        assert_eq!(n("-42"), Some(-42));
        assert_eq!(n("+5"), Some(5));
        assert_eq!(n("0x10"), Some(16));
        assert_eq!(n("-0x10"), Some(-16));
        assert_eq!(n("0xg"), Some(0));
        assert_eq!(n("0b101"), Some(5));
        assert_eq!(n("-0b101"), Some(-5));
        assert_eq!(n("0b"), None);
        assert_eq!(n("010"), Some(10));
        assert_eq!(n("1e3"), Some(1));
        assert_eq!(n(""), None);
        assert_eq!(n("abc"), None);
        assert_eq!(n("9223372036854775807"), Some(i64::MAX));
        assert_eq!(n("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(n("9223372036854775808"), None);
        assert_eq!(u("5"), Some(5));
        assert_eq!(u("-1"), None);
        assert_eq!(u("0x10"), Some(16));
        assert_eq!(u("18446744073709551615"), None);
        assert_eq!(u(" -18446744073709551615"), Some(1));
    }
}
