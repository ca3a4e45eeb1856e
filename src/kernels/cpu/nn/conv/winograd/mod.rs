//! Convolution and its data and weight gradients by Winograd's minimal filtering
//! F(2×2, 3×3), for 2-D 3×3 windows at stride 1, undilated and ungrouped: each 2×2 block
//! of outputs comes from a 4×4 block of input through 16 products per channel pair
//! instead of 36, so the layers that dominate ResNets do 2.25 times fewer multiply-adds
//! than by im2col.
//!
//! The outputs are cut into 2×2 tiles, and the batch into blocks: several whole small
//! images, or some rows of tiles of a large one. For a block, the input is transformed
//! (`V = Bᵀ d B` per channel and tile), multiplied by the transformed weights
//! (`U = G g Gᵀ`) in 16 GEMMs, one per element of the 4×4 transform domain, and
//! transformed back (`Y = Aᵀ M A`) into the output. The transforms (`transform`) are
//! sums and differences over all the block's tiles, so they vectorise. Blocks stay in a
//! core's cache and are shared out whole between threads; a batch too small for that is
//! one block, whose transforms and products are each shared out in turn.

mod lanes;
mod transform;

use transform::{put_output, transform_input, transform_output, transform_output_gradient};

use super::batch::{for_units, unit_runs};
use super::convolution::TileOut;
use super::epilogue::Epilogue;
use super::layer::{Forward, KeptWeights};
use crate::engine::ContentStamp;
use crate::kernels::cpu::linalg::{gemm_type, matmul_rows, MatMul};
use crate::kernels::cpu::num::Num;
use crate::op::memo;
use crate::op::nn::convolution::Plan;
use rayon::iter::{IndexedParallelIterator, IntoParallelIterator, ParallelIterator};
use rayon::slice::ParallelSliceMut;
use std::ops::Range;

/// Elements the two transformed blocks of a task (input and products) aim at, so that
/// they stay in a core's L2 cache between the transforms and the products.
const BLOCK_ELEMS: usize = 1 << 18;

/// The fewest and the most tiles of a block: fewer make the products too narrow to pay
/// for the transforms (im2col does better), more leave the cache.
const BLOCK_MIN_TILES: usize = 64;
const BLOCK_MAX_TILES: usize = 256;

/// The fewest tiles, and the most transformed elements, of a pass too small to share out
/// in blocks (a single small image), which instead shares out each of its three phases.
/// With fewer tiles, transforming the weights on every call costs more than the products
/// save.
const PHASED_MIN_TILES: usize = 40;
const PHASED_MAX_ELEMS: usize = 1 << 23;

/// Whether `p`'s window, element type and sizes suit F(2×2, 3×3).
fn suits<T: Num>(p: &Plan) -> bool {
    let w = &p.geom.win;
    gemm_type::<T>()
        && std::mem::size_of::<T>() >= 4
        && p.groups == 1
        && p.geom.input[0] == 1
        && w.kernel == [1, 3, 3]
        && w.stride == [1, 1, 1]
        && w.dilate == [1, 1, 1]
        && w.pad[1] <= 2
        && w.pad[2] <= 2
        && p.geom.channels >= 8
        && p.filters >= 8
}

/// Whether the forward pass of `p` goes by F(2×2, 3×3) for element type `T`.
pub fn applies<T: Num>(p: &Plan) -> bool {
    suits::<T>(p) && Geometry::of(p).blocking(p.batch).is_some()
}

/// Whether the data gradient of `p` goes by F(2×2, 3×3) for element type `T`: it is the
/// convolution of the output gradient, padded by `2 − pad`, with the weights turned by
/// half a turn and their channels and filters swapped.
pub fn applies_to_data_gradient<T: Num>(p: &Plan) -> bool {
    suits::<T>(p) && Geometry::of_data_gradient(p).blocking(p.batch).is_some()
}

/// Whether the weight gradient of `p` goes by F(2×2, 3×3) for element type `T`: blocks
/// shared out whole, each summing the products of its transformed input and
/// output gradient; their sum transformed back.
pub fn applies_to_weight_gradient<T: Num>(p: &Plan) -> bool {
    suits::<T>(p) && Geometry::of(p).blocking(p.batch).is_some_and(|b| !b.phased)
}

