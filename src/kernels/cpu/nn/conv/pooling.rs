//! `Pooling` (max, average, sum and Lp over 1-D to 3-D windows, `valid` and `full`
//! conventions, global pooling) and its backward operator.

use super::geometry::{check_layout, kernel_tuple, to3, volume, window_tuple, Dims3};
use crate::error::{Error, Result};
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::{self, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::{
    check_inputs, Attrs, Grad, Gradient, OpContext, OpDef, OpRef, OpReq, Operator, ParamList,
    Params, Registry,
};
use crate::shape::{fmt_shape, Shape};
use num_traits::Float;
use rayon::prelude::*;
use std::sync::Arc;

/// Below this many window reads a pooling runs on the calling thread.
const PAR_WORK: usize = 1 << 16;

/// What a window is reduced to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PoolType {
    Max,
    Avg,
    Sum,
    /// `(Σ xᵖ)^(1/p)` for p in 1..=3.
    Lp(u32),
}

/// The `Pooling` operator's arguments.
#[derive(Debug, Clone)]
struct Pooling {
    pool: PoolType,
    global: bool,
    full: bool,
    /// Empty for global pooling without a kernel.
    kernel: Vec<usize>,
    stride: Vec<usize>,
    pad: Vec<usize>,
    count_include_pad: bool,
}

/// The sizes of one pooling: `planes` images of extent `input` pooled to `output`.
#[derive(Debug, Clone, Copy)]
struct Plan {
    planes: usize,
    input: Dims3,
    output: Dims3,
    kernel: Dims3,
    stride: Dims3,
    pad: Dims3,
}

