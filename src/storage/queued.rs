//! GPU blocks whose return to the pool is queued behind ops the engine has yet to run.
//! A host thread that would allocate a new block while one of the same size is on its
//! way back waits briefly for it instead: the host runs ahead of the engine, and without
//! this every op of a long chain would reach the driver for fresh memory.

use crate::context::Context;
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

/// How long an allocation waits for a queued block before it takes new memory (the
/// engine may be held up by a long op, and then fresh memory is the better choice).
const PATIENCE: Duration = Duration::from_millis(2);
/// How long a waiter polls before it sleeps: a block usually lands within microseconds,
/// sooner than a sleeping thread wakes.
const SPIN: Duration = Duration::from_micros(50);

#[derive(Default)]
struct State {
    counts: HashMap<(Context, usize), usize>,
    /// Blocks landed so far, so a waiter can tell whether one came while it looked.
    landings: u64,
}

#[derive(Default)]
struct Queued {
    state: Mutex<State>,
    landed: Condvar,
}

static QUEUED: LazyLock<Queued> = LazyLock::new(Queued::default);

/// A block of `bucket` bytes on `ctx` on its way back to the pool; it counts as queued
/// until this is dropped (after the block is back, or if the deletion never runs).
pub struct OnItsWay {
    key: (Context, usize),
}

impl OnItsWay {
    pub fn new(ctx: Context, bucket: usize) -> OnItsWay {
        let key = (ctx, bucket);
        *QUEUED.state.lock().counts.entry(key).or_default() += 1;
        OnItsWay { key }
    }
}

impl Drop for OnItsWay {
    fn drop(&mut self) {
        let mut state = QUEUED.state.lock();
        state.landings += 1;
        if let Some(n) = state.counts.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                state.counts.remove(&self.key);
            }
        }
        QUEUED.landed.notify_all();
    }
}

/// Tries `reuse` until it gives a block, no block of `bucket` bytes on `ctx` is queued
/// any more, or the patience runs out; `None` then.
pub fn wait_for<T>(ctx: Context, bucket: usize, mut reuse: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    let deadline = start + PATIENCE;
    while start.elapsed() < SPIN {
        if !QUEUED.state.lock().counts.contains_key(&(ctx, bucket)) {
            return None;
        }
        if let Some(got) = reuse() {
            return Some(got);
        }
        std::thread::yield_now();
    }
    let mut state = QUEUED.state.lock();
    loop {
        if !state.counts.contains_key(&(ctx, bucket)) {
            return None;
        }
        let seen = state.landings;
        // The pool is tried without the lock; a block landing meanwhile shows in `landings`.
        let got = parking_lot::MutexGuard::unlocked(&mut state, &mut reuse);
        if got.is_some() {
            return got;
        }
        if state.landings == seen && QUEUED.landed.wait_until(&mut state, deadline).timed_out() {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[test]
    fn a_waiter_gets_the_block_that_lands() {
        let ctx = Context::gpu(7);
        let back = Arc::new(AtomicBool::new(false));
        let on_its_way = OnItsWay::new(ctx, 4096);
        assert_eq!(
            wait_for(ctx, 8192, || Some(1)),
            None,
            "nothing of that size is queued"
        );
        let b = back.clone();
        let lander = std::thread::spawn(move || {
            b.store(true, Ordering::SeqCst);
            drop(on_its_way);
        });
        let got = wait_for(ctx, 4096, || back.load(Ordering::SeqCst).then_some(42));
        lander.join().unwrap();
        // Either the block was seen, or it landed and nothing more was queued.
        assert!(got == Some(42) || !QUEUED.state.lock().counts.contains_key(&(ctx, 4096)));
    }

    #[test]
    fn a_waiter_gives_up_after_its_patience() {
        let ctx = Context::gpu(8);
        let _stuck = OnItsWay::new(ctx, 4096);
        let t = Instant::now();
        assert_eq!(wait_for(ctx, 4096, || None::<u8>), None);
        assert!(t.elapsed() >= PATIENCE);
    }
}
