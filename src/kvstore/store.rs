//! The store itself: one entry per key, the updater, and the push/pull protocol
//! (validate everything first, so a bad call changes nothing).

use super::comm;
use super::Key;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::ndarray::{copy_into, NDArray};
use crate::shape::fmt_shape;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::Arc;

/// Where a store sums pushed values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// On the host (`local`, `local_allreduce_cpu`, `local_update_cpu`).
    Local,
    /// On the devices the values come from, keys spread over them (`device`,
    /// `local_allreduce_device`).
    Device,
}

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

/// What the store keeps for one key.
struct Entry {
    /// The order of `init`, which orders string keys the way MXNet's integer ids do.
    order: usize,
    /// The stored value.
    value: NDArray,
    /// The sum of the last push, when an updater needs it apart from the value.
    merged: Option<NDArray>,
    /// Whether a `Device` store has moved the value to the device that sums it.
    placed: bool,
    /// The built-in updater's state, created at the first update.
    state: Option<Vec<NDArray>>,
}

/// One key's part of a push: the key, every value pushed to it, and its priority.
pub struct Group {
    pub key: Key,
    pub values: Vec<NDArray>,
    pub priority: i32,
}

/// A key-value store on one machine.
pub struct KVStore {
    type_name: String,
    kind: StoreKind,
    entries: Mutex<HashMap<Key, Entry>>,
    updater: RwLock<Option<Arc<dyn StoreUpdater>>>,
    /// Bytes each device sums, for spreading keys in a `Device` store.
    device_load: Mutex<HashMap<Context, usize>>,
}

impl KVStore {
    /// A store of MXNet's type `name`.
    pub fn new(name: &str) -> Result<KVStore> {
        let kind = match name {
            "local" | "local_allreduce_cpu" | "local_update_cpu" => StoreKind::Local,
            "device" | "local_allreduce_device" => StoreKind::Device,
            n if n.starts_with("dist") => {
                return Err(Error::NotImplemented(format!(
                    "KVStore type '{n}': distributed stores are not available in this build"
                )))
            }
            other => {
                return Err(Error::Value(format!(
                    "unknown KVStore type '{other}'; expected one of local, device, \
                     local_allreduce_cpu, local_allreduce_device, local_update_cpu"
                )))
            }
        };
        Ok(KVStore {
            type_name: name.to_string(),
            kind,
            entries: Mutex::new(HashMap::new()),
            updater: RwLock::new(None),
            device_load: Mutex::new(HashMap::new()),
        })
    }

    /// MXNet's name of the store type.
    pub fn type_name(&self) -> &str {
        &self.type_name
    }

    /// Where the store sums.
    pub fn kind(&self) -> StoreKind {
        self.kind
    }

    /// Stores a copy of each value under its key; every key must be new.
    pub fn init(&self, keys: &[Key], values: &[NDArray]) -> Result<()> {
        check_count("init", keys.len(), values.len())?;
        let mut entries = self.entries.lock();
        for (i, k) in keys.iter().enumerate() {
            if entries.contains_key(k) || keys[..i].contains(k) {
                return Err(Error::Value(format!(
                    "KVStore.init: duplicate init of key {k}"
                )));
            }
        }
        for (k, v) in keys.iter().zip(values) {
            let ctx = match self.kind {
                StoreKind::Local => Context::cpu(0),
                StoreKind::Device => v.context(),
            };
            let value = NDArray::empty(v.shape(), v.dtype(), ctx)?;
            copy_into(v, &value)?;
            let order = entries.len();
            entries.insert(
                k.clone(),
                Entry {
                    order,
                    value,
                    merged: None,
                    placed: self.kind == StoreKind::Local,
                    state: None,
                },
            );
        }
        Ok(())
    }

    /// Groups a push's values by key in the order MXNet updates them, checking every
    /// key and shape before anything is done.
    pub fn group(
        &self,
        op: &str,
        keys: &[Key],
        values: &[Vec<NDArray>],
        priorities: &[i32],
    ) -> Result<Vec<Group>> {
        check_count(op, keys.len(), values.len())?;
        check_priorities(op, keys.len(), priorities.len())?;
        let entries = self.entries.lock();
        let mut groups: Vec<(usize, Group)> = Vec::new();
        for ((k, vals), &priority) in keys.iter().zip(values).zip(priorities) {
            let entry = entries.get(k).ok_or_else(|| uninit(op, k))?;
            if vals.is_empty() {
                return Err(Error::Value(format!(
                    "KVStore.{op}: no value given for key {k}"
                )));
            }
            for v in vals {
                check_like(op, k, "value", v, &entry.value)?;
            }
            match groups.iter_mut().find(|(_, g)| &g.key == k) {
                Some((_, g)) => {
                    g.values.extend(vals.iter().cloned());
                    g.priority = g.priority.max(priority);
                }
                None => groups.push((
                    entry.order,
                    Group {
                        key: k.clone(),
                        values: vals.clone(),
                        priority,
                    },
                )),
            }
        }
        groups.sort_by(|(oa, a), (ob, b)| match (&a.key, &b.key) {
            (Key::Int(x), Key::Int(y)) => x.cmp(y),
            _ => oa.cmp(ob),
        });
        Ok(groups.into_iter().map(|(_, g)| g).collect())
    }

