//! Definitions of the operators that keep the data and change only the shape: `Reshape`
//! (with MXNet's special codes 0, -1, -2, -3, -4 and `reverse`), `Flatten`,
//! `expand_dims`, `squeeze`.

use crate::error::{Error, Result};
use crate::op::grad::view::ReshapeBackward;
use crate::op::transform::view::View;
use crate::op::transform::{axis_in, def, fmt_tuple, gather_op2, tuple_or_empty};
use crate::op::{
    assign_shape, check_inputs, Attrs, Grad, Gradient, OpRef, Operator, Param, Params, Registry,
    ShapeSlots,
};
use crate::shape::{fmt_shape, is_partial, size_of, Shape};
use smallvec::SmallVec;
use std::sync::Arc;

/// How the output shape follows from the input shape.
pub(crate) enum Rule {
    /// `Reshape`'s `shape` (with special codes) and `reverse`.
    Codes(Vec<i64>, bool),
    /// The deprecated `target_shape` (0 = inferred) and `keep_highest`.
    Target(Vec<i64>, bool),
    Flatten,
    ExpandDims(i64),
    Squeeze(Option<Vec<i64>>),
}

pub(crate) struct SameData {
    pub(crate) name: &'static str,
    pub(crate) rule: Rule,
}

pub(crate) fn cannot(op: &str, from: &[usize], to: &str) -> Error {
    Error::Value(format!(
        "{op}: cannot reshape array of shape {} into shape {to}",
        fmt_shape(from)
    ))
}

/// MXNet's reading of `Reshape`'s `shape` codes against the input shape.
pub(crate) fn infer_codes(
    op: &str,
    codes: &[i64],
    dshape: &[usize],
    reverse: bool,
) -> Result<Shape> {
    let mut d: Vec<usize> = dshape.to_vec();
    let mut p: Vec<i64> = codes.to_vec();
    if reverse {
        d.reverse();
        p.reverse();
    }
    let bad = |msg: String| {
        Error::Value(format!(
            "{op}: {msg} (shape={}, input shape {})",
            fmt_tuple(codes),
            fmt_shape(dshape)
        ))
    };
    let mut out: Vec<usize> = Vec::with_capacity(p.len());
    let mut src = 0usize;
    let mut inferred: Option<usize> = None;
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            0 => {
                let Some(&v) = d.get(src) else {
                    return Err(bad(format!(
                        "0 at position {i} copies input axis {src}, which does not exist"
                    )));
                };
                out.push(v);
                src += 1;
            }
            -1 => {
                if inferred.is_some() {
                    return Err(bad("only one dimension can be inferred (-1)".into()));
                }
                inferred = Some(out.len());
                out.push(1);
                src += 1;
            }
            -2 => {
                if src < d.len() {
                    out.extend_from_slice(&d[src..]);
                    src = d.len();
                }
            }
            -3 => {
                if src + 1 >= d.len() {
                    return Err(bad(format!(
                        "-3 at position {i} merges input axes {src} and {}, which do not exist",
                        src + 1
                    )));
                }
                out.push(d[src] * d[src + 1]);
                src += 2;
            }
            -4 => {
                if i + 2 >= p.len() {
                    return Err(bad(format!(
                        "-4 at position {i} must be followed by two dimensions"
                    )));
                }
                let Some(&d0) = d.get(src) else {
                    return Err(bad(format!(
                        "-4 at position {i} splits input axis {src}, which does not exist"
                    )));
                };
                src += 1;
                let (mut d1, mut d2) = (p[i + 1], p[i + 2]);
                i += 2;
                if d1 == -1 && d2 == -1 {
                    return Err(bad("the two dimensions after -4 cannot both be -1".into()));
                }
                let d0i = d0 as i64;
                if d1 == -1 && d2 > 0 {
                    d1 = d0i / d2;
                }
                if d2 == -1 && d1 > 0 {
                    d2 = d0i / d1;
                }
                if d1 < 0 || d2 < 0 || d1.checked_mul(d2) != Some(d0i) {
                    return Err(bad(format!(
                        "split dimensions {}, {} do not divide input dimension {d0}",
                        p[i - 1],
                        p[i]
                    )));
                }
                out.push(d1 as usize);
                out.push(d2 as usize);
            }
            v if v > 0 => {
                out.push(v as usize);
                src += 1;
            }
            v => {
                return Err(bad(format!(
                    "invalid value {v} in shape: dimensions must be positive or one of 0, -1, -2, -3, -4"
                )));
            }
        }
        i += 1;
    }
    let total = size_of(dshape);
    if let Some(k) = inferred {
        let known = out
            .iter()
            .try_fold(1usize, |acc, &x| acc.checked_mul(x))
            .filter(|&n| n != 0 && total.is_multiple_of(n))
            .ok_or_else(|| cannot(op, dshape, &fmt_tuple(codes)))?;
        out[k] = total / known;
    }
    if reverse {
        out.reverse();
    }
    let n = out.iter().try_fold(1usize, |acc, &x| acc.checked_mul(x));
    if n != Some(total) {
        return Err(cannot(op, dshape, &fmt_tuple(codes)));
    }
    Ok(Shape::from_vec(out))
}

