//! The readable form of a physical plan (`foxc compile --emit physical`): the RA plan's
//! blocks and statements, each operator followed by its annotations.

use std::fmt::Write;

use fox_ra::{Op, Stmt};
use fox_sema::core::Column;

use crate::ann::{AggAlgorithm, Algorithm, Node, Partitioning};
use crate::PhysPlan;

/// Renders `plan`: the passes that ran, then every block with each statement and, under
/// each operator, its algorithm, estimated rows and other annotations.
pub fn print_physical(plan: &PhysPlan) -> String {
    let ra = &plan.ra;
    let mut out = String::new();
    let ran = if plan.ran.is_empty() {
        "none".to_string()
    } else {
        plan.ran.join(", ")
    };
    let _ = writeln!(out, "physical plan (passes: {ran})");
    for (i, b) in ra.blocks.iter().enumerate() {
        let entry = if ra.entry.0 as usize == i { ", entry" } else { "" };
        let _ = writeln!(out, "block b{i} ({}{entry}):", b.label);
        for s in &b.stmts {
            let _ = writeln!(out, "  {}", fox_ra::print_stmt(ra, s));
            if let Stmt::Let { dst, op, .. } = s {
                let cols = ra.temps.get(dst.0 as usize).map_or(&[][..], |t| t.columns.as_slice());
                let _ = writeln!(out, "      {}", annotations(op, plan.node(*dst), cols));
            }
        }
        let _ = writeln!(out, "  {}", fox_ra::print_term(ra, &b.term));
    }
    out
}

fn annotations(op: &Op, n: &Node, cols: &[Column]) -> String {
    let mut parts = vec![match n.deferred_into {
        Some(t) => format!("filter, applied by the fused reduce of t{}", t.0),
        None => algorithm(op, n),
    }];
    if n.rounds.windowed.iter().any(|&w| w) {
        let levels: Vec<String> = n
            .rounds
            .windowed
            .iter()
            .enumerate()
            .filter(|(_, &w)| w)
            .map(|(v, _)| v.to_string())
            .collect();
        parts.push(format!("rounds at levels {}", levels.join(", ")));
    }
    if let Some(o) = &n.order {
        let o = &o.provides;
        let by = if o.ranked { "by value " } else { "" };
        let all = o.sorted.len() == cols.len() && o.sorted.iter().enumerate().all(|(i, k)| k.col == i && !k.desc);
        if all && cols.len() > 1 {
            parts.push(format!("sorted {by}on all columns"));
        } else if !o.sorted.is_empty() {
            parts.push(format!("sorted {by}on [{}]", fox_ra::sort_keys(&o.sorted, cols)));
        }
        if o.unique {
            parts.push("unique".into());
        }
    }
    parts.push(match &n.est {
        Some(e) => format!("rows ~{}", rows(e.rows)),
        None => "rows ?".into(),
    });
    parts.push(match &n.partitioning {
        Partitioning::Single => "single".into(),
        Partitioning::Hash { cols, parts } => {
            let cols: Vec<String> = cols.iter().map(|c| format!("#{c}")).collect();
            format!("hash({}) over {parts}", cols.join(", "))
        }
    });
    parts.join(" · ")
}

fn algorithm(op: &Op, n: &Node) -> String {
    match (&n.algorithm, op) {
        (Algorithm::SortMerge, Op::Join { .. }) => "sort-merge join".into(),
        (Algorithm::SortMerge, _) => "sort-merge match".into(),
        (Algorithm::Lftj { min_range, twins }, _) => {
            let mut s = "leapfrog triejoin".to_string();
            let refinements: Vec<&str> = [(*min_range, "smallest-range levels"), (*twins, "twins")]
                .iter()
                .filter(|(on, _)| *on)
                .map(|(_, n)| *n)
                .collect();
            if !refinements.is_empty() {
                s.push_str(&format!(" ({})", refinements.join(", ")));
            }
            s
        }
        (Algorithm::Aggregate(AggAlgorithm::Fused), _) => "fused reduce".into(),
        (Algorithm::Aggregate(AggAlgorithm::SortReduce), _) | (Algorithm::Direct, Op::Aggregate { .. }) => {
            "sort-reduce".into()
        }
        (Algorithm::Direct, Op::MultiJoin { .. }) => "leapfrog triejoin".into(),
        (Algorithm::Direct, Op::Join { .. }) => "sort-merge join".into(),
        (Algorithm::Direct, Op::SemiJoin { .. } | Op::AntiJoin { .. } | Op::Difference { .. }) => {
            "sort-merge match".into()
        }
        (Algorithm::Direct, op) => direct(op).into(),
    }
}

/// The single implementation of an operator without alternatives.
fn direct(op: &Op) -> &'static str {
    match op {
        Op::Scan(_) => "scan",
        Op::Const(_) => "constant rows",
        Op::Select { .. } => "filter and compact",
        Op::Map { .. } => "evaluate",
        Op::Project { .. } => "column selection",
        Op::Union(_) => "concatenate",
        Op::Sort { .. } => "sort",
        Op::Unique(_) => "sort and drop repeats",
        Op::Limit { .. } => "slice",
        _ => "?",
    }
}

/// A row count for people: exact below ten thousand, else in thousands, millions,
/// billions or with an exponent.
fn rows(r: f64) -> String {
    let r = r.round();
    if r < 10_000.0 {
        format!("{r}")
    } else if r < 1e6 {
        format!("{:.0}k", r / 1e3)
    } else if r < 1e9 {
        format!("{:.1}M", r / 1e6)
    } else if r < 1e12 {
        format!("{:.1}G", r / 1e9)
    } else {
        format!("{r:.1e}")
    }
}
