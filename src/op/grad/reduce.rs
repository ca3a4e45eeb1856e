//! Definitions of the backward operators of the reductions over axes: the output gradient
//! broadcast back over the reduced axes, times each input element's share of the result.

use crate::error::Result;
use crate::op::reduce::ReduceKind;
use crate::op::{check_inputs, Operator};
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
        check_inputs(self.name, inputs, 3)?;
        Ok(vec![inputs[1].clone()])
    }

    fn infer_type(&self, inputs: &[crate::dtype::DType]) -> Result<Vec<crate::dtype::DType>> {
        Ok(vec![inputs[1]])
    }
}
