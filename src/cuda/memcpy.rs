//! Copies and fills of GPU memory, enqueued on the running op's stream. Copies to and
//! from pageable host memory pass through the device's pinned staging blocks: one to a
//! GPU returns once its bytes are staged; one from a GPU waits for its bytes, because
//! the host reads them as soon as the op completes in the engine.

use super::runtime::{for_context, Event, Runtime};
use super::staging::{Block, CHUNK};
use crate::context::Context;
use crate::cu;
use crate::engine::StreamHandle;
use crate::error::{Error, Result};
use std::collections::VecDeque;

fn stream_of(
    ctx: Context,
    stream: Option<StreamHandle>,
) -> Result<(&'static Runtime, StreamHandle)> {
    let (rt, _) = for_context(ctx)?;
    let s = stream.ok_or_else(|| {
        Error::Runtime(format!(
            "{ctx}: a GPU copy ran outside a GPU op (no stream)"
        ))
    })?;
    Ok((rt, s))
}

/// Host bytes `src` to `dst` on GPU `ctx`, in pieces staged through pinned blocks.
pub fn host_to_device(
    ctx: Context,
    stream: Option<StreamHandle>,
    dst: *mut u8,
    src: &[u8],
) -> Result<()> {
    let (rt, s) = stream_of(ctx, stream)?;
    let n = src.len();
    let (_, dev) = for_context(ctx)?;
    for at in (0..n).step_by(CHUNK) {
        let len = CHUNK.min(n - at);
        let block = dev.staging.take(rt.driver, len)?;
        // SAFETY: the block has at least `len` bytes and is no part of `src`.
        unsafe { std::ptr::copy_nonoverlapping(src[at..].as_ptr(), block.ptr(), len) };
        // SAFETY: `dst` is n bytes of device memory; the block stays out of use until
        // the event recorded after the copy has passed.
        let queued = unsafe {
            cu!(
                rt.driver,
                memcpy_htod_async(dst as u64 + at as u64, block.ptr().cast(), len, s.as_raw())
            )
        };
        if let Err(e) = queued {
            dev.staging.give(block, None);
            return Err(e);
        }
        // Without its event a queued copy may use the block at any time: it is not reused.
        dev.staging.give(block, Some(dev.record(rt.driver, s)?));
    }
    Ok(())
}

/// A piece of a copy from a GPU: its block, the event after it, its offset and length.
type Piece = (Block, Event, usize, usize);

/// `n` bytes at `src` on GPU `ctx` to host memory at `dst`: pieces copy into pinned
/// blocks, two in flight, and each goes on to `dst` once its event has passed.
pub fn device_to_host(
    ctx: Context,
    stream: Option<StreamHandle>,
    dst: &mut [u8],
    src: *const u8,
) -> Result<()> {
    let (rt, s) = stream_of(ctx, stream)?;
    let n = dst.len();
    let (_, dev) = for_context(ctx)?;
    let mut in_flight: VecDeque<Piece> = VecDeque::new();
    let mut land = |(block, fence, at, len): Piece| {
        fence.synchronize()?;
        // SAFETY: the block holds `len` bytes the device wrote, and is no part of `dst`.
        unsafe { std::ptr::copy_nonoverlapping(block.ptr(), dst[at..].as_mut_ptr(), len) };
        dev.staging.give(block, None);
        Ok::<(), Error>(())
    };
    let mut result = Ok(());
    for at in (0..n).step_by(CHUNK) {
        if in_flight.len() == 2 {
            result = land(in_flight.pop_front().expect("two in flight"));
            if result.is_err() {
                break;
            }
        }
        let len = CHUNK.min(n - at);
        let block = match dev.staging.take(rt.driver, len) {
            Ok(b) => b,
            Err(e) => {
                result = Err(e);
                break;
            }
        };
        // SAFETY: `src` is n bytes of device memory; the block is kept until its event.
        let queued = unsafe {
            cu!(
                rt.driver,
                memcpy_dtoh_async(block.ptr().cast(), src as u64 + at as u64, len, s.as_raw())
            )
        };
        if let Err(e) = queued {
            dev.staging.give(block, None);
            result = Err(e);
            break;
        }
        // Without its event a queued copy may use the block at any time: it is not reused.
        match dev.record(rt.driver, s) {
            Ok(fence) => in_flight.push_back((block, fence, at, len)),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    // Every queued piece lands (or waits out its copy) before the blocks are reused.
    for piece in in_flight {
        let landed = land(piece);
        if result.is_ok() {
            result = landed;
        }
    }
    result
}

/// `n` bytes from GPU `src_ctx` to GPU `dst_ctx`, on the stream of the op (which runs
/// on the source's device).
pub fn device_to_device(
    src_ctx: Context,
    dst_ctx: Context,
    stream: Option<StreamHandle>,
    dst: *mut u8,
    src: *const u8,
    n: usize,
) -> Result<()> {
    let (rt, s) = stream_of(src_ctx, stream)?;
    if n == 0 {
        return Ok(());
    }
    if src_ctx == dst_ctx {
        // SAFETY: both ranges are n bytes of this device's memory, ordered by the stream.
        return unsafe {
            cu!(
                rt.driver,
                memcpy_dtod_async(dst as u64, src as u64, n, s.as_raw())
            )
        };
    }
    let (_, from) = for_context(src_ctx)?;
    let (_, to) = for_context(dst_ctx)?;
    // SAFETY: n bytes on each device; the engine made this stream wait for the
    // destination's earlier users.
    unsafe {
        cu!(
            rt.driver,
            memcpy_peer_async(
                dst as u64,
                to.context(),
                src as u64,
                from.context(),
                n,
                s.as_raw()
            )
        )
    }
}

/// Sets `n` bytes at `dst` on GPU `ctx` to `value`.
pub fn fill_bytes(
    ctx: Context,
    stream: Option<StreamHandle>,
    dst: *mut u8,
    value: u8,
    n: usize,
) -> Result<()> {
    let (rt, s) = stream_of(ctx, stream)?;
    if n == 0 {
        return Ok(());
    }
    // SAFETY: n bytes of device memory, ordered by the stream.
    unsafe { cu!(rt.driver, memset_d8_async(dst as u64, value, n, s.as_raw())) }
}
