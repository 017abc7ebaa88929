//! Writing results as Parquet or Arrow IPC files (`foxrun --format parquet|arrow`), or
//! handing them on as Arrow record batches ([`record_batches`]).
//!
//! Contract: the rows are written in output order (as CSV writes them), in record
//! batches of [`BATCH`] rows; each column has the Arrow type of its Fox type
//! ([`arrow_type`]), is named as in a CSV header and is not nullable. The writers write
//! to any `Write`; files are written whole or not at all by [`crate::outfile`].

use crate::output::{Ordered, OutputTable};
use crate::HostCol;
use arrow_array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int32Array, Int64Array, RecordBatch,
    RecordBatchOptions, StringArray,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use fox_sema::core::{Type, Value};
use std::io::{self, Write};
use std::sync::Arc;

/// The rows of one record batch.
const BATCH: usize = 64 * 1024;

/// The Arrow type a column of type `ty` is written as: `int32`, `int64`, `decimal128(38,
/// scale)`, `date32`, `utf8`, `bool`, `float64`. `None` for a decimal of a scale beyond
/// 38, which Arrow cannot hold.
pub fn arrow_type(ty: Type) -> Option<DataType> {
    Some(match ty {
        Type::Int32 => DataType::Int32,
        Type::Int64 => DataType::Int64,
        Type::Decimal(s) | Type::WideDecimal(s) => {
            if s > 38 {
                return None;
            }
            DataType::Decimal128(38, s as i8)
        }
        Type::Float64 => DataType::Float64,
        Type::String => DataType::Utf8,
        Type::Date => DataType::Date32,
        Type::Bool => DataType::Boolean,
    })
}

fn schema_of(t: &OutputTable) -> io::Result<SchemaRef> {
    let fields = t
        .columns
        .iter()
        .map(|c| {
            let ty = arrow_type(c.ty).ok_or_else(|| {
                io::Error::other(format!(
                    "the column `{}` of `{}` is {}: Arrow decimals have at most 38 digits of scale",
                    c.name, t.name, c.ty
                ))
            })?;
            Ok(Field::new(c.name.clone(), ty, false))
        })
        .collect::<io::Result<Vec<_>>>()?;
    Ok(Arc::new(Schema::new(fields)))
}

/// The schema of `t` and its rows as record batches in output order (for a caller that
/// hands the results on as Arrow data).
pub fn record_batches(t: &OutputTable) -> io::Result<(SchemaRef, Vec<RecordBatch>)> {
    let schema = schema_of(t)?;
    let mut all = Vec::new();
    batches(t, &schema, |b| {
        all.push(b.clone());
        Ok(())
    })?;
    Ok((schema, all))
}

/// The record batches of `t`, in output order, each handed to `each`: a batch's columns
/// are built in parallel, and the next batch while `each` takes the previous one. The
/// first error in order (a column's, then `each`'s) is returned.
fn batches(
    t: &OutputTable,
    schema: &SchemaRef,
    mut each: impl FnMut(&RecordBatch) -> io::Result<()> + Send,
) -> io::Result<()> {
    use rayon::prelude::*;
    let n = t.len();
    let build = |start: usize| -> io::Result<RecordBatch> {
        let end = (start + BATCH).min(n);
        let columns: Vec<io::Result<ArrayRef>> = (0..t.columns.len())
            .into_par_iter()
            .map(|c| column(t, c, start..end))
            .collect();
        let columns = columns.into_iter().collect::<io::Result<Vec<_>>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(end - start));
        RecordBatch::try_new_with_options(schema.clone(), columns, &options).map_err(io::Error::other)
    };
    let mut pending = build(0);
    let mut start = BATCH;
    while start < n {
        let batch = pending?;
        let (res, next) = rayon::join(|| each(&batch), || build(start));
        res?;
        pending = next;
        start += BATCH;
    }
    each(&pending?)
}

