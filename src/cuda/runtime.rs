//! The GPUs rsmx was given: the driver table, each device's primary context, its kernel
//! modules (loaded on first use, on the thread that needs them, from the images
//! `rsmx.cuda` compiled), the stream each thread enqueues on, and a pool of events.

use super::blas::Blas;
use super::driver::{
    Driver, Handle, ATTRIBUTE_SM_COUNT, EVENT_DISABLE_TIMING, STREAM_NON_BLOCKING,
};
use super::staging::Staging;
use crate::context::{no_gpu_error, Context};
use crate::cu;
use crate::engine::StreamHandle;
use crate::error::{Error, Result};
use parking_lot::{Mutex, RwLock};
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// One GPU: its primary context, module images and loaded kernels, and free events.
pub struct Device {
    ordinal: i32,
    context: Handle,
    sm_count: u32,
    /// Module name to the image `cuModuleLoadData` takes (CUBIN bytes; for the fake
    /// driver, the NUL-terminated path of the host build).
    images: HashMap<String, Vec<u8>>,
    modules: Mutex<HashMap<String, Handle>>,
    /// Loaded functions by module, then kernel name (looked up on every launch, so with a
    /// fast hash).
    functions: RwLock<FxHashMap<String, FxHashMap<String, Handle>>>,
    free_events: Mutex<Vec<Handle>>,
    /// Every stream made for this device, for `waitall`.
    streams: Mutex<Vec<Handle>>,
    /// Pinned blocks that copies to and from pageable host memory pass through.
    pub staging: Staging,
}

// SAFETY: every handle is an opaque driver token valid on any thread (the driver is
// thread-safe); the maps holding them are behind locks.
unsafe impl Send for Device {}
// SAFETY: as for `Send`.
unsafe impl Sync for Device {}

/// The CUDA state of the process, installed once.
pub struct Runtime {
    pub driver: &'static Driver,
    /// cuBLAS, when it was found.
    pub blas: Option<Blas>,
    devices: Vec<Device>,
    /// True for the fake driver on host memory.
    pub fake: bool,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// What the GPU backend has done since the process started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Kernels launched.
    pub launches: u64,
    /// Host waits on device work (event and stream synchronisations).
    pub host_syncs: u64,
    /// Of those, waits of a copy for a busy pinned staging block, when the device holds
    /// all the pinned memory it may (back-pressure on a host that copies faster than the
    /// device takes the bytes).
    pub staging_waits: u64,
    /// Device allocations from the driver, and frees back to it.
    pub allocs: u64,
    pub frees: u64,
}

static LAUNCHES: AtomicU64 = AtomicU64::new(0);
static HOST_SYNCS: AtomicU64 = AtomicU64::new(0);
static STAGING_WAITS: AtomicU64 = AtomicU64::new(0);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static FREES: AtomicU64 = AtomicU64::new(0);

/// The counters so far.
pub fn counters() -> Counters {
    Counters {
        launches: LAUNCHES.load(Ordering::Relaxed),
        host_syncs: HOST_SYNCS.load(Ordering::Relaxed),
        staging_waits: STAGING_WAITS.load(Ordering::Relaxed),
        allocs: ALLOCS.load(Ordering::Relaxed),
        frees: FREES.load(Ordering::Relaxed),
    }
}

