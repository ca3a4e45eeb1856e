//! Definition of `LeakyReLU` (leaky, elu, selu, gelu, prelu and rrelu) and its backward.

use super::common::{first_inputs, float_dtype, same_shape};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::infer::infer_from_partial;
use crate::op::{
    assign_shape, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params, Registry,
    ResourceRequest, ShapeSlots,
};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

pub(crate) const NAME: &str = "LeakyReLU";

/// The activation kinds, with their arguments.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Kind {
    Leaky(f64),
    Elu(f64),
    Selu,
    Gelu,
    Prelu,
    Rrelu { lower: f64, upper: f64 },
}

impl Kind {
    /// MXNet's `act_type` of this kind.
    fn name(self) -> &'static str {
        match self {
            Kind::Leaky(_) => "leaky",
            Kind::Elu(_) => "elu",
            Kind::Selu => "selu",
            Kind::Gelu => "gelu",
            Kind::Prelu => "prelu",
            Kind::Rrelu { .. } => "rrelu",
        }
    }
}

/// How a prelu `gamma` of shape `g` applies to data of shape `d`, as MXNet broadcasts it:
/// gamma's axes align, from its last, with the data's axes 1 and 0, each either equal
/// or 1. Returns the slope count and the elements each slope covers in a row: slope
/// `(i / inner) % count` applies to element `i`.
pub(crate) fn prelu_layout(d: &[usize], g: &[usize]) -> Result<(usize, usize)> {
    let mut per_axis = [false; 2];
    let mut rest = g.len();
    for i in (0..d.len().min(2)).rev() {
        if rest > 0 && (g[rest - 1] == d[i] || g[rest - 1] == 1) {
            per_axis[i] = g[rest - 1] != 1;
            rest -= 1;
        }
    }
    if rest != 0 || g.is_empty() {
        let channels = if d.len() >= 2 { d[1] } else { 1 };
        return Err(Error::Value(format!(
            "{NAME}: gamma of shape {} does not broadcast to data of shape {}: it must be \
             (1,), ({channels},) or cover the data's first two axes",
            fmt_shape(g),
            fmt_shape(d)
        )));
    }
    let after = |axis: usize| d.iter().skip(axis + 1).product::<usize>();
    Ok(match per_axis {
        [false, false] => (1, d.iter().product::<usize>().max(1)),
        [false, true] => (d[1], after(1)),
        [true, false] => (d[0], after(0)),
        [true, true] => (d[0] * d[1], after(1)),
    })
}

/// The `LeakyReLU` operator.
pub(crate) struct LeakyRelu(pub(crate) Kind);

impl Operator for LeakyRelu {
    fn name(&self) -> &'static str {
        NAME
    }

    fn num_outputs(&self) -> usize {
        if matches!(self.0, Kind::Rrelu { .. }) {
            2
        } else {
            1
        }
    }

    fn num_visible_outputs(&self) -> usize {
        1
    }

    fn output_names(&self) -> Vec<String> {
        let names: &[&str] = if self.num_outputs() == 2 {
            &["output", "mask"]
        } else {
            &["output"]
        };
        names.iter().map(|s| s.to_string()).collect()
    }

    fn input_names(&self) -> Option<Vec<String>> {
        first_inputs(&["data", "gamma"], 1 + usize::from(self.0 == Kind::Prelu))
    }

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        let want = if self.0 == Kind::Prelu { 2 } else { 1 };
        if inputs.len() != want {
            return Err(Error::Value(format!(
                "{NAME}: act_type {} takes {want} input(s), got {}",
                self.0.name(),
                inputs.len()
            )));
        }
        same_shape(NAME, &mut inputs[..1], &mut outputs[..1])?;
        let Some(d) = inputs[0].clone() else {
            return Ok(());
        };
        if self.0 == Kind::Prelu {
            let channels = if d.len() >= 2 { d[1] } else { 1 };
            if inputs[1].is_none() {
                assign_shape(
                    NAME,
                    "gamma",
                    &mut inputs[1],
                    &Shape::from_slice(&[channels]),
                )?;
            }
            prelu_layout(&d, inputs[1].as_deref().unwrap_or(&[]))?;
        }
        if outputs.len() == 2 {
            assign_shape(NAME, "mask", &mut outputs[1], &d)?;
        }
        Ok(())
    }

    infer_from_partial!(shape);

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(NAME, inputs)?; self.num_outputs()])
    }

    fn resources(&self) -> &'static [ResourceRequest] {
        match self.0 {
            Kind::Rrelu { .. } => &[ResourceRequest::Random],
            _ => &[],
        }
    }

    fn gradient(&self) -> Grad {
        let op: OpRef = Arc::new(LeakyReluBackward(self.0));
        match self.0 {
            Kind::Prelu => Gradient::simple(op, &[0, 1], &[], 2),
            Kind::Rrelu { .. } => Grad::Op(Gradient {
                op,
                ograds: vec![0],
                inputs: vec![0],
                outputs: vec![1],
                grad_of: vec![0],
            }),
            _ => Gradient::simple(op, &[0], &[], 1),
        }
    }
}

