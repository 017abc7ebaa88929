//! Reading input relations from Parquet files (an `.input` whose file name ends in
//! `.parquet`) into the same loaded columns as the text loader ([`crate::load`]).
//!
//! Contract:
//! - The file's top-level columns match the declaration by position: their number must be
//!   the declaration's, and each column's Arrow type must fit its declared type (see
//!   [`fits`]); a misfit is an error naming the file, the column (position and name) and
//!   both types. Column names in the file are not compared.
//! - Values convert exactly or not at all: an integer out of the range of `int32`, a
//!   decimal whose digits do not fit the declared scale (a larger declared scale is
//!   rescaled exactly) or more than 18 digits, is an error naming the file, the row
//!   (1-based, across row groups) and the column. Fox has no nulls: a null in a column
//!   read is such an error too.
//! - Row groups are decoded in parallel, each into columns of its own with strings
//!   numbered by its own interner; the parts are then appended in row-group order, so
//!   row order is the file's and the error reported is the first in file order.
//! - Dictionary-encoded string columns are read as Arrow dictionaries: each distinct
//!   dictionary value is interned once per dictionary, not once per row.
//! - A `date` column reads `date32`, and `date64` or time-zone-free timestamps that fall
//!   on midnights (pandas keeps dates as timestamps); any other time of day is an error.
//! - Arrow record batches held in memory (a caller's table) are read by the same rules
//!   and checks ([`load_arrow_cols`]), the table named in messages as the file is.
//! - Only the columns kept (`wanted`) are decoded; the others are type-checked from the
//!   file's schema and come back empty, as in the text loader.
//! - A damaged file (truncated, not Parquet, a page that does not decode) is an error
//!   naming the file, never a panic: a panic inside the decoder is caught, silently (the
//!   panic hook passes over it), and reported as damage.

use crate::load::LoadedCol;
use crate::strings::Interner;
use crate::RuntimeError;
use arrow_array::cast::AsArray;
use arrow_array::types::{
    ArrowDictionaryKeyType, Decimal128Type, Decimal32Type, Decimal64Type, Int16Type, Int32Type, Int64Type, Int8Type,
    UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType, PrimitiveArray};
use arrow_buffer::ArrowNativeType;
use arrow_schema::{DataType, Schema};
use fox_kernel::InputRel;
use fox_sema::core::{Column, Type, MAX_DECIMAL};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::arrow::ProjectionMask;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The rows decoded at a time (an Arrow record batch), between two reads of the stop flag
/// and two reports of progress.
const BATCH: usize = 64 * 1024;

/// True when `file` names a Parquet file (by its extension, whatever its case).
pub fn is_parquet(file: &str) -> bool {
    file.len() >= 8 && file.is_char_boundary(file.len() - 8) && file[file.len() - 8..].eq_ignore_ascii_case(".parquet")
}

/// Whether a column of Arrow type `dt` can be read into a column declared `ty`.
pub fn fits(ty: Type, dt: &DataType) -> bool {
    use DataType as D;
    let int = matches!(
        dt,
        D::Int8 | D::Int16 | D::Int32 | D::Int64 | D::UInt8 | D::UInt16 | D::UInt32 | D::UInt64
    );
    match ty {
        Type::Int32 | Type::Int64 => int,
        Type::Decimal(_) | Type::WideDecimal(_) => {
            int || matches!(dt, D::Decimal32(..) | D::Decimal64(..) | D::Decimal128(..))
        }
        Type::Float64 => matches!(dt, D::Float64 | D::Float32),
        // Date64 and timestamps without a time zone (what pandas makes of dates) hold whole
        // days or are refused value by value.
        Type::Date => matches!(dt, D::Date32 | D::Date64 | D::Timestamp(_, None)),
        Type::Bool => matches!(dt, D::Boolean),
        Type::String => match dt {
            D::Utf8 | D::LargeUtf8 | D::Utf8View => true,
            D::Dictionary(k, v) => k.is_dictionary_key_type() && matches!(**v, D::Utf8 | D::LargeUtf8 | D::Utf8View),
            _ => false,
        },
    }
}

