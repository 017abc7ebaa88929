//! Input rows as data files and back, written independently of the runtime's reader.
//!
//! The file format is that of `LANGUAGE.md`: no header, one row a line, fields in
//! declaration order separated by the `.input` separator, values written plainly (`42`,
//! `19.99`, `1998-09-02`, `true`, strings unquoted), and an optional trailing separator.

use crate::value::{civil_from_days, days_from_civil};
use fox_sema::core::{Column, Type, Value};
use std::fmt::Write as _;

/// The field text of one value as an input file holds it.
pub fn field(v: &Value) -> String {
    match v {
        Value::Int32(i) => i.to_string(),
        Value::Int64(i) => i.to_string(),
        Value::Decimal { unscaled, scale } => decimal_text(*unscaled, *scale),
        Value::Float64(f) => format!("{f:?}"),
        Value::String(s) => s.clone(),
        Value::Date(d) => date_text(*d),
        Value::Bool(b) => b.to_string(),
    }
}

/// `unscaled / 10^scale` with all the digits of the scale.
pub fn decimal_text(unscaled: i128, scale: u8) -> String {
    let sign = if unscaled < 0 { "-" } else { "" };
    let digits = unscaled.unsigned_abs().to_string();
    let scale = usize::from(scale);
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

/// `YYYY-MM-DD` of a day number.
pub fn date_text(days: i32) -> String {
    let (y, m, d) = civil_from_days(i64::from(days));
    format!("{y:04}-{m:02}-{d:02}")
}

/// The text of a whole input file.
pub fn file_text(rows: &[Vec<Value>], sep: &str) -> String {
    let mut s = String::new();
    for r in rows {
        let fields: Vec<String> = r.iter().map(field).collect();
        let _ = writeln!(s, "{}", fields.join(sep));
    }
    s
}

/// Parses one field of type `ty`.
pub fn parse_field(text: &str, ty: Type) -> Result<Value, String> {
    let bad = || format!("`{text}` is not a valid {ty}");
    Ok(match ty {
        Type::Int32 => Value::Int32(text.trim().parse().map_err(|_| bad())?),
        Type::Int64 => Value::Int64(text.trim().parse().map_err(|_| bad())?),
        Type::Float64 => Value::Float64(text.trim().parse().map_err(|_| bad())?),
        Type::Bool => Value::Bool(text.trim().parse().map_err(|_| bad())?),
        Type::String => Value::String(text.to_string()),
        Type::Date => {
            let parts: Vec<&str> = text.trim().split('-').collect();
            let [y, m, d] = parts.as_slice() else { return Err(bad()) };
            let (y, m, d): (i64, u32, u32) = (
                y.parse().map_err(|_| bad())?,
                m.parse().map_err(|_| bad())?,
                d.parse().map_err(|_| bad())?,
            );
            let days = days_from_civil(y, m, d);
            if civil_from_days(days) != (y, m, d) {
                return Err(bad());
            }
            Value::Date(i32::try_from(days).map_err(|_| bad())?)
        }
        Type::Decimal(scale) | Type::WideDecimal(scale) => {
            let t = text.trim();
            let (neg, t) = match t.strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, t),
            };
            let (int, frac) = t.split_once('.').unwrap_or((t, ""));
            if int.is_empty() && frac.is_empty()
                || frac.len() > usize::from(scale)
                || !int.chars().chain(frac.chars()).all(|c| c.is_ascii_digit())
            {
                return Err(bad());
            }
            let digits = format!("{int}{frac:0<width$}", width = usize::from(scale));
            let u: i128 = digits.parse().map_err(|_| bad())?;
            Value::Decimal {
                unscaled: if neg { -u } else { u },
                scale,
            }
        }
    })
}

/// Parses a whole input file for a predicate with `columns`; errors name the line.
pub fn parse_file(text: &str, sep: &str, columns: &[Column]) -> Result<Vec<Vec<Value>>, String> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.is_empty() {
            continue;
        }
        let mut fields: Vec<&str> = line.split(sep).collect();
        if fields.len() == columns.len() + 1 && fields.last() == Some(&"") {
            fields.pop();
        }
        if fields.len() != columns.len() {
            return Err(format!(
                "line {}: {} fields for {} columns",
                i + 1,
                fields.len(),
                columns.len()
            ));
        }
        let row = fields
            .iter()
            .zip(columns)
            .map(|(f, c)| parse_field(f, c.ty))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("line {}: {e}", i + 1))?;
        rows.push(row);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let cases = [
            (Value::Int32(-7), Type::Int32),
            (Value::Int64(1 << 40), Type::Int64),
            (Value::Decimal { unscaled: -5, scale: 2 }, Type::Decimal(2)),
            (
                Value::Decimal {
                    unscaled: 1999,
                    scale: 2,
                },
                Type::Decimal(2),
            ),
            (Value::Decimal { unscaled: 42, scale: 0 }, Type::Decimal(0)),
            (Value::Float64(0.1), Type::Float64),
            (Value::String("a b".into()), Type::String),
            (Value::Date(-1), Type::Date),
            (Value::Bool(true), Type::Bool),
        ];
        for (v, t) in cases {
            assert_eq!(parse_field(&field(&v), t).unwrap(), v, "{v:?}");
        }
        assert_eq!(decimal_text(-5, 2), "-0.05");
        assert_eq!(date_text(0), "1970-01-01");
    }

    #[test]
    fn bad_fields_are_rejected() {
        assert!(parse_field("1998-02-30", Type::Date).is_err());
        assert!(parse_field("1.234", Type::Decimal(2)).is_err());
        assert!(parse_field("x", Type::Int32).is_err());
        assert_eq!(
            parse_field("5.5", Type::Decimal(2)).unwrap(),
            Value::Decimal {
                unscaled: 550,
                scale: 2
            }
        );
        let cols = [
            Column {
                name: "a".into(),
                ty: Type::Int32,
            },
            Column {
                name: "b".into(),
                ty: Type::String,
            },
        ];
        assert_eq!(parse_file("1|x|\n2|y\n", "|", &cols).unwrap().len(), 2);
        assert!(parse_file("1|x|z\n", "|", &cols).unwrap_err().starts_with("line 1"));
    }
}
