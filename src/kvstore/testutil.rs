//! Arrays for the store's unit tests: filled, counted, and read back.

use crate::context::Context;
use crate::dtype::DType;
use crate::ndarray::NDArray;

/// An f32 array of `shape` on `ctx`, every element `v`.
pub fn full(shape: &[usize], v: f32, ctx: Context) -> NDArray {
    let n: usize = shape.iter().product();
    from_values(shape, &vec![v; n], ctx)
}

/// The f32 array `[0, 1, ..., n - 1]` on `ctx`.
pub fn iota(n: usize, ctx: Context) -> NDArray {
    let vals: Vec<f32> = (0..n).map(|i| i as f32).collect();
    from_values(&[n], &vals, ctx)
}

fn from_values(shape: &[usize], vals: &[f32], ctx: Context) -> NDArray {
    let a = NDArray::empty(shape, DType::F32, ctx).unwrap();
    a.write_bytes(vals.iter().copied().flat_map(f32::to_le_bytes).collect())
        .unwrap();
    a
}

/// The elements of an f32 array, once its pending writes are done.
pub fn values(a: &NDArray) -> Vec<f32> {
    a.to_bytes()
        .unwrap()
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// `cpu(0)` to `cpu(n - 1)`.
pub fn cpus(n: i32) -> Vec<Context> {
    (0..n).map(Context::cpu).collect()
}