/// The deprecated `target_shape` rule: one 0 is inferred; `keep_highest` keeps axis 0.
pub(crate) fn infer_target(
    op: &str,
    target: &[i64],
    keep_highest: bool,
    dshape: &[usize],
) -> Result<Shape> {
    if target.iter().any(|&v| v < 0) {
        return Err(Error::Value(format!(
            "{op}: target_shape {} cannot hold negative sizes",
            fmt_tuple(target)
        )));
    }
    let mut out: Vec<usize> = target.iter().map(|&v| v as usize).collect();
    let start = if keep_highest && !out.is_empty() {
        out[0] = dshape.first().copied().unwrap_or(1);
        1
    } else {
        0
    };
    let zeros: Vec<usize> = (start..out.len()).filter(|&i| out[i] == 0).collect();
    let total = size_of(dshape);
    if zeros.len() == 1 {
        let z = zeros[0];
        out[z] = 1;
        let known = out.iter().try_fold(1usize, |a, &x| a.checked_mul(x));
        match known {
            Some(k) if k != 0 && total.is_multiple_of(k) => out[z] = total / k,
            _ => return Err(cannot(op, dshape, &fmt_tuple(target))),
        }
    }
    if out.iter().try_fold(1usize, |a, &x| a.checked_mul(x)) != Some(total) {
        return Err(cannot(op, dshape, &fmt_tuple(target)));
    }
    Ok(Shape::from_vec(out))
}

impl Operator for SameData {
    fn name(&self) -> &'static str {
        self.name
    }

    /// As MXNet's: a fully known output gives the one unknown (0) size of the input.
    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        crate::op::infer::check_count(self.name, inputs.len(), 1)?;
        if let (Some(data), Some(out)) = (&inputs[0], &outputs[0]) {
            let unknown: SmallVec<[usize; 2]> = (0..data.len())
                .filter(|&k| data[k] == 0 && is_partial(data))
                .collect();
            let known: usize = data.iter().filter(|&&d| d != 0).product();
            if let ([k], false) = (unknown.as_slice(), is_partial(out)) {
                if known != 0 && size_of(out).is_multiple_of(known) {
                    let mut full = data.clone();
                    full[*k] = size_of(out) / known;
                    assign_shape(self.name, "data", &mut inputs[0], &full)?;
                }
            }
        }
        crate::op::infer::outputs_once_inputs_known(self, inputs, outputs)
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(self.name, inputs, 1)?;
        let s = &inputs[0];
        let op = self.name;
        let out = match &self.rule {
            Rule::Codes(codes, reverse) => {
                if codes.is_empty() && size_of(s) != 1 {
                    return Err(cannot(op, s, "()"));
                }
                infer_codes(op, codes, s, *reverse)?
            }
            Rule::Target(t, keep) => infer_target(op, t, *keep, s)?,
            Rule::Flatten => {
                if s.is_empty() {
                    return Err(Error::Value(format!(
                        "{op}: the input must have at least one dimension, got shape ()"
                    )));
                }
                Shape::from_slice(&[s[0], size_of(&s[1..])])
            }
            Rule::ExpandDims(axis) => {
                let n = s.len() as i64;
                let a = if *axis < 0 { axis + n + 1 } else { *axis };
                if a < 0 || a > n {
                    return Err(Error::Index(format!(
                        "{op}: axis {axis} is out of bounds for an array of {} dimension(s) \
                         (it must be in [{}, {n}])",
                        s.len(),
                        -n - 1
                    )));
                }
                let mut out = s.clone();
                out.insert(a as usize, 1);
                out
            }
            Rule::Squeeze(axes) => squeeze_shape(op, s, axes.as_deref())?,
        };
        Ok(vec![out])
    }

    fn inplace(&self) -> &'static [(usize, usize)] {
        &[(0, 0)]
    }

    fn gradient(&self) -> Grad {
        Gradient::simple(Arc::new(ReshapeBackward), &[0], &[], 1)
    }
}