/// What decoding needs to know of the file and the declaration.
struct Reader<'a> {
    path: &'a Path,
    shown: &'a str,
    input: &'a InputRel,
    meta: ArrowReaderMetadata,
    /// The file's columns kept, in file order (each also a declared column).
    kept: Vec<usize>,
}

/// One row group's columns (one per declared column, empty when not kept), with its
/// strings numbered by its own interner.
type Part = (Vec<LoadedCol>, Interner);

/// Reads the Parquet file at `path` as the relation `input`, keeping
/// the columns with `wanted[c]`; `rows_total` is told the file's row count once known and
/// `advance` the rows of each batch decoded. The key is not checked here.
pub(crate) fn load_parquet_cols(
    path: &Path,
    input: &InputRel,
    wanted: &[bool],
    strings: &mut Interner,
    stop: &AtomicBool,
    rows_total: &dyn Fn(u64),
    advance: &(dyn Fn(u64) + Sync),
) -> Result<Vec<LoadedCol>, RuntimeError> {
    let shown = &path.display().to_string();
    let pred = &input.name;
    let file = crate::load::open_regular_file(path, shown, pred)?;
    let damaged = |e: &dyn std::fmt::Display| RuntimeError::Data {
        msg: format!("`{shown}` (input of `{pred}`) is not a readable Parquet file: {e}"),
    };
    let meta = caught(|| ArrowReaderMetadata::load(&file, ArrowReaderOptions::new()))
        .map_err(|p| damaged(&p))?
        .map_err(|e| damaged(&e))?;
    drop(file);
    let schema = meta.schema().clone();
    let ncols = input.columns.len();
    check_columns(shown, Holder::ParquetFile, input, &schema)?;
    let kept: Vec<usize> = (0..ncols).filter(|&c| wanted.get(c).copied().unwrap_or(true)).collect();
    let meta = with_dictionary_hint(meta, &schema, &kept).map_err(|e| damaged(&e))?;
    let groups = meta.metadata().num_row_groups();
    let mut starts = Vec::with_capacity(groups);
    let mut total = 0u64;
    for g in 0..groups {
        starts.push(total);
        total += u64::try_from(meta.metadata().row_group(g).num_rows()).unwrap_or(0);
    }
    rows_total(total);
    let reader = Reader {
        path,
        shown,
        input,
        meta,
        kept,
    };
    let parts: Vec<Result<Part, RuntimeError>> = {
        use rayon::prelude::*;
        (0..groups)
            .into_par_iter()
            .map(|g| {
                caught(|| reader.read_group(g, starts[g], stop, advance)).unwrap_or_else(|p| {
                    Err(RuntimeError::Data {
                        msg: format!("`{shown}` (input of `{pred}`): row group {} is damaged: {p}", g + 1),
                    })
                })
            })
            .collect()
    };
    let mut cols: Vec<LoadedCol> = input.columns.iter().map(|c| LoadedCol::new(c.ty)).collect();
    let oom = |msg: String| RuntimeError::Data { msg };
    for (c, col) in cols.iter_mut().enumerate() {
        if reader.kept.contains(&c) {
            col.try_reserve_exact(
                total as usize,
                &format!("the column `{}` of `{shown}`", input.columns[c].name),
            )
            .map_err(oom)?;
        }
    }
    for part in parts {
        let (part_cols, part_strings) = part?;
        crate::load::check_stop_flag(stop)?;
        // The part's string numbers in the shared interner, each string interned once.
        let remap: Vec<u32> = part_strings
            .strings()
            .iter()
            .map(|s| strings.intern(s))
            .collect::<Result<_, _>>()
            .map_err(oom)?;
        for (col, part_col) in cols.iter_mut().zip(part_cols) {
            match part_col {
                LoadedCol::Str(mut ids) => {
                    ids.iter_mut().for_each(|id| *id = remap[*id as usize]);
                    col.append(LoadedCol::Str(ids));
                }
                other => col.append(other),
            }
        }
    }
    Ok(cols)
}

/// What holds the columns checked by [`check_columns`], for its messages.
#[derive(Clone, Copy)]
enum Holder {
    ParquetFile,
    ArrowTable,
}

