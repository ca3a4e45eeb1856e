//! GPU kernels of the activation layers and dropout (`nn.cu`): `Activation`, `LeakyReLU`
//! and `Dropout`, each with its backward.

use super::launch::{float_suffix, launch_n, Args, BLOCK};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::cpu::Blobs;
use crate::ndarray::TBlob;
use crate::op::nn::activation::{Act, Activation, ActivationBackward};
use crate::op::nn::dropout::{Dropout, DropoutBackward};
use crate::op::nn::leaky_relu::{prelu_layout, Kind, LeakyRelu, LeakyReluBackward};
use crate::op::{OpContext, OpReq, Operator};
use half::f16;
use rand::RngCore;

const MODULE: &str = "nn";
/// Most dimensions a dropout draw shape describes (`RSMX_NN_MAX_DIM`).
const MAX_DIM: usize = 8;

// The block reductions keep one value per thread in a shared array of at most 1024 and
// halve the block each step.
const _: () = assert!(BLOCK.is_power_of_two() && BLOCK <= 1024);

fn add_flag(req: OpReq) -> i32 {
    i32::from(req == OpReq::Add)
}

/// The kernel's code of an activation (`enum rsmx_act`).
fn act_code(act: Act) -> i32 {
    match act {
        Act::Relu => 0,
        Act::Sigmoid => 1,
        Act::Tanh => 2,
        Act::SoftRelu => 3,
        Act::SoftSign => 4,
    }
}

/// `f64` rounded to the storage type of `dtype` (float16 directly from `f64`, as the CPU
/// converts), so that the kernel's conversion is exact.
fn rounded_to(dtype: DType, v: f64) -> f64 {
    match dtype {
        DType::F16 => f16::from_f64(v).to_f64(),
        DType::F32 => v as f32 as f64,
        _ => v,
    }
}

/// Runs `kernel_<dtype>(out, a, b, n, code, add)`-shaped element-wise kernels.
fn two_inputs(
    ctx: &OpContext,
    kernel: &str,
    a: &TBlob,
    b: Option<&TBlob>,
    out: &TBlob,
    req: OpReq,
    rest: impl FnOnce(Args) -> Args,
) -> Result<()> {
    if req == OpReq::Null {
        return Ok(());
    }
    let name = format!("{kernel}_{}", float_suffix(kernel, out.dtype)?);
    let n = out.size();
    let mut args = Args::new().ptr(out.ptr()).ptr(a.ptr());
    if let Some(b) = b {
        args = args.ptr(b.ptr());
    }
    launch_n(ctx, MODULE, &name, n, rest(args.arg(n as i64)))
}

impl super::GpuKernel for Activation {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (code, add) = (act_code(self.0), add_flag(io.req[0]));
        two_inputs(
            ctx,
            "activation",
            &io.inputs[0],
            None,
            &io.outputs[0],
            io.req[0],
            |a| a.arg(code).arg(add),
        )
    }
}

impl super::GpuKernel for ActivationBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (code, add) = (act_code(self.0), add_flag(io.req[0]));
        two_inputs(
            ctx,
            "activation_backward",
            &io.inputs[0],
            Some(&io.inputs[1]),
            &io.outputs[0],
            io.req[0],
            |a| a.arg(code).arg(add),
        )
    }
}

/// The kernel's code and slope of a kind without a slope array (`enum rsmx_leaky`).
fn leaky_code(kind: Kind) -> (i32, f64) {
    match kind {
        Kind::Leaky(s) => (0, s),
        Kind::Elu(s) => (1, s),
        Kind::Selu => (2, 0.0),
        Kind::Gelu => (3, 0.0),
        Kind::Prelu | Kind::Rrelu { .. } => unreachable!("slope kinds use their arrays"),
    }
}

/// `prelu_<dtype>` or `prelu_backward_<dtype>`: x, or the gradient, where the input is
/// positive and times the slope of its channel elsewhere (rrelu: one slope per element).
#[allow(clippy::too_many_arguments)]
fn slope_kernel(
    ctx: &OpContext,
    kernel: &str,
    g: Option<&TBlob>,
    x: &TBlob,
    slopes: &TBlob,
    (channels, inner): (usize, usize),
    out: &TBlob,
    req: OpReq,
) -> Result<()> {
    if req == OpReq::Null {
        return Ok(());
    }
    let name = format!("{kernel}_{}", float_suffix(kernel, out.dtype)?);
    let n = out.size();
    let mut args = Args::new().ptr(out.ptr());
    if let Some(g) = g {
        args = args.ptr(g.ptr());
    }
    let args = args
        .ptr(x.ptr())
        .ptr(slopes.ptr())
        .arg(n as i64)
        .arg(channels as i64)
        .arg(inner as i64)
        .arg(add_flag(req));
    launch_n(ctx, MODULE, &name, n, args)
}

