use super::{build, close, error_text, f64s, run_backward, run_error, seq, seq32, seq64};
use crate::kernels::cpu::testing::{run_in_node, run_with};
use crate::op::memo::KernelMemo;
use crate::op::testutil::{array, f32a, gradcheck, run, try_run};
use crate::op::OpReq;
use crate::shape::Shape;

/// Direct convolution of NC(D)(H)W data, by the definition, in f64.
#[allow(clippy::too_many_arguments)]
fn direct(
    x: &[f64],
    xs: &[usize],
    w: &[f64],
    k: &[usize],
    s: &[usize],
    p: &[usize],
    d: &[usize],
    groups: usize,
    f: usize,
) -> (Vec<f64>, Vec<usize>) {
    let nd = k.len();
    let pad3 = |v: &[usize], fill| {
        let mut o = vec![fill; 3 - nd];
        o.extend_from_slice(v);
        o
    };
    let (k, s, p, d) = (pad3(k, 1), pad3(s, 1), pad3(p, 0), pad3(d, 1));
    let inp = pad3(&xs[2..], 1);
    let out: Vec<usize> = (0..3)
        .map(|i| (inp[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) / s[i] + 1)
        .collect();
    let (n, c) = (xs[0], xs[1]);
    let (cg, fg) = (c / groups, f / groups);
    let mut y = vec![0.0; n * f * out.iter().product::<usize>()];
    let mut idx = 0;
    for b in 0..n {
        for fo in 0..f {
            let g = fo / fg;
            for o0 in 0..out[0] {
                for o1 in 0..out[1] {
                    for o2 in 0..out[2] {
                        let mut acc = 0.0;
                        for ci in 0..cg {
                            for a0 in 0..k[0] {
                                for a1 in 0..k[1] {
                                    for a2 in 0..k[2] {
                                        let z = [
                                            (o0 * s[0] + a0 * d[0]) as isize - p[0] as isize,
                                            (o1 * s[1] + a1 * d[1]) as isize - p[1] as isize,
                                            (o2 * s[2] + a2 * d[2]) as isize - p[2] as isize,
                                        ];
                                        if (0..3).any(|i| z[i] < 0 || z[i] >= inp[i] as isize) {
                                            continue;
                                        }
                                        let cc = g * cg + ci;
                                        let xi = (((b * c + cc) * inp[0] + z[0] as usize) * inp[1]
                                            + z[1] as usize)
                                            * inp[2]
                                            + z[2] as usize;
                                        let wi =
                                            (((fo * cg + ci) * k[0] + a0) * k[1] + a1) * k[2] + a2;
                                        acc += x[xi] * w[wi];
                                    }
                                }
                            }
                        }
                        y[idx] = acc;
                        idx += 1;
                    }
                }
            }
        }
    }
    let mut shape = vec![n, f];
    shape.extend_from_slice(&out[3 - nd..]);
    (y, shape)
}

fn t(v: &[usize]) -> String {
    format!(
        "({})",
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",")
    )
}

