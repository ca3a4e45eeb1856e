//! How many threads a CPU kernel computes with while other processes keep cores busy.
//!
//! On a busy machine a parallel section split over every core waits for the share of a
//! thread that shares its core with another process, and its threads keep handing each
//! other the core: a kernel is then slower on all threads than on the free ones. So,
//! unless the user fixed the thread count (`OMP_NUM_THREADS`, `RAYON_NUM_THREADS`), the
//! kernels' threads follow the load: every `CHECK_EVERY` the cores other processes used
//! are measured (`load`), and while fewer cores than the kernel pool's threads are free,
//! kernels run inside a narrower pool of as many threads as there are free cores (as
//! OpenMP's `OMP_DYNAMIC` does). `RSMX_DYNAMIC_THREADS=0` / `1` turns this off / on.
//!
//! A kernel's results can depend on its thread count, so they are bit-for-bit the same
//! from run to run only for a fixed thread count: set one, or turn this off.

use super::load::{self, CpuTimes};
use super::threads::positive;
use parking_lot::Mutex;
use rayon::{ThreadPool, ThreadPoolBuilder};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// How often the load is measured, at most: once per this long while kernels run.
const CHECK_EVERY: Duration = Duration::from_millis(200);

/// Below this many elements in all, a kernel runs where it is called: no kernel starts
/// a parallel section for so little, so a narrower pool would gain nothing.
const SMALL_KERNEL: usize = 1 << 15;

/// How far the free cores must move from the current thread count before it changes, so
/// that a load near a boundary does not switch pools back and forth.
const HYSTERESIS: f64 = 0.6;

/// The kernel thread count for `free` free cores, given the `current` one and the
/// kernel pool's size: `current` while `free` is within `HYSTERESIS` of it, else the
/// nearest count from one to the pool's size.
pub(super) fn next_threads(current: usize, free: f64, pool: usize) -> usize {
    if (free - current as f64).abs() <= HYSTERESIS {
        return current;
    }
    (free.round().max(1.0) as usize).min(pool.max(1))
}

/// Whether the kernels' threads follow the load: `RSMX_DYNAMIC_THREADS` if set, else
/// only when no thread count was fixed.
pub(super) fn dynamic_for(setting: Option<&str>, omp_set: bool, rayon_set: bool) -> bool {
    match setting.map(str::trim) {
        Some("0" | "false" | "False" | "FALSE") => false,
        Some(v) if positive(Some(v.to_string())).is_some() => true,
        Some("true" | "True" | "TRUE") => true,
        _ => !omp_set && !rayon_set,
    }
}

/// The load-following state of the process.
struct Governor {
    /// The kernel pool's size: the most a kernel uses.
    pool: usize,
    /// The current kernel thread count.
    threads: AtomicUsize,
    /// When the load is next measured, in nanoseconds after `start`.
    next_check: AtomicU64,
    start: Instant,
    /// The counters at the last measurement; locked by the one thread measuring.
    last: Mutex<Option<CpuTimes>>,
    /// The narrower pool kernels run in while cores are busy, with its size.
    narrow: Mutex<Option<(usize, Arc<ThreadPool>)>>,
}

impl Governor {
    fn new(pool: usize) -> Governor {
        Governor {
            pool,
            threads: AtomicUsize::new(pool),
            next_check: AtomicU64::new(0),
            start: Instant::now(),
            last: Mutex::new(None),
            narrow: Mutex::new(None),
        }
    }

    /// The thread count now, measuring the load first when a measurement is due.
    fn threads(&self) -> usize {
        let now = self.start.elapsed().as_nanos() as u64;
        if now >= self.next_check.load(Relaxed) {
            if let Some(mut last) = self.last.try_lock() {
                self.next_check
                    .store(now + CHECK_EVERY.as_nanos() as u64, Relaxed);
                if let Some(times) = load::sample() {
                    if let Some(before) = last.replace(times) {
                        let free = times_free(before, times);
                        let current = self.threads.load(Relaxed);
                        self.threads
                            .store(next_threads(current, free, self.pool), Relaxed);
                    }
                }
            }
        }
        self.threads.load(Relaxed)
    }

