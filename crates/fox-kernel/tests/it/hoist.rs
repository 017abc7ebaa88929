//! Loop-invariant code motion: the launches of a recursion's loop whose arguments the loop
//! never changes run once before it, and nothing the loop changes leaves it.
use crate::common;

use common::*;
use fox_kernel::*;

const TC: &str = include_str!("../../../../queries/datalog/tc.logic");
const SG: &str = include_str!("../../../../queries/datalog/sg.logic");
const CSPA: &str = include_str!("../../../../queries/datalog/cspa.logic");
const CSDA: &str = include_str!("../../../../queries/datalog/csda.logic");
const ANDERSEN: &str = include_str!("../../../../queries/datalog/andersen.logic");

/// `p` and `q` are written by the loop, and each is joined on its second column, so their
/// sorts on it change with every iteration; `e` is not, so its sort on `x` does not.
const MUTUAL: &str = "
e(x, y) -> int32(x), int32(y).
.input e.
p(x, y) <- e(x, y).
q(x, y) <- e(y, x).
p(x, z) <- p(x, y), e(y, z), q(z, y).
q(x, z) <- q(x, y), p(z, y).
.output p.
.output q.
";

/// Lowers `src` with the physical passes' defaults and `options`, checked like
/// [`kernels`] does.
fn lowered(src: &str, options: &LowerOptions) -> KernelPlan {
    let (ast, diags) = fox_syntax::parse(src);
    assert!(diags.iter().all(|d| !d.is_error()));
    let (core, _) = fox_sema::check(&ast);
    let ra = fox_ra::plan(&core.expect("the program checks")).unwrap();
    let phys = fox_phys::run(ra, &fox_phys::Statistics::none(), &fox_phys::Options::default()).unwrap();
    let plan = lower_physical_with(&phys, options).unwrap();
    validate(&plan).unwrap_or_else(|e| panic!("{e}\n{}", print_kernels(&plan)));
    check_memory(&plan).unwrap_or_else(|e| panic!("{e}\n{}", print_kernels(&plan)));
    plan
}

/// Whether each block is on a cycle of the CFG (inside a loop).
fn in_loop(plan: &KernelPlan) -> Vec<bool> {
    let n = plan.blocks.len();
    (0..n)
        .map(|b| {
            let mut seen = vec![false; n];
            let mut stack: Vec<usize> = plan.blocks[b].term.successors().iter().map(|s| s.0 as usize).collect();
            while let Some(x) = stack.pop() {
                if x == b {
                    return true;
                }
                if !std::mem::replace(&mut seen[x], true) {
                    stack.extend(plan.blocks[x].term.successors().iter().map(|s| s.0 as usize));
                }
            }
            false
        })
        .collect()
}

/// The names of the arguments of the `sort_perm` launches inside loops and outside.
fn sorts(plan: &KernelPlan) -> (Vec<String>, Vec<String>) {
    let looped = in_loop(plan);
    let (mut inside, mut outside) = (Vec::new(), Vec::new());
    for (b, block) in plan.blocks.iter().enumerate() {
        for i in &block.instrs {
            if let Instr::Launch {
                kernel: Kernel::SortPerm { .. },
                args,
                ..
            } = i
            {
                let names = args.iter().map(|a| plan.buffers[a.0 as usize].name.clone());
                if looped[b] {
                    inside.extend(names);
                } else {
                    outside.extend(names);
                }
            }
        }
    }
    (inside, outside)
}

/// Whether `name` is a column of one of the input relations `inputs`.
fn of_input(name: &str, inputs: &[&str]) -> bool {
    inputs
        .iter()
        .any(|r| name.split_once('.').is_some_and(|(rel, _)| rel == *r))
}

