//! Definitions of the operators that repeat data: `broadcast_to`, `broadcast_like`,
//! `broadcast_axis`, `tile` and `repeat`; each is a view of the input with zero strides.

use crate::error::{Error, Result};
use crate::op::transform::view::View;
use crate::op::transform::{
    axis_in, def, dims, fmt_tuple, gather_op, gather_op2, plain, tuple_or_empty,
};
use crate::op::{Attrs, OpRef, Param, Params, Registry};
use crate::shape::{fmt_shape, Shape};

pub(crate) fn too_large(op: &str, s: &[usize]) -> Error {
    Error::Value(format!(
        "{op}: the result for an input of shape {} is too large",
        fmt_shape(s)
    ))
}

/// `s` broadcast to `target` (same number of axes; each axis equal or 1 in `s`).
pub(crate) fn broadcast_view(op: &str, s: &[usize], target: &[usize]) -> Result<View> {
    let cannot = || {
        Error::Value(format!(
            "{op}: cannot broadcast an array of shape {} to shape {}",
            fmt_shape(s),
            fmt_shape(target)
        ))
    };
    if s.len() != target.len() {
        return Err(cannot());
    }
    let mut v = View::of(s);
    for k in 0..s.len() {
        if s[k] != target[k] {
            if s[k] != 1 {
                return Err(cannot());
            }
            v.strides[k] = 0;
            v.shape[k] = target[k];
        }
    }
    Ok(v)
}

pub(crate) fn create_broadcast_to(attrs: &Attrs) -> Result<OpRef> {
    let op = "broadcast_to";
    let p = Params::declared(op, attrs, BROADCAST_TO_PARAMS)?;
    let shape = dims(op, "shape", &tuple_or_empty(&p, "shape")?)?;
    gather_op(op, move |s| {
        // 0 keeps the input's size on that axis.
        let target: Vec<usize> = shape
            .iter()
            .enumerate()
            .map(|(k, &d)| {
                if d == 0 {
                    s.get(k).copied().unwrap_or(0)
                } else {
                    d
                }
            })
            .collect();
        broadcast_view(op, s, &target).map(plain)
    })
}

pub(crate) fn broadcast_like_view(
    lhs: &[usize],
    rhs: &[usize],
    axes: Option<&(Vec<i64>, Vec<i64>)>,
) -> Result<View> {
    let op = "broadcast_like";
    let Some((la, ra)) = axes else {
        return broadcast_view(op, lhs, rhs);
    };
    if la.len() != ra.len() {
        return Err(Error::Value(format!(
            "{op}: lhs_axes {} and rhs_axes {} must have the same length",
            fmt_tuple(la),
            fmt_tuple(ra)
        )));
    }
    let mut target: Vec<usize> = lhs.to_vec();
    for (&a, &b) in la.iter().zip(ra) {
        let i = axis_in(op, a, lhs.len())?;
        let j = axis_in(op, b, rhs.len())?;
        if lhs[i] != 1 {
            return Err(Error::Value(format!(
                "{op}: axis {a} of lhs (shape {}) has size {}, not 1, and cannot be \
                 broadcast to {}",
                fmt_shape(lhs),
                lhs[i],
                rhs[j]
            )));
        }
        target[i] = rhs[j];
    }
    broadcast_view(op, lhs, &target)
}

pub(crate) fn create_broadcast_like(attrs: &Attrs) -> Result<OpRef> {
    let op = "broadcast_like";
    let p = Params::declared(op, attrs, BROADCAST_LIKE_PARAMS)?;
    // Axes are used only when both are given, as in MXNet.
    let axes = match (
        p.get::<Option<Vec<i64>>>("lhs_axes")?,
        p.get::<Option<Vec<i64>>>("rhs_axes")?,
    ) {
        (Some(l), Some(r)) if l.is_empty() || r.is_empty() => {
            return Err(Error::Value(format!(
                "{op}: lhs_axes and rhs_axes must not be empty"
            )))
        }
        (Some(l), Some(r)) => Some((l, r)),
        _ => None,
    };
    gather_op2(op, move |l, r| {
        broadcast_like_view(l, r, axes.as_ref()).map(plain)
    })
}

pub(crate) fn broadcast_axis_view(s: &[usize], axes: &[i64], sizes: &[usize]) -> Result<View> {
    let op = "broadcast_axis";
    if axes.len() != sizes.len() {
        return Err(Error::Value(format!(
            "{op}: axis {} and size {} must have the same length",
            fmt_tuple(axes),
            fmt_tuple(&sizes.iter().map(|&v| v as i64).collect::<Vec<_>>())
        )));
    }
    let mut target = s.to_vec();
    for (&a, &n) in axes.iter().zip(sizes) {
        let k = axis_in(op, a, s.len())?;
        if target[k] != 1 {
            return Err(Error::Value(format!(
                "{op}: axis {a} of shape {} must have size 1 to be broadcast",
                fmt_shape(&target)
            )));
        }
        target[k] = n;
    }
    broadcast_view(op, s, &target)
}

pub(crate) fn create_broadcast_axis(attrs: &Attrs) -> Result<OpRef> {
    let op = "broadcast_axis";
    let p = Params::declared(op, attrs, BROADCAST_AXIS_PARAMS)?;
    let axes = tuple_or_empty(&p, "axis")?;
    let sizes = dims(op, "size", &tuple_or_empty(&p, "size")?)?;
    gather_op(op, move |s| {
        broadcast_axis_view(s, &axes, &sizes).map(plain)
    })
}

