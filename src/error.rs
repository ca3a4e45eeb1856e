//! The one error type of the core: a kind that selects the Python exception class, and
//! structured context (operator and node, CUDA call and code, transport peer).

use std::fmt;

/// Every failure the core reports. The plain variants carry a message; the structured
/// ones say where the failure happened and keep the underlying error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A generic failure (maps to `MXNetError`).
    Runtime(String),
    /// A bad value: wrong shape, malformed attribute, corrupt file (maps to `MXNetValueError`).
    Value(String),
    /// A wrong type: unsupported dtype, wrong argument kind (maps to `MXNetTypeError`).
    Type(String),
    /// An index out of range (maps to `MXNetIndexError`).
    Index(String),
    /// A feature that is not available, such as a GPU without CUDA (maps to `MXNetNotImplementedError`).
    NotImplemented(String),
    /// Allocation failure.
    OutOfMemory(String),
    /// A failure inside an operator, and the graph node it belongs to.
    Op(Box<OpError>),
    /// A CUDA driver, NVRTC or library call that returned an error code.
    Cuda(Box<CudaError>),
    /// A failure talking to another process of a distributed job.
    Transport(Box<TransportError>),
}

/// Which Python exception class an error maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// `MXNetError`.
    Runtime,
    /// `MXNetValueError`.
    Value,
    /// `MXNetTypeError`.
    Type,
    /// `MXNetIndexError`.
    Index,
    /// `MXNetNotImplementedError`.
    NotImplemented,
    /// `MXNetMemoryError`.
    OutOfMemory,
}

/// Where inside a computation an error happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpError {
    /// MXNet's name of the operator.
    pub op: String,
    /// The node's name, inside a bound graph.
    pub node: Option<String>,
    /// What went wrong.
    pub source: Error,
}

/// A failed CUDA call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaError {
    /// The function called (`cuLaunchKernel`, `nvrtcCompileProgram`, ...).
    pub call: String,
    /// The numeric result code.
    pub code: i32,
    /// The code's name (`CUDA_ERROR_OUT_OF_MEMORY`) or the library's description.
    pub name: String,
}

/// A failure in the exchange with one peer (`scheduler`, `server 2`, an address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportError {
    /// The peer.
    pub peer: String,
    /// What went wrong.
    pub source: Error,
}

/// CUDA's out-of-memory result code.
const CUDA_ERROR_OUT_OF_MEMORY: i32 = 2;

