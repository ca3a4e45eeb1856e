//! GPU kernels of the operators that move or convert data keeping its order (`xform.cu`):
//! `Concat`, `stack`, `SliceChannel` and `Concat`'s backward as batched block copies,
//! `Cast` and its backward, the reshapes and their backward, `MakeLoss` and its backward.

use super::launch::{float_suffix, launch_n, suffix, Args};
use super::temp::Temp;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::cpu::Blobs;
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::grad::indexing::CastBackward;
use crate::op::grad::join::ConcatBackward;
use crate::op::grad::view::ReshapeBackward;
use crate::op::indexing::Cast;
use crate::op::la_trian::Trian;
use crate::op::nn::common::{check_float, Normalization};
use crate::op::nn::make_loss::{MakeLoss, MakeLossBackward};
use crate::op::transform::axis_in;
use crate::op::transform::join::{Concat, SliceChannel, Stack};
use crate::op::transform::reshape::SameData;
use crate::op::{OpContext, OpReq, Operator};
use crate::shape::{norm_axis, size_of};

const MODULE: &str = "xform";
/// Parts one join or split launch covers (`RSMX_JOIN_PARTS`).
const PARTS: usize = 16;

/// `struct rsmx_join`: one launch's share of a join or split.
#[repr(C)]
#[derive(Clone, Copy)]
struct JoinDesc {
    rows: i64,
    row: i64,
    base: i64,
    nparts: i64,
    col: [i64; PARTS + 1],
    part: [u64; PARTS],
    add: [i32; PARTS],
}

/// The storage suffix of `dtype` for a kernel writing as `req` says: bool is stored as
/// u8 bytes and cannot be added to.
fn store_suffix(op: &str, dtype: DType, req: OpReq) -> Result<&'static str> {
    if dtype == DType::Bool {
        if req == OpReq::Add {
            return Err(Error::Type(format!(
                "{op}: cannot add to an output of dtype bool"
            )));
        }
        return Ok("u8");
    }
    suffix(op, dtype)
}

/// One block of a join or split: its device memory, elements per row, and request.
#[derive(Clone, Copy)]
struct Part {
    ptr: *const u8,
    len: usize,
    req: OpReq,
}

/// The parts that take part, in launches of at most [`PARTS`], with the column each
/// launch starts at.
fn batches(parts: &[Part]) -> Vec<(usize, Vec<Part>)> {
    let mut out: Vec<(usize, Vec<Part>)> = Vec::new();
    let mut at = 0usize;
    let mut cur: Vec<Part> = Vec::new();
    let mut base = 0usize;
    for p in parts {
        if p.len > 0 && p.req != OpReq::Null {
            if cur.is_empty() {
                base = at;
            }
            // A skipped part in between starts a new launch: columns must be contiguous.
            if !cur.is_empty() && base + cur.iter().map(|c| c.len).sum::<usize>() != at {
                out.push((base, std::mem::take(&mut cur)));
                base = at;
            }
            cur.push(*p);
            if cur.len() == PARTS {
                out.push((base, std::mem::take(&mut cur)));
            }
        }
        at += p.len;
    }
    if !cur.is_empty() {
        out.push((base, cur));
    }
    out
}

fn desc(rows: usize, row: usize, base: usize, parts: &[Part]) -> JoinDesc {
    let mut d = JoinDesc {
        rows: rows as i64,
        row: row as i64,
        base: base as i64,
        nparts: parts.len() as i64,
        col: [0; PARTS + 1],
        part: [0; PARTS],
        add: [0; PARTS],
    };
    for (i, p) in parts.iter().enumerate() {
        d.col[i + 1] = d.col[i] + p.len as i64;
        d.part[i] = p.ptr as u64;
        d.add[i] = i32::from(p.req == OpReq::Add);
    }
    d
}

/// `out` (`rows` rows of `row` elements) = the parts side by side in every row.
fn join(
    ctx: &OpContext,
    op: &str,
    (rows, row): (usize, usize),
    inputs: &[TBlob],
    lens: &[usize],
    out: &TBlob,
    req: OpReq,
) -> Result<()> {
    if req == OpReq::Null || out.size() == 0 {
        return Ok(());
    }
    let kernel = format!("join_{}", store_suffix(op, out.dtype, req)?);
    let parts: Vec<Part> = inputs
        .iter()
        .zip(lens)
        .map(|(b, &len)| Part {
            ptr: b.ptr(),
            len,
            req: OpReq::Write,
        })
        .collect();
    for (base, batch) in batches(&parts) {
        let d = desc(rows, row, base, &batch);
        let n = rows * d.col[batch.len()] as usize;
        let args = Args::new()
            .ptr(out.ptr())
            .arg(d)
            .arg(i32::from(req == OpReq::Add));
        launch_n(ctx, MODULE, &kernel, n, args)?;
    }
    Ok(())
}

