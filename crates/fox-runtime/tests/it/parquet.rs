//! Parquet input (`.input p from "x.parquet"`) and Parquet/Arrow output: every type
//! mapping, dictionary-encoded strings, several row groups, round trips, and damaged or
//! mismatched files rejected with errors naming the file, the column and the row.

use arrow_array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, DictionaryArray, Float32Array, Float64Array, Int32Array,
    Int64Array, LargeStringArray, RecordBatch, StringArray, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema};
use fox_kernel::InputRel;
use fox_runtime::load::{load_input, Interner, LoadedCol};
use fox_runtime::output::OutputTable;
use fox_sema::core::{Column, Type, Value};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fox-parquet-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn rel(file: &str, cols: &[(&str, Type)]) -> InputRel {
    crate::load::input(file, ",", cols)
}

/// Writes the columns as one Parquet file, `rows_per_group` rows per row group.
fn write(path: &Path, cols: Vec<(&str, ArrayRef)>, rows_per_group: usize) {
    let fields: Vec<Field> = cols
        .iter()
        .map(|(n, a)| Field::new(*n, a.data_type().clone(), a.null_count() > 0))
        .collect();
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        cols.into_iter().map(|(_, a)| a).collect(),
    )
    .unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(rows_per_group))
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// Loads `file` of `dir` as `r` with the columns `cols`: the columns and the strings in
/// interner order.
fn load(dir: &Path, file: &str, cols: &[(&str, Type)]) -> Result<(Vec<LoadedCol>, Vec<String>), String> {
    let mut strings = Interner::default();
    load_input(dir, &rel(file, cols), &mut strings)
        .map(|c| (c, strings.strings().iter().map(String::from).collect()))
        .map_err(|e| e.to_string())
}

/// The string column `col` as its texts.
fn texts(col: &LoadedCol, strings: &[String]) -> Vec<String> {
    match col {
        LoadedCol::Str(ids) => ids.iter().map(|&i| strings[i as usize].clone()).collect(),
        other => panic!("not a string column: {other:?}"),
    }
}

#[test]
fn every_type_maps_to_its_declared_type() {
    let d = temp_dir("types");
    write(
        &d.join("t.parquet"),
        vec![
            ("a", Arc::new(Int32Array::from(vec![1, -2])) as ArrayRef),
            ("b", Arc::new(Int64Array::from(vec![-9_000_000_000, 7]))),
            ("c", Arc::new(Int64Array::from(vec![5, -6]))),
            (
                "d",
                Arc::new(
                    Decimal128Array::from(vec![1234, -5])
                        .with_precision_and_scale(15, 2)
                        .unwrap(),
                ),
            ),
            (
                "e",
                Arc::new(
                    Decimal128Array::from(vec![12, 3])
                        .with_precision_and_scale(10, 1)
                        .unwrap(),
                ),
            ),
            ("f", Arc::new(Date32Array::from(vec![10471, 0]))),
            ("g", Arc::new(StringArray::from(vec!["hello", ""]))),
            ("h", Arc::new(LargeStringArray::from(vec!["x", "y"]))),
            ("i", Arc::new(BooleanArray::from(vec![true, false]))),
            ("j", Arc::new(Float64Array::from(vec![1.5e3, -0.25]))),
            ("k", Arc::new(Float32Array::from(vec![0.5f32, 2.0]))),
            ("l", Arc::new(Int32Array::from(vec![3, 4]))),
        ],
        1024,
    );
    let (c, strings) = load(
        &d,
        "t.parquet",
        &[
            ("a", Type::Int32),
            ("b", Type::Int64),
            // int64 narrowed to int32 with a range check.
            ("c", Type::Int32),
            ("d", Type::Decimal(2)),
            // decimal(10, 1) rescaled to the declared scale 2.
            ("e", Type::Decimal(2)),
            ("f", Type::Date),
            ("g", Type::String),
            ("h", Type::String),
            ("i", Type::Bool),
            ("j", Type::Float64),
            // float32 widened.
            ("k", Type::Float64),
            // int32 widened to int64.
            ("l", Type::Int64),
        ],
    )
    .unwrap();
    assert_eq!(c[0], LoadedCol::I32(vec![1, -2]));
    assert_eq!(c[1], LoadedCol::I64(vec![-9_000_000_000, 7]));
    assert_eq!(c[2], LoadedCol::I32(vec![5, -6]));
    assert_eq!(c[3], LoadedCol::I64(vec![1234, -5]));
    assert_eq!(c[4], LoadedCol::I64(vec![120, 30]));
    assert_eq!(c[5], LoadedCol::I32(vec![10471, 0]));
    assert_eq!(texts(&c[6], &strings), ["hello", ""]);
    assert_eq!(texts(&c[7], &strings), ["x", "y"]);
    assert_eq!(c[8], LoadedCol::Bool(vec![1, 0]));
    assert_eq!(c[9], LoadedCol::F64(vec![1.5e3, -0.25]));
    assert_eq!(c[10], LoadedCol::F64(vec![0.5, 2.0]));
    assert_eq!(c[11], LoadedCol::I64(vec![3, 4]));
}

