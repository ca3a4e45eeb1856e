//! GPU kernels of the softmax family (`softmax.cu`): `softmax` and `log_softmax` with
//! their backward, `SoftmaxActivation`, `SoftmaxOutput` and `_backward_SoftmaxOutput`,
//! and the regression output layers (`LinearRegressionOutput`,
//! `LogisticRegressionOutput`, `MAERegressionOutput`) and `SVMOutput` with their backward.
//!
//! A softmax launch tiles the (outer, n, inner) positions as the reductions do
//! ([`tile_cols`]): the lanes of a position split its n elements and combine their
//! maxima and sums in a fixed tree, so results are the same on every run.

use super::launch::{float_suffix, launch_n, Args, BLOCK};
use super::reduce::{add_flag, dtype_code, overlaps, tile_cols};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::cpu::Blobs;
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::nn::common::Normalization;
use crate::op::nn::regression::{Reg, Regression, RegressionBackward};
use crate::op::nn::softmax::{
    Layout, Softmax, SoftmaxActivation, SoftmaxActivationBackward, SoftmaxBackward,
};
use crate::op::nn::softmax_output::{SoftmaxOutput, SoftmaxOutputBackward};
use crate::op::nn::svm_output::{SvmOutput, SvmOutputBackward};
use crate::op::{OpContext, OpReq, Operator};
use crate::shape::fmt_shape;

const MODULE: &str = "softmax";
/// Blocks of a `_backward_SoftmaxOutput` launch with `valid` normalisation, each of which
/// counts the valid labels itself.
const VALID_BLOCKS: usize = 64;

/// One softmax (or its backward) over a layout.
struct Spec<'a> {
    layout: Layout,
    temperature: f64,
    log: bool,
    /// The valid length per position, an integer array.
    lengths: Option<&'a TBlob>,
}

impl Spec<'_> {
    fn plain(layout: Layout) -> Spec<'static> {
        Spec {
            layout,
            temperature: 1.0,
            log: false,
            lengths: None,
        }
    }

    /// The shared tail of the arguments: layout, tiling, temperature, log, lengths, add.
    fn args(&self, op: &str, args: Args, cols: usize, req: OpReq) -> Result<Args> {
        let (lengths, len_code) = match self.lengths {
            Some(b) => match b.dtype {
                DType::U8 | DType::I8 | DType::I32 | DType::I64 => {
                    (b.ptr() as *const u8, dtype_code(op, b.dtype)?)
                }
                other => {
                    return Err(Error::Type(format!(
                        "{op}: length must have an integer dtype, got {other}"
                    )))
                }
            },
            None => (std::ptr::null(), -1),
        };
        let lay = self.layout;
        Ok(args
            .arg((lay.outer * lay.inner) as i64)
            .arg(lay.n as i64)
            .arg(lay.inner as i64)
            .arg(cols as i32)
            .arg(self.temperature)
            .arg(i32::from(self.log))
            .ptr(lengths)
            .arg(len_code)
            .arg(add_flag(req)))
    }

    /// Launches `kernel` over the layout's positions; nothing for an empty layout.
    fn launch(&self, ctx: &OpContext, kernel: &str, args: Args) -> Result<()> {
        let lay = self.layout;
        if lay.outer * lay.n * lay.inner == 0 {
            return Ok(());
        }
        let cols = self.cols();
        launch_n(
            ctx,
            MODULE,
            kernel,
            (lay.outer * lay.inner).div_ceil(cols) * BLOCK as usize,
            args,
        )
    }

    fn cols(&self) -> usize {
        let lay = self.layout;
        tile_cols(lay.n, (lay.inner > 1).then_some(lay.inner))
    }
}

/// `out (=|+=)` the softmax of `x` as `spec` says. `x` may be `out` itself (same dtype).
fn forward(
    ctx: &OpContext,
    op: &str,
    spec: &Spec,
    x: &TBlob,
    out: &TBlob,
    req: OpReq,
) -> Result<()> {
    if req == OpReq::Null {
        return Ok(());
    }
    if overlaps(x, out) && (x.ptr() != out.ptr() || x.dtype != out.dtype) {
        return Err(Error::NotImplemented(format!(
            "{op}: on the GPU the output must be the data itself or not share memory with it"
        )));
    }
    let kernel = format!(
        "softmax_{}_{}",
        float_suffix(op, x.dtype)?,
        float_suffix(op, out.dtype)?
    );
    let args = spec.args(
        op,
        Args::new().ptr(out.ptr()).ptr(x.ptr()),
        spec.cols(),
        req,
    )?;
    spec.launch(ctx, &kernel, args)
}

