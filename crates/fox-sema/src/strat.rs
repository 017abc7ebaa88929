//! Stratification: the predicate dependency graph, its strongly connected components in
//! evaluation order, and the check that negation and aggregation stay out of cycles.

use crate::env::Env;
use crate::lower::{Dep, DepKind};
use fox_syntax::diag::Diagnostic;
use petgraph::algo::tarjan_scc;
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::{HashSet, VecDeque};

pub(crate) struct StratumPlan {
    /// The predicates of one component that have facts or rules, sorted by name.
    pub preds: Vec<usize>,
    pub recursive: bool,
}

pub(crate) struct Strata {
    pub strata: Vec<StratumPlan>,
    /// The component of each predicate (an index into the evaluation order of all
    /// components, including those without definitions).
    pub component: Vec<usize>,
}

/// `rules` holds each rule's head and the body predicates it reads.
pub(crate) fn stratify(env: &Env, rules: &[(usize, &[Dep])], diags: &mut Vec<Diagnostic>) -> Strata {
    let n = env.preds.len();
    let mut g: DiGraph<usize, ()> = DiGraph::with_capacity(n, rules.len());
    let nodes: Vec<NodeIndex> = (0..n).map(|i| g.add_node(i)).collect();
    let mut self_loops = vec![false; n];
    let mut edges: HashSet<(usize, usize)> = HashSet::new();
    for (head, deps) in rules {
        for d in deps.iter() {
            // An edge from a predicate to a predicate it depends on: Tarjan's algorithm then
            // yields dependencies before their dependents.
            if let (Some(&h), Some(&b)) = (nodes.get(*head), nodes.get(d.pred)) {
                if edges.insert((*head, d.pred)) {
                    g.add_edge(h, b, ());
                }
            }
            if d.pred == *head {
                if let Some(s) = self_loops.get_mut(*head) {
                    *s = true;
                }
            }
        }
    }
    let sccs = tarjan_scc(&g);
    let mut component = vec![0; n];
    for (ci, scc) in sccs.iter().enumerate() {
        for node in scc {
            if let Some(c) = component.get_mut(g[*node]) {
                *c = ci;
            }
        }
    }

    for (head, deps) in rules {
        for d in deps.iter() {
            if d.kind == DepKind::Pos || component.get(d.pred) != component.get(*head) {
                continue;
            }
            let path = cycle_path(&g, &nodes, &component, *head, d.pred);
            let names: Vec<&str> = path
                .iter()
                .filter_map(|&p| env.preds.get(p).map(|s| s.name.as_str()))
                .collect();
            let head_name = env.preds.get(*head).map_or("?", |s| s.name.as_str());
            let cycle = names.join(" -> ");
            let diag = match d.kind {
                DepKind::Neg => Diagnostic::error(
                    format!("`{head_name}` depends negatively on itself through `{cycle}`"),
                    d.span,
                )
                .with_label("negation inside a recursive cycle")
                .with_help(format!(
                    "negation must not occur in a recursive cycle: what is negated has to be computed completely before `{head_name}`"
                )),
                _ => Diagnostic::error(
                    format!("`{head_name}` aggregates over itself through `{cycle}`"),
                    d.span,
                )
                .with_label("aggregation inside a recursive cycle")
                .with_help(format!(
                    "aggregation must not occur in a recursive cycle: what is aggregated has to be computed completely before `{head_name}`"
                )),
            };
            diags.push(diag);
        }
    }

    let mut strata = Vec::new();
    for scc in &sccs {
        let mut preds: Vec<usize> = scc
            .iter()
            .map(|node| g[*node])
            .filter(|&p| env.preds.get(p).is_some_and(|s| s.defined))
            .collect();
        if preds.is_empty() {
            continue;
        }
        preds.sort_by(|a, b| env.preds[*a].name.cmp(&env.preds[*b].name));
        let recursive = scc.len() > 1
            || scc
                .iter()
                .any(|node| self_loops.get(g[*node]).copied().unwrap_or(false));
        strata.push(StratumPlan { preds, recursive });
    }
    Strata { strata, component }
}

/// `head -> body -> … -> head` inside one component (breadth-first, so the shortest).
fn cycle_path(
    g: &DiGraph<usize, ()>,
    nodes: &[NodeIndex],
    component: &[usize],
    head: usize,
    body: usize,
) -> Vec<usize> {
    let mut path = vec![head];
    if body == head {
        path.push(head);
        return path;
    }
    let comp = component.get(head).copied();
    let mut prev: Vec<Option<usize>> = vec![None; nodes.len()];
    let mut seen = HashSet::from([body]);
    let mut queue = VecDeque::from([body]);
    while let Some(p) = queue.pop_front() {
        if p == head {
            break;
        }
        let Some(&node) = nodes.get(p) else { continue };
        for next in g.neighbors(node) {
            let q = g[next];
            if component.get(q).copied() == comp && seen.insert(q) {
                if let Some(slot) = prev.get_mut(q) {
                    *slot = Some(p);
                }
                queue.push_back(q);
            }
        }
    }
    let mut back = vec![head];
    let mut cur = head;
    while let Some(Some(p)) = prev.get(cur) {
        back.push(*p);
        cur = *p;
        if cur == body || back.len() > nodes.len() {
            break;
        }
    }
    back.reverse();
    path.extend(back);
    path
}
