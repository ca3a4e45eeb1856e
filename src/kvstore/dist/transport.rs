//! A ps-lite node's sockets on libzmq: one bound ROUTER that receives `[identity, meta,
//! data...]`, one DEALER per peer that sends `[meta, data...]` under the identity
//! `ps<id>`, libzmq heartbeats on every DEALER, and a monitor that says when a peer's
//! connection comes up or goes away.

use super::frame::{send_multipart, Frame};
use super::meta::EMPTY;
use crate::error::{Error, Result};

/// The identity a node with id `id` gives its DEALERs (`ps9`).
pub fn identity_of(id: i32) -> Vec<u8> {
    format!("ps{id}").into_bytes()
}

/// The sender id a ROUTER reads from a message's identity frame: the digits of `ps<id>`,
/// or [`EMPTY`] for anything else (a node that has no id yet sends none).
pub fn sender_id(identity: &[u8]) -> i32 {
    let Some(digits) = identity.strip_prefix(b"ps") else {
        return EMPTY;
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return EMPTY;
    }
    std::str::from_utf8(digits)
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(EMPTY)
}

/// `tcp://host:port`, with ps-lite's `*` for an empty host.
pub fn endpoint(host: &str, port: u16) -> String {
    let host = if host.is_empty() { "*" } else { host };
    format!("tcp://{host}:{port}")
}

fn zmq_error(what: &str, e: zmq::Error) -> Error {
    Error::Runtime(format!("KVStore dist: {what}: {e}"))
}

/// True once `socket` has a message to read, within `timeout_ms` (`-1`: no limit).
fn readable(socket: &zmq::Socket, timeout_ms: i64, what: &str) -> Result<bool> {
    socket
        .poll(zmq::POLLIN, timeout_ms)
        .map(|ready| ready > 0)
        .map_err(|e| zmq_error(&format!("polling {what}"), e))
}

/// A bound ROUTER socket and the port it listens on.
pub struct Router {
    socket: zmq::Socket,
    port: u16,
}

/// One message as a ROUTER receives it.
pub struct Received {
    /// The sender's id from its identity, or [`EMPTY`].
    pub sender: i32,
    /// The raw identity frame, to answer a node that has no id yet.
    pub identity: Vec<u8>,
    /// The meta frame.
    pub meta: zmq::Message,
    /// The data frames, as libzmq received them.
    pub data: Vec<zmq::Message>,
}

impl Router {
    /// Binds `host` (empty: every interface) on `port`, exactly, or on a port the system
    /// picks when `port` is `None`. A port in use is an error naming it.
    pub fn bind(ctx: &zmq::Context, host: &str, port: Option<u16>) -> Result<Router> {
        let socket = ctx
            .socket(zmq::ROUTER)
            .map_err(|e| zmq_error("cannot make a ROUTER socket", e))?;
        let addr = match port {
            Some(p) => endpoint(host, p),
            None => format!("tcp://{}:*", if host.is_empty() { "*" } else { host }),
        };
        socket
            .bind(&addr)
            .map_err(|e| zmq_error(&format!("cannot bind {addr}"), e))?;
        let port = match port {
            Some(p) => p,
            None => bound_port(&socket)?,
        };
        Ok(Router { socket, port })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Listens on `endpoint` as well (an `ipc://` address beside the TCP one).
    pub fn also_bind(&self, endpoint: &str) -> Result<()> {
        self.socket
            .bind(endpoint)
            .map_err(|e| zmq_error(&format!("cannot bind {endpoint}"), e))
    }

    /// The socket, to poll it beside others.
    pub fn socket(&self) -> &zmq::Socket {
        &self.socket
    }

    /// The next message, waiting at most `timeout_ms` (`-1`: forever); `None` on timeout.
    pub fn recv(&self, timeout_ms: i64) -> Result<Option<Received>> {
        if !readable(&self.socket, timeout_ms, "the ROUTER")? {
            return Ok(None);
        }
        let mut frames = Vec::new();
        loop {
            let frame = self
                .socket
                .recv_msg(0)
                .map_err(|e| zmq_error("receiving", e))?;
            let more = frame.get_more();
            frames.push(frame);
            if !more {
                break;
            }
        }
        let mut frames = frames.into_iter();
        let identity = frames.next().map(|f| f.to_vec()).unwrap_or_default();
        let meta = frames.next().ok_or_else(|| {
            Error::Runtime(format!(
                "KVStore dist: a message from {} had no meta frame",
                String::from_utf8_lossy(&identity)
            ))
        })?;
        Ok(Some(Received {
            sender: sender_id(&identity),
            identity,
            meta,
            data: frames.collect(),
        }))
    }
}

/// The port a socket bound with a wildcard port listens on.
fn bound_port(socket: &zmq::Socket) -> Result<u16> {
    let last = socket
        .get_last_endpoint()
        .map_err(|e| zmq_error("reading the bound endpoint", e))?
        .map_err(|raw| {
            Error::Runtime(format!(
                "KVStore dist: the bound endpoint is not text: {raw:?}"
            ))
        })?;
    last.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| Error::Runtime(format!("KVStore dist: no port in endpoint {last}")))
}