#[test]
fn sorts_of_unchanged_inputs_leave_the_loops_of_the_datalog_programs() {
    for (name, src, inputs, sorted) in [
        ("tc", TC, &["edge"][..], "edge.x"),
        ("sg", SG, &["edge"][..], "edge.x"),
        ("cspa", CSPA, &["assign", "dereference"][..], "dereference.src"),
        ("csda", CSDA, &["nullEdge", "arc"][..], "arc.x"),
        (
            "andersen",
            ANDERSEN,
            &["addressOf", "assign", "load", "store"][..],
            "load.q",
        ),
    ] {
        let hoisted = kernels(src);
        let (inside, outside) = sorts(&hoisted);
        assert!(
            !inside.iter().any(|n| of_input(n, inputs)),
            "{name}: an input is sorted inside a loop: {inside:?}\n{}",
            print_kernels(&hoisted)
        );
        assert!(
            outside.iter().any(|n| n == sorted),
            "{name}: `{sorted}` is not sorted before the loop: {outside:?}\n{}",
            print_kernels(&hoisted)
        );
        // Without the motion the same sort runs on every iteration.
        let kept = lowered(
            src,
            &LowerOptions {
                keep_loop_invariants: true,
                ..Default::default()
            },
        );
        let (inside, _) = sorts(&kept);
        assert!(inside.iter().any(|n| n == sorted), "{name}: {inside:?}");
        // The sorted copy is freed once the loop is done, never inside it.
        let looped = in_loop(&hoisted);
        for (b, block) in hoisted.blocks.iter().enumerate() {
            for i in &block.instrs {
                if let Instr::Free { buf } = i {
                    let freed = &hoisted.buffers[buf.0 as usize].name;
                    assert!(
                        !(looped[b] && of_input(freed, inputs)),
                        "{name}: b{b} frees `{freed}` inside the loop"
                    );
                }
            }
        }
    }
}

#[test]
fn a_relation_the_loop_writes_is_sorted_in_the_loop() {
    let plan = kernels(MUTUAL);
    let (inside, outside) = sorts(&plan);
    for written in ["p.y", "q.y"] {
        assert!(
            inside.iter().any(|n| n == written),
            "{written}: {inside:?}\n{}",
            print_kernels(&plan)
        );
    }
    assert!(!inside.iter().any(|n| of_input(n, &["e"])), "{inside:?}");
    assert!(outside.iter().any(|n| n == "e.x"), "{outside:?}");
}

#[test]
fn observations_of_a_hoisted_value_leave_the_loop_with_it() {
    // With observations the plan is the plan without them plus the observations.
    for src in [TC, SG, CSPA, MUTUAL] {
        let plain = lowered(src, &LowerOptions::default());
        let observed = lowered(
            src,
            &LowerOptions {
                observe_rows: true,
                ..Default::default()
            },
        );
        let mut stripped = observed.clone();
        for b in &mut stripped.blocks {
            b.instrs.retain(|i| !matches!(i, Instr::Observe { .. }));
        }
        stripped.observed.clear();
        assert_eq!(print_kernels(&stripped), print_kernels(&plain));
        // An observation in a loop counts what the loop still reads (it never keeps a
        // value alive through the loop); the scan of TC's `edge` is counted before it.
        let looped = in_loop(&observed);
        let mut read = std::collections::HashSet::new();
        for (b, block) in observed.blocks.iter().enumerate() {
            if looped[b] {
                read.extend(
                    block
                        .instrs
                        .iter()
                        .filter(|i| !matches!(i, Instr::Observe { .. }))
                        .flat_map(reads),
                );
            }
        }
        let mut counted_before = Vec::new();
        for (b, block) in observed.blocks.iter().enumerate() {
            for i in &block.instrs {
                if let Instr::Observe { bufs, .. } = i {
                    for x in bufs {
                        let n = &observed.buffers[x.0 as usize].name;
                        assert!(
                            !looped[b] || read.contains(x),
                            "b{b} observes `{n}`, which nothing else in the loop reads\n{}",
                            print_kernels(&observed)
                        );
                        if !looped[b] {
                            counted_before.push(n.clone());
                        }
                    }
                }
            }
        }
        if src == TC {
            assert!(counted_before.iter().any(|n| n == "edge.x"), "{counted_before:?}");
        }
    }
}
