//! `LocalStore`: the store on one machine. One entry per key, the updater, and the
//! push/pull protocol (validate everything first, so a bad call changes nothing); the
//! data movement is its [`Comm`]'s.

use super::check;
use super::comm::{self, Comm};
use super::store::{Reduced, Store};
use super::{Key, StoreUpdater};
use crate::error::{Error, Result};
use crate::ndarray::{copy_into, NDArray};
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::Arc;

/// What the store keeps for one key.
struct Entry {
    /// The order of `init`, which orders string keys the way MXNet's integer ids do.
    order: usize,
    /// The stored value.
    value: NDArray,
    /// The sum of the last push, when an updater needs it apart from the value.
    merged: Option<NDArray>,
    /// Whether the Comm has placed the value on the device that sums it.
    placed: bool,
    /// The built-in updater's state, created at the first update.
    state: Option<Vec<NDArray>>,
}

/// One key's part of a push: the key, every value pushed to it, and its priority.
struct Group {
    key: Key,
    values: Vec<NDArray>,
    priority: i32,
}

/// A key-value store on one machine.
pub struct LocalStore {
    type_name: String,
    comm: Box<dyn Comm>,
    entries: Mutex<HashMap<Key, Entry>>,
    updater: RwLock<Option<Arc<dyn StoreUpdater>>>,
}

impl LocalStore {
    /// A store of MXNet's local type `name`, with the Comm that type names.
    pub fn new(name: &str) -> Result<LocalStore> {
        let comm = comm::for_type(name).ok_or_else(|| {
            Error::Value(format!(
                "unknown KVStore type '{name}'; expected one of local, device, \
                 local_allreduce_cpu, local_allreduce_device, local_update_cpu"
            ))
        })?;
        Ok(LocalStore::with_comm(name, comm))
    }

    /// A store named `type_name` that moves data with `comm`.
    pub fn with_comm(type_name: &str, comm: Box<dyn Comm>) -> LocalStore {
        LocalStore {
            type_name: type_name.to_string(),
            comm,
            entries: Mutex::new(HashMap::new()),
            updater: RwLock::new(None),
        }
    }