pub(crate) fn count_launch() {
    LAUNCHES.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn count_host_sync() {
    HOST_SYNCS.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn count_staging_wait() {
    STAGING_WAITS.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn count_alloc(freed: bool) {
    if freed { &FREES } else { &ALLOCS }.fetch_add(1, Ordering::Relaxed);
}

/// The installed runtime, if a GPU backend was started.
pub fn get() -> Option<&'static Runtime> {
    RUNTIME.get()
}

/// The runtime, or the error for using `ctx` without one.
pub fn for_context(ctx: Context) -> Result<(&'static Runtime, &'static Device)> {
    let rt = get().ok_or_else(|| no_gpu_error(ctx))?;
    let dev = usize::try_from(ctx.dev_id)
        .ok()
        .and_then(|i| rt.devices.get(i))
        .ok_or_else(|| no_gpu_error(ctx))?;
    Ok((rt, dev))
}

/// Starts the GPU backend with `driver` and, per device, its module images; returns
/// the number of devices. Only the first call installs anything.
pub fn install(
    driver: &'static Driver,
    blas: Option<Blas>,
    images: Vec<HashMap<String, Vec<u8>>>,
    fake: bool,
) -> Result<usize> {
    if let Some(rt) = get() {
        return Ok(rt.devices.len());
    }
    let mut rt = Runtime::start(driver, images, fake)?;
    rt.blas = blas;
    let n = rt.devices.len();
    let _ = RUNTIME.set(rt);
    crate::context::set_num_gpus(n);
    Ok(n)
}

impl Runtime {
    /// A runtime over `driver` with a device per entry of `images` (not installed).
    pub fn start(
        driver: &'static Driver,
        images: Vec<HashMap<String, Vec<u8>>>,
        fake: bool,
    ) -> Result<Runtime> {
        // SAFETY: cuInit takes flags 0 and may be called more than once.
        unsafe { cu!(driver, init(0)) }?;
        let mut devices = Vec::with_capacity(images.len());
        for (ordinal, images) in images.into_iter().enumerate() {
            let ordinal = ordinal as i32;
            let mut context: Handle = std::ptr::null_mut();
            let mut sms = 0i32;
            // SAFETY: writable locals; the driver checks the ordinal.
            unsafe {
                cu!(driver, primary_ctx_retain(&mut context, ordinal))?;
                cu!(
                    driver,
                    device_get_attribute(&mut sms, ATTRIBUTE_SM_COUNT, ordinal)
                )?;
            }
            devices.push(Device {
                ordinal,
                context,
                sm_count: sms.max(1) as u32,
                images,
                modules: Mutex::default(),
                functions: RwLock::default(),
                free_events: Mutex::default(),
                streams: Mutex::default(),
                staging: Staging::default(),
            });
        }
        Ok(Runtime {
            driver,
            blas: None,
            devices,
            fake,
        })
    }

    /// cuBLAS, or the error naming what is missing.
    pub fn blas(&self) -> Result<&Blas> {
        self.blas.as_ref().ok_or_else(|| {
            Error::Runtime(
                "cuBLAS was not found: pip install nvidia-cublas (or rsmx[cuda13])".into(),
            )
        })
    }

    /// The devices, by ordinal.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// Synchronises every stream of every device (`waitall`; never the whole context).
    pub fn synchronize_all(&self) -> Result<()> {
        let mut first = Ok(());
        for dev in &self.devices {
            let streams = dev.streams.lock().clone();
            for s in streams {
                count_host_sync();
                // SAFETY: the stream was made by this device and is never destroyed.
                let r = unsafe {
                    cu!(self.driver, ctx_set_current(dev.context))
                        .and_then(|_| cu!(self.driver, stream_synchronize(s)))
                };
                if first.is_ok() {
                    first = r.map_err(|e| e.in_op(&format!("gpu({})", dev.ordinal)));
                }
            }
        }
        first
    }
}

thread_local! {
    /// This thread's stream per device ordinal.
    static STREAMS: RefCell<Vec<Option<StreamHandle>>> = const { RefCell::new(Vec::new()) };
}

impl Device {
    pub fn ordinal(&self) -> i32 {
        self.ordinal
    }

    pub fn sm_count(&self) -> u32 {
        self.sm_count
    }

    /// The device's primary context.
    pub fn context(&self) -> Handle {
        self.context
    }

    /// Makes this device's primary context current on the calling thread.
    pub fn make_current(&self, driver: &Driver) -> Result<()> {
        // SAFETY: the context was retained at install and is never released.
        unsafe { cu!(driver, ctx_set_current(self.context)) }
    }

    /// The calling thread's non-blocking stream on this device, made on first use.
    pub fn stream(&self, driver: &Driver) -> Result<StreamHandle> {
        let idx = self.ordinal as usize;
        if let Some(s) = STREAMS.with(|s| s.borrow().get(idx).copied().flatten()) {
            return Ok(s);
        }
        self.make_current(driver)?;
        let mut raw: Handle = std::ptr::null_mut();
        // SAFETY: `raw` is a writable local; the device's context is current.
        unsafe { cu!(driver, stream_create(&mut raw, STREAM_NON_BLOCKING, 0)) }?;
        let s = StreamHandle::from_raw(raw)
            .ok_or_else(|| Error::Runtime("cuStreamCreateWithPriority gave no stream".into()))?;
        self.streams.lock().push(raw);
        STREAMS.with(|v| {
            let mut v = v.borrow_mut();
            if v.len() <= idx {
                v.resize(idx + 1, None);
            }
            v[idx] = Some(s);
        });
        Ok(s)
    }

    /// The kernel `name` of module `module`, loading the module on first use.
    pub fn function(&self, driver: &Driver, module: &str, name: &str) -> Result<Handle> {
        if let Some(f) = self.functions.read().get(module).and_then(|m| m.get(name)) {
            return Ok(*f);
        }
        let m = self.module(driver, module)?;
        let cname = CString::new(name).map_err(|_| Error::Value(format!("bad kernel {name}")))?;
        let mut f: Handle = std::ptr::null_mut();
        // SAFETY: `m` is a loaded module, `cname` a NUL-terminated name, `f` writable.
        unsafe { cu!(driver, module_get_function(&mut f, m, cname.as_ptr())) }.map_err(|e| {
            Error::Runtime(format!(
                "gpu({}): kernel {name} is not in module {module}: {e}",
                self.ordinal
            ))
        })?;
        self.functions
            .write()
            .entry(module.to_string())
            .or_default()
            .insert(name.to_string(), f);
        Ok(f)
    }

    fn module(&self, driver: &Driver, module: &str) -> Result<Handle> {
        let mut modules = self.modules.lock();
        if let Some(m) = modules.get(module) {
            return Ok(*m);
        }
        let image = self.images.get(module).ok_or_else(|| {
            Error::Runtime(format!(
                "gpu({}): rsmx was given no build of kernel module {module}",
                self.ordinal
            ))
        })?;
        self.make_current(driver)?;
        let mut m: Handle = std::ptr::null_mut();
        // SAFETY: `image` is a complete module image kept alive by the device for the
        // life of the process; `m` is writable.
        unsafe { cu!(driver, module_load_data(&mut m, image.as_ptr().cast())) }
            .map_err(|e| e.in_op(&format!("loading kernel module {module}")))?;
        modules.insert(module.to_string(), m);
        Ok(m)
    }

    /// An event from the pool, recorded on `stream`.
    pub fn record(&'static self, driver: &'static Driver, stream: StreamHandle) -> Result<Event> {
        let pooled = self.free_events.lock().pop();
        let raw = match pooled {
            Some(e) => e,
            None => {
                let mut e: Handle = std::ptr::null_mut();
                // SAFETY: `e` is a writable local.
                unsafe { cu!(driver, event_create(&mut e, EVENT_DISABLE_TIMING)) }?;
                e
            }
        };
        let event = Event(Arc::new(EventInner {
            raw,
            stream,
            device: self,
            driver,
        }));
        // SAFETY: a live event and a live stream of this device.
        unsafe { cu!(driver, event_record(raw, stream.as_raw())) }?;
        Ok(event)
    }
}

/// A recorded event; the handle returns to its device's pool when the last clone goes.
#[derive(Clone)]
pub struct Event(Arc<EventInner>);

struct EventInner {
    raw: Handle,
    stream: StreamHandle,
    device: &'static Device,
    driver: &'static Driver,
}

// SAFETY: the handle is an opaque driver token usable from any thread.
unsafe impl Send for EventInner {}
// SAFETY: as for `Send`; the struct is immutable.
unsafe impl Sync for EventInner {}

impl Drop for EventInner {
    fn drop(&mut self) {
        self.device.free_events.lock().push(self.raw);
    }
}

impl Event {
    /// The stream the event was recorded on.
    pub fn stream(&self) -> StreamHandle {
        self.0.stream
    }

    /// The device it belongs to.
    pub fn device(&self) -> &'static Device {
        self.0.device
    }

    /// Makes `stream` wait for the event (on the device, without the host).
    pub fn wait_on(&self, stream: StreamHandle) -> Result<()> {
        // SAFETY: a live event and stream.
        unsafe {
            cu!(
                self.0.driver,
                stream_wait_event(stream.as_raw(), self.0.raw, 0)
            )
        }
    }

    /// Blocks the calling thread until the work before the event is done.
    pub fn synchronize(&self) -> Result<()> {
        count_host_sync();
        // SAFETY: a live event.
        unsafe { cu!(self.0.driver, event_synchronize(self.0.raw)) }
    }

    /// True once the work before the event is done; errors for a failed device.
    pub fn is_done(&self) -> Result<bool> {
        // SAFETY: a live event.
        let code = unsafe { (self.0.driver.event_query)(self.0.raw) };
        if code == super::driver::NOT_READY {
            return Ok(false);
        }
        self.0
            .driver
            .check(super::driver::names::event_query, code)?;
        Ok(true)
    }
}
