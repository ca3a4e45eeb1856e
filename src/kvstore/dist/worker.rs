//! A worker node: push, pull and commands to the servers, each a request numbered by the
//! worker (ps-lite's customer) and completed, through a callback, when every server it
//! went to has answered, or failed when a peer is lost.

use super::compress::{compressed_bytes, quantize_2bit};
use super::config::NodeConfig;
use super::frame::{Frame, Source};
use super::kv::{data_types, KvPairs};
use super::layout::{
    compressed_parts, data_head, dense_parts, server_id, Part, RequestKind, ServerCommand, ALL,
    WORKER_GROUP,
};
use super::meta::{Meta, Role, ORDERED_PULLS};
use super::van::{App, DataMessage, Van};
use crate::dtype::DType;
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;

/// One server's answer: its keys and lengths, and its values in the frame they came in.
pub type Answer = KvPairs<zmq::Message>;

/// What a request's answers are given to, in the order of the servers it went to.
pub type Done = Box<dyn FnOnce(Result<Vec<Answer>>) + Send>;

/// What a push or pull's caller is given: the value the servers answered (empty for a
/// push that did not pull).
pub type PullDone = Box<dyn FnOnce(Result<Pulled>) + Send>;

/// A request waiting for its answers.
struct Pending {
    /// Server ids, in the order answers are handed over.
    servers: Vec<i32>,
    answers: HashMap<i32, Answer>,
    done: Done,
}

/// A key's value as its servers answered it, in the frames it arrived in.
pub struct Pulled {
    answers: Vec<Answer>,
}

impl std::fmt::Debug for Pulled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pulled({} bytes)", self.len())
    }
}

impl Pulled {
    /// The answers of key `key`, checked to carry `expected` bytes together.
    fn new(answers: Vec<Answer>, expected: usize, key: i32) -> Result<Pulled> {
        let pulled = Pulled { answers };
        if pulled.len() != expected {
            return Err(Error::Value(format!(
                "KVStore dist: key {key}: the servers answered {} bytes where {expected} were \
                 expected (was the key initialised with this size and type?)",
                pulled.len()
            )));
        }
        Ok(pulled)
    }

    pub fn len(&self) -> usize {
        self.answers.iter().map(|a| a.vals.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies the value into `out`, which is its size.
    pub fn copy_to(&self, out: &mut [u8]) {
        assert_eq!(out.len(), self.len(), "a pulled value's size was checked");
        let mut at = 0;
        for a in &self.answers {
            out[at..at + a.vals.len()].copy_from_slice(&a.vals);
            at += a.vals.len();
        }
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0; self.len()];
        self.copy_to(&mut out);
        out
    }
}

/// The worker's requests in flight, by timestamp.
#[derive(Default)]
struct Tracker {
    pending: Mutex<HashMap<i32, Pending>>,
    /// Why the worker cannot go on, once it cannot.
    failure: Mutex<Option<String>>,
}

impl Tracker {
    fn complete(&self, pending: Pending) {
        let Pending {
            servers,
            mut answers,
            done,
        } = pending;
        let answers = servers
            .iter()
            .map(|s| {
                answers.remove(s).unwrap_or_else(|| KvPairs {
                    keys: Vec::new(),
                    vals: zmq::Message::new(),
                    lens: Vec::new(),
                })
            })
            .collect();
        done(Ok(answers));
    }
}

impl App for Tracker {
    fn receive(&self, msg: DataMessage) {
        if msg.meta.request {
            return;
        }
        if let Some(why) = &msg.meta.rsmx_error {
            let refused = self.pending.lock().remove(&msg.meta.timestamp);
            if let Some(p) = refused {
                (p.done)(Err(Error::Value(format!("KVStore dist: {why}"))));
            }
            return;
        }
        let answer = KvPairs::take_frames(msg.data, zmq::Message::new);
        let finished = {
            let mut pending = self.pending.lock();
            let Some(p) = pending.get_mut(&msg.meta.timestamp) else {
                return;
            };
            match answer {
                Ok(kv) => {
                    p.answers.insert(msg.sender, kv);
                }
                Err(e) => {
                    let p = pending.remove(&msg.meta.timestamp).expect("found above");
                    drop(pending);
                    (p.done)(Err(e));
                    return;
                }
            }
            if p.answers.len() < p.servers.len() {
                return;
            }
            pending.remove(&msg.meta.timestamp).expect("found above")
        };
        self.complete(finished);
    }