/// The tiling of one sample.
#[derive(Clone, Copy)]
struct Geometry {
    /// Input height and width.
    h: usize,
    w: usize,
    /// Output height and width.
    oh: usize,
    ow: usize,
    /// Padding at the top and at the left.
    ph: usize,
    pw: usize,
    /// Tile rows and tiles per row.
    th: usize,
    tw: usize,
    channels: usize,
    filters: usize,
}

/// How a batch is cut into blocks.
#[derive(Clone, Copy)]
struct Blocking {
    /// Samples of a block (the last may have fewer); more than one only when a block
    /// holds whole samples.
    samples: usize,
    /// Tile rows of each sample in a block (the last rows of a sample may be fewer).
    rows: usize,
    /// Whether the pass is one block whose transforms and products are each shared
    /// between threads, rather than blocks shared out whole.
    phased: bool,
}

/// One block: tile rows `rows` of samples `n0..n0 + samples`.
#[derive(Clone)]
struct Block {
    n0: usize,
    samples: usize,
    rows: Range<usize>,
}

impl Blocking {
    /// Pieces of tile rows a sample is cut into.
    fn pieces(&self, g: &Geometry) -> usize {
        g.th.div_ceil(self.rows.max(1))
    }

    /// Blocks in a batch of `batch`.
    fn units(&self, g: &Geometry, batch: usize) -> usize {
        batch.div_ceil(self.samples.max(1)) * self.pieces(g)
    }

    /// Block `unit` of a batch of `batch`.
    fn block(&self, g: &Geometry, batch: usize, unit: usize) -> Block {
        let pieces = self.pieces(g);
        let (group, piece) = (unit / pieces, unit % pieces);
        let n0 = group * self.samples;
        Block {
            n0,
            samples: self.samples.min(batch - n0),
            rows: piece * self.rows..((piece + 1) * self.rows).min(g.th),
        }
    }
}

impl Block {
    /// Tiles of the block, counting one past the right edge of every row.
    fn tiles(&self, g: &Geometry) -> usize {
        self.samples * self.rows.len() * (g.tw + 1)
    }
}

impl Geometry {
    fn of(p: &Plan) -> Geometry {
        let [_, oh, ow] = p.geom.output;
        let [_, h, w] = p.geom.input;
        Geometry {
            h,
            w,
            oh,
            ow,
            ph: p.geom.win.pad[1],
            pw: p.geom.win.pad[2],
            th: oh.div_ceil(2),
            tw: ow.div_ceil(2),
            channels: p.geom.channels,
            filters: p.filters,
        }
    }

    /// The tiling of `p`'s data gradient, a convolution from the output gradient to the
    /// data's shape.
    fn of_data_gradient(p: &Plan) -> Geometry {
        let [_, oh, ow] = p.geom.output;
        let [_, h, w] = p.geom.input;
        Geometry {
            h: oh,
            w: ow,
            oh: h,
            ow: w,
            ph: 2 - p.geom.win.pad[1],
            pw: 2 - p.geom.win.pad[2],
            th: h.div_ceil(2),
            tw: w.div_ceil(2),
            channels: p.filters,
            filters: p.geom.channels,
        }
    }

    /// Blocks of about `BLOCK_ELEMS` of transformed data, and enough of them for every
    /// thread to take two: whole samples when one has fewer tiles than that, otherwise
    /// rows of one; failing that, one phased block; `None` when even that would be too
    /// small to pay, or too large.
    fn blocking(&self, batch: usize) -> Option<Blocking> {
        let tw = self.tw.max(1);
        let per_sample = self.th * tw;
        let target = (BLOCK_ELEMS / (16 * (self.channels + self.filters)))
            .clamp(BLOCK_MIN_TILES, BLOCK_MAX_TILES);
        let threads = rayon::current_num_threads();
        let few = |units: usize| threads > 1 && units < 2 * threads;
        let (samples, rows) = if per_sample <= target {
            let mut samples = (target / per_sample.max(1)).clamp(1, batch.max(1));
            if few(batch.div_ceil(samples)) {
                samples = batch / (2 * threads);
            }
            (samples, self.th)
        } else {
            let mut rows = target.div_ceil(tw);
            if few(batch * self.th.div_ceil(rows)) {
                rows = rows.min(self.th * batch / (2 * threads));
            }
            // The same number of pieces, as even as they go.
            (1, self.th.div_ceil(self.th.div_ceil(rows.max(1))).min(rows))
        };
        if samples * rows * tw >= BLOCK_MIN_TILES {
            return Some(Blocking {
                samples,
                rows,
                phased: false,
            });
        }
        let tiles = batch * per_sample;
        let elems = 16 * (self.channels + self.filters) * tiles;
        (tiles >= PHASED_MIN_TILES && elems <= PHASED_MAX_ELEMS).then_some(Blocking {
            samples: batch,
            rows: self.th,
            phased: true,
        })
    }

