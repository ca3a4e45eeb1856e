//! GPU kernels of the indexing operators (`index.cu`): `take`, `Embedding`, `pick`,
//! `one_hot`, `where`, `gather_nd`, `scatter_nd` and their backward.
//!
//! Index arrays become int64 positions on the device first. Out-of-range indices that the
//! CPU reports as errors (`take` in raise mode, `gather_nd`, `scatter_nd`) are found by a
//! one-block kernel whose answer is read back, so those calls wait for the device once.

use super::launch::{launch_n, suffix, Args, BLOCK};
use super::temp::Temp;
use crate::cuda::memcpy::device_to_host;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::cpu::indexing::{nd_layout, CastElem, Scalar};
use crate::kernels::cpu::Blobs;
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::grad::indexing::{GatherNdBackward, PickBackward, TakeBackward, WhereBackward};
use crate::op::indexing::{GatherNd, IndexMode, OneHot, Pick, ScatterNd, Take, Where};
use crate::op::nn::embedding::{Embedding, EmbeddingBackward, NAME};
use crate::op::{OpContext, OpReq, Operator};
use crate::shape::{fmt_shape, norm_axis, size_of};
use half::f16;

const MODULE: &str = "index";
/// Most leading axes `gather_nd` indexes (`RSMX_INDEX_DIMS`).
const MAX_DIM: usize = 10;

// The one-block kernels (`index_first_bad`, `scatter_offsets`, `scatter_place`) run
// `BLOCK` threads over shared arrays of 256.
const _: () = assert!(BLOCK.is_power_of_two() && BLOCK <= 256);

/// `enum rsmx_index_mode`.
const CLIP: i32 = 0;
const WRAP: i32 = 1;
const RAISE: i32 = 2;
const RAISE_ZERO: i32 = 3;
const EMBEDDING: i32 = 4;
const RAW: i32 = 5;

/// `enum rsmx_scatter_mode`.
const SUM: i32 = 0;
const ADD: i32 = 1;
const LAST: i32 = 2;

fn add_flag(req: OpReq) -> i32 {
    i32::from(req == OpReq::Add)
}

/// The kernel suffix of any dtype, bool included.
fn any_suffix(op: &str, dtype: DType) -> Result<&'static str> {
    match dtype {
        DType::Bool => Ok("b8"),
        other => suffix(op, other),
    }
}

/// The kernel suffix of a numeric dtype, with the CPU's error for others.
fn num_suffix(op: &str, dtype: DType) -> Result<&'static str> {
    crate::dispatch_num!(op, dtype, T => { let _ = std::marker::PhantomData::<T>; });
    suffix(op, dtype)
}

/// The mode code of a forward index conversion.
fn mode_code(mode: IndexMode, raise: i32) -> i32 {
    match mode {
        IndexMode::Clip => CLIP,
        IndexMode::Wrap => WRAP,
        IndexMode::Raise => raise,
    }
}

/// The positions the indices in `idx` name along an axis of length `n`, as int64 in
/// scratch memory.
fn positions(ctx: &OpContext, op: &str, idx: &TBlob, n: usize, mode: i32) -> Result<Temp> {
    let count = idx.size();
    let temp = Temp::new(ctx, count.max(1) * 8)?;
    let name = format!("index_fix_{}", any_suffix(op, idx.dtype)?);
    let args = Args::new()
        .ptr(temp.ptr())
        .ptr(idx.ptr())
        .arg(count as i64)
        .arg(n as i64)
        .arg(mode);
    launch_n(ctx, MODULE, &name, count, args)?;
    Ok(temp)
}

/// The first of `count` positions that is negative, with its value; waits for the device.
fn first_bad(ctx: &OpContext, pos: &Temp, count: usize) -> Result<Option<(usize, i64)>> {
    if count == 0 {
        return Ok(None);
    }
    let out = Temp::new(ctx, 16)?;
    let args = Args::new().ptr(out.ptr()).ptr(pos.ptr()).arg(count as i64);
    launch_n(ctx, MODULE, "index_first_bad", BLOCK as usize, args)?;
    let mut raw = [0u8; 16];
    device_to_host(ctx.device, ctx.stream, &mut raw, out.ptr())?;
    let word = |k: usize| i64::from_le_bytes(raw[k * 8..k * 8 + 8].try_into().unwrap_or_default());
    Ok(usize::try_from(word(0)).ok().map(|i| (i, word(1))))
}

