//! Definition of `Correlation` (FlowNet's correlation layer): for each displacement in
//! the neighbourhood, the channel-mean of the products (or absolute differences) of the
//! two padded inputs, averaged over a kernel window. Run as slices, a channel mean and an
//! average pool per displacement, concatenated.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::composite::{tuple_attr, Builder, Composite, Decomposition, Src};
use crate::op::infer::infer_from_partial;
use crate::op::{
    assign_shape, check_inputs, Attrs, OpDef, OpRef, Operator, Param, Params, Registry, ShapeSlots,
};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

const PARAMS: &[Param] = &[
    Param::new(
        "kernel_size",
        "int (non-negative)",
        "1",
        "kernel size for Correlation must be an odd number",
    ),
    Param::new(
        "max_displacement",
        "int (non-negative)",
        "1",
        "Max displacement of Correlation ",
    ),
    Param::new(
        "stride1",
        "int (non-negative)",
        "1",
        "stride1 quantize data1 globally",
    ),
    Param::new(
        "stride2",
        "int (non-negative)",
        "1",
        "stride2 quantize data2 within the neighborhood centered around data1",
    ),
    Param::new("pad_size", "int (non-negative)", "0", "pad for Correlation"),
    Param::new(
        "is_multiply",
        "boolean",
        "True",
        "operation type is either multiplication or subduction",
    ),
];

/// `Correlation`.
struct Correlation {
    kernel: usize,
    max_disp: usize,
    stride1: usize,
    stride2: usize,
    pad: usize,
    multiply: bool,
}

/// The sizes `Correlation` derives from its data's shape.
struct Layout {
    padded: (usize, usize),
    top: (usize, usize),
    grid_radius: usize,
    grid_width: usize,
}

impl Correlation {
    fn layout(&self, d: &Shape) -> Result<Layout> {
        if d.len() != 4 {
            return Err(Error::Value(format!(
                "Correlation: data must be 4-D (batch, channel, height, width), got shape {}",
                fmt_shape(d)
            )));
        }
        let padded = (d[2] + 2 * self.pad, d[3] + 2 * self.pad);
        let border = self.max_disp + (self.kernel - 1) / 2;
        let top = |p: usize| -> usize {
            let span = p as i64 - 2 * border as i64;
            if span <= 0 {
                0
            } else {
                (span as usize).div_ceil(self.stride1)
            }
        };
        let (th, tw) = (top(padded.0), top(padded.1));
        if th == 0 || tw == 0 {
            return Err(Error::Value(format!(
                "Correlation: the neighbourhood (max_displacement={}) and kernel (kernel_size={}) do not fit in data of shape {} padded by {}",
                self.max_disp,
                self.kernel,
                fmt_shape(d),
                self.pad
            )));
        }
        let grid_radius = self.max_disp / self.stride2;
        Ok(Layout {
            padded,
            top: (th, tw),
            grid_radius,
            grid_width: 2 * grid_radius + 1,
        })
    }

    fn slice(
        b: &mut Builder,
        x: Src,
        (y0, x0): (usize, usize),
        (h, w): (usize, usize),
    ) -> Result<Src> {
        b.op(
            "slice",
            &[
                ("begin", format!("(None, None, {y0}, {x0})")),
                ("end", format!("(None, None, {}, {})", y0 + h, x0 + w)),
            ],
            &[x],
        )
    }
}

impl Operator for Correlation {
    fn name(&self) -> &'static str {
        "Correlation"
    }

    fn num_outputs(&self) -> usize {
        3
    }

    fn num_visible_outputs(&self) -> usize {
        1
    }

    fn output_names(&self) -> Vec<String> {
        vec!["output".into(), "tmp1".into(), "tmp2".into()]
    }

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        crate::op::infer::check_count("Correlation", inputs.len(), 2)?;
        let (Some(d1), Some(d2)) = (inputs[0].clone(), inputs[1].clone()) else {
            return Ok(());
        };
        check_inputs("Correlation", &[d1.clone(), d2.clone()], 2)?;
        if d1 != d2 {
            return Err(Error::Value(format!(
                "Correlation: data1 {} and data2 {} must have the same shape",
                fmt_shape(&d1),
                fmt_shape(&d2)
            )));
        }
        let l = self.layout(&d1)?;
        let out = Shape::from_slice(&[d1[0], l.grid_width * l.grid_width, l.top.0, l.top.1]);
        let tmp = Shape::from_slice(&[d1[0], l.padded.0, l.padded.1, d1[1]]);
        assign_shape("Correlation", "output", &mut outputs[0], &out)?;
        assign_shape("Correlation", "tmp1", &mut outputs[1], &tmp)?;
        assign_shape("Correlation", "tmp2", &mut outputs[2], &tmp)
    }

    infer_from_partial!(shape);

    fn as_composite(&self) -> Option<&dyn Composite> {
        Some(self)
    }
}

