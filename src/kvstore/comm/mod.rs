//! How a local store moves data: a [`Comm`] sums the values pushed to a key from several
//! devices and copies a stored value to several outputs, one implementation per device kind.

mod cpu;
mod device;

pub use cpu::CommCpu;
pub use device::CommDevice;

use crate::context::Context;
use crate::error::Result;
use crate::ndarray::NDArray;

/// A reduction and broadcast strategy (MXNet's `Comm`). Every method pushes its work to
/// the engine and returns once it is queued; the arrays' engine variables order it.
pub trait Comm: Send + Sync {
    /// The device a key's stored value is kept on from `init`, given its initial value.
    fn home(&self, init: &NDArray) -> Context;

    /// Called once per key, at its first push: the stored value on the device that sums
    /// this key from then on (`stored` itself, or a copy moved to that device).
    fn place(&self, stored: &NDArray, values: &[NDArray]) -> Result<NDArray>;

    /// Pushes `target = sum(values)` with `priority`; every value has the target's shape
    /// and type.
    fn reduce(&self, values: &[NDArray], target: &NDArray, priority: i32) -> Result<()>;

    /// Pushes a copy of `src` into each of `outs` with `priority`.
    fn broadcast(&self, src: &NDArray, outs: &[NDArray], priority: i32) -> Result<()>;
}

/// The strategy of MXNet's local store type `name`, or `None` for a name that is not a
/// local type.
pub fn for_type(name: &str) -> Option<Box<dyn Comm>> {
    match name {
        "local" | "local_allreduce_cpu" | "local_update_cpu" => Some(Box::new(CommCpu)),
        "device" | "local_allreduce_device" => Some(Box::new(CommDevice::default())),
        _ => None,
    }
}
