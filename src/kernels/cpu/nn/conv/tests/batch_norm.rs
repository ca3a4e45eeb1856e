use super::{build, close, error_text, f64s, seq64};
use crate::ndarray::NDArray;
use crate::op::testutil::{array, gradcheck};
use crate::op::{OpRef, OpReq};
use crate::shape::Shape;

// MXNet 1.9.1 with data arange(24).reshape(2,3,4)**1.5/10, gamma (1.5, 2, 0.5), beta
// (0.1, 0.2, 0.3), moving mean (0.5, 0, 1), moving var (2, 1, 3), momentum 0.8, eps 1e-3,
// output gradient arange(24) % 5 - 2; the moving statistics after one training step.
#[rustfmt::skip]
mod mx {
    pub const FREE_Y: &[f64] = &[-1.512755036354065, -1.4507092237472534, -1.3372632265090942, -1.190355896949768, -2.0980095863342285, -1.890439748764038, -1.6609236001968384, -1.411388635635376, -0.28647297620773315, -0.22539472579956055, -0.1608215570449829, -0.09293344616889954, 1.066439151763916, 1.3954646587371826, 1.7374011278152466, 2.09177827835083, 1.5569159984588623, 1.9545716047286987, 2.3641016483306885, 2.7851719856262207, 0.6468347907066345, 0.7416999340057373, 0.8388513326644897, 0.9382367730140686];
    pub const FREE_MEAN: &[f64] = &[2.5992989540100098, 4.320961952209473, 6.461289405822754];
    pub const FREE_INVSTD: &[f64] = &[0.41363847255706787, 0.32633262872695923, 0.2793694734573364];
    pub const FREE_MM: &[f64] = &[0.919859766960144, 0.8641923666000366, 2.0922577381134033];
    pub const FREE_MV: &[f64] = &[2.7687289714813232, 2.6778578758239746, 4.962347984313965];
    pub const FREE_DX: &[f64] = &[-0.936957836151123, -0.32521021366119385, 0.2793217897415161, 0.8791565299034119, 1.5716760158538818, -1.070412039756775, -0.4524964988231659, 0.16238808631896973, 0.1410256177186966, 0.2842075526714325, -0.2708340287208557, -0.1272621601819992, -0.058112576603889465, 0.5161561965942383, 1.08861243724823, -1.4429662227630615, -0.9396913647651672, -0.3472329080104828, 0.24342773854732513, 0.8323411345481873, -0.22458919882774353, -0.07947267591953278, 0.06577476859092712, 0.211150124669075];
    pub const FREE_DG: &[f64] = &[2.7150492668151855, 3.7116568088531494, -1.6396371126174927];
    pub const FREE_DB: &[f64] = &[-1.0, 1.0, -2.0];
    pub const FIX_Y: &[f64] = &[-0.9751700162887573, -0.9338061809539795, -0.8581754565238953, -0.7602372169494629, -0.9490048289299011, -0.8452199101448059, -0.730461835861206, -0.6056943535804749, -0.8729459643363953, -0.75078946352005, -0.6216431260108948, -0.485866904258728, 0.7442927956581116, 0.9636431336402893, 1.1916007995605469, 1.4278522729873657, 0.8784579634666443, 1.0772857666015625, 1.2820508480072021, 1.4925860166549683, 0.9936695694923401, 1.1833997964859009, 1.3777027130126953, 1.5764734745025635];
    pub const FIX_MEAN: &[f64] = &[2.5992989540100098, 4.320961952209473, 6.461289405822754];
    pub const FIX_INVSTD: &[f64] = &[0.41363847255706787, 0.32633262872695923, 0.2793694734573364];
    pub const FIX_MM: &[f64] = &[0.919859766960144, 0.8641923666000366, 2.0922577381134033];
    pub const FIX_MV: &[f64] = &[2.7687289714813232, 2.6778578758239746, 4.962347984313965];
    pub const FIX_DX: &[f64] = &[-0.624638557434082, -0.2168068140745163, 0.18621452152729034, 0.5861043334007263, 0.7858380079269409, -0.5352060198783875, -0.22624824941158295, 0.08119404315948486, 0.2820512354373932, 0.568415105342865, -0.5416680574417114, -0.2545243203639984, -0.038741715252399445, 0.3441041111946106, 0.7257416248321533, -0.9619775414466858, -0.4698456823825836, -0.1736164540052414, 0.12171386927366257, 0.41617056727409363, -0.44917839765548706, -0.15894535183906555, 0.13154953718185425, 0.42230024933815];
    pub const FIX_DG: &[f64] = &[0.0, 0.0, 0.0];
    pub const FIX_DB: &[f64] = &[-1.0, 1.0, -2.0];
    pub const INFER_Y: &[f64] = &[-0.4301975667476654, -0.32415804266929626, -0.1302725076675415, 0.12079989910125732, 1.7992006540298462, 2.434950828552246, 3.1379194259643555, 3.9022011756896973, 0.6644614934921265, 0.7906659841537476, 0.9240918755531311, 1.0643672943115234, 3.9777822494506836, 4.540104389190674, 5.124492168426514, 5.730141639709473, 12.99360466003418, 14.211555480957031, 15.465875625610352, 16.75554084777832, 2.5929317474365234, 2.7889492511749268, 2.9896907806396484, 3.1950485706329346];
    pub const INFER_MEAN: &[f64] = &[0.5, 0.0, 1.0];
    pub const INFER_INVSTD: &[f64] = &[0.7069301009178162, 0.9995003938674927, 0.5772541165351868];
}

