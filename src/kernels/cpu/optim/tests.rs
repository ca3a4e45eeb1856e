//! The update operators against plain reference formulas (written from the optimizers'
//! textbook definitions, in float64), in place and not, serial and split.

use crate::imperative::invoke;
use crate::kernels::cpu::testing::run_error;
use crate::ndarray::NDArray;
use crate::op::testutil::{array, f32a, f32s, values};
use crate::op::{self, Attrs};

fn attrs(pairs: &[(&str, &str)]) -> Attrs {
    crate::op::testutil::attrs(pairs)
}

/// Runs `name` in place (`out=weight`) and returns the weight and states afterwards.
fn step(name: &str, a: &[(&str, &str)], ins: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let n = ins[0].len();
    let arrs: Vec<NDArray> = ins.iter().map(|v| array::<f64>(&[n], v)).collect();
    let op = op::find(name).unwrap().build(&attrs(a)).unwrap();
    invoke(&op, &arrs, Some(vec![arrs[0].clone()]), None, false).unwrap();
    let mut res = vec![values::<f64>(&arrs[0])];
    res.extend(arrs[2..].iter().map(values::<f64>));
    res
}

fn data(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((x >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

fn close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-6 * (1.0 + w.abs()),
            "{what}[{i}]: got {g}, want {w}"
        );
    }
}

fn clip(x: f64, c: f64) -> f64 {
    if c < 0.0 {
        x
    } else {
        x.clamp(-c, c)
    }
}

const N: usize = 11;

#[test]
fn sgd_and_momentum_follow_the_textbook() {
    let (w, g, m) = (
        data(N, 1, -1., 1.),
        data(N, 2, -2., 2.),
        data(N, 3, -1., 1.),
    );
    for clip_g in [-1.0, 0.4] {
        let c = clip_g.to_string();
        let a = [
            ("lr", "0.1"),
            ("wd", "0.01"),
            ("rescale_grad", "0.5"),
            ("clip_gradient", c.as_str()),
        ];
        let got = step("sgd_update", &a, &[w.clone(), g.clone()]);
        let want: Vec<f64> = (0..N)
            .map(|i| w[i] - 0.1 * (clip(0.5 * g[i], clip_g) + 0.01 * w[i]))
            .collect();
        close(&got[0], &want, "sgd weight");

        let mut am = a.to_vec();
        am.push(("momentum", "0.9"));
        let got = step("sgd_mom_update", &am, &[w.clone(), g.clone(), m.clone()]);
        let mom: Vec<f64> = (0..N)
            .map(|i| 0.9 * m[i] - 0.1 * (clip(0.5 * g[i], clip_g) + 0.01 * w[i]))
            .collect();
        close(&got[1], &mom, "sgd mom");
        let want: Vec<f64> = (0..N).map(|i| w[i] + mom[i]).collect();
        close(&got[0], &want, "sgd_mom weight");
    }
}

#[test]
fn ftml_follows_the_textbook() {
    let (w, g) = (data(N, 4, -1., 1.), data(N, 5, -1., 1.));
    let (d, v, z) = (
        data(N, 8, 0., 0.5),
        data(N, 7, 0., 0.5),
        data(N, 6, -0.5, 0.5),
    );
    let a = [
        ("lr", "0.05"),
        ("wd", "0.1"),
        ("beta1", "0.6"),
        ("beta2", "0.9"),
        ("t", "3"),
        ("clip_grad", "0.4"),
    ];
    let got = step(
        "ftml_update",
        &a,
        &[w.clone(), g.clone(), d.clone(), v.clone(), z.clone()],
    );
    for i in 0..N {
        let gr = clip(g[i] + 0.1 * w[i], 0.4);
        let vi = 0.9 * v[i] + 0.1 * gr * gr;
        let dt = (1.0 - 0.6f64.powi(3)) / 0.05 * ((vi / (1.0 - 0.9f64.powi(3))).sqrt() + 1e-8);
        let zi = 0.6 * z[i] + 0.4 * gr - (dt - 0.6 * d[i]) * w[i];
        close(
            &[got[1][i], got[2][i], got[3][i], got[0][i]],
            &[dt, vi, zi, -zi / dt],
            "ftml",
        );
    }
}

