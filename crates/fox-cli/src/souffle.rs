//! Writing the results of a Soufflé program as Soufflé does: each `.output` to its file
//! (`<rel>.csv` by default) in the output directory, fields separated by the delimiter (a
//! tab by default), no quoting, no header unless `headers=true`; floats as C's `%.17g`;
//! each `.printsize` as a line `<rel>\t<rows>` on standard output.

use fox_runtime::OutputTable;
use fox_sema::core::Value;
use fox_syntax::souffle::{OutShape, SouffleIo, SouffleOutput};
use std::io::Write;
use std::path::Path;

/// A value as Soufflé writes it.
pub fn format_value(v: &Value) -> String {
    match v {
        Value::Int32(n) => n.to_string(),
        Value::Int64(n) => n.to_string(),
        Value::Float64(x) => format_g17(*x),
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Decimal { unscaled, scale } => {
            let d = 10i128.pow(u32::from(*scale));
            if *scale == 0 {
                unscaled.to_string()
            } else {
                let sign = if *unscaled < 0 { "-" } else { "" };
                let a = unscaled.unsigned_abs();
                let d = d as u128;
                format!("{sign}{}.{:0w$}", a / d, a % d, w = *scale as usize)
            }
        }
        Value::Date(d) => d.to_string(),
    }
}

/// `x` as C's `printf("%.17g", x)`: 17 significant digits, trailing zeros removed,
/// scientific notation when the exponent is below -4 or at least 17.
pub fn format_g17(x: f64) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let sci = format!("{x:.16e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..17).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exp.abs())
    } else {
        let decimals = (16 - exp) as usize;
        trim(&format!("{x:.decimals$}"))
    }
}

/// The header line of an output file (`headers=true`), or nothing.
fn header(spec: &SouffleOutput) -> String {
    if !spec.headers {
        return String::new();
    }
    let mut line = if spec.shape.is_empty() {
        spec.columns.join(&spec.delimiter)
    } else {
        // The columns of a record or ADT attribute `p` are named `p.…`: the header
        // names the attribute once.
        let mut names = Vec::new();
        let mut k = 0;
        for s in &spec.shape {
            let col = spec.columns.get(k).map_or("", String::as_str);
            names.push(col.split('.').next().unwrap_or(col));
            k += s.columns();
        }
        names.join(&spec.delimiter)
    };
    line.push('\n');
    line
}

/// The error of a negative value in an `unsigned` attribute.
fn negative_unsigned(spec: &SouffleOutput, v: &Value, k: usize) -> anyhow::Error {
    anyhow::anyhow!(
        "`{}` holds the negative value {} in its `unsigned` attribute `{}`: Fox holds `unsigned` \
         in 64-bit signed integers and does not wrap as Soufflé does",
        spec.rel,
        format_value(v),
        spec.columns.get(k).map_or("?", |c| c.as_str()),
    )
}

/// The error of the first row (in output order) holding a negative value in an
/// `unsigned` attribute, if any: checked before anything is written.
fn check_unsigned(table: &OutputTable, spec: &SouffleOutput) -> anyhow::Result<()> {
    use rayon::prelude::*;
    if !spec.unsigned.contains(&true) {
        return Ok(());
    }
    let bad = |r: usize| {
        let row = table.row(r);
        row.iter()
            .enumerate()
            .find(|(k, v)| spec.unsigned.get(*k) == Some(&true) && matches!(v, Value::Int64(n) if *n < 0))
            .map(|(k, v)| negative_unsigned(spec, v, k))
    };
    match (0..table.len())
        .into_par_iter()
        .with_min_len(1 << 12)
        .find_map_first(bad)
    {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Appends the lines of output rows `a..b` of one output file.
fn render_rows(table: &OutputTable, spec: &SouffleOutput, a: usize, b: usize, out: &mut Vec<u8>) -> anyhow::Result<()> {
    for r in a..b {
        let row = table.row(r);
        if row.is_empty() {
            // The tuple of a relation without attributes.
            out.extend_from_slice(b"()\n");
            continue;
        }
        let leaf = |k: usize| -> anyhow::Result<String> {
            let v = &row[k];
            if spec.unsigned.get(k) == Some(&true) && matches!(v, Value::Int64(n) if *n < 0) {
                return Err(negative_unsigned(spec, v, k));
            }
            Ok(format_value(v))
        };
        if spec.shape.is_empty() {
            for k in 0..row.len() {
                if k > 0 {
                    out.extend_from_slice(spec.delimiter.as_bytes());
                }
                out.extend_from_slice(leaf(k)?.as_bytes());
            }
        } else {
            let mut k = 0;
            for (i, s) in spec.shape.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(spec.delimiter.as_bytes());
                }
                let mut text = String::new();
                write_shape(s, &mut k, &leaf, &mut text)?;
                out.extend_from_slice(text.as_bytes());
            }
        }
        out.push(b'\n');
    }
    Ok(())
}