    /// Channel `c` of sample `n` of the input `x`.
    fn in_plane<'x, T>(&self, x: &'x [T], n: usize, c: usize) -> &'x [T] {
        let len = self.h * self.w;
        &x[(n * self.channels + c) * len..][..len]
    }

    /// Filter `f`'s plane of sample `n` of the output (or output gradient) `y`.
    fn out_plane<'y, T>(&self, y: &'y [T], n: usize, f: usize) -> &'y [T] {
        let len = self.oh * self.ow;
        &y[(n * self.filters + f) * len..][..len]
    }

    /// Elements of the transformed weights.
    fn weights_len(&self) -> usize {
        16 * self.filters * self.channels
    }

    /// Elements of a block's transformed input and products, for blocks of at most
    /// `tiles` tiles.
    fn transformed_len(&self, tiles: usize) -> usize {
        16 * (self.channels + self.filters) * lead(tiles)
    }
}

/// The distance between the rows of `tiles` elements of a transformed block (one per
/// element of the transform domain and channel or filter): a whole number of vectors,
/// and not a multiple of 128, whose rows would share cache sets.
fn lead(tiles: usize) -> usize {
    let ld = tiles.next_multiple_of(16);
    if ld.is_multiple_of(128) {
        ld + 16
    } else {
        ld
    }
}

/// One pass by F(2×2, 3×3) over a batch, and how it is cut into blocks.
struct Job {
    g: Geometry,
    batch: usize,
    /// Multiply-adds of the pass by im2col.
    work: usize,
    blocks: Blocking,
}

impl Job {
    fn new(g: Geometry, p: &Plan) -> Job {
        let blocks = g.blocking(p.batch).unwrap_or(Blocking {
            samples: p.batch,
            rows: g.th,
            phased: true,
        });
        Job {
            g,
            batch: p.batch,
            work: p.work(),
            blocks,
        }
    }

    /// Tasks holding scratch memory at once, as `for_units` will run them.
    fn runs(&self) -> usize {
        if self.blocks.phased {
            return 1;
        }
        unit_runs(self.units(), self.work)
    }

    /// Blocks of the batch.
    fn units(&self) -> usize {
        self.blocks.units(&self.g, self.batch)
    }

    /// Block `unit` of the batch.
    fn block(&self, unit: usize) -> Block {
        self.blocks.block(&self.g, self.batch, unit)
    }

    /// The most tiles of a block.
    fn block_tiles(&self) -> usize {
        let b = &self.blocks;
        b.samples.min(self.batch) * b.rows.min(self.g.th) * (self.g.tw + 1)
    }

    /// Elements of the transforms' buffer for one block.
    fn buffer_len(&self) -> usize {
        let b = &self.blocks;
        transform::buffer_len(&self.g, b.samples.min(self.batch), b.rows.min(self.g.th))
    }

    /// Scratch elements per run: a block's share, and the run's part of the shared
    /// transformed weights. A phased block takes its transforms' buffers from the heap,
    /// one per thread.
    fn scratch_per_run(&self) -> usize {
        let buffer = if self.blocks.phased {
            0
        } else {
            self.buffer_len()
        };
        let weights = self.g.weights_len().div_ceil(self.runs().max(1));
        self.g.transformed_len(self.block_tiles()) + buffer + weights
    }

