//! Multi-way joins as a breadth-first leapfrog triejoin: a trie per input, one level per
//! variable (expanded from the lead atom's ranges or from the smallest range, then
//! searched in the others), with the refinements `join-selection` allows.

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
        let rounds_at: Vec<bool> = node.map(|n| n.rounds.windowed.clone()).unwrap_or_default();
        let (min_range, twins_on) = match node.map(|n| &n.algorithm) {
            Some(Algorithm::Lftj { min_range, twins }) => (*min_range, *twins),
            _ => (false, false),
        };
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
        // Levels from the third variable on may expand to more rows than any input has:
        // they run in rounds (see `expand_ranges`), the result accumulating in `acc`.
        let mut rounds: Vec<OpenRound> = Vec::new();
        let mut acc: Option<Vec<BufId>> = None;
        for (var, vcol) in vars.iter().enumerate() {
            let windowed = rounds_at.get(var) == Some(&true);
            if windowed && acc.is_none() {
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
            // The bytes each expanded row of this level costs: its parent and position,
            // the state it carries, the value, each member's search and the flags; twice
            // that for what the next levels make of it.
            let row_bytes = 2 * (8 + 4 * state.len() as u64 + 4 + 5 * atoms.len() as u64 + 1);
            let window = windowed.then_some(row_bytes);
            let members: Vec<usize> = (0..atoms.len())
                .filter(|&a| atoms[a].vars.get(atoms[a].depth) == Some(&var))
                .collect();
            let Some(&lead) = members.first() else {
                return Err(LowerError::Invalid(format!(
                    "variable `{}` of a multi-way join is bound by no input",
                    vcol.name
                )));
            };
            let missing = || LowerError::Invalid("a multi-way join lost an atom's range".into());
            if count && var + 1 == vars.len() {
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
                return Ok(Val::unordered(vec![n], columns));
            }
            let lo = find(&state, Slot::Lo(lead)).ok_or_else(missing)?;
            let hi = find(&state, Slot::Hi(lead)).ok_or_else(missing)?;
            let lvl = vcol.name.clone();
            let next = if min_range {
                self.level_from_smallest(
                    &atoms
                        .iter()
                        .map(|a| AtomView {
                            values: a.values.clone(),
                            starts: a.starts.clone(),
                            depth: a.depth,
                            arity: a.vars.len(),
                        })
                        .collect::<Vec<_>>(),
                    &members,
                    &state,
                    (var, vcol),
                    &mut rounds,
                    window,
                )?
            } else {
                None
            };
            if let Some(next) = next {
                for (a, d) in next.depths {
                    atoms[a].depth = d;
                }
                state = next.state;
                continue;
            }
            // Expand the lead atom's children: one row per (binding, child).
            let (parent, pos) = self.expand_ranges(lo, hi, &lvl, &mut rounds, window)?;
            let depth = atoms[lead].depth;
            // Members at the same level of the same trie with the same range as the lead
            // hold exactly the lead's values: they follow the lead without a search.
            let twins: Vec<usize> = members[1..]
                .iter()
                .copied()
                .filter(|&a| {
                    twins_on
                        && atoms[a].depth == depth
                        && atoms[a].values[depth] == atoms[lead].values[depth]
                        && find(&state, Slot::Lo(a)) == Some(lo)
                        && find(&state, Slot::Hi(a)) == Some(hi)
                })
                .collect();
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
            let rest: Vec<usize> = members[1..].iter().copied().filter(|a| !twins.contains(a)).collect();
            let rest = &rest[..];
            if rest.is_empty() {
                continue;
            }
            let mut found = Vec::new();
            let mut positions = Vec::new();
            // Members searching the same level over the same ranges search once.
            let mut searched: Vec<([BufId; 3], BufId)> = Vec::new();
            for &a in rest {
                let d = atoms[a].depth;
                let lo = find(&state, Slot::Lo(a)).ok_or_else(missing)?;
                let hi = find(&state, Slot::Hi(a)).ok_or_else(missing)?;
                let key = [atoms[a].values[d], lo, hi];
                if let Some(&(_, p)) = searched.iter().find(|(k, _)| *k == key) {
                    positions.push(p);
                    continue;
                }
                let r = self.launch(
                    Kernel::SortedSearch,
                    vec![atoms[a].values[d], lo, hi, value],
                    &[(&format!("a{a}.found"), None), (&format!("a{a}.pos"), None)],
                )?;
                searched.push((key, r[1]));
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
        Ok(Val::unordered(cols, columns))
    }

    /// A level of a multi-way join whose members all index the same trie level with
    /// different ranges (the atoms of a clique): each row expands from its smallest range
    /// (`MinRange`), and every member then searches the candidate in its own range, so a
    /// hub's long list never drives the expansion. `None` when the level is not of that
    /// kind (one member, members over different levels, or all members at the lead's range).
    pub(super) fn level_from_smallest(
        &mut self,
        atoms: &[AtomView],
        members: &[usize],
        state: &[(MjSlot, BufId)],
        (var, vcol): (usize, &Column),
        rounds: &mut Vec<OpenRound>,
        window: Option<u64>,
    ) -> R<Option<LevelOut>> {
        let find = |s: MjSlot| state.iter().find(|(x, _)| *x == s).map(|&(_, b)| b);
        let lead = members[0];
        let depth = |a: usize| atoms[a].depth;
        let values = atoms[lead].values[depth(lead)];
        let level = |a: usize| atoms[a].values[depth(a)];
        let range = |a: usize| (find(MjSlot::Lo(a)), find(MjSlot::Hi(a)));
        // Members over the same level with the same range buffers search once, as one.
        let mut distinct: Vec<usize> = Vec::new();
        for &a in members {
            if !distinct.iter().any(|&b| range(b) == range(a) && level(b) == level(a)) {
                distinct.push(a);
            }
        }
        // The members the rows may expand from: those over the lead's level.
        let sources: Vec<usize> = distinct.iter().copied().filter(|&a| level(a) == values).collect();
        if sources.len() < 2 {
            return Ok(None);
        }
        let missing = || LowerError::Invalid("a multi-way join lost an atom's range".into());
        let lvl = vcol.name.clone();
        let mut args = Vec::new();
        for &a in &sources {
            let (lo, hi) = range(a);
            args.push(lo.ok_or_else(missing)?);
            args.push(hi.ok_or_else(missing)?);
        }
        let small = self.launch(
            Kernel::MinRange { ways: sources.len() },
            args,
            &[(&format!("{lvl}.lo"), None), (&format!("{lvl}.hi"), None)],
        )?;
        let (parent, pos) = self.expand_ranges(small[0], small[1], &lvl, rounds, window)?;
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
                vec![level(a), lo, hi, value],
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
        for (i, &a) in distinct.iter().enumerate() {
            let d = depth(a);
            let same: Vec<usize> = members
                .iter()
                .copied()
                .filter(|&b| range(b) == range(a) && level(b) == level(a))
                .collect();
            if d + 1 < atoms[a].arity {
                let child = self.child_range(a, atoms[a].starts[d], got[i])?;
                for &b in &same {
                    next.push((MjSlot::Lo(b), child.0));
                    next.push((MjSlot::Hi(b), child.1));
                }
            }
            depths.extend(same.iter().map(|&b| (b, depth(b) + 1)));
        }
        Ok(Some(LevelOut { state: next, depths }))
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