pub(crate) fn squeeze_shape(op: &str, s: &[usize], axes: Option<&[i64]>) -> Result<Shape> {
    let out: Shape = match axes {
        None => s.iter().copied().filter(|&d| d != 1).collect(),
        Some(axes) => {
            let mut drop = vec![false; s.len()];
            for &a in axes {
                let k = axis_in(op, a, s.len())?;
                if drop[k] {
                    return Err(Error::Value(format!(
                        "{op}: duplicate value in axis {}",
                        fmt_tuple(axes)
                    )));
                }
                if s[k] != 1 {
                    return Err(Error::Value(format!(
                        "{op}: cannot select axis {a} to squeeze out: it has size {} \
                         (not one) in shape {}",
                        s[k],
                        fmt_shape(s)
                    )));
                }
                drop[k] = true;
            }
            s.iter()
                .zip(&drop)
                .filter(|(_, d)| !**d)
                .map(|(v, _)| *v)
                .collect()
        }
    };
    // MXNet 1.x keeps one axis when every axis is squeezed out.
    if out.is_empty() && !s.is_empty() {
        return Ok(Shape::from_slice(&[1]));
    }
    Ok(out)
}

pub(crate) fn op(name: &'static str, rule: Rule) -> Result<OpRef> {
    Ok(Arc::new(SameData { name, rule }))
}

pub(crate) fn create_reshape(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("Reshape", attrs, RESHAPE_PARAMS)?;
    let shape = tuple_or_empty(&p, "shape")?;
    let reverse: bool = p.get("reverse")?;
    let target = tuple_or_empty(&p, "target_shape")?;
    let keep: bool = p.get("keep_highest")?;
    if shape.is_empty() && !target.is_empty() {
        return op("Reshape", Rule::Target(target, keep));
    }
    op("Reshape", Rule::Codes(shape, reverse))
}

pub(crate) fn create_flatten(attrs: &Attrs) -> Result<OpRef> {
    Params::declared("Flatten", attrs, &[])?;
    op("Flatten", Rule::Flatten)
}

pub(crate) fn create_expand_dims(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("expand_dims", attrs, EXPAND_DIMS_PARAMS)?;
    op("expand_dims", Rule::ExpandDims(p.get("axis")?))
}

pub(crate) fn create_squeeze(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("squeeze", attrs, SQUEEZE_PARAMS)?;
    op("squeeze", Rule::Squeeze(p.get("axis")?))
}

const RESHAPE_PARAMS: &[Param] = &[
    Param::new("shape", "Shape(tuple)", "()", "The target shape"),
    Param::new(
        "reverse",
        "boolean",
        "False",
        "If true then the special values are inferred from right to left",
    ),
    Param::new(
        "target_shape",
        "Shape(tuple)",
        "()",
        "(Deprecated! Use ``shape`` instead.) Target new shape. One and only one dim can be 0, in which case it will be inferred from the rest of dims",
    ),
    Param::new(
        "keep_highest",
        "boolean",
        "False",
        "(Deprecated! Use ``shape`` instead.) Whether keep the highest dim unchanged.If set to true, then the first dim in target_shape is ignored,and always fixed as input",
    ),
];

const EXPAND_DIMS_PARAMS: &[Param] = &[Param::required(
    "axis",
    "int",
    "Position where new axis is to be inserted. Suppose that the input `NDArray`'s dimension is `ndim`, the range of the inserted axis is `[-ndim, ndim]`",
)];

const SQUEEZE_PARAMS: &[Param] = &[Param::new(
    "axis",
    "Shape or None",
    "None",
    "Selects a subset of the single-dimensional entries in the shape. If an axis is selected with shape entry greater than one, an error is raised.",
)];

