//! The readable form of a physical plan (`foxc compile --emit physical`): the RA plan's
//! blocks and statements, each operator followed by its annotations.

use std::fmt::Write;

use fox_ra::{Op, Side, Stmt};
use fox_sema::core::Column;

use crate::ann::{AggAlgorithm, Algorithm, BandBound, Expand, Node, Partitioning, Redistribute};
use crate::PhysPlan;

/// Renders `plan`: the passes that ran, then every block with each statement and, under
/// each operator, its algorithm, estimated rows and other annotations (and, under a
/// multi-way join with a level plan, a second line with the plan of its levels).
pub fn print_physical(plan: &PhysPlan) -> String {
    let ra = &plan.ra;
    let mut out = String::new();
    let ran = if plan.ran.is_empty() {
        "none".to_string()
    } else {
        plan.ran.join(", ")
    };
    let _ = writeln!(out, "physical plan (passes: {ran})");
    for (r, t) in plan.tiers.iter().enumerate() {
        if let (Some(t), Some(rel)) = (t, ra.relations.get(r)) {
            let _ = writeln!(
                out,
                "relation {}: in its loop, the relation plus {} sorted runs, a run folding into the next when it holds more than 1/{} of its rows",
                rel.name, t.levels, t.factor
            );
        }
    }
    if plan.devices > 1 {
        for (r, p) in plan.rel_partitioning.iter().enumerate() {
            if let Some(rel) = ra.relations.get(r) {
                let _ = writeln!(out, "relation {}: {}", rel.name, partitioning(p));
            }
        }
    }
    for (i, b) in ra.blocks.iter().enumerate() {
        let entry = if ra.entry.0 as usize == i { ", entry" } else { "" };
        let _ = writeln!(out, "block b{i} ({}{entry}):", b.label);
        for (si, s) in b.stmts.iter().enumerate() {
            let _ = writeln!(out, "  {}", fox_ra::print_stmt(ra, s));
            if let Some(m) = plan.stmt_moves.get(&(i as u32, si)) {
                let _ = writeln!(out, "      its rows {} first", redistribute(m));
            }
            if let Stmt::Let { dst, op, .. } = s {
                let cols = ra.temps.get(dst.0 as usize).map_or(&[][..], |t| t.columns.as_slice());
                let _ = writeln!(out, "      {}", annotations(plan, &b.stmts, *dst, op, cols));
                if let Some(band) = band_plan(ra, op, plan.node(*dst)) {
                    let _ = writeln!(out, "      {band}");
                }
                if let Some(levels) = level_plan(op, plan.node(*dst)) {
                    let _ = writeln!(out, "      {levels}");
                }
            }
        }
        let _ = writeln!(out, "  {}", fox_ra::print_term(ra, &b.term));
    }
    out
}

fn partitioning(p: &Partitioning) -> String {
    let cols = |c: &[usize]| c.iter().map(|c| format!("#{c}")).collect::<Vec<_>>().join(", ");
    match p {
        Partitioning::Single => "single".into(),
        Partitioning::Hash { cols: c, parts } => format!("hash({}) over {parts}", cols(c)),
        Partitioning::Replicated { parts } => format!("replicated over {parts}"),
        Partitioning::Split { parts } => format!("split over {parts}"),
    }
}

fn redistribute(m: &Redistribute) -> String {
    let cols = |c: &[usize]| c.iter().map(|c| format!("#{c}")).collect::<Vec<_>>().join(", ");
    match m {
        Redistribute::Hash { cols: c } => format!("exchanged by hash({})", cols(c)),
        Redistribute::Gather => "gathered to device 0".into(),
        Redistribute::Broadcast => "broadcast to every device".into(),
        Redistribute::Keep { cols: c } if c.is_empty() => "kept by device 0".into(),
        Redistribute::Keep { cols: c } => format!("kept where hash({}) places it", cols(c)),
    }
}

