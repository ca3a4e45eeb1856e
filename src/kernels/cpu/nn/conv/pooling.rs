//! CPU kernels of `Pooling` (max, average, sum and Lp over 1-D to 3-D windows, `valid`
//! and `full` conventions, global pooling) and of its backward.

use crate::dispatch_float;
use crate::error::Result;
use crate::kernels::cpu::map::pool_shares_work;
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::simd::vectorized;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::nn::geometry::{volume, Dims3};
use crate::op::nn::pooling::{Plan, PoolType, Pooling, PoolingBackward};
use crate::op::{OpContext, OpReq};
use num_traits::Float;
use rayon::prelude::*;
use std::ops::Range;

/// Below this many window reads a pooling runs on the calling thread.
const PAR_WORK: usize = 1 << 16;

/// One window: the clipped range along each dimension and the divisor of an average.
#[derive(Clone, Copy)]
struct Win {
    lo: Dims3,
    hi: Dims3,
    size: usize,
}

impl Plan {
    /// The window of output position `o`, as MXNet bounds it: the end is capped at the
    /// padded extent, the divisor counts padding only if `include_pad`.
    #[inline(always)]
    fn window(&self, o: Dims3, include_pad: bool) -> Win {
        let mut lo = [0; 3];
        let mut hi = [0; 3];
        let mut padded = 1;
        let mut inner = 1;
        for i in 0..3 {
            let start = (o[i] * self.stride[i]) as isize - self.pad[i] as isize;
            let end = (start + self.kernel[i] as isize).min((self.input[i] + self.pad[i]) as isize);
            padded *= (end - start).max(0) as usize;
            let (s, e) = (
                start.max(0) as usize,
                (end.max(0) as usize).min(self.input[i]),
            );
            lo[i] = s;
            hi[i] = e.max(s);
            inner *= hi[i] - lo[i];
        }
        Win {
            lo,
            hi,
            size: if include_pad { padded } else { inner },
        }
    }

    fn in_len(&self) -> usize {
        volume(&self.input)
    }

    fn out_len(&self) -> usize {
        volume(&self.output)
    }

    /// Calls `f(flat output index, window)` for every output position of a plane.
    #[inline(always)]
    fn for_each_window(&self, include_pad: bool, mut f: impl FnMut(usize, &Win)) {
        let mut k = 0;
        for a in 0..self.output[0] {
            for b in 0..self.output[1] {
                for c in 0..self.output[2] {
                    f(k, &self.window([a, b, c], include_pad));
                    k += 1;
                }
            }
        }
    }

    fn work(&self) -> usize {
        self.planes * self.out_len() * volume(&self.kernel)
    }
}

/// Calls `f(flat input index)` for every element of a window, outermost first.
#[inline(always)]
fn for_each_in(input: &Dims3, w: &Win, mut f: impl FnMut(usize)) {
    for a in w.lo[0]..w.hi[0] {
        for b in w.lo[1]..w.hi[1] {
            let row = (a * input[1] + b) * input[2];
            for c in w.lo[2]..w.hi[2] {
                f(row + c);
            }
        }
    }
}

/// `xᵖ` for p in 1..=3.
#[inline(always)]
fn pow_p<T: Float>(x: T, p: u32) -> T {
    match p {
        1 => x,
        2 => x * x,
        _ => x * x * x,
    }
}

/// The p-th root for p in 1..=3.
#[inline(always)]
fn root_p<T: Float>(x: T, p: u32) -> T {
    match p {
        1 => x,
        2 => x.sqrt(),
        _ => x.cbrt(),
    }
}

