//! Lowering of the annotated RA plan into kernel launches, following the physical
//! passes' annotations (`fox_phys`): algorithms, fusion, order, rounds.
//!
//! Every relation variable becomes one buffer per column (`rel.col`); every temp becomes a
//! set of column buffers (`t12.x`) produced by the kernels that implement its operator.
//! Each temp's order is the one the `order` pass recorded (unknown without it); a value
//! is sorted only where an algorithm needs an order it is not known to have, and the
//! values made inside one operator (a sorted side, a trie's input) carry the order of
//! the sort that made them. After lowering, [`crate::sched`] cleans up and orders each
//! block and [`crate::live`] places the frees.

use std::collections::{HashMap, HashSet};

use fox_ra::{Expr, ExprKind, JoinCol, MultiJoinInput, Op, Props, RaPlan, RelId, RelKind, Schema, Side, SortKey, Stmt};
use fox_sema::core::{AggFunc, Builtin, CmpOp, Column, Type, Value};

use fox_phys::{AggAlgorithm, Algorithm, PhysPlan};

use crate::ir::*;
use crate::sig::kernel_outputs;

/// Why an RA plan could not be lowered.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LowerError {
    /// The plan uses something the kernel vocabulary cannot express.
    #[error("{0}")]
    Unsupported(String),
    /// The RA plan is inconsistent (it fails `fox_ra::validate`), or lowering broke one of
    /// the kernels' contracts.
    #[error("cannot lower the plan: {0}")]
    Invalid(String),
}

/// Translates an RA plan into a kernel plan with the physical passes' defaults (no
/// statistics, every pass): physical planning, lowering, scheduling, liveness analysis
/// and free placement.
pub fn lower(ra: &RaPlan) -> Result<KernelPlan, LowerError> {
    fox_ra::validate(ra).map_err(|e| LowerError::Invalid(e.to_string()))?;
    let phys = fox_phys::run(ra.clone(), &fox_phys::Statistics::none(), &fox_phys::Options::default())
        .map_err(|e| LowerError::Invalid(e.to_string()))?;
    lower_physical(&phys)
}

/// Translates an annotated RA plan into a kernel plan: lowering (following the
/// annotations), scheduling, liveness analysis and free placement.
pub fn lower_physical(phys: &PhysPlan) -> Result<KernelPlan, LowerError> {
    let ra = &phys.ra;
    fox_ra::validate(ra).map_err(|e| LowerError::Invalid(e.to_string()))?;
    if phys.nodes.len() != ra.temps.len() {
        return Err(LowerError::Invalid(format!(
            "the physical plan annotates {} of {} temps",
            phys.nodes.len(),
            ra.temps.len()
        )));
    }
    let mut l = Lower {
        ra,
        phys,
        buffers: Vec::new(),
        names: HashMap::new(),
        inputs: Vec::new(),
        rels: Vec::new(),
        temps: HashMap::new(),
        defs: HashMap::new(),
        instrs: Vec::new(),
        tables: HashMap::new(),
        deferred: HashSet::new(),
        dst: None,
        prefix: String::new(),
        blocks: Vec::new(),
        child_ranges: Vec::new(),
        cur: BlockId(0),
        cur_label: String::new(),
        origin: None,
    };
    let init = l.declare_relations()?;
    let entry_has_preds = ra.blocks.iter().any(|b| b.term.successors().contains(&ra.entry));
    // Blocks the lowering adds (the loops of multi-round expansions) come after the RA's
    // blocks and the load block.
    l.blocks = vec![None; ra.blocks.len() + usize::from(entry_has_preds)];
    for (i, b) in ra.blocks.iter().enumerate() {
        l.temps.clear();
        l.defs.clear();
        l.tables.clear();
        l.deferred = b
            .stmts
            .iter()
            .filter_map(|s| match s {
                Stmt::Let { dst, .. } if phys.node(*dst).deferred_into.is_some() => Some(*dst),
                _ => None,
            })
            .collect();
        l.cur = BlockId(i as u32);
        l.cur_label = b.label.clone();
        for s in &b.stmts {
            l.stmt(s)?;
        }
        let term = match &b.term {
            fox_ra::Terminator::Jump(t) => Terminator::Jump(BlockId(t.0)),
            fox_ra::Terminator::Halt => Terminator::Halt,
            fox_ra::Terminator::LoopIf { nonempty, body, exit } => Terminator::LoopIf {
                nonempty: nonempty.iter().map(|r| l.rels[r.0 as usize][0]).collect(),
                body: BlockId(body.0),
                exit: BlockId(exit.0),
            },
        };
        l.end_block(term);
    }
    let entry = if entry_has_preds {
        let id = ra.blocks.len();
        l.blocks[id] = Some(Block {
            label: "load".into(),
            instrs: init,
            term: Terminator::Jump(BlockId(ra.entry.0)),
        });
        BlockId(id as u32)
    } else {
        let b = l.blocks[ra.entry.0 as usize]
            .as_mut()
            .ok_or_else(|| LowerError::Invalid("the entry block was not lowered".into()))?;
        let rest = std::mem::take(&mut b.instrs);
        b.instrs = init;
        b.instrs.extend(rest);
        BlockId(ra.entry.0)
    };
    let blocks: Vec<Block> = l
        .blocks
        .into_iter()
        .enumerate()
        .map(|(i, b)| b.ok_or_else(|| LowerError::Invalid(format!("block {i} was never filled"))))
        .collect::<R<_>>()?;
    let mut plan = KernelPlan {
        version: KERNEL_PLAN_VERSION,
        buffers: l.buffers,
        inputs: l.inputs,
        blocks,
        entry,
        planned_peak_buffers: 0,
        sources: Vec::new(),
    };
    crate::sched::optimize(&mut plan);
    crate::live::place_frees(&mut plan);
    Ok(plan)
}

/// A relation value during lowering: its column buffers and what is known about them.
#[derive(Clone, Debug)]
struct Val {
    /// The column buffers; one hidden `U8` column when the relation has no columns.
    cols: Vec<BufId>,
    /// The logical columns.
    columns: Vec<Column>,
    /// The rows are ordered on these keys.
    sorted: Vec<SortKey>,
    /// String keys of `sorted` are ordered by string value rather than by code.
    ranked: bool,
    unique: bool,
    /// A filter not yet applied: the relation is the rows of `cols` for which the
    /// predicate holds over the columns of the select's input. Only the operators that
    /// take it along (a projection) or apply it themselves (an aggregation) see such a
    /// value; [`Lower::temp`] applies it for every other reader.
    pending: Option<Box<Pending>>,
}

/// A select whose compaction is left to the aggregation that reads its rows.
#[derive(Clone, Debug)]
struct Pending {
    pred: Expr,
    input: Val,
}

impl Val {
    /// A result whose order is not known here: the statement that defines it takes its
    /// order from the order pass.
    fn unordered(cols: Vec<BufId>, columns: Vec<Column>) -> Val {
        Val {
            cols,
            columns,
            sorted: Vec::new(),
            ranked: false,
            unique: false,
            pending: None,
        }
    }

    fn arity(&self) -> usize {
        self.columns.len()
    }

    fn ty(&self, c: usize) -> Type {
        self.columns[c].ty
    }

    /// The prefix of `sorted` that holds in code order (what merge-based kernels need).
    fn code_sorted(&self) -> &[SortKey] {
        let cut = if self.ranked {
            self.sorted
                .iter()
                .position(|k| self.ty(k.col) == Type::String)
                .unwrap_or(self.sorted.len())
        } else {
            self.sorted.len()
        };
        &self.sorted[..cut]
    }

    /// The prefix of `sorted` that holds in value order (what `order by` means).
    fn value_sorted(&self) -> &[SortKey] {
        let cut = if self.ranked {
            self.sorted.len()
        } else {
            self.sorted
                .iter()
                .position(|k| self.ty(k.col) == Type::String)
                .unwrap_or(self.sorted.len())
        };
        &self.sorted[..cut]
    }

    /// True when the rows are sorted in code order on every column (in some order), so
    /// that equal rows are adjacent.
    fn fully_sorted(&self) -> bool {
        let s = self.code_sorted();
        (0..self.arity()).all(|c| s.iter().any(|k| k.col == c))
    }
}

/// A slot of a multi-way join's state: a variable's column, or an atom's current range.
#[derive(Clone, Copy, PartialEq, Debug)]
enum MjSlot {
    Var(usize),
    Lo(usize),
    Hi(usize),
}

/// A multi-way join's state: the buffer of each slot.
type MjState = Vec<(MjSlot, BufId)>;

/// An atom of a multi-way join as a level sees it: its trie and how deep it is bound.
struct AtomView {
    values: Vec<BufId>,
    starts: Vec<BufId>,
    depth: usize,
    arity: usize,
}

/// A level of a multi-way join running in rounds: the loop's blocks, the expansion's
/// total and the variable holding the current window.
struct OpenRound {
    body: BlockId,
    exit: BlockId,
    total: BufId,
    window: BufId,
    row_bytes: u64,
}

/// The result of a multi-way join after its rounds.
enum Closed {
    /// No level ran in rounds: the columns as computed.
    Same(Vec<BufId>),
    /// The columns accumulated over the rounds.
    Accumulated(Vec<BufId>),
}

/// The state after a level, and the new depth of each atom that bound it.
struct LevelOut {
    state: Vec<(MjSlot, BufId)>,
    depths: Vec<(usize, usize)>,
}

fn asc(cols: impl IntoIterator<Item = usize>) -> Vec<SortKey> {
    cols.into_iter().map(SortKey::asc).collect()
}

