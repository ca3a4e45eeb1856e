//! Convolutions with few output columns (one small image: the last stages of an ImageNet
//! network at batch 1) run outside training, on AVX-512: the weights are packed once,
//! `BLOCK` filters to a block along the vector lanes, and kept in the executor node's
//! memo, so that a pass is one product that packs nothing, by a kernel of `BLOCK`
//! filters by `COLS` output columns. A general product packs the weights on every call,
//! which at these sizes costs as much as the multiply-adds it saves.

use super::epilogue::Epilogue;
use super::im2col::im2col;
use super::layer::Forward;
use super::wide::{cast, cast_mut};
use crate::engine::ContentStamp;
use crate::kernels::cpu::num::Num;
use crate::op::memo::{self, MemoSlot};
use crate::op::nn::convolution::Plan;
use pulp::{Simd, WithSimd};
use rayon::prelude::*;
use std::any::TypeId;

/// Lanes of an AVX-512 vector of float32.
const LANES: usize = 16;

/// Vectors of filters in a block, and the filters of a block.
const VECTORS: usize = 4;
const BLOCK: usize = VECTORS * LANES;

/// Output columns one kernel call computes: with the block's filters, 24 accumulators.
const COLS: usize = 6;

/// Rows of the column matrix one kernel call runs over before its sums go back to the
/// output: a block's packed rows stay within a core's L2 cache.
const KC: usize = 1024;

/// The most output columns of a pass (all samples), above which a general product does
/// as well and nothing is kept.
const MAX_COLS: usize = 256;

/// The fewest rows of the column matrix worth a kept copy of the weights.
const MIN_ROWS: usize = 128;

/// Products with more multiply-adds than this share their filter blocks between threads.
const PAR_WORK: usize = 1 << 18;

/// Whether `p`, with `tiles` forward tiles per sample, goes by a packed product for
/// element type `T` when its weights can be kept.
pub fn applies<T: Num>(p: &Plan, tiles: usize) -> bool {
    TypeId::of::<T>() == TypeId::of::<f32>()
        && p.groups == 1
        && p.geom.output[0] == 1
        && tiles == 1
        && p.filters.is_multiple_of(BLOCK)
        && p.geom.rows() >= MIN_ROWS
        && p.batch * p.geom.cols() <= MAX_COLS
        && avx512()
}

#[cfg(target_arch = "x86_64")]
fn avx512() -> bool {
    pulp::x86::V4::try_new().is_some()
}

#[cfg(not(target_arch = "x86_64"))]
fn avx512() -> bool {
    false
}

/// What packed weights kept in a node's memo were made from: the weights' content stamp
/// and where they lie, and the layer's sizes.
#[derive(Clone, Copy, PartialEq, Eq)]
struct PackedKey {
    stamp: ContentStamp,
    at: usize,
    len: usize,
    filters: usize,
    rows: usize,
}

/// `w` (`filters` rows of `rows`) as blocks of `BLOCK` filters, each `rows` runs of its
/// filters' weights for one row of the column matrix.
fn pack(w: &[f32], filters: usize, rows: usize) -> Vec<f32> {
    let mut packed = vec![0.0; filters * rows];
    for (b, block) in packed.chunks_exact_mut(BLOCK * rows).enumerate() {
        for (j, weights) in w[b * BLOCK * rows..][..BLOCK * rows]
            .chunks_exact(rows)
            .enumerate()
        {
            for (r, &v) in weights.iter().enumerate() {
                block[r * BLOCK + j] = v;
            }
        }
    }
    packed
}

