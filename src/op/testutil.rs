//! Helpers for operator unit tests: run an op by name on small arrays and read results.

use crate::context::Context;
use crate::dtype::{DType, Element};
use crate::error::Result;
use crate::ndarray::NDArray;
use crate::op::{self, Attrs};

/// A new array on cpu(0) holding `data` with `shape`.
pub fn array<T: Element>(shape: &[usize], data: &[T]) -> NDArray {
    assert_eq!(
        shape.iter().product::<usize>(),
        data.len(),
        "test data size"
    );
    let a = NDArray::empty(shape, T::DTYPE, Context::cpu(0)).unwrap();
    let bytes: Vec<u8> = data
        .iter()
        .flat_map(|v| {
            // SAFETY: reading the bytes of a plain Copy value.
            unsafe {
                std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>())
            }
            .to_vec()
        })
        .collect();
    a.write_bytes(bytes).unwrap();
    a
}

/// Runs operator `name` with `attrs` on `inputs`; panics on error.
pub fn run(name: &str, attrs: &[(&str, &str)], inputs: &[NDArray]) -> Vec<NDArray> {
    try_run(name, attrs, inputs).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Runs operator `name` with `attrs` on `inputs`.
pub fn try_run(name: &str, attrs: &[(&str, &str)], inputs: &[NDArray]) -> Result<Vec<NDArray>> {
    let attrs: Attrs = attrs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let op = op::find(name)?.build(&attrs)?;
    op::invoke::invoke(&op, inputs, None, None, false)
}

/// The contents of `a` as `T` values (waits for pending work).
pub fn values<T: Element>(a: &NDArray) -> Vec<T> {
    assert_eq!(a.dtype(), T::DTYPE, "reading {} as {}", a.dtype(), T::DTYPE);
    let bytes = a.to_bytes().unwrap();
    bytes
        .chunks_exact(std::mem::size_of::<T>())
        // SAFETY: each chunk holds the bytes of one T.
        .map(|c| unsafe { std::ptr::read_unaligned(c.as_ptr() as *const T) })
        .collect()
}

/// The contents of a float32 array.
pub fn f32s(a: &NDArray) -> Vec<f32> {
    values::<f32>(a)
}

/// Shorthand for a float32 array.
pub fn f32a(shape: &[usize], data: &[f32]) -> NDArray {
    array::<f32>(shape, data)
}

/// Asserts the dtype.
pub fn assert_dtype(a: &NDArray, d: DType) {
    assert_eq!(a.dtype(), d);
}
