//! CPU kernels of `Embedding`: looks up rows of `weight` by the indices in `data`
//! (clipped to the vocabulary, as MXNet does); the backward scatter-adds into the
//! weight's gradient.

use super::common::put;
use crate::dispatch_num;
use crate::dtype::Element;
use crate::error::Result;
use crate::kernels::cpu::map::{pool_shares_work, PAR_MIN};
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::nn::embedding::{Embedding, EmbeddingBackward, NAME};
use crate::op::{OpContext, OpReq, Operator};
use rayon::prelude::*;

impl Embedding {
    /// The rows the indices in `data` select, clipped to `[0, input_dim)`.
    fn rows(&self, data: &TBlob) -> Result<Vec<usize>> {
        let last = self.input_dim.saturating_sub(1) as f64;
        Ok(dispatch_num!(NAME, data.dtype, I => {
            data.slice::<I>()
                .iter()
                .map(|v| v.to_f64().trunc().clamp(0.0, last) as usize)
                .collect()
        }))
    }
}

impl CpuKernel for Embedding {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null || self.output_dim == 0 {
            return Ok(());
        }
        let rows = self.rows(&io.inputs[0])?;
        let add = io.req[0] == OpReq::Add;
        let od = self.output_dim;
        dispatch_num!(NAME, io.inputs[1].dtype, T => {
            let w = io.inputs[1].slice::<T>();
            let out = io.outputs[0].slice_mut::<T>();
            let gather = |(i, o): (usize, &mut [T])| {
                let src = &w[rows[i] * od..(rows[i] + 1) * od];
                if add {
                    o.iter_mut().zip(src).for_each(|(o, &v)| put(o, v, true));
                } else {
                    o.copy_from_slice(src);
                }
            };
            if out.len() < PAR_MIN || !pool_shares_work() {
                out.chunks_mut(od).enumerate().for_each(gather);
            } else {
                out.par_chunks_mut(od).enumerate().for_each(gather);
            }
        });
        Ok(())
    }
}

impl CpuKernel for EmbeddingBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let rows = self.0.rows(&io.inputs[1])?;
        let od = self.0.output_dim;
        dispatch_num!(self.name(), io.inputs[0].dtype, T => {
            let g = io.inputs[0].slice::<T>();
            let dw = io.outputs[0].slice_mut::<T>();
            if io.req[0] != OpReq::Add {
                dw.fill(T::ZERO);
            }
            scatter_add(g, &rows, od, dw);
        });
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Embedding>(k);
    cpu::add::<EmbeddingBackward>(k);
}

