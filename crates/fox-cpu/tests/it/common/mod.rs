//! Test helpers: a seeded generator, comparable cells, and a launch context.
#![allow(dead_code)]

use fox_kernel::{Elem, Kernel};
use fox_runtime::{BackendError, HostCol, LaunchCtx};
use std::cmp::Ordering;
use std::collections::HashMap;

/// Dictionary codes of string constants.
#[derive(Default)]
pub struct Ctx(pub HashMap<String, u32>);

impl LaunchCtx for Ctx {
    fn string_code(&self, s: &str) -> Option<u32> {
        self.0.get(s).copied()
    }
}

pub fn run(k: &Kernel, args: &[&HostCol]) -> Result<Vec<HostCol>, BackendError> {
    fox_cpu::run_kernel(k, args, &Ctx::default())
}

pub fn run_ok(k: &Kernel, args: &[&HostCol]) -> Vec<HostCol> {
    match run(k, args) {
        Ok(v) => v,
        Err(e) => panic!("{k:?} failed: {e}"),
    }
}

/// xorshift64*: deterministic and good enough for test data.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    pub fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

/// One value of a column, ordered as the kernels order it: integers numerically, floats
/// with -0.0 < 0.0 and every NaN last.
#[derive(Clone, Copy, Debug)]
pub enum Cell {
    I(i128),
    F(f64),
}

