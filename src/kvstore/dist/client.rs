//! `DistStore`: the store of the `dist_*` types on a worker. A key's value pushed from
//! one host array is sent from that array's memory, and one from a device is copied into
//! the key's host buffer. Values from several devices are summed first: into the host
//! buffer (`dist_sync`, `dist_async`), or on one of those devices and then copied into it
//! (`dist_device_sync`: each key summed on the least loaded of the devices pushing it, as
//! the `device` store does). A pull is an engine op that writes the servers' answer into
//! the one host array pulled to, or else into the host buffer, then copies it to the
//! arrays given. The buffer's engine variable
//! orders one key's pushes and pulls, and each key's requests leave in the order they
//! were made ([`WireOrder`]); different keys travel independently. Once every server is
//! known to hold a pull behind the sender's own push, a push sent from the caller's
//! array no longer holds the buffer, so the key's pull leaves right behind it instead of
//! waiting for its answer: one round trip less per push and pull.

use super::compress::encode_params;
use super::config::NodeConfig;
use super::frame::Source;
use super::layout::{ServerCommand, WORKER_GROUP};
use super::order::WireOrder;
use super::process;
use super::worker::DistWorker;
use crate::context::Context;
use crate::dtype::DType;
use crate::engine::{self, FnProperty, OnComplete, PushSpec, Var};
use crate::error::{Error, Result};
use crate::kvstore::{check, Comm, CommCpu, CommDevice, Key, Reduced, Store, StoreUpdater};
use crate::ndarray::copy::copy_prioritized;
use crate::ndarray::{copy_into, NDArray};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// Under 2-bit compression, what a key's earlier pushes did not send.
type Residual = Arc<Mutex<Vec<f32>>>;

/// What a worker keeps of one key.
#[derive(Clone)]
struct Entry {
    /// The integer key the servers know it by (string keys are numbered 0, 1, ... in
    /// `init` order, as MXNet does, so every worker must init them in the same order).
    id: i32,
    /// The host buffer pushes are summed into, and pulls land in unless they go straight
    /// to the one host array pulled to.
    buf: NDArray,
    /// Under 2-bit compression, what earlier pushes of the key did not send.
    residual: Residual,
    /// `dist_device_sync`: where the key's pushes are summed, once it has had one.
    merged: Arc<Mutex<Option<NDArray>>>,
    /// The order the key's requests leave in.
    order: Arc<WireOrder>,
    /// What every push of the key writes, so that they are answered one by one.
    pushes: Var,
    /// The error of a failed push of the key, until the key's next pull fails with it
    /// (that pull's answer comes after the push's, on the same connections).
    failed: Arc<Mutex<Option<Error>>>,
}

/// A worker's view of a distributed store.
pub struct DistStore {
    type_name: String,
    worker: Arc<DistWorker>,
    comm: CommCpu,
    /// Set for the types that sum on the devices (`device` in the name, as MXNet reads it).
    on_devices: Option<CommDevice>,
    entries: Mutex<HashMap<Key, Entry>>,
}

