//! CPU kernels of the fused optimizer updates: one element-wise pass that updates a
//! weight and its optimizer states in place, as MXNet 1.9.1 computes them.

pub use crate::op::optim::{update_op, Hyper, Kind, UpdateOp};

pub mod elem;
mod lamb;
mod op;
#[cfg(test)]
mod tests;

/// Registers the CPU kernels of this family.
pub(crate) fn register_kernels(k: &mut crate::kernels::Kernels) {
    op::register_kernels(k);
    lamb::register_kernels(k);
}