impl Ord for Cell {
    fn cmp(&self, other: &Cell) -> Ordering {
        match (self, other) {
            (Cell::I(a), Cell::I(b)) => a.cmp(b),
            (Cell::F(a), Cell::F(b)) => match (a.is_nan(), b.is_nan()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                _ => a.total_cmp(b),
            },
            (Cell::I(_), Cell::F(_)) => Ordering::Less,
            (Cell::F(_), Cell::I(_)) => Ordering::Greater,
        }
    }
}
impl PartialOrd for Cell {
    fn partial_cmp(&self, other: &Cell) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for Cell {
    fn eq(&self, other: &Cell) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Cell {}

pub fn cell(c: &HostCol, i: usize) -> Cell {
    match c {
        HostCol::U8(v) => Cell::I(v[i].into()),
        HostCol::I32(v) => Cell::I(v[i].into()),
        HostCol::U32(v) => Cell::I(v[i].into()),
        HostCol::I64(v) => Cell::I(v[i].into()),
        HostCol::U64(v) => Cell::I(v[i].into()),
        HostCol::F64(v) => Cell::F(v[i]),
        HostCol::I128(v) => Cell::I(v[i]),
    }
}

pub fn row(cols: &[&HostCol], i: usize) -> Vec<Cell> {
    cols.iter().map(|c| cell(c, i)).collect()
}

pub fn rows(cols: &[&HostCol]) -> Vec<Vec<Cell>> {
    let n = cols.first().map_or(0, |c| c.len());
    (0..n).map(|i| row(cols, i)).collect()
}

/// Builds a column of `elem` from cells.
pub fn col_of(elem: Elem, cells: &[Cell]) -> HostCol {
    let int = |c: &Cell| match c {
        Cell::I(x) => *x,
        Cell::F(_) => panic!("float cell in an integer column"),
    };
    match elem {
        Elem::U8 => HostCol::U8(cells.iter().map(|c| int(c) as u8).collect()),
        Elem::I32 => HostCol::I32(cells.iter().map(|c| int(c) as i32).collect()),
        Elem::U32 => HostCol::U32(cells.iter().map(|c| int(c) as u32).collect()),
        Elem::I64 => HostCol::I64(cells.iter().map(|c| int(c) as i64).collect()),
        Elem::U64 => HostCol::U64(cells.iter().map(|c| int(c) as u64).collect()),
        Elem::I128 => HostCol::I128(cells.iter().map(int).collect()),
        Elem::F64 => HostCol::F64(
            cells
                .iter()
                .map(|c| match c {
                    Cell::F(x) => *x,
                    Cell::I(_) => panic!("integer cell in a float column"),
                })
                .collect(),
        ),
    }
}

/// Columns (one per elem) from rows.
pub fn cols_of(elems: &[Elem], rows: &[Vec<Cell>]) -> Vec<HostCol> {
    elems
        .iter()
        .enumerate()
        .map(|(c, e)| col_of(*e, &rows.iter().map(|r| r[c]).collect::<Vec<_>>()))
        .collect()
}

/// Bitwise equality of columns (so NaN equals NaN and -0.0 differs from 0.0).
pub fn same(a: &HostCol, b: &HostCol) -> bool {
    match (a, b) {
        (HostCol::F64(x), HostCol::F64(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
        }
        _ => a == b,
    }
}

pub fn assert_cols(got: &[HostCol], want: &[HostCol], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: number of outputs");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(same(g, w), "{what}: output {i} differs\n got: {g:?}\nwant: {w:?}");
    }
}

pub const ELEMS: [Elem; 7] = Elem::ALL;

/// How keys are distributed.
#[derive(Clone, Copy, Debug)]
pub enum Dist {
    /// Uniform over this many distinct values.
    Uniform(u64),
    AllEqual,
    /// Nine rows in ten share one value; the rest are uniform over this many.
    Skewed(u64),
}

pub const DISTS: [Dist; 5] = [
    Dist::Uniform(3),
    Dist::Uniform(1000),
    Dist::Uniform(1 << 40),
    Dist::AllEqual,
    Dist::Skewed(100),
];

/// Sizes around the tile widths a GPU uses, and none of them a multiple.
pub const SIZES: [usize; 12] = [0, 1, 2, 7, 31, 33, 255, 257, 1023, 1025, 3001, 20_011];

const FLOATS: [f64; 10] = [
    -0.0,
    0.0,
    1.5,
    -2.25,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    1e300,
    -7.0,
    0.1,
];

/// A value of `elem` from the index `v` (distinct indices give distinct values within
/// each element type's range, modulo its width).
pub fn value(elem: Elem, v: u64) -> Cell {
    match elem {
        Elem::U8 => Cell::I((v % 256) as i128),
        Elem::I32 => Cell::I(((v % (1 << 32)) as i64 - (1 << 31)) as i32 as i128),
        Elem::U32 => Cell::I((v % (1 << 32)) as i128),
        Elem::I64 => Cell::I((v as i64).wrapping_mul(0x9E37_79B9_7F4A_7C15u64 as i64) as i128),
        Elem::U64 => Cell::I(v.wrapping_mul(0x9E37_79B9_7F4A_7C15) as i128),
        // Values of 38 digits, both signs, differing in the high and the low word.
        Elem::I128 => Cell::I(
            ((v as i128).wrapping_mul(0x9E37_79B9_7F4A_7C15) % 10i128.pow(38)) * if v % 2 == 0 { 1 } else { -1 },
        ),
        Elem::F64 => {
            if v < FLOATS.len() as u64 {
                Cell::F(FLOATS[v as usize])
            } else {
                Cell::F(v as f64 * 0.25 - 1e6)
            }
        }
    }
}

pub fn draw(rng: &mut Rng, dist: Dist) -> u64 {
    match dist {
        Dist::Uniform(d) => rng.below(d),
        Dist::AllEqual => 5,
        Dist::Skewed(d) => {
            if rng.below(10) < 9 {
                1
            } else {
                rng.below(d)
            }
        }
    }
}

pub fn gen_col(rng: &mut Rng, elem: Elem, n: usize, dist: Dist) -> HostCol {
    let cells: Vec<Cell> = (0..n).map(|_| value(elem, draw(rng, dist))).collect();
    col_of(elem, &cells)
}

/// Random rows over `elems`.
pub fn gen_rows(rng: &mut Rng, elems: &[Elem], n: usize, dist: Dist) -> Vec<Vec<Cell>> {
    (0..n)
        .map(|_| elems.iter().map(|e| value(*e, draw(rng, dist))).collect())
        .collect()
}

pub fn elems_pick(rng: &mut Rng, k: usize) -> Vec<Elem> {
    (0..k).map(|_| ELEMS[rng.below(ELEMS.len() as u64) as usize]).collect()
}
