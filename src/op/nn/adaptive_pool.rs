//! Definition of `_contrib_AdaptiveAvgPooling2D`: average pooling to a given output size,
//! output cell `i` of an axis of `n` averaging inputs `floor(i*n/out)..ceil((i+1)*n/out)`.
//! Run separably, one axis after the other, as slices, means and a concatenation.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::composite::{Builder, Defined, Src};
use crate::op::{Attrs, OpDef, OpRef, Param, Params, Registry};
use crate::shape::{fmt_shape, Shape};

const PARAMS: &[Param] = &[Param::new(
    "output_size",
    "Shape(tuple)",
    "[]",
    "int (output size) or a tuple of int for output (height, width).",
)];

/// The output (height, width) for `output_size`: empty is 1 by 1, one value is square.
fn out_size(given: &[i64]) -> Result<(usize, usize)> {
    let (h, w) = match given {
        [] => (1, 1),
        [s] => (*s, *s),
        [h, w] => (*h, *w),
        _ => {
            return Err(Error::Value(format!(
            "_contrib_AdaptiveAvgPooling2D: output_size must have at most 2 entries, got {given:?}"
        )))
        }
    };
    if h < 1 || w < 1 {
        return Err(Error::Value(format!(
            "_contrib_AdaptiveAvgPooling2D: output_size must be positive, got {given:?}"
        )));
    }
    Ok((h as usize, w as usize))
}

/// Appends the adaptive average of `x` along `axis` (of length `n`) into `out` cells.
fn pool_axis(b: &mut Builder, x: Src, axis: usize, n: usize, out: usize) -> Result<Src> {
    if n == out {
        return Ok(x);
    }
    let mut cells = Vec::with_capacity(out);
    for i in 0..out {
        let start = i * n / out;
        let end = ((i + 1) * n).div_ceil(out);
        let part = b.op(
            "slice_axis",
            &[
                ("axis", axis.to_string()),
                ("begin", start.to_string()),
                ("end", end.to_string()),
            ],
            &[x],
        )?;
        cells.push(b.reduce("mean", part, &[axis], true)?);
    }
    if cells.len() == 1 {
        return Ok(cells[0]);
    }
    b.op(
        "Concat",
        &[
            ("dim", axis.to_string()),
            ("num_args", cells.len().to_string()),
        ],
        &cells,
    )
}

fn create(attrs: &Attrs) -> Result<OpRef> {
    let name = "_contrib_AdaptiveAvgPooling2D";
    let p = Params::declared(name, attrs, PARAMS)?;
    let (oh, ow) = out_size(&p.get::<Vec<i64>>("output_size")?)?;
    let check = move |d: &Shape| -> Result<()> {
        if d.len() != 4 {
            return Err(Error::Value(format!(
                "{name}: data must be 4-D (batch, channel, height, width), got shape {}",
                fmt_shape(d)
            )));
        }
        Ok(())
    };
    Ok(Defined::op(
        name,
        Box::new(move |s: &[Shape]| {
            crate::op::check_inputs(name, s, 1)?;
            check(&s[0])?;
            Ok(vec![Shape::from_slice(&[s[0][0], s[0][1], oh, ow])])
        }),
        Box::new(|t: &[DType]| Ok(vec![t[0]])),
        Box::new(move |b, s, _| {
            let d = &s[0];
            let rows = pool_axis(b, Src::Input(0), 2, d[2], oh)?;
            let y = pool_axis(b, rows, 3, d[3], ow)?;
            Ok(vec![y])
        }),
    ))
}

/// Registers `_contrib_AdaptiveAvgPooling2D`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "_contrib_AdaptiveAvgPooling2D",
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: PARAMS,
        doc: "Average pooling of 4-D images to a given output size.",
        create: Box::new(create),
    });
}
