//! The relational-algebra plan IR.
//!
//! A [`RaPlan`] is a control-flow graph of basic blocks over two kinds of storage:
//!
//! * **relation variables** ([`RelVar`]): named, mutable relations that live for the whole
//!   run (inputs, facts, full IDB relations, semi-naive deltas and new tuples). Every one
//!   except an [`RelKind::Input`] starts empty.
//! * **temporaries** ([`TempId`]): immutable intermediate relations in SSA form. Each temp is
//!   defined by exactly one [`Stmt::Let`] and is only read later in the same block, so the
//!   live range of a temp never crosses a block boundary. Data flows between blocks only
//!   through relation variables.
//!
//! Every temp carries its [`Schema`] (column names and types, plus the sortedness and
//! uniqueness known for it), so printing and lowering never need to infer types.
//! [`op_output`] computes the types and properties of an operator from its inputs; the
//! planner uses it to build schemas and the validator uses it to check them.

use fox_sema::core::{
    AggFunc, ArithOp, Builtin, CmpOp, Column, Type, Value, MAX_DATE, MAX_DECIMAL, MAX_WIDE_DECIMAL, MIN_DATE,
};
use fox_syntax::ast::Span;
use serde::{Deserialize, Serialize};

/// The version of the plan format. A plan of another version is refused by
/// [`crate::from_ron`].
pub const PLAN_VERSION: u32 = 1;

/// Index into [`RaPlan::relations`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RelId(pub u32);

/// Index into [`RaPlan::temps`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TempId(pub u32);

/// Index into [`RaPlan::blocks`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BlockId(pub u32);

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RaPlan {
    /// Always [`PLAN_VERSION`] for plans this crate produces.
    pub version: u32,
    pub relations: Vec<RelVar>,
    /// The schema of every temp, indexed by [`TempId`].
    pub temps: Vec<Schema>,
    pub blocks: Vec<Block>,
    /// The block execution starts in.
    pub entry: BlockId,
}

/// A named relation variable.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RelVar {
    /// Unique in the plan. Predicate relations carry the predicate's name; semi-naive
    /// relations are named `delta.P` and `new.P` (a `.` never occurs in a predicate name).
    pub name: String,
    pub columns: Vec<Column>,
    pub kind: RelKind,
    /// What every value stored into this relation guarantees.
    pub props: Props,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum RelKind {
    /// A base table read from data (`.input`); has no order, and may hold duplicate rows
    /// unless it has a key: `key` lists the columns that identify a row (the loader checks
    /// that no two rows share them), so a keyed input is a set.
    Input {
        file: String,
        sep: String,
        #[serde(default)]
        key: Vec<usize>,
        /// The file's first line is a header naming the columns, not data.
        #[serde(default)]
        header: bool,
    },
    /// A predicate defined only by facts.
    Facts,
    /// The full relation of an IDB predicate.
    Derived,
    /// The tuples found in the previous iteration of a fixpoint loop (semi-naive).
    Delta { of: RelId },
    /// The tuples found in the current iteration of a fixpoint loop, not yet in `of`.
    New { of: RelId },
    /// An intermediate result kept across blocks (e.g. computed once before a loop).
    Temp,
}

/// Known physical properties of a relation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Props {
    /// The rows are ordered on these keys (lexicographically); empty when unknown.
    pub sorted: Vec<SortKey>,
    /// No row occurs twice.
    pub unique: bool,
}

impl Props {
    /// Sorted ascending on all `arity` columns, and duplicate-free: what [`Op::Unique`]
    /// produces and what derived relations hold.
    pub fn set(arity: usize) -> Props {
        Props {
            sorted: (0..arity).map(SortKey::asc).collect(),
            unique: true,
        }
    }

