//! A server node: commands (sync mode, optimizer, compression, stop) go to the thread
//! that runs the server (in MXNet, the main thread), which may call into Python for
//! them; data requests are answered from the store by the van's receiver as they arrive,
//! unless messages wait for the server's thread, whose order they then keep.

use super::compress::decode_params;
use super::config::NodeConfig;
use super::frame::SharedBytes;
use super::layout::{rank_of, server_key_ranges, ServerCommand};
use super::meta::{Meta, Role};
use super::store::{ServerStore, Updater};
use super::van::{App, DataMessage, Van, VanSender};
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

/// What the server asks of its host for a kController command: the optimizer pickled
/// in the command's body, as an updater.
pub trait Controller {
    fn updater(&mut self, body: &[u8]) -> Result<Box<dyn Updater>>;
}

/// What the server's thread and its van's receiver share.
struct Serving {
    store: Mutex<ServerStore>,
    sender: VanSender,
    rank: i32,
    /// Messages handed to the server's thread and not yet handled by it.
    queued: AtomicUsize,
    to_thread: Mutex<mpsc::Sender<DataMessage>>,
}

impl Serving {
    /// Answers a data request from the store.
    fn serve(&self, msg: DataMessage) {
        let DataMessage { sender, meta, data } = msg;
        let frames = data.into_iter().map(SharedBytes::from).collect();
        let (handled, failed) = {
            let mut store = self.store.lock();
            let handled = store.handle(sender, meta.clone(), frames);
            (handled, store.take_failed())
        };
        match handled {
            Ok(replies) => {
                for r in replies {
                    self.sender.send(r.to, r.meta, r.data);
                }
            }
            Err(e) => {
                self.refuse(sender, &meta, &e);
                // A failed update fails every request of its round.
                for (other, request) in failed {
                    self.refuse(other, &request, &e);
                }
            }
        }
    }

    /// Answers a request that failed: an rsmx worker gets the reason and fails the call.
    /// MXNet's workers cannot be told, so the reason is logged; a command still gets its
    /// plain answer, which they wait for, and a data request none, as MXNet's own server
    /// would have stopped at a failed check.
    fn refuse(&self, sender: i32, request: &Meta, why: &Error) {
        let why = format!("server rank {}: {}", self.rank, why.message());
        if request.rsmx_wire.is_none() {
            eprintln!("KVStore dist: {why} (request from node {sender})");
            if request.simple_app {
                self.sender.send(sender, answer_to(request), Vec::new());
            }
            return;
        }
        let answer = Meta {
            push: request.push,
            pull: request.pull,
            rsmx_error: Some(why),
            ..answer_to(request)
        };
        self.sender.send(sender, answer, Vec::new());
    }
}

impl App for Serving {
    fn receive(&self, msg: DataMessage) {
        if !msg.meta.request {
            return;
        }
        // Only this thread adds to `queued`, so at 0 nothing handed over is still waiting.
        if !msg.meta.simple_app && self.queued.load(Ordering::Acquire) == 0 {
            return self.serve(msg);
        }
        self.queued.fetch_add(1, Ordering::AcqRel);
        // The server's thread only goes away after the van has stopped.
        let _ = self.to_thread.lock().send(msg);
    }
}

/// A server that has joined its cluster.
pub struct DistServer {
    van: Van,
    inbox: mpsc::Receiver<DataMessage>,
    serving: Arc<Serving>,
    /// The pickled optimizer the updater was made from.
    optimizer: Option<Vec<u8>>,
}

