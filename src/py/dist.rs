//! The process's node of a distributed KVStore, seen from Python: running the scheduler
//! or server role, commands to the servers, and leaving the cluster at exit.

use super::errors::{guard, guard_detached};
use super::ndarray::wrap;
use super::optim::PyFusedOptimizer;
use crate::error::{Error, Result};
use crate::kvstore::dist::layout::ServerCommand;
use crate::kvstore::dist::process;
use crate::kvstore::dist::server::Controller;
use crate::kvstore::dist::store::Updater;
use crate::kvstore::dist::updaters::{ArrayUpdate, Fused, Mirrored};
use crate::ndarray::NDArray;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The core error for a Python exception, its message prefixed by `what` if not empty.
fn python_error(py: Python<'_>, what: &str, e: PyErr) -> Error {
    let message = e
        .value(py)
        .str()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| e.to_string());
    if what.is_empty() {
        Error::Value(message)
    } else {
        Error::Value(format!("{what}: {message}"))
    }
}

/// An updater written in Python, `updater(key, grad, weight)`, run with the GIL.
struct PythonUpdate(Py<PyAny>);

impl ArrayUpdate for PythonUpdate {
    fn update(&mut self, key: u64, grad: &NDArray, weight: &NDArray) -> Result<()> {
        Python::attach(|py| {
            let call = || -> PyResult<()> {
                let (g, w) = (wrap(py, grad.clone())?, wrap(py, weight.clone())?);
                self.0.call1(py, (key, g, w))?;
                Ok(())
            };
            call().map_err(|e| python_error(py, &format!("the update of key {key}"), e))
        })
    }
}

/// Turns the pickled optimizer of a kController command into an updater, through the
/// Python function given to [`dist_run_role`]: it returns the optimizer's fused form, or
/// a Python updater for optimizers the core cannot run.
struct PythonController(Py<PyAny>);

impl Controller for PythonController {
    fn updater(&mut self, body: &[u8]) -> Result<Box<dyn Updater>> {
        Python::attach(|py| {
            let made = self
                .0
                .call1(py, (PyBytes::new(py, body),))
                .map_err(|e| python_error(py, "", e))?;
            let made = made.bind(py);
            if let Ok(fused) = made.cast::<PyFusedOptimizer>() {
                let fused = Fused::new(fused.borrow().shared());
                return Ok(Box::new(fused) as Box<dyn Updater>);
            }
            Ok(Box::new(Mirrored::new(PythonUpdate(made.clone().unbind()))))
        })
    }
}

/// Runs this process's role, scheduler or server, as `DMLC_ROLE` says, until the job
/// ends. `controller(pickled_optimizer)` gives a server's updater for each optimizer a
/// worker sends.
#[pyfunction]
pub fn dist_run_role(py: Python<'_>, controller: Py<PyAny>) -> PyResult<()> {
    let mut controller = PythonController(controller);
    guard_detached(py, "KVStore dist", move || {
        process::run_role(&mut controller)
    })
}

/// Sends a command (head and body) to every server and waits for all to answer.
#[pyfunction]
pub fn dist_send_command(py: Python<'_>, head: i32, body: Vec<u8>) -> PyResult<()> {
    guard_detached(py, "KVStore._send_command_to_servers", move || {
        let worker = process::worker()?;
        let (tx, rx) = std::sync::mpsc::channel();
        worker.command(
            head,
            &body,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        rx.recv().unwrap_or_else(|_| {
            Err(Error::Runtime(format!(
                "KVStore dist: command {head} was dropped unanswered"
            )))
        })
    })
}

/// The head of the server command `name` (MXNet's `kController`, `kStopServer`, ...).
#[pyfunction]
pub fn dist_command_head(name: &str) -> PyResult<i32> {
    guard("KVStore dist", || {
        let command = match name {
            "kController" => ServerCommand::Controller,
            "kSetMultiPrecision" => ServerCommand::SetMultiPrecision,
            "kStopServer" => ServerCommand::StopServer,
            "kSyncMode" => ServerCommand::SyncMode,
            "kSetGradientCompression" => ServerCommand::SetGradientCompression,
            "kSetProfilerParams" => ServerCommand::SetProfilerParams,
            other => {
                return Err(super::errors::to_pyerr(Error::Value(format!(
                    "KVStore: unknown server command {other:?}"
                ))))
            }
        };
        Ok(command as i32)
    })
}

/// Leaves the cluster as MXNet's worker does at exit (nothing if no store joined one).
#[pyfunction]
pub fn dist_leave(py: Python<'_>) -> PyResult<()> {
    guard_detached(py, "KVStore dist", process::leave)
}
