//! Definitions of `softmax`, `log_softmax` (with `axis`, `temperature`, `dtype` and, for
//! `softmax`, a valid `length` input) and `SoftmaxActivation`, with their backward.

use super::common::{check_float, first_inputs, float_dtype, ograd_shape, same_shape};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::infer::check_count;
use crate::op::infer::infer_from_partial;
use crate::op::{
    assign_shape, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params, Registry,
    ShapeSlots, TypeSlots,
};
use crate::shape::{norm_axis, Shape};
use std::sync::Arc;

/// An array seen as (outer, n, inner), reduced along `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub outer: usize,
    pub n: usize,
    pub inner: usize,
}

impl Layout {
    /// The layout of `shape` reduced along `axis` (already normalised).
    pub fn along(shape: &[usize], axis: usize) -> Layout {
        Layout {
            outer: shape[..axis].iter().product(),
            n: shape[axis],
            inner: shape[axis + 1..].iter().product(),
        }
    }
}

/// The parsed attributes of `softmax` and `log_softmax`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SoftmaxParams {
    pub(crate) name: &'static str,
    pub(crate) log: bool,
    pub(crate) axis: i64,
    pub(crate) temperature: f64,
    pub(crate) dtype: Option<DType>,
    pub(crate) use_length: bool,
}

impl SoftmaxParams {
    pub(crate) fn layout(&self, shape: &[usize]) -> Result<Layout> {
        if shape.is_empty() {
            return Err(Error::Value(format!(
                "{}: data must have at least one dimension, got shape ()",
                self.name
            )));
        }
        Ok(Layout::along(
            shape,
            norm_axis(self.axis, shape.len(), self.name)?,
        ))
    }

    /// The shape a `length` input must have: the data's without the axis.
    fn length_shape(&self, d: &[usize]) -> Result<Shape> {
        let a = norm_axis(self.axis, d.len(), self.name)?;
        Ok(d.iter()
            .enumerate()
            .filter(|(i, _)| *i != a)
            .map(|(_, &v)| v)
            .collect())
    }
}

/// `softmax` or `log_softmax`.
pub(crate) struct Softmax(pub(crate) SoftmaxParams);

impl Operator for Softmax {
    fn name(&self) -> &'static str {
        self.0.name
    }

    fn input_names(&self) -> Option<Vec<String>> {
        first_inputs(&["data", "length"], 1 + usize::from(self.0.use_length))
    }

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        let want = if self.0.use_length { 2 } else { 1 };
        check_count(self.0.name, inputs.len(), want)?;
        same_shape(self.0.name, &mut inputs[..1], outputs)?;
        if let Some(d) = &inputs[0] {
            let ls = self.0.length_shape(d)?;
            if self.0.use_length {
                assign_shape(self.0.name, "length", &mut inputs[1], &ls)?;
            }
        }
        Ok(())
    }

    infer_from_partial!(shape);

    fn infer_type_partial(&self, inputs: &mut TypeSlots, outputs: &mut TypeSlots) -> Result<()> {
        if inputs[0].is_none() && self.0.dtype.is_none() {
            inputs[0] = outputs[0];
        }
        if let Some(&Some(l)) = inputs.get(1) {
            if !matches!(l, DType::I32 | DType::I64 | DType::I8 | DType::U8) {
                return Err(Error::Type(format!(
                    "{}: length must have an integer dtype, got {l}",
                    self.0.name
                )));
            }
        }
        if let Some(t) = inputs[0] {
            check_float(self.0.name, "data", t)?;
            let o = self.0.dtype.unwrap_or(t);
            match outputs[0] {
                Some(have) if have != o => {
                    return Err(Error::Type(format!(
                        "{}: output must have dtype {o}, got {have}",
                        self.0.name
                    )))
                }
                _ => outputs[0] = Some(o),
            }
        }
        Ok(())
    }

    infer_from_partial!(type);

    fn inplace(&self) -> &'static [(usize, usize)] {
        &[(0, 0)]
    }

    fn gradient(&self) -> Grad {
        let mut inputs = Vec::new();
        if self.0.dtype.is_some() {
            inputs.push(0);
        }
        if self.0.use_length {
            inputs.push(1);
        }
        let bw = SoftmaxBackward {
            p: self.0,
            name: match self.0.name {
                "log_softmax" => "_backward_log_softmax",
                "softmin" => "_backward_softmin",
                _ => "_backward_softmax",
            },
        };
        Grad::Op(Gradient {
            op: Arc::new(bw),
            ograds: vec![0],
            inputs,
            outputs: vec![0],
            grad_of: vec![0],
        })
    }
}

/// Inputs: the output gradient, the output, then the data when `dtype` is set (for the
/// gradient's type) and the length when `use_length` is.
pub(crate) struct SoftmaxBackward {
    pub(crate) p: SoftmaxParams,
    pub(crate) name: &'static str,
}

impl SoftmaxBackward {
    pub(crate) fn n_inputs(&self) -> usize {
        2 + usize::from(self.p.dtype.is_some()) + usize::from(self.p.use_length)
    }
}