#[test]
fn forward_matches_mxnet() {
    let x = seq32(&[1, 2, 4, 4], 7, 11, 0.5);
    let w = seq32(&[3, 2, 3, 3], 5, 13, 0.6);
    let b = array::<f32>(&[3], &[0.1, -0.2, 0.3]);
    let attrs = [("kernel", "(3,3)"), ("num_filter", "3"), ("pad", "(1,1)")];
    let o = &run("Convolution", &attrs, &[x, w, b])[0];
    assert_eq!(o.shape(), &[1, 3, 4, 4]);
    let want = [
        0.36, -0.3, 0.78, 0.11, -0.52, 0.79, 1.03, -0.38, 0.36, -0.12, -0.1, -0.2, -0.33, 0.81,
        0.27, -0.39, -0.31, -0.03, 0.46, -0.71, -0.43, -0.26, 0.32, -0.6, -0.26, 0.3, -0.66, -0.35,
        -0.17, -0.08, -0.19, -0.4, -0.18, 1.04, 0.94, -0.21, 0.46, 0.14, 0.15, -0.02, -0.08, 1.39,
        -0.03, 0.17, 0.27, 0.35, 0.28, 0.13,
    ];
    close(&f64s(o), &want, 1e-5);

    let x = seq32(&[2, 4, 5, 6], 7, 11, 0.5);
    let w = seq32(&[4, 2, 3, 2], 5, 13, 0.6);
    let attrs = [
        ("kernel", "(3,2)"),
        ("num_filter", "4"),
        ("stride", "(2,1)"),
        ("pad", "(1,0)"),
        ("dilate", "(1,2)"),
        ("num_group", "2"),
        ("no_bias", "True"),
    ];
    let o = &run("Convolution", &attrs, &[x, w])[0];
    assert_eq!(o.shape(), &[2, 4, 3, 4]);
    let v = f64s(o);
    let want = [
        0.22, -0.16, -0.32, 0.62, -0.55, -0.25, 0.93, -0.53, 0.0, 0.88, -0.55, 0.11,
    ];
    close(&v[..12], &want, 1e-5);
    close(&[v.iter().sum()], &[5.07], 1e-5);

    let x = seq32(&[2, 3, 7], 7, 11, 0.5);
    let w = seq32(&[2, 3, 3], 5, 13, 0.6);
    let b = array::<f32>(&[2], &[0.5, -0.5]);
    let attrs = [
        ("kernel", "(3,)"),
        ("num_filter", "2"),
        ("stride", "(2,)"),
        ("pad", "(1,)"),
    ];
    let o = &run("Convolution", &attrs, &[x, w, b])[0];
    assert_eq!(o.shape(), &[2, 2, 4]);
    let want = [
        0.49, 0.42, 0.3, 0.71, -0.96, -0.8, 0.02, -0.42, 0.04, 0.92, 0.36, 0.57, -0.51, 0.0, -0.39,
        -0.71,
    ];
    close(&f64s(o), &want, 1e-5);
}

