//! The kernel plan: a Harmony-style CFG of basic blocks holding kernel launches over typed
//! buffer variables.
//!
//! # Buffers
//! A buffer variable ([`BufId`]) names a one-dimensional array of one element type
//! ([`Elem`]). Its length is not part of the plan: it is decided when the instruction that
//! defines it runs, by that kernel's contract (the host always knows every live buffer's
//! length, because kernels whose output size depends on the data count first, scan, and
//! then write into an exactly sized buffer). A buffer variable may be defined more than
//! once (in a loop, or by `Move`); each definition replaces the previous value.
//! Buffers are immutable once defined: kernels never write their arguments.
//!
//! A relation is a set of column buffers of equal length (struct of arrays). Column
//! encodings: `int32`/`date` → `I32` (dates are days since 1970-01-01), `int64` → `I64`,
//! `decimal(s)` → `I64` holding `value * 10^s` (a 38-digit decimal, `WideDecimal`: `I128`), `float64` → `F64`, `string` → `U32` (a code
//! into the run's string dictionary), `bool` → `U8` (0 or 1).
//!
//! A relation with no columns (`p()`, or an auxiliary predicate of a negation that shares
//! no variable with its rule) still has a row count (0 or 1 for a set): it is stored as one
//! hidden `U8` column of ones (named `rel.$rows`, with no column type), so that every
//! kernel sees at least one column and every relation has a length.
//!
//! # Memory
//! Every instruction's outputs are allocated when it runs (its definition is its
//! allocation point). `Free` instructions, placed by liveness analysis right after the
//! last use of a value on every path, release them. Peak memory is therefore the largest
//! live set, not the sum of all buffers. A value that is dead along one edge of a branch
//! but live along the other is freed at the start of the successor it is dead in (an edge
//! into a block with several predecessors gets a block of its own holding those frees).
//! After `Move`, two names share one array: the array is released when the last name
//! holding it is freed or redefined.
//!
//! # Strings
//! The dictionary is built when inputs are loaded, in sorted order, so that code order is
//! string order. Strings created during the run (`substr`, `concat`) are appended, after
//! which code order no longer matches string order; operations that need string order
//! (comparisons `<`, `min`/`max`, sorts for output) therefore read a `Rank` dictionary
//! table (`rank[code]` = position of the string in sorted order), which is the identity
//! while no string has been appended. Equality is code equality in every case (the
//! dictionary never holds a string twice). Every string constant of the plan (in `Const`
//! rows, expressions and in-lists) is put in the dictionary before the run starts, so
//! each has a code; a backend gets the code of a string constant from the launch context
//! the runtime passes it.

use fox_sema::core::{AggFunc, ArithOp, CmpOp, Column, Type, Value};
pub use fox_syntax::ast::Span;
use serde::{Deserialize, Serialize};

/// The version of the kernel plan format.
pub const KERNEL_PLAN_VERSION: u32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BufId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BlockId(pub u32);

/// Element type of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Elem {
    /// Flags and booleans (0 or 1).
    U8,
    I32,
    /// String codes and row indices / permutations.
    U32,
    I64,
    /// Counts and offsets.
    U64,
    F64,
    /// 38-digit decimals (`WideDecimal`).
    I128,
}

impl Elem {
    /// Every element type.
    pub const ALL: [Elem; 7] = [
        Elem::U8,
        Elem::I32,
        Elem::U32,
        Elem::I64,
        Elem::U64,
        Elem::F64,
        Elem::I128,
    ];

    /// The name plans and messages use: `u8`, `i32`, `u32`, `i64`, `u64`, `f64`, `i128`.
    pub fn name(self) -> &'static str {
        match self {
            Elem::U8 => "u8",
            Elem::I32 => "i32",
            Elem::U32 => "u32",
            Elem::I64 => "i64",
            Elem::U64 => "u64",
            Elem::F64 => "f64",
            Elem::I128 => "i128",
        }
    }

    pub fn size(self) -> usize {
        match self {
            Elem::U8 => 1,
            Elem::I32 | Elem::U32 => 4,
            Elem::I64 | Elem::U64 | Elem::F64 => 8,
            Elem::I128 => 16,
        }
    }

    /// The storage of a column type.
    pub fn of(ty: Type) -> Elem {
        match ty {
            Type::Int32 | Type::Date => Elem::I32,
            Type::Int64 | Type::Decimal(_) => Elem::I64,
            Type::WideDecimal(_) => Elem::I128,
            Type::Float64 => Elem::F64,
            Type::String => Elem::U32,
            Type::Bool => Elem::U8,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelPlan {
    pub version: u32,
    /// Every buffer variable, indexed by `BufId`.
    pub buffers: Vec<BufVar>,
    /// The base relations read from data, indexed by `LoadInput::input`.
    pub inputs: Vec<InputRel>,
    pub blocks: Vec<Block>,
    pub entry: BlockId,
    /// The largest number of buffer variables live at once, from liveness analysis.
    pub planned_peak_buffers: usize,
    /// The program text the plan was compiled from, so that run-time errors can show the
    /// rule they come from (see [`Instr::Launch::origin`]); empty when unknown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceFile>,
    /// The operators whose rows a run counts, indexed by [`Instr::Observe::id`]; empty
    /// unless the plan was made to observe them (see [`crate::LowerOptions`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observed: Vec<Observed>,
}

/// One operator of the physical plan whose result a run counts (`--timing`, `.explain
/// analyze`), with the planner's estimate of its rows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Observed {
    /// The RA block's label and the temp: `b1.t9`.
    pub label: String,
    /// The operator, as `--emit physical` prints it (shortened).
    pub op: String,
    /// The estimated rows of one execution, when the `estimate` pass ran.
    pub est: Option<f64>,
}

/// One file of the program a plan was compiled from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SourceFile {
    /// The name diagnostics show (the path as the user gave it).
    pub name: String,
    /// The offset of the file's first byte in the spans of the plan: a span `s` lies in
    /// this file when `start <= s.start` and `s.end <= start + text.len()`.
    pub start: u32,
    pub text: String,
}