fn phys_types(columns: &[Column]) -> Vec<Type> {
    if columns.is_empty() {
        vec![Type::Bool]
    } else {
        columns.iter().map(|c| c.ty).collect()
    }
}

struct Lower<'a> {
    ra: &'a RaPlan,
    phys: &'a PhysPlan,
    buffers: Vec<BufVar>,
    /// How often each buffer name has been given (names are made unique with `~n`).
    names: HashMap<String, usize>,
    inputs: Vec<InputRel>,
    /// The column buffers of each relation variable.
    rels: Vec<Vec<BufId>>,
    /// The temps of the current block.
    temps: HashMap<fox_ra::TempId, Val>,
    /// The operators defining the temps of the current block.
    defs: HashMap<fox_ra::TempId, &'a Op>,
    instrs: Vec<Instr>,
    /// Dictionary tables computed in the current block since the last string-producing
    /// kernel (which makes them stale).
    tables: HashMap<DictOp, BufId>,
    /// The selects of the current block whose rows only an aggregation reads (through
    /// projections): they leave the filter to it (see [`Val::pending`]).
    deferred: HashSet<fox_ra::TempId>,
    /// The temp being defined.
    dst: Option<fox_ra::TempId>,
    /// The name prefix of the buffers being created (`t12`).
    prefix: String,
    /// Every block of the plan by id, once it is filled: the RA's blocks keep their ids
    /// (their first part, when the lowering splits one), the load block follows them,
    /// then the blocks the lowering adds.
    blocks: Vec<Option<Block>>,
    /// The child ranges computed by the multi-way join being lowered, by trie level
    /// starts and node positions.
    child_ranges: Vec<((BufId, BufId), (BufId, BufId))>,
    /// The block `instrs` belongs to, and its label.
    cur: BlockId,
    cur_label: String,
    /// The origin of the statement being lowered, given to its launches.
    origin: Option<Span>,
}

type R<T> = Result<T, LowerError>;

impl<'a> Lower<'a> {
    // ---- buffers and launches ----------------------------------------------------------

    fn new_buf(&mut self, name: &str, elem: Elem, ty: Option<Type>) -> BufId {
        let n = self.names.entry(name.to_string()).or_insert(0);
        *n += 1;
        let name = if *n == 1 {
            name.to_string()
        } else {
            format!("{name}~{n}")
        };
        self.buffers.push(BufVar { name, elem, ty });
        BufId(self.buffers.len() as u32 - 1)
    }

    fn elem(&self, b: BufId) -> Elem {
        self.buffers[b.0 as usize].elem
    }

    /// Emits `kernel(args)` into fresh buffers named `prefix.label` (or as given).
    fn launch(&mut self, kernel: Kernel, args: Vec<BufId>, outs: &[(&str, Option<Type>)]) -> R<Vec<BufId>> {
        let elems: Vec<Elem> = args.iter().map(|&b| self.elem(b)).collect();
        let out_elems = kernel_outputs(&kernel, &elems, &self.inputs)
            .map_err(|m| LowerError::Invalid(format!("{}: {kernel:?} {m}", self.prefix)))?;
        if out_elems.len() != outs.len() {
            return Err(LowerError::Invalid(format!(
                "{}: {kernel:?} has {} outputs, {} named",
                self.prefix,
                out_elems.len(),
                outs.len()
            )));
        }
        let outs: Vec<BufId> = out_elems
            .iter()
            .zip(outs)
            .map(|(&e, &(label, ty))| {
                let name = format!("{}.{label}", self.prefix);
                self.new_buf(&name, e, ty)
            })
            .collect();
        self.instrs.push(Instr::Launch {
            kernel,
            args,
            outs: outs.clone(),
            origin: self.origin,
        });
        Ok(outs)
    }

    fn launch1(&mut self, kernel: Kernel, args: Vec<BufId>, label: &str, ty: Option<Type>) -> R<BufId> {
        Ok(self.launch(kernel, args, &[(label, ty)])?[0])
    }

    /// Emits `kernel(args)` into existing buffers.
    fn launch_into(&mut self, kernel: Kernel, args: Vec<BufId>, outs: Vec<BufId>) -> R<()> {
        let elems: Vec<Elem> = args.iter().map(|&b| self.elem(b)).collect();
        let out_elems = kernel_outputs(&kernel, &elems, &self.inputs)
            .map_err(|m| LowerError::Invalid(format!("{kernel:?} {m}")))?;
        let have: Vec<Elem> = outs.iter().map(|&b| self.elem(b)).collect();
        if out_elems != have {
            return Err(LowerError::Invalid(format!(
                "{kernel:?} produces {out_elems:?}, stored into {have:?}"
            )));
        }
        self.instrs.push(Instr::Launch {
            kernel,
            args,
            outs,
            origin: self.origin,
        });
        Ok(())
    }

    /// Column output specs for a value's columns, named after them.
    fn col_names(columns: &[Column]) -> Vec<(String, Option<Type>)> {
        if columns.is_empty() {
            vec![("$rows".to_string(), None)]
        } else {
            columns.iter().map(|c| (c.name.clone(), Some(c.ty))).collect()
        }
    }

    fn launch_cols(&mut self, kernel: Kernel, args: Vec<BufId>, columns: &[Column]) -> R<Vec<BufId>> {
        let names = Self::col_names(columns);
        let refs: Vec<(&str, Option<Type>)> = names.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        self.launch(kernel, args, &refs)
    }

    fn dict_table(&mut self, op: DictOp) -> R<BufId> {
        if let Some(&b) = self.tables.get(&op) {
            return Ok(b);
        }
        let label = match &op {
            DictOp::Rank => "rank",
            DictOp::Like(_) => "like",
            DictOp::Prefix(_) => "prefix",
            DictOp::Strlen => "strlen",
        };
        let b = self.launch1(Kernel::DictTable { op: op.clone() }, Vec::new(), label, None)?;
        self.tables.insert(op, b);
        Ok(b)
    }

    /// A hidden row-count column of ones as long as `like`.
    fn ones(&mut self, like: BufId) -> R<BufId> {
        let expr = KExpr {
            kind: KExprKind::Const(Value::Bool(true)),
            ty: Type::Bool,
        };
        self.launch1(Kernel::Eval { expr, n_cols: 1 }, vec![like], "$rows", None)
    }

    // ---- blocks ------------------------------------------------------------------------

    /// A new, still empty block labelled `label`.
    fn new_block(&mut self, label: String) -> BlockId {
        self.blocks.push(Some(Block {
            label,
            instrs: Vec::new(),
            term: Terminator::Halt,
        }));
        BlockId(self.blocks.len() as u32 - 1)
    }

    /// Ends the block being filled with `term`.
    fn end_block(&mut self, term: Terminator) {
        let label = std::mem::take(&mut self.cur_label);
        let instrs = std::mem::take(&mut self.instrs);
        self.blocks[self.cur.0 as usize] = Some(Block { label, instrs, term });
    }

    /// Continues by filling block `b` (made by `new_block`).
    fn start_block(&mut self, b: BlockId) {
        self.cur = b;
        self.cur_label = self.blocks[b.0 as usize]
            .as_ref()
            .map(|b| b.label.clone())
            .unwrap_or_default();
    }

    // ---- relation variables ------------------------------------------------------------

    /// Creates the buffers of every relation variable; returns the instructions that give
    /// them their initial contents (inputs are loaded, the rest start empty).
    fn declare_relations(&mut self) -> R<Vec<Instr>> {
        let mut init = Vec::new();
        for r in &self.ra.relations {
            let bufs: Vec<BufId> = if r.columns.is_empty() {
                vec![self.new_buf(&format!("{}.$rows", r.name), Elem::U8, None)]
            } else {
                r.columns
                    .iter()
                    .map(|c| self.new_buf(&format!("{}.{}", r.name, c.name), Elem::of(c.ty), Some(c.ty)))
                    .collect()
            };
            let kernel = match &r.kind {
                RelKind::Input { file, sep, key, header } => {
                    if r.columns.is_empty() {
                        return Err(LowerError::Unsupported(format!(
                            "input predicate `{}` has no columns; an input needs at least one",
                            r.name
                        )));
                    }
                    self.inputs.push(InputRel {
                        name: r.name.clone(),
                        columns: r.columns.clone(),
                        file: file.clone(),
                        sep: sep.clone(),
                        key: key.clone(),
                        header: *header,
                    });
                    Kernel::LoadInput {
                        input: self.inputs.len() - 1,
                    }
                }
                _ => Kernel::Const {
                    types: phys_types(&r.columns),
                    rows: Vec::new(),
                },
            };
            init.push(Instr::Launch {
                kernel,
                args: Vec::new(),
                outs: bufs.clone(),
                origin: None,
            });
            self.rels.push(bufs);
        }
        Ok(init)
    }

    fn rel_val(&self, r: RelId) -> Val {
        let rel = &self.ra.relations[r.0 as usize];
        Val {
            cols: self.rels[r.0 as usize].clone(),
            columns: rel.columns.clone(),
            sorted: rel.props.sorted.clone(),
            ranked: false,
            unique: rel.props.unique,
            pending: None,
        }
    }

    fn move_into(&mut self, r: RelId, v: &Val) {
        let dsts = self.rels[r.0 as usize].clone();
        for (d, s) in dsts.into_iter().zip(v.cols.clone()) {
            self.instrs.push(Instr::Move { dst: d, src: s });
        }
    }

    /// The value of temp `t`, with a pending filter applied.
    fn temp(&mut self, t: fox_ra::TempId) -> R<Val> {
        let v = self.temp_raw(t)?;
        self.settle(v)
    }