#[test]
fn adam_rmsprop_ftrl_follow_the_textbook() {
    let (w, g) = (data(N, 4, -1., 1.), data(N, 5, -1., 1.));
    let (s1, s2) = (data(N, 6, -0.5, 0.5), data(N, 7, 0., 0.5));
    let a = [
        ("lr", "0.01"),
        ("wd", "0.1"),
        ("beta1", "0.8"),
        ("beta2", "0.9"),
    ];
    let got = step(
        "adam_update",
        &a,
        &[w.clone(), g.clone(), s1.clone(), s2.clone()],
    );
    for i in 0..N {
        let gr = g[i] + 0.1 * w[i];
        let mean = 0.8 * s1[i] + 0.2 * gr;
        let var = 0.9 * s2[i] + 0.1 * gr * gr;
        close(&[got[1][i]], &[mean], "adam mean");
        close(&[got[2][i]], &[var], "adam var");
        close(
            &[got[0][i]],
            &[w[i] - 0.01 * mean / (var.sqrt() + 1e-8)],
            "adam w",
        );
    }
    let a = [("lr", "0.01"), ("gamma1", "0.9"), ("clip_weights", "0.5")];
    let got = step("rmsprop_update", &a, &[w.clone(), g.clone(), s2.clone()]);
    for i in 0..N {
        let n = 0.1 * g[i] * g[i] + 0.9 * s2[i];
        close(&[got[1][i]], &[n], "rmsprop n");
        let want = clip(w[i] - 0.01 * g[i] / (n + 1e-8).sqrt(), 0.5);
        close(&[got[0][i]], &[want], "rmsprop w");
    }
    let a = [
        ("lr", "0.1"),
        ("lamda1", "0.05"),
        ("beta", "1.5"),
        ("wd", "0.2"),
    ];
    let got = step(
        "ftrl_update",
        &a,
        &[w.clone(), g.clone(), s1.clone(), s2.clone()],
    );
    for i in 0..N {
        let z = s1[i] + g[i] - ((s2[i] + g[i] * g[i]).sqrt() - s2[i].sqrt()) * w[i] / 0.1;
        let n = s2[i] + g[i] * g[i];
        let want = if z.abs() > 0.05 {
            (z.signum() * 0.05 - z) / ((1.5 + n.sqrt()) / 0.1 + 0.2)
        } else {
            0.0
        };
        close(&[got[1][i], got[2][i], got[0][i]], &[z, n, want], "ftrl");
    }
}

#[test]
fn nag_signum_adagrad_adadelta_follow_the_textbook() {
    let (w, g, m) = (
        data(N, 8, -1., 1.),
        data(N, 9, -1., 1.),
        data(N, 10, -1., 1.),
    );
    let h = data(N, 11, 0., 1.);
    // Out of place, NAG's momentum uses the old weight.
    let arrs: Vec<NDArray> = [&w, &g, &m].iter().map(|v| array::<f64>(&[N], v)).collect();
    let a = attrs(&[("lr", "0.1"), ("momentum", "0.9"), ("wd", "0.05")]);
    let op = op::find("nag_mom_update").unwrap().build(&a).unwrap();
    let out = invoke(&op, &arrs, None, None, false).unwrap();
    for i in 0..N {
        let step = 0.1 * (g[i] + 0.05 * w[i]);
        let mom = 0.9 * m[i] - step;
        let want = w[i] + 0.9 * mom - step;
        close(&[values::<f64>(&arrs[2])[i]], &[mom], "nag mom");
        close(&[values::<f64>(&out[0])[i]], &[want], "nag w");
    }
    assert_eq!(values::<f64>(&arrs[0]), w, "nag left the weight alone");

    let a = [
        ("lr", "0.1"),
        ("momentum", "0.9"),
        ("wd", "0.05"),
        ("wd_lh", "0.2"),
    ];
    let got = step("signum_update", &a, &[w.clone(), g.clone(), m.clone()]);
    for i in 0..N {
        let mom = 0.9 * m[i] - 0.1 * (0.05 * w[i] + g[i]);
        close(&[got[1][i]], &[mom], "signum mom");
        close(
            &[got[0][i]],
            &[(1.0 - 0.02) * w[i] + 0.1 * mom.signum()],
            "signum w",
        );
    }
    let a = [("lr", "0.1"), ("wd", "0.05"), ("epsilon", "1e-7")];
    let got = step(
        "_rsmx_adagrad_update",
        &a,
        &[w.clone(), g.clone(), h.clone()],
    );
    for i in 0..N {
        let hist = h[i] + g[i] * g[i];
        let want = w[i] - 0.1 * (g[i] / (hist + 1e-7).sqrt() + 0.05 * w[i]);
        close(&[got[1][i], got[0][i]], &[hist, want], "adagrad");
    }
    let a = [("rho", "0.9"), ("wd", "0.05"), ("epsilon", "1e-5")];
    let got = step(
        "_rsmx_adadelta_update",
        &a,
        &[
            w.clone(),
            g.clone(),
            h.clone(),
            m.iter().map(|v| v.abs()).collect(),
        ],
    );
    for i in 0..N {
        let ag = 0.9 * h[i] + 0.1 * g[i] * g[i];
        let ad0 = m[i].abs();
        let d = (ad0 + 1e-5).sqrt() / (ag + 1e-5).sqrt() * g[i];
        let ad = 0.9 * ad0 + 0.1 * d * d;
        let want = w[i] - (d + 0.05 * w[i]);
        close(
            &[got[1][i], got[2][i], got[0][i]],
            &[ag, ad, want],
            "adadelta",
        );
    }
}

