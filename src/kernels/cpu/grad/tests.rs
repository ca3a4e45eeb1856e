//! Numeric gradient checks of every backward family, output requests and partial shape
//! inference.

use super::testing::{backward_of, is_zero};
use crate::kernels::cpu::testing::{build, run_req};
use crate::ndarray::NDArray;
use crate::op::testutil::{array, f32a, f32s, gradcheck};
use crate::op::OpReq;
use crate::shape::Shape;

fn f64a(shape: &[usize], v: &[f64]) -> NDArray {
    array::<f64>(shape, v)
}

/// Distinct values in `[lo, hi]`, spread so no two are close.
fn spread(shape: &[usize], lo: f64, hi: f64) -> NDArray {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|i| lo + (hi - lo) * (((i * 7) % n) as f64 + 0.5) / n as f64)
        .collect();
    f64a(shape, &v)
}

fn check(name: &str, attrs: &[(&str, &str)], inputs: &[NDArray], wrt: &[usize]) {
    gradcheck(&build(name, attrs), inputs, wrt, 1e-6, 1e-5);
}

#[test]
fn unary_gradients_match_numeric() {
    let any = spread(&[2, 3], -0.9, 0.9);
    let pos = spread(&[2, 3], 0.2, 0.9);
    let big = spread(&[2, 3], 1.2, 3.0);
    for name in [
        "_copy", "negative", "abs", "square", "exp", "expm1", "sin", "cos", "tan", "arcsin",
        "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arctanh", "degrees", "radians",
        "sigmoid", "softsign", "relu", "cbrt",
    ] {
        check(name, &[], std::slice::from_ref(&any), &[0]);
    }
    for name in [
        "sqrt",
        "rsqrt",
        "rcbrt",
        "reciprocal",
        "log",
        "log1p",
        "log2",
        "log10",
    ] {
        check(name, &[], std::slice::from_ref(&pos), &[0]);
    }
    check("arccosh", &[], &[big], &[0]);
    check("clip", &[("a_min", "-0.5"), ("a_max", "0.5")], &[any], &[0]);
    for name in [
        "sign",
        "round",
        "floor",
        "ceil",
        "rint",
        "fix",
        "trunc",
        "logical_not",
        "BlockGrad",
    ] {
        assert!(is_zero(&build(name, &[])), "{name}");
    }
}

#[test]
fn unary_backward_ties_follow_mxnet() {
    let x = f32a(&[5], &[-1., 0., 0.5, 1., 2.]);
    let g = f32a(&[5], &[1.; 5]);
    let clip = build("clip", &[("a_min", "0"), ("a_max", "1")]);
    let b = backward_of(&clip);
    let out = f32a(&[5], &[0.; 5]);
    run_req(
        &b.op,
        &[g.clone(), x.clone()],
        std::slice::from_ref(&out),
        &[OpReq::Write],
    );
    assert_eq!(f32s(&out), vec![0., 1., 1., 1., 0.]);
    let relu = backward_of(&build("relu", &[]));
    assert_eq!(relu.outputs, vec![0]);
    let abs = backward_of(&build("abs", &[]));
    run_req(&abs.op, &[g, x], std::slice::from_ref(&out), &[OpReq::Add]);
    assert_eq!(f32s(&out), vec![-1., 1., 2., 2., 1.]);
}

#[test]
fn scalar_gradients_match_numeric() {
    let x = spread(&[2, 3], 0.3, 2.0);
    for name in [
        "_plus_scalar",
        "_minus_scalar",
        "_rminus_scalar",
        "_mul_scalar",
        "_div_scalar",
        "_rdiv_scalar",
        "_mod_scalar",
        "_rmod_scalar",
        "_power_scalar",
        "_rpower_scalar",
        "_maximum_scalar",
        "_minimum_scalar",
        "_hypot_scalar",
    ] {
        check(name, &[("scalar", "1.7")], std::slice::from_ref(&x), &[0]);
    }
    for name in ["_equal_scalar", "_greater_scalar", "_logical_and_scalar"] {
        assert!(is_zero(&build(name, &[("scalar", "1")])), "{name}");
    }
}