    /// The value of temp `t` as it is, perhaps with a pending filter.
    fn temp_raw(&self, t: fox_ra::TempId) -> R<Val> {
        self.temps
            .get(&t)
            .cloned()
            .ok_or_else(|| LowerError::Invalid(format!("t{} is read before it is defined", t.0)))
    }

    /// `v` with its pending filter applied: the flags, then a compaction.
    fn settle(&mut self, mut v: Val) -> R<Val> {
        let Some(p) = v.pending.take() else {
            return Ok(v);
        };
        let flags = self.expr_col(&p.input, &p.pred, "flags")?;
        let cols = self.compact(flags, &v.cols, &v.columns)?;
        Ok(Val { cols, ..v })
    }

    // ---- statements ----------------------------------------------------------------------

    fn stmt(&mut self, s: &'a Stmt) -> R<()> {
        self.origin = match s {
            Stmt::Let { origin, .. } => *origin,
            Stmt::CheckFunctional { origin, .. } => Some(*origin),
            _ => None,
        };
        let r = self.stmt_ops(s);
        self.origin = None;
        r
    }

    fn stmt_ops(&mut self, s: &'a Stmt) -> R<()> {
        match s {
            Stmt::Let { dst, op, .. } => {
                self.prefix = format!("t{}", dst.0);
                let schema = self
                    .ra
                    .temps
                    .get(dst.0 as usize)
                    .ok_or_else(|| LowerError::Invalid(format!("t{} has no schema", dst.0)))?;
                self.dst = Some(*dst);
                let v = self.op(op, schema)?;
                self.dst = None;
                // The result's order is what the order pass recorded, or unknown.
                let o = self.phys.node(*dst).order.as_ref().map(|a| &a.provides);
                let v = Val {
                    sorted: o.map_or_else(Vec::new, |o| o.sorted.clone()),
                    ranked: o.is_some_and(|o| o.ranked),
                    unique: o.is_some_and(|o| o.unique),
                    ..v
                };
                self.temps.insert(*dst, v);
                self.defs.insert(*dst, op);
            }
            Stmt::Store { rel, src } => {
                let r = &self.ra.relations[rel.0 as usize];
                self.prefix = r.name.clone();
                let v = self.temp(*src)?;
                let v = self.ensure(v, &r.props)?;
                self.move_into(*rel, &v);
            }
            Stmt::Merge { into, from } => {
                let r = &self.ra.relations[into.0 as usize];
                self.prefix = r.name.clone();
                let set = Props::set(r.columns.len());
                let a = self.rel_val(*into);
                let a = self.ensure(a, &set)?;
                let b = self.rel_val(*from);
                let b = self.ensure(b, &set)?;
                let mut args = a.cols.clone();
                args.extend(&b.cols);
                let mut columns = a.columns.clone();
                for c in &mut columns {
                    c.name = format!("merged.{}", c.name);
                }
                let width = a.cols.len();
                let outs = self.launch_cols(Kernel::MergeUnion { width }, args, &columns)?;
                let merged = Val { cols: outs, ..a };
                self.move_into(*into, &merged);
            }
            Stmt::Assign { dst, src } => {
                let r = &self.ra.relations[dst.0 as usize];
                self.prefix = r.name.clone();
                let v = self.rel_val(*src);
                let v = self.ensure(v, &r.props)?;
                self.move_into(*dst, &v);
            }
            Stmt::Clear { rel } => {
                let r = &self.ra.relations[rel.0 as usize];
                let kernel = Kernel::Const {
                    types: phys_types(&r.columns),
                    rows: Vec::new(),
                };
                self.launch_into(kernel, Vec::new(), self.rels[rel.0 as usize].clone())?;
            }
            Stmt::Output { rel, src } => {
                let r = &self.ra.relations[rel.0 as usize];
                let v = self.temp(*src)?;
                let schema = &self.ra.temps[src.0 as usize];
                let order = schema.props.sorted.iter().map(|k| (k.col, k.desc)).collect();
                let limit = match self.defs.get(src) {
                    Some(Op::Limit { n, .. }) => Some(*n),
                    _ => None,
                };
                self.instrs.push(Instr::Output {
                    name: r.name.clone(),
                    columns: r.columns.clone(),
                    cols: v.cols,
                    order,
                    limit,
                });
            }
            Stmt::CheckFunctional { src, keys, pred, .. } => {
                self.prefix = format!("{pred}.check");
                let v = self.temp(*src)?;
                let set = Props::set(v.columns.len());
                let v = self.ensure(v, &set)?;
                let key_args = if *keys == 0 {
                    vec![v.cols[0]]
                } else {
                    v.cols
                        .get(..*keys)
                        .map(<[BufId]>::to_vec)
                        .ok_or_else(|| LowerError::Invalid(format!("`{pred}` has fewer than {keys} key columns")))?
                };
                let row = self.launch1(Kernel::RepeatedKey { nkeys: *keys }, key_args, "row", None)?;
                let mut args = self.gather(row, &v.cols, &v.columns, 0)?;
                args.extend(self.gather(row, &v.cols, &v.columns, 1)?);
                self.instrs.push(Instr::Assert {
                    check: Check::Functional {
                        pred: pred.clone(),
                        columns: v.columns.clone(),
                        keys: *keys,
                    },
                    args,
                    origin: self.origin,
                });
            }
        }
        Ok(())
    }

    // ---- order and uniqueness --------------------------------------------------------

    /// Gathers every column of `v` at `idx`, into columns named after `columns`.
    fn gather(&mut self, idx: BufId, cols: &[BufId], columns: &[Column], shift: u32) -> R<Vec<BufId>> {
        let mut args = vec![idx];
        args.extend(cols);
        self.launch_cols(Kernel::Gather { shift }, args, columns)
    }

    fn permute(&mut self, v: Val, perm: BufId) -> R<Val> {
        let cols = self.gather(perm, &v.cols, &v.columns, 0)?;
        Ok(Val { cols, ..v })
    }

    /// Sorts `v` on `keys` in code order (what the merge-based kernels need).
    fn sort_code(&mut self, v: Val, keys: &[SortKey]) -> R<Val> {
        if v.code_sorted().starts_with(keys) {
            return Ok(v);
        }
        let args: Vec<BufId> = keys.iter().map(|k| v.cols[k.col]).collect();
        let kernel = Kernel::SortPerm {
            desc: keys.iter().map(|k| k.desc).collect(),
            by_rank: vec![false; keys.len()],
        };
        let perm = self.launch1(kernel, args, "perm", None)?;
        let v = self.permute(v, perm)?;
        Ok(Val {
            sorted: keys.to_vec(),
            ranked: false,
            ..v
        })
    }

    /// Sorts `v` on `keys` in value order (strings by string value), as `order by` means.
    fn sort_value(&mut self, v: Val, keys: &[SortKey]) -> R<Val> {
        if v.value_sorted().starts_with(keys) {
            return Ok(v);
        }
        let by_rank: Vec<bool> = keys.iter().map(|k| v.ty(k.col) == Type::String).collect();
        let ranked = by_rank.iter().any(|&b| b);
        let mut args: Vec<BufId> = keys.iter().map(|k| v.cols[k.col]).collect();
        if ranked {
            args.push(self.dict_table(DictOp::Rank)?);
        }
        let kernel = Kernel::SortPerm {
            desc: keys.iter().map(|k| k.desc).collect(),
            by_rank,
        };
        let perm = self.launch1(kernel, args, "perm", None)?;
        let v = self.permute(v, perm)?;
        Ok(Val {
            sorted: keys.to_vec(),
            ranked,
            ..v
        })
    }

    /// Drops repeated rows of `v`, which is sorted on all columns in code order.
    fn distinct(&mut self, v: Val) -> R<Val> {
        let flags = self.launch1(Kernel::AdjacentDistinct, v.cols.clone(), "distinct", None)?;
        let cols = self.compact(flags, &v.cols, &v.columns)?;
        Ok(Val {
            cols,
            unique: true,
            ..v
        })
    }

    fn compact(&mut self, flags: BufId, cols: &[BufId], columns: &[Column]) -> R<Vec<BufId>> {
        let mut args = vec![flags];
        args.extend(cols);
        self.launch_cols(Kernel::Compact, args, columns)
    }

    /// `v` sorted on `keys` and then on the remaining columns, duplicate-free.
    fn unique_on(&mut self, v: Val, keys: &[SortKey]) -> R<Val> {
        if v.arity() == 0 {
            // All rows are equal: keep at most one.
            return if v.unique { Ok(v) } else { self.distinct(v) };
        }
        let mut full = keys.to_vec();
        for c in 0..v.arity() {
            if !full.iter().any(|k| k.col == c) {
                full.push(SortKey::asc(c));
            }
        }
        let v = if v.code_sorted().starts_with(keys) && v.fully_sorted() {
            v
        } else {
            self.sort_code(v, &full)?
        };
        if v.unique {
            Ok(v)
        } else {
            self.distinct(v)
        }
    }

    /// `v` with the properties `req` promises, sorting and dropping duplicates as needed.
    fn ensure(&mut self, v: Val, req: &Props) -> R<Val> {
        let v = if req.unique && !v.unique {
            self.unique_on(v, &req.sorted)?
        } else {
            v
        };
        self.sort_code(v, &req.sorted)
    }

