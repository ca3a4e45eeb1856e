//! Built-in updates of stored values: the [`StoreUpdater`] interface (MXNet's
//! optimizers implement it in `optim::fused`).

use super::Key;
use crate::error::Result;
use crate::ndarray::NDArray;

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
