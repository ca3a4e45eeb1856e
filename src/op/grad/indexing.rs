//! Definitions of the backward operators of the indexing and sorting operators: the
//! output gradient added back at the positions the forward read from (`take`, `pick`,
//! `gather_nd`, `topk`, `sort`), routed by the condition (`where`) or cast back (`Cast`).

use crate::dtype::DType;
use crate::error::Result;
use crate::op::indexing::IndexMode;
use crate::op::infer::shape_of_input;
use crate::op::{check_inputs, OpRef, Operator};
use crate::shape::Shape;

/// `_backward_take`: inputs (dy, indices, a), output da.
pub struct TakeBackward {
    pub axis: i64,
    pub(crate) mode: IndexMode,
}

impl Operator for TakeBackward {
    fn name(&self) -> &'static str {
        "_backward_take"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        shape_of_input(self.name(), inputs, 3, 2)
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![inputs[0]])
    }
}

/// `_backward_pick`: inputs (dy, data, index), output ddata.
pub struct PickBackward {
    pub axis: i64,
    pub(crate) mode: IndexMode,
}

impl Operator for PickBackward {
    fn name(&self) -> &'static str {
        "_backward_pick"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        shape_of_input(self.name(), inputs, 3, 1)
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![inputs[0]])
    }
}

/// `_backward_where`: inputs (dy, condition), outputs (dx, dy) of `where(c, x, y)`.
pub struct WhereBackward;

impl Operator for WhereBackward {
    fn name(&self) -> &'static str {
        "_backward_where"
    }

    fn num_outputs(&self) -> usize {
        2
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(self.name(), inputs, 2)?;
        Ok(vec![inputs[0].clone(), inputs[0].clone()])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![inputs[0], inputs[0]])
    }
}

/// `_backward_Cast`: inputs (dy, x), output dx in the dtype of x.
pub struct CastBackward;

impl Operator for CastBackward {
    fn name(&self) -> &'static str {
        "_backward_Cast"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        shape_of_input(self.name(), inputs, 2, 1)
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![inputs[1]])
    }
}

/// `_backward_gather_nd`: inputs (dy, indices, data), output ddata (repeated indices add).
pub struct GatherNdBackward;

impl Operator for GatherNdBackward {
    fn name(&self) -> &'static str {
        "_backward_gather_nd"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        shape_of_input(self.name(), inputs, 3, 2)
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![inputs[0]])
    }
}

/// `_backward_topk` (also of `sort`): inputs (dy, data), output ddata; `order` is the
/// same selection returning int64 indices, rerun to find where each value came from.
pub struct TopkBackward {
    pub axis: Option<i64>,
    pub order: OpRef,
}

impl Operator for TopkBackward {
    fn name(&self) -> &'static str {
        "_backward_topk"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        shape_of_input(self.name(), inputs, 2, 1)
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![inputs[0]])
    }
}