/// How a DEALER is set up.
#[derive(Clone, Copy, Debug, Default)]
pub struct DealerOptions {
    /// The node's own id, given as the identity `ps<id>`; `None` before registration.
    pub identity: Option<i32>,
    /// libzmq heartbeat interval in milliseconds; the timeout and the TTL the peer is
    /// told are five times it. `0` turns heartbeats off.
    pub heartbeat_ms: i32,
    /// `DMLC_PS_WATER_MARK`: the send high-water mark (set, as ps-lite does, only once the
    /// node has an id; none otherwise, where libzmq's default is 1,000 messages).
    pub send_hwm: Option<i32>,
}

/// The most libzmq accepts for `ZMQ_HEARTBEAT_TTL`, in milliseconds.
const MAX_HEARTBEAT_TTL_MS: i32 = 6_553_599;

/// A DEALER socket connected to one peer.
pub struct Dealer {
    socket: zmq::Socket,
    endpoint: String,
}

impl Dealer {
    /// Connects to `endpoint` (`tcp://host:port`). libzmq connects in the background and
    /// queues what is sent until then.
    pub fn connect(ctx: &zmq::Context, endpoint: &str, opts: DealerOptions) -> Result<Dealer> {
        let socket = configured(ctx, opts)?;
        Dealer::start(socket, endpoint)
    }

    /// As [`Dealer::connect`], with a monitor on `inproc://<name>` started before the
    /// connection, so that it sees every event of it.
    pub fn connect_monitored(
        ctx: &zmq::Context,
        endpoint: &str,
        opts: DealerOptions,
        name: &str,
    ) -> Result<(Dealer, Monitor)> {
        let socket = configured(ctx, opts)?;
        let monitor = Monitor::attach(ctx, &socket, name)?;
        Ok((Dealer::start(socket, endpoint)?, monitor))
    }

    fn start(socket: zmq::Socket, endpoint: &str) -> Result<Dealer> {
        socket
            .connect(endpoint)
            .map_err(|e| zmq_error(&format!("cannot connect to {endpoint}"), e))?;
        Ok(Dealer {
            socket,
            endpoint: endpoint.to_string(),
        })
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Gives what is still queued on the socket up to `linger_ms` to leave once it closes.
    pub fn set_linger(&self, linger_ms: i32) {
        // A failure leaves the default of no linger: the socket closes either way.
        let _ = self.socket.set_linger(linger_ms);
    }

    /// Sends `[meta, data...]` as one multipart message; the data frames' bytes go to
    /// libzmq without a copy.
    pub fn send(&mut self, meta: Vec<u8>, data: Vec<Frame>) -> Result<()> {
        let frames = std::iter::once(Frame::from(meta)).chain(data).collect();
        send_multipart(&mut self.socket, frames)
            .map_err(|e| zmq_error(&format!("sending to {}", self.endpoint), e))
    }
}

/// A DEALER socket with `opts` applied, not yet connected.
fn configured(ctx: &zmq::Context, opts: DealerOptions) -> Result<zmq::Socket> {
    let socket = ctx
        .socket(zmq::DEALER)
        .map_err(|e| zmq_error("cannot make a DEALER socket", e))?;
    let set = |r: zmq::Result<()>, what: &str| r.map_err(|e| zmq_error(what, e));
    set(socket.set_linger(0), "setting ZMQ_LINGER")?;
    if let Some(id) = opts.identity {
        set(
            socket.set_identity(&identity_of(id)),
            "setting the identity",
        )?;
    }
    // Without DMLC_PS_WATER_MARK, no limit: messages are sent by whichever thread has them
    // (the receiver's among them), which must never block on a peer that stopped reading;
    // what is in flight is bounded by the requests a node has open.
    let hwm = opts
        .send_hwm
        .filter(|_| opts.identity.is_some())
        .unwrap_or(0);
    set(socket.set_sndhwm(hwm), "setting ZMQ_SNDHWM")?;
    if opts.heartbeat_ms > 0 {
        let timeout = opts.heartbeat_ms.saturating_mul(5);
        set(
            socket.set_heartbeat_ivl(opts.heartbeat_ms),
            "setting ZMQ_HEARTBEAT_IVL",
        )?;
        set(
            socket.set_heartbeat_timeout(timeout),
            "setting ZMQ_HEARTBEAT_TIMEOUT",
        )?;
        set(
            socket.set_heartbeat_ttl(timeout.min(MAX_HEARTBEAT_TTL_MS)),
            "setting ZMQ_HEARTBEAT_TTL",
        )?;
    }
    Ok(socket)
}

/// What a monitor reports of a DEALER's connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkEvent {
    /// TCP connected.
    Connected,
    /// Nothing listened; libzmq tries again.
    ConnectRetried,
    /// The ZMTP handshake finished: the peer is there.
    HandshakeSucceeded,
    /// An established connection went away: the peer closed it, died, or missed its
    /// heartbeats.
    Disconnected,
    /// The socket closed.
    Closed,
    /// Any other event id.
    Other(u16),
}