    fn failed(&self, why: &str) {
        // Under the lock of the pending requests, so that a request is either failed
        // here or refused when it is made.
        let mut pending = self.pending.lock();
        *self.failure.lock() = Some(why.to_string());
        let all: Vec<Pending> = pending.drain().map(|(_, p)| p).collect();
        drop(pending);
        for p in all {
            (p.done)(Err(Error::Runtime(why.to_string())));
        }
    }
}

/// A worker that has joined its cluster.
pub struct DistWorker {
    van: Van,
    tracker: Arc<Tracker>,
    /// The customer's request counter.
    next: AtomicI32,
    num_servers: usize,
    bigarray_bound: usize,
    /// The 2-bit threshold once gradient compression is on: float32 keys are then laid
    /// out, pushed and pulled as MXNet's compressed keys.
    compression: Mutex<Option<f32>>,
    /// Per server rank: set once it is known to hold a pull behind this worker's push.
    ordered_pulls: Vec<AtomicBool>,
}

impl DistWorker {
    /// Joins the cluster `config` describes, as a worker.
    pub fn join(config: NodeConfig) -> Result<DistWorker> {
        if config.role != Role::Worker {
            return Err(Error::Value(format!(
                "KVStore dist: a worker needs DMLC_ROLE=worker, not {}",
                config.role.name()
            )));
        }
        let num_servers = config.num_servers.max(1) as usize;
        let bigarray_bound = config.bigarray_bound;
        let van = Van::start(config)?;
        let tracker = Arc::new(Tracker::default());
        van.set_app(tracker.clone());
        van.barrier(ALL)?;
        Ok(DistWorker {
            van,
            tracker,
            next: AtomicI32::new(0),
            num_servers,
            bigarray_bound,
            compression: Mutex::new(None),
            ordered_pulls: (0..num_servers).map(|_| AtomicBool::new(false)).collect(),
        })
    }

    /// True once each server holding key `key` (`elements` of `dtype`) has answered
    /// with a wire version that holds a pull behind its sender's push of the same key:
    /// the key's pull may then leave right behind the push, without waiting for its
    /// answer (one connection keeps the two in order).
    pub fn orders_pulls(&self, key: i32, elements: usize, dtype: DType) -> bool {
        // Once every server is known, no key's layout needs working out again.
        if self.ordered_pulls.iter().all(|k| k.load(Ordering::Relaxed)) {
            return true;
        }
        self.parts(key, elements, dtype).iter().all(|p| {
            let known = &self.ordered_pulls[p.server];
            if known.load(Ordering::Relaxed) {
                return true;
            }
            let ordered = self
                .van
                .peer_wire(server_id(p.server as i32))
                .is_some_and(|v| v >= ORDERED_PULLS);
            known.store(ordered, Ordering::Relaxed);
            ordered
        })
    }

    /// Turns 2-bit gradient compression on with `threshold` (the servers are told apart).
    pub fn set_compression(&self, threshold: f32) {
        *self.compression.lock() = Some(threshold);
    }

    /// The 2-bit threshold, if compression is on.
    pub fn compression(&self) -> Option<f32> {
        *self.compression.lock()
    }

    /// The head of a request for `dtype`: compressed for float32 once compression is on.
    fn head(&self, dtype: DType) -> i32 {
        let kind = if dtype == DType::F32 && self.compression().is_some() {
            RequestKind::Compressed
        } else {
            RequestKind::Dense
        };
        data_head(kind, dtype)
    }

