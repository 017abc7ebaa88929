//! Reading the input files of Soufflé relations whose attributes are records or values
//! of algebraic data types, written as Soufflé reads and writes them: a record `[1, a]`
//! (fields separated by `,`, nested records and values inside), a value `$A(1, x)` or `$B`
//! (a branch without fields). Each attribute is parsed by its shape into the relation's
//! leaf columns: a value of an algebraic data type into its tag (the index of its branch
//! in the shape) and the fields of every branch, the branches it does not hold getting
//! the fixed defaults (`0`, `0.0`, `""`) that the program's constructors give them. The
//! rows are handed to the loader as a table ([`GivenTable`]), so keys, the dictionary and
//! statistics are those of any other input.
//!
//! Symbols inside a record or a value are read as Soufflé reads them: a double-quoted
//! symbol with `\`-escapes, or the text up to the next `,` or closing bracket, leading
//! white space skipped. Attributes are separated by the delimiter; when it contains `,`,
//! a delimiter inside brackets or parentheses belongs to the attribute.

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use fox_kernel::InputRel;
use fox_runtime::{GivenTable, RuntimeError};
use fox_sema::core::Type;
use fox_syntax::souffle::{OutShape, SouffleIo};
use std::path::Path;
use std::sync::Arc;

/// The tables of the inputs of `io` that `wanted` reads (the others are not read), each
/// parsed from its file under `data_dir` by its shape.
pub fn shaped_inputs(
    io: &SouffleIo,
    wanted: &[(InputRel, Vec<bool>)],
    data_dir: &Path,
) -> Result<Vec<GivenTable>, RuntimeError> {
    let mut out = Vec::new();
    for input in &io.inputs {
        let Some((rel, _)) = wanted.iter().find(|(r, _)| r.name == input.pred) else {
            continue;
        };
        let path = data_dir.join(&rel.file);
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(&path).map_err(|e| RuntimeError::Data {
            msg: format!("cannot read {shown} (the input of `{}`): {e}", rel.name),
        })?;
        let cols = parse(&text, rel, &input.shape).map_err(|msg| RuntimeError::Data {
            msg: format!("{shown}:{msg}"),
        })?;
        out.push(table(rel, shown, cols)?);
    }
    Ok(out)
}

/// The values of one leaf column.
enum Col {
    Int(Vec<i64>),
    Float(Vec<f64>),
    Str(Vec<String>),
}

impl Col {
    fn new(ty: Type) -> Option<Col> {
        match ty {
            Type::Int64 => Some(Col::Int(Vec::new())),
            Type::Float64 => Some(Col::Float(Vec::new())),
            Type::String => Some(Col::Str(Vec::new())),
            _ => None,
        }
    }

    /// The value a branch not held gives its fields.
    fn push_default(&mut self) {
        match self {
            Col::Int(v) => v.push(0),
            Col::Float(v) => v.push(0.0),
            Col::Str(v) => v.push(String::new()),
        }
    }
}

/// Parses every line of `text` into the leaf columns of `rel`. An error is
/// `LINE: what` (the caller puts the file name before it).
fn parse(text: &str, rel: &InputRel, shape: &[OutShape]) -> Result<Vec<Col>, String> {
    let mut cols = Vec::with_capacity(rel.columns.len());
    for c in &rel.columns {
        cols.push(Col::new(c.ty).ok_or_else(|| {
            format!(
                "1: column `{}` of `{}` is {}, which a Soufflé input does not hold",
                c.name, rel.name, c.ty
            )
        })?);
    }
    let leaves: usize = shape.iter().map(OutShape::columns).sum();
    if leaves != cols.len() {
        return Err(format!(
            "1: `{}` has {} columns but its attributes have {leaves} fields",
            rel.name,
            cols.len()
        ));
    }
    let content = text.trim_end_matches([' ', '\t', '\r', '\n']);
    let lines = if content.is_empty() {
        "".split_terminator('\n')
    } else {
        content.split_terminator('\n')
    };
    for (n, line) in lines.enumerate() {
        let line_no = n + 1;
        if rel.header && n == 0 {
            continue;
        }
        let line = line.strip_suffix('\r').unwrap_or(line);
        let mut fields = split(line, &rel.sep);
        if fields.len() == shape.len() + 1 && fields.last().is_some_and(|f| f.is_empty()) {
            fields.pop();
        }
        if fields.len() != shape.len() {
            return Err(format!(
                "{line_no}: {} fields where `{}` has {} attributes",
                fields.len(),
                rel.name,
                shape.len()
            ));
        }
        let mut k = 0;
        for (a, (field, s)) in fields.iter().zip(shape).enumerate() {
            let at = |msg: String| format!("{line_no}: attribute {} (`{field}`): {msg}", a + 1);
            match s {
                OutShape::Leaf => {
                    leaf(field, &mut cols[k], true).map_err(at)?;
                    k += 1;
                }
                _ => {
                    let mut p = Cursor { s: field, pos: 0 };
                    p.value(s, &mut cols, &mut k, "").map_err(at)?;
                    p.ws();
                    if p.pos < field.len() {
                        return Err(at(format!("`{}` follows the value", &field[p.pos..])));
                    }
                }
            }
        }
    }
    Ok(cols)
}

