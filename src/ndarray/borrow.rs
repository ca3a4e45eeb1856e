//! The in-place soundness check: while a kernel runs, every host slice it takes of the
//! blobs it was handed (its inputs and outputs; scratch of its own is not watched) is
//! noted, and a shared slice overlapping a mutable one panics: a kernel whose output is
//! its input must use the in-place form ([`super::InOut`]). On in debug builds and with
//! `RSMX_CHECK_BORROWS=1`.

use super::TBlob;
use std::cell::RefCell;
use std::sync::OnceLock;

/// One slice handed out: byte range and whether it is mutable.
#[derive(Clone, Copy)]
struct Borrow {
    start: usize,
    end: usize,
    mutable: bool,
}

/// What is watched for the kernel running on a thread.
#[derive(Default)]
struct Frame {
    /// Byte ranges of the kernel's inputs and outputs.
    watched: Vec<(usize, usize)>,
    /// Slices taken of them so far.
    taken: Vec<Borrow>,
}

thread_local! {
    /// The frame of the kernel running on this thread; `None` when no kernel is tracked.
    static ACTIVE: RefCell<Option<Frame>> = const { RefCell::new(None) };
}

fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        cfg!(debug_assertions)
            || std::env::var("RSMX_CHECK_BORROWS").is_ok_and(|v| !v.is_empty() && v != "0")
    })
}

/// Runs `f`, a kernel over `inputs` and `outputs`, with its host slices of them checked
/// for shared/mutable overlap. A kernel run inside another one is checked on its own.
pub fn track_borrows<R>(inputs: &[TBlob], outputs: &[TBlob], f: impl FnOnce() -> R) -> R {
    if !enabled() {
        return f();
    }
    let watched = inputs
        .iter()
        .chain(outputs)
        .filter(|b| b.is_host() && b.size() > 0)
        .map(|b| {
            let start = b.ptr() as usize;
            (start, start + b.size() * b.dtype.size())
        })
        .collect();
    let frame = Frame {
        watched,
        taken: Vec::new(),
    };
    let outer = ACTIVE.with(|a| a.borrow_mut().replace(frame));
    struct Restore(Option<Frame>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            ACTIVE.with(|a| *a.borrow_mut() = outer);
        }
    }
    let _restore = Restore(outer);
    f()
}

/// Notes a slice of `len` bytes at `ptr`; panics if it overlaps a slice of the other kind.
pub fn note(ptr: *mut u8, len: usize, mutable: bool) {
    if !enabled() {
        return;
    }
    let b = Borrow {
        start: ptr as usize,
        end: ptr as usize + len,
        mutable,
    };
    let clash = ACTIVE.with(|a| {
        let mut a = a.borrow_mut();
        let frame = a.as_mut()?;
        if !frame.watched.iter().any(|&(s, e)| s < b.end && b.start < e) {
            return None;
        }
        let clash = frame
            .taken
            .iter()
            .find(|o| o.mutable != b.mutable && o.start < b.end && b.start < o.end)
            .copied();
        frame.taken.push(b);
        clash
    });
    if let Some(o) = clash {
        panic!(
            "a kernel holds a shared and a mutable slice over the same bytes ({:#x}..{:#x} and {:#x}..{:#x}): use the in-place form",
            o.start, o.end, b.start, b.end
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::ndarray::InOut;
    use crate::shape::Shape;

    /// An f32 blob over `mem`.
    fn blob_over(mem: &mut [f32]) -> TBlob {
        TBlob::from_raw(
            mem.as_mut_ptr() as *mut u8,
            Shape::from_slice(&[mem.len()]),
            DType::F32,
        )
    }

    #[test]
    fn shared_and_mutable_over_the_same_bytes_panics() {
        let mut mem = vec![0f32; 8];
        let blob = blob_over(&mut mem);
        let r = std::panic::catch_unwind(|| {
            track_borrows(
                std::slice::from_ref(&blob),
                std::slice::from_ref(&blob),
                || {
                    let _x = blob.slice::<f32>();
                    let _y = blob.slice_mut::<f32>();
                },
            )
        });
        assert!(r.is_err());
    }

    #[test]
    fn the_in_place_form_takes_one_slice() {
        let mut mem = vec![1f32; 8];
        let blob = blob_over(&mut mem);
        let io = std::slice::from_ref(&blob);
        track_borrows(io, io, || match blob.in_out::<f32>(&blob) {
            InOut::Same(s) => s.iter_mut().for_each(|v| *v *= 2.0),
            InOut::Apart(..) => panic!("same memory seen as two buffers"),
        });
        assert_eq!(mem, vec![2f32; 8]);
    }

    #[test]
    fn disjoint_views_of_one_buffer_pass() {
        let mut mem = vec![1f32; 8];
        let p = mem.as_mut_ptr() as *mut u8;
        let a = TBlob::from_raw(p, Shape::from_slice(&[4]), DType::F32);
        // SAFETY: the second half of the same 8-element buffer.
        let b = TBlob::from_raw(unsafe { p.add(16) }, Shape::from_slice(&[4]), DType::F32);
        track_borrows(std::slice::from_ref(&a), std::slice::from_ref(&b), || {
            let x = a.slice::<f32>();
            let y = b.slice_mut::<f32>();
            y.copy_from_slice(x);
        });
    }
}