fn f(shape: &[usize], v: &[f64]) -> NDArray {
    array::<f32>(shape, &v.iter().map(|&x| x as f32).collect::<Vec<_>>())
}

fn inputs() -> Vec<NDArray> {
    let x: Vec<f64> = (0..24).map(|i| (i as f64).powf(1.5) / 10.0).collect();
    vec![
        f(&[2, 3, 4], &x),
        f(&[3], &[1.5, 2.0, 0.5]),
        f(&[3], &[0.1, 0.2, 0.3]),
        f(&[3], &[0.5, 0.0, 1.0]),
        f(&[3], &[2.0, 1.0, 3.0]),
    ]
}

fn ograd() -> NDArray {
    f(
        &[2, 3, 4],
        &(0..24).map(|i| (i % 5) as f64 - 2.0).collect::<Vec<_>>(),
    )
}

fn zeros(shape: &[usize]) -> NDArray {
    array::<f32>(shape, &vec![0.0; shape.iter().product()])
}

/// Runs `op` directly (so the auxiliary inputs are updated in place) and returns its
/// three outputs.
fn forward(op: &OpRef, ins: &[NDArray], is_train: bool) -> Vec<NDArray> {
    let outs = [zeros(ins[0].shape()), zeros(&[3]), zeros(&[3])];
    crate::kernels::cpu::testing::run_with(op, ins, &outs, &[OpReq::Write; 3], is_train);
    outs.to_vec()
}

/// Runs the backward op into `outs` with `req`.
fn backward(op: &OpRef, ins: &[NDArray], fwd: &[NDArray], outs: &[NDArray], req: &[OpReq]) {
    super::run_backward_after(op, ins, fwd, &ograd(), outs, req);
}