/// Checks that `schema`'s top-level columns match the declaration of `input` by position:
/// as many columns, each of a type that [`fits`] its declared type.
fn check_columns(shown: &str, holder: Holder, input: &InputRel, schema: &Schema) -> Result<(), RuntimeError> {
    let pred = &input.name;
    let ncols = input.columns.len();
    let (noun, types, rule) = match holder {
        Holder::ParquetFile => ("file", "Parquet (Arrow)", "Parquet columns are read by position"),
        Holder::ArrowTable => ("table", "Arrow", "the table's columns are matched by position"),
    };
    if schema.fields().len() != ncols {
        let list = |names: Vec<&str>| names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
        return Err(RuntimeError::Data {
            msg: format!(
                "`{shown}`: the {noun} has {} column{} ({}), but `{pred}` has {ncols} ({}); {rule}",
                schema.fields().len(),
                if schema.fields().len() == 1 { "" } else { "s" },
                list(schema.fields().iter().map(|f| f.name().as_str()).collect()),
                list(input.columns.iter().map(|c| c.name.as_str()).collect()),
            ),
        });
    }
    for (c, (field, col)) in schema.fields().iter().zip(&input.columns).enumerate() {
        if !fits(col.ty, field.data_type()) {
            return Err(RuntimeError::Data {
                msg: format!(
                    "`{shown}`: column {} (`{}` in the {noun}, `{}` of `{pred}`) has the {types} type {}, which does not fit the declared type {}",
                    c + 1,
                    field.name(),
                    col.name,
                    field.data_type(),
                    col.ty
                ),
            });
        }
    }
    Ok(())
}

/// Reads Arrow record batches held in memory (all of `schema`) as the relation `input`,
/// as a Parquet file is read: the columns matched by position and type-checked by
/// [`check_columns`], the values converted by the same rules, with the same errors, which
/// name the table as `shown`. Only the columns with `wanted[c]` are converted (the others
/// come back empty). The key is not checked here. The batches are read, not copied:
/// each value is converted once, into Fox's columns.
pub(crate) fn load_arrow_cols(
    shown: &str,
    input: &InputRel,
    wanted: &[bool],
    schema: &Schema,
    batches: &[arrow_array::RecordBatch],
    strings: &mut Interner,
    stop: &AtomicBool,
) -> Result<Vec<LoadedCol>, RuntimeError> {
    check_columns(shown, Holder::ArrowTable, input, schema)?;
    let mut cols = ColumnReader::for_columns(&input.columns);
    let mut row = 0u64;
    for batch in batches {
        crate::load::check_stop_flag(stop)?;
        if batch.num_columns() != input.columns.len() {
            return Err(RuntimeError::Data {
                msg: format!(
                    "`{shown}`: a record batch has {} columns where the table's schema has {}",
                    batch.num_columns(),
                    input.columns.len()
                ),
            });
        }
        for (c, (array, column)) in batch.columns().iter().zip(&input.columns).enumerate() {
            if !wanted.get(c).copied().unwrap_or(true) {
                continue;
            }
            if !fits(column.ty, array.data_type()) {
                return Err(RuntimeError::Data {
                    msg: format!(
                        "`{shown}`: column {} (`{}`) holds the Arrow type {} in a record batch, which does not fit the declared type {}",
                        c + 1,
                        column.name,
                        array.data_type(),
                        column.ty
                    ),
                });
            }
            let at = Located {
                shown,
                column: c,
                name: &column.name,
                ty: column.ty,
                first_row: row,
            };
            cols[c].push(array, &at, strings)?;
        }
        row += batch.num_rows() as u64;
    }
    Ok(cols.into_iter().map(|c| c.values).collect())
}

