//! Definition of `Convolution` (1-D, 2-D and 3-D, grouped, strided, padded, dilated)
//! and its backward.

use super::conv_args::ConvArgs;
use super::geometry::{check_data_ndim, to3, ColGeom, Window};
use crate::error::{Error, Result};
use crate::op::{
    assign_shape, check_inputs, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params,
    Registry,
};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

/// The sizes of one convolution.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    pub batch: usize,
    pub filters: usize,
    pub groups: usize,
    /// The unfolding of one sample's input.
    pub geom: ColGeom,
}

/// Output extent of a convolution along one dimension, or `None` if the dilated kernel
/// does not fit the padded input.
pub(crate) fn conv_out(input: usize, win: &Window, i: usize) -> Option<usize> {
    let padded = input + 2 * win.pad[i];
    let span = win.span(i);
    (span <= padded).then(|| (padded - span) / win.stride[i] + 1)
}

/// The `Convolution` operator.
pub(crate) struct Convolution {
    pub(crate) args: ConvArgs,
}

impl Convolution {
    /// Checks `data` against the arguments and sizes the convolution.
    pub(crate) fn plan(&self, data: &[usize]) -> Result<Plan> {
        let a = &self.args;
        let nd = a.nd();
        check_data_ndim("Convolution", data, nd)?;
        let channels = data[1];
        if !channels.is_multiple_of(a.num_group) {
            return Err(Error::Value(format!(
                "Convolution: input channels ({channels}) must be divisible by num_group ({}), data shape {}",
                a.num_group,
                fmt_shape(data)
            )));
        }
        let win = a.window(&a.pad);
        let input = to3(&data[2..], 1);
        let mut output = [1; 3];
        for i in 3 - nd..3 {
            output[i] = conv_out(input[i], &win, i).ok_or_else(|| {
                Error::Value(format!(
                    "Convolution: kernel size {} (dilated {}) exceeds input {} padded to {} along spatial axis {}, data shape {}",
                    win.kernel[i],
                    win.span(i),
                    input[i],
                    input[i] + 2 * win.pad[i],
                    i + nd - 3,
                    fmt_shape(data)
                ))
            })?;
        }
        Ok(Plan {
            batch: data[0],
            filters: a.num_filter,
            groups: a.num_group,
            geom: ColGeom {
                channels,
                input,
                output,
                win,
            },
        })
    }

    /// Shapes of weight, bias and output for `data`.
    pub(crate) fn shapes(&self, data: &[usize]) -> Result<(Shape, Shape, Shape)> {
        let p = self.plan(data)?;
        let a = &self.args;
        let mut w = Shape::from_slice(&[a.num_filter, data[1] / a.num_group]);
        w.extend_from_slice(&a.kernel);
        let mut out = Shape::from_slice(&[data[0], a.num_filter]);
        out.extend_from_slice(&p.geom.output[3 - a.nd()..]);
        Ok((w, Shape::from_slice(&[a.num_filter]), out))
    }
}

impl Operator for Convolution {
    fn name(&self) -> &'static str {
        "Convolution"
    }

    fn input_names(&self) -> Option<Vec<String>> {
        Some(self.args.input_names())
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        crate::op::infer::shapes_from_partial(self, inputs)
    }

    fn infer_shape_partial(
        &self,
        inputs: &mut [Option<Shape>],
        outputs: &mut [Option<Shape>],
    ) -> Result<()> {
        check_inputs_len(inputs, self.args.num_inputs())?;
        let a = &self.args;
        // With unit strides the data shape follows from the output and weight shapes.
        if let (None, Some(out), Some(w)) = (&inputs[0], &outputs[0], &inputs[1]) {
            if a.stride.iter().all(|&s| s == 1) && out.len() == a.nd() + 2 && w.len() >= 2 {
                let win = a.window(&a.pad);
                let mut d = Shape::from_slice(&[out[0], w[1] * a.num_group]);
                for (i, &o) in out[2..].iter().enumerate() {
                    let j = 3 - a.nd() + i;
                    d.push((o + win.span(j) - 1).saturating_sub(2 * win.pad[j]));
                }
                inputs[0] = Some(d);
            }
        }
        let Some(data) = inputs[0].clone() else {
            return Ok(());
        };
        let (w, b, out) = self.shapes(&data)?;
        assign_shape("Convolution", "weight", &mut inputs[1], &w)?;
        if !a.no_bias {
            assign_shape("Convolution", "bias", &mut inputs[2], &b)?;
        }
        assign_shape("Convolution", "output", &mut outputs[0], &out)
    }

    fn gradient(&self) -> Grad {
        let op: OpRef = Arc::new(ConvolutionBackward {
            fwd: Convolution {
                args: self.args.clone(),
            },
        });
        Gradient::simple(op, &[0, 1], &[], self.args.num_inputs())
    }
}

