//! Reading input relations from CSV, TSV and TBL files into typed host columns.
//!
//! Fields follow the declared columns; a first line of column names is skipped (and
//! checked) when the `.input` says `header`. With the separator `,` a field may be quoted
//! as in RFC 4180 (`"a, b"`, `"say ""hi"""`, line breaks inside quotes); with any other
//! separator (TSV, TBL) fields are raw text. A trailing separator at the end of a line and
//! blank lines at the end of the file are accepted. Gzip-compressed files are read as
//! their text. Only regular files are read, and a file that is not text is rejected
//! before parsing. Every error names the file, the line and the column.
//!
//! Every buffer whose size comes from the data (the file's bytes, its decompressed text,
//! the columns, the strings, a quoted field with escaped quotes, the key check's order)
//! is allocated fallibly: running out of memory is the error `out of memory: cannot
//! allocate N for WHAT`, WHAT naming the file and the column (a quoted field's error is
//! located at its line and column instead). A load reads its stop flag
//! (see [`crate::cancel`]) once per block of the file read or checked and once per
//! [`RECORDS_PER_CHECK`] records parsed, and stops with [`RuntimeError::Cancelled`].

use crate::alloc::{fallible, out_of_memory, try_reserve, try_with_capacity};
use crate::cancel::is_set;
pub use crate::strings::Interner;
use crate::RuntimeError;
use fox_kernel::InputRel;
use fox_sema::core::{Type, MAX_DECIMAL};
use std::path::Path;
use std::sync::atomic::AtomicBool;

/// The bytes of a file read, or of its text checked, between two reads of the stop flag.
const BLOCK: usize = 64 << 20;

/// The records parsed between two reads of the stop flag.
pub const RECORDS_PER_CHECK: usize = 1024;

/// A field that was not stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldError {
    /// Text that is no value of the column's type; the caller locates it.
    Bad(String),
    /// An allocation that failed: the whole message, `out of memory: cannot allocate N
    /// for WHAT`.
    OutOfMemory(String),
}

impl FieldError {
    /// The message, whichever the kind.
    pub fn into_message(self) -> String {
        match self {
            FieldError::Bad(m) | FieldError::OutOfMemory(m) => m,
        }
    }
}

impl From<String> for FieldError {
    fn from(msg: String) -> FieldError {
        FieldError::Bad(msg)
    }
}

/// A column being loaded: its declared type, its values so far, and what its buffers
/// are called in out-of-memory messages (together, so that the parser passes one
/// pointer per field).
pub(crate) struct ColumnBuilder {
    pub(crate) ty: Type,
    pub(crate) values: LoadedCol,
    /// `the column `x` of SOURCE`: the values.
    pub(crate) values_name: String,
    /// `the strings of the column `x` of SOURCE`: the strings it adds to the interner.
    pub(crate) strings_name: String,
}

impl ColumnBuilder {
    /// An empty column `column` of type `ty` of `source` (`` `data/r.csv` ``,
    /// `TPC-H lineitem`).
    pub(crate) fn new(column: &str, ty: Type, source: &str) -> ColumnBuilder {
        ColumnBuilder {
            ty,
            values: LoadedCol::new(ty),
            values_name: format!("the column `{column}` of {source}"),
            strings_name: format!("the strings of the column `{column}` of {source}"),
        }
    }
}

/// Appends `x` to `v`, growing it as `Vec::push` does, or the out-of-memory message
/// naming `what`.
#[inline]
pub(crate) fn try_push<T>(v: &mut Vec<T>, x: T, what: &str) -> Result<(), String> {
    if v.len() == v.capacity() {
        try_reserve(v, 1, what)?;
    }
    v.push(x);
    Ok(())
}

/// `Err(Cancelled)` when `stop` is set.
pub(crate) fn check_stop_flag(stop: &AtomicBool) -> Result<(), RuntimeError> {
    check_stop(stop)
}

/// `Err(Cancelled)` when `stop` is set.
fn check_stop(stop: &AtomicBool) -> Result<(), RuntimeError> {
    if is_set(stop) {
        Err(RuntimeError::Cancelled)
    } else {
        Ok(())
    }
}

/// The longest field text an error message quotes whole.
const SHOWN_FIELD: usize = 100;

/// The text of a field for a message: whole, or its start and `…` when it is long.
fn shown(field: &str) -> std::borrow::Cow<'_, str> {
    if field.len() <= SHOWN_FIELD {
        return std::borrow::Cow::Borrowed(field);
    }
    let mut end = SHOWN_FIELD - 20;
    while !field.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}… ({} bytes)", &field[..end], field.len()))
}

/// A hash map with [`FxHasher`].
pub type FxHashMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<FxHasher>>;

/// A fast hash for interned strings (FxHash's multiply-rotate over 8-byte words); the
/// keys are data, not adversarial input, and SipHash cost a tenth of loading time.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut h = self.0;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            h = (h.rotate_left(5) ^ w).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            h = (h.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
        self.0 = h;
    }

    fn write_u8(&mut self, b: u8) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A loaded column. String columns hold interner ids until they are renumbered into
/// dictionary codes.
#[derive(Debug, Clone, PartialEq)]
pub enum LoadedCol {
    I32(Vec<i32>),
    I64(Vec<i64>),
    F64(Vec<f64>),
    Str(Vec<u32>),
    Bool(Vec<u8>),
}

impl LoadedCol {
    pub(crate) fn new(ty: Type) -> LoadedCol {
        match ty {
            Type::Int32 | Type::Date => LoadedCol::I32(Vec::new()),
            // Input columns are never wide (the checker keeps them at 18 digits).
            Type::Int64 | Type::Decimal(_) | Type::WideDecimal(_) => LoadedCol::I64(Vec::new()),
            Type::Float64 => LoadedCol::F64(Vec::new()),
            Type::String => LoadedCol::Str(Vec::new()),
            Type::Bool => LoadedCol::Bool(Vec::new()),
        }
    }
}

/// Reads the file of `input` from `data_dir` into one column per declared column.
pub fn load_input(data_dir: &Path, input: &InputRel, strings: &mut Interner) -> Result<Vec<LoadedCol>, RuntimeError> {
    load_input_cols(
        data_dir,
        input,
        &vec![true; input.columns.len()],
        strings,
        crate::cancel::never(),
    )
}

/// [`load_input`] keeping only the columns with `wanted[c]` (the others are checked for
/// their count of fields but not parsed, and come back empty); then checks the key.
/// When `stop` is set (read per block and per [`RECORDS_PER_CHECK`] records), it fails
/// with [`RuntimeError::Cancelled`].
pub fn load_input_cols(
    data_dir: &Path,
    input: &InputRel,
    wanted: &[bool],
    strings: &mut Interner,
    stop: &AtomicBool,
) -> Result<Vec<LoadedCol>, RuntimeError> {
    load_input_cols_reporting(data_dir, input, wanted, strings, stop, &|_| {}, &|_| {})
}

/// [`load_input_cols`], telling `rows_total`, once before any `advance`, the number of
/// rows of the file when it is known before parsing (a Parquet file's; 0 for a text file)
/// and `advance` the rows read as they are read (a text file's all at once at the end).
pub fn load_input_cols_reporting(
    data_dir: &Path,
    input: &InputRel,
    wanted: &[bool],
    strings: &mut Interner,
    stop: &AtomicBool,
    rows_total: &dyn Fn(u64),
    advance: &(dyn Fn(u64) + Sync),
) -> Result<Vec<LoadedCol>, RuntimeError> {
    let path = data_dir.join(&input.file);
    let shown = path.display().to_string();
    if crate::parquet_input::is_parquet(&input.file) {
        let cols = crate::parquet_input::load_parquet_cols(&path, input, wanted, strings, stop, rows_total, advance)?;
        check_stop(stop)?;
        check_key(&shown, input, &cols, wanted)?;
        return Ok(cols);
    }
    rows_total(0);
    let bytes = read_input_file(&path, &shown, &input.name, stop)?;
    let text = checked_text(&bytes, &shown, &input.name, stop)?;
    let cols = parse_input_cols(text, &shown, input, wanted, strings, stop)?;
    drop(bytes);
    check_stop(stop)?;
    check_key(&shown, input, &cols, wanted)?;
    advance(cols.iter().map(LoadedCol::len).max().unwrap_or(0) as u64);
    Ok(cols)
}