    /// True when a relation with `self` may be stored where `required` is promised.
    pub fn implies(&self, required: &Props) -> bool {
        (self.unique || !required.unique) && self.sorted.starts_with(&required.sorted)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SortKey {
    pub col: usize,
    pub desc: bool,
}

impl SortKey {
    pub fn asc(col: usize) -> SortKey {
        SortKey { col, desc: false }
    }
}

/// The columns and properties of a temp.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Schema {
    pub columns: Vec<Column>,
    pub props: Props,
}

impl Schema {
    pub fn types(&self) -> Vec<Type> {
        self.columns.iter().map(|c| c.ty).collect()
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Block {
    /// A human-readable description (`stratum 1 loop`), shown by the printer.
    pub label: String,
    pub stmts: Vec<Stmt>,
    pub term: Terminator,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Stmt {
    /// `dst := op(...)`: defines a temp. `origin` is the part of the program the operator
    /// computes (a rule, or one of its literals), for run-time errors.
    Let {
        dst: TempId,
        op: Op,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        origin: Option<Span>,
    },
    /// `rel := src`: replaces the contents of a relation variable with a temp.
    Store { rel: RelId, src: TempId },
    /// `into ∪= from`. Both are sets sorted on all columns; so is the result.
    Merge { into: RelId, from: RelId },
    /// `dst := src` between relation variables.
    Assign { dst: RelId, src: RelId },
    /// Empties a relation variable.
    Clear { rel: RelId },
    /// Emits `src` as the result of the output predicate `rel` (column names from `rel`).
    Output { rel: RelId, src: TempId },
    /// Checks that `src`, the contents of the functional predicate `pred` (a set whose
    /// first `keys` columns are the key and whose last column is the value), maps no key
    /// to two values; a run in which it does stops with an error located at `origin` (a
    /// rule of the predicate).
    CheckFunctional {
        src: TempId,
        keys: usize,
        pred: String,
        origin: Span,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Terminator {
    Jump(BlockId),
    Halt,
    /// The fixpoint test: continue with `body` while any of `nonempty` holds a row,
    /// otherwise with `exit`.
    LoopIf {
        nonempty: Vec<RelId>,
        body: BlockId,
        exit: BlockId,
    },
}

impl Terminator {
    pub fn successors(&self) -> Vec<BlockId> {
        match self {
            Terminator::Jump(b) => vec![*b],
            Terminator::Halt => Vec::new(),
            Terminator::LoopIf { body, exit, .. } => vec![*body, *exit],
        }
    }
}

/// A side of a binary join.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Side {
    Left,
    Right,
}

/// One output column of a join: a column of its left or right input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct JoinCol {
    pub side: Side,
    pub col: usize,
}

/// One input of a [`Op::MultiJoin`]: column `i` of `src` binds variable `vars[i]`
/// (an index into the multi-join's variable order).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MultiJoinInput {
    pub src: TempId,
    pub vars: Vec<usize>,
}

/// An aggregate function applied per group. `arg` is `None` exactly for `count()`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AggCall {
    pub func: AggFunc,
    pub arg: Option<Expr>,
    pub ty: Type,
}

/// Relational operators. Inputs are temps; only [`Op::Scan`] reads a relation variable.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// The current contents of a relation variable.
    Scan(RelId),
    /// Constant rows (facts); the column types are given by the temp's schema.
    Const(Vec<Vec<Value>>),
    /// The rows of `input` for which `pred` (a `bool` expression over its columns) holds.
    Select { input: TempId, pred: Expr },
    /// One output column per expression over the input's columns.
    Map { input: TempId, exprs: Vec<Expr> },
    /// The listed input columns, in this order (duplicates are kept).
    Project { input: TempId, cols: Vec<usize> },
    /// Inner equi-join: `left[left_keys[i]] = right[right_keys[i]]` for all `i`; no keys
    /// is a cross product.
    Join {
        left: TempId,
        right: TempId,
        left_keys: Vec<usize>,
        right_keys: Vec<usize>,
        output: Vec<JoinCol>,
    },
    /// The rows of `left` that have a match in `right`; the output is `left`'s columns.
    SemiJoin {
        left: TempId,
        right: TempId,
        left_keys: Vec<usize>,
        right_keys: Vec<usize>,
    },
    /// The rows of `left` that have no match in `right` (negation).
    AntiJoin {
        left: TempId,
        right: TempId,
        left_keys: Vec<usize>,
        right_keys: Vec<usize>,
    },
    /// Bag union of inputs with identical column types.
    Union(Vec<TempId>),
    /// The rows of `left` that do not occur in `right` (same column types).
    Difference { left: TempId, right: TempId },
    /// Groups `input` by the `group` columns; the output holds the group columns followed
    /// by one column per aggregate, one row per group in ascending order of the group
    /// columns (no row for an empty input).
    Aggregate {
        input: TempId,
        group: Vec<usize>,
        aggs: Vec<AggCall>,
    },
    /// Orders the rows by `keys`.
    Sort { input: TempId, keys: Vec<SortKey> },
    /// The distinct rows of `input`, sorted ascending on all columns.
    Unique(TempId),
    /// The first `n` rows.
    Limit { input: TempId, n: u64 },
    /// A worst-case optimal multi-way join (leapfrog triejoin). `vars` is the global
    /// variable order; each input binds a set of distinct variables and is treated as a
    /// set. The output lists each distinct binding once, projected onto `output`
    /// (indices into `vars`), in lexicographic order of the variable order.
    ///
    /// With `count` (and no `output`), the bindings are only counted: the output is one
    /// `int64` column holding their number in one row, or no row when there is none (as
    /// `count()` over them), and the last variable is never materialised.
    MultiJoin {
        vars: Vec<Column>,
        inputs: Vec<MultiJoinInput>,
        output: Vec<usize>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        count: bool,
    },
}

impl Op {
    /// The temps this operator reads.
    pub fn inputs(&self) -> Vec<TempId> {
        match self {
            Op::Scan(_) | Op::Const(_) => Vec::new(),
            Op::Select { input, .. }
            | Op::Map { input, .. }
            | Op::Project { input, .. }
            | Op::Aggregate { input, .. }
            | Op::Sort { input, .. }
            | Op::Unique(input)
            | Op::Limit { input, .. } => vec![*input],
            Op::Join { left, right, .. }
            | Op::SemiJoin { left, right, .. }
            | Op::AntiJoin { left, right, .. }
            | Op::Difference { left, right } => vec![*left, *right],
            Op::Union(ts) => ts.clone(),
            Op::MultiJoin { inputs, .. } => inputs.iter().map(|i| i.src).collect(),
        }
    }

