//! CPU kernels of the operators that repeat data: `broadcast_to`, `broadcast_like`,
//! `broadcast_axis`, `tile` and `repeat`; each is a view of the input with zero strides.

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
        let view = crate::op::transform::broadcast::broadcast_view("t", &[2, 1], &[2, 2]).unwrap();
        super::super::copy::gather(&src.blob(), &view, &dst.blob(), crate::op::OpReq::Add).unwrap();
        assert_eq!(f32s(&dst), vec![11., 11., 12., 12.]);
        let bools = array::<bool>(&[1], &[true]);
        let bdst = array::<bool>(&[1], &[true]);
        bools.wait_to_read().unwrap();
        bdst.wait_to_read().unwrap();
        let id = crate::op::transform::view::View::of(&[1]);
        assert!(super::super::copy::gather(
            &bools.blob(),
            &id,
            &bdst.blob(),
            crate::op::OpReq::Add
        )
        .is_err());
    }
}
