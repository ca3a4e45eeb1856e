//! Definition of `BatchNorm` over any channel axis, with moving statistics as auxiliary
//! states, and its backward.

use crate::error::{Error, Result};
use crate::op::infer::check_count;
use crate::op::infer::infer_from_partial;
use crate::op::{
    assign_shape, check_inputs, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params,
    Registry, ShapeSlots,
};
use crate::shape::{fmt_shape, norm_axis, Shape};
use std::sync::Arc;

/// The `BatchNorm` operator.
#[derive(Debug, Clone)]
pub(crate) struct BatchNorm {
    pub(crate) eps: f64,
    pub(crate) momentum: f64,
    pub(crate) fix_gamma: bool,
    pub(crate) use_global_stats: bool,
    pub(crate) output_mean_var: bool,
    pub(crate) axis: i64,
}

/// The data viewed as (outer, channels, inner).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    pub(crate) outer: usize,
    pub(crate) channels: usize,
    pub(crate) inner: usize,
}

impl BatchNorm {
    /// The data seen as (outer, channels, inner) around the channel axis.
    pub(crate) fn layout(&self, data: &[usize]) -> Result<Layout> {
        if data.is_empty() {
            return Err(Error::Value(
                "BatchNorm: data must have at least one dimension, got shape ()".into(),
            ));
        }
        let axis = norm_axis(self.axis, data.len(), "BatchNorm")?;
        Ok(Layout {
            outer: data[..axis].iter().product(),
            channels: data[axis],
            inner: data[axis + 1..].iter().product(),
        })
    }

    /// True if the batch statistics are used (and the moving ones updated).
    pub(crate) fn batch_stats(&self, is_train: bool) -> bool {
        is_train && !self.use_global_stats
    }
}

impl Operator for BatchNorm {
    fn name(&self) -> &'static str {
        "BatchNorm"
    }

    fn input_var_attrs(&self, input: usize) -> &'static [(&'static str, &'static str)] {
        match input {
            3 => &[("__init__", "[\"zero\", {}]")],
            4 => &[("__init__", "[\"one\", {}]")],
            _ => &[],
        }
    }

    fn num_outputs(&self) -> usize {
        3
    }

    fn num_visible_outputs(&self) -> usize {
        if self.output_mean_var {
            3
        } else {
            1
        }
    }

    fn output_names(&self) -> Vec<String> {
        vec!["output".into(), "mean".into(), "var".into()]
    }

    fn aux_inputs(&self) -> Vec<usize> {
        vec![3, 4]
    }

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        check_count("BatchNorm", inputs.len(), 5)?;
        if inputs[0].is_none() {
            if let Some(y) = &outputs[0] {
                inputs[0] = Some(y.clone());
            }
        }
        let Some(data) = inputs[0].clone() else {
            return Ok(());
        };
        let l = self.layout(&data).map_err(|e| {
            Error::Value(format!("{} (data shape {})", e.message(), fmt_shape(&data)))
        })?;
        let c = Shape::from_slice(&[l.channels]);
        for (i, name) in ["gamma", "beta", "moving_mean", "moving_var"]
            .iter()
            .enumerate()
        {
            assign_shape("BatchNorm", name, &mut inputs[i + 1], &c)?;
        }
        assign_shape("BatchNorm", "output", &mut outputs[0], &data)?;
        assign_shape("BatchNorm", "mean", &mut outputs[1], &c)?;
        assign_shape("BatchNorm", "var", &mut outputs[2], &c)
    }

    infer_from_partial!(shape);

    fn gradient(&self) -> Grad {
        Grad::Op(Gradient {
            op: Arc::new(BatchNormBackward { fwd: self.clone() }),
            ograds: vec![0],
            inputs: vec![0, 1],
            outputs: vec![1, 2],
            grad_of: vec![0, 1, 2],
        })
    }
}

/// `_backward_BatchNorm`: inputs (output gradient, data, gamma, saved mean, saved inverse
/// standard deviation); outputs the gradients of data, gamma and beta.
pub(crate) struct BatchNormBackward {
    pub(crate) fwd: BatchNorm,
}

impl Operator for BatchNormBackward {
    fn name(&self) -> &'static str {
        "_backward_BatchNorm"
    }

    fn num_outputs(&self) -> usize {
        3
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("_backward_BatchNorm", inputs, 5)?;
        let l = self.fwd.layout(&inputs[1])?;
        let c = Shape::from_slice(&[l.channels]);
        Ok(vec![inputs[1].clone(), c.clone(), c])
    }
}

