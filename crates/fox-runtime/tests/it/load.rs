//! Reading CSV and TBL input: typed fields, quoting, and an error naming file, line and
//! column for every kind of bad row.

use fox_kernel::InputRel;
use fox_runtime::load::{parse_date, parse_decimal, parse_input, Interner, LoadedCol};
use fox_runtime::RuntimeError;
use fox_sema::core::{Column, Type};

fn rel(sep: &str, cols: &[(&str, Type)]) -> InputRel {
    input("r.csv", sep, cols)
}

/// The input `r` read from `file` (separated by `sep`) with the columns `cols`.
pub(crate) fn input(file: &str, sep: &str, cols: &[(&str, Type)]) -> InputRel {
    InputRel {
        name: "r".into(),
        columns: cols
            .iter()
            .map(|(n, t)| Column {
                name: n.to_string(),
                ty: *t,
            })
            .collect(),
        file: file.into(),
        sep: sep.into(),
        key: Vec::new(),
        header: false,
    }
}

fn parse(text: &str, sep: &str, cols: &[(&str, Type)]) -> Result<(Vec<LoadedCol>, Vec<String>), String> {
    let mut strings = Interner::default();
    parse_input(text, "data/r.csv", &rel(sep, cols), &mut strings)
        .map(|c| (c, strings.strings().iter().map(String::from).collect()))
        .map_err(|e| match e {
            RuntimeError::Data { msg } => msg,
            other => panic!("not a data error: {other:?}"),
        })
}

fn err(text: &str, sep: &str, cols: &[(&str, Type)]) -> String {
    parse(text, sep, cols).expect_err("the input must be rejected")
}

#[test]
fn typed_fields_of_every_type() {
    let cols = [
        ("a", Type::Int32),
        ("b", Type::Int64),
        ("c", Type::Decimal(2)),
        ("d", Type::Float64),
        ("e", Type::String),
        ("f", Type::Date),
        ("g", Type::Bool),
    ];
    let (c, strings) = parse(
        "1,-9000000000,12.3,1.5e3,hello,1998-09-02,true\n-2,+7,-0.05,-0.25,,1970-01-01,false\n",
        ",",
        &cols,
    )
    .unwrap();
    assert_eq!(c[0], LoadedCol::I32(vec![1, -2]));
    assert_eq!(c[1], LoadedCol::I64(vec![-9_000_000_000, 7]));
    assert_eq!(c[2], LoadedCol::I64(vec![1230, -5]));
    assert_eq!(c[3], LoadedCol::F64(vec![1500.0, -0.25]));
    assert_eq!(c[4], LoadedCol::Str(vec![0, 1]));
    assert_eq!(strings, vec!["hello".to_string(), String::new()]);
    assert_eq!(c[5], LoadedCol::I32(vec![10471, 0]));
    assert_eq!(c[6], LoadedCol::Bool(vec![1, 0]));
}

#[test]
fn tbl_with_trailing_separator_and_crlf() {
    let cols = [("k", Type::Int64), ("m", Type::String)];
    let (c, strings) = parse("1|AIR|\r\n2|\"RAIL\"|\n", "|", &cols).unwrap();
    assert_eq!(c[0], LoadedCol::I64(vec![1, 2]));
    // TBL fields are raw: quotes are part of the text.
    assert_eq!(strings, vec!["AIR".to_string(), "\"RAIL\"".to_string()]);
    // Without the trailing separator too, and no newline at the end of the file.
    let (c, _) = parse("1|AIR\n2|RAIL", "|", &cols).unwrap();
    assert_eq!(c[0], LoadedCol::I64(vec![1, 2]));
}

#[test]
fn csv_quoting_per_rfc_4180() {
    let cols = [("s", Type::String), ("n", Type::Int32)];
    let (c, strings) = parse(
        "\"a, b\",1\n\"say \"\"hi\"\"\",2\n\"two\nlines\",3\nplain,4,\n",
        ",",
        &cols,
    )
    .unwrap();
    assert_eq!(c[1], LoadedCol::I32(vec![1, 2, 3, 4]));
    assert_eq!(strings, vec!["a, b", "say \"hi\"", "two\nlines", "plain"]);
    // Line numbers count the lines of a quoted line break.
    let e = err("\"two\nlines\",3\nx,y\n", ",", &cols);
    assert!(e.starts_with("data/r.csv:3: column 2 (`n`, int32)"), "{e}");
}

