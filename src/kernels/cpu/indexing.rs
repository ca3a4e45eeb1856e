//! CPU kernels of the indexing operators: `take`, `pick`, `one_hot`, `where`, `Cast`,
//! `gather_nd`, `scatter_nd`.

use super::map::{pool_shares_work, PAR_MIN};
use super::num::Num;
use crate::dispatch_dtype;
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::indexing::{Cast, GatherNd, IndexMode, OneHot, Pick, ScatterNd, Take, Where};
use crate::op::{OpContext, OpReq};
use crate::shape::{fmt_shape, norm_axis, size_of};
use half::f16;
use rayon::prelude::*;

// ---------------------------------------------------------------------------------------
// Element helpers shared with the sorting operators.

/// An element type an output can be accumulated into (`req = Add`); bool adds as "or".
pub(crate) trait Elem: Element {
    /// `self + o` with the type's arithmetic.
    fn acc(self, o: Self) -> Self;
}

impl<T: Num> Elem for T {
    #[inline(always)]
    fn acc(self, o: Self) -> Self {
        self.add(o)
    }
}

impl Elem for bool {
    #[inline(always)]
    fn acc(self, o: Self) -> Self {
        self | o
    }
}

/// Writes `v` to `o`, or adds it when `add`.
#[inline(always)]
pub(crate) fn store<T: Elem>(o: &mut T, v: T, add: bool) {
    *o = if add { o.acc(v) } else { v };
}

/// One element seen through its kind, the common ground of every conversion.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scalar {
    Int(i64),
    Float(f64),
    Bool(bool),
}

/// C's `(int32_t)` of a double as x86 computes it: truncation, and `INT32_MIN` for NaN and
/// values out of range.
#[inline(always)]
pub(crate) fn trunc_i32(f: f64) -> i32 {
    if f.is_nan() || f <= -2_147_483_649.0 || f >= 2_147_483_648.0 {
        i32::MIN
    } else {
        f as i32
    }
}

/// C's `(int64_t)` of a double as x86 computes it: truncation, and `INT64_MIN` for NaN and
/// values out of range.
#[inline(always)]
pub(crate) fn trunc_i64(f: f64) -> i64 {
    if f.is_nan() || !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&f) {
        i64::MIN
    } else {
        f as i64
    }
}

/// Element conversions with MXNet's (C's) semantics: floats truncate toward zero, integers
/// wrap, anything non-zero is `true`.
pub(crate) trait CastElem: Elem {
    fn to_scalar(self) -> Scalar;
    fn from_scalar(s: Scalar) -> Self;
}

macro_rules! cast_small_int {
    ($t:ty) => {
        impl CastElem for $t {
            #[inline(always)]
            fn to_scalar(self) -> Scalar {
                Scalar::Int(self as i64)
            }
            #[inline(always)]
            fn from_scalar(s: Scalar) -> Self {
                match s {
                    Scalar::Int(i) => i as $t,
                    Scalar::Float(f) => trunc_i32(f) as $t,
                    Scalar::Bool(b) => b as $t,
                }
            }
        }
    };
}

cast_small_int!(u8);

cast_small_int!(i8);

cast_small_int!(i32);

impl CastElem for i64 {
    #[inline(always)]
    fn to_scalar(self) -> Scalar {
        Scalar::Int(self)
    }
    #[inline(always)]
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::Int(i) => i,
            Scalar::Float(f) => trunc_i64(f),
            Scalar::Bool(b) => b as i64,
        }
    }
}

impl CastElem for f32 {
    #[inline(always)]
    fn to_scalar(self) -> Scalar {
        Scalar::Float(self as f64)
    }
    #[inline(always)]
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::Int(i) => i as f32,
            Scalar::Float(f) => f as f32,
            Scalar::Bool(b) => b as u8 as f32,
        }
    }
}

impl CastElem for f64 {
    #[inline(always)]
    fn to_scalar(self) -> Scalar {
        Scalar::Float(self)
    }
    #[inline(always)]
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
            Scalar::Bool(b) => b as u8 as f64,
        }
    }
}

impl CastElem for f16 {
    #[inline(always)]
    fn to_scalar(self) -> Scalar {
        Scalar::Float(self.to_f64())
    }
    #[inline(always)]
    fn from_scalar(s: Scalar) -> Self {
        // MXNet's half type converts through float.
        match s {
            Scalar::Int(i) => f16::from_f32(i as f32),
            Scalar::Float(f) => f16::from_f32(f as f32),
            Scalar::Bool(b) => f16::from_f32(b as u8 as f32),
        }
    }
}