/// A 64-bit seed for one launch's counter-based draws, from the device's generator.
fn draw_seed(ctx: &mut OpContext, op: &str) -> Result<u64> {
    Ok(ctx.rng(op)?.next_u64())
}

impl super::GpuKernel for LeakyRelu {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (x, out, req) = (&io.inputs[0], &io.outputs[0], io.req[0]);
        match self.0 {
            Kind::Prelu => {
                let layout = prelu_layout(&x.shape, &io.inputs[1].shape)?;
                slope_kernel(ctx, "prelu", None, x, &io.inputs[1], layout, out, req)
            }
            Kind::Rrelu { lower, upper } => {
                let mask = &io.outputs[1];
                let sfx = float_suffix(self.name(), mask.dtype)?;
                let n = mask.size();
                let (seed, lo, hi) = if ctx.is_train {
                    (draw_seed(ctx, self.name())?, lower, upper)
                } else {
                    let mid = rounded_to(mask.dtype, (lower + upper) / 2.0);
                    (0, mid, mid)
                };
                let args = Args::new()
                    .ptr(mask.ptr())
                    .arg(n as i64)
                    .arg(seed)
                    .arg(lo)
                    .arg(hi);
                launch_n(ctx, MODULE, &format!("rrelu_draw_{sfx}"), n, args)?;
                slope_kernel(ctx, "prelu", None, x, mask, (n, 1), out, req)
            }
            kind => {
                let (code, slope) = leaky_code(kind);
                let add = add_flag(req);
                two_inputs(ctx, "leaky", x, None, out, req, |a| {
                    a.arg(code).arg(add).arg(slope)
                })
            }
        }
    }
}

impl super::GpuKernel for LeakyReluBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (g, x) = (&io.inputs[0], &io.inputs[1]);
        let (out, req) = (&io.outputs[0], io.req[0]);
        match self.0 {
            Kind::Prelu => {
                let gamma = &io.inputs[2];
                let layout = prelu_layout(&x.shape, &gamma.shape)?;
                slope_kernel(ctx, "prelu_backward", Some(g), x, gamma, layout, out, req)?;
                prelu_gamma_backward(ctx, g, x, layout, &io.outputs[1], io.req[1])
            }
            Kind::Rrelu { .. } => {
                let n = x.size();
                let mask = &io.inputs[2];
                slope_kernel(ctx, "prelu_backward", Some(g), x, mask, (n, 1), out, req)
            }
            kind => {
                let (code, slope) = leaky_code(kind);
                let add = add_flag(req);
                two_inputs(ctx, "leaky_backward", g, Some(x), out, req, |a| {
                    a.arg(code).arg(add).arg(slope)
                })
            }
        }
    }
}

/// prelu's gamma gradient: one block per channel sums `x * g` over the channel's
/// non-positive inputs in a fixed order (deterministic).
fn prelu_gamma_backward(
    ctx: &OpContext,
    g: &TBlob,
    x: &TBlob,
    (channels, inner): (usize, usize),
    out: &TBlob,
    req: OpReq,
) -> Result<()> {
    if req == OpReq::Null {
        return Ok(());
    }
    let sfx = float_suffix("prelu", out.dtype)?;
    let args = Args::new()
        .ptr(out.ptr())
        .ptr(g.ptr())
        .ptr(x.ptr())
        .arg(x.size() as i64)
        .arg(channels as i64)
        .arg(inner as i64)
        .arg(add_flag(req));
    // `BLOCK` items per channel: one block each (the grid may be capped; blocks loop).
    let items = channels * BLOCK as usize;
    launch_n(
        ctx,
        MODULE,
        &format!("prelu_gamma_backward_{sfx}"),
        items,
        args,
    )
}

/// `struct rsmx_draw_shape`: the data's shape and the draw's strides over it.
#[repr(C)]
#[derive(Clone, Copy)]
struct DrawShape {
    ndim: i32,
    shape: [i64; MAX_DIM],
    stride: [i64; MAX_DIM],
}

impl Dropout {
    /// Where each element's draw comes from; `ndim` 0 when every element draws its own.
    fn draw_desc(&self, shape: &[usize]) -> Result<DrawShape> {
        let mut d = DrawShape {
            ndim: 0,
            shape: [1; MAX_DIM],
            stride: [0; MAX_DIM],
        };
        let small = self.draw_shape(shape)?;
        if small.as_slice() == shape {
            return Ok(d);
        }
        if shape.len() > MAX_DIM {
            return Err(Error::Value(format!(
                "Dropout: axes on the GPU support at most {MAX_DIM} dimensions, got {}",
                shape.len()
            )));
        }
        d.ndim = shape.len() as i32;
        let mut step = 1i64;
        for k in (0..shape.len()).rev() {
            d.shape[k] = shape[k] as i64;
            d.stride[k] = if small[k] == 1 { 0 } else { step };
            step *= small[k] as i64;
        }
        Ok(d)
    }
}

