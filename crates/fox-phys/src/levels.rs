//! The level plan of a leapfrog triejoin ([`Level`]): for each variable of a multi-way
//! join, which atoms bind it, how its bindings expand and which members search. It
//! depends only on the join's structure (its inputs, variables and whether it counts),
//! so it is decided here, before any kernel exists, by following the ranges symbolically
//! as the translation to kernels creates them:
//!
//! - atoms over the same input with the same column order share one trie, and so one
//!   root range;
//! - a level's members are the atoms whose next variable (in the join's order) is the
//!   level's; two members hold "the same range" when they index the same trie level with
//!   the same range;
//! - expanded from the lead, the lead and its twins (members holding the lead's range)
//!   take one new child range; the other members search, those holding the same range
//!   once together, and each such group takes one new child range;
//! - expanded from the smallest range, every group of members holding the same range
//!   searches once and takes one new child range;
//! - a member bound at its trie's last level holds no range any more;
//! - the last level of a counting join only counts: no refinement.
//!
//! The state the translation carries from level to level is one column per bound
//! variable and a range (two columns) per atom not yet fully bound; it does not depend
//! on the refinements.

use fox_ra::{MultiJoinInput, TempId};
use fox_sema::core::Column;

use crate::ann::{Expand, Level};

/// The level refinements a plan may use (see [`crate::Algorithm::Lftj`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Refinements {
    /// A level may expand from the smallest of its members' ranges.
    pub min_range: bool,
    /// Members holding the lead's range may follow it without a search.
    pub twins: bool,
}