impl Error {
    /// The exception class the error maps to.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Runtime(_) => ErrorKind::Runtime,
            Error::Value(_) => ErrorKind::Value,
            Error::Type(_) => ErrorKind::Type,
            Error::Index(_) => ErrorKind::Index,
            Error::NotImplemented(_) => ErrorKind::NotImplemented,
            Error::OutOfMemory(_) => ErrorKind::OutOfMemory,
            Error::Op(e) => e.source.kind(),
            Error::Cuda(e) if e.code == CUDA_ERROR_OUT_OF_MEMORY => ErrorKind::OutOfMemory,
            Error::Cuda(_) => ErrorKind::Runtime,
            Error::Transport(e) => e.source.kind(),
        }
    }

    /// The whole message, context included.
    pub fn message(&self) -> String {
        self.to_string()
    }

    /// An error of `kind` with `msg`.
    pub fn of_kind(kind: ErrorKind, msg: String) -> Error {
        match kind {
            ErrorKind::Runtime => Error::Runtime(msg),
            ErrorKind::Value => Error::Value(msg),
            ErrorKind::Type => Error::Type(msg),
            ErrorKind::Index => Error::Index(msg),
            ErrorKind::NotImplemented => Error::NotImplemented(msg),
            ErrorKind::OutOfMemory => Error::OutOfMemory(msg),
        }
    }

    /// The same kind of error with `prefix` put in front of the message (for context
    /// that has no field of its own, such as the file being loaded).
    pub fn with_prefix(&self, prefix: &str) -> Error {
        Error::of_kind(self.kind(), format!("{prefix}{self}"))
    }

    /// The error as raised inside operator `op`. An error already attributed to an
    /// operator keeps that attribution (the innermost operator is the one that failed).
    pub fn in_op(self, op: &str) -> Error {
        match self {
            Error::Op(_) => self,
            source => Error::Op(Box::new(OpError {
                op: op.to_string(),
                node: None,
                source,
            })),
        }
    }

    /// The error as raised by operator `op` at graph node `node`.
    pub fn at_node(self, op: &str, node: &str) -> Error {
        match self.in_op(op) {
            Error::Op(mut e) => {
                if e.node.is_none() {
                    e.node = Some(node.to_string());
                }
                Error::Op(e)
            }
            other => other,
        }
    }

    /// A failed CUDA call.
    pub fn cuda(call: &str, code: i32, name: &str) -> Error {
        Error::Cuda(Box::new(CudaError {
            call: call.to_string(),
            code,
            name: name.to_string(),
        }))
    }

    /// A failure in the exchange with `peer`.
    pub fn transport(peer: &str, source: Error) -> Error {
        Error::Transport(Box::new(TransportError {
            peer: peer.to_string(),
            source,
        }))
    }

    /// The operator the error was raised in, if known.
    pub fn op(&self) -> Option<&OpError> {
        match self {
            Error::Op(e) => Some(e),
            Error::Transport(e) => e.source.op(),
            _ => None,
        }
    }

    /// The failed CUDA call, if this is one (possibly inside an operator).
    pub fn cuda_call(&self) -> Option<&CudaError> {
        match self {
            Error::Cuda(e) => Some(e),
            Error::Op(e) => e.source.cuda_call(),
            _ => None,
        }
    }

    /// The peer of a transport failure, if this is one.
    pub fn peer(&self) -> Option<&str> {
        match self {
            Error::Transport(e) => Some(&e.peer),
            Error::Op(e) => e.source.peer(),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Runtime(m)
            | Error::Value(m)
            | Error::Type(m)
            | Error::Index(m)
            | Error::NotImplemented(m)
            | Error::OutOfMemory(m) => f.write_str(m),
            Error::Op(e) => {
                let inner = e.source.to_string();
                // Operators write their own name at the head of their messages
                // ("dot: shape mismatch ..."); it is not repeated.
                let rest = inner
                    .strip_prefix(e.op.as_str())
                    .and_then(|r| r.strip_prefix(": "))
                    .unwrap_or(&inner);
                match &e.node {
                    Some(node) => write!(f, "{} (node '{node}'): {rest}", e.op),
                    None => write!(f, "{}: {rest}", e.op),
                }
            }
            Error::Cuda(e) => write!(f, "{} failed: {} (code {})", e.call, e.name, e.code),
            Error::Transport(e) => write!(f, "{}: {}", e.peer, e.source),
        }
    }
}

impl std::error::Error for Error {}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operator_and_node_are_fields_and_shown_once() {
        let e = Error::Value("dot: shape mismatch".into()).in_op("dot");
        assert_eq!(e.to_string(), "dot: shape mismatch");
        assert_eq!(e.kind(), ErrorKind::Value);
        let e = e.at_node("dot", "fc1");
        assert_eq!(e.to_string(), "dot (node 'fc1'): shape mismatch");
        let op = e.op().unwrap();
        assert_eq!((op.op.as_str(), op.node.as_deref()), ("dot", Some("fc1")));
        let e = Error::Index("axis 3 out of range".into()).at_node("sum", "s");
        assert_eq!(e.to_string(), "sum (node 's'): axis 3 out of range");
        assert_eq!(e.kind(), ErrorKind::Index);
    }

    #[test]
    fn innermost_operator_wins() {
        let e = Error::Runtime("boom".into()).in_op("exp").in_op("_bulk");
        assert_eq!(e.op().unwrap().op, "exp");
    }

    #[test]
    fn cuda_and_transport_errors() {
        let e = Error::cuda("cuMemAlloc", 2, "CUDA_ERROR_OUT_OF_MEMORY").in_op("dot");
        assert_eq!(e.kind(), ErrorKind::OutOfMemory);
        assert_eq!(e.cuda_call().unwrap().call, "cuMemAlloc");
        assert_eq!(
            e.to_string(),
            "dot: cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (code 2)"
        );
        let e = Error::transport("server 1", Error::Runtime("timed out".into()));
        assert_eq!(e.peer(), Some("server 1"));
        assert_eq!(e.kind(), ErrorKind::Runtime);
        assert_eq!(e.to_string(), "server 1: timed out");
    }
}
