//! Reading plans back: the version check, and hand-edited inconsistencies that
//! `validate` must catch (naming the block and instruction).
mod common;

use common::*;
use fox_kernel::*;

const TC: &str = include_str!("../../../queries/transitive_closure.logic");

fn tc() -> KernelPlan {
    kernels(TC)
}

fn invalid(plan: &KernelPlan) -> String {
    match validate(plan) {
        Err(LoadError::Invalid(m)) => m,
        other => panic!("expected an inconsistency, got {other:?}\n{}", print_kernels(plan)),
    }
}

fn find_launch(plan: &KernelPlan, pred: impl Fn(&Kernel) -> bool) -> (usize, usize) {
    for (b, block) in plan.blocks.iter().enumerate() {
        for (k, i) in block.instrs.iter().enumerate() {
            if let Instr::Launch { kernel, .. } = i {
                if pred(kernel) {
                    return (b, k);
                }
            }
        }
    }
    panic!("no such launch")
}

#[test]
fn round_trip_through_ron() {
    let plan = tc();
    let text = to_ron(&plan);
    assert!(text.contains("version: 1"));
    assert_eq!(from_ron(&text), Ok(plan));
}

#[test]
fn another_version_is_refused() {
    let text = to_ron(&tc()).replacen("version: 1", "version: 7", 1);
    let err = from_ron(&text).unwrap_err();
    assert_eq!(
        err,
        LoadError::Version {
            found: 7,
            expected: KERNEL_PLAN_VERSION
        }
    );
    assert!(
        err.to_string()
            .starts_with("plan version 7, this foxrun reads version 1"),
        "{err}"
    );
}

#[test]
fn text_that_is_not_a_plan_is_refused() {
    assert!(matches!(
        from_ron("KernelPlan(version: 1, buffers: ["),
        Err(LoadError::Syntax(_))
    ));
    assert!(matches!(from_ron("not a plan"), Err(LoadError::Syntax(_))));
}

#[test]
fn a_removed_definition_is_caught() {
    let mut plan = tc();
    let (b, k) = find_launch(&plan, |k| matches!(k, Kernel::ExclusiveScan));
    plan.blocks[b].instrs.remove(k);
    let m = invalid(&plan);
    assert!(m.contains(&format!("block b{b}")), "{m}");
    assert!(m.contains("is read but is not defined on every path"), "{m}");
    assert!(m.contains("offsets") || m.contains("total"), "{m}");
}

#[test]
fn a_free_moved_before_a_use_is_caught() {
    let mut plan = tc();
    // Free `edge.x` at the very start of the loop body, which reads it.
    let edge_x = BufId(plan.buffers.iter().position(|b| b.name == "edge.x").unwrap() as u32);
    let body = (0..plan.blocks.len())
        .find(|&b| plan.blocks[b].term.successors().contains(&BlockId(b as u32)))
        .unwrap();
    plan.blocks[body].instrs.insert(0, Instr::Free { buf: edge_x });
    let m = invalid(&plan);
    // Around the loop, the free itself finds the value already freed.
    assert!(m.contains("`edge.x` is"), "{m}");
    assert!(
        m.contains("not defined on every path to it, or was freed before"),
        "{m}"
    );
    assert!(check_memory(&plan).is_err());
}

#[test]
fn a_double_free_is_caught() {
    let mut plan = tc();
    let (b, k) = (0..plan.blocks.len())
        .flat_map(|b| (0..plan.blocks[b].instrs.len()).map(move |k| (b, k)))
        .find(|&(b, k)| matches!(plan.blocks[b].instrs[k], Instr::Free { .. }))
        .unwrap();
    let dup = plan.blocks[b].instrs[k].clone();
    plan.blocks[b].instrs.insert(k + 1, dup);
    let m = invalid(&plan);
    assert!(m.contains("is freed but is not defined"), "{m}");
}

#[test]
fn a_changed_element_type_is_caught() {
    let mut plan = tc();
    let perm = plan.buffers.iter().position(|b| b.name.ends_with(".perm")).unwrap();
    plan.buffers[perm].elem = Elem::I64;
    let m = invalid(&plan);
    assert!(m.contains("sort_perm") || m.contains("gather"), "{m}");
    assert!(m.contains("instruction"), "{m}");
}

#[test]
fn a_wrong_argument_count_is_caught() {
    let mut plan = tc();
    let (b, k) = find_launch(&plan, |k| matches!(k, Kernel::JoinWrite { .. }));
    if let Instr::Launch { args, .. } = &mut plan.blocks[b].instrs[k] {
        args.pop();
    }
    let m = invalid(&plan);
    assert!(m.contains(&format!("block b{b}")), "{m}");
    assert!(m.contains("join_write"), "{m}");
}

#[test]
fn a_jump_to_a_missing_block_is_caught() {
    let mut plan = tc();
    plan.blocks[0].term = Terminator::Jump(BlockId(99));
    let m = invalid(&plan);
    assert!(m.contains("b99, which does not exist"), "{m}");
}

#[test]
fn a_missing_buffer_is_caught() {
    let mut plan = tc();
    plan.buffers.truncate(3);
    let m = invalid(&plan);
    assert!(m.contains("does not exist"), "{m}");
}

#[test]
fn an_output_of_the_wrong_type_is_caught() {
    let mut plan = tc();
    for b in &mut plan.blocks {
        for i in &mut b.instrs {
            if let Instr::Output { columns, .. } = i {
                columns[0].ty = fox_sema::core::Type::Float64;
            }
        }
    }
    let m = invalid(&plan);
    assert!(m.contains("output path"), "{m}");
}

#[test]
fn an_expression_reading_a_missing_column_is_caught() {
    let mut plan = kernels(
        "edge(x, y) -> int32(x), int32(y). .input edge.
         big(x) <- edge(x, y), x > y.",
    );
    let (b, k) = find_launch(&plan, |k| matches!(k, Kernel::Eval { .. }));
    if let Instr::Launch {
        kernel: Kernel::Eval { expr, .. },
        ..
    } = &mut plan.blocks[b].instrs[k]
    {
        expr.kind = KExprKind::Col(5);
    }
    let m = invalid(&plan);
    assert!(m.contains("reads column 5"), "{m}");
}
