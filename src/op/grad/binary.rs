//! Definitions of the backward operators of the element-wise binary operators, same-shape
//! and broadcasting: each input's gradient is computed over the output's shape and, for a
//! broadcast input, summed over the axes it was stretched along.

use crate::error::Result;
use crate::op::elemwise::binary::BinaryKind;
use crate::op::Operator;
use crate::shape::Shape;

/// True if the gradient of that side is the output gradient itself.
pub(crate) fn is_identity(kind: BinaryKind, lhs: bool) -> bool {
    matches!(
        (kind, lhs),
        (BinaryKind::Add, _) | (BinaryKind::Sub, true) | (BinaryKind::Mod, true)
    )
}

/// `_backward_<op>`: inputs (dy, lhs, rhs), or just dy for same-shape `+` and `-`;
/// outputs (dlhs, drhs).
pub struct BinaryBackward {
    pub name: &'static str,
    pub kind: BinaryKind,
}

impl Operator for BinaryBackward {
    /// Without broadcasting, a side whose gradient is the output gradient is that input.
    fn output_is_input(&self, output: usize) -> Option<usize> {
        let same_shape = !self.name.contains("broadcast");
        (same_shape && is_identity(self.kind, output == 0)).then_some(0)
    }

    fn name(&self) -> &'static str {
        self.name
    }

    fn num_outputs(&self) -> usize {
        2
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        match inputs {
            [g] => Ok(vec![g.clone(), g.clone()]),
            [_, a, b] => Ok(vec![a.clone(), b.clone()]),
            _ => crate::op::check_inputs(self.name, inputs, 3).map(|_| vec![]),
        }
    }

    fn infer_type(&self, inputs: &[crate::dtype::DType]) -> Result<Vec<crate::dtype::DType>> {
        Ok(match inputs {
            [g] => vec![*g, *g],
            _ => vec![inputs[1], inputs[2]],
        })
    }
}
