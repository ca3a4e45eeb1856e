//! ThreadedEngine: one work-stealing pool runs the ops of every device.

use super::core::{DependencyEngine, Placement};
use super::opr::Runner;
use super::pool::Pool;
use super::shared::EngineShared;
use super::{EngineKind, FnProperty};
use crate::context::Context;
use parking_lot::Mutex;
use std::sync::Arc;
use std::thread::JoinHandle;

/// The engine with one pool for all devices.
pub type ThreadedEngine = DependencyEngine<OnePool>;

/// The ThreadedEngine's placement: every op on the one pool.
pub struct OnePool {
    pool: Arc<Pool>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Placement for OnePool {
    const KIND: EngineKind = EngineKind::Threaded;

    fn runner(&self, _: &Arc<EngineShared>, _: Context, _: FnProperty) -> Runner {
        Runner::Pool(self.pool.clone())
    }
}

impl ThreadedEngine {
    /// An engine with `workers` threads (at least one).
    pub fn new(workers: usize) -> ThreadedEngine {
        DependencyEngine::build(|shared| {
            let (pool, threads) = Pool::spawn(shared.clone(), workers, "rsmx-engine");
            OnePool {
                pool,
                threads: Mutex::new(threads),
            }
        })
    }
}

impl Drop for OnePool {
    fn drop(&mut self) {
        let threads = std::mem::take(&mut *self.threads.lock());
        self.pool
            .engine
            .shut_down(std::slice::from_ref(&self.pool), threads);
    }
}
