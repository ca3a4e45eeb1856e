//! Operators that reorder elements: `transpose`, `SwapAxis`, `reverse` (flip),
//! `depth_to_space` and `space_to_depth`.

use super::copy::View;
use super::{axis_in, def, fmt_tuple, gather_op, plain};
use crate::error::{Error, Result};
use crate::op::{Attrs, OpRef, Params, Registry};
use crate::shape::{fmt_shape, Shape};

/// The view of a permutation of the axes of `s`.
fn permuted(s: &[usize], perm: &[usize]) -> View {
    let base = View::of(s);
    View {
        shape: perm.iter().map(|&a| s[a]).collect(),
        strides: perm.iter().map(|&a| base.strides[a]).collect(),
        offset: 0,
    }
}

fn transpose_view(s: &[usize], axes: &[i64]) -> Result<View> {
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

fn create_transpose(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::new("transpose", attrs, &["axes"])?;
    let axes = p.tuple("axes", &[])?;
    gather_op("transpose", move |s| transpose_view(s, &axes).map(plain))
}

fn create_swapaxis(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::new("SwapAxis", attrs, &["dim1", "dim2"])?;
    let (d1, d2) = (p.int("dim1", 0)?, p.int("dim2", 0)?);
    gather_op("SwapAxis", move |s| {
        let a = axis_in("SwapAxis", d1, s.len())?;
        let b = axis_in("SwapAxis", d2, s.len())?;
        let mut perm: Vec<usize> = (0..s.len()).collect();
        perm.swap(a, b);
        Ok(plain(permuted(s, &perm)))
    })
}

/// The view of `s` with the listed axes reversed (an axis listed twice is not reversed).
fn flip_view(s: &[usize], axes: &[i64]) -> Result<View> {
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

fn create_reverse(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::new("reverse", attrs, &["axis"])?;
    let axes = p.tuple_required("axis")?;
    gather_op("reverse", move |s| flip_view(s, &axes).map(plain))
}

fn block_size(op: &str, p: &Params) -> Result<usize> {
    let b = p.int_required("block_size")?;
    match usize::try_from(b) {
        Ok(b) if b > 0 => Ok(b),
        _ => Err(Error::Value(format!(
            "{op}: block_size must be a positive integer, got {b}"
        ))),
    }
}

fn four_d(op: &str, s: &[usize]) -> Result<(usize, usize, usize, usize)> {
    if s.len() != 4 {
        return Err(Error::Value(format!(
            "{op}: the input must be 4-dimensional (N, C, H, W), got shape {}",
            fmt_shape(s)
        )));
    }
    Ok((s[0], s[1], s[2], s[3]))
}

fn too_large(op: &str, s: &[usize], b: usize) -> Error {
    Error::Value(format!(
        "{op}: block_size {b} is too large for an input of shape {}",
        fmt_shape(s)
    ))
}

/// `(N, C, H, W)` to `(N, C/b², H*b, W*b)`: output `[n, c, h*b+i, w*b+j]` is input
/// `[n, (i*b+j)*C/b² + c, h, w]`.
fn depth_to_space_view(s: &[usize], b: usize) -> Result<(Shape, View)> {
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
fn space_to_depth_view(s: &[usize], b: usize) -> Result<(Shape, View)> {
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

fn create_depth_to_space(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::new("depth_to_space", attrs, &["block_size"])?;
    let b = block_size("depth_to_space", &p)?;
    gather_op("depth_to_space", move |s| depth_to_space_view(s, b))
}

fn create_space_to_depth(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::new("space_to_depth", attrs, &["block_size"])?;
    let b = block_size("space_to_depth", &p)?;
    gather_op("space_to_depth", move |s| space_to_depth_view(s, b))
}

pub(super) fn register(r: &mut Registry) {
    r.add(def(
        "transpose",
        &[],
        &["data"],
        &["axes"],
        "Permutes the axes (reverses them by default).",
        create_transpose,
    ));
    r.add(def(
        "SwapAxis",
        &["swapaxes"],
        &["data"],
        &["dim1", "dim2"],
        "Interchanges two axes.",
        create_swapaxis,
    ));
    r.add(def(
        "reverse",
        &["flip"],
        &["data"],
        &["axis"],
        "Reverses the order of elements along the given axes.",
        create_reverse,
    ));
    r.add(def(
        "depth_to_space",
        &[],
        &["data"],
        &["block_size"],
        "Moves blocks of depth into spatial blocks (NCHW).",
        create_depth_to_space,
    ));
    r.add(def(
        "space_to_depth",
        &[],
        &["data"],
        &["block_size"],
        "Moves spatial blocks into depth (NCHW).",
        create_space_to_depth,
    ));
}

#[cfg(test)]
#[allow(clippy::cloned_ref_to_slice_refs)]
mod tests {
    use crate::op::testutil::{array, f32a, f32s, run, try_run, values};

    fn iota(shape: &[usize]) -> crate::ndarray::NDArray {
        let n: usize = shape.iter().product();
        f32a(shape, &(0..n).map(|v| v as f32).collect::<Vec<_>>())
    }

    #[test]
    fn transpose_and_swapaxes() {
        let x = iota(&[2, 3, 4]);
        let t = &run("transpose", &[], &[x.clone()])[0];
        assert_eq!(t.shape(), &[4, 3, 2]);
        assert_eq!(&f32s(t)[..6], &[0., 12., 4., 16., 8., 20.]);
        let p = &run("transpose", &[("axes", "(1, 0, 2)")], &[x.clone()])[0];
        assert_eq!(p.shape(), &[3, 2, 4]);
        assert_eq!(&f32s(p)[..8], &[0., 1., 2., 3., 12., 13., 14., 15.]);
        let n = &run("transpose", &[("axes", "(-1, 0, 1)")], &[x.clone()])[0];
        assert_eq!(n.shape(), &[4, 2, 3]);
        assert!(try_run("transpose", &[("axes", "(1, 0)")], &[x.clone()]).is_err());
        assert!(try_run("transpose", &[("axes", "(1, 1, 0)")], &[x.clone()]).is_err());
        assert!(try_run("transpose", &[("axes", "(1, 3, 0)")], &[x.clone()]).is_err());
        let s = &run("SwapAxis", &[("dim1", "0"), ("dim2", "2")], &[x.clone()])[0];
        assert_eq!(f32s(s), f32s(t));
        let s2 = &run("swapaxes", &[("dim1", "-1"), ("dim2", "0")], &[x.clone()])[0];
        assert_eq!(f32s(s2), f32s(t));
        assert_eq!(f32s(&run("SwapAxis", &[], &[x.clone()])[0]), f32s(&x));
        assert!(try_run("swapaxes", &[("dim1", "3")], &[x]).is_err());
        // Large enough for the tiled, parallel path; every dtype size.
        let (r, c) = (300usize, 500usize);
        let big = array::<i64>(&[r, c], &(0..(r * c) as i64).collect::<Vec<_>>());
        let bt = values::<i64>(&run("transpose", &[], &[big])[0]);
        for (k, v) in bt.iter().enumerate() {
            let (i, j) = (k / r, k % r);
            assert_eq!(*v, (j * c + i) as i64);
        }
        let u = array::<u8>(&[2, 3], &[1, 2, 3, 4, 5, 6]);
        assert_eq!(
            values::<u8>(&run("transpose", &[], &[u])[0]),
            vec![1, 4, 2, 5, 3, 6]
        );
        let b = array::<bool>(&[1, 2], &[true, false]);
        assert_eq!(
            values::<bool>(&run("transpose", &[], &[b])[0]),
            vec![true, false]
        );
    }

    #[test]
    fn flip() {
        let x = iota(&[2, 3, 4]);
        let r = &run("reverse", &[("axis", "1")], &[x.clone()])[0];
        assert_eq!(&f32s(r)[..8], &[8., 9., 10., 11., 4., 5., 6., 7.]);
        let f = &run("flip", &[("axis", "(0, 2)")], &[x.clone()])[0];
        assert_eq!(&f32s(f)[..4], &[15., 14., 13., 12.]);
        let n = &run("flip", &[("axis", "-1")], &[x.clone()])[0];
        assert_eq!(&f32s(n)[..4], &[3., 2., 1., 0.]);
        let twice = &run("flip", &[("axis", "(0, 0)")], &[x.clone()])[0];
        assert_eq!(f32s(twice), f32s(&x));
        assert!(try_run("flip", &[("axis", "3")], &[x.clone()]).is_err());
        assert!(try_run("flip", &[], &[x]).is_err());
        let h = array::<half::f16>(&[3], &[1., 2., 3.].map(half::f16::from_f32));
        let hv = values::<half::f16>(&run("flip", &[("axis", "0")], &[h])[0]);
        assert_eq!(
            hv.iter().map(|v| v.to_f32()).collect::<Vec<_>>(),
            vec![3., 2., 1.]
        );
    }

    #[test]
    fn depth_space_round_trip() {
        let x = iota(&[1, 12, 2, 2]);
        let d = &run("depth_to_space", &[("block_size", "2")], &[x.clone()])[0];
        assert_eq!(d.shape(), &[1, 3, 4, 4]);
        assert_eq!(
            &f32s(d)[..12],
            &[0., 12., 1., 13., 24., 36., 25., 37., 2., 14., 3., 15.]
        );
        let back = &run("space_to_depth", &[("block_size", "2")], &[d.clone()])[0];
        assert_eq!(back.shape(), &[1, 12, 2, 2]);
        assert_eq!(f32s(back), f32s(&x));
        let y = iota(&[1, 3, 4, 4]);
        let s = &run("space_to_depth", &[("block_size", "2")], &[y])[0];
        assert_eq!(&f32s(s)[..8], &[0., 2., 8., 10., 16., 18., 24., 26.]);
        assert!(try_run(
            "depth_to_space",
            &[("block_size", "2")],
            &[iota(&[1, 6, 2, 4])]
        )
        .is_err());
        assert!(try_run(
            "space_to_depth",
            &[("block_size", "2")],
            &[iota(&[1, 3, 3, 4])]
        )
        .is_err());
        assert!(try_run(
            "depth_to_space",
            &[("block_size", "2")],
            &[iota(&[4, 3, 2])]
        )
        .is_err());
        assert!(try_run("depth_to_space", &[("block_size", "0")], &[x.clone()]).is_err());
        assert!(try_run("depth_to_space", &[("block_size", "4294967296")], &[x]).is_err());
    }
}
