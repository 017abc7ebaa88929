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

use fox_cuda::testing::{describe, first_mismatch, run_on, value_at, Needs, Ready};
use fox_cuda::CudaBackend;
use fox_kernel::Kernel;
use fox_runtime::{HostCol, LaunchCtx};
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
mod exchange;
mod fused;
mod harness;
mod hash;
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
    ("exchange", exchange::TESTS),
    ("fused", fused::TESTS),
    ("harness", harness::TESTS),
    ("hash", hash::TESTS),
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

/// Runs `kernel` on `args` on the CPU and on `gpu`, and panics with the kernel, the case,
/// the argument shapes and the first mismatching output index when the outputs differ
/// (or one side fails and the other does not). Returns the CPU's outputs, or its error
/// message when both failed.
pub fn compare(
    gpu: &mut CudaBackend,
    kernel: &Kernel,
    args: &[HostCol],
    ctx: &dyn LaunchCtx,
    case: &str,
) -> Result<Vec<HostCol>, String> {
    let mut cpu = fox_cpu::CpuBackend::new();
    let want = run_on(&mut cpu, kernel, args, ctx);
    let got = run_on(gpu, kernel, args, ctx);
    let mut kdesc = format!("{kernel:?}");
    if kdesc.len() > 300 {
        let mut cut = 300;
        while !kdesc.is_char_boundary(cut) {
            cut -= 1;
        }
        kdesc.truncate(cut);
        kdesc.push('…');
    }
    let shapes: Vec<String> = args.iter().map(describe).collect();
    let head = format!("{} [{kdesc}] case {case}, args [{}]", kernel.name(), shapes.join(", "));
    match (want, got) {
        (Ok(w), Ok(g)) => {
            if w.len() != g.len() {
                panic!("{head}: cpu gives {} outputs, gpu {}", w.len(), g.len());
            }
            for (o, (a, b)) in w.iter().zip(&g).enumerate() {
                if a.elem() != b.elem() || a.len() != b.len() {
                    panic!(
                        "{head}: output {o} is {} on the cpu, {} on the gpu",
                        describe(a),
                        describe(b)
                    );
                }
                if let Some((i, count)) = first_mismatch(a, b) {
                    panic!(
                        "{head}: output {o} ({}) differs at {count} indices, first at index {i}: cpu {}, gpu {}",
                        describe(a),
                        value_at(a, i),
                        value_at(b, i)
                    );
                }
            }
            Ok(w)
        }
        (Err(w), Err(_)) => Err(w),
        (Ok(_), Err(g)) => panic!("{head}: the cpu succeeds, the gpu fails: {g}"),
        (Err(w), Ok(_)) => panic!("{head}: the cpu fails ({w}), the gpu succeeds"),
    }
}
