//! Kernels per device: CPU kernels in Rust (CUDA sources arrive with GPU support).

pub mod cpu;
