//! NDArray: a shape, a dtype and an offset into a shared chunk; views share the chunk and
//! its engine variable, so writes through a view are ordered with the parent.

mod blob;
mod borrow;
mod chunk;
pub mod copy;
pub mod io;
pub mod recycle;
pub mod serialize;

pub use blob::{InOut, TBlob};
pub use borrow::track_borrows;
pub use chunk::Chunk;
pub use copy::copy_into;

use crate::context::Context;
use crate::dtype::DType;
use crate::engine::{self, PushSpec, Var};
use crate::error::{Error, Result};
use crate::shape::{fmt_shape, size_of, Shape};
use std::sync::Arc;

/// An n-dimensional array on a device, computed asynchronously by the engine.
#[derive(Clone)]
pub struct NDArray {
    chunk: Arc<Chunk>,
    shape: Shape,
    /// Offset of the first element, in elements of `dtype`.
    offset: usize,
    dtype: DType,
}

impl NDArray {
    /// A new array with uninitialised contents.
    pub fn empty(shape: &[usize], dtype: DType, ctx: Context) -> Result<NDArray> {
        let n = Self::bytes_for(shape, dtype)?;
        Ok(Self::over(Chunk::alloc(ctx, n)?, shape, dtype))
    }

    /// A new array for an operator output, which the next op pushed on it must write
    /// (it may reuse the memory of a dropped array whose ops are still queued).
    pub fn empty_output(shape: &[usize], dtype: DType, ctx: Context) -> Result<NDArray> {
        let n = Self::bytes_for(shape, dtype)?;
        Ok(Self::over(Chunk::alloc_output(ctx, n)?, shape, dtype))
    }

    fn bytes_for(shape: &[usize], dtype: DType) -> Result<usize> {
        shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .and_then(|n| n.checked_mul(dtype.size()))
            .ok_or_else(|| Error::Value(format!("shape {} is too large", fmt_shape(shape))))
    }

    fn over(chunk: Chunk, shape: &[usize], dtype: DType) -> NDArray {
        NDArray {
            chunk: Arc::new(chunk),
            shape: Shape::from_slice(shape),
            offset: 0,
            dtype,
        }
    }

    /// An array of `shape` and `dtype` over memory another library owns (an array taken
    /// over DLPack), without a copy; `release` hands the memory back once the array and
    /// the ops on it are gone.
    ///
    /// # Safety
    /// `ptr` must point to `size_of(shape) * dtype.size()` bytes on `ctx` that stay valid,
    /// and that nothing else writes while rsmx may use them, until `release` runs.
    pub unsafe fn foreign(
        ctx: Context,
        ptr: *mut u8,
        shape: &[usize],
        dtype: DType,
        release: Box<dyn FnOnce() + Send>,
    ) -> Result<NDArray> {
        if !(ptr as usize).is_multiple_of(dtype.size()) {
            release();
            return Err(Error::Value(format!(
                "memory at {ptr:p} is not aligned for dtype {dtype}"
            )));
        }
        let n = match Self::bytes_for(shape, dtype) {
            Ok(n) => n,
            Err(e) => {
                release();
                return Err(e);
            }
        };
        // SAFETY: the caller's guarantees are the chunk's.
        let chunk = unsafe { Chunk::foreign(ctx, ptr, n, release) };
        Ok(Self::over(chunk, shape, dtype))
    }

