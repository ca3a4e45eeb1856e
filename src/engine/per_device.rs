//! ThreadedEnginePerDevice (the default): a pool per device, created on first use, plus one
//! pool for prioritised CPU work (`FnProperty::CpuPrioritized`) and copies.

use super::opr::{Body, OprBlock};
use super::pool::Pool;
use super::threaded::EngineShared;
use super::{env_var, AsyncFn, Engine, EngineKind, FnProperty, SyncFn, Var};
use crate::context::{Context, DeviceType};
use crate::error::Result;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;

/// The pools an engine has started, and their threads.
type Started = (Vec<Arc<Pool>>, Vec<JoinHandle<()>>);

/// Device ids below this have a lock-free pool slot; others go through a map.
const FAST_IDS: usize = 32;

/// The engine with a pool per device.
pub struct ThreadedEnginePerDevice {
    shared: Arc<EngineShared>,
    cpu_workers: usize,
    gpu_workers: usize,
    priority_workers: usize,
    /// CPU pools by device id (`cpu_pinned` and `cpu_shared` run on the CPU's pool).
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
    env_var(rsmx_name, mxnet_name)
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

impl ThreadedEnginePerDevice {
    /// An engine whose CPU pools have `cpu_workers` threads each. GPU pools have
    /// `RSMX_GPU_WORKER_NTHREADS` (`MXNET_GPU_WORKER_NTHREADS`, default 2) threads, the
    /// priority pool `RSMX_CPU_PRIORITY_NTHREADS` (`MXNET_CPU_PRIORITY_NTHREADS`,
    /// default 4).
    pub fn new(cpu_workers: usize) -> ThreadedEnginePerDevice {
        let slots = || (0..FAST_IDS).map(|_| OnceLock::new()).collect::<Box<[_]>>();
        ThreadedEnginePerDevice {
            shared: EngineShared::new(),
            cpu_workers: cpu_workers.max(1),
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
        }
    }

    fn start_pool(&self, workers: usize, name: &str) -> Arc<Pool> {
        let (pool, threads) = Pool::spawn(self.shared.clone(), workers, name);
        let mut started = self.started.lock();
        started.0.push(pool.clone());
        started.1.extend(threads);
        pool
    }

    /// Runs `f` with the pool for an op of kind `prop` on `ctx`, starting it if needed.
    fn with_pool<R>(&self, ctx: Context, prop: FnProperty, f: impl FnOnce(&Arc<Pool>) -> R) -> R {
        let prioritized = matches!(
            prop,
            FnProperty::CpuPrioritized | FnProperty::CopyFromGpu | FnProperty::CopyToGpu
        );
        if prioritized {
            let pool = self
                .priority
                .get_or_init(|| self.start_pool(self.priority_workers, "rsmx-priority"));
            return f(pool);
        }
        let gpu = ctx.dev_type == DeviceType::Gpu;
        let (table, workers, kind) = if gpu {
            (&self.gpu, self.gpu_workers, "gpu")
        } else {
            (&self.cpu, self.cpu_workers, "cpu")
        };
        let name = || format!("rsmx-{kind}{}", ctx.dev_id);
        match usize::try_from(ctx.dev_id).ok().and_then(|i| table.get(i)) {
            Some(slot) => f(slot.get_or_init(|| self.start_pool(workers, &name()))),
            None => {
                let pool = self
                    .other
                    .lock()
                    .entry((gpu, ctx.dev_id))
                    .or_insert_with(|| self.start_pool(workers, &name()))
                    .clone();
                f(&pool)
            }
        }
    }
}

impl Engine for ThreadedEnginePerDevice {
    fn kind(&self) -> EngineKind {
        EngineKind::ThreadedPerDevice
    }

    fn push_async(
        &self,
        f: AsyncFn,
        ctx: Context,
        const_vars: &[Var],
        mutable_vars: &[Var],
        prop: FnProperty,
        priority: i32,
        name: &'static str,
    ) {
        self.with_pool(ctx, prop, |pool| {
            let body = Body::Async(f);
            OprBlock::push(
                Some(pool),
                body,
                ctx,
                const_vars,
                mutable_vars,
                prop,
                priority,
                name,
            )
        })
    }

    fn push_sync(
        &self,
        f: SyncFn,
        ctx: Context,
        const_vars: &[Var],
        mutable_vars: &[Var],
        prop: FnProperty,
        priority: i32,
        name: &'static str,
    ) {
        self.with_pool(ctx, prop, |pool| {
            let body = Body::Sync(f);
            OprBlock::push(
                Some(pool),
                body,
                ctx,
                const_vars,
                mutable_vars,
                prop,
                priority,
                name,
            )
        })
    }

    fn wait_for_var(&self, var: &Var) -> Result<()> {
        self.shared.wait_var(var)
    }

    fn wait_for_all(&self) -> Result<()> {
        self.shared.wait_all()
    }
}

impl Drop for ThreadedEnginePerDevice {
    fn drop(&mut self) {
        let (pools, threads) = std::mem::take(&mut *self.started.lock());
        self.shared.shut_down(&pools, threads);
    }
}
