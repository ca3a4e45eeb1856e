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

/// Runs one forward and one backward step of `mode` in `F` over `n` rows of `h` units,
/// with a NaN in the previous cell state, and returns every output of both.
fn one_step<F: super::RnnFloat>(
    mode: crate::op::nn::rnn::RnnMode,
    n: usize,
    h: usize,
    clip: Option<(f64, f64, bool)>,
) -> Vec<Vec<f64>> {
    use super::cell::{self, Clip, StepBwd, StepFwd};
    let gh = mode.gates() * h;
    let conv = |v: Vec<f64>| -> Vec<F> { v.into_iter().map(|x| F::from(x).unwrap()).collect() };
    let back = |v: &[F]| -> Vec<f64> { v.iter().map(|x| x.to_f64().unwrap()).collect() };
    let clip = clip.map(|(lo, hi, nan_to_lo)| Clip {
        lo: F::from(lo).unwrap(),
        hi: F::from(hi).unwrap(),
        nan_to_lo,
    });
    let mut gates = conv(values(n * gh, 1, 5.0));
    let hidden = conv(values(n * gh, 2, 5.0));
    let bias_h = conv(values(gh, 3, 1.0));
    let h_prev = conv(values(n * h, 4, 2.0));
    let mut c_prev = conv(values(n * h, 5, 3.0));
    c_prev[h + 2] = F::nan();
    let (mut extra, mut hs) = (vec![F::zero(); n * h], vec![F::zero(); n * h]);
    let lstm_or_gru = matches!(
        mode,
        crate::op::nn::rnn::RnnMode::Lstm | crate::op::nn::rnn::RnnMode::Gru
    );
    let step = StepFwd {
        gates: &mut gates,
        hidden: &hidden,
        bias_h: &bias_h,
        h_prev: &h_prev,
        c_prev: &c_prev,
        extra: if lstm_or_gru { &mut extra } else { &mut [] },
        h: &mut hs,
    };
    cell::forward(mode, n, h, step, clip);
    let dh = conv(values(n * h, 6, 2.0));
    let mut dc = conv(values(n * h, 7, 2.0));
    let (mut dgx, mut dgh, mut direct) = (
        vec![F::zero(); n * gh],
        vec![F::zero(); n * gh],
        vec![F::zero(); n * h],
    );
    let gru = mode == crate::op::nn::rnn::RnnMode::Gru;
    let step = StepBwd {
        gates: &gates,
        extra: if lstm_or_gru { &extra } else { &[] },
        h_prev: &h_prev,
        c_prev: &c_prev,
        dh: &dh,
        dc: &mut dc,
        dgx: &mut dgx,
        dgh: if gru { &mut dgh } else { &mut [] },
        dh_direct: if gru { &mut direct } else { &mut [] },
    };
    cell::backward(mode, n, h, step, clip);
    [&gates, &extra, &hs, &dc, &dgx, &dgh, &direct]
        .iter()
        .map(|v| back(v))
        .collect()
}

#[test]
fn float32_steps_agree_with_float64() {
    use crate::op::nn::rnn::RnnMode;
    // 21 units: two blocks of eight lanes and a tail of five computed one by one.
    let (n, h) = (3, 21);
    for mode in [
        RnnMode::RnnTanh,
        RnnMode::RnnRelu,
        RnnMode::Lstm,
        RnnMode::Gru,
    ] {
        for clip in [None, Some((-0.4, 0.5, true)), Some((-0.4, 0.5, false))] {
            let wide = one_step::<f32>(mode, n, h, clip);
            let exact = one_step::<f64>(mode, n, h, clip);
            for (k, (a, b)) in wide.iter().zip(&exact).enumerate() {
                for (j, (x, y)) in a.iter().zip(b).enumerate() {
                    let same =
                        (x.is_nan() && y.is_nan()) || (x - y).abs() <= 2e-6 * (1.0 + y.abs());
                    assert!(same, "{mode:?} {clip:?}: output {k}[{j}]: {x} against {y}");
                }
            }
        }
    }
}