    pub fn van(&self) -> &Van {
        &self.van
    }

    pub fn rank(&self) -> i32 {
        self.van.rank()
    }

    /// Where the `elements` of key `key` go: one server, or every server for a big array
    /// (split as compressed keys are for float32 once compression is on).
    pub fn parts(&self, key: i32, elements: usize, dtype: DType) -> Vec<Part> {
        if dtype == DType::F32 && self.compression().is_some() {
            return compressed_parts(key, elements, self.num_servers, self.bigarray_bound)
                .into_iter()
                .map(|p| Part {
                    server: p.server,
                    ps_key: p.ps_key,
                    bytes: p.elements * 4,
                })
                .collect();
        }
        dense_parts(
            key,
            elements,
            dtype.size(),
            self.num_servers,
            self.bigarray_bound,
        )
    }

    /// Pushes the float32 gradient `grad` of key `key` 2-bit compressed: `grad` is added to
    /// `residual`, and what the codes do not carry stays in it. Compression must be on.
    pub fn push_compressed(
        &self,
        key: i32,
        grad: &[f32],
        residual: &mut [f32],
        done: Box<dyn FnOnce(Result<()>) + Send>,
    ) {
        match self.quantize(grad, residual) {
            Ok(codes) => self.push_codes(key, grad.len(), codes, done),
            Err(e) => done(Err(e)),
        }
    }

    /// The 2-bit codes of `grad` added to `residual`, which keeps what they do not carry.
    pub fn quantize(&self, grad: &[f32], residual: &mut [f32]) -> Result<Vec<u8>> {
        let threshold = self.compression().ok_or_else(|| {
            Error::Value("KVStore dist: a compressed push needs gradient compression set".into())
        })?;
        let mut codes = vec![0u8; compressed_bytes(grad.len())];
        quantize_2bit(grad, residual, threshold, &mut codes);
        Ok(codes)
    }

    /// Pushes the 2-bit `codes` of the `elements` of float32 key `key`.
    pub fn push_codes(
        &self,
        key: i32,
        elements: usize,
        codes: Vec<u8>,
        done: Box<dyn FnOnce(Result<()>) + Send>,
    ) {
        let codes = Source::from(codes);
        let parts = compressed_parts(key, elements, self.num_servers, self.bigarray_bound);
        let mut offset = 0;
        let to = parts
            .iter()
            .map(|p| {
                let vals = codes.frame(offset..offset + p.compressed_bytes);
                offset += p.compressed_bytes;
                let kv = KvPairs {
                    keys: vec![p.size_key, p.ps_key],
                    lens: vec![0, p.compressed_bytes as i32],
                    vals,
                };
                let meta = Meta {
                    head: data_head(RequestKind::Compressed, DType::F32),
                    ..data_meta(DType::F32, true, false)
                };
                (server_id(p.server as i32), meta, kv.into_frames())
            })
            .collect();
        self.request(to, Box::new(move |r| done(r.map(|_| ()))));
    }

    /// Sends one request per server in `to` and calls `done` once all have answered.
    fn request(&self, to: Vec<(i32, Meta, Vec<Frame>)>, done: Done) {
        let ts = self.next.fetch_add(1, Ordering::Relaxed);
        let servers: Vec<i32> = to.iter().map(|(s, _, _)| *s).collect();
        {
            let mut pending = self.tracker.pending.lock();
            // Taken out first: `done` may start the key's next request, which looks again.
            let failure = self.tracker.failure.lock().clone();
            if let Some(why) = failure {
                drop(pending);
                return done(Err(Error::Runtime(why)));
            }
            pending.insert(
                ts,
                Pending {
                    servers,
                    answers: HashMap::new(),
                    done,
                },
            );
        }
        for (server, mut meta, data) in to {
            meta.timestamp = ts;
            meta.data_type = data_types(data.len());
            self.van.send(server, meta, data);
        }
    }