/// The bytes of an input file, decompressed when it is gzip (`.csv.gz`, `.tbl.gz`: known
/// by the gzip magic number, whatever the name). Only regular files are read: a FIFO
/// with no writer would block forever, and a device or a socket is no data file. The
/// file is read (and decompressed) in blocks, with `stop` read before each.
pub fn read_input_file(path: &Path, shown: &str, pred: &str, stop: &AtomicBool) -> Result<Vec<u8>, RuntimeError> {
    let fail = |why: String| RuntimeError::Data {
        msg: format!("cannot read `{shown}` (input of `{pred}`): {why}"),
    };
    let oom = |msg: String| RuntimeError::Data { msg };
    let mut file = open_regular_file(path, shown, pred)?;
    let meta = file.metadata().map_err(|e| fail(io_reason(&e)))?;
    // One byte more than the file: reading it finds the end without growing the buffer.
    let size = usize::try_from(meta.len()).unwrap_or(usize::MAX).saturating_add(1);
    let mut bytes: Vec<u8> = try_with_capacity(size, &format!("the file `{shown}`")).map_err(oom)?;
    let whole = if size > PAR_READ_MIN && rayon::current_num_threads() > 1 {
        read_in_parallel(&file, size - 1, &mut bytes, stop)?.map_err(|e| fail(io_reason(&e)))?
    } else {
        false
    };
    if !whole {
        read_blocks(&mut file, &mut bytes, stop, &format!("the file `{shown}`"))?.map_err(|e| fail(io_reason(&e)))?;
    }
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        read_blocks(
            &mut flate2::read::MultiGzDecoder::new(bytes.as_slice()),
            &mut out,
            stop,
            &format!("the decompressed text of `{shown}`"),
        )?
        .map_err(|e| fail(format!("the gzip data is damaged ({e})")))?;
        return Ok(out);
    }
    Ok(bytes)
}

/// The input file at `path`, opened for reading; an error unless it is a regular file
/// (see [`read_input_file`]).
pub(crate) fn open_regular_file(path: &Path, shown: &str, pred: &str) -> Result<std::fs::File, RuntimeError> {
    let fail = |why: String| RuntimeError::Data {
        msg: format!("cannot read `{shown}` (input of `{pred}`): {why}"),
    };
    let file = open_nonblocking(path).map_err(|e| fail(io_reason(&e)))?;
    let meta = file.metadata().map_err(|e| fail(io_reason(&e)))?;
    if !meta.is_file() {
        return Err(fail(format!(
            "it is {}, not a regular file; inputs are read from files",
            file_kind(&meta)
        )));
    }
    Ok(file)
}

/// Appends everything `r` gives to `out`, in blocks of at most [`BLOCK`] bytes with
/// `stop` read before each, growing `out` fallibly (an error naming `what`). The inner
/// result is the reader's error.
fn read_blocks(
    r: &mut impl std::io::Read,
    out: &mut Vec<u8>,
    stop: &AtomicBool,
    what: &str,
) -> Result<std::io::Result<()>, RuntimeError> {
    loop {
        check_stop(stop)?;
        if out.len() == out.capacity() {
            try_reserve(out, BLOCK.min(out.len().max(1 << 16)), what).map_err(|msg| RuntimeError::Data { msg })?;
        }
        let room = (out.capacity() - out.len()).min(BLOCK);
        // `read_to_end` fills the spare capacity and, once the `take` is exhausted, finds
        // its end without reserving more.
        match std::io::Read::read_to_end(&mut std::io::Read::take(&mut *r, room as u64), out) {
            Ok(0) => return Ok(Ok(())),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Ok(Err(e)),
        }
    }
}

/// Regular files of more than this many bytes are read in parallel pieces (see
/// [`read_in_parallel`]), and text of more than this many bytes is checked in parallel
/// pieces.
const PAR_READ_MIN: usize = 4 << 20;

/// The bytes one task of [`read_in_parallel`] reads.
const READ_PIECE: usize = 1 << 20;

/// Reads the regular file `file`, `size` bytes by its metadata, into `bytes` (empty, with
/// room for `size` bytes) in pieces of [`READ_PIECE`] bytes on every core, with `stop`
/// read before each piece. True when the file had exactly `size` bytes; otherwise (it
/// changed while read) false, with `bytes` empty, for the caller to read it in turn.
#[cfg(unix)]
fn read_in_parallel(
    file: &std::fs::File,
    size: usize,
    bytes: &mut Vec<u8>,
    stop: &AtomicBool,
) -> Result<std::io::Result<bool>, RuntimeError> {
    use rayon::prelude::*;
    use std::os::unix::fs::FileExt;
    debug_assert!(bytes.is_empty() && bytes.capacity() >= size);
    // The pieces are zeroed and then read on the same core, so the pages of the buffer
    // are first touched in parallel.
    bytes.spare_capacity_mut()[..size]
        .par_chunks_mut(READ_PIECE)
        .for_each(|piece| piece.fill(std::mem::MaybeUninit::new(0)));
    // SAFETY: the first `size` bytes of the buffer were initialized just above, and its
    // capacity is at least `size`.
    unsafe { bytes.set_len(size) };
    let read: Vec<Result<std::io::Result<bool>, RuntimeError>> = bytes
        .par_chunks_mut(READ_PIECE)
        .enumerate()
        .map(|(k, piece)| {
            check_stop(stop)?;
            let mut done = 0;
            while done < piece.len() {
                match file.read_at(&mut piece[done..], (k * READ_PIECE + done) as u64) {
                    Ok(0) => return Ok(Ok(false)),
                    Ok(n) => done += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Ok(Err(e)),
                }
            }
            Ok(Ok(true))
        })
        .collect();
    let mut whole = true;
    for r in read {
        match r? {
            Ok(w) => whole &= w,
            Err(e) => return Ok(Err(e)),
        }
    }
    // Nothing after the last byte: the file has the size it had.
    let mut after = [0u8; 1];
    whole = whole
        && loop {
            match file.read_at(&mut after, size as u64) {
                Ok(n) => break n == 0,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Ok(Err(e)),
            }
        };
    if !whole {
        bytes.clear();
        if let Err(e) = std::io::Seek::rewind(&mut &*file) {
            return Ok(Err(e));
        }
    }
    Ok(Ok(whole))
}

/// Reading in parallel is left to [`read_blocks`] where positional reads are not known.
#[cfg(not(unix))]
fn read_in_parallel(
    _: &std::fs::File,
    _: usize,
    _: &mut Vec<u8>,
    _: &AtomicBool,
) -> Result<std::io::Result<bool>, RuntimeError> {
    Ok(Ok(false))
}

/// Opens a file for reading without blocking on a FIFO that has no writer.
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NONBLOCK);
    }
    o.open(path)
}

/// "a folder", "a FIFO (named pipe)", … for a file that is not a regular file.
fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    let ft = meta.file_type();
    if ft.is_dir() {
        return "a folder";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if ft.is_socket() {
            return "a socket";
        }
        if ft.is_block_device() || ft.is_char_device() {
            return "a device";
        }
    }
    "not a regular file"
}

/// The size of the block at the start of a file in which binary content is looked for.
const SNIFF: usize = 64 << 10;

/// The text of an input file, less a UTF-8 byte order mark. A file that is not text is an
/// error that says what it is (Parquet, Arrow, zip, …, or binary data: a NUL byte in its
/// first block), and text that is not UTF-8 an error naming the line, rather than a
/// parse error of some field.
pub fn input_text<'a>(bytes: &'a [u8], shown: &str, pred: &str) -> Result<&'a str, RuntimeError> {
    checked_text(bytes, shown, pred, crate::cancel::never())
}

