//! GPU kernels of the reductions (`reduce.cu`): `sum`, `mean`, `prod`, `max`, `min`,
//! `nansum`, `nanprod`, `norm`, `argmax`, `argmin`, `argmax_channel`, the backward of the
//! reductions, and the strided gather of the view operators (`broadcast_to`,
//! `broadcast_like`, `broadcast_axis`, `transpose`, `slice`, `tile`, ...) with their
//! backward: the inverse gather of a permutation, a sum over the axes a view repeats
//! along, or a scatter for a view that reads no element twice.
//!
//! A reduction launches one kernel: blocks of [`BLOCK`] threads take tiles of `cols`
//! outputs, the `BLOCK / cols` lanes of each output folding its reduced elements and
//! combining their results in a fixed tree in shared memory, so the result is the same
//! on every run. [`tile_cols`] picks `cols`: whole blocks for one long reduced run,
//! narrower tiles where outputs are contiguous in the input or the reduced length is short.
//! A long reduction into few outputs is split into segments ([`segments_for`]): a first
//! launch folds each segment into scratch memory, a second combines them in order.

use super::launch::{launch_n, suffix, Args, BLOCK};
use crate::cuda::runtime;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::cpu::Blobs;
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::grad::reduce::ReduceBackward;
use crate::op::grad::view::GatherBackward;
use crate::op::reduce::{reduce_axes, ArgReduce, Reduce, ReduceKind};
use crate::op::transform::view::View;
use crate::op::transform::Gather;
use crate::op::{OpContext, OpReq};
use crate::shape::{fmt_shape, Shape};
use crate::storage;

const MODULE: &str = "reduce";
/// Most merged axes a launch describes (`RSMX_REDUCE_DIMS`).
const DIMS: usize = 8;
/// Columns of a tile whose outputs lie next to each other in the input: one 128-byte
/// line of float32 per row of lanes.
const CONTIGUOUS_COLS: usize = 32;
/// The longest reduced run one thread folds alone.
const SHORT_RUN: usize = 16;
/// Below this many tiles a long reduction is split into segments (two launches), so that
/// more blocks share it.
const FEW_TILES: usize = 256;
/// Reduced elements of a segment (but at most `MAX_SEGMENTS` of them per output).
const SEGMENT: usize = 8192;
const MAX_SEGMENTS: usize = 1024;
/// Most partial results of a split reduction.
const MAX_PARTIALS: usize = 1 << 20;

/// `struct rsmx_reduce_desc`: the kept and the reduced axes with their input strides.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq)]
struct ReduceDesc {
    kept_ndim: i32,
    red_ndim: i32,
    kept_shape: [i64; DIMS],
    kept_stride: [i64; DIMS],
    red_shape: [i64; DIMS],
    red_stride: [i64; DIMS],
}

/// `struct rsmx_bcast_desc`: the merged axes of an array and the strides of a reduced
/// array over them (0 along the reduced axes).
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq)]
struct BcastDesc {
    ndim: i32,
    shape: [i64; DIMS],
    stride: [i64; DIMS],
}

/// `struct rsmx_gather_desc`: a strided view of the input.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq)]
struct GatherDesc {
    ndim: i32,
    offset: i64,
    shape: [i64; DIMS],
    stride: [i64; DIMS],
}

/// An axis group: its size, whether it is reduced, and its element stride in the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Group {
    size: usize,
    reduced: bool,
    stride: usize,
}

/// Neighbouring axes of a row-major `shape` merged into groups that are all reduced or
/// all kept (`mask`), axes of size 1 dropped.
fn groups(shape: &[usize], mask: &[bool]) -> Vec<Group> {
    let mut out: Vec<Group> = Vec::new();
    for (&d, &m) in shape.iter().zip(mask) {
        if d == 1 {
            continue;
        }
        match out.last_mut() {
            Some(g) if g.reduced == m => g.size *= d,
            _ => out.push(Group {
                size: d,
                reduced: m,
                stride: 0,
            }),
        }
    }
    let mut step = 1;
    for g in out.iter_mut().rev() {
        g.stride = step;
        step *= g.size;
    }
    out
}

