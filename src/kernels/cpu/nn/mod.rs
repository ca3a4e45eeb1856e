//! CPU kernels of the neural-network layers: dense layers, activations, losses,
//! convolution, pooling and normalisation, each with its backward.

pub mod basic;
pub mod conv;

/// Registers the CPU kernels of this family.
pub(crate) fn register_kernels(k: &mut crate::kernels::Kernels) {
    basic::register_kernels(k);
    conv::register_kernels(k);
}
