//! Building kernel plans from LogiQL source, and an independent checker of the placement
//! of frees.
#![allow(dead_code)]

use std::collections::BTreeSet;

use fox_kernel::*;

/// [`kernels`] with the physical passes `disabled` left out.
pub fn kernels_without(src: &str, disabled: &[&str]) -> KernelPlan {
    let (ast, _) = fox_syntax::parse(src);
    let (core, diags) = fox_sema::check(&ast);
    let core = core.unwrap_or_else(|| panic!("{}", fox_syntax::diag::render("q.logic", src, &diags, false)));
    let ra = fox_ra::plan(&core).unwrap_or_else(|e| panic!("{e}"));
    let opts = fox_phys::Options {
        disabled: disabled.iter().map(|d| d.to_string()).collect(),
        stop_after: None,
        join: fox_phys::JoinChoice::Auto,
        devices: 1,
    };
    let phys = fox_phys::run(ra, &fox_phys::Statistics::none(), &opts).unwrap_or_else(|e| panic!("{e}"));
    let plan = lower_physical(&phys).unwrap_or_else(|e| panic!("{e}"));
    validate(&plan).unwrap_or_else(|e| panic!("{e}\n{}", print_kernels(&plan)));
    plan
}

/// Parses, checks, plans and lowers `src`; panics with the diagnostics when it fails.
pub fn kernels(src: &str) -> KernelPlan {
    let (ast, diags) = fox_syntax::parse(src);
    assert!(
        diags.iter().all(|d| !d.is_error()),
        "{}",
        fox_syntax::diag::render("q.logic", src, &diags, false)
    );
    let (core, diags) = fox_sema::check(&ast);
    let core = core.unwrap_or_else(|| panic!("{}", fox_syntax::diag::render("q.logic", src, &diags, false)));
    let ra = fox_ra::plan(&core).unwrap_or_else(|e| panic!("{e}"));
    let plan = lower(&ra).unwrap_or_else(|e| panic!("{e}\n{}", fox_ra::print_plan(&ra)));
    validate(&plan).unwrap_or_else(|e| panic!("{e}\n{}", print_kernels(&plan)));
    assert_eq!(from_ron(&to_ron(&plan)).as_ref(), Ok(&plan));
    check_memory(&plan).unwrap_or_else(|e| panic!("{e}\n{}", print_kernels(&plan)));
    plan
}

pub fn reads(i: &Instr) -> Vec<BufId> {
    match i {
        Instr::Launch { args, .. } => args.clone(),
        Instr::Move { src, .. } => vec![*src],
        Instr::Free { buf } => vec![*buf],
        Instr::Output { cols, .. } | Instr::Assert { args: cols, .. } | Instr::Observe { bufs: cols, .. } => {
            cols.clone()
        }
    }
}

pub fn writes(i: &Instr) -> Vec<BufId> {
    match i {
        Instr::Launch { outs, .. } => outs.clone(),
        Instr::Move { dst, .. } => vec![*dst],
        _ => Vec::new(),
    }
}

/// A path being walked: the block to enter, the buffers held, how often each block was
/// entered, and the blocks visited.
type PathState = (BlockId, BTreeSet<BufId>, Vec<u8>, Vec<u32>);

/// Walks every path from the entry, going around each loop at most twice (each block is
/// entered at most twice per path), tracking the set of buffers held. Fails on a read of
/// a buffer not held (use before definition or after free), a free of a buffer not held,
/// a definition of a buffer still held (a leak), and buffers still held at `halt`.
pub fn check_memory(plan: &KernelPlan) -> Result<(), String> {
    let name = |b: BufId| plan.buffers[b.0 as usize].name.clone();
    let mut stack: Vec<PathState> = vec![(
        plan.entry,
        BTreeSet::new(),
        vec![0; plan.blocks.len()],
        vec![plan.entry.0],
    )];
    let mut paths = 0usize;
    while let Some((b, mut held, mut visits, path)) = stack.pop() {
        visits[b.0 as usize] += 1;
        let block = &plan.blocks[b.0 as usize];
        for (k, i) in block.instrs.iter().enumerate() {
            let at = || format!("path {path:?}, block b{} instruction {}", b.0, k + 1);
            for r in reads(i) {
                if !held.contains(&r) {
                    return Err(format!("{}: `{}` is not held", at(), name(r)));
                }
            }
            if let Instr::Free { buf } = i {
                held.remove(buf);
            }
            for w in writes(i) {
                if held.contains(&w) {
                    return Err(format!("{}: `{}` is redefined while still held", at(), name(w)));
                }
                held.insert(w);
            }
        }
        match &block.term {
            Terminator::Halt => {
                paths += 1;
                if !held.is_empty() {
                    let names: Vec<String> = held.iter().map(|&b| name(b)).collect();
                    return Err(format!("path {path:?}: held at halt: {names:?}"));
                }
            }
            t => {
                if let Terminator::LoopIf { nonempty, .. } = t {
                    for r in nonempty {
                        if !held.contains(r) {
                            return Err(format!("path {path:?}: the loop test reads `{}`, not held", name(*r)));
                        }
                    }
                }
                for s in t.successors() {
                    if visits[s.0 as usize] < 2 {
                        let mut p = path.clone();
                        p.push(s.0);
                        stack.push((s, held.clone(), visits.clone(), p));
                    }
                }
            }
        }
    }
    if paths == 0 {
        return Err("no path reaches halt".into());
    }
    Ok(())
}

/// The number of buffers defined anywhere in the plan.
pub fn defined_buffers(plan: &KernelPlan) -> usize {
    let mut all = BTreeSet::new();
    for b in &plan.blocks {
        for i in &b.instrs {
            all.extend(writes(i));
        }
    }
    all.len()
}