fn too_many_axes(op: &str, shape: &[usize]) -> Error {
    Error::NotImplemented(format!(
        "{op}: an array of shape {} has more than {DIMS} groups of axes to reduce over on \
         the GPU",
        fmt_shape(shape)
    ))
}

/// The launch description of reducing `shape` over `mask`, with the outputs' count and
/// the reduced length.
fn reduce_desc(op: &str, shape: &[usize], mask: &[bool]) -> Result<(ReduceDesc, usize, usize)> {
    let gs = groups(shape, mask);
    let mut d = ReduceDesc::default();
    let (mut n_out, mut r) = (1usize, 1usize);
    for g in &gs {
        let (n, sh, st) = if g.reduced {
            r *= g.size;
            (&mut d.red_ndim, &mut d.red_shape, &mut d.red_stride)
        } else {
            n_out *= g.size;
            (&mut d.kept_ndim, &mut d.kept_shape, &mut d.kept_stride)
        };
        let k = *n as usize;
        if k == DIMS {
            return Err(too_many_axes(op, shape));
        }
        sh[k] = g.size as i64;
        st[k] = g.stride as i64;
        *n += 1;
    }
    Ok((d, n_out, r))
}

/// Outputs per tile for a reduced length `r`: enough lanes for the reduced run (one per
/// output for short runs, which then need no combining), and when the outputs are
/// contiguous in the input (the innermost group is kept, of `inner` elements) at least a
/// line of them side by side.
pub(super) fn tile_cols(r: usize, inner: Option<usize>) -> usize {
    let block = BLOCK as usize;
    let lanes = if r <= SHORT_RUN {
        1
    } else {
        r.next_power_of_two().min(block)
    };
    let by_lanes = block / lanes;
    match inner {
        Some(n) => n
            .next_power_of_two()
            .min(CONTIGUOUS_COLS)
            .max(by_lanes)
            .min(block),
        None => by_lanes,
    }
}

/// The innermost group's size when it is kept.
fn inner_kept(shape: &[usize], mask: &[bool]) -> Option<usize> {
    groups(shape, mask)
        .last()
        .filter(|g| !g.reduced)
        .map(|g| g.size)
}

/// The code of `dtype` in `enum rsmx_dtype_code`.
pub(super) fn dtype_code(op: &str, dtype: DType) -> Result<i32> {
    Ok(match dtype {
        DType::F32 => 0,
        DType::F64 => 1,
        DType::F16 => 2,
        DType::U8 => 3,
        DType::I8 => 4,
        DType::I32 => 5,
        DType::I64 => 6,
        other => {
            return Err(Error::Type(format!(
                "{op}: no GPU kernel for dtype {other}"
            )))
        }
    })
}

/// The kernel's code of a reduction (`enum rsmx_reduce_kind`).
fn kind_code(kind: ReduceKind) -> i32 {
    match kind {
        ReduceKind::Sum => 0,
        ReduceKind::Mean => 1,
        ReduceKind::Prod => 2,
        ReduceKind::Max => 3,
        ReduceKind::Min => 4,
        ReduceKind::NanSum => 5,
        ReduceKind::NanProd => 6,
        ReduceKind::Norm1 => 7,
        ReduceKind::Norm2 => 8,
    }
}

pub(super) fn add_flag(req: OpReq) -> i32 {
    i32::from(req == OpReq::Add)
}

/// Launches `kernel` over `tiles` tiles, one block per tile at most.
fn launch_tiles(ctx: &OpContext, kernel: &str, tiles: usize, args: Args) -> Result<()> {
    launch_n(ctx, MODULE, kernel, tiles * BLOCK as usize, args)
}

fn check_out(op: &str, out: &TBlob, n_out: usize) -> Result<()> {
    if out.size() != n_out {
        return Err(Error::Runtime(format!(
            "{op}: the output of shape {} does not hold the {n_out} results",
            fmt_shape(&out.shape)
        )));
    }
    Ok(())
}

/// `struct rsmx_reduce_plan`: how one launch of a reduction runs.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq)]
struct ReducePlan {
    n_out: i64,
    r: i64,
    count: i64,
    segments: i64,
    cols: i32,
    kind: i32,
    out_dtype: i32,
    add: i32,
    partials: i32,
}

