//! Definition of `ROIPooling` (Fast R-CNN): max pooling of each region of interest into
//! a fixed grid of bins; the flat index of each bin's maximum is a hidden output that the
//! backward routes the gradient through.

use super::common::float_dtype;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::{check_inputs, shape_err, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param};
use crate::op::{Params, Registry};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

pub(crate) const NAME: &str = "ROIPooling";

const PARAMS: &[Param] = &[
    Param::required(
        "pooled_size",
        "Shape(tuple)",
        "ROI pooling output shape (h,w) ",
    ),
    Param::required(
        "spatial_scale",
        "float",
        "Ratio of input feature map height (or w) to raw image height (or w). Equals the reciprocal of total stride in convolutional layers",
    ),
];

/// `ROIPooling`: each region `[batch index, x1, y1, x2, y2]` (image coordinates, scaled by
/// `spatial_scale` and rounded) pooled into `pooled` (height, width) bins.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RoiPooling {
    pub(crate) pooled: (usize, usize),
    pub(crate) spatial_scale: f32,
}

/// One bin of a region: the rows and columns `[h0, h1) x [w0, w1)` of its image, clipped
/// to the data (empty when the region lies outside it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bin {
    pub(crate) h0: usize,
    pub(crate) h1: usize,
    pub(crate) w0: usize,
    pub(crate) w1: usize,
}

/// A region scaled to the feature map: its first row and column and its bin sizes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Region {
    pub(crate) batch: Option<usize>,
    start: (i64, i64),
    bin: (f64, f64),
    f32_math: bool,
}

impl RoiPooling {
    /// Region `roi` (`[batch index, x1, y1, x2, y2]`) of a batch of `batch` images, as
    /// MXNet rounds it: corners scaled and rounded half away from zero, at least one
    /// pixel each way. `f32_math` computes in single precision as MXNet does for float16
    /// and float32 data.
    pub(crate) fn region(&self, roi: [f64; 5], batch: usize, f32_math: bool) -> Region {
        let scale = |v: f64| -> i64 {
            if f32_math {
                (v as f32 * self.spatial_scale).round() as i64
            } else {
                (v * self.spatial_scale as f64).round() as i64
            }
        };
        let (x1, y1, x2, y2) = (scale(roi[1]), scale(roi[2]), scale(roi[3]), scale(roi[4]));
        let index = roi[0] as i64;
        let (rh, rw) = ((y2 - y1 + 1).max(1), (x2 - x1 + 1).max(1));
        let bin = |extent: i64, n: usize| -> f64 {
            if f32_math {
                (extent as f32 / n as f32) as f64
            } else {
                extent as f64 / n as f64
            }
        };
        Region {
            batch: (index >= 0 && (index as usize) < batch).then_some(index as usize),
            start: (y1, x1),
            bin: (bin(rh, self.pooled.0), bin(rw, self.pooled.1)),
            f32_math,
        }
    }

    /// Bin (`ph`, `pw`) of `region` in data of `size` (height, width).
    pub(crate) fn bin(&self, region: &Region, ph: usize, pw: usize, size: (usize, usize)) -> Bin {
        // The products round in the compute type, as MXNet's do: in float32, 3 * (7 / 3)
        // is exactly 7.
        let times = |p: usize, bin: f64| -> f64 {
            if region.f32_math {
                (p as f32 * bin as f32) as f64
            } else {
                p as f64 * bin
            }
        };
        let span = |p: usize, bin: f64, start: i64, limit: usize| -> (usize, usize) {
            let lo = times(p, bin).floor() as i64 + start;
            let hi = times(p + 1, bin).ceil() as i64 + start;
            let clip = |v: i64| v.clamp(0, limit as i64) as usize;
            (clip(lo), clip(hi))
        };
        let (h0, h1) = span(ph, region.bin.0, region.start.0, size.0);
        let (w0, w1) = span(pw, region.bin.1, region.start.1, size.1);
        Bin { h0, h1, w0, w1 }
    }
}

impl Bin {
    /// True if the bin holds no pixel.
    pub(crate) fn is_empty(&self) -> bool {
        self.h1 <= self.h0 || self.w1 <= self.w0
    }
}

