//! A CUDA driver on host memory, for testing the GPU path without a GPU: device memory
//! is host memory, each stream is a FIFO worker thread, events are sequence numbers. It
//! counts what it is asked to do (allocations, frees, host synchronisations) and can be
//! told to fail the next allocation. It refuses the legacy NULL stream.

use super::driver::{CuDevice, CuDevicePtr, CuResult, Driver, Handle, NOT_READY, OUT_OF_MEMORY};
use parking_lot::{Condvar, Mutex};
use std::alloc::Layout;
use std::collections::HashMap;
use std::ffi::{c_char, c_uint, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, LazyLock};
use std::thread::JoinHandle;

const INVALID_VALUE: CuResult = 1;
const INVALID_HANDLE: CuResult = 400;
/// Device allocations are aligned as `cuMemAlloc`'s are.
const ALIGN: usize = 256;

/// What the fake driver has been asked to do since the process started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub allocs: u64,
    pub frees: u64,
    /// Host waits on device work: stream and event synchronisations.
    pub host_syncs: u64,
}

struct State {
    blocks: Mutex<HashMap<usize, Layout>>,
    /// Bytes of device memory the fake device has; allocations beyond fail.
    capacity: AtomicUsize,
    live_bytes: AtomicUsize,
    allocs: AtomicU64,
    frees: AtomicU64,
    host_syncs: AtomicU64,
    fail_next_alloc: AtomicBool,
}

/// The fake device's memory unless [`set_capacity`] says otherwise.
pub const DEFAULT_CAPACITY: usize = 16 << 30;

static STATE: LazyLock<State> = LazyLock::new(|| State {
    blocks: Mutex::default(),
    capacity: AtomicUsize::new(DEFAULT_CAPACITY),
    live_bytes: AtomicUsize::default(),
    allocs: AtomicU64::default(),
    frees: AtomicU64::default(),
    host_syncs: AtomicU64::default(),
    fail_next_alloc: AtomicBool::default(),
});

/// Sets how many bytes of device memory the fake device has.
pub fn set_capacity(bytes: usize) {
    STATE.capacity.store(bytes, Ordering::Relaxed);
}

/// The counters so far.
pub fn stats() -> Stats {
    Stats {
        allocs: STATE.allocs.load(Ordering::Relaxed),
        frees: STATE.frees.load(Ordering::Relaxed),
        host_syncs: STATE.host_syncs.load(Ordering::Relaxed),
    }
}

/// Makes the next device allocation fail with `CUDA_ERROR_OUT_OF_MEMORY`.
pub fn fail_next_alloc() {
    STATE.fail_next_alloc.store(true, Ordering::Relaxed);
}

