//! `_core.KVStoreHandle`: the store behind `rsmx.kvstore.KVStore`.

use super::errors::{guard, guard_detached, IntoPy};
use super::ndarray::{wrap, PyNDArray};
use super::optim::{key_of, key_to_py, PyFusedOptimizer};
use crate::kvstore::{self, Key, Store};
use crate::ndarray::NDArray;
use pyo3::prelude::*;
use std::sync::Arc;

/// The keys of a call, each a Python int or str.
pub(super) struct Keys(pub(super) Vec<Key>);

impl<'a, 'py> FromPyObject<'a, 'py> for Keys {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let items: Vec<Bound<'py, PyAny>> = obj.extract()?;
        items.iter().map(key_of).collect::<PyResult<_>>().map(Keys)
    }
}

/// Arrays the call reads, one per key.
struct Arrays(Vec<NDArray>);

impl<'a, 'py> FromPyObject<'a, 'py> for Arrays {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let arrays: Vec<PyRef<'py, PyNDArray>> = obj.extract()?;
        Ok(Arrays(arrays.iter().map(|a| a.inner.clone()).collect()))
    }
}

/// Arrays the call reads, a list of them per key.
struct Inputs(Vec<Vec<NDArray>>);

impl<'a, 'py> FromPyObject<'a, 'py> for Inputs {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let lists: Vec<Arrays> = obj.extract()?;
        Ok(Inputs(lists.into_iter().map(|a| a.0).collect()))
    }
}

/// Arrays the call writes, a list of them per key; each must be writable.
struct Outputs(Vec<Vec<NDArray>>);

impl<'a, 'py> FromPyObject<'a, 'py> for Outputs {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let lists: Vec<Vec<PyRef<'py, PyNDArray>>> = obj.extract()?;
        let writable =
            |v: &Vec<PyRef<'_, PyNDArray>>| v.iter().map(|a| a.writable_inner()).collect();
        lists
            .iter()
            .map(writable)
            .collect::<PyResult<_>>()
            .map(Outputs)
    }
}

/// `(key, pushed sum, stored value)` for a Python updater.
type UpdaterInput = (Py<PyAny>, Py<PyNDArray>, Py<PyNDArray>);

/// A key and its optimizer state.
type KeyState = (Py<PyAny>, Vec<Py<PyNDArray>>);

/// A key-value store on one machine.
#[pyclass(name = "KVStoreHandle", module = "rsmx._core", frozen)]
pub struct PyKVStore {
    inner: Arc<dyn Store>,
}

#[pymethods]
impl PyKVStore {
    #[new]
    fn new(py: Python<'_>, name: &str) -> PyResult<PyKVStore> {
        // A distributed store joins its cluster first.
        let inner = guard_detached(py, "KVStore", || kvstore::create(name))?;
        Ok(PyKVStore { inner })
    }

    /// MXNet's name of the store type.
    #[getter]
    fn type_name(&self) -> PyResult<String> {
        guard("KVStore.type", || Ok(self.inner.type_name().to_string()))
    }

    /// This worker's rank.
    #[getter]
    fn rank(&self) -> PyResult<usize> {
        guard("KVStore.rank", || Ok(self.inner.rank()))
    }

    /// How many workers share the store.
    #[getter]
    fn num_workers(&self) -> PyResult<usize> {
        guard("KVStore.num_workers", || Ok(self.inner.num_workers()))
    }

    /// Returns once every worker has reached the barrier.
    fn barrier(&self, py: Python<'_>) -> PyResult<()> {
        guard_detached(py, "KVStore.barrier", || self.inner.barrier())
    }

    /// Stores a copy of each value under its key.
    fn init(&self, py: Python<'_>, keys: Keys, values: Arrays) -> PyResult<()> {
        // A distributed init waits for rank 0's values to reach the servers.
        guard_detached(py, "KVStore.init", || self.inner.init(&keys.0, &values.0))
    }

