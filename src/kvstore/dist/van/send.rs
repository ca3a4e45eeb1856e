//! The van's connections: one DEALER per peer (never two nodes of the same role, as in
//! ps-lite), each behind its own lock, so that whichever thread has a message sends it
//! at once, without handing it to another thread.

use super::{MonitorNote, Shared, CLOSE_LINGER_MS};
use crate::error::{Error, Result};
use crate::kvstore::dist::frame::Frame;
use crate::kvstore::dist::layout::rank_of;
use crate::kvstore::dist::meta::{Meta, Node, Role, EMPTY, WIRE_VERSION};
use crate::kvstore::dist::transport::{endpoint, Dealer, DealerOptions};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

/// The DEALERs to every peer, and the channel that tells the receiver of their monitors.
pub(super) struct Links {
    ctx: zmq::Context,
    dealers: Mutex<HashMap<i32, Arc<Mutex<Dealer>>>>,
    notes: Mutex<mpsc::Sender<MonitorNote>>,
    generation: AtomicU64,
}

impl Links {
    pub(super) fn new(ctx: zmq::Context, notes: mpsc::Sender<MonitorNote>) -> Links {
        Links {
            ctx,
            dealers: Mutex::default(),
            notes: Mutex::new(notes),
            generation: AtomicU64::new(0),
        }
    }

    fn note(&self, note: MonitorNote) {
        // The receiver only goes away when the van stops.
        let _ = self.notes.lock().send(note);
    }
}

impl Shared {
    /// Connects to `node` (replacing an earlier connection to its id), unless it is
    /// another node of this node's role.
    pub(super) fn connect(&self, node: &Node) {
        let me = self.me.lock().clone();
        if node.role == me.role && node.id != me.id {
            return;
        }
        let links = &self.links;
        if links.dealers.lock().remove(&node.id).is_some() {
            links.note(MonitorNote::Retire(node.id));
        }
        let opts = DealerOptions {
            identity: (me.id != EMPTY).then_some(me.id),
            heartbeat_ms: self.config.heartbeat_ms,
            send_hwm: self.config.send_hwm,
        };
        let generation = links.generation.fetch_add(1, Ordering::Relaxed) + 1;
        let name = format!("rsmx-van-mon-{:p}-{generation}", self);
        let to = match &node.rsmx_ipc {
            // An rsmx peer on this host: its Unix socket, cheaper than loopback TCP.
            Some(ipc) if self.config.ipc && node.hostname == me.hostname => ipc.clone(),
            _ => endpoint(&node.hostname, node.port as u16),
        };
        match Dealer::connect_monitored(&links.ctx, &to, opts, &name) {
            Ok((dealer, monitor)) => {
                links
                    .dealers
                    .lock()
                    .insert(node.id, Arc::new(Mutex::new(dealer)));
                links.note(MonitorNote::Watch(node.id, describe(node), monitor));
            }
            Err(e) => self.fail(format!("KVStore dist: {}: {e}", describe(node))),
        }
    }

    /// Sends `[meta, data...]` to node `recver` from this thread; a failure becomes the
    /// node's error.
    pub(super) fn send(&self, recver: i32, mut meta: Meta, data: Vec<Frame>) {
        meta.rsmx_wire = Some(WIRE_VERSION);
        if self.config.verbose >= 2 {
            let sizes: Vec<usize> = data.iter().map(Frame::len).collect();
            self.log(2, &meta.debug_string(EMPTY, recver, &sizes));
        }
        let dealer = self.links.dealers.lock().get(&recver).cloned();
        let sent: Result<()> = match dealer {
            Some(d) => d.lock().send(meta.encode(), data),
            None => Err(Error::Runtime(format!(
                "KVStore dist: no connection to node {recver}"
            ))),
        };
        if let Err(e) = sent {
            if !self.stop.load(Ordering::Acquire) {
                self.fail(e.to_string());
            }
        }
    }

    /// Closes every connection, giving what is queued on each a moment to leave.
    pub(super) fn close_links(&self) {
        let dealers: Vec<(i32, Arc<Mutex<Dealer>>)> = self.links.dealers.lock().drain().collect();
        for (peer, dealer) in dealers {
            self.links.note(MonitorNote::Retire(peer));
            dealer.lock().set_linger(CLOSE_LINGER_MS);
        }
    }
}

/// How errors name a peer: `server rank 0 (node 8, 127.0.0.1:41234)`, `the scheduler at
/// host:port`.
pub(super) fn describe(node: &Node) -> String {
    match node.role {
        Role::Scheduler => format!("the scheduler at {}:{}", node.hostname, node.port),
        role => format!(
            "{} rank {} (node {}, {}:{})",
            role.name(),
            rank_of(node.id),
            node.id,
            node.hostname,
            node.port
        ),
    }
}
