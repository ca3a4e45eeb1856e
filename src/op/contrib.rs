//! Definitions of small operators run as compositions of others: the `_contrib_` ones
//! (`div_sqrt_dim`, `quadratic`, `allclose`, `index_array`, `arange_like`,
//! `index_copy`), `all_finite`, `diag`, `batch_take`, `_split_v2`, the losses
//! `smooth_l1` and `softmax_cross_entropy`, and the index conversions
//! `_ravel_multi_index` / `_unravel_index`.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::composite::{tuple_attr, Builder, Composite, Decomposition, Defined, Src};
use crate::op::infer::{check_count, infer_from_partial};
use crate::op::{Attrs, OpDef, OpRef, Operator, Param, Params, Registry, ShapeSlots};
use crate::shape::{fmt_shape, Shape};

/// The inputs' shared dtype, as the output's.
fn same_type(op: &'static str) -> crate::op::composite::TypeFn {
    Box::new(move |t: &[DType]| Ok(vec![crate::op::same_dtype(op, t)?]))
}

/// A fixed output dtype.
fn fixed_type(t: DType) -> crate::op::composite::TypeFn {
    Box::new(move |_: &[DType]| Ok(vec![t]))
}

fn shape_of_first(op: &'static str, n: usize) -> crate::op::composite::ShapeFn {
    Box::new(move |s: &[Shape]| {
        crate::op::check_inputs(op, s, n)?;
        Ok(vec![s[0].clone()])
    })
}

fn dims(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&d| d as i64).collect()
}

fn arange(b: &mut Builder, n: usize, dtype: DType) -> Result<Src> {
    b.op(
        "_arange",
        &[
            ("start", "0".into()),
            ("stop", n.to_string()),
            ("dtype", dtype.name().into()),
        ],
        &[],
    )
}

fn axis_of(op: &str, axis: i64, ndim: usize) -> Result<usize> {
    let a = if axis < 0 { axis + ndim as i64 } else { axis };
    if a < 0 || a >= ndim as i64 {
        return Err(Error::Value(format!(
            "{op}: axis {axis} is out of range for an array of {ndim} dimensions"
        )));
    }
    Ok(a as usize)
}

// ---------------------------------------------------------------- div_sqrt_dim, quadratic

fn div_sqrt_dim(attrs: &Attrs) -> Result<OpRef> {
    Params::declared("_contrib_div_sqrt_dim", attrs, &[])?;
    Ok(Defined::op(
        "_contrib_div_sqrt_dim",
        shape_of_first("_contrib_div_sqrt_dim", 1),
        same_type("_contrib_div_sqrt_dim"),
        Box::new(|b, s, _| {
            let last = s[0].last().copied().unwrap_or(1) as f64;
            Ok(vec![b.scalar("_div_scalar", Src::Input(0), last.sqrt())?])
        }),
    ))
}

const QUADRATIC_PARAMS: &[Param] = &[
    Param::new(
        "a",
        "float",
        "0",
        "Coefficient of the quadratic term in the quadratic function.",
    ),
    Param::new(
        "b",
        "float",
        "0",
        "Coefficient of the linear term in the quadratic function.",
    ),
    Param::new(
        "c",
        "float",
        "0",
        "Constant term in the quadratic function.",
    ),
];

fn quadratic(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("_contrib_quadratic", attrs, QUADRATIC_PARAMS)?;
    let (qa, qb, qc): (f64, f64, f64) = (p.get("a")?, p.get("b")?, p.get("c")?);
    Ok(Defined::op(
        "_contrib_quadratic",
        shape_of_first("_contrib_quadratic", 1),
        same_type("_contrib_quadratic"),
        Box::new(move |b, _, _| {
            // (a * x + b) * x + c
            let ax = b.scalar("_mul_scalar", Src::Input(0), qa)?;
            let axb = b.scalar("_plus_scalar", ax, qb)?;
            let q = b.binary("elemwise_mul", axb, Src::Input(0))?;
            Ok(vec![b.scalar("_plus_scalar", q, qc)?])
        }),
    ))
}

// ---------------------------------------------------------------- allclose, all_finite

const ALLCLOSE_PARAMS: &[Param] = &[
    Param::new("rtol", "float", "9.99999975e-06", "Relative tolerance."),
    Param::new("atol", "float", "9.99999994e-09", "Absolute tolerance."),
    Param::new(
        "equal_nan",
        "boolean",
        "True",
        "Whether to compare NaN's as equal. If True, NaN's in A will be considered equal to NaN's in B in the output array.",
    ),
];

