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

/// The text of one output file.
/// The text grows fallibly (running out of memory is an error naming the file), a row
/// at a time.
pub fn render_output(table: &OutputTable, spec: &SouffleOutput) -> anyhow::Result<String> {
    let what = format!("the text of `{}`", spec.file);
    let mut out = String::new();
    let push = |out: &mut String, s: &str| fox_runtime::alloc::try_push_str(out, s, &what).map_err(anyhow::Error::msg);
    if spec.headers {
        if spec.shape.is_empty() {
            push(&mut out, &spec.columns.join(&spec.delimiter))?;
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
            push(&mut out, &names.join(&spec.delimiter))?;
        }
        push(&mut out, "\n")?;
    }
    for r in 0..table.len() {
        let row = table.row(r);
        if row.is_empty() {
            // The tuple of a relation without attributes.
            push(&mut out, "()\n")?;
            continue;
        }
        let leaf = |k: usize| -> anyhow::Result<String> {
            let v = &row[k];
            if spec.unsigned.get(k) == Some(&true) && matches!(v, Value::Int64(n) if *n < 0) {
                anyhow::bail!(
                    "`{}` holds the negative value {} in its `unsigned` attribute `{}`: Fox holds `unsigned` \
                     in 64-bit signed integers and does not wrap as Soufflé does",
                    spec.rel,
                    format_value(v),
                    spec.columns.get(k).map_or("?", |c| c.as_str()),
                );
            }
            Ok(format_value(v))
        };
        if spec.shape.is_empty() {
            for k in 0..row.len() {
                if k > 0 {
                    push(&mut out, &spec.delimiter)?;
                }
                push(&mut out, &leaf(k)?)?;
            }
        } else {
            let mut k = 0;
            for (i, s) in spec.shape.iter().enumerate() {
                if i > 0 {
                    push(&mut out, &spec.delimiter)?;
                }
                let mut text = String::new();
                write_shape(s, &mut k, &leaf, &mut text)?;
                push(&mut out, &text)?;
            }
        }
        push(&mut out, "\n")?;
    }
    Ok(out)
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
    let mut texts = Vec::new();
    for spec in &io.outputs {
        let Some(table) = tables.iter().find(|t| t.name == spec.rel) else {
            anyhow::bail!("the output `{}` was not computed", spec.rel);
        };
        texts.push((spec, table.len(), render_output(table, spec)?));
    }
    let sizes = printsize(tables, io);
    match dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| anyhow::anyhow!("cannot create the output directory `{}`: {e}", dir.display()))?;
            let mut files = fox_runtime::OutputFiles::new();
            let mut written = Vec::new();
            for (spec, rows, text) in texts {
                let path = dir.join(&spec.file);
                written.push((path.clone(), rows));
                files.add(path, move |w| w.write_all(text.as_bytes()));
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
            // Written a piece at a time: the texts are not copied into one.
            let named = texts.len() > 1;
            crate::stdout::with_stdout(|w| {
                w.write_all(sizes.as_bytes())?;
                for (k, (spec, _, text)) in texts.iter().enumerate() {
                    if k > 0 {
                        w.write_all(b"\n")?;
                    }
                    if named {
                        w.write_all(format!("{}\n", spec.file).as_bytes())?;
                    }
                    w.write_all(text.as_bytes())?;
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

    #[test]
    fn the_text_of_an_output_is_allocated_fallibly() {
        use fox_sema::core::{Column, Type, Value};
        let columns = vec![Column {
            name: "x".into(),
            ty: Type::Int64,
        }];
        let rows = (0..1000).map(|i| vec![Value::Int64(i)]).collect();
        let table = fox_runtime::OutputTable::from_rows("r", columns, rows);
        let spec = fox_syntax::souffle::SouffleOutput {
            rel: "r".into(),
            file: "r.csv".into(),
            delimiter: "\t".into(),
            headers: false,
            columns: vec!["x".into()],
            unsigned: vec![false],
            shape: Vec::new(),
        };
        let text = super::render_output(&table, &spec).unwrap();
        assert_eq!(text.lines().count(), 1000);
        // Under a budget smaller than the text, an error naming the file.
        let e = fox_runtime::alloc::with_budget(Some(1000), || super::render_output(&table, &spec)).unwrap_err();
        let e = e.to_string();
        assert!(
            e.starts_with("out of memory: cannot allocate ") && e.contains("for the text of `r.csv`"),
            "{e}"
        );
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