    /// `y (=|+=) conv(x, w) + b`, the weights given as `kernel(f, c)`, with `scratch` of
    /// at least `runs * scratch_per_run` elements; with `kept`, the transformed weights
    /// are kept in (or taken from) the node's memo under the key.
    #[allow(clippy::too_many_arguments)]
    fn run<T: Num>(
        &self,
        x: &[T],
        kernel: impl Fn(usize, usize) -> [T; 9] + Sync,
        post: Epilogue<'_, T>,
        y: &mut [T],
        add: bool,
        scratch: &mut [T],
        kept: Option<(KeptWeights<'_>, WeightsKey)>,
    ) {
        let g = self.g;
        let (in_len, out_len) = (g.channels * g.h * g.w, g.filters * g.oh * g.ow);
        assert!(
            x.len() >= self.batch * in_len && y.len() >= self.batch * out_len,
            "Convolution: arrays smaller than the plan"
        );
        let (fresh, rest) = scratch.split_at_mut(g.weights_len());
        // Kept weights are used while the node's memo is free; another run of the same
        // node at once (never in an executor) transforms its own.
        let mut slot = kept.and_then(|(k, _)| k.memo.try_slot());
        let u: &[T] = match (slot.as_deref_mut(), kept) {
            (Some(slot), Some((_, key))) => memo::kept(slot, key, || {
                let mut u = vec![T::ZERO; g.weights_len()];
                transform_weights(&g, &mut u, &kernel);
                u
            }),
            _ => {
                transform_weights(&g, fresh, &kernel);
                fresh
            }
        };
        let pass = Pass {
            g,
            x,
            u,
            post,
            out: TileOut(y.as_mut_ptr()),
            add,
        };
        if self.blocks.phased {
            return pass.phased_block(&self.block(0), self.buffer_len(), rest);
        }
        for_units(self.units(), self.runs(), rest, |unit, buf, _| {
            pass.block(&self.block(unit), buf);
        });
    }
}

/// Tasks holding scratch memory at once in the forward pass of a plan that [`applies`].
pub fn runs(p: &Plan) -> usize {
    Job::new(Geometry::of(p), p).runs()
}

/// Scratch elements per run of the forward pass of a plan that [`applies`].
pub fn scratch_per_run(p: &Plan) -> usize {
    Job::new(Geometry::of(p), p).scratch_per_run()
}

/// `y (=|+=) conv(x, w) + b` for a plan that [`applies`], with `scratch` of at least
/// `runs(p) * scratch_per_run(p)` elements.
pub fn forward<T: Num>(p: &Plan, a: Forward<'_, T>, scratch: &mut [T]) {
    let Forward {
        x,
        w,
        post,
        y,
        add,
        kept,
    } = a;
    assert!(
        !add || post.is_bias_only(),
        "Convolution: an epilogue over added outputs"
    );
    let c = p.geom.channels;
    assert!(
        w.len() >= 9 * p.filters * c,
        "Convolution: arrays smaller than the plan"
    );
    let kernel = |f: usize, i: usize| -> [T; 9] {
        let k = &w[(f * c + i) * 9..][..9];
        std::array::from_fn(|t| k[t])
    };
    let g = Geometry::of(p);
    let kept = kept
        .filter(|_| worth_keeping(&g, p.batch))
        .map(|k| (k, WeightsKey::new(k.stamp, w, p)));
    Job::new(g, p).run(x, kernel, post, y, add, scratch, kept);
}

/// The most tiles of a pass whose transformed weights are kept between runs: with more,
/// transforming them again costs little beside the products.
const KEEP_MAX_TILES: usize = 255;

/// The most elements of transformed weights kept for one layer (those of 256 filters
/// over 256 channels): wider layers would keep tens of MiB each.
const KEEP_MAX_WEIGHTS: usize = 16 * 256 * 256;

/// Whether a pass over `batch` samples keeps its transformed weights between runs.
fn worth_keeping(g: &Geometry, batch: usize) -> bool {
    batch * g.th * g.tw <= KEEP_MAX_TILES && g.weights_len() <= KEEP_MAX_WEIGHTS
}

/// What transformed weights kept in a node's memo were made from: the weights' content
/// stamp and where they lie, and the layer's sizes.
#[derive(Clone, Copy, PartialEq, Eq)]
struct WeightsKey {
    stamp: ContentStamp,
    at: usize,
    len: usize,
    filters: usize,
    channels: usize,
}

impl WeightsKey {
    fn new<T>(stamp: ContentStamp, w: &[T], p: &Plan) -> WeightsKey {
        WeightsKey {
            stamp,
            at: w.as_ptr() as usize,
            len: w.len(),
            filters: p.filters,
            channels: p.geom.channels,
        }
    }
}

/// Scratch elements of the data gradient of a plan that [`applies_to_data_gradient`].
pub fn data_gradient_scratch(p: &Plan) -> usize {
    let job = Job::new(Geometry::of_data_gradient(p), p);
    job.runs().max(1) * job.scratch_per_run()
}

/// `dx (=|+=)` the data gradient of a plan that [`applies_to_data_gradient`], from the
/// output gradient `dy` and the weights `w`, with `scratch` of at least
/// `data_gradient_scratch(p)` elements.
pub fn data_gradient<T: Num>(
    p: &Plan,
    dy: &[T],
    w: &[T],
    dx: &mut [T],
    add: bool,
    scratch: &mut [T],
) {
    let channels = p.geom.channels;
    assert!(
        w.len() >= 9 * p.filters * channels,
        "Convolution: arrays smaller than the plan"
    );
    // Output channel `c` of the gradient takes, from output gradient channel `f`, the
    // forward kernel of filter `f` and channel `c` turned by half a turn.
    let kernel = |c: usize, f: usize| -> [T; 9] {
        let k = &w[(f * channels + c) * 9..][..9];
        std::array::from_fn(|t| k[8 - t])
    };
    let post = Epilogue::bias(None);
    Job::new(Geometry::of_data_gradient(p), p).run(dy, kernel, post, dx, add, scratch, None);
}

/// Scratch elements of the weight gradient of a plan that [`applies_to_weight_gradient`].
pub fn weight_gradient_scratch(p: &Plan) -> usize {
    let job = Job::new(Geometry::of(p), p);
    job.runs().max(1) * gradient_share(&job)
}

/// Scratch elements of one run of the weight gradient: a block's transformed input and
/// output gradient, the transforms' buffer, and the run's sum of products.
fn gradient_share(job: &Job) -> usize {
    job.g.transformed_len(job.block_tiles()) + job.buffer_len() + job.g.weights_len()
}

/// `dw (=|+=)` the weight gradient of a plan that [`applies_to_weight_gradient`], from
/// the data `x` and the output gradient `dy`, with `scratch` of at least
/// `weight_gradient_scratch(p)` elements. Each run sums its own contiguous range of
/// blocks, and the runs' sums are added in order, so the result depends on the thread
/// count only.
pub fn weight_gradient<T: Num>(
    p: &Plan,
    x: &[T],
    dy: &[T],
    dw: &mut [T],
    add: bool,
    scratch: &mut [T],
) {
    let job = Job::new(Geometry::of(p), p);
    let g = job.g;
    let (in_len, out_len) = (g.channels * g.h * g.w, g.filters * g.oh * g.ow);
    assert!(
        x.len() >= job.batch * in_len
            && dy.len() >= job.batch * out_len
            && dw.len() >= 9 * g.filters * g.channels,
        "Convolution: arrays smaller than the plan"
    );
    let units = job.units();
    let runs = job.runs().max(1).min(units);
    let share = gradient_share(&job);
    let sum_run = |r: usize, buf: &mut [T]| {
        let (du, buf) = buf.split_at_mut(g.weights_len());
        du.fill(T::ZERO);
        for unit in r * units / runs..(r + 1) * units / runs {
            gradient_block(&g, x, dy, &job.block(unit), buf, du);
        }
    };
    let shares = &mut scratch[..runs * share];
    if runs > 1 {
        shares
            .par_chunks_exact_mut(share)
            .enumerate()
            .for_each(|(r, buf)| sum_run(r, buf));
    } else {
        sum_run(0, shares);
    }
    let (first, rest) = shares.split_at_mut(share);
    let du = &mut first[..g.weights_len()];
    for other in rest.chunks_exact(share) {
        du.iter_mut().zip(other).for_each(|(a, &b)| *a = a.add(b));
    }
    untransform_weights(&g, du, dw, add);
}

/// Adds one block's products `dU_k += dM_k · V_kᵀ` into `du[k][f][c]`, `V` being the
/// block's transformed input and `dM = A dY Aᵀ` its transformed output gradient.
fn gradient_block<T: Num>(
    g: &Geometry,
    x: &[T],
    dy: &[T],
    block: &Block,
    buf: &mut [T],
    du: &mut [T],
) {
    let tiles = block.tiles(g);
    let ld = lead(tiles);
    let (ks, ms) = (g.channels * ld, g.filters * ld);
    let (v, buf) = buf.split_at_mut(16 * ks);
    let (dm, rb) = buf.split_at_mut(16 * ms);
    transform_block_input(g, x, block, v, ld, rb);
    let dmp = TileOut(dm.as_mut_ptr());
    for f in 0..g.filters {
        // SAFETY: `dm` holds the block's transformed output gradient, borrowed mutably
        // here.
        unsafe { transform_output_gradient(g, dy, block, f, &dmp, (f * ld, ms), rb) };
    }
    let product = MatMul {
        m: g.filters,
        n: g.channels,
        k: tiles,
        a_rs: ld,
        a_cs: 1,
        b_rs: 1,
        b_cs: ld,
    };
    let fc = g.filters * g.channels;
    for k in 0..16 {
        // SAFETY: `du[k * fc..(k + 1) * fc]` is this run's own, apart from `v` and `dm`.
        unsafe {
            matmul_rows(
                &product,
                &dm[k * ms..],
                &v[k * ks..],
                du[k * fc..(k + 1) * fc].as_mut_ptr(),
                g.channels,
                true,
                false,
            );
        }
    }
}

/// `V = Bᵀ d B` for every channel and tile of `block` of the batch `x`, on this thread,
/// into `v[k][c][ld]`.
fn transform_block_input<T: Num>(
    g: &Geometry,
    x: &[T],
    block: &Block,
    v: &mut [T],
    ld: usize,
    rb: &mut [T],
) {
    assert!(v.len() >= 16 * g.channels * ld && ld >= block.tiles(g));
    let dst = TileOut(v.as_mut_ptr());
    for c in 0..g.channels {
        let at = (c * ld, g.channels * ld);
        // SAFETY: `v` holds the block's transformed input (checked above), borrowed
        // mutably here.
        unsafe { transform_input(g, x, block, c, &dst, at, rb) };
    }
}

/// `dg = Gᵀ dU G` for every filter and channel, from `du[k][f][c]`, written or added
/// into `dw[f][c]`: the adjoint of [`transform_weights`].
fn untransform_weights<T: Num>(g: &Geometry, du: &[T], dw: &mut [T], add: bool) {
    let half = T::ONE.div(T::ONE.add(T::ONE));
    let (c, fc) = (g.channels, g.filters * g.channels);
    // Gᵀ applied to four values: rows 1, ½ ½ and 0 ½ −½ 0 and 0 ½ ½ 1.
    let gt = |[d0, d1, d2, d3]: [T; 4]| {
        let (s, d) = (d1.add(d2), d1.sub(d2));
        [d0.add(half.mul(s)), half.mul(d), half.mul(s).add(d3)]
    };
    let filter = |(f, dwf): (usize, &mut [T])| {
        for i in 0..c {
            let e = |k: usize| du[k * fc + f * c + i];
            // Gᵀ over the rows of each column, then over the columns of each row.
            let cols: [[T; 3]; 4] =
                std::array::from_fn(|j| gt([e(j), e(4 + j), e(8 + j), e(12 + j)]));
            let out = &mut dwf[9 * i..9 * i + 9];
            for a in 0..3 {
                let row = gt([cols[0][a], cols[1][a], cols[2][a], cols[3][a]]);
                for b in 0..3 {
                    let o = &mut out[3 * a + b];
                    *o = if add { o.add(row[b]) } else { row[b] };
                }
            }
        }
    };
    let dw = &mut dw[..9 * fc];
    if fc >= 1 << 14 {
        dw.par_chunks_exact_mut(9 * c).enumerate().for_each(filter);
    } else {
        dw.chunks_exact_mut(9 * c).enumerate().for_each(filter);
    }
}

/// What the blocks of one forward pass share.
struct Pass<'a, T> {
    g: Geometry,
    x: &'a [T],
    /// The transformed weights, `u[f][k][c]` with `k` the element of the 4×4 transform
    /// domain.
    u: &'a [T],
    post: Epilogue<'a, T>,
    out: TileOut<T>,
    add: bool,
}

