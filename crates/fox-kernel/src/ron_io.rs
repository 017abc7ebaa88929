//! The serialised kernel plan (versioned RON) and the consistency check applied when one
//! is read.

use serde::Deserialize;

use crate::bitset::BufSet;
use crate::ir::*;
use crate::live::{defs, term_uses, uses};
use crate::print::{elem_name, instr_text};
use crate::sig::kernel_outputs;

/// Why a kernel plan could not be read.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LoadError {
    /// A plan written by a build with another plan format.
    #[error("plan version {found}, this foxrun reads version {expected}; compile the query again with this foxc")]
    Version { found: u32, expected: u32 },
    /// The text is not a kernel plan in RON form.
    #[error("the kernel plan is not valid RON: {0}")]
    Syntax(String),
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

/// Reads a plan written by [`to_ron`]: the format version first, then the whole plan,
/// then [`validate`].
pub fn from_ron(text: &str) -> Result<KernelPlan, LoadError> {
    let probe: VersionProbe = ron::from_str(text).map_err(|e| LoadError::Syntax(e.to_string()))?;
    if probe.version != KERNEL_PLAN_VERSION {
        return Err(LoadError::Version {
            found: probe.version,
            expected: KERNEL_PLAN_VERSION,
        });
    }
    let plan: KernelPlan = ron::from_str(text).map_err(|e| LoadError::Syntax(e.to_string()))?;
    validate(&plan)?;
    Ok(plan)
}

/// Checks that a plan hangs together: the version; every block, buffer and input
/// referenced exists; every launch's arguments and outputs fit its kernel's contract
/// (counts and element types); moves keep the element type; outputs match their
/// columns; and every buffer read (or freed) is defined, and not freed, on every path to
/// the point that reads it.
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
    check_defined(plan)
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
                        elem_name(elem(plan, o)),
                        elem_name(w)
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
                return Err(format!(
                    "moves a {} buffer into a {} buffer",
                    elem_name(s),
                    elem_name(d)
                ));
            }
            Ok(())
        }
        Instr::Free { .. } => Ok(()),
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
fn check_defined(plan: &KernelPlan) -> Result<(), LoadError> {
    let n = plan.buffers.len();
    let nb = plan.blocks.len();
    let mut held_in: Vec<Option<BufSet>> = vec![None; nb];
    held_in[plan.entry.0 as usize] = Some(BufSet::new(n));
    let mut changed = true;
    // Blocks not yet reached hold "everything" (the identity of the intersection).
    while changed {
        changed = false;
        for b in 0..nb {
            let Some(mut held) = held_in[b].clone() else {
                continue;
            };
            for i in &plan.blocks[b].instrs {
                transfer(&mut held, i);
            }
            for s in plan.blocks[b].term.successors() {
                let s = s.0 as usize;
                match &mut held_in[s] {
                    None => {
                        held_in[s] = Some(held.clone());
                        changed = true;
                    }
                    Some(h) => {
                        if h.intersect_with(&held) {
                            changed = true;
                        }
                    }
                }
            }
        }
    }
    for (b, block) in plan.blocks.iter().enumerate() {
        let Some(mut held) = held_in[b].clone() else {
            continue;
        };
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

fn transfer(held: &mut BufSet, i: &Instr) {
    if let Instr::Free { buf } = i {
        held.remove(*buf);
    }
    for d in defs(i) {
        held.insert(d);
    }
}
