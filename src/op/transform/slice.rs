//! Definitions of the slicing operators: `slice` (alias `crop`; begin/end/step with
//! `None` entries, negative indices and steps, as Python slices), `slice_axis` and
//! `slice_like`.

use crate::error::{Error, Result};
use crate::op::transform::view::View;
use crate::op::transform::{axis_in, def, gather_op, gather_op2, plain, tuple_or_empty};
use crate::op::{Attrs, OpRef, Param, Params, Registry};
use crate::shape::fmt_shape;

pub(crate) fn fmt_opt(v: &[Option<i64>]) -> String {
    let items: Vec<String> = v
        .iter()
        .map(|x| x.map_or("None".to_string(), |x| x.to_string()))
        .collect();
    match items.len() {
        1 => format!("({},)", items[0]),
        _ => format!("({})", items.join(", ")),
    }
}

/// Python's `slice(begin, end, step).indices(len)` and the number of elements selected.
pub(crate) fn indices(begin: Option<i64>, end: Option<i64>, step: i64, len: i64) -> (i64, i64) {
    let clamp = |v: i64, lo: i64, hi: i64| {
        let v = if v < 0 { v.saturating_add(len) } else { v };
        v.clamp(lo, hi)
    };
    let (b, e) = if step > 0 {
        (
            begin.map_or(0, |b| clamp(b, 0, len)),
            end.map_or(len, |e| clamp(e, 0, len)),
        )
    } else {
        (
            begin.map_or(len - 1, |b| clamp(b, -1, len - 1)),
            end.map_or(-1, |e| clamp(e, -1, len - 1)),
        )
    };
    let count = if step > 0 && e > b {
        (e - b - 1) / step + 1
    } else if step < 0 && b > e {
        (b - e - 1) / step.saturating_neg() + 1
    } else {
        0
    };
    (b, count)
}

pub(crate) fn slice_view(
    s: &[usize],
    begin: &[Option<i64>],
    end: &[Option<i64>],
    step: &[Option<i64>],
) -> Result<View> {
    let op = "slice";
    if begin.len() != end.len() {
        return Err(Error::Value(format!(
            "{op}: begin {} and end {} must have the same length",
            fmt_opt(begin),
            fmt_opt(end)
        )));
    }
    if begin.len() > s.len() {
        return Err(Error::Value(format!(
            "{op}: begin {} has more entries than the input of shape {} has axes",
            fmt_opt(begin),
            fmt_shape(s)
        )));
    }
    if !step.is_empty() && step.len() != begin.len() {
        return Err(Error::Value(format!(
            "{op}: step {} and begin {} must have the same length",
            fmt_opt(step),
            fmt_opt(begin)
        )));
    }
    let mut v = View::of(s);
    for i in 0..begin.len() {
        let st = step.get(i).copied().flatten().unwrap_or(1);
        if st == 0 {
            return Err(Error::Value(format!("{op}: step[{i}] cannot be 0")));
        }
        let (b, count) = indices(begin[i], end[i], st, s[i] as i64);
        if count > 0 {
            v.offset += b as isize * v.strides[i];
        }
        // With fewer than two elements the stride is never used (and may not fit).
        v.strides[i] = if count > 1 {
            v.strides[i] * st as isize
        } else {
            0
        };
        v.shape[i] = count as usize;
    }
    Ok(v)
}

pub(crate) fn create_slice(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("slice", attrs, SLICE_PARAMS)?;
    let begin: Vec<Option<i64>> = p.get("begin")?;
    let end: Vec<Option<i64>> = p.get("end")?;
    let step: Vec<Option<i64>> = p.get("step")?;
    gather_op("slice", move |s| {
        slice_view(s, &begin, &end, &step).map(plain)
    })
}

pub(crate) fn slice_axis_view(
    s: &[usize],
    axis: i64,
    begin: i64,
    end: Option<i64>,
) -> Result<View> {
    let op = "slice_axis";
    let a = axis_in(op, axis, s.len())?;
    let len = s[a] as i64;
    let b = if begin < 0 { begin + len } else { begin };
    let e = match end {
        None => len,
        Some(e) if e < 0 => e + len,
        Some(e) => e,
    };
    let range = || {
        format!(
            "begin={begin}, end={} on axis {axis} of length {len}",
            end.map_or("None".to_string(), |e| e.to_string())
        )
    };
    if b < 0 || b >= len {
        return Err(Error::Index(format!("{op}: invalid begin: {}", range())));
    }
    if e > len || e <= b {
        return Err(Error::Index(format!("{op}: invalid end: {}", range())));
    }
    let mut v = View::of(s);
    v.offset = b as isize * v.strides[a];
    v.shape[a] = (e - b) as usize;
    Ok(v)
}

