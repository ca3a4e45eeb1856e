//! DLPack: arrays shared without a copy with numpy, PyTorch and other libraries, as
//! `dltensor` capsules of DLPack's `DLManagedTensor` (the unversioned ABI MXNet used).

use super::errors::{guard, IntoPy};
use super::ndarray::PyNDArray;
use crate::context::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ndarray::NDArray;
use crate::shape::fmt_shape;
use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::ffi;
use pyo3::prelude::*;
use std::ffi::{c_void, CStr};

const CAPSULE: &CStr = c"dltensor";
const USED_CAPSULE: &CStr = c"used_dltensor";

/// DLPack's device types that rsmx maps.
const DL_CPU: i32 = 1;
const DL_CUDA_HOST: i32 = 3;

#[repr(C)]
#[derive(Clone, Copy)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

/// DLPack's (code, bits) of a dtype.
fn dl_dtype(t: DType) -> DlDataType {
    let (code, bits) = match t {
        DType::F32 => (2, 32),
        DType::F64 => (2, 64),
        DType::F16 => (2, 16),
        DType::U8 => (1, 8),
        DType::I8 => (0, 8),
        DType::I32 => (0, 32),
        DType::I64 => (0, 64),
        DType::Bool => (6, 8),
    };
    DlDataType {
        code,
        bits,
        lanes: 1,
    }
}

fn from_dl_dtype(t: DlDataType) -> Result<DType> {
    let found = DType::ALL.into_iter().find(|&d| {
        let dl = dl_dtype(d);
        dl.code == t.code && dl.bits == t.bits
    });
    match found {
        Some(d) if t.lanes == 1 => Ok(d),
        _ => Err(Error::Type(format!(
            "from_dlpack: DLPack dtype (code {}, bits {}, lanes {}) has no rsmx dtype",
            t.code, t.bits, t.lanes
        ))),
    }
}

/// What an exported capsule keeps alive: the array and the shape the tensor points to.
struct Exported {
    _array: NDArray,
    shape: Vec<i64>,
    managed: DlManagedTensor,
}

unsafe extern "C" fn delete_exported(managed: *mut DlManagedTensor) {
    // SAFETY: `manager_ctx` is the `Exported` box `export` leaked; the consumer calls this
    // deleter once.
    unsafe { drop(Box::from_raw((*managed).manager_ctx as *mut Exported)) };
}

/// Frees a capsule nobody consumed (one still named `dltensor`).
unsafe extern "C" fn capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with the capsule being destroyed.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, CAPSULE.as_ptr()) == 1 {
            let managed =
                ffi::PyCapsule_GetPointer(capsule, CAPSULE.as_ptr()) as *mut DlManagedTensor;
            if let Some(deleter) = (*managed).deleter {
                deleter(managed);
            }
        }
    }
}

/// A `dltensor` capsule sharing `array`'s memory.
fn export(py: Python<'_>, array: &NDArray) -> PyResult<Py<PyAny>> {
    if !array.context().is_cpu() {
        return Err(Error::NotImplemented(format!(
            "to_dlpack: only CPU arrays can be shared over DLPack, this one is on {}",
            array.context()
        )))
        .py();
    }
    // The importer may write the memory without the engine.
    array.var().mark_untracked();
    let blob = array.blob();
    let mut exported = Box::new(Exported {
        _array: array.clone(),
        shape: array.shape().iter().map(|&d| d as i64).collect(),
        managed: DlManagedTensor {
            dl_tensor: DlTensor {
                data: blob.ptr() as *mut c_void,
                device: DlDevice {
                    device_type: DL_CPU,
                    device_id: 0,
                },
                ndim: array.ndim() as i32,
                dtype: dl_dtype(array.dtype()),
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_exported),
        },
    });
    exported.managed.dl_tensor.shape = exported.shape.as_mut_ptr();
    let raw = Box::into_raw(exported);
    // SAFETY: `raw` is a live, leaked box; the capsule (or its consumer) frees it once.
    unsafe {
        (*raw).managed.manager_ctx = raw as *mut c_void;
        let managed = std::ptr::addr_of_mut!((*raw).managed);
        let capsule = ffi::PyCapsule_New(
            managed as *mut c_void,
            CAPSULE.as_ptr(),
            Some(capsule_destructor),
        );
        if capsule.is_null() {
            drop(Box::from_raw(raw));
            return Err(PyErr::fetch(py));
        }
        Ok(Py::from_owned_ptr(py, capsule))
    }
}

/// A tensor a consumer took over, handed back to its producer when rsmx is done with it.
struct Borrowed(*mut DlManagedTensor);

// SAFETY: DLPack lets the consumer call the deleter from any thread; it runs under the GIL.
unsafe impl Send for Borrowed {}

impl Borrowed {
    fn release(self) {
        // After the interpreter has shut down the producer's memory went with it.
        // SAFETY: `Py_IsInitialized` may be called at any time, without the GIL.
        if unsafe { ffi::Py_IsInitialized() } == 0 {
            return;
        }
        Python::attach(|_| {
            // SAFETY: the tensor was taken from a `dltensor` capsule and is released once.
            unsafe {
                if let Some(deleter) = (*self.0).deleter {
                    deleter(self.0);
                }
            }
        });
    }
}

