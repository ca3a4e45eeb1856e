//! CPU kernels of the reductions over axes (`sum`, `mean`, `prod`, `max`, `min`,
//! `nansum`, `nanprod`, `norm`) and index reductions (`argmax`, `argmin`,
//! `argmax_channel`).
//!
//! A reduction merges neighbouring axes that are all reduced or all kept, then removes
//! the reduced groups innermost first. Each step views its input as (outer, reduced,
//! inner): with `inner == 1` the reduced axis is contiguous and is folded with several
//! independent accumulators (vectorisable); otherwise whole rows are combined
//! element-wise. Large inputs are split across the rayon pool over output blocks, columns
//! or the reduced axis.

use super::map::{map1, pool_shares_work, PAR_MIN};
use super::num::Num;
use crate::dispatch_num;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::reduce::{reduce_axes, ArgReduce, Reduce, ReduceKind};
use crate::op::{OpContext, OpReq};
use crate::shape::fmt_shape;
use half::f16;
use num_traits::Float;
use rayon::prelude::*;

/// An associative combination with its identity.
trait Combine<A>: Copy + Send + Sync + 'static {
    fn id() -> A;
    fn f(a: A, b: A) -> A;
}

#[derive(Clone, Copy)]
struct AddC;

#[derive(Clone, Copy)]
struct MulC;

#[derive(Clone, Copy)]
struct MaxC;

#[derive(Clone, Copy)]
struct MinC;

impl<A: Num> Combine<A> for AddC {
    #[inline(always)]
    fn id() -> A {
        A::ZERO
    }
    #[inline(always)]
    fn f(a: A, b: A) -> A {
        a.add(b)
    }
}

impl<A: Num> Combine<A> for MulC {
    #[inline(always)]
    fn id() -> A {
        A::ONE
    }
    #[inline(always)]
    fn f(a: A, b: A) -> A {
        a.mul(b)
    }
}

impl<A: Num> Combine<A> for MaxC {
    #[inline(always)]
    fn id() -> A {
        A::lowest()
    }
    #[inline(always)]
    fn f(a: A, b: A) -> A {
        // NaN wins; `|` rather than `||` keeps the select branch-free (vectorisable).
        if (a > b) | a.is_nan() {
            a
        } else {
            b
        }
    }
}

impl<A: Num> Combine<A> for MinC {
    #[inline(always)]
    fn id() -> A {
        A::highest()
    }
    #[inline(always)]
    fn f(a: A, b: A) -> A {
        if (a < b) | a.is_nan() {
            a
        } else {
            b
        }
    }
}

/// Independent accumulators in the contiguous fold.
const LANES: usize = 16;

/// Elements folded before their partial result joins the total (bounds rounding growth).
const BLOCK: usize = 4096;

/// Columns combined at a time in a row reduction, so the accumulators stay in cache.
const COLS: usize = 16384;

/// Folds a contiguous run of elements.
#[inline(always)]
fn fold_impl<U: Copy, A: Copy, C: Combine<A>>(x: &[U], map: &impl Fn(U) -> A) -> A {
    let mut total = C::id();
    for block in x.chunks(BLOCK) {
        let mut lanes = [C::id(); LANES];
        let mut it = block.chunks_exact(LANES);
        for c in &mut it {
            for (l, &v) in lanes.iter_mut().zip(c) {
                *l = C::f(*l, map(v));
            }
        }
        let mut acc = C::id();
        for l in lanes {
            acc = C::f(acc, l);
        }
        for &v in it.remainder() {
            acc = C::f(acc, map(v));
        }
        total = C::f(total, acc);
    }
    total
}

/// Combines the rows of `x` (`r` rows of `inner` elements) into `out`, which covers the
/// columns `col0..col0 + out.len()`.
#[inline(always)]
fn fold_rows_impl<U: Copy, A: Copy, C: Combine<A>>(
    x: &[U],
    r: usize,
    inner: usize,
    map: &impl Fn(U) -> A,
    out: &mut [A],
    col0: usize,
) {
    for (cb, o) in out.chunks_mut(COLS).enumerate() {
        let c0 = col0 + cb * COLS;
        o.fill(C::id());
        let len = o.len();
        let row = |rr: usize| &x[rr * inner + c0..][..len];
        // Four rows at a time: a quarter of the accumulator traffic.
        let mut rr = 0;
        while rr + 4 <= r {
            let (r0, r1, r2, r3) = (row(rr), row(rr + 1), row(rr + 2), row(rr + 3));
            for ((((a, &v0), &v1), &v2), &v3) in o.iter_mut().zip(r0).zip(r1).zip(r2).zip(r3) {
                let s = C::f(C::f(map(v0), map(v1)), C::f(map(v2), map(v3)));
                *a = C::f(*a, s);
            }
            rr += 4;
        }
        for rr in rr..r {
            for (a, &v) in o.iter_mut().zip(row(rr)) {
                *a = C::f(*a, map(v));
            }
        }
    }
}

/// True if the CPU runs AVX2, so the folds can use 256-bit vectors.
#[inline]
fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn fold_avx2<U: Copy, A: Copy, C: Combine<A>>(x: &[U], map: &impl Fn(U) -> A) -> A {
    fold_impl::<U, A, C>(x, map)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn fold_rows_avx2<U: Copy, A: Copy, C: Combine<A>>(
    x: &[U],
    r: usize,
    inner: usize,
    map: &impl Fn(U) -> A,
    out: &mut [A],
    col0: usize,
) {
    fold_rows_impl::<U, A, C>(x, r, inner, map, out, col0)
}

/// Folds a contiguous run of elements, with AVX2 where the CPU has it.
#[inline]
fn fold<U: Copy, A: Copy, C: Combine<A>>(x: &[U], map: &impl Fn(U) -> A) -> A {
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        // SAFETY: the CPU supports AVX2, checked at run time just above.
        return unsafe { fold_avx2::<U, A, C>(x, map) };
    }
    fold_impl::<U, A, C>(x, map)
}

/// Row combination (see `fold_rows_impl`), with AVX2 where the CPU has it.
#[inline]
fn fold_rows<U: Copy, A: Copy, C: Combine<A>>(
    x: &[U],
    r: usize,
    inner: usize,
    map: &impl Fn(U) -> A,
    out: &mut [A],
    col0: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        // SAFETY: the CPU supports AVX2, checked at run time just above.
        return unsafe { fold_rows_avx2::<U, A, C>(x, r, inner, map, out, col0) };
    }
    fold_rows_impl::<U, A, C>(x, r, inner, map, out, col0)
}

