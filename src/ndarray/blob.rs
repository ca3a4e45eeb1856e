//! TBlob: a kernel's view of an array's memory, tagged with the device it lives on. Typed
//! host slices exist only for host memory; in-place access has its own form ([`InOut`]).

use super::borrow;
use crate::context::Context;
use crate::dtype::{DType, Element};
use crate::shape::{size_of, Shape};

/// A raw view of an array's memory for kernels: valid while the op that got it runs.
#[derive(Clone, Debug)]
pub struct TBlob {
    ptr: *mut u8,
    /// The shape of the view.
    pub shape: Shape,
    /// The element type.
    pub dtype: DType,
    ctx: Context,
}

// SAFETY: a TBlob is handed to exactly one engine op, which the engine orders against every
// other access to the same memory.
unsafe impl Send for TBlob {}
// SAFETY: as above.
unsafe impl Sync for TBlob {}

/// An input and an output of an element-wise kernel: the same memory (in place) or two
/// separate buffers, so a kernel never holds a shared and a mutable slice over the same
/// bytes.
pub enum InOut<'a, T> {
    /// The output is the input: read and write through one slice.
    Same(&'a mut [T]),
    /// Separate input and output.
    Apart(&'a [T], &'a mut [T]),
}

impl<T> InOut<'_, T> {
    /// The input values.
    pub fn input(&self) -> &[T] {
        match self {
            InOut::Same(o) => o,
            InOut::Apart(x, _) => x,
        }
    }
}

impl TBlob {
    /// A blob over raw host memory (the caller guarantees it stays valid and ordered).
    pub fn from_raw(ptr: *mut u8, shape: Shape, dtype: DType) -> TBlob {
        TBlob::on_device(ptr, shape, dtype, Context::cpu(0))
    }

    /// A blob over memory of device `ctx`.
    pub fn on_device(ptr: *mut u8, shape: Shape, dtype: DType, ctx: Context) -> TBlob {
        TBlob {
            ptr,
            shape,
            dtype,
            ctx,
        }
    }

    /// The same memory seen with another shape of the same size.
    pub fn with_shape(&self, shape: &[usize]) -> TBlob {
        assert_eq!(size_of(shape), self.size(), "reshaped blob size");
        TBlob {
            shape: Shape::from_slice(shape),
            ..self.clone()
        }
    }

    /// Number of elements.
    pub fn size(&self) -> usize {
        size_of(&self.shape)
    }

    /// Start of the memory.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// The device the memory lives on.
    pub fn context(&self) -> Context {
        self.ctx
    }

    /// True if the memory is host memory (typed slices are available).
    pub fn is_host(&self) -> bool {
        self.ctx.is_cpu()
    }

    fn nbytes(&self) -> usize {
        self.size() * self.dtype.size()
    }

    /// Checks what every host view needs: host memory and, for typed views, the dtype.
    /// A failure is a bug in a kernel, so it panics; the engine turns an op's panic into
    /// an error on the op's outputs.
    fn check_host(&self) {
        assert!(
            self.is_host(),
            "a host slice of {} memory was asked for: host code cannot read device memory",
            self.ctx
        );
    }

    fn check<T: Element>(&self) {
        self.check_host();
        assert_eq!(
            T::DTYPE,
            self.dtype,
            "kernel dtype {} does not match blob dtype {}",
            T::DTYPE,
            self.dtype
        );
    }

    /// The elements, read-only.
    pub fn slice<T: Element>(&self) -> &[T] {
        self.check::<T>();
        if self.size() == 0 {
            return &[];
        }
        borrow::note(self.ptr, self.nbytes(), false);
        // SAFETY: the engine gives this op shared access to the blob's host memory, which
        // holds `size()` elements of T, aligned, for as long as the op runs.
        unsafe { std::slice::from_raw_parts(self.ptr as *const T, self.size()) }
    }

    /// The elements, writable.
    #[allow(clippy::mut_from_ref)]
    pub fn slice_mut<T: Element>(&self) -> &mut [T] {
        self.check::<T>();
        if self.size() == 0 {
            return &mut [];
        }
        borrow::note(self.ptr, self.nbytes(), true);
        // SAFETY: the engine gives this op exclusive access to the blob's host memory (it
        // is a mutable var of the op), which holds `size()` elements of T.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut T, self.size()) }
    }

    /// The raw bytes, read-only.
    pub fn bytes(&self) -> &[u8] {
        self.check_host();
        let n = self.nbytes();
        if n == 0 {
            return &[];
        }
        borrow::note(self.ptr, n, false);
        // SAFETY: as for `slice`.
        unsafe { std::slice::from_raw_parts(self.ptr, n) }
    }

    /// The raw bytes, writable.
    #[allow(clippy::mut_from_ref)]
    pub fn bytes_mut(&self) -> &mut [u8] {
        self.check_host();
        let n = self.nbytes();
        if n == 0 {
            return &mut [];
        }
        borrow::note(self.ptr, n, true);
        // SAFETY: as for `slice_mut`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, n) }
    }

    /// A copy of the bytes on the host, for a kernel that must read its input after
    /// writing over it (the read ends before any write begins).
    pub fn to_host_vec(&self) -> Vec<u8> {
        self.check_host();
        let n = self.nbytes();
        if n == 0 {
            return Vec::new();
        }
        // SAFETY: as for `slice`; the borrow ends inside this call.
        unsafe { std::slice::from_raw_parts(self.ptr, n) }.to_vec()
    }

    /// A copy of the elements, for a kernel that must read its input after writing over
    /// it (the read ends before any write begins).
    pub fn to_vec<T: Element>(&self) -> Vec<T> {
        self.check::<T>();
        if self.size() == 0 {
            return Vec::new();
        }
        // SAFETY: as for `slice`; the borrow ends inside this call.
        unsafe { std::slice::from_raw_parts(self.ptr as *const T, self.size()) }.to_vec()
    }

    /// Input `self` and output `out` of an element-wise kernel: one mutable slice when
    /// they are the same memory, else a shared and a mutable one. Partly overlapping
    /// blobs are a planning bug and panic.
    pub fn in_out<'a, T: Element>(&'a self, out: &'a TBlob) -> InOut<'a, T> {
        if self.ptr == out.ptr && self.size() == out.size() {
            InOut::Same(out.slice_mut())
        } else {
            let (a, b) = (self.ptr as usize, out.ptr as usize);
            assert!(
                self.size() == 0
                    || out.size() == 0
                    || a + self.nbytes() <= b
                    || b + out.nbytes() <= a,
                "input and output overlap without being the same memory"
            );
            InOut::Apart(self.slice(), out.slice_mut())
        }
    }
}
