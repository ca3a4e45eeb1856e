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
use crate::op::nn::batch_norm::{BatchNorm, BatchNormBackward, BatchNormReluBackward, Layout};
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

/// The batch's `(mean, biased variance)` of channel `c` of `x`, in f64.
#[inline(always)]
fn channel_moments<T: Num + Float>(l: &Layout, x: &[T], c: usize) -> (f64, f64) {
    let m = l.per_channel().max(1) as f64;
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
}

/// The batch's `(mean, biased variance)` of every channel of `x`, in f64.
pub(crate) fn batch_moments<T: Num + Float>(l: &Layout, x: &[T]) -> (Vec<f64>, Vec<f64>) {
    per_channel(l, |c| {
        vectorized(
            #[inline(always)]
            || channel_moments(l, x, c),
        )
    })
    .into_iter()
    .unzip()
}

/// Channel `c`'s `(scale, shift, inverse standard deviation)` of the normalisation
/// `y = x · scale + shift`, from its statistics; with `bias`, of `x + bias`.
#[inline(always)]
fn channel_affine<T: Num + Float>(
    op: &BatchNorm,
    (gamma, beta): (&[T], &[T]),
    c: usize,
    (mean, var): (f64, f64),
    bias: Option<&[T]>,
) -> (T, T, f64) {
    let invstd = 1.0 / (var + op.eps).sqrt();
    let g = if op.fix_gamma { 1.0 } else { wide(gamma[c]) };
    let s = g * invstd;
    let b = bias.map_or(0.0, |b| wide(b[c]));
    (
        T::from_f64(s),
        T::from_f64(wide(beta[c]) - mean * s + b * s),
        invstd,
    )
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
    let mut out = (Vec::new(), Vec::new(), Vec::new());
    for c in 0..mean.len() {
        let (s, h, i) = channel_affine(op, (gamma, beta), c, (mean[c], var[c]), bias);
        out.0.push(s);
        out.1.push(h);
        out.2.push(i);
    }
    out
}

