//! The integration tests of fox-cuda in one test executable with its own harness
//! (`harness = false`, libtest-mimic): one module per area, each listing its tests with
//! what they need in `tests![…]`. A test whose need is missing here (no GPU, no NVRTC, no
//! g++) is reported as `ignored (no GPU: …)`, never as passed; with `FOX_REQUIRE_GPU=1` or
//! `FOX_REQUIRE_NVRTC=1` it fails instead. The command line is libtest's: a name filter,
//! `--exact`, `--skip`, `--test-threads`, `--list`.
//!
//! A test function not listed in its module's `tests![…]` is dead code, which the build
//! warns about and CI's clippy rejects; `#[test]` has no effect here (see
//! `harness::no_test_attributes`).

use fox_cuda::testing::{Needs, Ready};
use libtest_mimic::{Arguments, Completion, Failed, Trial};

/// One test of a module: its name, what it needs, its body (which panics on failure).
pub struct Test {
    pub name: &'static str,
    pub needs: Needs,
    pub run: fn(),
}

/// `tests![Gpu name, Cpu other, …]`: the tests of the module, in order.
macro_rules! tests {
    ($($needs:ident $name:ident),* $(,)?) => {
        pub const TESTS: &[crate::Test] = &[$(crate::Test {
            name: stringify!($name),
            needs: fox_cuda::testing::Needs::$needs,
            run: $name,
        }),*];
    };
}

mod compile_all;
mod end_to_end;
mod eval;
mod fused;
mod harness;
mod joins;
mod movement;
mod primitives;
mod reduce;
mod trie;

/// Every module and its tests.
const MODULES: &[(&str, &[Test])] = &[
    ("compile_all", compile_all::TESTS),
    ("end_to_end", end_to_end::TESTS),
    ("eval", eval::TESTS),
    ("fused", fused::TESTS),
    ("harness", harness::TESTS),
    ("joins", joins::TESTS),
    ("movement", movement::TESTS),
    ("primitives", primitives::TESTS),
    ("reduce", reduce::TESTS),
    ("trie", trie::TESTS),
];

fn trial(module: &str, t: &Test) -> Trial {
    let (needs, run) = (t.needs, t.run);
    Trial::ignorable_test(format!("{module}::{}", t.name), move || match needs.ready() {
        Ready::Yes => {
            run();
            Ok(Completion::Completed)
        }
        Ready::Missing(reason) => Ok(Completion::ignored_with(reason)),
        Ready::Required(msg) => Err(Failed::from(msg)),
    })
}

fn main() {
    let args = Arguments::from_args();
    let trials = MODULES
        .iter()
        .flat_map(|(module, tests)| tests.iter().map(|t| trial(module, t)))
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