/// Pools one plane `x` into `y` (written, or added to).
fn pool_plane<T: Num + Float>(p: &Plan, op: &Pooling, x: &[T], y: &mut [T], add: bool) {
    let put = |y: &mut T, v: T| *y = if add { *y + v } else { v };
    match op.pool {
        PoolType::Max => {
            // 2×2 windows with stride 2 and no padding, the common case, read directly.
            let two = p.kernel == [1, 2, 2] && p.stride == [1, 2, 2] && p.pad == [0; 3];
            if two && p.input[0] == 1 && !op.full {
                let iw = p.input[2];
                for (r, out) in y.chunks_mut(p.output[2]).enumerate() {
                    let (top, bottom) = (&x[2 * r * iw..], &x[(2 * r + 1) * iw..]);
                    for (c, o) in out.iter_mut().enumerate() {
                        let m = max2(max2(T::min_value(), top[2 * c]), top[2 * c + 1]);
                        let m = max2(m, bottom[2 * c]);
                        put(o, max2(m, bottom[2 * c + 1]));
                    }
                }
                return;
            }
            if p.input[0] == 1 && p.output[0] == 1 {
                return vectorized(
                    #[inline(always)]
                    || max_plane_lines(p, x, y, add),
                );
            }
            p.for_each_window(true, |k, w| {
                let mut m = T::min_value();
                for_each_in(&p.input, w, |i| m = max2(m, x[i]));
                put(&mut y[k], m);
            });
        }
        PoolType::Sum | PoolType::Avg => {
            let avg = op.pool == PoolType::Avg;
            p.for_each_window(op.count_include_pad, |k, w| {
                let mut s = T::zero();
                for_each_in(&p.input, w, |i| s = s + x[i]);
                if avg {
                    s = if w.size == 0 {
                        T::zero()
                    } else {
                        s / T::from(w.size).unwrap_or_else(T::one)
                    };
                }
                put(&mut y[k], s);
            });
        }
        PoolType::Lp(pv) => p.for_each_window(true, |k, w| {
            let mut s = T::zero();
            for_each_in(&p.input, w, |i| s = s + pow_p(x[i], pv));
            put(&mut y[k], root_p(s, pv));
        }),
    }
}

/// Max-pools one plane, also writing where each maximum came from (the plane offset of
/// the first element equal to it, as a value of `T`).
fn argmax_plane<T: Num + Float>(p: &Plan, x: &[T], y: &mut [T], at: &mut [T], add: bool) {
    p.for_each_window(true, |k, w| {
        let mut m = T::min_value();
        let mut idx = None;
        for_each_in(&p.input, w, |i| {
            if idx.is_none() || x[i] > m {
                m = max2(m, x[i]);
                idx = Some(i);
            }
        });
        y[k] = if add { y[k] + m } else { m };
        // A window wholly in the padding routes its gradient nowhere: -1.
        at[k] = match idx {
            Some(i) => T::from(i).unwrap_or_else(|| -T::one()),
            None => -T::one(),
        };
    });
}

/// 2×2 windows with stride 2 and no padding over 2-D planes (`valid` convention), whose
/// offsets are exact in `T`: the common case, with branch-free loops of its own that the
/// compiler vectorises.
struct TwoByTwo<T> {
    /// Input row length.
    iw: usize,
    /// Output row length.
    ow: usize,
    /// `2c` for each output column `c`: the offset of its window in a row pair.
    cols: Vec<T>,
}

impl<T: Num + Float> TwoByTwo<T> {
    fn of(p: &Plan, full: bool) -> Option<Self> {
        let two = p.kernel == [1, 2, 2] && p.stride == [1, 2, 2] && p.pad == [0; 3];
        let ow = p.output[2];
        if !two || p.input[0] != 1 || full || ow == 0 || !offsets_exact::<T>(p.in_len()) {
            return None;
        }
        let cols = (0..ow)
            .map(|c| T::from(2 * c))
            .collect::<Option<Vec<T>>>()?;
        Some(TwoByTwo {
            iw: p.input[2],
            ow,
            cols,
        })
    }

    /// The offsets, relative to a window's first element, of its other three.
    fn steps(&self) -> (T, T, T) {
        let iw = T::from(self.iw).unwrap_or_else(T::zero);
        (T::one(), iw, iw + T::one())
    }

