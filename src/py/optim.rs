//! `_core.FusedOptimizer`: the Rust built-in optimizer for the KVStore, with keys given as
//! Python ints or strings.

use super::errors::{guard, guard_detached, IntoPy};
use super::kvstore::Keys;
use super::ndarray::{wrap, PyNDArray};
use crate::error::Error;
use crate::kvstore::StoreUpdater;
use crate::optim::{FusedOptimizer, ParamKey};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyString};
use std::collections::HashMap;
use std::sync::Arc;

/// A KVStore key or optimizer index from Python.
pub(super) fn key_of(obj: &Bound<'_, PyAny>) -> PyResult<ParamKey> {
    if obj.is_instance_of::<PyInt>() {
        return Ok(ParamKey::Int(obj.extract()?));
    }
    if obj.is_instance_of::<PyString>() {
        return Ok(ParamKey::Name(obj.extract()?));
    }
    Err(Error::Type(format!(
        "a key must be an int or a str, got {}",
        obj.get_type().name()?
    )))
    .py()
}

pub(super) fn key_to_py<'py>(py: Python<'py>, k: &ParamKey) -> PyResult<Bound<'py, PyAny>> {
    Ok(match k {
        ParamKey::Int(i) => i.into_pyobject(py)?.into_any(),
        ParamKey::Name(s) => s.into_pyobject(py)?.into_any(),
    })
}

/// MXNet's built-in optimizer `name` run as fused update operators.
#[pyclass(name = "FusedOptimizer", module = "rsmx._core", frozen)]
pub struct PyFusedOptimizer {
    inner: Arc<FusedOptimizer>,
}

impl PyFusedOptimizer {
    /// The optimizer, for a KVStore to run.
    pub(super) fn shared(&self) -> Arc<FusedOptimizer> {
        self.inner.clone()
    }
}

#[pymethods]
impl PyFusedOptimizer {
    #[new]
    fn new(name: &str, params: HashMap<String, String>) -> PyResult<Self> {
        guard("FusedOptimizer", || {
            Ok(PyFusedOptimizer {
                inner: Arc::new(FusedOptimizer::new(name, &params).py()?),
            })
        })
    }

    /// Zero states for `weight` (see the interface notes for their order).
    fn create_state(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        weight: PyRef<'_, PyNDArray>,
    ) -> PyResult<Vec<Py<PyNDArray>>> {
        guard("FusedOptimizer.create_state", || {
            let key = key_of(key)?;
            let w = &weight.inner;
            let states = guard_detached(py, "FusedOptimizer.create_state", || {
                self.inner.create_state(&key, w)
            })?;
            states.into_iter().map(|a| wrap(py, a)).collect()
        })
    }

    /// Pushes the update of `weight` with `grad` and `states`; returns at once.
    #[pyo3(signature = (key, weight, grad, states, priority=0))]
    fn update(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        weight: PyRef<'_, PyNDArray>,
        grad: PyRef<'_, PyNDArray>,
        states: Vec<PyRef<'_, PyNDArray>>,
        priority: i32,
    ) -> PyResult<()> {
        guard("FusedOptimizer.update", || {
            let key = key_of(key)?;
            let w = weight.writable_inner()?;
            let g = &grad.inner;
            let st = states
                .iter()
                .map(|s| s.writable_inner())
                .collect::<PyResult<Vec<_>>>()?;
            guard_detached(py, "FusedOptimizer.update", || {
                self.inner.update(&key, &w, g, &st, priority)
            })
        })
    }

    /// Replaces the settings (not the counts, rate, schedule or gradient scale).
    fn reconfigure(&self, params: HashMap<String, String>) -> PyResult<()> {
        guard("FusedOptimizer.reconfigure", || {
            self.inner.reconfigure(&params).py()
        })
    }

    /// Counts one update of `key` on device `device_id`; returns the key's count.
    #[pyo3(signature = (key, device_id=0))]
    fn count_update(&self, key: &Bound<'_, PyAny>, device_id: i32) -> PyResult<i64> {
        guard("FusedOptimizer.count_update", || {
            Ok(self.inner.count_update(&key_of(key)?, device_id))
        })
    }

    /// The learning rates of `keys`, multipliers applied.
    fn lrs(&self, keys: Keys) -> PyResult<Vec<f64>> {
        guard("FusedOptimizer.lrs", || Ok(self.inner.lrs(&keys.0)))
    }