/// The fake driver's table.
pub fn driver() -> Driver {
    Driver {
        get_error_name,
        primary_ctx_retain,
        ctx_set_current,
        mem_alloc,
        mem_free,
        mem_get_info,
        mem_host_alloc,
        mem_free_host,
        memcpy_htod_async,
        memcpy_dtoh_async,
        memcpy_dtod_async,
        memset_d8_async,
        stream_create,
        stream_destroy,
        stream_wait_event,
        stream_synchronize,
        event_create,
        event_record,
        event_query,
        event_synchronize,
        event_destroy,
        init,
        device_get_attribute,
        memcpy_peer_async,
        module_load_data,
        module_unload,
        module_get_function,
        launch_kernel,
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// A stream: jobs run one after another on its own thread.
struct Stream {
    jobs: Option<Sender<Job>>,
    worker: Option<JoinHandle<()>>,
}

impl Stream {
    fn new() -> Stream {
        let (tx, rx) = channel::<Job>();
        let worker = std::thread::Builder::new()
            .name("rsmx-fake-stream".into())
            .spawn(move || rx.into_iter().for_each(|job| job()))
            .ok();
        Stream {
            jobs: Some(tx),
            worker,
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

/// An event: `recorded` counts records, `done` the last one its stream reached.
#[derive(Default)]
struct Event {
    recorded: AtomicU64,
    done: Mutex<u64>,
    reached: Condvar,
}

impl Event {
    fn wait_for(&self, target: u64) {
        let mut done = self.done.lock();
        while *done < target {
            self.reached.wait(&mut done);
        }
    }
}

/// Queues `job` on the stream behind `stream`.
///
/// # Safety
/// `stream` must be null or a live handle from `stream_create`.
pub(crate) unsafe fn enqueue(stream: Handle, job: impl FnOnce() + Send + 'static) -> CuResult {
    if stream.is_null() {
        return INVALID_HANDLE;
    }
    // SAFETY: the caller passes a live stream handle.
    let s = unsafe { &*(stream as *const Stream) };
    match &s.jobs {
        Some(tx) if tx.send(Box::new(job)).is_ok() => 0,
        _ => INVALID_HANDLE,
    }
}

/// A new reference to the event behind `event`.
///
/// # Safety
/// `event` must be a live handle from `event_create`.
unsafe fn event_ref(event: Handle) -> Arc<Event> {
    let p = event as *const Event;
    // SAFETY: the handle holds one strong count, so the event is alive; this adds one.
    unsafe {
        Arc::increment_strong_count(p);
        Arc::from_raw(p)
    }
}

unsafe extern "C" fn get_error_name(code: CuResult, out: *mut *const c_char) -> CuResult {
    let name: &'static [u8] = match code {
        0 => b"CUDA_SUCCESS\0",
        INVALID_VALUE => b"CUDA_ERROR_INVALID_VALUE\0",
        OUT_OF_MEMORY => b"CUDA_ERROR_OUT_OF_MEMORY\0",
        INVALID_HANDLE => b"CUDA_ERROR_INVALID_HANDLE\0",
        NOT_READY => b"CUDA_ERROR_NOT_READY\0",
        _ => return INVALID_VALUE,
    };
    // SAFETY: the caller passes a writable pointer.
    unsafe { *out = name.as_ptr().cast() };
    0
}

unsafe extern "C" fn primary_ctx_retain(ctx: *mut Handle, dev: CuDevice) -> CuResult {
    if dev < 0 {
        return INVALID_VALUE;
    }
    // Any non-null value stands for the device's context.
    // SAFETY: the caller passes a writable pointer.
    unsafe { *ctx = (dev as usize + 1) as Handle };
    0
}

unsafe extern "C" fn ctx_set_current(_: Handle) -> CuResult {
    0
}

fn host_alloc(bytes: usize) -> Option<*mut u8> {
    let layout = Layout::from_size_align(bytes.max(1), ALIGN).ok()?;
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { std::alloc::alloc(layout) };
    (!p.is_null()).then(|| {
        STATE.blocks.lock().insert(p as usize, layout);
        p
    })
}

fn host_free(p: usize) -> CuResult {
    match STATE.blocks.lock().remove(&p) {
        Some(layout) => {
            // SAFETY: `p` came from `host_alloc` with this layout and is freed once.
            unsafe { std::alloc::dealloc(p as *mut u8, layout) };
            0
        }
        None => INVALID_VALUE,
    }
}

unsafe extern "C" fn mem_alloc(out: *mut CuDevicePtr, bytes: usize) -> CuResult {
    if STATE.fail_next_alloc.swap(false, Ordering::Relaxed) {
        return OUT_OF_MEMORY;
    }
    // Live bytes count blocks as `host_alloc` sizes them, so frees subtract the same.
    let size = bytes.max(1);
    let live = STATE.live_bytes.fetch_add(size, Ordering::AcqRel) + size;
    let fits = live <= STATE.capacity.load(Ordering::Relaxed);
    let Some(p) = fits.then(|| host_alloc(size)).flatten() else {
        STATE.live_bytes.fetch_sub(size, Ordering::AcqRel);
        return OUT_OF_MEMORY;
    };
    STATE.allocs.fetch_add(1, Ordering::Relaxed);
    // SAFETY: the caller passes a writable pointer.
    unsafe { *out = p as CuDevicePtr };
    0
}

unsafe extern "C" fn mem_free(p: CuDevicePtr) -> CuResult {
    let size = STATE.blocks.lock().get(&(p as usize)).map(|l| l.size());
    let r = host_free(p as usize);
    if let (0, Some(size)) = (r, size) {
        STATE.live_bytes.fetch_sub(size, Ordering::AcqRel);
        STATE.frees.fetch_add(1, Ordering::Relaxed);
    }
    r
}

unsafe extern "C" fn mem_get_info(free: *mut usize, total: *mut usize) -> CuResult {
    let cap = STATE.capacity.load(Ordering::Relaxed);
    // SAFETY: the caller passes writable pointers.
    unsafe {
        *total = cap;
        *free = cap.saturating_sub(STATE.live_bytes.load(Ordering::Acquire));
    }
    0
}

unsafe extern "C" fn mem_host_alloc(out: *mut *mut c_void, bytes: usize, _: c_uint) -> CuResult {
    let Some(p) = host_alloc(bytes) else {
        return OUT_OF_MEMORY;
    };
    // SAFETY: the caller passes a writable pointer.
    unsafe { *out = p.cast() };
    0
}

unsafe extern "C" fn mem_free_host(p: *mut c_void) -> CuResult {
    host_free(p as usize)
}

/// Queues a copy of `bytes` bytes; addresses travel as integers to the stream's thread.
unsafe fn copy_async(dst: usize, src: usize, bytes: usize, stream: Handle) -> CuResult {
    // SAFETY (of the job): stream order makes the caller keep both buffers alive and
    // unaliased by other writers until the copy has run, as with the real driver.
    let job = move || unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, bytes) };
    // SAFETY: the caller passes a stream handle.
    unsafe { enqueue(stream, job) }
}

unsafe extern "C" fn memcpy_htod_async(
    dst: CuDevicePtr,
    src: *const c_void,
    bytes: usize,
    stream: Handle,
) -> CuResult {
    // SAFETY: forwarded from the caller.
    unsafe { copy_async(dst as usize, src as usize, bytes, stream) }
}

unsafe extern "C" fn memcpy_dtoh_async(
    dst: *mut c_void,
    src: CuDevicePtr,
    bytes: usize,
    stream: Handle,
) -> CuResult {
    // SAFETY: forwarded from the caller.
    unsafe { copy_async(dst as usize, src as usize, bytes, stream) }
}

unsafe extern "C" fn memcpy_dtod_async(
    dst: CuDevicePtr,
    src: CuDevicePtr,
    bytes: usize,
    stream: Handle,
) -> CuResult {
    // SAFETY: forwarded from the caller.
    unsafe { copy_async(dst as usize, src as usize, bytes, stream) }
}

unsafe extern "C" fn memset_d8_async(
    dst: CuDevicePtr,
    v: u8,
    n: usize,
    stream: Handle,
) -> CuResult {
    // SAFETY (of the job): as for copies, the buffer outlives the queued write.
    let job = move || unsafe { std::ptr::write_bytes(dst as *mut u8, v, n) };
    // SAFETY: the caller passes a stream handle.
    unsafe { enqueue(stream, job) }
}

unsafe extern "C" fn stream_create(out: *mut Handle, _flags: c_uint, _priority: i32) -> CuResult {
    // SAFETY: the caller passes a writable pointer.
    unsafe { *out = Box::into_raw(Box::new(Stream::new())).cast() };
    0
}

unsafe extern "C" fn stream_destroy(stream: Handle) -> CuResult {
    if stream.is_null() {
        return INVALID_HANDLE;
    }
    // SAFETY: the handle came from `stream_create` and is destroyed once; dropping it
    // runs the queued jobs to the end first.
    drop(unsafe { Box::from_raw(stream as *mut Stream) });
    0
}

unsafe extern "C" fn stream_wait_event(stream: Handle, event: Handle, _: c_uint) -> CuResult {
    // SAFETY: the caller passes a live event handle.
    let ev = unsafe { event_ref(event) };
    let target = ev.recorded.load(Ordering::Acquire);
    // SAFETY: the caller passes a stream handle.
    unsafe { enqueue(stream, move || ev.wait_for(target)) }
}

unsafe extern "C" fn stream_synchronize(stream: Handle) -> CuResult {
    let (tx, rx) = channel::<()>();
    // SAFETY: the caller passes a stream handle.
    let r = unsafe {
        enqueue(stream, move || {
            let _ = tx.send(());
        })
    };
    if r != 0 {
        return r;
    }
    STATE.host_syncs.fetch_add(1, Ordering::Relaxed);
    if rx.recv().is_err() {
        return INVALID_HANDLE;
    }
    0
}

unsafe extern "C" fn event_create(out: *mut Handle, _flags: c_uint) -> CuResult {
    // SAFETY: the caller passes a writable pointer.
    unsafe { *out = Arc::into_raw(Arc::new(Event::default())) as Handle };
    0
}

unsafe extern "C" fn event_record(event: Handle, stream: Handle) -> CuResult {
    // SAFETY: the caller passes a live event handle.
    let ev = unsafe { event_ref(event) };
    let target = ev.recorded.fetch_add(1, Ordering::AcqRel) + 1;
    let reach = move || {
        let mut done = ev.done.lock();
        *done = (*done).max(target);
        ev.reached.notify_all();
    };
    // SAFETY: the caller passes a stream handle.
    unsafe { enqueue(stream, reach) }
}

unsafe extern "C" fn event_query(event: Handle) -> CuResult {
    // SAFETY: the caller passes a live event handle.
    let ev = unsafe { event_ref(event) };
    let target = ev.recorded.load(Ordering::Acquire);
    if *ev.done.lock() >= target {
        0
    } else {
        NOT_READY
    }
}

unsafe extern "C" fn event_synchronize(event: Handle) -> CuResult {
    // SAFETY: the caller passes a live event handle.
    let ev = unsafe { event_ref(event) };
    STATE.host_syncs.fetch_add(1, Ordering::Relaxed);
    ev.wait_for(ev.recorded.load(Ordering::Acquire));
    0
}

unsafe extern "C" fn event_destroy(event: Handle) -> CuResult {
    // SAFETY: the handle holds one strong count, released here once.
    drop(unsafe { Arc::from_raw(event as *const Event) });
    0
}

unsafe extern "C" fn init(_: c_uint) -> CuResult {
    0
}

/// Multiprocessors of a fake device: few, so that grid-stride loops run long.
pub const SM_COUNT: i32 = 4;

unsafe extern "C" fn device_get_attribute(out: *mut i32, attribute: i32, _: CuDevice) -> CuResult {
    if attribute != super::driver::ATTRIBUTE_SM_COUNT {
        return INVALID_VALUE;
    }
    // SAFETY: the caller passes a writable pointer.
    unsafe { *out = SM_COUNT };
    0
}

unsafe extern "C" fn memcpy_peer_async(
    dst: CuDevicePtr,
    _: Handle,
    src: CuDevicePtr,
    _: Handle,
    bytes: usize,
    stream: Handle,
) -> CuResult {
    // SAFETY: forwarded from the caller; every fake device's memory is host memory.
    unsafe { copy_async(dst as usize, src as usize, bytes, stream) }
}

const NOT_SUPPORTED: CuResult = 801;

unsafe extern "C" fn module_load_data(_: *mut Handle, _: *const c_void) -> CuResult {
    NOT_SUPPORTED
}

unsafe extern "C" fn module_unload(_: Handle) -> CuResult {
    NOT_SUPPORTED
}

unsafe extern "C" fn module_get_function(_: *mut Handle, _: Handle, _: *const c_char) -> CuResult {
    NOT_SUPPORTED
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn launch_kernel(
    _: Handle,
    _: c_uint,
    _: c_uint,
    _: c_uint,
    _: c_uint,
    _: c_uint,
    _: c_uint,
    _: c_uint,
    _: Handle,
    _: *mut *mut c_void,
    _: *mut *mut c_void,
) -> CuResult {
    NOT_SUPPORTED
}

/// Tests that read the process-wide counters or change the capacity hold this lock.
#[cfg(test)]
pub(crate) static TEST_LOCK: Mutex<()> = Mutex::new(());

#[cfg(test)]
mod tests;
