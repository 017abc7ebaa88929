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

use fox_phys::{AggAlgorithm, Algorithm, Order, PhysPlan};

use crate::ir::*;
use crate::sig::kernel_outputs;

mod aggregate;
mod band;
mod expr;
mod hash;
mod joins;
mod multijoin;
mod order;
mod rounds;
mod setops;
mod tiered;

pub use band::MAX_PROBE_ROWS;
use expr::ExprCx;
use rounds::{Closed, Cut, JoinRound, OpenRound, RoundsEnd};

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
    lower_with(ra, &fox_phys::Statistics::none())
}

/// Translates an RA plan into a kernel plan, every physical pass deciding with the
/// statistics `stats` of the data.
pub fn lower_with(ra: &RaPlan, stats: &fox_phys::Statistics) -> Result<KernelPlan, LowerError> {
    fox_ra::validate(ra).map_err(|e| LowerError::Invalid(e.to_string()))?;
    let phys = fox_phys::run(ra.clone(), stats, &fox_phys::Options::default())
        .map_err(|e| LowerError::Invalid(e.to_string()))?;
    lower_physical(&phys)
}

/// What a kernel plan is made to do besides computing its outputs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LowerOptions {
    /// Count the rows of every operator's result, for comparison with the estimate
    /// (`--timing`, `.explain analyze`): an [`Instr::Observe`] follows each temp's
    /// definition. Observations keep no value alive and take no part in scheduling, so
    /// the plan computes exactly what it computes without them.
    pub observe_rows: bool,
    /// Leave loop-invariant launches in their loops (`foxc compile --keep-loop-invariants`):
    /// by default each runs once before its loop instead of once per iteration (see
    /// `hoist.rs`). The two plans compute the same outputs.
    pub keep_loop_invariants: bool,
    /// The most probing rows an inequality join probes in one round (its `Window`'s
    /// `max_rows`), read as at least 1 and at most [`MAX_PROBE_ROWS`] (the default, where a
    /// round's ranges stay u32-addressed). A smaller cap makes more rounds of the same
    /// pairs in the same order: the outputs are those of the default plan.
    pub probe_rows: Option<u64>,
}

/// Translates an annotated RA plan into a kernel plan: lowering (following the
/// annotations), scheduling, liveness analysis and free placement.
pub fn lower_physical(phys: &PhysPlan) -> Result<KernelPlan, LowerError> {
    lower_physical_with(phys, &LowerOptions::default())
}

/// [`lower_physical`] with `options`.
pub fn lower_physical_with(phys: &PhysPlan, options: &LowerOptions) -> Result<KernelPlan, LowerError> {
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
        observe: options.observe_rows,
        probe_rows: options
            .probe_rows
            .map_or(band::MAX_PROBE_ROWS, |r| r.clamp(1, band::MAX_PROBE_ROWS)),
        observed: Vec::new(),
        runs: HashMap::new(),
        stmts: &[],
        tier_scans: HashMap::new(),
        empty_runs: HashSet::new(),
        join_window: None,
        local: false,
        join_round: None,
        ra_block: 0,
        stmt_at: 0,
        received: HashMap::new(),
    };
    let mut init = l.declare_relations()?;
    init.extend(l.declare_runs()?);
    // The runs of a tiered relation fold into it where the loop that merges into it exits.
    let mut exit_folds: HashMap<u32, Vec<RelId>> = HashMap::new();
    for b in &ra.blocks {
        if let fox_ra::Terminator::LoopIf { exit, .. } = &b.term {
            for s in &b.stmts {
                if let Stmt::Merge { into, .. } = s {
                    if l.tiering(*into).is_some() {
                        exit_folds.entry(exit.0).or_default().push(*into);
                    }
                }
            }
        }
    }
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
        l.ra_block = i as u32;
        l.cur_label = b.label.clone();
        l.stmts = &b.stmts;
        l.tier_scans.clear();
        l.empty_runs.clear();
        for &r in exit_folds.get(&(i as u32)).into_iter().flatten() {
            l.fold_runs(r)?;
        }
        for (k, s) in b.stmts.iter().enumerate() {
            l.stmt_at = k;
            l.stmt(s)?;
        }
        if l.join_round.is_some() {
            return Err(LowerError::Invalid(format!(
                "block {i} ends inside the rounds of a join"
            )));
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
            local: false,
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
        observed: l.observed,
    };
    crate::sched::optimize(&mut plan);
    if !options.keep_loop_invariants && crate::hoist::hoist_invariants(&mut plan) {
        crate::sched::optimize(&mut plan);
    }
    crate::live::place_frees(&mut plan);
    Ok(plan)
}

