//! Loading an input file stops when its stop flag is set: before the file is read, and
//! while a large file is being parsed.

use fox_kernel::InputRel;
use fox_runtime::load::{load_input_cols, parse_input_cols, Interner};
use fox_runtime::RuntimeError;
use fox_sema::core::{Column, Type};
use std::sync::atomic::{AtomicBool, Ordering};

fn rel(file: &str) -> InputRel {
    InputRel {
        name: "r".into(),
        columns: vec![
            Column {
                name: "x".into(),
                ty: Type::Int64,
            },
            Column {
                name: "s".into(),
                ty: Type::String,
            },
        ],
        file: file.into(),
        sep: ",".into(),
        key: Vec::new(),
        header: false,
    }
}

/// `rows` records `k,sK`, every one valid.
fn text(rows: usize) -> String {
    let mut t = String::with_capacity(rows * 16);
    for k in 0..rows {
        use std::fmt::Write;
        writeln!(t, "{k},s{}", k % 1000).unwrap();
    }
    t
}

#[test]
fn a_set_flag_stops_a_load_before_the_file_is_read() {
    let dir = std::env::temp_dir().join(format!("fox-load-cancel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The last line is bad: a load that went through the file would report it.
    std::fs::write(dir.join("r.csv"), text(200_000) + "x,y\n").unwrap();
    let input = rel("r.csv");
    let stop = AtomicBool::new(true);
    let r = load_input_cols(&dir, &input, &[true, true], &mut Interner::default(), &stop);
    assert!(matches!(r, Err(RuntimeError::Cancelled)), "{r:?}");
    // Unset, the same load reads the file to its bad line.
    stop.store(false, Ordering::SeqCst);
    let e = load_input_cols(&dir, &input, &[true, true], &mut Interner::default(), &stop).unwrap_err();
    assert!(e.to_string().contains(":200001: column 1 (`x`, int64)"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_flag_set_during_the_parse_stops_it() {
    // Seconds of parsing in a debug build, far more than the delay before the flag is set.
    let rows = 4_000_000;
    let t = text(rows);
    let input = rel("r.csv");
    let stop = AtomicBool::new(false);
    let started = AtomicBool::new(false);
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            while !started.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            stop.store(true, Ordering::SeqCst);
        });
        started.store(true, Ordering::SeqCst);
        parse_input_cols(&t, "r.csv", &input, &[true, true], &mut Interner::default(), &stop)
    });
    match r {
        Err(RuntimeError::Cancelled) => {}
        Ok(cols) => panic!("the parse ran to its end ({} rows)", cols[0].len()),
        Err(e) => panic!("{e}"),
    }
}
