//! Operator definitions, independent of devices: MXNet's name and aliases, attribute
//! parsing, shape and type inference, gradient, in-place options and the resources an
//! operator needs. Kernels are attached per device type in `kernels/`.

pub mod array_info;
pub mod attention;
pub mod composite;
pub mod contrib;
pub mod crop;
pub mod cumsum;
pub mod elemwise;
pub mod grad;
pub mod histogram;
pub mod indexing;
pub mod infer;
pub mod init;
pub mod khatri_rao;
pub mod la;
pub mod la_factor;
pub mod la_trian;
pub mod linalg;
pub mod memo;
pub mod nn;
pub mod optim;
pub mod params;
pub mod random;
pub mod random_pdf;
pub mod reduce;
mod registry;
pub mod resource;
pub mod sorting;
#[cfg(test)]
pub mod testutil;
pub mod transform;

pub use params::{Attrs, Param, Params};
pub use registry::{find, list_ops, Creator, OpDef, Registry};
pub use resource::{DeviceRng, ResourceRequest};

use crate::context::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::{fmt_shape, Shape};
use crate::storage::Block;
use rand_pcg::Pcg64Mcg;
use std::any::Any;
use std::sync::Arc;

/// How an op's output is to be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpReq {
    /// Leave the output alone.
    Null,
    /// Overwrite the output.
    Write,
    /// Overwrite an output that shares memory with an input.
    WriteInplace,
    /// Add to the output.
    Add,
}

/// What a kernel gets besides its inputs and outputs: the mode, and the resources its
/// operator declared (see [`Operator::resources`]).
pub struct OpContext<'a> {
    /// True during training (dropout, batch statistics).
    pub is_train: bool,
    /// The device the kernel runs on.
    pub device: Context,
    /// The device's random generator, for ops that ask for one.
    pub rng: Option<&'a mut (dyn DeviceRng + 'static)>,
    /// The stream a GPU kernel enqueues on (the running op's); `None` on the CPU.
    pub stream: Option<crate::engine::StreamHandle>,
    /// The executor node's memo and inputs, when the kernel runs for one.
    pub node: Option<memo::NodeMemo<'a>>,
}

impl<'a> OpContext<'a> {
    /// A context on `device` with no random generator.
    pub fn new(device: Context, is_train: bool) -> OpContext<'a> {
        OpContext {
            is_train,
            device,
            rng: None,
            stream: None,
            node: None,
        }
    }

    /// Scratch memory of `bytes` bytes from the device's pool, for this run only.
    pub fn temp_space(&self, op: &str, bytes: usize) -> Result<Block> {
        resource::temp_space(op, self.device, bytes)
    }

    /// The host random generator, or an error naming the op if it was not requested or
    /// the device's generator is not a host one.
    pub fn rng(&mut self, op: &str) -> Result<&mut Pcg64Mcg> {
        self.rng
            .as_deref_mut()
            .and_then(|r| r.host())
            .ok_or_else(|| Error::Runtime(format!("{op}: no host random generator was provided")))
    }
}

/// Gives every operator `as_any`, so a device's kernel can reach the parsed operator it
/// was registered for.
pub trait AsAny: Any {
    /// The operator as `Any`.
    fn as_any(&self) -> &dyn Any;
}

impl<T: Any> AsAny for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// An operator with its attributes parsed: everything about it except how a device
/// computes it (its kernels, registered per device type in `kernels/`).
pub trait Operator: Send + Sync + AsAny {
    /// MXNet's name of the operator.
    fn name(&self) -> &'static str;

    /// Number of outputs.
    fn num_outputs(&self) -> usize {
        1
    }

    /// Output shapes from input shapes; errors name the op and the shapes. An operator
    /// writes its shape inference once: here, or in `infer_shape_partial` with this one
    /// derived from it by [`infer::infer_from_partial`].
    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>>;

