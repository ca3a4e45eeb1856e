//! GPU kernels: each launches a CUDA kernel of `src/kernels/cuda/` on the running op's
//! stream; registered beside the CPU kernels under `DeviceType::Gpu`.

mod array_info;
mod conv;
mod ctc;
mod elemwise;
mod grad;
mod index;
mod init;
mod la;
mod lamb;
pub mod launch;
mod linalg;
mod nn;
mod norm;
mod optim;
mod pool;
mod random;
mod reduce;
mod rnn;
mod scan;
mod softmax;
mod sort;
mod temp;
mod vision;
mod xform;

use crate::context::DeviceType;
use crate::error::{Error, Result};
use crate::kernels::cpu::Blobs;
use crate::kernels::Kernels;
use crate::op::elemwise::binary::{Binary, Scalar};
use crate::op::elemwise::unary::Unary;
use crate::op::init::Init;
use crate::op::linalg::{BatchDot, Dot};
use crate::op::nn::dense::{Fc, FcBackward};
use crate::op::random::Random;
use crate::op::{OpContext, Operator};

/// An operator's GPU kernel.
pub trait GpuKernel: Operator {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()>;
}

/// Registers `K`'s GPU kernel.
pub fn add<K: GpuKernel>(k: &mut Kernels) {
    k.add::<K>(DeviceType::Gpu, |op, ctx, inputs, outputs, req| {
        let Some(kernel) = op.as_any().downcast_ref::<K>() else {
            return Err(Error::Runtime(format!(
                "{}: the GPU kernel was registered for another operator type",
                op.name()
            )));
        };
        kernel.forward(ctx, Blobs::new(inputs, outputs, req))
    });
}

/// Registers every GPU kernel.
pub fn register_kernels(k: &mut Kernels) {
    add::<Unary>(k);
    add::<Binary>(k);
    add::<Scalar>(k);
    add::<Init>(k);
    add::<crate::op::array_info::ArrayInfo>(k);
    add::<Dot>(k);
    add::<BatchDot>(k);
    add::<Fc>(k);
    add::<FcBackward>(k);
    add::<Random>(k);
    add::<crate::op::optim::UpdateOp>(k);
    add::<crate::op::optim::MultiUpdateOp>(k);
    add::<crate::op::nn::activation::Activation>(k);
    add::<crate::op::nn::activation::ActivationBackward>(k);
    add::<crate::op::nn::leaky_relu::LeakyRelu>(k);
    add::<crate::op::nn::leaky_relu::LeakyReluBackward>(k);
    add::<crate::op::nn::dropout::Dropout>(k);
    add::<crate::op::nn::dropout::DropoutBackward>(k);
    add::<crate::op::elemwise::add_n::AddN>(k);
    add::<crate::op::elemwise::add_n::AddNBackward>(k);
    add::<crate::op::grad::elemwise::UnaryBackward>(k);
    add::<crate::op::grad::elemwise::ScalarBackward>(k);
    add::<crate::op::grad::binary::BinaryBackward>(k);
    reduce::register_kernels(k);
    softmax::register_kernels(k);
    index::register_kernels(k);
    norm::register_kernels(k);
    conv::register_kernels(k);
    pool::register_kernels(k);
    sort::register_kernels(k);
    random::register_kernels(k);
    xform::register_kernels(k);
    scan::register_kernels(k);
    la::register_kernels(k);
    rnn::register_kernels(k);
    vision::register_kernels(k);
    ctc::register_kernels(k);
    lamb::register_kernels(k);
    add::<crate::op::grad::linalg::DotBackward>(k);
}
