//! Definitions of the backward operators of the operators that read their input through a
//! strided view (transpose, flip, slice, broadcast, tile, repeat...) and of the reshaping
//! operators.
//!
//! The gradient of a gather is a scatter-add through the same view. Two common views have
//! faster forms: a permutation of the input (transpose, flip) is undone by the inverse
//! gather, and a view that only repeats the input in order (broadcast, tile, repeat) is
//! undone by summing over its repeating axes.

use crate::error::Result;
use crate::op::infer::shape_of_input;
use crate::op::transform::view::View;
use crate::op::Operator;
use crate::shape::Shape;
use std::sync::Arc;

/// An operator's output shape and view from its input shapes.
pub type ViewFn = Arc<dyn Fn(&[Shape]) -> Result<(Shape, View)> + Send + Sync>;

/// `_backward_<op>` of a gather op: inputs (dy, the forward inputs), output the gradient
/// of the first forward input.
pub struct GatherBackward {
    pub name: &'static str,
    pub view: ViewFn,
    /// Number of forward inputs.
    pub inputs: usize,
}

impl Operator for GatherBackward {
    fn name(&self) -> &'static str {
        self.name
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        shape_of_input(self.name, inputs, self.inputs + 1, 1)
    }

    fn infer_type(&self, inputs: &[crate::dtype::DType]) -> Result<Vec<crate::dtype::DType>> {
        Ok(vec![inputs[0]])
    }
}

/// `_backward_reshape`: the output gradient given the input's shape; inputs (dy, x).
pub struct ReshapeBackward;

impl Operator for ReshapeBackward {
    fn name(&self) -> &'static str {
        "_backward_reshape"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        shape_of_input(self.name(), inputs, 2, 1)
    }

    fn infer_type(&self, inputs: &[crate::dtype::DType]) -> Result<Vec<crate::dtype::DType>> {
        Ok(vec![inputs[0]])
    }

    fn inplace(&self) -> &'static [(usize, usize)] {
        &[(0, 0)]
    }
}
