//! Parking and waking pool workers. A worker is woken only while none is searching for
//! work, and a woken worker counts as searching at once, so a burst of pushes costs at
//! most one wake-up (the woken worker wakes the next one if work is left).

use parking_lot::Mutex;
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::thread::{self, Thread};
use std::time::Duration;

/// How long a parked worker sleeps before it looks again on its own. Wake-ups do not
/// rely on it; it bounds the damage of a missed one and lets workers see shutdown.
const PARK_TIMEOUT: Duration = Duration::from_millis(200);

/// The sleep state of one pool's workers.
pub(crate) struct Idle {
    /// Workers searching for work, including those woken to search.
    searching: AtomicUsize,
    /// The length of `parked`, readable without the lock.
    num_parked: AtomicUsize,
    /// Parked workers: index and thread.
    parked: Mutex<Vec<(usize, Thread)>>,
    /// Set for a worker taken off `parked` to search, before it is unparked.
    woken: Box<[AtomicBool]>,
}

/// How `park` ended.
pub(crate) enum Parked {
    /// Woken by `notify`: the worker now counts as searching.
    Woken,
    /// Work appeared before the worker slept; it does not count as searching.
    Retry,
    /// The engine is shut down and nothing is pending.
    Exit,
}

impl Idle {
    pub(crate) fn new(workers: usize) -> Idle {
        Idle {
            searching: AtomicUsize::new(0),
            num_parked: AtomicUsize::new(0),
            parked: Mutex::new(Vec::with_capacity(workers)),
            woken: (0..workers).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    pub(crate) fn start_searching(&self) {
        self.searching.fetch_add(1, SeqCst);
    }

    /// Ends a search; true if it was the last one (the caller should then `notify` if it
    /// sees work left, so that someone keeps looking).
    pub(crate) fn stop_searching(&self) -> bool {
        self.searching.fetch_sub(1, SeqCst) == 1
    }

    /// Called after queueing work: wakes a parked worker unless one is searching.
    pub(crate) fn notify(&self) {
        // Pairs with the fence in `park`: either the parking worker sees the new work, or
        // we see it parked. A searcher we see will look (or park and then look) again.
        fence(SeqCst);
        if self.searching.load(SeqCst) > 0 || self.num_parked.load(SeqCst) == 0 {
            return;
        }
        let claimed = {
            let mut parked = self.parked.lock();
            if self.searching.load(SeqCst) > 0 {
                return;
            }
            let claimed = parked.pop();
            if claimed.is_some() {
                self.num_parked.fetch_sub(1, SeqCst);
                self.searching.fetch_add(1, SeqCst);
            }
            claimed
        };
        if let Some((index, thread)) = claimed {
            self.woken[index].store(true, SeqCst);
            thread.unpark();
        }
    }

    /// Wakes every parked worker (shutdown).
    pub(crate) fn wake_all(&self) {
        let all: Vec<_> = {
            let mut parked = self.parked.lock();
            self.num_parked.store(0, SeqCst);
            self.searching.fetch_add(parked.len(), SeqCst);
            parked.drain(..).collect()
        };
        for (index, thread) in all {
            self.woken[index].store(true, SeqCst);
            thread.unpark();
        }
    }

    /// Takes worker `index` off the parked list; false if a notifier already did.
    fn unpark_self(&self, index: usize) -> bool {
        let mut parked = self.parked.lock();
        match parked.iter().position(|(i, _)| *i == index) {
            Some(pos) => {
                parked.swap_remove(pos);
                self.num_parked.fetch_sub(1, SeqCst);
                true
            }
            None => false,
        }
    }

    /// Parks worker `index` (which must not count as searching) until it is woken, work
    /// shows up, or `exit()` holds.
    pub(crate) fn park(
        &self,
        index: usize,
        has_work: impl Fn() -> bool,
        exit: impl Fn() -> bool,
    ) -> Parked {
        {
            let mut parked = self.parked.lock();
            parked.push((index, thread::current()));
            self.num_parked.fetch_add(1, SeqCst);
        }
        fence(SeqCst);
        let mut look = true;
        loop {
            if self.woken[index].swap(false, SeqCst) {
                return Parked::Woken;
            }
            if look && (has_work() || exit()) && self.unpark_self(index) {
                return if exit() { Parked::Exit } else { Parked::Retry };
            }
            // (If a notifier took us off the list meanwhile, its flag is on the way.)
            thread::park_timeout(PARK_TIMEOUT);
            look = !self.woken[index].load(SeqCst);
        }
    }
}