/// Rows `rows` (in output order) of column `c` as an Arrow array.
fn column(t: &OutputTable, c: usize, rows: std::ops::Range<usize>) -> io::Result<ArrayRef> {
    let ty = t.columns[c].ty;
    let mismatch = || {
        io::Error::other(format!(
            "the column `{}` of `{}` does not hold values of its type {ty}",
            t.columns[c].name, t.name
        ))
    };
    let array: ArrayRef = match t.ordered() {
        Ordered::Rows(all) => {
            let vals = all[rows].iter().map(|r| &r[c]);
            match ty {
                Type::Int32 => Arc::new(Int32Array::from(
                    vals.map(|v| match v {
                        Value::Int32(x) => Ok(*x),
                        _ => Err(mismatch()),
                    })
                    .collect::<io::Result<Vec<_>>>()?,
                )),
                Type::Date => Arc::new(Date32Array::from(
                    vals.map(|v| match v {
                        Value::Date(x) | Value::Int32(x) => Ok(*x),
                        _ => Err(mismatch()),
                    })
                    .collect::<io::Result<Vec<_>>>()?,
                )),
                Type::Int64 => Arc::new(Int64Array::from(
                    vals.map(|v| match v {
                        Value::Int64(x) => Ok(*x),
                        Value::Int32(x) => Ok(i64::from(*x)),
                        _ => Err(mismatch()),
                    })
                    .collect::<io::Result<Vec<_>>>()?,
                )),
                Type::Decimal(s) | Type::WideDecimal(s) => decimals(
                    vals.map(|v| match v {
                        Value::Decimal { unscaled, scale } if *scale <= s => {
                            Ok(unscaled * 10i128.pow(u32::from(s - scale)))
                        }
                        _ => Err(mismatch()),
                    })
                    .collect::<io::Result<Vec<_>>>()?,
                    s,
                )?,
                Type::Float64 => Arc::new(Float64Array::from(
                    vals.map(|v| match v {
                        Value::Float64(x) => Ok(*x),
                        _ => Err(mismatch()),
                    })
                    .collect::<io::Result<Vec<_>>>()?,
                )),
                Type::Bool => Arc::new(BooleanArray::from(
                    vals.map(|v| match v {
                        Value::Bool(x) => Ok(*x),
                        _ => Err(mismatch()),
                    })
                    .collect::<io::Result<Vec<_>>>()?,
                )),
                Type::String => Arc::new(StringArray::from_iter_values(
                    vals.map(|v| match v {
                        Value::String(x) => Ok(x.as_str()),
                        _ => Err(mismatch()),
                    })
                    .collect::<io::Result<Vec<_>>>()?,
                )),
            }
        }
        Ordered::Cols { cols, strings, perm } => {
            let src: Vec<usize> = match perm {
                Some(p) => p[rows].iter().map(|&r| r as usize).collect(),
                None => rows.collect(),
            };
            let col = cols.get(c).ok_or_else(mismatch)?;
            match (ty, col) {
                (Type::Int32, HostCol::I32(v)) => Arc::new(Int32Array::from_iter_values(src.iter().map(|&r| v[r]))),
                (Type::Date, HostCol::I32(v)) => Arc::new(Date32Array::from_iter_values(src.iter().map(|&r| v[r]))),
                (Type::Int64, HostCol::I64(v)) => Arc::new(Int64Array::from_iter_values(src.iter().map(|&r| v[r]))),
                (Type::Int64, HostCol::U64(v)) => {
                    Arc::new(Int64Array::from_iter_values(src.iter().map(|&r| v[r] as i64)))
                }
                (Type::Decimal(s) | Type::WideDecimal(s), HostCol::I64(v)) => {
                    decimals(src.iter().map(|&r| i128::from(v[r])).collect(), s)?
                }
                (Type::Decimal(s) | Type::WideDecimal(s), HostCol::I128(v)) => {
                    decimals(src.iter().map(|&r| v[r]).collect(), s)?
                }
                (Type::Float64, HostCol::F64(v)) => Arc::new(Float64Array::from_iter_values(src.iter().map(|&r| v[r]))),
                (Type::Bool, HostCol::U8(v)) => Arc::new(BooleanArray::from_iter(src.iter().map(|&r| Some(v[r] != 0)))),
                (Type::String, HostCol::U32(v)) => {
                    let text = |r: usize| strings.get(v[r] as usize).map(String::as_str).ok_or_else(mismatch);
                    Arc::new(StringArray::from_iter_values(
                        src.iter().map(|&r| text(r)).collect::<io::Result<Vec<_>>>()?,
                    ))
                }
                _ => return Err(mismatch()),
            }
        }
    };
    Ok(array)
}

fn decimals(v: Vec<i128>, scale: u8) -> io::Result<ArrayRef> {
    Ok(Arc::new(
        Decimal128Array::from(v)
            .with_precision_and_scale(38, scale as i8)
            .map_err(io::Error::other)?,
    ))
}

/// Writes `t` as a Parquet file to `w`.
pub fn write_parquet_to<W: Write + Send + ?Sized>(t: &OutputTable, w: &mut W) -> io::Result<()> {
    use parquet::arrow::ArrowWriter;
    use parquet::basic::Compression;
    use parquet::file::properties::WriterProperties;
    let schema = schema_of(t)?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_created_by(format!("fox {}", env!("CARGO_PKG_VERSION")))
        .build();
    let mut writer = ArrowWriter::try_new(w, schema.clone(), Some(props)).map_err(io::Error::other)?;
    batches(t, &schema, |b| writer.write(b).map_err(io::Error::other))?;
    writer.close().map_err(io::Error::other)?;
    Ok(())
}

/// Writes `t` as an Arrow IPC file to `w`.
pub fn write_arrow_to<W: Write + Send + ?Sized>(t: &OutputTable, w: &mut W) -> io::Result<()> {
    let schema = schema_of(t)?;
    let mut writer = arrow_ipc::writer::FileWriter::try_new(w, &schema).map_err(io::Error::other)?;
    batches(t, &schema, |b| writer.write(b).map_err(io::Error::other))?;
    writer.finish().map_err(io::Error::other)?;
    Ok(())
}
