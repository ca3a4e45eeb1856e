use super::{build, close, error_text, f64s, run_backward, seq32, seq64};
use crate::op::testutil::{array, gradcheck, run, try_run};
use crate::op::OpReq;
use crate::shape::Shape;

type Case<'a> = (
    &'a [usize],
    &'a [usize],
    &'a [(&'a str, &'a str)],
    &'a [usize],
    &'a [f64],
    &'a [&'a [f64]],
);

/// (data shape, weight shape, attributes, output shape, output, input gradients) from
/// MXNet 1.9.1 with data `seq(7, 11, 0.5)`, weight `seq(5, 13, 0.6)`, bias
/// `seq(3, 7, 0.2)` and output gradient `seq(3, 7, 0.3)`.
#[rustfmt::skip]
const CASES: &[Case] = &[
    (&[1, 2, 3, 3], &[2, 3, 3, 3], &[("kernel", "(3,3,)"), ("num_filter", "3"), ("stride", "(2,2,)"), ("pad", "(1,1,)"), ("adj", "(1,1,)"), ("no_bias", "False")], &[1, 3, 6, 6], &[-0.07, -0.65, -0.24, -0.03, -0.52, -0.22, -0.47, 0.06, -0.18, -0.16, 0.22, -0.42, -0.03, 0.0, -0.31, 0.07, 0.07, -0.48, -0.15, -0.38, -0.19, 0.28, -0.34, -0.37, -0.1, -0.01, -0.38, 0.06, 0.0, -0.52, -0.13, -0.49, -0.05, 0.0, -0.52, 0.0, 0.37, 0.37, -0.01, 0.3, 0.27, -0.08, 0.52, 0.14, 0.12, 0.36, -0.17, -0.03, -0.22, 0.27, 0.06, -0.35, 0.23, 0.33, 0.09, 0.14, 0.13, -0.19, -0.05, 0.57, -0.15, 0.28, 0.13, -0.34, 0.3, 0.3, -0.05, 0.32, 0.07, -0.4, 0.3, 0.3, 0.55, -0.04, 0.35, 0.63, 0.15, 0.45, 0.08, 0.74, 0.42, 0.1, 0.87, 0.23, 0.5, 0.54, 0.3, 0.66, 0.65, 0.1, 0.33, 0.14, 0.45, 0.38, 0.24, 0.21, 0.45, 0.57, 0.25, 0.69, 0.6, 0.08, 0.42, 0.09, 0.58, 0.63, 0.08, 0.6], &[&[0.01, -0.43, -0.45, 0.27, 0.82, -0.17, 0.08, 0.2, 0.82, 0.01, 0.25, 0.46, -0.41, -0.35, -0.2, -0.05, -0.29, -0.35], &[0.0, 0.16, -0.38, -0.01, 0.03, 0.18, 0.03, 0.16, 0.03, 0.03, -0.38, 0.13, 0.02, 0.18, -0.51, -0.01, 0.03, 0.18, -0.15, 0.13, -0.06, 0.05, -0.51, 0.2, 0.02, 0.18, -0.51, 0.15, -0.04, 0.17, 0.01, -0.12, 0.07, -0.28, 0.11, -0.12, -0.08, 0.17, -0.11, 0.02, 0.07, 0.19, 0.01, -0.12, 0.07, 0.25, -0.11, 0.03, 0.03, 0.19, 0.03, 0.02, 0.07, 0.19], &[-0.3, 0.0, 0.3]]),
    (&[2, 4, 3, 2], &[4, 1, 2, 3], &[("kernel", "(2,3,)"), ("num_filter", "2"), ("num_group", "2"), ("dilate", "(2,1,)"), ("stride", "(1,2,)")], &[2, 2, 5, 5], &[0.22, 0.17, -0.52, -0.02, 0.08, 0.2, -0.1, -0.24, 0.04, 0.05, 0.16, 0.11, -0.13, -0.1, 0.25, 0.08, -0.22, -0.2, 0.2, 0.21, -0.04, -0.04, 0.21, -0.28, -0.03, 0.04, -0.12, -0.3, 0.2, -0.1, 0.28, -0.36, 0.0, -0.04, -0.04, -0.28, 0.2, 0.22, -0.2, -0.2, 0.05, -0.2, 0.29, -0.04, -0.04, 0.13, 0.12, -0.22, -0.16, 0.14, 0.2, -0.1, -0.24, 0.04, 0.05, -0.04, -0.04, 0.37, -0.12, 0.13, -0.2, -0.2, -0.1, 0.14, 0.31, -0.04, -0.04, 0.21, -0.28, -0.03, -0.16, 0.14, 0.18, -0.1, 0.06, 0.28, -0.36, 0.0, -0.04, -0.04, -0.36, 0.28, 0.08, -0.28, 0.02, -0.07, -0.16, 0.45, 0.1, 0.15, 0.13, 0.12, -0.22, -0.16, 0.14, 0.1, 0.0, -0.51, 0.16, 0.21], &[&[0.24, -0.18, -0.04, 0.24, -0.11, -0.04, 0.07, -0.05, 0.4, 0.07, 0.03, 0.4, 0.06, 0.38, -0.05, 0.06, -0.23, -0.05, 0.49, 0.07, 0.21, 0.49, -0.14, 0.21, -0.11, -0.11, -0.04, -0.11, 0.24, -0.04, 0.01, 0.03, -0.22, 0.01, -0.24, -0.22, -0.2, -0.23, 0.04, -0.2, 0.0, 0.04, -0.28, -0.14, -0.21, -0.28, -0.14, -0.21], &[0.19, -0.21, 0.16, -0.17, -0.22, 0.08, -0.04, -0.27, 0.55, -0.38, 0.02, -0.14, 0.26, -0.14, 0.02, -0.38, 0.55, -0.27, 0.17, 0.08, -0.22, -0.17, 0.16, -0.21]]),
    (&[1, 2, 4], &[2, 2, 3], &[("kernel", "(3,)"), ("num_filter", "2"), ("stride", "(2,)"), ("target_shape", "(8,)"), ("no_bias", "False")], &[1, 2, 8], &[-0.12, -0.51, -0.31, 0.07, -0.06, -0.78, -0.25, 0.0, 0.1, -0.31, -0.03, 0.39, 0.28, -0.34, 0.15, 0.4], &[&[0.21, -0.08, -0.08, -0.08, -0.18, 0.03, 0.05, 0.07], &[-0.08, 0.22, -0.13, 0.07, -0.13, -0.13, -0.04, -0.04, -0.05, -0.01, -0.05, 0.01], &[-0.3, 0.0]]),
];

