//! The reference evaluator's runtime values: totally ordered, so that relations are plain
//! `BTreeSet`s of rows.

use fox_sema::core::{Type, Value};
use std::cmp::Ordering;

/// A value during reference evaluation. Integers of both widths are `Int` (the type says
/// which range applies); a decimal carries its scale.
#[derive(Clone, Debug)]
pub(crate) enum RV {
    Int(i64),
    Dec(i128, u8),
    Float(f64),
    Str(String),
    Date(i32),
    Bool(bool),
}

impl RV {
    fn rank(&self) -> u8 {
        match self {
            RV::Int(_) => 0,
            RV::Dec(..) => 1,
            RV::Float(_) => 2,
            RV::Str(_) => 3,
            RV::Date(_) => 4,
            RV::Bool(_) => 5,
        }
    }
}

/// Compares two decimals of possibly different scales exactly.
pub(crate) fn dec_cmp(a: i128, sa: u8, b: i128, sb: u8) -> Ordering {
    if sa == sb {
        return a.cmp(&b);
    }
    let (hi, lo, flip) = if sa > sb { (a, b, false) } else { (b, a, true) };
    let shift = u32::from(sa.abs_diff(sb));
    let ord = match 10i128.checked_pow(shift).and_then(|p| lo.checked_mul(p)) {
        Some(lo_scaled) => hi.cmp(&lo_scaled),
        // `lo` scaled up does not fit: its magnitude exceeds any `hi`.
        None => 0.cmp(&lo),
    };
    if flip {
        ord.reverse()
    } else {
        ord
    }
}

impl Ord for RV {
    fn cmp(&self, other: &RV) -> Ordering {
        match (self, other) {
            (RV::Int(a), RV::Int(b)) => a.cmp(b),
            (RV::Dec(a, sa), RV::Dec(b, sb)) => dec_cmp(*a, *sa, *b, *sb),
            (RV::Float(a), RV::Float(b)) => a.total_cmp(b),
            (RV::Str(a), RV::Str(b)) => a.as_bytes().cmp(b.as_bytes()),
            (RV::Date(a), RV::Date(b)) => a.cmp(b),
            (RV::Bool(a), RV::Bool(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for RV {
    fn partial_cmp(&self, other: &RV) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for RV {
    fn eq(&self, other: &RV) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for RV {}

/// A constant of the core program as a reference value.
pub(crate) fn from_value(v: &Value) -> RV {
    match v {
        Value::Int32(i) => RV::Int(i64::from(*i)),
        Value::Int64(i) => RV::Int(*i),
        Value::Decimal { unscaled, scale } => RV::Dec(*unscaled, *scale),
        Value::Float64(f) => RV::Float(*f),
        Value::String(s) => RV::Str(s.clone()),
        Value::Date(d) => RV::Date(*d),
        Value::Bool(b) => RV::Bool(*b),
    }
}

/// A reference value of type `ty` as a core value. The value must already have the type.
pub(crate) fn to_value(v: &RV, ty: Type) -> Value {
    match (v, ty) {
        (RV::Int(i), Type::Int32) => Value::Int32(*i as i32),
        (RV::Int(i), _) => Value::Int64(*i),
        (RV::Dec(u, s), _) => Value::Decimal {
            unscaled: *u,
            scale: *s,
        },
        (RV::Float(f), _) => Value::Float64(*f),
        (RV::Str(s), _) => Value::String(s.clone()),
        (RV::Date(d), _) => Value::Date(*d),
        (RV::Bool(b), _) => Value::Bool(*b),
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The (year, month, day) of a day number.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
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
    fn dates_round_trip_through_day_numbers() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        for z in (-800_000..800_000).step_by(997) {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
    }

    #[test]
    fn decimals_compare_across_scales() {
        assert_eq!(dec_cmp(150, 2, 15, 1), Ordering::Equal);
        assert_eq!(dec_cmp(-1, 0, 5, 3), Ordering::Less);
        assert_eq!(dec_cmp(i128::MAX, 0, 1, 30), Ordering::Greater);
        assert_eq!(dec_cmp(1, 30, i128::MIN, 0), Ordering::Greater);
    }
}