#[test]
fn forward_matches_direct_loops() {
    // (data shape, kernel, stride, pad, dilate, groups, filters)
    type Case<'a> = (
        &'a [usize],
        &'a [usize],
        &'a [usize],
        &'a [usize],
        &'a [usize],
        usize,
        usize,
    );
    let cases: &[Case] = &[
        (&[3, 2, 9], &[4], &[3], &[2], &[2], 2, 4),
        (&[2, 3, 6, 7], &[1, 1], &[1, 1], &[0, 0], &[1, 1], 1, 5),
        (&[1, 6, 7, 5], &[3, 3], &[2, 2], &[2, 1], &[1, 1], 3, 3),
        (&[4, 2, 8, 8], &[5, 5], &[1, 1], &[0, 0], &[1, 1], 1, 6),
        (
            &[2, 4, 5, 6, 4],
            &[2, 3, 2],
            &[1, 2, 1],
            &[1, 0, 1],
            &[2, 1, 1],
            2,
            2,
        ),
        (&[65, 3, 10, 10], &[3, 3], &[1, 1], &[1, 1], &[1, 1], 1, 8),
        // Column matrices of several forward tiles of output lines: shared between
        // threads (four tiles of one sample, grouped; two tiles of three 1×1 samples)
        // or taken in turn (two tiles of one sample), the last tile shorter, padded and
        // strided windows cut at tile edges.
        (&[1, 64, 30, 30], &[3, 3], &[1, 1], &[1, 1], &[1, 1], 2, 6),
        (&[3, 600, 20, 20], &[1, 1], &[1, 1], &[0, 0], &[1, 1], 1, 4),
        (&[1, 64, 20, 20], &[3, 3], &[1, 1], &[1, 1], &[1, 1], 1, 3),
        (&[2, 32, 33, 33], &[5, 5], &[2, 2], &[2, 2], &[1, 1], 1, 5),
        // One input channel per group, computed directly: depthwise, with a channel
        // multiplier of 2, strided, dilated and padded unevenly, in 1-D and large
        // enough to be shared between threads.
        (&[2, 6, 9, 8], &[3, 3], &[1, 1], &[1, 1], &[1, 1], 6, 6),
        (&[1, 4, 11, 10], &[3, 3], &[2, 2], &[1, 1], &[1, 1], 4, 8),
        (&[1, 3, 12, 9], &[3, 3], &[1, 2], &[2, 0], &[2, 1], 3, 3),
        (&[2, 4, 15], &[5], &[2], &[1], &[1], 4, 4),
        (&[1, 2, 10, 9], &[3, 2], &[1, 1], &[2, 0], &[2, 3], 2, 4),
        (&[2, 3, 11], &[3], &[1], &[2], &[1], 3, 3),
        (&[2, 32, 40, 40], &[3, 3], &[1, 1], &[1, 1], &[1, 1], 32, 32),
        (&[1, 8, 75, 75], &[3, 3], &[2, 2], &[1, 1], &[1, 1], 8, 8),
        (&[1, 3, 20, 43], &[3, 3], &[3, 3], &[1, 2], &[2, 1], 3, 3),
        // 3×3 windows at stride 1 by Winograd's F(2×2, 3×3): odd output sizes (a last
        // tile cut short), no padding and a padding of 2, and blocks of tile rows shared
        // between threads.
        (&[2, 8, 13, 11], &[3, 3], &[1, 1], &[1, 1], &[1, 1], 1, 9),
        (&[1, 16, 18, 17], &[3, 3], &[1, 1], &[0, 0], &[1, 1], 1, 8),
        (&[3, 9, 12, 12], &[3, 3], &[1, 1], &[2, 2], &[1, 1], 1, 10),
        (&[1, 64, 40, 40], &[3, 3], &[1, 1], &[1, 1], &[1, 1], 1, 16),
        (&[5, 24, 9, 30], &[3, 3], &[1, 1], &[1, 0], &[1, 1], 1, 12),
    ];
    for &(xs, k, s, p, d, g, f) in cases {
        let cg = xs[1] / g;
        let mut ws = vec![f, cg];
        ws.extend_from_slice(k);
        let nx: usize = xs.iter().product();
        let nw: usize = ws.iter().product();
        let (xv, wv) = (seq(nx, 7, 11, 0.5), seq(nw, 5, 13, 0.6));
        let bv = seq(f, 3, 7, 0.2);
        let (want, shape) = direct(&xv, xs, &wv, k, s, p, d, g, f);
        let attrs = [
            ("kernel", t(k)),
            ("stride", t(s)),
            ("pad", t(p)),
            ("dilate", t(d)),
            ("num_group", g.to_string()),
            ("num_filter", f.to_string()),
        ];
        let attrs: Vec<(&str, &str)> = attrs.iter().map(|(a, b)| (*a, b.as_str())).collect();
        let o = &run(
            "Convolution",
            &attrs,
            &[array(xs, &xv), array(&ws, &wv), array(&[f], &bv)],
        )[0];
        assert_eq!(o.shape(), shape.as_slice(), "{xs:?} {k:?}");
        let per = want.len() / xs[0] / f;
        let with_bias: Vec<f64> = want
            .iter()
            .enumerate()
            .map(|(i, v)| v + bv[(i / per) % f])
            .collect();
        close(&f64s(o), &with_bias, 1e-12);
        if g == xs[1] {
            // Depthwise: float32 takes vectors of another width through the same code.
            let f32s = |v: &[f64]| v.iter().map(|&a| a as f32).collect::<Vec<f32>>();
            let o = &run(
                "Convolution",
                &attrs,
                &[
                    f32a(xs, &f32s(&xv)),
                    f32a(&ws, &f32s(&wv)),
                    f32a(&[f], &f32s(&bv)),
                ],
            )[0];
            close(&f64s(o), &with_bias, 1e-5);
        }
    }
}

