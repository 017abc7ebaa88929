//! `Eval`: a generated kernel per expression (see [`crate::codegen`]), compiled once per
//! process and source (PTX cached on disk), one grid-stride launch over the rows.
//!
//! Errors are those of fox-cpu, word for word: plan errors when the source is generated,
//! and data errors read back from the kernel's error word, which holds the smallest
//! failing row and its error (a row whose result does not fit the output's element type
//! counts only when no row failed otherwise, as on the CPU).

use crate::codegen::{self, Generated, BLOCK, ID_BITS, MAX_ROWS, NARROW_FLAG};
use crate::device::{Gpu, KArg};
use fox_kernel::{Elem, KExpr};
use fox_runtime::{BackendError, DevBuf, LaunchCtx};

/// Blocks per SM of the grid-stride loop.
const WAVES: u32 = 8;

/// Runs `Eval { expr, n_cols }` on `args` (columns, then dictionary tables).
pub(crate) fn eval(
    gpu: &mut Gpu,
    expr: &KExpr,
    n_cols: usize,
    args: &[&DevBuf],
    ctx: &dyn LaunchCtx,
) -> Result<Vec<DevBuf>, BackendError> {
    let n = args[0].len;
    let elems: Vec<Elem> = args.iter().map(|a| a.elem).collect();
    let g = codegen::generate_source(expr, n_cols, &elems, ctx).map_err(BackendError)?;
    if n as u64 >= MAX_ROWS {
        return Err(BackendError(format!(
            "{n} rows are more than one Eval launch can number"
        )));
    }
    let out = gpu.alloc(g.out_elem, n)?;
    if n == 0 {
        return Ok(vec![out]);
    }
    match run(gpu, &g, n_cols, args, &out, n) {
        Ok(()) => Ok(vec![out]),
        Err(e) => {
            gpu.free(out);
            Err(e)
        }
    }
}

/// One launch's buffers.
struct Launch<'a> {
    g: &'a Generated,
    n_cols: usize,
    args: &'a [&'a DevBuf],
    out: u64,
    /// The error word (0 when no row can fail).
    err: u64,
}

impl Launch<'_> {
    /// Evaluates rows `lo..hi` (see the parameter list in [`crate::codegen`]).
    fn launch(&self, gpu: &mut Gpu, lo: u64, hi: u64, probe: bool) -> Result<(), BackendError> {
        let mut ka = Vec::with_capacity(2 * self.args.len() + 5);
        for a in self.args {
            ka.push(KArg::Ptr(gpu.ptr(a)?));
        }
        for a in &self.args[self.n_cols..] {
            ka.push(KArg::U64(a.len as u64));
        }
        ka.extend([
            KArg::Ptr(self.out),
            KArg::U64(lo),
            KArg::U64(hi),
            KArg::Ptr(self.err),
            KArg::U32(u32::from(probe)),
        ]);
        let rows = usize::try_from(hi - lo).unwrap_or(usize::MAX);
        let grid = gpu.grid_for(rows, BLOCK, 4, WAVES).max(1);
        gpu.launch_generated(&self.g.source, &self.g.kernel, grid, BLOCK, 0, &ka)
    }
}

fn run(
    gpu: &mut Gpu,
    g: &Generated,
    n_cols: usize,
    args: &[&DevBuf],
    out: &DevBuf,
    n: usize,
) -> Result<(), BackendError> {
    let mut l = Launch {
        g,
        n_cols,
        args,
        out: gpu.ptr(out)?,
        err: 0,
    };
    if !g.can_fail() {
        return l.launch(gpu, 0, n as u64, false);
    }
    // err[0]: the complement of the smallest error key (0: none); err[1]: a probed value.
    let err = gpu.alloc_zeroed(Elem::U64, 2)?;
    let res = gpu.ptr(&err).and_then(|p| {
        l.err = p;
        run_checked(gpu, &l, &err, n)
    });
    gpu.free(err);
    res
}

fn run_checked(gpu: &mut Gpu, l: &Launch, err: &DevBuf, n: usize) -> Result<(), BackendError> {
    let g = l.g;
    l.launch(gpu, 0, n as u64, false)?;
    let word = gpu.read_u64(err, 0)?;
    if word == 0 {
        return Ok(());
    }
    let key = !word;
    let row = (key & !NARROW_FLAG) >> ID_BITS;
    if key & NARROW_FLAG == 0 {
        let id = (key & ((1 << ID_BITS) - 1)) as usize;
        let msg = id
            .checked_sub(1)
            .and_then(|k| g.msgs.get(k))
            .ok_or_else(|| BackendError(format!("generated kernel {} reported unknown error {id}", g.kernel)))?;
        return Err(BackendError(format!("{msg} (row {row})")));
    }
    // The value of the first row that does not fit: evaluate that row once more.
    l.launch(gpu, row, row + 1, true)?;
    let value = gpu.read_u64(err, 1)? as i64;
    Err(BackendError(format!(
        "`{}` = {value} does not fit {} (row {row})",
        g.what, g.ty
    )))
}
