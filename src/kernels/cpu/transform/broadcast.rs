//! Operators that repeat data: `broadcast_to`, `broadcast_like`, `broadcast_axis`,
//! `tile` and `repeat`; each is a view of the input with zero strides.

use super::copy::View;
use super::{axis_in, def, dims, fmt_tuple, gather_op, gather_op2, plain};
use crate::error::{Error, Result};
use crate::op::{Attrs, OpRef, Params, Registry};
use crate::shape::{fmt_shape, Shape};

fn too_large(op: &str, s: &[usize]) -> Error {
    Error::Value(format!(
        "{op}: the result for an input of shape {} is too large",
        fmt_shape(s)
    ))
}

/// `s` broadcast to `target` (same number of axes; each axis equal or 1 in `s`).
fn broadcast_view(op: &str, s: &[usize], target: &[usize]) -> Result<View> {
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

fn create_broadcast_to(attrs: &Attrs) -> Result<OpRef> {
    let op = "broadcast_to";
    let p = Params::new(op, attrs, &["shape"])?;
    let shape = dims(op, "shape", &p.tuple("shape", &[])?)?;
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

fn broadcast_like_view(
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

fn create_broadcast_like(attrs: &Attrs) -> Result<OpRef> {
    let op = "broadcast_like";
    let p = Params::new(op, attrs, &["lhs_axes", "rhs_axes"])?;
    // Axes are used only when both are given, as in MXNet.
    let axes = match (p.opt_tuple("lhs_axes")?, p.opt_tuple("rhs_axes")?) {
        (Some(l), Some(r)) => Some((l, r)),
        _ => None,
    };
    gather_op2(op, move |l, r| {
        broadcast_like_view(l, r, axes.as_ref()).map(plain)
    })
}

fn broadcast_axis_view(s: &[usize], axes: &[i64], sizes: &[usize]) -> Result<View> {
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

fn create_broadcast_axis(attrs: &Attrs) -> Result<OpRef> {
    let op = "broadcast_axis";
    let p = Params::new(op, attrs, &["axis", "size"])?;
    let axes = p.tuple("axis", &[])?;
    let sizes = dims(op, "size", &p.tuple("size", &[])?)?;
    gather_op(op, move |s| {
        broadcast_axis_view(s, &axes, &sizes).map(plain)
    })
}

/// `s` tiled `reps` times; each output axis is seen as (repetition, input axis).
fn tile_view(s: &[usize], reps: &[usize]) -> Result<(Shape, View)> {
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

fn create_tile(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::new("tile", attrs, &["reps"])?;
    let reps = dims("tile", "reps", &p.tuple_required("reps")?)?;
    gather_op("tile", move |s| tile_view(s, &reps))
}

/// Each element of `s` repeated `r` times along `axis` (of the flattened input if None).
fn repeat_view(s: &[usize], r: usize, axis: Option<i64>) -> Result<(Shape, View)> {
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

fn create_repeat(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::new("repeat", attrs, &["repeats", "axis"])?;
    let r = p.int_required("repeats")?;
    let r = usize::try_from(r)
        .map_err(|_| Error::Value(format!("repeat: repeats cannot be negative, got {r}")))?;
    let axis = p.opt_int("axis")?;
    gather_op("repeat", move |s| repeat_view(s, r, axis))
}

pub(super) fn register(r: &mut Registry) {
    r.add(def(
        "broadcast_to",
        &[],
        &["data"],
        &["shape"],
        "Broadcasts axes of size 1 to a shape (0 keeps an axis).",
        create_broadcast_to,
    ));
    r.add(def(
        "broadcast_like",
        &[],
        &["lhs", "rhs"],
        &["lhs_axes", "rhs_axes"],
        "Broadcasts lhs to the shape of rhs (on the given axes).",
        create_broadcast_like,
    ));
    r.add(def(
        "broadcast_axis",
        &["broadcast_axes"],
        &["data"],
        &["axis", "size"],
        "Broadcasts axes of size 1 to the given sizes.",
        create_broadcast_axis,
    ));
    r.add(def(
        "tile",
        &[],
        &["data"],
        &["reps"],
        "Repeats the whole array along each axis.",
        create_tile,
    ));
    r.add(def(
        "repeat",
        &[],
        &["data"],
        &["repeats", "axis"],
        "Repeats each element along an axis (of the flattened array by default).",
        create_repeat,
    ));
}

#[cfg(test)]
#[allow(clippy::cloned_ref_to_slice_refs)]
mod tests {
    use crate::imperative::invoke;
    use crate::op::testutil::{array, f32a, f32s, run, try_run, values};
    use crate::op::{self, Attrs};

    #[test]
    fn broadcast_to_like_axis() {
        let x = f32a(&[2, 1], &[1., 2.]);
        let b = &run("broadcast_to", &[("shape", "(2, 3)")], &[x.clone()])[0];
        assert_eq!(f32s(b), vec![1., 1., 1., 2., 2., 2.]);
        let z = &run("broadcast_to", &[("shape", "(0, 3)")], &[x.clone()])[0];
        assert_eq!(z.shape(), &[2, 3]);
        assert!(try_run("broadcast_to", &[("shape", "(3, 3)")], &[x.clone()]).is_err());
        assert!(try_run("broadcast_to", &[("shape", "(4, 2, 3)")], &[x.clone()]).is_err());
        assert!(try_run("broadcast_to", &[("shape", "(2, -1)")], &[x.clone()]).is_err());
        let like = array::<i32>(&[2, 4], &[0; 8]);
        let l = &run("broadcast_like", &[], &[x.clone(), like.clone()])[0];
        assert_eq!(l.shape(), &[2, 4]);
        assert_eq!(f32s(l)[4..], [2., 2., 2., 2.]);
        let y = f32a(&[2, 1, 1], &[1., 2.]);
        let five = f32a(&[5, 6], &[0.; 30]);
        let a = &run(
            "broadcast_like",
            &[("lhs_axes", "(1, 2)"), ("rhs_axes", "(0, 1)")],
            &[y.clone(), five.clone()],
        )[0];
        assert_eq!(a.shape(), &[2, 5, 6]);
        let n = &run(
            "broadcast_like",
            &[("lhs_axes", "(-2,)"), ("rhs_axes", "(-1,)")],
            &[y.clone(), five.clone()],
        )[0];
        assert_eq!(n.shape(), &[2, 6, 1]);
        assert!(try_run(
            "broadcast_like",
            &[("lhs_axes", "(0,)"), ("rhs_axes", "(0,)")],
            &[y.clone(), five.clone()]
        )
        .is_err());
        assert!(try_run(
            "broadcast_like",
            &[("lhs_axes", "(1, 2)"), ("rhs_axes", "(0,)")],
            &[y.clone(), five.clone()]
        )
        .is_err());
        assert!(try_run(
            "broadcast_like",
            &[("lhs_axes", "(1,)")],
            &[y.clone(), five]
        )
        .is_err());
        let c = &run(
            "broadcast_axis",
            &[("axis", "(1, 2)"), ("size", "(3, 4)")],
            &[y.clone()],
        )[0];
        assert_eq!(c.shape(), &[2, 3, 4]);
        assert_eq!(f32s(c)[12..], [2.; 12]);
        let d = &run(
            "broadcast_axes",
            &[("axis", "-1"), ("size", "4")],
            &[y.clone()],
        )[0];
        assert_eq!(d.shape(), &[2, 1, 4]);
        assert_eq!(
            run("broadcast_axis", &[], &[y.clone()])[0].shape(),
            &[2, 1, 1]
        );
        assert_eq!(
            run(
                "broadcast_axis",
                &[("axis", "1"), ("size", "0")],
                &[y.clone()]
            )[0]
            .shape(),
            &[2, 0, 1]
        );
        assert!(try_run(
            "broadcast_axis",
            &[("axis", "0"), ("size", "4")],
            &[y.clone()]
        )
        .is_err());
        assert!(try_run(
            "broadcast_axis",
            &[("axis", "(1, 1)"), ("size", "(3, 4)")],
            &[y.clone()]
        )
        .is_err());
        assert!(try_run(
            "broadcast_axis",
            &[("axis", "(1, 2)"), ("size", "(4,)")],
            &[y.clone()]
        )
        .is_err());
        assert!(try_run("broadcast_axis", &[("axis", "3"), ("size", "2")], &[y]).is_err());
    }

    #[test]
    fn tile_and_repeat() {
        let x = array::<i32>(&[2, 3], &[1, 2, 3, 4, 5, 6]);
        let t = &run("tile", &[("reps", "(2,)")], &[x.clone()])[0];
        assert_eq!(t.shape(), &[2, 6]);
        assert_eq!(values::<i32>(t), vec![1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6]);
        let u = &run("tile", &[("reps", "(2, 1, 1)")], &[x.clone()])[0];
        assert_eq!(u.shape(), &[2, 2, 3]);
        assert_eq!(values::<i32>(u)[6..], [1, 2, 3, 4, 5, 6]);
        assert_eq!(
            run("tile", &[("reps", "()")], &[x.clone()])[0].shape(),
            &[2, 3]
        );
        assert_eq!(
            run("tile", &[("reps", "(0, 1)")], &[x.clone()])[0].shape(),
            &[0, 3]
        );
        assert!(try_run("tile", &[("reps", "(-1,)")], &[x.clone()]).is_err());
        assert!(try_run(
            "tile",
            &[("reps", "(4294967296, 4294967296, 4294967296)")],
            &[x.clone()]
        )
        .is_err());
        assert!(try_run("tile", &[], &[x.clone()]).is_err());
        let r = &run("repeat", &[("repeats", "2")], &[x.clone()])[0];
        assert_eq!(values::<i32>(r), vec![1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6]);
        let a = &run("repeat", &[("repeats", "2"), ("axis", "0")], &[x.clone()])[0];
        assert_eq!(values::<i32>(a), vec![1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6]);
        let b = &run("repeat", &[("repeats", "2"), ("axis", "-1")], &[x.clone()])[0];
        assert_eq!(b.shape(), &[2, 6]);
        assert_eq!(values::<i32>(b)[..4], [1, 1, 2, 2]);
        assert_eq!(
            run("repeat", &[("repeats", "0"), ("axis", "1")], &[x.clone()])[0].shape(),
            &[0]
        );
        assert!(try_run("repeat", &[("repeats", "-1")], &[x.clone()]).is_err());
        assert!(try_run("repeat", &[("repeats", "2"), ("axis", "2")], &[x]).is_err());
    }

    #[test]
    fn add_request_accumulates() {
        let x = f32a(&[2, 1], &[1., 2.]);
        let attrs: Attrs = [("shape".to_string(), "(2, 2)".to_string())].into();
        let o = op::find("broadcast_to").unwrap().build(&attrs).unwrap();
        let out = f32a(&[2, 2], &[10., 10., 10., 10.]);
        let res = invoke(&o, &[x], Some(vec![out]), None, false).unwrap();
        assert_eq!(f32s(&res[0]), vec![1., 1., 2., 2.]);
        // Add through the kernel directly.
        let src = f32a(&[2, 1], &[1., 2.]);
        let dst = f32a(&[2, 2], &[10., 10., 10., 10.]);
        src.wait_to_read().unwrap();
        dst.wait_to_read().unwrap();
        let view = super::broadcast_view("t", &[2, 1], &[2, 2]).unwrap();
        super::super::copy::gather(&src.blob(), &view, &dst.blob(), crate::op::OpReq::Add).unwrap();
        assert_eq!(f32s(&dst), vec![11., 11., 12., 12.]);
        let bools = array::<bool>(&[1], &[true]);
        let bdst = array::<bool>(&[1], &[true]);
        bools.wait_to_read().unwrap();
        bdst.wait_to_read().unwrap();
        let id = super::super::copy::View::of(&[1]);
        assert!(super::super::copy::gather(
            &bools.blob(),
            &id,
            &bdst.blob(),
            crate::op::OpReq::Add
        )
        .is_err());
    }
}
