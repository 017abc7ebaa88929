//! The translation of a leapfrog triejoin follows the level plan `join-selection` stores
//! and the window costs `rounds` stores, and refuses a plan its buffers contradict.

use fox_kernel::*;
use fox_phys::levels::{plan_levels, Refinements};
use fox_phys::{Algorithm, Expand, Level, Options, PhysPlan, Statistics};
use fox_ra::{Op, Stmt, TempId};

const CLIQUE4: &str = include_str!("../../../../queries/clique4.logic");

fn phys(src: &str, disabled: &[&str]) -> PhysPlan {
    let (ast, diags) = fox_syntax::parse(src);
    assert!(diags.iter().all(|d| !d.is_error()), "{diags:?}");
    let (core, diags) = fox_sema::check(&ast);
    let core = core.unwrap_or_else(|| panic!("{diags:?}"));
    let ra = fox_ra::plan(&core).unwrap_or_else(|e| panic!("{e}"));
    let opts = Options {
        disabled: disabled.iter().map(|s| s.to_string()).collect(),
        stop_after: None,
        join: fox_phys::JoinChoice::Auto,
        devices: 1,
    };
    fox_phys::run(ra, &Statistics::none(), &opts).unwrap()
}

/// The multi-way join of `p` and its operator.
fn join(p: &PhysPlan) -> (TempId, Op) {
    p.ra.blocks
        .iter()
        .flat_map(|b| &b.stmts)
        .find_map(|s| match s {
            Stmt::Let { dst, op, .. } if matches!(op, Op::MultiJoin { .. }) => Some((*dst, op.clone())),
            _ => None,
        })
        .unwrap()
}

fn levels(p: &mut PhysPlan, j: TempId) -> &mut Vec<Level> {
    match &mut p.node_mut(j).algorithm {
        Algorithm::Lftj { levels, .. } => levels,
        a => panic!("{a:?}"),
    }
}

fn lowered(p: &PhysPlan) -> String {
    print_kernels(&lower_physical(p).unwrap())
}

fn refused(p: &PhysPlan) -> String {
    match lower_physical(p) {
        Err(LowerError::Invalid(m)) => m,
        other => panic!("not refused as invalid: {other:?}"),
    }
}

#[test]
fn the_translation_runs_the_levels_the_plan_gives() {
    let mut p = phys(CLIQUE4, &[]);
    let (j, op) = join(&p);
    let Op::MultiJoin {
        vars, inputs, count, ..
    } = &op
    else {
        unreachable!()
    };
    let refined = lowered(&p);
    assert!(refined.contains("min_range"), "{refined}");
    // The same algorithm, given the level plan without refinements: the kernels of the
    // plan without `join-selection`.
    *levels(&mut p, j) = plan_levels(vars, inputs, *count, Refinements::default()).unwrap();
    let plain = lowered(&p);
    assert!(!plain.contains("min_range"), "{plain}");
    assert_eq!(plain, lowered(&phys(CLIQUE4, &["join-selection"])));
}

#[test]
fn the_translation_sizes_windows_by_the_costs_rounds_gives() {
    let mut p = phys(CLIQUE4, &[]);
    let (j, _) = join(&p);
    assert_eq!(p.node(j).rounds.windows, [None, Some(190), Some(182), Some(158)]);
    let text = lowered(&p);
    assert!(
        text.contains("window[190 bytes/row]")
            && text.contains("window[182 bytes/row]")
            && text.contains("window[158 bytes/row]"),
        "{text}"
    );
    p.node_mut(j).rounds.windows = vec![None, None, None, Some(1000)];
    let text = lowered(&p);
    assert!(text.contains("window[1000 bytes/row]"), "{text}");
    assert!(!text.contains("window[182 bytes/row]"), "{text}");
}

#[test]
fn without_the_passes_no_level_is_refined_or_windowed() {
    let p = phys(CLIQUE4, &["join-selection", "rounds"]);
    let text = lowered(&p);
    assert!(!text.contains("min_range") && !text.contains("window["), "{text}");
}

#[test]
fn a_twin_that_does_not_hold_the_leads_range_is_refused() {
    let mut p = phys(CLIQUE4, &[]);
    let (j, _) = join(&p);
    // At y, a3 holds the root range and a0 the child range of its x.
    let l = &mut levels(&mut p, j)[1];
    l.twins = vec![3];
    l.searches = vec![vec![4]];
    assert!(refused(&p).contains("makes a3 a twin of a0"), "{}", refused(&p));
}

#[test]
fn a_shared_search_over_different_ranges_is_refused() {
    let mut p = phys(CLIQUE4, &[]);
    let (j, _) = join(&p);
    // At z from the smallest range: a1 and a3 hold different ranges.
    levels(&mut p, j)[2].searches = vec![vec![1, 3], vec![5]];
    assert!(refused(&p).contains("hold different ranges"), "{}", refused(&p));
    let mut p = phys(CLIQUE4, &[]);
    let (j, op) = join(&p);
    let Op::MultiJoin {
        vars, inputs, count, ..
    } = &op
    else {
        unreachable!()
    };
    // Expanded from the lead at z: a3 and a5 hold different ranges.
    let mut plain = plan_levels(vars, inputs, *count, Refinements::default()).unwrap();
    assert_eq!(plain[2].searches, [vec![3], vec![5]]);
    plain[2].searches = vec![vec![3, 5]];
    *levels(&mut p, j) = plain;
    assert!(refused(&p).contains("hold different ranges"), "{}", refused(&p));
}

#[test]
fn a_smallest_range_source_over_another_trie_level_is_refused() {
    let mut p = phys(CLIQUE4, &[]);
    let (j, _) = join(&p);
    // At z, a5 indexes the first level of the trie, a1 the second.
    levels(&mut p, j)[2].expand = Expand::Smallest(vec![1, 5]);
    assert!(
        refused(&p).contains("expands from the smallest of [1, 5]"),
        "{}",
        refused(&p)
    );
}

#[test]
fn a_level_plan_with_other_members_or_state_is_refused() {
    let mut p = phys(CLIQUE4, &[]);
    let (j, _) = join(&p);
    levels(&mut p, j)[1].members = vec![0, 3];
    assert!(refused(&p).contains("names the members [0, 3]"), "{}", refused(&p));

    let mut p = phys(CLIQUE4, &[]);
    levels(&mut p, j)[3].carried = 7;
    assert!(refused(&p).contains("carries 7 state columns"), "{}", refused(&p));

    let mut p = phys(CLIQUE4, &[]);
    levels(&mut p, j)[0].lead = 4;
    assert!(refused(&p).contains("leads with a4"), "{}", refused(&p));

    let mut p = phys(CLIQUE4, &[]);
    levels(&mut p, j).pop();
    assert!(
        refused(&p).contains("a level plan for 3 of its 4 variables"),
        "{}",
        refused(&p)
    );

    let mut p = phys(CLIQUE4, &[]);
    levels(&mut p, j)[3].expand = Expand::Count;
    assert!(
        refused(&p).contains("does not count exactly the last level"),
        "{}",
        refused(&p)
    );
}
