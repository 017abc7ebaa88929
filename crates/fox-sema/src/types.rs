//! Type rules shared by the checker: widening, common types, constants and literals.

use crate::core::{Type, Value, MAX_DECIMAL, MAX_WIDE_DECIMAL};
use fox_syntax::ast::Lit;

pub(crate) use crate::core::MAX_SCALE;

/// The type names a declaration may use, for suggestions.
pub(crate) const TYPE_NAMES: &[&str] = &[
    "int32", "int64", "int", "float64", "float", "decimal", "string", "date", "bool",
];

/// Resolves a declared type name (`decimal` gets its scale separately).
pub(crate) fn type_from_name(name: &str, scale: Option<u32>) -> Option<Type> {
    Some(match name {
        "int32" => Type::Int32,
        "int64" | "int" => Type::Int64,
        "float64" | "float" => Type::Float64,
        "decimal" => Type::Decimal(scale.unwrap_or(2).min(u32::from(u8::MAX)) as u8),
        "string" => Type::String,
        "date" => Type::Date,
        "bool" => Type::Bool,
        _ => return None,
    })
}

pub(crate) fn is_numeric(t: Type) -> bool {
    matches!(
        t,
        Type::Int32 | Type::Int64 | Type::Decimal(_) | Type::WideDecimal(_) | Type::Float64
    )
}

pub(crate) fn is_integral(t: Type) -> bool {
    matches!(t, Type::Int32 | Type::Int64)
}

/// Whether a value of type `from` can be used where `to` is expected without losing
/// information: `int32` → `int64` → `decimal` → `float64`, a decimal to a larger scale,
/// and a decimal of 18 digits to one of 38 (never back).
pub(crate) fn widens_to(from: Type, to: Type) -> bool {
    if from == to {
        return true;
    }
    match (from, to) {
        (Type::Int32, Type::Int64 | Type::Decimal(_) | Type::WideDecimal(_) | Type::Float64) => true,
        (Type::Int64, Type::Decimal(_) | Type::WideDecimal(_) | Type::Float64) => true,
        (Type::Decimal(a) | Type::WideDecimal(a), Type::WideDecimal(b)) => a <= b,
        (Type::Decimal(a), Type::Decimal(b)) => a <= b,
        (Type::Decimal(_) | Type::WideDecimal(_), Type::Float64) => true,
        _ => false,
    }
}

/// The smallest type both widen to, if any.
pub(crate) fn common(a: Type, b: Type) -> Option<Type> {
    if widens_to(a, b) {
        Some(b)
    } else if widens_to(b, a) {
        Some(a)
    } else {
        None
    }
}

/// The scale of a decimal, 0 for an integer type.
pub(crate) fn scale_of(t: Type) -> u8 {
    t.decimal_scale().unwrap_or(0)
}

fn pow10(s: u8) -> i128 {
    10i128.pow(u32::from(s))
}

/// Whether an unscaled value has at most 18 digits (a `Decimal`).
fn fits_decimal(v: i128) -> bool {
    v.unsigned_abs() <= MAX_DECIMAL.unsigned_abs()
}

/// Converts a constant to a wider type; `None` when the conversion is not a widening or the
/// value does not fit.
pub(crate) fn convert_value(v: &Value, to: Type) -> Option<Value> {
    let out = match (v, to) {
        (Value::Int32(i), Type::Int32) => Value::Int32(*i),
        (Value::Int32(i), Type::Int64) => Value::Int64(i64::from(*i)),
        (Value::Int64(i), Type::Int64) => Value::Int64(*i),
        (Value::Int32(i), Type::Decimal(s)) => decimal(i128::from(*i), 0, s, false)?,
        (Value::Int64(i), Type::Decimal(s)) => decimal(i128::from(*i), 0, s, false)?,
        (Value::Decimal { unscaled, scale }, Type::Decimal(s)) if *scale <= s => decimal(*unscaled, *scale, s, false)?,
        (Value::Int32(i), Type::WideDecimal(s)) => decimal(i128::from(*i), 0, s, true)?,
        (Value::Int64(i), Type::WideDecimal(s)) => decimal(i128::from(*i), 0, s, true)?,
        (Value::Decimal { unscaled, scale }, Type::WideDecimal(s)) if *scale <= s => {
            decimal(*unscaled, *scale, s, true)?
        }
        (Value::Int32(i), Type::Float64) => Value::Float64(f64::from(*i)),
        (Value::Int64(i), Type::Float64) => Value::Float64(*i as f64),
        (Value::Decimal { unscaled, scale }, Type::Float64) => Value::Float64(*unscaled as f64 / pow10(*scale) as f64),
        (Value::Float64(f), Type::Float64) => Value::Float64(*f),
        (Value::String(s), Type::String) => Value::String(s.clone()),
        (Value::Date(d), Type::Date) => Value::Date(*d),
        (Value::Bool(b), Type::Bool) => Value::Bool(*b),
        _ => return None,
    };
    Some(out)
}

