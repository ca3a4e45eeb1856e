//! CPU kernels of `LeakyReLU`: leaky, elu, selu, gelu, prelu (learned slope per channel)
//! and rrelu (random slope while training), with their backward.

use super::common::{for_chunks, ld, put, st};
use super::special::{erf, one_plus_erf};
use crate::dispatch_float;
use crate::dtype::Element;
use crate::error::Result;
use crate::kernels::cpu::map::{map2, map_io};
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::nn::leaky_relu::{prelu_layout, Kind, LeakyRelu, LeakyReluBackward, NAME};
use crate::op::{OpContext, OpReq, Operator};
use num_traits::{Float, One, Zero};
use rand::Rng;
use std::f64::consts::{FRAC_1_SQRT_2, PI};

const SELU_ALPHA: f64 = 1.673_263_242_354_377_3;
const SELU_LAMBDA: f64 = 1.050_700_987_355_480_5;

impl Kind {
    /// The function of one element for the kinds without a slope array.
    #[inline(always)]
    fn apply<F: Float + 'static>(self, x: F) -> F {
        let c = |v: f64| F::from(v).unwrap_or_else(F::nan);
        let pos = x > F::zero();
        match self {
            Kind::Leaky(s) => {
                if pos {
                    x
                } else {
                    c(s) * x
                }
            }
            Kind::Elu(s) => {
                if pos {
                    x
                } else {
                    c(s) * x.exp_m1()
                }
            }
            Kind::Selu => c(SELU_LAMBDA) * if pos { x } else { c(SELU_ALPHA) * x.exp_m1() },
            Kind::Gelu => {
                let v = x.to_f64().unwrap_or(f64::NAN);
                c(0.5 * v * one_plus_erf(v * FRAC_1_SQRT_2))
            }
            Kind::Prelu | Kind::Rrelu { .. } => unreachable!("slope kinds use their arrays"),
        }
    }

    /// The derivative at input `x` for the kinds without a slope array.
    #[inline(always)]
    fn derivative<F: Float + 'static>(self, x: F) -> F {
        let c = |v: f64| F::from(v).unwrap_or_else(F::nan);
        let pos = x > F::zero();
        match self {
            Kind::Leaky(s) => {
                if pos {
                    F::one()
                } else {
                    c(s)
                }
            }
            Kind::Elu(s) => {
                if pos {
                    F::one()
                } else {
                    c(s) * x.exp()
                }
            }
            Kind::Selu => {
                if pos {
                    c(SELU_LAMBDA)
                } else {
                    c(SELU_LAMBDA * SELU_ALPHA) * x.exp()
                }
            }
            Kind::Gelu => {
                let v = x.to_f64().unwrap_or(f64::NAN);
                c(
                    0.5 + 0.5 * erf(v * FRAC_1_SQRT_2)
                        + v * (-0.5 * v * v).exp() / (2.0 * PI).sqrt(),
                )
            }
            Kind::Prelu | Kind::Rrelu { .. } => unreachable!("slope kinds use their arrays"),
        }
    }
}

/// Index of the slope for element `i` given (channels, inner).
#[inline(always)]
fn channel_of(i: usize, channels: usize, inner: usize) -> usize {
    if channels == 1 {
        0
    } else {
        (i / inner) % channels
    }
}