    /// The order in which the operator being lowered compares its `n` key pairs (group
    /// columns), as the order pass chose it: a permutation of `0..n`; the listed order
    /// without one.
    fn key_perm(&self, n: usize) -> Vec<usize> {
        match self.dst.and_then(|d| self.phys.node(d).order.as_ref()) {
            Some(a) if a.key_order.len() == n => a.key_order.clone(),
            _ => (0..n).collect(),
        }
    }

    /// The columns `cols` of `v` (no kernel unless no column is kept).
    fn project(&mut self, v: &Val, cols: &[usize]) -> R<Val> {
        let columns: Vec<Column> = cols.iter().map(|&c| v.columns[c].clone()).collect();
        let bufs = if cols.is_empty() {
            vec![self.ones(v.cols[0])?]
        } else {
            cols.iter().map(|&c| v.cols[c]).collect()
        };
        let mut sorted = Vec::new();
        for k in &v.sorted {
            match cols.iter().position(|&c| c == k.col) {
                Some(p) => sorted.push(SortKey { col: p, desc: k.desc }),
                None => break,
            }
        }
        let keeps_all = (0..v.arity()).all(|c| cols.contains(&c));
        Ok(Val {
            cols: bufs,
            columns,
            sorted,
            ranked: v.ranked,
            unique: v.unique && keeps_all,
            pending: v.pending.clone(),
        })
    }

    // ---- operators -----------------------------------------------------------------------

    fn op(&mut self, op: &Op, schema: &Schema) -> R<Val> {
        let columns = schema.columns.clone();
        match op {
            Op::Scan(r) => {
                // Copies of the names, so that a later store into the relation in this
                // block does not change the temp (the copies are removed again where
                // that cannot happen).
                let v = self.rel_val(*r);
                let mut cols = Vec::with_capacity(v.cols.len());
                for (i, &src) in v.cols.iter().enumerate() {
                    let (name, ty) = match columns.get(i) {
                        Some(c) => (c.name.clone(), Some(c.ty)),
                        None => ("$rows".to_string(), None),
                    };
                    let dst = self.new_buf(&format!("{}.{name}", self.prefix), self.elem(src), ty);
                    self.instrs.push(Instr::Move { dst, src });
                    cols.push(dst);
                }
                Ok(Val { cols, columns, ..v })
            }
            Op::Const(rows) => {
                let types = phys_types(&columns);
                let rows: Vec<Vec<Value>> = if columns.is_empty() {
                    rows.iter().map(|_| vec![Value::Bool(true)]).collect()
                } else {
                    rows.clone()
                };
                let cols = self.launch_cols(Kernel::Const { types, rows }, Vec::new(), &columns)?;
                Ok(Val::unordered(cols, columns))
            }
            Op::Select { input, pred } => {
                let v = self.temp(*input)?;
                if self.dst.is_some_and(|d| self.deferred.contains(&d)) {
                    return Ok(Val {
                        columns,
                        pending: Some(Box::new(Pending {
                            pred: pred.clone(),
                            input: v.clone(),
                        })),
                        ..v
                    });
                }
                let flags = self.expr_col(&v, pred, "flags")?;
                let cols = self.compact(flags, &v.cols, &columns)?;
                Ok(Val { cols, columns, ..v })
            }
            Op::Map { input, exprs } => {
                let v = self.temp(*input)?;
                let mut cols = Vec::with_capacity(exprs.len());
                for (e, c) in exprs.iter().zip(&columns) {
                    cols.push(self.expr_col(&v, e, &c.name)?);
                }
                if cols.is_empty() {
                    cols.push(self.ones(v.cols[0])?);
                }
                Ok(Val::unordered(cols, columns))
            }
            Op::Project { input, cols } => {
                // A pending filter is carried along.
                let v = self.temp_raw(*input)?;
                let p = self.project(&v, cols)?;
                Ok(Val { columns, ..p })
            }
            Op::Union(inputs) => {
                let vals: Vec<Val> = inputs.iter().map(|&t| self.temp(t)).collect::<R<_>>()?;
                if vals.len() == 1 {
                    return Ok(Val {
                        columns,
                        ..vals[0].clone()
                    });
                }
                let width = vals[0].cols.len();
                let args: Vec<BufId> = vals.iter().flat_map(|v| v.cols.clone()).collect();
                let cols = self.launch_cols(
                    Kernel::Concat {
                        parts: vals.len(),
                        width,
                    },
                    args,
                    &columns,
                )?;
                Ok(Val::unordered(cols, columns))
            }
            Op::Unique(input) => {
                let v = self.temp(*input)?;
                let keys = if v.fully_sorted() {
                    v.code_sorted().to_vec()
                } else {
                    asc(0..v.arity())
                };
                let u = self.unique_on(v, &keys)?;
                Ok(Val { columns, ..u })
            }
            Op::Sort { input, keys } => {
                let v = self.temp(*input)?;
                let s = self.sort_value(v, keys)?;
                Ok(Val { columns, ..s })
            }
            Op::Limit { input, n } => {
                let v = self.temp(*input)?;
                // The first `n` rows in the order the input promises, by value.
                let claim = &self.ra.temps[input.0 as usize].props.sorted;
                let v = self.sort_value(v, claim)?;
                let cols = self.launch_cols(Kernel::Slice { start: 0, len: *n }, v.cols.clone(), &columns)?;
                Ok(Val { cols, columns, ..v })
            }
            Op::Join {
                left,
                right,
                left_keys,
                right_keys,
                output,
            } => self.join(*left, *right, left_keys, right_keys, output, columns),
            Op::SemiJoin {
                left,
                right,
                left_keys,
                right_keys,
            } => self.semi_join(*left, *right, left_keys, right_keys, false, columns),
            Op::AntiJoin {
                left,
                right,
                left_keys,
                right_keys,
            } => self.semi_join(*left, *right, left_keys, right_keys, true, columns),
            Op::Difference { left, right } => {
                let l = self.temp(*left)?;
                let all: Vec<usize> = (0..l.arity()).collect();
                self.semi_join(*left, *right, &all, &all, true, columns)
            }
            Op::Aggregate { input, group, aggs } => self.aggregate(*input, group, aggs, columns),
            Op::MultiJoin {
                vars,
                inputs,
                output,
                count,
            } => self.multi_join(vars, inputs, output, *count, columns),
        }
    }

    /// The key columns of the two sides of a join-like kernel; with no keys, one column of
    /// each side (which give the row counts).
    fn key_args(l: &Val, lk: &[usize], r: &Val, rk: &[usize]) -> Vec<BufId> {
        if lk.is_empty() {
            return vec![l.cols[0], r.cols[0]];
        }
        let mut args: Vec<BufId> = lk.iter().map(|&c| l.cols[c]).collect();
        args.extend(rk.iter().map(|&c| r.cols[c]));
        args
    }

    /// Sorts both sides of a join-like operator on their keys, in an order that reuses an
    /// existing sort where there is one. Returns the sorted sides and the reordered keys.
    fn sort_sides(&mut self, l: Val, lk: &[usize], r: Val, rk: &[usize]) -> R<(Val, Vec<usize>, Val, Vec<usize>)> {
        if lk.is_empty() {
            return Ok((l, Vec::new(), r, Vec::new()));
        }
        let perm = self.key_perm(lk.len());
        let lk: Vec<usize> = perm.iter().map(|&i| lk[i]).collect();
        let rk: Vec<usize> = perm.iter().map(|&i| rk[i]).collect();
        let l = self.sort_code(l, &asc(lk.iter().copied()))?;
        let r = self.sort_code(r, &asc(rk.iter().copied()))?;
        Ok((l, lk, r, rk))
    }

    fn join(
        &mut self,
        left: fox_ra::TempId,
        right: fox_ra::TempId,
        lk: &[usize],
        rk: &[usize],
        output: &[JoinCol],
        columns: Vec<Column>,
    ) -> R<Val> {
        let (l, r) = (self.temp(left)?, self.temp(right)?);
        let (l, lk, r, rk) = self.sort_sides(l, lk, r, rk)?;
        let nkeys = lk.len();
        let keys = Self::key_args(&l, &lk, &r, &rk);
        let counts = self.launch1(Kernel::JoinCount { nkeys }, keys.clone(), "counts", None)?;
        let scan = self.launch(
            Kernel::ExclusiveScan,
            vec![counts],
            &[("offsets", None), ("total", None)],
        )?;
        let mut args = keys;
        args.extend(&scan);
        let idx = self.launch(Kernel::JoinWrite { nkeys }, args, &[("lidx", None), ("ridx", None)])?;
        // One gather per side, of the columns the output takes from it.
        let mut picked: HashMap<(bool, usize), BufId> = HashMap::new();
        for (side, v, ix) in [(Side::Left, &l, idx[0]), (Side::Right, &r, idx[1])] {
            let mut want: Vec<usize> = Vec::new();
            for jc in output {
                if jc.side == side && !want.contains(&jc.col) {
                    want.push(jc.col);
                }
            }
            if want.is_empty() {
                continue;
            }
            let srcs: Vec<BufId> = want.iter().map(|&c| v.cols[c]).collect();
            let names: Vec<Column> = want
                .iter()
                .map(|&c| {
                    let pos = output.iter().position(|o| o.side == side && o.col == c).unwrap_or(0);
                    columns.get(pos).cloned().unwrap_or_else(|| v.columns[c].clone())
                })
                .collect();
            let got = self.gather(ix, &srcs, &names, 0)?;
            for (c, b) in want.into_iter().zip(got) {
                picked.insert((side == Side::Left, c), b);
            }
        }
        let mut cols: Vec<BufId> = output
            .iter()
            .map(|jc| picked[&(jc.side == Side::Left, jc.col)])
            .collect();
        if cols.is_empty() {
            cols.push(self.ones(idx[0])?);
        }
        Ok(Val::unordered(cols, columns))
    }

