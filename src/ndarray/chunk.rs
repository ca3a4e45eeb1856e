//! A chunk: the memory and engine variable that an array and its views share.

use crate::context::Context;
use crate::engine::{self, Var};
use crate::error::Result;
use crate::storage::{self, Block};

/// Storage plus the engine variable that orders every access to it.
pub struct Chunk {
    block: Option<Block>,
    var: Var,
    ctx: Context,
}

impl Chunk {
    /// A chunk of `bytes` bytes on `ctx`, taken from the device's pool.
    pub fn alloc(ctx: Context, bytes: usize) -> Result<Chunk> {
        let var = engine::get().new_variable();
        Ok(Chunk {
            block: Some(storage::alloc_for(ctx, bytes, &var)?),
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
                var,
                ctx,
            }),
            None => Chunk::alloc(ctx, bytes),
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
        self.block
            .as_ref()
            .map_or(std::ptr::null_mut(), |b| b.ptr())
    }

    /// Bytes in the chunk.
    pub fn bytes(&self) -> usize {
        self.block.as_ref().map_or(0, |b| b.size())
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
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
