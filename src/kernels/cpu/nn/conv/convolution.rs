//! CPU kernels of `Convolution` (1-D, 2-D and 3-D, grouped, strided, padded, dilated)
//! by im2col and GEMM, and of its backward.

use super::batch::{for_batch, reduce_partials, Chunked};
use super::im2col::{col2im, im2col};
use super::layer::{Backward, ColumnLayer, Forward};
use crate::error::Result;
use crate::kernels::cpu;
use crate::kernels::cpu::linalg::{matmul, MatMul};
use crate::kernels::cpu::num::Num;
use crate::kernels::Kernels;
use crate::op::nn::convolution::{Convolution, ConvolutionBackward, Plan};

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

impl ColumnLayer for Convolution {
    type Plan = Plan;

    fn column_plan(&self, data: &[usize]) -> Result<Plan> {
        self.plan(data)
    }

    fn batch_work(p: &Plan) -> (usize, usize) {
        (p.batch, p.work())
    }

    fn scratch(p: &Plan) -> (usize, usize) {
        let col = p.geom.rows() * p.geom.cols();
        // A 1×1 unit window reads the data as is; the backward keeps a column matrix and
        // its gradient.
        (if p.geom.win.is_identity() { 0 } else { col }, 2 * col)
    }

    fn forward_loop<T: Num>(p: &Plan, a: Forward<'_, T>, scratch: &mut [T]) {
        let Forward { x, w, bias, y, add } = a;
        let (in_len, out_len, cols) = (p.in_len(), p.out_len(), p.geom.cols());
        let (fg, kg) = (p.f_group(), p.k_group());
        let product = MatMul::new(fg, kg, false, kg, cols, false).expect("inner sizes agree");
        let one = |n: usize, y: &mut [T], col: &mut [T], threads: bool| {
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
                im2col(&p.geom, x, col);
                gemms(col, y);
            }
            if let Some(b) = bias {
                for (row, &bv) in y.chunks_mut(cols).zip(b) {
                    row.iter_mut().for_each(|v| *v = v.add(bv));
                }
            }
        };
        for_batch(p.batch, p.work(), y, out_len, scratch, one);
    }

    fn backward_loop<T: Num>(p: &Plan, a: Backward<'_, T>, scratch: &mut [T]) {
        let Backward {
            dy,
            x,
            w,
            dx,
            dw,
            db,
        } = a;
        let (in_len, out_len, cols) = (p.in_len(), p.out_len(), p.geom.cols());
        let (fg, kg, rows) = (p.f_group(), p.k_group(), p.geom.rows());
        let dw_product = MatMul::new(fg, cols, false, kg, cols, true).expect("inner sizes agree");
        let dcol_product = MatMul::new(fg, kg, true, fg, cols, false).expect("inner sizes agree");
        let identity = p.geom.win.is_identity();
        let (dx_add, need_dw, need_db) = (dx.add(), dw.wanted(), db.wanted());
        let chunks = Chunked::new(p.batch, p.work() * 2, dx.into_slice(), in_len, scratch);
        let partials = chunks.run(|samples, mut dx_chunk, buf| {
            let mut dw_part = vec![T::ZERO; if need_dw { p.filters * kg } else { 0 }];
            let mut db_part = vec![T::ZERO; if need_db { p.filters } else { 0 }];
            let threads = samples.len() == p.batch;
            {
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
            }
            (dw_part, db_part)
        });
        let (dws, dbs): (Vec<_>, Vec<_>) = partials.into_iter().unzip();
        reduce_partials(dw, &dws);
        reduce_partials(db, &dbs);
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Convolution>(k);
    cpu::add::<ConvolutionBackward>(k);
}
