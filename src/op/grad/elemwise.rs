//! Definitions of the backward operators of the element-wise unary operators and of the
//! operators with a scalar operand: `dx = dy * f'(x)`, from the input or (where cheaper)
//! the output.

use crate::error::Result;
use crate::op::elemwise::binary::BinaryKind;
use crate::op::elemwise::unary::UnaryKind;
use crate::op::infer::shape_of_input;
use crate::op::Operator;
use crate::shape::Shape;

/// True if the derivative of `kind` is computed from the forward output.
pub fn uses_output(kind: UnaryKind) -> bool {
    matches!(
        kind,
        UnaryKind::Sqrt
            | UnaryKind::Cbrt
            | UnaryKind::Exp
            | UnaryKind::Tan
            | UnaryKind::Tanh
            | UnaryKind::Sigmoid
            | UnaryKind::Relu
            | UnaryKind::Erfinv
    )
}

/// `_backward_<op>` of a unary op: inputs (dy, x) or (dy, y), output dx.
pub struct UnaryBackward {
    pub name: &'static str,
    pub kind: UnaryKind,
}

impl Operator for UnaryBackward {
    fn name(&self) -> &'static str {
        self.name
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        shape_of_input(self.name, inputs, 2, 0)
    }

    fn inplace(&self) -> &'static [(usize, usize)] {
        &[(0, 0), (1, 0)]
    }
}

/// `_backward_<op>_scalar`: inputs (dy, x), output dx.
pub struct ScalarBackward {
    pub name: &'static str,
    pub kind: BinaryKind,
    pub reverse: bool,
    pub scalar: f64,
}

impl Operator for ScalarBackward {
    fn name(&self) -> &'static str {
        self.name
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        shape_of_input(self.name, inputs, 2, 0)
    }

    fn inplace(&self) -> &'static [(usize, usize)] {
        &[(0, 0), (1, 0)]
    }
}
