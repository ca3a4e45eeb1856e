//! CPU kernels of the backward operators, one module per forward family (the definitions
//! are in `op::grad`). Every kernel honours each output's request: `Null` skips it, a
//! write overwrites it and `Add` accumulates into it.

pub mod binary;
pub mod elemwise;
pub mod indexing;
pub mod join;
pub mod linalg;
pub mod reduce;
#[cfg(test)]
pub mod testing;
#[cfg(test)]
mod tests;
pub mod view;

use super::map::{broadcast_strides, map1, pool_shares_work, PAR_MIN};
use super::num::Num;
use super::reduce::reduce;
use crate::dispatch_num;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::ndarray::TBlob;
use crate::op::reduce::ReduceKind;
use crate::op::OpReq;
use crate::shape::Shape;
use half::f16;
use num_traits::Float;
use rayon::prelude::*;

/// A computation over float slices, written once for f32 and f64.
pub trait FloatKernel: Sync {
    /// `out (=|+=) f(ins)` with `req` a write or `Add`.
    fn run<F: Float + Num>(&self, ins: &[&[F]], out: &mut [F], req: OpReq);
}

fn widened<W: Num>(b: &TBlob) -> Result<Vec<W>> {
    if b.dtype == DType::F16 && W::DTYPE == DType::F32 {
        use half::slice::HalfFloatSliceExt;
        let mut w = vec![0f32; b.size()];
        b.to_vec::<f16>().convert_to_f32_slice(&mut w);
        return Ok(w.into_iter().map(|v| W::from_f64(v as f64)).collect());
    }
    // A copy: the output may be this very input (in place), written after the read.
    dispatch_num!("gradient", b.dtype, T => Ok(b.to_vec::<T>().into_iter().map(|v| W::from_f64(Element::to_f64(v))).collect()))
}

/// Runs `k` on `ins` into `out`: directly when every blob is f32 (or every blob f64),
/// else in f32 (float16) or f64 (integers, mixed types) and converted back.
pub fn with_float(
    op: &str,
    k: &impl FloatKernel,
    ins: &[&TBlob],
    out: &TBlob,
    req: OpReq,
) -> Result<()> {
    if req == OpReq::Null {
        return Ok(());
    }
    let req = if req == OpReq::Add {
        OpReq::Add
    } else {
        OpReq::Write
    };
    let all = |t: DType| ins.iter().all(|b| b.dtype == t) && out.dtype == t;
    if all(DType::F32) {
        run_same::<f32>(k, ins, out, req);
    } else if all(DType::F64) {
        run_same::<f64>(k, ins, out, req);
    } else if all(DType::F16) {
        let res = run_widened::<f32>(k, ins, out.size())?;
        map1(&res, out.slice_mut::<f16>(), req, f16::from_f32);
    } else {
        let res = run_widened::<f64>(k, ins, out.size())?;
        dispatch_num!(op, out.dtype, T => map1(&res, out.slice_mut::<T>(), req, <T as Element>::from_f64));
    }
    Ok(())
}

/// Runs `k` on copies of `ins` widened to `W` and returns the `len` results.
fn run_widened<W: Float + Num>(k: &impl FloatKernel, ins: &[&TBlob], len: usize) -> Result<Vec<W>> {
    let w = ins
        .iter()
        .map(|b| widened::<W>(b))
        .collect::<Result<Vec<_>>>()?;
    let v: Vec<&[W]> = w.iter().map(|x| &x[..]).collect();
    let mut res = vec![W::ZERO; len];
    k.run(&v, &mut res, OpReq::Write);
    Ok(res)
}

/// Runs `k` with every blob of type `F`. An input that is the output itself (in place)
/// is read from a copy, so no slice is shared and mutable at once.
fn run_same<F: Float + Num>(k: &impl FloatKernel, ins: &[&TBlob], out: &TBlob, req: OpReq) {
    if ins.iter().any(|b| b.ptr() == out.ptr() && b.size() > 0) {
        let copies: Vec<Vec<F>> = ins.iter().map(|b| b.to_vec::<F>()).collect();
        let v: Vec<&[F]> = copies.iter().map(|c| &c[..]).collect();
        k.run(&v, out.slice_mut::<F>(), req);
    } else {
        let v: Vec<&[F]> = ins.iter().map(|b| b.slice::<F>()).collect();
        k.run(&v, out.slice_mut::<F>(), req);
    }
}

/// Scratch memory for one array, aligned for every element type.
pub struct Scratch {
    _mem: Vec<u64>,
    /// The array over the scratch memory.
    pub blob: TBlob,
}

