//! The dependency engine: ops pushed with the variables they read and write run as soon
//! as their dependencies allow, in parallel where they are independent.
//!
//! Per variable, in push order: a read sees every earlier write; writes run one at a time
//! after earlier reads; reads between two writes may run together. Errors raised by an op
//! are stored on the variables it writes and returned at the next wait on them.
//!
//! How the threaded engines do it (MXNet's ThreadedVar scheme):
//! - `var`: each variable keeps a small locked queue of the ops waiting on it and lets
//!   reads through together, writes one at a time.
//! - `opr`: a pushed op is one `Arc` block with an atomic wait counter (its variables +
//!   1); the thread that brings it to zero sends it to a pool. Completing an op lets the
//!   next ops through on its variables.
//! - `pool` + `idle`: work-stealing workers (crossbeam-deque) with a high-priority queue;
//!   an op made ready by the op a worker just ran runs next on that worker, without a
//!   queue or a wake-up; idle workers spin briefly, then park.
//! - `core`: the one push path. The engine types differ only in their placement, which
//!   says where a ready op runs: `threaded` (one pool), `per_device` (a pool per device
//!   plus a priority pool), `naive` (inline, inside `push`). `shared` holds the state
//!   they all keep: pending count, waits, errors, shutdown.
//!
//! No engine lock is held while an op body runs, and waits block on condition variables,
//! so an op body may wait for something the waiting thread holds (the Python GIL).

mod core;
mod errors;
mod idle;
mod kernel_threads;
mod load;
mod naive;
mod opr;
mod per_device;
mod pool;
mod prio;
mod shared;
mod stream;
#[cfg(test)]
mod tests;
mod threaded;
mod threads;
mod var;

pub use self::core::DependencyEngine;
pub use kernel_threads::{kernel_threads, run_cpu_kernel};
pub use naive::NaiveEngine;
pub use per_device::{CpuWorkers, ThreadedEnginePerDevice};
pub use stream::StreamHandle;
pub use threaded::ThreadedEngine;
pub use threads::{cores, cpu_workers_policy, cpu_workers_setting, omp_threads, size_kernel_pool};
pub use var::{ContentStamp, Var};

use crate::context::Context;
use crate::error::Result;
use std::sync::OnceLock;

/// What a running op knows about where it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunContext {
    /// The device the op was pushed for.
    pub ctx: Context,
    /// The CUDA stream of the GPU worker running the op, on which it enqueues its work;
    /// `None` on CPU workers.
    pub stream: Option<StreamHandle>,
}

impl RunContext {
    /// The context of an op run by a CPU worker (no stream).
    pub const fn new(ctx: Context) -> RunContext {
        RunContext { ctx, stream: None }
    }
}

/// Kind of work, which decides the worker pool that runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FnProperty {
    /// An ordinary kernel.
    Normal,
    /// A copy from a GPU to the host.
    CopyFromGpu,
    /// A copy from the host to a GPU.
    CopyToGpu,
    /// CPU work that should not wait behind ordinary kernels (KVStore traffic).
    CpuPrioritized,
    /// Work that completes later, from another thread (network, GPU events). Its body
    /// only starts that work, so on the CPU it runs at once on the thread that makes it
    /// ready (the pushing thread, or the one completing what it waited for).
    Async,
    /// The deletion of a variable; runs even after errors.
    DeleteVar,
}

/// Called by an async op when its work is done, with its outcome.
///
/// Dropping it without calling `done` completes the op with an error (so a forgotten
/// completion cannot hang the engine).
pub struct OnComplete(Completion);

/// What `OnComplete::done` calls.
enum Completion {
    /// A callback (the NaiveEngine's).
    Callback(Box<dyn FnOnce(Result<()>) + Send>),
    /// A threaded engine's op block, completed without another allocation.
    Opr(opr::OprRef),
    /// Already called.
    Done,
}

impl OnComplete {
    /// Wraps the engine's completion callback.
    pub fn new(f: impl FnOnce(Result<()>) + Send + 'static) -> OnComplete {
        OnComplete(Completion::Callback(Box::new(f)))
    }

    pub(crate) fn for_opr(op: opr::OprRef) -> OnComplete {
        OnComplete(Completion::Opr(op))
    }

    /// Reports the op's outcome to the engine.
    pub fn done(mut self, result: Result<()>) {
        match std::mem::replace(&mut self.0, Completion::Done) {
            Completion::Callback(f) => f(result),
            Completion::Opr(op) => op.complete_async(result),
            Completion::Done => {}
        }
    }
}

impl Drop for OnComplete {
    fn drop(&mut self) {
        if let Completion::Opr(op) = std::mem::replace(&mut self.0, Completion::Done) {
            op.completion_dropped();
        }
    }
}

/// A synchronous op body.
pub type SyncFn = Box<dyn FnOnce(RunContext) -> Result<()> + Send>;
/// An asynchronous op body: it must call `OnComplete::done` exactly once, from any thread.
pub type AsyncFn = Box<dyn FnOnce(RunContext, OnComplete) + Send>;

/// The three engine types MXNet offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    /// Synchronous: every op runs inside `push`.
    Naive,
    /// One work-stealing pool for every device.
    Threaded,
    /// A pool per device, plus a pool for prioritised and copy work (the default).
    ThreadedPerDevice,
}

impl EngineKind {
    /// MXNet's name for the kind.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Naive => "NaiveEngine",
            EngineKind::Threaded => "ThreadedEngine",
            EngineKind::ThreadedPerDevice => "ThreadedEnginePerDevice",
        }
    }

    /// The kind for MXNet's name.
    pub fn from_name(name: &str) -> Option<EngineKind> {
        match name.trim() {
            "NaiveEngine" => Some(EngineKind::Naive),
            "ThreadedEngine" => Some(EngineKind::Threaded),
            "ThreadedEnginePerDevice" | "" => Some(EngineKind::ThreadedPerDevice),
            _ => None,
        }
    }
}

