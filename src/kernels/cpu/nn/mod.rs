//! CPU kernels of the neural-network layers: dense layers, activations, losses,
//! convolution, pooling, normalisation and the fused recurrent layers, each with its
//! backward.

pub mod basic;
pub mod conv;
pub mod rnn;

/// Registers the CPU kernels of this family.
pub(crate) fn register_kernels(k: &mut crate::kernels::Kernels) {
    basic::register_kernels(k);
    conv::register_kernels(k);
    rnn::register_kernels(k);
}
