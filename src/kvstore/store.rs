//! The store interface every KVStore offers (MXNet's `KVStore`): the local store and, on
//! a worker of a cluster, the distributed one.

use super::{check, Key, StoreUpdater};
use crate::error::Result;
use crate::ndarray::NDArray;
use std::sync::Arc;

/// A key's pushed sum for an updater outside the store: `(key, sum, stored value)`.
pub type Reduced = (Key, NDArray, NDArray);

/// A key-value store for data-parallel training.
///
/// Data operations (`init`, `push`, `pull`, `pushpull`, `broadcast`, `reduce_for_updater`)
/// check their input, push their work to the engine and return once it is queued, which
/// for a network store may be long before any data has moved. An `Err` means bad input
/// found before anything was queued (a bad call changes nothing) or work that could not
/// be queued; results appear in the arrays given or returned, whose engine variables
/// order every later access. Keys come with one priority each: work with a higher
/// priority is likely to run first.
pub trait Store: Send + Sync {
    /// MXNet's name of the store type (`local`, `device`, ...).
    fn type_name(&self) -> &str;

    /// This worker's rank, in `[0, num_workers)`.
    fn rank(&self) -> usize;

    /// How many workers share the store.
    fn num_workers(&self) -> usize;

    /// Returns once every worker has reached the barrier.
    fn barrier(&self) -> Result<()>;

    /// Stores a copy of each value under its key; every key must be new.
    fn init(&self, keys: &[Key], values: &[NDArray]) -> Result<()>;

    /// Sums the values given per key (one per device; a key given twice has both lists
    /// summed) and applies each sum: assigned, or given to the built-in updater.
    fn push(&self, keys: &[Key], values: &[Vec<NDArray>], priorities: &[i32]) -> Result<()>;

    /// Copies the value stored under each key into every array given for it.
    fn pull(&self, keys: &[Key], outs: &[Vec<NDArray>], priorities: &[i32]) -> Result<()>;

    /// A push followed by a pull of the same keys, checked as a whole first.
    fn pushpull(
        &self,
        keys: &[Key],
        values: &[Vec<NDArray>],
        outs: &[Vec<NDArray>],
        priorities: &[i32],
    ) -> Result<()>;

    /// Stores each value under its new key, then copies it into the arrays given for it;
    /// every output is checked before anything is stored.
    fn broadcast(
        &self,
        keys: &[Key],
        values: &[NDArray],
        outs: &[Vec<NDArray>],
        priorities: &[i32],
    ) -> Result<()> {
        check::count("init", keys.len(), values.len())?;
        check::lists("pull", keys.len(), outs.len(), priorities.len())?;
        for ((k, v), dsts) in keys.iter().zip(values).zip(outs) {
            for d in dsts {
                check::like("pull", k, "output", d, v)?;
            }
        }
        self.init(keys, values)?;
        self.pull(keys, outs, priorities)
    }

    /// Turns MXNet's 2-bit gradient compression on with `threshold`: only distributed
    /// stores compress.
    fn set_gradient_compression(&self, threshold: f32) -> Result<()> {
        let _ = threshold;
        Err(crate::error::Error::NotImplemented(format!(
            "KVStore '{}': 2-bit gradient compression runs on distributed stores (dist_*) only",
            self.type_name()
        )))
    }

    /// Groups and sums a push for an updater outside the store, in the order the store
    /// would update the keys; the caller applies each sum to its stored value.
    fn reduce_for_updater(
        &self,
        keys: &[Key],
        values: &[Vec<NDArray>],
        priorities: &[i32],
    ) -> Result<Vec<Reduced>>;

    /// The array stored under `key` (shared, not copied).
    fn stored(&self, key: &Key) -> Result<NDArray>;

    /// Installs a built-in updater, or the default assignment with `None`; states of an
    /// earlier updater are dropped.
    fn set_updater(&self, updater: Option<Arc<dyn StoreUpdater>>);

    /// The built-in updater's state of every key that has one, in `init` order.
    fn states(&self) -> Vec<(Key, Vec<NDArray>)>;

    /// Copies `state` into the built-in updater's state of `key`, creating it if needed.
    fn set_state(&self, key: &Key, state: &[NDArray]) -> Result<()>;
}
