//! The serialised kernel plan (versioned RON) and the consistency check applied when one
//! is read.

use serde::Deserialize;

use crate::bitset::{union_sorted, SparseSet};
use crate::ir::*;
use crate::live::{defs, term_uses, uses};
use crate::print::instr_text;
use crate::sig::kernel_outputs;

/// Why a kernel plan could not be read.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LoadError {
    /// A plan written by a build with another plan format.
    #[error("plan version {found}, this foxrun reads version {expected}; compile the query again with this foxc")]
    Version { found: u32, expected: u32 },
    /// The text is not a kernel plan in RON form: what is wrong, at a line and column
    /// (1-based) of the text.
    #[error("{line}:{col}: the kernel plan is not valid RON: {msg}")]
    Syntax { line: usize, col: usize, msg: String },
    /// The plan parses but does not hang together; the message names the block and
    /// instruction.
    #[error("the kernel plan is inconsistent: {0}")]
    Invalid(String),
}

/// The plan as pretty-printed RON.
pub fn to_ron(plan: &KernelPlan) -> String {
    let config = ron::ser::PrettyConfig::new().struct_names(true);
    // The plan is plain data with derived impls (128-bit integers are enabled), so this
    // does not fail; if it did, the text says why and `from_ron` refuses it.
    ron::ser::to_string_pretty(plan, config)
        .unwrap_or_else(|e| format!("// the plan could not be written as RON: {e}\n"))
}

#[derive(Deserialize)]
#[serde(rename = "KernelPlan")]
struct VersionProbe {
    version: u32,
}

/// Reads a plan written by [`to_ron`], then [`validate`]s it. A text that is not a plan
/// of this version but names another version is a [`LoadError::Version`].
pub fn from_ron(text: &str) -> Result<KernelPlan, LoadError> {
    let plan: KernelPlan = match ron::from_str(text) {
        Ok(plan) => plan,
        Err(e) => {
            // A plan of another version may not parse as this one: say so rather than
            // what does not parse.
            if let Ok(probe) = ron::from_str::<VersionProbe>(text) {
                if probe.version != KERNEL_PLAN_VERSION {
                    return Err(LoadError::Version {
                        found: probe.version,
                        expected: KERNEL_PLAN_VERSION,
                    });
                }
            }
            return Err(LoadError::Syntax {
                line: e.span.start.line,
                col: e.span.start.col,
                msg: e.code.to_string(),
            });
        }
    };
    validate(&plan)?;
    Ok(plan)
}

/// Checks that a plan hangs together: the version; every block, buffer and input
/// referenced exists; every launch's arguments and outputs fit its kernel's contract
/// (counts and element types); every decimal type has at most 18 fraction digits; moves
/// keep the element type; outputs match their columns, each output name is a predicate
/// name written by one `Output` that runs at most once; every buffer read (or freed) is
/// defined, and not freed, on every path to the point that reads it; and the plan can
/// halt: every reachable block has a path to a `Halt`, and every buffer a loop tests is
/// redefined inside the loop.
pub fn validate(plan: &KernelPlan) -> Result<(), LoadError> {
    if plan.version != KERNEL_PLAN_VERSION {
        return Err(LoadError::Version {
            found: plan.version,
            expected: KERNEL_PLAN_VERSION,
        });
    }
    let nb = plan.blocks.len();
    let n = plan.buffers.len();
    let invalid = |m: String| LoadError::Invalid(m);
    if plan.entry.0 as usize >= nb {
        return Err(invalid(format!(
            "the entry block b{} does not exist ({nb} blocks)",
            plan.entry.0
        )));
    }
    for (bi, block) in plan.blocks.iter().enumerate() {
        let at = |k: usize| format!("block b{bi} ({}), instruction {}", block.label, k + 1);
        for (k, i) in block.instrs.iter().enumerate() {
            let mut all = uses(i);
            all.extend(defs(i));
            if let Instr::Free { buf } = i {
                all.push(*buf);
            }
            if let Some(b) = all.iter().find(|b| b.0 as usize >= n) {
                return Err(invalid(format!(
                    "{}: buffer #{} does not exist ({n} buffers)",
                    at(k),
                    b.0
                )));
            }
            check_instr(plan, i).map_err(|m| invalid(format!("{} (`{}`): {m}", at(k), instr_text(plan, i))))?;
            if block.local && i.is_collective() {
                return Err(invalid(format!(
                    "{} (`{}`): a collective in a block each device runs by itself",
                    at(k),
                    instr_text(plan, i)
                )));
            }
            // Devices take different boxes: a loop over them is decided by each alone.
            if let (
                false,
                Instr::Launch {
                    kernel: Kernel::Claim { .. },
                    ..
                },
            ) = (block.local, i)
            {
                return Err(invalid(format!(
                    "{} (`{}`): a claim of boxes in a block the devices run together",
                    at(k),
                    instr_text(plan, i)
                )));
            }
            check_instr_types(i).map_err(|m| invalid(format!("{} (`{}`): {m}", at(k), instr_text(plan, i))))?;
        }
        for s in block.term.successors() {
            if s.0 as usize >= nb {
                return Err(invalid(format!(
                    "block b{bi} ({}) jumps to block b{}, which does not exist ({nb} blocks)",
                    block.label, s.0
                )));
            }
        }
        if let Some(b) = term_uses(&block.term).iter().find(|b| b.0 as usize >= n) {
            return Err(invalid(format!(
                "block b{bi} ({}): the loop test reads buffer #{}, which does not exist",
                block.label, b.0
            )));
        }
    }
    for (k, b) in plan.buffers.iter().enumerate() {
        if let Some(t) = b.ty {
            check_type(t).map_err(|m| invalid(format!("buffer `{}` (#{k}): {m}", b.name)))?;
        }
    }
    for rel in &plan.inputs {
        for c in &rel.columns {
            check_type(c.ty).map_err(|m| invalid(format!("column `{}` of input `{}`: {m}", c.name, rel.name)))?;
        }
        if let Some(&k) = rel.key.iter().find(|&&k| k >= rel.columns.len()) {
            return Err(invalid(format!(
                "input `{}` is keyed by column {k}, but it has {} columns",
                rel.name,
                rel.columns.len()
            )));
        }
    }
    check_outputs(plan)?;
    check_halts(plan)?;
    check_defined(plan)
}

