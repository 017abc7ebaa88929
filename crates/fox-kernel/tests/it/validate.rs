//! Reading plans back: the version check, and hand-edited inconsistencies that
//! `validate` must catch (naming the block and instruction).
use crate::common;

use common::*;
use fox_kernel::*;

const TC: &str = include_str!("../../../../queries/transitive_closure.logic");

/// Transitive closure without the `rounds` pass: its join counted and written whole
/// (`JoinCount`, `JoinWrite`), and its loop the only one.
fn tc() -> KernelPlan {
    kernels_without(TC, &["rounds"])
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

/// Soufflé's operators and conversions: the plan validates and reads back the same.
#[test]
fn souffle_operators_round_trip_through_ron() {
    let src = include_str!("../../../../tests/souffle/operators.dl");
    let (ast, _, diags) = fox_syntax::souffle::parse(src);
    assert!(diags.iter().all(|d| !d.is_error()), "{diags:?}");
    let (core, diags) = fox_sema::check(&ast);
    let core = core.unwrap_or_else(|| panic!("{}", fox_syntax::diag::render("o.dl", src, &diags, false)));
    let ra = fox_ra::plan(&core).unwrap_or_else(|e| panic!("{e}"));
    let plan = lower(&ra).unwrap_or_else(|e| panic!("{e}"));
    validate(&plan).unwrap_or_else(|e| panic!("{e}"));
    let text = to_ron(&plan);
    for part in [
        "ToNumber",
        "ToUnsigned",
        "ToString",
        "Pow",
        "Rem",
        "ShrU",
        "LogXor",
        "BitNot",
        "LogNot",
        "Min",
        "Max",
    ] {
        assert!(text.contains(part), "no {part} in the plan");
    }
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
        Err(LoadError::Syntax { line: 1, .. })
    ));
    assert!(matches!(from_ron("not a plan"), Err(LoadError::Syntax { .. })));
}

