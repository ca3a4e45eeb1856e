//! The one path that moves bytes into, out of and between arrays. Each move dispatches on
//! the (source device, destination device) pair and is pushed to the engine with that
//! pair's property (copies to and from GPUs run on their own pools), so no other code
//! touches another device's memory.

use super::{NDArray, TBlob};
use crate::context::{Context, DeviceType};
use crate::cuda::memcpy;
use crate::engine::{self, FnProperty, PushSpec, RunContext};
use crate::error::{Error, Result};
use crate::kernels::cpu::map::pool_shares_work;
use crate::shape::fmt_shape;
use rayon::prelude::*;

/// Where bytes come from or go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Host,
    Gpu,
}

fn side(ctx: Context) -> Side {
    match ctx.dev_type {
        DeviceType::Gpu => Side::Gpu,
        DeviceType::Cpu | DeviceType::CpuPinned | DeviceType::CpuShared => Side::Host,
    }
}

/// The engine property and the device to push a copy from `src` to `dst` on.
pub fn copy_property(src: Context, dst: Context) -> (FnProperty, Context) {
    match (side(src), side(dst)) {
        (Side::Host, Side::Host) => (FnProperty::Normal, dst),
        (Side::Host, Side::Gpu) => (FnProperty::CopyToGpu, dst),
        (Side::Gpu, _) => (FnProperty::CopyFromGpu, src),
    }
}

/// Bytes below which a host copy runs on one thread.
const PAR_COPY_MIN: usize = 1 << 20;
/// Bytes per parallel host copy task.
const COPY_CHUNK: usize = 256 << 10;

/// Copies host bytes, over the kernel pool's threads for large arrays.
fn host_copy(src: &[u8], dst: &mut [u8]) {
    if src.len() < PAR_COPY_MIN || !pool_shares_work() {
        dst.copy_from_slice(src);
    } else {
        dst.par_chunks_mut(COPY_CHUNK)
            .zip(src.par_chunks(COPY_CHUNK))
            .for_each(|(d, s)| d.copy_from_slice(s));
    }
}

/// Moves the bytes of `src` into `dst` (same size) inside an engine op running as
/// `rctx`, by device pair.
fn move_bytes(src: &TBlob, dst: &TBlob, rctx: RunContext) -> Result<()> {
    let n = src.size() * src.dtype.size();
    let (from, to) = (src.context(), dst.context());
    match (side(from), side(to)) {
        (Side::Host, Side::Host) => {
            host_copy(src.bytes(), dst.bytes_mut());
            Ok(())
        }
        (Side::Host, Side::Gpu) => memcpy::host_to_device(to, rctx.stream, dst.ptr(), src.bytes()),
        (Side::Gpu, Side::Host) => {
            memcpy::device_to_host(from, rctx.stream, dst.bytes_mut(), src.ptr())
        }
        (Side::Gpu, Side::Gpu) => {
            memcpy::device_to_device(from, to, rctx.stream, dst.ptr(), src.ptr(), n)
        }
    }
}

/// Sets every byte of `dst` to zero inside an engine op running as `rctx`.
fn zero_bytes(dst: &TBlob, rctx: RunContext) -> Result<()> {
    match side(dst.context()) {
        Side::Host => {
            dst.bytes_mut().fill(0);
            Ok(())
        }
        Side::Gpu => {
            let n = dst.size() * dst.dtype.size();
            memcpy::fill_bytes(dst.context(), rctx.stream, dst.ptr(), 0, n)
        }
    }
}

/// Checks that arrays `a` and `b` (named for the message) have one shape and one dtype;
/// `context` (built only on error) starts the message.
pub fn check_matching(
    context: impl Fn() -> String,
    (a_name, a): (&str, &NDArray),
    (b_name, b): (&str, &NDArray),
) -> Result<()> {
    if a.shape() != b.shape() {
        return Err(Error::Value(format!(
            "{}: {a_name} shape {} does not match {b_name} shape {}",
            context(),
            fmt_shape(a.shape()),
            fmt_shape(b.shape())
        )));
    }
    if a.dtype() != b.dtype() {
        return Err(Error::Type(format!(
            "{}: {a_name} dtype {} does not match {b_name} dtype {}",
            context(),
            a.dtype(),
            b.dtype()
        )));
    }
    Ok(())
}