/// Element `i` of index array `idx` as a float64, read from the device.
fn index_value(ctx: &OpContext, idx: &TBlob, i: usize) -> Result<f64> {
    let size = idx.dtype.size();
    let mut raw = [0u8; 8];
    // SAFETY: `i` is below `idx.size()`, so the `size` bytes at the offset are inside it.
    let src = unsafe { idx.ptr().add(i * size) };
    device_to_host(ctx.device, ctx.stream, &mut raw[..size], src)?;
    Ok(match idx.dtype {
        DType::F32 => f32::from_le_bytes(raw[..4].try_into().unwrap_or_default()) as f64,
        DType::F64 => f64::from_le_bytes(raw),
        DType::F16 => f16::from_bits(u16::from_le_bytes([raw[0], raw[1]])).to_f64(),
        DType::U8 | DType::Bool => raw[0] as f64,
        DType::I8 => raw[0] as i8 as f64,
        DType::I32 => i32::from_le_bytes(raw[..4].try_into().unwrap_or_default()) as f64,
        _ => i64::from_le_bytes(raw) as f64,
    })
}

/// `struct rsmx_index_nd`.
#[repr(C)]
#[derive(Clone, Copy)]
struct NdDesc {
    dim: [i64; MAX_DIM],
    stride: [i64; MAX_DIM],
}

/// The blocks `idx` (shape `(m, count)`) addresses in an array of shape `shape`, and
/// `size_of(shape[..m])`; an index error naming `op` for an index out of range.
fn nd_positions(
    ctx: &OpContext,
    op: &str,
    idx: &TBlob,
    shape: &[usize],
) -> Result<(Temp, usize, usize, usize)> {
    let m = idx.shape.first().copied().unwrap_or(0);
    if m > MAX_DIM || m > shape.len() {
        return Err(Error::Value(format!(
            "{op}: the GPU kernel indexes at most {MAX_DIM} axes, got indices of shape {}",
            fmt_shape(&idx.shape)
        )));
    }
    let (strides, inner) = nd_layout(shape, m);
    let mut nd = NdDesc {
        dim: [0; MAX_DIM],
        stride: [0; MAX_DIM],
    };
    for ax in 0..m {
        nd.dim[ax] = shape[ax] as i64;
        nd.stride[ax] = strides[ax] as i64;
    }
    let count = idx.size().checked_div(m).unwrap_or(0);
    let temp = Temp::new(ctx, count.max(1) * 8)?;
    let name = format!("gather_nd_pos_{}", any_suffix(op, idx.dtype)?);
    let args = Args::new()
        .ptr(temp.ptr())
        .ptr(idx.ptr())
        .arg(m as i64)
        .arg(count as i64)
        .arg(nd);
    launch_n(ctx, MODULE, &name, count, args)?;
    if let Some((c, code)) = first_bad(ctx, &temp, count)? {
        let ax = (-code - 1) as usize;
        let v = index_value(ctx, idx, ax * count + c)?;
        let d = shape[ax] as f64;
        return Err(Error::Index(format!(
            "{op}: index {v} is out of bounds for axis {ax} with size {d}"
        )));
    }
    Ok((temp, count, size_of(&shape[..m]), inner))
}

/// `out (outer, m, inner) = a (outer, n, inner)` at the rows `pos` names.
#[allow(clippy::too_many_arguments)]
fn take_rows(
    ctx: &OpContext,
    op: &str,
    a: &TBlob,
    pos: &Temp,
    (outer, n, m, inner): (usize, usize, usize, usize),
    out: &TBlob,
    req: OpReq,
) -> Result<()> {
    let name = format!("take_{}", any_suffix(op, a.dtype)?);
    let args = Args::new()
        .ptr(out.ptr())
        .ptr(a.ptr())
        .ptr(pos.ptr())
        .arg(outer as i64)
        .arg(n as i64)
        .arg(m as i64)
        .arg(inner as i64)
        .arg(add_flag(req));
    launch_n(ctx, MODULE, &name, outer * m * inner, args)
}

