//! Definition of `Convolution` (1-D, 2-D and 3-D, grouped, strided, padded, dilated)
//! and its backward.

use super::common::NO_BIAS;
use super::conv_layer::{ConvArgs, ConvBackward, ConvLayer, CUDNN_OFF};
use super::geometry::{to3, ColGeom, Window};
use crate::error::{Error, Result};
use crate::op::{Attrs, OpDef, OpRef, Param, Params, Registry};
use crate::shape::{fmt_shape, is_partial, Shape};
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
#[derive(Debug, Clone)]
pub(crate) struct Convolution {
    pub(crate) args: ConvArgs,
}

impl Convolution {
    /// Checks `data` against the arguments and sizes the convolution.
    pub(crate) fn plan(&self, data: &[usize]) -> Result<Plan> {
        let a = &self.args;
        let nd = a.nd();
        let channels = a.check_data("Convolution", data)?;
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
}

impl ConvLayer for Convolution {
    const NAME: &'static str = "Convolution";
    const BACKWARD: &'static str = "_backward_Convolution";

    fn args(&self) -> &ConvArgs {
        &self.args
    }

    fn weight_lead(&self, channels: usize) -> [usize; 2] {
        [self.args.num_filter, channels / self.args.num_group]
    }

    fn out_spatial(&self, data: &[usize]) -> Result<[usize; 3]> {
        Ok(self.plan(data)?.geom.output)
    }

    /// With unit strides the data shape follows from the output and weight shapes.
    fn data_from_output(&self, out: &Shape, w: &Shape) -> Option<Shape> {
        let a = &self.args;
        if !(a.stride.iter().all(|&s| s == 1) && out.len() == a.nd() + 2 && w.len() >= 2) {
            return None;
        }
        let win = a.window(&a.pad);
        let mut d = Shape::from_slice(&[out[0], w[1] * a.num_group]);
        for (i, &o) in out[2..].iter().enumerate() {
            let j = 3 - a.nd() + i;
            // An unknown (0) output size leaves the input's unknown.
            let unknown = o == 0 && is_partial(out);
            d.push(if unknown {
                0
            } else {
                (o + win.span(j) - 1).saturating_sub(2 * win.pad[j])
            });
        }
        Some(d)
    }
}

/// `_backward_Convolution`.
pub(crate) type ConvolutionBackward = ConvBackward<Convolution>;

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
    NO_BIAS,
    Param::new(
        "cudnn_tune",
        "{None, 'fastest', 'limited_workspace', 'off'}",
        "None",
        "Whether to pick convolution algo by running performance test.",
    ),
    CUDNN_OFF,
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