    /// Semi-join (`anti == false`), anti-join and difference: the rows of the left side
    /// with (without) a match on the right. The output has the left's (sorted) order.
    fn semi_join(
        &mut self,
        left: fox_ra::TempId,
        right: fox_ra::TempId,
        lk: &[usize],
        rk: &[usize],
        anti: bool,
        columns: Vec<Column>,
    ) -> R<Val> {
        let (l, r) = (self.temp(left)?, self.temp(right)?);
        // Only the right's key columns matter.
        let r = if rk.is_empty() { r } else { self.project(&r, rk)? };
        let rk: Vec<usize> = (0..rk.len()).collect();
        let (l, lk, r, rk) = self.sort_sides(l, lk, r, &rk)?;
        let nkeys = lk.len();
        let keys = Self::key_args(&l, &lk, &r, &rk);
        let flags = self.launch1(Kernel::MatchFlags { nkeys, anti }, keys, "match", None)?;
        let cols = self.compact(flags, &l.cols, &columns)?;
        Ok(Val { cols, columns, ..l })
    }

    fn aggregate(
        &mut self,
        input: fox_ra::TempId,
        group: &[usize],
        aggs: &[fox_ra::AggCall],
        columns: Vec<Column>,
    ) -> R<Val> {
        let v = self.temp_raw(input)?;
        // Group keys in an order the input may already be sorted in (a pending filter
        // keeps the order). `perm[j]` is the position in `group` of the j-th sort key.
        let perm = self.key_perm(group.len());
        let keys: Vec<usize> = perm.iter().map(|&i| group[i]).collect();
        let order = asc(keys.iter().copied());
        let fused = self
            .dst
            .is_some_and(|d| self.phys.node(d).algorithm == Algorithm::Aggregate(AggAlgorithm::Fused));
        if fused {
            return self.fused_aggregate(&v, group, aggs, &columns);
        }
        let v = self.settle(v)?;
        let v = self.sort_code(v, &order)?;
        let mut args: Vec<BufId> = keys.iter().map(|&c| v.cols[c]).collect();
        let mut specs = Vec::with_capacity(aggs.len());
        let mut rank = false;
        let g = group.len();
        for (i, a) in aggs.iter().enumerate() {
            let label = columns.get(g + i).map_or("agg", |c| c.name.as_str()).to_string();
            if let Some(e) = &a.arg {
                args.push(self.expr_col(&v, e, &format!("{label}.arg"))?);
                rank |= e.ty == Type::String && matches!(a.func, AggFunc::Min | AggFunc::Max);
            }
            specs.push(agg_spec(a));
        }
        if g == 0 && specs.iter().all(|s| s.input.is_none()) {
            args.push(v.cols[0]);
        }
        if rank {
            args.push(self.dict_table(DictOp::Rank)?);
        }
        // Outputs: the keys in sort order, then the aggregates.
        let mut out_cols: Vec<Column> = perm.iter().map(|&i| columns[i].clone()).collect();
        out_cols.extend(columns[g..].iter().cloned());
        let outs = self.launch_cols(Kernel::ReduceByKey { nkeys: g, aggs: specs }, args, &out_cols)?;
        // Back to the declared column order: group columns, then aggregates.
        let mut cols = vec![BufId(0); columns.len()];
        for (j, &i) in perm.iter().enumerate() {
            cols[i] = outs[j];
        }
        cols[g..].copy_from_slice(&outs[g..]);
        if cols.is_empty() {
            return Err(LowerError::Invalid("an aggregation without columns".into()));
        }
        Ok(Val::unordered(cols, columns))
    }

    /// An aggregation of `v` (and of its pending filter) as one `FusedReduce`, without
    /// compacting or sorting its input (the fusion pass fuses only aggregations whose
    /// expressions, and deferred filters, the kernel evaluates).
    fn fused_aggregate(&mut self, v: &Val, group: &[usize], aggs: &[fox_ra::AggCall], columns: &[Column]) -> R<Val> {
        // The group keys are the first arguments, even where two are one buffer.
        let keys: Vec<BufId> = group.iter().map(|&c| v.cols[c]).collect();
        let mut cx = ExprCx {
            args: keys,
            tables: Vec::new(),
        };
        let filter = match &v.pending {
            Some(p) => Some(self.kexpr(&p.input, &mut cx, &p.pred)?),
            None => None,
        };
        let mut exprs = Vec::with_capacity(aggs.len());
        for a in aggs {
            exprs.push(match &a.arg {
                Some(e) => Some(self.kexpr(v, &mut cx, e)?),
                None => None,
            });
        }
        if cx.args.is_empty() {
            cx.args.push(v.cols[0]);
        }
        let n_cols = cx.args.len();
        let mut args = cx.args;
        args.extend(cx.tables);
        let kernel = Kernel::FusedReduce {
            filter,
            nkeys: group.len(),
            aggs: aggs.iter().map(agg_spec).collect(),
            exprs,
            n_cols,
        };
        let cols = self.launch_cols(kernel, args, columns)?;
        Ok(Val::unordered(cols, columns.to_vec()))
    }

    // ---- multi-way join (leapfrog triejoin, breadth first) ------------------------------

