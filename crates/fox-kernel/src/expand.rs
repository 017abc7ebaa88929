//! Composite kernels and their expansions. A composite kernel (`FusedReduce`) is defined
//! as a composition of other kernels; [`expand`] derives that composition from the
//! kernel's own parameters, so a backend that cannot run the kernel in one piece declines
//! it and the runtime runs the expansion instead, with the same results and errors.

use crate::ir::Kernel;

/// A value of an expansion: argument `i` of the composite launch, or output `o` of step
/// `s`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    Arg(usize),
    Out { step: usize, out: usize },
}

/// One launch of an expansion. An error of the step is reported as the composite
/// kernel's, its message preceded by `context`.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub kernel: Kernel,
    pub args: Vec<Operand>,
    /// The number of outputs.
    pub outs: usize,
    pub context: String,
}

/// The steps of a composite kernel, in order, and which of their outputs are the
/// composite's outputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Expansion {
    pub steps: Vec<Step>,
    pub outs: Vec<Operand>,
}

/// The expansion of `kernel` launched on `n_args` arguments, or `None` when it is not a
/// composite kernel. The arguments are those the kernel's contract accepts
/// ([`crate::check_args`]).
pub fn expand(kernel: &Kernel, n_args: usize) -> Option<Expansion> {
    let Kernel::FusedReduce {
        filter,
        nkeys,
        aggs,
        exprs,
        n_cols,
    } = kernel
    else {
        return None;
    };
    let (nkeys, n_cols) = (*nkeys, *n_cols);
    let tables: Vec<Operand> = (n_cols..n_args).map(Operand::Arg).collect();
    let mut steps: Vec<Step> = Vec::new();
    let push = |steps: &mut Vec<Step>, kernel: Kernel, args: Vec<Operand>, outs: usize, context: String| {
        steps.push(Step {
            kernel,
            args,
            outs,
            context,
        });
        steps.len() - 1
    };
    let outs_of = |step: usize, n: usize| (0..n).map(move |out| Operand::Out { step, out });
    // The rows that pass the filter: `Eval` of the filter, then `Compact` of the columns.
    let mut rows: Vec<Operand> = (0..n_cols).map(Operand::Arg).collect();
    if let Some(f) = filter {
        let mut args = rows.clone();
        args.extend(&tables);
        let flags = push(
            &mut steps,
            Kernel::Eval {
                expr: f.clone(),
                n_cols,
            },
            args,
            1,
            "the filter: ".into(),
        );
        let mut args = vec![Operand::Out { step: flags, out: 0 }];
        args.extend(&rows);
        let kept = push(&mut steps, Kernel::Compact, args, n_cols, String::new());
        rows = outs_of(kept, n_cols).collect();
    }
    // The value of each aggregate but `count`.
    let mut vals = Vec::new();
    for (j, e) in exprs.iter().enumerate() {
        if let Some(e) = e {
            let mut args = rows.clone();
            args.extend(&tables);
            let v = push(
                &mut steps,
                Kernel::Eval {
                    expr: e.clone(),
                    n_cols,
                },
                args,
                1,
                format!("aggregate {j}: "),
            );
            vals.push(Operand::Out { step: v, out: 0 });
        }
    }
    // Keys and values in key order, then the reduction.
    let mut cols_in: Vec<Operand> = rows[..nkeys].to_vec();
    cols_in.extend(&vals);
    let reduce_args = if nkeys > 0 {
        let perm = push(
            &mut steps,
            Kernel::SortPerm {
                desc: vec![false; nkeys],
                by_rank: vec![false; nkeys],
            },
            rows[..nkeys].to_vec(),
            1,
            String::new(),
        );
        let mut args = vec![Operand::Out { step: perm, out: 0 }];
        args.extend(&cols_in);
        let sorted = push(
            &mut steps,
            Kernel::Gather { shift: 0 },
            args,
            cols_in.len(),
            String::new(),
        );
        outs_of(sorted, cols_in.len()).collect()
    } else if vals.is_empty() {
        // Only counts: one column gives the row count.
        vec![rows[0]]
    } else {
        cols_in
    };
    let n_out = nkeys + aggs.len();
    let reduce = push(
        &mut steps,
        Kernel::ReduceByKey {
            nkeys,
            aggs: aggs.clone(),
        },
        reduce_args,
        n_out,
        String::new(),
    );
    Some(Expansion {
        steps,
        outs: outs_of(reduce, n_out).collect(),
    })
}