#[test]
fn wrong_column_count_names_line() {
    let cols = [("x", Type::Int32), ("y", Type::Int32)];
    let e = err("1,2\n3\n", ",", &cols);
    assert_eq!(e, "data/r.csv:2: expected 2 fields (the columns of `r`), found 1");
    let e = err("1,2\n3,4,5\n", ",", &cols);
    assert!(e.contains("data/r.csv:2:") && e.contains("found 3"), "{e}");
    // One trailing separator is accepted, two are not.
    let e = err("1|2||\n", "|", &cols);
    assert!(e.contains("data/r.csv:1:") && e.contains("found 4"), "{e}");
}

#[test]
fn bad_numbers_name_line_column_and_type() {
    let cols = [("x", Type::Int32), ("y", Type::Int32)];
    assert_eq!(
        err("1,2\n3,abc\n", ",", &cols),
        "data/r.csv:2: column 2 (`y`, int32): `abc` is not an int32"
    );
    let e = err("2147483648,1\n", ",", &cols);
    assert!(
        e.contains("data/r.csv:1: column 1 (`x`, int32)") && e.contains("out of the range"),
        "{e}"
    );
    assert!(parse("-2147483648,2147483647\n", ",", &cols).is_ok());
    let e = err("1, 2\n", ",", &cols);
    assert!(e.contains("column 2") && e.contains("` 2` is not an int32"), "{e}");
    let e = err("1,2.0\n", ",", &cols);
    assert!(e.contains("column 2"), "{e}");
    let e = err(
        "99999999999999999999999,1\n",
        ",",
        &[("x", Type::Int64), ("y", Type::Int64)],
    );
    assert!(e.contains("out of the range of int64"), "{e}");
    let e = err("x\n", ",", &[("f", Type::Float64)]);
    assert!(e.contains("column 1 (`f`, float64): `x` is not a float64"), "{e}");
}

#[test]
fn decimals_are_exact_and_checked() {
    assert_eq!(parse_decimal("12.3", 2), Ok(1230));
    assert_eq!(parse_decimal("-1.25", 2), Ok(-125));
    assert_eq!(parse_decimal("+5", 2), Ok(500));
    assert_eq!(parse_decimal("0.0825", 4), Ok(825));
    assert_eq!(parse_decimal(".5", 1), Ok(5));
    assert_eq!(parse_decimal("7", 0), Ok(7));
    // At most 18 digits, fraction digits (padded to the scale) included.
    assert_eq!(parse_decimal("9999999999999999.99", 2), Ok(999_999_999_999_999_999));
    assert_eq!(parse_decimal("-9999999999999999.9", 2), Ok(-999_999_999_999_999_990));
    assert_eq!(parse_decimal("000000000000000000001.5", 2), Ok(150));
    for big in [
        "92233720368547758.07",
        "10000000000000000",
        "99999999999999999.9",
        "1",
        "-1",
    ] {
        let scale = if big.len() == 1 || big.len() == 2 { 18 } else { 2 };
        assert!(
            parse_decimal(big, scale).unwrap_err().contains(&format!(
                "has more than 18 digits at scale {scale}; a decimal({scale}) holds at most 18"
            )),
            "{big}"
        );
    }
    assert_eq!(parse_decimal("0.5", 18), Ok(500_000_000_000_000_000));
    for bad in ["", "-", ".", "1.2.3", "1e5", "abc", "1,5", " 1.5"] {
        assert!(parse_decimal(bad, 2).is_err(), "{bad:?}");
    }
    let cols = [("k", Type::Int32), ("p", Type::Decimal(2))];
    assert_eq!(
        err("1,1.50\n2,1.505\n", ",", &cols),
        "data/r.csv:2: column 2 (`p`, decimal(2)): `1.505` has 3 fraction digits; the column has scale 2"
    );
    assert_eq!(
        err("1,x1\n", ",", &cols),
        "data/r.csv:1: column 2 (`p`, decimal(2)): `x1` is not a decimal(2)"
    );
    assert_eq!(
        err("1,1.50\n2,9999999999999999.99\n3,92233720368547758.07\n", ",", &cols),
        "data/r.csv:3: column 2 (`p`, decimal(2)): `92233720368547758.07` has more than 18 digits at scale 2; a \
         decimal(2) holds at most 18"
    );
}

#[test]
fn dates_are_validated() {
    assert_eq!(parse_date("1970-01-01"), Some(0));
    assert_eq!(parse_date("1996-02-29"), Some(9555));
    assert_eq!(parse_date("2000-02-29"), Some(11016));
    for bad in [
        "1995-02-29",
        "1900-02-29",
        "1998-13-01",
        "1998-00-10",
        "1998-04-31",
        "98-09-02",
        "1998/09/02",
        "1998-9-2",
    ] {
        assert_eq!(parse_date(bad), None, "{bad}");
    }
    let e = err("1998-02-30\n", ",", &[("d", Type::Date)]);
    assert_eq!(
        e,
        "data/r.csv:1: column 1 (`d`, date): `1998-02-30` is not a date (YYYY-MM-DD)"
    );
}

