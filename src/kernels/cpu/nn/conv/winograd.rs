//! Convolution and its data and weight gradients by Winograd's minimal filtering
//! F(2×2, 3×3), for 2-D 3×3 windows at stride 1, undilated and ungrouped: each 2×2 block of outputs comes from a 4×4 block of
//! input through 16 products per channel pair instead of 36, so the layers that dominate
//! ResNets do 2.25 times fewer multiply-adds than by im2col.
//!
//! The outputs are cut into 2×2 tiles, and rows of tiles into blocks. For a block, the
//! input is transformed (`V = Bᵀ d B` per channel and tile), multiplied by the transformed
//! weights (`U = G g Gᵀ`) in 16 GEMMs, one per element of the 4×4 transform domain, and
//! transformed back (`Y = Aᵀ M A`) into the output. The transforms are sums and
//! differences over whole rows of tiles, so they vectorise. A large batch is cut into
//! blocks that stay in a core's cache, shared out whole between threads; a single small
//! image is one block, whose transforms and products are each shared out in turn.

use super::batch::{for_units, unit_runs};
use super::convolution::TileOut;
use super::layer::Forward;
use crate::kernels::cpu::linalg::{gemm_type, matmul_rows, MatMul};
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::simd::vectorized;
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
/// of tile rows shared out whole, each summing the products of its transformed input and
/// output gradient; their sum transformed back.
pub fn applies_to_weight_gradient<T: Num>(p: &Plan) -> bool {
    suits::<T>(p) && Geometry::of(p).blocking(p.batch).is_some_and(|b| !b.phased)
}

/// A sample's part of a block: the sample, its tile rows, and the block's column of its
/// first tile.
type Segment = (usize, Range<usize>, usize);

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

/// How the tile rows of a batch are cut into blocks.
#[derive(Clone, Copy)]
struct Blocking {
    /// Tile rows of a block, counted over the whole batch (a block may end in one sample
    /// and go on in the next).
    rows: usize,
    /// Whether the pass is one block whose transforms and products are each shared
    /// between threads, rather than blocks shared out whole.
    phased: bool,
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
    /// thread to take two; failing that, one phased block; `None` when even that would
    /// be too small to pay, or too large.
    fn blocking(&self, batch: usize) -> Option<Blocking> {
        let tw = self.tw.max(1);
        let rows = batch * self.th;
        let target = (BLOCK_ELEMS / (16 * (self.channels + self.filters)))
            .clamp(BLOCK_MIN_TILES, BLOCK_MAX_TILES);
        let mut per = target.div_ceil(tw).max(1);
        let threads = rayon::current_num_threads();
        if threads > 1 && rows.div_ceil(per) < 2 * threads {
            per = rows / (2 * threads);
        }
        if per > 0 && per * tw >= BLOCK_MIN_TILES {
            return Some(Blocking {
                rows: per,
                phased: false,
            });
        }
        let tiles = rows * self.tw;
        let elems = 16 * (self.channels + self.filters) * tiles;
        (tiles >= PHASED_MIN_TILES && elems <= PHASED_MAX_ELEMS)
            .then_some(Blocking { rows, phased: true })
    }

