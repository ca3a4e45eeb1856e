//! GPU kernels of `GridGenerator`, `BilinearSampler` and `ROIPooling` and their backward
//! (`vision.cu`). The backward scatters add atomically into a zeroed compute-type buffer
//! that is then written or added into the gradient.

use super::launch::{float_suffix, launch_n, Args};
use super::temp::Temp;
use super::xform::cast;
use crate::cuda::memcpy::fill_bytes;
use crate::dtype::DType;
use crate::error::Result;
use crate::kernels::cpu::Blobs;
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::nn::bilinear_sampler::{BilinearSampler, BilinearSamplerBackward};
use crate::op::nn::grid_generator::{GridGenerator, GridGeneratorBackward, Transform};
use crate::op::nn::roi_pooling::{RoiPooling, RoiPoolingBackward};
use crate::op::{OpContext, OpReq, Operator};

const MODULE: &str = "vision";

/// A zeroed buffer shaped like `like` in the type its kernels accumulate in (float32 for
/// float16), added into `like` by [`Accumulator::store`].
struct Accumulator {
    temp: Temp,
    blob: TBlob,
}

impl Accumulator {
    fn new(ctx: &OpContext, like: &TBlob) -> Result<Accumulator> {
        let dtype = if like.dtype == DType::F64 {
            DType::F64
        } else {
            DType::F32
        };
        let bytes = like.size() * dtype.size();
        let temp = Temp::new(ctx, bytes.max(1))?;
        fill_bytes(ctx.device, ctx.stream, temp.ptr(), 0, bytes)?;
        let blob = TBlob::on_device(temp.ptr(), like.shape.clone(), dtype, ctx.device);
        Ok(Accumulator { temp, blob })
    }

    fn ptr(&self) -> *mut u8 {
        self.temp.ptr()
    }

    /// `out (=|+=)` the sums.
    fn store(&self, ctx: &OpContext, out: &TBlob, req: OpReq) -> Result<()> {
        cast(ctx, &self.blob, out, req)
    }
}

/// The pointer of output `i`, or null when its request is `Null`.
fn wanted(io: &Blobs, i: usize) -> *mut u8 {
    if io.req[i] == OpReq::Null {
        std::ptr::null_mut()
    } else {
        io.outputs[i].ptr()
    }
}

/// Launches grid kernel `kernel` over `out`'s elements: `out (=|+=) f(input)` for grids of
/// `grid_shape` (batch, 2, height, width).
fn launch_grid(
    ctx: &OpContext,
    kernel: &str,
    out: &TBlob,
    input: &TBlob,
    grid_shape: &[usize],
    req: OpReq,
) -> Result<()> {
    let sfx = float_suffix(kernel, out.dtype)?;
    let args = Args::new()
        .ptr(out.ptr())
        .ptr(input.ptr())
        .arg((grid_shape[0] * 2) as i64)
        .arg(grid_shape[2] as i64)
        .arg(grid_shape[3] as i64)
        .arg(i32::from(req == OpReq::Add));
    launch_n(ctx, MODULE, &format!("{kernel}_{sfx}"), out.size(), args)
}

impl super::GpuKernel for GridGenerator {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (data, out, req) = (&io.inputs[0], &io.outputs[0], io.req[0]);
        if req == OpReq::Null {
            return Ok(());
        }
        let kernel = match self.transform {
            Transform::Affine { .. } => "grid_affine",
            Transform::Warp => "grid_warp",
        };
        launch_grid(ctx, kernel, out, data, &out.shape, req)
    }
}

impl super::GpuKernel for GridGeneratorBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (og, gd, req) = (&io.inputs[0], &io.outputs[0], io.req[0]);
        if req == OpReq::Null {
            return Ok(());
        }
        let kernel = match self.0.transform {
            Transform::Affine { .. } => "grid_affine_backward",
            Transform::Warp => "grid_warp_backward",
        };
        launch_grid(ctx, kernel, gd, og, &og.shape, req)
    }
}

/// The sizes the sampler's kernels take: batch, channels, input and output height and
/// width.
fn sampler_dims(args: Args, data: &TBlob, out_hw: (usize, usize)) -> Args {
    let d = &data.shape;
    args.arg(d[0] as i64)
        .arg(d[1] as i64)
        .arg(d[2] as i64)
        .arg(d[3] as i64)
        .arg(out_hw.0 as i64)
        .arg(out_hw.1 as i64)
}