/// The segments a long reduction into few outputs is split into, each folded by a tile
/// of its own and the results combined by a second launch; 1 to run in one launch. It
/// depends on the shape alone, so a result is the same on every device.
fn segments_for(n_out: usize, r: usize, cols: usize) -> usize {
    if n_out == 0 || n_out.div_ceil(cols) >= FEW_TILES || r < 2 * SEGMENT {
        return 1;
    }
    r.div_ceil(SEGMENT)
        .min(MAX_SEGMENTS)
        .min(MAX_PARTIALS / n_out)
        .max(1)
}

/// Reduces `x` over the axes in `mask` into `out`, whose dtype may differ (`norm`'s
/// `out_dtype`).
pub fn reduce(
    ctx: &OpContext,
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
    let kernel = format!("reduce_{}", suffix(op, x.dtype)?);
    let out_code = dtype_code(op, out.dtype)?;
    let (desc, n_out, r) = reduce_desc(op, &x.shape, mask)?;
    check_out(op, out, n_out)?;
    let int_norm2 = kind == ReduceKind::Norm2 && !x.dtype.is_float();
    // The integer 2-norm folds in order, one lane per output.
    let cols = if int_norm2 {
        BLOCK as usize
    } else {
        tile_cols(r, inner_kept(&x.shape, mask))
    };
    let plan = ReducePlan {
        n_out: n_out as i64,
        r: r as i64,
        count: r as i64,
        segments: 1,
        cols: cols as i32,
        kind: kind_code(kind),
        out_dtype: out_code,
        add: add_flag(req),
        partials: 0,
    };
    let segments = if int_norm2 {
        1
    } else {
        segments_for(n_out, r, cols)
    };
    if segments == 1 {
        let args = Args::new().ptr(out.ptr()).ptr(x.ptr()).arg(desc).arg(plan);
        return launch_tiles(ctx, &kernel, n_out.div_ceil(cols), args);
    }
    // The partial results' type: the accumulator's.
    let acc = match x.dtype {
        DType::F16 | DType::F32 if kind == ReduceKind::Norm2 => DType::F64,
        DType::F16 => DType::F32,
        t => t,
    };
    let scratch = ctx.temp_space(op, n_out * segments * acc.size())?;
    let first = ReducePlan {
        segments: segments as i64,
        ..plan
    };
    let args = Args::new()
        .ptr(scratch.ptr())
        .ptr(x.ptr())
        .arg(desc)
        .arg(first);
    let staged = launch_tiles(ctx, &kernel, n_out.div_ceil(cols) * segments, args).and_then(|()| {
        let (desc, _, _) = reduce_desc(op, &[n_out, segments], &[false, true])?;
        let cols = tile_cols(segments, None);
        let second = ReducePlan {
            r: segments as i64,
            cols: cols as i32,
            partials: 1,
            ..plan
        };
        let args = Args::new()
            .ptr(out.ptr())
            .ptr(scratch.ptr())
            .arg(desc)
            .arg(second);
        let kernel = format!("reduce_{}", suffix(op, acc)?);
        launch_tiles(ctx, &kernel, n_out.div_ceil(cols), args)
    });
    // The scratch goes back to the pool once the launches that use it are done.
    let (rt, dev) = runtime::for_context(ctx.device)?;
    let stream = ctx.stream.ok_or_else(|| {
        Error::Runtime(format!(
            "{op}: a GPU kernel ran outside a GPU op (no stream)"
        ))
    })?;
    storage::free_after(scratch, vec![dev.record(rt.driver, stream)?]);
    staged
}

impl super::GpuKernel for Reduce {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let x = &io.inputs[0];
        let (mask, _) = reduce_axes(
            self.name,
            &x.shape,
            self.axis.as_deref(),
            self.keepdims,
            self.exclude,
        )?;
        reduce(
            ctx,
            self.name,
            self.kind,
            x,
            &mask,
            &io.outputs[0],
            io.req[0],
        )
    }
}