impl CastElem for bool {
    #[inline(always)]
    fn to_scalar(self) -> Scalar {
        Scalar::Bool(self)
    }
    #[inline(always)]
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::Int(i) => i != 0,
            Scalar::Float(f) => f != 0.0,
            Scalar::Bool(b) => b,
        }
    }
}

/// An index value as MXNet reads it from an index array of any type (floats truncate).
#[inline(always)]
pub(crate) fn to_index<T: CastElem>(v: T) -> i64 {
    i64::from_scalar(v.to_scalar())
}

/// The values of an index array of any dtype, as integers.
pub(crate) fn read_indices(blob: &TBlob) -> Vec<i64> {
    dispatch_dtype!(blob.dtype, T => blob.slice::<T>().iter().map(|&v| to_index(v)).collect())
}

/// Writes rows of `row_len` elements, `f(row, out_row)`, in parallel when the output is big.
pub(crate) fn for_rows<T: Send>(
    out: &mut [T],
    row_len: usize,
    f: impl Fn(usize, &mut [T]) + Sync + Send,
) {
    if row_len == 0 || out.is_empty() {
        return;
    }
    if out.len() < PAR_MIN || !pool_shares_work() {
        out.chunks_mut(row_len)
            .enumerate()
            .for_each(|(r, o)| f(r, o));
    } else {
        let rows_per_task = (PAR_MIN / 4 / row_len).max(1);
        out.par_chunks_mut(rows_per_task * row_len)
            .enumerate()
            .for_each(|(t, chunk)| {
                for (i, o) in chunk.chunks_mut(row_len).enumerate() {
                    f(t * rows_per_task + i, o);
                }
            });
    }
}

/// Copies (or adds) `src` into `dst`.
#[inline(always)]
fn put_row<T: Elem>(dst: &mut [T], src: &[T], add: bool) {
    if add {
        dst.iter_mut().zip(src).for_each(|(o, &v)| *o = o.acc(v));
    } else {
        dst.copy_from_slice(src);
    }
}

/// Maps an index into `[0, n)` as `mode` says; `None` if it is out of range in raise mode.
#[inline(always)]
pub(crate) fn fix_index(i: i64, n: usize, mode: IndexMode) -> Option<usize> {
    let n = n as i64;
    match mode {
        IndexMode::Clip => Some(i.clamp(0, n - 1) as usize),
        IndexMode::Wrap => Some(i.rem_euclid(n) as usize),
        IndexMode::Raise => (0..n).contains(&i).then_some(i as usize),
    }
}

impl CpuKernel for Take {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let (a, out) = (&io.inputs[0], &io.outputs[0]);
        let axis = norm_axis(self.axis, a.shape.len(), "take")?;
        let n = a.shape[axis];
        let inner = size_of(&a.shape[axis + 1..]);
        let raw = read_indices(&io.inputs[1]);
        if !raw.is_empty() && n == 0 {
            return Err(Error::Index(format!(
                "take: cannot take from axis {axis} of size 0 (data shape {})",
                fmt_shape(&a.shape)
            )));
        }
        let idx = raw
            .iter()
            .map(|&i| fix_index(i, n, self.mode))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| {
                Error::Index(format!(
                    "take: indices out of bounds for axis {axis} of size {n} with mode='raise'"
                ))
            })?;
        let m = idx.len();
        let add = io.req[0] == OpReq::Add;
        dispatch_dtype!(a.dtype, T => {
            let src = a.slice::<T>();
            for_rows(out.slice_mut::<T>(), inner, |r, o| {
                let (oi, j) = (r / m, r % m);
                let s = (oi * n + idx[j]) * inner;
                put_row(o, &src[s..s + inner], add);
            });
        });
        Ok(())
    }
}

