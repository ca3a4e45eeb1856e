//! Definition of `FullyConnected` (`out = data · weightᵀ + bias`) and its backward.

use super::common::{first_inputs, float_dtype, py_bool, NO_BIAS};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::infer::infer_from_partial;
use crate::op::{
    assign_shape, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params, Registry,
    ShapeSlots,
};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

pub(crate) const NAME: &str = "FullyConnected";

/// The parsed attributes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fc {
    pub(crate) num_hidden: usize,
    pub(crate) no_bias: bool,
    pub(crate) flatten: bool,
}

impl Fc {
    /// (rows, input features) of `data` seen as a matrix.
    pub(crate) fn matrix(&self, d: &[usize]) -> Result<(usize, usize)> {
        if d.is_empty() {
            return Err(Error::Value(format!(
                "{NAME}: data must have at least one dimension, got shape {}",
                fmt_shape(d)
            )));
        }
        Ok(if self.flatten {
            (d[0], d[1..].iter().product())
        } else {
            let last = d.len() - 1;
            (d[..last].iter().product(), d[last])
        })
    }

    pub(crate) fn out_shape(&self, d: &[usize]) -> Shape {
        if self.flatten {
            Shape::from_slice(&[d[0], self.num_hidden])
        } else {
            let mut s = Shape::from_slice(d);
            *s.last_mut().expect("checked non-empty") = self.num_hidden;
            s
        }
    }

    pub(crate) fn n_inputs(&self) -> usize {
        if self.no_bias {
            2
        } else {
            3
        }
    }
}

impl Operator for Fc {
    fn name(&self) -> &'static str {
        NAME
    }

    fn input_names(&self) -> Option<Vec<String>> {
        first_inputs(&["data", "weight", "bias"], self.n_inputs())
    }

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        if inputs.len() != self.n_inputs() {
            return Err(Error::Value(format!(
                "{NAME}: expected {} inputs (no_bias={}), got {}",
                self.n_inputs(),
                py_bool(self.no_bias),
                inputs.len()
            )));
        }
        let Some(d) = inputs[0].clone() else {
            return Ok(());
        };
        let (_, k) = self.matrix(&d)?;
        assign_shape(
            NAME,
            "weight",
            &mut inputs[1],
            &Shape::from_slice(&[self.num_hidden, k]),
        )?;
        if !self.no_bias {
            let one = Shape::from_slice(&[self.num_hidden]);
            match &inputs[2] {
                Some(b) if b.as_slice() == [self.num_hidden, 1] => {}
                _ => assign_shape(NAME, "bias", &mut inputs[2], &one)?,
            }
        }
        assign_shape(NAME, "output", &mut outputs[0], &self.out_shape(&d))?;
        // The output tells the data's batch dimensions when the data leaves them unknown.
        if let Some(out) = &outputs[0] {
            let rows = if self.flatten { 1 } else { d.len() - 1 };
            let mut from_out = d.clone();
            from_out[..rows].copy_from_slice(&out[..rows]);
            assign_shape(NAME, "data", &mut inputs[0], &from_out)?;
        }
        Ok(())
    }

    infer_from_partial!(shape);

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(NAME, inputs)?])
    }

    fn gradient(&self) -> Grad {
        Gradient::simple(Arc::new(FcBackward(*self)), &[0, 1], &[], self.n_inputs())
    }
}

/// Gradients of data, weight and bias from the output gradient, data and weight.
pub(crate) struct FcBackward(pub(crate) Fc);

impl Operator for FcBackward {
    fn name(&self) -> &'static str {
        "_backward_FullyConnected"
    }

    fn num_outputs(&self) -> usize {
        self.0.n_inputs()
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        crate::op::check_inputs(self.name(), inputs, 3)?;
        let (rows, k) = self.0.matrix(&inputs[1])?;
        let want = self.0.out_shape(&inputs[1]);
        if inputs[0] != want || inputs[2].as_slice() != [self.0.num_hidden, k] {
            return Err(Error::Value(format!(
                "{}: output gradient {} and weight {} do not fit data {} ({rows} rows)",
                self.name(),
                fmt_shape(&inputs[0]),
                fmt_shape(&inputs[2]),
                fmt_shape(&inputs[1])
            )));
        }
        let mut out = vec![inputs[1].clone(), inputs[2].clone()];
        if !self.0.no_bias {
            out.push(Shape::from_slice(&[self.0.num_hidden]));
        }
        Ok(out)
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(self.name(), inputs)?; self.num_outputs()])
    }
}

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared(NAME, attrs, PARAMS)?;
    let num_hidden: i64 = p.get("num_hidden")?;
    if num_hidden < 1 {
        return Err(Error::Value(format!(
            "{NAME}: num_hidden must be positive, got {num_hidden}"
        )));
    }
    Ok(Arc::new(Fc {
        num_hidden: num_hidden as usize,
        no_bias: p.get("no_bias")?,
        flatten: p.get("flatten")?,
    }))
}

const PARAMS: &[Param] = &[
    Param::required("num_hidden", "int", "Number of hidden nodes of the output."),
    NO_BIAS,
    Param::new(
        "flatten",
        "boolean",
        "True",
        "Whether to collapse all but the first axis of the input data tensor.",
    ),
];

/// Registers `FullyConnected`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: NAME,
        aliases: &[],
        inputs: &["data", "weight", "bias"],
        variadic: false,
        params: PARAMS,
        doc: "Applies a linear transformation: Y = XWᵀ + b.",
        create: Box::new(create),
    });
}