/// Appends `x != x`: 1 where `x` is NaN.
fn is_nan(b: &mut Builder, x: Src) -> Result<Src> {
    b.op("_not_equal", &[], &[x, x])
}

/// Appends the minimum over every element, as a `(1,)` uint8 array.
fn all_of(b: &mut Builder, x: Src) -> Result<Src> {
    let m = b.op("min", &[], &[x])?;
    b.op("Cast", &[("dtype", "uint8".into())], &[m])
}

fn allclose(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("_contrib_allclose", attrs, ALLCLOSE_PARAMS)?;
    let (rtol, atol, equal_nan): (f64, f64, bool) =
        (p.get("rtol")?, p.get("atol")?, p.get("equal_nan")?);
    Ok(Defined::op(
        "_contrib_allclose",
        Box::new(|s: &[Shape]| {
            crate::op::check_inputs("_contrib_allclose", s, 2)?;
            if s[0] != s[1] {
                return Err(Error::Value(format!(
                    "_contrib_allclose: a and b must have the same shape, got {} and {}",
                    fmt_shape(&s[0]),
                    fmt_shape(&s[1])
                )));
            }
            // A scalar (no dimensions), as MXNet's.
            Ok(vec![Shape::new()])
        }),
        fixed_type(DType::U8),
        Box::new(move |b, _, _| {
            let (x, y) = (Src::Input(0), Src::Input(1));
            let diff = b.binary("elemwise_sub", x, y)?;
            let diff = b.unary("abs", diff)?;
            let scale = b.unary("abs", y)?;
            let tol = b.scalar("_mul_scalar", scale, rtol)?;
            let tol = b.scalar("_plus_scalar", tol, atol)?;
            let near = b.binary("_lesser_equal", diff, tol)?;
            let equal = b.binary("_equal", x, y)?;
            let mut close = b.binary("_logical_or", near, equal)?;
            if equal_nan {
                let (nx, ny) = (is_nan(b, x)?, is_nan(b, y)?);
                let both = b.binary("_logical_and", nx, ny)?;
                close = b.binary("_logical_or", close, both)?;
            }
            let all = all_of(b, close)?;
            Ok(vec![b.reshape(all, &[])?])
        }),
    ))
}

const ALL_FINITE_PARAMS: &[Param] = &[Param::new(
    "init_output",
    "boolean",
    "True",
    "Initialize output to 1.",
)];

fn all_finite(attrs: &Attrs) -> Result<OpRef> {
    Params::declared("all_finite", attrs, ALL_FINITE_PARAMS)?;
    Ok(Defined::op(
        "all_finite",
        Box::new(|s: &[Shape]| {
            crate::op::check_inputs("all_finite", s, 1)?;
            Ok(vec![Shape::from_slice(&[1])])
        }),
        fixed_type(DType::F32),
        Box::new(|b, _, _| {
            // x - x is 0 for finite values, NaN for infinities and NaNs.
            let zero = b.binary("elemwise_sub", Src::Input(0), Src::Input(0))?;
            let finite = b.scalar("_equal_scalar", zero, 0.0)?;
            let m = b.op("min", &[], &[finite])?;
            Ok(vec![b.op("Cast", &[("dtype", "float32".into())], &[m])?])
        }),
    ))
}

const MULTI_ALL_FINITE_PARAMS: &[Param] = &[
    Param::new("num_arrays", "int", "1", "Number of arrays."),
    Param::new("init_output", "boolean", "True", "Initialize output to 1."),
];

fn multi_all_finite(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("multi_all_finite", attrs, MULTI_ALL_FINITE_PARAMS)?;
    let n: usize = p.get("num_arrays")?;
    Ok(Defined::op(
        "multi_all_finite",
        Box::new(move |s: &[Shape]| {
            crate::op::check_inputs("multi_all_finite", s, n)?;
            Ok(vec![Shape::from_slice(&[1])])
        }),
        fixed_type(DType::F32),
        Box::new(move |b, _, _| {
            let mut flags = Vec::with_capacity(n);
            for i in 0..n {
                let zero = b.binary("elemwise_sub", Src::Input(i), Src::Input(i))?;
                let finite = b.scalar("_equal_scalar", zero, 0.0)?;
                let m = b.op("min", &[], &[finite])?;
                flags.push(b.op("Cast", &[("dtype", "float32".into())], &[m])?);
            }
            let all = match flags.len() {
                1 => flags[0],
                k => {
                    let joined = b.op(
                        "Concat",
                        &[("dim", "0".into()), ("num_args", k.to_string())],
                        &flags,
                    )?;
                    b.op(
                        "min",
                        &[("axis", "(0,)".into()), ("keepdims", "true".into())],
                        &[joined],
                    )?
                }
            };
            Ok(vec![all])
        }),
    ))
}