#[test]
fn dictionary_strings_and_row_groups_keep_the_files_order() {
    let d = temp_dir("dict");
    let n = 10_000;
    let flags = ["A", "N", "R"];
    let keys: Vec<i32> = (0..n).map(|i| (i * 7 % 3) as i32).collect();
    let dict = DictionaryArray::new(
        Int32Array::from(keys.clone()),
        Arc::new(StringArray::from(flags.to_vec())),
    );
    let comments: Vec<String> = (0..n).map(|i| format!("comment {i}")).collect();
    write(
        &d.join("t.parquet"),
        vec![
            (
                "k",
                Arc::new(Int32Array::from((0..n as i32).collect::<Vec<_>>())) as ArrayRef,
            ),
            ("flag", Arc::new(dict)),
            ("comment", Arc::new(StringArray::from(comments.clone()))),
        ],
        // Several row groups, read in parallel.
        997,
    );
    let meta = parquet::file::reader::FileReader::metadata(
        &parquet::file::reader::SerializedFileReader::new(std::fs::File::open(d.join("t.parquet")).unwrap()).unwrap(),
    )
    .clone();
    assert!(meta.num_row_groups() > 10);
    let cols = [("k", Type::Int32), ("flag", Type::String), ("comment", Type::String)];
    let (c, strings) = load(&d, "t.parquet", &cols).unwrap();
    assert_eq!(c[0], LoadedCol::I32((0..n as i32).collect()));
    let want: Vec<String> = keys.iter().map(|&k| flags[k as usize].to_string()).collect();
    assert_eq!(texts(&c[1], &strings), want);
    assert_eq!(texts(&c[2], &strings), comments);
    // Each distinct string is interned once, whatever the row group it comes from.
    assert_eq!(strings.len(), 3 + n);
}

#[test]
fn unread_columns_come_back_empty_and_are_still_type_checked() {
    let d = temp_dir("unread");
    write(
        &d.join("t.parquet"),
        vec![
            ("a", Arc::new(Int32Array::from(vec![1, 2])) as ArrayRef),
            ("b", Arc::new(StringArray::from(vec!["p", "q"]))),
        ],
        1024,
    );
    let input = rel("t.parquet", &[("a", Type::Int32), ("b", Type::String)]);
    let mut strings = Interner::default();
    let c = fox_runtime::load::load_input_cols(&d, &input, &[true, false], &mut strings, fox_runtime::cancel::never())
        .unwrap();
    assert_eq!(c[0], LoadedCol::I32(vec![1, 2]));
    assert!(c[1].is_empty());
    assert!(strings.is_empty());
    let input = rel("t.parquet", &[("a", Type::Int32), ("b", Type::Int32)]);
    let e = fox_runtime::load::load_input_cols(&d, &input, &[true, false], &mut strings, fox_runtime::cancel::never())
        .unwrap_err()
        .to_string();
    assert!(e.contains("column 2 (`b`"), "{e}");
}

