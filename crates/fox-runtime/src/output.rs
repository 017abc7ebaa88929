//! Results: device columns turned into values, ordered, and written as a text table or CSV.

use crate::dict::Dictionary;
use crate::load::civil_from_days;
use crate::{HostCol, RuntimeError};
use fox_sema::core::{Column, Type, Value};
use std::cmp::Ordering;
use std::path::Path;

/// One output relation, its rows in final output order.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputTable {
    pub name: String,
    pub columns: Vec<Column>,
    pub rows: Vec<Vec<Value>>,
}

/// Converts downloaded columns of the types of `columns` into rows of values. `what`
/// names the output in messages.
pub(crate) fn to_rows(
    what: &str,
    columns: &[Column],
    cols: &[HostCol],
    dict: &Dictionary,
) -> Result<Vec<Vec<Value>>, RuntimeError> {
    let n = cols.first().map_or(0, HostCol::len);
    let mut rows: Vec<Vec<Value>> = (0..n).map(|_| Vec::with_capacity(cols.len())).collect();
    for (c, (col, column)) in cols.iter().zip(columns).enumerate() {
        if col.len() != n {
            return Err(RuntimeError::Plan(format!(
                "{what}: column {} has {} rows but column 1 has {n}",
                c + 1,
                col.len()
            )));
        }
        let mismatch = || {
            RuntimeError::Plan(format!(
                "{what}: column `{}` of type {} is held in a buffer of {:?} elements",
                column.name,
                column.ty,
                col.elem()
            ))
        };
        match (column.ty, col) {
            (Type::Int32, HostCol::I32(v)) => rows.iter_mut().zip(v).for_each(|(r, &x)| r.push(Value::Int32(x))),
            (Type::Date, HostCol::I32(v)) => rows.iter_mut().zip(v).for_each(|(r, &x)| r.push(Value::Date(x))),
            (Type::Int64, HostCol::I64(v)) => rows.iter_mut().zip(v).for_each(|(r, &x)| r.push(Value::Int64(x))),
            (Type::Decimal(scale), HostCol::I64(v)) => rows.iter_mut().zip(v).for_each(|(r, &x)| {
                r.push(Value::Decimal {
                    unscaled: x as i128,
                    scale,
                })
            }),
            (Type::Float64, HostCol::F64(v)) => rows.iter_mut().zip(v).for_each(|(r, &x)| r.push(Value::Float64(x))),
            (Type::Bool, HostCol::U8(v)) => rows.iter_mut().zip(v).for_each(|(r, &x)| r.push(Value::Bool(x != 0))),
            (Type::String, HostCol::U32(v)) => {
                for (r, &code) in rows.iter_mut().zip(v) {
                    let s = dict.get(code).ok_or_else(|| {
                        RuntimeError::Plan(format!(
                            "{what}: column `{}` holds string code {code}, but the dictionary has {} strings",
                            column.name,
                            dict.len()
                        ))
                    })?;
                    r.push(Value::String(s.to_string()));
                }
            }
            _ => return Err(mismatch()),
        }
    }
    Ok(rows)
}

/// Orders two values of one column: numbers numerically (floats by total order), strings
/// by their text (byte order), dates by day, `false < true`.
pub fn cmp_values(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Int32(x), Value::Int32(y)) => x.cmp(y),
        (Value::Int64(x), Value::Int64(y)) => x.cmp(y),
        (Value::Date(x), Value::Date(y)) => x.cmp(y),
        (Value::Float64(x), Value::Float64(y)) => x.total_cmp(y),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Decimal { unscaled: x, scale: sx }, Value::Decimal { unscaled: y, scale: sy }) => {
            if sx == sy {
                x.cmp(y)
            } else {
                // Compare at the common (larger) scale; i128 holds any i64 times 10^38 / 10^19.
                let (x, y) = (
                    x.checked_mul(10i128.pow(sy.saturating_sub(*sx) as u32)),
                    y.checked_mul(10i128.pow(sx.saturating_sub(*sy) as u32)),
                );
                x.cmp(&y)
            }
        }
        // Columns hold one type; values of different types order by type so that sorting
        // never panics.
        _ => rank_of(a).cmp(&rank_of(b)),
    }
}

