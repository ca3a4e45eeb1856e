//! NaiveEngine: runs every op inside `push`, for debugging and as the reference order.

use super::{AsyncFn, Engine, EngineKind, FnProperty, OnComplete, RunContext, Var};
use crate::context::Context;
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::sync::mpsc;

/// The synchronous engine.
pub struct NaiveEngine {
    first_error: Mutex<Option<Error>>,
}

impl NaiveEngine {
    pub fn new() -> NaiveEngine {
        NaiveEngine {
            first_error: Mutex::new(None),
        }
    }
}

impl Default for NaiveEngine {
    fn default() -> Self {
        Self::new()
    }
}

/// The error an op inherits from the variables it reads, if any.
pub(crate) fn inherited_error(const_vars: &[Var]) -> Option<Error> {
    const_vars.iter().find_map(|v| v.peek_error())
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
        let result = match inherited_error(const_vars) {
            Some(e) if prop != FnProperty::DeleteVar => Err(e),
            _ => {
                let (tx, rx) = mpsc::channel::<Result<()>>();
                f(
                    RunContext { ctx },
                    OnComplete::new(move |r| {
                        let _ = tx.send(r);
                    }),
                );
                rx.recv().unwrap_or_else(|_| {
                    Err(Error::Runtime(format!(
                        "{name}: the op finished without reporting completion"
                    )))
                })
            }
        };
        if let Err(e) = result {
            for v in mutable_vars {
                v.set_error(&e);
            }
            let mut first = self.first_error.lock();
            if first.is_none() {
                *first = Some(e);
            }
        }
    }

    fn wait_for_var(&self, var: &Var) -> Result<()> {
        match var.take_error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn wait_for_all(&self) -> Result<()> {
        match self.first_error.lock().take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