/// `y (=|+=) post(conv(x, w))` for a plan that [`applies`], with the packed weights kept
/// in (or taken from) `slot` under the weights' `stamp`; `scratch` holds one sample's
/// column matrix.
pub fn forward<T: Num>(
    p: &Plan,
    a: Forward<'_, T>,
    stamp: ContentStamp,
    slot: &mut MemoSlot<'_>,
    scratch: &mut [T],
) {
    let Forward {
        x, w, post, y, add, ..
    } = a;
    let (rows, cols, filters) = (p.geom.rows(), p.geom.cols(), p.filters);
    let (in_len, out_len) = (p.geom.image_len(), filters * cols);
    assert!(
        y.len() >= p.batch * out_len && x.len() >= p.batch * in_len,
        "Convolution: arrays smaller than the plan"
    );
    assert!(
        !add || post.is_bias_only(),
        "Convolution: an epilogue over added outputs"
    );
    let post = Epilogue {
        scale: post.scale.map(as_f32),
        shift: post.shift.map(as_f32),
        residual: post.residual.map(as_f32),
        relu: post.relu,
    };
    let key = PackedKey {
        stamp,
        at: w.as_ptr() as usize,
        len: w.len(),
        filters,
        rows,
    };
    let packed: &Vec<f32> = memo::kept(slot, key, || pack(as_f32(w), filters, rows));
    let identity = p.geom.win.is_identity();
    let threads = rayon::current_num_threads() > 1 && filters * rows * cols > PAR_WORK;
    for n in 0..p.batch {
        let sample = &x[n * in_len..(n + 1) * in_len];
        let b: &[T] = if identity {
            &sample[..rows * cols]
        } else {
            im2col(&p.geom, sample, &mut scratch[..rows * cols]);
            &scratch[..rows * cols]
        };
        let b = as_f32(b);
        let out = &mut y[n * out_len..(n + 1) * out_len];
        let block = |(i, yb): (usize, &mut [T])| {
            let y = cast_mut::<T, f32>(yb).expect("applies to float32 only");
            let block = Block {
                packed: &packed[i * BLOCK * rows..][..BLOCK * rows],
                b,
                y,
                rows,
                cols,
                add,
                post,
            };
            run_block(block, (i * BLOCK, n * out_len + i * BLOCK * cols));
        };
        if threads {
            out.par_chunks_mut(BLOCK * cols).enumerate().for_each(block);
        } else {
            out.chunks_mut(BLOCK * cols).enumerate().for_each(block);
        }
    }
}

/// `v`, of float32 `T`, as float32.
fn as_f32<T: 'static>(v: &[T]) -> &[f32] {
    cast::<T, f32>(v).expect("applies to float32 only")
}

/// One block's `BLOCK` output rows of `cols` columns, `y (=|+=) packed · b`, then its
/// epilogue; `(filter, at)` are the block's first filter and the offset of its first row
/// in the whole output.
fn run_block(block: Block<'_>, (filter, at): (usize, usize)) {
    let Block {
        packed,
        b,
        y,
        rows,
        cols,
        ..
    } = &block;
    assert!(packed.len() >= BLOCK * rows && b.len() >= rows * cols && y.len() >= BLOCK * cols);
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = pulp::x86::V4::try_new() {
        Simd::vectorize(simd, Placed { block, filter, at });
        return;
    }
    unreachable!("packed products run on AVX-512 only");
}

/// The operands of one block's product, and its epilogue.
struct Block<'a> {
    packed: &'a [f32],
    b: &'a [f32],
    y: &'a mut [f32],
    rows: usize,
    cols: usize,
    add: bool,
    post: Epilogue<'a, f32>,
}

/// A block with its first filter and the offset of its first row in the whole output.
struct Placed<'a> {
    block: Block<'a>,
    filter: usize,
    at: usize,
}

impl WithSimd for Placed<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        let Placed {
            block:
                Block {
                    packed,
                    b,
                    y,
                    rows,
                    cols,
                    add,
                    post,
                },
            filter,
            at,
        } = self;
        assert_eq!(S::F32_LANES, LANES, "packed products need 16-lane vectors");
        let mut k0 = 0;
        while k0 < rows {
            let kn = KC.min(rows - k0);
            let add = add || k0 > 0;
            let mut c0 = 0;
            while c0 < cols {
                let cn = COLS.min(cols - c0);
                let at = Tile {
                    packed: &packed[k0 * BLOCK..(k0 + kn) * BLOCK],
                    b: &b[k0 * cols + c0..],
                    b_rs: cols,
                    kn,
                };
                let y = &mut y[c0..];
                match cn {
                    6 => at.run::<S, 6>(s, y, cols, add),
                    5 => at.run::<S, 5>(s, y, cols, add),
                    4 => at.run::<S, 4>(s, y, cols, add),
                    3 => at.run::<S, 3>(s, y, cols, add),
                    2 => at.run::<S, 2>(s, y, cols, add),
                    _ => at.run::<S, 1>(s, y, cols, add),
                }
                c0 += cn;
            }
            k0 += kn;
        }
        for (f, row) in y.chunks_exact_mut(cols).take(BLOCK).enumerate() {
            post.apply_in(s, filter + f, at + f * cols, row);
        }
    }
}

/// One kernel call's operands: `kn` packed rows of the block, and the same rows of the
/// column matrix from its first column, rows `b_rs` apart.
struct Tile<'a> {
    packed: &'a [f32],
    b: &'a [f32],
    b_rs: usize,
    kn: usize,
}