#[test]
fn bools_are_true_or_false() {
    let e = err("true\nTRUE\n", ",", &[("b", Type::Bool)]);
    assert_eq!(
        e,
        "data/r.csv:2: column 1 (`b`, bool): `TRUE` is not a bool (true or false)"
    );
}

#[test]
fn unterminated_quote_names_its_line() {
    let cols = [("s", Type::String), ("n", Type::Int32)];
    let e = err("a,1\n\"open,2\nb,3\n", ",", &cols);
    assert!(e.starts_with("data/r.csv:2: unterminated quoted field"), "{e}");
    let e = err("\"a\"x,1\n", ",", &cols);
    assert!(
        e.starts_with("data/r.csv:1: column 1: unexpected text after a closing quote"),
        "{e}"
    );
}

#[test]
fn missing_file_names_path_and_input() {
    let mut strings = Interner::default();
    let dir = std::path::Path::new("no-such-dir-fox");
    let e = fox_runtime::load::load_input(dir, &rel(",", &[("x", Type::Int32)]), &mut strings).unwrap_err();
    assert_eq!(
        e.to_string(),
        "cannot read `no-such-dir-fox/r.csv` (input of `r`): No such file"
    );
}

#[test]
fn empty_file_is_an_empty_relation() {
    let (c, _) = parse("", ",", &[("x", Type::Int32)]).unwrap();
    assert_eq!(c[0], LoadedCol::I32(vec![]));
}

#[test]
fn keys_are_checked() {
    let cols = [("k", Type::Int32), ("j", Type::Int32), ("s", Type::String)];
    let mut input = rel(",", &cols);
    input.key = vec![0, 1];
    let check = |text: &str| {
        let mut strings = Interner::default();
        let loaded = parse_input(text, "data/r.csv", &input, &mut strings).unwrap();
        fox_runtime::load::check_key("data/r.csv", &input, &loaded, &[true, true, true])
    };
    // Increasing, unordered, and two rows that share (k, j) though they differ in s.
    assert!(check("1,1,a\n1,2,a\n2,1,a\n").is_ok());
    assert!(check("2,1,a\n1,2,a\n1,1,a\n").is_ok());
    let e = check("1,1,a\n2,1,b\n1,1,c\n").unwrap_err().to_string();
    assert!(e.contains("data/r.csv: rows 1 and 3 have the same key (k, j)"), "{e}");
    assert!(check("").is_ok());
}

fn parse_with(text: &str, input: &InputRel) -> Result<(Vec<LoadedCol>, Vec<String>), String> {
    let mut strings = Interner::default();
    parse_input(text, "data/r.csv", input, &mut strings)
        .map(|c| (c, strings.strings().iter().map(String::from).collect()))
        .map_err(|e| e.to_string())
}

fn with_header(sep: &str, cols: &[(&str, Type)]) -> InputRel {
    InputRel {
        header: true,
        ..rel(sep, cols)
    }
}

#[test]
fn foxs_own_csv_output_reads_back_with_header() {
    let columns = vec![
        Column {
            name: "name".into(),
            ty: Type::String,
        },
        Column {
            name: "price".into(),
            ty: Type::Decimal(2),
        },
        Column {
            name: "day".into(),
            ty: Type::Date,
        },
    ];
    let rows = vec![
        vec![
            fox_sema::core::Value::String("bolt, steel".into()),
            fox_sema::core::Value::Decimal {
                unscaled: 1999,
                scale: 2,
            },
            fox_sema::core::Value::Date(10471),
        ],
        vec![
            fox_sema::core::Value::String("say \"hi\"".into()),
            fox_sema::core::Value::Decimal { unscaled: -5, scale: 2 },
            fox_sema::core::Value::Date(0),
        ],
    ];
    let t = fox_runtime::OutputTable::from_rows("r", columns.clone(), rows);
    let mut csv = Vec::new();
    fox_runtime::write_csv_to(&t, &mut csv).unwrap();
    let csv = String::from_utf8(csv).unwrap();
    assert!(csv.starts_with("name,price,day\n"), "{csv}");
    let cols = [("name", Type::String), ("price", Type::Decimal(2)), ("day", Type::Date)];
    let (c, strings) = parse_with(&csv, &with_header(",", &cols)).unwrap();
    assert_eq!(c[1], LoadedCol::I64(vec![1999, -5]));
    assert_eq!(c[2], LoadedCol::I32(vec![10471, 0]));
    assert_eq!(strings, vec!["bolt, steel".to_string(), "say \"hi\"".to_string()]);
    // Without `header`, the header is a bad first row, with a hint.
    let e = parse_with(&csv, &rel(",", &cols)).unwrap_err();
    assert!(
        e.starts_with("data/r.csv:1: column 2 (`price`, decimal(2)): `price` is not a decimal(2)"),
        "{e}"
    );
    assert!(
        e.contains("the first line looks like a header: add `header` to the .input"),
        "{e}"
    );
}