    /// The weight decays of `keys`, multipliers applied.
    fn wds(&self, keys: Keys) -> PyResult<Vec<f64>> {
        guard("FusedOptimizer.wds", || Ok(self.inner.wds(&keys.0)))
    }

    /// The number of updates of the most-updated key.
    #[getter]
    fn num_update(&self) -> PyResult<i64> {
        guard("FusedOptimizer.num_update", || Ok(self.inner.num_update()))
    }

    /// The learning rate set without a schedule.
    #[getter]
    fn lr(&self) -> PyResult<f64> {
        guard("FusedOptimizer.lr", || Ok(self.inner.lr()))
    }

    /// Sets the learning rate used without a schedule, with or without one set.
    fn set_lr(&self, lr: f64) -> PyResult<()> {
        guard("FusedOptimizer.set_lr", || {
            self.inner.set_lr(lr);
            Ok(())
        })
    }

    /// The gradient scale.
    #[getter]
    fn rescale_grad(&self) -> PyResult<f64> {
        guard("FusedOptimizer.rescale_grad", || {
            Ok(self.inner.rescale_grad())
        })
    }

    /// The current learning rate.
    #[getter]
    fn learning_rate(&self) -> PyResult<f64> {
        guard("FusedOptimizer.learning_rate", || {
            Ok(self.inner.learning_rate())
        })
    }

    /// Sets the learning rate (an error when a scheduler is set).
    fn set_learning_rate(&self, lr: f64) -> PyResult<()> {
        guard("FusedOptimizer.set_learning_rate", || {
            self.inner.set_learning_rate(lr).py()
        })
    }

    /// Sets the gradient scale.
    fn set_rescale_grad(&self, rescale_grad: f64) -> PyResult<()> {
        guard("FusedOptimizer.set_rescale_grad", || {
            self.inner.set_rescale_grad(rescale_grad);
            Ok(())
        })
    }

    /// The scheduler's current state as JSON, or None.
    fn lr_scheduler_state(&self) -> PyResult<Option<String>> {
        guard("FusedOptimizer.lr_scheduler_state", || {
            Ok(self.inner.lr_scheduler_json())
        })
    }

    /// Replaces the scheduler's state with its JSON description.
    fn set_lr_scheduler_state(&self, text: &str) -> PyResult<()> {
        guard("FusedOptimizer.set_lr_scheduler_state", || {
            self.inner.set_lr_scheduler_json(text).py()
        })
    }

    /// The schedule's rate at `num_update` (stepping it), or None without a schedule.
    fn scheduler_rate(&self, num_update: i64) -> PyResult<Option<f64>> {
        guard("FusedOptimizer.scheduler_rate", || {
            Ok(self.inner.scheduler_rate(num_update))
        })
    }

    /// The schedule's steps since the last call, as `(num_update, lr, floored)`, for the
    /// log lines MXNet's scheduler writes.
    fn take_lr_changes(&self) -> PyResult<Vec<(i64, f64, bool)>> {
        guard("FusedOptimizer.take_lr_changes", || {
            Ok(self
                .inner
                .take_rate_changes()
                .into_iter()
                .map(|c| (c.num_update, c.lr, c.floored))
                .collect())
        })
    }

    /// Update counts: `{device_id: {key: count}}`.
    fn get_counts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        guard("FusedOptimizer.get_counts", || {
            let out = PyDict::new(py);
            for (dev, table) in self.inner.counts() {
                let d = PyDict::new(py);
                for (k, n) in table {
                    d.set_item(key_to_py(py, &k)?, n)?;
                }
                out.set_item(dev, d)?;
            }
            Ok(out)
        })
    }

    /// Restores update counts (and `num_update` if given).
    #[pyo3(signature = (counts, num_update=None))]
    fn set_counts(&self, counts: &Bound<'_, PyDict>, num_update: Option<i64>) -> PyResult<()> {
        guard("FusedOptimizer.set_counts", || {
            let mut all = HashMap::new();
            for (dev, table) in counts.iter() {
                let table = table.cast_into::<PyDict>()?;
                let mut t = HashMap::new();
                for (k, n) in table.iter() {
                    t.insert(key_of(&k)?, n.extract::<i64>()?);
                }
                all.insert(dev.extract::<i32>()?, t);
            }
            self.inner.set_counts(all, num_update);
            Ok(())
        })
    }
}