fn annotations(plan: &PhysPlan, stmts: &[Stmt], dst: fox_ra::TempId, op: &Op, cols: &[Column]) -> String {
    let n = plan.node(dst);
    let mut parts = vec![match n.deferred_into {
        Some(t) => format!("filter, applied by the fused reduce of t{}", t.0),
        None => match searched_join(plan, op, n) {
            Some(s) => s,
            None => algorithm(op, n),
        },
    }];
    if let (Op::Join { left_keys, .. }, [Some(bytes)]) = (op, n.rounds.windows.as_slice()) {
        let end = crate::join_rounds_end(stmts, dst, &n.algorithm, left_keys.len());
        if matches!(end, Some(crate::JoinRoundsEnd::Select(_))) {
            parts[0] = "nested loop, filtered per round".into();
            parts.push(format!(
                "{bytes} bytes/pair; rounds of left rows by the whole right side, more than one when its pairs do not fit the memory left; only the select's survivors kept"
            ));
        } else if let Some(crate::JoinRoundsEnd::Unique(u)) = end {
            parts.push(format!(
                "may be written in rounds ({bytes} bytes/pair; more than one when its pairs do not fit the memory left or u32 row indices), each deduplicated, the rounds' rows merged by t{}",
                u.0
            ));
        } else {
            parts.push(format!(
                "may be written in rounds ({bytes} bytes/pair; more than one when its pairs do not fit the memory left), each aggregated"
            ));
        }
    } else if n.rounds.windows.iter().any(Option::is_some) {
        let levels: Vec<String> = n
            .rounds
            .windows
            .iter()
            .enumerate()
            .filter_map(|(v, w)| w.map(|bytes| format!("{v} ({bytes} bytes/row)")))
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
    parts.push(partitioning(&n.partitioning));
    for (i, m) in &n.moves {
        let what = op
            .inputs()
            .get(*i)
            .map_or_else(|| format!("input {i}"), |t| format!("t{}", t.0));
        parts.push(format!("{what} {}", redistribute(m)));
    }
    if let Some(m) = &n.partial {
        parts.push(format!(
            "aggregated on each device, its partial rows {}, aggregated again",
            redistribute(m)
        ));
    }
    if n.boxes > 0 {
        let after = match op {
            Op::MultiJoin { count: false, .. } => ", the rows found then moved to their device and sorted",
            _ => ", the partial counts summed",
        };
        parts.push(format!(
            "work taken by the devices in boxes of the first variable's bindings, large ones first, the smallest 1/{} of them{after}",
            n.boxes
        ));
    }
    parts.join(" · ")
}

fn algorithm(op: &Op, n: &Node) -> String {
    match (&n.algorithm, op) {
        (Algorithm::SortMerge, Op::Join { .. }) => "sort-merge join".into(),
        (Algorithm::SortMerge, _) => "sort-merge match".into(),
        (Algorithm::Lftj { min_range, twins, .. }, _) => {
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
        (Algorithm::Band(b), _) if b.inner.is_some() => "inequality join".into(),
        (Algorithm::Band(_), _) => "band join".into(),
        (Algorithm::Hash { .. }, _) => "hash join".into(),
        (Algorithm::IndexNestedLoop { .. }, _) => "index nested-loop join".into(),
        (Algorithm::NestedLoop, _) => "nested-loop join".into(),
        (Algorithm::Direct, Op::MultiJoin { .. }) => "leapfrog triejoin".into(),
        (Algorithm::Direct, Op::Join { .. }) => "sort-merge join".into(),
        (Algorithm::Direct, Op::SemiJoin { .. } | Op::AntiJoin { .. } | Op::Difference { .. }) => {
            "sort-merge match".into()
        }
        (Algorithm::Direct, op) => direct(op).into(),
    }
}

/// A hash, index nested-loop or nested-loop operator with the sizes its choice rests on:
/// `hash join (build t1: ~1200 rows, probe t0: ~10.0M rows unsorted)`,
/// `index nested-loop match (index t1: ~5000 rows sorted, probe t0: ~2.0M rows unsorted)`,
/// `nested-loop join (t0: ~20 rows × t1: ~30 rows)`.
fn searched_join(plan: &PhysPlan, op: &Op, n: &Node) -> Option<String> {
    let (left, right, lk, rk): (_, _, Vec<usize>, Vec<usize>) = match op {
        Op::Join {
            left,
            right,
            left_keys,
            right_keys,
            ..
        }
        | Op::SemiJoin {
            left,
            right,
            left_keys,
            right_keys,
        }
        | Op::AntiJoin {
            left,
            right,
            left_keys,
            right_keys,
        } => (*left, *right, left_keys.clone(), right_keys.clone()),
        Op::Difference { left, right } => {
            let all: Vec<usize> = (0..plan.ra.temps.get(left.0 as usize)?.columns.len()).collect();
            (*left, *right, all.clone(), all)
        }
        _ => return None,
    };
    let what = if matches!(op, Op::Join { .. }) { "join" } else { "match" };
    let size = |t: fox_ra::TempId| match &plan.node(t).est {
        Some(e) => format!("t{}: ~{} rows", t.0, rows(e.rows)),
        None => format!("t{}: ? rows", t.0),
    };
    // Sorted on its keys, as far as the order pass knows (nothing without it).
    let sortedness = |t: fox_ra::TempId, keys: &[usize]| {
        let Some(o) = plan.node(t).order.as_ref() else {
            return "";
        };
        let types = plan.ra.temps[t.0 as usize].types();
        if crate::passes::order::sorted_on(&o.provides, &types, keys) {
            " sorted"
        } else {
            " unsorted"
        }
    };
    let (searched, name) = match &n.algorithm {
        Algorithm::Hash { build } => (*build, ("hash", "build")),
        Algorithm::IndexNestedLoop { indexed } => (*indexed, ("index nested-loop", "index")),
        Algorithm::NestedLoop => {
            return Some(format!("nested-loop {what} ({} × {})", size(left), size(right)));
        }
        _ => return None,
    };
    let ((s, sk), (p, pk)) = match searched {
        Side::Left => ((left, lk), (right, rk)),
        Side::Right => ((right, rk), (left, lk)),
    };
    Some(format!(
        "{} {what} ({} {}{}, probe {}{})",
        name.0,
        name.1,
        size(s),
        sortedness(s, &sk),
        size(p),
        sortedness(p, &pk)
    ))
}

/// The plan of a band join: `band t1.t in [t0.t, t0.t + 50] probed by t0` (`band t1.t of
/// equal keys in …` for a join with keys) — the bounded column of the sorted side and its
/// bounds, columns of the probing side plus a
/// constant (`[`/`(` closed or open, `-inf`/`+inf` where there is none).
fn band_plan(ra: &fox_ra::RaPlan, op: &Op, n: &Node) -> Option<String> {
    let (
        Algorithm::Band(b),
        Op::Join {
            left, right, left_keys, ..
        },
    ) = (&n.algorithm, op)
    else {
        return None;
    };
    let keys = if left_keys.is_empty() { "" } else { " of equal keys" };
    let (sorted, probe) = match b.sorted {
        Side::Left => (*left, *right),
        Side::Right => (*right, *left),
    };
    let name = |t: fox_ra::TempId, c: usize| {
        let col = ra.temps.get(t.0 as usize).and_then(|s| s.columns.get(c));
        format!("t{}.{}", t.0, col.map_or_else(|| format!("#{c}"), |c| c.name.clone()))
    };
    let bound = |bb: &Option<BandBound>, inf: &str| match bb {
        Some(bb) => match bb.offset {
            0 => name(probe, bb.col),
            o if o < 0 => format!("{} - {}", name(probe, bb.col), o.unsigned_abs()),
            o => format!("{} + {o}", name(probe, bb.col)),
        },
        None => inf.to_string(),
    };
    let open = |bb: &Option<BandBound>| bb.is_none_or(|bb| bb.open);
    if let Some(inner) = &b.inner {
        // `inequality join t1.c > t0.a, t1.d < t0.b probed by t0`: every bound.
        let mut parts = Vec::new();
        for (col, lower, upper) in [(b.col, &b.lower, &b.upper), (inner.col, &inner.lower, &inner.upper)] {
            for (bb, closed, opened) in [(lower, ">=", ">"), (upper, "<=", "<")] {
                if bb.is_some() {
                    let rel = if open(bb) { opened } else { closed };
                    parts.push(format!("{} {rel} {}", name(sorted, col), bound(bb, "")));
                }
            }
        }
        return Some(format!(
            "inequality join{keys} {} probed by t{}",
            parts.join(", "),
            probe.0
        ));
    }
    Some(format!(
        "band {}{keys} in {}{}, {}{} probed by t{}",
        name(sorted, b.col),
        if open(&b.lower) { "(" } else { "[" },
        bound(&b.lower, "-inf"),
        bound(&b.upper, "+inf"),
        if open(&b.upper) { ")" } else { "]" },
        probe.0
    ))
}

/// The level plan of a leapfrog triejoin, one level per variable: `x lead a0 twins a1`
/// (expanded from the lead's range, the twins following it), `y smallest of a0,a2`
/// (expanded from the smallest of these ranges), then `search a1=a2,a3` (the members that
/// search, `=` joining those that share one search), or `w count a0,a3` (a counted last
/// level over these members). Atoms are numbered as the kernel buffers name them.
fn level_plan(op: &Op, n: &Node) -> Option<String> {
    let (Algorithm::Lftj { levels, .. }, Op::MultiJoin { vars, .. }) = (&n.algorithm, op) else {
        return None;
    };
    if levels.is_empty() {
        return None;
    }
    let atoms = |xs: &[usize], sep: &str| xs.iter().map(|a| format!("a{a}")).collect::<Vec<_>>().join(sep);
    let text: Vec<String> = levels
        .iter()
        .enumerate()
        .map(|(v, l)| {
            let name = vars.get(v).map_or("?", |c| c.name.as_str());
            let mut s = match &l.expand {
                Expand::Lead => format!("{name} lead a{}", l.lead),
                Expand::Smallest(from) => format!("{name} smallest of {}", atoms(from, ",")),
                Expand::Count => format!("{name} count {}", atoms(&l.members, ",")),
            };
            if !l.twins.is_empty() {
                s.push_str(&format!(" twins {}", atoms(&l.twins, ",")));
            }
            if !l.searches.is_empty() {
                let groups: Vec<String> = l.searches.iter().map(|g| atoms(g, "=")).collect();
                s.push_str(&format!(" search {}", groups.join(",")));
            }
            s
        })
        .collect();
    Some(format!("levels: {}", text.join("; ")))
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
