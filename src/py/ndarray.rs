//! `_core.NDArrayBase`: a handle on a core array with the hot paths (arithmetic, views,
//! properties) in Rust. `rsmx.ndarray.NDArray` subclasses it with the rest of MXNet's
//! methods and registers itself, so arrays the core returns are of that class.

use super::errors::{guard, guard_detached, IntoPy};
use crate::autograd::{self, Entry, Value};
use crate::context::{Context, DeviceType};
use crate::dtype::DType;
use crate::error::Error;
use crate::ndarray::{copy, NDArray};
use crate::op::{self, Attrs, OpRef};
use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use parking_lot::Mutex;
use pyo3::exceptions::PyTypeError;
use pyo3::impl_::pyclass_init::PyObjectInit;
use pyo3::prelude::*;
use pyo3::pyclass_init::PyClassInitializer;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyTuple, PyType};
use std::sync::OnceLock;

/// The base class of `mx.nd.NDArray`.
#[pyclass(name = "NDArrayBase", module = "rsmx._core", subclass, weakref)]
pub struct PyNDArray {
    pub inner: NDArray,
    writable: bool,
    /// The array's place in a recorded autograd graph.
    entry: Mutex<Option<Entry>>,
}

impl PyNDArray {
    pub fn new(inner: NDArray) -> PyNDArray {
        PyNDArray {
            inner,
            writable: true,
            entry: Mutex::new(None),
        }
    }

    /// A new array holding `value`'s array and entry.
    pub fn from_value(value: Value) -> PyNDArray {
        let a = PyNDArray::new(value.0);
        *a.entry.lock() = value.1;
        a
    }

    /// The array with its autograd entry.
    pub fn value(&self) -> Value {
        (self.inner.clone(), self.entry())
    }

    /// The array's autograd entry, if it is in a graph.
    pub fn entry(&self) -> Option<Entry> {
        self.entry.lock().clone()
    }

    /// Sets the array's autograd entry.
    pub fn set_entry(&self, e: Option<Entry>) {
        *self.entry.lock() = e;
    }

    /// A Python object of the registered array class (`mx.nd.NDArray`) holding `self`;
    /// of the base class until one is registered.
    pub fn into_object(self, py: Python<'_>) -> PyResult<Py<PyNDArray>> {
        let init = PyClassInitializer::from(self);
        let Some(class) = ARRAY_CLASS.get(py) else {
            return Py::new(py, init);
        };
        // SAFETY: `class` is a subclass of NDArrayBase (checked when it was registered).
        // This is the initializer pyo3's generated `__new__` runs for subclasses: it
        // allocates through the subclass's own `tp_alloc` (which sizes its slots and
        // dict) and fills in the base part.
        unsafe {
            let ptr = init.into_new_object(py, class.bind(py).as_type_ptr())?;
            Ok(Bound::from_owned_ptr(py, ptr)
                .cast_into_unchecked::<PyNDArray>()
                .unbind())
        }
    }
}

/// A new Python array object for `a`.
pub fn wrap(py: Python<'_>, a: NDArray) -> PyResult<Py<PyNDArray>> {
    PyNDArray::new(a).into_object(py)
}

/// The class arrays are made as, registered by `rsmx.ndarray`.
static ARRAY_CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// Makes `cls`, a Python subclass of NDArrayBase, the class of every array the core
/// returns.
#[pyfunction]
pub fn _set_array_class(py: Python<'_>, cls: Bound<'_, PyType>) -> PyResult<()> {
    guard("_set_array_class", || {
        if !cls.is_subclass(&py.get_type::<PyNDArray>())? {
            return Err(Error::Type(
                "the array class must be a subclass of NDArrayBase".into(),
            ))
            .py();
        }
        let _ = ARRAY_CLASS.set(py, cls.unbind());
        Ok(())
    })
}

/// numpy's scalar types in dtype-flag order, installed by `rsmx.ndarray` at import.
static NUMPY_TYPES: PyOnceLock<Vec<Py<PyType>>> = PyOnceLock::new();