#[test]
fn binary_gradients_match_numeric() {
    let a = spread(&[2, 3], 0.5, 2.0);
    let b = f64a(&[2, 3], &[1.3, 0.7, 2.2, 1.9, 0.6, 1.1]);
    for name in [
        "elemwise_add",
        "elemwise_sub",
        "elemwise_mul",
        "elemwise_div",
        "_mod",
        "_power",
        "_maximum",
        "_minimum",
        "_hypot",
    ] {
        check(name, &[], &[a.clone(), b.clone()], &[0, 1]);
    }
    let row = f64a(&[3], &[1.3, 0.7, 2.2]);
    let col = f64a(&[2, 1], &[1.9, 0.6]);
    for name in [
        "broadcast_add",
        "broadcast_sub",
        "broadcast_mul",
        "broadcast_div",
        "broadcast_mod",
        "broadcast_power",
        "broadcast_maximum",
        "broadcast_minimum",
        "broadcast_hypot",
    ] {
        check(name, &[], &[a.clone(), row.clone()], &[0, 1]);
        check(name, &[], &[col.clone(), a.clone()], &[0, 1]);
        check(name, &[], &[col.clone(), row.clone()], &[0, 1]);
    }
    for name in [
        "_equal",
        "broadcast_greater",
        "_logical_or",
        "broadcast_lesser_equal",
    ] {
        assert!(is_zero(&build(name, &[])), "{name}");
    }
}