#[test]
fn a_syntax_error_names_its_line_and_column() {
    let text = to_ron(&tc());
    // The third line's first non-blank character, made something RON does not read.
    let lines: Vec<&str> = text.lines().collect();
    let col = lines[2].len() - lines[2].trim_start().len() + 1;
    let mut edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    edited[2] = format!("{}#{}", &lines[2][..col - 1], &lines[2][col - 1..]);
    let err = from_ron(&edited.join("\n")).unwrap_err();
    match &err {
        LoadError::Syntax { line, col: c, .. } => assert_eq!((*line, *c), (3, col), "{err}"),
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string()
            .starts_with(&format!("3:{col}: the kernel plan is not valid RON: ")),
        "{err}"
    );
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
    let body = plan
        .blocks
        .iter()
        .find_map(|b| match b.term {
            Terminator::LoopIf { body, .. } => Some(body.0 as usize),
            _ => None,
        })
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

#[test]
fn an_expression_of_types_that_do_not_fit_is_caught() {
    // Every column and constant is read as what it is, but an int32 is compared with a
    // bool: the plan is refused as the launch would be, not accepted to fail at run time.
    let mut plan = kernels(
        "edge(x, y) -> int32(x), int32(y). .input edge.
         big(x) <- edge(x, y), x > y.",
    );
    let (b, k) = find_launch(&plan, |k| matches!(k, Kernel::Eval { .. }));
    let Instr::Launch {
        kernel: Kernel::Eval { expr, .. },
        ..
    } = &mut plan.blocks[b].instrs[k]
    else {
        unreachable!()
    };
    let KExprKind::Cmp(_, _, rhs) = &mut expr.kind else {
        panic!("{expr:?}")
    };
    **rhs = KExpr {
        kind: KExprKind::Const(fox_sema::core::Value::Bool(true)),
        ty: fox_sema::core::Type::Bool,
    };
    let m = invalid(&plan);
    assert!(m.contains("cannot compare int32 with bool in `(c0 > true)`"), "{m}");
}

/// The plan text with the `n`-th match of `from` replaced by `to`.
fn edit_ron(plan: &KernelPlan, from: &str, to: &str) -> String {
    let text = to_ron(plan);
    assert!(text.contains(from), "no `{from}` in the plan");
    text.replacen(from, to, 1)
}

fn invalid_text(text: &str) -> String {
    match from_ron(text) {
        Err(LoadError::Invalid(m)) => m,
        other => panic!("expected an inconsistency, got {other:?}"),
    }
}

#[test]
fn counts_that_overflow_are_inconsistencies_not_panics() {
    let plan = tc();
    let huge = [
        "9223372036854775808",
        "9223372036854775810",
        "18446744073709551615",
        "6148914691236517206",
    ];
    for field in ["nkeys: 1,", "nkeys: 2,", "width: 2,"] {
        for h in huge {
            let m = invalid_text(&edit_ron(&plan, field, &field.replace(|c: char| c.is_ascii_digit(), h)));
            assert!(m.contains("instruction"), "{field} = {h}: {m}");
            assert!(
                m.contains("join_count") || m.contains("join_write") || m.contains("match") || m.contains("merge"),
                "{field} = {h}: {m}"
            );
        }
    }
    // Every kernel whose argument count is a product of plan counts.
    let (b, k) = find_launch(&plan, |k| matches!(k, Kernel::MergeUnion { .. }));
    for kernel in [
        Kernel::Concat {
            parts: usize::MAX / 2 + 2,
            width: 2,
        },
        Kernel::Concat {
            parts: 3,
            width: usize::MAX / 3 + 1,
        },
        Kernel::IntersectCount {
            ways: usize::MAX / 3 + 1,
        },
        Kernel::MinRange {
            ways: usize::MAX / 2 + 1,
        },
        Kernel::TrieBuild { arity: usize::MAX },
        Kernel::ReduceByKey {
            nkeys: usize::MAX,
            aggs: vec![],
        },
        Kernel::JoinWrite { nkeys: usize::MAX / 2 },
        Kernel::MatchFlags {
            nkeys: usize::MAX / 2 + 1,
            anti: true,
        },
    ] {
        let mut p = plan.clone();
        if let Instr::Launch { kernel: k0, .. } = &mut p.blocks[b].instrs[k] {
            *k0 = kernel.clone();
        }
        let m = invalid(&p);
        assert!(m.contains(&format!("block b{b}")), "{kernel:?}: {m}");
    }
}

#[test]
fn a_cycle_without_a_way_out_is_caught() {
    // The entry block jumping to itself.
    let mut plan = tc();
    let entry = plan.entry.0 as usize;
    plan.blocks[entry].term = Terminator::Jump(BlockId(entry as u32));
    let m = invalid(&plan);
    assert!(
        m.contains(&format!("block b{entry} ({})", plan.blocks[entry].label)),
        "{m}"
    );
    assert!(m.contains("can never halt"), "{m}");

    // A loop test whose exit is its body.
    let mut plan = tc();
    let l = plan
        .blocks
        .iter()
        .position(|b| matches!(b.term, Terminator::LoopIf { .. }))
        .unwrap();
    let mut head = l;
    if let Terminator::LoopIf { body, exit, .. } = &mut plan.blocks[l].term {
        *exit = *body;
        head = body.0 as usize;
    }
    // Named by the loop's first block, not by the blocks that lead into it.
    let m = invalid(&plan);
    assert!(
        m.contains(&format!("block b{head} ({}) can never halt", plan.blocks[head].label)),
        "{m}"
    );
}

#[test]
fn a_loop_testing_a_buffer_it_never_redefines_is_caught() {
    let mut plan = tc();
    let l = plan
        .blocks
        .iter()
        .position(|b| matches!(b.term, Terminator::LoopIf { .. }))
        .unwrap();
    let edge_x = BufId(plan.buffers.iter().position(|b| b.name == "edge.x").unwrap() as u32);
    if let Terminator::LoopIf { nonempty, .. } = &mut plan.blocks[l].term {
        nonempty.push(edge_x);
    }
    // `edge.x` is freed after the loop; the test reads it at every round.
    for b in &mut plan.blocks {
        b.instrs.retain(|i| !matches!(i, Instr::Free { buf } if *buf == edge_x));
    }
    let m = invalid(&plan);
    assert!(m.contains(&format!("block b{l} ({})", plan.blocks[l].label)), "{m}");
    assert!(
        m.contains("the loop test reads `edge.x`, which no instruction of the loop redefines"),
        "{m}"
    );
}

#[test]
fn every_compiled_loop_halts_and_every_output_is_written_once() {
    // Recursive programs with several loops, and the multi-round expansions of
    // multi-way joins (loops added by the lowering), all validate.
    for src in [
        TC,
        include_str!("../../../../queries/even_odd.logic"),
        include_str!("../../../../queries/same_generation.logic"),
        include_str!("../../../../queries/clique4.logic"),
        include_str!("../../../../queries/clique5_count.logic"),
    ] {
        let plan = kernels(src);
        validate(&plan).unwrap();
    }
}

#[test]
fn two_outputs_of_one_name_are_caught() {
    let mut plan = tc();
    let (b, k) = plan
        .blocks
        .iter()
        .enumerate()
        .find_map(|(b, blk)| {
            blk.instrs
                .iter()
                .position(|i| matches!(i, Instr::Output { .. }))
                .map(|k| (b, k))
        })
        .unwrap();
    let out = plan.blocks[b].instrs[k].clone();
    plan.blocks[b].instrs.insert(k + 1, out.clone());
    let m = invalid(&plan);
    assert!(m.contains("output `path` is written twice"), "{m}");

    // An output in a loop would be written at every round.
    let mut plan = tc();
    let l = plan
        .blocks
        .iter()
        .position(|b| matches!(b.term, Terminator::LoopIf { .. }))
        .unwrap();
    plan.blocks[b].instrs.remove(k);
    let mut loop_out = out.clone();
    if let Instr::Output { cols, .. } = &mut loop_out {
        let edge: Vec<BufId> = ["edge.x", "edge.y"]
            .iter()
            .map(|n| BufId(plan.buffers.iter().position(|b| &b.name == n).unwrap() as u32))
            .collect();
        *cols = edge;
    }
    plan.blocks[l].instrs.insert(0, loop_out);
    let m = invalid(&plan);
    assert!(m.contains("output `path` is inside a loop"), "{m}");

    // A name that is not a predicate's would name a file elsewhere.
    let mut plan = tc();
    if let Instr::Output { name, .. } = &mut plan.blocks[b].instrs[k] {
        *name = "../../etc/path".into();
    }
    let m = invalid(&plan);
    assert!(m.contains("\"../../etc/path\" is not a predicate name"), "{m}");
}

#[test]
fn a_decimal_of_more_than_18_fraction_digits_is_caught() {
    let mut plan = kernels(
        "p(x, d) -> int32(x), decimal(d). .input p.
         q(x, e) <- p(x, d), e = d * 2.",
    );
    let at = plan
        .buffers
        .iter()
        .position(|b| b.ty.is_some_and(|t| t.is_decimal()))
        .unwrap();
    plan.buffers[at].ty = Some(fox_sema::core::Type::Decimal(200));
    let m = invalid(&plan);
    assert!(m.contains("has more than 18 fraction digits"), "{m}");
}
