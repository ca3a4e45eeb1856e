//! Pinned host blocks that copies between pageable host memory and a GPU pass through.
//! A host-to-device copy returns as soon as its bytes are staged, without waiting for
//! the device; a block is used again once the event recorded after its copy has passed.

use super::driver::Driver;
use super::runtime::Event;
use crate::cu;
use crate::error::Result;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;

/// The largest block: longer copies go through in pieces of this size.
pub const CHUNK: usize = 4 << 20;
/// The smallest block (pinning is a system call; tiny blocks would be many).
const MIN_BLOCK: usize = 64 << 10;
/// Pinned bytes a device holds before a copy waits for a busy block of its size
/// instead of pinning another.
const CAP: usize = 64 << 20;
/// `CU_MEMHOSTALLOC_PORTABLE`: the block is pinned for every context.
const PORTABLE: u32 = 1;

/// A pinned block and the event after the last copy that used it.
pub struct Block {
    ptr: *mut u8,
    size: usize,
    fence: Option<Event>,
}

// SAFETY: the block is plain host memory owned by the pool; the event is Send.
unsafe impl Send for Block {}

impl Block {
    /// The block's first byte.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }
}

/// A device's staging blocks, free ones in queues by size (oldest use first).
#[derive(Default)]
pub struct Staging {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    free: HashMap<usize, VecDeque<Block>>,
    pinned: usize,
}

impl Staging {
    /// A block of at least `len` bytes (at most [`CHUNK`]) whose earlier copies are done:
    /// a free one, else a newly pinned one while the device holds less than the cap,
    /// else the oldest busy one of that size once its copy has passed.
    pub fn take(&self, driver: &Driver, len: usize) -> Result<Block> {
        let size = len.clamp(MIN_BLOCK, CHUNK).next_power_of_two();
        loop {
            let mut inner = self.inner.lock();
            let queue = inner.free.entry(size).or_default();
            let oldest = queue.front().map(|b| b.fence.clone());
            match oldest {
                Some(None) => return Ok(queue.pop_front().expect("front exists")),
                Some(Some(fence)) if fence.is_done()? => {
                    let mut b = queue.pop_front().expect("front exists");
                    b.fence = None;
                    return Ok(b);
                }
                Some(Some(fence)) if inner.pinned + size > CAP => {
                    drop(inner);
                    super::runtime::count_staging_wait();
                    fence.synchronize()?;
                }
                _ => {
                    inner.pinned += size;
                    drop(inner);
                    return self.pin(driver, size);
                }
            }
        }
    }

    /// Returns `block` to the pool; `fence` (when given) follows the copy that used it.
    pub fn give(&self, mut block: Block, fence: Option<Event>) {
        block.fence = fence;
        self.inner
            .lock()
            .free
            .entry(block.size)
            .or_default()
            .push_back(block);
    }

    /// Pinned bytes the pool holds.
    pub fn pinned_bytes(&self) -> usize {
        self.inner.lock().pinned
    }

    fn pin(&self, driver: &Driver, size: usize) -> Result<Block> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: `ptr` is a writable local; the caller's thread has a current context.
        let pinned = unsafe { cu!(driver, mem_host_alloc(&mut ptr, size, PORTABLE)) };
        if let Err(e) = pinned {
            self.inner.lock().pinned -= size;
            return Err(e);
        }
        Ok(Block {
            ptr: ptr.cast(),
            size,
            fence: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::fake;

    #[test]
    fn blocks_are_sized_in_powers_of_two_and_reused_once_free() {
        let d = fake::driver();
        let pool = Staging::default();
        let small = pool.take(&d, 10).unwrap();
        assert_eq!(small.size, MIN_BLOCK);
        let big = pool.take(&d, CHUNK + 1).unwrap();
        assert_eq!(big.size, CHUNK);
        let odd = pool.take(&d, MIN_BLOCK + 1).unwrap();
        assert_eq!(odd.size, 2 * MIN_BLOCK);
        assert_eq!(pool.pinned_bytes(), 3 * MIN_BLOCK + CHUNK);
        let first = small.ptr();
        pool.give(small, None);
        let again = pool.take(&d, 100).unwrap();
        assert_eq!(again.ptr(), first);
        assert_eq!(pool.pinned_bytes(), 3 * MIN_BLOCK + CHUNK);
        for b in [again, big, odd] {
            pool.give(b, None);
        }
    }

    #[test]
    fn a_failed_pin_takes_nothing() {
        let d = fake::driver();
        let pool = Staging::default();
        let mut refusing = d;
        refusing.mem_host_alloc = refuse;
        assert!(pool.take(&refusing, 10).is_err());
        assert_eq!(pool.pinned_bytes(), 0);
    }

    unsafe extern "C" fn refuse(_: *mut *mut c_void, _: usize, _: u32) -> i32 {
        crate::cuda::driver::OUT_OF_MEMORY
    }
}
