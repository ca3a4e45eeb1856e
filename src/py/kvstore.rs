//! `_core.KVStoreHandle`: the store behind `rsmx.kvstore.KVStore`.

use super::errors::{guard, guard_detached, IntoPy};
use super::ndarray::{wrap, PyNDArray};
use super::optim::{key_of, key_to_py, PyFusedOptimizer};
use crate::kvstore::{self, Key, Store};
use crate::ndarray::NDArray;
use pyo3::prelude::*;
use std::sync::Arc;

fn keys_of(keys: &[Bound<'_, PyAny>]) -> PyResult<Vec<Key>> {
    keys.iter().map(key_of).collect()
}

fn arrays_of(v: &[PyRef<'_, PyNDArray>]) -> Vec<NDArray> {
    v.iter().map(|a| a.inner.clone()).collect()
}

fn writable_of(v: &[PyRef<'_, PyNDArray>]) -> PyResult<Vec<NDArray>> {
    v.iter().map(|a| a.writable_inner()).collect()
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
    fn new(name: &str) -> PyResult<PyKVStore> {
        guard("KVStore", || {
            Ok(PyKVStore {
                inner: kvstore::create(name).py()?,
            })
        })
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
    fn init(&self, keys: Vec<Bound<'_, PyAny>>, values: Vec<PyRef<'_, PyNDArray>>) -> PyResult<()> {
        guard("KVStore.init", || {
            self.inner.init(&keys_of(&keys)?, &arrays_of(&values)).py()
        })
    }

    /// Sums the values of each key and applies them (assignment or the built-in updater).
    fn push(
        &self,
        py: Python<'_>,
        keys: Vec<Bound<'_, PyAny>>,
        values: Vec<Vec<PyRef<'_, PyNDArray>>>,
        priorities: Vec<i32>,
    ) -> PyResult<()> {
        guard("KVStore.push", || {
            let keys = keys_of(&keys)?;
            let values: Vec<Vec<NDArray>> = values.iter().map(|v| arrays_of(v)).collect();
            guard_detached(py, "KVStore.push", || {
                self.inner.push(&keys, &values, &priorities)
            })
        })
    }

    /// Sums the values of each key for an updater written in Python: returns
    /// `(key, sum, stored value)` per key in update order.
    fn reduce_for_updater(
        &self,
        py: Python<'_>,
        keys: Vec<Bound<'_, PyAny>>,
        values: Vec<Vec<PyRef<'_, PyNDArray>>>,
        priorities: Vec<i32>,
    ) -> PyResult<Vec<UpdaterInput>> {
        guard("KVStore.push", || {
            let keys = keys_of(&keys)?;
            let values: Vec<Vec<NDArray>> = values.iter().map(|v| arrays_of(v)).collect();
            let groups = guard_detached(py, "KVStore.push", || {
                self.inner.reduce_for_updater(&keys, &values, &priorities)
            })?;
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
        keys: Vec<Bound<'_, PyAny>>,
        outs: Vec<Vec<PyRef<'_, PyNDArray>>>,
        priorities: Vec<i32>,
    ) -> PyResult<()> {
        guard("KVStore.pull", || {
            let keys = keys_of(&keys)?;
            let outs = outs
                .iter()
                .map(|v| writable_of(v))
                .collect::<PyResult<Vec<_>>>()?;
            guard_detached(py, "KVStore.pull", || {
                self.inner.pull(&keys, &outs, &priorities)
            })
        })
    }

    /// Pushes the values of each key, then copies the updated value into its outputs.
    fn pushpull(
        &self,
        py: Python<'_>,
        keys: Vec<Bound<'_, PyAny>>,
        values: Vec<Vec<PyRef<'_, PyNDArray>>>,
        outs: Vec<Vec<PyRef<'_, PyNDArray>>>,
        priorities: Vec<i32>,
    ) -> PyResult<()> {
        guard("KVStore.pushpull", || {
            let keys = keys_of(&keys)?;
            let values: Vec<Vec<NDArray>> = values.iter().map(|v| arrays_of(v)).collect();
            let outs = outs
                .iter()
                .map(|v| writable_of(v))
                .collect::<PyResult<Vec<_>>>()?;
            guard_detached(py, "KVStore.pushpull", || {
                self.inner.pushpull(&keys, &values, &outs, &priorities)
            })
        })
    }

    /// Stores each value under its new key and copies it into the key's outputs.
    fn broadcast(
        &self,
        py: Python<'_>,
        keys: Vec<Bound<'_, PyAny>>,
        values: Vec<PyRef<'_, PyNDArray>>,
        outs: Vec<Vec<PyRef<'_, PyNDArray>>>,
        priorities: Vec<i32>,
    ) -> PyResult<()> {
        guard("KVStore.broadcast", || {
            let keys = keys_of(&keys)?;
            let values = arrays_of(&values);
            let outs = outs
                .iter()
                .map(|v| writable_of(v))
                .collect::<PyResult<Vec<_>>>()?;
            guard_detached(py, "KVStore.broadcast", || {
                self.inner.broadcast(&keys, &values, &outs, &priorities)
            })
        })
    }

    /// The array stored under `key` (shared with the store).
    fn stored(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyNDArray>> {
        guard("KVStore.stored", || {
            let a = self.inner.stored(&key_of(key)?).py()?;
            wrap(py, a)
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
    fn set_state(&self, key: &Bound<'_, PyAny>, state: Vec<PyRef<'_, PyNDArray>>) -> PyResult<()> {
        guard("KVStore.set_state", || {
            let key = key_of(key)?;
            self.inner.set_state(&key, &arrays_of(&state)).py()
        })
    }
}