/// [`input_text`], checking the text in blocks with `stop` read before each.
fn checked_text<'a>(bytes: &'a [u8], shown: &str, pred: &str, stop: &AtomicBool) -> Result<&'a str, RuntimeError> {
    const FORMATS: [(&[u8], &str); 7] = [
        (b"PAR1", "a Parquet file (name it `.parquet` to read it as one)"),
        (b"ARROW1", "an Arrow IPC file"),
        (b"PK\x03\x04", "a zip archive (an .xlsx spreadsheet is one)"),
        (b"\x28\xb5\x2f\xfd", "zstd-compressed"),
        (b"BZh", "bzip2-compressed"),
        (b"\xfd7zXZ\x00", "xz-compressed"),
        (b"\xff\xfe", "UTF-16 text"),
    ];
    let not_text = |what: &str| {
        RuntimeError::Data {
        msg: format!(
            "`{shown}` (input of `{pred}`) is {what}, not CSV text; `.input` reads text files (CSV, TSV or TBL, optionally gzip-compressed)"
        ),
    }
    };
    for (magic, what) in FORMATS {
        if bytes.starts_with(magic) {
            return Err(not_text(what));
        }
    }
    if bytes.starts_with(b"\xfe\xff") {
        return Err(not_text("UTF-16 text"));
    }
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    let head = &bytes[..bytes.len().min(SNIFF)];
    if let Some(at) = memchr::memchr(0, head) {
        return Err(not_text(&format!("binary data (a NUL byte at offset {at})")));
    }
    let not_utf8 = |at: usize| {
        let line = memchr::memchr_iter(b'\n', &bytes[..at]).count() + 1;
        RuntimeError::Data {
            msg: format!(
                "{shown}:{line}: the file is not UTF-8 text (input of `{pred}`); convert it to UTF-8 (e.g. `iconv -f latin1 -t utf-8`)"
            ),
        }
    };
    if bytes.len() > PAR_READ_MIN && rayon::current_num_threads() > 1 {
        check_stop(stop)?;
        return match first_invalid_utf8(bytes) {
            // SAFETY: `first_invalid_utf8` found every byte of `bytes` valid UTF-8.
            None => Ok(unsafe { std::str::from_utf8_unchecked(bytes) }),
            Some(at) => Err(not_utf8(at)),
        };
    }
    let mut at = 0;
    while at < bytes.len() {
        check_stop(stop)?;
        let end = (at + BLOCK).min(bytes.len());
        match std::str::from_utf8(&bytes[at..end]) {
            Ok(_) => at = end,
            // A character cut by the end of the block: the next block starts with it.
            Err(e) if e.error_len().is_none() && end < bytes.len() => at += e.valid_up_to(),
            Err(e) => return Err(not_utf8(at + e.valid_up_to())),
        }
    }
    // SAFETY: the loop above checked every byte of `bytes` as UTF-8, in blocks that start
    // and end at character boundaries.
    Ok(unsafe { std::str::from_utf8_unchecked(bytes) })
}

/// The offset of the first byte of `bytes` that is not valid UTF-8 (as
/// `std::str::from_utf8` reports it), checked in pieces on every core. Each piece starts
/// at a byte that is not a continuation byte, so a piece before the first invalid byte
/// holds whole characters, and the piece holding it finds it at the same place.
fn first_invalid_utf8(bytes: &[u8]) -> Option<usize> {
    use rayon::prelude::*;
    let parts = rayon::current_num_threads() * 4;
    let mut bounds = vec![0usize];
    for k in 1..parts {
        let mut at = (bytes.len() / parts * k).max(bounds[bounds.len() - 1]);
        while at < bytes.len() && bytes[at] & 0xc0 == 0x80 {
            at += 1;
        }
        bounds.push(at);
    }
    bounds.push(bytes.len());
    bounds.dedup();
    let bad: Vec<Option<usize>> = bounds
        .par_windows(2)
        .map(|w| {
            std::str::from_utf8(&bytes[w[0]..w[1]])
                .err()
                .map(|e| w[0] + e.valid_up_to())
        })
        .collect();
    bad.into_iter().flatten().next()
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "No such file".to_string(),
        std::io::ErrorKind::PermissionDenied => "Permission denied".to_string(),
        _ => e.to_string(),
    }
}

/// Parses the text of an input file. `file` is the name errors show.
pub fn parse_input(
    text: &str,
    file: &str,
    input: &InputRel,
    strings: &mut Interner,
) -> Result<Vec<LoadedCol>, RuntimeError> {
    parse_input_cols(
        text,
        file,
        input,
        &vec![true; input.columns.len()],
        strings,
        crate::cancel::never(),
    )
}

/// The text of `text` without its trailing blank lines (empty, or spaces, tabs and
/// carriage returns only); the last line keeps its line break.
fn without_trailing_blank_lines(text: &str) -> &str {
    let content = text.trim_end_matches([' ', '\t', '\r', '\n']).len();
    match text[content..].find('\n') {
        Some(nl) => &text[..content + nl + 1],
        None => text,
    }
}

/// Splits the next record off `rest` into `fields` (at most `max` of them; the others are
/// only counted). Returns the record's count of fields and the lines it spans.
fn next_record<'a>(
    rest: &mut &'a str,
    sep: &str,
    max: usize,
    fields: &mut Vec<std::borrow::Cow<'a, str>>,
) -> Result<(usize, usize), String> {
    fields.clear();
    if sep == "," {
        let (consumed, lines, count) = split_csv_record(rest, fields, max)?;
        *rest = &rest[consumed..];
        Ok((count, lines))
    } else {
        let end = memchr::memchr(b'\n', rest.as_bytes()).unwrap_or(rest.len());
        let line = rest[..end].strip_suffix('\r').unwrap_or(&rest[..end]);
        *rest = if end < rest.len() { &rest[end + 1..] } else { "" };
        let mut count = 0;
        for f in line.split(sep) {
            if count < max {
                fields.push(std::borrow::Cow::Borrowed(f));
            }
            count += 1;
        }
        Ok((count, 1))
    }
}

/// True when the fields of a line look like column names (each a word of letters, digits,
/// `_`, spaces, `-` or `.`, starting with a letter or `_`, and not `true`/`false`).
fn looks_like_header(fields: &[std::borrow::Cow<str>]) -> bool {
    !fields.is_empty()
        && fields.iter().all(|f| {
            let f = f.trim();
            f.starts_with(|c: char| c.is_alphabetic() || c == '_')
                && f.chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '_' | ' ' | '-' | '.' | ':'))
                && f != "true"
                && f != "false"
        })
}

/// [`parse_input`] keeping only the columns with `wanted[c]`; the others come back empty.
/// Their fields are still checked (a malformed number or date anywhere in the file is an
/// error), except strings, which any text is.
///
/// With `input.header`, the first line names the columns: it must have one name per
/// column, and a name that is another column's (columns read out of order) is an error.
/// Blank lines at the end of the file are ignored, except for a relation of one string
/// column, where an empty line is the empty string.
///
/// `stop` is read before every [`RECORDS_PER_CHECK`] records; when it is set the parse
/// fails with [`RuntimeError::Cancelled`].
pub fn parse_input_cols(
    text: &str,
    file: &str,
    input: &InputRel,
    wanted: &[bool],
    strings: &mut Interner,
    stop: &AtomicBool,
) -> Result<Vec<LoadedCol>, RuntimeError> {
    parse_input_cols_from(text, file, input, wanted, strings, stop, PAR_PARSE_MIN)
}