/// `_backward_rsmx_bn_relu`: `_backward_BatchNorm` of the gradient through the ReLU after
/// the BatchNorm, which it computes element by element instead of reading it. Inputs: the
/// ReLU's output gradient, the ReLU's output, then `_backward_BatchNorm`'s data, gamma,
/// saved mean and saved inverse standard deviation; outputs as `_backward_BatchNorm`'s.
/// Executors bound with gradients on the CPU make these nodes at bind time
/// (`executor::fuse_backward`); no symbol or file ever holds one.
pub(crate) struct BatchNormReluBackward {
    pub(crate) fwd: BatchNorm,
}

/// The operator's name, as profiles and errors show it.
pub(crate) const RELU_BACKWARD: &str = "_backward_rsmx_bn_relu";

impl Operator for BatchNormReluBackward {
    fn name(&self) -> &'static str {
        RELU_BACKWARD
    }

    fn num_outputs(&self) -> usize {
        3
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(RELU_BACKWARD, inputs, 6)?;
        for (k, what) in [(0, "output gradient"), (1, "ReLU output")] {
            if inputs[k] != inputs[2] {
                return Err(Error::Value(format!(
                    "{RELU_BACKWARD}: the {what} has shape {}, the data {}",
                    fmt_shape(&inputs[k]),
                    fmt_shape(&inputs[2])
                )));
            }
        }
        let l = self.fwd.layout(&inputs[2])?;
        let c = Shape::from_slice(&[l.channels]);
        Ok(vec![inputs[2].clone(), c.clone(), c])
    }
}

/// A bound of the calibration range MXNet's quantized BatchNorm reads; accepted and
/// unused here.
macro_rules! calib_range {
    ($name:literal, $bound:literal) => {
        Param::new(
            $name,
            "float or None",
            "None",
            concat!(
                "The ",
                $bound,
                " scalar value in the form of float32 obtained through calibration. If \
                 present, it will be used to by quantized batch norm op to calculate primitive \
                 scale.Note: this calib_range is to calib bn output."
            ),
        )
    };
}

const PARAMS: &[Param] = &[
    Param::new(
        "eps",
        "double",
        "0.0010000000474974513",
        "Epsilon to prevent div 0. Must be no less than CUDNN_BN_MIN_EPSILON defined in \
         cudnn.h when using cudnn (usually 1e-5)",
    ),
    Param::new(
        "momentum",
        "float",
        "0.899999976",
        "Momentum for moving average",
    ),
    Param::new("fix_gamma", "boolean", "True", "Fix gamma while training"),
    Param::new(
        "use_global_stats",
        "boolean",
        "False",
        "Whether use global moving statistics instead of local batch-norm. This will force \
         change batch-norm into a scale shift operator.",
    ),
    Param::new(
        "output_mean_var",
        "boolean",
        "False",
        "Output the mean and inverse std ",
    ),
    Param::new(
        "axis",
        "int",
        "1",
        "Specify which shape axis the channel is specified",
    ),
    Param::new(
        "cudnn_off",
        "boolean",
        "False",
        "Do not select CUDNN operator, if available",
    ),
    calib_range!("min_calib_range", "minimum"),
    calib_range!("max_calib_range", "maximum"),
];

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("BatchNorm", attrs, PARAMS)?;
    p.get::<bool>("cudnn_off")?;
    p.get::<Option<f64>>("min_calib_range")?;
    p.get::<Option<f64>>("max_calib_range")?;
    let mut momentum: f64 = p.get("momentum")?;
    if p.raw("momentum").is_none() {
        // MXNet's default is the float 0.9, printed to nine digits.
        momentum = momentum as f32 as f64;
    }
    Ok(Arc::new(BatchNorm {
        // MXNet's default is the float 1e-3 widened to double.
        eps: p.get("eps")?,
        momentum,
        fix_gamma: p.get("fix_gamma")?,
        use_global_stats: p.get("use_global_stats")?,
        output_mean_var: p.get("output_mean_var")?,
        axis: p.get("axis")?,
    }))
}

/// Registers `BatchNorm`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "BatchNorm",
        aliases: &[],
        inputs: &["data", "gamma", "beta", "moving_mean", "moving_var"],
        variadic: false,
        params: PARAMS,
        doc: "Batch normalization.",
        create: Box::new(create),
    });
}
