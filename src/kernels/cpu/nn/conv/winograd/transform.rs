//! The tile transforms of F(2×2, 3×3) over one block: the input's (`Bᵀ d B`), the
//! output's (`Aᵀ M A`) and its adjoint for the output gradient (`A dY Aᵀ`), each as
//! sums and differences over all the block's tiles at once, a vector at a time.
//!
//! A block's tiles are numbered `(row * samples + sample) * (tw + 1) + column`: with
//! several small images in a block, one pass of a transform covers all of them. Column
//! `tw` of every row is a tile past the image's edge, whose outputs are dropped and
//! whose output gradient is zero: it lets the input transform read each of the 16
//! elements of every tile of the block as one run of consecutive elements.

use super::super::wide::Wide;
use super::lanes::{lanes, LaneMap};
use super::{Block, Geometry};
use crate::kernels::cpu::nn::conv::convolution::TileOut;
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::simd::vectorized;
use pulp::Simd;

/// Elements of the buffer the transforms of a block of `samples` samples and `rows` tile
/// rows need.
pub(super) fn buffer_len(g: &Geometry, samples: usize, rows: usize) -> usize {
    4 * plane_len(g, samples, rows)
}

/// Elements of one of the four planes [`transform_input`] splits a block's input into:
/// its rows, and one more element that the last tile past the edge reads.
fn plane_len(g: &Geometry, samples: usize, rows: usize) -> usize {
    (rows + 1) * samples * (g.tw + 1) + 1
}

// The maps below are written out without closures or `array::from_fn`: whatever the
// compiler leaves out of line loses the vector instruction set.

/// `(d0 − d2, d1 + d2, d2 − d1, d1 − d3)`: four values through B.
#[inline(always)]
fn through_b<E: Wide, S: Simd>(
    s: S,
    d0: E::V<S>,
    d1: E::V<S>,
    d2: E::V<S>,
    d3: E::V<S>,
) -> [E::V<S>; 4] {
    [
        E::sub(s, d0, d2),
        E::add(s, d1, d2),
        E::sub(s, d2, d1),
        E::sub(s, d1, d3),
    ]
}

/// `Bᵀ d B` of a 4×4 patch: each row through B, then each column.
struct InputTransform;

impl LaneMap<16, 16> for InputTransform {
    #[inline(always)]
    fn apply<E: Wide, S: Simd>(&self, s: S, d: [E::V<S>; 16]) -> [E::V<S>; 16] {
        let r0 = through_b::<E, S>(s, d[0], d[1], d[2], d[3]);
        let r1 = through_b::<E, S>(s, d[4], d[5], d[6], d[7]);
        let r2 = through_b::<E, S>(s, d[8], d[9], d[10], d[11]);
        let r3 = through_b::<E, S>(s, d[12], d[13], d[14], d[15]);
        let c0 = through_b::<E, S>(s, r0[0], r1[0], r2[0], r3[0]);
        let c1 = through_b::<E, S>(s, r0[1], r1[1], r2[1], r3[1]);
        let c2 = through_b::<E, S>(s, r0[2], r1[2], r2[2], r3[2]);
        let c3 = through_b::<E, S>(s, r0[3], r1[3], r2[3], r3[3]);
        [
            c0[0], c1[0], c2[0], c3[0], c0[1], c1[1], c2[1], c3[1], c0[2], c1[2], c2[2], c3[2],
            c0[3], c1[3], c2[3], c3[3],
        ]
    }
}

/// `(r0 + r1 + r2 + b, r1 − r2 − r3 + b)`: four values through Aᵀ, plus `b`.
#[inline(always)]
fn through_at<E: Wide, S: Simd>(s: S, r: [E::V<S>; 4], b: E::V<S>) -> [E::V<S>; 2] {
    [
        E::add(s, E::add(s, E::add(s, r[0], r[1]), r[2]), b),
        E::add(s, E::sub(s, E::sub(s, r[1], r[2]), r[3]), b),
    ]
}

/// `Aᵀ M A + bias` of a 4×4 product: the rows of `Aᵀ M`, then each through Aᵀ again;
/// the outputs (0, 0), (0, 1), (1, 0), (1, 1).
struct OutputTransform {
    bias: f64,
}

impl LaneMap<16, 4> for OutputTransform {
    #[inline(always)]
    fn apply<E: Wide, S: Simd>(&self, s: S, e: [E::V<S>; 16]) -> [E::V<S>; 4] {
        let (zero, b) = (E::splat(s, E::of(0.0)), E::splat(s, E::of(self.bias)));
        let m0 = through_at::<E, S>(s, [e[0], e[4], e[8], e[12]], zero);
        let m1 = through_at::<E, S>(s, [e[1], e[5], e[9], e[13]], zero);
        let m2 = through_at::<E, S>(s, [e[2], e[6], e[10], e[14]], zero);
        let m3 = through_at::<E, S>(s, [e[3], e[7], e[11], e[15]], zero);
        let y0 = through_at::<E, S>(s, [m0[0], m1[0], m2[0], m3[0]], b);
        let y1 = through_at::<E, S>(s, [m0[1], m1[1], m2[1], m3[1]], b);
        [y0[0], y0[1], y1[0], y1[1]]
    }
}