/// Copies `src` into `dst` (same shape and dtype, any devices), ordered after pending
/// writes to `src` and pending reads and writes of `dst`.
pub fn copy_into(src: &NDArray, dst: &NDArray) -> Result<()> {
    copy_at(src, dst, 0, false)
}

/// As [`copy_into`], pushed with an engine `priority` as KVStore traffic: a copy between
/// host devices runs on the prioritised CPU pool.
pub fn copy_prioritized(src: &NDArray, dst: &NDArray, priority: i32) -> Result<()> {
    copy_at(src, dst, priority, true)
}

fn copy_at(src: &NDArray, dst: &NDArray, priority: i32, prioritized: bool) -> Result<()> {
    check_matching(|| "copyto".into(), ("source", src), ("destination", dst))?;
    if src.overlaps(dst) && src.offset() == dst.offset() {
        return Ok(());
    }
    let (mut prop, run_on) = copy_property(src.context(), dst.context());
    if prioritized && prop == FnProperty::Normal {
        prop = FnProperty::CpuPrioritized;
    }
    let (s, d) = (src.blob(), dst.blob());
    engine::get().push_sync(
        Box::new(move |rctx| move_bytes(&s, &d, rctx)),
        PushSpec::new(
            "_copyto",
            run_on,
            std::slice::from_ref(src.var()),
            std::slice::from_ref(dst.var()),
        )
        .prop(prop)
        .priority(priority),
    );
    Ok(())
}

/// Pushes a write of zeros over `dst`.
pub fn fill_zeros(dst: &NDArray) {
    let d = dst.blob();
    engine::get().push_sync(
        Box::new(move |rctx| zero_bytes(&d, rctx)),
        PushSpec::new(
            "_zeros",
            dst.context(),
            &[],
            std::slice::from_ref(dst.var()),
        ),
    );
}

fn check_len(dst: &NDArray, len: usize) -> Result<()> {
    let want = dst.size() * dst.dtype().size();
    if len != want {
        return Err(Error::Value(format!(
            "cannot write {len} bytes into an array of shape {} and dtype {} ({want} bytes)",
            fmt_shape(dst.shape()),
            dst.dtype()
        )));
    }
    Ok(())
}

/// Overwrites `dst` from host bytes, ordered after pending work on it.
pub fn write_from_host(dst: &NDArray, data: Vec<u8>) -> Result<()> {
    check_len(dst, data.len())?;
    let (prop, run_on) = copy_property(Context::cpu(0), dst.context());
    let d = dst.blob();
    let src_ctx = Context::cpu(0);
    engine::get().push_sync(
        Box::new(move |rctx| {
            let s = TBlob::on_device(data.as_ptr() as *mut u8, d.shape.clone(), d.dtype, src_ctx);
            move_bytes(&s, &d, rctx)
        }),
        PushSpec::new(
            "_sync_copyfrom",
            run_on,
            &[],
            std::slice::from_ref(dst.var()),
        )
        .prop(prop),
    );
    Ok(())
}

/// Overwrites `dst` from host bytes now: waits for pending work on it first unless it
/// has none (a new array). A GPU array gets an owned copy of the bytes, written by a
/// copy op that the caller does not wait for.
pub fn write_from_host_now(dst: &NDArray, data: &[u8]) -> Result<()> {
    check_len(dst, data.len())?;
    if side(dst.context()) == Side::Gpu {
        return write_from_host(dst, data.to_vec());
    }
    if !dst.var().is_idle() {
        dst.wait_to_write()?;
    }
    let d = dst.blob();
    let s = TBlob::on_device(
        data.as_ptr() as *mut u8,
        d.shape.clone(),
        d.dtype,
        Context::cpu(0),
    );
    let written = move_bytes(&s, &d, RunContext::new(Context::cpu(0)));
    dst.var().note_write();
    written
}

/// Copies the contents of `src` into host memory `out` (exactly its size in bytes) once
/// its pending writes are done.
pub fn read_to_host(src: &NDArray, out: &mut [u8]) -> Result<()> {
    let n = src.size() * src.dtype().size();
    if out.len() != n {
        return Err(Error::Value(format!(
            "cannot read an array of shape {} and dtype {} ({n} bytes) into {} bytes",
            fmt_shape(src.shape()),
            src.dtype(),
            out.len()
        )));
    }
    if side(src.context()) == Side::Gpu {
        return read_gpu_to_host(src, out);
    }
    src.wait_to_read()?;
    let s = src.blob();
    let d = TBlob::on_device(out.as_mut_ptr(), s.shape.clone(), s.dtype, Context::cpu(0));
    move_bytes(&s, &d, RunContext::new(Context::cpu(0)))
}