impl DistServer {
    /// Joins the cluster `config` describes, as a server.
    pub fn join(config: NodeConfig) -> Result<DistServer> {
        if config.role != Role::Server {
            return Err(Error::Value(format!(
                "KVStore dist: a server needs DMLC_ROLE=server, not {}",
                config.role.name()
            )));
        }
        let workers = config.num_workers.max(0) as usize;
        let servers = config.num_servers.max(1) as usize;
        let (tx, inbox) = mpsc::channel();
        let van = Van::start(config)?;
        let rank = rank_of(van.my_node().id);
        let begin = server_key_ranges(servers)
            .get(rank as usize)
            .map(|r| r.start)
            .ok_or_else(|| {
                Error::Runtime(format!("KVStore dist: no key range for server rank {rank}"))
            })?;
        let serving = Arc::new(Serving {
            store: Mutex::new(ServerStore::new(begin, workers)),
            sender: van.sender(),
            rank,
            queued: AtomicUsize::new(0),
            to_thread: Mutex::new(tx),
        });
        // Workers send no request before the first barrier.
        van.set_app(serving.clone());
        van.barrier(super::layout::ALL)?;
        Ok(DistServer {
            van,
            inbox,
            serving,
            optimizer: None,
        })
    }

    pub fn van(&self) -> &Van {
        &self.van
    }

    /// Serves until a worker sends kStopServer, then passes the final barrier. Requests
    /// run on the calling thread, so `controller` may call into Python.
    pub fn run(mut self, controller: &mut dyn Controller) -> Result<()> {
        loop {
            let msg = match self
                .inbox
                .recv_timeout(std::time::Duration::from_millis(200))
            {
                Ok(m) => m,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Some(f) = self.van.failure() {
                        return Err(Error::Runtime(f));
                    }
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(Error::Runtime(
                        "KVStore dist: the server's van stopped".into(),
                    ))
                }
            };
            let stop = if msg.meta.simple_app {
                self.command(&msg, controller)
            } else {
                self.serving.serve(msg);
                false
            };
            self.serving.queued.fetch_sub(1, Ordering::AcqRel);
            if stop {
                break;
            }
        }
        self.van.finalize()
    }

    /// Handles a command and answers it; true for kStopServer.
    fn command(&mut self, msg: &DataMessage, controller: &mut dyn Controller) -> bool {
        let meta = &msg.meta;
        let mut store = self.serving.store.lock();
        let done = match ServerCommand::from_head(meta.head) {
            Ok(ServerCommand::SyncMode) => {
                store.set_sync_mode();
                Ok(false)
            }
            Ok(ServerCommand::StopServer) => Ok(true),
            Ok(ServerCommand::SetGradientCompression) => {
                decode_params(&String::from_utf8_lossy(&meta.body)).map(|t| {
                    store.set_compression(t);
                    false
                })
            }
            // Every worker sends the same optimizer; a repeat must not reset its states.
            Ok(ServerCommand::Controller) if self.optimizer.as_deref() == Some(&meta.body[..]) => {
                Ok(false)
            }
            Ok(ServerCommand::Controller) => controller.updater(&meta.body).map(|u| {
                store.set_updater(u);
                self.optimizer = Some(meta.body.clone());
                false
            }),
            Ok(ServerCommand::SetMultiPrecision) => {
                store.set_multi_precision();
                Ok(false)
            }
            Ok(ServerCommand::SetProfilerParams) => {
                eprintln!(
                    "KVStore dist server: the server has no profiler; its settings are ignored"
                );
                Ok(false)
            }
            Err(e) => Err(e),
        };
        drop(store);
        // Every command is answered once handled: its head and timestamp, no body.
        match done {
            Ok(stop) => {
                self.van.send(msg.sender, answer_to(meta), Vec::new());
                stop
            }
            Err(e) => {
                let why = Error::Value(format!("command {}: {e}", meta.head));
                self.serving.refuse(msg.sender, meta, &why);
                false
            }
        }
    }
}

/// The answer's meta for `request`: its head, app, customer and timestamp.
fn answer_to(request: &Meta) -> Meta {
    Meta {
        head: request.head,
        request: false,
        simple_app: request.simple_app,
        app_id: request.app_id,
        customer_id: request.customer_id,
        timestamp: request.timestamp,
        ..Meta::default()
    }
}
