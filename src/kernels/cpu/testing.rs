//! Helpers shared by the CPU kernel tests: running a kernel directly on arrays (to
//! exercise output requests), comparing float results, and simple test arrays.

use crate::ndarray::NDArray;
use crate::op::testutil::f32a;
use crate::op::{OpContext, OpRef, OpReq};

pub use crate::op::testutil::build;

/// Runs `op`'s kernel now, in training mode, on `inputs` into the existing `outputs` with
/// the given requests.
pub fn run_req(op: &OpRef, inputs: &[NDArray], outputs: &[NDArray], req: &[OpReq]) {
    run_with(op, inputs, outputs, req, true);
}

/// Runs `op`'s kernel as `run_req` does, in training mode only if `is_train`.
pub fn run_with(
    op: &OpRef,
    inputs: &[NDArray],
    outputs: &[NDArray],
    req: &[OpReq],
    is_train: bool,
) {
    for a in inputs {
        a.wait_to_read().unwrap();
    }
    for a in outputs {
        a.wait_to_write().unwrap();
    }
    let ib: Vec<_> = inputs.iter().map(|a| a.blob()).collect();
    let ob: Vec<_> = outputs.iter().map(|a| a.blob()).collect();
    let cpu = crate::context::Context::cpu(0);
    let mut rng = crate::op::resource::HostRng::new(7, cpu);
    let mut ctx = OpContext::new(cpu, is_train);
    ctx.rng = Some(&mut rng);
    crate::kernels::run_kernel(
        op.as_ref(),
        &mut ctx,
        crate::kernels::Blobs::new(&ib, &ob, req),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", op.name()));
}

/// Runs `op`'s kernel as `run_with` does, for an executor node keeping `memo`.
pub fn run_in_node(
    op: &OpRef,
    inputs: &[NDArray],
    outputs: &[NDArray],
    req: &[OpReq],
    is_train: bool,
    memo: &crate::op::memo::KernelMemo,
) {
    let ib: Vec<_> = inputs.iter().map(|a| a.blob()).collect();
    let ob: Vec<_> = outputs.iter().map(|a| a.blob()).collect();
    let mut ctx = OpContext::new(crate::context::Context::cpu(0), is_train);
    ctx.node = Some(crate::op::memo::NodeMemo { memo, inputs });
    crate::kernels::run_kernel(
        op.as_ref(),
        &mut ctx,
        crate::kernels::Blobs::new(&ib, &ob, req),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", op.name()));
}

/// Asserts two float lists agree to `tol`.
pub fn close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "lengths: {got:?} vs {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()) || (g.is_nan() && w.is_nan()),
            "element {i}: got {g}, want {w}\n got {got:?}\nwant {want:?}"
        );
    }
}

/// The contents of a float32 array widened.
pub fn f64s(a: &NDArray) -> Vec<f64> {
    match a.dtype() {
        crate::dtype::DType::F64 => crate::op::testutil::values::<f64>(a),
        _ => crate::op::testutil::f32s(a)
            .into_iter()
            .map(f64::from)
            .collect(),
    }
}

/// A float32 array of `shape` holding 0, 1, 2, ... in row-major order.
pub fn iota(shape: &[usize]) -> NDArray {
    let n: usize = shape.iter().product();
    f32a(shape, &(0..n).map(|v| v as f32).collect::<Vec<_>>())
}

/// The message of `r`'s error; panics if `r` succeeded.
pub fn error_text<T>(r: crate::error::Result<T>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

/// The message of the error that running operator `name` with `attrs` on `inputs` gives.
pub fn run_error(name: &str, attrs: &[(&str, &str)], inputs: &[NDArray]) -> String {
    error_text(crate::op::testutil::try_run(name, attrs, inputs))
}
