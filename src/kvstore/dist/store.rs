//! A server's keys and rounds, apart from any socket: MXNet's `KVStoreDistServer` for
//! dense and 2-bit compressed requests. The first push of a key stores it; in sync mode
//! pushes are summed in arrival order until there is one per worker, then the updater
//! (or, without one, the sum itself) becomes the stored value and every waiting request
//! is answered; in async mode each push updates at once. A pull is answered at once,
//! unless its sender's push of the key waits in a sync round: then it is answered with
//! the round's value, so that a worker may send a key's pull right behind its push.

use super::compress::dequantize_2bit;
use super::flat::Flat;
use super::frame::{Frame, SharedBytes};
use super::kv::{data_types, KvPairs};
use super::layout::{parse_data_head, RequestKind};
use super::meta::Meta;
use crate::dtype::DType;
use crate::error::{Error, Result};
use std::collections::hash_map::Entry;
use std::collections::HashMap;

/// How a server applies a gradient to a stored weight (`set_optimizer`).
pub trait Updater: Send {
    /// Updates `stored` with `merged` for `key` (the worker's key, not the ps key).
    fn update(&mut self, key: u64, merged: &Flat, stored: &mut Flat) -> Result<()>;
}

/// A message for node `to`.
#[derive(Debug)]
pub struct Reply {
    pub to: i32,
    pub meta: Meta,
    pub data: Vec<Frame>,
}

/// A request waiting for its round.
struct Waiting {
    sender: i32,
    meta: Meta,
}

/// A sync round of one key: the sum so far, the pushes in it, and the pulls of workers
/// whose push is in it.
struct Round {
    merged: Flat,
    waiting: Vec<Waiting>,
    pulls: Vec<Waiting>,
}

/// A server's stored values and open rounds.
pub struct ServerStore {
    /// The start of this server's key range: a ps key minus it is the worker's key.
    key_begin: u64,
    num_workers: usize,
    sync_mode: bool,
    values: HashMap<u64, Flat>,
    rounds: HashMap<u64, Round>,
    updater: Option<Box<dyn Updater>>,
    /// kSetMultiPrecision: keys of other types than float32 are summed and updated in
    /// float32 copies, cast back after each update.
    multi_precision: bool,
    wide: HashMap<u64, Flat>,
    /// The 2-bit threshold, once a worker set gradient compression.
    threshold: Option<f32>,
    warned_async_assign: bool,
    /// The other requests of a round whose update failed, to be refused as well.
    failed: Vec<(i32, Meta)>,
}

impl ServerStore {
    /// A store for the server whose key range starts at `key_begin`, in a job of
    /// `num_workers` workers; async until told otherwise, as MXNet's servers start.
    pub fn new(key_begin: u64, num_workers: usize) -> ServerStore {
        ServerStore {
            key_begin,
            num_workers: num_workers.max(1),
            sync_mode: false,
            values: HashMap::new(),
            rounds: HashMap::new(),
            updater: None,
            multi_precision: false,
            wide: HashMap::new(),
            threshold: None,
            warned_async_assign: false,
            failed: Vec::new(),
        }
    }

    /// kSyncMode.
    pub fn set_sync_mode(&mut self) {
        self.sync_mode = true;
    }

    pub fn sync_mode(&self) -> bool {
        self.sync_mode
    }

    /// kController: the updater from now on.
    pub fn set_updater(&mut self, updater: Box<dyn Updater>) {
        self.updater = Some(updater);
    }

    /// kSetMultiPrecision.
    pub fn set_multi_precision(&mut self) {
        self.multi_precision = true;
    }

    /// kSetGradientCompression with a 2-bit `threshold`.
    pub fn set_compression(&mut self, threshold: f32) {
        self.threshold = Some(threshold);
    }

    /// The stored value of ps key `key`.
    pub fn value(&self, key: u64) -> Option<&Flat> {
        self.values.get(&key)
    }