    /// The forward of one plane: each window's maximum (a NaN never replaces the running
    /// maximum, as in MXNet's `>`) and its offset, the first of equal ones.
    fn argmax(&self, x: &[T], y: &mut [T], at: &mut [T], add: bool) {
        let (iw, ow) = (self.iw, self.ow);
        let (right, below, diagonal) = self.steps();
        let rows = y.chunks_exact_mut(ow).zip(at.chunks_exact_mut(ow));
        for (r, (out, idx)) in rows.enumerate() {
            let top = &x[2 * r * iw..][..2 * ow];
            let bottom = &x[(2 * r + 1) * iw..][..2 * ow];
            let base = T::from(2 * r * iw).unwrap_or_else(T::zero);
            vectorized(
                #[inline(always)]
                || {
                    let windows = top.chunks_exact(2).zip(bottom.chunks_exact(2));
                    let outs = out.iter_mut().zip(idx.iter_mut()).zip(&self.cols);
                    for ((t, b), ((o, a), &col)) in windows.zip(outs) {
                        let mut m = if t[0] > T::min_value() {
                            t[0]
                        } else {
                            T::min_value()
                        };
                        let mut k = T::zero();
                        for (v, step) in [(t[1], right), (b[0], below), (b[1], diagonal)] {
                            let more = v > m;
                            m = if more { v } else { m };
                            k = if more { step } else { k };
                        }
                        *o = if add { *o + m } else { m };
                        *a = base + col + k;
                    }
                },
            )
        }
    }

    /// The backward of one plane: each output gradient goes to the element its offset
    /// names, the window's other three get nothing.
    fn unpool(&self, dy: &[T], at: &[T], dx: &mut [T], add: bool) {
        if !add {
            dx.fill(T::zero());
        }
        let (iw, ow) = (self.iw, self.ow);
        let (right, below, diagonal) = self.steps();
        let rows = dy.chunks_exact(ow).zip(at.chunks_exact(ow));
        for (r, (g, idx)) in rows.enumerate() {
            let (top, bottom) = dx[2 * r * iw..].split_at_mut(iw);
            let (top, bottom) = (&mut top[..2 * ow], &mut bottom[..2 * ow]);
            let base = T::from(2 * r * iw).unwrap_or_else(T::zero);
            vectorized(
                #[inline(always)]
                || {
                    let windows = top.chunks_exact_mut(2).zip(bottom.chunks_exact_mut(2));
                    let grads = g.iter().zip(idx).zip(&self.cols);
                    for ((t, b), ((&g, &a), &col)) in windows.zip(grads) {
                        let k = a - base - col;
                        let to = |step: T| if k == step { g } else { T::zero() };
                        t[0] = t[0] + to(T::zero());
                        t[1] = t[1] + to(right);
                        b[0] = b[0] + to(below);
                        b[1] = b[1] + to(diagonal);
                    }
                },
            )
        }
    }
}

/// True when every offset of a plane of `len` elements is exact in `T` (integers are
/// exact up to 2 / epsilon).
fn offsets_exact<T: Float>(len: usize) -> bool {
    let eps = T::epsilon().to_f64().unwrap_or(1.0);
    (len as f64) <= 2.0 / eps
}

/// The larger of two values; a NaN candidate never replaces the running maximum, as in
/// MXNet's `>` comparison.
#[inline(always)]
fn max2<T: Float>(m: T, v: T) -> T {
    if v > m {
        v
    } else {
        m
    }
}

/// Max pooling of a plane one line deep: for each output line, the maximum over its
/// window's input lines is taken column by column (a vector loop), then over each
/// window's columns.
#[inline(always)]
fn max_plane_lines<T: Num + Float>(p: &Plan, x: &[T], y: &mut [T], add: bool) {
    let (iw, ow) = (p.input[2], p.output[2]);
    if ow == 0 {
        return;
    }
    let across: Vec<(usize, usize)> = (0..ow)
        .map(|ox| {
            let w = p.window([0, 0, ox], true);
            (w.lo[2], w.hi[2])
        })
        .collect();
    let (kw, sw) = (p.kernel[2], p.stride[2]);
    let inner = whole_windows(&across, kw, sw);
    let mut lines_max = vec![T::min_value(); iw];
    for (oy, out) in y.chunks_exact_mut(ow).enumerate() {
        let w = p.window([0, oy, 0], true);
        lines_max.fill(T::min_value());
        for iy in w.lo[1]..w.hi[1] {
            for (m, &v) in lines_max.iter_mut().zip(&x[iy * iw..(iy + 1) * iw]) {
                *m = max2(*m, v);
            }
        }
        let row_max = |(lo, hi): (usize, usize)| {
            lines_max[lo..hi]
                .iter()
                .fold(T::min_value(), |m, &v| max2(m, v))
        };
        let put = |o: &mut T, m: T| *o = if add { *o + m } else { m };
        for ox in (0..inner.start).chain(inner.end..ow) {
            put(&mut out[ox], row_max(across[ox]));
        }
        let first = across.get(inner.start).map_or(0, |w| w.0);
        let inside = out[inner.clone()].iter_mut().enumerate();
        match kw {
            2 => inside.for_each(|(i, o)| {
                let w = &lines_max[first + i * sw..][..2];
                put(o, max2(max2(T::min_value(), w[0]), w[1]));
            }),
            3 => inside.for_each(|(i, o)| {
                let w = &lines_max[first + i * sw..][..3];
                put(o, max2(max2(max2(T::min_value(), w[0]), w[1]), w[2]));
            }),
            _ => inside.for_each(|(i, o)| put(o, row_max(across[inner.start + i]))),
        }
    }
}