    /// A pool of `threads` threads, built the first time that count is asked for.
    fn narrow_pool(&self, threads: usize) -> Option<Arc<ThreadPool>> {
        let mut narrow = self.narrow.lock();
        if let Some((n, pool)) = narrow.as_ref() {
            if *n == threads {
                return Some(pool.clone());
            }
        }
        let pool = ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("rsmx-kernel-narrow-{i}"))
            .build()
            .ok()
            .map(Arc::new)?;
        // The pool it replaces ends once the kernels still inside it are done.
        *narrow = Some((threads, pool.clone()));
        Some(pool)
    }
}

/// The cores not busy with other processes between two samples.
fn times_free(before: CpuTimes, after: CpuTimes) -> f64 {
    after.cores() as f64 - load::others_busy(before, after)
}

/// The process's governor, or `None` when the thread count does not follow the load.
fn governor() -> Option<&'static Governor> {
    static GOVERNOR: OnceLock<Option<Governor>> = OnceLock::new();
    GOVERNOR
        .get_or_init(|| {
            let setting = std::env::var("RSMX_DYNAMIC_THREADS").ok();
            let dynamic = dynamic_for(
                setting.as_deref(),
                super::omp_threads().is_some(),
                std::env::var_os("RAYON_NUM_THREADS").is_some(),
            );
            super::size_kernel_pool();
            let pool = rayon::current_num_threads();
            (dynamic && pool > 1 && load::sample().is_some()).then(|| Governor::new(pool))
        })
        .as_ref()
}

/// The thread count CPU kernels compute with now.
pub fn kernel_threads() -> usize {
    governor().map_or_else(rayon::current_num_threads, Governor::threads)
}

/// Runs `kernel`, a CPU kernel over `elements` elements in all, with the threads the
/// load leaves free: inside a narrower pool while cores are busy, else on this thread.
pub fn run_cpu_kernel<R: Send>(elements: usize, kernel: impl FnOnce() -> R + Send) -> R {
    let Some(gov) = governor().filter(|_| elements >= SMALL_KERNEL) else {
        return kernel();
    };
    let threads = gov.threads();
    if threads >= rayon::current_num_threads() {
        return kernel();
    }
    match gov.narrow_pool(threads) {
        Some(pool) => pool.install(kernel),
        None => kernel(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_moves_to_the_free_cores_past_the_hysteresis() {
        // Two threads, one core taken by another process.
        assert_eq!(next_threads(2, 1.05, 2), 1);
        assert_eq!(next_threads(2, 1.3, 2), 1);
        // Near the boundary the count stays where it is, either way.
        assert_eq!(next_threads(2, 1.45, 2), 2);
        assert_eq!(next_threads(1, 1.55, 2), 1);
        // Freed again.
        assert_eq!(next_threads(1, 1.9, 2), 2);
        // Never below one, never above the pool.
        assert_eq!(next_threads(2, -3.0, 2), 1);
        assert_eq!(next_threads(4, 15.0, 8), 8);
        assert_eq!(next_threads(16, 12.2, 16), 12);
    }

    #[test]
    fn the_load_is_followed_unless_a_thread_count_is_fixed() {
        assert!(dynamic_for(None, false, false));
        assert!(!dynamic_for(None, true, false));
        assert!(!dynamic_for(None, false, true));
        assert!(!dynamic_for(Some("0"), false, false));
        assert!(!dynamic_for(Some("false"), false, false));
        assert!(dynamic_for(Some("1"), true, true));
        assert!(dynamic_for(Some(" true "), true, false));
        // Anything else leaves the default.
        assert!(dynamic_for(Some("maybe"), false, false));
        assert!(!dynamic_for(Some("maybe"), true, false));
    }

    #[test]
    fn a_narrow_pool_is_reused_for_its_size_and_replaced_for_another() {
        let gov = Governor::new(4);
        let one = gov.narrow_pool(1).unwrap();
        assert!(Arc::ptr_eq(&one, &gov.narrow_pool(1).unwrap()));
        assert_eq!(one.install(rayon::current_num_threads), 1);
        let two = gov.narrow_pool(2).unwrap();
        assert_eq!(two.install(rayon::current_num_threads), 2);
        assert!(!Arc::ptr_eq(&one, &gov.narrow_pool(1).unwrap()));
    }
}
