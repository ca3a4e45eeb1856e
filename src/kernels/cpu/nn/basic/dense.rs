//! CPU kernels of `FullyConnected`: `out = data · weightᵀ + bias` through GEMM, and its
//! backward.

use super::common::{ld, put, st};
use crate::dispatch_float;
use crate::error::Result;
use crate::kernels::cpu::linalg::{matmul, MatMul};
use crate::kernels::cpu::map::{pool_shares_work, PAR_MIN};
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::nn::dense::{Fc, FcBackward, NAME};
use crate::op::{OpContext, OpReq, Operator};
use num_traits::Float;
use rayon::prelude::*;

impl CpuKernel for Fc {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let (rows, k) = self.matrix(&io.inputs[0].shape)?;
        let d = MatMul::new(rows, k, false, self.num_hidden, k, true)
            .expect("weight columns match the data");
        let add = io.req[0] == OpReq::Add;
        dispatch_float!(NAME, io.inputs[0].dtype, T, F => {
            let out = io.outputs[0].slice_mut::<T>();
            let (x, w) = (io.inputs[0].slice::<T>(), io.inputs[1].slice::<T>());
            let bias = (!self.no_bias).then(|| io.inputs[2].slice::<T>());
            match bias {
                Some(b) if !add => {
                    // Start from the bias in every row and let the product accumulate.
                    out.chunks_mut(self.num_hidden).for_each(|r| r.copy_from_slice(b));
                    if k > 0 {
                        matmul(&d, x, w, out, true, true);
                    }
                }
                _ => {
                    if k > 0 {
                        matmul(&d, x, w, out, add, true);
                    } else if !add {
                        out.fill(T::ZERO);
                    }
                    if let Some(b) = bias {
                        out.chunks_mut(self.num_hidden).for_each(|r| {
                            r.iter_mut().zip(b).for_each(|(o, &v)| *o = o.add(v))
                        });
                    }
                }
            }
        });
        Ok(())
    }
}

impl CpuKernel for FcBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let nh = self.0.num_hidden;
        let (rows, k) = self.0.matrix(&io.inputs[1].shape)?;
        let both = io.req[0] != OpReq::Null
            && io.req[1] != OpReq::Null
            && rayon::current_num_threads() > 1
            && rows * nh * k >= 1 << 20;
        dispatch_float!(self.name(), io.inputs[0].dtype, T, F => {
            let (g, x, w) = (
                io.inputs[0].slice::<T>(),
                io.inputs[1].slice::<T>(),
                io.inputs[2].slice::<T>(),
            );
            // d data = g · W, (rows × nh) · (nh × k).
            let data_grad = || product(
                &MatMul::new(rows, nh, false, nh, k, false).expect("inner dims agree"),
                g,
                w,
                &io.outputs[0],
                io.req[0],
                !both,
            );
            // d weight = gᵀ · X, (nh × rows) · (rows × k), and d bias.
            let weight_grad = || {
                product(
                    &MatMul::new(rows, nh, true, rows, k, false).expect("inner dims agree"),
                    g,
                    x,
                    &io.outputs[1],
                    io.req[1],
                    !both,
                );
                if !self.0.no_bias {
                    column_sums::<T, F>(g, nh, io.outputs[2].slice_mut::<T>(), io.req[2]);
                }
            };
            // Two products of the same size run side by side, one thread each, rather
            // than one after the other on all threads: less splitting, same work.
            if both {
                rayon::join(data_grad, weight_grad);
            } else {
                data_grad();
                weight_grad();
            }
        });
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Fc>(k);
    cpu::add::<FcBackward>(k);
}

/// `out (=|+=) op(a) · op(b)` honouring the request, with an empty inner dimension giving
/// zeros.
fn product<T: Num>(d: &MatMul, a: &[T], b: &[T], out: &TBlob, req: OpReq, threads: bool) {
    if req == OpReq::Null {
        return;
    }
    let add = req == OpReq::Add;
    let dst = out.slice_mut::<T>();
    if d.k == 0 {
        if !add {
            dst.fill(T::ZERO);
        }
        return;
    }
    matmul(d, a, b, dst, add, threads);
}