pub(crate) fn create_slice_axis(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("slice_axis", attrs, SLICE_AXIS_PARAMS)?;
    let axis: i64 = p.get("axis")?;
    let begin: i64 = p.get("begin")?;
    let end: Option<i64> = p.get("end")?;
    gather_op("slice_axis", move |s| {
        slice_axis_view(s, axis, begin, end).map(plain)
    })
}

pub(crate) fn slice_like_view(s: &[usize], like: &[usize], axes: &[i64]) -> Result<View> {
    let op = "slice_like";
    let mut v = View::of(s);
    let chosen: Vec<usize> = if axes.is_empty() {
        if s.len() != like.len() {
            return Err(Error::Value(format!(
                "{op}: without axes every axis is sliced, so the inputs must have the same \
                 number of dimensions, got shapes {} and {}",
                fmt_shape(s),
                fmt_shape(like)
            )));
        }
        (0..s.len()).collect()
    } else {
        let mut out = Vec::with_capacity(axes.len());
        for &a in axes {
            let k = axis_in(op, a, s.len())?;
            if k >= like.len() {
                return Err(Error::Index(format!(
                    "{op}: axis {a} is out of bounds for the second input of shape {}",
                    fmt_shape(like)
                )));
            }
            out.push(k);
        }
        out
    };
    for k in chosen {
        if like[k] > s[k] {
            return Err(Error::Value(format!(
                "{op}: axis {k} of the second input (shape {}) is longer than that of the \
                 first (shape {})",
                fmt_shape(like),
                fmt_shape(s)
            )));
        }
        v.shape[k] = like[k];
    }
    Ok(v)
}

pub(crate) fn create_slice_like(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("slice_like", attrs, SLICE_LIKE_PARAMS)?;
    let axes = tuple_or_empty(&p, "axes")?;
    gather_op2("slice_like", move |s, like| {
        slice_like_view(s, like, &axes).map(plain)
    })
}

const SLICE_PARAMS: &[Param] = &[
    Param::required(
        "begin",
        "Shape(tuple)",
        "starting indices for the slice operation, supports negative indices.",
    ),
    Param::required(
        "end",
        "Shape(tuple)",
        "ending indices for the slice operation, supports negative indices.",
    ),
    Param::new(
        "step",
        "Shape(tuple)",
        "()",
        "step for the slice operation, supports negative values.",
    ),
];

const SLICE_AXIS_PARAMS: &[Param] = &[
    Param::required(
        "axis",
        "int",
        "Axis along which to be sliced, supports negative indexes.",
    ),
    Param::required(
        "begin",
        "int",
        "The beginning index along the axis to be sliced,  supports negative indexes.",
    ),
    Param::required(
        "end",
        "int or None",
        "The ending index along the axis to be sliced,  supports negative indexes.",
    ),
];

const SLICE_LIKE_PARAMS: &[Param] = &[Param::new(
    "axes",
    "Shape(tuple)",
    "()",
    "List of axes on which input data will be sliced according to the corresponding size of the second input. By default will slice on all axes. Negative axes are supported.",
)];

pub(super) fn register(r: &mut Registry) {
    r.add(def(
        "slice",
        &["crop"],
        &["data"],
        SLICE_PARAMS,
        "Slices a region of the array, as Python slices do on each leading axis.",
        create_slice,
    ));
    r.add(def(
        "slice_axis",
        &[],
        &["data"],
        SLICE_AXIS_PARAMS,
        "Slices the array along one axis.",
        create_slice_axis,
    ));
    r.add(def(
        "slice_like",
        &[],
        &["data", "shape_like"],
        SLICE_LIKE_PARAMS,
        "Slices the first array to the shape of the second on the given axes.",
        create_slice_like,
    ));
}
