//! CPU kernels of `Convolution` (1-D, 2-D and 3-D, grouped, strided, padded, dilated)
//! by im2col and GEMM, and of its backward.

use super::batch::{for_batch, reduce_partials, Chunked, Sink};
use super::im2col::{col2im, im2col};
use super::scratch::with_scratch;
use crate::error::Result;
use crate::kernels::cpu::linalg::{matmul, MatMul};
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::{self, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::nn::convolution::{Convolution, ConvolutionBackward, Plan};
use crate::op::{OpContext, OpReq};

impl Plan {
    /// Elements of one input sample.
    fn in_len(&self) -> usize {
        self.geom.image_len()
    }

    /// Elements of one output sample.
    fn out_len(&self) -> usize {
        self.filters * self.geom.cols()
    }

    /// Rows of the column matrix per group.
    fn k_group(&self) -> usize {
        self.geom.rows() / self.groups
    }

    fn f_group(&self) -> usize {
        self.filters / self.groups
    }

    /// Multiply-adds of the forward pass.
    fn work(&self) -> usize {
        self.batch * self.filters * self.k_group() * self.geom.cols()
    }
}

impl CpuKernel for Convolution {
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
        dispatch_float!("Convolution", inputs[0].dtype, T => {
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

/// `y (=|+=) conv(x, w) + b` over the whole batch.
pub fn forward_kernel<T: Num>(
    p: &Plan,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    y: &mut [T],
    add: bool,
) {
    let (in_len, out_len, cols) = (p.in_len(), p.out_len(), p.geom.cols());
    let (fg, kg) = (p.f_group(), p.k_group());
    let product = MatMul::new(fg, kg, false, kg, cols, false).expect("inner sizes agree");
    let one = |n: usize, y: &mut [T], threads: bool| {
        let x = &x[n * in_len..(n + 1) * in_len];
        let gemms = |col: &[T], y: &mut [T]| {
            for g in 0..p.groups {
                matmul(
                    &product,
                    &w[g * fg * kg..(g + 1) * fg * kg],
                    &col[g * kg * cols..(g + 1) * kg * cols],
                    &mut y[g * fg * cols..(g + 1) * fg * cols],
                    add,
                    threads,
                );
            }
        };
        if p.geom.win.is_identity() {
            gemms(x, y);
        } else {
            with_scratch::<T, _>(p.geom.rows() * cols, |col| {
                im2col(&p.geom, x, col);
                gemms(col, y);
            });
        }
        if let Some(b) = bias {
            for (row, &bv) in y.chunks_mut(cols).zip(b) {
                row.iter_mut().for_each(|v| *v = v.add(bv));
            }
        }
    };
    for_batch(p.batch, p.work(), y, out_len, one);
}

/// Gradients of a convolution: `dx` by col2im of `wᵀ·dy`, `dw` by `dy·colᵀ` summed over
/// the batch, `db` by summing `dy`.
pub fn backward_kernel<T: Num>(
    p: &Plan,
    dy: &[T],
    x: &[T],
    w: &[T],
    dx: Sink<T>,
    dw: Sink<T>,
    db: Sink<T>,
) {
    let (in_len, out_len, cols) = (p.in_len(), p.out_len(), p.geom.cols());
    let (fg, kg, rows) = (p.f_group(), p.k_group(), p.geom.rows());
    let dw_product = MatMul::new(fg, cols, false, kg, cols, true).expect("inner sizes agree");
    let dcol_product = MatMul::new(fg, kg, true, fg, cols, false).expect("inner sizes agree");
    let identity = p.geom.win.is_identity();
    let (dx_add, need_dw, need_db) = (dx.add(), dw.wanted(), db.wanted());
    let partials = Chunked::new(p.batch, p.work() * 2, dx.into_slice(), in_len).run(
        |samples, mut dx_chunk| {
            let mut dw_part = vec![T::ZERO; if need_dw { p.filters * kg } else { 0 }];
            let mut db_part = vec![T::ZERO; if need_db { p.filters } else { 0 }];
            let threads = samples.len() == p.batch;
            with_scratch::<T, _>(2 * rows * cols, |buf| {
                let (col, dcol) = buf.split_at_mut(rows * cols);
                for (i, n) in samples.clone().enumerate() {
                    let dy = &dy[n * out_len..(n + 1) * out_len];
                    let x = &x[n * in_len..(n + 1) * in_len];
                    if need_dw {
                        let col: &[T] = if identity {
                            x
                        } else {
                            im2col(&p.geom, x, col);
                            col
                        };
                        for g in 0..p.groups {
                            matmul(
                                &dw_product,
                                &dy[g * fg * cols..(g + 1) * fg * cols],
                                &col[g * kg * cols..(g + 1) * kg * cols],
                                &mut dw_part[g * fg * kg..(g + 1) * fg * kg],
                                true,
                                threads,
                            );
                        }
                    }
                    if let Some(dx) = dx_chunk.as_deref_mut() {
                        let dx = &mut dx[i * in_len..(i + 1) * in_len];
                        let direct = identity;
                        let target: &mut [T] = if direct { dx } else { dcol };
                        for g in 0..p.groups {
                            matmul(
                                &dcol_product,
                                &w[g * fg * kg..(g + 1) * fg * kg],
                                &dy[g * fg * cols..(g + 1) * fg * cols],
                                &mut target[g * kg * cols..(g + 1) * kg * cols],
                                direct && dx_add,
                                threads,
                            );
                        }
                        if !direct {
                            if !dx_add {
                                dx.fill(T::ZERO);
                            }
                            col2im(&p.geom, dcol, dx);
                        }
                    }
                    if need_db {
                        for (acc, row) in db_part.iter_mut().zip(dy.chunks(cols)) {
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

impl CpuKernel for ConvolutionBackward {
    fn forward(
        &self,
        _: &mut OpContext,
        inputs: &[TBlob],
        outputs: &[TBlob],
        req: &[OpReq],
    ) -> Result<()> {
        let p = self.fwd.plan(&inputs[1].shape)?;
        dispatch_float!("_backward_Convolution", inputs[1].dtype, T => {
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
    cpu::add::<Convolution>(k);
    cpu::add::<ConvolutionBackward>(k);
}
