//! Definition of `SoftmaxOutput` (alias `Softmax`): a softmax whose backward is the
//! cross-entropy gradient against a label.

use super::common::{check_float, py_bool, same_shape, Normalization};
use super::softmax::Layout;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::infer::check_count;
use crate::op::infer::infer_from_partial;
use crate::op::{
    check_inputs, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params, Registry,
    ShapeSlots,
};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

pub(crate) const NAME: &str = "SoftmaxOutput";

/// The `SoftmaxOutput` operator.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SoftmaxOutput {
    pub(crate) grad_scale: f64,
    pub(crate) ignore_label: f64,
    pub(crate) multi_output: bool,
    pub(crate) use_ignore: bool,
    pub(crate) preserve_shape: bool,
    pub(crate) normalization: Normalization,
    pub(crate) out_grad: bool,
    pub(crate) smooth_alpha: f64,
}

impl SoftmaxOutput {
    /// The softmax layout: across axis 1 (multi_output), along the last axis
    /// (preserve_shape) or over all but the first axis.
    pub(crate) fn layout(&self, d: &[usize]) -> Result<Layout> {
        if d.is_empty() || (self.multi_output && d.len() < 2) {
            return Err(Error::Value(format!(
                "{NAME}: data of shape {} has too few dimensions (multi_output={})",
                fmt_shape(d),
                py_bool(self.multi_output)
            )));
        }
        Ok(if self.multi_output {
            Layout::along(d, 1)
        } else if self.preserve_shape {
            Layout::along(d, d.len() - 1)
        } else {
            Layout {
                outer: d[0],
                n: d[1..].iter().product(),
                inner: 1,
            }
        })
    }

    /// The label shapes that fit `d`; the first is the one inferred.
    fn label_shapes(&self, d: &[usize]) -> Vec<Shape> {
        if self.multi_output {
            let n = d[0];
            let spatial: usize = d[2..].iter().product();
            let mut with_one = Shape::from_slice(d);
            with_one[1] = 1;
            let mut flat = Shape::from_slice(&[n]);
            flat.extend_from_slice(&d[2..]);
            vec![Shape::from_slice(&[n, spatial]), flat, with_one]
        } else {
            vec![Shape::from_slice(&d[..d.len() - 1]), Shape::from_slice(d)]
        }
    }
}

impl Operator for SoftmaxOutput {
    fn name(&self) -> &'static str {
        NAME
    }

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        check_count(NAME, inputs.len(), 2)?;
        same_shape(NAME, &mut inputs[..1], outputs)?;
        let Some(d) = inputs[0].clone() else {
            return Ok(());
        };
        self.layout(&d)?;
        let fits = self.label_shapes(&d);
        match &inputs[1] {
            None => inputs[1] = Some(fits[0].clone()),
            Some(l) if fits.contains(l) => {}
            Some(l) => {
                return Err(Error::Value(format!(
                    "{NAME}: label of shape {} does not fit data of shape {}: expected {}",
                    fmt_shape(l),
                    fmt_shape(&d),
                    fits.iter()
                        .map(|s| fmt_shape(s))
                        .collect::<Vec<_>>()
                        .join(" or ")
                )))
            }
        }
        Ok(())
    }

    infer_from_partial!(shape);

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        check_float(NAME, "data", inputs[0])?;
        if inputs.get(1) == Some(&DType::Bool) {
            return Err(Error::Type(format!("{NAME}: label must be numeric")));
        }
        Ok(vec![inputs[0]])
    }

    fn gradient(&self) -> Grad {
        Grad::Op(Gradient {
            op: Arc::new(SoftmaxOutputBackward(*self)),
            ograds: if self.out_grad { vec![0] } else { vec![] },
            inputs: vec![1],
            outputs: vec![0],
            grad_of: vec![0],
        })
    }
}

/// Inputs: the output gradient (only with `out_grad`), the label and the output.
pub(crate) struct SoftmaxOutputBackward(pub(crate) SoftmaxOutput);

impl Operator for SoftmaxOutputBackward {
    fn name(&self) -> &'static str {
        "_backward_SoftmaxOutput"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(self.name(), inputs, 2 + usize::from(self.0.out_grad))?;
        let out = &inputs[inputs.len() - 1];
        let mut ins = vec![Some(out.clone()), Some(inputs[inputs.len() - 2].clone())];
        self.0.infer_shape_partial(&mut ins, &mut [None])?;
        Ok(vec![out.clone()])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        let out = inputs[inputs.len() - 1];
        check_float(self.name(), "output", out)?;
        Ok(vec![out])
    }
}

const PARAMS: &[Param] = &[
    Param::new(
        "grad_scale",
        "float",
        "1",
        "Scales the gradient by a float factor.",
    ),
    Param::new(
        "ignore_label",
        "float",
        "-1",
        "The instances whose `labels` == `ignore_label` will be ignored during backward, if \
         `use_ignore` is set to ``true``).",
    ),
    Param::new(
        "multi_output",
        "boolean",
        "False",
        "If set to ``true``, the softmax function will be computed along axis ``1``. This is \
         applied when the shape of input array differs from the shape of label array.",
    ),
    Param::new(
        "use_ignore",
        "boolean",
        "False",
        "If set to ``true``, the `ignore_label` value will not contribute to the backward \
         gradient.",
    ),
    Param::new(
        "preserve_shape",
        "boolean",
        "False",
        "If set to ``true``, the softmax function will be computed along the last axis \
         (``-1``).",
    ),
    Param::new(
        "normalization",
        "{'batch', 'null', 'valid'}",
        "'null'",
        "Normalizes the gradient.",
    ),
    Param::new(
        "out_grad",
        "boolean",
        "False",
        "Multiplies gradient with output gradient element-wise.",
    ),
    Param::new(
        "smooth_alpha",
        "float",
        "0",
        "Constant for computing a label smoothed version of cross-entropyfor the backwards \
         pass.  This constant gets subtracted from theone-hot encoding of the gold label and \
         distributed uniformly toall other labels.",
    ),
];

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared(NAME, attrs, PARAMS)?;
    Ok(Arc::new(SoftmaxOutput {
        grad_scale: p.get("grad_scale")?,
        ignore_label: p.get("ignore_label")?,
        multi_output: p.get("multi_output")?,
        use_ignore: p.get("use_ignore")?,
        preserve_shape: p.get("preserve_shape")?,
        normalization: Normalization::parse(&p)?,
        out_grad: p.get("out_grad")?,
        smooth_alpha: p.get("smooth_alpha")?,
    }))
}

/// Registers `SoftmaxOutput`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: NAME,
        aliases: &["Softmax"],
        inputs: &["data", "label"],
        variadic: false,
        params: PARAMS,
        doc: "Softmax with a cross-entropy gradient against the label.",
        create: Box::new(create),
    });
}