#[test]
fn mismatched_or_damaged_files_are_clear_errors() {
    let d = temp_dir("bad");
    write(
        &d.join("t.parquet"),
        vec![
            ("a", Arc::new(Int64Array::from(vec![1, 3_000_000_000])) as ArrayRef),
            ("s", Arc::new(StringArray::from(vec!["x", "y"]))),
            (
                "m",
                Arc::new(
                    Decimal128Array::from(vec![100, 1234])
                        .with_precision_and_scale(10, 3)
                        .unwrap(),
                ),
            ),
            ("u", Arc::new(UInt64Array::from(vec![1, u64::MAX]))),
        ],
        1024,
    );
    let file = d.join("t.parquet").display().to_string();
    let ok = [
        ("a", Type::Int64),
        ("s", Type::String),
        ("m", Type::Decimal(3)),
        ("u", Type::Decimal(0)),
    ];
    let with = |c: usize, ty: Type| {
        let mut cols = ok;
        cols[c].1 = ty;
        load(&d, "t.parquet", &cols).unwrap_err()
    };
    // A column of the wrong type: the file, the column (position and names), both types.
    let e = with(0, Type::String);
    assert_eq!(
        e,
        format!(
            "`{file}`: column 1 (`a` in the file, `a` of `r`) has the Parquet (Arrow) type Int64, which does not fit the declared type string"
        )
    );
    let e = with(0, Type::Date);
    assert!(
        e.contains("column 1") && e.contains("Int64") && e.contains("date"),
        "{e}"
    );
    // Out of the range of int32: the row and the column.
    let e = with(0, Type::Int32);
    assert_eq!(
        e,
        format!("`{file}`: row 2: column 1 (`a`, int32): 3000000000 is out of the range of int32")
    );
    let e = with(3, Type::Int64);
    assert!(
        e.contains("row 2: column 4 (`u`, int64): 18446744073709551615 is out of the range of int64"),
        "{e}"
    );
    // A null.
    write(
        &d.join("null.parquet"),
        vec![
            ("k", Arc::new(Int32Array::from(vec![1, 2, 3])) as ArrayRef),
            ("s", Arc::new(StringArray::from(vec![Some("x"), Some("y"), None]))),
        ],
        1024,
    );
    let e = load(&d, "null.parquet", &[("k", Type::Int32), ("s", Type::String)]).unwrap_err();
    let null_file = d.join("null.parquet").display().to_string();
    assert!(
        e.starts_with(&format!("`{null_file}`: row 3: column 2 (`s`, string): a null")),
        "{e}"
    );
    // Digits beyond the declared scale (1.234 at scale 2), where 0.100 fits.
    let e = with(2, Type::Decimal(2));
    assert!(
        e.contains("row 2: column 3 (`m`, decimal(2)): 1.234 has digits beyond the declared scale 2"),
        "{e}"
    );
    // A wrong number of columns.
    let e = load(&d, "t.parquet", &ok[..3]).unwrap_err();
    assert!(
        e.contains("the file has 4 columns (`a`, `s`, `m`, `u`), but `r` has 3 (`a`, `s`, `m`)"),
        "{e}"
    );
    // A truncated file, random bytes, an empty file, a folder.
    let bytes = std::fs::read(d.join("t.parquet")).unwrap();
    std::fs::write(d.join("cut.parquet"), &bytes[..bytes.len() / 2]).unwrap();
    let e = load(&d, "cut.parquet", &ok).unwrap_err();
    assert!(
        e.contains("cut.parquet` (input of `r`) is not a readable Parquet file"),
        "{e}"
    );
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let noise: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(d.join("noise.parquet"), &noise).unwrap();
    let e = load(&d, "noise.parquet", &ok).unwrap_err();
    assert!(
        e.contains("noise.parquet` (input of `r`) is not a readable Parquet file"),
        "{e}"
    );
    std::fs::write(d.join("empty.parquet"), b"").unwrap();
    let e = load(&d, "empty.parquet", &ok).unwrap_err();
    assert!(e.contains("is not a readable Parquet file"), "{e}");
    std::fs::create_dir_all(d.join("dir.parquet")).unwrap();
    let e = load(&d, "dir.parquet", &ok).unwrap_err();
    assert!(e.contains("it is a folder, not a regular file"), "{e}");
    let e = load(&d, "missing.parquet", &ok).unwrap_err();
    assert!(e.contains("missing.parquet` (input of `r`): No such file"), "{e}");
}

