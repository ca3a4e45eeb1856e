//! A CUDA driver on host memory, for testing the GPU path without a GPU: device memory
//! is host memory, each stream is a FIFO worker thread, events are sequence numbers. It
//! counts what it is asked to do (allocations, frees, host synchronisations, kernel
//! launches) and can be told to fail the next allocation or launch. It refuses the legacy
//! NULL stream.
//!
//! Kernels are rsmx's `.cu` sources built for the host by `rsmx.cuda.host`: the "image"
//! `cuModuleLoadData` takes is the NUL-terminated path of such a shared library, which is
//! loaded and asked, through `rsmx_host_param_sizes`, how many bytes each kernel parameter
//! has. `cuLaunchKernel` copies the arguments at once, as the real driver does, and queues
//! `rsmx_host_launch` on the stream's thread. A launch that fails there is a sticky error,
//! as on a GPU: no kernel runs after it, and later launches, stream and event
//! synchronisations and event queries return `CUDA_ERROR_LAUNCH_FAILED` until
//! [`clear_sticky_error`].

use super::driver::{
    CuDevice, CuDevicePtr, CuResult, Driver, Handle, NOT_FOUND, NOT_READY, OUT_OF_MEMORY,
};
use libloading::Library;
use parking_lot::{Condvar, Mutex};
use std::alloc::Layout;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, LazyLock};
use std::thread::JoinHandle;

const INVALID_VALUE: CuResult = 1;
const INVALID_HANDLE: CuResult = 400;
/// `CUDA_ERROR_INVALID_IMAGE`: the module image is not a loadable host library.
pub const INVALID_IMAGE: CuResult = 200;
/// `CUDA_ERROR_LAUNCH_FAILED`: a kernel failed; sticky until [`clear_sticky_error`].
pub const LAUNCH_FAILED: CuResult = 719;
/// The most threads a block may have.
const MAX_BLOCK_THREADS: u64 = 1024;
/// Device allocations are aligned as `cuMemAlloc`'s are.
const ALIGN: usize = 256;

/// What the fake driver has been asked to do since the process started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub allocs: u64,
    pub frees: u64,
    /// Host waits on device work: stream and event synchronisations.
    pub host_syncs: u64,
    /// Kernel launches queued.
    pub launches: u64,
}

struct State {
    blocks: Mutex<HashMap<usize, Layout>>,
    /// Bytes of device memory the fake device has; allocations beyond fail.
    capacity: AtomicUsize,
    live_bytes: AtomicUsize,
    allocs: AtomicU64,
    frees: AtomicU64,
    host_syncs: AtomicU64,
    launches: AtomicU64,
    fail_next_alloc: AtomicBool,
    fail_next_launch: AtomicBool,
    /// 0, or the error a failed kernel left for every later synchronisation.
    sticky: AtomicI32,
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
    launches: AtomicU64::default(),
    fail_next_alloc: AtomicBool::default(),
    fail_next_launch: AtomicBool::default(),
    sticky: AtomicI32::default(),
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
        launches: STATE.launches.load(Ordering::Relaxed),
    }
}

/// Makes the next device allocation fail with `CUDA_ERROR_OUT_OF_MEMORY`.
pub fn fail_next_alloc() {
    STATE.fail_next_alloc.store(true, Ordering::Relaxed);
}

/// Makes the next `cuLaunchKernel` return `CUDA_ERROR_LAUNCH_FAILED` at once, running
/// nothing.
pub fn fail_next_launch() {
    STATE.fail_next_launch.store(true, Ordering::Relaxed);
}

/// Forgets the sticky error a failed kernel left, so kernels run again.
pub fn clear_sticky_error() {
    STATE.sticky.store(0, Ordering::SeqCst);
}