thread_local! {
    /// Set while this thread runs the decoder under [`caught`].
    static DECODING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f`, turning a panic into its message: the decoder's assertions on malformed data
/// are damage to report, not a crash. The panic hook stays silent for such a panic (the
/// message becomes the error), and reports every other panic as before.
fn caught<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    static QUIET_HOOK: std::sync::Once = std::sync::Once::new();
    QUIET_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !DECODING.with(|d| d.get()) {
                previous(info);
            }
        }));
    });
    let was = DECODING.with(|d| d.replace(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    DECODING.with(|d| d.set(was));
    r.map_err(|p| {
        p.downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "the decoder failed".into())
    })
}

/// `meta` with the kept string columns that are dictionary-encoded in every row group
/// read as Arrow dictionaries (so that each distinct value is interned once).
fn with_dictionary_hint(
    meta: ArrowReaderMetadata,
    schema: &Arc<Schema>,
    kept: &[usize],
) -> Result<ArrowReaderMetadata, parquet::errors::ParquetError> {
    let pq = meta.metadata().clone();
    let descr = pq.file_metadata().schema_descr();
    let mut changed = false;
    let fields: Vec<_> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(c, f)| {
            let plain_string = matches!(f.data_type(), DataType::Utf8 | DataType::LargeUtf8);
            // A top-level string column is one leaf column of the file.
            let leaf = (0..descr.num_columns()).find(|&l| descr.get_column_root_idx(l) == c);
            let dictionary = kept.contains(&c)
                && plain_string
                && leaf.is_some_and(|l| {
                    pq.num_row_groups() > 0
                        && pq
                            .row_groups()
                            .iter()
                            .all(|rg| rg.column(l).dictionary_page_offset().is_some())
                });
            if dictionary {
                changed = true;
                Arc::new(f.as_ref().clone().with_data_type(DataType::Dictionary(
                    Box::new(DataType::Int32),
                    Box::new(f.data_type().clone()),
                )))
            } else {
                f.clone()
            }
        })
        .collect();
    if !changed {
        return Ok(meta);
    }
    let hinted = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
    ArrowReaderMetadata::try_new(pq, ArrowReaderOptions::new().with_schema(hinted))
}

impl Reader<'_> {
    /// Decodes row group `g`, whose first row is row `start` (0-based) of the file.
    fn read_group(
        &self,
        g: usize,
        start: u64,
        stop: &AtomicBool,
        advance: &(dyn Fn(u64) + Sync),
    ) -> Result<Part, RuntimeError> {
        let (shown, pred) = (self.shown, &self.input.name);
        let damaged = |e: &dyn std::fmt::Display| RuntimeError::Data {
            msg: format!("`{shown}` (input of `{pred}`): row group {} cannot be read: {e}", g + 1),
        };
        let file = std::fs::File::open(self.path).map_err(|e| damaged(&e))?;
        let mask = ProjectionMask::roots(
            self.meta.metadata().file_metadata().schema_descr(),
            self.kept.iter().copied(),
        );
        let batches = ParquetRecordBatchReaderBuilder::new_with_metadata(file, self.meta.clone())
            .with_row_groups(vec![g])
            .with_projection(mask)
            .with_batch_size(BATCH)
            .build()
            .map_err(|e| damaged(&e))?;
        let mut strings = Interner::default();
        let mut cols = ColumnReader::for_columns(&self.input.columns);
        let mut row = start;
        for batch in batches {
            crate::load::check_stop_flag(stop)?;
            let batch = batch.map_err(|e| damaged(&e))?;
            for (array, &c) in batch.columns().iter().zip(&self.kept) {
                let column = &self.input.columns[c];
                let at = Located {
                    shown,
                    column: c,
                    name: &column.name,
                    ty: column.ty,
                    first_row: row,
                };
                cols[c].push(array, &at, &mut strings)?;
            }
            row += batch.num_rows() as u64;
            advance(batch.num_rows() as u64);
        }
        Ok((cols.into_iter().map(|c| c.values).collect(), strings))
    }
}

/// Where the values being converted are: for messages.
struct Located<'a> {
    shown: &'a str,
    /// 0-based.
    column: usize,
    name: &'a str,
    ty: Type,
    /// The file row (0-based) of the batch's first value.
    first_row: u64,
}

impl Located<'_> {
    /// The error at the batch's `i`-th value.
    fn error(&self, i: usize, detail: impl std::fmt::Display) -> RuntimeError {
        RuntimeError::Data {
            msg: format!(
                "`{}`: row {}: column {} (`{}`, {}): {detail}",
                self.shown,
                self.first_row + i as u64 + 1,
                self.column + 1,
                self.name,
                self.ty
            ),
        }
    }

    fn what(&self) -> String {
        format!("the column `{}` of `{}`", self.name, self.shown)
    }
}

/// A column being read from a row group: its values, and the codes of the last
/// dictionary's values (the dictionary is held, so that its buffers are not reused for
/// another dictionary while compared by address).
struct ColumnReader {
    values: LoadedCol,
    dict: Option<(ArrayRef, Vec<u32>)>,
}

/// Marks a dictionary value not interned yet.
const NOT_YET: u32 = u32::MAX;

impl ColumnReader {
    /// Empty readers, one per declared column.
    fn for_columns(columns: &[Column]) -> Vec<ColumnReader> {
        columns
            .iter()
            .map(|c| ColumnReader {
                values: LoadedCol::new(c.ty),
                dict: None,
            })
            .collect()
    }

    /// Appends the values of `array` (of a type [`fits`] accepted), checking for nulls.
    fn push(&mut self, array: &ArrayRef, at: &Located, strings: &mut Interner) -> Result<(), RuntimeError> {
        if let Some(nulls) = array.logical_nulls() {
            if let Some(i) = (0..nulls.len()).find(|&i| nulls.is_null(i)) {
                return Err(at.error(i, "a null; Fox has no nulls (every value of an input must be present)"));
            }
        }
        let what = at.what();
        let oom = |msg: String| RuntimeError::Data { msg };
        self.values.try_reserve_exact(array.len(), &what).map_err(oom)?;
        let ty = at.ty;
        match &mut self.values {
            LoadedCol::I32(out) if ty == Type::Date => push_dates(array, at, out)?,
            LoadedCol::I32(out) => push_ints(array, at, |i, v| {
                let x = i32::try_from(v).map_err(|_| at.error(i, format!("{v} is out of the range of int32")))?;
                out.push(x);
                Ok(())
            })?,
            LoadedCol::I64(out) => match ty {
                Type::Decimal(s) | Type::WideDecimal(s) => push_decimals(array, at, s, out)?,
                _ => push_ints(array, at, |_, v| {
                    out.push(v);
                    Ok(())
                })?,
            },
            LoadedCol::F64(out) => match array.data_type() {
                DataType::Float32 => out.extend(
                    array
                        .as_primitive::<arrow_array::types::Float32Type>()
                        .values()
                        .iter()
                        .map(|&x| f64::from(x)),
                ),
                _ => out.extend_from_slice(array.as_primitive::<arrow_array::types::Float64Type>().values()),
            },
            LoadedCol::Bool(out) => out.extend(array.as_boolean().values().iter().map(u8::from)),
            LoadedCol::Str(out) => {
                let intern =
                    |s: &str, strings: &mut Interner| strings.intern_for(s, &what).map_err(|e| oom(e.into_message()));
                match array.data_type() {
                    DataType::Utf8 => {
                        for s in array.as_string::<i32>().iter().flatten() {
                            out.push(intern(s, strings)?);
                        }
                    }
                    DataType::LargeUtf8 => {
                        for s in array.as_string::<i64>().iter().flatten() {
                            out.push(intern(s, strings)?);
                        }
                    }
                    DataType::Utf8View => {
                        for s in array.as_string_view().iter().flatten() {
                            out.push(intern(s, strings)?);
                        }
                    }
                    DataType::Dictionary(k, _) => match **k {
                        DataType::Int8 => Self::dict::<Int8Type>(&mut self.dict, array, out, strings, &what)?,
                        DataType::Int16 => Self::dict::<Int16Type>(&mut self.dict, array, out, strings, &what)?,
                        DataType::Int32 => Self::dict::<Int32Type>(&mut self.dict, array, out, strings, &what)?,
                        DataType::Int64 => Self::dict::<Int64Type>(&mut self.dict, array, out, strings, &what)?,
                        DataType::UInt8 => Self::dict::<UInt8Type>(&mut self.dict, array, out, strings, &what)?,
                        DataType::UInt16 => Self::dict::<UInt16Type>(&mut self.dict, array, out, strings, &what)?,
                        DataType::UInt32 => Self::dict::<UInt32Type>(&mut self.dict, array, out, strings, &what)?,
                        DataType::UInt64 => Self::dict::<UInt64Type>(&mut self.dict, array, out, strings, &what)?,
                        _ => unreachable!("`fits` accepts dictionary key types only"),
                    },
                    _ => unreachable!("`fits` accepts string types only"),
                }
            }
        }
        Ok(())
    }

    /// Appends the codes of a dictionary array's values, interning each dictionary value
    /// the first time a row uses it.
    fn dict<K: ArrowDictionaryKeyType>(
        dict: &mut Option<(ArrayRef, Vec<u32>)>,
        array: &ArrayRef,
        out: &mut Vec<u32>,
        strings: &mut Interner,
        what: &str,
    ) -> Result<(), RuntimeError> {
        let d = array.as_dictionary::<K>();
        let values = d.values();
        let same = dict
            .as_ref()
            .is_some_and(|(held, _)| held.to_data().ptr_eq(&values.to_data()));
        if !same {
            *dict = Some((values.clone(), vec![NOT_YET; values.len()]));
        }
        let (_, codes) = dict.as_mut().expect("set above");
        let text = |i: usize| -> &str {
            match values.data_type() {
                DataType::Utf8 => values.as_string::<i32>().value(i),
                DataType::LargeUtf8 => values.as_string::<i64>().value(i),
                _ => values.as_string_view().value(i),
            }
        };
        for k in d.keys().values() {
            let i = k.as_usize();
            if codes[i] == NOT_YET {
                codes[i] = strings
                    .intern_for(text(i), what)
                    .map_err(|e| RuntimeError::Data { msg: e.into_message() })?;
            }
            out.push(codes[i]);
        }
        Ok(())
    }
}

/// Appends the days since 1970-01-01 of a `date32`, `date64` or time-zone-free timestamp
/// array: a `date64` or a timestamp must fall on a midnight (a date holds no time of day),
/// and its day must be within the range of `date32`.
fn push_dates(array: &ArrayRef, at: &Located, out: &mut Vec<i32>) -> Result<(), RuntimeError> {
    use arrow_array::types::{
        Date32Type, Date64Type, TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
        TimestampSecondType,
    };
    use arrow_schema::TimeUnit;
    let mut whole_days = |values: &[i64], per_day: i64, unit: &str| -> Result<(), RuntimeError> {
        for (i, &v) in values.iter().enumerate() {
            if v.rem_euclid(per_day) != 0 {
                return Err(at.error(
                    i,
                    format!("{v} {unit} since 1970-01-01 is not a midnight; a date holds no time of day"),
                ));
            }
            let day = i32::try_from(v.div_euclid(per_day))
                .map_err(|_| at.error(i, format!("{v} {unit} since 1970-01-01 is out of the range of dates")))?;
            out.push(day);
        }
        Ok(())
    };
    const DAY_S: i64 = 86_400;
    match array.data_type() {
        DataType::Date32 => out.extend_from_slice(array.as_primitive::<Date32Type>().values()),
        DataType::Date64 => whole_days(array.as_primitive::<Date64Type>().values(), DAY_S * 1000, "ms")?,
        DataType::Timestamp(TimeUnit::Second, None) => {
            whole_days(array.as_primitive::<TimestampSecondType>().values(), DAY_S, "s")?
        }
        DataType::Timestamp(TimeUnit::Millisecond, None) => whole_days(
            array.as_primitive::<TimestampMillisecondType>().values(),
            DAY_S * 1000,
            "ms",
        )?,
        DataType::Timestamp(TimeUnit::Microsecond, None) => whole_days(
            array.as_primitive::<TimestampMicrosecondType>().values(),
            DAY_S * 1_000_000,
            "µs",
        )?,
        DataType::Timestamp(TimeUnit::Nanosecond, None) => whole_days(
            array.as_primitive::<TimestampNanosecondType>().values(),
            DAY_S * 1_000_000_000,
            "ns",
        )?,
        _ => unreachable!("`fits` accepts date32, date64 and time-zone-free timestamps only"),
    }
    Ok(())
}

/// Calls `each(i, v)` with every value of an integer array as an `i64`; a `uint64` beyond
/// the range of `int64` is an error.
fn push_ints(
    array: &ArrayRef,
    at: &Located,
    mut each: impl FnMut(usize, i64) -> Result<(), RuntimeError>,
) -> Result<(), RuntimeError> {
    fn go<T: ArrowPrimitiveType>(
        a: &PrimitiveArray<T>,
        at: &Located,
        each: &mut impl FnMut(usize, i64) -> Result<(), RuntimeError>,
    ) -> Result<(), RuntimeError> {
        for (i, v) in a.values().iter().enumerate() {
            let x = v
                .to_i64()
                .ok_or_else(|| at.error(i, format!("{v:?} is out of the range of int64")))?;
            each(i, x)?;
        }
        Ok(())
    }
    match array.data_type() {
        DataType::Int8 => go(array.as_primitive::<Int8Type>(), at, &mut each),
        DataType::Int16 => go(array.as_primitive::<Int16Type>(), at, &mut each),
        DataType::Int32 => go(array.as_primitive::<Int32Type>(), at, &mut each),
        DataType::Int64 => go(array.as_primitive::<Int64Type>(), at, &mut each),
        DataType::UInt8 => go(array.as_primitive::<UInt8Type>(), at, &mut each),
        DataType::UInt16 => go(array.as_primitive::<UInt16Type>(), at, &mut each),
        DataType::UInt32 => go(array.as_primitive::<UInt32Type>(), at, &mut each),
        DataType::UInt64 => go(array.as_primitive::<UInt64Type>(), at, &mut each),
        _ => unreachable!("`fits` accepts integer types only"),
    }
}

/// Appends the values of an integer or decimal array as unscaled decimals of scale
/// `scale`: rescaled exactly, or an error when digits would be lost or the value has more
/// than 18 digits.
fn push_decimals(array: &ArrayRef, at: &Located, scale: u8, out: &mut Vec<i64>) -> Result<(), RuntimeError> {
    let mut put = |i: usize, v: i128, from: u8| -> Result<(), RuntimeError> {
        let shown = || crate::output::format_decimal(v, from);
        let x = if from <= scale {
            10i128
                .checked_pow(u32::from(scale - from))
                .and_then(|f| v.checked_mul(f))
                .filter(|x| x.abs() <= MAX_DECIMAL)
        } else {
            let f = 10i128.checked_pow(u32::from(from - scale));
            match f {
                Some(f) if v % f != 0 => {
                    return Err(at.error(i, format!("{} has digits beyond the declared scale {scale}", shown())))
                }
                Some(f) => Some(v / f),
                None => Some(0).filter(|_| v == 0),
            }
            .filter(|x| x.abs() <= MAX_DECIMAL)
        };
        let x = x.ok_or_else(|| {
            at.error(
                i,
                format!(
                    "{} has more than 18 digits at scale {scale}; a decimal holds at most 18",
                    shown()
                ),
            )
        })?;
        out.push(x as i64);
        Ok(())
    };
    match array.data_type() {
        DataType::Decimal32(_, s) => {
            let s = decimal_scale(*s, at)?;
            for (i, v) in array.as_primitive::<Decimal32Type>().values().iter().enumerate() {
                put(i, i128::from(*v), s)?;
            }
        }
        DataType::Decimal64(_, s) => {
            let s = decimal_scale(*s, at)?;
            for (i, v) in array.as_primitive::<Decimal64Type>().values().iter().enumerate() {
                put(i, i128::from(*v), s)?;
            }
        }
        DataType::Decimal128(_, s) => {
            let s = decimal_scale(*s, at)?;
            for (i, v) in array.as_primitive::<Decimal128Type>().values().iter().enumerate() {
                put(i, *v, s)?;
            }
        }
        _ => push_ints(array, at, |i, v| put(i, i128::from(v), 0))?,
    }
    Ok(())
}

/// A decimal type's scale, which Fox requires to be 0 or more.
fn decimal_scale(s: i8, at: &Located) -> Result<u8, RuntimeError> {
    u8::try_from(s).map_err(|_| RuntimeError::Data {
        msg: format!(
            "`{}`: column {} (`{}`): a decimal of negative scale {s} is not supported",
            at.shown,
            at.column + 1,
            at.name
        ),
    })
}