#[test]
fn header_names_are_checked_against_the_declaration() {
    let cols = [("x", Type::Int32), ("y", Type::Int32)];
    let h = with_header(",", &cols);
    // The file's own names for the columns are accepted, and so is a trailing separator.
    let (c, _) = parse_with("src,dst\n1,2\n", &h).unwrap();
    assert_eq!(c[0], LoadedCol::I32(vec![1]));
    let (c, _) = parse_with("x|y|\n1|2|\n", &with_header("|", &cols)).unwrap();
    assert_eq!(c[1], LoadedCol::I32(vec![2]));
    // A header alone, and an empty file, are an empty relation.
    assert_eq!(parse_with("x,y\n", &h).unwrap().0[0], LoadedCol::I32(vec![]));
    assert_eq!(parse_with("", &h).unwrap().0[0], LoadedCol::I32(vec![]));
    // Another number of names, or the declared names in another order, are errors.
    let e = parse_with("x,y,z\n1,2\n", &h).unwrap_err();
    assert_eq!(e, "data/r.csv:1: the header has 3 names, but `r` has 2 columns (x, y)");
    let e = parse_with("x\n1,2\n", &h).unwrap_err();
    assert_eq!(e, "data/r.csv:1: the header has 1 name, but `r` has 2 columns (x, y)");
    let e = parse_with("y,x\n1,2\n", &h).unwrap_err();
    assert!(
        e.starts_with("data/r.csv:1: the header names column 1 `y`, but column 1 of `r` is `x` (`y` is column 2)"),
        "{e}"
    );
    // Data rows keep their line numbers.
    let e = parse_with("x,y\n1,2\n3,z\n", &h).unwrap_err();
    assert!(e.starts_with("data/r.csv:3: column 2"), "{e}");
}

#[test]
fn a_header_looking_first_line_gets_a_hint() {
    let cols = [("src", Type::Int32), ("dst", Type::Int32)];
    for text in ["src,dst\n1,2\n", "Source Node,Target\n1,2\n", "src,dst,weight\n1,2\n"] {
        let e = err(text, ",", &cols);
        assert!(e.starts_with("data/r.csv:1: "), "{e}");
        assert!(
            e.contains("help: the first line looks like a header: add `header` to the .input (`.input r … header.`)"),
            "{e}"
        );
    }
    // Not for data that fails to parse, nor for a later line.
    for text in ["1,x2\n", "1,2\nsrc,dst\n", "1.5,2\n"] {
        let e = err(text, ",", &cols);
        assert!(!e.contains("header"), "{e}");
    }
}

