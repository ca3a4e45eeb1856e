//! Scratch device memory for one GPU kernel: ordered after the block's earlier users on
//! the op's stream, and given back fenced by an event recorded after the kernel's work.

use crate::cuda::runtime::for_context;
use crate::engine::StreamHandle;
use crate::error::{Error, Result};
use crate::op::OpContext;
use crate::storage::{self, Block};

/// A block of device memory owned by the running GPU op.
pub struct Temp {
    block: Option<Block>,
    stream: StreamHandle,
    device: crate::context::Context,
}

impl Temp {
    /// `bytes` bytes on the op's device, usable by the work it enqueues next.
    pub fn new(ctx: &OpContext, bytes: usize) -> Result<Temp> {
        let stream = ctx
            .stream
            .ok_or_else(|| Error::Runtime("GPU scratch memory outside a GPU op".into()))?;
        let (block, fence) = storage::alloc_fenced(ctx.device, bytes)?;
        for e in fence {
            e.wait_on(stream)?;
        }
        Ok(Temp {
            block: Some(block),
            stream,
            device: ctx.device,
        })
    }

    pub fn ptr(&self) -> *mut u8 {
        self.block
            .as_ref()
            .map_or(std::ptr::null_mut(), |b| b.ptr())
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let Some(block) = self.block.take() else {
            return;
        };
        let fence = for_context(self.device)
            .and_then(|(rt, dev)| dev.record(rt.driver, self.stream))
            .map(|e| vec![e]);
        match fence {
            Ok(f) => storage::free_after(block, f),
            // No event: wait for the stream on the host rather than free memory in use.
            Err(_) => {
                if let Ok((rt, _)) = for_context(self.device) {
                    // SAFETY: the op's live stream.
                    let _ =
                        unsafe { crate::cu!(rt.driver, stream_synchronize(self.stream.as_raw())) };
                }
                drop(block)
            }
        }
    }
}
