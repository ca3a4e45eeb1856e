//! Test helpers for backward operators.

use crate::op::{Grad, Gradient, OpRef};

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
