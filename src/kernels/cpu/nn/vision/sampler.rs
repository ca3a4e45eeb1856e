//! CPU kernels of `BilinearSampler` and its backward: each output pixel interpolates the
//! four data pixels around its grid position (zeros outside the data); the backward
//! spreads the gradient over those four and differentiates the position.

use crate::dispatch_float;
use crate::dtype::Element;
use crate::error::Result;
use crate::kernels::cpu::map::{pool_shares_work, PAR_MIN};
use crate::kernels::cpu::nn::basic::common::{for_chunks, ld, put, st};
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::nn::bilinear_sampler::{BilinearSampler, BilinearSamplerBackward, NAME};
use crate::op::{OpContext, OpReq, Operator};
use num_traits::Float;
use rayon::prelude::*;

/// A grid position in the data: its top-left pixel and the weights of the top row and
/// the left column.
struct Point<F> {
    y0: i64,
    x0: i64,
    wy: F,
    wx: F,
}

impl<F: Float> Point<F> {
    /// The position of normalised (`gx`, `gy`) in data of `h` x `w` pixels, as MXNet
    /// computes it: `(g + 1) * (n - 1) / 2`.
    fn at(gx: F, gy: F, h: usize, w: usize) -> Point<F> {
        let two = F::one() + F::one();
        let real = |g: F, n: usize| (g + F::one()) * F::from(n as f64 - 1.0).unwrap() / two;
        let (y, x) = (real(gy, h), real(gx, w));
        let (fy, fx) = (y.floor(), x.floor());
        let index = |f: F| f.to_i64().unwrap_or(i64::MIN / 2);
        Point {
            y0: index(fy),
            x0: index(fx),
            wy: F::one() - (y - fy),
            wx: F::one() - (x - fx),
        }
    }

    /// The four corners (top-left, top-right, bottom-left, bottom-right) as offsets into
    /// an `h` x `w` plane, `None` where outside it.
    fn corners(&self, h: usize, w: usize) -> [Option<usize>; 4] {
        let at = |dy: i64, dx: i64| {
            let (y, x) = (self.y0.saturating_add(dy), self.x0.saturating_add(dx));
            (y >= 0 && x >= 0 && (y as usize) < h && (x as usize) < w)
                .then(|| y as usize * w + x as usize)
        };
        [at(0, 0), at(0, 1), at(1, 0), at(1, 1)]
    }

    /// The weights of the four corners, in the order of `corners`.
    fn weights(&self) -> [F; 4] {
        let (wy, wx) = (self.wy, self.wx);
        let (vy, vx) = (F::one() - wy, F::one() - wx);
        [wy * wx, wy * vx, vy * wx, vy * vx]
    }
}

/// The grid position of output pixel `p` of sample `n` (grids are (batch, 2, pixels)).
fn point<T: Element, F: Float + 'static>(
    grid: &[T],
    n: usize,
    p: usize,
    pixels: usize,
    size: (usize, usize),
) -> Point<F> {
    let base = n * 2 * pixels + p;
    Point::at(
        ld::<T, F>(grid[base]),
        ld::<T, F>(grid[base + pixels]),
        size.0,
        size.1,
    )
}

impl CpuKernel for BilinearSampler {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let req = io.req[0];
        if req == OpReq::Null {
            return Ok(());
        }
        let add = req == OpReq::Add;
        let (data, grid, out) = (&io.inputs[0], &io.inputs[1], &io.outputs[0]);
        let (c, h, w) = (data.shape[1], data.shape[2], data.shape[3]);
        let pixels = out.shape[2] * out.shape[3];
        dispatch_float!(NAME, out.dtype, T, F => {
            let (d, g) = (data.slice::<T>(), grid.slice::<T>());
            for_chunks(out.slice_mut::<T>(), pixels, |off, o| {
                for (k, plane) in o.chunks_mut(pixels).enumerate() {
                    let row = off / pixels + k;
                    let (n, src) = (row / c, &d[row * h * w..(row + 1) * h * w]);
                    for (p, o) in plane.iter_mut().enumerate() {
                        let pt = point::<T, F>(g, n, p, pixels, (h, w));
                        let mut v = num::<F>(0.0);
                        for (corner, wt) in pt.corners(h, w).into_iter().zip(pt.weights()) {
                            if let Some(i) = corner {
                                v += ld::<T, F>(src[i]) * wt;
                            }
                        }
                        put(o, st::<F, T>(v), add);
                    }
                }
            });
        });
        Ok(())
    }
}