/// Winograd's F(2×2, 3×3) in each of its ways of sharing the work, whatever the machine:
/// on one thread; in blocks of several whole samples (`[8, 16, 16, 16]` on 1 and 2
/// threads, `[9, 8, 12, 12]` on 1 and 2, the last block short) or of one sample each; in
/// blocks of some tile rows of a sample (`[1, 64, 40, 40]` on 1 and 2); and as one block
/// whose transforms and products are each shared out (`[2, 8, 13, 11]`, `[9, 8, 12, 12]`
/// on 4 threads, `[1, 64, 40, 40]` on 4; the weight gradient then goes by im2col). The
/// output and both gradients are written, and added to.
#[test]
fn winograd_forward_and_gradients_on_one_thread_in_blocks_and_in_phases() {
    let cases: [(&[usize], usize, usize); 4] = [
        (&[2, 8, 13, 11], 0, 9),
        (&[8, 16, 16, 16], 2, 16),
        (&[9, 8, 12, 12], 1, 8),
        (&[1, 64, 40, 40], 1, 16),
    ];
    for threads in [1, 2, 4] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        for &(xs, pad, f) in &cases {
            let ws = [f, xs[1], 3, 3];
            let (nx, nw) = (xs.iter().product(), ws.iter().product());
            let (xv, wv, bv) = (seq(nx, 7, 11, 0.5), seq(nw, 5, 13, 0.6), seq(f, 3, 7, 0.2));
            let (want, shape) = direct(&xv, xs, &wv, &[3, 3], &[1, 1], &[pad, pad], &[1, 1], 1, f);
            let op = build(
                "Convolution",
                &[
                    ("kernel", "(3,3)"),
                    ("pad", &format!("({pad},{pad})")),
                    ("num_filter", &f.to_string()),
                ],
            );
            let per = want.len() / xs[0] / f;
            for (req, base) in [(OpReq::Write, 0.0), (OpReq::Add, 1.5)] {
                let out = array(&shape, &vec![base; want.len()]);
                let ins = [array(xs, &xv), array(&ws, &wv), array(&[f], &bv)];
                pool.install(|| run_with(&op, &ins, std::slice::from_ref(&out), &[req], false));
                let expect: Vec<f64> = want
                    .iter()
                    .enumerate()
                    .map(|(i, v)| v + bv[(i / per) % f] + base)
                    .collect();
                close(&f64s(&out), &expect, 1e-12);
                // The data gradient goes the same way, through the turned weights.
                let og = array(&shape, &seq(want.len(), 3, 7, 0.3));
                let dx_want = data_gradient(&f64s(&og), &shape, &wv, xs[1], pad);
                let outs = [
                    array(xs, &vec![base; nx]),
                    array(&ws, &vec![0.0; nw]),
                    array(&[f], &vec![0.0; f]),
                ];
                let reqs = [req, OpReq::Null, OpReq::Null];
                pool.install(|| run_backward(&op, &ins, &og, &outs, &reqs));
                let expect: Vec<f64> = dx_want.iter().map(|v| v + base).collect();
                close(&f64s(&outs[0]), &expect, 1e-12);
                // And the weight gradient, from the transformed data and output gradient.
                let dw_want = weight_gradient(&xv, xs, &f64s(&og), &shape, pad);
                let outs = [
                    array(xs, &vec![0.0; nx]),
                    array(&ws, &vec![base; nw]),
                    array(&[f], &vec![0.0; f]),
                ];
                let reqs = [OpReq::Null, req, OpReq::Null];
                pool.install(|| run_backward(&op, &ins, &og, &outs, &reqs));
                let expect: Vec<f64> = dw_want.iter().map(|v| v + base).collect();
                close(&f64s(&outs[1]), &expect, 1e-12);
            }
        }
    }
}

