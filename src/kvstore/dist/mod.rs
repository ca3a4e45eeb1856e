//! The distributed KVStore's wire layer, on ps-lite's own protocol so that rsmx nodes
//! and MXNet 1.9.1's scheduler, servers and workers can share a cluster: the meta frame
//! ([`meta`]) and the key-value frames, sliced over the servers and joined back
//! ([`kv`]); the node ids, key ranges, command heads and array splits by which MXNet
//! lays its keys over the servers ([`layout`]); the scheduler's registrations and
//! barriers ([`registry`]); MXNet's 2-bit gradient compression ([`compress`]); the
//! node's ROUTER and DEALER sockets on libzmq ([`transport`]); and the node itself, set
//! up from the launcher's environment ([`config`]), registering, passing barriers and
//! noticing lost peers ([`van`]).

pub mod compress;
pub mod config;
pub mod flat;
pub mod kv;
pub mod layout;
pub mod meta;
pub mod registry;
pub mod server;
pub mod store;
pub mod transport;
pub mod van;
pub mod worker;

#[cfg(test)]
mod tests;