/// The output columns whose windows lie wholly inside the input (`kw` wide, `sw` apart),
/// a run of them: the windows at the edges are clipped by the padding.
fn whole_windows(across: &[(usize, usize)], kw: usize, sw: usize) -> Range<usize> {
    let whole = |w: &(usize, usize)| w.1 - w.0 == kw;
    let start = across.iter().position(whole).unwrap_or(across.len());
    let len = across[start..].iter().take_while(|w| whole(w)).count();
    // Consecutive whole windows start `sw` apart.
    debug_assert!(across[start..start + len]
        .windows(2)
        .all(|w| w[1].0 == w[0].0 + sw));
    start..start + len
}

/// Adds the gradient of one pooled plane into `dx`.
fn unpool_plane<T: Num + Float>(p: &Plan, op: &Pooling, dy: &[T], x: &[T], y: &[T], dx: &mut [T]) {
    match op.pool {
        PoolType::Max => p.for_each_window(true, |k, w| {
            // The first element equal to the maximum takes the gradient, else the last
            // one looked at (as MXNet routes it).
            let mut at = None;
            let mut found = false;
            for_each_in(&p.input, w, |i| {
                if !found {
                    at = Some(i);
                    found = x[i] == y[k];
                }
            });
            if let Some(i) = at {
                dx[i] = dx[i] + dy[k];
            }
        }),
        PoolType::Sum | PoolType::Avg => {
            let avg = op.pool == PoolType::Avg;
            p.for_each_window(op.count_include_pad, |k, w| {
                let g = if avg {
                    if w.size == 0 {
                        return;
                    }
                    dy[k] / T::from(w.size).unwrap_or_else(T::one)
                } else {
                    dy[k]
                };
                for_each_in(&p.input, w, |i| dx[i] = dx[i] + g);
            });
        }
        PoolType::Lp(pv) => p.for_each_window(true, |k, w| {
            for_each_in(&p.input, w, |i| {
                let g = match pv {
                    1 => dy[k],
                    _ => dy[k] * pow_p(x[i] / y[k], pv - 1),
                };
                dx[i] = dx[i] + g;
            });
        }),
    }
}

fn argmax_kernel<T: Num + Float>(
    p: &Plan,
    full: bool,
    x: &[T],
    y: &mut [T],
    at: &mut [T],
    add: bool,
) {
    let (il, ol) = (p.in_len(), p.out_len());
    if ol == 0 {
        return;
    }
    let two = TwoByTwo::<T>::of(p, full);
    let one = |(n, (y, at)): (usize, (&mut [T], &mut [T]))| {
        let x = &x[n * il..(n + 1) * il];
        match &two {
            Some(two) => two.argmax(x, y, at, add),
            None => argmax_plane(p, x, y, at, add),
        }
    };
    if p.work() > PAR_WORK && p.planes > 1 && pool_shares_work() {
        y.par_chunks_mut(ol)
            .zip(at.par_chunks_mut(ol))
            .enumerate()
            .for_each(one);
    } else {
        y.chunks_mut(ol)
            .zip(at.chunks_mut(ol))
            .enumerate()
            .for_each(one);
    }
}

