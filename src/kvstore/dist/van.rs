//! A ps-lite node on its sockets: registration with the scheduler (which, on the
//! scheduler, numbers the nodes), barriers, answers to ps-lite heartbeats, `PS_VERBOSE`
//! logs, and the loss of a peer's connection turned into an error for whoever waits.
//!
//! One thread per node, the receiver, owns the ROUTER and the monitors of every
//! connection; messages are sent by the thread that has them, each DEALER under its lock.

use super::config::NodeConfig;
use super::frame::Frame;
use super::layout::{group_members, group_of, rank_of, ALL, SCHEDULER};
use super::meta::{Command, Control, Meta, Node, Role, EMPTY};
use super::registry::unregistered;
use super::transport::{Monitor, Router};
use crate::error::{Error, Result};
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Instant;

mod receive;
mod send;

use receive::receive_loop;
use send::Links;

/// How long the receiver waits in one poll before it looks at its channels again.
const POLL_MS: i64 = 100;
/// How long closing a connection may take to hand over what is still queued on it.
const CLOSE_LINGER_MS: i32 = 1000;

/// A message with no control command, for the node's app (worker or server).
pub struct DataMessage {
    /// The sender's id, or [`EMPTY`].
    pub sender: i32,
    pub meta: Meta,
    pub data: Vec<zmq::Message>,
}

/// What a node's data messages go to.
pub trait App: Send + Sync {
    fn receive(&self, msg: DataMessage);

    /// The node cannot go on (`why`): whatever waits on an answer should stop waiting.
    fn failed(&self, _why: &str) {}
}

/// What the van's connections tell the receiver about monitors.
enum MonitorNote {
    /// A connection to `peer` started, watched by the monitor.
    Watch(i32, String, Monitor),
    /// The connection to `peer` is being replaced or closed on purpose.
    Retire(i32),
}

#[derive(Default)]
struct State {
    ready: bool,
    /// The node list from the scheduler's registration, scheduler last.
    nodes: Vec<Node>,
    barrier_done: bool,
    /// Why the node cannot go on: a lost peer or a broken socket.
    failure: Option<String>,
    /// In the final barrier: its reply means the cluster is ending.
    finalizing: bool,
    /// Past the final barrier: peers going away is expected.
    finished: bool,
}

struct Shared {
    config: NodeConfig,
    me: Mutex<Node>,
    state: Mutex<State>,
    changed: Condvar,
    /// The van's message counter (ADD_NODE, BARRIER, HEARTBEAT), as ps-lite numbers them.
    timestamp: AtomicI32,
    links: Links,
    stop: AtomicBool,
    app: Mutex<Option<Arc<dyn App>>>,
    /// The peers whose messages carry rsmx's wire version, and that version.
    rsmx_peers: Mutex<HashMap<i32, u32>>,
}

/// What sends on a van's connections from a node's app, without keeping the van alive
/// (the van holds the app).
#[derive(Clone)]
pub struct VanSender(std::sync::Weak<Shared>);

impl VanSender {
    /// As [`Van::send`]; nothing once the van is gone.
    pub fn send(&self, recver: i32, meta: Meta, data: Vec<Frame>) {
        if let Some(shared) = self.0.upgrade() {
            shared.send(recver, meta, data);
        }
    }
}

/// A node of a ps-lite cluster: scheduler, server or worker.
pub struct Van {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// One barrier at a time.
    barrier_lock: Mutex<()>,
}

impl Van {
    /// Binds, registers with the scheduler and waits until every node has (the scheduler
    /// waits for all registrations). Errors name the scheduler's address or the port.
    pub fn start(mut config: NodeConfig) -> Result<Van> {
        let ctx = zmq::Context::new();
        let is_scheduler = config.role == Role::Scheduler;
        let scheduler_router = if is_scheduler {
            Some(bind_scheduler(&ctx, &mut config)?)
        } else {
            None
        };
        let scheduler = Node {
            id: SCHEDULER,
            ..unregistered(
                Role::Scheduler,
                &config.scheduler_host,
                i32::from(config.scheduler_port),
                0,
            )
        };
        let (router, mut me) = if let Some(router) = scheduler_router {
            (router, scheduler.clone())
        } else {
            let host = if config.node_host.is_empty() {
                address_towards(&config.scheduler_host, config.scheduler_port)?
            } else {
                config.node_host.clone()
            };
            let router = Router::bind(&ctx, &host, config.port)?;
            let port = i32::from(router.port());
            (router, unregistered(config.role, &host, port, 0))
        };
        if config.ipc {
            // Best effort: without it, peers on this host connect over TCP.
            let ipc = ipc_endpoint(&me.hostname, router.port());
            me.rsmx_ipc = router.also_bind(&ipc).is_ok().then_some(ipc);
        }
        let (notes, noted) = mpsc::channel();
        let shared = Arc::new(Shared {
            config,
            me: Mutex::new(me.clone()),
            state: Mutex::default(),
            changed: Condvar::new(),
            timestamp: AtomicI32::new(0),
            links: Links::new(ctx, notes),
            stop: AtomicBool::new(false),
            app: Mutex::new(None),
            rsmx_peers: Mutex::default(),
        });
        shared.log(1, &format!("Bind to {}", me.debug_string()));
        let receiver = {
            let shared = shared.clone();
            spawn("rsmx-van-recv", move || {
                receive_loop(&shared, router, noted)
            })?
        };
        let van = Van {
            shared,
            threads: Mutex::new(vec![receiver]),
            barrier_lock: Mutex::new(()),
        };
        van.shared.connect(&scheduler);
        if !is_scheduler {
            let add = Meta {
                control: Control {
                    cmd: Command::AddNode,
                    nodes: vec![me],
                    ..Control::default()
                },
                timestamp: van.shared.next_timestamp(),
                ..Meta::default()
            };
            van.shared.send(SCHEDULER, add, Vec::new());
        }
        van.wait_ready()?;
        Ok(van)
    }

