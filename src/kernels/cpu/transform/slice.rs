//! CPU kernels of the slicing operators: `slice` (alias `crop`; begin/end/step with
//! `None` entries, negative indices and steps, as Python slices), `slice_axis` and
//! `slice_like`.

#[cfg(test)]
use crate::op::transform::slice::indices;

/// The `(b, count)` of a Python slice, for tests of the index arithmetic.
#[cfg(test)]
fn py_slice(begin: Option<i64>, end: Option<i64>, step: i64, len: i64) -> Vec<i64> {
    let (b, n) = indices(begin, end, step, len);
    (0..n).map(|k| b + k * step).collect()
}

#[cfg(test)]
#[allow(clippy::cloned_ref_to_slice_refs)]
mod tests {
    use super::py_slice;
    use crate::kernels::cpu::testing::iota;
    use crate::op::testutil::{array, f32a, f32s, run, try_run, values};

    #[test]
    fn python_slice_indices() {
        assert_eq!(py_slice(None, None, 1, 4), vec![0, 1, 2, 3]);
        assert_eq!(py_slice(None, None, -1, 4), vec![3, 2, 1, 0]);
        assert_eq!(py_slice(Some(-1), None, 1, 4), vec![3]);
        assert_eq!(py_slice(Some(10), None, -1, 4), vec![3, 2, 1, 0]);
        assert_eq!(py_slice(None, Some(-10), -1, 4), vec![3, 2, 1, 0]);
        assert_eq!(py_slice(Some(1), Some(1), 1, 4), Vec::<i64>::new());
        assert_eq!(py_slice(Some(3), Some(0), -2, 4), vec![3, 1]);
        assert_eq!(py_slice(Some(-10), Some(10), 3, 4), vec![0, 3]);
        assert_eq!(
            py_slice(Some(i64::MIN), Some(i64::MAX), i64::MAX, 4),
            vec![0]
        );
        assert_eq!(py_slice(None, None, i64::MIN, 4), vec![3]);
        assert_eq!(py_slice(None, None, 1, 0), Vec::<i64>::new());
    }

    #[test]
    fn slice_op() {
        let x = iota(&[2, 3, 4]);
        let a = &run(
            "slice",
            &[("begin", "(0, 1)"), ("end", "(2, 3)")],
            &[x.clone()],
        )[0];
        assert_eq!(a.shape(), &[2, 2, 4]);
        assert_eq!(&f32s(a)[..4], &[4., 5., 6., 7.]);
        let b = &run(
            "crop",
            &[("begin", "(None, 1)"), ("end", "(None, 3)")],
            &[x.clone()],
        )[0];
        assert_eq!(f32s(b), f32s(a));
        let c = &run(
            "slice",
            &[
                ("begin", "(None, None, None)"),
                ("end", "(None, None, None)"),
                ("step", "(-1, -1, -2)"),
            ],
            &[x.clone()],
        )[0];
        assert_eq!(c.shape(), &[2, 3, 2]);
        assert_eq!(&f32s(c)[..4], &[23., 21., 19., 17.]);
        let d = &run(
            "slice",
            &[("begin", "(1, 2)"), ("end", "(0, 0)"), ("step", "(-1, -1)")],
            &[x.clone()],
        )[0];
        assert_eq!(d.shape(), &[1, 2, 4]);
        assert_eq!(&f32s(d)[..5], &[20., 21., 22., 23., 16.]);
        let e = &run("slice", &[("begin", "(5,)"), ("end", "(6,)")], &[x.clone()])[0];
        assert_eq!(e.shape(), &[0, 3, 4]);
        let f = &run(
            "slice",
            &[
                ("begin", "(0, 0)"),
                ("end", "(2, 3)"),
                ("step", "(None, 2)"),
            ],
            &[x.clone()],
        )[0];
        assert_eq!(f.shape(), &[2, 2, 4]);
        assert!(try_run(
            "slice",
            &[("begin", "(0,)"), ("end", "(1,)"), ("step", "(0,)")],
            &[x.clone()]
        )
        .is_err());
        assert!(try_run(
            "slice",
            &[("begin", "(0, 0, 0, 0)"), ("end", "(1, 1, 1, 1)")],
            &[x.clone()]
        )
        .is_err());
        assert!(try_run(
            "slice",
            &[("begin", "(0, 0)"), ("end", "(1,)")],
            &[x.clone()]
        )
        .is_err());
        assert!(try_run(
            "slice",
            &[("begin", "(0, 0)"), ("end", "(2, 3)"), ("step", "(2,)")],
            &[x.clone()]
        )
        .is_err());
        assert!(try_run("slice", &[("begin", "(0,)")], &[x]).is_err());
        let i = array::<i8>(&[5], &[1, 2, 3, 4, 5]);
        let r = &run(
            "slice",
            &[("begin", "(None,)"), ("end", "(None,)"), ("step", "(-2,)")],
            &[i],
        )[0];
        assert_eq!(values::<i8>(r), vec![5, 3, 1]);
    }

    #[test]
    fn slice_axis_and_like() {
        let x = iota(&[2, 3, 4]);
        let a = &run(
            "slice_axis",
            &[("axis", "1"), ("begin", "1"), ("end", "None")],
            &[x.clone()],
        )[0];
        assert_eq!(a.shape(), &[2, 2, 4]);
        assert_eq!(&f32s(a)[..4], &[4., 5., 6., 7.]);
        let b = &run(
            "slice_axis",
            &[("axis", "-1"), ("begin", "-3"), ("end", "-1")],
            &[x.clone()],
        )[0];
        assert_eq!(&f32s(b)[..4], &[1., 2., 5., 6.]);
        for (bg, en) in [("2", "2"), ("2", "1"), ("0", "5"), ("-5", "2")] {
            assert!(try_run(
                "slice_axis",
                &[("axis", "1"), ("begin", bg), ("end", en)],
                &[x.clone()]
            )
            .is_err());
        }
        assert!(try_run(
            "slice_axis",
            &[("axis", "3"), ("begin", "0"), ("end", "1")],
            &[x.clone()]
        )
        .is_err());
        assert!(try_run("slice_axis", &[("axis", "1"), ("begin", "0")], &[x.clone()]).is_err());
        let like = array::<i32>(&[1, 2, 3], &[0; 6]);
        let c = &run("slice_like", &[], &[x.clone(), like.clone()])[0];
        assert_eq!(c.shape(), &[1, 2, 3]);
        assert_eq!(f32s(c), vec![0., 1., 2., 4., 5., 6.]);
        let d = &run("slice_like", &[("axes", "(0, -1)")], &[x.clone(), like])[0];
        assert_eq!(d.shape(), &[1, 3, 3]);
        let two = f32a(&[1, 2], &[0.; 2]);
        assert_eq!(
            run("slice_like", &[("axes", "(1,)")], &[x.clone(), two.clone()])[0].shape(),
            &[2, 2, 4]
        );
        assert!(try_run("slice_like", &[], &[x.clone(), two.clone()]).is_err());
        assert!(try_run("slice_like", &[("axes", "(2,)")], &[x.clone(), two]).is_err());
        assert!(try_run("slice_like", &[], &[x, iota(&[3, 2, 3])]).is_err());
    }
}
