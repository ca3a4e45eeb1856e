//! Indexing operators: `take`, `pick`, `one_hot`, `where`, `Cast`, `gather_nd`, `scatter_nd`.

use super::grad::indexing::{
    CastBackward, GatherNdBackward, PickBackward, TakeBackward, WhereBackward,
};
use super::map::PAR_MIN;
use super::num::Num;
use crate::dispatch_dtype;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::kernels::cpu::{self, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::{
    check_inputs, shape_err, Attrs, Grad, Gradient, OpContext, OpDef, OpRef, OpReq, Operator,
    ParamList, Params, Registry,
};
use crate::shape::{fmt_shape, norm_axis, size_of, Shape};
use half::f16;
use rayon::prelude::*;
use std::sync::Arc;

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
    if out.len() < PAR_MIN {
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

fn shape_dims(op: &str, key: &str, dims: &[i64]) -> Result<Shape> {
    dims.iter()
        .map(|&d| {
            usize::try_from(d)
                .map_err(|_| Error::Value(format!("{op}: {key} {dims:?} has a negative dimension")))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// take

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum IndexMode {
    Clip,
    Wrap,
    Raise,
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

fn mode_param(p: &Params, allowed: &[&'static str]) -> Result<IndexMode> {
    Ok(match p.choice("mode", "clip", allowed)? {
        "wrap" => IndexMode::Wrap,
        "raise" => IndexMode::Raise,
        _ => IndexMode::Clip,
    })
}

struct Take {
    axis: i64,
    mode: IndexMode,
}

impl Operator for Take {
    fn name(&self) -> &'static str {
        "take"
    }

    fn gradient(&self) -> Grad {
        let op = Arc::new(TakeBackward {
            axis: self.axis,
            mode: self.mode,
        });
        Grad::Op(Gradient {
            op,
            ograds: vec![0],
            inputs: vec![1, 0],
            outputs: vec![],
            grad_of: vec![0],
        })
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("take", inputs, 2)?;
        let (a, idx) = (&inputs[0], &inputs[1]);
        if a.is_empty() {
            return Err(shape_err(
                "take",
                "the data must have at least one dimension",
                a,
            ));
        }
        let axis = norm_axis(self.axis, a.len(), "take")?;
        let mut out = Shape::new();
        out.extend_from_slice(&a[..axis]);
        out.extend_from_slice(idx);
        out.extend_from_slice(&a[axis + 1..]);
        Ok(vec![out])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![inputs[0]])
    }
}

impl CpuKernel for Take {
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
        let (a, out) = (&inputs[0], &outputs[0]);
        let axis = norm_axis(self.axis, a.shape.len(), "take")?;
        let n = a.shape[axis];
        let inner = size_of(&a.shape[axis + 1..]);
        let raw = read_indices(&inputs[1]);
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
        let add = req[0] == OpReq::Add;
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

fn create_take(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::new("take", attrs, &["axis", "mode"])?;
    Ok(Arc::new(Take {
        axis: p.int("axis", 0)?,
        mode: mode_param(&p, &["clip", "raise", "wrap"])?,
    }))
}

// ---------------------------------------------------------------------------------------
// pick

struct Pick {
    axis: i64,
    keepdims: bool,
    mode: IndexMode,
}

impl Pick {
    fn out_shape(&self, data: &[usize]) -> Result<(usize, Shape)> {
        let axis = norm_axis(self.axis, data.len(), "pick")?;
        let mut out = Shape::from_slice(data);
        if self.keepdims || data.len() == 1 {
            // A 1-d input keeps one element, as MXNet 1.x's reductions do.
            out[axis] = 1;
        } else {
            out.remove(axis);
        }
        Ok((axis, out))
    }
}

impl Operator for Pick {
    fn name(&self) -> &'static str {
        "pick"
    }

    fn gradient(&self) -> Grad {
        let op = Arc::new(PickBackward {
            axis: self.axis,
            mode: self.mode,
        });
        Grad::Op(Gradient {
            op,
            ograds: vec![0],
            inputs: vec![0, 1],
            outputs: vec![],
            grad_of: vec![0],
        })
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("pick", inputs, 2)?;
        let (data, index) = (&inputs[0], &inputs[1]);
        if data.is_empty() {
            return Err(shape_err(
                "pick",
                "the data must have at least one dimension",
                data,
            ));
        }
        let (axis, out) = self.out_shape(data)?;
        let mut kept = Shape::from_slice(data);
        kept[axis] = 1;
        let mut removed = Shape::from_slice(data);
        removed.remove(axis);
        if index.as_slice() != kept.as_slice() && index.as_slice() != removed.as_slice() {
            return Err(Error::Value(format!(
                "pick: index shape {} does not match data shape {} with axis {}: expected {} or {}",
                fmt_shape(index),
                fmt_shape(data),
                self.axis,
                fmt_shape(&removed),
                fmt_shape(&kept)
            )));
        }
        Ok(vec![out])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![inputs[0]])
    }
}

impl CpuKernel for Pick {
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
        let (data, out) = (&inputs[0], &outputs[0]);
        let axis = norm_axis(self.axis, data.shape.len(), "pick")?;
        let n = data.shape[axis];
        let inner = size_of(&data.shape[axis + 1..]);
        let idx = read_indices(&inputs[1]);
        if n == 0 && !idx.is_empty() {
            return Err(Error::Index(
                "pick: cannot pick along an axis of size 0".into(),
            ));
        }
        let add = req[0] == OpReq::Add;
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

fn create_pick(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::new("pick", attrs, &["axis", "keepdims", "mode"])?;
    let axis = match p.raw("axis") {
        None => -1,
        Some(_) => p.opt_int("axis")?.ok_or_else(|| {
            Error::Value("pick: axis=None is not supported by pick; an axis must be given".into())
        })?,
    };
    Ok(Arc::new(Pick {
        axis,
        keepdims: p.bool("keepdims", false)?,
        mode: mode_param(&p, &["clip", "wrap"])?,
    }))
}

// ---------------------------------------------------------------------------------------
// one_hot

struct OneHot {
    depth: usize,
    on: f64,
    off: f64,
    dtype: DType,
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

impl Operator for OneHot {
    fn name(&self) -> &'static str {
        "one_hot"
    }

    fn gradient(&self) -> Grad {
        Grad::Zero
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("one_hot", inputs, 1)?;
        let mut out = inputs[0].clone();
        out.push(self.depth);
        Ok(vec![out])
    }

    fn infer_type(&self, _: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![self.dtype])
    }
}

impl CpuKernel for OneHot {
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
        let idx = read_indices(&inputs[0]);
        let add = req[0] == OpReq::Add;
        let out = &outputs[0];
        dispatch_dtype!(out.dtype, T => one_hot_kernel::<T>(&idx, self.depth, self.on, self.off, out.slice_mut(), add));
        Ok(())
    }
}

fn create_one_hot(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::new(
        "one_hot",
        attrs,
        &["depth", "on_value", "off_value", "dtype"],
    )?;
    let depth = p.int_required("depth")?;
    let depth = usize::try_from(depth).map_err(|_| {
        Error::Value(format!(
            "one_hot: depth must be a non-negative integer, got {depth}"
        ))
    })?;
    let dtype = p.opt_dtype("dtype")?.unwrap_or(DType::F32);
    if dtype == DType::Bool {
        return Err(Error::Type(
            "one_hot: dtype bool is not supported; use a numeric dtype".into(),
        ));
    }
    Ok(Arc::new(OneHot {
        depth,
        on: p.float("on_value", 1.0)?,
        off: p.float("off_value", 0.0)?,
        dtype,
    }))
}

// ---------------------------------------------------------------------------------------
// where

struct Where;

pub(crate) fn truth(blob: &TBlob) -> Vec<bool> {
    dispatch_dtype!(blob.dtype, T => blob.slice::<T>().iter().map(|&v| bool::from_scalar(v.to_scalar())).collect())
}

impl Operator for Where {
    fn name(&self) -> &'static str {
        "where"
    }

    fn infer_shape_partial(
        &self,
        inputs: &mut [Option<Shape>],
        outputs: &mut [Option<Shape>],
    ) -> Result<()> {
        // x, y and the output share one shape; a condition of that rank takes it too.
        let (cond, xy) = inputs.split_at_mut(1);
        crate::op::infer::same_shape("where", xy, outputs)?;
        if let (Some(c), Some(x)) = (&cond[0], &xy[0]) {
            if c.len() == x.len() {
                crate::op::assign_shape("where", "condition", &mut cond[0], x)?;
            }
        }
        Ok(())
    }

    fn gradient(&self) -> Grad {
        Grad::Op(Gradient {
            op: Arc::new(WhereBackward),
            ograds: vec![0],
            inputs: vec![0],
            outputs: vec![],
            grad_of: vec![1, 2],
        })
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("where", inputs, 3)?;
        let (c, x, y) = (&inputs[0], &inputs[1], &inputs[2]);
        if x != y {
            return Err(Error::Value(format!(
                "where: x and y must have the same shape, got {} and {}",
                fmt_shape(x),
                fmt_shape(y)
            )));
        }
        let rows_ok = c.len() == 1 && !x.is_empty() && c[0] == x[0];
        if c != x && !rows_ok {
            return Err(Error::Value(format!(
                "where: condition must have the shape of x {} or be 1-d with x.shape[0] elements, got {}",
                fmt_shape(x),
                fmt_shape(c)
            )));
        }
        Ok(vec![x.clone()])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        if inputs.len() != 3 {
            return Err(Error::Value(format!(
                "where: expected 3 input(s), got {}",
                inputs.len()
            )));
        }
        if inputs[1] != inputs[2] {
            return Err(Error::Type(format!(
                "where: x and y must have the same dtype, got {} and {}",
                inputs[1], inputs[2]
            )));
        }
        Ok(vec![inputs[1]])
    }
}

impl CpuKernel for Where {
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
        let cond = truth(&inputs[0]);
        let (x, y, out) = (&inputs[1], &inputs[2], &outputs[0]);
        let n = out.size();
        // Each condition element covers a row of x when the condition is 1-d per row.
        let row = if cond.len() == n {
            1
        } else {
            n / cond.len().max(1)
        };
        let add = req[0] == OpReq::Add;
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

// ---------------------------------------------------------------------------------------
// Cast

struct Cast {
    dtype: DType,
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

impl Operator for Cast {
    fn name(&self) -> &'static str {
        "Cast"
    }

    fn infer_shape_partial(
        &self,
        inputs: &mut [Option<Shape>],
        outputs: &mut [Option<Shape>],
    ) -> Result<()> {
        crate::op::infer::same_shape("Cast", inputs, outputs)
    }

    fn gradient(&self) -> Grad {
        Gradient::simple(Arc::new(CastBackward), &[0], &[], 1)
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("Cast", inputs, 1)?;
        Ok(vec![inputs[0].clone()])
    }

    fn infer_type(&self, _: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![self.dtype])
    }
}

impl CpuKernel for Cast {
    fn forward(
        &self,
        _: &mut OpContext,
        inputs: &[TBlob],
        outputs: &[TBlob],
        req: &[OpReq],
    ) -> Result<()> {
        cast_blob(&inputs[0], &outputs[0], req[0]);
        Ok(())
    }
}

fn create_cast(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::new("Cast", attrs, &["dtype"])?;
    p.required("dtype")?;
    let dtype = p
        .opt_dtype("dtype")?
        .ok_or_else(|| Error::Value("Cast: required argument 'dtype' is missing".into()))?;
    Ok(Arc::new(Cast { dtype }))
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

struct GatherNd;

impl Operator for GatherNd {
    fn name(&self) -> &'static str {
        "gather_nd"
    }

    fn gradient(&self) -> Grad {
        Grad::Op(Gradient {
            op: Arc::new(GatherNdBackward),
            ograds: vec![0],
            inputs: vec![1, 0],
            outputs: vec![],
            grad_of: vec![0],
        })
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("gather_nd", inputs, 2)?;
        let (data, idx) = (&inputs[0], &inputs[1]);
        if idx.is_empty() || idx[0] == 0 || idx[0] > data.len() {
            return Err(Error::Value(format!(
                "gather_nd: indices shape {} must be (M, ...) with 0 < M <= data.ndim ({}) ",
                fmt_shape(idx),
                data.len()
            )));
        }
        let mut out = Shape::from_slice(&idx[1..]);
        out.extend_from_slice(&data[idx[0]..]);
        Ok(vec![out])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![inputs[0]])
    }
}

impl CpuKernel for GatherNd {
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
        let (data, out) = (&inputs[0], &outputs[0]);
        let m = inputs[1].shape[0];
        let (strides, inner) = nd_layout(&data.shape, m);
        let offs = nd_offsets("gather_nd", &inputs[1], m, &data.shape, &strides)?;
        let add = req[0] == OpReq::Add;
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

struct ScatterNd {
    shape: Shape,
}

impl Operator for ScatterNd {
    fn name(&self) -> &'static str {
        "scatter_nd"
    }

    fn gradient(&self) -> Grad {
        Grad::Op(Gradient {
            op: Arc::new(GatherNd),
            ograds: vec![0],
            inputs: vec![1],
            outputs: vec![],
            grad_of: vec![0],
        })
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("scatter_nd", inputs, 2)?;
        let (data, idx) = (&inputs[0], &inputs[1]);
        let bad = idx.is_empty() || idx[0] == 0 || idx[0] > self.shape.len() || {
            let mut want = Shape::from_slice(&idx[1..]);
            want.extend_from_slice(&self.shape[idx[0]..]);
            want != *data
        };
        if bad {
            return Err(Error::Value(format!(
                "scatter_nd: data shape {} and indices shape {} do not fit output shape {}: data must be indices.shape[1:] + shape[indices.shape[0]:]",
                fmt_shape(data),
                fmt_shape(idx),
                fmt_shape(&self.shape)
            )));
        }
        Ok(vec![self.shape.clone()])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![inputs[0]])
    }
}