impl KernelPlan {
    /// The file holding `span`, with the span made relative to it.
    pub fn locate(&self, span: Span) -> Option<(&SourceFile, Span)> {
        self.sources.iter().find_map(|f| {
            let end = u64::from(f.start) + f.text.len() as u64;
            (f.start <= span.start && span.start <= span.end && u64::from(span.end) <= end).then(|| {
                (
                    f,
                    Span {
                        start: span.start - f.start,
                        end: span.end - f.start,
                    },
                )
            })
        })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BufVar {
    /// Readable name: `edge.x`, `t12.perm`, `delta.path.y`.
    pub name: String,
    pub elem: Elem,
    /// The column type when the buffer holds a relation column.
    pub ty: Option<Type>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputRel {
    /// The predicate name.
    pub name: String,
    pub columns: Vec<Column>,
    /// Path relative to the data directory.
    pub file: String,
    pub sep: String,
    /// The columns that identify a row (`key (…)`); empty when none is declared. The
    /// loader rejects data in which two rows share them.
    #[serde(default)]
    pub key: Vec<usize>,
    /// The file's first line is a header naming the columns (checked against them), not
    /// data.
    #[serde(default)]
    pub header: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Block {
    pub label: String,
    pub instrs: Vec<Instr>,
    pub term: Terminator,
    /// In a run over several devices, each device runs the block by itself: its
    /// terminator is decided by the device's own test, never collectively, and it holds
    /// no collective (`Exchange`, `StrFn`, `Output`). The loop over the boxes the devices
    /// claim ([`Kernel::Claim`]) is made of such blocks, so each device runs it as many
    /// times as it takes boxes. On one device it changes nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub local: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Terminator {
    Jump(BlockId),
    Halt,
    /// Continue with `body` while any buffer of `nonempty` has at least one element
    /// (the first column of each delta relation), otherwise with `exit`.
    LoopIf {
        nonempty: Vec<BufId>,
        body: BlockId,
        exit: BlockId,
    },
    /// Continue with `then` when any buffer of `nonempty` has at least one element,
    /// otherwise with `otherwise` (a branch, not a loop test).
    If {
        nonempty: Vec<BufId>,
        then: BlockId,
        otherwise: BlockId,
    },
}

impl Terminator {
    pub fn successors(&self) -> Vec<BlockId> {
        match self {
            Terminator::Jump(b) => vec![*b],
            Terminator::Halt => Vec::new(),
            Terminator::LoopIf { body, exit, .. } => vec![*body, *exit],
            Terminator::If { then, otherwise, .. } => vec![*then, *otherwise],
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Instr {
    /// `outs := kernel(args)`. `origin` is the part of the program the launch computes
    /// (a span into [`KernelPlan::sources`]), named by the errors it raises.
    Launch {
        kernel: Kernel,
        args: Vec<BufId>,
        outs: Vec<BufId>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        origin: Option<Span>,
    },
    /// `dst := src` (the same immutable array under another name; no copy). The array
    /// lives until every name holding it has been freed or redefined.
    Move { dst: BufId, src: BufId },
    /// The value of `buf` is dead: release it.
    Free { buf: BufId },
    /// A check of the program's meaning at run time: when `args` (columns of equal length)
    /// hold a row, the run stops with the error `check` describes, showing the values of
    /// that row and located at `origin` (a span into [`KernelPlan::sources`]).
    Assert {
        check: Check,
        args: Vec<BufId>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        origin: Option<Span>,
    },
    /// Count the rows of an operator's result (entry `id` of [`KernelPlan::observed`]):
    /// the length of the first of `bufs`, its columns that are still computed. It reads
    /// no data and leaves every buffer as it is; it follows the definition of its
    /// buffers, and never is the last reader of a buffer.
    Observe { id: u32, bufs: Vec<BufId> },
    /// Emit a result relation: download `cols` and write predicate `name`, ordered by
    /// `order` (column index, descending) then ascending on the remaining columns, at
    /// most `limit` rows. String columns are ordered by string value. A relation with no
    /// columns has empty `columns` and one hidden `U8` column in `cols` giving its row count.
    Output {
        name: String,
        columns: Vec<Column>,
        cols: Vec<BufId>,
        order: Vec<(usize, bool)>,
        limit: Option<u64>,
    },
}

/// A data-parallel primitive. Each variant documents its arguments, outputs and contract.
/// "rows" means the common length of a group of column buffers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Kernel {
    // ---- data in ----------------------------------------------------------------
    /// args: none. outs: the columns of `KernelPlan::inputs[input]`, loaded from data. In a
    /// run over several devices each device loads a contiguous slice of the rows (the
    /// slices in device order are the input); with `whole` every row (the input is
    /// replicated: each device holds what one device holds); with `hash` (key columns,
    /// not with `whole`) the rows [`device_of`]`(`[`row_hash`] of those columns`)` gives
    /// it, in their order: what slices exchanged by `Exchange::Hash { cols: hash }` hold,
    /// row for row, with no row moving between devices.
    LoadInput {
        input: usize,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        whole: bool,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        hash: Vec<usize>,
    },
    /// args: none. outs: one buffer per column, `rows[i][c]` in `outs[c]`. Values have the
    /// column types `types`.
    Const { types: Vec<Type>, rows: Vec<Vec<Value>> },
    /// args: none. outs: one buffer indexed by string code, computed from the dictionary
    /// as it is when the instruction runs (its length is the dictionary's size).
    DictTable { op: DictOp },

    // ---- expressions ---------------------------------------------------------------
    /// args: `n_cols` columns of equal length, then dictionary tables. outs: one buffer of
    /// the same length, `out[i] = expr(row i)`. An expression with no column arguments
    /// (constants only) takes one column anyway to give the length. Errors (division by
    /// zero, decimal or integer overflow) stop the run with a message naming the
    /// expression.
    Eval { expr: KExpr, n_cols: usize },
    /// args: the argument columns of a built-in that works on the text of strings
    /// (`substr`, `concat`, `to_string`, `to_number`, `to_unsigned`), of equal length,
    /// except that an argument after the first may have one row, its value for every row
    /// ([`StrFunc::params`]). outs: one column of [`StrFunc::output`], as long as the
    /// first argument: string codes, or
    /// the integers `to_number` reads. Runs on the host side (it adds strings to the
    /// dictionary, reads their text).
    StrFn { func: StrFunc },

    // ---- movement ------------------------------------------------------------------
    /// args: `flags` (U8), then k columns of the same length. outs: k columns holding
    /// the rows whose flag is non-zero, in their original order (stream compaction).
    Compact,
    /// args: `idx` (U32), then k columns. outs: k columns, `out[i] = col[idx[i] + shift]`.
    Gather { shift: u32 },
    /// args: `parts` groups of `width` columns each (group g is args[g*width..]).
    /// outs: `width` columns: the groups concatenated in order (bag union).
    Concat { parts: usize, width: usize },
    /// args: k columns. outs: k columns, rows `start .. min(start + len, rows)`.
    Slice { start: u64, len: u64 },

    // ---- sorting, sets -------------------------------------------------------------
    /// args: k key columns, then one `Rank` table if any key has `by_rank`. outs: `perm`
    /// (U32): the stable permutation that orders rows by the keys lexicographically
    /// (`desc[i]` reverses key i; `by_rank[i]` orders a string key by string value
    /// instead of by code). Floats order by total order (-0.0 < 0.0, NaN last).
    SortPerm { desc: Vec<bool>, by_rank: Vec<bool> },
    /// args: k columns sorted lexicographically. outs: flags (U8): 1 where row i differs
    /// from row i-1 in any column (row 0 is always 1).
    AdjacentDistinct,
    /// args: `nkeys` key columns sorted lexicographically (with `nkeys == 0`, one column
    /// of any element type giving the row count: every row has the same, empty, key).
    /// outs: `row` (U32): one row holding the first `i` such that rows `i` and `i + 1`
    /// have equal keys, or no row when no two adjacent rows do.
    RepeatedKey { nkeys: usize },
    /// args: `nkeys` left key columns, `nkeys` right key columns; both sides sorted
    /// ascending on their keys (by code for strings). outs: `counts` (U64) per left row:
    /// the number of right rows with equal keys. With `nkeys == 0` (a cross product) the
    /// args are instead one column of the left and one of the right (any element types,
    /// unsorted), which give the row counts, and every pair of rows matches.
    JoinCount { nkeys: usize },
    /// args: `counts` (U64). outs: `offsets` (U64, same length, exclusive prefix sum) and
    /// `total` (U64, length 1).
    ExclusiveScan,
    /// args: `nkeys` left keys, `nkeys` right keys (sorted as for `JoinCount`), `offsets`
    /// and `total` from `ExclusiveScan` of the counts. outs: `left_idx`, `right_idx`
    /// (U32, length `total`): every matching pair, ordered by left row then right row.
    /// With `nkeys == 0` the key args are one column of each side, as for `JoinCount`.
    JoinWrite { nkeys: usize },
    /// args: `nkeys` left keys, then `nkeys` keys of each of one or more right sides, every
    /// side sorted ascending on the keys. outs: flags (U8) per left row: 1 when a row of
    /// some right side has equal keys (`anti`: when none does). Semi-join, anti-join, and
    /// set difference (keys = all columns); several right sides subtract a relation held
    /// in sorted runs at once. With `nkeys == 0` the args are one column of each side, as
    /// for `JoinCount`: every left flag is 1 when some right side has a row (`anti`: when
    /// none has).
    MatchFlags { nkeys: usize, anti: bool },
    /// args: `width` columns of `a`, then `width` columns of `b`; each sorted ascending on
    /// all columns and duplicate-free. outs: `width` columns: `a ∪ b`, sorted and
    /// duplicate-free (merge-based union). `disjoint`: the plan guarantees that `a` and
    /// `b` share no row, so the kernel merges without looking for equal rows; a backend
    /// that meets a shared row anyway fails (fox-cpu) or keeps both copies (fox-cuda).
    MergeUnion {
        width: usize,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        disjoint: bool,
    },
    /// args: `nkeys` key columns sorted ascending, then one value column per aggregate
    /// (none for `count`); when `nkeys == 0` and every aggregate is a `count`, one column of
    /// the input (any element type) giving the row count; then one `Rank` table if a
    /// `min`/`max` is over strings. outs:
    /// the key columns with one row per run of equal keys (in order), then one column per
    /// aggregate. With `nkeys == 0` the whole input is one group (no row when empty).
    /// Sums of integers and decimals are exact (128-bit accumulation) and fail on
    /// overflow of the result type; `avg` of a decimal or integer is
    /// `round_half_away(sum * 10^(out_scale - in_scale) / count)`.
    ReduceByKey { nkeys: usize, aggs: Vec<AggSpec> },
    /// A filter and an aggregation in one kernel. args: `n_cols` columns of equal length,
    /// the first `nkeys` of them the group keys, then the dictionary tables the
    /// expressions read (as for `Eval`). The rows aggregated are those where `filter`
    /// holds (every row without one); the value of aggregate j is `exprs[j]` evaluated on
    /// the row (`None` for `count`). outs: as `ReduceByKey` over those rows and values
    /// sorted on the keys (one row per group, ascending by code; then one column per
    /// aggregate; no row for no rows). The result, and the error when an expression
    /// fails on a row that passes the filter, are those of `Eval` of the filter,
    /// `Compact` of the columns, `Eval` of each value, `SortPerm` and `Gather` by the
    /// keys, then `ReduceByKey`; a row the filter drops is never evaluated further.
    /// No aggregate is a `min`/`max` of strings.
    FusedReduce {
        filter: Option<KExpr>,
        nkeys: usize,
        aggs: Vec<AggSpec>,
        exprs: Vec<Option<KExpr>>,
        n_cols: usize,
    },

    // ---- leapfrog triejoin levels ---------------------------------------------------
    /// args: m columns of a relation sorted ascending on all columns, duplicate-free.
    /// outs: for each level d < m: `values_d` (the value of column d of each distinct
    /// prefix of length d+1, in order), and for d < m-1 also `start_d` (U32, length
    /// `len(values_d) + 1`): the children of node j of level d are the nodes
    /// `start_d[j] .. start_d[j+1]` of level d+1. Order of outs: values_0, start_0,
    /// values_1, start_1, …, values_{m-1}.
    TrieBuild { arity: usize },
    /// args: `values_0` of a trie. outs: `lo`, `hi` (U32, one row each): `0` and
    /// `len(values_0)`, the range of the root's children.
    RootRange,
    /// args: `lo`, `hi` (U32). outs: `counts` (U64): `hi - lo` per row.
    RangeCount,
    /// args: `lo` (U32), `offsets` and `total` (U64, from `ExclusiveScan` of `RangeCount`),
    /// and optionally `window` (U64, two rows `start`, `end` from [`Kernel::Window`]).
    /// outs: `parent` (U32: the row each output comes from) and `pos` (U32: `lo[parent] + k`
    /// for the k-th output of that parent), length `total` (load-balanced expansion); with
    /// a window, only the outputs `start .. end` of that sequence (length `end - start`).
    Expand,
    /// args: `total` (U64, one row: the number of outputs of an expansion), then optionally
    /// `prev` (U64: the window of the previous round). outs: `window` (U64): the outputs
    /// of the next round as two rows `start`, `end`, where `start` is the `end` of `prev`
    /// (0 without `prev`) and `end = min(total, start + n)`, `n` ≥ 1 being the number of
    /// outputs of `row_bytes` bytes each that fit half the memory the run may still use,
    /// at most the run's window cap (`RunOptions::window_rows`, at most 2^32 − 1, so that
    /// a round's rows stay u32-addressed), and at most `max_rows` when it is set; no rows
    /// when `start` has reached `total` (no
    /// round is left). A level of a multi-way join whose expansion may not fit in memory
    /// runs once per window (multi-round expansion); an inequality join probes a window
    /// of its probing rows at a time, at most `max_rows` so that a window's ranges stay
    /// u32-addressed. Runs on the host side: the runtime knows the memory.
    Window {
        row_bytes: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_rows: Option<u64>,
    },
    /// args: `a`, `b` (one column each, any element types; only their lengths are read).
    /// outs: `flag` (U8): one row when `len(a) * factor > len(b)`, no row otherwise (the
    /// test of a `LoopIf` that branches on it). Runs on the host side: the runtime knows
    /// every buffer's length. A tiered relation folds a run into the next when it
    /// outgrows it ([`fox_phys::Tiering`]).
    Outgrows { factor: u32 },
    /// The next window of an expansion's outputs a device works on, taken from the boxes
    /// shared by the devices of a run: contiguous runs of the outputs, in batches of one
    /// box per device, each batch's boxes holding half of the outputs left over the
    /// devices and none fewer than `total/boxes` (so the first boxes are large and the
    /// last small; the runtime's `BoxCut`), and each device takes the next box not yet
    /// taken from a counter the run's devices share (work stealing: a device with cheap
    /// boxes takes more of them). args: `total` (U64, one row), then
    /// optionally `prev` (U64: this device's previous window). outs: `window` (U64): two
    /// rows `start`, `end` (as [`Kernel::Window`]'s, never empty), or no rows when every
    /// box has been taken. Without `prev` the device starts on the boxes of a new
    /// expansion (the `k`-th first claim of every device shares the `k`-th counter);
    /// with `prev` it goes on from its previous window. With `row_bytes`, a window holds
    /// at most the outputs of `row_bytes` bytes each that fit half the memory the run may
    /// still use (as `Window` sizes its rounds), so a box may take several windows; each
    /// box is still taken by one device. Boxes are taken in increasing order on each
    /// device. On one device it takes every box in order. Runs on the host side: the
    /// runtime holds the counter.
    Claim {
        boxes: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        row_bytes: Option<u64>,
    },
    /// Moves rows between the devices of a run over several devices (`--devices N`): a
    /// collective, every device launches it at the same point of the plan. args: `width`
    /// columns of one relation (the device's part); outs: `width` columns of the same
    /// element types (the part the device holds afterwards). What each device receives
    /// is given by `to` ([`Exchange`]); the rows a device receives come in the order of
    /// the devices that sent them, each sender's rows in their order, so the result does
    /// not depend on timing. On one device every variant is the identity. Runs in the
    /// runtime (it moves data between backends), never on a backend.
    Exchange { width: usize, to: Exchange },
    /// args: `values` (a trie level), `lo`, `hi` (U32, per row), `needle` (per row, same
    /// element type as `values`). outs: `found` (U8) and `pos` (U32): whether `needle`
    /// occurs in the sorted slice `values[lo..hi]`, and its index when it does (otherwise
    /// the first index of the slice whose value is not below `needle`, `hi` if none).
    SortedSearch,
    /// The last level of a counting leapfrog triejoin. args: `ways` triples `values`,
    /// `lo`, `hi`: a trie level (sorted, strictly ascending, the same element type for
    /// every triple) and a range of it per row (U32; every triple has the same rows).
    /// outs: `n` (I64): one row holding the number of (row, value) pairs such that the
    /// value occurs in the range of every triple of that row, or no row when there is none
    /// (the count of an aggregate over no rows). Each row's work is its smallest range.
    IntersectCount { ways: usize },
    /// args: `ways` pairs `lo`, `hi` (U32, the same rows). outs: `lo`, `hi` (U32): per row,
    /// the pair with the fewest values (`hi - lo`; the first of equals), from which a
    /// level of a multi-way join expands when its ranges index the same trie level.
    MinRange { ways: usize },
    /// The range of a sorted relation within per-row keys and bounds (a band join's
    /// search). args: the searched side, `nkeys` key columns then `values` (`I32` or
    /// `I64`), sorted ascending on (keys, values); then the probing rows, `nkeys` key
    /// columns (each of its searched key's element type), the column of `lower` when it is
    /// set and the column of `upper` when it is set (`values`' element type); at least one
    /// bound. A bound of row `i` is its column's value plus the bound's offset, computed
    /// exactly (never overflowing). outs: `lo`, `hi` (U32, per probing row): the range of
    /// searched rows whose keys equal the row's keys and whose value is `≥` the lower bound
    /// (`>` when open) and `≤` the upper bound (`<` when open); without a bound the range
    /// extends to the first or last row of equal keys; `hi` is raised to `lo` where the
    /// bounds cross, so every range `lo .. hi` is well formed. Without any bound (an index
    /// nested-loop join's search) there is no `values` argument and at least one key: the
    /// args are the searched side's `nkeys` sorted key columns and the probing rows' `nkeys`
    /// key columns, and the range is the run of equal keys (`lo == hi`, at the first row
    /// after smaller keys, when there is none).
    BoundRange {
        nkeys: usize,
        lower: Option<RangeBound>,
        upper: Option<RangeBound>,
    },

    // ---- hash joins -------------------------------------------------------------------
    /// The table of a hash join's build side. args: `nkeys` ≥ 1 key columns sorted
    /// ascending (by code for strings), fewer than `u32::MAX` rows. outs: `table` (U32):
    /// an open-addressing table whose length is a power of two, at least twice the
    /// number of runs of equal keys (and at least 2); a slot is empty (0) or holds 1 +
    /// the first row of a run, every run is in exactly one slot, reachable from its
    /// key's hash by linear probing (wrapping) without crossing an empty slot. Keys are
    /// equal as `JoinCount` compares them (floats by their total-order image: every NaN
    /// equal, -0.0 not equal to 0.0). Where a run lands, the hash and the length beyond
    /// the bound belong to the backend, and so may the layout: a backend may build
    /// another table (whose length is then no power of two), such as the GPU's
    /// radix-partitioned table beyond a size. Only [`Kernel::HashProbe`] and
    /// [`Kernel::HashMatch`] of the same backend read a table.
    HashBuild { nkeys: usize },
    /// args: the build side's `nkeys` key columns (sorted, as given to `HashBuild`), its
    /// `table`, then the probing rows' `nkeys` key columns (unsorted; each of its build
    /// key's element type). outs: `lo`, `hi` (U32, per probing row): the run of build rows
    /// whose keys equal the row's (`lo == hi == 0` when there is none). The result does
    /// not depend on where the table placed the runs, nor on its layout. A table that is
    /// no power of two of at least 2 slots, nor another layout of the backend's built
    /// over this build side, is an error.
    HashProbe { nkeys: usize },
    /// args: as [`Kernel::HashProbe`]. outs: flags (U8) per probing row: 1 when some build
    /// row has equal keys (`anti`: when none does); a hash semi-join, anti-join or
    /// difference keeps the probing rows flagged, in their order.
    HashMatch { nkeys: usize, anti: bool },

    // ---- nested-loop joins ------------------------------------------------------------
    /// args: `nkeys` ≥ 1 left key columns, then `nkeys` right key columns (each of its
    /// left key's element type); neither side sorted. outs: `counts` (U64) per left row:
    /// the number of right rows with equal keys (equal as `JoinCount` compares them),
    /// found by comparing with every right row.
    NestedLoopCount { nkeys: usize },
    /// args: the keys of [`Kernel::NestedLoopCount`], then `offsets` and `total` from
    /// `ExclusiveScan` of its counts. outs: `left_idx`, `right_idx` (U32, length `total`):
    /// every pair of rows with equal keys, ordered by left row then right row. Offsets
    /// that are not the scan of the counts are an error.
    NestedLoopWrite { nkeys: usize },
    /// args: as [`Kernel::NestedLoopCount`]. outs: flags (U8) per left row: 1 when some
    /// right row has equal keys (`anti`: when none does).
    NestedLoopMatch { nkeys: usize, anti: bool },
    /// The merge-sort tree of an inequality join's searched side over its second bounded
    /// column. args: `d` (`I32` or `I64`, n rows: the second column in the order the side
    /// is searched in). outs: `tree` (U32, length `n · ineq_levels(n)`): level `l` (at
    /// `l · n`) holds, for each aligned block of `2^l` positions `j·2^l .. min((j+1)·2^l,
    /// n)`, those positions ordered by `(d, position)`; level 0 is the identity. At most
    /// `u32::MAX` entries (else an error naming the sizes).
    IneqTree,
    /// Per probing row, the ranges of an inequality join's tree that hold the positions
    /// within the row's range of the first column and within its bounds on the second.
    /// args: `d` (`I32` or `I64`, n rows), its `tree` (from [`Kernel::IneqTree`]), `lo`,
    /// `hi` (U32, per probing row: a range of positions, `lo ≤ hi ≤ n`, from
    /// [`Kernel::BoundRange`]), then the column of `lower` when it is set and that of
    /// `upper` when it is set (`d`'s element type, per probing row); at least one bound.
    /// outs: `lo`, `hi` (U32) and `row` (U32, the probing row of each range), length `rows
    /// · 2 · ineq_levels(n)`: slot `s` of row `i` is at `i · 2L + s`. `lo .. hi` is split
    /// into the fewest aligned blocks of the tree (at most two per level); the block of
    /// level `l` starting at `lo`'s side is slot `l`, the one ending at `hi`'s side slot
    /// `2L - 1 - l` (so the slots follow the positions), and each slot's range is the part
    /// of its block (as indices into `tree`) whose `d` is `≥` the lower bound (`>` when
    /// open) and `≤` the upper bound (`<` when open), bounds computed exactly (a column's
    /// value plus the offset in 128 bits); unused slots and crossing bounds are empty
    /// (`hi = lo`). At most `u32::MAX` ranges (else an error naming the sizes).
    IneqRanges {
        lower: Option<RangeBound>,
        upper: Option<RangeBound>,
    },
}

/// The number of levels of an inequality join's tree over `n` rows
/// ([`Kernel::IneqTree`]): the least `L ≥ 1` with `2^(L-1) ≥ n`.
pub const fn ineq_levels(n: usize) -> usize {
    let mut l = 1;
    while (1usize << (l - 1)) < n {
        l += 1;
    }
    l
}

/// Where the rows of an [`Kernel::Exchange`] go, on a run over `n` devices.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Exchange {
    /// Each row to the device [`device_of`]`(`[`row_hash`] of its `cols`, `n`)`: rows
    /// equal on `cols` meet on one device. With no `cols`, every row to device 0.
    Hash { cols: Vec<usize> },
    /// Every row to device 0; the others are left with no rows.
    Gather,
    /// Every device receives every device's rows (all-gather).
    Broadcast,
    /// Every device holds the same rows (a replicated relation) and keeps those it owns
    /// by `Hash { cols }`'s rule: no row moves between devices. With no `cols`, device 0
    /// keeps every row and the others none.
    Keep { cols: Vec<usize> },
}

/// The hash of a row's values on the columns of an [`Exchange::Hash`], the same on every
/// backend: each value's bits as a `u64` (`value_bits_*`), folded by SplitMix64 steps.
pub fn row_hash(values: impl IntoIterator<Item = u64>) -> u64 {
    let mut h: u64 = 0x243F_6A88_85A3_08D3;
    for v in values {
        h = mix64(h ^ mix64(v));
    }
    h
}

/// The device of a row of hash `hash` among `devices` (at least 1).
pub fn device_of(hash: u64, devices: usize) -> usize {
    // Multiply-shift of the high bits: uniform without a division.
    ((u128::from(hash) * devices as u128) >> 64) as usize
}

/// SplitMix64's finaliser: a bijection of `u64` mixing every bit into every other.
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The bits [`row_hash`] reads of an `I32` value: sign-extended (equal `I32` and `I64`
/// values give equal bits). `U8`, `U32` and `U64` are zero-extended, `I64` taken as is.
pub fn value_bits_i32(v: i32) -> u64 {
    v as i64 as u64
}

/// The bits [`row_hash`] reads of an `F64` value: `-0.0` as `0.0` (they compare equal).
pub fn value_bits_f64(v: f64) -> u64 {
    if v == 0.0 {
        0
    } else {
        v.to_bits()
    }
}

/// The bits [`row_hash`] reads of an `I128` value: its two halves folded.
pub fn value_bits_i128(v: i128) -> u64 {
    (v as u64) ^ mix64((v >> 64) as u64)
}

/// One bound of a [`Kernel::BoundRange`]: a column plus a constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RangeBound {
    /// Added to the bound column's value.
    pub offset: i64,
    /// The bound excludes the value equal to it (`<`, `>`).
    pub open: bool,
}

impl Instr {
    /// Whether every device of a run over several meets the others at this instruction
    /// (a collective): an exchange, the interning of new strings, an output. Never in a
    /// [`Block::local`] block.
    pub fn is_collective(&self) -> bool {
        match self {
            Instr::Output { .. } => true,
            Instr::Launch { kernel, .. } => matches!(kernel, Kernel::Exchange { .. } | Kernel::StrFn { .. }),
            _ => false,
        }
    }
}

impl Kernel {
    /// Whether the runtime runs this kernel itself (it reads files, the dictionary, the
    /// memory left, buffer lengths or other devices) and never hands it to a backend.
    pub fn runs_in_runtime(&self) -> bool {
        matches!(
            self,
            Kernel::LoadInput { .. }
                | Kernel::Const { .. }
                | Kernel::DictTable { .. }
                | Kernel::StrFn { .. }
                | Kernel::Window { .. }
                | Kernel::Outgrows { .. }
                | Kernel::Claim { .. }
                | Kernel::Exchange { .. }
        )
    }

    /// The short name of a kernel, for messages and timing tables.
    pub fn name(&self) -> &'static str {
        match self {
            Kernel::LoadInput { .. } => "LoadInput",
            Kernel::Const { .. } => "Const",
            Kernel::DictTable { .. } => "DictTable",
            Kernel::Eval { .. } => "Eval",
            Kernel::StrFn { .. } => "StrFn",
            Kernel::Compact => "Compact",
            Kernel::Gather { .. } => "Gather",
            Kernel::Concat { .. } => "Concat",
            Kernel::Slice { .. } => "Slice",
            Kernel::SortPerm { .. } => "SortPerm",
            Kernel::AdjacentDistinct => "AdjacentDistinct",
            Kernel::RepeatedKey { .. } => "RepeatedKey",
            Kernel::JoinCount { .. } => "JoinCount",
            Kernel::ExclusiveScan => "ExclusiveScan",
            Kernel::JoinWrite { .. } => "JoinWrite",
            Kernel::MatchFlags { .. } => "MatchFlags",
            Kernel::MergeUnion { .. } => "MergeUnion",
            Kernel::ReduceByKey { .. } => "ReduceByKey",
            Kernel::FusedReduce { .. } => "FusedReduce",
            Kernel::TrieBuild { .. } => "TrieBuild",
            Kernel::RootRange => "RootRange",
            Kernel::RangeCount => "RangeCount",
            Kernel::Expand => "Expand",
            Kernel::Window { .. } => "Window",
            Kernel::Outgrows { .. } => "Outgrows",
            Kernel::Claim { .. } => "Claim",
            Kernel::Exchange { .. } => "Exchange",
            Kernel::SortedSearch => "SortedSearch",
            Kernel::IntersectCount { .. } => "IntersectCount",
            Kernel::MinRange { .. } => "MinRange",
            Kernel::BoundRange { .. } => "BoundRange",
            Kernel::HashBuild { .. } => "HashBuild",
            Kernel::HashProbe { .. } => "HashProbe",
            Kernel::HashMatch { .. } => "HashMatch",
            Kernel::NestedLoopCount { .. } => "NestedLoopCount",
            Kernel::NestedLoopWrite { .. } => "NestedLoopWrite",
            Kernel::NestedLoopMatch { .. } => "NestedLoopMatch",
            Kernel::IneqTree => "IneqTree",
            Kernel::IneqRanges { .. } => "IneqRanges",
        }
    }
}

/// What an [`Instr::Assert`] checks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Check {
    /// The functional predicate `pred` (its first `keys` columns are the key, its last the
    /// value) gives one key two values. The args are two rows of the predicate that share
    /// the key: the columns of the first row, then those of the second.
    Functional {
        pred: String,
        columns: Vec<Column>,
        keys: usize,
    },
}

/// One aggregate of a `ReduceByKey`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AggSpec {
    pub func: AggFunc,
    /// The type of the value column (`None` for `count`).
    pub input: Option<Type>,
    /// The type of the result column.
    pub output: Type,
}

/// Tables computed from the string dictionary, indexed by code.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DictOp {
    /// U32: the position of each string in sorted order.
    Rank,
    /// U8: SQL LIKE with `%` and `_` (case-sensitive).
    Like(String),
    /// U8: starts with the prefix.
    Prefix(String),
    /// U8: the string's bytes match the whole of the regular expression (the Rust
    /// `regex` crate's syntax, compiled for bytes with Unicode off).
    Regex(String),
    /// I32: length in characters.
    Strlen,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StrFunc {
    /// args: string, start (I64), length (I64): 1-based, as SQL `substring`.
    Substr,
    /// args: two strings.
    Concat,
    /// args: one I64 column. The decimal digits of each value (Soufflé's `to_string`).
    ToString,
    /// args: one string column; outs: one I64 column (not strings): the integer each
    /// string starts with, as Soufflé's `to_number` reads it ([`crate::parse_souffle_int`]);
    /// a string that holds none, or one out of range, stops the run naming it.
    ToNumber,
    /// As `ToNumber`, for Soufflé's `to_unsigned`: a negative value stops the run too.
    ToUnsigned,
}

impl StrFunc {
    /// The element type of the output column.
    pub fn output(self) -> Elem {
        match self {
            StrFunc::Substr | StrFunc::Concat | StrFunc::ToString => Elem::U32,
            StrFunc::ToNumber | StrFunc::ToUnsigned => Elem::I64,
        }
    }

    /// The element types of the arguments.
    pub fn params(self) -> &'static [Elem] {
        match self {
            StrFunc::Substr => &[Elem::U32, Elem::I64, Elem::I64],
            StrFunc::Concat => &[Elem::U32, Elem::U32],
            StrFunc::ToString => &[Elem::I64],
            StrFunc::ToNumber | StrFunc::ToUnsigned => &[Elem::U32],
        }
    }

    /// The function's name in plans and messages.
    pub fn name(self) -> &'static str {
        match self {
            StrFunc::Substr => "substr",
            StrFunc::Concat => "concat",
            StrFunc::ToString => "to_string",
            StrFunc::ToNumber => "to_number",
            StrFunc::ToUnsigned => "to_unsigned",
        }
    }
}

