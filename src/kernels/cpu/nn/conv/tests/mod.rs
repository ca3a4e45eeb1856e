//! Tests of the convolution family against MXNet 1.9.1's numbers, direct reference loops
//! and numeric gradients.

mod batch_norm;
mod convolution;
mod deconvolution;
mod fused;
mod pooling;
mod timing;

pub use crate::kernels::cpu::testing::{build, close, error_text, f64s, run_error};
use crate::ndarray::NDArray;
use crate::op::testutil::{array, f32a};
use crate::op::OpRef;

/// Deterministic test values `((i * a) % m) / 10 - off`, as the reference scripts made them.
pub fn seq(n: usize, a: usize, m: usize, off: f64) -> Vec<f64> {
    (0..n).map(|i| ((i * a) % m) as f64 / 10.0 - off).collect()
}

/// A float32 array of `seq` values.
pub fn seq32(shape: &[usize], a: usize, m: usize, off: f64) -> NDArray {
    let n = shape.iter().product();
    f32a(
        shape,
        &seq(n, a, m, off)
            .iter()
            .map(|&v| v as f32)
            .collect::<Vec<_>>(),
    )
}

/// A float64 array of `seq` values.
pub fn seq64(shape: &[usize], a: usize, m: usize, off: f64) -> NDArray {
    let n = shape.iter().product();
    array::<f64>(shape, &seq(n, a, m, off))
}

/// Runs the backward op of `op` on `inputs` with output gradient `ograd`, writing into
/// `outs` with the given requests (prefilled for `Add`).
pub fn run_backward(
    op: &OpRef,
    inputs: &[NDArray],
    ograd: &NDArray,
    outs: &[NDArray],
    req: &[crate::op::OpReq],
) {
    let fwd = crate::imperative::invoke(op, inputs, None, None, true).unwrap();
    run_backward_after(op, inputs, &fwd, ograd, outs, req);
}

/// Runs the backward op of `op` as `run_backward` does, given the forward outputs `fwd`.
pub fn run_backward_after(
    op: &OpRef,
    inputs: &[NDArray],
    fwd: &[NDArray],
    ograd: &NDArray,
    outs: &[NDArray],
    req: &[crate::op::OpReq],
) {
    use crate::op::Grad;
    let Grad::Op(g) = op.gradient() else {
        panic!("no gradient")
    };
    let mut bin = vec![ograd.clone()];
    bin.extend(g.inputs.iter().map(|&i| inputs[i].clone()));
    bin.extend(g.outputs.iter().map(|&o| fwd[o].clone()));
    crate::kernels::cpu::testing::run_req(&g.op, &bin, outs, req);
}
