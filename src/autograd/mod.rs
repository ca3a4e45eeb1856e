//! Imperative automatic differentiation (`mx.autograd`): while recording, each op leaves
//! a node on its outputs holding the arrays its backward operator reads; `backward`
//! walks those nodes from the heads and runs the backward operators on the saved arrays.
//! No forward op runs again, so a gradient sees the very dropout mask that was drawn.

mod backward;
mod compose;
mod composite;
mod state;
#[cfg(test)]
mod tests;

pub use backward::{backward, Head, Value};
pub use state::{is_recording, is_training, set_recording, set_training};

use crate::context::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ndarray::NDArray;
use crate::op::{Grad, OpRef};
use crate::shape::Shape;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// How a variable's gradient is written (MXNet's `grad_req`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GradReq {
    /// No gradient.
    Null,
    /// Each backward pass overwrites the gradient.
    Write,
    /// Each backward pass adds to the gradient.
    Add,
}

impl GradReq {
    /// Parses MXNet's names (`inplace` writes, as in MXNet).
    pub fn parse(s: &str) -> Result<GradReq> {
        match s {
            "null" => Ok(GradReq::Null),
            "write" | "inplace" => Ok(GradReq::Write),
            "add" => Ok(GradReq::Add),
            _ => Err(Error::Value(format!(
                "grad_req must be 'write', 'add', 'inplace' or 'null', got '{s}'"
            ))),
        }
    }
}

/// An array's place in the recorded graph: output `index` of `node`.
#[derive(Clone)]
pub struct Entry {
    /// The node that produced the array (or the variable it is).
    pub node: Arc<Node>,
    /// Which of the node's outputs the array is.
    pub index: usize,
}

impl Entry {
    /// True while the entry's node can still be differentiated: a variable, or an op
    /// whose saved arrays were not released by a backward pass.
    pub fn is_live(&self) -> bool {
        match &self.node.kind {
            Kind::Variable { .. } => true,
            Kind::Op(rec) => rec.lock().is_some(),
        }
    }

    /// The gradient buffer of a variable (`x.grad`); `None` for other entries.
    pub fn grad(&self) -> Option<NDArray> {
        match &self.node.kind {
            Kind::Variable { grad, .. } => Some(grad.clone()),
            Kind::Op(_) => None,
        }
    }

    /// True once a backward pass has written a variable's gradient, until reset
    /// (MXNet's `_fresh_grad`, which an optimizer step clears).
    pub fn fresh_grad(&self) -> bool {
        match &self.node.kind {
            Kind::Variable { fresh, .. } => fresh.load(Ordering::Relaxed),
            Kind::Op(_) => false,
        }
    }

    /// Sets a variable's fresh-gradient flag; nothing for other entries.
    pub fn set_fresh_grad(&self, on: bool) {
        if let Kind::Variable { fresh, .. } = &self.node.kind {
            fresh.store(on, Ordering::Relaxed);
        }
    }
}

/// A node of the recorded graph.
pub struct Node {
    kind: Kind,
}

enum Kind {
    /// An array marked for gradients, with its gradient buffer.
    Variable {
        grad: NDArray,
        req: GradReq,
        fresh: AtomicBool,
    },
    /// A recorded op; `None` once a backward pass released it.
    Op(Mutex<Option<Recorded>>),
}

impl Drop for Node {
    /// Tears a long chain of recorded ops down in a loop: dropping each node's inputs in
    /// turn would recurse once per op and overflow the stack on long graphs.
    fn drop(&mut self) {
        let mut stack = take_inputs(&mut self.kind);
        while let Some(n) = stack.pop() {
            if let Ok(mut last) = Arc::try_unwrap(n) {
                stack.extend(take_inputs(&mut last.kind));
            }
        }
    }
}

