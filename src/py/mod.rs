//! The Python extension module `rsmx._core`: the only code that touches pyo3.

mod errors;
mod ndarray;

use crate::engine;
use crate::error::Error;
use crate::op::{self, Attrs};
use errors::{guard, IntoPy};
use ndarray::{context_of, PyNDArray};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Runs the operator `name` with `attrs` on `inputs`; writes into `out` when given.
#[pyfunction]
#[pyo3(signature = (name, inputs, attrs, out=None, ctx=None, is_train=false))]
fn invoke(
    py: Python<'_>,
    name: &str,
    inputs: Vec<PyRef<'_, PyNDArray>>,
    attrs: Attrs,
    out: Option<Vec<PyRef<'_, PyNDArray>>>,
    ctx: Option<(i32, i32)>,
    is_train: bool,
) -> PyResult<Vec<Py<PyNDArray>>> {
    guard(name, || {
        let def = op::find(name).py()?;
        let opref = def.build(&attrs).py()?;
        let ins: Vec<_> = inputs.iter().map(|a| a.inner.clone()).collect();
        if let Some(outs) = &out {
            if outs.iter().any(|o| !o.is_writable()) {
                return Err(Error::Value(format!("{name}: output array is read-only"))).py();
            }
        }
        let outs = out.map(|o| o.iter().map(|a| a.inner.clone()).collect());
        let ctx = ctx.map(|(t, i)| context_of(t, i)).transpose()?;
        let res = op::invoke::invoke(&opref, &ins, outs, ctx, is_train).py()?;
        res.into_iter()
            .map(|a| Py::new(py, PyNDArray::new(a)))
            .collect()
    })
}

/// `(name, aliases, input names, variadic, params, doc)` of every operator.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn list_ops() -> Vec<(String, Vec<String>, Vec<String>, bool, Vec<String>, String)> {
    op::list_ops()
        .iter()
        .map(|d| {
            (
                d.name.to_string(),
                d.aliases.iter().map(|s| s.to_string()).collect(),
                d.inputs.iter().map(|s| s.to_string()).collect(),
                d.variadic,
                d.params.iter().map(|s| s.to_string()).collect(),
                d.doc.to_string(),
            )
        })
        .collect()
}

/// Blocks until all pushed work is done; raises the first error since the last call.
#[pyfunction]
fn waitall(py: Python<'_>) -> PyResult<()> {
    py.detach(|| engine::get().wait_for_all()).py()
}

/// The engine type's name.
#[pyfunction]
fn engine_type() -> &'static str {
    engine::get().kind().name()
}

/// Byte counters of a device's memory pool.
#[pyfunction]
fn storage_stats<'py>(py: Python<'py>, dev_type: i32, dev_id: i32) -> PyResult<Bound<'py, PyDict>> {
    let s = crate::storage::stats(context_of(dev_type, dev_id)?).py()?;
    let d = PyDict::new(py);
    d.set_item("bytes_in_use", s.bytes_in_use)?;
    d.set_item("bytes_pooled", s.bytes_pooled)?;
    d.set_item("peak_bytes_in_use", s.peak_bytes_in_use)?;
    d.set_item("pool_hits", s.pool_hits)?;
    d.set_item("system_allocs", s.system_allocs)?;
    Ok(d)
}

/// Gives a device's pooled free memory back to the system.
#[pyfunction]
fn storage_release_all(dev_type: i32, dev_id: i32) -> PyResult<()> {
    crate::storage::release_all(context_of(dev_type, dev_id)?).py()
}

/// Seeds the random generators of every device, or of one.
#[pyfunction]
#[pyo3(signature = (seed, ctx=None))]
fn random_seed(seed: u64, ctx: Option<(i32, i32)>) -> PyResult<()> {
    let ctx = ctx.map(|(t, i)| context_of(t, i)).transpose()?;
    op::invoke::seed(seed, ctx);
    Ok(())
}

/// The extension module.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyNDArray>()?;
    m.add_function(wrap_pyfunction!(ndarray::_set_numpy_types, m)?)?;
    m.add_function(wrap_pyfunction!(ndarray::empty, m)?)?;
    m.add_function(wrap_pyfunction!(ndarray::from_numpy, m)?)?;
    m.add_function(wrap_pyfunction!(invoke, m)?)?;
    m.add_function(wrap_pyfunction!(list_ops, m)?)?;
    m.add_function(wrap_pyfunction!(waitall, m)?)?;
    m.add_function(wrap_pyfunction!(engine_type, m)?)?;
    m.add_function(wrap_pyfunction!(storage_stats, m)?)?;
    m.add_function(wrap_pyfunction!(storage_release_all, m)?)?;
    m.add_function(wrap_pyfunction!(random_seed, m)?)?;
    Ok(())
}
