//! Kernel plans lowered from source: snapshots of the printed plans and properties of the
//! schedule and the free placement.
use crate::common;

use common::*;
use fox_kernel::*;

const EVEN_ODD: &str = include_str!("../../../../queries/even_odd.logic");
const TC: &str = include_str!("../../../../queries/transitive_closure.logic");
const TRIANGLE: &str = include_str!("../../../../queries/triangle.logic");

#[test]
fn even_odd() {
    let plan = kernels(EVEN_ODD);
    insta::assert_snapshot!(print_kernels(&plan));
}

#[test]
fn transitive_closure() {
    let plan = kernels(TC);
    insta::assert_snapshot!(print_kernels(&plan));
}

#[test]
fn triangle() {
    let plan = kernels(TRIANGLE);
    insta::assert_snapshot!(print_kernels(&plan));
}

const STRINGS: &str = r#"
sale(shop, item, amount) -> string(shop), string(item), decimal(amount).
.input sale from "sale.tbl" sep "|".
best[shop] = m <- agg<<m = max(item)>> sale(shop, item, _).
total[shop] = s <- agg<<s = sum(a), n = count()>> sale(shop, _, a).
short(s, t) <- sale(s, i, _), t = substr(i, 1, 3), like(s, "%x%"), i < "m".
.output best.
.output total order by s desc limit 2.
.output short.
"#;

const NEGATION: &str = "
edge(x, y) -> int32(x), int32(y).
node(x) -> int32(x).
.input edge.
.input node.
path(x, y) <- edge(x, y).
path(x, z) <- path(x, y), edge(y, z).
unreached(x) <- node(x), !path(1, x).
.output unreached.
";

const CLIQUE4: &str = include_str!("../../../../queries/clique4.logic");

#[test]
fn aggregation_with_strings() {
    let plan = kernels(STRINGS);
    insta::assert_snapshot!(print_kernels(&plan));
    let text = print_kernels(&plan);
    // String order (`i < "m"`, `max(item)`) reads the rank table; `substr` is a host
    // string function; `like` reads its dictionary table.
    assert!(text.contains("dict_table[rank]"), "{text}");
    assert!(text.contains("substr("), "{text}");
    assert!(text.contains("dict_table[like \"%x%\"]"), "{text}");
    // The limit is taken after sorting by value, descending on the sum.
    let limit = plan.blocks.iter().flat_map(|b| &b.instrs).find_map(|i| match i {
        Instr::Output { name, order, limit, .. } if name == "total" => Some((order.clone(), *limit)),
        _ => None,
    });
    assert_eq!(limit, Some((vec![(1, true), (0, false)], Some(2))));
}

#[test]
fn negation() {
    let plan = kernels(NEGATION);
    insta::assert_snapshot!(print_kernels(&plan));
    assert!(print_kernels(&plan).contains("anti_match"));
}

#[test]
fn multi_join_peak_is_below_the_number_of_buffers() {
    let plan = kernels(CLIQUE4);
    let defined = defined_buffers(&plan);
    assert!(
        plan.planned_peak_buffers < defined / 2,
        "planned peak {} of {defined} buffers\n{}",
        plan.planned_peak_buffers,
        print_kernels(&plan)
    );
    let tries = plan
        .blocks
        .iter()
        .flat_map(|b| &b.instrs)
        .filter(|i| {
            matches!(
                i,
                Instr::Launch {
                    kernel: Kernel::TrieBuild { .. },
                    ..
                }
            )
        })
        .count();
    // Every atom reads the same edge relation: one trie serves them all.
    assert_eq!(tries, 1, "{}", print_kernels(&plan));
}

#[test]
fn triangle_peak_is_below_the_number_of_buffers() {
    let plan = kernels(TRIANGLE);
    assert!(plan.planned_peak_buffers > 0);
    assert!(plan.planned_peak_buffers < defined_buffers(&plan));
}

/// The blocks on a cycle (the blocks of loop bodies: a loop whose body merges into a
/// tiered relation spans several).
fn loop_blocks(plan: &KernelPlan) -> Vec<usize> {
    (0..plan.blocks.len())
        .filter(|&b| {
            let mut seen = vec![false; plan.blocks.len()];
            let mut todo: Vec<usize> = plan.blocks[b].term.successors().iter().map(|s| s.0 as usize).collect();
            while let Some(x) = todo.pop() {
                if x == b {
                    return true;
                }
                if !std::mem::replace(&mut seen[x], true) {
                    todo.extend(plan.blocks[x].term.successors().iter().map(|s| s.0 as usize));
                }
            }
            false
        })
        .collect()
}

