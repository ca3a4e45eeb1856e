//! Definition of `Dropout`: zeroes elements with probability `p` and scales the rest by
//! `1/(1-p)`, optionally sharing the draw along `axes`; the scaled keep mask is a hidden
//! second output that the backward multiplies by.

use super::common::{float_dtype, ograd_shape, same_shape};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::infer::infer_from_partial;
use crate::op::{
    assign_shape, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params, Registry,
    ResourceRequest, ShapeSlots,
};
use crate::shape::Shape;
use std::sync::Arc;

pub(crate) const NAME: &str = "Dropout";

/// The `Dropout` operator.
#[derive(Debug, Clone)]
pub(crate) struct Dropout {
    pub(crate) p: f64,
    pub(crate) always: bool,
    pub(crate) axes: Vec<i64>,
}

impl Dropout {
    /// True if the mask applies: while training, or always.
    pub(crate) fn active(&self, is_train: bool) -> bool {
        is_train || self.always
    }

    /// The shape the draw is made in: the data's with the shared axes set to 1.
    pub(crate) fn draw_shape(&self, d: &[usize]) -> Result<Shape> {
        let mut s = Shape::from_slice(d);
        for &a in &self.axes {
            let i = crate::shape::norm_axis(a, d.len(), NAME)?;
            s[i] = 1;
        }
        Ok(s)
    }
}

impl Operator for Dropout {
    fn name(&self) -> &'static str {
        NAME
    }

    fn num_outputs(&self) -> usize {
        2
    }

    fn num_visible_outputs(&self) -> usize {
        1
    }

    fn output_names(&self) -> Vec<String> {
        vec!["output".into(), "mask".into()]
    }

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        same_shape(NAME, inputs, &mut outputs[..1])?;
        if let Some(d) = inputs[0].clone() {
            self.draw_shape(&d)?;
            assign_shape(NAME, "mask", &mut outputs[1], &d)?;
        }
        Ok(())
    }

    infer_from_partial!(shape);

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(NAME, inputs)?; 2])
    }

    fn resources(&self) -> &'static [ResourceRequest] {
        &[ResourceRequest::Random]
    }

    fn inplace(&self) -> &'static [(usize, usize)] {
        &[(0, 0)]
    }

    fn gradient(&self) -> Grad {
        Grad::Op(Gradient {
            op: Arc::new(DropoutBackward {
                always: self.always,
            }),
            ograds: vec![0],
            inputs: vec![],
            outputs: vec![1],
            grad_of: vec![0],
        })
    }
}

/// Inputs: the output gradient and the mask. Outside training (mode `training`) the
/// gradient passes through, as the forward did.
pub(crate) struct DropoutBackward {
    pub(crate) always: bool,
}

impl Operator for DropoutBackward {
    fn name(&self) -> &'static str {
        "_backward_Dropout"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        ograd_shape(self.name(), inputs, 2, "mask")
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(self.name(), inputs)?])
    }
}

const PARAMS: &[Param] = &[
    Param::new(
        "p",
        "float",
        "0.5",
        "Fraction of the input that gets dropped out during training time.",
    ),
    Param::new(
        "mode",
        "{'always', 'training'}",
        "'training'",
        "Whether to only turn on dropout during training or to also turn on for inference.",
    ),
    Param::new(
        "axes",
        "Shape(tuple)",
        "[]",
        "Axes for variational dropout kernel.",
    ),
    Param::new(
        "cudnn_off",
        "boolean or None",
        "False",
        "Whether to turn off cudnn in dropout operator. This option is ignored if axes is \
         specified.",
    ),
];

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared(NAME, attrs, PARAMS)?;
    let prob: f64 = p.get("p")?;
    if !(0.0..=1.0).contains(&prob) {
        return Err(Error::Value(format!(
            "{NAME}: p must be in [0, 1], got {prob}"
        )));
    }
    let mode = p.get_choice("mode", &["training", "always"])?;
    p.get::<Option<bool>>("cudnn_off")?;
    Ok(Arc::new(Dropout {
        p: prob,
        always: mode == "always",
        axes: p.get::<Option<Vec<i64>>>("axes")?.unwrap_or_default(),
    }))
}

/// Registers `Dropout`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: NAME,
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: PARAMS,
        doc: "Randomly zeroes elements during training, scaling the rest by 1/(1-p).",
        create: Box::new(create),
    });
}