    /// Sums and applies every pushed value: assigned, or given to the built-in updater.
    /// Each key's work runs with its priority (one per key).
    pub fn push(&self, keys: &[Key], values: &[Vec<NDArray>], priorities: &[i32]) -> Result<()> {
        let groups = self.group("push", keys, values, priorities)?;
        let updater = self.updater.read().clone();
        for g in &groups {
            match &updater {
                None => {
                    let stored = self.place(&g.key, &g.values)?;
                    comm::reduce_into(&g.values, &stored, g.priority)?;
                }
                Some(u) => {
                    let merged = self.reduce(&g.key, &g.values, g.priority)?;
                    let (stored, state) = self.state_for(&g.key, u.as_ref())?;
                    u.update(&g.key, &stored, &merged, &state, g.priority)?;
                }
            }
        }
        Ok(())
    }

    /// Groups and sums a push for an updater outside the store: `(key, sum, stored value)`
    /// per key, in update order; the caller applies each sum to its stored value.
    pub fn reduce_for_updater(
        &self,
        keys: &[Key],
        values: &[Vec<NDArray>],
        priorities: &[i32],
    ) -> Result<Vec<(Key, NDArray, NDArray)>> {
        let groups = self.group("push", keys, values, priorities)?;
        groups
            .into_iter()
            .map(|g| {
                let merged = self.reduce(&g.key, &g.values, g.priority)?;
                let stored = self.stored(&g.key)?;
                Ok((g.key, merged, stored))
            })
            .collect()
    }

    /// Sums the values pushed to `key` and returns the sum (the value itself when only
    /// one was pushed on the summing device), for an updater to apply.
    pub fn reduce(&self, key: &Key, values: &[NDArray], priority: i32) -> Result<NDArray> {
        let stored = self.place(key, values)?;
        if let [only] = values {
            if only.context() == stored.context() {
                return Ok(only.clone());
            }
        }
        let merged = {
            let mut entries = self.entries.lock();
            let entry = entries.get_mut(key).ok_or_else(|| uninit("push", key))?;
            match &entry.merged {
                Some(m) => m.clone(),
                None => {
                    let m = NDArray::empty(stored.shape(), stored.dtype(), stored.context())?;
                    entry.merged = Some(m.clone());
                    m
                }
            }
        };
        comm::reduce_into(values, &merged, priority)?;
        Ok(merged)
    }

    /// Copies the value stored under each key into every array given for it, each key
    /// with its priority.
    pub fn pull(&self, keys: &[Key], outs: &[Vec<NDArray>], priorities: &[i32]) -> Result<()> {
        check_count("pull", keys.len(), outs.len())?;
        check_priorities("pull", keys.len(), priorities.len())?;
        let sources = {
            let entries = self.entries.lock();
            let mut sources = Vec::with_capacity(keys.len());
            for (k, dsts) in keys.iter().zip(outs) {
                let entry = entries.get(k).ok_or_else(|| uninit("pull", k))?;
                for d in dsts {
                    check_like("pull", k, "output", d, &entry.value)?;
                }
                sources.push(entry.value.clone());
            }
            sources
        };
        for ((src, dsts), &priority) in sources.iter().zip(outs).zip(priorities) {
            comm::broadcast(src, dsts, priority)?;
        }
        Ok(())
    }

    /// The array stored under `key` (shared, not copied), for a Python updater.
    pub fn stored(&self, key: &Key) -> Result<NDArray> {
        let entries = self.entries.lock();
        Ok(entries
            .get(key)
            .ok_or_else(|| uninit("pull", key))?
            .value
            .clone())
    }