/// The input nodes of a recorded op, taken out of it.
fn take_inputs(kind: &mut Kind) -> Vec<Arc<Node>> {
    match kind {
        Kind::Op(rec) => rec
            .get_mut()
            .as_mut()
            .map(|r| r.inputs.drain(..).flatten().map(|e| e.node).collect())
            .unwrap_or_default(),
        Kind::Variable { .. } => Vec::new(),
    }
}

/// A computation that gives input gradients from output gradients in place of a
/// backward operator (`autograd.Function`).
pub trait CustomBackward: Send + Sync {
    /// The gradient of each input (`None`: zero) from those of every output.
    fn backward(&self, ograds: Vec<NDArray>, is_train: bool) -> Result<Vec<Option<NDArray>>>;
}

/// What computes a recorded node's input gradients.
enum Backward {
    Op { forward: OpRef, grad: Grad },
    Custom(Arc<dyn CustomBackward>),
}

/// A shape and dtype, for the zeros of a gradient that nothing reached.
type Meta = (Shape, DType);

fn meta(a: &NDArray) -> Meta {
    (Shape::from_slice(a.shape()), a.dtype())
}

/// A recorded op: what its backward computation reads.
struct Recorded {
    backward: Backward,
    /// The entry of each forward input (`None`: not in a graph).
    inputs: Vec<Option<Entry>>,
    in_meta: Vec<Meta>,
    out_meta: Vec<Meta>,
    /// The forward inputs and outputs the backward operator reads; the others are not kept.
    saved_inputs: Vec<Option<NDArray>>,
    saved_outputs: Vec<Option<NDArray>>,
    ctx: Context,
}

/// Marks `array` as a variable whose gradients go to `grad`; the entry it now has.
pub fn mark_variable(array: &NDArray, grad: NDArray, req: GradReq) -> Result<Entry> {
    if grad.shape() != array.shape() || grad.dtype() != array.dtype() {
        return Err(Error::Value(format!(
            "mark_variables: the gradient buffer ({} {}) must have the shape and dtype of \
             its variable ({} {})",
            crate::shape::fmt_shape(grad.shape()),
            grad.dtype(),
            crate::shape::fmt_shape(array.shape()),
            array.dtype()
        )));
    }
    Ok(Entry {
        node: Arc::new(Node {
            kind: Kind::Variable {
                grad,
                req,
                fresh: AtomicBool::new(false),
            },
        }),
        index: 0,
    })
}

/// An error unless arrays with these entries may be written now: while recording, an
/// array already in a graph must not be overwritten (its old value may be saved).
pub fn check_writable(outputs: &[Option<&Entry>]) -> Result<()> {
    if is_recording() && outputs.iter().flatten().any(|e| e.is_live()) {
        return Err(Error::Value(
            "Assigning to NDArrays that are already in a computational graph will cause \
             undefined behavior when evaluating gradients. Please call backward first to \
             clear the graph or do this out side of a record section. Also note that you \
             cannot use inplace operations like +=, *=, relu(x, out=x), y[idx]=x, etc \
             inside a record section."
                .into(),
        ));
    }
    Ok(())
}

/// Runs `op` on `inputs` as `mx.nd` does: in training mode when `is_train` or autograd
/// says so, and recorded while recording. `out` (with the entries the arrays had) is
/// written when given. Returns every output, hidden ones included, with its entry; those
/// only a gradient reads are left uncomputed when nothing is recorded.
pub fn invoke(
    op: &OpRef,
    inputs: &[Value],
    out: Option<Vec<Value>>,
    ctx: Option<Context>,
    is_train: bool,
) -> Result<Vec<Value>> {
    if let Some(out) = &out {
        let entries: Vec<Option<&Entry>> = out.iter().map(|(_, e)| e.as_ref()).collect();
        check_writable(&entries).map_err(|e| e.in_op(op.name()))?;
    }
    if let Some(def) = op.as_composite() {
        return composite::invoke_composite(op, def, inputs, out, ctx, is_train);
    }
    let arrays: Vec<NDArray> = inputs.iter().map(|(a, _)| a.clone()).collect();
    let out = out.map(|o| o.into_iter().map(|(a, _)| a).collect());
    let op = &crate::imperative::instantiate(op, &arrays, ctx)?;
    let is_train = is_train || is_training();
    let outs = if is_recording() {
        crate::imperative::invoke(op, &arrays, out, ctx, is_train)?
    } else {
        // Unrecorded, no gradient will read the hidden outputs.
        crate::imperative::invoke_visible(op, &arrays, out, ctx, is_train)?
    };
    let with: Vec<(&NDArray, Option<Entry>)> = inputs.iter().map(|(a, e)| (a, e.clone())).collect();
    Ok(match record_op(op, &with, &outs) {
        Some(es) => outs
            .into_iter()
            .zip(es)
            .map(|(a, e)| (a, Some(e)))
            .collect(),
        None => outs.into_iter().map(|a| (a, None)).collect(),
    })
}

