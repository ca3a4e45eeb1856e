//! Definitions of the backward operators of `dot` and `batch_dot`: two matrix products of
//! the output gradient with the other operand, transposed to match how each input entered
//! the product.

use crate::error::Result;
use crate::op::{check_inputs, Operator};
use crate::shape::Shape;

/// `_backward_dot` / `_backward_batch_dot`: inputs (dy, lhs, rhs), outputs (dlhs, drhs).
pub struct DotBackward {
    pub ta: bool,
    pub tb: bool,
    /// True for `batch_dot`.
    pub batched: bool,
}

impl Operator for DotBackward {
    fn name(&self) -> &'static str {
        if self.batched {
            "_backward_batch_dot"
        } else {
            "_backward_dot"
        }
    }

    fn num_outputs(&self) -> usize {
        2
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(self.name(), inputs, 3)?;
        Ok(vec![inputs[1].clone(), inputs[2].clone()])
    }

    fn infer_type(&self, inputs: &[crate::dtype::DType]) -> Result<Vec<crate::dtype::DType>> {
        Ok(vec![inputs[1], inputs[2]])
    }
}
