//! CPU kernels of the loss heads whose backward ignores the head gradient:
//! `LinearRegressionOutput`, `LogisticRegressionOutput`, `MAERegressionOutput` and
//! `MakeLoss` and `SVMOutput`.

use super::common::{ld, st, unary};
use crate::dispatch_float;
use crate::dtype::Element;
use crate::error::Result;
use crate::kernels::cpu::map::{map1, map2};
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::nn::common::{check_float, Normalization};
use crate::op::nn::make_loss::{MakeLoss, MakeLossBackward};
use crate::op::nn::regression::{Reg, Regression, RegressionBackward};
use crate::op::nn::svm_output::{Svm, SvmOutput, SvmOutputBackward};
use crate::op::OpReq;
use crate::op::{OpContext, Operator};
use num_traits::Float;

impl Reg {
    /// The loss gradient at output `y` for label `l`, before scaling.
    #[inline(always)]
    fn derivative<F: Float + 'static>(self, y: F, l: F) -> F {
        let d = y - l;
        match self {
            // MXNet takes −1 also where the output equals the label.
            Reg::Mae if d > F::zero() => F::one(),
            Reg::Mae => -F::one(),
            _ => d,
        }
    }
}

#[inline(always)]
fn sigmoid<F: Float + 'static>(x: F) -> F {
    F::one() / (F::one() + (-x).exp())
}

impl CpuKernel for Regression {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let kind = self.kind;
        dispatch_float!(self.name(), io.inputs[0].dtype, T, F => {
            unary::<T>(&io.inputs[0], &io.outputs[0], io.req[0], |v| match kind {
                Reg::Logistic => st::<F, T>(sigmoid(ld::<T, F>(v))),
                _ => v,
            })
        });
        Ok(())
    }
}

impl CpuKernel for RegressionBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let (label, y, out) = (&io.inputs[0], &io.inputs[1], &io.outputs[0]);
        let per_example = match label.shape.first() {
            Some(&n) if n > 0 => label.size() / n,
            _ => 1,
        };
        let scale = self.grad_scale / per_example.max(1) as f64;
        let kind = self.kind;
        dispatch_float!(self.name(), y.dtype, T, F => {
            let s = ld::<f64, F>(scale);
            map2(y.slice::<T>(), label.slice::<T>(), out.slice_mut::<T>(), io.req[0], |y, l| {
                st::<F, T>(kind.derivative(ld::<T, F>(y), ld::<T, F>(l)) * s)
            });
        });
        Ok(())
    }
}

impl CpuKernel for MakeLoss {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        dispatch_float!(self.name(), io.inputs[0].dtype, T, F => {
            unary::<T>(&io.inputs[0], &io.outputs[0], io.req[0], |v| v)
        });
        Ok(())
    }
}

impl CpuKernel for MakeLossBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let p = self.0;
        let y = &io.inputs[0];
        check_float(self.name(), "output", y.dtype)?;
        let denom = match p.normalization {
            Normalization::Null => 1.0,
            Normalization::Batch => y.shape.first().copied().unwrap_or(1).max(1) as f64,
            Normalization::Valid => {
                let n: usize = dispatch_float!(self.name(), y.dtype, T, F => {
                    y.slice::<T>().iter().filter(|v| v.to_f64() > p.valid_thresh).count()
                });
                n.max(1) as f64
            }
        };
        let g = p.grad_scale / denom;
        dispatch_float!(self.name(), y.dtype, T, F => {
            let v = T::from_f64(g);
            map1(y.slice::<T>(), io.outputs[0].slice_mut::<T>(), io.req[0], |_| v)
        });
        Ok(())
    }
}

impl CpuKernel for SvmOutput {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        dispatch_float!(self.name(), io.inputs[0].dtype, T, F => {
            unary::<T>(&io.inputs[0], &io.outputs[0], io.req[0], |v| v)
        });
        Ok(())
    }
}

impl Svm {
    /// The gradient at output `y` of a column that is (`is_label`) or is not the row's
    /// label.
    #[inline(always)]
    fn derivative<F: Float>(&self, y: F, is_label: bool, margin: F, coef: F) -> F {
        let two = F::one() + F::one();
        let d = match (self.use_linear, is_label) {
            (true, true) if margin > y => -F::one(),
            (true, false) if margin > -y => F::one(),
            (false, true) if margin > y => -two * (margin - y),
            (false, false) if margin > -y => two * (margin + y),
            _ => F::zero(),
        };
        d * coef
    }
}

