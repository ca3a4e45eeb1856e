//! The fake driver through the driver table: memory, stream order, events across
//! streams, counters, injected faults and refused calls.

use super::*;
use crate::cu;
use crate::cuda::driver::{Driver, EVENT_DISABLE_TIMING, STREAM_NON_BLOCKING, SYMBOLS};
use crate::error::{Error, ErrorKind};
use std::sync::mpsc::channel;

/// `cu!` for tests, which pass only live handles from the fake driver and pointers to
/// live buffers.
macro_rules! call {
    ($($t:tt)*) => {
        // SAFETY: see above.
        unsafe { cu!($($t)*) }
    };
}

fn stream(d: &Driver) -> Handle {
    let mut s: Handle = std::ptr::null_mut();
    call!(d, stream_create(&mut s, STREAM_NON_BLOCKING, 0)).unwrap();
    s
}

fn event(d: &Driver) -> Handle {
    let mut e: Handle = std::ptr::null_mut();
    call!(d, event_create(&mut e, EVENT_DISABLE_TIMING)).unwrap();
    e
}

fn device_alloc(d: &Driver, bytes: usize) -> CuDevicePtr {
    let mut p: CuDevicePtr = 0;
    call!(d, mem_alloc(&mut p, bytes)).unwrap();
    p
}

#[test]
fn bytes_go_to_the_device_and_back_in_stream_order() {
    let _g = TEST_LOCK.lock();
    let d = driver();
    let before = stats();
    let s = stream(&d);
    let src: Vec<u8> = (0..=255).collect();
    let mut back = vec![0u8; 256];
    let a = device_alloc(&d, 256);
    let b = device_alloc(&d, 256);
    call!(&d, memcpy_htod_async(a, src.as_ptr().cast(), 256, s)).unwrap();
    call!(&d, memcpy_dtod_async(b, a, 256, s)).unwrap();
    call!(&d, memset_d8_async(b, 7, 16, s)).unwrap();
    call!(&d, memcpy_dtoh_async(back.as_mut_ptr().cast(), b, 256, s)).unwrap();
    call!(&d, stream_synchronize(s)).unwrap();
    assert_eq!(&back[..16], &[7u8; 16]);
    assert_eq!(&back[16..], &src[16..]);
    call!(&d, mem_free(a)).unwrap();
    call!(&d, mem_free(b)).unwrap();
    call!(&d, stream_destroy(s)).unwrap();
    let after = stats();
    assert_eq!(after.allocs - before.allocs, 2);
    assert_eq!(after.frees - before.frees, 2);
    assert_eq!(after.host_syncs - before.host_syncs, 1);
}

#[test]
fn a_read_on_another_stream_waits_for_the_writers_event() {
    let _g = TEST_LOCK.lock();
    let d = driver();
    let (writer, reader) = (stream(&d), stream(&d));
    let (written, read) = (event(&d), event(&d));
    let buf = device_alloc(&d, 64);
    let mut host = vec![0u8; 64];
    // Hold the writer back until the reader's work is queued.
    let (open, gate) = channel::<()>();
    let hold = move || {
        let _ = gate.recv();
    };
    // SAFETY: `writer` is a live stream.
    assert_eq!(unsafe { enqueue(writer, hold) }, 0);
    call!(&d, memset_d8_async(buf, 9, 64, writer)).unwrap();
    call!(&d, event_record(written, writer)).unwrap();
    call!(&d, stream_wait_event(reader, written, 0)).unwrap();
    call!(
        &d,
        memcpy_dtoh_async(host.as_mut_ptr().cast(), buf, 64, reader)
    )
    .unwrap();
    call!(&d, event_record(read, reader)).unwrap();
    let not_ready = call!(&d, event_query(read)).unwrap_err();
    assert_eq!(not_ready.cuda_call().unwrap().name, "CUDA_ERROR_NOT_READY");
    let syncs = stats().host_syncs;
    open.send(()).unwrap();
    call!(&d, event_synchronize(read)).unwrap();
    assert_eq!(stats().host_syncs - syncs, 1);
    assert_eq!(host, vec![9u8; 64]);
    call!(&d, event_query(written)).unwrap();
    for e in [written, read] {
        call!(&d, event_destroy(e)).unwrap();
    }
    for s in [writer, reader] {
        call!(&d, stream_destroy(s)).unwrap();
    }
    call!(&d, mem_free(buf)).unwrap();
}

#[test]
fn an_injected_out_of_memory_is_a_clean_error_once() {
    let _g = TEST_LOCK.lock();
    let d = driver();
    fail_next_alloc();
    let mut p: CuDevicePtr = 0;
    let e = call!(&d, mem_alloc(&mut p, 1024)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    assert_eq!(
        e.to_string(),
        "cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (code 2)"
    );
    let p = device_alloc(&d, 1024);
    call!(&d, mem_free(p)).unwrap();
}

#[test]
fn refused_calls_name_the_call() {
    let d = driver();
    let e = call!(&d, memset_d8_async(0, 0, 0, std::ptr::null_mut())).unwrap_err();
    assert_eq!(e.cuda_call().unwrap().call, "cuMemsetD8Async");
    assert_eq!(e.cuda_call().unwrap().name, "CUDA_ERROR_INVALID_HANDLE");
    let e = call!(&d, mem_free(12345)).unwrap_err();
    assert_eq!(e.cuda_call().unwrap().name, "CUDA_ERROR_INVALID_VALUE");
    let mut ctx: Handle = std::ptr::null_mut();
    call!(&d, primary_ctx_retain(&mut ctx, 1)).unwrap();
    assert!(!ctx.is_null());
    call!(&d, ctx_set_current(ctx)).unwrap();
    // A code the driver cannot name still makes an error.
    assert_eq!(
        d.check("cuLaunchKernel", 719).unwrap_err().to_string(),
        "cuLaunchKernel failed: CUDA error 719 (code 719)"
    );
}

#[test]
fn a_table_from_addresses_names_every_missing_symbol() {
    let mut addresses: HashMap<String, usize> =
        SYMBOLS.iter().map(|s| (s.to_string(), 0)).collect();
    // SAFETY: the table is refused before any address is used.
    let e = unsafe { Driver::from_symbols(&addresses) }.err().unwrap();
    assert!(
        matches!(&e, Error::Runtime(m) if m.contains("cuMemAlloc_v2") && m.contains("cuEventQuery"))
    );
    let d = driver();
    addresses.insert("cuGetErrorName".into(), d.get_error_name as usize);
    addresses.remove("cuStreamSynchronize");
    // SAFETY: as above.
    let e = unsafe { Driver::from_symbols(&addresses) }.err().unwrap();
    assert!(!e.to_string().contains("cuGetErrorName"), "{e}");
    assert!(e.to_string().contains("cuStreamSynchronize"), "{e}");
}