impl Pooling {
    fn plan(&self, data: &[usize]) -> Result<Plan> {
        let nd = data.len().wrapping_sub(2);
        if !(1..=3).contains(&nd) || (!self.global && nd != self.kernel.len()) {
            let want = if self.global {
                "3-D, 4-D or 5-D".to_string()
            } else {
                format!("{}-D", self.kernel.len() + 2)
            };
            return Err(Error::Value(format!(
                "Pooling: data must be {want} (batch, channel, spatial...), got shape {}",
                fmt_shape(data)
            )));
        }
        let input = to3(&data[2..], 1);
        let (kernel, stride, pad) = if self.global {
            (input, [1; 3], [0; 3])
        } else {
            (
                to3(&self.kernel, 1),
                to3(&self.stride, 1),
                to3(&self.pad, 0),
            )
        };
        let mut output = [1; 3];
        for i in 3 - nd..3 {
            let padded = input[i] + 2 * pad[i];
            if kernel[i] > padded {
                return Err(Error::Value(format!(
                    "Pooling: kernel size ({}) exceeds input ({} padded to {}), data shape {}",
                    kernel[i],
                    input[i],
                    padded,
                    fmt_shape(data)
                )));
            }
            let span = padded - kernel[i];
            output[i] = 1 + if self.full {
                span.div_ceil(stride[i])
            } else {
                span / stride[i]
            };
        }
        Ok(Plan {
            planes: data[0] * data[1],
            input,
            output,
            kernel,
            stride,
            pad,
        })
    }
}

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
fn argmax_plane<T: Num + Float>(
    p: &Plan,
    full: bool,
    x: &[T],
    y: &mut [T],
    at: &mut [T],
    add: bool,
) {
    let two = p.kernel == [1, 2, 2] && p.stride == [1, 2, 2] && p.pad == [0; 3];
    if two && p.input[0] == 1 && !full {
        // 2×2 windows with stride 2 and no padding, the common case, read directly.
        let iw = p.input[2];
        let ow = p.output[2];
        for (r, (out, idx)) in y.chunks_mut(ow).zip(at.chunks_mut(ow)).enumerate() {
            for (c, (o, a)) in out.iter_mut().zip(idx.iter_mut()).enumerate() {
                let first = 2 * r * iw + 2 * c;
                let mut m = max2(T::min_value(), x[first]);
                let mut best = first;
                for i in [first + 1, first + iw, first + iw + 1] {
                    if x[i] > m {
                        m = x[i];
                        best = i;
                    }
                }
                *o = if add { *o + m } else { m };
                *a = T::from(best).unwrap_or_else(|| -T::one());
            }
        }
        return;
    }
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
    let one = |(n, (y, at)): (usize, (&mut [T], &mut [T]))| {
        argmax_plane(p, full, &x[n * il..(n + 1) * il], y, at, add)
    };
    if p.work() > PAR_WORK && p.planes > 1 {
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

/// Routes each output gradient to the input element its index output names.
fn unpool_by_index<T: Num + Float>(p: &Plan, dy: &[T], at: &[T], dx: &mut [T], add: bool) {
    let (il, ol) = (p.in_len(), p.out_len());
    if il == 0 {
        return;
    }
    let one = |(n, dx): (usize, &mut [T])| {
        if !add {
            dx.fill(T::zero());
        }
        let r = n * ol..(n + 1) * ol;
        for (g, i) in dy[r.clone()].iter().zip(&at[r]) {
            if let Some(i) = i.to_usize().filter(|&i| i < il) {
                dx[i] = dx[i] + *g;
            }
        }
    };
    if p.work() > PAR_WORK && p.planes > 1 {
        dx.par_chunks_mut(il).enumerate().for_each(one);
    } else {
        dx.chunks_mut(il).enumerate().for_each(one);
    }
}

fn forward_kernel<T: Num + Float>(p: &Plan, op: &Pooling, x: &[T], y: &mut [T], add: bool) {
    let (il, ol) = (p.in_len(), p.out_len());
    if ol == 0 {
        return;
    }
    let one = |(n, y): (usize, &mut [T])| pool_plane(p, op, &x[n * il..(n + 1) * il], y, add);
    if p.work() > PAR_WORK && p.planes > 1 {
        y.par_chunks_mut(ol).enumerate().for_each(one);
    } else {
        y.chunks_mut(ol).enumerate().for_each(one);
    }
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
    if il == 0 {
        return;
    }
    let one = |(n, dx): (usize, &mut [T])| {
        if !add {
            dx.fill(T::zero());
        }
        let r = n * ol..(n + 1) * ol;
        unpool_plane(p, op, &dy[r.clone()], &x[n * il..(n + 1) * il], &y[r], dx);
    };
    if p.work() > PAR_WORK && p.planes > 1 {
        dx.par_chunks_mut(il).enumerate().for_each(one);
    } else {
        dx.chunks_mut(il).enumerate().for_each(one);
    }
}

impl Operator for Pooling {
    fn name(&self) -> &'static str {
        "Pooling"
    }

    /// Max pooling has a second, hidden output (as in MXNet's default build, where it is
    /// the oneDNN workspace): where each maximum came from, which the backward uses.
    fn num_outputs(&self) -> usize {
        if self.pool == PoolType::Max {
            2
        } else {
            1
        }
    }

    fn num_visible_outputs(&self) -> usize {
        1
    }

    fn output_names(&self) -> Vec<String> {
        let mut names = vec!["output".to_string()];
        if self.pool == PoolType::Max {
            names.push("index".to_string());
        }
        names
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("Pooling", inputs, 1)?;
        let p = self.plan(&inputs[0])?;
        let mut out = Shape::from_slice(&inputs[0][..2]);
        out.extend_from_slice(&p.output[5 - inputs[0].len()..]);
        Ok(vec![out; self.num_outputs()])
    }

    fn gradient(&self) -> Grad {
        let op: OpRef = Arc::new(PoolingBackward { fwd: self.clone() });
        let outputs: &[usize] = if self.pool == PoolType::Max {
            &[0, 1]
        } else {
            &[0]
        };
        Gradient::simple(op, &[0], outputs, 1)
    }
}

impl CpuKernel for Pooling {
    fn forward(
        &self,
        _: &mut OpContext,
        inputs: &[TBlob],
        outputs: &[TBlob],
        req: &[OpReq],
    ) -> Result<()> {
        if req[0] == OpReq::Null {
            return Ok(());
        }
        let p = self.plan(&inputs[0].shape)?;
        let with_index = outputs.len() > 1 && req.get(1).is_some_and(|r| *r != OpReq::Null);
        if with_index {
            dispatch_float!("Pooling", inputs[0].dtype, T => argmax_kernel::<T>(
                &p,
                self.full,
                inputs[0].slice(),
                outputs[0].slice_mut(),
                outputs[1].slice_mut(),
                req[0] == OpReq::Add,
            ));
            return Ok(());
        }
        dispatch_float!("Pooling", inputs[0].dtype, T => forward_kernel::<T>(
            &p,
            self,
            inputs[0].slice(),
            outputs[0].slice_mut(),
            req[0] == OpReq::Add,
        ));
        Ok(())
    }
}

/// `_backward_Pooling`: inputs (output gradient, data, output, and for max pooling the
/// index output); output the data gradient.
struct PoolingBackward {
    fwd: Pooling,
}

impl Operator for PoolingBackward {
    fn name(&self) -> &'static str {
        "_backward_Pooling"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        let want = if self.fwd.pool == PoolType::Max { 4 } else { 3 };
        check_inputs("_backward_Pooling", inputs, want)?;
        self.fwd.plan(&inputs[1])?;
        Ok(vec![inputs[1].clone()])
    }
}

