//! Tests of the CPU `RNN` kernels: gradients against finite differences for every cell,
//! layer count and direction; cell steps against hand-computed values; shapes, the
//! parameter layout and the errors of bad input.

use crate::kernels::cpu::testing::{f64s, run_error};
use crate::op::testutil::{array, build, gradcheck, run};
use crate::op::OpRef;

fn values(n: usize, seed: usize, scale: f64) -> Vec<f64> {
    (0..n)
        .map(|i| (((i * 7 + seed * 13) % 17) as f64 / 17.0 - 0.5) * scale)
        .collect()
}

fn rnn(mode: &str, layers: usize, bidir: bool, states: bool) -> OpRef {
    build(
        "RNN",
        &[
            ("mode", mode),
            ("state_size", "3"),
            ("num_layers", &layers.to_string()),
            ("bidirectional", if bidir { "True" } else { "False" }),
            ("state_outputs", if states { "True" } else { "False" }),
        ],
    )
}

/// Inputs for a run of `op` over a (t=4, n=2, i=3) sequence, in float64.
fn inputs(op: &OpRef, mode: &str) -> Vec<crate::ndarray::NDArray> {
    let x = array::<f64>(&[4, 2, 3], &values(24, 1, 2.0));
    let mut slots = vec![Some(x.shape().into()), None, None];
    if mode == "lstm" {
        slots.push(None);
    }
    let mut outs = vec![None; op.num_outputs()];
    op.infer_shape_partial(&mut slots, &mut outs).unwrap();
    let mut v = vec![x];
    for (k, s) in slots[1..].iter().enumerate() {
        let s = s.clone().unwrap();
        let n: usize = s.iter().product();
        v.push(array::<f64>(&s, &values(n, k + 2, 1.2)));
    }
    v
}

#[test]
fn gradients_are_numeric_for_every_cell() {
    for mode in ["rnn_tanh", "rnn_relu", "lstm", "gru"] {
        for (layers, bidir) in [(1, false), (2, true)] {
            let op = rnn(mode, layers, bidir, true);
            let ins = inputs(&op, mode);
            let all: Vec<usize> = (0..ins.len()).collect();
            gradcheck(&op, &ins, &all, 1e-6, 1e-5);
        }
    }
}

#[test]
fn gradients_without_state_outputs() {
    let op = rnn("lstm", 2, false, false);
    let ins = inputs(&op, "lstm");
    gradcheck(&op, &ins, &[0, 1, 2, 3], 1e-6, 1e-5);
}

#[test]
fn one_tanh_step_is_computed_by_hand() {
    // t=1, n=1, i=1, h=1: out = tanh(wx·x + wh·h0 + bx + bh).
    let op = build(
        "RNN",
        &[
            ("mode", "rnn_tanh"),
            ("state_size", "1"),
            ("num_layers", "1"),
        ],
    );
    let x = array::<f64>(&[1, 1, 1], &[0.5]);
    let p = array::<f64>(&[4], &[0.3, -0.2, 0.1, 0.05]);
    let h0 = array::<f64>(&[1, 1, 1], &[0.7]);
    let out = run(
        "RNN",
        &[
            ("mode", "rnn_tanh"),
            ("state_size", "1"),
            ("num_layers", "1"),
        ],
        &[x, p, h0],
    );
    let want = (0.3f64 * 0.5 - 0.2 * 0.7 + 0.1 + 0.05).tanh();
    assert!((f64s(&out[0])[0] - want).abs() < 1e-12);
    assert_eq!(op.num_visible_outputs(), 1);
}

#[test]
fn the_parameter_size_is_mxnets() {
    // MXNet's GetRnnParamSize: (i + h + 2)·g·h·d for the first layer, (d·h + h + 2)·g·h·d
    // for the others.
    let cases = [("lstm", 4), ("gru", 3), ("rnn_tanh", 1)];
    for (mode, g) in cases {
        let op = build(
            "RNN",
            &[
                ("mode", mode),
                ("state_size", "5"),
                ("num_layers", "3"),
                ("bidirectional", "True"),
            ],
        );
        let mut slots = vec![Some([7usize, 2, 6][..].into()), None, None];
        if mode == "lstm" {
            slots.push(None);
        }
        let mut outs = vec![None; op.num_outputs()];
        op.infer_shape_partial(&mut slots, &mut outs).unwrap();
        let want = (6 + 5 + 2) * g * 5 * 2 + 2 * (10 + 5 + 2) * g * 5 * 2;
        assert_eq!(slots[1].as_ref().unwrap().as_slice(), [want]);
        assert_eq!(slots[2].as_ref().unwrap().as_slice(), [6, 2, 5]);
        assert_eq!(outs[0].as_ref().unwrap().as_slice(), [7, 2, 10]);
    }
}

#[test]
fn bad_input_is_an_error_naming_the_op() {
    let attrs = [("mode", "gru"), ("state_size", "2"), ("num_layers", "1")];
    let x = array::<f32>(&[2, 3], &[0.0; 6]);
    let p = array::<f32>(&[30], &[0.0; 30]);
    let h = array::<f32>(&[1, 3, 2], &[0.0; 6]);
    let e = run_error("RNN", &attrs, &[x, p.clone(), h.clone()]);
    assert!(e.contains("RNN") && e.contains("3-dimensional"), "{e}");
    let x = array::<f32>(&[2, 3, 1], &[0.0; 6]);
    let e = run_error(
        "RNN",
        &attrs,
        &[x.clone(), array::<f32>(&[7], &[0.0; 7]), h],
    );
    assert!(e.contains("parameters"), "{e}");
    let e = run_error("RNN", &attrs, &[x, p, array::<f32>(&[2, 3, 2], &[0.0; 12])]);
    assert!(e.contains("state"), "{e}");
    let e = crate::op::find("RNN")
        .unwrap()
        .build(&crate::op::testutil::attrs(&[
            ("mode", "lstm2"),
            ("state_size", "2"),
            ("num_layers", "1"),
        ]))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("mode"), "{e}");
}
