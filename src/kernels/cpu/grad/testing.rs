//! Test helpers for backward operators: run an op with chosen output requests.

use crate::ndarray::NDArray;
use crate::op::{Grad, Gradient, OpContext, OpRef, OpReq};

/// Runs `op`'s kernel now on `inputs` into the existing `outputs` with `req`.
pub fn run_req(op: &OpRef, inputs: &[NDArray], outputs: &[NDArray], req: &[OpReq]) {
    for a in inputs.iter().chain(outputs) {
        a.wait_to_write().unwrap();
    }
    let mut ctx = OpContext::new(crate::context::Context::cpu(0), true);
    let ib: Vec<_> = inputs.iter().map(|a| a.blob()).collect();
    let ob: Vec<_> = outputs.iter().map(|a| a.blob()).collect();
    crate::kernels::run_kernel(op.as_ref(), &mut ctx, &ib, &ob, req)
        .unwrap_or_else(|e| panic!("{}: {e}", op.name()));
}

/// The backward op of `op`, which must have one.
pub fn backward_of(op: &OpRef) -> Gradient {
    match op.gradient() {
        Grad::Op(g) => g,
        _ => panic!("{}: no backward op", op.name()),
    }
}

/// True if the gradient of `op` is declared zero.
pub fn is_zero(op: &OpRef) -> bool {
    matches!(op.gradient(), Grad::Zero)
}

/// Builds operator `name` from `attrs`.
pub fn build(name: &str, attrs: &[(&str, &str)]) -> OpRef {
    crate::op::testutil::build(name, attrs)
}
