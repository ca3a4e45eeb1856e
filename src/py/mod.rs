//! The Python extension module `rsmx._core`: the only code that touches pyo3.

mod autograd;
mod cuda;
mod custom;
mod dist;
mod dlpack;
mod errors;
mod executor;
mod kvstore;
mod ndarray;
mod optim;
mod profiler;
mod symbol;

use crate::engine;
use crate::error::Error;
use crate::op::{self, Attrs};
use errors::{guard, guard_detached, IntoPy};
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
        let ins: Vec<_> = inputs.iter().map(|a| a.value()).collect();
        if let Some(outs) = &out {
            if outs.iter().any(|o| !o.is_writable()) {
                return Err(Error::Value(format!("{name}: output array is read-only"))).py();
            }
        }
        let outs = out.as_ref().map(|o| o.iter().map(|a| a.value()).collect());
        let ctx = ctx.map(|(t, i)| context_of(t, i)).transpose()?;
        let mut res = crate::autograd::invoke(&opref, &ins, outs, ctx, is_train).py()?;
        if let Some(outs) = &out {
            for (o, (_, e)) in outs.iter().zip(&res) {
                o.set_entry(e.clone());
            }
        }
        // Hidden outputs (a dropout mask, a pooling index) stay inside.
        res.truncate(opref.num_visible_outputs().max(1));
        res.into_iter()
            .map(|v| PyNDArray::from_value(v).into_object(py))
            .collect()
    })
}

/// `(name, aliases, input names, variadic, params, doc)` of every operator.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn list_ops() -> PyResult<Vec<(String, Vec<String>, Vec<String>, bool, Vec<String>, String)>> {
    guard("list_ops", || {
        Ok(op::list_ops()
            .iter()
            .map(|d| {
                (
                    d.name.to_string(),
                    d.aliases.iter().map(|s| s.to_string()).collect(),
                    d.inputs.iter().map(|s| s.to_string()).collect(),
                    d.variadic,
                    d.param_names().map(str::to_string).collect(),
                    d.doc.to_string(),
                )
            })
            .collect())
    })
}

/// `(name, type, default or None, doc)` of each attribute of operator `name`.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn op_param_docs(name: &str) -> PyResult<Vec<(String, String, Option<String>, String)>> {
    guard(name, || {
        let def = op::find(name).py()?;
        Ok(def
            .params
            .iter()
            .map(|p| {
                (
                    p.name.to_string(),
                    p.ty.to_string(),
                    p.default.map(str::to_string),
                    p.doc.to_string(),
                )
            })
            .collect())
    })
}

/// Blocks until all pushed work is done; raises the first error since the last call.
#[pyfunction]
fn waitall(py: Python<'_>) -> PyResult<()> {
    guard_detached(py, "waitall", || {
        crate::ndarray::recycle::flush();
        engine::get().wait_for_all()
    })
}

/// The engine type's name.
#[pyfunction]
fn engine_type() -> PyResult<&'static str> {
    guard("engine_type", || Ok(engine::get().kind().name()))
}

/// The thread count CPU kernels compute with now: the kernel pool's, or fewer while other
/// processes keep cores busy (`engine::kernel_threads`).
#[pyfunction]
fn kernel_threads() -> PyResult<usize> {
    guard("kernel_threads", || Ok(engine::kernel_threads()))
}

/// Byte counters of a device's memory pool.
#[pyfunction]
fn storage_stats<'py>(py: Python<'py>, dev_type: i32, dev_id: i32) -> PyResult<Bound<'py, PyDict>> {
    guard("storage.stats", || {
        let s = crate::storage::stats(context_of(dev_type, dev_id)?).py()?;
        let d = PyDict::new(py);
        d.set_item("bytes_in_use", s.bytes_in_use)?;
        d.set_item("bytes_pooled", s.bytes_pooled)?;
        d.set_item("peak_bytes_in_use", s.peak_bytes_in_use)?;
        d.set_item("pool_hits", s.pool_hits)?;
        d.set_item("system_allocs", s.system_allocs)?;
        Ok(d)
    })
}

/// Gives a device's pooled free memory back to the system.
#[pyfunction]
fn storage_release_all(dev_type: i32, dev_id: i32) -> PyResult<()> {
    guard("storage.release_all", || {
        crate::ndarray::recycle::flush();
        crate::storage::release_all(context_of(dev_type, dev_id)?).py()
    })
}

/// Number of GPUs the core was given.
#[pyfunction]
fn num_gpus() -> PyResult<usize> {
    guard("num_gpus", || Ok(crate::context::num_gpus()))
}

/// Records why no GPU can be used, for the errors of GPU contexts.
#[pyfunction]
fn _set_no_gpu_reason(reason: String) -> PyResult<()> {
    guard("_set_no_gpu_reason", || {
        crate::context::set_no_gpu_reason(reason);
        Ok(())
    })
}

/// A named source text.
type Source = (&'static str, &'static str);

/// The embedded CUDA sources: the common header and each module, as `(name, text)`.
#[pyfunction]
fn cuda_sources() -> PyResult<(Source, Vec<Source>)> {
    guard("cuda_sources", || {
        let modules = crate::cuda::sources::MODULES.to_vec();
        Ok((crate::cuda::sources::COMMON_HEADER, modules))
    })
}

/// Seeds the random generators of every device, or of one.
#[pyfunction]
#[pyo3(signature = (seed, ctx=None))]
fn random_seed(seed: u64, ctx: Option<(i32, i32)>) -> PyResult<()> {
    guard("random.seed", || {
        let ctx = ctx.map(|(t, i)| context_of(t, i)).transpose()?;
        op::resource::seed(seed, ctx);
        Ok(())
    })
}