/// `s` tiled `reps` times; each output axis is seen as (repetition, input axis).
pub(crate) fn tile_view(s: &[usize], reps: &[usize]) -> Result<(Shape, View)> {
    let n = s.len().max(reps.len());
    let pad = |v: &[usize]| -> Vec<usize> {
        let mut p = vec![1; n - v.len()];
        p.extend_from_slice(v);
        p
    };
    let (sp, rp) = (pad(s), pad(reps));
    let base = View::of(&sp);
    let mut view = View {
        shape: Vec::with_capacity(2 * n),
        strides: Vec::with_capacity(2 * n),
        offset: 0,
    };
    let mut out = Shape::with_capacity(n);
    for k in 0..n {
        view.shape.extend([rp[k], sp[k]]);
        view.strides.extend([0, base.strides[k]]);
        out.push(
            sp[k]
                .checked_mul(rp[k])
                .ok_or_else(|| too_large("tile", s))?,
        );
    }
    Ok((out, view))
}

pub(crate) fn create_tile(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("tile", attrs, TILE_PARAMS)?;
    let reps = dims("tile", "reps", &p.get::<Vec<i64>>("reps")?)?;
    gather_op("tile", move |s| tile_view(s, &reps))
}

/// Each element of `s` repeated `r` times along `axis` (of the flattened input if None).
pub(crate) fn repeat_view(s: &[usize], r: usize, axis: Option<i64>) -> Result<(Shape, View)> {
    let op = "repeat";
    if r == 0 {
        // MXNet 1.x gives a 1-d empty array whatever the axis.
        if let Some(a) = axis {
            axis_in(op, a, s.len())?;
        }
        return Ok((Shape::from_slice(&[0]), View::of(&[0])));
    }
    let Some(axis) = axis else {
        let n: usize = s.iter().product();
        let total = n.checked_mul(r).ok_or_else(|| too_large(op, s))?;
        let view = View {
            shape: vec![n, r],
            strides: vec![1, 0],
            offset: 0,
        };
        return Ok((Shape::from_slice(&[total]), view));
    };
    let a = axis_in(op, axis, s.len())?;
    let mut view = View::of(s);
    view.shape.insert(a + 1, r);
    view.strides.insert(a + 1, 0);
    let mut out = Shape::from_slice(s);
    out[a] = s[a].checked_mul(r).ok_or_else(|| too_large(op, s))?;
    Ok((out, view))
}

pub(crate) fn create_repeat(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("repeat", attrs, REPEAT_PARAMS)?;
    let r: i64 = p.get("repeats")?;
    let r = usize::try_from(r)
        .map_err(|_| Error::Value(format!("repeat: repeats cannot be negative, got {r}")))?;
    let axis: Option<i64> = p.get("axis")?;
    gather_op("repeat", move |s| repeat_view(s, r, axis))
}

const BROADCAST_TO_PARAMS: &[Param] = &[Param::new(
    "shape",
    "Shape(tuple)",
    "()",
    "The shape of the desired array. We can set the dim to zero if it's same as the original. E.g `A = broadcast_to(B, shape=(10, 0, 0))` has the same meaning as `A = broadcast_axis(B, axis=0, size=10)`.",
)];

const BROADCAST_LIKE_PARAMS: &[Param] = &[
    Param::new(
        "lhs_axes",
        "Shape or None",
        "None",
        "Axes to perform broadcast on in the first input array",
    ),
    Param::new(
        "rhs_axes",
        "Shape or None",
        "None",
        "Axes to copy from the second input array",
    ),
];

const BROADCAST_AXIS_PARAMS: &[Param] = &[
    Param::new(
        "axis",
        "Shape(tuple)",
        "()",
        "The axes to perform the broadcasting.",
    ),
    Param::new(
        "size",
        "Shape(tuple)",
        "()",
        "Target sizes of the broadcasting axes.",
    ),
];

const TILE_PARAMS: &[Param] = &[Param::required(
    "reps",
    "Shape(tuple)",
    "The number of times for repeating the tensor a. Each dim size of reps must be a positive integer. If reps has length d, the result will have dimension of max(d, a.ndim); If a.ndim < d, a is promoted to be d-dimensional by prepending new axes. If a.ndim > d, reps is promoted to a.ndim by pre-pending 1's to it.",
)];

const REPEAT_PARAMS: &[Param] = &[
    Param::required(
        "repeats",
        "int",
        "The number of repetitions for each element.",
    ),
    Param::new(
        "axis",
        "int or None",
        "None",
        "The axis along which to repeat values. The negative numbers are interpreted counting from the backward. By default, use the flattened input array, and return a flat output array.",
    ),
];

pub(super) fn register(r: &mut Registry) {
    r.add(def(
        "broadcast_to",
        &[],
        &["data"],
        BROADCAST_TO_PARAMS,
        "Broadcasts axes of size 1 to a shape (0 keeps an axis).",
        create_broadcast_to,
    ));
    r.add(def(
        "broadcast_like",
        &[],
        &["lhs", "rhs"],
        BROADCAST_LIKE_PARAMS,
        "Broadcasts lhs to the shape of rhs (on the given axes).",
        create_broadcast_like,
    ));
    r.add(def(
        "broadcast_axis",
        &["broadcast_axes"],
        &["data"],
        BROADCAST_AXIS_PARAMS,
        "Broadcasts axes of size 1 to the given sizes.",
        create_broadcast_axis,
    ));
    r.add(def(
        "tile",
        &[],
        &["data"],
        TILE_PARAMS,
        "Repeats the whole array along each axis.",
        create_tile,
    ));
    r.add(def(
        "repeat",
        &[],
        &["data"],
        REPEAT_PARAMS,
        "Repeats each element along an axis (of the flattened array by default).",
        create_repeat,
    ));
}
