//! Output formats: values, the stdout table, CSV files, and result ordering.

use fox_runtime::output::{cmp_values, csv_text, format_date, format_decimal, sort_rows};
use fox_runtime::{format_table, format_value, write_csv, OutputTable};
use fox_sema::core::{Column, Type, Value};

fn col(name: &str, ty: Type) -> Column {
    Column { name: name.into(), ty }
}

fn dec(unscaled: i128, scale: u8) -> Value {
    Value::Decimal { unscaled, scale }
}

#[test]
fn values_format_as_csv_text() {
    assert_eq!(format_value(&dec(50, 2), Type::Decimal(2)), "0.50");
    assert_eq!(format_value(&dec(-125, 2), Type::Decimal(2)), "-1.25");
    assert_eq!(format_value(&dec(3_000_000, 6), Type::Decimal(6)), "3.000000");
    assert_eq!(format_value(&dec(-5, 2), Type::Decimal(2)), "-0.05");
    assert_eq!(format_value(&dec(7, 0), Type::Decimal(0)), "7");
    // A value of a smaller scale is shown with all the digits of its column's scale.
    assert_eq!(format_value(&dec(95, 1), Type::Decimal(4)), "9.5000");
    assert_eq!(format_decimal(i64::MIN as i128, 2), "-92233720368547758.08");
    assert_eq!(format_value(&Value::Float64(15.0), Type::Float64), "15.0");
    assert_eq!(format_value(&Value::Float64(29.985), Type::Float64), "29.985");
    assert_eq!(
        format_value(&Value::Float64(0.1 + 0.2), Type::Float64),
        "0.30000000000000004"
    );
    assert_eq!(format_value(&Value::Float64(1e300), Type::Float64), "1e300");
    assert_eq!(format_value(&Value::Date(10471), Type::Date), "1998-09-02");
    assert_eq!(format_value(&Value::Date(-1), Type::Date), "1969-12-31");
    assert_eq!(format_date(9555), "1996-02-29");
    assert_eq!(format_value(&Value::Bool(true), Type::Bool), "true");
    assert_eq!(format_value(&Value::Int64(-7), Type::Int64), "-7");
    assert_eq!(format_value(&Value::String("a,b".into()), Type::String), "a,b");
}

fn table() -> OutputTable {
    OutputTable::from_rows(
        "t",
        vec![
            col("name", Type::String),
            col("amount", Type::Decimal(2)),
            col("d", Type::Date),
        ],
        vec![
            vec![Value::String("plain".into()), dec(1050, 2), Value::Date(0)],
            vec![
                Value::String("a, \"quoted\"\nline".into()),
                dec(-5, 2),
                Value::Date(10471),
            ],
        ],
    )
}

#[test]
fn csv_quotes_per_rfc_4180() {
    assert_eq!(
        csv_text(&table()),
        "name,amount,d\nplain,10.50,1970-01-01\n\"a, \"\"quoted\"\"\nline\",-0.05,1998-09-02\n"
    );
}

#[test]
fn write_csv_writes_whole_file_and_leaves_no_temporary() {
    let dir = std::env::temp_dir().join(format!("fox-runtime-csv-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.csv");
    write_csv(&table(), &path).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), csv_text(&table()));
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("t.csv")]);
    // A path in a missing directory is a clean error, and nothing is created.
    let bad = dir.join("missing").join("t.csv");
    let e = write_csv(&table(), &bad).unwrap_err().to_string();
    assert!(e.starts_with("cannot write `") && e.contains("missing"), "{e}");
    assert!(!dir.join("missing").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn table_is_aligned_with_a_footer() {
    let t = OutputTable::from_rows(
        "t",
        vec![col("x", Type::Int32), col("label", Type::String)],
        vec![
            vec![Value::Int32(1), Value::String("a".into())],
            vec![Value::Int32(100), Value::String("long text".into())],
        ],
    );
    assert_eq!(
        format_table(&t),
        "  x | label\n----+----------\n  1 | a\n100 | long text\n2 rows\n"
    );
    let one = OutputTable::from_rows(
        "t",
        t.columns.clone(),
        vec![vec![Value::Int32(5), Value::String("tab\there".into())]],
    );
    assert_eq!(format_table(&one), "x | label\n--+----------\n5 | tab\\there\n1 row\n");
    let empty = OutputTable::from_rows("t", t.columns, vec![]);
    assert_eq!(format_table(&empty), "x | label\n--+------\n0 rows\n");
}

#[test]
fn rows_sort_by_order_keys_then_all_columns() {
    let mut rows = vec![
        vec![Value::Int32(1), Value::String("b".into()), dec(300, 2)],
        vec![Value::Int32(2), Value::String("a".into()), dec(380, 2)],
        vec![Value::Int32(3), Value::String("a".into()), dec(300, 2)],
        vec![Value::Int32(0), Value::String("c".into()), dec(-1, 2)],
    ];
    let mut all = rows.clone();
    sort_rows(&mut all, &[], None);
    let firsts: Vec<_> = all.iter().map(|r| r[0].clone()).collect();
    assert_eq!(
        firsts,
        vec![Value::Int32(0), Value::Int32(1), Value::Int32(2), Value::Int32(3)]
    );
    // By amount descending, then ascending on all columns; limit 3.
    sort_rows(&mut rows, &[(2, true)], Some(3));
    let firsts: Vec<_> = rows.iter().map(|r| r[0].clone()).collect();
    assert_eq!(firsts, vec![Value::Int32(2), Value::Int32(1), Value::Int32(3)]);
    let mut by_text = vec![
        vec![Value::String("b".into())],
        vec![Value::String("B".into())],
        vec![Value::String("a".into())],
    ];
    sort_rows(&mut by_text, &[(0, false)], Some(0));
    assert!(by_text.is_empty());
    assert!(cmp_values(&Value::Float64(-0.0), &Value::Float64(0.0)).is_lt());
    assert!(cmp_values(&Value::Float64(f64::NAN), &Value::Float64(f64::INFINITY)).is_gt());
    assert!(cmp_values(&dec(5, 1), &dec(49, 2)).is_gt());
}

#[test]
fn write_csv_all_writes_every_table() {
    let dir = std::env::temp_dir().join(format!("fox-runtime-csv-all-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.join("nested").join("out");
    let mut second = table();
    second.name = "lineitem:late".into();
    let paths = fox_runtime::write_csv_all(&[table(), second], &out).unwrap();
    assert_eq!(paths, vec![out.join("t.csv"), out.join("lineitem:late.csv")]);
    let mut names: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, vec!["lineitem:late.csv", "t.csv"]);
    assert_eq!(std::fs::read_to_string(out.join("t.csv")).unwrap(), csv_text(&table()));
    std::fs::remove_dir_all(&dir).unwrap();
}
