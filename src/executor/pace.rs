//! Bounds how far a caller may run ahead of the engine: each forward pass first waits for
//! the one `RUN_AHEAD` calls earlier, so the temporaries of earlier steps (such as a
//! training loop's weight updates) are back in the pool before new ones are needed.

use crate::context::Context;
use crate::engine::{self, PushSpec, Var};
use crate::ndarray::NDArray;
use smallvec::SmallVec;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Forward passes that may be queued on the engine at once.
const RUN_AHEAD: usize = 2;

/// One marker variable per queued forward pass.
pub struct Pacer {
    markers: Vec<Var>,
    calls: AtomicUsize,
}

impl Pacer {
    pub fn new() -> Pacer {
        Pacer {
            markers: (0..RUN_AHEAD)
                .map(|_| engine::get().new_variable())
                .collect(),
            calls: AtomicUsize::new(0),
        }
    }

    /// Waits until the forward pass `RUN_AHEAD` calls ago has finished, and returns this
    /// call's marker. An error of that pass stays on the arrays it reached, for the
    /// caller's next wait on them.
    pub fn wait_turn(&self) -> &Var {
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        let marker = &self.markers[n % RUN_AHEAD];
        let _ = engine::get().wait_for_var(marker);
        marker
    }

    /// Pushes the marker of a forward pass: done once `outputs` are written.
    pub fn mark(&self, marker: &Var, outputs: &[NDArray], ctx: Context) {
        let reads: SmallVec<[Var; 4]> = outputs.iter().map(|o| o.var().clone()).collect();
        engine::get().push_sync(
            Box::new(|_| Ok(())),
            PushSpec::new("_forward_done", ctx, &reads, std::slice::from_ref(marker)),
        );
    }
}
