//! CUDA support that needs no CUDA to build: the kernel sources compiled at run time by
//! NVRTC (from `rsmx.cuda`).

pub mod blas;
pub mod driver;
pub mod fake;
pub mod memcpy;
pub mod runtime;
pub mod sources;
pub mod staging;
pub mod sync;