impl LinkEvent {
    /// Reads the event id libzmq writes in the first two bytes of a monitor message.
    pub fn from_raw(raw: u16) -> LinkEvent {
        // Decoded here rather than with `zmq::SocketEvent::from_raw`, which panics on ids
        // it does not know.
        const CONNECTED: u16 = zmq::SocketEvent::CONNECTED as u16;
        const RETRIED: u16 = zmq::SocketEvent::CONNECT_RETRIED as u16;
        const HANDSHAKE: u16 = zmq::SocketEvent::HANDSHAKE_SUCCEEDED as u16;
        const DISCONNECTED: u16 = zmq::SocketEvent::DISCONNECTED as u16;
        const CLOSED: u16 = zmq::SocketEvent::CLOSED as u16;
        match raw {
            CONNECTED => LinkEvent::Connected,
            RETRIED => LinkEvent::ConnectRetried,
            HANDSHAKE => LinkEvent::HandshakeSucceeded,
            DISCONNECTED => LinkEvent::Disconnected,
            CLOSED => LinkEvent::Closed,
            other => LinkEvent::Other(other),
        }
    }
}

/// The receiving end of a DEALER's monitor.
pub struct Monitor {
    socket: zmq::Socket,
}

impl Monitor {
    /// Starts monitoring `socket` on `inproc://<name>` and connects the PAIR socket its
    /// events arrive on.
    fn attach(ctx: &zmq::Context, socket: &zmq::Socket, name: &str) -> Result<Monitor> {
        let addr = format!("inproc://{name}");
        let events = [
            zmq::SocketEvent::CONNECTED,
            zmq::SocketEvent::CONNECT_RETRIED,
            zmq::SocketEvent::HANDSHAKE_SUCCEEDED,
            zmq::SocketEvent::DISCONNECTED,
            zmq::SocketEvent::CLOSED,
        ]
        .iter()
        .fold(0, |m, e| m | i32::from(e.to_raw()));
        socket
            .monitor(&addr, events)
            .map_err(|e| zmq_error("starting a socket monitor", e))?;
        let pair = ctx
            .socket(zmq::PAIR)
            .map_err(|e| zmq_error("cannot make a PAIR socket", e))?;
        pair.connect(&addr)
            .map_err(|e| zmq_error(&format!("cannot connect to {addr}"), e))?;
        Ok(Monitor { socket: pair })
    }

    /// The socket, to poll it beside others.
    pub fn socket(&self) -> &zmq::Socket {
        &self.socket
    }

