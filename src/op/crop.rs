//! Definition of the legacy `Crop`: a window of the last two axes of a 4-D array, of size
//! `h_w` or of the second input's height and width, at `offset` or centred; composed of
//! `slice`, so it runs and differentiates on every device (the second input, read only
//! for its shape, gets a zero gradient).

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::composite::{Defined, Src};
use crate::op::{Attrs, OpDef, OpRef, Param, Params, Registry};
use crate::shape::{fmt_shape, Shape};

const NAME: &str = "Crop";

const PARAMS: &[Param] = &[
    Param::new(
        "num_args",
        "int, required",
        "1",
        "Number of inputs for crop: one uses h_w for the crop height and width, two use the height and width of the second input (crop_like).",
    ),
    Param::new("offset", "Shape(tuple)", "(0,0)", "crop offset coordinate: (y, x)"),
    Param::new("h_w", "Shape(tuple)", "(0,0)", "crop height and width: (h, w)"),
    Param::new(
        "center_crop",
        "boolean",
        "False",
        "If set to true, then it will use be the center_crop, or it will crop using the shape of crop_like",
    ),
];

/// `Crop`'s arguments.
#[derive(Clone, Copy)]
struct Crop {
    num_args: usize,
    offset: (usize, usize),
    h_w: (usize, usize),
    center: bool,
}

impl Crop {
    /// The window: (top, left, height, width) in an input of shape `data`.
    fn window(&self, inputs: &[Shape]) -> Result<(usize, usize, usize, usize)> {
        if inputs.len() != self.num_args {
            return Err(Error::Value(format!(
                "{NAME}: num_args is {} but {} inputs were given",
                self.num_args,
                inputs.len()
            )));
        }
        let data = &inputs[0];
        if data.len() != 4 {
            return Err(Error::Value(format!(
                "{NAME}: data must be 4-D (batch, channel, y, x), got shape {}",
                fmt_shape(data)
            )));
        }
        let (h, w) = match inputs.get(1) {
            Some(like) if like.len() == 4 => (like[2], like[3]),
            Some(like) => {
                return Err(Error::Value(format!(
                    "{NAME}: crop_like must be 4-D, got shape {}",
                    fmt_shape(like)
                )))
            }
            None => self.h_w,
        };
        let (rows, cols) = (data[2], data[3]);
        if h < 1 || w < 1 || h > rows || w > cols {
            return Err(Error::Value(format!(
                "{NAME}: a crop of {h}x{w} does not fit the data's {rows}x{cols} (shape {})",
                fmt_shape(data)
            )));
        }
        let (top, left) = if self.center {
            ((rows - h) / 2, (cols - w) / 2)
        } else {
            self.offset
        };
        if top > rows - h || left > cols - w {
            return Err(Error::Value(format!(
                "{NAME}: offset ({top}, {left}) leaves no room for a {h}x{w} crop of the data's {rows}x{cols}"
            )));
        }
        Ok((top, left, h, w))
    }
}

/// A pair of sizes from a tuple attribute.
fn pair(p: &Params, key: &str) -> Result<(usize, usize)> {
    let v: Vec<i64> = p.get(key)?;
    match v[..] {
        [a, b] if a >= 0 && b >= 0 => Ok((a as usize, b as usize)),
        _ => Err(Error::Value(format!(
            "{NAME}: {key} must be two non-negative integers, got {v:?}"
        ))),
    }
}

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared(NAME, attrs, PARAMS)?;
    let num_args: i64 = p.get("num_args")?;
    if !(1..=2).contains(&num_args) {
        return Err(Error::Value(format!(
            "{NAME}: num_args must be 1 or 2, got {num_args}"
        )));
    }
    let crop = Crop {
        num_args: num_args as usize,
        offset: pair(&p, "offset")?,
        h_w: pair(&p, "h_w")?,
        center: p.get("center_crop")?,
    };
    Ok(Defined::op(
        NAME,
        Box::new(move |s: &[Shape]| {
            let (_, _, h, w) = crop.window(s)?;
            let mut out = s[0].clone();
            out[2] = h;
            out[3] = w;
            Ok(vec![out])
        }),
        Box::new(|t: &[DType]| Ok(vec![t[0]])),
        Box::new(move |b, s, _| {
            let (top, left, h, w) = crop.window(s)?;
            let begin = format!("(None, None, {top}, {left})");
            let end = format!("(None, None, {}, {})", top + h, left + w);
            Ok(vec![b.op(
                "slice",
                &[("begin", begin), ("end", end)],
                &[Src::Input(0)],
            )?])
        }),
    ))
}

/// Registers `Crop`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: NAME,
        aliases: &[],
        inputs: &["data"],
        variadic: true,
        params: PARAMS,
        doc: "Crops the last two axes of a 4-D array to h_w, or to the height and width of a second array.",
        create: Box::new(create),
    });
}
