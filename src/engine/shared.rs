//! Engine-wide state every engine type shares: the count of pending ops, waits, the
//! errors since the last `wait_for_all`, shutdown.

use super::errors::{ErrorList, ErrorRef};
use super::opr::{Body, OprBlock, Runner, WaitSlot};
use super::pool::{current_pool_id, Pool};
use super::{PushSpec, Var};
use crate::context::Context;
use crate::error::Result;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Engine-wide state, shared by the engine handle, its pools and its op blocks.
pub(crate) struct EngineShared {
    /// Ops pushed and not yet complete.
    pending: AtomicUsize,
    /// Threads blocked in `wait_all`.
    waiters: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
    /// Errors since the last `wait_all`.
    errors: ErrorList,
    /// The engine handle is gone: workers leave once nothing is pending.
    shutdown: AtomicBool,
}

impl EngineShared {
    pub(crate) fn new() -> Arc<EngineShared> {
        Arc::new(EngineShared {
            pending: AtomicUsize::new(0),
            waiters: AtomicUsize::new(0),
            lock: Mutex::new(()),
            cv: Condvar::new(),
            errors: ErrorList::default(),
            shutdown: AtomicBool::new(false),
        })
    }

    pub(crate) fn op_pushed(&self) {
        self.pending.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn op_done(&self) {
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Pairs with the fence in `wait_all`: either the waiter sees zero or we see it.
            fence(Ordering::SeqCst);
            if self.waiters.load(Ordering::Relaxed) > 0 {
                let _g = self.lock.lock();
                self.cv.notify_all();
            }
        }
    }

    pub(crate) fn record_error(&self, cell: &ErrorRef) {
        self.errors.add(cell);
    }

    pub(crate) fn finished_shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Acquire) && self.pending.load(Ordering::Acquire) == 0
    }

    /// `Engine::wait_for_var`: queues a read of `var` that wakes us, unless no write is
    /// pending on it anyway.
    pub(crate) fn wait_var(&self, var: &Var) -> Result<()> {
        if var.has_pending_write() {
            let slot = Arc::new(WaitSlot::default());
            let spec = PushSpec::new(
                "WaitForVar",
                Context::cpu(0),
                std::slice::from_ref(var),
                &[],
            );
            OprBlock::push(Runner::Internal, Body::Signal(slot.clone()), spec);
            slot.wait();
        }
        var.take_error().map_or(Ok(()), Err)
    }

    /// `Engine::wait_for_all`.
    pub(crate) fn wait_all(&self) -> Result<()> {
        if self.pending.load(Ordering::Acquire) != 0 {
            self.waiters.fetch_add(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            let mut g = self.lock.lock();
            while self.pending.load(Ordering::SeqCst) != 0 {
                self.cv.wait(&mut g);
            }
            drop(g);
            self.waiters.fetch_sub(1, Ordering::SeqCst);
        }
        self.errors.take_first().map_or(Ok(()), Err)
    }

    /// Stops the pools once pending work is done, and joins their threads unless the
    /// engine is dropped from one of them.
    pub(crate) fn shut_down(&self, pools: &[Arc<Pool>], threads: Vec<JoinHandle<()>>) {
        let current = current_pool_id();
        let inside = pools.iter().any(|p| Some(p.id()) == current);
        if !inside {
            let _ = self.wait_all();
        }
        self.shutdown.store(true, Ordering::Release);
        for p in pools {
            p.wake_all();
        }
        if !inside {
            for t in threads {
                let _ = t.join();
            }
        }
    }
}