/// The longest operator text an [`Observed`] keeps.
const OBSERVED_OP_CHARS: usize = 48;

/// `text` cut to at most `max` characters, with `…` where it was cut.
fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut s: String = text.chars().take(max - 1).collect();
    s.push('…');
    s
}

/// A relation value during lowering: its column buffers and what is known about them.
#[derive(Clone, Debug)]
struct Val {
    /// The column buffers; one hidden `U8` column when the relation has no columns.
    cols: Vec<BufId>,
    /// The logical columns.
    columns: Vec<Column>,
    /// What is known of the rows' order and uniqueness (the rules are `Order`'s, shared
    /// with the order pass).
    order: Order,
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
            order: Order::unordered(),
            pending: None,
        }
    }

    fn arity(&self) -> usize {
        self.columns.len()
    }

    fn ty(&self, c: usize) -> Type {
        self.columns[c].ty
    }

    fn types(&self) -> Vec<Type> {
        self.columns.iter().map(|c| c.ty).collect()
    }
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
    /// Whether each temp's rows are observed ([`LowerOptions::observe_rows`]), and the
    /// operators observed so far.
    observe: bool,
    observed: Vec<Observed>,
    /// The most probing rows of an inequality join a round probes
    /// ([`LowerOptions::probe_rows`]).
    probe_rows: u64,
    /// The run buffers of each tiered relation, by relation id (see `tiered`).
    runs: HashMap<u32, Vec<Vec<BufId>>>,
    /// The statements of the RA block being lowered.
    stmts: &'a [Stmt],
    /// The scans of tiered relations in the current block that only differences read:
    /// they stand for the relation's buffers, and each difference subtracts the runs too.
    tier_scans: HashMap<fox_ra::TempId, RelId>,
    /// The tiered relations whose runs are known to be empty at this point of the block.
    empty_runs: HashSet<u32>,
    /// The join being lowered is written in rounds: the bytes a pair costs, the statement
    /// that ends them and what it is (taken by the expansion of its pairs).
    join_window: Option<(u64, fox_ra::TempId, RoundsEnd)>,
    /// The blocks made now run on each device by itself ([`Block::local`]): inside the
    /// loop over the boxes of a multi-way join the devices claim.
    local: bool,
    /// The rounds of a join, open until the aggregation that reads it is lowered.
    join_round: Option<JoinRound>,
    /// The RA block being lowered (`cur` moves on when the lowering splits it), and the
    /// position in it of the statement being lowered.
    ra_block: u32,
    stmt_at: usize,
    /// The temps standing for an operator's inputs received from other devices, while
    /// it is lowered, with the temp each stands for.
    received: HashMap<fox_ra::TempId, fox_ra::TempId>,
}

type R<T> = Result<T, LowerError>;