    fn multi_join(
        &mut self,
        vars: &[Column],
        inputs: &[MultiJoinInput],
        output: &[usize],
        count: bool,
        columns: Vec<Column>,
    ) -> R<Val> {
        if vars.is_empty() {
            return Err(LowerError::Unsupported("a multi-way join binds no variable".into()));
        }
        self.child_ranges.clear();
        let node = self.dst.map(|d| self.phys.node(d));
        let rounds_at: Vec<bool> = node.map(|n| n.rounds.windowed.clone()).unwrap_or_default();
        let (min_range, twins_on) = match node.map(|n| &n.algorithm) {
            Some(Algorithm::Lftj { min_range, twins }) => (*min_range, *twins),
            _ => (false, false),
        };
        struct Atom {
            vars: Vec<usize>,
            values: Vec<BufId>,
            starts: Vec<BufId>,
            depth: usize,
        }
        type Slot = MjSlot;
        let mut atoms: Vec<Atom> = Vec::new();
        let mut nullary: Vec<Val> = Vec::new();
        let mut state: Vec<(Slot, BufId)> = Vec::new();
        // Atoms over the same input with the same column order share one trie.
        type Trie = (Vec<BufId>, Vec<BufId>, BufId, BufId);
        let mut tries: Vec<((fox_ra::TempId, Vec<usize>), Trie)> = Vec::new();
        for inp in inputs {
            let v = self.temp(inp.src)?;
            if inp.vars.is_empty() {
                nullary.push(v);
                continue;
            }
            let a = atoms.len();
            // Columns in the global variable order, as a set sorted on all of them.
            let mut order: Vec<usize> = (0..inp.vars.len()).collect();
            order.sort_by_key(|&i| inp.vars[i]);
            let key = (inp.src, order.clone());
            let (values, starts, lo, hi) = match tries.iter().find(|(k, _)| *k == key) {
                Some((_, t)) => t.clone(),
                None => {
                    let v = self.project(&v, &order)?;
                    let m = order.len();
                    let v = self.unique_on(v, &asc(0..m))?;
                    let v = self.sort_code(v, &asc(0..m))?;
                    let names: Vec<String> = (0..m)
                        .flat_map(|d| {
                            let mut n = vec![format!("a{a}.v{d}")];
                            if d + 1 < m {
                                n.push(format!("a{a}.s{d}"));
                            }
                            n
                        })
                        .collect();
                    let refs: Vec<(&str, Option<Type>)> = names.iter().map(|n| (n.as_str(), None)).collect();
                    let trie = self.launch(Kernel::TrieBuild { arity: m }, v.cols.clone(), &refs)?;
                    let values: Vec<BufId> = trie.iter().step_by(2).copied().collect();
                    let starts: Vec<BufId> = trie.iter().skip(1).step_by(2).copied().collect();
                    let (lo, hi) = (format!("a{a}.lo"), format!("a{a}.hi"));
                    let root = self.launch(Kernel::RootRange, vec![values[0]], &[(&lo, None), (&hi, None)])?;
                    let t = (values, starts, root[0], root[1]);
                    tries.push((key, t.clone()));
                    t
                }
            };
            let root = [lo, hi];
            state.push((Slot::Lo(a), root[0]));
            state.push((Slot::Hi(a), root[1]));
            atoms.push(Atom {
                vars: order.iter().map(|&i| inp.vars[i]).collect(),
                values,
                starts,
                depth: 0,
            });
        }
        let find = |state: &[(Slot, BufId)], s: Slot| state.iter().find(|(x, _)| *x == s).map(|&(_, b)| b);
        // Levels from the third variable on may expand to more rows than any input has:
        // they run in rounds (see `expand_ranges`), the result accumulating in `acc`.
        let mut rounds: Vec<OpenRound> = Vec::new();
        let mut acc: Option<Vec<BufId>> = None;
        for (var, vcol) in vars.iter().enumerate() {
            let windowed = rounds_at.get(var) == Some(&true);
            if windowed && acc.is_none() {
                // A counting join accumulates its count column, a listing its output columns.
                let acc_cols = if count { &columns[..1] } else { &columns[..] };
                let types = phys_types(acc_cols);
                let names = Self::col_names(acc_cols);
                let refs: Vec<(String, Option<Type>)> = names.iter().map(|(n, t)| (format!("{n}.acc"), *t)).collect();
                let refs: Vec<(&str, Option<Type>)> = refs.iter().map(|(n, t)| (n.as_str(), *t)).collect();
                acc = Some(self.launch(
                    Kernel::Const {
                        types,
                        rows: Vec::new(),
                    },
                    Vec::new(),
                    &refs,
                )?);
            }
            // The bytes each expanded row of this level costs: its parent and position,
            // the state it carries, the value, each member's search and the flags; twice
            // that for what the next levels make of it.
            let row_bytes = 2 * (8 + 4 * state.len() as u64 + 4 + 5 * atoms.len() as u64 + 1);
            let window = windowed.then_some(row_bytes);
            let members: Vec<usize> = (0..atoms.len())
                .filter(|&a| atoms[a].vars.get(atoms[a].depth) == Some(&var))
                .collect();
            let Some(&lead) = members.first() else {
                return Err(LowerError::Invalid(format!(
                    "variable `{}` of a multi-way join is bound by no input",
                    vcol.name
                )));
            };
            let missing = || LowerError::Invalid("a multi-way join lost an atom's range".into());
            if count && var + 1 == vars.len() {
                // The last level is only counted: the size of the intersection of the
                // members' ranges, summed over the bindings so far.
                if !nullary.is_empty() {
                    return Err(LowerError::Invalid(
                        "a counting multi-way join has an input without variables".into(),
                    ));
                }
                let mut args = Vec::with_capacity(3 * members.len());
                for &a in &members {
                    args.push(atoms[a].values[atoms[a].depth]);
                    args.push(find(&state, Slot::Lo(a)).ok_or_else(missing)?);
                    args.push(find(&state, Slot::Hi(a)).ok_or_else(missing)?);
                }
                let n = self.launch1(
                    Kernel::IntersectCount { ways: members.len() },
                    args,
                    &columns[0].name,
                    Some(columns[0].ty),
                )?;
                let n = self.close_rounds(rounds, acc, vec![n])?;
                let n = match n {
                    Closed::Same(c) => c[0],
                    // The counts of the rounds, summed.
                    Closed::Accumulated(c) => self.launch1(
                        Kernel::ReduceByKey {
                            nkeys: 0,
                            aggs: vec![AggSpec {
                                func: fox_sema::core::AggFunc::Sum,
                                input: Some(columns[0].ty),
                                output: columns[0].ty,
                            }],
                        },
                        c,
                        &columns[0].name,
                        Some(columns[0].ty),
                    )?,
                };
                return Ok(Val::unordered(vec![n], columns));
            }
            let lo = find(&state, Slot::Lo(lead)).ok_or_else(missing)?;
            let hi = find(&state, Slot::Hi(lead)).ok_or_else(missing)?;
            let lvl = vcol.name.clone();
            let next = if min_range {
                self.level_from_smallest(
                    &atoms
                        .iter()
                        .map(|a| AtomView {
                            values: a.values.clone(),
                            starts: a.starts.clone(),
                            depth: a.depth,
                            arity: a.vars.len(),
                        })
                        .collect::<Vec<_>>(),
                    &members,
                    &state,
                    (var, vcol),
                    &mut rounds,
                    window,
                )?
            } else {
                None
            };
            if let Some(next) = next {
                for (a, d) in next.depths {
                    atoms[a].depth = d;
                }
                state = next.state;
                continue;
            }
            // Expand the lead atom's children: one row per (binding, child).
            let (parent, pos) = self.expand_ranges(lo, hi, &lvl, &mut rounds, window)?;
            let depth = atoms[lead].depth;
            // Members at the same level of the same trie with the same range as the lead
            // hold exactly the lead's values: they follow the lead without a search.
            let twins: Vec<usize> = members[1..]
                .iter()
                .copied()
                .filter(|&a| {
                    twins_on
                        && atoms[a].depth == depth
                        && atoms[a].values[depth] == atoms[lead].values[depth]
                        && find(&state, Slot::Lo(a)) == Some(lo)
                        && find(&state, Slot::Hi(a)) == Some(hi)
                })
                .collect();
            let follows = |s: Slot| {
                std::iter::once(lead)
                    .chain(twins.iter().copied())
                    .any(|a| s == Slot::Lo(a) || s == Slot::Hi(a))
            };
            let value = self.launch1(
                Kernel::Gather { shift: 0 },
                vec![pos, atoms[lead].values[depth]],
                &vcol.name,
                Some(vcol.ty),
            )?;
            // Every other state column follows its parent row.
            let others: Vec<(Slot, BufId)> = state.iter().copied().filter(|(s, _)| !follows(*s)).collect();
            let (mut next, _) = self.carry_state(Kernel::Gather { shift: 0 }, parent, &others, &[])?;
            next.push((Slot::Var(var), value));
            if depth + 1 < atoms[lead].vars.len() {
                let range = self.child_range(lead, atoms[lead].starts[depth], pos)?;
                for a in std::iter::once(lead).chain(twins.iter().copied()) {
                    next.push((Slot::Lo(a), range.0));
                    next.push((Slot::Hi(a), range.1));
                }
            }
            for a in std::iter::once(lead).chain(twins.iter().copied()) {
                atoms[a].depth += 1;
            }
            state = next;
            // Intersect with every other atom that binds this variable.
            let rest: Vec<usize> = members[1..].iter().copied().filter(|a| !twins.contains(a)).collect();
            let rest = &rest[..];
            if rest.is_empty() {
                continue;
            }
            let mut found = Vec::new();
            let mut positions = Vec::new();
            // Members searching the same level over the same ranges search once.
            let mut searched: Vec<([BufId; 3], BufId)> = Vec::new();
            for &a in rest {
                let d = atoms[a].depth;
                let lo = find(&state, Slot::Lo(a)).ok_or_else(missing)?;
                let hi = find(&state, Slot::Hi(a)).ok_or_else(missing)?;
                let key = [atoms[a].values[d], lo, hi];
                if let Some(&(_, p)) = searched.iter().find(|(k, _)| *k == key) {
                    positions.push(p);
                    continue;
                }
                let r = self.launch(
                    Kernel::SortedSearch,
                    vec![atoms[a].values[d], lo, hi, value],
                    &[(&format!("a{a}.found"), None), (&format!("a{a}.pos"), None)],
                )?;
                searched.push((key, r[1]));
                found.push(r[0]);
                positions.push(r[1]);
            }
            let flags = self.all_found(found, &lvl)?;
            let kept: Vec<(Slot, BufId)> = state
                .iter()
                .copied()
                .filter(|(s, _)| !rest.iter().any(|&a| *s == Slot::Lo(a) || *s == Slot::Hi(a)))
                .collect();
            let extra: Vec<(BufId, String)> = rest
                .iter()
                .zip(&positions)
                .map(|(a, &p)| (p, format!("a{a}.pos")))
                .collect();
            let (next, got) = self.carry_state(Kernel::Compact, flags, &kept, &extra)?;
            state = next;
            for (i, &a) in rest.iter().enumerate() {
                let d = atoms[a].depth;
                if d + 1 < atoms[a].vars.len() {
                    let range = self.child_range(a, atoms[a].starts[d], got[i])?;
                    state.push((Slot::Lo(a), range.0));
                    state.push((Slot::Hi(a), range.1));
                }
                atoms[a].depth += 1;
            }
        }
        let mut var_cols: Vec<BufId> = (0..vars.len())
            .map(|v| find(&state, Slot::Var(v)))
            .collect::<Option<_>>()
            .ok_or_else(|| LowerError::Invalid("a multi-way join lost a variable".into()))?;
        // Inputs without variables only say whether there are results at all.
        for n in nullary {
            let flags = self.launch1(
                Kernel::MatchFlags { nkeys: 0, anti: false },
                vec![var_cols[0], n.cols[0]],
                "nonempty",
                None,
            )?;
            var_cols = self.compact(flags, &var_cols, vars)?;
        }
        let mut cols: Vec<BufId> = output.iter().map(|&v| var_cols[v]).collect();
        if cols.is_empty() {
            cols.push(self.ones(var_cols[0])?);
        }
        let cols = match self.close_rounds(rounds, acc, cols)? {
            Closed::Same(c) | Closed::Accumulated(c) => c,
        };
        Ok(Val::unordered(cols, columns))
    }