impl Tile<'_> {
    /// `y[f][c] (=|+=) Σ_k packed[k][f] · b[k][c]` for the block's filters `f` and the
    /// first `C` columns `c`, output rows `y_rs` apart.
    #[inline(always)]
    fn run<S: Simd, const C: usize>(&self, s: S, y: &mut [f32], y_rs: usize, add: bool) {
        assert!(self.packed.len() >= self.kn * BLOCK);
        assert!(self.kn == 0 || self.b.len() > (self.kn - 1) * self.b_rs + C - 1);
        assert!(y.len() > (BLOCK - 1) * y_rs + C - 1);
        let zero = s.splat_f32s(0.0);
        let mut acc = [[zero; VECTORS]; C];
        let (pw, pb) = (self.packed.as_ptr(), self.b.as_ptr());
        for k in 0..self.kn {
            let mut wv = [zero; VECTORS];
            for (i, v) in wv.iter_mut().enumerate() {
                // SAFETY: row `k < kn` of the packed block holds `BLOCK` elements (checked
                // above); vector `i` is `LANES` of them, read unaligned.
                *v = unsafe {
                    pw.add(k * BLOCK + i * LANES)
                        .cast::<S::f32s>()
                        .read_unaligned()
                };
            }
            for (c, sums) in acc.iter_mut().enumerate() {
                // SAFETY: element `(k, c)` of the column matrix, within `b` (checked above).
                let bv = s.splat_f32s(unsafe { *pb.add(k * self.b_rs + c) });
                for (sum, &wv) in sums.iter_mut().zip(&wv) {
                    *sum = s.mul_add_e_f32s(wv, bv, *sum);
                }
            }
        }
        // Through memory, so the accumulators stay in registers in the loop above.
        let mut sums = [[[0.0f32; LANES]; VECTORS]; C];
        for (out, acc) in sums.iter_mut().zip(&acc) {
            for (o, &v) in out.iter_mut().zip(acc) {
                // SAFETY: a vector is `LANES` floats, written unaligned.
                unsafe { o.as_mut_ptr().cast::<S::f32s>().write_unaligned(v) };
            }
        }
        scatter(&sums, y, y_rs, add);
    }
}

/// The sums of one kernel call into the block's output rows, `y_rs` apart.
#[inline(never)]
fn scatter<const C: usize>(
    sums: &[[[f32; LANES]; VECTORS]; C],
    y: &mut [f32],
    y_rs: usize,
    add: bool,
) {
    for (c, vectors) in sums.iter().enumerate() {
        for (i, lanes) in vectors.iter().enumerate() {
            for (l, &v) in lanes.iter().enumerate() {
                let o = &mut y[(i * LANES + l) * y_rs + c];
                *o = if add { *o + v } else { v };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_puts_a_blocks_filters_side_by_side() {
        let (filters, rows) = (2 * BLOCK, 3);
        let w: Vec<f32> = (0..filters * rows).map(|i| i as f32).collect();
        let p = pack(&w, filters, rows);
        for f in 0..filters {
            for r in 0..rows {
                let (b, j) = (f / BLOCK, f % BLOCK);
                assert_eq!(p[b * BLOCK * rows + r * BLOCK + j], w[f * rows + r]);
            }
        }
    }

    #[test]
    fn a_block_matches_the_plain_product() {
        if !avx512() {
            return;
        }
        for (rows, cols) in [(130, 49), (KC + 37, 7), (200, 1), (128, 12)] {
            let w: Vec<f32> = (0..BLOCK * rows)
                .map(|i| ((i * 7) % 13) as f32 - 6.0)
                .collect();
            let b: Vec<f32> = (0..rows * cols)
                .map(|i| ((i * 5) % 11) as f32 - 5.0)
                .collect();
            let packed = pack(&w, BLOCK, rows);
            for add in [false, true] {
                let mut y = vec![1.0f32; BLOCK * cols];
                let (packed, b) = (&packed[..], &b[..]);
                let post = Epilogue::bias(None);
                let block = Block {
                    packed,
                    b,
                    y: &mut y,
                    rows,
                    cols,
                    add,
                    post,
                };
                run_block(block, (0, 0));
                for f in 0..BLOCK {
                    for c in 0..cols {
                        let want: f32 = (0..rows).map(|k| w[f * rows + k] * b[k * cols + c]).sum();
                        let want = want + if add { 1.0 } else { 0.0 };
                        assert_eq!(y[f * cols + c], want, "rows {rows} cols {cols} at {f},{c}");
                    }
                }
            }
        }
    }
}
