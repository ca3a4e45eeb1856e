//! `rsmx.autograd`'s entry points into the core: the switches, marking variables,
//! backward and grad, and the recorded Python backward of `autograd.Function`.

use super::errors::{guard, IntoPy};
use super::ndarray::PyNDArray;
use crate::autograd::{self, CustomBackward, GradReq, Head, Value};
use crate::error::{Error, Result};
use crate::ndarray::NDArray;
use pyo3::prelude::*;
use std::sync::Arc;

/// Sets recording on this thread; returns the previous setting.
#[pyfunction]
fn autograd_set_recording(on: bool) -> PyResult<bool> {
    guard("set_recording", || Ok(autograd::set_recording(on)))
}

/// Sets training mode on this thread; returns the previous setting.
#[pyfunction]
fn autograd_set_training(on: bool) -> PyResult<bool> {
    guard("set_training", || Ok(autograd::set_training(on)))
}

/// True while ops on this thread are recorded.
#[pyfunction]
fn autograd_is_recording() -> PyResult<bool> {
    guard("is_recording", || Ok(autograd::is_recording()))
}

/// True while ops on this thread run in training mode.
#[pyfunction]
fn autograd_is_training() -> PyResult<bool> {
    guard("is_training", || Ok(autograd::is_training()))
}

/// Marks each array as a variable whose gradients go to its buffer, as its request says.
#[pyfunction]
fn autograd_mark_variables(
    variables: Vec<PyRef<'_, PyNDArray>>,
    grads: Vec<PyRef<'_, PyNDArray>>,
    reqs: Vec<String>,
) -> PyResult<()> {
    guard("mark_variables", || {
        if variables.len() != grads.len() || variables.len() != reqs.len() {
            return Err(Error::Value(format!(
                "mark_variables: {} variables, {} gradients and {} grad_reqs; they must be \
                 as many",
                variables.len(),
                grads.len(),
                reqs.len()
            )))
            .py();
        }
        let mut entries = Vec::with_capacity(variables.len());
        for ((v, g), r) in variables.iter().zip(&grads).zip(&reqs) {
            let req = GradReq::parse(r).py()?;
            entries.push(autograd::mark_variable(&v.inner, g.inner.clone(), req).py()?);
        }
        for (v, e) in variables.iter().zip(entries) {
            v.set_entry(Some(e));
        }
        Ok(())
    })
}

/// Backward from `heads` (with their gradients, ones where `None`). With `variables`,
/// returns their gradients; without, writes the marked variables' buffers.
#[pyfunction]
#[pyo3(signature = (heads, head_grads, variables, retain_graph, create_graph, train_mode))]
fn autograd_backward(
    py: Python<'_>,
    heads: Vec<PyRef<'_, PyNDArray>>,
    head_grads: Vec<Option<PyRef<'_, PyNDArray>>>,
    variables: Option<Vec<PyRef<'_, PyNDArray>>>,
    retain_graph: bool,
    create_graph: bool,
    train_mode: bool,
) -> PyResult<Vec<Py<PyNDArray>>> {
    guard("backward", || {
        if !head_grads.is_empty() && head_grads.len() != heads.len() {
            return Err(Error::Value(format!(
                "backward: {} heads but {} head gradients",
                heads.len(),
                head_grads.len()
            )))
            .py();
        }
        let heads: Vec<Head> = heads
            .iter()
            .enumerate()
            .map(|(i, h)| Head {
                value: h.value(),
                grad: head_grads
                    .get(i)
                    .and_then(|g| g.as_ref().map(|g| g.value())),
            })
            .collect();
        let vars: Option<Vec<Value>> = variables.map(|v| v.iter().map(|a| a.value()).collect());
        let grads = autograd::backward(
            &heads,
            vars.as_deref(),
            retain_graph,
            create_graph,
            train_mode,
        )
        .py()?;
        grads
            .into_iter()
            .map(|v| PyNDArray::from_value(v).into_object(py))
            .collect()
    })
}

/// The gradient buffer of a marked variable, else `None`.
#[pyfunction]
fn autograd_get_grad(
    py: Python<'_>,
    array: PyRef<'_, PyNDArray>,
) -> PyResult<Option<Py<PyNDArray>>> {
    guard("grad", || {
        array
            .entry()
            .and_then(|e| e.grad())
            .map(|g| PyNDArray::new(g).into_object(py))
            .transpose()
    })
}