    /// Output types from input types. By default all inputs must share one type, which
    /// the outputs take. An operator that writes `infer_type_partial` derives this one
    /// from it by [`infer::infer_from_partial`].
    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        let t = same_dtype(self.name(), inputs)?;
        Ok(vec![t; self.num_outputs()])
    }

    /// The resources the kernels need from the device (MXNet's `FResourceRequest`).
    fn resources(&self) -> &'static [ResourceRequest] {
        &[]
    }

    /// True if the op needs the device's random generator.
    fn needs_rng(&self) -> bool {
        self.resources().contains(&ResourceRequest::Random)
    }

    /// Pairs (input, output) that may share memory.
    fn inplace(&self) -> &'static [(usize, usize)] {
        &[]
    }

    /// Input names when they depend on the attributes (`FullyConnected` without a bias);
    /// `None` means the names of the op's definition.
    fn input_names(&self) -> Option<Vec<String>> {
        None
    }

    /// Indices of the inputs that are auxiliary states: updated in place by `forward`
    /// (`BatchNorm`'s moving mean and variance) and never differentiated.
    fn aux_inputs(&self) -> Vec<usize> {
        Vec::new()
    }

    /// Names of the outputs, as `get_internals` shows them after the node's name.
    fn output_names(&self) -> Vec<String> {
        match self.num_outputs() {
            1 => vec!["output".to_string()],
            n => (0..n).map(|i| format!("output{i}")).collect(),
        }
    }

    /// How many outputs a symbol of this op shows (the rest feed only its gradient).
    fn num_visible_outputs(&self) -> usize {
        self.num_outputs()
    }

    /// How many outputs MXNet's operator has: all of them, unless some hidden outputs are
    /// rsmx's own (the fused `RNN`'s reserve, which MXNet keeps in operator state).
    fn mxnet_num_outputs(&self) -> usize {
        self.num_outputs()
    }

    /// Hidden outputs the kernels leave unwritten under a `Null` request: an executor
    /// with no gradient to feed from them (bound for inference) does not compute them.
    fn optional_outputs(&self) -> &'static [usize] {
        &[]
    }

    /// Shape inference over partly known shapes, in both directions: fills what it can
    /// among `inputs` and `outputs` and errors on a conflict. The default infers the
    /// outputs once every input is known.
    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        infer::outputs_once_inputs_known(self, inputs, outputs)
    }

    /// Type inference over partly known types. The default gives unknown inputs the type
    /// of the first known one (as weights take the type of the data) and then infers the
    /// outputs.
    fn infer_type_partial(&self, inputs: &mut TypeSlots, outputs: &mut TypeSlots) -> Result<()> {
        let first = inputs.iter().flatten().next().copied();
        if let Some(t) = first {
            for i in inputs.iter_mut().filter(|i| i.is_none()) {
                *i = Some(t);
            }
        }
        if let Some(known) = inputs.iter().copied().collect::<Option<Vec<DType>>>() {
            if known.is_empty() && outputs.iter().all(|o| o.is_some()) {
                return Ok(());
            }
            let inferred = self.infer_type(&known)?;
            for (i, (o, t)) in outputs.iter_mut().zip(inferred).enumerate() {
                match o {
                    Some(have) if *have != t => {
                        return Err(Error::Type(format!(
                            "{}: output {i} must have dtype {t}, got {have}",
                            self.name()
                        )))
                    }
                    _ => *o = Some(t),
                }
            }
        }
        Ok(())
    }

    /// For an op whose output `output` always equals one of its inputs (the backward of a
    /// sum, a copy), that input: the gradient pass then uses the input itself.
    fn output_is_input(&self, _output: usize) -> Option<usize> {
        None
    }

    /// For a backward operator, true if the forward outputs it reads come before the
    /// forward inputs (`_backward_softmax`: output gradient, output, then data, length).
    fn outputs_before_inputs(&self) -> bool {
        false
    }

    /// Attributes a variable made for input `input` gets when the input is not given
    /// (BatchNorm's moving statistics carry their `__init__`, as MXNet's do).
    fn input_var_attrs(&self, _input: usize) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// How the gradient of this op is computed.
    fn gradient(&self) -> Grad {
        Grad::Undefined
    }

    /// For a stateful operator (a custom operator), a copy with state of its own for one
    /// executor node or one imperative call, made from where it runs and its inputs'
    /// shapes and types. `None` for the others, whose parsed operator is shared.
    fn instantiate(
        &self,
        _ctx: Context,
        _shapes: &[Shape],
        _types: &[DType],
    ) -> Result<Option<OpRef>> {
        Ok(None)
    }

    /// For an operator whose work runs outside the engine's workers (a custom operator's
    /// Python code), how to start it. Such an operator has no kernel: it is pushed as an
    /// asynchronous engine op, never bulked with others.
    fn as_async(&self) -> Option<&dyn AsyncOperator> {
        None
    }

    /// For a composite operator, its definition as a graph of other operators. Such an
    /// operator has no kernel: it runs as its parts, which also give its gradient.
    fn as_composite(&self) -> Option<&dyn composite::Composite> {
        None
    }
}

/// An operator run as an asynchronous engine op (see [`Operator::as_async`]).
pub trait AsyncOperator {
    /// Starts the work on `call`'s arrays, from the thread the engine runs the op on;
    /// `done` reports when everything it started has finished.
    fn start(&self, call: AsyncCall, done: crate::engine::OnComplete);
}