    /// Installs a built-in updater (or the default assignment with `None`); states of
    /// an earlier updater are dropped.
    pub fn set_updater(&self, updater: Option<Arc<dyn StoreUpdater>>) {
        *self.updater.write() = updater;
        for e in self.entries.lock().values_mut() {
            e.state = None;
        }
    }

    /// The built-in updater's state of every key that has one.
    pub fn states(&self) -> Vec<(Key, Vec<NDArray>)> {
        let entries = self.entries.lock();
        let mut out: Vec<(usize, Key, Vec<NDArray>)> = entries
            .iter()
            .filter_map(|(k, e)| e.state.clone().map(|s| (e.order, k.clone(), s)))
            .collect();
        out.sort_by_key(|(o, _, _)| *o);
        out.into_iter().map(|(_, k, s)| (k, s)).collect()
    }

    /// Copies `state` into the built-in updater's state of `key`, creating it if needed.
    pub fn set_state(&self, key: &Key, state: &[NDArray]) -> Result<()> {
        let updater = self.updater.read().clone().ok_or_else(|| {
            Error::Value("KVStore: no optimizer is set, so there is no state to load".into())
        })?;
        let (_, have) = self.state_for(key, updater.as_ref())?;
        if have.len() != state.len() {
            return Err(Error::Value(format!(
                "KVStore: the state of key {key} has {} array(s), got {}",
                have.len(),
                state.len()
            )));
        }
        for (src, dst) in state.iter().zip(&have) {
            copy_into(src, dst)?;
        }
        Ok(())
    }

    /// The stored value of `key` and its updater state, created on first use.
    fn state_for(&self, key: &Key, u: &dyn StoreUpdater) -> Result<(NDArray, Vec<NDArray>)> {
        let mut entries = self.entries.lock();
        let entry = entries.get_mut(key).ok_or_else(|| uninit("push", key))?;
        if entry.state.is_none() {
            entry.state = Some(u.create_state(key, &entry.value)?);
        }
        Ok((entry.value.clone(), entry.state.clone().unwrap_or_default()))
    }

    /// The stored value of `key`, moved first (in a `Device` store) to the device that
    /// sums it: the least loaded of the devices pushing to it.
    fn place(&self, key: &Key, values: &[NDArray]) -> Result<NDArray> {
        let mut entries = self.entries.lock();
        let entry = entries.get_mut(key).ok_or_else(|| uninit("push", key))?;
        if !entry.placed {
            let bytes = entry.value.size() * entry.value.dtype().size();
            let mut load = self.device_load.lock();
            let mut ctxs: Vec<Context> = values.iter().map(|v| v.context()).collect();
            ctxs.sort_by_key(|c| (c.dev_type as i32, c.dev_id));
            ctxs.dedup();
            let ctx = ctxs
                .into_iter()
                .min_by_key(|c| load.get(c).copied().unwrap_or(0))
                .unwrap_or(entry.value.context());
            *load.entry(ctx).or_insert(0) += bytes;
            if ctx != entry.value.context() {
                let moved = NDArray::empty(entry.value.shape(), entry.value.dtype(), ctx)?;
                copy_into(&entry.value, &moved)?;
                entry.value = moved;
            }
            entry.placed = true;
        }
        Ok(entry.value.clone())
    }
}

fn check_count(op: &str, keys: usize, values: usize) -> Result<()> {
    if keys != values {
        return Err(Error::Value(format!(
            "KVStore.{op}: {keys} key(s) but {values} value(s)"
        )));
    }
    Ok(())
}

fn check_priorities(op: &str, keys: usize, priorities: usize) -> Result<()> {
    if keys != priorities {
        return Err(Error::Value(format!(
            "KVStore.{op}: {keys} key(s) but {priorities} priorities"
        )));
    }
    Ok(())
}

fn uninit(op: &str, key: &Key) -> Error {
    Error::Value(format!(
        "KVStore.{op}: key {key} has not been initialized; call init first"
    ))
}

/// Checks that `a` (a pushed value or a pull target) matches the stored value.
fn check_like(op: &str, key: &Key, what: &str, a: &NDArray, stored: &NDArray) -> Result<()> {
    if a.shape() != stored.shape() {
        return Err(Error::Value(format!(
            "KVStore.{op}: key {key}: {what} shape {} does not match the stored shape {}",
            fmt_shape(a.shape()),
            fmt_shape(stored.shape())
        )));
    }
    if a.dtype() != stored.dtype() {
        return Err(Error::Type(format!(
            "KVStore.{op}: key {key}: {what} dtype {} does not match the stored dtype {}",
            a.dtype(),
            stored.dtype()
        )));
    }
    Ok(())
}