/// A typed scalar expression over the arguments of an `Eval`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KExpr {
    pub kind: KExprKind,
    pub ty: Type,
}

impl KExpr {
    /// Whether the expression or a part of it is a 38-digit decimal (backends then compute
    /// its integer-stored values in 128 bits).
    pub fn has_wide(&self) -> bool {
        if matches!(self.ty, Type::WideDecimal(_)) {
            return true;
        }
        match &self.kind {
            KExprKind::Col(_) | KExprKind::Const(_) => false,
            KExprKind::Table(_, x)
            | KExprKind::Cast(x)
            | KExprKind::Neg(x)
            | KExprKind::Not(x)
            | KExprKind::In(x, _) => x.has_wide(),
            KExprKind::Arith(_, a, b) | KExprKind::Cmp(_, a, b) => a.has_wide() || b.has_wide(),
            KExprKind::And(xs) | KExprKind::Or(xs) | KExprKind::Call(_, xs) => xs.iter().any(KExpr::has_wide),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum KExprKind {
    /// Argument column `i` (i < n_cols).
    Col(usize),
    /// `table[index]` where `table` is argument `n_cols + t` (a dictionary table) and
    /// `index` is a string code. The entry reads as the node's `ty`: a `Rank` entry (U32)
    /// as `int64`, a `Like` or `Prefix` entry (U8) as `bool`, a `Strlen` entry as `int32`.
    Table(usize, Box<KExpr>),
    Const(Value),
    /// Widening, decimal rescale (scale up exact; scale down rounds half away from zero),
    /// `to_float`, `to_int` (truncates toward zero; out of range is an error).
    Cast(Box<KExpr>),
    Neg(Box<KExpr>),
    /// Integer `/` truncates toward zero; decimal `/` rounds half away from zero to the
    /// result scale; division by zero is an error. Soufflé's operators (`%`, `^`, the
    /// bitwise and logical ones) take and give `int64` only: `%` is C's remainder (by
    /// zero, or of the smallest int64 by -1, is an error); `^` is [`crate::int_pow`];
    /// shift counts are taken modulo 64 and `bshl` wraps; `land`, `lor`, `lxor` give 1
    /// or 0, and `land`/`lor` skip (and do not fail on) the second operand when the first
    /// decides, as C's `&&` and `||`.
    Arith(ArithOp, Box<KExpr>, Box<KExpr>),
    /// Strings compare for equality by code; ordered comparisons of strings are lowered
    /// to comparisons of `Rank` table lookups.
    Cmp(CmpOp, Box<KExpr>, Box<KExpr>),
    And(Vec<KExpr>),
    Or(Vec<KExpr>),
    Not(Box<KExpr>),
    /// Membership in constants of the operand's type.
    In(Box<KExpr>, Vec<Value>),
    /// `year`, `month`, `day` of a date; `abs`; `round(x, digits)`; Soufflé's `bnot`,
    /// `lnot`, `min`, `max` (see [`ScalarFn`]).
    Call(ScalarFn, Vec<KExpr>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ScalarFn {
    Year,
    Month,
    Day,
    Abs,
    /// `round(x, digits)`: `digits` is a constant argument.
    Round,
    /// Soufflé's `bnot` (`!x` in two's complement) and `lnot` (1 when `x` is 0, else 0),
    /// of an int64, giving an int64.
    BitNot,
    LogNot,
    /// The int64 operand, which must not be negative (a Soufflé `unsigned` that Fox
    /// holds); a negative one is an error.
    Unsigned,
    /// `min(a, b)` / `max(a, b)` of two int64 or two float64 values: C++'s `std::min`
    /// (`b < a ? b : a`) and `std::max` (`a < b ? b : a`), so a NaN operand is kept only
    /// as `a`. Of two strings, four arguments `a, b, ka, kb`: the string whose key
    /// (`ka`, `kb`: their `Rank` table entries) decides, in the same way.
    Min,
    Max,
}