#[pyfunction]
pub fn _set_numpy_types(py: Python<'_>, types: Vec<Py<PyType>>) -> PyResult<()> {
    guard("_set_numpy_types", || {
        let _ = NUMPY_TYPES.set(py, types);
        Ok(())
    })
}

/// Parses a `(dev_type, dev_id)` pair.
pub fn context_of(dev_type: i32, dev_id: i32) -> PyResult<Context> {
    let t = DeviceType::from_i32(dev_type)
        .ok_or_else(|| Error::Value(format!("unknown device type {dev_type}")))
        .py()?;
    Ok(Context {
        dev_type: t,
        dev_id,
    })
}

#[derive(Clone, Copy)]
enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
}

/// The cached broadcasting operator behind `a`.
fn arith_op(a: Arith) -> &'static OpRef {
    static OPS: OnceLock<Vec<OpRef>> = OnceLock::new();
    let all = OPS.get_or_init(|| {
        [
            "broadcast_add",
            "broadcast_sub",
            "broadcast_mul",
            "broadcast_div",
            "broadcast_mod",
            "broadcast_power",
        ]
        .into_iter()
        .map(|n| {
            op::find(n)
                .and_then(|d| d.build(&Attrs::new()))
                .expect("the broadcasting arithmetic operators are registered")
        })
        .collect()
    });
    &all[a as usize]
}

fn scalar_name(a: Arith, reverse: bool) -> &'static str {
    match (a, reverse) {
        (Arith::Add, _) => "_plus_scalar",
        (Arith::Sub, false) => "_minus_scalar",
        (Arith::Sub, true) => "_rminus_scalar",
        (Arith::Mul, _) => "_mul_scalar",
        (Arith::Div, false) => "_div_scalar",
        (Arith::Div, true) => "_rdiv_scalar",
        (Arith::Mod, false) => "_mod_scalar",
        (Arith::Mod, true) => "_rmod_scalar",
        (Arith::Pow, false) => "_power_scalar",
        (Arith::Pow, true) => "_rpower_scalar",
    }
}

/// `lhs <op> rhs` where `rhs` is an NDArray or a number; `reverse` computes `rhs <op> lhs`;
/// `out` writes in place.
fn arith(
    lhs: Value,
    rhs: &Bound<'_, PyAny>,
    a: Arith,
    reverse: bool,
    out: Option<Value>,
) -> PyResult<Option<Value>> {
    let out = out.map(|o| vec![o]);
    let result = if let Ok(other) = rhs.cast::<PyNDArray>() {
        let other = other.borrow().value();
        let ins = if reverse { [other, lhs] } else { [lhs, other] };
        autograd::invoke(arith_op(a), &ins, out, None, false)
    } else if let Ok(s) = rhs.extract::<f64>() {
        // `{:?}` prints the shortest string that parses back to the same f64.
        let attrs = Attrs::from([("scalar".to_string(), format!("{s:?}"))]);
        op::find(scalar_name(a, reverse))
            .and_then(|d| d.build(&attrs))
            .and_then(|op| autograd::invoke(&op, std::slice::from_ref(&lhs), out, None, false))
    } else {
        return Ok(None);
    };
    Ok(Some(result.py()?.swap_remove(0)))
}