    /// The next event, waiting at most `timeout_ms`; `None` on timeout.
    pub fn next(&self, timeout_ms: i64) -> Result<Option<LinkEvent>> {
        if !readable(&self.socket, timeout_ms, "a monitor")? {
            return Ok(None);
        }
        let frames = self
            .socket
            .recv_multipart(0)
            .map_err(|e| zmq_error("receiving a monitor event", e))?;
        let head = frames.first().map(Vec::as_slice).unwrap_or_default();
        if head.len() < 2 {
            return Err(Error::Runtime(format!(
                "KVStore dist: a monitor event of {} bytes",
                head.len()
            )));
        }
        Ok(Some(LinkEvent::from_raw(u16::from_le_bytes([
            head[0], head[1],
        ]))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAIT_MS: i64 = 5000;

    fn events_until(monitor: &Monitor, want: LinkEvent) -> Vec<LinkEvent> {
        let mut seen = Vec::new();
        while let Some(e) = monitor.next(WAIT_MS).unwrap() {
            seen.push(e);
            if e == want {
                break;
            }
        }
        seen
    }

    #[test]
    fn a_sender_id_is_read_only_from_ps_and_digits() {
        assert_eq!(sender_id(b"ps9"), 9);
        assert_eq!(sender_id(b"ps123"), 123);
        assert_eq!(sender_id(&identity_of(8)), 8);
        for other in [
            &b"ps"[..],
            b"psx",
            b"ps1a",
            b"p9",
            b"",
            &[0, 0x6b, 0x8b, 0x45, 0x67],
        ] {
            assert_eq!(sender_id(other), EMPTY, "{other:?}");
        }
    }

    #[test]
    fn a_message_arrives_with_its_sender_meta_and_data_frames() {
        let ctx = zmq::Context::new();
        let router = Router::bind(&ctx, "127.0.0.1", None).unwrap();
        let to = endpoint("127.0.0.1", router.port());
        let named = DealerOptions {
            identity: Some(9),
            ..Default::default()
        };
        let mut dealer = Dealer::connect(&ctx, &to, named).unwrap();
        dealer
            .send(
                b"meta".to_vec(),
                vec![Frame::from(b"abc".to_vec()), Frame::from(Vec::new())],
            )
            .unwrap();
        let got = router.recv(WAIT_MS).unwrap().expect("a message");
        assert_eq!(got.sender, 9);
        assert_eq!(&got.meta[..], b"meta");
        let data: Vec<&[u8]> = got.data.iter().map(|d| &d[..]).collect();
        assert_eq!(data, [&b"abc"[..], b""]);

        // A node with no id yet gets an identity libzmq makes up: no sender id.
        let mut anonymous = Dealer::connect(&ctx, &to, DealerOptions::default()).unwrap();
        anonymous.send(b"hello".to_vec(), Vec::new()).unwrap();
        let got = router.recv(WAIT_MS).unwrap().expect("a message");
        assert_eq!(got.sender, EMPTY);
        assert_eq!(got.identity.first(), Some(&0));
        assert!(got.data.is_empty());
        assert!(router.recv(50).unwrap().is_none());
    }

    #[test]
    fn binding_a_port_in_use_names_it() {
        let ctx = zmq::Context::new();
        let first = Router::bind(&ctx, "127.0.0.1", None).unwrap();
        let err = Router::bind(&ctx, "127.0.0.1", Some(first.port()))
            .err()
            .expect("the port is taken");
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("tcp://127.0.0.1:{}", first.port())),
            "{msg}"
        );
    }

    #[test]
    fn a_monitor_sees_the_peer_come_and_go() {
        let ctx = zmq::Context::new();
        let router = Router::bind(&ctx, "127.0.0.1", None).unwrap();
        let opts = DealerOptions {
            identity: Some(1),
            heartbeat_ms: 100,
            send_hwm: Some(1000),
        };
        let to = endpoint("127.0.0.1", router.port());
        let (_dealer, monitor) =
            Dealer::connect_monitored(&ctx, &to, opts, "mon-test-come-and-go").unwrap();
        let seen = events_until(&monitor, LinkEvent::HandshakeSucceeded);
        assert_eq!(
            seen.last(),
            Some(&LinkEvent::HandshakeSucceeded),
            "{seen:?}"
        );
        drop(router);
        let seen = events_until(&monitor, LinkEvent::Disconnected);
        assert_eq!(seen.last(), Some(&LinkEvent::Disconnected), "{seen:?}");
    }

    #[test]
    fn a_monitor_tells_nothing_listening_from_a_peer_that_never_answers() {
        let ctx = zmq::Context::new();
        // Port 1: nothing listens there (a port freed just now could be taken again by
        // another test before the connection is tried).
        let (_dealer, monitor) = Dealer::connect_monitored(
            &ctx,
            &endpoint("127.0.0.1", 1),
            DealerOptions::default(),
            "mon-test-nobody",
        )
        .unwrap();
        let seen = events_until(&monitor, LinkEvent::ConnectRetried);
        assert_eq!(seen.last(), Some(&LinkEvent::ConnectRetried), "{seen:?}");

        // A listener that accepts TCP but never speaks ZMTP: connected, never a peer.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let to = endpoint("127.0.0.1", silent.local_addr().unwrap().port());
        let (_dealer, monitor) =
            Dealer::connect_monitored(&ctx, &to, DealerOptions::default(), "mon-test-silent")
                .unwrap();
        let seen = events_until(&monitor, LinkEvent::Connected);
        assert_eq!(seen.last(), Some(&LinkEvent::Connected), "{seen:?}");
        assert_eq!(
            monitor.next(300).unwrap(),
            None,
            "no handshake with a silent peer"
        );
    }
}