/// The attributes of a line: split at `sep`; when it contains `,`, a `sep` inside
/// brackets, parentheses or a double-quoted symbol does not split.
fn split<'a>(line: &'a str, sep: &str) -> Vec<&'a str> {
    if !sep.contains(',') {
        return line.split(sep).collect();
    }
    let mut out = Vec::new();
    let (mut depth, mut quoted, mut escaped) = (0i64, false, false);
    let mut start = 0;
    let mut i = 0;
    let bytes = line.as_bytes();
    while i < bytes.len() {
        let c = bytes[i];
        if quoted {
            match c {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => quoted = false,
                _ => {}
            }
        } else {
            match c {
                b'"' => quoted = true,
                b'[' | b'(' => depth += 1,
                b']' | b')' => depth -= 1,
                _ if depth <= 0 && line[i..].starts_with(sep) => {
                    out.push(&line[start..i]);
                    i += sep.len();
                    start = i;
                    continue;
                }
                _ => {}
            }
        }
        i += 1;
    }
    out.push(&line[start..]);
    out
}

/// Parses a plain value of `col`'s type: `whole` for an attribute of its own (the whole
/// field, as the loader reads one), else a token inside a record or a value.
fn leaf(text: &str, col: &mut Col, whole: bool) -> Result<(), String> {
    let t = if whole { text } else { text.trim_end() };
    match col {
        Col::Int(v) => v.push(integer(t.trim()).ok_or_else(|| format!("`{t}` is not a number"))?),
        Col::Float(v) => v.push(t.trim().parse::<f64>().map_err(|_| format!("`{t}` is not a float"))?),
        Col::Str(v) => v.push(text.to_string()),
    }
    Ok(())
}

/// A decimal integer with an optional sign, or `0x…`/`0b…` (after an optional `-`), as
/// Soufflé reads numbers.
fn integer(t: &str) -> Option<i64> {
    let (neg, digits) = match t.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let (radix, digits) = if let Some(h) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        (16, h)
    } else if let Some(b) = digits.strip_prefix("0b").or_else(|| digits.strip_prefix("0B")) {
        (2, b)
    } else {
        (10, digits)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let text = if neg { format!("-{digits}") } else { digits.to_string() };
    i64::from_str_radix(&text, radix).ok()
}

struct Cursor<'a> {
    s: &'a str,
    pos: usize,
}

