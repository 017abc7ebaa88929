use fox_phys::{Algorithm, IndexRead, JoinChoice, Options, PhysPlan, Statistics};
use fox_ra::{Op, RelId, Side, Stmt, TempId};

use crate::common::*;

/// Transitive closure joining the closure with itself: the delta of `nl(y, z)` meets the
/// full `nl(x, y)` on its second column.
const NONLINEAR: &str = "e(x, y) -> int32(x), int32(y).\n.input e.\n\
                         nl(x, y) <- e(x, y).\nnl(x, z) <- nl(x, y), nl(y, z).\n.output nl.\n";

const CSPA: &str = include_str!("../../../../queries/datalog/cspa.logic");
const ANDERSEN: &str = include_str!("../../../../queries/datalog/andersen.logic");
const TC: &str = include_str!("../../../../queries/datalog/tc.logic");
const SG: &str = include_str!("../../../../queries/datalog/sg.logic");
const CSDA: &str = include_str!("../../../../queries/datalog/csda.logic");

fn with(join: JoinChoice, devices: usize) -> Options {
    Options {
        join,
        devices,
        ..Options::default()
    }
}

fn plan(src: &str, opts: &Options) -> PhysPlan {
    fox_phys::run(ra(src), &Statistics::none(), opts).unwrap()
}

fn rel(p: &PhysPlan, name: &str) -> RelId {
    RelId(p.ra.relations.iter().position(|r| r.name == name).unwrap() as u32)
}

/// The indexes of every relation that has one, by name.
fn indexes(p: &PhysPlan) -> Vec<(String, Vec<Vec<usize>>)> {
    p.indexes
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
        .map(|(r, l)| (p.ra.relations[r].name.clone(), l.clone()))
        .collect()
}

/// The joins reading an index, with the relation their indexed side scans and the
/// side's keys.
fn reads(p: &PhysPlan) -> Vec<(TempId, IndexRead, String, Vec<usize>)> {
    let mut out = Vec::new();
    for b in &p.ra.blocks {
        for s in &b.stmts {
            let Stmt::Let {
                dst,
                op:
                    Op::Join {
                        left,
                        right,
                        left_keys,
                        right_keys,
                        ..
                    },
                ..
            } = s
            else {
                continue;
            };
            let Some(read) = p.node(*dst).index else {
                continue;
            };
            let (side, keys) = match read.side {
                Side::Left => (*left, left_keys),
                Side::Right => (*right, right_keys),
            };
            let scanned = b.stmts.iter().find_map(|s| match s {
                Stmt::Let {
                    dst, op: Op::Scan(r), ..
                } if *dst == side => Some(p.ra.relations[r.0 as usize].name.clone()),
                _ => None,
            });
            out.push((*dst, read, scanned.unwrap(), keys.clone()));
        }
    }
    out
}

#[test]
fn before_and_after() {
    insta::assert_snapshot!(before_after(NONLINEAR, "indexes", &Statistics::none()));
}

#[test]
fn a_closure_joined_with_itself_reads_its_second_column_through_an_index() {
    let p = plan(NONLINEAR, &Options::default());
    assert_eq!(indexes(&p), [("nl".to_string(), vec![vec![1, 0]])]);
    let r = reads(&p);
    assert_eq!(r.len(), 1, "{r:?}");
    let (t, read, scanned, keys) = &r[0];
    assert_eq!((scanned.as_str(), keys.as_slice()), ("nl", &[1][..]));
    assert_eq!(read.rel, rel(&p, "nl"));
    assert_eq!(read.index, 0);
    // The delta is sorted on the key (its first column): the index is merged with it.
    assert_eq!(p.node(*t).algorithm, Algorithm::SortMerge);
    // Concatenated over the index's parts, the rows have no known order.
    let o = p.node(*t).order.as_ref().unwrap();
    assert!(o.provides.sorted.is_empty(), "{o:?}");
    assert_eq!(o.key_order, [0]);
    let text = fox_phys::print_physical(&p);
    assert!(
        text.contains("relation nl: in its loop, also an index sorted on [y, x], kept as the relation is"),
        "{text}"
    );
    assert!(
        text.contains("merged with the index nl sorted on [y, x] for t"),
        "{text}"
    );
}

