//! Custom operators (MXNet's `Custom`): operators whose properties and computation a user
//! defines outside the core (in Python, `mx.operator.CustomOpProp`/`CustomOp`).
//!
//! The core sees them through two traits: [`CustomProp`] (names, shape and type
//! inference, backward dependencies; made from a node's attributes) and
//! [`CustomInstance`] (forward and backward over arrays; one per executor node or
//! imperative call, so that state kept between the two stays with its node). A
//! [`Provider`], installed once by the front end, makes the properties from an `op_type`.
//!
//! The computation runs as an asynchronous engine op (`run`): the user's code is handed to
//! a thread of its own, never run on an engine worker, and what it pushes on the op's
//! arrays completes the op when it has finished.

pub mod control_flow;
mod op;
mod run;
#[cfg(test)]
mod tests;

pub use op::{register, BackwardCustom, CustomOp};

use crate::context::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ndarray::NDArray;
use crate::op::OpReq;
use crate::shape::Shape;
use std::sync::{Arc, OnceLock};

/// Shapes or types of a custom op's arguments, outputs and auxiliary states.
pub struct Inferred<T> {
    /// One per argument (the op's non-auxiliary inputs).
    pub args: Vec<T>,
    /// One per output.
    pub outputs: Vec<T>,
    /// One per auxiliary state.
    pub aux: Vec<T>,
}

/// A custom operator's properties (MXNet's `CustomOpProp`).
pub trait CustomProp: Send + Sync {
    /// Argument names (`list_arguments`).
    fn arguments(&self) -> &[String];
    /// Output names (`list_outputs`).
    fn outputs(&self) -> &[String];
    /// Auxiliary state names (`list_auxiliary_states`).
    fn aux_states(&self) -> &[String];
    /// What the backward pass reads (`declare_backward_dependency`): indices into output
    /// gradients (`0..n_out`), then arguments (`n_out..n_out + n_args`), then outputs.
    fn backward_deps(&self) -> &[usize];
    /// Shapes from the arguments' shapes; `None` where not known (yet).
    fn infer_shape(&self, args: &[Option<Shape>]) -> Result<Inferred<Option<Shape>>>;
    /// Types from the arguments' types; `None` where not known (yet).
    fn infer_type(&self, args: &[Option<DType>]) -> Result<Inferred<Option<DType>>>;
    /// The operator for one node, given where it runs and its inputs (arguments, then
    /// auxiliary states).
    fn create_operator(
        &self,
        ctx: Context,
        shapes: &[Shape],
        types: &[DType],
    ) -> Result<Arc<dyn CustomInstance>>;
}

/// The arrays of a custom op's forward call. Arrays here alias the op's own memory under
/// engine variables of their own: what the user pushes on them is what the op waits for.
pub struct ForwardCall {
    pub ctx: Context,
    pub is_train: bool,
    /// How each output is to be written.
    pub req: Vec<OpReq>,
    pub in_data: Vec<NDArray>,
    pub out_data: Vec<NDArray>,
    pub aux: Vec<NDArray>,
}

/// The arrays of a custom op's backward call; those the op did not declare as backward
/// dependencies are `None`.
pub struct BackwardCall {
    pub ctx: Context,
    pub is_train: bool,
    /// How each input gradient is to be written.
    pub req: Vec<OpReq>,
    pub out_grad: Vec<Option<NDArray>>,
    pub in_data: Vec<Option<NDArray>>,
    pub out_data: Vec<Option<NDArray>>,
    pub in_grad: Vec<NDArray>,
    pub aux: Vec<NDArray>,
}

/// One custom operator (MXNet's `CustomOp`): its forward and backward, which push their
/// work on the arrays they are given and return.
pub trait CustomInstance: Send + Sync {
    fn forward(&self, call: ForwardCall) -> Result<()>;
    fn backward(&self, call: BackwardCall) -> Result<()>;
}

/// Makes custom operator properties from an `op_type` and the node's other attributes.
pub trait Provider: Send + Sync {
    fn create(&self, op_type: &str, kwargs: &[(String, String)]) -> Result<Arc<dyn CustomProp>>;
}

static PROVIDER: OnceLock<Box<dyn Provider>> = OnceLock::new();

/// Installs the provider of custom operators; the first one installed stays.
pub fn set_provider(p: Box<dyn Provider>) {
    let _ = PROVIDER.set(p);
}

fn provider() -> Result<&'static dyn Provider> {
    PROVIDER.get().map(|p| p.as_ref()).ok_or_else(|| {
        Error::Runtime(
            "Custom: no custom operators can be made without the Python front end".into(),
        )
    })
}
