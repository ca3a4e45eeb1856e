//! Element-wise loops shared by the kernels: serial for small arrays, split across the
//! rayon pool for large ones, honouring the output request (write or add).

use super::num::Num;
use super::simd::vectorized;
use crate::ndarray::{InOut, TBlob};
use crate::op::OpReq;
use rayon::prelude::*;

/// Below this many elements an element-wise op runs on one thread: splitting costs more
/// than it saves, and the engine already runs independent ops in parallel.
pub const PAR_MIN: usize = 1 << 17;

/// True when the kernels' pool has threads to share work with. A pool of one would run a
/// split loop on its one thread while the calling thread waits: a hand-off for nothing.
pub fn pool_shares_work() -> bool {
    rayon::current_num_threads() > 1
}

fn chunk_len(n: usize) -> usize {
    let threads = rayon::current_num_threads().max(1);
    n.div_ceil(threads * 4).max(PAR_MIN / 4)
}

#[inline(always)]
fn store<T: Num>(o: &mut T, v: T, add: bool) {
    *o = if add { o.add(v) } else { v };
}

/// `out[i] (=|+=) f(a[i])`.
pub fn map1<A: Copy + Sync, T: Num>(
    a: &[A],
    out: &mut [T],
    req: OpReq,
    f: impl Fn(A) -> T + Sync + Send,
) {
    if req == OpReq::Null {
        return;
    }
    let add = req == OpReq::Add;
    let body = |a: &[A], out: &mut [T]| {
        vectorized(
            #[inline(always)]
            || {
                // Plain loops, not `for_each`: the body must be inlined here to get the
                // wider instructions.
                if add {
                    for (o, &x) in out.iter_mut().zip(a) {
                        store(o, f(x), true);
                    }
                } else {
                    for (o, &x) in out.iter_mut().zip(a) {
                        *o = f(x);
                    }
                }
            },
        )
    };
    if out.len() < PAR_MIN || !pool_shares_work() {
        body(a, out);
    } else {
        let c = chunk_len(out.len());
        out.par_chunks_mut(c)
            .zip(a.par_chunks(c))
            .for_each(|(o, a)| body(a, o));
    }
}

/// `out[i] (=|+=) f(x[i])` where the output may be the input itself ([`InOut`]).
pub fn map_io<T: Num>(io: InOut<'_, T>, req: OpReq, f: impl Fn(T) -> T + Sync + Send) {
    match (io, req) {
        (_, OpReq::Null) => {}
        (InOut::Same(o), OpReq::Add) => map_inplace(o, |v| v.add(f(v))),
        (InOut::Same(o), _) => map_inplace(o, f),
        (InOut::Apart(x, o), _) => map1(x, o, req, f),
    }
}

/// `out (=|+=) f(a, b)` element-wise over blobs of one type, either of which may be the
/// output itself (the in-place form).
pub fn map2_blobs<T: Num>(
    a: &TBlob,
    b: &TBlob,
    out: &TBlob,
    req: OpReq,
    f: impl Fn(T, T) -> T + Sync + Send,
) {
    let is_out = |x: &TBlob| x.ptr() == out.ptr() && x.size() == out.size() && x.size() > 0;
    let n = [out.size()];
    match (is_out(a), is_out(b)) {
        (false, false) => map2(a.slice(), b.slice(), out.slice_mut(), req, f),
        (true, true) => map_io(InOut::Same(out.slice_mut()), req, |v| f(v, v)),
        (true, false) => map2_broadcast_inplace(out.slice_mut(), &n, b.slice(), &n, false, req, f),
        (false, true) => map2_broadcast_inplace(out.slice_mut(), &n, a.slice(), &n, true, req, f),
    }
}

/// `out[i] (=|+=) f(out[i])`, for ops whose output is also their input.
pub fn map_inplace<T: Num>(out: &mut [T], f: impl Fn(T) -> T + Sync + Send) {
    let body = |out: &mut [T]| {
        vectorized(
            #[inline(always)]
            || {
                for o in out.iter_mut() {
                    *o = f(*o);
                }
            },
        )
    };
    if out.len() < PAR_MIN || !pool_shares_work() {
        body(out);
    } else {
        let c = chunk_len(out.len());
        out.par_chunks_mut(c).for_each(body);
    }
}

/// `out[i] (=|+=) f(a[i], b[i])`.
pub fn map2<A: Copy + Sync, B: Copy + Sync, T: Num>(
    a: &[A],
    b: &[B],
    out: &mut [T],
    req: OpReq,
    f: impl Fn(A, B) -> T + Sync + Send,
) {
    if req == OpReq::Null {
        return;
    }
    let add = req == OpReq::Add;
    let body = |a: &[A], b: &[B], out: &mut [T]| {
        vectorized(
            #[inline(always)]
            || {
                if add {
                    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                        store(o, f(x, y), true);
                    }
                } else {
                    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                        *o = f(x, y);
                    }
                }
            },
        )
    };
    if out.len() < PAR_MIN || !pool_shares_work() {
        body(a, b, out);
    } else {
        let c = chunk_len(out.len());
        out.par_chunks_mut(c)
            .zip(a.par_chunks(c))
            .zip(b.par_chunks(c))
            .for_each(|((o, a), b)| body(a, b, o));
    }
}

