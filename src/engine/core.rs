//! The push path every engine type shares: an op block is built, queued on its variables
//! and, once they let it through, handed to the runner its engine's placement picks.

use super::opr::{Body, OprBlock, Runner};
use super::shared::EngineShared;
use super::{AsyncFn, Engine, EngineKind, FnProperty, PushSpec, SyncFn, Var};
use crate::context::Context;
use crate::error::Result;
use std::sync::Arc;

/// What tells the engine types apart: where a ready op runs.
pub(crate) trait Placement: Send + Sync {
    /// The engine type this placement makes.
    const KIND: EngineKind;

    /// The runner for an op of kind `prop` pushed for `ctx`.
    fn runner(&self, engine: &Arc<EngineShared>, ctx: Context, prop: FnProperty) -> Runner;

    /// Adapts an async body to how this placement runs ops (by default, unchanged).
    fn async_body(f: AsyncFn) -> AsyncFn {
        f
    }
}

/// A dependency engine: the shared push path, waits and error list, with `P` deciding
/// where ready ops run. `NaiveEngine`, `ThreadedEngine` and `ThreadedEnginePerDevice` are
/// this type with their placements.
pub struct DependencyEngine<P> {
    /// Dropped first: a placement with threads shuts them down when it goes.
    place: P,
    shared: Arc<EngineShared>,
}

impl<P> DependencyEngine<P> {
    /// An engine whose placement is built with the engine's shared state.
    pub(crate) fn build(place: impl FnOnce(&Arc<EngineShared>) -> P) -> DependencyEngine<P> {
        let shared = EngineShared::new();
        DependencyEngine {
            place: place(&shared),
            shared,
        }
    }
}

/// The one push path: placement, op block, dependencies.
fn push<P: Placement>(engine: &DependencyEngine<P>, body: Body, spec: PushSpec<'_>) {
    let runner = engine.place.runner(&engine.shared, spec.ctx, spec.prop);
    OprBlock::push(runner, body, spec);
}

impl<P: Placement> Engine for DependencyEngine<P> {
    fn kind(&self) -> EngineKind {
        P::KIND
    }

    fn push_async(&self, f: AsyncFn, spec: PushSpec<'_>) {
        push(self, Body::Async(P::async_body(f)), spec);
    }

    fn push_sync(&self, f: SyncFn, spec: PushSpec<'_>) {
        push(self, Body::Sync(f), spec);
    }

    /// After the engine's wait, the host also waits for the GPU work the op enqueued.
    fn wait_for_var(&self, var: &Var) -> Result<()> {
        self.shared.wait_var(var)?;
        crate::cuda::sync::host_wait(var, false)
    }

    /// After the engine's wait, every GPU stream is synchronised (never the context).
    fn wait_for_all(&self) -> Result<()> {
        let r = self.shared.wait_all();
        let synced = crate::cuda::runtime::get().map_or(Ok(()), |rt| rt.synchronize_all());
        r.and(synced)
    }
}
