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
            "order",
            "rounds",
            "partitioning",
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
        },
        Options {
            disabled: Vec::new(),
            stop_after: Some("fusoin".into()),
            join: fox_phys::JoinChoice::Auto,
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
    };
    let p = fox_phys::run(ra(SRC), &Statistics::none(), &opts).unwrap();
    assert_eq!(
        p.ran,
        ["join-selection", "fusion", "order", "rounds", "partitioning", "verify"]
    );
    assert!(p.nodes.iter().all(|n| n.est.is_none()));
    assert!(fox_phys::print_physical(&p).contains("rows ?"));
}

#[test]
fn stop_after_runs_the_passes_up_to_it() {
    let p = phys_after(SRC, Some("join-selection"), &Statistics::none());
    assert_eq!(p.ran, ["estimate", "join-selection"]);
}