fn check_inputs_len(inputs: &[Option<Shape>], want: usize) -> Result<()> {
    if inputs.len() != want {
        return Err(Error::Value(format!(
            "Convolution: expected {want} input(s), got {}",
            inputs.len()
        )));
    }
    Ok(())
}

/// `_backward_Convolution`: inputs (output gradient, data, weight); outputs the
/// gradients of data, weight and, with a bias, bias.
pub(crate) struct ConvolutionBackward {
    pub(crate) fwd: Convolution,
}

impl Operator for ConvolutionBackward {
    fn name(&self) -> &'static str {
        "_backward_Convolution"
    }

    fn num_outputs(&self) -> usize {
        self.fwd.args.num_inputs()
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("_backward_Convolution", inputs, 3)?;
        let (w, b, out) = self.fwd.shapes(&inputs[1])?;
        assign_shape(
            "_backward_Convolution",
            "weight",
            &mut Some(inputs[2].clone()),
            &w,
        )?;
        assign_shape(
            "_backward_Convolution",
            "output gradient",
            &mut Some(inputs[0].clone()),
            &out,
        )?;
        let mut v = vec![inputs[1].clone(), w];
        if !self.fwd.args.no_bias {
            v.push(b);
        }
        Ok(v)
    }
}

const PARAMS: &[Param] = &[
    Param::required(
        "kernel",
        "Shape(tuple)",
        "Convolution kernel size: (w,), (h, w) or (d, h, w)",
    ),
    Param::new(
        "stride",
        "Shape(tuple)",
        "[]",
        "Convolution stride: (w,), (h, w) or (d, h, w). Defaults to 1 for each dimension.",
    ),
    Param::new(
        "dilate",
        "Shape(tuple)",
        "[]",
        "Convolution dilate: (w,), (h, w) or (d, h, w). Defaults to 1 for each dimension.",
    ),
    Param::new(
        "pad",
        "Shape(tuple)",
        "[]",
        "Zero pad for convolution: (w,), (h, w) or (d, h, w). Defaults to no padding.",
    ),
    Param::required(
        "num_filter",
        "int (non-negative)",
        "Convolution filter(channel) number",
    ),
    Param::new(
        "num_group",
        "int (non-negative)",
        "1",
        "Number of group partitions.",
    ),
    Param::new(
        "workspace",
        "long (non-negative)",
        "1024",
        "Maximum temporary workspace allowed (MB) in convolution.This parameter has two usages. \
         When CUDNN is not used, it determines the effective batch size of the convolution \
         kernel. When CUDNN is used, it controls the maximum temporary storage used for tuning \
         the best CUDNN kernel when `limited_workspace` strategy is used.",
    ),
    Param::new(
        "no_bias",
        "boolean",
        "False",
        "Whether to disable bias parameter.",
    ),
    Param::new(
        "cudnn_tune",
        "{None, 'fastest', 'limited_workspace', 'off'}",
        "None",
        "Whether to pick convolution algo by running performance test.",
    ),
    Param::new(
        "cudnn_off",
        "boolean",
        "False",
        "Turn off cudnn for this layer.",
    ),
    Param::new(
        "layout",
        "{None, 'NCDHW', 'NCHW', 'NCW', 'NDHWC', 'NHWC'}",
        "None",
        "Set layout for input, output and weight. Empty for default layout: NCW for 1d, NCHW \
         for 2d and NCDHW for 3d.NHWC and NDHWC are only supported on GPU.",
    ),
];

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("Convolution", attrs, PARAMS)?;
    let args = ConvArgs::parse(&p)?;
    Ok(Arc::new(Convolution { args }))
}

/// Registers `Convolution`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "Convolution",
        aliases: &[],
        inputs: &["data", "weight", "bias"],
        variadic: false,
        params: PARAMS,
        doc: "Compute N-D convolution on (N+2)-D input.",
        create: Box::new(create),
    });
}
