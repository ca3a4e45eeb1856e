//! CPU kernels of the vision layers: the spatial transformer's grid generator and
//! bilinear sampler, and region-of-interest pooling, each with its backward.

pub mod grid;
pub mod roi;
pub mod sampler;

/// Registers the CPU kernels of this family.
pub(crate) fn register_kernels(k: &mut crate::kernels::Kernels) {
    grid::register_kernels(k);
    roi::register_kernels(k);
    sampler::register_kernels(k);
}