/// Each output gets its columns of every row of `input` (`rows` rows of `row`).
fn split(
    ctx: &OpContext,
    op: &str,
    (rows, row): (usize, usize),
    input: &TBlob,
    outputs: &[TBlob],
    lens: &[usize],
    req: &[OpReq],
) -> Result<()> {
    if rows == 0 || row == 0 {
        return Ok(());
    }
    let add = req.contains(&OpReq::Add);
    let kernel = format!(
        "split_{}",
        store_suffix(op, input.dtype, if add { OpReq::Add } else { OpReq::Write })?
    );
    let parts: Vec<Part> = outputs
        .iter()
        .zip(lens)
        .zip(req)
        .map(|((b, &len), &req)| Part {
            ptr: b.ptr(),
            len,
            req,
        })
        .collect();
    for (base, batch) in batches(&parts) {
        let d = desc(rows, row, base, &batch);
        let n = rows * d.col[batch.len()] as usize;
        let args = Args::new().ptr(input.ptr()).arg(d);
        launch_n(ctx, MODULE, &kernel, n, args)?;
    }
    Ok(())
}

impl super::GpuKernel for Concat {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let out = &io.outputs[0];
        let axis = axis_in("Concat", self.dim, out.shape.len())?;
        let lens: Vec<usize> = io
            .inputs
            .iter()
            .map(|b| size_of(&b.shape[axis..]))
            .collect();
        let rows = size_of(&out.shape[..axis]);
        let row = size_of(&out.shape[axis..]);
        join(ctx, "Concat", (rows, row), io.inputs, &lens, out, io.req[0])
    }
}

impl super::GpuKernel for Stack {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let s = &io.inputs[0].shape;
        let axis = self.axis(s.len())?;
        let len = size_of(&s[axis..]);
        let lens = vec![len; io.inputs.len()];
        let rows = size_of(&s[..axis]);
        let out = &io.outputs[0];
        join(
            ctx,
            "stack",
            (rows, len * lens.len()),
            io.inputs,
            &lens,
            out,
            io.req[0],
        )
    }
}

impl super::GpuKernel for SliceChannel {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let x = &io.inputs[0];
        let axis = self.check(&x.shape)?;
        let rows = size_of(&x.shape[..axis]);
        let row = size_of(&x.shape[axis..]);
        let len = row / self.num_outputs.max(1);
        let lens = vec![len; self.num_outputs];
        split(
            ctx,
            "SliceChannel",
            (rows, row),
            x,
            io.outputs,
            &lens,
            io.req,
        )
    }
}

impl super::GpuKernel for ConcatBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let g = &io.inputs[0];
        let axis = norm_axis(self.dim, g.shape.len(), self.name())?;
        let lens: Vec<usize> = io.inputs[1..]
            .iter()
            .map(|b| size_of(&b.shape[axis..]))
            .collect();
        let rows = size_of(&g.shape[..axis]);
        let row = size_of(&g.shape[axis..]);
        split(ctx, self.name(), (rows, row), g, io.outputs, &lens, io.req)
    }
}

/// The name of `dtype` in the cast kernels' names (`cast_<dst>_<src>`).
fn cast_name(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::F16 => "f16",
        DType::U8 => "u8",
        DType::I8 => "i8",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::Bool => "bool",
    }
}

/// Converts `src` into `out` (same number of elements) with `Cast`'s conversions.
pub(super) fn cast(ctx: &OpContext, src: &TBlob, out: &TBlob, req: OpReq) -> Result<()> {
    if req == OpReq::Null {
        return Ok(());
    }
    if req == OpReq::WriteInplace && src.ptr() == out.ptr() && src.dtype == out.dtype {
        return Ok(());
    }
    let kernel = format!("cast_{}_{}", cast_name(out.dtype), cast_name(src.dtype));
    let n = out.size();
    let args = Args::new()
        .ptr(out.ptr())
        .ptr(src.ptr())
        .arg(n as i64)
        .arg(i32::from(req == OpReq::Add));
    launch_n(ctx, MODULE, &kernel, n, args)
}

impl super::GpuKernel for Cast {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        cast(ctx, &io.inputs[0], &io.outputs[0], io.req[0])
    }
}

impl super::GpuKernel for CastBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        cast(ctx, &io.inputs[0], &io.outputs[0], io.req[0])
    }
}

/// `out = input` (or `+=`) with the data unchanged; nothing to do in place.
pub(super) fn copy_same(
    ctx: &OpContext,
    op: &str,
    input: &TBlob,
    out: &TBlob,
    req: OpReq,
) -> Result<()> {
    if req == OpReq::Null || (req != OpReq::Add && input.ptr() == out.ptr()) {
        return Ok(());
    }
    let kernel = format!("copy_{}", store_suffix(op, out.dtype, req)?);
    let n = out.size();
    let args = Args::new()
        .ptr(out.ptr())
        .ptr(input.ptr())
        .arg(n as i64)
        .arg(i32::from(req == OpReq::Add));
    launch_n(ctx, MODULE, &kernel, n, args)
}

