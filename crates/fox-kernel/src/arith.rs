//! The arithmetic the kernel contracts define, shared by every backend: decimal scales,
//! rounding half away from zero, and the finishing of exact sums and averages.

use fox_sema::core::Type;

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
