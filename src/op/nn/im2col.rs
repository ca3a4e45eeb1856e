//! Definitions of `im2col` and `col2im`: the sliding windows of an image as columns, and
//! their sum back into an image. Run as a convolution (and a deconvolution) whose weight
//! is the identity over (channel, window position), so they share the convolution's
//! kernels and gradients.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::composite::{tuple_attr, Builder, Defined, Src};
use crate::op::{Attrs, OpDef, OpRef, Param, Params, Registry};
use crate::shape::{fmt_shape, Shape};

const WINDOW_PARAMS: [Param; 4] = [
    Param::required("kernel", "Shape(tuple)", "Sliding kernel size: (w,), (h, w) or (d, h, w)."),
    Param::new("stride", "Shape(tuple)", "[]", "The stride between adjacent sliding blocks in spatial dimension: (w,), (h, w) or (d, h, w). Defaults to 1 for each dimension."),
    Param::new("dilate", "Shape(tuple)", "[]", "The spacing between adjacent kernel points: (w,), (h, w) or (d, h, w). Defaults to 1 for each dimension."),
    Param::new("pad", "Shape(tuple)", "[]", "The zero-value padding size on both sides of spatial dimension: (w,), (h, w) or (d, h, w). Defaults to no padding."),
];

const IM2COL_PARAMS: &[Param] = &WINDOW_PARAMS;

const COL2IM_PARAMS: &[Param] = &[
    Param::required(
        "output_size",
        "Shape(tuple)",
        "The spatial dimension of image array: (w,), (h, w) or (d, h, w).",
    ),
    WINDOW_PARAMS[0],
    WINDOW_PARAMS[1],
    WINDOW_PARAMS[2],
    WINDOW_PARAMS[3],
];

/// The window geometry, one entry per spatial axis.
#[derive(Clone)]
struct Window {
    kernel: Vec<i64>,
    stride: Vec<i64>,
    dilate: Vec<i64>,
    pad: Vec<i64>,
}

impl Window {
    fn from(op: &str, p: &Params) -> Result<Window> {
        let kernel: Vec<i64> = p.get("kernel")?;
        let n = kernel.len();
        let tuple = |key: &str, default: i64| -> Result<Vec<i64>> {
            let v: Vec<i64> = p.get(key)?;
            match v.len() {
                0 => Ok(vec![default; n]),
                l if l == n => Ok(v),
                _ => Err(Error::Value(format!(
                    "{op}: {key} must have {n} entries, like kernel, got {v:?}"
                ))),
            }
        };
        let w = Window {
            stride: tuple("stride", 1)?,
            dilate: tuple("dilate", 1)?,
            pad: tuple("pad", 0)?,
            kernel,
        };
        if n == 0
            || n > 3
            || w.kernel
                .iter()
                .chain(&w.stride)
                .chain(&w.dilate)
                .any(|&v| v < 1)
            || w.pad.iter().any(|&v| v < 0)
        {
            return Err(Error::Value(format!(
                "{op}: kernel must have 1 to 3 positive sizes, stride and dilate positive entries, pad non-negative ones"
            )));
        }
        Ok(w)
    }

    fn positions(&self) -> usize {
        self.kernel.iter().product::<i64>() as usize
    }

    /// Window positions along each axis of an image of spatial size `size`.
    fn blocks(&self, op: &str, size: &[usize]) -> Result<Vec<usize>> {
        let mut out = Vec::new();
        for (i, &s) in size.iter().enumerate() {
            let span = self.dilate[i] * (self.kernel[i] - 1) + 1;
            let room = s as i64 + 2 * self.pad[i] - span;
            if room < 0 {
                return Err(Error::Value(format!(
                    "{op}: the kernel (with dilation) does not fit the padded spatial size {size:?}"
                )));
            }
            out.push((room / self.stride[i] + 1) as usize);
        }
        Ok(out)
    }

    fn conv_attrs(&self, filters: usize) -> Vec<(&'static str, String)> {
        vec![
            ("kernel", tuple_attr(&self.kernel)),
            ("stride", tuple_attr(&self.stride)),
            ("dilate", tuple_attr(&self.dilate)),
            ("pad", tuple_attr(&self.pad)),
            ("num_filter", filters.to_string()),
            ("no_bias", "true".into()),
        ]
    }

    /// The identity weight `(C*K, C, kernel...)`: filter `c*K + k` picks channel `c` at
    /// window position `k`.
    fn identity(&self, b: &mut Builder, channels: usize, dtype: DType) -> Result<Src> {
        let rows = channels * self.positions();
        let i = b.op(
            "_arange",
            &[
                ("start", "0".into()),
                ("stop", rows.to_string()),
                ("dtype", "int64".into()),
            ],
            &[],
        )?;
        let eye = b.op(
            "one_hot",
            &[("depth", rows.to_string()), ("dtype", dtype.name().into())],
            &[i],
        )?;
        let mut shape = vec![rows, channels];
        shape.extend(self.kernel.iter().map(|&k| k as usize));
        b.reshape(eye, &shape)
    }
}

