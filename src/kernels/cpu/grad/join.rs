//! CPU kernels of the backward of `Concat`: the output gradient cut back into the inputs'
//! pieces. (`stack` and `SliceChannel` are each other's backward and need no kernel of
//! their own.)

use crate::error::Result;
use crate::kernels::cpu::transform::copy::gather;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::grad::join::ConcatBackward;
use crate::op::transform::view::View;
use crate::op::{OpContext, Operator};
use crate::shape::norm_axis;

impl CpuKernel for ConcatBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let g = &io.inputs[0];
        let axis = norm_axis(self.dim, g.shape.len(), self.name())?;
        let base = View::of(&g.shape);
        let mut start = 0usize;
        for ((out, &r), x) in io.outputs.iter().zip(io.req).zip(&io.inputs[1..]) {
            let len = x.shape[axis];
            let mut v = base.clone();
            v.shape[axis] = len;
            v.offset = start as isize * v.strides[axis];
            gather(g, &v, out, r)?;
            start += len;
        }
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<ConcatBackward>(k);
}
