//! Definition of `BilinearSampler`: samples NCHW data at the positions of a grid
//! normalised to [-1, 1], interpolating bilinearly and reading zeros outside the data.

use super::common::float_dtype;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::{check_inputs, shape_err, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param};
use crate::op::{Params, Registry};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

pub(crate) const NAME: &str = "BilinearSampler";

pub(crate) const CUDNN_OFF: Param = Param::new(
    "cudnn_off",
    "boolean or None",
    "None",
    "whether to turn cudnn off",
);

const PARAMS: &[Param] = &[CUDNN_OFF];

/// `BilinearSampler`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BilinearSampler;

/// The output shape of sampling `data` (batch, channels, height, width) at `grid`
/// (batch, 2, out height, out width): (batch, channels, out height, out width).
pub(crate) fn sampled_shape(op: &str, data: &Shape, grid: &Shape) -> Result<Shape> {
    if data.len() != 4 {
        return Err(shape_err(
            op,
            "data must be 4-D (batch, channel, height, width)",
            data,
        ));
    }
    if grid.len() != 4 || grid[1] != 2 {
        return Err(shape_err(
            op,
            "grid must be 4-D (batch, 2, height, width)",
            grid,
        ));
    }
    if grid[0] != data[0] {
        return Err(Error::Value(format!(
            "{op}: data {} and grid {} differ in batch size",
            fmt_shape(data),
            fmt_shape(grid)
        )));
    }
    Ok(Shape::from_slice(&[data[0], data[1], grid[2], grid[3]]))
}

impl Operator for BilinearSampler {
    fn name(&self) -> &'static str {
        NAME
    }

    fn mxnet_num_outputs(&self) -> usize {
        2
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(NAME, inputs, 2)?;
        Ok(vec![sampled_shape(NAME, &inputs[0], &inputs[1])?])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(NAME, inputs)?])
    }

    fn gradient(&self) -> Grad {
        Grad::Op(Gradient {
            op: Arc::new(BilinearSamplerBackward),
            ograds: vec![0],
            inputs: vec![0, 1],
            outputs: vec![],
            grad_of: vec![0, 1],
        })
    }
}

/// `_backward_BilinearSampler`: from the output gradient, the data and the grid, the
/// gradients of the data and of the grid.
pub(crate) struct BilinearSamplerBackward;

impl Operator for BilinearSamplerBackward {
    fn name(&self) -> &'static str {
        "_backward_BilinearSampler"
    }

    fn num_outputs(&self) -> usize {
        2
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        let name = self.name();
        check_inputs(name, inputs, 3)?;
        let out = sampled_shape(name, &inputs[1], &inputs[2])?;
        if inputs[0] != out {
            return Err(Error::Value(format!(
                "{name}: the output gradient has shape {}, the output {}",
                fmt_shape(&inputs[0]),
                fmt_shape(&out)
            )));
        }
        Ok(vec![inputs[1].clone(), inputs[2].clone()])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(self.name(), inputs)?; 2])
    }
}

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared(NAME, attrs, PARAMS)?;
    p.get::<Option<bool>>("cudnn_off")?;
    Ok(Arc::new(BilinearSampler))
}

/// Registers `BilinearSampler`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: NAME,
        aliases: &[],
        inputs: &["data", "grid"],
        variadic: false,
        params: PARAMS,
        doc: "Samples the data bilinearly at the grid's positions (normalised to [-1, 1]); zeros outside.",
        create: Box::new(create),
    });
}
