//! The KVStore: values kept per key; pushes from several devices are summed and applied
//! by an updater, pulls broadcast the stored value to every device.

mod comm;
mod store;
#[cfg(test)]
mod tests;

pub use store::{KVStore, StoreKind, StoreUpdater};

pub use crate::optim::ParamKey as Key;

use crate::error::Result;
use crate::ndarray::NDArray;
use crate::optim::FusedOptimizer;

/// MXNet's built-in optimizers, run by the store as fused update operators.
impl StoreUpdater for FusedOptimizer {
    fn create_state(&self, key: &Key, weight: &NDArray) -> Result<Vec<NDArray>> {
        FusedOptimizer::create_state(self, key, weight)
    }

    fn update(
        &self,
        key: &Key,
        weight: &NDArray,
        grad: &NDArray,
        state: &[NDArray],
        priority: i32,
    ) -> Result<()> {
        FusedOptimizer::update(self, key, weight, grad, state, priority)
    }
}
