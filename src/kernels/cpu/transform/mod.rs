//! CPU kernels of the transform operators: reshaping, transposing, joining, splitting,
//! slicing, tiling and broadcasting arrays; they move bytes and so work for every dtype.

use crate::error::Result;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::transform::Gather;
use crate::op::OpContext;
use crate::shape::Shape;
use copy::gather;

mod broadcast;
pub mod copy;
mod join;
mod layout;
mod reshape;
mod slice;

impl CpuKernel for Gather {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let shapes: Vec<Shape> = io.inputs.iter().map(|b| b.shape.clone()).collect();
        let (_, v) = (self.view)(&shapes)?;
        gather(&io.inputs[0], &v, &io.outputs[0], io.req[0])
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    join::register_kernels(k);
    reshape::register_kernels(k);
    cpu::add::<Gather>(k);
}