// ---------------------------------------------------------------- index_array, arange_like

const INDEX_ARRAY_PARAMS: &[Param] = &[Param::new(
    "axes",
    "Shape or None",
    "None",
    "The axes to include in the index array. Supports negative values.",
)];

fn opt_axes(p: &Params, key: &str) -> Result<Option<Vec<i64>>> {
    match p.raw(key) {
        None | Some("None") => Ok(None),
        Some(_) => Ok(Some(p.get(key)?)),
    }
}

fn index_axes(axes: &Option<Vec<i64>>, ndim: usize) -> Result<Vec<usize>> {
    match axes {
        None => Ok((0..ndim).collect()),
        Some(v) => v
            .iter()
            .map(|&a| axis_of("_contrib_index_array", a, ndim))
            .collect(),
    }
}

fn index_array(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("_contrib_index_array", attrs, INDEX_ARRAY_PARAMS)?;
    let axes = opt_axes(&p, "axes")?;
    let for_shape = axes.clone();
    Ok(Defined::op(
        "_contrib_index_array",
        Box::new(move |s: &[Shape]| {
            crate::op::check_inputs("_contrib_index_array", s, 1)?;
            let n = index_axes(&for_shape, s[0].len())?.len();
            let mut out = s[0].clone();
            out.push(n);
            Ok(vec![out])
        }),
        fixed_type(DType::I64),
        Box::new(move |b, s, _| {
            let d = &s[0];
            let chosen = index_axes(&axes, d.len())?;
            if chosen.is_empty() {
                let mut out = dims(d);
                out.push(0);
                let z = b.op(
                    "_zeros",
                    &[("shape", tuple_attr(&out)), ("dtype", "int64".into())],
                    &[],
                )?;
                return Ok(vec![z]);
            }
            let mut cols = Vec::new();
            for a in chosen {
                let r = arange(b, d[a], DType::I64)?;
                let mut shape = vec![1; d.len()];
                shape[a] = d[a];
                let r = b.reshape(r, &shape)?;
                let full = b.op("broadcast_to", &[("shape", tuple_attr(&dims(d)))], &[r])?;
                cols.push(full);
            }
            let idx = b.op(
                "stack",
                &[
                    ("axis", d.len().to_string()),
                    ("num_args", cols.len().to_string()),
                ],
                &cols,
            )?;
            Ok(vec![idx])
        }),
    ))
}

const ARANGE_LIKE_PARAMS: &[Param] = &[
    Param::new("start", "double", "0", "Start of interval. The interval includes this value. The default start value is 0."),
    Param::new("step", "double", "1", "Spacing between values."),
    Param::new("repeat", "int", "1", "The repeating time of all elements. E.g repeat=3, the element a will be repeated three times --> a, a, a."),
    Param::new("ctx", "string", "''", "Context of output, in format [cpu|gpu|cpu_pinned](n).Only used for imperative calls."),
    Param::new("axis", "int or None", "None", "Arange elements according to the size of a certain axis of input array. The negative numbers are interpreted counting from the backward. If not provided, will arange elements according to the input shape."),
];

fn arange_like(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("_contrib_arange_like", attrs, ARANGE_LIKE_PARAMS)?;
    let (start, step): (f64, f64) = (p.get("start")?, p.get("step")?);
    let repeat: usize = p.get("repeat")?;
    let axis: Option<i64> = match p.raw("axis") {
        None | Some("None") => None,
        Some(_) => Some(p.get("axis")?),
    };
    let out_shape = move |d: &Shape| -> Result<Shape> {
        Ok(match axis {
            None => d.clone(),
            Some(a) => Shape::from_slice(&[d[axis_of("_contrib_arange_like", a, d.len())?]]),
        })
    };
    Ok(Defined::op(
        "_contrib_arange_like",
        Box::new(move |s: &[Shape]| {
            crate::op::check_inputs("_contrib_arange_like", s, 1)?;
            Ok(vec![out_shape(&s[0])?])
        }),
        Box::new(|t: &[DType]| Ok(vec![t[0]])),
        Box::new(move |b, s, t| {
            let shape = out_shape(&s[0])?;
            let n: usize = shape.iter().product();
            let r = b.op(
                "_arange",
                &[
                    ("start", format!("{start:e}")),
                    ("step", format!("{step:e}")),
                    ("repeat", repeat.max(1).to_string()),
                    (
                        "stop",
                        format!("{:e}", start + step * (n / repeat.max(1)) as f64),
                    ),
                    ("dtype", t[0].name().into()),
                ],
                &[],
            )?;
            let r = b.op(
                "slice_axis",
                &[
                    ("axis", "0".into()),
                    ("begin", "0".into()),
                    ("end", n.to_string()),
                ],
                &[r],
            )?;
            Ok(vec![b.reshape(r, &shape)?])
        }),
    ))
}