impl CpuKernel for Pick {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let (data, out) = (&io.inputs[0], &io.outputs[0]);
        let axis = norm_axis(self.axis, data.shape.len(), "pick")?;
        let n = data.shape[axis];
        let inner = size_of(&data.shape[axis + 1..]);
        let idx = read_indices(&io.inputs[1]);
        if n == 0 && !idx.is_empty() {
            return Err(Error::Index(
                "pick: cannot pick along an axis of size 0".into(),
            ));
        }
        let add = io.req[0] == OpReq::Add;
        let mode = self.mode;
        dispatch_dtype!(data.dtype, T => {
            let src = data.slice::<T>();
            for_rows(out.slice_mut::<T>(), 1, |r, o| {
                let (oi, ii) = (r / inner, r % inner);
                let j = fix_index(idx[r], n, mode).unwrap_or(0);
                store(&mut o[0], src[(oi * n + j) * inner + ii], add);
            });
        });
        Ok(())
    }
}

fn one_hot_kernel<T: CastElem>(
    idx: &[i64],
    depth: usize,
    on: f64,
    off: f64,
    out: &mut [T],
    add: bool,
) {
    let (on, off) = (
        T::from_scalar(Scalar::Float(on)),
        T::from_scalar(Scalar::Float(off)),
    );
    for_rows(out, depth, |r, o| {
        let hot = usize::try_from(idx[r]).ok().filter(|&j| j < depth);
        if add {
            for (c, v) in o.iter_mut().enumerate() {
                *v = v.acc(if hot == Some(c) { on } else { off });
            }
        } else {
            o.fill(off);
            if let Some(j) = hot {
                o[j] = on;
            }
        }
    });
}

impl CpuKernel for OneHot {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let idx = read_indices(&io.inputs[0]);
        let add = io.req[0] == OpReq::Add;
        let out = &io.outputs[0];
        dispatch_dtype!(out.dtype, T => one_hot_kernel::<T>(&idx, self.depth, self.on, self.off, out.slice_mut(), add));
        Ok(())
    }
}

pub(crate) fn truth(blob: &TBlob) -> Vec<bool> {
    dispatch_dtype!(blob.dtype, T => blob.slice::<T>().iter().map(|&v| bool::from_scalar(v.to_scalar())).collect())
}

impl CpuKernel for Where {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let cond = truth(&io.inputs[0]);
        let (x, y, out) = (&io.inputs[1], &io.inputs[2], &io.outputs[0]);
        let n = out.size();
        // Each condition element covers a row of x when the condition is 1-d per row.
        let row = if cond.len() == n {
            1
        } else {
            n / cond.len().max(1)
        };
        let add = io.req[0] == OpReq::Add;
        dispatch_dtype!(x.dtype, T => {
            let (xs, ys) = (x.slice::<T>(), y.slice::<T>());
            for_rows(out.slice_mut::<T>(), row, |r, o| {
                let (src, s) = (if cond[r] { xs } else { ys }, r * row);
                put_row(o, &src[s..s + row], add);
            });
        });
        Ok(())
    }
}

fn cast_kernel<S: CastElem, D: CastElem>(src: &[S], out: &mut [D], add: bool) {
    for_rows(out, PAR_MIN / 8, |r, o| {
        let s = &src[r * (PAR_MIN / 8)..];
        for (d, &v) in o.iter_mut().zip(s) {
            store(d, D::from_scalar(v.to_scalar()), add);
        }
    });
}

/// Converts `src` into `out` (same number of elements) with MXNet's `Cast` semantics.
pub(crate) fn cast_blob(src: &TBlob, out: &TBlob, req: OpReq) {
    if req == OpReq::Null {
        return;
    }
    if req == OpReq::WriteInplace && src.ptr() == out.ptr() && src.dtype == out.dtype {
        return;
    }
    let add = req == OpReq::Add;
    dispatch_dtype!(src.dtype, S => dispatch_dtype!(out.dtype, D => cast_kernel::<S, D>(src.slice(), out.slice_mut(), add)))
}