/// `out (outer, n, inner)` gets the rows of `g (outer, m, inner)` sent to row `pos[j]`:
/// the positions sorted stably by target row, then each output element folds its rows in
/// order.
fn scatter_rows(
    ctx: &OpContext,
    sfx: &str,
    g: &TBlob,
    pos: &Temp,
    (outer, n, m, inner): (usize, usize, usize, usize),
    out: &TBlob,
    mode: i32,
) -> Result<()> {
    if outer * n * inner == 0 {
        return Ok(());
    }
    // counts (n), start (n + 1), cursor (n), sorted (m): int64 each.
    let words = 3 * n + 1 + m;
    let temp = Temp::new(ctx, words * 8)?;
    let at = |w: usize| temp.ptr().wrapping_add(w * 8);
    let (counts, start, cursor, sorted) = (at(0), at(n), at(2 * n + 1), at(3 * n + 1));
    crate::cuda::memcpy::fill_bytes(ctx.device, ctx.stream, counts, 0, n * 8)?;
    let (m64, n64) = (m as i64, n as i64);
    let args = Args::new().ptr(counts).ptr(pos.ptr()).arg(m64).arg(n64);
    launch_n(ctx, MODULE, "scatter_count", m, args)?;
    let args = Args::new().ptr(start).ptr(cursor).ptr(counts).arg(n64);
    launch_n(ctx, MODULE, "scatter_offsets", BLOCK as usize, args)?;
    if m > 0 {
        let args = Args::new()
            .ptr(sorted)
            .ptr(cursor)
            .ptr(pos.ptr())
            .arg(m64)
            .arg(n64);
        launch_n(ctx, MODULE, "scatter_place", BLOCK as usize, args)?;
    }
    let args = Args::new()
        .ptr(out.ptr())
        .ptr(g.ptr())
        .ptr(start)
        .ptr(sorted)
        .arg(outer as i64)
        .arg(n64)
        .arg(m64)
        .arg(inner as i64)
        .arg(mode);
    let name = format!("scatter_{sfx}");
    launch_n(ctx, MODULE, &name, outer * n * inner, args)
}

fn sum_mode(req: OpReq) -> i32 {
    if req == OpReq::Add {
        ADD
    } else {
        SUM
    }
}

/// `shape` seen as (outer, n, inner) around `axis`.
fn around_axis(op: &str, shape: &[usize], axis: i64) -> Result<(usize, usize, usize, usize)> {
    let ax = norm_axis(axis, shape.len(), op)?;
    Ok((
        ax,
        size_of(&shape[..ax]),
        shape[ax],
        size_of(&shape[ax + 1..]),
    ))
}

impl super::GpuKernel for Take {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let (a, idx, out) = (&io.inputs[0], &io.inputs[1], &io.outputs[0]);
        let (axis, outer, n, inner) = around_axis("take", &a.shape, self.axis)?;
        let m = idx.size();
        if m > 0 && n == 0 {
            return Err(Error::Index(format!(
                "take: cannot take from axis {axis} of size 0 (data shape {})",
                fmt_shape(&a.shape)
            )));
        }
        let pos = positions(ctx, "take", idx, n, mode_code(self.mode, RAISE))?;
        if self.mode == IndexMode::Raise && first_bad(ctx, &pos, m)?.is_some() {
            return Err(Error::Index(format!(
                "take: indices out of bounds for axis {axis} of size {n} with mode='raise'"
            )));
        }
        take_rows(ctx, "take", a, &pos, (outer, n, m, inner), out, io.req[0])
    }
}

impl super::GpuKernel for TakeBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (g, idx, a, out) = (&io.inputs[0], &io.inputs[1], &io.inputs[2], &io.outputs[0]);
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let sfx = num_suffix(self.name(), out.dtype)?;
        let (_, outer, n, inner) = around_axis(self.name(), &a.shape, self.axis)?;
        let m = idx.size();
        let pos = positions(ctx, self.name(), idx, n, mode_code(self.mode, RAISE_ZERO))?;
        let shape = (outer, n, m, inner);
        scatter_rows(ctx, sfx, g, &pos, shape, out, sum_mode(io.req[0]))
    }
}

impl super::GpuKernel for Embedding {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null || self.output_dim == 0 {
            return Ok(());
        }
        let (idx, w, out) = (&io.inputs[0], &io.inputs[1], &io.outputs[0]);
        num_suffix(NAME, idx.dtype)?;
        num_suffix(NAME, w.dtype)?;
        let pos = positions(ctx, NAME, idx, self.input_dim, EMBEDDING)?;
        let shape = (1, self.input_dim, idx.size(), self.output_dim);
        take_rows(ctx, NAME, w, &pos, shape, out, io.req[0])
    }
}

