//! The KVStore: values kept per key; pushes from several devices are summed and applied
//! by an updater, pulls broadcast the stored value to every device.

mod comm;
mod store;
#[cfg(test)]
mod tests;

pub use store::{KVStore, StoreKind, StoreUpdater};

use std::fmt;

/// A key of the store: MXNet accepts integers or strings (never both in one store call).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    /// An integer key (a parameter index).
    Int(i64),
    /// A string key (a parameter name).
    Str(String),
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Int(i) => write!(f, "{i}"),
            Key::Str(s) => write!(f, "{s}"),
        }
    }
}