#[test]
fn forward_and_backward_match_mxnet() {
    for &(xs, ws, attrs, ys, want_y, want_grads) in CASES {
        let op = build("Deconvolution", attrs);
        let nf = attrs.iter().find(|(k, _)| *k == "num_filter").unwrap().1;
        let f: usize = nf.parse().unwrap();
        let mut ins = vec![seq32(xs, 7, 11, 0.5), seq32(ws, 5, 13, 0.6)];
        if want_grads.len() == 3 {
            ins.push(seq32(&[f], 3, 7, 0.2));
        }
        let y = &run("Deconvolution", attrs, &ins)[0];
        assert_eq!(y.shape(), ys, "{attrs:?}");
        close(&f64s(y), want_y, 1e-5);
        let og = seq32(ys, 3, 7, 0.3);
        let zeros: Vec<_> = ins
            .iter()
            .map(|a| array::<f32>(a.shape(), &vec![0.0; a.shape().iter().product()]))
            .collect();
        run_backward(&op, &ins, &og, &zeros, &vec![OpReq::Write; ins.len()]);
        for (g, want) in zeros.iter().zip(want_grads) {
            close(&f64s(g), want, 1e-5);
        }
        let ones: Vec<_> = ins
            .iter()
            .map(|a| array::<f32>(a.shape(), &vec![1.0; a.shape().iter().product()]))
            .collect();
        run_backward(&op, &ins, &og, &ones, &vec![OpReq::Add; ins.len()]);
        for (g, want) in ones.iter().zip(want_grads) {
            let plus: Vec<f64> = want.iter().map(|v| v + 1.0).collect();
            close(&f64s(g), &plus, 1e-5);
        }
    }
}