#[test]
fn broadcast_backward_sums_and_accumulates() {
    let op = build("broadcast_add", &[]);
    let g = backward_of(&op);
    let dy = f32a(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let a = f32a(&[2, 3], &[0.; 6]);
    let b = f32a(&[3], &[0.; 3]);
    let da = f32a(&[2, 3], &[1.; 6]);
    let db = f32a(&[3], &[10., 10., 10.]);
    run_req(
        &g.op,
        &[dy.clone(), a.clone(), b.clone()],
        &[da.clone(), db.clone()],
        &[OpReq::Add, OpReq::Add],
    );
    assert_eq!(f32s(&da), vec![2., 3., 4., 5., 6., 7.]);
    assert_eq!(f32s(&db), vec![15., 17., 19.]);
    run_req(
        &g.op,
        &[dy.clone(), a.clone(), b.clone()],
        &[da.clone(), db.clone()],
        &[OpReq::Null, OpReq::Write],
    );
    assert_eq!(f32s(&da), vec![2., 3., 4., 5., 6., 7.]);
    assert_eq!(f32s(&db), vec![5., 7., 9.]);
    let mul = backward_of(&build("broadcast_mul", &[]));
    let b = f32a(&[2, 1], &[2., 3.]);
    let db = f32a(&[2, 1], &[1., 1.]);
    let a = f32a(&[2, 3], &[1.; 6]);
    run_req(
        &mul.op,
        &[dy, a, b],
        &[da.clone(), db.clone()],
        &[OpReq::Write, OpReq::Add],
    );
    assert_eq!(f32s(&da), vec![2., 4., 6., 12., 15., 18.]);
    assert_eq!(f32s(&db), vec![7., 16.]);
}

#[test]
fn reduce_gradients_match_numeric() {
    let x = spread(&[2, 3, 2], 0.5, 2.0);
    for name in ["sum", "mean", "prod", "max", "min", "nansum", "nanprod"] {
        check(name, &[], std::slice::from_ref(&x), &[0]);
        check(name, &[("axis", "1")], std::slice::from_ref(&x), &[0]);
        check(
            name,
            &[("axis", "(0, 2)"), ("keepdims", "True")],
            std::slice::from_ref(&x),
            &[0],
        );
        check(
            name,
            &[("axis", "1"), ("exclude", "True")],
            std::slice::from_ref(&x),
            &[0],
        );
    }
    check("norm", &[], std::slice::from_ref(&x), &[0]);
    check(
        "norm",
        &[("ord", "1"), ("axis", "1")],
        std::slice::from_ref(&x),
        &[0],
    );
    check(
        "norm",
        &[("axis", "(0, 1)"), ("keepdims", "True")],
        &[x],
        &[0],
    );
    for name in ["argmax", "argmin", "argmax_channel"] {
        assert!(is_zero(&build(name, &[])), "{name}");
    }
}

#[test]
fn reduce_backward_ties_and_nan() {
    let x = f32a(&[3], &[1., 3., 3.]);
    let op = build("max", &[]);
    let g = backward_of(&op);
    let y = f32a(&[1], &[3.]);
    let dy = f32a(&[1], &[2.]);
    let dx = f32a(&[3], &[0.; 3]);
    run_req(
        &g.op,
        &[dy.clone(), x, y],
        std::slice::from_ref(&dx),
        &[OpReq::Write],
    );
    assert_eq!(f32s(&dx), vec![0., 2., 2.]);
    let x = f32a(&[3], &[f32::NAN, 2., 3.]);
    let nanprod = backward_of(&build("nanprod", &[]));
    let y = f32a(&[1], &[6.]);
    run_req(
        &nanprod.op,
        &[dy, x, y],
        std::slice::from_ref(&dx),
        &[OpReq::Write],
    );
    assert_eq!(f32s(&dx), vec![0., 6., 4.]);
}

#[test]
fn dot_gradients_match_numeric() {
    for (ta, tb) in [
        ("False", "False"),
        ("True", "False"),
        ("False", "True"),
        ("True", "True"),
    ] {
        let attrs = [("transpose_a", ta), ("transpose_b", tb)];
        let a = spread(if ta == "True" { &[3, 2] } else { &[2, 3] }, -1.0, 1.0);
        let b = spread(if tb == "True" { &[4, 3] } else { &[3, 4] }, -1.0, 1.0);
        check("dot", &attrs, &[a, b], &[0, 1]);
        let a = spread(
            if ta == "True" { &[2, 3, 2] } else { &[2, 2, 3] },
            -1.0,
            1.0,
        );
        let b = spread(
            if tb == "True" { &[2, 4, 3] } else { &[2, 3, 4] },
            -1.0,
            1.0,
        );
        check("batch_dot", &attrs, &[a, b], &[0, 1]);
    }
    check(
        "dot",
        &[],
        &[spread(&[3], -1., 1.), spread(&[3], 0., 2.)],
        &[0, 1],
    );
    check(
        "dot",
        &[],
        &[spread(&[3], -1., 1.), spread(&[3, 2], 0., 2.)],
        &[0, 1],
    );
    check(
        "dot",
        &[],
        &[spread(&[2, 2, 3], -1., 1.), spread(&[3, 2], 0., 2.)],
        &[0, 1],
    );
}

#[test]
fn transform_gradients_match_numeric() {
    let x = spread(&[2, 3, 4], -1.0, 1.0);
    let one = std::slice::from_ref(&x);
    check("transpose", &[], one, &[0]);
    check("transpose", &[("axes", "(1, 2, 0)")], one, &[0]);
    check("SwapAxis", &[("dim1", "0"), ("dim2", "2")], one, &[0]);
    check("reverse", &[("axis", "(0, 2)")], one, &[0]);
    check(
        "slice",
        &[("begin", "(0, 1)"), ("end", "(2, 3)")],
        one,
        &[0],
    );
    check(
        "slice",
        &[
            ("begin", "(None, None, 3)"),
            ("end", "(None, None, 0)"),
            ("step", "(1, -1, -2)"),
        ],
        one,
        &[0],
    );
    check(
        "slice_axis",
        &[("axis", "2"), ("begin", "1"), ("end", "3")],
        one,
        &[0],
    );
    check(
        "slice_like",
        &[("axes", "(1,)")],
        &[x.clone(), spread(&[1, 2], 0., 1.)],
        &[0],
    );
    check("Reshape", &[("shape", "(4, -1)")], one, &[0]);
    check("Flatten", &[], one, &[0]);
    check("expand_dims", &[("axis", "1")], one, &[0]);
    check("tile", &[("reps", "(2, 1, 2)")], one, &[0]);
    check("repeat", &[("repeats", "2"), ("axis", "1")], one, &[0]);
    check("repeat", &[("repeats", "2")], one, &[0]);
    let s = spread(&[2, 1, 3], -1.0, 1.0);
    check("squeeze", &[], std::slice::from_ref(&s), &[0]);
    check(
        "broadcast_to",
        &[("shape", "(2, 4, 3)")],
        std::slice::from_ref(&s),
        &[0],
    );
    check(
        "broadcast_axis",
        &[("axis", "1"), ("size", "3")],
        std::slice::from_ref(&s),
        &[0],
    );
    check(
        "broadcast_like",
        &[],
        &[s.clone(), spread(&[2, 2, 3], 0., 1.)],
        &[0],
    );
    check(
        "depth_to_space",
        &[("block_size", "2")],
        &[spread(&[1, 8, 2, 3], -1., 1.)],
        &[0],
    );
    let (a, b) = (spread(&[2, 1, 4], -1., 1.), spread(&[2, 2, 4], 0., 1.));
    check(
        "Concat",
        &[("num_args", "3"), ("dim", "1")],
        &[a.clone(), b, a.clone()],
        &[0, 1, 2],
    );
    check(
        "stack",
        &[("num_args", "2"), ("axis", "1")],
        &[a.clone(), a],
        &[0, 1],
    );
    check(
        "SliceChannel",
        &[("num_outputs", "2"), ("axis", "2")],
        one,
        &[0],
    );
    check(
        "split",
        &[
            ("num_outputs", "2"),
            ("axis", "0"),
            ("squeeze_axis", "True"),
        ],
        one,
        &[0],
    );
}

#[test]
fn gather_backward_accumulates() {
    let op = build("slice_axis", &[("axis", "0"), ("begin", "1"), ("end", "2")]);
    let g = backward_of(&op);
    let dy = f32a(&[1, 2], &[5., 6.]);
    let x = f32a(&[2, 2], &[0.; 4]);
    let dx = f32a(&[2, 2], &[1.; 4]);
    run_req(
        &g.op,
        &[dy.clone(), x.clone()],
        std::slice::from_ref(&dx),
        &[OpReq::Add],
    );
    assert_eq!(f32s(&dx), vec![1., 1., 6., 7.]);
    run_req(&g.op, &[dy, x], std::slice::from_ref(&dx), &[OpReq::Write]);
    assert_eq!(f32s(&dx), vec![0., 0., 5., 6.]);
    let t = backward_of(&build("transpose", &[]));
    let dy = f32a(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let x = f32a(&[3, 2], &[0.; 6]);
    let dx = f32a(&[3, 2], &[1.; 6]);
    run_req(&t.op, &[dy, x], std::slice::from_ref(&dx), &[OpReq::Add]);
    assert_eq!(f32s(&dx), vec![2., 5., 3., 6., 4., 7.]);
}

#[test]
fn indexing_gradients_match_numeric() {
    let x = spread(&[3, 4], -1.0, 1.0);
    let idx = f64a(&[2, 2], &[0., 2., 2., 7.]);
    check("take", &[], &[x.clone(), idx.clone()], &[0]);
    check(
        "take",
        &[("axis", "1"), ("mode", "wrap")],
        &[x.clone(), f64a(&[3], &[-1., 5., 0.])],
        &[0],
    );
    check(
        "pick",
        &[("axis", "1")],
        &[x.clone(), f64a(&[3], &[1., 3., 9.])],
        &[0],
    );
    check(
        "pick",
        &[("axis", "0"), ("keepdims", "True")],
        &[x.clone(), f64a(&[1, 4], &[0., 2., 1., 1.])],
        &[0],
    );
    let c = f64a(&[3, 4], &[1., 0., 0., 2., 0., 1., 1., 0., 0., 0., 1., 1.]);
    check(
        "where",
        &[],
        &[c, x.clone(), spread(&[3, 4], 0., 1.)],
        &[1, 2],
    );
    check(
        "where",
        &[],
        &[
            f64a(&[3], &[0., 1., 0.]),
            x.clone(),
            spread(&[3, 4], 0., 1.),
        ],
        &[1, 2],
    );
    check(
        "Cast",
        &[("dtype", "float64")],
        std::slice::from_ref(&x),
        &[0],
    );
    let nd = f64a(&[2, 3], &[0., 2., 0., 1., 3., 1.]);
    check("gather_nd", &[], &[x.clone(), nd.clone()], &[0]);
    check(
        "scatter_nd",
        &[("shape", "(3, 4)")],
        &[
            spread(&[3], 0., 1.),
            f64a(&[2, 3], &[0., 2., 1., 1., 3., 0.]),
        ],
        &[0],
    );
    check(
        "topk",
        &[("k", "2"), ("ret_typ", "value")],
        std::slice::from_ref(&x),
        &[0],
    );
    check(
        "topk",
        &[
            ("k", "2"),
            ("axis", "0"),
            ("ret_typ", "both"),
            ("dtype", "float64"),
        ],
        std::slice::from_ref(&x),
        &[0],
    );
    check(
        "topk",
        &[
            ("k", "3"),
            ("axis", "None"),
            ("ret_typ", "value"),
            ("is_ascend", "True"),
        ],
        std::slice::from_ref(&x),
        &[0],
    );
    check("sort", &[("axis", "1")], std::slice::from_ref(&x), &[0]);
    check("sort", &[("axis", "0"), ("is_ascend", "False")], &[x], &[0]);
    for (name, attrs) in [
        ("one_hot", &[("depth", "3")][..]),
        ("argsort", &[][..]),
        ("topk", &[][..]),
        ("_zeros", &[("shape", "(2,)")][..]),
        ("zeros_like", &[][..]),
        ("_random_uniform", &[("shape", "(2,)")][..]),
        ("_sample_normal", &[][..]),
    ] {
        assert!(is_zero(&build(name, attrs)), "{name}");
    }
}

#[test]
fn cast_backward_returns_the_input_dtype() {
    let op = build("Cast", &[("dtype", "float16")]);
    let g = backward_of(&op);
    let x = f32a(&[2], &[1., 2.]);
    let dy = array::<half::f16>(&[2], &[half::f16::from_f32(0.5), half::f16::from_f32(2.)]);
    let dx = &crate::imperative::invoke(&g.op, &[dy, x], None, None, true).unwrap()[0];
    assert_eq!(f32s(dx), vec![0.5, 2.]);
}

#[test]
fn float16_backward_runs() {
    let h = |v: &[f32]| {
        array::<half::f16>(
            &[v.len()],
            &v.iter()
                .map(|&x| half::f16::from_f32(x))
                .collect::<Vec<_>>(),
        )
    };
    let g = backward_of(&build("square", &[]));
    let dx = &crate::imperative::invoke(&g.op, &[h(&[1., 1.]), h(&[2., -3.])], None, None, true)
        .unwrap()[0];
    let v: Vec<f32> = crate::op::testutil::values::<half::f16>(dx)
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(v, vec![4., -6.]);
}

#[test]
fn partial_shapes_flow_between_inputs_and_outputs() {
    let s = |v: &[usize]| Some(Shape::from_slice(v));
    let sub = build("elemwise_sub", &[]);
    let (mut ins, mut outs) = ([s(&[4, 2]), None], [None]);
    sub.infer_shape_partial(&mut ins, &mut outs).unwrap();
    assert_eq!((ins[1].clone(), outs[0].clone()), (s(&[4, 2]), s(&[4, 2])));
    let relu = build("relu", &[]);
    let (mut ins, mut outs) = ([None], [s(&[3])]);
    relu.infer_shape_partial(&mut ins, &mut outs).unwrap();
    assert_eq!(ins[0], s(&[3]));
    let bad = build("_plus_scalar", &[("scalar", "1")]);
    assert!(bad
        .infer_shape_partial(&mut [s(&[2])], &mut [s(&[3])])
        .is_err());
    let concat = build("Concat", &[("num_args", "3"), ("dim", "1")]);
    let (mut ins, mut outs) = ([s(&[2, 3]), None, s(&[2, 1])], [s(&[2, 9])]);
    concat.infer_shape_partial(&mut ins, &mut outs).unwrap();
    assert_eq!(ins[1], s(&[2, 5]));
    let (mut ins, mut outs) = ([s(&[2, 3]), s(&[2, 4])], [None]);
    build("Concat", &[("num_args", "2")])
        .infer_shape_partial(&mut ins, &mut outs)
        .unwrap();
    assert_eq!(outs[0], s(&[2, 7]));
    // As MXNet's, `where` waits for its condition, then fills x, y and the output.
    let wh = build("where", &[]);
    let (mut ins, mut outs) = ([None, None, s(&[2, 2])], [None]);
    wh.infer_shape_partial(&mut ins, &mut outs).unwrap();
    assert_eq!((ins[1].clone(), outs[0].clone()), (None, None));
    let (mut ins, mut outs) = ([s(&[2, 2]), None, s(&[2, 2])], [None]);
    wh.infer_shape_partial(&mut ins, &mut outs).unwrap();
    assert_eq!((ins[1].clone(), outs[0].clone()), (s(&[2, 2]), s(&[2, 2])));
    let st = build("stack", &[("num_args", "2")]);
    let (mut ins, mut outs) = ([None, s(&[3])], [None]);
    st.infer_shape_partial(&mut ins, &mut outs).unwrap();
    assert_eq!((ins[0].clone(), outs[0].clone()), (s(&[3]), s(&[2, 3])));
}
