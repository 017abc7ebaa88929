use fox_phys::{Options, PhysPlan, Statistics, PASSES};
use fox_ra::{Op, Stmt, TempId};

/// The RA plan of a program that must check cleanly.
pub fn ra(src: &str) -> fox_ra::RaPlan {
    let (ast, diags) = fox_syntax::parse(src);
    assert!(diags.iter().all(|d| !d.is_error()), "{diags:?}");
    let (core, diags) = fox_sema::check(&ast);
    let core = core.unwrap_or_else(|| panic!("{diags:?}"));
    fox_ra::plan(&core).unwrap_or_else(|e| panic!("{e}"))
}

/// The physical plan of `src` after the passes up to `last` (all when `None`).
pub fn phys_after(src: &str, last: Option<&str>, stats: &Statistics) -> PhysPlan {
    let opts = Options {
        disabled: Vec::new(),
        stop_after: last.map(str::to_string),
        join: fox_phys::JoinChoice::Auto,
        devices: 1,
    };
    fox_phys::run(ra(src), stats, &opts).unwrap()
}

/// The plan as the passes before `pass` left it and as `pass` leaves it, printed.
pub fn before_after(src: &str, pass: &str, stats: &Statistics) -> String {
    let i = PASSES.iter().position(|p| p.name() == pass).unwrap();
    let before = match i {
        0 => fox_phys::run(
            ra(src),
            stats,
            &Options {
                disabled: fox_phys::pass_names().iter().map(|s| s.to_string()).collect(),
                stop_after: None,
                join: fox_phys::JoinChoice::Auto,
                devices: 1,
            },
        )
        .unwrap(),
        _ => phys_after(src, Some(PASSES[i - 1].name()), stats),
    };
    let after = phys_after(src, Some(pass), stats);
    format!(
        "--- before {pass}\n{}--- after {pass}\n{}",
        fox_phys::print_physical(&before),
        fox_phys::print_physical(&after)
    )
}

pub const EDGE: &str = "e(x, y) -> int32(x), int32(y).\n.input e.\n";

/// The temps of `p`'s operators that `pick` accepts, in plan order.
pub fn find(p: &PhysPlan, pick: impl Fn(&Op) -> bool) -> Vec<TempId> {
    p.ra.blocks
        .iter()
        .flat_map(|b| &b.stmts)
        .filter_map(|s| match s {
            Stmt::Let { dst, op, .. } if pick(op) => Some(*dst),
            _ => None,
        })
        .collect()
}
