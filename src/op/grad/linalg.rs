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

impl DotBackward {
    /// The (rows, cols) of each stored operand as the forward op sees it, and the batch.
    pub fn stored_operands(
        &self,
        ta: bool,
        tb: bool,
        l: &[usize],
        r: &[usize],
    ) -> ((usize, usize), (usize, usize), usize) {
        let prod = |s: &[usize]| s.iter().product::<usize>();
        if self.batched {
            let nd = l.len();
            return (
                (l[nd - 2], l[nd - 1]),
                (r[nd - 2], r[nd - 1]),
                prod(&l[..nd - 2]),
            );
        }
        if l.len() == 1 && r.len() == 1 {
            return ((1, l[0]), (r[0], 1), 1);
        }
        let (ln, rn) = (l.len(), r.len());
        let a = if ta {
            (l[0], prod(&l[1..]))
        } else {
            (prod(&l[..ln - 1]), l[ln - 1])
        };
        let b = if tb {
            (prod(&r[..rn - 1]), r[rn - 1])
        } else {
            (r[0], prod(&r[1..]))
        };
        (a, b, 1)
    }
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
