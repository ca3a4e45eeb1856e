//! The host memory pool: aligned blocks kept in per-size free lists.

use super::{Block, Pool, PoolKind, Stats, ALIGNMENT};
use crate::context::Context;
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::alloc::Layout;
use std::collections::HashMap;
use std::ptr::NonNull;

/// Sizes up to 2^ROUND_CUTOFF_LOG2 round to a power of two; larger ones to whole pages.
const ROUND_CUTOFF_LOG2: u32 = 24;
const PAGE: usize = 4096;

#[derive(Default)]
struct Inner {
    free: HashMap<usize, Vec<NonNull<u8>>>,
    stats: Stats,
}

/// A pool of host memory for one context.
pub struct CpuPool {
    ctx: Context,
    kind: PoolKind,
    inner: Mutex<Inner>,
}

// SAFETY: the raw pointers in the free lists are owned by the pool and only touched under its lock.
unsafe impl Send for CpuPool {}
// SAFETY: as above.
unsafe impl Sync for CpuPool {}

impl CpuPool {
    /// An empty pool.
    pub fn new(ctx: Context, kind: PoolKind) -> CpuPool {
        CpuPool {
            ctx,
            kind,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The bucket (bytes actually reserved) a request of `size` bytes falls in.
    pub fn bucket_of(&self, size: usize) -> usize {
        let aligned = size.div_ceil(ALIGNMENT) * ALIGNMENT;
        match self.kind {
            PoolKind::Naive | PoolKind::Unpooled => aligned,
            PoolKind::Round => {
                if aligned <= 1 << ROUND_CUTOFF_LOG2 {
                    aligned.next_power_of_two()
                } else {
                    aligned.div_ceil(PAGE) * PAGE
                }
            }
        }
    }

    fn system_alloc(bucket: usize) -> Option<NonNull<u8>> {
        let layout = Layout::from_size_align(bucket, ALIGNMENT).ok()?;
        // SAFETY: layout has a non-zero size (bucket >= ALIGNMENT).
        NonNull::new(unsafe { std::alloc::alloc(layout) })
    }

    fn system_free(ptr: NonNull<u8>, bucket: usize) {
        let layout = Layout::from_size_align(bucket, ALIGNMENT).expect("valid layout");
        // SAFETY: ptr was returned by `system_alloc` with this same layout.
        unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) }
    }
}

impl Pool for CpuPool {
    fn alloc(&'static self, size: usize) -> Result<Block> {
        if size == 0 {
            let ptr = NonNull::new(ALIGNMENT as *mut u8).expect("non-null");
            return Ok(Block {
                ptr,
                size,
                bucket: 0,
                pool: self,
            });
        }
        if size > isize::MAX as usize / 2 {
            return Err(Error::OutOfMemory(format!(
                "cannot allocate {size} bytes on {}",
                self.ctx
            )));
        }
        let bucket = self.bucket_of(size);
        let reused = {
            let mut inner = self.inner.lock();
            let ptr = inner.free.get_mut(&bucket).and_then(|l| l.pop());
            let s = &mut inner.stats;
            s.bytes_in_use += bucket;
            s.peak_bytes_in_use = s.peak_bytes_in_use.max(s.bytes_in_use);
            if ptr.is_some() {
                s.bytes_pooled -= bucket;
                s.pool_hits += 1;
            } else {
                s.system_allocs += 1;
            }
            ptr
        };
        let ptr = match reused {
            Some(p) => p,
            None => match Self::system_alloc(bucket) {
                Some(p) => p,
                None => {
                    self.release_all();
                    Self::system_alloc(bucket).ok_or_else(|| {
                        self.inner.lock().stats.bytes_in_use -= bucket;
                        Error::OutOfMemory(format!(
                            "out of memory allocating {size} bytes on {}",
                            self.ctx
                        ))
                    })?
                }
            },
        };
        Ok(Block {
            ptr,
            size,
            bucket,
            pool: self,
        })
    }

    fn free(&self, ptr: NonNull<u8>, bucket: usize) {
        let mut inner = self.inner.lock();
        inner.stats.bytes_in_use -= bucket;
        if self.kind == PoolKind::Unpooled {
            drop(inner);
            Self::system_free(ptr, bucket);
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
                Self::system_free(p, bucket);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn leaked(kind: PoolKind) -> &'static CpuPool {
        Box::leak(Box::new(CpuPool::new(Context::cpu(99), kind)))
    }

    #[test]
    fn blocks_are_aligned_and_reused() {
        let pool = leaked(PoolKind::Round);
        let a = pool.alloc(100).unwrap();
        assert_eq!(a.ptr() as usize % ALIGNMENT, 0);
        let p = a.ptr();
        assert_eq!(pool.stats().bytes_in_use, 128);
        drop(a);
        assert_eq!(pool.stats().bytes_in_use, 0);
        assert_eq!(pool.stats().bytes_pooled, 128);
        let b = pool.alloc(120).unwrap();
        assert_eq!(b.ptr(), p, "same bucket reuses the block");
        assert_eq!(pool.stats().pool_hits, 1);
        drop(b);
        pool.release_all();
        assert_eq!(pool.stats().bytes_pooled, 0);
    }

    #[test]
    fn buckets() {
        let round = leaked(PoolKind::Round);
        assert_eq!(round.bucket_of(1), 64);
        assert_eq!(round.bucket_of(65), 128);
        assert_eq!(round.bucket_of(1000), 1024);
        assert_eq!(round.bucket_of((1 << 24) + 1), (1 << 24) + PAGE);
        let naive = leaked(PoolKind::Naive);
        assert_eq!(naive.bucket_of(1000), 1024);
        assert_eq!(naive.bucket_of(1090), 1152);
    }

    #[test]
    fn zero_size_and_unpooled() {
        let pool = leaked(PoolKind::Unpooled);
        let z = pool.alloc(0).unwrap();
        assert_eq!(z.size(), 0);
        drop(z);
        let a = pool.alloc(4096).unwrap();
        drop(a);
        assert_eq!(pool.stats().bytes_pooled, 0);
        assert!(pool.alloc(usize::MAX).is_err());
    }
}
