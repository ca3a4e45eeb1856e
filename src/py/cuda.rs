//! The GPU backend's Python entry points: `rsmx.cuda` hands the core the driver's entry
//! points (or asks for the fake driver) and the kernel images, once, and reads counters.

use super::errors::{guard, IntoPy};
use crate::cuda::{blas, driver, fake, runtime};
use crate::error::Error;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::collections::HashMap;

/// Module images per device: module name to image bytes.
type Images = Vec<HashMap<String, Vec<u8>>>;

/// The driver functions the core calls, by the names `cuGetProcAddress` resolves.
#[pyfunction]
pub fn cuda_driver_symbols() -> PyResult<Vec<&'static str>> {
    guard("cuda_driver_symbols", || Ok(driver::SYMBOLS.to_vec()))
}

/// Starts the GPU backend on the real driver: `symbols` maps each name of
/// `cuda_driver_symbols()` to its address; `images[i]` holds device i's modules.
/// Returns the number of GPUs.
/// `blas_symbols`, when cuBLAS was found, maps each name of `cuda_blas_symbols()` to its
/// address.
#[pyfunction]
#[pyo3(signature = (symbols, images, blas_symbols=None))]
pub fn cuda_init(
    py: Python<'_>,
    symbols: HashMap<String, usize>,
    images: Images,
    blas_symbols: Option<HashMap<String, usize>>,
) -> PyResult<usize> {
    guard("cuda_init", || {
        py.detach(|| {
            // SAFETY: `rsmx.cuda` resolved every address with cuGetProcAddress for the
            // CUDA 12.0 ABI the table declares.
            let table = unsafe { driver::Driver::from_symbols(&symbols) }?;
            // SAFETY: the addresses are cuBLAS's functions of those names, from the
            // library `rsmx.cuda` loaded.
            let blas = blas_symbols
                .map(|s| unsafe { blas::Blas::from_symbols(&s) })
                .transpose()?;
            runtime::install(Box::leak(Box::new(table)), blas, images, false)
        })
        .py()
    })
}

/// The cuBLAS functions the core calls.
#[pyfunction]
pub fn cuda_blas_symbols() -> PyResult<Vec<&'static str>> {
    guard("cuda_blas_symbols", || Ok(blas::SYMBOLS.to_vec()))
}

/// Starts the GPU backend on the fake driver: one fake device per entry of `images`,
/// each image the NUL-terminated path of a module's host build.
#[pyfunction]
pub fn cuda_init_fake(py: Python<'_>, images: Images) -> PyResult<usize> {
    guard("cuda_init_fake", || {
        py.detach(|| {
            if images.is_empty() {
                return Err(Error::Value(
                    "a fake GPU backend needs at least one device".into(),
                ));
            }
            let blas = Some(fake::blas::blas());
            runtime::install(Box::leak(Box::new(fake::driver())), blas, images, true)
        })
        .py()
    })
}

/// What the GPU backend has done: `launches`, `host_syncs` (of which `staging_waits`),
/// `allocs`, `frees`.
#[pyfunction]
pub fn cuda_stats(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    guard("cuda_stats", || {
        let c = runtime::counters();
        let d = PyDict::new(py);
        d.set_item("launches", c.launches)?;
        d.set_item("host_syncs", c.host_syncs)?;
        d.set_item("staging_waits", c.staging_waits)?;
        d.set_item("allocs", c.allocs)?;
        d.set_item("frees", c.frees)?;
        d.set_item("fake", runtime::get().is_some_and(|r| r.fake))?;
        Ok(d)
    })
}

/// Fault injection for tests on the fake driver: the next device allocation fails.
#[pyfunction]
pub fn _cuda_fake_fail_next_alloc() -> PyResult<()> {
    guard("_cuda_fake_fail_next_alloc", || {
        fake::fail_next_alloc();
        Ok(())
    })
}

/// Fault injection for tests on the fake driver: the next kernel launch fails.
#[pyfunction]
pub fn _cuda_fake_fail_next_launch() -> PyResult<()> {
    guard("_cuda_fake_fail_next_launch", || {
        fake::fail_next_launch();
        Ok(())
    })
}

pub fn add_functions(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cuda_driver_symbols, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_init, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_blas_symbols, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_init_fake, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_stats, m)?)?;
    m.add_function(wrap_pyfunction!(_cuda_fake_fail_next_alloc, m)?)?;
    m.add_function(wrap_pyfunction!(_cuda_fake_fail_next_launch, m)?)?;
    Ok(())
}