fn check_ndim(op: &str, d: &Shape, w: &Window) -> Result<()> {
    if d.len() != w.kernel.len() + 2 {
        return Err(Error::Value(format!(
            "{op}: data of shape {} must have {} dimensions for a kernel of {} axes",
            fmt_shape(d),
            w.kernel.len() + 2,
            w.kernel.len()
        )));
    }
    Ok(())
}

fn im2col(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("im2col", attrs, IM2COL_PARAMS)?;
    let w = Window::from("im2col", &p)?;
    let ws = w.clone();
    Ok(Defined::op(
        "im2col",
        Box::new(move |s: &[Shape]| {
            crate::op::check_inputs("im2col", s, 1)?;
            let d = &s[0];
            check_ndim("im2col", d, &ws)?;
            let l: usize = ws.blocks("im2col", &d[2..])?.iter().product();
            Ok(vec![Shape::from_slice(&[d[0], d[1] * ws.positions(), l])])
        }),
        Box::new(|t: &[DType]| Ok(vec![t[0]])),
        Box::new(move |b, s, t| {
            let d = &s[0];
            let rows = d[1] * w.positions();
            let weight = w.identity(b, d[1], t[0])?;
            let cols = b.op("Convolution", &w.conv_attrs(rows), &[Src::Input(0), weight])?;
            let l: usize = w.blocks("im2col", &d[2..])?.iter().product();
            Ok(vec![b.reshape(cols, &[d[0], rows, l])?])
        }),
    ))
}

fn col2im(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("col2im", attrs, COL2IM_PARAMS)?;
    let w = Window::from("col2im", &p)?;
    let size: Vec<usize> = p
        .get::<Vec<i64>>("output_size")?
        .iter()
        .map(|&v| v.max(0) as usize)
        .collect();
    if size.len() != w.kernel.len() {
        return Err(Error::Value(format!(
            "col2im: output_size {size:?} must have one entry per kernel axis"
        )));
    }
    let (ws, sizes, target) = (w.clone(), size.clone(), size.clone());
    let check = move |d: &Shape| -> Result<(usize, Vec<usize>)> {
        let k = ws.positions();
        let blocks = ws.blocks("col2im", &sizes)?;
        if d.len() != 3 || !d[1].is_multiple_of(k) || d[2] != blocks.iter().product::<usize>() {
            return Err(Error::Value(format!(
                "col2im: data of shape {} must be (batch, channels * {k}, {}) for output_size {sizes:?}",
                fmt_shape(d),
                blocks.iter().product::<usize>()
            )));
        }
        Ok((d[1] / k, blocks))
    };
    let check2 = check.clone();
    Ok(Defined::op(
        "col2im",
        Box::new(move |s: &[Shape]| {
            crate::op::check_inputs("col2im", s, 1)?;
            let (c, _) = check(&s[0])?;
            let mut out = vec![s[0][0], c];
            out.extend(&size);
            Ok(vec![Shape::from_slice(&out)])
        }),
        Box::new(|t: &[DType]| Ok(vec![t[0]])),
        Box::new(move |b, s, t| {
            let d = &s[0];
            let (c, blocks) = check2(d)?;
            let mut grid = vec![d[0], d[1]];
            grid.extend(&blocks);
            let x = b.reshape(Src::Input(0), &grid)?;
            let weight = w.identity(b, c, t[0])?;
            // The deconvolution's output falls short of output_size by what the last
            // stride leaves out: that is its `adj`.
            let adj: Vec<i64> = (0..target.len())
                .map(|i| {
                    let full = (blocks[i] as i64 - 1) * w.stride[i] - 2 * w.pad[i]
                        + w.dilate[i] * (w.kernel[i] - 1)
                        + 1;
                    target[i] as i64 - full
                })
                .collect();
            let mut attrs = w.conv_attrs(c);
            attrs.push(("adj", tuple_attr(&adj)));
            Ok(vec![b.op("Deconvolution", &attrs, &[x, weight])?])
        }),
    ))
}

/// Registers `im2col` and `col2im`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "im2col",
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: IM2COL_PARAMS,
        doc: "The sliding windows of an image as columns: (N, C, spatial...) to (N, C * prod(kernel), windows).",
        create: Box::new(im2col),
    });
    r.add(OpDef {
        name: "col2im",
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: COL2IM_PARAMS,
        doc: "Sums columns of sliding windows back into an image of output_size.",
        create: Box::new(col2im),
    });
}
