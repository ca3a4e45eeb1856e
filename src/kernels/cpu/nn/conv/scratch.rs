//! Per-thread scratch memory for the column matrices, kept between calls so that a
//! training loop does not allocate and fault in megabytes on every step.

use crate::kernels::cpu::num::Num;
use std::cell::RefCell;

thread_local! {
    static SCRATCH: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with a buffer of `len` elements of `T` whose contents are unspecified (left
/// over from earlier use); `f` must write what it reads. Falls back to a fresh buffer if
/// the thread's scratch is already in use.
pub fn with_scratch<T: Num, R>(len: usize, f: impl FnOnce(&mut [T]) -> R) -> R {
    const { assert!(std::mem::size_of::<T>() <= 8 && std::mem::align_of::<T>() <= 8) };
    let words = (len * std::mem::size_of::<T>()).div_ceil(8);
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            if buf.len() < words {
                buf.resize(words, 0);
            }
            // SAFETY: the buffer holds at least `len * size_of::<T>()` initialised bytes,
            // aligned to 8 (checked above to cover T's alignment); every bit pattern is a
            // valid value of the numeric types `Num` covers; the RefCell borrow keeps the
            // memory exclusive to `f`.
            let s = unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr() as *mut T, len) };
            f(s)
        }
        Err(_) => f(&mut vec![T::ZERO; len]),
    })
}