impl super::GpuKernel for EmbeddingBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let (g, idx, out) = (&io.inputs[0], &io.inputs[1], &io.outputs[0]);
        num_suffix(NAME, idx.dtype)?;
        let sfx = num_suffix(self.name(), out.dtype)?;
        let e = &self.0;
        let pos = positions(ctx, NAME, idx, e.input_dim, EMBEDDING)?;
        let shape = (1, e.input_dim, idx.size(), e.output_dim);
        scatter_rows(ctx, sfx, g, &pos, shape, out, sum_mode(io.req[0]))
    }
}

impl super::GpuKernel for Pick {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let (data, idx, out) = (&io.inputs[0], &io.inputs[1], &io.outputs[0]);
        let (_, _, n, inner) = around_axis("pick", &data.shape, self.axis)?;
        if n == 0 && idx.size() > 0 {
            return Err(Error::Index(
                "pick: cannot pick along an axis of size 0".into(),
            ));
        }
        let pos = positions(ctx, "pick", idx, n, mode_code(self.mode, RAISE_ZERO))?;
        let name = format!("pick_{}", any_suffix("pick", data.dtype)?);
        let rows = out.size();
        let args = Args::new()
            .ptr(out.ptr())
            .ptr(data.ptr())
            .ptr(pos.ptr())
            .arg(rows as i64)
            .arg(n as i64)
            .arg(inner as i64)
            .arg(add_flag(io.req[0]));
        launch_n(ctx, MODULE, &name, rows, args)
    }
}

impl super::GpuKernel for PickBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let (g, data, idx, out) = (&io.inputs[0], &io.inputs[1], &io.inputs[2], &io.outputs[0]);
        let sfx = num_suffix(self.name(), out.dtype)?;
        let (_, _, n, inner) = around_axis(self.name(), &data.shape, self.axis)?;
        let pos = positions(ctx, self.name(), idx, n, mode_code(self.mode, RAISE_ZERO))?;
        if io.req[0] != OpReq::Add {
            let bytes = out.size() * out.dtype.size();
            crate::cuda::memcpy::fill_bytes(ctx.device, ctx.stream, out.ptr(), 0, bytes)?;
        }
        let rows = g.size();
        let args = Args::new()
            .ptr(out.ptr())
            .ptr(g.ptr())
            .ptr(pos.ptr())
            .arg(rows as i64)
            .arg(n as i64)
            .arg(inner as i64);
        launch_n(ctx, MODULE, &format!("pick_backward_{sfx}"), rows, args)
    }
}

/// `T`'s bits of `v` converted as the CPU's `one_hot` converts it, passed by value.
fn typed_arg<T: CastElem + Copy + 'static>(args: Args, v: f64) -> Args {
    args.arg(T::from_scalar(Scalar::Float(v)))
}

impl super::GpuKernel for OneHot {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let (idx, out) = (&io.inputs[0], &io.outputs[0]);
        let sfx = num_suffix("one_hot", out.dtype)?;
        let count = idx.size();
        let pos = positions(ctx, "one_hot", idx, 0, RAW)?;
        let args = Args::new()
            .ptr(out.ptr())
            .ptr(pos.ptr())
            .arg(count as i64)
            .arg(self.depth as i64);
        let args = match out.dtype {
            DType::F32 => typed_arg::<f32>(typed_arg::<f32>(args, self.on), self.off),
            DType::F64 => typed_arg::<f64>(typed_arg::<f64>(args, self.on), self.off),
            DType::F16 => {
                let h = |v: f64| f16::from_scalar(Scalar::Float(v)).to_bits();
                args.arg(h(self.on)).arg(h(self.off))
            }
            DType::U8 => typed_arg::<u8>(typed_arg::<u8>(args, self.on), self.off),
            DType::I8 => typed_arg::<i8>(typed_arg::<i8>(args, self.on), self.off),
            DType::I32 => typed_arg::<i32>(typed_arg::<i32>(args, self.on), self.off),
            _ => typed_arg::<i64>(typed_arg::<i64>(args, self.on), self.off),
        };
        let args = args.arg(add_flag(io.req[0]));
        launch_n(
            ctx,
            MODULE,
            &format!("one_hot_{sfx}"),
            count * self.depth,
            args,
        )
    }
}