#[test]
fn shapes_and_errors() {
    let s = |v: &[usize]| Shape::from_slice(v);
    let op = build(
        "Deconvolution",
        &[
            ("kernel", "(3,3)"),
            ("num_filter", "4"),
            ("stride", "(2,2)"),
            ("pad", "(1,1)"),
            ("adj", "(1,1)"),
        ],
    );
    assert_eq!(op.input_names().unwrap(), vec!["data", "weight"]);
    let mut ins = vec![Some(s(&[1, 2, 5, 5])), None];
    let mut outs = vec![None];
    op.infer_shape_partial(&mut ins, &mut outs).unwrap();
    assert_eq!(ins[1].as_deref(), Some(&[2, 4, 3, 3][..]));
    assert_eq!(outs[0].as_deref(), Some(&[1, 4, 10, 10][..]));
    let t = build(
        "Deconvolution",
        &[
            ("kernel", "(3,3)"),
            ("num_filter", "4"),
            ("stride", "(2,2)"),
            ("target_shape", "(10,10)"),
            ("no_bias", "0"),
        ],
    );
    let out = t
        .infer_shape(&[s(&[1, 2, 5, 5]), s(&[2, 4, 3, 3]), s(&[4])])
        .unwrap();
    assert_eq!(out[0].as_slice(), &[1, 4, 10, 10]);
    let g = build(
        "Deconvolution",
        &[("kernel", "(3,3)"), ("num_filter", "4"), ("num_group", "2")],
    );
    assert_eq!(
        g.infer_shape(&[s(&[1, 2, 5, 5]), s(&[2, 2, 3, 3])])
            .unwrap()[0]
            .as_slice(),
        &[1, 4, 7, 7]
    );
    let e = error_text(g.infer_shape(&[s(&[1, 2, 5, 5]), s(&[2, 4, 3, 3])]));
    assert!(
        e.starts_with("Deconvolution:") && e.contains("weight"),
        "{e}"
    );
    let x = seq32(&[1, 3, 5, 5], 7, 11, 0.5);
    for (attrs, w) in [
        (
            vec![
                ("kernel", "(3,3)"),
                ("num_filter", "4"),
                ("stride", "(2,2)"),
                ("adj", "(2,2)"),
            ],
            [3, 4, 3, 3],
        ),
        (
            vec![
                ("kernel", "(3,3)"),
                ("num_filter", "4"),
                ("stride", "(2,2)"),
                ("target_shape", "(20,20)"),
            ],
            [3, 4, 3, 3],
        ),
        (
            vec![("kernel", "(3,3)"), ("num_filter", "4"), ("num_group", "2")],
            [3, 2, 3, 3],
        ),
        (
            vec![("kernel", "(3,3)"), ("num_filter", "4"), ("pad", "(5,5)")],
            [3, 4, 3, 3],
        ),
        (vec![("kernel", "(3,)"), ("num_filter", "4")], [3, 4, 3, 3]),
    ] {
        let e = try_run("Deconvolution", &attrs, &[x.clone(), seq32(&w, 1, 3, 0.0)]).err();
        let e = e
            .unwrap_or_else(|| panic!("{attrs:?} accepted"))
            .to_string();
        assert!(e.starts_with("Deconvolution:"), "{e}");
    }
}

#[test]
fn numeric_gradients() {
    type Case<'a> = (&'a [usize], &'a [usize], &'a [(&'a str, &'a str)]);
    let cases: &[Case] = &[
        (
            &[2, 2, 3, 3],
            &[2, 3, 3, 3],
            &[
                ("kernel", "(3,3)"),
                ("num_filter", "3"),
                ("stride", "(2,2)"),
                ("pad", "(1,1)"),
                ("adj", "(1,1)"),
                ("no_bias", "False"),
            ],
        ),
        (
            &[1, 4, 3, 2],
            &[4, 1, 2, 3],
            &[
                ("kernel", "(2,3)"),
                ("num_filter", "2"),
                ("num_group", "2"),
                ("dilate", "(2,1)"),
                ("stride", "(1,2)"),
            ],
        ),
        (
            &[2, 2, 4],
            &[2, 2, 3],
            &[
                ("kernel", "(3,)"),
                ("num_filter", "2"),
                ("stride", "(2,)"),
                ("target_shape", "(8,)"),
                ("no_bias", "False"),
            ],
        ),
        (
            &[2, 3, 3, 3],
            &[3, 2, 1, 1],
            &[("kernel", "(1,1)"), ("num_filter", "2")],
        ),
        (
            &[1, 2, 2, 2, 2],
            &[2, 1, 2, 2, 2],
            &[
                ("kernel", "(2,2,2)"),
                ("num_filter", "1"),
                ("stride", "(2,1,2)"),
            ],
        ),
    ];
    for &(xs, ws, attrs) in cases {
        let op = build("Deconvolution", attrs);
        let mut ins = vec![seq64(xs, 7, 11, 0.5), seq64(ws, 5, 13, 0.6)];
        if op.input_names().unwrap().len() == 3 {
            ins.push(seq64(&[ws[1]], 3, 7, 0.2));
        }
        let check: Vec<usize> = (0..ins.len()).collect();
        gradcheck(&op, &ins, &check, 1e-6, 1e-6);
    }
}
