//! CPU kernels of the operators that reorder elements: `transpose`, `SwapAxis`, `reverse`
//! (flip), `depth_to_space` and `space_to_depth`.

#[cfg(test)]
#[allow(clippy::cloned_ref_to_slice_refs)]
mod tests {
    use crate::kernels::cpu::testing::iota;
    use crate::op::testutil::{array, f32s, run, try_run, values};

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