impl<T: Num> Pass<'_, T> {
    /// Filter `f`'s output plane of sample `n`.
    ///
    /// # Safety
    /// Only one thread at a time may hold a given plane: the caller's rows of it are
    /// its own.
    #[allow(clippy::mut_from_ref)]
    unsafe fn out_plane(&self, n: usize, f: usize) -> &mut [T] {
        let len = self.g.oh * self.g.ow;
        // SAFETY: the plane lies inside the output (checked in `forward`); the caller
        // vouches that no other thread holds it.
        unsafe { std::slice::from_raw_parts_mut(self.out.at((n * self.g.filters + f) * len), len) }
    }

    /// Filter `f`'s outputs of `block` from its products `m[f * ld..]` (`ms` apart),
    /// through `buf`.
    fn put_filter(
        &self,
        block: &Block,
        m: &[T],
        (ld, ms): (usize, usize),
        f: usize,
        buf: &mut [T],
    ) {
        let g = &self.g;
        // A bias goes in with the output transform; a fused epilogue over the finished
        // output lines.
        let plain = self.post.is_bias_only();
        let b = if plain { self.post.bias_of(f) } else { T::ZERO };
        transform_output(m, (f * ld, ms), block.tiles(g), b, buf);
        let lines = (2 * block.rows.start).min(g.oh)..(2 * block.rows.end).min(g.oh);
        for s in 0..block.samples {
            // SAFETY: this block's tile rows of the plane are its own.
            let y = unsafe { self.out_plane(block.n0 + s, f) };
            put_output(g, block, s, buf, y, self.add);
            if !plain {
                let at = ((block.n0 + s) * g.filters + f) * g.oh * g.ow + lines.start * g.ow;
                self.post
                    .apply(f, at, &mut y[lines.start * g.ow..lines.end * g.ow]);
            }
        }
    }

    /// One block on this thread, with `buf` of at least `transformed_len` and the
    /// transforms' buffer.
    fn block(&self, block: &Block, buf: &mut [T]) {
        let g = &self.g;
        let ld = lead(block.tiles(g));
        let (v, buf) = buf.split_at_mut(16 * g.channels * ld);
        let (m, rb) = buf.split_at_mut(16 * g.filters * ld);
        transform_block_input(g, self.x, block, v, ld, rb);
        products(g, self.u, v, m, ld, false);
        for f in 0..g.filters {
            self.put_filter(block, m, (ld, g.filters * ld), f, rb);
        }
    }

    /// The whole batch as one block, each phase shared between threads: the input
    /// transform by channel, the 16 products, the output transform by filter; each
    /// thread's transforms use a buffer of `buffer_len`.
    fn phased_block(&self, block: &Block, buffer_len: usize, buf: &mut [T]) {
        let g = &self.g;
        let ld = lead(block.tiles(g));
        let (v, buf) = buf.split_at_mut(16 * g.channels * ld);
        let m = &mut buf[..16 * g.filters * ld];
        let buffer = || vec![T::ZERO; buffer_len];
        let (ks, ms) = (g.channels * ld, g.filters * ld);
        let dst = TileOut(v.as_mut_ptr());
        (0..g.channels)
            .into_par_iter()
            .for_each_init(buffer, |rb, c| {
                // SAFETY: `v` is borrowed mutably here; channel `c`'s rows of it are this
                // task's alone.
                unsafe { transform_input(g, self.x, block, c, &dst, (c * ld, ks), rb) };
            });
        products(g, self.u, v, m, ld, true);
        let m = &*m;
        (0..g.filters)
            .into_par_iter()
            .for_each_init(buffer, |rb, f| self.put_filter(block, m, (ld, ms), f, rb));
    }
}

