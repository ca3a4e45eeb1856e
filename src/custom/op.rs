//! The `Custom` operator and its backward, `_backward_Custom`, over a [`CustomProp`].

use super::run::{self, Aliases};
use super::{provider, BackwardCall, CustomInstance, CustomProp, ForwardCall, Inferred};
use crate::context::Context;
use crate::dtype::DType;
use crate::engine::OnComplete;
use crate::error::{Error, Result};
use crate::op::infer::infer_from_partial;
use crate::op::{
    assign_shape, AsyncCall, AsyncOperator, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param,
    Registry, ShapeSlots, TypeSlots,
};
use crate::shape::Shape;
use parking_lot::Mutex;
use std::sync::Arc;

const PARAMS: &[Param] = &[Param::required(
    "op_type",
    "string",
    "Name of the custom operator, as registered with mx.operator.register. Every other \
     attribute is passed to its property class.",
)];

/// Adds `Custom` to the registry.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "Custom",
        aliases: &[],
        inputs: &["data"],
        variadic: true,
        params: PARAMS,
        doc: "Apply a custom operator implemented in a frontend language (like Python).",
        create: Box::new(create),
    });
}

fn create(attrs: &Attrs) -> Result<OpRef> {
    let op_type = attrs
        .get("op_type")
        .ok_or_else(|| Error::Value("Custom: required argument 'op_type' is missing".into()))?;
    // Hidden attributes (`__lr_mult__`, `__ctx_group__`) belong to the node, not the op.
    let kwargs: Vec<(String, String)> = attrs
        .iter()
        .filter(|(k, _)| *k != "op_type" && !(k.starts_with("__") && k.ends_with("__")))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let prop = provider()?.create(op_type, &kwargs)?;
    Ok(Arc::new(CustomOp::new("Custom", op_type, prop)))
}

/// The instance a node's forward and backward share, made when the node is bound (or
/// the call made), else at its first run.
type Slot = Arc<Mutex<Option<Arc<dyn CustomInstance>>>>;

/// A custom operator: a node of type `op_type`.
pub struct CustomOp {
    /// The operator's name: `Custom`, or a built-in operator the front end runs.
    name: &'static str,
    op_type: Arc<str>,
    prop: Arc<dyn CustomProp>,
    instance: Slot,
}

impl CustomOp {
    /// Operator `name` running the front end's properties `prop` of `op_type`.
    pub fn new(name: &'static str, op_type: &str, prop: Arc<dyn CustomProp>) -> CustomOp {
        CustomOp {
            name,
            op_type: op_type.into(),
            prop,
            instance: Arc::new(Mutex::new(None)),
        }
    }

    /// The registered name the node runs.
    pub fn op_type(&self) -> &str {
        &self.op_type
    }

    /// How errors name the operator: `Custom 'my_op'`, or the built-in's name.
    fn label(&self) -> String {
        if self.name == "Custom" {
            format!("Custom '{}'", self.op_type)
        } else {
            self.name.to_string()
        }
    }

    fn n_args(&self) -> usize {
        self.prop.arguments().len()
    }

    fn n_aux(&self) -> usize {
        self.prop.aux_states().len()
    }

    /// Shape or type inference through the property: asked once some argument is known,
    /// its answers merged into the slots (arguments, then auxiliary states, and outputs).
    fn infer_partial<T: Clone + PartialEq + std::fmt::Debug>(
        &self,
        inputs: &mut [Option<T>],
        outputs: &mut [Option<T>],
        infer: impl Fn(&[Option<T>]) -> Result<Inferred<Option<T>>>,
        assign: impl Fn(&str, &str, &mut Option<T>, &T) -> Result<()> + Copy,
    ) -> Result<()> {
        let n = self.n_args();
        if inputs.len() != n + self.n_aux() {
            return Err(Error::Value(format!(
                "{}: takes {} input(s) ({}), got {}",
                self.label(),
                n + self.n_aux(),
                self.input_names().unwrap_or_default().join(", "),
                inputs.len()
            )));
        }
        let args = &inputs[..n];
        if n > 0 && args.iter().all(|a| a.is_none()) {
            return Ok(());
        }
        let complete = args.iter().all(|a| a.is_some());
        let Inferred {
            args: a,
            outputs: o,
            aux,
        } = match infer(args) {
            Ok(r) => r,
            // With arguments still unknown, the user's code may not cope yet; it is asked
            // again once they are known.
            Err(_) if !complete => return Ok(()),
            Err(e) => return Err(e),
        };
        let op = self.label();
        let (arg_slots, aux_slots) = inputs.split_at_mut(n);
        merge(&op, "argument", arg_slots, &a, assign)?;
        merge(&op, "output", outputs, &o, assign)?;
        merge(&op, "auxiliary state", aux_slots, &aux, assign)
    }
}