/// [`parse_input_cols`], parsing in parallel from `par_min` bytes of numeric text on.
fn parse_input_cols_from(
    text: &str,
    file: &str,
    input: &InputRel,
    wanted: &[bool],
    strings: &mut Interner,
    stop: &AtomicBool,
    par_min: usize,
) -> Result<Vec<LoadedCol>, RuntimeError> {
    if input.sep.is_empty() {
        return Err(RuntimeError::Data {
            msg: format!("input `{}` has an empty separator", input.name),
        });
    }
    let source = format!("`{file}`");
    let mut cols = builders(input, &source);
    let ncols = cols.len();
    let one_string = ncols == 1 && input.columns[0].ty == Type::String;
    let mut rest = if one_string {
        text
    } else {
        without_trailing_blank_lines(text)
    };
    // A trailing separator leaves one empty field after the last column; a record with
    // more fields is an error, so no more are kept.
    let max = ncols + 1;
    let mut fields: Vec<std::borrow::Cow<str>> = Vec::with_capacity(max);
    let located = |line: usize, msg: String| RuntimeError::Data {
        msg: format!("{file}:{line}: {msg}"),
    };
    let mut line_no = 1usize;
    if input.header && !rest.is_empty() {
        let (count, lines) = next_record(&mut rest, &input.sep, max, &mut fields).map_err(|e| located(1, e))?;
        line_no += lines;
        if count == ncols + 1 && fields.last().is_some_and(|f| f.is_empty()) {
            fields.pop();
        }
        if count > ncols + 1 || fields.len() != ncols {
            return Err(RuntimeError::Data {
                msg: format!(
                    "{file}:1: the header has {count} name{}, but `{}` has {ncols} column{} ({})",
                    if count == 1 { "" } else { "s" },
                    input.name,
                    if ncols == 1 { "" } else { "s" },
                    input
                        .columns
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        for (c, name) in fields.iter().enumerate() {
            let name = name.trim();
            let want = &input.columns[c].name;
            if name != want {
                if let Some(other) = input.columns.iter().position(|col| col.name == name) {
                    return Err(RuntimeError::Data {
                        msg: format!(
                            "{file}:1: the header names column {} `{name}`, but column {} of `{}` is `{want}` (`{name}` is column {}); columns are read in the order of the declaration",
                            c + 1,
                            c + 1,
                            input.name,
                            other + 1
                        ),
                    });
                }
            }
        }
    }
    let records = Records {
        file,
        input,
        wanted,
        max,
    };
    // Numbers only and no quotes: every record is one line, and no string is interned, so
    // pieces of whole lines parse on their own.
    let numeric = input.columns.iter().all(|c| c.ty != Type::String) && memchr::memchr(b'"', rest.as_bytes()).is_none();
    if numeric && rest.len() >= par_min && rayon::current_num_threads() > 1 {
        return records.parse_in_parallel(rest, line_no, &source, stop);
    }
    match IntegerLines::of(input) {
        Some(lines) if numeric => records.parse_integers(&lines, rest, line_no, &mut cols, stop)?,
        _ => records.parse(rest, line_no, &mut cols, strings, stop)?,
    }
    Ok(cols.into_iter().map(|c| c.values).collect())
}

/// Numeric input text of at least this many bytes (after any header) is parsed in
/// pieces of whole lines on every core (see [`Records::parse_in_parallel`]).
const PAR_PARSE_MIN: usize = 1 << 20;

/// What parsing the records of one input needs besides their text.
struct Records<'a> {
    file: &'a str,
    input: &'a InputRel,
    wanted: &'a [bool],
    /// Fields kept of a record: the columns and one empty field after a trailing
    /// separator.
    max: usize,
}

impl Records<'_> {
    /// Parses the records of `rest`, whose first line is line `line_no` of the file, into
    /// `cols`. Errors name the file, the line and the column.
    fn parse(
        &self,
        mut rest: &str,
        mut line_no: usize,
        cols: &mut [ColumnBuilder],
        strings: &mut Interner,
        stop: &AtomicBool,
    ) -> Result<(), RuntimeError> {
        let (file, input, wanted, max) = (self.file, self.input, self.wanted, self.max);
        let ncols = cols.len();
        let mut fields: Vec<std::borrow::Cow<str>> = Vec::with_capacity(max);
        let located = |line: usize, msg: String| RuntimeError::Data {
            msg: format!("{file}:{line}: {msg}"),
        };
        let fields_error = |line: usize, count: usize| RuntimeError::Data {
            msg: format!(
                "{file}:{line}: expected {ncols} field{} (the columns of `{}`), found {count}",
                if ncols == 1 { "" } else { "s" },
                input.name,
            ),
        };
        let mut records = 0usize;
        while !rest.is_empty() {
            if records % RECORDS_PER_CHECK == 0 {
                check_stop(stop)?;
            }
            records += 1;
            let start_line = line_no;
            let (count, lines) =
                next_record(&mut rest, &input.sep, max, &mut fields).map_err(|e| located(start_line, e))?;
            line_no += lines;
            if count == ncols + 1 && fields.last().is_some_and(|f| f.is_empty()) {
                fields.pop();
            }
            let hint = !input.header && start_line == 1 && looks_like_header(&fields);
            let header_hint = |e: RuntimeError| -> RuntimeError {
                match e {
                    RuntimeError::Data { msg } if hint => RuntimeError::Data {
                        msg: format!(
                            "{msg}\n  help: the first line looks like a header: add `header` to the .input (`.input {} … header.`)",
                            input.name
                        ),
                    },
                    e => e,
                }
            };
            if count > ncols + 1 || fields.len() != ncols {
                return Err(header_hint(fields_error(start_line, count)));
            }
            for (c, (field, col)) in fields.iter().zip(cols.iter_mut()).enumerate() {
                let keep = wanted.get(c).copied().unwrap_or(true);
                if !keep && col.ty == Type::String {
                    continue;
                }
                let res = parse_field(field, col, strings);
                if !keep {
                    col.values.clear();
                }
                res.map_err(|e| match e {
                    FieldError::Bad(detail) => header_hint(RuntimeError::Data {
                        msg: format!(
                            "{file}:{start_line}: column {} (`{}`, {}): {detail}",
                            c + 1,
                            input.columns[c].name,
                            col.ty
                        ),
                    }),
                    FieldError::OutOfMemory(msg) => RuntimeError::Data { msg },
                })?;
            }
        }
        Ok(())
    }

    /// [`Self::parse`] of text whose records are one line each and hold no strings, in
    /// pieces of whole lines on every core: each piece knows its first line (the line
    /// breaks before it, counted in parallel), parses into columns of its own and stops
    /// at its first error; the pieces' columns are joined in order, and the error of the
    /// first piece that has one is the first of the file, as one pass would report it.
    fn parse_in_parallel(
        &self,
        rest: &str,
        first_line: usize,
        source: &str,
        stop: &AtomicBool,
    ) -> Result<Vec<LoadedCol>, RuntimeError> {
        use rayon::prelude::*;
        let bytes = rest.as_bytes();
        let parts = rayon::current_num_threads() * 4;
        let mut bounds = vec![0usize];
        for k in 1..parts {
            let at = (rest.len() / parts * k).max(bounds[bounds.len() - 1]);
            if let Some(p) = memchr::memchr(b'\n', &bytes[at..]) {
                if at + p + 1 < rest.len() {
                    bounds.push(at + p + 1);
                }
            }
        }
        bounds.dedup();
        bounds.push(rest.len());
        let pieces: Vec<&str> = bounds.windows(2).map(|w| &rest[w[0]..w[1]]).collect();
        let breaks: Vec<usize> = pieces
            .par_iter()
            .map(|p| memchr::memchr_iter(b'\n', p.as_bytes()).count())
            .collect();
        let firsts: Vec<usize> = breaks
            .iter()
            .scan(first_line, |line, n| {
                let first = *line;
                *line += n;
                Some(first)
            })
            .collect();
        let parsed: Vec<Result<Vec<ColumnBuilder>, RuntimeError>> = pieces
            .par_iter()
            .zip(&firsts)
            .map(|(piece, &first)| {
                let mut cols = builders(self.input, source);
                match IntegerLines::of(self.input) {
                    Some(lines) => self.parse_integers(&lines, piece, first, &mut cols, stop)?,
                    None => {
                        // No string column: nothing is interned.
                        let mut strings = Interner::default();
                        self.parse(piece, first, &mut cols, &mut strings, stop)?;
                    }
                }
                Ok(cols)
            })
            .collect();
        let mut parts = Vec::with_capacity(parsed.len());
        for part in parsed {
            parts.push(part?);
        }
        let mut parts = parts.into_iter();
        let Some(mut joined) = parts.next() else {
            return Ok(builders(self.input, source).into_iter().map(|c| c.values).collect());
        };
        let rest: Vec<Vec<ColumnBuilder>> = parts.collect();
        for (c, col) in joined.iter_mut().enumerate() {
            let more: usize = rest.iter().map(|p| p[c].values.len()).sum();
            col.values
                .try_reserve_exact(more, &col.values_name)
                .map_err(|msg| RuntimeError::Data { msg })?;
        }
        for part in rest {
            for (col, more) in joined.iter_mut().zip(part) {
                col.values.append(more.values);
            }
        }
        Ok(joined.into_iter().map(|c| c.values).collect())
    }

    /// [`Self::parse`] of `piece`, text whose records are one line each and whose columns
    /// are all integers (see [`IntegerLines`]): a line of plain integers (an optional sign
    /// and 1 to 18 digits each, within the column's range), separated by the one-byte
    /// separator and ended by `\n`, `\r\n` or the end of the text, is read here; any
    /// other line (a trailing separator, spaces, too many digits, an error) is read by
    /// [`Self::parse`], so the values and the errors are those of [`Self::parse`].
    fn parse_integers(
        &self,
        lines: &IntegerLines,
        piece: &str,
        first_line: usize,
        cols: &mut [ColumnBuilder],
        stop: &AtomicBool,
    ) -> Result<(), RuntimeError> {
        let bytes = piece.as_bytes();
        let mut values = vec![0i64; cols.len()];
        let keep: Vec<bool> = (0..cols.len())
            .map(|c| self.wanted.get(c).copied().unwrap_or(true))
            .collect();
        let (mut at, mut line_no, mut records) = (0usize, first_line, 0usize);
        while at < bytes.len() {
            if records % RECORDS_PER_CHECK == 0 {
                check_stop(stop)?;
            }
            records += 1;
            match lines.read(bytes, at, &mut values) {
                Some(next) => {
                    for ((col, &x), &k) in cols.iter_mut().zip(&values).zip(&keep) {
                        if !k {
                            continue;
                        }
                        let pushed = match &mut col.values {
                            LoadedCol::I32(v) => try_push(v, x as i32, &col.values_name),
                            LoadedCol::I64(v) => try_push(v, x, &col.values_name),
                            _ => unreachable!("IntegerLines::of admits integer columns only"),
                        };
                        pushed.map_err(|msg| RuntimeError::Data { msg })?;
                    }
                    at = next;
                }
                None => {
                    let end = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |p| at + p + 1);
                    // No string column: nothing is interned.
                    let mut strings = Interner::default();
                    self.parse(&piece[at..end], line_no, cols, &mut strings, stop)?;
                    at = end;
                }
            }
            line_no += 1;
        }
        Ok(())
    }
}

/// The shape of a line of plain integers of a relation whose columns are all `int32` or
/// `int64`, with a one-byte separator that cannot start or continue a number (see
/// [`Records::parse_integers`]).
struct IntegerLines {
    sep: u8,
    /// Per column: whether it is `int32` (else `int64`).
    int32: Vec<bool>,
}

impl IntegerLines {
    /// The shape for `input`, or `None` when its columns or separator do not allow it.
    fn of(input: &InputRel) -> Option<IntegerLines> {
        let &[sep] = input.sep.as_bytes() else {
            return None;
        };
        if sep.is_ascii_digit() || matches!(sep, b'+' | b'-' | b'\r' | b'\n' | b'"') || input.columns.is_empty() {
            return None;
        }
        let int32 = input
            .columns
            .iter()
            .map(|c| match c.ty {
                Type::Int32 => Some(true),
                Type::Int64 => Some(false),
                _ => None,
            })
            .collect::<Option<Vec<bool>>>()?;
        Some(IntegerLines { sep, int32 })
    }

    /// Reads the line of `bytes` starting at `at` into `values` (one per column) and
    /// returns where the next line starts, or `None` when it is not a line of plain
    /// integers in range (which [`parse_int`] would read the same way: it accepts an
    /// optional `+` or `-` and ASCII digits).
    #[inline]
    fn read(&self, bytes: &[u8], at: usize, values: &mut [i64]) -> Option<usize> {
        let mut i = at;
        let last = self.int32.len() - 1;
        for (c, &int32) in self.int32.iter().enumerate() {
            let neg = match bytes.get(i) {
                Some(b'-') => {
                    i += 1;
                    true
                }
                Some(b'+') => {
                    i += 1;
                    false
                }
                _ => false,
            };
            let start = i;
            let mut v: i64 = 0;
            while let Some(&b) = bytes.get(i) {
                let d = b.wrapping_sub(b'0');
                if d > 9 {
                    break;
                }
                v = v.wrapping_mul(10).wrapping_add(i64::from(d));
                i += 1;
            }
            // At most 18 digits: no overflow.
            if i == start || i - start > 18 {
                return None;
            }
            let v = if neg { -v } else { v };
            if int32 && i32::try_from(v).is_err() {
                return None;
            }
            values[c] = v;
            if c < last {
                if bytes.get(i) != Some(&self.sep) {
                    return None;
                }
                i += 1;
            } else {
                match bytes.get(i) {
                    None => {}
                    Some(b'\n') => i += 1,
                    Some(b'\r') if bytes.get(i + 1) == Some(&b'\n') => i += 2,
                    Some(_) => return None,
                }
            }
        }
        Some(i)
    }
}

/// An empty column builder for every column of `input`, read from `source`.
fn builders(input: &InputRel, source: &str) -> Vec<ColumnBuilder> {
    input
        .columns
        .iter()
        .map(|c| ColumnBuilder::new(&c.name, c.ty, source))
        .collect()
}

/// Splits one CSV record off the front of `text` (RFC 4180 quoting), keeping at most
/// `max` fields (the others are only counted). Returns the bytes consumed (through the
/// line break), the number of lines the record spans and its number of fields. A quoted
/// field is borrowed from `text` unless it has escaped quotes (`""`) to undo.
fn split_csv_record<'a>(
    text: &'a str,
    fields: &mut Vec<std::borrow::Cow<'a, str>>,
    max: usize,
) -> Result<(usize, usize, usize), String> {
    let bytes = text.as_bytes();
    let mut i = 0usize;
    let mut lines = 0usize;
    let mut count = 0usize;
    loop {
        count += 1;
        let keep = count <= max;
        // The start of a field.
        if i < bytes.len() && bytes[i] == b'"' {
            let start = i + 1;
            let mut j = start;
            let mut escaped = false;
            let close = loop {
                match memchr::memchr(b'"', &bytes[j..]) {
                    None => return Err("unterminated quoted field (a `\"` is never closed)".to_string()),
                    Some(p) if bytes.get(j + p + 1) == Some(&b'"') => {
                        escaped = true;
                        j += p + 2;
                    }
                    Some(p) => break j + p,
                }
            };
            let quoted = &text[start..close];
            lines += memchr::memchr_iter(b'\n', quoted.as_bytes()).count();
            if keep {
                fields.push(if escaped {
                    std::borrow::Cow::Owned(unescape(quoted).map_err(|e| format!("column {count}: {e}"))?)
                } else {
                    std::borrow::Cow::Borrowed(quoted)
                });
            }
            i = close + 1;
            match bytes.get(i) {
                Some(b',') => i += 1,
                Some(b'\n') => return Ok((i + 1, lines + 1, count)),
                Some(b'\r') if bytes.get(i + 1) == Some(&b'\n') => return Ok((i + 2, lines + 1, count)),
                None => return Ok((i, lines + 1, count)),
                Some(_) => {
                    return Err(format!(
                        "column {count}: unexpected text after a closing quote (a quote inside a quoted field is written `\"\"`)"
                    ))
                }
            }
        } else {
            let end = memchr::memchr2(b',', b'\n', &bytes[i..]).map_or(bytes.len(), |p| i + p);
            let raw = &text[i..end];
            match bytes.get(end) {
                Some(b',') => {
                    if keep {
                        fields.push(std::borrow::Cow::Borrowed(raw));
                    }
                    i = end + 1;
                }
                Some(_) => {
                    if keep {
                        fields.push(std::borrow::Cow::Borrowed(raw.strip_suffix('\r').unwrap_or(raw)));
                    }
                    return Ok((end + 1, lines + 1, count));
                }
                None => {
                    if keep {
                        fields.push(std::borrow::Cow::Borrowed(raw.strip_suffix('\r').unwrap_or(raw)));
                    }
                    return Ok((end, lines + 1, count));
                }
            }
        }
    }
}