    /// Starts the node and passes the first barrier of every node, as ps-lite's
    /// `Postoffice::Start` does.
    pub fn join(config: NodeConfig) -> Result<Van> {
        let van = Van::start(config)?;
        van.barrier(ALL)?;
        Ok(van)
    }

    fn wait_ready(&self) -> Result<()> {
        let c = &self.shared.config;
        let deadline = Instant::now() + c.connect_timeout;
        let mut state = self.shared.state.lock();
        while !state.ready {
            if let Some(f) = &state.failure {
                return Err(Error::Runtime(f.clone()));
            }
            if self
                .shared
                .changed
                .wait_until(&mut state, deadline)
                .timed_out()
            {
                let waited = c.connect_timeout.as_secs();
                let what = if c.role == Role::Scheduler {
                    let nodes = format!("{} servers and {} workers", c.num_servers, c.num_workers);
                    format!(
                        "the scheduler at {} did not hear from all {nodes}",
                        c.scheduler_address()
                    )
                } else {
                    format!(
                        "this {} was not registered by the scheduler at {} (is it running, and \
                         are DMLC_PS_ROOT_URI and DMLC_PS_ROOT_PORT right?)",
                        c.role.name(),
                        c.scheduler_address()
                    )
                };
                drop(state);
                self.shutdown();
                return Err(Error::Runtime(format!(
                    "KVStore dist: {what} within {waited} s (RSMX_DIST_CONNECT_TIMEOUT)"
                )));
            }
        }
        Ok(())
    }

    /// This node, with its id once registered.
    pub fn my_node(&self) -> Node {
        self.shared.me.lock().clone()
    }

    /// This node's rank among the nodes of its role.
    pub fn rank(&self) -> i32 {
        rank_of(self.shared.me.lock().id)
    }

    /// Every node of the cluster, as the scheduler numbered them, scheduler last.
    pub fn nodes(&self) -> Vec<Node> {
        self.shared.state.lock().nodes.clone()
    }

    pub fn config(&self) -> &NodeConfig {
        &self.shared.config
    }

    /// Gives data messages to `app` from now on.
    pub fn set_app(&self, app: Arc<dyn App>) {
        *self.shared.app.lock() = Some(app);
    }

    /// Sends `[meta, data...]` to node `recver`; failures surface as the node's error.
    pub fn send(&self, recver: i32, meta: Meta, data: Vec<Frame>) {
        self.shared.send(recver, meta, data);
    }

    /// A sender for the node's app.
    pub fn sender(&self) -> VanSender {
        VanSender(Arc::downgrade(&self.shared))
    }

    /// The wire version of rsmx node `id`, once a message from it has arrived; `None`
    /// for MXNet's nodes and for nodes not heard from yet.
    pub fn peer_wire(&self, id: i32) -> Option<u32> {
        self.shared.rsmx_peers.lock().get(&id).copied()
    }

    /// Why this node cannot go on, if it cannot.
    pub fn failure(&self) -> Option<String> {
        self.shared.state.lock().failure.clone()
    }

    /// Waits until every node of `group` (a sum of `SCHEDULER`, `SERVER_GROUP`,
    /// `WORKER_GROUP`) has asked for the same barrier; an error if a node is lost first.
    pub fn barrier(&self, group: i32) -> Result<()> {
        let c = &self.shared.config;
        if !(1..=ALL).contains(&group) {
            return Err(Error::Value(format!(
                "KVStore dist: barrier group {group}: groups are 1 to {ALL}"
            )));
        }
        if group_members(group, c.num_servers, c.num_workers).len() <= 1 {
            return Ok(());
        }
        let mine = group_of(c.role);
        if group & mine == 0 {
            return Err(Error::Value(format!(
                "KVStore dist: a {} cannot take part in a barrier of group {group}",
                c.role.name()
            )));
        }
        let _one = self.barrier_lock.lock();
        {
            let mut state = self.shared.state.lock();
            if let Some(f) = &state.failure {
                return Err(Error::Runtime(f.clone()));
            }
            state.barrier_done = false;
        }
        let request = self.shared.barrier_meta(true, 0, 0, group);
        self.shared.send(SCHEDULER, request, Vec::new());
        let mut state = self.shared.state.lock();
        loop {
            if state.barrier_done {
                return Ok(());
            }
            if let Some(f) = &state.failure {
                return Err(Error::Runtime(format!(
                    "{f}; barrier of group {group} abandoned"
                )));
            }
            self.shared.changed.wait(&mut state);
        }
    }