impl Operator for SoftmaxBackward {
    fn name(&self) -> &'static str {
        self.name
    }

    fn outputs_before_inputs(&self) -> bool {
        true
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        let out = ograd_shape(self.name, inputs, self.n_inputs(), "output")?;
        self.p.layout(&inputs[1])?;
        Ok(out)
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        check_float(self.name, "output gradient", inputs[0])?;
        Ok(vec![if self.p.dtype.is_some() {
            inputs[2]
        } else {
            inputs[1]
        }])
    }
}

/// `SoftmaxActivation`: softmax over each instance (along the last axis, as MXNet's
/// flattening to 2-D does) or across channels (axis 1) at each position.
pub(crate) struct SoftmaxActivation {
    pub(crate) channel: bool,
}

impl SoftmaxActivation {
    pub(crate) fn layout(&self, d: &[usize]) -> Result<Layout> {
        if d.is_empty() {
            return Err(Error::Value(
                "SoftmaxActivation: data must have at least one dimension, got shape ()".into(),
            ));
        }
        Ok(if d.len() == 1 {
            Layout {
                outer: 1,
                n: d[0],
                inner: 1,
            }
        } else if self.channel {
            Layout::along(d, 1)
        } else {
            Layout::along(d, d.len() - 1)
        })
    }
}

impl Operator for SoftmaxActivation {
    fn name(&self) -> &'static str {
        "SoftmaxActivation"
    }

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        if let Some(d) = &inputs[0] {
            self.layout(d)?;
        }
        same_shape(self.name(), inputs, outputs)
    }

    infer_from_partial!(shape);

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(self.name(), inputs)?])
    }

    fn gradient(&self) -> Grad {
        let bw = SoftmaxActivationBackward {
            channel: self.channel,
        };
        Gradient::simple(Arc::new(bw), &[], &[0], 1)
    }
}

/// Inputs: the output gradient and the output.
pub(crate) struct SoftmaxActivationBackward {
    pub(crate) channel: bool,
}

impl Operator for SoftmaxActivationBackward {
    fn name(&self) -> &'static str {
        "_backward_SoftmaxActivation"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        ograd_shape(self.name(), inputs, 2, "output")
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(self.name(), inputs)?])
    }
}

const SOFTMAX_PARAMS: &[Param] = &[
    Param::new(
        "axis",
        "int",
        "-1",
        "The axis along which to compute softmax.",
    ),
    Param::new(
        "temperature",
        "double or None",
        "None",
        "Temperature parameter in softmax",
    ),
    Param::new(
        "dtype",
        "{None, 'float16', 'float32', 'float64'}",
        "None",
        "DType of the output in case this can't be inferred. Defaults to the same as input's \
         dtype if not defined (dtype=None).",
    ),
    Param::new(
        "use_length",
        "boolean or None",
        "False",
        "Whether to use the length input as a mask over the data input.",
    ),
];
const ACTIVATION_PARAMS: &[Param] = &[Param::new(
    "mode",
    "{'channel', 'instance'}",
    "'instance'",
    "Specifies how to compute the softmax. If set to ``instance``, it computes softmax for \
     each instance. If set to ``channel``, It computes cross channel softmax for each \
     position of each instance.",
)];

/// `softmax`, `log_softmax` or, as a softmax of negated temperature, `softmin`.
fn create_softmax(name: &'static str, log: bool, attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared(name, attrs, SOFTMAX_PARAMS)?;
    let dtype: Option<DType> = p.get("dtype")?;
    if let Some(t) = dtype {
        check_float(name, "dtype", t)?;
    }
    let use_length = p.get::<Option<bool>>("use_length")?.unwrap_or(false);
    if use_length && log {
        return Err(Error::Value(format!(
            "{name}: use_length is only supported by softmax"
        )));
    }
    Ok(Arc::new(Softmax(SoftmaxParams {
        name,
        log,
        axis: p.get("axis")?,
        temperature: p.get::<Option<f64>>("temperature")?.unwrap_or(1.0)
            * if name == "softmin" { -1.0 } else { 1.0 },
        dtype,
        use_length,
    })))
}

/// Registers `softmax`, `log_softmax` and `SoftmaxActivation`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "softmax",
        aliases: &[],
        inputs: &["data", "length"],
        variadic: false,
        params: SOFTMAX_PARAMS,
        doc: "Softmax along an axis: exp(x/T) / sum(exp(x/T)).",
        create: Box::new(|a| create_softmax("softmax", false, a)),
    });
    r.add(OpDef {
        name: "softmin",
        aliases: &[],
        inputs: &["data", "length"],
        variadic: false,
        params: SOFTMAX_PARAMS,
        doc: "Softmin along an axis: exp(-x/T) / sum(exp(-x/T)).",
        create: Box::new(|a| create_softmax("softmin", false, a)),
    });
    r.add(OpDef {
        name: "log_softmax",
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: SOFTMAX_PARAMS,
        doc: "Log of the softmax along an axis.",
        create: Box::new(|a| create_softmax("log_softmax", true, a)),
    });
    r.add(OpDef {
        name: "SoftmaxActivation",
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: ACTIVATION_PARAMS,
        doc: "Softmax over each instance or across channels.",
        create: Box::new(|a| {
            let p = Params::declared("SoftmaxActivation", a, ACTIVATION_PARAMS)?;
            let mode = p.get_choice("mode", &["instance", "channel"])?;
            Ok(Arc::new(SoftmaxActivation {
                channel: mode == "channel",
            }))
        }),
    });
}