/// Outside training, an executor node keeps the transformed weights of a Winograd
/// convolution in its memo: a run under the same content stamp uses them (even over bytes
/// changed behind the engine's back, which shows that they were kept), a write counted on
/// the weights makes the next run transform them again, and a training run keeps none.
#[test]
fn winograd_keeps_transformed_weights_while_their_stamp_holds() {
    let (xs, ws) = ([1, 16, 16, 16], [16, 16, 3, 3]);
    let (nx, nw): (usize, usize) = (xs.iter().product(), ws.iter().product());
    let (xv, mut wv) = (seq(nx, 7, 11, 0.5), seq(nw, 5, 13, 0.6));
    let op = build(
        "Convolution",
        &[
            ("kernel", "(3,3)"),
            ("pad", "(1,1)"),
            ("num_filter", "16"),
            ("no_bias", "True"),
        ],
    );
    let (x, w) = (array(&xs, &xv), array(&ws, &wv));
    x.wait_to_read().unwrap();
    w.wait_to_read().unwrap();
    let memo = KernelMemo::default();
    let conv = |is_train: bool| {
        let out = array(&[1, 16, 16, 16], &vec![0.0; nx]);
        out.wait_to_write().unwrap();
        let inputs = [x.clone(), w.clone()];
        run_in_node(
            &op,
            &inputs,
            std::slice::from_ref(&out),
            &[OpReq::Write],
            is_train,
            &memo,
        );
        f64s(&out)
    };
    let by_definition =
        |wv: &[f64]| direct(&xv, &xs, wv, &[3, 3], &[1, 1], &[1, 1], &[1, 1], 1, 16).0;
    let first = conv(false);
    close(&first, &by_definition(&wv), 1e-12);
    assert!(memo.is_set());
    w.blob().slice_mut::<f64>()[0] += 1.0;
    assert_eq!(conv(false), first);
    wv[0] += 1.0;
    w.var().note_write();
    let second = conv(false);
    assert_ne!(second, first);
    close(&second, &by_definition(&wv), 1e-12);
    assert_eq!(conv(false), second);
    memo.clear();
    close(&conv(true), &by_definition(&wv), 1e-12);
    assert!(!memo.is_set());
}

/// The weight gradient of a 2-D 3×3 convolution at stride 1 padded by `pad`, by the
/// definition: `dw[f][c][a][b] = Σ dy[n][f][i][j] · x[n][c][i + a − pad][j + b − pad]`.
fn weight_gradient(x: &[f64], xs: &[usize], dy: &[f64], ys: &[usize], pad: usize) -> Vec<f64> {
    let (n, c, h, wd) = (xs[0], xs[1], xs[2], xs[3]);
    let (f, oh, ow) = (ys[1], ys[2], ys[3]);
    let mut dw = vec![0.0; f * c * 9];
    for fo in 0..f {
        for ci in 0..c {
            for a1 in 0..3 {
                for a2 in 0..3 {
                    let mut acc = 0.0;
                    for b in 0..n {
                        for i in 0..oh {
                            for j in 0..ow {
                                let (r, q) = (i + a1, j + a2);
                                if r < pad || q < pad || r - pad >= h || q - pad >= wd {
                                    continue;
                                }
                                let xv = x[((b * c + ci) * h + r - pad) * wd + q - pad];
                                acc += dy[((b * f + fo) * oh + i) * ow + j] * xv;
                            }
                        }
                    }
                    dw[((fo * c + ci) * 3 + a1) * 3 + a2] = acc;
                }
            }
        }
    }
    dw
}

/// The data gradient of a 2-D 3×3 convolution at stride 1 padded by `pad`, by the
/// definition: `dx[n][c][i][j] = Σ dy[n][f][i + pad − a][j + pad − b] · w[f][c][a][b]`.
fn data_gradient(dy: &[f64], ys: &[usize], w: &[f64], channels: usize, pad: usize) -> Vec<f64> {
    let (n, f, oh, ow) = (ys[0], ys[1], ys[2], ys[3]);
    let (h, wd) = (oh + 2 - 2 * pad, ow + 2 - 2 * pad);
    let mut dx = vec![0.0; n * channels * h * wd];
    for b in 0..n {
        for c in 0..channels {
            for i in 0..h {
                for j in 0..wd {
                    let mut acc = 0.0;
                    for fo in 0..f {
                        for a1 in 0..3 {
                            for a2 in 0..3 {
                                let (o1, o2) = (i + pad, j + pad);
                                if o1 < a1 || o2 < a2 || o1 - a1 >= oh || o2 - a2 >= ow {
                                    continue;
                                }
                                let g = dy[((b * f + fo) * oh + o1 - a1) * ow + o2 - a2];
                                acc += g * w[((fo * channels + c) * 3 + a1) * 3 + a2];
                            }
                        }
                    }
                    dx[((b * channels + c) * h + i) * wd + j] = acc;
                }
            }
        }
    }
    dx
}