// ---------------------------------------------------------------- index_copy, batch_take

fn index_copy(attrs: &Attrs) -> Result<OpRef> {
    Params::declared("_contrib_index_copy", attrs, &[])?;
    Ok(Defined::op(
        "_contrib_index_copy",
        Box::new(|s: &[Shape]| {
            crate::op::check_inputs("_contrib_index_copy", s, 3)?;
            let (old, idx, new) = (&s[0], &s[1], &s[2]);
            let fits = idx.len() == 1
                && !old.is_empty()
                && new.len() == old.len()
                && new[0] == idx[0]
                && new[1..] == old[1..];
            if !fits {
                return Err(Error::Value(format!(
                    "_contrib_index_copy: new_tensor {} must hold one row of old_tensor {} per index of {}",
                    fmt_shape(new),
                    fmt_shape(old),
                    fmt_shape(idx)
                )));
            }
            Ok(vec![old.clone()])
        }),
        Box::new(|t: &[DType]| Ok(vec![t[0]])),
        Box::new(|b, s, _| {
            let old = &s[0];
            let k = s[1][0];
            let rows = b.reshape(Src::Input(1), &[1, k])?;
            let placed = b.op(
                "scatter_nd",
                &[("shape", tuple_attr(&dims(old)))],
                &[Src::Input(2), rows],
            )?;
            // Which rows the copy writes: scatter ones the same way.
            let ones = b.op("ones_like", &[], &[Src::Input(1)])?;
            let hit = b.op(
                "scatter_nd",
                &[("shape", tuple_attr(&[old[0] as i64]))],
                &[ones, rows],
            )?;
            let hit = b.op("Cast", &[("dtype", "float32".into())], &[hit])?;
            Ok(vec![b.op("where", &[], &[hit, placed, Src::Input(0)])?])
        }),
    ))
}

fn batch_take(attrs: &Attrs) -> Result<OpRef> {
    Params::declared("batch_take", attrs, &[])?;
    Ok(Defined::op(
        "batch_take",
        Box::new(|s: &[Shape]| {
            crate::op::check_inputs("batch_take", s, 2)?;
            if s[0].len() != 2 || s[1].as_slice() != [s[0][0]] {
                return Err(Error::Value(format!(
                    "batch_take: a must be 2-D and indices 1-D with one index per row, got {} and {}",
                    fmt_shape(&s[0]),
                    fmt_shape(&s[1])
                )));
            }
            Ok(vec![s[1].clone()])
        }),
        Box::new(|t: &[DType]| Ok(vec![t[0]])),
        Box::new(|b, _, _| {
            Ok(vec![b.op(
                "pick",
                &[("axis", "1".into()), ("mode", "clip".into())],
                &[Src::Input(0), Src::Input(1)],
            )?])
        }),
    ))
}

// ---------------------------------------------------------------- diag

const DIAG_PARAMS: &[Param] = &[
    Param::new("k", "int", "0", "Diagonal in question. The default is 0. Use k>0 for diagonals above the main diagonal, and k<0 for diagonals below the main diagonal. If input has shape (S0 S1) k must be between -S0 and S1"),
    Param::new("axis1", "int", "0", "The first axis of the sub-arrays of interest. Ignored when the input is a 1-D array."),
    Param::new("axis2", "int", "1", "The second axis of the sub-arrays of interest. Ignored when the input is a 1-D array."),
];

/// `diag`'s layout for data of shape `d`: the two axes, the diagonal's length and first
/// (row, column).
fn diag_layout(d: &Shape, k: i64, a1: i64, a2: i64) -> Result<(usize, usize, usize, usize, usize)> {
    let (x, y) = (axis_of("diag", a1, d.len())?, axis_of("diag", a2, d.len())?);
    if x == y {
        return Err(Error::Value(format!(
            "diag: axis1 and axis2 must differ, got {a1} and {a2}"
        )));
    }
    let (r0, c0) = if k >= 0 {
        (0, k as usize)
    } else {
        ((-k) as usize, 0)
    };
    if r0 > d[x] || c0 > d[y] {
        return Err(Error::Value(format!(
            "diag: k={k} is out of range for axes of sizes {} and {}",
            d[x], d[y]
        )));
    }
    let len = d[x].saturating_sub(r0).min(d[y].saturating_sub(c0));
    Ok((x, y, len, r0, c0))
}

