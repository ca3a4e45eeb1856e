//! CPU kernels of `BatchNorm` over any channel axis, with moving statistics as auxiliary
//! states, and of its backward.
//!
//! The saved outputs are the batch mean and the inverse standard deviation
//! `1/sqrt(var + eps)` (in inference or with `use_global_stats`, those of the moving
//! statistics), as MXNet's CPU kernel saves them. The moving statistics are updated by
//! the training forward pass: `moving = moving * momentum + batch * (1 - momentum)`, with
//! the biased batch variance.

use crate::error::{Error, Result};
use crate::kernels::cpu::map::pool_shares_work;
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::simd::vectorized;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::nn::batch_norm::{BatchNorm, BatchNormBackward, Layout};
use crate::op::{OpContext, OpReq};
use num_traits::Float;
use rayon::prelude::*;

/// Below this many elements the kernels run on the calling thread.
const PAR_MIN: usize = 1 << 15;

impl Layout {
    /// Elements per channel.
    fn per_channel(&self) -> usize {
        self.outer * self.inner
    }

    /// Calls `f(block)` for every contiguous block of channel `c`.
    fn blocks<'a, T>(&self, x: &'a [T], c: usize) -> impl Iterator<Item = &'a [T]> + 'a {
        let (ch, inner) = (self.channels, self.inner);
        (0..self.outer).map(move |o| &x[(o * ch + c) * inner..(o * ch + c + 1) * inner])
    }
}

/// Runs `f(c)` for every channel, in parallel for large inputs, collecting the results.
fn per_channel<R: Send>(l: &Layout, f: impl Fn(usize) -> R + Sync + Send) -> Vec<R> {
    if l.channels * l.per_channel() >= PAR_MIN && pool_shares_work() {
        (0..l.channels).into_par_iter().map(f).collect()
    } else {
        (0..l.channels).map(f).collect()
    }
}

/// Runs `f(c, range, block)` over every contiguous block of `out`: its channel, the
/// element range it covers and its memory.
fn per_block<T: Send>(
    l: &Layout,
    out: &mut [T],
    f: impl Fn(usize, std::ops::Range<usize>, &mut [T]) + Sync + Send,
) {
    let (ch, inner) = (l.channels, l.inner);
    if inner == 0 {
        return;
    }
    let one = |(i, b): (usize, &mut [T])| f(i % ch, i * inner..(i + 1) * inner, b);
    if out.len() >= PAR_MIN && pool_shares_work() {
        out.par_chunks_mut(inner).enumerate().for_each(one);
    } else {
        out.chunks_mut(inner).enumerate().for_each(one);
    }
}

/// A value widened to f64.
#[inline(always)]
fn wide<T: Num>(v: T) -> f64 {
    crate::dtype::Element::to_f64(v)
}

/// Independent accumulators of the per-channel sums, so the adds pipeline and vectorise.
const LANES: usize = 16;

/// Elements summed in the element type before the partial sum joins the f64 total.
const RUN: usize = 4096;

/// `Σ f(v)` over a block: lanes in the element type, runs widened to f64.
#[inline(always)]
fn lane_sum<T: Num>(b: &[T], f: impl Fn(T) -> T) -> f64 {
    let mut total = 0.0;
    for run in b.chunks(RUN) {
        let mut lanes = [T::ZERO; LANES];
        let mut it = run.chunks_exact(LANES);
        for c in &mut it {
            for (l, &v) in lanes.iter_mut().zip(c) {
                *l = l.add(f(v));
            }
        }
        let rest = it.remainder().iter().fold(T::ZERO, |a, &v| a.add(f(v)));
        total += wide(lanes.iter().fold(rest, |a, &l| a.add(l)));
    }
    total
}

/// `(Σ g, Σ g·(v - mu))` over a block of the output gradient `g` and the data `v`.
#[inline(always)]
fn lane_sums2<T: Num>(g: &[T], x: &[T], mu: T) -> (f64, f64) {
    let (mut sg, mut sgd) = (0.0, 0.0);
    for (gr, xr) in g.chunks(RUN).zip(x.chunks(RUN)) {
        let (mut a, mut b) = ([T::ZERO; LANES], [T::ZERO; LANES]);
        let (mut gi, mut xi) = (gr.chunks_exact(LANES), xr.chunks_exact(LANES));
        for (gc, xc) in (&mut gi).zip(&mut xi) {
            for i in 0..LANES {
                a[i] = a[i].add(gc[i]);
                b[i] = b[i].add(gc[i].mul(xc[i].sub(mu)));
            }
        }
        let (mut ra, mut rb) = (T::ZERO, T::ZERO);
        for (&g, &v) in gi.remainder().iter().zip(xi.remainder()) {
            ra = ra.add(g);
            rb = rb.add(g.mul(v.sub(mu)));
        }
        sg += wide(a.iter().fold(ra, |s, &l| s.add(l)));
        sgd += wide(b.iter().fold(rb, |s, &l| s.add(l)));
    }
    (sg, sgd)
}