#[test]
fn shapes_and_partial_inference() {
    let op = build(
        "Convolution",
        &[("kernel", "(3,3)"), ("num_filter", "4"), ("num_group", "2")],
    );
    assert_eq!(
        op.input_names().unwrap(),
        vec!["data".to_string(), "weight".into(), "bias".into()]
    );
    let mut ins = vec![Some(Shape::from_slice(&[2, 6, 7, 7])), None, None];
    let mut outs = vec![None];
    op.infer_shape_partial(&mut ins, &mut outs).unwrap();
    assert_eq!(ins[1].as_deref(), Some(&[4, 3, 3, 3][..]));
    assert_eq!(ins[2].as_deref(), Some(&[4][..]));
    assert_eq!(outs[0].as_deref(), Some(&[2, 4, 5, 5][..]));
    // Nothing known: nothing inferred, no error.
    let mut ins = vec![None, Some(Shape::from_slice(&[4, 3, 3, 3])), None];
    let mut outs = vec![None];
    op.infer_shape_partial(&mut ins, &mut outs).unwrap();
    assert!(ins[0].is_none() && outs[0].is_none());
    // Backwards from the output with unit strides.
    let mut outs = vec![Some(Shape::from_slice(&[2, 4, 5, 5]))];
    op.infer_shape_partial(&mut ins, &mut outs).unwrap();
    assert_eq!(ins[0].as_deref(), Some(&[2, 6, 7, 7][..]));
    // A given weight that disagrees.
    let mut ins = vec![
        Some(Shape::from_slice(&[2, 6, 7, 7])),
        Some(Shape::from_slice(&[4, 6, 3, 3])),
        None,
    ];
    let e = error_text(op.infer_shape_partial(&mut ins, &mut [None]));
    assert!(e.contains("Convolution") && e.contains("weight"), "{e}");
    let nb = build(
        "Convolution",
        &[("kernel", "(3,)"), ("num_filter", "2"), ("no_bias", "1")],
    );
    assert_eq!(nb.input_names().unwrap().len(), 2);
    assert_eq!(
        nb.infer_shape(&[Shape::from_slice(&[1, 3, 7]), Shape::from_slice(&[2, 3, 3])])
            .unwrap()[0]
            .as_slice(),
        &[1, 2, 5]
    );
}

#[test]
fn bad_inputs_are_errors() {
    let x = seq32(&[1, 3, 7, 7], 7, 11, 0.5);
    let w = seq32(&[4, 3, 9, 9], 5, 13, 0.6);
    let b = seq32(&[4], 1, 3, 0.0);
    let e = run_error(
        "Convolution",
        &[("kernel", "(9,9)"), ("num_filter", "4")],
        &[x.clone(), w, b.clone()],
    );
    assert!(
        e.starts_with("Convolution:") && e.contains("exceeds"),
        "{e}"
    );
    let w = seq32(&[4, 1, 3, 3], 5, 13, 0.6);
    let e = run_error(
        "Convolution",
        &[("kernel", "(3,3)"), ("num_filter", "4"), ("num_group", "2")],
        &[x.clone(), w, b.clone()],
    );
    assert!(e.contains("divisible by num_group"), "{e}");
    let w = seq32(&[4, 3, 3], 5, 13, 0.6);
    let e = run_error(
        "Convolution",
        &[("kernel", "(3,)"), ("num_filter", "4")],
        &[x.clone(), w, b.clone()],
    );
    assert!(e.contains("(1, 3, 7, 7)"), "{e}");
    for attrs in [
        vec![("kernel", "(3,3)")],
        vec![("num_filter", "4")],
        vec![("kernel", "(3,3)"), ("num_filter", "4"), ("stride", "(2,)")],
        vec![
            ("kernel", "(3,3)"),
            ("num_filter", "4"),
            ("stride", "(0,1)"),
        ],
        vec![("kernel", "(3,3)"), ("num_filter", "3"), ("num_group", "2")],
        vec![("kernel", "(3,3)"), ("num_filter", "4"), ("layout", "NHWC")],
        vec![("kernel", "(3,3,3,3)"), ("num_filter", "4")],
        vec![("kernel", "(3,3)"), ("num_filter", "4"), ("bogus", "1")],
    ] {
        let attrs: crate::op::Attrs = attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let e = crate::op::find("Convolution")
            .unwrap()
            .build(&attrs)
            .err()
            .unwrap_or_else(|| panic!("{attrs:?} accepted"))
            .to_string();
        assert!(e.starts_with("Convolution:"), "{e}");
    }
    let x64 = seq64(&[1, 3, 7, 7], 7, 11, 0.5);
    let w = seq32(&[4, 3, 3, 3], 5, 13, 0.6);
    assert!(try_run(
        "Convolution",
        &[("kernel", "(3,3)"), ("num_filter", "4")],
        &[x64, w, b]
    )
    .is_err());
}

