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
        if self.var.is_idle() {
            release(block, &self.var);
        } else {
            // Memory returns to the pool only after every queued op on it has run.
            let var = self.var.clone();
            let on_its_way = block
                .as_ref()
                .filter(|b| !b.context().is_cpu())
                .map(storage::queued_return);
            engine::get().delete_variable(
                Box::new(move |_| {
                    release(block, &var);
                    drop(on_its_way);
                    Ok(())
                }),
                self.ctx,
                &self.var,
            );
        }
    }
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