/// Reduces the middle axis of `x` viewed as (outer, r, inner) into `out` (outer × inner).
fn pass<U, A, C, F>(x: &[U], outer: usize, r: usize, inner: usize, map: &F, out: &mut [A])
where
    U: Copy + Send + Sync,
    A: Copy + Send + Sync,
    C: Combine<A>,
    F: Fn(U) -> A + Sync,
{
    let threads = rayon::current_num_threads().max(1);
    let big = x.len() >= PAR_MIN && threads > 1;
    if r == 1 {
        let f = |(o, &v): (&mut A, &U)| *o = C::f(C::id(), map(v));
        if big {
            out.par_iter_mut().zip(x.par_iter()).for_each(f);
        } else {
            out.iter_mut().zip(x).for_each(f);
        }
        return;
    }
    if inner == 1 {
        if !big {
            for (o, slot) in out.iter_mut().enumerate() {
                *slot = fold::<U, A, C>(&x[o * r..(o + 1) * r], map);
            }
        } else if outer >= 2 * threads {
            let per = outer.div_ceil(threads * 4);
            out.par_chunks_mut(per).enumerate().for_each(|(ci, os)| {
                for (j, slot) in os.iter_mut().enumerate() {
                    let o = ci * per + j;
                    *slot = fold::<U, A, C>(&x[o * r..(o + 1) * r], map);
                }
            });
        } else {
            let c = r.div_ceil(threads * 4).max(BLOCK);
            for (o, slot) in out.iter_mut().enumerate() {
                *slot = x[o * r..(o + 1) * r]
                    .par_chunks(c)
                    .map(|p| fold::<U, A, C>(p, map))
                    .reduce(<C as Combine<A>>::id, <C as Combine<A>>::f);
            }
        }
        return;
    }
    let slab = r * inner;
    if !big {
        for (o, orow) in out.chunks_mut(inner).enumerate() {
            fold_rows::<U, A, C>(&x[o * slab..(o + 1) * slab], r, inner, map, orow, 0);
        }
    } else if outer >= 2 * threads {
        let per = outer.div_ceil(threads * 4);
        out.par_chunks_mut(per * inner)
            .enumerate()
            .for_each(|(ci, oc)| {
                for (j, orow) in oc.chunks_mut(inner).enumerate() {
                    let o = ci * per + j;
                    fold_rows::<U, A, C>(&x[o * slab..(o + 1) * slab], r, inner, map, orow, 0);
                }
            });
    } else if r >= 2 * threads {
        // Few output rows over a long reduced axis: each thread folds a run of whole input
        // rows into its own partial result.
        let rc = r.div_ceil(threads * 2);
        let partials: Vec<Vec<A>> = (0..r.div_ceil(rc))
            .into_par_iter()
            .map(|p| {
                let (r0, r1) = (p * rc, ((p + 1) * rc).min(r));
                let mut buf = vec![C::id(); outer * inner];
                for (o, orow) in buf.chunks_mut(inner).enumerate() {
                    let xs = &x[o * slab + r0 * inner..o * slab + r1 * inner];
                    fold_rows::<U, A, C>(xs, r1 - r0, inner, map, orow, 0);
                }
                buf
            })
            .collect();
        out.fill(C::id());
        for p in partials {
            for (a, b) in out.iter_mut().zip(p) {
                *a = C::f(*a, b);
            }
        }
    } else {
        // Few, long rows: split the columns.
        let cc = inner.div_ceil(threads * 2).next_multiple_of(COLS);
        for (o, orow) in out.chunks_mut(inner).enumerate() {
            let xs = &x[o * slab..(o + 1) * slab];
            orow.par_chunks_mut(cc).enumerate().for_each(|(ci, oc)| {
                fold_rows::<U, A, C>(xs, r, inner, map, oc, ci * cc);
            });
        }
    }
}

/// Neighbouring axes merged into groups (size, reduced), size-1 axes dropped.
fn merge_axes(shape: &[usize], mask: &[bool]) -> Vec<(usize, bool)> {
    let mut groups: Vec<(usize, bool)> = Vec::new();
    for (&d, &m) in shape.iter().zip(mask) {
        if d == 1 {
            continue;
        }
        match groups.last_mut() {
            Some(g) if g.1 == m => g.0 *= d,
            _ => groups.push((d, m)),
        }
    }
    groups
}

/// The (outer, reduced, inner) view of the innermost reduced group, which is removed.
fn take_innermost(groups: &mut Vec<(usize, bool)>) -> Option<(usize, usize, usize)> {
    let g = groups.iter().rposition(|g| g.1)?;
    let outer = groups[..g].iter().map(|g| g.0).product();
    let inner = groups[g + 1..].iter().map(|g| g.0).product();
    let r = groups[g].0;
    groups.remove(g);
    if g > 0 && g < groups.len() && groups[g - 1].1 == groups[g].1 {
        groups[g - 1].0 *= groups[g].0;
        groups.remove(g);
    }
    Some((outer, r, inner))
}

/// Reduces `x` of `shape` over the axes in `mask`: one accumulator per output element, in
/// the output's row-major order.
fn reduce_acc<T, A, C, F>(x: &[T], shape: &[usize], mask: &[bool], map: F) -> Vec<A>
where
    T: Copy + Send + Sync,
    A: Copy + Send + Sync,
    C: Combine<A>,
    F: Fn(T) -> A + Sync,
{
    let mut groups = merge_axes(shape, mask);
    let out_len: usize = groups.iter().filter(|g| !g.1).map(|g| g.0).product();
    if x.is_empty() || out_len == 0 {
        return vec![C::id(); out_len];
    }
    let Some((outer, r, inner)) = take_innermost(&mut groups) else {
        let mut acc = vec![C::id(); x.len()];
        pass::<T, A, C, F>(x, x.len(), 1, 1, &map, &mut acc);
        return acc;
    };
    let mut acc = vec![C::id(); outer * inner];
    pass::<T, A, C, F>(x, outer, r, inner, &map, &mut acc);
    while let Some((outer, r, inner)) = take_innermost(&mut groups) {
        let mut next = vec![C::id(); outer * inner];
        pass::<A, A, C, _>(&acc, outer, r, inner, &|v: A| v, &mut next);
        acc = next;
    }
    acc
}

