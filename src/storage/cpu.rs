//! The host memory pool: aligned blocks kept in per-size free lists.

use super::{PoolKind, Pooled, Source, ALIGNMENT};
use crate::context::Context;
use std::alloc::Layout;
use std::ptr::NonNull;

/// Sizes up to 2^ROUND_CUTOFF_LOG2 round to a power of two; larger ones to whole pages.
const ROUND_CUTOFF_LOG2: u32 = 24;
const PAGE: usize = 4096;

/// Host memory from the global allocator, aligned to [`ALIGNMENT`].
pub struct HostMemory;

/// A pool of host memory for one context.
pub type CpuPool = Pooled<HostMemory>;

impl CpuPool {
    /// An empty pool.
    pub fn new(ctx: Context, kind: PoolKind) -> CpuPool {
        Pooled::over(ctx, kind, HostMemory)
    }
}

impl Source for HostMemory {
    fn alloc(&self, bucket: usize) -> Option<NonNull<u8>> {
        let layout = Layout::from_size_align(bucket, ALIGNMENT).ok()?;
        // SAFETY: layout has a non-zero size (bucket >= ALIGNMENT).
        NonNull::new(unsafe { std::alloc::alloc(layout) })
    }

    fn free(&self, ptr: NonNull<u8>, bucket: usize) {
        let layout = Layout::from_size_align(bucket, ALIGNMENT).expect("valid layout");
        // SAFETY: ptr was returned by `alloc` with this same layout.
        unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) }
    }

    fn bucket_of(&self, kind: PoolKind, size: usize) -> usize {
        let aligned = size.div_ceil(ALIGNMENT) * ALIGNMENT;
        match kind {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Pool;

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