#[test]
fn damaged_pages_are_errors_not_panics() {
    // Every byte of the data pages flipped in turn (the footer intact): each load either
    // succeeds (the byte was padding or a value) or fails with a message naming the file.
    let d = temp_dir("flip");
    let s: Vec<String> = (0..200).map(|i| format!("s{}", i % 17)).collect();
    write(
        &d.join("t.parquet"),
        vec![
            (
                "a",
                Arc::new(Int64Array::from((0..200).collect::<Vec<i64>>())) as ArrayRef,
            ),
            ("s", Arc::new(StringArray::from(s))),
        ],
        64,
    );
    let bytes = std::fs::read(d.join("t.parquet")).unwrap();
    let cols = [("a", Type::Int64), ("s", Type::String)];
    let footer = u32::from_le_bytes(bytes[bytes.len() - 8..bytes.len() - 4].try_into().unwrap()) as usize;
    for at in (4..bytes.len() - 8 - footer).step_by(3) {
        let mut b = bytes.clone();
        b[at] ^= 0x5a;
        std::fs::write(d.join("f.parquet"), &b).unwrap();
        if let Err(e) = load(&d, "f.parquet", &cols) {
            assert!(e.contains("f.parquet"), "byte {at}: {e}");
        }
    }
}

fn table(rows: Vec<Vec<Value>>, cols: &[(&str, Type)]) -> OutputTable {
    OutputTable::from_rows(
        "t",
        cols.iter()
            .map(|(n, t)| Column {
                name: n.to_string(),
                ty: *t,
            })
            .collect(),
        rows,
    )
}

#[test]
fn written_parquet_reads_back_with_arrow_types() {
    let cols = [
        ("a", Type::Int32),
        ("b", Type::Int64),
        ("c", Type::Decimal(2)),
        ("d", Type::Date),
        ("e", Type::String),
        ("f", Type::Bool),
        ("g", Type::Float64),
    ];
    let rows: Vec<Vec<Value>> = (0..100_000)
        .map(|i| {
            vec![
                Value::Int32(i),
                Value::Int64(i64::from(i) * 1_000_000_007),
                Value::Decimal {
                    unscaled: i128::from(i) - 50,
                    scale: 2,
                },
                Value::Date(i % 20000),
                Value::String(format!("s{}", i % 1000)),
                Value::Bool(i % 3 == 0),
                Value::Float64(f64::from(i) / 4.0),
            ]
        })
        .collect();
    let t = table(rows.clone(), &cols);
    let d = temp_dir("roundtrip");
    let written = fox_runtime::write_all(std::slice::from_ref(&t), &d, fox_runtime::Format::Parquet).unwrap();
    assert_eq!(written, vec![(d.join("t.parquet"), 100_000)]);
    // The Arrow types of the contract.
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        std::fs::File::open(d.join("t.parquet")).unwrap(),
    )
    .unwrap();
    let types: Vec<DataType> = reader.schema().fields().iter().map(|f| f.data_type().clone()).collect();
    assert_eq!(
        types,
        [
            DataType::Int32,
            DataType::Int64,
            DataType::Decimal128(38, 2),
            DataType::Date32,
            DataType::Utf8,
            DataType::Boolean,
            DataType::Float64
        ]
    );
    // Fox reads its own file back: the same rows.
    let (c, strings) = load(&d, "t.parquet", &cols).unwrap();
    let back: Vec<Vec<Value>> = (0..100_000)
        .map(|r| {
            let LoadedCol::I32(a) = &c[0] else { panic!() };
            let LoadedCol::I64(b) = &c[1] else { panic!() };
            let LoadedCol::I64(m) = &c[2] else { panic!() };
            let LoadedCol::I32(dt) = &c[3] else { panic!() };
            let LoadedCol::Str(s) = &c[4] else { panic!() };
            let LoadedCol::Bool(f) = &c[5] else { panic!() };
            let LoadedCol::F64(g) = &c[6] else { panic!() };
            vec![
                Value::Int32(a[r]),
                Value::Int64(b[r]),
                Value::Decimal {
                    unscaled: i128::from(m[r]),
                    scale: 2,
                },
                Value::Date(dt[r]),
                Value::String(strings[s[r] as usize].clone()),
                Value::Bool(f[r] != 0),
                Value::Float64(g[r]),
            ]
        })
        .collect();
    assert!(back == rows);
}