/// Writes one output file's text to `w`: its header, then its rows formatted in parallel
/// chunks and written in order (`fox_runtime::output::write_rows`), so that the text is
/// never held whole.
pub fn write_output<W: Write + Send + ?Sized>(
    table: &OutputTable,
    spec: &SouffleOutput,
    w: &mut W,
) -> std::io::Result<()> {
    write_output_chunked(table, spec, w, fox_runtime::output::Chunking::for_pool())
}

fn write_output_chunked<W: Write + Send + ?Sized>(
    table: &OutputTable,
    spec: &SouffleOutput,
    w: &mut W,
    chunking: fox_runtime::output::Chunking,
) -> std::io::Result<()> {
    w.write_all(header(spec).as_bytes())?;
    fox_runtime::output::write_rows(w, table.len(), chunking, |a, b, out| {
        render_rows(table, spec, a, b, out).map_err(|e| std::io::Error::other(e.to_string()))
    })
}

/// One attribute of shape `s`, from the leaf columns at `*k` on: a record as Soufflé
/// writes it, `[a, b]`, a value of an algebraic data type `$A(a, b)` or `$B`.
fn write_shape(
    s: &OutShape,
    k: &mut usize,
    leaf: &dyn Fn(usize) -> anyhow::Result<String>,
    out: &mut String,
) -> anyhow::Result<()> {
    match s {
        OutShape::Leaf => {
            out.push_str(&leaf(*k)?);
            *k += 1;
        }
        OutShape::Record(fields) => {
            out.push('[');
            for (i, f) in fields.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_shape(f, k, leaf, out)?;
            }
            out.push(']');
        }
        OutShape::Adt(branches) => {
            let tag = leaf(*k)?;
            *k += 1;
            let Some((name, fields)) = tag.parse::<usize>().ok().and_then(|t| branches.get(t)) else {
                anyhow::bail!("a value of an algebraic data type has the tag {tag}, which names no branch");
            };
            for (b, fs) in branches {
                if b == name {
                    out.push('$');
                    out.push_str(name);
                    if !fields.is_empty() {
                        out.push('(');
                        for (i, f) in fields.iter().enumerate() {
                            if i > 0 {
                                out.push_str(", ");
                            }
                            write_shape(f, k, leaf, out)?;
                        }
                        out.push(')');
                    }
                } else {
                    *k += fs.iter().map(OutShape::columns).sum::<usize>();
                }
            }
        }
    }
    Ok(())
}

/// The `.printsize` lines: `<rel>\t<rows>` each.
pub fn printsize(tables: &[OutputTable], io: &SouffleIo) -> String {
    let mut out = String::new();
    for rel in &io.printsize {
        let rows = tables.iter().find(|t| &t.name == rel).map_or(0, OutputTable::len);
        out.push_str(&format!("{rel}\t{rows}\n"));
    }
    out
}