/// The value of the quoted field `quoted` (its text between the quotes, in which every
/// `"` is one of a pair `""`), or the out-of-memory message.
fn unescape(quoted: &str) -> Result<String, String> {
    let mut value = String::new();
    fallible(|| value.try_reserve_exact(quoted.len()))
        .map_err(|_| out_of_memory(quoted.len() as u128, "a quoted field"))?;
    for (k, piece) in quoted.split("\"\"").enumerate() {
        if k > 0 {
            value.push('"');
        }
        value.push_str(piece);
    }
    Ok(value)
}

fn article(ty: Type) -> &'static str {
    match ty {
        Type::Int32 | Type::Int64 => "an",
        _ => "a",
    }
}

/// Appends the value of `field` to `col`; its strings are numbered by `strings`.
pub(crate) fn parse_field(field: &str, col: &mut ColumnBuilder, strings: &mut Interner) -> Result<(), FieldError> {
    let ty = col.ty;
    let what = col.values_name.as_str();
    let bad = || format!("`{}` is not {} {ty}", shown(field), article(ty));
    let pushed = match &mut col.values {
        LoadedCol::I32(v) => {
            let x = match ty {
                Type::Date => {
                    parse_date(field).ok_or_else(|| format!("`{}` is not a date (YYYY-MM-DD)", shown(field)))?
                }
                _ => parse_int(field, i32::MIN as i64, i32::MAX as i64).map_err(|e| e.message(field, ty))? as i32,
            };
            try_push(v, x, what)
        }
        LoadedCol::I64(v) => {
            let x = match ty {
                Type::Decimal(s) => parse_decimal(field, s)?,
                _ => parse_int(field, i64::MIN, i64::MAX).map_err(|e| e.message(field, ty))?,
            };
            try_push(v, x, what)
        }
        LoadedCol::F64(v) => try_push(v, field.parse::<f64>().map_err(|_| bad())?, what),
        LoadedCol::Str(v) => {
            let id = strings.intern_for(field, &col.strings_name)?;
            try_push(v, id, what)
        }
        LoadedCol::Bool(v) => {
            let x = match field {
                "true" => 1,
                "false" => 0,
                _ => {
                    return Err(FieldError::Bad(format!(
                        "`{}` is not a bool (true or false)",
                        shown(field)
                    )))
                }
            };
            try_push(v, x, what)
        }
    };
    pushed.map_err(FieldError::OutOfMemory)
}