/// Element strides of `shape` broadcast to `out_shape` (0 along broadcast axes).
pub fn broadcast_strides(shape: &[usize], out_shape: &[usize]) -> Vec<usize> {
    let n = out_shape.len();
    let mut strides = vec![0; n];
    let mut s = 1;
    for i in (0..shape.len()).rev() {
        let oi = i + n - shape.len();
        strides[oi] = if shape[i] == 1 { 0 } else { s };
        s *= shape[i];
    }
    strides
}

/// The in-place form of [`map2_broadcast`]: `out` is also one operand (the first one,
/// or the second when `out_is_second`), `other` is broadcast to `out_shape`.
pub fn map2_broadcast_inplace<T: Num>(
    out: &mut [T],
    out_shape: &[usize],
    other: &[T],
    other_shape: &[usize],
    out_is_second: bool,
    req: OpReq,
    f: impl Fn(T, T) -> T + Sync + Send,
) {
    if req == OpReq::Null || out.is_empty() {
        return;
    }
    let add = req == OpReq::Add;
    let g = |o: T, v: T| {
        let r = if out_is_second { f(v, o) } else { f(o, v) };
        if add {
            o.add(r)
        } else {
            r
        }
    };
    if other.len() == 1 {
        let v = other[0];
        return map_inplace(out, |o| g(o, v));
    }
    if other.len() == out.len() {
        let body = |o: &mut [T], v: &[T]| {
            vectorized(
                #[inline(always)]
                || {
                    for (o, &v) in o.iter_mut().zip(v) {
                        *o = g(*o, v);
                    }
                },
            )
        };
        if out.len() < PAR_MIN || !pool_shares_work() {
            body(out, other);
        } else {
            let c = chunk_len(out.len());
            out.par_chunks_mut(c)
                .zip(other.par_chunks(c))
                .for_each(|(o, v)| body(o, v));
        }
        return;
    }
    let so = broadcast_strides(other_shape, out_shape);
    let nd = out_shape.len();
    let inner = out_shape[nd - 1];
    let io = so[nd - 1];
    let row = |r: usize, o: &mut [T]| {
        let (mut off, mut rem) = (0usize, r);
        for ax in (0..nd - 1).rev() {
            let i = rem % out_shape[ax];
            rem /= out_shape[ax];
            off += i * so[ax];
        }
        for (j, oj) in o.iter_mut().enumerate() {
            *oj = g(*oj, other[off + j * io]);
        }
    };
    if out.len() < PAR_MIN || !pool_shares_work() {
        out.chunks_mut(inner)
            .enumerate()
            .for_each(|(r, o)| row(r, o));
    } else {
        out.par_chunks_mut(inner)
            .enumerate()
            .for_each(|(r, o)| row(r, o));
    }
}

/// `out (=|+=) f(a, b)` with numpy broadcasting of `a` and `b` to `out_shape`.
#[allow(clippy::too_many_arguments)]
pub fn map2_broadcast<A: Copy + Sync, B: Copy + Sync, T: Num>(
    a: &[A],
    a_shape: &[usize],
    b: &[B],
    b_shape: &[usize],
    out: &mut [T],
    out_shape: &[usize],
    req: OpReq,
    f: impl Fn(A, B) -> T + Sync + Send,
) {
    if req == OpReq::Null || out.is_empty() {
        return;
    }
    if a.len() == out.len() && b.len() == out.len() {
        return map2(a, b, out, req, f);
    }
    if b.len() == 1 && a.len() == out.len() {
        let y = b[0];
        return map1(a, out, req, |x| f(x, y));
    }
    if a.len() == 1 && b.len() == out.len() {
        let x = a[0];
        return map1(b, out, req, |y| f(x, y));
    }
    let add = req == OpReq::Add;
    let sa = broadcast_strides(a_shape, out_shape);
    let sb = broadcast_strides(b_shape, out_shape);
    let nd = out_shape.len();
    let inner = out_shape[nd - 1];
    let (ia, ib) = (sa[nd - 1], sb[nd - 1]);
    let row = |r: usize, o: &mut [T]| {
        // Offsets of row `r` (all axes but the last) in a and b.
        let (mut oa, mut ob, mut rem) = (0usize, 0usize, r);
        for ax in (0..nd - 1).rev() {
            let i = rem % out_shape[ax];
            rem /= out_shape[ax];
            oa += i * sa[ax];
            ob += i * sb[ax];
        }
        for (j, oj) in o.iter_mut().enumerate() {
            let v = f(a[oa + j * ia], b[ob + j * ib]);
            store(oj, v, add);
        }
    };
    if out.len() < PAR_MIN || !pool_shares_work() {
        out.chunks_mut(inner)
            .enumerate()
            .for_each(|(r, o)| row(r, o));
    } else {
        out.par_chunks_mut(inner)
            .enumerate()
            .for_each(|(r, o)| row(r, o));
    }
}
