//! CPU kernels of the backward of the operators that read their input through a strided
//! view (transpose, flip, slice, broadcast, tile, repeat...) and of the reshaping
//! operators.
//!
//! The gradient of a gather is a scatter-add through the same view. Two common views have
//! faster forms: a permutation of the input (transpose, flip) is undone by the inverse
//! gather, and a view that only repeats the input in order (broadcast, tile, repeat) is
//! undone by summing over its repeating axes.

use super::{clear_for, reshaped};
use crate::dispatch_num;
use crate::error::Result;
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::reduce::reduce;
use crate::kernels::cpu::transform::copy::{copy_same, gather};
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::grad::view::{GatherBackward, ReshapeBackward};
use crate::op::reduce::ReduceKind;
use crate::op::transform::view::View;
use crate::op::{OpContext, OpReq};
use crate::shape::Shape;

/// `out[view[i]] += g[i]` for every output index `i`, after clearing `out` for a write.
fn scatter(op: &str, g: &TBlob, v: &View, out: &TBlob, req: OpReq) -> Result<()> {
    clear_for(out, req);
    let nd = v.shape.len();
    if nd == 0 {
        dispatch_num!(op, out.dtype, T => {
            let o = &mut out.slice_mut::<T>()[v.offset as usize];
            *o = o.add(g.slice::<T>()[0]);
        });
        return Ok(());
    }
    let inner = v.shape[nd - 1];
    let step = v.strides[nd - 1];
    dispatch_num!(op, out.dtype, T => {
        let (src, dst) = (g.slice::<T>(), out.slice_mut::<T>());
        for (r, row) in src.chunks(inner.max(1)).enumerate() {
            let (mut base, mut rem) = (v.offset, r);
            for ax in (0..nd - 1).rev() {
                base += (rem % v.shape[ax]) as isize * v.strides[ax];
                rem /= v.shape[ax];
            }
            for (j, &x) in row.iter().enumerate() {
                let o = &mut dst[(base + j as isize * step) as usize];
                *o = o.add(x);
            }
        }
    });
    Ok(())
}

impl CpuKernel for GatherBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let (g, out, r) = (&io.inputs[0], &io.outputs[0], io.req[0]);
        if r == OpReq::Null || out.size() == 0 {
            return Ok(());
        }
        if g.size() == 0 {
            clear_for(out, r);
            return Ok(());
        }
        let shapes: Vec<Shape> = io.inputs[1..].iter().map(|b| b.shape.clone()).collect();
        let (_, v) = (self.view)(&shapes)?;
        if let Some(inv) = v.inverse(out.size()) {
            return gather(g, &inv, out, r);
        }
        if let Some(mask) = v.repeating_axes(out.size()) {
            return reduce(
                self.name,
                ReduceKind::Sum,
                &reshaped(g, &v.shape),
                &mask,
                out,
                r,
            );
        }
        scatter(self.name, g, &v, out, r)
    }
}

impl CpuKernel for ReshapeBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        copy_same(&io.inputs[0], &io.outputs[0], io.req[0])
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<GatherBackward>(k);
    cpu::add::<ReshapeBackward>(k);
}