/// The backward's name of built-in operator `name` (`_foreach` → `_backward_foreach`).
fn backward_name(name: &'static str) -> &'static str {
    match name {
        "_foreach" => "_backward_foreach",
        "_while_loop" => "_backward_while_loop",
        "_cond" => "_backward_cond",
        _ => "_backward_Custom",
    }
}

/// The instance in `slot`, made now from the arrays of the first run if there is none.
fn instance_of(
    slot: &Slot,
    prop: &dyn CustomProp,
    ctx: Context,
    inputs: &[(Shape, DType)],
) -> Result<Arc<dyn CustomInstance>> {
    let mut s = slot.lock();
    if let Some(i) = s.as_ref() {
        return Ok(i.clone());
    }
    let shapes: Vec<Shape> = inputs.iter().map(|(s, _)| s.clone()).collect();
    let types: Vec<DType> = inputs.iter().map(|(_, t)| *t).collect();
    let i = prop.create_operator(ctx, &shapes, &types)?;
    *s = Some(i.clone());
    Ok(i)
}

/// Merges what the property inferred into the slots; `None` (not known) leaves a slot.
fn merge<T: Clone + PartialEq + std::fmt::Debug>(
    op: &str,
    what: &str,
    slots: &mut [Option<T>],
    inferred: &[Option<T>],
    assign: impl Fn(&str, &str, &mut Option<T>, &T) -> Result<()>,
) -> Result<()> {
    if inferred.len() != slots.len() {
        return Err(Error::Value(format!(
            "{op}: infer returned {} {what} entries, expected {}",
            inferred.len(),
            slots.len()
        )));
    }
    for (i, (slot, v)) in slots.iter_mut().zip(inferred).enumerate() {
        if let Some(v) = v {
            assign(op, &format!("{what} {i}"), slot, v)?;
        }
    }
    Ok(())
}

fn assign_type(op: &str, what: &str, slot: &mut Option<DType>, t: &DType) -> Result<()> {
    match slot {
        Some(have) if have != t => Err(Error::Type(format!(
            "{op}: type inconsistent for {what}: expected {t}, got {have}"
        ))),
        _ => {
            *slot = Some(*t);
            Ok(())
        }
    }
}

impl Operator for CustomOp {
    fn name(&self) -> &'static str {
        self.name
    }

    fn num_outputs(&self) -> usize {
        self.prop.outputs().len()
    }

    fn input_names(&self) -> Option<Vec<String>> {
        Some(
            self.prop
                .arguments()
                .iter()
                .chain(self.prop.aux_states())
                .cloned()
                .collect(),
        )
    }

    fn aux_inputs(&self) -> Vec<usize> {
        (self.n_args()..self.n_args() + self.n_aux()).collect()
    }

    fn output_names(&self) -> Vec<String> {
        self.prop.outputs().to_vec()
    }

    infer_from_partial!(shape);
    infer_from_partial!(type);

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        self.infer_partial(inputs, outputs, |a| self.prop.infer_shape(a), assign_shape)
    }

    fn infer_type_partial(&self, inputs: &mut TypeSlots, outputs: &mut TypeSlots) -> Result<()> {
        self.infer_partial(inputs, outputs, |a| self.prop.infer_type(a), assign_type)
    }

    fn gradient(&self) -> Grad {
        let n_out = self.num_outputs();
        let n_args = self.n_args();
        let mut deps = self.prop.backward_deps().to_vec();
        deps.sort_unstable();
        deps.dedup();
        let ograds: Vec<usize> = deps.iter().copied().filter(|&d| d < n_out).collect();
        let mut inputs: Vec<usize> = deps
            .iter()
            .filter(|&&d| d >= n_out && d < n_out + n_args)
            .map(|&d| d - n_out)
            .collect();
        inputs.extend(n_args..n_args + self.n_aux());
        let outputs: Vec<usize> = deps
            .iter()
            .filter(|&&d| d >= n_out + n_args && d < 2 * n_out + n_args)
            .map(|&d| d - n_out - n_args)
            .collect();
        let (name, scope) = if self.name == "Custom" {
            ("_backward_Custom", format!("_backward_{}", self.op_type))
        } else {
            let name = backward_name(self.name);
            (name, name.to_string())
        };
        let backward = BackwardCustom {
            name,
            scope: scope.into(),
            prop: self.prop.clone(),
            instance: self.instance.clone(),
            ograds: ograds.clone(),
            inputs: inputs.clone(),
            outputs: outputs.clone(),
        };
        Grad::Op(Gradient {
            op: Arc::new(backward),
            ograds,
            inputs,
            outputs,
            grad_of: (0..n_args).collect(),
        })
    }

    fn instantiate(
        &self,
        ctx: Context,
        shapes: &[Shape],
        types: &[DType],
    ) -> Result<Option<OpRef>> {
        let instance = self.prop.create_operator(ctx, shapes, types)?;
        Ok(Some(Arc::new(CustomOp {
            name: self.name,
            op_type: self.op_type.clone(),
            prop: self.prop.clone(),
            instance: Arc::new(Mutex::new(Some(instance))),
        })))
    }

    fn as_async(&self) -> Option<&dyn AsyncOperator> {
        Some(self)
    }
}