/// `dx (=|+=)` the gradient of the softmax with output `y` and output gradient `g`.
fn backward(
    ctx: &OpContext,
    op: &str,
    spec: &Spec,
    g: &TBlob,
    y: &TBlob,
    dx: &TBlob,
    req: OpReq,
) -> Result<()> {
    if req == OpReq::Null {
        return Ok(());
    }
    if g.dtype != y.dtype {
        return Err(Error::Type(format!(
            "{op}: the output gradient ({}) and the output ({}) must share a dtype",
            g.dtype, y.dtype
        )));
    }
    let kernel = format!(
        "softmax_backward_{}_{}",
        float_suffix(op, y.dtype)?,
        float_suffix(op, dx.dtype)?
    );
    let args = spec.args(
        op,
        Args::new().ptr(dx.ptr()).ptr(g.ptr()).ptr(y.ptr()),
        spec.cols(),
        req,
    )?;
    spec.launch(ctx, &kernel, args)
}

/// A plain softmax for the ops whose output must not share memory with the data.
fn plain_forward(ctx: &OpContext, op: &str, layout: Layout, io: &Blobs) -> Result<()> {
    let (x, out) = (&io.inputs[0], &io.outputs[0]);
    if io.req[0] != OpReq::Null && overlaps(x, out) {
        return Err(Error::Runtime(format!(
            "{op}: the output must not share memory with the data"
        )));
    }
    if x.dtype != out.dtype {
        return Err(Error::Type(format!(
            "{op}: the output ({}) must have the data's dtype ({})",
            out.dtype, x.dtype
        )));
    }
    forward(ctx, op, &Spec::plain(layout), x, out, io.req[0])
}

impl super::GpuKernel for Softmax {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let p = &self.0;
        let spec = Spec {
            layout: p.layout(&io.inputs[0].shape)?,
            temperature: p.temperature,
            log: p.log,
            lengths: p.use_length.then(|| &io.inputs[1]),
        };
        forward(ctx, p.name, &spec, &io.inputs[0], &io.outputs[0], io.req[0])
    }
}

impl super::GpuKernel for SoftmaxBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let p = &self.p;
        let spec = Spec {
            layout: p.layout(&io.inputs[1].shape)?,
            temperature: p.temperature,
            log: p.log,
            lengths: p.use_length.then(|| &io.inputs[self.n_inputs() - 1]),
        };
        let (g, y) = (&io.inputs[0], &io.inputs[1]);
        backward(ctx, self.name, &spec, g, y, &io.outputs[0], io.req[0])
    }
}

impl super::GpuKernel for SoftmaxActivation {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let layout = self.layout(&io.inputs[0].shape)?;
        plain_forward(ctx, self.name(), layout, &io)
    }
}

impl super::GpuKernel for SoftmaxActivationBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let fwd = SoftmaxActivation {
            channel: self.channel,
        };
        let spec = Spec::plain(fwd.layout(&io.inputs[1].shape)?);
        let (g, y) = (&io.inputs[0], &io.inputs[1]);
        backward(ctx, self.name(), &spec, g, y, &io.outputs[0], io.req[0])
    }
}

impl super::GpuKernel for SoftmaxOutput {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let layout = self.layout(&io.inputs[0].shape)?;
        plain_forward(ctx, self.name(), layout, &io)
    }
}

/// `struct rsmx_softmax_output`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct OutputSpec {
    n: i64,
    inner: i64,
    positions: i64,
    ignore: i64,
    scale: f64,
    on: f64,
    off: f64,
    label_dtype: i32,
    prob_labels: i32,
    use_ignore: i32,
    smooth: i32,
    valid: i32,
    has_ograd: i32,
}

