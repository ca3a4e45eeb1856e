//! Turns core errors (and stray panics) into the exception classes of `rsmx.base`.

use crate::error::Error;
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

/// The Python exception for a core error.
pub fn to_pyerr(e: Error) -> PyErr {
    Python::attach(|py| {
        let Ok(c) = classes(py) else {
            return PyRuntimeError::new_err(e.to_string());
        };
        let idx = match e {
            Error::Runtime(_) => 0,
            Error::Value(_) => 1,
            Error::Type(_) => 2,
            Error::Index(_) => 3,
            Error::NotImplemented(_) => 4,
            Error::OutOfMemory(_) => 5,
        };
        PyErr::from_type(c[idx].bind(py).clone(), e.message().to_string())
    })
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

/// Runs `f`, turning a panic into an `MXNetError` instead of a `PanicException`.
pub fn guard<T>(what: &str, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "internal error".to_string());
            Err(to_pyerr(Error::Runtime(format!("{what}: {msg}"))))
        }
    }
}