    /// A level of a multi-way join whose members all index the same trie level with
    /// different ranges (the atoms of a clique): each row expands from its smallest range
    /// (`MinRange`), and every member then searches the candidate in its own range, so a
    /// hub's long list never drives the expansion. `None` when the level is not of that
    /// kind (one member, members over different levels, or all members at the lead's range).
    fn level_from_smallest(
        &mut self,
        atoms: &[AtomView],
        members: &[usize],
        state: &[(MjSlot, BufId)],
        (var, vcol): (usize, &Column),
        rounds: &mut Vec<OpenRound>,
        window: Option<u64>,
    ) -> R<Option<LevelOut>> {
        let find = |s: MjSlot| state.iter().find(|(x, _)| *x == s).map(|&(_, b)| b);
        let lead = members[0];
        let depth = |a: usize| atoms[a].depth;
        let values = atoms[lead].values[depth(lead)];
        let level = |a: usize| atoms[a].values[depth(a)];
        let range = |a: usize| (find(MjSlot::Lo(a)), find(MjSlot::Hi(a)));
        // Members over the same level with the same range buffers search once, as one.
        let mut distinct: Vec<usize> = Vec::new();
        for &a in members {
            if !distinct.iter().any(|&b| range(b) == range(a) && level(b) == level(a)) {
                distinct.push(a);
            }
        }
        // The members the rows may expand from: those over the lead's level.
        let sources: Vec<usize> = distinct.iter().copied().filter(|&a| level(a) == values).collect();
        if sources.len() < 2 {
            return Ok(None);
        }
        let missing = || LowerError::Invalid("a multi-way join lost an atom's range".into());
        let lvl = vcol.name.clone();
        let mut args = Vec::new();
        for &a in &sources {
            let (lo, hi) = range(a);
            args.push(lo.ok_or_else(missing)?);
            args.push(hi.ok_or_else(missing)?);
        }
        let small = self.launch(
            Kernel::MinRange { ways: sources.len() },
            args,
            &[(&format!("{lvl}.lo"), None), (&format!("{lvl}.hi"), None)],
        )?;
        let (parent, pos) = self.expand_ranges(small[0], small[1], &lvl, rounds, window)?;
        let value = self.launch1(
            Kernel::Gather { shift: 0 },
            vec![pos, values],
            &vcol.name,
            Some(vcol.ty),
        )?;
        // Every state column follows its parent row (members' ranges once each).
        // A member whose range is another's is carried by that one.
        let follows_distinct = |s: MjSlot| {
            members
                .iter()
                .any(|&a| !distinct.contains(&a) && (s == MjSlot::Lo(a) || s == MjSlot::Hi(a)))
        };
        let carried: Vec<(MjSlot, BufId)> = state.iter().copied().filter(|(s, _)| !follows_distinct(*s)).collect();
        let (moved, _) = self.carry_state(Kernel::Gather { shift: 0 }, parent, &carried, &[])?;
        let mfind = |s: MjSlot| moved.iter().find(|(x, _)| *x == s).map(|&(_, b)| b);
        let mut found = Vec::new();
        let mut positions = Vec::new();
        for &a in &distinct {
            let lo = mfind(MjSlot::Lo(a)).ok_or_else(missing)?;
            let hi = mfind(MjSlot::Hi(a)).ok_or_else(missing)?;
            let r = self.launch(
                Kernel::SortedSearch,
                vec![level(a), lo, hi, value],
                &[(&format!("a{a}.found"), None), (&format!("a{a}.pos"), None)],
            )?;
            found.push(r[0]);
            positions.push(r[1]);
        }
        let flags = self.all_found(found, &lvl)?;
        let in_level = |s: MjSlot| members.iter().any(|&a| s == MjSlot::Lo(a) || s == MjSlot::Hi(a));
        let mut kept: Vec<(MjSlot, BufId)> = moved.iter().copied().filter(|(s, _)| !in_level(*s)).collect();
        kept.push((MjSlot::Var(var), value));
        let extra: Vec<(BufId, String)> = distinct
            .iter()
            .zip(&positions)
            .map(|(a, &p)| (p, format!("a{a}.pos")))
            .collect();
        let (mut next, got) = self.carry_state(Kernel::Compact, flags, &kept, &extra)?;
        let mut depths = Vec::new();
        for (i, &a) in distinct.iter().enumerate() {
            let d = depth(a);
            let same: Vec<usize> = members
                .iter()
                .copied()
                .filter(|&b| range(b) == range(a) && level(b) == level(a))
                .collect();
            if d + 1 < atoms[a].arity {
                let child = self.child_range(a, atoms[a].starts[d], got[i])?;
                for &b in &same {
                    next.push((MjSlot::Lo(b), child.0));
                    next.push((MjSlot::Hi(b), child.1));
                }
            }
            depths.extend(same.iter().map(|&b| (b, depth(b) + 1)));
        }
        Ok(Some(LevelOut { state: next, depths }))
    }

    /// One row per value of each row's range `lo .. hi`: `RangeCount`, `ExclusiveScan`,
    /// `Expand`; returns `parent` and `pos`. With `window` (the bytes an expanded row
    /// costs), the expansion runs in rounds: a `Window` of its outputs that fits in memory
    /// at a time, the rest of the block (up to `close_rounds`) once per window.
    fn expand_ranges(
        &mut self,
        lo: BufId,
        hi: BufId,
        lvl: &str,
        rounds: &mut Vec<OpenRound>,
        window: Option<u64>,
    ) -> R<(BufId, BufId)> {
        let counts = self.launch1(Kernel::RangeCount, vec![lo, hi], &format!("{lvl}.counts"), None)?;
        let scan = self.launch(
            Kernel::ExclusiveScan,
            vec![counts],
            &[(&format!("{lvl}.offsets"), None), (&format!("{lvl}.total"), None)],
        )?;
        let mut args = vec![lo, scan[0], scan[1]];
        if let Some(row_bytes) = window {
            let w = self.launch1(
                Kernel::Window { row_bytes },
                vec![scan[1]],
                &format!("{lvl}.window"),
                None,
            )?;
            let n = self.blocks.len();
            let body = self.new_block(format!("{lvl}.round{n}"));
            let exit = self.new_block(format!("{lvl}.done{n}"));
            self.end_block(Terminator::LoopIf {
                nonempty: vec![w],
                body,
                exit,
            });
            self.start_block(body);
            rounds.push(OpenRound {
                body,
                exit,
                total: scan[1],
                window: w,
                row_bytes,
            });
            args.push(w);
        }
        let ex = self.launch(
            Kernel::Expand,
            args,
            &[(&format!("{lvl}.parent"), None), (&format!("{lvl}.pos"), None)],
        )?;
        Ok((ex[0], ex[1]))
    }

    /// Ends the rounds `expand_ranges` began, innermost first: the result `cols` of a round
    /// is appended to `acc`, the next window taken, and the loop repeated while one is
    /// left. Returns `cols` itself when no level ran in rounds, otherwise the accumulated
    /// columns (valid after the loops).
    fn close_rounds(&mut self, rounds: Vec<OpenRound>, acc: Option<Vec<BufId>>, cols: Vec<BufId>) -> R<Closed> {
        let Some(acc) = acc.filter(|_| !rounds.is_empty()) else {
            return Ok(Closed::Same(cols));
        };
        if acc.len() != cols.len() {
            return Err(LowerError::Invalid("a multi-way join's rounds lost a column".into()));
        }
        let width = cols.len();
        let mut args = acc.clone();
        args.extend(cols);
        let names: Vec<(String, Option<Type>)> = acc
            .iter()
            .map(|&b| (self.base_name(b), self.buffers[b.0 as usize].ty))
            .collect();
        let refs: Vec<(&str, Option<Type>)> = names.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        let grown = self.launch(Kernel::Concat { parts: 2, width }, args, &refs)?;
        for (&a, g) in acc.iter().zip(grown) {
            self.instrs.push(Instr::Move { dst: a, src: g });
        }
        for r in rounds.into_iter().rev() {
            let name = self.base_name(r.window);
            let next = self.launch1(
                Kernel::Window { row_bytes: r.row_bytes },
                vec![r.total, r.window],
                &name,
                None,
            )?;
            self.instrs.push(Instr::Move {
                dst: r.window,
                src: next,
            });
            self.end_block(Terminator::LoopIf {
                nonempty: vec![r.window],
                body: r.body,
                exit: r.exit,
            });
            self.start_block(r.exit);
        }
        Ok(Closed::Accumulated(acc))
    }

    /// The conjunction of `found` flags (the one flag itself when there is one).
    fn all_found(&mut self, found: Vec<BufId>, lvl: &str) -> R<BufId> {
        if found.len() == 1 {
            return Ok(found[0]);
        }
        let expr = KExpr {
            kind: KExprKind::And(
                (0..found.len())
                    .map(|i| KExpr {
                        kind: KExprKind::Col(i),
                        ty: Type::Bool,
                    })
                    .collect(),
            ),
            ty: Type::Bool,
        };
        let n_cols = found.len();
        self.launch1(Kernel::Eval { expr, n_cols }, found, &format!("{lvl}.found"), None)
    }

    /// Moves a multi-way join's state columns, and `extra` columns after them, through a
    /// row-selecting kernel (`Gather` by parent rows, `Compact` by flags) whose first
    /// argument is `by`. Returns the moved state and the moved extras; nothing is launched
    /// when there is nothing to move.
    fn carry_state(
        &mut self,
        kernel: Kernel,
        by: BufId,
        state: &[(MjSlot, BufId)],
        extra: &[(BufId, String)],
    ) -> R<(MjState, Vec<BufId>)> {
        if state.is_empty() && extra.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        // Slots holding the same buffer (the root range of atoms over one trie) move once
        // and keep sharing it.
        let mut distinct: Vec<BufId> = Vec::new();
        for &(_, b) in state {
            if !distinct.contains(&b) {
                distinct.push(b);
            }
        }
        let mut extra_distinct: Vec<(BufId, String)> = Vec::new();
        for (b, n) in extra {
            if !extra_distinct.iter().any(|(d, _)| d == b) {
                extra_distinct.push((*b, n.clone()));
            }
        }
        let mut args = vec![by];
        args.extend(distinct.iter().copied());
        args.extend(extra_distinct.iter().map(|(b, _)| *b));
        let mut names: Vec<(String, Option<Type>)> = distinct
            .iter()
            .map(|&b| (self.base_name(b), self.buffers[b.0 as usize].ty))
            .collect();
        names.extend(extra_distinct.iter().map(|(_, n)| (n.clone(), None)));
        let refs: Vec<(&str, Option<Type>)> = names.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        let mut got = self.launch(kernel, args, &refs)?;
        let got_extra = got.split_off(distinct.len());
        let moved = state
            .iter()
            .map(|&(s, b)| (s, got[distinct.iter().position(|&d| d == b).unwrap_or(0)]))
            .collect();
        let extras = extra
            .iter()
            .map(|(b, _)| got_extra[extra_distinct.iter().position(|(d, _)| d == b).unwrap_or(0)])
            .collect();
        Ok((moved, extras))
    }

