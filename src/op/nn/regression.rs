//! Definitions of the regression output layers (`LinearRegressionOutput`,
//! `LogisticRegressionOutput`, `MAERegressionOutput`), whose backward is the loss
//! gradient against the label, ignoring the head gradient.

use super::common::{float_dtype, same_shape};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::infer::check_count;
use crate::op::infer::infer_from_partial;
use crate::op::{
    check_inputs, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params, Registry,
    ShapeSlots,
};
use crate::shape::{fmt_shape, size_of, Shape};
use std::sync::Arc;

/// The regression losses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reg {
    Linear,
    Logistic,
    Mae,
}

impl Reg {
    /// The operator's name.
    fn name(self) -> &'static str {
        match self {
            Reg::Linear => "LinearRegressionOutput",
            Reg::Logistic => "LogisticRegressionOutput",
            Reg::Mae => "MAERegressionOutput",
        }
    }
}

/// A regression output layer.
pub(crate) struct Regression {
    pub(crate) kind: Reg,
    pub(crate) grad_scale: f64,
}

impl Operator for Regression {
    fn name(&self) -> &'static str {
        self.kind.name()
    }

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        check_count(self.name(), inputs.len(), 2)?;
        same_shape(self.name(), &mut inputs[..1], outputs)?;
        let Some(d) = inputs[0].clone() else {
            return Ok(());
        };
        match &inputs[1] {
            // A (n, 1) output takes a (n,) label by default.
            None if d.len() == 2 && d[1] == 1 => inputs[1] = Some(Shape::from_slice(&[d[0]])),
            None => inputs[1] = Some(d),
            Some(l) if l.first() == d.first() && size_of(l) == size_of(&d) => {}
            Some(l) => {
                return Err(Error::Value(format!(
                    "{}: label of shape {} does not fit data of shape {}",
                    self.name(),
                    fmt_shape(l),
                    fmt_shape(&d)
                )))
            }
        }
        Ok(())
    }

    infer_from_partial!(shape);

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(self.name(), inputs)?])
    }

    fn inplace(&self) -> &'static [(usize, usize)] {
        &[(0, 0)]
    }

    fn gradient(&self) -> Grad {
        let op = RegressionBackward {
            kind: self.kind,
            grad_scale: self.grad_scale,
        };
        Grad::Op(Gradient {
            op: Arc::new(op),
            ograds: vec![],
            inputs: vec![1],
            outputs: vec![0],
            grad_of: vec![0],
        })
    }
}

/// Inputs: the label and the output. The gradient is `d(out, label) · grad_scale / m`,
/// with `m` the label's elements per example.
pub(crate) struct RegressionBackward {
    pub(crate) kind: Reg,
    pub(crate) grad_scale: f64,
}

impl Operator for RegressionBackward {
    fn name(&self) -> &'static str {
        match self.kind {
            Reg::Linear => "_backward_linear_reg_out",
            Reg::Logistic => "_backward_logistic_reg_out",
            Reg::Mae => "_backward_mae_reg_out",
        }
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(self.name(), inputs, 2)?;
        if size_of(&inputs[0]) != size_of(&inputs[1]) {
            return Err(Error::Value(format!(
                "{}: label of shape {} does not fit output of shape {}",
                self.name(),
                fmt_shape(&inputs[0]),
                fmt_shape(&inputs[1])
            )));
        }
        Ok(vec![inputs[1].clone()])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(self.name(), inputs)?])
    }
}

const REG_PARAMS: &[Param] = &[Param::new(
    "grad_scale",
    "float",
    "1",
    "Scale the gradient by a float factor",
)];

fn create_regression(kind: Reg, attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared(kind.name(), attrs, REG_PARAMS)?;
    Ok(Arc::new(Regression {
        kind,
        grad_scale: p.get("grad_scale")?,
    }))
}

/// Registers the regression output layers.
pub fn register(r: &mut Registry) {
    for kind in [Reg::Linear, Reg::Logistic, Reg::Mae] {
        r.add(OpDef {
            name: kind.name(),
            aliases: &[],
            inputs: &["data", "label"],
            variadic: false,
            params: REG_PARAMS,
            doc: "A regression output layer: its backward is the loss gradient against the label.",
            create: Box::new(move |a| create_regression(kind, a)),
        });
    }
}
