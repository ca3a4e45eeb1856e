//! How many threads a process computes with: the engine's CPU workers and the kernels'
//! rayon pool, sized from the environment as MXNet users set it.
//!
//! `OMP_NUM_THREADS` is MXNet's knob for the threads one process computes with (several
//! processes on one machine, as in a distributed job, each set it to share the cores);
//! rsmx reads it for both pools, since its engine workers and its rayon pool together do
//! what MXNet's OpenMP threads do. `RSMX_CPU_WORKER_NTHREADS` /
//! `MXNET_CPU_WORKER_NTHREADS` and rayon's own `RAYON_NUM_THREADS` still decide their pool
//! when set.

use super::env_var;
use super::per_device::CpuWorkers;
use std::sync::Once;

/// The number of cores this process may use.
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// A positive count from an environment variable's text.
pub(super) fn positive(text: Option<String>) -> Option<usize> {
    text.and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
}

/// The CPU worker count the user set: `RSMX_CPU_WORKER_NTHREADS` /
/// `MXNET_CPU_WORKER_NTHREADS`, if set to a positive number.
pub fn cpu_workers_setting() -> Option<usize> {
    positive(env_var(
        "RSMX_CPU_WORKER_NTHREADS",
        "MXNET_CPU_WORKER_NTHREADS",
    ))
}

/// `OMP_NUM_THREADS`, if set to a positive number.
pub fn omp_threads() -> Option<usize> {
    positive(std::env::var("OMP_NUM_THREADS").ok())
}

/// How CPU devices get workers, from the environment: a pool of the count the user set
/// per CPU device (MXNet's meaning), or else one pool that every CPU device shares, so
/// that several CPU contexts do not start more workers than cores: a worker per core, or
/// `OMP_NUM_THREADS` of them if that is fewer.
pub fn cpu_workers_policy() -> CpuWorkers {
    cpu_workers_for(cpu_workers_setting(), omp_threads(), cores())
}

/// `cpu_workers_policy` for a given setting, `OMP_NUM_THREADS` and core count.
pub(super) fn cpu_workers_for(
    setting: Option<usize>,
    omp: Option<usize>,
    cores: usize,
) -> CpuWorkers {
    match setting {
        Some(n) => CpuWorkers::PerDevice(n),
        None => CpuWorkers::Shared(omp.map_or(cores, |n| n.min(cores))),
    }
}

/// The thread count of the kernels' rayon pool that the environment asks for, where
/// rayon would not read it itself: `OMP_NUM_THREADS` unless `RAYON_NUM_THREADS` is set.
pub(super) fn kernel_threads_for(omp: Option<usize>, rayon_set: bool) -> Option<usize> {
    omp.filter(|_| !rayon_set)
}

/// Starts rayon's global pool, the kernels' threads (`rsmx-kernel-N`), sized by
/// `RAYON_NUM_THREADS`, else `OMP_NUM_THREADS`, else a thread per core; once, before any
/// kernel would start it. Later calls, or a pool already started, change nothing.
pub fn size_kernel_pool() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let rayon_set = std::env::var_os("RAYON_NUM_THREADS").is_some();
        // Zero threads leaves the count to rayon's own rules.
        let n = kernel_threads_for(omp_threads(), rayon_set).unwrap_or(0);
        // Fails only when the pool has started already.
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("rsmx-kernel-{i}"))
            .build_global();
    });
}
