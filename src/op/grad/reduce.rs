//! Definitions of the backward operators of the reductions over axes: the output gradient
//! broadcast back over the reduced axes, times each input element's share of the result.

use crate::error::Result;
use crate::op::infer::shape_of_input;
use crate::op::reduce::ReduceKind;
use crate::op::Operator;
use crate::shape::Shape;

/// `_backward_<reduce>`: inputs (dy, x, y), output dx.
pub struct ReduceBackward {
    pub name: &'static str,
    pub kind: ReduceKind,
    pub axis: Option<Vec<i64>>,
    pub exclude: bool,
}

impl Operator for ReduceBackward {
    fn name(&self) -> &'static str {
        self.name
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        shape_of_input(self.name, inputs, 3, 1)
    }

    fn infer_type(&self, inputs: &[crate::dtype::DType]) -> Result<Vec<crate::dtype::DType>> {
        Ok(vec![inputs[1]])
    }
}