/// `dw[rows[i]] += g[i]` for every index; repeated rows accumulate. Large gradients are
/// split by columns so that threads never write the same element.
fn scatter_add<T: Num>(g: &[T], rows: &[usize], od: usize, dw: &mut [T]) {
    if od == 0 {
        return;
    }
    let threads = rayon::current_num_threads().max(1);
    if g.len() < PAR_MIN || threads == 1 || od < 32 {
        for (i, &r) in rows.iter().enumerate() {
            let dst = &mut dw[r * od..(r + 1) * od];
            for (d, &v) in dst.iter_mut().zip(&g[i * od..(i + 1) * od]) {
                *d = d.add(v);
            }
        }
        return;
    }
    let per = od.div_ceil(threads).max(16);
    let parts: Vec<(usize, usize)> = (0..od)
        .step_by(per)
        .map(|c| (c, (c + per).min(od)))
        .collect();
    let base = dw.as_mut_ptr() as usize;
    parts.into_par_iter().for_each(|(c0, c1)| {
        for (i, &r) in rows.iter().enumerate() {
            let src = &g[i * od + c0..i * od + c1];
            for (k, &v) in src.iter().enumerate() {
                // SAFETY: each task writes only columns c0..c1 of every row, disjoint from
                // every other task's columns, and `r * od + c1 <= dw.len()` since rows are
                // clipped to the weight's rows; `dw` outlives the parallel loop.
                unsafe {
                    let p = (base as *mut T).add(r * od + c0 + k);
                    *p = (*p).add(v);
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::kernels::cpu::testing::{build, close, f64s, run_req};
    use crate::op::testutil::{array, f32a, f32s, gradcheck, run, try_run};
    use crate::op::{Grad, OpRef};
    use crate::shape::Shape;

    fn op(attrs: &[(&str, &str)]) -> OpRef {
        build(NAME, attrs)
    }

    fn weight() -> crate::ndarray::NDArray {
        f32a(
            &[5, 3],
            &(0..15).map(|i| i as f32 * 0.5).collect::<Vec<_>>(),
        )
    }

    #[test]
    fn forward_matches_mxnet() {
        let idx = f32a(&[2, 2], &[-1.0, 10.0, 1.7, 2.0]);
        let y = run(
            NAME,
            &[("input_dim", "5"), ("output_dim", "3")],
            &[idx, weight()],
        );
        assert_eq!(y[0].shape(), &[2, 2, 3]);
        close(
            &f64s(&y[0]),
            &[0.0, 0.5, 1.0, 6.0, 6.5, 7.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0],
            0.0,
        );
        let idx = array::<i32>(&[2], &[4, 0]);
        let y = run(
            NAME,
            &[("input_dim", "5"), ("output_dim", "3")],
            &[idx, weight()],
        );
        assert_eq!(f32s(&y[0]), vec![6.0, 6.5, 7.0, 0.0, 0.5, 1.0]);
    }

    #[test]
    fn backward_matches_mxnet() {
        let e = op(&[("input_dim", "5"), ("output_dim", "3")]);
        let Grad::Op(g) = e.gradient() else {
            panic!("no gradient")
        };
        assert_eq!(g.grad_of, vec![1]);
        let og = f32a(&[2, 2, 3], &(0..12).map(|i| i as f32).collect::<Vec<_>>());
        let idx = f32a(&[2, 2], &[0.0, 2.0, 2.0, 4.0]);
        let dw =
            crate::imperative::invoke(&g.op, &[og.clone(), idx.clone()], None, None, true).unwrap();
        let want = [
            0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 9.0, 11.0, 13.0, 0.0, 0.0, 0.0, 9.0, 10.0, 11.0,
        ];
        close(&f64s(&dw[0]), &want, 0.0);
        let acc = f32a(&[5, 3], &[1.0; 15]);
        run_req(&g.op, &[og, idx], std::slice::from_ref(&acc), &[OpReq::Add]);
        close(
            &f64s(&acc),
            &want.iter().map(|v| v + 1.0).collect::<Vec<_>>(),
            0.0,
        );
    }

    #[test]
    fn gradient_is_numeric_and_parallel_scatter_agrees() {
        let e = op(&[
            ("input_dim", "4"),
            ("output_dim", "2"),
            ("dtype", "float64"),
        ]);
        let idx = array::<f64>(&[3], &[1.0, 3.0, 1.0]);
        let w = array::<f64>(&[4, 2], &[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]);
        gradcheck(&e, &[idx, w], &[1], 1e-6, 1e-8);

        // Large enough to take the column-split path.
        let (n, od, vocab) = (3000, 64, 50);
        let rows: Vec<usize> = (0..n).map(|i| (i * 7) % vocab).collect();
        let g: Vec<f32> = (0..n * od).map(|i| (i % 13) as f32).collect();
        let mut par = vec![0f32; vocab * od];
        scatter_add(&g, &rows, od, &mut par);
        let mut serial = vec![0f32; vocab * od];
        for (i, &r) in rows.iter().enumerate() {
            for k in 0..od {
                serial[r * od + k] += g[i * od + k];
            }
        }
        assert_eq!(par, serial);
    }

    #[test]
    fn shapes_types_and_errors() {
        let e = op(&[("input_dim", "10"), ("output_dim", "4")]);
        let mut ins = vec![Some(Shape::from_slice(&[2, 3])), None];
        let mut outs = vec![None];
        e.infer_shape_partial(&mut ins, &mut outs).unwrap();
        assert_eq!(ins[1].as_deref(), Some(&[10usize, 4][..]));
        assert_eq!(outs[0].as_deref(), Some(&[2usize, 3, 4][..]));
        let mut ins = vec![None, None];
        let mut outs = vec![Some(Shape::from_slice(&[7, 4]))];
        e.infer_shape_partial(&mut ins, &mut outs).unwrap();
        assert_eq!(ins[0].as_deref(), Some(&[7usize][..]));
        let mut ins = vec![
            Some(Shape::from_slice(&[2])),
            Some(Shape::from_slice(&[10, 5])),
        ];
        let err = e.infer_shape_partial(&mut ins, &mut [None]).unwrap_err();
        assert!(err.to_string().contains("Embedding") && err.to_string().contains("(10, 5)"));

        assert_eq!(
            e.infer_type(&[DType::I32, DType::F32]).unwrap(),
            vec![DType::F32]
        );
        let h = op(&[
            ("input_dim", "10"),
            ("output_dim", "4"),
            ("dtype", "float16"),
        ]);
        let mut ins = vec![Some(DType::F32), None];
        let mut outs = vec![None];
        h.infer_type_partial(&mut ins, &mut outs).unwrap();
        assert_eq!((ins[1], outs[0]), (Some(DType::F16), Some(DType::F16)));
        assert!(h.infer_type(&[DType::F32, DType::F32]).is_err());

        assert!(try_run(NAME, &[("input_dim", "5")], &[f32a(&[1], &[0.0]), weight()]).is_err());
        assert!(try_run(
            NAME,
            &[("input_dim", "0"), ("output_dim", "3")],
            &[f32a(&[1], &[0.0]), weight()]
        )
        .is_err());
        assert!(try_run(
            NAME,
            &[("input_dim", "4"), ("output_dim", "3")],
            &[f32a(&[1], &[0.0]), weight()]
        )
        .is_err());
    }
}
