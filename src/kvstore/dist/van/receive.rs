//! The van's receiver thread: it reads the ROUTER and the monitor of every connection,
//! answers control messages (on the scheduler: registrations and barrier counts), hands
//! data messages to the node's app, and turns a lost connection into the node's failure.

use super::{short, stamp, DataMessage, MonitorNote, Shared, POLL_MS};
use crate::kvstore::dist::layout::SCHEDULER;
use crate::kvstore::dist::meta::{msg_sig, Command, Control, Meta, Node, Role, EMPTY};
use crate::kvstore::dist::registry::{Barriers, Registry};
use crate::kvstore::dist::transport::{LinkEvent, Monitor, Received, Router};
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A watched connection: its peer, how errors name it, whether it came up.
struct Watched {
    peer: i32,
    what: String,
    monitor: Monitor,
    up: bool,
}

/// The receiver's own state: what only the scheduler keeps, and the monitors.
struct Receiver<'a> {
    shared: &'a Shared,
    registry: Registry,
    barriers: Barriers,
    watched: Vec<Watched>,
    notes: mpsc::Receiver<MonitorNote>,
    /// With `PS_RESEND`: the signatures of the messages acknowledged so far.
    acked: HashSet<u64>,
    /// The scheduler, lost while this node waits in its last barrier: it may simply have
    /// finished first, its answer to the barrier still on its way through another socket,
    /// so the loss counts only if the barrier has not passed by the deadline.
    lost_at_end: Option<(Instant, i32, String)>,
}

/// How long a node in its last barrier waits for it after losing a peer.
const END_GRACE: Duration = Duration::from_secs(2);