#[test]
fn written_arrow_files_hold_the_rows() {
    let cols = [("k", Type::Int32), ("v", Type::Decimal(4)), ("s", Type::String)];
    let rows = vec![
        vec![
            Value::Int32(1),
            Value::Decimal {
                unscaled: 12345,
                scale: 4,
            },
            Value::String("a".into()),
        ],
        vec![
            Value::Int32(2),
            Value::Decimal { unscaled: -1, scale: 4 },
            Value::String("b, \"c\"".into()),
        ],
    ];
    let d = temp_dir("arrow");
    fox_runtime::write_all(&[table(rows, &cols)], &d, fox_runtime::Format::Arrow).unwrap();
    let bytes = std::fs::read(d.join("t.arrow")).unwrap();
    assert!(bytes.starts_with(b"ARROW1"));
    let reader = arrow_ipc::reader::FileReader::try_new(std::io::Cursor::new(bytes), None).unwrap();
    let batches: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
    let batch = arrow_select_concat(&batches);
    assert_eq!(batch.schema().field(1).data_type(), &DataType::Decimal128(38, 4));
    assert_eq!(
        batch.column(0).as_any().downcast_ref::<Int32Array>().unwrap().values(),
        &[1, 2]
    );
    let v = batch.column(1).as_any().downcast_ref::<Decimal128Array>().unwrap();
    assert_eq!(v.values(), &[12345, -1]);
    let s = batch.column(2).as_any().downcast_ref::<StringArray>().unwrap();
    assert_eq!((s.value(0), s.value(1)), ("a", "b, \"c\""));
    assert!(!batch.schema().field(0).is_nullable());
}

/// The one batch of a small file.
fn arrow_select_concat(batches: &[RecordBatch]) -> RecordBatch {
    assert_eq!(batches.len(), 1);
    batches[0].clone()
}

#[test]
fn dates_read_from_date64_and_midnight_timestamps() {
    use arrow_array::{Date64Array, TimestampMillisecondArray, TimestampNanosecondArray, TimestampSecondArray};
    let d = temp_dir("dates");
    const DAY_MS: i64 = 86_400_000;
    let days = [10471i64, 0, -1];
    write(
        &d.join("t.parquet"),
        vec![
            (
                "a",
                Arc::new(Date64Array::from(days.map(|x| x * DAY_MS).to_vec())) as ArrayRef,
            ),
            (
                "b",
                Arc::new(TimestampMillisecondArray::from(days.map(|x| x * DAY_MS).to_vec())),
            ),
            (
                "c",
                Arc::new(TimestampNanosecondArray::from(
                    days.map(|x| x * DAY_MS * 1_000_000).to_vec(),
                )),
            ),
            (
                "s",
                Arc::new(TimestampSecondArray::from(days.map(|x| x * 86_400).to_vec())),
            ),
        ],
        1024,
    );
    let cols = [
        ("a", Type::Date),
        ("b", Type::Date),
        ("c", Type::Date),
        ("s", Type::Date),
    ];
    let (c, _) = load(&d, "t.parquet", &cols).unwrap();
    for col in &c {
        assert_eq!(*col, LoadedCol::I32(vec![10471, 0, -1]));
    }
    // A time of day is not a date; a time zone makes the day ambiguous.
    write(
        &d.join("noon.parquet"),
        vec![(
            "t",
            Arc::new(TimestampMillisecondArray::from(vec![0, DAY_MS / 2])) as ArrayRef,
        )],
        1024,
    );
    let e = load(&d, "noon.parquet", &[("t", Type::Date)]).unwrap_err();
    assert!(
        e.contains("row 2: column 1 (`t`, date): 43200000 ms since 1970-01-01 is not a midnight"),
        "{e}"
    );
    write(
        &d.join("tz.parquet"),
        vec![(
            "t",
            Arc::new(TimestampMillisecondArray::from(vec![0]).with_timezone("UTC")) as ArrayRef,
        )],
        1024,
    );
    let e = load(&d, "tz.parquet", &[("t", Type::Date)]).unwrap_err();
    assert!(e.contains("which does not fit the declared type date"), "{e}");
}