enum IntError {
    Syntax,
    Range,
}

impl IntError {
    fn message(&self, field: &str, ty: Type) -> String {
        match self {
            IntError::Syntax => format!("`{}` is not {} {ty}", shown(field), article(ty)),
            IntError::Range => format!("`{}` is out of the range of {ty}", shown(field)),
        }
    }
}

fn parse_int(field: &str, min: i64, max: i64) -> Result<i64, IntError> {
    let (neg, digits) = split_sign(field);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(IntError::Syntax);
    }
    let mut v: i128 = 0;
    for b in digits.bytes() {
        v = v * 10 + (b - b'0') as i128;
        if v > (i64::MAX as i128) + 1 {
            return Err(IntError::Range);
        }
    }
    let v = if neg { -v } else { v };
    if v < min as i128 || v > max as i128 {
        return Err(IntError::Range);
    }
    Ok(v as i64)
}

fn split_sign(field: &str) -> (bool, &str) {
    match field.as_bytes().first() {
        Some(b'-') => (true, &field[1..]),
        Some(b'+') => (false, &field[1..]),
        _ => (false, field),
    }
}

/// An exact decimal of scale `scale` as its unscaled integer: `12.3` at scale 2 is 1230.
pub fn parse_decimal(field: &str, scale: u8) -> Result<i64, String> {
    let ty = Type::Decimal(scale);
    let (neg, body) = split_sign(field);
    let (int, frac) = match body.split_once('.') {
        Some((i, f)) => (i, f),
        None => (body, ""),
    };
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !all_digits(int) || !all_digits(frac) {
        return Err(format!("`{}` is not a {ty}", shown(field)));
    }
    if frac.len() > scale as usize {
        return Err(format!(
            "`{}` has {} fraction digits; the column has scale {scale}",
            shown(field),
            frac.len()
        ));
    }
    let out_of_range = || {
        format!(
            "`{}` has more than 18 digits at scale {scale}; a {ty} holds at most 18",
            shown(field)
        )
    };
    let mut v: i128 = 0;
    for b in int
        .bytes()
        .chain(frac.bytes())
        .chain(std::iter::repeat_n(b'0', scale as usize - frac.len()))
    {
        v = v * 10 + (b - b'0') as i128;
        if v > MAX_DECIMAL {
            return Err(out_of_range());
        }
    }
    let v = if neg { -v } else { v };
    i64::try_from(v).map_err(|_| out_of_range())
}

/// `YYYY-MM-DD` as days since 1970-01-01, validating the calendar date.
pub fn parse_date(field: &str) -> Option<i32> {
    let b = field.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let num = |s: &[u8]| -> Option<i64> {
        s.iter()
            .try_fold(0i64, |acc, &c| c.is_ascii_digit().then(|| acc * 10 + (c - b'0') as i64))
    };
    let (y, m, d) = (num(&b[0..4])?, num(&b[5..7])?, num(&b[8..10])?);
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return None;
    }
    i32::try_from(days_from_civil(y, m, d)).ok()
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// The date of a day number: `(year, month, day)`.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

