//! Definition of `Activation` (relu, sigmoid, tanh, softrelu and softsign) and its
//! backward.

use super::common::{float_dtype, ograd_shape, same_shape};
use crate::dtype::DType;
use crate::error::Result;
use crate::op::infer::infer_from_partial;
use crate::op::{
    Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params, Registry, ShapeSlots,
};
use crate::shape::Shape;
use std::sync::Arc;

pub(crate) const NAME: &str = "Activation";

/// The activation functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Act {
    Relu,
    Sigmoid,
    Tanh,
    SoftRelu,
    SoftSign,
}

impl Act {
    /// True if the backward takes the forward input rather than its output.
    fn uses_input(self) -> bool {
        self == Act::SoftSign
    }
}

/// The `Activation` operator.
pub(crate) struct Activation(pub(crate) Act);

impl Operator for Activation {
    fn name(&self) -> &'static str {
        NAME
    }

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        same_shape(NAME, inputs, outputs)
    }

    infer_from_partial!(shape);

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(NAME, inputs)?])
    }

    fn inplace(&self) -> &'static [(usize, usize)] {
        &[(0, 0)]
    }

    fn gradient(&self) -> Grad {
        let op: OpRef = Arc::new(ActivationBackward(self.0));
        if self.0.uses_input() {
            Gradient::simple(op, &[0], &[], 1)
        } else {
            Gradient::simple(op, &[], &[0], 1)
        }
    }
}

/// Inputs: the output gradient and the forward output (the input for softsign).
pub(crate) struct ActivationBackward(pub(crate) Act);

impl Operator for ActivationBackward {
    fn name(&self) -> &'static str {
        "_backward_Activation"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        let other = if self.0.uses_input() {
            "data"
        } else {
            "output"
        };
        ograd_shape(self.name(), inputs, 2, other)
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(self.name(), inputs)?])
    }

    /// The input gradient may overwrite the output gradient (element by element).
    fn inplace(&self) -> &'static [(usize, usize)] {
        &[(0, 0)]
    }
}

const PARAMS: &[Param] = &[Param::required(
    "act_type",
    "{'relu', 'sigmoid', 'softrelu', 'softsign', 'tanh'}",
    "Activation function to be applied.",
)];

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared(NAME, attrs, PARAMS)?;
    let act = match p.get_choice(
        "act_type",
        &["relu", "sigmoid", "tanh", "softrelu", "softsign"],
    )? {
        "sigmoid" => Act::Sigmoid,
        "tanh" => Act::Tanh,
        "softrelu" => Act::SoftRelu,
        "softsign" => Act::SoftSign,
        _ => Act::Relu,
    };
    Ok(Arc::new(Activation(act)))
}

/// Registers `Activation`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: NAME,
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: PARAMS,
        doc: "Applies an activation function element-wise.",
        create: Box::new(create),
    });
}
