//! GPU blocks freed while the device may still use them: each waits for the events of
//! its last users before it goes back to its pool, so that no later op can reuse memory
//! an earlier kernel still reads or writes.

use super::Block;
use crate::cuda::runtime::Event;
use parking_lot::Mutex;

static PENDING: Mutex<Vec<(Block, Vec<Event>)>> = Mutex::new(Vec::new());

/// Holds `block` until `fence` has passed (at once when it has no events).
pub fn add(block: Block, fence: Vec<Event>) {
    if fence.is_empty() {
        drop(block);
    } else {
        PENDING.lock().push((block, fence));
    }
}

/// Returns the blocks whose fences have passed; with `wait`, waits for every fence
/// first. True if any block went back.
pub fn reclaim(wait: bool) -> bool {
    let mut done = Vec::new();
    {
        let mut pending = PENDING.lock();
        if pending.is_empty() {
            return false;
        }
        let mut i = 0;
        while i < pending.len() {
            let passed = pending[i].1.iter().all(|e| {
                if wait {
                    // Waited for, or failed: either way no work will touch it again.
                    let _ = e.synchronize();
                    true
                } else {
                    // A failed device gives its memory back too: nothing will run there.
                    e.is_done().unwrap_or(true)
                }
            });
            if passed {
                done.push(pending.swap_remove(i));
            } else {
                i += 1;
            }
        }
    }
    let any = !done.is_empty();
    drop(done);
    any
}