fn check_type(t: fox_sema::core::Type) -> Result<(), String> {
    use fox_sema::core::MAX_SCALE;
    match t.decimal_scale() {
        Some(s) if s > MAX_SCALE => Err(format!("the type {t} has more than {MAX_SCALE} fraction digits")),
        _ => Ok(()),
    }
}

/// The types an instruction names (columns, constants, expressions, aggregates).
fn check_instr_types(i: &Instr) -> Result<(), String> {
    fn expr(e: &KExpr) -> Result<(), String> {
        check_type(e.ty)?;
        match &e.kind {
            KExprKind::Col(_) | KExprKind::Const(_) => Ok(()),
            KExprKind::Table(_, x)
            | KExprKind::Cast(x)
            | KExprKind::Neg(x)
            | KExprKind::Not(x)
            | KExprKind::In(x, _) => expr(x),
            KExprKind::Arith(_, a, b) | KExprKind::Cmp(_, a, b) => expr(a).and_then(|_| expr(b)),
            KExprKind::And(xs) | KExprKind::Or(xs) | KExprKind::Call(_, xs) => xs.iter().try_for_each(expr),
        }
    }
    let aggs = |aggs: &[AggSpec]| {
        aggs.iter()
            .try_for_each(|a| a.input.map_or(Ok(()), check_type).and_then(|_| check_type(a.output)))
    };
    match i {
        Instr::Launch { kernel, .. } => match kernel {
            Kernel::Const { types, .. } => types.iter().try_for_each(|&t| check_type(t)),
            Kernel::Eval { expr: e, .. } => expr(e),
            Kernel::ReduceByKey { aggs: a, .. } => aggs(a),
            Kernel::FusedReduce {
                filter, aggs: a, exprs, ..
            } => {
                filter.iter().chain(exprs.iter().flatten()).try_for_each(expr)?;
                aggs(a)
            }
            _ => Ok(()),
        },
        Instr::Output { columns, .. } => columns.iter().try_for_each(|c| check_type(c.ty)),
        Instr::Assert {
            check: Check::Functional { columns, .. },
            ..
        } => columns.iter().try_for_each(|c| check_type(c.ty)),
        Instr::Move { .. } | Instr::Free { .. } | Instr::Observe { .. } => Ok(()),
    }
}

