//! Definitions of the operators that reorder elements: `transpose`, `SwapAxis`, `reverse`
//! (flip), `depth_to_space` and `space_to_depth`.

use crate::error::{Error, Result};
use crate::op::transform::view::View;
use crate::op::transform::{axis_in, def, fmt_tuple, gather_op, plain, tuple_or_empty};
use crate::op::{Attrs, OpRef, Param, Params, Registry};
use crate::shape::{fmt_shape, Shape};

/// The view of a permutation of the axes of `s`.
pub(crate) fn permuted(s: &[usize], perm: &[usize]) -> View {
    let base = View::of(s);
    View {
        shape: perm.iter().map(|&a| s[a]).collect(),
        strides: perm.iter().map(|&a| base.strides[a]).collect(),
        offset: 0,
    }
}

pub(crate) fn transpose_view(s: &[usize], axes: &[i64]) -> Result<View> {
    let n = s.len();
    if axes.is_empty() {
        let perm: Vec<usize> = (0..n).rev().collect();
        return Ok(permuted(s, &perm));
    }
    if axes.len() != n {
        return Err(Error::Value(format!(
            "transpose: axes {} do not match an array of shape {}",
            fmt_tuple(axes),
            fmt_shape(s)
        )));
    }
    let mut seen = vec![false; n];
    let mut perm = Vec::with_capacity(n);
    for &a in axes {
        let k = axis_in("transpose", a, n)?;
        if seen[k] {
            return Err(Error::Value(format!(
                "transpose: repeated axis in axes {}",
                fmt_tuple(axes)
            )));
        }
        seen[k] = true;
        perm.push(k);
    }
    Ok(permuted(s, &perm))
}

pub(crate) fn create_transpose(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("transpose", attrs, TRANSPOSE_PARAMS)?;
    let axes = tuple_or_empty(&p, "axes")?;
    gather_op("transpose", move |s| transpose_view(s, &axes).map(plain))
}

pub(crate) fn create_swapaxis(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("SwapAxis", attrs, SWAPAXIS_PARAMS)?;
    let (d1, d2): (i64, i64) = (p.get("dim1")?, p.get("dim2")?);
    gather_op("SwapAxis", move |s| {
        let a = axis_in("SwapAxis", d1, s.len())?;
        let b = axis_in("SwapAxis", d2, s.len())?;
        let mut perm: Vec<usize> = (0..s.len()).collect();
        perm.swap(a, b);
        Ok(plain(permuted(s, &perm)))
    })
}

/// The view of `s` with the listed axes reversed (an axis listed twice is not reversed).
pub(crate) fn flip_view(s: &[usize], axes: &[i64]) -> Result<View> {
    let mut flip = vec![false; s.len()];
    for &a in axes {
        let k = axis_in("reverse", a, s.len())?;
        flip[k] = !flip[k];
    }
    let mut v = View::of(s);
    for (k, f) in flip.into_iter().enumerate() {
        if f && s[k] > 0 {
            v.offset += (s[k] as isize - 1) * v.strides[k];
            v.strides[k] = -v.strides[k];
        }
    }
    Ok(v)
}

pub(crate) fn create_reverse(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("reverse", attrs, REVERSE_PARAMS)?;
    let axes: Vec<i64> = p.get("axis")?;
    gather_op("reverse", move |s| flip_view(s, &axes).map(plain))
}

pub(crate) fn block_size(op: &str, p: &Params) -> Result<usize> {
    let b: i64 = p.get("block_size")?;
    match usize::try_from(b) {
        Ok(b) if b > 0 => Ok(b),
        _ => Err(Error::Value(format!(
            "{op}: block_size must be a positive integer, got {b}"
        ))),
    }
}

pub(crate) fn four_d(op: &str, s: &[usize]) -> Result<(usize, usize, usize, usize)> {
    if s.len() != 4 {
        return Err(Error::Value(format!(
            "{op}: the input must be 4-dimensional (N, C, H, W), got shape {}",
            fmt_shape(s)
        )));
    }
    Ok((s[0], s[1], s[2], s[3]))
}

pub(crate) fn too_large(op: &str, s: &[usize], b: usize) -> Error {
    Error::Value(format!(
        "{op}: block_size {b} is too large for an input of shape {}",
        fmt_shape(s)
    ))
}