impl AsyncOperator for CustomOp {
    fn start(&self, call: AsyncCall, done: OnComplete) {
        let prop = self.prop.clone();
        let slot = self.instance.clone();
        let n_args = self.n_args();
        run::start(self.op_type.clone(), call, done, move |c: Aliases| {
            let ins: Vec<(Shape, DType)> = c
                .inputs
                .iter()
                .map(|a| (Shape::from_slice(a.shape()), a.dtype()))
                .collect();
            let instance = instance_of(&slot, prop.as_ref(), c.ctx, &ins)?;
            let mut in_data = c.inputs;
            let aux = in_data.split_off(n_args.min(in_data.len()));
            instance.forward(ForwardCall {
                ctx: c.ctx,
                is_train: c.is_train,
                req: c.req,
                in_data,
                out_data: c.outputs,
                aux,
            })
        });
    }
}

/// The backward of a custom operator: runs the forward node's instance's `backward`.
/// Its inputs are the output gradients in `ograds`, the forward inputs in `inputs`
/// (declared arguments, then every auxiliary state) and the forward outputs in `outputs`;
/// its outputs the arguments' gradients.
pub struct BackwardCustom {
    /// `_backward_Custom`, or the built-in's backward (`_backward_foreach`).
    name: &'static str,
    /// `_backward_<op_type>`, as the profiler names its code.
    scope: Arc<str>,
    prop: Arc<dyn CustomProp>,
    instance: Slot,
    ograds: Vec<usize>,
    inputs: Vec<usize>,
    outputs: Vec<usize>,
}

impl Operator for BackwardCustom {
    fn name(&self) -> &'static str {
        self.name
    }

    fn num_outputs(&self) -> usize {
        self.prop.arguments().len()
    }

    // The gradient pass gives the outputs the shapes and types of the forward inputs.
    fn infer_shape(&self, _inputs: &[Shape]) -> Result<Vec<Shape>> {
        Err(Error::Runtime(format!(
            "{}: its output shapes are its forward inputs'",
            self.scope
        )))
    }

    fn infer_shape_partial(&self, _: &mut ShapeSlots, _: &mut ShapeSlots) -> Result<()> {
        Ok(())
    }

    fn infer_type_partial(&self, _: &mut TypeSlots, _: &mut TypeSlots) -> Result<()> {
        Ok(())
    }

    fn as_async(&self) -> Option<&dyn AsyncOperator> {
        Some(self)
    }
}

impl AsyncOperator for BackwardCustom {
    fn start(&self, call: AsyncCall, done: OnComplete) {
        let prop = self.prop.clone();
        let slot = self.instance.clone();
        let (ograds, inputs, outputs) = (
            self.ograds.clone(),
            self.inputs.clone(),
            self.outputs.clone(),
        );
        let scope = self.scope.clone();
        run::start(self.scope.clone(), call, done, move |c: Aliases| {
            let n_out = prop.outputs().len();
            let n_args = prop.arguments().len();
            let mut given = c.inputs.into_iter();
            let mut out_grad = vec![None; n_out];
            let mut in_data = vec![None; n_args];
            let mut out_data = vec![None; n_out];
            let mut aux = Vec::new();
            for &k in &ograds {
                out_grad[k] = given.next();
            }
            for &i in &inputs {
                match given.next() {
                    Some(a) if i >= n_args => aux.push(a),
                    a => in_data[i] = a,
                }
            }
            for &o in &outputs {
                out_data[o] = given.next();
            }
            let instance = slot.lock().clone().ok_or_else(|| {
                Error::Runtime(format!("{scope}: backward before the forward pass"))
            })?;
            instance.backward(BackwardCall {
                ctx: c.ctx,
                is_train: c.is_train,
                req: c.req,
                out_grad,
                in_data,
                out_data,
                in_grad: c.outputs,
                aux,
            })
        });
    }
}
