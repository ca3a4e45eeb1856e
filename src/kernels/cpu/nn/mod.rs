//! Neural-network layers: dense layers, activations, losses, convolution, pooling and
//! normalisation, each with its backward operator.

pub mod basic;
pub mod conv;

use crate::op::Registry;

/// Registers the network layers.
pub fn register(r: &mut Registry) {
    basic::register(r);
    conv::register(r);
}

/// Registers the CPU kernels of this family.
pub(crate) fn register_kernels(k: &mut crate::kernels::Kernels) {
    basic::register_kernels(k);
    conv::register_kernels(k);
}