impl LoadedCol {
    pub fn len(&self) -> usize {
        match self {
            LoadedCol::I32(v) => v.len(),
            LoadedCol::I64(v) => v.len(),
            LoadedCol::F64(v) => v.len(),
            LoadedCol::Str(v) => v.len(),
            LoadedCol::Bool(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reserves room for `more` further values, or the out-of-memory message naming
    /// `what`.
    pub(crate) fn try_reserve_exact(&mut self, more: usize, what: &str) -> Result<(), String> {
        use crate::alloc::try_reserve;
        match self {
            LoadedCol::I32(v) => try_reserve(v, more, what),
            LoadedCol::I64(v) => try_reserve(v, more, what),
            LoadedCol::F64(v) => try_reserve(v, more, what),
            LoadedCol::Str(v) => try_reserve(v, more, what),
            LoadedCol::Bool(v) => try_reserve(v, more, what),
        }
    }

    pub(crate) fn shrink_to_fit(&mut self) {
        match self {
            LoadedCol::I32(v) => v.shrink_to_fit(),
            LoadedCol::I64(v) => v.shrink_to_fit(),
            LoadedCol::F64(v) => v.shrink_to_fit(),
            LoadedCol::Str(v) => v.shrink_to_fit(),
            LoadedCol::Bool(v) => v.shrink_to_fit(),
        }
    }

    /// Appends the values of `other`, a column of the same type.
    pub(crate) fn append(&mut self, other: LoadedCol) {
        match (self, other) {
            (LoadedCol::I32(a), LoadedCol::I32(b)) => a.extend(b),
            (LoadedCol::I64(a), LoadedCol::I64(b)) => a.extend(b),
            (LoadedCol::F64(a), LoadedCol::F64(b)) => a.extend(b),
            (LoadedCol::Str(a), LoadedCol::Str(b)) => a.extend(b),
            (LoadedCol::Bool(a), LoadedCol::Bool(b)) => a.extend(b),
            _ => unreachable!("parts of a table have the same column types"),
        }
    }

    fn clear(&mut self) {
        match self {
            LoadedCol::I32(v) => v.clear(),
            LoadedCol::I64(v) => v.clear(),
            LoadedCol::F64(v) => v.clear(),
            LoadedCol::Str(v) => v.clear(),
            LoadedCol::Bool(v) => v.clear(),
        }
    }
}

/// Checks that no two rows of a loaded input share the values of its key columns (the
/// key columns must be among the loaded ones). Rows in strictly increasing key order (as
/// dbgen writes them) are checked in one pass; others are sorted first.
pub fn check_key(file: &str, input: &InputRel, cols: &[LoadedCol], wanted: &[bool]) -> Result<(), RuntimeError> {
    if input.key.is_empty() {
        return Ok(());
    }
    let key: Vec<&LoadedCol> = input.key.iter().filter_map(|&k| cols.get(k)).collect();
    if input.key.iter().any(|&k| !wanted.get(k).copied().unwrap_or(false)) {
        return check_key_by(file, input, 0, 0, |_, _| std::cmp::Ordering::Equal);
    }
    let cmp = |a: usize, b: usize| -> std::cmp::Ordering {
        for c in &key {
            let o = match c {
                LoadedCol::I32(v) => v[a].cmp(&v[b]),
                LoadedCol::I64(v) => v[a].cmp(&v[b]),
                LoadedCol::F64(v) => v[a].total_cmp(&v[b]),
                LoadedCol::Str(v) => v[a].cmp(&v[b]),
                LoadedCol::Bool(v) => v[a].cmp(&v[b]),
            };
            if o != std::cmp::Ordering::Equal {
                return o;
            }
        }
        std::cmp::Ordering::Equal
    };
    check_key_by(file, input, key.len(), key.first().map_or(0, |c| c.len()), cmp)
}

/// The key check of `input`'s `rows` rows, of which `found` key columns were loaded, with
/// `cmp` comparing two rows on the key: an error naming two rows of equal keys, or a
/// key column that was not loaded.
pub(crate) fn check_key_by(
    file: &str,
    input: &InputRel,
    found: usize,
    rows: usize,
    cmp: impl Fn(usize, usize) -> std::cmp::Ordering + Sync,
) -> Result<(), RuntimeError> {
    if input.key.is_empty() {
        return Ok(());
    }
    if found != input.key.len() {
        return Err(RuntimeError::Plan(format!(
            "the key of `{}` names a column that was not loaded",
            input.name
        )));
    }
    let increasing = (1..rows).all(|r| cmp(r - 1, r) == std::cmp::Ordering::Less);
    if increasing {
        return Ok(());
    }
    let mut order: Vec<usize> =
        crate::alloc::try_collect(0..rows, &format!("the key check of `{}` ({file})", input.name))
            .map_err(|msg| RuntimeError::Data { msg })?;
    {
        // Unstable, as ties are broken by the row: sorting in place allocates nothing.
        use rayon::slice::ParallelSliceMut;
        order.par_sort_unstable_by(|&a, &b| cmp(a, b).then(a.cmp(&b)));
    }
    if let Some(w) = order.windows(2).find(|w| cmp(w[0], w[1]) == std::cmp::Ordering::Equal) {
        let names: Vec<&str> = input.key.iter().map(|&k| input.columns[k].name.as_str()).collect();
        return Err(RuntimeError::Data {
            msg: format!(
                "{file}: rows {} and {} have the same key ({}), which `.input {} … key (…)` declares unique",
                w[0] + 1,
                w[1] + 1,
                names.join(", "),
                input.name
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use fox_sema::core::Column;

    fn input(sep: &str, header: bool, cols: &[(&str, Type)]) -> InputRel {
        InputRel {
            name: "r".into(),
            columns: cols
                .iter()
                .map(|(n, t)| Column {
                    name: n.to_string(),
                    ty: *t,
                })
                .collect(),
            file: "r.csv".into(),
            sep: sep.into(),
            key: Vec::new(),
            header,
        }
    }

    /// The text parsed in one pass and in parallel pieces (from 0 bytes on): the same
    /// columns, or the same error.
    fn both(text: &str, rel: &InputRel, wanted: &[bool]) -> Result<Vec<LoadedCol>, String> {
        let run = |par_min: usize| {
            parse_input_cols_from(
                text,
                "r.csv",
                rel,
                wanted,
                &mut Interner::default(),
                crate::cancel::never(),
                par_min,
            )
            .map_err(|e| e.to_string())
        };
        let one = run(usize::MAX);
        let par = run(0);
        assert!(
            one == par,
            "one pass and pieces differ: {:?} / {:?}",
            one.as_ref().err(),
            par.as_ref().err()
        );
        one
    }

    fn lines(n: usize, f: impl Fn(usize) -> String) -> String {
        (0..n).map(f).collect()
    }

    #[test]
    fn numeric_text_parses_in_pieces_as_in_one_pass() {
        let cols = [
            ("a", Type::Int32),
            ("b", Type::Int64),
            ("c", Type::Float64),
            ("d", Type::Date),
            ("e", Type::Decimal(2)),
            ("f", Type::Bool),
        ];
        let row = |i: usize| {
            format!(
                "{},{},{}.5,2024-0{}-1{},{}.{:02},{}",
                i as i64 - 5000,
                i * 1_000_003,
                i,
                1 + i % 9,
                i % 10,
                i,
                i % 100,
                i % 2 == 0
            )
        };
        for (header, crlf, trailing) in [(false, false, false), (true, true, false), (false, true, true)] {
            let rel = input(",", header, &cols);
            let mut text = String::new();
            if header {
                text.push_str("a,b,c,d,e,f\n");
            }
            let end = if crlf { "\r\n" } else { "\n" };
            let sep = if trailing { "," } else { "" };
            text.push_str(&lines(30_000, |i| format!("{}{sep}{end}", row(i))));
            text.push_str("\n\n");
            let got = both(&text, &rel, &[true; 6]).unwrap();
            assert_eq!(got[0].len(), 30_000);
            // Only some columns wanted: the others come back empty.
            let got = both(&text, &rel, &[false, true, false, true, false, false]).unwrap();
            assert_eq!((got[0].len(), got[1].len()), (0, 30_000));
        }
        // Tab-separated, one column, an empty file and one line.
        let rel = input("\t", false, &[("x", Type::Int32), ("y", Type::Int32)]);
        both(&lines(20_000, |i| format!("{i}\t{}\n", i * 7)), &rel, &[true; 2]).unwrap();
        both("", &rel, &[true; 2]).unwrap();
        both("1\t2", &rel, &[true; 2]).unwrap();
    }

    #[test]
    fn the_first_error_of_the_file_is_reported_from_pieces() {
        let rel = input(",", false, &[("x", Type::Int32), ("y", Type::Int32)]);
        let good = |i: usize| format!("{i},{}\n", i % 97);
        // Errors late in the file, in two places, of two kinds; and on the first line.
        for (bad_at, bad, second_at) in [
            (25_000usize, "1,x\n", Some(27_000usize)),
            (24_999, "1,2,3\n", Some(5)),
            (0, "a,b\n", None),
            (29_999, "99999999999,1\n", None),
        ] {
            let text = lines(30_000, |i| {
                if i == bad_at || Some(i) == second_at {
                    bad.to_string()
                } else {
                    good(i)
                }
            });
            let e = both(&text, &rel, &[true; 2]).unwrap_err();
            let first = second_at.map_or(bad_at, |s| s.min(bad_at));
            assert!(e.contains(&format!("r.csv:{}:", first + 1)), "{e}");
        }
    }

    /// The records of `text` read by the general parser and by the integer lines' reader:
    /// the same columns, or the same error.
    fn integers_as_general(text: &str, rel: &InputRel, wanted: &[bool]) -> Result<Vec<LoadedCol>, String> {
        let records = Records {
            file: "r.csv",
            input: rel,
            wanted,
            max: rel.columns.len() + 1,
        };
        let never = crate::cancel::never();
        let mut cols = builders(rel, "`r.csv`");
        let general = records
            .parse(text, 1, &mut cols, &mut Interner::default(), never)
            .map(|()| cols.into_iter().map(|c| c.values).collect::<Vec<_>>())
            .map_err(|e| e.to_string());
        let lines = IntegerLines::of(rel).expect("integer columns");
        let mut cols = builders(rel, "`r.csv`");
        let fast = records
            .parse_integers(&lines, text, 1, &mut cols, never)
            .map(|()| cols.into_iter().map(|c| c.values).collect::<Vec<_>>())
            .map_err(|e| e.to_string());
        assert_eq!(general, fast, "{text:?}");
        general
    }

    #[test]
    fn integer_lines_read_as_the_general_parser_reads_them() {
        // Fields the reader takes, and fields it leaves to the general parser (valid or not).
        let fields = [
            "0",
            "7",
            "-3",
            "+12",
            "-0",
            "007",
            "2147483647",
            "-2147483648",
            "2147483648",
            "-2147483649",
            "999999999999999999",
            "-999999999999999999",
            "1000000000000000000",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "99999999999999999999999",
            "",
            "-",
            "+",
            " 5",
            "5 ",
            "x",
            "1.5",
            "--1",
        ];
        let mut rng = crate::test_xorshift(0x2545_f491_4f6c_dd1d);
        let mut next = move |n: usize| (rng() % n as u64) as usize;
        let shapes: [&[(&str, Type)]; 3] = [
            &[("x", Type::Int32), ("y", Type::Int32)],
            &[("x", Type::Int64), ("y", Type::Int32), ("z", Type::Int64)],
            &[("x", Type::Int64)],
        ];
        let (mut ok, mut failed) = (0, 0);
        for round in 0..3000 {
            let shape = shapes[round % shapes.len()];
            let sep = [",", "\t", "|", ";"][next(4)];
            let rel = input(sep, false, shape);
            let wanted: Vec<bool> = (0..shape.len()).map(|_| next(3) > 0).collect();
            let lines = next(6);
            let mut text = String::new();
            for l in 0..lines {
                // Mostly plain lines; in some rounds, odd fields, a trailing separator, a
                // carriage return, a missing or an extra field, a blank line.
                let odd = round % 4 == 0;
                let mut line: Vec<String> = shape
                    .iter()
                    .map(|_| {
                        if odd && next(3) == 0 {
                            fields[next(fields.len())].to_string()
                        } else {
                            (next(2_000_000) as i64 - 1_000_000).to_string()
                        }
                    })
                    .collect();
                if odd && next(8) == 0 {
                    line.pop();
                }
                if odd && next(8) == 0 {
                    line.push("1".into());
                }
                let mut text_line = line.join(sep);
                if odd && next(8) == 0 {
                    text_line.push_str(sep);
                }
                if odd && next(10) == 0 {
                    text_line.clear();
                }
                if odd && next(10) == 0 {
                    text_line.insert(0, '\r');
                }
                text.push_str(&text_line);
                if l + 1 < lines || next(2) == 0 {
                    text.push_str(if next(4) == 0 { "\r\n" } else { "\n" });
                }
            }
            match integers_as_general(&text, &rel, &wanted) {
                Ok(_) => ok += 1,
                Err(_) => failed += 1,
            }
        }
        // Both outcomes were met often.
        assert!(ok > 1000 && failed > 100, "{ok} read, {failed} failed");
    }

    #[test]
    fn utf8_checked_in_pieces_as_in_one_pass() {
        let text: String = (0..40_000).map(|i| format!("{i},é→😀 line\n")).collect();
        let bytes = text.as_bytes();
        assert_eq!(first_invalid_utf8(bytes), None);
        assert_eq!(first_invalid_utf8(b""), None);
        // A bad byte, a cut character, a lone continuation byte, at several places.
        for at in [0, 1, 7, bytes.len() / 3, bytes.len() / 2 + 1, bytes.len() - 1] {
            for bad in [&[0xffu8][..], &[0xe2, 0x86], &[0x80], &[0xf0, 0x9f, 0x98]] {
                let mut b = bytes[..at].to_vec();
                b.extend_from_slice(bad);
                b.extend_from_slice(&bytes[at..]);
                let want = std::str::from_utf8(&b).err().map(|e| e.valid_up_to());
                assert!(want.is_some());
                assert_eq!(first_invalid_utf8(&b), want, "{at} {bad:?}");
            }
        }
        // Only continuation bytes.
        assert_eq!(first_invalid_utf8(&[0x80; 1000]), Some(0));
    }

    #[test]
    fn files_read_in_pieces_as_in_one_pass() {
        let dir = std::env::temp_dir().join(format!("fox-load-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for size in [0usize, 1, READ_PIECE - 1, READ_PIECE, 3 * READ_PIECE + 17] {
            let path = dir.join(format!("f{size}"));
            let data: Vec<u8> = (0..size).map(|i| (i * 131 % 251) as u8).collect();
            std::fs::write(&path, &data).unwrap();
            let file = std::fs::File::open(&path).unwrap();
            let mut bytes = Vec::with_capacity(size + 1);
            let whole = read_in_parallel(&file, size, &mut bytes, crate::cancel::never())
                .unwrap()
                .unwrap();
            assert!(whole);
            assert!(bytes == data, "{size}");
            // A size the file does not have: nothing is kept, and the file is at its start.
            let mut bytes = Vec::with_capacity(size + 2);
            let whole = read_in_parallel(&file, size + 1, &mut bytes, crate::cancel::never())
                .unwrap()
                .unwrap();
            assert!(!whole && bytes.is_empty());
            if size > 0 {
                let mut bytes = Vec::with_capacity(size);
                let whole = read_in_parallel(&file, size - 1, &mut bytes, crate::cancel::never())
                    .unwrap()
                    .unwrap();
                assert!(!whole && bytes.is_empty());
            }
            let mut rest = Vec::new();
            std::io::Read::read_to_end(&mut &file, &mut rest).unwrap();
            assert!(rest == data);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_integer_columns_and_a_plain_separator_make_integer_lines() {
        let ints = [("x", Type::Int32), ("y", Type::Int64)];
        assert!(IntegerLines::of(&input(",", false, &ints)).is_some());
        assert!(IntegerLines::of(&input("\t", true, &ints)).is_some());
        assert!(IntegerLines::of(&input("::", false, &ints)).is_none());
        assert!(IntegerLines::of(&input("-", false, &ints)).is_none());
        assert!(IntegerLines::of(&input("5", false, &ints)).is_none());
        assert!(IntegerLines::of(&input(",", false, &[])).is_none());
        for ty in [Type::Date, Type::Decimal(2), Type::Float64, Type::Bool, Type::String] {
            assert!(IntegerLines::of(&input(",", false, &[("x", Type::Int32), ("d", ty)])).is_none());
        }
    }

    #[test]
    fn quoted_or_string_text_is_parsed_in_one_pass() {
        let rel = input(",", false, &[("x", Type::Int32), ("s", Type::String)]);
        let text = lines(20_000, |i| format!("{i},\"name {i}\"\n"));
        let mut strings = Interner::default();
        let got = parse_input_cols_from(
            &text,
            "r.csv",
            &rel,
            &[true; 2],
            &mut strings,
            crate::cancel::never(),
            0,
        )
        .unwrap();
        assert_eq!(got[1].len(), 20_000);
        let rel = input(",", false, &[("x", Type::Int32), ("y", Type::Int32)]);
        both(&lines(20_000, |i| format!("\"{i}\",{i}\n")), &rel, &[true; 2]).unwrap();
    }
}