/// The rsmx array over a `dltensor` capsule's memory; the capsule is marked used.
fn import(capsule: &Bound<'_, PyAny>) -> PyResult<NDArray> {
    let ptr = capsule.as_ptr();
    // SAFETY: a valid capsule named `dltensor` holds a `DLManagedTensor` that the consumer
    // owns from the moment it renames the capsule.
    unsafe {
        if ffi::PyCapsule_IsValid(ptr, CAPSULE.as_ptr()) != 1 {
            return Err(Error::Value(
                "from_dlpack: expected an unused 'dltensor' capsule (each can be taken once)"
                    .into(),
            ))
            .py();
        }
        let managed = ffi::PyCapsule_GetPointer(ptr, CAPSULE.as_ptr()) as *mut DlManagedTensor;
        let t = &(*managed).dl_tensor;
        let layout = tensor_layout(t);
        let (shape, dtype) = match layout {
            Ok(v) => v,
            Err(e) => return Err(e).py(),
        };
        if ffi::PyCapsule_SetName(ptr, USED_CAPSULE.as_ptr()) != 0 {
            return Err(PyErr::fetch(capsule.py()));
        }
        let data = (t.data as *mut u8).add(t.byte_offset as usize);
        let borrowed = Borrowed(managed);
        NDArray::foreign(
            Context::cpu(0),
            data,
            &shape,
            dtype,
            Box::new(move || borrowed.release()),
        )
        .py()
    }
}

/// The shape and dtype of a CPU tensor in row-major order; an error for anything else.
///
/// # Safety
/// `t` must be a valid DLPack tensor.
unsafe fn tensor_layout(t: &DlTensor) -> Result<(Vec<usize>, DType)> {
    if t.device.device_type != DL_CPU && t.device.device_type != DL_CUDA_HOST {
        return Err(Error::NotImplemented(format!(
            "from_dlpack: only CPU tensors can be taken (DLPack device type {})",
            t.device.device_type
        )));
    }
    let dtype = from_dl_dtype(t.dtype)?;
    let ndim =
        usize::try_from(t.ndim).map_err(|_| Error::Value("from_dlpack: negative ndim".into()))?;
    // SAFETY: DLPack gives `ndim` dimensions (and strides, when not null).
    let dims: &[i64] = if ndim == 0 {
        &[]
    } else {
        unsafe { std::slice::from_raw_parts(t.shape, ndim) }
    };
    let shape: Vec<usize> = dims
        .iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| Error::Value(format!("from_dlpack: bad dimension {d}")))
        })
        .collect::<Result<_>>()?;
    // Strides say nothing about an array without elements.
    if !t.strides.is_null() && ndim > 0 && !shape.contains(&0) {
        // SAFETY: as above.
        let strides = unsafe { std::slice::from_raw_parts(t.strides, ndim) };
        let mut want = 1i64;
        for (&d, &s) in dims.iter().zip(strides).rev() {
            if d != 1 && s != want {
                return Err(Error::Value(format!(
                    "from_dlpack: the tensor of shape {} is not contiguous (strides {strides:?}); \
                     make it contiguous first",
                    fmt_shape(&shape)
                )));
            }
            want *= d;
        }
    }
    Ok((shape, dtype))
}

/// A reference to a Python object, dropped under the GIL when rsmx is done with its memory.
struct Lender {
    _object: Py<PyAny>,
}

impl Lender {
    fn release(self) {
        // After the interpreter has shut down there is nothing left to hand back.
        // SAFETY: `Py_IsInitialized` may be called at any time, without the GIL.
        if unsafe { ffi::Py_IsInitialized() } == 0 {
            std::mem::forget(self);
            return;
        }
        Python::attach(|_| drop(self));
    }
}

/// An array over a C-contiguous numpy array's memory (`mx.nd.from_numpy`), holding the
/// numpy array until rsmx is done with it.
#[pyfunction]
fn numpy_share(
    py: Python<'_>,
    src: Bound<'_, PyUntypedArray>,
    dtype_flag: i32,
) -> PyResult<Py<PyNDArray>> {
    guard("from_numpy", || {
        let dtype = DType::from_flag(dtype_flag).py()?;
        if !src.is_c_contiguous() || src.dtype().itemsize() != dtype.size() {
            return Err(Error::Value(
                "from_numpy: only C-contiguous arrays of a supported dtype can be shared".into(),
            ))
            .py();
        }
        let shape = src.shape().to_vec();
        // SAFETY: a numpy array's data pointer, valid while the array (held below) lives.
        let data = unsafe { (*src.as_array_ptr()).data as *mut u8 };
        let lender = Lender {
            _object: src.into_any().unbind(),
        };
        // SAFETY: the numpy array is kept alive until the chunk hands it back.
        let a = unsafe {
            NDArray::foreign(
                Context::cpu(0),
                data,
                &shape,
                dtype,
                Box::new(move || lender.release()),
            )
        }
        .py()?;
        PyNDArray::new(a).into_object(py)
    })
}

/// A `dltensor` capsule over the array's memory, once pending writes are done.
#[pyfunction]
fn dlpack_export(
    py: Python<'_>,
    array: PyRef<'_, PyNDArray>,
    for_write: bool,
) -> PyResult<Py<PyAny>> {
    let inner = array.inner.clone();
    let waited = py.detach(|| {
        if for_write {
            inner.wait_to_write()
        } else {
            inner.wait_to_read()
        }
    });
    guard("to_dlpack", || {
        waited.py()?;
        export(py, &inner)
    })
}

/// The array over a `dltensor` capsule's memory, shared without a copy.
#[pyfunction]
fn dlpack_import(py: Python<'_>, capsule: Bound<'_, PyAny>) -> PyResult<Py<PyNDArray>> {
    guard("from_dlpack", || {
        PyNDArray::new(import(&capsule)?).into_object(py)
    })
}

/// Registers the DLPack functions.
pub fn add_functions(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(dlpack_export, m)?)?;
    m.add_function(wrap_pyfunction!(dlpack_import, m)?)?;
    m.add_function(wrap_pyfunction!(numpy_share, m)?)?;
    Ok(())
}
