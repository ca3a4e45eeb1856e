//! Built-in updates of stored values: the [`StoreUpdater`] interface and MXNet's
//! optimizers behind it.

use super::Key;
use crate::error::Result;
use crate::ndarray::NDArray;
use crate::optim::FusedOptimizer;

/// A built-in update of stored values (an optimizer running as fused ops).
pub trait StoreUpdater: Send + Sync {
    /// The optimizer state for the value stored under `key`.
    fn create_state(&self, key: &Key, weight: &NDArray) -> Result<Vec<NDArray>>;
    /// Pushes the update of `weight` by `grad` with `state`.
    fn update(
        &self,
        key: &Key,
        weight: &NDArray,
        grad: &NDArray,
        state: &[NDArray],
        priority: i32,
    ) -> Result<()>;
}

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
