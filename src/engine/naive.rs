//! NaiveEngine: runs every op inside `push`, for debugging and as the reference order.

use super::core::{DependencyEngine, Placement};
use super::opr::Runner;
use super::shared::EngineShared;
use super::{AsyncFn, EngineKind, FnProperty, OnComplete};
use crate::context::Context;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Arc};

/// The synchronous engine.
pub type NaiveEngine = DependencyEngine<Inline>;

/// The NaiveEngine's placement: an op runs on the pushing thread as soon as it is
/// pushed (nothing earlier is ever still pending), async ones to their completion.
pub struct Inline;

impl Placement for Inline {
    const KIND: EngineKind = EngineKind::Naive;

    fn runner(&self, engine: &Arc<EngineShared>, _: Context, _: FnProperty) -> Runner {
        Runner::Inline(engine.clone())
    }

    /// Waits, inside the body, for its completion, so that `push` returns only when the
    /// op is done. A completion reported before a panic keeps its outcome (the panic is
    /// still reported); without one, the panic fails the op.
    fn async_body(f: AsyncFn) -> AsyncFn {
        Box::new(move |rctx, done| {
            let (tx, rx) = mpsc::sync_channel(1);
            let inner = OnComplete::new(move |r| {
                let _ = tx.send(r);
            });
            match catch_unwind(AssertUnwindSafe(move || f(rctx, inner))) {
                Ok(()) => match rx.recv() {
                    Ok(r) => done.done(r),
                    // Dropping `done` fails the op as a forgotten completion.
                    Err(_) => drop(done),
                },
                Err(p) => {
                    if let Ok(r) = rx.try_recv() {
                        done.done(r);
                    }
                    resume_unwind(p)
                }
            }
        })
    }
}

impl NaiveEngine {
    /// A new synchronous engine.
    pub fn new() -> NaiveEngine {
        DependencyEngine::build(|_| Inline)
    }
}

impl Default for NaiveEngine {
    fn default() -> Self {
        Self::new()
    }
}