impl<'a> Lower<'a> {
    /// Counts the rows of temp `dst` (defined by `s`) where its value `v` is complete.
    fn observe_rows(&mut self, s: &Stmt, dst: fox_ra::TempId, v: &Val) {
        let text = fox_ra::print_stmt(self.ra, s);
        let op = text.split_once(" = ").map_or(text.as_str(), |(_, op)| op);
        self.instrs.push(Instr::Observe {
            id: self.observed.len() as u32,
            bufs: v.cols.clone(),
        });
        self.observed.push(Observed {
            label: format!("t{}", dst.0),
            op: shorten(op, OBSERVED_OP_CHARS),
            est: self.phys.node(dst).est.as_ref().map(|e| e.rows),
        });
    }

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
            DictOp::Regex(_) => "match",
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
            local: self.local,
        }));
        BlockId(self.blocks.len() as u32 - 1)
    }

    /// Ends the block being filled with `term`.
    fn end_block(&mut self, term: Terminator) {
        let label = std::mem::take(&mut self.cur_label);
        let instrs = std::mem::take(&mut self.instrs);
        let local = self.blocks[self.cur.0 as usize].as_ref().is_some_and(|b| b.local);
        self.blocks[self.cur.0 as usize] = Some(Block {
            label,
            instrs,
            term,
            local,
        });
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
                    let place = self.phys.rel_partitioning.get(self.rels.len());
                    Kernel::LoadInput {
                        input: self.inputs.len() - 1,
                        // A replicated input: every device loads all of it.
                        whole: matches!(place, Some(fox_phys::Partitioning::Replicated { .. })),
                        // An input hashed over the devices: each loads the rows of its keys.
                        hash: match place {
                            Some(fox_phys::Partitioning::Hash { cols, .. }) => cols.clone(),
                            _ => Vec::new(),
                        },
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
            order: Order {
                sorted: rel.props.sorted.clone(),
                ranked: false,
                unique: rel.props.unique,
            },
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

    // ---- devices ---------------------------------------------------------------------------

    /// `v` as `mv` leaves it: an [`Exchange`] of its columns (its pending filter applied
    /// first). Rows received from several devices have no known order (a set stays one).
    fn exchange(&mut self, v: Val, mv: &fox_phys::Redistribute) -> R<Val> {
        use fox_phys::Redistribute as M;
        let v = self.settle(v)?;
        let to = match mv {
            M::Hash { cols } if cols.is_empty() => Exchange::Gather,
            M::Hash { cols } => Exchange::Hash { cols: cols.clone() },
            M::Gather => Exchange::Gather,
            M::Broadcast => Exchange::Broadcast,
            M::Keep { cols } => Exchange::Keep { cols: cols.clone() },
        };
        let names: Vec<(String, Option<Type>)> = Self::col_names(&v.columns)
            .into_iter()
            .map(|(n, t)| (format!("{n}.x"), t))
            .collect();
        let refs: Vec<(&str, Option<Type>)> = names.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        let kernel = Kernel::Exchange {
            width: v.cols.len(),
            to,
        };
        let cols = self.launch(kernel, v.cols.clone(), &refs)?;
        let order = if mv.reorders() {
            Order {
                unique: v.order.unique,
                ..Order::unordered()
            }
        } else {
            v.order.clone()
        };
        Ok(Val { cols, order, ..v })
    }

    /// The partial aggregates `v` of this device's rows (`g` group columns, then one
    /// column per aggregate of `aggs`), moved as `mv` says and aggregated again: counts
    /// summed, sums summed, minima and maxima taken (`Node::partial`).
    fn combine_partials(
        &mut self,
        v: Val,
        mv: &fox_phys::Redistribute,
        g: usize,
        aggs: &[fox_ra::AggCall],
        columns: Vec<Column>,
    ) -> R<Val> {
        let x = self.exchange(v, mv)?;
        let again: Vec<fox_ra::AggCall> = aggs
            .iter()
            .enumerate()
            .map(|(i, a)| fox_ra::AggCall {
                func: match a.func {
                    AggFunc::Count => AggFunc::Sum,
                    f => f,
                },
                arg: Some(Expr {
                    kind: ExprKind::Col(g + i),
                    ty: a.ty,
                }),
                ty: a.ty,
            })
            .collect();
        let id = fox_ra::TempId(u32::MAX - 1000);
        self.temps.insert(id, x);
        let group: Vec<usize> = (0..g).collect();
        let r = self.aggregate(id, &group, &again, columns);
        self.temps.remove(&id);
        r
    }

    /// An aggregation with averages whose partial rows move as `mv` says
    /// (`Node::partial`; the partitioning pass makes an average partial only of int32,
    /// int64 or decimal values). Each device aggregates its rows with every `avg(e)` as
    /// `sum(e)` of `e` as a decimal (exact in 128 bits, as one device sums) and one count
    /// of the rows; the partial rows move and are aggregated again (sums and counts
    /// summed); then each average is its sum over the count at the average's scale,
    /// rounded half away from zero: `round(sum · 10^(so − si) / count)`, the value one
    /// device's `ReduceByKey` gives ([`crate::finish_int_sum`]).
    fn partial_averages(
        &mut self,
        input: fox_ra::TempId,
        group: &[usize],
        aggs: &[fox_ra::AggCall],
        mv: &fox_phys::Redistribute,
        columns: Vec<Column>,
    ) -> R<Val> {
        let g = group.len();
        let mut first = Vec::with_capacity(aggs.len() + 1);
        let mut first_cols: Vec<Column> = columns[..g].to_vec();
        for (i, a) in aggs.iter().enumerate() {
            let name = columns.get(g + i).map_or_else(|| format!("agg{i}"), |c| c.name.clone());
            match (a.func, &a.arg) {
                (AggFunc::Avg, Some(e)) => {
                    let (arg, si) = match e.ty {
                        Type::Int32 | Type::Int64 => (
                            Expr {
                                kind: ExprKind::Cast(Box::new(e.clone())),
                                ty: Type::Decimal(0),
                            },
                            0,
                        ),
                        Type::Decimal(s) => (e.clone(), s),
                        t => {
                            return Err(LowerError::Invalid(format!(
                                "{}: an average of {t} was made partial, which only averages of int32, int64 \
                                 and decimal values are",
                                self.prefix
                            )))
                        }
                    };
                    first.push(fox_ra::AggCall {
                        func: AggFunc::Sum,
                        arg: Some(arg),
                        ty: Type::WideDecimal(si),
                    });
                    first_cols.push(Column {
                        name: format!("{name}.sum"),
                        ty: Type::WideDecimal(si),
                    });
                }
                _ => {
                    first.push(a.clone());
                    first_cols.push(Column { name, ty: a.ty });
                }
            }
        }
        first.push(fox_ra::AggCall {
            func: AggFunc::Count,
            arg: None,
            ty: Type::Int64,
        });
        first_cols.push(Column {
            name: "avg.count".into(),
            ty: Type::Int64,
        });
        let v = self.aggregate(input, group, &first, first_cols.clone())?;
        let v = self.combine_partials(v, mv, g, &first, first_cols.clone())?;
        let count = Expr::col(g + aggs.len(), Type::Int64);
        let mut cols = Vec::with_capacity(columns.len());
        for (k, c) in columns.iter().enumerate() {
            let e = match aggs.get(k.wrapping_sub(g)).filter(|_| k >= g) {
                Some(a) if a.func == AggFunc::Avg => Expr {
                    kind: ExprKind::Arith(
                        fox_sema::core::ArithOp::Div,
                        Box::new(Expr::col(k, first_cols[k].ty)),
                        Box::new(count.clone()),
                    ),
                    ty: a.ty,
                },
                _ => Expr::col(k, first_cols[k].ty),
            };
            cols.push(self.expr_col(&v, &e, &c.name)?);
        }
        Ok(Val::unordered(cols, columns))
    }

    /// `op` reading, for each input `moves` names, a temp holding the rows the device
    /// receives (one exchange per temp and move, however many inputs read it so).
    fn receive_inputs(&mut self, op: &Op, moves: &[(usize, fox_phys::Redistribute)]) -> R<Op> {
        let inputs = op.inputs();
        let base = self.prefix.clone();
        let mut made: Vec<((fox_ra::TempId, &fox_phys::Redistribute), fox_ra::TempId)> = Vec::new();
        let mut out = op.clone();
        for (i, mv) in moves {
            let t = *inputs.get(*i).ok_or_else(|| {
                LowerError::Invalid(format!("{}: moves input {i}, which it does not have", self.prefix))
            })?;
            let id = match made.iter().find(|(k, _)| *k == (t, mv)) {
                Some(&(_, id)) => id,
                None => {
                    let v = self.temp(t)?;
                    self.prefix = format!("{base}.in{i}");
                    let x = self.exchange(v, mv)?;
                    let id = fox_ra::TempId(u32::MAX - made.len() as u32);
                    self.temps.insert(id, x);
                    self.received.insert(id, t);
                    made.push(((t, mv), id));
                    id
                }
            };
            *out.inputs_mut()[*i] = id;
        }
        self.prefix = base;
        Ok(out)
    }

    /// `v`, the temp the statement being lowered reads, moved as `partitioning` says for
    /// it.
    fn stmt_exchange(&mut self, v: Val) -> R<Val> {
        match self.phys.stmt_moves.get(&(self.ra_block, self.stmt_at)) {
            Some(mv) => self.exchange(v, mv),
            None => Ok(v),
        }
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
                let moves = &self.phys.node(*dst).moves;
                let received = if moves.is_empty() {
                    None
                } else {
                    Some(self.receive_inputs(op, moves)?)
                };
                self.prefix = format!("t{}", dst.0);
                self.dst = Some(*dst);
                let v = self.op(received.as_ref().unwrap_or(op), schema);
                self.dst = None;
                for t in std::mem::take(&mut self.received).into_keys() {
                    self.temps.remove(&t);
                }
                let v = v?;
                // The result's order is what the order pass recorded, or unknown.
                let order = self.phys.node(*dst).order.as_ref().map(|a| a.provides.clone());
                let v = Val {
                    order: order.unwrap_or_default(),
                    ..v
                };
                if self.observe && v.pending.is_none() {
                    self.observe_rows(s, *dst, &v);
                }
                self.temps.insert(*dst, v);
                self.defs.insert(*dst, op);
            }
            Stmt::Store { rel, src } => {
                let r = &self.ra.relations[rel.0 as usize];
                self.prefix = r.name.clone();
                let v = self.temp(*src)?;
                let v = self.stmt_exchange(v)?;
                let v = self.ensure(v, &r.props)?;
                self.move_into(*rel, &v);
                self.clear_runs(*rel)?;
            }
            Stmt::Merge { into, from } => self.tiered_merge(*into, *from, self.stmt_at)?,
            Stmt::Assign { dst, src } => {
                // The source's rows all in its buffers, then copied by name.
                self.fold_runs(*src)?;
                let r = &self.ra.relations[dst.0 as usize];
                self.prefix = r.name.clone();
                let v = self.rel_val(*src);
                let v = self.ensure(v, &r.props)?;
                self.move_into(*dst, &v);
                self.clear_runs(*dst)?;
            }
            Stmt::Clear { rel } => {
                let r = &self.ra.relations[rel.0 as usize];
                let kernel = Kernel::Const {
                    types: phys_types(&r.columns),
                    rows: Vec::new(),
                };
                self.launch_into(kernel, Vec::new(), self.rels[rel.0 as usize].clone())?;
                self.clear_runs(*rel)?;
            }
            Stmt::Output { rel, src } => {
                let r = &self.ra.relations[rel.0 as usize];
                self.prefix = r.name.clone();
                let v = self.temp(*src)?;
                let v = self.stmt_exchange(v)?;
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
                let v = self.stmt_exchange(v)?;
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

    // ---- operators -----------------------------------------------------------------------

    fn op(&mut self, op: &Op, schema: &Schema) -> R<Val> {
        let columns = schema.columns.clone();
        match op {
            Op::Scan(r) => {
                if self.tiering(*r).is_some() {
                    match self.dst {
                        Some(d) if self.only_subtracted(d) => {
                            self.tier_scans.insert(d, *r);
                        }
                        _ => {
                            let prefix = self.prefix.clone();
                            self.fold_runs(*r)?;
                            self.prefix = prefix;
                        }
                    }
                }
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
                if self.ends_join_round() {
                    let flags = self.expr_col(&v, pred, "flags")?;
                    let cols = self.compact(flags, &v.cols, &columns)?;
                    return self.close_filter_round(cols, columns);
                }
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
            Op::Union(inputs) => self.union(inputs, columns),
            Op::Unique(input) => {
                let v = self.temp(*input)?;
                let types = v.types();
                let keys = if v.order.fully_sorted(&types) {
                    v.order.code_sorted(&types).to_vec()
                } else {
                    asc(0..v.arity())
                };
                if self.ends_join_round() {
                    return self.close_unique_round(v, &keys, columns);
                }
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
                let claim = &self.ra.temps[self.received.get(input).unwrap_or(input).0 as usize]
                    .props
                    .sorted;
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
            } => {
                // Written in rounds: up to the aggregation or the duplicate removal that
                // alone reads the join's rows, or filtered per round by the select that
                // alone reads a join without keys.
                self.join_window =
                    self.dst
                        .and_then(|d| match self.phys.node(d).rounds.windows.as_slice() {
                            [Some(bytes)] => {
                                fox_phys::join_rounds_end(self.stmts, d, &self.phys.node(d).algorithm, left_keys.len())
                                    .map(|end| match end {
                                        fox_phys::JoinRoundsEnd::Aggregation(until) => {
                                            (*bytes, until, RoundsEnd::Aggregation)
                                        }
                                        fox_phys::JoinRoundsEnd::Select(until) => (*bytes, until, RoundsEnd::Select),
                                        fox_phys::JoinRoundsEnd::Unique(until) => (*bytes, until, RoundsEnd::Unique),
                                    })
                            }
                            _ => None,
                        });
                let v = self.binary_join(*left, *right, left_keys, right_keys, output, columns);
                // An algorithm that does not expand its pairs runs in one round.
                self.join_window = None;
                v
            }
            Op::SemiJoin {
                left,
                right,
                left_keys,
                right_keys,
            } => self.match_rows(*left, *right, left_keys, right_keys, false, columns),
            Op::AntiJoin {
                left,
                right,
                left_keys,
                right_keys,
            } => self.match_rows(*left, *right, left_keys, right_keys, true, columns),
            Op::Difference { left, right } => {
                let l = self.temp(*left)?;
                let all: Vec<usize> = (0..l.arity()).collect();
                let v = self.match_rows(*left, *right, &all, &all, true, columns.clone())?;
                match self.tier_scans.get(right).copied() {
                    Some(r) => self.subtract_runs(v, r, &columns),
                    None => Ok(v),
                }
            }
            Op::Aggregate { input, group, aggs } => {
                let partial = self.dst.and_then(|d| self.phys.node(d).partial.clone());
                if let Some(mv) = partial.filter(|_| aggs.iter().any(|a| a.func == AggFunc::Avg)) {
                    return self.partial_averages(*input, group, aggs, &mv, columns);
                }
                let v = self.aggregate(*input, group, aggs, columns.clone())?;
                let v = if self.ends_join_round() {
                    self.close_join_round(v, group, aggs, columns.clone())?
                } else {
                    v
                };
                match self.dst.and_then(|d| self.phys.node(d).partial.clone()) {
                    Some(mv) => self.combine_partials(v, &mv, group.len(), aggs, columns),
                    None => Ok(v),
                }
            }
            Op::MultiJoin {
                vars,
                inputs,
                output,
                count,
            } => self.multi_join(vars, inputs, output, *count, columns),
        }
    }
}

impl Lower<'_> {
    /// A binary join by the algorithm `join-selection` chose for it.
    fn binary_join(
        &mut self,
        left: fox_ra::TempId,
        right: fox_ra::TempId,
        left_keys: &[usize],
        right_keys: &[usize],
        output: &[JoinCol],
        columns: Vec<Column>,
    ) -> R<Val> {
        match self.dst.map(|d| &self.phys.node(d).algorithm) {
            Some(Algorithm::Band(band)) => self.band_join(left, right, left_keys, right_keys, band, output, columns),
            Some(Algorithm::Hash { build }) => {
                let how = hash::Search::Hash;
                self.searched_join(how, left, right, left_keys, right_keys, *build, output, columns)
            }
            Some(Algorithm::IndexNestedLoop { indexed }) => {
                let how = hash::Search::Index;
                self.searched_join(how, left, right, left_keys, right_keys, *indexed, output, columns)
            }
            Some(Algorithm::NestedLoop) => self.nested_join(left, right, left_keys, right_keys, output, columns),
            _ => self.join(left, right, left_keys, right_keys, output, columns),
        }
    }
}