fn diag(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("diag", attrs, DIAG_PARAMS)?;
    let (k, a1, a2): (i64, i64, i64) = (p.get("k")?, p.get("axis1")?, p.get("axis2")?);
    let shape = move |d: &Shape| -> Result<Shape> {
        match d.len() {
            0 => Err(Error::Value(
                "diag: data must have at least 1 dimension".into(),
            )),
            1 => {
                let n = d[0] + k.unsigned_abs() as usize;
                Ok(Shape::from_slice(&[n, n]))
            }
            _ => {
                let (x, y, len, _, _) = diag_layout(d, k, a1, a2)?;
                let mut s: Vec<usize> = (0..d.len())
                    .filter(|&i| i != x && i != y)
                    .map(|i| d[i])
                    .collect();
                s.push(len);
                Ok(Shape::from_slice(&s))
            }
        }
    };
    Ok(Defined::op(
        "diag",
        Box::new(move |s: &[Shape]| {
            crate::op::check_inputs("diag", s, 1)?;
            Ok(vec![shape(&s[0])?])
        }),
        same_type("diag"),
        Box::new(move |b, s, t| {
            let d = &s[0];
            let out = shape(d)?;
            let (len, r0, c0, x, y) = if d.len() == 1 {
                let (r0, c0) = if k >= 0 {
                    (0, k as usize)
                } else {
                    ((-k) as usize, 0)
                };
                (d[0], r0, c0, 0, 1)
            } else {
                let (x, y, len, r0, c0) = diag_layout(d, k, a1, a2)?;
                (len, r0, c0, x, y)
            };
            let i = arange(b, len, DType::I64)?;
            let rows = b.scalar("_plus_scalar", i, r0 as f64)?;
            let cols = b.scalar("_plus_scalar", i, c0 as f64)?;
            let idx = b.op(
                "stack",
                &[("axis", "0".into()), ("num_args", "2".into())],
                &[rows, cols],
            )?;
            if d.len() == 1 {
                let m = b.op(
                    "scatter_nd",
                    &[("shape", tuple_attr(&dims(&out)))],
                    &[Src::Input(0), idx],
                )?;
                let _ = t;
                return Ok(vec![m]);
            }
            // The two axes first, the others after, then the diagonal to the end.
            let mut perm = vec![x as i64, y as i64];
            perm.extend((0..d.len() as i64).filter(|&i| i != x as i64 && i != y as i64));
            let front = b.op(
                "transpose",
                &[("axes", tuple_attr(&perm))],
                &[Src::Input(0)],
            )?;
            let g = b.op("gather_nd", &[], &[front, idx])?;
            let n = out.len() as i64;
            let mut back: Vec<i64> = (1..n).collect();
            back.push(0);
            Ok(vec![b.op(
                "transpose",
                &[("axes", tuple_attr(&back))],
                &[g],
            )?])
        }),
    ))
}

// ---------------------------------------------------------------- _split_v2

const SPLIT_V2_PARAMS: &[Param] = &[
    Param::required("indices", "Shape(tuple)", "Indices of splits. The elements should denote the boundaries of at which split is performed along the `axis`."),
    Param::new("axis", "int", "1", "Axis along which to split."),
    Param::new("squeeze_axis", "boolean", "False", "If true, Removes the axis with length 1 from the shapes of the output arrays."),
    Param::new("sections", "int", "0", "Number of sections if equally splitted. Default to 0 which means split by indices."),
];

/// The (begin, end) of each part of an axis of length `n`.
fn split_bounds(indices: &[i64], sections: usize, n: usize) -> Result<Vec<(usize, usize)>> {
    if sections > 0 {
        if !n.is_multiple_of(sections) {
            return Err(Error::Value(format!(
                "_split_v2: an axis of length {n} does not split into {sections} equal sections"
            )));
        }
        let w = n / sections;
        return Ok((0..sections).map(|i| (i * w, (i + 1) * w)).collect());
    }
    let mut starts: Vec<usize> = indices
        .iter()
        .map(|&i| i.clamp(0, n as i64) as usize)
        .collect();
    if starts.first() != Some(&0) {
        starts.insert(0, 0);
    }
    let mut out = Vec::new();
    for (i, &s) in starts.iter().enumerate() {
        let e = starts.get(i + 1).copied().unwrap_or(n);
        if e < s {
            return Err(Error::Value(format!(
                "_split_v2: indices {indices:?} must be increasing"
            )));
        }
        out.push((s, e));
    }
    Ok(out)
}

