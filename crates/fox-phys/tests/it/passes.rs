//! The pass list and its options.

use fox_phys::{Options, PhysError, Statistics};

use crate::common::*;

const SRC: &str = "e(x, y) -> int32(x), int32(y).\n.input e.\np(x, z) <- e(x, y), e(y, z).\n.output p.\n";

#[test]
fn the_passes_in_order() {
    assert_eq!(
        fox_phys::pass_names(),
        [
            "estimate",
            "join-selection",
            "fusion",
            "partitioning",
            "order",
            "rounds",
            "tiering",
            "verify"
        ]
    );
    for p in fox_phys::PASSES {
        assert!(!p.decides().is_empty(), "{}", p.name());
    }
}

#[test]
fn an_unknown_pass_is_an_error_naming_the_passes() {
    for opts in [
        Options {
            disabled: vec!["fusoin".into()],
            stop_after: None,
            join: fox_phys::JoinChoice::Auto,
            devices: 1,
        },
        Options {
            disabled: Vec::new(),
            stop_after: Some("fusoin".into()),
            join: fox_phys::JoinChoice::Auto,
            devices: 1,
        },
    ] {
        let e = fox_phys::run(ra(SRC), &Statistics::none(), &opts).unwrap_err();
        assert!(matches!(e, PhysError::UnknownPass { .. }));
        assert!(
            e.to_string().contains("`fusoin`") && e.to_string().contains("join-selection"),
            "{e}"
        );
    }
}

#[test]
fn a_disabled_pass_does_not_run_and_the_others_do() {
    let opts = Options {
        disabled: vec!["estimate".into()],
        stop_after: None,
        join: fox_phys::JoinChoice::Auto,
        devices: 1,
    };
    let p = fox_phys::run(ra(SRC), &Statistics::none(), &opts).unwrap();
    assert_eq!(
        p.ran,
        [
            "join-selection",
            "fusion",
            "partitioning",
            "order",
            "rounds",
            "tiering",
            "verify"
        ]
    );
    assert!(p.nodes.iter().all(|n| n.est.is_none()));
    assert!(fox_phys::print_physical(&p).contains("rows ?"));
}

#[test]
fn stop_after_runs_the_passes_up_to_it() {
    let p = phys_after(SRC, Some("join-selection"), &Statistics::none());
    assert_eq!(p.ran, ["estimate", "join-selection"]);
}

#[test]
fn tiering_keeps_the_relations_loops_merge_into_in_runs() {
    let src = "e(x, y) -> int32(x), int32(y).\n.input e.\n\
               path(x, y) <- e(x, y).\npath(x, z) <- path(x, y), e(y, z).\n\
               one(x) <- e(x, _).\n.output path.\n.output one.\n";
    let p = fox_phys::run(ra(src), &Statistics::none(), &Options::default()).unwrap();
    let tiered: Vec<&str> = p
        .tiers
        .iter()
        .enumerate()
        .filter(|(_, t)| t.is_some())
        .map(|(r, _)| p.ra.relations[r].name.as_str())
        .collect();
    assert_eq!(tiered, ["path"]);
    assert_eq!(
        p.tiers.iter().flatten().next(),
        Some(&fox_phys::Tiering { levels: 3, factor: 2 })
    );
    let opts = Options {
        disabled: vec!["tiering".into()],
        ..Options::default()
    };
    let p = fox_phys::run(ra(src), &Statistics::none(), &opts).unwrap();
    assert!(p.tiers.iter().all(Option::is_none));
}