impl Cursor<'_> {
    fn ws(&mut self) {
        let rest = &self.s[self.pos..];
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        self.ws();
        match self.s[self.pos..].chars().next() {
            Some(d) if d == c => {
                self.pos += c.len_utf8();
                Ok(())
            }
            Some(d) => Err(format!("expected `{c}`, found `{d}`")),
            None => Err(format!("expected `{c}`, found the end of the attribute")),
        }
    }

    /// Parses a value of shape `s` into the columns from `*k` on; `stop` holds the
    /// characters that end a symbol at this level.
    fn value(&mut self, s: &OutShape, cols: &mut [Col], k: &mut usize, stop: &str) -> Result<(), String> {
        self.ws();
        match s {
            OutShape::Leaf => {
                self.token(&mut cols[*k], stop)?;
                *k += 1;
            }
            OutShape::Record(fields) => {
                self.expect('[')?;
                for (i, f) in fields.iter().enumerate() {
                    if i > 0 {
                        self.expect(',')?;
                    }
                    self.value(f, cols, k, ",]")?;
                }
                self.expect(']')?;
            }
            OutShape::Adt(branches) => {
                self.expect('$')?;
                let rest = &self.s[self.pos..];
                let len = rest
                    .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '?' | '.')))
                    .unwrap_or(rest.len());
                let name = &rest[..len];
                self.pos += len;
                let Some(held) = branches.iter().position(|(b, _)| b == name) else {
                    let names: Vec<String> = branches.iter().map(|(b, _)| format!("${b}")).collect();
                    return Err(format!("`${name}` is not a branch of this type ({})", names.join(", ")));
                };
                match &mut cols[*k] {
                    Col::Int(v) => v.push(held as i64),
                    _ => return Err("the tag column of an algebraic data type is not a number".into()),
                }
                *k += 1;
                for (b, (_, fields)) in branches.iter().enumerate() {
                    if b != held {
                        for _ in 0..fields.iter().map(OutShape::columns).sum::<usize>() {
                            cols[*k].push_default();
                            *k += 1;
                        }
                        continue;
                    }
                    if fields.is_empty() {
                        // `$B`, or `$B()` as a program writes it.
                        let save = self.pos;
                        self.ws();
                        if self.s[self.pos..].starts_with("()") {
                            self.pos += 2;
                        } else {
                            self.pos = save;
                        }
                        continue;
                    }
                    self.expect('(')?;
                    for (i, f) in fields.iter().enumerate() {
                        if i > 0 {
                            self.expect(',')?;
                        }
                        self.value(f, cols, k, ",)")?;
                    }
                    self.expect(')')?;
                }
            }
        }
        Ok(())
    }

    /// A plain value inside a record or a value: a double-quoted symbol, or the text up to
    /// a character of `stop`.
    fn token(&mut self, col: &mut Col, stop: &str) -> Result<(), String> {
        let rest = &self.s[self.pos..];
        if let (Col::Str(v), Some(body)) = (&mut *col, rest.strip_prefix('"')) {
            let mut sym = String::new();
            let mut chars = body.char_indices();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some((_, d)) => sym.push(d),
                        None => break,
                    },
                    '"' => {
                        v.push(sym);
                        self.pos += 1 + i + 1;
                        return Ok(());
                    }
                    c => sym.push(c),
                }
            }
            return Err("a quoted symbol without its closing `\"`".into());
        }
        let Some(end) = rest.find(|c: char| stop.contains(c)) else {
            return Err(format!("`{rest}` is not closed (expected one of `{stop}`)"));
        };
        if end == 0 && !matches!(col, Col::Str(_)) {
            return Err(format!("a value is missing before `{}`", &rest[..1]));
        }
        leaf(&rest[..end], col, false)?;
        self.pos += end;
        Ok(())
    }
}

/// The table the loader reads for `rel`.
fn table(rel: &InputRel, shown: String, cols: Vec<Col>) -> Result<GivenTable, RuntimeError> {
    let mut fields = Vec::with_capacity(cols.len());
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(cols.len());
    for (c, col) in rel.columns.iter().zip(cols) {
        let (ty, array): (DataType, ArrayRef) = match col {
            Col::Int(v) => (DataType::Int64, Arc::new(Int64Array::from(v))),
            Col::Float(v) => (DataType::Float64, Arc::new(Float64Array::from(v))),
            Col::Str(v) => (DataType::Utf8, Arc::new(StringArray::from(v))),
        };
        fields.push(Field::new(c.name.clone(), ty, false));
        arrays.push(array);
    }
    let schema = Arc::new(Schema::new(fields));
    let batch = if arrays.is_empty() {
        RecordBatch::new_empty(schema.clone())
    } else {
        RecordBatch::try_new(schema.clone(), arrays).map_err(|e| RuntimeError::Data {
            msg: format!("{shown}: {e}"),
        })?
    };
    Ok(GivenTable {
        relation: rel.name.clone(),
        shown,
        schema,
        batches: vec![batch],
    })
}