impl super::GpuKernel for SoftmaxOutputBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (dx, req) = (&io.outputs[0], io.req[0]);
        if req == OpReq::Null {
            return Ok(());
        }
        let p = &self.0;
        let k = io.inputs.len();
        let (label, y) = (&io.inputs[k - 2], &io.inputs[k - 1]);
        let lay = p.layout(&y.shape)?;
        let label_dtype = if label.dtype == DType::Bool {
            return Err(Error::Type(format!(
                "{}: label must be numeric",
                self.name()
            )));
        } else {
            dtype_code(self.name(), label.dtype)?
        };
        let prob_labels = !p.multi_output && label.shape == y.shape;
        let positions = lay.outer * lay.inner;
        if !prob_labels && label.size() < positions {
            return Err(Error::Value(format!(
                "{}: label of shape {} has fewer than the {positions} labels the data needs",
                self.name(),
                fmt_shape(&label.shape)
            )));
        }
        let og = p.out_grad.then(|| &io.inputs[0]);
        if [Some(y), og]
            .into_iter()
            .flatten()
            .any(|b| b.dtype != dx.dtype)
        {
            return Err(Error::Type(format!(
                "{}: the output and its gradients must share a dtype",
                self.name()
            )));
        }
        let total = lay.outer * lay.n * lay.inner;
        if total == 0 {
            return Ok(());
        }
        // As MXNet normalises: `valid` divides by the labels that are not ignore_label,
        // which the kernel counts.
        let denominator = match (p.multi_output, p.normalization) {
            (_, Normalization::Valid) => 1.0,
            (true, Normalization::Null) => lay.inner.max(1) as f64,
            (true, Normalization::Batch) => (lay.inner * lay.outer).max(1) as f64,
            (false, Normalization::Null) => 1.0,
            (false, Normalization::Batch) => lay.outer.max(1) as f64,
        };
        let valid = p.normalization == Normalization::Valid;
        // Label smoothing applies to one label per row, as MXNet does it.
        let alpha = if p.multi_output { 0.0 } else { p.smooth_alpha };
        let off = if lay.n > 1 {
            alpha / (lay.n - 1) as f64
        } else {
            0.0
        };
        let spec = OutputSpec {
            n: lay.n as i64,
            inner: lay.inner as i64,
            positions: positions.min(label.size()) as i64,
            ignore: p.ignore_label as i64,
            scale: p.grad_scale / denominator,
            on: 1.0 - alpha,
            off,
            label_dtype,
            prob_labels: i32::from(prob_labels),
            use_ignore: i32::from(p.use_ignore),
            smooth: i32::from(alpha > 0.0),
            valid: i32::from(valid),
            has_ograd: i32::from(og.is_some()),
        };
        let kernel = format!(
            "softmax_output_backward_{}",
            float_suffix(self.name(), dx.dtype)?
        );
        let args = Args::new()
            .ptr(dx.ptr())
            .ptr(y.ptr())
            .ptr(og.map_or(std::ptr::null(), |b| b.ptr() as *const u8))
            .ptr(label.ptr())
            .arg(total as i64)
            .arg(spec)
            .arg(add_flag(req));
        let items = if valid {
            total.min(VALID_BLOCKS * BLOCK as usize)
        } else {
            total
        };
        launch_n(ctx, MODULE, &kernel, items, args)
    }
}

fn same_dtypes(op: &str, blobs: &[&TBlob]) -> Result<DType> {
    let t = blobs[0].dtype;
    if blobs.iter().any(|b| b.dtype != t) {
        return Err(Error::Type(format!(
            "{op}: every array must share one dtype"
        )));
    }
    Ok(t)
}

/// out (=|+=) the data, or its sigmoid: the forward of the regression layers and of
/// `SVMOutput`.
fn pass_through(op: &str, ctx: &mut OpContext, io: &Blobs, logistic: bool) -> Result<()> {
    let (x, out, req) = (&io.inputs[0], &io.outputs[0], io.req[0]);
    if req == OpReq::Null {
        return Ok(());
    }
    let t = same_dtypes(op, &[x, out])?;
    if overlaps(x, out) && x.ptr() != out.ptr() {
        return Err(Error::NotImplemented(format!(
            "{op}: on the GPU the output must be the data itself or not share memory with it"
        )));
    }
    let n = out.size();
    let kernel = format!("regression_{}", float_suffix(op, t)?);
    let args = Args::new()
        .ptr(out.ptr())
        .ptr(x.ptr())
        .arg(n as i64)
        .arg(i32::from(logistic))
        .arg(add_flag(req));
    launch_n(ctx, MODULE, &kernel, n, args)
}