impl Operator for RoiPooling {
    fn name(&self) -> &'static str {
        NAME
    }

    fn num_outputs(&self) -> usize {
        2
    }

    fn num_visible_outputs(&self) -> usize {
        1
    }

    fn output_names(&self) -> Vec<String> {
        vec!["output".into(), "maxidx".into()]
    }

    fn optional_outputs(&self) -> &'static [usize] {
        &[1]
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(NAME, inputs, 2)?;
        let (d, r) = (&inputs[0], &inputs[1]);
        if d.len() != 4 {
            return Err(shape_err(
                NAME,
                "data must be 4-D (batch, channel, height, width)",
                d,
            ));
        }
        if r.len() != 2 || r[1] != 5 {
            return Err(shape_err(
                NAME,
                "rois must be 2-D (num_rois, 5), each [batch_index, x1, y1, x2, y2]",
                r,
            ));
        }
        let out = Shape::from_slice(&[r[0], d[1], self.pooled.0, self.pooled.1]);
        Ok(vec![out.clone(), out])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(NAME, inputs)?, DType::I64])
    }

    fn gradient(&self) -> Grad {
        Grad::Op(Gradient {
            op: Arc::new(RoiPoolingBackward),
            ograds: vec![0],
            inputs: vec![0],
            outputs: vec![1],
            grad_of: vec![0],
        })
    }
}

/// `_backward_ROIPooling`: from the output gradient, the data (for its shape) and the
/// maxima's indices, the data's gradient (each bin's gradient added at its maximum).
pub(crate) struct RoiPoolingBackward;

impl Operator for RoiPoolingBackward {
    fn name(&self) -> &'static str {
        "_backward_ROIPooling"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        let name = self.name();
        check_inputs(name, inputs, 3)?;
        if inputs[0] != inputs[2] {
            return Err(Error::Value(format!(
                "{name}: the output gradient {} and the indices {} differ in shape",
                fmt_shape(&inputs[0]),
                fmt_shape(&inputs[2])
            )));
        }
        Ok(vec![inputs[1].clone()])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![float_dtype(self.name(), &inputs[..2])?])
    }
}

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared(NAME, attrs, PARAMS)?;
    let pooled: Vec<i64> = p.get("pooled_size")?;
    let spatial_scale: f64 = p.get("spatial_scale")?;
    let pooled = match pooled[..] {
        [h, w] if h > 0 && w > 0 => (h as usize, w as usize),
        _ => {
            return Err(Error::Value(format!(
                "{NAME}: pooled_size must be a positive (height, width), got {pooled:?}"
            )))
        }
    };
    if !(0.0..=1.0).contains(&spatial_scale) {
        return Err(Error::Value(format!(
            "{NAME}: spatial_scale must be in [0, 1], got {spatial_scale}"
        )));
    }
    Ok(Arc::new(RoiPooling {
        pooled,
        spatial_scale: spatial_scale as f32,
    }))
}

/// Registers `ROIPooling`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: NAME,
        aliases: &[],
        inputs: &["data", "rois"],
        variadic: false,
        params: PARAMS,
        doc: "Max-pools each region of interest into a fixed grid of bins.",
        create: Box::new(create),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_round_their_corners_and_bins_clip_to_the_data() {
        let op = RoiPooling {
            pooled: (2, 2),
            spatial_scale: 0.5,
        };
        // x1=1 -> round(0.5)=1 (half away from zero), y1=3 -> 2, x2=7 -> 4, y2=9 -> 5.
        let r = op.region([1.0, 1.0, 3.0, 7.0, 9.0], 2, true);
        assert_eq!(r.batch, Some(1));
        assert_eq!(r.start, (2, 1));
        assert_eq!(r.bin, (2.0, 2.0));
        let b = op.bin(&r, 1, 1, (5, 4));
        assert_eq!(
            b,
            Bin {
                h0: 4,
                h1: 5,
                w0: 3,
                w1: 4
            }
        );
        assert!(op
            .region([2.0, 0.0, 0.0, 1.0, 1.0], 2, true)
            .batch
            .is_none());
        let outside = op.region([0.0, 40.0, 40.0, 50.0, 50.0], 1, true);
        assert!(op.bin(&outside, 0, 0, (5, 4)).is_empty());
    }
}