impl super::GpuKernel for ArgReduce {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (x, out, req) = (&io.inputs[0], &io.outputs[0], io.req[0]);
        if req == OpReq::Null || out.size() == 0 {
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
        let kernel = format!("arg_reduce_{}", suffix(self.name, x.dtype)?);
        let view = [outer, r, inner];
        let mask = [false, true, false];
        let (desc, n_out, r) = reduce_desc(self.name, &view, &mask)?;
        check_out(self.name, out, n_out)?;
        let cols = tile_cols(r, inner_kept(&view, &mask));
        let args = Args::new()
            .ptr(out.ptr())
            .ptr(x.ptr())
            .arg(desc)
            .arg(n_out as i64)
            .arg(r as i64)
            .arg(cols as i32)
            .arg(i32::from(self.max))
            .arg(add_flag(req));
        launch_tiles(ctx, &kernel, n_out.div_ceil(cols), args)
    }
}

impl super::GpuKernel for ReduceBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (g, x, y) = (&io.inputs[0], &io.inputs[1], &io.inputs[2]);
        let (dx, req) = (&io.outputs[0], io.req[0]);
        if req == OpReq::Null {
            return Ok(());
        }
        if [g.dtype, y.dtype, dx.dtype].iter().any(|&t| t != x.dtype) {
            return Err(Error::NotImplemented(format!(
                "{}: on the GPU the gradients, the data and the result must share one dtype, \
                 got {}, {}, {} and {}",
                self.name, g.dtype, x.dtype, y.dtype, dx.dtype
            )));
        }
        let (mask, _) = reduce_axes(
            self.name,
            &x.shape,
            self.axis.as_deref(),
            true,
            self.exclude,
        )?;
        let count: usize = x
            .shape
            .iter()
            .zip(&mask)
            .filter(|(_, &m)| m)
            .map(|(&d, _)| d)
            .product();
        let gs = groups(&x.shape, &mask);
        if gs.len() > DIMS {
            return Err(too_many_axes(self.name, &x.shape));
        }
        let mut desc = BcastDesc {
            ndim: gs.len() as i32,
            ..Default::default()
        };
        let mut step = 1i64;
        for (k, grp) in gs.iter().enumerate().rev() {
            desc.shape[k] = grp.size as i64;
            if !grp.reduced {
                desc.stride[k] = step;
                step *= grp.size as i64;
            }
        }
        let n = dx.size();
        let kernel = format!("reduce_backward_{}", suffix(self.name, x.dtype)?);
        let args = Args::new()
            .ptr(dx.ptr())
            .ptr(g.ptr())
            .ptr(x.ptr())
            .ptr(y.ptr())
            .arg(n as i64)
            .arg(desc)
            .arg(kind_code(self.kind))
            .arg(count as i64)
            .arg(add_flag(req));
        launch_n(ctx, MODULE, &kernel, n, args)
    }
}

/// True if the memory of the two blobs overlaps.
pub(super) fn overlaps(a: &TBlob, b: &TBlob) -> bool {
    let (a0, b0) = (a.ptr() as usize, b.ptr() as usize);
    let (a1, b1) = (
        a0 + a.size() * a.dtype.size(),
        b0 + b.size() * b.dtype.size(),
    );
    a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1
}

/// `out (=|+=) x[view]`, or with `scatter`, `out[view] (=|+=) x` (a view reading no
/// element twice, into an output already cleared for a write).
fn strided(
    ctx: &OpContext,
    op: &str,
    x: &TBlob,
    view: &View,
    out: &TBlob,
    req: OpReq,
    scatter: bool,
) -> Result<()> {
    let (n, whole) = if scatter {
        (x.size(), out)
    } else {
        (out.size(), x)
    };
    if view.size() != n {
        return Err(Error::Runtime(format!(
            "{op}: a view of {} elements for {n} elements",
            view.size()
        )));
    }
    let (lo, hi) = view.extent();
    if lo < 0 || hi >= whole.size() as isize {
        return Err(Error::Runtime(format!(
            "{op}: the view reaches outside its array"
        )));
    }
    if overlaps(x, out) {
        return Err(Error::NotImplemented(format!(
            "{op}: on the GPU the output must not share memory with the input"
        )));
    }
    // A bool is one byte of 0 or 1: the u8 kernel copies it; adding makes no sense.
    let dtype = if x.dtype == DType::Bool {
        if req == OpReq::Add || scatter {
            return Err(Error::Type(format!(
                "{op}: cannot add to an output of dtype bool"
            )));
        }
        DType::U8
    } else {
        x.dtype
    };
    let v = view.simplified();
    if v.shape.len() > DIMS {
        return Err(Error::NotImplemented(format!(
            "{op}: a view of more than {DIMS} axes that do not merge is not supported on \
             the GPU (shape {})",
            fmt_shape(&view.shape)
        )));
    }
    let mut desc = GatherDesc {
        ndim: v.shape.len() as i32,
        offset: v.offset as i64,
        ..Default::default()
    };
    for (k, (&len, &s)) in v.shape.iter().zip(&v.strides).enumerate() {
        desc.shape[k] = len as i64;
        desc.stride[k] = s as i64;
    }
    let kernel = format!("view_copy_{}", suffix(op, dtype)?);
    // `enum rsmx_view_mode`.
    let mode: i32 = match (scatter, req) {
        (true, _) => 2,
        (false, OpReq::Add) => 1,
        _ => 0,
    };
    let args = Args::new()
        .ptr(out.ptr())
        .ptr(x.ptr())
        .arg(n as i64)
        .arg(desc)
        .arg(mode);
    launch_n(ctx, MODULE, &kernel, n, args)
}

