use super::*;
use crate::cuda::fake::{self, TEST_LOCK};
use crate::engine::Var;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn runtime() -> &'static Runtime {
    let driver: &'static _ = Box::leak(Box::new(fake::driver()));
    Box::leak(Box::new(
        Runtime::start(driver, vec![HashMap::new()], true).unwrap(),
    ))
}

/// Queues `job` on `stream` (the fake driver runs it on the stream's thread).
fn on_stream(stream: StreamHandle, job: impl FnOnce() + Send + 'static) {
    // SAFETY: a live stream of the fake driver.
    assert_eq!(unsafe { fake::enqueue(stream.as_raw(), job) }, 0);
}

/// A GPU op on the calling thread's stream: waits as the engine would, runs `job` on the
/// device, records its event.
fn gpu_op(
    rt: &'static Runtime,
    reads: &[Var],
    writes: &[Var],
    job: impl FnOnce() + Send + 'static,
) {
    let dev = &rt.devices()[0];
    let stream = dev.stream(rt.driver).unwrap();
    on_start(stream, reads, writes).unwrap();
    on_stream(stream, job);
    on_complete(rt, dev, stream, reads, writes).unwrap();
}

#[test]
fn a_read_on_another_stream_waits_for_the_writers_event() {
    let _g = TEST_LOCK.lock();
    let rt = runtime();
    let (var, cell) = (Var::new(), Arc::new(AtomicU64::new(0)));
    let c = cell.clone();
    gpu_op(rt, &[], std::slice::from_ref(&var), move || {
        std::thread::sleep(Duration::from_millis(50));
        c.store(7, Ordering::SeqCst);
    });
    let (v, c) = (var.clone(), cell.clone());
    let seen = std::thread::spawn(move || {
        let seen = Arc::new(AtomicU64::new(0));
        let s = seen.clone();
        gpu_op(rt, std::slice::from_ref(&v), &[], move || {
            s.store(c.load(Ordering::SeqCst), Ordering::SeqCst)
        });
        host_wait_all_of(&v);
        seen.load(Ordering::SeqCst)
    })
    .join()
    .unwrap();
    assert_eq!(seen, 7);
}

/// Waits for every event on `var` (writer and readers).
fn host_wait_all_of(var: &Var) {
    host_wait(var, true).unwrap();
}

#[test]
fn a_write_on_another_stream_waits_for_the_readers() {
    let _g = TEST_LOCK.lock();
    let rt = runtime();
    let (var, cell) = (Var::new(), Arc::new(AtomicU64::new(1)));
    let (v, c) = (var.clone(), cell.clone());
    let read = std::thread::spawn(move || {
        let seen = Arc::new(AtomicU64::new(0));
        let s = seen.clone();
        gpu_op(rt, &[v], &[], move || {
            std::thread::sleep(Duration::from_millis(50));
            s.store(c.load(Ordering::SeqCst), Ordering::SeqCst);
        });
        seen
    })
    .join()
    .unwrap();
    let c = cell.clone();
    gpu_op(rt, &[], std::slice::from_ref(&var), move || {
        c.store(2, Ordering::SeqCst)
    });
    host_wait(&var, false).unwrap();
    assert_eq!(cell.load(Ordering::SeqCst), 2);
    assert_eq!(
        read.load(Ordering::SeqCst),
        1,
        "the write overtook an earlier read"
    );
}

#[test]
fn the_host_waits_for_the_writer_and_the_fence_covers_every_user() {
    let _g = TEST_LOCK.lock();
    let rt = runtime();
    let (var, cell) = (Var::new(), Arc::new(AtomicU64::new(0)));
    assert!(fence_of(&var).is_empty());
    let c = cell.clone();
    gpu_op(rt, &[], std::slice::from_ref(&var), move || {
        std::thread::sleep(Duration::from_millis(30));
        c.store(5, Ordering::SeqCst);
    });
    let before = crate::cuda::runtime::counters().host_syncs;
    host_wait(&var, false).unwrap();
    assert_eq!(cell.load(Ordering::SeqCst), 5);
    assert!(crate::cuda::runtime::counters().host_syncs > before);
    assert_eq!(fence_of(&var).len(), 1);
    let v = var.clone();
    std::thread::spawn(move || gpu_op(rt, &[v], &[], || {}))
        .join()
        .unwrap();
    gpu_op(rt, std::slice::from_ref(&var), &[], || {});
    // The writer, plus one reader per stream.
    assert_eq!(fence_of(&var).len(), 3);
    gpu_op(rt, std::slice::from_ref(&var), &[], || {});
    assert_eq!(
        fence_of(&var).len(),
        3,
        "a later read on a stream replaces its earlier one"
    );
    for e in fence_of(&var) {
        e.synchronize().unwrap();
        assert!(e.is_done().unwrap());
    }
}