#[test]
fn cspa_and_andersen_index_their_relations_by_the_second_column() {
    let p = plan(CSPA, &Options::default());
    assert_eq!(
        indexes(&p),
        [
            ("valueFlow".to_string(), vec![vec![1, 0]]),
            ("memoryAlias".to_string(), vec![vec![1, 0]]),
        ]
    );
    let r = reads(&p);
    let scanned: Vec<(&str, &[usize])> = r.iter().map(|(_, _, s, k)| (s.as_str(), k.as_slice())).collect();
    // valueAlias(x, y) <- valueFlow(z, x), memoryAlias(z, w), Δ valueFlow(w, y) and
    // valueFlow(x, y) <- valueFlow(x, z), Δ valueFlow(z, y).
    assert_eq!(scanned, [("memoryAlias", &[1][..]), ("valueFlow", &[1][..])]);
    for (t, read, ..) in &r {
        assert_eq!(read.side, Side::Right);
        assert_eq!(p.node(*t).algorithm, Algorithm::SortMerge);
    }
    let p = plan(ANDERSEN, &Options::default());
    assert_eq!(indexes(&p), [("pointsTo".to_string(), vec![vec![1, 0]])]);
    assert_eq!(reads(&p).len(), 1);
}

#[test]
fn linear_recursions_keep_their_plans() {
    for (name, src) in [("tc", TC), ("sg", SG), ("csda", CSDA)] {
        let p = plan(src, &Options::default());
        assert!(indexes(&p).is_empty(), "{name}");
        assert!(reads(&p).is_empty(), "{name}");
        let without = fox_phys::run(
            ra(src),
            &Statistics::none(),
            &Options {
                disabled: vec!["indexes".into()],
                ..Options::default()
            },
        )
        .unwrap();
        let strip = |s: String| s.replace("indexes, ", "");
        assert_eq!(
            strip(fox_phys::print_physical(&p)),
            fox_phys::print_physical(&without),
            "{name}"
        );
    }
}

#[test]
fn disabled_no_relation_has_an_index() {
    let opts = Options {
        disabled: vec!["indexes".into()],
        ..Options::default()
    };
    let p = plan(CSPA, &opts);
    assert!(p.indexes.iter().all(Vec::is_empty));
    assert!(p.nodes.iter().all(|n| n.index.is_none()));
}

#[test]
fn forced_algorithms() {
    // Forced to merge or to index nested loops, the index is read so; forced to hash or
    // nested loops, the sides are read as they are.
    let p = plan(NONLINEAR, &with(JoinChoice::Merge, 1));
    let r = reads(&p);
    assert_eq!(r.len(), 1);
    assert_eq!(p.node(r[0].0).algorithm, Algorithm::SortMerge);
    let p = plan(NONLINEAR, &with(JoinChoice::IndexNestedLoop, 1));
    let r = reads(&p);
    assert_eq!(r.len(), 1);
    assert_eq!(
        p.node(r[0].0).algorithm,
        Algorithm::IndexNestedLoop { indexed: r[0].1.side }
    );
    for forced in [JoinChoice::Hash, JoinChoice::NestedLoop] {
        let p = plan(NONLINEAR, &with(forced, 1));
        assert!(indexes(&p).is_empty(), "{forced:?}");
        assert!(reads(&p).is_empty(), "{forced:?}");
    }
}

#[test]
fn an_unsorted_other_side_searches_the_index() {
    // The delta of `q(y, z)` meets the full `q(x, y)` through `e(y, w)` first: the other
    // side, a join's rows, is not sorted on the key, so it searches each part.
    let src = "e(x, y) -> int32(x), int32(y).\n.input e.\n\
               q(x, y) <- e(x, y).\nq(x, z) <- q(x, y), e(y, w), q(w, z).\n.output q.\n";
    let p = plan(src, &Options::default());
    let r = reads(&p);
    assert!(!r.is_empty(), "{}", fox_phys::print_physical(&p));
    for (t, read, scanned, _) in &r {
        assert_eq!(scanned, "q");
        let alg = &p.node(*t).algorithm;
        assert!(
            *alg == Algorithm::SortMerge || *alg == Algorithm::IndexNestedLoop { indexed: read.side },
            "{alg:?}"
        );
    }
    assert!(
        r.iter()
            .any(|(t, read, ..)| p.node(*t).algorithm == Algorithm::IndexNestedLoop { indexed: read.side }),
        "{}",
        fox_phys::print_physical(&p)
    );
}

#[test]
fn over_devices_an_index_is_read_only_where_its_side_stays() {
    for src in [NONLINEAR, CSPA, ANDERSEN] {
        let p = plan(src, &with(JoinChoice::Auto, 2));
        for (t, read, ..) in reads(&p) {
            let input = match read.side {
                Side::Left => 0,
                Side::Right => 1,
            };
            assert!(p.node(t).moves.iter().all(|(i, _)| *i != input));
        }
    }
}