impl super::GpuKernel for Gather {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (x, out, req) = (&io.inputs[0], &io.outputs[0], io.req[0]);
        if req == OpReq::Null || out.size() == 0 {
            return Ok(());
        }
        let shapes: Vec<Shape> = io.inputs.iter().map(|b| b.shape.clone()).collect();
        let (_, view) = (self.view)(&shapes)?;
        strided(ctx, self.name, x, &view, out, req, false)
    }
}

/// Zeroes `out` for a write request (an `Add` keeps it), with `init.cu`'s fill.
fn clear_for(ctx: &OpContext, op: &str, out: &TBlob, req: OpReq) -> Result<()> {
    if req == OpReq::Add || out.size() == 0 {
        return Ok(());
    }
    let dtype = if out.dtype == DType::Bool {
        DType::U8
    } else {
        out.dtype
    };
    let n = out.size();
    let args = Args::new().ptr(out.ptr()).arg(n as i64).arg(0.0f64);
    launch_n(
        ctx,
        "init",
        &format!("fill_{}", suffix(op, dtype)?),
        n,
        args,
    )
}

/// True if no two elements of the view read the same input element: each axis steps
/// past everything the axes of smaller steps reach.
fn injective(v: &View) -> bool {
    let mut axes: Vec<(usize, usize)> = v
        .shape
        .iter()
        .zip(&v.strides)
        .filter(|(&len, _)| len > 1)
        .map(|(&len, &s)| (len, s.unsigned_abs()))
        .collect();
    axes.sort_by_key(|a| a.1);
    let mut reach = 0usize;
    for (len, s) in axes {
        if s <= reach {
            return false;
        }
        reach += (len - 1) * s;
    }
    true
}

impl super::GpuKernel for GatherBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (g, out, req) = (&io.inputs[0], &io.outputs[0], io.req[0]);
        if req == OpReq::Null || out.size() == 0 {
            return Ok(());
        }
        if g.size() == 0 {
            return clear_for(ctx, self.name, out, req);
        }
        let shapes: Vec<Shape> = io.inputs[1..].iter().map(|b| b.shape.clone()).collect();
        let (_, v) = (self.view)(&shapes)?;
        if let Some(inv) = v.inverse(out.size()) {
            return strided(ctx, self.name, g, &inv, out, req, false);
        }
        if let Some(mask) = v.repeating_axes(out.size()) {
            let g = g.with_shape(&v.shape);
            return reduce(ctx, self.name, ReduceKind::Sum, &g, &mask, out, req);
        }
        if !injective(&v) {
            return Err(Error::NotImplemented(format!(
                "{}: the gradient of a view that reads elements more than once out of order \
                 is not supported on the GPU",
                self.name
            )));
        }
        clear_for(ctx, self.name, out, req)?;
        strided(ctx, self.name, g, &v, out, req, true)
    }
}

