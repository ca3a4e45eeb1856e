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