    /// Passes the last barrier of every node and stops, as ps-lite's `Finalize`.
    pub fn finalize(&self) -> Result<()> {
        self.shared.state.lock().finalizing = true;
        let r = self.barrier(ALL);
        self.shutdown();
        r
    }

    /// Stops the threads and closes the sockets, without a barrier.
    fn shutdown(&self) {
        self.shared
            .log(1, &format!("{} is stopping", short(&self.my_node())));
        self.shared.state.lock().finished = true;
        self.shared.stop.store(true, Ordering::Release);
        self.shared.close_links();
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        self.shared
            .log(1, &format!("{} is stopped", short(&self.my_node())));
    }
}

/// The Unix socket (in Linux's abstract namespace) a node listening on `host:port` also
/// listens on, for rsmx peers on its host.
fn ipc_endpoint(host: &str, port: u16) -> String {
    format!("ipc://@rsmx-ps-{host}-{port}")
}

/// The scheduler's ROUTER, on its port or, for port 0, on one the system picks, which
/// becomes the configured port and is written to the port file if there is one.
fn bind_scheduler(ctx: &zmq::Context, config: &mut NodeConfig) -> Result<Router> {
    let port = (config.scheduler_port != 0).then_some(config.scheduler_port);
    let router = Router::bind(ctx, &config.scheduler_host, port).map_err(|e| {
        Error::Runtime(format!(
            "KVStore dist: the scheduler cannot listen on {}: {e}",
            config.scheduler_address()
        ))
    })?;
    config.scheduler_port = router.port();
    if let Some(path) = &config.port_file {
        // Written whole under another name first, so a reader never sees part of it.
        let partial = path.with_extension("partial");
        std::fs::write(&partial, format!("{}\n", router.port()))
            .and_then(|()| std::fs::rename(&partial, path))
            .map_err(|e| {
                Error::Runtime(format!(
                    "KVStore dist: the scheduler cannot write its port to {} \
                     (RSMX_DIST_PORT_FILE): {e}",
                    path.display()
                ))
            })?;
    }
    Ok(router)
}

impl Drop for Van {
    fn drop(&mut self) {
        if !self.threads.lock().is_empty() {
            self.shutdown();
        }
    }
}

impl Shared {
    fn next_timestamp(&self) -> i32 {
        self.timestamp.fetch_add(1, Ordering::Relaxed)
    }

    /// A BARRIER request (`request`) or release for `group`, with the van's next timestamp.
    fn barrier_meta(&self, request: bool, app_id: i32, customer_id: i32, group: i32) -> Meta {
        Meta {
            request,
            app_id,
            customer_id,
            control: Control {
                cmd: Command::Barrier,
                barrier_group: group,
                ..Control::default()
            },
            timestamp: self.next_timestamp(),
            ..Meta::default()
        }
    }

    /// Records why the node cannot go on (the first reason wins) and wakes every waiter.
    fn fail(&self, why: String) {
        let first = {
            let mut state = self.state.lock();
            let first = state.failure.is_none();
            if first {
                eprintln!("{}", stamp(&why));
                state.failure = Some(why.clone());
            }
            self.changed.notify_all();
            first
        };
        if first {
            let app = self.app.lock().clone();
            if let Some(app) = app {
                app.failed(&why);
            }
        }
    }

    fn log(&self, level: i32, text: &str) {
        if self.config.verbose >= level {
            eprintln!("{}", stamp(text));
        }
    }
}

/// `text` with the time of day in front, as ps-lite's log lines have it.
fn stamp(text: &str) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    format!("[{h:02}:{m:02}:{s:02}] {text}")
}

/// ps-lite's short name of a node: `W[9]`, `S[8]`, `H[1]`.
fn short(node: &Node) -> String {
    let letter = match node.role {
        Role::Server => "S",
        Role::Worker => "W",
        Role::Scheduler => "H",
    };
    if node.id == EMPTY {
        letter.to_string()
    } else {
        format!("{letter}[{}]", node.id)
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(f)
        .map_err(|e| Error::Runtime(format!("KVStore dist: cannot start a thread: {e}")))
}

/// The address this machine uses to reach `host:port`: what other nodes can reach it at
/// when `DMLC_NODE_HOST` is not set.
fn address_towards(host: &str, port: u16) -> Result<String> {
    let socket = std::net::UdpSocket::bind(("0.0.0.0", 0))
        .and_then(|s| s.connect((host, port)).map(|()| s))
        .map_err(|e| {
            Error::Runtime(format!(
                "KVStore dist: cannot find this machine's address towards the scheduler at \
                 {host}:{port} ({e}); set DMLC_NODE_HOST"
            ))
        })?;
    let ip = socket
        .local_addr()
        .map_err(|e| Error::Runtime(format!("KVStore dist: no local address: {e}")))?
        .ip();
    Ok(ip.to_string())
}

#[cfg(test)]
pub(crate) mod tests;