/// The 16 products `m_k = u_k · v_k` of a block, `v` laid out `[k][c][ld]` and `m`
/// `[k][f][ld]`; with `parallel`, shared between threads.
fn products<T: Num>(g: &Geometry, u: &[T], v: &[T], m: &mut [T], ld: usize, parallel: bool) {
    let (cs, fs) = (g.channels * ld, g.filters * ld);
    assert!(v.len() >= 16 * cs && m.len() >= 16 * fs);
    let product = MatMul {
        m: g.filters,
        n: ld,
        k: g.channels,
        a_rs: 16 * g.channels,
        a_cs: 1,
        b_rs: ld,
        b_cs: 1,
    };
    let dst = TileOut(m.as_mut_ptr());
    let one = |k: usize| {
        // SAFETY: product `k` writes `m[k * fs..(k + 1) * fs]` (inside `m`, checked
        // above), which no other product touches; `m` is apart from `u` and `v`.
        unsafe {
            matmul_rows(
                &product,
                &u[k * g.channels..],
                &v[k * cs..],
                dst.at(k * fs),
                ld,
                false,
                false,
            );
        }
    };
    if parallel && rayon::current_num_threads() > 1 {
        (0..16).into_par_iter().for_each(one);
    } else {
        (0..16).for_each(one);
    }
}