    /// The range of children of the trie nodes at `pos`: `start[pos]`, `start[pos + 1]`.
    fn child_range(&mut self, atom: usize, start: BufId, pos: BufId) -> R<(BufId, BufId)> {
        if let Some(&(_, r)) = self.child_ranges.iter().find(|(k, _)| *k == (start, pos)) {
            return Ok(r);
        }
        let r = self.child_range_new(atom, start, pos)?;
        self.child_ranges.push(((start, pos), r));
        Ok(r)
    }

    fn child_range_new(&mut self, atom: usize, start: BufId, pos: BufId) -> R<(BufId, BufId)> {
        let lo = self.launch1(
            Kernel::Gather { shift: 0 },
            vec![pos, start],
            &format!("a{atom}.lo"),
            None,
        )?;
        let hi = self.launch1(
            Kernel::Gather { shift: 1 },
            vec![pos, start],
            &format!("a{atom}.hi"),
            None,
        )?;
        Ok((lo, hi))
    }

    /// The part of a buffer's name after the temp prefix (`t3.a0.lo~2` → `a0.lo`).
    fn base_name(&self, b: BufId) -> String {
        let name = &self.buffers[b.0 as usize].name;
        let name = name.split('~').next().unwrap_or(name);
        match name.split_once('.') {
            Some((_, rest)) => rest.to_string(),
            None => name.to_string(),
        }
    }

    // ---- expressions ---------------------------------------------------------------------

    /// A column holding `e` over the rows of `v`: the column itself for a column
    /// reference, the output of a string function, or an `Eval`.
    fn expr_col(&mut self, v: &Val, e: &Expr, label: &str) -> R<BufId> {
        match &e.kind {
            ExprKind::Col(i) => {
                return v
                    .cols
                    .get(*i)
                    .copied()
                    .ok_or_else(|| LowerError::Invalid(format!("an expression reads column {i} of {}", v.arity())))
            }
            ExprKind::Call(b @ (Builtin::Substr | Builtin::Concat), args) => return self.str_fn(v, *b, args, label),
            _ => {}
        }
        let mut cx = ExprCx::default();
        let k = self.kexpr(v, &mut cx, e)?;
        if cx.args.is_empty() {
            cx.args.push(v.cols[0]);
        }
        let n_cols = cx.args.len();
        let mut args = cx.args;
        args.extend(cx.tables);
        let ty = if label == "flags" { None } else { Some(e.ty) };
        self.launch1(Kernel::Eval { expr: k, n_cols }, args, label, ty)
    }

    /// `substr` or `concat` over the rows of `v`: its arguments as columns, then the
    /// string-producing kernel.
    fn str_fn(&mut self, v: &Val, b: Builtin, args: &[Expr], label: &str) -> R<BufId> {
        let (func, want): (StrFunc, &[Type]) = match b {
            Builtin::Substr => (StrFunc::Substr, &[Type::String, Type::Int64, Type::Int64]),
            _ => (StrFunc::Concat, &[Type::String, Type::String]),
        };
        if args.len() != want.len() {
            return Err(LowerError::Invalid(format!(
                "{func:?} takes {} arguments, found {}",
                want.len(),
                args.len()
            )));
        }
        let mut cols = Vec::with_capacity(args.len());
        for (i, (a, &t)) in args.iter().zip(want).enumerate() {
            let a = if a.ty == t {
                a.clone()
            } else {
                Expr {
                    kind: ExprKind::Cast(Box::new(a.clone())),
                    ty: t,
                }
            };
            cols.push(self.expr_col(v, &a, &format!("{label}.arg{i}"))?);
        }
        let out = self.launch1(Kernel::StrFn { func }, cols, label, Some(Type::String))?;
        // The dictionary grew: tables computed before no longer cover every code.
        self.tables.clear();
        Ok(out)
    }

    fn kexpr(&mut self, v: &Val, cx: &mut ExprCx, e: &Expr) -> R<KExpr> {
        let ty = e.ty;
        let node = |kind| KExpr { kind, ty };
        Ok(match &e.kind {
            ExprKind::Col(i) => {
                let b = *v
                    .cols
                    .get(*i)
                    .ok_or_else(|| LowerError::Invalid(format!("an expression reads column {i} of {}", v.arity())))?;
                node(KExprKind::Col(cx.arg(b)))
            }
            ExprKind::Const(c) => node(KExprKind::Const(c.clone())),
            ExprKind::Cast(a) => node(KExprKind::Cast(Box::new(self.kexpr(v, cx, a)?))),
            ExprKind::Neg(a) => node(KExprKind::Neg(Box::new(self.kexpr(v, cx, a)?))),
            ExprKind::Not(a) => node(KExprKind::Not(Box::new(self.kexpr(v, cx, a)?))),
            ExprKind::Arith(op, a, b) => {
                let (a, b) = (self.kexpr(v, cx, a)?, self.kexpr(v, cx, b)?);
                node(KExprKind::Arith(*op, Box::new(a), Box::new(b)))
            }
            ExprKind::Cmp(op, a, b) => {
                let string = a.ty == Type::String;
                let (mut a, mut b) = (self.kexpr(v, cx, a)?, self.kexpr(v, cx, b)?);
                if string && !matches!(op, CmpOp::Eq | CmpOp::Ne) {
                    let t = self.table(cx, DictOp::Rank)?;
                    let rank = |x: KExpr| KExpr {
                        kind: KExprKind::Table(t, Box::new(x)),
                        ty: Type::Int64,
                    };
                    a = rank(a);
                    b = rank(b);
                }
                node(KExprKind::Cmp(*op, Box::new(a), Box::new(b)))
            }
            ExprKind::And(es) => node(KExprKind::And(
                es.iter().map(|a| self.kexpr(v, cx, a)).collect::<R<_>>()?,
            )),
            ExprKind::Or(es) => node(KExprKind::Or(
                es.iter().map(|a| self.kexpr(v, cx, a)).collect::<R<_>>()?,
            )),
            ExprKind::In(a, vals) => node(KExprKind::In(Box::new(self.kexpr(v, cx, a)?), vals.clone())),
            ExprKind::Call(b, args) => match b {
                Builtin::Like | Builtin::Prefix => {
                    let name = if *b == Builtin::Like { "like" } else { "prefix" };
                    let [s, p] = args.as_slice() else {
                        return Err(LowerError::Invalid(format!("`{name}` takes two arguments")));
                    };
                    let ExprKind::Const(Value::String(pat)) = &p.kind else {
                        return Err(LowerError::Unsupported(format!(
                            "the pattern of `{name}` must be a string constant"
                        )));
                    };
                    let s = self.kexpr(v, cx, s)?;
                    let op = if *b == Builtin::Like {
                        DictOp::Like(pat.clone())
                    } else {
                        DictOp::Prefix(pat.clone())
                    };
                    let t = self.table(cx, op)?;
                    KExpr {
                        kind: KExprKind::Table(t, Box::new(s)),
                        ty: Type::Bool,
                    }
                }
                Builtin::Strlen => {
                    let [s] = args.as_slice() else {
                        return Err(LowerError::Invalid("`strlen` takes one argument".into()));
                    };
                    let s = self.kexpr(v, cx, s)?;
                    let t = self.table(cx, DictOp::Strlen)?;
                    let len = KExpr {
                        kind: KExprKind::Table(t, Box::new(s)),
                        ty: Type::Int32,
                    };
                    if ty == Type::Int32 {
                        len
                    } else {
                        node(KExprKind::Cast(Box::new(len)))
                    }
                }
                Builtin::Substr | Builtin::Concat => {
                    let col = self.str_fn(v, *b, args, "str")?;
                    node(KExprKind::Col(cx.arg(col)))
                }
                Builtin::Year | Builtin::Month | Builtin::Day | Builtin::Abs | Builtin::Round => {
                    let f = match b {
                        Builtin::Year => ScalarFn::Year,
                        Builtin::Month => ScalarFn::Month,
                        Builtin::Day => ScalarFn::Day,
                        Builtin::Abs => ScalarFn::Abs,
                        _ => ScalarFn::Round,
                    };
                    let args = args.iter().map(|a| self.kexpr(v, cx, a)).collect::<R<_>>()?;
                    node(KExprKind::Call(f, args))
                }
            },
        })
    }

    /// The index of a dictionary table among the expression's tables.
    fn table(&mut self, cx: &mut ExprCx, op: DictOp) -> R<usize> {
        let b = self.dict_table(op)?;
        Ok(match cx.tables.iter().position(|&t| t == b) {
            Some(i) => i,
            None => {
                cx.tables.push(b);
                cx.tables.len() - 1
            }
        })
    }
}

/// The kernel's description of an aggregate call.
fn agg_spec(a: &fox_ra::AggCall) -> AggSpec {
    AggSpec {
        func: a.func,
        input: a.arg.as_ref().map(|e| e.ty),
        output: a.ty,
    }
}

/// The arguments of an `Eval` being built.
#[derive(Default)]
struct ExprCx {
    args: Vec<BufId>,
    tables: Vec<BufId>,
}

impl ExprCx {
    fn arg(&mut self, b: BufId) -> usize {
        match self.args.iter().position(|&a| a == b) {
            Some(i) => i,
            None => {
                self.args.push(b);
                self.args.len() - 1
            }
        }
    }
}