/// `(N, C, H, W)` to `(N, C/b², H*b, W*b)`: output `[n, c, h*b+i, w*b+j]` is input
/// `[n, (i*b+j)*C/b² + c, h, w]`.
pub(crate) fn depth_to_space_view(s: &[usize], b: usize) -> Result<(Shape, View)> {
    let op = "depth_to_space";
    let (n, c, h, w) = four_d(op, s)?;
    let bb = b.checked_mul(b).ok_or_else(|| too_large(op, s, b))?;
    if c % bb != 0 {
        return Err(Error::Value(format!(
            "{op}: the depth (axis 1) of shape {} must be a multiple of block_size^2 = {bb}",
            fmt_shape(s)
        )));
    }
    let co = c / bb;
    let (hb, wb) = match (h.checked_mul(b), w.checked_mul(b)) {
        (Some(hb), Some(wb)) => (hb, wb),
        _ => return Err(too_large(op, s, b)),
    };
    let hw = (h * w) as isize;
    let cohw = co as isize * hw;
    let view = View {
        shape: vec![n, co, h, b, w, b],
        strides: vec![c as isize * hw, hw, w as isize, b as isize * cohw, 1, cohw],
        offset: 0,
    };
    Ok((Shape::from_slice(&[n, co, hb, wb]), view))
}

/// `(N, C, H, W)` to `(N, C*b², H/b, W/b)`: output `[n, (i*b+j)*C + c, h, w]` is input
/// `[n, c, h*b+i, w*b+j]`.
pub(crate) fn space_to_depth_view(s: &[usize], b: usize) -> Result<(Shape, View)> {
    let op = "space_to_depth";
    let (n, c, h, w) = four_d(op, s)?;
    if h % b != 0 || w % b != 0 {
        return Err(Error::Value(format!(
            "{op}: the spatial axes (2 and 3) of shape {} must be multiples of block_size {b}",
            fmt_shape(s)
        )));
    }
    let cbb = b
        .checked_mul(b)
        .and_then(|bb| bb.checked_mul(c))
        .ok_or_else(|| too_large(op, s, b))?;
    let (ho, wo) = (h / b, w / b);
    let wi = w as isize;
    let view = View {
        shape: vec![n, b, b, c, ho, wo],
        strides: vec![
            (c * h * w) as isize,
            wi,
            1,
            (h * w) as isize,
            b as isize * wi,
            b as isize,
        ],
        offset: 0,
    };
    Ok((Shape::from_slice(&[n, cbb, ho, wo]), view))
}

pub(crate) fn create_depth_to_space(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("depth_to_space", attrs, BLOCK_PARAMS)?;
    let b = block_size("depth_to_space", &p)?;
    gather_op("depth_to_space", move |s| depth_to_space_view(s, b))
}

pub(crate) fn create_space_to_depth(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("space_to_depth", attrs, BLOCK_PARAMS)?;
    let b = block_size("space_to_depth", &p)?;
    gather_op("space_to_depth", move |s| space_to_depth_view(s, b))
}

const TRANSPOSE_PARAMS: &[Param] = &[Param::new(
    "axes",
    "Shape(tuple)",
    "()",
    "Target axis order. By default the axes will be inverted.",
)];

const SWAPAXIS_PARAMS: &[Param] = &[
    Param::new("dim1", "int", "0", "the first axis to be swapped."),
    Param::new("dim2", "int", "0", "the second axis to be swapped."),
];

const REVERSE_PARAMS: &[Param] = &[Param::required(
    "axis",
    "Shape(tuple)",
    "The axis which to reverse elements.",
)];

const BLOCK_PARAMS: &[Param] = &[Param::required(
    "block_size",
    "int",
    "Blocks of [block_size. block_size] are moved",
)];

pub(super) fn register(r: &mut Registry) {
    r.add(def(
        "transpose",
        &[],
        &["data"],
        TRANSPOSE_PARAMS,
        "Permutes the axes (reverses them by default).",
        create_transpose,
    ));
    r.add(def(
        "SwapAxis",
        &["swapaxes"],
        &["data"],
        SWAPAXIS_PARAMS,
        "Interchanges two axes.",
        create_swapaxis,
    ));
    r.add(def(
        "reverse",
        &["flip"],
        &["data"],
        REVERSE_PARAMS,
        "Reverses the order of elements along the given axes.",
        create_reverse,
    ));
    r.add(def(
        "depth_to_space",
        &[],
        &["data"],
        BLOCK_PARAMS,
        "Moves blocks of depth into spatial blocks (NCHW).",
        create_depth_to_space,
    ));
    r.add(def(
        "space_to_depth",
        &[],
        &["data"],
        BLOCK_PARAMS,
        "Moves spatial blocks into depth (NCHW).",
        create_space_to_depth,
    ));
}
