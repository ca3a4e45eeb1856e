//! Message frames that cross libzmq without a copy: [`Frame`], bytes handed to libzmq
//! with whatever keeps them alive, and [`SharedBytes`], a server's value that frames send
//! while it stays stored, copied only if it must change while a send still reads it.

use std::ops::{Deref, Range};
use std::os::raw::c_void;
use std::sync::Arc;

/// Frames up to this size are copied into libzmq's own message: cheaper than sharing.
const COPY_BELOW: usize = 1024;

/// A received libzmq message, kept as the bytes it carries.
struct ReceivedBytes(zmq::Message);

// SAFETY: the message is read only through `&self` (`zmq_msg_data` and `zmq_msg_size`
// change nothing) and written only through `&mut self`, as a byte buffer is; sharing it
// between threads is as safe as sharing a `Vec<u8>`.
unsafe impl Sync for ReceivedBytes {}

enum Held {
    Vec(Vec<u8>),
    Received(ReceivedBytes),
}

impl Held {
    fn bytes(&self) -> &[u8] {
        match self {
            Held::Vec(v) => v,
            Held::Received(m) => &m.0,
        }
    }
}

/// Bytes shared by a stored value and the frames that send it.
#[derive(Clone)]
pub struct SharedBytes(Arc<Held>);

impl SharedBytes {
    /// The bytes, writable: in place when nothing else shares them, else a copy that
    /// replaces them here (a send still reading the old bytes keeps them).
    pub fn make_mut(&mut self) -> &mut [u8] {
        if Arc::get_mut(&mut self.0).is_none() {
            self.0 = Arc::new(Held::Vec(self.0.bytes().to_vec()));
        }
        match Arc::get_mut(&mut self.0).expect("unique after the copy") {
            Held::Vec(v) => v,
            Held::Received(m) => &mut m.0,
        }
    }
}

impl Deref for SharedBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.0.bytes()
    }
}

impl Default for SharedBytes {
    fn default() -> Self {
        SharedBytes::from(Vec::new())
    }
}

impl From<Vec<u8>> for SharedBytes {
    fn from(v: Vec<u8>) -> Self {
        SharedBytes(Arc::new(Held::Vec(v)))
    }
}

impl From<zmq::Message> for SharedBytes {
    fn from(m: zmq::Message) -> Self {
        SharedBytes(Arc::new(Held::Received(ReceivedBytes(m))))
    }
}

impl PartialEq for SharedBytes {
    fn eq(&self, other: &Self) -> bool {
        self[..] == other[..]
    }
}

impl std::fmt::Debug for SharedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedBytes({} bytes)", self.len())
    }
}

/// Bytes that frames send parts of without copying them, held by `keep`.
pub struct Source {
    ptr: *const u8,
    len: usize,
    keep: Arc<dyn Send + Sync>,
}

// SAFETY: `ptr` points into memory that `keep` holds unchanged; `keep` is `Send + Sync`.
unsafe impl Send for Source {}
unsafe impl Sync for Source {}

impl Source {
    /// A source over `bytes`, which `keep` holds.
    ///
    /// # Safety
    /// `bytes` must stay valid and unchanged for as long as `keep` lives.
    pub unsafe fn borrowed(bytes: &[u8], keep: Arc<dyn Send + Sync>) -> Source {
        Source {
            ptr: bytes.as_ptr(),
            len: bytes.len(),
            keep,
        }
    }

    pub fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `keep` holds the bytes, unchanged.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A frame of the bytes in `range`, sharing them.
    pub fn frame(&self, range: Range<usize>) -> Frame {
        assert!(
            range.start <= range.end && range.end <= self.len,
            "a frame within its source"
        );
        Frame {
            source: Source {
                keep: self.keep.clone(),
                ..*self
            },
            range,
        }
    }
}

impl From<Vec<u8>> for Source {
    fn from(v: Vec<u8>) -> Self {
        let v = Arc::new(v);
        // SAFETY: the vector, which `keep` owns, is never changed again.
        unsafe { Source::borrowed(&v[..], v.clone()) }
    }
}

/// One frame of a message to send: a range of a [`Source`]'s bytes.
pub struct Frame {
    source: Source,
    range: Range<usize>,
}

impl Frame {
    pub fn bytes(&self) -> &[u8] {
        &self.source.bytes()[self.range.clone()]
    }

