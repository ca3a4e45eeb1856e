//! Engine variables: the unit of dependency tracking, and where op errors are kept.

use crate::error::Error;
use parking_lot::Mutex;
use std::sync::Arc;

/// A handle to an engine variable. Clones refer to the same variable.
#[derive(Clone, Default)]
pub struct Var(pub(crate) Arc<VarInner>);

/// The shared state of a variable.
#[derive(Default)]
pub(crate) struct VarInner {
    /// The error of the last failed op that wrote this variable, until a wait returns it.
    pub(crate) error: Mutex<Option<Error>>,
}

impl Var {
    /// A new variable with no pending ops.
    pub fn new() -> Var {
        Var::default()
    }

    /// A stable identity for the variable, for dedup and ordering.
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// True if both handles name the same variable.
    pub fn same(&self, other: &Var) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The stored error, if any, without clearing it.
    pub fn peek_error(&self) -> Option<Error> {
        self.0.error.lock().clone()
    }

    pub(crate) fn set_error(&self, e: &Error) {
        *self.0.error.lock() = Some(e.clone());
    }

    pub(crate) fn take_error(&self) -> Option<Error> {
        self.0.error.lock().take()
    }
}

impl std::fmt::Debug for Var {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Var({:#x})", self.id())
    }
}
