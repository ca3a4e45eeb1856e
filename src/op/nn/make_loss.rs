//! Definition of `MakeLoss`: passes its input through and marks it as a loss, whose
//! gradient is `grad_scale`, normalised.

use super::common::{float_dtype, same_shape, Normalization};
use crate::dtype::DType;
use crate::error::Result;
use crate::op::infer::infer_from_partial;
use crate::op::infer::shape_of_input;
use crate::op::{
    Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params, Registry, ShapeSlots,
};
use crate::shape::Shape;
use std::sync::Arc;

/// `MakeLoss`: passes the data through; its gradient is `grad_scale`, normalised.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MakeLoss {
    pub(crate) grad_scale: f64,
    pub(crate) valid_thresh: f64,
    pub(crate) normalization: Normalization,
}

impl Operator for MakeLoss {
    fn name(&self) -> &'static str {
        "MakeLoss"
    }

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        same_shape(self.name(), inputs, outputs)
    }

    infer_from_partial!(shape);

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(self.name(), inputs)?])
    }

    fn inplace(&self) -> &'static [(usize, usize)] {
        &[(0, 0)]
    }

    fn gradient(&self) -> Grad {
        Grad::Op(Gradient {
            op: Arc::new(MakeLossBackward(*self)),
            ograds: vec![],
            inputs: vec![],
            outputs: vec![0],
            grad_of: vec![0],
        })
    }
}

/// Input: the output. Every element's gradient is `grad_scale` over the batch size
/// (`batch`) or the count of outputs above `valid_thresh` (`valid`, at least 1).
pub(crate) struct MakeLossBackward(pub(crate) MakeLoss);

impl Operator for MakeLossBackward {
    fn name(&self) -> &'static str {
        "_backward_MakeLoss"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        shape_of_input(self.name(), inputs, 1, 0)
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(self.name(), inputs)?])
    }
}

const MAKE_LOSS_PARAMS: &[Param] = &[
    Param::new(
        "grad_scale",
        "float",
        "1",
        "Gradient scale as a supplement to unary and binary operators",
    ),
    Param::new(
        "valid_thresh",
        "float",
        "0",
        "clip each element in the array to 0 when it is less than ``valid_thresh``. This is \
         used when ``normalization`` is set to ``'valid'``.",
    ),
    Param::new(
        "normalization",
        "{'batch', 'null', 'valid'}",
        "'null'",
        "If this is set to null, the output gradient will not be normalized. If this is set \
         to batch, the output gradient will be divided by the batch size. If this is set to \
         valid, the output gradient will be divided by the number of valid input elements.",
    ),
];

fn create_make_loss(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("MakeLoss", attrs, MAKE_LOSS_PARAMS)?;
    Ok(Arc::new(MakeLoss {
        grad_scale: p.get("grad_scale")?,
        valid_thresh: p.get("valid_thresh")?,
        normalization: Normalization::parse(&p)?,
    }))
}

/// Registers `MakeLoss`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "MakeLoss",
        aliases: &["make_loss"],
        inputs: &["data"],
        variadic: false,
        params: MAKE_LOSS_PARAMS,
        doc: "Marks its input as a loss: the gradient is grad_scale, normalised.",
        create: Box::new(create_make_loss),
    });
}
