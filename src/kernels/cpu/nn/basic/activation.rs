//! CPU kernels of `Activation`: relu, sigmoid, tanh, softrelu and softsign, with their
//! backward.

use super::common::{ld, st, unary};
use crate::dispatch_float;
use crate::dtype::DType;
use crate::error::Result;
use crate::kernels::cpu::fastmath::{tanh_f32, FastMath};
use crate::kernels::cpu::map::map2_blobs;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::nn::activation::{Act, Activation, ActivationBackward, NAME};
use crate::op::{OpContext, OpReq, Operator};
use num_traits::Float;

impl Act {
    #[inline(always)]
    fn apply<F: Float + 'static>(self, x: F) -> F {
        let one = F::one();
        match self {
            // NaN stays NaN, as in MXNet.
            Act::Relu => {
                if x <= F::zero() {
                    F::zero()
                } else {
                    x
                }
            }
            Act::Sigmoid => one / (one + (-x).exp()),
            Act::Tanh => x.tanh(),
            // Above 20, log(1 + e^x) equals x in float precision and e^x could overflow.
            Act::SoftRelu => {
                if x > F::from(20.0).unwrap_or(one) {
                    x
                } else {
                    x.exp().ln_1p()
                }
            }
            Act::SoftSign => x / (one + x.abs()),
        }
    }

    /// The derivative, from the output for all but softsign, which takes the input.
    #[inline(always)]
    fn derivative<F: Float + 'static>(self, v: F) -> F {
        let one = F::one();
        match self {
            Act::Relu => {
                if v > F::zero() {
                    one
                } else if v.is_nan() {
                    v
                } else {
                    F::zero()
                }
            }
            Act::Sigmoid => v * (one - v),
            Act::Tanh => one - v * v,
            Act::SoftRelu => -(-v).exp_m1(),
            Act::SoftSign => {
                let d = one + v.abs();
                one / (d * d)
            }
        }
    }
}

/// float32 forward of the common activations with no conversions and a loop body the
/// compiler vectorises; false for the others.
fn forward_f32(act: Act, x: &TBlob, out: &TBlob, req: OpReq) -> bool {
    match act {
        Act::Relu => unary::<f32>(x, out, req, |v| if v <= 0.0 { 0.0 } else { v }),
        Act::Tanh => unary::<f32>(x, out, req, tanh_f32),
        Act::Sigmoid => unary::<f32>(x, out, req, |v| v.fast_sigmoid()),
        _ => return false,
    }
    true
}

/// float32 backward from the forward output, as `forward_f32`.
fn backward_f32(act: Act, inputs: &[TBlob], out: &TBlob, req: OpReq) -> bool {
    let (g, v) = (&inputs[0], &inputs[1]);
    match act {
        Act::Relu => map2_blobs(g, v, out, req, |g: f32, v| {
            if v > 0.0 {
                g
            } else if v.is_nan() {
                v
            } else {
                0.0
            }
        }),
        Act::Tanh => map2_blobs(g, v, out, req, |g: f32, v| g * (1.0 - v * v)),
        Act::Sigmoid => map2_blobs(g, v, out, req, |g: f32, v| g * (v * (1.0 - v))),
        _ => return false,
    }
    true
}

impl CpuKernel for Activation {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let (act, x, out, r) = (self.0, &io.inputs[0], &io.outputs[0], io.req[0]);
        if x.dtype == DType::F32 && forward_f32(act, x, out, r) {
            return Ok(());
        }
        dispatch_float!(NAME, x.dtype, T, F => {
            unary::<T>(x, out, r, |v| st::<F, T>(act.apply(ld::<T, F>(v))))
        });
        Ok(())
    }
}