/// The arrays and mode of one run of an asynchronous operator: each array as its memory
/// and the engine variable that guards it.
pub struct AsyncCall {
    pub is_train: bool,
    pub ctx: Context,
    /// The GPU stream the engine readied for the op (`None` on the CPU).
    pub stream: Option<crate::engine::StreamHandle>,
    pub inputs: Vec<(crate::ndarray::TBlob, crate::engine::Var)>,
    pub outputs: Vec<(crate::ndarray::TBlob, crate::engine::Var)>,
    pub req: Vec<OpReq>,
}

/// The gradient of an operator.
pub enum Grad {
    /// The op cannot be differentiated; asking for its gradient is an error.
    Undefined,
    /// The gradient with respect to every input is zero (comparisons, `argmax`, samplers).
    Zero,
    /// Computed by a backward operator.
    Op(Gradient),
}

/// A backward operator and what it is fed. Its inputs are, in order: the gradients of
/// the forward outputs listed in `ograds`, the forward inputs listed in `inputs`, and the
/// forward outputs listed in `outputs`. Its outputs are the gradients of the forward
/// inputs listed in `grad_of`; the other inputs get no gradient (zero).
pub struct Gradient {
    /// The backward operator.
    pub op: OpRef,
    /// Forward outputs whose gradients it takes.
    pub ograds: Vec<usize>,
    /// Forward inputs it takes.
    pub inputs: Vec<usize>,
    /// Forward outputs it takes.
    pub outputs: Vec<usize>,
    /// Forward inputs whose gradients it produces, one per backward output.
    pub grad_of: Vec<usize>,
}

impl Gradient {
    /// The backward operator's inputs from the output gradients (those of `ograds`) and
    /// the forward inputs and outputs it takes (those of `inputs` and `outputs`).
    pub fn arrange<T>(&self, ograds: Vec<T>, inputs: Vec<T>, outputs: Vec<T>) -> Vec<T> {
        let mut all = ograds;
        if self.op.outputs_before_inputs() {
            all.extend(outputs);
            all.extend(inputs);
        } else {
            all.extend(inputs);
            all.extend(outputs);
        }
        all
    }

    /// The common case: takes every output gradient of a single-output op, the listed
    /// inputs and outputs, and produces the gradients of inputs `0..n_inputs`.
    pub fn simple(op: OpRef, inputs: &[usize], outputs: &[usize], n_inputs: usize) -> Grad {
        Grad::Op(Gradient {
            op,
            ograds: vec![0],
            inputs: inputs.to_vec(),
            outputs: outputs.to_vec(),
            grad_of: (0..n_inputs).collect(),
        })
    }
}

/// Merges `inferred` shapes into `slots`: fills unknown ones, errors on a mismatch.
pub fn assign_shapes(
    op: &str,
    what: &str,
    slots: &mut ShapeSlots,
    inferred: &[Shape],
) -> Result<()> {
    for (i, (slot, s)) in slots.iter_mut().zip(inferred).enumerate() {
        assign_shape(op, &format!("{what} {i}"), slot, s)?;
    }
    Ok(())
}

/// Fills one shape slot, or checks it against what it already holds; dimensions of 0
/// (unknown) on either side take the other side's size.
pub fn assign_shape(op: &str, what: &str, slot: &mut Option<Shape>, s: &Shape) -> Result<()> {
    match slot {
        Some(have) if have == s => Ok(()),
        Some(have) => match crate::shape::unify(have, s) {
            Some(both) => {
                *have = both;
                Ok(())
            }
            None => Err(Error::Value(format!(
                "{op}: shape inconsistent for {what}: expected {}, got {}",
                fmt_shape(s),
                fmt_shape(have)
            ))),
        },
        None => {
            *slot = Some(s.clone());
            Ok(())
        }
    }
}

/// The one dtype all inputs share, or an error naming the op.
pub fn same_dtype(op: &str, inputs: &[DType]) -> Result<DType> {
    let Some(&first) = inputs.first() else {
        return Err(Error::Type(format!(
            "{op}: cannot infer the output type without inputs"
        )));
    };
    if let Some(other) = inputs.iter().find(|t| **t != first) {
        return Err(Error::Type(format!(
            "{op}: all inputs must have the same dtype, got {first} and {other}"
        )));
    }
    Ok(first)
}

/// Checks the number of inputs.
pub fn check_inputs(op: &str, inputs: &[Shape], want: usize) -> Result<()> {
    infer::check_count(op, inputs.len(), want)
}

/// An error saying the op got a shape it cannot take.
pub fn shape_err(op: &str, what: &str, shape: &[usize]) -> Error {
    Error::Value(format!("{op}: {what}, got shape {}", fmt_shape(shape)))
}

/// Shapes being inferred, one slot per input or output: `None` while unknown.
pub type ShapeSlots = [Option<Shape>];

/// Dtypes being inferred, one slot per input or output: `None` while unknown.
pub type TypeSlots = [Option<DType>];

/// A shared parsed operator.
pub type OpRef = Arc<dyn Operator>;
