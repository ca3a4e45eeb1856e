//! A pool over any source of device memory: free blocks kept per bucket size for reuse,
//! byte counters, and on a failed allocation a release of every pooled block and one
//! retry before the out-of-memory error.

use super::{Block, Pool, PoolKind, Stats};
use crate::context::Context;
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ptr::NonNull;

/// Where a pool's memory comes from: the host allocator or a device's driver.
pub trait Source: Send + Sync {
    /// A new block of `bucket` bytes, or `None` when the device has no room.
    fn alloc(&self, bucket: usize) -> Option<NonNull<u8>>;
    /// Gives a block from `alloc` back.
    fn free(&self, ptr: NonNull<u8>, bucket: usize);
    /// The bucket a request of `size` (non-zero) bytes falls in.
    fn bucket_of(&self, kind: PoolKind, size: usize) -> usize;
    /// True if pooled blocks should be released before asking for `bucket` more bytes
    /// (the GPU pool keeps a share of the device free).
    fn needs_room(&self, _bucket: usize) -> bool {
        false
    }
}

#[derive(Default)]
struct Inner {
    free: HashMap<usize, Vec<NonNull<u8>>>,
    stats: Stats,
}

/// A pool of `kind` over `source` for one device.
pub struct Pooled<S> {
    ctx: Context,
    kind: PoolKind,
    source: S,
    inner: Mutex<Inner>,
}

// SAFETY: the pointers in the free lists are owned by the pool and only touched under its
// lock; the source is Send + Sync.
unsafe impl<S: Source> Send for Pooled<S> {}
// SAFETY: as above.
unsafe impl<S: Source> Sync for Pooled<S> {}

impl<S: Source> Pooled<S> {
    /// An empty pool.
    pub fn over(ctx: Context, kind: PoolKind, source: S) -> Pooled<S> {
        Pooled {
            ctx,
            kind,
            source,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The memory source.
    pub fn source(&self) -> &S {
        &self.source
    }

    fn new_block(&self, bucket: usize, size: usize) -> Result<NonNull<u8>> {
        if self.source.needs_room(bucket) {
            self.release_all();
        }
        if let Some(p) = self.source.alloc(bucket) {
            return Ok(p);
        }
        self.release_all();
        self.source.alloc(bucket).ok_or_else(|| {
            Error::OutOfMemory(format!(
                "out of memory allocating {size} bytes on {}",
                self.ctx
            ))
        })
    }
}

impl<S: Source> Pool for Pooled<S> {
    fn alloc(&'static self, size: usize) -> Result<Block> {
        if size == 0 {
            return Ok(Block::empty(self));
        }
        if size > isize::MAX as usize / 2 {
            return Err(Error::OutOfMemory(format!(
                "cannot allocate {size} bytes on {}",
                self.ctx
            )));
        }
        if let Some(b) = self.reuse(size) {
            return Ok(b);
        }
        let bucket = self.bucket_of(size);
        self.inner.lock().stats.system_allocs += 1;
        let ptr = self.new_block(bucket, size)?;
        let mut inner = self.inner.lock();
        let s = &mut inner.stats;
        s.bytes_in_use += bucket;
        s.peak_bytes_in_use = s.peak_bytes_in_use.max(s.bytes_in_use);
        Ok(Block::new(ptr, size, bucket, self))
    }

    fn reuse(&'static self, size: usize) -> Option<Block> {
        let bucket = self.bucket_of(size);
        let mut inner = self.inner.lock();
        let ptr = inner.free.get_mut(&bucket).and_then(|l| l.pop())?;
        let s = &mut inner.stats;
        s.bytes_pooled -= bucket;
        s.pool_hits += 1;
        s.bytes_in_use += bucket;
        s.peak_bytes_in_use = s.peak_bytes_in_use.max(s.bytes_in_use);
        Some(Block::new(ptr, size, bucket, self))
    }

    fn bucket_of(&self, size: usize) -> usize {
        self.source.bucket_of(self.kind, size)
    }

    fn free(&self, ptr: NonNull<u8>, bucket: usize) {
        let mut inner = self.inner.lock();
        inner.stats.bytes_in_use -= bucket;
        if self.kind == PoolKind::Unpooled {
            drop(inner);
            self.source.free(ptr, bucket);
            return;
        }
        inner.stats.bytes_pooled += bucket;
        inner.free.entry(bucket).or_default().push(ptr);
    }

    fn release_all(&self) {
        let free = {
            let mut inner = self.inner.lock();
            inner.stats.bytes_pooled = 0;
            std::mem::take(&mut inner.free)
        };
        for (bucket, ptrs) in free {
            for p in ptrs {
                self.source.free(p, bucket);
            }
        }
    }

    fn stats(&self) -> Stats {
        self.inner.lock().stats
    }

    fn context(&self) -> Context {
        self.ctx
    }
}
