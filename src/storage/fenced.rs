//! The fences of GPU blocks back in their pool: the events of the last users of a freed
//! block, which its next user's stream waits for on the device before touching it. A
//! block is reusable at once; ordering is carried by events, never by a host wait.

use crate::cuda::runtime::Event;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::LazyLock;

static FENCES: LazyLock<Mutex<HashMap<usize, Vec<Event>>>> = LazyLock::new(Mutex::default);

/// Records that the block at `ptr` is in use by the GPU work before `fence`.
pub fn set(ptr: *mut u8, fence: Vec<Event>) {
    if !fence.is_empty() {
        FENCES.lock().insert(ptr as usize, fence);
    }
}

/// The fence of the block at `ptr` (empty for none), now its new owner's to honour.
pub fn take(ptr: *mut u8) -> Vec<Event> {
    let mut fences = FENCES.lock();
    if fences.is_empty() {
        return Vec::new();
    }
    fences.remove(&(ptr as usize)).unwrap_or_default()
}