impl super::GpuKernel for BilinearSampler {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (data, grid, out, req) = (&io.inputs[0], &io.inputs[1], &io.outputs[0], io.req[0]);
        if req == OpReq::Null {
            return Ok(());
        }
        let sfx = float_suffix(self.name(), out.dtype)?;
        let args = Args::new().ptr(out.ptr()).ptr(data.ptr()).ptr(grid.ptr());
        let args = sampler_dims(args, data, (out.shape[2], out.shape[3]))
            .arg(i32::from(req == OpReq::Add));
        launch_n(
            ctx,
            MODULE,
            &format!("bilinear_forward_{sfx}"),
            out.size(),
            args,
        )
    }
}

impl super::GpuKernel for BilinearSamplerBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (og, data, grid) = (&io.inputs[0], &io.inputs[1], &io.inputs[2]);
        if io.req.iter().all(|&r| r == OpReq::Null) {
            return Ok(());
        }
        let sfx = float_suffix(self.name(), data.dtype)?;
        let acc = match io.req[0] {
            OpReq::Null => None,
            _ => Some(Accumulator::new(ctx, &io.outputs[0])?),
        };
        let out_hw = (og.shape[2], og.shape[3]);
        let args = Args::new()
            .ptr(acc.as_ref().map_or(std::ptr::null_mut(), |a| a.ptr()))
            .ptr(wanted(&io, 1))
            .ptr(og.ptr())
            .ptr(data.ptr())
            .ptr(grid.ptr());
        let args = sampler_dims(args, data, out_hw).arg(i32::from(io.req[1] == OpReq::Add));
        let pixels = data.shape[0] * out_hw.0 * out_hw.1;
        launch_n(
            ctx,
            MODULE,
            &format!("bilinear_backward_{sfx}"),
            pixels,
            args,
        )?;
        match acc {
            Some(acc) => acc.store(ctx, &io.outputs[0], io.req[0]),
            None => Ok(()),
        }
    }
}

impl super::GpuKernel for RoiPooling {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req.iter().all(|&r| r == OpReq::Null) {
            return Ok(());
        }
        let (data, rois, out) = (&io.inputs[0], &io.inputs[1], &io.outputs[0]);
        let sfx = float_suffix(self.name(), data.dtype)?;
        let d = &data.shape;
        let args = Args::new()
            .ptr(wanted(&io, 0))
            .ptr(wanted(&io, 1))
            .ptr(data.ptr())
            .ptr(rois.ptr())
            .arg(out.size() as i64)
            .arg(d[0] as i64)
            .arg(d[1] as i64)
            .arg(d[2] as i64)
            .arg(d[3] as i64)
            .arg(self.pooled.0 as i64)
            .arg(self.pooled.1 as i64)
            .arg(self.spatial_scale)
            .arg(i32::from(io.req[0] == OpReq::Add));
        launch_n(ctx, MODULE, &format!("roi_pool_{sfx}"), out.size(), args)
    }
}

impl super::GpuKernel for RoiPoolingBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (og, index, gd, req) = (&io.inputs[0], &io.inputs[2], &io.outputs[0], io.req[0]);
        if req == OpReq::Null {
            return Ok(());
        }
        let sfx = float_suffix(self.name(), gd.dtype)?;
        let acc = Accumulator::new(ctx, gd)?;
        let args = Args::new()
            .ptr(acc.ptr())
            .ptr(og.ptr())
            .ptr(index.ptr())
            .arg(og.size() as i64);
        launch_n(
            ctx,
            MODULE,
            &format!("roi_pool_backward_{sfx}"),
            og.size(),
            args,
        )?;
        acc.store(ctx, gd, req)
    }
}

/// Registers the GPU kernels of this module.
pub(super) fn register_kernels(k: &mut Kernels) {
    super::add::<GridGenerator>(k);
    super::add::<GridGeneratorBackward>(k);
    super::add::<BilinearSampler>(k);
    super::add::<BilinearSamplerBackward>(k);
    super::add::<RoiPooling>(k);
    super::add::<RoiPoolingBackward>(k);
}