fn split_v2(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("_split_v2", attrs, SPLIT_V2_PARAMS)?;
    let indices: Vec<i64> = p.get("indices")?;
    let axis: i64 = p.get("axis")?;
    let squeeze: bool = p.get("squeeze_axis")?;
    let sections: usize = p.get("sections")?;
    let parts = if sections > 0 {
        sections
    } else if indices.first() == Some(&0) {
        indices.len()
    } else {
        indices.len() + 1
    };
    let (ix, ix2) = (indices.clone(), indices);
    let layout = move |d: &Shape, ix: &[i64]| -> Result<(usize, Vec<Shape>)> {
        let a = axis_of("_split_v2", axis, d.len())?;
        let shapes = split_bounds(ix, sections, d[a])?
            .into_iter()
            .map(|(s, e)| {
                let mut o = d.clone();
                if squeeze && e - s == 1 {
                    o.remove(a);
                } else {
                    o[a] = e - s;
                }
                o
            })
            .collect();
        Ok((a, shapes))
    };
    let layout2 = layout;
    Ok(std::sync::Arc::new(Defined {
        name: "_split_v2",
        num_outputs: parts,
        shape: Box::new(move |s: &[Shape]| {
            check_count("_split_v2", s.len(), 1)?;
            Ok(layout(&s[0], &ix)?.1)
        }),
        dtype: Box::new(move |t: &[DType]| Ok(vec![t[0]; parts])),
        build: Box::new(move |b, s, _| {
            let (a, shapes) = layout2(&s[0], &ix2)?;
            let bounds = split_bounds(&ix2, sections, s[0][a])?;
            let mut outs = Vec::new();
            for ((lo, hi), shape) in bounds.into_iter().zip(shapes) {
                let part = b.op(
                    "slice_axis",
                    &[
                        ("axis", a.to_string()),
                        ("begin", lo.to_string()),
                        ("end", hi.to_string()),
                    ],
                    &[Src::Input(0)],
                )?;
                outs.push(b.reshape(part, &shape)?);
            }
            Ok(outs)
        }),
    }))
}

// ---------------------------------------------------------------- losses

const SMOOTH_L1_PARAMS: &[Param] = &[
    Param::new("scalar", "double", "1", "Scalar input value"),
    Param::new(
        "is_int",
        "boolean",
        "True",
        "Indicate whether scalar input is int type",
    ),
];

fn smooth_l1(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("smooth_l1", attrs, SMOOTH_L1_PARAMS)?;
    let sigma: f64 = p.get("scalar")?;
    let s2 = sigma * sigma;
    Ok(Defined::op(
        "smooth_l1",
        shape_of_first("smooth_l1", 1),
        same_type("smooth_l1"),
        Box::new(move |b, _, _| {
            // (sigma x)^2 / 2 where |x| < 1 / sigma^2, else |x| - 0.5 / sigma^2.
            let a = b.unary("abs", Src::Input(0))?;
            let inside = b.scalar("_lesser_scalar", a, 1.0 / s2)?;
            let sq = b.unary("square", Src::Input(0))?;
            let quad = b.scalar("_mul_scalar", sq, 0.5 * s2)?;
            let lin = b.scalar("_minus_scalar", a, 0.5 / s2)?;
            Ok(vec![b.op("where", &[], &[inside, quad, lin])?])
        }),
    ))
}

fn softmax_cross_entropy(attrs: &Attrs) -> Result<OpRef> {
    Params::declared("softmax_cross_entropy", attrs, &[])?;
    Ok(Defined::op(
        "softmax_cross_entropy",
        Box::new(|s: &[Shape]| {
            crate::op::check_inputs("softmax_cross_entropy", s, 2)?;
            if s[0].len() != 2 || s[1].as_slice() != [s[0][0]] {
                return Err(Error::Value(format!(
                    "softmax_cross_entropy: data must be (batch, classes) and label (batch,), got {} and {}",
                    fmt_shape(&s[0]),
                    fmt_shape(&s[1])
                )));
            }
            Ok(vec![Shape::from_slice(&[1])])
        }),
        Box::new(|t: &[DType]| Ok(vec![t[0]])),
        Box::new(|b, _, _| {
            let logp = b.op("log_softmax", &[("axis", "-1".into())], &[Src::Input(0)])?;
            let picked = b.op("pick", &[("axis", "1".into())], &[logp, Src::Input(1)])?;
            let total = b.op("sum", &[], &[picked])?;
            Ok(vec![b.unary("negative", total)?])
        }),
    ))
}