/// 1 for each non-zero element of `c`, as bytes in scratch memory.
fn truth(ctx: &OpContext, op: &str, c: &TBlob) -> Result<Temp> {
    let n = c.size();
    let temp = Temp::new(ctx, n.max(1))?;
    let name = format!("truth_{}", any_suffix(op, c.dtype)?);
    let args = Args::new().ptr(temp.ptr()).ptr(c.ptr()).arg(n as i64);
    launch_n(ctx, MODULE, &name, n, args)?;
    Ok(temp)
}

/// Elements per condition element: 1, or a row of `n / conds` for a 1-d condition.
fn cond_row(n: usize, conds: usize) -> usize {
    if conds == n {
        1
    } else {
        (n / conds.max(1)).max(1)
    }
}

impl super::GpuKernel for Where {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let (c, x, y, out) = (&io.inputs[0], &io.inputs[1], &io.inputs[2], &io.outputs[0]);
        let name = format!("where_{}", any_suffix("where", x.dtype)?);
        let cond = truth(ctx, "where", c)?;
        let n = out.size();
        let args = Args::new()
            .ptr(out.ptr())
            .ptr(cond.ptr())
            .ptr(x.ptr())
            .ptr(y.ptr())
            .arg(n as i64)
            .arg(cond_row(n, c.size()) as i64)
            .arg(add_flag(io.req[0]));
        launch_n(ctx, MODULE, &name, n, args)
    }
}

impl super::GpuKernel for WhereBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (g, c) = (&io.inputs[0], &io.inputs[1]);
        if io.req.iter().all(|&r| r == OpReq::Null) {
            return Ok(());
        }
        let cond = truth(ctx, self.name(), c)?;
        let n = g.size();
        let row = cond_row(n, c.size());
        for (k, (out, &req)) in io.outputs.iter().zip(io.req).enumerate() {
            if req == OpReq::Null {
                continue;
            }
            let sfx = num_suffix(self.name(), out.dtype)?;
            let args = Args::new()
                .ptr(out.ptr())
                .ptr(g.ptr())
                .ptr(cond.ptr())
                .arg(n as i64)
                .arg(row as i64)
                .arg(i32::from(k == 0))
                .arg(add_flag(req));
            launch_n(ctx, MODULE, &format!("where_backward_{sfx}"), n, args)?;
        }
        Ok(())
    }
}

impl super::GpuKernel for GatherNd {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let (data, idx, out) = (&io.inputs[0], &io.inputs[1], &io.outputs[0]);
        any_suffix("gather_nd", data.dtype)?;
        let (pos, count, _, inner) = nd_positions(ctx, "gather_nd", idx, &data.shape)?;
        take_rows(
            ctx,
            "gather_nd",
            data,
            &pos,
            (1, 0, count, inner),
            out,
            io.req[0],
        )
    }
}

impl super::GpuKernel for GatherNdBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let (g, idx, data, out) = (&io.inputs[0], &io.inputs[1], &io.inputs[2], &io.outputs[0]);
        let sfx = num_suffix(self.name(), out.dtype)?;
        let (pos, count, rows, inner) = nd_positions(ctx, self.name(), idx, &data.shape)?;
        let shape = (1, rows, count, inner);
        scatter_rows(ctx, sfx, g, &pos, shape, out, sum_mode(io.req[0]))
    }
}

impl super::GpuKernel for ScatterNd {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let (data, idx, out) = (&io.inputs[0], &io.inputs[1], &io.outputs[0]);
        let sfx = any_suffix("scatter_nd", data.dtype)?;
        let (pos, count, rows, inner) = nd_positions(ctx, "scatter_nd", idx, &out.shape)?;
        let mode = if io.req[0] == OpReq::Add { ADD } else { LAST };
        scatter_rows(ctx, sfx, data, &pos, (1, rows, count, inner), out, mode)
    }
}

/// Registers the GPU kernels of the indexing operators.
pub(crate) fn register_kernels(k: &mut Kernels) {
    super::add::<Take>(k);
    super::add::<TakeBackward>(k);
    super::add::<Embedding>(k);
    super::add::<EmbeddingBackward>(k);
    super::add::<Pick>(k);
    super::add::<PickBackward>(k);
    super::add::<OneHot>(k);
    super::add::<Where>(k);
    super::add::<WhereBackward>(k);
    super::add::<GatherNd>(k);
    super::add::<GatherNdBackward>(k);
    super::add::<ScatterNd>(k);
}