/// The level plan of the multi-way join binding `vars` (in its order) from `inputs`
/// (`count`: a counting join), one level per variable, using only the refinements
/// `allowed`. An error when the join is malformed: an input binds a variable that is not
/// one of `vars` or binds one twice, or a variable is bound by no input.
pub fn plan_levels(
    vars: &[Column],
    inputs: &[MultiJoinInput],
    count: bool,
    allowed: Refinements,
) -> Result<Vec<Level>, String> {
    /// An atom as the levels see it: its variables in trie order, its trie, how deep
    /// it is bound and its current range (`None` once fully bound).
    struct Atom {
        vars: Vec<usize>,
        trie: usize,
        depth: usize,
        range: Option<usize>,
    }
    let mut tries: Vec<(TempId, Vec<usize>)> = Vec::new();
    let mut ranges = 0usize;
    let mut fresh = || {
        ranges += 1;
        ranges - 1
    };
    let mut roots: Vec<usize> = Vec::new();
    let mut atoms: Vec<Atom> = Vec::new();
    for inp in inputs {
        if inp.vars.is_empty() {
            continue;
        }
        for (i, &v) in inp.vars.iter().enumerate() {
            if v >= vars.len() {
                return Err(format!("a multi-way join input binds variable {v} of {}", vars.len()));
            }
            if inp.vars[..i].contains(&v) {
                return Err(format!("a multi-way join input binds `{}` twice", vars[v].name));
            }
        }
        // The trie holds the input's columns in the join's variable order.
        let mut order: Vec<usize> = (0..inp.vars.len()).collect();
        order.sort_by_key(|&i| inp.vars[i]);
        let key = (inp.src, order);
        let trie = match tries.iter().position(|k| *k == key) {
            Some(t) => t,
            None => {
                tries.push(key);
                roots.push(fresh());
                tries.len() - 1
            }
        };
        atoms.push(Atom {
            vars: tries[trie].1.iter().map(|&i| inp.vars[i]).collect(),
            trie,
            depth: 0,
            range: Some(roots[trie]),
        });
    }
    // What makes two members hold the same range: trie, level and range.
    let key = |atoms: &[Atom], a: usize| (atoms[a].trie, atoms[a].depth, atoms[a].range);
    // Members grouped by the range they hold, in the order of their first member.
    let groups = |atoms: &[Atom], ms: &[usize]| {
        let mut gs: Vec<Vec<usize>> = Vec::new();
        for &a in ms {
            match gs.iter_mut().find(|g| key(atoms, g[0]) == key(atoms, a)) {
                Some(g) => g.push(a),
                None => gs.push(vec![a]),
            }
        }
        gs
    };
    // Binds the next variable of each of `group`'s members, which take the range `r`.
    let advance = |atoms: &mut [Atom], group: &[usize], r: usize| {
        for &a in group {
            atoms[a].depth += 1;
            atoms[a].range = (atoms[a].depth < atoms[a].vars.len()).then_some(r);
        }
    };
    let mut levels = Vec::with_capacity(vars.len());
    for (var, vcol) in vars.iter().enumerate() {
        let carried = var + 2 * atoms.iter().filter(|a| a.range.is_some()).count();
        let members: Vec<usize> = (0..atoms.len())
            .filter(|&a| atoms[a].vars.get(atoms[a].depth) == Some(&var))
            .collect();
        let Some(&lead) = members.first() else {
            return Err(format!(
                "variable `{}` of a multi-way join is bound by no input",
                vcol.name
            ));
        };
        if count && var + 1 == vars.len() {
            levels.push(Level {
                members,
                lead,
                expand: Expand::Count,
                twins: Vec::new(),
                searches: Vec::new(),
                carried,
            });
            break;
        }
        let lead_level = (atoms[lead].trie, atoms[lead].depth);
        // From the smallest range where members over the lead's trie level hold at least
        // two different ranges.
        let smallest = if allowed.min_range {
            let gs = groups(&atoms, &members);
            let sources: Vec<usize> = gs
                .iter()
                .map(|g| g[0])
                .filter(|&a| (atoms[a].trie, atoms[a].depth) == lead_level)
                .collect();
            (sources.len() >= 2).then_some((gs, sources))
        } else {
            None
        };
        let level = match smallest {
            Some((searches, sources)) => {
                for g in &searches {
                    let r = fresh();
                    advance(&mut atoms, g, r);
                }
                Level {
                    members,
                    lead,
                    expand: Expand::Smallest(sources),
                    twins: Vec::new(),
                    searches,
                    carried,
                }
            }
            None => {
                let twins: Vec<usize> = members[1..]
                    .iter()
                    .copied()
                    .filter(|&a| allowed.twins && key(&atoms, a) == key(&atoms, lead))
                    .collect();
                let rest: Vec<usize> = members[1..].iter().copied().filter(|a| !twins.contains(a)).collect();
                let searches = groups(&atoms, &rest);
                let mut followers = vec![lead];
                followers.extend(&twins);
                let r = fresh();
                advance(&mut atoms, &followers, r);
                for g in &searches {
                    let r = fresh();
                    advance(&mut atoms, g, r);
                }
                Level {
                    members,
                    lead,
                    expand: Expand::Lead,
                    twins,
                    searches,
                    carried,
                }
            }
        };
        levels.push(level);
    }
    Ok(levels)
}

/// The state columns carried into level `var` of a multi-way join over `inputs`: one per
/// variable bound before it, two (a range) per atom with a variable at or after it.
pub fn carried_columns(inputs: &[MultiJoinInput], var: usize) -> usize {
    let open = inputs
        .iter()
        .filter(|i| i.vars.iter().max().is_some_and(|&m| m >= var))
        .count();
    var + 2 * open
}

/// The bytes one expanded row of a windowed level costs, by which its windows are sized:
/// its parent and position (8), the `carried` state columns (4 each), the value (4), a
/// search of each of the join's `atoms` (a position and a flag, 5) and the level's flag
/// (1); twice that, for what the next levels make of it.
pub fn window_row_bytes(carried: usize, atoms: usize) -> u64 {
    2 * (8 + 4 * carried as u64 + 4 + 5 * atoms as u64 + 1)
}