/// The extension module.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    crate::engine::size_kernel_pool();
    custom::install();
    m.add_class::<PyNDArray>()?;
    m.add_class::<symbol::PySymbol>()?;
    m.add_class::<executor::PyExecutor>()?;
    m.add_class::<kvstore::PyKVStore>()?;
    m.add_class::<optim::PyFusedOptimizer>()?;
    m.add_function(wrap_pyfunction!(executor::bind, m)?)?;
    m.add_function(wrap_pyfunction!(dist::dist_run_role, m)?)?;
    m.add_function(wrap_pyfunction!(dist::dist_send_command, m)?)?;
    m.add_function(wrap_pyfunction!(dist::dist_command_head, m)?)?;
    m.add_function(wrap_pyfunction!(dist::dist_leave, m)?)?;
    m.add_function(wrap_pyfunction!(ndarray::_set_numpy_types, m)?)?;
    m.add_function(wrap_pyfunction!(ndarray::_set_array_class, m)?)?;
    m.add_function(wrap_pyfunction!(ndarray::empty, m)?)?;
    m.add_function(wrap_pyfunction!(ndarray::from_numpy, m)?)?;
    m.add_function(wrap_pyfunction!(invoke, m)?)?;
    m.add_function(wrap_pyfunction!(list_ops, m)?)?;
    m.add_function(wrap_pyfunction!(op_param_docs, m)?)?;
    m.add_function(wrap_pyfunction!(waitall, m)?)?;
    m.add_function(wrap_pyfunction!(engine_type, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_threads, m)?)?;
    m.add_function(wrap_pyfunction!(storage_stats, m)?)?;
    m.add_function(wrap_pyfunction!(storage_release_all, m)?)?;
    m.add_function(wrap_pyfunction!(random_seed, m)?)?;
    m.add_function(wrap_pyfunction!(num_gpus, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_sources, m)?)?;
    m.add_function(wrap_pyfunction!(_set_no_gpu_reason, m)?)?;
    add_io_functions(m)?;
    cuda::add_functions(m)?;
    profiler::add_functions(m)?;
    autograd::add_functions(m)?;
    dlpack::add_functions(m)?;
    Ok(())
}

/// Saves arrays (and names, empty for a list) to `path` in MXNet's format.
#[pyfunction]
fn save(
    py: Python<'_>,
    path: String,
    arrays: Vec<PyRef<'_, PyNDArray>>,
    names: Vec<String>,
) -> PyResult<()> {
    let arrays: Vec<_> = arrays.iter().map(|a| a.inner.clone()).collect();
    guard_detached(py, "save", || {
        crate::ndarray::io::save(&path, &arrays, &names)
    })
}

/// Loads `(arrays, names, saved GPU ordinals)` from a file in MXNet's format.
#[pyfunction]
fn load(py: Python<'_>, path: String) -> PyResult<Loaded> {
    let loaded = guard_detached(py, "load", || crate::ndarray::io::load(&path))?;
    guard("load", || wrap_loaded(py, loaded))
}

/// Loads `(arrays, names, saved GPU ordinals)` from the bytes of a file in MXNet's format.
#[pyfunction]
fn load_from_bytes(py: Python<'_>, data: Vec<u8>) -> PyResult<Loaded> {
    let loaded = guard_detached(py, "load", || crate::ndarray::io::load_bytes(&data))?;
    guard("load", || wrap_loaded(py, loaded))
}

type Loaded = (Vec<Py<PyNDArray>>, Vec<String>, Vec<Option<i32>>);

fn wrap_loaded(py: Python<'_>, loaded: crate::ndarray::io::Loaded) -> PyResult<Loaded> {
    let (arrays, names, gpus) = loaded;
    let arrays = arrays
        .into_iter()
        .map(|a| ndarray::wrap(py, a))
        .collect::<PyResult<Vec<_>>>()?;
    Ok((arrays, names, gpus))
}

/// Copies `src` into `dst`.
#[pyfunction]
fn copy_into(src: PyRef<'_, PyNDArray>, dst: PyRef<'_, PyNDArray>) -> PyResult<()> {
    guard("copyto", || {
        let d = dst.writable_inner()?;
        let recorded = src.entry().is_some() && crate::autograd::is_recording();
        if !recorded || src.inner.context() != d.context() {
            return crate::ndarray::copy_into(&src.inner, &d).py();
        }
        let copy = op::find("_copy")
            .and_then(|o| o.build(&Attrs::new()))
            .py()?;
        let res =
            crate::autograd::invoke(&copy, &[src.value()], Some(vec![dst.value()]), None, false)
                .py()?;
        dst.set_entry(res[0].1.clone());
        Ok(())
    })
}

/// Output shapes of operator `name` with `attrs` for input shapes.
#[pyfunction]
fn infer_shape(name: &str, attrs: Attrs, shapes: Vec<Vec<usize>>) -> PyResult<Vec<Vec<usize>>> {
    guard(name, || {
        let op = op::find(name).py()?.build(&attrs).py()?;
        let shapes: Vec<crate::shape::Shape> = shapes
            .iter()
            .map(|s| crate::shape::Shape::from_slice(s))
            .collect();
        Ok(op
            .infer_shape(&shapes)
            .py()?
            .into_iter()
            .map(|s| s.to_vec())
            .collect())
    })
}

/// Registers the array I/O and utility functions.
fn add_io_functions(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(save, m)?)?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(load_from_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(copy_into, m)?)?;
    m.add_function(wrap_pyfunction!(infer_shape, m)?)?;
    Ok(())
}
