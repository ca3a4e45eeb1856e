//! What `Convolution` and `Deconvolution` share: their common arguments, parsed as
//! MXNet parses them, the checks of the data against them, shape inference and the
//! backward operator's definition.

use super::common::first_inputs;
use super::geometry::{check_data_ndim, check_layout, kernel_tuple, window_tuple, Window};
use crate::error::{Error, Result};
use crate::op::infer::check_count;
use crate::op::infer::infer_from_partial;
use crate::op::{
    assign_shape, check_inputs, Grad, Gradient, OpRef, Operator, Param, Params, ResourceRequest,
    ShapeSlots,
};
use crate::shape::{fmt_shape, is_partial, Shape};
use smallvec::SmallVec;
use std::sync::Arc;

/// The `cudnn_off` attribute both layers declare.
pub const CUDNN_OFF: Param = Param::new(
    "cudnn_off",
    "boolean",
    "False",
    "Turn off cudnn for this layer.",
);

/// Parsed convolution arguments.
#[derive(Debug, Clone)]
pub struct ConvArgs {
    /// Kernel extent per spatial dimension (1 to 3 entries).
    pub kernel: Vec<usize>,
    pub stride: Vec<usize>,
    pub dilate: Vec<usize>,
    pub pad: Vec<usize>,
    pub num_filter: usize,
    pub num_group: usize,
    pub no_bias: bool,
}

impl ConvArgs {
    /// Parses the arguments both operators take from `p`, which declares them.
    pub fn parse(p: &Params) -> Result<ConvArgs> {
        let op = p.op();
        let kernel = kernel_tuple(p, true)?;
        let nd = kernel.len();
        let num_filter: i64 = p.get("num_filter")?;
        if num_filter <= 0 {
            return Err(Error::Value(format!(
                "{op}: num_filter must be positive, got {num_filter}"
            )));
        }
        let num_group: i64 = p.get("num_group")?;
        if num_group <= 0 {
            return Err(Error::Value(format!(
                "{op}: num_group must be positive, got {num_group}"
            )));
        }
        if num_filter % num_group != 0 {
            return Err(Error::Value(format!(
                "{op}: num_filter ({num_filter}) must be divisible by num_group ({num_group})"
            )));
        }
        p.get::<usize>("workspace")?;
        p.get::<bool>("cudnn_off")?;
        p.get_choice(
            "cudnn_tune",
            &["None", "fastest", "limited_workspace", "off"],
        )?;
        check_layout(p, nd)?;
        Ok(ConvArgs {
            stride: window_tuple(p, "stride", nd, 1, 1)?,
            dilate: window_tuple(p, "dilate", nd, 1, 1)?,
            pad: window_tuple(p, "pad", nd, 0, 0)?,
            kernel,
            num_filter: num_filter as usize,
            num_group: num_group as usize,
            no_bias: p.get("no_bias")?,
        })
    }

    /// Number of spatial dimensions.
    pub fn nd(&self) -> usize {
        self.kernel.len()
    }

    /// The window with the given padding (deconvolution may compute its own).
    pub fn window(&self, pad: &[usize]) -> Window {
        Window::new(&self.kernel, &self.stride, &self.dilate, pad)
    }

    /// Number of inputs.
    pub fn num_inputs(&self) -> usize {
        if self.no_bias {
            2
        } else {
            3
        }
    }

    /// Checks that `data` has a batch axis, a channel axis divisible by `num_group` and
    /// one spatial axis per kernel dimension; returns the channels.
    pub fn check_data(&self, op: &str, data: &[usize]) -> Result<usize> {
        check_data_ndim(op, data, self.nd())?;
        let channels = data[1];
        if !channels.is_multiple_of(self.num_group) {
            return Err(Error::Value(format!(
                "{op}: input channels ({channels}) must be divisible by num_group ({}), data shape {}",
                self.num_group,
                fmt_shape(data)
            )));
        }
        Ok(channels)
    }

    /// Shapes of weight, bias and output for `data`: the weight's two leading extents
    /// are `lead`, the output's spatial extents the last `nd` of `spatial`.
    pub fn layer_shapes(
        &self,
        data: &[usize],
        lead: [usize; 2],
        spatial: &[usize; 3],
    ) -> (Shape, Shape, Shape) {
        let mut w = Shape::from_slice(&lead);
        w.extend_from_slice(&self.kernel);
        let mut out = Shape::from_slice(&[data[0], self.num_filter]);
        out.extend_from_slice(&spatial[3 - self.nd()..]);
        (w, Shape::from_slice(&[self.num_filter]), out)
    }
}

