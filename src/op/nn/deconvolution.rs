//! Definition of `Deconvolution` (transposed convolution, 1-D to 3-D) and its backward.

use super::conv_layer::{ConvArgs, ConvBackward, ConvLayer, CUDNN_OFF};
use super::geometry::{to3, window_tuple, ColGeom, Dims3};
use crate::error::{Error, Result};
use crate::op::{Attrs, OpDef, OpRef, Param, Params, Registry};
use crate::shape::fmt_shape;
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
        let channels = a.check_data("Deconvolution", data)?;
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
}

impl ConvLayer for Deconvolution {
    const NAME: &'static str = "Deconvolution";
    const BACKWARD: &'static str = "_backward_Deconvolution";

    fn args(&self) -> &ConvArgs {
        &self.args
    }

    fn weight_lead(&self, channels: usize) -> [usize; 2] {
        [channels, self.args.num_filter / self.args.num_group]
    }

    /// The image a convolution with this window would read.
    fn out_spatial(&self, data: &[usize]) -> Result<[usize; 3]> {
        Ok(self.plan(data)?.geom.input)
    }
}

/// `_backward_Deconvolution`.
pub(crate) type DeconvolutionBackward = ConvBackward<Deconvolution>;

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
    CUDNN_OFF,
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
