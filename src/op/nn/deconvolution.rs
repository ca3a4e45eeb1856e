//! Definition of `Deconvolution` (transposed convolution, 1-D to 3-D) and its backward.

use super::conv_args::ConvArgs;
use super::geometry::{check_data_ndim, to3, window_tuple, ColGeom, Dims3};
use crate::error::{Error, Result};
use crate::op::{
    assign_shape, check_inputs, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params,
    Registry,
};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

/// The `Deconvolution` operator.
#[derive(Debug, Clone)]
pub(crate) struct Deconvolution {
    pub(crate) args: ConvArgs,
    pub(crate) adj: Vec<usize>,
    /// Output extents; all zero (or empty) means unset.
    pub(crate) target: Vec<usize>,
}

/// The sizes of one deconvolution: `geom` unfolds an output sample (the image) onto the
/// grid of input positions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    pub(crate) batch: usize,
    pub(crate) in_channels: usize,
    pub(crate) groups: usize,
    pub(crate) geom: ColGeom,
}

impl Deconvolution {
    /// Padding and output adjustment per dimension, as MXNet derives them from
    /// `target_shape` when it is set.
    fn pad_adj(&self, input: &[usize]) -> Result<(Vec<usize>, Vec<usize>)> {
        let a = &self.args;
        if !self.target.iter().any(|&t| t != 0) {
            return Ok((a.pad.clone(), self.adj.clone()));
        }
        let win = a.window(&a.pad);
        let off = 3 - a.nd();
        let mut pad = Vec::new();
        let mut adj = Vec::new();
        for (i, (&x, &t)) in input.iter().zip(&self.target).enumerate() {
            let full = a.stride[i] * (x.max(1) - 1) + win.span(off + i);
            if full < t {
                return Err(Error::Value(format!(
                    "Deconvolution: target_shape {} is too big for data extent {x} along spatial axis {i} (at most {full})",
                    fmt_shape(&self.target)
                )));
            }
            adj.push((full - t) % 2);
            pad.push((full - t).div_ceil(2));
        }
        Ok((pad, adj))
    }

    pub(crate) fn plan(&self, data: &[usize]) -> Result<Plan> {
        let a = &self.args;
        let nd = a.nd();
        check_data_ndim("Deconvolution", data, nd)?;
        let channels = data[1];
        if !channels.is_multiple_of(a.num_group) {
            return Err(Error::Value(format!(
                "Deconvolution: input channels ({channels}) must be divisible by num_group ({}), data shape {}",
                a.num_group,
                fmt_shape(data)
            )));
        }
        let (pad, adj) = self.pad_adj(&data[2..])?;
        let win = a.window(&pad);
        let grid = to3(&data[2..], 1);
        let mut image: Dims3 = [1; 3];
        for i in 0..nd {
            let j = 3 - nd + i;
            if adj[i] >= a.stride[i] {
                return Err(Error::Value(format!(
                    "Deconvolution: adj ({}) must be smaller than stride ({}) along spatial axis {i}",
                    adj[i], a.stride[i]
                )));
            }
            let full = a.stride[i] * (grid[j].max(1) - 1) + win.span(j) + adj[i];
            if full < 2 * pad[i] || grid[j] == 0 {
                return Err(Error::Value(format!(
                    "Deconvolution: padding {} leaves no output along spatial axis {i}, data shape {}",
                    pad[i],
                    fmt_shape(data)
                )));
            }
            image[j] = full - 2 * pad[i];
        }
        Ok(Plan {
            batch: data[0],
            in_channels: channels,
            groups: a.num_group,
            geom: ColGeom {
                channels: a.num_filter,
                input: image,
                output: grid,
                win,
            },
        })
    }

    pub(crate) fn shapes(&self, data: &[usize]) -> Result<(Shape, Shape, Shape)> {
        let p = self.plan(data)?;
        let a = &self.args;
        let mut w = Shape::from_slice(&[data[1], a.num_filter / a.num_group]);
        w.extend_from_slice(&a.kernel);
        let mut out = Shape::from_slice(&[data[0], a.num_filter]);
        out.extend_from_slice(&p.geom.input[3 - a.nd()..]);
        Ok((w, Shape::from_slice(&[a.num_filter]), out))
    }
}