#[test]
fn backward_matches_mxnet_and_honours_add() {
    let op = build(
        "Convolution",
        &[
            ("kernel", "(3,3)"),
            ("num_filter", "3"),
            ("pad", "(1,1)"),
            ("stride", "(2,2)"),
        ],
    );
    let ins = [
        seq32(&[1, 2, 4, 4], 7, 11, 0.5),
        seq32(&[3, 2, 3, 3], 5, 13, 0.6),
        array::<f32>(&[3], &[0.1, -0.2, 0.3]),
    ];
    let og = seq32(&[1, 3, 2, 2], 3, 7, 0.3);
    let want_dx = [
        -0.03, -0.16, -0.03, 0.02, -0.07, 0.08, -0.0, 0.21, 0.04, 0.26, -0.03, -0.13, 0.1, -0.24,
        -0.07, 0.35, 0.3, -0.03, 0.03, -0.05, 0.18, -0.12, -0.19, 0.02, -0.17, -0.07, -0.02, 0.01,
        -0.11, -0.05, 0.07, -0.03,
    ];
    let want_dw = [
        0.03, -0.01, -0.09, -0.03, 0.04, 0.08, 0.02, -0.02, 0.02, 0.01, 0.14, -0.05, -0.05, 0.02,
        0.06, 0.0, 0.07, 0.0, 0.09, -0.11, -0.03, -0.13, -0.07, 0.12, 0.12, -0.19, -0.11, 0.03,
        0.18, -0.07, -0.23, -0.11, 0.3, 0.02, 0.32, -0.15, -0.06, 0.07, 0.03, 0.12, -0.04, 0.02,
        -0.13, 0.2, 0.04, -0.02, -0.13, 0.05, 0.22, 0.04, -0.23, -0.03, -0.27, 0.12,
    ];
    let want_db = [-0.1, -0.2, 0.4];
    let fill = |shape: &[usize], v: f32| array::<f32>(shape, &vec![v; shape.iter().product()]);
    let outs = [
        fill(&[1, 2, 4, 4], 0.0),
        fill(&[3, 2, 3, 3], 0.0),
        fill(&[3], 0.0),
    ];
    run_backward(&op, &ins, &og, &outs, &[OpReq::Write; 3]);
    close(&f64s(&outs[0]), &want_dx, 1e-5);
    close(&f64s(&outs[1]), &want_dw, 1e-5);
    close(&f64s(&outs[2]), &want_db, 1e-5);
    // Add accumulates onto what is there; Null leaves it alone.
    let outs = [
        fill(&[1, 2, 4, 4], 1.0),
        fill(&[3, 2, 3, 3], 2.0),
        fill(&[3], 3.0),
    ];
    run_backward(
        &op,
        &ins,
        &og,
        &outs,
        &[OpReq::Add, OpReq::Add, OpReq::Null],
    );
    let plus = |v: &[f64], c: f64| v.iter().map(|x| x + c).collect::<Vec<_>>();
    close(&f64s(&outs[0]), &plus(&want_dx, 1.0), 1e-5);
    close(&f64s(&outs[1]), &plus(&want_dw, 2.0), 1e-5);
    close(&f64s(&outs[2]), &[3.0; 3], 0.0);
}

