//! CPU kernels of the basic network layers: dense layers, activations, softmax, losses,
//! dropout and embeddings, each with its backward.

#[macro_use]
pub mod common;
pub mod activation;
pub mod ctc;
pub mod dense;
pub mod dropout;
pub mod embedding;
pub mod leaky_relu;
pub mod loss;
pub mod softmax;
pub mod softmax_kernel;
pub mod softmax_output;
pub mod special;

/// Registers the CPU kernels of this family.
pub(crate) fn register_kernels(k: &mut crate::kernels::Kernels) {
    activation::register_kernels(k);
    ctc::register_kernels(k);
    dense::register_kernels(k);
    dropout::register_kernels(k);
    embedding::register_kernels(k);
    leaky_relu::register_kernels(k);
    loss::register_kernels(k);
    softmax::register_kernels(k);
    softmax_output::register_kernels(k);
}