#[test]
fn blank_lines_at_the_end_are_accepted() {
    let cols = [("x", Type::Int32), ("y", Type::String)];
    let (c, strings) = parse("1,a\n2,b\n\n\n", ",", &cols).unwrap();
    assert_eq!(c[0], LoadedCol::I32(vec![1, 2]));
    assert_eq!(strings, vec!["a", "b"]);
    let (c, _) = parse("1|a|\r\n  \r\n\t\n", "|", &cols).unwrap();
    assert_eq!(c[0], LoadedCol::I32(vec![1]));
    // The last line keeps its spaces; a blank line inside the file is still an error.
    let (_, strings) = parse("1,a  ", ",", &cols).unwrap();
    assert_eq!(strings, vec!["a  "]);
    let e = err("1,a\n\n2,b\n", ",", &cols);
    assert_eq!(e, "data/r.csv:2: expected 2 fields (the columns of `r`), found 1");
    // For one string column an empty line is the empty string, as Fox writes it.
    let (c, strings) = parse("a\n\n", ",", &[("s", Type::String)]).unwrap();
    assert_eq!(c[0], LoadedCol::Str(vec![0, 1]));
    assert_eq!(strings, vec!["a", ""]);
    let (c, _) = parse("1\n2\n\n", ",", &[("n", Type::Int64)]).unwrap();
    assert_eq!(c[0], LoadedCol::I64(vec![1, 2]));
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("fox-load-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn load_file(dir: &std::path::Path, file: &str, sep: &str, cols: &[(&str, Type)]) -> Result<Vec<LoadedCol>, String> {
    let mut input = rel(sep, cols);
    input.file = file.into();
    let mut strings = Interner::default();
    fox_runtime::load::load_input(dir, &input, &mut strings).map_err(|e| e.to_string())
}

#[test]
fn gzip_files_are_read_as_their_text() {
    use std::io::Write;
    let d = temp_dir("gz");
    let gz = |text: &str| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(text.as_bytes()).unwrap();
        e.finish().unwrap()
    };
    std::fs::write(d.join("r.csv.gz"), gz("1,2\n3,4\n")).unwrap();
    std::fs::write(d.join("r.tbl.gz"), gz("1|2|\n3|4|\n")).unwrap();
    let cols = [("x", Type::Int32), ("y", Type::Int32)];
    for (file, sep) in [("r.csv.gz", ","), ("r.tbl.gz", "|")] {
        let c = load_file(&d, file, sep, &cols).unwrap();
        assert_eq!(c[1], LoadedCol::I32(vec![2, 4]), "{file}");
    }
    // Errors name the compressed file and the line in its text.
    std::fs::write(d.join("bad.csv.gz"), gz("1,2\n3,x\n")).unwrap();
    let e = load_file(&d, "bad.csv.gz", ",", &cols).unwrap_err();
    assert!(e.contains("bad.csv.gz:2: column 2"), "{e}");
    let mut broken = gz("1,2\n3,4\n");
    broken.truncate(broken.len() - 6);
    std::fs::write(d.join("broken.csv.gz"), broken).unwrap();
    let e = load_file(&d, "broken.csv.gz", ",", &cols).unwrap_err();
    assert!(
        e.contains("broken.csv.gz") && e.contains("the gzip data is damaged"),
        "{e}"
    );
}

#[test]
fn files_that_are_not_text_are_named_for_what_they_are() {
    let d = temp_dir("binary");
    let cols = [("x", Type::Int32)];
    std::fs::write(d.join("r.dat"), b"PAR1\x15\x04\x15\x00rest").unwrap();
    let e = load_file(&d, "r.dat", ",", &cols).unwrap_err();
    assert!(e.starts_with("`"), "{e}");
    assert!(
        e.contains("r.dat` (input of `r`) is a Parquet file (name it `.parquet` to read it as one), not CSV text"),
        "{e}"
    );
    // Named `.parquet`, it is read as Parquet, and these bytes are none.
    std::fs::write(d.join("r.parquet"), b"PAR1\x15\x04\x15\x00rest").unwrap();
    let e = load_file(&d, "r.parquet", ",", &cols).unwrap_err();
    assert!(
        e.contains("r.parquet` (input of `r`) is not a readable Parquet file"),
        "{e}"
    );
    std::fs::write(d.join("r.csv"), b"1\n2\n\x00\x01\x02").unwrap();
    let e = load_file(&d, "r.csv", ",", &cols).unwrap_err();
    assert!(
        e.contains("is binary data (a NUL byte at offset 4), not CSV text"),
        "{e}"
    );
    std::fs::write(d.join("latin1.csv"), b"1\n2\ncaf\xe9\n").unwrap();
    let e = load_file(&d, "latin1.csv", ",", &[("s", Type::String)]).unwrap_err();
    assert!(e.contains("latin1.csv:3: the file is not UTF-8 text"), "{e}");
    // A UTF-8 byte order mark is not part of the first field.
    std::fs::write(d.join("bom.csv"), b"\xef\xbb\xbf7\n").unwrap();
    assert_eq!(
        load_file(&d, "bom.csv", ",", &cols).unwrap()[0],
        LoadedCol::I32(vec![7])
    );
}

#[cfg(unix)]
#[test]
fn a_fifo_or_a_folder_is_rejected_without_blocking() {
    let d = temp_dir("fifo");
    let fifo = d.join("r.csv");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    std::fs::create_dir(d.join("sub.csv")).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let dir = d.clone();
    std::thread::spawn(move || {
        let cols = [("x", Type::Int32)];
        let _ = tx.send((
            load_file(&dir, "r.csv", ",", &cols),
            load_file(&dir, "sub.csv", ",", &cols),
        ));
    });
    // Opening a FIFO that has no writer would block forever.
    let (fifo_err, dir_err) = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("reading a FIFO input must not block");
    let e = fifo_err.unwrap_err();
    assert!(
        e.contains("r.csv` (input of `r`): it is a FIFO (named pipe), not a regular file"),
        "{e}"
    );
    let e = dir_err.unwrap_err();
    assert!(e.contains("it is a folder, not a regular file"), "{e}");
}
