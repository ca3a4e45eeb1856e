//! The checks and error messages shared by the store's operations.

use super::Key;
use crate::error::{Error, Result};
use crate::ndarray::NDArray;
use crate::shape::fmt_shape;

/// One value (or list of values) per key.
pub fn count(op: &str, keys: usize, values: usize) -> Result<()> {
    if keys != values {
        return Err(Error::Value(format!(
            "KVStore.{op}: {keys} key(s) but {values} value(s)"
        )));
    }
    Ok(())
}

/// One priority per key.
pub fn priorities(op: &str, keys: usize, priorities: usize) -> Result<()> {
    if keys != priorities {
        return Err(Error::Value(format!(
            "KVStore.{op}: {keys} key(s) but {priorities} priorities"
        )));
    }
    Ok(())
}

/// The error for a key used before `init`.
pub fn uninit(op: &str, key: &Key) -> Error {
    Error::Value(format!(
        "KVStore.{op}: key {key} has not been initialized; call init first"
    ))
}

/// Checks that `a` (a pushed value or a pull target) matches the stored value.
pub fn like(op: &str, key: &Key, what: &str, a: &NDArray, stored: &NDArray) -> Result<()> {
    if a.shape() != stored.shape() {
        return Err(Error::Value(format!(
            "KVStore.{op}: key {key}: {what} shape {} does not match the stored shape {}",
            fmt_shape(a.shape()),
            fmt_shape(stored.shape())
        )));
    }
    if a.dtype() != stored.dtype() {
        return Err(Error::Type(format!(
            "KVStore.{op}: key {key}: {what} dtype {} does not match the stored dtype {}",
            a.dtype(),
            stored.dtype()
        )));
    }
    Ok(())
}