    /// Handles one data request from node `sender`, its data `frames` as they arrived (a
    /// pushed value is kept, not copied); returns the replies it completes (none while a
    /// sync round waits for more pushes).
    pub fn handle(
        &mut self,
        sender: i32,
        meta: Meta,
        frames: Vec<SharedBytes>,
    ) -> Result<Vec<Reply>> {
        let (kind, dtype) = parse_data_head(meta.head)?;
        let kv = KvPairs::take_frames(frames, SharedBytes::default)?;
        match kind {
            RequestKind::Dense => {
                let [key] = kv.keys[..] else {
                    return Err(Error::Value(format!(
                        "KVStore dist server: a dense request has one key, not {}",
                        kv.keys.len()
                    )));
                };
                if meta.push {
                    self.push(sender, meta, key, Flat::new(dtype, kv.vals)?)
                } else {
                    self.pull(sender, meta, key)
                }
            }
            RequestKind::Compressed => self.compressed(sender, meta, dtype, kv),
            RequestKind::RowSparse => Err(Error::Value(
                "KVStore dist server: row_sparse requests are not supported".into(),
            )),
        }
    }

    /// A 2-bit push (a dummy key whose offset is the element count, then the data key)
    /// or a pull of its key.
    fn compressed(
        &mut self,
        sender: i32,
        meta: Meta,
        dtype: DType,
        kv: KvPairs<SharedBytes>,
    ) -> Result<Vec<Reply>> {
        if dtype != DType::F32 {
            return Err(Error::Value(format!(
                "KVStore dist server: 2-bit compressed requests are float32, not {dtype}"
            )));
        }
        if !meta.push {
            let [key] = kv.keys[..] else {
                return Err(Error::Value(
                    "KVStore dist server: a compressed pull has one key".into(),
                ));
            };
            return self.pull(sender, meta, key);
        }
        let threshold = self.threshold.ok_or_else(|| {
            Error::Value(
                "KVStore dist server: a compressed push before gradient compression was set".into(),
            )
        })?;
        let ([dummy, key], [0, _]) = (&kv.keys[..], &kv.lens[..]) else {
            return Err(Error::Value(
                "KVStore dist server: a compressed push has a size key and a data key".into(),
            ));
        };
        let n = dummy
            .checked_sub(self.key_begin)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| {
                Error::Value(format!(
                    "KVStore dist server: size key {dummy} is outside this server's range"
                ))
            })?;
        if kv.vals.len() != super::compress::compressed_bytes(n) {
            return Err(Error::Value(format!(
                "KVStore dist server: {} compressed bytes for {n} elements",
                kv.vals.len()
            )));
        }
        let mut grad = vec![0f32; n];
        dequantize_2bit(&kv.vals, threshold, &mut grad);
        let bytes: Vec<u8> = grad.iter().flat_map(|g| g.to_le_bytes()).collect();
        self.push(sender, meta, *key, Flat::new(DType::F32, bytes)?)
    }

    /// The requests of a round whose update failed, apart from the one that completed it
    /// (which gets the error itself): each is to be refused with the same error.
    pub fn take_failed(&mut self) -> Vec<(i32, Meta)> {
        std::mem::take(&mut self.failed)
    }

    fn pull(&mut self, sender: i32, meta: Meta, key: u64) -> Result<Vec<Reply>> {
        let Some(stored) = self.values.get(&key) else {
            return Err(Error::Value(format!(
                "KVStore dist server: key {} was pulled before any push initialised it",
                self.worker_key(key)
            )));
        };
        if let Some(round) = self.rounds.get_mut(&key) {
            if round.waiting.iter().any(|w| w.sender == sender) {
                round.pulls.push(Waiting { sender, meta });
                return Ok(Vec::new());
            }
        }
        Ok(vec![answer(sender, &meta, Some((key, stored)))])
    }

    fn push(&mut self, sender: i32, meta: Meta, key: u64, value: Flat) -> Result<Vec<Reply>> {
        let worker_key = self.worker_key(key);
        let Some(stored) = self.values.get(&key) else {
            // The first push of a key is its initial value.
            let reply = answer(sender, &meta, meta.pull.then_some((key, &value)));
            self.values.insert(key, value);
            return Ok(vec![reply]);
        };
        if stored.dtype != value.dtype || stored.bytes.len() != value.bytes.len() {
            return Err(Error::Value(format!(
                "KVStore dist server: key {worker_key} holds {} elements of {}; a push sent {} of {}",
                stored.len(),
                stored.dtype,
                value.len(),
                value.dtype
            )));
        }
        let value = if self.multi_precision && stored.dtype != DType::F32 {
            if let Entry::Vacant(slot) = self.wide.entry(key) {
                slot.insert(stored.cast(DType::F32)?);
            }
            value.cast(DType::F32)?
        } else {
            value
        };
        if !self.sync_mode {
            if self.updater.is_none() && !self.warned_async_assign {
                self.warned_async_assign = true;
                eprintln!(
                    "KVStore dist server: dist_async with no optimizer set: a push replaces \
                     the stored value"
                );
            }
            self.apply(key, value)?;
            let stored = &self.values[&key];
            return Ok(vec![answer(
                sender,
                &meta,
                meta.pull.then_some((key, stored)),
            )]);
        }
        let round = match self.rounds.entry(key) {
            Entry::Occupied(o) => {
                let r = o.into_mut();
                r.merged.add_assign(&value.bytes)?;
                r
            }
            Entry::Vacant(v) => v.insert(Round {
                merged: value,
                waiting: Vec::new(),
                pulls: Vec::new(),
            }),
        };
        round.waiting.push(Waiting { sender, meta });
        if round.waiting.len() < self.num_workers {
            return Ok(Vec::new());
        }
        let Round {
            merged,
            mut waiting,
            pulls,
        } = self.rounds.remove(&key).expect("the round just filled");
        if let Err(e) = self.apply(key, merged) {
            waiting.pop(); // this request's own, answered with the error by the caller
            self.failed = waiting
                .into_iter()
                .chain(pulls)
                .map(|w| (w.sender, w.meta))
                .collect();
            return Err(e);
        }
        let stored = &self.values[&key];
        let pushes = waiting
            .iter()
            .map(|w| answer(w.sender, &w.meta, w.meta.pull.then_some((key, stored))));
        let pulls = pulls
            .iter()
            .map(|w| answer(w.sender, &w.meta, Some((key, stored))));
        Ok(pushes.chain(pulls).collect())
    }

    /// Updates key `key` with `merged` (the updater, or the value itself without one),
    /// through its float32 copy when it has one.
    fn apply(&mut self, key: u64, merged: Flat) -> Result<()> {
        let worker_key = self.worker_key(key);
        let target = match self.wide.get_mut(&key) {
            Some(w) => w,
            None => self.values.get_mut(&key).expect("a stored key"),
        };
        match &mut self.updater {
            Some(u) => u.update(worker_key, &merged, target)?,
            None => *target = merged,
        }
        if let Some(w) = self.wide.get(&key) {
            let stored = self.values.get_mut(&key).expect("a stored key");
            *stored = w.cast(stored.dtype)?;
        }
        Ok(())
    }

    fn worker_key(&self, key: u64) -> u64 {
        key.wrapping_sub(self.key_begin)
    }
}

/// ps-lite's `KVServer::Response`: the request's flags, head and timestamp back to its
/// sender, with the key and its value when the request pulled.
fn answer(to: i32, request: &Meta, value: Option<(u64, &Flat)>) -> Reply {
    let meta = Meta {
        head: request.head,
        request: false,
        push: request.push,
        pull: request.pull,
        app_id: request.app_id,
        customer_id: request.customer_id,
        timestamp: request.timestamp,
        ..Meta::default()
    };
    let data = value
        .map(|(key, v)| {
            KvPairs {
                keys: vec![key],
                vals: v.bytes.clone(),
                lens: vec![v.bytes.len() as i32],
            }
            .into_frames()
        })
        .unwrap_or_default();
    let meta = Meta {
        data_type: data_types(data.len()),
        ..meta
    };
    Reply { to, meta, data }
}

#[cfg(test)]
mod tests;
