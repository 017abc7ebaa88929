//! Built-in TPC-H data: the eight tables generated in memory with the `tpchgen` crate (the
//! same rows, in the same order, as the reference `dbgen`), at any scale factor.
//!
//! A table is generated in parts on all cores, straight into typed columns of the types the
//! program declares. A declared type that differs from the generator's (an `int64` key, a
//! `decimal(v, 4)` price) is converted exactly, or the field is rendered as `.tbl` text
//! and read by the same parser as `.tbl` files, so generated data and files behave
//! identically (a test checks that both give the same columns). Only the columns a plan
//! reads are kept.

use crate::load::{parse_field, try_push, ColumnBuilder, FieldError, Interner, LoadedCol};
use crate::RuntimeError;
use fox_kernel::InputRel;
use fox_sema::core::Type;
use rayon::prelude::*;
use std::fmt::Write as _;
use std::path::Path;
use tpchgen::generators::{
    CustomerGenerator, LineItemGenerator, NationGenerator, OrderGenerator, PartGenerator, PartSuppGenerator,
    RegionGenerator, SupplierGenerator,
};

/// The tables, in the order `dbgen` lists them.
pub const TABLES: [&str; 8] = [
    "part", "supplier", "partsupp", "customer", "orders", "lineitem", "nation", "region",
];

/// The number of columns of each table of [`TABLES`].
pub fn column_count(table: &str) -> Option<usize> {
    Some(match table {
        "part" => 9,
        "supplier" => 7,
        "partsupp" => 5,
        "customer" => 8,
        "orders" => 9,
        "lineitem" => 16,
        "nation" => 4,
        "region" => 3,
        _ => return None,
    })
}

/// Approximate rows of `table` at scale factor `sf` (for splitting the work and for
/// progress bars).
pub fn approx_rows(table: &str, sf: f64) -> u64 {
    let per_sf = match table {
        "part" => 200_000.0,
        "supplier" => 10_000.0,
        "partsupp" => 800_000.0,
        "customer" => 150_000.0,
        "orders" => 1_500_000.0,
        "lineitem" => 6_000_000.0,
        "nation" => return 25,
        "region" => return 5,
        _ => 0.0,
    };
    (per_sf * sf) as u64
}

/// Checks that `sf` is a usable scale factor.
pub fn check_scale(sf: f64) -> Result<(), String> {
    if !(sf.is_finite() && sf > 0.0) {
        return Err(format!("the TPC-H scale factor must be a positive number, not {sf}"));
    }
    // Keys are declared int32 in tpch/schema.logic; order keys reach 6,000,000 * SF.
    if sf > 1000.0 {
        return Err(format!(
            "scale factor {sf} is larger than 1000, the largest TPC-H defines"
        ));
    }
    Ok(())
}

/// How many parts `table` is generated in: about a million rows each.
fn parts(table: &str, sf: f64) -> i32 {
    let rows = approx_rows(table, sf);
    ((rows / 1_000_000) as i32).clamp(1, 100_000)
}

/// The bytes of `tpchgen`'s text pool (the text that comments are cut from): 300 MiB and
/// one sentence, allocated by the generators on first use, where failing aborts.
const TEXT_POOL_BYTES: usize = (300 << 20) + 256;

/// Builds the generators' text pool, once room for it has been allocated fallibly (and
/// freed again): running out of memory is then this error rather than an abort inside
/// `tpchgen`.
fn init_text_pool() -> Result<(), String> {
    static READY: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    if READY.get().is_none() {
        drop(crate::alloc::try_with_capacity::<u8>(
            TEXT_POOL_BYTES,
            "the text pool of the TPC-H generator",
        )?);
        tpchgen::text::TextPool::get_or_init_default();
        let _ = READY.set(());
    }
    Ok(())
}

/// More than the longest `.tbl` row of any table (about 400 bytes).
const MAX_ROW: usize = 1024;

/// The `.tbl` text of part `part` (1-based) of `parts` of `table`, or the out-of-memory
/// message.
fn render(table: &str, sf: f64, part: i32, parts: i32) -> Result<String, String> {
    let mut out = String::new();
    macro_rules! rows {
        ($gen:expr) => {
            for row in $gen.iter() {
                // Room for a whole row, so that writing it does not grow the text.
                if out.capacity() - out.len() < MAX_ROW {
                    crate::alloc::fallible(|| out.try_reserve(MAX_ROW)).map_err(|_| {
                        crate::alloc::out_of_memory(
                            (out.len() + MAX_ROW) as u128,
                            &format!("the `.tbl` text of TPC-H {table}"),
                        )
                    })?;
                }
                let _ = writeln!(out, "{row}");
            }
        };
    }
    match table {
        "part" => rows!(PartGenerator::new(sf, part, parts)),
        "supplier" => rows!(SupplierGenerator::new(sf, part, parts)),
        "partsupp" => rows!(PartSuppGenerator::new(sf, part, parts)),
        "customer" => rows!(CustomerGenerator::new(sf, part, parts)),
        "orders" => rows!(OrderGenerator::new(sf, part, parts)),
        "lineitem" => rows!(LineItemGenerator::new(sf, part, parts)),
        "nation" => rows!(NationGenerator::new(sf, part, parts)),
        "region" => rows!(RegionGenerator::new(sf, part, parts)),
        _ => {}
    }
    Ok(out)
}