/// Writes `v` into `out` as `req` says.
fn store<T: Num>(out: &TBlob, req: OpReq, v: impl Iterator<Item = T>) {
    match req {
        OpReq::Null => {}
        OpReq::Add => out
            .slice_mut::<T>()
            .iter_mut()
            .zip(v)
            .for_each(|(o, x)| *o = o.add(x)),
        _ => out
            .slice_mut::<T>()
            .iter_mut()
            .zip(v)
            .for_each(|(o, x)| *o = x),
    }
}

/// The batch's `(mean, biased variance)` of every channel of `x`, in f64.
pub(crate) fn batch_moments<T: Num + Float>(l: &Layout, x: &[T]) -> (Vec<f64>, Vec<f64>) {
    let m = l.per_channel().max(1) as f64;
    per_channel(l, |c| {
        vectorized(
            #[inline(always)]
            || {
                let mut sum = 0.0;
                for b in l.blocks(x, c) {
                    sum += lane_sum(b, |v| v);
                }
                let (mean, mut dev) = (sum / m, 0.0);
                let mu = T::from_f64(mean);
                for b in l.blocks(x, c) {
                    dev += lane_sum(b, |v| (v - mu) * (v - mu));
                }
                (mean, dev / m)
            },
        )
    })
    .into_iter()
    .unzip()
}

/// The normalisation as `y = x · scale + shift` per channel, from the statistics `mean`
/// and `var`; with `bias`, of `x + bias` (a convolution's bias folded in). Also the
/// inverse standard deviations, which the forward pass saves.
pub(crate) fn affine<T: Num + Float>(
    op: &BatchNorm,
    gamma: &[T],
    beta: &[T],
    (mean, var): (&[f64], &[f64]),
    bias: Option<&[T]>,
) -> (Vec<T>, Vec<T>, Vec<f64>) {
    let invstd: Vec<f64> = var.iter().map(|v| 1.0 / (v + op.eps).sqrt()).collect();
    let (scale, shift) = (0..invstd.len())
        .map(|c| {
            let g = if op.fix_gamma { 1.0 } else { wide(gamma[c]) };
            let s = g * invstd[c];
            let b = bias.map_or(0.0, |b| wide(b[c]));
            (
                T::from_f64(s),
                T::from_f64(wide(beta[c]) - mean[c] * s + b * s),
            )
        })
        .unzip();
    (scale, shift, invstd)
}

/// Moves the moving statistics toward the batch's, by the momentum.
pub(crate) fn update_moving<T: Num + Float>(
    op: &BatchNorm,
    moving: [&mut [T]; 2],
    (mean, var): (&[f64], &[f64]),
) {
    let mom = op.momentum;
    for (aux, stat) in moving.into_iter().zip([mean, var]) {
        for (m, &s) in aux.iter_mut().zip(stat) {
            *m = T::from_f64(wide(*m) * mom + s * (1.0 - mom));
        }
    }
}

fn forward_kernel<T: Num + Float>(op: &BatchNorm, is_train: bool, io: Blobs) -> Result<()> {
    let l = op.layout(&io.inputs[0].shape)?;
    let x = io.inputs[0].slice::<T>();
    let (gamma, beta) = (io.inputs[1].slice::<T>(), io.inputs[2].slice::<T>());
    // (mean, biased variance) per channel, in f64.
    let (mean, var): (Vec<f64>, Vec<f64>) = if op.batch_stats(is_train) {
        batch_moments(&l, x)
    } else {
        let mm = io.inputs[3].slice::<T>().iter().map(|&v| wide(v));
        let mv = io.inputs[4].slice::<T>().iter().map(|&v| wide(v));
        (mm.collect(), mv.collect())
    };
    // y = x * scale + shift per channel.
    let (scale, shift, invstd) = affine(op, gamma, beta, (&mean, &var), None);
    if io.req[0] != OpReq::Null {
        let add = io.req[0] == OpReq::Add;
        let y = io.outputs[0].slice_mut::<T>();
        per_block(&l, y, |c, r, yb| {
            let xb = &x[r];
            let (s, h) = (scale[c], shift[c]);
            vectorized(
                #[inline(always)]
                || {
                    if add {
                        for (o, &v) in yb.iter_mut().zip(xb) {
                            *o = *o + (v * s + h);
                        }
                    } else {
                        for (o, &v) in yb.iter_mut().zip(xb) {
                            *o = v * s + h;
                        }
                    }
                },
            )
        });
    }
    store::<T>(
        &io.outputs[1],
        io.req[1],
        mean.iter().map(|&v| T::from_f64(v)),
    );
    store::<T>(
        &io.outputs[2],
        io.req[2],
        invstd.iter().map(|&v| T::from_f64(v)),
    );
    if op.batch_stats(is_train) {
        let moving = [io.inputs[3].slice_mut::<T>(), io.inputs[4].slice_mut::<T>()];
        update_moving(op, moving, (&mean, &var));
    }
    Ok(())
}

