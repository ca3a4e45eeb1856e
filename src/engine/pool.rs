//! Worker pools: threads with work-stealing deques (crossbeam-deque), a shared injector and
//! a high-priority queue checked first; idle workers spin briefly, then park.

use super::idle::{Idle, Parked};
use super::opr::OprRef;
use super::prio::PriorityQueue;
use super::shared::EngineShared;
use crossbeam_deque::{Injector, Steal, Stealer, Worker};
use crossbeam_utils::Backoff;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

static NEXT_POOL_ID: AtomicUsize = AtomicUsize::new(1);

/// A set of worker threads sharing queues.
pub(crate) struct Pool {
    id: usize,
    /// The engine whose ops this pool runs.
    pub(crate) engine: Arc<EngineShared>,
    /// Ready ops with priority, taken before anything else, highest first.
    hi: PriorityQueue,
    /// Ready ops pushed from outside the pool's workers.
    injector: Injector<OprRef>,
    /// One per worker, to steal from its deque.
    stealers: Box<[Stealer<OprRef>]>,
    /// Parked workers and who is searching.
    idle: Idle,
}

/// What a worker thread keeps to itself.
struct Local {
    pool_id: usize,
    index: usize,
    deque: Worker<OprRef>,
    /// The op a just-finished op made ready: run next, with no queue and no wake-up.
    slot: Cell<Option<OprRef>>,
}

thread_local! {
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

/// The pool whose worker the current thread is, if any.
pub(crate) fn current_pool_id() -> Option<usize> {
    LOCAL
        .try_with(|l| l.borrow().as_ref().map(|l| l.pool_id))
        .ok()
        .flatten()
}

impl Pool {
    /// Starts a pool of `workers` threads (at least one) named `name-<i>`.
    pub(crate) fn spawn(
        engine: Arc<EngineShared>,
        workers: usize,
        name: &str,
    ) -> (Arc<Pool>, Vec<JoinHandle<()>>) {
        let workers = workers.max(1);
        let deques: Vec<Worker<OprRef>> = (0..workers).map(|_| Worker::new_fifo()).collect();
        let pool = Arc::new(Pool {
            id: NEXT_POOL_ID.fetch_add(1, Ordering::Relaxed),
            engine,
            hi: PriorityQueue::default(),
            injector: Injector::new(),
            stealers: deques.iter().map(Worker::stealer).collect(),
            idle: Idle::new(workers),
        });
        let handles = deques
            .into_iter()
            .enumerate()
            .map(|(index, deque)| {
                let pool = pool.clone();
                std::thread::Builder::new()
                    .name(format!("{name}-{index}"))
                    .spawn(move || pool.run(index, deque))
                    .expect("rsmx: cannot start an engine worker thread")
            })
            .collect();
        (pool, handles)
    }

    pub(crate) fn id(&self) -> usize {
        self.id
    }

    /// Queues a ready op. `continuation`: the calling worker just finished the op that
    /// made this one ready, so it may keep it for itself.
    pub(crate) fn submit(&self, op: OprRef, continuation: bool) {
        if op.high_priority {
            let priority = op.priority;
            self.hi.push(op, priority);
            self.notify();
            return;
        }
        let mut op = Some(op);
        // Some(true): kept in the slot; Some(false): on the worker's deque; None: the
        // caller is not a worker of this pool.
        let local = LOCAL
            .try_with(|l| {
                let l = l.borrow();
                let local = l.as_ref().filter(|l| l.pool_id == self.id)?;
                let op = op.take().expect("op not yet placed");
                if continuation {
                    match local.slot.take() {
                        None => {
                            local.slot.set(Some(op));
                            return Some(true);
                        }
                        Some(prev) => local.slot.set(Some(prev)),
                    }
                }
                local.deque.push(op);
                Some(false)
            })
            .ok()
            .flatten();
        match local {
            Some(true) => {}
            Some(false) => self.notify(),
            None => {
                self.injector.push(op.take().expect("op not yet placed"));
                self.notify();
            }
        }
    }

    fn notify(&self) {
        self.idle.notify();
    }

    /// Wakes every parked worker (shutdown).
    pub(crate) fn wake_all(&self) {
        self.idle.wake_all();
    }

    /// A searching worker found work; if it was the last searcher and more work is
    /// waiting, it wakes someone to look for it.
    fn found_work(&self) {
        if self.idle.stop_searching() && self.has_work() {
            self.idle.notify();
        }
    }

    /// True if some queue of the pool holds an op.
    fn has_work(&self) -> bool {
        !self.hi.is_empty()
            || !self.injector.is_empty()
            || self.stealers.iter().any(|s| !s.is_empty())
    }

    /// The next op for worker `local`: high priority first, then its own slot and deque,
    /// then the injector, then the other workers' deques.
    fn find_task(&self, local: &Local) -> Option<OprRef> {
        if let Some(op) = self.hi.pop() {
            return Some(op);
        }
        if let Some(op) = local.slot.take() {
            return Some(op);
        }
        if let Some(op) = local.deque.pop() {
            return Some(op);
        }
        if let Some(op) = retry(|| self.injector.steal_batch_and_pop(&local.deque)) {
            return Some(op);
        }
        let n = self.stealers.len();
        (1..n).find_map(|k| {
            let victim = &self.stealers[(local.index + k) % n];
            retry(|| victim.steal_batch_and_pop(&local.deque))
        })
    }

    /// A worker thread's loop.
    fn run(self: Arc<Self>, index: usize, deque: Worker<OprRef>) {
        LOCAL.with(|l| {
            *l.borrow_mut() = Some(Local {
                pool_id: self.id,
                index,
                deque,
                slot: Cell::new(None),
            })
        });
        let next = || LOCAL.with(|l| self.find_task(l.borrow().as_ref().expect("worker local")));
        // Whether this worker counts in `idle` as searching.
        let mut searching = false;
        loop {
            if let Some(op) = next() {
                if searching {
                    searching = false;
                    self.found_work();
                }
                op.execute();
                continue;
            }
            // Spin a little: a dependent op usually becomes ready within microseconds.
            if !searching {
                self.idle.start_searching();
            }
            let backoff = Backoff::new();
            let mut found = None;
            while found.is_none() && !backoff.is_completed() {
                backoff.snooze();
                found = next();
            }
            if let Some(op) = found {
                searching = false;
                self.found_work();
                op.execute();
                continue;
            }
            self.idle.stop_searching();
            let exit = || self.engine.finished_shutting_down();
            match self.idle.park(index, || self.has_work(), exit) {
                Parked::Woken => searching = true,
                Parked::Retry => searching = false,
                Parked::Exit => break,
            }
        }
        LOCAL.with(|l| *l.borrow_mut() = None);
    }
}

/// Steals until the queue answers for certain.
fn retry(mut steal: impl FnMut() -> Steal<OprRef>) -> Option<OprRef> {
    loop {
        match steal() {
            Steal::Success(op) => return Some(op),
            Steal::Empty => return None,
            Steal::Retry => std::hint::spin_loop(),
        }
    }
}