fn rank_of(v: &Value) -> u8 {
    match v {
        Value::Int32(_) => 0,
        Value::Int64(_) => 1,
        Value::Decimal { .. } => 2,
        Value::Float64(_) => 3,
        Value::String(_) => 4,
        Value::Date(_) => 5,
        Value::Bool(_) => 6,
    }
}

/// Sorts rows by `order` (column index, descending), then ascending on every column from
/// left to right, and keeps at most `limit` rows.
pub fn sort_rows(rows: &mut Vec<Vec<Value>>, order: &[(usize, bool)], limit: Option<u64>) {
    rows.sort_by(|a, b| {
        for &(c, desc) in order {
            let o = cmp_values(&a[c], &b[c]);
            let o = if desc { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        a.iter()
            .zip(b)
            .map(|(x, y)| cmp_values(x, y))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal)
    });
    if let Some(l) = limit {
        rows.truncate(usize::try_from(l).unwrap_or(usize::MAX));
    }
}

/// The text of one value as CSV and the stdout table write it (unquoted): decimals with
/// exactly the digits of the scale of `ty`, dates `YYYY-MM-DD`, floats in Rust's shortest
/// round-trip form (`15.0`, `29.985`, `1e300`), booleans `true`/`false`.
pub fn format_value(v: &Value, ty: Type) -> String {
    match v {
        Value::Int32(x) => x.to_string(),
        Value::Int64(x) => x.to_string(),
        Value::Decimal { unscaled, scale } => {
            let (mut u, mut s) = (*unscaled, *scale);
            if let Type::Decimal(ts) = ty {
                if ts > s {
                    if let Some(scaled) = 10i128.checked_pow((ts - s) as u32).and_then(|p| u.checked_mul(p)) {
                        u = scaled;
                        s = ts;
                    }
                }
            }
            format_decimal(u, s)
        }
        Value::Float64(x) => format!("{x:?}"),
        Value::String(s) => s.clone(),
        Value::Date(d) => format_date(*d),
        Value::Bool(b) => b.to_string(),
    }
}

/// An unscaled integer at `scale` as a decimal: `(-125, 2)` is `-1.25`, `(5, 2)` is `0.05`.
pub fn format_decimal(unscaled: i128, scale: u8) -> String {
    let digits = unscaled.unsigned_abs().to_string();
    let sign = if unscaled < 0 { "-" } else { "" };
    let scale = scale as usize;
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = if digits.len() <= scale {
        format!("{}{digits}", "0".repeat(scale + 1 - digits.len()))
    } else {
        digits
    };
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

/// A day number as `YYYY-MM-DD`.
pub fn format_date(days: i32) -> String {
    let (y, m, d) = civil_from_days(days as i64);
    if (0..=9999).contains(&y) {
        format!("{y:04}-{m:02}-{d:02}")
    } else {
        format!("{y}-{m:02}-{d:02}")
    }
}

fn is_numeric(ty: Type) -> bool {
    matches!(ty, Type::Int32 | Type::Int64 | Type::Decimal(_) | Type::Float64)
}

/// The stdout form of a table: a header of column names, a rule, one line per row with
/// numbers right-aligned and other values left-aligned, and a `N rows` footer.
pub fn format_table(t: &OutputTable) -> String {
    let cells: Vec<Vec<String>> = t
        .rows
        .iter()
        .map(|r| {
            r.iter()
                .zip(&t.columns)
                .map(|(v, c)| display_cell(&format_value(v, c.ty)))
                .collect()
        })
        .collect();
    let mut widths: Vec<usize> = t.columns.iter().map(|c| c.name.chars().count()).collect();
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let n = t.rows.len();
    if t.columns.is_empty() {
        // A relation with no columns is true (one row) or false (none).
        out.push_str(&format!("{}\n{n} row{}\n", n > 0, if n == 1 { "" } else { "s" }));
        return out;
    }
    let line = |out: &mut String, cells: &[String], right: &dyn Fn(usize) -> bool| {
        let mut s = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i > 0 {
                s.push_str(" | ");
            }
            let pad = widths[i] - cell.chars().count();
            if right(i) {
                s.push_str(&" ".repeat(pad));
                s.push_str(cell);
            } else {
                s.push_str(cell);
                s.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(s.trim_end());
        out.push('\n');
    };
    let header: Vec<String> = t.columns.iter().map(|c| c.name.clone()).collect();
    let numeric: Vec<bool> = t.columns.iter().map(|c| is_numeric(c.ty)).collect();
    line(&mut out, &header, &|i| numeric[i]);
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    out.push_str(&rule.join("-+-"));
    out.push('\n');
    for row in &cells {
        line(&mut out, row, &|i| numeric[i]);
    }
    out.push_str(&format!("{n} row{}\n", if n == 1 { "" } else { "s" }));
    out
}

/// Control characters would break the table's lines: show them escaped.
fn display_cell(s: &str) -> String {
    if s.chars().any(char::is_control) {
        s.escape_default().to_string()
    } else {
        s.to_string()
    }
}

/// A CSV field, quoted per RFC 4180 when it holds a comma, a quote or a line break.
fn csv_field(s: &str, out: &mut String) {
    if s.contains([',', '"', '\n', '\r']) {
        out.push('"');
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}

/// The CSV text of a table: a header of column names, then one line per row.
pub fn csv_text(t: &OutputTable) -> String {
    let mut out = String::new();
    for (i, c) in t.columns.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        csv_field(&c.name, &mut out);
    }
    out.push('\n');
    for row in &t.rows {
        for (i, (v, c)) in row.iter().zip(&t.columns).enumerate() {
            if i > 0 {
                out.push(',');
            }
            csv_field(&format_value(v, c.ty), &mut out);
        }
        out.push('\n');
    }
    out
}

/// Writes `t` as CSV to `path`, whole or not at all (a temporary file beside it, renamed
/// into place).
pub fn write_csv(t: &OutputTable, path: &Path) -> Result<(), RuntimeError> {
    write_atomically(path, csv_text(t).as_bytes())
}

pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), RuntimeError> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path.file_name().ok_or_else(|| RuntimeError::Io {
        msg: format!("`{}` is not a file name", path.display()),
    })?;
    let tmp = dir.join(format!(".{}.tmp{}", name.to_string_lossy(), std::process::id()));
    let res = std::fs::write(&tmp, bytes).and_then(|_| std::fs::rename(&tmp, path));
    if let Err(e) = res {
        let _ = std::fs::remove_file(&tmp);
        return Err(RuntimeError::Io {
            msg: format!("cannot write `{}`: {e}", path.display()),
        });
    }
    Ok(())
}

/// Writes every table to `dir/<name>.csv`, creating `dir`: all files or none. Each table is
/// first written to a temporary file; only when all are written are they renamed into
/// place. Returns the paths written.
pub fn write_csv_all(tables: &[OutputTable], dir: &Path) -> Result<Vec<std::path::PathBuf>, RuntimeError> {
    std::fs::create_dir_all(dir).map_err(|e| RuntimeError::Io {
        msg: format!("cannot create the output directory `{}`: {e}", dir.display()),
    })?;
    let mut staged: Vec<(std::path::PathBuf, std::path::PathBuf)> = Vec::with_capacity(tables.len());
    let cleanup = |staged: &[(std::path::PathBuf, std::path::PathBuf)]| {
        for (tmp, _) in staged {
            let _ = std::fs::remove_file(tmp);
        }
    };
    for t in tables {
        let path = dir.join(format!("{}.csv", t.name));
        let tmp = dir.join(format!(".{}.csv.tmp{}", t.name, std::process::id()));
        if let Err(e) = std::fs::write(&tmp, csv_text(t)) {
            let _ = std::fs::remove_file(&tmp);
            cleanup(&staged);
            return Err(RuntimeError::Io {
                msg: format!("cannot write `{}`: {e}", path.display()),
            });
        }
        staged.push((tmp, path));
    }
    for (k, (tmp, path)) in staged.iter().enumerate() {
        if let Err(e) = std::fs::rename(tmp, path) {
            cleanup(&staged[k..]);
            return Err(RuntimeError::Io {
                msg: format!("cannot write `{}`: {e}", path.display()),
            });
        }
    }
    Ok(staged.into_iter().map(|(_, p)| p).collect())
}