/// Records `op` run on `inputs` (each with its entry) giving `outputs`, hidden ones
/// included. Returns the outputs' entries, or `None` when nothing is recorded: not
/// recording, or an op without inputs. As in MXNet, ops on arrays outside any graph are
/// recorded too: a gradient that is constant still has a graph to differentiate.
pub fn record_op(
    op: &OpRef,
    inputs: &[(&NDArray, Option<Entry>)],
    outputs: &[NDArray],
) -> Option<Vec<Entry>> {
    if !is_recording() || inputs.is_empty() {
        return None;
    }
    let grad = op.gradient();
    let (keep_in, keep_out): (Vec<usize>, Vec<usize>) = match &grad {
        Grad::Op(g) => (g.inputs.clone(), g.outputs.clone()),
        _ => (Vec::new(), Vec::new()),
    };
    let saved_inputs = (0..inputs.len())
        .map(|i| keep_in.contains(&i).then(|| inputs[i].0.clone()))
        .collect();
    let saved_outputs = (0..outputs.len())
        .map(|o| keep_out.contains(&o).then(|| outputs[o].clone()))
        .collect();
    let backward = Backward::Op {
        forward: op.clone(),
        grad,
    };
    Some(record(
        backward,
        inputs,
        outputs,
        saved_inputs,
        saved_outputs,
    ))
}

/// Records a custom computation (`autograd.Function`) of `inputs` giving `outputs`;
/// `None` when not recording or it has no inputs.
pub fn record_custom(
    backward: Arc<dyn CustomBackward>,
    inputs: &[(&NDArray, Option<Entry>)],
    outputs: &[NDArray],
) -> Option<Vec<Entry>> {
    if !is_recording() || inputs.is_empty() {
        return None;
    }
    let none_in = vec![None; inputs.len()];
    let none_out = vec![None; outputs.len()];
    Some(record(
        Backward::Custom(backward),
        inputs,
        outputs,
        none_in,
        none_out,
    ))
}

fn record(
    backward: Backward,
    inputs: &[(&NDArray, Option<Entry>)],
    outputs: &[NDArray],
    saved_inputs: Vec<Option<NDArray>>,
    saved_outputs: Vec<Option<NDArray>>,
) -> Vec<Entry> {
    let ctx = outputs
        .first()
        .or(inputs.first().map(|(a, _)| *a))
        .map(NDArray::context)
        .unwrap_or(Context::cpu(0));
    let rec = Recorded {
        backward,
        inputs: inputs.iter().map(|(_, e)| e.clone()).collect(),
        in_meta: inputs.iter().map(|(a, _)| meta(a)).collect(),
        out_meta: outputs.iter().map(meta).collect(),
        saved_inputs,
        saved_outputs,
        ctx,
    };
    let node = Arc::new(Node {
        kind: Kind::Op(Mutex::new(Some(rec))),
    });
    (0..outputs.len())
        .map(|index| Entry {
            node: node.clone(),
            index,
        })
        .collect()
}
