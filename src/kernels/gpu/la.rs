//! GPU kernels of the factorization `_linalg_` operators and their backward operators
//! (`la.cu`): the routines of the CPU kernels, a thread per matrix, with workspace from
//! the pool; failed factorizations are read back and raised as on the CPU.

use super::launch::{launch_n, Args};
use super::temp::Temp;
use super::xform::copy_same;
use crate::cuda::memcpy::device_to_host;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::cpu::Blobs;
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::la_factor::{LaKind, LaOp};
use crate::op::{OpContext, OpReq, Operator};

const MODULE: &str = "la";

/// What one kernel of `la.cu` needs per matrix besides its arrays: workspace elements of
/// the element type, pivot slots and a status word (see `la.cu`'s header).
struct Needs {
    work: usize,
    ipiv: usize,
    info: bool,
}

impl LaOp {
    /// The kernel's name (without dtype suffix) and its per-matrix needs.
    fn gpu_kernel(&self, m: usize, n: usize) -> (&'static str, Needs) {
        let need = |work, ipiv, info| Needs { work, ipiv, info };
        match (self.kind, self.backward) {
            (LaKind::Potrf, false) => ("la_potrf", need(0, 0, true)),
            (LaKind::Potri, false) => ("la_potri", need(0, 0, true)),
            (LaKind::Trsm, false) => ("la_trsm", need(0, 0, false)),
            (LaKind::Trmm, false) => ("la_trmm", need(0, 0, false)),
            (LaKind::Inverse, false) => ("la_inverse", need(n * n, n, true)),
            (LaKind::Det, false) => ("la_det", need(n * n, n, false)),
            (LaKind::Slogdet, false) => ("la_slogdet", need(n * n, n, false)),
            (LaKind::Gelqf, false) => ("la_gelqf", need(m, 0, false)),
            (LaKind::Syevd, false) => ("la_syevd", need(n * n, 0, false)),
            (LaKind::Potrf, true) => ("la_potrf_bwd", need(0, 0, false)),
            (LaKind::Potri, true) => ("la_potri_bwd", need(0, 0, false)),
            (LaKind::Trsm, true) => ("la_trsm_bwd", need(0, 0, false)),
            (LaKind::Trmm, true) => ("la_trmm_bwd", need(0, 0, false)),
            (LaKind::Gelqf, true) => ("la_gelqf_bwd", need(m * m, 0, false)),
            (LaKind::Syevd, true) => ("la_syevd_bwd", need(n * n, 0, false)),
            (LaKind::Inverse, true) => ("la_inverse_bwd", need(n * n, 0, false)),
            (LaKind::Det, true) => ("la_det_bwd", need(n * n, n, false)),
            (LaKind::Slogdet, true) => ("la_slogdet_bwd", need(n * n, n, false)),
        }
    }

    /// The kernel's arguments after its outputs: the arrays it reads (in its own order,
    /// from the op's inputs), then sizes and flags.
    fn gpu_args(&self, args: Args, ins: &[TBlob], batch: usize, m: usize, n: usize) -> Args {
        let p = |args: Args, i: usize| args.ptr(ins[i].ptr());
        let (batch, m, n) = (batch as i64, m as i64, n as i64);
        let flags = |args: Args| {
            args.arg(i32::from(self.transpose))
                .arg(i32::from(self.rightside))
                .arg(i32::from(self.lower))
                .arg(self.alpha)
        };
        match (self.kind, self.backward) {
            (LaKind::Potrf | LaKind::Potri, false) => {
                p(args, 0).arg(batch).arg(n).arg(i32::from(self.lower))
            }
            (LaKind::Trsm | LaKind::Trmm, false) => {
                flags(p(p(args, 0), 1).arg(batch).arg(m).arg(n))
            }
            (LaKind::Gelqf, false) => p(args, 0).arg(batch).arg(m).arg(n),
            (_, false) => p(args, 0).arg(batch).arg(n),
            // Backward inputs: (head gradient, B) and so on, as `LaOp::gradient` arranges
            // them; the kernels take the factors first.
            (LaKind::Potrf, true) => p(p(args, 1), 0)
                .arg(batch)
                .arg(n)
                .arg(i32::from(self.lower)),
            (LaKind::Potri, true) => p(p(p(args, 1), 2), 0)
                .arg(batch)
                .arg(n)
                .arg(i32::from(self.lower)),
            (LaKind::Trsm | LaKind::Trmm, true) => {
                flags(p(p(p(args, 1), 2), 0).arg(batch).arg(m).arg(n))
            }
            (LaKind::Gelqf, true) => p(p(p(p(args, 2), 3), 0), 1).arg(batch).arg(m).arg(n),
            (LaKind::Syevd, true) => p(p(p(p(args, 2), 3), 0), 1).arg(batch).arg(n),
            (LaKind::Inverse, true) => p(p(args, 1), 0).arg(batch).arg(n),
            (LaKind::Det | LaKind::Slogdet, true) => p(p(p(args, 1), 2), 0).arg(batch).arg(n),
        }
    }