// ---------------------------------------------------------------- casts and shape ties

const AMP_CAST_PARAMS: &[Param] = &[Param::required(
    "dtype",
    "{'bfloat16', 'float16', 'float32', 'float64', 'int32', 'int64', 'int8', 'uint8'}",
    "Output data type.",
)];

fn amp_cast(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("amp_cast", attrs, AMP_CAST_PARAMS)?;
    let dtype: DType = p.get("dtype")?;
    Ok(Defined::op(
        "amp_cast",
        shape_of_first("amp_cast", 1),
        fixed_type(dtype),
        Box::new(move |b, _, _| {
            Ok(vec![b.op(
                "Cast",
                &[("dtype", dtype.name().into())],
                &[Src::Input(0)],
            )?])
        }),
    ))
}

/// `_identity_with_attr_like_rhs`: its first input, whose shape it ties to the second's
/// (a shape constraint for backward inference).
struct IdentityLikeRhs;

impl Operator for IdentityLikeRhs {
    fn name(&self) -> &'static str {
        "_identity_with_attr_like_rhs"
    }

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        check_count(self.name(), inputs.len(), 2)?;
        crate::op::infer::same_shape(self.name(), inputs, outputs)
    }

    infer_from_partial!(shape);

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![inputs[0]])
    }

    fn as_composite(&self) -> Option<&dyn Composite> {
        Some(self)
    }
}

impl Composite for IdentityLikeRhs {
    fn decompose(&self, _shapes: &[Shape], _types: &[DType]) -> Result<Decomposition> {
        Builder::new().finish(vec![Src::Input(0)])
    }
}

// ---------------------------------------------------------------- ravel / unravel

const RAVEL_PARAMS: &[Param] = &[Param::required(
    "shape",
    "Shape(tuple)",
    "Shape of the array into which the multi-indices apply.",
)];

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

fn ravel(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("_ravel_multi_index", attrs, RAVEL_PARAMS)?;
    let shape: Vec<usize> = p
        .get::<Vec<i64>>("shape")?
        .iter()
        .map(|&d| d.max(0) as usize)
        .collect();
    let n = shape.len();
    Ok(Defined::op(
        "_ravel_multi_index",
        Box::new(move |s: &[Shape]| {
            crate::op::check_inputs("_ravel_multi_index", s, 1)?;
            if s[0].is_empty() || s[0][0] != n {
                return Err(Error::Value(format!(
                    "_ravel_multi_index: data must have {n} rows (one per dimension of shape), got shape {}",
                    fmt_shape(&s[0])
                )));
            }
            Ok(vec![Shape::from_slice(&s[0][1..])])
        }),
        Box::new(|t: &[DType]| Ok(vec![t[0]])),
        Box::new(move |b, s, _| {
            let rows = b.op_n(
                "SliceChannel",
                &[
                    ("num_outputs", n.to_string()),
                    ("axis", "0".into()),
                    ("squeeze_axis", "1".into()),
                ],
                &[Src::Input(0)],
            )?;
            let rows = if n == 1 {
                vec![b.reshape(rows[0], &s[0][1..])?]
            } else {
                rows
            };
            let mut terms = Vec::new();
            for (r, st) in rows.into_iter().zip(strides(&shape)) {
                terms.push(b.scalar("_mul_scalar", r, st as f64)?);
            }
            if terms.len() == 1 {
                return Ok(terms);
            }
            Ok(vec![b.op(
                "add_n",
                &[("num_args", terms.len().to_string())],
                &terms,
            )?])
        }),
    ))
}

fn unravel(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("_unravel_index", attrs, RAVEL_PARAMS)?;
    let shape: Vec<usize> = p
        .get::<Vec<i64>>("shape")?
        .iter()
        .map(|&d| d.max(0) as usize)
        .collect();
    let n = shape.len();
    Ok(Defined::op(
        "_unravel_index",
        Box::new(move |s: &[Shape]| {
            crate::op::check_inputs("_unravel_index", s, 1)?;
            let mut o = vec![n];
            o.extend_from_slice(&s[0]);
            Ok(vec![Shape::from_slice(&o)])
        }),
        Box::new(|t: &[DType]| Ok(vec![t[0]])),
        Box::new(move |b, _, _| {
            let mut rows = Vec::new();
            for (i, (&st, &dim)) in strides(&shape).iter().zip(&shape).enumerate() {
                let q = b.scalar("_div_scalar", Src::Input(0), st as f64)?;
                let q = b.unary("floor", q)?;
                // A leading -1 leaves the first dimension unbounded.
                rows.push(if i == 0 && dim == 0 {
                    q
                } else {
                    b.scalar("_mod_scalar", q, dim as f64)?
                });
            }
            Ok(vec![b.op(
                "stack",
                &[("axis", "0".into()), ("num_args", n.to_string())],
                &rows,
            )?])
        }),
    ))
}