    /// The samples a block's tile rows `rows` cross: for each, its index, its tile rows
    /// and the block's column of its first tile.
    fn segments(&self, rows: Range<usize>) -> impl Iterator<Item = Segment> {
        let (th, tw) = (self.th, self.tw);
        (rows.start / th..rows.end.div_ceil(th)).map(move |n| {
            let (a, b) = (rows.start.max(n * th), rows.end.min((n + 1) * th));
            (n, a - n * th..b - n * th, (a - rows.start) * tw)
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

    /// Elements of a block's transformed input and products.
    fn transformed_len(&self, rows: usize) -> usize {
        16 * (self.channels + self.filters) * lead(rows * self.tw)
    }

    /// Elements of the row buffers of the two transforms, for at most `rows` tile rows
    /// of one sample at a time.
    fn row_buffers_len(&self, rows: usize) -> usize {
        16 * rows.min(self.th) * self.tw + 4 * self.tw + 2 * (self.tw + 1)
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
            rows: 1,
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
        unit_runs(self.rows().div_ceil(self.blocks.rows), self.work)
    }

    /// Tile rows of the whole batch.
    fn rows(&self) -> usize {
        self.batch * self.g.th
    }

    /// Scratch elements per run: a block's share, and the run's part of the shared
    /// transformed weights. A phased block takes its row buffers from the heap, one per
    /// thread.
    fn scratch_per_run(&self) -> usize {
        let (g, b) = (&self.g, self.blocks);
        let rows = if b.phased {
            0
        } else {
            g.row_buffers_len(b.rows)
        };
        g.transformed_len(b.rows) + rows + g.weights_len().div_ceil(self.runs().max(1))
    }

    /// `y (=|+=) conv(x, w) + b`, the weights given as `kernel(f, c)`, with `scratch` of
    /// at least `runs * scratch_per_run` elements.
    fn run<T: Num>(
        &self,
        x: &[T],
        kernel: impl Fn(usize, usize) -> [T; 9] + Sync,
        bias: Option<&[T]>,
        y: &mut [T],
        add: bool,
        scratch: &mut [T],
    ) {
        let g = self.g;
        let (in_len, out_len) = (g.channels * g.h * g.w, g.filters * g.oh * g.ow);
        assert!(
            x.len() >= self.batch * in_len && y.len() >= self.batch * out_len,
            "Convolution: arrays smaller than the plan"
        );
        let (u, rest) = scratch.split_at_mut(g.weights_len());
        transform_weights(&g, u, kernel);
        let pass = Pass {
            g,
            x,
            u,
            bias,
            out: TileOut(y.as_mut_ptr()),
            add,
        };
        let all_rows = self.rows();
        if self.blocks.phased {
            return pass.phased_block(all_rows, rest);
        }
        let per = self.blocks.rows;
        for_units(all_rows.div_ceil(per), self.runs(), rest, |unit, buf, _| {
            pass.block(unit * per..((unit + 1) * per).min(all_rows), buf);
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
    let Forward { x, w, bias, y, add } = a;
    let c = p.geom.channels;
    assert!(
        w.len() >= 9 * p.filters * c,
        "Convolution: arrays smaller than the plan"
    );
    let kernel = |f: usize, i: usize| -> [T; 9] {
        let k = &w[(f * c + i) * 9..][..9];
        std::array::from_fn(|t| k[t])
    };
    Job::new(Geometry::of(p), p).run(x, kernel, bias, y, add, scratch);
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
    Job::new(Geometry::of_data_gradient(p), p).run(dy, kernel, None, dx, add, scratch);
}

/// Scratch elements of the weight gradient of a plan that [`applies_to_weight_gradient`].
pub fn weight_gradient_scratch(p: &Plan) -> usize {
    let job = Job::new(Geometry::of(p), p);
    job.runs().max(1) * gradient_share(&job)
}

/// Scratch elements of one run of the weight gradient: a block's transformed input and
/// output gradient, the row buffers, and the run's sum of products.
fn gradient_share(job: &Job) -> usize {
    let (g, rows) = (&job.g, job.blocks.rows);
    g.transformed_len(rows) + g.row_buffers_len(rows) + g.weights_len()
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
    let (per, all_rows) = (job.blocks.rows, job.rows());
    let units = all_rows.div_ceil(per);
    let runs = job.runs().max(1).min(units);
    let share = gradient_share(&job);
    let sum_run = |r: usize, buf: &mut [T]| {
        let (du, buf) = buf.split_at_mut(g.weights_len());
        du.fill(T::ZERO);
        for unit in r * units / runs..(r + 1) * units / runs {
            let rows = unit * per..((unit + 1) * per).min(all_rows);
            gradient_block(&g, x, dy, rows, buf, du);
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
    rows: Range<usize>,
    buf: &mut [T],
    du: &mut [T],
) {
    let tiles = rows.len() * g.tw;
    let ld = lead(tiles);
    let (ks, ms) = (g.channels * ld, g.filters * ld);
    let (v, buf) = buf.split_at_mut(16 * ks);
    let (dm, rb) = buf.split_at_mut(16 * ms);
    transform_block_input(g, x, rows.clone(), v, ld, rb);
    let dmp = TileOut(dm.as_mut_ptr());
    for (n, ty, col0) in g.segments(rows) {
        for f in 0..g.filters {
            // SAFETY: `dm` holds the block's transformed output gradient, borrowed
            // mutably here.
            unsafe {
                transform_output_gradient(
                    g,
                    g.out_plane(dy, n, f),
                    ty.clone(),
                    &dmp,
                    (f * ld + col0, ms),
                    rb,
                )
            };
        }
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

/// `V = Bᵀ d B` for every channel and tile of a block of tile rows `rows` of the batch
/// `x`, on this thread, into `v[k][c][ld]`.
fn transform_block_input<T: Num>(
    g: &Geometry,
    x: &[T],
    rows: Range<usize>,
    v: &mut [T],
    ld: usize,
    rb: &mut [T],
) {
    assert!(v.len() >= 16 * g.channels * ld);
    let dst = TileOut(v.as_mut_ptr());
    for (n, ty, col0) in g.segments(rows) {
        for c in 0..g.channels {
            let at = (c * ld + col0, g.channels * ld);
            // SAFETY: `v` holds the block's transformed input (checked above), borrowed
            // mutably here.
            unsafe { transform_input(g, g.in_plane(x, n, c), ty.clone(), &dst, at, rb) };
        }
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
    bias: Option<&'a [T]>,
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

    /// One block of tile rows on this thread, with `buf` of at least
    /// `transformed_len + row_buffers_len` elements.
    fn block(&self, rows: Range<usize>, buf: &mut [T]) {
        let g = &self.g;
        let ld = lead(rows.len() * g.tw);
        let (v, buf) = buf.split_at_mut(16 * g.channels * ld);
        let (m, rb) = buf.split_at_mut(16 * g.filters * ld);
        let ms = g.filters * ld;
        transform_block_input(g, self.x, rows.clone(), v, ld, rb);
        products(g, self.u, v, m, ld, false);
        for (n, ty, col0) in g.segments(rows) {
            for f in 0..g.filters {
                // SAFETY: this block's tile rows of the plane are its own.
                let y = unsafe { self.out_plane(n, f) };
                let b = self.bias.map_or(T::ZERO, |b| b[f]);
                transform_output(g, m, (f * ld + col0, ms), ty.clone(), b, y, self.add, rb);
            }
        }
    }

    /// All `rows` tile rows as one block, each phase shared between threads: the input
    /// transform by channel, the 16 products, the output transform by filter.
    fn phased_block(&self, rows: usize, buf: &mut [T]) {
        let g = &self.g;
        let ld = lead(rows * g.tw);
        let (v, buf) = buf.split_at_mut(16 * g.channels * ld);
        let m = &mut buf[..16 * g.filters * ld];
        let row_buffers = || vec![T::ZERO; g.row_buffers_len(g.th)];
        let (ks, ms) = (g.channels * ld, g.filters * ld);
        let dst = TileOut(v.as_mut_ptr());
        (0..g.channels)
            .into_par_iter()
            .for_each_init(row_buffers, |rb, c| {
                for (n, ty, col0) in g.segments(0..rows) {
                    // SAFETY: `v` is borrowed mutably here; channel `c`'s rows of it are
                    // this task's alone.
                    let plane = g.in_plane(self.x, n, c);
                    unsafe { transform_input(g, plane, ty, &dst, (c * ld + col0, ks), rb) };
                }
            });
        products(g, self.u, v, m, ld, true);
        let m = &*m;
        (0..g.filters)
            .into_par_iter()
            .for_each_init(row_buffers, |rb, f| {
                let b = self.bias.map_or(T::ZERO, |b| b[f]);
                for (n, ty, col0) in g.segments(0..rows) {
                    // SAFETY: filter `f`'s planes are this task's alone.
                    let y = unsafe { self.out_plane(n, f) };
                    transform_output(g, m, (f * ld + col0, ms), ty, b, y, self.add, rb);
                }
            });
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

/// `V = Bᵀ d B` for every tile of tile rows `rows` of one channel's `plane`, into
/// `v[at + k * ks + t]` with `t` the tile's index in these rows.
///
/// Each input row goes through B first; its four results for every tile are kept in
/// `buf` as rows of the tiles that read the input row first, second, third or fourth, so
/// that the second pass (Bᵀ) runs over all the tiles at once in long vector loops.
///
/// # Safety
/// `v` addresses the block's transformed input, which holds these elements, and no other
/// thread touches them.
unsafe fn transform_input<T: Num>(
    g: &Geometry,
    plane: &[T],
    rows: Range<usize>,
    v: &TileOut<T>,
    (at, ks): (usize, usize),
    buf: &mut [T],
) {
    let tw = g.tw;
    let n = rows.len() * tw;
    let (hq, rest) = buf.split_at_mut(16 * n);
    let (h, rest) = rest.split_at_mut(4 * tw);
    let (even, odd) = rest[..2 * (tw + 1)].split_at_mut(tw + 1);
    let first_row = (2 * rows.start) as isize - g.ph as isize;
    vectorized(
        #[inline(always)]
        || {
            // Input row r is row q = r % 2 of tile row r / 2, and row q + 2 of tile row
            // r / 2 − 1. Through B, per tile: h0 = a0 − a2, h1 = a1 + a2, h2 = a2 − a1,
            // h3 = a1 − a3, with a_j the row's element 2·tx − pw + j.
            for r in 0..2 * rows.len() + 2 {
                let row = first_row + r as isize;
                if row < 0 || row >= g.h as isize {
                    h.fill(T::ZERO);
                } else {
                    let line = &plane[row as usize * g.w..(row as usize + 1) * g.w];
                    split_columns(line, g.pw, even, odd);
                    let (h0, rest) = h.split_at_mut(tw);
                    let (h1, rest) = rest.split_at_mut(tw);
                    let (h2, h3) = rest.split_at_mut(tw);
                    let a = even.iter().zip(&even[1..]).zip(odd.iter().zip(&odd[1..]));
                    let outs = h0.iter_mut().zip(h1.iter_mut()).zip(h2.iter_mut().zip(h3));
                    for (((h0, h1), (h2, h3)), ((&e0, &e1), (&o0, &o1))) in outs.zip(a) {
                        *h0 = e0.sub(e1);
                        *h1 = o0.add(e1);
                        *h2 = e1.sub(o0);
                        *h3 = o0.sub(o1);
                    }
                }
                let mut place = |i: usize, q: usize| {
                    if i < rows.len() {
                        for j in 0..4 {
                            let o = (4 * q + j) * n + i * tw;
                            hq[o..o + tw].copy_from_slice(&h[j * tw..(j + 1) * tw]);
                        }
                    }
                };
                place(r / 2, r % 2);
                if r >= 2 {
                    place(r / 2 - 1, r % 2 + 2);
                }
            }
            // Then the four rows of every tile through Bᵀ: v0 = r0 − r2, v1 = r1 + r2,
            // v2 = r2 − r1, v3 = r1 − r3.
            for j in 0..4 {
                let r = |q: usize| &hq[(4 * q + j) * n..(4 * q + j + 1) * n];
                let (r0, r1, r2, r3) = (r(0), r(1), r(2), r(3));
                // SAFETY: the four rows `at..at + n` of elements `j`, `4 + j`, `8 + j`
                // and `12 + j` lie inside `v`, and are this call's alone.
                let d = |i: usize| unsafe {
                    std::slice::from_raw_parts_mut(v.at((4 * i + j) * ks + at), n)
                };
                let (d0, d1, d2, d3) = (d(0), d(1), d(2), d(3));
                for t in 0..n {
                    d0[t] = r0[t].sub(r2[t]);
                    d1[t] = r1[t].add(r2[t]);
                    d2[t] = r2[t].sub(r1[t]);
                    d3[t] = r1[t].sub(r3[t]);
                }
            }
        },
    );
}

/// The padded row's even and odd elements: `even[q]` is the line's element
/// `2q − pad` and `odd[q]` the one after it, zero outside the line.
#[inline(always)]
fn split_columns<T: Num>(line: &[T], pad: usize, even: &mut [T], odd: &mut [T]) {
    let w = line.len() as isize;
    let at = |col: isize| {
        if col >= 0 && col < w {
            line[col as usize]
        } else {
            T::ZERO
        }
    };
    let n = even.len();
    // Columns 2q − pad and 2q − pad + 1 lie inside the line for q in lo..hi.
    let lo = pad.div_ceil(2).min(n);
    let hi = ((line.len() + pad) / 2).clamp(lo, n);
    for q in (0..lo).chain(hi..n) {
        let col = (2 * q) as isize - pad as isize;
        even[q] = at(col);
        odd[q] = at(col + 1);
    }
    let inner = &line[2 * lo - pad..2 * hi - pad];
    for ((e, o), pair) in even[lo..hi]
        .iter_mut()
        .zip(&mut odd[lo..hi])
        .zip(inner.chunks_exact(2))
    {
        *e = pair[0];
        *o = pair[1];
    }
}

/// `Y = Aᵀ M A` for every tile of tile rows `rows` of one filter, from its products
/// `m[at + k * ks + t]`, plus the bias `b`, written or added into the
/// filter's output plane `y`. The four outputs of every tile are computed over all the
/// tiles at once into `buf`, then put in place.
#[allow(clippy::too_many_arguments)]
fn transform_output<T: Num>(
    g: &Geometry,
    m: &[T],
    (at, ks): (usize, usize),
    rows: Range<usize>,
    b: T,
    y: &mut [T],
    add: bool,
    buf: &mut [T],
) {
    let tw = g.tw;
    let n = rows.len() * tw;
    let (y00, rest) = buf[..4 * n].split_at_mut(n);
    let (y01, rest) = rest.split_at_mut(n);
    let (y10, y11) = rest.split_at_mut(n);
    vectorized(
        #[inline(always)]
        || {
            let mk: [&[T]; 16] = std::array::from_fn(|k| &m[at + k * ks..][..n]);
            // Rows of Aᵀ M (s_aj = m0j + m1j + m2j for a = 0, m1j − m2j − m3j for a = 1),
            // then through A: y_a0 = s_a0 + s_a1 + s_a2, y_a1 = s_a1 − s_a2 − s_a3.
            for t in 0..n {
                let e = |k: usize| mk[k][t];
                let s0 = |j: usize| e(j).add(e(4 + j)).add(e(8 + j));
                let s1 = |j: usize| e(4 + j).sub(e(8 + j)).sub(e(12 + j));
                let (a0, a1, a2, a3) = (s0(0), s0(1), s0(2), s0(3));
                let (c0, c1, c2, c3) = (s1(0), s1(1), s1(2), s1(3));
                y00[t] = a0.add(a1).add(a2).add(b);
                y01[t] = a1.sub(a2).sub(a3).add(b);
                y10[t] = c0.add(c1).add(c2).add(b);
                y11[t] = c1.sub(c2).sub(c3).add(b);
            }
            for (i, ty) in rows.clone().enumerate() {
                let tile_row = i * tw..(i + 1) * tw;
                for (a, (ya, yb)) in [(&*y00, &*y01), (&*y10, &*y11)].into_iter().enumerate() {
                    let oy = 2 * ty + a;
                    if oy >= g.oh {
                        break;
                    }
                    let (ya, yb) = (&ya[tile_row.clone()], &yb[tile_row.clone()]);
                    put_pairs(&mut y[oy * g.ow..(oy + 1) * g.ow], ya, yb, add);
                }
            }
        },
    );
}

/// `dM = A dY Aᵀ` for every tile of tile rows `rows` of one filter's output gradient
/// `plane`, into `dm[at + k * ks + t]`: the adjoint of [`transform_output`].
///
/// # Safety
/// `dm` addresses the block's transformed output gradient, which holds these elements,
/// and no other thread touches them.
unsafe fn transform_output_gradient<T: Num>(
    g: &Geometry,
    plane: &[T],
    rows: Range<usize>,
    dm: &TileOut<T>,
    (at, ks): (usize, usize),
    buf: &mut [T],
) {
    let tw = g.tw;
    let n = rows.len() * tw;
    let (y00, rest) = buf[..4 * n].split_at_mut(n);
    let (y01, rest) = rest.split_at_mut(n);
    let (y10, y11) = rest.split_at_mut(n);
    vectorized(
        #[inline(always)]
        || {
            // The tiles' 2×2 gradients, each output row split into even and odd columns
            // (zero past the edge).
            for (i, ty) in rows.clone().enumerate() {
                let tile_row = i * tw..(i + 1) * tw;
                for (a, (ya, yb)) in [(&mut *y00, &mut *y01), (&mut *y10, &mut *y11)]
                    .into_iter()
                    .enumerate()
                {
                    let (ya, yb) = (&mut ya[tile_row.clone()], &mut yb[tile_row.clone()]);
                    let oy = 2 * ty + a;
                    if oy < g.oh {
                        split_columns(&plane[oy * g.ow..(oy + 1) * g.ow], 0, ya, yb);
                    } else {
                        ya.fill(T::ZERO);
                        yb.fill(T::ZERO);
                    }
                }
            }
            // SAFETY: the 16 rows `at + k * ks .. + n` lie inside `dm`, this call's alone.
            let row = |k: usize| unsafe { std::slice::from_raw_parts_mut(dm.at(at + k * ks), n) };
            let (a0, a1, b0, b1) = (&*y00, &*y01, &*y10, &*y11);
            // Through A over the two rows (p0 = y0, p1 = y0 + y1, p2 = y0 − y1, p3 = −y1),
            // then over the two columns of each the same way.
            spread(n, |t| (a0[t], a1[t]), [row(0), row(1), row(2), row(3)]);
            spread(
                n,
                |t| (a0[t].add(b0[t]), a1[t].add(b1[t])),
                [row(4), row(5), row(6), row(7)],
            );
            spread(
                n,
                |t| (a0[t].sub(b0[t]), a1[t].sub(b1[t])),
                [row(8), row(9), row(10), row(11)],
            );
            let neg = |t: usize| (T::ZERO.sub(b0[t]), T::ZERO.sub(b1[t]));
            spread(n, neg, [row(12), row(13), row(14), row(15)]);
        },
    );
}

/// One row of `dM = A P Aᵀ` over `n` tiles from the row `(p0, p1) = q(t)` of `P`:
/// `d = (p0, p0 + p1, p0 − p1, −p1)`.
#[inline(always)]
fn spread<T: Num>(n: usize, q: impl Fn(usize) -> (T, T), d: [&mut [T]; 4]) {
    let [d0, d1, d2, d3] = d;
    let (d0, d1, d2, d3) = (&mut d0[..n], &mut d1[..n], &mut d2[..n], &mut d3[..n]);
    for t in 0..n {
        let (p0, p1) = q(t);
        d0[t] = p0;
        d1[t] = p0.add(p1);
        d2[t] = p0.sub(p1);
        d3[t] = T::ZERO.sub(p1);
    }
}

/// `line[2t] (=|+=) ya[t]`, `line[2t + 1] (=|+=) yb[t]`, within the line's length.
#[inline(always)]
fn put_pairs<T: Num>(line: &mut [T], ya: &[T], yb: &[T], add: bool) {
    let (full, tail) = line.split_at_mut(line.len() / 2 * 2);
    for ((out, &a), &b) in full.chunks_exact_mut(2).zip(ya).zip(yb) {
        if add {
            out[0] = out[0].add(a);
            out[1] = out[1].add(b);
        } else {
            out[0] = a;
            out[1] = b;
        }
    }
    if let (Some(last), Some(&a)) = (tail.first_mut(), ya.get(full.len() / 2)) {
        *last = if add { last.add(a) } else { a };
    }
}
