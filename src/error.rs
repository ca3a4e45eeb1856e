//! The one error type of the core, with the kind that selects the Python exception class.

use thiserror::Error;

/// Every failure the core reports. The variant picks the Python exception class
/// (`MXNetError` or one of its subclasses in `rsmx.base`).
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum Error {
    /// A generic failure (maps to `MXNetError`).
    #[error("{0}")]
    Runtime(String),
    /// A bad value: wrong shape, malformed attribute, corrupt file (maps to `MXNetValueError`).
    #[error("{0}")]
    Value(String),
    /// A wrong type: unsupported dtype, wrong argument kind (maps to `MXNetTypeError`).
    #[error("{0}")]
    Type(String),
    /// An index out of range (maps to `MXNetIndexError`).
    #[error("{0}")]
    Index(String),
    /// A feature that is not available, such as a GPU without CUDA (maps to `MXNetNotImplementedError`).
    #[error("{0}")]
    NotImplemented(String),
    /// Allocation failure.
    #[error("{0}")]
    OutOfMemory(String),
}

impl Error {
    /// The message without the kind.
    pub fn message(&self) -> &str {
        match self {
            Error::Runtime(m)
            | Error::Value(m)
            | Error::Type(m)
            | Error::Index(m)
            | Error::NotImplemented(m)
            | Error::OutOfMemory(m) => m,
        }
    }

    /// The same kind of error with `prefix` put in front of the message.
    pub fn with_prefix(&self, prefix: &str) -> Error {
        let msg = format!("{prefix}{}", self.message());
        match self {
            Error::Runtime(_) => Error::Runtime(msg),
            Error::Value(_) => Error::Value(msg),
            Error::Type(_) => Error::Type(msg),
            Error::Index(_) => Error::Index(msg),
            Error::NotImplemented(_) => Error::NotImplemented(msg),
            Error::OutOfMemory(_) => Error::OutOfMemory(msg),
        }
    }
}

/// Result with the core's error.
pub type Result<T> = std::result::Result<T, Error>;

/// `Err(Error::Value(format!(...)))`.
#[macro_export]
macro_rules! value_err {
    ($($arg:tt)*) => { Err($crate::error::Error::Value(format!($($arg)*))) };
}

/// `Err(Error::Type(format!(...)))`.
#[macro_export]
macro_rules! type_err {
    ($($arg:tt)*) => { Err($crate::error::Error::Type(format!($($arg)*))) };
}

/// `Err(Error::Runtime(format!(...)))`.
#[macro_export]
macro_rules! runtime_err {
    ($($arg:tt)*) => { Err($crate::error::Error::Runtime(format!($($arg)*))) };
}