#[test]
fn mixed_precision_keeps_a_float32_master_copy() {
    use half::f16;
    let w: Vec<f32> = data(N, 12, -1., 1.).iter().map(|v| *v as f32).collect();
    let g: Vec<f32> = data(N, 13, -1., 1.).iter().map(|v| *v as f32).collect();
    let w16 = array::<f16>(
        &[N],
        &w.iter().map(|v| f16::from_f32(*v)).collect::<Vec<_>>(),
    );
    let g16 = array::<f16>(
        &[N],
        &g.iter().map(|v| f16::from_f32(*v)).collect::<Vec<_>>(),
    );
    let (mom, w32) = (f32a(&[N], &[0.0; N]), f32a(&[N], &w));
    let a = attrs(&[("lr", "0.5"), ("momentum", "0.9")]);
    let op = op::find("mp_sgd_mom_update").unwrap().build(&a).unwrap();
    let ins = [w16.clone(), g16.clone(), mom.clone(), w32.clone()];
    invoke(&op, &ins, Some(vec![w16.clone()]), None, false).unwrap();
    let master = f32s(&w32);
    for i in 0..N {
        let want = w[i] - 0.5 * f16::from_f32(g[i]).to_f32();
        assert!(
            (master[i] - want).abs() < 1e-6,
            "{i}: {} vs {want}",
            master[i]
        );
        assert_eq!(values::<f16>(&w16)[i], f16::from_f32(master[i]));
    }
    // The states must be float32.
    let bad = [w16.clone(), g16.clone(), g16.clone(), w32];
    let e = invoke(&op, &bad, Some(vec![w16]), None, false)
        .err()
        .unwrap();
    assert!(e.to_string().contains("mom has dtype float16"), "{e}");
}

#[test]
fn large_arrays_split_and_match_serial() {
    let n = (1 << 18) + 3;
    let (w, g, m) = (
        data(n, 14, -1., 1.),
        data(n, 15, -1., 1.),
        data(n, 16, -1., 1.),
    );
    let a = [("lr", "0.1"), ("momentum", "0.9"), ("clip_gradient", "0.5")];
    let big = step("sgd_mom_update", &a, &[w.clone(), g.clone(), m.clone()]);
    // Pieces small enough to run on one thread give the same bits.
    let k = 1000;
    for start in [0, n / 2, n - k] {
        let part = |v: &Vec<f64>| v[start..start + k].to_vec();
        let small = step("sgd_mom_update", &a, &[part(&w), part(&g), part(&m)]);
        assert_eq!(small[0], big[0][start..start + k].to_vec());
        assert_eq!(small[1], big[1][start..start + k].to_vec());
    }
}

#[test]
fn states_are_written_before_later_readers() {
    let n = 1 << 17;
    let w = f32a(&[n], &vec![0.0; n]);
    let g = f32a(&[n], &vec![1.0; n]);
    let m = f32a(&[n], &vec![0.0; n]);
    let op = op::find("sgd_mom_update")
        .unwrap()
        .build(&attrs(&[("lr", "1"), ("momentum", "1")]))
        .unwrap();
    let copy = op::find("_copy").unwrap().build(&Attrs::new()).unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        invoke(
            &op,
            &[w.clone(), g.clone(), m.clone()],
            Some(vec![w.clone()]),
            None,
            false,
        )
        .unwrap();
        seen.push(invoke(&copy, std::slice::from_ref(&m), None, None, false).unwrap()[0].clone());
    }
    let got: Vec<f32> = seen.iter().map(|s| f32s(s)[n - 1]).collect();
    assert_eq!(got, vec![-1.0, -2.0, -3.0]);
    assert_eq!(f32s(&w)[0], -6.0);
}