/// Writes the results: the `.printsize` lines to standard output, then each `.output` to
/// its file in `dir` (all files or none; the files' names are listed on standard error),
/// or, without `dir`, the files' contents to standard output (each preceded by its file
/// name when there are several).
pub fn write_results(tables: &[OutputTable], io: &SouffleIo, dir: Option<&Path>) -> anyhow::Result<()> {
    let mut outputs = Vec::new();
    for spec in &io.outputs {
        let Some(table) = tables.iter().find(|t| t.name == spec.rel) else {
            anyhow::bail!("the output `{}` was not computed", spec.rel);
        };
        check_unsigned(table, spec)?;
        outputs.push((spec, table));
    }
    let sizes = printsize(tables, io);
    match dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| anyhow::anyhow!("cannot create the output directory `{}`: {e}", dir.display()))?;
            let mut files = fox_runtime::OutputFiles::new();
            let mut written = Vec::new();
            for (spec, table) in outputs {
                let path = dir.join(&spec.file);
                written.push((path.clone(), table.len()));
                files.add(path, move |w| write_output(table, spec, w));
            }
            files.commit().map_err(|e| anyhow::anyhow!("{e}"))?;
            crate::stdout::print(&sizes)?;
            for (path, rows) in written {
                eprintln!(
                    "foxrun: wrote {} ({rows} row{})",
                    path.display(),
                    if rows == 1 { "" } else { "s" }
                );
            }
        }
        None => {
            let named = outputs.len() > 1;
            crate::stdout::with_stdout(|w| {
                w.write_all(sizes.as_bytes())?;
                for (k, (spec, table)) in outputs.iter().enumerate() {
                    if k > 0 {
                        w.write_all(b"\n")?;
                    }
                    if named {
                        w.write_all(format!("{}\n", spec.file).as_bytes())?;
                    }
                    write_output(table, spec, w)?;
                }
                Ok(())
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::format_g17;

    fn spec(delimiter: &str, headers: bool, unsigned: Vec<bool>) -> fox_syntax::souffle::SouffleOutput {
        fox_syntax::souffle::SouffleOutput {
            rel: "r".into(),
            file: "r.csv".into(),
            delimiter: delimiter.into(),
            headers,
            columns: (0..unsigned.len()).map(|k| format!("c{k}")).collect(),
            unsigned,
            shape: Vec::new(),
        }
    }

    #[test]
    fn chunked_text_is_the_text_row_by_row() {
        use fox_runtime::output::Chunking;
        use fox_sema::core::{Column, Type, Value};
        let columns = vec![
            Column {
                name: "x".into(),
                ty: Type::Int64,
            },
            Column {
                name: "s".into(),
                ty: Type::String,
            },
            Column {
                name: "f".into(),
                ty: Type::Float64,
            },
        ];
        for n in [0usize, 1, 7, 100, 1001] {
            let rows: Vec<Vec<Value>> = (0..n)
                .map(|i| {
                    vec![
                        Value::Int64(i as i64 * 7919 - 5000),
                        Value::String(["a", "b,c", "tab\there", "q\"", "new\nline"][i % 5].into()),
                        Value::Float64(i as f64 / 3.0),
                    ]
                })
                .collect();
            let table = fox_runtime::OutputTable::from_rows("r", columns.clone(), rows.clone());
            for (delimiter, headers) in [("\t", false), (",", true)] {
                let spec = spec(delimiter, headers, vec![false; 3]);
                let mut want = if headers {
                    format!("c0{delimiter}c1{delimiter}c2\n")
                } else {
                    String::new()
                };
                for row in &rows {
                    let cells: Vec<String> = row.iter().map(super::format_value).collect();
                    want.push_str(&cells.join(delimiter));
                    want.push('\n');
                }
                for c in [
                    Chunking { rows: 1, batch: 1 },
                    Chunking { rows: 7, batch: 3 },
                    Chunking::for_pool(),
                ] {
                    let mut out = Vec::new();
                    super::write_output_chunked(&table, &spec, &mut out, c).unwrap();
                    assert_eq!(String::from_utf8(out).unwrap(), want, "{n} rows, {c:?}");
                }
            }
        }
    }

    #[test]
    fn a_negative_unsigned_value_is_found_before_anything_is_written() {
        use fox_sema::core::{Column, Type, Value};
        let columns = vec![Column {
            name: "x".into(),
            ty: Type::Int64,
        }];
        let rows = (0..10_000)
            .map(|i| vec![Value::Int64(if i >= 7000 { -i } else { i })])
            .collect();
        let table = fox_runtime::OutputTable::from_rows("r", columns, rows);
        let e = super::check_unsigned(&table, &spec("\t", false, vec![true])).unwrap_err();
        assert!(
            e.to_string()
                .contains("negative value -7000 in its `unsigned` attribute `c0`"),
            "{e}"
        );
        assert!(super::check_unsigned(&table, &spec("\t", false, vec![false])).is_ok());
    }

    #[test]
    fn floats_are_written_as_printf_g17() {
        assert_eq!(format_g17(0.1), "0.10000000000000001");
        assert_eq!(format_g17(1.0 / 3.0), "0.33333333333333331");
        assert_eq!(format_g17(1.5), "1.5");
        assert_eq!(format_g17(2.0), "2");
        assert_eq!(format_g17(1_000_000.0), "1000000");
        assert_eq!(format_g17(123456789.123), "123456789.123");
        assert_eq!(format_g17(-0.5), "-0.5");
        assert_eq!(format_g17(1e20), "1e+20");
        assert_eq!(format_g17(1.5e-7), "1.4999999999999999e-07");
        assert_eq!(format_g17(1e16), "10000000000000000");
        assert_eq!(format_g17(1e17), "1e+17");
    }
}
