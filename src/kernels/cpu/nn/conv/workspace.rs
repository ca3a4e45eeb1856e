//! Scratch memory for the column matrices, taken from the device's pool for one kernel
//! run (the operators ask for `ResourceRequest::TempSpace`): the pool keeps freed blocks,
//! so a training loop reuses the same pages rather than faulting in new ones each step.

use crate::context::DeviceType;
use crate::error::{Error, Result};
use crate::kernels::cpu::num::Num;
use crate::op::OpContext;
use crate::storage::{Block, ALIGNMENT};
use std::marker::PhantomData;

/// `len` elements of `T` of host scratch memory whose contents are unspecified: a kernel
/// writes what it reads.
pub struct Workspace<T> {
    block: Block,
    len: usize,
    _elem: PhantomData<T>,
}

impl<T: Num> Workspace<T> {
    /// Takes `len` elements from the pool of `ctx`'s device for `op`.
    pub fn new(ctx: &OpContext, op: &str, len: usize) -> Result<Self> {
        const { assert!(std::mem::align_of::<T>() <= ALIGNMENT) };
        let bytes = len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
            Error::OutOfMemory(format!("{op}: temporary space of {len} elements"))
        })?;
        let block = ctx.temp_space(op, bytes)?;
        if block.context().dev_type == DeviceType::Gpu {
            return Err(Error::Runtime(format!(
                "{op}: the CPU kernel was given device memory as temporary space"
            )));
        }
        Ok(Workspace {
            block,
            len,
            _elem: PhantomData,
        })
    }

    /// The scratch elements.
    pub fn slice_mut(&mut self) -> &mut [T] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: the block is host memory of at least `len * size_of::<T>()` bytes,
        // aligned to `ALIGNMENT` (checked above to cover `T`'s alignment) and owned by this
        // workspace alone, which the returned borrow keeps exclusive; every bit pattern is a
        // valid value of the numeric types `Num` covers (as for an array fresh from the
        // pool, the contents are unspecified until written).
        unsafe { std::slice::from_raw_parts_mut(self.block.ptr() as *mut T, self.len) }
    }
}
