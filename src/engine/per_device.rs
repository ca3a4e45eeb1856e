//! ThreadedEnginePerDevice (the default): a pool per device, created on first use, plus one
//! pool for prioritised CPU work (`FnProperty::CpuPrioritized`) and copies.

use super::core::{DependencyEngine, Placement};
use super::opr::Runner;
use super::pool::Pool;
use super::shared::EngineShared;
use super::threads::positive;
use super::{env_var, EngineKind, FnProperty};
use crate::context::{Context, DeviceType};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;

/// The pools an engine has started, and their threads.
type Started = (Vec<Arc<Pool>>, Vec<JoinHandle<()>>);

/// Device ids below this have a lock-free pool slot; others go through a map.
const FAST_IDS: usize = 32;

/// The engine with a pool per device.
pub type ThreadedEnginePerDevice = DependencyEngine<DevicePools>;

/// How the CPU devices' ops share worker threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuWorkers {
    /// One pool of this many workers runs the ops of every CPU device id, so that a
    /// program using `cpu(0)` and `cpu(1)` does not start more workers than there are
    /// cores (the default, sized to the cores).
    Shared(usize),
    /// A pool of this many workers per CPU device id, as MXNet's
    /// `MXNET_CPU_WORKER_NTHREADS` asks.
    PerDevice(usize),
}

/// The ThreadedEnginePerDevice's placement: the pool of the op's device, or the
/// priority pool.
pub struct DevicePools {
    shared: Arc<EngineShared>,
    cpu_workers: CpuWorkers,
    gpu_workers: usize,
    priority_workers: usize,
    /// CPU pools by device id (`cpu_pinned` and `cpu_shared` run on the CPU's pool); with
    /// `CpuWorkers::Shared`, only slot 0 is used.
    cpu: Box<[OnceLock<Arc<Pool>>]>,
    /// GPU pools by device id.
    gpu: Box<[OnceLock<Arc<Pool>>]>,
    /// Pools for device ids outside the fast tables.
    other: Mutex<HashMap<(bool, i32), Arc<Pool>>>,
    /// Prioritised CPU work and copies between host and GPU.
    priority: OnceLock<Arc<Pool>>,
    /// Every pool started, and its threads, for shutdown.
    started: Mutex<Started>,
}

/// A worker count from the environment, or `default`.
fn workers_from_env(rsmx_name: &str, mxnet_name: &str, default: usize) -> usize {
    positive(env_var(rsmx_name, mxnet_name)).unwrap_or(default)
}

impl ThreadedEnginePerDevice {
    /// An engine whose CPU pools have `cpu_workers` threads each (one pool per CPU device
    /// id). GPU pools have `RSMX_GPU_WORKER_NTHREADS` (`MXNET_GPU_WORKER_NTHREADS`,
    /// default 2) threads, the priority pool `RSMX_CPU_PRIORITY_NTHREADS`
    /// (`MXNET_CPU_PRIORITY_NTHREADS`, default 4).
    pub fn new(cpu_workers: usize) -> ThreadedEnginePerDevice {
        Self::with_cpu_workers(CpuWorkers::PerDevice(cpu_workers))
    }

    /// An engine whose CPU devices share workers as `cpu` says.
    pub fn with_cpu_workers(cpu: CpuWorkers) -> ThreadedEnginePerDevice {
        let cpu_workers = match cpu {
            CpuWorkers::Shared(n) => CpuWorkers::Shared(n.max(1)),
            CpuWorkers::PerDevice(n) => CpuWorkers::PerDevice(n.max(1)),
        };
        let slots = || (0..FAST_IDS).map(|_| OnceLock::new()).collect::<Box<[_]>>();
        DependencyEngine::build(|shared| DevicePools {
            shared: shared.clone(),
            cpu_workers,
            gpu_workers: workers_from_env(
                "RSMX_GPU_WORKER_NTHREADS",
                "MXNET_GPU_WORKER_NTHREADS",
                2,
            ),
            priority_workers: workers_from_env(
                "RSMX_CPU_PRIORITY_NTHREADS",
                "MXNET_CPU_PRIORITY_NTHREADS",
                4,
            ),
            cpu: slots(),
            gpu: slots(),
            other: Mutex::new(HashMap::new()),
            priority: OnceLock::new(),
            started: Mutex::new((Vec::new(), Vec::new())),
        })
    }
}

impl DevicePools {
    fn start_pool(&self, workers: usize, name: &str) -> Arc<Pool> {
        let (pool, threads) = Pool::spawn(self.shared.clone(), workers, name);
        let mut started = self.started.lock();
        started.0.push(pool.clone());
        started.1.extend(threads);
        pool
    }

    /// The pool for an op of kind `prop` on `ctx`, started if needed.
    fn pool(&self, ctx: Context, prop: FnProperty) -> Arc<Pool> {
        let prioritized = matches!(
            prop,
            FnProperty::CpuPrioritized | FnProperty::CopyFromGpu | FnProperty::CopyToGpu
        );
        if prioritized {
            return self
                .priority
                .get_or_init(|| self.start_pool(self.priority_workers, "rsmx-priority"))
                .clone();
        }
        let gpu = ctx.dev_type == DeviceType::Gpu;
        let (table, workers, kind, dev_id) = match (gpu, self.cpu_workers) {
            (true, _) => (&self.gpu, self.gpu_workers, "gpu", ctx.dev_id),
            (false, CpuWorkers::Shared(n)) => (&self.cpu, n, "cpu", 0),
            (false, CpuWorkers::PerDevice(n)) => (&self.cpu, n, "cpu", ctx.dev_id),
        };
        let name = || format!("rsmx-{kind}{dev_id}");
        match usize::try_from(dev_id).ok().and_then(|i| table.get(i)) {
            Some(slot) => slot
                .get_or_init(|| self.start_pool(workers, &name()))
                .clone(),
            None => self
                .other
                .lock()
                .entry((gpu, dev_id))
                .or_insert_with(|| self.start_pool(workers, &name()))
                .clone(),
        }
    }
}

impl Placement for DevicePools {
    const KIND: EngineKind = EngineKind::ThreadedPerDevice;

    fn runner(&self, _: &Arc<EngineShared>, ctx: Context, prop: FnProperty) -> Runner {
        Runner::Pool(self.pool(ctx, prop))
    }
}

impl Drop for DevicePools {
    fn drop(&mut self) {
        let (pools, threads) = std::mem::take(&mut *self.started.lock());
        self.shared.shut_down(&pools, threads);
    }
}
