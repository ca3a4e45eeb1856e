//! CPU kernels of the backward of the indexing and sorting operators: the output gradient
//! added back at the positions the forward read from (`take`, `pick`, `gather_nd`,
//! `topk`, `sort`), routed by the condition (`where`) or cast back (`Cast`).

use super::{clear_for, Scratch};
use crate::dispatch_num;
use crate::dtype::DType;
use crate::error::Result;
use crate::kernels::cpu::indexing::{
    cast_blob, fix_index, nd_layout, nd_offsets, read_indices, truth,
};
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::grad::indexing::{
    CastBackward, GatherNdBackward, PickBackward, TakeBackward, TopkBackward, WhereBackward,
};
use crate::op::indexing::IndexMode;
use crate::op::{OpContext, OpReq, Operator};
use crate::shape::{norm_axis, size_of};

/// `out[pos[r] * inner ..][..inner] += g[r * inner ..][..inner]` for every row `r`, after
/// clearing `out` for a write.
fn scatter_rows(
    op: &str,
    g: &TBlob,
    pos: &[usize],
    inner: usize,
    out: &TBlob,
    req: OpReq,
) -> Result<()> {
    if req == OpReq::Null {
        return Ok(());
    }
    clear_for(out, req);
    dispatch_num!(op, out.dtype, T => {
        let (src, dst) = (g.slice::<T>(), out.slice_mut::<T>());
        for (r, &p) in pos.iter().enumerate() {
            let d = &mut dst[p * inner..(p + 1) * inner];
            for (o, &v) in d.iter_mut().zip(&src[r * inner..(r + 1) * inner]) {
                *o = o.add(v);
            }
        }
    });
    Ok(())
}

/// `shape` seen as (outer, n, inner) around `axis` (negative counts from the end).
fn around_axis(op: &str, shape: &[usize], axis: i64) -> Result<(usize, usize, usize)> {
    let ax = norm_axis(axis, shape.len(), op)?;
    Ok((size_of(&shape[..ax]), shape[ax], size_of(&shape[ax + 1..])))
}

/// The indices in `b` fixed for an axis of length `n` as `mode` says; an index the mode
/// rejects counts as 0.
fn fixed_indices(b: &TBlob, n: usize, mode: IndexMode) -> impl Iterator<Item = usize> {
    read_indices(b)
        .into_iter()
        .map(move |i| fix_index(i, n, mode).unwrap_or(0))
}

impl CpuKernel for TakeBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let (g, a) = (&io.inputs[0], &io.inputs[2]);
        let (outer, n, inner) = around_axis(self.name(), &a.shape, self.axis)?;
        let idx: Vec<usize> = fixed_indices(&io.inputs[1], n, self.mode).collect();
        let pos: Vec<usize> = (0..outer)
            .flat_map(|o| idx.iter().map(move |&j| o * n + j))
            .collect();
        scatter_rows(self.name(), g, &pos, inner, &io.outputs[0], io.req[0])
    }
}

impl CpuKernel for PickBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let (g, data) = (&io.inputs[0], &io.inputs[1]);
        let (_, n, inner) = around_axis(self.name(), &data.shape, self.axis)?;
        let pos: Vec<usize> = fixed_indices(&io.inputs[2], n, self.mode)
            .enumerate()
            .map(|(r, j)| ((r / inner) * n + j) * inner + r % inner)
            .collect();
        scatter_rows(self.name(), g, &pos, 1, &io.outputs[0], io.req[0])
    }
}

impl CpuKernel for WhereBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let (g, c) = (&io.inputs[0], truth(&io.inputs[1]));
        // A 1-d condition selects whole rows.
        let row = if c.is_empty() { 1 } else { g.size() / c.len() }.max(1);
        for (k, (out, &r)) in io.outputs.iter().zip(io.req).enumerate() {
            if r == OpReq::Null {
                continue;
            }
            let want = k == 0;
            let add = r == OpReq::Add;
            dispatch_num!(self.name(), out.dtype, T => {
                let (src, dst) = (g.slice::<T>(), out.slice_mut::<T>());
                for (i, (o, &v)) in dst.iter_mut().zip(src).enumerate() {
                    let v = if c[i / row] == want { v } else { T::ZERO };
                    *o = if add { o.add(v) } else { v };
                }
            });
        }
        Ok(())
    }
}

impl CpuKernel for CastBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        cast_blob(&io.inputs[0], &io.outputs[0], io.req[0]);
        Ok(())
    }
}

impl CpuKernel for GatherNdBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let (g, idx, data) = (&io.inputs[0], &io.inputs[1], &io.inputs[2]);
        let m = idx.shape[0];
        let (strides, inner) = nd_layout(&data.shape, m);
        let pos = nd_offsets(self.name(), idx, m, &data.shape, &strides)?;
        scatter_rows(self.name(), g, &pos, inner, &io.outputs[0], io.req[0])
    }
}

impl CpuKernel for TopkBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (g, data) = (&io.inputs[0], &io.inputs[1]);
        let idx = Scratch::new(&g.shape, DType::I64);
        // Where each kept value came from, as the index-returning forward op says.
        let (ins, outs) = (std::slice::from_ref(data), std::slice::from_ref(&idx.blob));
        let order = Blobs::new(ins, outs, &[OpReq::Write]);
        crate::kernels::run_kernel(self.order.as_ref(), ctx, order)?;
        let (n, inner) = match self.axis {
            None => (data.size(), 1),
            Some(a) => {
                let (_, n, inner) = around_axis(self.name(), &data.shape, a)?;
                (n, inner)
            }
        };
        // Values kept per lane.
        let kk = g.size() / (data.size() / n.max(1)).max(1);
        let pos: Vec<usize> = idx
            .blob
            .slice::<i64>()
            .iter()
            .enumerate()
            .map(|(r, &j)| {
                let (o, rest) = (r / (kk * inner), r % inner);
                (o * n + j as usize) * inner + rest
            })
            .collect();
        scatter_rows(self.name(), g, &pos, 1, &io.outputs[0], io.req[0])
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<TakeBackward>(k);
    cpu::add::<PickBackward>(k);
    cpu::add::<WhereBackward>(k);
    cpu::add::<CastBackward>(k);
    cpu::add::<GatherNdBackward>(k);
    cpu::add::<TopkBackward>(k);
}
