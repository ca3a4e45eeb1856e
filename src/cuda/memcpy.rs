//! Copies and fills of GPU memory, enqueued on the running op's stream. Copies that
//! touch pageable host memory wait for the device before they return, because the host
//! side may change as soon as the op completes in the engine.

use super::runtime::{for_context, Runtime};
use crate::context::Context;
use crate::cu;
use crate::engine::StreamHandle;
use crate::error::{Error, Result};

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

fn synchronize(rt: &Runtime, stream: StreamHandle) -> Result<()> {
    super::runtime::count_host_sync();
    // SAFETY: the running op's live stream.
    unsafe { cu!(rt.driver, stream_synchronize(stream.as_raw())) }
}

/// Host bytes at `src` to `dst` on GPU `ctx`.
pub fn host_to_device(
    ctx: Context,
    stream: Option<StreamHandle>,
    dst: *mut u8,
    src: *const u8,
    n: usize,
) -> Result<()> {
    let (rt, s) = stream_of(ctx, stream)?;
    if n == 0 {
        return Ok(());
    }
    // SAFETY: `dst` is n bytes of device memory and `src` n host bytes, both kept alive
    // by the op until the synchronisation below.
    unsafe {
        cu!(
            rt.driver,
            memcpy_htod_async(dst as u64, src.cast(), n, s.as_raw())
        )
    }?;
    synchronize(rt, s)
}

/// `n` bytes at `src` on GPU `ctx` to host memory at `dst`.
pub fn device_to_host(
    ctx: Context,
    stream: Option<StreamHandle>,
    dst: *mut u8,
    src: *const u8,
    n: usize,
) -> Result<()> {
    let (rt, s) = stream_of(ctx, stream)?;
    if n == 0 {
        return Ok(());
    }
    // SAFETY: as for `host_to_device`, the other way round.
    unsafe {
        cu!(
            rt.driver,
            memcpy_dtoh_async(dst.cast(), src as u64, n, s.as_raw())
        )
    }?;
    synchronize(rt, s)
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