/// `U = G g Gᵀ` for every filter `f` and channel `c`, the kernel `g` being `kernel(f, c)`,
/// into `u[f][k][c]` with `k` the element of the 4×4 transform domain; filters in
/// parallel when there are many weights.
fn transform_weights<T: Num>(
    g: &Geometry,
    u: &mut [T],
    kernel: impl Fn(usize, usize) -> [T; 9] + Sync,
) {
    let half = T::ONE.div(T::ONE.add(T::ONE));
    let c = g.channels;
    let filter = |(f, uf): (usize, &mut [T])| {
        for i in 0..c {
            let g3 = kernel(f, i);
            // Rows of G g: the kernel's columns through G; then each row through Gᵀ.
            let mut t = [[T::ZERO; 3]; 4];
            for j in 0..3 {
                let (a, b, d) = (g3[j], g3[3 + j], g3[6 + j]);
                t[0][j] = a;
                t[1][j] = half.mul(a.add(b).add(d));
                t[2][j] = half.mul(a.sub(b).add(d));
                t[3][j] = d;
            }
            for (r, &[a, b, d]) in t.iter().enumerate() {
                let k = 4 * r;
                uf[k * c + i] = a;
                uf[(k + 1) * c + i] = half.mul(a.add(b).add(d));
                uf[(k + 2) * c + i] = half.mul(a.sub(b).add(d));
                uf[(k + 3) * c + i] = d;
            }
        }
    };
    let u = &mut u[..16 * c * g.filters];
    if g.filters * c >= 1 << 14 {
        u.par_chunks_exact_mut(16 * c).enumerate().for_each(filter);
    } else {
        u.chunks_exact_mut(16 * c).enumerate().for_each(filter);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A same-size 3×3 layer of `c` channels and filters over `hw`×`hw` samples.
    fn layer(c: usize, hw: usize) -> Geometry {
        Geometry {
            h: hw,
            w: hw,
            oh: hw,
            ow: hw,
            ph: 1,
            pw: 1,
            th: hw.div_ceil(2),
            tw: hw.div_ceil(2),
            channels: c,
            filters: c,
        }
    }

    #[test]
    fn transformed_weights_are_kept_for_small_passes_of_layers_up_to_256_wide() {
        // ResNet-18's stages at batch 1: 784, 196 and 49 tiles.
        assert!(!worth_keeping(&layer(64, 56), 1));
        assert!(worth_keeping(&layer(128, 28), 1));
        assert!(worth_keeping(&layer(256, 14), 1));
        // At batch 16 the transform is shared by enough tiles.
        assert!(!worth_keeping(&layer(256, 14), 16));
        // 512 wide: 16 MiB of transformed weights each.
        assert!(!worth_keeping(&layer(512, 7), 4));
    }
}