/// Registers the GPU kernels of this module.
pub(crate) fn register_kernels(k: &mut Kernels) {
    super::add::<Reduce>(k);
    super::add::<ArgReduce>(k);
    super::add::<ReduceBackward>(k);
    super::add::<Gather>(k);
    super::add::<GatherBackward>(k);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_merge_neighbours_and_drop_ones() {
        let g = groups(&[2, 3, 1, 4, 5], &[true, true, false, false, true]);
        let sizes: Vec<(usize, bool, usize)> =
            g.iter().map(|g| (g.size, g.reduced, g.stride)).collect();
        assert_eq!(sizes, vec![(6, true, 20), (4, false, 5), (5, true, 1)]);
        assert!(groups(&[1, 1], &[true, false]).is_empty());
        let (d, n_out, r) = reduce_desc("sum", &[2, 3, 4, 5], &[false, true, false, true]).unwrap();
        assert_eq!((n_out, r), (8, 15));
        assert_eq!((d.kept_ndim, d.red_ndim), (2, 2));
        assert_eq!(
            (&d.kept_shape[..2], &d.kept_stride[..2]),
            (&[2, 4][..], &[60, 5][..])
        );
        assert_eq!(
            (&d.red_shape[..2], &d.red_stride[..2]),
            (&[3, 5][..], &[20, 1][..])
        );
        let (d, n_out, r) = reduce_desc("sum", &[0, 3], &[true, false]).unwrap();
        assert_eq!((n_out, r, d.red_ndim), (3, 0, 1));
        let many = [2usize; 18];
        let alternate: Vec<bool> = (0..18).map(|i| i % 2 == 0).collect();
        assert!(reduce_desc("sum", &many, &alternate).is_err());
    }

    #[test]
    fn tiles_cover_the_reduced_run_or_contiguous_outputs() {
        assert_eq!(tile_cols(100_000, None), 1);
        assert_eq!(tile_cols(3, None), 256);
        assert_eq!(tile_cols(17, None), 8);
        assert_eq!(tile_cols(0, None), 256);
        assert_eq!(tile_cols(1, Some(7)), 256);
        assert_eq!(tile_cols(100_000, Some(3)), 4);
        assert_eq!(tile_cols(100_000, Some(1000)), 32);
        assert_eq!(tile_cols(20, Some(1000)), 32);
        assert_eq!(tile_cols(100, Some(2)), 2);
    }

    #[test]
    fn long_reductions_into_few_outputs_are_split() {
        assert_eq!(segments_for(1, 100_000, 1), 13);
        assert_eq!(segments_for(1, 1 << 30, 1), MAX_SEGMENTS);
        assert_eq!(segments_for(64, 100_000, 32), 13);
        assert_eq!(segments_for(1, 16_000, 1), 1);
        assert_eq!(segments_for(0, 100_000, 1), 1);
        assert_eq!(segments_for(4096, 100_000, 1), 1);
        assert_eq!(segments_for(200, 1 << 20, 1), 128);
        assert_eq!(segments_for(2000, 1 << 20, 8), 128);
        assert_eq!(segments_for(2000, 1 << 26, 8), 524);
        // `struct rsmx_reduce_plan`: four 8-byte fields and five ints, padded to 56.
        assert_eq!(std::mem::size_of::<ReducePlan>(), 56);
    }

    #[test]
    fn codes_follow_the_kernel_enums() {
        let src = crate::cuda::sources::module("reduce").expect("embedded");
        let kinds = src
            .split("enum rsmx_reduce_kind {")
            .nth(1)
            .unwrap()
            .split("};")
            .next()
            .unwrap();
        let names: Vec<&str> = kinds.split(',').map(str::trim).collect();
        assert_eq!(
            names[kind_code(ReduceKind::NanProd) as usize],
            "RSMX_REDUCE_NANPROD"
        );
        assert_eq!(
            names[kind_code(ReduceKind::Norm2) as usize],
            "RSMX_REDUCE_NORM2"
        );
        let codes = src
            .split("enum rsmx_dtype_code {")
            .nth(1)
            .unwrap()
            .split("};")
            .next()
            .unwrap();
        let names: Vec<&str> = codes.split(',').map(str::trim).collect();
        for t in [DType::F32, DType::F16, DType::U8, DType::I64] {
            let want = format!("RSMX_DT_{}", suffix("t", t).unwrap().to_uppercase());
            assert_eq!(names[dtype_code("t", t).unwrap() as usize], want);
        }
        assert!(dtype_code("t", DType::Bool).is_err());
    }
}