impl CpuKernel for SvmOutputBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let (label, y, out, req) = (&io.inputs[0], &io.inputs[1], &io.outputs[0], io.req[0]);
        if req == OpReq::Null {
            return Ok(());
        }
        let cols = y.shape.last().copied().unwrap_or(1);
        let svm = self.0;
        dispatch_float!(self.name(), y.dtype, T, F => {
            let (margin, coef) = (ld::<f64, F>(svm.margin), ld::<f64, F>(svm.regularization_coefficient));
            let (ys, labels, dx) = (y.slice::<T>(), label.slice::<T>(), out.slice_mut::<T>());
            for (r, (yr, dr)) in ys.chunks(cols.max(1)).zip(dx.chunks_mut(cols.max(1))).enumerate() {
                // A label is cast to an integer as MXNet does; one out of range marks no column.
                let lf = labels[r].to_f64();
                let k = if lf.is_finite() { lf as i64 } else { -1 };
                for (c, (&v, d)) in yr.iter().zip(dr.iter_mut()).enumerate() {
                    let g = svm.derivative(ld::<T, F>(v), c as i64 == k, margin, coef);
                    let g = if req == OpReq::Add { ld::<T, F>(*d) + g } else { g };
                    *d = st::<F, T>(g);
                }
            }
        });
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<SvmOutput>(k);
    cpu::add::<SvmOutputBackward>(k);
    cpu::add::<Regression>(k);
    cpu::add::<RegressionBackward>(k);
    cpu::add::<MakeLoss>(k);
    cpu::add::<MakeLossBackward>(k);
}

#[cfg(test)]
mod tests {
    use crate::kernels::cpu::testing::{build, close, f64s, run_error, run_req};

    use crate::ndarray::NDArray;
    use crate::op::testutil::{f32a, f32s, run, try_run};
    use crate::op::{Grad, OpRef, OpReq};
    use crate::shape::Shape;

    fn op(name: &str, attrs: &[(&str, &str)]) -> OpRef {
        build(name, attrs)
    }

    fn backward(o: &OpRef, inputs: &[NDArray]) -> Vec<f64> {
        let y = crate::imperative::invoke(o, inputs, None, None, true).unwrap();
        let Grad::Op(g) = o.gradient() else {
            panic!("no gradient")
        };
        assert!(g.ograds.is_empty());
        let mut ins: Vec<NDArray> = g.inputs.iter().map(|&i| inputs[i].clone()).collect();
        ins.extend(g.outputs.iter().map(|&i| y[i].clone()));
        f64s(&crate::imperative::invoke(&g.op, &ins, None, None, true).unwrap()[0])
    }

    #[test]
    fn regression_outputs_match_mxnet() {
        let x = f32a(&[2, 3], &[0.5, -1.2, 2.0, 0.1, 0.9, -0.3]);
        let l = f32a(&[2, 3], &[1.0, 0.0, 2.5, 0.1, 1.0, -1.0]);
        let cases: [(&str, [f64; 6]); 3] = [
            (
                "LinearRegressionOutput",
                [-0.25, -0.6, -0.25, 0.0, -0.05, 0.35],
            ),
            (
                "LogisticRegressionOutput",
                [
                    -0.18877029418945312,
                    0.11573760211467743,
                    -0.8096014857292175,
                    0.21248960494995117,
                    -0.14452530443668365,
                    0.7127788066864014,
                ],
            ),
            ("MAERegressionOutput", [-0.5, -0.5, -0.5, -0.5, -0.5, 0.5]),
        ];
        for (name, want) in cases {
            close(
                &backward(&op(name, &[("grad_scale", "1.5")]), &[x.clone(), l.clone()]),
                &want,
                1e-6,
            );
        }
        let y = run("LogisticRegressionOutput", &[], &[x.clone(), l.clone()]);
        close(
            &f64s(&y[0])[..2],
            &[0.6224594116210938, 0.23147520422935486],
            1e-6,
        );
        let y = run("LinearRegressionOutput", &[], &[x, l]);
        close(&f64s(&y[0])[..2], &[0.5, -1.2], 1e-7);
        // An (n, 1) output with an (n,) label.
        let g = backward(
            &op("LinearRegressionOutput", &[]),
            &[f32a(&[2, 1], &[1.0, 2.0]), f32a(&[2], &[0.5, 0.5])],
        );
        close(&g, &[0.5, 1.5], 1e-7);
    }