fn req_code(req: OpReq) -> i32 {
    match req {
        OpReq::Null => 0,
        OpReq::Add => 2,
        OpReq::Write | OpReq::WriteInplace => 1,
    }
}

/// `dropout_backward_<dtype>`: out (=|+=) g * mask, or g when not `masked`.
fn scale_by_mask(
    ctx: &OpContext,
    g: &TBlob,
    mask: Option<&TBlob>,
    out: &TBlob,
    req: OpReq,
) -> Result<()> {
    if req == OpReq::Null || (req != OpReq::Add && mask.is_none() && g.ptr() == out.ptr()) {
        return Ok(());
    }
    let sfx = float_suffix("Dropout", out.dtype)?;
    let n = out.size();
    let args = Args::new()
        .ptr(out.ptr())
        .ptr(g.ptr())
        .ptr(mask.map_or(g.ptr(), |m| m.ptr()))
        .arg(n as i64)
        .arg(i32::from(mask.is_some()))
        .arg(add_flag(req));
    launch_n(ctx, MODULE, &format!("dropout_backward_{sfx}"), n, args)
}

impl super::GpuKernel for Dropout {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (x, out, mask) = (&io.inputs[0], &io.outputs[0], &io.outputs[1]);
        if !self.active(ctx.is_train) {
            return scale_by_mask(ctx, x, None, out, io.req[0]);
        }
        let sfx = float_suffix(self.name(), x.dtype)?;
        let desc = self.draw_desc(&x.shape)?;
        let keep = 1.0 - self.p;
        // Keep when a uniform 32-bit draw falls below keep·2³², as the CPU does; with
        // keep = 0 the mask is 0·∞ = NaN, as MXNet's.
        let threshold = (keep * 4_294_967_296.0) as u64;
        let scale = rounded_to(x.dtype, 1.0 / keep);
        let seed = draw_seed(ctx, self.name())?;
        let n = x.size();
        let args = Args::new()
            .ptr(out.ptr())
            .ptr(mask.ptr())
            .ptr(x.ptr())
            .arg(n as i64)
            .arg(seed)
            .arg(threshold)
            .arg(scale)
            .arg(desc)
            .arg(req_code(io.req[0]));
        launch_n(ctx, MODULE, &format!("dropout_{sfx}"), n, args)
    }
}

impl super::GpuKernel for DropoutBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let masked = ctx.is_train || self.always;
        let mask = masked.then_some(&io.inputs[1]);
        scale_by_mask(ctx, &io.inputs[0], mask, &io.outputs[0], io.req[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enum_names(name: &str) -> Vec<String> {
        let src = crate::cuda::sources::module(MODULE).expect("embedded");
        src.split(&format!("enum rsmx_{name} {{"))
            .nth(1)
            .unwrap()
            .split("};")
            .next()
            .unwrap()
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    }

    #[test]
    fn codes_follow_the_kernel_enums() {
        let acts = enum_names("act");
        for (act, want) in [
            (Act::Relu, "RSMX_ACT_RELU"),
            (Act::Sigmoid, "RSMX_ACT_SIGMOID"),
            (Act::Tanh, "RSMX_ACT_TANH"),
            (Act::SoftRelu, "RSMX_ACT_SOFTRELU"),
            (Act::SoftSign, "RSMX_ACT_SOFTSIGN"),
        ] {
            assert_eq!(acts[act_code(act) as usize], want);
        }
        let leaky = enum_names("leaky");
        for (kind, want) in [
            (Kind::Leaky(0.1), "RSMX_LEAKY_LEAKY"),
            (Kind::Elu(0.1), "RSMX_LEAKY_ELU"),
            (Kind::Selu, "RSMX_LEAKY_SELU"),
            (Kind::Gelu, "RSMX_LEAKY_GELU"),
        ] {
            assert_eq!(leaky[leaky_code(kind).0 as usize], want);
        }
    }

    #[test]
    fn draw_strides_share_the_dropped_axes() {
        let d = Dropout {
            p: 0.5,
            always: false,
            axes: vec![1],
        };
        let desc = d.draw_desc(&[4, 3, 5]).unwrap();
        assert_eq!(desc.ndim, 3);
        assert_eq!(&desc.shape[..3], &[4, 3, 5]);
        assert_eq!(&desc.stride[..3], &[5, 0, 1]);
        let plain = Dropout {
            axes: vec![],
            ..d.clone()
        };
        assert_eq!(plain.draw_desc(&[4, 3]).unwrap().ndim, 0);
    }
}
