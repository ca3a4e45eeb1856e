//! Helpers shared by the basic layer kernels: float dtype dispatch, element conversion,
//! output requests and parallel loops over rows.

use crate::dtype::Element;
use crate::kernels::cpu::map::{pool_shares_work, PAR_MIN};
use crate::kernels::cpu::num::Num;
use crate::ndarray::TBlob;
use crate::op::OpReq;
use num_traits::Float;
use rayon::prelude::*;

/// Converts a stored element to the compute type.
#[inline(always)]
pub fn ld<T: Element, F: Float + 'static>(v: T) -> F {
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<F>() {
        // SAFETY: `T` and `F` are the same type, so this is a plain copy.
        unsafe { std::mem::transmute_copy(&v) }
    } else {
        F::from(v.to_f64()).unwrap_or_else(F::nan)
    }
}

/// Converts a computed value to the stored element type.
#[inline(always)]
pub fn st<F: Float + 'static, T: Element>(v: F) -> T {
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<F>() {
        // SAFETY: `T` and `F` are the same type, so this is a plain copy.
        unsafe { std::mem::transmute_copy(&v) }
    } else {
        T::from_f64(v.to_f64().unwrap_or(f64::NAN))
    }
}

/// Writes or accumulates one value.
#[inline(always)]
pub fn put<T: Num>(o: &mut T, v: T, add: bool) {
    *o = if add { o.add(v) } else { v };
}

/// True if two blobs share any bytes.
pub fn overlaps(x: &TBlob, y: &TBlob) -> bool {
    let (xs, ys) = (x.ptr() as usize, y.ptr() as usize);
    let (xn, yn) = (x.size() * x.dtype.size(), y.size() * y.dtype.size());
    xn > 0 && yn > 0 && xs < ys + yn && ys < xs + xn
}

/// `out (=|+=) f(x)` element-wise; `x` may be `out` itself (an in-place op).
pub fn unary<T: Num>(x: &TBlob, out: &TBlob, req: OpReq, f: impl Fn(T) -> T + Sync + Send) {
    if req == OpReq::Null {
        return;
    }
    if x.ptr() == out.ptr() {
        let out = out.slice_mut::<T>();
        // `f` itself goes to the loop, so that it is inlined there and vectorised.
        if req == OpReq::Add {
            crate::kernels::cpu::map::map_inplace(
                out,
                #[inline(always)]
                |v| v.add(f(v)),
            );
        } else {
            crate::kernels::cpu::map::map_inplace(out, f);
        }
    } else {
        crate::kernels::cpu::map::map1(x.slice::<T>(), out.slice_mut::<T>(), req, f);
    }
}

/// `out (=|+=) f(a, b, c)` element-wise over three equally long slices.
pub fn map3<A: Copy + Sync, B: Copy + Sync, C: Copy + Sync, T: Num>(
    a: &[A],
    b: &[B],
    c: &[C],
    out: &mut [T],
    req: OpReq,
    f: impl Fn(A, B, C) -> T + Sync + Send,
) {
    if req == OpReq::Null {
        return;
    }
    let add = req == OpReq::Add;
    let body = |off: usize, out: &mut [T]| {
        for (i, o) in out.iter_mut().enumerate() {
            let j = off + i;
            put(o, f(a[j], b[j], c[j]), add);
        }
    };
    for_chunks(out, 1, body);
}

/// Runs `body(offset, chunk)` over `out` cut into chunks of whole rows of `row` elements
/// (`offset` is the chunk's first element), serially for small outputs and over the
/// rayon pool for large ones.
pub fn for_chunks<T: Send>(out: &mut [T], row: usize, body: impl Fn(usize, &mut [T]) + Sync) {
    let row = row.max(1);
    let rows = out.len() / row;
    if out.len() < PAR_MIN || rows < 2 || !pool_shares_work() {
        body(0, out);
        return;
    }
    let threads = rayon::current_num_threads().max(1);
    let per = rows.div_ceil(threads * 4).max((PAR_MIN / 4).div_ceil(row));
    out.par_chunks_mut(per * row)
        .enumerate()
        .for_each(|(c, o)| body(c * per * row, o));
}
