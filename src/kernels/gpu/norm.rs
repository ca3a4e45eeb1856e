//! GPU kernels of `BatchNorm` and its backward (`norm.cu`): per-channel sums in double,
//! one block per segment of a channel and the segments added in order (no atomics), then
//! per-channel coefficients and an element-wise pass, with the CPU kernel's semantics (saved mean and inverse standard
//! deviation, moving statistics updated by the training forward pass).

use super::launch::{launch_n, suffix, Args, BLOCK};
use super::temp::Temp;
use crate::cuda::runtime::for_context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::cpu::nn::basic::common::overlaps;
use crate::kernels::cpu::Blobs;
use crate::kernels::Kernels;
use crate::op::nn::batch_norm::{BatchNorm, BatchNormBackward, Layout};
use crate::op::{OpContext, OpReq};

const MODULE: &str = "norm";

// The block sums keep one double per thread in a shared array of RSMX_NORM_THREADS.
const _: () = assert!(BLOCK.is_power_of_two() && BLOCK <= 256);

/// The request as the kernels take it: 0 nothing, 1 write, 2 add.
fn req_code(req: OpReq) -> i32 {
    match req {
        OpReq::Null => 0,
        OpReq::Add => 2,
        _ => 1,
    }
}

/// Elements a segment of a channel's sums covers at least.
const MIN_SEGMENT: usize = 4096;

/// Parts each channel's sums are cut into: enough blocks for about two per
/// multiprocessor, none shorter than `MIN_SEGMENT`.
fn segments(ctx: &OpContext, l: &Layout) -> Result<usize> {
    let (_, dev) = for_context(ctx.device)?;
    let want = (2 * dev.sm_count() as usize).div_ceil(l.channels.max(1));
    let most = (l.outer * l.inner).div_ceil(MIN_SEGMENT);
    Ok(want.min(most).max(1))
}

/// `out[w * channels + c]` = the sum of channel `c`'s `width` partial sums in `part`,
/// over `divisor`.
fn combine(
    ctx: &OpContext,
    out: *mut u8,
    part: *mut u8,
    (channels, segments, width): (usize, usize, i32),
    divisor: f64,
) -> Result<()> {
    let args = Args::new()
        .ptr(out)
        .ptr(part)
        .arg(channels as i64)
        .arg(segments as i64)
        .arg(width)
        .arg(divisor);
    launch_n(ctx, MODULE, "bn_combine", channels, args)
}

/// The suffix of the dtypes the CPU kernel supports, with its error for others.
fn bn_suffix(op: &str, dtype: DType) -> Result<&'static str> {
    match dtype {
        DType::F32 | DType::F64 => suffix(op, dtype),
        other => Err(Error::Type(format!("{op}: dtype {other} is not supported"))),
    }
}