/// `read_to_host` for a GPU array: a copy op on the GPU's copy workers, waited for here.
fn read_gpu_to_host(src: &NDArray, out: &mut [u8]) -> Result<()> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let s = src.blob();
    let (ptr, shape) = (out.as_mut_ptr() as usize, s.shape.clone());
    engine::get().push_sync(
        Box::new(move |rctx| {
            let d = TBlob::on_device(ptr as *mut u8, shape, s.dtype, Context::cpu(0));
            // The outcome goes to the waiting caller; the op writes nothing to fail.
            let _ = tx.send(move_bytes(&s, &d, rctx));
            Ok(())
        }),
        PushSpec::new(
            "_copyto",
            src.context(),
            std::slice::from_ref(src.var()),
            &[],
        )
        .prop(FnProperty::CopyFromGpu),
    );
    match rx.recv() {
        Ok(r) => r,
        // Not run: an earlier write failed, and waiting raises its error.
        Err(_) => src.wait_to_read().and(Err(Error::Runtime(format!(
            "copying {} to the host did not run",
            src.context()
        )))),
    }
}

/// The contents of `src` as host bytes (waits for pending writes).
pub fn to_host_bytes(src: &NDArray) -> Result<Vec<u8>> {
    let mut out = vec![0u8; src.size() * src.dtype().size()];
    read_to_host(src, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;

    #[test]
    fn properties_follow_the_device_pair() {
        let (c, g) = (Context::cpu(0), Context::gpu(1));
        assert_eq!(copy_property(c, Context::cpu(1)).0, FnProperty::Normal);
        assert_eq!(copy_property(c, g), (FnProperty::CopyToGpu, g));
        assert_eq!(copy_property(g, c), (FnProperty::CopyFromGpu, g));
    }

    #[test]
    fn host_round_trip_through_every_entry_point() {
        let a = NDArray::empty(&[2, 3], DType::F32, Context::cpu(0)).unwrap();
        let bytes: Vec<u8> = (0..24u8).collect();
        write_from_host_now(&a, &bytes).unwrap();
        assert_eq!(to_host_bytes(&a).unwrap(), bytes);
        let b = NDArray::empty(&[2, 3], DType::F32, Context::cpu(1)).unwrap();
        copy_into(&a, &b).unwrap();
        assert_eq!(to_host_bytes(&b).unwrap(), bytes);
        copy_prioritized(&a, &b, 3).unwrap();
        assert_eq!(to_host_bytes(&b).unwrap(), bytes);
        fill_zeros(&b);
        write_from_host(&a, vec![7u8; 24]).unwrap();
        assert_eq!(to_host_bytes(&b).unwrap(), vec![0u8; 24]);
        assert_eq!(to_host_bytes(&a).unwrap(), vec![7u8; 24]);
        assert!(write_from_host(&a, vec![0u8; 3]).is_err());
        let mut small = [0u8; 4];
        assert!(read_to_host(&a, &mut small).is_err());
    }

    #[test]
    fn large_host_copies_run_in_parallel_chunks() {
        let n = PAR_COPY_MIN + 3 * COPY_CHUNK / 2 + 5;
        let src: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
        let mut dst = vec![0u8; n];
        host_copy(&src, &mut dst);
        assert_eq!(src, dst);
    }

    #[test]
    fn device_memory_never_reaches_host_code() {
        let blob = TBlob::on_device(
            std::ptr::null_mut(),
            crate::shape::Shape::from_slice(&[4]),
            DType::F32,
            Context::gpu(0),
        );
        let mut buffer = [0f32; 4];
        let host = TBlob::on_device(
            buffer.as_mut_ptr().cast(),
            crate::shape::Shape::from_slice(&[4]),
            DType::F32,
            Context::cpu(0),
        );
        let e = move_bytes(&blob, &host, RunContext::new(Context::gpu(0))).unwrap_err();
        assert!(e.message().contains("gpu(0)"), "{e}");
        let r = std::panic::catch_unwind(|| blob.slice::<f32>().len());
        assert!(r.is_err(), "a host slice of GPU memory must be refused");
    }
}