    /// Pushes `value` (elements of `dtype`) as key `key`; with `pull`, the answers carry
    /// the updated value, which `done` gets. The bytes are sent without a copy: a big
    /// array's parts, one per server, are frames over them.
    pub fn push(
        &self,
        key: i32,
        dtype: DType,
        value: impl Into<Source>,
        pull: bool,
        done: PullDone,
    ) {
        let value = value.into();
        let expected = if pull { value.len() } else { 0 };
        let parts = self.parts(key, value.len() / dtype.size(), dtype);
        let mut offset = 0;
        let to = parts
            .iter()
            .map(|p| {
                offset += p.bytes;
                let vals = value.frame(offset - p.bytes..offset);
                let kv = KvPairs {
                    keys: vec![p.ps_key],
                    lens: vec![p.bytes as i32],
                    vals,
                };
                (
                    server_id(p.server as i32),
                    data_meta(dtype, true, pull),
                    kv.into_frames(),
                )
            })
            .collect();
        self.request(
            to,
            Box::new(move |r| done(r.and_then(|a| Pulled::new(a, expected, key)))),
        );
    }

    /// Pulls key `key`, `elements` of `dtype`; `done` gets the value.
    pub fn pull(&self, key: i32, dtype: DType, elements: usize, done: PullDone) {
        let parts = self.parts(key, elements, dtype);
        let to = parts
            .iter()
            .map(|p| {
                let kv: KvPairs = KvPairs {
                    keys: vec![p.ps_key],
                    ..KvPairs::default()
                };
                let meta = Meta {
                    head: self.head(dtype),
                    ..data_meta(dtype, false, true)
                };
                (server_id(p.server as i32), meta, kv.into_frames())
            })
            .collect();
        let expected = elements * dtype.size();
        self.request(
            to,
            Box::new(move |r| done(r.and_then(|a| Pulled::new(a, expected, key)))),
        );
    }

    /// Sends a command (a SimpleApp head and body) to every server; `done` when all have
    /// answered.
    pub fn command(&self, head: i32, body: &[u8], done: Box<dyn FnOnce(Result<()>) + Send>) {
        let to = (0..self.num_servers as i32)
            .map(|rank| {
                let meta = Meta {
                    head,
                    body: body.to_vec(),
                    request: true,
                    simple_app: true,
                    app_id: 0,
                    customer_id: 0,
                    ..Meta::default()
                };
                (server_id(rank), meta, Vec::new())
            })
            .collect();
        self.request(to, Box::new(move |r| done(r.map(|_| ()))));
    }

    /// Passes a barrier of `group`.
    pub fn barrier(&self, group: i32) -> Result<()> {
        self.van.barrier(group)
    }

    /// The final barrier of every node, then the van stops.
    pub fn finalize(&self) -> Result<()> {
        self.van.finalize()
    }

    /// Sends a command to every server and waits for all answers.
    pub fn command_and_wait(&self, command: ServerCommand, body: &[u8]) -> Result<()> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.command(
            command as i32,
            body,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        rx.recv().unwrap_or_else(|_| {
            Err(Error::Runtime(format!(
                "KVStore dist: command {command:?} was dropped unanswered"
            )))
        })
    }

    /// How MXNet's worker leaves: a barrier of the workers, rank 0 stops the servers,
    /// then the final barrier of every node.
    pub fn shutdown(&self) -> Result<()> {
        self.barrier(WORKER_GROUP)?;
        if self.rank() == 0 {
            self.command_and_wait(ServerCommand::StopServer, b"")?;
        }
        self.finalize()
    }
}

/// The meta of a dense data request.
fn data_meta(dtype: DType, push: bool, pull: bool) -> Meta {
    Meta {
        head: data_head(RequestKind::Dense, dtype),
        request: true,
        push,
        pull,
        app_id: 0,
        customer_id: 0,
        ..Meta::default()
    }
}

#[cfg(test)]
pub(crate) mod tests;