impl super::GpuKernel for BatchNorm {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let x = &io.inputs[0];
        if overlaps(x, &io.outputs[0]) {
            return Err(Error::Runtime(
                "BatchNorm: the output must not share memory with the data".into(),
            ));
        }
        let sfx = bn_suffix("BatchNorm", x.dtype)?;
        let l = self.layout(&x.shape)?;
        if l.channels == 0 {
            return Ok(());
        }
        let batch = self.batch_stats(ctx.is_train);
        let c = l.channels;
        let stats = Temp::new(ctx, 2 * c * 8)?;
        if batch {
            // The mean, then the variance about it, each from per-segment sums.
            let segs = segments(ctx, &l)?;
            let part = Temp::new(ctx, c * segs * 8)?;
            let m = (l.outer * l.inner).max(1) as f64;
            let kernel = format!("bn_stats_part_{sfx}");
            for (center, half) in [(std::ptr::null_mut(), 0), (stats.ptr(), c)] {
                let args = Args::new()
                    .ptr(part.ptr())
                    .ptr(x.ptr())
                    .ptr(center)
                    .arg(l.outer as i64)
                    .arg(c as i64)
                    .arg(l.inner as i64)
                    .arg(segs as i64);
                launch_n(ctx, MODULE, &kernel, c * segs * BLOCK as usize, args)?;
                let out = stats.ptr().wrapping_add(half * 8);
                combine(ctx, out, part.ptr(), (c, segs, 1), m)?;
            }
        }
        let coef = Temp::new(ctx, 2 * c * x.dtype.size())?;
        let args = Args::new()
            .ptr(coef.ptr())
            .ptr(io.outputs[1].ptr())
            .ptr(io.outputs[2].ptr())
            .ptr(io.inputs[3].ptr())
            .ptr(io.inputs[4].ptr())
            .ptr(stats.ptr())
            .ptr(io.inputs[1].ptr())
            .ptr(io.inputs[2].ptr())
            .arg(c as i64)
            .arg(self.eps)
            .arg(self.momentum)
            .arg(i32::from(self.fix_gamma))
            .arg(i32::from(batch))
            .arg(req_code(io.req[1]))
            .arg(req_code(io.req[2]));
        launch_n(ctx, MODULE, &format!("bn_coef_{sfx}"), c, args)?;
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let n = x.size();
        let args = Args::new()
            .ptr(io.outputs[0].ptr())
            .ptr(x.ptr())
            .ptr(coef.ptr())
            .arg(n as i64)
            .arg(c as i64)
            .arg(l.inner as i64)
            .arg(i32::from(io.req[0] == OpReq::Add));
        launch_n(ctx, MODULE, &format!("bn_apply_{sfx}"), n, args)
    }
}

impl super::GpuKernel for BatchNormBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let op = &self.fwd;
        let (dy, x) = (&io.inputs[0], &io.inputs[1]);
        let sfx = bn_suffix("_backward_BatchNorm", x.dtype)?;
        let l = op.layout(&x.shape)?;
        if l.channels == 0 {
            return Ok(());
        }
        let c = l.channels;
        let (gamma, mean, invstd) = (&io.inputs[2], &io.inputs[3], &io.inputs[4]);
        let sums = Temp::new(ctx, 2 * c * 8)?;
        let segs = segments(ctx, &l)?;
        let part = Temp::new(ctx, 2 * c * segs * 8)?;
        let args = Args::new()
            .ptr(part.ptr())
            .ptr(dy.ptr())
            .ptr(x.ptr())
            .ptr(mean.ptr())
            .ptr(invstd.ptr())
            .arg(l.outer as i64)
            .arg(c as i64)
            .arg(l.inner as i64)
            .arg(segs as i64);
        let items = c * segs * BLOCK as usize;
        launch_n(ctx, MODULE, &format!("bn_backward_part_{sfx}"), items, args)?;
        combine(ctx, sums.ptr(), part.ptr(), (c, segs, 2), 1.0)?;
        let coef = Temp::new(ctx, 4 * c * x.dtype.size())?;
        let count = (l.outer * l.inner).max(1) as f64;
        let args = Args::new()
            .ptr(coef.ptr())
            .ptr(io.outputs[1].ptr())
            .ptr(io.outputs[2].ptr())
            .ptr(sums.ptr())
            .ptr(gamma.ptr())
            .ptr(mean.ptr())
            .ptr(invstd.ptr())
            .arg(c as i64)
            .arg(count)
            .arg(i32::from(op.fix_gamma))
            .arg(i32::from(op.batch_stats(ctx.is_train)))
            .arg(req_code(io.req[1]))
            .arg(req_code(io.req[2]));
        launch_n(ctx, MODULE, &format!("bn_backward_coef_{sfx}"), c, args)?;
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let n = x.size();
        let args = Args::new()
            .ptr(io.outputs[0].ptr())
            .ptr(dy.ptr())
            .ptr(x.ptr())
            .ptr(coef.ptr())
            .arg(n as i64)
            .arg(c as i64)
            .arg(l.inner as i64)
            .arg(i32::from(io.req[0] == OpReq::Add));
        launch_n(ctx, MODULE, &format!("bn_backward_apply_{sfx}"), n, args)
    }
}

/// Registers the GPU kernels of `BatchNorm`.
pub(crate) fn register_kernels(k: &mut Kernels) {
    super::add::<BatchNorm>(k);
    super::add::<BatchNormBackward>(k);
}