impl Operator for Deconvolution {
    fn name(&self) -> &'static str {
        "Deconvolution"
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
        if inputs.len() != self.args.num_inputs() {
            return Err(Error::Value(format!(
                "Deconvolution: expected {} input(s), got {}",
                self.args.num_inputs(),
                inputs.len()
            )));
        }
        let Some(data) = inputs[0].clone() else {
            return Ok(());
        };
        let (w, b, out) = self.shapes(&data)?;
        assign_shape("Deconvolution", "weight", &mut inputs[1], &w)?;
        if !self.args.no_bias {
            assign_shape("Deconvolution", "bias", &mut inputs[2], &b)?;
        }
        assign_shape("Deconvolution", "output", &mut outputs[0], &out)
    }

    fn gradient(&self) -> Grad {
        let op: OpRef = Arc::new(DeconvolutionBackward { fwd: self.clone() });
        Gradient::simple(op, &[0, 1], &[], self.args.num_inputs())
    }
}

/// `_backward_Deconvolution`: inputs (output gradient, data, weight); outputs the
/// gradients of data, weight and, with a bias, bias.
pub(crate) struct DeconvolutionBackward {
    pub(crate) fwd: Deconvolution,
}

impl Operator for DeconvolutionBackward {
    fn name(&self) -> &'static str {
        "_backward_Deconvolution"
    }

    fn num_outputs(&self) -> usize {
        self.fwd.args.num_inputs()
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("_backward_Deconvolution", inputs, 3)?;
        let (w, b, out) = self.fwd.shapes(&inputs[1])?;
        let name = "_backward_Deconvolution";
        assign_shape(name, "weight", &mut Some(inputs[2].clone()), &w)?;
        assign_shape(name, "output gradient", &mut Some(inputs[0].clone()), &out)?;
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
        "Deconvolution kernel size: (w,), (h, w) or (d, h, w). This is same as the kernel size \
         used for the corresponding convolution",
    ),
    Param::new(
        "stride",
        "Shape(tuple)",
        "[]",
        "The stride used for the corresponding convolution: (w,), (h, w) or (d, h, w). \
         Defaults to 1 for each dimension.",
    ),
    Param::new(
        "dilate",
        "Shape(tuple)",
        "[]",
        "Dilation factor for each dimension of the input: (w,), (h, w) or (d, h, w). Defaults \
         to 1 for each dimension.",
    ),
    Param::new(
        "pad",
        "Shape(tuple)",
        "[]",
        "The amount of implicit zero padding added during convolution for each dimension of \
         the input: (w,), (h, w) or (d, h, w). ``(kernel-1)/2`` is usually a good choice. If \
         `target_shape` is set, `pad` will be ignored and a padding that will generate the \
         target shape will be used. Defaults to no padding.",
    ),
    Param::new(
        "adj",
        "Shape(tuple)",
        "[]",
        "Adjustment for output shape: (w,), (h, w) or (d, h, w). If `target_shape` is set, \
         `adj` will be ignored and computed accordingly.",
    ),
    Param::new(
        "target_shape",
        "Shape(tuple)",
        "[]",
        "Shape of the output tensor: (w,), (h, w) or (d, h, w).",
    ),
    Param::required(
        "num_filter",
        "int (non-negative)",
        "Number of output filters.",
    ),
    Param::new(
        "num_group",
        "int (non-negative)",
        "1",
        "Number of groups partition.",
    ),
    Param::new(
        "workspace",
        "long (non-negative)",
        "512",
        "Maximum temporary workspace allowed (MB) in deconvolution.This parameter has two \
         usages. When CUDNN is not used, it determines the effective batch size of the \
         deconvolution kernel. When CUDNN is used, it controls the maximum temporary storage \
         used for tuning the best CUDNN kernel when `limited_workspace` strategy is used.",
    ),
    Param::new(
        "no_bias",
        "boolean",
        "True",
        "Whether to disable bias parameter.",
    ),
    Param::new(
        "cudnn_tune",
        "{None, 'fastest', 'limited_workspace', 'off'}",
        "None",
        "Whether to pick convolution algorithm by running performance test.",
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
        "Set layout for input, output and weight. Empty for default layout, NCW for 1d, NCHW \
         for 2d and NCDHW for 3d.NHWC and NDHWC are only supported on GPU.",
    ),
];

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("Deconvolution", attrs, PARAMS)?;
    let args = ConvArgs::parse(&p)?;
    let nd = args.nd();
    let adj = window_tuple(&p, "adj", nd, 0, 0)?;
    let target = window_tuple(&p, "target_shape", nd, 0, 0)?;
    Ok(Arc::new(Deconvolution { args, adj, target }))
}

/// Registers `Deconvolution`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "Deconvolution",
        aliases: &[],
        inputs: &["data", "weight", "bias"],
        variadic: false,
        params: PARAMS,
        doc: "Computes 1D, 2D or 3D transposed convolution of the input tensor.",
        create: Box::new(create),
    });
}
