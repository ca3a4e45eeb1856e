//! CPU kernels of `Convolution` (1-D, 2-D and 3-D, grouped, strided, padded, dilated)
//! by im2col and GEMM, and of its backward; 3×3 windows at stride 1 go by Winograd's
//! F(2×2, 3×3) (`winograd`) in both directions, the forward pass of depthwise ones
//! directly (`depthwise`), and small inference passes by a product with kept, packed
//! weights (`packed`).
//!
//! The forward pass goes one tile of output lines at a time: the tile's part of the
//! column matrix stays in a core's cache between being written and being multiplied, and
//! the tiles of all samples are the tasks shared between threads.

use super::batch::{for_units, reduce_partials, tasks, unit_runs, Chunked, Sink};
use super::depthwise;
use super::im2col::{col2im, im2col, im2col_lines};
use super::layer::{Backward, ColumnLayer, Forward};
use super::packed;
use super::winograd;
use crate::error::Result;
use crate::kernels::cpu;
use crate::kernels::cpu::linalg::{matmul, matmul_rows, MatMul};
use crate::kernels::cpu::num::Num;
use crate::kernels::Kernels;
use crate::op::nn::convolution::{Convolution, ConvolutionBackward, Plan};
use std::ops::Range;

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
    pub(super) fn work(&self) -> usize {
        self.batch * self.filters * self.k_group() * self.geom.cols()
    }

    /// Output lines of one forward tile: enough for `TILE_ELEMS` elements of the column
    /// matrix (at least `TILE_MIN_COLS` columns), all of them for a 3-D window.
    fn tile_lines(&self) -> usize {
        let [od, oh, ow] = self.geom.output;
        if od != 1 || oh == 0 || ow == 0 {
            return oh.max(1);
        }
        let cols = (TILE_ELEMS / self.geom.rows().max(1)).max(TILE_MIN_COLS);
        cols.div_ceil(ow).min(oh)
    }

    /// Forward tiles per sample.
    fn tiles(&self) -> usize {
        self.geom.output[1].div_ceil(self.tile_lines())
    }

    /// Tile `t`'s output lines, its first column and its number of columns.
    fn tile(&self, t: usize) -> (Range<usize>, usize, usize) {
        let [od, oh, ow] = self.geom.output;
        if od != 1 {
            return (0..oh, 0, self.geom.cols());
        }
        let per = self.tile_lines();
        let (r0, r1) = (t * per, ((t + 1) * per).min(oh));
        (r0..r1, r0 * ow, (r1 - r0) * ow)
    }

    /// Columns of the widest tile.
    fn tile_cols(&self) -> usize {
        self.tile(0).2
    }
}

/// Elements of the column matrix one forward tile holds at most: with the product's
/// packed copies, a tile stays within a core's L2 cache.
const TILE_ELEMS: usize = 1 << 17;

/// The fewest columns a tile has, below which the product loses more speed than the
/// cache saves.
const TILE_MIN_COLS: usize = 192;

/// The output array, which the forward tiles write at disjoint elements from several
/// threads.
pub(super) struct TileOut<T>(pub(super) *mut T);

// SAFETY: `TileOut` is only a pointer handed to the tiles, which write disjoint elements
// (the columns of their own output lines) of memory the pass borrows mutably.
unsafe impl<T: Send> Send for TileOut<T> {}
unsafe impl<T: Send> Sync for TileOut<T> {}