/// `out[j] (=|+=) Σ_r g[r, j]` over the rows of a row-major `g` with `cols` columns.
fn column_sums<T: Num, F: Float + 'static + Send + Sync>(
    g: &[T],
    cols: usize,
    out: &mut [T],
    req: OpReq,
) {
    if req == OpReq::Null || cols == 0 {
        return;
    }
    let add = req == OpReq::Add;
    let sum_cols = |c0: usize, o: &mut [T]| {
        let mut acc = vec![F::zero(); o.len()];
        for row in g.chunks_exact(cols) {
            for (a, &v) in acc.iter_mut().zip(&row[c0..c0 + o.len()]) {
                *a = *a + ld::<T, F>(v);
            }
        }
        for (o, a) in o.iter_mut().zip(acc) {
            put(o, st::<F, T>(a), add);
        }
    };
    if g.len() < PAR_MIN || cols < 64 || !pool_shares_work() {
        sum_cols(0, out);
    } else {
        let per = cols.div_ceil(rayon::current_num_threads().max(1)).max(32);
        out.par_chunks_mut(per)
            .enumerate()
            .for_each(|(c, o)| sum_cols(c * per, o));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cpu::testing::{build, close, f64s, run_error, run_req};

    use crate::op::testutil::{array, f32a, f32s, gradcheck, run, try_run};
    use crate::op::{Grad, OpRef};
    use crate::shape::Shape;

    fn seq(shape: &[usize], scale: f32, shift: f32) -> crate::ndarray::NDArray {
        let n: usize = shape.iter().product();
        f32a(
            shape,
            &(0..n).map(|i| i as f32 * scale + shift).collect::<Vec<_>>(),
        )
    }

    fn op(attrs: &[(&str, &str)]) -> OpRef {
        build(NAME, attrs)
    }

    #[test]
    fn forward_matches_mxnet() {
        let x = seq(&[2, 2, 3], 0.25, -1.0);
        let w = seq(&[4, 6], 0.1, -1.2);
        let b = f32a(&[4], &[0.5, -0.5, 1.0, 0.0]);
        let y = run(NAME, &[("num_hidden", "4")], &[x.clone(), w, b]);
        assert_eq!(y[0].shape(), &[2, 4]);
        let want = [3.075, 0.725, 0.875, -1.475, -5.475, -2.425, 3.125, 6.175];
        close(&f64s(&y[0]), &want, 1e-5);

        let w2 = seq(&[4, 3], 0.1, -0.6);
        let y = run(
            NAME,
            &[
                ("num_hidden", "4"),
                ("no_bias", "True"),
                ("flatten", "False"),
            ],
            &[x, w2],
        );
        assert_eq!(y[0].shape(), &[2, 2, 4]);
        let want = [
            1.175, 0.5, -0.175, -0.85, 0.05, 0.05, 0.05, 0.05, -1.075, -0.4, 0.275, 0.95, -2.2,
            -0.85, 0.5, 1.85,
        ];
        close(&f64s(&y[0]), &want, 1e-5);
    }

    #[test]
    fn backward_matches_mxnet() {
        let fc = op(&[("num_hidden", "4")]);
        let Grad::Op(g) = fc.gradient() else {
            panic!("no gradient")
        };
        let og = seq(&[2, 4], 0.5, -1.0);
        let x = seq(&[2, 2, 3], 0.25, -1.0);
        let w = seq(&[4, 6], 0.1, -1.2);
        let outs = crate::imperative::invoke(&g.op, &[og, x, w], None, None, true).unwrap();
        close(
            &f64s(&outs[0]),
            &[1.8, 1.7, 1.6, 1.5, 1.4, 1.3, -0.6, 0.1, 0.8, 1.5, 2.2, 2.9],
            1e-5,
        );
        close(
            &f64s(&outs[1]),
            &[
                1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 1.0, 1.5, 2.0, 2.5,
                3.0, 3.5, 0.75, 1.5, 2.25, 3.0, 3.75, 4.5,
            ],
            1e-5,
        );
        close(&f64s(&outs[2]), &[0.0, 1.0, 2.0, 3.0], 1e-6);
    }

    #[test]
    fn gradients_are_numeric() {
        let v = |n: usize, s: f64| {
            (0..n)
                .map(|i| ((i * 5 % 7) as f64 - 3.0) * s)
                .collect::<Vec<_>>()
        };
        let x = array::<f64>(&[3, 2, 2], &v(12, 0.3));
        let w = array::<f64>(&[5, 4], &v(20, 0.2));
        let b = array::<f64>(&[5], &v(5, 0.1));
        gradcheck(
            &op(&[("num_hidden", "5")]),
            &[x.clone(), w, b],
            &[0, 1, 2],
            1e-6,
            1e-6,
        );
        let w = array::<f64>(&[5, 2], &v(10, 0.2));
        let nf = op(&[("num_hidden", "5"), ("flatten", "0"), ("no_bias", "1")]);
        gradcheck(&nf, &[x, w], &[0, 1], 1e-6, 1e-6);
    }

    #[test]
    fn add_request_accumulates() {
        let fc = op(&[("num_hidden", "2")]);
        let x = f32a(&[1, 2], &[1.0, 2.0]);
        let w = f32a(&[2, 2], &[1.0, 0.0, 0.0, 1.0]);
        let b = f32a(&[2], &[10.0, 20.0]);
        let out = f32a(&[1, 2], &[100.0, 200.0]);
        run_req(
            &fc,
            &[x.clone(), w.clone(), b],
            std::slice::from_ref(&out),
            &[OpReq::Add],
        );
        assert_eq!(f32s(&out), vec![111.0, 222.0]);

        let Grad::Op(g) = fc.gradient() else {
            panic!("no gradient")
        };
        let og = f32a(&[1, 2], &[1.0, 1.0]);
        let (dx, dw, db) = (
            f32a(&[1, 2], &[1.0, 1.0]),
            f32a(&[2, 2], &[1.0; 4]),
            f32a(&[2], &[1.0, 1.0]),
        );
        run_req(
            &g.op,
            &[og, x, w],
            &[dx.clone(), dw.clone(), db.clone()],
            &[OpReq::Add, OpReq::Add, OpReq::Null],
        );
        assert_eq!(f32s(&dx), vec![2.0, 2.0]);
        assert_eq!(f32s(&dw), vec![2.0, 3.0, 2.0, 3.0]);
        assert_eq!(f32s(&db), vec![1.0, 1.0]);
    }

    #[test]
    fn shapes_are_inferred_both_ways() {
        let fc = op(&[("num_hidden", "4")]);
        assert_eq!(fc.input_names().unwrap(), vec!["data", "weight", "bias"]);
        let mut ins = vec![Some(Shape::from_slice(&[2, 3, 5])), None, None];
        let mut outs = vec![None];
        fc.infer_shape_partial(&mut ins, &mut outs).unwrap();
        assert_eq!(ins[1].as_deref(), Some(&[4usize, 15][..]));
        assert_eq!(ins[2].as_deref(), Some(&[4usize][..]));
        assert_eq!(outs[0].as_deref(), Some(&[2usize, 4][..]));

        // Unknown data: nothing to infer yet.
        let mut ins = vec![None, Some(Shape::from_slice(&[4, 15])), None];
        let mut outs = vec![None];
        fc.infer_shape_partial(&mut ins, &mut outs).unwrap();
        assert!(ins[0].is_none() && outs[0].is_none());

        // A (num_hidden, 1) bias is accepted, a wrong one is not.
        let mut ins = vec![
            Some(Shape::from_slice(&[2, 15])),
            None,
            Some(Shape::from_slice(&[4, 1])),
        ];
        fc.infer_shape_partial(&mut ins, &mut [None]).unwrap();
        let mut ins = vec![
            Some(Shape::from_slice(&[2, 15])),
            None,
            Some(Shape::from_slice(&[5])),
        ];
        let e = fc.infer_shape_partial(&mut ins, &mut [None]).unwrap_err();
        assert!(e.to_string().contains("FullyConnected") && e.to_string().contains("bias"));

        let nf = op(&[
            ("num_hidden", "4"),
            ("flatten", "False"),
            ("no_bias", "True"),
        ]);
        assert_eq!(nf.input_names().unwrap(), vec!["data", "weight"]);
        let out = nf
            .infer_shape(&[Shape::from_slice(&[2, 3, 5]), Shape::from_slice(&[4, 5])])
            .unwrap();
        assert_eq!(out[0].as_slice(), &[2, 3, 4]);
    }

    #[test]
    fn bad_inputs_are_errors() {
        let x = seq(&[2, 3], 1.0, 0.0);
        let e = run_error(
            NAME,
            &[("num_hidden", "4")],
            &[x.clone(), seq(&[4, 2], 1.0, 0.0), seq(&[4], 1.0, 0.0)],
        );
        assert!(e.contains("weight"), "{e}");
        assert!(try_run(NAME, &[], std::slice::from_ref(&x)).is_err());
        assert!(try_run(NAME, &[("num_hidden", "0")], std::slice::from_ref(&x)).is_err());
        assert!(try_run(
            NAME,
            &[("num_hidden", "2"), ("no_bias", "1")],
            std::slice::from_ref(&x)
        )
        .is_err());
        let xi = array::<i32>(&[2, 3], &[1; 6]);
        let wi = array::<i32>(&[4, 3], &[1; 12]);
        let bi = array::<i32>(&[4], &[1; 4]);
        assert!(try_run(NAME, &[("num_hidden", "4")], &[xi, wi, bi]).is_err());
    }
}