impl DistStore {
    /// The store of MXNet's type `name` (`dist_sync`, `dist_async`, ...) over `worker`.
    pub fn new(name: &str, worker: Arc<DistWorker>) -> DistStore {
        DistStore {
            type_name: name.to_string(),
            worker,
            comm: CommCpu,
            on_devices: name.contains("device").then(CommDevice::default),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// Joins the cluster `config` describes as a worker and opens the store `name`: rank
    /// 0 puts the servers in sync mode unless the name asks for `_async`, as MXNet does.
    pub fn open(name: &str, config: NodeConfig) -> Result<DistStore> {
        DistStore::over(name, Arc::new(DistWorker::join(config)?))
    }

    /// Opens the store `name` over this process's worker (see [`process`]), joining the
    /// cluster the environment describes if no store has yet.
    pub fn for_process(name: &str) -> Result<DistStore> {
        DistStore::over(name, process::worker()?)
    }

    fn over(name: &str, worker: Arc<DistWorker>) -> Result<DistStore> {
        if worker.rank() == 0 && !name.contains("_async") {
            worker.command_and_wait(ServerCommand::SyncMode, b"")?;
        }
        Ok(DistStore::new(name, worker))
    }

    pub fn worker(&self) -> &Arc<DistWorker> {
        &self.worker
    }

    /// Under `dist_device_sync`, the array on a device that `entry`'s key is summed in,
    /// placed at its first push among the devices pushing.
    fn device_sum(&self, entry: &Entry, values: &[NDArray]) -> Result<Option<NDArray>> {
        let Some(devices) = &self.on_devices else {
            return Ok(None);
        };
        let mut merged = entry.merged.lock();
        if merged.is_none() {
            *merged = Some(devices.place(&entry.buf, values)?);
        }
        // Placed on the host, the sum goes straight into the host buffer.
        Ok(merged.clone().filter(|m| !m.same_chunk(&entry.buf)))
    }

    /// The entry of each key, checked against every array given for it.
    fn entries_for(
        &self,
        op: &str,
        keys: &[Key],
        arrays: &[Vec<NDArray>],
        what: &str,
    ) -> Result<Vec<Entry>> {
        let entries = self.entries.lock();
        keys.iter()
            .zip(arrays)
            .map(|(k, list)| {
                let e = entries.get(k).ok_or_else(|| check::uninit(op, k))?;
                if list.is_empty() {
                    return Err(Error::Value(format!(
                        "KVStore.{op}: no {what} given for key {k}"
                    )));
                }
                for a in list {
                    check::like(op, k, what, a, &e.buf)?;
                }
                Ok(e.clone())
            })
            .collect()
    }

    /// Queues the engine op that sends `value` to the servers as `entry`'s key, straight
    /// from its memory (libzmq reads it as it sends). Under 2-bit compression, a float32
    /// key is sent as its codes, the rest of each value kept in the key's residual for
    /// its next push.
    fn send(&self, entry: &Entry, value: &NDArray, priority: i32) {
        let worker = self.worker.clone();
        let (id, residual, failed) = (entry.id, entry.residual.clone(), entry.failed.clone());
        let data = value.clone();
        let compressed = data.dtype() == DType::F32 && worker.compression().is_some();
        // The op reads `value` until the servers answer, and writes the key's push
        // variable, so that its pushes are answered one by one. It also writes the buffer
        // (without touching it) so that the key's next pull waits for that answer,
        // unless the servers hold the pull behind the push themselves and the value is
        // not the buffer, which the pull writes.
        let pipelined =
            !value.same_chunk(&entry.buf) && worker.orders_pulls(id, value.size(), value.dtype());
        let mut written = vec![entry.pushes.clone()];
        if !pipelined {
            written.push(entry.buf.var().clone());
        }
        entry.order.issue(|turn| {
            let not_sent = failed.clone();
            let turn = turn.if_unused(move || {
                *not_sent.lock() = Some(Error::Runtime(format!(
                    "KVStore dist: key {id}: a push before this pull was not sent, as the \
                     value it pushes failed"
                )));
            });
            let body = Box::new(move |_ctx, done: OnComplete| {
                // A failed push fails the key's next pull too, whose answer comes after.
                let finish: Box<dyn FnOnce(Result<()>) + Send> = Box::new(move |r| {
                    if let Err(e) = &r {
                        *failed.lock() = Some(e.clone());
                    }
                    done.done(r)
                });
                if compressed {
                    // Quantised here, in the op's priority, and only sent in turn.
                    match quantize(&worker, &data, &residual) {
                        Ok(codes) => {
                            turn.send(move || worker.push_codes(id, data.size(), codes, finish))
                        }
                        Err(e) => {
                            drop(turn);
                            finish(Err(e));
                        }
                    }
                    return;
                }
                turn.send(move || {
                    let dtype = data.dtype();
                    // SAFETY: the op reads `data` until the servers answer, after they
                    // have received every byte, and the frames hold the array alive
                    // until libzmq is done with them.
                    let bytes =
                        unsafe { Source::borrowed(data.blob().bytes(), Arc::new(data.clone())) };
                    worker.push(
                        id,
                        dtype,
                        bytes,
                        false,
                        Box::new(move |r| finish(r.map(|_| ()))),
                    );
                });
            });
            // A dense push only hands the value's memory to libzmq: it starts on
            // whichever thread lets it through (the one that wrote the value, as soon as
            // it has), so each key leaves the moment it is ready. Compressing takes real
            // work, done as prioritised CPU work, in priority order, not behind ordinary
            // kernels.
            let prop = if compressed {
                FnProperty::CpuPrioritized
            } else {
                FnProperty::Async
            };
            let spec = PushSpec::new(
                "KVStoreDistPush",
                Context::cpu(0),
                std::slice::from_ref(value.var()),
                &written,
            )
            .prop(prop)
            .priority(priority);
            engine::get().push_async(body, spec);
        });
    }

    /// Queues the engine op that writes the servers' value of `entry`'s key into `into`
    /// (its buffer, or the one host array the value is pulled to). The op writes the
    /// buffer in either case, which orders it after the key's pushes that hold it.
    fn fetch(&self, entry: &Entry, into: &NDArray, priority: i32) {
        let worker = self.worker.clone();
        let (id, data, failed) = (entry.id, into.clone(), entry.failed.clone());
        let mut written = vec![entry.buf.var().clone()];
        if !into.same_chunk(&entry.buf) {
            written.push(into.var().clone());
        }
        entry.order.issue(|turn| {
            let body = Box::new(move |_ctx, done: OnComplete| {
                turn.send(move || {
                    let (dtype, n) = (data.dtype(), data.size());
                    worker.pull(
                        id,
                        dtype,
                        n,
                        Box::new(move |r| {
                            let r = match failed.lock().take() {
                                Some(push_failed) => Err(push_failed),
                                // The op holds write access to `data` until `done`.
                                None => r.map(|p| p.copy_to(data.blob().bytes_mut())),
                            };
                            done.done(r);
                        }),
                    );
                });
            });
            // Async: the request leaves from whichever thread lets it through (often the
            // one that sent the key's push), without waking a worker for it.
            let spec = PushSpec::new("KVStoreDistPull", Context::cpu(0), &[], &written)
                .prop(FnProperty::Async)
                .priority(priority);
            engine::get().push_async(body, spec);
        });
    }
}

/// The 2-bit codes of the float32 gradient `data`, added to `residual`, which keeps what
/// they do not carry.
fn quantize(worker: &DistWorker, data: &NDArray, residual: &Residual) -> Result<Vec<u8>> {
    let blob = data.blob();
    let copied: Vec<f32>;
    let grad: &[f32] = match bytemuck::try_cast_slice(blob.bytes()) {
        Ok(g) if cfg!(target_endian = "little") => g,
        _ => {
            copied = blob
                .bytes()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect();
            &copied
        }
    };
    let mut residual = residual.lock();
    residual.resize(grad.len(), 0.0);
    worker.quantize(grad, &mut residual)
}

impl Store for DistStore {
    fn type_name(&self) -> &str {
        &self.type_name
    }

    fn rank(&self) -> usize {
        self.worker.rank().max(0) as usize
    }

    fn num_workers(&self) -> usize {
        self.worker.van().config().num_workers.max(1) as usize
    }

    /// A barrier of every worker.
    fn barrier(&self) -> Result<()> {
        self.worker.barrier(WORKER_GROUP)
    }

    /// Records each key on every worker; rank 0 sends the initial values and waits for
    /// them to be stored, then all workers pass one barrier.
    fn init(&self, keys: &[Key], values: &[NDArray]) -> Result<()> {
        check::count("init", keys.len(), values.len())?;
        let mut bufs = Vec::with_capacity(keys.len());
        {
            let mut entries = self.entries.lock();
            let named = |k: &Key| matches!(k, Key::Name(_));
            let first = entries.keys().next().or(keys.first());
            for (i, k) in keys.iter().enumerate() {
                if entries.contains_key(k) || keys[..i].contains(k) {
                    return Err(Error::Value(format!(
                        "KVStore.init: duplicate init of key {k}"
                    )));
                }
                // String keys are numbered from 0 like int keys, so mixing them would
                // make two keys one on the servers (MXNet refuses it too).
                if first.is_some_and(|f| named(f) != named(k)) {
                    return Err(Error::Type(format!(
                        "KVStore.init: key {k}: a distributed store takes int keys or str \
                         keys, not both"
                    )));
                }
            }
            for (k, v) in keys.iter().zip(values) {
                let id = match k {
                    Key::Int(i) => i32::try_from(*i).map_err(|_| {
                        Error::Value(format!(
                            "KVStore.init: key {i} does not fit the servers' 32-bit keys"
                        ))
                    })?,
                    Key::Name(_) => entries.len() as i32,
                };
                let buf = NDArray::empty(v.shape(), v.dtype(), Context::cpu(0))?;
                copy_into(v, &buf)?;
                entries.insert(
                    k.clone(),
                    Entry {
                        id,
                        buf: buf.clone(),
                        residual: Arc::default(),
                        merged: Arc::default(),
                        order: Arc::default(),
                        pushes: Var::new(),
                        failed: Arc::default(),
                    },
                );
                bufs.push((id, buf));
            }
        }
        if self.rank() == 0 {
            let (tx, rx) = std::sync::mpsc::channel();
            for (id, buf) in &bufs {
                buf.wait_to_read()?;
                let tx = tx.clone();
                let bytes = buf.blob().bytes().to_vec();
                self.worker.push(
                    *id,
                    buf.dtype(),
                    bytes,
                    false,
                    Box::new(move |r| {
                        let _ = tx.send(r);
                    }),
                );
            }
            drop(tx);
            for r in rx {
                r?;
            }
        }
        self.barrier()
    }

    /// Sums each key's values (a key given twice has both lists summed, as one push to
    /// the servers) and sends the sums.
    fn push(&self, keys: &[Key], values: &[Vec<NDArray>], priorities: &[i32]) -> Result<()> {
        check::lists("push", keys.len(), values.len(), priorities.len())?;
        let targets = self.entries_for("push", keys, values, "value")?;
        if let Some(threshold) = self.worker.compression() {
            if let Some((k, e)) = keys
                .iter()
                .zip(&targets)
                .find(|(_, e)| e.buf.dtype() != DType::F32)
            {
                return Err(Error::Type(format!(
                    "KVStore.push: key {k} holds {}; 2-bit gradient compression (threshold \
                     {threshold}) takes float32 values only",
                    e.buf.dtype()
                )));
            }
        }
        // One push per key: its entry, every value given for it, the highest priority.
        let mut groups: Vec<(Entry, Vec<NDArray>, i32)> = Vec::new();
        for ((entry, vals), &priority) in targets.into_iter().zip(values).zip(priorities) {
            match groups.iter_mut().find(|g| g.0.id == entry.id) {
                Some(g) => {
                    g.1.extend(vals.iter().cloned());
                    g.2 = g.2.max(priority);
                }
                None => groups.push((entry, vals.clone(), priority)),
            }
        }
        for (entry, vals, priority) in groups {
            // One value on the host is sent as it is, as MXNet does; one on a device is
            // copied to the host, several are summed first.
            let value = match &vals[..] {
                [only] if only.context().is_cpu() => only.clone(),
                [only] => {
                    copy_prioritized(only, &entry.buf, priority)?;
                    entry.buf.clone()
                }
                _ => {
                    match self.device_sum(&entry, &vals)? {
                        Some(sum) => {
                            self.comm.reduce(&vals, &sum, priority)?;
                            copy_prioritized(&sum, &entry.buf, priority)?;
                        }
                        None => self.comm.reduce(&vals, &entry.buf, priority)?,
                    }
                    entry.buf.clone()
                }
            };
            self.send(&entry, &value, priority);
        }
        Ok(())
    }

    fn pull(&self, keys: &[Key], outs: &[Vec<NDArray>], priorities: &[i32]) -> Result<()> {
        check::lists("pull", keys.len(), outs.len(), priorities.len())?;
        let sources = self.entries_for("pull", keys, outs, "output")?;
        for ((entry, dsts), &priority) in sources.iter().zip(outs).zip(priorities) {
            match &dsts[..] {
                // One host array of the key's type takes the value straight from the
                // answer: no copy through the buffer, no op after the pull.
                [only] if only.context().is_cpu() && only.dtype() == entry.buf.dtype() => {
                    self.fetch(entry, only, priority)
                }
                _ => {
                    self.fetch(entry, &entry.buf, priority);
                    self.comm.broadcast(&entry.buf, dsts, priority)?;
                }
            }
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
        check::lists("pushpull", keys.len(), values.len(), priorities.len())?;
        self.entries_for("pushpull", keys, values, "value")?;
        self.entries_for("pushpull", keys, outs, "output")?;
        self.push(keys, values, priorities)?;
        self.pull(keys, outs, priorities)
    }

    /// Turns 2-bit compression on for this worker's float32 pushes; rank 0 tells the
    /// servers, as MXNet's worker does. Keys are laid out differently under compression,
    /// so it must come before the first `init`.
    fn set_gradient_compression(&self, threshold: f32) -> Result<()> {
        if threshold.is_nan() || threshold <= 0.0 {
            return Err(Error::Value(format!(
                "KVStore.set_gradient_compression: threshold must be greater than 0, got \
                 {threshold}"
            )));
        }
        if !self.entries.lock().is_empty() {
            return Err(Error::Value(
                "KVStore.set_gradient_compression: set it before the first init (keys are laid \
                 out over the servers differently under compression)"
                    .into(),
            ));
        }
        self.worker.set_compression(threshold);
        if self.rank() == 0 {
            let body = encode_params(threshold);
            self.worker
                .command_and_wait(ServerCommand::SetGradientCompression, body.as_bytes())?;
        }
        Ok(())
    }

    fn reduce_for_updater(
        &self,
        _keys: &[Key],
        _values: &[Vec<NDArray>],
        _priorities: &[i32],
    ) -> Result<Vec<Reduced>> {
        Err(Error::Value(format!(
            "KVStore '{}': updates run on the servers (set_optimizer), not on a worker",
            self.type_name
        )))
    }

    /// This worker's buffer of `key`: the last value it summed for a push, or pulled
    /// through the buffer.
    fn stored(&self, key: &Key) -> Result<NDArray> {
        let entries = self.entries.lock();
        Ok(entries
            .get(key)
            .ok_or_else(|| check::uninit("pull", key))?
            .buf
            .clone())
    }

    /// As in MXNet, a worker of a distributed store keeps no updater: the servers update.
    fn set_updater(&self, _updater: Option<Arc<dyn StoreUpdater>>) {}

    fn states(&self) -> Vec<(Key, Vec<NDArray>)> {
        Vec::new()
    }

    fn set_state(&self, key: &Key, _state: &[NDArray]) -> Result<()> {
        Err(Error::Value(format!(
            "KVStore '{}': the optimizer state of key {key} lives on the servers",
            self.type_name
        )))
    }
}

#[cfg(test)]
mod tests;
