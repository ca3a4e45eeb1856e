//! CPU kernels of the neural-network layers: dense layers, activations, losses,
//! convolution, pooling, normalisation, the fused recurrent layers and the vision layers,
//! each with its backward.

pub mod basic;
pub mod conv;
pub mod rnn;
pub mod vision;

/// Registers the CPU kernels of this family.
pub(crate) fn register_kernels(k: &mut crate::kernels::Kernels) {
    basic::register_kernels(k);
    conv::register_kernels(k);
    rnn::register_kernels(k);
    vision::register_kernels(k);
}