impl CpuKernel for ActivationBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let act = self.0;
        if io.inputs[0].dtype == DType::F32
            && backward_f32(act, io.inputs, &io.outputs[0], io.req[0])
        {
            return Ok(());
        }
        dispatch_float!(self.name(), io.inputs[0].dtype, T, F => {
            map2_blobs(&io.inputs[0], &io.inputs[1], &io.outputs[0], io.req[0], |g: T, v: T| {
                st::<F, T>(ld::<T, F>(g) * act.derivative(ld::<T, F>(v)))
            });
        });
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Activation>(k);
    cpu::add::<ActivationBackward>(k);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cpu::testing::{close, f64s, run_error, run_req};

    use crate::op::testutil::{array, f32a, f32s, gradcheck, run, try_run};
    use crate::op::{Attrs, Grad, OpRef};
    use crate::shape::Shape;

    const X: [f32; 8] = [-2.5, -1.0, -0.3, 0.0, 0.4, 1.2, 3.0, 25.0];

    fn op(act: &str) -> OpRef {
        let a: Attrs = [("act_type".to_string(), act.to_string())].into();
        crate::op::find(NAME).unwrap().build(&a).unwrap()
    }

    #[test]
    fn forward_matches_mxnet() {
        let cases: [(&str, [f64; 8]); 5] = [
            ("relu", [0.0, 0.0, 0.0, 0.0, 0.4, 1.2, 3.0, 25.0]),
            (
                "sigmoid",
                [
                    0.07585818320512772,
                    0.2689414322376251,
                    0.4255574941635132,
                    0.5,
                    0.5986876487731934,
                    0.7685247659683228,
                    0.9525741338729858,
                    1.0,
                ],
            ),
            (
                "tanh",
                [
                    -0.9866142868995667,
                    -0.7615941762924194,
                    -0.29131263494491577,
                    0.0,
                    0.3799489736557007,
                    0.8336546421051025,
                    0.9950547814369202,
                    1.0,
                ],
            ),
            (
                "softrelu",
                [
                    0.07888984680175781,
                    0.3132617473602295,
                    0.554355263710022,
                    0.6931472420692444,
                    0.9130153059959412,
                    1.463282585144043,
                    3.0485873222351074,
                    25.0,
                ],
            ),
            (
                "softsign",
                [
                    -0.7142857313156128,
                    -0.5,
                    -0.23076924681663513,
                    0.0,
                    0.2857142984867096,
                    0.5454545617103577,
                    0.75,
                    0.9615384340286255,
                ],
            ),
        ];
        for (act, want) in cases {
            let y = run(NAME, &[("act_type", act)], &[f32a(&[2, 4], &X)]);
            close(&f64s(&y[0]), &want, 1e-6);
            let y = run(
                NAME,
                &[("act_type", act)],
                &[array::<f64>(&[8], &X.map(f64::from))],
            );
            close(&f64s(&y[0]), &want, 1e-6);
        }
        let h = array::<half::f16>(&[2], &[half::f16::from_f32(-1.0), half::f16::from_f32(2.0)]);
        let y = run(NAME, &[("act_type", "relu")], &[h]);
        assert_eq!(
            crate::op::testutil::values::<half::f16>(&y[0])[1].to_f32(),
            2.0
        );
    }

    #[test]
    fn gradients_are_numeric() {
        let x = array::<f64>(&[2, 3], &[-2.0, -0.7, -0.2, 0.3, 0.9, 2.5]);
        for act in ["relu", "sigmoid", "tanh", "softrelu", "softsign"] {
            gradcheck(&op(act), std::slice::from_ref(&x), &[0], 1e-6, 1e-6);
        }
    }

    #[test]
    fn in_place_and_add_requests() {
        let relu = op("relu");
        let x = f32a(&[4], &[-1.0, 2.0, -3.0, 4.0]);
        run_req(
            &relu,
            std::slice::from_ref(&x),
            std::slice::from_ref(&x),
            &[OpReq::WriteInplace],
        );
        assert_eq!(f32s(&x), vec![0.0, 2.0, 0.0, 4.0]);
        let out = f32a(&[4], &[1.0; 4]);
        run_req(
            &relu,
            std::slice::from_ref(&x),
            std::slice::from_ref(&out),
            &[OpReq::Add],
        );
        assert_eq!(f32s(&out), vec![1.0, 3.0, 1.0, 5.0]);

        let Grad::Op(g) = relu.gradient() else {
            panic!("no gradient")
        };
        assert_eq!((g.inputs.len(), g.outputs.as_slice()), (0, &[0][..]));
        let og = f32a(&[4], &[5.0; 4]);
        let dx = f32a(&[4], &[1.0; 4]);
        run_req(&g.op, &[og, x], std::slice::from_ref(&dx), &[OpReq::Add]);
        assert_eq!(f32s(&dx), vec![1.0, 6.0, 1.0, 6.0]);
    }

    #[test]
    fn shapes_and_errors() {
        let a = op("tanh");
        let mut ins = vec![None];
        let mut outs = vec![Some(Shape::from_slice(&[3, 2]))];
        a.infer_shape_partial(&mut ins, &mut outs).unwrap();
        assert_eq!(ins[0].as_deref(), Some(&[3usize, 2][..]));
        assert!(try_run(NAME, &[], &[f32a(&[1], &[1.0])]).is_err());
        let e = run_error(NAME, &[("act_type", "swish")], &[f32a(&[1], &[1.0])]);
        assert!(e.contains("act_type"), "{e}");
        let e = run_error(NAME, &[("act_type", "relu")], &[array::<i32>(&[1], &[1])]);
        assert!(e.contains("Activation"), "{e}");
    }
}