#[test]
fn training_step_matches_mxnet() {
    type Want<'a> = [&'a [f64]; 8];
    let cases: [(&str, Want); 2] = [
        (
            "False",
            [
                mx::FREE_Y,
                mx::FREE_MEAN,
                mx::FREE_INVSTD,
                mx::FREE_MM,
                mx::FREE_MV,
                mx::FREE_DX,
                mx::FREE_DG,
                mx::FREE_DB,
            ],
        ),
        (
            "True",
            [
                mx::FIX_Y,
                mx::FIX_MEAN,
                mx::FIX_INVSTD,
                mx::FIX_MM,
                mx::FIX_MV,
                mx::FIX_DX,
                mx::FIX_DG,
                mx::FIX_DB,
            ],
        ),
    ];
    for (fix, [y, mean, invstd, mm, mv, dx, dg, db]) in cases {
        let op = build(
            "BatchNorm",
            &[
                ("fix_gamma", fix),
                ("momentum", "0.8"),
                ("eps", "1e-3"),
                ("output_mean_var", "True"),
            ],
        );
        let ins = inputs();
        let outs = forward(&op, &ins, true);
        close(&f64s(&outs[0]), y, 1e-5);
        close(&f64s(&outs[1]), mean, 1e-5);
        close(&f64s(&outs[2]), invstd, 1e-5);
        close(&f64s(&ins[3]), mm, 1e-5);
        close(&f64s(&ins[4]), mv, 1e-5);
        let grads = [zeros(&[2, 3, 4]), zeros(&[3]), zeros(&[3])];
        backward(&op, &ins, &outs, &grads, &[OpReq::Write; 3]);
        close(&f64s(&grads[0]), dx, 1e-5);
        close(&f64s(&grads[1]), dg, 1e-5);
        close(&f64s(&grads[2]), db, 1e-5);
        // Add accumulates; Null leaves the output alone.
        backward(
            &op,
            &ins,
            &outs,
            &grads,
            &[OpReq::Add, OpReq::Null, OpReq::Add],
        );
        let twice = |v: &[f64]| v.iter().map(|x| 2.0 * x).collect::<Vec<_>>();
        close(&f64s(&grads[0]), &twice(dx), 1e-5);
        close(&f64s(&grads[1]), dg, 1e-5);
        close(&f64s(&grads[2]), &twice(db), 1e-5);
    }
}

#[test]
fn inference_uses_moving_statistics() {
    let op = build(
        "BatchNorm",
        &[("fix_gamma", "False"), ("output_mean_var", "1")],
    );
    let ins = inputs();
    let outs = forward(&op, &ins, false);
    close(&f64s(&outs[0]), mx::INFER_Y, 1e-5);
    close(&f64s(&outs[1]), mx::INFER_MEAN, 1e-6);
    close(&f64s(&outs[2]), mx::INFER_INVSTD, 1e-6);
    // Moving statistics untouched.
    close(&f64s(&ins[3]), &[0.5, 0.0, 1.0], 0.0);
    close(&f64s(&ins[4]), &[2.0, 1.0, 3.0], 0.0);
    // use_global_stats in training behaves the same and updates nothing.
    let op = build(
        "BatchNorm",
        &[("fix_gamma", "False"), ("use_global_stats", "True")],
    );
    let outs = forward(&op, &ins, true);
    close(&f64s(&outs[0]), mx::INFER_Y, 1e-5);
    close(&f64s(&ins[4]), &[2.0, 1.0, 3.0], 0.0);
}

#[test]
fn interface_and_shapes() {
    let op = build("BatchNorm", &[]);
    assert_eq!(op.num_outputs(), 3);
    assert_eq!(op.num_visible_outputs(), 1);
    assert_eq!(op.aux_inputs(), vec![3, 4]);
    assert_eq!(op.output_names(), vec!["output", "mean", "var"]);
    assert_eq!(
        build("BatchNorm", &[("output_mean_var", "True")]).num_visible_outputs(),
        3
    );
    let s = |v: &[usize]| Some(Shape::from_slice(v));
    let mut ins = vec![s(&[2, 5, 3]), None, None, None, None];
    let mut outs = vec![None, None, None];
    op.infer_shape_partial(&mut ins, &mut outs).unwrap();
    assert!(ins[1..].iter().all(|i| i.as_deref() == Some(&[5][..])));
    assert_eq!(outs[0].as_deref(), Some(&[2, 5, 3][..]));
    assert_eq!(outs[2].as_deref(), Some(&[5][..]));
    // From the output back to the data.
    let mut ins = vec![None, None, None, None, None];
    let mut outs = vec![s(&[4, 6]), None, None];
    op.infer_shape_partial(&mut ins, &mut outs).unwrap();
    assert_eq!(ins[0].as_deref(), Some(&[4, 6][..]));
    assert_eq!(ins[4].as_deref(), Some(&[6][..]));
    let last = build("BatchNorm", &[("axis", "-1")]);
    let shapes = [[2, 5, 3].as_slice(), &[3], &[3], &[3], &[3]].map(Shape::from_slice);
    assert_eq!(last.infer_shape(&shapes).unwrap()[1].as_slice(), &[3]);
    let e = error_text(op.infer_shape(&shapes));
    assert!(e.starts_with("BatchNorm:") && e.contains("gamma"), "{e}");
    let e = error_text(build("BatchNorm", &[("axis", "3")]).infer_shape(&shapes));
    assert!(e.contains("BatchNorm"), "{e}");
    let attrs: crate::op::Attrs = [("momentum".to_string(), "x".to_string())].into();
    assert!(crate::op::find("BatchNorm").unwrap().build(&attrs).is_err());
}