impl Composite for Correlation {
    fn decompose(&self, shapes: &[Shape], _types: &[DType]) -> Result<Decomposition> {
        let d = &shapes[0];
        let l = self.layout(d)?;
        let (k, s1, s2, md) = (self.kernel, self.stride1, self.stride2, self.max_disp);
        // The window rows and columns every output position reads, from (md, md).
        let extent = ((l.top.0 - 1) * s1 + k, (l.top.1 - 1) * s1 + k);
        // Enough zeros after the data that every displaced window stays inside.
        let reach = (
            md + l.grid_radius * s2 + extent.0,
            md + l.grid_radius * s2 + extent.1,
        );
        let extra = (
            reach.0.saturating_sub(l.padded.0),
            reach.1.saturating_sub(l.padded.1),
        );
        let mut b = Builder::new();
        let pad = |b: &mut Builder, x: Src, extra: (usize, usize)| -> Result<Src> {
            let p = self.pad as i64;
            let w = [0, 0, 0, 0, p, p + extra.0 as i64, p, p + extra.1 as i64];
            if w.iter().all(|&v| v == 0) {
                return Ok(x);
            }
            b.op(
                "Pad",
                &[("mode", "constant".into()), ("pad_width", tuple_attr(&w))],
                &[x],
            )
        };
        let p1 = pad(&mut b, Src::Input(0), (0, 0))?;
        let p2 = pad(&mut b, Src::Input(1), extra)?;
        let anchor = Self::slice(&mut b, p1, (md, md), extent)?;
        let mut maps = Vec::with_capacity(l.grid_width * l.grid_width);
        for tc in 0..l.grid_width * l.grid_width {
            let dx = (tc % l.grid_width) as i64 - l.grid_radius as i64;
            let dy = (tc / l.grid_width) as i64 - l.grid_radius as i64;
            let at = (
                (md as i64 + dy * s2 as i64) as usize,
                (md as i64 + dx * s2 as i64) as usize,
            );
            let moved = Self::slice(&mut b, p2, at, extent)?;
            let pair = if self.multiply {
                b.binary("elemwise_mul", anchor, moved)?
            } else {
                // |a - b| with the gradient's sign +1 where a >= b, as MXNet's.
                let diff = b.binary("elemwise_sub", anchor, moved)?;
                let flipped = b.unary("negative", diff)?;
                let ge = b.binary("_greater_equal", anchor, moved)?;
                b.op("where", &[], &[ge, diff, flipped])?
            };
            let mean = b.reduce("mean", pair, &[1], true)?;
            let window = b.op(
                "Pooling",
                &[
                    ("pool_type", "avg".into()),
                    ("kernel", tuple_attr(&[k as i64, k as i64])),
                    ("stride", tuple_attr(&[s1 as i64, s1 as i64])),
                ],
                &[mean],
            )?;
            maps.push(window);
        }
        let out = if maps.len() == 1 {
            maps[0]
        } else {
            b.op(
                "Concat",
                &[("dim", "1".into()), ("num_args", maps.len().to_string())],
                &maps,
            )?
        };
        let channels_last =
            |b: &mut Builder, x: Src| b.op("transpose", &[("axes", "(0, 2, 3, 1)".into())], &[x]);
        let t1 = channels_last(&mut b, p1)?;
        let p2_used = if extra == (0, 0) {
            p2
        } else {
            Self::slice(&mut b, p2, (0, 0), l.padded)?
        };
        let t2 = channels_last(&mut b, p2_used)?;
        b.finish(vec![out, t1, t2])
    }
}

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("Correlation", attrs, PARAMS)?;
    let c = Correlation {
        kernel: p.get("kernel_size")?,
        max_disp: p.get("max_displacement")?,
        stride1: p.get("stride1")?,
        stride2: p.get("stride2")?,
        pad: p.get("pad_size")?,
        multiply: p.get("is_multiply")?,
    };
    if c.kernel.is_multiple_of(2) {
        return Err(Error::Value(format!(
            "Correlation: kernel_size must be an odd number, got {}",
            c.kernel
        )));
    }
    if c.stride1 == 0 || c.stride2 == 0 {
        return Err(Error::Value(
            "Correlation: stride1 and stride2 must be positive".into(),
        ));
    }
    Ok(Arc::new(c))
}

/// Registers `Correlation`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "Correlation",
        aliases: &[],
        inputs: &["data1", "data2"],
        variadic: false,
        params: PARAMS,
        doc: "Correlation of two feature maps over a neighbourhood of displacements.",
        create: Box::new(create),
    });
}