    /// Groups a push's values by key in the order MXNet updates them, checking every
    /// key and shape before anything is done.
    fn group(
        &self,
        keys: &[Key],
        values: &[Vec<NDArray>],
        priorities: &[i32],
    ) -> Result<Vec<Group>> {
        let op = "push";
        check::lists(op, keys.len(), values.len(), priorities.len())?;
        let entries = self.entries.lock();
        let mut groups: Vec<(usize, Group)> = Vec::new();
        for ((k, vals), &priority) in keys.iter().zip(values).zip(priorities) {
            let entry = entries.get(k).ok_or_else(|| check::uninit(op, k))?;
            if vals.is_empty() {
                return Err(Error::Value(format!(
                    "KVStore.{op}: no value given for key {k}"
                )));
            }
            for v in vals {
                check::like(op, k, "value", v, &entry.value)?;
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

    /// Sums and applies grouped pushes: assigned, or given to the built-in updater.
    fn apply(&self, groups: &[Group]) -> Result<()> {
        let updater = self.updater.read().clone();
        for g in groups {
            match &updater {
                None => {
                    let stored = self.place(&g.key, &g.values)?;
                    self.comm.reduce(&g.values, &stored, g.priority)?;
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

    /// Sums the values pushed to `key` and returns the sum (the value itself when only
    /// one was pushed on the summing device), for an updater to apply.
    fn reduce(&self, key: &Key, values: &[NDArray], priority: i32) -> Result<NDArray> {
        let stored = self.place(key, values)?;
        if let [only] = values {
            if only.context() == stored.context() {
                return Ok(only.clone());
            }
        }
        let merged = {
            let mut entries = self.entries.lock();
            let entry = entries
                .get_mut(key)
                .ok_or_else(|| check::uninit("push", key))?;
            match &entry.merged {
                Some(m) => m.clone(),
                None => {
                    let m = NDArray::empty(stored.shape(), stored.dtype(), stored.context())?;
                    entry.merged = Some(m.clone());
                    m
                }
            }
        };
        self.comm.reduce(values, &merged, priority)?;
        Ok(merged)
    }

    /// The stored value of each key, after checking every output given for it.
    fn pull_sources(
        &self,
        keys: &[Key],
        outs: &[Vec<NDArray>],
        priorities: &[i32],
    ) -> Result<Vec<NDArray>> {
        let op = "pull";
        check::lists(op, keys.len(), outs.len(), priorities.len())?;
        let entries = self.entries.lock();
        let mut sources = Vec::with_capacity(keys.len());
        for (k, dsts) in keys.iter().zip(outs) {
            let entry = entries.get(k).ok_or_else(|| check::uninit(op, k))?;
            for d in dsts {
                check::like(op, k, "output", d, &entry.value)?;
            }
            sources.push(entry.value.clone());
        }
        Ok(sources)
    }

    /// The stored value of `key` and its updater state, created on first use.
    fn state_for(&self, key: &Key, u: &dyn StoreUpdater) -> Result<(NDArray, Vec<NDArray>)> {
        let mut entries = self.entries.lock();
        let entry = entries
            .get_mut(key)
            .ok_or_else(|| check::uninit("push", key))?;
        if entry.state.is_none() {
            entry.state = Some(u.create_state(key, &entry.value)?);
        }
        Ok((entry.value.clone(), entry.state.clone().unwrap_or_default()))
    }

    /// The stored value of `key`, placed first (at its first push) on the device the
    /// Comm sums it on.
    fn place(&self, key: &Key, values: &[NDArray]) -> Result<NDArray> {
        let mut entries = self.entries.lock();
        let entry = entries
            .get_mut(key)
            .ok_or_else(|| check::uninit("push", key))?;
        if !entry.placed {
            entry.value = self.comm.place(&entry.value, values)?;
            entry.placed = true;
        }
        Ok(entry.value.clone())
    }
}

impl Store for LocalStore {
    fn type_name(&self) -> &str {
        &self.type_name
    }

    fn rank(&self) -> usize {
        0
    }

    fn num_workers(&self) -> usize {
        1
    }

    fn barrier(&self) -> Result<()> {
        Ok(())
    }

    fn init(&self, keys: &[Key], values: &[NDArray]) -> Result<()> {
        check::count("init", keys.len(), values.len())?;
        let mut entries = self.entries.lock();
        for (i, k) in keys.iter().enumerate() {
            if entries.contains_key(k) || keys[..i].contains(k) {
                return Err(Error::Value(format!(
                    "KVStore.init: duplicate init of key {k}"
                )));
            }
        }
        for (k, v) in keys.iter().zip(values) {
            let value = NDArray::empty(v.shape(), v.dtype(), self.comm.home(v))?;
            copy_into(v, &value)?;
            let order = entries.len();
            entries.insert(
                k.clone(),
                Entry {
                    order,
                    value,
                    merged: None,
                    placed: false,
                    state: None,
                },
            );
        }
        Ok(())
    }

    fn push(&self, keys: &[Key], values: &[Vec<NDArray>], priorities: &[i32]) -> Result<()> {
        let groups = self.group(keys, values, priorities)?;
        self.apply(&groups)
    }

    fn pull(&self, keys: &[Key], outs: &[Vec<NDArray>], priorities: &[i32]) -> Result<()> {
        let sources = self.pull_sources(keys, outs, priorities)?;
        for ((src, dsts), &priority) in sources.iter().zip(outs).zip(priorities) {
            self.comm.broadcast(src, dsts, priority)?;
        }
        Ok(())
    }

    fn pushpull(
        &self,
        keys: &[Key],
        values: &[Vec<NDArray>],
        outs: &[Vec<NDArray>],
        priorities: &[i32],
    ) -> Result<()> {
        let groups = self.group(keys, values, priorities)?;
        self.pull_sources(keys, outs, priorities)?;
        self.apply(&groups)?;
        // The push may have moved a value to the device that sums it: pull from there.
        self.pull(keys, outs, priorities)
    }

    fn reduce_for_updater(
        &self,
        keys: &[Key],
        values: &[Vec<NDArray>],
        priorities: &[i32],
    ) -> Result<Vec<Reduced>> {
        let groups = self.group(keys, values, priorities)?;
        groups
            .into_iter()
            .map(|g| {
                let merged = self.reduce(&g.key, &g.values, g.priority)?;
                let stored = self.stored(&g.key)?;
                Ok((g.key, merged, stored))
            })
            .collect()
    }

    fn stored(&self, key: &Key) -> Result<NDArray> {
        let entries = self.entries.lock();
        Ok(entries
            .get(key)
            .ok_or_else(|| check::uninit("pull", key))?
            .value
            .clone())
    }

    fn set_updater(&self, updater: Option<Arc<dyn StoreUpdater>>) {
        *self.updater.write() = updater;
        for e in self.entries.lock().values_mut() {
            e.state = None;
        }
    }

    fn states(&self) -> Vec<(Key, Vec<NDArray>)> {
        let entries = self.entries.lock();
        let mut out: Vec<(usize, Key, Vec<NDArray>)> = entries
            .iter()
            .filter_map(|(k, e)| e.state.clone().map(|s| (e.order, k.clone(), s)))
            .collect();
        out.sort_by_key(|(o, _, _)| *o);
        out.into_iter().map(|(_, k, s)| (k, s)).collect()
    }

    fn set_state(&self, key: &Key, state: &[NDArray]) -> Result<()> {
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
}
