//! The GPU pool on the fake driver: rounding, reuse, the reserve, and out-of-memory
//! release-and-retry ending in a clean error.

use super::*;
use crate::cuda::fake;
use crate::error::ErrorKind;
use crate::storage::Pool;

fn pool(kind: PoolKind) -> &'static GpuPool {
    let driver: &'static Driver = Box::leak(Box::new(fake::driver()));
    let p = GpuPool::new(Context::gpu(0), kind, driver, Rounding::default()).unwrap();
    Box::leak(Box::new(p))
}

#[test]
fn buckets_follow_mxnets_gpu_pool_types() {
    let naive = pool(PoolKind::Naive);
    assert_eq!(naive.bucket_of(1), 4096);
    assert_eq!(naive.bucket_of(4097), 8192);
    assert_eq!(naive.bucket_of((2 << 20) + 1), 4 << 20);
    let round = pool(PoolKind::Round);
    assert_eq!(round.bucket_of(1000), 1024);
    assert_eq!(round.bucket_of((1 << 24) + 1), 2 << 24);
}

#[test]
fn freed_blocks_are_reused_and_unpooled_ones_returned() {
    let _g = fake::TEST_LOCK.lock();
    let p = pool(PoolKind::Naive);
    let before = fake::stats();
    let a = p.alloc(10_000).unwrap();
    let addr = a.ptr();
    drop(a);
    let b = p.alloc(12_000).unwrap();
    assert_eq!(b.ptr(), addr, "same bucket, same block");
    assert_eq!(p.stats().pool_hits, 1);
    drop(b);
    p.release_all();
    assert_eq!(fake::stats().allocs - before.allocs, 1);
    assert_eq!(fake::stats().frees - before.frees, 1);
    let u = pool(PoolKind::Unpooled);
    drop(u.alloc(100).unwrap());
    assert_eq!(u.stats().bytes_pooled, 0);
    assert_eq!(fake::stats().frees - before.frees, 2);
}

#[test]
fn out_of_memory_releases_the_pool_then_fails_cleanly() {
    let _g = fake::TEST_LOCK.lock();
    fake::set_capacity(64 << 20);
    let p = pool(PoolKind::Naive);
    let kept = p.alloc(24 << 20).unwrap();
    drop(p.alloc(24 << 20).unwrap());
    assert_eq!(p.stats().bytes_pooled, 24 << 20);
    // 48 MiB more only fits once the pooled block is given back.
    let big = p.alloc(32 << 20).unwrap();
    assert_eq!(p.stats().bytes_pooled, 0);
    let e = p.alloc(32 << 20).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    assert!(e.to_string().contains("gpu(0)"), "{e}");
    drop((kept, big));
    // An injected failure is retried after releasing, so one failure is survived.
    fake::fail_next_alloc();
    drop(p.alloc(1 << 20).unwrap());
    p.release_all();
    fake::set_capacity(fake::DEFAULT_CAPACITY);
}

#[test]
fn the_reserve_releases_pooled_blocks_first() {
    let _g = fake::TEST_LOCK.lock();
    fake::set_capacity(100 << 20);
    let p = pool(PoolKind::Naive);
    drop(p.alloc(40 << 20).unwrap());
    assert_eq!(p.stats().bytes_pooled, 40 << 20);
    // 20 MiB more would leave 40 MiB free, above the 5 MiB reserve: the pool keeps its block.
    let a = p.alloc(20 << 20).unwrap();
    assert_eq!(p.stats().bytes_pooled, 40 << 20);
    // 38 MiB more would leave 2 MiB: the pooled block goes back first.
    let b = p.alloc(38 << 20).unwrap();
    assert_eq!(p.stats().bytes_pooled, 0);
    drop((a, b));
    p.release_all();
    fake::set_capacity(fake::DEFAULT_CAPACITY);
}
