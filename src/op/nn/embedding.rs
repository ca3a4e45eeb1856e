//! Definition of `Embedding`: rows of `weight` looked up by the indices in `data`, and
//! its backward.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::infer::check_count;
use crate::op::infer::infer_from_partial;
use crate::op::{
    assign_shape, check_inputs, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params,
    Registry, ShapeSlots, TypeSlots,
};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

pub(crate) const NAME: &str = "Embedding";

/// The `Embedding` operator.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Embedding {
    pub(crate) input_dim: usize,
    pub(crate) output_dim: usize,
    pub(crate) dtype: DType,
}

impl Embedding {
    pub(crate) fn weight_shape(&self) -> Shape {
        Shape::from_slice(&[self.input_dim, self.output_dim])
    }

    pub(crate) fn out_shape(&self, d: &[usize]) -> Shape {
        let mut s = Shape::from_slice(d);
        s.push(self.output_dim);
        s
    }
}

impl Operator for Embedding {
    fn name(&self) -> &'static str {
        NAME
    }

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        check_count(NAME, inputs.len(), 2)?;
        assign_shape(NAME, "weight", &mut inputs[1], &self.weight_shape())?;
        match (&inputs[0], &outputs[0]) {
            (Some(d), _) => {
                let s = self.out_shape(d);
                assign_shape(NAME, "output", &mut outputs[0], &s)?;
            }
            (None, Some(o)) => {
                if o.last() != Some(&self.output_dim) {
                    return Err(Error::Value(format!(
                        "{NAME}: output of shape {} must end in output_dim {}",
                        fmt_shape(o),
                        self.output_dim
                    )));
                }
                inputs[0] = Some(Shape::from_slice(&o[..o.len() - 1]));
            }
            _ => {}
        }
        Ok(())
    }

    infer_from_partial!(shape);

    fn infer_type_partial(&self, inputs: &mut TypeSlots, outputs: &mut TypeSlots) -> Result<()> {
        check_count(NAME, inputs.len(), 2)?;
        if inputs[0] == Some(DType::Bool) {
            return Err(Error::Type(format!(
                "{NAME}: data must be numeric, got bool"
            )));
        }
        for (what, slot) in [("weight", &mut inputs[1]), ("output", &mut outputs[0])] {
            match *slot {
                Some(t) if t != self.dtype => {
                    return Err(Error::Type(format!(
                        "{NAME}: {what} must have dtype {} (the dtype argument), got {t}",
                        self.dtype
                    )))
                }
                _ => *slot = Some(self.dtype),
            }
        }
        Ok(())
    }

    infer_from_partial!(type);

    fn gradient(&self) -> Grad {
        Grad::Op(Gradient {
            op: Arc::new(EmbeddingBackward(*self)),
            ograds: vec![0],
            inputs: vec![0],
            outputs: vec![],
            grad_of: vec![1],
        })
    }
}

/// Inputs: the output gradient and the indices; output: the weight's gradient.
pub(crate) struct EmbeddingBackward(pub(crate) Embedding);

impl Operator for EmbeddingBackward {
    fn name(&self) -> &'static str {
        "_backward_Embedding"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(self.name(), inputs, 2)?;
        if inputs[0] != self.0.out_shape(&inputs[1]) {
            return Err(Error::Value(format!(
                "{}: output gradient of shape {} does not fit indices of shape {}",
                self.name(),
                fmt_shape(&inputs[0]),
                fmt_shape(&inputs[1])
            )));
        }
        Ok(vec![self.0.weight_shape()])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![inputs[0]])
    }
}

const PARAMS: &[Param] = &[
    Param::required("input_dim", "long", "Vocabulary size of the input indices."),
    Param::required("output_dim", "long", "Dimension of the embedding vectors."),
    Param::new(
        "dtype",
        "{'bfloat16', 'float16', 'float32', 'float64', 'int32', 'int64', 'int8', 'uint8'}",
        "'float32'",
        "Data type of weight.",
    ),
    Param::new(
        "sparse_grad",
        "boolean",
        "False",
        "Compute row sparse gradient in the backward calculation. If set to True, the grad's \
         storage type is row_sparse.",
    ),
];

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared(NAME, attrs, PARAMS)?;
    let input_dim: i64 = p.get("input_dim")?;
    let output_dim: i64 = p.get("output_dim")?;
    if input_dim < 1 || output_dim < 1 {
        return Err(Error::Value(format!(
            "{NAME}: input_dim and output_dim must be positive, got {input_dim} and {output_dim}"
        )));
    }
    let dtype = p.get::<Option<DType>>("dtype")?.unwrap_or(DType::F32);
    if dtype == DType::Bool {
        return Err(Error::Type(format!("{NAME}: dtype bool is not supported")));
    }
    // Gradients are always dense here; a row-sparse request is accepted.
    p.get::<bool>("sparse_grad")?;
    Ok(Arc::new(Embedding {
        input_dim: input_dim as usize,
        output_dim: output_dim as usize,
        dtype,
    }))
}

/// Registers `Embedding`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: NAME,
        aliases: &[],
        inputs: &["data", "weight"],
        variadic: false,
        params: PARAMS,
        doc: "Maps integer indices to rows of a weight matrix.",
        create: Box::new(create),
    });
}
