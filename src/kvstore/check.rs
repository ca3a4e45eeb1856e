//! The checks and error messages shared by the store's operations.

use super::Key;
use crate::error::{Error, Result};
use crate::ndarray::copy::check_matching;
use crate::ndarray::NDArray;

/// One value (or list of values) per key.
pub fn count(op: &str, keys: usize, values: usize) -> Result<()> {
    if keys != values {
        return Err(Error::Value(format!(
            "KVStore.{op}: {keys} key(s) but {values} value(s)"
        )));
    }
    Ok(())
}

/// One value (or list of values) and one priority per key.
pub fn lists(op: &str, keys: usize, values: usize, priorities: usize) -> Result<()> {
    count(op, keys, values)?;
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
    let context = || format!("KVStore.{op}: key {key}");
    check_matching(context, (what, a), ("the stored", stored))
}