/// `reshape_like`'s output shape: `lhs` with its axes `[lhs_begin, lhs_end)` replaced by
/// `rhs`'s axes `[rhs_begin, rhs_end)`; bounds may count from the end, `None` is the whole.
pub(crate) fn reshape_like_shape(
    lhs: &[usize],
    rhs: &[usize],
    lhs_range: (Option<i64>, Option<i64>),
    rhs_range: (Option<i64>, Option<i64>),
) -> Result<Shape> {
    let op = "reshape_like";
    let range = |s: &[usize], (begin, end): (Option<i64>, Option<i64>), side: &str| {
        let n = s.len() as i64;
        let at = |v: Option<i64>, default: i64| {
            let v = v.unwrap_or(default);
            if v < 0 {
                v + n
            } else {
                v
            }
        };
        let (b, e) = (at(begin, 0), at(end, n));
        if b < 0 || e > n || b > e {
            return Err(Error::Value(format!(
                "{op}: {side}_begin and {side}_end select axes [{b}, {e}) of an array of \
                 shape {}",
                fmt_shape(s)
            )));
        }
        Ok((b as usize, e as usize))
    };
    let (lb, le) = range(lhs, lhs_range, "lhs")?;
    let (rb, re) = range(rhs, rhs_range, "rhs")?;
    let mut out: Shape = lhs[..lb].iter().copied().collect();
    out.extend_from_slice(&rhs[rb..re]);
    out.extend_from_slice(&lhs[le..]);
    if size_of(&out) != size_of(lhs) {
        return Err(Error::Value(format!(
            "{op}: cannot reshape lhs of shape {} into shape {} taken from rhs of shape {}",
            fmt_shape(lhs),
            fmt_shape(&out),
            fmt_shape(rhs)
        )));
    }
    Ok(out)
}

pub(crate) fn create_reshape_like(attrs: &Attrs) -> Result<OpRef> {
    let op = "reshape_like";
    let p = Params::declared(op, attrs, RESHAPE_LIKE_PARAMS)?;
    let lhs = (p.get("lhs_begin")?, p.get("lhs_end")?);
    let rhs = (p.get("rhs_begin")?, p.get("rhs_end")?);
    gather_op2(op, move |l, r| {
        let shape = reshape_like_shape(l, r, lhs, rhs)?;
        // The data read in order under the new shape.
        let view = View::of(&shape);
        Ok((shape, view))
    })
}

const RESHAPE_LIKE_PARAMS: &[Param] = &[
    Param::new("lhs_begin", "int or None", "None", "Defaults to 0. The beginning index along which the lhs dimensions are to be reshaped. Supports negative indices."),
    Param::new("lhs_end", "int or None", "None", "Defaults to None. The ending index along which the lhs dimensions are to be used for reshaping. Supports negative indices."),
    Param::new("rhs_begin", "int or None", "None", "Defaults to 0. The beginning index along which the rhs dimensions are to be used for reshaping. Supports negative indices."),
    Param::new("rhs_end", "int or None", "None", "Defaults to None. The ending index along which the rhs dimensions are to be used for reshaping. Supports negative indices."),
];

pub(super) fn register(r: &mut Registry) {
    r.add(def(
        "reshape_like",
        &[],
        &["lhs", "rhs"],
        RESHAPE_LIKE_PARAMS,
        "Reshapes lhs to (part of) the shape of rhs.",
        create_reshape_like,
    ));
    r.add(def(
        "Reshape",
        &["reshape"],
        &["data"],
        RESHAPE_PARAMS,
        "Reshapes an array; shape codes 0 (copy), -1 (infer), -2 (copy the rest), -3 (merge two), -4 (split one).",
        create_reshape,
    ));
    r.add(def(
        "Flatten",
        &["flatten"],
        &["data"],
        &[],
        "Collapses all axes but the first.",
        create_flatten,
    ));
    r.add(def(
        "expand_dims",
        &[],
        &["data"],
        EXPAND_DIMS_PARAMS,
        "Inserts an axis of length 1.",
        create_expand_dims,
    ));
    r.add(def(
        "squeeze",
        &[],
        &["data"],
        SQUEEZE_PARAMS,
        "Removes axes of length 1.",
        create_squeeze,
    ));
}