impl super::GpuKernel for Regression {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        pass_through(self.name(), ctx, &io, self.kind == Reg::Logistic)
    }
}

impl super::GpuKernel for SvmOutput {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        pass_through(self.name(), ctx, &io, false)
    }
}

impl super::GpuKernel for SvmOutputBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (label, y, dx, req) = (&io.inputs[0], &io.inputs[1], &io.outputs[0], io.req[0]);
        if req == OpReq::Null || dx.size() == 0 {
            return Ok(());
        }
        let t = same_dtypes(self.name(), &[label, y, dx])?;
        let cols = y.shape.last().copied().unwrap_or(1).max(1);
        let n = dx.size();
        let kernel = format!("svm_output_backward_{}", float_suffix(self.name(), t)?);
        let args = Args::new()
            .ptr(dx.ptr())
            .ptr(y.ptr())
            .ptr(label.ptr())
            .arg(n as i64)
            .arg(cols as i64)
            .arg(self.0.margin)
            .arg(self.0.regularization_coefficient)
            .arg(i32::from(self.0.use_linear))
            .arg(add_flag(req));
        launch_n(ctx, MODULE, &kernel, n, args)
    }
}

impl super::GpuKernel for RegressionBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (label, y, dx, req) = (&io.inputs[0], &io.inputs[1], &io.outputs[0], io.req[0]);
        if req == OpReq::Null {
            return Ok(());
        }
        let t = same_dtypes(self.name(), &[label, y, dx])?;
        let per_example = match label.shape.first() {
            Some(&n) if n > 0 => label.size() / n,
            _ => 1,
        };
        let scale = self.grad_scale / per_example.max(1) as f64;
        let n = dx.size();
        let kernel = format!("regression_backward_{}", float_suffix(self.name(), t)?);
        let args = Args::new()
            .ptr(dx.ptr())
            .ptr(y.ptr())
            .ptr(label.ptr())
            .arg(n as i64)
            .arg(i32::from(self.kind == Reg::Mae))
            .arg(scale)
            .arg(add_flag(req));
        launch_n(ctx, MODULE, &kernel, n, args)
    }
}

/// Registers the GPU kernels of this module.
pub(crate) fn register_kernels(k: &mut Kernels) {
    super::add::<Softmax>(k);
    super::add::<SoftmaxBackward>(k);
    super::add::<SoftmaxActivation>(k);
    super::add::<SoftmaxActivationBackward>(k);
    super::add::<SoftmaxOutput>(k);
    super::add::<SoftmaxOutputBackward>(k);
    super::add::<Regression>(k);
    super::add::<RegressionBackward>(k);
    super::add::<SvmOutput>(k);
    super::add::<SvmOutputBackward>(k);
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_output_spec_matches_the_kernels_struct() {
        // Seven 8-byte fields, then six ints: 80 bytes, as `struct rsmx_softmax_output`.
        assert_eq!(std::mem::size_of::<super::OutputSpec>(), 80);
        let src = crate::cuda::sources::module("softmax").expect("embedded");
        let body = src
            .split("struct rsmx_softmax_output {")
            .nth(1)
            .unwrap()
            .split("};")
            .next()
            .unwrap();
        let fields: Vec<&str> = body
            .lines()
            .map(|l| l.split("//").next().unwrap().trim())
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(
            fields,
            [
                "rsmx_i64 n, inner;",
                "rsmx_i64 positions;",
                "rsmx_i64 ignore;",
                "double scale;",
                "double on, off;",
                "int label_dtype;",
                "int prob_labels;",
                "int use_ignore;",
                "int smooth;",
                "int valid;",
                "int has_ograd;",
            ]
        );
    }
}
