//! The executor: a symbol bound to arrays, with its gradient graph, shapes, types and
//! memory planned once at bind time, and forward/backward pushed to the engine.

mod bind;
mod debug;
mod fuse;
mod fuse_backward;
mod pace;
pub mod step;

use crate::error::{Error, Result};
use crate::graph::plan::MemoryPlan;
use crate::graph::IndexedGraph;
use crate::ndarray::NDArray;
use crate::op::OpReq;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use step::{OpStep, Step};

pub use bind::{bind, BindArgs};

/// Consecutive op steps on one context are run as one engine op when there are at most
/// this many of them and each output is small (MXNet's bulk execution).
const BULK_MAX_OPS: usize = 15;
/// Outputs of at most this many elements count as small for bulking.
const BULK_MAX_ELEMS: usize = 1 << 16;

/// A bound symbol.
pub struct Executor {
    graph: IndexedGraph,
    plan: MemoryPlan,
    /// Storage blocks of the memory plan (byte arrays), shared with `shared_exec` users.
    pub blocks: Vec<NDArray>,
    steps: Vec<Step>,
    forward_steps: usize,
    /// Runs of step indices pushed as one engine op, forward and backward separately.
    groups: Vec<std::ops::Range<usize>>,
    forward_groups: usize,
    /// Argument arrays, in `list_arguments` order.
    pub args: Vec<NDArray>,
    /// Gradient arrays, one per argument (`None` where the request is `null`).
    pub grads: Vec<Option<NDArray>>,
    /// Gradient requests, one per argument.
    pub grad_reqs: Vec<OpReq>,
    /// Auxiliary state arrays.
    pub aux: Vec<NDArray>,
    /// Output arrays.
    pub outputs: Vec<NDArray>,
    /// Names of the outputs.
    pub output_names: Vec<String>,
    /// Head gradient arrays, one per output (`None` for outputs whose gradient is not read).
    head_grads: Vec<Option<NDArray>>,
    /// Gradients with no path to an output, zeroed by `backward`.
    zero_grads: Vec<NDArray>,
    forward_done: AtomicBool,
    pacer: pace::Pacer,
}

impl Executor {
    /// Runs the forward pass.
    pub fn forward(&self, is_train: bool) -> Result<()> {
        let marker = self.pacer.wait_turn();
        for r in &self.groups[..self.forward_groups] {
            self.push_range(r.clone(), is_train);
        }
        if let Some(first) = self.outputs.first() {
            self.pacer.mark(marker, &self.outputs, first.context());
        }
        self.forward_done.store(true, Ordering::Release);
        Ok(())
    }

    /// Runs the backward pass with the given head gradients (one per output; `None` is
    /// allowed for outputs whose gradient the graph does not read, such as losses).
    pub fn backward(&self, out_grads: &[Option<NDArray>], is_train: bool) -> Result<()> {
        if !self.forward_done.swap(true, Ordering::AcqRel) {
            // As in MXNet, a backward pass may run without a forward one (gradients that
            // read no forward values); what it reads of the forward pass is then zeros.
            for block in &self.blocks {
                crate::ndarray::copy::fill_zeros(block);
            }
        }
        if self.forward_steps == self.steps.len() && self.zero_grads.is_empty() {
            return Ok(());
        }
        for (k, slot) in self.head_grads.iter().enumerate() {
            let Some(dst) = slot else { continue };
            match out_grads.get(k).and_then(|g| g.as_ref()) {
                Some(g) => {
                    if g.shape() != dst.shape() {
                        return Err(Error::Value(format!(
                            "backward: head gradient {k} ({}) has shape {}, the output has \
                             shape {}",
                            self.output_names[k],
                            crate::shape::fmt_shape(g.shape()),
                            crate::shape::fmt_shape(dst.shape())
                        )));
                    }
                    crate::ndarray::copy_into(g, dst)?;
                }
                None => {
                    return Err(Error::Value(format!(
                        "backward: output {k} ({}) is not a loss output, so its head \
                         gradient is required",
                        self.output_names[k]
                    )))
                }
            }
        }
        for z in &self.zero_grads {
            crate::ndarray::copy::fill_zeros(z);
        }
        for r in &self.groups[self.forward_groups..] {
            self.push_range(r.clone(), is_train);
        }
        Ok(())
    }

    fn push_range(&self, r: std::ops::Range<usize>, is_train: bool) {
        if r.len() == 1 {
            self.steps[r.start].push(is_train);
            return;
        }
        let ops: Vec<Arc<OpStep>> = self.steps[r]
            .iter()
            .map(|s| match s {
                Step::Op(o) => o.clone(),
                Step::Copy(_) => unreachable!("copies are never bulked"),
            })
            .collect();
        Step::push_bulk(&ops, is_train);
    }

    /// Every op step with its node name and output arrays (for the monitor), forward
    /// steps first; the flag is true for forward steps.
    pub fn op_steps(&self) -> Vec<(Arc<OpStep>, bool)> {
        self.steps
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Step::Op(o) => Some((o.clone(), i < self.forward_steps)),
                Step::Copy(_) => None,
            })
            .collect()
    }

    /// Bytes of internal memory the plan allocated.
    pub fn planned_bytes(&self) -> usize {
        self.plan.total_bytes()
    }
}

/// Groups step indices `range` into runs for bulk execution.
fn bulk_groups(steps: &[Step], range: std::ops::Range<usize>) -> Vec<std::ops::Range<usize>> {
    let mut groups = Vec::new();
    let mut start = range.start;
    let small = |s: &Step| match s {
        Step::Op(o) => !o.is_async() && o.outputs.iter().all(|a| a.size() <= BULK_MAX_ELEMS),
        Step::Copy(_) => false,
    };
    let ctx_of = |s: &Step| match s {
        Step::Op(o) => Some(o.ctx),
        Step::Copy(_) => None,
    };
    for i in range.clone() {
        let extend = i > start
            && small(&steps[i])
            && small(&steps[i - 1])
            && ctx_of(&steps[i]) == ctx_of(&steps[start])
            && i - start < BULK_MAX_OPS;
        if !extend && i > start {
            groups.push(start..i);
            start = i;
        }
    }
    if start < range.end {
        groups.push(start..range.end);
    }
    groups
}