impl CpuKernel for Cast {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        cast_blob(&io.inputs[0], &io.outputs[0], io.req[0]);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// gather_nd / scatter_nd

/// Strides of the first `m` axes of `shape` in units of `inner`-element blocks, plus the
/// block size.
pub(crate) fn nd_layout(shape: &[usize], m: usize) -> (Vec<usize>, usize) {
    let inner = size_of(&shape[m..]);
    let mut strides = vec![0usize; m];
    let mut s = 1;
    for i in (0..m).rev() {
        strides[i] = s;
        s *= shape[i];
    }
    (strides, inner)
}

/// Block offsets addressed by the columns of `idx` (shape `(m, count)`), with negative
/// indices counting from the end; an index error if any is out of range (checked on the
/// value as given, so a fractional index past the last is out of range, as in MXNet).
pub(crate) fn nd_offsets(
    op: &str,
    idx: &TBlob,
    m: usize,
    dims: &[usize],
    strides: &[usize],
) -> Result<Vec<usize>> {
    let vals: Vec<f64> =
        dispatch_dtype!(idx.dtype, T => idx.slice::<T>().iter().map(|v| v.to_f64()).collect());
    let count = vals.len().checked_div(m).unwrap_or(0);
    (0..count)
        .map(|c| {
            let mut off = 0;
            for ax in 0..m {
                let v = vals[ax * count + c];
                let d = dims[ax] as f64;
                if v.is_nan() || v > d - 1.0 || v < -d {
                    return Err(Error::Index(format!(
                        "{op}: index {v} is out of bounds for axis {ax} with size {d}"
                    )));
                }
                let j = if v < 0.0 { v + d } else { v };
                off += j as usize * strides[ax];
            }
            Ok(off)
        })
        .collect()
}

impl CpuKernel for GatherNd {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let (data, out) = (&io.inputs[0], &io.outputs[0]);
        let m = io.inputs[1].shape[0];
        let (strides, inner) = nd_layout(&data.shape, m);
        let offs = nd_offsets("gather_nd", &io.inputs[1], m, &data.shape, &strides)?;
        let add = io.req[0] == OpReq::Add;
        dispatch_dtype!(data.dtype, T => {
            let src = data.slice::<T>();
            for_rows(out.slice_mut::<T>(), inner, |r, o| {
                let s = offs[r] * inner;
                put_row(o, &src[s..s + inner], add);
            });
        });
        Ok(())
    }
}

impl CpuKernel for ScatterNd {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let (data, out) = (&io.inputs[0], &io.outputs[0]);
        let m = io.inputs[1].shape[0];
        let (strides, inner) = nd_layout(&out.shape, m);
        let offs = nd_offsets("scatter_nd", &io.inputs[1], m, &out.shape, &strides)?;
        let add = io.req[0] == OpReq::Add;
        dispatch_dtype!(data.dtype, T => {
            let (src, dst) = (data.slice::<T>(), out.slice_mut::<T>());
            if !add {
                dst.fill(T::default());
            }
            for (r, &off) in offs.iter().enumerate() {
                let d = &mut dst[off * inner..(off + 1) * inner];
                put_row(d, &src[r * inner..(r + 1) * inner], add);
            }
        });
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Take>(k);
    cpu::add::<Pick>(k);
    cpu::add::<OneHot>(k);
    cpu::add::<Where>(k);
    cpu::add::<Cast>(k);
    cpu::add::<GatherNd>(k);
    cpu::add::<ScatterNd>(k);
}

#[cfg(test)]
mod tests {
    use crate::op::testutil::{array, f32a, f32s, run, try_run, values};
    use half::f16;

    fn grid() -> crate::ndarray::NDArray {
        f32a(&[3, 4], &(0..12).map(|v| v as f32).collect::<Vec<_>>())
    }

    #[test]
    fn take_modes() {
        let a = grid();
        let o = &run("take", &[], &[a.clone(), f32a(&[4], &[0., 2., 5., -1.])])[0];
        assert_eq!(o.shape(), &[4, 4]);
        assert_eq!(&f32s(o)[..8], &[0., 1., 2., 3., 8., 9., 10., 11.]);
        assert_eq!(&f32s(o)[8..], &[8., 9., 10., 11., 0., 1., 2., 3.]);
        let o = &run(
            "take",
            &[("axis", "1"), ("mode", "wrap")],
            &[a.clone(), f32a(&[2, 2], &[0., 2., 5., -1.])],
        )[0];
        assert_eq!(o.shape(), &[3, 2, 2]);
        assert_eq!(&f32s(o)[..4], &[0., 2., 1., 3.]);
        // Float indices truncate toward zero.
        let o = &run("take", &[], &[a.clone(), f32a(&[3], &[1.7, 2.2, -0.5])])[0];
        assert_eq!(f32s(o)[..1], [4.]);
        assert_eq!(f32s(o)[8..9], [0.]);
        // Integer indices, integer data.
        let ai = array::<i32>(&[3, 4], &(0..12).collect::<Vec<_>>());
        let o = &run(
            "take",
            &[("axis", "-1")],
            &[ai, array::<i64>(&[2], &[1, 2])],
        )[0];
        assert_eq!(values::<i32>(o), vec![1, 2, 5, 6, 9, 10]);
        // Raise mode checks bounds (negative indices are out of bounds too).
        let r = try_run(
            "take",
            &[("mode", "raise")],
            &[a.clone(), f32a(&[2], &[0., 7.])],
        )
        .and_then(|o| o[0].wait_to_read().map(|_| o));
        assert!(r.is_err());
        let o = &run(
            "take",
            &[("mode", "raise"), ("axis", "1")],
            &[a.clone(), f32a(&[2], &[3., 0.])],
        )[0];
        assert_eq!(f32s(o), vec![3., 0., 7., 4., 11., 8.]);
        assert!(try_run("take", &[("axis", "2")], &[a.clone(), f32a(&[1], &[0.])]).is_err());
        assert!(try_run("take", &[("mode", "foo")], &[a, f32a(&[1], &[0.])]).is_err());
    }