    pub fn len(&self) -> usize {
        self.range.len()
    }

    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }

    /// Makes `msg` (uninitialised) a libzmq message of the frame's bytes: a copy for a
    /// small frame, else the bytes themselves, released by libzmq once sent.
    fn into_message(self, msg: &mut zmq_sys::zmq_msg_t) -> i32 {
        let (ptr, len) = (self.bytes().as_ptr(), self.len());
        // SAFETY: `msg` is ours to initialise; a copied frame's bytes are valid here, and
        // a shared frame's stay valid until libzmq calls `release` with their source.
        unsafe {
            if len <= COPY_BELOW {
                let rc = zmq_sys::zmq_msg_init_size(msg, len);
                if rc == 0 && len > 0 {
                    let dst = zmq_sys::zmq_msg_data(msg) as *mut u8;
                    std::ptr::copy_nonoverlapping(ptr, dst, len);
                }
                return rc;
            }
            let data = ptr as *mut c_void;
            let hint = Box::into_raw(Box::new(self.source)) as *mut c_void;
            let rc = zmq_sys::zmq_msg_init_data(msg, data, len, Some(release), hint);
            if rc != 0 {
                release(data, hint);
            }
            rc
        }
    }
}

/// libzmq's call once it no longer needs a shared frame's bytes.
unsafe extern "C" fn release(_data: *mut c_void, hint: *mut c_void) {
    // SAFETY: `hint` is the boxed source `into_message` leaked, released once.
    drop(unsafe { Box::from_raw(hint as *mut Source) });
}

impl From<Vec<u8>> for Frame {
    fn from(v: Vec<u8>) -> Self {
        let len = v.len();
        Source::from(v).frame(0..len)
    }
}

impl From<SharedBytes> for Frame {
    fn from(s: SharedBytes) -> Self {
        // SAFETY: a `SharedBytes` never changes while shared: writes copy it first.
        let source = unsafe { Source::borrowed(&s, Arc::new(s.clone())) };
        let len = s.len();
        source.frame(0..len)
    }
}

impl std::fmt::Debug for Frame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Frame({} bytes)", self.len())
    }
}

/// Sends `frames` on `socket` as one multipart message, each frame's bytes handed to
/// libzmq as they are.
pub fn send_multipart(socket: &mut zmq::Socket, frames: Vec<Frame>) -> zmq::Result<()> {
    let raw = socket.as_mut_ptr();
    let last = frames.len().saturating_sub(1);
    for (i, frame) in frames.into_iter().enumerate() {
        let mut msg = zmq_sys::zmq_msg_t::default();
        if frame.into_message(&mut msg) != 0 {
            return Err(last_error());
        }
        let flags = if i < last { zmq_sys::ZMQ_SNDMORE } else { 0 };
        // SAFETY: `msg` was initialised above and `raw` is the socket we hold mutably.
        let rc = unsafe { zmq_sys::zmq_msg_send(&mut msg, raw, flags as i32) };
        if rc == -1 {
            let e = last_error();
            // SAFETY: an unsent message is still ours to close.
            unsafe { zmq_sys::zmq_msg_close(&mut msg) };
            return Err(e);
        }
    }
    Ok(())
}

fn last_error() -> zmq::Error {
    // SAFETY: reads libzmq's thread-local error number.
    zmq::Error::from_raw(unsafe { zmq_sys::zmq_errno() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_bytes_copy_only_when_shared() {
        let mut a = SharedBytes::from(vec![1u8, 2, 3]);
        let before = a.as_ptr();
        a.make_mut()[0] = 9;
        assert_eq!(a.as_ptr(), before, "a unique value changes in place");
        let sent = Frame::from(a.clone());
        a.make_mut()[1] = 8;
        assert_ne!(a.as_ptr(), before, "a value a frame reads is copied first");
        assert_eq!(sent.bytes(), [9, 2, 3]);
        assert_eq!(&a[..], [9, 8, 3]);
    }

    #[test]
    fn frames_reach_a_peer_whole() {
        let ctx = zmq::Context::new();
        let pull = ctx.socket(zmq::PAIR).unwrap();
        pull.bind("inproc://rsmx-frame-test").unwrap();
        let mut push = ctx.socket(zmq::PAIR).unwrap();
        push.connect("inproc://rsmx-frame-test").unwrap();
        let big: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
        let keep = Arc::new(big.clone());
        // SAFETY: `keep` holds the bytes unchanged.
        let source = unsafe { Source::borrowed(&keep[..], keep.clone()) };
        let borrowed = source.frame(10..4000);
        drop(source);
        let frames = vec![
            Frame::from(b"meta".to_vec()),
            Frame::from(Vec::new()),
            Frame::from(SharedBytes::from(big.clone())),
            borrowed,
        ];
        send_multipart(&mut push, frames).unwrap();
        let got = pull.recv_multipart(0).unwrap();
        assert_eq!(got.len(), 4);
        assert_eq!(got[0], b"meta");
        assert!(got[1].is_empty());
        assert_eq!(got[2], big);
        assert_eq!(got[3], &big[10..4000]);
        drop((got, push));
        assert_eq!(
            Arc::strong_count(&keep),
            1,
            "libzmq released the borrowed bytes"
        );
    }
}
