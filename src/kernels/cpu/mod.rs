//! CPU kernels, grouped by operator family; each family registers its operators.

pub mod add_n;
pub mod array_info;
pub mod binary;
pub mod cumsum;
pub mod fastmath;
pub mod grad;
pub mod histogram;
pub mod indexing;
pub mod init;
pub mod la_dense;
pub mod la_factor;
pub mod linalg;
pub mod map;
pub mod nn;
pub mod num;
pub mod optim;
pub mod random;
pub mod reduce;
pub mod simd;
pub mod sorting;
pub mod special;
#[cfg(test)]
pub mod testing;
pub mod transform;
pub mod trian;
pub mod unary;
pub mod vmath;

use crate::context::DeviceType;
use crate::error::{Error, Result};
pub use crate::kernels::Blobs;
use crate::kernels::Kernels;
use crate::op::{OpContext, Operator};

/// How an operator type computes on the host: the CPU kernel registered for it.
pub trait CpuKernel: Operator + Sized {
    /// Computes `io.outputs` from `io.inputs` as `io.req` says.
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()>;
}

/// Registers `K`'s CPU kernel.
pub fn add<K: CpuKernel>(k: &mut Kernels) {
    k.add::<K>(DeviceType::Cpu, |op, ctx, inputs, outputs, req| {
        let Some(kernel) = op.as_any().downcast_ref::<K>() else {
            return Err(Error::Runtime(format!(
                "{}: the CPU kernel was registered for another operator type",
                op.name()
            )));
        };
        kernel.forward(ctx, Blobs::new(inputs, outputs, req))
    });
}

/// Registers the CPU kernel of every operator.
pub fn register_kernels(k: &mut Kernels) {
    add_n::register_kernels(k);
    array_info::register_kernels(k);
    binary::register_kernels(k);
    cumsum::register_kernels(k);
    histogram::register_kernels(k);
    grad::register_kernels(k);
    indexing::register_kernels(k);
    init::register_kernels(k);
    la_factor::register_kernels(k);
    linalg::register_kernels(k);
    nn::register_kernels(k);
    optim::register_kernels(k);
    random::register_kernels(k);
    reduce::register_kernels(k);
    sorting::register_kernels(k);
    transform::register_kernels(k);
    trian::register_kernels(k);
    unary::register_kernels(k);
}