/// `(p0, p0 + p1, p0 − p1, −p1)`: two values through A.
#[inline(always)]
fn through_a<E: Wide, S: Simd>(s: S, zero: E::V<S>, p0: E::V<S>, p1: E::V<S>) -> [E::V<S>; 4] {
    [
        p0,
        E::add(s, p0, p1),
        E::sub(s, p0, p1),
        E::sub(s, zero, p1),
    ]
}

/// `A P Aᵀ` of a 2×2 output gradient `P`: through A over the two rows, then over the two
/// columns of each.
struct OutputGradientTransform;

impl LaneMap<4, 16> for OutputGradientTransform {
    #[inline(always)]
    fn apply<E: Wide, S: Simd>(&self, s: S, [a0, a1, b0, b1]: [E::V<S>; 4]) -> [E::V<S>; 16] {
        let zero = E::splat(s, E::of(0.0));
        let r0 = through_a::<E, S>(s, zero, a0, b0);
        let r1 = through_a::<E, S>(s, zero, a1, b1);
        let d0 = through_a::<E, S>(s, zero, r0[0], r1[0]);
        let d1 = through_a::<E, S>(s, zero, r0[1], r1[1]);
        let d2 = through_a::<E, S>(s, zero, r0[2], r1[2]);
        let d3 = through_a::<E, S>(s, zero, r0[3], r1[3]);
        [
            d0[0], d0[1], d0[2], d0[3], d1[0], d1[1], d1[2], d1[3], d2[0], d2[1], d2[2], d2[3],
            d3[0], d3[1], d3[2], d3[3],
        ]
    }
}

/// `V = Bᵀ d B` for channel `c` of every tile of `block` of the batch `x`, into
/// `v[at + k * ks + t]`, `k` being the element of the 4×4 transform domain.
///
/// The block's input is first split by the parity of its rows and columns into four
/// planes `q[pr][pc][y][s][x]` (zero outside the image): there, element `(2a + pr,
/// 2b + pc)` of tile `(ty, tx)`'s 4×4 patch is at `(ty + a, s, tx + b)`, so each of the 16
/// elements of every tile of the block is a run of consecutive elements of one plane.
///
/// # Safety
/// `v` addresses the block's transformed input, which holds these elements, and no other
/// thread touches them.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn transform_input<T: Num>(
    g: &Geometry,
    x: &[T],
    block: &Block,
    c: usize,
    v: &TileOut<T>,
    (at, ks): (usize, usize),
    buf: &mut [T],
) {
    let (samples, rows) = (block.samples, block.rows.len());
    let qw = g.tw + 1;
    let plane = plane_len(g, samples, rows);
    let q = &mut buf[..4 * plane];
    vectorized(
        #[inline(always)]
        || {
            for s in 0..samples {
                let image = g.in_plane(x, block.n0 + s, c);
                for r in 0..2 * (rows + 1) {
                    let (pr, y) = (r % 2, r / 2);
                    let row = (2 * block.rows.start + r).wrapping_sub(g.ph);
                    let (even, odd) = q[2 * pr * plane..(2 * pr + 2) * plane].split_at_mut(plane);
                    let at = (y * samples + s) * qw;
                    let line = (row < g.h).then(|| &image[row * g.w..(row + 1) * g.w]);
                    split_columns(line, g.pw, &mut even[at..at + qw], &mut odd[at..at + qw]);
                }
            }
            for p in q.chunks_exact_mut(plane) {
                p[plane - 1] = T::ZERO;
            }
        },
    );
    let n = block.tiles(g);
    let q = &*q;
    let patch: [&[T]; 16] = std::array::from_fn(|k| {
        let (i, j) = (k / 4, k % 4);
        let from = (2 * (i % 2) + j % 2) * plane + (i / 2) * samples * qw + j / 2;
        &q[from..from + n]
    });
    // SAFETY: the 16 runs `at + k * ks..+ n` lie inside `v`, and are this call's alone.
    let out: [&mut [T]; 16] =
        std::array::from_fn(|k| unsafe { std::slice::from_raw_parts_mut(v.at(at + k * ks), n) });
    lanes(n, patch, out, &InputTransform);
}

/// The padded row's even and odd elements: `even[q]` is the line's element `2q − pad`
/// and `odd[q]` the one after it, zero outside the line, or everywhere without one.
#[inline(always)]
fn split_columns<T: Num>(line: Option<&[T]>, pad: usize, even: &mut [T], odd: &mut [T]) {
    let Some(line) = line else {
        even.fill(T::ZERO);
        odd.fill(T::ZERO);
        return;
    };
    let w = line.len();
    for (q, (e, o)) in even.iter_mut().zip(odd.iter_mut()).enumerate() {
        // Columns left of the line wrap round to large numbers, past its end.
        let col = (2 * q).wrapping_sub(pad);
        *e = if col < w { line[col] } else { T::ZERO };
        let col = col.wrapping_add(1);
        *o = if col < w { line[col] } else { T::ZERO };
    }
}