fn decimal(unscaled: i128, from: u8, to: u8, wide: bool) -> Option<Value> {
    let v = unscaled.checked_mul(pow10(to.checked_sub(from)?))?;
    let fits = if wide {
        v.unsigned_abs() <= MAX_WIDE_DECIMAL.unsigned_abs()
    } else {
        fits_decimal(v)
    };
    fits.then_some(Value::Decimal { unscaled: v, scale: to })
}

/// The type of a constant.
pub(crate) fn value_type(v: &Value) -> Type {
    match v {
        Value::Int32(_) => Type::Int32,
        Value::Int64(_) => Type::Int64,
        Value::Decimal { unscaled, scale } => Type::decimal(*scale, !fits_decimal(*unscaled)),
        Value::Float64(_) => Type::Float64,
        Value::String(_) => Type::String,
        Value::Date(_) => Type::Date,
        Value::Bool(_) => Type::Bool,
    }
}

/// A literal as a constant. With `want`, numeric literals adapt to it where that loses
/// nothing (an integer literal becomes an `int32`, a decimal or a float; a decimal literal
/// takes a larger scale or becomes a float); otherwise the literal keeps its own type and
/// the caller checks compatibility. `Err` explains a literal that cannot be represented.
pub(crate) fn lit_value(lit: &Lit, negate: bool, want: Option<Type>) -> Result<Value, String> {
    match lit {
        Lit::Int(i) => {
            let v = if negate {
                i.checked_neg()
                    .ok_or_else(|| format!("integer literal -{i} is out of range"))?
            } else {
                *i
            };
            match want {
                Some(Type::Int32) => i32::try_from(v)
                    .map(Value::Int32)
                    .map_err(|_| format!("integer literal {v} does not fit in int32")),
                Some(t @ (Type::Decimal(_) | Type::WideDecimal(_) | Type::Float64)) => {
                    convert_value(&Value::Int64(v), t).ok_or_else(|| format!("integer literal {v} does not fit in {t}"))
                }
                _ => Ok(Value::Int64(v)),
            }
        }
        Lit::Decimal(text) => {
            let (unscaled, scale) = parse_decimal(text)?;
            let unscaled = if negate { -unscaled } else { unscaled };
            let v = Value::Decimal { unscaled, scale };
            match want {
                Some(t @ (Type::Decimal(s) | Type::WideDecimal(s))) if s >= scale => {
                    convert_value(&v, t).ok_or_else(|| format!("decimal literal {text} does not fit in {t}"))
                }
                Some(Type::Float64) => Ok(Value::Float64(
                    text.parse::<f64>().map_err(|_| bad_number(text))? * sign(negate),
                )),
                _ => Ok(v),
            }
        }
        Lit::Float(text) => {
            let digits = text.trim_end_matches(['f', 'F']);
            let f = digits.parse::<f64>().map_err(|_| bad_number(text))?;
            if !f.is_finite() {
                return Err(format!("float literal {text} is out of range"));
            }
            Ok(Value::Float64(f * sign(negate)))
        }
        Lit::Str(s) => Ok(Value::String(s.clone())),
        Lit::Date(text) => parse_date(text).map(Value::Date),
        Lit::Bool(b) => Ok(Value::Bool(*b)),
    }
}

fn sign(negate: bool) -> f64 {
    if negate {
        -1.0
    } else {
        1.0
    }
}

fn bad_number(text: &str) -> String {
    format!("`{text}` is not a valid number")
}

