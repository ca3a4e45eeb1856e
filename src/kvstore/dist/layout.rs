//! How ps-lite numbers nodes and splits the key space, and how MXNet 1.9.1 lays its keys
//! over the servers: node ids and ranks, group membership, each server's key range, the
//! heads of data requests (a Cantor pair of request kind and dtype) and of commands, and
//! which server holds which part of an array.

use super::meta::{Role, EMPTY};
use crate::dtype::DType;
use crate::error::{Error, Result};
use std::ops::Range;

/// The scheduler's id, and the group of it alone.
pub const SCHEDULER: i32 = 1;
/// The group of every server.
pub const SERVER_GROUP: i32 = 2;
/// The group of every worker.
pub const WORKER_GROUP: i32 = 4;
/// Everyone: the scheduler, the servers and the workers.
pub const ALL: i32 = SCHEDULER | SERVER_GROUP | WORKER_GROUP;

/// MXNet's default `MXNET_KVSTORE_BIGARRAY_BOUND`: arrays of at least this many elements
/// are split over every server.
pub const DEFAULT_BIGARRAY_BOUND: usize = 1_000_000;

/// The id of the server of `rank`.
pub fn server_id(rank: i32) -> i32 {
    8 + 2 * rank
}

/// The id of the worker of `rank`.
pub fn worker_id(rank: i32) -> i32 {
    9 + 2 * rank
}

/// The rank of the server or worker with `id`.
pub fn rank_of(id: i32) -> i32 {
    ((id - 8) / 2).max(0)
}

/// The role of the node with `id` (the scheduler is 1; servers are even from 8, workers
/// odd from 9); `None` for a group id or an unset one.
pub fn role_of(id: i32) -> Option<Role> {
    match id {
        SCHEDULER => Some(Role::Scheduler),
        EMPTY => None,
        i if i >= 8 && i % 2 == 0 => Some(Role::Server),
        i if i >= 9 => Some(Role::Worker),
        _ => None,
    }
}

/// The ids of the nodes in `group`: a sum of `SCHEDULER`, `SERVER_GROUP` and
/// `WORKER_GROUP`, or a single node's id. In ps-lite's order (workers, then servers, each
/// by rank, then the scheduler), which is the order its scheduler answers them in.
pub fn group_members(group: i32, num_servers: i32, num_workers: i32) -> Vec<i32> {
    if !(1..=ALL).contains(&group) {
        return vec![group];
    }
    let mut ids = Vec::new();
    if group & WORKER_GROUP != 0 {
        ids.extend((0..num_workers).map(worker_id));
    }
    if group & SERVER_GROUP != 0 {
        ids.extend((0..num_servers).map(server_id));
    }
    if group & SCHEDULER != 0 {
        ids.push(SCHEDULER);
    }
    ids
}

/// The barrier group of a node of `role`.
pub fn group_of(role: Role) -> i32 {
    match role {
        Role::Scheduler => SCHEDULER,
        Role::Server => SERVER_GROUP,
        Role::Worker => WORKER_GROUP,
    }
}

/// The key range of each of `num_servers` servers, in rank order: server i owns
/// `[⌊(2^64−1)/S⌋·i, ⌊(2^64−1)/S⌋·(i+1))`.
pub fn server_key_ranges(num_servers: usize) -> Vec<Range<u64>> {
    let step = u64::MAX / num_servers.max(1) as u64;
    (0..num_servers as u64)
        .map(|i| step * i..step * (i + 1))
        .collect()
}

/// A SimpleApp command's head (MXNet's `CommandType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerCommand {
    Controller = 0,
    SetMultiPrecision = 1,
    StopServer = 2,
    SyncMode = 3,
    SetGradientCompression = 4,
    SetProfilerParams = 5,
}

impl ServerCommand {
    /// The command of a SimpleApp head.
    pub fn from_head(head: i32) -> Result<ServerCommand> {
        use ServerCommand::*;
        [
            Controller,
            SetMultiPrecision,
            StopServer,
            SyncMode,
            SetGradientCompression,
            SetProfilerParams,
        ]
        .get(usize::try_from(head).unwrap_or(usize::MAX))
        .copied()
        .ok_or_else(|| Error::Value(format!("unknown KVStore server command {head}")))
    }
}

/// The kind of a data request (MXNet's `RequestType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    Dense = 0,
    RowSparse = 1,
    Compressed = 2,
}

/// The head of a data request: the Cantor pair `(m+d)(m+d+1)/2 + d` of the request kind
/// `m` and the dtype flag `d`. The dtype travels only here.
pub fn data_head(kind: RequestKind, dtype: DType) -> i32 {
    let (m, d) = (kind as i32, dtype.flag());
    (m + d) * (m + d + 1) / 2 + d
}

