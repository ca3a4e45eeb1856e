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

/// Attributes from `(name, value)` pairs.
pub fn attrs(pairs: &[(&str, &str)]) -> Attrs {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Operator `name` built from `(name, value)` attribute pairs; panics on error.
pub fn build(name: &str, pairs: &[(&str, &str)]) -> op::OpRef {
    op::find(name)
        .and_then(|d| d.build(&attrs(pairs)))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Runs operator `name` with `attrs` on `inputs`; panics on error.
pub fn run(name: &str, attrs: &[(&str, &str)], inputs: &[NDArray]) -> Vec<NDArray> {
    try_run(name, attrs, inputs).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Runs operator `name` with `attrs` on `inputs`.
pub fn try_run(name: &str, attrs: &[(&str, &str)], inputs: &[NDArray]) -> Result<Vec<NDArray>> {
    let attrs = self::attrs(attrs);
    let op = op::find(name)?.build(&attrs)?;
    crate::imperative::invoke(&op, inputs, None, None, false)
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

/// Checks an operator's backward op against central differences of
/// `sum(outputs[k] * ograds[k])` for the inputs in `check`; inputs should be float64.
/// Runs the forward in training mode. Panics with the worst mismatch on failure.
pub fn gradcheck(op: &crate::op::OpRef, inputs: &[NDArray], check: &[usize], eps: f64, tol: f64) {
    use crate::op::Grad;
    let name = op.name();
    let outs = crate::imperative::invoke(op, inputs, None, None, true).unwrap();
    let nvis = op.num_visible_outputs();
    let ograds: Vec<NDArray> = outs[..nvis]
        .iter()
        .enumerate()
        .map(|(k, o)| {
            let n: usize = o.shape().iter().product();
            let v: Vec<f64> = (0..n)
                .map(|i| ((i * 7 + k * 3) % 11) as f64 / 11.0 - 0.4)
                .collect();
            array::<f64>(o.shape(), &v)
        })
        .collect();
    let Grad::Op(g) = op.gradient() else {
        panic!("{name}: no backward op");
    };
    let bin = g.arrange(
        g.ograds.iter().map(|&k| ograds[k].clone()).collect(),
        g.inputs.iter().map(|&i| inputs[i].clone()).collect(),
        g.outputs.iter().map(|&o| outs[o].clone()).collect(),
    );
    let grads = crate::imperative::invoke(&g.op, &bin, None, None, true)
        .unwrap_or_else(|e| panic!("{name} backward: {e}"));
    let objective = |ins: &[NDArray]| -> f64 {
        let outs = crate::imperative::invoke(op, ins, None, None, true).unwrap();
        outs[..nvis]
            .iter()
            .zip(&ograds)
            .map(|(o, g)| {
                values::<f64>(o)
                    .iter()
                    .zip(values::<f64>(g))
                    .map(|(a, b)| a * b)
                    .sum::<f64>()
            })
            .sum()
    };
    for &j in check {
        let pos = g
            .grad_of
            .iter()
            .position(|&k| k == j)
            .unwrap_or_else(|| panic!("{name}: no gradient for input {j}"));
        let analytic = values::<f64>(&grads[pos]);
        let base = values::<f64>(&inputs[j]);
        for (k, &a) in analytic.iter().enumerate() {
            let probe = |delta: f64| {
                let mut v = base.clone();
                v[k] += delta;
                let mut ins = inputs.to_vec();
                ins[j] = array::<f64>(inputs[j].shape(), &v);
                objective(&ins)
            };
            let numeric = (probe(eps) - probe(-eps)) / (2.0 * eps);
            let err = (numeric - a).abs();
            assert!(
                err <= tol * (1.0 + numeric.abs()),
                "{name}: gradient of input {j} element {k}: backward {a}, numeric {numeric}"
            );
        }
    }
}
