//! The distributed KVStore on ps-lite's own protocol, so that rsmx nodes and MXNet
//! 1.9.1's scheduler, servers and workers can share a cluster.
//!
//! - The wire: the meta frame ([`meta`]); the key-value frames, sliced over the servers
//!   and joined back ([`kv`]); the node ids, key ranges, command heads and array splits
//!   by which MXNet lays its keys over the servers ([`layout`]); MXNet's 2-bit gradient
//!   compression ([`compress`]).
//! - A node: its settings from the launcher's environment ([`config`]), its ROUTER and
//!   DEALER sockets on libzmq ([`transport`]) and the frames they send without copies
//!   ([`frame`]), and the node itself, registering, passing
//!   barriers and noticing lost peers ([`van`]); the scheduler's bookkeeping
//!   ([`registry`]).
//! - A server: its values ([`flat`]) and rounds ([`store`]), served by [`server`], with
//!   optimizers run on arrays ([`updaters`]).
//! - A worker: its requests ([`worker`]), each key's requests kept in program order on the
//!   wire ([`order`]), and the KVStore interface over them ([`client`]).
//! - The process's own node: its worker, or the scheduler or server role ([`process`]).

pub mod client;
pub mod compress;
pub mod config;
pub mod flat;
pub mod frame;
pub mod kv;
pub mod layout;
pub mod meta;
pub mod order;
pub mod process;
pub mod registry;
pub mod server;
pub mod store;
pub mod transport;
pub mod updaters;
pub mod van;
pub mod worker;