impl CpuKernel for BatchNorm {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        // The kernel reads the data while it writes the output.
        if crate::kernels::cpu::nn::basic::common::overlaps(&io.inputs[0], &io.outputs[0]) {
            return Err(Error::Runtime(
                "BatchNorm: the output must not share memory with the data".into(),
            ));
        }
        match io.inputs[0].dtype {
            crate::dtype::DType::F32 => forward_kernel::<f32>(self, ctx.is_train, io),
            crate::dtype::DType::F64 => forward_kernel::<f64>(self, ctx.is_train, io),
            other => Err(Error::Type(format!(
                "BatchNorm: dtype {other} is not supported"
            ))),
        }
    }
}

fn backward_kernel<T: Num + Float>(op: &BatchNorm, is_train: bool, io: Blobs) -> Result<()> {
    let l = op.layout(&io.inputs[1].shape)?;
    let (dy, x, gamma) = (
        io.inputs[0].slice::<T>(),
        io.inputs[1].slice::<T>(),
        io.inputs[2].slice::<T>(),
    );
    let mean: Vec<f64> = io.inputs[3].slice::<T>().iter().map(|&v| wide(v)).collect();
    let invstd: Vec<f64> = io.inputs[4].slice::<T>().iter().map(|&v| wide(v)).collect();
    // Σ dy and Σ dy·x̂ per channel.
    let sums: Vec<(f64, f64)> = per_channel(&l, |c| {
        let mu = T::from_f64(mean[c]);
        vectorized(
            #[inline(always)]
            || {
                let (mut sum_dy, mut sum_dy_dev) = (0.0, 0.0);
                for (gb, xb) in l.blocks(dy, c).zip(l.blocks(x, c)) {
                    let (a, b) = lane_sums2(gb, xb, mu);
                    sum_dy += a;
                    sum_dy_dev += b;
                }
                (sum_dy, sum_dy_dev * invstd[c])
            },
        )
    });
    if io.req[0] != OpReq::Null {
        let add = io.req[0] == OpReq::Add;
        let batch = op.batch_stats(is_train);
        let m = l.per_channel().max(1) as f64;
        // dx = k1·dy + k2·(x - mean) + k0 per channel.
        let coef: Vec<(T, T, T, T)> = (0..l.channels)
            .map(|c| {
                let g = if op.fix_gamma { 1.0 } else { wide(gamma[c]) };
                let k1 = g * invstd[c];
                let (k2, k0) = if batch {
                    (-k1 * invstd[c] * sums[c].1 / m, -k1 * sums[c].0 / m)
                } else {
                    (0.0, 0.0)
                };
                let f = T::from_f64;
                (f(k1), f(k2), f(k0), f(mean[c]))
            })
            .collect();
        let dx = io.outputs[0].slice_mut::<T>();
        per_block(&l, dx, |c, r, db| {
            let (k1, k2, k0, mu) = coef[c];
            let (gb, xb) = (&dy[r.clone()], &x[r]);
            vectorized(
                #[inline(always)]
                || {
                    if add {
                        for ((o, &g), &v) in db.iter_mut().zip(gb).zip(xb) {
                            *o = *o + (k1 * g + k2 * (v - mu) + k0);
                        }
                    } else {
                        for ((o, &g), &v) in db.iter_mut().zip(gb).zip(xb) {
                            *o = k1 * g + k2 * (v - mu) + k0;
                        }
                    }
                },
            )
        });
    }
    let fix = op.fix_gamma;
    store::<T>(
        &io.outputs[1],
        io.req[1],
        sums.iter()
            .map(|&(_, b)| if fix { T::zero() } else { T::from_f64(b) }),
    );
    store::<T>(
        &io.outputs[2],
        io.req[2],
        sums.iter().map(|&(a, _)| T::from_f64(a)),
    );
    Ok(())
}

impl CpuKernel for BatchNormBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        match io.inputs[1].dtype {
            crate::dtype::DType::F32 => backward_kernel::<f32>(&self.fwd, ctx.is_train, io),
            crate::dtype::DType::F64 => backward_kernel::<f64>(&self.fwd, ctx.is_train, io),
            other => Err(Error::Type(format!(
                "_backward_BatchNorm: dtype {other} is not supported"
            ))),
        }
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<BatchNorm>(k);
    cpu::add::<BatchNormBackward>(k);
}
