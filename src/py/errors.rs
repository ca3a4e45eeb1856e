//! Turns core errors (and stray panics) into the exception classes of `rsmx.base`.

use crate::error::{Error, ErrorKind};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

static CLASSES: PyOnceLock<[Py<PyType>; 6]> = PyOnceLock::new();

fn classes(py: Python<'_>) -> PyResult<&[Py<PyType>; 6]> {
    CLASSES.get_or_try_init(py, || {
        let base = py.import("rsmx.base")?;
        let get = |n: &str| -> PyResult<Py<PyType>> {
            Ok(base.getattr(n)?.cast_into::<PyType>()?.unbind())
        };
        Ok([
            get("MXNetError")?,
            get("MXNetValueError")?,
            get("MXNetTypeError")?,
            get("MXNetIndexError")?,
            get("MXNetNotImplementedError")?,
            get("MXNetMemoryError")?,
        ])
    })
}

/// The Python exception for a core error, with the error's context as attributes:
/// `op` and `node` (where in a computation), `cuda_call` and `cuda_code` (a failed CUDA
/// call), `peer` (a transport failure); `None` where they do not apply.
pub fn to_pyerr(e: Error) -> PyErr {
    Python::attach(|py| {
        let Ok(c) = classes(py) else {
            return PyRuntimeError::new_err(e.to_string());
        };
        let idx = match e.kind() {
            ErrorKind::Runtime => 0,
            ErrorKind::Value => 1,
            ErrorKind::Type => 2,
            ErrorKind::Index => 3,
            ErrorKind::NotImplemented => 4,
            ErrorKind::OutOfMemory => 5,
        };
        let err = PyErr::from_type(c[idx].bind(py).clone(), e.to_string());
        if let Err(failed) = set_context(py, &err, &e) {
            return failed;
        }
        err
    })
}

fn set_context(py: Python<'_>, err: &PyErr, e: &Error) -> PyResult<()> {
    let value = err.value(py);
    if let Some(op) = e.op() {
        value.setattr("op", &op.op)?;
        value.setattr("node", op.node.as_deref())?;
    }
    if let Some(cuda) = e.cuda_call() {
        value.setattr("cuda_call", &cuda.call)?;
        value.setattr("cuda_code", cuda.code)?;
    }
    if let Some(peer) = e.peer() {
        value.setattr("peer", peer)?;
    }
    Ok(())
}

/// Converts a core result into a Python result.
pub trait IntoPy<T> {
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPy<T> for Result<T, Error> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_pyerr)
    }
}

/// The one wrapper every Python-facing function and method runs its body in: a panic
/// inside `f` becomes an `MXNetError` naming `what`, so no `PanicException` reaches Python.
pub fn guard<T>(what: &str, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|p| Err(to_pyerr(panic_error(what, p))))
}

/// As [`guard`], for core work that may block (waits, host copies): the GIL is released
/// while `f` runs, so engine threads that need Python can go on.
pub fn guard_detached<T: Send>(
    py: Python<'_>,
    what: &str,
    f: impl FnOnce() -> Result<T, Error> + Send,
) -> PyResult<T> {
    py.detach(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .unwrap_or_else(|p| Err(panic_error(what, p)))
    })
    .py()
}

fn panic_error(what: &str, p: Box<dyn std::any::Any + Send>) -> Error {
    let msg = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "internal error".to_string());
    Error::Runtime(format!("{what}: {msg}"))
}
