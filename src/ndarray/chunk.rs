//! A chunk: the memory and engine variable that an array and its views share.

use crate::context::Context;
use crate::engine::{self, Var};
use crate::error::Result;
use crate::storage::{self, Block};

/// Storage plus the engine variable that orders every access to it.
pub struct Chunk {
    block: Option<Block>,
    /// Memory another library owns (an array taken over DLPack), when `block` is `None`.
    foreign: Option<Foreign>,
    var: Var,
    ctx: Context,
}

/// Memory lent by its owner: where it is, and how to hand it back.
struct Foreign {
    ptr: *mut u8,
    bytes: usize,
    release: Option<Box<dyn FnOnce() + Send>>,
}

// SAFETY: the owner lends the memory for the chunk's lifetime; every access to it is
// ordered by the chunk's engine variable, as for pool memory.
unsafe impl Send for Foreign {}
// SAFETY: as above; shared references only expose the pointer value.
unsafe impl Sync for Foreign {}

impl Chunk {
    /// A chunk of `bytes` bytes on `ctx`, taken from the device's pool.
    pub fn alloc(ctx: Context, bytes: usize) -> Result<Chunk> {
        let var = engine::get().new_variable();
        Ok(Chunk {
            block: Some(storage::alloc_for(ctx, bytes, &var)?),
            foreign: None,
            var,
            ctx,
        })
    }

    /// As [`Chunk::alloc`], for an operator output whose first op writes it: memory
    /// of a dropped array may be reused with its variable, still busy with old ops.
    pub fn alloc_output(ctx: Context, bytes: usize) -> Result<Chunk> {
        match super::recycle::take(ctx, bytes) {
            Some((block, var)) => Ok(Chunk {
                block: Some(block),
                foreign: None,
                var,
                ctx,
            }),
            None => Chunk::alloc(ctx, bytes),
        }
    }

    /// A chunk over `bytes` bytes at `ptr` on `ctx`, memory another library owns;
    /// `release` hands it back once no op uses the chunk any more.
    ///
    /// # Safety
    /// The memory must stay valid, and be used by nothing else that could race with the
    /// engine's ops on it, until `release` runs.
    pub unsafe fn foreign(
        ctx: Context,
        ptr: *mut u8,
        bytes: usize,
        release: Box<dyn FnOnce() + Send>,
    ) -> Chunk {
        let var = engine::get().new_variable();
        // The owner may write the memory without the engine.
        var.mark_untracked();
        Chunk {
            block: None,
            foreign: Some(Foreign {
                ptr,
                bytes,
                release: Some(release),
            }),
            var,
            ctx,
        }
    }

    /// The engine variable.
    pub fn var(&self) -> &Var {
        &self.var
    }

    /// The device.
    pub fn context(&self) -> Context {
        self.ctx
    }

    /// Start of the memory.
    pub fn ptr(&self) -> *mut u8 {
        match (&self.block, &self.foreign) {
            (Some(b), _) => b.ptr(),
            (None, Some(f)) => f.ptr,
            (None, None) => std::ptr::null_mut(),
        }
    }

    /// Bytes in the chunk.
    pub fn bytes(&self) -> usize {
        match (&self.block, &self.foreign) {
            (Some(b), _) => b.size(),
            (None, Some(f)) => f.bytes,
            (None, None) => 0,
        }
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        if let Some(release) = self.foreign.as_mut().and_then(|f| f.release.take()) {
            // Handed back once the ops queued on the memory have run.
            engine::get().delete_variable(
                Box::new(move |_| {
                    release();
                    Ok(())
                }),
                self.ctx,
                &self.var,
            );
            return;
        }
        let block = self.block.take();
        let var = self.var.clone();
        if var.is_idle() {
            release(block, &var);
            return;
        }
        match block {
            Some(b) => {
                if let Err((b, var)) = super::recycle::keep(self.ctx, b, var) {
                    retire(self.ctx, Some(b), var);
                }
            }
            None => retire(self.ctx, None, var),
        }
    }
}

/// Returns `block` to its pool once every op queued on `var` has run.
pub(super) fn retire(ctx: Context, block: Option<Block>, var: Var) {
    let on_its_way = block
        .as_ref()
        .filter(|b| !b.context().is_cpu())
        .map(storage::queued_return);
    engine::get().delete_variable(
        Box::new({
            let var = var.clone();
            move |_| {
                release(block, &var);
                drop(on_its_way);
                Ok(())
            }
        }),
        ctx,
        &var,
    );
}

/// Returns a chunk's memory to its pool once the engine is done with it: GPU memory only
/// after the device has also finished the work enqueued on it.
fn release(block: Option<Block>, var: &Var) {
    match block {
        Some(b) if !b.context().is_cpu() => {
            storage::free_after(b, crate::cuda::sync::fence_of(var))
        }
        other => drop(other),
    }
}
