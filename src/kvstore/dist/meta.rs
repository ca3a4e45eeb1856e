//! ps-lite's meta frame: the protobuf `PBMeta` (proto2) that leads every message, encoded
//! by the rules of ps-lite's `Van::PackMeta` (which fields are always written, which only
//! when set) and decoded by those of `Van::UnpackMeta`.

use crate::error::{Error, Result};
use prost::Message;

/// ps-lite's `kEmpty`: an unset id, head, app id or timestamp.
pub const EMPTY: i32 = i32::MAX;

/// A node's role (`Node::Role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    Server = 0,
    Worker = 1,
    Scheduler = 2,
}

impl Role {
    /// `server`, `worker` or `scheduler`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Worker => "worker",
            Role::Scheduler => "scheduler",
        }
    }

    fn from_wire(v: i32) -> Result<Role> {
        match v {
            0 => Ok(Role::Server),
            1 => Ok(Role::Worker),
            2 => Ok(Role::Scheduler),
            _ => Err(malformed(format!("unknown node role {v}"))),
        }
    }
}

/// A control command (`Control::Command`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Command {
    #[default]
    Empty = 0,
    Terminate = 1,
    AddNode = 2,
    Barrier = 3,
    Ack = 4,
    Heartbeat = 5,
    /// rsmx's own: a node is gone (`nodes` holds it, `body` says why). Sent only to peers
    /// whose metas carry [`WIRE_VERSION`]: MXNet's nodes would index past their table of
    /// command names.
    NodeLost = 100,
}

/// ps-lite's signature of a message, which an ACK names (`Resender::GetKey`): app id,
/// sender and receiver ids truncated to 16, 8 and 8 bits, the timestamp and the request
/// flag, computed as its C++ does (the timestamp shifted as a 32-bit int, sign-extended).
pub fn msg_sig(app_id: i32, sender: i32, recver: i32, timestamp: i32, request: bool) -> u64 {
    (u64::from(app_id as u16) << 48)
        | (u64::from(sender as u8) << 40)
        | (u64::from(recver as u8) << 32)
        | (timestamp.wrapping_shl(1) as i64 as u64)
        | u64::from(request)
}

/// The version of rsmx's additions to ps-lite's protocol, sent in meta field 100 (which
/// MXNet skips) so that a node knows which peers understand them. 1: error answers and
/// lost-node notices. 2: a server answers a worker's pull of a key whose push from that
/// worker waits in a sync round with the round's value ([`ORDERED_PULLS`]).
pub const WIRE_VERSION: u32 = 2;

/// The first wire version whose servers hold a pull behind the sender's own push.
pub const ORDERED_PULLS: u32 = 2;

impl Command {
    fn from_wire(v: i32) -> Result<Command> {
        Ok(match v {
            0 => Command::Empty,
            1 => Command::Terminate,
            2 => Command::AddNode,
            3 => Command::Barrier,
            4 => Command::Ack,
            5 => Command::Heartbeat,
            100 => Command::NodeLost,
            _ => return Err(malformed(format!("unknown control command {v}"))),
        })
    }

    /// The name ps-lite's logs give it (`NODE_LOST` for rsmx's own).
    fn name(self) -> &'static str {
        match self {
            Command::Empty => "EMPTY",
            Command::Terminate => "TERMINATE",
            Command::AddNode => "ADD_NODE",
            Command::Barrier => "BARRIER",
            Command::Ack => "ACK",
            Command::Heartbeat => "HEARTBEAT",
            Command::NodeLost => "NODE_LOST",
        }
    }
}

/// The label of a data frame (`DataType`); informational, no receiver reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataType {
    Char = 0,
    Int8 = 1,
    Int16 = 2,
    Int32 = 3,
    Int64 = 4,
    Uint8 = 5,
    Uint16 = 6,
    Uint32 = 7,
    Uint64 = 8,
    Float = 9,
    Double = 10,
    Other = 11,
}

impl DataType {
    fn name(self) -> &'static str {
        [
            "CHAR", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64",
            "FLOAT", "DOUBLE", "OTHER",
        ][self as usize]
    }

    fn from_wire(v: i32) -> DataType {
        use DataType::*;
        [
            Char, Int8, Int16, Int32, Int64, Uint8, Uint16, Uint32, Uint64, Float, Double,
        ]
        .get(v as usize)
        .copied()
        .unwrap_or(Other)
    }
}

/// A node as the scheduler lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub role: Role,
    /// `EMPTY` until the scheduler assigns one.
    pub id: i32,
    pub hostname: String,
    pub port: i32,
    pub is_recovery: bool,
    pub customer_id: i32,
    /// Field 100: where an rsmx node also listens on a Unix socket, for peers on its
    /// host (MXNet's nodes skip the field, and its scheduler drops it).
    pub rsmx_ipc: Option<String>,
}

