//! Multi-way joins as a breadth-first leapfrog triejoin: a trie per input, one level per
//! variable (expanded from the lead atom's ranges or from the smallest range, then
//! searched in the others), each level as the level plan of `join-selection` says and
//! each window as `rounds` costs it: nothing is decided here.

use fox_phys::levels::{plan_levels, Refinements};
use fox_phys::{Expand, Level};

use super::*;

/// A slot of a multi-way join's state: a variable's column, or an atom's current range.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(super) enum MjSlot {
    Var(usize),
    Lo(usize),
    Hi(usize),
}

/// A multi-way join's state: the buffer of each slot.
pub(super) type MjState = Vec<(MjSlot, BufId)>;

/// An atom of a multi-way join as a level sees it: its trie and how deep it is bound.
pub(super) struct AtomView {
    pub(super) values: Vec<BufId>,
    pub(super) starts: Vec<BufId>,
    pub(super) depth: usize,
    pub(super) arity: usize,
}

/// The state after a level, and the new depth of each atom that bound it.
pub(super) struct LevelOut {
    pub(super) state: Vec<(MjSlot, BufId)>,
    pub(super) depths: Vec<(usize, usize)>,
}

impl Lower<'_> {
    /// A multi-way join, level by level as the node's level plan says (`join-selection`;
    /// without one, the plan with no refinement), each windowed level as `rounds` says.
    /// The plan's claims are checked against the buffers: members, twins and shared
    /// searches that do not hold what the plan says they hold are an error, never a
    /// wrong result.
    pub(super) fn multi_join(
        &mut self,
        vars: &[Column],
        inputs: &[MultiJoinInput],
        output: &[usize],
        count: bool,
        columns: Vec<Column>,
    ) -> R<Val> {
        if vars.is_empty() {
            return Err(LowerError::Unsupported("a multi-way join binds no variable".into()));
        }
        self.child_ranges.clear();
        let node = self.dst.map(|d| self.phys.node(d));
        let windows: Vec<Option<u64>> = node.map(|n| n.rounds.windows.clone()).unwrap_or_default();
        let planned = match node.map(|n| &n.algorithm) {
            Some(Algorithm::Lftj { levels, .. }) if !levels.is_empty() => levels.clone(),
            _ => plan_levels(vars, inputs, count, Refinements::default()).map_err(LowerError::Invalid)?,
        };
        if planned.len() != vars.len() {
            return Err(LowerError::Invalid(format!(
                "a multi-way join has a level plan for {} of its {} variables",
                planned.len(),
                vars.len()
            )));
        }
        struct Atom {
            vars: Vec<usize>,
            values: Vec<BufId>,
            starts: Vec<BufId>,
            depth: usize,
        }
        type Slot = MjSlot;
        let mut atoms: Vec<Atom> = Vec::new();
        let mut nullary: Vec<Val> = Vec::new();
        let mut state: Vec<(Slot, BufId)> = Vec::new();
        // Atoms over the same input with the same column order share one trie.
        type Trie = (Vec<BufId>, Vec<BufId>, BufId, BufId);
        let mut tries: Vec<((fox_ra::TempId, Vec<usize>), Trie)> = Vec::new();
        for inp in inputs {
            let v = self.temp(inp.src)?;
            if inp.vars.is_empty() {
                nullary.push(v);
                continue;
            }
            let a = atoms.len();
            // Columns in the global variable order, as a set sorted on all of them.
            let mut order: Vec<usize> = (0..inp.vars.len()).collect();
            order.sort_by_key(|&i| inp.vars[i]);
            let key = (inp.src, order.clone());
            let (values, starts, lo, hi) = match tries.iter().find(|(k, _)| *k == key) {
                Some((_, t)) => t.clone(),
                None => {
                    let v = self.project(&v, &order)?;
                    let m = order.len();
                    let v = self.unique_on(v, &asc(0..m))?;
                    let v = self.sort_code(v, &asc(0..m))?;
                    let names: Vec<String> = (0..m)
                        .flat_map(|d| {
                            let mut n = vec![format!("a{a}.v{d}")];
                            if d + 1 < m {
                                n.push(format!("a{a}.s{d}"));
                            }
                            n
                        })
                        .collect();
                    let refs: Vec<(&str, Option<Type>)> = names.iter().map(|n| (n.as_str(), None)).collect();
                    let trie = self.launch(Kernel::TrieBuild { arity: m }, v.cols.clone(), &refs)?;
                    let values: Vec<BufId> = trie.iter().step_by(2).copied().collect();
                    let starts: Vec<BufId> = trie.iter().skip(1).step_by(2).copied().collect();
                    let (lo, hi) = (format!("a{a}.lo"), format!("a{a}.hi"));
                    let root = self.launch(Kernel::RootRange, vec![values[0]], &[(&lo, None), (&hi, None)])?;
                    let t = (values, starts, root[0], root[1]);
                    tries.push((key, t.clone()));
                    t
                }
            };
            let root = [lo, hi];
            state.push((Slot::Lo(a), root[0]));
            state.push((Slot::Hi(a), root[1]));
            atoms.push(Atom {
                vars: order.iter().map(|&i| inp.vars[i]).collect(),
                values,
                starts,
                depth: 0,
            });
        }
        let find = |state: &[(Slot, BufId)], s: Slot| state.iter().find(|(x, _)| *x == s).map(|&(_, b)| b);
        // Levels `rounds` windows may expand to more rows than any input has: they run in
        // rounds (see `expand_ranges`), the result accumulating in `acc`.
        let mut rounds: Vec<OpenRound> = Vec::new();
        let mut acc: Option<Vec<BufId>> = None;
        // Over several devices, the devices claim boxes of the first variable's bindings
        // (`Node::boxes`): every device computes the first level whole (its inputs are
        // replicated), then the expansion of the second level is cut into boxes, each
        // binding of the first variable weighing the rows it expands to, and each device
        // runs the rest of the join on the boxes it takes. The first level's own
        // expansion is cut instead where the second level only counts, or where the first
        // runs in rounds (each device sizes its own windows, so the expansions after them
        // may differ between devices).
        let boxes = node.map_or(0, |n| n.boxes);
        if boxes > 0 && vars.len() < 2 {
            return Err(LowerError::Invalid(
                "a multi-way join of one variable cannot split its work over devices".into(),
            ));
        }
        let boxed_level = (boxes > 0).then(|| {
            if planned[1].expand == Expand::Count || windows.first().copied().flatten().is_some() {
                0
            } else {
                1
            }
        });
        for (var, vcol) in vars.iter().enumerate() {
            let level = &planned[var];
            let window = windows.get(var).copied().flatten();
            let cut = Cut {
                window,
                boxes: (boxed_level == Some(var)).then_some(boxes),
            };
            if (window.is_some() || cut.boxes.is_some()) && acc.is_none() {
                // A counting join accumulates its count column, a listing its output columns.
                let acc_cols = if count { &columns[..1] } else { &columns[..] };
                let types = phys_types(acc_cols);
                let names = Self::col_names(acc_cols);
                let refs: Vec<(String, Option<Type>)> = names.iter().map(|(n, t)| (format!("{n}.acc"), *t)).collect();
                let refs: Vec<(&str, Option<Type>)> = refs.iter().map(|(n, t)| (n.as_str(), *t)).collect();
                acc = Some(self.launch(
                    Kernel::Const {
                        types,
                        rows: Vec::new(),
                    },
                    Vec::new(),
                    &refs,
                )?);
            }
            let members: Vec<usize> = (0..atoms.len())
                .filter(|&a| atoms[a].vars.get(atoms[a].depth) == Some(&var))
                .collect();
            if members.is_empty() {
                return Err(LowerError::Invalid(format!(
                    "variable `{}` of a multi-way join is bound by no input",
                    vcol.name
                )));
            }
            let mismatch = |what: String| {
                LowerError::Invalid(format!(
                    "the level plan of variable `{}` of a multi-way join {what}",
                    vcol.name
                ))
            };
            if level.members != members {
                return Err(mismatch(format!(
                    "names the members {:?}, but the atoms binding it are {members:?}",
                    level.members
                )));
            }
            if level.carried != state.len() {
                return Err(mismatch(format!(
                    "carries {} state columns into it, but the join has {}",
                    level.carried,
                    state.len()
                )));
            }
            let lead = level.lead;
            if !members.contains(&lead) {
                return Err(mismatch(format!("leads with a{lead}, which is not a member")));
            }
            let missing = || LowerError::Invalid("a multi-way join lost an atom's range".into());
            let counted = count && var + 1 == vars.len();
            if counted != (level.expand == Expand::Count) {
                return Err(mismatch(
                    "does not count exactly the last level of a counting join".into(),
                ));
            }
            if counted {
                // The last level is only counted: the size of the intersection of the
                // members' ranges, summed over the bindings so far.
                if !nullary.is_empty() {
                    return Err(LowerError::Invalid(
                        "a counting multi-way join has an input without variables".into(),
                    ));
                }
                let mut args = Vec::with_capacity(3 * members.len());
                for &a in &members {
                    args.push(atoms[a].values[atoms[a].depth]);
                    args.push(find(&state, Slot::Lo(a)).ok_or_else(missing)?);
                    args.push(find(&state, Slot::Hi(a)).ok_or_else(missing)?);
                }
                let n = self.launch1(
                    Kernel::IntersectCount { ways: members.len() },
                    args,
                    &columns[0].name,
                    Some(columns[0].ty),
                )?;
                let n = self.close_rounds(rounds, acc, vec![n])?;
                let n = match n {
                    Closed::Same(c) => c[0],
                    // The counts of the rounds, summed.
                    Closed::Accumulated(c) => self.launch1(
                        Kernel::ReduceByKey {
                            nkeys: 0,
                            aggs: vec![AggSpec {
                                func: fox_sema::core::AggFunc::Sum,
                                input: Some(columns[0].ty),
                                output: columns[0].ty,
                            }],
                        },
                        c,
                        &columns[0].name,
                        Some(columns[0].ty),
                    )?,
                };
                let n = if boxes > 0 {
                    // Each device counted the bindings of the boxes it took.
                    let all = self.launch1(
                        Kernel::Exchange {
                            width: 1,
                            to: Exchange::Gather,
                        },
                        vec![n],
                        &format!("{}.parts", columns[0].name),
                        Some(columns[0].ty),
                    )?;
                    self.launch1(
                        Kernel::ReduceByKey {
                            nkeys: 0,
                            aggs: vec![AggSpec {
                                func: fox_sema::core::AggFunc::Sum,
                                input: Some(columns[0].ty),
                                output: columns[0].ty,
                            }],
                        },
                        vec![all],
                        &columns[0].name,
                        Some(columns[0].ty),
                    )?
                } else {
                    n
                };
                return Ok(Val::unordered(vec![n], columns));
            }
            let lo = find(&state, Slot::Lo(lead)).ok_or_else(missing)?;
            let hi = find(&state, Slot::Hi(lead)).ok_or_else(missing)?;
            let lvl = vcol.name.clone();
            if let Expand::Smallest(_) = &level.expand {
                let views: Vec<AtomView> = atoms
                    .iter()
                    .map(|a| AtomView {
                        values: a.values.clone(),
                        starts: a.starts.clone(),
                        depth: a.depth,
                        arity: a.vars.len(),
                    })
                    .collect();
                let next = self.level_from_smallest(&views, level, &state, (var, vcol), &mut rounds, cut)?;
                for (a, d) in next.depths {
                    atoms[a].depth = d;
                }
                state = next.state;
                continue;
            }
            // Expand the lead atom's children: one row per (binding, child).
            let (parent, pos) = self.expand_ranges(lo, hi, &lvl, &mut rounds, cut)?;
            let depth = atoms[lead].depth;
            // Twins are members at the same level of the same trie with the same range as
            // the lead: they hold exactly the lead's values and follow it without a search.
            let twins = &level.twins;
            for &a in twins {
                let holds_lead = a != lead
                    && members.contains(&a)
                    && atoms[a].depth == depth
                    && atoms[a].values.get(depth) == atoms[lead].values.get(depth)
                    && find(&state, Slot::Lo(a)) == Some(lo)
                    && find(&state, Slot::Hi(a)) == Some(hi);
                if !holds_lead {
                    return Err(mismatch(format!(
                        "makes a{a} a twin of a{lead}, whose range it does not hold"
                    )));
                }
            }
            let follows = |s: Slot| {
                std::iter::once(lead)
                    .chain(twins.iter().copied())
                    .any(|a| s == Slot::Lo(a) || s == Slot::Hi(a))
            };
            let value = self.launch1(
                Kernel::Gather { shift: 0 },
                vec![pos, atoms[lead].values[depth]],
                &vcol.name,
                Some(vcol.ty),
            )?;
            // Every other state column follows its parent row.
            let others: Vec<(Slot, BufId)> = state.iter().copied().filter(|(s, _)| !follows(*s)).collect();
            let (mut next, _) = self.carry_state(Kernel::Gather { shift: 0 }, parent, &others, &[])?;
            next.push((Slot::Var(var), value));
            if depth + 1 < atoms[lead].vars.len() {
                let range = self.child_range(lead, atoms[lead].starts[depth], pos)?;
                for a in std::iter::once(lead).chain(twins.iter().copied()) {
                    next.push((Slot::Lo(a), range.0));
                    next.push((Slot::Hi(a), range.1));
                }
            }
            for a in std::iter::once(lead).chain(twins.iter().copied()) {
                atoms[a].depth += 1;
            }
            state = next;
            // Intersect with every other atom that binds this variable.
            let rest: Vec<usize> = members
                .iter()
                .copied()
                .filter(|&a| a != lead && !twins.contains(&a))
                .collect();
            let rest = &rest[..];
            let mut planned_rest: Vec<usize> = level.searches.iter().flatten().copied().collect();
            planned_rest.sort_unstable();
            if planned_rest != rest {
                return Err(mismatch(format!(
                    "searches {:?}, but the members besides the lead and its twins are {rest:?}",
                    level.searches
                )));
            }
            if rest.is_empty() {
                continue;
            }
            let mut found = Vec::new();
            let mut positions = Vec::new();
            // Each search group searches once: its members hold the same range of the same
            // trie level.
            let mut searched: Vec<(usize, [BufId; 3], BufId)> = Vec::new();
            for &a in rest {
                let Some(g) = level.searches.iter().position(|g| g.contains(&a)) else {
                    return Err(mismatch(format!("does not say how a{a} searches")));
                };
                let d = atoms[a].depth;
                let lo = find(&state, Slot::Lo(a)).ok_or_else(missing)?;
                let hi = find(&state, Slot::Hi(a)).ok_or_else(missing)?;
                let key = [atoms[a].values[d], lo, hi];
                if let Some(&(_, k, p)) = searched.iter().find(|(h, _, _)| *h == g) {
                    if k != key {
                        return Err(mismatch(format!(
                            "shares a search among {:?}, which hold different ranges",
                            level.searches[g]
                        )));
                    }
                    positions.push(p);
                    continue;
                }
                let r = self.launch(
                    Kernel::SortedSearch,
                    vec![atoms[a].values[d], lo, hi, value],
                    &[(&format!("a{a}.found"), None), (&format!("a{a}.pos"), None)],
                )?;
                searched.push((g, key, r[1]));
                found.push(r[0]);
                positions.push(r[1]);
            }
            let flags = self.all_found(found, &lvl)?;
            let kept: Vec<(Slot, BufId)> = state
                .iter()
                .copied()
                .filter(|(s, _)| !rest.iter().any(|&a| *s == Slot::Lo(a) || *s == Slot::Hi(a)))
                .collect();
            let extra: Vec<(BufId, String)> = rest
                .iter()
                .zip(&positions)
                .map(|(a, &p)| (p, format!("a{a}.pos")))
                .collect();
            let (next, got) = self.carry_state(Kernel::Compact, flags, &kept, &extra)?;
            state = next;
            for (i, &a) in rest.iter().enumerate() {
                let d = atoms[a].depth;
                if d + 1 < atoms[a].vars.len() {
                    let range = self.child_range(a, atoms[a].starts[d], got[i])?;
                    state.push((Slot::Lo(a), range.0));
                    state.push((Slot::Hi(a), range.1));
                }
                atoms[a].depth += 1;
            }
        }
        let mut var_cols: Vec<BufId> = (0..vars.len())
            .map(|v| find(&state, Slot::Var(v)))
            .collect::<Option<_>>()
            .ok_or_else(|| LowerError::Invalid("a multi-way join lost a variable".into()))?;
        // Inputs without variables only say whether there are results at all.
        for n in nullary {
            let flags = self.launch1(
                Kernel::MatchFlags { nkeys: 0, anti: false },
                vec![var_cols[0], n.cols[0]],
                "nonempty",
                None,
            )?;
            var_cols = self.compact(flags, &var_cols, vars)?;
        }
        let mut cols: Vec<BufId> = output.iter().map(|&v| var_cols[v]).collect();
        if cols.is_empty() {
            cols.push(self.ones(var_cols[0])?);
        }
        let cols = match self.close_rounds(rounds, acc, cols)? {
            Closed::Same(c) | Closed::Accumulated(c) => c,
        };
        if boxes == 0 {
            return Ok(Val::unordered(cols, columns));
        }
        // Each row is on the device that took its box, which depends on timing: the rows
        // move as `partitioning` places them (`fox_phys::passes::boxed_listing_placement`)
        // and are sorted on the variables in their order, so that what every device holds,
        // and in which order, does not.
        let to = match node.map(|n| &n.partitioning) {
            Some(fox_phys::Partitioning::Hash { cols: keys, .. }) => {
                fox_phys::Redistribute::Hash { cols: keys.clone() }
            }
            Some(fox_phys::Partitioning::Single) => fox_phys::Redistribute::Gather,
            p => {
                return Err(LowerError::Invalid(format!(
                    "a multi-way join listed in boxes is placed as {p:?}, not by its rows' values"
                )))
            }
        };
        let v = self.exchange(Val::unordered(cols, columns.clone()), &to)?;
        if output.is_empty() {
            return Ok(Val::unordered(v.cols, columns));
        }
        let mut keys: Vec<usize> = (0..output.len()).collect();
        keys.sort_by_key(|&p| output[p]);
        let v = self.sort_code(v, &asc(keys))?;
        Ok(Val::unordered(v.cols, columns))
    }

    /// A level of a multi-way join expanded from the smallest range (`Expand::Smallest`,
    /// the atoms of a clique): each row expands from the smallest of the sources' ranges
    /// (`MinRange`), members over the lead's trie level, and every search group of
    /// `level` then searches the candidate in its range, so a hub's long list never
    /// drives the expansion.
    pub(super) fn level_from_smallest(
        &mut self,
        atoms: &[AtomView],
        level: &Level,
        state: &[(MjSlot, BufId)],
        (var, vcol): (usize, &Column),
        rounds: &mut Vec<OpenRound>,
        cut: Cut,
    ) -> R<LevelOut> {
        let find = |s: MjSlot| state.iter().find(|(x, _)| *x == s).map(|&(_, b)| b);
        let Expand::Smallest(sources) = &level.expand else {
            return Err(LowerError::Invalid(format!(
                "level `{}` of a multi-way join does not expand from the smallest range",
                vcol.name
            )));
        };
        let members = &level.members;
        let lead = level.lead;
        let depth = |a: usize| atoms[a].depth;
        let values = atoms[lead].values[depth(lead)];
        let level_of = |a: usize| atoms[a].values[depth(a)];
        let range = |a: usize| (find(MjSlot::Lo(a)), find(MjSlot::Hi(a)));
        let mismatch = |what: String| {
            LowerError::Invalid(format!(
                "the level plan of variable `{}` of a multi-way join {what}",
                vcol.name
            ))
        };
        // Each search group's members hold one range of one trie level: its first member
        // searches for the group.
        let mut planned: Vec<usize> = level.searches.iter().flatten().copied().collect();
        planned.sort_unstable();
        if planned != *members || level.searches.iter().any(|g| g.is_empty()) {
            return Err(mismatch(format!(
                "searches {:?}, but its members are {members:?}",
                level.searches
            )));
        }
        for g in &level.searches {
            if g.iter()
                .any(|&b| range(b) != range(g[0]) || level_of(b) != level_of(g[0]))
            {
                return Err(mismatch(format!(
                    "shares a search among {g:?}, which hold different ranges"
                )));
            }
        }
        let distinct: Vec<usize> = level.searches.iter().map(|g| g[0]).collect();
        if sources.iter().any(|&a| !distinct.contains(&a) || level_of(a) != values) {
            return Err(mismatch(format!(
                "expands from the smallest of {sources:?}, which are not each the first of a search group over a{lead}'s trie level"
            )));
        }
        let missing = || LowerError::Invalid("a multi-way join lost an atom's range".into());
        let lvl = vcol.name.clone();
        let mut args = Vec::new();
        for &a in sources {
            let (lo, hi) = range(a);
            args.push(lo.ok_or_else(missing)?);
            args.push(hi.ok_or_else(missing)?);
        }
        let small = self.launch(
            Kernel::MinRange { ways: sources.len() },
            args,
            &[(&format!("{lvl}.lo"), None), (&format!("{lvl}.hi"), None)],
        )?;
        let (parent, pos) = self.expand_ranges(small[0], small[1], &lvl, rounds, cut)?;
        let value = self.launch1(
            Kernel::Gather { shift: 0 },
            vec![pos, values],
            &vcol.name,
            Some(vcol.ty),
        )?;
        // Every state column follows its parent row (members' ranges once each).
        // A member whose range is another's is carried by that one.
        let follows_distinct = |s: MjSlot| {
            members
                .iter()
                .any(|&a| !distinct.contains(&a) && (s == MjSlot::Lo(a) || s == MjSlot::Hi(a)))
        };
        let carried: Vec<(MjSlot, BufId)> = state.iter().copied().filter(|(s, _)| !follows_distinct(*s)).collect();
        let (moved, _) = self.carry_state(Kernel::Gather { shift: 0 }, parent, &carried, &[])?;
        let mfind = |s: MjSlot| moved.iter().find(|(x, _)| *x == s).map(|&(_, b)| b);
        let mut found = Vec::new();
        let mut positions = Vec::new();
        for &a in &distinct {
            let lo = mfind(MjSlot::Lo(a)).ok_or_else(missing)?;
            let hi = mfind(MjSlot::Hi(a)).ok_or_else(missing)?;
            let r = self.launch(
                Kernel::SortedSearch,
                vec![level_of(a), lo, hi, value],
                &[(&format!("a{a}.found"), None), (&format!("a{a}.pos"), None)],
            )?;
            found.push(r[0]);
            positions.push(r[1]);
        }
        let flags = self.all_found(found, &lvl)?;
        let in_level = |s: MjSlot| members.iter().any(|&a| s == MjSlot::Lo(a) || s == MjSlot::Hi(a));
        let mut kept: Vec<(MjSlot, BufId)> = moved.iter().copied().filter(|(s, _)| !in_level(*s)).collect();
        kept.push((MjSlot::Var(var), value));
        let extra: Vec<(BufId, String)> = distinct
            .iter()
            .zip(&positions)
            .map(|(a, &p)| (p, format!("a{a}.pos")))
            .collect();
        let (mut next, got) = self.carry_state(Kernel::Compact, flags, &kept, &extra)?;
        let mut depths = Vec::new();
        // Each group's members take the child range of its first member's position.
        for ((same, &p), &a) in level.searches.iter().zip(&got).zip(&distinct) {
            let d = depth(a);
            if d + 1 < atoms[a].arity {
                let child = self.child_range(a, atoms[a].starts[d], p)?;
                for &b in same {
                    next.push((MjSlot::Lo(b), child.0));
                    next.push((MjSlot::Hi(b), child.1));
                }
            }
            depths.extend(same.iter().map(|&b| (b, depth(b) + 1)));
        }
        Ok(LevelOut { state: next, depths })
    }

    /// The conjunction of `found` flags (the one flag itself when there is one).
    pub(super) fn all_found(&mut self, found: Vec<BufId>, lvl: &str) -> R<BufId> {
        if found.len() == 1 {
            return Ok(found[0]);
        }
        let expr = KExpr {
            kind: KExprKind::And(
                (0..found.len())
                    .map(|i| KExpr {
                        kind: KExprKind::Col(i),
                        ty: Type::Bool,
                    })
                    .collect(),
            ),
            ty: Type::Bool,
        };
        let n_cols = found.len();
        self.launch1(Kernel::Eval { expr, n_cols }, found, &format!("{lvl}.found"), None)
    }

    /// Moves a multi-way join's state columns, and `extra` columns after them, through a
    /// row-selecting kernel (`Gather` by parent rows, `Compact` by flags) whose first
    /// argument is `by`. Returns the moved state and the moved extras; nothing is launched
    /// when there is nothing to move.
    pub(super) fn carry_state(
        &mut self,
        kernel: Kernel,
        by: BufId,
        state: &[(MjSlot, BufId)],
        extra: &[(BufId, String)],
    ) -> R<(MjState, Vec<BufId>)> {
        if state.is_empty() && extra.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        // Slots holding the same buffer (the root range of atoms over one trie) move once
        // and keep sharing it.
        let mut distinct: Vec<BufId> = Vec::new();
        for &(_, b) in state {
            if !distinct.contains(&b) {
                distinct.push(b);
            }
        }
        let mut extra_distinct: Vec<(BufId, String)> = Vec::new();
        for (b, n) in extra {
            if !extra_distinct.iter().any(|(d, _)| d == b) {
                extra_distinct.push((*b, n.clone()));
            }
        }
        let mut args = vec![by];
        args.extend(distinct.iter().copied());
        args.extend(extra_distinct.iter().map(|(b, _)| *b));
        let mut names: Vec<(String, Option<Type>)> = distinct
            .iter()
            .map(|&b| (self.base_name(b), self.buffers[b.0 as usize].ty))
            .collect();
        names.extend(extra_distinct.iter().map(|(_, n)| (n.clone(), None)));
        let refs: Vec<(&str, Option<Type>)> = names.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        let mut got = self.launch(kernel, args, &refs)?;
        let got_extra = got.split_off(distinct.len());
        let moved = state
            .iter()
            .map(|&(s, b)| (s, got[distinct.iter().position(|&d| d == b).unwrap_or(0)]))
            .collect();
        let extras = extra
            .iter()
            .map(|(b, _)| got_extra[extra_distinct.iter().position(|(d, _)| d == b).unwrap_or(0)])
            .collect();
        Ok((moved, extras))
    }

    /// The range of children of the trie nodes at `pos`: `start[pos]`, `start[pos + 1]`.
    pub(super) fn child_range(&mut self, atom: usize, start: BufId, pos: BufId) -> R<(BufId, BufId)> {
        if let Some(&(_, r)) = self.child_ranges.iter().find(|(k, _)| *k == (start, pos)) {
            return Ok(r);
        }
        let r = self.child_range_new(atom, start, pos)?;
        self.child_ranges.push(((start, pos), r));
        Ok(r)
    }

    pub(super) fn child_range_new(&mut self, atom: usize, start: BufId, pos: BufId) -> R<(BufId, BufId)> {
        let lo = self.launch1(
            Kernel::Gather { shift: 0 },
            vec![pos, start],
            &format!("a{atom}.lo"),
            None,
        )?;
        let hi = self.launch1(
            Kernel::Gather { shift: 1 },
            vec![pos, start],
            &format!("a{atom}.hi"),
            None,
        )?;
        Ok((lo, hi))
    }

    /// The part of a buffer's name after the temp prefix (`t3.a0.lo~2` → `a0.lo`).
    pub(super) fn base_name(&self, b: BufId) -> String {
        let name = &self.buffers[b.0 as usize].name;
        let name = name.split('~').next().unwrap_or(name);
        match name.split_once('.') {
            Some((_, rest)) => rest.to_string(),
            None => name.to_string(),
        }
    }
}
