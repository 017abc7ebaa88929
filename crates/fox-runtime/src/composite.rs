//! Launching a kernel on a backend, composite kernels included: a composite kernel
//! (one `fox_kernel::expand` expands) is offered to the backend whole
//! ([`Backend::launch_composite`]), and when the backend declines it the steps of its
//! expansion run one by one, each step's temporaries freed after their last use.

use crate::backend::{Backend, BackendError, DevBuf, LaunchCtx};
use fox_kernel::{Expansion, Kernel, Operand};

/// Runs `kernel` on `args`: a composite kernel as the backend's one piece or, when it
/// declines, as its expansion; any other kernel with [`Backend::launch`]. The arguments
/// fit the kernel's contract ([`crate::check_launch`]).
pub fn launch_kernel<B: Backend + ?Sized>(
    backend: &mut B,
    kernel: &Kernel,
    args: &[&DevBuf],
    ctx: &dyn LaunchCtx,
) -> Result<Vec<DevBuf>, BackendError> {
    let Some(expansion) = fox_kernel::expand(kernel, args.len()) else {
        return backend.launch(kernel, args, ctx);
    };
    if let Some(outs) = backend.launch_composite(kernel, args, ctx)? {
        return Ok(outs);
    }
    run_expansion(backend, kernel, &expansion, args, ctx)
}

/// The steps of `expansion` of the composite `kernel`. An error of a step is the
/// composite's: `kernel NAME: CONTEXT MESSAGE`, the step's own kernel name left out.
fn run_expansion<B: Backend + ?Sized>(
    backend: &mut B,
    kernel: &Kernel,
    expansion: &Expansion,
    args: &[&DevBuf],
    ctx: &dyn LaunchCtx,
) -> Result<Vec<DevBuf>, BackendError> {
    let steps = &expansion.steps;
    // The last step that reads each step's outputs (`None`: no step does); the
    // composite's outputs are not freed here.
    let mut last_use: Vec<Option<usize>> = vec![None; steps.len()];
    for (i, s) in steps.iter().enumerate() {
        for a in &s.args {
            if let Operand::Out { step, .. } = a {
                last_use[*step] = Some(i);
            }
        }
    }
    for o in &expansion.outs {
        if let Operand::Out { step, .. } = o {
            last_use[*step] = Some(usize::MAX);
        }
    }
    let broken = || {
        BackendError(format!(
            "kernel {}: its expansion reads a value it has not computed",
            kernel.name()
        ))
    };
    let mut outs: Vec<Vec<Option<DevBuf>>> = Vec::with_capacity(steps.len());
    let res = (|| {
        for (i, s) in steps.iter().enumerate() {
            let mut refs: Vec<&DevBuf> = Vec::with_capacity(s.args.len());
            for a in &s.args {
                refs.push(match *a {
                    Operand::Arg(k) => args.get(k).copied().ok_or_else(broken)?,
                    Operand::Out { step, out } => outs
                        .get(step)
                        .and_then(|o| o.get(out))
                        .and_then(Option::as_ref)
                        .ok_or_else(broken)?,
                });
            }
            let got = backend.launch(&s.kernel, &refs, ctx).map_err(|e| {
                let prefix = format!("kernel {}: ", s.kernel.name());
                let msg = e.0.strip_prefix(&prefix).unwrap_or(&e.0);
                BackendError(format!("kernel {}: {}{msg}", kernel.name(), s.context))
            })?;
            outs.push(got.into_iter().map(Some).collect());
            for (j, bufs) in outs.iter_mut().enumerate() {
                if last_use[j].map_or(j == i, |l| l == i) {
                    for b in bufs.iter_mut().filter_map(Option::take) {
                        backend.free(b);
                    }
                }
            }
        }
        let mut result = Vec::with_capacity(expansion.outs.len());
        for o in &expansion.outs {
            let Operand::Out { step, out } = *o else {
                return Err(broken());
            };
            let b = outs.get_mut(step).and_then(|o| o.get_mut(out)).and_then(Option::take);
            result.push(b.ok_or_else(broken)?);
        }
        Ok(result)
    })();
    for b in outs.into_iter().flatten().flatten() {
        backend.free(b);
    }
    res
}
