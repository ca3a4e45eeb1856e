//! Definition of `SVMOutput`: passes its data through; its backward is the L1- or
//! L2-SVM hinge-loss gradient against the label, ignoring the head gradient.

use super::common::{float_dtype, same_shape};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::infer::{check_count, infer_from_partial};
use crate::op::{
    assign_shape, check_inputs, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params,
    Registry, ShapeSlots,
};
use crate::shape::{fmt_shape, size_of, Shape};
use std::sync::Arc;

/// The hinge loss's settings, shared by the layer and its backward.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Svm {
    pub(crate) margin: f64,
    pub(crate) regularization_coefficient: f64,
    /// L1-SVM (the hinge) when set, L2-SVM (the squared hinge) otherwise.
    pub(crate) use_linear: bool,
}

/// `SVMOutput`: the data, whose rows (all axes but the last) are scored against one
/// class label each.
pub(crate) struct SvmOutput(pub(crate) Svm);

impl Operator for SvmOutput {
    fn name(&self) -> &'static str {
        "SVMOutput"
    }

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        check_count(self.name(), inputs.len(), 2)?;
        same_shape(self.name(), &mut inputs[..1], outputs)?;
        let Some(d) = inputs[0].clone() else {
            return Ok(());
        };
        if d.is_empty() {
            return Err(Error::Value(format!(
                "{}: data must have at least one axis, got shape {}",
                self.name(),
                fmt_shape(&d)
            )));
        }
        let label = Shape::from_slice(&d[..d.len() - 1]);
        assign_shape(self.name(), "label", &mut inputs[1], &label)
    }

    infer_from_partial!(shape);

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(self.name(), inputs)?])
    }

    fn inplace(&self) -> &'static [(usize, usize)] {
        &[(0, 0)]
    }

    fn gradient(&self) -> Grad {
        Grad::Op(Gradient {
            op: Arc::new(SvmOutputBackward(self.0)),
            ograds: vec![],
            inputs: vec![1],
            outputs: vec![0],
            grad_of: vec![0],
        })
    }
}

/// Inputs: the label and the output. Row `r`'s gradient at column `c` is, with `y` the
/// output, `m` the margin and `k` the label, `-[m > y]` at `c = k` and `[m > -y]`
/// elsewhere for L1; `-2(m - y)⁺` and `2(m + y)⁺` for L2; both times the coefficient.
pub(crate) struct SvmOutputBackward(pub(crate) Svm);

impl Operator for SvmOutputBackward {
    fn name(&self) -> &'static str {
        "_backward_SVMOutput"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(self.name(), inputs, 2)?;
        let (label, out) = (&inputs[0], &inputs[1]);
        let rows = out
            .split_last()
            .map_or(1, |(_, lead)| lead.iter().product());
        if out.is_empty() || size_of(label) != rows {
            return Err(Error::Value(format!(
                "{}: label of shape {} does not fit output of shape {}",
                self.name(),
                fmt_shape(label),
                fmt_shape(out)
            )));
        }
        Ok(vec![out.clone()])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(self.name(), inputs)?])
    }
}

const SVM_PARAMS: &[Param] = &[
    Param::new(
        "margin",
        "float",
        "1",
        "The loss function penalizes outputs that lie outside this margin.",
    ),
    Param::new(
        "regularization_coefficient",
        "float",
        "1",
        "Regularization parameter for the SVM.",
    ),
    Param::new(
        "use_linear",
        "boolean",
        "0",
        "Whether to use L1-SVM objective. L2-SVM objective is used by default.",
    ),
];

fn create(attrs: &Attrs) -> Result<Svm> {
    let p = Params::declared("SVMOutput", attrs, SVM_PARAMS)?;
    Ok(Svm {
        margin: p.get("margin")?,
        regularization_coefficient: p.get("regularization_coefficient")?,
        use_linear: p.get("use_linear")?,
    })
}

/// Registers `SVMOutput`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "SVMOutput",
        aliases: &[],
        inputs: &["data", "label"],
        variadic: false,
        params: SVM_PARAMS,
        doc: "Computes support vector machine based transformation of the input: the \
              output is the data; the backward is the hinge loss's gradient.",
        create: Box::new(|a| -> Result<OpRef> { Ok(Arc::new(SvmOutput(create(a)?))) }),
    });
}
