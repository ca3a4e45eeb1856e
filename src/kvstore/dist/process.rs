//! This process's node, as the launcher's environment describes it: the worker every
//! `dist_*` store of the process shares (a process is one node of the cluster, as in
//! ps-lite), and the scheduler and server roles `import rsmx` runs.

use super::config::NodeConfig;
use super::meta::Role;
use super::server::{Controller, DistServer};
use super::van::Van;
use super::worker::DistWorker;
use crate::engine;
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::sync::Arc;

/// The process's worker, once a store has joined the cluster.
static WORKER: Mutex<Option<Arc<DistWorker>>> = Mutex::new(None);

/// The process's worker, joining the cluster on first use.
pub fn worker() -> Result<Arc<DistWorker>> {
    let mut slot = WORKER.lock();
    if let Some(w) = &*slot {
        if let Some(why) = w.van().failure() {
            return Err(Error::Runtime(why));
        }
        return Ok(w.clone());
    }
    let config = NodeConfig::from_env()?;
    if config.role != Role::Worker {
        return Err(Error::Value(format!(
            "KVStore dist: this process is the cluster's {} (DMLC_ROLE), not a worker",
            config.role.name()
        )));
    }
    let worker = Arc::new(DistWorker::join(config)?);
    *slot = Some(worker.clone());
    Ok(worker)
}

/// Leaves the cluster as MXNet's worker does at exit, once the engine's work is done
/// (rank 0 stops the servers); nothing to do if no store joined. The first error is
/// returned, after the node has stopped.
pub fn leave() -> Result<()> {
    let Some(worker) = WORKER.lock().take() else {
        return Ok(());
    };
    let pending = engine::get().wait_for_all();
    let left = worker.shutdown();
    pending.and(left)
}

/// Runs the role of a scheduler or a server until the job ends; `controller` turns the
/// optimizers workers send into updaters.
pub fn run_role(controller: &mut dyn Controller) -> Result<()> {
    let config = NodeConfig::from_env()?;
    match config.role {
        Role::Scheduler => Van::join(config)?.finalize(),
        Role::Server => DistServer::join(config)?.run(controller),
        Role::Worker => Err(Error::Value(
            "KVStore dist: a worker runs the user's program, not a role of its own".into(),
        )),
    }
}