    /// Sums the values of each key and applies them (assignment or the built-in updater).
    fn push(
        &self,
        py: Python<'_>,
        keys: Keys,
        values: Inputs,
        priorities: Vec<i32>,
    ) -> PyResult<()> {
        guard_detached(py, "KVStore.push", || {
            self.inner.push(&keys.0, &values.0, &priorities)
        })
    }

    /// Sums the values of each key for an updater written in Python: returns
    /// `(key, sum, stored value)` per key in update order.
    fn reduce_for_updater(
        &self,
        py: Python<'_>,
        keys: Keys,
        values: Inputs,
        priorities: Vec<i32>,
    ) -> PyResult<Vec<UpdaterInput>> {
        let groups = guard_detached(py, "KVStore.push", || {
            self.inner
                .reduce_for_updater(&keys.0, &values.0, &priorities)
        })?;
        guard("KVStore.push", || {
            groups
                .into_iter()
                .map(|(k, m, s)| Ok((key_to_py(py, &k)?.unbind(), wrap(py, m)?, wrap(py, s)?)))
                .collect()
        })
    }

    /// Copies each key's stored value into every array given for it.
    fn pull(
        &self,
        py: Python<'_>,
        keys: Keys,
        outs: Outputs,
        priorities: Vec<i32>,
    ) -> PyResult<()> {
        guard_detached(py, "KVStore.pull", || {
            self.inner.pull(&keys.0, &outs.0, &priorities)
        })
    }

    /// Pushes the values of each key, then copies the updated value into its outputs.
    fn pushpull(
        &self,
        py: Python<'_>,
        keys: Keys,
        values: Inputs,
        outs: Outputs,
        priorities: Vec<i32>,
    ) -> PyResult<()> {
        guard_detached(py, "KVStore.pushpull", || {
            self.inner
                .pushpull(&keys.0, &values.0, &outs.0, &priorities)
        })
    }

    /// Stores each value under its new key and copies it into the key's outputs.
    fn broadcast(
        &self,
        py: Python<'_>,
        keys: Keys,
        values: Arrays,
        outs: Outputs,
        priorities: Vec<i32>,
    ) -> PyResult<()> {
        guard_detached(py, "KVStore.broadcast", || {
            self.inner
                .broadcast(&keys.0, &values.0, &outs.0, &priorities)
        })
    }

    /// The array stored under `key` (shared with the store).
    fn stored(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyNDArray>> {
        guard("KVStore.stored", || {
            let a = self.inner.stored(&key_of(key)?).py()?;
            wrap(py, a)
        })
    }

    /// Turns 2-bit gradient compression on (distributed stores only).
    fn set_gradient_compression(&self, py: Python<'_>, threshold: f32) -> PyResult<()> {
        guard_detached(py, "KVStore.set_gradient_compression", || {
            self.inner.set_gradient_compression(threshold)
        })
    }

    /// Goes back to the default update, which assigns pushed sums.
    fn reset_updater(&self) -> PyResult<()> {
        guard("KVStore.set_updater", || {
            self.inner.set_updater(None);
            Ok(())
        })
    }

    /// Makes a built-in optimizer update the stored values on each push.
    fn set_optimizer(&self, optimizer: PyRef<'_, PyFusedOptimizer>) -> PyResult<()> {
        guard("KVStore.set_optimizer", || {
            self.inner.set_updater(Some(optimizer.shared()));
            Ok(())
        })
    }

    /// The built-in updater's state of every key that has one.
    fn states(&self, py: Python<'_>) -> PyResult<Vec<KeyState>> {
        guard("KVStore.states", || {
            self.inner
                .states()
                .into_iter()
                .map(|(k, s)| {
                    let arrays = s
                        .into_iter()
                        .map(|a| wrap(py, a))
                        .collect::<PyResult<_>>()?;
                    Ok((key_to_py(py, &k)?.unbind(), arrays))
                })
                .collect()
        })
    }

    /// Copies `state` into the built-in updater's state of `key`.
    fn set_state(&self, key: &Bound<'_, PyAny>, state: Arrays) -> PyResult<()> {
        guard("KVStore.set_state", || {
            let key = key_of(key)?;
            self.inner.set_state(&key, &state.0).py()
        })
    }
}
