//! The handle of the CUDA stream a GPU worker owns, as a running op sees it.

use std::ffi::c_void;
use std::ptr::NonNull;

/// An opaque CUDA stream (`CUstream`): the stream a GPU worker owns and on which the ops
/// it runs enqueue their kernels and copies. The engine never dereferences it; only the
/// CUDA driver interprets it. `Option<StreamHandle>` is one pointer wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamHandle(NonNull<c_void>);

// SAFETY: the handle is a token passed back to the CUDA driver, which accepts a stream
// from any thread; Rust code never reads or writes through the pointer.
unsafe impl Send for StreamHandle {}
// SAFETY: as for `Send`: sharing the token shares no memory Rust touches.
unsafe impl Sync for StreamHandle {}

impl StreamHandle {
    /// Wraps a raw `CUstream`; `None` for the null pointer (CUDA's legacy default
    /// stream, which the engine never hands to an op).
    pub fn from_raw(stream: *mut c_void) -> Option<StreamHandle> {
        NonNull::new(stream).map(StreamHandle)
    }

    /// The raw `CUstream`, for driver calls.
    pub fn as_raw(self) -> *mut c_void {
        self.0.as_ptr()
    }
}
