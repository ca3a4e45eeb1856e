//! `_sg_rsmx_conv`: a `Convolution` fused with the `BatchNorm`, residual addition and
//! ReLU after it. An executor bound without gradients makes these nodes at bind time
//! (`executor::fuse`), so that the layers after the convolution are applied to each
//! output tile while it is still in cache; no symbol or file ever holds one.

use super::activation::{Act, Activation};
use super::batch_norm::BatchNorm;
use super::convolution::Convolution;
use crate::error::Result;
use crate::op::infer::{check_count, infer_from_partial};
use crate::op::{assign_shape, Grad, Operator, ResourceRequest, ShapeSlots};
use crate::shape::Shape;

/// The operator's name, as profiles and errors show it.
pub(crate) const NAME: &str = "_sg_rsmx_conv";

/// A convolution and the layers fused after it. Inputs: the convolution's (data, weight,
/// and the bias unless `no_bias`), then the BatchNorm's (gamma, beta, moving mean, moving
/// variance) with `bn`, then the residual with `residual`.
#[derive(Debug, Clone)]
pub(crate) struct FusedConv {
    pub(crate) conv: Convolution,
    pub(crate) bn: Option<BatchNorm>,
    pub(crate) residual: bool,
    pub(crate) relu: bool,
}

/// True if `op` is a ReLU: `Activation(act_type='relu')` or `relu`.
pub(crate) fn is_relu(op: &dyn Operator) -> bool {
    op.as_any()
        .downcast_ref::<Activation>()
        .is_some_and(|a| a.0 == Act::Relu)
        || op.name() == "relu"
}

impl FusedConv {
    /// Index of the BatchNorm's first input (gamma).
    pub(crate) fn bn_at(&self) -> usize {
        self.conv.args.num_inputs()
    }

    /// Index of the residual input.
    pub(crate) fn residual_at(&self) -> usize {
        self.bn_at() + if self.bn.is_some() { 4 } else { 0 }
    }

    fn num_inputs(&self) -> usize {
        self.residual_at() + usize::from(self.residual)
    }
}

impl Operator for FusedConv {
    fn name(&self) -> &'static str {
        NAME
    }

    fn resources(&self) -> &'static [ResourceRequest] {
        &[ResourceRequest::TempSpace]
    }

    fn aux_inputs(&self) -> Vec<usize> {
        match self.bn {
            Some(_) => vec![self.bn_at() + 2, self.bn_at() + 3],
            None => Vec::new(),
        }
    }

    /// The convolution's inference, in both directions; the residual and the output
    /// share one shape, and the BatchNorm's parameters have one value per filter.
    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        check_count(NAME, inputs.len(), self.num_inputs())?;
        let (k, r) = (self.bn_at(), self.residual_at());
        if self.residual {
            if let Some(s) = inputs[r].clone() {
                assign_shape(NAME, "output", &mut outputs[0], &s)?;
            }
        }
        self.conv.infer_shape_partial(&mut inputs[..k], outputs)?;
        if self.residual {
            if let Some(s) = outputs[0].clone() {
                assign_shape(NAME, "residual", &mut inputs[r], &s)?;
            }
        }
        if self.bn.is_some() {
            let channels = Shape::from_slice(&[self.conv.args.num_filter]);
            let names = ["gamma", "beta", "moving_mean", "moving_var"];
            for (slot, name) in inputs[k..k + 4].iter_mut().zip(names) {
                assign_shape(NAME, name, slot, &channels)?;
            }
        }
        Ok(())
    }

    infer_from_partial!(shape);

    fn gradient(&self) -> Grad {
        Grad::Undefined
    }
}