impl<T> TileOut<T> {
    pub(super) fn at(&self, offset: usize) -> *mut T {
        self.0.wrapping_add(offset)
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

    fn scratch<T: Num>(p: &Plan) -> (usize, usize) {
        let col = p.geom.rows() * p.geom.cols();
        // The backward keeps a column matrix and its gradient, per run of samples; the
        // data gradient by Winograd's method goes first, in the same memory.
        let mut backward = 2 * col;
        let runs = tasks(p.batch, p.work() * 2);
        if winograd::applies_to_data_gradient::<T>(p) {
            backward = backward.max(winograd::data_gradient_scratch(p).div_ceil(runs));
        }
        if winograd::applies_to_weight_gradient::<T>(p) {
            backward = backward.max(winograd::weight_gradient_scratch(p).div_ceil(runs));
        }
        if winograd::applies::<T>(p) {
            return (winograd::scratch_per_run(p), backward);
        }
        let tile = p.geom.rows() * p.tile_cols();
        // A 1×1 unit window reads the data as is.
        (if p.geom.win.is_identity() { 0 } else { tile }, backward)
    }

    fn forward_runs<T: Num>(p: &Plan) -> usize {
        if depthwise::applies(p) {
            return 0;
        }
        if winograd::applies::<T>(p) {
            return winograd::runs(p);
        }
        unit_runs(p.batch * p.tiles(), p.work())
    }

    fn forward_loop<T: Num>(p: &Plan, a: Forward<'_, T>, scratch: &mut [T]) {
        if depthwise::applies(p) {
            return depthwise::forward(p, a);
        }
        if winograd::applies::<T>(p) {
            return winograd::forward(p, a, scratch);
        }
        if let Some(kept) = a.kept.filter(|_| packed::applies::<T>(p, p.tiles())) {
            // Kept packed weights are used while the node's memo is free; another run of
            // the same node at once goes the general way.
            if let Some(mut slot) = kept.memo.try_slot() {
                return packed::forward(p, a, kept.stamp, &mut slot, scratch);
            }
        }
        let Forward {
            x, w, post, y, add, ..
        } = a;
        assert!(
            !add || post.is_bias_only(),
            "Convolution: an epilogue over added outputs"
        );
        let (in_len, out_len, cols) = (p.in_len(), p.out_len(), p.geom.cols());
        let (fg, kg, rows) = (p.f_group(), p.k_group(), p.geom.rows());
        let identity = p.geom.win.is_identity();
        let tiles = p.tiles();
        assert!(
            y.len() >= p.batch * out_len && x.len() >= p.batch * in_len,
            "Convolution: arrays smaller than the plan"
        );
        let out = TileOut(y.as_mut_ptr());
        let one = |u: usize, col: &mut [T], threads: bool| {
            let (n, t) = (u / tiles, u % tiles);
            let (lines, c0, tc) = p.tile(t);
            let x = &x[n * in_len..(n + 1) * in_len];
            // The tile's columns: read from the image as is for a 1×1 unit window, where
            // they are a block of its columns.
            let (b, b_rs): (&[T], usize) = if identity {
                (&x[c0..], cols)
            } else {
                im2col_lines(&p.geom, x, &mut col[..rows * tc], lines);
                (&col[..rows * tc], tc)
            };
            let product = MatMul {
                m: fg,
                n: tc,
                k: kg,
                a_rs: kg,
                a_cs: 1,
                b_rs,
                b_cs: 1,
            };
            let first = n * out_len + c0;
            for g in 0..p.groups {
                // SAFETY: the destination is this tile's columns `c0..c0 + tc` of group
                // `g`'s `fg` output rows of sample `n`, inside `y` (checked above) and
                // written by no other tile; `x`, `w` and the scratch are other memory.
                unsafe {
                    matmul_rows(
                        &product,
                        &w[g * fg * kg..(g + 1) * fg * kg],
                        &b[g * kg * b_rs..],
                        out.at(first + g * fg * cols),
                        cols,
                        add,
                        threads,
                    );
                }
            }
            if !post.is_identity() {
                for f in 0..p.filters {
                    let at = first + f * cols;
                    // SAFETY: as above, one row of this tile alone.
                    let row = unsafe { std::slice::from_raw_parts_mut(out.at(at), tc) };
                    post.apply(f, at, row);
                }
            }
        };
        let units = p.batch * tiles;
        for_units(units, unit_runs(units, p.work()), scratch, one);
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
        let dx_add = dx.add();
        let mut dx = dx.into_slice();
        if dx.is_some() && winograd::applies_to_data_gradient::<T>(p) {
            let dx = dx.take().expect("checked above");
            winograd::data_gradient(p, dy, w, dx, dx_add, scratch);
        }
        let dw = if dw.wanted() && winograd::applies_to_weight_gradient::<T>(p) {
            let add = dw.add();
            let dw = dw.into_slice().expect("checked above");
            winograd::weight_gradient(p, x, dy, dw, add, scratch);
            Sink::new(None, None)
        } else {
            dw
        };
        let (need_dw, need_db) = (dw.wanted(), db.wanted());
        let chunks = Chunked::new(p.batch, p.work() * 2, dx, in_len, scratch);
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