fn def(
    name: &'static str,
    aliases: &'static [&'static str],
    inputs: &'static [&'static str],
    params: &'static [Param],
    doc: &'static str,
    create: fn(&Attrs) -> Result<OpRef>,
) -> OpDef {
    OpDef {
        name,
        aliases,
        inputs,
        variadic: false,
        params,
        doc,
        create: Box::new(create),
    }
}

/// Registers the composite operators of this module.
pub fn register(r: &mut Registry) {
    r.add(def(
        "_contrib_div_sqrt_dim",
        &[],
        &["data"],
        &[],
        "The data divided by the square root of its last dimension.",
        div_sqrt_dim,
    ));
    r.add(def(
        "_contrib_quadratic",
        &[],
        &["data"],
        QUADRATIC_PARAMS,
        "a * x^2 + b * x + c, element-wise.",
        quadratic,
    ));
    r.add(def(
        "_contrib_allclose",
        &[],
        &["a", "b"],
        ALLCLOSE_PARAMS,
        "1 if every element of a is close to b's, else 0.",
        allclose,
    ));
    r.add(def(
        "all_finite",
        &[],
        &["data"],
        ALL_FINITE_PARAMS,
        "1 if every element is finite, else 0.",
        all_finite,
    ));
    r.add(OpDef {
        name: "multi_all_finite",
        aliases: &[],
        inputs: &["data"],
        variadic: true,
        params: MULTI_ALL_FINITE_PARAMS,
        doc: "1 if every element of every input is finite, else 0.",
        create: Box::new(multi_all_finite),
    });
    r.add(def(
        "_contrib_index_array",
        &[],
        &["data"],
        INDEX_ARRAY_PARAMS,
        "The index of every element along the given axes.",
        index_array,
    ));
    r.add(def(
        "_contrib_arange_like",
        &[],
        &["data"],
        ARANGE_LIKE_PARAMS,
        "Evenly spaced values in the shape of the data (or of one of its axes).",
        arange_like,
    ));
    r.add(def(
        "_contrib_index_copy",
        &[],
        &["old_tensor", "index_vector", "new_tensor"],
        &[],
        "old_tensor with the rows at index_vector replaced by new_tensor's.",
        index_copy,
    ));
    r.add(def(
        "batch_take",
        &[],
        &["a", "indices"],
        &[],
        "One element of each row of a, at that row's index.",
        batch_take,
    ));
    r.add(def(
        "diag",
        &[],
        &["data"],
        DIAG_PARAMS,
        "The k-th diagonal of the data, or a matrix with the data on it.",
        diag,
    ));
    r.add(def(
        "_split_v2",
        &[],
        &["data"],
        SPLIT_V2_PARAMS,
        "Splits the data along an axis at the given indices or into equal sections.",
        split_v2,
    ));
    r.add(def(
        "amp_cast",
        &[],
        &["data"],
        AMP_CAST_PARAMS,
        "Cast for automatic mixed precision: the data in the given dtype.",
        amp_cast,
    ));
    r.add(def(
        "_identity_with_attr_like_rhs",
        &[],
        &["lhs", "rhs"],
        &[],
        "The first input, with the shape of the second.",
        |a| {
            Params::declared("_identity_with_attr_like_rhs", a, &[])?;
            Ok(std::sync::Arc::new(IdentityLikeRhs))
        },
    ));
    r.add(def(
        "smooth_l1",
        &[],
        &["data"],
        SMOOTH_L1_PARAMS,
        "The smooth L1 loss of each element, with sigma = scalar.",
        smooth_l1,
    ));
    r.add(def(
        "softmax_cross_entropy",
        &[],
        &["data", "label"],
        &[],
        "The cross entropy of the softmax of data with the labels, summed over the batch.",
        softmax_cross_entropy,
    ));
    r.add(def(
        "_ravel_multi_index",
        &["ravel_multi_index"],
        &["data"],
        RAVEL_PARAMS,
        "Flat indices of multi-indices (one row per dimension) into an array of the given shape.",
        ravel,
    ));
    r.add(def(
        "_unravel_index",
        &["unravel_index"],
        &["data"],
        RAVEL_PARAMS,
        "Multi-indices (one row per dimension) of flat indices into an array of the given shape.",
        unravel,
    ));
}