impl CpuKernel for LeakyRelu {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let kind = self.0;
        dispatch_float!(NAME, io.inputs[0].dtype, T, F => {
            match kind {
                Kind::Prelu => {
                    let x = io.inputs[0].slice::<T>();
                    let (channels, inner) = prelu_layout(&io.inputs[0].shape, &io.inputs[1].shape)?;
                    let gamma = io.inputs[1].slice::<T>();
                    let add = io.req[0] == OpReq::Add;
                    if io.req[0] != OpReq::Null {
                        for_chunks(io.outputs[0].slice_mut::<T>(), 1, |off, o| {
                            for (i, o) in o.iter_mut().enumerate() {
                                let v = ld::<T, F>(x[off + i]);
                                let s = ld::<T, F>(gamma[channel_of(off + i, channels, inner)]);
                                put(o, st::<F, T>(if v > F::zero() { v } else { s * v }), add);
                            }
                        });
                    }
                }
                Kind::Rrelu { lower, upper } => {
                    let x = io.inputs[0].slice::<T>();
                    let mask = io.outputs[1].slice_mut::<T>();
                    if ctx.is_train {
                        let rng = ctx.rng(NAME)?;
                        for m in mask.iter_mut() {
                            *m = T::from_f64(lower + (upper - lower) * rng.gen::<f64>());
                        }
                    } else {
                        mask.fill(T::from_f64((lower + upper) / 2.0));
                    }
                    map2(x, &*mask, io.outputs[0].slice_mut::<T>(), io.req[0], |v, s| {
                        let (v, s) = (ld::<T, F>(v), ld::<T, F>(s));
                        st::<F, T>(if v > F::zero() { v } else { s * v })
                    });
                }
                // The element-wise kinds may run in place.
                k => map_io(io.inputs[0].in_out::<T>(&io.outputs[0]), io.req[0], |v| {
                    st::<F, T>(k.apply(ld::<T, F>(v)))
                }),
            }
        });
        Ok(())
    }
}

impl CpuKernel for LeakyReluBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let kind = self.0;
        dispatch_float!(self.name(), io.inputs[0].dtype, T, F => {
            let (g, x) = (io.inputs[0].slice::<T>(), io.inputs[1].slice::<T>());
            match kind {
                Kind::Prelu => {
                    let (channels, inner) = prelu_layout(&io.inputs[1].shape, &io.inputs[2].shape)?;
                    let gamma = io.inputs[2].slice::<T>();
                    prelu_backward::<T, F>(g, x, gamma, (channels, inner), io.outputs, io.req);
                }
                Kind::Rrelu { .. } => {
                    let (mask, out) = (io.inputs[2].slice::<T>(), io.outputs[0].slice_mut::<T>());
                    super::common::map3(g, x, mask, out, io.req[0], |g, v, s| {
                        let s = if ld::<T, F>(v) > F::zero() { F::one() } else { ld::<T, F>(s) };
                        st::<F, T>(ld::<T, F>(g) * s)
                    });
                }
                k => map2(g, x, io.outputs[0].slice_mut::<T>(), io.req[0], |g, v| {
                    st::<F, T>(ld::<T, F>(g) * k.derivative(ld::<T, F>(v)))
                }),
            }
        });
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<LeakyRelu>(k);
    cpu::add::<LeakyReluBackward>(k);
}