/// The name of an op that runs several executor steps (bulk execution); the profiler
/// records its steps rather than the op.
pub const BULK: &str = "_bulk";

/// Everything a push says besides the body: the op's name (in errors and profiles), where
/// it runs, what it reads and writes, and how it is scheduled. [`PushSpec::new`] gives
/// normal scheduling at priority 0; [`PushSpec::prop`] and [`PushSpec::priority`] change
/// that.
#[derive(Clone, Copy)]
pub struct PushSpec<'a> {
    pub name: &'static str,
    pub ctx: Context,
    pub const_vars: &'a [Var],
    pub mutable_vars: &'a [Var],
    pub prop: FnProperty,
    pub priority: i32,
    /// A step of a bound executor (a symbolic op, to the profiler), not an imperative op.
    pub symbolic: bool,
}

impl<'a> PushSpec<'a> {
    /// An op named `name` on `ctx` that reads `const_vars` and writes `mutable_vars`.
    pub fn new(
        name: &'static str,
        ctx: Context,
        const_vars: &'a [Var],
        mutable_vars: &'a [Var],
    ) -> Self {
        PushSpec {
            name,
            ctx,
            const_vars,
            mutable_vars,
            prop: FnProperty::Normal,
            priority: 0,
            symbolic: false,
        }
    }

    /// The same op, scheduled as `prop` says.
    pub fn prop(self, prop: FnProperty) -> Self {
        PushSpec { prop, ..self }
    }

    /// The same op at `priority` (higher runs first among ready ops).
    pub fn priority(self, priority: i32) -> Self {
        PushSpec { priority, ..self }
    }

    /// The same op, marked as a step of a bound executor.
    pub fn symbolic(self) -> Self {
        PushSpec {
            symbolic: true,
            ..self
        }
    }
}

/// The engine interface every engine type implements.
pub trait Engine: Send + Sync {
    /// Which engine this is.
    fn kind(&self) -> EngineKind;

    /// A new variable with no pending ops.
    fn new_variable(&self) -> Var {
        Var::new()
    }

    /// Schedules `f` after the ops it depends on; returns at once.
    fn push_async(&self, f: AsyncFn, spec: PushSpec<'_>);

    /// Schedules a synchronous op body.
    fn push_sync(&self, f: SyncFn, spec: PushSpec<'_>);

    /// Runs `deleter` once every op already pushed on `var` has finished; the variable
    /// must not be used after this call.
    fn delete_variable(&self, deleter: SyncFn, ctx: Context, var: &Var) {
        self.push_sync(
            deleter,
            PushSpec::new("DeleteVariable", ctx, &[], std::slice::from_ref(var))
                .prop(FnProperty::DeleteVar),
        )
    }

    /// Blocks until every op pushed so far that writes `var` is done; returns (and clears)
    /// the error stored on it.
    fn wait_for_var(&self, var: &Var) -> Result<()>;

    /// Blocks until every op pushed so far is done; returns (and clears) the first error
    /// raised since the last `wait_for_all`.
    fn wait_for_all(&self) -> Result<()>;
}

/// True on the engine's own worker threads.
pub fn is_worker_thread() -> bool {
    pool::current_pool_id().is_some()
}

/// Reads an environment variable by its rsmx name, then by MXNet's.
pub fn env_var(rsmx_name: &str, mxnet_name: &str) -> Option<String> {
    std::env::var(rsmx_name)
        .ok()
        .or_else(|| std::env::var(mxnet_name).ok())
}

/// The engine type chosen by `RSMX_ENGINE_TYPE` / `MXNET_ENGINE_TYPE`.
pub fn kind_from_env() -> EngineKind {
    let name = env_var("RSMX_ENGINE_TYPE", "MXNET_ENGINE_TYPE").unwrap_or_default();
    EngineKind::from_name(&name).unwrap_or_else(|| {
        eprintln!("rsmx: unknown engine type '{name}', using ThreadedEnginePerDevice");
        EngineKind::ThreadedPerDevice
    })
}

/// Builds an engine of the given kind.
///
/// `cpu_workers` is the thread count of the ThreadedEngine's pool, or of each CPU pool of
/// the ThreadedEnginePerDevice; the NaiveEngine has no threads.
pub fn create(kind: EngineKind, cpu_workers: usize) -> Box<dyn Engine> {
    create_with(kind, CpuWorkers::PerDevice(cpu_workers))
}

/// Builds an engine of the given kind whose CPU workers are `cpu` (the ThreadedEngine's
/// one pool has the count it names).
pub fn create_with(kind: EngineKind, cpu: CpuWorkers) -> Box<dyn Engine> {
    let (CpuWorkers::Shared(n) | CpuWorkers::PerDevice(n)) = cpu;
    match kind {
        EngineKind::Naive => Box::new(NaiveEngine::new()),
        EngineKind::Threaded => Box::new(ThreadedEngine::new(n)),
        EngineKind::ThreadedPerDevice => Box::new(ThreadedEnginePerDevice::with_cpu_workers(cpu)),
    }
}

static ENGINE: OnceLock<Box<dyn Engine>> = OnceLock::new();

/// The process's engine, built on first use from the environment.
pub fn get() -> &'static dyn Engine {
    ENGINE
        .get_or_init(|| {
            size_kernel_pool();
            create_with(kind_from_env(), cpu_workers_policy())
        })
        .as_ref()
}