impl Scratch {
    /// Uninitialised-looking (zeroed) scratch of `shape` and `dtype`.
    pub fn new(shape: &[usize], dtype: DType) -> Scratch {
        let n: usize = shape.iter().product();
        let mut mem = vec![0u64; (n * dtype.size()).div_ceil(8).max(1)];
        let blob = TBlob::from_raw(mem.as_mut_ptr() as *mut u8, Shape::from_slice(shape), dtype);
        Scratch { _mem: mem, blob }
    }
}

/// `x` seen with another shape of the same size.
pub fn reshaped(x: &TBlob, shape: &[usize]) -> TBlob {
    x.with_shape(shape)
}

/// `out (=|+=)` the sum of `full` over the axes along which `out`'s shape (numpy
/// broadcasting) was stretched to `full`'s.
pub fn sum_to(op: &str, full: &TBlob, out: &TBlob, req: OpReq) -> Result<()> {
    let (fs, os) = (&full.shape, &out.shape);
    if os.len() > fs.len() {
        return Err(Error::Runtime(format!(
            "{op}: cannot sum to a shape of more axes"
        )));
    }
    let pad = fs.len() - os.len();
    let mask: Vec<bool> = (0..fs.len())
        .map(|i| i < pad || (os[i - pad] == 1 && fs[i] != 1))
        .collect();
    if !mask.iter().any(|&m| m) {
        return copy_into(op, full, out, req);
    }
    reduce(op, ReduceKind::Sum, full, &mask, out, req)
}

/// `out (=|+=) x` for blobs of one size.
pub fn copy_into(op: &str, x: &TBlob, out: &TBlob, req: OpReq) -> Result<()> {
    if req == OpReq::Null || (req != OpReq::Add && x.ptr() == out.ptr()) {
        return Ok(());
    }
    dispatch_num!(op, out.dtype, T => map1(x.slice::<T>(), out.slice_mut::<T>(), req, |v| v));
    Ok(())
}

/// Zeroes `out` for a write; leaves it for `Add`.
pub fn clear_for(out: &TBlob, req: OpReq) {
    if matches!(req, OpReq::Write | OpReq::WriteInplace) {
        out.bytes_mut().fill(0);
    }
}

/// `out (=|+=) f(a, b, c)` with `a`, `b` and `c` broadcast (numpy rules) to `out_shape`.
#[allow(clippy::too_many_arguments)]
pub fn map3_broadcast<T: Num>(
    ins: [(&[T], &[usize]); 3],
    out: &mut [T],
    out_shape: &[usize],
    req: OpReq,
    f: impl Fn(T, T, T) -> T + Sync + Send,
) {
    if req == OpReq::Null || out.is_empty() {
        return;
    }
    let add = req == OpReq::Add;
    let put = move |o: &mut T, v: T| *o = if add { o.add(v) } else { v };
    let [(a, ash), (b, bsh), (c, csh)] = ins;
    let n = out.len();
    if a.len() == n && b.len() == n && c.len() == n {
        let body = |start: usize, o: &mut [T]| {
            for (j, oj) in o.iter_mut().enumerate() {
                let i = start + j;
                put(oj, f(a[i], b[i], c[i]));
            }
        };
        if n < PAR_MIN || !pool_shares_work() {
            body(0, out);
        } else {
            let chunk = PAR_MIN / 4;
            out.par_chunks_mut(chunk)
                .enumerate()
                .for_each(|(k, o)| body(k * chunk, o));
        }
        return;
    }
    let sa = broadcast_strides(ash, out_shape);
    let sb = broadcast_strides(bsh, out_shape);
    let sc = broadcast_strides(csh, out_shape);
    let nd = out_shape.len();
    let inner = out_shape[nd - 1];
    let (ia, ib, ic) = (sa[nd - 1], sb[nd - 1], sc[nd - 1]);
    let row = |r: usize, o: &mut [T]| {
        let (mut oa, mut ob, mut oc, mut rem) = (0, 0, 0, r);
        for ax in (0..nd - 1).rev() {
            let i = rem % out_shape[ax];
            rem /= out_shape[ax];
            oa += i * sa[ax];
            ob += i * sb[ax];
            oc += i * sc[ax];
        }
        for (j, oj) in o.iter_mut().enumerate() {
            put(oj, f(a[oa + j * ia], b[ob + j * ib], c[oc + j * ic]));
        }
    };
    if n < PAR_MIN || !pool_shares_work() {
        out.chunks_mut(inner)
            .enumerate()
            .for_each(|(r, o)| row(r, o));
    } else {
        out.par_chunks_mut(inner)
            .enumerate()
            .for_each(|(r, o)| row(r, o));
    }
}

/// Registers the CPU kernels of this family.
pub(crate) fn register_kernels(k: &mut crate::kernels::Kernels) {
    binary::register_kernels(k);
    elemwise::register_kernels(k);
    indexing::register_kernels(k);
    join::register_kernels(k);
    linalg::register_kernels(k);
    reduce::register_kernels(k);
    view::register_kernels(k);
}
