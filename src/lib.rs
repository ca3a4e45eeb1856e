//! rsmx: MXNet 1.x's execution core in Rust: dependency engine, memory pool, NDArray and
//! operators, with a Python extension module (`rsmx._core`) behind the `python` feature.

/// A fast allocator for the many small allocations of the op hot path (the system one
/// under Miri, which cannot run C code).
#[cfg(not(miri))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod autograd;
pub mod context;
pub mod cuda;
pub mod custom;
pub mod dtype;
pub mod engine;
pub mod error;
pub mod executor;
pub mod graph;
pub mod imperative;
pub mod kernels;
pub mod kvstore;
pub mod ndarray;
pub mod op;
pub mod optim;
pub mod profiler;
pub mod shape;
pub mod storage;
#[cfg(test)]
mod testutil;

#[cfg(feature = "python")]
mod py;
