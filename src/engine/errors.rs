//! Op errors as MXNet keeps them: one shared cell per failure, held by the variables the
//! failure reached and by the engine's list, so that raising it anywhere (a wait on one
//! of those variables, or `wait_for_all`) clears it everywhere: an error is raised once.

use crate::error::Error;
use parking_lot::Mutex;
use std::sync::Arc;

/// The error of one failed op, until someone raises it.
pub(crate) struct ErrorCell(Mutex<Option<Error>>);

/// A shared reference to an error cell.
pub(crate) type ErrorRef = Arc<ErrorCell>;

impl ErrorCell {
    pub(crate) fn new(e: Error) -> ErrorRef {
        Arc::new(ErrorCell(Mutex::new(Some(e))))
    }

    /// True until the error is raised.
    pub(crate) fn is_set(&self) -> bool {
        self.0.lock().is_some()
    }

    pub(crate) fn peek(&self) -> Option<Error> {
        self.0.lock().clone()
    }

    /// Raises the error: returns it and clears it for everyone who holds the cell.
    pub(crate) fn take(&self) -> Option<Error> {
        self.0.lock().take()
    }
}

/// The errors an engine has seen since the last `wait_for_all`.
#[derive(Default)]
pub(crate) struct ErrorList(Mutex<Vec<ErrorRef>>);

impl ErrorList {
    /// Adds a cell unless it is already listed.
    pub(crate) fn add(&self, cell: &ErrorRef) {
        let mut list = self.0.lock();
        if !list.iter().any(|c| Arc::ptr_eq(c, cell)) {
            list.push(cell.clone());
        }
    }

    /// The first error not yet raised, if any; clears every listed error and the list.
    pub(crate) fn take_first(&self) -> Option<Error> {
        let list = std::mem::take(&mut *self.0.lock());
        let mut first = None;
        for cell in list {
            let e = cell.take();
            if first.is_none() {
                first = e;
            }
        }
        first
    }
}