/// Inputs: the output gradient, the data, then gamma (prelu) or the mask (rrelu).
/// Outputs: the data gradient, and gamma's for prelu.
pub(crate) struct LeakyReluBackward(pub(crate) Kind);

impl Operator for LeakyReluBackward {
    fn name(&self) -> &'static str {
        "_backward_LeakyReLU"
    }

    fn num_outputs(&self) -> usize {
        if self.0 == Kind::Prelu {
            2
        } else {
            1
        }
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        let want = match self.0 {
            Kind::Prelu | Kind::Rrelu { .. } => 3,
            _ => 2,
        };
        crate::op::check_inputs(self.name(), inputs, want)?;
        if inputs[0] != inputs[1] {
            return Err(crate::op::shape_err(
                self.name(),
                "the output gradient must have the shape of the data",
                &inputs[0],
            ));
        }
        let mut out = vec![inputs[1].clone()];
        if self.0 == Kind::Prelu {
            prelu_layout(&inputs[1], &inputs[2])?;
            out.push(inputs[2].clone());
        }
        Ok(out)
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(self.name(), inputs)?; self.num_outputs()])
    }
}

const PARAMS: &[Param] = &[
    Param::new(
        "act_type",
        "{'elu', 'gelu', 'leaky', 'prelu', 'rrelu', 'selu'}",
        "'leaky'",
        "Activation function to be applied.",
    ),
    Param::new(
        "slope",
        "float",
        "0.25",
        "Init slope for the activation. (For leaky and elu only)",
    ),
    Param::new(
        "lower_bound",
        "float",
        "0.125",
        "Lower bound of random slope. (For rrelu only)",
    ),
    Param::new(
        "upper_bound",
        "float",
        "0.334",
        "Upper bound of random slope. (For rrelu only)",
    ),
];

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared(NAME, attrs, PARAMS)?;
    let slope: f64 = p.get("slope")?;
    let lower: f64 = p.get("lower_bound")?;
    let upper: f64 = p.get("upper_bound")?;
    let kind = match p.get_choice(
        "act_type",
        &["leaky", "elu", "selu", "gelu", "prelu", "rrelu"],
    )? {
        "elu" => Kind::Elu(slope),
        "selu" => Kind::Selu,
        "gelu" => Kind::Gelu,
        "prelu" => Kind::Prelu,
        "rrelu" => {
            if lower > upper {
                return Err(Error::Value(format!(
                    "{NAME}: lower_bound {lower} must not exceed upper_bound {upper}"
                )));
            }
            Kind::Rrelu { lower, upper }
        }
        _ => Kind::Leaky(slope),
    };
    Ok(Arc::new(LeakyRelu(kind)))
}

/// Registers `LeakyReLU`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: NAME,
        aliases: &[],
        inputs: &["data", "gamma"],
        variadic: false,
        params: PARAMS,
        doc: "Leaky rectified linear units and their relatives (elu, selu, gelu, prelu, rrelu).",
        create: Box::new(create),
    });
}