/// Writes `x · s + h` over `y` (added to it with `add`).
#[inline(always)]
fn scale_shift<T: Num + Float>(y: &mut [T], x: &[T], (s, h): (T, T), add: bool) {
    if add {
        for (o, &v) in y.iter_mut().zip(x) {
            *o = *o + (v * s + h);
        }
    } else {
        for (o, &v) in y.iter_mut().zip(x) {
            *o = v * s + h;
        }
    }
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
    let write = io.req[0] != OpReq::Null;
    let add = io.req[0] == OpReq::Add;
    // (mean, biased variance) per channel, in f64. With batch statistics, each channel is
    // one task: its moments, then its output, while its blocks are in cache.
    let (mean, var): (Vec<f64>, Vec<f64>) = if op.batch_stats(is_train) && write {
        per_channel_out(&l, io.outputs[0].slice_mut::<T>(), |c, mut y| {
            vectorized(
                #[inline(always)]
                || {
                    let stats = channel_moments(&l, x, c);
                    let (s, h, _) = channel_affine(op, (gamma, beta), c, stats, None);
                    for (o, xb) in l.blocks(x, c).enumerate() {
                        scale_shift(y.block(o), xb, (s, h), add);
                    }
                    stats
                },
            )
        })
        .into_iter()
        .unzip()
    } else if op.batch_stats(is_train) {
        batch_moments(&l, x)
    } else {
        let mm = io.inputs[3].slice::<T>().iter().map(|&v| wide(v));
        let mv = io.inputs[4].slice::<T>().iter().map(|&v| wide(v));
        (mm.collect(), mv.collect())
    };
    let (scale, shift, invstd) = affine(op, gamma, beta, (&mean, &var), None);
    if write && !op.batch_stats(is_train) {
        let y = io.outputs[0].slice_mut::<T>();
        per_block(&l, y, |c, r, yb| {
            let xb = &x[r];
            vectorized(
                #[inline(always)]
                || scale_shift(yb, xb, (scale[c], shift[c]), add),
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

/// The output gradient at one element: `g` itself, or with `RELU` the gradient through a
/// ReLU whose output is `y` (`g` where `y > 0`, NaN where `y` is, else 0, as
/// `_backward_Activation` computes it).
#[inline(always)]
fn through_relu<T: Num + Float, const RELU: bool>(g: T, y: T) -> T {
    if !RELU || y > T::ZERO {
        g
    } else if Float::is_nan(y) {
        y
    } else {
        T::ZERO
    }
}

/// `(Σ dy, Σ dy·(v - mu))` over a block, `dy` being `g` (through a ReLU of output `y`
/// with `RELU`).
#[inline(always)]
fn lane_sums2<T: Num + Float, const RELU: bool>(g: &[T], y: &[T], x: &[T], mu: T) -> (f64, f64) {
    let (mut sg, mut sgd) = (0.0, 0.0);
    for ((gr, yr), xr) in g.chunks(RUN).zip(y.chunks(RUN)).zip(x.chunks(RUN)) {
        let (mut a, mut b) = ([T::ZERO; LANES], [T::ZERO; LANES]);
        let (mut gi, mut yi, mut xi) = (
            gr.chunks_exact(LANES),
            yr.chunks_exact(LANES),
            xr.chunks_exact(LANES),
        );
        for ((gc, yc), xc) in (&mut gi).zip(&mut yi).zip(&mut xi) {
            for i in 0..LANES {
                let d = through_relu::<T, RELU>(gc[i], yc[i]);
                a[i] = a[i] + d;
                b[i] = b[i] + d * (xc[i] - mu);
            }
        }
        let (mut ra, mut rb) = (T::ZERO, T::ZERO);
        let rest = gi
            .remainder()
            .iter()
            .zip(yi.remainder())
            .zip(xi.remainder());
        for ((&g, &y), &v) in rest {
            let d = through_relu::<T, RELU>(g, y);
            ra = ra + d;
            rb = rb + d * (v - mu);
        }
        sg += wide(a.iter().fold(ra, |s, &l| s + l));
        sgd += wide(b.iter().fold(rb, |s, &l| s + l));
    }
    (sg, sgd)
}

/// A pointer shared by per-channel tasks, each writing only its own channel's blocks.
struct SharedOut<T>(*mut T);

impl<T> Clone for SharedOut<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for SharedOut<T> {}

impl<T> SharedOut<T> {
    /// The pointer (a method, so closures capture the whole wrapper).
    fn get(self) -> *mut T {
        self.0
    }
}

// SAFETY: `per_channel_out` hands each task a `ChannelOut` of a channel of its own, and a
// `ChannelOut` addresses only its channel's blocks.
unsafe impl<T> Send for SharedOut<T> {}

// SAFETY: as above.
unsafe impl<T> Sync for SharedOut<T> {}

/// The blocks of one channel of an output laid out as the data, writable one at a time.
struct ChannelOut<'a, T> {
    base: SharedOut<T>,
    l: &'a Layout,
    c: usize,
}

impl<T> ChannelOut<'_, T> {
    /// Block `o` (of `0..outer`) of the channel.
    fn block(&mut self, o: usize) -> &mut [T] {
        assert!(
            o < self.l.outer,
            "block {o} of {} outer blocks",
            self.l.outer
        );
        let start = (o * self.l.channels + self.c) * self.l.inner;
        // SAFETY: `per_channel_out` checked that the output holds every block of the
        // layout; blocks of distinct channels are disjoint, each channel's `ChannelOut`
        // goes to one task, and `&mut self` keeps one block of it borrowed at a time.
        unsafe { std::slice::from_raw_parts_mut(self.base.get().add(start), self.l.inner) }
    }
}

/// `per_channel` with channel `c`'s blocks of `out` lent to `f(c, ..)`, so that a task
/// reads a channel and writes its output while the channel is still in cache.
fn per_channel_out<T: Send, R: Send>(
    l: &Layout,
    out: &mut [T],
    f: impl Fn(usize, ChannelOut<'_, T>) -> R + Sync + Send,
) -> Vec<R> {
    assert_eq!(
        out.len(),
        l.channels * l.per_channel(),
        "output laid out as the data"
    );
    let base = SharedOut(out.as_mut_ptr());
    per_channel(l, |c| f(c, ChannelOut { base, l, c }))
}

/// `_backward_BatchNorm`, and with `RELU` the same of the gradient through the ReLU after
/// the BatchNorm (`_backward_rsmx_bn_relu`, whose second input is the ReLU's output). Each
/// channel is one task: its sums, then its data gradient, while its blocks are in cache.
fn backward_kernel<T: Num + Float, const RELU: bool>(
    op: &BatchNorm,
    is_train: bool,
    io: Blobs,
) -> Result<()> {
    let at = usize::from(RELU);
    let l = op.layout(&io.inputs[at + 1].shape)?;
    let g = io.inputs[0].slice::<T>();
    // Without a ReLU, `y` is never read: `g` stands in for it.
    let y = if RELU { io.inputs[1].slice::<T>() } else { g };
    let (x, gamma) = (
        io.inputs[at + 1].slice::<T>(),
        io.inputs[at + 2].slice::<T>(),
    );
    let mean: Vec<f64> = io.inputs[at + 3]
        .slice::<T>()
        .iter()
        .map(|&v| wide(v))
        .collect();
    let invstd: Vec<f64> = io.inputs[at + 4]
        .slice::<T>()
        .iter()
        .map(|&v| wide(v))
        .collect();
    if g.len() != x.len() || y.len() != x.len() {
        return Err(Error::Value(format!(
            "_backward_BatchNorm: the output gradient has {} elements, the data {}",
            g.len(),
            x.len()
        )));
    }
    let add = io.req[0] == OpReq::Add;
    let batch = op.batch_stats(is_train);
    let m = l.per_channel().max(1) as f64;
    let block = |o: usize, c: usize| {
        let r = (o * l.channels + c) * l.inner..(o * l.channels + c + 1) * l.inner;
        (&g[r.clone()], &y[r.clone()], &x[r])
    };
    // Σ dy and Σ dy·x̂ of channel `c`, then dx = k1·dy + k2·(x - mean) + k0 into `dx`.
    let channel = |c: usize, dx: Option<ChannelOut<'_, T>>| {
        let mu = T::from_f64(mean[c]);
        vectorized(
            #[inline(always)]
            || {
                let (mut sum_dy, mut sum_dy_dev) = (0.0, 0.0);
                for o in 0..l.outer {
                    let (gb, yb, xb) = block(o, c);
                    let (a, b) = lane_sums2::<T, RELU>(gb, yb, xb, mu);
                    sum_dy += a;
                    sum_dy_dev += b;
                }
                let sums = (sum_dy, sum_dy_dev * invstd[c]);
                let Some(mut dx) = dx else {
                    return sums;
                };
                let gm = if op.fix_gamma { 1.0 } else { wide(gamma[c]) };
                let k1 = gm * invstd[c];
                let (k2, k0) = if batch {
                    (-k1 * invstd[c] * sums.1 / m, -k1 * sums.0 / m)
                } else {
                    (0.0, 0.0)
                };
                let (k1, k2, k0) = (T::from_f64(k1), T::from_f64(k2), T::from_f64(k0));
                for o in 0..l.outer {
                    let (gb, yb, xb) = block(o, c);
                    let db = dx.block(o);
                    let each = db.iter_mut().zip(gb).zip(yb).zip(xb);
                    if add {
                        for (((o, &g), &y), &v) in each {
                            let d = through_relu::<T, RELU>(g, y);
                            *o = *o + (k1 * d + k2 * (v - mu) + k0);
                        }
                    } else {
                        for (((o, &g), &y), &v) in each {
                            let d = through_relu::<T, RELU>(g, y);
                            *o = k1 * d + k2 * (v - mu) + k0;
                        }
                    }
                }
                sums
            },
        )
    };
    let sums = if io.req[0] == OpReq::Null {
        per_channel(&l, |c| channel(c, None))
    } else {
        per_channel_out(&l, io.outputs[0].slice_mut::<T>(), |c, dx| {
            channel(c, Some(dx))
        })
    };
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
            crate::dtype::DType::F32 => backward_kernel::<f32, false>(&self.fwd, ctx.is_train, io),
            crate::dtype::DType::F64 => backward_kernel::<f64, false>(&self.fwd, ctx.is_train, io),
            other => Err(Error::Type(format!(
                "_backward_BatchNorm: dtype {other} is not supported"
            ))),
        }
    }
}

impl CpuKernel for BatchNormReluBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        match io.inputs[2].dtype {
            crate::dtype::DType::F32 => backward_kernel::<f32, true>(&self.fwd, ctx.is_train, io),
            crate::dtype::DType::F64 => backward_kernel::<f64, true>(&self.fwd, ctx.is_train, io),
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
    cpu::add::<BatchNormReluBackward>(k);
}