/// `Y = Aᵀ M A` plus the bias `b` for every tile of a block of `tiles` tiles of one
/// filter, from its products `m[at + k * ks + t]`, into `buf` as four runs of `tiles`:
/// the tiles' outputs (0, 0), (0, 1), (1, 0) and (1, 1). [`put_output`] puts them in
/// place.
pub(super) fn transform_output<T: Num>(
    m: &[T],
    (at, ks): (usize, usize),
    tiles: usize,
    b: T,
    buf: &mut [T],
) {
    let (y00, rest) = buf[..4 * tiles].split_at_mut(tiles);
    let (y01, rest) = rest.split_at_mut(tiles);
    let (y10, y11) = rest.split_at_mut(tiles);
    let mk: [&[T]; 16] = std::array::from_fn(|k| &m[at + k * ks..][..tiles]);
    let map = OutputTransform { bias: b.to_f64() };
    lanes(tiles, mk, [y00, y01, y10, y11], &map);
}

/// Puts sample `s`'s part of the outputs [`transform_output`] left in `buf` into its
/// plane `y` of the block's filter, written or added.
pub(super) fn put_output<T: Num>(
    g: &Geometry,
    block: &Block,
    s: usize,
    buf: &[T],
    y: &mut [T],
    add: bool,
) {
    let tiles = block.tiles(g);
    let ys: [&[T]; 4] = std::array::from_fn(|i| &buf[i * tiles..(i + 1) * tiles]);
    vectorized(
        #[inline(always)]
        || {
            for (i, ty) in block.rows.clone().enumerate() {
                let from = (i * block.samples + s) * (g.tw + 1);
                for a in 0..2 {
                    let oy = 2 * ty + a;
                    if oy >= g.oh {
                        break;
                    }
                    let line = &mut y[oy * g.ow..(oy + 1) * g.ow];
                    put_pairs(line, &ys[2 * a][from..], &ys[2 * a + 1][from..], add);
                }
            }
        },
    );
}

/// `line[2t] (=|+=) ya[t]`, `line[2t + 1] (=|+=) yb[t]`, within the line's length.
#[inline(always)]
fn put_pairs<T: Num>(line: &mut [T], ya: &[T], yb: &[T], add: bool) {
    let put = |out: &mut T, v: T| *out = if add { out.add(v) } else { v };
    let (full, tail) = line.split_at_mut(line.len() / 2 * 2);
    for ((out, &a), &b) in full.chunks_exact_mut(2).zip(ya).zip(yb) {
        put(&mut out[0], a);
        put(&mut out[1], b);
    }
    if let Some(last) = tail.first_mut() {
        put(last, ya[full.len() / 2]);
    }
}

/// `dM = A dY Aᵀ` for filter `f` of every tile of `block` of the output gradient `dy`,
/// into `dm[at + k * ks + t]`: the adjoint of [`transform_output`].
///
/// # Safety
/// `dm` addresses the block's transformed output gradient, which holds these elements,
/// and no other thread touches them.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn transform_output_gradient<T: Num>(
    g: &Geometry,
    dy: &[T],
    block: &Block,
    f: usize,
    dm: &TileOut<T>,
    (at, ks): (usize, usize),
    buf: &mut [T],
) {
    let qw = g.tw + 1;
    let tiles = block.tiles(g);
    let (y00, rest) = buf[..4 * tiles].split_at_mut(tiles);
    let (y01, rest) = rest.split_at_mut(tiles);
    let (y10, y11) = rest.split_at_mut(tiles);
    vectorized(
        #[inline(always)]
        || {
            // The tiles' 2×2 gradients, each output row split into even and odd columns
            // (zero past the edge, and so for the tiles past it).
            for s in 0..block.samples {
                let plane = g.out_plane(dy, block.n0 + s, f);
                for (i, ty) in block.rows.clone().enumerate() {
                    let from = (i * block.samples + s) * qw;
                    for (a, (ya, yb)) in [(&mut *y00, &mut *y01), (&mut *y10, &mut *y11)]
                        .into_iter()
                        .enumerate()
                    {
                        let oy = 2 * ty + a;
                        let line = (oy < g.oh).then(|| &plane[oy * g.ow..(oy + 1) * g.ow]);
                        let (ya, yb) = (&mut ya[from..from + qw], &mut yb[from..from + qw]);
                        split_columns(line, 0, ya, yb);
                    }
                }
            }
        },
    );
    // SAFETY: the 16 runs `at + k * ks..+ tiles` lie inside `dm`, this call's alone.
    let out: [&mut [T]; 16] = std::array::from_fn(|k| unsafe {
        std::slice::from_raw_parts_mut(dm.at(at + k * ks), tiles)
    });
    let ins = [&*y00, &*y01, &*y10, &*y11];
    lanes(tiles, ins, out, &OutputGradientTransform);
}