    /// The temps this operator reads, mutably (in the order of [`Op::inputs`]).
    pub fn inputs_mut(&mut self) -> Vec<&mut TempId> {
        match self {
            Op::Scan(_) | Op::Const(_) => Vec::new(),
            Op::Select { input, .. }
            | Op::Map { input, .. }
            | Op::Project { input, .. }
            | Op::Aggregate { input, .. }
            | Op::Sort { input, .. }
            | Op::Unique(input)
            | Op::Limit { input, .. } => vec![input],
            Op::Join { left, right, .. }
            | Op::SemiJoin { left, right, .. }
            | Op::AntiJoin { left, right, .. }
            | Op::Difference { left, right } => vec![left, right],
            Op::Union(ts) => ts.iter_mut().collect(),
            Op::MultiJoin { inputs, .. } => inputs.iter_mut().map(|i| &mut i.src).collect(),
        }
    }
}

/// A typed scalar expression over the columns of an operator's input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Expr {
    pub kind: ExprKind,
    pub ty: Type,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ExprKind {
    /// Column `i` of the input.
    Col(usize),
    Const(Value),
    /// Widening, decimal rescale, `to_float` or `to_int` to `ty`.
    Cast(Box<Expr>),
    Neg(Box<Expr>),
    Arith(ArithOp, Box<Expr>, Box<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Not(Box<Expr>),
    /// Membership in a list of constants.
    In(Box<Expr>, Vec<Value>),
    Call(Builtin, Vec<Expr>),
}

impl Expr {
    pub fn col(i: usize, ty: Type) -> Expr {
        Expr {
            kind: ExprKind::Col(i),
            ty,
        }
    }

    pub fn constant(v: Value) -> Expr {
        let ty = value_type(&v);
        Expr {
            kind: ExprKind::Const(v),
            ty,
        }
    }

    pub fn cmp(op: CmpOp, a: Expr, b: Expr) -> Expr {
        Expr {
            kind: ExprKind::Cmp(op, Box::new(a), Box::new(b)),
            ty: Type::Bool,
        }
    }

    /// The conjunction of `conds` (a single condition stays as it is).
    pub fn and(mut conds: Vec<Expr>) -> Expr {
        if conds.len() == 1 {
            if let Some(c) = conds.pop() {
                return c;
            }
        }
        Expr {
            kind: ExprKind::And(conds),
            ty: Type::Bool,
        }
    }

    /// Calls `f` on every column index the expression reads.
    pub fn for_each_col(&self, f: &mut impl FnMut(usize)) {
        match &self.kind {
            ExprKind::Col(i) => f(*i),
            ExprKind::Const(_) => {}
            ExprKind::Cast(e) | ExprKind::Neg(e) | ExprKind::Not(e) | ExprKind::In(e, _) => e.for_each_col(f),
            ExprKind::Arith(_, a, b) | ExprKind::Cmp(_, a, b) => {
                a.for_each_col(f);
                b.for_each_col(f);
            }
            ExprKind::And(es) | ExprKind::Or(es) | ExprKind::Call(_, es) => {
                for e in es {
                    e.for_each_col(f);
                }
            }
        }
    }
}

/// The type of a constant.
/// Whether constant `v` is a value of type `ty`: of its own type, or a decimal labelled
/// as a 38-digit decimal of its scale.
pub fn value_has_type(v: &Value, ty: Type) -> bool {
    match (v, ty) {
        (Value::Decimal { scale, unscaled }, Type::WideDecimal(s)) => {
            *scale == s && unscaled.unsigned_abs() <= MAX_WIDE_DECIMAL.unsigned_abs()
        }
        (Value::Date(d), Type::Date) => (MIN_DATE..=MAX_DATE).contains(d),
        _ => value_type(v) == ty,
    }
}

pub fn value_type(v: &Value) -> Type {
    match v {
        Value::Int32(_) => Type::Int32,
        Value::Int64(_) => Type::Int64,
        Value::Decimal { unscaled, scale } => {
            Type::decimal(*scale, unscaled.unsigned_abs() > MAX_DECIMAL.unsigned_abs())
        }
        Value::Float64(_) => Type::Float64,
        Value::String(_) => Type::String,
        Value::Date(_) => Type::Date,
        Value::Bool(_) => Type::Bool,
    }
}

/// Where [`op_output`] finds the schemas of relation variables and temps.
pub trait SchemaSource {
    fn relation(&self, id: RelId) -> Option<&RelVar>;
    /// The schema of a temp that is defined and readable at this point.
    fn temp(&self, id: TempId) -> Option<&Schema>;
}

/// The column types and properties an operator produces, or a description of why the
/// operator is ill-formed. Column names are not part of the result: they are chosen by
/// whoever builds the operator. `Const` rows are typed by `const_types`, the types the
/// temp declares.
pub fn op_output(op: &Op, src: &impl SchemaSource, const_types: Option<&[Type]>) -> Result<(Vec<Type>, Props), String> {
    let temp = |t: TempId| {
        src.temp(t)
            .ok_or_else(|| format!("t{} is read but not defined before", t.0))
    };
    let check_cols = |what: &str, cols: &[usize], arity: usize| -> Result<(), String> {
        match cols.iter().find(|&&c| c >= arity) {
            Some(c) => Err(format!(
                "{what} refers to column {c}, but its input has {arity} columns"
            )),
            None => Ok(()),
        }
    };
    let check_keys = |l: &Schema, r: &Schema, lk: &[usize], rk: &[usize]| -> Result<(), String> {
        if lk.len() != rk.len() {
            return Err(format!("{} left keys but {} right keys", lk.len(), rk.len()));
        }
        check_cols("a left key", lk, l.columns.len())?;
        check_cols("a right key", rk, r.columns.len())?;
        for (&a, &b) in lk.iter().zip(rk) {
            let (ta, tb) = (l.columns[a].ty, r.columns[b].ty);
            if ta != tb {
                return Err(format!("join key types differ: {ta} and {tb}"));
            }
        }
        Ok(())
    };
    match op {
        Op::Scan(r) => {
            let rel = src
                .relation(*r)
                .ok_or_else(|| format!("relation r{} does not exist", r.0))?;
            Ok((rel.columns.iter().map(|c| c.ty).collect(), rel.props.clone()))
        }
        Op::Const(rows) => {
            let types = const_types.ok_or("constant rows need declared column types")?;
            for row in rows {
                if row.len() != types.len() {
                    return Err(format!(
                        "a constant row has {} values, expected {}",
                        row.len(),
                        types.len()
                    ));
                }
                for (v, t) in row.iter().zip(types) {
                    if !value_has_type(v, *t) {
                        return Err(format!("a constant of type {} in a column of type {t}", value_type(v)));
                    }
                }
            }
            Ok((types.to_vec(), Props::default()))
        }
        Op::Select { input, pred } => {
            let s = temp(*input)?;
            check_expr(pred, &s.types())?;
            if pred.ty != Type::Bool {
                return Err(format!("a selection condition has type {}, expected bool", pred.ty));
            }
            Ok((s.types(), s.props.clone()))
        }
        Op::Map { input, exprs } => {
            let s = temp(*input)?;
            let types = s.types();
            for e in exprs {
                check_expr(e, &types)?;
            }
            Ok((exprs.iter().map(|e| e.ty).collect(), Props::default()))
        }
        Op::Project { input, cols } => {
            let s = temp(*input)?;
            check_cols("a projection", cols, s.columns.len())?;
            let types = cols.iter().map(|&c| s.columns[c].ty).collect();
            // The sort order survives on the longest prefix of sort keys that is kept.
            let mut sorted = Vec::new();
            for k in &s.props.sorted {
                match cols.iter().position(|&c| c == k.col) {
                    Some(p) => sorted.push(SortKey { col: p, desc: k.desc }),
                    None => break,
                }
            }
            let keeps_all = (0..s.columns.len()).all(|c| cols.contains(&c));
            Ok((
                types,
                Props {
                    sorted,
                    unique: s.props.unique && keeps_all,
                },
            ))
        }
        Op::Join {
            left,
            right,
            left_keys,
            right_keys,
            output,
        } => {
            let (l, r) = (temp(*left)?, temp(*right)?);
            check_keys(l, r, left_keys, right_keys)?;
            let mut types = Vec::with_capacity(output.len());
            for jc in output {
                let side = match jc.side {
                    Side::Left => l,
                    Side::Right => r,
                };
                let c = side.columns.get(jc.col).ok_or_else(|| {
                    format!(
                        "join output refers to column {} of a {}-column input",
                        jc.col,
                        side.columns.len()
                    )
                })?;
                types.push(c.ty);
            }
            Ok((types, Props::default()))
        }
        Op::SemiJoin {
            left,
            right,
            left_keys,
            right_keys,
        }
        | Op::AntiJoin {
            left,
            right,
            left_keys,
            right_keys,
        } => {
            let (l, r) = (temp(*left)?, temp(*right)?);
            check_keys(l, r, left_keys, right_keys)?;
            Ok((l.types(), l.props.clone()))
        }
        Op::Union(inputs) => {
            let first = inputs.first().ok_or("a union needs at least one input")?;
            let types = temp(*first)?.types();
            for t in inputs {
                let other = temp(*t)?.types();
                if other != types {
                    return Err(format!(
                        "union inputs differ in column types: {} and {}",
                        fmt_types(&types),
                        fmt_types(&other)
                    ));
                }
            }
            let props = if inputs.len() == 1 {
                temp(*first)?.props.clone()
            } else {
                Props::default()
            };
            Ok((types, props))
        }
        Op::Difference { left, right } => {
            let (l, r) = (temp(*left)?, temp(*right)?);
            if l.types() != r.types() {
                return Err(format!(
                    "difference inputs differ in column types: {} and {}",
                    fmt_types(&l.types()),
                    fmt_types(&r.types())
                ));
            }
            Ok((l.types(), l.props.clone()))
        }
        Op::Aggregate { input, group, aggs } => {
            let s = temp(*input)?;
            let types = s.types();
            check_cols("a group key", group, types.len())?;
            let mut out: Vec<Type> = group.iter().map(|&c| types[c]).collect();
            for a in aggs {
                match (&a.arg, a.func) {
                    (None, AggFunc::Count) => {}
                    (Some(_), AggFunc::Count) => return Err("count() takes no argument".into()),
                    (None, f) => return Err(format!("{} needs an argument", agg_name(f))),
                    (Some(e), _) => check_expr(e, &types)?,
                }
                out.push(a.ty);
            }
            // One row per group, in ascending order of the group columns: as the group
            // columns form a key, that is ascending order on all columns.
            let n = out.len();
            Ok((out, Props::set(n)))
        }
        Op::Sort { input, keys } => {
            let s = temp(*input)?;
            let cols: Vec<usize> = keys.iter().map(|k| k.col).collect();
            check_cols("a sort key", &cols, s.columns.len())?;
            Ok((
                s.types(),
                Props {
                    sorted: keys.clone(),
                    unique: s.props.unique,
                },
            ))
        }
        Op::Unique(input) => {
            let s = temp(*input)?;
            Ok((s.types(), Props::set(s.columns.len())))
        }
        Op::Limit { input, .. } => {
            let s = temp(*input)?;
            Ok((s.types(), s.props.clone()))
        }
        Op::MultiJoin {
            vars,
            inputs,
            output,
            count,
        } => {
            if inputs.len() < 2 {
                return Err("a multi-way join needs at least two inputs".into());
            }
            let mut covered = vec![false; vars.len()];
            for inp in inputs {
                let s = temp(inp.src)?;
                if inp.vars.len() != s.columns.len() {
                    return Err(format!(
                        "a multi-way join input t{} has {} columns but binds {} variables",
                        inp.src.0,
                        s.columns.len(),
                        inp.vars.len()
                    ));
                }
                for (i, &v) in inp.vars.iter().enumerate() {
                    let var = vars
                        .get(v)
                        .ok_or_else(|| format!("a multi-way join input binds variable {v} of {}", vars.len()))?;
                    if inp.vars[..i].contains(&v) {
                        return Err(format!("a multi-way join input binds `{}` twice", var.name));
                    }
                    if var.ty != s.columns[i].ty {
                        return Err(format!(
                            "variable `{}` has type {} but column {i} of t{} has type {}",
                            var.name, var.ty, inp.src.0, s.columns[i].ty
                        ));
                    }
                    covered[v] = true;
                }
            }
            if let Some(v) = covered.iter().position(|c| !c) {
                return Err(format!(
                    "variable `{}` of a multi-way join is bound by no input",
                    vars[v].name
                ));
            }
            check_cols("a multi-way join output", output, vars.len())?;
            if *count {
                if !output.is_empty() {
                    return Err("a counting multi-way join has no output variables".into());
                }
                if inputs.iter().any(|i| i.vars.is_empty()) {
                    return Err("a counting multi-way join has an input without variables".into());
                }
                return Ok((vec![Type::Int64], Props::set(1)));
            }
            let types = output.iter().map(|&v| vars[v].ty).collect();
            let props = if output.iter().copied().eq(0..vars.len()) {
                Props::set(vars.len())
            } else {
                Props::default()
            };
            Ok((types, props))
        }
    }
}

/// Checks that every column reference is in range and typed as the column is.
pub fn check_expr(e: &Expr, cols: &[Type]) -> Result<(), String> {
    match &e.kind {
        ExprKind::Col(i) => match cols.get(*i) {
            None => Err(format!(
                "an expression refers to column {i}, but its input has {} columns",
                cols.len()
            )),
            Some(t) if *t != e.ty => Err(format!("column {i} has type {t} but is used as {}", e.ty)),
            Some(_) => Ok(()),
        },
        ExprKind::Const(v) => {
            if value_has_type(v, e.ty) {
                Ok(())
            } else {
                Err(format!("a constant of type {} is labelled {}", value_type(v), e.ty))
            }
        }
        ExprKind::Cast(a) | ExprKind::Neg(a) | ExprKind::In(a, _) => check_expr(a, cols),
        ExprKind::Not(a) => {
            check_expr(a, cols)?;
            expect_bool(e)
        }
        ExprKind::Arith(_, a, b) => {
            check_expr(a, cols)?;
            check_expr(b, cols)
        }
        ExprKind::Cmp(_, a, b) => {
            check_expr(a, cols)?;
            check_expr(b, cols)?;
            expect_bool(e)
        }
        ExprKind::And(es) | ExprKind::Or(es) => {
            for a in es {
                check_expr(a, cols)?;
                if a.ty != Type::Bool {
                    return Err(format!("a boolean connective has an operand of type {}", a.ty));
                }
            }
            expect_bool(e)
        }
        ExprKind::Call(_, es) => es.iter().try_for_each(|a| check_expr(a, cols)),
    }
}

fn expect_bool(e: &Expr) -> Result<(), String> {
    if e.ty == Type::Bool {
        Ok(())
    } else {
        Err(format!("a condition is labelled {}, expected bool", e.ty))
    }
}

pub(crate) fn fmt_types(types: &[Type]) -> String {
    let parts: Vec<String> = types.iter().map(|t| t.to_string()).collect();
    format!("({})", parts.join(", "))
}

pub(crate) fn agg_name(f: AggFunc) -> &'static str {
    match f {
        AggFunc::Sum => "sum",
        AggFunc::Count => "count",
        AggFunc::Min => "min",
        AggFunc::Max => "max",
        AggFunc::Avg => "avg",
    }
}
