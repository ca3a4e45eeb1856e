//! NaiveEngine: runs every op inside `push`, for debugging and as the reference order.

use super::errors::{ErrorCell, ErrorList, ErrorRef};
use super::opr::{dedup_vars, inherited_error, panic_error};
use super::{AsyncFn, Engine, EngineKind, FnProperty, OnComplete, RunContext, SyncFn, Var};
use crate::context::Context;
use crate::error::{Error, Result};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;

/// The synchronous engine.
pub struct NaiveEngine {
    errors: ErrorList,
}

impl NaiveEngine {
    /// A new synchronous engine.
    pub fn new() -> NaiveEngine {
        NaiveEngine {
            errors: ErrorList::default(),
        }
    }

    /// Stores a failed op's error on the variables it writes and in the engine's list.
    fn record(&self, mutable_vars: &[Var], cell: ErrorRef) {
        for v in mutable_vars {
            v.set_error(&cell);
        }
        self.errors.add(&cell);
    }
}

impl NaiveEngine {
    /// Runs an op now unless a variable it reads carries an error. `body` returns the
    /// op's outcome and, separately, an error that does not fail the op (a panic after
    /// the op completed).
    fn run(
        &self,
        const_vars: &[Var],
        mutable_vars: &[Var],
        prop: FnProperty,
        body: impl FnOnce() -> (Result<()>, Option<Error>),
    ) {
        let (const_vars, mutable_vars) = dedup_vars(const_vars, mutable_vars);
        if prop != FnProperty::DeleteVar {
            if let Some(cell) = inherited_error(&const_vars) {
                drop(body);
                self.record(&mutable_vars, cell);
                return;
            }
        }
        let (result, extra) = body();
        if let Some(e) = extra {
            self.record(&[], ErrorCell::new(e));
        }
        if let Err(e) = result {
            self.record(&mutable_vars, ErrorCell::new(e));
        }
    }
}

impl Default for NaiveEngine {
    fn default() -> Self {
        Self::new()
    }
}

impl Engine for NaiveEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Naive
    }

    fn push_async(
        &self,
        f: AsyncFn,
        ctx: Context,
        const_vars: &[Var],
        mutable_vars: &[Var],
        prop: FnProperty,
        _priority: i32,
        name: &'static str,
    ) {
        self.run(const_vars, mutable_vars, prop, move || {
            let (tx, rx) = mpsc::channel::<Result<()>>();
            let done = OnComplete::new(move |r| {
                let _ = tx.send(r);
            });
            match catch_unwind(AssertUnwindSafe(move || f(RunContext { ctx }, done))) {
                // Completed before the panic: keep the outcome, report the panic.
                Err(p) => match rx.try_recv() {
                    Ok(r) => (r, Some(panic_error(name, p))),
                    Err(_) => (Err(panic_error(name, p)), None),
                },
                Ok(()) => {
                    let r = rx.recv().unwrap_or_else(|_| {
                        Err(Error::Runtime(format!(
                            "{name}: the op finished without reporting completion"
                        )))
                    });
                    (r, None)
                }
            }
        })
    }

    fn push_sync(
        &self,
        f: SyncFn,
        ctx: Context,
        const_vars: &[Var],
        mutable_vars: &[Var],
        prop: FnProperty,
        _priority: i32,
        name: &'static str,
    ) {
        self.run(const_vars, mutable_vars, prop, move || {
            let r = catch_unwind(AssertUnwindSafe(move || f(RunContext { ctx })))
                .unwrap_or_else(|p| Err(panic_error(name, p)));
            (r, None)
        })
    }

    fn wait_for_var(&self, var: &Var) -> Result<()> {
        var.take_error().map_or(Ok(()), Err)
    }

    fn wait_for_all(&self) -> Result<()> {
        self.errors.take_first().map_or(Ok(()), Err)
    }
}