/// The forward, reflected and in-place methods of each arithmetic operator; `$m` names
/// the unused modulo argument that Python passes to the power methods.
macro_rules! binary_methods {
    ($($fwd:ident, $rev:ident, $inp:ident, $kind:expr $(, $m:ident)?);* $(;)?) => {
        #[pymethods]
        impl PyNDArray {
            $(
                fn $fwd(
                    slf: &Bound<'_, Self>,
                    other: &Bound<'_, PyAny>,
                    $($m: &Bound<'_, PyAny>,)?
                ) -> PyResult<Py<PyAny>> {
                    guard(stringify!($fwd), || binary(slf, other, $kind, false))
                }

                fn $rev(
                    slf: &Bound<'_, Self>,
                    other: &Bound<'_, PyAny>,
                    $($m: &Bound<'_, PyAny>,)?
                ) -> PyResult<Py<PyAny>> {
                    guard(stringify!($rev), || binary(slf, other, $kind, true))
                }

                fn $inp(
                    slf: &Bound<'_, Self>,
                    other: &Bound<'_, PyAny>,
                    $($m: &Bound<'_, PyAny>,)?
                ) -> PyResult<()> {
                    guard(stringify!($inp), || binary_inplace(slf, other, $kind))
                }
            )*
        }
    };
}

/// `slf <op> other` (or `other <op> slf`), or `NotImplemented` for an operand that is
/// neither an NDArray nor a number.
fn binary(
    slf: &Bound<'_, PyNDArray>,
    other: &Bound<'_, PyAny>,
    a: Arith,
    reverse: bool,
) -> PyResult<Py<PyAny>> {
    let py = slf.py();
    let lhs = slf.borrow().value();
    match arith(lhs, other, a, reverse, None)? {
        Some(r) => Ok(PyNDArray::from_value(r).into_object(py)?.into_any()),
        None => Ok(py.NotImplemented()),
    }
}

/// `slf <op>= other`.
fn binary_inplace(slf: &Bound<'_, PyNDArray>, other: &Bound<'_, PyAny>, a: Arith) -> PyResult<()> {
    let this = slf.borrow();
    let lhs = (this.writable_inner()?, this.entry());
    match arith(lhs.clone(), other, a, false, Some(lhs))? {
        Some((_, entry)) => {
            this.set_entry(entry);
            Ok(())
        }
        None => Err(unsupported(other)),
    }
}

binary_methods!(
    __add__, __radd__, __iadd__, Arith::Add;
    __sub__, __rsub__, __isub__, Arith::Sub;
    __mul__, __rmul__, __imul__, Arith::Mul;
    __truediv__, __rtruediv__, __itruediv__, Arith::Div;
    __mod__, __rmod__, __imod__, Arith::Mod;
    __pow__, __rpow__, __ipow__, Arith::Pow, _modulo;
);

#[pymethods]
impl PyNDArray {
    /// The shape as a tuple.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        guard("shape", || PyTuple::new(py, self.inner.shape()))
    }

    /// The element type as a numpy type (`numpy.float32`, ...).
    #[getter]
    fn dtype(&self, py: Python<'_>) -> PyResult<Py<PyType>> {
        guard("dtype", || {
            let types = NUMPY_TYPES
                .get(py)
                .ok_or_else(|| PyTypeError::new_err("rsmx.ndarray is not initialised"))?;
            Ok(types[self.inner.dtype().flag() as usize].clone_ref(py))
        })
    }

    /// MXNet's type flag of the element type.
    #[getter]
    fn _dtype_flag(&self) -> PyResult<i32> {
        guard("_dtype_flag", || Ok(self.inner.dtype().flag()))
    }

    /// `(device_type_id, device_id)`.
    #[getter]
    fn _ctx(&self) -> PyResult<(i32, i32)> {
        guard("_ctx", || {
            let c = self.inner.context();
            Ok((c.dev_type as i32, c.dev_id))
        })
    }

    /// Number of elements.
    #[getter]
    fn size(&self) -> PyResult<usize> {
        guard("size", || Ok(self.inner.size()))
    }

    /// Number of dimensions.
    #[getter]
    fn ndim(&self) -> PyResult<usize> {
        guard("ndim", || Ok(self.inner.ndim()))
    }

    /// True unless the array is read-only.
    #[getter]
    fn writable(&self) -> PyResult<bool> {
        guard("writable", || Ok(self.writable))
    }

    #[setter]
    fn set_writable(&mut self, v: bool) -> PyResult<()> {
        guard("writable", || {
            self.writable = v;
            Ok(())
        })
    }

    fn __len__(&self) -> PyResult<usize> {
        guard("__len__", || {
            self.inner
                .shape()
                .first()
                .copied()
                .ok_or_else(|| PyTypeError::new_err("len() of a 0-d NDArray"))
        })
    }

    /// Blocks until pending writes are done; raises an error an op stored on the array.
    fn wait_to_read(&self, py: Python<'_>) -> PyResult<()> {
        guard_detached(py, "wait_to_read", || self.inner.wait_to_read())
    }

    /// Blocks until pending reads and writes are done.
    fn _wait_to_write(&self, py: Python<'_>) -> PyResult<()> {
        guard_detached(py, "wait_to_write", || self.inner.wait_to_write())
    }

    /// Row `i` of the first axis, sharing memory.
    fn _at(&self, py: Python<'_>, i: i64) -> PyResult<Py<PyNDArray>> {
        guard("__getitem__", || {
            let n = *self.inner.shape().first().unwrap_or(&0) as i64;
            let j = if i < 0 { i + n } else { i };
            if j < 0 || j >= n {
                return Err(Error::Index(format!(
                    "index {i} is out of bounds for axis 0 with size {n}"
                )))
                .py();
            }
            let j = j as usize;
            if self.entry().is_none() || !autograd::is_recording() {
                let v = PyNDArray {
                    inner: self.inner.at_view(j).py()?,
                    writable: self.writable,
                    entry: Mutex::new(None),
                };
                return v.into_object(py);
            }
            // Recorded as MXNet records it: a slice, then a reshape.
            let row = self.view(|| slice_op(j, j + 1), self.inner.slice_view(j, j + 1).py()?)?;
            let shape = self.inner.shape()[1..].to_vec();
            let at = row.inner.reshape_view(&shape).py()?;
            row.view(|| reshape_op(&shape), at)?.into_object(py)
        })
    }

    /// Rows `begin..end` of the first axis, sharing memory.
    fn _slice(&self, py: Python<'_>, begin: usize, end: usize) -> PyResult<Py<PyNDArray>> {
        guard("slice", || {
            let v = self.inner.slice_view(begin, end).py()?;
            self.view(|| slice_op(begin, end), v)?.into_object(py)
        })
    }

    /// The same memory seen with another shape of the same size.
    fn _reshape_view(&self, py: Python<'_>, shape: Vec<usize>) -> PyResult<Py<PyNDArray>> {
        guard("reshape", || {
            let v = self.inner.reshape_view(&shape).py()?;
            self.view(|| reshape_op(&shape), v)?.into_object(py)
        })
    }

    /// True if both arrays share memory.
    fn _shares_memory(&self, other: &PyNDArray) -> PyResult<bool> {
        guard("_shares_memory", || Ok(self.inner.overlaps(&other.inner)))
    }

    /// Copies the contents into a C-contiguous numpy array of the same size and dtype.
    fn _copy_to_numpy(&self, py: Python<'_>, dst: &Bound<'_, PyUntypedArray>) -> PyResult<()> {
        let nbytes = self.inner.size() * self.inner.dtype().size();
        guard("asnumpy", || check_numpy(dst, nbytes, self.inner.dtype()))?;
        let a = &self.inner;
        if nbytes == 0 {
            return guard_detached(py, "asnumpy", || a.wait_to_read());
        }
        // SAFETY: dst is a C-contiguous numpy array of exactly nbytes bytes (checked
        // above), which nothing else writes while we hold it.
        let out = unsafe {
            std::slice::from_raw_parts_mut((*dst.as_array_ptr()).data as *mut u8, nbytes)
        };
        guard_detached(py, "asnumpy", || copy::read_to_host(a, out))
    }

    /// Overwrites the contents from a C-contiguous numpy array of the same size and dtype,
    /// ordered after pending work on the array.
    fn _copy_from_numpy(&self, src: &Bound<'_, PyUntypedArray>) -> PyResult<()> {
        guard("copy from numpy", || {
            let nbytes = self.inner.size() * self.inner.dtype().size();
            check_numpy(src, nbytes, self.inner.dtype())?;
            let data = if nbytes == 0 {
                Vec::new()
            } else {
                // SAFETY: src is a C-contiguous numpy array of nbytes bytes (checked above).
                unsafe {
                    std::slice::from_raw_parts((*src.as_array_ptr()).data as *const u8, nbytes)
                }
                .to_vec()
            };
            copy::write_from_host(&self.inner, data).py()
        })
    }

    fn __repr__(&self) -> PyResult<String> {
        guard("__repr__", || {
            Ok(format!(
                "<NDArray {} @{}>",
                self.inner
                    .shape()
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join("x"),
                self.inner.context()
            ))
        })
    }
}

fn unsupported(other: &Bound<'_, PyAny>) -> PyErr {
    let t = other
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default();
    super::errors::to_pyerr(Error::Type(format!(
        "unsupported operand type for an in-place NDArray operation: {t}"
    )))
}

impl PyNDArray {
    /// The array, or an error if it is read-only.
    pub fn writable_inner(&self) -> PyResult<NDArray> {
        if !self.writable {
            return Err(Error::Value(
                "trying to write to a read-only NDArray".into(),
            ))
            .py();
        }
        Ok(self.inner.clone())
    }

    /// True unless the array is read-only.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// A view of this array (`inner`, sharing its memory), recorded as `op` while
    /// recording.
    fn view(
        &self,
        op: impl FnOnce() -> crate::error::Result<OpRef>,
        inner: NDArray,
    ) -> PyResult<PyNDArray> {
        let entry = match self.entry() {
            Some(e) if autograd::is_recording() => autograd::record_op(
                &op().py()?,
                &[(&self.inner, Some(e))],
                std::slice::from_ref(&inner),
            )
            .map(|mut es| es.swap_remove(0)),
            _ => None,
        };
        Ok(PyNDArray {
            inner,
            writable: self.writable,
            entry: Mutex::new(entry),
        })
    }
}

/// The operator a view of rows `begin..end` is recorded as.
fn slice_op(begin: usize, end: usize) -> crate::error::Result<OpRef> {
    let attrs = Attrs::from([
        ("axis".to_string(), "0".to_string()),
        ("begin".to_string(), begin.to_string()),
        ("end".to_string(), end.to_string()),
    ]);
    op::find("slice_axis")?.build(&attrs)
}

/// The operator a reshaped view is recorded as.
fn reshape_op(shape: &[usize]) -> crate::error::Result<OpRef> {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let attrs = Attrs::from([("shape".to_string(), format!("({})", dims.join(", ")))]);
    op::find("Reshape")?.build(&attrs)
}

fn check_numpy(a: &Bound<'_, PyUntypedArray>, nbytes: usize, dtype: DType) -> PyResult<()> {
    let itemsize = a.dtype().itemsize();
    if !a.is_c_contiguous() || a.len() * itemsize != nbytes || itemsize != dtype.size() {
        return Err(Error::Value(format!(
            "numpy array of {} bytes (item size {itemsize}) does not match an NDArray of {nbytes} bytes and dtype {dtype}",
            a.len() * itemsize
        )))
        .py();
    }
    Ok(())
}

/// A new array with uninitialised contents.
#[pyfunction]
pub fn empty(
    py: Python<'_>,
    shape: Vec<usize>,
    dtype_flag: i32,
    dev_type: i32,
    dev_id: i32,
) -> PyResult<Py<PyNDArray>> {
    guard("empty", || {
        let ctx = context_of(dev_type, dev_id)?;
        let dtype = DType::from_flag(dtype_flag).py()?;
        wrap(py, NDArray::empty(&shape, dtype, ctx).py()?)
    })
}

/// A new array with a copy of a C-contiguous numpy array's contents.
#[pyfunction]
pub fn from_numpy(
    src: &Bound<'_, PyUntypedArray>,
    dtype_flag: i32,
    dev_type: i32,
    dev_id: i32,
) -> PyResult<Py<PyNDArray>> {
    guard("array", || {
        let ctx = context_of(dev_type, dev_id)?;
        let dtype = DType::from_flag(dtype_flag).py()?;
        let shape: Vec<usize> = src.shape().to_vec();
        let a = NDArray::empty(&shape, dtype, ctx).py()?;
        let nbytes = a.size() * dtype.size();
        check_numpy(src, nbytes, dtype)?;
        if nbytes > 0 {
            // SAFETY: src is a C-contiguous numpy array of nbytes bytes (checked above).
            let data = unsafe {
                std::slice::from_raw_parts((*src.as_array_ptr()).data as *const u8, nbytes)
            };
            copy::write_from_host_now(&a, data).py()?;
        }
        wrap(src.py(), a)
    })
}
