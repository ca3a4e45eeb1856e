//! CPU kernels of `SoftmaxOutput` (alias `Softmax`): a softmax whose backward is the
//! cross-entropy gradient against a label, ignoring the head gradient unless `out_grad`
//! is set.

use super::common::{ld, put, st};
use super::softmax_kernel::Layout;
use crate::dispatch_float;
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::nn::common::Normalization;
use crate::op::nn::softmax_output::{SoftmaxOutput, SoftmaxOutputBackward, NAME};
use crate::op::{OpContext, OpReq, Operator};
use crate::shape::fmt_shape;
use num_traits::Float;

impl CpuKernel for SoftmaxOutput {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        super::softmax::plain_forward(NAME, io, || self.layout(&io.inputs[0].shape))
    }
}

impl CpuKernel for SoftmaxOutputBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let k = io.inputs.len();
        let (label, out) = (&io.inputs[k - 2], &io.inputs[k - 1]);
        let layout = self.0.layout(&out.shape)?;
        let labels: Vec<f64> = crate::dispatch_num!(self.name(), label.dtype, L => {
            label.slice::<L>().iter().map(|v| v.to_f64()).collect()
        });
        let prob_labels = !self.0.multi_output && label.shape == out.shape;
        let positions = layout.outer * layout.inner;
        if !prob_labels && labels.len() < positions {
            return Err(Error::Value(format!(
                "{}: label of shape {} has fewer than the {positions} labels the data needs",
                self.name(),
                fmt_shape(&label.shape)
            )));
        }
        let scale = self.0.grad_scale / self.denominator(&layout, &labels[..]);
        let og = self.0.out_grad.then(|| &io.inputs[0]);
        dispatch_float!(self.name(), out.dtype, T, F => {
            let y = out.slice::<T>();
            let g = og.map(|b| b.slice::<T>());
            let plan = Plan {
                p: &self.0,
                layout,
                labels: &labels,
                prob_labels,
                scale,
            };
            plan.run::<T, F>(y, g, io.outputs[0].slice_mut::<T>(), io.req[0] == OpReq::Add);
        });
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<SoftmaxOutput>(k);
    cpu::add::<SoftmaxOutputBackward>(k);
}

impl SoftmaxOutputBackward {
    /// What the gradient is divided by, as MXNet normalises it.
    fn denominator(&self, layout: &Layout, labels: &[f64]) -> f64 {
        let p = &self.0;
        let positions = layout.outer * layout.inner;
        let valid = || {
            let ignore = p.ignore_label as i64;
            let n = labels[..positions.min(labels.len())]
                .iter()
                .filter(|&&l| l as i64 != ignore)
                .count();
            n.max(1) as f64
        };
        match (p.multi_output, p.normalization) {
            (_, Normalization::Valid) => valid(),
            (true, Normalization::Null) => layout.inner.max(1) as f64,
            (true, Normalization::Batch) => (layout.inner * layout.outer).max(1) as f64,
            (false, Normalization::Null) => 1.0,
            (false, Normalization::Batch) => layout.outer.max(1) as f64,
        }
    }
}

/// One backward pass: `(softmax − target) · scale`, optionally times the head gradient.
struct Plan<'a> {
    p: &'a SoftmaxOutput,
    layout: Layout,
    labels: &'a [f64],
    prob_labels: bool,
    scale: f64,
}