impl super::GpuKernel for Trian {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (src, dst, req) = (&io.inputs[0], &io.outputs[0], io.req[0]);
        if req == OpReq::Null {
            return Ok(());
        }
        let matrices = if self.extract { src } else { dst };
        let n = matrices.shape.last().copied().unwrap_or(0);
        let total = matrices.size();
        if total == 0 {
            return Ok(());
        }
        let kernel = format!("trian_copy_{}", store_suffix(self.name(), dst.dtype, req)?);
        let args = Args::new()
            .ptr(dst.ptr())
            .ptr(src.ptr())
            .arg(total as i64)
            .arg(n as i64)
            .arg(self.offset)
            .arg(i32::from(self.lower))
            .arg(i32::from(self.extract))
            .arg(i32::from(req == OpReq::Add));
        launch_n(ctx, MODULE, &kernel, total, args)
    }
}

impl super::GpuKernel for SameData {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        copy_same(ctx, self.name, &io.inputs[0], &io.outputs[0], io.req[0])
    }
}

impl super::GpuKernel for ReshapeBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        copy_same(ctx, self.name(), &io.inputs[0], &io.outputs[0], io.req[0])
    }
}

impl super::GpuKernel for MakeLoss {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        float_suffix(self.name(), io.inputs[0].dtype)?;
        copy_same(ctx, self.name(), &io.inputs[0], &io.outputs[0], io.req[0])
    }
}

impl super::GpuKernel for MakeLossBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let p = self.0;
        let y = &io.inputs[0];
        check_float(self.name(), "output", y.dtype)?;
        let req = io.req[0];
        if req == OpReq::Null {
            return Ok(());
        }
        let sfx = float_suffix(self.name(), y.dtype)?;
        let out = &io.outputs[0];
        let n = out.size();
        let (scale, count) = match p.normalization {
            Normalization::Null => (p.grad_scale, None),
            Normalization::Batch => {
                let batch = y.shape.first().copied().unwrap_or(1).max(1);
                (p.grad_scale / batch as f64, None)
            }
            Normalization::Valid => {
                // One block counts; the fill reads the count on the device.
                let t = Temp::new(ctx, 8)?;
                let args = Args::new()
                    .ptr(y.ptr())
                    .arg(y.size() as i64)
                    .arg(p.valid_thresh)
                    .ptr(t.ptr());
                let block = super::launch::BLOCK as usize;
                launch_n(ctx, MODULE, &format!("count_above_{sfx}"), block, args)?;
                (p.grad_scale, Some(t))
            }
        };
        let count_ptr = count
            .as_ref()
            .map_or(std::ptr::null(), |t| t.ptr().cast_const());
        let args = Args::new()
            .ptr(out.ptr())
            .arg(n as i64)
            .arg(scale)
            .ptr(count_ptr)
            .arg(i32::from(req == OpReq::Add));
        launch_n(ctx, MODULE, &format!("make_loss_grad_{sfx}"), n, args)
    }
}

/// Registers the GPU kernels of this module.
pub(super) fn register_kernels(k: &mut Kernels) {
    super::add::<Trian>(k);
    super::add::<Concat>(k);
    super::add::<Stack>(k);
    super::add::<SliceChannel>(k);
    super::add::<ConcatBackward>(k);
    super::add::<Cast>(k);
    super::add::<CastBackward>(k);
    super::add::<SameData>(k);
    super::add::<ReshapeBackward>(k);
    super::add::<MakeLoss>(k);
    super::add::<MakeLossBackward>(k);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(len: usize, req: OpReq) -> Part {
        Part {
            ptr: std::ptr::null(),
            len,
            req,
        }
    }

    #[test]
    fn batches_keep_columns_contiguous() {
        let w = OpReq::Write;
        let parts: Vec<Part> = (0..40).map(|i| part(i % 3, w)).collect();
        let b = batches(&parts);
        let lens: Vec<Vec<usize>> = b
            .iter()
            .map(|(_, p)| p.iter().map(|q| q.len).collect())
            .collect();
        assert!(lens
            .iter()
            .all(|l| l.len() <= PARTS && l.iter().all(|&x| x > 0)));
        // 40 parts of 0, 1, 2, 0... columns: 26 not empty, 39 columns, in two launches.
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].0, 0);
        assert_eq!(b[1].0, lens[0].iter().sum::<usize>());
        assert_eq!(lens.iter().flatten().sum::<usize>(), 39);
        let null = [part(2, w), part(3, OpReq::Null), part(4, OpReq::Add)];
        let b = batches(&null);
        assert_eq!(b.len(), 2);
        assert_eq!((b[0].0, b[1].0), (0, 5));
        assert_eq!(std::mem::size_of::<JoinDesc>(), 360);
    }
}