/// Writes `fin(acc)` into `out` as `req` says, converting to the output's dtype.
fn finish<A, F>(op: &str, acc: &[A], out: &TBlob, req: OpReq, fin: F) -> Result<()>
where
    A: Num,
    F: Fn(A) -> A + Sync + Send,
{
    if out.dtype == A::DTYPE {
        map1(acc, out.slice_mut::<A>(), req, fin);
    } else {
        dispatch_num!(op, out.dtype, O => map1(acc, out.slice_mut::<O>(), req, |a| O::cast_from(fin(a))));
    }
    Ok(())
}

/// A reduction of float32 or float64 data (float16 arrives here widened to float32).
#[allow(clippy::too_many_arguments)]
fn reduce_float<T: Num + Float>(
    op: &str,
    kind: ReduceKind,
    x: &[T],
    shape: &[usize],
    mask: &[bool],
    count: usize,
    out: &TBlob,
    req: OpReq,
) -> Result<()> {
    let z = T::zero();
    let one = T::one();
    let n = T::from(count).unwrap_or(z);
    let id = |a: T| a;
    match kind {
        ReduceKind::Sum => finish(
            op,
            &reduce_acc::<T, T, AddC, _>(x, shape, mask, id),
            out,
            req,
            id,
        ),
        ReduceKind::Mean => finish(
            op,
            &reduce_acc::<T, T, AddC, _>(x, shape, mask, id),
            out,
            req,
            |a| a / n,
        ),
        ReduceKind::Prod => finish(
            op,
            &reduce_acc::<T, T, MulC, _>(x, shape, mask, id),
            out,
            req,
            id,
        ),
        ReduceKind::Max => finish(
            op,
            &reduce_acc::<T, T, MaxC, _>(x, shape, mask, id),
            out,
            req,
            id,
        ),
        ReduceKind::Min => finish(
            op,
            &reduce_acc::<T, T, MinC, _>(x, shape, mask, id),
            out,
            req,
            id,
        ),
        ReduceKind::NanSum => {
            let acc =
                reduce_acc::<T, T, AddC, _>(
                    x,
                    shape,
                    mask,
                    |v: T| if Float::is_nan(v) { z } else { v },
                );
            finish(op, &acc, out, req, id)
        }
        ReduceKind::NanProd => {
            let acc =
                reduce_acc::<T, T, MulC, _>(
                    x,
                    shape,
                    mask,
                    |v: T| if Float::is_nan(v) { one } else { v },
                );
            finish(op, &acc, out, req, id)
        }
        ReduceKind::Norm1 => finish(
            op,
            &reduce_acc::<T, T, AddC, _>(x, shape, mask, |v: T| v.abs()),
            out,
            req,
            id,
        ),
        ReduceKind::Norm2 => {
            // Squares summed in double precision: no overflow for float32 data.
            let acc = reduce_acc::<T, f64, AddC, _>(x, shape, mask, |v: T| {
                let d = crate::dtype::Element::to_f64(v);
                d * d
            });
            finish(op, &acc, out, req, |a: f64| a.sqrt())
        }
    }
}