/// prelu's gradients: the data's (slope where the input is not positive) and gamma's
/// (the sum of `x · g` over the non-positive inputs of each channel).
fn prelu_backward<T: Num, F: Float + 'static + Send + Sync>(
    g: &[T],
    x: &[T],
    gamma: &[T],
    (channels, inner): (usize, usize),
    outputs: &[TBlob],
    req: &[OpReq],
) {
    if req[0] != OpReq::Null {
        let add = req[0] == OpReq::Add;
        for_chunks(outputs[0].slice_mut::<T>(), 1, |off, o| {
            for (i, o) in o.iter_mut().enumerate() {
                let j = off + i;
                let s = if ld::<T, F>(x[j]) > F::zero() {
                    F::one()
                } else {
                    ld::<T, F>(gamma[channel_of(j, channels, inner)])
                };
                put(o, st::<F, T>(ld::<T, F>(g[j]) * s), add);
            }
        });
    }
    if req[1] != OpReq::Null {
        let mut acc = vec![F::zero(); channels];
        for (j, (&gv, &xv)) in g.iter().zip(x).enumerate() {
            let v = ld::<T, F>(xv);
            if v <= F::zero() {
                let c = channel_of(j, channels, inner);
                acc[c] = acc[c] + v * ld::<T, F>(gv);
            }
        }
        let add = req[1] == OpReq::Add;
        for (o, a) in outputs[1].slice_mut::<T>().iter_mut().zip(acc) {
            put(o, st::<F, T>(a), add);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cpu::testing::{build, close, f64s, run_error, run_req};

    use crate::op::testutil::{array, f32a, f32s, gradcheck, run, try_run};
    use crate::op::{Grad, OpRef};
    use crate::shape::Shape;

    const X: [f32; 8] = [-2.5, -1.0, -0.3, 0.0, 0.4, 1.2, 3.0, 25.0];

    fn op(attrs: &[(&str, &str)]) -> OpRef {
        build(NAME, attrs)
    }

    #[test]
    fn forward_matches_mxnet() {
        let cases: [(&str, [f64; 8]); 4] = [
            ("leaky", [-0.75, -0.3, -0.09, 0.0, 0.4, 1.2, 3.0, 25.0]),
            (
                "elu",
                [
                    -0.27537450194358826,
                    -0.18963615596294403,
                    -0.07775452733039856,
                    0.0,
                    0.4,
                    1.2,
                    3.0,
                    25.0,
                ],
            ),
            (
                "selu",
                [
                    -1.613785743713379,
                    -1.1113307476043701,
                    -0.4556673467159271,
                    0.0,
                    0.42028042674064636,
                    1.2608412504196167,
                    3.1521029472351074,
                    26.26752471923828,
                ],
            ),
            (
                "gelu",
                [
                    -0.015524178743362427,
                    -0.15865527093410492,
                    -0.11462658643722534,
                    0.0,
                    0.26216867566108704,
                    1.0619163513183594,
                    2.9959499835968018,
                    25.0,
                ],
            ),
        ];
        for (act, want) in cases {
            let y = run(
                NAME,
                &[("act_type", act), ("slope", "0.3")],
                &[f32a(&[2, 4], &X)],
            );
            close(&f64s(&y[0]), &want, 1e-6);
        }
        // rrelu outside training uses the mean slope (0.125 + 0.334) / 2.
        let y = run(NAME, &[("act_type", "rrelu")], &[f32a(&[2, 4], &X)]);
        assert_eq!(y.len(), 2);
        close(
            &f64s(&y[0])[..3],
            &[
                -0.5737500190734863,
                -0.22949999570846558,
                -0.06885000318288803,
            ],
            1e-6,
        );
    }

    #[test]
    fn prelu_matches_mxnet() {
        let x = f32a(&[2, 4], &X);
        let g = f32a(&[4], &[0.1, 0.2, 0.3, 0.4]);
        let y = run(NAME, &[("act_type", "prelu")], &[x, g]);
        close(
            &f64s(&y[0]),
            &[-0.25, -0.2, -0.09, 0.0, 0.4, 1.2, 3.0, 25.0],
            1e-6,
        );
        let x3: Vec<f32> = (0..24).map(|i| i as f32 - 12.0).collect();
        let y = run(
            NAME,
            &[("act_type", "prelu")],
            &[f32a(&[2, 3, 4], &x3), f32a(&[3], &[0.1, 0.2, 0.3])],
        );
        close(
            &f64s(&y[0])[..12],
            &[
                -1.2, -1.1, -1.0, -0.9, -1.6, -1.4, -1.2, -1.0, -1.2, -0.9, -0.6, -0.3,
            ],
            1e-6,
        );
        let y = run(
            NAME,
            &[("act_type", "prelu")],
            &[f32a(&[2, 3, 4], &x3), f32a(&[1], &[0.5])],
        );
        close(&f64s(&y[0])[..2], &[-6.0, -5.5], 1e-6);
        let e = run_error(
            NAME,
            &[("act_type", "prelu")],
            &[f32a(&[2, 3, 4], &x3), f32a(&[4], &[0.5; 4])],
        );
        assert!(e.contains("gamma"), "{e}");
    }

    #[test]
    fn gradients_are_numeric() {
        let x = array::<f64>(
            &[2, 3, 2],
            &[
                -2.0, -0.7, -0.2, 0.3, 0.9, 2.5, -1.1, 0.6, -3.0, 1.7, -0.4, 0.8,
            ],
        );
        for act in ["leaky", "elu", "selu", "gelu"] {
            gradcheck(
                &op(&[("act_type", act), ("slope", "0.2")]),
                std::slice::from_ref(&x),
                &[0],
                1e-6,
                1e-6,
            );
        }
        let gamma = array::<f64>(&[3], &[0.1, -0.3, 0.6]);
        gradcheck(
            &op(&[("act_type", "prelu")]),
            &[x.clone(), gamma],
            &[0, 1],
            1e-6,
            1e-6,
        );
        let gamma = array::<f64>(&[1], &[0.3]);
        gradcheck(
            &op(&[("act_type", "prelu")]),
            &[x, gamma],
            &[0, 1],
            1e-6,
            1e-6,
        );
    }

    #[test]
    fn rrelu_uses_its_mask() {
        let rr = op(&[("act_type", "rrelu")]);
        let x = f32a(&[4], &[-1.0, -2.0, 3.0, -4.0]);
        let (y, mask) = (f32a(&[4], &[0.0; 4]), f32a(&[4], &[0.0; 4]));
        run_req(
            &rr,
            std::slice::from_ref(&x),
            &[y.clone(), mask.clone()],
            &[OpReq::Write, OpReq::Write],
        );
        let (yv, mv, xv) = (f32s(&y), f32s(&mask), f32s(&x));
        for i in 0..4 {
            assert!((0.125..=0.334).contains(&mv[i]));
            let want = if xv[i] > 0.0 { xv[i] } else { xv[i] * mv[i] };
            assert!((yv[i] - want).abs() < 1e-6);
        }
        let Grad::Op(g) = rr.gradient() else {
            panic!("no gradient")
        };
        let dx = f32a(&[4], &[1.0; 4]);
        run_req(
            &g.op,
            &[f32a(&[4], &[2.0; 4]), x, mask],
            std::slice::from_ref(&dx),
            &[OpReq::Add],
        );
        let got = f32s(&dx);
        assert!((got[0] - (1.0 + 2.0 * mv[0])).abs() < 1e-6 && got[2] == 3.0);
    }

    #[test]
    fn shapes_requests_and_errors() {
        let pr = op(&[("act_type", "prelu")]);
        assert_eq!(pr.input_names().unwrap(), vec!["data", "gamma"]);
        assert_eq!(op(&[]).input_names().unwrap(), vec!["data"]);
        let mut ins = vec![Some(Shape::from_slice(&[2, 3, 4])), None];
        let mut outs = vec![None];
        pr.infer_shape_partial(&mut ins, &mut outs).unwrap();
        assert_eq!(ins[1].as_deref(), Some(&[3usize][..]));
        assert_eq!(outs[0].as_deref(), Some(&[2usize, 3, 4][..]));
        let mut ins = vec![None, None];
        let mut outs = vec![Some(Shape::from_slice(&[5, 2]))];
        pr.infer_shape_partial(&mut ins, &mut outs).unwrap();
        assert_eq!(ins[1].as_deref(), Some(&[2usize][..]));

        let leaky = op(&[("slope", "0.5")]);
        let out = f32a(&[2], &[1.0, 1.0]);
        run_req(
            &leaky,
            &[f32a(&[2], &[-2.0, 2.0])],
            std::slice::from_ref(&out),
            &[OpReq::Add],
        );
        assert_eq!(f32s(&out), vec![0.0, 3.0]);

        let Grad::Op(g) = pr.gradient() else {
            panic!("no gradient")
        };
        let (dx, dg) = (f32a(&[2, 2], &[1.0; 4]), f32a(&[2], &[1.0; 2]));
        run_req(
            &g.op,
            &[
                f32a(&[2, 2], &[1.0; 4]),
                f32a(&[2, 2], &[-1.0, 2.0, -3.0, -4.0]),
                f32a(&[2], &[0.5, 0.25]),
            ],
            &[dx.clone(), dg.clone()],
            &[OpReq::Add, OpReq::Add],
        );
        assert_eq!(f32s(&dx), vec![1.5, 2.0, 1.5, 1.25]);
        assert_eq!(f32s(&dg), vec![-3.0, -3.0]);

        assert!(try_run(NAME, &[("act_type", "swish")], &[f32a(&[1], &[1.0])]).is_err());
        assert!(try_run(NAME, &[("act_type", "prelu")], &[f32a(&[1], &[1.0])]).is_err());
        assert!(try_run(NAME, &[], &[array::<i64>(&[1], &[1])]).is_err());
    }
}