/// The receiver thread: reads the ROUTER and the monitors until told to stop.
pub(super) fn receive_loop(shared: &Shared, router: Router, notes: mpsc::Receiver<MonitorNote>) {
    let c = &shared.config;
    let mut r = Receiver {
        shared,
        registry: Registry::new(c.num_servers, c.num_workers),
        barriers: Barriers::new(c.num_servers, c.num_workers),
        watched: Vec::new(),
        notes,
        acked: HashSet::new(),
        lost_at_end: None,
    };
    while !shared.stop.load(Ordering::Acquire) {
        r.take_notes();
        r.check_lost_at_end();
        let (router_ready, ready_monitors) = {
            let mut items = vec![router.socket().as_poll_item(zmq::POLLIN)];
            items.extend(
                r.watched
                    .iter()
                    .map(|w| w.monitor.socket().as_poll_item(zmq::POLLIN)),
            );
            if let Err(e) = zmq::poll(&mut items, POLL_MS) {
                shared.fail(format!("KVStore dist: polling the node's sockets: {e}"));
                return;
            }
            let ready: Vec<usize> = (1..items.len())
                .filter(|&i| items[i].is_readable())
                .collect();
            (items[0].is_readable(), ready)
        };
        if router_ready {
            loop {
                match router.recv(0) {
                    Ok(Some(msg)) => {
                        if !r.handle(msg) {
                            return;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        shared.fail(e.to_string());
                        return;
                    }
                }
            }
        }
        if !ready_monitors.is_empty() {
            // Retirements sent before a socket closed are read before its events.
            let peers: Vec<i32> = ready_monitors
                .iter()
                .map(|&i| r.watched[i - 1].peer)
                .collect();
            r.take_notes();
            for peer in peers {
                r.read_monitor(peer);
            }
        }
    }
}

impl Receiver<'_> {
    fn take_notes(&mut self) {
        while let Ok(note) = self.notes.try_recv() {
            match note {
                MonitorNote::Watch(peer, what, monitor) => self.watched.push(Watched {
                    peer,
                    what,
                    monitor,
                    up: false,
                }),
                MonitorNote::Retire(peer) => self.watched.retain(|w| w.peer != peer),
            }
        }
    }

    fn read_monitor(&mut self, peer: i32) {
        let Some(w) = self.watched.iter_mut().find(|w| w.peer == peer) else {
            return;
        };
        let mut lost = None;
        while let Ok(Some(event)) = w.monitor.next(0) {
            match event {
                LinkEvent::HandshakeSucceeded => w.up = true,
                LinkEvent::Disconnected | LinkEvent::Closed if w.up => {
                    w.up = false;
                    lost = Some(format!(
                        "KVStore dist: {} is unreachable (its connection was lost)",
                        w.what
                    ));
                }
                _ => {}
            }
        }
        if let Some(why) = lost {
            let state = self.shared.state.lock();
            if state.finished {
                return;
            }
            // In its last barrier a node waits only for the scheduler, which notices lost
            // nodes itself: the others may just have finished first.
            if state.finalizing && self.shared.config.role != Role::Scheduler {
                if peer == SCHEDULER && self.lost_at_end.is_none() {
                    self.lost_at_end = Some((Instant::now() + END_GRACE, peer, why));
                }
                return;
            }
            drop(state);
            self.tell_others(peer, &why);
            self.shared.fail(why);
        }
    }

    /// Fails the node for a peer lost in its last barrier, once the grace has passed.
    fn check_lost_at_end(&mut self) {
        let Some((deadline, _, _)) = &self.lost_at_end else {
            return;
        };
        if self.shared.state.lock().finished {
            self.lost_at_end = None;
            return;
        }
        if Instant::now() >= *deadline {
            let (_, peer, why) = self.lost_at_end.take().expect("checked above");
            self.tell_others(peer, &why);
            self.shared.fail(why);
        }
    }

    /// On the scheduler: tells every other node that speaks rsmx's additions that node
    /// `lost` is gone, so that none of them waits for it.
    fn tell_others(&self, lost: i32, why: &str) {
        if self.shared.config.role != Role::Scheduler {
            return;
        }
        let nodes = self.shared.state.lock().nodes.clone();
        let Some(gone) = nodes.iter().find(|n| n.id == lost) else {
            return;
        };
        let rsmx_peers = self.shared.rsmx_peers.lock().clone();
        for n in &nodes {
            if n.id == lost || n.role == Role::Scheduler || !rsmx_peers.contains_key(&n.id) {
                continue;
            }
            let notice = Meta {
                body: why.as_bytes().to_vec(),
                control: Control {
                    cmd: Command::NodeLost,
                    nodes: vec![gone.clone()],
                    ..Control::default()
                },
                timestamp: self.shared.next_timestamp(),
                ..Meta::default()
            };
            self.shared.send(n.id, notice, Vec::new());
        }
    }

    /// Handles one message; false when the node is told to stop.
    fn handle(&mut self, msg: Received) -> bool {
        let meta = match Meta::decode(&msg.meta) {
            Ok(m) => m,
            Err(e) => {
                eprintln!(
                    "{}",
                    stamp(&format!(
                        "KVStore dist: dropped a message from node {}: {e}",
                        msg.sender
                    ))
                );
                return true;
            }
        };
        if let (Some(version), true) = (meta.rsmx_wire, msg.sender != EMPTY) {
            self.shared.rsmx_peers.lock().insert(msg.sender, version);
        }
        let me = self.shared.me.lock().clone();
        if self.shared.config.verbose >= 2 {
            let sizes: Vec<usize> = msg.data.iter().map(|d| d.len()).collect();
            self.shared
                .log(2, &meta.debug_string(msg.sender, me.id, &sizes));
        }
        if self.shared.config.resend && !self.acknowledge(msg.sender, &meta, &me) {
            return true;
        }
        match meta.control.cmd {
            Command::Terminate => return false,
            Command::AddNode => self.add_node(msg.sender, meta, &me),
            Command::Barrier if meta.request => self.count_barrier(&meta),
            Command::Barrier => {
                let mut state = self.shared.state.lock();
                state.barrier_done = true;
                state.finished |= state.finalizing;
                self.shared.changed.notify_all();
            }
            Command::Heartbeat => self.heartbeat(&meta, &me),
            Command::NodeLost => {
                if !self.shared.state.lock().finished {
                    let why = String::from_utf8_lossy(&meta.body);
                    self.shared
                        .fail(format!("{why} (reported by the scheduler)"));
                }
            }
            // Acknowledgements matter only to a node that resends (PS_RESEND).
            Command::Ack => {}
            Command::Empty => {
                let app = self.shared.app.lock().clone();
                match app {
                    Some(app) => app.receive(DataMessage {
                        sender: msg.sender,
                        meta,
                        data: msg.data,
                    }),
                    None => eprintln!(
                        "{}",
                        stamp(&format!(
                            "KVStore dist: {} has no app for a data message from node {}",
                            short(&me),
                            msg.sender
                        ))
                    ),
                }
            }
        }
        true
    }

    /// With `PS_RESEND`, as ps-lite's resender: once the node is ready, every message but
    /// ACK and TERMINATE is acknowledged to its sender; false for one seen before, which is
    /// dropped.
    fn acknowledge(&mut self, sender: i32, meta: &Meta, me: &Node) -> bool {
        let cmd = meta.control.cmd;
        if matches!(cmd, Command::Ack | Command::Terminate)
            || sender == EMPTY
            || meta.timestamp == EMPTY
            || !self.shared.state.lock().ready
        {
            return true;
        }
        let sig = msg_sig(meta.app_id, sender, me.id, meta.timestamp, meta.request);
        let ack = Meta {
            control: Control {
                cmd: Command::Ack,
                msg_sig: sig,
                ..Control::default()
            },
            ..Meta::default()
        };
        self.shared.send(sender, ack, Vec::new());
        if self.acked.insert(sig) {
            return true;
        }
        self.shared.log(
            0,
            &format!("KVStore dist: dropped a duplicated message from node {sender}"),
        );
        false
    }

    fn add_node(&mut self, sender: i32, meta: Meta, me: &Node) {
        if me.role == Role::Scheduler {
            if sender != EMPTY || meta.control.nodes.len() != 1 {
                return;
            }
            let node = meta.control.nodes.into_iter().next().expect("one node");
            match self.registry.add(node, me) {
                Ok(Some(nodes)) => self.registered(nodes),
                Ok(None) => {}
                Err(e) => eprintln!(
                    "{}",
                    stamp(&format!("KVStore dist: registration refused: {e}"))
                ),
            }
            return;
        }
        let nodes = meta.control.nodes;
        let Some(mine) = nodes
            .iter()
            .find(|n| n.hostname == me.hostname && n.port == me.port)
        else {
            self.shared.fail(format!(
                "KVStore dist: the scheduler's node list does not have this node ({})",
                me.debug_string()
            ));
            return;
        };
        if self.shared.state.lock().ready {
            return;
        }
        *self.shared.me.lock() = mine.clone();
        for n in &nodes {
            self.shared.connect(n);
        }
        self.shared
            .log(1, &format!("{} is connected to others", short(mine)));
        let mut state = self.shared.state.lock();
        state.nodes = nodes;
        state.ready = true;
        self.shared.changed.notify_all();
    }

    /// The scheduler has every registration: it connects to each node and sends each the
    /// whole list.
    fn registered(&mut self, nodes: Vec<Node>) {
        let others: Vec<&Node> = nodes.iter().filter(|n| n.role != Role::Scheduler).collect();
        for n in &others {
            self.shared.log(
                1,
                &format!("assign rank={} to node {}", n.id, n.debug_string()),
            );
            self.shared.connect(n);
        }
        for n in &others {
            let list = Meta {
                control: Control {
                    cmd: Command::AddNode,
                    nodes: nodes.clone(),
                    ..Control::default()
                },
                timestamp: self.shared.next_timestamp(),
                ..Meta::default()
            };
            self.shared.send(n.id, list, Vec::new());
        }
        let c = &self.shared.config;
        self.shared.log(
            1,
            &format!(
                "the scheduler is connected to {} workers and {} servers",
                c.num_workers, c.num_servers
            ),
        );
        let mut state = self.shared.state.lock();
        state.nodes = nodes;
        state.ready = true;
        self.shared.changed.notify_all();
    }

    fn count_barrier(&mut self, request: &Meta) {
        let group = request.control.barrier_group;
        match self.barriers.request(group) {
            Ok(Some(members)) => {
                for &id in members.iter().filter(|&&id| id != SCHEDULER) {
                    let reply =
                        self.shared
                            .barrier_meta(false, request.app_id, request.customer_id, group);
                    self.shared.send(id, reply, Vec::new());
                }
                // The scheduler passes at once, after the answers are queued (it may stop
                // right after): were its own answer to go round through its sockets, the
                // others could finish and close first, which it would take for lost nodes.
                if members.contains(&SCHEDULER) {
                    let mut state = self.shared.state.lock();
                    state.barrier_done = true;
                    state.finished |= state.finalizing;
                    self.shared.changed.notify_all();
                }
            }
            Ok(None) => {}
            Err(e) => eprintln!("{}", stamp(&format!("KVStore dist: {e}"))),
        }
    }

    /// ps-lite's HEARTBEAT: the scheduler answers each node that sends one.
    fn heartbeat(&mut self, meta: &Meta, me: &Node) {
        if me.role != Role::Scheduler {
            return;
        }
        for n in &meta.control.nodes {
            let answer = Meta {
                control: Control {
                    cmd: Command::Heartbeat,
                    nodes: vec![me.clone()],
                    ..Control::default()
                },
                timestamp: self.shared.next_timestamp(),
                ..Meta::default()
            };
            self.shared.send(n.id, answer, Vec::new());
        }
    }
}
