use super::{build, close, error_text, f64s, run_backward, seq, seq32, seq64};
use crate::op::testutil::{array, gradcheck, run, try_run, values};
use crate::op::OpReq;
use crate::shape::Shape;

type Case<'a> = (
    &'a [usize],
    &'a [(&'a str, &'a str)],
    &'a [usize],
    &'a [f64],
    &'a [f64],
);

/// (data shape, attributes, output shape, output, data gradient) from MXNet 1.9.1, with
/// data `seq(7, 11, 0.5)` and output gradient `seq(3, 7, 0.3)`.
#[rustfmt::skip]
const CASES: &[Case] = &[
    (&[1, 2, 5, 5], &[("kernel", "(2,2)"), ("stride", "(2,2)"), ("pool_type", "max")], &[1, 2, 2, 2], &[0.4, 0.5, 0.1, 0.4, 0.5, 0.4, 0.5, 0.3], &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.3, 0.0, -0.1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.2, 0.0, 0.0, -0.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.1, 0.0, 0.0, 0.0, 0.0, 0.0, -0.3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
    (&[1, 2, 5, 5], &[("kernel", "(3,3)"), ("stride", "(2,2)"), ("pad", "(1,1)"), ("pool_type", "max")], &[1, 2, 3, 3], &[0.4, 0.5, 0.5, 0.4, 0.4, 0.5, 0.3, 0.4, 0.2, 0.5, 0.4, 0.4, 0.5, 0.5, 0.4, 0.2, 0.5, 0.1], &[0.0, 0.0, 0.0, 0.3, 0.0, 0.0, -0.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.2, 0.0, 0.0, -0.3, 0.0, 0.0, 0.1, 0.0, 0.0, 0.0, 0.0, 0.3, 0.0, 0.0, 0.1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.1, 0.0, 0.0, -0.3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.3, -0.1, 0.0]),
    (&[1, 2, 5, 5], &[("kernel", "(3,3)"), ("stride", "(2,2)"), ("pad", "(1,1)"), ("pool_type", "avg")], &[1, 2, 3, 3], &[-0.02222, 0.05556, 0.05556, -0.07778, -0.04444, -0.02222, 0.0, -0.03333, -0.04444, 0.05556, -0.01111, 0.01111, -0.02222, -0.02222, -0.08889, -0.04444, 0.02222, -0.08889], &[-0.03333, -0.03333, 0.0, 0.03333, 0.03333, -0.04444, -0.02222, 0.02222, 0.03333, 0.01111, -0.01111, 0.01111, 0.02222, 0.0, -0.02222, 0.0, -0.01111, -0.01111, -0.03333, -0.02222, 0.01111, -0.02222, -0.03333, -0.03333, 0.0, 0.03333, 0.02222, -0.01111, 0.01111, 0.02222, 0.01111, 0.01111, 0.0, -0.01111, -0.01111, -0.02222, -0.01111, 0.01111, -0.02222, -0.03333, -0.02222, 0.02222, 0.04444, 0.0, -0.04444, 0.0, 0.03333, 0.03333, 0.02222, -0.01111]),
    (&[1, 2, 5, 5], &[("kernel", "(3,3)"), ("stride", "(2,2)"), ("pad", "(1,1)"), ("pool_type", "avg"), ("count_include_pad", "False")], &[1, 2, 3, 3], &[-0.05, 0.08333, 0.125, -0.11667, -0.04444, -0.03333, 0.0, -0.05, -0.1, 0.125, -0.01667, 0.025, -0.03333, -0.02222, -0.13333, -0.1, 0.03333, -0.2], &[-0.075, -0.075, 0.0, 0.075, 0.075, -0.09167, -0.06944, 0.02222, 0.06389, 0.04167, -0.01667, 0.00556, 0.02222, -0.01111, -0.03333, 0.00833, -0.01944, -0.02778, -0.06111, -0.03333, 0.025, -0.025, -0.05, -0.05, 0.0, 0.075, 0.05833, -0.01667, 0.03333, 0.05, 0.04167, 0.03611, -0.00556, -0.00556, 0.0, -0.03333, -0.02222, 0.01111, -0.03889, -0.05, -0.03333, 0.02778, 0.06111, -0.01389, -0.075, 0.0, 0.05, 0.05, 0.025, -0.025]),
    (&[1, 2, 5, 5], &[("kernel", "(3,2)"), ("stride", "(2,2)"), ("pad", "(1,0)"), ("pool_type", "sum"), ("pooling_convention", "full")], &[1, 2, 3, 3], &[-0.2, -0.1, 0.4, -0.7, 0.0, 0.4, 0.0, 0.1, -0.6, 0.5, -0.5, 0.2, -0.2, -0.6, 0.1, -0.4, 0.8, -0.8], &[-0.3, -0.3, 0.0, 0.0, 0.3, -0.4, -0.4, 0.2, 0.2, 0.1, -0.1, -0.1, 0.2, 0.2, -0.2, 0.0, 0.0, -0.1, -0.1, -0.2, 0.1, 0.1, -0.3, -0.3, 0.0, 0.3, 0.3, -0.1, -0.1, 0.2, 0.1, 0.1, 0.0, 0.0, -0.1, -0.2, -0.2, 0.1, 0.1, -0.3, -0.2, -0.2, 0.4, 0.4, -0.4, 0.0, 0.0, 0.3, 0.3, -0.1]),
    (&[1, 2, 5, 5], &[("kernel", "(2,2)"), ("pool_type", "lp"), ("p_value", "2")], &[1, 2, 4, 4], &[0.73485, 0.4899, 0.67082, 0.71414, 0.71414, 0.67082, 0.4899, 0.73485, 0.6, 0.73485, 0.4899, 0.67082, 0.44721, 0.71414, 0.67082, 0.4899, 0.71414, 0.44721, 0.71414, 0.67082, 0.73485, 0.6, 0.6, 0.73485, 0.67082, 0.71414, 0.44721, 0.71414, 0.4899, 0.73485, 0.6, 0.6], &[0.20412, -0.08165, -0.08944, 0.15359, -0.014, 0.03846, -0.17053, 0.0, -0.04122, -0.16448, -0.02801, -0.19508, 0.02202, 0.02202, -0.05505, -0.04472, -0.03032, -0.04122, 0.0, -0.11926, -0.13416, 0.03072, 0.15359, -0.08944, 0.0, 0.21004, 0.01965, -0.01693, -0.00723, 0.0, -0.22247, -0.05023, 0.04436, -0.19508, 0.02202, 0.0026, -0.11647, -0.06672, -0.03032, 0.21931, 0.0, 0.19256, 0.09985, -0.00261, 0.01332, -0.12247, 0.12247, 0.25, 0.03333, 0.05]),
    (&[1, 2, 5, 5], &[("kernel", "(1,1)"), ("global_pool", "True"), ("pool_type", "avg")], &[1, 2, 1, 1], &[-0.02, 0.012], &[-0.012, -0.012, -0.012, -0.012, -0.012, -0.012, -0.012, -0.012, -0.012, -0.012, -0.012, -0.012, -0.012, -0.012, -0.012, -0.012, -0.012, -0.012, -0.012, -0.012, -0.012, -0.012, -0.012, -0.012, -0.012, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
    (&[1, 2, 5, 5], &[("global_pool", "True"), ("pool_type", "max")], &[1, 2, 1, 1], &[0.5, 0.5], &[0.0, 0.0, 0.0, -0.3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
    (&[1, 2, 7], &[("kernel", "(3)"), ("stride", "(2)"), ("pool_type", "avg"), ("pooling_convention", "full")], &[1, 2, 3], &[-0.16667, 0.13333, 0.06667, -0.03333, -0.1, -0.16667], &[-0.1, -0.1, -0.1, 0.0, 0.1, 0.1, 0.1, -0.03333, -0.03333, 0.03333, 0.06667, 0.0, -0.06667, -0.06667]),
    (&[1, 1, 7], &[("kernel", "(3)"), ("stride", "(1)"), ("pad", "(3)"), ("pool_type", "max")], &[1, 1, 11], &[-3.4028234663852886e38, -0.5, 0.2, 0.2, 0.5, 0.5, 0.5, 0.4, 0.4, 0.4, -3.4028234663852886e38], &[0.0, 0.2, 0.0, 0.1, 0.0, 0.0, 0.0]),
];

#[test]
fn forward_and_backward_match_mxnet() {
    for &(xs, attrs, ys, want_y, want_dx) in CASES {
        let op = build("Pooling", attrs);
        let x = seq32(xs, 7, 11, 0.5);
        let y = &run("Pooling", attrs, std::slice::from_ref(&x))[0];
        assert_eq!(y.shape(), ys, "{attrs:?}");
        close(&f64s(y), want_y, 1e-4);
        let og = seq32(ys, 3, 7, 0.3);
        let n: usize = xs.iter().product();
        let dx = array::<f32>(xs, &vec![0.0; n]);
        run_backward(
            &op,
            std::slice::from_ref(&x),
            &og,
            std::slice::from_ref(&dx),
            &[OpReq::Write],
        );
        close(&f64s(&dx), want_dx, 1e-4);
        let acc = array::<f32>(xs, &vec![1.0; n]);
        run_backward(&op, &[x], &og, std::slice::from_ref(&acc), &[OpReq::Add]);
        let plus: Vec<f64> = want_dx.iter().map(|v| v + 1.0).collect();
        close(&f64s(&acc), &plus, 1e-4);
    }
}

/// 2×2/stride-2 max pooling of `x` (planes of `h × w`) by its definition: each window's
/// first element not below the others (a NaN never wins), and the data gradient of `og`.
fn max_pool_2x2(x: &[f32], planes: usize, h: usize, w: usize, og: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let (oh, ow) = (h / 2, w / 2);
    let (mut y, mut dx) = (vec![0.0; planes * oh * ow], vec![0.0; x.len()]);
    for p in 0..planes {
        for r in 0..oh {
            for c in 0..ow {
                let at = |i: usize, j: usize| p * h * w + (2 * r + i) * w + 2 * c + j;
                let (mut m, mut best) = (f32::MIN, at(0, 0));
                for (i, j) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                    if x[at(i, j)] > m {
                        (m, best) = (x[at(i, j)], at(i, j));
                    }
                }
                let k = (p * oh + r) * ow + c;
                y[k] = m;
                dx[best] += og[k];
            }
        }
    }
    (y, dx)
}

#[test]
fn max_pool_2x2_matches_its_definition() {
    // The 2×2/stride-2 fast paths, forward and backward (through the index output), with
    // ties, NaNs, infinities and odd trailing rows and columns, in 2-D and 3-D spelling.
    let (planes, h, w) = (8 * 3, 9, 11);
    let n = planes * h * w;
    let mut v: Vec<f32> = seq(n, 7, 11, 0.5).iter().map(|&v| v as f32).collect();
    for i in (0..n).step_by(13) {
        v[i] = f32::NAN;
    }
    v[0..4].fill(f32::NEG_INFINITY);
    let ogv: Vec<f32> = seq(planes * 20, 3, 7, 0.3)
        .iter()
        .map(|&v| v as f32)
        .collect();
    let (want_y, want_dx) = max_pool_2x2(&v, planes, h, w, &ogv);
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    for (xs, ys, attrs) in [
        (
            &[8, 3, 9, 11][..],
            &[8, 3, 4, 5][..],
            [("kernel", "(2,2)"), ("stride", "(2,2)")],
        ),
        (
            &[8, 3, 1, 9, 11],
            &[8, 3, 1, 4, 5],
            [("kernel", "(1,2,2)"), ("stride", "(1,2,2)")],
        ),
    ] {
        let x = array::<f32>(xs, &v);
        let y = &run("Pooling", &attrs, std::slice::from_ref(&x))[0];
        assert_eq!(y.shape(), ys);
        assert_eq!(bits(&values::<f32>(y)), bits(&want_y), "{attrs:?}");
        let og = array::<f32>(ys, &ogv);
        for (req, base) in [(OpReq::Write, 0.0), (OpReq::Add, 1.0)] {
            let dx = array::<f32>(xs, &vec![base; n]);
            let op = build("Pooling", &attrs);
            run_backward(
                &op,
                std::slice::from_ref(&x),
                &og,
                std::slice::from_ref(&dx),
                &[req],
            );
            let want: Vec<f32> = want_dx.iter().map(|g| g + base).collect();
            assert_eq!(bits(&values::<f32>(&dx)), bits(&want), "{attrs:?} {req:?}");
        }
    }
}

#[test]
fn shapes_and_errors() {
    let op = build("Pooling", &[("kernel", "(3,3)"), ("stride", "(2,2)")]);
    let s = |v: &[usize]| Shape::from_slice(v);
    assert_eq!(
        op.infer_shape(&[s(&[2, 3, 7, 8])]).unwrap()[0].as_slice(),
        &[2, 3, 3, 3]
    );
    let full = build(
        "Pooling",
        &[
            ("kernel", "(3,3)"),
            ("stride", "(2,2)"),
            ("pooling_convention", "full"),
        ],
    );
    assert_eq!(
        full.infer_shape(&[s(&[2, 3, 7, 8])]).unwrap()[0].as_slice(),
        &[2, 3, 3, 4]
    );
    let g = build("Pooling", &[("global_pool", "True"), ("pool_type", "avg")]);
    assert_eq!(
        g.infer_shape(&[s(&[2, 3, 7])]).unwrap()[0].as_slice(),
        &[2, 3, 1]
    );
    assert_eq!(
        g.infer_shape(&[s(&[2, 3, 4, 5, 6])]).unwrap()[0].as_slice(),
        &[2, 3, 1, 1, 1]
    );
    let mut ins = vec![Some(s(&[1, 2, 6, 6]))];
    let mut outs = vec![None];
    op.infer_shape_partial(&mut ins, &mut outs).unwrap();
    assert_eq!(outs[0].as_deref(), Some(&[1, 2, 2, 2][..]));
    let e = error_text(op.infer_shape(&[s(&[1, 3, 2, 2])]));
    assert!(e.starts_with("Pooling:") && e.contains("exceeds"), "{e}");
    let e = error_text(op.infer_shape(&[s(&[1, 3, 7])]));
    assert!(e.starts_with("Pooling:") && e.contains("(1, 3, 7)"), "{e}");
    let x = seq32(&[1, 1, 4, 4], 1, 5, 0.0);
    for attrs in [
        vec![("pool_type", "max")],
        vec![("kernel", "(2,2)"), ("pool_type", "lp")],
        vec![("kernel", "(2,2)"), ("pool_type", "lp"), ("p_value", "4")],
        vec![("kernel", "(2,2)"), ("pool_type", "median")],
        vec![("kernel", "(2,2)"), ("pooling_convention", "same")],
        vec![("kernel", "(2,2)"), ("stride", "(1,1,1)")],
        vec![("kernel", "(2,2)"), ("layout", "NHWC")],
    ] {
        let e = try_run("Pooling", &attrs, std::slice::from_ref(&x)).err();
        let e = e
            .unwrap_or_else(|| panic!("{attrs:?} accepted"))
            .to_string();
        assert!(e.starts_with("Pooling:"), "{e}");
    }
    let i = array::<i32>(&[1, 1, 2, 2], &[1, 2, 3, 4]);
    let y = &run("Pooling", &[("kernel", "(2,2)")], &[i])[0];
    assert!(y.wait_to_read().is_err());
}

#[test]
fn numeric_gradients() {
    type Attrs<'a> = &'a [(&'a str, &'a str)];
    let cases: &[(&[usize], Attrs)] = &[
        (
            &[2, 2, 5, 5],
            &[
                ("kernel", "(3,3)"),
                ("stride", "(2,2)"),
                ("pad", "(1,1)"),
                ("pool_type", "avg"),
            ],
        ),
        (
            &[1, 2, 5, 6],
            &[
                ("kernel", "(3,2)"),
                ("stride", "(2,2)"),
                ("pad", "(1,1)"),
                ("pool_type", "avg"),
                ("count_include_pad", "False"),
                ("pooling_convention", "full"),
            ],
        ),
        (
            &[1, 2, 7],
            &[("kernel", "(3,)"), ("stride", "(2,)"), ("pool_type", "sum")],
        ),
        (
            &[1, 2, 4, 5],
            &[("kernel", "(2,2)"), ("pool_type", "lp"), ("p_value", "2")],
        ),
        (
            &[1, 2, 4, 5],
            &[("kernel", "(2,3)"), ("pool_type", "lp"), ("p_value", "3")],
        ),
        (
            &[1, 2, 3, 4, 3],
            &[("kernel", "(2,2,2)"), ("pool_type", "avg")],
        ),
        (
            &[2, 2, 4, 4],
            &[("global_pool", "True"), ("pool_type", "avg")],
        ),
    ];
    for &(xs, attrs) in cases {
        let op = build("Pooling", attrs);
        // Positive inputs keep Lp pooling smooth.
        let x = seq64(xs, 7, 11, -0.2);
        gradcheck(&op, &[x], &[0], 1e-6, 1e-6);
    }
    // Max pooling with distinct values away from ties.
    let n = 2 * 2 * 6 * 6;
    let v: Vec<f64> = (0..n).map(|i| ((i * 37) % n) as f64 * 0.01).collect();
    let x = array::<f64>(&[2, 2, 6, 6], &v);
    for attrs in [
        vec![("kernel", "(2,2)"), ("stride", "(2,2)")],
        vec![("kernel", "(3,3)"), ("stride", "(2,2)"), ("pad", "(1,1)")],
    ] {
        gradcheck(
            &build("Pooling", &attrs),
            std::slice::from_ref(&x),
            &[0],
            1e-6,
            1e-6,
        );
    }
}

/// Max pooling with its index left out (`Null`: an executor bound for inference) gives
/// the values the path computing the index gives, written or added, over windows cut
/// by padding, strided, full-convention, in 1-D and 2-D, with negative values only
/// (windows of padding alone are the lowest float).
#[test]
fn max_pool_without_index_matches_with_index() {
    use crate::kernels::cpu::testing::run_req;
    type Attrs<'a> = &'a [(&'a str, &'a str)];
    let cases: &[(&[usize], Attrs)] = &[
        (
            &[2, 3, 9, 11],
            &[("kernel", "(3,3)"), ("stride", "(2,2)"), ("pad", "(1,1)")],
        ),
        (
            &[1, 2, 8, 7],
            &[("kernel", "(3,2)"), ("stride", "(1,2)"), ("pad", "(2,1)")],
        ),
        (
            &[1, 2, 6, 6],
            &[
                ("kernel", "(2,3)"),
                ("stride", "(3,2)"),
                ("pooling_convention", "full"),
            ],
        ),
        (
            &[2, 2, 10],
            &[("kernel", "(4,)"), ("stride", "(3,)"), ("pad", "(3,)")],
        ),
        (
            &[1, 2, 5, 37],
            &[("kernel", "(2,2)"), ("stride", "(1,1)"), ("pad", "(1,1)")],
        ),
        (
            &[1, 1, 4, 40],
            &[("kernel", "(1,3)"), ("stride", "(1,3)"), ("pad", "(0,2)")],
        ),
    ];
    for &(xs, attrs) in cases {
        let attrs: Vec<(&str, &str)> = attrs
            .iter()
            .copied()
            .chain([("pool_type", "max")])
            .collect();
        let op = build("Pooling", &attrs);
        let x = seq32(xs, 7, 11, -1.5);
        let ys = op.infer_shape(&[Shape::from_slice(xs)]).unwrap();
        let filled = |s: &Shape, v: f32| array::<f32>(s, &vec![v; s.iter().product()]);
        let zeros = |s: &Shape| filled(s, 0.0);
        let ones = |s: &Shape| filled(s, 1.0);
        let (y, at) = (zeros(&ys[0]), zeros(&ys[1]));
        run_req(
            &op,
            std::slice::from_ref(&x),
            &[y.clone(), at.clone()],
            &[OpReq::Write, OpReq::Write],
        );
        let (y2, unused) = (zeros(&ys[0]), zeros(&ys[1]));
        run_req(
            &op,
            std::slice::from_ref(&x),
            &[y2.clone(), unused.clone()],
            &[OpReq::Write, OpReq::Null],
        );
        assert_eq!(values::<f32>(&y2), values::<f32>(&y), "{attrs:?}");
        assert!(
            values::<f32>(&unused).iter().all(|&v| v == 0.0),
            "index written"
        );
        let acc = ones(&ys[0]);
        run_req(
            &op,
            std::slice::from_ref(&x),
            &[acc.clone(), unused],
            &[OpReq::Add, OpReq::Null],
        );
        let plus: Vec<f32> = values::<f32>(&y).iter().map(|v| v + 1.0).collect();
        assert_eq!(values::<f32>(&acc), plus, "{attrs:?}");
    }
}