/// Visits the elements of `x` reduced into each output element, in row-major order of the
/// reduced axes; `f(output index, element)`.
fn for_each_reduced<T: Copy>(x: &[T], shape: &[usize], mask: &[bool], mut f: impl FnMut(usize, T)) {
    let nd = shape.len();
    let mut strides = vec![1usize; nd];
    for i in (0..nd.saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    let kept: Vec<usize> = (0..nd).filter(|&i| !mask[i]).collect();
    let red: Vec<usize> = (0..nd).filter(|&i| mask[i]).collect();
    let out_len: usize = kept.iter().map(|&i| shape[i]).product();
    let red_len: usize = red.iter().map(|&i| shape[i]).product();
    let mut kidx = vec![0usize; kept.len()];
    for o in 0..out_len {
        let base: usize = kept
            .iter()
            .zip(&kidx)
            .map(|(&ax, &i)| i * strides[ax])
            .sum();
        let mut ridx = vec![0usize; red.len()];
        for _ in 0..red_len {
            let off: usize = red.iter().zip(&ridx).map(|(&ax, &i)| i * strides[ax]).sum();
            f(o, x[base + off]);
            for k in (0..red.len()).rev() {
                ridx[k] += 1;
                if ridx[k] < shape[red[k]] {
                    break;
                }
                ridx[k] = 0;
            }
        }
        for k in (0..kept.len()).rev() {
            kidx[k] += 1;
            if kidx[k] < shape[kept[k]] {
                break;
            }
            kidx[k] = 0;
        }
    }
}

/// The 2-norm of integer data exactly as MXNet computes it: the scaled sum of squares in
/// the integer type itself (so `norm([3, 4])` is 4), folded in row-major order.
fn int_norm2<T: Num>(x: &[T], shape: &[usize], mask: &[bool], out_len: usize) -> Vec<T> {
    let mut state = vec![(T::ZERO, T::ZERO); out_len];
    if x.is_empty() {
        return vec![T::ZERO; out_len];
    }
    for_each_reduced(x, shape, mask, |o, v| {
        if v != T::ZERO {
            let (sos, scale) = &mut state[o];
            let a = if v < T::ZERO { v.neg() } else { v };
            if *scale < a {
                let q = scale.div(a);
                *sos = T::ONE.add(sos.mul(q).mul(q));
                *scale = a;
            } else {
                let q = a.div(*scale);
                *sos = sos.add(q.mul(q));
            }
        }
    });
    state
        .into_iter()
        .map(|(sos, scale)| T::from_f64(scale.to_f64() * sos.to_f64().sqrt()))
        .collect()
}

/// A reduction of integer data, accumulated in the data's own type with wrap-around.
#[allow(clippy::too_many_arguments)]
fn reduce_int<T: Num>(
    op: &str,
    kind: ReduceKind,
    x: &[T],
    shape: &[usize],
    mask: &[bool],
    count: usize,
    out: &TBlob,
    req: OpReq,
) -> Result<()> {
    let id = |a: T| a;
    match kind {
        ReduceKind::Sum | ReduceKind::NanSum => finish(
            op,
            &reduce_acc::<T, T, AddC, _>(x, shape, mask, id),
            out,
            req,
            id,
        ),
        ReduceKind::Mean => {
            let n = T::from_f64(count as f64);
            finish(
                op,
                &reduce_acc::<T, T, AddC, _>(x, shape, mask, id),
                out,
                req,
                |a: T| a.div(n),
            )
        }
        ReduceKind::Prod | ReduceKind::NanProd => finish(
            op,
            &reduce_acc::<T, T, MulC, _>(x, shape, mask, id),
            out,
            req,
            id,
        ),
        ReduceKind::Max => finish(
            op,
            &reduce_acc::<T, T, MaxC, _>(x, shape, mask, id),
            out,
            req,
            id,
        ),
        ReduceKind::Min => finish(
            op,
            &reduce_acc::<T, T, MinC, _>(x, shape, mask, id),
            out,
            req,
            id,
        ),
        ReduceKind::Norm1 => {
            let abs = |v: T| if v < T::ZERO { v.neg() } else { v };
            finish(
                op,
                &reduce_acc::<T, T, AddC, _>(x, shape, mask, abs),
                out,
                req,
                id,
            )
        }
        ReduceKind::Norm2 => finish(op, &int_norm2(x, shape, mask, out.size()), out, req, id),
    }
}

/// Widens float16 data to float32, in parallel for large arrays.
fn widen(x: &[f16]) -> Vec<f32> {
    use half::slice::HalfFloatSliceExt;
    let mut w = vec![0f32; x.len()];
    if x.len() < PAR_MIN || !pool_shares_work() {
        x.convert_to_f32_slice(&mut w);
    } else {
        w.par_chunks_mut(PAR_MIN / 4)
            .zip(x.par_chunks(PAR_MIN / 4))
            .for_each(|(w, x)| x.convert_to_f32_slice(w));
    }
    w
}

/// Reduces `x` over the axes in `mask` into `out` (whose dtype may differ from the input's).
pub fn reduce(
    op: &str,
    kind: ReduceKind,
    x: &TBlob,
    mask: &[bool],
    out: &TBlob,
    req: OpReq,
) -> Result<()> {
    if req == OpReq::Null {
        return Ok(());
    }
    let shape = &x.shape;
    let count: usize = shape
        .iter()
        .zip(mask)
        .filter(|(_, &m)| m)
        .map(|(&d, _)| d)
        .product();
    match x.dtype {
        DType::F32 => reduce_float(op, kind, x.slice::<f32>(), shape, mask, count, out, req),
        DType::F64 => reduce_float(op, kind, x.slice::<f64>(), shape, mask, count, out, req),
        DType::F16 => {
            let w = widen(x.slice::<f16>());
            reduce_float(op, kind, &w, shape, mask, count, out, req)
        }
        other => {
            dispatch_num!(op, other, T => reduce_int(op, kind, x.slice::<T>(), shape, mask, count, out, req))
        }
    }
}

impl CpuKernel for Reduce {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let x = &io.inputs[0];
        let (mask, _) = reduce_axes(
            self.name,
            &x.shape,
            self.axis.as_deref(),
            self.keepdims,
            self.exclude,
        )?;
        reduce(self.name, self.kind, x, &mask, &io.outputs[0], io.req[0])
    }
}

#[inline(always)]
fn better<T: Num, const MAX: bool>(v: T, best: T) -> bool {
    !best.is_nan() && (v.is_nan() || if MAX { v > best } else { v < best })
}

/// Index of the first element equal to `b` (or of the first NaN if `b` is NaN).
fn first_eq<T: Num>(x: &[T], b: T) -> usize {
    let nan = b.is_nan();
    let hit = |v: T| if nan { v.is_nan() } else { v == b };
    for (ci, c) in x.chunks(LANES).enumerate() {
        if c.iter().fold(false, |a, &v| a | hit(v)) {
            return ci * LANES + c.iter().position(|&v| hit(v)).unwrap_or(0);
        }
    }
    0
}

/// Index of the first extreme (or first NaN) of a non-empty contiguous run, with its value:
/// the extreme of each block is found with the vectorised fold, then the first block that
/// holds the overall extreme is searched.
fn arg_scan<T: Num, const MAX: bool>(x: &[T]) -> (T, usize) {
    let mut best = (x[0], 0);
    for (bi, block) in x.chunks(BLOCK).enumerate() {
        let m = if MAX {
            fold::<T, T, MaxC>(block, &|v| v)
        } else {
            fold::<T, T, MinC>(block, &|v| v)
        };
        if m.is_nan() {
            return (m, bi * BLOCK + first_eq(block, m));
        }
        if bi == 0 || better::<T, MAX>(m, best.0) {
            best = (m, bi * BLOCK);
        }
    }
    let start = best.1;
    let end = (start + BLOCK).min(x.len());
    (best.0, start + first_eq(&x[start..end], best.0))
}

/// A row index in the column kernel: `u32` where it fits, so that it packs into vector
/// lanes beside 32-bit values.
trait Idx: Copy + Send + Sync + 'static {
    fn of(i: usize) -> Self;
    fn get(self) -> usize;
}

impl Idx for u32 {
    #[inline(always)]
    fn of(i: usize) -> Self {
        i as u32
    }
    #[inline(always)]
    fn get(self) -> usize {
        self as usize
    }
}

impl Idx for usize {
    #[inline(always)]
    fn of(i: usize) -> Self {
        i
    }
    #[inline(always)]
    fn get(self) -> usize {
        self
    }
}