/// Whether `name` is a predicate name (`[A-Za-z_][A-Za-z0-9_]*`, parts joined by `:`), so
/// that an output file named after it stays in its directory.
fn is_predicate_name(name: &str) -> bool {
    !name.is_empty()
        && name.split(':').all(|part| {
            let mut cs = part.chars();
            cs.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// The blocks reachable from `from` (itself included) along `succ`.
fn reach(nb: usize, from: &[usize], succ: impl Fn(usize) -> Vec<usize>) -> Vec<bool> {
    let mut seen = vec![false; nb];
    let mut stack: Vec<usize> = from.to_vec();
    while let Some(b) = stack.pop() {
        if std::mem::replace(&mut seen[b], true) {
            continue;
        }
        stack.extend(succ(b).into_iter().filter(|&s| !seen[s]));
    }
    seen
}

fn successors(plan: &KernelPlan, b: usize) -> Vec<usize> {
    plan.blocks[b].term.successors().iter().map(|s| s.0 as usize).collect()
}

/// The predecessors of every block.
fn predecessors(plan: &KernelPlan) -> Vec<Vec<usize>> {
    let mut preds = vec![Vec::new(); plan.blocks.len()];
    for b in 0..plan.blocks.len() {
        for s in successors(plan, b) {
            preds[s].push(b);
        }
    }
    preds
}

/// The strongly connected components of the CFG.
struct BlockComponents {
    /// Per block, its component.
    comp: Vec<usize>,
    /// Per component, its blocks (ascending).
    members: Vec<Vec<usize>>,
    /// Per block, whether it jumps to itself.
    self_loop: Vec<bool>,
}

impl BlockComponents {
    fn of(plan: &KernelPlan) -> BlockComponents {
        let nb = plan.blocks.len();
        let mut g = petgraph::graph::DiGraph::<(), ()>::with_capacity(nb, 2 * nb);
        let nodes: Vec<_> = (0..nb).map(|_| g.add_node(())).collect();
        let mut self_loop = vec![false; nb];
        for (b, &n) in nodes.iter().enumerate() {
            for s in successors(plan, b).into_iter().filter(|&s| s < nb) {
                self_loop[b] |= s == b;
                g.add_edge(n, nodes[s], ());
            }
        }
        let mut comp = vec![0; nb];
        let members: Vec<Vec<usize>> = petgraph::algo::tarjan_scc(&g)
            .into_iter()
            .enumerate()
            .map(|(c, m)| {
                let mut m: Vec<usize> = m.into_iter().map(|n| n.index()).collect();
                m.sort_unstable();
                for &b in &m {
                    comp[b] = c;
                }
                m
            })
            .collect();
        BlockComponents {
            comp,
            members,
            self_loop,
        }
    }

    /// Whether block `b` is on a cycle of the CFG (reachable from one of its successors).
    fn on_cycle(&self, b: usize) -> bool {
        self.self_loop[b] || self.members[self.comp[b]].len() > 1
    }
}

/// Each output name is a predicate name, written by one `Output` instruction, in a block
/// that runs at most once (one on no cycle of the CFG).
fn check_outputs(plan: &KernelPlan) -> Result<(), LoadError> {
    let comps = BlockComponents::of(plan);
    let mut seen: std::collections::HashMap<&str, (usize, usize)> = std::collections::HashMap::new();
    for (b, block) in plan.blocks.iter().enumerate() {
        for (k, i) in block.instrs.iter().enumerate() {
            let Instr::Output { name, .. } = i else { continue };
            let at = format!("block b{b} ({}), instruction {}", block.label, k + 1);
            if !is_predicate_name(name) {
                return Err(LoadError::Invalid(format!(
                    "{at}: the output name {name:?} is not a predicate name"
                )));
            }
            if let Some(&(b0, k0)) = seen.get(name.as_str()) {
                return Err(LoadError::Invalid(format!(
                    "{at}: output `{name}` is written twice (also by block b{b0} ({}), instruction {})",
                    plan.blocks[b0].label,
                    k0 + 1
                )));
            }
            seen.insert(name, (b, k));
            if comps.on_cycle(b) {
                return Err(LoadError::Invalid(format!(
                    "{at}: output `{name}` is inside a loop, so it would be written more than once"
                )));
            }
        }
    }
    Ok(())
}

/// A plan must be able to halt: every block reachable from the entry has a path to a
/// `Halt` (a cycle without a way out never ends), and every buffer a `LoopIf` tests is
/// redefined by some instruction of its loop (the blocks on a path from `body` back to
/// the test): a test buffer the loop never redefines keeps its rows, so once it holds a
/// row the loop repeats forever.
fn check_halts(plan: &KernelPlan) -> Result<(), LoadError> {
    let nb = plan.blocks.len();
    let entry = plan.entry.0 as usize;
    let preds = predecessors(plan);
    let halts: Vec<usize> = (0..nb)
        .filter(|&b| matches!(plan.blocks[b].term, Terminator::Halt))
        .collect();
    let can_halt = reach(nb, &halts, |b| preds[b].clone());
    // Blocks reachable from the entry, breadth first.
    let mut seen = vec![false; nb];
    let mut order = vec![entry];
    seen[entry] = true;
    let mut k = 0;
    while k < order.len() {
        for s in successors(plan, order[k]) {
            if !std::mem::replace(&mut seen[s], true) {
                order.push(s);
            }
        }
        k += 1;
    }
    // Where some reachable block cannot reach a `Halt`, the cycle it ends in (every block
    // has a successor unless it halts) is named by its first block met from the entry.
    if order.iter().any(|&b| !can_halt[b]) {
        let on_cycle = |b: usize| reach(nb, &successors(plan, b), |x| successors(plan, x))[b];
        if let Some(&b) = order.iter().find(|&&b| !can_halt[b] && on_cycle(b)) {
            return Err(LoadError::Invalid(format!(
                "block b{b} ({}) can never halt: it is on a cycle with no path to a block that halts",
                plan.blocks[b].label
            )));
        }
    }
    // The blocks on a path from a loop's body back to its test are those of the test's
    // strongly connected component (the test reaches the body, so the body reaches the
    // test exactly when both are in one component); each component's definitions are
    // gathered once.
    let comps = BlockComponents::of(plan);
    let mut redefined_in: std::collections::HashMap<usize, std::collections::HashSet<BufId>> =
        std::collections::HashMap::new();
    for (b, block) in plan.blocks.iter().enumerate() {
        let Terminator::LoopIf { nonempty, body, .. } = &block.term else {
            continue;
        };
        if !seen[b] {
            continue;
        }
        let c = comps.comp[b];
        if comps.comp[body.0 as usize] != c {
            // The body never comes back to the test: no loop.
            continue;
        }
        let redefined = redefined_in.entry(c).or_insert_with(|| {
            comps.members[c]
                .iter()
                .flat_map(|&l| plan.blocks[l].instrs.iter().flat_map(defs))
                .collect()
        });
        if let Some(&u) = nonempty.iter().find(|&&u| !redefined.contains(&u)) {
            return Err(LoadError::Invalid(format!(
                "block b{b} ({}): the loop test reads `{}`, which no instruction of the loop redefines, so once \
                 it holds a row the loop never ends",
                block.label, plan.buffers[u.0 as usize].name
            )));
        }
    }
    Ok(())
}

fn elem(plan: &KernelPlan, b: BufId) -> Elem {
    plan.buffers[b.0 as usize].elem
}

fn check_instr(plan: &KernelPlan, i: &Instr) -> Result<(), String> {
    match i {
        Instr::Launch { kernel, args, outs, .. } => {
            let arg_elems: Vec<Elem> = args.iter().map(|&b| elem(plan, b)).collect();
            let want = kernel_outputs(kernel, &arg_elems, &plan.inputs)?;
            if want.len() != outs.len() {
                return Err(format!(
                    "the kernel has {} outputs, {} are given",
                    want.len(),
                    outs.len()
                ));
            }
            for (k, (&o, &w)) in outs.iter().zip(&want).enumerate() {
                if elem(plan, o) != w {
                    return Err(format!(
                        "output {k} (`{}`) is {}, but the kernel produces {}",
                        plan.buffers[o.0 as usize].name,
                        elem(plan, o).name(),
                        w.name()
                    ));
                }
                if outs[..k].contains(&o) || args.contains(&o) {
                    return Err(format!(
                        "`{}` is written twice by one launch, or is both read and written",
                        plan.buffers[o.0 as usize].name
                    ));
                }
            }
            Ok(())
        }
        Instr::Move { dst, src } => {
            let (d, s) = (elem(plan, *dst), elem(plan, *src));
            if d != s {
                return Err(format!("moves a {} buffer into a {} buffer", s.name(), d.name()));
            }
            Ok(())
        }
        Instr::Free { .. } => Ok(()),
        Instr::Observe { id, bufs } => {
            if *id as usize >= plan.observed.len() {
                return Err(format!(
                    "observes operator #{id}, but the plan lists {} observed operators",
                    plan.observed.len()
                ));
            }
            if bufs.is_empty() {
                return Err("observes no buffer".into());
            }
            Ok(())
        }
        Instr::Assert { check, args, .. } => match check {
            Check::Functional { pred, columns, keys } => {
                let row: Vec<Elem> = columns.iter().map(|c| Elem::of(c.ty)).collect();
                let have: Vec<Elem> = args.iter().map(|&b| elem(plan, b)).collect();
                if *keys >= columns.len()
                    || have.len() != 2 * row.len()
                    || have[..row.len()] != row[..]
                    || have[row.len()..] != row[..]
                {
                    return Err(format!(
                        "the check of `{pred}` needs two rows of columns {row:?} with fewer than {} key columns, but its buffers hold {have:?}",
                        columns.len()
                    ));
                }
                Ok(())
            }
        },
        Instr::Output {
            columns, cols, order, ..
        } => {
            let want: Vec<Elem> = if columns.is_empty() {
                vec![Elem::U8]
            } else {
                columns.iter().map(|c| Elem::of(c.ty)).collect()
            };
            let have: Vec<Elem> = cols.iter().map(|&b| elem(plan, b)).collect();
            if want != have {
                return Err(format!(
                    "the output has columns of types {:?}, but its buffers hold {:?}",
                    want, have
                ));
            }
            if let Some(&(c, _)) = order.iter().find(|&&(c, _)| c >= columns.len()) {
                return Err(format!("orders by column {c} of {}", columns.len()));
            }
            Ok(())
        }
    }
}

/// Forward "must be held" analysis: a buffer is held at a point when on every path from
/// the entry it has been defined and not freed since.
///
/// Each block is summarised by the buffers it frees (and does not define again after) and
/// those it leaves defined: what it holds at its end is `(held - freed) ∪ defined`. The
/// held sets are sparse, and a block is looked at again only when what holds on entry to
/// it shrank.
fn check_defined(plan: &KernelPlan) -> Result<(), LoadError> {
    let n = plan.buffers.len();
    let nb = plan.blocks.len();
    let mut freed: Vec<Vec<BufId>> = Vec::with_capacity(nb);
    let mut defined: Vec<Vec<BufId>> = Vec::with_capacity(nb);
    let mut fset = SparseSet::new(n);
    let mut dset = SparseSet::new(n);
    for block in &plan.blocks {
        fset.clear();
        dset.clear();
        for i in &block.instrs {
            if let Instr::Free { buf } = i {
                dset.remove(*buf);
                fset.insert(*buf);
            }
            for d in defs(i) {
                dset.insert(d);
            }
        }
        freed.push(fset.sorted());
        defined.push(dset.sorted());
    }
    // `None`: not reached yet, which stands for every buffer (the identity of the
    // intersection).
    let mut held_in: Vec<Option<Vec<BufId>>> = vec![None; nb];
    held_in[plan.entry.0 as usize] = Some(Vec::new());
    let mut work: std::collections::BTreeSet<usize> = std::collections::BTreeSet::from([plan.entry.0 as usize]);
    while let Some(b) = work.pop_first() {
        let Some(held) = &held_in[b] else {
            continue;
        };
        let kept: Vec<BufId> = held
            .iter()
            .copied()
            .filter(|x| freed[b].binary_search(x).is_err())
            .collect();
        let out = union_sorted(&kept, &defined[b]);
        for s in plan.blocks[b].term.successors() {
            let s = s.0 as usize;
            let next = match &held_in[s] {
                None => out.clone(),
                Some(h) => {
                    let both: Vec<BufId> = h.iter().copied().filter(|x| out.binary_search(x).is_ok()).collect();
                    if both.len() == h.len() {
                        continue;
                    }
                    both
                }
            };
            held_in[s] = Some(next);
            work.insert(s);
        }
    }
    let mut held = SparseSet::new(n);
    for (b, block) in plan.blocks.iter().enumerate() {
        let Some(start) = &held_in[b] else {
            continue;
        };
        held.reset_to(start);
        for (k, i) in block.instrs.iter().enumerate() {
            let mut read = uses(i);
            if let Instr::Free { buf } = i {
                read.push(*buf);
            }
            if let Some(&u) = read.iter().find(|&&u| !held.contains(u)) {
                let what = if matches!(i, Instr::Free { .. }) {
                    "freed"
                } else {
                    "read"
                };
                return Err(LoadError::Invalid(format!(
                    "block b{b} ({}), instruction {} (`{}`): `{}` is {what} but is not defined on every path to \
                     it, or was freed before",
                    block.label,
                    k + 1,
                    instr_text(plan, i),
                    plan.buffers[u.0 as usize].name
                )));
            }
            transfer(&mut held, i);
        }
        if let Some(&u) = term_uses(&block.term).iter().find(|&&u| !held.contains(u)) {
            return Err(LoadError::Invalid(format!(
                "block b{b} ({}): the loop test reads `{}`, which is not defined on every path to it",
                block.label, plan.buffers[u.0 as usize].name
            )));
        }
    }
    Ok(())
}

fn transfer(held: &mut SparseSet, i: &Instr) {
    if let Instr::Free { buf } = i {
        held.remove(*buf);
    }
    for d in defs(i) {
        held.insert(d);
    }
}
