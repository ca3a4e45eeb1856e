//! Device contexts: `cpu(i)` and `gpu(i)`, with MXNet's device type numbers.

use std::fmt;

/// Kind of device, numbered as MXNet numbers them in files and the C API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeviceType {
    Cpu = 1,
    Gpu = 2,
    CpuPinned = 3,
    CpuShared = 5,
}

impl DeviceType {
    /// The device type for MXNet's number.
    pub fn from_i32(v: i32) -> Option<DeviceType> {
        match v {
            1 => Some(DeviceType::Cpu),
            2 => Some(DeviceType::Gpu),
            3 => Some(DeviceType::CpuPinned),
            5 => Some(DeviceType::CpuShared),
            _ => None,
        }
    }

    /// MXNet's name for the type (`cpu`, `gpu`, `cpu_pinned`, `cpu_shared`).
    pub fn name(self) -> &'static str {
        match self {
            DeviceType::Cpu => "cpu",
            DeviceType::Gpu => "gpu",
            DeviceType::CpuPinned => "cpu_pinned",
            DeviceType::CpuShared => "cpu_shared",
        }
    }
}

/// A device: its type and id. Every `cpu(i)` is a distinct device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Context {
    pub dev_type: DeviceType,
    pub dev_id: i32,
}

impl Context {
    /// `cpu(id)`.
    pub const fn cpu(dev_id: i32) -> Context {
        Context {
            dev_type: DeviceType::Cpu,
            dev_id,
        }
    }

    /// `gpu(id)`.
    pub const fn gpu(dev_id: i32) -> Context {
        Context {
            dev_type: DeviceType::Gpu,
            dev_id,
        }
    }

    /// True for every host-memory device type.
    pub fn is_cpu(&self) -> bool {
        self.dev_type != DeviceType::Gpu
    }
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.dev_type.name(), self.dev_id)
    }
}

static GPUS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Number of GPUs the core was given by a GPU backend (0 until one is started).
pub fn num_gpus() -> usize {
    GPUS.load(std::sync::atomic::Ordering::Acquire)
}

/// Records the GPUs a backend has started; called once by the backend.
pub fn set_num_gpus(n: usize) {
    GPUS.store(n, std::sync::atomic::Ordering::Release);
}

static NO_GPU_REASON: parking_lot::Mutex<Option<String>> = parking_lot::const_mutex(None);

/// Records why no GPU can be used (found by `rsmx.cuda`), for the errors that name it.
pub fn set_no_gpu_reason(reason: String) {
    *NO_GPU_REASON.lock() = Some(reason);
}

/// The error for using `ctx`, a GPU the core was not given.
pub fn no_gpu_error(ctx: Context) -> crate::error::Error {
    let n = num_gpus();
    crate::error::Error::Runtime(if n == 0 {
        let reason = NO_GPU_REASON.lock().clone();
        let reason = reason.as_deref().unwrap_or("no CUDA driver found");
        format!("{ctx}: rsmx was not given a GPU: {reason}")
    } else {
        format!("{ctx}: no such GPU; rsmx was given {n}")
    })
}