/// A layer built on [`ConvArgs`]: `Convolution` or `Deconvolution`. Each is an
/// [`Operator`] through what it says here.
pub(crate) trait ConvLayer: Clone + Send + Sync + 'static {
    /// The operator's name.
    const NAME: &'static str;
    /// Its backward operator's name.
    const BACKWARD: &'static str;

    /// The shared arguments.
    fn args(&self) -> &ConvArgs;

    /// The weight's two leading extents for data with `channels` channels.
    fn weight_lead(&self, channels: usize) -> [usize; 2];

    /// The output's spatial extents (padded to three) for `data`, or an error if `data`
    /// does not fit.
    fn out_spatial(&self, data: &[usize]) -> Result<[usize; 3]>;

    /// Shapes of weight, bias and output for `data`, or an error if `data` does not fit.
    fn shapes(&self, data: &[usize]) -> Result<(Shape, Shape, Shape)> {
        let spatial = self.out_spatial(data)?;
        let lead = self.weight_lead(data[1]);
        Ok(self.args().layer_shapes(data, lead, &spatial))
    }

    /// The data shape, where it follows from the output and weight shapes.
    fn data_from_output(&self, _out: &Shape, _weight: &Shape) -> Option<Shape> {
        None
    }
}

/// The spatial size that stands in for an unknown one while inferring the others.
const PROBE_EXTENT: usize = 1 << 16;

/// The resources both layers ask for: scratch space for their column matrices.
const RESOURCES: &[ResourceRequest] = &[ResourceRequest::TempSpace];

impl<L: ConvLayer> Operator for L {
    fn name(&self) -> &'static str {
        L::NAME
    }

    fn input_names(&self) -> Option<Vec<String>> {
        first_inputs(&["data", "weight", "bias"], self.args().num_inputs())
    }

    fn resources(&self) -> &'static [ResourceRequest] {
        RESOURCES
    }

    /// Shape inference in both directions where the layer allows.
    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        let a = self.args();
        check_count(L::NAME, inputs.len(), a.num_inputs())?;
        if let (Some(out), Some(w)) = (&outputs[0], &inputs[1]) {
            if inputs[0].as_ref().is_none_or(|d| is_partial(d)) {
                if let Some(d) = self.data_from_output(out, w) {
                    assign_shape(L::NAME, "data", &mut inputs[0], &d)?;
                }
            }
        }
        let Some(data) = inputs[0].clone() else {
            return Ok(());
        };
        // Unknown (0) spatial sizes are sized to fit for the probe, and stay unknown in
        // the output.
        let unknown: SmallVec<[usize; 3]> = (2..data.len())
            .filter(|&i| data[i] == 0 && is_partial(&data))
            .collect();
        let mut probe = data.clone();
        for &i in &unknown {
            probe[i] = PROBE_EXTENT;
        }
        let (w, b, mut out) = match self.shapes(&probe) {
            Ok(shapes) => shapes,
            Err(_) if is_partial(&data) => return Ok(()),
            Err(e) => return Err(e),
        };
        for &i in &unknown {
            out[i] = 0;
        }
        assign_shape(L::NAME, "weight", &mut inputs[1], &w)?;
        if !a.no_bias {
            assign_shape(L::NAME, "bias", &mut inputs[2], &b)?;
        }
        assign_shape(L::NAME, "output", &mut outputs[0], &out)?;
        // The output tells an unknown batch size.
        match &outputs[0] {
            Some(out) if data.first() == Some(&0) && !out.is_empty() => {
                let mut batch = data;
                batch[0] = out[0];
                assign_shape(L::NAME, "data", &mut inputs[0], &batch)
            }
            _ => Ok(()),
        }
    }

    infer_from_partial!(shape);

    fn gradient(&self) -> Grad {
        let bw: OpRef = Arc::new(ConvBackward { fwd: self.clone() });
        Gradient::simple(bw, &[0, 1], &[], self.args().num_inputs())
    }
}

/// `_backward_Convolution` and `_backward_Deconvolution`: inputs (output gradient, data,
/// weight); outputs the gradients of data, weight and, with a bias, bias.
pub(crate) struct ConvBackward<L> {
    pub(crate) fwd: L,
}

impl<L: ConvLayer> Operator for ConvBackward<L> {
    fn name(&self) -> &'static str {
        L::BACKWARD
    }

    fn num_outputs(&self) -> usize {
        self.fwd.args().num_inputs()
    }

    fn resources(&self) -> &'static [ResourceRequest] {
        RESOURCES
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(L::BACKWARD, inputs, 3)?;
        let (w, b, out) = self.fwd.shapes(&inputs[1])?;
        assign_shape(L::BACKWARD, "weight", &mut Some(inputs[2].clone()), &w)?;
        assign_shape(
            L::BACKWARD,
            "output gradient",
            &mut Some(inputs[0].clone()),
            &out,
        )?;
        let mut v = vec![inputs[1].clone(), w];
        if !self.fwd.args().no_bias {
            v.push(b);
        }
        Ok(v)
    }
}