impl Node {
    /// The node as ps-lite's logs show it (`Node::DebugString`).
    pub fn debug_string(&self) -> String {
        let id = if self.id == EMPTY {
            String::new()
        } else {
            format!(", id={}", self.id)
        };
        format!(
            "role={}{id}, ip={}, port={}, is_recovery={}",
            self.role.name(),
            self.hostname,
            self.port,
            u8::from(self.is_recovery)
        )
    }
}

/// The control part of a meta; `cmd == Empty` for data and command messages.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Control {
    pub cmd: Command,
    pub nodes: Vec<Node>,
    /// Written only for `Barrier`; a barrier reply's value is garbage, never read.
    pub barrier_group: i32,
    /// Written only for `Ack`.
    pub msg_sig: u64,
}

/// A message's meta: everything but its data frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// The command of a SimpleApp message, or a data request's type and dtype.
    pub head: i32,
    pub body: Vec<u8>,
    pub control: Control,
    pub request: bool,
    pub push: bool,
    pub pull: bool,
    pub simple_app: bool,
    pub app_id: i32,
    pub timestamp: i32,
    pub customer_id: i32,
    /// One label per data frame.
    pub data_type: Vec<DataType>,
    pub priority: i32,
    /// Field 100: the sender's [`WIRE_VERSION`], when the sender is an rsmx node.
    pub rsmx_wire: Option<u32>,
    /// Field 101: why an rsmx server could not carry out this answer's request; sent only
    /// to rsmx peers (MXNet's nodes skip the field, but would misread the answer).
    pub rsmx_error: Option<String>,
}

impl Default for Meta {
    fn default() -> Meta {
        Meta {
            head: EMPTY,
            body: Vec::new(),
            control: Control::default(),
            request: false,
            push: false,
            pull: false,
            simple_app: false,
            app_id: EMPTY,
            timestamp: EMPTY,
            customer_id: 0,
            data_type: Vec::new(),
            priority: 0,
            rsmx_wire: None,
            rsmx_error: None,
        }
    }
}

impl Meta {
    /// The frame's bytes, field for field as ps-lite writes them.
    pub fn encode(&self) -> Vec<u8> {
        let c = &self.control;
        let control = (c.cmd != Command::Empty).then(|| PbControl {
            cmd: Some(c.cmd as i32),
            node: c.nodes.iter().map(PbNode::from).collect(),
            barrier_group: (c.cmd == Command::Barrier).then_some(c.barrier_group),
            msg_sig: (c.cmd == Command::Ack).then_some(c.msg_sig),
        });
        PbMeta {
            head: Some(self.head),
            body: (!self.body.is_empty()).then(|| self.body.clone()),
            control,
            request: Some(self.request),
            push: Some(self.push),
            simple_app: Some(self.simple_app),
            app_id: (self.app_id != EMPTY).then_some(self.app_id),
            timestamp: (self.timestamp != EMPTY).then_some(self.timestamp),
            data_type: self.data_type.iter().map(|d| *d as i32).collect(),
            customer_id: Some(self.customer_id),
            data_size: None,
            pull: Some(self.pull),
            priority: Some(self.priority),
            rsmx_wire: self.rsmx_wire,
            rsmx_error: self.rsmx_error.clone(),
        }
        .encode_to_vec()
    }

    /// The meta in a received frame; fields it lacks take ps-lite's defaults, unknown
    /// fields are skipped.
    pub fn decode(frame: &[u8]) -> Result<Meta> {
        let pb = PbMeta::decode(frame).map_err(|e| malformed(e.to_string()))?;
        let control = match pb.control {
            None => Control::default(),
            Some(c) => Control {
                cmd: Command::from_wire(c.cmd.unwrap_or(0))?,
                nodes: c
                    .node
                    .into_iter()
                    .map(Node::try_from)
                    .collect::<Result<_>>()?,
                barrier_group: c.barrier_group.unwrap_or(0),
                msg_sig: c.msg_sig.unwrap_or(0),
            },
        };
        Ok(Meta {
            head: pb.head.unwrap_or(0),
            body: pb.body.unwrap_or_default(),
            control,
            request: pb.request.unwrap_or(false),
            push: pb.push.unwrap_or(false),
            pull: pb.pull.unwrap_or(false),
            simple_app: pb.simple_app.unwrap_or(false),
            app_id: pb.app_id.unwrap_or(EMPTY),
            timestamp: pb.timestamp.unwrap_or(EMPTY),
            customer_id: pb.customer_id.unwrap_or(0),
            data_type: pb.data_type.into_iter().map(DataType::from_wire).collect(),
            priority: pb.priority.unwrap_or(0),
            rsmx_wire: pb.rsmx_wire,
            rsmx_error: pb.rsmx_error,
        })
    }
}

