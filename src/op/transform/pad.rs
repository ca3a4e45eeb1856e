//! Definition of `Pad` (constant, edge and reflect modes on the spatial axes of 4-D and
//! 5-D arrays), as a composition of slices, reversals, repeats and concatenations.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::composite::{tuple_attr, Builder, Defined, Src};
use crate::op::{Attrs, OpDef, OpRef, Param, Params, Registry};
use crate::shape::{fmt_shape, Shape};

const PARAMS: &[Param] = &[
    Param::new(
        "mode",
        "{'constant', 'edge', 'reflect'}",
        "'constant'",
        "Padding type to use. \"constant\" pads with `constant_value` \"edge\" pads using the edge values of the input array \"reflect\" pads by reflecting values with respect to the edges.",
    ),
    Param::required(
        "pad_width",
        "Shape(tuple)",
        "Widths of the padding regions applied to the edges of each axis. It is a tuple of integer padding widths for each axis of the format ``(before_1, after_1, ... , before_N, after_N)``. It should be of length ``2*N`` where ``N`` is the number of dimensions of the array.This is equivalent to pad_width in numpy.pad, but flattened.",
    ),
    Param::new("constant_value", "double", "0", "The value used for padding when `mode` is \"constant\"."),
];

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Constant,
    Edge,
    Reflect,
}

fn check(d: &Shape, width: &[usize], mode: Mode) -> Result<()> {
    let bad = |why: String| {
        Err(Error::Value(format!(
            "Pad: {why} (data shape {}, pad_width {:?})",
            fmt_shape(d),
            width
        )))
    };
    if d.len() != 4 && d.len() != 5 {
        return bad("only 4-D and 5-D data can be padded".into());
    }
    if width.len() != 2 * d.len() {
        return bad(format!(
            "pad_width must have {} entries, two per axis",
            2 * d.len()
        ));
    }
    if width[..4].iter().any(|&w| w != 0) {
        return bad("the batch and channel axes cannot be padded".into());
    }
    if mode == Mode::Reflect {
        for a in 2..d.len() {
            if width[2 * a] >= d[a] || width[2 * a + 1] >= d[a] {
                return bad(format!(
                    "reflect padding of axis {a} must be smaller than its length"
                ));
            }
        }
    }
    Ok(())
}

fn slice(b: &mut Builder, x: Src, axis: usize, lo: usize, hi: usize) -> Result<Src> {
    b.op(
        "slice_axis",
        &[
            ("axis", axis.to_string()),
            ("begin", lo.to_string()),
            ("end", hi.to_string()),
        ],
        &[x],
    )
}

/// How the padding is filled.
struct Fill {
    mode: Mode,
    value: f64,
    dtype: DType,
}

/// The block of `w` values padding `x` (currently of shape `cur`) before or after `axis`.
fn block(
    b: &mut Builder,
    x: Src,
    cur: &[usize],
    axis: usize,
    w: usize,
    before: bool,
    fill: &Fill,
) -> Result<Src> {
    let n = cur[axis];
    let (value, dtype) = (fill.value, fill.dtype);
    match fill.mode {
        Mode::Constant => {
            let mut s: Vec<i64> = cur.iter().map(|&d| d as i64).collect();
            s[axis] = w as i64;
            b.op(
                "_full",
                &[
                    ("shape", tuple_attr(&s)),
                    ("value", format!("{value:e}")),
                    ("dtype", dtype.name().into()),
                ],
                &[],
            )
        }
        Mode::Edge => {
            let edge = if before {
                slice(b, x, axis, 0, 1)?
            } else {
                slice(b, x, axis, n - 1, n)?
            };
            b.op(
                "repeat",
                &[("repeats", w.to_string()), ("axis", axis.to_string())],
                &[edge],
            )
        }
        Mode::Reflect => {
            let part = if before {
                slice(b, x, axis, 1, w + 1)?
            } else {
                slice(b, x, axis, n - 1 - w, n - 1)?
            };
            b.op("reverse", &[("axis", tuple_attr(&[axis as i64]))], &[part])
        }
    }
}

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("Pad", attrs, PARAMS)?;
    let mode = match p.get_choice("mode", &["constant", "edge", "reflect"])? {
        "edge" => Mode::Edge,
        "reflect" => Mode::Reflect,
        _ => Mode::Constant,
    };
    let width: Vec<usize> = p
        .get::<Vec<i64>>("pad_width")?
        .iter()
        .map(|&w| {
            usize::try_from(w).map_err(|_| {
                Error::Value(format!(
                    "Pad: pad_width entries must be non-negative, got {w}"
                ))
            })
        })
        .collect::<Result<_>>()?;
    let value: f64 = p.get("constant_value")?;
    let w2 = width.clone();
    Ok(Defined::op(
        "Pad",
        Box::new(move |s: &[Shape]| {
            crate::op::check_inputs("Pad", s, 1)?;
            check(&s[0], &width, mode)?;
            let out: Vec<usize> = s[0]
                .iter()
                .enumerate()
                .map(|(a, &d)| d + width[2 * a] + width[2 * a + 1])
                .collect();
            Ok(vec![Shape::from_slice(&out)])
        }),
        Box::new(|t: &[DType]| Ok(vec![t[0]])),
        Box::new(move |b, s, t| {
            check(&s[0], &w2, mode)?;
            let fill = Fill {
                mode,
                value,
                dtype: t[0],
            };
            let mut cur: Vec<usize> = s[0].to_vec();
            let mut x = Src::Input(0);
            for axis in 2..cur.len() {
                let (lo, hi) = (w2[2 * axis], w2[2 * axis + 1]);
                if lo == 0 && hi == 0 {
                    continue;
                }
                let mut parts = Vec::new();
                if lo > 0 {
                    parts.push(block(b, x, &cur, axis, lo, true, &fill)?);
                }
                parts.push(x);
                if hi > 0 {
                    parts.push(block(b, x, &cur, axis, hi, false, &fill)?);
                }
                x = b.op(
                    "Concat",
                    &[
                        ("dim", axis.to_string()),
                        ("num_args", parts.len().to_string()),
                    ],
                    &parts,
                )?;
                cur[axis] += lo + hi;
            }
            Ok(vec![x])
        }),
    ))
}

/// Registers `Pad` (alias `pad`).
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "Pad",
        aliases: &["pad"],
        inputs: &["data"],
        variadic: false,
        params: PARAMS,
        doc: "Pads the spatial axes of a 4-D or 5-D array with a constant, its edge values or their reflection.",
        create: Box::new(create),
    });
}