/// Whether the array is part of a recorded graph: a marked variable or a recorded result.
#[pyfunction]
fn autograd_in_graph(array: PyRef<'_, PyNDArray>) -> PyResult<bool> {
    guard("autograd", || Ok(array.entry().is_some()))
}

/// Whether a backward pass wrote the variable's gradient since the flag was cleared.
#[pyfunction]
fn autograd_fresh_grad(array: PyRef<'_, PyNDArray>) -> PyResult<bool> {
    guard("_fresh_grad", || {
        Ok(array.entry().is_some_and(|e| e.fresh_grad()))
    })
}

/// Sets the variable's fresh-gradient flag.
#[pyfunction]
fn autograd_set_fresh_grad(array: PyRef<'_, PyNDArray>, on: bool) -> PyResult<()> {
    guard("_fresh_grad", || {
        if let Some(e) = array.entry() {
            e.set_fresh_grad(on);
        }
        Ok(())
    })
}

/// The same array outside any graph.
#[pyfunction]
fn autograd_detach(py: Python<'_>, array: PyRef<'_, PyNDArray>) -> PyResult<Py<PyNDArray>> {
    guard("detach", || {
        PyNDArray::new(array.inner.clone()).into_object(py)
    })
}

/// A Python `backward(*output_grads)` standing for a recorded computation.
struct PythonBackward {
    backward: Py<PyAny>,
}

impl CustomBackward for PythonBackward {
    fn backward(&self, ograds: Vec<NDArray>, _is_train: bool) -> Result<Vec<Option<NDArray>>> {
        Python::attach(|py| {
            let run = || -> PyResult<Vec<Option<NDArray>>> {
                let args = ograds
                    .into_iter()
                    .map(|g| PyNDArray::new(g).into_object(py))
                    .collect::<PyResult<Vec<_>>>()?;
                let res = self.backward.call1(py, (args,))?;
                let res: Vec<Option<PyRef<'_, PyNDArray>>> = res.extract(py)?;
                Ok(res
                    .into_iter()
                    .map(|g| g.map(|g| g.inner.clone()))
                    .collect())
            };
            run().map_err(|e| Error::Runtime(format!("autograd.Function.backward failed: {e}")))
        })
    }
}

/// Records that `outputs` were computed from `inputs` by a Python function whose
/// gradients `backward(output_grads)` gives (a list with an NDArray or `None` per input).
#[pyfunction]
fn autograd_record_function(
    backward: Py<PyAny>,
    inputs: Vec<PyRef<'_, PyNDArray>>,
    outputs: Vec<PyRef<'_, PyNDArray>>,
) -> PyResult<()> {
    guard("Function", || {
        let ins: Vec<Value> = inputs.iter().map(|a| a.value()).collect();
        let with: Vec<(&NDArray, Option<autograd::Entry>)> =
            ins.iter().map(|(a, e)| (a, e.clone())).collect();
        let outs: Vec<NDArray> = outputs.iter().map(|a| a.inner.clone()).collect();
        let custom = Arc::new(PythonBackward { backward });
        if let Some(entries) = autograd::record_custom(custom, &with, &outs) {
            for (o, e) in outputs.iter().zip(entries) {
                o.set_entry(Some(e));
            }
        }
        Ok(())
    })
}

/// Registers the autograd functions.
pub fn add_functions(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(autograd_set_recording, m)?)?;
    m.add_function(wrap_pyfunction!(autograd_set_training, m)?)?;
    m.add_function(wrap_pyfunction!(autograd_is_recording, m)?)?;
    m.add_function(wrap_pyfunction!(autograd_is_training, m)?)?;
    m.add_function(wrap_pyfunction!(autograd_mark_variables, m)?)?;
    m.add_function(wrap_pyfunction!(autograd_backward, m)?)?;
    m.add_function(wrap_pyfunction!(autograd_get_grad, m)?)?;
    m.add_function(wrap_pyfunction!(autograd_detach, m)?)?;
    m.add_function(wrap_pyfunction!(autograd_fresh_grad, m)?)?;
    m.add_function(wrap_pyfunction!(autograd_in_graph, m)?)?;
    m.add_function(wrap_pyfunction!(autograd_set_fresh_grad, m)?)?;
    m.add_function(wrap_pyfunction!(autograd_record_function, m)?)?;
    Ok(())
}