/// Loads `batches` given as the table of the relation `r` (columns `cols`, key `key`).
fn load_given(
    batches: Vec<RecordBatch>,
    cols: &[(&str, Type)],
    key: Vec<usize>,
) -> Result<fox_runtime::LoadedInputs, String> {
    let mut input = rel("r.csv", cols);
    input.key = key;
    let used = vec![true; cols.len()];
    let given = fox_runtime::GivenTable {
        relation: "r".into(),
        shown: "inputs['r']".into(),
        schema: batches[0].schema(),
        batches,
    };
    fox_runtime::LoadedInputs::load_given(Path::new("/nonexistent"), &[(input, used)], &[given], None, None)
        .map_err(|e| e.to_string())
}

fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter(cols).unwrap()
}

#[test]
fn given_tables_are_read_by_the_rules_of_parquet_input() {
    let b1 = batch(vec![
        ("x", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
        ("s", Arc::new(StringArray::from(vec!["b", "a"]))),
    ]);
    let b2 = batch(vec![
        ("x", Arc::new(Int64Array::from(vec![3])) as ArrayRef),
        ("s", Arc::new(StringArray::from(vec!["c"]))),
    ]);
    let cols = [("x", Type::Int32), ("s", Type::String)];
    // The relation is read from the table, not from its file (which does not exist).
    let loaded = load_given(vec![b1.clone(), b2.clone()], &cols, vec![]).unwrap();
    let stats =
        fox_runtime::stats::format_statistics(&loaded.statistics(), &loaded.inputs().cloned().collect::<Vec<_>>());
    assert!(stats.contains("3 rows"), "{stats}");
    // Errors name the table, the column and, for a value, its row across batches.
    let e = load_given(vec![b1.clone()], &[("x", Type::Int32)], vec![]).unwrap_err();
    assert_eq!(
        e,
        "`inputs['r']`: the table has 2 columns (`x`, `s`), but `r` has 1 (`x`); the table's columns are matched by position"
    );
    let e = load_given(vec![b1.clone()], &[("x", Type::String), ("s", Type::String)], vec![]).unwrap_err();
    assert_eq!(
        e,
        "`inputs['r']`: column 1 (`x` in the table, `x` of `r`) has the Arrow type Int64, which does not fit the declared type string"
    );
    let big = batch(vec![
        ("x", Arc::new(Int64Array::from(vec![3_000_000_000])) as ArrayRef),
        ("s", Arc::new(StringArray::from(vec!["c"]))),
    ]);
    let e = load_given(vec![b1.clone(), big], &cols, vec![]).unwrap_err();
    assert_eq!(
        e,
        "`inputs['r']`: row 3: column 1 (`x`, int32): 3000000000 is out of the range of int32"
    );
    let null = batch(vec![
        ("x", Arc::new(Int64Array::from(vec![Some(1), None])) as ArrayRef),
        ("s", Arc::new(StringArray::from(vec!["c", "d"]))),
    ]);
    let e = load_given(vec![null], &cols, vec![]).unwrap_err();
    assert!(
        e.contains("row 2: column 1 (`x`, int32): a null; Fox has no nulls"),
        "{e}"
    );
    // A declared key is checked.
    let e = load_given(vec![b1.clone(), b1], &cols, vec![0]).unwrap_err();
    assert!(e.contains("inputs['r']") && e.contains("have the same key (x)"), "{e}");
}