#[test]
fn numeric_gradients() {
    for attrs in [
        vec![("fix_gamma", "False")],
        vec![("fix_gamma", "True")],
        vec![("fix_gamma", "False"), ("axis", "-1")],
        vec![("fix_gamma", "False"), ("use_global_stats", "True")],
    ] {
        let op = build("BatchNorm", &attrs);
        let c = if attrs.iter().any(|(k, _)| *k == "axis") {
            4
        } else {
            2
        };
        let ins = [
            seq64(&[3, 2, 4], 7, 11, 0.5),
            seq64(&[c], 3, 7, -0.5),
            seq64(&[c], 2, 5, 0.1),
            seq64(&[c], 1, 3, 0.0),
            seq64(&[c], 1, 3, -1.0),
        ];
        gradcheck(&op, &ins, &[0, 1, 2], 1e-6, 1e-5);
    }
    let op = build("BatchNorm", &[("fix_gamma", "False")]);
    let ins = [
        seq64(&[5, 3], 7, 11, 0.5),
        seq64(&[3], 3, 7, -0.5),
        seq64(&[3], 2, 5, 0.1),
        seq64(&[3], 1, 3, 0.0),
        seq64(&[3], 1, 3, -1.0),
    ];
    gradcheck(&op, &ins, &[0, 1, 2], 1e-6, 1e-5);
}

/// Long channel blocks go through the lane sums (several runs, a partial chunk at the
/// end): the statistics, output and gradients match a plain f64 computation.
#[test]
fn long_blocks_match_plain_sums() {
    let (n, c, inner) = (2, 3, 4099 + 16 * 3);
    let len = n * c * inner;
    let xv: Vec<f64> = (0..len)
        .map(|i| ((i * 37 % 101) as f64) / 25.0 + 3.0)
        .collect();
    let gv: Vec<f64> = (0..len)
        .map(|i| ((i * 13 % 29) as f64) / 7.0 - 2.0)
        .collect();
    let (gamma, beta) = ([1.5, 2.0, 0.5], [0.1, 0.2, 0.3]);
    let ins = vec![
        f(&[n, c, inner], &xv),
        f(&[3], &gamma),
        f(&[3], &beta),
        f(&[3], &[0.0; 3]),
        f(&[3], &[1.0; 3]),
    ];
    let op = build("BatchNorm", &[("fix_gamma", "False"), ("eps", "1e-3")]);
    let outs = forward(&op, &ins, true);
    let grads = [zeros(&[n, c, inner]), zeros(&[3]), zeros(&[3])];
    let g = f(&[n, c, inner], &gv);
    super::run_backward_after(&op, &ins, &outs, &g, &grads, &[OpReq::Write; 3]);
    let (y, dx) = (f64s(&outs[0]), f64s(&grads[0]));
    let (dgamma, dbeta) = (f64s(&grads[1]), f64s(&grads[2]));
    let m = (n * inner) as f64;
    for ch in 0..c {
        let idx: Vec<usize> = (0..n)
            .flat_map(|s| (0..inner).map(move |i| (s * c + ch) * inner + i))
            .collect();
        let mean = idx.iter().map(|&i| xv[i]).sum::<f64>() / m;
        let var = idx.iter().map(|&i| (xv[i] - mean).powi(2)).sum::<f64>() / m;
        let inv = 1.0 / (var + 1e-3).sqrt();
        let sum_g = idx.iter().map(|&i| gv[i]).sum::<f64>();
        let sum_gh = idx
            .iter()
            .map(|&i| gv[i] * (xv[i] - mean) * inv)
            .sum::<f64>();
        assert!(
            (dbeta[ch] - sum_g).abs() < 1e-3 * (1.0 + sum_g.abs()),
            "dbeta {ch}"
        );
        assert!(
            (dgamma[ch] - sum_gh).abs() < 1e-3 * (1.0 + sum_gh.abs()),
            "dgamma {ch}"
        );
        for &i in &idx {
            let h = (xv[i] - mean) * inv;
            let want_y = gamma[ch] * h + beta[ch];
            let want_dx = gamma[ch] * inv * (gv[i] - sum_g / m - h * sum_gh / m);
            assert!((y[i] - want_y).abs() < 1e-4, "y[{i}] {} vs {want_y}", y[i]);
            assert!(
                (dx[i] - want_dx).abs() < 1e-4,
                "dx[{i}] {} vs {want_dx}",
                dx[i]
            );
        }
    }
}