#[test]
fn bad_input_is_an_error_naming_op_and_shapes() {
    let w = f32a(&[2, 3], &[0.; 6]);
    let e = run_error(
        "sgd_mom_update",
        &[("lr", "0.1")],
        &[w.clone(), w.clone(), f32a(&[6], &[0.; 6])],
    );
    assert!(
        e.contains("sgd_mom_update")
            && e.contains("mom")
            && e.contains("(6,)")
            && e.contains("(2, 3)"),
        "{e}"
    );
    let d = array::<f64>(&[2, 3], &[0.; 6]);
    let e = run_error(
        "adam_update",
        &[("lr", "0.1")],
        &[w.clone(), d, w.clone(), w.clone()],
    );
    assert!(
        e.contains("adam_update") && e.contains("grad has dtype float64"),
        "{e}"
    );
    let e = run_error("sgd_update", &[], &[w.clone(), w.clone()]);
    assert!(e.contains("'lr'"), "{e}");
    let e = run_error(
        "sgd_update",
        &[("lr", "1"), ("beta1", "1")],
        &[w.clone(), w],
    );
    assert!(e.contains("unknown argument 'beta1'"), "{e}");
}

#[test]
fn states_are_auxiliary_and_weight_is_in_place() {
    for kind in super::Kind::ALL {
        let spec = kind.spec();
        let op = crate::op::optim::update_op(kind, super::Hyper::defaults(kind));
        assert_eq!(op.aux_inputs(), spec.aux.to_vec(), "{}", spec.name);
        assert_eq!(op.inplace(), &[(0, 0)]);
        assert!(spec.aux.iter().all(|&i| i >= 2 && i < spec.inputs.len()));
        assert_eq!(super::Kind::from_name(spec.name), Some(kind));
        let h = super::Hyper::parse(kind, &super::Hyper::defaults(kind).to_attrs(kind)).unwrap();
        let mut want = super::Hyper::defaults(kind);
        if spec.f32_params {
            want.epsilon = want.epsilon as f32 as f64;
        }
        assert_eq!(h.lr, 0.0, "{}", spec.name);
        assert_eq!(h.epsilon, want.epsilon, "{}", spec.name);
    }
}

#[test]
fn in_place_sgd_gives_the_bits_of_a_separate_output() {
    // The in-place SGD loops run over slices; writing to another array takes the general
    // path. Both give the same bits, small and split across threads.
    for n in [37, (1 << 18) + 5] {
        let v = |seed| {
            data(n, seed, -1., 1.)
                .iter()
                .map(|&x| x as f32)
                .collect::<Vec<_>>()
        };
        for (name, a) in [
            (
                "sgd_update",
                &[("lr", "0.1"), ("wd", "0.01"), ("rescale_grad", "0.5")][..],
            ),
            (
                "sgd_mom_update",
                &[("lr", "0.1"), ("momentum", "0.9"), ("wd", "0.01")][..],
            ),
            (
                "sgd_mom_update",
                &[("lr", "0.2"), ("momentum", "0.5"), ("clip_gradient", "0.3")][..],
            ),
        ] {
            let op = op::find(name).unwrap().build(&attrs(a)).unwrap();
            let run = |in_place: bool| {
                let mut arrs = vec![f32a(&[n], &v(1)), f32a(&[n], &v(2))];
                if name == "sgd_mom_update" {
                    arrs.push(f32a(&[n], &v(3)));
                }
                let out = if in_place {
                    arrs[0].clone()
                } else {
                    f32a(&[n], &vec![0.0; n])
                };
                invoke(&op, &arrs, Some(vec![out.clone()]), None, false).unwrap();
                let mut got = vec![f32s(&out)];
                got.extend(arrs[2..].iter().map(f32s));
                got.iter()
                    .map(|a| a.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
                    .collect::<Vec<_>>()
            };
            assert_eq!(run(true), run(false), "{name} {a:?} n={n}");
        }
    }
}