#[test]
fn values_used_in_a_loop_are_not_freed_inside_it() {
    for src in [TC, EVEN_ODD, NEGATION] {
        let plan = kernels(src);
        let loops = loop_blocks(&plan);
        assert!(!loops.is_empty());
        let in_loop = || loops.iter().flat_map(|&b| plan.blocks[b].instrs.iter());
        let defined_here: Vec<BufId> = in_loop().flat_map(writes).collect();
        for &b in &loops {
            let block = &plan.blocks[b];
            for i in &block.instrs {
                if let Instr::Free { buf } = i {
                    let used_here = in_loop().any(|j| !matches!(j, Instr::Free { .. }) && reads(j).contains(buf));
                    // A value the loop reads but never redefines must survive every
                    // iteration.
                    assert!(
                        !used_here || defined_here.contains(buf),
                        "`{}` is freed inside loop block b{b}\n{}",
                        plan.buffers[buf.0 as usize].name,
                        print_kernels(&plan)
                    );
                }
            }
        }
    }
}

#[test]
fn transitive_closure_keeps_edges_through_the_loop_and_frees_them_after() {
    let plan = kernels(TC);
    let edge_x = BufId(plan.buffers.iter().position(|b| b.name == "edge.x").unwrap() as u32);
    let loops = loop_blocks(&plan);
    assert!(!loops.is_empty());
    let frees_of = |b: usize| {
        plan.blocks[b]
            .instrs
            .iter()
            .filter(|i| matches!(i, Instr::Free { buf } if *buf == edge_x))
            .count()
    };
    assert_eq!(loops.iter().map(|&b| frees_of(b)).sum::<usize>(), 0);
    assert_eq!((0..plan.blocks.len()).map(frees_of).sum::<usize>(), 1);
}

#[test]
fn nullary_relations_and_cross_products() {
    let plan = kernels(
        "a(x) -> int32(x). b(y) -> int32(y).
         .input a. .input b.
         same() <- a(x), b(x).
         none(x) <- a(x), !same().
         pair(x, y) <- a(x), b(y).
         .output same. .output none. .output pair.",
    );
    let text = print_kernels(&plan);
    assert!(text.contains("join_count[cross]"), "{text}");
    assert!(text.contains("same.$rows"), "{text}");
    let out = plan.blocks.iter().flat_map(|b| &b.instrs).find_map(|i| match i {
        Instr::Output {
            name, columns, cols, ..
        } if name == "same" => Some((columns.len(), cols.len())),
        _ => None,
    });
    assert_eq!(out, Some((0, 1)));
}

#[test]
fn every_program_in_queries_lowers() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../queries");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "logic") {
            let src = std::fs::read_to_string(&path).unwrap();
            let plan = kernels(&src);
            assert!(
                plan.planned_peak_buffers <= defined_buffers(&plan),
                "{}",
                path.display()
            );
            n += 1;
        }
    }
    assert!(n >= 5);
}

#[test]
fn dot_draws_every_block_and_edge() {
    let plan = kernels(EVEN_ODD);
    let dot = to_dot(&plan);
    assert!(dot.starts_with("digraph kernels {"));
    for b in 0..plan.blocks.len() {
        assert!(dot.contains(&format!("  b{b} [label=")), "{dot}");
    }
    assert!(
        dot.contains("b1 -> b1 [label=\"nonempty\"]") || dot.contains("[label=\"nonempty\"]"),
        "{dot}"
    );
    assert!(dot.contains("[label=\"empty\"]"), "{dot}");
    assert!(dot.contains("merge_union"), "{dot}");
}

#[test]
fn every_construct_of_the_language_lowers() {
    let plan = kernels(
        r#"
        item(k, p, d, ship, mode) -> int64(k), decimal(p), decimal(d), date(ship), string(mode).
        .input item from "item.tbl" sep "|".
        price[k] = v -> int64(k), decimal(v).
        price[1] = 19.99.
        price[2] = 5.00.
        rev(k, r, y) <- item(k, p, d, s, m), r = p * (1 - d), y = year(s),
            s >= date("1994-01-01"), s < date("1995-01-01") + 30, m in ("AIR", "MAIL").
        cheap(k) <- price[k] = v, v < 10.
        either(k) <- cheap(k) ; rev(k, _, _).
        stats[y] = a <- agg<<a = avg(r)>> rev(_, r, y).
        lo[] = m <- agg<<m = min(r)>> rev(_, r, _).
        cnt[] = n <- agg<<n = count()>> either(_).
        len(k, n, q) <- item(k, _, _, _, m), n = strlen(m), prefix(m, "A"), q = abs(round(to_float(k), 1)).
        .output rev order by r desc limit 3.
        .output stats. .output lo. .output cnt. .output len.
        "#,
    );
    let text = print_kernels(&plan);
    for needle in [
        "reduce_by_key",
        "year(",
        "in (",
        "dict_table[strlen]",
        "dict_table[prefix \"A\"]",
        "slice[0, len 3]",
    ] {
        assert!(text.contains(needle), "{needle}\n{text}");
    }
}