impl CpuKernel for PoolingBackward {
    fn forward(
        &self,
        _: &mut OpContext,
        inputs: &[TBlob],
        outputs: &[TBlob],
        req: &[OpReq],
    ) -> Result<()> {
        if req[0] == OpReq::Null {
            return Ok(());
        }
        let p = self.fwd.plan(&inputs[1].shape)?;
        if inputs.len() == 4 {
            let exact = dispatch_float!("_backward_Pooling", inputs[1].dtype, T =>
                offsets_exact::<T>(p.in_len()));
            if exact {
                dispatch_float!("_backward_Pooling", inputs[1].dtype, T => unpool_by_index::<T>(
                    &p,
                    inputs[0].slice(),
                    inputs[3].slice(),
                    outputs[0].slice_mut(),
                    req[0] == OpReq::Add,
                ));
                return Ok(());
            }
        }
        dispatch_float!("_backward_Pooling", inputs[1].dtype, T => backward_kernel::<T>(
            &p,
            &self.fwd,
            inputs[0].slice(),
            inputs[1].slice(),
            inputs[2].slice(),
            outputs[0].slice_mut(),
            req[0] == OpReq::Add,
        ));
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Pooling>(k);
    cpu::add::<PoolingBackward>(k);
}

const PARAMS: &[&str] = &[
    "kernel",
    "pool_type",
    "global_pool",
    "cudnn_off",
    "pooling_convention",
    "stride",
    "pad",
    "p_value",
    "count_include_pad",
    "layout",
];

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::new("Pooling", attrs, PARAMS)?;
    let global = p.bool("global_pool", false)?;
    let kernel = kernel_tuple(&p, false)?;
    if kernel.is_empty() && !global {
        return Err(Error::Value(
            "Pooling: kernel must be given unless global_pool is set".into(),
        ));
    }
    let nd = kernel.len();
    let pool = match p.choice("pool_type", "max", &["max", "avg", "sum", "lp"])? {
        "max" => PoolType::Max,
        "avg" => PoolType::Avg,
        "sum" => PoolType::Sum,
        _ => match p.opt_int("p_value")? {
            Some(v @ 1..=3) => PoolType::Lp(v as u32),
            other => {
                return Err(Error::Value(format!(
                    "Pooling: lp pooling needs p_value 1, 2 or 3, got {}",
                    other.map_or("None".to_string(), |v| v.to_string())
                )))
            }
        },
    };
    let full = match p.choice("pooling_convention", "valid", &["valid", "full", "same"])? {
        "valid" => false,
        "full" => true,
        _ => {
            return Err(Error::NotImplemented(
                "Pooling: pooling_convention 'same' is not supported".into(),
            ))
        }
    };
    p.bool("cudnn_off", false)?;
    if nd > 0 {
        check_layout(&p, nd)?;
    }
    let count_include_pad = match p.raw("count_include_pad") {
        Some(v) if v.trim() == "None" => true,
        _ => p.bool("count_include_pad", true)?,
    };
    Ok(Arc::new(Pooling {
        pool,
        global,
        full,
        // Global pooling ignores these; without a kernel they have nothing to match.
        stride: if nd > 0 {
            window_tuple(&p, "stride", nd, 1, 1)?
        } else {
            Vec::new()
        },
        pad: if nd > 0 {
            window_tuple(&p, "pad", nd, 0, 0)?
        } else {
            Vec::new()
        },
        kernel,
        count_include_pad,
    }))
}

/// Registers `Pooling`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "Pooling",
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: ParamList::Names(PARAMS),
        doc: "Performs pooling on the input.",
        create: Box::new(create),
    });
}