    #[test]
    fn make_loss_matches_mxnet() {
        let x = f32a(&[2, 3], &[0.5, -1.2, 2.0, 0.1, 0.9, -0.3]);
        let cases: [(&[(&str, &str)], f64); 5] = [
            (&[], 1.0),
            (&[("grad_scale", "2")], 2.0),
            (&[("normalization", "batch")], 0.5),
            (&[("normalization", "valid")], 0.25),
            (&[("normalization", "valid"), ("valid_thresh", "0.5")], 0.5),
        ];
        for (attrs, want) in cases {
            close(
                &backward(&op("MakeLoss", attrs), std::slice::from_ref(&x)),
                &[want; 6],
                1e-7,
            );
        }
        let y = run("MakeLoss", &[], &[x]);
        close(&f64s(&y[0])[..2], &[0.5, -1.2], 1e-7);
    }

    #[test]
    fn shapes_requests_and_errors() {
        let lin = op("LinearRegressionOutput", &[]);
        let mut ins = vec![Some(Shape::from_slice(&[4, 1])), None];
        lin.infer_shape_partial(&mut ins, &mut [None]).unwrap();
        assert_eq!(ins[1].as_deref(), Some(&[4usize][..]));
        let mut ins = vec![Some(Shape::from_slice(&[4, 3])), None];
        lin.infer_shape_partial(&mut ins, &mut [None]).unwrap();
        assert_eq!(ins[1].as_deref(), Some(&[4usize, 3][..]));
        let mut ins = vec![None, None];
        let mut outs = vec![Some(Shape::from_slice(&[4, 3]))];
        lin.infer_shape_partial(&mut ins, &mut outs).unwrap();
        assert_eq!(ins[0].as_deref(), Some(&[4usize, 3][..]));
        let e = run_error(
            "LinearRegressionOutput",
            &[],
            &[f32a(&[2, 3], &[0.0; 6]), f32a(&[6], &[0.0; 6])],
        );
        assert!(e.contains("(6,)"), "{e}");

        let Grad::Op(g) = lin.gradient() else {
            panic!("no gradient")
        };
        let dx = f32a(&[2], &[1.0, 1.0]);
        run_req(
            &g.op,
            &[f32a(&[2], &[1.0, 1.0]), f32a(&[2], &[3.0, 0.0])],
            std::slice::from_ref(&dx),
            &[OpReq::Add],
        );
        assert_eq!(f32s(&dx), vec![3.0, 0.0]);
        let ml = op("MakeLoss", &[]);
        let Grad::Op(g) = ml.gradient() else {
            panic!("no gradient")
        };
        run_req(
            &g.op,
            &[f32a(&[2], &[1.0, 1.0])],
            std::slice::from_ref(&dx),
            &[OpReq::Add],
        );
        assert_eq!(f32s(&dx), vec![4.0, 1.0]);

        assert!(try_run(
            "MakeLoss",
            &[("normalization", "mean")],
            &[f32a(&[1], &[0.0])]
        )
        .is_err());
        assert!(try_run(
            "MAERegressionOutput",
            &[("scale", "1")],
            &[f32a(&[1], &[0.0])]
        )
        .is_err());
    }

    #[test]
    fn linear_gradient_is_the_squared_error_gradient() {
        // The gradient of 0.5·|x − label|² averaged over the label's elements per example.
        let x = crate::op::testutil::array::<f64>(&[2, 2], &[0.3, -0.2, 0.8, 1.1]);
        let l = crate::op::testutil::array::<f64>(&[2, 2], &[0.0, 0.5, 1.0, 1.0]);
        let g = backward(&op("LinearRegressionOutput", &[]), &[x, l]);
        close(&g, &[0.15, -0.35, -0.1, 0.05], 1e-12);
    }
}
