//! Definition of `SpatialTransformer`: an affine `GridGenerator` over the target shape
//! from the localisation output, then `BilinearSampler` of the data at that grid; composed
//! of those two, so it runs and differentiates wherever they do.

use super::bilinear_sampler::{sampled_shape, CUDNN_OFF};
use super::common::float_dtype;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::composite::{tuple_attr, Builder, Composite, Decomposition, Src};
use crate::op::{check_inputs, shape_err, Attrs, OpDef, OpRef, Operator, Param, Params, Registry};
use crate::shape::Shape;
use std::sync::Arc;

const NAME: &str = "SpatialTransformer";

const PARAMS: &[Param] = &[
    Param::new(
        "target_shape",
        "Shape(tuple)",
        "[0,0]",
        "output shape(h, w) of spatial transformer: (y, x)",
    ),
    Param::required("transform_type", "{'affine'}", "transformation type"),
    Param::required("sampler_type", "{'bilinear'}", "sampling type"),
    CUDNN_OFF,
];

/// `SpatialTransformer` with its target (height, width).
struct SpatialTransformer {
    target: (usize, usize),
}

impl SpatialTransformer {
    fn grid_shape(&self, data: &Shape, loc: &Shape) -> Result<Shape> {
        if data.len() != 4 {
            return Err(shape_err(
                NAME,
                "data must be 4-D (batch, channel, height, width)",
                data,
            ));
        }
        if loc.len() != 2 || loc[1] != 6 || loc[0] != data[0] {
            return Err(shape_err(
                NAME,
                &format!(
                    "loc must hold an affine matrix per sample, of shape ({}, 6)",
                    data[0]
                ),
                loc,
            ));
        }
        Ok(Shape::from_slice(&[
            data[0],
            2,
            self.target.0,
            self.target.1,
        ]))
    }
}

impl Operator for SpatialTransformer {
    fn name(&self) -> &'static str {
        NAME
    }

    fn mxnet_num_outputs(&self) -> usize {
        3
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(NAME, inputs, 2)?;
        let grid = self.grid_shape(&inputs[0], &inputs[1])?;
        Ok(vec![sampled_shape(NAME, &inputs[0], &grid)?])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(NAME, inputs)?])
    }

    fn as_composite(&self) -> Option<&dyn Composite> {
        Some(self)
    }
}

impl Composite for SpatialTransformer {
    fn decompose(&self, _shapes: &[Shape], _types: &[DType]) -> Result<Decomposition> {
        let mut b = Builder::new();
        let (h, w) = self.target;
        let grid = b.op(
            "GridGenerator",
            &[
                ("transform_type", "affine".into()),
                ("target_shape", tuple_attr(&[h as i64, w as i64])),
            ],
            &[Src::Input(1)],
        )?;
        let out = b.op("BilinearSampler", &[], &[Src::Input(0), grid])?;
        b.finish(vec![out])
    }
}

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared(NAME, attrs, PARAMS)?;
    p.get_choice("transform_type", &["affine"])?;
    p.get_choice("sampler_type", &["bilinear"])?;
    p.get::<Option<bool>>("cudnn_off")?;
    let target: Vec<i64> = p.get("target_shape")?;
    match target[..] {
        [h, w] if h > 0 && w > 0 => Ok(Arc::new(SpatialTransformer {
            target: (h as usize, w as usize),
        })),
        _ => Err(Error::Value(format!(
            "{NAME}: target_shape must be a positive (height, width), got {target:?}"
        ))),
    }
}

/// Registers `SpatialTransformer`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: NAME,
        aliases: &[],
        inputs: &["data", "loc"],
        variadic: false,
        params: PARAMS,
        doc: "Warps the data by an affine transform per sample, sampling it bilinearly at the target shape.",
        create: Box::new(create),
    });
}

#[cfg(test)]
mod tests {
    use crate::op::{find, testutil::attrs};
    use crate::shape::Shape;

    #[test]
    fn the_output_takes_the_target_shape_and_bad_loc_is_refused() {
        let a = attrs(&[
            ("target_shape", "(3, 4)"),
            ("transform_type", "affine"),
            ("sampler_type", "bilinear"),
        ]);
        let op = find("SpatialTransformer").unwrap().build(&a).unwrap();
        let d = Shape::from_slice(&[2, 5, 7, 8]);
        let out = op
            .infer_shape(&[d.clone(), Shape::from_slice(&[2, 6])])
            .unwrap();
        assert_eq!(out[0].as_slice(), &[2, 5, 3, 4]);
        let e = op
            .infer_shape(&[d, Shape::from_slice(&[2, 4])])
            .unwrap_err();
        assert!(e.message().contains("loc"), "{e}");
        let zero = attrs(&[
            ("target_shape", "(0, 4)"),
            ("transform_type", "affine"),
            ("sampler_type", "bilinear"),
        ]);
        assert!(find("SpatialTransformer").unwrap().build(&zero).is_err());
    }
}
