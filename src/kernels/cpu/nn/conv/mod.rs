//! CPU kernels of convolution, deconvolution, pooling and batch normalisation, each with
//! its backward.

mod batch;
mod batch_norm;
mod convolution;
mod deconvolution;
mod depthwise;
mod epilogue;
mod fused;
mod im2col;
mod layer;
mod packed;
mod pooling;
#[cfg(test)]
mod tests;
mod wide;
mod winograd;
pub mod workspace;

/// Registers the CPU kernels of this family.
pub(crate) fn register_kernels(k: &mut crate::kernels::Kernels) {
    batch_norm::register_kernels(k);
    convolution::register_kernels(k);
    deconvolution::register_kernels(k);
    fused::register_kernels(k);
    pooling::register_kernels(k);
}
