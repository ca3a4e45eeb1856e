//! CPU kernels of `Deconvolution` (transposed convolution, 1-D to 3-D) by GEMM and
//! col2im, and of its backward.
//!
//! The output is the image a convolution with the same window would read: its column
//! matrix is `wᵀ·x` per group, folded back with col2im.

use super::batch::{for_batch, reduce_partials, Chunked};
use super::im2col::{col2im, im2col};
use super::layer::{Backward, ColumnLayer, Forward};
use crate::error::Result;
use crate::kernels::cpu;
use crate::kernels::cpu::linalg::{matmul, MatMul};
use crate::kernels::cpu::num::Num;
use crate::kernels::Kernels;
use crate::op::nn::deconvolution::{Deconvolution, DeconvolutionBackward, Plan};

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

impl ColumnLayer for Deconvolution {
    type Plan = Plan;

    fn column_plan(&self, data: &[usize]) -> Result<Plan> {
        self.plan(data)
    }

    fn batch_work(p: &Plan) -> (usize, usize) {
        (p.batch, p.work())
    }

    fn scratch<T: Num>(p: &Plan) -> (usize, usize) {
        let col = p.geom.rows() * p.geom.cols();
        // A 1×1 unit window writes the output as is.
        (if p.geom.win.is_identity() { 0 } else { col }, col)
    }

    fn forward_loop<T: Num>(p: &Plan, a: Forward<'_, T>, scratch: &mut [T]) {
        let Forward {
            x, w, post, y, add, ..
        } = a;
        assert!(post.is_bias_only(), "Deconvolution: only a bias after it");
        let bias = post.shift;
        let (in_len, cols) = (p.in_len(), p.geom.cols());
        let (cg, kg) = (p.c_group(), p.k_group());
        let product = MatMul::new(cg, kg, true, cg, cols, false).expect("inner sizes agree");
        let identity = p.geom.win.is_identity();
        let one = |n: usize, y: &mut [T], col: &mut [T], threads: bool| {
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
                gemms(col, false);
                if !add {
                    y.fill(T::ZERO);
                }
                col2im(&p.geom, col, y);
            }
            if let Some(b) = bias {
                let plane = p.out_len() / b.len().max(1);
                for (row, &bv) in y.chunks_mut(plane.max(1)).zip(b) {
                    row.iter_mut().for_each(|v| *v = v.add(bv));
                }
            }
        };
        for_batch(p.batch, p.work(), y, p.out_len(), scratch, one);
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
        let (cg, kg) = (p.c_group(), p.k_group());
        let dx_product = MatMul::new(cg, kg, false, kg, cols, false).expect("inner sizes agree");
        let dw_product = MatMul::new(cg, cols, false, kg, cols, true).expect("inner sizes agree");
        let identity = p.geom.win.is_identity();
        let (dx_add, need_dw, need_db) = (dx.add(), dw.wanted(), db.wanted());
        let filters = p.geom.channels;
        let plane = out_len / filters.max(1);
        let chunks = Chunked::new(p.batch, p.work() * 2, dx.into_slice(), in_len, scratch);
        let partials = chunks.run(|samples, mut dx_chunk, buf| {
            let mut dw_part = vec![T::ZERO; if need_dw { p.in_channels * kg } else { 0 }];
            let mut db_part = vec![T::ZERO; if need_db { filters } else { 0 }];
            let threads = samples.len() == p.batch;
            {
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
    cpu::add::<Deconvolution>(k);
    cpu::add::<DeconvolutionBackward>(k);
}