    #[test]
    fn pick_rows() {
        let a = grid();
        let o = &run("pick", &[], &[a.clone(), f32a(&[3], &[0., 1., 3.])])[0];
        assert_eq!(o.shape(), &[3]);
        assert_eq!(f32s(o), vec![0., 5., 11.]);
        let o = &run(
            "pick",
            &[("axis", "0"), ("keepdims", "True")],
            &[a.clone(), f32a(&[4], &[0., 1., 2., 2.])],
        )[0];
        assert_eq!(o.shape(), &[1, 4]);
        assert_eq!(f32s(o), vec![0., 5., 10., 11.]);
        let o = &run(
            "pick",
            &[("axis", "1"), ("mode", "wrap")],
            &[a.clone(), f32a(&[3, 1], &[-1., 5., 2.])],
        )[0];
        assert_eq!(f32s(o), vec![3., 5., 10.]);
        let o = &run(
            "pick",
            &[("axis", "1")],
            &[a.clone(), f32a(&[3], &[-1., 9., 2.])],
        )[0];
        assert_eq!(f32s(o), vec![0., 7., 10.]);
        assert!(try_run(
            "pick",
            &[("axis", "1")],
            &[a.clone(), f32a(&[2], &[0., 1.])]
        )
        .is_err());
        assert!(try_run(
            "pick",
            &[("axis", "None")],
            &[a.clone(), f32a(&[3], &[0., 1., 2.])]
        )
        .is_err());
        assert!(try_run(
            "pick",
            &[("mode", "raise")],
            &[a, f32a(&[3], &[0., 1., 2.])]
        )
        .is_err());
    }

    #[test]
    fn one_hot_encodes() {
        let o = &run(
            "one_hot",
            &[("depth", "4")],
            &[f32a(&[4], &[0., 2., 5., -1.])],
        )[0];
        assert_eq!(o.shape(), &[4, 4]);
        let v = f32s(o);
        assert_eq!(v.iter().sum::<f32>(), 2.);
        assert_eq!((v[0], v[6]), (1., 1.));
        let o = &run(
            "one_hot",
            &[
                ("depth", "3"),
                ("on_value", "5"),
                ("off_value", "-1"),
                ("dtype", "int32"),
            ],
            &[array::<i32>(&[2], &[1, 2])],
        )[0];
        assert_eq!(values::<i32>(o), vec![-1, 5, -1, -1, -1, 5]);
        assert!(try_run("one_hot", &[], &[f32a(&[1], &[0.])]).is_err());
        assert!(try_run("one_hot", &[("depth", "-1")], &[f32a(&[1], &[0.])]).is_err());
        assert!(try_run(
            "one_hot",
            &[("depth", "2"), ("dtype", "bool")],
            &[f32a(&[1], &[0.])]
        )
        .is_err());
    }

    #[test]
    fn where_selects() {
        let x = f32a(&[2, 2], &[1., 2., 3., 4.]);
        let y = f32a(&[2, 2], &[-1., -2., -3., -4.]);
        let c = f32a(&[2, 2], &[1., 0., f32::NAN, 0.]);
        assert_eq!(
            f32s(&run("where", &[], &[c, x.clone(), y.clone()])[0]),
            vec![1., -2., 3., -4.]
        );
        let c = array::<bool>(&[2], &[false, true]);
        assert_eq!(
            f32s(&run("where", &[], &[c, x.clone(), y.clone()])[0]),
            vec![-1., -2., 3., 4.]
        );
        assert!(try_run(
            "where",
            &[],
            &[f32a(&[3], &[1., 0., 1.]), x.clone(), y.clone()]
        )
        .is_err());
        assert!(try_run("where", &[], &[f32a(&[1, 2], &[1., 0.]), x.clone(), y]).is_err());
        let yi = array::<i32>(&[2, 2], &[0, 0, 0, 0]);
        assert!(try_run("where", &[], &[f32a(&[2], &[1., 0.]), x, yi]).is_err());
    }