/// A generated field before conversion to its declared type.
enum Val<'a> {
    Int(i64),
    /// A decimal of scale 2, unscaled.
    Dec(i64),
    /// Days since 1970-01-01.
    Date(i32),
    Str(&'a str),
    /// A string made by its `Display` (names, addresses, phone numbers).
    Fmt(&'a dyn std::fmt::Display),
}

/// Appends `v` to `col`.
fn push(col: &mut ColumnBuilder, v: Val, strings: &mut Interner, buf: &mut String) -> Result<(), FieldError> {
    let oom = FieldError::OutOfMemory;
    let what = col.values_name.as_str();
    match (v, col.ty, &mut col.values) {
        (Val::Int(x), Type::Int32, LoadedCol::I32(c)) => {
            let x = i32::try_from(x).map_err(|_| format!("`{x}` is out of the range of int32"))?;
            try_push(c, x, what).map_err(oom)?
        }
        (Val::Int(x), Type::Int64, LoadedCol::I64(c)) => try_push(c, x, what).map_err(oom)?,
        (Val::Dec(x), Type::Decimal(s), LoadedCol::I64(c)) if s >= 2 => {
            let x = 10i64
                .checked_pow(u32::from(s - 2))
                .and_then(|m| x.checked_mul(m))
                .ok_or_else(|| format!("`{}` does not fit decimal({s})", x))?;
            try_push(c, x, what).map_err(oom)?
        }
        (Val::Int(x), Type::Decimal(s), LoadedCol::I64(c)) => {
            let x = 10i64
                .checked_pow(u32::from(s))
                .and_then(|m| x.checked_mul(m))
                .ok_or_else(|| format!("`{x}` does not fit decimal({s})"))?;
            try_push(c, x, what).map_err(oom)?
        }
        (Val::Date(d), Type::Date, LoadedCol::I32(c)) => try_push(c, d, what).map_err(oom)?,
        (Val::Str(s), Type::String, LoadedCol::Str(c)) => {
            let id = strings.intern_for(s, &col.strings_name)?;
            try_push(c, id, what).map_err(oom)?
        }
        (v, _, _) => {
            // Any other declared type reads the field's `.tbl` text.
            buf.clear();
            let _ = match v {
                Val::Int(x) => write!(buf, "{x}"),
                Val::Dec(x) => write!(buf, "{}", tpchgen::decimal::TPCHDecimal(x)),
                Val::Date(d) => {
                    let (y, m, dd) = crate::load::civil_from_days(i64::from(d));
                    write!(buf, "{y:04}-{m:02}-{dd:02}")
                }
                Val::Str(s) => write!(buf, "{s}"),
                Val::Fmt(f) => write!(buf, "{f}"),
            };
            parse_field(buf, col, strings)?;
        }
    }
    Ok(())
}

/// Part `part` (1-based) of `parts` of `table`, as typed columns of `input`'s declared
/// types; the columns without `wanted[c]` stay empty. A bad value is an error naming its
/// row and column ([`FieldError::Bad`]).
fn part_columns(
    input: &InputRel,
    sf: f64,
    part: i32,
    parts: i32,
    wanted: &[bool],
    strings: &mut Interner,
) -> Result<Vec<LoadedCol>, FieldError> {
    let source = format!("TPC-H {}", input.name);
    let mut cols: Vec<ColumnBuilder> = input
        .columns
        .iter()
        .map(|c| ColumnBuilder::new(&c.name, c.ty, &source))
        .collect();
    // The part's rows, about: room for them is taken up front, so that the columns seldom
    // grow.
    let rows = (approx_rows(&input.name, sf) / parts.max(1) as u64) as usize;
    for (c, col) in cols.iter_mut().enumerate() {
        if wanted[c] {
            col.values
                .try_reserve_exact(rows + rows / 16, &col.values_name)
                .map_err(FieldError::OutOfMemory)?;
        }
    }
    let mut buf = String::new();
    let mut fmt = String::new();
    let mut row_no = 0u64;
    macro_rules! rows {
        ($gen:expr, |$r:ident| [$($f:expr),* $(,)?]) => {
            for $r in $gen.iter() {
                row_no += 1;
                let vals = [$($f),*];
                for (c, v) in vals.into_iter().enumerate() {
                    if !wanted[c] {
                        continue;
                    }
                    let v = match v {
                        Val::Fmt(f) => {
                            fmt.clear();
                            let _ = write!(fmt, "{f}");
                            Val::Str(fmt.as_str())
                        }
                        v => v,
                    };
                    push(&mut cols[c], v, strings, &mut buf).map_err(|e| match e {
                        FieldError::Bad(e) => FieldError::Bad(format!(
                            "row {row_no} of part {part}, column {} (`{}`, {}): {e}",
                            c + 1,
                            input.columns[c].name,
                            input.columns[c].ty
                        )),
                        oom => oom,
                    })?;
                }
            }
        };
    }
    let d = |x: tpchgen::decimal::TPCHDecimal| Val::Dec(x.into_inner());
    let t = |x: tpchgen::dates::TPCHDate| Val::Date(x.to_unix_epoch());
    match input.name.as_str() {
        "part" => rows!(PartGenerator::new(sf, part, parts), |r| [
            Val::Int(r.p_partkey),
            Val::Fmt(&r.p_name),
            Val::Fmt(&r.p_mfgr),
            Val::Fmt(&r.p_brand),
            Val::Str(r.p_type),
            Val::Int(i64::from(r.p_size)),
            Val::Str(r.p_container),
            d(r.p_retailprice),
            Val::Str(r.p_comment),
        ]),
        "supplier" => rows!(SupplierGenerator::new(sf, part, parts), |r| [
            Val::Int(r.s_suppkey),
            Val::Fmt(&r.s_name),
            Val::Fmt(&r.s_address),
            Val::Int(r.s_nationkey),
            Val::Fmt(&r.s_phone),
            d(r.s_acctbal),
            Val::Str(&r.s_comment),
        ]),
        "partsupp" => rows!(PartSuppGenerator::new(sf, part, parts), |r| [
            Val::Int(r.ps_partkey),
            Val::Int(r.ps_suppkey),
            Val::Int(i64::from(r.ps_availqty)),
            d(r.ps_supplycost),
            Val::Str(r.ps_comment),
        ]),
        "customer" => rows!(CustomerGenerator::new(sf, part, parts), |r| [
            Val::Int(r.c_custkey),
            Val::Fmt(&r.c_name),
            Val::Fmt(&r.c_address),
            Val::Int(r.c_nationkey),
            Val::Fmt(&r.c_phone),
            d(r.c_acctbal),
            Val::Str(r.c_mktsegment),
            Val::Str(r.c_comment),
        ]),
        "orders" => rows!(OrderGenerator::new(sf, part, parts), |r| [
            Val::Int(r.o_orderkey),
            Val::Int(r.o_custkey),
            Val::Str(r.o_orderstatus.as_str()),
            d(r.o_totalprice),
            t(r.o_orderdate),
            Val::Str(r.o_orderpriority),
            Val::Fmt(&r.o_clerk),
            Val::Int(i64::from(r.o_shippriority)),
            Val::Str(r.o_comment),
        ]),
        "lineitem" => rows!(LineItemGenerator::new(sf, part, parts), |r| [
            Val::Int(r.l_orderkey),
            Val::Int(r.l_partkey),
            Val::Int(r.l_suppkey),
            Val::Int(i64::from(r.l_linenumber)),
            Val::Int(r.l_quantity),
            d(r.l_extendedprice),
            d(r.l_discount),
            d(r.l_tax),
            Val::Str(r.l_returnflag),
            Val::Str(r.l_linestatus),
            t(r.l_shipdate),
            t(r.l_commitdate),
            t(r.l_receiptdate),
            Val::Str(r.l_shipinstruct),
            Val::Str(r.l_shipmode),
            Val::Str(r.l_comment),
        ]),
        "nation" => rows!(NationGenerator::new(sf, part, parts), |r| [
            Val::Int(r.n_nationkey),
            Val::Str(r.n_name),
            Val::Int(r.n_regionkey),
            Val::Str(r.n_comment),
        ]),
        "region" => rows!(RegionGenerator::new(sf, part, parts), |r| [
            Val::Int(r.r_regionkey),
            Val::Str(r.r_name),
            Val::Str(r.r_comment),
        ]),
        other => return Err(FieldError::Bad(format!("the TPC-H data set has no table `{other}`"))),
    }
    // Growth by doubling leaves up to half of each column unused; every part is held
    // until the last is generated, so give that back now.
    Ok(cols
        .into_iter()
        .map(|mut c| {
            c.values.shrink_to_fit();
            c.values
        })
        .collect())
}

/// Generates the TPC-H table `input.name` at scale factor `sf`, parsed with the declared
/// columns of `input`, keeping the columns with `wanted[c]`, in parts (in row order), each
/// with its string columns numbered by its own interner. `progress` is called with the
/// number of rows of each part as it finishes. When `stop` is set (read before each
/// part), it fails with [`RuntimeError::Cancelled`].
pub fn generate(
    input: &InputRel,
    sf: f64,
    wanted: &[bool],
    progress: &(dyn Fn(u64) + Sync),
    stop: &std::sync::atomic::AtomicBool,
) -> Result<Vec<(Vec<LoadedCol>, Interner)>, RuntimeError> {
    let table = input.name.as_str();
    let Some(ncols) = column_count(table) else {
        return Err(RuntimeError::Data {
            msg: format!(
                "`.input {table}`: the TPC-H data set has no table `{table}` (it has {})",
                TABLES.join(", ")
            ),
        });
    };
    if input.columns.len() != ncols {
        return Err(RuntimeError::Data {
            msg: format!(
                "`{table}` is declared with {} columns, but the TPC-H table `{table}` has {ncols} (see tpch/schema.logic)",
                input.columns.len()
            ),
        });
    }
    check_scale(sf).map_err(|msg| RuntimeError::Data { msg })?;
    init_text_pool().map_err(|msg| RuntimeError::Data { msg })?;
    let n = parts(table, sf);
    let label = format!("TPC-H {table} (SF {sf})");
    let keep = crate::alloc::load_reserve().map_err(|msg| RuntimeError::Data { msg })?;
    // The first failing part stops the others (in part order, as the results are).
    (1..=n)
        .into_par_iter()
        .map(|part| {
            if crate::cancel::is_set(stop) {
                return Err(RuntimeError::Cancelled);
            }
            let mut local = Interner::default();
            let cols = part_columns(input, sf, part, n, wanted, &mut local).map_err(|e| match e {
                FieldError::Bad(e) => RuntimeError::Data {
                    msg: format!("{label}: {e}"),
                },
                FieldError::OutOfMemory(msg) => RuntimeError::Data { msg },
            })?;
            progress(cols.iter().map(LoadedCol::len).max().unwrap_or(0) as u64);
            crate::alloc::check_headroom(keep).map_err(|e| RuntimeError::Data {
                msg: format!(
                    "{label}: {e} while generating the tables; the columns the queries read at this scale factor need more memory than this machine has"
                ),
            })?;
            Ok((cols, local))
        })
        .collect()
}

/// Writes the eight tables at scale factor `sf` as `.tbl` files into `dir` (created), all
/// or none (see [`crate::outfile::OutputFiles`]). `progress` gets the rows of each part as
/// it is written.
pub fn write_tbl(dir: &Path, sf: f64, progress: &(dyn Fn(&str, u64) + Sync)) -> Result<(), RuntimeError> {
    check_scale(sf).map_err(|msg| RuntimeError::Data { msg })?;
    init_text_pool().map_err(|msg| RuntimeError::Data { msg })?;
    let created = !dir.exists();
    std::fs::create_dir_all(dir).map_err(|e| RuntimeError::Io {
        msg: format!("cannot create the output directory `{}`: {e}", dir.display()),
    })?;
    let mut files = crate::outfile::OutputFiles::new();
    for table in TABLES {
        files.add(dir.join(format!("{table}.tbl")), move |w| {
            let n = parts(table, sf);
            // Parts are rendered in parallel in batches and written in order.
            let batch = rayon::current_num_threads().max(1) as i32 * 2;
            let mut first = 1;
            while first <= n {
                let last = (first + batch - 1).min(n);
                let texts: Vec<String> = (first..=last)
                    .into_par_iter()
                    .map(|p| render(table, sf, p, n))
                    .collect::<Result<_, String>>()
                    .map_err(|msg| std::io::Error::new(std::io::ErrorKind::OutOfMemory, msg))?;
                for t in texts {
                    w.write_all(t.as_bytes())?;
                    progress(table, t.bytes().filter(|&b| b == b'\n').count() as u64);
                }
                first = last + 1;
            }
            Ok(())
        });
    }
    if let Err(e) = files.commit() {
        if created {
            let _ = std::fs::remove_dir(dir);
        }
        return Err(e.into());
    }
    Ok(())
}