/// `result`, unless a kernel has failed: then the sticky error.
fn unless_sticky(result: CuResult) -> CuResult {
    match STATE.sticky.load(Ordering::SeqCst) {
        0 => result,
        sticky => sticky,
    }
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

/// An event: `recorded` numbers its records, `pending` holds those their streams have
/// not reached. Records may be on different streams and so finish out of order; a wait
/// is for one record (the latest when the wait was made), as with the real driver.
#[derive(Default)]
struct Event {
    recorded: AtomicU64,
    pending: Mutex<HashSet<u64>>,
    reached: Condvar,
}

impl Event {
    fn wait_for(&self, record: u64) {
        let mut pending = self.pending.lock();
        while pending.contains(&record) {
            self.reached.wait(&mut pending);
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
        INVALID_IMAGE => b"CUDA_ERROR_INVALID_IMAGE\0",
        NOT_FOUND => b"CUDA_ERROR_NOT_FOUND\0",
        LAUNCH_FAILED => b"CUDA_ERROR_LAUNCH_FAILED\0",
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
    unless_sticky(0)
}

unsafe extern "C" fn event_create(out: *mut Handle, _flags: c_uint) -> CuResult {
    // SAFETY: the caller passes a writable pointer.
    unsafe { *out = Arc::into_raw(Arc::new(Event::default())) as Handle };
    0
}

unsafe extern "C" fn event_record(event: Handle, stream: Handle) -> CuResult {
    // SAFETY: the caller passes a live event handle.
    let ev = unsafe { event_ref(event) };
    let mut pending = ev.pending.lock();
    let record = ev.recorded.fetch_add(1, Ordering::AcqRel) + 1;
    pending.insert(record);
    drop(pending);
    let reach_ev = ev.clone();
    let reach = move || {
        reach_ev.pending.lock().remove(&record);
        reach_ev.reached.notify_all();
    };
    // SAFETY: the caller passes a stream handle.
    let queued = unsafe { enqueue(stream, reach) };
    if queued != 0 {
        ev.pending.lock().remove(&record);
    }
    queued
}

unsafe extern "C" fn event_query(event: Handle) -> CuResult {
    // SAFETY: the caller passes a live event handle.
    let ev = unsafe { event_ref(event) };
    let latest = ev.recorded.load(Ordering::Acquire);
    // Read after `pending`: a kernel that failed before the event set the error first.
    let done = !ev.pending.lock().contains(&latest);
    unless_sticky(if done { 0 } else { NOT_READY })
}

unsafe extern "C" fn event_synchronize(event: Handle) -> CuResult {
    // SAFETY: the caller passes a live event handle.
    let ev = unsafe { event_ref(event) };
    STATE.host_syncs.fetch_add(1, Ordering::Relaxed);
    ev.wait_for(ev.recorded.load(Ordering::Acquire));
    unless_sticky(0)
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

/// `rsmx_host_launch(name, gx, gy, gz, bx, by, bz, smem, params, order, seed)`.
type HostLaunch = unsafe extern "C" fn(
    *const c_char,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    usize,
    *mut *mut c_void,
    c_int,
    c_uint,
) -> c_int;
/// `rsmx_host_param_sizes(name, sizes, max)`.
type HostParamSizes = unsafe extern "C" fn(*const c_char, *mut usize, c_int) -> c_int;

/// A loaded host library: kept by its module and by every launch queued from it.
struct HostLibrary {
    launch: HostLaunch,
    param_sizes: HostParamSizes,
    /// Keeps the functions above loaded; dropped (unloaded) last.
    _library: Library,
}

impl HostLibrary {
    /// Loads the host library at `path` and resolves its two entry points.
    fn load(path: &str) -> Option<HostLibrary> {
        // A bare name would make the loader search its paths: insist on a file.
        let path = std::fs::canonicalize(path).ok()?;
        if !path.is_file() {
            return None;
        }
        // SAFETY: loading runs the library's initialisers; a host library built by
        // `rsmx.cuda.host` has only the C++ runtime's.
        let library = unsafe { Library::new(path.to_str()?) }.ok()?;
        // SAFETY: `rsmx.cuda.host` defines both symbols with exactly these signatures;
        // the copied function pointers live as long as `library`, which is kept beside
        // them.
        let (launch, param_sizes) = unsafe {
            (
                *library.get::<HostLaunch>(b"rsmx_host_launch\0").ok()?,
                *library
                    .get::<HostParamSizes>(b"rsmx_host_param_sizes\0")
                    .ok()?,
            )
        };
        Some(HostLibrary {
            launch,
            param_sizes,
            _library: library,
        })
    }

    /// Each parameter's size in bytes, or `None` for a kernel the library lacks.
    fn param_sizes(&self, name: &CStr) -> Option<Vec<usize>> {
        // SAFETY: `name` is NUL-terminated; with no buffer the library only counts.
        let n = unsafe { (self.param_sizes)(name.as_ptr(), std::ptr::null_mut(), 0) };
        let n = usize::try_from(n).ok()?;
        let mut sizes = vec![0usize; n];
        let max = c_int::try_from(n).ok()?;
        // SAFETY: `sizes` has room for the `max` sizes the library writes.
        let again = unsafe { (self.param_sizes)(name.as_ptr(), sizes.as_mut_ptr(), max) };
        (again == max).then_some(sizes)
    }
}

/// A module: its library and the functions looked up in it so far, which live as long as
/// the module (as `CUfunction`s do).
struct Module {
    library: Arc<HostLibrary>,
    functions: Mutex<HashMap<CString, Box<Function>>>,
}

/// A kernel of a module.
struct Function {
    library: Arc<HostLibrary>,
    name: CString,
    param_sizes: Vec<usize>,
}

unsafe extern "C" fn module_load_data(out: *mut Handle, image: *const c_void) -> CuResult {
    if out.is_null() || image.is_null() {
        return INVALID_VALUE;
    }
    // SAFETY: for the fake driver the image is a NUL-terminated path.
    let path = unsafe { CStr::from_ptr(image.cast::<c_char>()) };
    let Some(library) = path.to_str().ok().and_then(HostLibrary::load) else {
        return INVALID_IMAGE;
    };
    let module = Module {
        library: Arc::new(library),
        functions: Mutex::default(),
    };
    // SAFETY: the caller passes a writable pointer.
    unsafe { *out = Box::into_raw(Box::new(module)).cast() };
    0
}

unsafe extern "C" fn module_unload(module: Handle) -> CuResult {
    if module.is_null() {
        return INVALID_HANDLE;
    }
    // SAFETY: the handle came from `module_load_data` and is unloaded once. Its function
    // handles go with it; launches already queued keep the library loaded.
    drop(unsafe { Box::from_raw(module.cast::<Module>()) });
    0
}

unsafe extern "C" fn module_get_function(
    out: *mut Handle,
    module: Handle,
    name: *const c_char,
) -> CuResult {
    if module.is_null() {
        return INVALID_HANDLE;
    }
    if out.is_null() || name.is_null() {
        return INVALID_VALUE;
    }
    // SAFETY: the caller passes a live module handle and a NUL-terminated name.
    let (m, name) = unsafe { (&*module.cast::<Module>(), CStr::from_ptr(name)) };
    let mut functions = m.functions.lock();
    let f = match functions.get(name) {
        Some(f) => f,
        None => {
            let Some(param_sizes) = m.library.param_sizes(name) else {
                return NOT_FOUND;
            };
            let f = Box::new(Function {
                library: m.library.clone(),
                name: name.to_owned(),
                param_sizes,
            });
            functions.entry(name.to_owned()).or_insert(f)
        }
    };
    // SAFETY: the caller passes a writable pointer; the boxed function stays at its
    // address until the module is unloaded.
    unsafe { *out = (&**f as *const Function).cast_mut().cast() };
    0
}

/// Storage for copied kernel arguments, aligned for any parameter type.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Chunk([u8; 16]);

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn launch_kernel(
    f: Handle,
    gx: c_uint,
    gy: c_uint,
    gz: c_uint,
    bx: c_uint,
    by: c_uint,
    bz: c_uint,
    smem: c_uint,
    stream: Handle,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CuResult {
    if STATE.fail_next_launch.swap(false, Ordering::Relaxed) {
        return LAUNCH_FAILED;
    }
    let sticky = unless_sticky(0);
    if sticky != 0 {
        return sticky;
    }
    if f.is_null() || stream.is_null() {
        return INVALID_HANDLE;
    }
    let threads = u64::from(bx) * u64::from(by) * u64::from(bz);
    if [gx, gy, gz, bx, by, bz].contains(&0) || threads > MAX_BLOCK_THREADS || !extra.is_null() {
        return INVALID_VALUE;
    }
    // SAFETY: the caller passes a live function handle.
    let f = unsafe { &*f.cast::<Function>() };
    if params.is_null() && !f.param_sizes.is_empty() {
        return INVALID_VALUE;
    }
    // Copy every argument now: the caller may change or free them once this returns.
    let mut offsets = Vec::with_capacity(f.param_sizes.len());
    let mut chunks = 0;
    for &size in &f.param_sizes {
        offsets.push(chunks * size_of::<Chunk>());
        chunks += size.div_ceil(size_of::<Chunk>()).max(1);
    }
    let mut args = vec![Chunk([0; 16]); chunks];
    let base = args.as_mut_ptr().cast::<u8>();
    for (i, (&size, &offset)) in f.param_sizes.iter().zip(&offsets).enumerate() {
        // SAFETY: `params` holds a pointer for each of the kernel's parameters.
        let src = unsafe { *params.add(i) };
        if src.is_null() {
            return INVALID_VALUE;
        }
        // SAFETY: `src` points to `size` readable bytes (the parameter's type), and
        // `args` has room for them at `offset`.
        unsafe { std::ptr::copy_nonoverlapping(src.cast::<u8>(), base.add(offset), size) };
    }
    let (library, name) = (f.library.clone(), f.name.clone());
    let job = move || {
        // After a failure the device runs nothing more until the error is cleared.
        if STATE.sticky.load(Ordering::SeqCst) != 0 {
            return;
        }
        let base = args.as_mut_ptr().cast::<u8>();
        // SAFETY: each offset is inside `args`.
        let mut ptrs: Vec<*mut c_void> = offsets
            .iter()
            .map(|&o| unsafe { base.add(o) }.cast())
            .collect();
        // SAFETY: the library is loaded while `library` lives; `ptrs` points to a copy of
        // each argument, aligned for its type; device pointers among them stay valid by
        // stream order, as for copies. Forward order (0) with seed 0 lets the emulation
        // run kernels without barriers as plain calls.
        let rc = unsafe {
            (library.launch)(
                name.as_ptr(),
                gx,
                gy,
                gz,
                bx,
                by,
                bz,
                smem as usize,
                ptrs.as_mut_ptr(),
                0,
                0,
            )
        };
        if rc != 0 {
            let _ =
                STATE
                    .sticky
                    .compare_exchange(0, LAUNCH_FAILED, Ordering::SeqCst, Ordering::SeqCst);
        }
    };
    // SAFETY: the caller passes a live stream handle (null was refused above).
    let r = unsafe { enqueue(stream, job) };
    if r == 0 {
        STATE.launches.fetch_add(1, Ordering::Relaxed);
    }
    r
}

/// Tests that read the process-wide counters or change the capacity hold this lock.
#[cfg(test)]
pub(crate) static TEST_LOCK: Mutex<()> = Mutex::new(());

pub mod blas;

#[cfg(test)]
mod tests;