impl Plan<'_> {
    fn run<T: Num, F: Float + 'static + Send + Sync>(
        &self,
        y: &[T],
        g: Option<&[T]>,
        dx: &mut [T],
        add: bool,
    ) {
        let lay = self.layout;
        let block = lay.n * lay.inner;
        if block == 0 {
            return;
        }
        let scale = F::from(self.scale).unwrap_or_else(F::nan);
        // Label smoothing applies to one label per row, as MXNet does it.
        let alpha = if self.p.multi_output {
            0.0
        } else {
            self.p.smooth_alpha
        };
        let (on, off) = if lay.n > 1 {
            (1.0 - alpha, alpha / (lay.n - 1) as f64)
        } else {
            (1.0 - alpha, 0.0)
        };
        let (on, off) = (
            F::from(on).unwrap_or_else(F::nan),
            F::from(off).unwrap_or_else(F::nan),
        );
        let ignore = self.p.ignore_label as i64;
        super::common::for_chunks(dx, block, |start, dc| {
            for (b, db) in dc.chunks_mut(block).enumerate() {
                let o = start / block + b;
                for i in 0..lay.inner {
                    let label = self.labels.get(o * lay.inner + i).copied().unwrap_or(-1.0) as i64;
                    let skip = !self.prob_labels && self.p.use_ignore && label == ignore;
                    for j in 0..lay.n {
                        let k = j * lay.inner + i;
                        let at = o * block + k;
                        let v = if skip {
                            F::zero()
                        } else {
                            let target = if self.prob_labels {
                                F::from(self.labels[at]).unwrap_or_else(F::nan)
                            } else if j as i64 == label {
                                on
                            } else if alpha > 0.0 {
                                off
                            } else {
                                F::zero()
                            };
                            let mut v = (ld::<T, F>(y[at]) - target) * scale;
                            if let Some(g) = g {
                                v = v * ld::<T, F>(g[at]);
                            }
                            v
                        };
                        put(&mut db[k], st::<F, T>(v), add);
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cpu::testing::{build, close, f64s, run_error, run_req};

    use crate::op::testutil::{array, f32a, f32s, run, try_run};
    use crate::op::{Grad, OpRef};
    use crate::shape::Shape;

    const X: [f32; 12] = [1.0, 2.0, 3.0, 0.5, -1.0, 0.0, 4.0, 2.0, 0.3, 0.2, 0.1, -5.0];

    fn op(attrs: &[(&str, &str)]) -> OpRef {
        build("Softmax", attrs)
    }

    /// The data gradient for `attrs`, with head gradient `og` if `out_grad` is set.
    fn grad(
        attrs: &[(&str, &str)],
        x: &crate::ndarray::NDArray,
        label: &crate::ndarray::NDArray,
        og: Option<&crate::ndarray::NDArray>,
    ) -> Vec<f64> {
        let so = op(attrs);
        let y =
            crate::imperative::invoke(&so, &[x.clone(), label.clone()], None, None, true).unwrap();
        let Grad::Op(g) = so.gradient() else {
            panic!("no gradient")
        };
        assert_eq!(g.grad_of, vec![0]);
        let mut ins: Vec<_> = og.into_iter().cloned().collect();
        ins.push(label.clone());
        ins.push(y[0].clone());
        f64s(&crate::imperative::invoke(&g.op, &ins, None, None, true).unwrap()[0])
    }

    #[test]
    fn forward_and_backward_match_mxnet() {
        let x = f32a(&[3, 4], &X);
        let label = f32a(&[3], &[2.0, 0.0, 1.0]);
        let y = run(NAME, &[], &[x.clone(), label.clone()]);
        close(
            &f64s(&y[0])[..4],
            &[
                0.08536889404058456,
                0.23205672204494476,
                0.6307955384254456,
                0.051778849214315414,
            ],
            1e-6,
        );
        let want = [
            0.08536889404058456,
            0.23205672204494476,
            -0.36920446157455444,
            0.051778849214315414,
            -0.9941933751106262,
            0.01578405126929283,
            0.8617799878120422,
            0.11662924289703369,
            0.36649376153945923,
            -0.6683827638626099,
            0.3000596761703491,
            0.0018293876200914383,
        ];
        close(&grad(&[], &x, &label, None), &want, 1e-6);
        let scaled: Vec<f64> = want.iter().map(|v| v * 2.0).collect();
        close(
            &grad(&[("grad_scale", "2")], &x, &label, None),
            &scaled,
            1e-6,
        );
        let batch: Vec<f64> = want.iter().map(|v| v / 3.0).collect();
        close(
            &grad(&[("normalization", "batch")], &x, &label, None),
            &batch,
            1e-6,
        );
        close(
            &grad(
                &[
                    ("use_ignore", "1"),
                    ("ignore_label", "0"),
                    ("normalization", "valid"),
                ],
                &x,
                &label,
                None,
            ),
            &[
                0.04268444702029228,
                0.11602836102247238,
                -0.18460223078727722,
                0.025889424607157707,
                0.0,
                0.0,
                0.0,
                0.0,
                0.18324688076972961,
                -0.33419138193130493,
                0.15002983808517456,
                0.0009146938100457191,
            ],
            1e-6,
        );
        close(
            &grad(&[("smooth_alpha", "0.3")], &x, &label, None)[..4],
            &[
                -0.014631107449531555,
                0.13205671310424805,
                -0.06920444965362549,
                -0.048221152275800705,
            ],
            1e-6,
        );
        // Probability labels of the data's shape.
        let probs = f32a(
            &[3, 4],
            &[0.1, 0.2, 0.3, 0.4, 0.1, 0.2, 0.3, 0.4, 0.1, 0.2, 0.3, 0.4],
        );
        close(
            &grad(&[], &x, &probs, None)[..4],
            &[
                -0.014631107449531555,
                0.032056719064712524,
                0.3307955265045166,
                -0.34822115302085876,
            ],
            1e-6,
        );
        // The label equal to ignore_label counts as invalid even without use_ignore.
        let x2 = f32a(&[2, 3], &[1.0, 2.0, 3.0, 0.0, 1.0, -1.0]);
        close(
            &grad(
                &[("normalization", "valid"), ("ignore_label", "1")],
                &x2,
                &f32a(&[2], &[1.0, 2.0]),
                None,
            ),
            &[
                0.09003060311079025,
                -0.7552716135978699,
                0.665241003036499,
                0.24472850561141968,
                0.665241003036499,
                -0.9099693894386292,
            ],
            1e-6,
        );
        // Out-of-range labels leave the softmax as it is.
        close(
            &grad(&[], &x2, &f32a(&[2], &[5.0, -2.0]), None),
            &[
                0.09003060311079025,
                0.24472850561141968,
                0.665241003036499,
                0.24472850561141968,
                0.665241003036499,
                0.09003060311079025,
            ],
            1e-6,
        );
    }

    #[test]
    fn multi_output_and_preserve_shape_match_mxnet() {
        let xv: Vec<f32> = (0..24).map(|i| ((i as f32 * 0.37) % 2.1) - 1.0).collect();
        let x = f32a(&[2, 3, 4], &xv);
        let label = f32a(&[2, 4], &[0.0, 1.0, 2.0, 1.0, 2.0, 2.0, 0.0, 1.0]);
        let null = grad(&[("multi_output", "1")], &x, &label, None);
        close(
            &null[..8],
            &[
                -0.21776729822158813,
                0.032232701778411865,
                0.06408440321683884,
                0.06408440321683884,
                0.14159640669822693,
                -0.10840360075235367,
                0.03447379916906357,
                -0.21552619338035583,
            ],
            1e-5,
        );
        let batch = grad(
            &[("multi_output", "1"), ("normalization", "batch")],
            &x,
            &label,
            None,
        );
        close(
            &batch[..2],
            &[-0.10888370126485825, 0.016116300597786903],
            1e-5,
        );
        let valid = grad(
            &[
                ("multi_output", "1"),
                ("normalization", "valid"),
                ("use_ignore", "1"),
                ("ignore_label", "1"),
            ],
            &x,
            &label,
            None,
        );
        close(
            &valid[..4],
            &[-0.17421390116214752, 0.0, 0.05126750096678734, 0.0],
            1e-5,
        );

        let label3 = f32a(&[2, 3], &[0.0, 1.0, 2.0, 2.0, 2.0, 0.0]);
        let ps = grad(
            &[("preserve_shape", "1"), ("normalization", "batch")],
            &x,
            &label3,
            None,
        );
        close(
            &ps[..4],
            &[
                -0.14467330276966095,
                0.031840600073337555,
                0.0460968017578125,
                0.0667359009385109,
            ],
            1e-5,
        );
        // Without either flag the data is flattened to (2, 12) and row i takes label i.
        let flat = grad(&[], &x, &label3, None);
        close(
            &[flat[0], flat[13]],
            &[-0.974358081817627, -0.9557350873947144],
            1e-5,
        );
    }

    #[test]
    fn out_grad_multiplies_by_the_head_gradient() {
        let x = f32a(&[1, 2], &[0.0, 0.0]);
        let og = f32a(&[1, 2], &[2.0, 3.0]);
        let g = grad(&[("out_grad", "1")], &x, &f32a(&[1], &[0.0]), Some(&og));
        close(&g, &[-1.0, 1.5], 1e-6);
    }

    #[test]
    fn shapes_requests_and_errors() {
        let so = op(&[]);
        let mut ins = vec![Some(Shape::from_slice(&[2, 3, 4])), None];
        let mut outs = vec![None];
        so.infer_shape_partial(&mut ins, &mut outs).unwrap();
        assert_eq!(ins[1].as_deref(), Some(&[2usize, 3][..]));
        assert_eq!(outs[0].as_deref(), Some(&[2usize, 3, 4][..]));
        let mo = op(&[("multi_output", "1")]);
        for (label, ok) in [
            (&[2usize, 20][..], true),
            (&[2, 4, 5], true),
            (&[2, 1, 4, 5], true),
            (&[2, 7], false),
        ] {
            let mut ins = vec![
                Some(Shape::from_slice(&[2, 3, 4, 5])),
                Some(Shape::from_slice(label)),
            ];
            assert_eq!(
                mo.infer_shape_partial(&mut ins, &mut [None]).is_ok(),
                ok,
                "{label:?}"
            );
        }
        let mut ins = vec![Some(Shape::from_slice(&[2, 3, 4, 5])), None];
        mo.infer_shape_partial(&mut ins, &mut [None]).unwrap();
        assert_eq!(ins[1].as_deref(), Some(&[2usize, 20][..]));
        let mut ins = vec![None, None];
        let mut outs = vec![Some(Shape::from_slice(&[4, 3]))];
        so.infer_shape_partial(&mut ins, &mut outs).unwrap();
        assert_eq!(ins[1].as_deref(), Some(&[4usize][..]));

        let Grad::Op(g) = so.gradient() else {
            panic!("no gradient")
        };
        assert!(g.ograds.is_empty());
        let dx = f32a(&[1, 2], &[1.0, 1.0]);
        run_req(
            &g.op,
            &[f32a(&[1], &[1.0]), f32a(&[1, 2], &[0.5, 0.5])],
            std::slice::from_ref(&dx),
            &[OpReq::Add],
        );
        assert_eq!(f32s(&dx), vec![1.5, 0.5]);

        let e = run_error(
            NAME,
            &[],
            &[f32a(&[2, 3], &[0.0; 6]), f32a(&[3], &[0.0; 3])],
        );
        assert!(e.contains("SoftmaxOutput") && e.contains("(3,)"), "{e}");
        assert!(try_run(NAME, &[("normalization", "sum")], &[f32a(&[1], &[0.0])]).is_err());
        assert!(try_run(
            NAME,
            &[],
            &[array::<i32>(&[1, 2], &[0, 0]), array::<i32>(&[1], &[0])]
        )
        .is_err());
    }
}
