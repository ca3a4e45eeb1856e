//! The queue of prioritised ready ops: highest priority first (a KVStore pushes the
//! reduction of parameter `i` with priority `-i`, so the first layers are ready first),
//! first come first served among equal priorities.

use super::opr::OprRef;
use parking_lot::Mutex;
use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Entry {
    priority: i32,
    seq: u64,
    op: OprRef,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        // The heap pops the greatest: higher priority, then the earlier push.
        self.priority
            .cmp(&other.priority)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// Ready ops ordered by priority.
#[derive(Default)]
pub(crate) struct PriorityQueue {
    heap: Mutex<(BinaryHeap<Entry>, u64)>,
    /// The heap's length, readable without the lock.
    len: AtomicUsize,
}

impl PriorityQueue {
    pub(crate) fn push(&self, op: OprRef, priority: i32) {
        let mut g = self.heap.lock();
        let seq = g.1;
        g.1 += 1;
        g.0.push(Entry { priority, seq, op });
        self.len.store(g.0.len(), Ordering::Release);
    }

    pub(crate) fn pop(&self) -> Option<OprRef> {
        if self.is_empty() {
            return None;
        }
        let mut g = self.heap.lock();
        let e = g.0.pop();
        self.len.store(g.0.len(), Ordering::Release);
        e.map(|e| e.op)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len.load(Ordering::Acquire) == 0
    }
}
