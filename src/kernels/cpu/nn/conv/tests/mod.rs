//! Tests of the convolution family against MXNet 1.9.1's numbers, direct reference loops
//! and numeric gradients.

mod batch_norm;
mod convolution;
mod deconvolution;
mod pooling;
mod timing;

use crate::ndarray::NDArray;
use crate::op::testutil::{array, f32a};
use crate::op::{self, OpRef};

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

/// Builds operator `name` from attributes.
pub fn build(name: &str, attrs: &[(&str, &str)]) -> OpRef {
    let attrs = attrs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    op::find(name).unwrap().build(&attrs).unwrap()
}

/// Asserts two float sequences agree within `tol`.
pub fn close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "lengths differ");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "element {i}: got {g}, want {w}"
        );
    }
}

/// The float32 contents widened.
pub fn f64s(a: &NDArray) -> Vec<f64> {
    match a.dtype() {
        crate::dtype::DType::F64 => crate::op::testutil::values::<f64>(a),
        _ => crate::op::testutil::f32s(a)
            .iter()
            .map(|&v| v as f64)
            .collect(),
    }
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
    use crate::op::{Grad, OpContext};
    let fwd = crate::imperative::invoke(op, inputs, None, None, true).unwrap();
    let Grad::Op(g) = op.gradient() else {
        panic!("no gradient")
    };
    let mut bin = vec![ograd.clone()];
    bin.extend(g.inputs.iter().map(|&i| inputs[i].clone()));
    bin.extend(g.outputs.iter().map(|&o| fwd[o].clone()));
    for a in bin.iter().chain(outs) {
        a.wait_to_read().unwrap();
    }
    let ib: Vec<_> = bin.iter().map(|a| a.blob()).collect();
    let ob: Vec<_> = outs.iter().map(|a| a.blob()).collect();
    let mut ctx = OpContext::new(crate::context::Context::cpu(0), true);
    crate::kernels::run_kernel(g.op.as_ref(), &mut ctx, &ib, &ob, req).unwrap();
}