/// Running extremes down the `r` rows (of `inner` elements) of `xs`, for the columns
/// `c0..c0 + n`: branch-free so that it vectorises, and double-buffered (each row reads one
/// pair of buffers and writes the other) because a select stored back to where it was read
/// becomes a masked store, slow on some CPUs. Returns the buffer index holding the result.
#[inline(always)]
fn arg_cols_impl<T: Num, I: Idx, const MAX: bool>(
    xs: &[T],
    r: usize,
    inner: usize,
    c0: usize,
    best: [&mut [T]; 2],
    idx: [&mut [I]; 2],
) -> usize {
    let [b0, b1] = best;
    let [i0, i1] = idx;
    let n = b0.len();
    b0.copy_from_slice(&xs[c0..c0 + n]);
    i0.fill(I::of(0));
    let (mut cur, mut next, mut icur, mut inext) = (b0, b1, i0, i1);
    for rr in 1..r {
        let row = &xs[rr * inner + c0..][..n];
        let ri = I::of(rr);
        let lanes = next
            .iter_mut()
            .zip(cur.iter())
            .zip(inext.iter_mut())
            .zip(icur.iter());
        for ((((nb, &b), ni), &i), &v) in lanes.zip(row) {
            let ahead = if MAX { v > b } else { v < b };
            let t = !b.is_nan() & (v.is_nan() | ahead);
            *nb = if t { v } else { b };
            *ni = if t { ri } else { i };
        }
        std::mem::swap(&mut cur, &mut next);
        std::mem::swap(&mut icur, &mut inext);
    }
    (r - 1) % 2
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn arg_cols_avx2<T: Num, I: Idx, const MAX: bool>(
    xs: &[T],
    r: usize,
    inner: usize,
    c0: usize,
    best: [&mut [T]; 2],
    idx: [&mut [I]; 2],
) -> usize {
    arg_cols_impl::<T, I, MAX>(xs, r, inner, c0, best, idx)
}

/// Indices of the extremes down the rows of `xs` for the columns `c0..c0 + out.len()`.
fn arg_cols<T: Num, I: Idx, const MAX: bool>(
    xs: &[T],
    r: usize,
    inner: usize,
    c0: usize,
    out: &mut [usize],
) {
    let w = out.len().min(COLS);
    let (mut b0, mut b1) = (vec![T::ZERO; w], vec![T::ZERO; w]);
    let (mut i0, mut i1) = (vec![I::of(0); w], vec![I::of(0); w]);
    for (cb, oi) in out.chunks_mut(COLS).enumerate() {
        let n = oi.len();
        let best = [&mut b0[..n], &mut b1[..n]];
        let idx = [&mut i0[..n], &mut i1[..n]];
        let c = c0 + cb * COLS;
        #[cfg(target_arch = "x86_64")]
        let which = if avx2() {
            // SAFETY: the CPU supports AVX2, checked at run time just above.
            unsafe { arg_cols_avx2::<T, I, MAX>(xs, r, inner, c, best, idx) }
        } else {
            arg_cols_impl::<T, I, MAX>(xs, r, inner, c, best, idx)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let which = arg_cols_impl::<T, I, MAX>(xs, r, inner, c, best, idx);
        let res = if which == 0 { &i0[..n] } else { &i1[..n] };
        for (o, &v) in oi.iter_mut().zip(res) {
            *o = v.get();
        }
    }
}

/// Indices of the extremes along the middle axis of `x` viewed as (outer, r, inner).
fn arg_kernel<T: Num, const MAX: bool>(
    x: &[T],
    outer: usize,
    r: usize,
    inner: usize,
) -> Vec<usize> {
    let threads = rayon::current_num_threads().max(1);
    let big = x.len() >= PAR_MIN && threads > 1;
    let mut idx = vec![0usize; outer * inner];
    if inner == 1 {
        let row = |o: usize| arg_scan::<T, MAX>(&x[o * r..(o + 1) * r]).1;
        if !big {
            idx.iter_mut().enumerate().for_each(|(o, s)| *s = row(o));
        } else if outer >= 2 * threads {
            idx.par_iter_mut()
                .enumerate()
                .for_each(|(o, s)| *s = row(o));
        } else {
            let c = r.div_ceil(threads * 4).max(BLOCK);
            for (o, s) in idx.iter_mut().enumerate() {
                let parts: Vec<(T, usize)> = x[o * r..(o + 1) * r]
                    .par_chunks(c)
                    .enumerate()
                    .map(|(ci, p)| {
                        let (b, j) = arg_scan::<T, MAX>(p);
                        (b, ci * c + j)
                    })
                    .collect();
                let mut best = parts[0];
                for &p in &parts[1..] {
                    if better::<T, MAX>(p.0, best.0) {
                        best = p;
                    }
                }
                *s = best.1;
            }
        }
        return idx;
    }
    let slab = r * inner;
    let cols = |o: usize, c0: usize, out: &mut [usize]| {
        let xs = &x[o * slab..(o + 1) * slab];
        if r <= u32::MAX as usize {
            arg_cols::<T, u32, MAX>(xs, r, inner, c0, out);
        } else {
            arg_cols::<T, usize, MAX>(xs, r, inner, c0, out);
        }
    };
    if !big {
        idx.chunks_mut(inner)
            .enumerate()
            .for_each(|(o, s)| cols(o, 0, s));
    } else if outer >= 2 * threads {
        idx.par_chunks_mut(inner)
            .enumerate()
            .for_each(|(o, s)| cols(o, 0, s));
    } else {
        let cc = inner.div_ceil(threads * 2).next_multiple_of(LANES * 4);
        for (o, s) in idx.chunks_mut(inner).enumerate() {
            s.par_chunks_mut(cc)
                .enumerate()
                .for_each(|(ci, s)| cols(o, ci * cc, s));
        }
    }
    idx
}

impl CpuKernel for ArgReduce {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let (x, out) = (&io.inputs[0], &io.outputs[0]);
        if io.req[0] == OpReq::Null || out.size() == 0 {
            return Ok(());
        }
        let shape = &x.shape;
        let (outer, r, inner) = match self.axis(shape)? {
            None => (1, x.size(), 1),
            Some(a) => (
                shape[..a].iter().product(),
                shape[a],
                shape[a + 1..].iter().product(),
            ),
        };
        if r == 0 {
            return Err(Error::Value(format!(
                "cannot take the index of an extreme over an empty axis, got shape {}",
                fmt_shape(shape)
            )));
        }
        let max = self.max;
        dispatch_num!(self.name, x.dtype, T => {
            let xs = x.slice::<T>();
            let idx = if max {
                arg_kernel::<T, true>(xs, outer, r, inner)
            } else {
                arg_kernel::<T, false>(xs, outer, r, inner)
            };
            let to_t = |i: usize| <T as crate::dtype::Element>::from_f64(i as f64);
            map1(&idx, out.slice_mut::<T>(), io.req[0], to_t);
        });
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Reduce>(k);
    cpu::add::<ArgReduce>(k);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cpu::testing::iota;
    use crate::op::testutil::{array, f32a, f32s, run, try_run, values};

    /// Reference: sum over `mask` of a float array by plain index arithmetic.
    fn naive_sum(x: &[f64], shape: &[usize], mask: &[bool]) -> Vec<f64> {
        let out_len: usize = shape
            .iter()
            .zip(mask)
            .filter(|(_, &m)| !m)
            .map(|(&d, _)| d)
            .product();
        let mut out = vec![0.0; out_len];
        for_each_reduced(x, shape, mask, |o, v| out[o] += v);
        out
    }

    #[test]
    fn shapes_follow_mxnet() {
        let s = [2usize, 3, 4];
        let shape =
            |axis: Option<&[i64]>, k, e| reduce_axes("sum", &s, axis, k, e).unwrap().1.to_vec();
        assert_eq!(shape(None, false, false), vec![1]);
        assert_eq!(shape(None, true, false), vec![1, 1, 1]);
        assert_eq!(shape(Some(&[]), false, true), vec![1]);
        assert_eq!(shape(Some(&[1]), false, false), vec![2, 4]);
        assert_eq!(shape(Some(&[-1]), true, false), vec![2, 3, 1]);
        assert_eq!(shape(Some(&[0, 2]), false, true), vec![2, 4]);
        assert_eq!(shape(Some(&[1]), true, true), vec![1, 3, 1]);
        assert_eq!(shape(Some(&[0, 1, 2]), false, false), vec![1]);
        assert_eq!(shape(Some(&[0, 1, 2]), false, true), vec![2, 3, 4]);
        let e = reduce_axes("sum", &s, Some(&[3]), false, false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "sum: axis 3 is out of range for an array of shape (2, 3, 4)"
        );
        assert!(matches!(e, Error::Index(_)));
        let e = reduce_axes("sum", &s, Some(&[0, -3]), false, false).unwrap_err();
        assert!(
            e.to_string().contains("axis 0 appears more than once"),
            "{e}"
        );
        assert!(reduce_axes("sum", &s, Some(&[-4]), false, false).is_err());
    }

    #[test]
    fn sum_values_and_axes() {
        let x = iota(&[2, 3, 4]);
        let r = &run("sum", &[], std::slice::from_ref(&x))[0];
        assert_eq!(r.shape(), &[1]);
        assert_eq!(f32s(r), vec![276.]);
        let r = &run("sum", &[("axis", "1")], std::slice::from_ref(&x))[0];
        assert_eq!(r.shape(), &[2, 4]);
        assert_eq!(f32s(r), vec![12., 15., 18., 21., 48., 51., 54., 57.]);
        let r = &run(
            "sum_axis",
            &[("axis", "(0, 2)"), ("exclude", "True")],
            std::slice::from_ref(&x),
        )[0];
        assert_eq!(f32s(r), vec![12., 15., 18., 21., 48., 51., 54., 57.]);
        let r = &run(
            "sum",
            &[("axis", "-1"), ("keepdims", "1")],
            std::slice::from_ref(&x),
        )[0];
        assert_eq!(r.shape(), &[2, 3, 1]);
        assert_eq!(f32s(r), vec![6., 22., 38., 54., 70., 86.]);
        let r = &run("sum", &[("axis", "(0, 2)")], std::slice::from_ref(&x))[0];
        assert_eq!(f32s(r), vec![60., 92., 124.]);
        let r = &run(
            "sum",
            &[("axis", "1"), ("exclude", "True"), ("keepdims", "True")],
            std::slice::from_ref(&x),
        )[0];
        assert_eq!(r.shape(), &[1, 3, 1]);
        assert_eq!(f32s(r), vec![60., 92., 124.]);
        assert!(try_run("sum", &[("axis", "3")], std::slice::from_ref(&x)).is_err());
        assert!(try_run("sum", &[("axes", "1")], &[x]).is_err());
    }

    #[test]
    fn other_reductions() {
        let x = iota(&[2, 3, 4]);
        assert_eq!(
            f32s(
                &run(
                    "mean",
                    &[("axis", "1"), ("exclude", "1")],
                    std::slice::from_ref(&x)
                )[0]
            ),
            vec![7.5, 11.5, 15.5]
        );
        assert_eq!(
            f32s(&run("max_axis", &[("axis", "2")], std::slice::from_ref(&x))[0]),
            vec![3., 7., 11., 15., 19., 23.]
        );
        assert_eq!(
            f32s(&run("min", &[("axis", "(0, 2)")], std::slice::from_ref(&x))[0]),
            vec![0., 4., 8.]
        );
        let p = f32a(&[2, 2], &[1., 2., 3., 4.]);
        assert_eq!(
            f32s(&run("prod", &[("axis", "0")], std::slice::from_ref(&p))[0]),
            vec![3., 8.]
        );
        assert_eq!(f32s(&run("prod", &[], &[p])[0]), vec![24.]);
        let n = f32a(&[3], &[1., f32::NAN, 3.]);
        assert!(f32s(&run("max", &[], std::slice::from_ref(&n))[0])[0].is_nan());
        assert!(f32s(&run("min", &[], std::slice::from_ref(&n))[0])[0].is_nan());
        assert!(f32s(&run("sum", &[], std::slice::from_ref(&n))[0])[0].is_nan());
        assert_eq!(
            f32s(&run("nansum", &[], std::slice::from_ref(&n))[0]),
            vec![4.]
        );
        assert_eq!(f32s(&run("nanprod", &[], &[n])[0]), vec![3.]);
    }

    #[test]
    fn integer_and_half_reductions() {
        let u = array::<u8>(&[3], &[200, 200, 200]);
        assert_eq!(
            values::<u8>(&run("sum", &[], std::slice::from_ref(&u))[0]),
            vec![88]
        );
        assert_eq!(values::<u8>(&run("mean", &[], &[u])[0]), vec![29]);
        let i = array::<i32>(&[2, 3], &[1, -2, 3, 4, 5, -6]);
        assert_eq!(
            values::<i32>(&run("sum", &[("axis", "1")], std::slice::from_ref(&i))[0]),
            vec![2, 3]
        );
        assert_eq!(
            values::<i32>(&run("max", &[("axis", "0")], std::slice::from_ref(&i))[0]),
            vec![4, 5, 3]
        );
        assert_eq!(
            values::<i32>(&run("norm", &[("ord", "1")], std::slice::from_ref(&i))[0]),
            vec![21]
        );
        assert_eq!(values::<i32>(&run("mean", &[], &[i])[0]), vec![0]);
        // MXNet's integer 2-norm: scaled, with integer division.
        assert_eq!(
            values::<i32>(&run("norm", &[], &[array::<i32>(&[2], &[3, 4])])[0]),
            vec![4]
        );
        let q = array::<i32>(&[2, 3], &[2, 3, 3, 3, 3, 2]);
        assert_eq!(
            values::<i32>(&run("norm", &[("axis", "1")], &[q])[0]),
            vec![4, 4]
        );
        let big = array::<i64>(&[19], &(1..20).collect::<Vec<i64>>());
        assert_eq!(values::<i64>(&run("norm", &[], &[big])[0]), vec![19]);
        // float16 sums accumulate in float32: 5000 ones are exact.
        let h = array::<f16>(&[5000], &vec![f16::ONE; 5000]);
        let s = &run("sum", &[], &[h])[0];
        assert_eq!(s.dtype(), DType::F16);
        assert_eq!(values::<f16>(s), vec![f16::from_f32(5000.0)]);
        let b = array::<bool>(&[2], &[true, false]);
        assert!(try_run("sum", &[], &[b]).is_err());
    }

    #[test]
    fn norm_shapes_and_values() {
        let x = iota(&[2, 3, 4]);
        let r = &run("norm", &[], std::slice::from_ref(&x))[0];
        assert_eq!(r.shape(), &[1]);
        assert!((f32s(r)[0] - 65.75713).abs() < 1e-4);
        let r = &run("norm", &[("keepdims", "True")], std::slice::from_ref(&x))[0];
        assert_eq!(r.shape(), &[1, 1, 1]);
        let r = &run(
            "norm",
            &[("ord", "1"), ("axis", "2"), ("keepdims", "True")],
            std::slice::from_ref(&x),
        )[0];
        assert_eq!(r.shape(), &[2, 3, 1]);
        assert_eq!(f32s(r), vec![6., 22., 38., 54., 70., 86.]);
        let r = &run("norm", &[("axis", "(0, 1)")], std::slice::from_ref(&x))[0];
        assert_eq!(r.shape(), &[4]);
        assert!((f32s(r)[0] - 29.664795).abs() < 1e-4);
        let big = f32a(&[2], &[1e30, 1e30]);
        assert!((f32s(&run("norm", &[], &[big])[0])[0] / 1.4142135e30 - 1.0).abs() < 1e-6);
        let r = &run(
            "norm",
            &[("out_dtype", "float64")],
            &[f32a(&[2], &[3., 4.])],
        )[0];
        assert_eq!(values::<f64>(r), vec![5.0]);
        assert!(try_run("norm", &[("ord", "3")], std::slice::from_ref(&x)).is_err());
        assert!(try_run("norm", &[("exclude", "True")], &[x]).is_err());
    }

    #[test]
    fn argmax_argmin() {
        let x = iota(&[2, 3, 4]);
        let r = &run("argmax", &[("axis", "1")], std::slice::from_ref(&x))[0];
        assert_eq!(r.shape(), &[2, 4]);
        assert_eq!(f32s(r), vec![2.; 8]);
        let r = &run("argmax", &[], std::slice::from_ref(&x))[0];
        assert_eq!((r.shape(), f32s(r)), (&[1usize][..], vec![23.]));
        let r = &run("argmax", &[("keepdims", "True")], std::slice::from_ref(&x))[0];
        assert_eq!(r.shape(), &[1, 1, 1]);
        let r = &run(
            "argmin",
            &[("axis", "-1"), ("keepdims", "True")],
            std::slice::from_ref(&x),
        )[0];
        assert_eq!(r.shape(), &[2, 3, 1]);
        assert_eq!(f32s(r), vec![0.; 6]);
        let r = &run("argmax_channel", &[], std::slice::from_ref(&x))[0];
        assert_eq!(r.shape(), &[2, 4]);
        let t = f32a(&[4], &[1., 5., 5., 2.]);
        assert_eq!(f32s(&run("argmax", &[("axis", "0")], &[t])[0]), vec![1.]);
        let n = f32a(&[4], &[1., f32::NAN, 0., f32::NAN]);
        assert_eq!(f32s(&run("argmin", &[("axis", "0")], &[n])[0]), vec![1.]);
        let c = f32a(&[2, 3], &[1., 3., 2., 9., 1., 1.]);
        assert_eq!(
            f32s(&run("argmax_channel", &[], std::slice::from_ref(&c))[0]),
            vec![1., 0.]
        );
        assert_eq!(
            f32s(&run("argmin", &[("axis", "0")], &[c])[0]),
            vec![0., 1., 1.]
        );
        let i = array::<i32>(&[3], &[3, -2, 5]);
        assert_eq!(
            values::<i32>(&run("argmin", &[("axis", "0")], &[i])[0]),
            vec![1]
        );
        assert!(try_run("argmax", &[("axis", "3")], std::slice::from_ref(&x)).is_err());
        assert!(try_run("argmax", &[("axis", "(0, 1)")], &[x]).is_err());
        assert!(try_run("argmax_channel", &[], &[f32a(&[3], &[1., 2., 3.])]).is_err());
        let e = f32a(&[0, 3], &[]);
        assert!(try_run("argmax", &[("axis", "0")], std::slice::from_ref(&e)).is_err());
        assert_eq!(run("argmax", &[("axis", "1")], &[e])[0].shape(), &[0]);
    }

    #[test]
    fn arg_columns_with_nan_and_ties() {
        let nan = f32::NAN;
        #[rustfmt::skip]
        let m = f32a(&[4, 3], &[
            1., nan, 2.,
            5., 0., 2.,
            nan, 7., 9.,
            5., nan, 9.,
        ]);
        let r = f32s(&run("argmax", &[("axis", "0")], std::slice::from_ref(&m))[0]);
        assert_eq!(r, vec![2., 0., 2.]);
        let r = f32s(&run("argmin", &[("axis", "0")], std::slice::from_ref(&m))[0]);
        assert_eq!(r, vec![2., 0., 0.]);
        let i = array::<i8>(&[3, 2], &[-1, 4, 6, 4, 6, -9]);
        assert_eq!(
            values::<i8>(&run("argmax", &[("axis", "0")], std::slice::from_ref(&i))[0]),
            vec![1, 0]
        );
        assert_eq!(
            values::<i8>(&run("argmin", &[("axis", "0")], &[i])[0]),
            vec![0, 2]
        );
    }

    #[test]
    fn empty_inputs() {
        let e = f32a(&[0, 3], &[]);
        assert_eq!(
            f32s(&run("sum", &[("axis", "0")], std::slice::from_ref(&e))[0]),
            vec![0.; 3]
        );
        assert_eq!(
            run("sum", &[("axis", "1")], std::slice::from_ref(&e))[0].shape(),
            &[0]
        );
        assert_eq!(
            f32s(&run("prod", &[("axis", "0")], std::slice::from_ref(&e))[0]),
            vec![1.; 3]
        );
        assert!(f32s(&run("mean", &[("axis", "0")], &[e])[0])[0].is_nan());
    }

    /// Every axis combination of a few shapes, small and large, against a naive sum.
    #[test]
    fn all_axis_patterns_match_naive() {
        for shape in [
            vec![3usize, 1, 5, 2],
            vec![7, 6, 5, 4],
            vec![64, 3, 700],
            vec![2, 300, 2, 300],
            vec![300_000],
            vec![2, 3, 30_000],
        ] {
            let n: usize = shape.iter().product();
            let data: Vec<f64> = (0..n).map(|i| ((i * 7919) % 1013) as f64 - 500.0).collect();
            let x = array::<f64>(&shape, &data);
            let nd = shape.len();
            for bits in 0..(1u32 << nd) {
                let mask: Vec<bool> = (0..nd).map(|i| bits & (1 << i) != 0).collect();
                let axes: Vec<String> = (0..nd)
                    .filter(|&i| mask[i])
                    .map(|i| i.to_string())
                    .collect();
                if axes.is_empty() {
                    continue;
                }
                let attr = format!("({},)", axes.join(","));
                let want = naive_sum(&data, &shape, &mask);
                let got =
                    values::<f64>(&run("sum", &[("axis", &attr)], std::slice::from_ref(&x))[0]);
                assert_eq!(got, want, "shape {shape:?} axes {attr}");
                let got =
                    values::<f64>(&run("max", &[("axis", &attr)], std::slice::from_ref(&x))[0]);
                let mut want = vec![f64::NEG_INFINITY; got.len()];
                for_each_reduced(&data, &shape, &mask, |o, v| want[o] = want[o].max(v));
                assert_eq!(got, want, "max: shape {shape:?} axes {attr}");
            }
        }
    }

    #[test]
    fn large_argmax_and_float32_sum() {
        let n = 1 << 20;
        let mut data: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 1e-3).collect();
        data[777_777] = 5.0;
        let x = f32a(&[n], &data);
        assert_eq!(
            f32s(&run("argmax", &[("axis", "0")], std::slice::from_ref(&x))[0]),
            vec![777_777.]
        );
        let want: f64 = data.iter().map(|&v| v as f64).sum();
        let got = f32s(&run("sum", &[], std::slice::from_ref(&x))[0])[0] as f64;
        assert!((got - want).abs() / want < 1e-6, "{got} vs {want}");
        let m = x.reshape_view(&[4, 1 << 18]).unwrap();
        let got = f32s(&run("argmax", &[("axis", "0")], std::slice::from_ref(&m))[0]);
        assert_eq!(got[777_777 - 2 * (1 << 18)], 2.0);
        let got = f32s(&run("argmax", &[("axis", "1")], &[m])[0]);
        let want: Vec<f32> = data
            .chunks(1 << 18)
            .map(|row| {
                let mut at = 0;
                for (j, &v) in row.iter().enumerate() {
                    if v > row[at] {
                        at = j;
                    }
                }
                at as f32
            })
            .collect();
        assert_eq!(got, want);
    }

    /// Reduction throughput on a 4096×4096 float32 array; run with
    /// `cargo test --release --lib reduce::tests::reduce_throughput -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn reduce_throughput() {
        let n = 4096;
        let data: Vec<f32> = (0..n * n).map(|i| (i % 1000) as f32 * 1e-3).collect();
        let shape = [n, n];
        for (name, mask) in [
            ("all", [true, true]),
            ("axis 0", [true, false]),
            ("axis 1", [false, true]),
        ] {
            let mut best = f64::INFINITY;
            for _ in 0..10 {
                let t = std::time::Instant::now();
                let acc = reduce_acc::<f32, f32, AddC, _>(&data, &shape, &mask, |v| v);
                best = best.min(t.elapsed().as_secs_f64());
                assert!(!acc.is_empty());
            }
            println!(
                "sum {name}: {:.2} ms, {:.1} GB/s",
                best * 1e3,
                (n * n * 4) as f64 / best / 1e9
            );
        }
        let mut best = f64::INFINITY;
        for _ in 0..10 {
            let t = std::time::Instant::now();
            let idx = arg_kernel::<f32, true>(&data, 1, n, n);
            best = best.min(t.elapsed().as_secs_f64());
            assert!(!idx.is_empty());
        }
        println!(
            "argmax axis 0: {:.2} ms, {:.1} GB/s",
            best * 1e3,
            (n * n * 4) as f64 / best / 1e9
        );
        for max in [false, true] {
            let mut best = f64::INFINITY;
            for _ in 0..10 {
                let t = std::time::Instant::now();
                let acc = if max {
                    reduce_acc::<f32, f32, MaxC, _>(&data, &shape, &[false, true], |v| v)
                } else {
                    arg_kernel::<f32, true>(&data, n, n, 1)
                        .into_iter()
                        .map(|i| i as f32)
                        .collect()
                };
                best = best.min(t.elapsed().as_secs_f64());
                assert!(!acc.is_empty());
            }
            let name = if max { "max axis 1" } else { "argmax axis 1" };
            println!(
                "{name}: {:.2} ms, {:.1} GB/s",
                best * 1e3,
                (n * n * 4) as f64 / best / 1e9
            );
        }
    }
}