impl CpuKernel for BilinearSamplerBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let (og, data, grid) = (&io.inputs[0], &io.inputs[1], &io.inputs[2]);
        let (req_d, req_g) = (io.req[0], io.req[1]);
        if req_d == OpReq::Null && req_g == OpReq::Null {
            return Ok(());
        }
        let (batch, c, h, w) = (data.shape[0], data.shape[1], data.shape[2], data.shape[3]);
        let pixels = og.shape[2] * og.shape[3];
        dispatch_float!(self.name(), data.dtype, T, F => {
            let (g, d, gr) = (og.slice::<T>(), data.slice::<T>(), grid.slice::<T>());
            // Each sample's parts of the two gradients, or `None` where not requested.
            let parts = |req: OpReq, i: usize, len: usize| -> Vec<Option<&mut [T]>> {
                if req == OpReq::Null || len == 0 {
                    return (0..batch).map(|_| None).collect();
                }
                let all = io.outputs[i].slice_mut::<T>();
                if req != OpReq::Add {
                    all.fill(T::ZERO);
                }
                all.chunks_mut(len).map(Some).collect()
            };
            let gd_parts = parts(req_d, 0, c * h * w);
            let gg_parts = parts(req_g, 1, 2 * pixels);
            let sample = |n: usize, (mut gd, gg): (Option<&mut [T]>, Option<&mut [T]>)| {
                let mut grid_grad = vec![(num::<F>(0.0), num::<F>(0.0)); if gg.is_some() { pixels } else { 0 }];
                for p in 0..pixels {
                    let pt = point::<T, F>(gr, n, p, pixels, (h, w));
                    let corners = pt.corners(h, w);
                    let weights = pt.weights();
                    let (mut gy, mut gx) = (num::<F>(0.0), num::<F>(0.0));
                    for ch in 0..c {
                        let row = n * c + ch;
                        let o = ld::<T, F>(g[row * pixels + p]);
                        let plane = &d[row * h * w..(row + 1) * h * w];
                        let mut v = [num::<F>(0.0); 4];
                        for (k, corner) in corners.iter().enumerate() {
                            if let Some(i) = *corner {
                                v[k] = ld::<T, F>(plane[i]);
                                if let Some(gd) = gd.as_deref_mut() {
                                    let at = &mut gd[ch * h * w + i];
                                    *at = at.add(st::<F, T>(o * weights[k]));
                                }
                            }
                        }
                        let cross = v[0] - v[1] - v[2] + v[3];
                        gy -= o * (v[1] - v[3] + cross * pt.wx);
                        gx -= o * (v[2] - v[3] + cross * pt.wy);
                    }
                    if let Some(q) = grid_grad.get_mut(p) {
                        *q = (gx, gy);
                    }
                }
                if let Some(gg) = gg {
                    let two = num::<F>(1.0) + num::<F>(1.0);
                    let (ew, eh) = (num::<F>(w as f64 - 1.0), num::<F>(h as f64 - 1.0));
                    let (xs, ys) = gg.split_at_mut(pixels);
                    for (p, (gx, gy)) in grid_grad.into_iter().enumerate() {
                        xs[p] = xs[p].add(st::<F, T>(gx * ew / two));
                        ys[p] = ys[p].add(st::<F, T>(gy * eh / two));
                    }
                }
            };
            let work = gd_parts.into_iter().zip(gg_parts);
            if og.size() < PAR_MIN || batch < 2 || !pool_shares_work() {
                work.enumerate().for_each(|(n, parts)| sample(n, parts));
            } else {
                work.collect::<Vec<_>>()
                    .into_par_iter()
                    .enumerate()
                    .for_each(|(n, parts)| sample(n, parts));
            }
        });
        Ok(())
    }
}

/// `v` in the compute type.
fn num<F: Float>(v: f64) -> F {
    F::from(v).unwrap_or_else(F::nan)
}

/// Registers the CPU kernels of `BilinearSampler`.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<BilinearSampler>(k);
    cpu::add::<BilinearSamplerBackward>(k);
}