/// `_backward_rsmx_bn_relu` computes bit for bit what `_backward_Activation` (relu) then
/// `_backward_BatchNorm` compute, with `Write` and `Add`, over long and one-element
/// blocks, with NaN and zeros in the ReLU's output.
#[test]
fn relu_fused_backward_matches_the_two_backwards() {
    use crate::op::nn::activation::{Act, ActivationBackward};
    use crate::op::nn::batch_norm::{BatchNorm, BatchNormBackward, BatchNormReluBackward};
    use std::sync::Arc;
    let run = crate::kernels::cpu::testing::run_with;
    for (shape, fix_gamma) in [
        (vec![2, 3, 4099 + 5], "False"),
        (vec![5, 3], "False"),
        (vec![4, 3, 2, 3], "True"),
    ] {
        let len: usize = shape.iter().product();
        let x: Vec<f64> = (0..len).map(|i| ((i * 37 % 101) as f64) / 25.0).collect();
        let g: Vec<f64> = (0..len)
            .map(|i| ((i * 13 % 29) as f64) / 7.0 - 2.0)
            .collect();
        // The ReLU's output: positive, zero and NaN.
        let y: Vec<f64> = (0..len)
            .map(|i| match i % 7 {
                0 | 3 => 0.0,
                5 => f64::NAN,
                k => k as f64 / 3.0,
            })
            .collect();
        let op = build("BatchNorm", &[("fix_gamma", fix_gamma), ("eps", "1e-3")]);
        let bn = op.as_any().downcast_ref::<BatchNorm>().unwrap().clone();
        let ins = vec![
            f(&shape, &x),
            f(&[3], &[1.5, 2.0, 0.5]),
            f(&[3], &[0.1, 0.2, 0.3]),
            f(&[3], &[0.0; 3]),
            f(&[3], &[1.0; 3]),
        ];
        let fwd = forward(&op, &ins, true);
        let (ga, ya) = (f(&shape, &g), f(&shape, &y));
        for req in [OpReq::Write, OpReq::Add] {
            let start = |k: usize| {
                let s = if k == 0 { shape.clone() } else { vec![3] };
                f(&s, &vec![0.25; s.iter().product()])
            };
            // ReLU backward, then BatchNorm backward.
            let dy = zeros(&shape);
            let relu: OpRef = Arc::new(ActivationBackward(Act::Relu));
            run(
                &relu,
                &[ga.clone(), ya.clone()],
                std::slice::from_ref(&dy),
                &[OpReq::Write],
                true,
            );
            let two: Vec<NDArray> = (0..3).map(start).collect();
            let bwd: OpRef = Arc::new(BatchNormBackward { fwd: bn.clone() });
            let bin = [
                dy,
                ins[0].clone(),
                ins[1].clone(),
                fwd[1].clone(),
                fwd[2].clone(),
            ];
            run(&bwd, &bin, &two, &[req; 3], true);
            // The fused node.
            let one: Vec<NDArray> = (0..3).map(start).collect();
            let fused: OpRef = Arc::new(BatchNormReluBackward { fwd: bn.clone() });
            assert_eq!(fused.name(), "_backward_rsmx_bn_relu");
            let fin = [ga.clone(), ya.clone(), ins[0].clone(), ins[1].clone()];
            let fin = [&fin[..], &[fwd[1].clone(), fwd[2].clone()]].concat();
            run(&fused, &fin, &one, &[req; 3], true);
            for k in 0..3 {
                let (a, b) = (f64s(&two[k]), f64s(&one[k]));
                assert!(
                    a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits()),
                    "output {k} of {shape:?} with {req:?}"
                );
            }
        }
    }
}