    /// How many threads the kernel runs: one per matrix, or for the forward `trsm` and
    /// `trmm` one per column (row, from the right) of B.
    fn gpu_threads(&self, batch: usize, m: usize, n: usize) -> usize {
        match (self.kind, self.backward) {
            (LaKind::Trsm | LaKind::Trmm, false) => batch * if self.rightside { m } else { n },
            _ => batch,
        }
    }
}

/// A scratch array on the op's device, with a blob over it.
fn scratch(ctx: &OpContext, like: &TBlob) -> Result<(Temp, TBlob)> {
    let t = Temp::new(ctx, (like.size() * like.dtype.size()).max(1))?;
    let b = TBlob::on_device(t.ptr(), like.shape.clone(), like.dtype, ctx.device);
    Ok((t, b))
}

impl super::GpuKernel for LaOp {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let name = self.name();
        let dtype = io.inputs[0].dtype;
        let sfx = match dtype {
            DType::F32 => "f32",
            DType::F64 => "f64",
            other => {
                return Err(Error::Type(format!(
                    "{name}: this operation only supports float32 and float64, got {other}"
                )))
            }
        };
        let (batch, m, n) = self.matrix_dims(
            &io.inputs.iter().map(|b| &b.shape[..]).collect::<Vec<_>>(),
            &io.outputs.iter().map(|b| &b.shape[..]).collect::<Vec<_>>(),
        );
        if batch == 0 || m == 0 || n == 0 || io.req.iter().all(|&r| r == OpReq::Null) {
            return Ok(());
        }
        // Outputs added into (or not wanted) are computed in scratch arrays first.
        let mut temps = Vec::new();
        let mut targets = Vec::new();
        for (out, &req) in io.outputs.iter().zip(io.req) {
            if matches!(req, OpReq::Add | OpReq::Null) {
                let (t, b) = scratch(ctx, out)?;
                temps.push(t);
                targets.push(b);
            } else {
                targets.push(out.clone());
            }
        }
        let (kernel, needs) = self.gpu_kernel(m, n);
        let bytes = |count: usize, size: usize| (batch * count * size).max(1);
        let work = Temp::new(ctx, bytes(needs.work, dtype.size()))?;
        let ipiv = Temp::new(ctx, bytes(needs.ipiv, 4))?;
        let info = Temp::new(ctx, bytes(usize::from(needs.info), 4))?;
        let mut args = Args::new();
        for t in &targets {
            args = args.ptr(t.ptr());
        }
        args = self.gpu_args(args, io.inputs, batch, m, n);
        // Every kernel but these takes a workspace, used or not.
        let takes_work = !matches!(
            (self.kind, self.backward),
            (LaKind::Potrf | LaKind::Trsm | LaKind::Trmm, false)
        );
        if takes_work {
            args = args.ptr(work.ptr());
        }
        if needs.ipiv > 0 {
            args = args.ptr(ipiv.ptr());
        }
        if needs.info {
            args = args.ptr(info.ptr());
        }
        let threads = self.gpu_threads(batch, m, n);
        launch_n(ctx, MODULE, &format!("{kernel}_{sfx}"), threads, args)?;
        if needs.info {
            let mut raw = vec![0u8; batch * 4];
            device_to_host(ctx.device, ctx.stream, &mut raw, info.ptr())?;
            let failed = raw
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .find(|&k| k != 0);
            if let Some(k) = failed {
                return Err(Error::Value(format!("{name}: {}", self.failure(k))));
            }
        }
        for ((out, &req), t) in io.outputs.iter().zip(io.req).zip(&targets) {
            if req == OpReq::Add {
                copy_same(ctx, name, t, out, OpReq::Add)?;
            }
        }
        Ok(())
    }
}

impl LaOp {
    /// The message of a factorization that failed at `k`, worded as on the CPU.
    fn failure(&self, k: i32) -> String {
        let what = match self.kind {
            LaKind::Potrf => "potrf failed at leading minor {k}: the input matrix is either not symmetric or not positive definite",
            LaKind::Potri => "potri failed at diagonal element {k}: the input matrix is not a Cholesky factorization obtained by a prior call of the potrf-operator",
            _ => "the input matrix is non-convertible (zero pivot {k})",
        };
        what.replace("{k}", &k.to_string())
    }
}

/// Registers the GPU kernels of this family.
pub(super) fn register_kernels(k: &mut Kernels) {
    super::add::<LaOp>(k);
}
