//! CPU kernels of `Deconvolution` (transposed convolution, 1-D to 3-D) by GEMM and
//! col2im, and of its backward.
//!
//! The output is the image a convolution with the same window would read: its column
//! matrix is `wᵀ·x` per group, folded back with col2im.

use super::batch::{for_batch, reduce_partials, Chunked, Sink};
use super::im2col::{col2im, im2col};
use super::scratch::with_scratch;
use crate::error::Result;
use crate::kernels::cpu::linalg::{matmul, MatMul};
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::{self, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::nn::deconvolution::{Deconvolution, DeconvolutionBackward, Plan};
use crate::op::{OpContext, OpReq};

impl Plan {
    fn in_len(&self) -> usize {
        self.in_channels * self.geom.cols()
    }

    fn out_len(&self) -> usize {
        self.geom.image_len()
    }

    fn c_group(&self) -> usize {
        self.in_channels / self.groups
    }

    fn k_group(&self) -> usize {
        self.geom.rows() / self.groups
    }

    fn work(&self) -> usize {
        self.batch * self.c_group() * self.geom.rows() * self.geom.cols()
    }
}

impl CpuKernel for Deconvolution {
    fn forward(
        &self,
        _: &mut OpContext,
        inputs: &[TBlob],
        outputs: &[TBlob],
        req: &[OpReq],
    ) -> Result<()> {
        if req[0] == OpReq::Null {
            return Ok(());
        }
        let p = self.plan(&inputs[0].shape)?;
        let add = req[0] == OpReq::Add;
        dispatch_float!("Deconvolution", inputs[0].dtype, T => {
            let bias = (!self.args.no_bias).then(|| inputs[2].slice::<T>());
            forward_kernel::<T>(
                &p,
                inputs[0].slice(),
                inputs[1].slice(),
                bias,
                outputs[0].slice_mut(),
                add,
            );
        });
        Ok(())
    }
}

fn forward_kernel<T: Num>(p: &Plan, x: &[T], w: &[T], bias: Option<&[T]>, y: &mut [T], add: bool) {
    let (in_len, cols) = (p.in_len(), p.geom.cols());
    let (cg, kg) = (p.c_group(), p.k_group());
    let product = MatMul::new(cg, kg, true, cg, cols, false).expect("inner sizes agree");
    let identity = p.geom.win.is_identity();
    let one = |n: usize, y: &mut [T], threads: bool| {
        let x = &x[n * in_len..(n + 1) * in_len];
        let gemms = |col: &mut [T], add: bool| {
            for g in 0..p.groups {
                matmul(
                    &product,
                    &w[g * cg * kg..(g + 1) * cg * kg],
                    &x[g * cg * cols..(g + 1) * cg * cols],
                    &mut col[g * kg * cols..(g + 1) * kg * cols],
                    add,
                    threads,
                );
            }
        };
        if identity {
            gemms(y, add);
        } else {
            with_scratch::<T, _>(p.geom.rows() * cols, |col| {
                gemms(col, false);
                if !add {
                    y.fill(T::ZERO);
                }
                col2im(&p.geom, col, y);
            });
        }
        if let Some(b) = bias {
            let plane = p.out_len() / b.len().max(1);
            for (row, &bv) in y.chunks_mut(plane.max(1)).zip(b) {
                row.iter_mut().for_each(|v| *v = v.add(bv));
            }
        }
    };
    for_batch(p.batch, p.work(), y, p.out_len(), one);
}

fn backward_kernel<T: Num>(
    p: &Plan,
    dy: &[T],
    x: &[T],
    w: &[T],
    dx: Sink<T>,
    dw: Sink<T>,
    db: Sink<T>,
) {
    let (in_len, out_len, cols, rows) = (p.in_len(), p.out_len(), p.geom.cols(), p.geom.rows());
    let (cg, kg) = (p.c_group(), p.k_group());
    let dx_product = MatMul::new(cg, kg, false, kg, cols, false).expect("inner sizes agree");
    let dw_product = MatMul::new(cg, cols, false, kg, cols, true).expect("inner sizes agree");
    let identity = p.geom.win.is_identity();
    let (dx_add, need_dw, need_db) = (dx.add(), dw.wanted(), db.wanted());
    let filters = p.geom.channels;
    let plane = out_len / filters.max(1);
    let partials = Chunked::new(p.batch, p.work() * 2, dx.into_slice(), in_len).run(
        |samples, mut dx_chunk| {
            let mut dw_part = vec![T::ZERO; if need_dw { p.in_channels * kg } else { 0 }];
            let mut db_part = vec![T::ZERO; if need_db { filters } else { 0 }];
            let threads = samples.len() == p.batch;
            with_scratch::<T, _>(rows * cols, |buf| {
                for (i, n) in samples.clone().enumerate() {
                    let dy = &dy[n * out_len..(n + 1) * out_len];
                    let x = &x[n * in_len..(n + 1) * in_len];
                    let col: &[T] = if identity {
                        dy
                    } else {
                        im2col(&p.geom, dy, buf);
                        buf
                    };
                    if let Some(dx) = dx_chunk.as_deref_mut() {
                        let dx = &mut dx[i * in_len..(i + 1) * in_len];
                        for g in 0..p.groups {
                            matmul(
                                &dx_product,
                                &w[g * cg * kg..(g + 1) * cg * kg],
                                &col[g * kg * cols..(g + 1) * kg * cols],
                                &mut dx[g * cg * cols..(g + 1) * cg * cols],
                                dx_add,
                                threads,
                            );
                        }
                    }
                    if need_dw {
                        for g in 0..p.groups {
                            matmul(
                                &dw_product,
                                &x[g * cg * cols..(g + 1) * cg * cols],
                                &col[g * kg * cols..(g + 1) * kg * cols],
                                &mut dw_part[g * cg * kg..(g + 1) * cg * kg],
                                true,
                                threads,
                            );
                        }
                    }
                    if need_db {
                        for (acc, row) in db_part.iter_mut().zip(dy.chunks(plane.max(1))) {
                            *acc = row.iter().fold(*acc, |s, &v| s.add(v));
                        }
                    }
                }
            });
            (dw_part, db_part)
        },
    );
    let (dws, dbs): (Vec<_>, Vec<_>) = partials.into_iter().unzip();
    reduce_partials(dw, &dws);
    reduce_partials(db, &dbs);
}

impl CpuKernel for DeconvolutionBackward {
    fn forward(
        &self,
        _: &mut OpContext,
        inputs: &[TBlob],
        outputs: &[TBlob],
        req: &[OpReq],
    ) -> Result<()> {
        let p = self.fwd.plan(&inputs[1].shape)?;
        dispatch_float!("_backward_Deconvolution", inputs[1].dtype, T => {
            let sink = |i: usize| Sink::new(outputs.get(i), req.get(i).copied());
            backward_kernel::<T>(
                &p,
                inputs[0].slice(),
                inputs[1].slice(),
                inputs[2].slice(),
                sink(0),
                sink(1),
                sink(2),
            );
        });
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Deconvolution>(k);
    cpu::add::<DeconvolutionBackward>(k);
}
