//! Memory pools per device: blocks in size buckets, reused after free, with byte counters
//! and a release-all (`pooled`), over host memory (`cpu`) or a GPU's (`gpu`).

mod cpu;
mod fenced;
pub mod gpu;
mod pooled;
mod queued;

pub use cpu::CpuPool;
pub use pooled::{Pooled, Source};
pub use queued::OnItsWay;

use crate::context::Context;
use crate::engine::env_var;
use crate::error::Result;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::OnceLock;

/// Alignment of every block, in bytes.
pub const ALIGNMENT: usize = 64;

/// How a pool rounds request sizes into buckets (MXNet's pool types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolKind {
    /// Exact sizes (rounded to the alignment only).
    Naive,
    /// Powers of two up to a cutoff, then multiples of a page.
    Round,
    /// No pooling: every free returns memory to the system.
    Unpooled,
}

impl PoolKind {
    /// The kind for MXNet's name (`Naive`, `Round`, `Unpooled`).
    pub fn from_name(name: &str) -> Option<PoolKind> {
        match name.trim() {
            "Naive" => Some(PoolKind::Naive),
            "Round" | "" => Some(PoolKind::Round),
            "Unpooled" => Some(PoolKind::Unpooled),
            _ => None,
        }
    }
}

/// Byte counters of one pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Bytes in blocks handed out and not yet freed (bucket sizes).
    pub bytes_in_use: usize,
    /// Bytes in free blocks the pool keeps for reuse.
    pub bytes_pooled: usize,
    /// The most bytes ever in use at once.
    pub peak_bytes_in_use: usize,
    /// Allocations served from the pool without asking the system.
    pub pool_hits: usize,
    /// Allocations that asked the system.
    pub system_allocs: usize,
}

/// A device memory pool.
pub trait Pool: Send + Sync {
    /// A block of at least `size` bytes.
    fn alloc(&'static self, size: usize) -> Result<Block>;
    /// A free pooled block for `size` bytes (more than 0), never new memory.
    fn reuse(&'static self, size: usize) -> Option<Block>;
    /// The bucket (bytes actually reserved) a request of `size` bytes falls in.
    fn bucket_of(&self, size: usize) -> usize;
    /// Returns a block's memory to the pool (called by `Block::drop`).
    fn free(&self, ptr: NonNull<u8>, bucket: usize);
    /// Gives every pooled free block back to the system.
    fn release_all(&self);
    /// The pool's counters.
    fn stats(&self) -> Stats;
    /// The device the pool serves.
    fn context(&self) -> Context;
}

/// An allocated block; its memory goes back to its pool when dropped.
pub struct Block {
    ptr: NonNull<u8>,
    size: usize,
    bucket: usize,
    pool: &'static dyn Pool,
}

// SAFETY: a Block owns its memory exclusively; the pool it returns to is Sync.
unsafe impl Send for Block {}
// SAFETY: shared references only expose the pointer value; access is ordered by the engine.
unsafe impl Sync for Block {}

impl Block {
    fn new(ptr: NonNull<u8>, size: usize, bucket: usize, pool: &'static dyn Pool) -> Block {
        Block {
            ptr,
            size,
            bucket,
            pool,
        }
    }

    /// A block of no bytes: an aligned dangling pointer that is never freed.
    fn empty(pool: &'static dyn Pool) -> Block {
        let ptr = NonNull::new(ALIGNMENT as *mut u8).expect("non-null");
        Block::new(ptr, 0, 0, pool)
    }

    /// Start of the block (aligned to `ALIGNMENT`; dangling but aligned for size 0).
    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Bytes requested.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The device the block lives on.
    pub fn context(&self) -> Context {
        self.pool.context()
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        if self.bucket > 0 {
            self.pool.free(self.ptr, self.bucket);
            note_use(self.pool);
        }
    }
}

/// Records the bytes `pool` has in use, while the profiler records memory.
fn note_use(pool: &dyn Pool) {
    if crate::profiler::memory_active() {
        crate::profiler::record_memory(pool.context(), pool.stats().bytes_in_use);
    }
}

static POOLS: OnceLock<Mutex<HashMap<Context, &'static dyn Pool>>> = OnceLock::new();

fn pool_kind_from_env() -> PoolKind {
    let name = env_var("RSMX_CPU_MEM_POOL_TYPE", "MXNET_CPU_MEM_POOL_TYPE").unwrap_or_default();
    PoolKind::from_name(&name).unwrap_or(PoolKind::Round)
}

/// The pool of a device, made on first use.
pub fn pool(ctx: Context) -> Result<&'static dyn Pool> {
    let mut pools = POOLS.get_or_init(Default::default).lock();
    if let Some(p) = pools.get(&ctx) {
        return Ok(*p);
    }
    let p: &'static dyn Pool = if ctx.is_cpu() {
        Box::leak(Box::new(CpuPool::new(ctx, pool_kind_from_env())))
    } else {
        let (rt, _) = crate::cuda::runtime::for_context(ctx)?;
        let name = env_var("RSMX_GPU_MEM_POOL_TYPE", "MXNET_GPU_MEM_POOL_TYPE").unwrap_or_default();
        let kind = PoolKind::from_name(&name).unwrap_or(PoolKind::Naive);
        Box::leak(Box::new(gpu::GpuPool::new(
            ctx,
            kind,
            rt.driver,
            gpu::Rounding::from_env(),
        )?))
    };
    pools.insert(ctx, p);
    Ok(p)
}