/// Parses `-1.50` into `(-150, 2)`.
pub(crate) fn parse_decimal(text: &str) -> Result<(i128, u8), String> {
    let (neg, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (int_part, frac_part) = body.split_once('.').unwrap_or((body, ""));
    let digits_ok = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits_ok(int_part) || !digits_ok(frac_part) || (int_part.is_empty() && frac_part.is_empty()) {
        return Err(bad_number(text));
    }
    if frac_part.len() > usize::from(MAX_SCALE) {
        return Err(format!(
            "decimal literal {text} has {} fraction digits; at most {MAX_SCALE} are supported",
            frac_part.len()
        ));
    }
    let mut v: i128 = 0;
    for b in int_part.bytes().chain(frac_part.bytes()) {
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(i128::from(b - b'0')))
            .filter(|v| fits_decimal(*v))
            .ok_or_else(|| format!("decimal literal {text} has more than 18 digits; a decimal holds at most 18"))?;
    }
    Ok((if neg { -v } else { v }, frac_part.len() as u8))
}

/// Parses `YYYY-MM-DD` into days since 1970-01-01.
pub(crate) fn parse_date(text: &str) -> Result<i32, String> {
    let bad = || format!("`{text}` is not a valid date (expected YYYY-MM-DD)");
    let mut parts = text.split('-');
    let (Some(y), Some(m), Some(d), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return Err(bad());
    }
    let y: i64 = y.parse().map_err(|_| bad())?;
    let m: u32 = m.parse().map_err(|_| bad())?;
    let d: u32 = d.parse().map_err(|_| bad())?;
    if !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) {
        return Err(bad());
    }
    i32::try_from(days_from_civil(y, m, d)).map_err(|_| bad())
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
pub(crate) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The `(year, month, day)` of a day number.
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widening_order() {
        assert!(widens_to(Type::Int32, Type::Int64));
        assert!(widens_to(Type::Int64, Type::Decimal(2)));
        assert!(widens_to(Type::Decimal(2), Type::Decimal(4)));
        assert!(!widens_to(Type::Decimal(4), Type::Decimal(2)));
        assert!(widens_to(Type::Decimal(2), Type::Float64));
        assert!(!widens_to(Type::Float64, Type::Int32));
        assert!(!widens_to(Type::Date, Type::Int64));
        assert_eq!(common(Type::Int32, Type::Decimal(3)), Some(Type::Decimal(3)));
        assert_eq!(common(Type::Decimal(1), Type::Decimal(3)), Some(Type::Decimal(3)));
        assert_eq!(common(Type::String, Type::Int32), None);
    }

    #[test]
    fn decimal_literals() {
        assert_eq!(parse_decimal("-1.50"), Ok((-150, 2)));
        assert_eq!(parse_decimal("0.06"), Ok((6, 2)));
        assert!(parse_decimal("1.2.3").is_err());
        assert!(parse_decimal("99999999999999999999.5").is_err());
        assert_eq!(
            lit_value(&Lit::Decimal("0.5".into()), false, Some(Type::Decimal(2))),
            Ok(Value::Decimal { unscaled: 50, scale: 2 })
        );
    }

    #[test]
    fn int_literal_adapts() {
        assert_eq!(lit_value(&Lit::Int(7), false, Some(Type::Int32)), Ok(Value::Int32(7)));
        assert!(lit_value(&Lit::Int(3_000_000_000), false, Some(Type::Int32)).is_err());
        assert_eq!(
            lit_value(&Lit::Int(3), true, Some(Type::Decimal(2))),
            Ok(Value::Decimal {
                unscaled: -300,
                scale: 2
            })
        );
        assert_eq!(lit_value(&Lit::Int(3), false, None), Ok(Value::Int64(3)));
    }

    #[test]
    fn dates_round_trip() {
        assert_eq!(parse_date("1970-01-01"), Ok(0));
        assert_eq!(parse_date("1998-09-02"), Ok(10471));
        assert_eq!(civil_from_days(10471), (1998, 9, 2));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert!(parse_date("1998-02-30").is_err());
        assert!(parse_date("1998-13-01").is_err());
        assert!(parse_date("98-1-1").is_err());
        for d in [-800_000, -1, 0, 59, 11_016, 2_932_896] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
    }
}