impl Meta {
    /// The message as ps-lite's `PS_VERBOSE=2` lines show it (`Message::DebugString`):
    /// `sender => recver. Meta: ...`, then the size of each data frame. An unknown
    /// sender shows as `?`.
    pub fn debug_string(&self, sender: i32, recver: i32, data_sizes: &[usize]) -> String {
        let flag = |b: bool| u8::from(b);
        let mut s = if sender == EMPTY {
            "?".to_string()
        } else {
            sender.to_string()
        };
        s += &format!(" => {recver}. Meta: request={}", flag(self.request));
        if self.timestamp != EMPTY {
            s += &format!(", timestamp={}", self.timestamp);
        }
        let c = &self.control;
        if c.cmd == Command::Empty {
            s += &format!(
                ", app_id={}, customer_id={}, simple_app={}, push={}",
                self.app_id,
                self.customer_id,
                flag(self.simple_app),
                flag(self.push)
            );
        } else {
            s += &format!(", control={{ cmd={}", c.cmd.name());
            if !c.nodes.is_empty() {
                s += ", node={";
                for n in &c.nodes {
                    s += " ";
                    s += &n.debug_string();
                }
                s += " }";
            }
            match c.cmd {
                Command::Barrier => s += &format!(", barrier_group={}", c.barrier_group),
                Command::Ack => s += &format!(", msg_sig={}", c.msg_sig),
                _ => {}
            }
            s += " }";
        }
        if self.head != EMPTY {
            s += &format!(", head={}", self.head);
        }
        if !self.body.is_empty() {
            s += &format!(", body={}", String::from_utf8_lossy(&self.body));
        }
        if !self.data_type.is_empty() {
            s += ", data_type={";
            for d in &self.data_type {
                s += " ";
                s += d.name();
            }
            s += " }";
        }
        if !data_sizes.is_empty() {
            s += " Body:";
            for n in data_sizes {
                s += &format!(" data_size={n}");
            }
        }
        s
    }
}

fn malformed(what: String) -> Error {
    Error::Value(format!("malformed ps-lite meta frame: {what}"))
}

impl From<&Node> for PbNode {
    fn from(n: &Node) -> PbNode {
        PbNode {
            role: Some(n.role as i32),
            id: Some(n.id),
            hostname: Some(n.hostname.clone()),
            port: Some(n.port),
            is_recovery: Some(n.is_recovery),
            customer_id: Some(n.customer_id),
            rsmx_ipc: n.rsmx_ipc.clone(),
        }
    }
}

impl TryFrom<PbNode> for Node {
    type Error = Error;

    fn try_from(n: PbNode) -> Result<Node> {
        Ok(Node {
            role: Role::from_wire(n.role.unwrap_or(0))?,
            id: n.id.unwrap_or(EMPTY),
            hostname: n.hostname.unwrap_or_default(),
            port: n.port.unwrap_or(0),
            is_recovery: n.is_recovery.unwrap_or(false),
            customer_id: n.customer_id.unwrap_or(0),
            rsmx_ipc: n.rsmx_ipc,
        })
    }
}

/// `PBMeta` of ps-lite's `meta.proto`.
#[derive(Clone, PartialEq, Message)]
struct PbMeta {
    #[prost(int32, optional, tag = "1")]
    head: Option<i32>,
    #[prost(bytes = "vec", optional, tag = "2")]
    body: Option<Vec<u8>>,
    #[prost(message, optional, tag = "3")]
    control: Option<PbControl>,
    #[prost(bool, optional, tag = "4")]
    request: Option<bool>,
    #[prost(bool, optional, tag = "5")]
    push: Option<bool>,
    #[prost(bool, optional, tag = "6")]
    simple_app: Option<bool>,
    #[prost(int32, optional, tag = "7")]
    app_id: Option<i32>,
    #[prost(int32, optional, tag = "8")]
    timestamp: Option<i32>,
    #[prost(int32, repeated, packed = "true", tag = "9")]
    data_type: Vec<i32>,
    #[prost(int32, optional, tag = "10")]
    customer_id: Option<i32>,
    #[prost(int32, optional, tag = "11")]
    data_size: Option<i32>,
    #[prost(bool, optional, tag = "12")]
    pull: Option<bool>,
    #[prost(int32, optional, tag = "13")]
    priority: Option<i32>,
    #[prost(uint32, optional, tag = "100")]
    rsmx_wire: Option<u32>,
    #[prost(string, optional, tag = "101")]
    rsmx_error: Option<String>,
}

/// `PBControl`.
#[derive(Clone, PartialEq, Message)]
struct PbControl {
    #[prost(int32, optional, tag = "1")]
    cmd: Option<i32>,
    #[prost(message, repeated, tag = "2")]
    node: Vec<PbNode>,
    #[prost(int32, optional, tag = "3")]
    barrier_group: Option<i32>,
    #[prost(uint64, optional, tag = "4")]
    msg_sig: Option<u64>,
}

/// `PBNode`.
#[derive(Clone, PartialEq, Message)]
struct PbNode {
    #[prost(int32, optional, tag = "1")]
    role: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    id: Option<i32>,
    #[prost(string, optional, tag = "3")]
    hostname: Option<String>,
    #[prost(int32, optional, tag = "4")]
    port: Option<i32>,
    #[prost(bool, optional, tag = "5")]
    is_recovery: Option<bool>,
    #[prost(int32, optional, tag = "10")]
    customer_id: Option<i32>,
    #[prost(string, optional, tag = "100")]
    rsmx_ipc: Option<String>,
}