    #[test]
    fn cast_like_c() {
        let x = f32a(
            &[7],
            &[-2.7, -0.5, 300.7, -300.2, f32::NAN, f32::INFINITY, 1e10],
        );
        let o = &run("Cast", &[("dtype", "int32")], std::slice::from_ref(&x))[0];
        assert_eq!(
            values::<i32>(o),
            vec![-2, 0, 300, -300, i32::MIN, i32::MIN, i32::MIN]
        );
        let o = &run("cast", &[("dtype", "uint8")], std::slice::from_ref(&x))[0];
        assert_eq!(values::<u8>(o), vec![254, 0, 44, 212, 0, 0, 0]);
        let o = &run("cast", &[("dtype", "int8")], std::slice::from_ref(&x))[0];
        assert_eq!(values::<i8>(o), vec![-2, 0, 44, -44, 0, 0, 0]);
        let o = &run("cast", &[("dtype", "int64")], std::slice::from_ref(&x))[0];
        assert_eq!(values::<i64>(o)[6], 10_000_000_000);
        let o = &run("cast", &[("dtype", "bool")], std::slice::from_ref(&x))[0];
        assert_eq!(values::<bool>(o), vec![true; 7]);
        let o = &run("cast", &[("dtype", "float16")], std::slice::from_ref(&x))[0];
        assert_eq!(values::<f16>(o)[2], f16::from_f32(300.75));
        let i = array::<i32>(&[4], &[300, -1, 255, 128]);
        assert_eq!(
            values::<i8>(&run("cast", &[("dtype", "int8")], std::slice::from_ref(&i))[0]),
            vec![44, -1, -1, -128]
        );
        let big = array::<i64>(&[2], &[(1 << 53) + 1, (1 << 40) + 5]);
        assert_eq!(
            values::<f64>(&run("cast", &[("dtype", "float64")], std::slice::from_ref(&big))[0])[0],
            (1u64 << 53) as f64
        );
        assert_eq!(
            values::<i32>(&run("cast", &[("dtype", "int32")], &[big])[0])[1],
            5
        );
        let b = array::<bool>(&[2], &[true, false]);
        assert_eq!(
            f32s(&run("cast", &[("dtype", "float32")], &[b])[0]),
            vec![1., 0.]
        );
        assert!(try_run("Cast", &[], std::slice::from_ref(&i)).is_err());
        assert!(try_run("Cast", &[("dtype", "foo")], &[i]).is_err());
    }

    #[test]
    fn gather_scatter_nd() {
        let a = grid();
        let idx = f32a(&[2, 3], &[0., 1., 2., 3., -1., 0.]);
        let o = &run("gather_nd", &[], &[a.clone(), idx.clone()])[0];
        assert_eq!(o.shape(), &[3]);
        assert_eq!(f32s(o), vec![3., 7., 8.]);
        let rows = &run("gather_nd", &[], &[a.clone(), f32a(&[1, 2], &[2., 0.])])[0];
        assert_eq!(rows.shape(), &[2, 4]);
        assert_eq!(f32s(rows), vec![8., 9., 10., 11., 0., 1., 2., 3.]);
        let s = &run(
            "scatter_nd",
            &[("shape", "(3, 4)")],
            &[f32a(&[3], &[1., 2., 3.]), idx],
        )[0];
        let v = f32s(s);
        assert_eq!((v[3], v[7], v[8], v.iter().sum::<f32>()), (1., 2., 3., 6.));
        assert!(try_run("gather_nd", &[], &[a.clone(), f32a(&[3, 1], &[0., 0., 0.])]).is_err());
        let r = try_run("gather_nd", &[], &[a, f32a(&[2, 1], &[5., 0.])])
            .and_then(|o| o[0].wait_to_read().map(|_| o));
        assert!(r.is_err());
    }
}
