//! Definitions of the backward operators of `Concat`: the output gradient cut back into
//! the inputs' pieces. (`stack` and `SliceChannel` are each other's backward and need no
//! kernel of their own.)

use crate::error::Result;
use crate::op::{check_inputs, Operator};
use crate::shape::Shape;

/// `_backward_Concat`: inputs (dy, the forward inputs), one gradient per forward input.
pub struct ConcatBackward {
    pub dim: i64,
    pub num_args: usize,
}

impl Operator for ConcatBackward {
    fn name(&self) -> &'static str {
        "_backward_Concat"
    }

    fn num_outputs(&self) -> usize {
        self.num_args
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(self.name(), inputs, self.num_args + 1)?;
        Ok(inputs[1..].to_vec())
    }

    fn infer_type(&self, inputs: &[crate::dtype::DType]) -> Result<Vec<crate::dtype::DType>> {
        Ok(vec![inputs[0]; self.num_args])
    }
}