    /// An array of `shape` and `dtype` over the start of `chunk`, which must be big enough.
    pub fn from_chunk(chunk: Arc<Chunk>, shape: &[usize], dtype: DType) -> Result<NDArray> {
        let need = size_of(shape) * dtype.size();
        if need > chunk.bytes() {
            return Err(Error::Value(format!(
                "an array of shape {} and dtype {dtype} needs {need} bytes, the chunk has {}",
                fmt_shape(shape),
                chunk.bytes()
            )));
        }
        Ok(NDArray {
            chunk,
            shape: Shape::from_slice(shape),
            offset: 0,
            dtype,
        })
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The device.
    pub fn context(&self) -> Context {
        self.chunk.context()
    }

    /// Number of elements.
    pub fn size(&self) -> usize {
        size_of(&self.shape)
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// The engine variable that orders access to the memory.
    pub fn var(&self) -> &Var {
        self.chunk.var()
    }

    /// The chunk shared with views.
    pub fn chunk(&self) -> &Arc<Chunk> {
        &self.chunk
    }

    /// Offset into the chunk, in elements.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// True if both arrays use the same chunk.
    pub fn same_chunk(&self, other: &NDArray) -> bool {
        Arc::ptr_eq(&self.chunk, &other.chunk)
    }

    /// True if the two arrays may overlap in memory.
    pub fn overlaps(&self, other: &NDArray) -> bool {
        if !self.same_chunk(other) {
            return false;
        }
        let (a0, a1) = self.byte_range();
        let (b0, b1) = other.byte_range();
        a0 < b1 && b0 < a1
    }

    fn byte_range(&self) -> (usize, usize) {
        let start = self.offset * self.dtype.size();
        (start, start + self.size() * self.dtype.size())
    }

    /// A kernel's view of the memory; only use it inside an engine op that lists `var()`.
    pub fn blob(&self) -> TBlob {
        let base = self.chunk.ptr();
        let ptr = if base.is_null() || self.size() == 0 {
            base
        } else {
            // SAFETY: offset + size lies within the chunk (views are checked when made).
            unsafe { base.add(self.offset * self.dtype.size()) }
        };
        TBlob::on_device(ptr, self.shape.clone(), self.dtype, self.context())
    }

    /// The array with the same data seen as `shape` (same number of elements).
    pub fn reshape_view(&self, shape: &[usize]) -> Result<NDArray> {
        if size_of(shape) != self.size() {
            return Err(Error::Value(format!(
                "reshape: cannot view an array of shape {} as {}",
                fmt_shape(&self.shape),
                fmt_shape(shape)
            )));
        }
        Ok(NDArray {
            chunk: self.chunk.clone(),
            shape: Shape::from_slice(shape),
            offset: self.offset,
            dtype: self.dtype,
        })
    }

    /// Rows `begin..end` of the first axis, sharing memory.
    pub fn slice_view(&self, begin: usize, end: usize) -> Result<NDArray> {
        if self.ndim() == 0 {
            return Err(Error::Index(
                "cannot slice a 0-dimensional array".to_string(),
            ));
        }
        if begin > end || end > self.shape[0] {
            return Err(Error::Index(format!(
                "slice [{begin}:{end}] is out of range for axis 0 of an array of shape {}",
                fmt_shape(&self.shape)
            )));
        }
        let row = size_of(&self.shape[1..]);
        let mut shape = self.shape.clone();
        shape[0] = end - begin;
        Ok(NDArray {
            chunk: self.chunk.clone(),
            shape,
            offset: self.offset + begin * row,
            dtype: self.dtype,
        })
    }

    /// Row `i` of the first axis without that axis, sharing memory.
    pub fn at_view(&self, i: usize) -> Result<NDArray> {
        let s = self.slice_view(i, i + 1)?;
        s.reshape_view(&self.shape[1..])
    }

    /// Blocks until every pending write is done; returns a stored error.
    pub fn wait_to_read(&self) -> Result<()> {
        engine::get().wait_for_var(self.var())
    }

    /// Blocks until every pending read and write is done; returns a stored error.
    pub fn wait_to_write(&self) -> Result<()> {
        let e = engine::get();
        let (tx, rx) = std::sync::mpsc::channel();
        e.push_sync(
            Box::new(move |_| {
                let _ = tx.send(());
                Ok(())
            }),
            PushSpec::new(
                "WaitToWrite",
                self.context(),
                &[],
                std::slice::from_ref(self.var()),
            ),
        );
        let _ = rx.recv();
        e.wait_for_var(self.var())
    }

    /// Copies the contents out as host bytes (waits for pending writes).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        copy::to_host_bytes(self)
    }

    /// Overwrites the contents from host bytes, ordered after pending work.
    pub fn write_bytes(&self, data: Vec<u8>) -> Result<()> {
        copy::write_from_host(self, data)
    }
}