impl CpuKernel for ScatterNd {
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
        let (data, out) = (&inputs[0], &outputs[0]);
        let m = inputs[1].shape[0];
        let (strides, inner) = nd_layout(&out.shape, m);
        let offs = nd_offsets("scatter_nd", &inputs[1], m, &out.shape, &strides)?;
        let add = req[0] == OpReq::Add;
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

// ---------------------------------------------------------------------------------------

/// Registers the indexing operators.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "take",
        aliases: &[],
        inputs: &["a", "indices"],
        variadic: false,
        params: ParamList::Names(&["axis", "mode"]),
        doc: "Takes elements from an array along an axis at the given indices.",
        create: Box::new(create_take),
    });
    r.add(OpDef {
        name: "pick",
        aliases: &["choose_element_0index"],
        inputs: &["data", "index"],
        variadic: false,
        params: ParamList::Names(&["axis", "keepdims", "mode"]),
        doc: "Picks one element per position along an axis, at the given indices.",
        create: Box::new(create_pick),
    });
    r.add(OpDef {
        name: "one_hot",
        aliases: &[],
        inputs: &["indices"],
        variadic: false,
        params: ParamList::Names(&["depth", "on_value", "off_value", "dtype"]),
        doc: "One-hot encoding of integer indices, in a new last axis of size depth.",
        create: Box::new(create_one_hot),
    });
    r.add(OpDef {
        name: "where",
        aliases: &[],
        inputs: &["condition", "x", "y"],
        variadic: false,
        params: ParamList::Names(&[]),
        doc: "Elements of x where condition is non-zero, else of y.",
        create: Box::new(|attrs| {
            Params::new("where", attrs, &[])?;
            Ok(Arc::new(Where) as OpRef)
        }),
    });
    r.add(OpDef {
        name: "Cast",
        aliases: &["cast"],
        inputs: &["data"],
        variadic: false,
        params: ParamList::Names(&["dtype"]),
        doc: "Converts every element to dtype (floats truncate toward zero).",
        create: Box::new(create_cast),
    });
    r.add(OpDef {
        name: "gather_nd",
        aliases: &[],
        inputs: &["data", "indices"],
        variadic: false,
        params: ParamList::Names(&[]),
        doc: "Gathers slices of data at the N-d indices given by the first axis of indices.",
        create: Box::new(|attrs| {
            Params::new("gather_nd", attrs, &[])?;
            Ok(Arc::new(GatherNd) as OpRef)
        }),
    });
    r.add(OpDef {
        name: "scatter_nd",
        aliases: &[],
        inputs: &["data", "indices"],
        variadic: false,
        params: ParamList::Names(&["shape"]),
        doc: "Scatters data into a zero array of the given shape at the N-d indices.",
        create: Box::new(|attrs| {
            let p = Params::new("scatter_nd", attrs, &["shape"])?;
            let shape = shape_dims("scatter_nd", "shape", &p.tuple_required("shape")?)?;
            Ok(Arc::new(ScatterNd { shape }) as OpRef)
        }),
    });
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