/// Runs `one(n, plane)` on each sample-channel plane `n` of `out` (`len` elements a
/// plane), in parallel when the plan has enough work.
fn for_planes<T: Send>(p: &Plan, out: &mut [T], len: usize, one: impl Fn(usize, &mut [T]) + Sync) {
    if len == 0 {
        return;
    }
    if p.work() > PAR_WORK && p.planes > 1 && pool_shares_work() {
        out.par_chunks_mut(len)
            .enumerate()
            .for_each(|(n, o)| one(n, o));
    } else {
        out.chunks_mut(len).enumerate().for_each(|(n, o)| one(n, o));
    }
}

/// Routes each output gradient to the input element its index output names.
fn unpool_by_index<T: Num + Float>(
    p: &Plan,
    full: bool,
    dy: &[T],
    at: &[T],
    dx: &mut [T],
    add: bool,
) {
    let (il, ol) = (p.in_len(), p.out_len());
    let two = TwoByTwo::<T>::of(p, full);
    for_planes(p, dx, il, |n, dx| {
        if let Some(two) = &two {
            let r = n * ol..(n + 1) * ol;
            return two.unpool(&dy[r.clone()], &at[r], dx, add);
        }
        if !add {
            dx.fill(T::zero());
        }
        let r = n * ol..(n + 1) * ol;
        for (g, i) in dy[r.clone()].iter().zip(&at[r]) {
            if let Some(i) = i.to_usize().filter(|&i| i < il) {
                dx[i] = dx[i] + *g;
            }
        }
    });
}

fn forward_kernel<T: Num + Float>(p: &Plan, op: &Pooling, x: &[T], y: &mut [T], add: bool) {
    let il = p.in_len();
    for_planes(p, y, p.out_len(), |n, y| {
        pool_plane(p, op, &x[n * il..(n + 1) * il], y, add)
    });
}

fn backward_kernel<T: Num + Float>(
    p: &Plan,
    op: &Pooling,
    dy: &[T],
    x: &[T],
    y: &[T],
    dx: &mut [T],
    add: bool,
) {
    let (il, ol) = (p.in_len(), p.out_len());
    for_planes(p, dx, il, |n, dx| {
        if !add {
            dx.fill(T::zero());
        }
        let r = n * ol..(n + 1) * ol;
        unpool_plane(p, op, &dy[r.clone()], &x[n * il..(n + 1) * il], &y[r], dx);
    });
}

impl CpuKernel for Pooling {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let p = self.plan(&io.inputs[0].shape)?;
        let with_index = io.outputs.len() > 1 && io.req.get(1).is_some_and(|r| *r != OpReq::Null);
        if with_index {
            dispatch_float!("Pooling", io.inputs[0].dtype, T => argmax_kernel::<T>(
                &p,
                self.full,
                io.inputs[0].slice(),
                io.outputs[0].slice_mut(),
                io.outputs[1].slice_mut(),
                io.req[0] == OpReq::Add,
            ));
            return Ok(());
        }
        dispatch_float!("Pooling", io.inputs[0].dtype, T => forward_kernel::<T>(
            &p,
            self,
            io.inputs[0].slice(),
            io.outputs[0].slice_mut(),
            io.req[0] == OpReq::Add,
        ));
        Ok(())
    }
}
impl CpuKernel for PoolingBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let p = self.fwd.plan(&io.inputs[1].shape)?;
        if io.inputs.len() == 4 {
            let exact = dispatch_float!("_backward_Pooling", io.inputs[1].dtype, T =>
                offsets_exact::<T>(p.in_len()));
            if exact {
                dispatch_float!("_backward_Pooling", io.inputs[1].dtype, T => unpool_by_index::<T>(
                    &p,
                    self.fwd.full,
                    io.inputs[0].slice(),
                    io.inputs[3].slice(),
                    io.outputs[0].slice_mut(),
                    io.req[0] == OpReq::Add,
                ));
                return Ok(());
            }
        }
        dispatch_float!("_backward_Pooling", io.inputs[1].dtype, T => backward_kernel::<T>(
            &p,
            &self.fwd,
            io.inputs[0].slice(),
            io.inputs[1].slice(),
            io.inputs[2].slice(),
            io.outputs[0].slice_mut(),
            io.req[0] == OpReq::Add,
        ));
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Pooling>(k);
    cpu::add::<PoolingBackward>(k);
}