#[test]
fn backward_add_on_a_large_batch() {
    // Big enough to be split across threads.
    let op = build(
        "Convolution",
        &[("kernel", "(3,3)"), ("num_filter", "4"), ("pad", "(1,1)")],
    );
    let ins = [
        seq64(&[16, 3, 8, 8], 7, 11, 0.5),
        seq64(&[4, 3, 3, 3], 5, 13, 0.6),
        seq64(&[4], 3, 7, 0.2),
    ];
    let og = seq64(&[16, 4, 8, 8], 3, 7, 0.3);
    let zeros = |s: &[usize]| array::<f64>(s, &vec![0.0; s.iter().product()]);
    let w = [zeros(&[16, 3, 8, 8]), zeros(&[4, 3, 3, 3]), zeros(&[4])];
    run_backward(&op, &ins, &og, &w, &[OpReq::Write; 3]);
    let ones = |s: &[usize]| array::<f64>(s, &vec![1.0; s.iter().product()]);
    let a = [ones(&[16, 3, 8, 8]), ones(&[4, 3, 3, 3]), ones(&[4])];
    run_backward(&op, &ins, &og, &a, &[OpReq::Add; 3]);
    for (w, a) in w.iter().zip(&a) {
        let want: Vec<f64> = f64s(w).iter().map(|v| v + 1.0).collect();
        close(&f64s(a), &want, 1e-12);
    }
}

#[test]
fn numeric_gradients() {
    type Case<'a> = (&'a [usize], &'a [(&'a str, &'a str)], usize, usize);
    let cases: &[Case] = &[
        (
            &[2, 2, 5, 5],
            &[("kernel", "(3,3)"), ("pad", "(1,1)")],
            3,
            1,
        ),
        (
            &[1, 4, 6, 5],
            &[
                ("kernel", "(2,3)"),
                ("stride", "(2,1)"),
                ("dilate", "(2,1)"),
                ("pad", "(1,2)"),
                ("num_group", "2"),
            ],
            4,
            2,
        ),
        (
            &[2, 2, 7],
            &[("kernel", "(3,)"), ("stride", "(2,)"), ("pad", "(1,)")],
            2,
            1,
        ),
        (
            &[2, 3, 4, 4],
            &[("kernel", "(1,1)"), ("no_bias", "True")],
            2,
            1,
        ),
        (
            &[1, 2, 3, 4, 3],
            &[("kernel", "(2,2,2)"), ("pad", "(0,1,0)")],
            2,
            1,
        ),
    ];
    for &(xs, attrs, f, g) in cases {
        let f_s = f.to_string();
        let mut a = attrs.to_vec();
        a.push(("num_filter", &f_s));
        let op = build("Convolution", &a);
        let k: Vec<usize> = {
            let kv = attrs.iter().find(|(n, _)| *n == "kernel").unwrap().1;
            crate::op::params::parse_tuple(kv)
                .unwrap()
                .unwrap()
                .iter()
                .map(|&v| v as usize)
                .collect()
        };
        let mut ws = vec![f, xs[1] / g];
        ws.extend_from_slice(&k);
        let mut ins = vec![seq64(xs, 7, 11, 0.5), seq64(&ws, 5, 13, 0.6)];
        let no_bias = attrs.iter().any(|(n, _)| *n == "no_bias");
        if !no_bias {
            ins.push(seq64(&[f], 3, 7, 0.2));
        }
        let check: Vec<usize> = (0..ins.len()).collect();
        gradcheck(&op, &ins, &check, 1e-6, 1e-6);
    }
}