/// The request kind and dtype of a data request's head.
pub fn parse_data_head(head: i32) -> Result<(RequestKind, DType)> {
    let bad = || Error::Value(format!("unknown KVStore data request head {head}"));
    if head < 0 {
        return Err(bad());
    }
    // The largest w with w(w+1)/2 <= head.
    let mut w = (((8.0 * head as f64 + 1.0).sqrt() - 1.0) / 2.0) as i32;
    while w * (w + 1) / 2 > head {
        w -= 1;
    }
    while (w + 1) * (w + 2) / 2 <= head {
        w += 1;
    }
    let d = head - w * (w + 1) / 2;
    let kind = match w - d {
        0 => RequestKind::Dense,
        1 => RequestKind::RowSparse,
        2 => RequestKind::Compressed,
        _ => return Err(bad()),
    };
    let dtype = DType::from_flag(d).map_err(|_| bad())?;
    if dtype == DType::Bool {
        return Err(bad());
    }
    Ok((kind, dtype))
}

/// One server's part of a dense array: the ps key and the part's size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    pub server: usize,
    pub ps_key: u64,
    pub bytes: usize,
}

/// The server of a key below the big-array bound: `(key·9973) mod S`. MXNet multiplies
/// in C `int`; keys that fit its range give the same server.
fn small_key_server(key: i32, num_servers: usize) -> usize {
    (i64::from(key) * 9973).rem_euclid(num_servers as i64) as usize
}

/// Where the `i`-th of `num_servers` shares of `total` begins: `round(total/S·i)` in
/// doubles, with C's `round` (halves away from zero).
fn split_point(total: usize, num_servers: usize, i: usize) -> usize {
    (total as f64 / num_servers as f64 * i as f64).round() as usize
}

/// Where MXNet puts the dense array `key` of `elements` elements of `elem_bytes` bytes:
/// below `bigarray_bound` elements, whole on server `(key·9973) mod S`; otherwise on
/// every server, part i holding `round(n/S·(i+1)) − round(n/S·i)` elements (C's
/// `round`, halves away from zero). The ps key is the server's range start plus `key`.
pub fn dense_parts(
    key: i32,
    elements: usize,
    elem_bytes: usize,
    num_servers: usize,
    bigarray_bound: usize,
) -> Vec<Part> {
    let ranges = server_key_ranges(num_servers);
    let ps_key = |server: usize| ranges[server].start + key as u64;
    if elements < bigarray_bound {
        let server = small_key_server(key, num_servers);
        return vec![Part {
            server,
            ps_key: ps_key(server),
            bytes: elements * elem_bytes,
        }];
    }
    let bound = |i: usize| split_point(elements, num_servers, i);
    (0..num_servers)
        .map(|i| Part {
            server: i,
            ps_key: ps_key(i),
            bytes: (bound(i + 1) - bound(i)) * elem_bytes,
        })
        .collect()
}

/// One server's share of a float32 key under 2-bit compression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompressedPart {
    pub server: usize,
    /// The data key.
    pub ps_key: u64,
    /// The size key a compressed push sends first: the server's range start plus
    /// `elements`.
    pub size_key: u64,
    /// Values of the key in this share.
    pub elements: usize,
    /// Bytes of their 2-bit codes: one float32 slot per 16 values.
    pub compressed_bytes: usize,
}

/// Where MXNet puts float32 key `key` of `elements` values once 2-bit compression is on
/// (every push, pull and init then follows it): below `bigarray_bound` values, as
/// [`dense_parts`]; otherwise the `c = ⌈n/16⌉` compressed slots are split as
/// `round(c/S·(i+1)) − round(c/S·i)`, each share holding 16 values per slot, and the last
/// server takes what remains of both.
pub fn compressed_parts(
    key: i32,
    elements: usize,
    num_servers: usize,
    bigarray_bound: usize,
) -> Vec<CompressedPart> {
    let ranges = server_key_ranges(num_servers);
    let slots = elements.div_ceil(16);
    let part = |server: usize, elements: usize, slots: usize| CompressedPart {
        server,
        ps_key: ranges[server].start + key as u64,
        size_key: ranges[server].start + elements as u64,
        elements,
        compressed_bytes: slots * 4,
    };
    if elements < bigarray_bound {
        return vec![part(small_key_server(key, num_servers), elements, slots)];
    }
    let bound = |i: usize| split_point(slots, num_servers, i);
    let (mut slots_so_far, mut elements_so_far) = (0, 0);
    (0..num_servers)
        .map(|i| {
            let (s, e) = if i + 1 == num_servers {
                (slots - slots_so_far, elements - elements_so_far)
            } else {
                let s = bound(i + 1) - bound(i);
                (s, s * 16)
            };
            slots_so_far += s;
            elements_so_far += e;
            part(i, e, s)
        })
        .collect()
}
