//! Definition of `GridGenerator`: the sampling grid of a spatial transformer, normalised
//! to [-1, 1], from an affine matrix per sample or from an optical flow.

use super::common::float_dtype;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::{check_inputs, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params};
use crate::op::{shape_err, Registry};
use crate::shape::Shape;
use num_traits::Float;
use std::sync::Arc;

pub(crate) const NAME: &str = "GridGenerator";

pub(crate) const PARAMS: &[Param] = &[
    Param::required(
        "transform_type",
        "{'affine', 'warp'}",
        "The type of transformation. For `affine`, input data should be an affine matrix of size (batch, 6). For `warp`, input data should be an optical flow of size (batch, 2, h, w).",
    ),
    Param::new(
        "target_shape",
        "Shape(tuple)",
        "[0,0]",
        "Specifies the output shape (H, W). This is required if transformation type is `affine`. If transformation type is `warp`, this parameter is ignored.",
    ),
];

/// How the grid is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transform {
    /// Each sample's 2x3 matrix (row-major, `data` of shape (batch, 6)) maps the target
    /// grid's normalised (x, y, 1) to source positions; the output is (batch, 2, H, W).
    Affine { height: usize, width: usize },
    /// `data` (batch, 2, H, W) is a flow in pixels added to each pixel's own position,
    /// then normalised.
    Warp,
}

/// `GridGenerator`.
#[derive(Debug, Clone)]
pub(crate) struct GridGenerator {
    pub(crate) transform: Transform,
}

/// The normalised target coordinate of pixel `i` of `n`: -1 at the first, 1 at the last,
/// computed as MXNet does: `-1 + i * step` in the compute type, with `step = 2 / (n - 1)`
/// rounded to it.
pub(crate) fn normalised<F: Float>(i: usize, n: usize) -> F {
    let step = F::from(2.0 / (n as f64 - 1.0)).unwrap_or_else(F::nan);
    F::from(i).unwrap_or_else(F::nan) * step - F::one()
}

/// The scale a warp divides a pixel position by: half the extent, `(n - 1) / 2`.
pub(crate) fn half_extent<F: Float>(n: usize) -> F {
    F::from((n as f64 - 1.0) / 2.0).unwrap_or_else(F::nan)
}

impl GridGenerator {
    fn output_shape(&self, data: &Shape) -> Result<Shape> {
        match self.transform {
            Transform::Affine { height, width } => {
                if data.len() != 2 || data[1] != 6 {
                    return Err(shape_err(
                        NAME,
                        "with transform_type='affine' data must be affine matrices of shape (batch, 6)",
                        data,
                    ));
                }
                Ok(Shape::from_slice(&[data[0], 2, height, width]))
            }
            Transform::Warp => {
                if data.len() != 4 || data[1] != 2 {
                    return Err(shape_err(
                        NAME,
                        "with transform_type='warp' data must be a flow of shape (batch, 2, height, width)",
                        data,
                    ));
                }
                Ok(data.clone())
            }
        }
    }
}

impl Operator for GridGenerator {
    fn name(&self) -> &'static str {
        NAME
    }

    fn mxnet_num_outputs(&self) -> usize {
        2
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(NAME, inputs, 1)?;
        Ok(vec![self.output_shape(&inputs[0])?])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(NAME, inputs)?])
    }

    fn gradient(&self) -> Grad {
        Grad::Op(Gradient {
            op: Arc::new(GridGeneratorBackward(self.clone())),
            ograds: vec![0],
            inputs: vec![],
            outputs: vec![],
            grad_of: vec![0],
        })
    }
}

/// `_backward_GridGenerator`: the gradient of the matrices or the flow from the grid's.
pub(crate) struct GridGeneratorBackward(pub(crate) GridGenerator);

impl Operator for GridGeneratorBackward {
    fn name(&self) -> &'static str {
        "_backward_GridGenerator"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        let name = self.name();
        check_inputs(name, inputs, 1)?;
        let g = &inputs[0];
        if g.len() != 4 || g[1] != 2 {
            return Err(shape_err(
                name,
                "the output gradient must be a grid of shape (batch, 2, height, width)",
                g,
            ));
        }
        Ok(vec![match self.0.transform {
            Transform::Affine { .. } => Shape::from_slice(&[g[0], 6]),
            Transform::Warp => g.clone(),
        }])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(self.name(), inputs)?])
    }
}

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared(NAME, attrs, PARAMS)?;
    let kind = p.get_choice("transform_type", &["affine", "warp"])?;
    let target: Vec<i64> = p.get("target_shape")?;
    if target.len() != 2 {
        return Err(Error::Value(format!(
            "{NAME}: target_shape must be (height, width), got {} values",
            target.len()
        )));
    }
    let transform = if kind == "affine" {
        if target[0] <= 0 || target[1] <= 0 {
            return Err(Error::Value(format!(
                "{NAME}: with transform_type='affine' target_shape must be positive, got ({}, {})",
                target[0], target[1]
            )));
        }
        Transform::Affine {
            height: target[0] as usize,
            width: target[1] as usize,
        }
    } else {
        Transform::Warp
    };
    Ok(Arc::new(GridGenerator { transform }))
}

/// Registers `GridGenerator`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: NAME,
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: PARAMS,
        doc: "Generates a sampling grid for BilinearSampler from affine matrices or an optical flow.",
        create: Box::new(create),
    });
}