/// Allocates `size` bytes on `ctx`, ready for host code: on a GPU, the host waits for
/// the block's earlier users.
pub fn alloc(ctx: Context, size: usize) -> Result<Block> {
    let block = pool(ctx)?.alloc(size)?;
    note_use(block.pool);
    if !ctx.is_cpu() {
        for e in fenced::take(block.ptr()) {
            e.synchronize()?;
        }
    }
    Ok(block)
}

/// Allocates `size` bytes on `ctx` for an array whose accesses `var` orders: on a GPU,
/// the events of the block's earlier users become the variable's, so the first GPU op
/// writing it waits for them on the device.
pub fn alloc_for(ctx: Context, size: usize, var: &crate::engine::Var) -> Result<Block> {
    let pool = pool(ctx)?;
    if ctx.is_cpu() {
        let block = pool.alloc(size)?;
        note_use(pool);
        return Ok(block);
    }
    let block = match reuse_queued(pool, size) {
        Some(b) => b,
        None => pool.alloc(size)?,
    };
    note_use(pool);
    crate::cuda::sync::adopt_fence(var, fenced::take(block.ptr()));
    Ok(block)
}

/// On a host thread that runs ahead of the engine: a pooled block of `size`'s bucket,
/// waiting briefly for one whose return is queued. Engine workers never wait here, since
/// the queued returns may be theirs to run.
fn reuse_queued(pool: &'static dyn Pool, size: usize) -> Option<Block> {
    if size == 0 || crate::engine::is_worker_thread() {
        return None;
    }
    let bucket = pool.bucket_of(size);
    pool.reuse(size)
        .or_else(|| queued::wait_for(pool.context(), bucket, || pool.reuse(size)))
}

/// Marks a block as on its way back to its pool until the returned guard is dropped.
pub fn queued_return(block: &Block) -> queued::OnItsWay {
    queued::OnItsWay::new(block.context(), block.bucket)
}

/// Allocates `size` bytes on GPU `ctx` with the events of the block's earlier users,
/// which the new user's stream must wait for before touching it.
pub fn alloc_fenced(
    ctx: Context,
    size: usize,
) -> Result<(Block, Vec<crate::cuda::runtime::Event>)> {
    let block = pool(ctx)?.alloc(size)?;
    note_use(block.pool);
    let fence = fenced::take(block.ptr());
    Ok((block, fence))
}

/// Returns `block` to its pool, reusable at once by a user that first waits for every
/// event of `fence` (the GPU work still using it).
pub fn free_after(block: Block, fence: Vec<crate::cuda::runtime::Event>) {
    fenced::set(block.ptr(), fence);
    drop(block);
}

/// Counters of the pool of `ctx`.
pub fn stats(ctx: Context) -> Result<Stats> {
    Ok(pool(ctx)?.stats())
}

/// Releases the pooled free blocks of `ctx`.
pub fn release_all(ctx: Context) -> Result<()> {
    pool(ctx)?.release_all();
    Ok(())
}
